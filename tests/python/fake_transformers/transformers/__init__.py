# SPDX-License-Identifier: MIT
"""A stand-in for the part of Hugging Face transformers a Trainer callback meets, for the CPU tests
of gpumon.hf: TrainerCallback and its events (args, state, control positional; the rest keyword),
TrainerState, TrainerControl, TrainingArguments, CallbackHandler (default callbacks, then the
report_to integrations, then the user's), DefaultFlowCallback, a TensorBoardCallback that keeps
what it would write, and a Trainer whose loop calls the events in the Trainer's order."""
from .trainer_callback import (CallbackHandler, DefaultFlowCallback, PrinterCallback, TrainerCallback,  # noqa: F401
                               TrainerControl, TrainerState)
from .training_args import TrainingArguments  # noqa: F401
from .trainer import Trainer  # noqa: F401
from . import integrations  # noqa: F401

__version__ = "4.56.2+fake"
