# SPDX-License-Identifier: MIT
"""The JAX adapter against the stand-in that mirrors JAX's device API (tests/python/fake_jax): the
figures of Device.memory_stats() and None for the keys an allocator leaves out, a CPU-only jax,
auto-detection without importing jax, the device forms and their NVML index, the limit fed to the
run model as the allocator's cap, and a JAX job under `gpumon run` with its allocator flags."""
import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings

import pytest

from conftest import GIB, GPUMON_BIN, HERE, MIB, TOTAL, UUID, Clock, child_env, h200

import gpumon
from gpumon._frameworks import resolve_name

FAKE_JAX = os.path.join(HERE, "fake_jax")
if FAKE_JAX not in sys.path:
    sys.path.insert(0, FAKE_JAX)
XLA_VARS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")


def _forget_jax():
    for m in [m for m in sys.modules if m == "jax" or m.startswith("jax.")]:
        del sys.modules[m]


@pytest.fixture
def xla_env(monkeypatch):
    """JAX's allocator variables as a test sets them (none by default), read when jax starts."""
    for v in XLA_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


@pytest.fixture
def jax(no_frameworks, xla_env):
    """The stand-in jax, freshly started with one GPU; gone from sys.modules after the test (the
    other tests' framework="auto" must not find it)."""
    _forget_jax()
    import jax
    jax._fake.reset(1)
    yield jax
    _forget_jax()


@pytest.fixture
def growing(jax, xla_env):
    """jax started with XLA_PYTHON_CLIENT_PREALLOCATE=false: its pool grows with what it holds."""
    xla_env.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax._fake.reset(1)
    return jax


def two_gpus(scenario):
    scenario(h200() + 'gpu 1 name="Other" uuid=GPU-11111111-2222-3333-4444-555555555555 total=80GiB used=1GiB\n'
             f"proc 1 {os.getpid()} used=5GiB\n")


# ---- the figures ---------------------------------------------------------------------------------


def test_figures_equal_memory_stats(scenario, growing):
    jax = growing
    scenario(h200(proc_used="4GiB"))
    jax._fake.alloc(3 * GIB)
    jax._fake.free(1 * GIB)
    jax._fake.alloc(100 * MIB + 12345)
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
        st = jax.local_devices()[0].memory_stats()
    assert mon.framework == "jax" and mon.adapter.version == "0.7.2+fake"
    assert s.allocated == st["bytes_in_use"] == 2 * GIB + 100 * MIB + 12345
    assert s.peak == st["peak_bytes_in_use"] == 3 * GIB
    assert s.reserved == st["pool_bytes"] == 3 * GIB and s.max_reserved == st["peak_pool_bytes"] == 3 * GIB
    assert s.cap == st["bytes_limit"] == int(0.75 * TOTAL)
    assert s.process == 4 * GIB and s.unaccounted == GIB
    assert s.framework == "jax" and s.device == 0 and mon.nvml_index == 0


def test_one_read_of_memory_stats_a_sample(scenario, growing):
    """The figures and the cap of a sample come from one memory_stats() call: one moment."""
    scenario(h200())
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        before = growing._fake.stats_calls
        mon.sample()
        assert growing._fake.stats_calls - before == 1


def test_preallocated_pool_is_reserved(scenario, jax):
    """By default JAX takes 75 % of the card at start: reserved is all of it, allocated what arrays
    hold; the cap is that limit."""
    scenario(h200())
    jax._fake.alloc(GIB)
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
    assert s.allocated == GIB and s.reserved == s.cap == int(0.75 * TOTAL)


def test_memory_fraction_sets_the_cap(scenario, jax, xla_env):
    xla_env.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".30")
    jax._fake.reset(1)
    scenario(h200())
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        assert mon.sample().cap == int(0.30 * TOTAL)


@pytest.mark.parametrize("hide, none", [
    ({"pool_bytes", "peak_pool_bytes"}, {"reserved", "max_reserved"}),
    ({"bytes_limit"}, {"cap"}),
    ({"peak_bytes_in_use"}, {"peak"}),
    ({"bytes_in_use"}, {"allocated", "cap"}),  # no allocated figure: no framework figures for the model
])
def test_a_missing_key_gives_none_never_0(scenario, growing, hide, none):
    scenario(h200())
    growing._fake.alloc(GIB)
    growing._fake.HIDE.update(hide)
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
    for k in ("allocated", "peak", "reserved", "max_reserved", "cap"):
        if k in none:
            assert getattr(s, k) is None, k
        else:
            assert isinstance(getattr(s, k), int) and getattr(s, k) > 0, k


def test_minus_one_is_not_a_figure(scenario, growing, monkeypatch):
    """jax documents -1 for a statistic that is not available."""
    scenario(h200())
    dev = growing.local_devices()[0]
    monkeypatch.setattr(type(dev), "memory_stats", lambda self: {"bytes_in_use": 5 * MIB, "peak_bytes_in_use": -1,
                                                                  "bytes_limit": -1, "bytes_reserved": 0})
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
    assert s.allocated == 5 * MIB and s.peak is None and s.cap is None
    # bytes_reserved 0 is what an allocator that does not count it says: not known, not 0
    assert s.reserved is None and s.max_reserved is None


def test_bytes_reserved_when_there_is_no_pool(scenario, growing, monkeypatch):
    scenario(h200())
    dev = growing.local_devices()[0]
    stats = {"bytes_in_use": 5 * MIB, "peak_bytes_in_use": 6 * MIB, "bytes_reserved": 8 * MIB,
             "peak_bytes_reserved": 9 * MIB}
    monkeypatch.setattr(type(dev), "memory_stats", lambda self: stats)
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
    assert (s.allocated, s.peak, s.reserved, s.max_reserved, s.cap) == (5 * MIB, 6 * MIB, 8 * MIB, 9 * MIB, None)


def test_platform_allocator_gives_no_statistics(scenario, jax, xla_env):
    """XLA_PYTHON_CLIENT_ALLOCATOR=platform (gpumon run --jax-platform-allocator): memory_stats() is
    None; the allocator's figures are not known and NVML's still are."""
    xla_env.setenv("XLA_PYTHON_CLIENT_ALLOCATOR", "platform")
    jax._fake.reset(1)
    scenario(h200(proc_used="2GiB"))
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
        assert (s.allocated, s.peak, s.reserved, s.max_reserved, s.cap) == (None,) * 5
        assert s.process == 2 * GIB and "Used n/a" in s.line()
        assert mon.leak()["series"]["kind"] == "job"  # the model judges this process's NVML figure


def test_section_is_exact_only_for_a_new_peak(scenario, growing):
    """JAX cannot reset its peak counter: a block is exact when it set a new all-time peak."""
    jax = growing
    scenario(h200())
    jax._fake.alloc(GIB)
    with gpumon.GPUMonitor(framework="jax", logger=False) as mon:
        with mon.section("grows") as s1:
            jax._fake.alloc(300 * MIB)
            jax._fake.free(300 * MIB)
        with mon.section("under") as s2:
            jax._fake.alloc(100 * MIB)
            jax._fake.free(100 * MIB)
    assert s1.exact and s1.peak_delta_bytes == 300 * MIB
    assert not s2.exact and s2.peak_delta_bytes == 0


# ---- no GPU, no jax ------------------------------------------------------------------------------


def test_cpu_only_jax_says_there_is_no_gpu(scenario, jax):
    scenario(h200())
    jax._fake.reset(0)
    assert jax.local_devices()[0].memory_stats() is None
    with pytest.raises(ValueError, match=r"framework='jax' but JAX sees no GPU device: jax\.local_devices\(\) "
                                         r"gives only cpu devices"):
        gpumon.GPUMonitor(framework="jax", logger=False)


def test_jax_not_installed(scenario, no_frameworks, monkeypatch):
    scenario(h200())
    _forget_jax()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "fake_jax" not in p])
    with pytest.raises(ValueError, match="framework='jax' but jax cannot be imported"):
        gpumon.GPUMonitor(framework="jax", logger=False)


def test_no_driver_keeps_jax_figures(scenario, growing, monkeypatch, tmp_path):
    scenario(h200())
    monkeypatch.setenv("GPUMON_NVML_LIBRARY", str(tmp_path / "no-such-libnvidia-ml.so.1"))
    growing._fake.alloc(GIB)
    with pytest.warns(gpumon.GpumonWarning, match="goes on with jax's figures only"):
        mon = gpumon.GPUMonitor(framework="jax", interval=1, logger=False)
    with mon:
        s = mon.sample()
    assert s.allocated == GIB and s.process is None and s.device_total is None


# ---- auto-detection ------------------------------------------------------------------------------


def test_auto_picks_jax_when_imported(scenario, jax):
    scenario(h200())
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.framework == "jax"


def test_auto_never_imports_jax(scenario, no_frameworks):
    """jax is importable here (the stand-in is on sys.path) but the program did not import it."""
    scenario(h200())
    _forget_jax()
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.framework == "none"
    assert "jax" not in sys.modules


def test_import_gpumon_does_not_import_jax(tmp_path):
    env = child_env(tmp_path, h200(pid=False))
    env["PYTHONPATH"] += os.pathsep + FAKE_JAX
    r = subprocess.run([sys.executable, "-c", "import sys, gpumon; print(sorted(m for m in ('jax', 'torch', 'paddle') "
                        "if m in sys.modules))"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_torch_beside_jax(scenario, jax, monkeypatch):
    """A JAX job that feeds itself with torch's DataLoader imports torch without using CUDA: jax is
    the framework. When torch has started CUDA, torch is."""
    scenario(h200())
    import torch
    torch._fake.reset()
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False, raising=False)
    assert resolve_name("auto") == "jax"
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.framework == "jax"
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert resolve_name("auto") == "torch"
    monkeypatch.delattr(torch.cuda, "is_initialized")  # a torch that cannot say: torch, as before
    assert resolve_name("auto") == "torch"


# ---- devices -------------------------------------------------------------------------------------


@pytest.mark.parametrize("form", [1, "gpu:1", "cuda:1", "object"])
def test_device_forms(scenario, jax, form):
    two_gpus(scenario)
    jax._fake.reset(2)
    jax._fake.alloc(7 * MIB, dev=1)
    if form == "object":
        form = jax.local_devices()[1]
    with gpumon.GPUMonitor(device=form, framework="jax", interval=1, logger=False) as mon:
        s = mon.sample()
    assert mon.device == 1 and mon.nvml_index == 1
    assert s.allocated == 7 * MIB and s.process == 5 * GIB and s.device_total == 80 * GIB


def test_default_device_is_the_first_or_jaxs_default(scenario, jax):
    two_gpus(scenario)
    jax._fake.reset(2)
    with gpumon.GPUMonitor(framework="jax", logger=False) as mon:
        assert mon.device == 0 and mon.nvml_index == 0
    jax.config.jax_default_device = jax.local_devices()[1]
    with gpumon.GPUMonitor(framework="jax", logger=False) as mon:
        assert mon.device == 1 and mon.nvml_index == 1


@pytest.mark.parametrize("form", [2, "gpu:2", -1])
def test_device_out_of_range(scenario, jax, form):
    two_gpus(scenario)
    jax._fake.reset(2)
    with pytest.raises(ValueError, match=r"out of range: JAX sees 2 GPUs in this process \(CUDA's 0, 1\)$"):
        gpumon.GPUMonitor(device=form, framework="jax", logger=False)


def test_device_of_a_wrong_kind(scenario, jax):
    scenario(h200())
    for form in ("tpu:0", 1.5, object()):
        with pytest.raises(ValueError, match="not a JAX GPU"):
            gpumon.GPUMonitor(device=form, framework="jax", logger=False)
    cpu = jax.Device("cpu", 0, 0)
    with pytest.raises(ValueError, match="is not one of this process's JAX GPUs"):
        gpumon.GPUMonitor(device=cpu, framework="jax", logger=False)


def test_device_mapped_through_cuda_visible_devices(scenario, jax, monkeypatch):
    two_gpus(scenario)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False) as mon:
        assert mon.device == 0 and mon.nvml_index == 1
        assert mon.sample().process == 5 * GIB


def test_multi_process_ids_map_by_local_hardware_id(scenario, jax, monkeypatch):
    """In a multi-process run this process's GPUs have jax ids 4 and 5 but are CUDA's 0 and 1 here;
    CUDA_VISIBLE_DEVICES names them by UUID in reverse NVML order."""
    two_gpus(scenario)
    jax._fake.reset(2, id_base=4)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"GPU-11111111-2222-3333-4444-555555555555,{UUID}")
    with gpumon.GPUMonitor(framework="jax", logger=False) as mon:
        assert mon.device == 0 and mon.nvml_index == 1
    with gpumon.GPUMonitor(device=jax.local_devices()[1], framework="jax", logger=False) as mon:
        assert mon.device == 1 and mon.nvml_index == 0
    with pytest.raises(ValueError, match=r"out of range: JAX sees 2 GPUs in this process \(CUDA's 0, 1; "
                                         r"jax ids 4, 5: pass the jax Device to name one by its id\)"):
        gpumon.GPUMonitor(device=4, framework="jax", logger=False)


# ---- the cap in the run model --------------------------------------------------------------------


def leaking_loop(jax, mon, clock, steps=400, leak=4 * MIB):
    jax._fake.alloc(2 * GIB)
    for i in range(steps):
        act = (64 + 64 * (i % 5)) * MIB
        jax._fake.alloc(act)
        jax._fake.free(act)
        jax._fake.alloc(leak)
        clock.advance(0.1)
        mon.step()


def test_the_limit_is_the_models_cap(scenario, growing, xla_env, monkeypatch):
    """XLA_PYTHON_CLIENT_MEM_FRACTION=.10 with a growing pool: the leak's steps to out-of-memory
    count to the limit, from what the pool holds, as for torch's per-process fraction."""
    xla_env.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", ".10")
    growing._fake.reset(1)
    scenario(h200(used="20GiB"))
    clock = Clock(monkeypatch)
    alerts, at = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(framework="jax", interval=1, logger=False, min_headroom=None,
                               on_alert=lambda a: (alerts.append(a), at.append(mon.last))) as mon:
            leaking_loop(growing, mon, clock)
    a, s = alerts[0], at[0]
    assert a["series"]["framework"] == "jax" and abs(a["rate_bytes_per_step"] - 4 * MIB) < 0.05 * 4 * MIB
    assert s.cap == int(0.10 * TOTAL)
    assert a["room"] == "cap" and a["room_bytes"] == s.cap - s.allocated, a
    assert "against the cap the job set on its allocator" in a["message"]


def test_preallocated_pool_leaves_room_under_the_cap(scenario, jax, monkeypatch):
    scenario(h200(used="1GiB"))
    clock = Clock(monkeypatch)
    alerts, at = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with gpumon.GPUMonitor(framework="jax", interval=1, logger=False, min_headroom=None,
                               on_alert=lambda a: (alerts.append(a), at.append(mon.last))) as mon:
            leaking_loop(jax, mon, clock)
    a, s = alerts[0], at[0]
    assert a["room"] == "cap" and a["room_bytes"] == s.cap - s.allocated, a


def test_the_limit_reaches_a_recording(scenario, jax, tmp_path):
    scenario(h200())
    rec = tmp_path / "r.gpumon"
    with gpumon.GPUMonitor(framework="jax", interval=1, logger=False, record=rec) as mon:
        jax._fake.alloc(GIB)
        mon.step()
    db = sqlite3.connect(rec)
    assert db.execute("SELECT framework, device FROM framework_sources").fetchall() == [("jax", 0)]
    assert db.execute("SELECT allocated_bytes, reserved_bytes, limit_bytes FROM framework_samples").fetchall() == \
        [(GIB, int(0.75 * TOTAL), int(0.75 * TOTAL))]


# ---- under gpumon run ----------------------------------------------------------------------------

JOB = """
import os, jax, gpumon
jax._fake.reset()
jax._fake.alloc(512 << 20)
with gpumon.GPUMonitor(interval=5, logger=False, min_headroom=None) as mon:
    assert mon.framework == "jax", mon.framework
    for i in range(20):
        jax._fake.alloc(1 << 20)
        mon.step()
print("job done", os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE"), os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION"))
"""


@pytest.mark.parametrize("flags, prealloc, fraction", [([], None, None),
                                                      (["--no-prealloc", "--fraction", "0.5"], "false", "0.500")])
def test_a_jax_job_under_gpumon_run(tmp_path, flags, prealloc, fraction):
    """gpumon run's JAX variables reach the job, its monitor finds jax by itself, and the recording
    and the summary name jax with its figures and limit."""
    (tmp_path / "train.py").write_text(textwrap.dedent(JOB))
    env = child_env(tmp_path, h200(pid=False), TMPDIR=str(tmp_path))
    env["PYTHONPATH"] += os.pathsep + FAKE_JAX
    for v in XLA_VARS:
        env.pop(v, None)
    rec = tmp_path / "run.gpumon"
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "run", "-o", str(rec), *flags, "--", sys.executable, "train.py"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"job done {prealloc} {fraction}"
    assert "(jax, pid " in r.stderr  # the summary's verdict names the series
    db = sqlite3.connect(rec)
    assert db.execute("SELECT framework, device FROM framework_sources").fetchall() == [("jax", 0)]
    limit = int((0.5 if fraction else 0.75) * TOTAL)
    rows = db.execute("SELECT allocated_bytes, reserved_bytes, limit_bytes FROM framework_samples "
                      "ORDER BY t_ns").fetchall()
    assert rows[-1][0] == 532 * MIB and rows[-1][2] == limit
    # pre-allocated: the pool is the whole limit; growing: what the arrays hold, in 2 MiB steps
    assert rows[-1][1] == (532 * MIB if prealloc else limit)
    settings = db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
    assert ("XLA_PYTHON_CLIENT_PREALLOCATE=false" in (settings[0] if settings else "")) == bool(prealloc)
