# SPDX-License-Identifier: MIT
"""The fake caching allocator behind the stand-in torch: allocated bytes kept as blocks, reserved
grown in 2 MiB steps and never given back; CUDA started by the first allocation or
torch.cuda.init() (queued calls run then, as torch runs _lazy_call's); out of memory when the
reserve would pass the device's memory or the per-process fraction, the observers called first; the
allocator's history (frames of each live block) only while _record_memory_history has it on."""
import os
import sys

GPUS = int(os.environ.get("FAKE_TORCH_GPUS", "1"))
UUIDS = [u for u in os.environ.get("FAKE_TORCH_UUIDS", "").split(",") if u]
TOTAL = 150754820096  # an H200, as tests/python/conftest.py's scenario has it
SEGMENT = 2 << 20
BASE = 0x7F0000000000

current = 0
allocated = [0] * GPUS
reserved = [0] * GPUS
peak = [0] * GPUS
peak_reserved = [0] * GPUS
blocks = [[] for _ in range(GPUS)]  # per device: [size, frames] of live blocks, oldest first
stats_calls = 0
fraction = [1.0] * GPUS
initialized = False
queued = []        # torch.cuda._lazy_call's callables, run at init
observers = []     # out-of-memory observers (torch._C._cuda_attach_out_of_memory_observer)
history = None     # _record_memory_history's settings while it is on
traces = [[] for _ in range(GPUS)]
snapshots = 0      # torch.cuda.memory._snapshot() calls
inits = 0
compiling = False  # torch.compile tracing (torch.compiler.is_compiling())


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError (torch.cuda.OutOfMemoryError is the same class)."""


def init():
    """CUDA starts: the queued calls run, each failure raised as torch raises it."""
    global initialized, inits
    if initialized:
        return
    if GPUS == 0:
        raise RuntimeError("Found no NVIDIA driver on your system.")
    inits += 1
    calls, queued[:] = list(queued), []
    for fn in calls:
        try:
            fn()
        except Exception as e:
            from .cuda import DeferredCudaCallError
            raise DeferredCudaCallError(f"CUDA call failed lazily at initialization with error: {e}") from e
    initialized = True


def _frames():
    """The Python stack of the caller outside the stand-in, innermost first, as torch records it."""
    out, f = [], sys._getframe(1)
    here = os.path.dirname(os.path.abspath(__file__))
    while f is not None:
        fn = f.f_code.co_filename
        if not os.path.abspath(fn).startswith(here):
            out.append({"filename": fn, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    return out


def _trace(dev, entry):
    if history is not None and history["enabled"] == "all":
        t = traces[dev]
        t.append(entry)
        del t[:-history["max_entries"]]


def alloc(n, dev=0):
    """An allocation of n bytes on dev (CUDA starts first, as a tensor's allocation starts it)."""
    init()
    bound = TOTAL if fraction[dev] >= 1 else int(fraction[dev] * TOTAL)
    need = -(-(allocated[dev] + n) // SEGMENT) * SEGMENT
    if need > reserved[dev] and need > bound:
        free_now = TOTAL - reserved[dev]
        for obs in list(observers):
            obs(dev, n, bound, free_now)
        _trace(dev, {"action": "oom", "device_free": free_now, "size": n, "stream": 0, "frames": _frames()})
        raise OutOfMemoryError(
            f"CUDA out of memory. Tried to allocate {n / (1 << 30):.2f} GiB. GPU {dev} has a total capacity of "
            f"{TOTAL / (1 << 30):.2f} GiB of which {free_now / (1 << 30):.2f} GiB is free. Of the allocated memory "
            f"{allocated[dev] / (1 << 30):.2f} GiB is allocated by PyTorch, and "
            f"{(reserved[dev] - allocated[dev]) / (1 << 30):.2f} GiB is reserved by PyTorch but unallocated.")
    frames = _frames() if history is not None else []
    blocks[dev].append([n, frames])
    _trace(dev, {"action": "alloc", "addr": BASE + allocated[dev], "size": n, "stream": 0, "frames": frames})
    allocated[dev] += n
    if allocated[dev] > reserved[dev]:
        reserved[dev] = need
    peak[dev] = max(peak[dev], allocated[dev])
    peak_reserved[dev] = max(peak_reserved[dev], reserved[dev])


def free(n, dev=0):
    """Frees n bytes: the newest blocks first."""
    allocated[dev] -= n
    assert allocated[dev] >= 0
    left = n
    while left and blocks[dev]:
        b = blocks[dev][-1]
        take = min(left, b[0])
        b[0] -= take
        left -= take
        if not b[0]:
            blocks[dev].pop()


def snapshot():
    """torch.cuda.memory._snapshot()'s shape: per device one segment of the reserve holding the
    live blocks and, after them, the unused rest."""
    global snapshots
    snapshots += 1
    segs = []
    for d in range(GPUS):
        if not reserved[d]:
            continue
        addr, out = BASE + d * (1 << 40), []
        for size, frames in blocks[d]:
            out.append({"address": addr, "size": size, "requested_size": size, "state": "active_allocated",
                        "frames": list(frames)})
            addr += size
        if reserved[d] > allocated[d]:
            out.append({"address": addr, "size": reserved[d] - allocated[d], "requested_size": 0,
                        "state": "inactive", "frames": []})
        segs.append({"device": d, "address": BASE + d * (1 << 40), "total_size": reserved[d],
                     "allocated_size": allocated[d], "active_size": allocated[d], "requested_size": allocated[d],
                     "stream": 0, "segment_type": "large", "segment_pool_id": [0, 0], "is_expandable": False,
                     "frames": [], "blocks": out})
    return {"segments": segs, "device_traces": [list(t) for t in traces], "allocator_settings": {},
            "external_annotations": []}


def reset():
    global allocated, reserved, peak, peak_reserved, stats_calls, current, fraction, blocks, initialized, history
    global traces, snapshots, inits, compiling
    allocated, reserved, peak, peak_reserved = [0] * GPUS, [0] * GPUS, [0] * GPUS, [0] * GPUS
    blocks = [[] for _ in range(GPUS)]
    traces = [[] for _ in range(GPUS)]
    fraction = [1.0] * GPUS
    stats_calls = 0
    current = 0
    initialized = False
    queued.clear()
    observers.clear()
    history = None
    snapshots = 0
    inits = 0
    compiling = False
