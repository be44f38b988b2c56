# SPDX-License-Identifier: MIT
"""gpumon.fit(step_fn) on the fake torch and the fake NVML: a step whose memory grows with the batch
(a line, batch sizes chosen by the library), faster than the batch (a quadratic), one that ignores
the batch, one that runs out of memory (an upper bound); and _gpumon.fit_batch/fit_next giving the
library's answer for the same runs."""
import pytest

from conftest import GIB, MIB, h200

import gpumon
from gpumon import _gpumon

WEIGHTS = 2 * GIB


def stepper(torch, need):
    """A training step that allocates need(batch) bytes of activations and frees them; calls counted."""
    calls = []

    def step(batch):
        calls.append(batch)
        torch._fake.alloc(need(batch))
        torch._fake.free(need(batch))
    return step, calls


@pytest.fixture
def gpu(scenario, torch):
    scenario(h200(pid=False))  # the fake NVML does not see the fake allocator: no figure for us
    torch._fake.alloc(WEIGHTS)
    return torch


def test_fit_a_line_with_the_batch_sizes_the_library_chooses(gpu):
    step, calls = stepper(gpu, lambda b: 100 * MIB * b)
    res = gpumon.fit(step)
    batches = [r["batch"] for r in res["runs"]]
    assert batches[:2] == [1, 2] and len(batches) == 3
    # the third: half of what the first two answered, as gpumon_fit_next says
    assert batches[2] == _gpumon.fit_next(res["runs"][:2], res["room_bytes"], 1)
    assert calls == [b for b in batches for _ in range(3)]
    assert res["shape"] == "linear" and res["note"] == ""
    assert res["fixed_bytes"] == pytest.approx(WEIGHTS, abs=1) and res["per_sample_bytes"] == pytest.approx(100 * MIB)
    assert all(not r["failed"] and r["peak_bytes"] == WEIGHTS + 100 * MIB * r["batch"] for r in res["runs"])
    room = res["room_bytes"]
    assert res["max_batch"] == (room - (room + 99) // 100 - WEIGHTS) // (100 * MIB)
    same = _gpumon.fit_batch(res["runs"], room)
    assert same == {k: v for k, v in res.items() if k not in ("runs", "room_bytes")}


def test_fit_quadratic(gpu):
    step, _ = stepper(gpu, lambda b: (10 * b + b * b) * MIB)
    res = gpumon.fit(step, batch_sizes=[32, 4, 16, 8], steps=1)
    assert [r["batch"] for r in res["runs"]] == [4, 8, 16, 32]
    assert res["shape"] == "quadratic"
    assert res["note"].startswith("the peak grows faster than the batch (as attention does with length)")
    assert res["per_sample2_bytes"] == pytest.approx(MIB, rel=1e-6)
    b = res["max_batch"]
    assert WEIGHTS + (10 * b + b * b) * MIB + res["margin_bytes"] <= res["room_bytes"]
    assert WEIGHTS + (10 * (b + 1) + (b + 1) ** 2) * MIB + res["room_bytes"] // 100 > res["room_bytes"]


def test_fit_of_a_step_that_ignores_the_batch(gpu):
    step, _ = stepper(gpu, lambda b: GIB)
    res = gpumon.fit(step)
    assert res["shape"] == "none" and res["max_batch"] == 0
    assert res["note"] == "the peak does not grow with the batch: is {batch} used?"
    # a peak that stays flat is first taken for weights that dwarf the activations: larger runs,
    # 8x each, until the runs span 1024x
    assert [r["batch"] for r in res["runs"]] == [1, 2, 16, 128, 1024]


def test_fit_an_out_of_memory_run_is_an_upper_bound(gpu):
    gpu.cuda.set_per_process_memory_fraction(20 * GIB / gpu._fake.TOTAL)
    # a workspace from batch 64 on that the line of 8 and 16 does not foresee
    step, calls = stepper(gpu, lambda b: 100 * MIB * b + (30 * GIB if b >= 64 else 0))
    res = gpumon.fit(step, batch_sizes=[8, 16, 64, 128])
    assert [(r["batch"], r["failed"]) for r in res["runs"]][:3] == [(8, False), (16, False), (64, True)]
    assert 128 not in calls and calls.count(64) == 1  # the first step of 64 ran out
    # then the bound is bisected by the library's sizes, each below 64, down to 1 %
    probes = [r["batch"] for r in res["runs"][3:]]
    assert probes and all(16 < b < 64 for b in probes) and probes[0] == 40
    assert res["shape"] == "linear" and res["max_batch"] == 63 and 63 in probes
    assert "batch 64 ran out of memory: the answer is the largest batch that ran below it (the fit alone " \
           "said 182)" in res["note"]
    assert res["room_bytes"] == 20 * GIB


def test_fit_passes_on_what_is_not_out_of_memory(gpu):
    def step(batch):
        raise KeyError("a bug in the step")
    with pytest.raises(KeyError):
        gpumon.fit(step)


@pytest.mark.parametrize("kw, msg", [({"steps": 0}, "steps must be"), ({"batch_sizes": [0, 8]}, "batch_sizes"),
                                     ({"batch_sizes": []}, "batch_sizes"), ({"multiple_of": 0}, "multiple_of")])
def test_fit_bad_arguments(gpu, kw, msg):
    with pytest.raises(ValueError, match=msg):
        gpumon.fit(lambda b: None, **kw)


def test_fit_batch_takes_dicts_and_tuples_and_says_what_it_refuses():
    runs = [(16, 2 * GIB + 1600 * MIB), {"batch": 32, "peak_bytes": 2 * GIB + 3200 * MIB, "failed": False}]
    res = _gpumon.fit_batch(runs, 10 * GIB, multiple_of=16)
    assert res["shape"] == "linear" and res["max_batch"] == 80 and res["extrapolated"] is False
    assert res["note"] == "two batch sizes fit any line: a run at a third would check it"
    with pytest.raises(ValueError, match="run 2: the batch must be a positive number"):
        _gpumon.fit_batch([(8, GIB), (-1, GIB)], 10 * GIB)
    with pytest.raises(ValueError, match="no runs to fit"):
        _gpumon.fit_batch([], 10 * GIB)
    with pytest.raises(ValueError, match="run 1: peak_bytes must be"):
        _gpumon.fit_batch([(8, "lots")], 10 * GIB)
    with pytest.raises(ValueError, match="multiple_of must be at least 1"):
        _gpumon.fit_batch(runs, 10 * GIB, multiple_of=0)
    assert _gpumon.fit_next([], 10 * GIB, 4) == 4


def test_run_and_room_are_the_librarys():
    """A run's peak and the room come from libgpumon (gpumon_fit_run_from, gpumon_job_room_get), as
    `gpumon fit` makes them: the reserve's peak plus what the process holds outside the allocator."""
    run = _gpumon.fit_run_from(8, nvml=3 * GIB, reserved=2 * GIB, allocated_peak=5 * GIB, reserved_peak=6 * GIB)
    assert run == {"batch": 8, "peak_bytes": 7 * GIB, "allocated_peak_bytes": 5 * GIB,
                   "reserved_peak_bytes": 6 * GIB, "failed": False}
    assert _gpumon.fit_run_from(4, True, nvml_peak=9 * GIB, reserved_peak=6 * GIB)["peak_bytes"] == 9 * GIB
    room = _gpumon.job_room(10 * GIB, 4 * GIB, 3 * GIB, 5 * GIB)
    assert room == {"room_bytes": 6 * GIB, "allocator_bytes": 5 * GIB, "outside_bytes": GIB}
    assert _gpumon.job_room(None, 4 * GIB) is None
    assert gpumon._tools.allocator_room(10 * GIB, 3 * GIB) == 13 * GIB


def test_outside_the_allocator_is_the_models():
    """Sample.unaccounted is the model's placing (gpumon_placed_split): never negative when NVML's
    figure lags below the allocator's reserve, but not known."""
    from gpumon.monitor import Sample
    assert _gpumon.outside_bytes(3 * GIB, 2 * GIB) == GIB
    assert Sample(process=3 * GIB, reserved=2 * GIB).unaccounted == GIB
    assert Sample(process=GIB, reserved=2 * GIB).unaccounted is None
    assert Sample(process=None, reserved=2 * GIB).unaccounted is None
