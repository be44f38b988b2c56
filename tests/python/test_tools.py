# SPDX-License-Identifier: MIT
"""The one-liners: get_gpu_info, log_memory, limit_pool, suggest_batch_size."""
import math
import os
import sys
import warnings

import pytest

from conftest import GIB, MIB, TOTAL, h200

import gpumon


def test_get_gpu_info(scenario):
    scenario(h200(used="40GiB", util=97) + 'gpu 1 name="B" total=80GiB used=1GiB util=3\n')
    assert gpumon.get_gpu_info() == (40960, TOTAL // MIB, 97)
    assert gpumon.get_gpu_info(device_id=1) == (1024, 81920, 3)


def test_get_gpu_info_bad_index(scenario):
    scenario(h200())
    with pytest.raises(ValueError, match=r"device_id 2 is out of range: this machine has 1 GPU \(0\.\.0\)"):
        gpumon.get_gpu_info(2)
    with pytest.raises(ValueError, match="device_id must be an int"):
        gpumon.get_gpu_info("0")


def test_get_gpu_info_util_unknown_is_none(scenario):
    scenario(h200() + "error nvmlDeviceGetUtilizationRates NOT_SUPPORTED\n")
    assert gpumon.get_gpu_info(0)[2] is None


def test_get_gpu_info_without_driver(scenario, monkeypatch, tmp_path):
    scenario(h200())
    monkeypatch.setenv("GPUMON_NVML_LIBRARY", str(tmp_path / "missing.so"))
    with pytest.raises(gpumon.Error, match="missing.so"):
        gpumon.get_gpu_info()


def test_log_memory(scenario, torch, caplog):
    import logging
    scenario(h200())
    caplog.set_level(logging.INFO, logger="gpumon")
    torch._fake.alloc(GIB)
    gpumon._tools._monitors.clear()
    s = gpumon.log_memory(7)
    s2 = gpumon.log_memory(8)
    assert s.step == 7 and s.allocated == GIB and s2.step == 8
    assert [r.getMessage().split(" |")[0] for r in caplog.records] == ["[Step 7] Used 1.00 GiB", "[Step 8] Used 1.00 GiB"]
    for m in gpumon._tools._monitors.values():
        m.close()
    gpumon._tools._monitors.clear()


ALLOC_VARS = ("FLAGS_allocator_strategy", "FLAGS_gpu_memory_limit_mb", "FLAGS_fraction_of_gpu_memory_to_use",
              "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "XLA_PYTHON_CLIENT_PREALLOCATE",
              "XLA_PYTHON_CLIENT_MEM_FRACTION", "TF_FORCE_GPU_ALLOW_GROWTH", "FLAGS_malloc_trunk_size")


@pytest.fixture
def clean_env(monkeypatch, no_frameworks):
    for v in ALLOC_VARS:
        monkeypatch.delenv(v, raising=False)
    for m in ("jax", "tensorflow"):
        monkeypatch.delitem(sys.modules, m, raising=False)
    return monkeypatch


def test_limit_pool_sets_each_framework(clean_env):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = gpumon.limit_pool(limit="8G", no_prealloc=True, expandable=True, max_split="512M", gpu_total="80G")
    assert got == {"FLAGS_allocator_strategy": "auto_growth", "FLAGS_gpu_memory_limit_mb": "8192",
                   "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:512",
                   "XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.100",
                   "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    for k, v in got.items():
        assert os.environ[k] == v
    msgs = [str(x.message) for x in w]
    assert any("PyTorch has no variable for a memory cap" in m for m in msgs)
    assert any("TensorFlow has no environment variable" in m for m in msgs)


def test_limit_pool_merges_users_torch_keys(clean_env):
    clean_env.setenv("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128,roundup_power2_divisions:4")
    got = gpumon.limit_pool(max_split="256M", frameworks="torch")
    assert got == {"PYTORCH_CUDA_ALLOC_CONF": "roundup_power2_divisions:4,max_split_size_mb:256"}


def test_limit_pool_fraction_has_no_effect_under_auto_growth(clean_env):
    with pytest.warns(UserWarning, match="fraction has no effect on Paddle's auto_growth allocator"):
        got = gpumon.limit_pool(fraction=0.5, frameworks=["paddle"])
    assert got == {"FLAGS_fraction_of_gpu_memory_to_use": "0.5"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpumon.limit_pool(fraction=0.5, paddle_strategy="naive_best_fit", frameworks=["paddle"])


def test_limit_pool_warns_when_too_late(clean_env, torch):
    with pytest.warns(UserWarning, match="torch is already imported: .* comes too late"):
        gpumon.limit_pool(expandable=True, frameworks=["torch"])


def test_limit_pool_names_a_nonexistent_paddle_flag(clean_env):
    clean_env.setenv("FLAGS_malloc_trunk_size", "64")
    with pytest.warns(UserWarning, match="FLAGS_malloc_trunk_size .* does not exist in Paddle"):
        gpumon.limit_pool(frameworks=["paddle"])


@pytest.mark.parametrize("kw, msg", [({"limit": "8X"}, "is not a size"), ({"limit": 0}, "more than 0"),
                                     ({"fraction": 1.5}, "fraction must be in"), ({"gc_threshold": 1}, "gc_threshold"),
                                     ({"frameworks": ["mxnet"]}, "unknown framework 'mxnet'"),
                                     ({"paddle_strategy": "fast"}, "paddle_strategy must be one of"),
                                     ({"no_prealloc": True, "paddle_strategy": "naive_best_fit"}, "contradicts")])
def test_limit_pool_bad_input(clean_env, kw, msg):
    with pytest.raises(ValueError, match=msg):
        gpumon.limit_pool(**kw)


def test_suggest_batch_size_exact_line():
    # peak = 2 GiB + 100 MiB per sample; room 10 GiB * 0.9 = 9216 MiB, of which the library keeps 1 %
    # free: (9216 - 92.16 - 2048) / 100 = 70.8; margin=0 still keeps the library's 1 %: 80.9
    pts = [(8, 2 * GIB + 800 * MIB), (16, 2 * GIB + 1600 * MIB), (32, 2 * GIB + 3200 * MIB)]
    assert gpumon.suggest_batch_size(pts, limit_bytes=10 * GIB) == 70
    assert gpumon.suggest_batch_size(pts, limit_bytes=10 * GIB, multiple_of=8) == 64
    assert gpumon.suggest_batch_size(pts, limit_bytes=10 * GIB, margin=0) == 80
    assert gpumon.suggest_batch_size(pts, limit_bytes=GIB) == 0


def test_suggest_batch_size_from_nvml_and_framework(scenario, torch):
    scenario(h200(used="100GiB"))
    torch._fake.alloc(3 * GIB)
    torch._fake.free(1 * GIB)      # 3 GiB reserved, reusable
    free = TOTAL - 100 * GIB - 644939776
    pts = [(1, GIB), (2, 2 * GIB)]   # 1 GiB a sample
    room = int((free + 3 * GIB) * 0.9)
    assert gpumon.suggest_batch_size(pts) == (room - math.ceil(room / 100)) // GIB


@pytest.mark.parametrize("pts, msg", [([(8, GIB)], "two or more different batch sizes"),
                                      ([(8, GIB), (8, 2 * GIB)], "two or more different"),
                                      ([(8, 2 * GIB), (16, GIB)], "does not grow"),
                                      ([(0, GIB), (8, 2 * GIB)], "positive")])
def test_suggest_batch_size_bad_points(pts, msg):
    with pytest.raises(ValueError, match=msg):
        gpumon.suggest_batch_size(pts, limit_bytes=80 * GIB)
