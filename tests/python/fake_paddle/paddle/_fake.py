# SPDX-License-Identifier: MIT
"""The fake allocator behind the stand-in paddle: per device allocated / reserved bytes with
their peaks, and a log of the device arguments the API was called with."""
import os

GPUS = int(os.environ.get("FAKE_PADDLE_GPUS", "1"))
current = 0
allocated = [0] * GPUS
reserved = [0] * GPUS
max_allocated = [0] * GPUS
max_reserved = [0] * GPUS
calls = []  # (function name, device argument as given)
SEGMENT = 2 << 20


def alloc(n, dev=0):
    allocated[dev] += n
    if allocated[dev] > reserved[dev]:
        reserved[dev] = -(-allocated[dev] // SEGMENT) * SEGMENT
    max_allocated[dev] = max(max_allocated[dev], allocated[dev])
    max_reserved[dev] = max(max_reserved[dev], reserved[dev])


def free(n, dev=0):
    allocated[dev] -= n
    assert allocated[dev] >= 0


def reset(gpus=None):
    global GPUS, allocated, reserved, max_allocated, max_reserved, current
    if gpus is not None:
        GPUS = gpus
    allocated, reserved = [0] * GPUS, [0] * GPUS
    max_allocated, max_reserved = [0] * GPUS, [0] * GPUS
    current = 0
    calls.clear()
