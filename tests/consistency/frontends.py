# SPDX-License-Identifier: MIT
"""What each front end says about a run, read from its own output, so that tests can hold them
side by side: `gpumon run`'s summary (text), `gpumon report --json`, `gpumon watch --batch
--replay` (text), `gpumon serve --replay` (a Prometheus scrape) and the Python package's
gpumon.report(). Used by tests/consistency (fake driver) and tests/gpu/model_check.py (H200)."""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "PiB": 1 << 50}


def bytes_of(text):
    """'4.00 MiB' -> bytes (the CLI prints three significant digits)."""
    m = re.fullmatch(r"([\d.]+) (B|KiB|MiB|GiB|TiB|PiB)", text.strip())
    return float(m.group(1)) * UNITS[m.group(2)] if m else None


def duration_of(text):
    """'4 min 37 s', '45 s', '2 h 05 min', '3 days' -> seconds (to the second printed)."""
    total, found = 0.0, False
    for n, unit in re.findall(r"(\d+) (days|h|min|s)\b", text):
        total += int(n) * {"days": 86400, "h": 3600, "min": 60, "s": 1}[unit]
        found = True
    return total if found else None


def series_words(series):
    """The words the library uses for a verdict's series (gpumon_words_series): what a summary line names."""
    kind = series.get("kind")
    if kind == "framework":
        inner = ", ".join(x for x in [series.get("framework") or "",
                                       f"pid {series['pid']}" if series.get("pid") is not None else ""] if x)
        return "the framework's allocated memory" + (f" ({inner}" if inner else "")
    if kind == "job":
        return f"the job's processes on GPU {series['dev']} (NVML)"
    if kind == "process":
        return f"pid {series['pid']} on GPU {series['dev']} (NVML)"
    if kind == "device":
        return f"GPU {series['dev']}'s used memory (NVML)"
    return None


# ---- gpumon run ----------------------------------------------------------------------------------

def run_summary_facts(stderr):
    """The run's verdict as `gpumon run`'s summary words it (its first `leak:` line, unwrapped), and
    the job's peak with the process whose rise made it."""
    lines = stderr.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("gpumon run summary"))
    body = lines[start:]
    facts = {"verdict": None}
    for i, l in enumerate(body):
        if l.startswith("  leak: "):
            text = l[len("  leak: "):]
            for more in body[i + 1:]:
                if not more.startswith("    ") or more.startswith("    job peak"):
                    break
                text += " " + more.strip()
            facts["text"] = text
            if text.startswith("LEAK on "):
                facts["verdict"] = "leak"
                facts["series_words"] = text[len("LEAK on "):text.index(": +")]
                m = re.search(r": \+([\d.]+ \w+) a (step|second)", text)
                facts["rate"] = (bytes_of(m.group(1)), m.group(2))
                m = re.search(r"out of memory in about (\d+) more steps", text)
                facts["steps_to_oom"] = int(m.group(1)) if m else None
                m = re.search(r"out of memory in about (?:\d+ more steps \()?([\d]+ (?:days|h|min|s)(?: \d+ (?:min|s))?)",
                              text)
                facts["seconds_to_oom"] = duration_of(m.group(1)) if m else None
            elif text.startswith("none: "):
                facts["verdict"] = "none"
                facts["series_words"] = text[len("none: "):text.index(" does not keep rising")]
            elif text.startswith("not enough data to tell"):
                facts["verdict"] = "insufficient_data"
                m = re.search(r"points of (.*)\)$", text)
                facts["series_words"] = m.group(1) if m else None
            break
    for i, l in enumerate(body):
        m = re.match(r"    job peak ([\d.]+ \w+) at ([\d.]+) s", l)
        if m and "peak" not in facts:
            facts["peak"] = (bytes_of(m.group(1)), float(m.group(2)))
            nxt = body[i + 1] if i + 1 < len(body) else ""
            o = re.match(r"\s+made by the rise of pid (\d+)", nxt)
            facts["peak_owner"] = int(o.group(1)) if o else None
    facts["causes"] = None
    facts["placed"] = {}
    facts["sites"] = []
    for i, l in enumerate(body):
        text = unwrap(body, i)
        m = re.match(r"  diagnosis: ([^:]+): ", text)
        if m:
            facts["causes"] = [c.strip() for c in m.group(1).split(",")]
        m = re.match(r"  memory of pid (\d+) \(.*?\) at [\d.]+ s(?:, step \d+)?: NVML ([\d.]+ \w+) = the allocator's "
                     r"([\d.]+ \w+) \(([\d.]+ \w+) allocated \+ [\d.]+ \w+ cached\)(?: \+ ([\d.]+ \w+) outside it)?", text)
        if m:
            facts["placed"][int(m.group(1))] = {"nvml": bytes_of(m.group(2)), "reserved": bytes_of(m.group(3)),
                                                 "allocated": bytes_of(m.group(4)),
                                                 "outside": bytes_of(m.group(5)) if m.group(5) else None}
        m = re.match(r"      (\S+):(\d+) \(.*\)  ([\d.]+ \w+) in \d+ blocks?", l)
        if m:
            facts["sites"].append((m.group(1), int(m.group(2)), bytes_of(m.group(3))))
    return facts


def unwrap(body, i):
    """Line i of the summary with the lines that continue it (indented deeper) joined."""
    text = body[i]
    indent = len(text) - len(text.lstrip(" "))
    for more in body[i + 1:]:
        if len(more) - len(more.lstrip(" ")) <= indent + 1 or not more.strip():
            break
        text += " " + more.strip()
    return text


def near(a, b, rel=0.01):
    """Within a printed figure's precision: three significant digits (1 %)."""
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(b), 1)


def check_oom_and_placed(facts, doc):
    """The summary's causes are the document's, in order; every byte placed as the document places it;
    the top allocation sites as the snapshot has them."""
    oom = doc.get("oom")
    if oom is None:
        assert facts["causes"] is None, facts["causes"]
    else:
        assert facts["causes"] == (oom["causes"] or [oom["cause"]]), (facts["causes"], oom["causes"])
        sites = ((oom.get("snapshot") or {}).get("sites") or [])[:5]
        assert len(facts["sites"]) == len(sites), (facts["sites"], sites)
        for (file, line, b), s in zip(facts["sites"], sites):
            assert file == s["file"] and line == s["line"] and near(b, s["bytes"]), (facts["sites"], sites)
    want = {f["pid"]: f["placed"] for f in doc.get("frameworks") or [] if f.get("placed")}
    assert set(facts["placed"]) == set(want), (facts["placed"], want)
    for pid, p in want.items():
        got = facts["placed"][pid]
        assert near(got["nvml"], p["nvml_bytes"]) and near(got["reserved"], p["reserved_bytes"]), (got, p)
        assert (got["outside"] is None) == (p["outside_bytes"] is None), (got, p)
        if p["outside_bytes"] is not None:
            assert near(got["outside"], p["outside_bytes"]), (got, p)


def check_run_summary(facts, doc):
    """The summary says what the document says: verdict, series, rate within the printed precision
    (1 %), time to out-of-memory, the job's peak and its owner, the out-of-memory's causes and sites,
    every byte placed."""
    check_oom_and_placed(facts, doc)
    leak = doc["leak"]
    assert facts["verdict"] == leak["verdict"], (facts, leak)
    words = series_words(leak["series"])
    assert facts["series_words"].startswith(words), (facts["series_words"], words)
    if leak["verdict"] == "leak":
        amount, per = facts["rate"]
        want = leak["rate_bytes_per_step"] if per == "step" else leak["rate_bytes_per_second"]
        assert abs(amount - want) <= 0.01 * want, (amount, want)
        if leak["steps_to_oom"] is not None:
            assert facts["steps_to_oom"] is not None and abs(facts["steps_to_oom"] - leak["steps_to_oom"]) <= \
                max(1, 0.01 * leak["steps_to_oom"]), (facts, leak)
        if leak["seconds_to_oom"] is not None:
            assert facts["seconds_to_oom"] is not None and abs(facts["seconds_to_oom"] - leak["seconds_to_oom"]) <= \
                max(1.0, 0.01 * leak["seconds_to_oom"]) + 60 * (leak["seconds_to_oom"] >= 3600), (facts, leak)
    peak = doc["peak"]
    if peak and peak["what"] == "job" and "peak" in facts:
        assert abs(facts["peak"][0] - peak["bytes"]) <= 0.01 * peak["bytes"], (facts["peak"], peak)
        if peak["owner"]:
            assert facts["peak_owner"] == peak["owner"]["pid"], (facts, peak["owner"])


# ---- gpumon watch --batch --replay ---------------------------------------------------------------

def watch_marks(gpumon_bin, path, env=None):
    """{pid: (marked, rate per minute or None, full in minutes or None)} from the last snapshot of a
    replay in which each process was shown, as `gpumon watch -b` prints it."""
    r = subprocess.run([gpumon_bin, "watch", "-b", "--replay", str(path), "--speed", "20", "--interval", "50"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    marks = {"oom": None, "placed": {}}
    for line in r.stdout.splitlines():
        if line.startswith("gpumon watch "):  # a new snapshot: the placed figures are the last one's
            marks["placed"] = {}
        o = re.match(r"out of memory at ([\d.]+) s(?: on GPU (\d+))?: ([^;]+)(?:; most held at (\S+):(\d+) \(.*\), "
                     r"([\d.]+ \w+))?$", line)
        if o:
            marks["oom"] = {"time": float(o.group(1)), "dev": int(o.group(2)) if o.group(2) else None,
                            "causes": [c.strip() for c in o.group(3).split(",")],
                            "site": (o.group(4), int(o.group(5)), bytes_of(o.group(6))) if o.group(4) else None}
            continue
        p = re.match(r"pid (\d+) on GPU \d+: NVML ([\d.]+ \w+) = allocator ([\d.]+ \w+) \(([\d.]+ \w+) allocated \+ "
                     r"[\d.]+ \w+ cached\) \+ outside (\S+(?: \w+)?)$", line)
        if p:
            marks["placed"][int(p.group(1))] = {"nvml": bytes_of(p.group(2)), "reserved": bytes_of(p.group(3)),
                                                 "outside": None if p.group(5) == "n/a" else bytes_of(p.group(5))}
            continue
        m = re.match(r"([! ])\s+(\d+)\s+(\d+)\s", line)
        if m and not line.startswith("  GPU"):
            marks.setdefault(int(m.group(3)), [False, None, None])[0] = m.group(1) == "!"
        d = re.match(r"pid (\d+) on GPU \d+: LEAK suspected, \+([\d.]+ \w+)/min(?:, full in ~([\d.]+) min)?", line)
        if d:
            e = marks.setdefault(int(d.group(1)), [True, None, None])
            e[1] = bytes_of(d.group(2))
            e[2] = float(d.group(3)) if d.group(3) else None
    return {pid: (tuple(v) if isinstance(pid, int) else v) for pid, v in marks.items()}


def check_watch(marks, doc):
    """watch marks a process exactly when the model's verdict on that process alerts, with its rate; its
    out-of-memory line has the document's causes and top site; every byte placed as the document
    places it."""
    oom, w = doc.get("oom"), marks.get("oom")
    assert (oom is None) == (w is None), (oom and oom["causes"], w)
    if oom:
        assert w["causes"] == (oom["causes"] or [oom["cause"]]) and abs(w["time"] - oom["time"]) <= 0.051, (w, oom)
        sites = (oom.get("snapshot") or {}).get("sites") or []
        assert (w["site"] is None) == (not sites), (w, sites)
        if sites:
            assert w["site"][:2] == (sites[0]["file"], sites[0]["line"]) and near(w["site"][2], sites[0]["bytes"])
    want = {f["pid"]: f["placed"] for f in doc.get("frameworks") or [] if f.get("placed")}
    for pid, got in marks.get("placed", {}).items():
        p = want.get(pid)
        assert p and near(got["nvml"], p["nvml_bytes"]) and near(got["reserved"], p["reserved_bytes"]), (got, p)
        assert (got["outside"] is None) == (p["outside_bytes"] is None), (got, p)
    for s in doc["series"]:
        if s["series"]["kind"] != "process" or s["series"]["pid"] not in marks:
            continue
        marked, per_min, _ = marks[s["series"]["pid"]]
        assert marked == bool(s["alert"]), (s, marks)
        if marked and s["verdict"] == "leak":
            want = s["rate_bytes_per_second"] * 60
            assert per_min is not None and abs(per_min - want) <= 0.01 * want, (per_min, want)


# ---- gpumon serve --replay ---------------------------------------------------------------------------

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def serve_gauges(gpumon_bin, path, env=None):
    """The run's verdict gauges of one scrape of `gpumon serve --replay`."""
    port = free_port()
    # --processes: the verdict's pid label comes with the per-pid series
    p = subprocess.Popen([gpumon_bin, "serve", "--replay", str(path), "--listen", f"127.0.0.1:{port}", "--processes", "all"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        body = None
        for _ in range(200):
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                break
            except OSError:
                if p.poll() is not None:
                    raise AssertionError(p.stderr.read())
                time.sleep(0.05)
        assert body is not None, "no scrape"
    finally:
        p.terminate()
        p.wait(timeout=10)
    g = {"outside": {}}
    for line in body.splitlines():
        m = re.match(r"(gpumon_leak_\w+)\{([^}]*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
            g[m.group(1)] = (labels, float(m.group(3)))
        m = re.match(r"gpumon_framework_outside_bytes\{([^}]*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            g["outside"][int(labels["pid"])] = float(m.group(2))
    return g


def check_serve(g, doc):
    # what each framework source's process held outside its allocator: the document's figure
    want = {f["pid"]: f["placed"]["outside_bytes"] for f in doc.get("frameworks") or [] if f.get("placed")}
    assert g["outside"] == {pid: float(b) for pid, b in want.items() if b is not None}, (g["outside"], want)
    leak = doc["leak"]
    labels, v = g["gpumon_leak_verdict"]
    assert v == {"insufficient_data": 0, "none": 1, "leak": 2}[leak["verdict"]], (g, leak)
    s = leak["series"]
    assert labels["series"] == s["kind"], (labels, s)
    assert int(labels["gpu"]) == (s["dev"] if s["dev"] is not None else -1), (labels, s)
    assert int(labels["pid"]) == (s["pid"] if s["pid"] is not None else -1), (labels, s)
    if leak["verdict"] == "leak":
        rate = g["gpumon_leak_rate_bytes_per_second"][1]
        assert abs(rate - leak["rate_bytes_per_second"]) <= 0.01 * leak["rate_bytes_per_second"] + 0.1
        if leak["seconds_to_oom"] is not None:
            secs = g["gpumon_leak_oom_projected_seconds"][1]
            assert abs(secs - leak["seconds_to_oom"]) <= 0.01 * leak["seconds_to_oom"] + 0.1, (secs, leak)


# ---- gpumon report --json and gpumon.report() ----------------------------------------------------------

def report_json(gpumon_bin, path, env=None):
    r = subprocess.run([gpumon_bin, "report", str(path), "--json"], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def python_report(path, env=None, python=sys.executable):
    code = "import json, sys, gpumon; print(json.dumps(gpumon.report(sys.argv[1])))"
    r = subprocess.run([python, "-c", code, str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
