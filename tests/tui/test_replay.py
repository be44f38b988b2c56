# SPDX-License-Identifier: MIT
"""`gpumon watch --replay`: a recording made here with `gpumon record` against the fake NVML is
played back on the screen, at the speed asked for; without a driver the bundled recording plays."""
import os
import re
import socket
import time

import pytest

from conftest import BUNDLED, USER, gpumon


@pytest.fixture
def recording(tmp_path, sleepers):
    """A 4 s system-wide recording: GPU 0 at 20 GiB, then 30 GiB from 2 s on; GPU 1 lost at 3 s."""
    a, b = sleepers(2)
    scn = tmp_path / "rec.scn"
    scn.write_text(f"""\
gpu 0 name="NVIDIA H200" total=141GiB reserved=600MiB used=20GiB util=80 temp=50 power=400000
gpu 1 name="NVIDIA H200" total=141GiB reserved=600MiB used=5GiB
proc 0 {a} used=20GiB
proc 1 {b} used=5GiB
at 2 gpu 0 used=30GiB
at 2 proc 0 {a} used=30GiB
at 3 lost 1
""")
    path = tmp_path / "run.gpumon"
    r = gpumon(["record", "-o", str(path), "--interval", "50", "--duration", "4"], scn)
    assert r.returncode == 15, r.stderr  # a GPU lost while recording (nvidia-smi's status), the file whole
    return path, a, b


def test_replay_shows_the_recording(watch, recording):
    path, a, b = recording
    p = watch(["--replay", str(path)])
    s = p.wait(r"20\.0 GiB used")
    # it says clearly that this is a recording, of which host, when, and what
    assert re.search(rf"RECORDING of {re.escape(socket.gethostname())}, \d{{4}}-\d\d-\d\d \d\d:\d\d UTC: "
                     r"all processes \(gpumon record\)$", s, re.M), s
    assert "REPLAY of run.gpumon" in s and "No NVIDIA driver" not in s
    assert "GPU 0  NVIDIA H200" in s and "util  80 %" in s and "50 C" in s and "400.0 W" in s
    assert re.search(rf"^\s+0\s+{a} {USER}\s+20\.0 GiB .*sleep 600", s, re.M), s
    assert "LOST" not in s  # GPU 1 is lost at 3 s of the recording, not before
    # then, in the recording's time: the rise, and GPU 1 lost
    s = p.wait(r"30\.0 GiB used", timeout=10)
    s = p.wait(r"GPU 1  NVIDIA H200  LOST", timeout=10)
    s = p.wait(r"END of recording 00:0[34] / 00:0[34]", timeout=10)
    p.keys("q")
    assert p.exit_status() == 0


def test_replay_speed(watch, recording):
    path, a, b = recording
    fast = watch(["--replay", str(path), "--speed", "8"])
    # 4 s at 8x: over in well under the recording's own length
    fast.wait(r"speed 8x|END of recording")
    fast.wait(r"END of recording", timeout=3)
    slow = watch(["--replay", str(path), "--speed", "0.25"])
    slow.wait(r"00:00 / 00:0[34]  speed 0.25x")
    slow.keys("+")
    slow.wait(r"speed 0.5x")
    slow.keys("-", "-")
    slow.wait(r"speed 0.125x")
    slow.keys("+", "+", "+")
    slow.wait(r"speed 1x")
    # paused, the position stands still while time passes; unpaused, it moves on
    slow.keys("p")
    s = slow.wait("PAUSED")
    pos = re.search(r"(\d\d:\d\d) / ", s).group(1)
    time.sleep(1.5)  # time has to pass for the check to mean anything
    s = slow.wait(r"PAUSED")
    assert re.search(r"(\d\d:\d\d) / ", s).group(1) == pos
    slow.keys("p")
    slow.wait(rf"(?!{pos})\d\d:\d\d / ")


def test_replay_errors(tmp_path):
    bad = tmp_path / "not.gpumon"
    bad.write_text("hello")
    r = gpumon(["watch", "--replay", str(tmp_path / "missing.gpumon")])
    assert r.returncode != 0  # no terminal is checked first: usage
    for speed in ("-1", "2000", "fast"):
        r = gpumon(["watch", "--replay", str(bad), "--speed", speed])
        assert r.returncode == 2 and f"--speed '{speed}': expected 0 (as fast as it can) or a number" in r.stderr


def test_replay_of_a_file_that_is_not_a_recording(watch, tmp_path):
    bad = tmp_path / "not.gpumon"
    bad.write_text("hello")
    p = watch(["--replay", str(bad)])
    assert p.exit_status() not in (0, 2)
    assert "gpumon: watch:" in p.screen()


def test_without_a_driver_the_bundled_recording_plays(watch):
    assert os.path.exists(BUNDLED), f"the bundled recording {BUNDLED} is missing"
    p = watch(["--interval", "100"], env={"GPUMON_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"},
              width=80, height=24)
    s = p.wait(r"RECORDING of ")
    assert "No NVIDIA driver (libnvidia-ml.so.1 not found): a recording, not this machine" in s
    assert "h200_train_leak.gpumon" in s
    assert re.search(r"GPU 0  NVIDIA H200", s), s
    # the torch job in it leaks 4 MiB a step: the leak mark shows before the job ends (41-48 s)
    p.keys("+", "+")
    p.wait("speed 4x")
    s = p.wait(r"^!\s+0\s+\d+ ", timeout=20)
    assert re.search(r"LEAK suspected, \+\d[\d.]* GiB/min", s), s
    p.keys("q")
    assert p.exit_status() == 0
