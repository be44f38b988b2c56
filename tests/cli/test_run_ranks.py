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
import shlex
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
    time.sleep(0.3)
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
    size = r"(?:\S+ \S+|n/a)"  # "10.0 GiB", or n/a (the floor of a worker listed 5 s or less)
    for m in re.finditer(rf"^ *(\d+) +(\d+) +(\d+) +{size} +{size} +{size} +(.+)$", text, re.M):
        rows[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), m.group(4).strip())
    return rows


@needs_unshare
def test_eight_workers_one_leaking_one_running_out_first(tmp_path):
    """torchrun-like: 8 workers on 8 GPUs, 10 GiB each. Rank 3 grows by 400 MiB a second; rank 5
    fills its GPU at 19.5 s, says so at 20 s with torchrun's "[rank5]:" prefix and fails, and the launcher ends
    the rest. The summary names rank 3 as the leak and rank 5 as the one that ran out, with what
    the others held; the report of the recording says the same."""
    base = BASE
    lines = [gpus(8).rstrip("\n")]
    for i in range(8):
        grow = " grow=400MiB" if i == 3 else ""
        lines.append(f"at 0.5 proc {i} {base + i} used=10GiB{grow}")
    lines += [f"at 19.5 gpu 5 used=79GiB", f"at 19.5 proc 5 {base + 5} used=78GiB"]
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
    # what every rank held when rank 5 ran out, and each one's floor after its first seconds
    assert re.search(r"at the out-of-memory \([\d.]+ s\): rank 0 10\.0 GiB, rank 1 10\.0 GiB, rank 2 10\.0 GiB, rank 3 "
                     r"1\d\.\d GiB, rank 4 10\.0 GiB, rank 5 78\.0 GiB \(ran out\), rank 6 10\.0 GiB, rank 7 10\.0 GiB", joined), joined
    assert re.search(r"^ +0 +0 +1000 +10\.0 GiB +10\.0 GiB +10\.0 GiB +no leak$", summary, re.M), summary

    rep = report(tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert "ranks (torchrun job job7, world size 8): 8 workers seen" in rep.stdout, rep.stdout
    assert rank_rows(rep.stdout) == rows, rep.stdout
    assert re.search(r"Out of memory: +at [\d.]+ s on GPU 5 \(rank 5\)", rep.stdout), rep.stdout
    doc = json.loads(report(tmp_path, "--json").stdout)
    assert [w["rank"] for w in doc["ranks"]] == list(range(8))
    assert {w["rank"]: w["oom"] for w in doc["ranks"]} == {k: k == 5 for k in range(8)}
    assert doc["ranks"][3]["floor_bytes"] > 10 * 2**30 and doc["ranks"][0]["floor_bytes"] == 10 * 2**30
    assert doc["ranks"][5]["at_oom_bytes"] == 78 * 2**30
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


# ---- recordings of one job made on several nodes, read together ------------------------------------

# A node's worker: it holds memory on its GPU (the scenario says how much) and reports its allocator
# through the run socket every 0.2 s of the wall clock, step s at T0 + 0.2 s, so that the nodes'
# workers name each step at the same moment, as a synchronous data-parallel job does.
NODE_WORKER = textwrap.dedent("""
    import json, os, socket, sys, time
    t0, steps, fail_at = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    s.sendall((json.dumps({"v": 1, "type": "hello", "framework": "torch"}) + "\\n").encode())
    for step in range(steps):
        time.sleep(max(0.0, t0 + 0.2 * step - time.time()))
        s.sendall((json.dumps({"type": "sample", "step": step, "device": 0, "allocated": (4 << 30) + step,
                               "reserved": 6 << 30}) + "\\n").encode())
        if step == fail_at:
            sys.stderr.write("[rank%s]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB. "
                             "GPU 0 has a total capacity of 79.11 GiB of which 1.00 GiB is free.\\n" % os.environ["RANK"])
            s.close()
            sys.exit(1)
    s.close()
""")

NODE_LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys, time
    worker, node, job, t0, steps, fail_rank = sys.argv[1:7]
    node, fail_rank = int(node), int(fail_rank)
    procs = []
    for local in range(2):
        rank = 2 * node + local
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:  # worker `local` is pid 1000 + local
            f.write(str(999 + local))
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE="4", GROUP_RANK=str(node),
                   TORCHELASTIC_RUN_ID=job, MASTER_ADDR="node-a", MASTER_PORT="29500")
        procs.append(subprocess.Popen([sys.executable, worker, t0, steps, str(8 if rank == fail_rank else -1)],
                                      env=env))
    codes = [p.wait() for p in procs]
    sys.exit(max(codes))
""")


def node_run(tmp_path, host, node, job, t0, steps=20, fail_rank=-1, delay=0.0):
    """`gpumon run` on 'another node': its own UTS namespace (host name) and PID namespace, two
    workers (ranks 2*node, 2*node+1) on its two GPUs. Returns the Popen."""
    (tmp_path / "worker.py").write_text(NODE_WORKER)
    (tmp_path / "node.py").write_text(NODE_LAUNCHER)
    scn = gpus(2) + "at 1.0 proc 0 1000 used=8GiB\nat 1.0 proc 1 1001 used=9GiB\n"  # once the workers run
    e = environment(tmp_path, scn, wide=True)
    e["FAKE_NVML_SCENARIO"] = str(tmp_path / f"{host}.scn")
    (tmp_path / f"{host}.scn").write_text(scn)
    inner = f"sleep {delay}; hostname {host}; exec " + shlex.join(
        [*GPUMON, "run", "-q", "-o", str(tmp_path / f"{host}.gpumon"), "--", PY, str(tmp_path / "node.py"),
         str(tmp_path / "worker.py"), str(node), job, repr(t0), str(steps), str(fail_rank)])
    return subprocess.Popen(["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", inner], env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def merged(tmp_path, *hosts, json_out=True):
    e = environment(tmp_path)
    args = [*GPUMON, "report", *(["--json"] if json_out else []), *[str(tmp_path / f"{h}.gpumon") for h in hosts]]
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=60)


@needs_unshare
def test_two_nodes_recordings_read_as_one_run(tmp_path):
    """Two nodes of one torchrun job (ranks 0-1 on node-a, 2-3 on node-b, node-b's gpumon started
    1.5 s later): read together, the GPUs of node-b follow node-a's, its times are put on node-a's
    clock (so the same step is at the same moment on both: the check by steps says so), the four
    ranks are one table, and rank 3, on node-b, is the one that ran out of memory first."""
    import time
    t0 = time.time() + 3.0
    a = node_run(tmp_path, "node-a", 0, "job7", t0)
    b = node_run(tmp_path, "node-b", 1, "job7", t0, fail_rank=3, delay=1.5)
    for p in (a, b):
        p.communicate(timeout=60)
    assert (a.returncode, b.returncode) == (0, 1)
    r = merged(tmp_path, "node-a", "node-b")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    hosts = doc["hosts"]
    assert [(h["name"], h["first_dev"], h["gpus"]) for h in hosts] == [("node-a", 0, 2), ("node-b", 2, 2)]
    assert abs(hosts[1]["clock_offset_s"]) < 0.05, hosts  # one machine's clocks: the same
    assert hosts[1]["steps_checked"] >= 15 and abs(hosts[1]["step_skew_s"]) < 0.1, hosts
    assert [d["host"] for d in doc["devices"]] == [0, 0, 1, 1]
    assert [(w["rank"], w["dev"], w["pid"], w["host"]) for w in doc["ranks"]] == [
        (0, 0, 1000, 0), (1, 1, 1001, 0), (2, 2, 1000, 1), (3, 3, 1001, 1)]
    assert doc["oom"]["rank"] == 3 and doc["oom"]["dev"] == 3, doc["oom"]
    assert doc["source"]["type"] == "recordings" and doc["source"]["exit_status"] == 1
    # node-b's workers appear about 1.5 s after node-a's on the one clock
    first = {w["rank"]: w["first_time"] for w in doc["ranks"]}
    assert 1.0 < first[2] - first[0] < 2.5, first
    text = merged(tmp_path, "node-a", "node-b", json_out=False)
    assert text.returncode == 0, text.stderr
    assert re.search(r"^Hosts: +node-a: GPUs 0-1 \(the clock of this report\)\n +node-b: GPUs 2-3; its times moved by "
                     r"[+-]0\.0\d\d s by the wall clocks of both hosts; checked by \d+ steps both reached", text.stdout,
                     re.M), text.stdout
    assert "ranks (torchrun job job7, world size 4): 4 workers seen" in text.stdout
    assert re.search(r"^ +3 +3 +1001 .*\+ OOM \(node-b\)$", text.stdout, re.M), text.stdout
    assert re.search(r"Out of memory: +at [\d.]+ s on GPU 3 \(rank 3\)", text.stdout), text.stdout


@needs_unshare
def test_recordings_of_different_jobs_are_refused(tmp_path):
    """Another job's node (its run id differs), the same host twice, a recording with no workers and a
    text file among recordings: each refused in one line naming why, nothing printed on stdout."""
    import time
    t0 = time.time() + 2.0
    runs = [node_run(tmp_path, "node-a", 0, "job7", t0, steps=3), node_run(tmp_path, "node-c", 1, "job8", t0, steps=3)]
    for p in runs:
        p.communicate(timeout=60)
    r = merged(tmp_path, "node-a", "node-c")
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stdout)
    assert "recording 1 (node-a) is of job job7, recording 2 (node-c) of job job8: not one job" in r.stderr, r.stderr
    r = merged(tmp_path, "node-a", "node-a")
    assert r.returncode == 2 and "recordings 1 and 2 are both of host node-a" in r.stderr, r.stderr
    e = environment(tmp_path, gpus(1))
    subprocess.run([*GPUMON, "record", "-o", str(tmp_path / "plain.gpumon"), "--duration", "0.5"], env=e, check=True,
                   capture_output=True)
    r = merged(tmp_path, "node-a", "plain")
    assert r.returncode == 2 and "recording 2 (" in r.stderr and "holds no worker of a distributed job" in r.stderr, \
        r.stderr
    (tmp_path / "log.csv").write_text("time,device_used\n0,1\n1,2\n")
    r = subprocess.run([*GPUMON, "report", str(tmp_path / "node-a.gpumon"), str(tmp_path / "log.csv")], env=e,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "log.csv is no recording" in r.stderr, r.stderr


@needs_unshare
def test_merging_damaged_killed_and_hostile_recordings(tmp_path):
    """What #25's adversarial pass asks of merged recordings: a node whose gpumon was killed -9 (no
    end in its file), one whose file lost its last pages, one whose start on the wall clock is gone,
    and a job id and host name full of terminal escapes: read as far as they go, the loss named, or
    refused by name; never a crash, and nothing printed raw."""
    import time
    t0 = time.time() + 2.5
    a = node_run(tmp_path, "node-a", 0, "job7\x1b]0;pwned\x07", t0, steps=10)
    b = node_run(tmp_path, "node-b", 1, "job7\x1b]0;pwned\x07", t0, steps=40)
    a.communicate(timeout=60)
    time.sleep(1.0)
    subprocess.run(["pkill", "-9", "-f", f"run -q -o {tmp_path / 'node-b.gpumon'}"])  # node-b's gpumon, mid-run
    b.communicate(timeout=60)
    import sqlite3
    db = sqlite3.connect(f"file:{tmp_path / 'node-b.gpumon'}?mode=ro", uri=True)
    assert not db.execute("SELECT count(*) FROM meta WHERE key = 'end_mono_ns'").fetchone()[0], "node-b was not killed"
    db.close()
    # the job id's escapes were not taken (printable ASCII only): no job id, the rendezvous tells
    r = merged(tmp_path, "node-a", "node-b")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert {w["job_id"] for w in doc["ranks"]} == {None} and {w["master"] for w in doc["ranks"]} == {"node-a:29500"}
    assert len(doc["ranks"]) == 4 and [h["name"] for h in doc["hosts"]] == ["node-a", "node-b"]
    # a host name with escapes (a hand edit): escaped in the text, kept in the JSON
    db = sqlite3.connect(tmp_path / "node-b.gpumon")
    db.execute("UPDATE meta SET value = 'node-b\x1b[2J' WHERE key = 'host'")
    db.commit()
    db.close()
    text = merged(tmp_path, "node-a", "node-b", json_out=False)
    assert text.returncode == 0 and "\x1b" not in text.stdout, text.stdout
    assert "node-b\\x1b[2J" in text.stdout or "node-b\\033[2J" in text.stdout or "node-b?[2J" in text.stdout, \
        text.stdout
    # the last pages of node-b's file lost: what is left is read and the loss named with its recording
    data = (tmp_path / "node-b.gpumon").read_bytes()
    (tmp_path / "node-b.gpumon").write_bytes(data[:len(data) * 2 // 3])
    r = merged(tmp_path, "node-a", "node-b")
    if r.returncode == 0:
        damage = json.loads(r.stdout)["source"]["damage"]
        assert damage and "recording 2 (node-b" in damage, damage
    else:  # too little left to tell the job: refused by name
        assert r.returncode in (2, 255) and "node-b" in r.stderr, r.stderr
    # a start on the wall clock removed: refused, naming the recording
    db = sqlite3.connect(tmp_path / "node-a.gpumon")
    db.execute("DELETE FROM meta WHERE key = 'start_wall_ns'")
    db.commit()
    keys = [k for (k,) in db.execute("SELECT key FROM meta")]
    db.close()
    r = merged(tmp_path, "node-a", "node-b")
    assert r.returncode in (2, 255) and "recording 1 (node-a)" in r.stderr, (keys, r.stderr)
