#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small PaddlePaddle training loop watched by gpumon.GPUMonitor: every --interval steps a line
`[Step N] Used | Peak | Reserved | Process | GPU`, read from paddle.device.cuda and NVML instead
of an nvidia-smi subprocess; the attention block's exact peak (Paddle 3.0+, which can reset its
peak counter); a warning if the allocated floor keeps rising.

    PYTHONPATH=build/python python3 examples/train_paddle.py --steps 300
"""
import argparse

import paddle
import paddle.nn as nn
import paddle.nn.functional as F

import gpumon


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--interval", type=int, default=50)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    a = ap.parse_args()

    paddle.set_device("gpu:0")
    d, vocab = 512, 1000
    emb = nn.Embedding(vocab, d)
    layer = nn.TransformerEncoderLayer(d, 8, 4 * d)
    enc = nn.TransformerEncoder(layer, 4)
    head = nn.Linear(d, vocab)
    params = emb.parameters() + enc.parameters() + head.parameters()
    opt = paddle.optimizer.AdamW(learning_rate=3e-4, parameters=params)

    with gpumon.GPUMonitor(interval=a.interval, framework="paddle") as mon:
        for step in range(a.steps):
            x = paddle.randint(0, vocab, [a.batch, a.seq])
            with mon.section("encoder", every=a.interval):
                h = enc(emb(x))
            loss = F.cross_entropy(head(h).reshape([-1, vocab]), x.reshape([-1]))
            loss.backward()
            opt.step()
            opt.clear_grad()
            mon.step()
        print(mon.summary_text())


if __name__ == "__main__":
    main()
