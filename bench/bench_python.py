#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What GPUMonitor costs a training loop: step() between samples (goal <= 1 us), a whole
sample() with each framework figure source, and the pieces of a sample (NVML device read, this
process's NVML figure). Runs on a GPU machine (real NVML, torch when installed) or, with --fake,
against the fake NVML for a smoke run.

    PYTHONPATH=build/python python3 bench/bench_python.py [--json out.json]
    PYTHONPATH=build/python python3 bench/bench_python.py --fake build/tests/fake_nvml/libnvidia-ml-fake.so
"""
import argparse
import json
import os
import platform
import sys
import tempfile
import timeit


def per_call_ns(fn, number, repeat=5):
    """The best of `repeat` runs of `number` calls, per call, in ns (the least disturbed run)."""
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", help="the fake libnvidia-ml to use (no GPU needed)")
    ap.add_argument("--calls", type=int, default=1_000_000, help="step() calls per run (default 1e6)")
    ap.add_argument("--json", help="write the figures here as JSON")
    a = ap.parse_args()
    if a.fake:
        scn = tempfile.NamedTemporaryFile("w", suffix=".scn", delete=False)
        scn.write(f"gpu 0 name=bench total=80GiB used=10GiB\nproc 0 {os.getpid()} used=3GiB\n")
        scn.close()
        os.environ["GPUMON_NVML_LIBRARY"] = os.path.abspath(a.fake)
        os.environ["FAKE_NVML_SCENARIO"] = scn.name
    import gpumon
    from gpumon import _gpumon

    res = {"python": platform.python_version(), "machine": platform.node(), "fake_nvml": bool(a.fake)}
    mon = gpumon.GPUMonitor(framework="none", interval=1 << 40, logger=False, min_headroom=None)
    res["step_between_samples_ns"] = per_call_ns(mon.step, a.calls)
    res["empty_method_call_ns"] = per_call_ns(lambda: None, a.calls)  # the floor of any Python call
    res["sample_none_us"] = per_call_ns(mon.sample, 2000) / 1e3
    mon.close()
    nvml = _gpumon.Nvml()
    res["nvml_device_sample_us"] = per_call_ns(lambda: nvml.sample(0), 5000) / 1e3
    res["nvml_process_used_us"] = per_call_ns(lambda: nvml.process_used(0, os.getpid()), 2000) / 1e3
    nvml.close()
    try:
        import torch
        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")
            tmon = gpumon.GPUMonitor(framework="torch", interval=1 << 40, logger=False, min_headroom=None)
            res["torch_version"] = torch.__version__
            res["step_between_samples_torch_ns"] = per_call_ns(tmon.step, a.calls)
            res["sample_torch_us"] = per_call_ns(tmon.sample, 2000) / 1e3
            res["torch_memory_stats_us"] = per_call_ns(lambda: torch.cuda.memory_stats(0), 2000) / 1e3
            res["torch_memory_allocated_us"] = per_call_ns(lambda: torch.cuda.memory_allocated(0), 2000) / 1e3
            tmon.close()
    except ImportError:
        pass
    res["goal_step_ns"] = 1000
    res["goal_met"] = res["step_between_samples_ns"] <= 1000
    for k, v in res.items():
        print(f"{k:34s} {v:.3f}" if isinstance(v, float) else f"{k:34s} {v}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0 if res["goal_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
