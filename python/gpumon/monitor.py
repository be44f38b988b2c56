# SPDX-License-Identifier: MIT
"""GPUMonitor: every N training steps, what the framework's allocator holds (allocated, peak,
reserved), what this process holds on the GPU according to the driver (NVML), the device's
figures, and the gap between the two views; online leak alerts from libgpumon's detector."""
from __future__ import annotations

import atexit
import logging
import os
import sys
import time
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional

from . import _gpumon
from ._frameworks import Adapter, make_adapter, nvml_index
from ._sinks import (CsvSink, JsonlSink, LogSink, PrometheusSink, RecordSink, RunSocketSink, Sink,
                     TensorBoardSink, human)

log = logging.getLogger("gpumon")

_NO_DRIVER = (-3, -4, -8)  # GPUMON_E_NO_LIBRARY, GPUMON_E_DRIVER, GPUMON_E_NO_PERMISSION
_FOREVER = 1 << 62


class GpumonWarning(UserWarning):
    """Base of gpumon's warnings."""


class LeakWarning(GpumonWarning):
    """The leak detector says the allocated floor keeps rising."""


class HeadroomWarning(GpumonWarning):
    """Free memory on the GPU fell below the threshold."""


class SinkWarning(GpumonWarning):
    """A sink failed and was switched off; monitoring goes on."""


class Sample:
    """One sample. Bytes unless the name says otherwise; None means "not known", never 0.

    step, time (Unix seconds), t_ns (CLOCK_MONOTONIC ns), framework, device (the framework's
    index); allocated / peak / reserved / max_reserved (the framework's allocator; peak is the
    run's peak, kept across section() resets); process (this process on the GPU, from NVML);
    device_used / device_reserved (by the driver) / device_free / device_total; util_gpu (%);
    unaccounted = process - reserved (CUDA context, library workspaces, other allocators).
    """

    __slots__ = ("step", "time", "t_ns", "framework", "device", "allocated", "peak", "reserved",
                 "max_reserved", "process", "device_used", "device_reserved", "device_free",
                 "device_total", "util_gpu", "memory_api")

    def __init__(self, **kw: Any):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    @property
    def unaccounted(self) -> Optional[int]:
        if self.process is None or self.reserved is None:
            return None
        return self.process - self.reserved

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


def _logger_warn(logger: Any) -> Callable[[str], None]:
    """Where alerts go besides `warnings`: the user's logger or callable, else logger "gpumon"."""
    if isinstance(logger, logging.Logger):
        return logger.warning
    if callable(logger) and logger is not None and logger is not False:
        return logger
    return log.warning


class GPUMonitor:
    """Watches GPU memory from inside a training loop.

        mon = gpumon.GPUMonitor(interval=50)   # framework="auto": the one already imported
        for batch in loader:
            ...
            mon.step()                          # every 50th call takes a sample
        mon.close()                             # or: with gpumon.GPUMonitor() as mon: ...

    Arguments:
      device     the framework's GPU: None (current), an int, "cuda:N" / "gpu:N", a torch.device
                 or a paddle.CUDAPlace. CUDA order; mapped to NVML by UUID or CUDA_VISIBLE_DEVICES.
      interval   steps between samples (a positive int). step() costs well under 1 us otherwise.
      framework  "auto", "torch", "paddle" or "none" (NVML only: this process's figure).
      logger     None: a line per sample on logger "gpumon" (to stderr unless logging is set up);
                 a logging.Logger; any callable taking the line; False: no lines.
      csv, jsonl a path to write one row per sample (overwritten).
      tensorboard  a log directory: scalars in a TensorBoard event file written by libgpumon.
      record     a path for a gpumon recording (SQLite, docs/recording.md): samples, the GPU's
                 processes, markers, alerts; must not exist. `gpumon report PATH` reads it.
      prometheus_port  serve /metrics on 127.0.0.1:PORT from this process (0: a free port; see
                 .prometheus_address): libgpumon's exporter, the metrics of `gpumon serve`
                 (docs/metrics.md) plus this process's allocator figures at each sample.
      on_alert   called once per alert with a dict (kind "leak" or "headroom", message, figures).
      min_headroom  warn when the GPU's free memory falls below this share of its total (0..1;
                 None: never).
      leak_detection  feed libgpumon's leak detector with allocated bytes at each sample.

    Under `gpumon run` (GPUMON_RUN_SOCKET set), samples and steps also go to the launcher.
    Without an NVIDIA driver, torch/paddle figures are still taken (NVML fields None, one
    warning); framework="none" then raises gpumon.Error. Not thread-safe: use from one thread.
    Errors at construction: ValueError (bad argument, device out of range), OSError (a path).
    """

    def __init__(self, device: Any = None, interval: int = 50, framework: str = "auto", logger: Any = None,
                 csv: Any = None, jsonl: Any = None, tensorboard: Any = None, record: Any = None,
                 on_alert: Optional[Callable[[Dict[str, Any]], Any]] = None, min_headroom: Optional[float] = 0.05,
                 leak_detection: bool = True, prometheus_port: Optional[int] = None):
        self._closed = True
        self._countdown = _FOREVER
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise ValueError(f"interval must be a positive whole number of steps, got {interval!r}")
        if min_headroom is not None and (isinstance(min_headroom, bool) or not isinstance(min_headroom, (int, float))
                                         or not 0 <= min_headroom < 1):
            raise ValueError(f"min_headroom must be a share of the GPU's memory in [0, 1) or None, got {min_headroom!r}")
        if prometheus_port is not None and (isinstance(prometheus_port, bool) or not isinstance(prometheus_port, int)
                                            or not 0 <= prometheus_port <= 65535):
            raise ValueError(f"prometheus_port must be a TCP port (0..65535; 0: any free one), got {prometheus_port!r}")
        if on_alert is not None and not callable(on_alert):
            raise ValueError(f"on_alert must be callable, got {on_alert!r}")
        emit = _logger_emit(logger)
        self._warn_line = _logger_warn(logger)
        self.interval = interval
        self.adapter: Adapter = make_adapter(framework, device)
        self.framework = self.adapter.name
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
        if self._nvml is not None:
            try:
                self.nvml_index = nvml_index(self._nvml, self.adapter)
                self._total = self._nvml.device_info(self.nvml_index)["memory_total_bytes"]
            except Exception:
                self._nvml.close()
                raise
        else:
            self._total = None
        self._pid = os.getpid()
        self._on_alert = on_alert
        self._min_headroom = min_headroom
        self._emit = emit
        self._leak = _gpumon.Leak() if leak_detection else None
        self._leak_alerted = False
        self._headroom_low = False
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
            self._open_sinks(emit, csv, jsonl, tensorboard, record, prometheus_port)
        except BaseException:
            self.close()
            raise
        self._countdown = interval
        _open_monitors.add(self)

    # ---- construction helpers ----------------------------------------------------------------

    def _open_sinks(self, emit, csv, jsonl, tensorboard, record, prometheus_port) -> None:
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
            sink = PrometheusSink(self._nvml, prometheus_port)
            self._sinks.append(sink)
            self.prometheus_address = sink.address
        path = os.environ.get("GPUMON_RUN_SOCKET")
        if path:
            try:
                self._sinks.append(RunSocketSink(path, self.framework, self.adapter.version, self.device,
                                                 cap=self.adapter.cap))
            except OSError as e:  # never stop training for the launcher
                warnings.warn(f"gpumon: cannot reach gpumon run's socket {path}: {e}; not reporting to it",
                              SinkWarning, stacklevel=3)

    # ---- the training loop ----------------------------------------------------------------------

    def step(self) -> Optional[Sample]:
        """Counts one training step; every interval-th call takes and returns a sample."""
        self._steps += 1
        self._countdown -= 1
        if self._countdown:
            return None
        self._countdown = self.interval
        return self.sample()

    def sample(self, step: Optional[int] = None) -> Sample:
        """Takes a sample now (at step `step`, default the steps counted) and sends it to the sinks."""
        if self._closed:
            raise ValueError("the GPUMonitor is closed")
        st = self._steps if step is None else int(step)
        t_ns = time.monotonic_ns()
        wall = time.time()
        alloc, peak, res, max_res = self.adapter.read()
        if peak is not None:
            peak = max(peak, self._peak_carry)
        s = Sample(step=st, time=wall, t_ns=t_ns, framework=self.framework, device=self.device, allocated=alloc,
                   peak=peak, reserved=res, max_reserved=max_res)
        if self._nvml is not None:
            self._read_nvml(s)
        self._samples += 1
        self.last = s
        self._keep_stats(s)
        self._fan_out(s)
        if self._leak is not None:
            self._feed_leak(s)
        if self._min_headroom is not None and s.device_free is not None and s.device_total:
            self._check_headroom(s)
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

    def _event(self, kind: str, text: str) -> None:
        t_ns = time.monotonic_ns()
        for sink in list(self._sinks):
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

    def _feed_leak(self, s: Sample) -> None:
        figure, what = s.allocated, f"{self.framework} allocated"
        if figure is None:
            figure, what = s.process, "this process on the GPU (NVML)"
        if figure is None:
            return
        # out of memory at the device's size, or at the allocator's cap when the code set one
        limit = self._total or 0
        cap = self.adapter.cap() if s.allocated is not None else None
        if cap and (not limit or cap < limit):
            limit = cap
        try:
            self._leak.add(s.step, s.t_ns, figure, limit)
        except ValueError:  # a step counter that went back: a new series
            self._leak = _gpumon.Leak()
            self._leak_alerted = False
            self._leak.add(s.step, s.t_ns, figure, limit)
            return
        if self._leak_alerted:
            return
        r = self._leak.result()
        if not r["alert"]:
            return
        self._leak_alerted = True
        rate = r["rate_bytes_per_step"]
        start = f" since step {r['start_step']}" if r["start_step"] is not None else ""
        oom = ""
        if r["steps_to_oom"] is not None:
            oom = f"; out of memory in about {r['steps_to_oom']:,.0f} steps at this rate"
            if r["seconds_to_oom"] is not None:
                oom += f" (~{r['seconds_to_oom'] / 60:,.1f} min)"
        msg = (f"gpumon: memory leak suspected on GPU {self.device} ({what}): the floor rises by "
               f"{human(rate)} per step{start}{oom}")
        self._alert("leak", msg, LeakWarning, dict(r, figure=what, step=s.step))

    def _check_headroom(self, s: Sample) -> None:
        share = s.device_free / s.device_total
        if share >= self._min_headroom:
            self._headroom_low = False
            return
        if self._headroom_low:
            return
        self._headroom_low = True
        msg = (f"gpumon: GPU {self.device} has {human(s.device_free)} free ({share:.1%} of {human(s.device_total)}), "
               f"below the {self._min_headroom:.0%} headroom at step {s.step}")
        self._alert("headroom", msg, HeadroomWarning,
                    {"free_bytes": s.device_free, "total_bytes": s.device_total, "step": s.step})

    def _alert(self, kind: str, msg: str, category: type, info: Dict[str, Any]) -> None:
        a = dict(info, kind=kind, message=msg)
        self.alerts.append(a)
        warnings.warn(msg, category, stacklevel=4)
        self._warn_line(msg)
        self._event("alert", msg)
        if self._on_alert is not None:
            self._on_alert(a)

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
        """The leak detector's current verdict (a dict), or None when leak detection is off."""
        return self._leak.result() if self._leak is not None else None

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
        lk = s["leak"]
        if lk is not None:
            if lk["verdict"] == "suspected":
                lines.append(f"  leak: suspected, {human(lk['rate_bytes_per_step'])} per step")
            else:
                lines.append(f"  leak: {lk['verdict'].replace('_', ' ')}")
        for name, v in s["sections"].items():
            lines.append(f"  section {name}: {v['count']}x, peak +{human(v['max_peak_delta_bytes'])}")
        return "\n".join(lines)

    def close(self) -> None:
        """Closes the sinks (files flushed) and NVML. Idempotent; also done at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        self._countdown = _FOREVER
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
