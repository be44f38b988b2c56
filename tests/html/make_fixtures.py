#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the report documents (docs/report-html.md) that the HTML page tests render: run it from
anywhere to regenerate tests/html/fixtures/*.json after a change of the document's format. The
series are made by formulas (no randomness), so the files come out the same every time.
fixtures/h200_record.json is not made here: it is what `gpumon report` makes (with its timeline)
of examples/recordings/h200_train_leak.gpumon, a recording of a real H200."""
import json
import math
import os

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
GIB = 1 << 30
MIB = 1 << 20
H200_TOTAL = 150754820096


def write(name, doc):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def leak_run():
    n = 400
    t = [round(i * 2.03, 2) for i in range(n)]  # 812 s
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
    return {
        "format": 1,
        "source": {"path": "runs/train-2026-12-02.gpumon", "type": "recording", "kind": "run",
                   "command": "python train.py --batch-size 64", "host": "node1",
                   "start_utc": "2026-12-02T13:00:00Z", "duration_s": 812.4, "exit_status": 0,
                   "damage": None},
        "devices": [{"dev": 0, "name": "NVIDIA H200", "uuid": "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51",
                     "total_bytes": H200_TOTAL},
                    {"dev": 1, "name": "NVIDIA H200", "uuid": "GPU-9a1b2c3d-0000-1111-2222-333344445555",
                     "total_bytes": H200_TOTAL}],
        "leak": {"verdict": "leak", "series": "framework allocated (pid 1234)",
                 "rate_bytes_per_step": 4194304.0, "rate_bytes_per_second": 2066159.0,
                 "start_step": 120, "start_time": 243.6, "confidence": 0.99,
                 "steps_to_oom": 3100.0, "seconds_to_oom": 6293.0},
        "peak": {"bytes": 80123456789, "time": 402.5, "what": "job", "dev": 0,
                 "owner": {"pid": 1234, "user": "alice", "command": "python train.py --batch-size 64"}},
        "windows": [{"start": 0.0, "end": 400.0, "peak_bytes": 60 * GIB, "peak_time": 390.0,
                     "owner": {"pid": 1234, "user": "alice", "command": "python train.py --batch-size 64"}},
                    {"start": 400.0, "end": 812.4, "peak_bytes": 80123456789, "peak_time": 402.5,
                     "owner": None}],
        "fragmentation": {"bytes": 2147483648, "time": 402.5},
        "unaccounted": {"bytes": 524288000, "time": 402.5, "pid": 1234},
        "oom": None,
        "alerts": [{"time": 300.2, "text": "leak suspected: 4 MiB a step"}],
        "events": [{"time": 812.4, "kind": "exit", "text": "exit status 0"}],
        "timeline": {
            "devices": [{"dev": 0, "total_bytes": H200_TOTAL, "t": t, "used": dev0_used,
                         "used_max": dev0_max, "reserved": [644939776] * n},
                        {"dev": 1, "total_bytes": H200_TOTAL, "t": t, "used": dev1_used,
                         "used_max": dev1_used, "reserved": [644939776] * n}],
            "processes": [
                {"dev": 0, "pid": 1234, "label": "1234 alice python train.py --batch-size 64", "job": True,
                 "t": t, "used": job_used},
                {"dev": 0, "pid": 1240, "label": "1240 alice python train.py (data loader)", "job": True,
                 "t": t, "used": loader},
                {"dev": 0, "pid": 5555, "label": "5555 bob python eval.py", "job": False,
                 "t": t, "used": other},
                {"dev": 1, "pid": 1234, "label": "1234 alice python train.py --batch-size 64", "job": True,
                 "t": t, "used": dev1_used}],
            "framework": [{"pid": 1234, "device": 0, "framework": "torch", "t": t, "step": step,
                           "allocated": alloc, "reserved": reserved, "max_allocated": max_alloc}],
        },
    }, peak_i


def oom():
    n = 120
    t = [i * 0.5 for i in range(n)]
    job = [min(60 * GIB, 40 * GIB + i * 200 * MIB) for i in range(n)]
    other = [60 * GIB + ((i - 60) * 330 * MIB if i > 60 else 0) for i in range(n)]
    used = [a + b for a, b in zip(job, other)]
    return {
        "format": 1,
        "source": {"path": "oom.gpumon", "type": "recording", "kind": "run", "command": "python train.py",
                   "host": "node7", "start_utc": "2026-12-02T09:15:00Z", "duration_s": 60.1,
                   "exit_status": 1, "damage": None},
        "devices": [{"dev": 0, "name": "NVIDIA H200", "uuid": "GPU-04b38c5d", "total_bytes": H200_TOTAL}],
        "leak": {"verdict": "none", "series": "job process (pid 4321, NVML)", "rate_bytes_per_step": None,
                 "rate_bytes_per_second": None, "start_step": None, "start_time": None, "confidence": 0.97,
                 "steps_to_oom": None, "seconds_to_oom": None},
        "peak": {"bytes": 149264793600, "time": 59.5, "what": "device", "dev": 0, "owner": None},
        "windows": [],
        "fragmentation": None,
        "unaccounted": None,
        "oom": {"time": 59.9, "dev": 0, "cause": "co-tenant",
                "message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
                "diagnosis": "Your job held 60.0 GiB, steady for the last 30 s; pid 9999 (bob) grew from "
                             "60.0 GiB to 79.0 GiB in the 30 s before the failure and took the rest.",
                "holders": [{"pid": 9999, "user": "bob", "command": "python big_eval.py", "bytes": 84840284160,
                             "job": False},
                            {"pid": 4321, "user": "alice", "command": "python train.py", "bytes": 64424509440,
                             "job": True}],
                "last_seconds": [{"time": 57.0 + i * 0.5, "used_bytes": used[114 + i], "total_bytes": H200_TOTAL}
                                 for i in range(6)]},
        "alerts": [{"time": 45.0, "text": "GPU 0 is 95 % full"}],
        "events": [{"time": 59.9, "kind": "oom", "text": "CUDA out of memory (pid 4321)"},
                   {"time": 60.1, "kind": "exit", "text": "exit status 1"}],
        "timeline": {
            "devices": [{"dev": 0, "total_bytes": H200_TOTAL, "t": t, "used": used, "used_max": used,
                         "reserved": [644939776] * n}],
            "processes": [{"dev": 0, "pid": 4321, "label": "4321 alice python train.py", "job": True,
                           "t": t, "used": job},
                          {"dev": 0, "pid": 9999, "label": "9999 bob python big_eval.py", "job": False,
                           "t": t, "used": other}],
            "framework": []},
    }


def csv_minimal():
    n = 50
    return {
        "format": 1,
        "source": {"path": "alloc.csv", "type": "csv", "kind": None, "command": None, "host": None,
                   "start_utc": None, "duration_s": 49.0, "exit_status": None, "damage": None},
        "devices": [],
        "leak": {"verdict": "insufficient_data", "series": "framework allocated (pid 77)",
                 "rate_bytes_per_step": None, "rate_bytes_per_second": None, "start_step": None,
                 "start_time": None, "confidence": None, "steps_to_oom": None, "seconds_to_oom": None},
        "peak": {"bytes": 3 * GIB + 49 * 10 * MIB, "time": 49.0, "what": "framework", "dev": None, "owner": None},
        "windows": [], "fragmentation": None, "unaccounted": None, "oom": None, "alerts": [], "events": [],
        "timeline": {"devices": [], "processes": [],
                     "framework": [{"pid": 77, "device": None, "framework": None, "t": [float(i) for i in range(n)],
                                    "step": [None] * n, "allocated": [3 * GIB + i * 10 * MIB for i in range(n)]}]},
    }


HOSTILE = "</script><img src=x onerror=alert(1)>"


def hostile():
    n = 20
    t = [float(i) for i in range(n)]
    cmd = "python train.py --name '" + HOSTILE + "' \"quoted\" & more \u2028 \u8bad\u7ec3 \u00fc"
    owner = {"pid": 31337, "user": "eve<b>\"'", "command": cmd}
    return {
        "format": 1,
        "source": {"path": "evil</title><script>alert(3)</script>.gpumon", "type": "recording", "kind": "run",
                   "command": cmd, "host": "<i>host</i>", "start_utc": "2026-12-02T13:00:00Z",
                   "duration_s": 19.0, "exit_status": 0,
                   "damage": "page 3 of table <script>alert(4)</script> is unreadable & lost"},
        "devices": [{"dev": 0, "name": "NVIDIA <H200>", "uuid": "GPU-\"x\"", "total_bytes": H200_TOTAL}],
        "leak": {"verdict": "none", "series": "job process (pid 31337, NVML) <!--", "rate_bytes_per_step": None,
                 "rate_bytes_per_second": None, "start_step": None, "start_time": None, "confidence": 0.9,
                 "steps_to_oom": None, "seconds_to_oom": None},
        "peak": {"bytes": 5 * GIB, "time": 10.0, "what": "job", "dev": 0, "owner": owner},
        "windows": [{"start": 0.0, "end": 19.0, "peak_bytes": 5 * GIB, "peak_time": 10.0, "owner": owner}],
        "fragmentation": None, "unaccounted": None,
        "oom": {"time": 19.0, "cause": "unknown<script>", "message": HOSTILE, "diagnosis": HOSTILE + " \u2029 end",
                "holders": [dict(owner, bytes=5 * GIB, job=True)], "last_seconds": []},
        "alerts": [{"time": 5.0, "text": "<script>alert(2)</script>"}],
        "events": [{"time": 19.0, "kind": "exit<b>", "text": HOSTILE}],
        "timeline": {
            "devices": [{"dev": 0, "total_bytes": H200_TOTAL, "t": t, "used": [i * 256 * MIB for i in range(n)],
                         "used_max": [i * 256 * MIB for i in range(n)], "reserved": [0] * n}],
            "processes": [{"dev": 0, "pid": 31337, "label": "31337 " + HOSTILE, "job": True, "t": t,
                           "used": [i * 256 * MIB for i in range(n)]}],
            "framework": [{"pid": 31337, "device": 0, "framework": HOSTILE, "t": [], "step": [], "allocated": [],
                           "reserved": [], "max_allocated": []}]},
    }


def nulls():
    return {
        "format": 1,
        "source": {"path": None, "type": None, "kind": None, "command": None, "host": None, "start_utc": None,
                   "duration_s": None, "exit_status": None, "damage": None},
        "devices": [{"dev": None, "name": None, "uuid": None, "total_bytes": None}],
        "leak": {"verdict": None, "series": None, "rate_bytes_per_step": None, "rate_bytes_per_second": None,
                 "start_step": None, "start_time": None, "confidence": None, "steps_to_oom": None,
                 "seconds_to_oom": None},
        "peak": {"bytes": None, "time": None, "what": None, "dev": None, "owner": None},
        "windows": [{"start": None, "end": None, "peak_bytes": None, "peak_time": None, "owner": None}],
        "fragmentation": {"bytes": None, "time": None},
        "unaccounted": {"bytes": None, "time": None, "pid": None},
        "oom": {"time": None, "cause": None, "diagnosis": None, "holders": [{"pid": None, "user": None,
                "command": None, "bytes": None, "job": None}], "last_seconds": [{"time": None,
                "used_bytes": None, "total_bytes": None}]},
        "alerts": [{"time": None, "text": None}],
        "events": [{"time": None, "kind": None, "text": None}],
        "timeline": {
            "devices": [{"dev": None, "total_bytes": None, "t": [0.0, 1.0, 2.0, 3.0, None],
                         "used": [None, 5 * GIB, None, 7 * GIB, 9 * GIB], "used_max": None,
                         "reserved": [None, None, None, None, None]},
                        {"dev": 1, "total_bytes": None, "t": [], "used": [], "used_max": [], "reserved": []}],
            "processes": [{"dev": None, "pid": None, "label": None, "job": None, "t": [], "used": []}],
            "framework": [{"pid": None, "device": None, "framework": None, "t": None, "step": None,
                           "allocated": None, "reserved": None, "max_allocated": None}]},
    }


def no_timeline():
    doc = csv_minimal()
    del doc["timeline"]
    doc["source"]["path"] = "summary-only.csv"
    doc["alerts"] = []
    doc["events"] = []
    return doc


if __name__ == "__main__":
    os.makedirs(HERE, exist_ok=True)
    write("leak_run.json", leak_run()[0])
    write("oom.json", oom())
    write("csv_minimal.json", csv_minimal())
    write("hostile.json", hostile())
    write("nulls.json", nulls())
    write("no_timeline.json", no_timeline())
