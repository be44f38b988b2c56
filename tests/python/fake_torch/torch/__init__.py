# SPDX-License-Identifier: MIT
"""A stand-in for the part of PyTorch gpumon reads (torch.cuda's memory statistics, devices and
their UUIDs; CUDA's lazy start; the allocator's out-of-memory observers, history and snapshot;
the optimizers' global step hooks), mirroring torch's documented API, for the CPU tests; the real
torch is tested on a GPU machine (tests/gpu). FAKE_TORCH_GPUS (default 1) sets the number of GPUs;
FAKE_TORCH_UUIDS, comma-separated, their UUIDs without "GPU-" (default: none, as older torch).
torch._fake drives the figures."""
import os

__version__ = "2.11.0+fake"


class device:
    def __init__(self, type, index=None):
        if ":" in type:
            type, idx = type.split(":")
            index = int(idx)
        self.type, self.index = type, index

    def __repr__(self):
        return f"device(type={self.type!r}, index={self.index})"


from . import _fake  # noqa: E402
from ._fake import OutOfMemoryError  # noqa: E402,F401
from . import _C  # noqa: E402,F401
from . import cuda  # noqa: E402
from . import optim  # noqa: E402,F401
from . import compiler  # noqa: E402,F401
