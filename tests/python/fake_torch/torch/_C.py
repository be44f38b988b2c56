# SPDX-License-Identifier: MIT
"""torch._C of the stand-in: the allocator's bindings gpumon uses."""
from . import _fake


def _cuda_attach_out_of_memory_observer(observer):
    _fake.init()  # as torch's binding: it starts CUDA (lazyInitDevice) before attaching
    _fake.observers.append(observer)


def _cuda_memoryStats(device):
    """The nested statistics memory_stats() flattens; torch refuses a device before CUDA starts."""
    if not _fake.initialized or not 0 <= device < _fake.GPUS:
        raise RuntimeError("Invalid device argument")
    _fake.stats_calls += 1
    d = device
    return {"allocated_bytes": {"all": {"current": _fake.allocated[d], "peak": _fake.peak[d]}},
            "reserved_bytes": {"all": {"current": _fake.reserved[d], "peak": _fake.peak_reserved[d]}}}
