# SPDX-License-Identifier: MIT
"""`gpumon report` on the text files other tools write: nvidia-smi's --query-gpu and
--query-compute-apps CSV logs (with and without units, with and without the timestamp column),
`gpumon query -l` output, the tables of `gpumon export --csv`, the Python monitor's csv= and jsonl=
files; and a file that is none of these. The logs in tests/fixtures/report/ are in nvidia-smi's
exact format (header once, ", " between fields, "[N/A]"); every real log kept in
tests/fixtures/smi/log-*.csv is read too."""
import ast
import csv
import glob
import json
import os
import re
import signal
import subprocess
import time

import pytest

from conftest import GPUMON, H200
from test_run import PY, SERIES_CLIENT, environment

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "../fixtures/report")
SMI_LOGS = sorted(glob.glob(os.path.join(HERE, "../fixtures/smi/log-*.csv")))
ROOT = os.path.join(HERE, "../..")
MiB = 1 << 20
GiB = 1 << 30


def fixture(name):
    return os.path.join(FIXTURES, name)


def report(gpumon, path, *args):
    r = gpumon(["report", str(path), "--json", *args])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def without_path(doc):
    d = json.loads(json.dumps(doc))
    d["source"]["path"] = None
    return d


def series(doc, kind, **match):
    return [s for s in doc["series"]
            if s["series"]["kind"] == kind and all(s["series"].get(k) == v for k, v in match.items())]


# ---- nvidia-smi --query-gpu ---------------------------------------------------------------------

def test_smi_query_gpu_log_units_and_nounits(gpumon):
    """timestamp, index, uuid, memory.used [MiB], memory.total [MiB] with -l 1: GPU 0 grows by 64 MiB
    a second, GPU 1 holds still. With nounits the values lose " MiB" but the header keeps it: the
    same document."""
    doc, err = report(gpumon, fixture("smi-gpu-units.csv"))
    assert err == ""
    src = doc["source"]
    assert src["type"] == "nvidia-smi" and src["kind"] == "record" and src["damage"] is None
    assert src["start_utc"] is not None and abs(src["duration_s"] - 89.003) < 1e-6
    devs = {d["dev"]: d for d in doc["devices"]}
    assert devs[0]["uuid"] == "GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af"
    assert devs[1]["uuid"] == "GPU-11111111-2222-3333-4444-555555555555"
    assert devs[0]["total_bytes"] == 143771 * MiB
    assert devs[0]["peak"]["bytes"] == (1024 + 64 * 89) * MiB and devs[0]["peak"]["time"] == 89.0
    assert devs[1]["peak"]["bytes"] == 40960 * MiB
    (g0,) = series(doc, "device", dev=0)
    assert g0["verdict"] == "leak" and abs(g0["rate_bytes_per_second"] - 64 * MiB) < MiB
    (g1,) = series(doc, "device", dev=1)
    assert g1["verdict"] == "none"
    nounits, _ = report(gpumon, fixture("smi-gpu-nounits.csv"))
    assert without_path(nounits) == without_path(doc)
    text = gpumon(["report", fixture("smi-gpu-units.csv")])
    assert text.returncode == 0 and text.stdout.startswith(f"Report of {fixture('smi-gpu-units.csv')} (nvidia-smi)\n")
    assert "LEAK on GPU 0's used memory (NVML): +64.0 MiB a second" in text.stdout


UUIDS = ["GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af", "GPU-11111111-2222-3333-4444-555555555555",
         "GPU-9a9a9a9a-0000-1111-2222-333333333333"]
BUSES = ["00000000:00:06.0", "00000000:0B:00.0", "00000000:0C:00.0"]


def smi_multi_gpu_log(path, ngpus, gpu_column=None, seconds=40, short=None):
    """`nvidia-smi --query-gpu=timestamp[,GPU_COLUMN],memory.used --format=csv -l 1` on a machine of
    ngpus GPUs, as nvidia-smi prints it: one row per GPU a second, in index order, sharing the
    interval's timestamp. GPU 0 grows by 64 MiB a second, GPU g holds (g + 1) * 10 GiB. short: the
    interval that lost a row (a log that cannot be split)."""
    cols = ["timestamp"] + ([gpu_column] if gpu_column else []) + ["memory.used [MiB]"]
    value = {"index": lambda g: str(g), "uuid": lambda g: UUIDS[g], "pci.bus_id": lambda g: BUSES[g]}
    lines = [", ".join(cols)]
    for i in range(seconds):
        for g in range(ngpus - 1 if i == short else ngpus):
            used = 1024 + 64 * i if g == 0 else (g + 1) * 10240
            lines.append(", ".join([f"2026/12/03 10:03:{i:02d}.452"] + ([value[gpu_column](g)] if gpu_column else [])
                                   + [f"{used} MiB"]))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("ngpus", [2, 3])
@pytest.mark.parametrize("gpu_column", [None, "index", "uuid", "pci.bus_id"])
def test_smi_multi_gpu_log_is_split_per_gpu(gpumon, tmp_path, ngpus, gpu_column):
    """the log docs/report.md recommends, from a machine of several GPUs: one series, one peak per GPU,
    by the GPU column when there is one, else by the rows' order within each timestamp"""
    path = smi_multi_gpu_log(tmp_path / "smi.csv", ngpus, gpu_column)
    doc, err = report(gpumon, path)
    assert err == ""
    devs = {d["dev"]: d for d in doc["devices"]}
    assert sorted(devs) == list(range(ngpus))
    assert devs[0]["peak"]["bytes"] == (1024 + 64 * 39) * MiB and devs[0]["peak"]["time"] == 39.0
    for g in range(1, ngpus):
        assert devs[g]["peak"]["bytes"] == (g + 1) * 10 * GiB
    (g0,) = series(doc, "device", dev=0)
    assert g0["verdict"] == "leak" and abs(g0["rate_bytes_per_second"] - 64 * MiB) < MiB
    assert g0["points"] == 40
    for g in range(1, ngpus):
        (s,) = series(doc, "device", dev=g)
        assert s["verdict"] == "none" and s["points"] == 40
    notes = [e["text"] for e in doc["events"] if e["kind"] == "note"]
    if gpu_column is None:
        assert notes == [f"no index column: {ngpus} GPUs told apart by the order of the rows sharing a timestamp "
                         "(nvidia-smi prints them in index order)"]
        with_index, _ = report(gpumon, smi_multi_gpu_log(tmp_path / "index.csv", ngpus, "index"))
        assert [d["peak"] for d in with_index["devices"]] == [d["peak"] for d in doc["devices"]]
        assert with_index["series"] == doc["series"]
    else:
        assert notes == []
    if gpu_column == "uuid":
        assert [devs[g]["uuid"] for g in range(ngpus)] == UUIDS[:ngpus]
    text = gpumon(["report", str(path)]).stdout
    assert "LEAK on GPU 0's used memory (NVML): +64.0 MiB a second" in text
    assert f"GPU {ngpus - 1}:" in text


def test_smi_log_one_gpu_without_index_stays_one_gpu(gpumon, tmp_path):
    doc, err = report(gpumon, smi_multi_gpu_log(tmp_path / "one.csv", 1))
    assert err == "" and [d["dev"] for d in doc["devices"]] == [0]
    assert not [e for e in doc["events"] if e["kind"] == "note"]


@pytest.mark.parametrize("ngpus,short", [(2, 10), (3, 0), (3, 39 + 100)])
def test_smi_log_that_cannot_be_split_is_refused_with_the_query_that_works(gpumon, tmp_path, ngpus, short):
    """intervals of different sizes: which row is which GPU cannot be known; refused in one line that
    gives the query with the index. A last interval cut short is a log stopped within it: read."""
    path = smi_multi_gpu_log(tmp_path / "smi.csv", ngpus, short=short)
    r = gpumon(["report", str(path)])
    if short > 39:  # no interval lost a row
        assert r.returncode == 0, r.stderr
        return
    first, other = (ngpus, ngpus - 1) if short else (ngpus - 1, ngpus)
    line = 2 + short * ngpus if short else 2 + ngpus - 1
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (f"gpumon: report: {path}: cannot tell its GPUs apart: it has no index column, and its rows "
                        f"sharing a timestamp come {first} at a time, but {other} at line {line}; log the index: "
                        "nvidia-smi --query-gpu=timestamp,index,memory.used --format=csv -l 1\n")
    cut = tmp_path / "cut.csv"
    cut.write_text("".join(smi_multi_gpu_log(tmp_path / "whole.csv", ngpus).read_text().splitlines(True)[:-1]))
    doc, _ = report(gpumon, cut)
    assert [d["dev"] for d in doc["devices"]] == list(range(ngpus))


def test_smi_log_without_gpu_column_nor_timestamp_is_refused(gpumon, tmp_path):
    path = tmp_path / "smi.csv"
    path.write_text("memory.used [MiB], memory.total [MiB]\n1024 MiB, 143771 MiB\n40960 MiB, 143771 MiB\n")
    r = gpumon(["report", str(path)])
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (f"gpumon: report: {path}: cannot tell its GPUs apart: it has no GPU column (index, uuid, "
                        "pci.bus_id) and no timestamp; log them: nvidia-smi "
                        "--query-gpu=timestamp,index,memory.used,memory.total --format=csv -l 1\n")


def test_smi_log_without_timestamp_is_read_in_rounds(gpumon):
    """pci.bus_id, memory.used, memory.free, memory.reserved with -l 1 and no timestamp: a round ends
    when a GPU comes again; rounds are 1 s apart, said as assumed, or --period apart. The total is
    used + free + reserved, the free memory the log's own."""
    doc, err = report(gpumon, fixture("smi-gpu-no-timestamp.csv"))
    assert "no timestamp column" in err and "period assumed" in err and "--period" in err
    assert len(err.strip().splitlines()) == 1
    assert doc["source"]["duration_s"] == 89.0
    assert any(e["kind"] == "note" and "period assumed" in e["text"] for e in doc["events"]), doc["events"]
    devs = {d["dev"]: d for d in doc["devices"]}
    assert devs[0]["pci_bus_id"] == "00000000:00:06.0" and devs[1]["pci_bus_id"] == "00000000:0B:00.0"
    assert devs[0]["peak"]["time"] == 89.0
    (g0,) = series(doc, "device", dev=0)
    assert g0["verdict"] == "leak" and abs(g0["rate_bytes_per_second"] - 64 * MiB) < MiB
    # out of memory at the log's own free memory: (143771 - 616 - 1024 - 64*89) MiB at 64 MiB a second
    want = (143771 - 616 - 1024 - 64 * 89) / 64
    assert abs(g0["seconds_to_oom"] - want) < 0.02 * want, g0
    slow, err = report(gpumon, fixture("smi-gpu-no-timestamp.csv"), "--period", "2")
    assert err == "" and slow["source"]["duration_s"] == 178.0
    (g0,) = series(slow, "device", dev=0)
    assert abs(g0["rate_bytes_per_second"] - 32 * MiB) < MiB
    for bad in ("0", "soon", "-1"):
        r = gpumon(["report", fixture("smi-gpu-no-timestamp.csv"), "--period", bad])
        assert r.returncode == 2 and "--period" in r.stderr


def test_smi_log_of_used_memory_alone_is_read_with_room_unknown(gpumon):
    """timestamp, memory.used [MiB] (nvidia-smi --query-gpu=timestamp,memory.used --format=csv -l 1):
    the used figure is read and peaked, the GPU's total and free memory stay unknown (null, never 0),
    so no time to out-of-memory is given, and the document says why."""
    doc, _ = report(gpumon, fixture("smi-gpu-used-only.csv"))
    damage = doc["source"]["damage"]
    assert "memory.used [MiB] of 10 rows without memory.total (or memory.free) (the first: line 2)" in damage
    assert "free memory is unknown" in damage
    assert doc["devices"][0]["total_bytes"] is None
    assert doc["peak"]["bytes"] == (1024 + 9) * MiB and doc["peak"]["time"] == 9.0
    assert doc["devices"][0]["peak"]["bytes"] == (1024 + 9) * MiB
    for s in doc["series"]:
        assert s.get("seconds_to_oom") is None, s


# ---- nvidia-smi --query-compute-apps ----------------------------------------------------------------

def test_smi_compute_apps_log(gpumon):
    """timestamp, gpu_uuid, pid, process_name, used_gpu_memory [MiB]: each process on its GPU (UUIDs
    numbered in the order the log names them), judged on its own; pid 4242 leaks; an [N/A] figure is
    unknown, not 0."""
    doc, _ = report(gpumon, fixture("smi-apps.csv"))
    assert doc["source"]["type"] == "nvidia-smi" and doc["source"]["damage"] is None
    assert [d["uuid"] for d in doc["devices"]] == ["GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af",
                                                    "GPU-11111111-2222-3333-4444-555555555555"]
    (leak,) = series(doc, "process", pid=4242)
    assert leak["series"]["dev"] == 0 and leak["verdict"] == "leak"
    assert abs(leak["rate_bytes_per_second"] - 32 * MiB) < MiB
    assert doc["leak"]["series"]["pid"] == 4242
    (flat,) = series(doc, "process", pid=5151)
    assert flat["series"]["dev"] == 1 and flat["verdict"] == "none"
    assert series(doc, "process", pid=777)[0]["verdict"] == "none"
    text = gpumon(["report", fixture("smi-apps.csv")]).stdout
    assert "LEAK on pid 4242 on GPU 0 (NVML): +32.0 MiB a second" in text


# ---- gpumon query -l ------------------------------------------------------------------------------------

def test_gpumon_query_loop_output(gpumon, tmp_path):
    """What `gpumon query --format=csv -lms 100` printed while GPU 0 filled up: the same CSV as
    nvidia-smi's, read in rounds 0.1 s apart (--period 0.1)."""
    scn = H200 + "".join(f"at {i / 10:.1f} gpu 0 used={4 + i}GiB\n" for i in range(1, 60))
    e = environment(tmp_path, scn)
    out = tmp_path / "query.csv"
    with open(out, "w") as f:
        p = subprocess.Popen([*GPUMON, "query", "--query-gpu=index,uuid,memory.used,memory.total", "--format=csv",
                              "-lms", "100"], env=e, stdout=f, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=10)
    lines = out.read_text().splitlines()
    assert lines[0] == "index, uuid, memory.used [MiB], memory.total [MiB]" and len(lines) > 5, lines[:3]
    last_used = int(re.match(r"0, \S+, (\d+) MiB", lines[-1]).group(1))
    doc, err = report(gpumon, out, "--period", "0.1")
    assert err == ""
    (dev,) = doc["devices"]
    assert dev["uuid"] == "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51" and dev["total_bytes"] == 143771 * MiB
    assert dev["peak"]["bytes"] == last_used * MiB
    assert abs(doc["source"]["duration_s"] - (len(lines) - 2) * 0.1) < 1e-6


# ---- gpumon export --csv ----------------------------------------------------------------------------------

def test_gpumon_export_tables(gpumon, tmp_path):
    """A run's recording exported table by table: the device table gives the GPU's peak the recording
    gives, the framework table the leak of the job's allocated memory, the process table each
    process (pids as exported)."""
    scn = H200.replace("used=0 ", "used=3GiB ") + "proc 0 4194001 used=3GiB name=neighbour\n"
    rec = tmp_path / "rec.gpumon"
    r = gpumon(["run", "-q", "-o", str(rec), "--", PY, "-c", SERIES_CLIENT, "leak"], scenario=scn,
               env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    whole, _ = report(gpumon, rec)
    docs = {}
    for table in ("device", "process", "framework"):
        out = tmp_path / f"{table}.csv"
        x = gpumon(["export", str(rec), "--csv", "--table", table, "-o", str(out)])
        assert x.returncode == 0, x.stderr
        docs[table], err = report(gpumon, out)
        assert err == "" and docs[table]["source"]["type"] == "gpumon export", table
        assert docs[table]["source"]["damage"] is None, (table, docs[table]["source"]["damage"])
    assert docs["device"]["devices"][0]["peak"]["bytes"] == whole["devices"][0]["peak"]["bytes"] == 3 * GiB
    assert docs["device"]["devices"][0]["total_bytes"] == whole["devices"][0]["total_bytes"]
    # the device table's used_min/used_max/used_max_t_s/samples: the exact peak and its moment
    assert abs(docs["device"]["devices"][0]["peak"]["time"] - whole["devices"][0]["peak"]["time"]) < 2e-6
    fw = docs["framework"]
    assert fw["leak"]["verdict"] == "leak" and fw["leak"]["series"]["kind"] == "framework"
    assert fw["leak"]["series"]["pid"] == whole["leak"]["series"]["pid"]
    assert abs(fw["leak"]["rate_bytes_per_step"] - 4 * MiB) < 0.1 * MiB
    assert [s["series"]["pid"] for s in series(docs["process"], "process")] == [4194001]


# ---- the Python monitor -----------------------------------------------------------------------------------

def python_fields():
    """FIELDS of python/gpumon/_sinks.py, the columns its CsvSink and JsonlSink write."""
    tree = ast.parse(open(os.path.join(ROOT, "python/gpumon/_sinks.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "FIELDS":
            return ast.literal_eval(node.value)
    raise AssertionError("no FIELDS in _sinks.py")


def test_python_monitor_csv_and_jsonl(gpumon, tmp_path):
    """The monitor's csv= and jsonl= files (written as its sinks write them: "" and null for
    unknown, `time` in seconds since 1970): its one process leaking 4 MiB a step; the same document
    from both, its start the first row's wall time."""
    fields = python_fields()
    t0 = 1796287746.0
    rows = []
    for step in range(300):
        d = dict.fromkeys(fields)
        d.update(step=step, time=t0 + step * 0.1, framework="torch", device=0,
                 allocated_bytes=2 * GiB + step * 4 * MiB, peak_bytes=2 * GiB + step * 4 * MiB + 256 * MiB,
                 reserved_bytes=8 * GiB, process_bytes=9 * GiB + (0 if step % 2 else MiB),
                 device_used_bytes=10 * GiB, device_free_bytes=130 * GiB, device_total_bytes=141 * GiB)
        rows.append(d)
    rows[7]["process_bytes"] = None  # NVML said nothing for this sample
    with open(tmp_path / "mon.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(fields)
        for d in rows:
            w.writerow(["" if d[k] is None else d[k] for k in fields])
    with open(tmp_path / "mon.jsonl", "w") as f:
        for d in rows:
            f.write(json.dumps(d, separators=(",", ":")) + "\n")
    doc, err = report(gpumon, tmp_path / "mon.csv")
    assert err == "" and doc["source"]["damage"] is None
    assert doc["source"]["kind"] == "run" and doc["source"]["start_utc"] == "2026-12-03T08:49:06Z"
    assert doc["source"]["duration_s"] == 29.9
    assert doc["leak"]["verdict"] == "leak" and doc["leak"]["series"]["framework"] == "torch"
    assert abs(doc["leak"]["rate_bytes_per_step"] - 4 * MiB) < 0.1 * MiB
    assert doc["fragmentation"]["bytes"] == 6 * GiB
    assert doc["devices"][0]["total_bytes"] == 141 * GiB
    jsonl, _ = report(gpumon, tmp_path / "mon.jsonl")
    assert without_path(jsonl) == without_path(doc)
    text = gpumon(["report", str(tmp_path / "mon.csv")]).stdout
    assert "LEAK on the framework's allocated memory (torch, the process): +4.00 MiB a step" in text
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(rows[0]) + "\n[1, 2]\n" + json.dumps({**rows[1], "allocated_bytes": "lots"}) + "\n")
    doc, _ = report(gpumon, bad)
    assert doc["source"]["damage"].startswith("2 rows skipped (the first: line 2: not a JSON object)")


# ---- not a file of samples --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["README.md", "docs/report.md", "cli/report_csv.c"])
def test_not_a_csv_is_one_line_and_2(gpumon, name):
    r = gpumon(["report", os.path.join(ROOT, name)])
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a CSV of samples" in lines[0], r.stderr


def test_binary_file_is_one_line_and_2(gpumon, tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(bytes(range(256)) * 8)
    r = gpumon(["report", str(path)])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


NOT_SAMPLES = [
    # (file name, content, the words after "NAME ")
    ("empty.csv", b"", "is empty: expected a gpumon recording or a text file of samples (docs/report.md)"),
    ("comments.csv", b"# nothing\n\n", "holds only blank lines and # comments: expected a CSV header naming "
     "columns (docs/report.md)"),
    ("job.py", b"#!/usr/bin/env python3\nimport torch\n", "is not a CSV of samples: it is a script (its first "
     "line: #!/usr/bin/env python3); expected a header naming columns, such as time,allocated (docs/report.md)"),
    ("train.py", b"import os, time\nimport torch\n", "is not a CSV of samples: its first line names no memory "
     "column (it names: import os, time); expected at least one of allocated, reserved, max_allocated, "
     "process_used, device_used (bytes)"),
    ("notes.txt", b"import torch\n", "is not a CSV of samples: its first line has no commas (import torch); "
     "expected a header naming columns, such as time,allocated or nvidia-smi's timestamp, memory.used [MiB] "
     "(docs/report.md)"),
    ("page.html", b"<!DOCTYPE html>\n<html><body>a, b</body></html>\n", "is not a CSV of samples: it is HTML or "
     "XML (its first line: <!DOCTYPE html>); expected a header naming columns, such as time,allocated "
     "(docs/report.md)"),
    ("noise.bin", b"time,allocated\n" + bytes(range(256)), "is not a CSV of samples nor a gpumon recording: it "
     "holds binary data (a NUL byte at offset 15)"),
    ("log.csv.gz", b"\x1f\x8b\x08\x00\x00\x00", "is gzip-compressed, not a CSV of samples: unpack it first "
     "(gzip -d)"),
    ("log.csv.zst", b"\x28\xb5\x2f\xfd\x00", "is zstd-compressed, not a CSV of samples: unpack it first "
     "(zstd -d)"),
    ("ps.csv", "timestamp, memory.used [MiB]\n".encode("utf-16"), "is UTF-16 text, not a CSV of samples in "
     "UTF-8: convert it first (iconv -f UTF-16 -t UTF-8)"),
    ("header.csv", b"time,allocated\n", ": nothing could be read: no rows of samples after its header"),
    ("words.csv", b"time,allocated\n1,lots\n2,many\n", ": nothing could be read: 2 rows skipped (the first: "
     "line 2: 'lots' is not a byte count in column allocated)"),
    ("doc.json", b'{\n  "time": 1\n}\n', ": nothing could be read: 3 rows skipped (the first: line 1: not a "
     "JSON object)"),
]


@pytest.mark.parametrize("name,content,words", NOT_SAMPLES, ids=[n for n, _, _ in NOT_SAMPLES])
def test_a_file_that_is_no_samples_is_named_as_what_it_is(gpumon, tmp_path, name, content, words):
    """one line, exit status 2, nothing on stdout: what the file is and what was expected"""
    path = tmp_path / name
    path.write_bytes(content)
    r = gpumon(["report", str(path)])
    assert (r.returncode, r.stdout) == (2, "")
    sep = "" if words.startswith(":") else " "
    assert r.stderr == f"gpumon: report: {path}{sep}{words}\n"


@pytest.mark.parametrize("content", [b"hello\n" * 10, b"time,allocated\n0,1\n", b"SQLite format 3\0" + b"x" * 100])
def test_a_gpumon_file_that_is_no_recording_is_named_in_exports_words(gpumon, tmp_path, content):
    """a .gpumon, or any file with SQLite's header, goes to the library's reader: the same line as export's"""
    path = tmp_path / "run.gpumon"
    path.write_bytes(content)
    r = gpumon(["report", str(path)])
    e = gpumon(["export", str(path), "--csv"])
    assert r.returncode == e.returncode == 255 and r.stdout == ""
    assert r.stderr == f"gpumon: report: {path} is not a gpumon recording (not an SQLite database)\n"
    assert r.stderr.replace("report: ", "") == e.stderr.replace("export: ", ""), (r.stderr, e.stderr)


def test_html_says_the_file_it_wrote_on_stderr(gpumon, tmp_path):
    page = tmp_path / "report.html"
    r = gpumon(["report", fixture("smi-gpu-units.csv"), "--html", str(page)])
    assert r.returncode == 0 and r.stdout.startswith("Report of ")
    size = page.stat().st_size
    assert 10 * 1024 < size < 1024 * 1024  # shown in KiB as cli_format_bytes does: 3 significant digits
    kib = size / 1024
    shown = f"{kib:.2f}" if kib < 10 else f"{kib:.1f}" if kib < 100 else f"{kib:.0f}"
    assert r.stderr == f"gpumon: report: wrote {page} ({shown} KiB)\n", r.stderr
    r = gpumon(["report", fixture("smi-gpu-units.csv"), "--json", "--html", str(page)])
    assert r.returncode == 0 and json.loads(r.stdout)["format"] == 2
    assert r.stderr.startswith(f"gpumon: report: wrote {page} (")


def test_readme_names_what_report_reads():
    """The README's claim is the list of inputs this file tests, not "any tool"."""
    readme = open(os.path.join(ROOT, "README.md")).read()
    passage = readme[readme.index("- `gpumon report FILE"):]
    passage = passage[:passage.index("\n- ")]
    assert "any tool" not in passage
    for named in ("nvidia-smi", "--query-compute-apps", "gpumon export", "gpumon query", "jsonl"):
        assert named in passage, named


# ---- real logs ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", SMI_LOGS, ids=[os.path.basename(p) for p in SMI_LOGS])
def test_real_nvidia_smi_logs(gpumon, path):
    """Every log captured with nvidia-smi on a real GPU (tests/fixtures/smi/log-*.csv) is read whole:
    no row skipped, its GPUs or processes named."""
    doc, _ = report(gpumon, path)
    assert doc["source"]["type"] == "nvidia-smi", doc["source"]
    assert "skipped" not in (doc["source"]["damage"] or ""), doc["source"]["damage"]
    assert doc["devices"] or doc["series"], doc


def test_smi_apps_log_without_gpu_column_says_its_processes_are_taken_as_gpu_0s(gpumon, tmp_path):
    """--query-compute-apps without gpu_uuid cannot say which GPU a process was on: they are read as
    GPU 0's (right on a machine of one GPU) and the report says so, in text and JSON; with gpu_uuid,
    nothing is said."""
    apps = tmp_path / "apps.csv"
    apps.write_text("timestamp, pid, process_name, used_gpu_memory [MiB]\n" +
                    "".join(f"2026/12/03 10:00:0{i}.000, 4242, python, {1000 + 100 * i} MiB\n" for i in range(4)))
    r = gpumon(["report", str(apps)])
    assert r.returncode == 0, r.stderr
    note = ("no GPU column: every process taken as GPU 0's; on a machine of several GPUs log gpu_uuid too "
            "(nvidia-smi --query-compute-apps=...,gpu_uuid)")
    assert f"Notes:\n  0.0 s: {note}\n" in r.stdout
    doc = json.loads(gpumon(["report", str(apps), "--json"]).stdout)
    assert [e["text"] for e in doc["events"] if e["kind"] == "note"] == [note]
    named = tmp_path / "named.csv"
    named.write_text("timestamp, pid, process_name, gpu_uuid, used_gpu_memory [MiB]\n" +
                     "".join(f"2026/12/03 10:00:0{i}.000, 4242, python, GPU-1, {1000 + 100 * i} MiB\n"
                             for i in range(4)))
    r = gpumon(["report", str(named)])
    assert r.returncode == 0 and "Notes:" not in r.stdout, r.stdout
