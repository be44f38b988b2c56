# SPDX-License-Identifier: MIT
"""torch.cuda.memory of the stand-in: the allocator's history and snapshot (torch's private API that
the memory visualiser reads)."""
import sys

from .. import _fake


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False):
    if enabled not in (None, "state", "all") or context not in (None, "state", "alloc", "all") or \
            stacks not in ("python", "all"):
        raise ValueError("bad argument to _record_memory_history")
    _fake.history = None if enabled is None else {"enabled": enabled, "context": context, "stacks": stacks,
                                                  "max_entries": max_entries}


def _snapshot(device=None):
    return _fake.snapshot()
