# SPDX-License-Identifier: MIT
"""`gpumon record` against the fake NVML: what lands in the file, stopping by duration and by
Ctrl-C, kill -9 (the file stays readable and loses at most 0.25 s), a full disk, and bad input."""
import os
import re
import resource
import signal
import sqlite3
import subprocess
import textwrap
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN

GIB = 1 << 30
SCN = """\
gpu 0 name="NVIDIA H200" total=140GiB reserved=615MiB used=1GiB util=20 power=120000
gpu 1 name="NVIDIA H200" total=140GiB used=2GiB
at 0.30 gpu 0 used=9GiB
at 0.34 gpu 0 used=3GiB
proc 0 4194000 used=1GiB
at 0.25 proc 0 4194001 used=2GiB
at 0.60 proc 0 4194001 gone
"""


def env_for(tmp_path, scenario):
    scn = tmp_path / "rec.scn"
    scn.write_text(textwrap.dedent(scenario))
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
    return e


def start(tmp_path, args, scenario=SCN, **kw):
    return subprocess.Popen([os.path.abspath(GPUMON_BIN), "record"] + args, env=env_for(tmp_path, scenario),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_record_duration_contents(tmp_path):
    out = tmp_path / "r.gpumon"
    p = start(tmp_path, ["-o", str(out), "--interval", "2", "--duration", "0.8"])
    so, se = p.communicate(timeout=20)
    assert p.returncode == 0, se
    assert so == ""
    assert f"recording {out}" in se
    # the scenario's 0.30 s, counted from NVML's start; the recording starts a little later
    m = re.search(r"GPU 0 peak 9\.00 GiB at (\d+\.\d+) s", se)
    assert m and 0.0 <= float(m.group(1)) <= 0.35, se
    db = sqlite3.connect(out)
    meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["kind"] == "record" and "end_mono_ns" in meta and "exit_status" not in meta
    assert db.execute("SELECT count(*) FROM devices").fetchone()[0] == 2
    # the 40 ms spike: a row with its exact value and maximum
    assert db.execute("SELECT count(*) FROM device_samples WHERE dev=0 AND used_bytes=?", (9 * GIB,)).fetchone()[0] >= 1
    assert db.execute("SELECT max(used_max_bytes) FROM device_samples WHERE dev=0").fetchone()[0] == 9 * GIB
    # change-only: far fewer rows than the 400 samples taken per GPU
    rows = db.execute("SELECT count(*) FROM device_samples WHERE dev=0").fetchone()[0]
    assert 3 <= rows <= 20
    # slow fields present, absent ones NULL (GPU 1 declares no reserved: 0 is its value; none is absent)
    assert db.execute("SELECT power_mw, util_gpu_pct FROM device_samples WHERE dev=0 LIMIT 1").fetchone() == (120000, 20)
    assert db.execute("SELECT count(*) FROM device_samples WHERE energy_mj IS NOT NULL").fetchone()[0] == 0
    procs = db.execute("SELECT pid, first_t_ns IS NOT NULL, gone_t_ns IS NOT NULL, foreign_pid FROM processes "
                       "ORDER BY pid").fetchall()
    assert procs == [(4194000, 1, 0, 1), (4194001, 1, 1, 1)]


def test_process_identity_recorded(tmp_path):
    """A process of this machine is stored with its user, command line and parent."""
    out = tmp_path / "p.gpumon"
    me = os.getpid()
    p = start(tmp_path, ["-o", str(out), "--duration", "0.4"], scenario=f"gpu 0 total=80GiB\nproc 0 {me} used=1GiB\n")
    _, se = p.communicate(timeout=20)
    assert p.returncode == 0, se
    row = sqlite3.connect(out).execute("SELECT uid, command, ppid, foreign_pid FROM processes WHERE pid=?",
                                       (me,)).fetchone()
    # the command line as /proc has it (pytest's, or a pytest-xdist worker's)
    argv0 = open("/proc/self/cmdline", "rb").read().split(b"\0")[0].decode()
    assert row[0] == os.getuid() and row[1].startswith(argv0) and row[2] == os.getppid() and row[3] == 0


def test_ctrl_c_stops_cleanly(tmp_path):
    out = tmp_path / "c.gpumon"
    p = start(tmp_path, ["-o", str(out)])
    time.sleep(0.6)
    p.send_signal(signal.SIGINT)
    _, se = p.communicate(timeout=20)
    assert p.returncode == 0, se
    assert "Ctrl-C to stop" in se
    db = sqlite3.connect(out)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert "end_mono_ns" in dict(db.execute("SELECT key, value FROM meta"))


def test_kill_9_loses_at_most_a_quarter_second(tmp_path):
    out = tmp_path / "k.gpumon"
    # memory changes every 10 ms, so every tick makes a row and the last row tells what was lost
    scn = "gpu 0 total=80GiB used=1GiB\n" + "".join(f"at {i / 100:.2f} gpu 0 used={1 + i % 7}GiB\n"
                                                    for i in range(1, 400))
    p = start(tmp_path, ["-o", str(out), "--interval", "5"], scenario=scn)
    time.sleep(1.5)
    t_kill = time.monotonic_ns()
    p.kill()
    p.wait()
    db = sqlite3.connect(out)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    last = db.execute("SELECT max(t_ns) FROM device_samples").fetchone()[0]
    assert last is not None
    lost = (t_kill - last) / 1e9
    assert lost <= 0.25, f"lost {lost:.3f} s"
    assert "end_mono_ns" not in dict(db.execute("SELECT key, value FROM meta"))


def test_full_disk_stops_with_a_message(tmp_path):
    out = tmp_path / "f.gpumon"

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
    scn = "gpu 0 total=80GiB used=1GiB\n" + "".join(f"at {i / 500:.3f} gpu 0 used={1 + i % 5}GiB\n"
                                                    for i in range(1, 3000))
    p = start(tmp_path, ["-o", str(out), "--interval", "1", "--duration", "8"], scenario=scn,
              preexec_fn=small_files)
    _, se = p.communicate(timeout=30)
    assert p.returncode == 255, se
    assert "recording stopped, what was written stays readable" in se
    # the last line says why by itself: whichever write failed (the loop's, the last drain's or the
    # closing one), the reason is in the summary, never "see above"
    summary = next(l for l in se.splitlines() if l.startswith(f"gpumon: recording {out} ("))
    assert re.match(rf"gpumon: recording {re.escape(str(out))} \(stopped early: recording {re.escape(str(out))}: "
                    r"\w[^)]*\): ", summary), summary
    db = sqlite3.connect(out)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert db.execute("SELECT count(*) FROM device_samples").fetchone()[0] > 10


def test_file_size_limit_at_the_start_is_an_error_not_a_signal(tmp_path):
    """A limit reached while the file is created: a message and status 255, not death by SIGXFSZ."""
    def tiny_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
    out = tmp_path / "t.gpumon"
    p = start(tmp_path, ["-o", str(out), "--duration", "0.5"], preexec_fn=tiny_files)
    _, se = p.communicate(timeout=20)
    assert p.returncode == 255, (p.returncode, se)
    assert str(out) in se and "File too large" in se, se


LOST = """\
gpu 0 name="NVIDIA H200" total=140GiB used=1GiB
gpu 1 name="NVIDIA H200" total=140GiB used=2GiB
at 0.5 lost 1
"""


def test_gpu_lost_mid_record_is_said(tmp_path):
    """record says the loss when it comes and in its summary, and exits 15 (nvidia-smi's "GPU is
    lost"); the recording keeps everything; report's text says it with its time."""
    out = tmp_path / "l.gpumon"
    p = start(tmp_path, ["-o", str(out), "--duration", "1.5"], scenario=LOST)
    _, se = p.communicate(timeout=20)
    assert p.returncode == 15, se
    db = sqlite3.connect(out)
    assert "end_mono_ns" in dict(db.execute("SELECT key, value FROM meta"))  # finished, not cut short
    assert db.execute("SELECT count(*) FROM device_samples WHERE dev=1").fetchone()[0] >= 1  # before the loss
    assert db.execute("SELECT dev, lost_t_ns IS NOT NULL FROM devices ORDER BY dev").fetchall() == [(0, 0), (1, 1)]
    assert db.execute("SELECT text FROM events WHERE kind='lost'").fetchall() == [("GPU 1 is lost",)]
    db.close()
    said = re.search(r"gpumon: GPU 1 is lost at (\d+\.\d) s: it fell off the bus or needs a reset; the recording "
                     r"goes on with the other GPUs\n", se)
    assert said and 0.2 <= float(said.group(1)) <= 0.8, se
    assert se.index("GPU 1 is lost") < se.index(f"gpumon: recording {out}:")  # when it came, before the end
    assert re.search(r"\n  GPU 1 LOST at 0\.\d+ s: nothing of it was recorded after that\n", se), se
    assert "GPU 0 LOST" not in se
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "report", str(out)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^GPU 1: .*, LOST\n  lost at 0\.\d s: it fell off the bus or needs a reset", r.stdout, re.M), r.stdout
    assert not re.search(r"^GPU 0: .*LOST", r.stdout, re.M), r.stdout


def test_existing_file_untouched(tmp_path):
    out = tmp_path / "e.gpumon"
    out.write_text("precious")
    p = start(tmp_path, ["-o", str(out), "--duration", "0.2"])
    _, se = p.communicate(timeout=20)
    assert p.returncode == 2 and "exists" in se
    assert out.read_text() == "precious"


@pytest.mark.parametrize("args,bad", [
    (["--interval", "0"], "--interval '0'"), (["--interval", "1.5"], "whole number"),
    (["--interval", "x"], "--interval 'x'"), (["--duration", "-1"], "--duration '-1'"),
    (["--bogus"], "'--bogus'"), (["-i", "7"], "no GPU with index 7"), (["-o"], "needs a value"),
])
def test_bad_options(tmp_path, args, bad):
    p = start(tmp_path, args)
    _, se = p.communicate(timeout=20)
    assert p.returncode in (2, 6) and bad in se, se
    assert not list(tmp_path.glob("*.gpumon"))


def test_unwritable_directory(tmp_path):
    p = start(tmp_path, ["-o", "/nonexistent-dir/r.gpumon", "--duration", "0.2"])
    _, se = p.communicate(timeout=20)
    assert p.returncode == 255 and "/nonexistent-dir/r.gpumon" in se
