# SPDX-License-Identifier: MIT
"""transformers.trainer_callback of the stand-in."""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class TrainerState:
    epoch: Optional[float] = None
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    save_steps: int = 500
    log_history: List[Dict[str, Any]] = field(default_factory=list)
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True


@dataclass
class TrainerControl:
    should_training_stop: bool = False
    should_epoch_stop: bool = False
    should_save: bool = False
    should_evaluate: bool = False
    should_log: bool = False


class TrainerCallback:
    """Every event takes (args, state, control, **kwargs) and may return the control."""

    def on_init_end(self, args, state, control, **kwargs):
        pass

    def on_train_begin(self, args, state, control, **kwargs):
        pass

    def on_train_end(self, args, state, control, **kwargs):
        pass

    def on_step_begin(self, args, state, control, **kwargs):
        pass

    def on_step_end(self, args, state, control, **kwargs):
        pass

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass

    def on_save(self, args, state, control, **kwargs):
        pass


class DefaultFlowCallback(TrainerCallback):
    """should_log at every logging_steps-th step, should_save at every save_steps-th (when the
    save strategy is "steps"), should_training_stop at max_steps."""

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 1 and args.logging_first_step:
            control.should_log = True
        if args.logging_strategy == "steps" and state.global_step % state.logging_steps == 0:
            control.should_log = True
        if args.save_strategy == "steps" and state.save_steps > 0 and state.global_step % state.save_steps == 0:
            control.should_save = True
        if state.global_step >= state.max_steps:
            control.should_training_stop = True
        return control


class PrinterCallback(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        _ = logs.pop("total_flos", None)


class CallbackHandler(TrainerCallback):
    """Calls each callback's event in the list's order; a callback given as a class is made."""

    def __init__(self, callbacks, model, processing_class, optimizer, lr_scheduler):
        self.callbacks = []
        for cb in callbacks:
            self.add_callback(cb)
        self.model = model
        self.processing_class = processing_class
        self.optimizer = optimizer
        self.lr_scheduler = lr_scheduler

    def add_callback(self, callback):
        self.callbacks.append(callback() if isinstance(callback, type) else callback)

    def on_init_end(self, args, state, control):
        return self.call_event("on_init_end", args, state, control)

    def on_train_begin(self, args, state, control):
        control.should_training_stop = False
        return self.call_event("on_train_begin", args, state, control)

    def on_train_end(self, args, state, control):
        return self.call_event("on_train_end", args, state, control)

    def on_step_begin(self, args, state, control):
        control.should_log = False
        control.should_evaluate = False
        control.should_save = False
        return self.call_event("on_step_begin", args, state, control)

    def on_step_end(self, args, state, control):
        return self.call_event("on_step_end", args, state, control)

    def on_log(self, args, state, control, logs):
        control.should_log = False
        return self.call_event("on_log", args, state, control, logs=logs)

    def on_save(self, args, state, control):
        control.should_save = False
        return self.call_event("on_save", args, state, control)

    def call_event(self, event, args, state, control, **kwargs):
        for callback in self.callbacks:
            result = getattr(callback, event)(args, state, control, model=self.model,
                                              processing_class=self.processing_class, optimizer=self.optimizer,
                                              lr_scheduler=self.lr_scheduler, train_dataloader=None,
                                              eval_dataloader=None, **kwargs)
            if result is not None:
                control = result
        return control
