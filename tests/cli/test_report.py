# SPDX-License-Identifier: MIT
"""`gpumon report`: the verdicts, peaks, fragmentation, unaccounted memory and out-of-memory cause
from CSV files and recordings, and bad input: CSVs without `time` or a memory column, rows that
cannot be read, damaged and truncated recordings, files that are neither, and a large file read
in bounded memory.

Recordings are made from a template written by the library itself (`test_recording PATH`, see
test_export.py), emptied and refilled here with known rows, so the schema is the library's.
"""
import csv
import io
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from conftest import GPUMON_BIN
from test_export import make_recording

MiB = 1 << 20
GiB = 1 << 30
S = 10**9
TOTAL = 80 * GiB
EXAMPLES = os.path.join(os.path.dirname(__file__), "../../examples/traces")


def report_json(gpumon, path, *args):
    r = gpumon(["report", str(path), "--json", *args])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for row in rows:
            f.write(",".join("" if v is None else str(v) for v in row) + "\n")
    return path


def allocated_series(steps, leak_per_step=0, seed=1, warmup=0):
    """allocated after each step: a 2 GiB floor, dynamic shapes up to 300 MiB, a leak if asked"""
    rnd = random.Random(seed)
    for i in range(steps):
        base = 2 * GiB + (min(i, warmup) * 8 * MiB if warmup else 0)
        yield i, base + leak_per_step * i + rnd.randrange(6) * 60 * MiB + rnd.randrange(MiB)


# ---- CSV ---------------------------------------------------------------------------------------


def test_csv_leak_rate_and_json_keys(gpumon, tmp_path):
    rows = [(i * 0.1, i, a, a + 512 * MiB, a + 300 * MiB, 0, TOTAL)
            for i, a in allocated_series(600, leak_per_step=4 * MiB)]
    path = write_csv(tmp_path / "leak.csv",
                     ["time", "step", "allocated", "reserved", "max_allocated", "unused", "device_total"], rows)
    doc = report_json(gpumon, path)
    assert doc["format"] == 2
    assert doc["leak"]["verdict"] == "leak"
    assert doc["leak"]["rate_bytes_per_step"] == pytest.approx(4 * MiB, rel=0.05)
    assert doc["leak"]["series"]["kind"] == "framework"
    assert doc["leak"]["start_step"] is not None and doc["leak"]["start_step"] < 60
    # no device or process column: the peak is the framework's max_allocated, at the last step
    last = rows[-1]
    assert doc["peak"]["what"] == "framework"
    assert doc["peak"]["bytes"] == max(r[4] for r in rows)
    assert doc["peak"]["time"] == pytest.approx(last[0], abs=1e-6)
    assert doc["fragmentation"]["bytes"] == max(r[3] - r[2] for r in rows)
    assert doc["unaccounted"] is None  # no process figure to compare with
    assert doc["oom"] is None
    # device_total is the limit: the figure (~4.4 GiB at the end) rises 4 MiB a step toward 80 GiB
    room = TOTAL - (2 * GiB + 599 * 4 * MiB)
    assert doc["leak"]["room"] == "total"
    assert doc["leak"]["steps_to_oom"] == pytest.approx(room / (4 * MiB), rel=0.1)
    assert doc["leak"]["start_time"] is not None and doc["leak"]["start_time"] < 6
    # a CSV names no process: its records carry the stand-in pid 0 (docs/report.md) ...
    assert doc["fragmentation"]["pid"] == 0 and doc["leak"]["series"]["pid"] == 0
    assert doc["source"]["type"] == "csv" and doc["source"]["damage"] is None
    text = gpumon(["report", str(path)])
    assert text.returncode == 0
    assert "LEAK" in text.stdout and "a step" in text.stdout and "more steps" in text.stdout
    # ... and the words say "the process", never a pid
    assert "Unaccounted:    n/a" in text.stdout and "pid" not in text.stdout
    assert "the framework's allocated memory (the process)" in text.stdout


def test_csv_clean_and_short(gpumon, tmp_path):
    rows = [(i * 0.1, i, a) for i, a in allocated_series(600, warmup=40)]
    doc = report_json(gpumon, write_csv(tmp_path / "clean.csv", ["time", "step", "allocated"], rows))
    assert doc["leak"]["verdict"] == "none"
    assert doc["leak"]["rate_bytes_per_step"] is None
    short = write_csv(tmp_path / "short.csv", ["time", "allocated"], [(i, GiB + i * MiB) for i in range(20)])
    doc = report_json(gpumon, short)
    assert doc["leak"]["verdict"] == "insufficient_data"
    assert doc["leak"]["confidence"] is None


def test_csv_device_peak_exact_and_columns_any_order(gpumon, tmp_path):
    rnd = random.Random(3)
    rows = [(f"{i * 0.5:.1f}", "x", 10 * GiB + rnd.randrange(GiB), TOTAL) for i in range(100)]
    rows[37] = ("18.5", "x", 71 * GiB + 5, TOTAL)
    path = write_csv(tmp_path / "dev.csv", ["note", "time", "device_used", "device_total"],
                     [(r[1], r[0], r[2], r[3]) for r in rows])
    doc = report_json(gpumon, path)
    assert doc["peak"] == {"bytes": 71 * GiB + 5, "time": 18.5, "what": "device", "dev": 0, "owner": None,
                           "largest": None}
    assert doc["windows"] and doc["windows"][0]["bytes"] == 71 * GiB + 5
    # a CSV of a GPU's columns only is that GPU's view, judged on its used memory
    assert doc["source"]["kind"] == "record" and doc["leak"]["series"] == {
        "kind": "device", "dev": 0, "pid": None, "device": None, "segment": None, "framework": None,
        "rank": None}


def test_csv_process_and_framework_give_unaccounted(gpumon, tmp_path):
    rows = [(i, i, 5 * GiB, 6 * GiB, 6 * GiB + 700 * MiB + i) for i in range(10)]
    doc = report_json(gpumon, write_csv(tmp_path / "p.csv",
                                        ["time", "step", "allocated", "reserved", "process_used"], rows))
    assert doc["unaccounted"]["bytes"] == 700 * MiB + 9
    assert doc["peak"]["what"] == "job"
    assert doc["peak"]["bytes"] == 6 * GiB + 700 * MiB + 9


@pytest.mark.parametrize("header,needle", [
    (["step", "allocated"], "no `time` column (seconds); it names: step, allocated"),
    (["time", "step", "util"], "no memory column"),
    (["time", "device_total"], "no memory column"),
])
def test_csv_missing_columns(gpumon, tmp_path, header, needle):
    path = write_csv(tmp_path / "bad.csv", header, [(1, 2, 3)])
    r = gpumon(["report", str(path)])
    assert r.returncode == 2
    assert needle in r.stderr and str(path) in r.stderr
    assert r.stdout == ""


def test_csv_bad_rows_skipped_and_named(gpumon, tmp_path):
    rows = [(i, GiB + i) for i in range(100)]
    rows[10] = (10, "lots")
    rows[20] = (5, GiB)            # time goes back
    rows[30] = (30, -4)            # negative bytes
    rows[40] = ("", GiB)           # no time
    rows[50] = (50, "")            # unknown: not a problem, not a zero
    doc = report_json(gpumon, write_csv(tmp_path / "rows.csv", ["time", "allocated"], rows))
    damage = doc["source"]["damage"]
    assert damage.startswith("4 rows skipped")
    assert "line 12" in damage and "'lots'" in damage and "allocated" in damage
    assert doc["peak"]["bytes"] == GiB + 99


def test_csv_quoting_bom_crlf_comments(gpumon, tmp_path):
    path = tmp_path / "q.csv"
    path.write_bytes(b"\xef\xbb\xbf# exported by a script\r\n\"time\",\"note, with comma\",allocated\r\n"
                     b"0,\"a \"\"quoted\"\" note, here\",100\r\n1,b,300\r\n2,c,200\r\n")
    doc = report_json(gpumon, path)
    assert doc["peak"]["bytes"] == 300 and doc["peak"]["time"] == 1.0
    assert doc["source"]["damage"] is None


def test_not_a_csv_nor_a_recording(gpumon, tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    r = gpumon(["report", str(empty)])
    assert r.returncode == 2 and "empty" in r.stderr
    long_line = tmp_path / "long.csv"
    long_line.write_text("time,allocated\n" + "1," + "9" * (2 << 20) + "\n")
    r = gpumon(["report", str(long_line)])
    assert r.returncode == 2 and "longer than" in r.stderr and "line 2" in r.stderr
    r = gpumon(["report", str(tmp_path / "missing.csv")])
    assert r.returncode == 255 and "No such file" in r.stderr
    r = gpumon(["report", str(tmp_path)])
    assert r.returncode == 255 and "directory" in r.stderr
    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    r = gpumon(["report", str(other)])
    assert r.returncode == 255 and "not a gpumon recording" in r.stderr
    # a recording of a newer format: the reader's message
    newer = make_recording(tmp_path / "newer.gpumon")
    db = sqlite3.connect(newer)
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    r = gpumon(["report", str(newer)])
    assert r.returncode == 255 and "format version 2" in r.stderr and "newer gpumon" in r.stderr
    assert r.stdout == ""


def test_usage(gpumon):
    r = gpumon(["report"])
    assert r.returncode == 2 and "which file" in r.stderr
    # several files are several nodes' recordings: each must be there, and a recording
    r = gpumon(["report", "a", "b"])
    assert r.returncode == 255 and "report: a: No such file or directory" in r.stderr, r.stderr
    r = gpumon(["report", "--frobnicate", "a"])
    assert r.returncode == 2 and "--frobnicate" in r.stderr
    r = gpumon(["report", "--help"])
    assert r.returncode == 0 and "docs/report.md" in r.stdout


# ---- recordings --------------------------------------------------------------------------------


class Rec:
    """A recording with known rows: the library's file, emptied and refilled."""

    def __init__(self, path, kind="run", exit_status=None):
        make_recording(path)
        self.path = path
        self.db = sqlite3.connect(path)
        for t in ("devices", "processes", "device_samples", "process_samples", "framework_sources",
                  "framework_samples", "events"):
            self.db.execute(f"DELETE FROM {t}")
        self.db.execute("DELETE FROM meta WHERE key IN ('kind', 'job_pid', 'exit_status', 'command')")
        self.start = dict(self.db.execute("SELECT key, value FROM meta"))["start_mono_ns"]
        self.db.execute("INSERT INTO meta VALUES ('kind', ?)", (kind,))
        if exit_status is not None:
            self.db.execute("INSERT INTO meta VALUES ('exit_status', ?)", (exit_status,))
        self.db.execute("INSERT INTO devices VALUES (0, 'GPU-aaaaaaaa-0000-0000-0000-000000000000', 'NVIDIA H200',"
                        " '00000000:00:06.0', ?, NULL)", (TOTAL,))
        self.sources = {}

    def t(self, s):
        return self.start + int(s * S)

    def device(self, s, used, used_max=None):
        self.db.execute("INSERT INTO device_samples (t_ns, dev, memory_api, used_bytes, free_bytes, total_bytes,"
                        " used_min_bytes, used_max_bytes, used_max_t_ns, samples)"
                        " VALUES (?, 0, 2, ?, ?, ?, ?, ?, ?, 1)",
                        (self.t(s), used, TOTAL - used, TOTAL, used, used_max or used, self.t(s)))

    def process(self, s, pid, used, user="alice", command="python train.py", job=False):
        if not self.db.execute("SELECT 1 FROM processes WHERE pid = ?", (pid,)).fetchone():
            self.db.execute("INSERT INTO processes (dev, pid, first_t_ns, flags, foreign_pid, user, command)"
                            " VALUES (0, ?, ?, 49, 0, ?, ?)", (pid, self.t(s), user, command))
            if job:  # a pid of the job's tree, as the library's writer stores it
                self.db.execute("INSERT INTO events (t_ns, kind, text) VALUES (?, 'job', ?)", (self.t(s), f"pid {pid}"))
        self.db.execute("INSERT INTO process_samples VALUES (?, 0, ?, ?, 0)", (self.t(s), pid, used))

    def framework(self, s, pid, step, allocated, reserved, max_allocated=None):
        if pid not in self.sources:
            self.sources[pid] = len(self.sources) + 1
            self.db.execute("INSERT INTO framework_sources VALUES (?, ?, 0, 'torch', ?)",
                            (self.sources[pid], pid, self.t(s)))
        self.db.execute("INSERT INTO framework_samples (t_ns, source, step, allocated_bytes, reserved_bytes,"
                        " max_allocated_bytes) VALUES (?, ?, ?, ?, ?, ?)",
                        (self.t(s), self.sources[pid], step, allocated, reserved, max_allocated or allocated))

    def event(self, s, kind, text):
        self.db.execute("INSERT INTO events (t_ns, kind, text) VALUES (?, ?, ?)", (self.t(s), kind, text))

    def rank(self, pid, rank, world_size, job="job7"):
        """pid is a torchrun worker: its environment read (GPUMON_PROC_RANK_KNOWN) and its rank stored."""
        self.db.execute("UPDATE processes SET flags = flags | 512, rank = ?, local_rank = ?, world_size = ?,"
                        " node_rank = 0, rank_job = ?, rank_launcher = 'torchrun', rank_master = '127.0.0.1:29500'"
                        " WHERE pid = ?", (rank, rank % 8, world_size, job, pid))

    def close(self):
        self.db.commit()
        self.db.close()
        return self.path


def test_recording_job_peak_owner_unaccounted(gpumon, tmp_path):
    rec = Rec(tmp_path / "run.gpumon", exit_status=0)
    rec.process(0.5, 9000, 3 * GiB, user="bob", command="python other.py")
    for i in range(300):
        s = 1 + i * 0.1
        alloc = 4 * GiB + (i % 5) * 100 * MiB
        rec.framework(s, 100, i, alloc, 6 * GiB)
        job = 6 * GiB + 512 * MiB + (2 * GiB if i == 150 else 0)
        rec.process(s, 100, job, job=True)
        rec.process(s, 101, 256 * MiB, command="python train.py --worker", job=True)
        rec.device(s, job + 256 * MiB + 3 * GiB)
    doc = report_json(gpumon, rec.close())
    assert doc["source"]["kind"] == "run" and doc["source"]["exit_status"] == 0
    assert doc["leak"]["verdict"] == "none"
    assert doc["peak"]["what"] == "job"
    assert doc["peak"]["bytes"] == 8 * GiB + 512 * MiB + 256 * MiB  # both job processes, not bob's
    assert doc["peak"]["time"] == pytest.approx(16.0)
    assert doc["peak"]["owner"]["pid"] == 100
    assert doc["fragmentation"]["bytes"] == 2 * GiB
    assert doc["unaccounted"]["bytes"] == 2 * GiB + 512 * MiB and doc["unaccounted"]["pid"] == 100
    assert doc["devices"][0]["name"] == "NVIDIA H200"


def test_recording_oom_co_tenant(gpumon, tmp_path):
    rec = Rec(tmp_path / "oom.gpumon", exit_status=1)
    rec.process(0.2, 4242, 30 * GiB, user="bob", command="python colleague.py")
    for i in range(100):
        s = 1 + i * 0.1
        job = 20 * GiB + i * 300 * MiB
        rec.process(s, 100, job, job=True)
        rec.device(s, job + 30 * GiB)
    rec.event(11.0, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    doc = report_json(gpumon, rec.close())
    oom = doc["oom"]
    assert oom["cause"] == "co-tenant"
    assert oom["figures"]["top_other"]["pid"] == 4242 and oom["figures"]["top_other"]["user"] == "bob"
    assert [h["pid"] for h in oom["holders"]] == [100, 4242]
    assert oom["holders"][0]["job"] is True and oom["holders"][1]["job"] is False
    assert oom["last_seconds"] and oom["last_seconds"][-1]["used_bytes"] == 20 * GiB + 99 * 300 * MiB + 30 * GiB
    assert [e["kind"] for e in doc["events"]] == ["oom"]
    text = gpumon(["report", str(rec.path)]).stdout
    assert "Out of memory:" in text and "co-tenant" in text and "who held what" in text
    # the diagnosis in words, from the document's figures
    assert "the largest pid 4242" in text and "user bob" in text
    assert "11.0 s: out of memory: torch.OutOfMemoryError" in text


def test_recording_oom_leak_and_transient(gpumon, tmp_path):
    rec = Rec(tmp_path / "leak.gpumon", exit_status=1)
    for i, a in allocated_series(400, leak_per_step=40 * MiB):
        rec.framework(1 + i * 0.1, 100, i, a, a + GiB)
    rec.event(41.5, "oom", "CUDA out of memory")
    doc = report_json(gpumon, rec.close())
    assert doc["leak"]["verdict"] == "leak"
    assert doc["oom"]["cause"] == "leak"
    # the model's own alert, on the framework's figures, once
    assert [(a["kind"], a["series"]["kind"], a["live"]) for a in doc["alerts"]] == [("leak", "framework", False)]

    rec = Rec(tmp_path / "peak.gpumon", exit_status=1)
    for i in range(200):
        s = 1 + i * 0.1
        job = 20 * GiB + (i % 3) * MiB
        if i >= 198:
            job = TOTAL - GiB
        rec.process(s, 100, job, job=True)
        rec.device(s, job + GiB)
    rec.event(20.95, "oom", "RESOURCE_EXHAUSTED: Out of memory")
    doc = report_json(gpumon, rec.close())
    assert doc["oom"]["cause"] == "transient peak", doc["oom"]["figures"]


def test_recording_full_card_without_message_is_oom(gpumon, tmp_path):
    rec = Rec(tmp_path / "full.gpumon", exit_status=1)
    for i in range(50):
        rec.process(1 + i * 0.1, 100, TOTAL - GiB, job=True)
        rec.device(1 + i * 0.1, TOTAL)
    doc = report_json(gpumon, rec.close())
    # told from the full card: no message was seen
    assert doc["oom"] is not None and doc["oom"]["message"] is None and doc["oom"]["signs"] == 1
    assert "no message" in gpumon(["report", str(rec.path)]).stdout
    rec = Rec(tmp_path / "ok.gpumon", exit_status=0)
    rec.device(1, TOTAL)
    assert report_json(gpumon, rec.close())["oom"] is None


def big_recording(path, n):
    rec = Rec(path, exit_status=0)
    for i in range(n):
        s = 1 + i * 0.01
        rec.device(s, 10 * GiB + i * MiB)
        rec.framework(s, 100, i, 2 * GiB + i * MiB, 3 * GiB + i * MiB)
    return rec.close()


def test_truncated_recording_reads_what_is_intact(gpumon, tmp_path):
    whole = big_recording(tmp_path / "whole.gpumon", 20000)
    full = report_json(gpumon, whole)
    assert full["source"]["damage"] is None
    cut = tmp_path / "cut.gpumon"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) * 2 // 3])
    r = gpumon(["report", str(cut), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"]["damage"] and "unreadable" in doc["source"]["damage"]
    assert doc["peak"]["bytes"] is not None and doc["peak"]["bytes"] <= full["peak"]["bytes"]
    text = gpumon(["report", str(cut)]).stdout
    assert "Not read:" in text


def test_corrupt_page_skipped_and_counted(gpumon, tmp_path):
    whole = big_recording(tmp_path / "whole.gpumon", 20000)
    data = bytearray(whole.read_bytes())
    page = 4096
    db = sqlite3.connect(whole)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    # scribble over a page in the middle of the file (a leaf of one of the sample tables)
    mid = (len(data) // page // 2) * page
    data[mid:mid + page] = bytes([0x5A]) * page
    bad = tmp_path / "bad.gpumon"
    bad.write_bytes(bytes(data))
    r = gpumon(["report", str(bad), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert re.search(r"\d+ rows of table \w+ are unreadable", doc["source"]["damage"]), doc["source"]["damage"]
    # rows after the bad page were still read: the last samples are in
    assert doc["source"]["duration_s"] == pytest.approx(1 + 19999 * 0.01, abs=0.05)


def test_real_h200_traces(gpumon):
    for name, verdict in [("leak_graph", "leak"), ("leak_cache", "leak"), ("leak_slow", "leak"),
                          ("clean_warmup", "none"), ("clean_dynamic", "none"), ("clean_rare_long", "none"),
                          ("clean_late_state", "none")]:
        doc = report_json(gpumon, os.path.join(EXAMPLES, name + ".gpumon"))
        assert doc["leak"]["verdict"] == verdict, name
        assert doc["peak"]["what"] == "job" and doc["peak"]["owner"]["pid"] > 0, name
        assert doc["source"]["damage"] is None, name
    doc = report_json(gpumon, os.path.join(EXAMPLES, "leak_cache.gpumon"))
    assert doc["leak"]["rate_bytes_per_step"] == pytest.approx(4 * MiB, rel=0.05)


def test_large_csv_bounded_memory(gpumon, tmp_path):
    """a million rows (~45 MB): streamed, so the report's memory does not grow with the file"""
    path = tmp_path / "big.csv"
    with open(path, "w") as f:
        f.write("time,step,allocated,reserved,device_used,device_total\n")
        for i in range(1_000_000):
            a = 2 * GiB + (i % 97) * MiB
            f.write(f"{i * 0.001:.3f},{i},{a},{a + GiB},{a + 2 * GiB},{TOTAL}\n")
    # the report's own peak memory, as wait4 tells it for this child alone. A child started by a
    # process counts that process's memory at the moment it started (Linux keeps the highest mark
    # across fork and exec): a large pytest would count itself. So a fresh small Python starts the
    # report and tells its figure.
    measure = ("import os, subprocess, sys\n"
               "out = open(sys.argv[1], 'wb')\n"
               "p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.PIPE)\n"
               "err = p.stderr.read()\n"
               "_, status, usage = os.wait4(p.pid, 0)\n"
               "print(os.waitstatus_to_exitcode(status), usage.ru_maxrss, err.decode(errors='replace'))\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, "-c", measure, str(out), os.path.abspath(GPUMON_BIN), "report", str(path),
                        "--json"], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    status, maxrss, err = r.stdout.split(" ", 2)
    assert status == "0", err
    leak = json.loads(out.read_text())["leak"]
    assert leak["verdict"] == "none", leak
    assert int(maxrss) < 40 * 1024, f"max RSS {maxrss} KiB"  # the file is 45 MB


def test_system_recording_leak_on_one_process(gpumon, tmp_path):
    """`gpumon record` of a machine: a process leaks, then exits and the device empties; the
    verdict is on the process's own figure, not the device's, which falls back to 0"""
    rec = Rec(tmp_path / "machine.gpumon", kind="record")
    rec.process(0.5, 7000, 2 * GiB, user="carol", command="python serve.py")
    for i in range(400):
        s = 1 + i * 0.1
        rec.process(s, 678, GiB + i * 20 * MiB, command="python train.py")
        rec.device(s, 3 * GiB + i * 20 * MiB)
    rec.db.execute("INSERT INTO process_samples VALUES (?, 0, 678, NULL, 1)", (rec.t(41),))
    for i in range(50):
        rec.device(41 + i * 0.1, 2 * GiB)
    doc = report_json(gpumon, rec.close())
    assert doc["leak"]["verdict"] == "leak"
    assert doc["leak"]["series"]["kind"] == "process" and doc["leak"]["series"]["pid"] == 678
    assert doc["leak"]["rate_bytes_per_second"] == pytest.approx(200 * MiB, rel=0.05)
    assert doc["peak"]["what"] == "device"


def test_bundled_h200_recording(gpumon):
    path = os.path.join(os.path.dirname(__file__), "../../examples/recordings/h200_train_leak.gpumon")
    doc = report_json(gpumon, path)
    assert doc["source"]["kind"] == "record"
    assert doc["leak"]["verdict"] == "leak" and doc["leak"]["series"]["kind"] == "process"
    assert doc["peak"]["owner"]["command"].startswith("python3 tests/gpu/trainer.py leak_cache")


# ---- one answer: the library's document, every series judged, no made-up pid ------------------


def library_document(path):
    """The run model's document of a recording, made here through libgpumon itself (ctypes): the
    same calls as gpumon.report() in Python."""
    import ctypes
    lib_path = None
    out = subprocess.run(["ldd", os.path.abspath(GPUMON_BIN)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if "libgpumon" in line and "=>" in line:
            lib_path = line.split("=>")[1].split("(")[0].strip()
    assert lib_path and os.path.exists(lib_path), out
    lib = ctypes.CDLL(lib_path)

    class ModelConfig(ctypes.Structure):
        _fields_ = [("size", ctypes.c_uint), ("flags", ctypes.c_uint), ("meta", ctypes.c_void_p),
                    ("limit_bytes", ctypes.c_uint64), ("cuda_visible_devices", ctypes.c_char_p),
                    ("headroom_share", ctypes.c_double), ("max_processes", ctypes.c_uint),
                    ("source", ctypes.c_char_p), ("source_type", ctypes.c_char_p)]

    reader, model, text = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
    assert lib.gpumon_reader_create(str(path).encode(), ctypes.byref(reader)) == 0
    cfg = ModelConfig(ctypes.sizeof(ModelConfig), 0, None, 0, None, 0.0, 0, str(path).encode(), b"recording")
    assert lib.gpumon_model_create(ctypes.byref(cfg), ctypes.byref(model)) == 0
    assert lib.gpumon_model_load(model, reader) == 0
    assert lib.gpumon_model_finish(model, ctypes.c_uint64(0), -1) == 0
    assert lib.gpumon_model_document(model, 0, ctypes.byref(text)) == 0
    doc = ctypes.string_at(text).decode()
    lib.gpumon_free(text)
    lib.gpumon_model_destroy(model)
    lib.gpumon_reader_destroy(reader)
    return doc


# A sanitized libgpumon cannot be loaded into an uninstrumented Python (ctypes), and the Python
# package is not built then: the unsanitized build of `make test` checks these.
SANITIZED = os.environ.get("GPUMON_SANITIZED") == "ON"
needs_plain_library = pytest.mark.skipif(SANITIZED, reason="a sanitized libgpumon does not load into Python")


@needs_plain_library
@pytest.mark.parametrize("name", ["leak_cotenant_oom", "clean_warmup"])
def test_json_is_the_library_document(gpumon, name):
    """--json prints the run model's document as the library makes it, byte for byte: what
    gpumon.report() returns in Python"""
    path = os.path.join(EXAMPLES, name + ".gpumon")
    r = gpumon(["report", path, "--json"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == library_document(path) + "\n"
    # and the verdict the text states is the document's
    doc = json.loads(r.stdout)
    text = gpumon(["report", path]).stdout
    verdict = {"leak": "Leak:           LEAK on", "none": "Leak:           none:"}[doc["leak"]["verdict"]]
    assert verdict in text


@needs_plain_library
def test_json_equals_python_report(gpumon):
    """gpumon.report(path) of the Python package (built beside the program) returns the same
    document as `gpumon report PATH --json`"""
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(GPUMON_BIN))), "python")
    assert os.path.exists(os.path.join(package, "gpumon", "__init__.py")), \
        "the Python package is not built beside " + GPUMON_BIN
    path = os.path.join(EXAMPLES, "leak_cotenant_oom.gpumon")
    py = subprocess.run([sys.executable, "-c", "import gpumon, json, sys; print(json.dumps(gpumon.report(sys.argv[1])))",
                         path], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=package))
    assert py.returncode == 0, py.stderr
    assert json.loads(py.stdout) == report_json(gpumon, path)


def restarted_rows():
    """allocated of one process whose loop runs twice (its step counter restarts): a leak of 8 MiB a
    step in the first run, none in the second"""
    rows = []
    for i, a in allocated_series(300, leak_per_step=8 * MiB, seed=5):
        rows.append((1 + i * 0.1, i, a))
    for i, a in allocated_series(300, seed=6):
        rows.append((40 + i * 0.1, i, a))
    return rows


def check_two_segments(doc, text):
    fw = [v for v in doc["series"] if v["series"]["kind"] == "framework"]
    assert [(v["series"]["segment"], v["verdict"]) for v in fw] == [(0, "leak"), (1, "none")]
    assert fw[0]["rate_bytes_per_step"] == pytest.approx(8 * MiB, rel=0.05)
    # the run's verdict is the leak, and both segments are listed and judged in the text
    assert doc["leak"]["verdict"] == "leak" and doc["leak"]["series"]["segment"] == 0
    lines = []
    for line in text.split("Series judged:\n")[1].splitlines():
        if not line.startswith("  "):
            break
        lines.append(line)
    framework_lines = [l for l in lines if "the framework's allocated memory" in l]
    assert len(framework_lines) == 2, text
    assert framework_lines[0].startswith("  LEAK on") and "loop restart" not in framework_lines[0]
    assert framework_lines[1].startswith("  none:") and "loop restart 1" in framework_lines[1]


def test_restarted_step_counter_two_judged_segments(gpumon, tmp_path):
    rec = Rec(tmp_path / "twice.gpumon", exit_status=0)
    for s, step, a in restarted_rows():
        rec.framework(s, 100, step, a, a + GiB)
    rec.close()
    doc = report_json(gpumon, rec.path)
    text = gpumon(["report", str(rec.path)]).stdout
    check_two_segments(doc, text)
    assert "(torch, pid 100, loop restart 1)" in text
    # NVML never listed the process: why its memory outside the allocator is unknown, in words
    assert [f["unaccounted_why"] for f in doc["frameworks"]] == ["no_nvml_figure"] * 2
    assert "Unaccounted:    n/a (NVML lists no memory of the process on its GPU)" in text
    # the same from a CSV
    path = write_csv(tmp_path / "twice.csv", ["time", "step", "allocated"], restarted_rows())
    doc = report_json(gpumon, path)
    text = gpumon(["report", str(path)]).stdout
    check_two_segments(doc, text)
    assert "(the process, loop restart 1)" in text


def test_csv_never_shows_a_pid(gpumon, tmp_path):
    """A CSV names no process: its records carry a stand-in pid, which the text and the page word as
    "the process", wherever the document names a process (peak owner, series, figures, timelines)"""
    rows = [(i * 0.5, i, 5 * GiB + i * 4 * MiB, 6 * GiB + i * 4 * MiB, 6 * GiB + 700 * MiB + i * 4 * MiB,
             8 * GiB + i * 4 * MiB, TOTAL) for i in range(300)]
    path = write_csv(tmp_path / "p.csv", ["time", "step", "allocated", "reserved", "process_used", "device_used",
                                          "device_total"], rows)
    doc = report_json(gpumon, path)
    assert doc["peak"]["what"] == "job" and doc["peak"]["owner"]["pid"] == 0
    # a run is judged on the job's own figures: not on the GPU's, which mix in whatever else runs there
    assert {v["series"]["kind"] for v in doc["series"]} == {"framework", "job", "process"}
    text = gpumon(["report", str(path)]).stdout.replace(str(path), "p.csv")
    assert "pid" not in text, text
    assert "the rise of the process" in text and "the process on GPU 0 (NVML)" in text
    assert "(the process)" in text
    page = tmp_path / "p.html"
    r = gpumon(["report", str(path), "--html", str(page)])
    assert r.returncode == 0, r.stderr
    raw = page.read_text()
    start = raw.index('<script type="application/json" id="gpumon-data">')
    embedded = json.loads(raw[raw.index(">", start) + 1:raw.index("</script>", start)])
    pids = []

    def walk(v):
        if isinstance(v, dict):
            pids.extend(x for k, x in v.items() if k == "pid")
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(embedded)
    assert pids and set(pids) == {None}
    summary = raw[raw.index("<main>"):raw.index("</main>")].replace(str(path), "p.csv")
    assert "pid" not in summary and "the process" in summary


def test_alert_given_live_listed_once(gpumon, tmp_path):
    """The model's leak alert and the "alert" event the job's front end wrote at that moment are one
    alert: listed once, as given live, with the run's verdict stated beside it; an alert event at
    another moment is listed on its own"""
    rec = Rec(tmp_path / "live.gpumon", exit_status=0)
    times = {}
    for i, a in allocated_series(400, leak_per_step=16 * MiB, seed=9):
        s = 1 + i * 0.1
        times[round(s, 6)] = rec.t(s)
        rec.framework(s, 100, i, a, a + GiB)
    rec.close()
    doc = report_json(gpumon, rec.path)
    assert [(a["kind"], a["live"]) for a in doc["alerts"]] == [("leak", False)]
    # the moment of the model's alert, on the recording's clock (a framework sample's time)
    t_ns = min(times.values(), key=lambda t: abs((t - rec.start) / 1e9 - doc["alerts"][0]["time"]))
    db = sqlite3.connect(rec.path)
    db.execute("INSERT INTO events (t_ns, kind, text) VALUES (?, 'alert', 'leak suspected (told live)')", (t_ns,))
    db.execute("INSERT INTO events (t_ns, kind, text) VALUES (?, 'alert', 'over --limit')", (rec.t(35.0),))
    db.commit()
    db.close()
    doc = report_json(gpumon, rec.path)
    assert [(a["kind"], a["live"]) for a in doc["alerts"]] == [("leak", True)]
    text = gpumon(["report", str(rec.path)]).stdout
    alerts = text.split("Alerts:\n")[1].splitlines()
    assert len(alerts) == 2, text
    assert ": leak: the framework's allocated memory (torch, pid 100) rises by" in alerts[0]
    assert alerts[0].endswith("(given live)")
    assert alerts[1] == "  35.0 s: over --limit (given live)"
    assert "told live" not in text
    assert "Leak:           LEAK on the framework's allocated memory (torch, pid 100)" in text


def test_seventy_gpus_sources_and_processes_all_counted(gpumon, tmp_path):
    """Nothing past a 64th is dropped unsaid: 70 GPUs and 70 framework sources are all reported,
    exported and replayed; of 70 processes the page draws the 64 largest and says 6 more held memory."""
    rec = Rec(tmp_path / "many.gpumon", exit_status=0)
    n = 70
    for d in range(1, n):
        rec.db.execute("INSERT INTO devices VALUES (?, ?, 'NVIDIA H200', ?, ?, NULL)",
                       (d, f"GPU-{d:08x}-0000-0000-0000-000000000000", f"00000000:{d:02X}:00.0", TOTAL))
    for i in range(10):
        s = 1 + i * 0.5
        for d in range(n):
            rec.db.execute("INSERT INTO device_samples (t_ns, dev, memory_api, used_bytes, free_bytes, total_bytes,"
                           " used_min_bytes, used_max_bytes, used_max_t_ns, samples) VALUES (?, ?, 2, ?, ?, ?, ?, ?, ?, 1)",
                           (rec.t(s), d, (d + 1) * GiB, TOTAL - (d + 1) * GiB, TOTAL, (d + 1) * GiB, (d + 1) * GiB,
                            rec.t(s)))
        for p in range(n):
            rec.framework(s, 1000 + p, i, GiB + p * MiB, 2 * GiB)
            rec.process(s, 1000 + p, (p + 1) * MiB, job=True)
    path = rec.close()
    r = gpumon(["report", str(path), "--json", "--html", str(tmp_path / "many.html")])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [d["dev"] for d in doc["devices"]] == list(range(n))
    assert sorted(f["pid"] for f in doc["frameworks"]) == [1000 + p for p in range(n)]
    assert doc["source"]["damage"] is None
    page = (tmp_path / "many.html").read_text()
    m = re.search(r'<script type="application/json" id="gpumon-data">(.*?)</script>', page, re.S)
    timeline = json.loads(m.group(1))["timeline"]
    assert len(timeline["devices"]) == n and len(timeline["framework"]) == n
    assert len(timeline["processes"]) == 64 and timeline["processes_left_out"] == n - 64
    assert {p["pid"] for p in timeline["processes"]} == {1000 + p for p in range(n - 64, n)}  # the largest
    assert "6 more processes held memory than are drawn here: the charts show the 64 with the highest peaks" in page
    for table, key in (("device", "dev"), ("framework", "pid"), ("process", "pid")):
        r = gpumon(["export", str(path), "--csv", "--table", table])
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert len({row[key] for row in csv.DictReader(io.StringIO(r.stdout))}) == n, table
    r = gpumon(["watch", "--replay", str(path), "--speed", "0", "--batch", "-n", "1"])
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^GPU \d+ ", r.stdout, re.M)) == n


def page_timeline(path):
    page = path.read_text()
    m = re.search(r'<script type="application/json" id="gpumon-data">(.*?)</script>', page, re.S)
    return page, json.loads(m.group(1))["timeline"]


def test_page_carries_every_rank_beyond_the_64_largest(gpumon, tmp_path):
    """A job's 4 workers hold less than 70 other processes on the GPU: the page's document carries
    the 64 largest and the 4 workers besides, so that each rank can be drawn; 6 are said left out."""
    rec = Rec(tmp_path / "ranks.gpumon", exit_status=0)
    for i in range(5):
        s = 1 + i * 0.5
        rec.device(s, 75 * GiB)
        for p in range(70):
            rec.process(s, 5000 + p, GiB + p * MiB, user="bob", command="python other.py")
        for r in range(4):
            rec.process(s, 1000 + r, 100 * MiB + r * MiB, job=True)
    for r in range(4):
        rec.rank(1000 + r, r, 4)
    path = rec.close()
    r = gpumon(["report", str(path), "--json", "--html", str(tmp_path / "ranks.html")])
    assert r.returncode == 0, r.stderr
    assert [w["pid"] for w in json.loads(r.stdout)["ranks"]] == [1000, 1001, 1002, 1003]
    page, timeline = page_timeline(tmp_path / "ranks.html")
    pids = {p["pid"] for p in timeline["processes"]}
    assert pids == {5000 + p for p in range(6, 70)} | {1000, 1001, 1002, 1003}, sorted(pids)
    assert timeline["processes_left_out"] == 6
    assert "6 more processes held memory than are drawn here: the charts show 68, the job's ranks and the " \
           "processes with the highest peaks." in page


def test_page_carries_at_most_256_ranks(gpumon, tmp_path):
    """300 workers: the 64 largest, then, up to 256 workers in all, the ends of the skew between the
    ranks (the lowest peak and mean: rank 0), then by rank."""
    rec = Rec(tmp_path / "ranks.gpumon", kind="record")
    for i in range(3):
        s = 1 + i * 0.5
        rec.device(s, 75 * GiB)
        for r in range(300):
            rec.process(s, 1000 + r, 100 * MiB + r * MiB)
    for r in range(300):
        rec.rank(1000 + r, r, 300)
    path = rec.close()
    r = gpumon(["report", str(path), "--json", "--html", str(tmp_path / "ranks.html")])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert len(doc["ranks"]) == 300 and (doc["rank_skew"]["peak_min_rank"], doc["rank_skew"]["peak_max_rank"]) == (0, 299)
    _, timeline = page_timeline(tmp_path / "ranks.html")
    assert {p["pid"] - 1000 for p in timeline["processes"]} == set(range(192)) | set(range(236, 300))
    assert timeline["processes_left_out"] == 300 - 256


def test_recording_of_which_nothing_could_be_read_is_refused(gpumon, tmp_path):
    """no samples, or every table damaged: one line saying nothing could be read, exit status 2 (bad
    input), never a report of a run that held no memory; a recording with some of it readable is
    still reported (0) and says what was lost"""
    empty = Rec(tmp_path / "empty.gpumon")
    empty.event(1.0, "marker", "started")  # events alone say nothing of memory
    empty.close()
    r = gpumon(["report", str(empty.path)])
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"gpumon: report: {empty.path}: nothing could be read: the recording holds no samples\n"
    whole = big_recording(tmp_path / "whole.gpumon", 2000)
    db = sqlite3.connect(whole)
    page = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    data = whole.read_bytes()
    cut = tmp_path / "cut.gpumon"
    cut.write_bytes(data[:2 * page])  # the header and the schema: every table's rows gone
    for args in ([], ["--json"], ["--html", str(tmp_path / "cut.html")]):
        r = gpumon(["report", str(cut), *args])
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        assert r.stderr.startswith(f"gpumon: report: {cut}: nothing could be read: the file is damaged or cut "
                                   f"short ({2 * page} bytes); ")
        assert "table device_samples is unreadable" in r.stderr and len(r.stderr.splitlines()) == 1
    assert not (tmp_path / "cut.html").exists()
    half = tmp_path / "half.gpumon"
    half.write_bytes(data[:len(data) // 2])
    r = gpumon(["report", str(half)])
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert re.search(r"^Not read: .*unreadable", r.stdout, re.M), r.stdout


def stale_recording(path, old=False, answered=False):
    """two GPUs; GPU 1 stops answering at 3 s (and answers again at 6 s when answered), as the
    sampler says it; old: events as recordings kept them before they named their GPU"""
    rec = Rec(path)
    rec.db.execute("INSERT INTO devices VALUES (1, 'GPU-bbbbbbbb-0000-0000-0000-000000000000', 'NVIDIA H200',"
                   " '00000000:0B:00.0', ?, NULL)", (TOTAL,))
    for i in range(10):
        rec.device(i, 10 * GiB)
        if i < 3:
            rec.db.execute("INSERT INTO device_samples (t_ns, dev, memory_api, used_bytes, free_bytes, total_bytes,"
                           " used_min_bytes, used_max_bytes, used_max_t_ns, samples) VALUES (?, 1, 2, ?, ?, ?, ?, ?,"
                           " ?, 1)", (rec.t(i), GiB, TOTAL - GiB, TOTAL, GiB, GiB, rec.t(i)))
    if old:
        rec.db.execute("DROP TABLE events")
        rec.db.execute("CREATE TABLE events (t_ns INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT)")
    events = [(3.0, "stale", "GPU 1 has not answered a driver call for 2 s: its samples are missing until it does")]
    if answered:
        events.append((6.0, "answering", "GPU 1 answers again"))
    events.append((4.0, "note", "a note of the whole run"))
    for s, kind, text in sorted(events):  # written in time order, as the recorder does
        if old:
            rec.event(s, kind, text)
        else:
            rec.db.execute("INSERT INTO events (t_ns, kind, text, dev) VALUES (?, ?, ?, ?)",
                           (rec.t(s), kind, text, 1 if kind != "note" else None))
    return rec.close()


def test_stale_events_are_listed_under_their_gpu(gpumon, tmp_path):
    path = stale_recording(tmp_path / "stale.gpumon", answered=True)
    doc = report_json(gpumon, path)
    assert [(e["kind"], e["dev"]) for e in doc["events"]] == [("stale", 1), ("note", None), ("answering", 1)]
    text = gpumon(["report", str(path)]).stdout
    gpu1 = text[text.index("GPU 1:"):text.index("Leak:")]
    assert ("  3.0 s: GPU 1 has not answered a driver call for 2 s: its samples are missing until it does\n"
            "  6.0 s: GPU 1 answers again\n") in gpu1, text
    assert "answer" not in text[:text.index("GPU 1:")] and "GPU n/a" not in text
    # a recording made before events kept their GPU: the event is shown, under "GPU n/a"
    old = stale_recording(tmp_path / "old.gpumon", old=True)
    doc = report_json(gpumon, old)
    assert [(e["kind"], e["dev"]) for e in doc["events"]] == [("stale", None), ("note", None)]
    text = gpumon(["report", str(old)]).stdout
    assert ("GPU n/a:        the recording did not keep which GPU these were about\n"
            "  3.0 s: GPU 1 has not answered a driver call for 2 s: its samples are missing until it does\n") in text
    assert "has not answered" not in text[text.index("GPU 1:"):text.index("GPU n/a:")]


def test_the_recorder_keeps_a_stale_events_gpu(tmp_path):
    """what `gpumon record` writes when GPU 1's driver calls hang: the events name GPU 1"""
    from test_driver_faults import HANG, record
    out, _ = record(tmp_path, HANG, 4.5)
    db = sqlite3.connect(out)
    rows = db.execute("SELECT kind, dev FROM events WHERE kind IN ('stale', 'answering') ORDER BY t_ns").fetchall()
    other = db.execute("SELECT DISTINCT dev FROM events WHERE kind NOT IN ('stale', 'answering')").fetchall()
    db.close()
    assert rows == [("stale", 1), ("answering", 1)], rows
    assert other in ([], [(None,)]), other


def test_serve_replay_shows_a_stale_gpu_as_live_serve_does(tmp_path):
    """gpumon_gpu_up 0 and gpumon_gpu_down_info{reason="not_answering"} for the GPU a replayed
    recording's stale event names, as live serve shows it (test_driver_faults.py); up again after its
    answering event; a recording made before events kept their GPU marks none"""
    from test_serve import parse, one
    import urllib.request

    def replay(path):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
        env.update(GPUMON_NVML_LIBRARY=str(tmp_path / "no-libnvidia-ml.so"), LC_ALL="C")
        p = subprocess.Popen([os.path.abspath(GPUMON_BIN), "serve", "--listen", "127.0.0.1:0", "--replay", str(path)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = p.stderr.readline()
            m = re.search(r"serving http://(\S+)/metrics", line)
            assert m, line
            with urllib.request.urlopen(f"http://{m.group(1)}/metrics", timeout=10) as resp:
                return parse(resp.read().decode())
        finally:
            p.terminate()
            assert p.wait(timeout=10) == 0

    m = replay(stale_recording(tmp_path / "stale.gpumon"))
    assert one(m, "gpumon_gpu_up", gpu=1) == 0 and one(m, "gpumon_gpu_up", gpu=0) == 1
    assert one(m, "gpumon_gpu_down_info", gpu=1, reason="not_answering") == 1
    m = replay(stale_recording(tmp_path / "answered.gpumon", answered=True))
    assert one(m, "gpumon_gpu_up", gpu=1) == 1 and "gpumon_gpu_down_info" not in m
    m = replay(stale_recording(tmp_path / "old.gpumon", old=True))
    assert one(m, "gpumon_gpu_up", gpu=1) == 1 and "gpumon_gpu_down_info" not in m
