# SPDX-License-Identifier: MIT
"""`gpumon watch` reads a process's host figures (CPU %, RSS, run time) and its kill check from the
/proc that GPUMON_PROC_ROOT names (the host's /proc mounted into a container), as the process list
does: here a /proc tree of our own whose pid is in no real /proc."""
import os
import re
import time

from conftest import owners_proc
from test_watch import columns

HZ = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def free_pid():
    """A pid that the real /proc does not have (the fixture's must not be read from there)."""
    return next(p for p in range(4190001, 4194000) if not os.path.exists(f"/proc/{p}"))


def write_stat(d, pid, utime, start_ticks, rss_pages):
    fields = ["S", "1", str(pid), str(pid), "0", "-1", "4194560", "100", "0", "0", "0", str(utime), "0", "0", "0",
              "20", "0", "1", "0", str(start_ticks), "900000000", str(rss_pages)] + ["0"] * 28
    (d / "stat").write_text(f"{pid} (py thon) x) " + " ".join(fields) + "\n")


def test_cpu_rss_time_and_kill_check_come_from_proc_root(watch, tmp_path):
    pid = free_pid()
    env = owners_proc(tmp_path)  # pids 4101 and 4102 with cgroup, status and cmdline
    d = tmp_path / "proc" / str(pid)
    d.mkdir()
    (d / "status").write_text("Name:\tpython\nPPid:\t1\nUid:\t0\t0\t0\t0\n")
    (d / "cmdline").write_bytes(b"python\0fixture.py\0")
    (d / "cgroup").write_text("0::/user.slice\n")
    # started 65 s ago (ticks since boot), 300 MiB resident, 2 s of CPU so far
    start = int((time.clock_gettime(time.CLOCK_BOOTTIME) - 65) * HZ)
    rss_pages = 300 * (1 << 20) // PAGE
    write_stat(d, pid, 2 * HZ, start, rss_pages)
    p = watch(scenario=f"gpu 0 name=\"NVIDIA H200\" total=141GiB used=20GiB\nproc 0 {pid} used=20GiB\n",
              env=env, width=120, height=40)
    s = p.wait(rf"^\s+0\s+{pid} .*300 MiB", timeout=15)
    row = next(r for r in columns(s) if int(r["PID"]) == pid)
    assert row["RSS"] == "300 MiB", row
    assert re.fullmatch(r"01:0\d", row["TIME"]), row
    assert row["COMMAND"] == "python fixture.py", row
    # one more second of CPU in the fixture: the next reading shows it as a share of a core
    write_stat(d, pid, 3 * HZ, start, rss_pages)
    s = p.wait(rf"^\s+0\s+{pid} +\S+ +\S+ \S+ .* (?!0\.0\s)\d+\.\d\s+300 MiB", timeout=15)
    row = next(r for r in columns(s) if int(r["PID"]) == pid)
    assert 0 < float(row["CPU%"]) <= 100, row
    # the kill check reads the same /proc: the pid is there, but numbered by another namespace
    # (this /proc has no `self` that is gpumon), so no signal is offered
    p.keys("T")
    p.wait(rf"SIGTERM: pid {pid} is numbered by another PID namespace's /proc \(GPUMON_PROC_ROOT\): "
           "signal it from there")
    assert "Send SIGTERM" not in p.screen()
    p.keys("q")
    assert p.exit_status() == 0
