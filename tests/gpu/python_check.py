#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The Python package on a real GPU with real torch (run by tests/gpu/python_check.sh):

  leak      a training loop with a planted leak (2 MiB a step), sampled every step, is flagged
            within 100 steps
  leaktime  the same at the default sampling (every 0.25 s): flagged within 30 s
  clean     a loop with warm-up (optimizer state), dynamic shapes and a rare long batch is not
  section   section() peaks equal torch's own max_memory_allocated deltas for the same block
  tb        TensorBoard files read back with tensorboard's EventAccumulator give the exact values
  cap       with torch.cuda.set_per_process_memory_fraction(0.05), the leak alert's steps to
            out-of-memory count to the cap (within 15 % of (cap - reserved) / rate)
  nvml      the process figure equals pynvml's for this process
  record    a record= recording holds this process's NVML figure (pynvml's), `gpumon report`
            reads the same peak from it, and gpumon.report(path) is its --json
  run       examples/train_torch.py under `gpumon run`: the recording holds its samples and steps
  overhead  a real training loop's slowdown at the default sampling (goal <= 0.5 %), interleaved
  step      step() between samples, counting steps and at the default (goal <= 1 us)

Writes python_check.json and python_check.txt under --out; exit status 1 when a check failed.
"""
import argparse
import json
import os
import sqlite3
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import timeit
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import gpumon

MIB = 1 << 20
results = {"checks": [], "figures": {}}
log_lines = []


def say(msg):
    print(msg, flush=True)
    log_lines.append(msg)


def check(name, ok, detail):
    results["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    say(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


class Net(nn.Module):
    def __init__(self, d=512, layers=4, vocab=1000):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        return self.head(self.enc(self.emb(x)))


def make(seed=0):
    torch.manual_seed(seed)
    net = Net().cuda()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    return net, opt


def train_step(net, opt, batch, seq):
    x = torch.randint(0, 1000, (batch, seq), device="cuda")
    out = net(x)
    loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), x.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def leak_check(name, interval):
    """A planted leak of 2 MiB a step, sampled every step (interval=1) and at the default sampling
    (interval=None: every 0.1 s): told within 30 s or 100 steps of its start, whichever is later."""
    net, opt = make()
    alerts, leaked = [], []
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        mon = gpumon.GPUMonitor(interval=interval, logger=False, on_alert=alerts.append, min_headroom=None)
        t0 = time.monotonic()
        for step in range(20000):
            train_step(net, opt, 16, 128 + 64 * (step % 4))
            leaked.append(torch.empty(2 * MIB, dtype=torch.uint8, device="cuda"))  # the planted leak
            mon.step()
            if alerts or time.monotonic() - t0 > 60:
                break
        seconds = time.monotonic() - t0
        mon.close()
    leak_alerts = [a for a in alerts if a["kind"] == "leak"]
    nwarn = sum(issubclass(x.category, gpumon.LeakWarning) for x in w)
    a = leak_alerts[0] if leak_alerts else {}
    results["figures"][f"{name}_alert_step"] = a.get("step")
    results["figures"][f"{name}_alert_seconds"] = seconds if a else None
    results["figures"][f"{name}_rate_mib_per_step"] = a.get("rate_bytes_per_step", 0) / MIB if a else None
    # within 30 s or 100 steps of its start, whichever is later (no alert before a run is 20 s old)
    soon = a and (seconds <= 30 or a["step"] <= 100)
    check(name, leak_alerts and soon and nwarn == 1 and abs(a["rate_bytes_per_step"] / MIB - 2) < 0.2
          and a.get("room") == "free" and "against the GPU's free memory" in a["message"],
          f"alert at step {a.get('step')} after {seconds:.1f} s, rate {a.get('rate_bytes_per_step', 0) / MIB:.3f} "
          f"MiB/step, steps to OOM {a.get('steps_to_oom')} against {a.get('room')}, {nwarn} LeakWarning; "
          f"message: {a.get('message')}")
    del leaked, net, opt
    torch.cuda.empty_cache()


def clean_check():
    import random
    rnd = random.Random(1)
    net, opt = make(1)
    alerts = []
    first_suspected = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mon = gpumon.GPUMonitor(interval=1, logger=False, on_alert=alerts.append, min_headroom=None)
        for step in range(600):
            seq = rnd.choice([64, 96, 128, 192, 256, 384])
            if step == 300:
                seq = 1024  # a rare long batch: the caching allocator keeps its blocks
            train_step(net, opt, 16, seq)
            mon.step()
            if first_suspected is None and mon.leak()["verdict"] == "leak":
                first_suspected = step + 1
        verdict = mon.leak()
        mon.close()
    check("clean", not alerts and verdict["verdict"] != "leak",
          f"600 steps, warm-up + dynamic shapes + one 1024 batch: verdict {verdict['verdict']}, "
          f"alerts {len(alerts)}, first online SUSPECTED {first_suspected}")
    del net, opt
    torch.cuda.empty_cache()


def cap_check():
    if not hasattr(torch.cuda, "get_per_process_memory_fraction"):
        check("cap", True, "this torch cannot tell its memory fraction: skipped")
        return
    frac = 0.05
    torch.cuda.set_per_process_memory_fraction(frac)
    cap = frac * torch.cuda.get_device_properties(0).total_memory
    net, opt = make()
    alerts, leaked, at_alert = [], [], None
    mon = gpumon.GPUMonitor(interval=1, logger=False, on_alert=alerts.append, min_headroom=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in range(400):
            train_step(net, opt, 16, 128)
            leaked.append(torch.empty(8 * MIB, dtype=torch.uint8, device="cuda"))
            mon.step()
            if alerts:
                at_alert = torch.cuda.memory_reserved(0)  # the cap bounds what the allocator reserves
                break
    mon.close()
    torch.cuda.set_per_process_memory_fraction(1.0)
    a = alerts[0] if alerts else {}
    want = (cap - at_alert) / a["rate_bytes_per_step"] if a and at_alert else None
    got = a.get("steps_to_oom")
    check("cap", want and got and abs(got - want) <= 0.15 * want and a.get("room") == "cap",
          f"cap {cap / 2**30:.2f} GiB; alert at step {a.get('step')} with {at_alert} B reserved; steps to OOM "
          f"{got} against {a.get('room')} (expected about {want} against the cap)")
    del leaked, net, opt
    torch.cuda.empty_cache()


def section_check():
    net, opt = make(2)
    mon = gpumon.GPUMonitor(interval=1000, logger=False, min_headroom=None)
    ops = {
        "attention": lambda: F.scaled_dot_product_attention(*(torch.randn(16, 8, 1024, 64, device="cuda") for _ in range(3))),
        "forward": lambda: net(torch.randint(0, 1000, (16, 256), device="cuda")),
        "train_step": lambda: train_step(net, opt, 16, 256),
        "matmul": lambda: torch.randn(4096, 4096, device="cuda") @ torch.randn(4096, 4096, device="cuda"),
    }
    ok, rows = True, []
    for name, op in ops.items():
        op()  # warm up (optimizer state, cuBLAS workspaces)
        torch.cuda.synchronize()
        # torch alone
        torch.cuda.reset_peak_memory_stats()
        a0 = torch.cuda.memory_allocated()
        y = op()
        torch_delta = torch.cuda.max_memory_allocated() - a0
        del y
        # section(), and torch's own figure for the same block
        a1 = torch.cuda.memory_allocated()
        with mon.section(name) as s:
            y = op()
        same_run = torch.cuda.max_memory_allocated() - a1
        del y
        # the claim is equality with torch's figure for the same block; a call of the op just
        # before is shown for reference (a train step's allocations differ from one call to the next)
        good = s.exact and s.peak_delta_bytes == same_run and s.start_bytes == a1
        ok &= good
        rows.append(f"{name}: section {s.peak_delta_bytes} B, torch same run {same_run} B "
                    f"(the op run just before: {torch_delta} B)")
    mon.close()
    check("section", ok, "; ".join(rows))
    del net, opt
    torch.cuda.empty_cache()


def tb_check(tmp):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    net, opt = make(3)
    logdir = os.path.join(tmp, "tb")
    samples = []
    mon = gpumon.GPUMonitor(interval=10, logger=False, tensorboard=logdir, min_headroom=None)
    for step in range(100):
        train_step(net, opt, 16, 128 + 32 * (step % 5))
        s = mon.step()
        if s:
            samples.append(s)
    mon.close()
    ea = EventAccumulator(logdir, size_guidance={"scalars": 0})
    ea.Reload()
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
    bad = []
    tags = {"memory/allocated_mib": "allocated", "memory/peak_mib": "peak", "memory/reserved_mib": "reserved",
            "memory/process_mib": "process", "gpu/used_mib": "device_used"}
    for tag, attr in tags.items():
        want = [(s.step, s.time, f32(getattr(s, attr) / MIB)) for s in samples if getattr(s, attr) is not None]
        if not want:
            bad.append(f"{tag}: no sample had a value")
            continue
        got = [(e.step, e.wall_time, e.value) for e in ea.Scalars(tag)]
        if got != want:
            bad.append(f"{tag}: got {got[:2]}..., want {want[:2]}...")
    files = os.listdir(logdir)
    check("tb", not bad and len(files) == 1 and files[0].startswith("events.out.tfevents."),
          f"{len(samples)} samples x {len(tags)} tags read back by EventAccumulator; file {files}; "
          + ("; ".join(bad) if bad else "all exact"))
    del net, opt
    torch.cuda.empty_cache()


def nvml_check():
    try:
        import pynvml
    except ImportError:
        check("nvml", True, "pynvml not installed: skipped")
        return
    x = torch.empty(512 * MIB, dtype=torch.uint8, device="cuda")
    mon = gpumon.GPUMonitor(interval=1, logger=False, min_headroom=None)
    s = mon.sample()
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(mon.nvml_index)
    theirs = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
    mem = pynvml.nvmlDeviceGetMemoryInfo(h)
    pynvml.nvmlShutdown()
    mon.close()
    mine = theirs.get(os.getpid())
    results["figures"]["unaccounted_mib"] = s.unaccounted / MIB if s.unaccounted is not None else None
    check("nvml", mine is not None and s.process == mine and s.device_total == mem.total,
          f"process {s.process} B (pynvml {mine}), reserved {s.reserved} B, unaccounted "
          f"{s.unaccounted} B, device total {s.device_total} (pynvml {mem.total})")
    del x


def record_check(gpumon_bin, tmp):
    try:
        import pynvml
    except ImportError:
        check("record", True, "pynvml not installed: skipped")
        return
    rec = os.path.join(tmp, "record.gpumon")
    x = torch.empty(768 * MIB, dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()
    with gpumon.GPUMonitor(interval=1, logger=False, min_headroom=None, record=rec) as mon:
        mon.step()
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(mon.nvml_index)
        theirs = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h)}
        pynvml.nvmlShutdown()
        mon.step()
    del x
    mine = theirs.get(os.getpid())
    db = sqlite3.connect(rec)
    rows = db.execute("SELECT used_bytes FROM process_samples WHERE pid = ? AND gone = 0 ORDER BY t_ns",
                      (os.getpid(),)).fetchall()
    others = db.execute("SELECT count(DISTINCT pid) FROM processes WHERE pid != ?", (os.getpid(),)).fetchone()[0]
    db.close()
    r = subprocess.run([gpumon_bin, "report", "--json", rec], capture_output=True, text=True, timeout=60)
    doc = json.loads(r.stdout) if r.returncode == 0 else None
    peak = doc["peak"]["bytes"] if doc else None
    same = doc is not None and gpumon.report(rec) == doc
    check("record", mine is not None and rows and rows[-1][0] == mine and peak == mine and same,
          f"recorded rows of this process {rows} B (pynvml {mine} B), other processes {others}, "
          f"gpumon report peak {peak} B (exit {r.returncode}); gpumon.report(path) == its --json: {same}")


def run_check(gpumon_bin, tmp):
    rec = os.path.join(tmp, "example.gpumon")
    env = dict(os.environ)
    r = subprocess.run([gpumon_bin, "run", "-q", "-o", rec, "--", sys.executable, "examples/train_torch.py",
                        "--steps", "150", "--interval", "10"], env=env, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        check("run", False, f"gpumon run exited {r.returncode}: {r.stderr[-500:]}")
        return
    db = sqlite3.connect(rec)
    src = db.execute("SELECT framework FROM framework_sources").fetchall()
    steps = [s for (s,) in db.execute("SELECT step FROM framework_samples ORDER BY t_ns")]
    ev = db.execute("SELECT count(*) FROM events WHERE kind = 'step'").fetchone()[0]
    procs = db.execute("SELECT count(*) FROM process_samples WHERE pid IN "
                       "(SELECT pid FROM framework_sources)").fetchone()[0]
    check("run", src == [("torch",)] and steps == list(range(10, 151, 10)) and ev == 15 and procs >= 1,
          f"framework sources {src}, sample steps {steps}, step events {ev}, NVML rows of the job {procs}")


def overhead_check(rounds, steps):
    net, opt = make(4)
    for _ in range(20):
        train_step(net, opt, 32, 256)
    torch.cuda.synchronize()
    lines = []
    mon = gpumon.GPUMonitor(logger=lines.append, min_headroom=None)  # the defaults: a sample every 0.25 s
    times = {"off": [], "on": []}
    for r in range(rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(steps):
                train_step(net, opt, 32, 256)
                if mode == "on":
                    mon.step()
            torch.cuda.synchronize()
            times[mode].append(time.perf_counter() - t)
    mon.close()
    off, on = statistics.median(times["off"]), statistics.median(times["on"])
    # each round's on/off pair ran back to back: the median of the pairs' ratios cancels drift
    slowdown = (statistics.median(b / a for a, b in zip(times["off"], times["on"])) - 1) * 100
    # what the monitor itself spent: sample() cost times the samples taken (a log line each), over
    # the time of the loops it watched
    smon = gpumon.GPUMonitor(framework="torch", logger=lambda line: None, min_headroom=None)
    per_sample = min(timeit.repeat(smon.sample, number=50, repeat=5)) / 50
    smon.close()
    estimate = per_sample * len(lines) / sum(times["on"]) * 100
    step_ms = off / steps * 1e3
    results["figures"].update({"loop_step_ms": step_ms, "slowdown_pct": slowdown, "sample_us": per_sample * 1e6,
                               "slowdown_estimate_pct": estimate, "rounds": rounds, "steps_per_block": steps,
                               "log_lines": len(lines)})
    check("overhead", slowdown <= 0.5,
          f"transformer (4 layers, d 512, batch 32 x 256) {step_ms:.2f} ms/step; default sampling (0.25 s) with "
          f"the log sink, {len(lines)} samples: median block {on:.3f} s vs {off:.3f} s without, median paired slowdown {slowdown:+.3f} % "
          f"(goal <= 0.5 %, {rounds} pairs of {steps} steps); "
          f"a sample costs {per_sample * 1e6:.0f} us, i.e. {estimate:.3f} % of the loop")
    del net, opt
    torch.cuda.empty_cache()


def step_check():
    mon = gpumon.GPUMonitor(framework="torch", interval=1 << 40, logger=False, min_headroom=None)
    ns = min(timeit.repeat(mon.step, number=1_000_000, repeat=3)) / 1_000_000 * 1e9
    mon.close()
    # the default: a clock read a step (and a sample every 0.25 s, a few within the timing)
    mon = gpumon.GPUMonitor(framework="torch", logger=False, min_headroom=None)
    ns_time = min(timeit.repeat(mon.step, number=1_000_000, repeat=3)) / 1_000_000 * 1e9
    mon.close()
    results["figures"]["step_ns"] = ns
    results["figures"]["step_time_ns"] = ns_time
    check("step", ns <= 1000 and ns_time <= 1000,
          f"step() between samples {ns:.0f} ns counting steps, {ns_time:.0f} ns by time (goal <= 1000 ns)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu-out")
    ap.add_argument("--gpumon", required=True, help="the gpumon program")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--steps", type=int, default=200, help="steps per timed block")
    ap.add_argument("--only", help="comma-separated checks to run (default: all)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    results["env"] = {"torch": torch.__version__, "python": sys.version.split()[0], "gpumon": gpumon.__version__,
                      "gpu": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    say(f"env: {results['env']}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, fn in (("step", step_check), ("leak", lambda: leak_check("leak", 1)),
                         ("leaktime", lambda: leak_check("leaktime", None)), ("clean", clean_check),
                         ("cap", cap_check), ("section", section_check), ("tb", lambda: tb_check(tmp)), ("nvml", nvml_check),
                         ("record", lambda: record_check(a.gpumon, tmp)),
                         ("run", lambda: run_check(a.gpumon, tmp)),
                         ("overhead", lambda: overhead_check(a.rounds, a.steps))):
            if a.only and name not in a.only.split(","):
                continue
            t = time.time()
            try:
                fn()
            except Exception as e:  # one check's crash does not hide the others
                import traceback
                check(name, False, f"raised {type(e).__name__}: {e}\n{traceback.format_exc()}")
            say(f"   ({name}: {time.time() - t:.1f} s)")
    results["seconds"] = time.time() - t0
    failed = [c["name"] for c in results["checks"] if not c["ok"]]
    say(f"== {len(results['checks']) - len(failed)} passed, {len(failed)} failed {failed} in {results['seconds']:.0f} s")
    with open(os.path.join(a.out, "python_check.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(a.out, "python_check.txt"), "w") as f:
        f.write("\n".join(log_lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
