# SPDX-License-Identifier: MIT
"""Every `gpumon` example of the README's command blocks, of gpumon(1)'s EXAMPLES and of the
commands' --help runs, against the fake NVML (issue 14: "every example in them runs in a test").
Placeholders become real files (run.gpumon: a bundled recording; cert.pem, key.pem, auth: a
certificate made here), a listening port becomes 127.0.0.1:0, and commands that run until stopped
(serve, query -lms) are stopped once they have answered. A README block that shows a command's
output is compared with what the command prints today. The README's make and pip lines are what CI
itself runs (make test) and tests/pip checks; they are listed, not run here."""
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
README = os.path.join(ROOT, "README.md")
MAN = os.path.join(ROOT, "man/gpumon.1")
H200 = os.path.join(ROOT, "tests/fake_nvml/scenarios/h200.scn")
RECORDING = os.path.join(ROOT, "examples/traces/leak_30s.gpumon")
COMMANDS = ["show", "list", "query", "record", "run", "watch", "report", "export", "serve"]


def readme_examples():
    """(command line, output shown under it or None) of each `gpumon` line of a command block."""
    text = open(README, encoding="utf-8").read()
    out = []
    for lang, block in re.findall(r"```(\w*)\n(.*?)```", text, re.S):
        if lang not in ("", "sh", "console"):
            continue
        lines = block.splitlines()
        for i, line in enumerate(lines):
            shown = line.startswith("$ ")
            cmd = line[2:] if shown else line
            if not re.match(r"gpumon(\s|$)", cmd) or re.match(r"gpumon\s+(watch|serve)\s{2,}", cmd):
                continue  # a screen's title line ("gpumon watch  REPLAY of ...") is output, not a command
            cmd = re.sub(r"\s+#.*$", "", cmd)
            output = "\n".join(lines[i + 1:]) + "\n" if shown and i + 1 < len(lines) else None
            out.append((cmd, output))
    return out


def man_examples():
    man = open(MAN).read()
    section = man[man.index(".SH EXAMPLES"):]
    section = section[:section.index("\n.SH", 1)]
    return [l.replace("\\-", "-") for l in section.splitlines() if l.startswith("gpumon")]


def help_examples():
    out = []
    for c in [None] + COMMANDS:
        r = subprocess.run([GPUMON_BIN] + ([c] if c else []) + ["--help"], capture_output=True, text=True)
        assert r.returncode == 0, (c, r.stderr)
        text = r.stdout
        if "Examples:" not in text:
            continue
        for line in text[text.index("Examples:"):].splitlines()[1:]:
            if not line.strip():
                break
            m = re.match(r"\s+(gpumon .*?)(\s{2,}.*)?$", line)
            if m:
                out.append(m.group(1))
    return out


@pytest.fixture
def files(tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed (the TLS example needs a certificate)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                    "/CN=localhost", "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    (tmp_path / "auth").write_text("prom:s3cret\n")
    shutil.copy(RECORDING, tmp_path / "run.gpumon")
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    return tmp_path


def environment():
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_", "COLUMNS"))}
    e.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=H200, LC_ALL="C.UTF-8")
    return e


def runs_until_stopped(argv):
    return argv[1:2] == ["serve"] or any(a in ("-l", "-lms") for a in argv)


def run_example(cmd, cwd):
    """Runs one example; returns (exit status, stdout, stderr). A command that runs until stopped
    is stopped (SIGTERM) once it has printed something or 3 s have passed."""
    argv = cmd.split()
    argv[0] = GPUMON_BIN
    if argv[1:2] == ["serve"]:
        argv = [a if not re.match(r"^(0\.0\.0\.0|127\.0\.0\.1):19400$", a) else "127.0.0.1:0" for a in argv]
        if "--listen" not in argv:
            argv += ["--listen", "127.0.0.1:0"]
    p = subprocess.Popen(argv, cwd=cwd, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, stdin=subprocess.DEVNULL)
    if runs_until_stopped(argv):
        time.sleep(2.5)
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    return p.returncode, out, err


def test_there_are_examples():
    assert len(readme_examples()) >= 5 and len(man_examples()) >= 5


@pytest.mark.parametrize("cmd,shown", [(c, o) for c, o in readme_examples() if c != "gpumon"],
                         ids=lambda v: v if isinstance(v, str) and v.startswith("gpumon") else "")
def test_readme_example(files, cmd, shown):
    status, out, err = run_example(cmd, files)
    if cmd.split()[1:2] == ["serve"]:
        # the exporter serves until stopped: it said where, and stopped cleanly on SIGTERM
        assert re.search(r"serving https?://\S+/metrics", err), err
        assert status == 0, err
        return
    assert status == 0, (cmd, err)
    if shown is not None:
        assert out == shown, f"README shows another output for {cmd}"


def test_readme_main_view(tmp_path):
    """The README's first picture, `gpumon` on a busy H200, is what gpumon prints for those figures
    (two processes of this fixture's /proc; the host, the time and the users are the picture's)."""
    (cmd, shown), = [(c, o) for c, o in readme_examples() if c == "gpumon"]
    procs = {48213: b"python\0train.py\0--batch-size\00064\0", 51002: b"python\0eval.py\0"}
    for pid, cmdline in procs.items():
        d = tmp_path / "proc" / str(pid)
        d.mkdir(parents=True)
        (d / "status").write_text("Name:\tpython\nPPid:\t1\nUid:\t0\t0\t0\t0\n")
        (d / "cmdline").write_bytes(cmdline)
        (d / "cgroup").write_text("0::/user.slice/user-0.slice/session-1.scope\n")
    scn = tmp_path / "busy.scn"
    scn.write_text('gpu 0 name="NVIDIA H200" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 '
                   'total=150754820096 reserved=644939776 used=63.1GiB util=97 memutil=41 temp=58 power=612400\n'
                   'proc 0 48213 used=47.9GiB\nproc 0 51002 used=15.2GiB\n')
    env = environment()
    env.update(FAKE_NVML_SCENARIO=str(scn), GPUMON_PROC_ROOT=str(tmp_path / "proc"))
    r = subprocess.run([GPUMON_BIN], env=env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got, want = r.stdout.splitlines(), shown.splitlines()
    assert re.fullmatch(r"\S+  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d  driver 580\.159\.04  1 GPU", got[0]), got[0]
    assert got[0].split("  ", 1)[1][19:] == want[0].split("  ", 1)[1][19:]
    users = {"alice": "root ", "bob  ": "root "}
    for g, w in zip(got[1:], want[1:]):
        for name, ours in users.items():
            w = w.replace(f"  {name}  ", f"  {ours}  ", 1) if re.match(r"\s+0\s+\d+  ", w) else w
        assert g == w
    assert len(got) == len(want)


@pytest.mark.parametrize("cmd", man_examples() + help_examples())
def test_man_and_help_example(files, cmd):
    status, out, err = run_example(cmd, files)
    assert status == 0, (cmd, err)
    assert out, cmd


def no_gpu_examples():
    """The `make run ARGS="..."` lines of the README's "Try it without a GPU" section, as gpumon's argv."""
    text = open(README, encoding="utf-8").read()
    section = text[text.index("## Try it without a GPU"):]
    section = section[:section.index("\n## ", 1)]
    return [re.match(r'make run ARGS="([^"]+)"', l).group(1).split()
            for l in section.splitlines() if l.startswith("make run ARGS=")]


def test_no_gpu_section_has_every_command():
    assert sorted(a[0] for a in no_gpu_examples()) == ["report", "serve", "show", "watch"]


@pytest.mark.parametrize("args", no_gpu_examples(), ids=lambda a: a[0])
def test_no_gpu_example_runs_without_a_driver(args):
    """Each runs with no NVIDIA driver at all (as `make run ARGS=...` runs build/cli/gpumon from the
    source tree) and says that its figures are a recording's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_", "COLUMNS"))}
    env.update(GPUMON_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1", LC_ALL="C.UTF-8", TERM="xterm")
    argv = [GPUMON_BIN] + args
    if args[0] == "watch":  # the live view needs a terminal: a pty, q once the replay is on screen
        import pty
        pid, fd = pty.fork()
        if pid == 0:
            os.chdir(ROOT)
            os.execve(argv[0], argv, env)
        seen, deadline = b"", time.time() + 30
        while b"REPLAY of h200_train_leak.gpumon" not in seen and time.time() < deadline:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
        os.write(fd, b"q")
        status, deadline = None, time.time() + 30
        while status is None and time.time() < deadline:  # drain until the child has gone
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = st
        # The child leads its own session and process group: end whatever is left in it (a
        # sanitizer's helper, or the child itself if q did not end it) before the pty closes, so
        # that nothing outlives the test.
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if status is None:
            _, status = os.waitpid(pid, 0)
        os.close(fd)
        assert b"REPLAY of h200_train_leak.gpumon" in seen
        assert os.waitstatus_to_exitcode(status) == 0
        return
    if args[0] == "serve":
        argv += ["--listen", "127.0.0.1:0"]
    p = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL)
    if args[0] == "serve":
        time.sleep(2)
        p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    said = {"show": (out, "REPLAY of h200_train_leak.gpumon at "),
            "report": (out, "Report of examples/recordings/h200_train_leak.gpumon (recording of gpumon record)"),
            "serve": (err, "as at the end of the recording examples/recordings/h200_train_leak.gpumon")}[args[0]]
    assert said[1] in said[0], (out, err)


# A training script for fit's examples: takes its batch size as `--batch-size N` or `--bs=N` and
# reports allocator figures that grow with it over the run socket, a step every 40 ms.
TRAIN = '''
import json, os, socket, sys, time
args = sys.argv[1:]
batch = int(args[args.index("--batch-size") + 1]) if "--batch-size" in args else \\
    int(next(a.split("=", 1)[1] for a in args if a.startswith("--bs=")))
alloc = (2 << 30) + (256 << 20) * batch
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["GPUMON_RUN_SOCKET"])
s.sendall((json.dumps({"v": 1, "type": "hello", "framework": "torch"}) + "\\n").encode())
for step in range(100000):
    s.sendall((json.dumps({"type": "sample", "step": step, "device": 0, "allocated": alloc,
                           "reserved": alloc}) + "\\n").encode())
    time.sleep(0.04)
'''


def fit_examples():
    r = subprocess.run([GPUMON_BIN, "fit", "--help"], capture_output=True, text=True)
    text = r.stdout[r.stdout.index("Examples:"):]
    return [re.match(r"\s+(gpumon .*)$", l).group(1) for l in text.splitlines()[1:] if l.strip()]


@pytest.mark.parametrize("cmd", fit_examples())
def test_fit_help_example(tmp_path, cmd):
    """fit's examples name a training script (python train.py): here one that takes the batch size
    the way the example passes it and reports figures that grow with it."""
    (tmp_path / "train.py").write_text(TRAIN)
    assert "python train.py" in cmd
    argv = cmd.replace("python train.py", f"{sys.executable} train.py").split()
    argv[0] = GPUMON_BIN
    e = environment()
    e["TMPDIR"] = str(tmp_path)
    r = subprocess.run(argv, cwd=tmp_path, env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, (cmd, r.stderr)
    assert re.match(r"batch \d+ fits GPU 0 \(NVIDIA H200\) as it is now", r.stdout), r.stdout
