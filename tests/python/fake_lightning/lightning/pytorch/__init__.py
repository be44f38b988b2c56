# SPDX-License-Identifier: MIT
"""A stand-in for lightning.pytorch, for the CPU tests of gpumon.lightning: the documented parts a
callback uses (Callback hooks, Trainer.global_step / global_rank / world_size / loggers /
log_every_n_steps / default_root_dir / datamodule / save_checkpoint, LightningModule.device /
log / all_gather / hparams, Logger.log_metrics) and a fit loop calling the hooks in Lightning's
order (on_train_batch_end after the optimizer step that raised global_step)."""
from ._core import AttributeDict, Callback, LightningDataModule, LightningModule, Logger, Trainer  # noqa: F401
from . import callbacks, loggers  # noqa: F401,E402

__version__ = "2.5.0+fake"
