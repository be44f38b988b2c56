# SPDX-License-Identifier: MIT
"""Unmodified PyTorch jobs for tests/gpu/inside_check.sh: plain training scripts that know nothing of
gpumon (no import of it, no socket), run under `gpumon run`, whose inside view must explain them.
Each writes what torch itself and NVML said at the moment that matters (its out-of-memory, or its
end) to the JSON file named by $INSIDE_SIDE, for the check to hold gpumon's figures against:
torch's message, memory_allocated/reserved, mem_get_info and NVML's figure of the process (pynvml).

  clean       a training loop of about 25 s
  outside     the same beside 6 GiB taken with cuMemAlloc (memory outside torch's allocator)
  leak        a training loop that keeps 384 MiB each step until out of memory
  frag        6 MiB blocks three to a 20 MiB segment, two of three freed, then a 40 GiB request
  cotenant    takes 512 MiB every 50 ms until out of memory (run next to `hold`)
  fraction    set_per_process_memory_fraction(0.3), then 1 GiB every 50 ms until out of memory
  toobig      a Linear layer of 160 GiB of weights made on the GPU
  transient   8 s of steady training, then an evaluation whose attention scores need 149 GiB
  bench N     N training steps, timed (the inside view's cost)
  hold GIB    not a job: holds GIB of the card until killed, touches $INSIDE_SIDE when it holds it
"""
import json
import os
import sys
import time

import torch

MIB = 1 << 20
GIB = 1 << 30
HIDDEN = 1024
SIDE = os.environ.get("INSIDE_SIDE", "")


def nvml_process_bytes():
    """NVML's figure of this process on GPU 0 (pynvml), or None."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return int(p.usedGpuMemory)
    except Exception as e:  # the check says it could not compare
        return {"error": repr(e)}
    return None


def said(**extra):
    """What torch and NVML say now, written to $INSIDE_SIDE."""
    free, total = torch.cuda.mem_get_info()
    out = dict(extra, pid=os.getpid(), allocated=torch.cuda.memory_allocated(),
               reserved=torch.cuda.memory_reserved(), max_allocated=torch.cuda.max_memory_allocated(),
               free=free, total=total, nvml_process=nvml_process_bytes(), time=time.time())
    if SIDE:
        with open(SIDE, "w") as f:
            json.dump(out, f)


def model():
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(),
                                                     torch.nn.Linear(4 * HIDDEN, HIDDEN)) for _ in range(4)]).cuda()


def train(seconds=None, steps=None, leak=0, sleep=0.0):
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    kept = []
    step, end = 0, time.time() + (seconds or 1e9)
    while time.time() < end and (steps is None or step < steps):
        x = torch.randn(16, 256, HIDDEN, device="cuda")
        loss = m(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if leak:
            kept.append(torch.empty(leak, dtype=torch.uint8, device="cuda"))  # SITE: leak
        if sleep:
            torch.cuda.synchronize()
            time.sleep(sleep)
        step += 1
    torch.cuda.synchronize()
    return m, step


def main():
    mode = sys.argv[1]
    if mode == "hold":
        held = torch.empty(int(sys.argv[2]) * GIB, dtype=torch.uint8, device="cuda")
        held.fill_(1)
        torch.cuda.synchronize()
        open(SIDE, "w").close()
        time.sleep(900)
        return
    if mode == "bench":
        n = int(sys.argv[2])
        train(steps=50)  # warm up: kernels, the allocator's cache
        t = time.perf_counter()
        _, steps = train(steps=n)
        dt = time.perf_counter() - t
        print(json.dumps({"steps": steps, "seconds": dt, "step_ms": dt / steps * 1e3}), flush=True)
        return
    try:
        if mode == "clean":
            train(seconds=25, sleep=0.004)
            said(end=True)
        elif mode == "outside":
            import ctypes
            cuda = ctypes.CDLL("libcuda.so.1")
            torch.cuda.init()
            torch.zeros(1, device="cuda")  # the primary context current on this thread
            ptr = ctypes.c_uint64()
            rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(6 * GIB))
            if rc:
                sys.exit(f"cuMemAlloc failed: {rc}")
            train(seconds=25, sleep=0.004)
            said(end=True, raw_bytes=6 * GIB)
        elif mode == "leak":
            train(leak=384 * MIB, sleep=0.08)
        elif mode == "frag":
            blocks = []
            while torch.cuda.mem_get_info()[0] > 12 * GIB:
                blocks.extend(torch.empty(6 * MIB, dtype=torch.uint8, device="cuda")  # SITE: frag
                              for _ in range(300))
            kept = blocks[2::3]
            del blocks
            time.sleep(3)
            big = torch.empty(40 * GIB, dtype=torch.uint8, device="cuda")
            del big, kept
        elif mode == "cotenant":
            kept = []
            while True:
                kept.append(torch.empty(512 * MIB, dtype=torch.uint8, device="cuda"))
                time.sleep(0.05)
        elif mode == "fraction":
            torch.cuda.set_per_process_memory_fraction(0.3)
            kept = []
            while True:
                kept.append(torch.empty(GIB, dtype=torch.uint8, device="cuda"))
                time.sleep(0.05)
        elif mode == "toobig":
            torch.nn.Linear(200000, 214748, device="cuda")
        elif mode == "transient":
            m, _ = train(seconds=8, sleep=0.004)
            with torch.no_grad():  # evaluation: attention over one very long sequence
                q = torch.randn(1, 200000, 64, device="cuda")  # 200000^2 fp32 scores: 149 GiB
                scores = q @ q.transpose(1, 2)
                del scores
        else:
            sys.exit(f"unknown mode {mode}")
    except torch.OutOfMemoryError as e:
        said(message=str(e))
        raise
    print(f"{mode}: done", flush=True)


if __name__ == "__main__":
    main()
