# SPDX-License-Identifier: MIT
"""What the extension offers about out-of-memory, all of it libgpumon's reading: whether a text says a
framework ran out of GPU memory and its figures, the figures of the moment encoded as the library
encodes them for a recording, and torch's allocator snapshot condensed (the captures of
tests/fixtures, taken on an H200)."""
import json
import os

import pytest

from conftest import GIB, ROOT

from gpumon import _gpumon

OOM = os.path.join(ROOT, "tests", "fixtures", "oom")
SNAP = os.path.join(ROOT, "tests", "fixtures", "snapshot")


def fixture(d, name):
    with open(os.path.join(d, name)) as f:
        return f.read()


@pytest.mark.parametrize("name,framework", [("torch-2.11-fragmentation.txt", "PyTorch"), ("paddle-2.6.txt", "Paddle"),
                                            ("jax-0.11-prealloc.txt", "JAX/XLA")])
def test_match_names_the_framework(name, framework):
    text = fixture(OOM, name)
    assert _gpumon.oom_message_match(text) == framework
    assert _gpumon.oom_message_match(text.encode()) == framework
    # a traceback: the message is on a later line
    assert _gpumon.oom_message_match("Traceback (most recent call last):\n  File \"x\", line 1\n" + text) == framework


def test_match_and_parse_say_nothing_of_other_text():
    assert _gpumon.oom_message_match("KeyError: 'no'\nall fine") is None
    assert _gpumon.oom_message_parse("KeyError: 'no'") is None
    with pytest.raises(TypeError):
        _gpumon.oom_message_match(3)


def test_parse_gives_the_messages_figures():
    f = _gpumon.oom_message_parse(fixture(OOM, "paddle-2.6.txt"))
    assert f["framework"] == "paddle" and f["device"] == 0 and f["request"] == 128 << 20
    f = _gpumon.oom_message_parse(fixture(OOM, "torch-2.11-cotenant.txt"))
    assert f["framework"] == "torch" and f["request"] == GIB and f["others"] and f["others"][0][0] == 870


def test_figures_encoded_as_the_library_reads_them():
    text = _gpumon.oom_figures(framework="torch", pid=42, device=1, request=GIB, free=5, capacity=None, cap=7 * GIB,
                               allocated=3, reserved=4, peak=6, largest_free=2, process=9)
    f = json.loads(text)
    assert f["framework"] == "torch" and f["pid"] == 42 and f["device"] == 1
    assert (f["request_bytes"], f["free_bytes"], f["cap_bytes"], f["allocated_bytes"], f["reserved_bytes"],
            f["peak_bytes"], f["largest_free_bytes"], f["process_bytes"]) == (GIB, 5, 7 * GIB, 3, 4, 6, 2, 9)
    assert "capacity_bytes" not in f
    assert not [k for k in json.loads(_gpumon.oom_figures()) if k.endswith("_bytes")]
    with pytest.raises(TypeError, match="unexpected keyword argument 'requested'"):
        _gpumon.oom_figures(requested=1)
    with pytest.raises(TypeError):
        _gpumon.oom_figures(1)
    with pytest.raises(ValueError):
        _gpumon.oom_figures(request=-1)
    with pytest.raises(ValueError):
        _gpumon.oom_figures(device=70000)


def test_snapshot_condensed_by_the_library():
    text = fixture(SNAP, "torch-2.11-history.json")
    s = json.loads(_gpumon.snapshot_condense(text, 0, 2 * GIB, 4242))
    assert s["framework"] == "torch" and s["pid"] == 4242 and s["device"] == 0 and s["request_bytes"] == 2 * GIB
    assert s["stacks"] is True and s["sites"][0]["file"].endswith("oom_capture.py") and s["segments"] == 20
    whole = json.loads(_gpumon.snapshot_condense(text.encode()))  # bytes too; no request, every device
    assert "request_bytes" not in whole and whole["sites"] == s["sites"] and whole["segments"] == 20


def test_snapshot_refused_with_the_librarys_message():
    with pytest.raises(ValueError, match='no "segments" array'):
        _gpumon.snapshot_condense("{}")
    with pytest.raises(ValueError):
        _gpumon.snapshot_condense("not json")
    with pytest.raises(ValueError, match="device must be -1"):
        _gpumon.snapshot_condense(fixture(SNAP, "torch-2.11-history.json"), -2)
    with pytest.raises(TypeError):
        _gpumon.snapshot_condense(None)
