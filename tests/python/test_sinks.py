# SPDX-License-Identifier: MIT
"""The sinks: CSV, JSON lines, TensorBoard event files (read back with an independent decoder:
official field numbers, our own CRC32C), the SQLite recording, and the section/marker events."""
import csv
import json
import os
import socket
import sqlite3
import struct
import subprocess
import time

import pytest

from conftest import GIB, GPUMON_BIN, MIB, TOTAL, h200
import tfrecord

import gpumon
from gpumon import _gpumon


def run_loop(mon, torch, steps, grow=10 * MIB):
    for _ in range(steps):
        torch._fake.alloc(grow)
        mon.step()


def test_csv(scenario, torch, tmp_path):
    scenario(h200(proc_used="3GiB"))
    with gpumon.GPUMonitor(interval=2, logger=False, csv=tmp_path / "m.csv") as mon:
        run_loop(mon, torch, 4)
    rows = list(csv.DictReader(open(tmp_path / "m.csv")))
    assert [r["step"] for r in rows] == ["2", "4"]
    assert rows[1]["allocated_bytes"] == str(40 * MIB)
    assert rows[1]["process_bytes"] == str(3 * GIB)
    assert rows[1]["unaccounted_bytes"] == str(3 * GIB - 40 * MIB)
    assert rows[1]["device_total_bytes"] == str(TOTAL)
    assert rows[0]["framework"] == "torch" and rows[0]["util_gpu_pct"] == "97"


def test_csv_absent_is_empty_not_zero(scenario, no_frameworks, tmp_path):
    scenario(h200(pid=False))
    with gpumon.GPUMonitor(framework="none", interval=1, logger=False, csv=str(tmp_path / "m.csv")) as mon:
        mon.step()
    row = next(csv.DictReader(open(tmp_path / "m.csv")))
    assert row["allocated_bytes"] == "" and row["process_bytes"] == "" and row["unaccounted_bytes"] == ""
    assert row["device_used_bytes"] == str(40 * GIB)


def test_jsonl(scenario, torch, tmp_path):
    scenario(h200(pid=False))
    with gpumon.GPUMonitor(interval=1, logger=False, jsonl=tmp_path / "m.jsonl") as mon:
        run_loop(mon, torch, 3)
    lines = [json.loads(l) for l in open(tmp_path / "m.jsonl")]
    assert [l["step"] for l in lines] == [1, 2, 3]
    assert lines[2]["allocated_bytes"] == 30 * MIB and lines[2]["peak_bytes"] == 30 * MIB
    assert lines[2]["process_bytes"] is None and lines[2]["unaccounted_bytes"] is None
    assert lines[0]["device_reserved_bytes"] == 644939776


def test_tensorboard_values_names_and_crcs(scenario, torch, tmp_path):
    scenario(h200(proc_used="3GiB"))
    logdir = tmp_path / "tb" / "run1"   # created when missing
    with gpumon.GPUMonitor(interval=5, logger=False, tensorboard=logdir) as mon:
        samples = []
        for _ in range(15):
            torch._fake.alloc(3 * MIB + 12345)   # not whole MiB: checks float32 rounding
            s = mon.step()
            if s:
                samples.append(s)
    files = os.listdir(logdir)
    assert len(files) == 1
    name = files[0]
    parts = name.split(".")
    assert name.startswith("events.out.tfevents.") and len(parts[3]) == 10 and parts[3].isdigit()
    assert parts[4] == socket.gethostname().split(".")[0] or socket.gethostname() in name
    assert f".{os.getpid()}." in name
    path = logdir / name
    evs = tfrecord.events(path)  # checks every CRC
    assert evs[0].file_version == "brain.Event:2" and evs[0].WhichOneof("what") == "file_version"
    sc = tfrecord.scalars(path)
    f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
    assert [st for st, _, _ in sc["memory/allocated_mib"]] == [5, 10, 15]
    for (st, wall, v), s in zip(sc["memory/allocated_mib"], samples):
        assert v == f32(s.allocated / MIB) and wall == s.time and st == s.step
    assert [v for _, _, v in sc["memory/process_mib"]] == [3072.0] * 3
    assert [v for _, _, v in sc["memory/unaccounted_mib"]] == [f32((3 * GIB - s.reserved) / MIB) for s in samples]
    assert [v for _, _, v in sc["gpu/util_pct"]] == [97.0] * 3
    assert [v for _, _, v in sc["gpu/used_mib"]] == [40960.0] * 3


def test_tensorboard_leaves_out_unknown_figures(scenario, no_frameworks, tmp_path):
    scenario(h200(pid=False))
    with gpumon.GPUMonitor(framework="none", interval=1, logger=False, tensorboard=tmp_path / "tb") as mon:
        mon.step()
    (f,) = os.listdir(tmp_path / "tb")
    assert set(tfrecord.scalars(tmp_path / "tb" / f)) == {"gpu/used_mib", "gpu/free_mib", "gpu/util_pct"}


def test_tfevents_writer_golden_bytes(tmp_path):
    w = _gpumon.TfEvents(str(tmp_path), 1.0)
    assert os.path.basename(w.path).startswith("events.out.tfevents.0000000001.")
    w.scalar("gpu/mem", 5, 1.0, 0.5)
    w.close()
    w.close()
    data = open(os.path.join(tmp_path, os.listdir(tmp_path)[0]), "rb").read()
    want = bytes.fromhex("1800000000000000a37f4b2209000000000000f03f1a0d627261696e2e4576656e743a3286bf577a"
                         "1d00000000000000602fdf2309000000000000f03f10052a100a0e0a076770752f6d656d150000003f28e85066")
    assert data == want


def test_tfevents_writer_refuses_bad_input(tmp_path):
    w = _gpumon.TfEvents(str(tmp_path))
    with pytest.raises(ValueError, match="tag"):
        w.scalar("", 1, 0, 1.0)
    with pytest.raises(ValueError, match="step"):
        w.scalar("a", -1, 0, 1.0)
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.scalar("a", 1, 0, 1.0)


def test_recording(scenario, torch, tmp_path):
    scenario(h200(proc_used="3GiB"))
    rec = tmp_path / "run.gpumon"
    with gpumon.GPUMonitor(interval=2, logger=False, record=rec) as mon:
        run_loop(mon, torch, 6)
        mon.marker("epoch 2 starts")
        with mon.section("attention"):
            torch._fake.alloc(64 * MIB)
            torch._fake.free(64 * MIB)
    db = sqlite3.connect(rec)
    assert db.execute("PRAGMA user_version").fetchone() == (1,)
    src = db.execute("SELECT pid, device, framework FROM framework_sources").fetchall()
    assert src == [(os.getpid(), 0, "torch")]
    fw = db.execute("SELECT step, allocated_bytes, reserved_bytes, max_allocated_bytes FROM framework_samples "
                    "ORDER BY t_ns").fetchall()
    assert fw == [(2, 20 * MIB, 20 * MIB, 20 * MIB), (4, 40 * MIB, 40 * MIB, 40 * MIB),
                  (6, 60 * MIB, 60 * MIB, 60 * MIB)]
    dev = db.execute("SELECT dev, used_bytes, total_bytes, reserved_bytes, util_gpu_pct FROM device_samples").fetchall()
    assert dev == [(0, 40 * GIB, TOTAL, 644939776, 97)] * 3
    ev = db.execute("SELECT kind, text FROM events ORDER BY t_ns").fetchall()
    assert ("marker", "epoch 2 starts") in ev
    assert any(k == "note" and t.startswith("section attention: peak +64.0 MiB") for k, t in ev)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["kind"] == "run" and meta["job_pid"] == os.getpid() and "end_wall_ns" in meta


def test_recording_holds_the_gpus_processes(scenario, torch, tmp_path):
    """This process and a co-tenant, as the sampler would record them: when they appear, change and
    leave; `gpumon report` then names this process as the job's and finds its peak."""
    me = os.getpid()
    scenario(h200(proc_used="3GiB", extra=f"""\
        proc 0 4000000 used=15GiB
        at 0.4 proc 0 4000000 gone
        at 0.4 proc 0 {me} used=5GiB
        """))
    rec = tmp_path / "r.gpumon"
    with gpumon.GPUMonitor(interval=1, logger=False, record=rec) as mon:
        mon.step()
        mon.step()  # nothing changed: no new process rows
        time.sleep(0.6)
        mon.step()
    db = sqlite3.connect(rec)
    procs = db.execute("SELECT pid, flags & 8 FROM processes ORDER BY pid").fetchall()
    assert procs == [(me, 0), (4000000, 8)]  # the co-tenant is not in this /proc: flagged foreign
    rows = db.execute("SELECT pid, used_bytes, gone FROM process_samples ORDER BY t_ns, pid").fetchall()
    assert rows == [(me, 3 * GIB, 0), (4000000, 15 * GIB, 0), (me, 5 * GIB, 0), (4000000, None, 1)]
    db.close()
    r = subprocess.run([GPUMON_BIN, "report", "--json", str(rec)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    peak = json.loads(r.stdout)["peak"]
    assert peak["bytes"] == 5 * GIB, peak


def test_recording_survives_a_failed_process_list(scenario, torch, tmp_path):
    """The driver fails to list processes for a while: the recording keeps every sample (the
    process rows resume when the lists do), and is not switched off."""
    fns = ["nvmlDeviceGetComputeRunningProcesses" + v for v in ("_v3", "_v2", "")]
    scenario(h200(extra="".join(f"error {f} UNKNOWN from=0.2 until=0.5\n" for f in fns)))
    rec = tmp_path / "r.gpumon"
    seen = []
    with pytest.warns(gpumon.GpumonWarning, match="an NVML call failed .*Unknown Error"):
        with gpumon.GPUMonitor(interval=1, logger=False, record=rec) as mon:
            for _ in range(8):
                torch._fake.alloc(MIB)
                seen.append(mon.step().process)
                time.sleep(0.1)
            assert mon.failed_sinks == []
    # this process's figure: known, not available while the lists failed, known again after
    assert seen[0] == 3 * GIB and None in seen and seen[-1] == 3 * GIB, seen
    db = sqlite3.connect(rec)
    assert db.execute("SELECT count(*) FROM framework_samples").fetchone() == (8,)
    assert db.execute("SELECT count(*) FROM device_samples").fetchone() == (8,)
    assert db.execute("SELECT count(*) FROM processes WHERE pid = ?", (os.getpid(),)).fetchone() == (1,)


def test_recording_object_reused_for_a_new_file(scenario, tmp_path):
    """Recording.__init__ again (a new file): that file gets the processes again."""
    scenario(h200())
    nvml = _gpumon.Nvml()
    rec = _gpumon.Recording(nvml, str(tmp_path / "a.gpumon"))
    assert rec.processes(0, 1000) == 1
    rec.__init__(nvml, str(tmp_path / "b.gpumon"))
    assert rec.processes(0, 2000) == 1
    rec.close()
    nvml.close()
    for name in ("a", "b"):
        db = sqlite3.connect(tmp_path / f"{name}.gpumon")
        assert db.execute("SELECT count(*) FROM process_samples").fetchone() == (1,), name


def test_record_needs_nvml(scenario, torch, monkeypatch, tmp_path):
    scenario(h200())
    monkeypatch.setenv("GPUMON_NVML_LIBRARY", str(tmp_path / "none.so"))
    with pytest.warns(gpumon.GpumonWarning):
        with pytest.raises(ValueError, match="needs NVML"):
            gpumon.GPUMonitor(record=tmp_path / "r.gpumon", logger=False)


def test_recording_without_framework_holds_device_samples_only(scenario, no_frameworks, tmp_path):
    scenario(h200())
    rec = tmp_path / "r.gpumon"
    with gpumon.GPUMonitor(framework="none", interval=1, logger=False, record=rec) as mon:
        mon.step()
        mon.step()
    db = sqlite3.connect(rec)
    assert db.execute("SELECT count(*) FROM framework_samples").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM device_samples").fetchone() == (2,)
