# SPDX-License-Identifier: MIT
"""lightning.pytorch.callbacks of the stand-in."""
from ._core import Callback  # noqa: F401
