# SPDX-License-Identifier: MIT
"""Under `gpumon run`: the monitor inside the job reports to the launcher's socket, and the one
recording holds the framework samples and step markers next to the NVML samples; a leak alert is
one line on stderr, the launcher's, and a headroom alert (which the launcher does not print) the
monitor's."""
import os
import sqlite3
import subprocess
import sys
import textwrap

from conftest import GPUMON_BIN, MIB, child_env, h200

SCRIPT = """
import torch, gpumon
torch._fake.alloc(512 << 20)
with gpumon.GPUMonitor(interval=5, logger=False) as mon:
    for i in range(40):
        torch._fake.alloc(1 << 20)
        mon.step()
        if i == 19:
            mon.marker("halfway")
print("job done")
"""


def test_recording_holds_framework_samples_and_steps(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent(SCRIPT))
    env = child_env(tmp_path, h200(pid=False), TMPDIR=str(tmp_path))
    rec = tmp_path / "run.gpumon"
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "run", "-q", "-o", str(rec), "--", sys.executable, "train.py"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "job done" in r.stdout
    db = sqlite3.connect(rec)
    src = db.execute("SELECT framework, device FROM framework_sources").fetchall()
    assert src == [("torch", 0)]
    rows = db.execute("SELECT step, allocated_bytes, reserved_bytes, max_allocated_bytes FROM framework_samples "
                      "ORDER BY t_ns").fetchall()
    assert [s for s, _, _, _ in rows] == [5, 10, 15, 20, 25, 30, 35, 40]
    assert rows[-1][1] == 552 * MIB and rows[-1][3] == 552 * MIB and rows[-1][2] == 552 * MIB
    ev = db.execute("SELECT kind, text FROM events WHERE kind IN ('step', 'marker') ORDER BY t_ns").fetchall()
    assert [t for k, t in ev if k == "step"] == [str(s) for s in range(5, 45, 5)]
    assert ("marker", "halfway") in ev
    assert db.execute("SELECT count(*) FROM device_samples").fetchone()[0] >= 1


def test_without_gpumon_run_nothing_is_sent(scenario, torch, monkeypatch):
    scenario(h200())
    import gpumon
    from gpumon._sinks import RunSocketSink
    with gpumon.GPUMonitor(logger=False) as mon:
        assert not any(isinstance(s, RunSocketSink) for s in mon._sinks)


LEAKING_JOB = """
import time, torch, gpumon, gpumon.monitor
# a clock of the job's own, as the socket's "t" may run up to a minute ahead: 0.25 s a step, so
# that 120 steps are the 30 s the detector needs
t0, m0, now = time.time(), time.monotonic_ns(), [0.0]
time.time = lambda: t0 + now[0]
gpumon.monitor._now_ns = lambda: m0 + int(now[0] * 1e9)
torch._fake.alloc(2 << 30)
told = []
mon = gpumon.GPUMonitor(interval=1, min_headroom=None, on_alert=told.append)
for i in range(120):
    torch._fake.alloc(4 << 20)
    now[0] += 0.25
    mon.step()
mon.close()
print("events", [e.kind for e in told])
"""


def test_one_alert_line_under_gpumon_run(tmp_path):
    """Under `gpumon run` the launcher prints the leak alert and the job's monitor adds none: one
    line on stderr, gpumon's; the job's on_alert still gets the event, and the recording holds
    one alert event, the launcher's."""
    (tmp_path / "train.py").write_text(textwrap.dedent(LEAKING_JOB))
    env = child_env(tmp_path, h200(pid=False), TMPDIR=str(tmp_path))
    rec = tmp_path / "run.gpumon"
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "run", "-o", str(rec), "--", sys.executable, "train.py"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "events ['leak']" in r.stdout, r.stdout + r.stderr
    told = [line for line in r.stderr.splitlines() if "leak suspected" in line and not line.startswith("  ")]
    assert len(told) == 1 and told[0].startswith("gpumon: leak suspected: "), r.stderr
    assert "LeakWarning" not in r.stderr and "memory leak suspected" not in r.stderr, r.stderr
    db = sqlite3.connect(rec)
    texts = [t for (t,) in db.execute("SELECT text FROM events WHERE kind IN ('alert', 'marker')")]
    assert texts == [told[0][len("gpumon: "):]], texts


def test_headroom_is_the_monitors_to_tell_under_gpumon_run(tmp_path):
    """gpumon run prints no headroom alert: the job's monitor tells it, once."""
    script = ("import torch, gpumon\n"
              "with gpumon.GPUMonitor(interval=1, logger=False) as mon:\n"
              "    mon.step()\n")
    (tmp_path / "train.py").write_text(script)
    env = child_env(tmp_path, h200(pid=False, used="139GiB"), TMPDIR=str(tmp_path))
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "run", "-q", "--", sys.executable, "train.py"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    told = [line for line in r.stderr.splitlines() if "below the 5% headroom" in line]
    assert len(told) == 1 and "train.py:3: HeadroomWarning: " in told[0], r.stderr
