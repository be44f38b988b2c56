# SPDX-License-Identifier: MIT
"""Driver faults under `gpumon record` and `gpumon serve` against the fake NVML: a v2 memory call that
fails for a moment leaves no v1 figure in the recording or its peak; a GPU whose driver calls hang
is said stale (on record's stderr, as events in the file, as gpumon_gpu_up 0 with a reason on the
exporter's page) while the other GPU is sampled on time, and comes back when it answers."""
import os
import shutil
import sqlite3
import subprocess
import textwrap

from conftest import FAKE_NVML_LIB, GPUMON_BIN
from test_serve import Server, one, parse, wait_for

GIB = 1 << 30
MIB = 1 << 20
# GPU 1's memory call hangs from 1 s to 4 s (the fake's clock starts when gpumon opens it)
HANG = """\
gpu 0 total=80GiB reserved=512MiB used=1GiB
gpu 1 total=80GiB reserved=512MiB used=2GiB
hang nvmlDeviceGetMemoryInfo_v2 gpu=1 from=1 until=4
"""


def record(tmp_path, scenario, seconds):
    scn = tmp_path / "faults.scn"
    scn.write_text(textwrap.dedent(scenario))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    env.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
    out = tmp_path / "faults.gpumon"
    p = subprocess.run([os.path.abspath(GPUMON_BIN), "record", "-o", str(out), "--duration", str(seconds)],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return out, p.stderr


def test_v2_failing_for_a_moment_changes_no_figure(tmp_path):
    out, err = record(tmp_path, """\
        gpu 0 total=80GiB reserved=512MiB used=10GiB
        error nvmlDeviceGetMemoryInfo_v2 UNKNOWN gpu=0 from=0.3 until=0.35
        """, 2.5)  # a flat figure is written at start and then once a second: 2.5 s gives rows to compare
    # v1's figure would be 10.5 GiB (the reserve counted as used)
    assert "GPU 0 peak 10.0 GiB" in err, err
    db = sqlite3.connect(out)
    rows = db.execute("SELECT memory_api, used_bytes, used_max_bytes, reserved_bytes FROM device_samples").fetchall()
    assert len(rows) >= 2
    assert all(r == (2, 10 * GIB, 10 * GIB, 512 * MIB) for r in rows), rows


def test_record_says_a_hung_gpu_stale_and_back(tmp_path):
    out, err = record(tmp_path, HANG, 5.5)
    assert "GPU 1 has not answered a driver call for 2 s" in err, err
    assert "GPU 1 answers again" in err, err
    db = sqlite3.connect(out)
    (start,) = db.execute("SELECT value FROM meta WHERE key = 'start_mono_ns'").fetchone()
    events = db.execute("SELECT kind, text, (t_ns - ?) / 1e9 FROM events WHERE kind IN ('stale', 'answering') "
                        "ORDER BY t_ns", (int(start),)).fetchall()
    assert [(k, t.split(":")[0]) for k, t, _ in events] == [
        ("stale", "GPU 1 has not answered a driver call for 2 s"), ("answering", "GPU 1 answers again")], events
    # the fake's clock starts when the driver is opened, a little before the recording does (more
    # under a sanitizer on a loaded machine): the hang ends at its 4 s, the recording's 3.5 s or later
    assert 2.5 < events[0][2] < 4.0 and events[1][2] >= 3.5, events
    # GPU 0 was sampled on time meanwhile: a heartbeat row at least every second
    t0 = [t for (t,) in db.execute("SELECT (t_ns - ?) / 1e9 FROM device_samples WHERE dev = 0 ORDER BY t_ns",
                                    (int(start),))]
    assert t0[-1] > 5, t0
    assert max(b - a for a, b in zip(t0, t0[1:])) < 1.5, t0
    # GPU 1: nothing from inside the hang, rows again after it
    t1 = [t for (t,) in db.execute("SELECT (t_ns - ?) / 1e9 FROM device_samples WHERE dev = 1", (int(start),))]
    assert not [t for t in t1 if 1.1 < t < 3.9], t1
    assert [t for t in t1 if t > 4], t1


def test_serve_shows_a_hung_gpu_down_then_up(tmp_path):
    s = Server(tmp_path, scenario=HANG)
    try:
        assert one(parse(s.metrics()), "gpumon_gpu_up", gpu=1) == 1
        assert wait_for(lambda: one(parse(s.metrics()), "gpumon_gpu_up", gpu=1) == 0, 6)
        body = s.metrics()
        m = parse(body)
        assert one(m, "gpumon_gpu_down_info", gpu=1, reason="not_answering") == 1
        assert one(m, "gpumon_gpu_up", gpu=0) == 1
        assert [lab["gpu"] for lab, _ in m["gpumon_memory_used_bytes"]] == ["0"]
        if shutil.which("promtool"):
            p = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
            assert p.returncode == 0, p.stdout + p.stderr
        assert wait_for(lambda: one(parse(s.metrics()), "gpumon_gpu_up", gpu=1) == 1, 6)
        m = parse(s.metrics())
        assert "gpumon_gpu_down_info" not in m
        assert one(m, "gpumon_memory_used_bytes", gpu=1) == 2 * GIB
    finally:
        s.stop()
