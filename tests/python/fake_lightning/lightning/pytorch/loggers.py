# SPDX-License-Identifier: MIT
"""lightning.pytorch.loggers of the stand-in: the Logger base and a CSVLogger that keeps its rows."""
from ._core import CSVLogger, Logger  # noqa: F401
