# SPDX-License-Identifier: MIT
"""torch.compiler of the stand-in: is_compiling() (torch >= 2.3), True while torch.compile traces
the code that calls it (torch._fake.compiling plays the tracing)."""
from . import _fake


def is_compiling():
    return _fake.compiling
