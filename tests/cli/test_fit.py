# SPDX-License-Identifier: MIT
"""`gpumon fit -- CMD ... {batch} ...` on the fake driver: jobs whose allocator figures follow a known
law of the batch (said over the run socket as the inside view says them), each run stopped after its
steps by `gpumon run --steps`. The answer is checked against the law and the GPU's free memory,
a co-tenant shrinks it, and the jobs that give no answer are said as such."""
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON, H200

PY = sys.executable
MIB, GIB = 1 << 20, 1 << 30
FIXED, PER, CACHE = 2 * GIB, 256 * MIB, 64 * MIB

# A training job: batch size from argv; the allocator holds FIXED + PER x batch (or a square of it,
# or the same whatever the batch), reports a sample a step every 40 ms until gpumon stops it.
JOB = textwrap.dedent(f"""
    import json, os, socket, sys, time
    batch, law = int(sys.argv[1]), sys.argv[2]
    if law == "dies":
        sys.stderr.write("RuntimeError: no such dataset: /data/train\\n")
        sys.exit(3)
    alloc = {{"linear": {FIXED} + {PER} * batch, "square": {FIXED} + 4 * {MIB} * batch * batch,
             "ignores": {FIXED} + {PER}, "oom_above_300": {FIXED} + {PER} * batch,
             # weights that dwarf the activations: 1 MiB a sample, held in 20 MiB segments
             "heavy": {FIXED} + -(-batch * {MIB} // (20 * {MIB})) * 20 * {MIB}}}[law]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    s.sendall((json.dumps({{"v": 1, "type": "hello", "framework": "torch"}}) + "\\n").encode())
    for step in range(100000):
        s.sendall((json.dumps({{"type": "sample", "step": step, "device": 0, "allocated": alloc - {CACHE},
                                "reserved": alloc, "max_allocated": alloc - {CACHE}}}) + "\\n").encode())
        time.sleep(0.04)
        if law == "oom_above_300" and batch > 300:  # what the fit could not know: it dies at its first step
            sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                             "total capacity of 139.72 GiB of which 1.50 GiB is free.\\n")
            sys.exit(1)
""")

# an H200 with nothing on it (free = total - the driver's reserve), and with a 60 GiB co-tenant
EMPTY = H200
COTENANT = H200.replace("used=0 ", "used=60GiB ") + "proc 0 999 used=60GiB name=co-tenant\n"


def fit(gpumon, tmp_path, law, *args, scenario=EMPTY, timeout=120):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    return gpumon(["fit", *args, "--", PY, str(job), "{batch}", law], scenario=scenario, timeout=timeout,
                  env={"TMPDIR": str(tmp_path)})


def check_answer(doc, law_peak):
    """The answer is the largest batch whose predicted peak and margin fit the room."""
    b, room, margin = doc["max_batch"], doc["room_bytes"], doc["margin_bytes"]
    assert b and b >= 1
    assert doc["predicted_peak_bytes"] + margin <= room
    pred = lambda x: doc["fixed_bytes"] + doc["per_sample_bytes"] * x + doc["per_sample2_bytes"] * x * x
    # the margin grows with the prediction (the fragmentation and misfit shares), at least 1 % of room
    nxt = margin * pred(b + 1) / pred(b) if margin > 0.0101 * room else margin
    assert pred(b + 1) + nxt > room
    # every run measured what the law says, and the fit reproduces it
    for r in doc["runs"]:
        assert r["peak_source"] == "allocator" and r["steps"] >= 3 and not r["out_of_memory"]
        assert r["peak_bytes"] == law_peak(r["batch"])
        assert abs(r["predicted_peak_bytes"] - r["peak_bytes"]) <= 0.02 * r["peak_bytes"]
    # the answer is within 5 % of the true largest batch for this room and margin, and not above it
    scaled = margin > 0.0101 * room
    true = max(x for x in range(1, 100000)
               if law_peak(x) + (margin * law_peak(x) / law_peak(b) if scaled else margin) <= room)
    assert true * 0.95 <= b <= true, (b, true)


def test_linear_job(gpumon, tmp_path):
    r = fit(gpumon, tmp_path, "linear", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["shape"] == "linear" and len(doc["runs"]) >= 2
    assert doc["room_bytes"] == 150754820096 - 644939776  # the H200's total less the driver's reserve
    assert abs(doc["per_sample_bytes"] - PER) <= 0.01 * PER and abs(doc["fixed_bytes"] - FIXED) <= 0.02 * FIXED
    check_answer(doc, lambda b: FIXED + PER * int(b))
    # the batches tried were small: never one predicted not to fit, none near the answer but the last
    assert max(r["batch"] for r in doc["runs"]) <= doc["max_batch"]


def test_text_answer_and_table(gpumon, tmp_path):
    r = fit(gpumon, tmp_path, "linear", "--batch", "2,4,8")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.match(r"batch \d+ fits GPU 0 \(NVIDIA H200\) as it is now: predicted peak \S+ \S+ \+ \S+ \S+ margin "
                    r"of \S+ \S+ free$", lines[0]), lines[0]
    assert re.match(r"  peak = 2\.00 GiB \+ 256 MiB x batch, the runs within 0\.0 % of it$", lines[1]), lines[1]
    rows = [l.split() for l in lines if re.match(r"\s+\d+\s+\d+\s", l)]
    assert [row[0] for row in rows] == ["2", "4", "8"]
    # nothing of the runs is left behind
    assert not [p for p in os.listdir(tmp_path) if p.startswith("gpumon-fit-")]


def test_a_cotenant_shrinks_the_answer(gpumon, tmp_path):
    alone = json.loads(fit(gpumon, tmp_path, "linear", "--json", "--batch", "2,4,8").stdout)
    r = fit(gpumon, tmp_path, "linear", "--json", "--batch", "2,4,8", scenario=COTENANT)
    assert r.returncode == 0, r.stderr
    shared = json.loads(r.stdout)
    assert alone["room_bytes"] - shared["room_bytes"] == 60 * GIB
    check_answer(shared, lambda b: FIXED + PER * int(b))
    # 60 GiB less room is 240 batches fewer at 256 MiB a sample (the margin may move a little)
    assert abs((alone["max_batch"] - shared["max_batch"]) - 240) <= 12


def test_nonlinear_job_is_fitted_by_a_square(gpumon, tmp_path):
    r = fit(gpumon, tmp_path, "square", "--json", "--batch", "4,8,16,32")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["shape"] == "quadratic" and doc["note"]
    check_answer(doc, lambda b: FIXED + 4 * MIB * int(b) ** 2)


def test_weights_that_dwarf_the_activations_get_an_answer(gpumon, tmp_path):
    """Batch 1 and 2 peak alike (the allocator's segments hide 1 MiB a sample): gpumon fit goes on to
    larger runs instead of calling the batch unused, and answers."""
    r = fit(gpumon, tmp_path, "heavy", "--json", timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    batches = [run["batch"] for run in doc["runs"]]
    assert batches[:4] == [1, 2, 16, 128], batches
    assert doc["shape"] == "linear" and doc["max_batch"] > 1024
    assert abs(doc["per_sample_bytes"] - MIB) < 0.1 * MIB


def test_job_ignoring_the_placeholder_is_said(gpumon, tmp_path):
    r = fit(gpumon, tmp_path, "ignores", "--batch", "2,4,8")
    assert r.returncode == 1, r.stderr
    assert r.stdout.startswith("no batch size can be named for GPU 0 (NVIDIA H200): ")
    assert "{batch}" in r.stdout.splitlines()[0]


def test_job_dying_at_start(gpumon, tmp_path):
    r = fit(gpumon, tmp_path, "dies")
    assert r.returncode == 255 and r.stdout == ""
    assert r.stderr.strip().splitlines()[-1] == ("gpumon: fit: the job at batch 1 ended (status 3) before it reported "
                                                 "a step: RuntimeError: no such dataset: /data/train")


@pytest.mark.parametrize("args,words", [
    (["--", PY, "train.py", "--batch-size", "8"], "fit: the command has no {batch}: put it where the batch size goes"),
    ([], "fit: no command: gpumon fit [OPTIONS] -- CMD ... {batch} ..."),
    (["--batch", "0", "--", "x", "{batch}"], "fit: --batch '0': expected a whole number from 1 to 1000000000"),
    (["--max-runs", "99", "--", "x", "{batch}"], "fit: --max-runs '99': expected a whole number from 2 to 12"),
])
def test_refused_with_one_line(gpumon, args, words):
    r = gpumon(["fit", *args], scenario=EMPTY)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"gpumon: {words}\n" or (r.stderr.startswith(f"gpumon: {words}") and r.stderr.count("\n") == 1)


def test_verify_runs_the_answer_and_an_out_of_memory_corrects_it(gpumon, tmp_path):
    r = fit(gpumon, tmp_path, "linear", "--json", "--batch", "2,4,8", "--verify")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    verified = [x for x in doc["runs"] if x["verify"]]
    assert len(verified) == 1 and verified[0]["batch"] == doc["max_batch"] and not verified[0]["out_of_memory"]
    assert verified[0]["peak_bytes"] == FIXED + PER * doc["max_batch"]
    # a job that runs out of memory above 300, which no fit of small runs can see: a finding, not a crash
    r = fit(gpumon, tmp_path, "oom_above_300", "--json", "--batch", "2,4,8", "--verify")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    verified = [x for x in doc["runs"] if x["verify"]][0]
    assert verified["out_of_memory"] and verified["batch"] > 300
    # the bound bisected by runs below the failure, down to 1 %: the answer is the largest that ran
    probes = [x for x in doc["runs"] if x["probe"]]
    assert probes and all(x["out_of_memory"] == (x["batch"] > 300) for x in probes)
    ran = [x["batch"] for x in doc["runs"] if not x["out_of_memory"]]
    assert doc["max_batch"] == max(ran) and 297 <= doc["max_batch"] <= 300
    assert "ran out of memory: the answer is the largest batch that ran below it" in doc["note"]
    assert "ran out of memory when verified" not in r.stderr  # --json: the document says it
    r = fit(gpumon, tmp_path, "oom_above_300", "--batch", "2,4,8", "--verify")
    assert (f"gpumon: fit: batch {verified['batch']} ran out of memory when verified: finding the largest batch "
            "that runs below it") in r.stderr
    assert re.match(r"batch (29[7-9]|300) fits GPU 0", r.stdout), r.stdout


def start_fit(tmp_path, **kw):
    """`gpumon fit --steps 1000` of the linear job in a session of its own, in the background: its
    first run lasts 40 s unless something stops it."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    return job, subprocess.Popen([*GPUMON, "fit", "--steps", "1000", "--", PY, str(job), "{batch}", "linear"],
                                 env=fit_env(tmp_path), start_new_session=True, **kw)


def fit_env(tmp_path):
    """The fake H200, TMPDIR in tmp_path: fit's environment for the tests that start it themselves."""
    scn = tmp_path / "h200.scn"
    scn.write_text(EMPTY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    env.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), TMPDIR=str(tmp_path),
               LC_ALL="C")
    return env


def test_ctrl_c_stops_the_run_the_job_and_fit(tmp_path):
    """SIGINT to fit's process group, as Ctrl-C sends it, during its first run: the job and the run
    stop, fit starts no other, says so, and leaves no file of the runs."""
    _, p = start_fit(tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGINT, err
    assert out == "" and err.strip().splitlines()[-1] == "gpumon: fit: stopped by SIGINT after 1 run: no answer"
    assert not [f for f in os.listdir(tmp_path) if f.startswith("gpumon-fit-")]


def test_kill_9_of_fit_leaves_no_run_nor_job(tmp_path):
    """fit killed outright during a run: the run (told by the kernel when its parent dies) stops its
    job; nothing of them keeps running."""
    job, p = start_fit(tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)

    def ours():  # the run and the job: their command lines name this test's directory
        found = []
        for d in os.listdir("/proc"):
            if d.isdigit() and int(d) != p.pid:
                try:
                    cmd = open(f"/proc/{d}/cmdline", "rb").read()
                except OSError:
                    continue
                if str(job).encode() in cmd:
                    found.append(int(d))
        return found

    assert ours(), "the run and its job were running"
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    deadline = time.time() + 15
    while ours() and time.time() < deadline:
        time.sleep(0.2)
    assert not ours()
    # its runs' directory is left (nothing ran to remove it); the next fit removes it and says so
    (left,) = [d for d in tmp_path.iterdir() if d.name.startswith("gpumon-fit-")]
    kept = tmp_path / "gpumon-fit-kept00"  # a directory kept with --keep has no owner file: it stays
    kept.mkdir()
    running = tmp_path / "gpumon-fit-live00"  # one whose fit still runs (this test) stays too
    running.mkdir()
    (running / ".gpumon-fit-owner").write_text(f"{os.getpid()} {own_start()}\n")
    job.write_text(JOB)
    r = subprocess.run([*GPUMON, "fit", "--json", "--", PY, str(job), "{batch}", "linear"], env=fit_env(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"gpumon: fit: removed {left}, the runs of a gpumon fit that ended without removing them" in r.stderr
    assert not left.exists() and kept.exists() and running.exists()
    assert sorted(d.name for d in tmp_path.iterdir() if d.name.startswith("gpumon-fit-")) == [
        "gpumon-fit-kept00", "gpumon-fit-live00"]


def own_start():
    """This process's start in clock ticks, as /proc/self/stat says it (field 22)."""
    stat = open("/proc/self/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[19])


def test_no_place_for_the_runs_is_one_line(gpumon, tmp_path):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    r = gpumon(["fit", "--", PY, str(job), "{batch}", "linear"], scenario=EMPTY, env={"TMPDIR": "/nonexistent/dir"})
    assert r.returncode == 255 and r.stdout == ""
    assert r.stderr == ("gpumon: fit: cannot make a directory for the runs (/nonexistent/dir/gpumon-fit-XXXXXX): "
                        "No such file or directory\n")
