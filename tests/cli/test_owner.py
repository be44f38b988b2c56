# SPDX-License-Identifier: MIT
"""Who held the memory: a co-tenant's owner (its Kubernetes pod, its Slurm job) from its
/proc/PID/cgroup, through `gpumon run` into the recording, and worded the same by the run's summary,
`gpumon report` (text, JSON, HTML). The processes' /proc is a fixture tree (GPUMON_PROC_ROOT) and
the node's pod log directory the unit tests' fixture (GPUMON_PODS_DIR)."""
import json
import os
import re
import sqlite3

import pytest

from conftest import H200
from test_run import PY, WIDE, run, said

PODS = os.path.join(os.path.dirname(__file__), "..", "unit", "cgroup", "pods")
POD_UID = "8f2b5d0e_3c1a_4f7e_9b2d_0a1b2c3d4e5f"
CID = "3f1c0e6a9b2d4c8e7f1a0b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a"
POD = "pod ml-team/trainer-7f9c6d-x2k4q"
OOM_EXIT = ("import sys, time; time.sleep(1.2); "
            "sys.stderr.write('torch.OutOfMemoryError: CUDA out of memory.\\n'); sys.exit(1)")


def proc_tree(root, pid, cgroup, command):
    d = root / str(pid)
    d.mkdir(parents=True)
    (d / "cgroup").write_text(cgroup)
    (d / "status").write_text(f"Name:\t{command}\nPPid:\t1\nUid:\t0\t0\t0\t0\n")
    (d / "cmdline").write_bytes(command.encode() + b"\0--serve\0")


@pytest.fixture
def oom_run(gpumon, tmp_path):
    """A job that runs out of memory beside two co-tenants: pid 777 in a pod (42 GiB), pid 778 in
    a Slurm step (8 GiB). Returns the finished run."""
    root = tmp_path / "proc"
    proc_tree(root, 777, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
              f"{POD_UID}.slice/cri-containerd-{CID}.scope\n", "inference-server")
    proc_tree(root, 778, "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n", "train")
    scn = (H200.replace("used=0 ", "used=60GiB ") + "proc 0 777 used=42GiB name=inference-server\n"
           "proc 0 778 used=8GiB name=train\n")
    env = {"GPUMON_PROC_ROOT": str(root), "GPUMON_PODS_DIR": os.path.abspath(PODS), **WIDE}
    r = run(gpumon, tmp_path, ["--", PY, "-c", OOM_EXIT], scenario=scn, env=env)
    assert r.returncode == 1, r.stderr
    return r


def test_run_summary_names_the_co_tenants_owner(oom_run):
    text = said(oom_run.stderr)
    m = re.search(r"diagnosis: co-tenant: (.*?) who held ", text)
    assert m, oom_run.stderr
    assert f"the largest pid 777 (42.0 GiB, user root: inference-server --serve) held by {POD}" in m.group(1)
    rows = {l.split()[0]: l for l in oom_run.stderr.splitlines() if re.match(r"\s+77[78]\s", l)}
    assert rows["777"].endswith(f"inference-server --serve  held by {POD}"), rows
    assert rows["778"].endswith("train --serve  held by slurm job 4242.0"), rows


def test_recording_keeps_the_owner(oom_run, tmp_path):
    db = sqlite3.connect(f"file:{tmp_path / 'rec.gpumon'}?mode=ro", uri=True)
    rows = dict((pid, rest) for pid, *rest in db.execute(
        "select pid, owner_present, owner_namespace, owner_pod, owner_container, owner_pod_uid, owner_runtime,"
        " owner_container_id, owner_slurm_job, owner_slurm_step from processes where pid in (777, 778)"))
    assert rows[777] == [1 | 2 | 4, "ml-team", "trainer-7f9c6d-x2k4q", "pytorch", POD_UID.replace("_", "-"),
                         "containerd", CID, None, None]
    assert rows[778] == [8, None, None, None, None, None, None, "4242", "0"]


def test_report_text_json_and_html_say_held_by_pod(gpumon, oom_run, tmp_path):
    rec = str(tmp_path / "rec.gpumon")
    r = gpumon(["report", rec])
    assert r.returncode == 0, r.stderr
    assert f"held by {POD}" in " ".join(r.stdout.split()), r.stdout
    row = next(l for l in r.stdout.splitlines() if l.strip().startswith("777 "))
    assert row.endswith(f"held by {POD}"), row

    r = gpumon(["report", rec, "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    holders = {h["pid"]: h for h in doc["oom"]["holders"]}
    assert holders[777]["owner"] == POD
    assert holders[777]["owner_parts"] == {
        "namespace": "ml-team", "pod": "trainer-7f9c6d-x2k4q", "container": "pytorch",
        "pod_uid": POD_UID.replace("_", "-"), "slurm_job": None, "slurm_step": None, "container_id": CID,
        "runtime": "containerd", "unit": None}
    assert holders[778]["owner"] == "slurm job 4242.0"
    assert holders[778]["owner_parts"]["slurm_step"] == "0" and holders[778]["owner_parts"]["pod"] is None
    assert doc["oom"]["figures"]["top_other"]["owner"] == POD
    job = [h for h in holders.values() if h["job"]]
    assert all(h["owner"] is None and h["owner_parts"] is None for h in job), job  # nothing known: null

    html = tmp_path / "r.html"
    r = gpumon(["report", rec, "--html", str(html)])
    assert r.returncode == 0, r.stderr
    page = html.read_text()
    holders_table = page[page.index('id="oom-holders"'):]
    holders_table = holders_table[:holders_table.index("</table>")]
    assert f'<span class="held-by">held by {POD}</span>' in holders_table
    assert '<span class="held-by">held by slurm job 4242.0</span>' in holders_table


def test_a_pid_of_another_namespace_is_said_so(gpumon, tmp_path):
    """A co-tenant whose pid is not in our /proc: its owner is not guessed."""
    root = tmp_path / "proc"
    root.mkdir()
    scn = H200.replace("used=0 ", "used=60GiB ") + "proc 0 4194001 used=42GiB name=inference-server\n"
    r = run(gpumon, tmp_path, ["--", PY, "-c", OOM_EXIT], scenario=scn, env={"GPUMON_PROC_ROOT": str(root), **WIDE})
    assert r.returncode == 1, r.stderr
    row = next(l for l in r.stderr.splitlines() if l.strip().startswith("4194001"))
    assert row.endswith("inference-server  in another PID namespace"), row
    assert "held by" not in r.stderr
