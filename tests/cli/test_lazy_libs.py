# SPDX-License-Identifier: MIT
"""A command loads only the libraries it needs: SQLite is loaded by the first recording made or read,
not by gpumon query, watch or serve (it was the largest library every gpumon process started with,
BENCHMARKS.md "The house's cost"); a recording still works when it is needed."""
import os
import subprocess
import time

from conftest import GPUMON_BIN, FAKE_NVML_LIB

SCENARIO = 'gpu 0 name="NVIDIA H200" total=141GiB reserved=600MiB used=10GiB\n'


def env_for(tmp_path):
    scn = tmp_path / "one.scn"
    scn.write_text(SCENARIO)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    env.update(LC_ALL="C", GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn))
    return env


def maps_while_running(argv, env, ready):
    """The /proc/PID/maps text of gpumon ARGV once ready(path of its stderr file) holds."""
    err = open(os.path.join(env["TMPDIR"], "err.txt"), "w+")
    p = subprocess.Popen([os.path.abspath(GPUMON_BIN)] + argv, env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None and not ready(err.name):
            time.sleep(0.05)
        assert p.poll() is None, open(err.name).read()
        with open(f"/proc/{p.pid}/maps") as f:
            return f.read()
    finally:
        p.terminate()
        p.wait(timeout=20)
        err.close()


def test_query_loop_does_not_load_sqlite(tmp_path):
    env = dict(env_for(tmp_path), TMPDIR=str(tmp_path))
    out = tmp_path / "q.txt"
    maps = maps_while_running(["query", "--query-gpu=memory.used", "--format=csv", "-lms", "50", "-f", str(out)], env,
                              lambda _: out.exists() and out.stat().st_size > 0)
    assert "libnvidia-ml-fake" in maps  # the maps are gpumon's own, taken while it ran
    assert "libsqlite3" not in maps


def test_record_loads_sqlite_and_its_file_reads_back(tmp_path):
    env = dict(env_for(tmp_path), TMPDIR=str(tmp_path))
    rec = tmp_path / "r.gpumon"
    maps = maps_while_running(["record", "-o", str(rec)], env,
                              lambda err: "recording 1 GPU" in open(err).read())
    assert "libsqlite3" in maps
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "report", str(rec)], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert "NVIDIA H200" in r.stdout
