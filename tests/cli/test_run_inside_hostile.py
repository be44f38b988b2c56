# SPDX-License-Identifier: MIT
"""`gpumon run`'s socket and the inside view against damaged input: lines over the size limit, not
UTF-8, with NULs, with numbers no figure holds, a line cut by the sender's death, and a job killed
with SIGKILL while its monitor inside reports. Each bad line is counted as malformed and left out,
the lines after it are still read, and the recording stays readable."""
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from test_run import PY, WIDE, open_recording, run, said
from test_run_inside import events

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))

# The job: writes each file named as it is to gpumon run's socket, one connection; "--die" kills
# the job with SIGKILL right after what it wrote before it.
RAW = textwrap.dedent("""
    import os, signal, socket, sys, time
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    for a in sys.argv[1:]:
        if a == "--die":
            time.sleep(0.3)
            os.kill(os.getpid(), signal.SIGKILL)
        with open(a, "rb") as f:
            s.sendall(f.read())
    s.close()
""")

AFTER = b'{"type":"inside","state":"off","reason":"after"}\n'  # a good line: the stream goes on


def send_raw(gpumon, tmp_path, *chunks, args=("-q",)):
    files = []
    for i, c in enumerate(chunks):
        if c != "--die":
            (tmp_path / f"chunk{i}").write_bytes(c)
            c = str(tmp_path / f"chunk{i}")
        files.append(c)
    return run(gpumon, tmp_path, list(args) + ["--", PY, "-c", RAW] + files, env=dict(WIDE))


def after_taken(tmp_path):
    return [t for t in events(tmp_path / "rec.gpumon", "note") if t.startswith("inside view")
            and t.endswith(": after")]


BAD = {
    "over_the_limit": b'{"type":"inside","state":"off","reason":"' + b"x" * (64 * 1024) + b'"}\n',
    "exactly_one_byte_over": b"x" * (64 * 1024 + 1) + b"\n",
    "not_utf8": b'{"type":"inside","state":"off","reason":"\xff\xfe bad"}\n',
    "overlong_utf8": b'{"type":"inside","state":"off","reason":"\xc0\xaf"}\n',
    "raw_nul": b'{"type":"inside","state":"off","reason":"a\x00b"}\n',
    "escaped_nul": b'{"type":"inside","state":"off","reason":"a\\u0000b"}\n',
    "nul_outside_a_string": b'{"type":"oom","request":1}\x00\n',
    "lone_surrogate": b'{"type":"inside","state":"off","reason":"\\ud800"}\n',
    "huge_integer": b'{"type":"oom","request":18446744073709551616}\n',
    "huge_real": b'{"type":"oom","request":1e400}\n',
    "huge_step": b'{"type":"sample","t":1,"device":0,"step":9223372036854775808,"allocated":1}\n',
    "huge_device": b'{"type":"sample","t":1,"device":4294967296,"allocated":1}\n',
    "nan_time": b'{"type":"sample","t":NaN,"device":0,"allocated":1}\n',
    "deep_nesting": b'{"type":"snapshot","snapshot":' + b"[" * 100000 + b"]" * 100000 + b"}\n",
    "duplicate_key": b'{"type":"oom","request":1,"request":2}\n',
}


@pytest.mark.parametrize("name", list(BAD))
def test_a_damaged_line_is_counted_and_the_next_one_read(gpumon, tmp_path, name):
    r = send_raw(gpumon, tmp_path, BAD[name], AFTER, args=())
    assert r.returncode == 0, r.stderr
    assert "socket: 1 malformed and 0 unknown messages ignored" in said(r.stderr), r.stderr
    for kind in ("oom_figures", "alloc_snapshot"):
        assert events(tmp_path / "rec.gpumon", kind) == []
    db = open_recording(tmp_path / "rec.gpumon")
    assert db.execute("select count(*) from framework_samples").fetchone() == (0,)
    assert len(after_taken(tmp_path)) == 1


def test_many_long_lines_in_one_write(gpumon, tmp_path):
    """Three lines over the limit in a row and a good one, all in one write: three malformed."""
    big = b"y" * (200 * 1024) + b"\n"
    r = send_raw(gpumon, tmp_path, big * 3 + AFTER, args=())
    assert r.returncode == 0, r.stderr
    assert "socket: 3 malformed and 0 unknown messages ignored" in said(r.stderr), r.stderr
    assert len(after_taken(tmp_path)) == 1


def test_a_line_cut_by_the_senders_death(gpumon, tmp_path):
    """The job writes half a line and is killed: the half is malformed, what came before is kept,
    the run ends with the job's status and a readable recording."""
    r = send_raw(gpumon, tmp_path, AFTER + b'{"type":"oom","request":', "--die", args=())
    assert r.returncode == 128 + signal.SIGKILL, r.stderr
    assert len(after_taken(tmp_path)) == 1
    assert "socket: 1 malformed and 0 unknown messages ignored" in said(r.stderr), r.stderr
    assert events(tmp_path / "rec.gpumon", "oom_figures") == []


def test_a_watched_job_killed_with_sigkill(gpumon, tmp_path):
    """A torch job under the inside view, killed with SIGKILL mid-training: the samples sent until
    then are in a recording that reads, the summary gives its status, and `gpumon report` reads it."""
    fake_torch = os.path.join(ROOT, "tests/python/fake_torch")
    job = textwrap.dedent("""
        import os, signal, time, torch
        torch.cuda.init()
        torch._fake.alloc(256 << 20)
        opt = torch.optim.SGD([])
        for step in range(4):
            torch._fake.alloc(4 << 20)
            opt.step()
            time.sleep(0.12)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    py = os.path.join(os.path.dirname(os.path.abspath(os.environ.get("GPUMON_BIN", "gpumon"))), "..", "python")
    if not os.path.exists(os.path.join(py, "gpumon", "_gpumon.abi3.so")):
        pytest.skip("this build has no Python package (a sanitizer build, or no Python headers)")
    env = dict(WIDE, PYTHONPATH=fake_torch)
    r = run(gpumon, tmp_path, ["--", PY, "-c", job], env=env)
    assert r.returncode == 128 + signal.SIGKILL, r.stderr
    assert "job killed by SIGKILL (status 137)" in said(r.stderr), r.stderr
    db = open_recording(tmp_path / "rec.gpumon")
    steps = [s for (s,) in db.execute("select step from framework_samples order by t_ns")]
    assert steps == [1, 2, 3, 4], steps
    rep = subprocess.run([os.environ.get("GPUMON_BIN", "gpumon"), "report", str(tmp_path / "rec.gpumon"), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["source"]["exit_status"] == 137
