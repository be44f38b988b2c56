# SPDX-License-Identifier: MIT
"""Bad input gives a clear ValueError / OSError at construction, naming what is wrong; a sink
that fails mid-run is switched off with one warning and the loop goes on; interpreter exit
never crashes or hangs, with or without close()."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import MIB, child_env, h200

import gpumon


@pytest.mark.parametrize("fw", ["tensorflow", "mxnet", "", "Torchh"])
def test_unknown_framework(scenario, torch, fw):
    scenario(h200())
    with pytest.raises(ValueError, match=f"unknown framework {fw!r}: use 'auto', 'torch', 'paddle', 'jax' or 'none'"):
        gpumon.GPUMonitor(framework=fw)


def test_framework_not_a_string(scenario, torch):
    scenario(h200())
    with pytest.raises(ValueError, match="framework must be a string"):
        gpumon.GPUMonitor(framework=None)


@pytest.mark.parametrize("dev", [1, 7, "cuda:1"])
def test_torch_device_out_of_range(scenario, torch, dev):
    scenario(h200())
    with pytest.raises(ValueError, match=r"device \d is out of range: torch sees 1 GPU \(0\.\.0\)"):
        gpumon.GPUMonitor(device=dev, logger=False)


def test_nvml_device_out_of_range_without_framework(scenario, no_frameworks):
    scenario(h200())
    with pytest.raises(ValueError, match=r"device 3 is out of range: NVML sees 1 GPU \(0\.\.0\)"):
        gpumon.GPUMonitor(device=3, framework="none", logger=False)
    with pytest.raises(ValueError, match="out of range"):
        gpumon.GPUMonitor(device=-1, framework="none", logger=False)


def test_device_past_cuda_visible_devices(scenario, torch, monkeypatch):
    scenario(h200())
    torch._fake.GPUS = 2
    torch._fake.reset()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES='0' makes 1 GPU visible"):
        gpumon.GPUMonitor(device=1, logger=False)


def test_torch_without_cuda(scenario, torch):
    scenario(h200())
    torch._fake.GPUS = 0
    with pytest.raises(ValueError, match="torch sees no CUDA GPU"):
        gpumon.GPUMonitor(framework="torch", logger=False)


@pytest.mark.parametrize("interval", [0, -5, 2.5, "50", True])
def test_bad_interval(scenario, torch, interval):
    scenario(h200())
    with pytest.raises(ValueError, match=r"interval must be None \(a sample every 0.1 s\) or a positive whole "
                                         f"number of steps, got {interval!r}"):
        gpumon.GPUMonitor(interval=interval)


@pytest.mark.parametrize("h", [-0.1, 1, 2, "5%"])
def test_bad_headroom(scenario, torch, h):
    scenario(h200())
    with pytest.raises(ValueError, match="min_headroom"):
        gpumon.GPUMonitor(min_headroom=h)


def test_on_alert_not_callable(scenario, torch):
    scenario(h200())
    with pytest.raises(ValueError, match="on_alert must be callable"):
        gpumon.GPUMonitor(on_alert="print")


@pytest.mark.parametrize("kw", ["csv", "jsonl"])
def test_unwritable_file(scenario, torch, tmp_path, kw):
    scenario(h200())
    bad = tmp_path / "no-such-dir" / "m.out"
    with pytest.raises(FileNotFoundError, match=f"cannot write the .* file {bad}: No such file or directory"):
        gpumon.GPUMonitor(logger=False, **{kw: bad})


def test_unwritable_file_in_read_only_dir(scenario, torch, tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    scenario(h200())
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    with pytest.raises(PermissionError, match=str(d)):
        gpumon.GPUMonitor(logger=False, csv=d / "m.csv")


def test_unwritable_tensorboard_dir(scenario, torch, tmp_path):
    scenario(h200())
    (tmp_path / "file").write_text("x")
    bad = tmp_path / "file" / "tb"
    with pytest.raises(OSError, match=f"could not create the TensorBoard log directory {bad}: Not a directory"):
        gpumon.GPUMonitor(logger=False, tensorboard=bad)


def test_recording_that_exists_is_not_overwritten(scenario, torch, tmp_path):
    scenario(h200())
    rec = tmp_path / "r.gpumon"
    rec.write_text("precious")
    with pytest.raises(FileExistsError, match=str(rec)):
        gpumon.GPUMonitor(logger=False, record=rec)
    assert rec.read_text() == "precious"


def test_failed_construction_closes_what_it_opened(scenario, torch, tmp_path):
    scenario(h200())
    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError):
        gpumon.GPUMonitor(logger=False, csv=tmp_path / "ok.csv", tensorboard=tmp_path / "f" / "tb")
    assert (tmp_path / "ok.csv").read_text().startswith("step,time,")


def run_child(tmp_path, code, scenario_text=None, timeout=30, **env):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], env=child_env(tmp_path, scenario_text or h200(pid=False), **env),
                          capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def test_sink_failing_mid_run_is_switched_off_once(tmp_path):
    # a file size limit makes writes fail with EFBIG after a few rows, as a full disk would
    r = run_child(tmp_path, """
        import resource, signal, warnings, os
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        import torch, gpumon
        warnings.simplefilter("always")
        rows = []
        with warnings.catch_warnings(record=True) as w:
            mon = gpumon.GPUMonitor(interval=1, logger=rows.append, csv="m.csv", jsonl="m.jsonl")
            resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
            for i in range(50):
                torch._fake.alloc(1 << 20)
                mon.step()
            mon.close()
        sink_w = [str(x.message) for x in w if issubclass(x.category, gpumon.SinkWarning)]
        print(len(rows), len(sink_w))
        for m in sink_w: print(m)
        print(mon.failed_sinks)
    """)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    nrows, nwarn = map(int, out[0].split())
    assert nrows == 50                      # the loop and the other sinks went on
    assert nwarn == 2                       # one warning per failed sink, not one per step
    warned = sorted(out[1:3])
    assert "CSV file m.csv" in warned[0] and "JSON lines file m.jsonl" in warned[1]
    assert all("File too large" in m and "switched off, monitoring goes on" in m for m in warned)
    assert os.path.getsize(tmp_path / "m.csv") <= 600


def test_exit_without_close_flushes_and_does_not_hang(tmp_path):
    r = run_child(tmp_path, """
        import os, torch, gpumon
        mon = gpumon.GPUMonitor(interval=1, logger=False, csv="m.csv", tensorboard="tb", record="r.gpumon")
        for i in range(5):
            mon.step()
        # no close(): atexit does it
    """)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert len(open(tmp_path / "m.csv").read().splitlines()) == 6
    import sqlite3
    db = sqlite3.connect(tmp_path / "r.gpumon")
    assert db.execute("SELECT count(*) FROM framework_samples").fetchone() == (5,)
    assert db.execute("SELECT count(*) FROM meta WHERE key = 'end_wall_ns'").fetchone() == (1,)


def test_exit_with_a_dead_run_socket_does_not_hang(tmp_path):
    # a listener that accepts and never reads: the sink must not block the loop or the exit
    r = run_child(tmp_path, """
        import os, socket, time, torch, gpumon
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind("s.sock"); srv.listen(1)
        os.environ["GPUMON_RUN_SOCKET"] = "s.sock"
        mon = gpumon.GPUMonitor(interval=1, logger=False)
        t = time.monotonic()
        for i in range(4000):
            mon.step()
        assert mon._sinks[-1].dropped > 0 or mon._sinks[-1].pending  # the socket is full
    """, timeout=60)
    assert r.returncode == 0, r.stderr


def test_unreachable_run_socket_warns_and_goes_on(scenario, torch, monkeypatch, tmp_path):
    scenario(h200())
    monkeypatch.setenv("GPUMON_RUN_SOCKET", str(tmp_path / "gone.sock"))
    with pytest.warns(gpumon.SinkWarning, match="cannot reach gpumon run's socket"):
        mon = gpumon.GPUMonitor(interval=1, logger=False)
    assert mon.step() is not None
    mon.close()
