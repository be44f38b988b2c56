#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the report documents (the run model's document, format 2: docs/report.md) that the HTML
page tests render: run it from anywhere to regenerate tests/html/fixtures/*.json after a change of
the document's format. The series are made by formulas (no randomness), so the files come out the
same every time. fixtures/h200_record.json is what `gpumon report --html` embeds in its page (the
document with its timeline) for examples/recordings/h200_train_leak.gpumon, a recording of a real
H200: made when GPUMON_BIN names a built gpumon."""
import json
import math
import os
import subprocess
import tempfile

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
GIB = 1 << 30
MIB = 1 << 20
H200_TOTAL = 150754820096


def write(name, doc):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def series(kind, dev=None, pid=None, device=None, segment=None, framework=None):
    return {"kind": kind, "dev": dev, "pid": pid, "device": device, "segment": segment, "framework": framework}


def verdict(v, s, **figures):
    """A verdict of the document: the detector's figures default to "not available"."""
    out = {"verdict": v, "series": s, "rate_bytes_per_step": None, "rate_bytes_per_second": None,
           "start_step": None, "start_time": None, "confidence": None, "floor_bytes": None, "points": 0,
           "alert": False, "alert_time": None, "room": None, "room_bytes": None, "steps_to_oom": None,
           "seconds_to_oom": None}
    out.update(figures)
    return out


def who(pid, user=None, command=None):
    return {"pid": pid, "user": user, "command": command}


def device(dev, name, uuid, total, peak=None, job_peak=None, others_at=None, others_peak=0, job_mean=None):
    return {"dev": dev, "name": name, "uuid": uuid, "pci_bus_id": None, "total_bytes": total, "lost": False,
            "peak": peak, "job_peak": job_peak, "others_at_job_peak_bytes": others_at,
            "others_peak_bytes": others_peak, "job_mean_bytes": job_mean}


def source(path, type_, kind, command=None, host=None, start=None, duration=None, exit_status=None, damage=None,
           records=0):
    return {"path": path, "type": type_, "kind": kind, "command": command, "host": host, "start_utc": start,
            "duration_s": duration, "exit_status": exit_status, "damage": damage, "records": records}


def leak_run():
    n = 400
    t = [round(i * 2.03, 2) for i in range(n)]  # 810 s
    step = list(range(n))
    # allocated: a steady 20 GiB until step 120, then 4 MiB more each step, with a sawtooth of
    # activations on top; max_allocated a step above; reserved in 2 GiB blocks.
    floor = [20 * GIB + max(0, s - 120) * 4 * MIB for s in step]
    alloc = [f + (i % 7) * 256 * MIB for i, f in enumerate(floor)]
    max_alloc = []
    m = 0
    for a in alloc:
        m = max(m, a + 3 * GIB)
        max_alloc.append(m)
    reserved = [int(math.ceil((a + 3 * GIB) / (2 * GIB)) * 2 * GIB) for a in alloc]
    job_used = [r + 600 * MIB for r in reserved]
    loader = [None if i < 10 else 400 * MIB for i in range(n)]  # starts later
    other = [10 * GIB if 100 <= i < 250 else None for i in range(n)]  # a colleague's job, then gone
    dev0_used = [a + (b or 0) + (c or 0) for a, b, c in zip(job_used, loader, other)]
    dev0_max = [u + (512 * MIB if i % 50 == 0 else 0) for i, u in enumerate(dev0_used)]
    dev0_used[200] = None  # a missed sample: a gap, not 0
    dev1_used = [int(5 * GIB + 2 * GIB * math.sin(i / 30)) for i in range(n)]
    peak_i = max(range(n), key=lambda i: dev0_max[i])
    alice = who(1234, "alice", "python train.py --batch-size 64")
    fw = series("framework", dev=0, pid=1234, device=0, segment=0, framework="torch")
    leak = verdict("leak", fw, rate_bytes_per_step=4194304.0, rate_bytes_per_second=2066159.0, start_step=120,
                   start_time=243.6, confidence=0.99, floor_bytes=21 * GIB, points=400, alert=True,
                   alert_time=300.2, room="free", room_bytes=13 * GIB, steps_to_oom=3100.0, seconds_to_oom=6293.0)
    job = verdict("leak", series("job", dev=0), rate_bytes_per_second=2100000.0, start_time=250.0, confidence=0.97,
                  floor_bytes=23 * GIB, points=400, alert=True, alert_time=320.0, room="free", room_bytes=13 * GIB,
                  seconds_to_oom=6400.0)
    dev1 = verdict("none", series("device", dev=1), confidence=0.93, points=400, room="free",
                   room_bytes=133 * GIB)
    alert = dict(leak, time=300.2, kind="leak", live=True, dev=0, floor_bytes=20 * GIB + 400 * MIB,
                 room_bytes=14 * GIB, steps_to_oom=3500.0, seconds_to_oom=7100.0)
    peak = {"bytes": 80123456789, "time": 402.5, "owner": alice, "largest": None}
    return {
        "format": 2,
        "source": source("runs/train-2026-12-02.gpumon", "recording", "run", "python train.py --batch-size 64",
                         "node1", "2026-12-02T13:00:00Z", 812.4, 0, records=2400),
        "devices": [device(0, "NVIDIA H200", "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51", H200_TOTAL,
                           peak=dict(peak, bytes=90 * GIB), job_peak=peak, others_at=10 * GIB,
                           others_peak=10 * GIB + 400 * MIB, job_mean=60 * GIB),
                    device(1, "NVIDIA H200", "GPU-9a1b2c3d-0000-1111-2222-333344445555", H200_TOTAL,
                           peak={"bytes": 7 * GIB, "time": 95.0, "owner": alice, "largest": None})],
        "leak": leak,
        "series": [leak, job, dev1],
        "peak": dict(peak, what="job", dev=0),
        "windows": [{"bytes": 60 * GIB, "time": 390.0, "owner": alice, "largest": None, "start": 0.0, "end": 400.0},
                    {"bytes": 80123456789, "time": 402.5, "owner": None, "largest": None, "start": 400.0,
                     "end": 812.4}],
        "fragmentation": {"bytes": 2147483648, "time": 402.5, "pid": 1234, "dev": None},
        "unaccounted": {"bytes": 524288000, "time": 402.5, "pid": 1234, "dev": 0},
        "oom": None,
        "alerts": [alert],
        "events": [{"time": 300.2, "kind": "alert", "text": "leak suspected: 4 MiB a step"},
                   {"time": 812.4, "kind": "exit", "text": "exit status 0"}],
        "events_dropped": 0,
        "timeline": {
            "devices": [{"dev": 0, "total_bytes": H200_TOTAL, "t": t, "used": dev0_used,
                         "used_max": dev0_max, "reserved": [644939776] * n},
                        {"dev": 1, "total_bytes": H200_TOTAL, "t": t, "used": dev1_used,
                         "used_max": dev1_used, "reserved": [644939776] * n}],
            "processes": [
                {"dev": 0, "pid": 1234, "user": "alice", "command": "python train.py --batch-size 64", "job": True,
                 "t": t, "used": job_used},
                {"dev": 0, "pid": 1240, "user": "alice", "command": "python train.py (data loader)", "job": True,
                 "t": t, "used": loader},
                {"dev": 0, "pid": 5555, "user": "bob", "command": "python eval.py", "job": False,
                 "t": t, "used": other},
                {"dev": 1, "pid": 1234, "user": "alice", "command": "python train.py --batch-size 64", "job": True,
                 "t": t, "used": dev1_used}],
            "framework": [{"pid": 1234, "device": 0, "framework": "torch", "segment": 0, "t": t,
                           "allocated": alloc, "reserved": reserved, "max_allocated": max_alloc, "step": step}],
        },
    }, peak_i


def oom():
    n = 120
    t = [i * 0.5 for i in range(n)]
    job = [min(60 * GIB, 40 * GIB + i * 200 * MIB) for i in range(n)]
    other = [60 * GIB + ((i - 60) * 330 * MIB if i > 60 else 0) for i in range(n)]
    used = [a + b for a, b in zip(job, other)]
    alice, bob = who(4321, "alice", "python train.py"), who(9999, "bob", "python big_eval.py")
    none = verdict("none", series("job", dev=0), confidence=0.97, points=120, room="free", room_bytes=GIB)
    return {
        "format": 2,
        "source": source("oom.gpumon", "recording", "run", "python train.py", "node7", "2026-12-02T09:15:00Z", 60.1,
                         1, records=500),
        "devices": [device(0, "NVIDIA H200", "GPU-04b38c5d", H200_TOTAL,
                           peak={"bytes": 149264793600, "time": 59.5, "owner": bob, "largest": None},
                           job_peak={"bytes": 60 * GIB, "time": 50.0, "owner": alice, "largest": bob},
                           others_at=60 * GIB, others_peak=79 * GIB, job_mean=55 * GIB)],
        "leak": none,
        "series": [none],
        "peak": {"bytes": 149264793600, "time": 59.5, "owner": bob, "largest": None, "what": "device", "dev": 0},
        "windows": [],
        "fragmentation": None,
        "unaccounted": None,
        "oom": {"time": 59.9, "dev": 0,
                "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "cause": "co-tenant", "also_leak": False, "by_early_figure": False,
                "figures": {"total_bytes": H200_TOTAL, "used_bytes": 149264793600, "job_bytes": 60 * GIB,
                            "others_bytes": 79 * GIB, "top_other": bob, "top_other_bytes": 84840284160,
                            "floor_bytes": 120 * GIB, "rise_seconds": 30.0, "early_bytes": 40 * GIB,
                            "allocated_bytes": None, "reserved_bytes": None},
                "holders": [dict(bob, bytes=84840284160, job=False), dict(alice, bytes=64424509440, job=True)],
                "last_seconds": [{"time": 57.0 + i * 0.5, "used_bytes": used[114 + i], "total_bytes": H200_TOTAL}
                                 for i in range(6)],
                "signs": 1},
        "alerts": [{"time": 45.0, "kind": "headroom", "live": False, "dev": 0, "free_bytes": 7 * GIB,
                    "total_bytes": H200_TOTAL}],
        "events": [{"time": 59.9, "kind": "oom", "text": "CUDA out of memory (pid 4321)"},
                   {"time": 60.1, "kind": "exit", "text": "exit status 1"}],
        "events_dropped": 0,
        "timeline": {
            "devices": [{"dev": 0, "total_bytes": H200_TOTAL, "t": t, "used": used, "used_max": used,
                         "reserved": [644939776] * n}],
            "processes": [dict(alice, dev=0, job=True, t=t, used=job),
                          dict(bob, dev=0, job=False, t=t, used=other)],
            "framework": []},
    }


def csv_minimal():
    """A CSV of the framework's allocated figure: its one process has the stand-in pid 0."""
    n = 50
    fw = series("framework", pid=0, segment=0)
    short = verdict("insufficient_data", fw, points=50)
    return {
        "format": 2,
        "source": source("alloc.csv", "csv", "run", duration=49.0, records=51),
        "devices": [],
        "leak": short,
        "series": [short],
        "peak": {"bytes": 3 * GIB + 49 * 10 * MIB, "time": 49.0, "owner": who(0), "largest": None,
                 "what": "framework", "dev": None},
        "windows": [], "fragmentation": None, "unaccounted": None, "oom": None, "alerts": [], "events": [],
        "events_dropped": 0,
        "timeline": {"devices": [], "processes": [],
                     "framework": [{"pid": 0, "device": None, "framework": None, "segment": 0,
                                    "t": [float(i) for i in range(n)], "allocated": [3 * GIB + i * 10 * MIB
                                                                                     for i in range(n)],
                                    "reserved": [None] * n, "max_allocated": [None] * n, "step": [None] * n}]},
    }


HOSTILE = "</script><img src=x onerror=alert(1)>"


def hostile():
    n = 20
    t = [float(i) for i in range(n)]
    cmd = "python train.py --name '" + HOSTILE + "' \"quoted\" & more \u2028 \u8bad\u7ec3 \u00fc"
    owner = who(31337, "eve<b>\"'", cmd)
    none = verdict("none", series("job", dev=0), confidence=0.9, points=20)
    return {
        "format": 2,
        "source": source("evil</title><script>alert(3)</script>.gpumon", "recording", "run", cmd, "<i>host</i>",
                         "2026-12-02T13:00:00Z", 19.0, 0,
                         "page 3 of table <script>alert(4)</script> is unreadable & lost", 40),
        "devices": [device(0, "NVIDIA <H200>", "GPU-\"x\"", H200_TOTAL)],
        "leak": none,
        "series": [none],
        "peak": {"bytes": 5 * GIB, "time": 10.0, "owner": owner, "largest": None, "what": "job", "dev": 0},
        "windows": [{"bytes": 5 * GIB, "time": 10.0, "owner": owner, "largest": None, "start": 0.0, "end": 19.0}],
        "fragmentation": None, "unaccounted": None,
        "oom": {"time": 19.0, "dev": 0, "cause": "co-tenant", "message": HOSTILE, "also_leak": False,
                "by_early_figure": False,
                "figures": {"total_bytes": H200_TOTAL, "used_bytes": 6 * GIB, "job_bytes": 5 * GIB,
                            "others_bytes": GIB, "top_other": who(666, HOSTILE, HOSTILE + " \u2029 end"),
                            "top_other_bytes": GIB, "floor_bytes": None, "rise_seconds": None,
                            "early_bytes": None, "allocated_bytes": None, "reserved_bytes": None},
                "holders": [dict(owner, bytes=5 * GIB, job=True)], "last_seconds": [], "signs": 1},
        # a distributed job whose names are markup: its id, rendezvous and hosts' names
        "hosts": [{"host": 0, "name": HOSTILE, "first_dev": 0, "gpus": 1, "clock_offset_s": 0.0, "steps_checked": 0,
                   "step_skew_s": None},
                  {"host": 1, "name": "<b>node-b</b>", "first_dev": 1, "gpus": 0, "clock_offset_s": 0.5,
                   "steps_checked": 0, "step_skew_s": None}],
        "ranks": [{"rank": 0, "local_rank": 0, "world_size": 2, "node_rank": 0, "job_id": HOSTILE,
                   "launcher": "torchrun", "master": HOSTILE, "dev": 0, "pid": 31337, "peak_bytes": 5 * GIB,
                   "mean_bytes": 3 * GIB, "last_bytes": 5 * GIB, "first_time": 0.0, "last_time": 19.0,
                   "present": True, "leak": none, "oom": True, "host": 0}],
        "rank_skew": None,
        "alerts": [],
        "events": [{"time": 5.0, "kind": "alert", "text": "<script>alert(2)</script>"},
                   {"time": 19.0, "kind": "exit<b>", "text": HOSTILE}],
        "events_dropped": 0,
        "timeline": {
            "devices": [{"dev": 0, "total_bytes": H200_TOTAL, "t": t, "used": [i * 256 * MIB for i in range(n)],
                         "used_max": [i * 256 * MIB for i in range(n)], "reserved": [0] * n}],
            "processes": [{"dev": 0, "pid": 31337, "user": None, "command": HOSTILE, "job": True, "t": t,
                           "used": [i * 256 * MIB for i in range(n)]}],
            "framework": [{"pid": 31337, "device": 0, "framework": HOSTILE, "segment": 0, "t": [], "allocated": [],
                           "reserved": [], "max_allocated": [], "step": []}]},
    }


def nulls():
    nothing = verdict(None, series(None))
    nothing.update({k: None for k in nothing if k != "verdict"})
    return {
        "format": 2,
        "source": {k: None for k in source(None, None, None)},
        "devices": [{"dev": None, "name": None, "uuid": None, "pci_bus_id": None, "total_bytes": None, "lost": None,
                     "peak": None, "job_peak": None, "others_at_job_peak_bytes": None, "others_peak_bytes": None,
                     "job_mean_bytes": None}],
        "leak": nothing,
        "series": [nothing],
        "peak": {"bytes": None, "time": None, "owner": None, "largest": None, "what": None, "dev": None},
        "windows": [{"bytes": None, "time": None, "owner": None, "largest": None, "start": None, "end": None}],
        "fragmentation": {"bytes": None, "time": None, "pid": None, "dev": None},
        "unaccounted": {"bytes": None, "time": None, "pid": None, "dev": None},
        "oom": {"time": None, "dev": None, "message": None, "cause": None, "also_leak": None, "by_early_figure": None,
                "figures": None, "holders": [{"pid": None, "user": None, "command": None, "bytes": None, "job": None}],
                "last_seconds": [{"time": None, "used_bytes": None, "total_bytes": None}], "signs": None},
        "alerts": [{"time": None, "kind": None, "live": None, "dev": None}],
        "events": [{"time": None, "kind": None, "text": None}],
        "events_dropped": None,
        "timeline": {
            "devices": [{"dev": None, "total_bytes": None, "t": [0.0, 1.0, 2.0, 3.0, None],
                         "used": [None, 5 * GIB, None, 7 * GIB, 9 * GIB], "used_max": None,
                         "reserved": [None, None, None, None, None]},
                        {"dev": 1, "total_bytes": None, "t": [], "used": [], "used_max": [], "reserved": []}],
            "processes": [{"dev": None, "pid": None, "user": None, "command": None, "job": None, "t": [], "used": []}],
            "framework": [{"pid": None, "device": None, "framework": None, "segment": None, "t": None, "step": None,
                           "allocated": None, "reserved": None, "max_allocated": None}]},
    }


def no_timeline():
    doc = csv_minimal()
    del doc["timeline"]
    doc["source"]["path"] = "summary-only.csv"
    doc["alerts"] = []
    doc["events"] = []
    return doc


def ranks():
    """A torchrun job of 8 ranks on two nodes (4 GPUs each), read together from both nodes'
    recordings: rank 3 leaks, rank 5 ran out of memory, rank 6's process gave no figure (no
    timeline, its figures n/a)."""
    n = 150
    t = [i * 2.0 for i in range(n)]  # 298 s
    base = [8 * GIB + r * 512 * MIB for r in range(8)]
    used = {}
    for r in range(8):
        if r == 3:
            used[r] = [base[r] + i * 4 * MIB for i in range(n)]
        elif r == 5:
            used[r] = [base[r] + (60 * GIB if i >= 140 else 0) for i in range(n)]
        else:
            used[r] = [base[r] + (i % 5) * 64 * MIB for i in range(n)]
    cmd = "python train.py --nodes 2"
    hosts = [{"host": 0, "name": "node-a", "first_dev": 0, "gpus": 4, "clock_offset_s": 0.0, "steps_checked": 0,
              "step_skew_s": None},
             {"host": 1, "name": "node-b", "first_dev": 4, "gpus": 4, "clock_offset_s": 0.012, "steps_checked": 140,
              "step_skew_s": 0.004}]
    leak3 = verdict("leak", dict(series("process", dev=3, pid=1003), rank=3), rate_bytes_per_second=2097152.0,
                    start_time=20.0, confidence=0.98, floor_bytes=base[3], points=n, room="free",
                    room_bytes=60 * GIB, seconds_to_oom=30000.0)
    rows = []
    for r in range(8):
        known = r != 6
        y = used[r]
        rows.append({"rank": r, "local_rank": r % 4, "world_size": 8, "node_rank": r // 4, "job_id": "job7",
                     "launcher": "torchrun", "master": "node-a:29500", "dev": r, "pid": 1000 + r % 4,
                     "peak_bytes": max(y) if known else None,
                     "mean_bytes": sum(y) // n if known else None, "last_bytes": y[-1] if known else None,
                     "first_time": 0.0, "last_time": t[-1], "present": r != 5,
                     "leak": leak3 if r == 3 else None if r == 6 else
                     verdict("none", dict(series("process", dev=r, pid=1000 + r % 4), rank=r), confidence=0.95,
                             points=n),
                     "oom": r == 5, "host": r // 4})
    known = [w for w in rows if w["peak_bytes"] is not None]
    pmin, pmax = min(known, key=lambda w: w["peak_bytes"]), max(known, key=lambda w: w["peak_bytes"])
    mmin, mmax = min(known, key=lambda w: w["mean_bytes"]), max(known, key=lambda w: w["mean_bytes"])
    skew = {"ranks": len(known), "job_id": "job7", "peak_min_bytes": pmin["peak_bytes"], "peak_min_rank": pmin["rank"],
            "peak_max_bytes": pmax["peak_bytes"], "peak_max_rank": pmax["rank"],
            "peak_skew_bytes": pmax["peak_bytes"] - pmin["peak_bytes"], "mean_min_bytes": mmin["mean_bytes"],
            "mean_min_rank": mmin["rank"], "mean_max_bytes": mmax["mean_bytes"], "mean_max_rank": mmax["rank"],
            "mean_skew_bytes": mmax["mean_bytes"] - mmin["mean_bytes"]}
    worker = {r: who(1000 + r % 4, "alice", cmd) for r in range(8)}
    job_leak = verdict("leak", dict(series("job", dev=3), rank=3), rate_bytes_per_second=2097152.0, start_time=20.0,
                       confidence=0.98, floor_bytes=base[3], points=n, room="free", room_bytes=60 * GIB,
                       seconds_to_oom=30000.0)
    devices = []
    for d in range(8):
        dev = device(d, "NVIDIA H200", "GPU-%08x-0000-0000-0000-000000000000" % d, H200_TOTAL,
                     job_peak={"bytes": max(used[d]), "time": t[used[d].index(max(used[d]))],
                               "owner": worker[d], "largest": None} if d != 6 else None,
                     job_mean=sum(used[d]) // n if d != 6 else None)
        dev["host"] = d // 4
        devices.append(dev)
    oom_t = 281.0
    return {
        "format": 2,
        "source": source("node-a.gpumon + node-b.gpumon", "recordings", "run", "torchrun --nnodes 2 " + cmd,
                         "node-a", "2026-12-02T10:00:00Z", 298.0, 1, records=4000),
        "hosts": hosts,
        "devices": devices,
        "leak": job_leak,
        "series": [job_leak, leak3],
        "peak": {"bytes": max(used[5]), "time": 280.0, "owner": worker[5], "largest": None, "what": "job", "dev": 5},
        "windows": [],
        "fragmentation": None,
        "unaccounted": None,
        "frameworks": [],
        "ranks": rows,
        "rank_skew": skew,
        "oom": {"time": oom_t, "dev": 5, "pid": 1001, "rank": 5,
                "message": "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB",
                "cause": "transient peak", "causes": ["transient peak"], "also_leak": False, "by_early_figure": False,
                "figures": {"total_bytes": H200_TOTAL, "used_bytes": max(used[5]) + 512 * MIB,
                            "job_bytes": max(used[5]), "others_bytes": 0, "top_other": None, "top_other_bytes": None,
                            "floor_bytes": base[5], "rise_seconds": 1.0, "early_bytes": None,
                            "allocated_bytes": None, "reserved_bytes": None},
                "holders": [dict(worker[5], bytes=used[5][-1], job=True, rank=5)],
                "last_seconds": [], "signs": 1},
        "alerts": [],
        "events": [{"time": oom_t, "kind": "oom", "text": "[rank5]: CUDA out of memory (pid 1001)"},
                   {"time": 298.0, "kind": "exit", "text": "exit status 1"}],
        "events_dropped": 0,
        "timeline": {
            "devices": [{"dev": d, "total_bytes": H200_TOTAL, "t": t,
                         "used": [v + 512 * MIB for v in used[d]] if d != 6 else [512 * MIB] * n,
                         "used_max": None, "reserved": [644939776] * n} for d in range(8)],
            "processes": [dict(worker[r], dev=r, job=True, t=t, used=used[r]) for r in range(8) if r != 6],
            "processes_left_out": 0,
            "framework": []},
    }


def h200_record(gpumon):
    """The document `gpumon report --html` embeds for the bundled recording of a real H200."""
    recording = os.path.join(HERE, "../../../examples/recordings/h200_train_leak.gpumon")
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "page.html")
        subprocess.run([gpumon, "report", os.path.abspath(recording), "--html", page], check=True,
                       stdout=subprocess.DEVNULL)
        raw = open(page, encoding="utf-8").read()
    start = raw.index('<script type="application/json" id="gpumon-data">')
    doc = json.loads(raw[raw.index(">", start) + 1:raw.index("</script>", start)])
    doc["source"]["path"] = "examples/recordings/h200_train_leak.gpumon"
    return doc


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    write("leak_run.json", leak_run()[0])
    write("oom.json", oom())
    write("csv_minimal.json", csv_minimal())
    write("hostile.json", hostile())
    write("nulls.json", nulls())
    write("no_timeline.json", no_timeline())
    write("ranks.json", ranks())
    if os.environ.get("GPUMON_BIN"):
        write("h200_record.json", h200_record(os.environ["GPUMON_BIN"]))
