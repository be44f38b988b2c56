# SPDX-License-Identifier: MIT
"""The fake allocator behind the stand-in paddle: per device allocated / reserved bytes with
their peaks, a log of the device arguments the API was called with, and out-of-memory past the
device's memory as Paddle raises it (MemoryError with its ResourceExhaustedError text)."""
import os

GPUS = int(os.environ.get("FAKE_PADDLE_GPUS", "1"))
current = 0
allocated = [0] * GPUS
reserved = [0] * GPUS
max_allocated = [0] * GPUS
max_reserved = [0] * GPUS
calls = []  # (function name, device argument as given)
SEGMENT = 2 << 20
TOTAL = 150754820096  # an H200: an allocation past it fails as Paddle's do


def alloc(n, dev=0):
    if reserved[dev] + n > TOTAL:
        # Paddle raises its ResourceExhaustedError as Python's MemoryError, in these words (2.6)
        raise MemoryError(
            "ResourceExhaustedError: \n\nOut of memory error on GPU %d. Cannot allocate %.6fMB memory on GPU %d, "
            "%.6fGB memory has been allocated and available memory is only %.6fMB.\n\nPlease check whether "
            "there is any other process using GPU %d.\n (at /paddle/paddle/phi/core/memory/allocation/"
            "cuda_allocator.cc:71)" % (dev, n / (1 << 20), dev, reserved[dev] / (1 << 30),
                                       (TOTAL - reserved[dev]) / (1 << 20), dev))
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
