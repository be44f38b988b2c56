# SPDX-License-Identifier: MIT
"""Framework adapters: what the framework's allocator says (allocated, peak, reserved) for one
device, with Paddle's, PyTorch's and JAX's device argument forms, and the mapping of the
framework's device (CUDA order) to NVML's index."""
from __future__ import annotations

import os
import re
import sys
from typing import Any, Optional, Tuple

FRAMEWORKS = ("auto", "torch", "paddle", "jax", "none")
_ALIASES = {"pytorch": "torch", "paddlepaddle": "paddle", "nvml": "none"}

Figures = Tuple[Optional[int], Optional[int], Optional[int], Optional[int]]


def _torch_uses_cuda() -> bool:
    """Whether the imported torch has started CUDA (a torch without is_initialized: assume so)."""
    started = getattr(getattr(sys.modules["torch"], "cuda", None), "is_initialized", None)
    try:
        return True if started is None else bool(started())
    except Exception:  # a torch that cannot say: as before, torch
        return True


def resolve_name(framework: Any) -> str:
    """The adapter name for framework= ("auto" picks the one already imported, never importing one:
    torch, unless JAX is imported too and torch has not started CUDA, as in a JAX job that feeds
    itself with torch's DataLoader; else paddle; else jax)."""
    if not isinstance(framework, str):
        raise ValueError(f"framework must be a string ('auto', 'torch', 'paddle', 'jax' or 'none'), got {framework!r}")
    name = _ALIASES.get(framework.lower(), framework.lower())
    if name not in FRAMEWORKS:
        raise ValueError(f"unknown framework {framework!r}: use 'auto', 'torch', 'paddle', 'jax' or 'none'")
    if name == "auto":
        if "torch" in sys.modules and ("jax" not in sys.modules or _torch_uses_cuda()):
            return "torch"
        if "paddle" in sys.modules:
            return "paddle"
        if "jax" in sys.modules:
            return "jax"
        return "none"
    return name


def _import(name: str):
    try:
        return __import__(name)
    except ImportError as e:
        raise ValueError(f"framework={name!r} but {name} cannot be imported: {e}") from e


def _check_range(device: int, count: int, what: str) -> int:
    if not 0 <= device < count:
        have = f"{count} GPU" + ("" if count == 1 else "s")
        span = f" (0..{count - 1})" if count else ""
        raise ValueError(f"device {device} is out of range: {what} sees {have}{span}")
    return device


def _parse_index(device: Any, prefixes: Tuple[str, ...], what: str) -> Optional[int]:
    """An int from an int or a "prefix:N" string; None for the current device."""
    if device is None:
        return None
    if isinstance(device, bool):
        raise ValueError(f"device must be an int or a string like '{prefixes[0]}:0', got {device!r}")
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        s = device.strip().lower()
        if s in prefixes:
            return None
        m = re.fullmatch(r"(\w+):(\d+)", s)
        if m and m.group(1) in prefixes:
            return int(m.group(2))
        if s.isdigit():
            return int(s)
        raise ValueError(f"device {device!r} is not a {what} GPU: use an int or '{prefixes[0]}:N'")
    return NotImplemented  # the caller tries its framework's own device objects


class Adapter:
    """Base: no framework. read() gives (allocated, peak, reserved, max_reserved), None = unknown."""

    name = "none"
    version: Optional[str] = None
    device: int = 0
    can_reset_peak = False

    def read(self) -> Figures:
        return (None, None, None, None)

    def reset_peak(self) -> bool:
        return False

    def uuid(self) -> Optional[str]:
        return None

    def cap(self) -> Optional[int]:
        """The most the allocator may take on the device, in bytes: torch's when the code set a
        cap, JAX's limit (its memory fraction); None when there is none (or the framework cannot
        tell)."""
        return None


class NoneAdapter(Adapter):
    def __init__(self, device: Any):
        d = _parse_index(device, ("gpu", "cuda"), "CUDA")
        if d is NotImplemented:
            raise ValueError(f"device {device!r} is not a GPU: use an int or 'cuda:N'")
        if d is not None and d < 0:
            raise ValueError(f"device {d} is out of range: a device index is not negative")
        self.device = 0 if d is None else d


def torch_cap(cuda: Any, device: int) -> Optional[int]:
    """torch.cuda.set_per_process_memory_fraction(F): the caching allocator of device stops at F x the
    device's memory (torch >= 2.9 can tell; earlier versions cannot): that cap in bytes, else None."""
    get = getattr(cuda, "get_per_process_memory_fraction", None)
    if get is None:
        return None
    try:
        f = float(get(device))
        if not 0 < f < 1:
            return None
        return int(f * cuda.get_device_properties(device).total_memory)
    except Exception:  # a torch that cannot answer: no cap known
        return None


class TorchAdapter(Adapter):
    name = "torch"

    def __init__(self, device: Any):
        torch = _import("torch")
        self._cuda = torch.cuda
        self.version = str(getattr(torch, "__version__", "")) or None
        if not torch.cuda.is_available():
            raise ValueError("framework='torch' but torch sees no CUDA GPU (torch.cuda.is_available() is False)")
        d = _parse_index(device, ("cuda", "gpu"), "CUDA")
        if d is NotImplemented:
            if getattr(device, "type", None) == "cuda":  # torch.device
                d = device.index
            else:
                raise ValueError(f"device {device!r} is not a CUDA device: use an int, 'cuda:N' or torch.device('cuda', N)")
        if d is None:
            d = int(torch.cuda.current_device())
        self.device = _check_range(d, int(torch.cuda.device_count()), "torch")
        self.can_reset_peak = hasattr(torch.cuda, "reset_peak_memory_stats")

    def read(self) -> Figures:
        # one call: memory_stats() builds the whole dict once (~80 us on an H200 with torch 2.11),
        # and memory_allocated() etc. would build it once each
        st = self._cuda.memory_stats(self.device)
        return (st.get("allocated_bytes.all.current", 0), st.get("allocated_bytes.all.peak", 0),
                st.get("reserved_bytes.all.current", 0), st.get("reserved_bytes.all.peak", 0))

    def reset_peak(self) -> bool:
        if not self.can_reset_peak:
            return False
        self._cuda.reset_peak_memory_stats(self.device)
        return True

    def cap(self) -> Optional[int]:
        return torch_cap(self._cuda, self.device)

    def uuid(self) -> Optional[str]:
        try:
            u = str(self._cuda.get_device_properties(self.device).uuid)
        except Exception:  # older torch: no uuid; the caller falls back to CUDA_VISIBLE_DEVICES
            return None
        if not u:
            return None
        return u if u.startswith(("GPU-", "MIG-")) else "GPU-" + u


class PaddleAdapter(Adapter):
    name = "paddle"

    def __init__(self, device: Any):
        paddle = _import("paddle")
        self.version = str(getattr(paddle, "__version__", "")) or None
        cuda = paddle.device.cuda
        self._cuda = cuda
        d = _parse_index(device, ("gpu", "cuda"), "Paddle")
        if d is NotImplemented:
            get_id = getattr(device, "get_device_id", None)  # paddle.CUDAPlace
            if get_id is None:
                raise ValueError(f"device {device!r} is not a Paddle GPU: use an int, 'gpu:N' or paddle.CUDAPlace(N)")
            d = int(get_id())
        if d is None:
            d = 0
            current = getattr(paddle.device, "get_device", None)
            if current is not None:
                m = re.fullmatch(r"gpu:(\d+)", str(current()))
                if m:
                    d = int(m.group(1))
        count = int(cuda.device_count())
        if count == 0:
            raise ValueError("framework='paddle' but Paddle sees no GPU (paddle.device.cuda.device_count() is 0)")
        self.device = _check_range(d, count, "Paddle")
        # reset_max_memory_allocated/_reserved arrived in Paddle 3.0 (late 2024): feature-detect
        self._reset_alloc = getattr(cuda, "reset_max_memory_allocated", None)
        self._reset_res = getattr(cuda, "reset_max_memory_reserved", None)
        self.can_reset_peak = self._reset_alloc is not None

    def read(self) -> Figures:
        c, d = self._cuda, self.device
        return (int(c.memory_allocated(d)), int(c.max_memory_allocated(d)), int(c.memory_reserved(d)),
                int(c.max_memory_reserved(d)))

    def reset_peak(self) -> bool:
        if self._reset_alloc is None:
            return False
        self._reset_alloc(self.device)
        if self._reset_res is not None:
            self._reset_res(self.device)
        return True


_JAX_GPU = ("gpu", "cuda")  # Device.platform of an NVIDIA GPU ("gpu"; "cuda" in some releases)


def _stat(stats: Any, key: str) -> Optional[int]:
    """A figure of JAX's memory_stats(): None when the allocator leaves it out or gives -1."""
    v = stats.get(key) if stats else None
    return int(v) if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _same(a: Any, b: Any) -> bool:
    """Whether two jax Devices are one (by platform and id: not every release hands out one
    Python object per device)."""
    if a is b:
        return True
    try:
        return (a.platform, a.id) == (b.platform, b.id)
    except AttributeError:  # not a device (None, a platform name)
        return False


def _cuda_index(dev: Any) -> int:
    """CUDA's index of a jax GPU (the model's and NVML's mapping use CUDA order): its local hardware
    id, which equals its jax id except in a multi-process run (there the ids count across processes)."""
    hw = getattr(dev, "local_hardware_id", None)
    return int(hw) if isinstance(hw, int) and hw >= 0 else int(dev.id)


class JaxAdapter(Adapter):
    """JAX through Device.memory_stats(), XLA's allocator statistics: allocated = bytes_in_use,
    peak = peak_bytes_in_use, reserved = pool_bytes (what the BFC allocator took from the driver;
    all of its limit when it pre-allocates), the cap = bytes_limit (XLA_PYTHON_CLIENT_MEM_FRACTION
    of the GPU, 75 % by default). JAX cannot reset its peak."""

    name = "jax"

    def __init__(self, device: Any):
        jax = _import("jax")
        self.version = str(getattr(jax, "__version__", "")) or None
        try:
            # this process's devices on JAX's default backend (starting the backend if the job has
            # not yet: it pre-allocates then, as the job's first array would)
            devs = list(jax.local_devices())
        except RuntimeError as e:
            raise ValueError(f"framework='jax' but JAX cannot list its devices: {e}") from e
        gpus = [d for d in devs if getattr(d, "platform", None) in _JAX_GPU]
        if not gpus:
            kinds = ", ".join(sorted({str(getattr(d, "platform", "?")) for d in devs})) or "none"
            raise ValueError(f"framework='jax' but JAX sees no GPU device: jax.local_devices() gives only {kinds} "
                             "devices (a jax without CUDA support, e.g. not installed as jax[cuda12], or "
                             "JAX_PLATFORMS set to cpu)")
        self._dev = self._pick(jax, gpus, device)
        self.device = _cuda_index(self._dev)
        self._limit: Optional[int] = None
        self._largest_free: Optional[int] = None

    @staticmethod
    def _pick(jax: Any, gpus: list, device: Any) -> Any:
        """The device asked for: None (jax.config.jax_default_device when it is a GPU of this
        process, else the first), a jax Device, or an int / "gpu:N" / "cuda:N" (CUDA's index, which
        is the jax id in a single-process run)."""
        if device is None:
            default = getattr(getattr(jax, "config", None), "jax_default_device", None)
            return next((g for g in gpus if _same(default, g)), gpus[0])
        d = _parse_index(device, ("gpu", "cuda"), "JAX")
        if d is NotImplemented:
            if not hasattr(device, "memory_stats") or not hasattr(device, "platform"):
                raise ValueError(f"device {device!r} is not a JAX GPU: use an int, 'gpu:N' or a device of "
                                 "jax.local_devices()")
            for g in gpus:
                if _same(device, g):
                    return g
            raise ValueError(f"device {device!r} is not one of this process's JAX GPUs {gpus!r}")
        if d is None:
            return gpus[0]
        cuda = [_cuda_index(g) for g in gpus]
        if d in cuda:
            return gpus[cuda.index(d)]
        ids = [g.id for g in gpus]
        raise ValueError(f"device {d} is out of range: JAX sees {len(gpus)} GPU" + ("" if len(gpus) == 1 else "s")
                         + f" in this process (CUDA's {', '.join(map(str, cuda))}"
                         + (f"; jax ids {', '.join(map(str, ids))}: pass the jax Device to name one by its id)"
                            if ids != cuda else ")"))

    def read(self) -> Figures:
        st = self._dev.memory_stats()  # None on a backend without statistics (the platform allocator)
        self._limit = _stat(st, "bytes_limit")
        self._largest_free = _stat(st, "largest_free_block_bytes")
        reserved, max_reserved = _stat(st, "pool_bytes"), _stat(st, "peak_pool_bytes")
        if reserved is None and _stat(st, "bytes_reserved"):  # an allocator that counts it there
            reserved, max_reserved = _stat(st, "bytes_reserved"), _stat(st, "peak_bytes_reserved")
        return (_stat(st, "bytes_in_use"), _stat(st, "peak_bytes_in_use"), reserved, max_reserved)

    def cap(self) -> Optional[int]:
        # bytes_limit of the last read(): the monitor asks right after reading, one call a sample
        return self._limit

    def largest_free(self) -> Optional[int]:
        """The BFC allocator's largest free block at the last read() (None when not told)."""
        return self._largest_free


def make_adapter(framework: Any, device: Any) -> Adapter:
    name = resolve_name(framework)
    if name == "torch":
        return TorchAdapter(device)
    if name == "paddle":
        return PaddleAdapter(device)
    if name == "jax":
        return JaxAdapter(device)
    return NoneAdapter(device)


def nvml_index(nvml, adapter: Adapter) -> int:
    """The NVML index of the adapter's device: by UUID when the framework tells it, else through
    CUDA_VISIBLE_DEVICES (indices or UUIDs), else the same index. ValueError when none fits."""
    count = nvml.device_count()
    uuid = adapter.uuid()
    if uuid:
        try:
            return nvml.device_find(uuid)
        except ValueError:
            pass
    d = adapter.device
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() != "":
        entries = [e.strip() for e in visible.split(",") if e.strip()]
        if d >= len(entries):
            raise ValueError(f"device {d} is out of range: CUDA_VISIBLE_DEVICES={visible!r} makes "
                             f"{len(entries)} GPU" + ("" if len(entries) == 1 else "s") + " visible")
        try:
            return nvml.device_find(entries[d])
        except ValueError as e:
            raise ValueError(f"device {d} is {entries[d]!r} in CUDA_VISIBLE_DEVICES, which NVML does not know: {e}") from e
    return _check_range(d, count, "NVML")
