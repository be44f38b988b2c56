# SPDX-License-Identifier: MIT
"""The fake XLA allocator behind the stand-in jax: per GPU, bytes in use and their peak, the pool
taken from the driver (the whole limit at start when pre-allocating, else grown in 2 MiB steps as
the BFC allocator grows) and the limit (the memory fraction of the GPU's total)."""
import os

TOTAL = 150754820096  # an H200, as tests/python/conftest.py's scenario has it
MIB = 1 << 20

GPUS = 1
ID_BASE = 0      # the first GPU's jax id (another process's devices come first in a multi-process run)
HIDE = set()     # keys memory_stats() leaves out, as some allocators do
LIMIT = 0        # bytes_limit; read with the variables when the backend starts, as JAX does
PLATFORM = False  # XLA_PYTHON_CLIENT_ALLOCATOR=platform
_devs = []
in_use = peak = pool = peak_pool = allocs = []
stats_calls = 0
started = False  # the backends exist: the first devices() (JAX starts them at the job's first use)


def _settings():
    prealloc = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() not in ("false", "0")
    fraction = float(os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", ".75"))
    platform = os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "") == "platform"
    return prealloc, int(fraction * TOTAL), platform


def reset(gpus=None, id_base=0):
    """A fresh backend: GPUS GPUs (FAKE_JAX_GPUS unless given), nothing allocated."""
    global GPUS, ID_BASE, LIMIT, PLATFORM, _devs, in_use, peak, pool, peak_pool, allocs, stats_calls, started
    from . import Device
    GPUS = int(os.environ.get("FAKE_JAX_GPUS", "1")) if gpus is None else gpus
    ID_BASE = id_base
    HIDE.clear()
    prealloc, LIMIT, PLATFORM = _settings()
    if GPUS:
        _devs = [Device("gpu", ID_BASE + i, i) for i in range(GPUS)]
    else:
        _devs = [Device("cpu", 0, 0)]
    start = LIMIT if prealloc else 0
    in_use, peak, allocs = [0] * GPUS, [0] * GPUS, [0] * GPUS
    pool, peak_pool = [start] * GPUS, [start] * GPUS
    stats_calls = 0
    started = False


def devices(backend=None):
    global started
    started = True
    platforms = {d.platform for d in _devs}
    if backend is not None and backend not in platforms and not (backend == "cuda" and "gpu" in platforms):
        raise RuntimeError(f"Unknown backend: '{backend}' requested, but no platforms that are instances of "
                           f"{backend} are present. Platforms present are: {','.join(sorted(platforms))}")
    return list(_devs)


def alloc(n, dev=0):
    """An array of n bytes on GPU dev (the backends start first, as a job's first array starts them)."""
    devices()
    if in_use[dev] + n > LIMIT:
        from .errors import JaxRuntimeError
        raise JaxRuntimeError(f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {n} bytes.")
    in_use[dev] += n
    allocs[dev] += 1
    peak[dev] = max(peak[dev], in_use[dev])
    if in_use[dev] > pool[dev]:
        pool[dev] = -(-in_use[dev] // (2 * MIB)) * (2 * MIB)
    peak_pool[dev] = max(peak_pool[dev], pool[dev])


def free(n, dev=0):
    in_use[dev] -= n
    assert in_use[dev] >= 0


def stats(device):
    global stats_calls
    stats_calls += 1
    if PLATFORM:  # XLA's platform allocator keeps no statistics: jax gives None
        return None
    d = device.local_hardware_id
    s = {"num_allocs": allocs[d], "bytes_in_use": in_use[d], "peak_bytes_in_use": peak[d],
         "largest_alloc_size": 0, "bytes_limit": LIMIT, "bytes_reserved": 0, "peak_bytes_reserved": 0,
         "largest_free_block_bytes": pool[d] - in_use[d], "pool_bytes": pool[d], "peak_pool_bytes": peak_pool[d]}
    return {k: v for k, v in s.items() if k not in HIDE}


reset()
