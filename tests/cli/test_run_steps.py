# SPDX-License-Identifier: MIT
"""`gpumon run --steps N`: the job is stopped once it has reported N distinct training steps, as
--on-exceed term stops it (SIGTERM, SIGKILL after the grace), with its last step's sample recorded,
a note event and exit status 0; a job that reports no step runs to its end; bad values are refused."""
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import H200
from test_completion import bash_complete, env  # noqa: F401 (env: the fixture bash_complete needs)

PY = sys.executable or "/usr/bin/python3"
MIB = 1 << 20

# A job that speaks the protocol (docs/run-protocol.md) as the inside view does: per step a sample
# (allocated: (step + 1) MiB) then a step message, every 50 ms. argv: the file its SIGTERM handler
# writes (the last step sent), what the handler does (die: end on SIGTERM; ignore: write and run
# on), how many steps, which messages ("sample+step" or "step"), ranks (processes sending the
# same steps, as DDP's do).
JOB = textwrap.dedent("""
    import json, os, signal, socket, sys, time
    mark, mode, steps, kinds, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
    last = -1
    def on_term(sig, frame):
        with open(mark, "w") as f:
            f.write(str(last))
        if mode == "die":
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
    signal.signal(signal.SIGTERM, on_term)
    children = []
    for rank in range(1, ranks):
        pid = os.fork()
        if pid == 0:
            mark, children = f"{mark}.{rank}", []
            break
        children.append(pid)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    def send(obj):
        s.sendall((json.dumps(obj) + "\\n").encode())
    send({"v": 1, "type": "hello", "pid": os.getpid(), "framework": "torch", "version": "2.11"})
    for step in range(steps):
        t = time.time()
        if "sample" in kinds:
            send({"type": "sample", "t": t, "step": step, "device": 0, "allocated": (step + 1) << 20,
                  "reserved": (step + 2) << 20})
        send({"type": "step", "t": t, "step": step})
        last = step
        time.sleep(0.05)
    time.sleep(0.3)
    print("ran to the end", flush=True)
    for pid in children:
        os.waitpid(pid, 0)
""")


def run(gpumon, tmp_path, args, cmd):
    """gpumon run -o tmp_path/rec.gpumon ARGS -- CMD, the socket's directory in tmp_path."""
    return gpumon(["run", "-o", str(tmp_path / "rec.gpumon")] + args + ["--"] + cmd, scenario=H200,
                  env={"TMPDIR": str(tmp_path), "COLUMNS": "200"}, timeout=60)


def job(tmp_path, mode="die", steps=200, kinds="sample+step", ranks=1):
    return [PY, "-c", JOB, str(tmp_path / "term"), mode, str(steps), kinds, str(ranks)]


def recording(tmp_path):
    return sqlite3.connect(f"file:{tmp_path / 'rec.gpumon'}?mode=ro", uri=True)


def events(db, kind):
    return [t for (t,) in db.execute("select text from events where kind = ? order by t_ns", (kind,))]


def test_stopped_after_n_steps(gpumon, tmp_path):
    r = run(gpumon, tmp_path, ["--steps", "3"], job(tmp_path))
    # the job died of the SIGTERM gpumon sent: gpumon asked for it, so it exits 0
    assert r.returncode == 0, r.stderr
    assert "ran to the end" not in r.stdout
    assert (tmp_path / "term").exists(), "the job got no SIGTERM"
    assert "gpumon: note: the job reported 3 steps (--steps): sending SIGTERM to the job (SIGKILL after 30 s)\n" \
        in r.stderr, r.stderr
    assert "\n  job killed by SIGTERM (status 143) after " in r.stderr, r.stderr
    assert "\n  stopped after 3 steps (--steps)\n" in r.stderr, r.stderr
    assert "SIGKILL" not in r.stderr.replace("(SIGKILL after 30 s)", ""), r.stderr
    db = recording(tmp_path)
    notes = events(db, "note")
    assert "stopped after 3 steps (--steps): sending SIGTERM to the job (SIGKILL after 30 s)" in notes, notes
    assert events(db, "exit") == ["143"]  # the recording keeps the job's own status
    # the sample that completed the 3rd step (step 2) is recorded before the stop
    samples = dict(db.execute("select step, allocated_bytes from framework_samples"))
    assert samples.get(2) == 3 * MIB, samples
    assert max(samples) < 10, samples  # stopped at once, not after the 200 steps
    settings = dict(db.execute("select key, value from meta"))["settings"].splitlines()
    assert "gpumon.steps=3" in settings and "gpumon.term_grace_ms=30000" in settings, settings


def test_a_job_ignoring_sigterm_is_killed_after_the_grace(gpumon, tmp_path):
    start = time.monotonic()
    r = run(gpumon, tmp_path, ["--limit", "1T", "--on-exceed", "term:500ms", "--steps", "3"],
            job(tmp_path, mode="ignore"))
    took = time.monotonic() - start
    assert r.returncode == 0, r.stderr
    assert "ran to the end" not in r.stdout
    assert (tmp_path / "term").exists(), "the job got no SIGTERM"
    assert "sending SIGTERM to the job (SIGKILL after 0.5 s)" in r.stderr, r.stderr
    assert "gpumon: run: the job is still running 0.5 s after SIGTERM: sending SIGKILL\n" in r.stderr, r.stderr
    assert "\n  job killed by SIGKILL (status 137) after " in r.stderr, r.stderr
    assert "\n  stopped after 3 steps (--steps)\n" in r.stderr, r.stderr
    assert took < 8, took  # the job alone would have run 10 s
    notes = events(recording(tmp_path), "note")
    assert "the job is still running 0.5 s after SIGTERM: sending SIGKILL" in notes, notes


@pytest.mark.parametrize("args,cmd", [([], ["sh", "-c", "sleep 0.3; exit 3"]),
                                      (["--no-inside"], [PY, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)"])],
                         ids=["not-python", "no-inside"])
def test_a_job_without_steps_runs_to_its_end(gpumon, tmp_path, args, cmd):
    r = run(gpumon, tmp_path, args + ["--steps", "3"], cmd)
    assert r.returncode == 3, r.stderr
    assert r.stderr.count("--steps") == 1, r.stderr
    assert "\n  --steps: the job reported no step (no inside view)\n" in r.stderr, r.stderr
    assert "SIGTERM" not in r.stderr
    assert not [n for n in events(recording(tmp_path), "note") if "--steps" in n]


def test_distinct_steps_count_once_across_processes(gpumon, tmp_path):
    """Two ranks each report steps 0 and 1 (step messages alone): two steps, not four; the job
    ends on its own with its own status."""
    r = run(gpumon, tmp_path, ["--steps", "3"], job(tmp_path, steps=2, kinds="step", ranks=2))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("ran to the end") == 2, r.stdout
    assert not (tmp_path / "term").exists()
    assert "\n  --steps 3: the job ended after reporting 2 steps\n" in r.stderr, r.stderr


def test_two_ranks_stop_at_the_third_distinct_step(gpumon, tmp_path):
    r = run(gpumon, tmp_path, ["--steps", "3"], job(tmp_path, ranks=2))
    assert r.returncode == 0, r.stderr
    assert "ran to the end" not in r.stdout
    assert (tmp_path / "term").exists() and (tmp_path / "term.1").exists(), "a rank got no SIGTERM"
    assert "\n  stopped after 3 steps (--steps)\n" in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["0", "-1", "x", "1000001", "3.5", "", "99999999999999999999"])
def test_bad_values_refused(gpumon, tmp_path, value):
    r = run(gpumon, tmp_path, ["--steps", value], ["touch", str(tmp_path / "ran")])
    assert r.returncode == 2
    assert r.stderr == f"gpumon: run: --steps '{value}': expected a number of training steps, 1 to 1000000\n"
    assert not (tmp_path / "ran").exists() and not (tmp_path / "rec.gpumon").exists()


def test_the_largest_value_is_taken(gpumon, tmp_path):
    r = run(gpumon, tmp_path, ["-q", "--steps=1000000"], ["sh", "-c", "exit 0"])
    assert r.returncode == 0, r.stderr


def test_help_and_completion(gpumon, env):  # noqa: F811 (the fixture imported above)
    r = gpumon(["run", "--help"])
    assert r.returncode == 0
    assert "  --steps N              stop the job once it has reported N training steps (1 to 1000000;\n" in r.stdout
    assert "0 when --steps stopped it" in r.stdout
    assert bash_complete(env, "gpumon run --ste") == ["--steps"]
    assert bash_complete(env, "gpumon run --steps ") == []  # a number: no command names offered


def test_documented():
    """The man page and the protocol's document say what --steps counts and what it does."""
    here = os.path.dirname(os.path.abspath(__file__))
    man = os.environ.get("GPUMON_MAN", os.path.join(here, "../../man/gpumon.1"))
    text = subprocess.run(["groff", "-man", "-Tutf8", man], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "GROFF_NO_SGR": "1"}).stdout
    text = " ".join(re.sub(r".\x08", "", text).replace("\u2010\n", "").split())
    for words in ["--steps N Stops the job once it has reported N training steps (1 to 1000000)",
                  "counts once", "stopped after N steps (--steps)", "--steps: the job reported no step (no inside view)",
                  "0 when --steps stopped it"]:
        assert words in text, words
    protocol = open(os.path.join(here, "../../docs/run-protocol.md")).read()
    assert "`gpumon run --steps N` counts the distinct step numbers of `sample` and `step` messages" in protocol


ORDER = textwrap.dedent("""
    import json, os, socket, time
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    for step in [5, 3, 5, 3, 7, 1]:  # a restarted loop and repeats: 4 distinct numbers
        s.sendall((json.dumps({"type": "step", "step": step}) + "\\n").encode())
        time.sleep(0.05)
    time.sleep(0.5)
""")


@pytest.mark.parametrize("n,status,line", [("4", 0, "stopped after 4 steps (--steps)"),
                                           ("5", 0, "--steps 5: the job ended after reporting 4 steps")])
def test_steps_out_of_order_count_once_each(gpumon, tmp_path, n, status, line):
    r = run(gpumon, tmp_path, ["--steps", n], [PY, "-c", ORDER])
    assert r.returncode == status, r.stderr
    assert f"\n  {line}\n" in r.stderr, r.stderr
    assert ("job killed by SIGTERM" in r.stderr) == (n == "4"), r.stderr


def test_a_monitor_that_sends_no_step(gpumon, tmp_path):
    """The job's monitor said hello but reported no step (a job without optimizer steps)."""
    r = run(gpumon, tmp_path, ["--steps", "3"], job(tmp_path, steps=0))
    assert r.returncode == 0, r.stderr
    assert "\n  --steps: the job reported no step (its inside view sent none)\n" in r.stderr, r.stderr
