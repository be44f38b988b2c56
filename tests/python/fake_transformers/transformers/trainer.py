# SPDX-License-Identifier: MIT
"""transformers.Trainer of the stand-in: the default callbacks, the report_to integrations, then
the user's; train() calls the events in the real Trainer's order. The model is a callable run once
a step (the test's training step); a saved checkpoint is a directory output_dir/checkpoint-N."""
import os

from .integrations import get_reporting_integration_callbacks
from .trainer_callback import CallbackHandler, DefaultFlowCallback, PrinterCallback, TrainerControl, TrainerState

DEFAULT_CALLBACKS = [DefaultFlowCallback]


class Trainer:
    def __init__(self, model=None, args=None, callbacks=None):
        self.model = model
        self.args = args
        default_callbacks = DEFAULT_CALLBACKS + get_reporting_integration_callbacks(args.report_to)
        callbacks = default_callbacks if callbacks is None else default_callbacks + callbacks
        self.callback_handler = CallbackHandler(callbacks, model, None, None, None)
        self.callback_handler.add_callback(PrinterCallback)
        self.state = TrainerState()
        self.control = TrainerControl()
        self.control = self.callback_handler.on_init_end(self.args, self.state, self.control)

    def add_callback(self, callback):
        self.callback_handler.add_callback(callback)

    def log(self, logs):
        output = {**logs, **{"step": self.state.global_step}}
        self.state.log_history.append(output)
        self.control = self.callback_handler.on_log(self.args, self.state, self.control, logs)

    def train(self):
        args, state = self.args, self.state
        state.max_steps, state.logging_steps, state.save_steps = args.max_steps, args.logging_steps, args.save_steps
        self.control = self.callback_handler.on_train_begin(args, state, self.control)
        while not self.control.should_training_stop:
            self.control = self.callback_handler.on_step_begin(args, state, self.control)
            loss = self.model(args.per_device_train_batch_size)
            state.global_step += 1
            self.control = self.callback_handler.on_step_end(args, state, self.control)
            if self.control.should_log:
                self.log({"loss": float(loss or 0.0), "learning_rate": 1e-4})
            if self.control.should_save:
                os.makedirs(os.path.join(args.output_dir, f"checkpoint-{state.global_step}"), exist_ok=True)
                self.control = self.callback_handler.on_save(args, state, self.control)
        self.control = self.callback_handler.on_train_end(args, state, self.control)
