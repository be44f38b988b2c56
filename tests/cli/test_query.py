# SPDX-License-Identifier: MIT
"""`gpumon query`: nvidia-smi's --query-gpu / --query-compute-apps output, byte for byte, against
the fake NVML; JSON output; -i; loops; lost GPUs; values the driver does not give."""
import json
import os
import signal
import subprocess
import textwrap
import threading
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN, H200

UUID0 = "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51"
UUID1 = "GPU-11111111-2222-3333-4444-555555555555"
BUS0 = "00000000:00:06.0"
BUS1 = "00000000:00:07.0"

# A second GPU beside the reference H200, busy.
TWO = H200 + f"""\
gpu 1 name="NVIDIA H200" uuid={UUID1} bus={BUS1} total=150754820096 reserved=644939776 used=10GiB util=97 memutil=40 temp=66 power=650000 sm=1980 mem=3201
"""

ALL_GPU_FIELDS = ("index,name,uuid,pci.bus_id,memory.total,memory.used,memory.free,memory.reserved,"
                  "utilization.gpu,utilization.memory,temperature.gpu,power.draw,clocks.sm,clocks.mem,"
                  "driver_version")

# What nvidia-smi printed on the reference H200 (../shared/REFERENCE.md).
REF_HEADER = ("index, name, uuid, pci.bus_id, memory.total [MiB], memory.used [MiB], memory.free [MiB], "
              "memory.reserved [MiB], utilization.gpu [%], utilization.memory [%], temperature.gpu, "
              "power.draw [W], clocks.current.sm [MHz], clocks.current.memory [MHz], driver_version")
REF_ROW = (f"0, NVIDIA H200, {UUID0}, {BUS0}, 143771 MiB, 0 MiB, 143156 MiB, 616 MiB, 0 %, 0 %, 41, "
           "127.79 W, 1980 MHz, 3201 MHz, 580.159.04")

# field -> (CSV header, CSV value, nounits header, nounits value, JSON value, JSON unit)
# nvidia-smi keeps the unit in the header with nounits (seen on the H200, driver 580.159.04).
GPU_FIELDS = {
    "count": ("count", "1", "count", "1", 1, None),
    "index": ("index", "0", "index", "0", 0, None),
    "name": ("name", "NVIDIA H200", "name", "NVIDIA H200", "NVIDIA H200", None),
    "uuid": ("uuid", UUID0, "uuid", UUID0, UUID0, None),
    "pci.bus_id": ("pci.bus_id", BUS0, "pci.bus_id", BUS0, BUS0, None),
    "driver_version": ("driver_version", "580.159.04", "driver_version", "580.159.04", "580.159.04", None),
    "memory.total": ("memory.total [MiB]", "143771 MiB", "memory.total [MiB]", "143771", 143771, "MiB"),
    "memory.used": ("memory.used [MiB]", "0 MiB", "memory.used [MiB]", "0", 0, "MiB"),
    "memory.free": ("memory.free [MiB]", "143156 MiB", "memory.free [MiB]", "143156", 143156, "MiB"),
    "memory.reserved": ("memory.reserved [MiB]", "616 MiB", "memory.reserved [MiB]", "616", 616, "MiB"),
    "utilization.gpu": ("utilization.gpu [%]", "0 %", "utilization.gpu [%]", "0", 0, "%"),
    "utilization.memory": ("utilization.memory [%]", "0 %", "utilization.memory [%]", "0", 0, "%"),
    "temperature.gpu": ("temperature.gpu", "41", "temperature.gpu", "41", 41, "C"),
    "power.draw": ("power.draw [W]", "127.79 W", "power.draw [W]", "127.79", 127.79, "W"),
    "clocks.sm": ("clocks.current.sm [MHz]", "1980 MHz", "clocks.current.sm [MHz]", "1980", 1980, "MHz"),
    "clocks.mem": ("clocks.current.memory [MHz]", "3201 MHz", "clocks.current.memory [MHz]", "3201", 3201, "MHz"),
}

GPU_ALIASES = {"gpu_name": "name", "gpu_uuid": "uuid", "gpu_bus_id": "pci.bus_id",
               "clocks.current.sm": "clocks.sm", "clocks.current.memory": "clocks.mem"}

APP_FIELDS = "pid,process_name,used_memory,gpu_uuid,gpu_bus_id"
APP_HEADER = "pid, process_name, used_gpu_memory [MiB], gpu_uuid, gpu_bus_id"

# pids above any kernel's pid_max, so that no process of this machine lends them a name
PID = 5000000


def query(gpumon, args, scenario=H200, **kw):
    return gpumon(["query"] + list(args), scenario=scenario, **kw)


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stderr == ""
    return r.stdout.splitlines()


# ---- GPU fields, CSV -------------------------------------------------------------------------------

def test_reference_line_csv(gpumon):
    lines = ok(query(gpumon, [f"--query-gpu={ALL_GPU_FIELDS}", "--format=csv"]))
    assert lines == [REF_HEADER, REF_ROW]


def test_reference_line_noheader_nounits(gpumon):
    r = query(gpumon, [f"--query-gpu={ALL_GPU_FIELDS}", "--format=csv,noheader,nounits"])
    assert r.returncode == 0
    assert r.stdout == (f"0, NVIDIA H200, {UUID0}, {BUS0}, 143771, 0, 143156, 616, 0, 0, 41, 127.79, "
                        "1980, 3201, 580.159.04\n")


@pytest.mark.parametrize("field", list(GPU_FIELDS))
def test_each_gpu_field(gpumon, field):
    head, value, head_nu, value_nu, _, _ = GPU_FIELDS[field]
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=csv"])) == [head, value]
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=csv,noheader"])) == [value]
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=csv,nounits"])) == [head_nu, value_nu]
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=nounits,noheader,csv"])) == [value_nu]


@pytest.mark.parametrize("alias", list(GPU_ALIASES))
def test_gpu_aliases(gpumon, alias):
    head, value = GPU_FIELDS[GPU_ALIASES[alias]][:2]
    assert ok(query(gpumon, [f"--query-gpu={alias}", "--format=csv"])) == [head, value]
    doc = json.loads(query(gpumon, [f"--query-gpu={alias}", "--format=json"]).stdout)
    assert doc["gpu"] == [{GPU_ALIASES[alias]: GPU_FIELDS[GPU_ALIASES[alias]][4]}]


def test_blanks_around_names_repeats_and_order(gpumon):
    lines = ok(query(gpumon, ["--query-gpu", " power.draw ,\tindex,index , memory.free", "--format", "csv"]))
    assert lines == ["power.draw [W], index, index, memory.free [MiB]", "127.79 W, 0, 0, 143156 MiB"]


def test_nvidia_smi_style_without_subcommand(gpumon):
    r = gpumon(["--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"], scenario=H200)
    assert r.returncode == 0 and r.stdout == "0, 143771\n"


def test_busy_gpu_values_and_rounding(gpumon):
    # used 10 GiB + 1 byte: MiB are rounded up, as nvidia-smi does; power keeps two decimals
    scn = f'gpu 0 name="X" uuid={UUID0} bus={BUS0} total=80GiB reserved=0 used=10737418241 util=100 memutil=7 temp=0 power=127795 sm=0 mem=0\n'
    lines = ok(query(gpumon, ["--query-gpu=memory.used,memory.free,utilization.gpu,utilization.memory,"
                              "temperature.gpu,power.draw,clocks.sm", "--format=csv,noheader"], scenario=scn))
    # free = 80 GiB - 10 GiB - 1 B = 71679.99... MiB -> 71680
    assert lines == ["10241 MiB, 71680 MiB, 100 %, 7 %, 0, 127.80 W, 0 MHz"]
    scn = scn.replace("power=127795", "power=0")
    assert ok(query(gpumon, ["--query-gpu=power.draw", "--format=csv,noheader"], scenario=scn)) == ["0.00 W"]


def test_zero_gpus_header_only(gpumon):
    assert ok(query(gpumon, ["--query-gpu=index,memory.used", "--format=csv"], scenario="# none\n")) == \
        ["index, memory.used [MiB]"]
    assert ok(query(gpumon, ["--query-gpu=count", "--format=csv,noheader"], scenario="# none\n")) == []
    assert ok(query(gpumon, ["--query-compute-apps=pid", "--format=csv"], scenario="# none\n")) == ["pid"]
    assert json.loads(query(gpumon, ["--query-gpu=index", "--format=json"], scenario="# none\n").stdout)["gpu"] == []


def test_sixteen_gpus(gpumon):
    scn = "".join(f'gpu {i} name="G{i}" uuid=GPU-{i:08x}-0000-0000-0000-000000000000 bus=00000000:{i + 16:02X}:00.0 '
                  f"total=80GiB used={i}GiB power={i * 1000}\n" for i in range(16))
    lines = ok(query(gpumon, ["--query-gpu=index,name,pci.bus_id,memory.used,power.draw,count",
                              "--format=csv,noheader"], scenario=scn))
    # NVML writes the bus id's hex digits in capitals, and so do nvidia-smi and gpumon
    assert lines == [f"{i}, G{i}, 00000000:{i + 16:02X}:00.0, {i * 1024} MiB, {i}.00 W, 16" for i in range(16)]


# ---- values the driver does not give -----------------------------------------------------------

def test_v1_only_driver(gpumon):
    r = query(gpumon, [f"--query-gpu={ALL_GPU_FIELDS}", "--format=csv,noheader"], v1=True)
    assert r.returncode == 0, r.stderr
    # v1's used includes the reserved memory (644,939,776 B -> 616 MiB); reserved is unknown
    assert r.stdout == (f"0, NVIDIA H200, {UUID0}, {BUS0}, 143771 MiB, 616 MiB, 143156 MiB, [Not Supported], "
                        "0 %, 0 %, 41, 127.79 W, 1980 MHz, 3201 MHz, 580.159.04\n")
    doc = json.loads(query(gpumon, ["--query-gpu=memory.reserved,memory.used", "--format=json"], v1=True).stdout)
    assert doc["gpu"] == [{"memory.reserved": None, "memory.used": 616}]


def test_memory_v2_refused_falls_back_to_v1(gpumon):
    r = query(gpumon, ["--query-gpu=memory.used,memory.reserved,memory.free", "--format=csv,noheader"],
              scenario=H200 + "error nvmlDeviceGetMemoryInfo_v2 NOT_SUPPORTED\n")
    assert ok(r) == ["616 MiB, [Not Supported], 143156 MiB"]


OPTIONAL = {
    "nvmlDeviceGetPowerUsage": ["power.draw"],
    "nvmlDeviceGetTemperature": ["temperature.gpu"],
    "nvmlDeviceGetUtilizationRates": ["utilization.gpu", "utilization.memory"],
    "nvmlDeviceGetClockInfo": ["clocks.sm", "clocks.mem"],
}


@pytest.mark.parametrize("code", ["NOT_SUPPORTED", "UNKNOWN", "NO_PERMISSION", "TIMEOUT"])
@pytest.mark.parametrize("fn", list(OPTIONAL))
def test_optional_call_fails(gpumon, fn, code):
    """A field the driver refuses shows [Not Supported], never 0; the others are unchanged."""
    fields = [f for f in GPU_FIELDS if f != "count"]
    r = query(gpumon, ["--query-gpu=" + ",".join(fields), "--format=csv"], scenario=H200 + f"error {fn} {code}\n")
    lines = ok(r)
    assert lines[0] == ", ".join(GPU_FIELDS[f][0] for f in fields)
    expect = ["[Not Supported]" if f in OPTIONAL[fn] else GPU_FIELDS[f][1] for f in fields]
    assert lines[1] == ", ".join(expect)
    doc = json.loads(query(gpumon, ["--query-gpu=" + ",".join(fields), "--format=json"],
                           scenario=H200 + f"error {fn} {code}\n").stdout)
    assert doc["gpu"] == [{f: None if f in OPTIONAL[fn] else GPU_FIELDS[f][4] for f in fields}]


def test_optional_call_fails_on_one_gpu_only(gpumon):
    r = query(gpumon, ["--query-gpu=index,power.draw,temperature.gpu", "--format=csv,noheader"],
              scenario=TWO + "error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=1\n")
    assert ok(r) == ["0, 127.79 W, 41", "1, [Not Supported], 66"]


def test_name_unreadable(gpumon):
    r = query(gpumon, ["--query-gpu=index,name,uuid,memory.total", "--format=csv,noheader"],
              scenario=H200 + "error nvmlDeviceGetName NOT_SUPPORTED\n")
    assert ok(r) == [f"0, [Unknown Error], {UUID0}, 143771 MiB"]


def test_memory_unreadable(gpumon):
    """When even the memory figures cannot be read, the live fields say so and stderr says why."""
    r = query(gpumon, ["--query-gpu=index,memory.used,power.draw,driver_version", "--format=csv,noheader"],
              scenario=TWO + "error nvmlDeviceGetMemoryInfo_v2 UNKNOWN gpu=0\nerror nvmlDeviceGetMemoryInfo UNKNOWN gpu=0\n")
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["0, [Unknown Error], [Unknown Error], 580.159.04",
                                     "1, 10240 MiB, 650.00 W, 580.159.04"]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gpumon: ") and "GPU 0" in r.stderr


def test_process_list_fails_on_one_gpu(gpumon):
    scn = TWO + f"proc 0 {PID} used=1GiB\nproc 1 {PID + 1} used=2GiB\n" + \
        "error nvmlDeviceGetComputeRunningProcesses_v3 UNKNOWN gpu=0\n"
    r = query(gpumon, ["--query-compute-apps=pid,used_memory", "--format=csv,noheader"], scenario=scn)
    assert r.returncode == 0
    assert r.stdout == f"{PID + 1}, 2048 MiB\n"
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gpumon: ") and "GPU 0" in r.stderr


def test_write_error(tmp_path):
    """Output that cannot be written (a full disk) is an error, not a silent success."""
    with open("/dev/full", "w") as full:
        p = start(["--query-gpu=index", "--format=csv"], H200, tmp_path, stdout=full)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 255
    assert err.startswith("gpumon: cannot write the output")


# ---- compute apps ------------------------------------------------------------------------------------

def test_apps_none(gpumon):
    assert ok(query(gpumon, [f"--query-compute-apps={APP_FIELDS}", "--format=csv"])) == [APP_HEADER]
    assert ok(query(gpumon, [f"--query-compute-apps={APP_FIELDS}", "--format=csv,noheader"])) == []
    assert ok(query(gpumon, [f"--query-compute-apps={APP_FIELDS}", "--format=csv,nounits"])) == [APP_HEADER]


def test_apps_one(gpumon):
    scn = H200 + f'proc 0 {PID} used=1GiB type=compute name="python train.py"\n'
    assert ok(query(gpumon, [f"--query-compute-apps={APP_FIELDS}", "--format=csv"], scenario=scn)) == \
        [APP_HEADER, f"{PID}, python train.py, 1024 MiB, {UUID0}, {BUS0}"]
    assert ok(query(gpumon, [f"--query-compute-apps={APP_FIELDS}", "--format=csv,noheader,nounits"], scenario=scn)) == \
        [f"{PID}, python train.py, 1024, {UUID0}, {BUS0}"]


def test_apps_aliases(gpumon):
    scn = H200 + f'proc 0 {PID} used=1GiB name="python"\n'
    assert ok(query(gpumon, ["--query-compute-apps=used_gpu_memory,name,gpu_name", "--format=csv"], scenario=scn)) == \
        ["used_gpu_memory [MiB], process_name, gpu_name", "1024 MiB, python, NVIDIA H200"]


def test_apps_several_graphics_excluded_unknowns(gpumon):
    scn = TWO + textwrap.dedent(f"""\
        proc 0 {PID + 1} used=2GiB name="a"
        proc 0 {PID + 2} used=3GiB type=graphics name="Xorg"
        proc 0 {PID + 3} used=1572865 type=both name="b"
        proc 1 {PID + 4} used=na name="c"
        proc 1 {PID + 5} used=512MiB
        proc 1 {PID + 6} used=0 name="d"
        """)
    lines = ok(query(gpumon, [f"--query-compute-apps={APP_FIELDS}", "--format=csv,noheader"], scenario=scn))
    # GPUs in index order; within a GPU the library's order: most memory first, unknown last
    assert lines == [
        f"{PID + 1}, a, 2048 MiB, {UUID0}, {BUS0}",
        f"{PID + 3}, b, 2 MiB, {UUID0}, {BUS0}",       # 1.5 MiB + 1 B, rounded up
        f"{PID + 5}, [N/A], 512 MiB, {UUID1}, {BUS1}",  # no name from the driver, not in our /proc
        f"{PID + 6}, d, 0 MiB, {UUID1}, {BUS1}",
        f"{PID + 4}, c, [N/A], {UUID1}, {BUS1}",        # the driver cannot tell its memory
    ]
    doc = json.loads(query(gpumon, ["--query-compute-apps=pid,used_memory,process_name", "--format=json"],
                           scenario=scn).stdout)
    assert doc == {"compute_apps": [
        {"pid": PID + 1, "used_memory": 2048, "process_name": "a"},
        {"pid": PID + 3, "used_memory": 2, "process_name": "b"},
        {"pid": PID + 5, "used_memory": 512, "process_name": None},
        {"pid": PID + 6, "used_memory": 0, "process_name": "d"},
        {"pid": PID + 4, "used_memory": None, "process_name": "c"},
    ], "units": {"used_memory": "MiB"}}


def test_apps_v1_driver(gpumon):
    # the oldest process call and no nvmlSystemGetProcessName: the name comes from /proc or is [N/A]
    scn = H200 + f'proc 0 {PID} used=100MiB name="python"\nproc 0 {os.getpid()} used=50MiB\n'
    lines = ok(query(gpumon, ["--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                     scenario=scn, v1=True))
    assert lines[0] == f"{PID}, [N/A], 100 MiB"
    pid, name, used = lines[1].split(", ")
    assert pid == str(os.getpid()) and "python" in name and used == "50 MiB"


def test_apps_thousand_processes(gpumon):
    scn = TWO + f"procs 0 {PID} 600 used=3MiB\nprocs 1 {PID + 600} 400 used=5MiB\n"
    lines = ok(query(gpumon, ["--query-compute-apps=pid,used_memory,gpu_bus_id", "--format=csv,noheader,nounits"],
                     scenario=scn))
    rows = [l.split(", ") for l in lines]
    assert len(rows) == 1000
    assert sorted(int(r[0]) for r in rows) == list(range(PID, PID + 1000))
    assert sum(int(r[1]) for r in rows) == 600 * 3 + 400 * 5
    assert [r[2] for r in rows] == [BUS0] * 600 + [BUS1] * 400


def test_both_tables(gpumon):
    scn = TWO + f'proc 1 {PID} used=1GiB name="x"\n'
    lines = ok(query(gpumon, ["--query-gpu=index,memory.used", "--query-compute-apps=pid,gpu_uuid",
                              "--format=csv"], scenario=scn))
    assert lines == ["index, memory.used [MiB]", "0, 0 MiB", "1, 10240 MiB", "pid, gpu_uuid", f"{PID}, {UUID1}"]
    # the order of the options does not matter
    lines2 = ok(query(gpumon, ["--query-compute-apps=pid,gpu_uuid", "--format=csv",
                               "--query-gpu=index,memory.used"], scenario=scn))
    assert lines2 == lines


# ---- -i ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,rows", [
    ("1", ["1"]), ("0", ["0"]), (UUID1, ["1"]), (UUID1.lower().replace("gpu-", "GPU-"), ["1"]),
    ("GPU-11111111", ["1"]), (BUS1, ["1"]), ("00:07.0", ["1"]), ("1,0", ["0", "1"]),
    (f"{UUID1},{BUS0}", ["0", "1"]), ("0,0", ["0"]),
])
def test_select(gpumon, spec, rows):
    for args in (["-i", spec], [f"--id={spec}"], ["--id", spec]):
        lines = ok(query(gpumon, ["--query-gpu=index,count", "--format=csv,noheader"] + args, scenario=TWO))
        assert lines == [f"{i}, 2" for i in rows]


def test_select_compute_apps(gpumon):
    scn = TWO + f"proc 0 {PID} used=1GiB\nproc 1 {PID + 1} used=2GiB\n"
    assert ok(query(gpumon, ["--query-compute-apps=pid", "--format=csv,noheader", "-i", "1"], scenario=scn)) == \
        [str(PID + 1)]


@pytest.mark.parametrize("spec,code", [("7", 6), ("GPU-deadbeef00", 6), ("00:09.0", 6), ("0,7", 6), (",", 2)])
def test_select_unknown(gpumon, spec, code):
    r = query(gpumon, ["--query-gpu=index", "--format=csv", "-i", spec], scenario=TWO)
    assert r.returncode == code
    assert r.stdout == ""
    assert r.stderr.startswith("gpumon: ") and r.stderr.count("\n") == 1


# ---- usage errors --------------------------------------------------------------------------------

@pytest.mark.parametrize("args,bad", [
    (["--query-gpu=memory.bogus"], "memory.bogus"),
    (["--query-gpu=index,memory.bogus,name"], "memory.bogus"),
    (["--query-gpu=Index"], "Index"),            # case-sensitive, as nvidia-smi
    (["--query-compute-apps=index"], "index"),   # a GPU field is not a process field
    (["--query-gpu=pid"], "pid"),
])
def test_unknown_field(gpumon, args, bad):
    r = query(gpumon, args + ["--format=csv"])
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == (f'Field "{bad}" is not a valid field to query.\n'
                        "Run 'gpumon query --help' for the list of fields.\n")


def test_field_count_limit(gpumon):
    lines = ok(query(gpumon, ["--query-gpu=" + ",".join(["index"] * 128), "--format=csv,noheader"]))
    assert lines == [", ".join(["0"] * 128)]
    r = query(gpumon, ["--query-gpu=" + ",".join(["index"] * 129), "--format=csv"])
    assert r.returncode == 2 and r.stdout == "" and "at most 128" in r.stderr


@pytest.mark.parametrize("fmt,bad", [
    ("xml", '"xml"'), ("csv,noheaders", '"noheaders"'), ("noheader", "no format"), ("", '""'),
    ("csv,json", "both"), ("json,nounits", "csv only"), ("CSV", '"CSV"'),
])
def test_bad_format(gpumon, fmt, bad):
    r = query(gpumon, ["--query-gpu=index", f"--format={fmt}"])
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("gpumon: ") and bad in r.stderr.splitlines()[0]
    assert r.stderr.splitlines()[1] == "Run 'gpumon query --help' for usage."


@pytest.mark.parametrize("args,bad", [
    ([], "--query-gpu"),
    (["--format=csv"], "--query-gpu"),
    (["--query-gpu=index", "--format=csv", "-l", "0"], '"0"'),
    (["--query-gpu=index", "--format=csv", "-l", "1.5"], '"1.5"'),
    (["--query-gpu=index", "--format=csv", "-l", "abc"], '"abc"'),
    (["--query-gpu=index", "--format=csv", "-lms", "-5"], '"-5"'),
    (["--query-gpu=index", "--format=csv", "-lms", "99999999999"], '"99999999999"'),
    (["--query-gpu=index", "--format=csv", "-l", "1", "-lms", "100"], "-lms"),
    (["--query-gpu=index", "--format=csv", "-l"], "needs a value"),
    (["--query-gpu=index", "--format=csv", "-i"], "needs a value"),
    (["--query-gpu=index", "--format=csv", "--bogus"], '"--bogus"'),
    (["--query-gpu=index", "--format=csv", "stray"], '"stray"'),
])
def test_usage_errors(gpumon, args, bad):
    r = query(gpumon, args)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("gpumon: ") and bad in r.stderr.splitlines()[0]
    assert r.stderr.splitlines()[-1] == "Run 'gpumon query --help' for usage."


@pytest.mark.parametrize("fields", ["", ",", " , "])
def test_no_fields(gpumon, fields):
    r = query(gpumon, [f"--query-gpu={fields}", "--format=csv"])
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines()[0] == "No fields given."


def test_like_nvidia_smi_on_h200(gpumon):
    """Seen on the H200 (driver 580.159.04): --format defaults to csv, and empty items are ignored."""
    lines = ok(query(gpumon, ["--query-gpu=index,,memory.used,"]))
    assert lines == ["index, memory.used [MiB]", "0, 0 MiB"]


def test_help(gpumon):
    r = gpumon(["query", "--help"], library="/nonexistent")
    assert r.returncode == 0 and r.stderr == ""
    text = r.stdout
    assert text.startswith("Usage: gpumon query")
    for field in list(GPU_FIELDS) + ["pid", "process_name", "used_memory", "gpu_name", "gpu_uuid", "gpu_bus_id"]:
        assert f"\n  {field} " in text, field
    for alias in list(GPU_ALIASES) + ["used_gpu_memory"]:
        assert f"Also {alias}" in text or f", {alias}" in text, alias
    for word in ["noheader", "nounits", "json", "-lms", "-i", "[Not Supported]", "[N/A]", "[GPU is lost]"]:
        assert word in text, word
    for code in ["0", "2", "6", "12", "15"]:
        assert f"\n  {code} " in text, code
    # every field line has a description, with the unit CSV shows
    line = next(l for l in text.splitlines() if l.startswith("  memory.reserved "))
    assert line.startswith("  memory.reserved [MiB] ") and len(line.split()) > 4
    assert max(len(l) for l in text.splitlines()) <= 100


def test_no_driver(gpumon):
    r = query(gpumon, ["--query-gpu=memory.used", "--format=csv"], library="/nonexistent/libnvidia-ml.so.1")
    assert r.returncode == 12 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gpumon: no NVIDIA driver")


# ---- JSON ------------------------------------------------------------------------------------------------

def test_json_all_fields(gpumon):
    fields = list(GPU_FIELDS)
    r = query(gpumon, ["--query-gpu=" + ",".join(fields), "--format=json"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 1  # one document, one line
    doc = json.loads(r.stdout)
    assert list(doc) == ["gpu", "units"]
    assert doc["gpu"] == [{f: GPU_FIELDS[f][4] for f in fields}]
    assert list(doc["gpu"][0]) == fields  # in the order asked
    assert doc["units"] == {f: GPU_FIELDS[f][5] for f in fields if GPU_FIELDS[f][5]}
    assert isinstance(doc["gpu"][0]["memory.total"], int)
    assert '"power.draw": 127.79' in r.stdout  # not 127.79000000000001


def test_json_both_tables_and_nulls(gpumon):
    scn = TWO + f'proc 0 {PID} used=na name="p"\n' + LOST1 + "error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=0\n"
    r = query(gpumon, ["--query-gpu=index,uuid,power.draw,memory.used", f"--query-compute-apps={APP_FIELDS}",
                       "--format=json"], scenario=scn)
    assert r.returncode == 15
    doc = json.loads(r.stdout)
    assert doc["gpu"] == [
        {"index": 0, "uuid": UUID0, "power.draw": None, "memory.used": 0},
        {"index": 1, "uuid": UUID1, "power.draw": None, "memory.used": None},
    ]
    assert doc["compute_apps"] == [
        {"pid": PID, "process_name": "p", "used_memory": None, "gpu_uuid": UUID0, "gpu_bus_id": BUS0}]
    assert doc["units"] == {"power.draw": "W", "memory.used": "MiB", "used_memory": "MiB"}


# ---- lost GPUs and loops ---------------------------------------------------------------------------------

# GPU 1 answers at open, then reports itself lost at its first memory reading.
LOST1 = "error nvmlDeviceGetMemoryInfo_v2 GPU_IS_LOST gpu=1\n"
LOST_MSG = (f"gpumon: GPU 1 ({UUID1}) is lost: it has fallen off the bus or needs a reset; "
            "the other GPUs are still reported.\n")


def test_lost_gpu_one_shot(gpumon):
    r = query(gpumon, [f"--query-gpu={ALL_GPU_FIELDS}", "--format=csv,noheader"], scenario=TWO + LOST1)
    assert r.returncode == 15
    lines = r.stdout.splitlines()
    assert lines[0] == REF_ROW
    assert lines[1] == (f"1, NVIDIA H200, {UUID1}, {BUS1}, " + ", ".join(["[GPU is lost]"] * 10) + ", 580.159.04")
    assert r.stderr == LOST_MSG


def test_lost_before_start(gpumon):
    """A GPU already lost when gpumon starts: nothing but its index is known."""
    r = query(gpumon, ["--query-gpu=index,name,uuid,pci.bus_id,memory.used,count", "--format=csv,noheader"],
              scenario=TWO + "lost 1\n")
    assert r.returncode == 15
    assert r.stdout.splitlines() == [f"0, NVIDIA H200, {UUID0}, {BUS0}, 0 MiB, 2",
                                     "1, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], 2"]
    assert r.stderr == LOST_MSG.replace(UUID1, "UUID unknown")


def test_lost_gpu_compute_apps(gpumon):
    scn = TWO + f"proc 0 {PID} used=1GiB\nproc 1 {PID + 1} used=1GiB\n" + LOST1 + \
        "error nvmlDeviceGetComputeRunningProcesses_v3 GPU_IS_LOST gpu=1\n"
    r = query(gpumon, ["--query-compute-apps=pid,gpu_uuid", "--format=csv,noheader"], scenario=scn)
    assert r.returncode == 15
    assert r.stdout == f"{PID}, {UUID0}\n"
    assert r.stderr == LOST_MSG


def start(args, scenario, tmp_path, text=True, stdout=subprocess.PIPE):
    """Starts gpumon query ARGS with the fake NVML reading scenario (str, or bytes as they are)."""
    path = tmp_path / "direct.scn"
    if isinstance(scenario, bytes):
        path.write_bytes(scenario)
    else:
        path.write_text(textwrap.dedent(scenario))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    env.update(LC_ALL="C", GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(path))
    return subprocess.Popen([os.path.abspath(GPUMON_BIN), "query"] + args, env=env, stdout=stdout,
                            stderr=subprocess.PIPE, text=text)


def run_loop(args, scenario, until, sig=signal.SIGINT, tmp_path=None, timeout=20):
    """Runs gpumon and sends sig once until(lines of output so far) holds (not after a fixed time:
    a loaded machine starts gpumon late); returns (rc, out, err, seconds from the signal to the exit)."""
    p = start(args, scenario, tmp_path)
    lines, lock = [], threading.Lock()

    def read():
        for line in p.stdout:
            with lock:
                lines.append(line)
    reader = threading.Thread(target=read)
    reader.start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with lock:
            if until([l.rstrip("\n") for l in lines]):
                break
        time.sleep(0.01)
    t = time.monotonic()
    p.send_signal(sig)
    err = p.stderr.read()
    p.wait(timeout=10)
    took = time.monotonic() - t
    reader.join(timeout=10)
    return p.returncode, "".join(lines), err, took


def test_loop_gpu_lost_midway(tmp_path):
    lost = "1, [GPU is lost], [GPU is lost]"
    rc, out, err, _ = run_loop(["--query-gpu=index,memory.used,power.draw", "--format=csv", "-lms", "200"],
                               TWO + "at 0.6 lost 1\n", lambda lines: lines.count(lost) >= 3, tmp_path=tmp_path)
    assert rc == 15, err
    assert err == LOST_MSG  # said once, though every later query finds it lost
    lines = out.splitlines()
    assert lines[0] == "index, memory.used [MiB], power.draw [W]"
    assert lines.count(lines[0]) == 1  # the header once, not per query
    rows = lines[1:]
    assert len(rows) % 2 == 0
    n = len(rows) // 2
    assert n >= 5, rows
    gpu0 = rows[0::2]
    gpu1 = rows[1::2]
    assert gpu0 == ["0, 0 MiB, 127.79 W"] * n  # the other GPU keeps being reported
    good = "1, 10240 MiB, 650.00 W"
    k = gpu1.index(lost)
    assert 2 <= k <= 4  # lost at 0.6 s: queries at 0, 0.2, 0.4 (and maybe 0.6) saw it
    assert gpu1 == [good] * k + [lost] * (n - k)


def test_loop_json_lines_and_sigterm(tmp_path):
    rc, out, err, _ = run_loop(["--query-gpu=index,memory.used", "--format=json", "-lms", "100"],
                               H200 + "at 0.45 gpu 0 used=1GiB\n",
                               lambda lines: len(lines) >= 5 and '"memory.used": 1024' in lines[-1],
                               sig=signal.SIGTERM, tmp_path=tmp_path)
    assert rc == 0 and err == ""
    docs = [json.loads(l) for l in out.splitlines()]
    assert len(docs) >= 5
    used = [d["gpu"][0]["memory.used"] for d in docs]
    assert used[0] == 0 and used[-1] == 1024 and used == sorted(used)


def test_loop_seconds_stops_at_once(tmp_path):
    """-l 1 sleeps a whole second between queries, but a signal ends the wait at once."""
    rc, out, err, took = run_loop(["--query-gpu=memory.used", "--format=csv,noheader", "-l", "1"], H200,
                                  lambda lines: len(lines) >= 1, tmp_path=tmp_path)
    assert rc == 0 and out == "0 MiB\n" and err == ""
    assert took < 0.6  # not the rest of the second


def test_loop_csv_both_tables_headers_once(tmp_path):
    rc, out, err, _ = run_loop(["--query-gpu=index", "--query-compute-apps=pid", "--format=csv", "-lms", "100"],
                               H200 + f"proc 0 {PID} used=1MiB\n", lambda lines: len(lines) >= 8, tmp_path=tmp_path)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[:4] == ["index", "0", "pid", str(PID)]
    assert lines[4:] == ["0", str(PID)] * ((len(lines) - 4) // 2) and len(lines) >= 8


def test_process_name_not_utf8(tmp_path):
    """CSV keeps a name's UTF-8 and shows a byte that is not UTF-8 escaped (as a terminal could take it
    for a control); JSON stays valid: bytes that are not UTF-8 become '?'."""
    scn = (H200.encode() + f'proc 0 {PID} used=1MiB name="caf'.encode() + b'\xc3\xa9\xff"\n')
    p = start(["--query-compute-apps=pid,process_name", "--format=csv,noheader"], scn, tmp_path, text=False)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0 and out == f"{PID}, caf".encode() + b"\xc3\xa9\\xff\n"
    p = start(["--query-compute-apps=process_name", "--format=json"], scn, tmp_path, text=False)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0
    assert json.loads(out)["compute_apps"] == [{"process_name": "caf\u00e9?"}]
