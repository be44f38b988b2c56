#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_pynvml.py - what the usual Python ways of reading GPU memory cost, next to gpumon.

1. per call, in one process: pynvml nvmlDeviceGetMemoryInfo (v1 and v2), interleaved in chunks
   like bench_sample.c, each call timed on its own with time.perf_counter_ns (the cost of the
   timer pair itself is measured and printed as "timer");
2. per call, one process each: `nvidia-smi --query-gpu=memory.used,memory.total,utilization.gpu
   --format=csv,noheader,nounits` through subprocess.run (what a Python monitor that shells out
   pays for every sample);
3. whole process: the same query from `gpumon query` and from nvidia-smi, run alternately,
   median and p90 of the wall time of subprocess.run.

Prints a table, then one JSON line; --json FILE also writes that line to FILE.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

QUERY = ["--query-gpu=memory.used,memory.total,utilization.gpu", "--format=csv,noheader,nounits"]


def stats_ns(samples):
    s = sorted(samples)
    n = len(s)
    k = max(1, min(n, -(-99 * n // 100)))  # nearest rank: ceil(0.99 n)
    return {"n": n, "mean_ns": round(sum(s) / n, 1), "median_ns": statistics.median(s),
            "p99_ns": s[k - 1], "min_ns": s[0], "max_ns": s[-1]}


def stats_ms(samples_s):
    s = sorted(x * 1000 for x in samples_s)
    n = len(s)
    k = max(1, min(n, -(-9 * n // 10)))
    return {"n": n, "median_ms": round(statistics.median(s), 3), "p90_ms": round(s[k - 1], 3),
            "mean_ms": round(sum(s) / n, 3), "min_ms": round(s[0], 3), "max_ms": round(s[-1], 3)}


def bench_pynvml(n, warmup, chunk, dev):
    """Per-call cost of pynvml's memory call, v1 and v2, interleaved."""
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(dev)
    clock = time.perf_counter_ns
    v2 = pynvml.nvmlMemory_v2

    def timer():
        return None

    def mem_v1():
        return pynvml.nvmlDeviceGetMemoryInfo(h)

    def mem_v2():
        return pynvml.nvmlDeviceGetMemoryInfo(h, version=v2)

    variants = [("timer", "perf_counter_ns pair alone (timing overhead)", timer),
                ("pynvml_v1", "pynvml.nvmlDeviceGetMemoryInfo(h)", mem_v1),
                ("pynvml_v2", "pynvml.nvmlDeviceGetMemoryInfo(h, version=nvmlMemory_v2)", mem_v2)]
    usable = []
    skipped = {}
    for name, what, fn in variants:
        try:
            fn()
            usable.append((name, what, fn))
        except Exception as e:
            skipped[name] = "%s: %s" % (type(e).__name__, e)
    times = {name: [] for name, _, _ in usable}

    def rounds(per_variant, record):
        done, rnd = 0, 0
        while done < per_variant:
            calls = min(chunk, per_variant - done)
            for k in range(len(usable)):
                name, _, fn = usable[(rnd + k) % len(usable)]
                out = times[name]
                for _ in range(calls):
                    t0 = clock()
                    fn()
                    t1 = clock()
                    if record:
                        out.append(t1 - t0)
            done += calls
            rnd += 1

    rounds(warmup, False)
    rounds(n, True)
    pynvml.nvmlShutdown()
    res = {}
    for name, what, _ in usable:
        res[name] = dict(stats_ns(times[name]), what=what)
    return res, skipped


def time_process(argv, env):
    t0 = time.perf_counter()
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
    return time.perf_counter() - t0, p.returncode, p.stdout


def bench_processes(gpumon, smi, runs, env):
    """Per-call cost of nvidia-smi as a subprocess, then gpumon vs nvidia-smi alternately."""
    out, notes = {}, []
    if smi:
        per_call = []
        for _ in range(3):
            time_process([smi] + QUERY, env)
        for _ in range(runs):
            secs, rc, _ = time_process([smi] + QUERY, env)
            if rc != 0:
                notes.append("nvidia-smi exited %d" % rc)
                break
            per_call.append(int(secs * 1e9))
        if per_call:
            out["nvidia_smi_subprocess"] = dict(
                stats_ns(per_call), what="subprocess.run(nvidia-smi " + " ".join(QUERY) + ")")
    cmds = []
    if gpumon:
        cmds.append(("gpumon_query", [gpumon, "query"] + QUERY))
    if smi:
        cmds.append(("nvidia_smi", [smi] + QUERY))
    wall = {name: [] for name, _ in cmds}
    outputs = {}
    for name, argv in cmds:  # warm the page cache and the driver
        for _ in range(3):
            secs, rc, so = time_process(argv, env)
        outputs[name] = (rc, so.decode(errors="replace").strip())
    bad = [name for name, (rc, _) in outputs.items() if rc != 0]
    for name in bad:
        notes.append("%s exited %d; not timed" % (name, outputs[name][0]))
    cmds = [(n, a) for n, a in cmds if n not in bad]
    for i in range(runs):
        order = cmds if i % 2 == 0 else cmds[::-1]
        for name, argv in order:
            secs, rc, _ = time_process(argv, env)
            wall[name].append(secs)
    whole = {}
    for name, argv in cmds:
        if wall[name]:
            whole[name] = dict(stats_ms(wall[name]),
                               command=" ".join([os.path.basename(argv[0])] + argv[1:]))
    return out, whole, notes, {k: v[1] for k, v in outputs.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=200000, help="timed pynvml calls per variant")
    ap.add_argument("-w", type=int, default=1000, help="warm-up calls per variant")
    ap.add_argument("-b", type=int, default=100, help="calls per variant per round")
    ap.add_argument("-d", type=int, default=0, help="GPU index")
    ap.add_argument("--runs", type=int, default=100, help="process runs of each command")
    build = os.environ.get("GPUMON_BUILD", "/tmp/gpumon-build")
    default = os.path.join(build, "cli", "gpumon")
    if not os.path.exists(default):
        default = os.path.join(build, "gpumon")
    ap.add_argument("--gpumon", default=os.environ.get("GPUMON_BIN") or default)
    ap.add_argument("--nvidia-smi", default=os.environ.get("NVIDIA_SMI", "nvidia-smi"))
    ap.add_argument("--json", help="also write the JSON line to this file")
    args = ap.parse_args()

    env = dict(os.environ, LC_ALL="C")
    smi = shutil.which(args.nvidia_smi)
    gpumon = os.path.abspath(args.gpumon) if os.path.exists(args.gpumon) else None
    doc = {"bench": "bench_pynvml", "python": sys.version.split()[0], "calls_per_variant": args.n,
           "warmup": args.w, "chunk": args.b, "process_runs": args.runs,
           "per_call": {}, "skipped": {}, "whole_process": {}, "notes": []}
    if not smi:
        doc["notes"].append("no nvidia-smi on PATH: its rows are skipped")
    if not gpumon:
        doc["notes"].append("no gpumon at %s: its row is skipped" % args.gpumon)

    try:
        res, skipped = bench_pynvml(args.n, args.w, args.b, args.d)
        doc["per_call"].update(res)
        doc["skipped"].update(skipped)
    except Exception as e:  # no pynvml or no driver: the process timings still run
        doc["skipped"]["pynvml"] = "%s: %s" % (type(e).__name__, e)
    per_call, whole, notes, outputs = bench_processes(gpumon, smi, args.runs, env)
    doc["per_call"].update(per_call)
    doc["whole_process"] = whole
    doc["notes"] += notes
    doc["outputs"] = outputs
    g, s = whole.get("gpumon_query"), whole.get("nvidia_smi")
    if g and s and s["median_ms"] > 0:
        doc["ratios"] = {
            "gpumon_query_over_nvidia_smi_median": round(g["median_ms"] / s["median_ms"], 4),
            "gpumon_query_over_nvidia_smi_p90": round(g["p90_ms"] / s["p90_ms"], 4)}

    print("bench_pynvml: python %s, %d calls per variant after %d warm-up, chunks of %d; "
          "%d process runs each" % (doc["python"], args.n, args.w, args.b, args.runs))
    print("%-22s %-58s %12s %12s %12s %12s" % ("per call", "what", "mean_ns", "median_ns",
                                                "p99_ns", "min_ns"))
    for name, r in doc["per_call"].items():
        print("%-22s %-58s %12.0f %12.0f %12d %12d" % (name, r["what"][:58], r["mean_ns"],
                                                        r["median_ns"], r["p99_ns"], r["min_ns"]))
    for name, why in doc["skipped"].items():
        print("%-22s skipped: %s" % (name, why))
    print("%-22s %-58s %12s %12s %12s %12s" % ("whole process", "command", "median_ms", "p90_ms",
                                                "mean_ms", "min_ms"))
    for name, r in whole.items():
        print("%-22s %-58s %12.2f %12.2f %12.2f %12.2f" % (name, r["command"][:58], r["median_ms"],
                                                            r["p90_ms"], r["mean_ms"], r["min_ms"]))
    for k, v in doc.get("ratios", {}).items():
        print("ratio %-40s %.3f" % (k, v))
    for note in doc["notes"]:
        print("note: " + note)
    line = json.dumps(doc, sort_keys=False)
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
