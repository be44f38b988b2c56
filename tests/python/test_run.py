# SPDX-License-Identifier: MIT
"""Under `gpumon run`: the monitor inside the job reports to the launcher's socket, and the one
recording holds the framework samples and step markers next to the NVML samples."""
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
