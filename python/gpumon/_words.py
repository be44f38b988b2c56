# SPDX-License-Identifier: MIT
"""The run model's alerts in plain words, for GPUMonitor's warnings: the same facts the gpumon
program words (lib/words.c) — the rate, where it started, steps and time to out-of-memory and the
bound that projection runs against — taken from the model's document. Nothing here decides or
computes a figure: a figure the document does not give is left out."""
from __future__ import annotations

from typing import Any, Dict, Optional

from ._sinks import human


def duration(seconds: float) -> str:
    """A span of seconds as people say it: "45 s", "4 min 37 s", "2 h 05 min", "3 days"."""
    t = int(seconds + 0.5) if seconds > 0 else 0
    if t < 60:
        return f"{t} s"
    if t < 3600:
        return f"{t // 60} min {t % 60:02d} s"
    if t < 2 * 86400:
        return f"{t // 3600} h {t // 60 % 60:02d} min"
    return f"{t // 86400} days"


def series(s: Optional[Dict[str, Any]]) -> str:
    """What a verdict's series is, seen from inside the training process."""
    kind = (s or {}).get("kind")
    if kind == "framework":
        return f"{s.get('framework') or 'the framework'}'s allocated memory"
    if kind == "job":
        return "this process's memory on the GPU (NVML)"
    if kind == "process":
        return f"pid {s.get('pid')} on the GPU (NVML)"
    if kind == "device":
        return "the GPU's used memory (NVML)"
    return "no memory series"


_ROOM = {"free": "the GPU's free memory", "limit": "the limit set for the job",
         "cap": "the cap set on the allocator", "total": "the GPU's total (what other processes hold is unknown)"}


def room(v: Dict[str, Any]) -> str:
    """What bounds the projection to out-of-memory."""
    r = v.get("room")
    return _ROOM.get(r, r) if r else "an unknown limit"


def rate(v: Dict[str, Any]) -> str:
    """"rises by 4.0 MiB a step from step 40" (a second, from 12.5 s into the run, when the
    series has no steps)."""
    per_step = v.get("rate_bytes_per_step")
    if per_step is not None and per_step > 0:
        text = f"rises by {human(per_step)} a step"
    else:
        text = f"rises by {human(v.get('rate_bytes_per_second'))} a second"
    if v.get("start_step") is not None:
        text += f" from step {v['start_step']}"
    elif v.get("start_time") is not None:
        text += f" from {v['start_time']:.1f} s into the run"
    return text


def to_oom(v: Dict[str, Any]) -> str:
    """"; out of memory in about 1,200 more steps (about 2 min 10 s) at this rate, against the
    GPU's free memory (136.00 GiB left)", or "" when the document gives no projection."""
    steps, secs = v.get("steps_to_oom"), v.get("seconds_to_oom")
    if steps is None and secs is None:
        return ""
    if steps is not None:
        when = f"{steps:,.0f} more steps" + (f" (about {duration(secs)})" if secs is not None else "")
    else:
        when = duration(secs)
    return f"; out of memory in about {when} at this rate, against {room(v)} ({human(v.get('room_bytes'))} left)"


def leak_alert(a: Dict[str, Any], gpu: Any) -> str:
    """A leak alert (an entry of the document's "alerts") as GPUMonitor warns it."""
    return f"gpumon: memory leak suspected on GPU {gpu}: {series(a.get('series'))} {rate(a)}{to_oom(a)}"


def oom_projected(v: Dict[str, Any], gpu: Any, within: int) -> str:
    """The model's projection of out-of-memory, once it came within the steps the user gave."""
    return (f"gpumon: out of memory projected on GPU {gpu} within {within:,} steps: {series(v.get('series'))} "
            f"{rate(v)}{to_oom(v)}")


def headroom_alert(a: Dict[str, Any], gpu: Any, share: float, step: Any) -> str:
    """A headroom alert: the GPU's free and total memory, and the share the monitor was given."""
    return (f"gpumon: GPU {gpu} has {human(a.get('free_bytes'))} free of {human(a.get('total_bytes'))}, "
            f"below the {share:.0%} headroom at step {step}")


def verdict(v: Optional[Dict[str, Any]]) -> str:
    """The run's verdict (the document's "leak") in a few words, for summary_text()."""
    if v is None:
        return "no series"
    if v.get("verdict") == "leak":
        return f"suspected: {series(v.get('series'))} {rate(v)}{to_oom(v)}"
    if v.get("verdict") == "none":
        return f"none ({v.get('points')} points)"
    return f"not enough data to tell ({v.get('points')} points)"
