# SPDX-License-Identifier: MIT
"""`gpumon serve` against the fake NVML: the /metrics page (format, values, peaks between scrapes,
lost GPUs, process limits, leak flags, NVML error counts, the peers' names), the other pages, the
options, and hardening: methods, header and body limits, malformed requests, the connection limit,
idle timeouts, a slow-loris client, 1,000 idle connections, TLS and basic auth."""
import base64
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN

GIB = 1 << 30
MIB = 1 << 20
UUID0 = "GPU-5d0c6a2e-1f3b-4c7d-9e8f-0a1b2c3d4e5f"
UUID1 = "GPU-a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"
SCN = f"""\
gpu 0 name="NVIDIA H100 80GB HBM3" uuid={UUID0} bus=00000000:1B:00.0 total=80GiB reserved=512MiB used=20GiB util=95 memutil=40 temp=62 power=550000 energy=1000000 sm=1980 mem=2619
gpu 1 name="NVIDIA H100 80GB HBM3" uuid={UUID1} bus=00000000:3C:00.0 total=80GiB reserved=512MiB used=10GiB util=30 memutil=10 temp=45 sm=1755 mem=2619
proc 0 4194242 used=20GiB name="python train.py"
proc 1 4194151 used=9.5GiB name="say \\"hi\\" \\\\ there"
proc 1 4194007 used=512MiB name=Xorg type=graphics
error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=1
"""
PROMTOOL = shutil.which("promtool")
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


# http.client and ssl are imported inside the tests that use them: at the top they would add ~8 MB
# to the pytest process while other test files run, and a test that measures its children's
# memory through fork (test_report.py's bounded-memory test) would count it.


class Server:
    """A running `gpumon serve`; .addr is "127.0.0.1:PORT"."""

    def __init__(self, tmp_path, args=(), scenario=SCN, expect_fail=False):
        scn = tmp_path / f"serve{time.monotonic_ns()}.scn"
        scn.write_text(textwrap.dedent(scenario))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
        env.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
        args = list(args)
        if not any(a.startswith("--listen") for a in args):
            args = ["--listen", "127.0.0.1:0"] + args
        self.p = subprocess.Popen([os.path.abspath(GPUMON_BIN), "serve"] + args, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if expect_fail:
            return
        line = self.p.stderr.readline()
        m = re.search(r"serving (https?)://(\S+)/metrics", line)
        assert m, line + self.p.stderr.read() if self.p.poll() is not None else line
        self.scheme, self.addr = m.group(1), m.group(2)
        self.host, self.port = self.addr.rsplit(":", 1)
        self.port = int(self.port)

    def get(self, path="/metrics", method="GET", headers=None, context=None):
        import http.client  # here, not at the top: see the note above Server
        if self.scheme == "https":
            c = http.client.HTTPSConnection(self.host, self.port, timeout=10, context=context)
        else:
            c = http.client.HTTPConnection(self.host, self.port, timeout=10)
        c.request(method, path, headers=headers or {})
        r = c.getresponse()
        body = r.read().decode()
        c.close()
        return r, body

    def metrics(self):
        r, body = self.get()
        assert r.status == 200, body
        return body

    def rss_kib(self):
        with open(f"/proc/{self.p.pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        return self.p.returncode


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*args, scenario=SCN):
        s = Server(tmp_path, args, scenario)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(body):
    """{name: [(labels dict, value)]}; checks the HELP/TYPE lines come once, before the samples."""
    out, seen_type = {}, set()
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            name = line.split()[2]
            assert name not in seen_type, f"family {name} twice"
            seen_type.add(name)
            continue
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"bad sample line {line!r}"
        name, labels, value = m.groups()
        assert name in seen_type or name.removesuffix("_total") in seen_type, f"{name} without TYPE"
        lab = {k: v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
               for k, v in LABEL.findall(labels or "")}
        out.setdefault(name, []).append((lab, float(value)))
    return out


def one(m, metric, /, **want):
    rows = [v for lab, v in m.get(metric, []) if all(lab.get(k) == str(x) for k, x in want.items())]
    assert len(rows) == 1, f"{metric} {want}: {rows} in {m.get(metric)}"
    return rows[0]


def wait_for(pred, timeout=10, step=0.1):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        r = pred()
        if r:
            return r
        time.sleep(step)
    return pred()


def promtool_problems(body):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip()


# ---- the page -------------------------------------------------------------------------------------

def test_metrics_values(serve):
    s = serve()
    r, body = s.get()
    assert r.status == 200 and r.getheader("Content-Type") == CONTENT_TYPE
    assert body.endswith("\n")
    m = parse(body)
    g0 = dict(gpu=0, uuid=UUID0, name="NVIDIA H100 80GB HBM3", pci_bus_id="00000000:1B:00.0")
    assert one(m, "gpumon_gpu_up", **g0) == 1
    assert one(m, "gpumon_memory_total_bytes", **g0) == 80 * GIB
    assert one(m, "gpumon_memory_used_bytes", **g0) == 20 * GIB
    assert one(m, "gpumon_memory_reserved_bytes", **g0) == 512 * MIB
    assert one(m, "gpumon_memory_free_bytes", **g0) == 80 * GIB - 512 * MIB - 20 * GIB
    assert one(m, "gpumon_utilization_ratio", **g0) == 0.95
    assert one(m, "gpumon_memory_utilization_ratio", **g0) == 0.40
    assert one(m, "gpumon_temperature_celsius", **g0) == 62
    assert one(m, "gpumon_power_watts", **g0) == 550
    assert one(m, "gpumon_energy_joules_total", **g0) == 1000
    assert one(m, "gpumon_clock_sm_hertz", **g0) == 1980e6
    assert one(m, "gpumon_clock_memory_hertz", uuid=UUID1) == 2619e6
    assert one(m, "gpumon_gpu_processes", uuid=UUID1) == 2
    # GPU 1 has no power sensor: the sample is left out, not shown as 0
    assert [lab["gpu"] for lab, _ in m["gpumon_power_watts"]] == ["0"]
    # no per-pid series by default: the processes summed by owner (these pids are in no /proc here:
    # another PID namespace, whose owner is not guessed)
    assert not [k for k in m if k.startswith("gpumon_process_")]
    assert one(m, "gpumon_owner_memory_used_bytes", uuid=UUID1, gpu=1, owner_kind="unresolved") == 10 * GIB
    assert one(m, "gpumon_owner_processes", uuid=UUID1, owner_kind="unresolved") == 2
    assert one(m, "gpumon_owner_leak_suspected", uuid=UUID0, owner_kind="unresolved") == 0
    assert "gpumon_process_memory_growth_bytes_per_second" not in m
    assert "gpumon_memory_oom_projected_seconds" not in m
    assert one(m, "gpumon_build_info")
    assert one(m, "gpumon_exporter_scrapes_total") >= 1
    assert "gpumon_exporter_scrape_duration_seconds" in m
    if PROMTOOL:
        assert promtool_problems(body) == (0, "")


def test_processes_opt_in(serve):
    """--processes all adds the per-pid families: escaped names, largest first."""
    body = serve("--processes", "all").metrics()
    m = parse(body)
    procs = m["gpumon_process_memory_used_bytes"]
    assert [int(lab["pid"]) for lab, _ in procs] == [4194242, 4194151, 4194007]
    assert one(m, "gpumon_process_memory_used_bytes", pid=4194151, uuid=UUID1, command='say "hi" \\ there') == 9.5 * GIB
    assert one(m, "gpumon_process_leak_suspected", pid=4194242) == 0
    assert one(m, "gpumon_owner_processes", uuid=UUID1, owner_kind="unresolved") == 2
    if PROMTOOL:
        assert promtool_problems(body) == (0, "")


def test_scrapes_counted_and_head(serve):
    s = serve()
    a = one(parse(s.metrics()), "gpumon_exporter_scrapes_total")
    b = one(parse(s.metrics()), "gpumon_exporter_scrapes_total")
    assert b == a + 1
    r, body = s.get(method="HEAD")
    assert r.status == 200 and body == "" and r.getheader("Content-Type") == CONTENT_TYPE


def test_other_pages(serve):
    s = serve()
    r, body = s.get("/healthz")
    assert (r.status, body) == (200, "ok\n")
    r, body = s.get("/")
    assert r.status == 200 and 'href="metrics"' in body and 'href="healthz"' in body
    r, body = s.get("/nope")
    assert r.status == 404


PEAK_SCN = """\
gpu 0 total=80GiB used=20GiB
at 1.0 gpu 0 used=60GiB
at 1.03 gpu 0 used=20GiB
proc 0 4194300 used=1GiB
at 1.0 proc 0 4194300 used=8GiB
at 1.25 proc 0 4194300 used=1GiB
"""


def test_peak_between_scrapes(serve):
    s = serve("--interval", "5", "--processes", "all", scenario=PEAK_SCN)
    time.sleep(1.6)
    m = parse(s.metrics())
    # a 30 ms spike long gone when scraped: the peak keeps its exact size
    assert one(m, "gpumon_memory_used_bytes", gpu=0) == 20 * GIB
    assert one(m, "gpumon_memory_used_peak_bytes", gpu=0) == 60 * GIB
    assert one(m, "gpumon_process_memory_used_bytes", pid=4194300) == 1 * GIB
    assert one(m, "gpumon_process_memory_used_peak_bytes", pid=4194300) == 8 * GIB


def test_peak_window_forgets(serve):
    s = serve("--interval", "5", "--peak-window", "1", scenario=PEAK_SCN)
    time.sleep(1.6)
    assert one(parse(s.metrics()), "gpumon_memory_used_peak_bytes", gpu=0) == 60 * GIB
    # after two windows (2 s) without the spike, the peak is the current figure again
    assert wait_for(lambda: one(parse(s.metrics()), "gpumon_memory_used_peak_bytes", gpu=0) == 20 * GIB, 4)


def test_lost_gpu_stays_as_down(serve):
    s = serve("--processes", "all", scenario=SCN + "at 1 lost 1\n")
    assert one(parse(s.metrics()), "gpumon_gpu_up", gpu=1) == 1
    assert wait_for(lambda: one(parse(s.metrics()), "gpumon_gpu_up", gpu=1) == 0, 5)
    m = parse(s.metrics())
    assert one(m, "gpumon_gpu_up", gpu=0) == 1
    assert [lab["gpu"] for lab, _ in m["gpumon_memory_used_bytes"]] == ["0"]
    assert all(lab["gpu"] == "0" for lab, _ in m["gpumon_process_memory_used_bytes"])


def test_process_limit_and_gone(serve):
    scn = SCN + "at 1 proc 0 4194242 gone\n"
    s = serve("--processes", "2", scenario=scn)
    m = parse(s.metrics())
    assert [int(lab["pid"]) for lab, _ in m["gpumon_process_memory_used_bytes"]] == [4194242, 4194151]
    assert len(m["gpumon_process_leak_suspected"]) == 2
    assert one(m, "gpumon_gpu_processes", gpu=1) == 2  # all of them are counted
    assert wait_for(lambda: "4194242" not in s.metrics(), 5)
    m = parse(s.metrics())
    assert [int(lab["pid"]) for lab, _ in m["gpumon_process_memory_used_bytes"]] == [4194151, 4194007]


def test_processes_none(serve):
    """none is the default: no per-pid series, the per-owner ones and the count stay."""
    body = serve("--processes", "none").metrics()
    assert "gpumon_process_" not in body and "pid=" not in body
    assert "gpumon_gpu_processes" in body and "gpumon_owner_memory_used_bytes" in body
    assert "gpumon_memory_used_bytes" in body


def test_container_id_of_own_process(serve, tmp_path):
    """A process that is in our /proc gets its user and command line from there."""
    me = os.getpid()
    s = serve("--processes", "all", scenario=f"gpu 0\nproc 0 {me} used=1GiB\n")
    lab = parse(s.metrics())["gpumon_process_memory_used_bytes"][0][0]
    import pwd
    assert lab["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert "python" in lab["command"] or "pytest" in lab["command"]
    assert len(lab["command"]) <= 64 + 3
    with open(f"/proc/{me}/cgroup") as f:
        ids = re.findall(r"[0-9a-f]{64}", f.read())
    assert lab.get("container_id", "") == (ids[0] if ids else "")


# a co-tenant holds 20 GiB of the 80 GiB GPU; the job leaks 20 MiB a second from 10 GiB
LEAK_SCN = """\
gpu 0 total=80GiB used=30GiB
proc 0 4194400 used=10GiB grow=20MiB name="python leaky.py"
proc 0 4194401 used=20GiB name="python cotenant.py"
"""


def test_leak_flag_rate_and_oom(serve):
    """The leak flag, its rate and the time to out-of-memory are the run model's: the GPU's free
    memory over the summed rate of the processes whose leak alerts (the co-tenant's memory is
    not room the job has)."""
    s = serve("--processes", "all", scenario=LEAK_SCN)
    m = wait_for(lambda: (lambda m: m if one(m, "gpumon_process_leak_suspected", pid=4194400) == 1 else None)(parse(s.metrics())), 40, 0.5)
    assert m, "no leak alert within 40 s"
    assert one(m, "gpumon_process_leak_suspected", pid=4194401) == 0
    rate = one(m, "gpumon_process_memory_growth_bytes_per_second", pid=4194400)
    assert abs(rate - 20 * MIB) < 0.02 * 20 * MIB
    assert [lab["pid"] for lab, _ in m["gpumon_process_memory_growth_bytes_per_second"]] == ["4194400"]
    oom = one(m, "gpumon_memory_oom_projected_seconds", gpu=0)
    free = one(m, "gpumon_memory_free_bytes", gpu=0)
    assert free == 50 * GIB
    assert abs(oom - free / (20 * MIB)) < 0.02 * free / (20 * MIB), (oom, free / (20 * MIB))


# ---- replay ---------------------------------------------------------------------------------------

TRACES = os.path.join(os.path.dirname(__file__), "../../examples/traces")

def model_document(path):
    """The run model's document for a recording: gpumon report --json prints the library's document
    (tests/cli/test_report.py holds that it is the library's, byte for byte)."""
    import json
    r = subprocess.run([GPUMON_BIN, "report", str(path), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def replay(tmp_path):
    started = []

    def start(path, *args):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
        # no driver at all: a replay does not need one
        env.update(GPUMON_NVML_LIBRARY=str(tmp_path / "no-libnvidia-ml.so"), LC_ALL="C")
        p = subprocess.Popen([os.path.abspath(GPUMON_BIN), "serve", "--listen", "127.0.0.1:0", "--replay", path,
                              *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(p)
        line = p.stderr.readline()
        m = re.search(r"serving http://(\S+)/metrics as at the end of the recording", line)
        assert m, line + (p.stderr.read() if p.poll() is not None else "")
        import urllib.request
        with urllib.request.urlopen(f"http://{m.group(1)}/metrics", timeout=10) as resp:
            return parse(resp.read().decode())
    yield start
    for p in started:
        p.terminate()
        assert p.wait(timeout=10) == 0


def test_replay_gauges_are_the_documents(replay):
    """`serve --replay` of a run whose job leaks: the leak gauge, its rate and the projected seconds
    are what the run model's document says of the file."""
    path = os.path.join(TRACES, "leak_30s.gpumon")
    doc = model_document(path)
    m = replay(path, "--processes", "all")
    assert one(m, "gpumon_gpu_up", gpu=0) == 1
    assert one(m, "gpumon_memory_total_bytes", gpu=0, uuid=doc["devices"][0]["uuid"]) == doc["devices"][0]["total_bytes"]
    procs = {(s["series"]["dev"], s["series"]["pid"]): s for s in doc["series"] if s["series"]["kind"] == "process"}
    assert procs, doc["series"]
    for lab, flag in m["gpumon_process_leak_suspected"]:
        s = procs[(int(lab["gpu"]), int(lab["pid"]))]
        assert flag == (1 if s["alert"] else 0), (lab, s)
    job = procs[(0, 1053)]
    assert job["verdict"] == "leak" and job["alert"]
    assert one(m, "gpumon_process_leak_suspected", pid=1053) == 1
    # the owner's flag is the same verdict: 1 where one of its processes on that GPU alerts
    flags = {}
    for lab, flag in m["gpumon_process_leak_suspected"]:
        flags[lab["gpu"]] = max(flags.get(lab["gpu"], 0), flag)
    assert {lab["gpu"]: v for lab, v in m["gpumon_owner_leak_suspected"]} == flags
    assert abs(one(m, "gpumon_process_memory_growth_bytes_per_second", pid=1053) - job["rate_bytes_per_second"]) < 0.06
    # a run: the GPU's time to out-of-memory is the run's verdict
    run = doc["leak"]
    assert run["alert"] and run["series"]["dev"] == 0 and run["seconds_to_oom"] is not None
    assert abs(one(m, "gpumon_memory_oom_projected_seconds", gpu=0) - run["seconds_to_oom"]) < 0.06
    assert "gpumon_sampler_samples_total" not in m  # no sampler: left out, not 0


def test_replay_of_a_clean_run_has_no_projection(replay):
    path = os.path.join(TRACES, "clean_30s.gpumon")
    doc = model_document(path)
    assert doc["leak"]["verdict"] == "none"
    m = replay(path)
    assert "gpumon_memory_oom_projected_seconds" not in m
    assert all(v == 0 for _, v in m.get("gpumon_process_leak_suspected", []))
    assert "gpumon_process_memory_growth_bytes_per_second" not in m


@pytest.mark.parametrize("args,msg", [
    (["--interval", "5"], "--interval applies to sampling this machine; --replay serves the recording's figures"),
    (["--no-energy"], "--no-energy applies to sampling this machine"),
])
def test_replay_refuses_live_options(gpumon, args, msg):
    r = gpumon(["serve", "--replay", os.path.join(TRACES, "leak_30s.gpumon")] + args)
    assert r.returncode == 2 and msg in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["-1", "0", "x", "100001", ""])
def test_processes_bad_value_names_the_accepted_forms(gpumon, value):
    r = gpumon(["serve", "--processes", value], scenario="gpu 0\n")
    assert r.returncode == 2
    assert r.stderr == (f"gpumon: serve: --processes '{value}': expected all, none or a whole number "
                        "from 1 to 100000\n")


def test_replay_of_what_is_not_a_recording(gpumon, tmp_path):
    bad = tmp_path / "not.gpumon"
    bad.write_text("hello")
    r = gpumon(["serve", "--listen", "127.0.0.1:0", "--replay", str(bad)], library=str(tmp_path / "none.so"))
    assert r.returncode == 255 and "serve: cannot replay the recording:" in r.stderr and "not a gpumon recording" in r.stderr
    r = gpumon(["serve", "--listen", "127.0.0.1:0", "--replay", str(tmp_path / "missing.gpumon")])
    assert r.returncode == 255 and "missing.gpumon" in r.stderr


def test_nvml_errors_counted(serve):
    scn = SCN + "error nvmlDeviceGetComputeRunningProcesses_v3 UNKNOWN gpu=0 from=0.5\n"
    s = serve(scenario=scn)
    n = wait_for(lambda: [v for lab, v in parse(s.metrics()).get("gpumon_nvml_errors_total", [])], 5)
    assert n and n[0] >= 1
    m = parse(s.metrics())
    assert m["gpumon_nvml_errors_total"][0][0]["function"].startswith("nvmlDeviceGetComputeRunningProcesses")


def test_compat_dcgm(serve):
    body = serve("--compat", "dcgm").metrics()
    m = parse(body)
    lab = dict(gpu=0, UUID=UUID0, pci_bus_id="00000000:1B:00.0", device="nvidia0", modelName="NVIDIA H100 80GB HBM3",
               Hostname=socket.gethostname())
    assert one(m, "DCGM_FI_DEV_FB_USED", **lab) == 20 * 1024
    assert one(m, "DCGM_FI_DEV_FB_TOTAL", **lab) == 80 * 1024
    assert one(m, "DCGM_FI_DEV_FB_RESERVED", **lab) == 512
    assert one(m, "DCGM_FI_DEV_GPU_UTIL", **lab) == 95
    assert one(m, "DCGM_FI_DEV_GPU_TEMP", gpu=1) == 45
    assert one(m, "DCGM_FI_DEV_POWER_USAGE", gpu=0) == 550
    assert "gpumon_memory_used_bytes" in m  # gpumon's own stay
    if PROMTOOL:
        # dcgm-exporter's own label names modelName and Hostname are camelCase; promtool says so
        # and nothing else: they are kept so that dashboards made for dcgm-exporter work unchanged
        rc, out = promtool_problems(body)
        assert all("label names should be written in 'snake_case' not 'camelCase'" in l for l in out.splitlines()), out
        rc, out = promtool_problems(body.replace("modelName=", "model_name=").replace("Hostname=", "hostname="))
        assert (rc, out) == (0, "")


def test_compat_nvidia_smi(serve):
    body = serve("--compat", "nvidia_smi", "--processes", "all").metrics()
    m = parse(body)
    assert one(m, "nvidia_smi_memory_used_bytes", uuid=UUID0) == 20 * GIB
    assert one(m, "nvidia_smi_memory_total_bytes", uuid=UUID1) == 80 * GIB
    assert one(m, "nvidia_smi_utilization_gpu_ratio", uuid=UUID0) == 0.95
    assert one(m, "nvidia_smi_index", uuid=UUID1) == 1
    assert one(m, "nvidia_smi_gpu_info", uuid=UUID0, name="NVIDIA H100 80GB HBM3") == 1
    assert one(m, "nvidia_smi_compute_app_used_memory_bytes", pid=4194242, uuid=UUID0,
               process_name="python train.py") == 20 * GIB
    if PROMTOOL:
        assert promtool_problems(body) == (0, "")


# ---- options --------------------------------------------------------------------------------------

def test_help(gpumon):
    r = gpumon(["serve", "--help"])
    assert r.returncode == 0
    for opt in ("--listen", "--interval", "--processes", "--compat", "--tls-cert", "--basic-auth-file",
                "--insecure-listen", "--max-connections", "--max-connections-per-ip", "--timeout", "--keepalive",
                "--peak-window", "--replay FILE", "19400"):
        assert opt in r.stdout


@pytest.mark.parametrize("args,msg", [
    (["--compat", "prom"], "--compat 'prom'"),
    (["--processes", "-3"], "--processes '-3'"),
    (["--interval", "0"], "--interval '0'"),
    (["--listen", "nocolon"], "expected ADDR:PORT"),
    (["--listen", "127.0.0.1:99999"], "port above 65535"),
    (["--tls-cert", "/x"], "--tls-cert and --tls-key go together"),
    (["--bogus"], "unknown option '--bogus'"),
    (["--max-connections-per-ip", "0"], "--max-connections-per-ip '0'"),
    (["--keepalive", "-1"], "--keepalive '-1'"),
    (["--timeout", "0"], "--timeout '0'"),
])
def test_bad_options(gpumon, args, msg):
    from conftest import H200
    r = gpumon(["serve"] + args, scenario=H200)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr


def test_non_loopback_refused(gpumon):
    from conftest import H200
    r = gpumon(["serve", "--listen", "0.0.0.0:0"], scenario=H200)
    assert r.returncode == 2
    assert "not a loopback address" in r.stderr and "--insecure-listen" in r.stderr


def test_non_loopback_with_insecure_listen(serve):
    s = serve("--listen", "0.0.0.0:0", "--insecure-listen")
    assert s.addr.startswith("0.0.0.0:")
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
    c.request("GET", "/healthz")
    assert c.getresponse().status == 200


def test_port_in_use(serve, gpumon):
    from conftest import H200
    s = serve()
    r = gpumon(["serve", "--listen", s.addr], scenario=H200)
    assert r.returncode != 0 and f"cannot listen on {s.addr}: Address already in use" in r.stderr


def test_sigterm_exits_zero(serve):
    s = serve()
    assert s.stop() == 0


# ---- hardening ------------------------------------------------------------------------------------

def raw(s, data, read=True, timeout=5):
    c = socket.create_connection((s.host, s.port), timeout=timeout)
    c.sendall(data)
    if not read:
        return c
    out = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    c.close()
    return out


def status_of(resp):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", resp)
    return int(m.group(1)) if m else None


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE"])
def test_only_get_and_head(serve, method):
    s = serve()
    r, _ = s.get(method=method)
    assert r.status == 405 and r.getheader("Allow") == "GET, HEAD"
    assert s.metrics()


@pytest.mark.parametrize("req", [
    b"GARBAGE\r\n\r\n",
    b"GET /metrics HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\n\r\n",                 # HTTP/1.1 without Host
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
    b"\x00\x01\x02\xff\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
])
def test_malformed_requests(serve, req):
    s = serve()
    resp = raw(s, req, timeout=2)  # a kept-alive connection stays open after its answer
    assert status_of(resp) in (None, 200, 400, 404, 405, 413, 501, 505), resp[:200]
    assert s.metrics()


@pytest.mark.parametrize("length,status", [(b"-5", 400), (b"5000000000000000000000", 413), (b"12abc", 400)])
def test_bad_content_length_one_status_line(serve, length, status):
    # one status line and a Content-Length that is the body's (an HTTP server once wrote its status
    # line and headers twice here); a length beyond any body allowed is too large, whatever its digits
    s = serve()
    resp = raw(s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: " + length + b"\r\n\r\n")
    assert resp.count(b"HTTP/1.") == 1, resp
    assert status_of(resp) == status, resp
    head, _, body = resp.partition(b"\r\n\r\n")
    assert int(re.search(rb"Content-Length: (\d+)", head).group(1)) == len(body), resp
    assert s.metrics()


def test_keep_alive(serve):
    import http.client
    s = serve()
    c = http.client.HTTPConnection(s.host, s.port, timeout=10)
    sock = None
    for path in ("/metrics", "/healthz", "/metrics", "/", "/nope"):
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        assert r.getheader("Connection") is None, (path, r.getheaders())
        assert not r.will_close, path
        assert sock is None or c.sock is sock, f"{path}: a new connection"
        sock = c.sock
    c.request("HEAD", "/metrics")
    r = c.getresponse()
    r.read()
    assert r.status == 200 and c.sock is sock
    c.close()
    # HTTP/1.0 without Keep-Alive (closed after its answer, which needs no header to say so), or a
    # request that asks, still closes: raw() returns at the end of the stream, or after 5 s
    t0 = time.monotonic()
    resp = raw(s, b"GET /healthz HTTP/1.0\r\n\r\n")
    assert status_of(resp) == 200 and resp.endswith(b"ok\n") and time.monotonic() - t0 < 4, resp
    t0 = time.monotonic()
    resp = raw(s, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert b"Connection: close" in resp and time.monotonic() - t0 < 4, resp


def test_keepalive_zero_closes_after_each_response(serve):
    import http.client
    s = serve("--keepalive", "0")
    c = http.client.HTTPConnection(s.host, s.port, timeout=10)
    c.request("GET", "/metrics")
    r = c.getresponse()
    r.read()
    assert r.status == 200 and r.getheader("Connection") == "close"
    c.close()


def test_oversized_headers(serve):
    # refused (the HTTP server says 400 for a head over its 16 KiB, as for any head it cannot take)
    # and closed without reading the rest
    s = serve()
    resp = raw(s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 100000 + b"\r\n\r\n")
    assert status_of(resp) in (400, 413, 414, 431), resp[:200]
    resp = raw(s, b"GET /" + b"a" * 100000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(resp) in (400, 413, 414, 431), resp[:200]
    assert s.metrics()


def test_request_body_not_kept(serve):
    s = serve()
    before = s.rss_kib()
    for _ in range(5):
        c = raw(s, b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n", read=False)
        try:
            for _ in range(200):
                c.sendall(b"x" * 65536)
        except OSError:
            pass  # the server answered and closed without reading 50 MB: what we want
        c.close()
    assert s.metrics()
    assert s.rss_kib() - before < 16 * 1024


def test_connection_limit(serve):
    # twenty connections that send nothing, from twenty addresses, at a table of 8: one slot is kept
    # free by closing the connection that has waited longest, so the table never holds more than 8
    # and the newest seven stay
    s = serve("--max-connections", "8")
    conns = []
    for k in range(20):
        c = socket.socket()
        c.bind((f"127.0.5.{k + 1}", 0))
        c.connect((s.host, s.port))
        conns.append(c)
        time.sleep(0.02)
    time.sleep(0.5)
    still_open = []
    for c in conns:
        c.settimeout(0.1)
        try:
            still_open.append(c.recv(1) != b"")
        except socket.timeout:
            still_open.append(True)
    assert still_open == [False] * 13 + [True] * 7, still_open
    m = parse(s.metrics())  # one more connection: the oldest of the seven makes room
    assert one(m, "gpumon_exporter_connections") == 7
    assert one(m, "gpumon_exporter_connections_closed_total", reason="full") == 14
    for c in conns:
        c.close()


def test_idle_timeout(serve):
    s = serve("--timeout", "1")
    c = socket.create_connection((s.host, s.port), timeout=5)
    c.sendall(b"GET /met")  # half a request, then silence
    t0 = time.monotonic()
    assert c.recv(100) == b""  # closed by the server
    assert 0.5 <= time.monotonic() - t0 <= 4
    c.close()


def test_slow_loris(serve):
    s = serve()
    stop = threading.Event()
    conns = [socket.create_connection((s.host, s.port)) for _ in range(100)]

    def drip():
        while not stop.is_set():
            for c in conns:
                try:
                    c.sendall(b"X")
                except OSError:
                    pass
            stop.wait(0.5)
    for c in conns:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    t = threading.Thread(target=drip)
    t.start()
    try:
        for _ in range(20):
            t0 = time.monotonic()
            assert "gpumon_memory_used_bytes" in s.metrics()
            assert time.monotonic() - t0 < 1.0
            time.sleep(0.1)
    finally:
        stop.set()
        t.join()
        for c in conns:
            c.close()


def test_thousand_idle_connections(serve):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 1200:
        pytest.skip(f"the open-file limit ({hard}) is below 1,200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    s = serve()
    s.metrics()
    base = s.rss_kib()
    conns = []
    try:
        for i in range(1000):  # from 20 addresses: 50 each, under the per-address cap
            c = socket.socket()
            c.bind((f"127.0.6.{i // 50 + 1}", 0))
            c.connect((s.host, s.port))
            conns.append(c)
        for i, c in enumerate(conns):  # some idle with half a request
            if i % 2:
                c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        time.sleep(0.5)
        assert one(parse(s.metrics()), "gpumon_exporter_connections") == 1001  # all held
        for _ in range(10):
            t0 = time.monotonic()
            assert "gpumon_memory_used_bytes" in s.metrics()
            assert time.monotonic() - t0 < 1.0
        rss = s.rss_kib()
        # bounded: 1,000 connections cost at most ~16 KiB each (the per-connection memory limit)
        assert rss - base < 24 * 1024, (base, rss)
        assert rss < 64 * 1024, rss
    finally:
        for c in conns:
            c.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert s.metrics()


# ---- TLS and basic auth -----------------------------------------------------------------------------

@pytest.fixture
def tls_files(tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    auth = tmp_path / "auth"
    auth.write_text("prom:s3cret pass\n")
    return str(cert), str(key), str(auth)


def test_tls_and_basic_auth(serve, tls_files):
    import ssl
    cert, key, auth = tls_files
    s = serve("--listen", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key, "--basic-auth-file", auth)
    assert s.scheme == "https"
    s.host = "127.0.0.1"
    ctx = ssl.create_default_context(cafile=cert)
    ctx.check_hostname = False
    r, _ = s.get(context=ctx)
    assert r.status == 401 and r.getheader("WWW-Authenticate").startswith("Basic")
    bad = base64.b64encode(b"prom:s3cret pasS").decode()
    assert s.get(context=ctx, headers={"Authorization": f"Basic {bad}"})[0].status == 401
    bad = base64.b64encode(b"prom:s3cret pass2").decode()
    assert s.get(context=ctx, headers={"Authorization": f"Basic {bad}"})[0].status == 401
    good = base64.b64encode(b"prom:s3cret pass").decode()
    r, body = s.get(context=ctx, headers={"Authorization": f"Basic {good}"})
    assert r.status == 200 and "gpumon_memory_used_bytes" in body
    # plain HTTP on the TLS port gets no metrics
    assert b"gpumon_memory" not in raw(s, b"GET /metrics HTTP/1.0\r\n\r\n")


def test_basic_auth_alone_on_loopback(serve, tls_files):
    _, _, auth = tls_files
    s = serve("--basic-auth-file", auth)
    assert s.get()[0].status == 401
    good = base64.b64encode(b"prom:s3cret pass").decode()
    assert good.endswith("==")
    assert s.get(headers={"Authorization": f"Basic {good}"})[0].status == 200
    assert s.get(headers={"Authorization": f"basic  {good}"})[0].status == 200  # scheme is case-blind
    assert s.get(headers={"Authorization": f"Basic {good.rstrip('=')}"})[0].status == 200  # unpadded
    # what follows the padding, a bad padding or a stray character is not the password
    for bad in (good + "junk", good + "=", good + "==", good[:-1], good[:-2] + "=A", good[:-2] + "A=",
                good + " x", good.replace("c", "c.", 1), "=" + good, good[:-3] + "x==", good + "AAAA"):
        assert s.get(headers={"Authorization": f"Basic {bad}"})[0].status == 401, bad


def test_tls_bad_files(gpumon, tmp_path):
    from conftest import H200
    (tmp_path / "junk.pem").write_text("not a certificate\n")
    r = gpumon(["serve", "--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "junk.pem"), "--tls-key",
                str(tmp_path / "junk.pem")], scenario=H200)
    assert r.returncode != 0 and "cannot start the HTTP server" in r.stderr
    r = gpumon(["serve", "--basic-auth-file", str(tmp_path / "missing")], scenario=H200)
    assert r.returncode != 0 and "cannot open the basic auth file" in r.stderr
    if not shutil.which("openssl"):
        return
    from conftest import self_signed
    for name in ("a", "b"):  # two certificates, two keys
        self_signed(tmp_path, name, cn=name)
    r = gpumon(["serve", "--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "a.pem"), "--tls-key",
                str(tmp_path / "b.key")], scenario=H200)
    assert r.returncode != 0 and "the TLS certificate and key are not a matching pair" in r.stderr, r.stderr
    r = gpumon(["serve", "--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "a.pem"), "--tls-key",
                str(tmp_path / "a.pem")], scenario=H200)
    assert r.returncode != 0 and "the TLS key file holds no unencrypted PEM private key" in r.stderr, r.stderr
    # an encrypted key is refused (gpumon asks for no passphrase)
    subprocess.run(["openssl", "pkey", "-in", str(tmp_path / "a.key"), "-aes256", "-passout", "pass:secret", "-out",
                    str(tmp_path / "enc.key")], check=True, capture_output=True)
    r = gpumon(["serve", "--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "a.pem"), "--tls-key",
                str(tmp_path / "enc.key")], scenario=H200)
    assert r.returncode != 0 and "the TLS key file holds no unencrypted PEM private key" in r.stderr, r.stderr


def test_tls_certificate_with_its_chain(serve, tmp_path):
    # the certificate file may carry the chain after the certificate: served whole
    import ssl
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    ossl = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ossl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=gpumon test CA", "-keyout", str(tmp_path / "ca.key"),
         "-out", str(tmp_path / "ca.pem"), "-addext", "basicConstraints=critical,CA:TRUE")
    ossl("req", *ec, "-subj", "/CN=localhost", "-keyout", str(tmp_path / "leaf.key"), "-out", str(tmp_path / "leaf.csr"))
    (tmp_path / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", str(tmp_path / "leaf.csr"), "-CA", str(tmp_path / "ca.pem"), "-CAkey",
         str(tmp_path / "ca.key"), "-CAcreateserial", "-days", "1", "-out", str(tmp_path / "leaf.pem"), "-extfile",
         str(tmp_path / "ext"))
    chain = tmp_path / "chain.pem"
    chain.write_text((tmp_path / "leaf.pem").read_text() + (tmp_path / "ca.pem").read_text())
    s = serve("--tls-cert", str(chain), "--tls-key", str(tmp_path / "leaf.key"))
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    r, body = s.get(context=ctx)
    assert r.status == 200 and "gpumon_memory_used_bytes" in body
    with socket.create_connection((s.host, s.port)) as c, ctx.wrap_socket(c, server_hostname="127.0.0.1") as t:
        assert t.version() in ("TLSv1.2", "TLSv1.3")


def test_man_page_documents_serve():
    man = os.environ.get("GPUMON_MAN", os.path.join(os.path.dirname(__file__), "../../man/gpumon.1"))
    text = subprocess.run(["groff", "-man", "-Tutf8", man], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "GROFF_NO_SGR": "1"}).stdout
    text = " ".join(re.sub(r".\x08", "", text).replace("\u2010\n", "").split())
    for word in ["gpumon serve", "--listen", "--insecure-listen", "--basic-auth-file", "--compat", "19400",
                 "--peak-window", "/healthz", "--replay", "--max-connections", "--max-connections-per-ip", "--timeout",
                 "--keepalive"]:
        assert word in text, word
