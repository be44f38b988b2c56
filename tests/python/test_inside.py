# SPDX-License-Identifier: MIT
"""The monitor inside an unmodified job: gpumon run's bootstrap (python/gpumon/_bootstrap.py) as the
job's sitecustomize.py, gpumon run's socket played by the test, and jobs that know nothing of
gpumon, on the stand-ins of torch, Paddle and JAX. What the test receives is what gpumon run would:
hello, "inside on", samples with the optimizer's steps, the out-of-memory figures and the
allocator's snapshot condensed by libgpumon; nothing from a job without a framework, before CUDA
starts or from a forked child; the job's own sitecustomize still runs, and a Python that cannot
import gpumon says why and runs as it would have."""
import json
import os
import select
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import FAKE_PADDLE, FAKE_TORCH, GIB, GPUMON_BIN, HERE, MIB, PYPATH, ROOT, child_env, h200

BOOTSTRAP = os.path.join(ROOT, "python", "gpumon", "_bootstrap.py")
FAKE_JAX = os.path.join(HERE, "fake_jax")


class Launcher:
    """gpumon run's side of GPUMON_RUN_SOCKET: every line of every connection, in order, with the
    connection's number."""

    def __init__(self, path):
        self.path = path
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(16)
        self.lines = []  # (connection, message)
        self.readers = []
        self.lock = threading.Lock()
        self.hang_up_after = None  # close each connection after this many lines
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        n = 0
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            n += 1
            t = threading.Thread(target=self._read, args=(c, n), daemon=True)
            t.start()
            self.readers.append(t)

    def _read(self, c, n):
        buf, got = b"", 0
        with c:
            while True:
                d = c.recv(1 << 16)
                if not d:
                    break
                buf += d
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    with self.lock:
                        self.lines.append((n, json.loads(line)))
                    got += 1
                    if self.hang_up_after is not None and got >= self.hang_up_after:
                        return

    def wait(self):
        """Until every connection made so far was read to its end."""
        while True:
            n = len(self.readers)
            for t in list(self.readers):
                t.join(10)
            time.sleep(0.05)
            if len(self.readers) == n and not select.select([self.srv], [], [], 0)[0]:
                return

    def of(self, kind):
        return [m for _, m in self.lines if m.get("type") == kind]

    def close(self):
        self.srv.close()


@pytest.fixture
def launcher(tmp_path):
    sock = tmp_path / "run" / "sock"
    sock.parent.mkdir()
    la = Launcher(str(sock))
    yield la
    la.close()


def boot_dir(tmp_path):
    """The run's directory as gpumon run makes it: the bootstrap as sitecustomize.py."""
    d = tmp_path / "boot"
    d.mkdir(exist_ok=True)
    shutil.copy(BOOTSTRAP, d / "sitecustomize.py")
    return d


def run_job(tmp_path, launcher, code, env_extra=None, bootstrap=True, pythonpath=None, timeout=60, python=None):
    """Runs the job (a script that knows nothing of gpumon) as gpumon run would: the bootstrap first
    on PYTHONPATH, the frameworks' stand-ins after it, gpumon's package only through
    GPUMON_INSIDE_PYTHONPATH."""
    (tmp_path / "job.py").write_text(textwrap.dedent(code))
    env = child_env(tmp_path, h200(pid=False))
    path = [FAKE_TORCH, FAKE_PADDLE, FAKE_JAX] if pythonpath is None else pythonpath
    if bootstrap:
        path = [str(boot_dir(tmp_path))] + path
        env.update(GPUMON_INSIDE="1", GPUMON_RUN_SOCKET=launcher.path, GPUMON_INSIDE_PYTHONPATH=PYPATH)
    env["PYTHONPATH"] = os.pathsep.join(path)
    env.update(env_extra or {})
    env = {k: v for k, v in env.items() if v is not None}
    r = subprocess.run([python or sys.executable, "job.py"], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=timeout)
    launcher.wait()
    return r


TRAIN = """
import time, torch
torch.cuda.init()
torch._fake.alloc(512 << 20)
opt = torch.optim.SGD([])
for step in range(6):
    torch._fake.alloc(4 << 20)
    opt.step()
    time.sleep(0.12)
"""


def test_a_torch_job_is_seen_from_inside(tmp_path, launcher):
    """hello, then "inside on", then a sample per optimizer step (they come 0.12 s apart, beyond the
    0.1 s pace) with the allocator's figures and the step, and a step message with each."""
    r = run_job(tmp_path, launcher, TRAIN + "print('job done')\n")
    assert r.returncode == 0 and r.stdout == "job done\n" and r.stderr == "", r.stderr
    kinds = [m["type"] for _, m in launcher.lines]
    assert kinds[:2] == ["hello", "inside"]
    hello, on = launcher.lines[0][1], launcher.lines[1][1]
    assert hello["framework"] == "torch" and hello["version"] == "2.11.0+fake" and hello["v"] == 1
    assert on == {"type": "inside", "state": "on", "framework": "torch", "pid": hello["pid"]}
    samples = launcher.of("sample")
    assert [s["step"] for s in samples] == [1, 2, 3, 4, 5, 6]
    assert [s["allocated"] for s in samples] == [(512 + 4 * k) * MIB for k in range(1, 7)]
    assert all(s["device"] == 0 and s["reserved"] >= s["allocated"] and s["max_allocated"] == s["allocated"]
               and "limit" not in s for s in samples)
    assert [m["step"] for m in launcher.of("step")] == [1, 2, 3, 4, 5, 6]
    assert len({c for c, _ in launcher.lines}) == 1  # one connection


def test_steps_are_paced_and_several_optimizers_count_once(tmp_path, launcher):
    """Steps faster than the pace give a sample at the first one and then every 0.1 s; a GAN's two
    optimizers stepping once each make one step."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        torch._fake.alloc(1 << 20)
        g, d = torch.optim.SGD([]), torch.optim.SGD([])
        t0 = time.monotonic()
        for step in range(40):
            d.step()
            g.step()
            time.sleep(0.01)
        print(round(time.monotonic() - t0, 3))
    """)
    assert r.returncode == 0, r.stderr
    took = float(r.stdout)
    steps = [s["step"] for s in launcher.of("sample")]
    assert steps[0] == 1 and steps == sorted(steps) and steps[-1] <= 40
    assert 2 <= len(steps) <= took / 0.1 + 1, steps


def test_a_job_without_a_framework_gets_nothing(tmp_path, launcher):
    """No framework imported: no connection, gpumon not imported, the job's output as without it."""
    code = "import sys, json\nprint(sorted(m for m in sys.modules if m.startswith('gpumon')))\nprint('hello')\n"
    r = run_job(tmp_path, launcher, code)
    plain = run_job(tmp_path, launcher, code, bootstrap=False)
    assert r.returncode == 0 and r.stdout == "[]\nhello\n" == plain.stdout and r.stderr == plain.stderr == ""
    assert launcher.lines == []


def test_nothing_before_cuda_starts(tmp_path, launcher):
    """torch imported and optimizer steps, but CUDA never started: hello and "inside on" only, and
    CUDA is still not started at the end (the monitor never starts it)."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        opt = torch.optim.SGD([])
        for _ in range(5):
            opt.step()
            time.sleep(0.12)
        time.sleep(2.6)  # the thread's turn too
        print(torch.cuda.is_initialized(), torch._fake.inits)
    """)
    assert r.returncode == 0 and r.stdout == "False 0\n", r.stdout + r.stderr
    assert [m["type"] for _, m in launcher.lines] == ["hello", "inside"]


def test_cuda_started_later_is_seen(tmp_path, launcher):
    """The observer and the samples wait for CUDA: started by the job's first allocation after the
    monitor began, they work from then on."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        opt = torch.optim.SGD([])
        opt.step()
        torch._fake.alloc(8 << 20)
        time.sleep(0.12)
        opt.step()
        try:
            torch._fake.alloc(200 << 30)
        except torch.OutOfMemoryError:
            print("oom")
    """)
    assert r.returncode == 0 and r.stdout == "oom\n", r.stderr
    assert [s["step"] for s in launcher.of("sample")] == [2]
    assert len(launcher.of("oom")) == 1


def test_out_of_memory_figures_and_snapshot(tmp_path, launcher):
    """At out-of-memory, before torch raises: the observer's figures (the request, the free memory,
    the device's capacity as no fraction is set) with the allocator's, then the snapshot condensed
    by libgpumon; the job's exception is torch's, as without the monitor."""
    r = run_job(tmp_path, launcher, TRAIN + "torch._fake.free(4 << 20)\ntorch._fake.alloc(200 << 30)\n")
    assert r.returncode == 1 and "torch._fake.OutOfMemoryError: CUDA out of memory. Tried to allocate 200.00 GiB" in r.stderr
    [oom] = launcher.of("oom")
    alloc, res = (512 + 5 * 4) * MIB, (512 + 6 * 4) * MIB  # the reserve is kept after a free
    assert oom["framework"] == "torch" and oom["device"] == 0 and oom["request"] == 200 * GIB
    assert oom["capacity"] == 150754820096 and "cap" not in oom
    assert oom["free"] == 150754820096 - res and oom["allocated"] == alloc and oom["reserved"] == res
    assert oom["peak"] == res and oom["pid"] == launcher.of("hello")[0]["pid"]
    [snap] = launcher.of("snapshot")
    s = snap["snapshot"]
    assert s["framework"] == "torch" and s["pid"] == oom["pid"] and s["device"] == 0
    assert s["request_bytes"] == 200 * GIB and s["allocated_bytes"] == alloc and s["reserved_bytes"] == res
    assert s["free_bytes"] == 4 * MIB and s["largest_free_bytes"] == 4 * MIB and s["segments"] == 1
    assert s["stacks"] is False and s["sites"] == []
    kinds = [m["type"] for _, m in launcher.lines]
    assert kinds.index("oom") < kinds.index("snapshot")


def test_out_of_memory_under_a_fraction_is_a_cap(tmp_path, launcher):
    """With set_per_process_memory_fraction, torch gives the observer its cap: sent as "cap", and
    as each sample's limit."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        torch.cuda.set_per_process_memory_fraction(0.25)
        torch._fake.alloc(1 << 30)
        torch.optim.SGD([]).step()
        try:
            torch._fake.alloc(40 << 30)
        except torch.OutOfMemoryError:
            print("caught")
    """)
    assert r.returncode == 0 and r.stdout == "caught\n", r.stderr
    cap = int(0.25 * 150754820096)
    [oom] = launcher.of("oom")
    assert oom["cap"] == cap and "capacity" not in oom
    assert [s["limit"] for s in launcher.of("sample")] == [cap]


def test_history_names_the_allocation_site(tmp_path, launcher):
    """GPUMON_INSIDE_HISTORY=1: the allocator keeps its history from CUDA's start, with the entries
    asked for, and the snapshot names the job's line that holds the memory."""
    r = run_job(tmp_path, launcher, """
        import torch
        torch.cuda.init()
        print(torch._fake.history["max_entries"], torch._fake.history["stacks"])
        kept = []
        for i in range(10):
            torch._fake.alloc(64 << 20)  # the site
        torch._fake.alloc(500 << 30)
    """, {"GPUMON_INSIDE_HISTORY": "1", "GPUMON_INSIDE_HISTORY_ENTRIES": "1234"})
    assert r.returncode == 1 and r.stdout == "1234 python\n", r.stderr
    s = launcher.of("snapshot")[0]["snapshot"]
    site = s["sites"][0]
    line = (tmp_path / "job.py").read_text().splitlines().index("    torch._fake.alloc(64 << 20)  # the site") + 1
    assert s["stacks"] is True and site["file"] == str(tmp_path / "job.py") and site["line"] == line
    assert site["function"] == "<module>" and site["bytes"] == 640 * MIB and site["blocks"] == 10


def test_history_off_by_default(tmp_path, launcher):
    r = run_job(tmp_path, launcher, "import torch\ntorch.cuda.init()\nprint(torch._fake.history)\n")
    assert r.returncode == 0 and r.stdout == "None\n", r.stderr


def test_snapshots_are_spaced_by_their_cost(tmp_path, launcher):
    """A job that catches its out-of-memory and tries again (a batch-size search): each is told
    with its figures, the snapshots no more often than a second apart."""
    r = run_job(tmp_path, launcher, """
        import torch
        torch._fake.alloc(1 << 20)
        for n in (400, 300, 200):
            try:
                torch._fake.alloc(n << 30)
            except torch.OutOfMemoryError:
                pass
        print(torch._fake.snapshots)
    """)
    assert r.returncode == 0 and r.stdout == "1\n", r.stderr
    assert [m["request"] for m in launcher.of("oom")] == [400 * GIB, 300 * GIB, 200 * GIB]
    assert len(launcher.of("snapshot")) == 1


def test_the_job_never_sees_the_monitor_fail(tmp_path, launcher):
    """gpumon run hangs up after the first lines: the job trains, and its out-of-memory is torch's
    own error, as without the monitor."""
    launcher.hang_up_after = 2
    code = TRAIN + "torch._fake.alloc(200 << 30)\n"
    r = run_job(tmp_path, launcher, code)
    plain = run_job(tmp_path, launcher, code, bootstrap=False)
    assert r.returncode == plain.returncode == 1 and r.stdout == plain.stdout
    assert r.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1]
    assert r.stderr.splitlines()[-1].startswith("torch._fake.OutOfMemoryError: CUDA out of memory.")


def test_thread_samples_a_job_without_steps(tmp_path, launcher):
    """Inference, a custom loop: no optimizer step, so the thread samples every 0.5 s, no step."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        torch._fake.alloc(256 << 20)
        time.sleep(1.8)
    """)
    assert r.returncode == 0, r.stderr
    samples = launcher.of("sample")
    assert 2 <= len(samples) <= 4 and all("step" not in s and s["allocated"] == 256 * MIB for s in samples)
    assert launcher.of("step") == []


def test_every_device_that_holds_memory(tmp_path, launcher):
    """Two GPUs, the job on the second only: its samples say device 1, none for device 0."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        torch._fake.alloc(32 << 20, dev=1)
        torch.optim.SGD([]).step()
    """, {"FAKE_TORCH_GPUS": "2"})
    assert r.returncode == 0, r.stderr
    assert [(s["device"], s["allocated"]) for s in launcher.of("sample")] == [(1, 32 * MIB)]


def test_forked_child_sends_nothing(tmp_path, launcher):
    """A forked child (a DataLoader worker) is not watched: what it does is not told, whatever it
    does; the parent goes on as before."""
    r = run_job(tmp_path, launcher, """
        import os, time, torch
        torch._fake.alloc(16 << 20)
        opt = torch.optim.SGD([])
        for _ in range(2):
            opt.step()
            time.sleep(0.12)
        pid = os.fork()
        if pid == 0:
            for _ in range(4):
                torch._fake.alloc(1 << 20)
                opt.step()
                time.sleep(0.12)
            try:
                torch._fake.alloc(400 << 30)
            except torch.OutOfMemoryError:
                pass
            time.sleep(0.8)
            os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.12)
        opt.step()
        print("parent done")
    """)
    assert r.returncode == 0 and r.stdout == "parent done\n", r.stderr
    assert [s["step"] for s in launcher.of("sample")] == [1, 2, 3]
    assert launcher.of("oom") == [] and len(launcher.of("hello")) == 1


def test_an_explicit_monitor_takes_over(tmp_path, launcher):
    """The job makes its own GPUMonitor, which reports to gpumon run itself (its own connection):
    from then on the inside monitor sends no samples or steps; it still tells the out-of-memory."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        torch._fake.alloc(16 << 20)
        opt = torch.optim.SGD([])
        for _ in range(3):
            opt.step()
            time.sleep(0.12)
        import gpumon
        mon = gpumon.GPUMonitor(interval=1, logger=False)
        for _ in range(3):
            opt.step()
            mon.step()
            time.sleep(0.12)
        try:
            torch._fake.alloc(400 << 30)
        except torch.OutOfMemoryError:
            pass
        mon.close()
    """, {"PYTHONPATH": os.pathsep.join([str(boot_dir(tmp_path)), PYPATH, FAKE_TORCH])})
    assert r.returncode == 0, r.stderr
    by_conn = {}
    for c, m in launcher.lines:
        by_conn.setdefault(c, []).append(m)
    inside, mine = by_conn[1], by_conn[2]
    assert [m["step"] for m in inside if m["type"] == "sample"] == [1, 2, 3]
    assert [m["step"] for m in mine if m["type"] == "sample"] == [1, 2, 3]
    assert [m["type"] for m in inside if m["type"] in ("oom", "snapshot")] == ["oom", "snapshot"]
    assert not any(m["type"] in ("oom", "snapshot") for m in mine)


def test_chains_to_the_jobs_sitecustomize(tmp_path, launcher):
    """The job's own sitecustomize (later on its PYTHONPATH) still runs, as the module
    sitecustomize; an error in it is said by site as without gpumon, and the job goes on."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import builtins\nbuiltins.CUSTOMIZED = 'yes'\nprint('user customize')\n")
    code = "import sys\nprint(CUSTOMIZED, sys.modules['sitecustomize'].__file__)\n"
    path = [str(user), FAKE_TORCH]
    r = run_job(tmp_path, launcher, code, pythonpath=path)
    plain = run_job(tmp_path, launcher, code, pythonpath=path, bootstrap=False)
    assert r.returncode == 0 and r.stdout == plain.stdout == f"user customize\nyes {user / 'sitecustomize.py'}\n"
    assert r.stderr == plain.stderr == ""
    (user / "sitecustomize.py").write_text("print('half')\n1 / 0\n")
    code = "import sys\nprint('sitecustomize' in sys.modules)\n"
    r = run_job(tmp_path, launcher, code, pythonpath=path)
    plain = run_job(tmp_path, launcher, code, pythonpath=path, bootstrap=False)
    assert r.returncode == plain.returncode == 0 and r.stdout == plain.stdout == "half\nFalse\n"
    assert r.stderr == plain.stderr == ("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                                        "ZeroDivisionError: division by zero\n")


def test_no_sitecustomize_of_the_job(tmp_path, launcher):
    r = run_job(tmp_path, launcher, "import sys\nprint(sys.modules['sitecustomize'].__name__)\n")
    assert r.returncode == 0 and r.stdout == "sitecustomize\n" and r.stderr == ""


def test_a_python_that_cannot_import_gpumon(tmp_path, launcher):
    """No gpumon on this Python's path and none given: one "inside off" line saying which Python and
    why; the job's output, and its sys.path, as without gpumon."""
    code = """
        import sys, torch
        print([p for p in sys.path if 'boot' not in p])
        torch._fake.alloc(1 << 20)
        torch.optim.SGD([]).step()
        import jax
        print('trained')
    """
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run_job(tmp_path, launcher, code, {"GPUMON_INSIDE_PYTHONPATH": str(empty)})
    plain = run_job(tmp_path, launcher, code, bootstrap=False)
    assert r.returncode == 0 and r.stdout == plain.stdout and r.stderr == plain.stderr == ""
    [(_, off)] = launcher.lines
    assert off["type"] == "inside" and off["state"] == "off" and off["framework"] == "torch"
    assert off["reason"].startswith(f"this Python ({sys.executable}, {sys.version.split()[0]}) cannot import gpumon: "
                                    "ModuleNotFoundError: No module named 'gpumon'")


def test_the_jobs_own_gpumon_wins(tmp_path, launcher):
    """A gpumon the job can import itself is the one used: GPUMON_INSIDE_PYTHONPATH is not added."""
    r = run_job(tmp_path, launcher, """
        import sys, torch, gpumon
        print(sys.path.count('/nowhere'), gpumon.__file__.startswith(%r))
    """ % PYPATH, {"GPUMON_INSIDE_PYTHONPATH": "/nowhere"},
        pythonpath=[PYPATH, FAKE_TORCH])
    assert r.returncode == 0 and r.stdout == "0 True\n", r.stderr
    assert [m["type"] for _, m in launcher.lines] == ["hello", "inside"]


def test_without_gpumon_inside_only_the_chain(tmp_path, launcher):
    """GPUMON_INSIDE unset (gpumon run --no-inside) or no socket: no hook at all."""
    for extra in ({"GPUMON_INSIDE": None}, {"GPUMON_RUN_SOCKET": None}, {"GPUMON_INSIDE": "0"}):
        r = run_job(tmp_path, launcher, """
            import sys, torch
            torch._fake.alloc(1 << 20)
            torch.optim.SGD([]).step()
            print(type(torch.__spec__.loader).__name__, any('gpumon' in m for m in sys.modules))
        """, extra)
        assert r.returncode == 0 and r.stdout == "SourceFileLoader False\n", r.stderr
    assert launcher.lines == []


def test_the_import_returns_the_frameworks_module(tmp_path, launcher):
    """The hook changes nothing the import gives: the module, its spec's loader, its __loader__."""
    r = run_job(tmp_path, launcher, """
        import importlib, importlib.util, torch
        print(type(torch.__loader__).__name__, type(torch.__spec__.loader).__name__, torch.__spec__.name)
        print(importlib.util.find_spec('torch') is torch.__spec__, importlib.reload(torch) is torch)
    """)
    assert r.returncode == 0 and r.stdout == "SourceFileLoader SourceFileLoader torch\nTrue True\n", r.stderr


def test_bootstrap_parses_on_python_36():
    """The bootstrap runs in whatever Python the job starts: nothing newer than 3.6's syntax."""
    import ast
    ast.parse(open(BOOTSTRAP).read(), feature_version=(3, 6))


def test_paddle_sampled_and_its_out_of_memory_told(tmp_path, launcher):
    """Paddle: the thread samples the devices whose allocator holds memory (no steps); an uncaught
    out-of-memory is told with the allocator's figures then, and printed as Python prints it."""
    r = run_job(tmp_path, launcher, """
        import time, paddle
        paddle._fake.alloc(300 << 20)
        time.sleep(1.2)
        paddle._fake.alloc(200 << 30)
    """)
    assert r.returncode == 1 and "MemoryError: ResourceExhaustedError:" in r.stderr
    assert "Out of memory error on GPU 0. Cannot allocate 204800.000000MB memory on GPU 0" in r.stderr
    hello = launcher.of("hello")[0]
    assert hello["framework"] == "paddle" and hello["version"] == "3.0.0"
    samples = launcher.of("sample")
    assert 1 <= len(samples) <= 3 and all(s["device"] == 0 and s["allocated"] == 300 * MIB and "step" not in s
                                          for s in samples)
    [oom] = launcher.of("oom")
    assert oom["framework"] == "paddle" and oom["device"] == 0 and oom["request"] == 200 * GIB
    assert oom["allocated"] == 300 * MIB and oom["reserved"] == 300 * MIB and oom["peak"] == 300 * MIB
    assert launcher.of("snapshot") == []


def test_jax_waits_for_its_backends_and_tells_its_out_of_memory(tmp_path, launcher):
    """JAX: nothing while its backends are not started (the monitor would start them: 75 % of the
    card); once the job's first array started them, samples with the pool and the limit; an
    uncaught RESOURCE_EXHAUSTED with the allocator's figures, its limit and largest free block."""
    r = run_job(tmp_path, launcher, """
        import time, jax
        time.sleep(1.2)
        print(jax._fake.started)
        jax._fake.alloc(1 << 30)
        time.sleep(1.2)
        jax._fake.alloc(200 << 30)
    """, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    assert r.returncode == 1 and r.stdout == "False\n"
    assert r.stderr.splitlines()[-1] == ("jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying "
                                         f"to allocate {200 * GIB} bytes.")
    limit = int(0.75 * 150754820096)
    samples = launcher.of("sample")
    assert 1 <= len(samples) <= 3 and all(s["allocated"] == GIB and s["reserved"] == GIB and s["limit"] == limit
                                          for s in samples)
    [oom] = launcher.of("oom")
    assert oom["framework"] == "jax" and oom["request"] == 200 * GIB and oom["device"] == 0
    assert oom["allocated"] == GIB and oom["reserved"] == GIB and oom["cap"] == limit
    assert oom["largest_free"] == 0 and oom["peak"] == GIB


def test_uncaught_errors_that_are_not_out_of_memory(tmp_path, launcher):
    """Other uncaught exceptions pass through untold, on the main thread and on others."""
    code = """
        import threading, jax
        jax._fake.alloc(1 << 20)
        t = threading.Thread(target=lambda: 1 / 0)
        t.start(); t.join()
        raise KeyError('no')
    """
    r = run_job(tmp_path, launcher, code)
    plain = run_job(tmp_path, launcher, code, bootstrap=False)
    assert r.returncode == plain.returncode == 1 and r.stderr.replace(str(tmp_path), "") \
        .splitlines()[-1] == "KeyError: 'no'" and "ZeroDivisionError" in r.stderr
    assert launcher.of("oom") == []


# ---- GPUMonitor(history=True): the same out-of-memory path, for the monitor's own model --------------

def oom_in_loop(torch, mon, steps=3):
    for _ in range(steps):
        torch._fake.alloc(64 * MIB)  # the loop's site
        mon.step()
    with pytest.raises(torch.OutOfMemoryError):
        torch._fake.alloc(300 * GIB)


def test_monitor_history_puts_the_snapshot_in_its_report(scenario, torch, tmp_path):
    """history=True: the allocator keeps its history from CUDA's start; at out-of-memory the figures
    and the snapshot are events of the monitor's model (its document's "oom" has them, the site
    named) and of its recording."""
    import sqlite3
    import gpumon
    scenario(h200())
    mon = gpumon.GPUMonitor(history=True, logger=False, record=tmp_path / "r.gpumon")
    assert torch._fake.history is None and not torch.cuda.is_initialized()  # nothing before CUDA starts
    oom_in_loop(torch, mon)
    assert torch._fake.history["enabled"] == "all" and torch._fake.history["stacks"] == "python"
    oom = mon.report()["oom"]
    mon.close()
    said, snap = oom["framework"], oom["snapshot"]
    assert said["request_bytes"] == 300 * GIB and said["allocated_bytes"] == 192 * MIB and said["pid"] == os.getpid()
    assert said["capacity_bytes"] == 150754820096
    site = snap["sites"][0]
    assert snap["stacks"] is True and site["file"] == __file__ and site["bytes"] == 192 * MIB
    assert open(__file__).read().splitlines()[site["line"] - 1].strip() == "torch._fake.alloc(64 * MIB)  # the loop's site"
    kinds = [k for (k,) in sqlite3.connect(tmp_path / "r.gpumon").execute("SELECT kind FROM events ORDER BY t_ns")]
    assert kinds.count("oom_figures") == 1 and kinds.count("alloc_snapshot") == 1


def test_monitor_history_tells_gpumon_run(scenario, torch, tmp_path, monkeypatch):
    """Under gpumon run without the inside monitor, the monitor sends the oom and snapshot messages
    itself, on its own connection."""
    import gpumon
    scenario(h200())
    la = Launcher(str(tmp_path / "sock"))
    monkeypatch.setenv("GPUMON_RUN_SOCKET", la.path)
    mon = gpumon.GPUMonitor(history=True, logger=False)
    oom_in_loop(torch, mon)
    mon.close()
    la.wait()
    [oom], [snap] = la.of("oom"), la.of("snapshot")
    assert oom["request"] == 300 * GIB and oom["capacity"] == 150754820096 and oom["allocated"] == 192 * MIB
    assert snap["snapshot"]["sites"][0]["file"] == __file__ and snap["snapshot"]["pid"] == os.getpid()
    la.close()


def test_monitor_without_history_keeps_away_from_the_allocator(scenario, torch):
    import gpumon
    scenario(h200())
    mon = gpumon.GPUMonitor(logger=False)
    oom_in_loop(torch, mon)
    mon.close()
    assert torch._fake.history is None and torch._fake.observers == [] and torch._fake.snapshots == 0


@pytest.mark.parametrize("framework", ["none", "paddle"])
def test_monitor_history_is_torchs(scenario, torch, paddle, framework):
    import gpumon
    scenario(h200())
    with pytest.raises(ValueError, match="history=True needs PyTorch's allocator"):
        gpumon.GPUMonitor(history=True, framework=framework, logger=False)
    with pytest.raises(ValueError, match="history must be True or False"):
        gpumon.GPUMonitor(history=1, logger=False)


def test_a_compiled_optimizer_step_is_left_alone(tmp_path, launcher):
    """torch.compile traces the hooks of an optimizer step it compiles: there the hook does nothing
    (no clock read to break the graph), and the steps it does see are counted as before."""
    r = run_job(tmp_path, launcher, """
        import time, torch
        torch._fake.alloc(1 << 20)
        opt = torch.optim.SGD([])
        torch._fake.compiling = True
        for _ in range(3):
            opt.step()
            time.sleep(0.12)
        torch._fake.compiling = False
        opt.step()
    """)
    assert r.returncode == 0, r.stderr
    assert [s["step"] for s in launcher.of("sample")] == [1]


def test_monitor_history_pays_the_first_named_snapshot_early(scenario, torch):
    """torch's first snapshot that names Python frames costs seconds once (it imports
    torch._inductor): the monitor takes it at a sample once there are frames to name, so that the
    out-of-memory does not pay it; before any allocation with the history on there are none."""
    import gpumon
    from gpumon import _inside
    scenario(h200())
    torch.cuda.init()
    mon = gpumon.GPUMonitor(history=True, logger=False, interval=1)
    mon.step()
    oom = _inside.torch_oom()
    assert oom.warm_s is None and torch._fake.snapshots == 1  # nothing to name yet: again later
    mon.step()
    assert torch._fake.snapshots == 1  # not before a second has passed
    oom.next_warm_ns = 0
    torch._fake.alloc(MIB)
    mon.step()
    assert oom.warm_s is not None and torch._fake.snapshots == 2
    mon.step()
    assert torch._fake.snapshots == 2
    mon.close()


# ---- under gpumon run itself ----------------------------------------------------------------------------

def gpumon_run(tmp_path, code, args=(), extra=None):
    """gpumon run -o run.gpumon ARGS -- python job.py, the job knowing nothing of gpumon (no gpumon on
    its PYTHONPATH: gpumon run's bootstrap finds the build tree's package)."""
    if "--no-inside" not in subprocess.run([GPUMON_BIN, "run", "--help"], capture_output=True, text=True).stdout:
        pytest.skip("this gpumon run has no inside view")
    (tmp_path / "job.py").write_text(textwrap.dedent(code))
    env = child_env(tmp_path, h200(pid=False), TMPDIR=str(tmp_path), **(extra or {}))
    env["PYTHONPATH"] = os.pathsep.join([FAKE_TORCH, FAKE_PADDLE, FAKE_JAX])
    rec = tmp_path / "run.gpumon"
    r = subprocess.run([os.path.abspath(GPUMON_BIN), "run", "-o", str(rec)] + list(args) + ["--", sys.executable, "job.py"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    return r, rec


def test_under_gpumon_run(tmp_path):
    """The whole way: gpumon run's bootstrap starts the monitor in a job that never imports gpumon;
    the recording holds its samples with the optimizer's steps, and at out-of-memory the figures and
    the allocator's snapshot, whose sites (with --history) name the job's line; the report says it."""
    import sqlite3
    r, rec = gpumon_run(tmp_path, TRAIN + "torch._fake.alloc(200 << 30)  # the failing line\n", ["--history"])
    assert r.returncode == 1 and "torch._fake.OutOfMemoryError" in r.stderr, r.stderr
    db = sqlite3.connect(rec)
    assert db.execute("SELECT framework FROM framework_sources").fetchall() == [("torch",)]
    steps = [s for (s,) in db.execute("SELECT step FROM framework_samples ORDER BY t_ns")]
    assert steps == [1, 2, 3, 4, 5, 6]
    kinds = [k for (k,) in db.execute("SELECT kind FROM events ORDER BY t_ns")]
    assert kinds.count("oom_figures") == 1 and kinds.count("alloc_snapshot") == 1
    doc = json.loads(subprocess.run([GPUMON_BIN, "report", str(rec), "--json"], capture_output=True,
                                    text=True).stdout)
    oom = doc["oom"]
    assert oom["framework"]["request_bytes"] == 200 * GIB and oom["framework"]["framework"] == "torch"
    site = oom["snapshot"]["sites"][0]  # the largest: the model
    line = (tmp_path / "job.py").read_text().splitlines().index("torch._fake.alloc(512 << 20)") + 1
    assert site["file"] == str(tmp_path / "job.py") and site["line"] == line and site["bytes"] == 512 * MIB


def test_under_gpumon_run_no_inside(tmp_path):
    r, rec = gpumon_run(tmp_path, TRAIN + "import sys\nprint('gpumon' in sys.modules)\n", ["--no-inside"])
    assert r.returncode == 0 and r.stdout == "False\n", r.stderr
    import sqlite3
    assert sqlite3.connect(rec).execute("SELECT count(*) FROM framework_samples").fetchone() == (0,)
