# SPDX-License-Identifier: MIT
"""`gpumon serve`'s `rank` label (docs/metrics.md, "Ranks of a distributed job"): real processes
started with the variables torchrun, Slurm's srun, Open MPI and PMIx give their workers, listed by
pid in the fake NVML's scenario and read from the real /proc like any GPU process. Each rank of a
job is a series of its own under its owner, a process that is no worker keeps its owner's series
without the label, an exporter that cannot read the workers' environment (another user) shows no
rank and nothing else changes, and the same ranks of job after job add no series."""
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN
from test_serve_owner import PROMTOOL, exporter, samples  # noqa: F401 (exporter: a fixture)

GIB = 1 << 30
MIB = 1 << 20
OWNER_FAMILIES = ("gpumon_owner_memory_used_bytes", "gpumon_owner_processes", "gpumon_owner_leak_suspected")


def torchrun(rank, run="job7", world=4):
    return dict(RANK=rank, LOCAL_RANK=rank, WORLD_SIZE=world, GROUP_RANK=0, TORCHELASTIC_RUN_ID=run,
                MASTER_ADDR="127.0.0.1", MASTER_PORT=29500)


SRUN = dict(SLURM_PROCID=5, SLURM_LOCALID=1, SLURM_NTASKS=8, SLURM_NODEID=0, SLURM_JOB_ID=4321)
MPIRUN = dict(OMPI_COMM_WORLD_RANK=2, OMPI_COMM_WORLD_LOCAL_RANK=2, OMPI_COMM_WORLD_SIZE=4)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


@pytest.fixture
def spawn():
    """start(**variables): the pid of a new `sleep 600` whose environment is PATH and those."""
    started = []

    def start(**variables):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **{k: str(v) for k, v in variables.items()}}
        p = subprocess.Popen(["sleep", "600"], env=env, stdin=subprocess.DEVNULL)
        started.append(p)
        return p.pid
    yield start
    for p in started:
        p.kill()
        p.wait()


def owner_series(body, name="gpumon_owner_memory_used_bytes"):
    """{(gpu, rank or None): value} of one owner family, and the set of the owner labels seen
    (without gpu, uuid and rank)."""
    out, owners = {}, set()
    for n, lab, v in samples(body):
        if n != name:
            continue
        gpu, rank = lab.pop("gpu"), lab.pop("rank", None)
        lab.pop("uuid")
        key = (gpu, rank)
        assert key not in out, (name, key)
        out[key] = v
        owners.add(frozenset(lab.items()))
    return out, owners


def process_ranks(body):
    """{pid: (rank, job_id), None each when absent} of the per-process series."""
    return {int(lab["pid"]): (lab.get("rank"), lab.get("job_id"))
            for n, lab, _ in samples(body) if n == "gpumon_process_memory_used_bytes"}


def test_ranks_of_torchrun_slurm_and_mpi_workers(exporter, spawn):
    ranks = [spawn(**torchrun(i)) for i in range(4)]
    loader = spawn(**torchrun(0))                       # rank 0's second process on its GPU
    plain = spawn()                                     # the same user's process, no worker
    srun, mpi, pmix = spawn(**SRUN), spawn(**MPIRUN), spawn(PMIX_RANK=6)
    # no worker: a rendezvous alone, an allocation without srun's rank, a rank that is no number
    rendezvous = spawn(MASTER_ADDR="10.0.0.1", MASTER_PORT=29500)
    allocation = spawn(SLURM_JOB_ID=4321, SLURM_NODEID=0)
    garbled = spawn(RANK="one", TORCHELASTIC_RUN_ID="job8")
    scn = "\n".join([f"gpu {g} total=80GiB used=20GiB" for g in range(4)] +
                    [f"proc {i} {pid} used={4 + i}GiB" for i, pid in enumerate(ranks)] +
                    [f"proc 0 {loader} used=512MiB", f"proc 0 {plain} used=1GiB",
                     f"proc 1 {srun} used=2GiB", f"proc 3 {mpi} used=3GiB", f"proc 2 {pmix} used=1GiB",
                     f"proc 3 {rendezvous} used=256MiB", f"proc 3 {allocation} used=256MiB",
                     f"proc 3 {garbled} used=256MiB"]) + "\n"
    body = exporter(scn, "--processes", "all").body()

    mem, owners = owner_series(body)
    assert len(owners) == 1, owners  # one owner (these processes' user or container), split by rank
    assert mem == {
        ("0", "0"): 4.5 * GIB, ("0", None): 1 * GIB,
        ("1", "1"): 5 * GIB, ("1", "5"): 2 * GIB,           # torchrun's rank 1 and srun's task 5
        ("2", "2"): 6 * GIB, ("2", "6"): 1 * GIB,           # PMIx's rank 6
        ("3", "3"): 7 * GIB, ("3", "2"): 3 * GIB,           # Open MPI's rank 2
        ("3", None): 768 * MIB,                             # the three that are no worker
    }, mem
    count, _ = owner_series(body, "gpumon_owner_processes")
    assert count[("0", "0")] == 2 and count[("0", None)] == 1 and count[("3", None)] == 3, count
    assert set(count) == set(mem) == set(owner_series(body, "gpumon_owner_leak_suspected")[0])
    assert 'rank=""' not in body and 'rank="-1"' not in body

    # the per-process series, one per pid anyway, carry the rank and the job's id when there is one
    per = process_ranks(body)
    assert [per[p] for p in ranks] == [(str(i), "job7") for i in range(4)], per
    assert per[loader] == ("0", "job7")
    assert (per[srun], per[mpi], per[pmix]) == (("5", "4321"), ("2", None), ("6", None))
    assert per[plain] == per[rendezvous] == per[allocation] == per[garbled] == (None, None)
    assert not any("job_id" in lab for n, lab, _ in samples(body) if n.startswith("gpumon_owner_"))
    assert "job8" not in body  # the id of a process that is no worker is shown nowhere
    if PROMTOOL:
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True, text=True)
        assert (r.returncode, r.stdout + r.stderr) == (0, ""), r.stdout + r.stderr


def test_environment_not_readable_no_rank(exporter, spawn):
    """gpumon serve as nobody, the workers root's: /proc/PID/environ is not readable, so no rank
    label anywhere and the owner's series as without workers; the rest of what /proc says (the user)
    is still there."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run gpumon serve as another user")
    probe = subprocess.run([*NOBODY, "sh", "-c", 'test -x "$1" && test -r "$2"', "sh", os.path.abspath(GPUMON_BIN),
                            os.path.abspath(FAKE_NVML_LIB)])
    if probe.returncode != 0:
        pytest.skip("nobody cannot run this build's gpumon (a build tree in a private directory)")
    ranks = [spawn(**torchrun(i)) for i in range(2)]
    plain = spawn()
    scn = (f"gpu 0 total=80GiB used=20GiB\ngpu 1 total=80GiB used=20GiB\n"
           f"proc 0 {ranks[0]} used=4GiB\nproc 1 {ranks[1]} used=5GiB\nproc 0 {plain} used=1GiB\n")
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)  # the scenario readable by nobody (pytest's tmp_path is root's alone)
        x = exporter(scn, "--processes", "all", directory=pathlib.Path(d),
                     prefix=NOBODY)
        body = x.body()
        x.stop()
    assert "rank=" not in body and "job_id=" not in body and "job7" not in body
    mem, owners = owner_series(body)
    assert mem == {("0", None): 5 * GIB, ("1", None): 5 * GIB}, mem
    assert len(owners) == 1 and ("user", "root") in next(iter(owners)), owners
    count, _ = owner_series(body, "gpumon_owner_processes")
    assert count == {("0", None): 2, ("1", None): 1}, count
    assert set(process_ranks(body).values()) == {(None, None)}


def test_same_ranks_of_many_jobs_add_no_series(exporter, spawn):
    """Ten short torchrun jobs of four ranks, each rank on its own GPU, one after the other (new
    pids, a new run id each) beside a process that is no worker: the owner families never hold more
    than the four ranks' series and the owner's own, however many jobs came and went."""
    jobs, step, life = 10, 0.4, 0.3
    lines = [f"gpu {g} total=80GiB used=20GiB" for g in range(4)]
    plain = spawn()
    lines.append(f"proc 0 {plain} used=1GiB")
    for j in range(jobs):
        start = 0.5 + j * step
        for r in range(4):
            pid = spawn(**torchrun(r, run=f"run{j}"))
            lines.append(f"at {start:.2f} proc {r} {pid} used={256 + 16 * j}MiB")
            lines.append(f"at {start + life:.2f} proc {r} {pid} gone")
    x = exporter("\n".join(lines) + "\n")
    t0, seen, values = time.monotonic(), set(), set()
    while time.monotonic() - t0 < 0.5 + jobs * step + 0.5:
        for n, lab, v in samples(x.body()):
            if n in OWNER_FAMILIES:
                seen.add((n, tuple(sorted(lab.items()))))
                if n == OWNER_FAMILIES[0] and "rank" in lab:
                    values.add(v)
        time.sleep(0.1)
    assert len(values) >= jobs // 2, values  # the jobs were seen, one after the other
    want = {(n, str(r), str(r)) for n in OWNER_FAMILIES for r in range(4)} | {(n, "0", None) for n in OWNER_FAMILIES}
    got = {(n, dict(lab)["gpu"], dict(lab).get("rank")) for n, lab in seen}
    assert got == want, got ^ want
    assert len(seen) == len(want), sorted(seen)  # nothing else tells the jobs apart (no id, no pid)
