# SPDX-License-Identifier: MIT
"""Where samples go: log lines, CSV, JSON lines, TensorBoard (written by libgpumon), a gpumon
recording (SQLite), and the `gpumon run` socket. Each sink is opened when the monitor is built
(so a bad path fails there) and raises on a failed write; the monitor then switches it off."""
from __future__ import annotations

import csv as _csv
import errno
import json
import os
import socket
import threading
import time
from typing import Any, Callable, Dict, Optional

from . import _gpumon

MIB = 1 << 20

# The columns of CSV and JSON lines, in order; a value that is not known is empty / null.
FIELDS = ("step", "time", "framework", "device", "allocated_bytes", "peak_bytes", "reserved_bytes",
          "max_reserved_bytes", "process_bytes", "unaccounted_bytes", "device_used_bytes",
          "device_reserved_bytes", "device_free_bytes", "device_total_bytes", "util_gpu_pct")


def human(n: Optional[float]) -> str:
    """Bytes in the library's words ('1.50 GiB', '42.0 MiB', '512 B'), a sign before a negative
    figure; 'n/a' when unknown."""
    if n is None:
        return "n/a"
    return ("-" if n < 0 else "") + _gpumon.words_bytes(int(round(abs(n))))


def _open_for_writing(path: Any, what: str):
    p = os.fspath(path)
    try:
        return open(p, "w", newline="", encoding="utf-8")
    except OSError as e:
        raise OSError(e.errno, f"cannot write the {what} file {p}: {e.strerror}", p) from None


class Sink:
    what = "sink"

    def write(self, s) -> None:
        raise NotImplementedError

    def event(self, t_ns: int, kind: str, text: str) -> None:
        pass

    def close(self) -> None:
        pass


class LogSink(Sink):
    """`[Step N] Used X | Peak Y | Reserved Z | ...` through a logger or any callable."""

    what = "log"

    def __init__(self, emit: Callable[[str], None]):
        self.emit = emit

    def write(self, s) -> None:
        self.emit(s.line())


class CsvSink(Sink):
    def __init__(self, path: Any):
        self.what = f"CSV file {os.fspath(path)}"
        self.f = _open_for_writing(path, "CSV")
        self.w = _csv.writer(self.f, lineterminator="\n")
        self.w.writerow(FIELDS)
        self.f.flush()

    def write(self, s) -> None:
        d = s.as_dict()
        self.w.writerow(["" if d[k] is None else d[k] for k in FIELDS])
        self.f.flush()

    def close(self) -> None:
        self.f.close()


class JsonlSink(Sink):
    def __init__(self, path: Any):
        self.what = f"JSON lines file {os.fspath(path)}"
        self.f = _open_for_writing(path, "JSON lines")

    def write(self, s) -> None:
        self.f.write(json.dumps(s.as_dict(), separators=(",", ":")) + "\n")
        self.f.flush()

    def close(self) -> None:
        self.f.close()


# TensorBoard tags and the Sample attribute each shows, in MiB (float32: exact to 1/128 MiB below 128 GiB)
TB_TAGS = (("memory/allocated_mib", "allocated"), ("memory/peak_mib", "peak"),
           ("memory/reserved_mib", "reserved"), ("memory/process_mib", "process"),
           ("memory/unaccounted_mib", "unaccounted"), ("gpu/used_mib", "device_used"),
           ("gpu/free_mib", "device_free"))


class TensorBoardSink(Sink):
    def __init__(self, logdir: Any):
        d = os.fspath(logdir)
        self.tf = _gpumon.TfEvents(d)
        self.what = f"TensorBoard event file {self.tf.path}"
        self.path = self.tf.path

    def write(self, s) -> None:
        for tag, attr in TB_TAGS:
            v = getattr(s, attr)
            if v is not None:
                self.tf.scalar(tag, s.step, s.time, v / MIB)
        if s.util_gpu is not None:
            self.tf.scalar("gpu/util_pct", s.step, s.time, float(s.util_gpu))
        self.tf.flush()

    def scalar(self, tag: str, step: int, wall: float, value: float) -> None:
        self.tf.scalar(tag, step, wall, value)

    def close(self) -> None:
        self.tf.close()


class RecordSink(Sink):
    """A gpumon recording (docs/recording.md): framework samples, device samples, the GPU's
    processes (this one and the others, as NVML lists them), events."""

    def __init__(self, nvml, path: Any, nvml_index: Optional[int], command: Optional[str]):
        p = os.fspath(path)
        self.what = f"recording {p}"
        self.rec = _gpumon.Recording(nvml, p, command)
        self.dev = nvml_index
        self.pid = os.getpid()

    def write(self, s) -> None:
        if s.allocated is not None or s.reserved is not None or s.peak is not None:
            self.rec.framework(s.t_ns, self.pid, s.device if s.device is not None else -1, s.step,
                               s.allocated, s.reserved, s.peak, s.cap, s.framework)
        if self.dev is not None and s.device_total is not None:
            self.rec.device(self.dev, s.t_ns, s.memory_api or 0, s.device_total, s.device_used,
                            s.device_free, s.device_reserved, s.util_gpu)
            self.rec.processes(self.dev, s.t_ns)

    def event(self, t_ns: int, kind: str, text: str) -> None:
        self.rec.event(t_ns, kind, text)

    def close(self) -> None:
        self.rec.close(-1)


# gpumon serve's connection limits, named as its options; the extension's Exporter takes them and
# hands them to the library (ranges and defaults are gpumon serve's)
PROMETHEUS_LIMITS = ("max_connections", "max_connections_per_ip", "timeout", "keepalive")


class PrometheusSink(Sink):
    """libgpumon's Prometheus exporter in this process (the code of `gpumon serve`): the GPUs and
    processes from NVML, plus this process's allocator figures pushed at each sample."""

    def __init__(self, nvml, port: int, limits: Dict[str, int]):
        self.what = f"Prometheus exporter on port {port}"
        # a training job's own exporter lives as long as the job: its processes' per-pid series
        # do not churn there (gpumon serve on a node keeps them off by default)
        self.exporter = _gpumon.Exporter(nvml, f"127.0.0.1:{port}", processes=50, **limits)
        self.address = self.exporter.address()
        self.what = f"Prometheus exporter on {self.address}"
        self.pid = os.getpid()

    def write(self, s) -> None:
        if s.allocated is not None or s.reserved is not None or s.peak is not None:
            self.exporter.framework(s.t_ns, self.pid, s.device if s.device is not None else -1, s.step,
                                    s.allocated, s.reserved, s.peak, s.cap, s.framework)

    def close(self) -> None:
        self.exporter.close()


class RunSocketSink(Sink):
    """The `gpumon run` socket (docs/run-protocol.md): one JSON object a line, never blocking
    the training loop: what the socket does not take now waits in a bounded buffer, and whole
    lines that do not fit are dropped (a partial line is never dropped, so framing holds).

    Safe to share between threads (the monitor inside a job sends from the training loop, its
    sampling thread and the allocator's out-of-memory observer). flush() is the one call that
    blocks, for at most its timeout: at out-of-memory the process may end right after it."""

    MAX_PENDING = 256 << 10

    def __init__(self, path: str, framework: str, version: Optional[str], device: Optional[int]):
        self.what = f"gpumon run socket {path}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(1.0)
        try:
            self.sock.connect(path)
        except OSError:
            self.sock.close()
            raise
        self.sock.setblocking(False)
        st = os.fstat(self.sock.fileno())
        self.ident = (st.st_dev, st.st_ino)
        self.lock = threading.Lock()
        self.pending = bytearray()
        self.dropped = 0
        self.device = device
        self.send(self.hello(framework, version))

    @staticmethod
    def hello(framework: str, version: Optional[str]) -> dict:
        hello = {"v": 1, "type": "hello", "pid": os.getpid(), "framework": framework}
        if version:
            hello["version"] = version
        return hello

    def send(self, obj: dict) -> None:
        """Queues one message and sends what the socket takes now. Raises OSError when the
        connection is gone."""
        line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.lock:
            if len(self.pending) + len(line) > self.MAX_PENDING:
                self.dropped += 1
            else:
                self.pending += line
            self._pump()

    def _own(self) -> None:
        """Raises OSError unless the descriptor is still this connection. A job that closed every
        descriptor (os.closerange) may have opened a file of its own under the same number: that
        one is never written to nor closed; the socket object lets go of the number."""
        try:
            st = os.fstat(self.sock.fileno())
            if (st.st_dev, st.st_ino) == self.ident:
                return
        except (OSError, ValueError):
            pass
        self.pending.clear()
        if self.sock.fileno() >= 0:
            self.sock.detach()
        raise OSError(errno.EBADF, "the connection to gpumon run was closed by the process")

    def _pump(self) -> None:
        if self.pending:
            self._own()
        while self.pending:
            try:
                n = self.sock.send(self.pending)
            except (BlockingIOError, InterruptedError):
                return
            del self.pending[:n]

    def flush(self, timeout: float) -> bool:
        """Sends what is pending, waiting at most timeout seconds for the socket to take it.
        Returns whether all of it went."""
        with self.lock:
            if not self.pending:
                return True
            deadline = time.monotonic() + timeout
            try:
                self._own()
                while self.pending:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.sock.settimeout(left)
                    n = self.sock.send(self.pending)
                    del self.pending[:n]
            except OSError:
                pass
            finally:
                try:
                    self.sock.setblocking(False)
                except OSError:
                    pass
            return not self.pending

    def write(self, s) -> None:
        figures = {key: int(v) for key, v in (("allocated", s.allocated), ("reserved", s.reserved),
                                              ("max_allocated", s.peak)) if v is not None}
        if figures:  # framework "none" has no allocator figures: only the step is worth sending
            m = {"type": "sample", "t": s.time, "step": s.step}
            if self.device is not None:
                m["device"] = self.device
            m.update(figures)
            if s.cap:  # the allocator's cap set in the code
                m["limit"] = int(s.cap)
            self.send(m)
        self.send({"type": "step", "step": s.step, "t": s.time})

    def event(self, t_ns: int, kind: str, text: str) -> None:
        if kind in ("marker", "alert", "note"):
            self.send({"type": "marker", "text": text[:1023]})

    def oom(self, figures: Dict[str, Any], t: Optional[float] = None) -> None:
        """An `oom` message: what the allocator knew when it ran out of memory (the figures as
        _inside.TorchOom gives them: bytes, None where unknown)."""
        m = {"type": "oom", "t": time.time() if t is None else t}
        m.update((k, v) for k, v in figures.items() if v is not None)
        self.send(m)

    def snapshot(self, condensed: str, t: Optional[float] = None) -> None:
        """A `snapshot` message: the allocator's snapshot as libgpumon condensed it (its JSON)."""
        self.send({"type": "snapshot", "t": time.time() if t is None else t, "pid": os.getpid(),
                   "snapshot": json.loads(condensed)})

    def close(self) -> None:
        try:
            self.flush(0.2)  # a last chance for what is pending, bounded
        finally:
            self.drop()

    def drop(self) -> None:
        """Closes the connection, what is pending unsent; a descriptor no longer its own is left
        to its owner. Without the lock: in a forked child another thread of the parent may have
        held it at the fork."""
        try:
            self._own()
            self.sock.close()
        except OSError:
            pass
