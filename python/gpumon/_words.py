# SPDX-License-Identifier: MIT
"""The run model's alerts and verdict in plain words, for GPUMonitor's warnings and summary_text():
the sentence is the library's own (gpumon_words_alert, gpumon_words_verdict: what the gpumon
program says), asked of the model through the extension; only what the monitor adds around it (its
GPU, the share or the steps the user gave, the step) is said here."""
from __future__ import annotations

from typing import Any

from . import _gpumon


def leak_alert(model: Any, i: int, gpu: Any) -> str:
    """The model's i-th alert (model.alerts()), a leak, as GPUMonitor warns it."""
    return f"gpumon: memory leak suspected on GPU {gpu}: {_gpumon.words_alert(model, i)}"


def oom_projected(model: Any, i: int, gpu: Any, within: int) -> str:
    """The model's projection of out-of-memory (its i-th alert), once it came within the steps the
    user gave."""
    return f"gpumon: out of memory projected on GPU {gpu} within {within:,} steps: {_gpumon.words_alert(model, i)}"


def headroom_alert(model: Any, i: int, share: float, step: Any) -> str:
    """A headroom alert (the model's i-th): the GPU's free and total memory, and the share the
    monitor was given."""
    return f"gpumon: {_gpumon.words_alert(model, i)}, below the {share:.0%} headroom at step {step}"


def verdict(model: Any) -> str:
    """The run's verdict in one sentence, for summary_text()."""
    return _gpumon.words_verdict(model) or "no series"
