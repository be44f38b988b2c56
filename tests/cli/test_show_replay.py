# SPDX-License-Identifier: MIT
"""`gpumon show --replay FILE [--at WHEN]`: the machine as a recording holds it, with no driver, said
to be a replay. Each figure shown is the one `gpumon export` gives for that moment (the last device
row and the processes listed then), and --at peak is the moment the run's peak has in the report."""
import json
import os
import subprocess

import jsonschema
import pytest

from conftest import GPUMON

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
BUNDLED = os.path.join(ROOT, "examples/recordings/h200_train_leak.gpumon")
COTENANT = os.path.join(ROOT, "examples/traces/leak_cotenant_oom.gpumon")
SCHEMA = json.load(open(os.path.join(ROOT, "docs/show.schema.json")))


def gpumon(*args, **kw):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_", "COLUMNS"))}
    env.update(GPUMON_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1", LC_ALL="C.UTF-8", COLUMNS="100")
    return subprocess.run(GPUMON + list(args), env=env, capture_output=True, text=True, timeout=60, **kw)


def exported(path, table):
    r = gpumon("export", path, "--jsonl", "--table", table)
    assert r.returncode == 0, r.stderr
    return [json.loads(l) for l in r.stdout.splitlines()]


def at_moment(path, t_s):
    """(used bytes of GPU 0, {pid: bytes}) from export's rows up to t_s."""
    used = None
    for row in exported(path, "device"):
        if row["t_s"] <= t_s and row["dev"] == 0:
            used = row["used_bytes"]
    procs = {}
    for row in exported(path, "process"):
        if row["t_s"] <= t_s:
            if row.get("gone"):
                procs.pop(row["pid"], None)
            else:
                procs[row["pid"]] = row["used_bytes"]
    return used, procs


@pytest.mark.parametrize("path,at", [(BUNDLED, "20"), (BUNDLED, "41.5"), (BUNDLED, "-10"), (COTENANT, "30")])
def test_figures_are_the_recordings_at_that_moment(path, at):
    r = gpumon("show", "--replay", path, "--at", at, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, SCHEMA)
    rep = doc["replay"]
    assert rep["file"] == os.path.basename(path)
    want_at = float(at) if float(at) >= 0 else rep["span_s"] + float(at)
    assert rep["at_s"] == pytest.approx(want_at, abs=1e-3)
    used, procs = at_moment(path, rep["at_s"])
    assert doc["gpus"][0]["memory_used_bytes"] == used
    assert {p["pid"]: p["used_bytes"] for p in doc["processes"]} == procs
    assert procs, "the moment chosen has processes on the GPU"


def test_text_says_replay_and_needs_no_driver():
    r = gpumon("show", "--replay", BUNDLED, "--at", "20")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "REPLAY of h200_train_leak.gpumon at 20.0 s of 53.2 s (recorded, not now)"
    assert "3.36 GiB used + 615 MiB reserved of 140 GiB" in r.stdout
    assert any(l.split()[:2] == ["0", "678"] and "3.35 GiB" in l for l in lines), r.stdout
    # the recorded host and driver, the recorded moment's time
    assert lines[0].startswith("vm  2026-12-02 ") and "driver 580.159.04" in lines[0]


def test_default_is_the_end_and_peak_is_the_reports_peak():
    end = json.loads(gpumon("show", "--replay", BUNDLED, "--json").stdout)
    assert end["replay"]["at_s"] == pytest.approx(end["replay"]["span_s"])
    assert end["processes"] == []  # the job had ended
    peak = json.loads(gpumon("show", "--replay", BUNDLED, "--at", "peak", "--json").stdout)
    report = json.loads(gpumon("report", BUNDLED, "--json").stdout)
    assert peak["gpus"][0]["memory_used_bytes"] <= report["peak"]["bytes"]
    assert peak["replay"]["at_s"] == pytest.approx(report["peak"]["time"], abs=1e-3)
    assert peak["processes"] and peak["processes"][0]["pid"] == 678


def test_gpu_and_user_filters():
    r = gpumon("show", "--replay", COTENANT, "--at", "30", "-i", "1")
    assert r.returncode == 6 and "the recording has no GPU '1'" in r.stderr
    r = gpumon("show", "--replay", COTENANT, "--at", "30", "--json", "-u", "nobody-here")
    assert r.returncode == 0 and json.loads(r.stdout)["processes"] == []


@pytest.mark.parametrize("args,code,words", [
    (["--at", "5"], 2, "--at: a moment of a recording: give the recording with --replay FILE"),
    (["--replay", BUNDLED, "--at", "soon"], 2, "--at: 'soon' is not a number of seconds"),
    (["--replay", "/etc/passwd"], 255, "/etc/passwd is not a gpumon recording (not an SQLite database)"),
    (["--replay", "/nonexistent.gpumon"], 255, "/nonexistent.gpumon"),
])
def test_bad_input_is_one_line(args, code, words):
    r = gpumon("show", *args)
    assert r.returncode == code and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
