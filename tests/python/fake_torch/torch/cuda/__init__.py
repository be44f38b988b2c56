# SPDX-License-Identifier: MIT
"""torch.cuda of the stand-in: devices, the allocator's statistics (empty before CUDA starts, as
torch's), CUDA's lazy start (_lazy_call, is_initialized, init) and the out-of-memory error."""
from .. import _fake
from .._fake import OutOfMemoryError  # noqa: F401


class DeferredCudaCallError(Exception):
    pass


def is_initialized():
    return _fake.initialized


def init():
    _fake.init()


def _lazy_call(callable, **kwargs):
    """As torch's: now when CUDA started, else queued until it starts."""
    if _fake.initialized:
        callable()
    else:
        _fake.queued.append(callable)


def _dev(device):
    if device is None:
        return _fake.current
    if hasattr(device, "index"):
        return _fake.current if device.index is None else device.index
    if isinstance(device, str):
        return int(device.split(":")[1]) if ":" in device else _fake.current
    if not 0 <= device < _fake.GPUS:
        raise RuntimeError("CUDA error: invalid device ordinal")
    return device


def is_available():
    return _fake.GPUS > 0


def device_count():
    return _fake.GPUS


def current_device():
    return _fake.current


def memory_stats(device=None):
    d = _dev(device)
    _fake.stats_calls += 1
    if not _fake.initialized:
        return {}
    return {"allocated_bytes.all.current": _fake.allocated[d], "allocated_bytes.all.peak": _fake.peak[d],
            "reserved_bytes.all.current": _fake.reserved[d], "reserved_bytes.all.peak": _fake.peak_reserved[d]}


def memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def set_per_process_memory_fraction(fraction, device=None):
    _fake.fraction[_dev(device)] = float(fraction)


def get_per_process_memory_fraction(device=None):  # torch >= 2.9
    return _fake.fraction[_dev(device)]


def reset_peak_memory_stats(device=None):
    d = _dev(device)
    _fake.peak[d] = _fake.allocated[d]
    _fake.peak_reserved[d] = _fake.reserved[d]


class _Props:
    def __init__(self, d):
        self.name = "NVIDIA H200"
        self.total_memory = 150754820096
        if d < len(_fake.UUIDS):
            self.uuid = _fake.UUIDS[d]


def get_device_properties(device=None):
    return _Props(_dev(device))  # without FAKE_TORCH_UUIDS no .uuid, as in older torch


from . import memory  # noqa: E402,F401
