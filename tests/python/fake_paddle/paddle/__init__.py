# SPDX-License-Identifier: MIT
"""A stand-in for PaddlePaddle's GPU memory API, for tests on machines without Paddle. It mirrors
the documented surface (python/paddle/device/cuda/__init__.py): paddle.CUDAPlace,
paddle.device.get_device(), paddle.device.cuda.{device_count, memory_allocated,
max_memory_allocated, memory_reserved, max_memory_reserved, reset_max_memory_allocated,
reset_max_memory_reserved, empty_cache, get_device_properties}, with the device argument forms
Paddle accepts (None, int, "gpu:N", CUDAPlace) and refusing the others as Paddle does.

FAKE_PADDLE_GPUS (default 1) sets the number of GPUs; FAKE_PADDLE_NO_RESET=1 leaves out the
reset functions, as in releases before 3.0. paddle._fake drives the allocator figures."""
import os

__version__ = "2.6.1" if os.environ.get("FAKE_PADDLE_NO_RESET") == "1" else "3.0.0"


class CUDAPlace:
    def __init__(self, device_id):
        self._id = int(device_id)

    def get_device_id(self):
        return self._id

    def __repr__(self):
        return f"Place(gpu:{self._id})"


class CPUPlace:
    pass


from . import _fake  # noqa: E402
from . import device  # noqa: E402
