# SPDX-License-Identifier: MIT
"""gpumon.hf.GPUMonitorCallback: GPUMonitor inside a Hugging Face Trainer (and so under
Accelerate); the class is made at first use from transformers.TrainerCallback, so `import gpumon`
does not import transformers. Samples every N optimizer steps, adds the figures to the Trainer's
logs under the sinks' names, tells alerts through transformers' logger, and can act on them."""
from __future__ import annotations

import logging
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._events import AlertEvent
from ._trainer import CoreAccess, TrainerMonitor, alone


class _Hooks(CoreAccess):
    """The callback's hooks, on top of transformers' TrainerCallback (see GPUMonitorCallback)."""

    def __init__(self, every_n_steps: int = 10, on_alert: Optional[Callable[[AlertEvent], Any]] = None,
                 adjust: bool = False, oom_within_steps: Optional[int] = 1000,
                 batch_points: Optional[Sequence[Tuple[int, int]]] = None, margin: float = 0.10, multiple_of: int = 1,
                 **monitor_kwargs: Any):
        self.core = TrainerMonitor(every_n_steps, on_alert, adjust, oom_within_steps, batch_points, margin,
                                   multiple_of, monitor_kwargs)
        self._logs: Optional[Tuple[int, Dict[str, float]]] = None  # figures for the step's on_log

    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._go_first()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._go_first()
        self._logs = None
        self.core.start(args.device, args.process_index, args.world_size, logging.getLogger("transformers.trainer").warning)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        step = state.global_step
        # DefaultFlowCallback, called before this one, has set should_log at the Trainer's logging steps
        due_log = bool(control.should_log)
        if self.core.mon is None or step == self.core.last_step or not (due_log or self.core.due(step)):
            return control
        self.core.sample(step)
        figs, act, size = self.core.share(self._gather(args), args.per_device_train_batch_size)
        if due_log:
            self._logs = (step, figs)
        if act:
            self._act(args, control, step, size)
        return control

    def on_log(self, args: Any, state: Any, control: Any, logs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        """The figures of this step go into the logs the reporting callbacks write (this callback
        runs before them: _go_first) and into state.log_history's entry for the step."""
        if self._logs is None or logs is None:
            return
        step, figs = self._logs
        self._logs = None
        if step != state.global_step:
            return
        logs.update(figs)
        if state.log_history and state.log_history[-1].get("step") == step:
            state.log_history[-1].update(figs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.core.close()

    # ---- helpers --------------------------------------------------------------------------------

    def _go_first(self) -> None:
        """The Trainer calls the reporting callbacks (TensorBoard, W&B, ...) before the ones the
        user passes, and each writes on_log's dict when its turn comes: so that they write gpumon's
        figures too, this callback moves to just after DefaultFlowCallback in the list of the
        CallbackHandler now calling it (moving earlier keeps that call's loop whole)."""
        f = sys._getframe(2)
        for _ in range(3):
            if f is None:
                return
            callbacks = getattr(f.f_locals.get("self"), "callbacks", None)
            if isinstance(callbacks, list) and any(c is self for c in callbacks):
                break
            f = f.f_back
        else:
            return
        callbacks.remove(self)
        flow = [i for i, c in enumerate(callbacks) if isinstance(c, self._flow_class)]
        callbacks.insert(flow[0] + 1 if flow else 0, self)

    @staticmethod
    def _gather(args: Any):
        """Every rank's row through torch.distributed (a collective: called at a step every rank
        reaches), or this process's alone."""
        if args.world_size <= 1:
            return alone

        def gather(row: List[float]) -> List[List[float]]:
            import torch
            import torch.distributed as dist
            if not (dist.is_available() and dist.is_initialized()):
                return [row]
            t = torch.tensor(row, dtype=torch.float64, device=args.device)
            out = [torch.empty_like(t) for _ in range(dist.get_world_size())]
            dist.all_gather(out, t)
            return [o.tolist() for o in out]
        return gather

    def _act(self, args: Any, control: Any, step: int, size: Optional[int]) -> None:
        """The built-in action, on every rank at once: the Trainer saves a checkpoint after this
        step (control.should_save), and per_device_train_batch_size becomes the smaller size for
        the data loader the Trainer builds next (a resumed or new train())."""
        control.should_save = True
        path = os.path.join(args.output_dir, f"checkpoint-{step}")
        old, where = args.per_device_train_batch_size, None
        if size is not None and old is not None and size < old:
            try:
                args.per_device_train_batch_size = size
                where = "TrainingArguments.per_device_train_batch_size"
            except (AttributeError, TypeError) as e:  # arguments frozen by this transformers
                self.core.tell(f"gpumon: cannot set per_device_train_batch_size ({e})")
        self.core.acted(step, path, old, size, where)


_classes: Dict[str, type] = {}


def _callback_class() -> type:
    try:
        import transformers
    except ImportError as e:
        raise ImportError(f"gpumon.hf needs transformers (pip install transformers): {e}") from None
    cls = _classes.get("transformers")
    if cls is None:
        cls = type("GPUMonitorCallback", (_Hooks, transformers.TrainerCallback), {
            "__module__": __name__, "__doc__": _DOC, "_flow_class": transformers.DefaultFlowCallback})
        _classes["transformers"] = cls
    return cls


_DOC = """GPU memory of a Hugging Face Trainer run, from every rank, as gpumon sees it.

    trainer = Trainer(model, args, ..., callbacks=[gpumon.hf.GPUMonitorCallback()])

At every every_n_steps-th optimizer step (state.global_step) it samples the framework's allocator
and NVML; at the Trainer's logging steps (logging_steps) it adds the figures to the logs, so
TensorBoard, W&B and the other report_to integrations write them and state.log_history keeps
them, under the names of gpumon's TensorBoard sink (memory/allocated_mib, memory/peak_mib,
memory/reserved_mib, memory/process_mib, memory/unaccounted_mib, gpu/used_mib, gpu/free_mib,
gpu/util_pct), each ending in /rankN when there are several ranks (gathered through
torch.distributed). Alerts are told once, through transformers' logger (under `gpumon run`, leak
alerts by gpumon).

Arguments: every_n_steps (10); on_alert, a callable given each gpumon.AlertEvent; adjust=True: the
built-in action on an oom_projected (within oom_within_steps, 1000) or headroom_low event, on every
rank at once: control.should_save (the Trainer saves output_dir/checkpoint-N after the step) and a
smaller per_device_train_batch_size from gpumon.suggest_batch_size (from batch_points, or this
run's peak and what stays allocated between steps; margin, multiple_of), for the data loader the
Trainer builds next. Other keywords go to GPUMonitor (min_headroom, leak_detection, csv, jsonl,
tensorboard, record, ...). .monitor is the GPUMonitor, .adjustments what the action did."""


def __getattr__(name: str) -> Any:
    if name == "GPUMonitorCallback":
        return _callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
