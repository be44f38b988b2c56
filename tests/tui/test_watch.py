# SPDX-License-Identifier: MIT
"""`gpumon watch` in a tmux pane against the fake NVML: what the screen shows, every key, terminal
sizes, NO_COLOR, and a GPU lost while watching."""
import re

from conftest import USER, gpumon


def two_gpus(a, b, c, extra=""):
    return f"""\
    gpu 0 name="NVIDIA H100 80GB HBM3" total=80GiB reserved=512MiB used=20GiB util=95 memutil=40 temp=62 power=550000
    gpu 1 name="NVIDIA H100 80GB HBM3" total=80GiB reserved=512MiB used=10GiB util=30 memutil=10 temp=45
    proc 0 {a} used=20GiB
    proc 1 {b} used=9.5GiB
    proc 1 {c} used=512MiB
    error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=1
    {extra}
    """


WIDTHS = {"GPU": 3, "PID": 7, "USER": 10, "MEMORY": 10, "CHG/MIN": 10, "LEAK/MIN": 10, "CPU%": 5, "RSS": 8,
          "TIME": 9, "OWNER": 20}


def columns(screen):
    """The process rows under the header, each a dict by column name (and "mark", "COMMAND"), read
    by the columns the header shows: fixed widths, one blank between, the command the rest."""
    lines = screen.splitlines()
    at = next(i for i, l in enumerate(lines) if re.match(r"^\s+GPU\s+PID USER", l))
    names = lines[at].split()
    names = names[:names.index("COMMAND")]
    rows = []
    for l in lines[at + 1:]:
        if not re.match(r"^[! ] +\d+ +\d+ ", l):
            break
        row, x = {"mark": l[0]}, 2
        for n in names:
            row[n] = l[x:x + WIDTHS[n]].strip()
            x += WIDTHS[n] + 1
        row["COMMAND"] = l[x:].strip()
        rows.append(row)
    return rows


def table(screen):
    """The process rows: (gpu, pid, user, memory, command)."""
    return [(int(r["GPU"]), int(r["PID"]), r["USER"], r["MEMORY"], r["COMMAND"]) for r in columns(screen)]


# both GPUs' figures and processes are on the screen (each GPU's thread sends its own)
ALL_THERE = r"(?s)^(?=.*sleep 600)(?=.*sleep 602)(?=.*20\.0 GiB used)"


def test_content_gpus_bars_and_processes(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c))
    # each GPU's sampling thread sends its first rows and process list on its own: wait for both
    s = p.wait(ALL_THERE)
    assert re.search(r"^GPU 0  NVIDIA H100 80GB HBM3 .*util  95 %  mem-util  40 %   62 C   550.0 W", s, re.M)
    assert re.search(r"^GPU 1  NVIDIA H100 80GB HBM3 .*util  30 %.*  45 C  power n/a", s, re.M), s
    assert "20.0 GiB used + 512 MiB rsv / 80.0 GiB  25 %" in s
    assert "10.0 GiB used + 512 MiB rsv / 80.0 GiB  12 %" in s
    assert re.search(r"^ \[[▒▓█░]+\] ", s, re.M)  # the bar, drawn with wide block characters
    rows = table(s)
    # largest first, each with its user and command line from /proc
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        (0, a, USER, "20.0 GiB"), (1, b, USER, "9.50 GiB"), (1, c, USER, "512 MiB")]
    assert [r[4] for r in rows] == ["sleep 600", "sleep 601", "sleep 602"]
    # the selected (first) process's details, and its share in its GPU's bar
    # and its host figures, the CPU once it has been read twice (on a loaded machine GPU 1's rows may
    # have come first, and the cursor follows the process it was on: it is taken to the top)
    p.keys("Up")
    p.keys("Up")
    s = p.wait(rf"pid {a} on GPU 0 \(user {USER}, CPU [\d.]+ %, RSS [\d.]+ [KM]iB, up 00:\d\d\): sleep 600")
    bars = re.findall(r"^ \[([▒▓█░]+)\]", s, re.M)
    assert "▓" in bars[0] and "▓" not in bars[1], bars
    p.keys("Down")
    s = p.wait(f"pid {b} on GPU 1")
    bars = re.findall(r"^ \[([▒▓█░]+)\]", s, re.M)
    assert "▓" not in bars[0] and "▓" in bars[1] and "█" in bars[1], bars  # b's share, c's the rest
    p.keys("q")
    assert p.exit_status() == 0


def test_change_per_minute_and_nearly_full(watch, sleepers):
    a, = sleepers(1)
    p = watch(scenario=f"""\
        gpu 0 name=G total=80GiB used=10GiB
        proc 0 {a} used=10GiB
        at 1 gpu 0 used=75GiB
        at 1 proc 0 {a} used=75GiB
        """, args=["--interval", "200"])
    s = p.wait(r"nearly full \(93 %\)", timeout=20)
    assert re.search(rf"nearly full \(93 %\): pid {a} {USER} 75.0 GiB sleep 600", s), s
    # the change from 10 to 75 GiB within the last minute, once the process is 5 s old
    s = p.wait(r"75.0 GiB\s+\+65.0 GiB", timeout=20)
    assert table(s)[0][1] == a


def test_arrows_and_pages_move_the_selection(watch, sleepers):
    pids = sleepers(40)
    scn = "gpu 0 name=G total=80GiB used=40GiB\n" + "".join(
        f"proc 0 {pid} used={100 + i}MiB\n" for i, pid in enumerate(pids))
    p = watch(scenario=scn)
    biggest = pids[-1]  # 139 MiB: first in memory order
    p.wait(rf"pid {biggest} on GPU 0")
    p.keys("Down")
    p.wait(rf"pid {pids[-2]} on GPU 0")
    p.keys("Up")
    p.wait(rf"pid {biggest} on GPU 0")
    s = p.screen()
    page = len(table(s))
    assert 5 <= page < 40
    p.keys("NPage")
    s = p.wait(rf"pid {pids[-1 - page]} on GPU 0")
    # the table scrolled: the selected row is shown
    assert pids[-1 - page] in [r[1] for r in table(s)]
    p.keys("PPage")
    p.wait(rf"pid {biggest} on GPU 0")
    p.keys("End")
    s = p.wait(rf"pid {pids[0]} on GPU 0")
    assert table(s)[-1][1] == pids[0]
    p.keys("Home")
    p.wait(rf"pid {biggest} on GPU 0")


def test_sort_cycles_through_columns(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c))
    s = p.wait("sleep 602")
    # the default order (memory) is not repeated on the key line, which shows the keys then
    assert "sort:" not in s.splitlines()[-1] and "T K I signal" in s
    p.keys("s")
    p.wait("sort: change/min")
    p.keys("s")
    s = p.wait("sort: GPU")
    assert [r[0] for r in table(s)] == sorted(r[0] for r in table(s))
    p.keys("s")
    s = p.wait("sort: pid")
    assert [r[1] for r in table(s)] == sorted([a, b, c])
    p.keys("s", "s", "s")
    p.wait("sort:", absent=True)  # memory again
    p.keys("S")
    p.wait("sort: command")


def test_filter_by_gpu(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c))
    p.wait("sleep 602")
    p.wait("sleep 600")  # each GPU's sampling thread lists its processes: wait for both GPUs
    p.keys("g")
    s = p.wait("GPU 0 only")
    assert [r[1] for r in table(s)] == [a]
    assert "GPU 1  NVIDIA" not in s
    p.keys("g")
    s = p.wait("GPU 1 only")
    assert [r[1] for r in table(s)] == [b, c]
    assert "GPU 0  NVIDIA" not in s and "GPU 1  NVIDIA" in s
    p.keys("g")
    s = p.wait("GPU 1 only", absent=True)
    assert len(table(s)) == 3


def test_filter_by_user(watch, sleepers):
    a, = sleepers(1)
    # pid 4000000 is not in /proc (another PID namespace): its user is not known
    p = watch(scenario=f"gpu 0 name=G total=80GiB used=40GiB\nproc 0 {a} used=1GiB\nproc 0 4000000 used=2GiB\n")
    s = p.wait(r"4000000 n/a")
    assert len(table(s)) == 2
    p.keys("u")
    p.wait("Filter by user")
    p.keys("-l", USER)
    p.keys("Enter")
    s = p.wait(f"user ~{USER}")
    assert [r[1] for r in table(s)] == [a]
    p.keys("u", "BSpace", "Escape")  # Esc cancels the prompt: the filter stays
    s = p.wait("Filter by", absent=True)
    assert f"user ~{USER}" in s
    p.keys("u", "-l", "nobody-at-all", "Enter")
    # no process of that user is listed
    s = p.wait("no process matches the filter")
    assert table(s) == []
    p.keys("c")
    s = p.wait("user ~nobody-at-all", absent=True)
    assert len(table(s)) == 2


def test_pause_keeps_the_screen_still(watch, sleepers):
    a, = sleepers(1)
    p = watch(scenario=f"""\
        gpu 0 name=G total=80GiB used=10GiB
        proc 0 {a} used=10GiB
        at 3 gpu 0 used=30GiB
        at 3 proc 0 {a} used=30GiB
        """, args=["--interval", "100"])
    p.wait("10.0 GiB used")
    p.keys("p")
    p.wait("PAUSED")
    # the change comes at 3 s while paused: the screen keeps the old figures, also when keys redraw it
    import time
    time.sleep(3.5)  # past the scenario's change, which must not show
    p.keys("Down")
    s = p.screen()
    assert "10.0 GiB used" in s and "30.0 GiB" not in s, s
    p.keys("p")
    s = p.wait("30.0 GiB used")
    assert "PAUSED" not in s


def test_help_screen(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c))
    p.wait("sleep 600")
    p.keys("h")
    s = p.wait("gpumon watch: GPU memory, live")
    assert "sort by the next column" in s and "pause" in s and "LEAK/MIN" in s and "SIGTERM" in s
    p.keys("x")  # any key returns
    p.wait("sleep 600")
    p.keys("?")
    p.wait("this help")
    p.keys("q")  # q quits from the help screen too
    assert p.exit_status() == 0


def test_resize_and_too_small(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c))
    p.wait("sleep 602")
    p.resize(80, 24)
    s = p.wait(r"^ \[.{29}\] 20\.0 GiB", timeout=10)  # the bar shrank to the new width
    lines = s.splitlines()
    assert len(lines) <= 24 and all(len(l) <= 80 for l in lines)
    assert "sleep 602" in s and "q quit" in s
    p.resize(79, 24)
    s = p.wait("terminal too small: 79x24")
    assert "needs 80x24" in s
    p.resize(100, 23)
    p.wait("terminal too small: 100x23")
    p.resize(120, 40)
    s = p.wait(r"sleep 602")
    assert "too small" not in s
    p.keys("q")
    assert p.exit_status() == 0


def test_starts_at_80x24_and_below(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c), width=80, height=24)
    s = p.wait("sleep 602")
    assert "GPU 0  NVIDIA" in s and "GPU 1  NVIDIA" in s and "q quit" in s
    small = watch(scenario=two_gpus(a, b, c), width=60, height=20)
    small.wait("terminal too small: 60x20")
    small.keys("q")
    assert small.exit_status() == 0


COLOR_SGR = re.compile(r"\x1b\[[0-9;]*(?:3[0-7]|4[0-7]|38;5;\d+|48;5;\d+)[;m]")


def test_no_color(watch, sleepers):
    a, b, c = sleepers(3)
    coloured = watch(scenario=two_gpus(a, b, c))
    s = coloured.wait("sleep 602", escapes=True)
    assert COLOR_SGR.search(s), "the view should use colour on a colour terminal"
    plain = watch(scenario=two_gpus(a, b, c), env={"NO_COLOR": "1"})
    s = plain.wait(ALL_THERE, escapes=True)
    assert not COLOR_SGR.search(s), s
    # reverse video marks the title and the selection instead
    assert "20.0 GiB used" in s and re.search(r"\x1b\[(?:\d+;)*7m", s)


def test_monochrome_terminal_and_ascii_locale(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c), env={"TERM": "vt100", "LANG": "C"})
    p.wait("sleep 600")  # each GPU's sampling thread lists its processes: wait for both GPUs
    s = p.wait("sleep 602", escapes=True)
    assert not COLOR_SGR.search(s)
    # without UTF-8 the bar is drawn in ASCII: reserved %, selected @, used #, free .
    # The selection is whichever row the first frame listed first (GPU 1's sampler may answer
    # before GPU 0's) and then follows its process, so the @ is on that process's GPU.
    screen = p.screen()
    selected = re.search(r"^pid \d+ on GPU (\d)", screen, re.M)
    assert selected, screen
    bar = {"0": r"^ \[%@+\.+\] 20\.0 GiB", "1": r"^ \[%@+#+\.+\] 10\.0 GiB"}[selected.group(1)]
    assert re.search(bar, screen, re.M), screen
    assert not re.search("[^\x00-\x7f]", screen), screen


def test_gpu_lost_while_watching(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c, extra=f"at 2 lost 1\nat 3 gpu 0 used=30GiB\nat 3 proc 0 {a} used=30GiB"),
              args=["--interval", "200"])
    p.wait("sleep 602")
    s = p.wait(r"GPU 1  NVIDIA H100 80GB HBM3  LOST")
    # its processes are no longer listed; GPU 0 goes on
    s = p.wait(r"30\.0 GiB used \+ 512 MiB rsv")
    assert [r[1] for r in table(s)] == [a]
    assert "LOST" in s
    p.keys("q")
    assert p.exit_status() == 0


def test_leak_is_marked_with_its_rate(watch, sleepers):
    """The mark, LEAK/MIN and "full in" are the run model's verdict on the process. Its windows are
    measured in time (half a second, at least 16 s of them), so the leak runs on through the test."""
    leaky, steady = sleepers(2)
    # 640 MiB more a second: 37.5 GiB a minute; the GPU's free memory (60 GiB) lasts ~1.6 min
    lines = [f"gpu 0 name=G total=80GiB used=20GiB", f"proc 0 {leaky} used=1GiB grow=640MiB",
             f"proc 0 {steady} used=4GiB"]
    for k in range(1, 60):  # the steady one changes, up and down, without a trend
        lines.append(f"at {k / 2:.1f} proc 0 {steady} used={4096 + (k % 4) * 8}MiB")
    p = watch(scenario="\n".join(lines) + "\n", args=["--interval", "100"])
    s = p.wait(rf"^!\s+0\s+{leaky} ", timeout=30)
    row = next(r for r in columns(s) if r["PID"] == str(leaky))
    rate = re.fullmatch(r"\+([\d.]+) GiB", row["LEAK/MIN"])
    assert row["mark"] == "!" and rate and 36 <= float(rate.group(1)) <= 39, row  # 37.5 GiB a minute
    assert not re.search(rf"^!\s+0\s+{steady} ", s, re.M)
    p.keys("Home")  # the leaky one, now the largest
    s = p.wait(rf"pid {leaky} on GPU 0: LEAK suspected, \+[\d.]+ GiB/min, full in ~\d+ min: sleep 600")
    # 60 GiB free at 37.5 GiB a minute: about 1.6 minutes
    assert re.search(r"full in ~2 min", s), s


def test_usage_errors_and_no_terminal():
    r = gpumon(["watch", "--interval", "10"])
    assert r.returncode == 2 and "--interval '10'" in r.stderr
    r = gpumon(["watch", "--speed", "2"])
    assert r.returncode == 2 and "--speed applies to --replay only" in r.stderr
    r = gpumon(["watch", "--bogus"])
    assert r.returncode == 2 and "unknown option '--bogus'" in r.stderr
    r = gpumon(["watch"])  # stdin is not a terminal
    assert r.returncode == 2 and "needs a terminal" in r.stderr and "gpumon watch --batch" in r.stderr
    r = gpumon(["watch", "-n", "3"])
    assert r.returncode == 2 and "-n applies to --batch only" in r.stderr
    r = gpumon(["watch", "-b", "-n", "0"])
    assert r.returncode == 2 and "-n '0'" in r.stderr
    r = gpumon(["watch", "--help"])
    assert r.returncode == 0 and "--replay FILE" in r.stdout


def test_selection_follows_its_process_when_the_order_changes(watch, sleepers):
    a, b = sleepers(2)
    p = watch(scenario=f"""\
        gpu 0 name=G total=80GiB used=30GiB
        proc 0 {a} used=20GiB
        proc 0 {b} used=10GiB
        at 2 proc 0 {b} used=40GiB
        """, args=["--interval", "200"])
    p.wait(rf"pid {a} on GPU 0")
    p.keys("Down")
    p.wait(rf"pid {b} on GPU 0")
    s = p.wait(r"40\.0 GiB", timeout=10)
    assert [r[1] for r in table(s)] == [b, a]  # b is now first ...
    assert f"pid {b} on GPU 0" in s  # ... and still the selected one


def test_many_gpus_get_one_line_each(watch):
    scn = "".join(f'gpu {i} name="NVIDIA H200" total=141GiB reserved=600MiB used={10 + i * 8}GiB util={i * 6} '
                  f'temp={40 + i} power={200000 + i * 20000}\n' for i in range(16))
    scn += "lost 5\nerror nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=3\n"
    small = watch(scenario=scn, width=80, height=24)
    # under load the first samples of the later GPUs may still be on their way ("waiting for the
    # first sample"): wait for the last shown GPU's figures, not just for the layout
    s = small.wait(r"^GPU 13 \[.*\n\+2 more GPUs: press g")
    # utilisation, temperature and power come once a second: wait for them too
    s = small.wait(r"^GPU 0  \[[▒▓█░]+\] 10\.0 GiB / 141 GiB    7 %  util   0 %   40 C   200 W$")
    s = small.wait(r"^GPU 3  \[.*  43 C  n/a W$")
    assert re.search(r"^GPU 5 LOST", s, re.M) and re.search(r"^GPU 13 \[", s, re.M), s
    assert "GPU 14" not in s and "q quit" in s
    small.keys("g")  # one GPU: its whole panel again, with the graph
    s = small.wait(r"COMMAND +GPU 0 *$")  # the filter, in short on a narrow screen
    assert re.search(r"^GPU 0  NVIDIA H200 .*util   0 %", s, re.M) and "GPU 1 " not in s
    big = watch(scenario=scn, width=100, height=40)
    s = big.wait(r"^GPU 15 \[")
    assert "more GPUs" not in s
    assert re.search(r"^ nearly full \(92 %\): no process is listed as holding it", s, re.M), s


def test_id_watches_only_the_named_gpus(watch, sleepers):
    a, b, c = sleepers(3)
    scn = two_gpus(a, b, c, extra="gpu 2 name=Third total=40GiB used=1GiB uuid=GPU-33333333-3333-3333-3333-333333333333")
    p = watch(scenario=scn, args=["-i", "GPU-33333333,1"])
    s = p.wait(r"sleep 602")
    assert "2 of 3 GPUs" in s
    assert "GPU 0  NVIDIA" not in s and "GPU 1  NVIDIA" in s and re.search(r"^GPU 2  Third", s, re.M), s
    assert [r[1] for r in table(s)] == [b, c]  # GPU 0's process is not watched
    p.keys("g")  # g steps through the watched GPUs only: 1, 2, then all of them again
    s = p.wait("GPU 1 only")
    p.keys("g")
    s = p.wait("GPU 2 only")
    assert table(s) == [] and "GPU 1  NVIDIA" not in s
    p.keys("g")
    s = p.wait("GPU 2 only", absent=True)
    assert "GPU 0  NVIDIA" not in s and len(table(s)) == 2
    p.keys("q")
    assert p.exit_status() == 0


def test_id_errors():
    r = gpumon(["watch", "-i", "0", "--replay", "x.gpumon"])
    assert r.returncode == 2 and "-i applies to this machine's GPUs" in r.stderr


def test_id_not_found_says_so(watch, sleepers):
    a, b, c = sleepers(3)
    p = watch(scenario=two_gpus(a, b, c), args=["-i", "7"])
    s = p.wait(r"^EXIT=\d+")
    assert "no GPU with index 7 (2 GPUs)" in s and "gpumon list" in s
    assert p.exit_status() in (2, 6)


def test_id_without_a_driver_says_so(watch, tmp_path):
    p = watch(args=["-i", "0"], env={"GPUMON_NVML_LIBRARY": str(tmp_path / "none.so")})
    s = p.wait(r"^EXIT=\d+")
    assert "-i needs the driver; without -i, gpumon watch plays a bundled recording" in s
    assert p.exit_status() == 12
