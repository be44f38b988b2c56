# SPDX-License-Identifier: MIT
"""`gpumon show` on a terminal (tmux panes of several sizes): no line wraps, the columns that go
first when the pane is narrow, colour and NO_COLOR; then without a terminal: --json against its
schema, --user, --sort, --no-processes, COLUMNS."""
import json
import os
import re
import textwrap

import pytest

from conftest import SOURCE_DIR, USER, Pane, base_env, gpumon, owners_proc, GPUMON_BIN

SCHEMA = os.path.join(SOURCE_DIR, "docs/show.schema.json")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def scenario(pids, extra=""):
    """Two GPUs (one with a long name), our sleepers on them and two pids of another namespace."""
    a, b, c = pids
    return textwrap.dedent(f"""\
        gpu 0 name="NVIDIA H200" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 total=140GiB reserved=615MiB used=100GiB util=35 memutil=12 temp=41 power=127790
        gpu 1 name="NVIDIA A100-SXM4-80GB-with-a-long-name" uuid=GPU-11111111-2222-3333-4444-555555555555 bus=00000000:0B:00.0 total=80GiB reserved=512MiB used=70GiB util=97 memutil=40 temp=83 power=350000
        proc 0 {a} used=40GiB
        proc 0 {b} used=2GiB
        proc 1 {c} used=30GiB
        proc 1 {b} used=1GiB
        proc 0 4194000 used=15GiB
        proc 1 4194001 used=na type=graphics
        """) + extra


@pytest.fixture
def procs(tmp_path):
    """Three real processes with long command lines (sleep adds its arguments up)."""
    import subprocess
    ps = [subprocess.Popen(["sleep", str(600 + i)] + ["0"] * 40) for i in range(3)]
    yield [p.pid for p in ps]
    for p in ps:
        p.kill()
        p.wait()


def sgr_before(screen, text):
    """The SGR parameters in force where text starts (tmux writes its own sequences: 1;31 may come
    back as 1 then 31)."""
    m = re.search(r"((?:\x1b\[[0-9;]*m)+)" + re.escape(text), screen)
    assert m, f"{text!r} without colour in:\n{screen}"
    return set(";".join(re.findall(r"\[([0-9;]*)m", m.group(1))).split(";"))


def show_in_pane(tmp_path, name, args, scn, width, height, env=None):
    path = tmp_path / f"{name}.scn"
    path.write_text(scn)
    e = base_env(dict(env or {}, FAKE_NVML_SCENARIO=str(path)))
    pane = Pane(tmp_path, name)
    pane.start([GPUMON_BIN, "show"] + list(args), e, width, height)
    return pane


def output_lines(pane, joined=False):
    """The lines gpumon printed, as the pane holds them (joined: wrapped rows joined again)."""
    pane.exit_status()
    args = ["capture-pane", "-p", "-t", pane.name] + (["-J"] if joined else [])
    text = pane.tmux(*args).stdout
    lines = [l.rstrip() for l in text.split("\n")]  # -J keeps trailing blanks, plain capture drops them
    end = next(i for i, l in enumerate(lines) if l.startswith("EXIT="))
    return lines[:end - 1]  # the blank line the pane's shell adds before EXIT=


@pytest.mark.parametrize("width,height", [(80, 24), (120, 40), (50, 30)])
def test_no_line_wraps(tmp_path, procs, width, height):
    pane = show_in_pane(tmp_path, f"s{width}", [], scenario(procs), width, height,
                        env={"COLUMNS": "200"})  # the terminal's width wins over COLUMNS
    try:
        assert pane.exit_status() == 0
        rows = output_lines(pane)
        # a wrapped line is two rows of the pane and one line once tmux joins them
        assert rows == output_lines(pane, joined=True)
        assert all(len(r) <= width for r in rows), rows
        text = "\n".join(rows)
        assert "Processes holding GPU memory (largest first)" in text
        head = next(r for r in rows if "PID" in r and "MEMORY" in r)
        table = rows[rows.index(head) + 1:]
        assert len(table) == 6
        if width >= 80:  # every column; the command is cut to fit
            assert head.split() == ["GPU", "PID", "USER", "MEMORY", "COMMAND"]
            assert table[0].split()[:4] == ["0", str(procs[0]), USER[:10], "40.0"]
            assert "sleep 600 0 0" in table[0]
        else:  # the user column goes before the command gets narrower than 20 columns
            assert head.split() == ["GPU", "PID", "MEMORY", "COMMAND"]
            assert table[0].split()[:3] == ["0", str(procs[0]), "40.0"]
        if width >= 120:
            assert "GPU 1  NVIDIA A100-SXM4-80GB-with-a-long-name  00000000:0B:00.0  GPU-1111" in text
            assert re.search(r"memory \[[%#.]{40}\] 100 GiB used \+ 615 MiB reserved of 140 GiB", text)
        assert "[graphics]" in table[-1]  # the mark is never the part that is cut
    finally:
        pane.close()


def test_colour_on_a_terminal_and_no_color(tmp_path, procs):
    panes = [show_in_pane(tmp_path, "c0", [], scenario(procs), 100, 30),
             show_in_pane(tmp_path, "c1", [], scenario(procs), 100, 30, env={"NO_COLOR": "1"}),
             show_in_pane(tmp_path, "c2", ["--color=never"], scenario(procs), 100, 30)]
    try:
        for p in panes:
            assert p.exit_status() == 0
        coloured = panes[0].screen(escapes=True)
        assert SGR.search(coloured)
        # a GPU over 80 % full shows its used memory in bold red, one under 80 % (71 %) in yellow
        assert sgr_before(coloured, "70.0 GiB") >= {"1", "31"}
        assert "33" in sgr_before(coloured, "100 GiB") and "31" not in sgr_before(coloured, "100 GiB")
        for p in panes[1:]:
            plain = p.screen(escapes=True)
            assert "Processes holding GPU memory" in plain and not SGR.search(plain)
    finally:
        for p in panes:
            p.close()


# ---- without a terminal ---------------------------------------------------------------------------

def run_show(tmp_path, args, scn, env=None):
    path = tmp_path / "s.scn"
    path.write_text(scn)
    r = gpumon(["show"] + list(args), path, env)
    return r


def test_json_matches_its_schema(tmp_path, procs):
    jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema (make deps-test installs it)")
    schema = json.load(open(SCHEMA))
    jsonschema.Draft202012Validator.check_schema(schema)
    check = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    scn = scenario(procs, "error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=1\n")
    r = run_show(tmp_path, ["--json"], scn)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    check.validate(doc)
    g0, g1 = doc["gpus"]
    assert g0["memory_used_bytes"] == 100 << 30 and g0["memory_reserved_bytes"] == 615 << 20
    assert g0["power_mw"] == 127790 and g1["power_mw"] is None  # unknown is null, never 0
    assert doc["gpu_count"] == 2 and doc["sort"] == "memory" and doc["user"] is None
    ps = doc["processes"]
    assert [p["pid"] for p in ps] == [procs[0], procs[2], 4194000, procs[1], procs[1], 4194001]
    assert ps[0]["user"] == USER and ps[0]["command"].startswith("sleep 600 0") and ps[0]["owner"] is None
    foreign = ps[-1]
    assert foreign["used_bytes"] is None and foreign["user"] is None and foreign["other_pid_namespace"] is True
    assert foreign["type"] == "graphics"
    # the other documents validate too: no processes, a lost GPU, the v1 driver's figures
    for args, extra in [(["--no-processes"], ""), ([], "lost 1\n"), (["--user", USER, "--sort", "user"], "")]:
        r = run_show(tmp_path, ["--json"] + args, scenario(procs, extra))
        check.validate(json.loads(r.stdout))
    assert json.loads(run_show(tmp_path, ["--json", "-P"], scenario(procs)).stdout)["processes"] is None
    r = run_show(tmp_path, ["--json"], scenario(procs, "lost 1\n"))
    assert r.returncode == 15 and json.loads(r.stdout)["gpus"][1]["lost"] is True


def table(stdout):
    lines = stdout.splitlines()
    head = next(i for i, l in enumerate(lines) if "PID" in l.split() and "MEMORY" in l.split())
    return [l.split() for l in lines[head + 1:]]


def test_user_sort_and_no_processes(tmp_path, procs):
    scn = scenario(procs)
    r = run_show(tmp_path, ["--user", USER], scn)
    assert r.returncode == 0, r.stderr
    assert f"Processes of {USER} holding GPU memory" in r.stdout
    assert [row[1] for row in table(r.stdout)] == [str(procs[0]), str(procs[2]), str(procs[1]), str(procs[1])]
    assert [row[1] for row in table(run_show(tmp_path, ["--user", str(os.getuid())], scn).stdout)] == \
        [str(procs[0]), str(procs[2]), str(procs[1]), str(procs[1])]
    r = run_show(tmp_path, ["--user", "nobody-here"], scn)
    assert r.stdout.rstrip().endswith("  none")
    rows = table(run_show(tmp_path, ["--sort", "pid"], scn).stdout)
    pids = [int(row[1]) for row in rows]
    assert pids == sorted(pids)
    rows = table(run_show(tmp_path, ["--sort=gpu"], scn).stdout)
    assert [row[0] for row in rows] == ["0", "0", "0", "1", "1", "1"]
    assert [row[1] for row in rows[:3]] == [str(procs[0]), "4194000", str(procs[1])]  # then largest first
    rows = table(run_show(tmp_path, ["-s", "user"], scn).stdout)
    assert [row[2] for row in rows] == [USER[:10]] * 4 + ["n/a", "n/a"]  # unknown users last
    r = run_show(tmp_path, ["--no-processes"], scn)
    assert r.returncode == 0 and "Processes" not in r.stdout and "GPU 1" in r.stdout
    for bad in (["--sort", "size"], ["--color=sometimes"], ["--user", ""]):
        r = run_show(tmp_path, bad, scn)
        assert r.returncode == 2 and r.stderr.startswith("gpumon: ") and r.stdout == ""


def test_width_without_a_terminal(tmp_path, procs):
    scn = scenario(procs)
    r = run_show(tmp_path, [], scn)  # not a terminal, no COLUMNS: 80
    assert max(len(l) for l in r.stdout.splitlines()) == 80  # the command is cut at the edge
    r = run_show(tmp_path, [], scn, env={"COLUMNS": "40"})
    assert max(len(l) for l in r.stdout.splitlines()) <= 40
    assert table(r.stdout)[0][:2] == [str(procs[0]), "40.0"]  # GPU and USER left out
    r = run_show(tmp_path, [], scn, env={"COLUMNS": "200"})
    assert "GPU 1  NVIDIA A100-SXM4-80GB-with-a-long-name  00000000:0B:00.0  GPU-1111" in r.stdout
    assert not SGR.search(r.stdout)  # no colour into a pipe
    assert SGR.search(run_show(tmp_path, ["--color=always"], scn).stdout)


def test_no_owner_column_without_an_owner(tmp_path, procs):
    r = run_show(tmp_path, [], scenario(procs), env={"COLUMNS": "200"})
    assert "OWNER" not in r.stdout


def test_documented_examples_run(tmp_path, procs):
    """The examples of show in gpumon(1) and `show --help`'s options."""
    scn = scenario(procs)
    for args in (["--user", "alice", "--sort", "pid"], ["--json"], ["-u", USER, "-s", "gpu", "-P"],
                 ["--color"], ["--colour=never"]):
        r = run_show(tmp_path, args, scn)
        assert r.returncode == 0, (args, r.stderr)
    r = run_show(tmp_path, ["--help"], scn)
    for opt in ["--user", "--sort", "--no-processes", "--json", "--color", "NO_COLOR", "COLUMNS"]:
        assert opt in r.stdout, opt


def test_memory_health_warning(tmp_path, procs):
    """A card whose memory needs attention gets one warning line a problem (red on a terminal), its
    figures and problems in --json; a clean card and a driver without the health calls get none."""
    jsonschema = pytest.importorskip("jsonschema", reason="python3-jsonschema (make deps-test installs it)")
    check = jsonschema.Draft202012Validator(json.load(open(SCHEMA)))
    scn = scenario(procs).replace("temp=83 power=350000", "temp=83 power=350000 ecc_uv_total=3 remap_pending=on")
    r = run_show(tmp_path, [], scn, {"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    warn = [l for l in r.stdout.splitlines() if "memory health" in l]
    assert warn == ["  ! memory health: 3 uncorrectable ECC errors since the driver loaded",
                    "  ! memory health: a row remapping waits for a GPU reset"]
    lines = r.stdout.splitlines()
    assert lines.index(warn[0]) > next(i for i, l in enumerate(lines) if l.startswith("GPU 1"))  # under GPU 1
    doc = json.loads(run_show(tmp_path, ["--json"], scn).stdout)
    check.validate(doc)
    h0, h1 = doc["gpus"][0]["memory_health"], doc["gpus"][1]["memory_health"]
    assert h0["problems"] == [] and h0["ecc_uncorrected_volatile"] == 0
    assert h1["problems"] == ["ecc_uncorrected", "remapped_rows_pending"] and h1["ecc_uncorrected_volatile"] == 3
    assert h1["retired_pages_pending"] is None  # the H200 has no page retirement: null, never false
    colour = run_show(tmp_path, ["--color=always"], scn)
    assert "\x1b[1;31m  ! memory health: 3 uncorrectable" in colour.stdout
    clean = run_show(tmp_path, [], scenario(procs))
    assert "memory health" not in clean.stdout


def test_memory_health_without_the_calls(tmp_path, procs):
    """The oldest drivers have no health calls: no warning, and every figure null in --json."""
    from conftest import FAKE_NVML_LIB
    v1 = FAKE_NVML_LIB.replace("libnvidia-ml-fake.so", "libnvidia-ml-fake-v1.so")
    assert os.path.exists(v1), v1
    scn = scenario(procs).replace("temp=83 power=350000", "temp=83 power=350000 ecc_uv_total=3")
    r = run_show(tmp_path, ["--json"], scn, {"GPUMON_NVML_LIBRARY": v1})
    assert r.returncode == 0, r.stderr
    h = json.loads(r.stdout)["gpus"][1]["memory_health"]
    assert h["problems"] == [] and h["ecc_uncorrected_volatile"] is None and h["remapped_rows_pending"] is None
    assert "memory health" not in run_show(tmp_path, [], scn, {"GPUMON_NVML_LIBRARY": v1}).stdout


def test_owner_column_names_pod_and_slurm_job(tmp_path):
    """Processes of a pod and of a Slurm job (a /proc tree of our own through GPUMON_PROC_ROOT, the
    pod names from a pods directory through GPUMON_PODS_DIR): the OWNER column names each, the
    same phrase --json gives, and a narrow terminal cuts the command before the owner."""
    scn = "gpu 0 name=\"NVIDIA H200\" total=140GiB used=30GiB\nproc 0 4101 used=20GiB\nproc 0 4102 used=10GiB\n"
    env = dict(owners_proc(tmp_path), COLUMNS="120")
    r = run_show(tmp_path, [], scn, env)
    assert r.returncode == 0, r.stderr
    rows = table(r.stdout)
    assert "OWNER" in r.stdout
    assert rows[0][1] == "4101" and "pod ml-team/trainer-7f9c6d-x2k4q python train.py" in " ".join(rows[0])
    assert rows[1][1] == "4102" and "slurm job 4242.0 python train.py" in " ".join(rows[1])
    narrow = run_show(tmp_path, [], scn, dict(env, COLUMNS="80")).stdout
    assert all(len(l) <= 80 for l in narrow.splitlines())
    assert "pod ml-team/trainer-" in narrow and "slurm job 4242.0" in narrow
    doc = json.loads(run_show(tmp_path, ["--json"], scn, env).stdout)
    assert [p["owner"] for p in doc["processes"]] == ["pod ml-team/trainer-7f9c6d-x2k4q", "slurm job 4242.0"]
