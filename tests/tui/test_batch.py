# SPDX-License-Identifier: MIT
"""`gpumon watch --batch`: plain-text snapshots without a terminal, as `top -b` prints them: the GPU
lines and the process table with the screen's columns and leak marks. What it marks is the run
model's verdict, so it says what the model's document says of the same records."""
import os
import re
import subprocess

from conftest import BUNDLED, GPUMON_BIN, SOURCE_DIR, base_env, gpumon, model_document

TRACES = os.path.join(SOURCE_DIR, "examples/traces")
UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def snapshots(out):
    """The snapshots of a batch output, each a list of lines (a blank line ends each)."""
    assert out.endswith("\n\n"), out[-200:]
    return [s.splitlines() for s in out[:-2].split("\n\n")]


def rows(snap):
    """The process rows under the table's header: (mark, gpu, pid, user, memory, chg, leak, command)."""
    start = next(i for i, l in enumerate(snap) if re.match(r"^\s+GPU\s+PID USER\s+MEMORY\s+CHG/MIN\s+LEAK/MIN COMMAND$", l))
    out = []
    for l in snap[start + 1:]:
        if not re.match(r"^[! ] +\d+ +\d+ ", l):
            break
        out.append((l[0], int(l[2:5]), int(l[6:13]), l[14:24].strip(), l[25:35].strip(), l[36:46].strip(),
                    l[47:57].strip(), l[58:]))
    return out


def size(text):
    m = re.fullmatch(r"([+-]?)([\d.]+) (B|KiB|MiB|GiB|TiB)", text)
    assert m, text
    return (-1 if m.group(1) == "-" else 1) * float(m.group(2)) * UNITS[m.group(3)]


SCN = """\
gpu 0 name="NVIDIA H100 80GB HBM3" total=80GiB reserved=512MiB used=20GiB util=95 memutil=40 temp=62 power=550000
gpu 1 name="NVIDIA H100 80GB HBM3" total=80GiB reserved=512MiB used=75GiB util=30 memutil=10 temp=45
proc 0 4190001 used=20GiB
proc 1 4190002 used=74GiB
proc 1 4190003 used=512MiB
error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=1
"""


def run_batch(tmp_path, args, scenario=SCN, timeout=60):
    scn = tmp_path / "batch.scn"
    scn.write_text(scenario)
    return gpumon(["watch", "--batch"] + list(args), scn, timeout=timeout)


def test_batch_prints_snapshots_as_plain_text(tmp_path):
    r = run_batch(tmp_path, ["-n", "3", "--interval", "100"])
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout  # no escape codes, no curses
    snaps = snapshots(r.stdout)
    assert len(snaps) == 3
    for s in snaps:
        assert re.match(r"^gpumon watch  live on \S+  \d\d:\d\d:\d\d  every 100 ms  2 GPUs  3 procs$", s[0]), s[0]
    s = snaps[-1]
    assert "GPU 0  NVIDIA H100 80GB HBM3  util  95 %  mem-util  40 %   62 C   550.0 W" in s
    assert "  20.0 GiB used + 512 MiB rsv / 80.0 GiB  25 %" in s
    assert "GPU 1  NVIDIA H100 80GB HBM3  util  30 %  mem-util  10 %   45 C  power n/a" in s
    # a nearly full GPU says who holds it, as on the screen
    assert any(l.startswith(" nearly full (93 %): pid 4190002 n/a 74.0 GiB") for l in s), s
    # the screen's columns, largest first; nobody leaks
    assert [(m, g, p, mem) for m, g, p, _, mem, *_ in rows(s)] == [
        (" ", 1, 4190002, "74.0 GiB"), (" ", 0, 4190001, "20.0 GiB"), (" ", 1, 4190003, "512 MiB")]
    assert all(row[7] == "(other PID namespace)" for row in rows(s))
    assert not any("LEAK suspected" in l for l in s)


def test_batch_with_id_shows_the_picked_gpus(tmp_path):
    r = run_batch(tmp_path, ["-n", "1", "-i", "1"])
    assert r.returncode == 0, r.stderr
    s = snapshots(r.stdout)[0]
    assert "1 of 2 GPUs" in s[0]
    assert not any(l.startswith("GPU 0 ") for l in s) and any(l.startswith("GPU 1 ") for l in s)
    assert [row[2] for row in rows(s)] == [4190002, 4190003]


def test_batch_stops_on_sigterm(tmp_path):
    scn = tmp_path / "batch.scn"
    scn.write_text(SCN)
    p = subprocess.Popen([GPUMON_BIN, "watch", "-b", "--interval", "100"], env={**base_env(), "FAKE_NVML_SCENARIO": str(scn)},
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    first = p.stdout.readline()
    assert first.startswith("gpumon watch  live on"), first + p.stderr.read()
    p.terminate()
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err


def test_batch_replay_at_speed_0_prints_the_end(tmp_path):
    """The end of a run that leaks: the mark, LEAK/MIN and "full in" are the model's document's."""
    path = os.path.join(TRACES, "leak_30s.gpumon")
    r = gpumon(["watch", "-b", "--replay", path, "--speed", "0"])
    assert r.returncode == 0, r.stderr
    snaps = snapshots(r.stdout)
    assert len(snaps) == 1  # as fast as it can: only the end is printed
    s = snaps[0]
    assert re.match(r"^gpumon watch  REPLAY of leak_30s\.gpumon  END of recording 00:57 / 00:57  1 GPU  1 proc$", s[0]), s[0]
    assert s[1].startswith("RECORDING of vm, ") and "trainer.py custom --leak-kib 4096" in s[1]
    doc = model_document(path)
    verdicts = {(v["series"]["dev"], v["series"]["pid"]): v for v in doc["series"] if v["series"]["kind"] == "process"}
    shown = rows(s)
    assert [row[2] for row in shown] == [1053]
    for mark, gpu, pid, user, mem, chg, leak, cmd in shown:
        v = verdicts[(gpu, pid)]
        assert mark == ("!" if v["alert"] else " ")
        assert v["verdict"] == "leak" and v["alert"]
        per_min = v["rate_bytes_per_second"] * 60
        assert abs(size(leak) - per_min) <= 0.005 * per_min, (leak, per_min)
        line = next(l for l in s if l.startswith(f"pid {pid} on GPU {gpu}: LEAK suspected"))
        assert f", full in ~{v['seconds_to_oom'] / 60:.0f} min: " in line, (line, v["seconds_to_oom"])


def test_batch_replay_of_a_clean_run(tmp_path):
    """A run without a leak, played fast: its job is listed and never marked, as the document says."""
    path = os.path.join(TRACES, "clean_30s.gpumon")
    doc = model_document(path)
    assert not any(v["alert"] for v in doc["series"] if v["series"]["kind"] == "process")
    r = gpumon(["watch", "-b", "--replay", path, "--speed", "64", "--interval", "50"])
    assert r.returncode == 0, r.stderr
    snaps = snapshots(r.stdout)
    listed = [row for s in snaps for row in rows(s)]
    assert listed and {row[2] for row in listed} == {1110}
    assert all(row[0] == " " and row[6] == "" for row in listed)
    assert not any("LEAK suspected" in l for s in snaps for l in s)


def test_batch_replay_plays_to_its_end(tmp_path):
    """At a speed, a snapshot every interval of the wall clock, then the end."""
    r = gpumon(["watch", "-b", "--replay", BUNDLED, "--speed", "64", "--interval", "200"])
    assert r.returncode == 0, r.stderr
    snaps = snapshots(r.stdout)
    assert 2 <= len(snaps) <= 12, len(snaps)  # 53 s at 64x: under a second of wall time
    assert all("REPLAY of h200_train_leak.gpumon" in s[0] for s in snaps)
    assert "END of recording 00:53 / 00:53" in snaps[-1][0] and "END" not in snaps[0][0]
    r = gpumon(["watch", "-b", "-n", "1", "--replay", BUNDLED])
    assert r.returncode == 0 and len(snapshots(r.stdout)) == 1 and "00:00 / 00:53  speed 1x" in r.stdout


def test_fast_leak_is_marked_within_30_s(tmp_path):
    """200 MiB a second from 3 s on, at the default refresh (1 s): the model's windows are measured
    in time, so the mark comes within 30 s of the start of the growth, not after 64 refreshes."""
    scn = """\
gpu 0 name=G total=80GiB used=10GiB
proc 0 4190010 used=2GiB name=steady
at 3 proc 0 4190011 used=1GiB grow=200MiB name=leaky
"""
    # snapshots at 0.15 s and then every second: the 33rd is at ~32.2 s, 29.2 s after the start
    r = run_batch(tmp_path, ["-n", "33"], scenario=scn, timeout=120)
    assert r.returncode == 0, r.stderr
    snaps = snapshots(r.stdout)
    assert len(snaps) == 33
    marked = [i for i, s in enumerate(snaps) if any(row[0] == "!" and row[2] == 4190011 for row in rows(s))]
    assert marked, "\n".join(snaps[-1])
    assert not any(row[0] == "!" and row[2] == 4190010 for s in snaps for row in rows(s))
    last = rows(snaps[-1])
    leak = next(row for row in last if row[2] == 4190011)
    assert abs(size(leak[6]) - 200 * 60 * (1 << 20)) < 0.02 * 200 * 60 * (1 << 20), leak  # +11.7 GiB a minute
    # once marked it stays marked
    assert marked == list(range(marked[0], 33)), marked


def test_batch_usage(tmp_path):
    r = gpumon(["watch", "-b"], env={"GPUMON_NVML_LIBRARY": str(tmp_path / "none.so")})
    assert r.returncode == 12 and "--batch needs the driver (or --replay FILE)" in r.stderr
    r = gpumon(["watch", "-b", "--replay", str(tmp_path / "missing.gpumon")])
    assert r.returncode != 0 and "missing.gpumon" in r.stderr
    r = gpumon(["watch", "--help"])
    assert r.returncode == 0 and "-b, --batch" in r.stdout and "-n N" in r.stdout and "0: as fast as it can" in r.stdout
