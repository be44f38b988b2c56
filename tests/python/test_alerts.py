# SPDX-License-Identifier: MIT
"""Alerts: the run model fed online with the samples' records, its leak alert worded once (one
`warnings` line naming the caller's line, a logger line only when a logger was given: the rate,
where it started, steps and time to out-of-memory and what bounds them; on_alert called once with
a typed event holding the model's figures), the projection of out-of-memory as an event, and the
headroom threshold."""
import inspect
import logging
import os
import random
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

from conftest import GIB, MIB, TOTAL, Clock, child_env, h200

import gpumon


def training(torch, mon, steps, leak_per_step=0, warmup=0, seed=1, clock=None, step_s=0.1):
    """A loop: 2 GiB of weights, activations of random size freed each step, a warm-up that grows
    the floor by 300 MiB over `warmup` steps, fast at first and slowing down as caches fill, and a
    leak kept forever. With a clock, each step takes step_s seconds of it."""
    rnd = random.Random(seed)
    torch._fake.alloc(2 * GIB)
    for i in range(steps):
        if i < warmup:
            torch._fake.alloc(300 * MIB * (warmup - i) // (warmup * (warmup + 1) // 2))
        act = rnd.choice([64, 128, 256, 384, 512]) * MIB
        torch._fake.alloc(act)
        torch._fake.free(act)
        if leak_per_step:
            torch._fake.alloc(leak_per_step)
        if clock:
            clock.advance(step_s)
        mon.step()  # the line a LeakWarning names


def test_planted_leak_alerts_once_with_rate_and_oom(scenario, torch, caplog, monkeypatch):
    scenario(h200())
    alerts = []
    clock = Clock(monkeypatch)  # 0.1 s a step: 400 steps are 40 s
    caplog.set_level(logging.WARNING, logger="gpumon")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=alerts.append, min_headroom=None) as mon:
            training(torch, mon, 400, leak_per_step=4 * MIB, clock=clock)
    leak_w = [x for x in w if issubclass(x.category, gpumon.LeakWarning)]
    assert len(leak_w) == 1 and len(alerts) == 1
    # the warning names the user's line that called step(), not a line inside gpumon
    assert leak_w[0].filename == __file__ and leak_w[0].lineno == STEP_LINE
    ev = alerts[0]
    assert isinstance(ev, gpumon.AlertEvent) and ev.kind == "leak" and ev.device == 0 and ev.rank is None
    a = ev.alert
    assert ev["kind"] == "leak" and a["alert"] is True and a["verdict"] == "leak"
    assert (ev.rate_bytes_per_step, ev.steps_to_oom, ev.seconds_to_oom, ev.room, ev.headroom_bytes, ev.step) == \
        (a["rate_bytes_per_step"], a["steps_to_oom"], a["seconds_to_oom"], a["room"], a["room_bytes"], a["step"])
    assert ev.message == a["message"]
    assert a["series"]["kind"] == "framework" and a["series"]["framework"] == "torch"
    # within 30 s or 100 steps of its start, whichever is later: 300 steps of 0.1 s
    assert a["step"] <= 300, "flagged within 30 s"
    assert abs(a["rate_bytes_per_step"] - 4 * MIB) < 0.05 * 4 * MIB
    assert a["steps_to_oom"] is not None and a["steps_to_oom"] > 0 and a["seconds_to_oom"] is not None
    # the GPU's free memory bounds it: the fake card has 40 GiB used (and its reserve) of its total
    assert a["room"] == "free" and a["room_bytes"] == TOTAL - 40 * GIB - 644939776
    msg = str(leak_w[0].message)
    assert msg == a["message"]
    # worded from the model's figures, none computed here
    assert msg.startswith("gpumon: memory leak suspected on GPU 0: the framework's allocated memory (torch, pid "
                          f"{os.getpid()}) rises by 4.00 MiB a step from step {a['start_step']}; ")
    assert f"out of memory in about {a['steps_to_oom']:.0f} more steps (" in msg
    assert re.search(r"at this rate, against the GPU's free memory \(\d+(\.\d+)? GiB left\)$", msg), msg
    # logger=False: no logger line besides the warning
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == []
    assert mon.summary()["alerts"][0]["kind"] == "leak"
    assert mon.leak()["verdict"] == "leak" and mon.leak()["alert"] is True


STEP_LINE = next(i for i, line in enumerate(inspect.getsourcelines(training)[0], inspect.getsourcelines(training)[1])
                 if "the line a LeakWarning names" in line)


@pytest.mark.parametrize("how", ["every step", "by time", "sample()"])
def test_the_warning_names_the_callers_line_on_every_path(scenario, torch, monkeypatch, how):
    """step() reaches the alert through sample() (interval=N) or directly (by time), or the user
    calls sample(): the warning names the user's line each time."""
    scenario(h200(used="139GiB"))
    Clock(monkeypatch)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1 if how == "every step" else None, logger=False) as mon:
            line = inspect.currentframe().f_lineno + 1
            mon.sample() if how == "sample()" else mon.step()
    hw = [x for x in w if issubclass(x.category, gpumon.HeadroomWarning)]
    assert len(hw) == 1 and (hw[0].filename, hw[0].lineno) == (__file__, line)


LEAKING_JOB = """
import time, torch, gpumon, gpumon.monitor
# a clock of the job's own: 0.25 s a step, so that 120 steps are the 30 s the detector needs
t0, m0, now = time.time(), time.monotonic_ns(), [0.0]
time.time = lambda: t0 + now[0]
gpumon.monitor._now_ns = lambda: m0 + int(now[0] * 1e9)
torch._fake.alloc(2 << 30)
mon = gpumon.GPUMonitor(interval=1, min_headroom=None{logger})
for i in range(120):
    torch._fake.alloc(4 << 20)
    now[0] += 0.25
    mon.step()
mon.close()
print("alerts", len(mon.alerts))
"""


@pytest.mark.parametrize("logger", ["", ", logger=False"])
def test_one_alert_once_on_stderr_outside_gpumon_run(tmp_path, logger):
    """Outside `gpumon run`, a leak gives one LeakWarning on stderr, its source line the user's
    mon.step(), and no logger line (the default logger prints the samples, not the alert)."""
    (tmp_path / "train.py").write_text(textwrap.dedent(LEAKING_JOB.format(logger=logger)))
    r = subprocess.run([sys.executable, "train.py"], env=child_env(tmp_path, h200(pid=False)), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "alerts 1" in r.stdout, r.stderr
    told = [i for i, line in enumerate(r.stderr.splitlines()) if "leak suspected" in line]
    assert len(told) == 1, r.stderr
    line = r.stderr.splitlines()[told[0]]
    step_line = textwrap.dedent(LEAKING_JOB).splitlines().index("    mon.step()") + 1
    assert line.startswith(f"{tmp_path / 'train.py'}:{step_line}: LeakWarning: gpumon: memory leak suspected"), line
    assert r.stderr.splitlines()[told[0] + 1].strip() == "mon.step()"
    assert "return self.sample()" not in r.stderr


def test_oom_projected_once_within_the_steps_given(scenario, torch, monkeypatch):
    """oom_within_steps: after the leak alert, one oom_projected event once the model's projection
    is within that many steps, with the model's verdict's figures; no other line is told."""
    scenario(h200())
    torch.cuda.set_per_process_memory_fraction(0.05)  # 7 GiB: some 1,000 steps of 4 MiB after 2 GiB
    clock = Clock(monkeypatch)
    events = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=events.append, min_headroom=None,
                               oom_within_steps=900, rank=3) as mon:
            torch._fake.alloc(2 * GIB)
            for i in range(400):
                torch._fake.alloc(4 * MIB)
                clock.advance(0.1)
                mon.step()
                if len(events) == 1:
                    # the alert came with more than 900 steps left: no projection event yet
                    assert events[0].steps_to_oom > 900
            verdict = mon.leak()
    kinds = [e.kind for e in events]
    assert kinds == ["leak", "oom_projected"], kinds
    leak, oom = events
    assert oom.rank == 3 and leak.rank == 3 and oom.step > leak.step
    assert oom.steps_to_oom <= 900 and oom.room == "cap" and oom.rate_bytes_per_step == pytest.approx(4 * MIB, rel=0.05)
    assert oom.message.startswith("gpumon: out of memory projected on GPU 0 within 900 steps: the framework's "
                                  f"allocated memory (torch, pid {os.getpid()}) rises by 4.00 MiB a step")
    assert verdict["steps_to_oom"] < oom.steps_to_oom  # later, fewer: the event came once
    assert len([x for x in w if issubclass(x.category, gpumon.GpumonWarning)]) == 1  # the leak's
    assert len(mon.alerts) == 1


def test_rank_comes_from_the_environment(scenario, torch, monkeypatch):
    scenario(h200(used="139GiB"))
    monkeypatch.setenv("RANK", "5")
    events = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=events.append) as mon:
            mon.step()
    assert mon.rank == 5 and [(e.kind, e.rank) for e in events] == [("headroom_low", 5)]
    assert events[0].headroom_bytes == events[0]["free_bytes"] and events[0].total_bytes == TOTAL
    with pytest.raises(ValueError, match="rank must be"):
        gpumon.GPUMonitor(rank=-1)
    with pytest.raises(ValueError, match="oom_within_steps must be"):
        gpumon.GPUMonitor(oom_within_steps=0)


def test_steps_to_oom_count_to_the_allocators_cap(scenario, torch, monkeypatch):
    """torch.cuda.set_per_process_memory_fraction(0.1): the allocator stops at 10 % of the card, and
    so does the projection; a torch that cannot tell its fraction is bounded by the GPU's free
    memory (the model's nearest bound)."""
    scenario(h200())
    torch.cuda.set_per_process_memory_fraction(0.1)

    clock = Clock(monkeypatch)

    def leak_at(**kw):
        torch._fake.reset()
        torch.cuda.set_per_process_memory_fraction(0.1)
        alerts = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with gpumon.GPUMonitor(interval=1, logger=False, on_alert=alerts.append, min_headroom=None) as mon:
                training(torch, mon, 400, leak_per_step=4 * MIB, clock=clock)
        return alerts[0]
    capped = leak_at()
    # 10 % of 140.4 GiB = 14.0 GiB; about 2.7 GiB reserved when it alerts: some 2,900 steps of 4 MiB left
    assert capped["room"] == "cap" and 2400 < capped["steps_to_oom"] < 3200, capped
    assert "against the cap the job set on its allocator" in capped["message"]
    monkeypatch.delattr(torch.cuda, "get_per_process_memory_fraction")  # torch before 2.9
    uncapped = leak_at()
    # the free memory of the card: 140.4 GiB - 40 GiB used - 0.6 GiB reserved, 25,549 steps of 4 MiB
    assert uncapped["room"] == "free" and 25000 < uncapped["steps_to_oom"] < 26000, uncapped
    assert "against the GPU's free memory" in uncapped["message"]


def test_the_cap_goes_to_gpumon_run_as_limit(scenario, torch, monkeypatch, tmp_path):
    """Under gpumon run the samples carry the cap as "limit" (docs/run-protocol.md)."""
    import json
    import socket
    scenario(h200())
    path = str(tmp_path / "s.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(1)
    monkeypatch.setenv("GPUMON_RUN_SOCKET", path)
    torch.cuda.set_per_process_memory_fraction(0.25)
    with gpumon.GPUMonitor(interval=1, logger=False, min_headroom=None) as mon:
        conn, _ = srv.accept()
        torch._fake.alloc(GIB)
        mon.step()
    conn.settimeout(5)
    data = b""
    while not data.endswith(b"\n") or b'"type":"step"' not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    conn.close()
    srv.close()
    samples = [m for m in map(json.loads, data.decode().splitlines()) if m["type"] == "sample"]
    assert samples and samples[0]["limit"] == int(0.25 * 150754820096), samples


def test_clean_loop_with_warmup_and_dynamic_shapes_is_not_flagged(scenario, torch):
    scenario(h200())
    alerts = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=alerts.append, min_headroom=None) as mon:
            training(torch, mon, 1000, warmup=50)
            verdict = mon.leak()
    assert alerts == [] and not [x for x in w if issubclass(x.category, gpumon.GpumonWarning)]
    assert verdict["verdict"] == "none" and verdict["points"] == 1000


def test_leak_detection_off(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(interval=1, logger=False, leak_detection=False) as mon:
        training(torch, mon, 200, leak_per_step=8 * MIB)
        assert mon.leak() is None and mon.alerts == []


def test_explicit_steps_that_go_back_start_a_new_series(scenario, torch):
    """A restarted step counter is a new segment of the framework's series in the model (the run's
    verdict is then the segment the model's rule picks: with too little data in both, the longer)."""
    scenario(h200())
    with gpumon.GPUMonitor(interval=1, logger=False) as mon:
        mon.sample(step=10)
        mon.sample(step=11)
        mon.sample(step=0)   # a restarted counter: no error, a new series
        series = [(v["series"]["segment"], v["points"]) for v in mon.report()["series"]
                  if v["series"]["kind"] == "framework"]
        assert series == [(0, 2), (1, 1)]
        assert mon.leak()["points"] == 2


def test_headroom_warns_once(scenario, torch):
    scenario(h200(used="139GiB"))
    alerts = []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=alerts.append) as mon:
            for _ in range(5):
                mon.step()
    hw = [str(x.message) for x in w if issubclass(x.category, gpumon.HeadroomWarning)]
    assert len(hw) == 1 and len(alerts) == 1 and alerts[0].kind == "headroom_low" and alerts[0]["kind"] == "headroom"
    assert "below the 5% headroom at step 1" in hw[0]


def test_headroom_off_and_threshold(scenario, torch):
    scenario(h200(used="120GiB"))   # ~14% free
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1, logger=False, min_headroom=None) as mon:
            mon.step()
        with gpumon.GPUMonitor(interval=1, logger=False) as mon:     # 5%: fine
            mon.step()
        with gpumon.GPUMonitor(interval=1, logger=False, min_headroom=0.2) as mon:
            mon.step()
    assert len([x for x in w if issubclass(x.category, gpumon.HeadroomWarning)]) == 1


class StubNvml:
    """Stands in for the monitor's NVML handle: answers with the used bytes it is given."""

    def __init__(self, total=150 * GIB):
        self.total, self.used = total, 0

    def sample(self, dev, want=None):
        return (0, 2, self.total, self.used, self.total - self.used, 0, 50, 10, 40, 100000)

    def process_used(self, dev, pid):
        return None

    def close(self):
        pass


def test_headroom_warns_again_after_recovering(scenario, torch):
    scenario(h200())
    stub = StubNvml()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with gpumon.GPUMonitor(interval=1, logger=False) as mon:
            mon._nvml = stub
            for used in (145, 146, 100, 147, 147):
                stub.used = used * GIB
                mon.step()
    hw = [str(x.message) for x in w if issubclass(x.category, gpumon.HeadroomWarning)]
    assert len(hw) == 2 and "at step 1" in hw[0] and "at step 4" in hw[1]


def test_on_alert_exception_reaches_the_loop(scenario, torch):
    scenario(h200(used="139GiB"))

    def stop(alert):
        raise RuntimeError("stop training: " + alert.kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=stop) as mon:
            with pytest.raises(RuntimeError, match="stop training: headroom_low"):
                mon.step()


def test_alerts_go_to_the_users_logger(scenario, torch):
    scenario(h200(used="139GiB"))
    lines = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(interval=1, logger=lines.append) as mon:
            mon.step()
    assert len(lines) == 2 and lines[0].startswith("[Step 1]") and "below the 5% headroom" in lines[1]
    lg = logging.getLogger("my.training")
    got = []
    h = logging.Handler()
    h.emit = lambda r: got.append((r.levelno, r.getMessage()))
    lg.addHandler(h)
    lg.setLevel(logging.INFO)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(interval=1, logger=lg) as mon:
            mon.step()
    lg.removeHandler(h)
    assert [lv for lv, _ in got] == [logging.INFO, logging.WARNING] and "headroom" in got[1][1]
