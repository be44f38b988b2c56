# SPDX-License-Identifier: MIT
"""Input that another user or a hand-edited file chose, and what gpumon makes of it.

Terminal escapes: a process of another user can name itself anything, ESC]0;...BEL (set the
window title), ESC[2J (clear the screen) and newlines included. Every command that prints such
text (show, query's CSV, the run summary's co-tenant sentence, report's text and HTML, watch
--batch) shows the control characters escaped (\\x1b, \\n) and never writes the raw bytes; a
query's CSV row stays one row. The process here is real (its argv[0] is the hostile text), so that
gpumon reads it from /proc as it would another user's; the fake driver lists its pid.

Out-of-range figures: CSV byte counts of 2^63 and 2^64-1 and recordings whose integers were
set by hand to the extremes of SQLite's range are refused with a message naming the row, never
wrapped into negative or tiny figures (the same under the ASan+UBSan build, where a signed
overflow aborts).
"""
import csv
import io
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN, H200
from test_report import Rec, TOTAL

PY = sys.executable or "/usr/bin/python3"
GiB = 1 << 30
MiB = 1 << 20
# ESC]0;...BEL sets the window title, ESC[2J clears the screen, the newline would split a row
EVIL = '\x1b]0;pwned\x07\x1b[2Jevil, "quoted"\nsecond line'
EVIL_SHOWN = '\\x1b]0;pwned\\x07\\x1b[2Jevil, "quoted"\\nsecond line'
# in a command line read from /proc the library has made the newline a blank already
EVIL_CMD_SHOWN = EVIL_SHOWN.replace("\\n", " ")
RAW = (b"\x1b", b"\x07", b"\x9b")


def env_for(tmp_path, scenario):
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e["LC_ALL"] = "C"
    e["TMPDIR"] = str(tmp_path)
    e["GPUMON_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML_LIB)
    path = tmp_path / "hostile.scn"
    path.write_text(textwrap.dedent(scenario))
    e["FAKE_NVML_SCENARIO"] = str(path)
    return e


def gpumon_bytes(tmp_path, args, scenario=H200, timeout=60):
    """gpumon ARGS with stdout and stderr as bytes (raw control bytes must be seen as they are)."""
    return subprocess.run([os.path.abspath(GPUMON_BIN)] + list(args), env=env_for(tmp_path, scenario),
                          capture_output=True, timeout=timeout)


def no_raw_controls(data):
    for b in RAW:
        assert b not in data, data[:2000]


@pytest.fixture
def evil():
    """A real process whose argv[0] (and so its command line and /proc name) is EVIL."""
    p = subprocess.Popen([EVIL, "-c", "import time; time.sleep(60)"], executable=PY)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # until the new command line is in /proc
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            if f.read().startswith(EVIL.encode()):
                break
        time.sleep(0.01)
    yield p
    p.kill()
    p.wait()


def scenario_with(pid, used="42GiB", base=H200):
    return base.replace("used=0 ", "used=60GiB ") + f"proc 0 {pid} used={used}\n"


# ---- terminal escapes ----------------------------------------------------------------------------

def test_show_escapes_another_users_command(tmp_path, evil):
    env = dict(env_for(tmp_path, scenario_with(evil.pid)), COLUMNS="1000")  # room for the whole command
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "show"], env=env, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    out = r.stdout.decode()
    row = [l for l in out.splitlines() if f" {evil.pid} " in l]
    assert len(row) == 1 and EVIL_CMD_SHOWN in row[0], out
    assert "second line" not in out.replace(row[0], "")  # the newline did not start a line


def test_query_compute_apps_stays_one_csv_row(tmp_path, evil):
    r = gpumon_bytes(tmp_path, ["query", "--query-compute-apps=pid,process_name,used_memory",
                                "--format=csv,noheader"], scenario_with(evil.pid))
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    lines = r.stdout.decode().splitlines()
    assert len(lines) == 1, lines
    # one row of three fields; the name, with its comma and quotes, quoted as RFC 4180 has it
    fields = next(csv.reader(io.StringIO(lines[0]), skipinitialspace=True))
    assert fields == [str(evil.pid), EVIL_SHOWN, "43008 MiB"], lines[0]
    # JSON keeps the exact name: jansson escapes it, nothing raw reaches the terminal
    r = gpumon_bytes(tmp_path, ["query", "--query-compute-apps=pid,process_name", "--format=json"],
                     scenario_with(evil.pid))
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    apps = json.loads(r.stdout)["compute_apps"]
    assert [a["process_name"] for a in apps] == [EVIL]


def test_query_csv_quotes_a_comma_in_a_gpu_name(tmp_path):
    scn = H200.replace('name="NVIDIA H200"', 'name="NVIDIA H200, \\"sxm\\" "')
    r = gpumon_bytes(tmp_path, ["query", "--query-gpu=index,name,memory.total", "--format=csv,noheader"], scn)
    assert r.returncode == 0, r.stderr
    fields = next(csv.reader(io.StringIO(r.stdout.decode()), skipinitialspace=True))
    assert fields == ["0", 'NVIDIA H200, "sxm" ', "143771 MiB"], r.stdout


def test_run_co_tenant_sentence_escapes_the_command(tmp_path, evil):
    """The job runs out of memory beside the hostile co-tenant: the diagnosis names it, escaped."""
    job = "import sys, time; time.sleep(1.2); sys.stderr.write('torch.OutOfMemoryError: CUDA out of memory.\\n'); sys.exit(1)"
    r = gpumon_bytes(tmp_path, ["run", "-o", str(tmp_path / "r.gpumon"), "--", PY, "-c", job],
                     scenario_with(evil.pid))
    assert r.returncode == 1, r.stderr
    no_raw_controls(r.stderr)
    said = " ".join(r.stderr.decode().split())
    assert "diagnosis: co-tenant:" in said, said
    assert f"the largest pid {evil.pid}" in said and "\\x1b]0;pwned\\x07" in said, said
    # gpumon report of the same recording: the diagnosis and the holders, escaped as well
    r = gpumon_bytes(tmp_path, ["report", str(tmp_path / "r.gpumon")])
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    assert "\\x1b]0;pwned\\x07" in r.stdout.decode()


def hostile_recording(path):
    """A recording whose strings were all chosen by someone else."""
    rec = Rec(path, exit_status=1)
    rec.db.execute("INSERT INTO meta VALUES ('command', ?)", ("python train.py \x1b[2J\x1b]0;run\x07",))
    rec.db.execute("UPDATE meta SET value = ? WHERE key = 'host'", ("host\x1b[31m",))
    rec.db.execute("UPDATE devices SET name = ?", ("NVIDIA \x1b[2J H200",))
    rec.process(0.2, 4242, 30 * GiB, user="bob\x1b[2J", command=EVIL)
    for i in range(100):
        s = 1 + i * 0.1
        rec.process(s, 100, 20 * GiB + i * 300 * MiB, job=True)
        rec.device(s, 20 * GiB + i * 300 * MiB + 30 * GiB)
    rec.event(11.0, "oom", "\x1b[31mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory\x9b2J")
    return rec.close()



def test_report_text_and_html_escape_strings_of_the_file(tmp_path):
    path = hostile_recording(tmp_path / "hostile.gpumon")
    r = gpumon_bytes(tmp_path, ["report", str(path), "--html", str(tmp_path / "r.html")])
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    text = r.stdout.decode()
    assert "Command:        python train.py \\x1b[2J\\x1b]0;run\\x07" in text, text
    assert "Host:           host\\x1b[31m" in text, text
    assert "the largest pid 4242" in text and "user bob\\x1b[2J" in text, text
    holder = [l for l in text.splitlines() if l.strip().startswith("4242 ")]
    assert len(holder) == 1 and "\\x1b]0;pwned" in holder[0], text
    assert "second line" not in text.replace(holder[0], "").split("Alerts:")[0].split("the largest pid")[0]
    assert "\\x1b[31mtorch.OutOfMemoryError\\x1b[0m" in text, text
    html = (tmp_path / "r.html").read_bytes()
    no_raw_controls(html)
    assert "\\x1b]0;pwned".encode() in html
    # the document (JSON) keeps the strings exact, escaped by jansson
    r = gpumon_bytes(tmp_path, ["report", str(path), "--json"])
    no_raw_controls(r.stdout)
    doc = json.loads(r.stdout)
    assert doc["oom"]["figures"]["top_other"]["command"] == EVIL


def export_to_a_terminal(tmp_path, args):
    """gpumon ARGS with its standard output a pseudo-terminal; what the terminal got, \r\n as \n."""
    import pty
    master, slave = pty.openpty()
    p = subprocess.Popen([os.path.abspath(GPUMON_BIN)] + args, env=env_for(tmp_path, H200), stdout=slave,
                         stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the writer has gone
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=60) == 0, p.stderr.read()
    return out.replace(b"\r\n", b"\n")


def test_export_csv_escapes_controls_on_a_terminal_only(tmp_path):
    """To a terminal the command line and user are escaped as everywhere else (ESC ] ... BEL would
    set the window title); to a file or a pipe they keep their exact bytes, CSV-quoted."""
    path = hostile_recording(tmp_path / "hostile.gpumon")
    args = ["export", str(path), "--csv", "--table", "process"]
    tty = export_to_a_terminal(tmp_path, args)
    no_raw_controls(tty)
    row = [l for l in tty.decode().splitlines() if ",4242," in l]
    quoted = '"' + EVIL_SHOWN.replace('"', '""') + '"'
    assert len(row) == 1 and row[0].endswith(",bob\\x1b[2J,," + quoted), row
    # not a terminal: the exact bytes, quoted (RFC 4180), as a CSV reader gives them back
    piped = gpumon_bytes(tmp_path, args)
    assert piped.returncode == 0, piped.stderr
    rows = [r for r in csv.DictReader(io.StringIO(piped.stdout.decode())) if r["pid"] == "4242"]
    assert rows and rows[0]["command"] == EVIL and rows[0]["user"] == "bob\x1b[2J"
    out = tmp_path / "p.csv"
    assert gpumon_bytes(tmp_path, args + ["-o", str(out)]).returncode == 0
    assert out.read_bytes() == piped.stdout


def test_watch_batch_escapes_live_and_replayed(tmp_path, evil):
    r = gpumon_bytes(tmp_path, ["watch", "--batch", "-n", "1", "--interval", "100"], scenario_with(evil.pid))
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    rows = [l for l in r.stdout.decode().splitlines() if re.match(rf"^[! ] +0 +{evil.pid} ", l)]
    assert len(rows) == 1 and rows[0].endswith(EVIL_CMD_SHOWN + " -c import time; time.sleep(60)"), r.stdout
    path = hostile_recording(tmp_path / "hostile.gpumon")
    r = gpumon_bytes(tmp_path, ["watch", "--replay", str(path), "--speed", "0", "--batch", "-n", "1"])
    assert r.returncode == 0, r.stderr
    no_raw_controls(r.stdout)
    assert "python train.py \\x1b[2J" in r.stdout.decode()


# ---- figures out of range -------------------------------------------------------------------------

def no_wrapped_figures(text):
    """No figure of the text is negative or beyond what a GPU holds (a wrapped sum shows as one)."""
    text = re.sub(r"(0\.\.1 PiB|1 PiB or more)", "", text)  # where the messages name the limit
    assert not re.search(r"-\d[\d.]* (B|KiB|MiB|GiB|TiB|PiB)", text), text
    assert not re.search(r"\d (PiB|EiB)", text), text


def test_csv_byte_counts_of_2_63_and_2_64_are_refused_and_named(tmp_path):
    path = tmp_path / "big.csv"
    path.write_text("time,allocated,reserved,device_used,device_total\n"
                    "0,1000,2000,4000,80000\n"
                    "1,9223372036854775808,2000,4000,80000\n"   # 2^63: a signed int64 wraps at it
                    "2,18446744073709551615,2000,4000,80000\n"  # 2^64 - 1
                    "3,1500,2000,9223372036854775808,80000\n"
                    "4,1500,2000,5000,80000\n")
    r = gpumon_bytes(tmp_path, ["report", str(path), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["source"]["damage"] == ("3 rows skipped (the first: line 3: 9223372036854775808 in column "
                                       "allocated is out of range (1 PiB or more))"), doc["source"]["damage"]
    assert doc["peak"]["bytes"] == 5000 and doc["fragmentation"]["bytes"] == 1000
    r = gpumon_bytes(tmp_path, ["report", str(path)])
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    no_wrapped_figures(text)
    assert "Not read:       3 rows skipped (the first: line 3:" in text


INT64_MAX = (1 << 63) - 1


def extreme_recording(path):
    """A run whose recording was then edited by hand with the sqlite3 module: integers at the ends of
    SQLite's range where byte figures and times belong."""
    rec = Rec(path, exit_status=1)
    for i in range(60):
        s = 1 + i * 0.1
        rec.process(s, 100, 10 * GiB + i * MiB, job=True)
        rec.process(s, 200, 5 * GiB, user="bob", command="python other.py")
        rec.framework(s, 100, i, 4 * GiB + i * MiB, 6 * GiB)
        rec.device(s, 16 * GiB + i * MiB)
    rec.event(6.5, "oom", "CUDA out of memory")
    db = rec.db
    db.execute("UPDATE process_samples SET used_bytes = ? WHERE pid = 200", (INT64_MAX,))
    db.execute("UPDATE process_samples SET used_bytes = ? WHERE pid = 100 AND rowid % 7 = 0", (-(1 << 63),))
    db.execute("UPDATE framework_samples SET allocated_bytes = -1 WHERE rowid % 5 = 0")
    db.execute("UPDATE framework_samples SET max_allocated_bytes = ? WHERE rowid % 11 = 0", (1 << 62,))
    db.execute("UPDATE device_samples SET used_bytes = ?, used_max_bytes = ? WHERE rowid % 13 = 0", (1 << 62, INT64_MAX))
    db.execute("UPDATE devices SET memory_total_bytes = ?", (INT64_MAX,))
    db.execute("UPDATE device_samples SET t_ns = ? WHERE rowid = (SELECT max(rowid) FROM device_samples)", (INT64_MAX,))
    for key in ("start_wall_ns", "end_mono_ns"):
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (INT64_MAX, key))
    db.execute("INSERT OR REPLACE INTO meta VALUES ('limit_bytes', ?)", (INT64_MAX,))
    return rec.close()


def test_recording_with_extreme_values_is_refused_row_by_row(tmp_path):
    path = extreme_recording(tmp_path / "edited.gpumon")
    r = gpumon_bytes(tmp_path, ["report", str(path), "--json"])
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    damage = doc["source"]["damage"]
    # each table names how many rows were left out, and the first of them
    assert re.search(r"69 rows of table process_samples left out for a byte figure outside 0\.\.1 PiB "
                     r"\(the first: row \d+, used_bytes = 9223372036854775807\)", damage), damage
    assert re.search(r"\d+ rows of table framework_samples left out for .*\(the first: row 5, allocated_bytes = -1\)",
                     damage), damage
    assert re.search(r"\d+ rows of table device_samples left out for .*\(the first: row 13, used_bytes = "
                     r"4611686018427387904\)", damage), damage
    assert "GPU 0's total memory left out: 9223372036854775807 is outside 0..1 PiB" in damage, damage
    assert "the job's limit left out: 9223372036854775807 bytes is outside 0..1 PiB" in damage, damage

    def figures(v, key=""):
        if isinstance(v, dict):
            for k, x in v.items():
                yield from figures(x, k)
        elif isinstance(v, list):
            for x in v:
                yield from figures(x, key)
        elif key.endswith("bytes") and isinstance(v, (int, float)):
            yield key, v
    bad = [(k, v) for k, v in figures(doc) if not 0 <= v < 1 << 50]
    assert not bad, bad
    for args in (["report", str(path)], ["report", str(path), "--html", str(tmp_path / "r.html")]):
        r = gpumon_bytes(tmp_path, args)
        assert r.returncode == 0, r.stderr
        no_wrapped_figures(r.stdout.decode())
    r = gpumon_bytes(tmp_path, ["watch", "--replay", str(path), "--speed", "0", "--batch", "-n", "2"])
    assert r.returncode == 0, r.stderr
    no_wrapped_figures(r.stdout.decode())


@pytest.mark.parametrize("table", ["device", "process", "framework", "events"])
def test_export_of_extreme_values_never_wraps(tmp_path, table):
    path = extreme_recording(tmp_path / "edited.gpumon")
    for fmt in ("--csv", "--jsonl"):
        r = gpumon_bytes(tmp_path, ["export", str(path), fmt, "-t", table])
        assert r.returncode == 0, r.stderr
        out = r.stdout.decode()
        assert not re.search(r"(^|[,:])-\d", out, re.M), out[:2000]  # no negative figure or time
        assert "2262-" not in out and "1677-" not in out  # no wrapped date at either end of int64
        if table in ("device", "process", "framework"):
            assert "left out for a byte figure outside 0..1 PiB" in r.stderr.decode(), r.stderr
