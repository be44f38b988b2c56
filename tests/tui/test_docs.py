# SPDX-License-Identifier: MIT
"""The documentation of `gpumon watch`: the man page section and the README's screen captures."""
import os
import re
import subprocess

from conftest import SOURCE_DIR


def test_man_page_describes_watch():
    man = os.path.join(SOURCE_DIR, "man/gpumon.1")
    r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", man], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    text = subprocess.run(["groff", "-man", "-Tutf8", man], capture_output=True, text=True,
                          env={"PATH": os.environ["PATH"], "GROFF_NO_SGR": "1"}).stdout
    text = " ".join(re.sub(r".\x08", "", text).replace("\u2010\n", "").split())
    for word in ["gpumon watch", "WATCH", "--replay", "--speed", "--interval", "NO_COLOR", "terminal too small",
                 "h200_train_leak.gpumon", "PgUp/PgDn", "LEAK/MIN", "--batch", "--speed 0"]:
        assert word in text, word


def test_readme_shows_each_screen():
    readme = open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8").read()
    section = readme[readme.index("## The live view: `gpumon watch`"):]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    screens = {"main": "sort: memory", "help": "gpumon watch: GPU memory, live",
               "filter": "Filter by user (any part", "replay": "RECORDING of",
               "batch": "gpumon watch -b --replay"}
    for name, mark in screens.items():
        assert any(mark in b and "gpumon watch" in b for b in blocks), name
