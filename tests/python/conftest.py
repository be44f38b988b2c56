# SPDX-License-Identifier: MIT
"""Fixtures for the tests of the Python package: the built package (PYTHONPATH=build/python),
the fake NVML driven by a scenario per test, and stand-ins for torch and paddle.

Environment (set by ctest):
  GPUMON_PYTHONPATH  the build tree's python directory (holds gpumon/ with _gpumon.abi3.so)
  FAKE_NVML_LIB      the fake libnvidia-ml
  GPUMON_BIN         the gpumon program (for the `gpumon run` tests)
"""
import os
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PYPATH = os.environ.get("GPUMON_PYTHONPATH", os.path.join(ROOT, "build", "python"))
FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB", os.path.join(ROOT, "build/tests/fake_nvml/libnvidia-ml-fake.so"))
GPUMON_BIN = os.environ.get("GPUMON_BIN", os.path.join(ROOT, "build/cli/gpumon"))
FAKE_TORCH = os.path.join(HERE, "fake_torch")
FAKE_PADDLE = os.path.join(HERE, "fake_paddle")
for p in (PYPATH, FAKE_TORCH, FAKE_PADDLE):
    if p not in sys.path:
        sys.path.insert(0, p)

MIB = 1 << 20
GIB = 1 << 30
UUID = "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51"
TOTAL = 150754820096


def h200(pid=None, used="40GiB", proc_used="3GiB", util=97, extra=""):
    """One H200 with this process on it holding proc_used (or none when pid is False)."""
    pid = os.getpid() if pid is None else pid
    s = (f'gpu 0 name="NVIDIA H200" uuid={UUID} bus=00000000:00:06.0 total={TOTAL} '
         f"reserved=644939776 used={used} util={util} memutil=10\n")
    if pid is not False:
        s += f"proc 0 {pid} used={proc_used}\n"
    return s + textwrap.dedent(extra)


@pytest.fixture
def scenario(tmp_path, monkeypatch):
    """scenario(text): points libgpumon at the fake NVML with this scenario for the test."""
    count = [0]

    def use(text):
        count[0] += 1
        path = tmp_path / f"s{count[0]}.scn"
        path.write_text(textwrap.dedent(text))
        monkeypatch.setenv("GPUMON_NVML_LIBRARY", os.path.abspath(FAKE_NVML_LIB))
        monkeypatch.setenv("FAKE_NVML_SCENARIO", str(path))
        return path
    monkeypatch.delenv("GPUMON_RUN_SOCKET", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return use


@pytest.fixture
def no_frameworks(monkeypatch):
    for m in [m for m in sys.modules if m == "torch" or m.startswith(("torch.", "paddle"))]:
        monkeypatch.delitem(sys.modules, m)


@pytest.fixture
def torch(no_frameworks):
    import torch
    torch._fake.GPUS = 1
    torch._fake.UUIDS = []
    torch._fake.reset()
    return torch


@pytest.fixture
def paddle(no_frameworks):
    import paddle
    paddle._fake.reset(1)
    return paddle


def child_env(tmp_path, scenario_text, **extra):
    """An environment for a child Python: the package, the fakes, the fake NVML."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    path = tmp_path / "child.scn"
    path.write_text(textwrap.dedent(scenario_text))
    e["GPUMON_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML_LIB)
    e["FAKE_NVML_SCENARIO"] = str(path)
    e["PYTHONPATH"] = os.pathsep.join([PYPATH, FAKE_TORCH, FAKE_PADDLE])
    e.pop("CUDA_VISIBLE_DEVICES", None)
    e.update(extra)
    return e


class Clock:
    """The monitor's clock (gpumon.monitor._now_ns), moved by the test: a training step takes
    step_s seconds of it."""

    def __init__(self, monkeypatch):
        import time
        import gpumon.monitor
        self.t = time.monotonic_ns()  # from now on: after the start a recording reads on the real clock
        monkeypatch.setattr(gpumon.monitor, "_now_ns", lambda: self.t)

    def advance(self, seconds):
        self.t += round(seconds * 1e9)
