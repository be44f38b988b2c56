# SPDX-License-Identifier: MIT
"""Shell completion (completion/): bash's registration and round trips through its completion
function (commands, options, query fields, GPU ids, values, recording files), zsh and fish checked
by their own shells, and where `cmake --install` puts the scripts."""
import os
import shlex
import shutil
import subprocess
import textwrap

import pytest

from conftest import FAKE_NVML_LIB, GPUMON_BIN

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "../../completion"))
TWO = """\
gpu 0 name="NVIDIA H200" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 total=140GiB
gpu 1 name="NVIDIA H200" uuid=GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af total=140GiB
"""


@pytest.fixture
def env(tmp_path):
    """gpumon on PATH (as a user has it) against two fake GPUs."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(os.path.abspath(GPUMON_BIN), bindir / "gpumon")
    scn = tmp_path / "two.scn"
    scn.write_text(TWO)
    e = {k: v for k, v in os.environ.items() if not k.startswith(("GPUMON_", "FAKE_NVML_"))}
    e.update(PATH=f"{bindir}:{e.get('PATH', '/usr/bin:/bin')}", LC_ALL="C",
             GPUMON_NVML_LIBRARY=os.path.abspath(FAKE_NVML_LIB), FAKE_NVML_SCENARIO=str(scn))
    return e


def bash_complete(env, line, cwd=None):
    """What bash's completion function offers for the command line (the cursor at its end), as
    readline calls it: COMP_WORDS split as bash splits them (at blanks and '=')."""
    script = textwrap.dedent(f"""\
        source {shlex.quote(SRC)}/gpumon.bash
        line={shlex.quote(line)}
        COMP_LINE=$line COMP_POINT=${{#line}}
        words=$(printf '%s' "$line" | sed 's/=/ = /g')
        read -ra COMP_WORDS <<< "$words"
        [[ $line == *' ' || $line == *= ]] && COMP_WORDS+=("")
        COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))
        _gpumon
        printf '%s\\n' "${{COMPREPLY[@]}}"
        """)
    r = subprocess.run(["bash", "-c", script], env=env, cwd=cwd, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    return [w for w in r.stdout.splitlines() if w]


def test_bash_registers_the_function(env):
    r = subprocess.run(["bash", "-c", f"source {shlex.quote(SRC)}/gpumon.bash && complete -p gpumon"],
                       env=env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "complete -F _gpumon gpumon"


def test_bash_commands(env):
    assert bash_complete(env, "gpumon ") == ["show", "list", "query", "record", "run", "export", "watch",
                                             "report", "serve", "fit"]
    assert bash_complete(env, "gpumon re") == ["record", "report"]


def test_bash_options_come_from_each_commands_help(env):
    assert bash_complete(env, "gpumon show --so") == ["--sort"]
    assert bash_complete(env, "gpumon --no-p") == ["--no-processes"]  # show's, without a command
    assert bash_complete(env, "gpumon query --query-c") == ["--query-compute-apps"]
    assert "--replay" in bash_complete(env, "gpumon watch --")
    assert "--sort" not in bash_complete(env, "gpumon watch --")
    # an option's value is not taken for a command
    assert bash_complete(env, "gpumon -i 0 --so") == ["--sort"]


def test_bash_query_fields(env):
    assert bash_complete(env, "gpumon query --query-gpu=memory.u") == ["memory.used"]
    assert bash_complete(env, "gpumon query --query-gpu=index,memory.t") == ["index,memory.total"]
    assert "used_memory" in bash_complete(env, "gpumon --query-compute-apps=")
    # aliases nvidia-smi users type
    assert bash_complete(env, "gpumon query --query-gpu=gpu_n") == ["gpu_name"]
    assert bash_complete(env, "gpumon query --format=csv,nou") == ["csv,nounits"]


def test_bash_gpu_ids_and_values(env):
    assert bash_complete(env, "gpumon list -i ") == ["0", "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51", "1",
                                                     "GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af"]
    assert bash_complete(env, "gpumon show -i 0,GPU-8") == ["0,GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af"]
    assert bash_complete(env, "gpumon show --sort ") == ["memory", "pid", "user", "gpu"]
    assert bash_complete(env, "gpumon --color=n") == ["never"]


def test_bash_recording_files(env, tmp_path):
    d = tmp_path / "work"
    d.mkdir()
    for f in ["a.gpumon", "b.csv", "notes.md"]:
        (d / f).write_text("")
    assert bash_complete(env, "gpumon export ", cwd=d) == ["a.gpumon"]
    assert bash_complete(env, "gpumon watch --replay ", cwd=d) == ["a.gpumon"]
    assert sorted(bash_complete(env, "gpumon report ", cwd=d)) == ["a.gpumon", "b.csv"]


def test_zsh_script(env):
    if not shutil.which("zsh"):
        pytest.skip("zsh is not installed (the Debian package zsh; make deps-test installs it)")
    r = subprocess.run(["zsh", "-n", f"{SRC}/_gpumon"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    # compinit finds it on $fpath by its #compdef line
    r = subprocess.run(["zsh", "-f", "-c", f"fpath=({shlex.quote(SRC)} $fpath); autoload -U compinit; "
                        "compinit -u -D; print -r -- ${_comps[gpumon]}"], env=env, capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "_gpumon"


def test_fish_script(env):
    if not shutil.which("fish"):
        pytest.skip("fish is not installed (the Debian package fish; make deps-test installs it)")
    r = subprocess.run(["fish", "-n", f"{SRC}/gpumon.fish"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr

    def complete(line):
        r = subprocess.run(["fish", "--no-config", "-c", f"source {SRC}/gpumon.fish; complete -C {shlex.quote(line)}"],
                           env=env, capture_output=True, text=True, timeout=20)
        assert r.returncode == 0, r.stderr
        return [w.split("\t")[0] for w in r.stdout.splitlines()]

    assert complete("gpumon re") == ["record", "report"]
    assert complete("gpumon show --so") == ["--sort"]
    assert complete("gpumon query --query-gpu=index,memory.u") == ["--query-gpu=index,memory.used"]


def test_installed_where_the_shells_look(tmp_path):
    build = os.path.dirname(os.path.dirname(os.path.abspath(GPUMON_BIN)))
    if not os.path.exists(os.path.join(build, "cmake_install.cmake")):
        pytest.skip(f"{build} is not a CMake build directory")
    r = subprocess.run(["cmake", "--install", build, "--prefix", str(tmp_path), "--component", "completion"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for path, src in [("share/bash-completion/completions/gpumon", "gpumon.bash"),
                      ("share/zsh/vendor-completions/_gpumon", "_gpumon"),
                      ("share/fish/vendor_completions.d/gpumon.fish", "gpumon.fish")]:
        assert (tmp_path / path).read_text() == open(os.path.join(SRC, src)).read()
