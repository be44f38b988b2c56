# SPDX-License-Identifier: MIT
"""`gpumon run` as a sweep uses it: eight jobs started in one directory at once all run and record
under names of their own; --no-record keeps the alerts and the summary without a file; the
allocator notes only when a setting has no effect (all of them with -v); the summary wrapped to
the terminal's width; and the time to out-of-memory said as a moment from the start."""
import os
import re
import sqlite3
import subprocess

from conftest import GPUMON, H200
from test_run import PY, SERIES_CLIENT, environment, run, said


def summary_lines(stderr):
    return stderr[stderr.index("gpumon run summary"):].splitlines()


def test_eight_jobs_in_one_directory_all_run_and_record(tmp_path):
    """Started together without -o: each job runs (its side file appears), exits 0, and has a
    recording of its own that names its own job."""
    e = environment(tmp_path)
    e["TMPDIR"] = str(tmp_path)
    jobs = [subprocess.Popen([*GPUMON, "run", "-q", "--", "sh", "-c", f"touch ran-{i}; sleep 0.3"], env=e,
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for i in range(8)]
    outs = [j.communicate(timeout=60) for j in jobs]
    assert [j.returncode for j in jobs] == [0] * 8, [o[1] for o in outs]
    assert sorted(p.name for p in tmp_path.glob("ran-*")) == [f"ran-{i}" for i in range(8)]
    made = sorted(p for p in tmp_path.iterdir() if p.name.startswith("gpumon-run-"))
    assert len(made) == 8, [p.name for p in made]
    for p in made:
        assert re.fullmatch(r"gpumon-run-\d{8}-\d{6}\.\d{3}-\d+(-\d+)?\.gpumon", p.name), p.name
    pids = set()
    for p in made:
        db = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        meta = dict(db.execute("select key, value from meta"))
        db.close()
        assert meta["kind"] == "run" and "touch ran-" in meta["command"], meta
        pids.add(meta["job_pid"])
    assert len(pids) == 8


def test_default_name_carries_the_pid(gpumon, tmp_path):
    e = environment(tmp_path)
    r = subprocess.run([*GPUMON, "run", "--", "true"], env=e, cwd=tmp_path, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    (made,) = [p.name for p in tmp_path.iterdir() if p.name.startswith("gpumon-run-")]
    m = re.fullmatch(r"gpumon-run-\d{8}-\d{6}\.\d{3}-(\d+)\.gpumon", made)
    assert m, made
    assert f"recording: {made}" in r.stderr


def test_no_record_writes_nothing_and_still_judges(gpumon, tmp_path):
    """--no-record: no file anywhere, and the model fed live gives the alert while the job runs and
    the summary at the end, as with a recording."""
    e = environment(tmp_path)
    e["TMPDIR"] = str(tmp_path)
    before = set(os.listdir(tmp_path))
    r = subprocess.run([*GPUMON, "run", "--no-record", "--", PY, "-c", SERIES_CLIENT, "leak"], env=e, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(os.listdir(tmp_path)) == before
    summary = said(r.stderr)
    assert "recording: none (--no-record)" in summary
    assert re.search(r"leak: LEAK on the framework's allocated memory \(torch, pid \d+\): \+4\.00 MiB a step", summary)
    assert re.search(r"^gpumon: leak suspected: the framework's allocated memory", r.stderr, re.M), r.stderr
    assert "alert at" in summary and "(told live)" in summary


def test_no_record_with_output_is_refused(gpumon, tmp_path):
    side = tmp_path / "side"
    r = gpumon(["run", "--no-record", "-o", str(tmp_path / "x.gpumon"), "--", "touch", str(side)], scenario=H200)
    assert r.returncode == 2 and "--no-record" in r.stderr
    assert not side.exists() and not (tmp_path / "x.gpumon").exists()


def notes(stderr):
    return [l for l in stderr.splitlines() if l.startswith("gpumon: note: ")]


def test_notes_only_when_a_setting_has_no_effect(gpumon, tmp_path):
    # --fraction acts on JAX (all frameworks are set by default): the others' notes wait for -v
    r = run(gpumon, tmp_path, ["--fraction", "0.5", "--", "true"])
    assert r.returncode == 0, r.stderr
    assert notes(r.stderr) == [] and "note:" not in said(r.stderr), r.stderr
    r = run(gpumon, tmp_path, ["-v", "--fraction", "0.5", "--", "true"], out="v.gpumon")
    assert any("--fraction has no effect on Paddle's auto_growth" in n for n in notes(r.stderr)), r.stderr
    assert "note: --fraction has no effect on Paddle" in said(r.stderr)
    # the notes are in the recording with -v or without
    db = sqlite3.connect(f"file:{tmp_path / 'rec.gpumon'}?mode=ro", uri=True)
    events = [t for (t,) in db.execute("select text from events where kind = 'note'")]
    assert any("has no effect on Paddle" in t for t in events), events
    # --initial acts on no framework's default allocator: said without -v
    r = run(gpumon, tmp_path, ["--initial", "1G", "--", "true"], out="i.gpumon")
    assert any("--initial has no effect on PyTorch" in n for n in notes(r.stderr)), r.stderr
    # an option of PyTorch's when --framework leaves PyTorch out, and --no-prealloc for PyTorch alone
    r = run(gpumon, tmp_path, ["--framework", "jax", "--expandable", "--", "true"], out="j.gpumon")
    assert any("--framework leaves PyTorch out" in n for n in notes(r.stderr)), r.stderr
    r = run(gpumon, tmp_path, ["--framework", "torch", "--no-prealloc", "--", "true"], out="t.gpumon")
    assert any("--no-prealloc and --growth have no effect on PyTorch" in n for n in notes(r.stderr)), r.stderr
    # a plain --limit is enforced for every framework: the explanations wait for -v
    r = run(gpumon, tmp_path, ["--limit", "8G", "--", "true"], out="l.gpumon")
    assert notes(r.stderr) == [], r.stderr
    r = run(gpumon, tmp_path, ["-v", "--limit", "8G", "--", "true"], out="lv.gpumon")
    assert any("TensorFlow has no environment variable" in n for n in notes(r.stderr)), r.stderr


def test_summary_wrapped_to_columns_60(gpumon, tmp_path):
    """COLUMNS=60 (stderr is not a terminal here): no line of the summary is longer, and the words
    are all there (the verdict alone is three times as long)."""
    r = run(gpumon, tmp_path, ["-v", "--limit", "30G", "--", PY, "-c", SERIES_CLIENT, "leak"], env={"COLUMNS": "60"})
    assert r.returncode == 0, r.stderr
    lines = summary_lines(r.stderr)
    assert max(len(l) for l in lines) <= 60, "\n".join(l for l in lines if len(l) > 60)
    assert len(lines) > 12
    summary = said(r.stderr)
    assert re.search(r"leak: LEAK on the framework's allocated memory \(torch, pid \d+\): \+4\.00 MiB a step", summary)
    assert "set PYTORCH_CUDA_ALLOC_CONF" not in summary  # (no PyTorch option given)
    assert "note: PyTorch has no variable for a hard limit" in summary
    # without a terminal or COLUMNS: 80
    e = environment(tmp_path)
    e["TMPDIR"] = str(tmp_path)
    r = subprocess.run([*GPUMON, "run", "-o", str(tmp_path / "w80.gpumon"), "--", PY, "-c", SERIES_CLIENT, "leak"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = summary_lines(r.stderr)
    assert max(len(l) for l in lines) <= 80 and any(len(l) > 60 for l in lines), "\n".join(lines)


def test_out_of_memory_said_as_a_moment_from_the_start(gpumon, tmp_path):
    """A leak of 4 MiB a step at 10 steps a second: "out of memory in about N more steps (X,
    around M:SS from the start)", where M:SS is the run's length plus X; never "(at T s)", which
    read as if the out-of-memory were at T."""
    r = run(gpumon, tmp_path, ["--", PY, "-c", SERIES_CLIENT, "leak"])
    assert r.returncode == 0, r.stderr
    summary = said(r.stderr)
    m = re.search(r"out of memory in about (\d+) more steps \(((?:\d+ h )?(?:\d+ min )?(?:\d+ s)?), "
                  r"around (\d+):(\d\d)(?::(\d\d))? from the start\) at this rate", summary)
    assert m, summary
    assert not re.search(r"\(at \d+(\.\d+)? s\)", r.stderr), r.stderr
    duration = float(re.search(r"job exited with status 0 after (\d+\.\d) s", summary).group(1))
    h = re.search(r"(\d+) h", m.group(2))
    mi = re.search(r"(\d+) min", m.group(2))
    s = re.search(r"(\d+) s", m.group(2))
    secs = (int(h.group(1)) * 3600 if h else 0) + (int(mi.group(1)) * 60 if mi else 0) + (int(s.group(1)) if s else 0)
    if m.group(5):  # h:mm:ss
        at = int(m.group(3)) * 3600 + int(m.group(4)) * 60 + int(m.group(5))
    else:
        at = int(m.group(3)) * 60 + int(m.group(4))
    # words_duration rounds to a minute past an hour
    assert abs(at - (duration + secs)) <= (60 if h else 2), (at, duration, secs, m.group(0))


def test_summary_wrapped_to_the_terminal(tmp_path):
    """On a terminal 50 columns wide the summary fits in 50 columns, whatever COLUMNS says (the
    terminal's own size, TIOCGWINSZ, comes first)."""
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))
    e = environment(tmp_path)
    e.update(TMPDIR=str(tmp_path), COLUMNS="200")
    p = subprocess.Popen([*GPUMON, "run", "-o", str(tmp_path / "tty.gpumon"), "--", PY, "-c", SERIES_CLIENT, "leak"],
                         env=e, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            break
        if not data:
            break
        chunks.append(data)
    assert p.wait(timeout=60) == 0
    os.close(master)
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    lines = summary_lines(text)
    assert len(lines) > 8 and max(len(l) for l in lines) <= 50, "\n".join(lines)
    assert "LEAK on the framework's allocated memory" in said(text)
