# SPDX-License-Identifier: MIT
"""jax.errors of the stand-in."""


class JaxRuntimeError(RuntimeError):
    """What XLA raises at run time (RESOURCE_EXHAUSTED when out of memory)."""
