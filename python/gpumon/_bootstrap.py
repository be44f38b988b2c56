# SPDX-License-Identifier: MIT
# gpumon run's bootstrap. gpumon writes this file as sitecustomize.py into the run's private
# directory and puts that directory first on the job's PYTHONPATH, so every Python process of the
# job runs it at start (python -S, -I and -E do not: they skip sitecustomize or PYTHONPATH).
#
# With GPUMON_INSIDE=1 and GPUMON_RUN_SOCKET set, it installs an import hook that waits for the job
# to import torch, paddle or jax; right after that import has finished, it imports gpumon._inside
# (the job's own gpumon first, else the one in GPUMON_INSIDE_PYTHONPATH, appended to sys.path) and
# starts the monitor inside the job. When gpumon cannot be imported there (another Python, another
# version), it says so to gpumon run, once, and the job runs untouched. It never imports a
# framework itself and never changes what an import returns. Then, in every case, it runs the next
# sitecustomize on sys.path (the job's or the system's), as Python would have without this one.
#
# It runs before anything else in every Python of the job, those that never touch a GPU too: it
# costs a finder on sys.meta_path and the search for the next sitecustomize, imports nothing that
# Python has not loaded already, and never raises. Standard library only, and written for any
# Python 3 from 3.6 on (a job may start another Python with this PYTHONPATH).
import os
import sys

_FRAMEWORKS = ("torch", "paddle", "jax")


def _gpumon_inside_start(name, state):
    """The framework name has been imported: start gpumon's monitor inside this process."""
    try:
        inside = _gpumon_inside_import()
    except Exception as e:
        _gpumon_inside_off(name, state, "this Python (%s, %s) cannot import gpumon: %s"
                           % (sys.executable, sys.version.split()[0], _gpumon_inside_error(e)))
        return
    try:
        inside.start(name)
    except Exception as e:
        _gpumon_inside_off(name, state, "gpumon's monitor did not start in this Python (%s, %s): %s"
                           % (sys.executable, sys.version.split()[0], _gpumon_inside_error(e)))


def _gpumon_inside_error(e):
    return "%s: %s" % (type(e).__name__, e)


def _gpumon_inside_import():
    """gpumon._inside: the job's own gpumon when it has one (its packages win), else the one gpumon
    run names, its directory appended to sys.path (and taken off again when that fails too)."""
    try:
        from gpumon import _inside
        return _inside
    except ImportError as e:
        extra = os.environ.get("GPUMON_INSIDE_PYTHONPATH")
        if getattr(e, "name", None) != "gpumon" or not extra:
            raise
    before = set(sys.modules)
    sys.path.append(extra)
    try:
        from gpumon import _inside
        return _inside
    except BaseException:
        try:
            sys.path.remove(extra)
        except ValueError:
            pass
        for m in [m for m in sys.modules if (m == "gpumon" or m.startswith("gpumon.")) and m not in before]:
            del sys.modules[m]
        raise


def _gpumon_inside_off(name, state, reason):
    """Tells gpumon run, once per process, that the monitor is off here and why; with the standard
    library only, as gpumon may be what is missing."""
    if state.get("off"):
        return
    state["off"] = True
    try:
        import json
        import socket
        line = json.dumps({"type": "inside", "state": "off", "framework": name, "reason": reason,
                           "pid": os.getpid()}) + "\n"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(1.0)
            s.connect(os.environ["GPUMON_RUN_SOCKET"])
            s.sendall(line.encode("utf-8"))
        finally:
            s.close()
    except Exception:
        pass


class _GpumonInsideLoader(object):
    """The framework's own loader, with the monitor started once its module has run. The module
    keeps its loader: the spec and __loader__ name the original before the module runs."""

    def __init__(self, loader, name, state):
        self.loader = loader
        self.name = name
        self.state = state

    def create_module(self, spec):
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module):
        loader = self.loader
        try:
            spec = getattr(module, "__spec__", None)
            if spec is not None and spec.loader is self:
                spec.loader = loader
            if getattr(module, "__loader__", None) is self:
                module.__loader__ = loader
        except Exception:
            pass
        loader.exec_module(module)
        _gpumon_inside_start(self.name, self.state)

    def __getattr__(self, attr):
        if attr == "loader":
            raise AttributeError(attr)
        return getattr(self.loader, attr)


class _GpumonInsideFinder(object):
    """First on sys.meta_path: for the top-level torch, paddle and jax, the spec the finders after it
    give, its loader wrapped; for everything else, nothing (a name compared, ~0.1 us)."""

    _gpumon_inside = True

    def __init__(self):
        self.looking = set()
        self.state = {}

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in _FRAMEWORKS or name in self.looking:
            return None
        self.looking.add(name)
        try:
            spec = self._next_spec(name, target)
        finally:
            self.looking.discard(name)
        loader = getattr(spec, "loader", None)
        if loader is not None and hasattr(loader, "exec_module") and not isinstance(loader, _GpumonInsideLoader):
            spec.loader = _GpumonInsideLoader(loader, name, self.state)
        return spec

    def _next_spec(self, name, target):
        meta = sys.meta_path
        after = False
        for finder in list(meta):
            if finder is self:
                after = True
                continue
            if not after:
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                return None  # a finder of the old protocol: Python asks it itself, unwatched
            spec = find(name, None, target)
            if spec is not None:
                return spec
        return None


def _gpumon_inside_install():
    env = os.environ
    if env.get("GPUMON_INSIDE") != "1" or not env.get("GPUMON_RUN_SOCKET") or sys.version_info < (3, 6):
        return
    try:
        if not any(getattr(f, "_gpumon_inside", False) for f in sys.meta_path):
            finder = _GpumonInsideFinder()
            sys.meta_path.insert(0, finder)
            for name in _FRAMEWORKS:  # imported before site ran (a .pth file): started now
                if name in sys.modules:
                    _gpumon_inside_start(name, finder.state)
    except Exception:
        pass


def _gpumon_inside_chain():
    """The sitecustomize this one hides: the next one on sys.path, run as the module sitecustomize
    (sys.modules["sitecustomize"] is then the job's). What it raises goes to site, which says it
    as it says any sitecustomize's error and goes on."""
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        path = [p for p in sys.path if not isinstance(p, str) or os.path.abspath(p or os.curdir) != here]
        # CPython's import machinery is loaded already; importlib.util would cost ~7 ms to import
        machinery, util = sys.modules.get("_frozen_importlib_external"), sys.modules.get("_frozen_importlib")
        if machinery is None or util is None:
            import importlib.machinery as machinery
            import importlib.util as util
        spec = machinery.PathFinder.find_spec("sitecustomize", path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return
        module = util.module_from_spec(spec)
    except Exception:
        return
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_gpumon_inside_install()
_gpumon_inside_chain()
