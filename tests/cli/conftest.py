# SPDX-License-Identifier: MIT
"""Fixtures for the CLI tests: run the built `gpumon` program against the fake NVML.

Environment (set by `make test` / ctest):
  GPUMON_BIN        path of the built gpumon program
  FAKE_NVML_LIB     the fake libnvidia-ml exporting every symbol
  FAKE_NVML_V1_LIB  the fake built to export only the oldest (v1) symbols
  GPUMON_TEST_WRAPPER  a command line every gpumon is started under (the cli/valgrind entry of
                    ctest: valgrind with --error-exitcode=86), for the tests marked `valgrind`
"""
import os
import shlex
import shutil
import subprocess
import textwrap

import pytest

GPUMON_BIN = os.environ.get("GPUMON_BIN", os.path.join(os.path.dirname(__file__), "../../build/cli/gpumon"))
FAKE_NVML_LIB = os.environ.get("FAKE_NVML_LIB", os.path.join(os.path.dirname(__file__), "../../build/tests/fake_nvml/libnvidia-ml-fake.so"))
FAKE_NVML_V1_LIB = os.environ.get("FAKE_NVML_V1_LIB", os.path.join(os.path.dirname(__file__), "../../build/tests/fake_nvml/libnvidia-ml-fake-v1.so"))
WRAPPER = shlex.split(os.environ.get("GPUMON_TEST_WRAPPER", ""))
GPUMON = WRAPPER + [os.path.abspath(GPUMON_BIN)]  # the command that starts gpumon: argv[0..]
WRAPPER_ERROR = 86  # the status the valgrind entry gives valgrind for an error it found


def pytest_configure(config):
    config.addinivalue_line("markers", "valgrind: also run with gpumon under valgrind (the cli/valgrind entry "
                            "of ctest); a test that takes a few seconds")
    if WRAPPER and not shutil.which(WRAPPER[0]):
        raise pytest.UsageError(f"GPUMON_TEST_WRAPPER: {WRAPPER[0]} not found (valgrind: install the Debian "
                                "package valgrind, as make deps-test does)")


class Runner:
    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.count = 0

    def __call__(self, args, scenario=None, v1=False, env=None, timeout=30, library=None):
        """Runs gpumon ARGS with the fake NVML driven by the scenario text (dedented)."""
        e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
        e["LC_ALL"] = "C"
        if library is not None:
            e["GPUMON_NVML_LIBRARY"] = library
        else:
            e["GPUMON_NVML_LIBRARY"] = os.path.abspath(FAKE_NVML_V1_LIB if v1 else FAKE_NVML_LIB)
        if scenario is not None:
            self.count += 1
            path = self.tmp_path / f"scenario{self.count}.scn"
            path.write_text(textwrap.dedent(scenario))
            e["FAKE_NVML_SCENARIO"] = str(path)
        if env:
            e.update(env)
        r = subprocess.run(GPUMON + list(args), env=e, capture_output=True, text=True, timeout=timeout)
        if WRAPPER and r.returncode == WRAPPER_ERROR:
            pytest.fail(f"{WRAPPER[0]} found errors in gpumon {' '.join(args)}:\n{r.stderr}")
        return r


@pytest.fixture
def gpumon(tmp_path):
    return Runner(tmp_path)


def self_signed(directory, name, cn="localhost"):
    """A self-signed P-256 certificate and its unencrypted key, DIRECTORY/NAME.pem and NAME.key, made
    with the openssl command (the caller skips where there is none); returns their paths."""
    cert, key = os.path.join(directory, name + ".pem"), os.path.join(directory, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "1", "-subj", "/CN=" + cn, "-keyout", key, "-out", cert], check=True, capture_output=True)
    return cert, key


# One H200 as the reference machine shows it (../shared/REFERENCE.md), idle.
H200 = """\
gpu 0 name="NVIDIA H200" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 total=150754820096 reserved=644939776 used=0 util=0 memutil=0 temp=41 power=127790 energy=123456789 sm=1980 mem=3201
"""
