# SPDX-License-Identifier: MIT
"""gpumon: GPU memory as the training loop sees it (the framework's allocator) and as the driver
sees it (NVML), in one place, with early leak alerts.

    import gpumon
    mon = gpumon.GPUMonitor(interval=50)      # Paddle or PyTorch: whichever is imported
    for step, batch in enumerate(loader):
        ...
        mon.step()

Also: gpumon.log_memory(step), gpumon.get_gpu_info(device_id=0), gpumon.limit_pool(...),
gpumon.suggest_batch_size(points). help(gpumon.GPUMonitor) describes every argument.
"""
from ._gpumon import Error, version as _libversion
from ._tools import get_gpu_info, limit_pool, log_memory, suggest_batch_size
from .monitor import (GPUMonitor, GpumonWarning, HeadroomWarning, LeakWarning, Sample, Section,
                      SinkWarning)

__version__ = _libversion()
__all__ = ["GPUMonitor", "Sample", "Section", "Error", "GpumonWarning", "LeakWarning", "HeadroomWarning",
           "SinkWarning", "log_memory", "get_gpu_info", "limit_pool", "suggest_batch_size"]
