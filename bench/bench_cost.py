#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench_cost.py — what gpumon costs beside its floors, in one run on one machine: (1) a one-shot
`gpumon query` beside `nvidia-smi --query-gpu` and the NVML floor (bench_oneshot.py); (2) the
exporter's resident memory (`gpumon serve`, scraped once a second) beside a bare NVML loop's (the
floor: any process that keeps NVML open); (3) `gpumon watch --interval 100` on a pseudo-terminal
beside a C loop reading memory every 100 ms (bench_watch.py; rounds taking turns); (4) 1 kHz
sampling beside the floor loop (bench_sampling.py). Goals (BENCHMARKS.md): query <= 0.85 x
nvidia-smi, serve RSS <= floor + 3 MB, watch at 100 ms <= 0.25 % of a core, 1 kHz <= 1.1 x the floor.
A goal under its floor cannot be met by any program: the floor is printed beside each.

Usage (repository root, after building gpumon and gpumon_bench_floor):
  python3 bench/bench_cost.py [--json FILE] [--quick] [--fake]
Environment: GPUMON_BIN, GPUMON_FLOOR, NVIDIA_SMI (none: leave it out, e.g. with the fake NVML).
Exit status: 0 every goal met, 1 one is not, 2 a measurement failed.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import bench_sampling  # its measure(): a process's share of a core over a window, from schedstat

HERE = os.path.dirname(os.path.abspath(__file__))
RSS_GOAL_MB = 3.0
WATCH_GOAL_PCT = 0.25


def bench(script, args, out_json):
    """Runs a sibling bench with --json; its printout goes through; returns its JSON."""
    r = subprocess.run([sys.executable, os.path.join(HERE, script), *args, "--json", out_json])
    if r.returncode == 2 or not os.path.exists(out_json):
        raise RuntimeError(f"{script} failed (status {r.returncode})")
    with open(out_json) as f:
        return json.load(f)


def status_kb(pid, key):
    with open(f"/proc/{pid}/status") as f:
        m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1)) if m else 0


def rss(gpumon, floor, seconds):
    """(serve's VmRSS, the floor loop's VmRSS) in MB after `seconds`, serve scraped once a second."""
    fl = subprocess.Popen([floor, "loop", str(seconds + 30), "1000"], stdout=subprocess.DEVNULL)
    sv = subprocess.Popen([gpumon, "serve", "--listen", "127.0.0.1:0"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    try:
        line = sv.stderr.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        if not m:
            raise RuntimeError(f"gpumon serve did not say where it listens: {line!r}")
        url = f"http://127.0.0.1:{m.group(1)}/metrics"
        for _ in range(int(seconds)):
            with urllib.request.urlopen(url, timeout=5) as r:
                r.read()
            time.sleep(1)
        out = {"serve_rss_mb": status_kb(sv.pid, "VmRSS") / 1024, "floor_rss_mb": status_kb(fl.pid, "VmRSS") / 1024,
               "serve_anon_mb": status_kb(sv.pid, "RssAnon") / 1024, "floor_anon_mb": status_kb(fl.pid, "RssAnon") / 1024,
               "serve_file_mb": status_kb(sv.pid, "RssFile") / 1024, "floor_file_mb": status_kb(fl.pid, "RssFile") / 1024}
        if sv.poll() is not None or fl.poll() is not None:
            raise RuntimeError("gpumon serve or the floor loop ended early")
        return out
    finally:
        for p in (sv, fl):
            p.terminate()
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true", help="shorter runs (a smoke test, not figures)")
    ap.add_argument("--fake", action="store_true", help="watch against the fake NVML (bench_watch.py --fake)")
    a = ap.parse_args()
    gpumon = os.environ.get("GPUMON_BIN", "build/cli/gpumon")
    floor = os.environ.get("GPUMON_FLOOR", "build/bench/gpumon_bench_floor")
    tmp = tempfile.mkdtemp(prefix="bench-cost-")
    res, goals = {}, []
    q = a.quick
    try:
        print("== (1) one-shot query", flush=True)
        one = res["oneshot"] = bench("bench_oneshot.py", ["--runs", "5" if q else "30"], f"{tmp}/oneshot.json")
        med = one["median_ms"]
        fl = med["floor (NVML start + attach + one read)"]
        over = med["gpumon query"] - fl
        smi = med.get("nvidia-smi --query-gpu")
        if smi:
            goals.append(("one-shot query <= 0.85 x nvidia-smi", med["gpumon query"] / smi <= 0.85,
                          f"{med['gpumon query'] / smi:.3f} x (floor {fl / smi:.3f} x, gpumon {over:+.2f} ms over it)"))
        print("== (2) exporter memory", flush=True)
        r = res["rss"] = rss(gpumon, floor, 5 if q else 15)
        d = r["serve_rss_mb"] - r["floor_rss_mb"]
        print(f"  gpumon serve {r['serve_rss_mb']:.1f} MB RSS ({r['serve_anon_mb']:.1f} anon, {r['serve_file_mb']:.1f} "
              f"file), bare NVML loop {r['floor_rss_mb']:.1f} MB ({r['floor_anon_mb']:.1f} anon, "
              f"{r['floor_file_mb']:.1f} file): {d:+.1f} MB", flush=True)
        goals.append(("exporter RSS <= floor + 3 MB", d <= RSS_GOAL_MB, f"{d:+.1f} MB"))
        print("== (3) watch at 100 ms", flush=True)
        rounds, secs = (1, 5) if q else (3, 20)
        w, f = [], []
        for i in range(rounds):
            w.append(bench("bench_watch.py", ["--seconds", str(secs), "--intervals", "100", "--terminal", "pty"]
                           + (["--fake"] if a.fake else []),
                           f"{tmp}/watch{i}.json")[0]["cpu_pct_of_core"])
            f.append(bench_sampling.measure([floor, "loop", str(secs + 5), "100"], secs))  # the 100 ms C loop
            print(f"  round {i + 1}: watch {w[-1]:.3f} %, C loop reading memory every 100 ms {f[-1]:.3f} %", flush=True)
        res["watch"] = {"watch_pct": w, "floor_pct": f, "seconds": secs}
        wm, fm = statistics.median(w), statistics.median(f)
        goals.append(("watch --interval 100 <= 0.25 % of a core", wm <= WATCH_GOAL_PCT,
                      f"{wm:.3f} % (floor {fm:.3f} %)"))
        print("== (4) 1 kHz sampling", flush=True)
        s = res["sampling"] = bench("bench_sampling.py", ["--seconds", "3" if q else "10", "--rounds", "1" if q else "3"],
                                    f"{tmp}/sampling.json")
        goals.append(("1 kHz sampling <= 1.1 x the floor loop", s["ratio_floor"] <= 1.1,
                      f"{s['ratio_floor']:.3f} x ({s['median']['gpumon']:.2f} % against {s['median']['floor']:.2f} %)"))
    except (OSError, RuntimeError, KeyError, IndexError) as e:
        print(f"bench_cost: {e}", file=sys.stderr)
        return 2
    print("== goals")
    for name, met, detail in goals:
        print(f"  {'met    ' if met else 'NOT met'} {name}: {detail}")
    res["goals"] = [{"goal": n, "met": m, "detail": d} for n, m, d in goals]
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0 if all(m for _, m, _ in goals) else 1


if __name__ == "__main__":
    sys.exit(main())
