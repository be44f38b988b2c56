# SPDX-License-Identifier: MIT
"""The monitor inside a job (gpumon run's bootstrap, gpumon._inside) in hostile surroundings: the
bootstrap's directory twice on PYTHONPATH or a second copy of it (a gpumon run inside another),
jobs that replace the exception hooks, fork and spawn, close every descriptor, a socket path that
is gone or not a socket, GPUMON_* variables with junk values, and allocator snapshots that are
truncated, not JSON or hold numbers no figure holds. The job always runs as it would without
gpumon; what reaches gpumon run is whole lines, each process told once."""
import json
import os
import shutil
import socket

import pytest

from conftest import FAKE_TORCH, GIB, MIB
from test_inside import FAKE_JAX, FAKE_PADDLE, TRAIN, boot_dir, launcher, run_job  # noqa: F401 (a fixture)

import gpumon._gpumon as _gpumon


def conns(launcher):
    by = {}
    for c, m in launcher.lines:
        by.setdefault(c, []).append(m)
    return by


# ---- the bootstrap's place on the path ----------------------------------------------------------------

def test_bootstrap_directory_twice_on_the_path(tmp_path, launcher):
    d = str(boot_dir(tmp_path))
    r = run_job(tmp_path, launcher, TRAIN + "print('done')\n", pythonpath=[d, FAKE_TORCH, d])
    assert r.returncode == 0 and r.stdout == "done\n" and r.stderr == "", r.stderr
    assert len(launcher.of("hello")) == 1 and [s["step"] for s in launcher.of("sample")] == [1, 2, 3, 4, 5, 6]


def test_a_second_copy_of_the_bootstrap_after_it(tmp_path, launcher):
    """gpumon run inside gpumon run: the inner run's directory first, the outer one's later, each
    with the bootstrap as sitecustomize.py. Each runs once, the job's own sitecustomize after both;
    one monitor."""
    outer = tmp_path / "outer"
    outer.mkdir()
    shutil.copy(boot_dir(tmp_path) / "sitecustomize.py", outer / "sitecustomize.py")
    user = tmp_path / "user"
    user.mkdir()
    (user / "sitecustomize.py").write_text("import builtins\nbuiltins.RUNS = getattr(builtins, 'RUNS', 0) + 1\n")
    r = run_job(tmp_path, launcher, TRAIN + "print('user customize ran', RUNS)\n",
                pythonpath=[str(outer), str(user), FAKE_TORCH])
    assert r.returncode == 0 and r.stderr == "" and r.stdout == "user customize ran 1\n", r.stderr
    assert len(launcher.of("hello")) == 1 and [s["step"] for s in launcher.of("sample")] == [1, 2, 3, 4, 5, 6]


def test_the_job_imports_sitecustomize_again(tmp_path, launcher):
    r = run_job(tmp_path, launcher, "import importlib, sitecustomize\nimportlib.reload(sitecustomize)\n" + TRAIN)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert len(launcher.of("hello")) == 1 and len(launcher.of("sample")) == 6


# ---- the job's exception hooks ------------------------------------------------------------------------

PADDLE_OOM = """
import sys, threading, time, paddle
paddle._fake.alloc(300 << 20)
"""


@pytest.mark.parametrize("when", ["before", "after"])
def test_the_job_replaces_sys_excepthook(tmp_path, launcher, when):
    """The job's own hook, set before the framework's import or after it, runs as without gpumon;
    set before, the out-of-memory is told once (the monitor's hook runs, then the job's); set after,
    the job's hook is the one Python calls and the monitor tells nothing, never twice."""
    hook = "sys.excepthook = lambda t, v, tb: print('job hook', t.__name__)\n"
    code = ("import sys\n" + hook + PADDLE_OOM if when == "before" else PADDLE_OOM + hook) + \
        "paddle._fake.alloc(200 << 30)\n"
    r = run_job(tmp_path, launcher, code)
    assert r.returncode == 1 and r.stdout == "job hook MemoryError\n", r.stderr
    assert len(launcher.of("oom")) == (1 if when == "before" else 0)


def test_the_job_replaces_threading_excepthook(tmp_path, launcher):
    r = run_job(tmp_path, launcher, PADDLE_OOM + """
        threading.excepthook = lambda a: print('job thread hook', a.exc_type.__name__)
        t = threading.Thread(target=paddle._fake.alloc, args=(200 << 30,))
        t.start(); t.join()
        print('after')
    """.replace("\n        ", "\n"))
    assert r.returncode == 0 and r.stdout == "job thread hook MemoryError\nafter\n", r.stderr
    assert launcher.of("oom") == []


def test_a_hook_that_raises(tmp_path, launcher):
    """A job whose hook (set before) raises: Python says so as without gpumon; told once."""
    code = "import sys\ndef h(*a):\n    raise RuntimeError('hook broke')\nsys.excepthook = h\n" + PADDLE_OOM + \
        "paddle._fake.alloc(200 << 30)\n"
    r = run_job(tmp_path, launcher, code)
    plain = run_job(tmp_path, launcher, code, bootstrap=False)
    assert r.returncode == plain.returncode == 1 and "hook broke" in r.stderr
    assert r.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1]
    assert len(launcher.of("oom")) == 1


# ---- forks and spawns ---------------------------------------------------------------------------------

@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing_children(tmp_path, launcher, method):
    """Children of multiprocessing that train too: a forked one tells nothing (its parent's
    connection is the parent's), a spawned one is a process of its own with its own connection;
    every line arrives whole (the launcher parses each) and the parent's steps are its own."""
    r = run_job(tmp_path, launcher, f"""
        import multiprocessing as mp, os, time, torch

        def child():
            torch._fake.alloc(8 << 20)
            opt = torch.optim.SGD([])
            for _ in range(3):
                opt.step()
                time.sleep(0.12)

        if __name__ == "__main__":
            torch.cuda.init()
            torch._fake.alloc(64 << 20)
            opt = torch.optim.SGD([])
            opt.step()
            time.sleep(0.12)
            ctx = mp.get_context("{method}")
            ps = [ctx.Process(target=child) for _ in range(2)]
            for p in ps:
                p.start()
            for _ in range(3):
                opt.step()
                time.sleep(0.12)
            for p in ps:
                p.join()
            print([p.exitcode for p in ps])
    """)
    assert r.returncode == 0 and r.stdout == "[0, 0]\n", r.stderr
    by = conns(launcher)
    parent = [ms for ms in by.values() if ms[0]["type"] == "hello" and ms[0]["pid"] != 0]
    pids = [ms[0]["pid"] for ms in by.values() if ms and ms[0]["type"] == "hello"]
    assert len(pids) == len(set(pids)), pids  # one connection per process
    first = by[1]
    assert [m["step"] for m in first if m["type"] == "sample"] == [1, 2, 3, 4], first
    others = [ms for c, ms in by.items() if c != 1]
    if method == "fork":
        assert others == []
    else:  # its own hello, its own steps, none of the parent's
        assert len(others) == 2 and parent
        for ms in others:
            assert all(m.get("pid", ms[0]["pid"]) == ms[0]["pid"] for m in ms)
            assert [m["step"] for m in ms if m["type"] == "sample"] == [1, 2, 3], ms


def test_a_job_that_closes_every_descriptor(tmp_path, launcher):
    """The job closes every descriptor above 2 (a daemon's start) and opens its own files, which
    may get the number the monitor's connection had: the monitor never writes into them, never
    closes them, and says nothing more."""
    r = run_job(tmp_path, launcher, """
        import os, time, torch
        torch.cuda.init()
        torch._fake.alloc(64 << 20)
        opt = torch.optim.SGD([])
        opt.step()
        os.closerange(3, 4096)
        files = [open("out%d.txt" % i, "w") for i in range(8)]
        for _ in range(4):
            opt.step()
            time.sleep(0.12)
        for i, f in enumerate(files):
            f.write("job %d\\n" % i)
            f.close()
        torch._fake.alloc(400 << 30)
    """)
    assert "OutOfMemoryError" in r.stderr and r.returncode == 1, r.stderr
    for i in range(8):
        assert (tmp_path / f"out{i}.txt").read_text() == f"job {i}\n"
    assert [s["step"] for s in launcher.of("sample")] == [1]


# ---- the socket's path --------------------------------------------------------------------------------

def socket_paths(tmp_path):
    d = tmp_path / "a-directory"
    d.mkdir()
    f = tmp_path / "a-file"
    f.write_text("not a socket\n")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # bound, never listening
    dead.bind(str(tmp_path / "dead.sock"))
    dead.close()
    return {"gone": str(tmp_path / "no-such.sock"), "directory": str(d), "file": str(f),
            "not listening": str(tmp_path / "dead.sock"), "too long": str(tmp_path / ("x" * 200)),
            "relative": "sock"}


@pytest.mark.parametrize("kind", ["gone", "directory", "file", "not listening", "too long", "relative"])
def test_socket_path_that_is_not_gpumon_runs(tmp_path, launcher, kind):
    path = socket_paths(tmp_path)[kind]
    code = TRAIN + "print('trained')\n"
    r = run_job(tmp_path, launcher, code, {"GPUMON_RUN_SOCKET": path})
    assert r.returncode == 0 and r.stdout == "trained\n" and r.stderr == "", r.stderr
    assert launcher.lines == []


# ---- GPUMON_* variables with junk ---------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [
    ("GPUMON_INSIDE", "yes"), ("GPUMON_INSIDE", "1 "), ("GPUMON_INSIDE", "\u00b9"),
    ("GPUMON_INSIDE_HISTORY", "maybe"),
    ("GPUMON_INSIDE_HISTORY_ENTRIES", "\u00b2"), ("GPUMON_INSIDE_HISTORY_ENTRIES", "-5"),
    ("GPUMON_INSIDE_HISTORY_ENTRIES", "99999999999999999999999"), ("GPUMON_INSIDE_HISTORY_ENTRIES", "0x10"),
    ("GPUMON_INSIDE_PYTHONPATH", ""), ("GPUMON_INSIDE_PYTHONPATH", "\udcff/nowhere"),
])
def test_junk_in_gpumons_variables(tmp_path, launcher, name, value):
    """The job runs as without gpumon; the monitor runs with its defaults or stays off, and tells
    gpumon run nothing it cannot stand by."""
    extra = {name: value}
    if name == "GPUMON_INSIDE_HISTORY_ENTRIES":
        extra["GPUMON_INSIDE_HISTORY"] = "1"
    r = run_job(tmp_path, launcher, TRAIN + "print('trained')\n", extra)
    assert r.returncode == 0 and r.stdout == "trained\n" and r.stderr == "", r.stderr
    if name == "GPUMON_INSIDE":
        assert launcher.lines == []
    elif name == "GPUMON_INSIDE_PYTHONPATH":  # gpumon cannot be imported: said once
        [(_, off)] = launcher.lines
        assert off["type"] == "inside" and off["state"] == "off"
    else:  # the default number of history entries, or none
        assert [m["type"] for _, m in launcher.lines][:2] == ["hello", "inside"]
        assert [m["state"] for m in launcher.of("inside")] == ["on"]
        assert len(launcher.of("sample")) == 6


def test_history_entries_junk_is_the_default():
    """A number of history entries that is not ASCII digits, not positive, or beyond any ring a
    process could hold is the default."""
    from gpumon import _inside
    assert _inside._env_int("X_UNSET_FOR_TEST", 7) == 7
    for junk in ("\u00b2", "\uff11\uff12", "-5", "0", "", " 12", "1e3", "100000001", "99999999999999999999999"):
        os.environ["GPUMON_TEST_JUNK"] = junk
        try:
            got = _inside._env_int("GPUMON_TEST_JUNK", 7)
        finally:
            del os.environ["GPUMON_TEST_JUNK"]
        assert got == 7, (junk, got)
    os.environ["GPUMON_TEST_JUNK"] = "100000000"
    try:
        assert _inside._env_int("GPUMON_TEST_JUNK", 7) == 100000000
    finally:
        del os.environ["GPUMON_TEST_JUNK"]


# ---- allocator snapshots ------------------------------------------------------------------------------

SNAPSHOT = {"segments": [{"device": 0, "address": 1 << 40, "total_size": 2 << 20, "allocated_size": 1 << 20,
                          "active_size": 1 << 20, "requested_size": 1 << 20, "stream": 0, "segment_type": "large",
                          "is_expandable": False,
                          "blocks": [{"address": 1 << 40, "size": 1 << 20, "requested_size": 1 << 20,
                                      "state": "active_allocated", "frames": []},
                                     {"address": (1 << 40) + (1 << 20), "size": 1 << 20, "requested_size": 0,
                                      "state": "inactive", "frames": []}]}],
            "device_traces": [[]]}


@pytest.mark.parametrize("text", [
    "", "{", "not json", "[]", "null", '{"segments": 3}', '{"segments": [{"blocks": "x"}]}',
    json.dumps(SNAPSHOT)[:-7],  # truncated
    json.dumps(SNAPSHOT).replace(str(2 << 20), "1" + "0" * 40),  # a size no figure holds
    json.dumps(SNAPSHOT).replace(str(2 << 20), "-1"),
    json.dumps(SNAPSHOT).replace(str(2 << 20), "1e300"),
    json.dumps(SNAPSHOT).replace('"segments"', '"segments\\u0000"'),
    "[" * 100000,
], ids=["empty", "open-brace", "not-json", "array", "null", "segments-number", "blocks-string", "truncated",
        "huge-size", "negative-size", "real-size", "nul-key", "deep"])
def test_damaged_snapshot_is_an_error_not_a_crash(text):
    with pytest.raises((_gpumon.Error, ValueError)) as e:
        _gpumon.snapshot_condense(text)
    assert str(e.value) and "\n" not in str(e.value)


def test_a_whole_snapshot_is_condensed():
    out = json.loads(_gpumon.snapshot_condense(json.dumps(SNAPSHOT), device=0, request=GIB, pid=7))
    assert out["reserved_bytes"] == 2 * MIB and out["allocated_bytes"] == MIB and out["pid"] == 7
