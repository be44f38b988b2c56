#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small PyTorch training loop watched by gpumon.GPUMonitor: a log line every --interval steps
(allocated, peak, reserved, what the process holds on the GPU), the attention block's exact peak,
optional TensorBoard scalars, a leak alert if memory keeps growing.

    PYTHONPATH=build/python python3 examples/train_torch.py --steps 300
    gpumon run -o run.gpumon -- python3 examples/train_torch.py     # one recording, both views
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import gpumon


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, mon, every):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        with mon.section("attention", every=every):  # the exact peak of this block, now and then
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.n2(x))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--interval", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--tensorboard", help="log directory for TensorBoard scalars")
    a = ap.parse_args()

    d, vocab = 512, 1000
    emb, head = nn.Embedding(vocab, d).cuda(), nn.Linear(d, vocab).cuda()
    blocks = nn.ModuleList(Block(d, 8) for _ in range(4)).cuda()
    params = list(emb.parameters()) + list(blocks.parameters()) + list(head.parameters())
    opt = torch.optim.AdamW(params, lr=3e-4)

    with gpumon.GPUMonitor(interval=a.interval, tensorboard=a.tensorboard) as mon:
        for step in range(a.steps):
            x = torch.randint(0, vocab, (a.batch, a.seq), device="cuda")
            h = emb(x)
            for blk in blocks:
                h = blk(h, mon, every=a.interval * len(blocks))
            loss = F.cross_entropy(head(h).view(-1, vocab), x.view(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            mon.step()
        print(mon.summary_text())


if __name__ == "__main__":
    main()
