# SPDX-License-Identifier: MIT
"""AlertEvent: what on_alert receives. Each event is one of the run model's alerts (a leak, a GPU
below its headroom) or the model's own projection of out-of-memory coming within the steps the
user gave, with the model's figures copied as they are: nothing here computes or decides."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional

KINDS = ("leak", "headroom_low", "oom_projected")


@dataclass(frozen=True)
class AlertEvent:
    """One alert, typed. Bytes unless the name says otherwise; None means "not known", never 0.

    kind           "leak" (the model's leak detector alerted), "headroom_low" (the GPU's free
                   memory fell below min_headroom), "oom_projected" (after a leak alert, the
                   model's projection of out-of-memory came within oom_within_steps steps)
    message        the alert in words, as gpumon tells it
    step, device, rank   the training step of the sample, the framework's GPU index, the
                   process's rank in a distributed job
    rate_bytes_per_step, rate_bytes_per_second   the leak's rate (leak, oom_projected)
    steps_to_oom, seconds_to_oom   what the model projects is left at that rate
    room           what bounds the projection: "free", "limit", "cap" or "total"
    headroom_bytes what is left: room_bytes of the projection (leak, oom_projected) or the GPU's
                   free memory (headroom_low)
    total_bytes    the GPU's total memory (headroom_low)
    alert          the model's entry as its document has it, plus "message" and "step"; event[key]
                   and event.get(key) read it, as on_alert's dict did in earlier versions
    """

    kind: str
    message: str
    step: Optional[int] = None
    device: Optional[int] = None
    rank: Optional[int] = None
    rate_bytes_per_step: Optional[float] = None
    rate_bytes_per_second: Optional[float] = None
    steps_to_oom: Optional[float] = None
    seconds_to_oom: Optional[float] = None
    room: Optional[str] = None
    headroom_bytes: Optional[int] = None
    total_bytes: Optional[int] = None
    alert: Dict[str, Any] = field(default_factory=dict, repr=False)

    def __getitem__(self, key: str) -> Any:
        return self.alert[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.alert.get(key, default)


def from_alert(a: Dict[str, Any], kind: str, device: Optional[int], rank: Optional[int]) -> AlertEvent:
    """The event of a model's alert entry (leak, headroom_low, oom_projected) told as a, which
    holds "message" and "step" besides the model's fields."""
    if kind == "headroom_low":
        return AlertEvent(kind=kind, message=a["message"], step=a.get("step"), device=device, rank=rank,
                          headroom_bytes=a.get("free_bytes"), total_bytes=a.get("total_bytes"), alert=a)
    return AlertEvent(kind=kind, message=a["message"], step=a.get("step"), device=device, rank=rank,
                      rate_bytes_per_step=a.get("rate_bytes_per_step"),
                      rate_bytes_per_second=a.get("rate_bytes_per_second"), steps_to_oom=a.get("steps_to_oom"),
                      seconds_to_oom=a.get("seconds_to_oom"), room=a.get("room"), headroom_bytes=a.get("room_bytes"),
                      alert=a)
