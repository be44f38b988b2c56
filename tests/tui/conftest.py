# SPDX-License-Identifier: MIT
"""Fixtures for the tests of `gpumon watch`: the program runs in a tmux pane of a private tmux
server, against the fake NVML; tests type keys with send-keys and read the screen with
capture-pane, waiting for content with a deadline (never a fixed sleep).

Environment (set by ctest):
  GPUMON_BIN          path of the built gpumon program
  FAKE_NVML_LIB       the fake libnvidia-ml
  GPUMON_SOURCE_DIR   the source tree (for the bundled recording)
"""
import os
import pwd
import re
import shlex
import signal
import shutil
import subprocess
import textwrap
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
GPUMON_BIN = os.path.abspath(os.environ.get("GPUMON_BIN", os.path.join(HERE, "../../build/cli/gpumon")))
FAKE_NVML_LIB = os.path.abspath(os.environ.get(
    "FAKE_NVML_LIB", os.path.join(HERE, "../../build/tests/fake_nvml/libnvidia-ml-fake.so")))
SOURCE_DIR = os.path.abspath(os.environ.get("GPUMON_SOURCE_DIR", os.path.join(HERE, "../..")))
BUNDLED = os.path.join(SOURCE_DIR, "examples/recordings/h200_train_leak.gpumon")
USER = pwd.getpwuid(os.getuid()).pw_name


def base_env(extra=None):
    """The environment gpumon runs in: no stray GPUMON_/FAKE_NVML_ settings, a UTF-8 locale."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("GPUMON_", "FAKE_NVML_", "NO_COLOR", "LC_", "LANG"))}
    e["LANG"] = "C.UTF-8"
    e["TERM"] = "screen-256color"
    e["GPUMON_NVML_LIBRARY"] = FAKE_NVML_LIB
    if extra:
        e.update(extra)
    return e


def alive(pid):
    """Whether pid runs (a zombie has ended)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Pane:
    """One tmux session running one command in a pane that stays after the command exits."""

    def __init__(self, tmp_path, name):
        if not shutil.which("tmux"):
            pytest.fail("tmux is not installed: the Debian package tmux (make deps-test installs it)")
        self.sock = str(tmp_path / "tmux.sock")
        self.name = name
        self.started = False

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.sock, "-f", "/dev/null"] + list(args),
                              capture_output=True, text=True, check=check, timeout=20)

    def start(self, argv, env, width=100, height=30):
        cmd = " ".join(shlex.quote(a) for a in ["env", "-i"] + [f"{k}={v}" for k, v in env.items()] + argv)
        self.tmux("new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), "sh", "-c",
                  cmd + "; st=$?; echo; echo EXIT=$st; sleep 600")
        self.started = True

    def screen(self, escapes=False):
        args = ["capture-pane", "-p", "-t", self.name]
        if escapes:
            args.insert(1, "-e")
        return self.tmux(*args).stdout

    def wait(self, pattern, timeout=15, escapes=False, absent=False):
        """Waits until the screen matches the regular expression (or no longer does, with
        absent) in two captures 50 ms apart, and returns the second: a screen caught while curses
        was still drawing it is not taken. Fails with the last screen at the deadline."""
        deadline = time.monotonic() + timeout
        before = False
        while True:
            s = self.screen(escapes)
            found = (re.search(pattern, s, re.M) is not None) != absent
            if found and before:
                return s
            before = found
            if time.monotonic() > deadline:
                pytest.fail(f"screen {'still shows' if absent else 'never showed'} {pattern!r} within "
                            f"{timeout} s; last screen:\n{s}")
            time.sleep(0.05)

    def keys(self, *keys):
        self.tmux("send-keys", "-t", self.name, *keys)

    def resize(self, width, height):
        self.tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))

    def exit_status(self, timeout=10):
        """The exit status of gpumon once it has ended."""
        s = self.wait(r"^EXIT=\d+", timeout)
        return int(re.search(r"^EXIT=(\d+)", s, re.M).group(1))

    def _pids(self):
        """The processes the pane runs: its shell (the root) and the shell's descendants (gpumon,
        and what it started), as (roots, descendants)."""
        r = self.tmux("list-panes", "-t", self.name, "-F", "#{pane_pid}", check=False)
        roots = {int(p) for p in r.stdout.split()}
        parent = {}
        for d in os.listdir("/proc"):
            try:
                stat = open(f"/proc/{d}/stat").read()
                parent[int(d)] = int(stat[stat.rindex(")") + 2:].split()[1])
            except (OSError, ValueError):
                continue
        found, grew = set(), True
        while grew:
            grew = False
            for pid, ppid in parent.items():
                if pid not in found and (ppid in roots or ppid in found):
                    found.add(pid)
                    grew = True
        return roots, found

    def end_processes(self):
        """Ends what the pane runs, the shell last: gpumon with SIGTERM (SIGKILL after 5 s), then
        the shell. The shell leads the pane's session: its end hangs up the terminal, which sends
        SIGHUP and SIGCONT to gpumon, and a SIGCONT that lands while LeakSanitizer attaches to a
        sanitized gpumon at its exit cancels the attach's stop and leaves gpumon spinning for ever
        (seen in make test). So gpumon is gone before the shell goes, and anything left is killed."""
        if not self.started:
            return
        roots, pids = self._pids()
        for group in (pids, roots):
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for pid in group:
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
                deadline = time.monotonic() + 5
                while group and time.monotonic() < deadline:
                    group = {p for p in group if alive(p)}
                    time.sleep(0.05)
                if not group:
                    break

    def close(self):
        """Ends the pane's processes, then the tmux server."""
        self.end_processes()
        if self.started:
            self.tmux("kill-server", check=False)


class Watch:
    """Starts `gpumon watch` in a pane, with a scenario (text, dedented) for the fake NVML."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.panes = []

    def __call__(self, args=(), scenario=None, env=None, width=100, height=30):
        e = base_env(env)
        if scenario is not None:
            path = self.tmp_path / f"scenario{len(self.panes)}.scn"
            path.write_text(textwrap.dedent(scenario))
            e["FAKE_NVML_SCENARIO"] = str(path)
        pane = Pane(self.tmp_path, f"w{len(self.panes)}")
        self.panes.append(pane)
        pane.start([GPUMON_BIN, "watch"] + list(args), e, width, height)
        return pane

    def close(self):
        # every pane's processes first: the panes share one tmux server, whose end hangs up them all
        for p in self.panes:
            p.end_processes()
        for p in self.panes:
            p.close()


@pytest.fixture
def watch(tmp_path):
    w = Watch(tmp_path)
    yield w
    w.close()


@pytest.fixture
def sleepers():
    """Real processes, so that /proc gives the fake NVML's pids a user and a command line."""
    procs = []

    def start(n):
        out = []
        for i in range(n):
            # Popen returns once sleep runs (it reports a failed exec), so /proc has its command line
            p = subprocess.Popen(["sleep", str(600 + i)])
            procs.append(p)
            out.append(p.pid)
        return out

    yield start
    for p in procs:
        p.kill()
        p.wait()


def gpumon(args, scenario_path=None, env=None, timeout=60):
    """Runs gpumon without a terminal (for recordings and usage errors)."""
    e = base_env(env)
    if scenario_path:
        e["FAKE_NVML_SCENARIO"] = str(scenario_path)
    return subprocess.run([GPUMON_BIN] + list(args), env=e, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def model_document(path):
    """The run model's document for a recording: gpumon report --json prints the library's document
    (tests/cli/test_report.py holds that it is the library's, byte for byte)."""
    import json
    r = subprocess.run([GPUMON_BIN, "report", str(path), "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def owners_proc(tmp_path):
    """A /proc tree of our own (for GPUMON_PROC_ROOT) with pid 4101 in a Kubernetes pod's container
    (the pod ml-team/trainer-7f9c6d-x2k4q of tests/unit/cgroup/pods) and pid 4102 in Slurm job 4242,
    step 0, both `python train.py`; returns the environment that points gpumon at it."""
    uid = "8f2b5d0e-3c1a-4f7e-9b2d-0a1b2c3d4e5f"
    cgroups = {
        4101: f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{uid.replace('-', '_')}.slice/"
              f"cri-containerd-{'0123456789abcdef' * 4}.scope\n",
        4102: "0::/system.slice/slurmstepd.scope/job_4242/step_0\n",
    }
    root = tmp_path / "proc"
    for pid, cg in cgroups.items():
        d = root / str(pid)
        d.mkdir(parents=True)
        (d / "cgroup").write_text(cg)
        (d / "status").write_text("Name:\tpython\nPPid:\t1\nUid:\t0\t0\t0\t0\n")
        (d / "cmdline").write_bytes(b"python\0train.py\0")
    return {"GPUMON_PROC_ROOT": str(root), "GPUMON_PODS_DIR": os.path.join(SOURCE_DIR, "tests/unit/cgroup/pods")}
