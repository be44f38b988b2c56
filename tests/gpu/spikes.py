# SPDX-License-Identifier: MIT
"""The spike experiment, with gpumon's sampler: while `gpumon record --interval 1`
runs, torch allocates 4 GiB, holds it from 0.5 ms to 200 ms and frees it, 27 times. Then the
recording is read back: every spike held >= 3 ms must be there with its true peak (the used
figure before the spike + 4 GiB). Needs a GPU and torch.

    python3 tests/gpu/spikes.py --gpumon BUILD/cli/gpumon --out DIR
"""
import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import torch

GIB = 1 << 30
HOLDS_MS = [0.5, 1, 1, 2, 2, 3, 3, 4, 5, 5, 7, 10, 10, 15, 20, 20, 30, 40, 50, 50, 70, 100, 100, 120, 150,
            200, 200]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumon", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", default="1")
    a = ap.parse_args()
    rec = os.path.join(a.out, "spikes.gpumon")
    if os.path.exists(rec):
        os.remove(rec)
    torch.empty(1, device="cuda")  # the CUDA context first, so it is part of the baseline
    torch.cuda.synchronize()
    p = subprocess.Popen([a.gpumon, "record", "--interval", a.interval, "-i", "0", "-o", rec],
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    spikes = []
    for hold in HOLDS_MS:
        t0 = time.monotonic_ns()  # CLOCK_MONOTONIC, as the recording's t_ns
        x = torch.empty(4 * GIB, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        t1 = time.monotonic_ns()
        time.sleep(hold / 1000)
        del x
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        t2 = time.monotonic_ns()
        spikes.append({"hold_ms": hold, "t_start": t0, "t_allocated": t1, "t_freed": t2})
        time.sleep(0.25)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    print(err.strip())
    db = sqlite3.connect(rec)
    rows = []
    caught_3ms = total_3ms = 0
    exact = True
    tol = 4 << 20  # the driver's figure moves by a page or two of its own around an allocation
    for s in spikes:
        # the used figure just before this spike, and the largest one recorded during it
        base = db.execute("SELECT used_bytes FROM device_samples WHERE dev = 0 AND t_ns < ? ORDER BY t_ns DESC "
                          "LIMIT 1", (s["t_start"],)).fetchone()[0]
        peak = db.execute("SELECT max(used_max_bytes) FROM device_samples WHERE dev = 0 AND used_max_t_ns >= ? "
                          "AND used_max_t_ns <= ?", (s["t_start"], s["t_freed"] + 5_000_000)).fetchone()[0]
        caught = peak is not None and peak >= base + 4 * GIB - tol
        true_peak = caught and abs(peak - (base + 4 * GIB)) <= tol
        s.update(base_bytes=base, peak_bytes=peak, caught=caught, exact=true_peak,
                 visible_ms=(s["t_freed"] - s["t_start"]) / 1e6)
        if s["hold_ms"] >= 3:
            total_3ms += 1
            caught_3ms += caught
            exact &= bool(true_peak)
        rows.append(s)
    base = rows[0]["base_bytes"]
    all_caught = sum(r["caught"] for r in rows)
    print(f"used before the first spike {base} B; spikes caught {all_caught}/{len(rows)}; held >= 3 ms: {caught_3ms}/{total_3ms}, "
          f"true peak for all of them: {exact}")
    for r in rows:
        print(f"  hold {r['hold_ms']:6.1f} ms  visible {r['visible_ms']:7.2f} ms  caught {int(r['caught'])}  "
              f"before {r['base_bytes']}  peak {r['peak_bytes']}  peak - before - 4 GiB = "
              f"{(r['peak_bytes'] or 0) - r['base_bytes'] - 4 * GIB}")
    size = os.path.getsize(rec)
    print(f"recording {rec}: {size} bytes")
    with open(os.path.join(a.out, "spikes.json"), "w") as f:
        json.dump({"baseline_bytes": base, "spikes": rows, "caught_held_3ms": caught_3ms, "held_3ms": total_3ms,
                   "true_peak": exact, "recording_bytes": size}, f, indent=1)
    return 0 if caught_3ms == total_3ms and exact else 1


if __name__ == "__main__":
    sys.exit(main())
