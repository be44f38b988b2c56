# SPDX-License-Identifier: MIT
"""A command loads only the libraries it needs: SQLite is loaded by the first recording made or read,
not by gpumon query, watch or serve (it was the largest library every gpumon process started with,
BENCHMARKS.md "The house's cost"); a recording still works when it is needed. The exporter's HTTP
server (libevent) is loaded by gpumon serve only, and OpenSSL only when it serves TLS; ncursesw by
watch's screen only (tests/tui runs it)."""
import os
import subprocess
import time

from conftest import GPUMON_BIN, FAKE_NVML_LIB, self_signed

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


def serve_maps(tmp_path, *args):
    env = dict(env_for(tmp_path), TMPDIR=str(tmp_path))
    return maps_while_running(["serve", "--listen", "127.0.0.1:0", *args], env,
                              lambda err: "serving" in open(err).read())


def test_plain_exporter_loads_libevent_not_openssl(tmp_path):
    maps = serve_maps(tmp_path)
    assert "libevent_extra-2.1.so.7" in maps and "libevent_core-2.1.so.7" in maps
    # TLS's libraries (and no other TLS stack) only for an exporter that serves TLS
    for lib in ("libevent_openssl", "libssl", "libcrypto", "libgnutls", "libsqlite3", "libncursesw", "libtinfo"):
        assert lib not in maps, lib


def test_tls_exporter_loads_openssl(tmp_path):
    import shutil
    import pytest
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    cert, key = self_signed(tmp_path, "cert")
    maps = serve_maps(tmp_path, "--tls-cert", cert, "--tls-key", key)
    assert "libevent_openssl-2.1.so.7" in maps and "libssl.so.3" in maps


def test_query_does_not_load_libevent(tmp_path):
    env = dict(env_for(tmp_path), TMPDIR=str(tmp_path))
    out = tmp_path / "q.txt"
    maps = maps_while_running(["query", "--query-gpu=memory.used", "--format=csv", "-lms", "50", "-f", str(out)], env,
                              lambda _: out.exists() and out.stat().st_size > 0)
    assert "libnvidia-ml-fake" in maps and "libevent" not in maps
    assert "libncursesw" not in maps and "libtinfo" not in maps  # watch's screen loads them
