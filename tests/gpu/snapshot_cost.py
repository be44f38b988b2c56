# SPDX-License-Identifier: MIT
"""What taking PyTorch's allocator snapshot costs, by how the history is kept: none, "state" (stacks
of live blocks only) and "all" (a ring of the last N actions too) with Python stacks, the first call
and a second one, with the first call's profile (where its time goes). Run on a GPU machine:

  OUT=gpu-out python3 tests/gpu/snapshot_cost.py

Each configuration runs in a fresh process (a cost paid once per process shows in the first call).
Writes $OUT/snapshot_cost.json. About a minute."""
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import time

OUT = os.environ.get("OUT", "gpu-out")
MIB = 1 << 20


def child(mode, entries, blocks):
    import torch
    t0 = time.perf_counter()
    if mode == "all":
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=entries)
    elif mode == "all-alloc":
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=entries)
    elif mode == "state":
        torch.cuda.memory._record_memory_history(enabled="state", stacks="python")
    enable_s = time.perf_counter() - t0
    kept = [torch.empty(6 * MIB, dtype=torch.uint8, device="cuda") for _ in range(blocks)]
    del kept[::3]
    for _ in range(entries // 4 if mode.startswith("all") else 0):  # fill the ring
        x = torch.empty(MIB, dtype=torch.uint8, device="cuda")
        del x
    torch.cuda.synchronize()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    s = torch.cuda.memory._snapshot()
    prof.disable()
    first = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = torch.cuda.memory._snapshot()
    second = time.perf_counter() - t0
    t0 = time.perf_counter()
    text = json.dumps(s)
    dumps = time.perf_counter() - t0
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(12)
    traces = sum(len(t) for t in s.get("device_traces", []))
    return {"mode": mode, "entries": entries, "blocks": blocks, "enable_s": enable_s, "first_s": first,
            "second_s": second, "json_s": dumps, "json_bytes": len(text), "traces": traces,
            "dynamo_loaded": "torch._dynamo" in sys.modules, "profile": out.getvalue()[-4000:]}


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))), flush=True)
        return
    os.makedirs(OUT, exist_ok=True)
    results = []
    for mode, entries, blocks in (("none", 0, 3000), ("state", 0, 3000), ("all", 1000, 3000), ("all", 20000, 3000),
                                  ("all", 100000, 3000), ("all-alloc", 20000, 3000), ("state", 0, 20000),
                                  ("all", 20000, 20000)):
        p = subprocess.run([sys.executable, __file__, "--child", mode, str(entries), str(blocks)], capture_output=True,
                           text=True, timeout=300)
        try:
            r = json.loads(p.stdout.strip().splitlines()[-1])
        except Exception:
            r = {"mode": mode, "entries": entries, "error": p.stderr[-2000:]}
        results.append(r)
        print(f"{mode:9} entries {entries:6} blocks {blocks:5}: first {r.get('first_s', -1):7.3f} s, second "
              f"{r.get('second_s', -1):7.3f} s, json {r.get('json_s', -1):6.3f} s {r.get('json_bytes', 0) / 1e6:6.1f} MB, "
              f"traces {r.get('traces')}, dynamo {r.get('dynamo_loaded')}", flush=True)
    with open(os.path.join(OUT, "snapshot_cost.json"), "w") as f:
        json.dump(results, f, indent=1)
    worst = max(results, key=lambda r: r.get("first_s", 0))
    print(worst.get("profile", worst.get("error", ""))[-3000:])


if __name__ == "__main__":
    main()
