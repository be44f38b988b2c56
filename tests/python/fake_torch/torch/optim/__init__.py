# SPDX-License-Identifier: MIT
"""torch.optim of the stand-in: the Optimizer base and SGD."""
from .optimizer import Optimizer, register_optimizer_step_post_hook  # noqa: F401


class SGD(Optimizer):
    def __init__(self, params, lr=0.01):
        super().__init__(params, {"lr": lr})

    def step(self, closure=None):
        return closure() if closure is not None else None
