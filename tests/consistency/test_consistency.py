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
import subprocess
import sys
import textwrap

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import frontends as fe  # noqa: E402

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


# gpumon run is pid 1 of a new PID namespace, the thread that opens the driver (bounded in time) took
# pid 2, and the job is pid 3: the scenario can name the job's pid before it starts.
JOB_PID = 3


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
    if oom == "inside":  # what the monitor inside a torch job sends at out-of-memory, then torch's words
        import gpumon._gpumon as g
        snap = open(os.environ["SNAPSHOT_FIXTURE"]).read()
        condensed = g.snapshot_condense(snap, 0, 60 * {gib}, os.getpid())
        s.sendall((json.dumps({{"type": "oom", "t": time.time(), "framework": "torch", "device": 0,
                                "request": 60 * {gib}, "free": 64 * {gib}, "capacity": 79 * {gib},
                                "allocated": 9 * {gib}, "reserved": 9 * {gib} + 256 * {mib}}}) + "\\n").encode())
        s.sendall((json.dumps({{"type": "snapshot", "t": time.time(), "snapshot": json.loads(condensed)}}) + "\\n").encode())
        time.sleep(0.3)
        sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 60.00 GiB. GPU 0 has a total "
                         "capacity of 79.00 GiB of which 64.00 GiB is free. Of the allocated memory 9.00 GiB is "
                         "allocated by PyTorch, and 256.00 MiB is reserved by PyTorch but unallocated.\\n")
        sys.exit(1)
    if oom:
        sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\\n")
        sys.exit(1)
""")


def noise(t):
    return int((t * 10) % 3) * 16 * MIB


SCENARIOS = {
    # a clean job of 30 s next to a co-tenant that never changes
    "flat_cotenant": dict(
        procs=lambda t: {COTENANT: 20 * GIB, **({JOB_PID: 4 * GIB + noise(t)} if t >= 1 else {})},
        seconds=30, rate=20, segments=[(580, 3 * GIB, 0)], oom=False, want="none"),
    # NVML only: the job grows 200 MiB a second next to a 20 GiB co-tenant
    "fast_leak_nvml": dict(
        procs=lambda t: {COTENANT: 20 * GIB, **({JOB_PID: 2 * GIB + int((t - 1) * 200 * MIB)} if t >= 1 else {})},
        seconds=32, rate=0, segments=[], oom=False, want="leak"),
    # the framework's figure rises 1 MiB a step, 20 steps a second; NVML in 128 MiB stairs
    "slow_leak_framework": dict(
        procs=lambda t: {JOB_PID: 3 * GIB + 128 * MIB * int(max(t - 1, 0) / 6)} if t >= 1 else {},
        seconds=36, rate=20, segments=[(680, 2 * GIB, 1 * MIB)], oom=False, want="leak"),
    # NVML only, a caching allocator's staircase: +128 MiB every 4 s
    "staircase_nvml": dict(
        procs=lambda t: {JOB_PID: 3 * GIB + 128 * MIB * int(max(t - 1, 0) / 4)} if t >= 1 else {},
        seconds=40, rate=0, segments=[], oom=False, want="leak"),
    # the loop restarts its steps: a clean segment, then a leaking one
    "restarted_steps": dict(
        procs=lambda t: {JOB_PID: 4 * GIB} if t >= 1 else {},
        seconds=44, rate=20, segments=[(400, 3 * GIB, 0), (420, 3 * GIB, 2 * MIB)], oom=False, want="leak"),
    # the job grows 2 GiB a second next to a 40 GiB co-tenant until the card is full, then dies
    "oom_cotenant": dict(
        procs=lambda t: {COTENANT: 40 * GIB,
                         **({JOB_PID: min(2 * GIB + int((t - 1) * 1.25 * GIB), TOTAL - RESERVED - 40 * GIB)} if t >= 1 else {})},
        seconds=31, rate=0, segments=[], oom=True, want="leak"),
    # steady training, 3 GiB outside the allocator, then an evaluation asks for 60 GiB: the monitor inside
    # the job reports the figures and the allocator's snapshot, torch prints its message
    "oom_inside": dict(
        procs=lambda t: {JOB_PID: 9 * GIB + 256 * MIB + 3 * GIB + noise(t)} if t >= 1 else {},
        seconds=14, rate=10, segments=[(120, 9 * GIB, 0)], oom="inside", want="none"),
    # too short to tell: 20 steps (a verdict needs 32), 6 s of NVML figures (it needs 16)
    "short_clean": dict(
        procs=lambda t: {JOB_PID: 4 * GIB} if t >= 1 else {},
        seconds=6, rate=5, segments=[(20, 3 * GIB, 0)], oom=False, want="insufficient_data"),
}


def environment(tmp, name, spec):
    path = tmp / f"{name}.scn"
    path.write_text(scenario(spec["procs"], spec["seconds"] + 5))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(LC_ALL="C", GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(path),
             SNAPSHOT_FIXTURE=os.path.join(SOURCE, "tests", "fixtures", "snapshot", "torch-2.11-history.json"))
    return e


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Every scenario under `gpumon run`, all at once (each takes its own seconds of real time); the
    job is pid JOB_PID of a new PID namespace, so the scenario's process JOB_PID is the job."""
    tmp = tmp_path_factory.mktemp("runs")
    procs = {}
    for name, spec in SCENARIOS.items():
        job = JOB.format(seconds=spec["seconds"], rate=spec["rate"], segments=spec["segments"], oom=spec["oom"],
                         mib=MIB, gib=GIB)
        rec = tmp / f"{name}.gpumon"
        procs[name] = (rec, subprocess.Popen(
            ["unshare", "--pid", "--fork", "--mount-proc", GPUMON_BIN, "run", "-o", str(rec), "--", PY, "-c", job],
            env=environment(tmp, name, spec), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = {}
    for name, (rec, p) in procs.items():
        stdout, stderr = p.communicate(timeout=180)
        out[name] = dict(rec=rec, summary=stderr, status=p.returncode)
    return out


# ---- the checks ------------------------------------------------------------------------------------

def bundled():
    paths = []
    for d in ("examples/traces", "examples/recordings"):
        full = os.path.join(SOURCE, d)
        if os.path.isdir(full):
            paths += [os.path.join(full, f) for f in sorted(os.listdir(full)) if f.endswith(".gpumon")]
    return paths


# The Python package is not built under the sanitizers (a sanitized libgpumon does not load into an
# uninstrumented Python); the plain build of `make test` holds Python beside the others.
HAVE_PYTHON = os.environ.get("GPUMON_HAVE_PYTHON", "1") == "1"


def file_front_ends(path):
    """Every front end that reads a file, held against `gpumon report --json`: the library's
    document through Python, the exporter's verdict gauges, watch's marks."""
    doc = fe.report_json(GPUMON_BIN, path)
    if HAVE_PYTHON:
        assert fe.python_report(path) == doc, "gpumon.report() is gpumon report --json"
    fe.check_serve(fe.serve_gauges(GPUMON_BIN, path), doc)
    fe.check_watch(fe.watch_marks(GPUMON_BIN, path), doc)
    return doc


@pytest.mark.parametrize("path", bundled(), ids=os.path.basename)
def test_bundled_recordings(path):
    file_front_ends(path)


@needs_unshare
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_fake_runs(runs, name):
    """gpumon run said, while and after the job ran, what every reader of its recording says."""
    r = runs[name]
    doc = file_front_ends(r["rec"])
    assert doc["leak"]["verdict"] == SCENARIOS[name]["want"], json.dumps(doc["leak"])
    fe.check_run_summary(fe.run_summary_facts(r["summary"]), doc)
    # the alert said while it ran is the model's, at the model's moment: listed once, given live
    live = [l for l in r["summary"].splitlines() if l.startswith("gpumon: leak suspected: ")]
    leak_alerts = [a for a in doc["alerts"] if a["kind"] == "leak"]
    assert len(live) == len(leak_alerts) and all(a["live"] for a in leak_alerts), (live, leak_alerts)


@needs_unshare
def test_time_to_oom_next_to_a_co_tenant(runs):
    """With a co-tenant holding 20 GiB, the time to out-of-memory is the GPU's free memory at the job's
    last point divided by the job's rate (within 2 %), not the card minus the job."""
    doc = fe.report_json(GPUMON_BIN, runs["fast_leak_nvml"]["rec"])
    leak = doc["leak"]
    assert leak["verdict"] == "leak" and leak["room"] == "free", leak
    rate = leak["rate_bytes_per_second"]
    assert abs(rate - 200 * MIB) <= 0.02 * 200 * MIB, rate
    # the job at its last point: 2 GiB + 200 MiB/s since 1 s; the co-tenant 20 GiB; the reserve
    job_end = 2 * GIB + (SCENARIOS["fast_leak_nvml"]["seconds"] - 1) * 200 * MIB
    free = TOTAL - RESERVED - 20 * GIB - job_end
    assert abs(leak["seconds_to_oom"] - free / rate) <= 0.02 * free / rate + 0.5, (leak, free / rate)
    # the card minus the job would have been far more optimistic
    assert (TOTAL - job_end) / rate > 1.2 * leak["seconds_to_oom"]


@needs_unshare
def test_peak_owner_is_the_rise(runs):
    """The GPU's peak next to a flat 20 GiB co-tenant is the job's rise: its owner is the job's process,
    and the co-tenant is named as the largest holder."""
    doc = fe.report_json(GPUMON_BIN, runs["flat_cotenant"]["rec"])
    dev = doc["devices"][0]["peak"]
    assert dev["owner"]["pid"] == JOB_PID and dev["largest"]["pid"] == COTENANT, dev


@needs_unshare
def test_restarted_steps_are_two_judged_segments(runs):
    doc = fe.report_json(GPUMON_BIN, runs["restarted_steps"]["rec"])
    segs = [s for s in doc["series"] if s["series"]["kind"] == "framework"]
    assert sorted(s["series"]["segment"] for s in segs) == [0, 1], segs
    by = {s["series"]["segment"]: s["verdict"] for s in segs}
    assert by == {0: "none", 1: "leak"}, by
    assert doc["leak"]["series"]["segment"] == 1


@needs_unshare
def test_oom_next_to_a_co_tenant(runs):
    doc = fe.report_json(GPUMON_BIN, runs["oom_cotenant"]["rec"])
    oom = doc["oom"]
    assert oom and oom["cause"] == "co-tenant" and oom["also_leak"], oom
    assert oom["figures"]["top_other"]["pid"] == COTENANT


@needs_unshare
@pytest.mark.skipif(not HAVE_PYTHON, reason="the job condenses its snapshot with the Python package")
def test_oom_inside_causes(runs):
    """What the monitor inside the job said decides the causes, the same in every front end (test_fake_runs
    holds them side by side): a transient peak after a steady level, 3 GiB outside the allocator, the
    snapshot's allocation site."""
    doc = fe.report_json(GPUMON_BIN, runs["oom_inside"]["rec"])
    oom = doc["oom"]
    assert oom["causes"] == ["transient peak", "outside the allocator"], oom["causes"]
    assert oom["framework"]["request_bytes"] == 60 * GIB and oom["framework"]["free_bytes"] == 64 * GIB, oom["framework"]
    assert oom["figures"]["steady"] is True and oom["signs"] == 1, oom["figures"]
    assert oom["snapshot"]["sites"][0]["file"] == "/srv/job/tests/gpu/oom_capture.py", oom["snapshot"]["sites"]
    placed = doc["frameworks"][0]["placed"]
    assert abs(placed["outside_bytes"] - 3 * GIB) <= 64 * MIB, placed
