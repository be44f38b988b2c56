# SPDX-License-Identifier: MIT
"""gpumon: GPU memory as the training loop sees it (the framework's allocator) and as the driver
sees it (NVML), in one place, with early leak alerts.

    import gpumon
    mon = gpumon.GPUMonitor()      # PyTorch, Paddle or JAX: whichever the program imported
    for step, batch in enumerate(loader):
        ...
        mon.step()                 # a sample a few times a second

Also: gpumon.report(path) (a recording's report, as `gpumon report PATH --json`),
gpumon.log_memory(step), gpumon.get_gpu_info(device_id=0), gpumon.limit_pool(...),
gpumon.suggest_batch_size(points), gpumon.fit(step_fn) (the largest batch that fits, measured).
help(gpumon.GPUMonitor) describes every argument.
Trainers: gpumon.lightning.GPUMonitorCallback (PyTorch Lightning) and gpumon.hf.GPUMonitorCallback
(Hugging Face Trainer), imported on their own so that `import gpumon` imports neither.
"""
import json as _json
import os as _os
from typing import Any, Dict

from ._gpumon import Error, version as _libversion
from ._gpumon import report as _report_text
from ._events import AlertEvent
from ._fit import fit
from ._tools import get_gpu_info, limit_pool, log_memory, suggest_batch_size
from .monitor import (GPUMonitor, GpumonWarning, HeadroomWarning, LeakWarning, Sample, Section,
                      SinkWarning)

__version__ = _libversion()
__all__ = ["GPUMonitor", "Sample", "Section", "AlertEvent", "Error", "GpumonWarning", "LeakWarning", "HeadroomWarning",
           "SinkWarning", "report", "log_memory", "get_gpu_info", "limit_pool", "suggest_batch_size",
           "fit"]


def report(path: Any) -> Dict[str, Any]:
    """The report of a gpumon recording (a file of `gpumon record`, `gpumon run -o` or
    GPUMonitor(record=...)) as a dict: the document `gpumon report PATH --json` prints
    (docs/report.md), made by the same library code: the leak verdict of every series and the
    run's, the peak and whose it was, out-of-memory diagnosis, alerts, events. A damaged or cut-off
    file gives what could be read, with the loss named in ["source"]["damage"].

    Raises OSError when the file cannot be read, ValueError when it is not a gpumon recording (or
    a format this library does not read) or when nothing of it could be read (as `gpumon report`
    exits 2 then), each with the library's message."""
    return _json.loads(_report_text(_os.fspath(path)))
