# SPDX-License-Identifier: MIT
"""Jobs for tests/gpu/oom_check.sh, run under `gpumon run` on a GPU with torch. Each reports the
allocator's figures after every step over GPUMON_RUN_SOCKET with the few lines of
docs/run-protocol.md (no package needed). Modes:

  leak        350 steps of a small MLP that keeps 8 MiB more each step (planted: 8 MiB/step)
  clean       the same without the leak
  leak_oom    the leak at 64 MiB/step under a cap of 12 % of the card: dies of out-of-memory
  grow        takes 1 GiB a step until out of memory (run it next to `hold`)
  hold GIB    not a job: holds GIB of the card until killed (the co-tenant), touches READY first
  --no-report do not report (the summary then judges the job's NVML figure)
"""
import json
import os
import socket
import sys
import time

import torch

HIDDEN = 1024
MIB = 1 << 20


class Reporter:
    """docs/run-protocol.md in a few lines: never blocks the loop for long, never stops it."""

    def __init__(self, enabled=True):
        self.sock = None
        path = os.environ.get("GPUMON_RUN_SOCKET")
        if path and enabled:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)
            self.sock.settimeout(0.05)
            self.send({"v": 1, "type": "hello", "pid": os.getpid(), "framework": "torch",
                       "version": torch.__version__})

    def send(self, obj):
        if self.sock:
            try:
                self.sock.sendall((json.dumps(obj) + "\n").encode())
            except OSError:
                pass

    def sample(self, step):
        self.send({"type": "sample", "t": time.time(), "step": step, "device": 0,
                   "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                   "max_allocated": torch.cuda.max_memory_allocated()})


def model():
    return torch.nn.Sequential(*[torch.nn.Sequential(torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(),
                                                     torch.nn.Linear(4 * HIDDEN, HIDDEN)) for _ in range(4)]).cuda()


def train(rep, steps, leak_bytes, sleep=0.005):
    m = model()
    opt = torch.optim.Adam(m.parameters(), lr=1e-4)
    kept = []
    for step in range(steps):
        x = torch.randn(16, 256, HIDDEN, device="cuda")
        loss = m(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if leak_bytes:
            kept.append(torch.empty(leak_bytes, dtype=torch.uint8, device="cuda"))  # never freed
        torch.cuda.synchronize()
        rep.sample(step)
        time.sleep(sleep)
    return len(kept)


def main():
    args = [a for a in sys.argv[1:] if a != "--no-report"]
    mode = args[0]
    if mode == "hold":
        gib = int(args[1])
        held = torch.empty(gib << 30, dtype=torch.uint8, device="cuda")
        held.fill_(1)
        torch.cuda.synchronize()
        open(args[2], "w").close()
        time.sleep(600)
        return
    rep = Reporter("--no-report" not in sys.argv)
    if mode == "leak":
        train(rep, int(os.environ.get("STEPS", 350)), 8 * MIB)
    elif mode == "clean":
        train(rep, int(os.environ.get("STEPS", 350)), 0)
    elif mode == "leak_oom":
        torch.cuda.set_per_process_memory_fraction(0.12)
        train(rep, 100000, 64 * MIB, sleep=0.002)
    elif mode == "grow":
        kept = []
        for step in range(100000):
            kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
            torch.cuda.synchronize()
            rep.sample(step)
            time.sleep(0.02)
    else:
        sys.exit(f"unknown mode {mode}")
    print(f"{mode}: done", flush=True)


if __name__ == "__main__":
    main()
