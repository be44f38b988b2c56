# SPDX-License-Identifier: MIT
"""MIG against the fake NVML: `gpumon list`, `-L` and `--list-gpus` in nvidia-smi -L's layout (MIG
devices under their GPU; a MIG-disabled card byte-equal to the H200's reference), `query` (rows are
GPUs, as nvidia-smi's --query-gpu), `serve` labels for GPU and compute instances (native and dcgm),
and a recording whose MIG devices keep their UUIDs and instance ids."""
import json
import os
import re
import subprocess

import pytest

from conftest import GPUMON_BIN
from test_serve import Server, one, parse

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "smi")
GIB = 1 << 30
GPU0 = "GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af"  # the lent H200's UUID (fixtures/smi/L.txt)
GPU1 = "GPU-11111111-2222-3333-4444-555555555555"
MIG_A = "MIG-51fa7c7a-4c41-59bf-b08a-9cb4b47525a7"
MIG_B = "MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4"
MIG_C = "MIG-6c80966f-629d-5379-803b-55424fc1a0bc"

H200 = f'gpu 0 name="NVIDIA H200" uuid={GPU0} bus=00000000:00:06.0 total=150754820096 reserved=644939776 used=0\n'

# GPU 0 in MIG mode with three MIG devices, GPU 1 not; a process on two of the instances.
MIG_SCN = f"""\
gpu 0 name="NVIDIA H200" uuid={GPU0} bus=00000000:00:06.0 total=150754820096 reserved=644939776 used=23GiB
gpu 1 name="NVIDIA H200" uuid={GPU1} bus=00000000:00:07.0 total=150754820096 reserved=644939776 used=1GiB util=40
mig 0 gi=7 ci=0 profile=1g.18gb uuid={MIG_A} total=16.5GiB used=2GiB
mig 0 gi=1 ci=0 profile=3g.71gb uuid={MIG_B} total=70GiB used=20GiB
mig 0 gi=2 ci=0 profile=1g.18gb+me uuid={MIG_C} total=16.5GiB used=1GiB
proc 0 4194242 used=2GiB gi=7 ci=0 name=python
proc 0 4194151 used=20GiB gi=1 ci=0 name=train
proc 1 4194007 used=1GiB name=serve
"""

# nvidia-smi -L's layout: a MIG device's profile after "MIG ", padded to 11, then "Device %2d"
MIG_L = f"""\
GPU 0: NVIDIA H200 (UUID: {GPU0})
  MIG 1g.18gb     Device  0: (UUID: {MIG_A})
  MIG 3g.71gb     Device  1: (UUID: {MIG_B})
  MIG 1g.18gb+me  Device  2: (UUID: {MIG_C})
GPU 1: NVIDIA H200 (UUID: {GPU1})
"""


@pytest.mark.parametrize("args", [["list"], ["-L"], ["--list-gpus"]])
def test_list_mig_disabled_is_nvidia_smis(gpumon, args):
    with open(os.path.join(FIXTURES, "L.txt")) as f:
        want = f.read()
    r = gpumon(args, H200)
    assert (r.returncode, r.stdout, r.stderr) == (0, want, "")


@pytest.mark.parametrize("args", [["list"], ["-L"], ["--list-gpus"]])
def test_list_mig_layout(gpumon, args):
    r = gpumon(args, MIG_SCN)
    assert (r.returncode, r.stdout, r.stderr) == (0, MIG_L, "")


def test_list_selects(gpumon):
    lines = MIG_L.splitlines(keepends=True)
    r = gpumon(["-L", "-i", "1,0"], MIG_SCN)
    assert r.returncode == 0 and r.stdout == lines[4] + "".join(lines[:4])
    # a MIG device by its UUID (or a prefix of it): under its GPU's line, alone
    r = gpumon(["list", "-i", MIG_B[:12]], MIG_SCN)
    assert r.returncode == 0 and r.stdout == lines[0] + lines[2]
    # indexes are the GPUs' only, as nvidia-smi's
    r = gpumon(["list", "-i", "2"], MIG_SCN)
    assert r.returncode == 6 and "no GPU with index 2 (2 GPUs)" in r.stderr


def test_list_mig_without_instances_and_refused(gpumon):
    r = gpumon(["-L"], H200 + "mig 0 on\n")
    assert r.stdout == f"GPU 0: NVIDIA H200 (UUID: {GPU0})\n"
    r = gpumon(["-L"], MIG_SCN + "error nvmlDeviceGetMigDeviceHandleByIndex NO_PERMISSION\n")
    assert r.returncode == 0 and r.stdout == MIG_L.splitlines(keepends=True)[0] + MIG_L.splitlines(keepends=True)[4]


def test_list_help_names_the_aliases(gpumon):
    r = gpumon(["-L", "--help"])
    assert r.returncode == 0 and "gpumon -L" in r.stdout and "--list-gpus" in r.stdout and "MIG" in r.stdout


def test_query_rows_are_gpus(gpumon):
    r = gpumon(["query", "--query-gpu=index,uuid,memory.used", "--format=csv,noheader"], MIG_SCN)
    assert r.returncode == 0
    assert r.stdout == f"0, {GPU0}, 23552 MiB\n1, {GPU1}, 1024 MiB\n"


def test_query_mig_mode(gpumon):
    r = gpumon(["query", "--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader"],
               MIG_SCN + "error nvmlDeviceGetMigMode NOT_SUPPORTED gpu=1\n")
    assert r.stdout == "Enabled, Enabled\n[N/A], [N/A]\n"


def test_serve_labels(tmp_path):
    s = Server(tmp_path, ("--processes", "all"), MIG_SCN)
    try:
        m = parse(s.metrics())
        base = dict(gpu=0, pci_bus_id="00000000:00:06.0")
        assert one(m, "gpumon_memory_used_bytes", uuid=GPU0, **base) == 23 * GIB
        a = dict(base, uuid=MIG_A, gpu_instance_id=7, compute_instance_id=0, mig_profile="1g.18gb",
                 name="NVIDIA H200 MIG 1g.18gb")
        assert one(m, "gpumon_memory_used_bytes", **a) == 2 * GIB
        assert one(m, "gpumon_memory_total_bytes", **a) == 16.5 * GIB
        assert one(m, "gpumon_memory_used_bytes", uuid=MIG_B, gpu_instance_id=1) == 20 * GIB
        # a GPU's series carry no instance labels; a MIG device has no utilization, not 0
        assert all("gpu_instance_id" not in lab for lab, _ in m["gpumon_memory_used_bytes"] if lab["uuid"] in (GPU0, GPU1))
        assert [lab["uuid"] for lab, _ in m.get("gpumon_utilization_ratio", [])] == [GPU1]
        # the process on instance 1 is listed on that MIG device under GPU 0's index
        assert one(m, "gpumon_process_memory_used_bytes", uuid=MIG_B, pid=4194151, gpu=0) == 20 * GIB
    finally:
        s.stop()


def test_serve_labels_dcgm(tmp_path):
    s = Server(tmp_path, ("--compat", "dcgm"), MIG_SCN)
    try:
        m = parse(s.metrics())
        # dcgm-exporter's MIG labels: the GPU's index, UUID, device and model, and the instance
        rows = [(lab, v) for lab, v in m["DCGM_FI_DEV_FB_USED"] if "GPU_I_ID" in lab]
        assert sorted((lab["GPU_I_ID"], lab["GPU_I_PROFILE"], v) for lab, v in rows) == \
            [("1", "3g.71gb", 20480), ("2", "1g.18gb+me", 1024), ("7", "1g.18gb", 2048)]
        for lab, _ in rows:
            assert (lab["gpu"], lab["UUID"], lab["device"], lab["modelName"]) == ("0", GPU0, "nvidia0", "NVIDIA H200")
    finally:
        s.stop()


def test_recording_keeps_mig_devices(gpumon, tmp_path):
    out = tmp_path / "mig.gpumon"
    r = gpumon(["record", "-o", str(out), "--duration", "0.5", "--interval", "100"], MIG_SCN)
    assert r.returncode == 0, r.stderr
    r = gpumon(["export", str(out), "--jsonl"], MIG_SCN)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    used = {row["uuid"]: row["used_bytes"] for row in rows}
    assert used == {GPU0: 23 * GIB, GPU1: 1 * GIB, MIG_A: 2 * GIB, MIG_B: 20 * GIB, MIG_C: 1 * GIB}
    r = gpumon(["export", str(out), "--jsonl", "-t", "process"], MIG_SCN)
    procs = {(row["uuid"], row["pid"]) for row in (json.loads(line) for line in r.stdout.splitlines())}
    assert (MIG_B, 4194151) in procs and (MIG_A, 4194242) in procs and (MIG_A, 4194151) not in procs
    # served from the recording, with no driver: the MIG devices keep their instance labels
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    env.update(GPUMON_NVML_LIBRARY=str(tmp_path / "none.so"), LC_ALL="C")
    p = subprocess.Popen([os.path.abspath(GPUMON_BIN), "serve", "--listen", "127.0.0.1:0", "--replay", str(out)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        addr = re.search(r"serving http://(\S+)/metrics", p.stderr.readline()).group(1)
        import urllib.request
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as resp:
            m = parse(resp.read().decode())
        assert one(m, "gpumon_memory_used_bytes", uuid=MIG_C, gpu=0, gpu_instance_id=2, compute_instance_id=0,
                   mig_profile="1g.18gb+me") == 1 * GIB
    finally:
        p.terminate()
        p.wait(timeout=10)


def test_show_puts_mig_devices_under_their_gpu(gpumon):
    """`gpumon show`: the header counts GPUs, each MIG device comes indented right after its GPU with
    its profile, instance ids and UUID and its own memory, its processes once (on the GPU), and
    --json says which device is a MIG device of which GPU."""
    r = gpumon(["show"], MIG_SCN, env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].endswith("  2 GPUs")
    i0 = next(i for i, l in enumerate(lines) if l.startswith("GPU 0 "))
    i1 = next(i for i, l in enumerate(lines) if l.startswith("GPU 1 "))
    migs = [l for l in lines[i0:i1] if l.startswith("  MIG ")]
    assert migs == [f"  MIG 1g.18gb  GPU 0  gi 7 ci 0  {MIG_A}", f"  MIG 3g.71gb  GPU 0  gi 1 ci 0  {MIG_B}",
                    f"  MIG 1g.18gb+me  GPU 0  gi 2 ci 0  {MIG_C}"]
    assert any(l.startswith("    memory [") and "20.0 GiB used" in l and "of 70.0 GiB" in l for l in lines)
    assert not any(l.startswith("GPU 2") for l in lines)
    rows = [l.split() for l in lines[lines.index("Processes holding GPU memory (largest first)") + 2:]]
    assert [(r[0], r[1]) for r in rows] == [("0", "4194151"), ("0", "4194242"), ("1", "4194007")]
    doc = json.loads(gpumon(["show", "--json"], MIG_SCN).stdout)
    assert doc["gpu_count"] == 2
    assert [(g["uuid"], g["mig"]) for g in doc["gpus"]][:2] == [
        (GPU0, None), (MIG_A, {"gpu": 0, "gpu_instance_id": 7, "compute_instance_id": 0, "profile": "1g.18gb"})]
    assert doc["gpus"][1]["utilization_gpu_pct"] is None and doc["gpus"][1]["memory_used_bytes"] == 2 << 30
    assert [p["pid"] for p in doc["processes"]] == [4194151, 4194242, 4194007]
