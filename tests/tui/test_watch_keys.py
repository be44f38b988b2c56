# SPDX-License-Identifier: MIT
"""`gpumon watch` keys and columns of issue 14 (point 5) and issue 13 (point 1): filters by any part
of the user, command, pid or owner in any case with a fresh prompt; seek, pause and restart in a
replay; host CPU %, RSS and run time of real processes; signals to one's own process after a
confirmation, and refused for another user's; no line wider than the terminal at 80x24 and 120x40."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import BUNDLED, GPUMON_BIN, USER, base_env, owners_proc
from test_watch import columns, table


def scenario(*pids, sizes=None):
    lines = ["gpu 0 name=\"NVIDIA H200\" total=141GiB reserved=600MiB used=40GiB util=50 temp=50"]
    for i, pid in enumerate(pids):
        lines.append(f"proc 0 {pid} used={(sizes or {}).get(pid, 1024 * (len(pids) - i))}MiB")
    return "\n".join(lines) + "\n"


def key_line(s):
    return s.rstrip("\n").splitlines()[-1]


def test_filters_match_any_part_in_any_case_with_a_fresh_prompt(watch, sleepers):
    a, b, c = sleepers(3)  # sleep 600, sleep 601, sleep 602; a holds the most
    p = watch(scenario=scenario(a, b, c))
    p.wait("sleep 602")
    # the command, by a part of it in another case, blanks included
    p.keys("/")
    s = p.wait("Filter by user, command, pid or owner")
    assert key_line(s).endswith("cancel):")
    p.keys("-l", "EEP 601")
    p.keys("Enter")
    s = p.wait("filter /EEP 601")
    assert [r[1] for r in table(s)] == [b]
    # a fresh prompt: what was typed before is not there again
    p.keys("/")
    s = p.wait("Filter by user")
    assert key_line(s).endswith("cancel):"), key_line(s)
    # a part of the pid
    p.keys("-l", str(c))
    p.keys("Enter")
    s = p.wait(f"filter /{c}")
    assert [r[1] for r in table(s)] == [c]
    p.keys("c")
    s = p.wait("filter /", absent=True)
    assert len(table(s)) == 3
    # the user filter: a part of the name, in another case
    p.keys("u")
    p.wait("Filter by user \\(")
    p.keys("-l", USER[1:].upper())
    p.keys("Enter")
    s = p.wait(f"user ~{re.escape(USER[1:].upper())}")
    assert len(table(s)) == 3
    p.keys("u")
    s = p.wait("Filter by user \\(")
    assert key_line(s).endswith("cancel):"), key_line(s)  # fresh again
    p.keys("-l", "no-such-user")
    p.keys("Enter")
    p.wait("no process matches the filter")
    p.keys("c")
    p.wait("sleep 602")


def test_host_cpu_rss_and_run_time_of_real_processes(watch, sleepers, tmp_path):
    idle, = sleepers(1)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        started = time.monotonic()
        p = watch(scenario=scenario(busy.pid, idle), width=120, height=40)
        s = p.wait(rf"^\s+0\s+{busy.pid} .*\d+\.\d\s", timeout=15)  # its CPU %, once read twice
        rows = {int(r["PID"]): r for r in columns(s)}
        assert float(rows[busy.pid]["CPU%"]) >= 10, rows  # a busy loop (on a loaded machine)
        s = p.wait(rf"^\s+0\s+{idle} .* 0\.0\s", timeout=15)
        rows = {int(r["PID"]): r for r in columns(s)}
        assert float(rows[idle]["CPU%"]) == 0.0, rows
        # RSS as the kernel says (within what a second of a busy loop changes), TIME since it started
        with open(f"/proc/{busy.pid}/status") as f:
            rss_kib = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1))
        m = re.fullmatch(r"([\d.]+) (KiB|MiB)", rows[busy.pid]["RSS"])
        assert m, rows[busy.pid]
        shown_kib = float(m.group(1)) * (1024 if m.group(2) == "MiB" else 1)
        assert abs(shown_kib - rss_kib) <= 0.1 * rss_kib + 64, (shown_kib, rss_kib)
        t = re.fullmatch(r"(\d\d):(\d\d)", rows[busy.pid]["TIME"])
        assert t, rows[busy.pid]
        age = time.monotonic() - started + 0.3
        assert 0 <= int(t.group(1)) * 60 + int(t.group(2)) <= age + 2
    finally:
        busy.kill()
        busy.wait()


def test_columns_and_lines_fit_80x24_and_120x40(watch, sleepers):
    pids = sleepers(30)
    long_cmd = subprocess.Popen(["sleep", "700", *(["--a-very-long-argument"] * 12)], stderr=subprocess.DEVNULL)
    try:
        p = watch(scenario=scenario(long_cmd.pid, *pids), width=80, height=24)
        for width, height in [(80, 24), (120, 40)]:
            p.resize(width, height)
            s = p.wait(rf"^\s+0\s+{long_cmd.pid} ", timeout=10)
            s = p.wait(r"\d\d:\d\d:\d\d", timeout=5)
            for screen in ("main", "help", "filter", "confirm"):
                if screen == "help":
                    p.keys("h")
                    s = p.wait("gpumon watch: GPU memory, live")
                elif screen == "filter":
                    p.keys("/", "-l", "x" * 60)
                    s = p.wait("x" * 40)
                elif screen == "confirm":
                    p.keys("Home", "T")
                    s = p.wait("Send SIGTERM")
                lines = s.rstrip("\n").split("\n")
                assert len(lines) <= height and all(len(l) <= width for l in lines), (screen, s)
                if screen == "main":
                    head = next(i for i, l in enumerate(lines) if re.match(r"^\s+GPU\s+PID USER", l))
                    want = {80: ["CPU%"], 120: ["CPU%", "RSS", "TIME"]}[width]
                    assert all(w in lines[head] for w in want), lines[head]
                    # every line of the table is a whole row: none continues on the next line
                    rows = lines[head + 1:len(lines) - 2]
                    assert rows and all(re.match(r"^[! ] +\d+ +\d+ ", l) for l in rows), s
                    assert lines[-1].startswith("q quit")
                if screen in ("help", "filter"):
                    p.keys("Escape")
                if screen == "confirm":
                    p.keys("n")
                    p.wait("not sent")
                p.wait("gpumon watch: GPU memory, live|Filter by|Send SIGTERM", absent=True)
    finally:
        long_cmd.kill()
        long_cmd.wait()


def test_sigterm_to_own_process_after_confirmation(watch):
    child = subprocess.Popen(["sleep", "300"])
    try:
        p = watch(scenario=scenario(child.pid))
        p.wait(f"pid {child.pid} on GPU 0")
        # any key but y cancels: nothing is sent
        p.keys("K")
        p.wait(rf"Send SIGKILL to pid {child.pid} \({USER}\): sleep 300\? y: send")
        p.keys("n")
        p.wait(f"SIGKILL not sent to pid {child.pid}")
        assert child.poll() is None
        p.keys("T")
        p.wait(rf"Send SIGTERM to pid {child.pid}")
        p.keys("y")
        p.wait(f"SIGTERM sent to pid {child.pid}")
        assert child.wait(timeout=10) == -15
    finally:
        child.kill()
        child.wait()


def test_signal_refused_for_another_users_process(tmp_path):
    """gpumon runs as nobody; the process belongs to the test's user (root): refused, not sent."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to run gpumon as another user")
    child = subprocess.Popen(["sleep", "300"])
    d = tempfile.mkdtemp()  # a place nobody can read the scenario from
    try:
        os.chmod(d, 0o755)
        scn = os.path.join(d, "s.scn")
        with open(scn, "w") as f:
            f.write(scenario(child.pid))
        os.chmod(scn, 0o644)
        from conftest import Pane
        pane = Pane(tmp_path, "nobody")
        env = base_env({"FAKE_NVML_SCENARIO": scn, "HOME": "/"})
        try:
            pane.start(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", GPUMON_BIN, "watch"], env)
            pane.wait(f"pid {child.pid} on GPU 0", timeout=15)
            pane.keys("T")
            s = pane.wait("refused")
            assert re.search(rf"SIGTERM refused: pid {child.pid} belongs to user {USER}, not to you", s), s
            assert "Send SIGTERM" not in s
            time.sleep(0.3)  # a signal sent would have ended it by now
            assert child.poll() is None
            pane.keys("q")
            assert pane.exit_status() == 0
        finally:
            pane.close()
    finally:
        child.kill()
        child.wait()
        shutil.rmtree(d, ignore_errors=True)


def position(s):
    return re.search(r"(PAUSED  )?(\d\d:\d\d|END of recording \d\d:\d\d) / \d\d:\d\d", s)


def memory_line(s):
    """The GPU's panel (its figures, bar and graph), from its title line to the table's header."""
    lines = s.splitlines()
    first = next(i for i, l in enumerate(lines) if l.startswith("GPU 0 "))
    head = next(i for i, l in enumerate(lines) if re.match(r"^\s+GPU\s+PID USER", l))
    return "\n".join(lines[first:head])


def test_replay_seek_pause_and_restart(watch):
    """The bundled recording (53 s): paused at its start, seeks of 10 s each way, Home, End, and r."""
    p = watch(["--replay", BUNDLED])
    p.wait(r"00:0\d / 00:53")
    p.keys("p")
    s = p.wait("PAUSED")
    p.keys("Home")
    s = p.wait(r"PAUSED  00:00 / 00:53")
    start_mem = memory_line(s)
    p.keys("Right")
    p.wait(r"PAUSED  00:10 / 00:53")
    p.keys("Right")
    s = p.wait(r"PAUSED  00:20 / 00:53")
    at_20 = memory_line(s)
    time.sleep(1.2)  # paused: the position stands while time passes
    assert "PAUSED  00:20 / 00:53" in p.screen()
    p.keys("End")
    s = p.wait(r"END of recording 00:53 / 00:53")
    end_mem = memory_line(s)
    # back 10 s from the end: the records are read again from the start, up to 00:43
    p.keys("Left")
    p.wait(r"PAUSED  00:43 / 00:53")
    p.keys("Home")
    s = p.wait(r"PAUSED  00:00 / 00:53")
    assert memory_line(s) == start_mem
    p.keys("Right", "Right")
    s = p.wait(r"PAUSED  00:20 / 00:53")
    assert memory_line(s) == at_20  # the same place shows the same figures, however reached
    assert (start_mem, at_20) != (end_mem, end_mem)
    # r: from the start, playing
    p.keys("r")
    s = p.wait(r"^ gpumon watch .* 00:0\d / 00:53", timeout=5)
    assert "PAUSED" not in s
    p.wait(r"00:0[2-9] / 00:53", timeout=10)
    p.keys("q")
    assert p.exit_status() == 0


def test_seek_and_signal_keys_say_why_not(watch, sleepers):
    a, = sleepers(1)
    p = watch(scenario=scenario(a))
    p.wait("sleep 600")
    p.keys("Right")
    p.wait("seeking is for a replay")
    r = watch(["--replay", BUNDLED])
    r.wait(r"/ 00:53")
    r.keys("T")
    r.wait("this is a recording; its processes are not on this machine")


def test_owner_column_filter_and_memory_health(watch, tmp_path):
    """Processes of a pod and of a Slurm job (a /proc tree of our own through GPUMON_PROC_ROOT and a
    pods directory through GPUMON_PODS_DIR): the OWNER column names each, `/` finds a process by its
    owner; a GPU whose memory needs attention gets the memory health line, a clean one none."""
    scn = ("gpu 0 name=\"NVIDIA H200\" total=141GiB used=30GiB ecc_uv_total=2\n"
           "gpu 1 name=\"NVIDIA H200\" total=141GiB used=1GiB\n"
           "proc 0 4101 used=20GiB\nproc 0 4102 used=10GiB\n")
    p = watch(scenario=scn, env=owners_proc(tmp_path), width=160, height=40)
    s = p.wait("slurm job 4242.0")
    assert "OWNER" in s and "pod ml-team/trainer-7f9c6d-x2k4q" in s
    health = [l for l in s.splitlines() if "memory health" in l]
    assert health == ["! memory health: 2 uncorrectable ECC errors since the driver loaded"]  # GPU 0 only
    assert s.index("GPU 0") < s.index("! memory health") < s.index("GPU 1")
    p.keys("/")
    p.wait("Filter by user, command, pid or owner")
    p.keys("-l", "ML-TEAM")
    p.keys("Enter")
    s = p.wait("filter /ML-TEAM")
    assert [r[1] for r in table(s)] == [4101]
