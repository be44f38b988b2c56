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
  custom           built from the options below (the second corpus, tests/gpu/traces.sh)

Options of `custom`: --leak-kib N keeps N KiB more every --leak-every K steps from --leak-from
(a share of the run); --dynamic draws sequence lengths 64..512; --late-state F creates Adam's
state at share F; --cache-once F:MIB keeps MIB once at share F (one rise of the floor);
--rare-long F runs one batch 8x longer at share F; --warm-cache N keeps a tensor on ever fewer of
the first N steps (a cache that fills ever more slowly, then stops); --batch, --seq, --hidden,
--sleep size and pace the loop.
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
    def __init__(self, hidden=HIDDEN):
        super().__init__()
        self.layers = torch.nn.ModuleList(
            [torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                 torch.nn.Linear(4 * hidden, hidden)) for _ in range(4)])

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
    ap.add_argument("--leak-kib", type=int, default=0)
    ap.add_argument("--leak-every", type=int, default=1)
    ap.add_argument("--leak-from", type=float, default=0.0)
    ap.add_argument("--dynamic", action="store_true")
    ap.add_argument("--late-state", type=float, default=None)
    ap.add_argument("--cache-once", default=None)
    ap.add_argument("--rare-long", type=float, default=None)
    ap.add_argument("--warm-cache", type=int, default=0)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=HIDDEN)
    ap.add_argument("--sleep", type=float, default=0.005)
    a = ap.parse_args()
    if a.behaviour == "custom":
        return custom(a)
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


def custom(a):
    """The second corpus: one loop whose memory behaviour is set by the options."""
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    rep = Reporter()
    rep.send({"type": "marker", "text": f"custom, {a.steps} steps"})
    model = Model(a.hidden).cuda()
    opt = None if a.late_state is not None else torch.optim.Adam(model.parameters(), lr=1e-4)
    once_at, once_mib = (None, 0)
    if a.cache_once:
        f, m = a.cache_once.split(":")
        once_at, once_mib = int(a.steps * float(f)), int(m)
    late_at = int(a.steps * a.late_state) if a.late_state is not None else None
    long_at = int(a.steps * a.rare_long) if a.rare_long is not None else None
    leak_from = int(a.steps * a.leak_from)
    kept = []
    t0 = time.time()
    for step in range(a.steps):
        seq = random.choice([64, 128, 192, 256, 384, 512]) if a.dynamic else a.seq
        if step == long_at:
            seq *= 8
        if step == late_at:
            opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        x = torch.randn(a.batch, seq, a.hidden, device="cuda")
        loss = model(x).square().mean()
        if opt:
            opt.zero_grad(set_to_none=True)
        loss.backward()
        if opt:
            opt.step()
        if a.leak_kib and step >= leak_from and (step - leak_from) % a.leak_every == 0:
            kept.append(torch.empty(a.leak_kib << 10, dtype=torch.uint8, device="cuda"))
        if step == once_at:
            kept.append(torch.empty(once_mib << 20, dtype=torch.uint8, device="cuda"))
        if a.warm_cache and step < a.warm_cache and random.random() < 1.0 / (1 + step / 20):
            kept.append(torch.empty(1 << 20, dtype=torch.uint8, device="cuda"))
        torch.cuda.synchronize()
        rep.send({"type": "sample", "t": time.time(), "step": step, "device": 0,
                  "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                  "max_allocated": torch.cuda.max_memory_allocated()})
        if a.sleep:
            time.sleep(a.sleep)
    rep.send({"type": "marker", "text": "done"})
    print(f"custom: {a.steps} steps in {time.time() - t0:.1f} s, allocated at the end "
          f"{torch.cuda.memory_allocated()} B", flush=True)


if __name__ == "__main__":
    main()
