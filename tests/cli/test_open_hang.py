# SPDX-License-Identifier: MIT
"""Opening while the driver hangs: gpumon gives up after 2 s (the bound the sampler uses for a
GPU's calls) with one line naming the call that did not return and a non-zero exit status, instead
of waiting for ever, whether nvmlInit hangs or a query of the device listing does."""
import pytest

from conftest import H200

HUNG_EXIT = 9  # the driver is there but does not answer (EXIT STATUS in gpumon(1))


@pytest.mark.parametrize("hang, call", [
    ("hang nvmlInit_v2\n", "nvmlInit_v2"),
    ("hang nvmlDeviceGetCount_v2\n", "nvmlDeviceGetCount_v2"),
    ("hang nvmlDeviceGetUUID gpu=0\n", "nvmlDeviceGetUUID"),
])
def test_list_gives_up_on_a_hung_driver(gpumon, hang, call):
    r = gpumon(["list"], scenario=H200 + hang, timeout=20)
    assert r.returncode == HUNG_EXIT, r.stderr
    assert r.stderr == f"gpumon: the NVIDIA driver did not answer within 2 s ({call})\n"
    assert r.stdout == ""


def test_old_driver_init_named(gpumon):
    r = gpumon(["query", "--query-gpu=memory.used", "--format=csv"], scenario=H200 + "hang nvmlInit\n", v1=True,
               timeout=20)
    assert r.returncode == HUNG_EXIT, r.stderr
    assert r.stderr == "gpumon: the NVIDIA driver did not answer within 2 s (nvmlInit)\n"


def test_a_slow_driver_within_the_bound_opens(gpumon):
    r = gpumon(["list"], scenario=H200 + "hang nvmlInit_v2 until=0.2\n", timeout=20)
    assert r.returncode == 0, r.stderr
    assert "NVIDIA H200" in r.stdout
