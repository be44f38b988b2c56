# SPDX-License-Identifier: MIT
"""GPUMonitor(prometheus_port=...): libgpumon's exporter serving /metrics from inside the training
process: the GPU and this process from NVML, this process's allocator figures at each sample, the
text format 0.0.4, and bad ports; the exporter stops with the monitor; gpumon serve's connection
limits (prometheus_limits), kept by the library as for gpumon serve (tests/cli/test_serve_hardening.py)."""
import http.client
import os
import re
import socket
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


def test_full_table_closes_the_longest_waiting(scenario, torch):
    """max_connections as gpumon serve --max-connections 8: the ninth connection is answered and
    the one that waited longest for a request made room, counted as gpumon serve counts it."""
    scenario(h200())
    with gpumon.GPUMonitor(logger=False, prometheus_port=0, prometheus_limits={"max_connections": 8}) as mon:
        port = int(mon.prometheus_address.rsplit(":", 1)[1])
        idle = []
        for k in range(8):  # eight connections that never send a request, from eight addresses
            c = socket.socket()
            c.bind((f"127.0.3.{k + 1}", 0))
            c.connect(("127.0.0.1", port))
            idle.append(c)
            time.sleep(0.05)
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", port), timeout=5)
        extra.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert re.match(rb"HTTP/1\.[01] 200", extra.recv(100))
        extra.close()
        idle[0].settimeout(5)
        assert idle[0].recv(100) == b""
        for c in idle:
            c.close()
        _, page = scrape(mon.prometheus_address)
        assert value(page, "gpumon_exporter_connections_closed_total", reason="full") >= 1


def test_per_address_cap_and_no_keepalive(scenario, torch):
    """max_connections_per_ip=2: a third connection from one address closes that address's oldest;
    keepalive=0: the connection is closed after each response (gpumon serve --keepalive 0)."""
    scenario(h200())
    limits = {"max_connections_per_ip": 2, "keepalive": 0, "timeout": 30}
    with gpumon.GPUMonitor(logger=False, prometheus_port=0, prometheus_limits=limits) as mon:
        port = int(mon.prometheus_address.rsplit(":", 1)[1])
        held = []
        for _ in range(3):
            c = socket.socket()
            c.bind(("127.0.0.7", 0))
            c.connect(("127.0.0.1", port))
            held.append(c)
            time.sleep(0.2)
        held[0].settimeout(5)
        assert held[0].recv(100) == b""
        held[1].settimeout(0.3)
        with pytest.raises(socket.timeout):
            held[1].recv(100)
        for c in held:
            c.close()
        h = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        h.request("GET", "/healthz")
        r = h.getresponse()
        r.read()
        assert r.status == 200 and r.getheader("Connection", "").lower() == "close"
        h.close()
        _, page = scrape(mon.prometheus_address)
        assert value(page, "gpumon_exporter_connections_closed_total", reason="per_address") == 1


def test_defaults_keep_the_connection_alive(scenario, torch):
    scenario(h200())
    with gpumon.GPUMonitor(logger=False, prometheus_port=0) as mon:
        h = http.client.HTTPConnection(*mon.prometheus_address.rsplit(":", 1), timeout=10)
        for _ in range(2):  # two requests on one connection
            h.request("GET", "/healthz")
            r = h.getresponse()
            r.read()
            assert r.status == 200 and r.getheader("Connection", "").lower() != "close"
        h.close()


@pytest.mark.parametrize("limits, said", [
    ({"max_connections": 0}, "max_connections must be a whole number from 1 to 65536 or None, got 0"),
    ({"max_connections_per_ip": 65537}, "max_connections_per_ip must be a whole number from 1 to 65536 or None, got 65537"),
    ({"timeout": "10"}, "timeout must be a whole number from 1 to 3600 or None, got '10'"),
    ({"timeout": True}, "timeout must be a whole number from 1 to 3600 or None, got True"),
    ({"keepalive": -1}, "keepalive must be a whole number from 0 to 3600 or None, got -1"),
    ({"max_conections": 8}, "prometheus_limits: no limit 'max_conections' (the limits: max_connections, "
                            "max_connections_per_ip, timeout, keepalive)"),
    ([8], "prometheus_limits must be a dict of max_connections, max_connections_per_ip, timeout, keepalive, got [8]"),
])
def test_bad_limits(scenario, torch, limits, said):
    scenario(h200())
    with pytest.raises(ValueError) as e:
        gpumon.GPUMonitor(logger=False, prometheus_port=0, prometheus_limits=limits)
    assert str(e.value) == said


def test_limits_need_the_exporter(scenario, torch):
    scenario(h200())
    with pytest.raises(ValueError) as e:
        gpumon.GPUMonitor(logger=False, prometheus_limits={"timeout": 5})
    assert str(e.value) == "prometheus_limits applies to the exporter: give prometheus_port too"
