# SPDX-License-Identifier: MIT
"""The `gpumon` program apart from `query`: the main view, `list`, help, version, the man page,
and what happens without a driver."""
import os
import re
import subprocess

import pytest

from conftest import H200

TWO = H200 + """\
gpu 1 name="NVIDIA A100-SXM4-80GB" uuid=GPU-11111111-2222-3333-4444-555555555555 bus=00000000:0B:00.0 total=80GiB reserved=512MiB used=60GiB util=97 memutil=40 temp=66 power=350000
"""


def test_main_view_one_gpu(gpumon):
    me = os.getpid()
    r = gpumon([], scenario=H200 + f"""\
proc 0 {me} used=1542MiB name="python"
proc 0 4194000 used=15GiB
proc 0 4001 used=na
""", env={"COLUMNS": "120"})  # room for the whole bar
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "driver 580.159.04" in out
    assert "GPU 0  NVIDIA H200  00000000:00:06.0  GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51" in out
    # 15 GiB + 1542 MiB used of 140 GiB with 615 MiB reserved
    assert re.search(r"memory \[[%#.]{40}\] ", out)
    assert "+ 615 MiB reserved of 140 GiB" in out
    assert "util   0 %" in out and "temp 41 C" in out and "power 127.8 W" in out
    lines = out.splitlines()
    head = lines.index("  GPU      PID  USER          MEMORY  COMMAND")
    rows = lines[head + 1:]
    assert len(rows) == 3
    # largest first; the foreign pid is kept and explained; unknown memory is n/a, listed last
    assert rows[0].split()[:2] == ["0", "4194000"] and "15.0 GiB" in rows[0]
    assert rows[0].endswith("  (other PID namespace)"), rows[0]
    assert rows[1].split()[1] == str(me) and "1.51 GiB" in rows[1]
    assert "pytest" in rows[1] or "python" in rows[1]   # our own command line from /proc
    assert rows[2].split()[1] == "4001" and " n/a " in rows[2]


def test_main_view_names_a_container_process_at_80_columns(gpumon):
    """A pid of another PID namespace: NVML's name as watch and query show it; the mark after the
    name is what a narrow terminal cuts."""
    name = "tritonserver --model-repository=/models"
    r = gpumon(["show"], scenario=H200 + f'proc 0 4194001 used=15GiB name="{name}"\nproc 0 4194002 used=1GiB\n',
               env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    rows = r.stdout.splitlines()[-2:]
    assert rows[0] == "    0  4194001  n/a         15.0 GiB  " + (name + "  (other PID namespace)")[:80 - 38], rows
    assert name in rows[0] and max(len(l) for l in r.stdout.splitlines()) <= 80
    assert rows[1] == "    0  4194002  n/a         1.00 GiB  (other PID namespace)"
    wide = gpumon(["show"], scenario=H200 + f'proc 0 4194001 used=15GiB name="{name}"\n', env={"COLUMNS": "120"})
    assert wide.stdout.splitlines()[-1].endswith(f"  {name}  (other PID namespace)")
    q = gpumon(["query", "--query-compute-apps=pid,process_name", "--format=csv,noheader"],
               scenario=H200 + f'proc 0 4194001 used=15GiB name="{name}"\n')
    assert q.stdout == f"4194001, {name}\n"


def test_main_view_bar_and_values_absent(gpumon):
    r = gpumon(["show"], scenario=H200 + "error nvmlDeviceGetPowerUsage NOT_SUPPORTED\n"
               "error nvmlDeviceGetTemperature UNKNOWN\n")
    assert r.returncode == 0, r.stderr
    assert "power n/a" in r.stdout and "temp n/a" in r.stdout
    assert "power 0" not in r.stdout and "temp 0" not in r.stdout
    assert "  none" in r.stdout  # no process


def test_main_view_bar_proportions(gpumon):
    r = gpumon([], scenario="gpu 0 total=100GiB reserved=10GiB used=50GiB\n", env={"COLUMNS": "120"})
    bar = re.search(r"memory \[([%#.]{40})\]", r.stdout).group(1)
    assert bar == "%" * 4 + "#" * 20 + "." * 16


def test_main_view_v1_driver(gpumon):
    r = gpumon([], scenario=H200, v1=True)
    assert r.returncode == 0, r.stderr
    assert "(includes driver-reserved)" in r.stdout
    assert "615 MiB used" in r.stdout  # v1's used is v2's used + reserved


def test_main_view_zero_and_sixteen_gpus(gpumon):
    r = gpumon([], scenario="# none\n")
    assert r.returncode == 0
    assert "No NVIDIA GPU found." in r.stdout
    scn = "".join(f"gpu {i} name=\"G{i}\" total=80GiB used={i}GiB\n" for i in range(16))
    r = gpumon([], scenario=scn)
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^GPU \d+  G\d+ ", r.stdout, re.M)) == 16
    assert "16 GPUs" in r.stdout


def test_main_view_processes_across_gpus_sorted(gpumon):
    r = gpumon([], scenario=TWO + "proc 0 5001 used=1GiB\nproc 1 5002 used=30GiB\nproc 1 5003 used=2GiB type=graphics\n")
    lines = r.stdout.splitlines()
    head = lines.index("  GPU      PID  USER          MEMORY  COMMAND")
    pids = [l.split()[1] for l in lines[head + 1:]]
    gpus = [l.split()[0] for l in lines[head + 1:]]
    assert pids == ["5002", "5003", "5001"] and gpus == ["1", "1", "0"]
    assert "[graphics]" in lines[head + 2]


def test_main_view_thousand_processes(gpumon):
    r = gpumon([], scenario=H200 + "procs 0 200000 1000 used=8MiB\n")
    assert r.returncode == 0, r.stderr
    assert len(re.findall(r"^\s+0\s+2\d{5}\s", r.stdout, re.M)) == 1000


def test_main_view_select_and_lost(gpumon):
    r = gpumon(["-i", "1"], scenario=TWO)
    assert "GPU 1  NVIDIA A100" in r.stdout and "GPU 0 " not in r.stdout
    r = gpumon([], scenario=TWO + "lost 0\n")
    assert r.returncode == 15
    assert "GPU is lost" in r.stdout
    assert "60.0 GiB used" in r.stdout  # the other GPU is still shown


def test_list_like_nvidia_smi(gpumon):
    r = gpumon(["list"], scenario=TWO)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("GPU 0: NVIDIA H200 (UUID: GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51)\n"
                        "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n")
    r = gpumon(["list", "-i", "00000000:0B:00.0"], scenario=TWO)
    assert r.stdout == "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-11111111-2222-3333-4444-555555555555)\n"
    r = gpumon(["list", "--id=GPU-11111111,0"], scenario=TWO)
    assert r.stdout.count("\n") == 2 and r.stdout.startswith("GPU 1:")
    r = gpumon(["list"], scenario="# none\n")
    assert r.returncode == 0 and r.stdout == ""


def test_list_lost_and_unknown_name(gpumon):
    r = gpumon(["list"], scenario=TWO + "lost 1\nerror nvmlDeviceGetName NOT_SUPPORTED gpu=0\n")
    assert r.returncode == 15
    # lost before gpumon started: NVML gives no handle, so neither name nor UUID is known
    assert "GPU 1: [Unknown Error] (UUID: [Unknown Error]) [GPU is lost]" in r.stdout
    assert r.stdout.startswith("GPU 0: [Unknown Error] (UUID: GPU-04b38c5d")


@pytest.mark.parametrize("spec,code", [("7", 6), ("GPU-deadbeef00", 6), ("", 2), (",", 2)])
def test_bad_gpu_selection(gpumon, spec, code):
    r = gpumon(["list", "-i", spec], scenario=TWO)
    assert r.returncode == code
    assert r.stdout == ""
    assert r.stderr.startswith("gpumon: ") and r.stderr.count("\n") == 1


def test_no_driver_one_clear_line(gpumon):
    for args in ([], ["list"], ["query", "--query-gpu=memory.used", "--format=csv"]):
        r = gpumon(args, library="/nonexistent/libnvidia-ml.so.1")
        assert r.returncode == 12, (args, r.stderr)
        assert r.stdout == ""
        assert r.stderr.count("\n") == 1
        assert r.stderr.startswith("gpumon: no NVIDIA driver")
    # the default library name, on a machine without it (as in CI)
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUMON_")}
    r = subprocess.run([os.path.abspath(os.environ.get("GPUMON_BIN", "build/cli/gpumon"))], env=e,
                       capture_output=True, text=True)
    if r.returncode == 12:
        assert r.stderr == ("gpumon: no NVIDIA driver: libnvidia-ml.so.1 not found. Install the NVIDIA driver "
                            "(it provides libnvidia-ml.so.1), or set GPUMON_NVML_LIBRARY to the library's path.\n")


def test_driver_not_loaded(gpumon):
    r = gpumon([], scenario="init_error DRIVER_NOT_LOADED\n" + H200)
    assert r.returncode == 9
    assert r.stderr.count("\n") == 1 and "driver is not usable" in r.stderr


def test_fake_driver_without_scenario_says_so(gpumon, tmp_path):
    """The test double's own problem is not blamed on a kernel module (its code is none of NVML's)."""
    r = gpumon(["list"])  # no FAKE_NVML_SCENARIO
    assert r.returncode == 255, r.stderr
    assert r.stdout == ""
    assert r.stderr == ("gpumon: NVML initialisation failed: fake_nvml has no scenario: set FAKE_NVML_SCENARIO "
                        "to a scenario file (tests/fake_nvml/README.md)\n")
    bad = tmp_path / "bad.scn"
    bad.write_text("gpu 0 fo=1\n")
    r = gpumon(["list"], env={"FAKE_NVML_SCENARIO": str(bad)})
    assert r.returncode == 255
    assert r.stderr == f"gpumon: NVML initialisation failed: fake_nvml: {bad}:1: unknown key 'fo'\n"


def test_init_refused_for_lack_of_permission(gpumon):
    r = gpumon([], scenario="init_error NO_PERMISSION\n" + H200)
    assert r.returncode == 4, r.stderr
    assert r.stderr.count("\n") == 1 and "NVML initialisation failed: Insufficient Permissions" in r.stderr, r.stderr


def test_unknown_command_and_option(gpumon):
    r = gpumon(["frobnicate"], scenario=H200)
    assert r.returncode == 2 and "unknown command 'frobnicate'" in r.stderr
    r = gpumon(["list", "--bogus"], scenario=H200)
    assert r.returncode == 2 and "'--bogus'" in r.stderr
    r = gpumon(["-x"], scenario=H200)
    assert r.returncode == 2 and "'-x'" in r.stderr
    r = gpumon(["list", "-i"], scenario=H200)
    assert r.returncode == 2 and "needs a value" in r.stderr


@pytest.mark.parametrize("cmd", [[], ["show"], ["list"], ["query"]])
def test_help_everywhere(gpumon, cmd):
    r = gpumon(cmd + ["--help"], library="/nonexistent")  # help needs no driver
    assert r.returncode == 0
    assert r.stdout.startswith("Usage: gpumon")


def test_version(gpumon):
    r = gpumon(["--version"], library="/nonexistent")
    assert r.returncode == 0 and re.fullmatch(r"gpumon \d+\.\d+\.\d+ \(libgpumon \d+\.\d+\.\d+\)\n", r.stdout)


def test_man_page_is_clean_and_complete():
    man = os.environ.get("GPUMON_MAN", os.path.join(os.path.dirname(__file__), "../../man/gpumon.1"))
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", man], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    text = subprocess.run(["groff", "-man", "-Tutf8", man], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "GROFF_NO_SGR": "1"}).stdout
    text = " ".join(re.sub(r".\x08", "", text).replace("\u2010\n", "").split())
    for word in ["show", "list", "query", "GPUMON_NVML_LIBRARY", "EXIT STATUS", "--format=json", "-lms",
                 "memory.reserved", "process_name", "[Not Supported]", "[GPU is lost]", "gpumon record",
                 "gpumon run", "gpumon export", "GPUMON_RUN_SOCKET", "--on-exceed"]:
        assert word in text, word
