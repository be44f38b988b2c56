# SPDX-License-Identifier: MIT
"""A plain training script for `gpumon fit` on a real GPU (tests/gpu/fit_check.py): one of four models
built from configs, no downloads — an MLP, a ResNet-like CNN, BERT-base and GPT-2-small from
transformers — trained with AdamW on random data at --batch-size for --steps steps. Nothing of
gpumon in it: `gpumon run`'s inside view sees it unmodified. Exits 0 after its steps; an
out-of-memory ends it with torch's message on stderr (status 1)."""
import argparse
import sys

import torch
from torch import nn


def mlp():
    model = nn.Sequential(nn.Linear(4096, 8192), nn.GELU(), nn.Linear(8192, 8192), nn.GELU(), nn.Linear(8192, 8192),
                          nn.GELU(), nn.Linear(8192, 1000))
    return model, lambda b: (torch.randn(b, 4096), torch.randint(0, 1000, (b,)))


class Block(nn.Module):
    def __init__(self, c_in, c_out, stride):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
                               nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False), nn.BatchNorm2d(c_out))
        self.skip = (nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))
                     if stride != 1 or c_in != c_out else nn.Identity())

    def forward(self, x):
        return torch.relu(self.a(x) + self.skip(x))


def resnet():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    c = 64
    for c_out, n, stride in ((64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2)):  # ResNet-18's shape
        for i in range(n):
            layers.append(Block(c, c_out, stride if i == 0 else 1))
            c = c_out
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000))
    return model, lambda b: (torch.randn(b, 3, 224, 224), torch.randint(0, 1000, (b,)))


def bert(seq):
    from transformers import BertConfig, BertForSequenceClassification
    model = BertForSequenceClassification(BertConfig(num_labels=2))  # bert-base: 12 layers, 768 wide
    return model, lambda b: (torch.randint(0, 30522, (b, seq)), torch.randint(0, 2, (b,)))


def gpt2(seq):
    from transformers import GPT2Config, GPT2LMHeadModel
    model = GPT2LMHeadModel(GPT2Config())  # gpt2-small: 12 layers, 768 wide, 1024 positions
    return model, lambda b: (torch.randint(0, 50257, (b, seq)), None)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["mlp", "resnet", "bert", "gpt2"], required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--seq", type=int, default=512)
    a = p.parse_args()
    torch.manual_seed(0)
    model, data = {"mlp": mlp, "resnet": resnet, "bert": lambda: bert(a.seq), "gpt2": lambda: gpt2(a.seq)}[a.model]()
    model = model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(a.steps):
        x, y = data(a.batch_size)
        x = x.cuda(non_blocking=True)
        opt.zero_grad(set_to_none=True)
        if a.model in ("mlp", "resnet"):
            loss = loss_fn(model(x), y.cuda())
        elif a.model == "bert":
            loss = model(input_ids=x, labels=y.cuda()).loss
        else:
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
    torch.cuda.synchronize()
    print(f"{a.model} batch {a.batch_size}: {a.steps} steps, peak reserved {torch.cuda.max_memory_reserved()}")


if __name__ == "__main__":
    try:
        main()
    except torch.OutOfMemoryError as e:
        sys.stderr.write(f"torch.OutOfMemoryError: {e}\n")
        sys.exit(1)
