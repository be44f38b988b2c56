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
# It runs before anything else in every Python of the job, those that never touch a GPU too, so it
# costs little: a finder on sys.meta_path and a few stat calls for the next sitecustomize; it
# imports nothing Python has not loaded already and never raises. What runs only once a framework
# is imported (_LATER) is compiled only then: where Python keeps no bytecode cache
# (PYTHONDONTWRITEBYTECODE), compiling this file is most of its cost. Standard library only,
# written for any Python 3 from 3.6 on (a job may start another Python with this PYTHONPATH).
import os
import sys

_FRAMEWORKS = ("torch", "paddle", "jax")

_LATER = r'''
class Loader(object):
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
            if module.__spec__.loader is self:
                module.__spec__.loader = loader
            if module.__loader__ is self:
                module.__loader__ = loader
        except Exception:
            pass
        loader.exec_module(module)
        try:
            start(self.name, self.state)
        except Exception:
            pass

    def __getattr__(self, attr):
        if attr == "loader":
            raise AttributeError(attr)
        return getattr(self.loader, attr)


def find_spec(finder, name, target):
    """The spec the finders after this one give, its loader wrapped."""
    spec = None
    after = False
    for f in list(sys.meta_path):
        if not after:
            after = f is finder
            continue
        find = getattr(f, "find_spec", None)
        if find is None:
            return None  # a finder of the old protocol: Python asks it itself, unwatched
        spec = find(name, None, target)
        if spec is not None:
            break
    loader = getattr(spec, "loader", None)
    if loader is not None and hasattr(loader, "exec_module") and not isinstance(loader, Loader):
        spec.loader = Loader(loader, name, finder.state)
    return spec


def start(name, state):
    """The framework name has been imported: start gpumon's monitor inside this process."""
    where = "this Python (%s, %s)" % (sys.executable, sys.version.split()[0])
    try:
        inside = inside_module()
    except Exception as e:
        off(name, state, "%s cannot import gpumon: %s: %s" % (where, type(e).__name__, e))
        return
    try:
        inside.start(name)
    except Exception as e:
        off(name, state, "gpumon's monitor did not start in %s: %s: %s" % (where, type(e).__name__, e))


def inside_module():
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


def off(name, state, reason):
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
'''


class _GpumonInsideFinder(object):
    """First on sys.meta_path: for the top-level torch, paddle and jax, the spec the finders after it
    give, its loader wrapped so that the monitor starts once the module has run (_LATER, compiled
    at the first of them); for every other name, nothing (one comparison)."""

    _gpumon_inside = True

    def __init__(self):
        self.looking = set()
        self.state = {}
        self.later = None

    def find_spec(self, name, path=None, target=None):
        if path is not None or name not in _FRAMEWORKS or name in self.looking:
            return None
        self.looking.add(name)
        try:
            return self.code()["find_spec"](self, name, target)
        except Exception:  # Python asks the finders itself, as without this one
            return None
        finally:
            self.looking.discard(name)

    def started(self, name):
        self.code()["start"](name, self.state)

    def code(self):
        if self.later is None:
            later = {"os": os, "sys": sys}
            exec(compile(_LATER, __file__, "exec"), later)
            self.later = later
        return self.later


def _gpumon_inside_install():
    env = os.environ
    if env.get("GPUMON_INSIDE") != "1" or not env.get("GPUMON_RUN_SOCKET") or sys.version_info < (3, 6):
        return
    try:
        if not any(getattr(f, "_gpumon_inside", False) for f in sys.meta_path):
            finder = _GpumonInsideFinder()
            sys.meta_path.insert(0, finder)
            for name in _FRAMEWORKS:  # imported before site ran (by a .pth file): started now
                if name in sys.modules:
                    finder.started(name)
    except Exception:
        pass


def _gpumon_inside_chain():
    """The sitecustomize this one hides: the next one on sys.path, run as the module sitecustomize
    (sys.modules["sitecustomize"] is then the job's). What it raises goes to site, which says it as
    it says any sitecustomize's error and goes on."""
    try:
        # CPython's import machinery is loaded already; importlib.util would cost ~7 ms to import
        mods = sys.modules
        machinery, util, imp = mods.get("_frozen_importlib_external"), mods.get("_frozen_importlib"), mods.get("_imp")
        if machinery is None or util is None or imp is None:
            import _imp as imp
            import importlib.machinery as machinery
            import importlib.util as util
        here = os.path.dirname(os.path.abspath(__file__))
        names = ["sitecustomize" + s for s in [".py", ".pyc"] + list(imp.extension_suffixes())]
        names.append(os.path.join("sitecustomize", "__init__.py"))
        spec = None
        # only what comes after this directory: an entry before it would have been Python's
        # choice, and a second copy of this file there (gpumon run inside gpumon run) would
        # chain back to this one without end
        paths = [p for p in sys.path if isinstance(p, str)]
        dirs = [os.path.abspath(p or os.curdir) for p in paths]
        after = dirs.index(here) + 1 if here in dirs else 0
        for p, d in zip(paths[after:], dirs[after:]):
            if d == here:
                continue
            # a few stats per entry, where asking the path finder would list each directory
            if os.path.isfile(d) or any(os.path.exists(os.path.join(d, n)) for n in names):
                spec = machinery.PathFinder.find_spec("sitecustomize", [p])
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return
        module = util.module_from_spec(spec)
    except Exception:
        return
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_gpumon_inside_install()
_gpumon_inside_chain()
