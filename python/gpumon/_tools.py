# SPDX-License-Identifier: MIT
"""The one-liners people already reach for: log_memory(step), get_gpu_info(device_id),
limit_pool(...) before the framework is imported, and suggest_batch_size(points)."""
from __future__ import annotations

import math
import os
import re
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

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _size(v: Any, what: str) -> Optional[int]:
    """Bytes from an int or a text like '8G', '512MiB', '1.5GB' (binary units, as the frameworks'
    _mb flags count MiB)."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise ValueError(f"{what} must be a size in bytes or a text like '8G', got {v!r}")
    if isinstance(v, int):
        n = v
    elif isinstance(v, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", v.lower())
        if not m:
            raise ValueError(f"{what}={v!r} is not a size: use bytes or a number with K, M, G or T")
        n = int(float(m.group(1)) * _UNITS[m.group(2)])
    else:
        raise ValueError(f"{what} must be a size in bytes or a text like '8G', got {v!r}")
    if n <= 0:
        raise ValueError(f"{what} must be more than 0 bytes, got {v!r}")
    return n


def _conf_put(conf: str, key: str, value: str) -> str:
    items = [kv for kv in conf.split(",") if kv.strip() and not kv.strip().startswith(key + ":")]
    return ",".join(items + [f"{key}:{value}"])


_MODULES = {"paddle": "paddle", "torch": "torch", "jax": "jax", "tf": "tensorflow"}


def limit_pool(limit: Any = None, fraction: Optional[float] = None, no_prealloc: bool = False,
               expandable: bool = False, max_split: Any = None, gc_threshold: Optional[float] = None,
               paddle_strategy: Optional[str] = None, frameworks: Iterable[str] = ("paddle", "torch", "jax", "tf"),
               gpu_total: Any = None) -> Dict[str, str]:
    """Sets the allocator variables of Paddle, PyTorch, JAX and TensorFlow in os.environ, as
    `gpumon run --limit/--fraction/...` does, and returns what it set. Call it before the
    framework is imported: each reads them once at import or first use. Warns (UserWarning) when
    a framework is already imported (too late) and when a setting has no effect on a framework.

      limit        cap of the pool: Paddle FLAGS_gpu_memory_limit_mb; JAX a memory fraction of
                   gpu_total (bytes or '80G'; read from NVML GPU 0 when None)
      fraction     Paddle FLAGS_fraction_of_gpu_memory_to_use (naive_best_fit only), JAX
                   XLA_PYTHON_CLIENT_MEM_FRACTION
      no_prealloc  Paddle auto_growth, JAX XLA_PYTHON_CLIENT_PREALLOCATE=false,
                   TensorFlow TF_FORCE_GPU_ALLOW_GROWTH=true
      expandable, max_split, gc_threshold   PyTorch PYTORCH_CUDA_ALLOC_CONF keys
      paddle_strategy  FLAGS_allocator_strategy (auto_growth, naive_best_fit, thread_local)
    """
    fws = set()
    for f in ([frameworks] if isinstance(frameworks, str) else frameworks):
        f = {"pytorch": "torch", "tensorflow": "tf", "paddlepaddle": "paddle"}.get(f.lower(), f.lower())
        if f not in _MODULES:
            raise ValueError(f"unknown framework {f!r}: use 'paddle', 'torch', 'jax' or 'tf'")
        fws.add(f)
    limit_b = _size(limit, "limit")
    split_b = _size(max_split, "max_split")
    if fraction is not None and not (isinstance(fraction, (int, float)) and 0 < fraction <= 1):
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    if gc_threshold is not None and not (isinstance(gc_threshold, (int, float)) and 0 < gc_threshold < 1):
        raise ValueError(f"gc_threshold must be in (0, 1), got {gc_threshold!r}")
    strategies = ("auto_growth", "naive_best_fit", "thread_local")
    if paddle_strategy is not None and paddle_strategy not in strategies:
        raise ValueError(f"paddle_strategy must be one of {', '.join(strategies)}, got {paddle_strategy!r}")
    if no_prealloc and paddle_strategy == "naive_best_fit":
        raise ValueError("no_prealloc contradicts paddle_strategy='naive_best_fit' (which pre-allocates)")
    out: Dict[str, str] = {}
    notes = []

    def put(name: str, value: str) -> None:
        os.environ[name] = value
        out[name] = value

    if "paddle" in fws:
        strategy = paddle_strategy or ("auto_growth" if no_prealloc else os.environ.get("FLAGS_allocator_strategy") or "auto_growth")
        if paddle_strategy or no_prealloc:
            put("FLAGS_allocator_strategy", strategy)
        if limit_b:
            put("FLAGS_gpu_memory_limit_mb", str(max(1, limit_b // MIB)))
        if fraction is not None:
            put("FLAGS_fraction_of_gpu_memory_to_use", f"{fraction:g}")
            if strategy != "naive_best_fit":
                notes.append(f"fraction has no effect on Paddle's {strategy} allocator; add "
                             "paddle_strategy='naive_best_fit' to make it pre-allocate")
        if "FLAGS_malloc_trunk_size" in os.environ:
            notes.append("FLAGS_malloc_trunk_size (set in your environment) does not exist in Paddle and does nothing")
    if "torch" in fws:
        for var in ("PYTORCH_CUDA_ALLOC_CONF",) + (("PYTORCH_ALLOC_CONF",) if "PYTORCH_ALLOC_CONF" in os.environ else ()):
            conf = os.environ.get(var, "")
            new = conf
            if expandable:
                new = _conf_put(new, "expandable_segments", "True")
            if split_b:
                new = _conf_put(new, "max_split_size_mb", str(split_b // MIB))
            if gc_threshold is not None:
                new = _conf_put(new, "garbage_collection_threshold", f"{gc_threshold:g}")
            if new != conf:
                put(var, new)
        if limit_b or fraction is not None:
            notes.append("PyTorch has no variable for a memory cap: call "
                         "torch.cuda.set_per_process_memory_fraction(F) in the code")
    if "jax" in fws:
        if no_prealloc:
            put("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        if fraction is not None:
            put("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{fraction:.3f}")
        elif limit_b:
            total = _size(gpu_total, "gpu_total") if gpu_total is not None else _nvml_total()
            if total:
                f = max(0.001, min(1.0, math.floor(limit_b / total * 1000) / 1000))
                put("XLA_PYTHON_CLIENT_MEM_FRACTION", f"{f:.3f}")
            else:
                notes.append("JAX: limit could not become a memory fraction (the GPU's size is unknown)")
    if "tf" in fws:
        if no_prealloc:
            put("TF_FORCE_GPU_ALLOW_GROWTH", "true")
        if limit_b or fraction is not None:
            notes.append("TensorFlow has no environment variable for a memory cap: use "
                         "tf.config.set_logical_device_configuration in the code")
    for f in sorted(fws):
        if _MODULES[f] in sys.modules:
            notes.append(f"{_MODULES[f]} is already imported: it read its allocator settings then, so "
                         "limit_pool() comes too late for it; call it before the import")
    for n in notes:
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
