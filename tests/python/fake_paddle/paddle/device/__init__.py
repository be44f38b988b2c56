# SPDX-License-Identifier: MIT
"""paddle.device of the stand-in: get_device() and the cuda submodule."""
from .. import _fake
from . import cuda  # noqa: F401


def get_device():
    return f"gpu:{_fake.current}" if _fake.GPUS else "cpu"


def set_device(device):
    _fake.current = cuda._device_id(device, "set_device")
