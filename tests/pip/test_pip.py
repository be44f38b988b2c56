# SPDX-License-Identifier: MIT
"""pip as a user runs it offline: from a clean copy of the source (the files git tracks or would
track, nothing built), `pip install --no-build-isolation .` into a fresh venv and `pip wheel
--no-build-isolation .` installed into a second one; then, from another directory, `import gpumon`,
GPUMonitor on the fake NVML, its /metrics, and the `gpumon` command; what the wheel holds, how it
is tagged and what it links; its source distribution; uninstalling; a build that lacks the wheel
package, named in one line. No build tree and no
LD_LIBRARY_PATH are seen by anything installed.

Environment (ctest sets it): FAKE_NVML_LIB the fake libnvidia-ml; GPUMON_TEST_PYTHONS (optional,
separated by ':') more CPython interpreters (>= 3.9) to install the wheel into."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB", os.path.join(ROOT, "build/tests/fake_nvml/libnvidia-ml-fake.so"))
UUID = "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51"
TOTAL = 150754820096
GIB = 1 << 30
# what the wheel may take from the system (python/CMakeLists.txt, setup.py): glibc's libraries
SYSTEM_LIBS = re.compile(r"^(ld-linux[-\w.]*|lib(c|m|dl|pthread|rt|util|resolv|nsl|gcc_s)[.]so[.][\d.]+)$")
BUNDLED = {"libgpumon.so.1", "libjansson.so.4", "libyajl.so.2", "libsqlite3.so.0", "libprotobuf-c.so.1",
           "libncursesw.so.6", "libtinfo.so.6"}


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpumon VERSION ([0-9.]+)", f.read()).group(1)


def clean_env(**extra):
    """This environment without what would point an installed gpumon at the build tree, another
    Python or pip's configuration; pip never goes to an index (--no-index everywhere)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("PIP_", "PYTHON", "GPUMON_", "FAKE_NVML_", "VIRTUAL_ENV", "CUDA_VISIBLE"))
         and k != "LD_LIBRARY_PATH"}
    e.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1")
    e.update(extra)
    return e


def sh(cmd, timeout=300, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout,
                       env=kw.pop("env", clean_env()), **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}: exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return r


def clean_copy(dest):
    """The files of the source a fresh clone would have, with this checkout's changes to them."""
    r = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, timeout=60)
    if r.returncode != 0:
        pytest.fail(f"git ls-files failed in {ROOT} (these tests copy a git checkout): {r.stderr.decode()}")
    for rel in filter(None, r.stdout.decode().split("\0")):
        src = os.path.join(ROOT, rel)
        if os.path.isfile(src) and not os.path.islink(src):  # a file deleted but not yet committed: gone
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel))
    return dest


def venv(path, python=sys.executable, system_site=False):
    sh([python, "-m", "venv"] + (["--system-site-packages"] if system_site else []) + [path])
    return path


def site_packages(env_dir):
    r = sh([env_dir / "bin/python", "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"])
    return r.stdout.strip()


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("pip")


@pytest.fixture(scope="module")
def pip_installed(work):
    """`pip install --no-build-isolation .` of a clean copy, in a venv that sees the system's
    setuptools and wheel (Debian's python3-setuptools, python3-wheel)."""
    src = clean_copy(work / "src-install")
    env_dir = venv(work / "venv-install", system_site=True)
    sh([env_dir / "bin/pip", "install", "--no-build-isolation", "--no-index", "--no-deps", "--no-cache-dir", src],
       timeout=600)
    return env_dir


@pytest.fixture(scope="module")
def wheel(work):
    """`pip wheel --no-build-isolation .` of another clean copy (nothing of the other build reused)."""
    src = clean_copy(work / "src-wheel")
    dist = work / "dist"
    sh([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps", "--no-cache-dir",
        "-w", dist, src], timeout=600)
    wheels = list(dist.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def wheel_installed(work, wheel):
    """The wheel in a plain venv: nothing from the system's Python."""
    env_dir = venv(work / "venv-wheel")
    sh([env_dir / "bin/pip", "install", "--no-index", "--no-cache-dir", wheel])
    return env_dir


# Run by the venv's Python from another directory: its own scenario (this process on the GPU), a
# GPUMonitor sample and a scrape of its /metrics, and the shared libraries it loaded.
CHECK = r"""
import json, os, sys, urllib.request
scn = sys.argv[1]
with open(scn, "w") as f:
    f.write('gpu 0 name="NVIDIA H200" uuid=%s bus=00000000:00:06.0 total=%d reserved=644939776 used=40GiB '
            'util=97 memutil=10\nproc 0 %d used=3GiB\n' % (sys.argv[2], int(sys.argv[3]), os.getpid()))
os.environ["FAKE_NVML_SCENARIO"] = scn
import gpumon
with gpumon.GPUMonitor(framework="none", logger=False, prometheus_port=0) as mon:
    s = mon.sample()
    with urllib.request.urlopen("http://%s/metrics" % mon.prometheus_address, timeout=10) as r:
        page = r.read().decode()
    libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.rsplit("/", 1)[-1]})
print(json.dumps({"file": gpumon.__file__, "version": gpumon.__version__, "info": gpumon.get_gpu_info(0),
                  "process": s.process, "device_total": s.device_total, "device_used": s.device_used,
                  "total_line": [l for l in page.splitlines() if l.startswith("gpumon_memory_total_bytes")],
                  "libs": libs}))
"""


def check_import(env_dir, tmp_path):
    """import gpumon and GPUMonitor from the venv, run from a directory that holds no gpumon."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(exist_ok=True)
    env = clean_env(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB))
    r = sh([env_dir / "bin/python", "-c", CHECK, tmp_path / "check.scn", UUID, TOTAL], cwd=elsewhere, env=env,
           timeout=60)
    out = json.loads(r.stdout.strip().splitlines()[-1])
    site = site_packages(env_dir)
    assert out["file"] == os.path.join(site, "gpumon", "__init__.py")
    assert out["version"] == version()
    assert out["info"] == [40960, 143771, 97]
    assert out["process"] == 3 * GIB and out["device_total"] == TOTAL and out["device_used"] == 40 * GIB
    assert out["total_line"] and out["total_line"][0].endswith(f" {TOTAL}"), out["total_line"]
    # libgpumon and the libraries it links come from the wheel's gpumon.libs, none from the system
    # or the build tree
    loaded = {os.path.basename(p): p for p in out["libs"]}
    libdir = os.path.join(site, "gpumon.libs")
    for name in ("libgpumon.so.1", "libjansson.so.4", "libyajl.so.2", "libprotobuf-c.so.1"):
        assert os.path.dirname(loaded.get(name, "")) == libdir, (name, out["libs"])
    assert loaded["_gpumon.abi3.so"] == os.path.join(site, "gpumon", "_gpumon.abi3.so")


def check_command(env_dir):
    """The venv's `gpumon`: the console script execs the bundled program."""
    gpumon = env_dir / "bin/gpumon"
    env = clean_env(GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB))
    scn = env_dir / "list.scn"
    scn.write_text(f'gpu 0 name="NVIDIA H200" uuid={UUID} bus=00000000:00:06.0 total={TOTAL} used=40GiB\n')
    env["FAKE_NVML_SCENARIO"] = str(scn)
    r = sh([gpumon, "list"], env=env, cwd="/", timeout=30)
    assert r.stdout == f"GPU 0: NVIDIA H200 (UUID: {UUID})\n"
    r = sh([gpumon, "--version"], cwd="/", timeout=30)
    assert r.stdout == f"gpumon {version()} (libgpumon {version()})\n"
    # the program's exit status and stderr, unchanged
    bad = subprocess.run([str(gpumon), "no-such-command"], capture_output=True, text=True, env=clean_env(),
                         timeout=30)
    direct = subprocess.run([os.path.join(site_packages(env_dir), "gpumon", "bin", "gpumon"), "no-such-command"],
                            capture_output=True, text=True, env=clean_env(), timeout=30)
    assert bad.returncode == direct.returncode != 0 and bad.stderr == direct.stderr
    # SQLite, loaded by the first recording (dlopen), is the wheel's too: a recording made and read
    rec = env_dir / "w.gpumon"
    rec.unlink(missing_ok=True)
    r = sh([gpumon, "record", "-o", rec, "--duration", "1"], env=dict(env, LD_DEBUG="libs"), cwd="/", timeout=60)
    wheel_libs = os.path.join(site_packages(env_dir), "gpumon.libs")
    inits = re.findall(r"calling init: (\S+)/libsqlite3[.]so[.]0", r.stderr)
    assert [os.path.normpath(d) for d in inits] == [wheel_libs], r.stderr[-2000:]
    r = sh([gpumon, "report", rec], env=env, cwd="/", timeout=60)
    assert "NVIDIA H200" in r.stdout
    # every library the program loads is the wheel's or glibc's (ldd: the loader's own answer)
    r = sh(["ldd", os.path.join(site_packages(env_dir), "gpumon", "bin", "gpumon")])
    libdir = os.path.join(site_packages(env_dir), "gpumon.libs")
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (\S+)", line)
        if m and not SYSTEM_LIBS.match(m.group(1)):
            assert os.path.dirname(os.path.normpath(m.group(2))) == libdir, line


def test_pip_install_imports_and_samples(pip_installed, tmp_path):
    check_import(pip_installed, tmp_path)


def test_pip_install_gives_the_gpumon_command(pip_installed):
    check_command(pip_installed)


def test_wheel_is_abi3_and_manylinux(wheel):
    m = re.fullmatch(rf"gpumon-{re.escape(version())}-cp39-abi3-manylinux_(\d+)_(\d+)_(\w+)\.whl", wheel.name)
    assert m, wheel.name
    assert m.group(3) == os.uname().machine
    with zipfile.ZipFile(wheel) as z:
        tag = z.read(f"gpumon-{version()}.dist-info/WHEEL").decode()
    assert "Root-Is-Purelib: false" in tag and f"Tag: cp39-abi3-manylinux_{m.group(1)}_{m.group(2)}" in tag


def test_wheel_holds_the_package_the_program_and_its_libraries(wheel):
    with zipfile.ZipFile(wheel) as z:
        infos = {i.filename: i for i in z.infolist()}
        entry_points = z.read(f"gpumon-{version()}.dist-info/entry_points.txt").decode()
    pkg = {n for n in infos if not n.startswith(f"gpumon-{version()}.dist-info/")}
    top = os.path.join(ROOT, "python")
    py = {os.path.relpath(os.path.join(d, f), top) for d, _, fs in os.walk(os.path.join(top, "gpumon"))
          for f in fs if f.endswith(".py")}
    assert pkg == py | {"gpumon/_gpumon.abi3.so", "gpumon/bin/gpumon"} | {f"gpumon.libs/{n}" for n in BUNDLED}
    assert (infos["gpumon/bin/gpumon"].external_attr >> 16) & 0o111, "gpumon/bin/gpumon is not executable"
    assert re.search(r"^gpumon = gpumon._cli:main$", entry_points, re.M), entry_points


def test_wheel_links_only_glibc_from_the_system(wheel, tmp_path):
    """What auditwheel checks for manylinux: each file needs only bundled libraries and glibc's,
    finds them through an $ORIGIN-relative RPATH (no absolute path: no build tree), and uses no
    glibc symbol version newer than the tag says."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path)
    tag = re.search(r"manylinux_(\d+)_(\d+)_", wheel.name)
    tag = (int(tag.group(1)), int(tag.group(2)))
    elves = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs
             if open(os.path.join(d, f), "rb").read(4) == b"\x7fELF"]
    assert len(elves) == 2 + len(BUNDLED)
    newest = (0, 0)
    for p in elves:
        out = sh(["readelf", "-d", "-V", "-W", p]).stdout
        for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out):
            assert lib in BUNDLED or SYSTEM_LIBS.match(lib), (p, lib)
        for v in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", out):
            newest = max(newest, (int(v[0]), int(v[1])))
        assert "(RUNPATH)" not in out, p
        if os.path.basename(p) in BUNDLED - {"libgpumon.so.1"}:
            continue  # the system's files, as they came
        rpath = re.search(r"\(RPATH\)\s+Library rpath: \[([^\]]*)\]", out)
        assert rpath and all(d.startswith("$ORIGIN") for d in rpath.group(1).split(":")), (p, rpath)
    assert newest <= tag and (newest == tag or tag == (2, 17)), (newest, tag)


def test_wheel_installs_into_a_plain_venv(wheel_installed, tmp_path):
    check_import(wheel_installed, tmp_path)
    check_command(wheel_installed)


def test_wheel_uninstalls_cleanly(work, wheel):
    env_dir = venv(work / "venv-uninstall")
    sh([env_dir / "bin/pip", "install", "--no-index", "--no-cache-dir", wheel])
    site = site_packages(env_dir)
    before = set(os.listdir(site))
    assert {"gpumon", "gpumon.libs"} <= before
    sh([env_dir / "bin/pip", "uninstall", "-y", "gpumon"])
    assert not [n for n in os.listdir(site) if n.startswith("gpumon")]
    assert not (env_dir / "bin/gpumon").exists()


def test_sdist_builds_the_same_wheel(work, wheel):
    """The source distribution (python3 -m build's first step) carries all the build reads."""
    src = clean_copy(work / "src-sdist")
    sh([sys.executable, "setup.py", "-q", "sdist", "-d", work / "sdist"], cwd=src)
    tarballs = list((work / "sdist").glob("gpumon-*.tar.gz"))
    assert len(tarballs) == 1, tarballs
    sh([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-index", "--no-deps", "--no-cache-dir",
        "-w", work / "dist-sdist", tarballs[0]], timeout=600)
    (from_sdist,) = (work / "dist-sdist").glob("*.whl")
    assert from_sdist.name == wheel.name
    with zipfile.ZipFile(from_sdist) as a, zipfile.ZipFile(wheel) as b:
        assert sorted(a.namelist()) == sorted(b.namelist())


def other_pythons():
    return [p for p in os.environ.get("GPUMON_TEST_PYTHONS", "").split(":") if p]


@pytest.mark.skipif(not other_pythons(), reason="GPUMON_TEST_PYTHONS names no other interpreter")
@pytest.mark.parametrize("python", other_pythons())
def test_wheel_in_another_python(python, work, wheel, tmp_path):
    """abi3: the one wheel in every CPython from 3.9 on."""
    env_dir = venv(tmp_path / "venv", python=python)
    sh([env_dir / "bin/pip", "install", "--no-index", "--no-cache-dir", wheel])
    check_import(env_dir, tmp_path)
    check_command(env_dir)


def test_a_build_without_wheel_names_it(tmp_path):
    """setuptools < 70.1 builds wheels with the wheel package's code: a plain venv of Debian's
    python3 (setuptools 66, no wheel) built with --no-build-isolation stops at pip's first step,
    in one line that names the missing package, that Python and the fix, before any compiling."""
    env_dir = venv(tmp_path / "venv-nowheel")
    r = sh([env_dir / "bin/python", "-c", "import importlib.util as u, setuptools; print(setuptools.__version__, bool(u.find_spec('wheel')))"])
    version_text, has_wheel = r.stdout.split()
    if has_wheel == "True" or tuple(int(x) for x in version_text.split(".")[:2]) >= (70, 1):
        pytest.skip(f"this Python's venv has setuptools {version_text} and wheel={has_wheel}: nothing is missing")
    src = tmp_path / "src"  # what setup.py reads before it builds anything
    for f in ("setup.py", "pyproject.toml", "CMakeLists.txt", "README.md"):
        os.makedirs(src, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), src / f)
    r = subprocess.run([str(env_dir / "bin/pip"), "install", "--no-build-isolation", "--no-index", "--no-deps",
                        "--no-cache-dir", str(src)], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert r.returncode != 0
    said = [l.strip() for l in (r.stdout + r.stderr).splitlines() if "gpumon's build" in l]
    assert len(said) == 1, r.stdout + r.stderr
    exe = re.match(r"gpumon's build: setuptools \S+ of (\S+) ", said[0]).group(1)  # bin/python or bin/python3
    assert os.path.dirname(exe) == str(env_dir / "bin"), said
    assert said[0] == (f"gpumon's build: setuptools {version_text} of {exe} needs the 'wheel' package to build a "
                       f"wheel (setuptools >= 70.1 does not), and that Python has none: {exe} -m pip install wheel "
                       "(Debian's python3: apt-get install python3-wheel), then pip install --no-build-isolation "
                       "--no-index .")
    assert "cmake" not in r.stdout.lower()
