# SPDX-License-Identifier: MIT
"""The run model under the package: gpumon.report(path) is `gpumon report PATH --json`; the Model
type's contract; a recording made by GPUMonitor reads back; the default sampling by time; and
GPUMonitor's alerts on a clock of the test's own (a planted leak is told within 30 s or 100
steps, a clean run of 10,000 steps never)."""
import glob
import json
import os
import random
import subprocess
import warnings

import pytest

from conftest import GIB, GPUMON_BIN, MIB, ROOT, TOTAL, Clock, h200

import gpumon
import gpumon.monitor
from gpumon import _gpumon

RECORDINGS = sorted(glob.glob(os.path.join(ROOT, "examples", "traces", "*.gpumon")) +
                    glob.glob(os.path.join(ROOT, "examples", "recordings", "*.gpumon")))


# ---- gpumon.report(path) ---------------------------------------------------------------------------

@pytest.mark.skipif(not os.access(GPUMON_BIN, os.X_OK), reason=f"the gpumon program is not built ({GPUMON_BIN})")
@pytest.mark.parametrize("path", RECORDINGS, ids=os.path.basename)
def test_report_is_the_programs_json(path):
    r = subprocess.run([GPUMON_BIN, "report", path, "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert gpumon.report(path) == json.loads(r.stdout)


def test_bundled_recordings_are_there():
    """The comparison above has recordings to compare (a glob that matched nothing would pass)."""
    assert len(RECORDINGS) >= 20


def test_report_of_a_bundled_leak():
    doc = gpumon.report(os.path.join(ROOT, "examples", "traces", "leak_30s.gpumon"))
    assert doc["format"] == 2 and doc["source"]["type"] == "recording" and doc["source"]["kind"] == "run"
    assert doc["leak"]["verdict"] == "leak" and doc["leak"]["series"]["kind"] == "framework"
    assert doc["alerts"] and doc["alerts"][0]["kind"] == "leak"


def test_report_takes_a_path_object(tmp_path):
    from pathlib import Path
    p = Path(ROOT) / "examples" / "traces" / "clean_30s.gpumon"
    assert gpumon.report(p)["source"]["path"] == str(p)


def test_report_of_a_cut_file_says_what_was_lost(tmp_path):
    cut = tmp_path / "cut.gpumon"
    data = open(os.path.join(ROOT, "examples", "traces", "leak_30s.gpumon"), "rb").read()
    cut.write_bytes(data[:len(data) // 2])
    doc = gpumon.report(cut)
    assert doc["source"]["damage"] and "cut short" in doc["source"]["damage"]
    assert doc["source"]["records"] > 0 and doc["leak"] is not None


def test_report_errors_carry_the_librarys_message(tmp_path):
    missing = tmp_path / "nope.gpumon"
    with pytest.raises(OSError, match="nope.gpumon"):
        gpumon.report(missing)
    junk = tmp_path / "junk.gpumon"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ValueError, match="junk.gpumon"):
        gpumon.report(junk)
    with pytest.raises((OSError, ValueError), match=str(tmp_path)):
        gpumon.report(tmp_path)  # a directory


def test_report_of_nothing_readable_is_refused_as_the_program_refuses_it(tmp_path):
    """A recording cut to its header and schema holds no record of memory: a ValueError with the
    loss named, where a document would read as a run that held no memory (gpumon report exits 2)."""
    cut = tmp_path / "cut.gpumon"
    data = open(os.path.join(ROOT, "examples", "traces", "leak_30s.gpumon"), "rb").read()
    import sqlite3
    page = sqlite3.connect(os.path.join(ROOT, "examples", "traces", "leak_30s.gpumon")).execute(
        "PRAGMA page_size").fetchone()[0]
    cut.write_bytes(data[:2 * page])
    with pytest.raises(ValueError, match=f"{cut}: nothing could be read: the file is damaged or cut short"):
        gpumon.report(cut)
    if os.access(GPUMON_BIN, os.X_OK):
        r = subprocess.run([GPUMON_BIN, "report", str(cut), "--json"], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and "nothing could be read" in r.stderr


# ---- the Model type ---------------------------------------------------------------------------------

def test_model_alerts_verdict_and_document():
    m = _gpumon.Model(kind="run", command="train.py", job_pid=42, headroom=0.1)
    assert m.verdict() is None and m.alerts() == []
    m.add_device(0, "NVIDIA H200", "GPU-1", 100 * GIB)
    m.job(1, 42)
    t = 10**9
    m.device(t, 0, 95 * GIB, 5 * GIB, 100 * GIB, None)       # 5 % free: below 10 %
    m.process(t, 0, 42, 3 * GIB, "alice", "python3 train.py")
    for i in range(200):                                       # 8 MiB a step, a step a second
        t += 10**9
        m.framework(t, 42, 0, i, 2 * GIB + i * 8 * MIB, 3 * GIB + i * 8 * MIB, None, None, "torch")
    alerts = m.alerts()
    assert [a["kind"] for a in alerts] == ["headroom", "leak"]
    assert alerts[0]["free_bytes"] == 5 * GIB and alerts[0]["total_bytes"] == 100 * GIB and alerts[0]["dev"] == 0
    assert alerts[1]["series"]["pid"] == 42 and alerts[1]["rate_bytes_per_step"] == pytest.approx(8 * MIB)
    assert m.alerts(1) == alerts[1:] and m.alerts(2) == [] and m.alerts(99) == []
    v = m.verdict()
    assert v["verdict"] == "leak" and v["room"] == "free"
    doc = json.loads(m.document())
    assert doc["leak"] == v and doc["alerts"] == alerts and doc["source"]["command"] == "train.py"
    m.finish()
    with pytest.raises(ValueError, match="after the end of the run"):
        m.event(t + 1, "note", "late")


def test_model_words_are_the_librarys():
    """The sentences on the model's answers come from libgpumon (gpumon_words_*), the words the
    gpumon program says, indexed as alerts() is: a --limit alert is not among them."""
    assert _gpumon.words_verdict(_gpumon.Model()) is None
    m = _gpumon.Model(kind="run", command="train.py", job_pid=42, headroom=0.1, limit=GIB)
    m.add_device(0, "NVIDIA H200", "GPU-1", 100 * GIB)
    m.job(1, 42)
    t = 10**9
    m.device(t, 0, 95 * GIB, 5 * GIB, 100 * GIB, None)
    m.process(t, 0, 42, 3 * GIB, "alice", "python3 train.py")   # above the limit
    for i in range(200):
        t += 10**9
        m.framework(t, 42, 0, i, 2 * GIB + i * 8 * MIB, 3 * GIB + i * 8 * MIB, None, None, "torch")
    assert [a["kind"] for a in m.alerts()] == ["headroom", "leak"]
    assert m.alerts() == json.loads(m.document())["alerts"]
    assert _gpumon.words_alert(m, 0) == "GPU 0 has 5.00 GiB free of 100 GiB"
    leak = m.alerts()[1]
    assert _gpumon.words_alert(m, 1).startswith("the framework's allocated memory (torch, pid 42) rises by 8.00 MiB "
                                                f"a step from step {leak['start_step']}; out of memory in about ")
    assert _gpumon.words_verdict(m).startswith("LEAK on the framework's allocated memory (torch, pid 42): +8.00 MiB "
                                               "a step from step ")
    with pytest.raises(IndexError, match="no alert 2"):
        _gpumon.words_alert(m, 2)
    with pytest.raises(TypeError, match="Model"):
        _gpumon.words_alert(object(), 0)


def test_model_verdict_names_a_cut_framework_as_the_document_does():
    m = _gpumon.Model(kind="run", job_pid=42)
    for i in range(50):   # a name cut inside its last character: not UTF-8 any more
        m.framework(10**9 * (i + 1), 42, 0, i, GIB + i * MIB, None, None, None, "abcdefghijklmn\u00e5")
    assert m.verdict() == json.loads(m.document())["leak"]
    assert m.verdict()["series"]["framework"].startswith("abcdefghijklmn")


def test_model_refuses_bad_input():
    with pytest.raises(ValueError, match="headroom"):
        _gpumon.Model(headroom=1.5)
    m = _gpumon.Model()
    with pytest.raises(ValueError, match="allocated"):
        m.framework(1, 1, 0, 0, -5, None, None, None, "torch")
    with pytest.raises(TypeError, match="user"):
        m.process(1, 0, 1, None, 7)
    with pytest.raises(ValueError, match="start"):
        m.alerts(-1)


def test_leak_type_is_gone():
    """The detector is the model's business: the front end no longer has its own."""
    assert not hasattr(_gpumon, "Leak")


# ---- a recording made by the monitor reads back ------------------------------------------------------

def test_monitor_recording_reads_back(scenario, torch, tmp_path, monkeypatch):
    scenario(h200(proc_used="3GiB"))
    rec = tmp_path / "run.gpumon"
    alerts = []
    clock = Clock(monkeypatch)  # 0.25 s a step: the 120 steps are 30 s, long enough to alert
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(interval=1, logger=False, record=rec, on_alert=alerts.append,
                               min_headroom=None) as mon:
            torch._fake.alloc(2 * GIB)
            for i in range(120):
                torch._fake.alloc(4 * MIB)
                clock.advance(0.25)
                mon.step()
            mon.marker("epoch 2 starts")
            live = mon.report()
    doc = gpumon.report(rec)
    assert doc["source"]["kind"] == "run" and doc["source"]["path"] == str(rec)
    assert [d["total_bytes"] for d in doc["devices"]] == [TOTAL]
    fw = [s for s in doc["series"] if s["series"]["kind"] == "framework"]
    assert len(fw) == 1 and fw[0]["series"]["pid"] == os.getpid() and fw[0]["points"] == 120
    # the recording gives the model what the monitor's own model had: the same verdict
    for key in ("verdict", "series", "rate_bytes_per_step", "start_step", "points", "alert", "room"):
        assert doc["leak"][key] == live["leak"][key], key
    assert ["epoch 2 starts"] == [e["text"] for e in doc["events"] if e["kind"] == "marker"]
    # the alert the monitor gave is in the recording at the model's moment: the report says it was live
    assert len(alerts) == 1 and [a["live"] for a in doc["alerts"] if a["kind"] == "leak"] == [True]
    assert any(e["kind"] == "alert" and e["text"] == alerts[0]["message"] for e in doc["events"])


# ---- GPUMonitor on a clock of the test's own ---------------------------------------------------------

def test_default_samples_by_time(scenario, torch, monkeypatch):
    """At the first step, then at the first step at least 0.1 s after the last sample."""
    scenario(h200())
    clock = Clock(monkeypatch)
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.interval is None
        taken = []
        for i in range(1, 13):
            clock.advance(0.04)
            if mon.step() is not None:
                taken.append(i)
        assert taken == [1, 4, 7, 10]
        assert torch._fake.stats_calls == 4  # the framework is read only for a sample
        mon.sample()                         # a sample by hand counts as the last one too
        clock.advance(0.05)
        assert mon.step() is None
        for _ in range(3):                   # slow steps: every one
            clock.advance(1.0)
            assert mon.step() is not None


def test_explicit_interval_counts_steps_not_time(scenario, torch, monkeypatch):
    scenario(h200())
    clock = Clock(monkeypatch)
    with gpumon.GPUMonitor(interval=4, logger=False) as mon:
        taken = []
        for i in range(1, 13):
            clock.advance(10.0 if i == 2 else 0.001)
            if mon.step() is not None:
                taken.append(i)
        assert taken == [4, 8, 12]


def loop(torch, mon, clock, step_s, steps, leak_from=None, leak=0, warmup=50, jump_at=None, seed=7,
         stop_on=None):
    """A training loop on the test's clock: 2 GiB of weights; a warm-up that grows the floor by
    300 MiB over `warmup` steps, fast at first and slowing as caches fill; dynamic shapes (each
    step's output, of a random size, is kept until the next step); a one-off rise of the floor
    at jump_at; a leak of `leak` bytes a step from step leak_from. Returns the step at which
    stop_on (a list) got an entry, else None."""
    rnd = random.Random(seed)
    torch._fake.alloc(2 * GIB)
    held = 0
    tri = warmup * (warmup + 1) // 2
    for i in range(steps):
        if i < warmup:
            torch._fake.alloc(300 * MIB * (warmup - i) // tri)
        if i == jump_at:
            torch._fake.alloc(512 * MIB)     # a new state (an optimizer's) that stays
        act = rnd.choice([64, 128, 256, 384, 512]) * MIB
        torch._fake.alloc(act)               # activations, freed within the step
        out = rnd.randrange(1, 64) * MIB
        torch._fake.free(held)
        torch._fake.alloc(out)               # the step's output, freed at the next step
        held = out
        torch._fake.free(act)
        if leak_from is not None and i >= leak_from:
            torch._fake.alloc(leak)
        clock.advance(step_s)
        mon.step()
        if stop_on:
            return i
    return None


STEP_TIMES = [0.002, 0.02, 0.2, 1.0, 3.0]


@pytest.mark.parametrize("leak_from, step_s", [(0, s) for s in STEP_TIMES] + [(200, s) for s in STEP_TIMES])
def test_planted_leak_is_told_within_30_s_or_100_steps(scenario, torch, monkeypatch, step_s, leak_from):
    """A leak from the first step (no warm-up), or one that starts after the warm-up."""
    scenario(h200())
    clock = Clock(monkeypatch)
    alerts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(logger=False, on_alert=alerts.append, min_headroom=None) as mon:
            at = loop(torch, mon, clock, step_s, 100_000, leak_from=leak_from, leak=4 * MIB,
                      warmup=50 if leak_from else 0, stop_on=alerts)
    assert at is not None, "no alert"
    steps = at + 1 - leak_from
    assert steps > 0, f"told {1 - steps} steps before the leak started"
    assert steps * step_s <= 30 or steps <= 100, f"told after {steps} steps ({steps * step_s:.1f} s)"
    a = alerts[0]
    assert a["kind"] == "leak" and a["series"]["kind"] == "framework"
    assert a["rate_bytes_per_step"] == pytest.approx(4 * MIB, rel=0.25)


@pytest.mark.parametrize("step_s", STEP_TIMES[:4] + [1.25, 1.5] + STEP_TIMES[4:])
def test_clean_10000_steps_are_never_told(scenario, torch, monkeypatch, step_s):
    scenario(h200())
    clock = Clock(monkeypatch)
    alerts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(logger=False, on_alert=alerts.append, min_headroom=None) as mon:
            loop(torch, mon, clock, step_s, 10_000, jump_at=5000)
            verdict = mon.leak()
    assert alerts == []
    assert verdict["verdict"] in ("none", "insufficient_data") and verdict["series"]["kind"] == "framework"
    assert verdict["points"] == mon.summary()["samples"]
