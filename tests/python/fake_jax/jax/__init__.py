# SPDX-License-Identifier: MIT
"""A stand-in for the part of JAX gpumon reads, for tests on machines without JAX: jax.devices(),
jax.local_devices(), jax.config.jax_default_device, and a Device's platform, id,
local_hardware_id, process_index, device_kind and memory_stats() (a dict with XLA's keys on a GPU,
None on the CPU, as jax's Device.memory_stats documents); the backends started by the first of
those calls (jax._src.xla_bridge.backends_are_initialized()), and jax.errors.JaxRuntimeError, what
XLA's out-of-memory raises. jax._fake drives the allocator.

FAKE_JAX_GPUS (default 1; 0: a CPU-only jax) sets the number of GPUs. The allocator reads JAX's
variables as JAX does when its backend starts: XLA_PYTHON_CLIENT_PREALLOCATE,
XLA_PYTHON_CLIENT_MEM_FRACTION (default .75 of the GPU's memory) and
XLA_PYTHON_CLIENT_ALLOCATOR=platform (which gives no statistics: memory_stats() is None)."""

__version__ = "0.7.2+fake"


class Device:
    def __init__(self, platform, id, local_hardware_id):
        self.platform = platform
        self.id = id
        self.local_hardware_id = local_hardware_id
        self.process_index = 0
        self.device_kind = "NVIDIA H200" if platform == "gpu" else "cpu"

    def memory_stats(self):
        return _fake.stats(self) if self.platform == "gpu" else None

    def __repr__(self):
        return f"{'Cuda' if self.platform == 'gpu' else 'Cpu'}Device(id={self.id})"


class _Config:
    jax_default_device = None


config = _Config()


def devices(backend=None):
    return _fake.devices(backend)


def local_devices(process_index=None, backend=None, host_id=None):
    return [d for d in _fake.devices(backend) if process_index in (None, d.process_index)]


from . import _fake  # noqa: E402
from . import errors  # noqa: E402,F401
from ._src import xla_bridge  # noqa: E402,F401
