# SPDX-License-Identifier: MIT
"""One run, one answer: the same records read by `gpumon run` (its summary, live), `gpumon report
--json`, the exporter after `gpumon serve --replay`, `gpumon watch --replay --batch` and the Python
package's `gpumon.report()` give the same verdict, series, rate (within 1 %), peak with its owner, and
time to out-of-memory. The runs are made here with the fake NVML (a flat co-tenant, fast and slow
leaks, a staircase leak, a restarted step counter, out of memory next to a co-tenant, a short clean
run); the bundled recordings of examples/ are read by every front end that reads a file.

Environment (set by ctest): GPUMON_BIN, FAKE_NVML_LIB, PYTHONPATH (the built Python package),
GPUMON_SOURCE_DIR."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("GPUMON_SOURCE_DIR", os.path.join(HERE, "..", ".."))
GPUMON_BIN = os.environ.get("GPUMON_BIN", os.path.join(SOURCE, "build", "cli", "gpumon"))
FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB", os.path.join(SOURCE, "build", "tests", "fake_nvml",
                                                             "libnvidia-ml-fake.so"))
PY = sys.executable
MIB = 1 << 20
GIB = 1 << 30
TOTAL = 80 * GIB
RESERVED = 512 * MIB
COTENANT = 4000001  # a pid of another PID namespace: the co-tenant is never the job

needs_unshare = pytest.mark.skipif(
    subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True).returncode != 0,
    reason="needs unshare --pid (root)")


# ---- the fake runs -------------------------------------------------------------------------------

def device_lines(procs, seconds, dt=0.1):
    """`at` lines of a scenario from process figures procs(t) -> {pid: bytes or None}: each
    process and the GPU's used memory (the fake does not add them up: the scenario says it)."""
    lines, last = [], {}
    for i in range(int(seconds / dt) + 1):
        t = round(i * dt, 3)
        now = procs(t)
        for pid, used in now.items():
            if used is None:
                if last.get(pid) is not None:
                    lines.append(f"at {t} proc 0 {pid} gone")
            elif last.get(pid) != used:
                lines.append(f"at {t} proc 0 {pid} used={used}")
        for pid in last:
            if pid not in now and last[pid] is not None:
                lines.append(f"at {t} proc 0 {pid} gone")
        used = sum(v for v in now.values() if v is not None)
        if used != sum(v for v in last.values() if v is not None) or i == 0:
            lines.append(f"at {t} gpu 0 used={min(used, TOTAL - RESERVED)}")
        last = now
    return "\n".join(lines)


def scenario(procs, seconds):
    head = f"gpu 0 name=\"Fake GPU\" total={TOTAL} reserved={RESERVED} used=0\n"
    return head + device_lines(procs, seconds) + "\n"


# The job: reports framework samples over GPUMON_RUN_SOCKET (docs/run-protocol.md) at `rate` steps a
# second with allocated(step) bytes, then sleeps until `seconds`, then maybe prints an out-of-memory
# message and fails. Steps may restart (a list of segments).
JOB = textwrap.dedent("""
    import json, os, socket, sys, time
    seconds, rate, segments, oom = {seconds!r}, {rate!r}, {segments!r}, {oom!r}
    t0 = time.time()
    s = None
    if segments:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["GPUMON_RUN_SOCKET"])
        s.sendall((json.dumps({{"v": 1, "type": "hello", "pid": os.getpid(), "framework": "torch"}}) + "\\n").encode())
    k = 0
    for steps, base, per_step in segments:
        for step in range(steps):
            k += 1
            while time.time() < t0 + k / rate:
                time.sleep(0.002)
            alloc = base + per_step * step + ((step * 7919) % 5) * 8 * {mib}
            s.sendall((json.dumps({{"type": "sample", "t": time.time(), "step": step, "device": 0,
                                    "allocated": alloc, "reserved": alloc + 256 * {mib}}}) + "\\n").encode())
    while time.time() < t0 + seconds:
        time.sleep(0.05)
    if oom:
        sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\\n")
        sys.exit(1)
""")


def noise(t):
    return int((t * 10) % 3) * 16 * MIB


SCENARIOS = {
    # a clean job of 30 s next to a co-tenant that never changes
    "flat_cotenant": dict(
        procs=lambda t: {COTENANT: 20 * GIB, **({2: 4 * GIB + noise(t)} if t >= 1 else {})},
        seconds=30, rate=20, segments=[(580, 3 * GIB, 0)], oom=False, want="none"),
    # NVML only: the job grows 200 MiB a second next to a 20 GiB co-tenant
    "fast_leak_nvml": dict(
        procs=lambda t: {COTENANT: 20 * GIB, **({2: 2 * GIB + int((t - 1) * 200 * MIB)} if t >= 1 else {})},
        seconds=32, rate=0, segments=[], oom=False, want="leak"),
    # the framework's figure rises 1 MiB a step, 20 steps a second; NVML in 128 MiB stairs
    "slow_leak_framework": dict(
        procs=lambda t: {2: 3 * GIB + 128 * MIB * int(max(t - 1, 0) / 6)} if t >= 1 else {},
        seconds=36, rate=20, segments=[(680, 2 * GIB, 1 * MIB)], oom=False, want="leak"),
    # NVML only, a caching allocator's staircase: +128 MiB every 4 s
    "staircase_nvml": dict(
        procs=lambda t: {2: 3 * GIB + 128 * MIB * int(max(t - 1, 0) / 4)} if t >= 1 else {},
        seconds=40, rate=0, segments=[], oom=False, want="leak"),
    # the loop restarts its steps: a clean segment, then a leaking one
    "restarted_steps": dict(
        procs=lambda t: {2: 4 * GIB} if t >= 1 else {},
        seconds=44, rate=20, segments=[(400, 3 * GIB, 0), (420, 3 * GIB, 2 * MIB)], oom=False, want="leak"),
    # the job grows 2 GiB a second next to a 40 GiB co-tenant until the card is full, then dies
    "oom_cotenant": dict(
        procs=lambda t: {COTENANT: 40 * GIB,
                         **({2: min(2 * GIB + int((t - 1) * 1.25 * GIB), TOTAL - RESERVED - 40 * GIB)} if t >= 1 else {})},
        seconds=31, rate=0, segments=[], oom=True, want="leak"),
    # too short to tell
    "short_clean": dict(
        procs=lambda t: {2: 4 * GIB} if t >= 1 else {},
        seconds=8, rate=20, segments=[(140, 3 * GIB, 0)], oom=False, want="insufficient_data"),
}


def environment(tmp, name, spec):
    path = tmp / f"{name}.scn"
    path.write_text(scenario(spec["procs"], spec["seconds"] + 5))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(LC_ALL="C", GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(path))
    return e


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every scenario under `gpumon run`, all at once (each takes its own seconds of real time); the
    job is pid 2 of a new PID namespace, so the scenario's process 2 is the job."""
    tmp = tmp_path_factory.mktemp("runs")
    procs = {}
    for name, spec in SCENARIOS.items():
        job = JOB.format(seconds=spec["seconds"], rate=spec["rate"], segments=spec["segments"], oom=spec["oom"],
                         mib=MIB)
        rec = tmp / f"{name}.gpumon"
        procs[name] = (rec, subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", GPUMON_BIN, "run", "-o", str(rec), "--", PY, "-c", job],
            env=environment(tmp, name, spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = {}
    for name, (rec, p) in procs.items():
        stdout, stderr = p.communicate(timeout=180)
        out[name] = dict(rec=rec, summary=stderr, status=p.returncode)
    return out


# ---- what each front end says --------------------------------------------------------------------

def report_json(path):
    r = subprocess.run([GPUMON_BIN, "report", str(path), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def python_report(path):
    code = "import json, sys, gpumon; print(json.dumps(gpumon.report(sys.argv[1])))"
    r = subprocess.run([PY, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def close(a, b, rel=0.01):
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-9)


def same_verdict(a, b):
    """The facts every front end must agree on: verdict, series, rate, time to out-of-memory."""
    assert a["verdict"] == b["verdict"]
    assert a["series"] == b["series"]
    assert close(a["rate_bytes_per_step"], b["rate_bytes_per_step"])
    assert close(a["rate_bytes_per_second"], b["rate_bytes_per_second"])
    assert close(a["seconds_to_oom"], b["seconds_to_oom"])
    assert close(a["steps_to_oom"], b["steps_to_oom"])


def bundled():
    paths = []
    for d in ("examples/traces", "examples/recordings"):
        full = os.path.join(SOURCE, d)
        if os.path.isdir(full):
            paths += [os.path.join(full, f) for f in sorted(os.listdir(full)) if f.endswith(".gpumon")]
    return paths


# ---- the checks ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", bundled(), ids=os.path.basename)
def test_bundled_report_equals_python(path):
    """gpumon.report(path) is `gpumon report PATH --json`, whole."""
    assert python_report(path) == report_json(path)


@needs_unshare
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fake_runs_report_equals_python(runs, name):
    doc = report_json(runs[name]["rec"])
    assert python_report(runs[name]["rec"]) == doc
    assert doc["leak"]["verdict"] == SCENARIOS[name]["want"], json.dumps(doc["leak"])
