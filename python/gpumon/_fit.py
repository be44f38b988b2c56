# SPDX-License-Identifier: MIT
"""gpumon.fit(step_fn): a training step measured at a few batch sizes in this process, and the
largest batch that fits the GPU as it is now, as `gpumon fit` finds it for a whole job. The
measuring is here; the fit, the margin and the batch sizes worth measuring are libgpumon's."""
from __future__ import annotations

import gc
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence

from . import _gpumon

MAX_RUNS = 16  # fit_next asks for three to eight; a bound however the step behaves


def _is_oom(e: BaseException) -> bool:
    """torch's OutOfMemoryError, or an error whose text libgpumon reads as a framework's
    out-of-memory message (Paddle, JAX/XLA, TensorFlow)."""
    torch = sys.modules.get("torch")
    for mod in (getattr(torch, "cuda", None), torch):
        t = getattr(mod, "OutOfMemoryError", None)
        if isinstance(t, type) and isinstance(e, t):
            return True
    return _gpumon.oom_message_match(str(e)) is not None


def _release() -> None:
    """What the last run left cached goes back to the driver, so that each run's peak is its own."""
    gc.collect()
    torch = sys.modules.get("torch")
    empty = getattr(getattr(torch, "cuda", None), "empty_cache", None)
    if empty is not None:
        empty()


def _room(mon: Any) -> int:
    """What the job may take on the GPU now, by libgpumon's rule (gpumon_job_room_get): the free
    memory plus what this process holds (its figure is part of each peak), no more than the
    allocator's cap plus what the process holds outside the allocator."""
    s = mon.sample()
    room = _gpumon.job_room(s.device_free, s.process, s.reserved, s.cap or None)
    if room is None:
        raise ValueError("gpumon.fit: the GPU's free memory is unknown (no NVIDIA driver answering): "
                         "the largest batch cannot be told")
    return room["room_bytes"]


def _measure(mon: Any, step_fn: Callable[[int], Any], batch: int, steps: int) -> Dict[str, Any]:
    """One run: step_fn(batch) `steps` times from a reset peak. Its peak as NVML would see it is
    libgpumon's (gpumon_fit_run_from, as `gpumon fit` makes its runs): what the process holds beyond
    the allocator's reserve (CUDA context, libraries) plus the reserve's peak, or the process's
    figure if higher."""
    _release()
    mon.adapter.reset_peak()
    failed = False
    try:
        for _ in range(steps):
            step_fn(batch)
    except Exception as e:  # an out-of-memory is a run's result; anything else is the step's bug
        if not _is_oom(e):
            raise
        failed = True
    s = mon.sample()
    _, peak, reserved, max_reserved = mon.adapter.read()
    return _gpumon.fit_run_from(batch, failed, nvml=s.process, reserved=reserved, allocated_peak=peak or None,
                                reserved_peak=max_reserved or None)


def fit(step_fn: Callable[[int], Any], batch_sizes: Optional[Sequence[int]] = None, device: Any = None,
        steps: int = 3, multiple_of: int = 1) -> Dict[str, Any]:
    """The largest batch size that fits the GPU as it is now, from a few short runs of step_fn:

        res = gpumon.fit(lambda b: train_step(next_batch(b)))
        print(res["max_batch"], res["note"])

    step_fn(batch) runs one training step at that batch size; it is called `steps` times per
    batch size, under a GPUMonitor of `device` (the framework's GPU, as GPUMonitor takes it). A
    run's peak is the framework's peak reserve (torch's max_memory_reserved after
    reset_peak_memory_stats) plus what the process holds beyond it by NVML; an out-of-memory
    error (torch.cuda.OutOfMemoryError, or a message libgpumon reads as one) makes a failed run,
    an upper bound: larger batch sizes are not tried, the bound is bisected down to 1 % and the
    answer is the largest size that ran. batch_sizes None: libgpumon chooses them
    (gpumon_fit_next from 1: 1, then 2 or less near the room, 8x more while the peaks stay flat,
    then one near half the answer);
    else these, smallest first. The room is the GPU's free memory plus what this process holds,
    no more than the allocator's cap, measured once before the runs.

    Returns libgpumon's fit (gpumon_fit_batch, the one `gpumon fit` and suggest_batch_size use):
    shape ("linear", "quadratic" or "none": no answer, note says why), fixed_bytes,
    per_sample_bytes, per_sample2_bytes, misfit, margin_bytes, max_batch (a multiple of
    multiple_of, 0: none), predicted_peak_bytes, extrapolated, note; plus room_bytes and runs
    (batch, peak_bytes, allocated_peak_bytes, reserved_peak_bytes, failed: each measured run).
    ValueError for bad arguments or an unknown free memory; what step_fn raises otherwise reaches
    the caller."""
    if not callable(step_fn):
        raise ValueError(f"step_fn must be callable (it takes the batch size), got {step_fn!r}")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive int, got {steps!r}")
    if isinstance(multiple_of, bool) or not isinstance(multiple_of, int) or multiple_of < 1:
        raise ValueError(f"multiple_of must be a positive int, got {multiple_of!r}")
    sizes: Optional[List[int]] = None
    if batch_sizes is not None:
        sizes = sorted(set(batch_sizes))
        if not sizes or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in sizes):
            raise ValueError(f"batch_sizes must be positive ints (or None), got {batch_sizes!r}")
    from .monitor import GPUMonitor
    mon = GPUMonitor(device=device, interval=1, logger=False, min_headroom=None, leak_detection=False)
    try:
        room = _room(mon)
        runs: List[Dict[str, Any]] = []
        for b in sizes or ():
            if any(r["failed"] for r in runs):  # sizes rise: the rest would fail too
                break
            runs.append(_measure(mon, step_fn, b, steps))
        # the sizes the library asks for: all of them without batch_sizes; after a size that ran
        # out of memory, those that bisect its bound (as gpumon fit does)
        ask = sizes is None or any(r["failed"] for r in runs)
        b = _gpumon.fit_next(runs, room, 1, multiple_of) if ask else 0
        while b and len(runs) < MAX_RUNS:
            runs.append(_measure(mon, step_fn, b, steps))
            b = _gpumon.fit_next(runs, room, 1, multiple_of)
    finally:
        mon.close()
    res = _gpumon.fit_batch(runs, room, multiple_of)  # never empty: fit_next starts at 1
    res.update(room_bytes=room, runs=runs)
    return res
