# SPDX-License-Identifier: MIT
"""`gpumon query` for nvidia-smi's property and memory health fields against the fake NVML:
byte-equal to nvidia-smi 580.159.04 on an H200 (tests/fixtures/smi/fields.tsv), each field in each
state (a value, not supported, refused, failed, a driver without the call, a lost GPU), the
aliases nvidia-smi accepts, `timestamp`, `-f FILE`, only the driver calls a query needs, and XID
errors kept in a recording."""
import datetime
import json
import os
import re
import sqlite3
import subprocess
import textwrap
import time

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN

FIXTURES = os.path.join(os.path.dirname(__file__), "../fixtures/smi")

# The reference H200 as fields.tsv shows it (its UUID, 36 C, 82.80 W, SM clock 345 MHz).
REF = """\
gpu 0 name="NVIDIA H200" uuid=GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af bus=00000000:00:06.0 total=150754820096 reserved=644939776 used=0 util=0 memutil=0 temp=36 power=82800 sm=345 mem=3201
"""


def load_fixture():
    rows = []
    with open(os.path.join(FIXTURES, "fields.tsv")) as f:
        for line in f:
            name, header, value, value_nu = line.rstrip("\n").split("\t")[:4]
            rows.append((name, header, value, value_nu))
    return rows


FIXTURE = load_fixture()

# name -> (CSV header, value, header with nounits, value with nounits, JSON value), the H200's
PROP_FIELDS = {
    "power.limit": ("power.limit [W]", "700.00 W", "700.00", 700.0),
    "enforced.power.limit": ("enforced.power.limit [W]", "700.00 W", "700.00", 700.0),
    "power.default_limit": ("power.default_limit [W]", "700.00 W", "700.00", 700.0),
    "power.min_limit": ("power.min_limit [W]", "200.00 W", "200.00", 200.0),
    "power.max_limit": ("power.max_limit [W]", "700.00 W", "700.00", 700.0),
    "power.management": ("power.management", "Enabled", "Enabled", "Enabled"),
    "pstate": ("pstate", "P0", "P0", "P0"),
    "temperature.memory": ("temperature.memory", "35", "35", 35),
    "clocks.max.graphics": ("clocks.max.graphics [MHz]", "1980 MHz", "1980", 1980),
    "clocks.max.sm": ("clocks.max.sm [MHz]", "1980 MHz", "1980", 1980),
    "clocks.max.memory": ("clocks.max.memory [MHz]", "3201 MHz", "3201", 3201),
    "serial": ("serial", "1653924291387", "1653924291387", "1653924291387"),
    "vbios_version": ("vbios_version", "96.00.A5.00.1A", "96.00.A5.00.1A", "96.00.A5.00.1A"),
    "compute_mode": ("compute_mode", "Default", "Default", "Default"),
    "persistence_mode": ("persistence_mode", "Enabled", "Enabled", "Enabled"),
    "pcie.link.gen.current": ("pcie.link.gen.current", "5", "5", 5),
    "pcie.link.gen.max": ("pcie.link.gen.max", "5", "5", 5),
    "pcie.link.width.current": ("pcie.link.width.current", "16", "16", 16),
    "pcie.link.width.max": ("pcie.link.width.max", "16", "16", 16),
    "mig.mode.current": ("mig.mode.current", "Disabled", "Disabled", "Disabled"),
    "mig.mode.pending": ("mig.mode.pending", "Disabled", "Disabled", "Disabled"),
    "ecc.mode.current": ("ecc.mode.current", "Enabled", "Enabled", "Enabled"),
    "ecc.mode.pending": ("ecc.mode.pending", "Enabled", "Enabled", "Enabled"),
    "remapped_rows.correctable": ("remapped_rows.correctable", "0", "0", 0),
    "remapped_rows.uncorrectable": ("remapped_rows.uncorrectable", "0", "0", 0),
    "remapped_rows.pending": ("remapped_rows.pending", "No", "No", "No"),
    "remapped_rows.failure": ("remapped_rows.failure", "No", "No", "No"),
}
for kind in ("corrected", "uncorrected"):
    for counter in ("volatile", "aggregate"):
        for where in ("total", "device_memory", "dram", "sram"):
            name = f"ecc.errors.{kind}.{counter}.{where}"
            PROP_FIELDS[name] = (name, "0", "0", 0)
# not supported on the H200: nvidia-smi prints [N/A] for them
NA_FIELDS = {
    "fan.speed": "fan.speed [%]",
    "retired_pages.single_bit_ecc.count": "retired_pages.single_bit_ecc.count",
    "retired_pages.double_bit.count": "retired_pages.double_bit.count",
    "retired_pages.pending": "retired_pages.pending",
}

# field -> (scenario key, NVML function) for the failure states
KEY_OF = {
    "power.limit": ("power_limit", "nvmlDeviceGetPowerManagementLimit"),
    "enforced.power.limit": ("power_enforced", "nvmlDeviceGetEnforcedPowerLimit"),
    "power.default_limit": ("power_default", "nvmlDeviceGetPowerManagementDefaultLimit"),
    "power.min_limit": ("power_min", "nvmlDeviceGetPowerManagementLimitConstraints"),
    "power.max_limit": ("power_max", "nvmlDeviceGetPowerManagementLimitConstraints"),
    "power.management": ("power_mgmt", "nvmlDeviceGetPowerManagementMode"),
    "fan.speed": ("fan", "nvmlDeviceGetFanSpeed"),
    "pstate": ("pstate", "nvmlDeviceGetPerformanceState"),
    "temperature.memory": ("mem_temp", "nvmlDeviceGetFieldValues"),
    "clocks.max.graphics": ("max_gr", "nvmlDeviceGetMaxClockInfo"),
    "clocks.max.sm": ("max_sm", "nvmlDeviceGetMaxClockInfo"),
    "clocks.max.memory": ("max_mem", "nvmlDeviceGetMaxClockInfo"),
    "serial": ("serial", "nvmlDeviceGetSerial"),
    "vbios_version": ("vbios", "nvmlDeviceGetVbiosVersion"),
    "compute_mode": ("compute_mode", "nvmlDeviceGetComputeMode"),
    "persistence_mode": ("persistence", "nvmlDeviceGetPersistenceMode"),
    "pcie.link.gen.current": ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration"),
    "pcie.link.gen.max": ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
    "pcie.link.width.current": ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth"),
    "pcie.link.width.max": ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
    "mig.mode.current": ("mig", "nvmlDeviceGetMigMode"),
    "mig.mode.pending": ("mig_pending", "nvmlDeviceGetMigMode"),
    "ecc.mode.current": ("ecc", "nvmlDeviceGetEccMode"),
    "ecc.mode.pending": ("ecc_pending", "nvmlDeviceGetEccMode"),
    "retired_pages.single_bit_ecc.count": ("retired_sbe", "nvmlDeviceGetRetiredPages"),
    "retired_pages.double_bit.count": ("retired_dbe", "nvmlDeviceGetRetiredPages"),
    "retired_pages.pending": ("retired_pending", "nvmlDeviceGetRetiredPagesPendingStatus"),
    "remapped_rows.correctable": ("remap_corr", "nvmlDeviceGetRemappedRows"),
    "remapped_rows.uncorrectable": ("remap_unc", "nvmlDeviceGetRemappedRows"),
    "remapped_rows.pending": ("remap_pending", "nvmlDeviceGetRemappedRows"),
    "remapped_rows.failure": ("remap_failure", "nvmlDeviceGetRemappedRows"),
}
for kind, k in (("corrected", "c"), ("uncorrected", "u")):
    for counter, c in (("volatile", "v"), ("aggregate", "a")):
        KEY_OF[f"ecc.errors.{kind}.{counter}.total"] = (f"ecc_{k}{c}_total", "nvmlDeviceGetTotalEccErrors")
        for where in ("device_memory", "dram"):
            KEY_OF[f"ecc.errors.{kind}.{counter}.{where}"] = (f"ecc_{k}{c}_dram", "nvmlDeviceGetMemoryErrorCounter")
        KEY_OF[f"ecc.errors.{kind}.{counter}.sram"] = (f"ecc_{k}{c}_sram", "nvmlDeviceGetMemoryErrorCounter")

ALL_PROPS = sorted(set(PROP_FIELDS) | set(NA_FIELDS))


def query(gpumon, args, scenario=REF, **kw):
    return gpumon(["query"] + list(args), scenario=scenario, **kw)


def ok(r):
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stderr == ""
    return r.stdout.splitlines()


def header_of(field):
    return PROP_FIELDS[field][0] if field in PROP_FIELDS else NA_FIELDS[field]


# ---- byte-equal to nvidia-smi on the H200 --------------------------------------------------------

def test_every_fixture_field_as_nvidia_smi_prints_it(gpumon):
    """Each field of fields.tsv (the timestamp aside) alone, and all of them in one query."""
    names = [row[0] for row in FIXTURE if row[0] != "timestamp"]
    for name, header, value, value_nu in FIXTURE:
        if name == "timestamp":
            continue
        assert ok(query(gpumon, [f"--query-gpu={name}", "--format=csv"])) == [header, value], name
        assert ok(query(gpumon, [f"--query-gpu={name}", "--format=csv,noheader,nounits"])) == [value_nu], name
    rows = [r for r in FIXTURE if r[0] != "timestamp"]
    lines = ok(query(gpumon, ["--query-gpu=" + ",".join(names), "--format=csv"]))
    assert lines == [", ".join(r[1] for r in rows), ", ".join(r[2] for r in rows)]


def test_fixture_query_with_timestamp(gpumon):
    """The fixture's own query, timestamp first: the rest byte-equal, the time in nvidia-smi's form."""
    names = [row[0] for row in FIXTURE]
    before = datetime.datetime.now()
    lines = ok(query(gpumon, ["--query-gpu=" + ",".join(names), "--format=csv"]))
    after = datetime.datetime.now()
    assert lines[0] == ", ".join(r[1] for r in FIXTURE)
    stamp, rest = lines[1].split(", ", 1)
    assert rest == ", ".join(r[2] for r in FIXTURE[1:])
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", stamp)
    assert re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", FIXTURE[0][2])
    t = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f")
    assert before - datetime.timedelta(milliseconds=1) <= t <= after


@pytest.mark.parametrize("field", sorted(PROP_FIELDS))
def test_each_property_field(gpumon, field):
    head, value, value_nu, jvalue = PROP_FIELDS[field]
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=csv"])) == [head, value]
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=csv,noheader,nounits"])) == [value_nu]
    doc = json.loads(query(gpumon, [f"--query-gpu={field}", "--format=json"]).stdout)
    assert doc["gpu"] == [{field: jvalue}]


@pytest.mark.parametrize("alias,field", [
    ("gpu.power.requested_limit", "power.limit"), ("gpu.power.current_limit", "enforced.power.limit"),
    ("gpu.power.default_limit", "power.default_limit"), ("gpu.power.min_limit", "power.min_limit"),
    ("gpu.power.max_limit", "power.max_limit"), ("clocks.max.gr", "clocks.max.graphics"),
    ("clocks.max.mem", "clocks.max.memory"), ("gpu_serial", "serial"),
    ("retired_pages.sbe", "retired_pages.single_bit_ecc.count"),
    ("retired_pages.dbe", "retired_pages.double_bit.count"),
    ("remapped_rows.sbe", "remapped_rows.correctable"), ("remapped_rows.dbe", "remapped_rows.uncorrectable"),
])
def test_aliases_from_nvidia_smi_help(gpumon, alias, field):
    help_text = open(os.path.join(FIXTURES, "help-query-gpu.txt")).read()
    assert f'"{field}" or "{alias}"' in help_text
    a = ok(query(gpumon, [f"--query-gpu={alias}", "--format=csv"]))
    assert a == ok(query(gpumon, [f"--query-gpu={field}", "--format=csv"]))
    assert a[0] == header_of(field)


# ---- each field in each state --------------------------------------------------------------------

@pytest.mark.parametrize("field", sorted(NA_FIELDS))
def test_not_supported_on_h200(gpumon, field):
    assert ok(query(gpumon, [f"--query-gpu={field}", "--format=csv"])) == [NA_FIELDS[field], "[N/A]"]
    doc = json.loads(query(gpumon, [f"--query-gpu={field}", "--format=json"]).stdout)
    assert doc["gpu"] == [{field: None}]


@pytest.mark.parametrize("field", ALL_PROPS)
@pytest.mark.parametrize("code,shown", [("NOT_SUPPORTED", "[N/A]"), ("NO_PERMISSION", "[Insufficient Permissions]"),
                                        ("UNKNOWN", "[Unknown Error]")])
def test_field_states(gpumon, field, code, shown):
    key = KEY_OF[field][0]
    r = query(gpumon, [f"--query-gpu={field},index", "--format=csv,noheader"], scenario=REF.rstrip() + f" {key}=!{code}\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{shown}, 0\n"
    doc = json.loads(query(gpumon, [f"--query-gpu={field}", "--format=json"],
                           scenario=REF.rstrip() + f" {key}=!{code}\n").stdout)
    assert doc["gpu"] == [{field: None}]


@pytest.mark.parametrize("field", ALL_PROPS)
def test_driver_without_the_call(gpumon, field):
    """The oldest drivers' library has none of these calls: [N/A], never 0."""
    r = query(gpumon, [f"--query-gpu={field},index", "--format=csv,noheader"], v1=True)
    assert r.returncode == 0 and r.stdout == "[N/A], 0\n", (r.stdout, r.stderr)


def test_error_line_fails_one_call(gpumon):
    scn = REF + "error nvmlDeviceGetSerial UNKNOWN\n"
    r = query(gpumon, ["--query-gpu=serial,vbios_version", "--format=csv,noheader"], scenario=scn)
    assert r.returncode == 0
    assert r.stdout == "[Unknown Error], 96.00.A5.00.1A\n"
    assert r.stderr == ""  # as nvidia-smi: the field says it, the other fields go on


def test_text_longer_than_the_field_is_not_cut(gpumon):
    """gpumon asks NVML with its fields' own size (32 bytes): a longer serial is NVML's Insufficient
    Size, shown as any failed call ([Unknown Error]), not its first 31 bytes as if they were the serial."""
    scn = REF.rstrip() + " serial=" + "7" * 40 + " vbios=" + "9" * 31 + "\n"
    r = query(gpumon, ["--query-gpu=serial,vbios_version", "--format=csv,noheader"], scenario=scn)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "[Unknown Error], " + "9" * 31 + "\n"


def test_lost_gpu(gpumon):
    scn = REF + "gpu 1 name=\"NVIDIA H200\"\nat 0 lost 1\n"
    r = query(gpumon, ["--query-gpu=index,power.limit,ecc.errors.uncorrected.volatile.total", "--format=csv,noheader"],
              scenario=scn)
    assert r.returncode == 15
    assert r.stdout == "0, 700.00 W, 0\n1, [GPU is lost], [GPU is lost]\n"
    assert "GPU 1" in r.stderr and "lost" in r.stderr


def test_values_of_a_troubled_card(gpumon):
    scn = REF.rstrip() + (" pstate=P8 fan=45 compute_mode=exclusive_process persistence=off mig=on mig_pending=off"
                          " ecc_cv_total=12 ecc_uv_total=1 ecc_ca_total=340 ecc_ua_total=2 ecc_cv_dram=11"
                          " ecc_cv_sram=1 ecc_ua_sram=18446744073709551 remap_corr=3 remap_unc=1 remap_pending=on"
                          " remap_failure=on retired_sbe=2 retired_dbe=1 retired_pending=on power_limit=450500"
                          " serial=\"SN 42\" mem_temp=!UNKNOWN\n")
    fields = ("pstate,fan.speed,compute_mode,persistence_mode,mig.mode.current,mig.mode.pending,"
              "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,"
              "ecc.errors.corrected.aggregate.total,ecc.errors.uncorrected.aggregate.total,"
              "ecc.errors.corrected.volatile.device_memory,ecc.errors.corrected.volatile.dram,"
              "ecc.errors.corrected.volatile.sram,ecc.errors.uncorrected.aggregate.sram,"
              "remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure,"
              "retired_pages.sbe,retired_pages.dbe,retired_pages.pending,power.limit,serial,temperature.memory")
    r = query(gpumon, [f"--query-gpu={fields}", "--format=csv,noheader"], scenario=scn)
    assert r.stdout == ("P8, 45 %, Exclusive_Process, Disabled, Enabled, Disabled, 12, 1, 340, 2, 11, 11, 1, "
                        "18446744073709551, 3, 1, Yes, Yes, 2, 1, Yes, 450.50 W, SN 42, [Unknown Error]\n")
    doc = json.loads(query(gpumon, [f"--query-gpu={fields}", "--format=json"], scenario=scn).stdout)
    g = doc["gpu"][0]
    assert g["ecc.errors.uncorrected.aggregate.sram"] == 18446744073709551
    assert g["power.limit"] == 450.5 and g["temperature.memory"] is None and g["remapped_rows.pending"] == "Yes"
    assert doc["units"]["power.limit"] == "W" and doc["units"]["fan.speed"] == "%"


def test_scenario_changes_over_time(gpumon, tmp_path):
    """Counts that grow during a loop (`at T gpu` lines): each query shows the state then."""
    scn = tmp_path / "grow.scn"
    scn.write_text(REF + "at 0.3 gpu 0 ecc_cv_total=5 remap_pending=on\n")
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
    p = subprocess.Popen([os.path.abspath(GPUMON_BIN), "query", "--query-gpu=ecc.errors.corrected.volatile.total,"
                          "remapped_rows.pending", "--format=csv,noheader", "-lms", "100"], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.terminate()
    out, err = p.communicate(timeout=20)
    assert p.returncode == 0, err
    lines = out.splitlines()
    assert lines[0] == "0, No" and lines[-1] == "5, Yes", lines
    assert lines == sorted(lines)  # never back


def test_only_the_calls_asked_for(gpumon, tmp_path):
    trace = tmp_path / "calls.txt"
    ok(query(gpumon, ["--query-gpu=serial,remapped_rows.pending", "--format=csv"], env={"FAKE_NVML_TRACE": str(trace)}))
    calls = trace.read_text().split()
    assert "nvmlDeviceGetSerial" in calls and calls.count("nvmlDeviceGetRemappedRows") == 1
    for other in ("nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetMemoryErrorCounter", "nvmlDeviceGetPowerManagementLimit",
                  "nvmlDeviceGetFieldValues", "nvmlEventSetCreate", "nvmlDeviceGetUtilizationRates"):
        assert other not in calls, other


def test_bad_scenario_values_are_refused(gpumon):
    for bad in ("fan=fast", "pstate=P16", "compute_mode=shared", "ecc=maybe", "serial=" + "9" * 96, "fan=!NOPE"):
        r = query(gpumon, ["--query-gpu=index", "--format=csv"], scenario=REF.rstrip() + f" {bad}\n")
        assert r.returncode != 0 and "fake_nvml:" in r.stderr, bad


# ---- timestamp and -f ------------------------------------------------------------------------------

def test_timestamp_json_and_rows_share_it(gpumon):
    scn = REF + 'gpu 1 name="NVIDIA H200"\n'
    doc = json.loads(query(gpumon, ["--query-gpu=timestamp,index", "--format=json"], scenario=scn).stdout)
    stamps = [g["timestamp"] for g in doc["gpu"]]
    assert len(stamps) == 2 and stamps[0] == stamps[1]
    t = datetime.datetime.strptime(stamps[0], "%Y/%m/%d %H:%M:%S.%f")
    assert abs((datetime.datetime.now() - t).total_seconds()) < 5
    assert "timestamp" not in doc["units"]


def test_filename_writes_the_file(gpumon, tmp_path):
    out = tmp_path / "log.csv"
    out.write_text("old content that must go\n" * 10)
    for opt in (["-f", str(out)], [f"--filename={out}"], ["--filename", str(out)]):
        r = query(gpumon, ["--query-gpu=index,serial", "--format=csv"] + opt)
        assert r.returncode == 0 and r.stdout == "" and r.stderr == "", (opt, r.stderr)
        assert out.read_text() == "index, serial\n0, 1653924291387\n"


def test_filename_takes_failed_fields_too(gpumon, tmp_path):
    out = tmp_path / "log.csv"
    r = query(gpumon, ["--query-gpu=serial", "--format=csv,noheader", "-f", str(out)],
              scenario=REF + "error nvmlDeviceGetSerial UNKNOWN\n")
    assert r.stdout == "" and r.stderr == ""
    assert out.read_text() == "[Unknown Error]\n"


def test_filename_unwritable(gpumon, tmp_path):
    r = query(gpumon, ["--query-gpu=index", "--format=csv", "-f", str(tmp_path / "no" / "such" / "dir.csv")])
    assert r.returncode == 255 and r.stdout == ""
    assert r.stderr.startswith("gpumon: cannot write ") and "No such file or directory" in r.stderr


def test_filename_with_loop(tmp_path):
    scn = tmp_path / "s.scn"
    scn.write_text(REF)
    out = tmp_path / "loop.csv"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
    p = subprocess.Popen([os.path.abspath(GPUMON_BIN), "query", "--query-gpu=timestamp,pstate", "--format=csv",
                          "-lms", "100", "-f", str(out)], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.8)
    p.terminate()
    so, se = p.communicate(timeout=20)
    assert p.returncode == 0 and so == "", se
    lines = out.read_text().splitlines()
    assert lines[0] == "timestamp, pstate" and len(lines) >= 3
    assert all(re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}, P0", l) for l in lines[1:]), lines
    assert lines[1:] == sorted(lines[1:])


# ---- XID errors in a recording ---------------------------------------------------------------------

def test_xid_errors_are_recorded(tmp_path):
    scn = tmp_path / "xid.scn"
    scn.write_text(textwrap.dedent("""\
        gpu 0 name="NVIDIA H200"
        gpu 1 name="NVIDIA H200"
        at 0.2 xid 1 79
        at 0.4 xid 0 48
        at 0.4 xid 1 79
        """))
    out = tmp_path / "x.gpumon"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
    # XIDs are taken once a second: within 2.5 s all three are; those taken together share a time
    # and keep the driver's order
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "record", "-o", str(out), "--duration", "2.5"], env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    db = sqlite3.connect(out)
    rows = db.execute("SELECT kind, text FROM events WHERE kind='xid' ORDER BY t_ns, rowid").fetchall()
    assert rows == [("xid", "GPU 1: XID 79"), ("xid", "GPU 0: XID 48"), ("xid", "GPU 1: XID 79")]


def test_no_events_no_thread_no_error(tmp_path):
    """The oldest drivers have no events: recording works as before, with no xid rows."""
    from conftest import FAKE_NVML_V1_LIB
    scn = tmp_path / "v1.scn"
    scn.write_text('gpu 0 name="Old GPU"\nat 0.1 xid 0 79\n')
    out = tmp_path / "v1.gpumon"
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_V1_LIB), FAKE_NVML_SCENARIO=str(scn), LC_ALL="C")
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "record", "-o", str(out), "--duration", "0.5"], env=e,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    db = sqlite3.connect(out)
    assert db.execute("SELECT count(*) FROM events WHERE kind='xid'").fetchone()[0] == 0
