# SPDX-License-Identifier: MIT
"""The long-running commands end when their terminal goes away, in every build: `gpumon watch` (live
on the fake NVML, and --replay) when the terminal is closed (its session leader gets SIGHUP), when
it is closed while gpumon is not the leader (no signal: the end of input), on SIGHUP, and when it is
left in an orphaned background process group whose reads fail with EIO (it used to spin a core
there, each poll returning at once); `gpumon record` and `gpumon serve` end cleanly on SIGHUP (the
terminal closed), the recording closed and readable. Each runs in a pseudo-terminal of its own."""
import fcntl
import json
import os
import pty
import re
import signal
import struct
import sys
import termios
import time

import pytest

from conftest import BUNDLED, GPUMON_BIN, base_env, gpumon

SCENARIO = 'gpu 0 name="NVIDIA H200" total=141GiB reserved=600MiB used=40GiB util=50 temp=50\n'


def spawn(argv, env, shell=None):
    """Starts argv in a new pseudo-terminal (100x30), as its session leader, or under `sh -c SHELL`
    (argv as "$@") when shell is given; returns (pid, master fd)."""
    pid, fd = pty.fork()
    if pid == 0:
        try:
            if shell is None:
                os.execve(argv[0], argv, env)
            os.execve("/bin/sh", ["sh", "-c", shell, "sh"] + argv, env)
        finally:
            os._exit(127)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    return pid, fd


def read_until(fd, pattern, timeout=20):
    """Reads the terminal until the bytes match the regular expression; returns the match."""
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
        m = re.search(pattern, buf)
        if m:
            return m
    pytest.fail(f"the terminal never showed {pattern!r}; it showed:\n{buf[-2000:]!r}")


def wait_child(pid, timeout=5):
    """The exit status of our child pid once it has ended, or None (after killing it) if it is still
    running after timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def state(pid):
    """The process's state letter (R running, S sleeping, Z ended), or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def wait_gone(pid, timeout=5):
    """Whether a process that is not our child ended (gone or a zombie) within timeout seconds;
    killed when it did not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state(pid) in (None, "Z"):
            return True
        time.sleep(0.05)
    s = state(pid)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"pid {pid} still runs (state {s}) {timeout} s after its terminal went away")


@pytest.fixture(params=["live", "replay"])
def watch_argv(request, tmp_path):
    """`gpumon watch` live on the fake NVML, or replaying the bundled recording; (argv, env)."""
    env = base_env()
    if request.param == "replay":
        return [GPUMON_BIN, "watch", "--replay", BUNDLED], env
    scn = tmp_path / "one.scn"
    scn.write_text(SCENARIO)
    env["FAKE_NVML_SCENARIO"] = str(scn)
    return [GPUMON_BIN, "watch"], env


def test_watch_ends_when_its_terminal_is_closed(watch_argv):
    argv, env = watch_argv
    pid, fd = spawn(argv, env)
    read_until(fd, rb"gpumon watch")
    os.close(fd)  # the session leader, gpumon, gets SIGHUP
    assert wait_child(pid) == 0


def test_watch_ends_on_sighup(watch_argv):
    argv, env = watch_argv
    pid, fd = spawn(argv, env)
    read_until(fd, rb"gpumon watch")
    os.kill(pid, signal.SIGHUP)
    assert wait_child(pid) == 0
    os.close(fd)


def test_watch_ends_at_the_end_of_input(watch_argv, tmp_path):
    """gpumon under a shell that survives the hangup: no signal reaches gpumon, only the closed
    terminal (poll: hung up; read: 0)."""
    argv, env = watch_argv
    status = tmp_path / "status"
    pid, fd = spawn(argv, env, shell=f'trap "" HUP; "$@"; echo $? > {status}; sleep 30')
    read_until(fd, rb"gpumon watch")
    children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    assert len(children) == 1, children
    os.close(fd)
    assert wait_gone(int(children[0]))
    deadline = time.monotonic() + 5
    while not status.exists() or not status.read_text().strip():
        assert time.monotonic() < deadline, "the shell never wrote gpumon's exit status"
        time.sleep(0.05)
    assert status.read_text().strip() == "0"
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


# gpumon in a process group of its own whose parent has exited: an orphaned background group of a
# terminal that is still open, where every read (and mode change) of the terminal fails with EIO
ORPHAN = """\
import os, sys, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.close(w)
    os.read(r, 1)  # until the parent has exited
    os.execv(sys.argv[1], sys.argv[1:])
print("GPUMON", pid, flush=True)
os._exit(0)
"""


def test_watch_in_an_orphaned_background_group_ends(watch_argv):
    argv, env = watch_argv
    pid, fd = spawn([sys.executable, "-c", ORPHAN] + argv, env, shell='"$@"; sleep 30')
    target = int(read_until(fd, rb"GPUMON (\d+)").group(1))
    time.sleep(0.5)  # let it start and read: input waiting made the loop spin on EIO
    os.write(fd, b"x\r")
    assert wait_gone(target)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(fd)


def test_record_closes_its_recording_when_its_terminal_is_closed(tmp_path):
    scn = tmp_path / "one.scn"
    scn.write_text(SCENARIO)
    out = tmp_path / "hup.gpumon"
    env = base_env({"FAKE_NVML_SCENARIO": str(scn)})
    pid, fd = spawn([GPUMON_BIN, "record", "-o", str(out)], env)
    read_until(fd, rb"Ctrl-C to stop")
    time.sleep(0.5)  # some rows
    os.close(fd)  # SIGHUP
    assert wait_child(pid) == 0
    r = gpumon(["report", str(out), "--json"])
    assert r.returncode == 0, r.stderr
    # its end was written when it stopped (killed, it would end at its last row, the first one here:
    # rows come on a change, and the GPU does not change)
    assert json.loads(r.stdout)["source"]["duration_s"] >= 0.5


def test_serve_ends_on_sighup(tmp_path):
    scn = tmp_path / "one.scn"
    scn.write_text(SCENARIO)
    env = base_env({"FAKE_NVML_SCENARIO": str(scn)})
    pid, fd = spawn([GPUMON_BIN, "serve", "--listen", "127.0.0.1:0"], env)
    read_until(fd, rb"Ctrl-C to stop")
    os.close(fd)  # SIGHUP
    assert wait_child(pid) == 0
