# SPDX-License-Identifier: MIT
"""A stand-in for the `lightning` package: as the real one, importing it imports lightning.pytorch
and offers its Trainer, LightningModule and Callback at the top."""
from .pytorch import Callback, LightningModule, Trainer  # noqa: F401

__version__ = "2.5.0+fake"
