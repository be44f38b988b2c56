# SPDX-License-Identifier: MIT
"""Captures what frameworks say and know when they run out of GPU memory, for the fixtures of
tests/unit/test_oom_message.c and tests/unit/test_snapshot.c: PyTorch's out-of-memory messages
(fragmentation, a per-process fraction, a co-tenant, a request larger than the card, memory
outside the allocator, expandable segments), JAX's (pre-allocating and not), the allocator's
snapshot at the moment (torch's out-of-memory observer), and what keeping the allocator's history
costs a training loop. Run on a GPU machine from the repository root:

  OUT=gpu-out python3 tests/gpu/oom_capture.py

Each case runs in a child process of its own (an out-of-memory leaves a process's allocator in a
state the next case should not inherit). Writes $OUT/oom_capture.json (every message, the
observer's arguments, timings) and $OUT/oom_snapshots.tar.gz (snapshots as JSON). About 3 minutes.
"""
import json
import os
import subprocess
import sys
import tarfile
import time

OUT = os.environ.get("OUT", "gpu-out")
GIB = 1 << 30
MIB = 1 << 20


def child_torch(case, out_dir):
    import torch

    res = {"case": case, "torch": torch.__version__}
    obs_calls = []

    def observer(device, alloc, device_allocated, device_free):
        t0 = time.perf_counter()
        snap = torch.cuda.memory._snapshot()
        t1 = time.perf_counter()
        text = json.dumps(snap)
        t2 = time.perf_counter()
        obs_calls.append({"device": device, "alloc": alloc, "device_allocated": device_allocated,
                          "device_free": device_free, "snapshot_s": t1 - t0, "json_s": t2 - t1,
                          "json_bytes": len(text), "segments": len(snap.get("segments", [])),
                          "blocks": sum(len(s.get("blocks", [])) for s in snap.get("segments", []))})
        if len(text) > 20_000_000:  # what comes back is bounded: the first segments and the last actions
            snap = dict(snap, segments=snap["segments"][:300],
                        device_traces=[t[-2000:] for t in snap.get("device_traces", [])])
            text = json.dumps(snap)
            obs_calls[-1]["trimmed"] = True
        with open(os.path.join(out_dir, f"snapshot-{case}.json"), "w") as f:
            f.write(text)

    history = case in ("frag_history", "small_history")
    if history:
        # before CUDA starts: does the setting hold for the device initialised later?
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                 max_entries=100000)
    try:
        torch.cuda._lazy_call(lambda: torch._C._cuda_attach_out_of_memory_observer(observer))
    except Exception as e:
        res["observer_error"] = repr(e)
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    res["mem_get_info"] = [free, total]
    res["total_memory"] = torch.cuda.get_device_properties(0).total_memory
    kept = []
    try:
        if case in ("frag", "frag_history"):
            # blocks of 6 MiB share 20 MiB segments three at a time; two of three freed, then a request
            # larger than the card's free memory but smaller than what the freed blocks add up to
            blocks = []
            while torch.cuda.mem_get_info()[0] > 12 * GIB:
                blocks.extend(torch.empty(6 * MIB, dtype=torch.uint8, device="cuda") for _ in range(300))
            kept = blocks[2::3]
            del blocks
            res["before"] = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}
            torch.empty(40 * GIB, dtype=torch.uint8, device="cuda")
        elif case == "small_history":
            blocks = [torch.empty(6 * MIB, dtype=torch.uint8, device="cuda") for _ in range(60)]
            kept = blocks[::3]
            del blocks
            torch.cuda.set_per_process_memory_fraction(0.01)
            torch.empty(2 * GIB, dtype=torch.uint8, device="cuda")
        elif case == "fraction":
            torch.cuda.set_per_process_memory_fraction(0.25)
            while True:
                kept.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
        elif case in ("grow", "expandable"):
            while True:
                kept.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
        elif case == "toobig":
            torch.empty(200 * GIB, dtype=torch.uint8, device="cuda")
        elif case == "outside":
            import ctypes
            cuda = ctypes.CDLL("libcuda.so.1")
            ptr = ctypes.c_uint64()
            rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(6 * GIB))
            res["cuMemAlloc"] = rc
            while True:
                kept.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError as e:
        res["exception"] = type(e).__module__ + "." + type(e).__qualname__
        res["message"] = str(e)
    res["observer"] = obs_calls
    res["after"] = {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                    "stats_keys_sample": sorted(k for k in torch.cuda.memory_stats() if "oom" in k or "retries" in k)}
    return res


def child_cost(out_dir):
    """Step time of a small training loop: plain, with the out-of-memory observer attached, with the
    allocator's history kept ("all" with Python stacks, and "state"), and the cost of reading the
    allocator's figures."""
    import torch

    def loop(steps):
        m = torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                                      torch.nn.Linear(4096, 1024)) for _ in range(4)]).cuda()
        opt = torch.optim.Adam(m.parameters(), lr=1e-4)
        x = torch.randn(16, 256, 1024, device="cuda")
        for _ in range(20):
            loss = m(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(steps):
            loss = m(x).square().mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / steps

    res = {"torch": torch.__version__}
    torch.cuda.init()
    # allocations a step (the allocator's counter)
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    loop(10)
    res["allocations_per_step"] = (torch.cuda.memory_stats()["allocation.all.allocated"] - before) / 30
    order = ["plain", "state", "all", "plain2", "all2"]
    for name in order:
        if name.startswith("all"):
            torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                     max_entries=100000)
        elif name == "state":
            torch.cuda.memory._record_memory_history(enabled="state", stacks="python")
        else:
            torch.cuda.memory._record_memory_history(enabled=None)
        res["step_s_" + name] = loop(300)
    torch.cuda.memory._record_memory_history(enabled=None)
    t = time.perf_counter()
    for _ in range(1000):
        torch.cuda.memory_stats(0)
    res["memory_stats_us"] = (time.perf_counter() - t) * 1e3
    hook = getattr(torch.optim.optimizer, "register_optimizer_step_post_hook", None)
    res["has_step_post_hook"] = hook is not None
    return res


def child_jax(case, out_dir):
    import jax
    import jax.numpy as jnp

    res = {"case": case, "jax": jax.__version__}
    dev = jax.local_devices()[0]
    kept = []
    try:
        while True:
            kept.append(jnp.ones((GIB // 4,), dtype=jnp.float32))
            kept[-1].block_until_ready()
    except Exception as e:
        res["exception"] = type(e).__module__ + "." + type(e).__qualname__
        res["message"] = str(e)
        res["stats"] = dev.memory_stats()
    return res


def run_child(kind, case, env_extra, timeout=240):
    env = dict(os.environ, **env_extra)
    t = time.time()
    p = subprocess.run([sys.executable, __file__, "--child", kind, case], capture_output=True, text=True, env=env,
                       timeout=timeout)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        res = {"case": case, "error": "no result", "stdout_tail": p.stdout[-2000:]}
    res["returncode"] = p.returncode
    res["seconds"] = round(time.time() - t, 2)
    err = p.stderr
    # the allocator's dump can run to thousands of lines: its start and its end
    res["stderr_head"] = err[:12000]
    res["stderr_tail"] = err[-12000:] if len(err) > 12000 else ""
    res["stderr_bytes"] = len(err)
    res["env"] = env_extra
    return res


def main():
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":
        kind, case = sys.argv[2], sys.argv[3]
        out_dir = os.path.join(OUT, "snapshots")
        os.makedirs(out_dir, exist_ok=True)
        if kind == "torch":
            res = child_torch(case, out_dir)
        elif kind == "cost":
            res = child_cost(out_dir)
        elif kind == "jax":
            res = child_jax(case, out_dir)
        elif kind == "hold":
            import torch
            held = torch.empty(int(case) * GIB, dtype=torch.uint8, device="cuda")
            held.fill_(1)
            torch.cuda.synchronize()
            open(os.path.join(OUT, "held"), "w").close()
            time.sleep(300)
            res = {}
        print(json.dumps(res), flush=True)
        return
    os.makedirs(OUT, exist_ok=True)
    results = []
    noprealloc = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    for kind, case, env in (("torch", "frag", {}), ("torch", "frag_history", {}), ("torch", "small_history", {}),
                            ("torch", "fraction", {}), ("torch", "grow", {}), ("torch", "toobig", {}),
                            ("torch", "outside", {}),
                            ("torch", "expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
                            ("cost", "-", {}), ("jax", "prealloc", {}), ("jax", "noprealloc", noprealloc)):
        r = run_child(kind, case, env)
        results.append(r)
        print(f"{kind} {case}: rc {r['returncode']} in {r['seconds']} s: {str(r.get('message', r.get('error', '')))[:300]}",
              flush=True)
    # a co-tenant: another process holding 60 GiB while the job grows
    held = os.path.join(OUT, "held")
    holder = subprocess.Popen([sys.executable, __file__, "--child", "hold", "60"], stdout=subprocess.DEVNULL)
    for _ in range(600):
        if os.path.exists(held):
            break
        time.sleep(0.1)
    r = run_child("torch", "grow", {})
    r["case"] = "cotenant"
    r["holder_pid"] = holder.pid
    results.append(r)
    print(f"torch cotenant: {str(r.get('message', ''))[:400]}", flush=True)
    holder.kill()
    holder.wait()
    os.unlink(held)
    r = run_child("jax", "platform", {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"})
    results.append(r)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=memory.total,memory.reserved", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip()
    with open(os.path.join(OUT, "oom_capture.json"), "w") as f:
        json.dump({"results": results, "nvidia_smi_total_reserved_mib": smi}, f, indent=1)
    snaps = os.path.join(OUT, "snapshots")
    with tarfile.open(os.path.join(OUT, "oom_snapshots.tar.gz"), "w:gz") as t:
        for name in sorted(os.listdir(snaps)):
            t.add(os.path.join(snaps, name), arcname=name)
    for name in os.listdir(snaps):
        os.unlink(os.path.join(snaps, name))
    os.rmdir(snaps)
    print("wrote", os.path.join(OUT, "oom_capture.json"), os.path.join(OUT, "oom_snapshots.tar.gz"))


if __name__ == "__main__":
    main()
