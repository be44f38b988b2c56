# SPDX-License-Identifier: MIT
"""The monitor inside an unmodified job under `gpumon run`. gpumon run's bootstrap (_bootstrap.py,
the job's sitecustomize) calls start() right after the job imported torch, paddle or jax; from then
on this module reports over GPUMON_RUN_SOCKET (docs/run-protocol.md) what the framework's allocator
holds, the training steps it can see (torch's optimizer steps) and, when the allocator runs out of
memory, what it knew then: its figures and, for torch, its snapshot as libgpumon condenses it.

It changes nothing in the job: it never starts CUDA (torch is read once torch says CUDA started;
JAX once its backends exist; Paddle's counters are host-side), never raises into the job (a
failure turns it off, said once), never keeps the process alive (one daemon thread) and keeps its
cost per step to a clock read. torch's out-of-memory path (the observer, the allocator's history,
the snapshot) is TorchOom, shared with GPUMonitor(history=True): one observer per process."""
from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time
import weakref
from typing import Any, Dict, List, Optional

from . import _gpumon
from ._frameworks import JaxAdapter, PaddleAdapter, torch_cap
from ._sinks import RunSocketSink

# A sample at the first optimizer step, then at the first one at least this long after the last
# sample: ten a second at most. A torch read costs ~15 us through torch._C._cuda_memoryStats
# (124 us through memory_stats(), which flattens the dict in Python; H200, torch 2.11).
PERIOD_NS = 100_000_000
IDLE_S = 0.5                    # the thread's pace: samples when no step comes, Paddle's and JAX's
IDLE_AFTER_NS = 2_000_000_000   # no step for this long: the thread samples
SCAN_NS = 5_000_000_000         # which devices hold memory, asked again this often
FLUSH_S = 2.0                   # at out-of-memory the process may end: what is pending goes first
# The allocator's history when gpumon run --history asks for it: the snapshot's cost grows with
# the entries kept (GPUMON_INSIDE_HISTORY_ENTRIES sets another number)
HISTORY_ENTRIES = 20_000
# A snapshot costs from milliseconds (no history) to seconds (history on, measured on the H200):
# after one, the next waits at least this many times as long, so a job that catches its
# out-of-memory and goes on (a batch-size search) pays at most a tenth of its time for them
SNAPSHOT_SPACING = 10
SNAPSHOT_SPACING_MIN_NS = 1_000_000_000

_lock = threading.RLock()
_state: Optional["_Inside"] = None
_torch_oom: Optional["TorchOom"] = None
_monitor_reports = False  # a GPUMonitor of the job reports samples to gpumon run itself


ENV_INT_MAX = 100_000_000  # beyond any history ring a process could hold; torch takes a size_t


def _env_int(name: str, default: int) -> int:
    """A positive whole number from the environment, in ASCII digits (str.isdigit also takes "²",
    which int() refuses); anything else, or more than ENV_INT_MAX, is the default."""
    v = os.environ.get(name, "")
    if not (v.isascii() and v.isdigit()) or len(v) > 9:
        return default
    n = int(v)
    return n if 0 < n <= ENV_INT_MAX else default


def _safe(fn, *args) -> None:
    try:
        fn(*args)
    except Exception:  # a listener's failure is its own; the job never sees it
        pass


# ---- the entry points ------------------------------------------------------------------------------

def start(framework: str) -> None:
    """Called by the bootstrap once the job's `import <framework>` finished (torch, paddle, jax):
    connects to gpumon run (hello, then an `inside` "on" message) and starts watching that
    framework. Idempotent. Raises when gpumon run cannot be reached; the bootstrap says so."""
    global _state
    path = os.environ.get("GPUMON_RUN_SOCKET")
    if not path or framework not in _WATCHERS:
        return
    with _lock:
        if _state is None:
            _state = _Inside(path)
        _state.add(framework)


def monitor_reports() -> None:
    """The job made a GPUMonitor that reports to gpumon run itself: the inside monitor sends no
    more samples or steps (a source is not reported twice); it keeps its out-of-memory duties."""
    global _monitor_reports
    _monitor_reports = True


def reporting() -> bool:
    """Whether the inside monitor tells gpumon run about out-of-memory in this process."""
    return _state is not None and not _state.off


def torch_oom() -> "TorchOom":
    """The process's one out-of-memory observer on torch's allocator (torch must be imported)."""
    global _torch_oom
    with _lock:
        torch = sys.modules["torch"]
        if _torch_oom is None or _torch_oom.torch is not torch:  # a torch imported anew: its own
            _torch_oom = TorchOom(torch)
        return _torch_oom


# ---- torch's out-of-memory path, shared ---------------------------------------------------------------

class TorchOom:
    """torch's allocator at out-of-memory, for every listener of the process (the inside monitor,
    GPUMonitor(history=True)): the observer torch calls before it raises OutOfMemoryError
    (torch._C._cuda_attach_out_of_memory_observer, attached when CUDA starts), the allocator's
    history when a listener asks for it, and the snapshot, taken once, condensed by libgpumon and
    given to each listener. A listener has oom_figures(figures: dict) and oom_snapshot(condensed
    JSON text); it is held weakly."""

    def __init__(self, torch: Any):
        self.torch = torch
        self.cuda = torch.cuda
        self.listeners: List[weakref.ref] = []
        self.attached = False
        self.history_wanted = 0   # entries asked for
        self.history_set = 0      # entries set in the allocator
        self.next_snapshot_ns = 0
        self.snapshot_s: Optional[float] = None  # what the last snapshot cost, seconds
        self.warm_s: Optional[float] = None      # what the first snapshot with stacks cost
        self.next_warm_ns = 0
        self.busy = False

    def listen(self, listener: Any, history_entries: int = 0) -> None:
        """Adds a listener; with history_entries, the allocator keeps its history (stacks of the
        live blocks) from CUDA's start, or from now when CUDA started already."""
        with _lock:
            self.listeners = [r for r in self.listeners if r() is not None] + [weakref.ref(listener)]
            self.history_wanted = max(self.history_wanted, history_entries)
        self.when_cuda(self.setup)

    def when_cuda(self, fn) -> None:
        """fn() when CUDA starts (torch's queue of calls run at its initialisation), or now."""
        cuda = self.cuda
        if cuda.is_initialized():
            fn()
            return
        lazy = getattr(cuda, "_lazy_call", None)
        if lazy is not None:
            lazy(fn)

    def setup(self) -> None:
        """Attaches the observer and sets the history asked for. Run inside torch's CUDA
        initialisation, where what it raised would fail the job's first CUDA call: it raises nothing."""
        try:
            with _lock:
                if not self.attached:
                    self.torch._C._cuda_attach_out_of_memory_observer(self._observed)
                    self.attached = True
                if self.history_wanted > self.history_set:
                    self.torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                                                  max_entries=self.history_wanted)
                    self.history_set = self.history_wanted
        except Exception:
            pass

    def warm(self) -> None:
        """With the history on, torch's first snapshot that holds Python frames names them through
        torch's lazy torch._inductor (hasattr(torch, "_inductor") in
        torch/csrc/profiler/python/combined_traceback.cpp imports it: 3.4 to 4 s on the H200, whose
        torch has no bytecode cache), a cost paid once per process. Paid here, on the training
        thread at a step boundary, so that the out-of-memory does not pay it; never on another
        thread, whose imports could cross the job's own. A snapshot without frames yet (nothing
        allocated since the history started) pays nothing: tried again a second later."""
        if self.warm_s is not None or not self.history_set:
            return
        t0 = time.monotonic_ns()
        if t0 < self.next_warm_ns:
            return
        try:
            snap = self.torch.cuda.memory._snapshot()
        except Exception:
            self.warm_s = 0.0  # no snapshot to take: nothing to warm
            return
        t1 = time.monotonic_ns()
        if "torch._inductor" in sys.modules or _has_frames(snap):
            self.warm_s = (t1 - t0) / 1e9
        else:
            self.next_warm_ns = t1 + SNAPSHOT_SPACING_MIN_NS

    def _live(self) -> list:
        return [x for x in (r() for r in self.listeners) if x is not None]

    def _observed(self, device: int, alloc: int, device_allocated: int, device_free: int) -> None:
        # torch calls this on the allocating thread, its allocator's lock released, right before it
        # raises OutOfMemoryError; what this raised would replace that error: nothing leaves it
        try:
            if self.busy:  # an allocation that failed inside a listener
                return
            self.busy = True
            try:
                live = self._live()
                if not live:
                    return
                figures = self.figures(device, alloc, device_allocated, device_free)
                for x in live:
                    _safe(x.oom_figures, figures)
                condensed = self.snapshot(device, alloc)
                if condensed is not None:
                    for x in live:
                        _safe(x.oom_snapshot, condensed)
            finally:
                self.busy = False
        except Exception:
            pass

    def figures(self, device: int, alloc: int, device_allocated: int, device_free: int) -> Dict[str, Any]:
        """The observer's arguments with the allocator's own figures then, as the `oom` message
        names them: device_allocated is the per-process cap when one is set, else the device's
        memory, told apart by asking torch."""
        f: Dict[str, Any] = {"framework": "torch", "pid": os.getpid(), "device": int(device),
                             "request": int(alloc), "free": int(device_free)}
        f["cap" if self._capped(device, device_allocated) else "capacity"] = int(device_allocated)
        try:
            f["allocated"], f["reserved"], f["peak"] = torch_figures(self.torch, device)
        except Exception:
            pass
        return f

    def _capped(self, device: int, bound: int) -> bool:
        try:
            get = getattr(self.cuda, "get_per_process_memory_fraction", None)  # torch >= 2.9
            if get is not None:
                return float(get(device)) < 1
            return bound < self.cuda.get_device_properties(device).total_memory
        except Exception:
            return False

    def snapshot(self, device: int, alloc: int) -> Optional[str]:
        """The allocator's snapshot condensed by libgpumon (its JSON text), or None when the last
        one was too recent for its cost or it failed."""
        t0 = time.monotonic_ns()
        if t0 < self.next_snapshot_ns:
            return None
        try:
            snap = self.torch.cuda.memory._snapshot()
            if isinstance(snap, dict):
                # the library condenses the segments (gpumon_snapshot_condense); the history of
                # actions can hold as many stacks again, for nothing
                snap = {k: v for k, v in snap.items() if k != "device_traces"}
            text = json.dumps(snap, separators=(",", ":"))
            return _gpumon.snapshot_condense(text, int(device), int(alloc), os.getpid())
        except Exception:
            return None
        finally:
            cost = time.monotonic_ns() - t0
            self.snapshot_s = cost / 1e9
            self.next_snapshot_ns = t0 + cost + max(SNAPSHOT_SPACING * cost, SNAPSHOT_SPACING_MIN_NS)


def _has_frames(snap: Any) -> bool:
    """Whether a snapshot holds a Python frame (torch named it, paying what that costs once)."""
    if not isinstance(snap, dict):
        return True
    for trace in snap.get("device_traces") or []:
        if any(e.get("frames") for e in trace):
            return True
    return any(b.get("frames") for seg in snap.get("segments") or [] for b in seg.get("blocks") or [])


def torch_figures(torch: Any, device: int):
    """(allocated, reserved, peak allocated) of torch's allocator on device, in one call:
    torch._C._cuda_memoryStats gives the nested dict memory_stats() flattens in Python (about 8x
    cheaper), memory_stats() where it is missing."""
    raw = getattr(torch._C, "_cuda_memoryStats", None)
    if raw is not None:
        st = raw(device)
        a, r = st["allocated_bytes"]["all"], st["reserved_bytes"]["all"]
        return int(a["current"]), int(r["current"]), int(a["peak"])
    st = torch.cuda.memory_stats(device)
    return (int(st.get("allocated_bytes.all.current", 0)), int(st.get("reserved_bytes.all.current", 0)),
            int(st.get("allocated_bytes.all.peak", 0)))


# ---- the monitor -------------------------------------------------------------------------------------

class _Inside:
    """This process's connection to gpumon run and the frameworks watched through it."""

    def __init__(self, path: str):
        self.path = path
        self.chan: Optional[RunSocketSink] = None
        self.off = False
        self.watchers: Dict[str, Any] = {}
        self.announced: Optional[str] = None
        self.thread: Optional[threading.Thread] = None
        self.stop = threading.Event()
        self.hooked = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forked)
        atexit.register(self.close)

    def add(self, name: str) -> None:
        if self.off or name in self.watchers:
            return
        w = _WATCHERS[name](self)
        if self.chan is None:
            try:
                self.chan = RunSocketSink(self.path, name, w.version, None)  # sends hello
            except BaseException:
                self.off = True
                raise
            self.announced = name
            self.send({"type": "inside", "state": "on", "framework": name, "pid": os.getpid()})
        self.watchers[name] = w
        try:
            w.begin()
        except Exception as e:  # told here, once; the bootstrap has nothing more to say
            self.send({"type": "inside", "state": "off", "framework": name, "pid": os.getpid(),
                       "reason": f"gpumon's monitor could not watch {name}: {type(e).__name__}: {e}"})
            self.close()

    # -- messages

    def send(self, msg: dict) -> None:
        if self.off:
            return
        try:
            self.chan.send(msg)
        except Exception:  # gpumon run went away: nothing more to tell
            self.turn_off()

    def flush(self) -> None:
        if not self.off and self.chan is not None:
            self.chan.flush(FLUSH_S)

    def sample(self, name: str, version: Optional[str], device: int, t: float, step: Optional[int],
               allocated: Optional[int], reserved: Optional[int], peak: Optional[int], limit: Optional[int]) -> None:
        if name != self.announced:
            # samples from this pid carry the framework of its last hello: the one sampled
            self.send(RunSocketSink.hello(name, version))
            self.announced = name
        m: Dict[str, Any] = {"type": "sample", "t": t, "device": device}
        if step is not None:
            m["step"] = step
        for k, v in (("allocated", allocated), ("reserved", reserved), ("max_allocated", peak), ("limit", limit)):
            if v is not None:
                m[k] = int(v)
        self.send(m)

    def oom(self, figures: Dict[str, Any]) -> None:
        if not self.off:
            _safe(self.chan.oom, figures)
            self.flush()

    def snapshot(self, condensed: str) -> None:
        if not self.off:
            _safe(self.chan.snapshot, condensed)
            self.flush()

    # -- the thread: samples without steps, Paddle's and JAX's

    def ensure_thread(self) -> None:
        with _lock:
            if self.thread is None and not self.off:
                self.thread = threading.Thread(target=self._run, name="gpumon-inside", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(IDLE_S) and not self.off:
            now = time.monotonic_ns()
            for w in list(self.watchers.values()):
                _safe(w.tick, now)

    # -- uncaught out-of-memory (Paddle, JAX)

    def hook_uncaught(self) -> None:
        """Chains sys.excepthook and threading.excepthook: an uncaught exception that says the
        framework ran out of GPU memory is reported with the allocator's figures then, before the
        previous hook prints it."""
        if self.hooked:
            return
        self.hooked = True
        prev = sys.excepthook

        def excepthook(etype, value, tb):
            self.uncaught(value)
            prev(etype, value, tb)

        sys.excepthook = excepthook
        prev_thread = getattr(threading, "excepthook", None)
        if prev_thread is not None:
            def thread_excepthook(args):
                self.uncaught(args.exc_value)
                prev_thread(args)

            threading.excepthook = thread_excepthook

    def uncaught(self, exc: BaseException) -> None:
        try:
            if self.off or exc is None:
                return
            text = str(exc)
            said = _gpumon.oom_message_match(text)
            if not said:
                return
            told = _gpumon.oom_message_parse(text) or {}
            ws = [w for n, w in self.watchers.items() if n != "torch"]
            if len(ws) > 1:  # the framework the message names, where several are watched
                ws = [w for w in ws if w.name in said.lower()] or ws
            if ws:
                ws[0].oom(told)
        except Exception:
            pass

    # -- the end

    def turn_off(self) -> None:
        self.off = True
        self.stop.set()
        chan, self.chan = self.chan, None
        if chan is not None:
            _safe(chan.drop)

    def close(self) -> None:
        self.stop.set()
        if not self.off and self.chan is not None:
            try:
                self.chan.close()
            except Exception:
                pass
            self.off = True


def _forked() -> None:
    """In a forked child (a DataLoader worker): nothing more from this process. The parent's
    connection is left to the parent (the child's copy of its descriptor is closed); the lock,
    which another thread may have held at the fork, is the child's own."""
    global _lock
    _lock = threading.RLock()
    st = _state
    if st is not None:
        st.off = True
        chan, st.chan = st.chan, None
        st.thread = None
        if chan is not None:
            _safe(chan.drop)


# ---- the frameworks ------------------------------------------------------------------------------------

class _TorchWatch:
    """torch: steps from a global optimizer step post-hook, a sample at the first step and then at
    the first one PERIOD_NS after the last sample; without steps for IDLE_AFTER_NS, the thread
    samples. Every device whose allocator holds memory is sampled. Nothing before CUDA started."""

    name = "torch"

    def __init__(self, owner: _Inside):
        import torch  # imported already: start() runs after the job's import
        self.owner = owner
        self.torch = torch
        self.cuda = torch.cuda
        self.version = str(getattr(torch, "__version__", "")) or None
        self.step: Optional[int] = None
        self.round: set = set()          # optimizers that stepped in this step
        self.next_ns = 0                 # the next sample at a step boundary
        self.last_step_ns = 0
        self.last_sample_ns = 0
        self.devices: List[int] = []
        self.caps: Dict[int, Optional[int]] = {}
        self.next_scan_ns = 0
        self.started = False
        self.sampling = threading.Lock()  # the loop's samples and the thread's, one at a time, in order
        # torch.compile traces an optimizer step it compiles, its hooks with it: there the hook is
        # nothing (a clock read would break the graph, and fail a fullgraph compile)
        self.compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)  # torch >= 2.3

    def begin(self) -> None:
        oom = torch_oom()
        hist = _env_int("GPUMON_INSIDE_HISTORY_ENTRIES", HISTORY_ENTRIES) \
            if os.environ.get("GPUMON_INSIDE_HISTORY") == "1" else 0
        oom.listen(_OomReporter(self.owner), hist)
        oom.when_cuda(self._cuda_started)
        try:
            from torch.optim.optimizer import register_optimizer_step_post_hook  # torch >= 2.0
        except Exception:
            register_optimizer_step_post_hook = None
        if register_optimizer_step_post_hook is not None:
            register_optimizer_step_post_hook(self._stepped)
        if not hasattr(self.cuda, "_lazy_call"):
            self.owner.ensure_thread()  # the thread notices CUDA's start

    def _cuda_started(self) -> None:
        # inside torch's CUDA initialisation: raises nothing
        try:
            self.started = True
            self.owner.ensure_thread()
        except Exception:
            pass

    def _stepped(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # the training loop's cost: a set lookup and a clock read, a sample ten times a second
        if self.compiling is not None and self.compiling():
            return
        try:
            key = id(optimizer)
            if not self.round or key in self.round:  # several optimizers stepping once each: one step
                self.step = (self.step or 0) + 1
                self.round = {key}
            else:
                self.round.add(key)
                return
            oom = _torch_oom
            if oom is not None and oom.history_set and oom.warm_s is None:
                oom.warm()
            if self.owner.off or _monitor_reports:
                return
            now = time.monotonic_ns()
            self.last_step_ns = now
            if now >= self.next_ns:
                self.sample(now, self.step)
        except Exception:
            pass

    def tick(self, now: int) -> None:
        if not self.started and self.cuda.is_initialized():
            self._cuda_started()
            torch_oom().setup()
        if _monitor_reports or now - self.last_step_ns < IDLE_AFTER_NS or now - self.last_sample_ns < IDLE_S * 1e9 * 0.9:
            return
        # between steps (evaluation after step N) the samples say step N; a job without
        # optimizer steps sends none
        if self.sampling.acquire(blocking=False):  # the loop is sampling: that one will do
            try:
                self._sample(time.monotonic_ns(), self.step, False)
            finally:
                self.sampling.release()

    def sample(self, now: int, step: Optional[int]) -> None:
        with self.sampling:
            self._sample(now, step, True)

    def _sample(self, now: int, step: Optional[int], stepped: bool) -> None:
        cuda = self.cuda
        if not cuda.is_initialized():  # never the first to start CUDA
            return
        self.next_ns = now + PERIOD_NS
        self.last_sample_ns = now
        if now >= self.next_scan_ns:
            self._scan(now)
        t = time.time()
        for d in self.devices:
            a, r, p = torch_figures(self.torch, d)
            self.owner.sample("torch", self.version, d, t, step, a, r, p, self.caps.get(d))
        if stepped and step is not None:
            self.owner.send({"type": "step", "step": step, "t": t})

    def _scan(self, now: int) -> None:
        """The devices whose allocator holds memory, with the cap set on each."""
        cuda = self.cuda
        found = []
        for d in range(int(cuda.device_count())):
            try:
                if torch_figures(self.torch, d)[1] > 0:
                    found.append(d)
            except Exception:
                continue
        self.devices = found
        self.caps = {d: self._cap(d) for d in found}
        self.next_scan_ns = now + (SCAN_NS if found else SCAN_NS // 5)

    def _cap(self, d: int) -> Optional[int]:
        return torch_cap(self.cuda, d)


class _OomReporter:
    """The inside monitor as a TorchOom listener: the figures and the snapshot to gpumon run."""

    def __init__(self, owner: _Inside):
        self.owner = owner
        owner.torch_reporter = self  # held here: TorchOom holds listeners weakly

    def oom_figures(self, figures: Dict[str, Any]) -> None:
        self.owner.oom(figures)

    def oom_snapshot(self, condensed: str) -> None:
        self.owner.snapshot(condensed)


class _PollWatch:
    """Paddle and JAX: the thread samples every device whose allocator holds memory every IDLE_S
    through the package's adapters (steps unknown); an uncaught out-of-memory is reported with the
    allocator's figures then."""

    name = ""

    def __init__(self, owner: _Inside):
        self.owner = owner
        mod = sys.modules[self.name]
        self.version = str(getattr(mod, "__version__", "")) or None
        self.adapters: Optional[list] = None

    def begin(self) -> None:
        self.owner.hook_uncaught()
        self.owner.ensure_thread()

    def ready(self) -> bool:
        return True

    def make_adapters(self) -> list:
        raise NotImplementedError

    def tick(self, now: int) -> None:
        if _monitor_reports or not self.ready():
            return
        if self.adapters is None:
            self.adapters = self.make_adapters()
        t = time.time()
        for a in self.adapters:
            alloc, peak, res, _ = a.read()
            if res or alloc:
                self.owner.sample(self.name, self.version, a.device, t, None, alloc, res, peak, a.cap())

    def oom(self, told: Dict[str, Any]) -> None:
        """The `oom` message: what the message told (the request, the device) and the allocator's
        figures now."""
        figures: Dict[str, Any] = {"framework": self.name, "pid": os.getpid()}
        figures.update((k, v) for k, v in told.items() if k in ("request", "device"))
        if self.ready():
            if self.adapters is None:
                self.adapters = self.make_adapters()
            pick = [a for a in self.adapters if a.device == told.get("device")] or \
                (self.adapters if len(self.adapters) == 1 else [])
            if pick:
                a = pick[0]
                alloc, peak, res, _ = a.read()
                figures.update(device=a.device, allocated=alloc, reserved=res, peak=peak, cap=a.cap())
                largest = getattr(a, "largest_free", None)
                if largest is not None:
                    figures["largest_free"] = largest()
        self.owner.oom({k: v for k, v in figures.items() if v is not None})


class _PaddleWatch(_PollWatch):
    name = "paddle"

    def make_adapters(self) -> list:
        cuda = sys.modules["paddle"].device.cuda
        return [PaddleAdapter(d) for d in range(int(cuda.device_count()))]


class _JaxWatch(_PollWatch):
    name = "jax"

    def ready(self) -> bool:
        # JAX starts its backends (and pre-allocates) at the job's first use: never before
        xb = sys.modules.get("jax._src.xla_bridge")
        if xb is None:
            return False
        started = getattr(xb, "backends_are_initialized", None)
        if started is not None:
            return bool(started())
        return bool(getattr(xb, "_backends", None))

    def make_adapters(self) -> list:
        jax = sys.modules["jax"]
        gpus = [d for d in jax.local_devices() if getattr(d, "platform", None) in ("gpu", "cuda")]
        return [JaxAdapter(g) for g in gpus]


_WATCHERS = {"torch": _TorchWatch, "paddle": _PaddleWatch, "jax": _JaxWatch}
