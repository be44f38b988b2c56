# SPDX-License-Identifier: MIT
"""The stand-in's classes, shared by lightning.pytorch and pytorch_lightning (each package makes its
own copies, so that, as with the real packages, a Trainer of one rejects the other's callbacks)."""
import csv
import os

import torch


class AttributeDict(dict):
    def __getattr__(self, key):
        try:
            return self[key]
        except KeyError as e:
            raise AttributeError(key) from e

    def __setattr__(self, key, value):
        self[key] = value


class Callback:
    """The hooks gpumon's callback uses; all do nothing here, as in Lightning."""

    @property
    def state_key(self):
        return self.__class__.__qualname__

    def setup(self, trainer, pl_module, stage):
        pass

    def on_train_start(self, trainer, pl_module):
        pass

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        pass

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pass

    def on_train_end(self, trainer, pl_module):
        pass

    def teardown(self, trainer, pl_module, stage):
        pass


class Logger:
    """Lightning's logger interface: log_metrics(metrics, step) (rank 0 only, in Lightning)."""

    @property
    def name(self):
        return "fake"

    @property
    def version(self):
        return 0

    def log_hyperparams(self, params, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step=None):
        raise NotImplementedError

    def save(self):
        pass

    def finalize(self, status):
        self.save()


class CSVLogger(Logger):
    """Rows of {step, metric...}, written to save_dir/metrics.csv on save()."""

    def __init__(self, save_dir, name="lightning_logs"):
        self.save_dir = os.fspath(save_dir)
        self.rows = []

    def log_metrics(self, metrics, step=None):
        self.rows.append(dict(metrics, step=step))

    def save(self):
        keys = sorted({k for r in self.rows for k in r})
        os.makedirs(self.save_dir, exist_ok=True)
        with open(os.path.join(self.save_dir, "metrics.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, keys)
            w.writeheader()
            w.writerows(self.rows)


class LightningModule:
    """device, hparams, log(), all_gather(); training_step(batch, batch_idx) is the user's."""

    def __init__(self):
        self.hparams = AttributeDict()
        self.trainer = None
        self.logged = {}
        self._device = torch.device("cuda", 0)

    @property
    def device(self):
        return self._device

    def log(self, name, value, prog_bar=False, logger=None, on_step=None, on_epoch=None, sync_dist=False,
            rank_zero_only=False, **kwargs):
        self.logged[name] = value

    def all_gather(self, data, group=None, sync_grads=False):
        return data  # one process: unchanged, as Lightning returns it

    def training_step(self, batch, batch_idx):
        raise NotImplementedError


class LightningDataModule:
    pass


class Trainer:
    """fit(model, train_dataloaders or datamodule): for each batch, on_train_batch_start,
    training_step, an optimizer step every accumulate_grad_batches batches (global_step += 1),
    on_train_batch_end; epochs until max_steps, a datamodule's loader made anew for each.
    save_checkpoint writes a small file."""

    callback_class = Callback

    def __init__(self, callbacks=None, logger=None, max_steps=-1, log_every_n_steps=50, accumulate_grad_batches=1,
                 default_root_dir=None, global_rank=0, world_size=1):
        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            if not isinstance(cb, self.callback_class):
                raise TypeError(f"{cb!r} is not a {self.callback_class.__module__} Callback")
        if logger is None or logger is False:
            self.loggers = []
        else:
            self.loggers = list(logger) if isinstance(logger, (list, tuple)) else [logger]
        self.max_steps = max_steps
        self.log_every_n_steps = log_every_n_steps
        self.accumulate_grad_batches = accumulate_grad_batches
        self.default_root_dir = os.fspath(default_root_dir or os.getcwd())
        self.global_step = 0
        self.global_rank = global_rank
        self.world_size = world_size
        self.datamodule = None
        self.saved = []

    @property
    def logger(self):
        return self.loggers[0] if self.loggers else None

    def save_checkpoint(self, filepath, weights_only=False, storage_options=None):
        os.makedirs(os.path.dirname(os.fspath(filepath)) or ".", exist_ok=True)
        with open(filepath, "w") as f:
            f.write(f"global_step={self.global_step}\n")
        self.saved.append(os.fspath(filepath))

    def _call(self, hook, model, *args):
        for cb in self.callbacks:
            getattr(cb, hook)(self, model, *args)

    def fit(self, model, train_dataloaders=None, datamodule=None):
        model.trainer = self
        self.datamodule = datamodule
        self._call("setup", model, "fit")
        self._call("on_train_start", model)
        batch_idx = 0
        while self.max_steps < 0 or self.global_step < self.max_steps:
            # a datamodule's loader is made anew each epoch (reload_dataloaders_every_n_epochs=1)
            loader = train_dataloaders if train_dataloaders is not None else datamodule.train_dataloader()
            for batch in loader:
                self._call("on_train_batch_start", model, batch, batch_idx)
                out = model.training_step(batch, batch_idx)
                if (batch_idx + 1) % self.accumulate_grad_batches == 0:
                    self.global_step += 1
                self._call("on_train_batch_end", model, out, batch, batch_idx)
                batch_idx += 1
                if self.global_step == self.max_steps:
                    break
            if self.max_steps < 0:
                break
        self._call("on_train_end", model)
        for lg in self.loggers:
            lg.finalize("success")
        self._call("teardown", model, "fit")
