#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_oneshot.py — what a one-shot `gpumon query` costs beside `nvidia-smi --query-gpu` and beside
the floor (bench_floor.c `oneshot`: start NVML, attach GPU 0, read its memory, leave), all run
alternately in fresh processes RUNS times; wall time from spawn to exit, medians. Goal
(BENCHMARKS.md): gpumon <= 0.85 x nvidia-smi (where the floor allows: it is printed beside).

Usage (from the repository root, after building):
  python3 bench/bench_oneshot.py [--runs 30] [--fields memory.used] [--json FILE]
Environment: GPUMON_BIN (default build/cli/gpumon), GPUMON_FLOOR (default build/bench/gpumon_bench_floor),
NVIDIA_SMI (default nvidia-smi; leave it out with NVIDIA_SMI=none, e.g. against the fake NVML).
Exit status: 0 goal met, 1 not met, 2 the measurement failed.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time

GOAL = 0.85


def spawn_wall(argv):
    """Wall seconds of one run of argv, output to /dev/null; raises when it fails."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        t0 = time.perf_counter_ns()
        pid = os.posix_spawnp(argv[0], argv, os.environ,
                              file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status = os.waitpid(pid, 0)
        t1 = time.perf_counter_ns()
    finally:
        os.close(devnull)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s exited with %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    return (t1 - t0) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--fields", default="memory.used")
    ap.add_argument("--json")
    a = ap.parse_args()
    gpumon = os.environ.get("GPUMON_BIN", "build/cli/gpumon")
    floor = os.environ.get("GPUMON_FLOOR", "build/bench/gpumon_bench_floor")
    smi = os.environ.get("NVIDIA_SMI", "nvidia-smi")
    fmt = "--format=csv,noheader"
    cmds = {
        "gpumon query": [gpumon, "query", "--query-gpu=" + a.fields, fmt],
        "floor (NVML start + attach + one read)": [floor, "oneshot"],
        "floor + nvmlShutdown before exit": [floor, "oneshot-shutdown"],
        "/bin/true (process start)": ["/bin/true"],
    }
    if smi != "none":
        if not shutil.which(smi):
            print("bench_oneshot: %s not found (NVIDIA_SMI=none to leave it out)" % smi, file=sys.stderr)
            return 2
        cmds["nvidia-smi --query-gpu"] = [smi, "--query-gpu=" + a.fields, fmt]
    times = {k: [] for k in cmds}
    try:
        for argv in cmds.values():  # one warm-up each: page cache, the driver's first attach
            spawn_wall(argv)
        for _ in range(a.runs):
            for k, argv in cmds.items():
                times[k].append(spawn_wall(argv))
    except (OSError, RuntimeError) as e:
        print("bench_oneshot: %s" % e, file=sys.stderr)
        return 2
    med = {k: statistics.median(v) for k, v in times.items()}
    print("one-shot wall time, median of %d alternated runs (ms):" % a.runs)
    for k, v in med.items():
        print("  %-42s %8.2f   (min %.2f, max %.2f)" % (k, v, min(times[k]), max(times[k])))
    out = {"runs": a.runs, "median_ms": med}
    status = 0
    ref = med.get("nvidia-smi --query-gpu")
    if ref:
        ratio = med["gpumon query"] / ref
        floor_ratio = med["floor (NVML start + attach + one read)"] / ref
        met = ratio <= GOAL
        print("gpumon / nvidia-smi = %.3f (goal <= %.2f: %s); floor / nvidia-smi = %.3f; gpumon - floor = %.2f ms"
              % (ratio, GOAL, "met" if met else "NOT met", floor_ratio,
                 med["gpumon query"] - med["floor (NVML start + attach + one read)"]))
        out.update(ratio=ratio, floor_ratio=floor_ratio, goal=GOAL, met=met)
        status = 0 if met else 1
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return status


if __name__ == "__main__":
    sys.exit(main())
