# SPDX-License-Identifier: MIT
"""GPUMonitor with the PyTorch stand-in and the fake NVML: what a sample holds, when samples are
taken, the log line, sections, summary, framework choice, devices, NVML-less mode."""
import logging
import os
import sys
import warnings

import pytest

from conftest import GIB, MIB, TOTAL, UUID, h200

import gpumon


def test_sample_holds_both_views(scenario, torch):
    scenario(h200(used="40GiB", proc_used="3GiB", util=97))
    torch._fake.alloc(1 * GIB)
    lines = []
    with gpumon.GPUMonitor(interval=1, logger=lines.append) as mon:
        s = mon.sample()
    assert s.framework == "torch" and s.device == 0 and s.step == 0
    assert s.allocated == GIB and s.peak == GIB and s.reserved == GIB
    assert s.process == 3 * GIB
    assert s.unaccounted == 2 * GIB
    assert s.device_used == 40 * GIB and s.device_reserved == 644939776 and s.device_total == TOTAL
    assert s.device_free == TOTAL - 40 * GIB - 644939776
    assert s.util_gpu == 97
    assert lines == ["[Step 0] Used 1.00 GiB | Peak 1.00 GiB | Reserved 1.00 GiB | Process 3.00 GiB "
                     "(2.00 GiB outside the allocator) | GPU 40.0 GiB of 140 GiB | util 97 %"]


def test_step_samples_every_interval_and_only_then(scenario, torch):
    scenario(h200())
    lines = []
    mon = gpumon.GPUMonitor(interval=3, logger=lines.append)
    got = [mon.step() for _ in range(9)]
    assert [s.step if s else None for s in got] == [None, None, 3, None, None, 6, None, None, 9]
    assert torch._fake.stats_calls == 3  # the framework is asked only when sampling
    assert [l.split("]")[0] for l in lines] == ["[Step 3", "[Step 6", "[Step 9"]
    mon.close()


def test_process_not_on_gpu_is_none_not_zero(scenario, torch):
    scenario(h200(pid=False))
    with gpumon.GPUMonitor(interval=1, logger=False) as mon:
        s = mon.sample()
    assert s.process is None and s.unaccounted is None
    assert "Process" not in s.line()


def test_default_logger_is_gpumon_logger(scenario, torch, caplog):
    scenario(h200())
    caplog.set_level(logging.INFO, logger="gpumon")
    with gpumon.GPUMonitor(interval=1) as mon:
        mon.step()
    assert any(r.name == "gpumon" and r.getMessage().startswith("[Step 1] Used") for r in caplog.records)


def test_bad_logger_is_refused(scenario, torch):
    scenario(h200())
    with pytest.raises(ValueError, match="logger"):
        gpumon.GPUMonitor(logger=42)


def test_close_is_idempotent_and_stops_sampling(scenario, torch):
    scenario(h200())
    mon = gpumon.GPUMonitor(interval=1, logger=False)
    mon.close()
    mon.close()
    assert mon.step() is None
    with pytest.raises(ValueError, match="closed"):
        mon.sample()


def test_peak_survives_section_resets(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(interval=1, logger=False) as mon:
        torch._fake.alloc(4 * GIB)
        torch._fake.free(4 * GIB)          # run peak 4 GiB
        with mon.section("small") as sec:   # resets torch's peak counter
            torch._fake.alloc(100 * MIB)
            torch._fake.free(100 * MIB)
        assert sec.exact and sec.peak_delta_bytes == 100 * MIB
        assert torch.cuda.max_memory_allocated() == 100 * MIB
        s = mon.sample()
        assert s.peak == 4 * GIB            # the monitor's own peak stays whole-run
        assert mon.summary()["peak_allocated_bytes"] == 4 * GIB


def test_nested_sections(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(interval=1, logger=False) as mon:
        torch._fake.alloc(1 * GIB)
        with mon.section("layer") as outer:
            torch._fake.alloc(300 * MIB)            # outer peak so far 1 GiB + 300 MiB
            torch._fake.free(300 * MIB)
            with mon.section("attention") as inner:
                torch._fake.alloc(200 * MIB)
                torch._fake.free(200 * MIB)
            torch._fake.alloc(50 * MIB)
        assert inner.peak_delta_bytes == 200 * MIB
        assert outer.peak_delta_bytes == 300 * MIB
        assert outer.end_bytes == GIB + 50 * MIB
        summ = mon.summary()["sections"]
        assert summ == {"attention": {"count": 1, "max_peak_delta_bytes": 200 * MIB},
                        "layer": {"count": 1, "max_peak_delta_bytes": 300 * MIB}}


def test_section_without_framework_uses_nvml_and_says_not_exact(scenario, no_frameworks):
    scenario(h200(proc_used="2GiB"))
    with gpumon.GPUMonitor(framework="none", logger=False) as mon:
        with mon.section("x") as s:
            pass
    assert s.exact is False and s.start_bytes == 2 * GIB and s.peak_delta_bytes == 0


def test_section_needs_a_name(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(logger=False) as mon:
        with pytest.raises(ValueError, match="name"):
            mon.section("")


def test_auto_picks_the_imported_framework(scenario, no_frameworks):
    scenario(h200())
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.framework == "none"
        s = mon.sample()
        assert s.allocated is None and s.peak is None and s.reserved is None and s.process == 3 * GIB
    import paddle  # noqa: F401
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.framework == "paddle"
    import torch  # noqa: F401
    with gpumon.GPUMonitor(logger=False) as mon:
        assert mon.framework == "torch"


def test_none_framework_feeds_leak_detector_with_process_figure(scenario, no_frameworks):
    """Without a framework the model judges this process's NVML figure (the job's series), fed at
    each of its changes and at each of the GPU's rows: three samples give it a point each at least."""
    scenario(h200())
    with gpumon.GPUMonitor(framework="none", interval=1, logger=False) as mon:
        for _ in range(3):
            mon.step()
        v = mon.leak()
        assert v["series"]["kind"] == "job" and v["series"]["dev"] == 0 and v["points"] >= 3


@pytest.mark.parametrize("dev", [1, "cuda:1", "gpu:1"])
def test_device_forms_map_to_nvml_by_index(scenario, torch, dev):
    scenario(h200() + 'gpu 1 name="Other" total=80GiB used=1GiB\n' + f"proc 1 {os.getpid()} used=5GiB\n")
    torch._fake.GPUS = 2
    torch._fake.reset()
    with gpumon.GPUMonitor(device=dev, logger=False) as mon:
        assert mon.device == 1 and mon.nvml_index == 1
        assert mon.sample().process == 5 * GIB


def test_torch_device_object(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(device=torch.device("cuda", 0), logger=False) as mon:
        assert mon.device == 0


def test_device_mapped_by_uuid_when_torch_tells_it(scenario, torch):
    # NVML lists the H200 second; torch's device 0 is the H200 (by UUID)
    scenario('gpu 0 name="Other" total=80GiB\n'
             f'gpu 1 name="NVIDIA H200" uuid={UUID} total={TOTAL}\nproc 1 {os.getpid()} used=7GiB\n')
    torch._fake.UUIDS = [UUID[4:]]
    with gpumon.GPUMonitor(device=0, logger=False) as mon:
        assert mon.nvml_index == 1 and mon.sample().process == 7 * GIB


def test_device_mapped_through_cuda_visible_devices(scenario, torch, monkeypatch):
    scenario(h200() + 'gpu 1 name="Other" total=80GiB\n')
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    with gpumon.GPUMonitor(device=0, logger=False) as mon:
        assert mon.nvml_index == 1 and mon.sample().device_total == 80 * GIB


def test_no_driver_torch_goes_on_without_nvml(scenario, torch, monkeypatch, tmp_path):
    scenario(h200())
    monkeypatch.setenv("GPUMON_NVML_LIBRARY", str(tmp_path / "no-such-libnvidia-ml.so.1"))
    torch._fake.alloc(GIB)
    with pytest.warns(gpumon.GpumonWarning, match="NVML is not available"):
        mon = gpumon.GPUMonitor(interval=1, logger=False)
    s = mon.sample()
    assert s.allocated == GIB and s.process is None and s.device_total is None
    mon.close()


def test_nvml_refused_for_permission_goes_on_without_nvml(scenario, torch):
    """A container without access to the driver's device files: the framework's figures only."""
    scenario("init_error NO_PERMISSION\n" + h200())
    torch._fake.alloc(GIB)
    with pytest.warns(gpumon.GpumonWarning, match="NVML is not available.*Insufficient Permissions"):
        mon = gpumon.GPUMonitor(interval=1, logger=False)
    s = mon.sample()
    assert s.allocated == GIB and s.process is None and s.device_total is None
    mon.close()


def test_no_driver_without_framework_is_a_clear_error(scenario, no_frameworks, monkeypatch, tmp_path):
    scenario(h200())
    monkeypatch.setenv("GPUMON_NVML_LIBRARY", str(tmp_path / "no-such-libnvidia-ml.so.1"))
    with pytest.raises(gpumon.Error, match="no-such-libnvidia-ml.so.1") as e:
        gpumon.GPUMonitor(framework="none", logger=False)
    assert e.value.status == -3


def test_lost_gpu_mid_run_keeps_framework_view(scenario, torch):
    scenario(h200())
    torch._fake.alloc(GIB)
    with gpumon.GPUMonitor(interval=1, logger=False) as mon:
        assert mon.sample().device_total == TOTAL

        class Lost:
            closed = False

            def sample(self, *a):
                e = gpumon.Error("nvmlDeviceGetMemoryInfo_v2 on GPU 0: GPU is lost")
                e.status = -6
                raise e

            def close(self):
                self.closed = True
        lost = mon._nvml = Lost()
        with pytest.warns(gpumon.GpumonWarning, match="NVML stopped answering .*GPU is lost"):
            s = mon.sample()
        assert s.allocated == GIB and s.device_total is None and lost.closed
        assert mon.sample().device_total is None   # one warning, not one per sample


def test_summary(scenario, torch):
    scenario(h200(proc_used="3GiB"))
    with gpumon.GPUMonitor(interval=2, logger=False) as mon:
        for i in range(10):
            torch._fake.alloc(10 * MIB)
            mon.step()
        s = mon.summary()
    assert s["steps"] == 10 and s["samples"] == 5
    assert s["peak_allocated_bytes"] == 100 * MIB
    assert s["peak_process_bytes"] == 3 * GIB
    assert s["device_total_bytes"] == TOTAL
    assert s["leak"]["verdict"] == "insufficient_data" and s["leak"]["points"] == 5
    assert s["leak"]["series"] == {"kind": "framework", "dev": 0, "pid": os.getpid(), "device": 0, "segment": 0,
                                   "framework": "torch", "rank": None}
    assert s["alerts"] == [] and s["failed_sinks"] == []
    assert "10 steps, 5 samples" in mon.summary_text()
    assert (f"leak: not enough data to tell (5 points of the framework's allocated memory (torch, pid {os.getpid()}))"
            in mon.summary_text())


def test_help_is_useful():
    doc = gpumon.GPUMonitor.__doc__
    for word in ("interval", "framework", "tensorboard", "record", "on_alert", "AlertEvent", "oom_within_steps",
                 "rank", "GPUMON_RUN_SOCKET"):
        assert word in doc
    assert "leak" in gpumon.AlertEvent.__doc__ and "oom_projected" in gpumon.AlertEvent.__doc__
    assert gpumon.__version__.count(".") == 2
    import inspect
    sig = inspect.signature(gpumon.GPUMonitor)
    assert list(sig.parameters)[:10] == ["device", "interval", "framework", "logger", "csv", "jsonl",
                                         "tensorboard", "record", "on_alert", "min_headroom"]


def test_section_every(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(logger=False) as mon:
        got = []
        for i in range(7):
            with mon.section("attn", every=3) as s:
                torch._fake.alloc(MIB * (i + 1))
                torch._fake.free(MIB * (i + 1))
            got.append(s.peak_delta_bytes)
        assert got == [MIB, None, None, 4 * MIB, None, None, 7 * MIB]
        assert mon.summary()["sections"]["attn"] == {"count": 3, "max_peak_delta_bytes": 7 * MIB}
        with pytest.raises(ValueError, match="every must be a positive int"):
            mon.section("x", every=0)
