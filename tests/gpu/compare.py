#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""compare.py - checks gpumon against the truth on a machine with a real NVIDIA GPU.

The truth is nvidia-smi (same driver, same NVML) and NVML itself through pynvml. Sections:
  a) idle --query-gpu output, field by field and all at once, with -i by index, UUID, bus id
  b) memory figures to the MiB, repeated; raw NVML bytes to learn nvidia-smi's rounding
  c) a CUDA process holding 1 GiB: --query-compute-apps, device memory, the main view
  d) `gpumon list` against `nvidia-smi -L`
  e) `gpumon query --format=json` against the CSV numbers
  f) the property and memory health fields (power limits ... ECC, retired pages, remapped rows),
     their aliases, `timestamp` (its format, within a second) and `-f FILE`, byte for byte

Every check prints PASS / FAIL / WARN / SKIP with the figures. FAIL is a wrong answer in
something gpumon promises (nvidia-smi compatibility, exact memory); WARN is a difference worth a
look in something it does not promise (error messages, fields it may not implement).
Results: OUT/compare.txt, OUT/compare.json, OUT/rounding.txt, OUT/mainview.txt.
Exit status 1 when any check failed, else 0.
"""
import argparse
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time

FIELDS = ["index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "memory.free",
          "memory.reserved", "utilization.gpu", "utilization.memory", "temperature.gpu",
          "power.draw", "clocks.sm", "clocks.mem", "driver_version"]
MEMORY_FIELDS = ["memory.total", "memory.used", "memory.free", "memory.reserved"]
# Fields that may change between two calls, and how far (see volatile_ok()).
VOLATILE = {"utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw",
            "clocks.sm", "clocks.mem", "temperature.memory"}
APP_FIELDS = "pid,process_name,used_memory,gpu_uuid,gpu_bus_id"
# Section f: properties and memory health (issue 13 point 4, issue 14 point 1), each byte for byte.
PROP_FIELDS = ["power.limit", "enforced.power.limit", "power.default_limit", "power.min_limit",
               "power.max_limit", "power.management", "fan.speed", "pstate", "temperature.memory",
               "clocks.max.graphics", "clocks.max.sm", "clocks.max.memory", "serial", "vbios_version",
               "compute_mode", "persistence_mode", "pcie.link.gen.current", "pcie.link.gen.max",
               "pcie.link.width.current", "pcie.link.width.max", "mig.mode.current", "mig.mode.pending",
               "ecc.mode.current", "ecc.mode.pending"] + [
    "ecc.errors.%s.%s.%s" % (k, c, w) for k in ("corrected", "uncorrected")
    for c in ("volatile", "aggregate") for w in ("total", "device_memory", "dram", "sram")] + [
    "retired_pages.single_bit_ecc.count", "retired_pages.double_bit.count", "retired_pages.pending",
    "remapped_rows.correctable", "remapped_rows.uncorrectable", "remapped_rows.pending",
    "remapped_rows.failure"]
PROP_ALIASES = ["gpu.power.requested_limit", "gpu.power.current_limit", "gpu.power.default_limit",
                "gpu.power.min_limit", "gpu.power.max_limit", "clocks.max.gr", "clocks.max.mem",
                "gpu_serial", "retired_pages.sbe", "retired_pages.dbe", "remapped_rows.sbe",
                "remapped_rows.dbe"]
# pstate and the PCIe link follow the load; the memory temperature drifts
PROP_VOLATILE = {"pstate", "pcie.link.gen.current", "pcie.link.width.current", "temperature.memory"}
TIMESTAMP_RE = r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}"
FORMATS = ["csv", "csv,noheader", "csv,nounits", "csv,noheader,nounits"]
MiB = 1048576

CHILD = r"""
import os, sys, time
import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device='cuda')
x.fill_(1)
torch.cuda.synchronize()
print('ready', flush=True)
parent = os.getppid()
while os.getppid() == parent:   # never outlive the checker
    time.sleep(0.5)
"""


# ------------------------------------------------------------------------------------------------
# Running commands and recording results
# ------------------------------------------------------------------------------------------------

class Result:
    def __init__(self, argv, rc, out, err, secs):
        self.argv, self.rc, self.out, self.err, self.secs = argv, rc, out, err, secs

    def cmd(self):
        return " ".join(self.argv)


def run(argv, timeout=60, env=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                           errors="replace")
        return Result(argv, p.returncode, p.stdout, p.stderr, time.monotonic() - t0)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return Result(argv, -999, out, "timed out after %ss" % timeout, time.monotonic() - t0)
    except OSError as e:
        return Result(argv, -998, "", str(e), time.monotonic() - t0)


class Report:
    def __init__(self, out_dir, budget_s, quiet=False):
        self.out_dir = out_dir
        self.quiet = quiet
        self.checks = []
        self.text = []
        self.deadline = time.monotonic() + budget_s
        self.section = "?"

    def log(self, line=""):
        print(line, flush=True)
        self.text.append(line)

    def add(self, status, name, detail="", data=None):
        self.checks.append({"section": self.section, "name": name, "status": status,
                            "detail": detail, "data": data})
        line = "%-4s  %s/%s%s" % (status, self.section, name, ("  " + detail) if detail else "")
        self.text.append(line)
        if not (self.quiet and status in ("PASS", "INFO")):
            print(line if len(line) <= 400 else line[:400] + "...", flush=True)

    def check(self, ok, name, detail="", required=True, data=None):
        self.add("PASS" if ok else ("FAIL" if required else "WARN"), name, detail, data)
        return ok

    def skip(self, name, why):
        self.add("SKIP", name, why)

    def out_of_time(self):
        return time.monotonic() > self.deadline

    def counts(self, section=None):
        c = {"PASS": 0, "FAIL": 0, "WARN": 0, "SKIP": 0, "INFO": 0}
        for ch in self.checks:
            if section is None or ch["section"] == section:
                c[ch["status"]] += 1
        return c


def short(s, n=160):
    s = s.replace("\n", "\\n")
    return s if len(s) <= n else s[:n] + "..."


# ------------------------------------------------------------------------------------------------
# Comparing values
# ------------------------------------------------------------------------------------------------

def shape_regex(v):
    """A pattern for values printed like v: digits free, decimals fixed, the rest literal.
    "127.79 W" -> \\d+\\.\\d{2} W ; "[N/A]" -> \\[N/A\\]"""
    parts = re.split(r"(\d+)", v)
    pat = []
    for i, p in enumerate(parts):
        if i % 2 == 0:
            pat.append(re.escape(p))
        elif i > 0 and parts[i - 1].endswith("."):
            pat.append(r"\d{%d}" % len(p))
        else:
            pat.append(r"\d+")
    return "".join(pat)


def number(v):
    m = re.match(r"\s*(-?\d+(?:\.\d+)?)", v)
    return float(m.group(1)) if m else None


def volatile_ok(field, ref, got):
    """Whether got is what field could read a moment after nvidia-smi printed ref."""
    if not re.fullmatch(shape_regex(ref), got):
        return False, "format differs"
    a, b = number(ref), number(got)
    if a is None or b is None:
        return ref == got, "not a number"
    if field in ("temperature.gpu", "temperature.memory"):
        return abs(a - b) <= 2, "allowed +-2 C"
    if field == "power.draw":
        return abs(a - b) <= 15, "allowed +-15 W"
    if field.startswith("utilization."):
        return 0 <= b <= 100, "allowed 0-100"
    if field.startswith("clocks."):
        return b > 0, "allowed any clock"
    return a == b, ""


def csv_rows(text):
    return [line.split(", ") for line in text.rstrip("\n").split("\n")] if text.strip() else []


def compare_rows(fields, smi_rows, gm_rows, smi_rows2=None):
    """Cell-by-cell comparison of data rows. Returns (ok, list of differences). A non-volatile
    cell may equal either of two nvidia-smi readings taken around gpumon's (it moved between)."""
    diffs = []
    if len(smi_rows) != len(gm_rows):
        return False, ["%d rows vs nvidia-smi's %d" % (len(gm_rows), len(smi_rows))]
    for r, (srow, grow) in enumerate(zip(smi_rows, gm_rows)):
        if len(srow) != len(grow):
            diffs.append("row %d: %d cells vs nvidia-smi's %d" % (r, len(grow), len(srow)))
            continue
        srow2 = smi_rows2[r] if smi_rows2 and r < len(smi_rows2) and \
            len(smi_rows2[r]) == len(srow) else srow
        for c, (sv, gv) in enumerate(zip(srow, grow)):
            f = fields[c] if c < len(fields) else "?"
            if f in VOLATILE:
                ok, why = volatile_ok(f, sv, gv)
                if not ok:
                    ok2, _ = volatile_ok(f, srow2[c], gv)
                    if not ok2:
                        diffs.append("%s: gpumon %r nvidia-smi %r (%s)" % (f, gv, sv, why))
            elif gv != sv and gv != srow2[c]:
                diffs.append("%s: gpumon %r nvidia-smi %r%s" % (
                    f, gv, sv, "" if srow2[c] == sv else " then %r" % srow2[c]))
    return not diffs, diffs


class Tools:
    def __init__(self, gpumon, smi):
        self.gpumon, self.smi = gpumon, smi
        self.env = dict(os.environ, LC_ALL="C")

    def g(self, *args, **kw):
        return run([self.gpumon] + list(args), env=self.env, **kw)

    def s(self, *args, **kw):
        return run([self.smi] + list(args), env=self.env, **kw)


def query_pair(t, kind, fields, fmt, extra=()):
    """nvidia-smi, gpumon, nvidia-smi with the same --query-KIND; returns the three results."""
    q = ["--query-%s=%s" % (kind, ",".join(fields)), "--format=" + fmt] + list(extra)
    s1 = t.s(*q)
    g = t.g("query", *q)
    s2 = t.s(*q)
    return s1, g, s2


def check_query(rep, t, kind, fields, fmt, name, extra=(), required=True):
    s1, g, s2 = query_pair(t, kind, fields, fmt, extra)
    if s1.rc != 0:
        rep.add("SKIP" if not required else "FAIL", name,
                "nvidia-smi failed (rc %d): %s" % (s1.rc, short(s1.out + s1.err)))
        return None
    if not rep.check(g.rc == 0, name + " rc", "gpumon rc %d: %s" % (g.rc, short(g.err))
                     if g.rc else "rc 0", required):
        return None
    sl, gl = s1.out.rstrip("\n").split("\n"), g.out.rstrip("\n").split("\n")
    header = "noheader" not in fmt
    if header:
        rep.check(sl[0] == gl[0], name + " header",
                  "identical: %r" % gl[0] if sl[0] == gl[0] else
                  "gpumon %r nvidia-smi %r" % (gl[0], sl[0]), required)
    body = lambda r: csv_rows("\n".join(r.out.rstrip("\n").split("\n")[1 if header else 0:]))
    ok, diffs = compare_rows(fields, body(s1), body(g), body(s2) if s2.rc == 0 else None)
    rep.check(ok, name + " values",
              ("same: %s" % short(" | ".join(", ".join(r) for r in body(g)), 200)) if ok
              else "; ".join(diffs), required,
              data={"nvidia_smi": s1.out, "gpumon": g.out, "nvidia_smi_after": s2.out})
    return s1, g, s2


# ------------------------------------------------------------------------------------------------
# pynvml (optional: the rounding study needs it)
# ------------------------------------------------------------------------------------------------

class Nvml:
    def __init__(self):
        self.err = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self.m = pynvml
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as e:  # no pynvml, no driver: the rounding study is skipped
            self.m = None
            self.err = "%s: %s" % (type(e).__name__, e)

    def memory(self):
        v1 = self.m.nvmlDeviceGetMemoryInfo(self.h)
        v2 = self.m.nvmlDeviceGetMemoryInfo(self.h, version=self.m.nvmlMemory_v2)
        return ({"total": v1.total, "free": v1.free, "used": v1.used},
                {"total": v2.total, "reserved": v2.reserved, "free": v2.free, "used": v2.used})

    def processes(self):
        out = {}
        for p in self.m.nvmlDeviceGetComputeRunningProcesses(self.h):
            out[int(p.pid)] = p.usedGpuMemory  # None when NVML says "not available"
        return out

    def close(self):
        if self.m:
            try:
                self.m.nvmlShutdown()
            except Exception:
                pass


def rounding_rules(nbytes, mib):
    floor = nbytes // MiB
    ceil = -(-nbytes // MiB)
    nearest = (nbytes + MiB // 2) // MiB
    return [r for r, v in (("floor", floor), ("nearest", nearest), ("ceil", ceil)) if v == mib]


class Rounding:
    """Observations of (bytes from NVML, MiB printed by nvidia-smi) and what rule fits them."""

    def __init__(self):
        self.rows = []

    def add(self, when, quantity, nbytes, smi_mib, stable):
        if nbytes is None or smi_mib is None:
            return
        self.rows.append({"when": when, "quantity": quantity, "bytes": nbytes,
                          "mib_exact": nbytes / MiB, "nvidia_smi_mib": smi_mib,
                          "stable": stable, "rules": rounding_rules(nbytes, smi_mib)})

    def conclusion(self):
        out = {}
        for q in sorted({r["quantity"] for r in self.rows}):
            rows = [r for r in self.rows if r["quantity"] == q and r["stable"]]
            telling = [r for r in rows if r["bytes"] % MiB]
            rules = {"floor", "nearest", "ceil"}
            for r in rows:
                rules &= set(r["rules"])
            if not rows:
                verdict = "no stable observation"
            elif not rules:
                verdict = "no rule fits every observation"
            elif not telling:
                verdict = "undecided: every figure was a whole MiB"
            else:
                verdict = "/".join(sorted(rules))
            out[q] = {"rule": verdict, "observations": len(rows),
                      "fractional_observations": len(telling)}
        return out

    def table(self):
        lines = ["%-8s %-26s %16s %18s %12s  %-6s %s" % (
            "when", "quantity", "bytes", "bytes/1048576", "nvidia-smi", "stable", "rules that fit")]
        for r in self.rows:
            lines.append("%-8s %-26s %16d %18.6f %12d  %-6s %s" % (
                r["when"], r["quantity"], r["bytes"], r["mib_exact"], r["nvidia_smi_mib"],
                "yes" if r["stable"] else "no", ",".join(r["rules"]) or "-"))
        lines.append("")
        lines.append("conclusion (stable observations only):")
        for q, c in self.conclusion().items():
            lines.append("  %-26s %s  (%d observations, %d not a whole MiB)" % (
                q, c["rule"], c["observations"], c["fractional_observations"]))
        return "\n".join(lines) + "\n"


def smi_memory(t):
    r = t.s("--query-gpu=" + ",".join(MEMORY_FIELDS), "--format=csv,noheader,nounits", "-i", "0")
    if r.rc != 0:
        return None
    vals = r.out.strip().split(", ")
    try:
        return dict(zip(["total", "used", "free", "reserved"], [int(v) for v in vals]))
    except ValueError:
        return None


def study_memory_rounding(rep, t, nvml, rounding, when):
    """nvidia-smi, pynvml (v1 and v2), nvidia-smi: records the bytes against the MiB shown."""
    if nvml.m is None:
        rep.skip("rounding " + when, "pynvml unavailable: " + nvml.err)
        return None
    a = smi_memory(t)
    v1, v2 = nvml.memory()
    b = smi_memory(t)
    if a is None or b is None:
        rep.skip("rounding " + when, "nvidia-smi memory query failed")
        return None
    stable = a == b
    for q in ("total", "used", "free", "reserved"):
        rounding.add(when, "memory." + q + " (v2)", v2[q], a[q], stable)
    rounding.add(when, "v1 used vs used+reserved", v1["used"], a["used"] + a["reserved"], stable)
    rep.add("INFO", "raw bytes " + when,
            "v2 total %d reserved %d free %d used %d; v1 used %d; nvidia-smi MiB %s%s" % (
                v2["total"], v2["reserved"], v2["free"], v2["used"], v1["used"], a,
                "" if stable else " (moved to %s)" % b),
            data={"v1": v1, "v2": v2, "nvidia_smi_before": a, "nvidia_smi_after": b})
    rep.check(v1["used"] == v2["used"] + v2["reserved"], "v1 used == v2 used + reserved " + when,
              "%d vs %d" % (v1["used"], v2["used"] + v2["reserved"]), required=False)
    return v1, v2


# ------------------------------------------------------------------------------------------------
# Sections
# ------------------------------------------------------------------------------------------------

def section_a(rep, t):
    rep.section = "a"
    rep.log("\n== a) idle --query-gpu, field by field and all at once ==")
    for fmt in ("csv", "csv,noheader,nounits"):
        for f in FIELDS:
            if rep.out_of_time():
                return rep.skip("rest", "time budget spent")
            check_query(rep, t, "gpu", [f], fmt, "%s [%s]" % (f, fmt))
    for fmt in FORMATS:
        check_query(rep, t, "gpu", FIELDS, fmt, "all fields [%s]" % fmt)
    # -i by index, UUID and bus id, taken from nvidia-smi's own answer.
    ident = None
    first = t.s("--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits", "-i", "0")
    rows = csv_rows(first.out) if first.rc == 0 else []
    if rows and len(rows[0]) == len(FIELDS):
        ident = dict(zip(FIELDS, rows[0]))
    specs = [("index", "0")]
    if ident:
        specs += [("uuid", ident["uuid"]), ("bus id", ident["pci.bus_id"])]
    else:
        rep.skip("-i uuid / bus id", "nvidia-smi gave no row to take them from")
    for what, spec in specs:
        for fmt in ("csv", "csv,noheader,nounits"):
            check_query(rep, t, "gpu", FIELDS, fmt, "-i %s [%s]" % (what, fmt), ("-i", spec))
    # Other spellings nvidia-smi may or may not accept; gpumon must at least not disagree silently.
    if ident:
        bus = ident["pci.bus_id"]
        extra = [("bus id 0000:", bus[4:]), ("bus id short", bus[9:]),
                 ("bus id lower", bus.lower()),
                 ("uuid lower", ident["uuid"].lower()), ("index list 0,0", "0,0")]
        for what, spec in extra:
            q = ["--query-gpu=index,uuid", "--format=csv,noheader", "-i", spec]
            s, g = t.s(*q), t.g("query", *q)
            rep.check(s.rc == g.rc and (s.rc != 0 or s.out == g.out), "-i %s (%s)" % (what, spec),
                      "nvidia-smi rc %d %s | gpumon rc %d %s" % (
                          s.rc, short(s.out + s.err, 80), g.rc, short(g.out + g.err, 80)),
                      required=False)
    # Errors and fields outside the list: compared, not required.
    for what, q in [("bad field", ["--query-gpu=memory.bogus", "--format=csv"]),
                    ("no such GPU", ["--query-gpu=index", "--format=csv", "-i", "7"]),
                    ("fan/pstate/mig", ["--query-gpu=fan.speed,pstate,mig.mode.current",
                                        "--format=csv"])]:
        s, g = t.s(*q), t.g("query", *q)
        rep.check(s.rc == g.rc and s.out == g.out, what,
                  "nvidia-smi rc %d %r | gpumon rc %d %r" % (
                      s.rc, short(s.out + s.err, 90), g.rc, short(g.out + g.err, 90)),
                  required=False)
    # The idle process list: header only, identical.
    for fmt in FORMATS:
        s, g, s2 = query_pair(t, "compute-apps", APP_FIELDS.split(","), fmt)
        rep.check(g.rc == 0 and (g.out == s.out or g.out == s2.out),
                  "idle compute-apps [%s]" % fmt,
                  "gpumon rc %d %r nvidia-smi %r" % (g.rc, short(g.out), short(s.out)))


def stamp_seconds(stamp):
    """Seconds since the epoch of nvidia-smi's local "YYYY/MM/DD HH:MM:SS.mmm"; None if not one."""
    if not re.fullmatch(TIMESTAMP_RE, stamp):
        return None
    return time.mktime(time.strptime(stamp[:19], "%Y/%m/%d %H:%M:%S")) + int(stamp[20:]) / 1000.0


def section_f(rep, t, out_dir):
    rep.section = "f"
    rep.log("\n== f) properties and memory health, timestamp, -f ==")
    for fmt in ("csv", "csv,noheader,nounits"):
        for f in PROP_FIELDS:
            if rep.out_of_time():
                return rep.skip("rest", "time budget spent")
            check_query(rep, t, "gpu", [f], fmt, "%s [%s]" % (f, fmt))
    for fmt in FORMATS:
        check_query(rep, t, "gpu", PROP_FIELDS, fmt, "all property fields [%s]" % fmt)
    for a in PROP_ALIASES:
        check_query(rep, t, "gpu", [a], "csv", "alias %s" % a)
    # timestamp: the same form, and within a second of nvidia-smi's taken just before and after
    q = ["--query-gpu=timestamp,index,serial", "--format=csv"]
    s1, g, s2 = t.s(*q), t.g("query", *q), t.s(*q)
    if s1.rc == 0 and g.rc == 0 and s2.rc == 0:
        sl, gl, sl2 = s1.out.split("\n"), g.out.split("\n"), s2.out.split("\n")
        rep.check(gl[0] == sl[0], "timestamp header", "gpumon %r nvidia-smi %r" % (gl[0], sl[0]))
        st, gt, st2 = (stamp_seconds(x.split(", ")[0]) for x in (sl[1], gl[1], sl2[1]))
        rep.check(st is not None and gt is not None and st2 is not None, "timestamp format",
                  "gpumon %r nvidia-smi %r" % (gl[1], sl[1]))
        if st is not None and gt is not None and st2 is not None:
            rep.check(st - 1 <= gt <= st2 + 1, "timestamp within a second",
                      "nvidia-smi %.3f gpumon %.3f nvidia-smi %.3f" % (st, gt, st2))
        rep.check(gl[1].split(", ", 1)[1] == sl[1].split(", ", 1)[1], "rest of the timestamp row",
                  "gpumon %r nvidia-smi %r" % (gl[1], sl[1]))
    else:
        rep.check(False, "timestamp", "rc nvidia-smi %d gpumon %d" % (s1.rc, g.rc))
    # -f FILE: the same bytes in the file, nothing on stdout
    sf, gf = os.path.join(out_dir, "smi-f.csv"), os.path.join(out_dir, "gpumon-f.csv")
    q = ["--query-gpu=index,serial,ecc.mode.current,remapped_rows.pending", "--format=csv"]
    s, g = t.s(*q + ["-f", sf]), t.g("query", *q + ["-f", gf])
    sb = open(sf).read() if os.path.exists(sf) else None
    gb = open(gf).read() if os.path.exists(gf) else None
    rep.check(s.rc == g.rc == 0 and g.out == s.out and sb is not None and gb == sb, "-f FILE",
              "nvidia-smi rc %d stdout %r file %r | gpumon rc %d stdout %r file %r" % (
                  s.rc, short(s.out, 60), short(sb or "", 80), g.rc, short(g.out, 60), short(gb or "", 80)))
    q = ["--query-gpu=index,serial", "--format=csv,noheader"]
    s, g = t.s(*q + ["--filename=" + sf]), t.g("query", *q + ["--filename=" + gf])
    sb = open(sf).read() if os.path.exists(sf) else None
    gb = open(gf).read() if os.path.exists(gf) else None
    rep.check(s.rc == g.rc == 0 and sb is not None and gb == sb, "--filename=FILE",
              "nvidia-smi %r | gpumon %r" % (short(sb or "", 80), short(gb or "", 80)))


def section_b(rep, t, nvml, rounding):
    rep.section = "b"
    rep.log("\n== b) memory figures to the MiB, 5 runs in alternating order ==")
    q = ["--query-gpu=" + ",".join(MEMORY_FIELDS), "--format=csv,noheader,nounits"]
    stable_runs = 0
    for i in range(5):
        if i % 2 == 0:  # nvidia-smi around gpumon
            a, inner, b = t.s(*q), t.g("query", *q), t.s(*q)
            order = "smi,gpumon,smi"
            gm_out, smi_out = inner.out, a.out
        else:           # gpumon around nvidia-smi
            a, inner, b = t.g("query", *q), t.s(*q), t.g("query", *q)
            order = "gpumon,smi,gpumon"
            gm_out, smi_out = a.out, inner.out
        outer = (a, b)
        if any(r.rc != 0 for r in (a, b, inner)):
            rep.check(False, "run %d (%s)" % (i + 1, order), "a command failed: %s" % "; ".join(
                "%s rc %d %s" % (r.argv[0], r.rc, short(r.err, 60)) for r in (a, inner, b)))
            continue
        if outer[0].out != outer[1].out:
            rep.skip("run %d (%s)" % (i + 1, order),
                     "memory moved between the outer readings: %r -> %r" % (
                         outer[0].out.strip(), outer[1].out.strip()))
            continue
        stable_runs += 1
        rep.check(inner.out == outer[0].out, "run %d (%s)" % (i + 1, order),
                  "%s: gpumon %r nvidia-smi %r" % (",".join(MEMORY_FIELDS), gm_out.strip(),
                                                   smi_out.strip()))
    rep.check(stable_runs > 0, "stable runs", "%d of 5 runs had steady memory" % stable_runs)
    for k in range(2):
        study_memory_rounding(rep, t, nvml, rounding, "idle-%d" % (k + 1))


def wait_ready(proc, timeout):
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    end = time.monotonic() + timeout
    buf = ""
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False, buf
        if sel.select(timeout=0.5):
            line = proc.stdout.readline()
            buf += line
            if line.strip() == "ready":
                return True, buf
    return False, buf


def stop_child(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def app_rows(text, header):
    rows = csv_rows(text)
    return rows[1:] if header and rows else rows


def section_c(rep, t, nvml, rounding, out_dir, no_cuda, pid=None):
    rep.section = "c"
    rep.log("\n== c) a CUDA process holding 1 GiB ==")
    if pid:
        rep.log("using the running process %d given with --pid (no child started)" % pid)
        checks_with_process(rep, t, nvml, rounding, out_dir, pid)
        return
    if no_cuda:
        rep.skip("all", "--no-cuda given")
        return
    if rep.out_of_time():
        rep.skip("all", "time budget spent")
        return
    t0 = time.monotonic()
    # stderr joins stdout, read until "ready": no second pipe that could fill up unread
    proc = subprocess.Popen([sys.executable, "-u", "-c", CHILD], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    try:
        ok, said = wait_ready(proc, 180)
        if not ok:
            stop_child(proc)
            rest = proc.stdout.read() if proc.stdout else ""
            rep.check(False, "child ready", "the torch child did not start: %s" %
                      short((said + rest)[-600:], 600))
            return
        rep.check(True, "child ready", "pid %d, ready after %.1f s" % (proc.pid,
                                                                       time.monotonic() - t0))
        time.sleep(1)
        checks_with_process(rep, t, nvml, rounding, out_dir, proc.pid)
    finally:
        stop_child(proc)
    # Once the child has gone, both lists must be without it again.
    q = ["--query-compute-apps=pid", "--format=csv,noheader"]
    for _ in range(20):
        s = t.s(*q)
        if str(proc.pid) not in s.out.split():
            break
        time.sleep(0.25)
    g = t.g("query", *q)
    rep.check(g.rc == 0 and str(proc.pid) not in g.out.split(), "child gone",
              "after exit: gpumon %r nvidia-smi %r" % (g.out.strip(), s.out.strip()))


def checks_with_process(rep, t, nvml, rounding, out_dir, pid):
    fields = APP_FIELDS.split(",")
    for fmt in FORMATS:
        s, g, s2 = query_pair(t, "compute-apps", fields, fmt)
        same = g.out == s.out or g.out == s2.out
        rep.check(g.rc == 0 and s.rc == 0 and same, "compute-apps [%s]" % fmt,
                  ("identical: %s" % short(g.out, 240)) if same else
                  "gpumon rc %d %r | nvidia-smi %r" % (g.rc, short(g.out + g.err, 240),
                                                      short(s.out, 240)),
                  data={"nvidia_smi": s.out, "gpumon": g.out})
        if fmt == "csv":
            grow = [r for r in app_rows(g.out, True) if r and r[0] == str(pid)]
            srow = [r for r in app_rows(s.out, True) if r and r[0] == str(pid)]
            rep.check(bool(grow), "pid listed by gpumon",
                      "pid %d %s" % (pid, "found: " + ", ".join(grow[0]) if grow else
                                     "missing (PID namespace?)"))
            rep.check(bool(srow), "pid listed by nvidia-smi",
                      "pid %d %s" % (pid, "found" if srow else "missing"), required=False)
            if grow and srow and len(grow[0]) > 2 and len(srow[0]) > 2:
                rep.check(grow[0][2] == srow[0][2], "process used memory",
                          "gpumon %s nvidia-smi %s" % (grow[0][2], srow[0][2]))
    # Process memory rounding: pynvml's bytes against nvidia-smi's MiB.
    if nvml.m is not None:
        q = ["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"]
        a = t.s(*q)
        procs = nvml.processes()
        b = t.s(*q)
        smi = {int(r[0]): int(r[1]) for r in csv_rows(a.out) if len(r) == 2 and
               r[0].isdigit() and r[1].isdigit()} if a.rc == 0 else {}
        used = procs.get(pid)
        rep.check(used is not None, "pynvml process bytes",
                  "pid %d usedGpuMemory %s, nvidia-smi %s MiB" % (pid, used, smi.get(pid)),
                  required=False)
        if used is not None and pid in smi:
            rounding.add("process", "process used_memory", int(used), smi[pid], a.out == b.out)
        study_memory_rounding(rep, t, nvml, rounding, "process")
    else:
        rep.skip("pynvml process bytes", "pynvml unavailable: %s" % nvml.err)
    # Device memory with the process alive, to the MiB.
    q = ["--query-gpu=" + ",".join(MEMORY_FIELDS), "--format=csv,noheader,nounits"]
    for k in range(3):
        a, g, b = t.s(*q), t.g("query", *q), t.s(*q)
        if a.out != b.out:
            rep.skip("device memory with process #%d" % (k + 1), "memory moved: %r -> %r" % (
                a.out.strip(), b.out.strip()))
            continue
        rep.check(g.rc == 0 and g.out == a.out, "device memory with process #%d" % (k + 1),
                  "%s: gpumon %r nvidia-smi %r" % (",".join(MEMORY_FIELDS), g.out.strip(),
                                                   a.out.strip()))
    # JSON of the process list.
    gj = t.g("query", "--query-compute-apps=" + APP_FIELDS, "--format=json")
    gc = t.g("query", "--query-compute-apps=" + APP_FIELDS, "--format=csv,noheader,nounits")
    check_json(rep, "compute-apps json", gj, gc, fields)
    # The main view.
    view = t.g()
    smi_view = t.s()
    with open(os.path.join(out_dir, "mainview.txt"), "w") as f:
        f.write("$ gpumon   (rc %d, %.0f ms, process pid %d)\n%s%s\n" % (
            view.rc, view.secs * 1000, pid, view.out, view.err))
        f.write("$ nvidia-smi   (rc %d)\n%s%s" % (smi_view.rc, smi_view.out, smi_view.err))
    rep.check(view.rc == 0, "main view rc", "rc %d %s" % (view.rc, short(view.err)))
    shown = re.search(r"\b%d\b" % pid, view.out) is not None
    rep.check(shown, "main view shows the process",
              "pid %d %s in the main view (mainview.txt)" % (pid, "present" if shown else "absent"))


def section_d(rep, t):
    rep.section = "d"
    rep.log("\n== d) gpumon list vs nvidia-smi -L ==")
    s, g = t.s("-L"), t.g("list")
    rep.check(s.rc == 0 and g.rc == 0 and s.out == g.out, "list",
              "identical: %r" % short(g.out) if s.out == g.out else
              "gpumon rc %d %r | nvidia-smi rc %d %r" % (g.rc, short(g.out + g.err), s.rc,
                                                        short(s.out)))


def json_records(doc):
    """The list of per-GPU (or per-process) objects in a JSON document of unknown shape."""
    if isinstance(doc, list):
        return [d for d in doc if isinstance(d, dict)]
    if isinstance(doc, dict):
        for k in ("gpus", "gpu", "devices", "processes", "compute_apps", "compute-apps", "apps",
                  "rows", "data"):
            if isinstance(doc.get(k), list):
                return json_records(doc[k])
        lists = [v for v in doc.values() if isinstance(v, list)]
        if len(lists) == 1:
            return json_records(lists[0])
        return [doc]
    return []


def json_lookup(rec, field):
    """The value of a field in a record: by its query name, with _ for ., by header name, nested."""
    aliases = {"clocks.sm": ["clocks.current.sm"], "clocks.mem": ["clocks.current.memory"],
               "used_memory": ["used_gpu_memory"]}
    names = [field] + aliases.get(field, [])
    for n in names:
        for k in (n, n.replace(".", "_"), n.replace(".", "-")):
            if k in rec:
                return True, rec[k]
        node, ok = rec, True
        for part in n.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                ok = False
                break
        if ok:
            return True, node
    return False, None


def check_json(rep, name, gj, gc, fields, required=True):
    if gj.rc != 0:
        rep.check(False, name, "gpumon rc %d: %s" % (gj.rc, short(gj.out + gj.err)), required)
        return
    try:
        doc = json.loads(gj.out)
    except ValueError as e:
        rep.check(False, name + " parses", "json.loads: %s: %r" % (e, short(gj.out)), required)
        return
    rep.check(True, name + " parses", "%d bytes" % len(gj.out), required)
    recs = json_records(doc)
    rows = csv_rows(gc.out)
    if not rep.check(len(recs) == len(rows), name + " records",
                     "%d JSON records, %d CSV rows" % (len(recs), len(rows)), required):
        return
    diffs, compared = [], 0
    for rec, row in zip(recs, rows):
        for f, cv in zip(fields, row):
            found, jv = json_lookup(rec, f)
            if not found:
                diffs.append("%s missing" % f)
                continue
            compared += 1
            if jv is None:
                if cv not in ("[N/A]", "N/A", "[Not Supported]"):
                    diffs.append("%s: json null, csv %r" % (f, cv))
                continue
            if isinstance(jv, bool) or not isinstance(jv, (int, float)):
                if str(jv) != cv:
                    diffs.append("%s: json %r csv %r" % (f, jv, cv))
                continue
            c = number(cv)
            if c is None:
                diffs.append("%s: json %r csv %r" % (f, jv, cv))
            elif f in VOLATILE:
                tol = {"temperature.gpu": 2, "power.draw": 15}.get(f)
                if tol is not None and abs(c - jv) > tol:
                    diffs.append("%s: json %r csv %r" % (f, jv, cv))
            elif abs(c - jv) > 1e-9 and not (f == "power.draw" and abs(c - jv) < 0.01):
                diffs.append("%s: json %r csv %r" % (f, jv, cv))
    rep.check(not diffs, name + " numbers",
              "%d values agree" % compared if not diffs else "; ".join(diffs[:12]), required,
              data={"json": gj.out, "csv": gc.out})


def section_e(rep, t):
    rep.section = "e"
    rep.log("\n== e) gpumon query --format=json against the CSV numbers ==")
    for k in range(2):
        gj = t.g("query", "--query-gpu=" + ",".join(FIELDS), "--format=json")
        gc = t.g("query", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits")
        check_json(rep, "query-gpu json #%d" % (k + 1), gj, gc, FIELDS)
    bare = t.g("query", "--format=json")
    try:
        json.loads(bare.out)
        ok = bare.rc == 0
        detail = "rc %d, parses" % bare.rc
    except ValueError as e:
        ok, detail = False, "rc %d, json.loads: %s: %r" % (bare.rc, e, short(bare.out + bare.err))
    rep.check(ok, "bare --format=json", detail, required=False)


# ------------------------------------------------------------------------------------------------

def default_gpumon():
    build = os.environ.get("GPUMON_BUILD", "/tmp/gpumon-build")
    for p in (os.path.join(build, "cli", "gpumon"), os.path.join(build, "gpumon")):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return os.path.join(build, "cli", "gpumon")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpumon", default=os.environ.get("GPUMON_BIN") or default_gpumon())
    ap.add_argument("--nvidia-smi", default=os.environ.get("NVIDIA_SMI", "nvidia-smi"))
    ap.add_argument("--out", default=os.environ.get("OUT") or "gpu-out")
    ap.add_argument("--budget", type=float, default=300, help="seconds before sections are cut")
    ap.add_argument("--no-cuda", action="store_true", help="skip section c (no torch/CUDA)")
    ap.add_argument("--quiet", action="store_true",
                    help="print only FAIL/WARN/SKIP and the summary (compare.txt has everything)")
    ap.add_argument("--sections", default="abcdef")
    ap.add_argument("--pid", type=int, help="section c: use this running GPU process instead of "
                    "starting the torch child")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rep = Report(args.out, args.budget, args.quiet)
    t = Tools(os.path.abspath(args.gpumon) if os.sep in args.gpumon else args.gpumon,
              args.nvidia_smi)
    rounding = Rounding()
    t_start = time.monotonic()

    rep.log("compare.py: gpumon %s, nvidia-smi %s, %s" % (t.gpumon, t.smi,
                                                           time.strftime("%Y-%m-%d %H:%M:%S")))
    v = t.g("--version")
    rep.log("gpumon --version: rc %d %s" % (v.rc, (v.out + v.err).strip()))
    smi = t.s("--version")
    rep.log("nvidia-smi --version: rc %d %s" % (smi.rc, short((smi.out + smi.err).strip(), 300)))
    probe = t.g("list")
    if probe.rc in (9, 12):  # gpumon finds no driver: every check below would fail the same way
        rep.section = "setup"
        rep.check(False, "gpumon finds the driver", "gpumon list: rc %d %s" % (
            probe.rc, short(probe.err, 300)))
        args.sections = ""
    if v.rc < -900 or smi.rc < -900:  # a program is missing: nothing below could mean anything
        rep.section = "setup"
        rep.check(v.rc >= -900, "gpumon runs", short(v.err) if v.rc < -900 else t.gpumon)
        rep.check(smi.rc >= -900, "nvidia-smi runs", short(smi.err) if smi.rc < -900 else t.smi)
        args.sections = ""
    if os.environ.get("GPUMON_NVML_LIBRARY"):
        rep.log("GPUMON_NVML_LIBRARY=%s" % os.environ["GPUMON_NVML_LIBRARY"])
    nvml = Nvml()
    rep.log("pynvml: %s" % ("loaded" if nvml.m else "unavailable (%s)" % nvml.err))

    sections = {"a": lambda: section_a(rep, t),
                "b": lambda: section_b(rep, t, nvml, rounding),
                "c": lambda: section_c(rep, t, nvml, rounding, args.out, args.no_cuda, args.pid),
                "d": lambda: section_d(rep, t),
                "e": lambda: section_e(rep, t),
                "f": lambda: section_f(rep, t, args.out)}
    for name in args.sections:
        try:
            sections[name]()
        except Exception as e:  # a bug here must not hide the other sections' results
            rep.section = name
            rep.check(False, "crashed", "%s: %s" % (type(e).__name__, e))
    nvml.close()

    with open(os.path.join(args.out, "rounding.txt"), "w") as f:
        f.write("NVML bytes against the MiB nvidia-smi printed (1 MiB = 1048576 bytes).\n")
        f.write("'stable': nvidia-smi printed the same figures just before and just after.\n\n")
        f.write(rounding.table())

    rep.log("\n== summary ==")
    cols = ("PASS", "FAIL", "WARN", "SKIP", "INFO")
    rep.log("%-8s" % "section" + "".join("%6s" % k for k in cols))
    for s in sorted({ch["section"] for ch in rep.checks}):
        c = rep.counts(s)
        rep.log("%-8s" % s + "".join("%6d" % c[k] for k in cols))
    tot = rep.counts()
    rep.log("%-8s" % "all" + "".join("%6d" % tot[k] for k in cols))
    fails = [ch for ch in rep.checks if ch["status"] == "FAIL"]
    for ch in fails[:30]:
        rep.log("FAIL  %s/%s  %s" % (ch["section"], ch["name"], short(ch["detail"], 300)))
    if len(fails) > 30:
        rep.log("... and %d more FAIL (compare.txt)" % (len(fails) - 30))
    concl = rounding.conclusion()
    for q, c in concl.items():
        rep.log("rounding %-26s %s" % (q, c["rule"]))
    rep.log("%.1f s" % (time.monotonic() - t_start))

    with open(os.path.join(args.out, "compare.txt"), "w") as f:
        f.write("\n".join(rep.text) + "\n")
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump({"gpumon": t.gpumon, "nvidia_smi": t.smi, "counts": tot,
                   "checks": rep.checks, "rounding": {"observations": rounding.rows,
                                                      "conclusion": concl},
                   "seconds": round(time.monotonic() - t_start, 1)}, f, indent=1)
    return 1 if tot["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
