# SPDX-License-Identifier: MIT
"""The fake caching allocator behind the stand-in torch (2 MiB segments, never given back)."""
import os

GPUS = int(os.environ.get("FAKE_TORCH_GPUS", "1"))
UUIDS = [u for u in os.environ.get("FAKE_TORCH_UUIDS", "").split(",") if u]
current = 0
allocated = [0] * GPUS
reserved = [0] * GPUS
peak = [0] * GPUS
peak_reserved = [0] * GPUS
stats_calls = 0
fraction = [1.0] * GPUS
SEGMENT = 2 << 20


def alloc(n, dev=0):
    allocated[dev] += n
    if allocated[dev] > reserved[dev]:
        reserved[dev] = -(-allocated[dev] // SEGMENT) * SEGMENT
    peak[dev] = max(peak[dev], allocated[dev])
    peak_reserved[dev] = max(peak_reserved[dev], reserved[dev])


def free(n, dev=0):
    allocated[dev] -= n
    assert allocated[dev] >= 0


def reset():
    global allocated, reserved, peak, peak_reserved, stats_calls, current, fraction
    allocated, reserved, peak, peak_reserved = [0] * GPUS, [0] * GPUS, [0] * GPUS, [0] * GPUS
    fraction = [1.0] * GPUS
    stats_calls = 0
    current = 0
