# SPDX-License-Identifier: MIT
"""The one-liners people already reach for: log_memory(step), get_gpu_info(device_id),
limit_pool(...) before the framework is imported, and suggest_batch_size(points)."""
from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from . import _gpumon
from ._frameworks import make_adapter, nvml_index

MIB = 1 << 20
_monitors: Dict[Any, Any] = {}


def log_memory(step: int, device: Any = None, framework: str = "auto", logger: Any = None):
    """Logs one line `[Step N] Used | Peak | Reserved | Process | GPU` now and returns the Sample.

    The first call builds a GPUMonitor for (device, framework) and keeps it for later calls."""
    from .monitor import GPUMonitor
    key = (device if isinstance(device, (int, str, type(None))) else repr(device), framework)
    mon = _monitors.get(key)
    if mon is None:
        mon = GPUMonitor(device=device, framework=framework, logger=logger, interval=1, min_headroom=None)
        _monitors[key] = mon
    return mon.sample(step=step)


def get_gpu_info(device_id: int = 0) -> Tuple[int, int, Optional[int]]:
    """(used MiB, total MiB, utilization %) of the GPU at NVML index device_id (nvidia-smi's
    numbering), as `nvidia-smi --query-gpu=memory.used,memory.total,utilization.gpu` gives them
    but read through NVML in microseconds. MiB are rounded down; utilization is None when the
    driver does not tell it. Raises ValueError for an index out of range, gpumon.Error without
    a driver."""
    if isinstance(device_id, bool) or not isinstance(device_id, int):
        raise ValueError(f"device_id must be an int (nvidia-smi's GPU index), got {device_id!r}")
    nvml = _gpumon.Nvml()
    try:
        n = nvml.device_count()
        if not 0 <= device_id < n:
            raise ValueError(f"device_id {device_id} is out of range: this machine has {n} GPU"
                             + ("" if n == 1 else "s") + (f" (0..{n - 1})" if n else ""))
        s = nvml.sample(device_id)
        return (s[3] // MIB, s[2] // MIB, s[6])
    finally:
        nvml.close()


# ---- limit_pool ---------------------------------------------------------------------------------

def _size(v: Any, what: str) -> Optional[int]:
    """Bytes from an int or a text like '8G', '512MiB', '1.5GB' (binary units, as the frameworks'
    _mb flags count MiB), read as `gpumon run` reads its sizes (libgpumon's gpumon_size_parse)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise ValueError(f"{what} must be a size in bytes or a text like '8G', got {v!r}")
    n = v if isinstance(v, int) else _gpumon.size_parse(v.strip())
    if n is None:
        raise ValueError(f"{what}={v!r} is not a size: use bytes or a number with K, M, G or T")
    if n <= 0:
        raise ValueError(f"{what} must be more than 0 bytes, got {v!r}")
    return n


_MODULES = {"torch": "torch", "paddle": "paddle", "jax": "jax", "tf": "tensorflow"}


def limit_pool(limit: Any = None, fraction: Optional[float] = None, no_prealloc: bool = False,
               expandable: bool = False, max_split: Any = None, gc_threshold: Optional[float] = None,
               paddle_strategy: Optional[str] = None, frameworks: Iterable[str] = ("paddle", "torch", "jax", "tf"),
               gpu_total: Any = None) -> Dict[str, str]:
    """Sets the allocator variables of Paddle, PyTorch, JAX and TensorFlow in os.environ, by
    libgpumon's plan (the one `gpumon run --limit/--fraction/...` uses), and returns what it set.
    Call it before the framework is imported: each reads them once at import or first use. Warns
    (UserWarning) when a framework is already imported (too late) and when a setting has no effect
    on a framework (the plan's words).

      limit        cap of the pool: Paddle FLAGS_gpu_memory_limit_mb; JAX a memory fraction of
                   gpu_total (bytes or '80G'; read from NVML GPU 0 when None)
      fraction     Paddle FLAGS_fraction_of_gpu_memory_to_use (naive_best_fit only), JAX
                   XLA_PYTHON_CLIENT_MEM_FRACTION
      no_prealloc  Paddle auto_growth, JAX XLA_PYTHON_CLIENT_PREALLOCATE=false,
                   TensorFlow TF_FORCE_GPU_ALLOW_GROWTH=true
      expandable, max_split, gc_threshold   PyTorch PYTORCH_CUDA_ALLOC_CONF keys
      paddle_strategy  FLAGS_allocator_strategy (auto_growth, naive_best_fit, thread_local)
    """
    bits = 0
    for f in ([frameworks] if isinstance(frameworks, str) else frameworks):
        b = _gpumon.framework_bits(str(f).lower())
        if not b:
            raise ValueError(f"unknown framework {f!r}: use 'paddle', 'torch', 'jax' or 'tf'")
        bits |= b
    if not bits:  # no framework asked for: nothing to set (the library's 0 would be all of them)
        return {}
    limit_b = _size(limit, "limit")
    split_b = _size(max_split, "max_split")
    for v, what in ((fraction, "fraction"), (gc_threshold, "gc_threshold")):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ValueError(f"{what} must be a number, got {v!r}")
    total = None
    if limit_b and fraction is None and bits & _gpumon.framework_bits("jax"):  # JAX: a share of the GPU
        total = _size(gpu_total, "gpu_total") if gpu_total is not None else _nvml_total()
    vars_, notes = _gpumon.alloc_plan(bits, limit_b or 0, float(fraction or 0), bool(no_prealloc), bool(expandable),
                                      split_b or 0, float(gc_threshold or 0), paddle_strategy, total or 0,
                                      [f"{k}={v}" for k, v in os.environ.items()])
    out: Dict[str, str] = {}
    for name, value in vars_:
        os.environ[name] = value
        out[name] = value
    said = [n for n, no_effect in notes if no_effect]
    for fw, mod in sorted(_MODULES.items()):
        if bits & _gpumon.framework_bits(fw) and mod in sys.modules:
            said.append(f"{mod} is already imported: it read its allocator settings then, so "
                        "limit_pool() comes too late for it; call it before the import")
    for n in said:
        warnings.warn("gpumon.limit_pool: " + n, UserWarning, stacklevel=2)
    return out


def _nvml_total() -> Optional[int]:
    try:
        nvml = _gpumon.Nvml()
    except _gpumon.Error:
        return None
    try:
        return nvml.device_info(0)["memory_total_bytes"] if nvml.device_count() else None
    finally:
        nvml.close()


# ---- suggest_batch_size --------------------------------------------------------------------------

def suggest_batch_size(points: Sequence[Tuple[int, int]], limit_bytes: Optional[int] = None, margin: float = 0.10,
                       multiple_of: int = 1, device: Any = None, framework: str = "auto",
                       fixed_bytes: Optional[int] = None) -> int:
    """The largest batch size whose peak fits the memory available, with a margin.

    points: two or more measured (batch size, peak allocated bytes), e.g. from
    GPUMonitor.summary()["peak_allocated_bytes"] or section() peaks at two batch sizes. The fit
    is libgpumon's, the one gpumon.fit() and `gpumon fit` use: peak = fixed + per_sample * batch
    (least squares), or a quadratic when three or more points grow faster than the batch, with
    what the library keeps free (the points' misfit, at least 1 % of the room). fixed_bytes, when
    known (what stays allocated between steps: weights, gradients, optimizer state), is taken as
    the fixed part, and then one point is enough (a run at one batch size). limit_bytes: what the
    allocator may reach; None = the GPU's free memory now plus what the framework has reserved
    (its cached blocks are reusable), from NVML and the framework. margin: a share of limit_bytes
    kept free on top of the library's (fragmentation, workspaces): the fit's room is
    limit_bytes * (1 - margin). Returns a multiple of multiple_of (at least 0). ValueError when
    the points do not let a size be computed (fewer than 2 distinct sizes without fixed_bytes, a
    peak that does not grow with the batch, peaks that follow neither a line nor a quadratic),
    with the library's words."""
    pts = [(b, p) for b, p in points]
    if not pts or (fixed_bytes is None and len({b for b, _ in pts}) < 2):
        raise ValueError("suggest_batch_size needs measured peaks at two or more different batch sizes "
                         "(or one, with fixed_bytes)")
    if fixed_bytes is not None and (isinstance(fixed_bytes, bool) or not isinstance(fixed_bytes, int)
                                    or fixed_bytes < 0):
        raise ValueError(f"fixed_bytes must be None or a whole number of bytes >= 0, got {fixed_bytes!r}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin must be in [0, 1), got {margin!r}")
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of < 1:
        raise ValueError(f"multiple_of must be at least 1, got {multiple_of!r}")
    if limit_bytes is None:
        limit_bytes = _available(device, framework)
    fit = _gpumon.fit_batch(pts, room_bytes=max(0, int(limit_bytes * (1 - margin))), multiple_of=multiple_of,
                            fixed_bytes=fixed_bytes)
    if fit["shape"] == "none":
        raise ValueError(fit["note"])
    return fit["max_batch"]


def allocator_room(free: Optional[int], reserved: Optional[int], cap: Optional[int] = None,
                   process: Optional[int] = None) -> Optional[int]:
    """What the allocator may still reach, by libgpumon's rule (gpumon_job_room_get, the room
    gpumon.fit() and `gpumon fit` take): the GPU's free memory plus its reserve (its cached blocks
    are reusable), no more than its cap. None when the free memory is unknown."""
    room = _gpumon.job_room(free, process, reserved, cap or None)
    return None if room is None else room["allocator_bytes"]


def _available(device: Any, framework: str) -> int:
    adapter = make_adapter(framework, device)
    nvml = _gpumon.Nvml()
    try:
        free = nvml.sample(nvml_index(nvml, adapter))[4]
    finally:
        nvml.close()
    room = allocator_room(free, adapter.read()[2], adapter.cap())
    if room is None:
        raise ValueError("the GPU's free memory is unknown: pass limit_bytes")
    return room
