# SPDX-License-Identifier: MIT
"""GPUMonitor(prometheus_port=...): libgpumon's exporter serving /metrics from inside the training
process: the GPU and this process from NVML, this process's allocator figures at each sample, the
text format 0.0.4, and bad ports; the exporter stops with the monitor."""
import os
import shutil
import subprocess
import urllib.error
import urllib.request
import time

import pytest

from conftest import GIB, MIB, TOTAL, h200

import gpumon


def scrape(address, path="/metrics"):
    with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as r:
        return r.headers.get("Content-Type"), r.read().decode()


def scrape_until(address, name, timeout=5.0):
    """scrapes until the page holds series name (the collector renders a few times a second)"""
    deadline = time.monotonic() + timeout
    while True:
        ctype, page = scrape(address)
        if value(page, name) is not None or time.monotonic() > deadline:
            return ctype, page
        time.sleep(0.05)


def value(page, name, **labels):
    """the value of the series name{labels...} (labels given must match), or None"""
    for line in page.splitlines():
        if not line.startswith(name + "{") and line.split(" ")[0] != name:
            continue
        head, _, v = line.rpartition(" ")
        if all(f'{k}="{w}"' in head for k, w in labels.items()):
            return float(v)
    return None


def test_metrics_from_the_training_process(scenario, torch):
    scenario(h200(used="40GiB", proc_used="3GiB"))
    with gpumon.GPUMonitor(interval=1, logger=False, prometheus_port=0) as mon:
        addr = mon.prometheus_address
        assert addr.startswith("127.0.0.1:") and int(addr.rsplit(":", 1)[1]) > 0
        torch._fake.alloc(512 * MIB)
        mon.step()
        ctype, page = scrape_until(addr, "gpumon_framework_allocated_bytes")
        assert ctype.startswith("text/plain") and "version=0.0.4" in ctype
        assert value(page, "gpumon_memory_total_bytes", gpu="0") == TOTAL
        assert value(page, "gpumon_memory_used_bytes", gpu="0") == 40 * GIB
        assert value(page, "gpumon_process_memory_used_bytes", pid=str(os.getpid())) == 3 * GIB
        pid = str(os.getpid())
        allocated = [l for l in page.splitlines() if l.startswith("gpumon_framework_") and f'pid="{pid}"' in l]
        assert allocated, page[-2000:]
        a = next(l for l in allocated if l.startswith("gpumon_framework_allocated_bytes"))
        assert float(a.rsplit(" ", 1)[1]) == mon.last.allocated
        assert 'framework="torch"' in a
        ctype, health = scrape(addr, "/healthz")
        assert health.strip()
    with pytest.raises(urllib.error.URLError):
        scrape(addr)  # stopped with the monitor


@pytest.mark.skipif(not shutil.which("promtool"), reason="promtool (Debian prometheus) not installed")
def test_page_is_promtool_clean(scenario, torch, tmp_path):
    scenario(h200())
    with gpumon.GPUMonitor(interval=1, logger=False, prometheus_port=0) as mon:
        torch._fake.alloc(64 * MIB)
        mon.step()
        _, page = scrape_until(mon.prometheus_address, "gpumon_framework_allocated_bytes")
    r = subprocess.run(["promtool", "check", "metrics"], input=page, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "" and r.stderr.strip() == "", r.stdout + r.stderr


@pytest.mark.parametrize("port", [-1, 65536, "9000", 1.5, True])
def test_bad_port(scenario, torch, port):
    scenario(h200())
    with pytest.raises(ValueError, match="prometheus_port"):
        gpumon.GPUMonitor(logger=False, prometheus_port=port)


def test_port_in_use_is_a_clear_error(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(logger=False, prometheus_port=0) as first:
        port = int(first.prometheus_address.rsplit(":", 1)[1])
        with pytest.raises(OSError) as e:
            gpumon.GPUMonitor(logger=False, prometheus_port=port)
        assert str(port) in str(e.value)
