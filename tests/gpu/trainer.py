# SPDX-License-Identifier: MIT
"""Labelled training traces for the leak detector: a small transformer-like model trained with
torch in one of several memory behaviours, reporting the allocator's figures every step over
GPUMON_RUN_SOCKET (docs/run-protocol.md). Run under `gpumon run` on a GPU machine
(tests/gpu/traces.sh). Behaviours:

  clean_warmup     fixed shapes: reserved grows in the first steps, then flat          (no leak)
  clean_dynamic    random sequence lengths: reserved grows in steps and plateaus      (no leak)
  clean_rare_long  fixed shapes and one very long batch at 60 % of the run            (no leak)
  clean_late_state optimizer state created at 40 % of the run: one rise of the floor  (no leak)
  leak_graph       keeps every step's loss with its graph alive                       (leak, fast)
  leak_cache       caches one activation per step                                     (leak)
  leak_slow        keeps 4 MiB every ten steps, under dynamic shapes                  (leak, slow)
"""
import argparse
import json
import os
import random
import socket
import time

import torch

HIDDEN = 1024


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [torch.nn.Sequential(torch.nn.Linear(HIDDEN, 4 * HIDDEN), torch.nn.GELU(),
                                 torch.nn.Linear(4 * HIDDEN, HIDDEN)) for _ in range(4)])

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x


class Reporter:
    def __init__(self):
        self.sock = None
        path = os.environ.get("GPUMON_RUN_SOCKET")
        if path:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(path)
            self.send({"v": 1, "type": "hello", "pid": os.getpid(), "framework": "torch",
                       "version": torch.__version__})

    def send(self, msg):
        if self.sock:
            self.sock.sendall((json.dumps(msg) + "\n").encode())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("behaviour")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    rep = Reporter()
    rep.send({"type": "marker", "text": f"behaviour {a.behaviour}, {a.steps} steps"})
    model = Model().cuda()
    late = a.behaviour == "clean_late_state"
    opt = None if late else torch.optim.Adam(model.parameters(), lr=1e-4)
    kept = []
    for step in range(a.steps):
        seq = 256
        if a.behaviour in ("clean_dynamic", "leak_slow"):
            seq = random.choice([64, 128, 192, 256, 384, 512])
        if a.behaviour == "clean_rare_long" and step == int(a.steps * 0.6):
            seq = 2048
        if late and step == int(a.steps * 0.4):
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        # leak_graph keeps every step's activations: a smaller batch keeps it inside the card
        x = torch.randn(2 if a.behaviour == "leak_graph" else 16, seq, HIDDEN, device="cuda")
        y = model(x)
        loss = y.square().mean()
        if opt:
            opt.zero_grad(set_to_none=True)
        if a.behaviour == "leak_graph":
            loss.backward(retain_graph=True)
            kept.append(loss)          # the graph of every step stays alive
        else:
            loss.backward()
        if opt:
            opt.step()
        if a.behaviour == "leak_cache":
            kept.append(y[:, :64].detach().clone())   # 4 MiB a step
        if a.behaviour == "leak_slow" and step % 10 == 0:
            kept.append(torch.empty(4 << 20, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        rep.send({"type": "sample", "t": time.time(), "step": step, "device": 0,
                  "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                  "max_allocated": torch.cuda.max_memory_allocated()})
        time.sleep(0.005)
    rep.send({"type": "marker", "text": "done"})
    print(f"{a.behaviour}: {a.steps} steps, allocated at the end {torch.cuda.memory_allocated()} B", flush=True)


if __name__ == "__main__":
    main()
