# SPDX-License-Identifier: MIT
"""The installed library as another project uses it: `cmake --install` into a fresh prefix, then a
C program (abi_check.c) compiled with `cc $(pkg-config --cflags --libs gpumon)` against that
prefix's header and library only, run against them. pkg-config's version (CMake's project version)
must be the header's, and the header's the library's."""
import os
import shlex
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("GPUMON_BUILD_DIR")
H200 = ('gpu 0 name="NVIDIA H200" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 '
        "total=150754820096 reserved=644939776 used=1GiB\n")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.skipif(not BUILD or not os.environ.get("FAKE_NVML_LIB"),
                    reason="needs GPUMON_BUILD_DIR and FAKE_NVML_LIB (ctest sets them)")
def test_installed_library_builds_and_runs_with_pkg_config(tmp_path):
    prefix = tmp_path / "prefix"
    r = run(["cmake", "--install", BUILD, "--prefix", str(prefix)])
    assert r.returncode == 0, r.stderr
    pcs = list(prefix.glob("**/pkgconfig/gpumon.pc"))
    assert len(pcs) == 1, pcs
    pc = pcs[0]
    libdir = pc.parent.parent
    assert pc.parent.name == "pkgconfig" and (libdir / "libgpumon.so.1").exists()
    assert (libdir / "libgpumon.so").resolve() == (libdir / "libgpumon.so.1").resolve()  # soname 1

    # only this prefix's gpumon.pc: PKG_CONFIG_LIBDIR replaces the system's search path
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PKG_CONFIG", "LD_LIBRARY_PATH"))}
    env["PKG_CONFIG_LIBDIR"] = str(pc.parent)
    r = run(["pkg-config", "--cflags", "--libs", "gpumon"], env=env)
    assert r.returncode == 0, r.stderr
    flags = shlex.split(r.stdout)
    assert f"-I{prefix}/include" in flags and f"-L{libdir}" in flags and "-lgpumon" in flags, flags
    version = run(["pkg-config", "--modversion", "gpumon"], env=env).stdout.strip()

    cc = shlex.split(os.environ.get("CC") or "cc")
    sanitize = ["-fsanitize=address,undefined"] if os.environ.get("GPUMON_SANITIZED", "OFF") == "ON" else []
    exe = tmp_path / "abi_check"
    r = run(cc + ["-std=c11", "-Wall", "-Wextra", "-Werror", *sanitize, os.path.join(HERE, "abi_check.c"),
                  "-o", str(exe), *flags], env=env)
    assert r.returncode == 0, r.stderr

    scn = tmp_path / "h200.scn"
    scn.write_text(H200)
    env.update(LD_LIBRARY_PATH=str(libdir), GPUMON_NVML_LIBRARY=os.environ["FAKE_NVML_LIB"],
               FAKE_NVML_SCENARIO=str(scn))
    r = run(["ldd", str(exe)], env=env)
    assert f"libgpumon.so.1 => {libdir}/libgpumon.so.1" in r.stdout, r.stdout  # the installed one
    r = run([str(exe)], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        f"header {version}, library {version}",  # CMake's version is the header's and the library's
        "record stride 240",
        "GPU 0: NVIDIA H200 GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51",
    ], r.stdout
