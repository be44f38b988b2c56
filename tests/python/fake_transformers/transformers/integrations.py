# SPDX-License-Identifier: MIT
"""transformers.integrations of the stand-in: a TensorBoardCallback that keeps, instead of writing,
the scalars it would write (on world process zero, at on_log, numbers only, as the real one)."""
from .trainer_callback import TrainerCallback


class TensorBoardCallback(TrainerCallback):
    def __init__(self):
        self.scalars = []  # (tag, value, step)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero:
            return
        for k, v in logs.items():
            if isinstance(v, (int, float)):
                tag = k if k.startswith(("eval_", "test_")) else "train/" + k
                self.scalars.append((tag, v, state.global_step))


def get_reporting_integration_callbacks(report_to):
    return [TensorBoardCallback] if "tensorboard" in (report_to or []) else []
