# SPDX-License-Identifier: MIT
"""What the Lightning and Hugging Face callbacks share: a GPUMonitor sampled at optimizer steps,
its figures under the TensorBoard sink's names (one set per rank when there are several), alerts
told through the trainer's logging, and the built-in action on a projected out-of-memory or low
headroom: a checkpoint, and a smaller batch size (suggest_batch_size) for the next data loader."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._events import AlertEvent
from ._sinks import MIB, TB_TAGS
from ._tools import allocator_room, suggest_batch_size
from .monitor import GPUMonitor, Sample

# What a callback logs: the TensorBoard sink's tags (MiB) and the GPU's utilisation (%).
METRICS = TB_TAGS + (("gpu/util_pct", "util_gpu"),)
# The events the built-in action answers: memory will run out, or nearly has.
ACT_ON = ("oom_projected", "headroom_low")
# GPUMonitor's arguments that the callback sets itself.
_OWN = ("device", "framework", "interval", "on_alert", "rank", "oom_within_steps")

Row = List[Optional[float]]
Gather = Callable[[List[float]], Sequence[Sequence[float]]]


def figures(s: Optional[Sample]) -> Row:
    """A sample's figures in the order of METRICS: MiB (the %, for utilisation); None: unknown."""
    row: Row = []
    for _, attr in METRICS:
        v = getattr(s, attr) if s is not None else None
        row.append(None if v is None else (float(v) if attr == "util_gpu" else v / MIB))
    return row


def metrics(rows: Sequence[Row]) -> Dict[str, float]:
    """Every rank's figures under the sinks' names; with several ranks each name ends in /rankN."""
    out: Dict[str, float] = {}
    for rank, row in enumerate(rows):
        for (tag, _), v in zip(METRICS, row):
            if v is not None:
                out[tag if len(rows) == 1 else f"{tag}/rank{rank}"] = v
    return out


def alone(row: List[float]) -> List[List[float]]:
    """The gather of a process that has no other ranks."""
    return [row]


class CoreAccess:
    """What both callbacks show of their TrainerMonitor (self.core)."""

    @property
    def monitor(self):
        """The GPUMonitor of the run (None before training starts or off a GPU)."""
        return self.core.mon

    @property
    def adjustments(self) -> List[Dict[str, Any]]:
        """What the built-in action did: step, kind, checkpoint, batch_size, next_batch_size."""
        return self.core.adjustments


class TrainerMonitor:
    """One training run's monitor inside a trainer callback. The callback calls start() when
    training starts, sample(step) and share(...) at optimizer steps every rank reaches, and acts
    when share() says so; close() at the end."""

    def __init__(self, every_n_steps: int, on_alert: Optional[Callable[[AlertEvent], Any]], adjust: bool,
                 oom_within_steps: Optional[int], batch_points: Optional[Sequence[Tuple[int, int]]], margin: float,
                 multiple_of: int, monitor_kwargs: Dict[str, Any]):
        if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, int) or every_n_steps <= 0:
            raise ValueError(f"every_n_steps must be a positive whole number of optimizer steps, got {every_n_steps!r}")
        if on_alert is not None and not callable(on_alert):
            raise ValueError(f"on_alert must be callable, got {on_alert!r}")
        own = sorted(set(monitor_kwargs) & set(_OWN))
        if own:
            raise ValueError(f"the callback sets {', '.join(own)} itself: leave {'them' if len(own) > 1 else 'it'} out")
        if batch_points is not None:
            batch_points = [(int(b), int(p)) for b, p in batch_points]
        self.every = every_n_steps
        self.on_alert = on_alert
        self.adjust = bool(adjust)
        self.oom_within = oom_within_steps
        self.batch_points = batch_points
        self.margin = margin
        self.multiple_of = multiple_of
        self.kwargs = monitor_kwargs
        self.mon: Optional[GPUMonitor] = None
        self.last_step: Optional[int] = None
        self.pending: Optional[AlertEvent] = None   # an event the action has yet to answer
        self.adjustments: List[Dict[str, Any]] = []
        self.tell: Callable[[str], None] = print
        self.world = 1

    def start(self, device: Any, rank: int, world: int, tell: Callable[[str], None]) -> bool:
        """Builds the monitor for the model's device; False (said through tell) when it is no GPU."""
        self.world = world
        self.tell = (lambda msg: tell(f"[rank {rank}] {msg}")) if world > 1 else tell
        if getattr(device, "type", "cuda") != "cuda":
            self.tell(f"gpumon: the model is on {device}, not on a CUDA GPU: not monitored")
            return False
        self.close()
        kw = dict(logger=False)
        kw.update(self.kwargs)
        listen = self.adjust or self.on_alert is not None
        self.mon = GPUMonitor(device=device, framework="torch", on_alert=self._alert, rank=rank,
                              oom_within_steps=self.oom_within if listen else None, **kw)
        self.mon._tell_alert = self.tell  # alerts go to the trainer's logging, not to warnings
        self.last_step = None
        return True

    def _alert(self, ev: AlertEvent) -> None:
        if self.adjust and ev.kind in ACT_ON and self.pending is None:
            self.pending = ev
        if self.on_alert is not None:
            self.on_alert(ev)

    def due(self, step: int) -> bool:
        """A step at which the monitor samples (a new optimizer step, a multiple of every_n_steps)."""
        return self.mon is not None and step != self.last_step and step % self.every == 0

    def sample(self, step: int) -> Optional[Sample]:
        """A sample at this optimizer step (once per step)."""
        if self.mon is None:
            return None
        if step != self.last_step:
            self.last_step = step
            self.mon.sample(step=step)
        return self.mon.last

    def share(self, gather: Gather, batch_size: Optional[int]) -> Tuple[Dict[str, float], bool, Optional[int]]:
        """At a step every rank reaches: every rank's figures, whether any rank's action is due,
        and the smallest next batch size a rank suggests (None: none could be told)."""
        ask = self.pending is not None
        suggested = self.suggestion(batch_size) if ask else None
        row = figures(self.mon.last if self.mon is not None else None) + [1.0 if ask else 0.0, suggested]
        rows = [[None if v != v else v for v in r] for r in gather([math.nan if v is None else float(v) for v in row])]
        act = any(r[-2] for r in rows)
        sizes = [int(r[-1]) for r in rows if r[-1] is not None]
        return metrics([r[:-2] for r in rows]), act, (min(sizes) if sizes else None)

    def suggestion(self, batch_size: Optional[int]) -> Optional[int]:
        """The next batch size, never more than batch_size: suggest_batch_size from the points
        given, else from this run's (batch size, peak allocated) with what stays allocated at the
        step's end as the fixed part, against what the allocator can still reach (the GPU's free
        memory plus its reserve, or its cap if lower). None, said through tell, when it cannot be
        told."""
        s = self.mon.last if self.mon is not None else None
        if s is None or s.device_free is None or s.reserved is None:
            self.tell("gpumon: no batch size suggested: the GPU's free memory or the allocator's reserve is not known")
            return None
        limit = allocator_room(s.device_free, s.reserved, s.cap, s.process)
        if self.batch_points:
            points, fixed = self.batch_points, None
        elif batch_size is None or s.peak is None or s.allocated is None:
            self.tell("gpumon: no batch size suggested: the batch size or the allocator's peak is not known "
                      "(give batch_points)")
            return None
        else:
            points, fixed = [(batch_size, s.peak)], s.allocated
        try:
            n = suggest_batch_size(points, limit_bytes=limit, margin=self.margin, multiple_of=self.multiple_of,
                                   fixed_bytes=fixed)
        except ValueError as e:
            self.tell(f"gpumon: no batch size suggested: {e}")
            return None
        return n if batch_size is None else min(n, batch_size)

    def acted(self, step: int, checkpoint: Optional[str], old: Optional[int], new: Optional[int],
              where: Optional[str]) -> Dict[str, Any]:
        """Records and tells what the action did at this step."""
        ev, self.pending = self.pending, None
        why = {"oom_projected": "out of memory projected", "headroom_low": "GPU memory low"}.get(
            ev.kind if ev else "", "another rank's memory alert")
        a = {"step": step, "kind": ev.kind if ev else None, "checkpoint": checkpoint, "batch_size": old,
             "next_batch_size": new}
        self.adjustments.append(a)
        said = f"gpumon: {why} at step {step}: " + (f"checkpoint to {checkpoint}" if checkpoint else "no checkpoint")
        if new is not None and old is not None and new < old:
            said += f"; next batch size {new} (was {old}, set in {where})"
        elif new is not None and where is None and (old is None or new < old):
            said += f"; suggested batch size {new} (no batch size attribute found to set)"
        else:
            said += "; batch size kept" + (f" at {old}" if old is not None else "")
        self.tell(said)
        return a

    def close(self) -> None:
        if self.mon is not None:
            self.mon.close()
