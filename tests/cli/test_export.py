# SPDX-License-Identifier: MIT
"""`gpumon export`: every table as CSV and JSON lines, times and absent values, a recording
whose writer was killed, files that are not recordings, and bad usage.

The recording comes from the unit test program: `test_recording PATH` writes a small known one
(records at 0.5 s, 1.0 s and 1.5 s after the start) through the gpumon_recording_* API.
"""
import csv
import io
import json
import os
import re
import sqlite3
import subprocess
from datetime import datetime, timezone

import pytest

TEST_RECORDING_BIN = os.environ.get(
    "TEST_RECORDING_BIN", os.path.join(os.path.dirname(__file__), "../../build/tests/test_recording"))

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
H200_UUID = "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51"
GiB = 1 << 30


def make_recording(path, *extra):
    r = subprocess.run([os.path.abspath(TEST_RECORDING_BIN), str(path), *extra], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return path


@pytest.fixture
def recording(tmp_path):
    return make_recording(tmp_path / "run.gpumon")


def start_of(path):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    db.close()
    return meta["start_mono_ns"], meta["start_wall_ns"]


def utc(wall_ns):
    secs, ns = divmod(wall_ns, 10**9)
    return datetime.fromtimestamp(secs, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{ns // 1000:06d}Z"


def export_csv(gpumon, path, *args):
    r = gpumon(["export", str(path), "--csv", *args])
    assert r.returncode == 0, r.stderr
    return list(csv.DictReader(io.StringIO(r.stdout)))


def export_jsonl(gpumon, path, *args):
    r = gpumon(["export", str(path), "--jsonl", *args])
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_device_csv(gpumon, recording):
    r = gpumon(["export", str(recording), "--csv"])
    assert r.returncode == 0, r.stderr
    header = r.stdout.splitlines()[0].split(",")
    assert header[:4] == ["t_s", "time_utc", "dev", "uuid"]
    for col in ("used_bytes", "free_bytes", "reserved_bytes", "total_bytes", "used_min_bytes", "used_max_bytes",
                "used_max_t_s", "samples", "util_gpu_pct", "util_memory_pct", "temperature_c", "power_mw",
                "energy_mj", "clock_sm_mhz", "clock_mem_mhz", "memory_api"):
        assert col in header
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert [(row["t_s"], row["dev"]) for row in rows] == [("0.500000", "0"), ("0.500000", "1"), ("1.000000", "0")]
    mono, wall = start_of(recording)
    assert rows[0]["time_utc"] == utc(wall + 500_000_000)
    assert rows[2]["time_utc"] == utc(wall + 1_000_000_000)
    assert all(ISO.match(row["time_utc"]) for row in rows)
    first = rows[0]
    assert first["uuid"] == H200_UUID
    assert int(first["used_bytes"]) == GiB and int(first["reserved_bytes"]) == 644939776
    assert int(first["power_mw"]) == 612345 and first["memory_api"] == "2"
    assert first["used_max_t_s"] == "0.497000"  # a time column, also seconds since the start
    # GPU 1 has only the v1 memory figures: the rest is empty, never 0
    v1 = rows[1]
    assert v1["memory_api"] == "1" and int(v1["used_bytes"]) == 10 * GiB
    for col in ("reserved_bytes", "used_min_bytes", "used_max_bytes", "used_max_t_s", "samples", "util_gpu_pct",
                "temperature_c", "power_mw", "energy_mj", "clock_sm_mhz"):
        assert v1[col] == "", col
    assert all(row["energy_mj"] == "" for row in rows)


def test_device_jsonl(gpumon, recording):
    rows = export_jsonl(gpumon, recording)
    assert len(rows) == 3
    assert [row["t_s"] for row in rows] == [0.5, 0.5, 1.0]
    assert list(rows[0])[:4] == ["t_s", "time_utc", "dev", "uuid"]
    assert rows[0]["used_bytes"] == GiB and isinstance(rows[0]["power_mw"], int)
    assert rows[0]["energy_mj"] is None
    assert rows[1]["reserved_bytes"] is None and rows[1]["util_gpu_pct"] is None and rows[1]["samples"] is None
    assert rows[1]["used_bytes"] == 10 * GiB
    csv_rows = export_csv(gpumon, recording)
    assert [r["time_utc"] for r in csv_rows] == [r["time_utc"] for r in rows]


def test_matches_the_file(gpumon, recording):
    """The export says what the file holds, read here independently of gpumon."""
    mono, _ = start_of(recording)
    db = sqlite3.connect(f"file:{recording}?mode=ro", uri=True)
    want = [(f"{(t - mono) / 1e9:.6f}", str(dev), "" if used is None else str(used))
            for t, dev, used in db.execute("SELECT t_ns, dev, used_bytes FROM device_samples ORDER BY t_ns, rowid")]
    db.close()
    got = [(r["t_s"], r["dev"], r["used_bytes"]) for r in export_csv(gpumon, recording)]
    assert got == want


def test_process_table(gpumon, recording):
    rows = export_csv(gpumon, recording, "--table", "process")
    assert [(r["t_s"], r["dev"], r["pid"], r["gone"]) for r in rows] == [
        ("0.500000", "0", "4242", "0"), ("1.000000", "1", "999", "0"), ("1.500000", "0", "4242", "1")]
    assert rows[0]["used_bytes"] == str(GiB) and rows[0]["user"] == "alice" and rows[0]["name"] == "python"
    assert rows[0]["command"] == 'python train.py --note "a, b"'  # quoted in CSV, read back whole
    assert rows[0]["uuid"] == H200_UUID
    # a process of another PID namespace whose memory the driver does not tell
    assert rows[1]["used_bytes"] == "" and rows[1]["user"] == "" and rows[1]["command"] == ""
    assert rows[2]["used_bytes"] == "" and rows[2]["user"] == "alice"
    js = export_jsonl(gpumon, recording, "--table=process")
    assert js[1]["used_bytes"] is None and js[1]["user"] is None and js[2]["gone"] == 1
    assert js[0]["used_bytes"] == GiB


def test_framework_table(gpumon, recording):
    rows = export_jsonl(gpumon, recording, "-t", "framework")
    assert [(r["t_s"], r["step"], r["framework"], r["pid"], r["device"]) for r in rows] == [
        (0.5, 1, "torch", 4242, 0), (1.0, 2, "torch", 4242, 0)]
    assert rows[0]["allocated_bytes"] == GiB and rows[0]["reserved_bytes"] == 2 * GiB
    assert rows[0]["max_allocated_bytes"] is None and rows[1]["reserved_bytes"] is None
    c = export_csv(gpumon, recording, "-t", "framework")
    assert c[0]["max_allocated_bytes"] == "" and c[1]["max_allocated_bytes"] == str(3 * GiB // 2)


def test_events_table(gpumon, recording):
    rows = export_csv(gpumon, recording, "--table", "events")
    assert [(r["t_s"], r["kind"], r["text"]) for r in rows] == [
        ("1.000000", "marker", "epoch 1"), ("1.500000", "note", 'two words, "quoted"\nand a second line')]
    js = export_jsonl(gpumon, recording, "--table", "events")
    assert js[1]["text"] == 'two words, "quoted"\nand a second line'


def test_output_file(gpumon, recording, tmp_path):
    out = tmp_path / "device.csv"
    r = gpumon(["export", str(recording), "--csv", "-o", str(out)])
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert out.read_text().startswith("t_s,time_utc,dev,")
    assert len(out.read_text().splitlines()) == 4
    r = gpumon(["export", str(recording), "--jsonl", f"--output={out}"])
    assert r.returncode == 0 and out.read_text().startswith('{"t_s":0.5,')


def test_refuses_to_overwrite_the_recording(gpumon, recording):
    before = recording.read_bytes()
    r = gpumon(["export", str(recording), "--csv", "-o", str(recording)])
    assert r.returncode == 2
    assert "would overwrite the recording" in r.stderr
    assert recording.read_bytes() == before


def test_killed_writer(gpumon, tmp_path):
    """A writer killed before closing leaves a WAL beside the file: the export reads it all."""
    path = make_recording(tmp_path / "killed.gpumon", "--kill")
    assert os.path.exists(str(path) + "-wal")
    rows = export_csv(gpumon, path, "--table", "events")
    assert [r["kind"] for r in rows] == ["marker", "note"]
    assert len(export_csv(gpumon, path)) == 3


@pytest.mark.parametrize("percent", [20, 45, 66, 90])
def test_truncated_recording_exports_what_report_reads(gpumon, tmp_path, percent):
    """A file cut short: every row the reader gives is written (as many as gpumon report takes in), and
    what could not be read is said on stderr, in the report's words; the exit status is 0."""
    from test_report import big_recording  # test_report imports this module: imported when run
    whole = big_recording(tmp_path / "whole.gpumon", 20000)
    cut = tmp_path / "cut.gpumon"
    data = whole.read_bytes()
    cut.write_bytes(data[: len(data) * percent // 100])
    r = gpumon(["report", str(cut), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"]["damage"] and doc["source"]["records"] > 0
    rows = 0
    for table in ("device", "framework"):
        r = gpumon(["export", str(cut), "--csv", "--table", table])
        assert r.returncode == 0, r.stderr
        rows += len(r.stdout.splitlines()) - 1
        assert r.stderr == (f"gpumon: export: {cut}: not everything could be read, the rest is written: "
                            f"{doc['source']['damage']}\n"), r.stderr
    assert rows == doc["source"]["records"]


def test_not_a_recording(gpumon, tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n" * 100)
    r = gpumon(["export", str(text), "--csv"])
    assert r.returncode == 255
    assert "is not a gpumon recording (not an SQLite database)" in r.stderr

    other = tmp_path / "other.db"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    r = gpumon(["export", str(other), "--jsonl"])
    assert r.returncode == 255
    assert "is not a gpumon recording (an SQLite database of another program)" in r.stderr

    r = gpumon(["export", str(tmp_path / "missing.gpumon"), "--csv"])
    assert r.returncode == 255 and "No such file or directory" in r.stderr
    r = gpumon(["export", str(tmp_path), "--csv"])
    assert r.returncode == 255 and "is a directory" in r.stderr


def test_unknown_version(gpumon, recording):
    db = sqlite3.connect(recording)
    db.execute("PRAGMA user_version = 2")
    db.commit()
    db.close()
    r = gpumon(["export", str(recording), "--csv"])
    assert r.returncode == 255
    assert "format version 2" in r.stderr and "reads version 1" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args, message", [
    ([], "name a FILE"),
    (["{rec}"], "choose --csv or --jsonl"),
    (["{rec}", "--csv", "--jsonl"], "exclude each other"),
    (["{rec}", "--csv", "--table", "gpu"], "unknown table 'gpu'"),
    (["{rec}", "--csv", "-o"], "needs a value"),
    (["{rec}", "--csv", "--frobnicate"], "unexpected argument '--frobnicate'"),
    (["{rec}", "{rec}", "--csv"], "unexpected argument"),
])
def test_usage_errors(gpumon, recording, args, message):
    r = gpumon(["export"] + [a.format(rec=recording) for a in args])
    assert r.returncode == 2
    assert message in r.stderr
    assert r.stdout == ""


def test_help(gpumon):
    r = gpumon(["export", "--help"])
    assert r.returncode == 0
    assert r.stdout.startswith("Usage: gpumon export FILE (--csv | --jsonl)")
    for word in ("--table", "device", "process", "framework", "events", "--output", "time_utc", "never 0",
                 "change-only", "holds until the next row"):
        assert word in r.stdout
    assert "export" in gpumon(["--help"]).stdout


def test_events_match_the_file(gpumon):
    """Every event as the file holds it, the job's pids included (the reader gives those back as the
    job's records; the export writes them in the words that were stored)"""
    path = os.path.join(os.path.dirname(__file__), "../../examples/traces/leak_cotenant_oom.gpumon")
    mono, _ = start_of(path)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    want = [(f"{(t - mono) / 1e9:.6f}", kind, text or "")
            for t, kind, text in db.execute("SELECT t_ns, kind, text FROM events ORDER BY t_ns, rowid")]
    db.close()
    got = [(r["t_s"], r["kind"], r["text"]) for r in export_csv(gpumon, path, "--table", "events")]
    assert ("0.000449", "job", "pid 1564: the command") in got
    assert got == want
