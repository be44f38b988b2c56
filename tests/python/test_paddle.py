# SPDX-License-Identifier: MIT
"""The Paddle adapter against the stand-in that mirrors Paddle's documented API: the four
figures, every device argument form, releases with and without the reset functions."""
import importlib
import os
import sys

import pytest

from conftest import GIB, MIB, h200

import gpumon

CUDA_FNS = {"memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"}


def test_four_figures(scenario, paddle):
    scenario(h200(proc_used="4GiB"))
    paddle._fake.alloc(3 * GIB)
    paddle._fake.free(1 * GIB)
    with gpumon.GPUMonitor(framework="paddle", interval=1, logger=False) as mon:
        s = mon.sample()
    assert (s.allocated, s.peak, s.reserved, s.max_reserved) == (2 * GIB, 3 * GIB, 3 * GIB, 3 * GIB)
    assert s.framework == "paddle" and s.process == 4 * GIB and s.unaccounted == GIB


@pytest.mark.parametrize("form, want", [(None, 0), (1, 1), ("gpu:1", 1), ("cuda:1", 1), ("place", 1)])
def test_device_forms(scenario, paddle, form, want):
    scenario(h200() + 'gpu 1 name="B" total=80GiB\n')
    paddle._fake.reset(2)
    paddle._fake.alloc(5 * MIB, dev=want)
    if form == "place":
        form = paddle.CUDAPlace(1)
    with gpumon.GPUMonitor(device=form, framework="paddle", interval=1, logger=False) as mon:
        assert mon.device == want and mon.nvml_index == want
        assert mon.sample().allocated == 5 * MIB
    # the adapter always hands Paddle a form Paddle documents (an int), for every call it makes
    used = {(f, d) for f, d in paddle._fake.calls if f in CUDA_FNS}
    assert used == {(f, want) for f in CUDA_FNS}


def test_current_device_from_paddle(scenario, paddle):
    scenario(h200() + 'gpu 1 name="B" total=80GiB\n')
    paddle._fake.reset(2)
    paddle.device.set_device("gpu:1")
    with gpumon.GPUMonitor(framework="paddle", logger=False) as mon:
        assert mon.device == 1


@pytest.mark.parametrize("form", [2, "gpu:2", -1])
def test_device_out_of_range(scenario, paddle, form):
    scenario(h200() + 'gpu 1 name="B" total=80GiB\n')
    paddle._fake.reset(2)
    with pytest.raises(ValueError, match=r"out of range: Paddle sees 2 GPUs \(0\.\.1\)"):
        gpumon.GPUMonitor(device=form, framework="paddle", logger=False)


@pytest.mark.parametrize("form", ["tpu:0", "xpu:1", 1.5, object()])
def test_device_of_a_wrong_kind(scenario, paddle, form):
    scenario(h200())
    with pytest.raises(ValueError, match="device"):
        gpumon.GPUMonitor(device=form, framework="paddle", logger=False)


def test_section_exact_with_reset_functions(scenario, paddle):
    scenario(h200())
    assert hasattr(paddle.device.cuda, "reset_max_memory_allocated")
    paddle._fake.alloc(8 * GIB)
    paddle._fake.free(8 * GIB)      # an old peak far above the block's
    paddle._fake.alloc(1 * GIB)
    with gpumon.GPUMonitor(framework="paddle", logger=False) as mon:
        with mon.section("attention") as s:
            paddle._fake.alloc(700 * MIB)
            paddle._fake.free(700 * MIB)
    assert s.exact and s.start_bytes == GIB and s.peak_delta_bytes == 700 * MIB
    assert ("reset_max_memory_allocated", 0) in paddle._fake.calls


@pytest.fixture
def old_paddle(no_frameworks, monkeypatch):
    """A Paddle release before 3.0: no reset functions."""
    monkeypatch.setenv("FAKE_PADDLE_NO_RESET", "1")
    import paddle
    assert not hasattr(paddle.device.cuda, "reset_max_memory_allocated")
    paddle._fake.reset(1)
    return paddle


def test_old_paddle_works_without_reset(scenario, old_paddle):
    scenario(h200())
    old_paddle._fake.alloc(GIB)
    with gpumon.GPUMonitor(framework="paddle", interval=1, logger=False) as mon:
        assert mon.sample().allocated == GIB
        # a block that sets a new all-time peak: still exact
        with mon.section("grows") as s1:
            old_paddle._fake.alloc(500 * MIB)
            old_paddle._fake.free(500 * MIB)
        assert s1.exact and s1.peak_delta_bytes == 500 * MIB
        # a block under the old peak: only a lower bound, and said so
        with mon.section("under") as s2:
            old_paddle._fake.alloc(100 * MIB)
            old_paddle._fake.free(100 * MIB)
        assert not s2.exact and s2.peak_delta_bytes == 0
    assert not any(f.startswith("reset") for f, _ in old_paddle._fake.calls)


def test_paddle_without_gpus(scenario, paddle):
    scenario(h200())
    paddle._fake.reset(0)
    with pytest.raises(ValueError, match="Paddle sees no GPU"):
        gpumon.GPUMonitor(framework="paddle", logger=False)


def test_paddle_not_installed(scenario, no_frameworks, monkeypatch):
    scenario(h200())
    monkeypatch.setattr(sys, "path", [p for p in sys.path if "fake_paddle" not in p])
    with pytest.raises(ValueError, match="framework='paddle' but paddle cannot be imported"):
        gpumon.GPUMonitor(framework="paddle", logger=False)
