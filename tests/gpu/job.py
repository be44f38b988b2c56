# SPDX-License-Identifier: MIT
"""A small torch training job for `gpumon run` on a GPU machine: a parent that trains a 2-layer
MLP and a child process (spawned) that holds 1 GiB, so the job's process tree has two GPU
processes. When GPUMON_RUN_SOCKET is set it reports the allocator's figures every 10 steps over
the socket (docs/run-protocol.md). Prints the two pids."""
import json
import multiprocessing as mp
import os
import socket
import sys
import time

import torch


def child(seconds):
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    time.sleep(seconds)


def send(sock, msg):
    if sock:
        sock.sendall((json.dumps(msg) + "\n").encode())


def main():
    sock = None
    path = os.environ.get("GPUMON_RUN_SOCKET")
    if path:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        send(sock, {"v": 1, "type": "hello", "pid": os.getpid(), "framework": "torch", "version": torch.__version__})
    p = mp.get_context("spawn").Process(target=child, args=(float(sys.argv[1]) if len(sys.argv) > 1 else 4.0,))
    p.start()
    model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096)).cuda()
    opt = torch.optim.Adam(model.parameters())
    steps = 150
    for step in range(steps):
        x = torch.randn(512, 4096, device="cuda")
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            torch.cuda.synchronize()
            send(sock, {"type": "sample", "t": time.time(), "step": step, "device": 0,
                        "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                        "max_allocated": torch.cuda.max_memory_allocated()})
        time.sleep(0.02)
    send(sock, {"type": "marker", "text": "training done"})
    p.join()
    print(f"job parent {os.getpid()} child {p.pid}", flush=True)


if __name__ == "__main__":
    main()
