# SPDX-License-Identifier: MIT
"""paddle.device.cuda of the stand-in, with Paddle's argument checks (extract_cuda_device_id)."""
import os

from .. import _fake


def _device_id(device, op_name):
    import paddle
    _fake.calls.append((op_name, device))
    if device is None:
        return _fake.current
    if isinstance(device, paddle.CUDAPlace):
        d = device.get_device_id()
    elif isinstance(device, int) and not isinstance(device, bool):
        d = device
    elif isinstance(device, str) and device.startswith("gpu:"):
        d = int(device[4:])
    else:
        raise ValueError(f"The device type {device} is not expected. Because paddle.device.cuda.{op_name} only "
                         "support int, str or paddle.CUDAPlace. Please input appropriate device again!")
    if not 0 <= d < _fake.GPUS:
        raise ValueError(f"The device id {d} exceeds gpu card number {_fake.GPUS}")
    return d


def device_count():
    return _fake.GPUS


def memory_allocated(device=None):
    return _fake.allocated[_device_id(device, "memory_allocated")]


def max_memory_allocated(device=None):
    return _fake.max_allocated[_device_id(device, "max_memory_allocated")]


def memory_reserved(device=None):
    return _fake.reserved[_device_id(device, "memory_reserved")]


def max_memory_reserved(device=None):
    return _fake.max_reserved[_device_id(device, "max_memory_reserved")]


def empty_cache():
    for d in range(_fake.GPUS):
        _fake.reserved[d] = -(-_fake.allocated[d] // _fake.SEGMENT) * _fake.SEGMENT


class _Props:
    def __init__(self, d):
        self.name = "NVIDIA H200"
        self.major, self.minor = 9, 0
        self.total_memory = 150754820096
        self.multi_processor_count = 132


def get_device_properties(device=None):
    return _Props(_device_id(device, "get_device_properties"))


if os.environ.get("FAKE_PADDLE_NO_RESET") != "1":
    def reset_max_memory_allocated(device=None):
        d = _device_id(device, "reset_max_memory_allocated")
        _fake.max_allocated[d] = _fake.allocated[d]

    def reset_max_memory_reserved(device=None):
        d = _device_id(device, "reset_max_memory_reserved")
        _fake.max_reserved[d] = _fake.reserved[d]
