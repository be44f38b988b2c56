# SPDX-License-Identifier: MIT
"""torch.optim.optimizer of the stand-in: the global step post-hooks (torch >= 2.0), run after every
optimizer's step() with (optimizer, args, kwargs), as torch runs them around each subclass's step."""
import functools

_global_optimizer_post_hooks = {}
_next_id = [0]


class _Handle:
    def __init__(self, hooks, key):
        self._hooks, self._key = hooks, key

    def remove(self):
        self._hooks.pop(self._key, None)


def register_optimizer_step_post_hook(hook):
    _next_id[0] += 1
    _global_optimizer_post_hooks[_next_id[0]] = hook
    return _Handle(_global_optimizer_post_hooks, _next_id[0])


def _with_hooks(step):
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        out = step(self, *args, **kwargs)
        for hook in list(_global_optimizer_post_hooks.values()):
            hook(self, args, kwargs)
        return out
    return wrapper


class Optimizer:
    def __init__(self, params, defaults):
        self.param_groups = [dict(defaults, params=list(params))]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_hooks(cls.__dict__["step"])

    def step(self, closure=None):
        raise NotImplementedError
