# SPDX-License-Identifier: MIT
"""GPUMonitor: a few times a second (or every N training steps), what the framework's allocator
holds (allocated, peak, reserved), what this process holds on the GPU according to the driver
(NVML), the device's figures, and the gap between the two views. Every sample feeds libgpumon's
run model, which decides the leak and headroom alerts and the verdict; this file only words them."""
from __future__ import annotations

import atexit
import json
import logging
import os
import sys
import time
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional

from . import _gpumon, _inside, _words
from ._events import AlertEvent, from_alert
from ._frameworks import Adapter, make_adapter, nvml_index
from ._sinks import (PROMETHEUS_LIMITS, CsvSink, JsonlSink, LogSink, PrometheusSink, RecordSink, RunSocketSink, Sink,
                     TensorBoardSink, human)

log = logging.getLogger("gpumon")

_NO_DRIVER = (-3, -4, -8)  # GPUMON_E_NO_LIBRARY, GPUMON_E_DRIVER, GPUMON_E_NO_PERMISSION
_FOREVER = 1 << 62

# The default pace: a sample at the first step boundary at least this long after the last one.
# Four a second give the leak detector enough points to alert within seconds whatever the step
# time, and cost little: a torch read is ~83 us (H200, torch 2.11), so 0.03 % of the time.
SAMPLE_PERIOD_NS = 100_000_000

# The clock of every sample and record (CLOCK_MONOTONIC, as libgpumon's); one name, so a test can
# run a monitor on a clock of its own.
_now_ns = time.monotonic_ns


class GpumonWarning(UserWarning):
    """Base of gpumon's warnings."""


class LeakWarning(GpumonWarning):
    """The run model's leak detector says the memory floor keeps rising."""


class HeadroomWarning(GpumonWarning):
    """Free memory on the GPU fell below the threshold."""


class SinkWarning(GpumonWarning):
    """A sink failed and was switched off; monitoring goes on."""


class Sample:
    """One sample. Bytes unless the name says otherwise; None means "not known", never 0.

    step, time (Unix seconds), t_ns (CLOCK_MONOTONIC ns), framework, device (the framework's
    index); allocated / peak / reserved / max_reserved (the framework's allocator; peak is the
    run's peak, kept across section() resets); cap (the allocator's cap: set in the code with
    torch.cuda.set_per_process_memory_fraction, or JAX's limit); process (this process on the
    GPU, from NVML);
    device_used / device_reserved (by the driver) / device_free / device_total; util_gpu (%);
    unaccounted = process - reserved (CUDA context, library workspaces, other allocators; None when
    NVML's figure lags below the reserve).
    """

    __slots__ = ("step", "time", "t_ns", "framework", "device", "allocated", "peak", "reserved",
                 "max_reserved", "cap", "process", "device_used", "device_reserved", "device_free",
                 "device_total", "util_gpu", "memory_api")

    def __init__(self, **kw: Any):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    @property
    def unaccounted(self) -> Optional[int]:
        # the model's placing of the process's bytes (gpumon_placed_split): None when NVML lags
        return _gpumon.outside_bytes(self.process, self.reserved)

    def as_dict(self) -> Dict[str, Any]:
        return {"step": self.step, "time": self.time, "framework": self.framework, "device": self.device,
                "allocated_bytes": self.allocated, "peak_bytes": self.peak, "reserved_bytes": self.reserved,
                "max_reserved_bytes": self.max_reserved, "process_bytes": self.process,
                "unaccounted_bytes": self.unaccounted, "device_used_bytes": self.device_used,
                "device_reserved_bytes": self.device_reserved, "device_free_bytes": self.device_free,
                "device_total_bytes": self.device_total, "util_gpu_pct": self.util_gpu}

    def line(self) -> str:
        """The log line: `[Step N] Used A | Peak P | Reserved R | Process X (+U outside) | GPU u/t | util %`."""
        parts = [f"[Step {self.step}] Used {human(self.allocated)}", f"Peak {human(self.peak)}",
                 f"Reserved {human(self.reserved)}"]
        if self.process is not None:
            extra = f" ({human(self.unaccounted)} outside the allocator)" if self.unaccounted is not None else ""
            parts.append(f"Process {human(self.process)}{extra}")
        if self.device_total is not None:
            parts.append(f"GPU {human(self.device_used)} of {human(self.device_total)}")
        if self.util_gpu is not None:
            parts.append(f"util {self.util_gpu} %")
        return " | ".join(parts)

    def __repr__(self) -> str:
        return "Sample(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


class Section:
    """What section(name) measured: the peak of allocated memory inside the block.

    start_bytes / end_bytes: allocated at entry and exit; peak_bytes: the highest allocated
    figure inside the block; peak_delta_bytes = peak_bytes - start_bytes; exact: False when the
    framework cannot reset its peak counter (then the peak is only known when it exceeded every
    earlier peak) or there is no framework (NVML figures at entry and exit only); seconds.
    """

    __slots__ = ("name", "start_bytes", "end_bytes", "peak_bytes", "exact", "seconds", "_t0", "_mon")

    def __init__(self, mon: "GPUMonitor", name: str):
        self._mon = mon
        self.name = name
        self.start_bytes = self.end_bytes = self.peak_bytes = None
        self.exact = False
        self.seconds = None

    @property
    def peak_delta_bytes(self) -> Optional[int]:
        if self.peak_bytes is None or self.start_bytes is None:
            return None
        return self.peak_bytes - self.start_bytes

    def __enter__(self) -> "Section":
        self._mon._section_enter(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._mon._section_exit(self)

    def __repr__(self) -> str:
        return (f"Section({self.name!r}, peak_delta={human(self.peak_delta_bytes)}, start={human(self.start_bytes)}, "
                f"end={human(self.end_bytes)}, exact={self.exact})")


class _Unmeasured:
    """What section(name, every=N) gives for the blocks it skips: a no-op context manager."""

    __slots__ = ("name",)
    start_bytes = end_bytes = peak_bytes = peak_delta_bytes = seconds = None
    exact = False

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> "_Unmeasured":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass


_open_monitors: "weakref.WeakSet[GPUMonitor]" = weakref.WeakSet()


@atexit.register
def _close_all_at_exit() -> None:
    for m in list(_open_monitors):
        try:
            m.close()
        except Exception:  # never fail interpreter exit
            pass


def _logger_emit(logger: Any) -> Optional[Callable[[str], None]]:
    if logger is False:
        return None
    if logger is None:
        if not log.hasHandlers():  # nothing configured: show the lines, as the seed's prints did
            h = logging.StreamHandler(sys.stderr)
            h.setFormatter(logging.Formatter("%(message)s"))
            log.addHandler(h)
            log.setLevel(logging.INFO)
        return log.info
    if isinstance(logger, logging.Logger):
        return logger.info
    if callable(logger):
        return logger
    raise ValueError(f"logger must be a logging.Logger, a callable taking a line, None or False, got {logger!r}")


def _logger_warn(logger: Any) -> Optional[Callable[[str], None]]:
    """Where alerts go besides the one line on stderr: the logger or callable the user gave, else
    nowhere (the default logger and False add no second line)."""
    if isinstance(logger, logging.Logger):
        return logger.warning
    if callable(logger):
        return logger
    return None


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class _OomListener:
    """A monitor's ear on torch's out-of-memory observer (_inside.TorchOom holds it weakly, the
    monitor strongly; it holds the monitor weakly: neither keeps the other alive)."""

    def __init__(self, mon: "GPUMonitor"):
        self.mon = weakref.ref(mon)

    def oom_figures(self, figures: Dict[str, Any]) -> None:
        m = self.mon()
        if m is not None:
            m._oom_figures(figures)

    def oom_snapshot(self, condensed: str) -> None:
        m = self.mon()
        if m is not None:
            m._oom_snapshot(condensed)


def _user_stacklevel() -> int:
    """The stacklevel that makes a warning raised by this function's caller name the first frame
    outside the package: the user's line that called step() or sample(), however deep the path
    through the monitor was."""
    level, f = 1, sys._getframe(1)
    while f is not None and os.path.dirname(os.path.abspath(f.f_code.co_filename)) == _PACKAGE_DIR:
        level += 1
        f = f.f_back
    return level


def _rank(rank: Any) -> Optional[int]:
    """rank=, else $RANK (torchrun, Lightning and Accelerate set it in each process), else None."""
    if rank is None:
        env = os.environ.get("RANK", "")
        return int(env) if env.isdigit() else None
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be None or a whole number >= 0, got {rank!r}")
    return rank


_identity: Dict[str, Optional[str]] = {}


def _own_command() -> Optional[str]:
    """This process's command line, as /proc has it (the model names processes by it)."""
    if "command" not in _identity:
        try:
            with open("/proc/self/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            cmd = " ".join([sys.executable] + sys.argv).strip()
        _identity["command"] = cmd or None
    return _identity["command"]


def _own_user() -> Optional[str]:
    if "user" not in _identity:
        try:
            import pwd
            _identity["user"] = pwd.getpwuid(os.getuid()).pw_name
        except (ImportError, KeyError):
            _identity["user"] = str(os.getuid())
    return _identity["user"]


class GPUMonitor:
    """Watches GPU memory from inside a training loop.

        mon = gpumon.GPUMonitor()   # framework="auto": the one already imported
        for batch in loader:
            ...
            mon.step()               # a sample when 0.1 s have passed since the last one
        mon.close()                  # or: with gpumon.GPUMonitor() as mon: ...

    Arguments:
      device     the framework's GPU: None (current), an int, "cuda:N" / "gpu:N", a torch.device,
                 a paddle.CUDAPlace or a jax Device. CUDA order; mapped to NVML by UUID or
                 CUDA_VISIBLE_DEVICES.
      interval   None (default): step() samples at the first step and then at the first step
                 boundary at least 0.1 s after the last sample; a positive int N: every N-th
                 step instead. step() costs well under 1 us when it does not sample.
      framework  "auto" (the framework already imported), "torch", "paddle", "jax" or "none"
                 (NVML only: this process's figure).
      logger     None: a line per sample on logger "gpumon" (to stderr unless logging is set up);
                 a logging.Logger; any callable taking the line; False: no lines.
      csv, jsonl a path to write one row per sample (overwritten).
      tensorboard  a log directory: scalars in a TensorBoard event file written by libgpumon.
      record     a path for a gpumon recording (SQLite, docs/recording.md): samples, the GPU's
                 processes, markers, alerts; must not exist. `gpumon report PATH` reads it.
      prometheus_port  serve /metrics on 127.0.0.1:PORT from this process (0: a free port; see
                 .prometheus_address): libgpumon's exporter, the metrics of `gpumon serve`
                 (docs/metrics.md) plus this process's allocator figures at each sample.
      prometheus_limits  the exporter's connection limits, gpumon serve's options of the same
                 names: {"max_connections": 1024, "max_connections_per_ip": 64, "timeout": 10,
                 "keepalive": 120} are the defaults (keepalive 0: close after each response);
                 the keys given replace those.
      on_alert   called once per alert with a gpumon.AlertEvent (kind "leak", "headroom_low" or
                 "oom_projected", the model's figures, step, device, rank, message); what it
                 raises reaches the training loop.
      min_headroom  alert when the GPU's free memory falls below this share of its total (0..1;
                 None: never).
      leak_detection  alert when the run model's leak detector does (on the allocator's
                 allocated bytes, else this process's NVML figure); leak() gives its verdict.
      oom_within_steps  after a leak alert, an "oom_projected" event for on_alert once the
                 model projects out-of-memory within this many steps (None: no such event).
      rank       this process's rank in a distributed job, for on_alert's events (None: $RANK
                 when set).
      history    (torch) keep the allocator's history (the Python stack of every live block,
                 torch.cuda.memory._record_memory_history) so that at out-of-memory the allocator's
                 snapshot, condensed by libgpumon, says where the memory was allocated: the
                 snapshot and the figures of the moment become events of the run model (report()),
                 of the recording, and of gpumon run. Costs about 2 us per allocation.

    An alert is told once: outside `gpumon run` as one warning (LeakWarning, HeadroomWarning)
    naming the line that called step(), plus a line to the logger or callable given as logger=;
    under `gpumon run` the launcher prints leak alerts, so the monitor adds no line of its own.
    Under `gpumon run` (GPUMON_RUN_SOCKET set), samples and steps also go to the launcher.
    Without an NVIDIA driver, the framework's figures are still taken (NVML fields None, one
    warning); framework="none" then raises gpumon.Error. Not thread-safe: use from one thread.
    Errors at construction: ValueError (bad argument, device out of range), OSError (a path).
    """

    def __init__(self, device: Any = None, interval: Optional[int] = None, framework: str = "auto", logger: Any = None,
                 csv: Any = None, jsonl: Any = None, tensorboard: Any = None, record: Any = None,
                 on_alert: Optional[Callable[[AlertEvent], Any]] = None, min_headroom: Optional[float] = 0.05,
                 leak_detection: bool = True, prometheus_port: Optional[int] = None,
                 oom_within_steps: Optional[int] = None, rank: Optional[int] = None, history: bool = False,
                 prometheus_limits: Optional[Dict[str, int]] = None):
        self._closed = True
        self._countdown = _FOREVER
        self._next_ns = _FOREVER
        if interval is not None and (isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0):
            raise ValueError(f"interval must be None (a sample every 0.1 s) or a positive whole number of steps, "
                             f"got {interval!r}")
        if min_headroom is not None and (isinstance(min_headroom, bool) or not isinstance(min_headroom, (int, float))
                                         or not 0 <= min_headroom < 1):
            raise ValueError(f"min_headroom must be a share of the GPU's memory in [0, 1) or None, got {min_headroom!r}")
        if prometheus_port is not None and (isinstance(prometheus_port, bool) or not isinstance(prometheus_port, int)
                                            or not 0 <= prometheus_port <= 65535):
            raise ValueError(f"prometheus_port must be a TCP port (0..65535; 0: any free one), got {prometheus_port!r}")
        if prometheus_limits is not None:
            if not isinstance(prometheus_limits, dict):
                raise ValueError(f"prometheus_limits must be a dict of {', '.join(PROMETHEUS_LIMITS)}, "
                                 f"got {prometheus_limits!r}")
            unknown = sorted(str(k) for k in prometheus_limits if k not in PROMETHEUS_LIMITS)
            if unknown:
                raise ValueError(f"prometheus_limits: no limit {unknown[0]!r} (the limits: "
                                 f"{', '.join(PROMETHEUS_LIMITS)})")
            if prometheus_port is None:
                raise ValueError("prometheus_limits applies to the exporter: give prometheus_port too")
        if on_alert is not None and not callable(on_alert):
            raise ValueError(f"on_alert must be callable, got {on_alert!r}")
        if oom_within_steps is not None and (isinstance(oom_within_steps, bool) or not isinstance(oom_within_steps, int)
                                             or oom_within_steps <= 0):
            raise ValueError(f"oom_within_steps must be None or a positive whole number of steps, got {oom_within_steps!r}")
        if not isinstance(history, bool):
            raise ValueError(f"history must be True or False, got {history!r}")
        self.rank = _rank(rank)
        emit = _logger_emit(logger)
        self._warn_line = _logger_warn(logger)
        self.interval = interval
        self.adapter: Adapter = make_adapter(framework, device)
        self.framework = self.adapter.name
        if history and self.framework != "torch":
            raise ValueError(f"history=True needs PyTorch's allocator (it keeps the stacks of its blocks); "
                             f"the monitor watches {self.framework}")
        self.device = self.adapter.device
        self._nvml = None
        self.nvml_index: Optional[int] = None
        try:
            self._nvml = _gpumon.Nvml()
        except _gpumon.Error as e:
            if self.framework == "none" or getattr(e, "status", None) not in _NO_DRIVER:
                raise
            warnings.warn(f"gpumon: NVML is not available ({e}); GPUMonitor goes on with {self.framework}'s "
                          "figures only (process and device figures not available)", GpumonWarning, stacklevel=2)
        info = None
        if self._nvml is not None:
            try:
                self.nvml_index = nvml_index(self._nvml, self.adapter)
                info = self._nvml.device_info(self.nvml_index)
                self._total = info["memory_total_bytes"]
            except Exception:
                self._nvml.close()
                raise
        else:
            self._total = None
        self._pid = os.getpid()
        self._on_alert = on_alert
        self._min_headroom = min_headroom
        self._emit = emit
        self._leak_detection = bool(leak_detection)
        self._oom_within = oom_within_steps
        self._model = self._make_model(info, min_headroom)
        self._nalerts = 0        # the model's alerts seen so far
        self._tell_alert: Optional[Callable[[str], None]] = None  # a trainer's logging instead of warnings
        self._job_told = False   # the JOB record for this process was fed
        self._steps = 0
        self._samples = 0
        self._peak_carry = 0
        self._stats: Dict[str, Optional[int]] = {"allocated": None, "peak": None, "reserved": None,
                                                  "process": None, "unaccounted": None, "device_used": None}
        self.alerts: List[Dict[str, Any]] = []
        self.sections: Dict[str, Dict[str, Any]] = {}
        self._open_sections: List[Section] = []
        self._section_calls: Dict[str, int] = {}
        self.last: Optional[Sample] = None
        self._sinks: List[Sink] = []
        self.failed_sinks: List[str] = []
        self._nvml_hiccup = False  # an NVML call failed once (warned)
        self.prometheus_address: Optional[str] = None
        self._closed = False
        try:
            self._open_sinks(emit, csv, jsonl, tensorboard, record, prometheus_port, prometheus_limits)
        except BaseException:
            self.close()
            raise
        self._countdown = interval or _FOREVER
        self._next_ns = 0 if interval is None else _FOREVER
        _open_monitors.add(self)
        self._oom_listener: Optional[_OomListener] = None
        if history:
            self._oom_listener = _OomListener(self)
            _inside.torch_oom().listen(self._oom_listener, _inside.HISTORY_ENTRIES)

    # ---- construction helpers ----------------------------------------------------------------

    def _make_model(self, info: Optional[Dict[str, Any]], min_headroom: Optional[float]):
        """The run model of this process: a run whose job is this process, alone on its GPU as far
        as the model is told (the GPU's other processes are in a recording, not here)."""
        # the projection follows a leak alert, for on_alert: asked of the model only when both are on
        within = self._oom_within if self._leak_detection and self._on_alert is not None else None
        model = _gpumon.Model(kind="run", command=_own_command(), job_pid=self._pid,
                              headroom=float(min_headroom or 0.0), cuda_visible_devices=self._device_map(),
                              oom_within_steps=float(within or 0))
        if info is not None:
            model.add_device(self.nvml_index, info["name"], info["uuid"], info["memory_total_bytes"])
        return model

    def _device_map(self) -> Optional[str]:
        """The monitor matched the framework's device to an NVML index (by UUID, through
        CUDA_VISIBLE_DEVICES, or by the same index): told to the model in the form it reads, a
        CUDA_VISIBLE_DEVICES whose entry at the framework's index is that NVML index (the entries
        before it name no GPU, and no record names them)."""
        if self.nvml_index is None:
            return None
        return ",".join(["none"] * self.device + [str(self.nvml_index)])

    def _open_sinks(self, emit, csv, jsonl, tensorboard, record, prometheus_port, prometheus_limits) -> None:
        if emit is not None:
            self._sinks.append(LogSink(emit))
        if csv is not None:
            self._sinks.append(CsvSink(csv))
        if jsonl is not None:
            self._sinks.append(JsonlSink(jsonl))
        if tensorboard is not None:
            self._sinks.append(TensorBoardSink(tensorboard))
        if record is not None:
            if self._nvml is None:
                raise ValueError(f"record={os.fspath(record)!r} needs NVML, which is not available")
            self._sinks.append(RecordSink(self._nvml, record, self.nvml_index, " ".join(sys.argv) or None))
        if prometheus_port is not None:
            if self._nvml is None:
                raise ValueError(f"prometheus_port={prometheus_port} needs NVML, which is not available")
            sink = PrometheusSink(self._nvml, prometheus_port, prometheus_limits or {})
            self._sinks.append(sink)
            self.prometheus_address = sink.address
        path = os.environ.get("GPUMON_RUN_SOCKET")
        if path:
            try:
                self._sinks.append(RunSocketSink(path, self.framework, self.adapter.version, self.device))
                _inside.monitor_reports()  # the monitor gpumon run put inside the job stops its samples
            except OSError as e:  # never stop training for the launcher
                warnings.warn(f"gpumon: cannot reach gpumon run's socket {path}: {e}; not reporting to it",
                              SinkWarning, stacklevel=3)

    # ---- the training loop ----------------------------------------------------------------------

    def step(self) -> Optional[Sample]:
        """Counts one training step and returns a sample when one is due (else None): by default
        at the first step and then once 0.1 s have passed since the last sample; with
        interval=N at every N-th step."""
        self._steps += 1
        if self._next_ns != _FOREVER:  # by time: one clock read a step (~50 ns)
            t_ns = _now_ns()
            if t_ns < self._next_ns:
                return None
            return self._take(self._steps, t_ns)
        self._countdown -= 1
        if self._countdown:
            return None
        self._countdown = self.interval
        return self.sample()

    def sample(self, step: Optional[int] = None) -> Sample:
        """Takes a sample now (at step `step`, default the steps counted) and sends it to the sinks."""
        if self._closed:
            raise ValueError("the GPUMonitor is closed")
        return self._take(self._steps if step is None else int(step), _now_ns())

    def _take(self, st: int, t_ns: int) -> Sample:
        wall = time.time()
        alloc, peak, res, max_res = self.adapter.read()
        if peak is not None:
            peak = max(peak, self._peak_carry)
        cap = self.adapter.cap() if alloc is not None else None
        s = Sample(step=st, time=wall, t_ns=t_ns, framework=self.framework, device=self.device, allocated=alloc,
                   peak=peak, reserved=res, max_reserved=max_res, cap=cap)
        if self._nvml is not None:
            self._read_nvml(s)
        if self._oom_listener is not None:
            _inside.torch_oom().warm()  # once: torch's first snapshot with stacks imports much of torch
        if self._next_ns != _FOREVER:
            self._next_ns = t_ns + SAMPLE_PERIOD_NS
        self._samples += 1
        self.last = s
        self._keep_stats(s)
        self._feed_model(s)
        self._fan_out(s)
        self._check_alerts(s)
        return s

    def _read_nvml(self, s: Sample) -> None:
        try:
            (_, api, total, used, free, reserved, util, *_rest) = self._nvml.sample(self.nvml_index)
            s.memory_api, s.device_total, s.device_used, s.device_free = api, total, used, free
            s.device_reserved, s.util_gpu = reserved, util
            s.process = self._nvml.process_used(self.nvml_index, self._pid)
        except _gpumon.Error as e:
            if getattr(e, "status", None) not in (-4, -6):  # not GPUMON_E_DRIVER, GPUMON_E_LOST
                # one call failed (a timeout, an unknown error): this sample lacks what it did not
                # get; the next sample asks again. Said once.
                if not self._nvml_hiccup:
                    self._nvml_hiccup = True
                    warnings.warn(f"gpumon: an NVML call failed ({e}); that sample's figure is not available",
                                  GpumonWarning, stacklevel=3)
                return
            # a lost GPU or a driver that stopped answering: say so once, keep the framework's view
            warnings.warn(f"gpumon: NVML stopped answering ({e}); process and device figures are no longer "
                          "taken", GpumonWarning, stacklevel=3)
            self._nvml.close()
            self._nvml = None

    def _feed_model(self, s: Sample) -> None:
        """The sample as records of the run model, all at the sample's moment: this process is the
        job; the GPU's figures and this process's figure as NVML gives them; the allocator's."""
        m, t = self._model, s.t_ns
        if not self._job_told:
            m.job(t, self._pid)
            self._job_told = True
        if s.device_total is not None and s.device_used is not None and s.device_free is not None:
            m.device(t, self.nvml_index, s.device_used, s.device_free, s.device_total, s.device_reserved)
            if s.process is not None:
                m.process(t, self.nvml_index, self._pid, s.process, _own_user(), _own_command())
        if s.allocated is not None or s.reserved is not None or s.peak is not None:
            m.framework(t, self._pid, self.device, s.step, s.allocated, s.reserved, s.peak, s.cap, self.framework)

    def _keep_stats(self, s: Sample) -> None:
        st = self._stats
        for k, v in (("allocated", s.allocated), ("peak", s.peak), ("reserved", s.max_reserved or s.reserved),
                     ("process", s.process), ("unaccounted", s.unaccounted), ("device_used", s.device_used)):
            if v is not None and (st[k] is None or v > st[k]):
                st[k] = v

    def _fan_out(self, s: Sample) -> None:
        for sink in list(self._sinks):
            try:
                sink.write(s)
            except Exception as e:
                self._drop_sink(sink, e)

    def _event(self, kind: str, text: str, t_ns: Optional[int] = None, to_launcher: bool = True) -> None:
        t_ns = _now_ns() if t_ns is None else t_ns
        self._model.event(t_ns, kind, text)
        for sink in list(self._sinks):
            if not to_launcher and isinstance(sink, RunSocketSink):
                continue
            try:
                sink.event(t_ns, kind, text)
            except Exception as e:
                self._drop_sink(sink, e)

    def _drop_sink(self, sink: Sink, err: BaseException) -> None:
        self._sinks.remove(sink)
        self.failed_sinks.append(sink.what)
        msg = f"gpumon: writing to the {sink.what} failed ({err}); it is switched off, monitoring goes on"
        warnings.warn(msg, SinkWarning, stacklevel=4)
        if not isinstance(sink, LogSink):
            log.warning(msg)
        try:
            sink.close()
        except Exception:
            pass

    # ---- alerts ---------------------------------------------------------------------------------

    def _check_alerts(self, s: Sample) -> None:
        """The alerts the model gave on this sample's records, worded and told: its leak and headroom
        alerts, and its projection of out-of-memory (oom_within_steps) passed on to on_alert."""
        m = self._model
        for a in m.alerts(self._nalerts):
            i = self._nalerts
            self._nalerts += 1
            if a["kind"] == "leak" and self._leak_detection:
                self._alert(a, "leak", _words.leak_alert(m, i, self.device), LeakWarning, s)
            elif a["kind"] == "headroom" and self._min_headroom is not None:
                self._alert(a, "headroom_low", _words.headroom_alert(m, i, self._min_headroom, s.step),
                            HeadroomWarning, s)
            elif a["kind"] == "oom_projected" and self._on_alert is not None:
                a = dict(a, message=_words.oom_projected(m, i, self.device, self._oom_within), step=s.step)
                self._on_alert(from_alert(a, "oom_projected", self.device, self.rank))

    def _launcher_tells(self, kind: str) -> bool:
        """Under `gpumon run` the launcher's model judges the same samples and prints its leak
        alert on stderr (cli/cmd_run.c tell_alerts); headroom it does not print."""
        return kind == "leak" and any(isinstance(k, RunSocketSink) for k in self._sinks)

    def _alert(self, info: Dict[str, Any], kind: str, msg: str, category: type, s: Sample) -> None:
        a = dict(info, message=msg, step=s.step)
        self.alerts.append(a)
        launcher = self._launcher_tells(info["kind"])
        if not launcher:
            if self._tell_alert is not None:
                self._tell_alert(msg)
            else:
                warnings.warn(msg, category, stacklevel=_user_stacklevel())
        if self._warn_line is not None:
            self._warn_line(msg)
        # at the sample's moment, the model's alert's: a report of the recording sees it was told
        # (the launcher records its own alert, so it is not sent a second one)
        self._event("alert", msg, s.t_ns, to_launcher=not launcher)
        if self._on_alert is not None:
            self._on_alert(from_alert(a, kind, self.device, self.rank))

    # ---- out-of-memory (history=True) -------------------------------------------------------------

    def _oom_figures(self, figures: Dict[str, Any]) -> None:
        """torch's allocator ran out of memory: what it knew, as an oom_figures event (the library's
        encoding) for the model and the recording, and to gpumon run unless the monitor inside
        the job tells it."""
        if self._closed:
            return
        self._oom_event("oom_figures", _gpumon.oom_figures(**figures))
        for sink in self._launchers():
            sink.oom(figures)
            sink.flush(_inside.FLUSH_S)

    def _oom_snapshot(self, condensed: str) -> None:
        """The allocator's snapshot then, as the library condensed it: an alloc_snapshot event."""
        if self._closed:
            return
        self._oom_event("alloc_snapshot", condensed)
        for sink in self._launchers():
            sink.snapshot(condensed)
            sink.flush(_inside.FLUSH_S)

    def _oom_event(self, kind: str, text: str) -> None:
        t_ns = _now_ns()
        try:
            self._model.event(t_ns, kind, text)
        except (ValueError, _gpumon.Error) as e:  # the model refused it: the recording still keeps it
            log.warning("gpumon: the run model refused the %s event: %s", kind, e)
        for sink in list(self._sinks):
            if isinstance(sink, RunSocketSink):
                continue
            try:
                sink.event(t_ns, kind, text)
            except Exception as e:
                self._drop_sink(sink, e)

    def _launchers(self) -> List[RunSocketSink]:
        """The gpumon run sockets the out-of-memory is told over: none when the monitor inside
        the job (gpumon run's bootstrap) tells it, so that it is told once."""
        if _inside.reporting():
            return []
        return [k for k in self._sinks if isinstance(k, RunSocketSink)]

    # ---- sections and markers -------------------------------------------------------------------

    def section(self, name: str, every: int = 1) -> Any:
        """A context manager measuring the exact peak of allocated memory inside the block:

            with mon.section("attention") as s:
                out = attn(q, k, v)
            s.peak_delta_bytes        # also in mon.sections["attention"] and summary()

        It resets the framework's peak counter at entry (torch.cuda.reset_peak_memory_stats,
        Paddle's reset_max_memory_allocated where the version has it); the monitor's own peak
        figures stay whole-run. Sections may nest.

        Cost: two reads of the framework's figures (with torch 2.11 about 2 x 80 us). every=N
        measures only every N-th entry of this name (the others cost a counter); a block that is
        not measured returns a Section whose figures are None."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a section needs a non-empty name, got {name!r}")
        if every != 1:
            if isinstance(every, bool) or not isinstance(every, int) or every < 1:
                raise ValueError(f"every must be a positive int, got {every!r}")
            n = self._section_calls.get(name, 0)
            self._section_calls[name] = n + 1
            if n % every:
                return _Unmeasured(name)
        return Section(self, name)

    def _section_enter(self, sec: Section) -> None:
        sec._t0 = time.perf_counter()
        alloc, peak, _, _ = self.adapter.read()
        if alloc is None:  # no framework: this process's NVML figure at entry and exit only
            sec.start_bytes = sec.peak_bytes = self._process_now()
            self._open_sections.append(sec)
            return
        if peak is not None:
            self._peak_carry = max(self._peak_carry, peak)
            for outer in self._open_sections:
                if outer.peak_bytes is not None:
                    outer.peak_bytes = max(outer.peak_bytes, peak)
        sec.exact = self.adapter.reset_peak()
        sec.start_bytes = alloc
        sec.peak_bytes = alloc if sec.exact else None
        sec._t0 = (sec._t0, peak)
        self._open_sections.append(sec)

    def _section_exit(self, sec: Section) -> None:
        if sec in self._open_sections:
            self._open_sections.remove(sec)
        alloc, peak, _, _ = self.adapter.read()
        if alloc is None:
            sec.end_bytes = self._process_now()
            if sec.start_bytes is not None and sec.end_bytes is not None:
                sec.peak_bytes = max(sec.start_bytes, sec.end_bytes)
            sec.seconds = time.perf_counter() - sec._t0
        else:
            t0, peak_before = sec._t0
            sec.seconds = time.perf_counter() - t0
            sec.end_bytes = alloc
            if sec.exact:
                sec.peak_bytes = max(sec.peak_bytes, peak, alloc)
                self._peak_carry = max(self._peak_carry, peak)
                for outer in self._open_sections:
                    if outer.peak_bytes is not None:
                        outer.peak_bytes = max(outer.peak_bytes, peak)
            elif peak is not None and peak_before is not None and peak > peak_before:
                sec.peak_bytes = peak  # a new all-time peak happened inside: that is its exact value
                sec.exact = True
            else:
                sec.peak_bytes = max(sec.start_bytes, alloc)  # a lower bound
        agg = self.sections.setdefault(sec.name, {"count": 0, "max_peak_delta_bytes": None, "last": None})
        agg["count"] += 1
        agg["last"] = sec
        d = sec.peak_delta_bytes
        if d is not None and (agg["max_peak_delta_bytes"] is None or d > agg["max_peak_delta_bytes"]):
            agg["max_peak_delta_bytes"] = d
        if not self._closed:
            self._event("note", f"section {sec.name}: peak {'+' if (d or 0) >= 0 else ''}{human(d)} "
                                f"over {human(sec.start_bytes)} in {sec.seconds * 1e3:.1f} ms"
                                f"{'' if sec.exact else ' (not exact)'}")

    def _process_now(self) -> Optional[int]:
        if self._nvml is None:
            return None
        try:
            return self._nvml.process_used(self.nvml_index, self._pid)
        except _gpumon.Error:
            return None

    def marker(self, text: str) -> None:
        """Puts a marker ("epoch 2 starts") on the timeline of the recording / gpumon run."""
        if not self._closed:
            self._event("marker", str(text))

    # ---- the end ----------------------------------------------------------------------------------

    def leak(self) -> Optional[Dict[str, Any]]:
        """The run model's verdict so far: the document's "leak" object (verdict "leak", "none" or
        "insufficient_data", the series, rate, start, steps and seconds to out-of-memory and what
        bounds them), None when leak detection is off or nothing was measured yet."""
        return self._model.verdict() if self._leak_detection else None

    def report(self) -> Dict[str, Any]:
        """The run model's whole document so far, in the shape of gpumon.report(path)."""
        return json.loads(self._model.document())

    def summary(self) -> Dict[str, Any]:
        """The run so far: steps, samples, peaks (bytes), the leak verdict, alerts, sections."""
        return {"framework": self.framework, "device": self.device, "nvml_index": self.nvml_index,
                "steps": self._steps, "samples": self._samples,
                "peak_allocated_bytes": self._stats["peak"] if self._stats["peak"] is not None else self._stats["allocated"],
                "peak_reserved_bytes": self._stats["reserved"], "peak_process_bytes": self._stats["process"],
                "max_unaccounted_bytes": self._stats["unaccounted"], "peak_device_used_bytes": self._stats["device_used"],
                "device_total_bytes": self._total, "leak": self.leak(), "alerts": list(self.alerts),
                "sections": {k: {"count": v["count"], "max_peak_delta_bytes": v["max_peak_delta_bytes"]}
                             for k, v in self.sections.items()},
                "failed_sinks": list(self.failed_sinks)}

    def summary_text(self) -> str:
        s = self.summary()
        lines = [f"gpumon: {s['steps']} steps, {s['samples']} samples ({s['framework']}, GPU {s['device']})",
                 f"  peak allocated {human(s['peak_allocated_bytes'])}, reserved {human(s['peak_reserved_bytes'])}, "
                 f"process {human(s['peak_process_bytes'])} of {human(s['device_total_bytes'])}"]
        if self._leak_detection:
            lines.append(f"  leak: {_words.verdict(self._model)}")
        for name, v in s["sections"].items():
            lines.append(f"  section {name}: {v['count']}x, peak +{human(v['max_peak_delta_bytes'])}")
        return "\n".join(lines)

    def close(self) -> None:
        """Closes the sinks (files flushed) and NVML. Idempotent; also done at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        self._countdown = _FOREVER
        self._next_ns = _FOREVER
        _open_monitors.discard(self)
        for sink in self._sinks:
            try:
                sink.close()
            except Exception as e:
                warnings.warn(f"gpumon: closing the {sink.what} failed: {e}", SinkWarning, stacklevel=2)
        self._sinks = []
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None

    def __enter__(self) -> "GPUMonitor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
