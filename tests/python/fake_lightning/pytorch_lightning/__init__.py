# SPDX-License-Identifier: MIT
"""A stand-in for the older `pytorch_lightning` package: the same classes as the stand-in
lightning.pytorch, but its own copies, so that each package's Trainer takes only its own Callbacks
(as the real packages do)."""
import importlib.util
import os
import sys

_spec = importlib.util.spec_from_file_location(
    "pytorch_lightning._core", os.path.join(os.path.dirname(__file__), "..", "lightning", "pytorch", "_core.py"))
_core = importlib.util.module_from_spec(_spec)
sys.modules["pytorch_lightning._core"] = _core
_spec.loader.exec_module(_core)

AttributeDict, Callback, LightningModule, LightningDataModule = (
    _core.AttributeDict, _core.Callback, _core.LightningModule, _core.LightningDataModule)
Logger, CSVLogger, Trainer = _core.Logger, _core.CSVLogger, _core.Trainer

__version__ = "1.9.5+fake"
