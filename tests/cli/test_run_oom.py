# SPDX-License-Identifier: MIT
"""`gpumon run`: the job's stderr passed through byte for byte while it is scanned for out-of-memory
messages, the forensics after an out-of-memory death (co-tenant, leak, transient peak,
pre-allocation), and the summary's unaccounted memory, NVML leak verdict, time to out-of-memory and
peaks, as the run model gives them."""
import fcntl
import json
import os
import pty
import random
import re
import select
import signal
import struct
import subprocess
import termios
import textwrap
import time

import pytest

from conftest import GPUMON, H200
from test_run import PY, TWO, WIDE, environment, needs_unshare, open_recording, run, said

TOTAL = 150754820096  # the H200 of the scenarios
GIB = 1 << 30


def events(path, kind):
    db = open_recording(path)
    return [t for (t,) in db.execute("select text from events where kind = ? order by t_ns", (kind,))]


def run_bytes(tmp_path, job, scenario=H200, args=("-q",), **kw):
    """gpumon run ARGS -- python -c JOB with stdout and stderr captured as bytes."""
    kw.setdefault("stdout", subprocess.PIPE)
    kw.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([*GPUMON, "run", "-o", str(tmp_path / "r.gpumon")] + list(args) + ["--", PY, "-c", job],
                          env=environment(tmp_path, scenario), timeout=60, **kw)


# ---- the job's stderr: unchanged, at once -----------------------------------------------------------

def test_stderr_bytes_unchanged(tmp_path):
    """Every byte value, \\r progress bars, a partial line and no newline at the end."""
    job = textwrap.dedent("""
        import os, sys
        os.write(2, bytes(range(256)))
        os.write(2, b"progress 10%\\rprogress 20%\\rprogress 100%\\n")
        os.write(1, b"stdout stays\\n")
        os.write(2, b"half a line ")
        os.write(2, b"and its end\\r\\n\\x00\\xff\\xfe")
        os.write(2, b"no newline at the end")
        sys.exit(4)
    """)
    r = run_bytes(tmp_path, job)
    assert r.returncode == 4, r.stderr
    assert r.stdout == b"stdout stays\n"
    assert r.stderr == (bytes(range(256)) + b"progress 10%\rprogress 20%\rprogress 100%\n"
                        + b"half a line and its end\r\n\x00\xff\xfe" + b"no newline at the end")


def test_stderr_large_output(tmp_path):
    job = textwrap.dedent("""
        import os, random
        random.seed(3)
        err = bytes(random.getrandbits(8) for _ in range(1 << 20)) * 6
        out = b"o" * (1 << 20)
        for i in range(0, len(err), 65536 + 7):
            os.write(2, err[i:i + 65536 + 7])
            if i < len(out):
                os.write(1, out[i:i + 65536 + 7])
    """)
    r = run_bytes(tmp_path, job)
    random.seed(3)
    want = bytes(random.getrandbits(8) for _ in range(1 << 20)) * 6
    assert r.returncode == 0
    assert len(r.stderr) == len(want) and r.stderr == want
    assert r.stdout == b"o" * (1 << 20)


def test_stderr_partial_line_passed_on_at_once(tmp_path):
    """A line without its end reaches gpumon's stderr before the job writes more: the job waits
    for the test to have seen it."""
    seen = tmp_path / "seen"
    job = textwrap.dedent(f"""
        import os, sys, time
        os.write(2, b"epoch 1: 50%\\r")
        end = time.time() + 15
        while not os.path.exists({str(seen)!r}):
            if time.time() > end:
                sys.exit(3)
            time.sleep(0.01)
        os.write(2, b"epoch 1: 100%\\n")
    """)
    p = subprocess.Popen([*GPUMON, "run", "-q", "-o", str(tmp_path / "r.gpumon"), "--", PY, "-c", job],
                         env=environment(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got = b""
    end = time.time() + 15
    while b"50%\r" not in got and time.time() < end:
        if select.select([p.stderr], [], [], 0.1)[0]:
            got += os.read(p.stderr.fileno(), 4096)
    assert got == b"epoch 1: 50%\r"
    seen.touch()
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0
    assert got + err == b"epoch 1: 50%\repoch 1: 100%\n"


def test_stderr_and_stdout_keep_their_order(tmp_path):
    """On one pipe (2>&1) the two streams interleave as the job wrote them."""
    job = textwrap.dedent("""
        import os, time
        for i in range(5):
            os.write(2, b"err %d\\n" % i)
            time.sleep(0.05)
            os.write(1, b"out %d\\n" % i)
            time.sleep(0.05)
    """)
    r = run_bytes(tmp_path, job, stderr=subprocess.STDOUT)
    assert r.returncode == 0
    assert r.stdout == b"".join(b"err %d\nout %d\n" % (i, i) for i in range(5))


def test_job_sees_a_terminal_when_gpumon_has_one(tmp_path):
    master, slave = pty.openpty()
    job = "import os, sys; print(os.isatty(2), flush=True); os.write(2, b'to the terminal\\n')"
    p = subprocess.Popen([*GPUMON, "run", "-q", "-o", str(tmp_path / "r.gpumon"), "--", PY, "-c", job],
                         env=environment(tmp_path), stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out, _ = p.communicate(timeout=30)
    got = b""
    while select.select([master], [], [], 0.2)[0]:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    os.close(master)
    assert p.returncode == 0
    assert out == b"True\n"
    assert b"to the terminal" in got


def test_job_terminal_follows_resizes(tmp_path):
    """A resize of gpumon's terminal reaches the job's: the size at the start, then the new one."""
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    job = textwrap.dedent("""\
        import os, sys
        print(os.get_terminal_size(2), flush=True)
        sys.stdin.readline()
        print(os.get_terminal_size(2), flush=True)
    """)
    p = subprocess.Popen([*GPUMON, "run", "-q", "-o", str(tmp_path / "r.gpumon"), "--", PY, "-c", job],
                         env=environment(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    first = p.stdout.readline()
    assert first == b"os.terminal_size(columns=100, lines=30)\n"
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
    p.send_signal(signal.SIGWINCH)  # what the terminal sends its foreground process group
    time.sleep(0.2)
    p.stdin.write(b"\n")
    p.stdin.flush()
    out, _ = p.communicate(timeout=30)
    os.close(master)
    assert p.returncode == 0
    assert out == b"os.terminal_size(columns=132, lines=50)\n"


def test_job_is_told_of_a_resize_after_its_terminal_has_the_new_size(tmp_path):
    """The job may read its terminal's size on the terminal's own SIGWINCH, before gpumon copied the
    new one there: gpumon signals it again once its terminal has the new size."""
    master, slave = pty.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    job = textwrap.dedent("""\
        import os, signal, time
        got = []
        signal.signal(signal.SIGWINCH, lambda *a: got.append(os.get_terminal_size(2)))
        print("ready", flush=True)
        end = time.time() + 10
        while not got and time.time() < end:
            time.sleep(0.01)
        print(got[0] if got else "no SIGWINCH", flush=True)
    """)
    p = subprocess.Popen([*GPUMON, "run", "-q", "-o", str(tmp_path / "r.gpumon"), "--", PY, "-c", job],
                         env=environment(tmp_path), stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    assert p.stdout.readline() == b"ready\n"
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 132, 0, 0))
    p.send_signal(signal.SIGWINCH)  # to gpumon only: the job hears of it from gpumon
    out, _ = p.communicate(timeout=30)
    os.close(master)
    assert p.returncode == 0
    assert out == b"os.terminal_size(columns=132, lines=50)\n"


# ---- out-of-memory messages -------------------------------------------------------------------------

OOM_LINES = [
    ("PyTorch", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                "capacity of 139.80 GiB of which 1.19 GiB is free."),
    ("PyTorch", "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 15.78 GiB total capacity)"),
    ("PyTorch", "torch.cuda.OutOfMemoryError: out of memory"),
    ("PyTorch", "raise torch.OutOfMemoryError"),
    ("Paddle", "ResourceExhaustedError: "),
    ("Paddle", "Out of memory error on GPU 0. Cannot allocate 1.500000GB memory on GPU 0"),
    ("JAX/XLA", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
                "allocate 1073741824 bytes."),
    ("TensorFlow", "OOM when allocating tensor with shape[1024,1024,64] and type float"),
    ("CUDA", "cudaErrorMemoryAllocation: out of memory"),
    ("CUDA", "CUresult CUDA_ERROR_OUT_OF_MEMORY at kernel.cu:12"),
    ("PyTorch", "x" * 5000 + "CUDA out of memory" + "y" * 5000),        # a line longer than the buffer
    ("PyTorch", "100%|####| 10/10\rRuntimeError: CUDA out of memory."),  # after a progress bar
]


@pytest.mark.parametrize("framework,line", OOM_LINES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(OOM_LINES)])
def test_oom_message_recognised(gpumon, tmp_path, framework, line):
    job = f"import sys; sys.stderr.write({line!r} + '\\n'); sys.exit(1)"
    r = run(gpumon, tmp_path, ["--", PY, "-c", job])
    assert r.returncode == 1
    # passed on before the summary (text mode reads \r as \n; the byte tests above are exact)
    assert r.stderr.startswith(line.replace("\r", "\n") + "\n")
    assert re.search(rf"out of memory at \d+\.\d\d s on GPU 0: {re.escape(framework)}: ", said(r.stderr)), r.stderr
    oom = events(tmp_path / "rec.gpumon", "oom")
    last = line.split("\r")[-1]
    assert len(oom) == 1 and oom[0].startswith(f"{framework}: ") and last[:200] in oom[0], oom
    assert len(oom[0]) <= len(f"{framework}: ") + 2048  # the line up to 2048 bytes (a message's figures included)
    assert "\n  diagnosis: " in r.stderr


@pytest.mark.parametrize("line", ["CUDA out of mem", "Out of memory error on CPU", "OOM when allocat",
                                  "RESOURCE_EXHAUSTED: Out of disk", "torch.OutOfMemory", "CUDA out of\nmemory"])
def test_near_misses_are_not_oom(gpumon, tmp_path, line):
    job = f"import sys; sys.stderr.write({line!r} + '\\n'); sys.exit(1)"
    r = run(gpumon, tmp_path, ["--", PY, "-c", job])
    assert r.returncode == 1
    assert "out of memory at" not in r.stderr and "diagnosis" not in r.stderr
    assert events(tmp_path / "rec.gpumon", "oom") == []


def test_oom_but_exit_0_says_it_recovered(gpumon, tmp_path):
    """The model diagnoses the moment whatever came after (as gpumon report does from the recording);
    the summary says the job went on."""
    job = "import sys; sys.stderr.write('CUDA out of memory; retrying with a smaller batch\\n')"
    r = run(gpumon, tmp_path, ["--", PY, "-c", job])
    assert r.returncode == 0
    assert "the job went on and exited with status 0: it recovered" in r.stderr
    assert "\n  diagnosis: " in r.stderr
    assert len(events(tmp_path / "rec.gpumon", "oom")) == 1


# ---- forensics: one scenario per cause ---------------------------------------------------------------

OOM_EXIT = "import sys, time; time.sleep({sleep}); sys.stderr.write('torch.OutOfMemoryError: CUDA out of memory.\\n'); sys.exit(1)"


def diagnosis(r, cause):
    """The diagnosis paragraph of the summary (its wrapped lines joined), checked to name cause."""
    assert r.returncode == 1, r.stderr
    assert f"\n  diagnosis: {cause}: " in r.stderr, r.stderr
    m = re.search(r"diagnosis: (.*?) who held ", said(r.stderr))
    assert m, r.stderr
    return m.group(1)


@pytest.mark.valgrind
def test_forensics_co_tenant(gpumon, tmp_path):
    """Another process holds 30 % of the card when the job runs out."""
    scn = H200.replace("used=0 ", "used=60GiB ") + "proc 0 4194001 used=42GiB name=inference-server\n"
    r = run(gpumon, tmp_path, ["--", PY, "-c", OOM_EXIT.format(sleep=1.2)], scenario=scn, env=dict(WIDE))
    line = diagnosis(r, "co-tenant")
    assert "4194001" in line and "42.0 GiB" in line
    # the holders table: pid, user, GiB, job or not, command, owner (a pid not in our /proc: said so)
    row = next(l for l in r.stderr.splitlines() if l.strip().startswith("4194001"))
    # its user unknown: n/a, as everywhere else
    assert re.match(r"\s+4194001\s+n/a\s+42\.00\s+no\s+inference-server  in another PID namespace$", row), row
    assert re.search(r"who held GPU 0 GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 at \d+\.\d\d s:", r.stderr)
    # the last seconds (the model keeps about one point a second; a GPU that did not change has few),
    # as seconds before the moment ("2 s before", never "-2 s", which reads as a duration unknown)
    secs = re.search(r"GPU 0 used, about one point a second up to then: (.*?)(?: set | note: |$)", said(r.stderr))
    points = re.findall(r"(?:^|, )(\d+ s before|then): ([\d.]+ GiB)", secs.group(1)) if secs else []
    assert points and len(points) == len(secs.group(1).split(", ")), r.stderr
    assert all((w == "then" or 1 <= int(w.split()[0]) <= 10) and b == "60.0 GiB" for w, b in points), r.stderr
    assert "-" not in secs.group(1) and "?" not in said(r.stderr), r.stderr
    oom = events(tmp_path / "rec.gpumon", "oom")
    assert oom == ["PyTorch: torch.OutOfMemoryError: CUDA out of memory."]


LEAK_THEN_OOM = textwrap.dedent("""
    import json, os, socket, sys, time
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    lines = [json.dumps({"v": 1, "type": "hello", "pid": os.getpid(), "framework": "torch"})]
    for step in range(300):
        allocated = (2 << 30) + step * (4 << 20) + (step % 3) * (64 << 20)
        lines.append(json.dumps({"type": "sample", "t": time.time(), "step": step, "device": 0,
                                 "allocated": allocated, "reserved": allocated + (1 << 30)}))
    s.sendall(("\\n".join(lines) + "\\n").encode())
    s.close()
    time.sleep(0.3)
    sys.stderr.write("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 MiB.\\n")
    sys.exit(1)
""")


def test_forensics_leak(gpumon, tmp_path):
    r = run(gpumon, tmp_path, ["--", PY, "-c", LEAK_THEN_OOM])
    diagnosis(r, "leak")
    assert re.search(r"leak: LEAK on the framework's allocated memory \(torch, pid \d+\): \+4\.00 MiB a step",
                     said(r.stderr)), r.stderr


def test_forensics_transient_peak(gpumon, tmp_path):
    """The card sat at 10 GiB for over a second, then jumped to 139 GiB just before the message."""
    scn = H200.replace("used=0 ", "used=10GiB ") + "at 1.5 gpu 0 used=139GiB\n"
    r = run(gpumon, tmp_path, ["--", PY, "-c", OOM_EXIT.format(sleep=1.9)], scenario=scn)
    line = diagnosis(r, "transient peak")
    assert "from its usual 10.0 GiB to 139 GiB" in line


def test_forensics_preallocation(gpumon, tmp_path):
    """The allocator reserved 70 % of the card, tensors used 10 %."""
    job = textwrap.dedent(f"""
        import json, os, socket, sys, time
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(os.environ["GPUMON_RUN_SOCKET"])
        s.sendall((json.dumps({{"v": 1, "type": "hello", "framework": "torch"}}) + "\\n" +
                   json.dumps({{"type": "sample", "step": 0, "device": 0, "allocated": {TOTAL // 10},
                               "reserved": {TOTAL * 7 // 10}}}) + "\\n").encode())
        s.close()
        time.sleep(0.3)
        sys.stderr.write("RuntimeError: CUDA out of memory.\\n")
        sys.exit(1)
    """)
    scn = H200.replace("used=0 ", "used=100GiB ")
    r = run(gpumon, tmp_path, ["--", PY, "-c", job], scenario=scn)
    line = diagnosis(r, "pre-allocation")
    assert "reserved 98.3 GiB" in line and "only 14.0 GiB" in line


def test_memory_at_the_limit_at_the_end_counts(gpumon, tmp_path):
    """No message, but the card was full when the job failed: the model takes that as out of memory
    (from the recording too, so no event is written for it)."""
    scn = H200.replace("used=0 ", "used=139.8GiB ")
    r = run(gpumon, tmp_path, ["--", PY, "-c", "import sys, time; time.sleep(0.3); sys.exit(2)"], scenario=scn,
            env=dict(WIDE))
    assert r.returncode == 2
    assert re.search(r"\n  out of memory at \d+\.\d\d s on GPU 0: no message; the GPU was full when the job failed\n",
                     r.stderr), r.stderr
    assert "\n  diagnosis: " in r.stderr
    assert events(tmp_path / "rec.gpumon", "oom") == []


def test_killed_after_oom_keeps_its_status_and_gets_forensics(gpumon, tmp_path):
    job = ("import os, signal, sys, time; sys.stderr.write('CUDA out of memory\\n'); sys.stderr.flush(); "
           "time.sleep(0.2); os.kill(os.getpid(), signal.SIGKILL)")
    r = run(gpumon, tmp_path, ["--", PY, "-c", job])
    assert r.returncode == 128 + signal.SIGKILL
    assert "  diagnosis: " in r.stderr
    assert "job killed by SIGKILL (status 137)" in r.stderr


def test_an_exit_status_of_137_is_not_a_kill(gpumon, tmp_path):
    """The shell's 128+N cannot tell exit(137) from SIGKILL: the summary says which it was."""
    r = run(gpumon, tmp_path, ["--", PY, "-c", "import sys; sys.exit(137)"])
    assert r.returncode == 137
    assert "job exited with status 137" in r.stderr and "killed" not in r.stderr
    r = run(gpumon, tmp_path, ["--", PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
            out="t.gpumon")
    assert r.returncode == 128 + signal.SIGTERM and "job killed by SIGTERM (status 143)" in r.stderr


# ---- unaccounted memory and the NVML verdict: the job is pid 3 of a new PID namespace (gpumon
# ---- is pid 1, the thread that opens the driver took 2), so the
# ---- scenario can list it (test_run.py does the same)

def run_in_namespace(tmp_path, scenario, job, env=None, args=()):
    e = environment(tmp_path, scenario, wide=True)  # the summary's lines are read as laid out
    e.update(env or {})
    return subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", *GPUMON, "run",
                           "-o", str(tmp_path / "ns.gpumon")] + list(args) + ["--", PY, "-c", job],
                          env=e, capture_output=True, text=True, timeout=60)


REPORT_RESERVED = textwrap.dedent("""
    import json, os, socket, time
    time.sleep(0.5)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(os.environ["GPUMON_RUN_SOCKET"])
    s.sendall((json.dumps({"v": 1, "type": "hello", "framework": "torch"}) + "\\n" +
               json.dumps({"type": "sample", "step": 0, "device": 0, "allocated": 6 << 30,
                           "reserved": 8 << 30}) + "\\n").encode())
    s.close()
    time.sleep(0.3)
""")


@needs_unshare
@pytest.mark.parametrize("cvd", ["1", "GPU-11111111-2222-3333-4444-555555555555", "GPU-11111111", "1,0"])
def test_unaccounted_on_the_mapped_gpu(tmp_path, cvd):
    """The framework's device 0 is NVML's GPU 1 through CUDA_VISIBLE_DEVICES; the process holds
    9 GiB there, the allocator 8: 1 GiB unaccounted."""
    r = run_in_namespace(tmp_path, TWO + "proc 1 3 used=9GiB\n", REPORT_RESERVED, {"CUDA_VISIBLE_DEVICES": cvd})
    assert r.returncode == 0, r.stderr
    assert re.search(r"unaccounted, at most: 1\.00 GiB on GPU 1 \(pid 3 at \d+\.\d\d s\): NVML's figure beyond "
                     r"the allocator's reserved", said(r.stderr)), r.stderr


@needs_unshare
@pytest.mark.parametrize("cvd", ["0", "MIG-0b8e0b6c-5f7d-5b0e-9f5e-2d3c4b5a6978", ""])
def test_unaccounted_unknown_is_never_0(tmp_path, cvd):
    """Device 0 maps to a GPU where NVML lists nothing of the process, to a MIG instance, or to
    nothing: the figure is unknown and left out, never 0."""
    r = run_in_namespace(tmp_path, TWO + "proc 1 3 used=9GiB\n", REPORT_RESERVED, {"CUDA_VISIBLE_DEVICES": cvd})
    assert r.returncode == 0, r.stderr
    assert "gpumon run summary" in r.stderr and "unaccounted, at most" not in r.stderr, r.stderr
    # the allocator's own figures are known all the same
    assert "allocator cache, at most: 2.00 GiB" in said(r.stderr)


A100 = ('gpu 0 name="NVIDIA A100-SXM4-80GB" uuid=GPU-11111111-2222-3333-4444-555555555555 '
        'bus=00000000:0B:00.0 total=80GiB reserved=512MiB used=20GiB\n')


def co_tenant_and_growing_job(rate_mib, seconds):
    """A co-tenant holds 20 GiB of an 80 GiB GPU; from 0.3 s the job (pid 3) holds 1 GiB and grows by
    rate_mib MiB a second (fake_nvml's grow=); the GPU's used memory follows both, 0.1 s at a time."""
    lines = [A100.rstrip("\n"), "proc 0 999 used=20GiB name=co-tenant", f"at 0.3 proc 0 3 used=1GiB grow={rate_mib}MiB"]
    for i in range(3, int(seconds * 10) + 1):
        lines.append(f"at {i / 10:.1f} gpu 0 used={20 * 1024 + 1024 + round(rate_mib * (i / 10 - 0.3))}MiB")
    return "\n".join(lines) + "\n"


def seconds_of(text):
    """'4 min 37 s', '45 s', '1 h 05 min' (words_duration) in seconds."""
    m = re.fullmatch(r"(?:(\d+) h )?(?:(\d+) min ?)?(?:(\d+) s)?", text.strip())
    assert m and any(m.groups()), text
    h, mi, s = (int(g) if g else 0 for g in m.groups())
    return h * 3600 + mi * 60 + s


@needs_unshare
def test_nvml_verdict_time_to_oom_next_to_a_co_tenant(tmp_path):
    """No framework samples: the job's NVML figure is judged. It grows by 200 MiB a second next to a
    co-tenant's 20 GiB: the model alerts while the job runs, and the time to out-of-memory is the
    GPU's free memory at the end over the rate (80 - 0.5 reserved - 20 - the job's own), within 2 %.
    (The detector gives a verdict once it has 32 half-second windows, and alerts once the leak has
    held for a while: after about 25 s here.)"""
    rate = 200
    r = run_in_namespace(tmp_path, co_tenant_and_growing_job(rate, 45), "import time; time.sleep(33)")
    assert r.returncode == 0, r.stderr
    summary = said(r.stderr)
    m = re.search(r"leak: LEAK on the job's processes on GPU 0 \(NVML\): \+(\d+(?:\.\d+)?) MiB a second .*?; "
                  r"out of memory in about ([\d a-z]+?), around (\d+):(\d\d) from the start at this rate, against "
                  r"the GPU's free memory", summary)
    assert m, r.stderr
    assert 190 <= float(m.group(1)) <= 210, m.group(0)
    duration = float(re.search(r"job exited with status 0 after (\d+\.\d) s", summary).group(1))
    free_mib = 80 * 1024 - 512 - 20 * 1024 - 1024 - rate * (duration - 0.3)
    want = free_mib / rate
    got = seconds_of(m.group(2))
    assert abs(got - want) <= 0.02 * want, (got, want, m.group(0))
    assert abs(int(m.group(3)) * 60 + int(m.group(4)) - (duration + got)) <= 2, m.group(0)
    # said while the job ran, in the same words as the model's alert, and marked told live
    assert re.search(r"^gpumon: leak suspected: the job's processes on GPU 0 \(NVML\) rises by \d+ MiB a second",
                     r.stderr, re.M), r.stderr
    assert re.search(r"alert at \d+\.\d\d s \(told live\): leak suspected on the job's processes on GPU 0", summary)
    # the job's peak is its own process's
    assert re.search(r"job peak [\d.]+ GiB at [\d.]+ s \(other processes held 20\.0 GiB then\) made by the rise of "
                     r"pid 3 \(.*time\.sleep", summary), r.stderr


@needs_unshare
def test_peak_owner_is_the_rise_not_the_largest(tmp_path):
    """The GPU's peak is made by the job's process climbing from 1 to 5 GiB, not by the co-tenant,
    which holds more (30 GiB) but did not move: the owner is the rise, the co-tenant the largest."""
    scn = A100.replace("used=20GiB", "used=30GiB") + textwrap.dedent("""\
        proc 0 999 used=30GiB name=co-tenant
        at 0.3 proc 0 3 used=1GiB
        at 0.3 gpu 0 used=31GiB
        at 0.6 proc 0 3 used=3GiB
        at 0.6 gpu 0 used=33GiB
        at 0.9 proc 0 3 used=5GiB
        at 0.9 gpu 0 used=35GiB
    """)
    r = run_in_namespace(tmp_path, scn, "import time; time.sleep(1.5)")
    assert r.returncode == 0, r.stderr
    gpu = r.stderr[r.stderr.index("  GPU 0 "):]
    assert re.search(r"    job peak 5\.00 GiB at \d+\.\d\d s \(other processes held 30\.0 GiB then\)\n"
                     r"      made by the rise of pid 3 \(.*time\.sleep.*\)\n", gpu), gpu
    assert re.search(r"    GPU used peak 35\.0 GiB at \d+\.\d\d s\n"
                     r"      made by the rise of pid 3 \(.*time\.sleep.*\)\n"
                     r"      the largest holder then: pid 999 \(co-tenant\)\n", gpu), gpu


@needs_unshare
def test_nvml_verdict_on_each_gpu_of_the_job(tmp_path):
    """A job on two GPUs (data parallel) is judged on each: on GPU 0 it grows by 400 MiB a second
    (out of memory against that GPU's free memory), on GPU 1 it stays level (no leak, no alert)."""
    lines = []
    for i in range(190):
        lines.append(f"at {i / 10:.1f} proc 0 3 used={1024 + 40 * i}MiB")
        lines.append(f"at {i / 10:.1f} proc 1 3 used={1024 + (i % 2) * 16}MiB")
    r = run_in_namespace(tmp_path, TWO + "\n".join(lines) + "\n", "import time; time.sleep(18)")
    assert r.returncode == 0, r.stderr
    summary = said(r.stderr)
    m = re.search(r"leak: LEAK on the job's processes on GPU 0 \(NVML\): \+(\d+) MiB a second .*? against the GPU's "
                  r"free memory", summary)
    assert m and 360 <= int(m.group(1)) <= 440, r.stderr
    assert "leak: none: the job's processes on GPU 1 (NVML) does not keep rising" in summary, r.stderr
    assert "leak suspected on the job's processes on GPU 1" not in r.stderr


def test_framework_verdict_wins_over_nvml(gpumon, tmp_path):
    """A job that reports allocator figures is judged on them; no NVML verdict line."""
    r = run(gpumon, tmp_path, ["--", PY, "-c", LEAK_THEN_OOM.replace("sys.exit(1)", "sys.exit(0)")])
    assert r.returncode == 0
    verdicts = [l for l in r.stderr.splitlines() if l.startswith("  leak: ")]
    assert verdicts and all(l.startswith("  leak: LEAK on the framework's allocated memory") for l in verdicts), r.stderr
    assert "(NVML)" not in said(r.stderr).split(" alert at ")[0], r.stderr


@needs_unshare
@pytest.mark.parametrize("job_gpu,sign", [(0, False), (1, True)])
def test_a_full_gpu_counts_only_when_it_is_the_jobs(tmp_path, job_gpu, sign):
    """GPU 1 is full; the job failed: that is an out-of-memory sign only when the job was on GPU 1."""
    scn = TWO.replace("used=60GiB", "used=79.4GiB") + f"proc {job_gpu} 3 used=1GiB\n"
    r = run_in_namespace(tmp_path, scn, "import sys, time; time.sleep(0.5); sys.exit(2)")
    assert r.returncode == 2, r.stderr
    if sign:
        assert re.search(r"\n  out of memory at \d+\.\d\d s on GPU 1: no message; the GPU was full", r.stderr), r.stderr
        assert "\n  diagnosis: " in r.stderr
    else:
        assert "out of memory" not in r.stderr and "diagnosis" not in r.stderr, r.stderr


@needs_unshare
def test_over_the_limit_is_an_oom_sign(tmp_path):
    """--limit's alert path: the job stopped for holding more than the limit gets forensics."""
    scn = H200.replace("used=0 ", "used=6GiB ") + "proc 0 999 used=1GiB name=neighbour\nat 0.3 proc 0 3 used=5GiB\n"
    r = run_in_namespace(tmp_path, scn, "import time; time.sleep(5)", args=["--limit", "4G", "--on-exceed", "term"])
    assert r.returncode == 128 + signal.SIGTERM, r.stderr
    db = open_recording(tmp_path / "ns.gpumon")
    oom = [t for (t,) in db.execute("select text from events where kind = 'oom'")]
    assert oom == ["memory at the limit: job process 3 held 5.00 GiB, over --limit 4.00 GiB"], oom
    assert "\n  diagnosis: " in r.stderr
    row = next(l for l in r.stderr.splitlines() if l.strip().startswith("3 "))
    assert re.match(r"\s+3\s+\S+\s+5\.00\s+yes\s+.*time\.sleep", row), row
