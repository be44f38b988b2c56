# SPDX-License-Identifier: MIT
"""The package as `make install` lays it out, imported from there alone (not the build tree),
finding the installed libgpumon through its relative RPATH, next to the installed program; and the
examples compile. (pip's layout: tests/pip.)"""
import os
import py_compile
import subprocess
import sys

import pytest

from conftest import ROOT, child_env, h200

BUILD = os.environ.get("GPUMON_BUILD_DIR")
PYDIR = os.environ.get("GPUMON_PYTHON_INSTALL_DIR")


@pytest.mark.skipif(not BUILD or not PYDIR, reason="needs GPUMON_BUILD_DIR and GPUMON_PYTHON_INSTALL_DIR (ctest sets them)")
def test_installed_package_imports_and_works(tmp_path):
    prefix = tmp_path / "prefix"
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    pkg = prefix / PYDIR / "gpumon"
    assert (pkg / "_gpumon.abi3.so").exists() and (pkg / "monitor.py").exists()
    # the wheel's layout (GPUMON_WHEEL, tests/pip) stays out of `make install`: the program and the
    # library where they always go, nothing bundled
    assert not (pkg / "bin").exists() and not (prefix / PYDIR / "gpumon.libs").exists()
    r = subprocess.run([str(prefix / "bin" / "gpumon"), "--version"], capture_output=True, text=True, timeout=30,
                       env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"})
    assert r.returncode == 0 and r.stdout.startswith("gpumon "), r.stderr
    env = child_env(tmp_path, h200())
    env["PYTHONPATH"] = str(prefix / PYDIR)
    env.pop("LD_LIBRARY_PATH", None)
    code = ("import gpumon, os; print(os.path.dirname(gpumon.__file__)); print(gpumon.get_gpu_info(0)); "
            "print(sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgpumon.so' in l}))")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    where, info, libs = r.stdout.splitlines()
    assert where == str(pkg)
    assert info == "(40960, 143771, 97)"
    libs = eval(libs)
    assert len(libs) == 1 and libs[0].startswith(str(prefix) + "/"), libs  # the installed one, not the build tree's


@pytest.mark.parametrize("name", ["train_torch.py", "train_paddle.py"])
def test_examples_compile(name, tmp_path):
    py_compile.compile(os.path.join(ROOT, "examples", name), cfile=str(tmp_path / "x.pyc"), doraise=True)
