# SPDX-License-Identifier: MIT
"""gpumon.lightning.GPUMonitorCallback: GPUMonitor inside a PyTorch Lightning Trainer (package
`lightning` or `pytorch_lightning`, whichever the program imported; the class is made at first use,
so `import gpumon` imports neither). Samples every N optimizer steps, logs to the trainer's loggers
under the sinks' names, tells alerts through Lightning's logger, and can act on them."""
from __future__ import annotations

import importlib
import logging
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ._events import AlertEvent
from ._trainer import CoreAccess, TrainerMonitor, alone

_PACKAGES = ("lightning.pytorch", "pytorch_lightning")


def _lightning():
    """Lightning's package: the one the program already imported (a Trainer takes only its own
    package's callbacks), else the first that imports."""
    for name in _PACKAGES:
        if name in sys.modules:
            return sys.modules[name]
    errors = []
    for name in _PACKAGES:
        try:
            return importlib.import_module(name)
        except ImportError as e:
            errors.append(f"{name}: {e}")
    raise ImportError("gpumon.lightning needs PyTorch Lightning (pip install lightning, or pytorch-lightning); "
                      + "; ".join(errors))


class _Hooks(CoreAccess):
    """The callback's hooks, on top of Lightning's Callback (see GPUMonitorCallback)."""

    def __init__(self, every_n_steps: int = 10, on_alert: Optional[Callable[[AlertEvent], Any]] = None,
                 adjust: bool = False, oom_within_steps: Optional[int] = 1000, checkpoint_dir: Optional[str] = None,
                 batch_size_attr: str = "batch_size", batch_points: Optional[Sequence[Tuple[int, int]]] = None,
                 margin: float = 0.10, multiple_of: int = 1, **monitor_kwargs: Any):
        super().__init__()
        self.core = TrainerMonitor(every_n_steps, on_alert, adjust, oom_within_steps, batch_points, margin,
                                   multiple_of, monitor_kwargs)
        self.checkpoint_dir = checkpoint_dir
        self.batch_size_attr = batch_size_attr

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        log = logging.getLogger(self._logger_name)
        self.core.start(pl_module.device, trainer.global_rank, trainer.world_size, log.warning)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = trainer.global_step
        if self.core.mon is None or step == self.core.last_step:  # no optimizer step (accumulating)
            return
        every_log = trainer.log_every_n_steps
        due_log = bool(trainer.loggers) and bool(every_log) and step % every_log == 0
        if not (due_log or self.core.due(step)):
            return
        self.core.sample(step)
        figs, act, size = self.core.share(self._gather(pl_module, trainer.world_size), self._batch_size(trainer, pl_module))
        if due_log and trainer.global_rank == 0:
            for lg in trainer.loggers:
                lg.log_metrics(figs, step=step)
        if act:
            self._act(trainer, pl_module, step, size)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.core.close()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        self.core.close()

    # ---- helpers --------------------------------------------------------------------------------

    @staticmethod
    def _gather(pl_module: Any, world: int):
        """Every rank's row, through LightningModule.all_gather (a collective: called at a step
        every rank reaches)."""
        if world <= 1:
            return alone

        def gather(row: List[float]) -> List[List[float]]:
            import torch
            t = torch.tensor(row, dtype=torch.float64, device=pl_module.device)
            return pl_module.all_gather(t).tolist()
        return gather

    def _holders(self, trainer: Any, pl_module: Any) -> List[Tuple[str, Any, bool]]:
        """Where the batch size is, as Lightning's own batch-size finder looks: the module, its
        hparams, the datamodule. (name, holder, is_mapping)."""
        attr, found = self.batch_size_attr, []
        if hasattr(pl_module, attr):
            found.append(("the LightningModule", pl_module, False))
        hp = getattr(pl_module, "hparams", None)
        if hp is not None and attr in hp:
            found.append(("the LightningModule's hparams", hp, True))
        dm = getattr(trainer, "datamodule", None)
        if dm is not None and hasattr(dm, attr):
            found.append(("the LightningDataModule", dm, False))
        return found

    def _batch_size(self, trainer: Any, pl_module: Any) -> Optional[int]:
        for _, holder, mapping in self._holders(trainer, pl_module):
            v = holder[self.batch_size_attr] if mapping else getattr(holder, self.batch_size_attr)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None

    def _act(self, trainer: Any, pl_module: Any, step: int, size: Optional[int]) -> None:
        """The built-in action, on every rank at once: a checkpoint (trainer.save_checkpoint, which
        every rank must call) and the smaller batch size where the data loader reads it next."""
        path = os.path.join(self.checkpoint_dir or trainer.default_root_dir, f"gpumon-step{step}.ckpt")
        trainer.save_checkpoint(path)
        old, where = self._batch_size(trainer, pl_module), None
        if size is not None and old is not None and size < old:
            places = self._holders(trainer, pl_module)
            for _, holder, mapping in places:
                if mapping:
                    holder[self.batch_size_attr] = size
                else:
                    setattr(holder, self.batch_size_attr, size)
            where = " and ".join(name for name, _, _ in places)
        self.core.acted(step, path, old, size, where)


_classes: Dict[str, type] = {}


def _callback_class() -> type:
    pl = _lightning()
    cls = _classes.get(pl.__name__)
    if cls is None:
        cls = type("GPUMonitorCallback", (_Hooks, pl.Callback), {
            "__module__": __name__, "__doc__": _DOC, "_logger_name": pl.__name__})
        _classes[pl.__name__] = cls
    return cls


_DOC = """GPU memory of a Lightning run, from every rank, as gpumon sees it.

    trainer = L.Trainer(callbacks=[gpumon.lightning.GPUMonitorCallback()])

At every every_n_steps-th optimizer step (trainer.global_step) it samples the framework's
allocator and NVML; at the steps the Trainer logs (log_every_n_steps) it gives the figures to
trainer.loggers (TensorBoard, CSV, W&B, ...) under the names of gpumon's TensorBoard sink
(memory/allocated_mib, memory/peak_mib, memory/reserved_mib, memory/process_mib,
memory/unaccounted_mib, gpu/used_mib, gpu/free_mib, gpu/util_pct), each ending in /rankN when
there are several ranks (gathered to rank 0, whose loggers write). Alerts are told once, through
Lightning's logger (under `gpumon run`, leak alerts by gpumon).

Arguments: every_n_steps (10); on_alert, a callable given each gpumon.AlertEvent; adjust=True: the
built-in action on an oom_projected (within oom_within_steps, 1000) or headroom_low event, on
every rank at once: trainer.save_checkpoint(checkpoint_dir or default_root_dir/gpumon-stepN.ckpt)
and a smaller batch size from gpumon.suggest_batch_size (from batch_points, or this run's peak
and what stays allocated between steps; margin, multiple_of) set in the module's, its hparams' or
the datamodule's batch_size_attr, for the data loader built next. Other keywords go to
GPUMonitor (min_headroom, leak_detection, csv, jsonl, tensorboard, record, ...).
.monitor is the GPUMonitor, .adjustments what the action did."""


def __getattr__(name: str) -> Any:
    if name == "GPUMonitorCallback":
        return _callback_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
