# SPDX-License-Identifier: MIT
"""The `gpumon` command of a pip-installed gpumon: the console script (pyproject.toml) execs the C
program the wheel carries in gpumon/bin, so that the command is the program itself (its exit
status, signals and terminal), not a Python wrapper around it."""
import os
import sys


def main():
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gpumon")
    try:
        os.execv(exe, ["gpumon"] + sys.argv[1:])
    except FileNotFoundError:
        sys.stderr.write(f"gpumon: this gpumon Python package has no gpumon program ({exe} is missing): "
                         "install it with pip (`pip install .` in gpumon's source), or run the gpumon that "
                         "`make install` puts in PREFIX/bin\n")
    except OSError as e:
        sys.stderr.write(f"gpumon: cannot run {exe}: {e.strerror}\n")
    return 127


if __name__ == "__main__":
    sys.exit(main())
