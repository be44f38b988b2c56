# SPDX-License-Identifier: MIT
"""A small data-parallel training job for torchrun (gloo: every rank may share one GPU), for
tests/gpu/ranks_check.py: each rank trains an MLP for --seconds; the rank named by --leak-rank keeps
a 16 MiB tensor from every step (a planted leak); the rank named by --oom-rank asks for more than
the GPU has after --oom-after seconds (torch's out-of-memory, printed with torchrun's [rankN]:
prefix), and the job fails."""
import argparse
import datetime
import os
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--seconds", type=float, default=40)
p.add_argument("--leak-rank", type=int, default=-1)
p.add_argument("--oom-rank", type=int, default=-1)
p.add_argument("--oom-after", type=float, default=1e9)
a = p.parse_args()

# a rank whose peer died (another node's rank ran out) fails within 30 s, not gloo's 30 min
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank = dist.get_rank()
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
torch.cuda.set_device(dev)
model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 2048)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
kept = []
start = time.time()
step = 0
while True:
    # every rank stops at the same step (a rank alone in a collective would wait for ever)
    done = torch.tensor([int(time.time() - start >= a.seconds)])
    dist.all_reduce(done, op=dist.ReduceOp.MAX)
    if done.item():
        break
    x = torch.randn(256, 2048, device=dev)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    for prm in model.parameters():  # data parallel by hand: gloo averages the gradients on the CPU
        g = prm.grad.cpu()
        dist.all_reduce(g)
        prm.grad.copy_(g / dist.get_world_size())
    opt.step()
    if rank == a.leak_rank:
        kept.append(torch.empty(16 << 20, dtype=torch.uint8, device=dev))
    if rank == a.oom_rank and time.time() - start > a.oom_after:
        torch.empty(torch.cuda.get_device_properties(dev).total_memory * 2, dtype=torch.uint8, device=dev)
    step += 1
    time.sleep(0.05)
dist.barrier()
dist.destroy_process_group()
