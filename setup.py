# SPDX-License-Identifier: MIT
"""Builds the Python package gpumon for pip (pyproject.toml): CMake builds the extension, libgpumon
and the gpumon program (the same build as `make`, with -DGPUMON_WHEEL=ON) and installs them into
the wheel's tree with the libraries they link (python/CMakeLists.txt); this file only drives it and
names the wheel: cp39-abi3 (Python's limited API of 3.9), manylinux_2_X for the newest glibc
symbol version any of its files needs.

GPUMON_CMAKE_ARGS (environment): more arguments for CMake's configure step, e.g.
-DCMAKE_PREFIX_PATH=... or -DGPUMON_PYTHON_INCLUDE_DIR=... (tests/gpu/deps.sh)."""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools >= 70.1 has its own; before, the wheel package's
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:
        bdist_wheel = None

ROOT = os.path.dirname(os.path.abspath(__file__))
LIMITED_API = "cp39"  # Py_LIMITED_API=0x03090000 in python/CMakeLists.txt
# What a manylinux wheel may take from the system (PEP 600, auditwheel's policy): glibc's
# libraries and the compiler's runtime. Everything else the wheel's files need is in gpumon.libs.
SYSTEM_LIBS = re.compile(r"^(ld-linux[-\w.]*|lib(c|m|dl|pthread|rt|util|resolv|nsl|gcc_s)[.]so[.][\d.]+)$")


def version():
    """gpumon's version, from CMakeLists.txt's project() (the library and the program have it too)."""
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(gpumon VERSION ([0-9.]+)", f.read())
    if not m:
        sys.exit("setup.py: no `project(gpumon VERSION x.y.z)` in CMakeLists.txt")
    return m.group(1)


def run(cmd):
    print("$ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    subprocess.run(cmd, check=True)


class CMakeBuild(build_ext):
    """The extension (and with it the program and the libraries) from CMake, not from a list of
    sources here: configure, build the gpumon and gpumon_python targets, install the component
    `wheel` into the build tree of the wheel (or, for `pip install -e`, next to python/gpumon)."""

    def run(self):
        cmake = shutil.which("cmake")
        if not cmake:
            sys.exit("gpumon's build needs CMake >= 3.18 (Debian: apt-get install cmake) and the "
                     "libraries `make deps` installs (README.md)")
        tree = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        stage = os.path.join(ROOT, "python") if self.inplace else os.path.abspath(self.build_lib)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 2)
        run([cmake, "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release", "-DGPUMON_TESTS=OFF",
             "-DGPUMON_WHEEL=ON", "-DPython3_EXECUTABLE=" + sys.executable]
            + shlex.split(os.environ.get("GPUMON_CMAKE_ARGS", "")))
        run([cmake, "--build", tree, "--target", "gpumon", "gpumon_python", "--parallel", jobs])
        run([cmake, "--install", tree, "--prefix", stage, "--component", "wheel", "--strip"])


def elf_files(top):
    for d, _, names in os.walk(top):
        for n in names:
            p = os.path.join(d, n)
            if not os.path.islink(p):
                with open(p, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        yield p


if bdist_wheel is None:
    # setuptools < 70.1 builds wheels with the wheel package's bdist_wheel. pip's build isolation
    # fetches it (pyproject.toml asks for it); with --no-build-isolation it must be there already,
    # and without it pip would go on to fail later with words that blame something else.
    if not {"sdist", "egg_info"} & set(sys.argv):  # pip's metadata step needs it too
        import setuptools
        sys.exit(f"gpumon's build: setuptools {setuptools.__version__} of {sys.executable} needs the 'wheel' "
                 f"package to build a wheel (setuptools >= 70.1 does not), and that Python has none: "
                 f"{sys.executable} -m pip install wheel (Debian's python3: apt-get install python3-wheel), "
                 f"then pip install --no-build-isolation --no-index .")
    bdist_wheel = object


class Wheel(bdist_wheel):
    """Tags the wheel cp39-abi3 and, when every library its files need is bundled or glibc's,
    manylinux_2_X with X the newest GLIBC_2.X symbol version they use (readelf, binutils)."""

    def finalize_options(self):
        if not self.py_limited_api:
            self.py_limited_api = LIMITED_API
        super().finalize_options()

    def get_tag(self):
        impl, abi, plat = super().get_tag()
        if not plat.startswith("linux_") or not os.path.isdir(self.bdist_dir):
            return impl, abi, plat
        files = list(elf_files(self.bdist_dir))
        bundled = {os.path.basename(p) for p in files}
        newest = (0, 0)
        try:
            for p in files:
                dyn = subprocess.run(["readelf", "-d", "-V", "-W", p], capture_output=True, text=True,
                                     check=True).stdout
                for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn):
                    if lib not in bundled and not SYSTEM_LIBS.match(lib):
                        print(f"warning: {os.path.relpath(p, self.bdist_dir)} needs {lib}, which is "
                              f"neither bundled nor glibc's: the wheel is tagged {plat}, not manylinux")
                        return impl, abi, plat
                for v in re.findall(r"Name: GLIBC_(\d+)\.(\d+)", dyn):
                    newest = max(newest, (int(v[0]), int(v[1])))
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"warning: readelf could not read the wheel's files ({e}): the wheel is tagged {plat}")
            return impl, abi, plat
        if newest < (2, 17):  # manylinux2014, the oldest tag pip still knows
            newest = (2, 17)
        return impl, abi, f"manylinux_{newest[0]}_{newest[1]}_{plat[len('linux_'):]}"


setup(
    version=version(),
    # here rather than in pyproject.toml, where setuptools 66 calls [tool.setuptools] beta
    packages=find_packages("python", include=["gpumon", "gpumon.*"]),
    package_dir={"": "python"},
    include_package_data=False,  # the package's .py files only, not the extension's C sources
    # one extension, for setuptools to know the wheel is not pure Python; CMake builds it
    ext_modules=[Extension("gpumon._gpumon", sources=[], py_limited_api=True)],
    cmdclass={"build_ext": CMakeBuild, **({"bdist_wheel": Wheel} if bdist_wheel is not object else {})},
)
