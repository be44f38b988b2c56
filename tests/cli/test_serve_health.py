# SPDX-License-Identifier: MIT
"""Memory health in `gpumon serve` (issue 13, point 4): ECC counts, remapped rows, retired pages and
XID errors as the fake driver gives them, each absent (never 0) where the driver does not offer it,
the library's verdict as gpumon_memory_health_problem, dcgm-exporter's names with --compat dcgm,
and a page that passes promtool in the native mode."""
import os

import pytest

import test_serve
from test_serve import Server, one, parse, promtool_problems, wait_for, PROMTOOL

TROUBLED = """\
    gpu 0 name="NVIDIA H200" total=141GiB used=1GiB ecc_cv_total=7 ecc_uv_total=2 ecc_ca_total=40 remap_corr=3 remap_pending=on
    gpu 1 name="NVIDIA H200" total=141GiB used=1GiB
    at 1 xid 0 79
    at 1.2 xid 0 79
    at 1.4 xid 0 48
    """


@pytest.fixture
def server(tmp_path):
    started = []

    def start(args=(), scenario=TROUBLED, library=None):
        saved = test_serve.FAKE_NVML_LIB
        if library:
            test_serve.FAKE_NVML_LIB = library
        try:
            s = Server(tmp_path, args, scenario)
        finally:
            test_serve.FAKE_NVML_LIB = saved
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def test_health_families(server):
    s = server()
    m = wait_for(lambda: (lambda m: m if "gpumon_xid_errors_total" in m and len(m["gpumon_xid_errors_total"]) == 2
                          and one(m, "gpumon_xid_errors_total", gpu=0, xid=79) == 2 else None)(parse(s.metrics())))
    assert m, s.metrics()
    assert one(m, "gpumon_ecc_errors_total", gpu=0, type="corrected", counter="volatile") == 7
    assert one(m, "gpumon_ecc_errors_total", gpu=0, type="uncorrected", counter="volatile") == 2
    assert one(m, "gpumon_ecc_errors_total", gpu=0, type="corrected", counter="aggregate") == 40
    assert one(m, "gpumon_ecc_errors_total", gpu=1, type="uncorrected", counter="volatile") == 0
    assert one(m, "gpumon_remapped_rows", gpu=0, cause="correctable") == 3
    assert one(m, "gpumon_remapped_rows_pending", gpu=0) == 1 and one(m, "gpumon_remapped_rows_pending", gpu=1) == 0
    assert one(m, "gpumon_remapped_rows_failed", gpu=0) == 0
    # the H200 retires no pages (it remaps rows): no series, never a 0
    assert "gpumon_retired_pages" not in m and "gpumon_retired_pages_pending" not in m
    # the library's verdict: the uncorrected errors and the pending remapping on GPU 0, nothing on GPU 1
    problems = sorted((lab["gpu"], lab["problem"]) for lab, v in m["gpumon_memory_health_problem"] if v == 1)
    assert problems == [("0", "ecc_uncorrected"), ("0", "remapped_rows_pending")]
    assert one(m, "gpumon_xid_errors_total", gpu=0, xid=48) == 1
    for lab, _ in m["gpumon_ecc_errors_total"]:
        assert set(lab) == {"gpu", "uuid", "type", "counter"}
    if PROMTOOL:
        assert promtool_problems(s.metrics()) == (0, "")


def test_clean_card_has_no_problem_series(server):
    s = server(scenario='gpu 0 name="NVIDIA H200" total=141GiB used=1GiB\n')
    m = wait_for(lambda: (lambda m: m if "gpumon_ecc_errors_total" in m else None)(parse(s.metrics())))
    assert m and "gpumon_memory_health_problem" not in m and "gpumon_xid_errors_total" not in m


def test_driver_without_health_calls(server):
    """The oldest drivers' library has none of the calls: no family at all, not zeros."""
    v1 = os.path.abspath(test_serve.FAKE_NVML_LIB).replace("libnvidia-ml-fake.so", "libnvidia-ml-fake-v1.so")
    assert os.path.exists(v1), v1
    s = server(library=v1)
    m = wait_for(lambda: (lambda m: m if "gpumon_memory_used_bytes" in m else None)(parse(s.metrics())))
    assert m
    for family in ("gpumon_ecc_errors_total", "gpumon_remapped_rows", "gpumon_remapped_rows_pending",
                   "gpumon_retired_pages", "gpumon_memory_health_problem", "gpumon_xid_errors_total"):
        assert family not in m, family


def test_dcgm_names(server):
    s = server(("--compat", "dcgm"))
    m = wait_for(lambda: (lambda m: m if "DCGM_FI_DEV_XID_ERRORS" in m and
                          one(m, "DCGM_FI_DEV_XID_ERRORS", gpu=0) == 48 else None)(parse(s.metrics())))
    assert m, s.metrics()
    assert one(m, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", gpu=0) == 7
    assert one(m, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu=0) == 2
    assert one(m, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", gpu=0) == 40
    assert one(m, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", gpu=0) == 3
    assert one(m, "DCGM_FI_DEV_ROW_REMAP_PENDING", gpu=0) == 1
    assert one(m, "DCGM_FI_DEV_ROW_REMAP_FAILURE", gpu=1) == 0
    assert "DCGM_FI_DEV_RETIRED_SBE" not in m  # no page retirement on this card: absent
    assert [lab["UUID"] for lab, _ in m["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]][0].startswith("GPU-")
