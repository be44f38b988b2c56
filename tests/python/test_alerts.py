# SPDX-License-Identifier: MIT
"""Alerts: the run model fed online with the samples' records, its leak alert worded once (through
`warnings` and the logger: the rate, where it started, steps and time to out-of-memory and what
bounds them, on_alert called once with the model's figures), and the headroom threshold."""
import logging
import random
import warnings

import pytest

from conftest import GIB, MIB, TOTAL, Clock, h200

import gpumon
from gpumon._sinks import human


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
        mon.step()


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
    a = alerts[0]
    assert a["kind"] == "leak" and a["alert"] is True and a["verdict"] == "leak"
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
    assert msg.startswith("gpumon: memory leak suspected on GPU 0: torch's allocated memory rises by 4.0 MiB "
                          f"a step from step {a['start_step']}; ")
    assert f"out of memory in about {a['steps_to_oom']:,.0f} more steps (about " in msg
    assert f"at this rate, against the GPU's free memory ({human(a['room_bytes'])} left)" in msg
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [msg]
    assert mon.summary()["alerts"][0]["kind"] == "leak"
    assert mon.leak()["verdict"] == "leak" and mon.leak()["alert"] is True


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
    assert "against the cap set on the allocator" in capped["message"]
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
    assert len(hw) == 1 and len(alerts) == 1 and alerts[0]["kind"] == "headroom"
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
        raise RuntimeError("stop training: " + alert["kind"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(interval=1, logger=False, on_alert=stop) as mon:
            with pytest.raises(RuntimeError, match="stop training: headroom"):
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
