#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_sampling.py — what sampling GPU memory at 1 kHz costs: `gpumon record --interval 1` on one
GPU beside the floor any sampler pays (bench_floor.c `loop`: a bare C loop that sleeps to an
absolute deadline and reads nvmlDeviceGetMemoryInfo_v2) and beside a pynvml loop at the same rate
(absolute deadlines, the v2 memory call), each in its own process, one after the other, ROUNDS
times. CPU is the process's run time (all threads, /proc/PID/task/*/schedstat, nanoseconds) over
SECONDS after a second of start-up, as a share of one core; medians over the rounds.
Beside them, not goals: the floor of the same work (bench_floor.c `loop-all`: the loop plus the
process lists every 100 ms and the slow fields every second that record also reads), which tells
what gpumon adds of its own from what those driver calls cost; and that work in the shape of
gpumon's sampler without gpumon's code (`loop-all-thread`: a second thread, an XID event set asked
once a second).
Goals (BENCHMARKS.md): gpumon <= 1.1 x the floor and <= 0.5 x pynvml.

Usage (from the repository root, after building):
  python3 bench/bench_sampling.py [--seconds 10] [--rounds 3] [--gpu 0] [--json FILE]
Environment: GPUMON_BIN (default build/cli/gpumon), GPUMON_FLOOR (default
build/bench/gpumon_bench_floor), PYTHON (for the pynvml loop; default this Python; PYTHON=none leaves
it out).
Exit status: 0 goals met, 1 one is not, 2 the measurement failed.
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL_FLOOR = 1.1
GOAL_PYNVML = 0.5
FLOOR_MODES = {"floor": "loop", "floor_all": "loop-all", "floor_thread": "loop-all-thread"}  # gpumon_bench_floor's

PYNVML_LOOP = r"""
import sys, time, pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(int(sys.argv[1]))
end = time.monotonic() + float(sys.argv[2])
t = time.monotonic()
while t < end:
    t += 0.001
    d = t - time.monotonic()
    if d > 0:
        time.sleep(d)
    pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
"""


def run_ns_by_thread(pid):
    """Nanoseconds each thread name of the process has run (schedstat's first field; gpumon names its
    threads: gpumon-gpu0, gpumon-watchdog, ...)."""
    out = {}
    for d in glob.glob("/proc/%d/task/*" % pid):
        try:
            with open(d + "/comm") as fh:
                name = fh.read().strip()
            with open(d + "/schedstat") as fh:
                out[name] = out.get(name, 0) + int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended between the listing and the read
    return out


def measure(argv, seconds, threads=None):
    """Share of one core argv's process used over `seconds`, after 1 s of start-up; with a dict
    `threads`, each thread name's share is put there too (the same two readings)."""
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        time.sleep(1.0)
        if p.poll() is not None:
            raise RuntimeError("%s ended early: %s" % (argv[0], p.stderr.read().decode(errors="replace")[-400:]))
        ta, t0 = run_ns_by_thread(p.pid), time.monotonic()
        time.sleep(seconds)
        tb, t1 = run_ns_by_thread(p.pid), time.monotonic()
        if p.poll() is not None:
            raise RuntimeError("%s ended before the window closed" % argv[0])
    finally:
        p.terminate()
        p.wait()
    if threads is not None:
        for name, ns in tb.items():
            threads[name] = 100.0 * (ns - ta.get(name, 0)) / 1e9 / (t1 - t0)
    return 100.0 * (sum(tb.values()) - sum(ta.values())) / 1e9 / (t1 - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--json")
    a = ap.parse_args()
    gpumon = os.environ.get("GPUMON_BIN", "build/cli/gpumon")
    floor = os.environ.get("GPUMON_FLOOR", "build/bench/gpumon_bench_floor")
    py = os.environ.get("PYTHON", sys.executable)
    span = a.seconds + 3
    tmp = tempfile.mkdtemp(prefix="bench-sampling-")
    kinds = ["floor", "floor_all", "floor_thread", "gpumon"] + (["pynvml"] if py != "none" else [])
    res = {k: [] for k in kinds}
    by_thread = []  # gpumon's, a dict a round
    try:
        for r in range(a.rounds):
            for k in kinds:
                if k in FLOOR_MODES:
                    argv = [floor, FLOOR_MODES[k], str(span)]
                elif k == "pynvml":
                    argv = [py, "-c", PYNVML_LOOP, a.gpu, str(span)]
                else:
                    argv = [gpumon, "record", "--interval", "1", "-i", a.gpu, "--duration", str(int(span) + 1),
                            "-o", os.path.join(tmp, "r%d.gpumon" % r)]
                th = {} if k == "gpumon" else None
                res[k].append(measure(argv, a.seconds, th))
                if th is not None:
                    by_thread.append(th)
    except (OSError, RuntimeError) as e:
        print("bench_sampling: %s" % e, file=sys.stderr)
        return 2
    med = {k: statistics.median(v) for k, v in res.items()}
    print("1 kHz sampling of one GPU, share of one core over %.0f s, %d rounds (median; every round):"
          % (a.seconds, a.rounds))
    names = {"floor": "floor: C loop, absolute deadlines, _v2 memory call",
             "floor_all": "the same work: floor + process lists 10/s, slow fields 1/s",
             "floor_thread": "the same work in a second thread, XID events asked 1/s",
             "gpumon": "gpumon record --interval 1", "pynvml": "pynvml loop at 1 kHz"}
    for k in kinds:
        print("  %-60s %6.2f %%   (%s)" % (names[k], med[k], ", ".join("%.2f" % x for x in res[k])))
    names_seen = sorted({n for th in by_thread for n in th})
    thread_med = {n: statistics.median([th.get(n, 0.0) for th in by_thread]) for n in names_seen}
    print("  gpumon by thread (median): " + ", ".join("%s %.3f %%" % (n, v) for n, v in
                                                     sorted(thread_med.items(), key=lambda x: -x[1])))
    out = {"seconds": a.seconds, "rounds": a.rounds, "percent": res, "median": med, "gpumon_threads": by_thread,
           "gpumon_threads_median": thread_med}
    ok = True
    rf = med["gpumon"] / med["floor"]
    print("gpumon / floor = %.2f (goal <= %.1f: %s)" % (rf, GOAL_FLOOR, "met" if rf <= GOAL_FLOOR else "NOT met"))
    ok &= rf <= GOAL_FLOOR
    out["ratio_floor"] = rf
    out["ratio_floor_all"] = med["gpumon"] / med["floor_all"]
    print("gpumon / the same work's floor = %.2f; that floor / floor = %.2f (the driver's other calls)"
          % (out["ratio_floor_all"], med["floor_all"] / med["floor"]))
    out["ratio_floor_thread"] = med["gpumon"] / med["floor_thread"]
    print("gpumon / the same work in a second thread = %.2f; that / floor = %.2f"
          % (out["ratio_floor_thread"], med["floor_thread"] / med["floor"]))
    if "pynvml" in med:
        rp = med["gpumon"] / med["pynvml"]
        print("gpumon / pynvml = %.2f (goal <= %.1f: %s); floor / pynvml = %.2f"
              % (rp, GOAL_PYNVML, "met" if rp <= GOAL_PYNVML else "NOT met", med["floor"] / med["pynvml"]))
        ok &= rp <= GOAL_PYNVML
        out["ratio_pynvml"] = rp
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
