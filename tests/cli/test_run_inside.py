# SPDX-License-Identifier: MIT
"""`gpumon run`'s inside view, gpumon's side of it: the bootstrap written as the job's
sitecustomize.py in the run's private directory and the variables that put it first on the job's
Python path (none of them with --no-inside), --history, the socket's `oom`, `snapshot` and `inside`
messages turned into events (and refused when malformed), and the allocator's lines on the job's
stderr kept as oom_detail events, the whole out-of-memory message in the `oom` event."""
import json
import os
import re
import shutil
import subprocess
import textwrap

import pytest

from conftest import GPUMON, GPUMON_BIN, WRAPPER
from test_completion import bash_complete, env as completion_env  # noqa: F401 (a fixture)
from test_run import PY, WIDE, environment, open_recording, run, said

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BOOTSTRAP = os.path.join(ROOT, "python/gpumon/_bootstrap.py")
FIXTURES = os.path.join(ROOT, "tests/fixtures/oom")
MAX_BYTES = (1 << 50) - 1  # GPUMON_MAX_BYTES
INSIDE_VARS = ("GPUMON_INSIDE", "GPUMON_INSIDE_HISTORY", "GPUMON_INSIDE_PYTHONPATH")


def events(path, kind):
    db = open_recording(path)
    return [t for (t,) in db.execute("select text from events where kind = ? order by t_ns", (kind,))]


def settings(path):
    meta = dict(open_recording(path).execute("select key, value from meta"))
    return meta["settings"].splitlines(), int(meta["job_pid"])


# ---- the bootstrap and the job's environment ---------------------------------------------------------

# The job tells what it got: its variables, its sys.path, the bootstrap's directory as it found it.
SHOW_ENV = textwrap.dedent("""
    import json, os, stat, sys
    d = os.path.dirname(os.environ["GPUMON_RUN_SOCKET"])
    site = os.path.join(d, "sitecustomize.py")
    cache = os.path.join(d, "__pycache__")
    print(json.dumps({
        "env": {k: v for k, v in os.environ.items() if k == "PYTHONPATH" or k.startswith("GPUMON_INSIDE")},
        "dir": d, "mode": stat.S_IMODE(os.stat(d).st_mode), "listing": sorted(os.listdir(d)),
        "bootstrap": open(site, "rb").read().decode() if os.path.exists(site) else None,
        "cached": sorted(os.listdir(cache)) if os.path.isdir(cache) else [], "path": sys.path}))
""")


def run_env(tmp_path, args=(), pythonpath=None, extra=None, out="r.gpumon", program=None):
    """gpumon run ARGS -- python -c SHOW_ENV with PYTHONPATH (None: unset) and extra variables;
    program: another copy of gpumon to run."""
    e = environment(tmp_path)
    e.pop("PYTHONPATH", None)
    e.pop("PYTHONDONTWRITEBYTECODE", None)  # Python writes __pycache__ beside the bootstrap: removed too
    if pythonpath is not None:
        e["PYTHONPATH"] = pythonpath
    e.update(extra or {})
    e["TMPDIR"] = str(tmp_path)
    gpumon = WRAPPER + [str(program)] if program else GPUMON
    r = subprocess.run([*gpumon, "run", "-q", "-o", str(tmp_path / out)] + list(args) + ["--", PY, "-c", SHOW_ENV],
                       env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def build_python_dir():
    """The build tree's python directory, when the gpumon under test was built with the package."""
    d = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(GPUMON_BIN)), "..", "python"))
    return d if os.path.exists(os.path.join(d, "gpumon", "_gpumon.abi3.so")) else None


@pytest.mark.parametrize("pythonpath", [None, "", "/x/one:/x/two", "/x/one::/x/two:"])
def test_bootstrap_first_on_the_python_path(tmp_path, pythonpath):
    got = run_env(tmp_path, pythonpath=pythonpath)
    d, env = got["dir"], got["env"]
    # the bootstrap's directory first, the job's own entries after it as they were; no empty entry added
    want = d if not pythonpath else f"{d}:{pythonpath}"
    assert env["PYTHONPATH"] == want, env
    assert env["GPUMON_INSIDE"] == "1"
    assert "GPUMON_INSIDE_HISTORY" not in env
    # the embedded bootstrap, byte for byte, is the sitecustomize.py Python imported (and cached)
    assert got["bootstrap"] == open(BOOTSTRAP, encoding="utf-8").read()
    assert any(re.fullmatch(r"sitecustomize\.\w+-\d+\.pyc", f) for f in got["cached"]), got["cached"]
    assert got["path"][1] == d or got["path"][0] == d, got["path"]
    # private: only the user enters it; gone after the run, with the bytecode Python wrote there
    assert got["mode"] == 0o700
    assert d.startswith(str(tmp_path)) and "sock" in got["listing"] and "sitecustomize.py" in got["listing"]
    assert not os.path.exists(d)
    s, _ = settings(tmp_path / "r.gpumon")
    assert "gpumon.inside=on" in s and not any(l.startswith("gpumon.history") for l in s)


def test_bytecode_beside_the_bootstrap_is_removed(tmp_path):
    got = run_env(tmp_path)
    assert "__pycache__" in got["listing"] and got["cached"], got  # Python cached the bootstrap there ...
    assert not os.path.exists(got["dir"])  # ... and the directory is gone all the same


def test_package_directory_for_the_bootstrap(tmp_path):
    """GPUMON_INSIDE_PYTHONPATH: a gpumon run from its build tree names the build tree's package,
    and `import gpumon` from there finds it."""
    want = build_python_dir()
    if want is None:
        pytest.skip("this build has no Python package (a sanitizer build, or no Python headers)")
    env = run_env(tmp_path)["env"]
    assert os.path.realpath(env["GPUMON_INSIDE_PYTHONPATH"]) == want, env
    r = subprocess.run([PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import gpumon; print(gpumon.__file__)",
                        env["GPUMON_INSIDE_PYTHONPATH"]], capture_output=True, text=True, timeout=30,
                       env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr
    assert os.path.realpath(r.stdout.strip()) == os.path.join(want, "gpumon", "__init__.py")


def test_package_directory_of_a_pip_installed_gpumon(tmp_path):
    """pip's wheel lays gpumon out as site-packages/gpumon/bin/gpumon: the bootstrap imports the
    package the program sits in. A program outside any package names none of its surroundings."""
    site = tmp_path / "site-packages"
    (site / "gpumon" / "bin").mkdir(parents=True)
    for f in ("__init__.py", "_gpumon.abi3.so"):
        (site / "gpumon" / f).write_text("")
    (tmp_path / "elsewhere" / "bin").mkdir(parents=True)
    for exe in (site / "gpumon" / "bin" / "gpumon", tmp_path / "elsewhere" / "bin" / "gpumon"):
        shutil.copy(GPUMON_BIN, exe)
    got = run_env(tmp_path, program=site / "gpumon" / "bin" / "gpumon")["env"]
    assert got["GPUMON_INSIDE_PYTHONPATH"] == str(site), got
    got = run_env(tmp_path, program=tmp_path / "elsewhere" / "bin" / "gpumon", out="elsewhere.gpumon")["env"]
    # none, or the package `make install` put under this build's prefix
    assert not got.get("GPUMON_INSIDE_PYTHONPATH", "/").startswith(str(tmp_path)), got
    if "GPUMON_INSIDE_PYTHONPATH" in got:
        assert os.path.exists(os.path.join(got["GPUMON_INSIDE_PYTHONPATH"], "gpumon", "_gpumon.abi3.so"))


def test_history(tmp_path):
    env = run_env(tmp_path, ["--history"])["env"]
    assert env["GPUMON_INSIDE_HISTORY"] == "1" and env["GPUMON_INSIDE"] == "1"
    s, _ = settings(tmp_path / "r.gpumon")
    assert "gpumon.inside=on" in s and "gpumon.history=on" in s


def test_inside_variables_are_gpumons_own(tmp_path):
    """Inherited from an outer run, the inside view's variables are replaced by this run's."""
    env = run_env(tmp_path, extra={"GPUMON_INSIDE": "7", "GPUMON_INSIDE_HISTORY": "1"})["env"]
    assert env["GPUMON_INSIDE"] == "1" and "GPUMON_INSIDE_HISTORY" not in env


def test_no_inside_leaves_the_environment_untouched(tmp_path):
    mine = {"GPUMON_INSIDE": "mine", "GPUMON_INSIDE_HISTORY": "mine too", "GPUMON_INSIDE_PYTHONPATH": "/mine"}
    got = run_env(tmp_path, ["--no-inside"], pythonpath="/x/one:/x/two", extra=mine)
    assert got["env"] == dict(mine, PYTHONPATH="/x/one:/x/two"), got["env"]
    assert got["listing"] == ["sock"] and got["bootstrap"] is None
    got = run_env(tmp_path, ["--no-inside"], out="plain.gpumon")
    assert got["env"] == {}, got["env"]
    s, _ = settings(tmp_path / "plain.gpumon")
    assert "gpumon.inside=off" in s


def test_history_with_no_inside_is_a_usage_error(gpumon, tmp_path):
    r = run(gpumon, tmp_path, ["--no-inside", "--history", "--", "true"])
    assert r.returncode == 2
    assert "--history" in r.stderr and "--no-inside" in r.stderr
    assert not (tmp_path / "rec.gpumon").exists()


def test_help_and_completion(gpumon, completion_env):
    text = gpumon(["run", "--help"]).stdout
    assert re.search(r"^  --no-inside\s+\S", text, re.M) and re.search(r"^  --history\s+\S", text, re.M)
    assert "sitecustomize.py" in text and "Inside the job" in text
    assert bash_complete(completion_env, "gpumon run --no-i") == ["--no-inside"]
    assert bash_complete(completion_env, "gpumon run --hi") == ["--history"]


# ---- the monitor's messages ----------------------------------------------------------------------------

# Sends each argument as one line over the socket; "--proc" starts a group of lines that a process
# of its own sends (forked, one after the other).
CLIENT = textwrap.dedent("""
    import os, socket, sys
    def send(lines):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["GPUMON_RUN_SOCKET"])
        for line in lines:
            s.sendall(line.encode() + b"\\n")
        s.close()
    groups = [[]]
    for a in sys.argv[1:]:
        if a == "--proc":
            groups.append([])
        else:
            groups[-1].append(a)
    send(groups[0])
    for g in groups[1:]:
        pid = os.fork()
        if pid == 0:
            send(g)
            os._exit(0)
        os.waitpid(pid, 0)
""")

FIGURES = {"request": 2 << 30, "free": 1 << 30, "capacity": 150109880320, "cap": 75 << 30,
           "allocated": 60 << 30, "reserved": 70 << 30, "process": 72 << 30, "peak": 69 << 30,
           "largest_free": 512 << 20}


def snapshot_object(**extra):
    """A condensed snapshot as the monitor inside the job sends it: gpumon_snapshot_encode's JSON
    (docs/report.md, "snapshot"), pid 0 when the monitor did not fill it in."""
    return dict({"framework": "torch", "pid": 0, "device": 0, "request_bytes": 2 << 30,
                 "reserved_bytes": 70 << 30, "allocated_bytes": 60 << 30, "free_bytes": 10 << 30,
                 "largest_free_bytes": 512 << 20, "unusable_free_bytes": 10 << 30, "segments": 40,
                 "segments_with_free": 12, "blocks": 900, "unsited_bytes": 1 << 30, "stacks": True,
                 "sites": [{"file": "/srv/job/train.py", "line": 42, "function": "forward",
                            "bytes": 59 << 30, "blocks": 880}],
                 "top_segments": [{"size_bytes": 2 << 30, "allocated_bytes": (2 << 30) - (512 << 20),
                                   "largest_free_bytes": 512 << 20, "expandable": False}]}, **extra)


def send(gpumon, tmp_path, *messages, args=()):
    """gpumon run ARGS with a job that sends messages (a dict as JSON, a str as it is; "--proc": what
    follows comes from another process)."""
    lines = [m if isinstance(m, str) else json.dumps(m) for m in messages]
    return run(gpumon, tmp_path, list(args) + ["--", PY, "-c", CLIENT] + lines, env=dict(WIDE))


def figure(decoded, name):
    """A figure of the oom_figures text, by its message name (named NAME or NAME_bytes there)."""
    for key in (name + "_bytes", name):
        if key in decoded:
            return decoded[key]
    raise KeyError(name)


def test_oom_message_becomes_oom_figures(gpumon, tmp_path):
    r = send(gpumon, tmp_path, {"type": "oom", "framework": "torch", "pid": 4242, "device": 1, **FIGURES},
             {"type": "oom", "framework": "torch", "request": 1 << 20})
    assert r.returncode == 0, r.stderr
    figs = [json.loads(t) for t in events(tmp_path / "rec.gpumon", "oom_figures")]
    assert len(figs) == 2, figs
    first, second = figs
    assert first["framework"] == "torch" and first["pid"] == 4242 and first["device"] == 1, first
    for name, value in FIGURES.items():
        assert figure(first, name) == value, (name, first)
    # only what was sent: the second names its request alone, and its sender's pid
    _, job = settings(tmp_path / "rec.gpumon")
    assert second["pid"] == job and figure(second, "request") == 1 << 20
    for name in FIGURES:
        if name != "request":
            with pytest.raises(KeyError):
                figure(second, name)
    assert "malformed" not in r.stderr


def test_oom_figures_are_bounded_like_oom_events(gpumon, tmp_path):
    r = send(gpumon, tmp_path, *[{"type": "oom", "request": n} for n in range(1, 106)], args=["-q"])
    assert r.returncode == 0, r.stderr
    assert len(events(tmp_path / "rec.gpumon", "oom_figures")) == 100


def test_snapshot_message_becomes_alloc_snapshot(gpumon, tmp_path):
    r = send(gpumon, tmp_path, {"type": "snapshot", "snapshot": snapshot_object()},
             {"type": "snapshot", "pid": 4243, "snapshot": snapshot_object()},
             {"type": "snapshot", "pid": 4243, "snapshot": snapshot_object(pid=777)})
    assert r.returncode == 0, r.stderr
    snaps = [json.loads(t) for t in events(tmp_path / "rec.gpumon", "alloc_snapshot")]
    _, job = settings(tmp_path / "rec.gpumon")
    # the sender's pid where the snapshot names none (the message's, else the connection's); its
    # own when it does; every other field as the library read and wrote it back
    assert [s["pid"] for s in snaps] == [job, 4243, 777], snaps
    for got, pid in zip(snaps, [job, 4243, 777]):
        assert got == snapshot_object(pid=pid), got


def test_snapshots_beyond_eight_are_counted(gpumon, tmp_path):
    r = send(gpumon, tmp_path, *[{"type": "snapshot", "snapshot": snapshot_object()}] * 11)
    assert r.returncode == 0, r.stderr
    assert len(events(tmp_path / "rec.gpumon", "alloc_snapshot")) == 8
    assert "socket: 3 allocator snapshots left out (the first 8 are kept)" in said(r.stderr), r.stderr


def test_inside_notes_and_the_off_reason_said_once(gpumon, tmp_path):
    """Two processes turn the view off for one reason and a third for another: each reason is said
    once on stderr; every process has its note in the recording."""
    same = {"type": "inside", "state": "off", "framework": "torch", "reason": "torch 1.8 is older than 1.10"}
    other = {"type": "inside", "state": "off", "reason": "GPUMON_INSIDE_PYTHONPATH \x1b[31mred"}
    on = {"type": "inside", "state": "on", "framework": "torch", "version": "2.11", "pid": 4244}
    # as the monitor says it: its hello names the version, its "on" only the framework
    hello = {"v": 1, "type": "hello", "pid": 4245, "framework": "paddle", "version": "2.6.1"}
    on_after_hello = {"type": "inside", "state": "on", "framework": "paddle", "pid": 4245}
    r = send(gpumon, tmp_path, "--proc", same, "--proc", same, "--proc", other, on, hello, on_after_hello,
             {"type": "inside", "state": "on", "pid": 4246})
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "the inside view is off" in l]
    assert len(lines) == 2, r.stderr
    assert re.fullmatch(r"gpumon: note: the inside view is off for pid (\d+): torch 1\.8 is older than 1\.10; the "
                        r"job runs untouched \(gpumon run --no-inside turns the bootstrap off\)", lines[0]), lines
    # the job's words reach gpumon's terminal without their escapes; the recording keeps them as said
    assert "\x1b" not in r.stderr and lines[1].endswith(": GPUMON_INSIDE_PYTHONPATH \\x1b[31mred; the job runs "
                                                        "untouched (gpumon run --no-inside turns the bootstrap off)")
    notes = [t for t in events(tmp_path / "rec.gpumon", "note") if t.startswith("inside view")]
    same_notes = [t for t in notes if t.endswith(": torch 1.8 is older than 1.10")]
    pids = {int(re.match(r"inside view off for pid (\d+): ", t).group(1)) for t in same_notes}
    assert len(same_notes) == 2 and len(pids) == 2, notes  # two processes, each noted
    assert "inside view on for pid 4244: torch 2.11" in notes, notes
    assert "inside view on for pid 4245: paddle 2.6.1" in notes and "inside view on for pid 4246" in notes, notes
    assert any(re.fullmatch(r"inside view off for pid \d+: GPUMON_INSIDE_PYTHONPATH \x1b\[31mred", t) for t in notes), notes


def test_quiet_says_no_inside_note(gpumon, tmp_path):
    r = send(gpumon, tmp_path, {"type": "inside", "state": "off", "reason": "no torch"}, args=["-q"])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert any(t.endswith("no torch") for t in events(tmp_path / "rec.gpumon", "note"))


MALFORMED = [
    {"type": "oom", "framework": "torch", "request": -1},
    {"type": "oom", "free": MAX_BYTES + 1},
    {"type": "oom", "allocated": 1.5},
    {"type": "oom", "framework": 3},
    {"type": "oom", "framework": "t\u00f8rch"},  # the library names frameworks in printable ASCII
    {"type": "snapshot", "snapshot": {"not": "a snapshot"}},
    {"type": "snapshot", "snapshot": snapshot_object(reserved_bytes=MAX_BYTES + 1)},
    {"type": "snapshot", "snapshot": {k: v for k, v in snapshot_object().items() if k != "top_segments"}},
    {"type": "snapshot", "snapshot": [1, 2]},
    {"type": "snapshot"},
    {"type": "inside", "state": "off", "reason": "r" * 1024},
    {"type": "inside", "state": "maybe"},
    {"type": "inside", "reason": "no state"},
]


@pytest.mark.parametrize("message", MALFORMED, ids=[f"{m['type']}-{i}" for i, m in enumerate(MALFORMED)])
def test_malformed_messages_are_counted_and_left_out(gpumon, tmp_path, message):
    r = send(gpumon, tmp_path, message)
    assert r.returncode == 0, r.stderr
    assert "socket: 1 malformed and 0 unknown messages ignored" in said(r.stderr), r.stderr
    for kind in ("oom_figures", "alloc_snapshot"):
        assert events(tmp_path / "rec.gpumon", kind) == []
    assert not [t for t in events(tmp_path / "rec.gpumon", "note") if t.startswith("inside view")]
    assert "the inside view is off" not in r.stderr


def test_limits_of_well_formed_messages(gpumon, tmp_path):
    """The largest byte figure and the longest reason are taken."""
    r = send(gpumon, tmp_path, {"type": "oom", "free": MAX_BYTES}, {"type": "inside", "state": "off", "reason": "é" * 511 + "r"})
    assert r.returncode == 0, r.stderr
    assert "malformed" not in r.stderr
    (figs,) = [json.loads(t) for t in events(tmp_path / "rec.gpumon", "oom_figures")]
    assert figure(figs, "free") == MAX_BYTES
    assert any(t.endswith(": " + "é" * 511 + "r") for t in events(tmp_path / "rec.gpumon", "note"))


# ---- the job's stderr --------------------------------------------------------------------------------

def write_stderr(tmp_path, text, args=("-q",)):
    job = f"import sys; sys.stderr.write({text!r}); sys.exit(1)"
    r = subprocess.run([*GPUMON, "run", "-o", str(tmp_path / "r.gpumon")] + list(args) + ["--", PY, "-c", job],
                       env=environment(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith(text)  # passed on as it was
    return r


def test_allocator_lines_become_oom_detail_events(tmp_path):
    bfc = open(os.path.join(FIXTURES, "jax-bfc-stats.stderr"), encoding="utf-8").read()
    not_a_failure = open(os.path.join(FIXTURES, "tf-not-a-failure.txt"), encoding="utf-8").read()
    write_stderr(tmp_path, not_a_failure + "an ordinary line\n" + bfc)
    details = events(tmp_path / "r.gpumon", "oom_detail")
    assert any("ran out of memory trying to allocate 1.00GiB (rounded to 1073741824)" in t for t in details), details
    lines = [l.strip() for l in bfc.splitlines()]
    assert all(t.strip() in lines for t in details), details  # the lines themselves, nothing else
    everything = " ".join(events(tmp_path / "r.gpumon", "oom_detail") + events(tmp_path / "r.gpumon", "oom"))
    assert "not a failure" not in everything and "an ordinary line" not in everything


def test_oom_detail_events_are_bounded(tmp_path):
    line = open(os.path.join(FIXTURES, "jax-bfc-stats.stderr"), encoding="utf-8").readline()
    write_stderr(tmp_path, line * 200)
    assert len(events(tmp_path / "r.gpumon", "oom_detail")) == 64


def test_a_whole_torch_message_is_kept(tmp_path):
    message = open(os.path.join(FIXTURES, "torch-2.11-cotenant.txt"), encoding="utf-8").read().rstrip("\n")
    assert len(message) > 600 and "\n" not in message
    write_stderr(tmp_path, message + "\n")
    (oom,) = events(tmp_path / "r.gpumon", "oom")
    assert oom == "PyTorch: " + message


def test_a_long_line_is_cut_at_2048_bytes(tmp_path):
    line = "CUDA out of memory. " + "x" * 3000
    write_stderr(tmp_path, line + "\n")
    (oom,) = events(tmp_path / "r.gpumon", "oom")
    assert oom == "PyTorch: " + line[:2048]
