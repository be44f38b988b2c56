# SPDX-License-Identifier: MIT
"""A distributed job under `gpumon run`: every worker known by its rank, read from the variables its
launcher set (torchrun, Slurm, Open MPI), in the summary, the recording and the report, with the
rank that leaks and the rank that ran out of memory first named; and a system-wide recording made
by a user who cannot read a worker's environment, which leaves its rank unknown rather than wrong.

The launched job runs in a new PID namespace, so the scenario can list its workers by pid: the
launcher starts worker i as pid 1000 + i there (through the namespace's ns_last_pid, far above
gpumon's own threads), writes their pids, and the test checks they are the ones the scenario
names."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import GPUMON
from test_run import environment, needs_unshare, said

PY = sys.executable or "/usr/bin/python3"


def gpus(n, used="10GiB"):
    return "".join(f'gpu {i} name="NVIDIA H200" uuid=GPU-{i:08x}-2222-3333-4444-555555555555 '
                   f'bus=00000000:{0x10 + i:02X}:00.0 total=80GiB reserved=512MiB used={used}\n' for i in range(n))


# The launcher: waits for gpumon's threads, starts one worker a GPU with its launcher's variables,
# writes their pids; when a worker fails it ends the others and fails too, as torchrun does.
LAUNCHER = textwrap.dedent("""
    import json, os, signal, subprocess, sys, time
    pids_file, n, kind, oom_rank, oom_at = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    time.sleep(1.0)
    t0 = time.monotonic()
    workers = []
    for i in range(n):
        env = dict(os.environ)
        if kind == "torchrun":
            env.update(RANK=str(i), LOCAL_RANK=str(i), WORLD_SIZE=str(n), GROUP_RANK="0",
                       TORCHELASTIC_RUN_ID="job7", MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")
        elif kind == "slurm":
            env.update(SLURM_PROCID=str(i), SLURM_LOCALID=str(i), SLURM_NTASKS=str(n), SLURM_NODEID="0",
                       SLURM_JOB_ID="4242")
        else:
            env.update(OMPI_COMM_WORLD_RANK=str(i), OMPI_COMM_WORLD_LOCAL_RANK=str(i), OMPI_COMM_WORLD_SIZE=str(n))
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:  # worker i is pid 1000 + i
            f.write(str(999 + i))
        if i == oom_rank:
            code = ("import sys, time; time.sleep(%f); sys.stderr.write('[rank%d]: torch.OutOfMemoryError: CUDA out of "
                    "memory. Tried to allocate 2.00 GiB. GPU %d has a total capacity of 79.11 GiB of which 20.00 MiB "
                    "is free.\\\\n'); sys.exit(1)" % (oom_at, i, i))
            workers.append(subprocess.Popen([sys.executable, "-c", code], env=env))
        else:
            workers.append(subprocess.Popen(["sleep", str(oom_at + 30 if oom_rank >= 0 else oom_at)], env=env))
    open(pids_file, "w").write(json.dumps([w.pid for w in workers]))
    while True:
        codes = [w.poll() for w in workers]
        if any(c not in (None, 0) for c in codes):
            for w in workers:
                if w.poll() is None:
                    w.send_signal(signal.SIGTERM)
            for w in workers:
                w.wait()
            sys.exit(1)
        if all(c == 0 for c in codes):
            sys.exit(0)
        time.sleep(0.05)
""")

BASE = 1000  # worker i's pid in the job's PID namespace


def run_job(tmp_path, scenario, n, kind="torchrun", oom_rank=-1, oom_at=2.0):
    e = environment(tmp_path, scenario, wide=True)
    launcher = tmp_path / "launcher.py"
    launcher.write_text(LAUNCHER)
    pids = tmp_path / "pids"
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", *GPUMON, "run", "-o", str(tmp_path / "job.gpumon"),
                        "--", PY, str(launcher), str(pids), str(n), kind, str(oom_rank), str(oom_at)],
                       env=e, capture_output=True, text=True, timeout=120)
    got = json.loads(pids.read_text())
    want = list(range(BASE, BASE + n))
    assert got == want, f"the workers got pids {got}, the scenario names {want}"
    return r


def report(tmp_path, *args):
    e = environment(tmp_path)
    return subprocess.run([*GPUMON, "report", *args, str(tmp_path / "job.gpumon")], env=e, capture_output=True,
                          text=True, timeout=60)


def rank_rows(text):
    """{rank: (gpu, pid, verdict text)} from a rank table."""
    rows = {}
    for m in re.finditer(r"^ *(\d+) +(\d+) +(\d+) +\S+ \S+ +\S+ \S+ +\S+ \S+ +(.+)$", text, re.M):
        rows[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4).strip())
    return rows


@needs_unshare
def test_eight_workers_one_leaking_one_running_out_first(tmp_path):
    """torchrun-like: 8 workers on 8 GPUs, 10 GiB each. Rank 3 grows by 400 MiB a second; rank 5
    fills its GPU at 20 s, says so with torchrun's "[rank5]:" prefix and fails, and the launcher ends
    the rest. The summary names rank 3 as the leak and rank 5 as the one that ran out, with what
    the others held; the report of the recording says the same."""
    base = BASE
    lines = [gpus(8).rstrip("\n")]
    for i in range(8):
        grow = " grow=400MiB" if i == 3 else ""
        lines.append(f"at 1.2 proc {i} {base + i} used=10GiB{grow}")
    lines += [f"at 20.5 gpu 5 used=79GiB", f"at 20.5 proc 5 {base + 5} used=78GiB"]
    r = run_job(tmp_path, "\n".join(lines) + "\n", 8, oom_rank=5, oom_at=20.0)
    assert r.returncode == 1, r.stderr
    summary = r.stderr[r.stderr.index("gpumon run summary"):]
    assert "ranks (torchrun job job7, world size 8): 8 workers seen" in summary, summary
    rows = rank_rows(summary)
    assert sorted(rows) == list(range(8)), summary
    for rank, (gpu, pid, verdict) in rows.items():
        assert (gpu, pid) == (rank, base + rank), (rank, rows[rank])
    assert rows[3][2].startswith("LEAK +"), rows[3]
    assert rows[5][2].endswith("+ OOM"), rows[5]
    assert all(rows[k][2] == "no leak" for k in (0, 1, 2, 4, 6, 7)), rows
    joined = said(r.stderr)
    assert re.search(r"leak: LEAK on the job's processes on GPU 3 \(NVML\), rank 3: \+(\d+) MiB a second", joined), joined
    assert re.search(r"out of memory at [\d.]+ s on GPU 5 \(rank 5\): PyTorch: \[rank5\]: torch\.OutOfMemoryError", joined), joined
    # a leak on GPU 3 did not fill GPU 5: its own verdict (none) diagnoses it
    assert re.search(r"diagnosis: transient peak:", joined) and "A leak:" not in joined, joined
    # who held GPU 5 then: rank 5's process, marked
    assert re.search(rf"^ +{base + 5} +\S+ +[\d.]+ +yes, rank 5 ", summary, re.M), summary
    assert re.search(r"skew over 8 ranks: peaks 10\.0 GiB \(rank \d\) to 78\.0 GiB \(rank 5\), 68\.0 GiB apart", joined)

    rep = report(tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "ranks (torchrun job job7, world size 8): 8 workers seen" in rep.stdout, rep.stdout
    assert rank_rows(rep.stdout) == rows, rep.stdout
    assert re.search(r"Out of memory: +at [\d.]+ s on GPU 5 \(rank 5\)", rep.stdout), rep.stdout
    doc = json.loads(report(tmp_path, "--json").stdout)
    assert [w["rank"] for w in doc["ranks"]] == list(range(8))
    assert {w["rank"]: w["oom"] for w in doc["ranks"]} == {k: k == 5 for k in range(8)}
    w3 = doc["ranks"][3]
    assert (w3["launcher"], w3["job_id"], w3["master"], w3["world_size"]) == ("torchrun", "job7", "127.0.0.1:29500", 8)
    assert w3["leak"]["verdict"] == "leak" and 360e6 / 1.048576 < w3["leak"]["rate_bytes_per_second"] < 440 * 2**20
    assert doc["oom"]["rank"] == 5 and doc["oom"]["pid"] == base + 5
    assert doc["leak"]["series"] == {**doc["leak"]["series"], "kind": "job", "dev": 3, "rank": 3}
    assert doc["rank_skew"]["peak_max_rank"] == 5 and doc["rank_skew"]["ranks"] == 8


@needs_unshare
@pytest.mark.parametrize("kind, heading", [("slurm", "ranks (slurm job 4242, world size 2): 2 workers seen"),
                                           ("mpi", "ranks (mpi, world size 2): 2 workers seen")])
def test_slurm_and_mpi_workers(tmp_path, kind, heading):
    """srun and mpirun set other variables; the ranks are read the same, too short a run to judge."""
    base = BASE
    scn = gpus(2) + f"at 1.2 proc 0 {base} used=10GiB\nat 1.2 proc 1 {base + 1} used=12GiB\n"
    r = run_job(tmp_path, scn, 2, kind=kind, oom_at=2.5)
    assert r.returncode == 0, r.stderr
    summary = r.stderr[r.stderr.index("gpumon run summary"):]
    assert heading in summary, summary
    rows = rank_rows(summary)
    assert {k: v[:2] for k, v in rows.items()} == {0: (0, base), 1: (1, base + 1)}, summary
    assert "skew over 2 ranks: peaks 10.0 GiB (rank 0) to 12.0 GiB (rank 1), 2.00 GiB apart" in said(r.stderr)


@needs_unshare
def test_no_workers_no_rank_table(tmp_path):
    """A job that is no distributed one: the summary has no rank table, the document [] and null."""
    e = environment(tmp_path, gpus(2) + "at 0.3 proc 0 3 used=10GiB\n", wide=True)
    r = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", *GPUMON, "run", "-o", str(tmp_path / "job.gpumon"),
                        "--", "sleep", "1.5"], env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ranks (" not in r.stderr and "skew over" not in r.stderr, r.stderr
    doc = json.loads(report(tmp_path, "--json").stdout)
    assert doc["ranks"] == [] and doc["rank_skew"] is None and doc["leak"]["series"]["rank"] is None


def test_unreadable_environment_leaves_the_rank_unknown(tmp_path):
    """`gpumon record` run by another user than the worker's cannot read its environment: the
    worker is recorded with its rank unknown (no table, rank columns NULL), never as rank 0; run by
    root the same worker is rank 1."""
    env = dict(os.environ, RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", TORCHELASTIC_RUN_ID="job9")
    worker = subprocess.Popen(["sleep", "30"], env=env)
    shared = None
    try:
        scn = gpus(1, used="12GiB") + f"proc 0 {worker.pid} used=11GiB\n"
        results = {}
        # pytest's directories are root's alone: the user's files go where it may read and write
        shared = tempfile.mkdtemp(prefix="gpumon-rank-")
        os.chmod(shared, 0o777)
        for who in ("nobody", "root"):
            e = environment(tmp_path, scn)
            scn_file = os.path.join(shared, "scenario.scn")
            with open(scn_file, "w") as f:
                f.write(scn)
            os.chmod(scn_file, 0o644)
            e["FAKE_NVML_SCENARIO"] = scn_file
            out = os.path.join(shared, f"{who}.gpumon")
            argv = [*GPUMON, "record", "-o", str(out), "--duration", "1.5"]
            if who == "nobody":
                argv = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv]
            r = subprocess.run(argv, env=e, capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            rep = subprocess.run([*GPUMON, "report", "--json", str(out)], env=e, capture_output=True, text=True,
                                 timeout=60)
            assert rep.returncode == 0, rep.stderr
            results[who] = json.loads(rep.stdout)
        assert results["nobody"]["ranks"] == [], results["nobody"]["ranks"]
        (w,) = results["root"]["ranks"]
        assert (w["rank"], w["world_size"], w["job_id"], w["pid"]) == (1, 2, "job9", worker.pid)
    finally:
        worker.kill()
        worker.wait()
        if shared:
            shutil.rmtree(shared, ignore_errors=True)
