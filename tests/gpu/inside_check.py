# SPDX-License-Identifier: MIT
"""The inside view on a real GPU: each job of inside_jobs.py, unmodified, under `gpumon run`; the run
summary and `gpumon report --json` must name the right cause(s) with figures within 1 % of torch's
message and of NVML's figure (pynvml, taken by the job at the moment), and name the allocation site
of the leak and of the fragmentation (with --history). Then what the inside view costs a real
training loop (step time side by side: plain, under gpumon run --no-inside, under gpumon run, and
with --history) and what condensing an out-of-memory snapshot of the whole card costs.

  python3 tests/gpu/inside_check.py --gpumon BUILD/cli/gpumon --out OUT [--only a,b] [--no-bench]

Writes OUT/inside_check.json (every check, its figures) and OUT/inside_runs.tar.gz (recordings,
summaries, reports). Exit status 0 when every check held."""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.path.join(HERE, "inside_jobs.py")
PY = sys.executable
GIB = 1 << 30
UNITS = {"bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

checks = []
OUT_JSON = None  # where every check is written as it is made: a run cut short keeps what it found


def check(name, ok, **detail):
    checks.append(dict(name=name, passed=bool(ok), **detail))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f"  {json.dumps(detail)[:600]}"), flush=True)
    if OUT_JSON:
        with open(OUT_JSON, "w") as f:
            json.dump({"passed": all(c["passed"] for c in checks), "checks": checks, "partial": True}, f, indent=1)


def near(a, b, rel=0.01):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(b), 1)


def size(text):
    m = re.fullmatch(r"([\d.]+) (bytes|KiB|MiB|GiB)", text.strip())
    return round(float(m.group(1)) * UNITS[m.group(2)]) if m else None


def torch_message(msg):
    """torch 2.x's figures, read here on their own (not with gpumon's parser)."""
    out = {}
    pats = {"request": r"Tried to allocate ([\d.]+ \w+)\.", "capacity": r"total capacity of ([\d.]+ \w+) of which",
            "free": r"of which ([\d.]+ \w+) is free", "process": r"this process has ([\d.]+ \w+) memory in use",
            "allowed": r"([\d.]+ \w+) allowed;", "allocated": r"Of the allocated memory ([\d.]+ \w+) is allocated",
            "cached": r"and ([\d.]+ \w+) is reserved by PyTorch but unallocated"}
    for k, p in pats.items():
        m = re.search(p, msg or "")
        out[k] = size(m.group(1)) if m else None
    return out


def run_job(gpumon, work, name, mode, args=(), history=False, env=None, timeout=240):
    side = os.path.join(work, name + ".side.json")
    rec = os.path.join(work, name + ".gpumon")
    cmd = [gpumon, "run", "-o", rec] + (["--history"] if history else []) + ["--", PY, JOBS, mode] + list(args)
    e = dict(os.environ, INSIDE_SIDE=side, COLUMNS="200", **(env or {}))
    t = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    took = time.time() - t
    with open(os.path.join(work, name + ".stderr"), "w") as f:
        f.write(p.stderr)
    rep = subprocess.run([gpumon, "report", rec, "--json"], capture_output=True, text=True)
    txt = subprocess.run([gpumon, "report", rec], capture_output=True, text=True)
    with open(os.path.join(work, name + ".report.txt"), "w") as f:
        f.write(txt.stdout + txt.stderr)
    doc = json.loads(rep.stdout) if rep.returncode == 0 else {}
    with open(os.path.join(work, name + ".report.json"), "w") as f:
        json.dump(doc, f, indent=1)
    try:
        sided = json.load(open(side))
    except Exception:
        sided = {}
    summary = p.stderr[p.stderr.find("gpumon run summary"):] if "gpumon run summary" in p.stderr else ""
    print(f"== {name}: exit {p.returncode} in {took:.1f} s; cause {(doc.get('oom') or {}).get('causes')}", flush=True)
    return {"rc": p.returncode, "stderr": p.stderr, "summary": summary, "doc": doc, "side": sided, "seconds": took}


def diagnosis_line(summary):
    """The summary's diagnosis, unwrapped."""
    lines = summary.splitlines()
    for i, l in enumerate(lines):
        if l.startswith("  diagnosis: "):
            text = l
            for more in lines[i + 1:]:
                if not more.startswith("    ") or more.startswith("    the framework said") or \
                        more.startswith("    what held") or more.startswith("    who held"):
                    break
                text += " " + more.strip()
            return text
    return ""


def site_line(tag):
    with open(JOBS) as f:
        for n, line in enumerate(f, 1):
            if f"# SITE: {tag}" in line:
                return n
    return None


def common(name, r, cause):
    """The summary and the report name the cause first; the figures gpumon read from torch's message
    (and from inside) are within 1 % of torch's own words; NVML's figure of the job within 1 % of
    pynvml's at the moment."""
    oom = r["doc"].get("oom") or {}
    d = diagnosis_line(r["summary"])
    check(f"{name}: the summary's diagnosis names {cause} first", d.startswith(f"  diagnosis: {cause}"), diagnosis=d)
    check(f"{name}: the report's cause is {cause}", oom.get("cause") == cause, causes=oom.get("causes"))
    msg = r["side"].get("message")
    said = oom.get("framework") or {}
    want = torch_message(msg)
    for key, fig in (("request", "request_bytes"), ("free", "free_bytes"), ("capacity", "capacity_bytes"),
                     ("allocated", "allocated_bytes"), ("process", "process_bytes"), ("allowed", "cap_bytes")):
        if want.get(key) is not None:
            check(f"{name}: {fig} within 1 % of torch's message", near(said.get(fig), want[key]),
                  gpumon=said.get(fig), torch=want[key])
    if want.get("allocated") is not None and want.get("cached") is not None:
        check(f"{name}: reserved_bytes within 1 % of torch's allocated + unallocated",
              near(said.get("reserved_bytes"), want["allocated"] + want["cached"]),
              gpumon=said.get("reserved_bytes"), torch=want["allocated"] + want["cached"])
    nv = r["side"].get("nvml_process")
    job = next((h for h in oom.get("holders") or [] if h.get("pid") == r["side"].get("pid")), None)
    if isinstance(nv, int) and job:
        check(f"{name}: the job's NVML figure at the moment within 1 % of pynvml's", near(job.get("bytes"), nv),
              gpumon=job.get("bytes"), pynvml=nv)
    return oom


ORDER = ("toobig", "fraction", "frag", "cotenant", "transient", "outside", "clean", "leak")


def scenarios(gpumon, work, only):
    for name in ORDER:
        if not only or name in only:
            scenario(gpumon, work, name)


def scenario(gpumon, work, name):
    def want(n):
        return n == name

    if want("frag"):
        r = run_job(gpumon, work, "frag", "frag", history=True)
        oom = common("frag", r, "fragmentation")
        want_t = torch_message(r["side"].get("message"))
        check("frag: cached_bytes within 1 % of torch's reserved-but-unallocated",
              near((oom.get("figures") or {}).get("cached_bytes"), want_t.get("cached")),
              gpumon=(oom.get("figures") or {}).get("cached_bytes"), torch=want_t.get("cached"))
        sites = ((oom.get("snapshot") or {}).get("sites") or [{}])
        check("frag: the allocation site that holds the memory is named (file:line)",
              sites[0].get("file", "").endswith("inside_jobs.py") and sites[0].get("line") == site_line("frag"),
              site=sites[0], want_line=site_line("frag"))
        check("frag: the summary lists the site", f"inside_jobs.py:{site_line('frag')}" in r["summary"])
    if want("leak"):
        r = run_job(gpumon, work, "leak", "leak", history=True)
        oom = common("leak", r, "leak")
        sites = ((oom.get("snapshot") or {}).get("sites") or [{}])
        check("leak: the allocation site that holds the memory is named (file:line)",
              sites[0].get("file", "").endswith("inside_jobs.py") and sites[0].get("line") == site_line("leak"),
              site=sites[0], want_line=site_line("leak"))
        check("leak: the run's verdict is a leak on the framework's figures",
              (r["doc"].get("leak") or {}).get("verdict") == "leak" and
              ((r["doc"].get("leak") or {}).get("series") or {}).get("kind") == "framework",
              leak=r["doc"].get("leak"))
    if want("cotenant"):
        ready = os.path.join(work, "held")
        holder = subprocess.Popen([PY, JOBS, "hold", "100"], env=dict(os.environ, INSIDE_SIDE=ready),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            if os.path.exists(ready):
                break
            time.sleep(0.1)
        try:
            r = run_job(gpumon, work, "cotenant", "cotenant")
        finally:
            holder.kill()
            holder.wait()
        oom = common("cotenant", r, "co-tenant")
        f = oom.get("figures") or {}
        nv = r["side"].get("nvml_process")
        check("cotenant: the job's own growth is said, within 10 % of what it held at the end less its context",
              isinstance(nv, int) and f.get("growth_bytes") and abs(f["growth_bytes"] - nv) <= 0.1 * nv,
              growth=f.get("growth_bytes"), nvml=nv, seconds=f.get("growth_seconds"))
        check("cotenant: the summary says the job's growth", "having gained" in r["summary"])
    if want("fraction"):
        r = run_job(gpumon, work, "fraction", "fraction")
        oom = common("fraction", r, "cap")
        want_t = torch_message(r["side"].get("message"))
        check("fraction: cap_bytes within 1 % of torch's allowed", near((oom.get("figures") or {}).get("cap_bytes"),
                                                                        want_t.get("allowed")),
              gpumon=(oom.get("figures") or {}).get("cap_bytes"), torch=want_t.get("allowed"))
    if want("toobig"):
        r = run_job(gpumon, work, "toobig", "toobig")
        oom = common("toobig", r, "too big")
        want_t = torch_message(r["side"].get("message"))
        short = want_t["request"] - want_t["free"] if want_t.get("request") and want_t.get("free") is not None else None
        check("toobig: by how much (request - free) within 1 %", near((oom.get("figures") or {}).get("shortfall_bytes"),
                                                                     short),
              gpumon=(oom.get("figures") or {}).get("shortfall_bytes"), torch=short)
    if want("transient"):
        r = run_job(gpumon, work, "transient", "transient")
        oom = common("transient", r, "transient peak")
        check("transient: a steady level before it", (oom.get("figures") or {}).get("steady") is True,
              figures=oom.get("figures"))
    if want("outside"):
        r = run_job(gpumon, work, "outside", "outside")
        doc = r["doc"]
        fw = (doc.get("frameworks") or [{}])[0]
        placed = fw.get("placed") or {}
        side = r["side"]
        want_out = side["nvml_process"] - side["reserved"] if isinstance(side.get("nvml_process"), int) else None
        check("outside: no out-of-memory, no leak, no alert",
              doc.get("oom") is None and (doc.get("leak") or {}).get("verdict") != "leak" and not doc.get("alerts"),
              leak=(doc.get("leak") or {}).get("verdict"), alerts=doc.get("alerts"))
        check("outside: memory outside the allocator within 1 % of NVML - torch's reserved at the end",
              near(placed.get("outside_bytes"), want_out), gpumon=placed.get("outside_bytes"), nvml_minus_reserved=want_out)
        check("outside: at least the 6 GiB taken outside", (placed.get("outside_bytes") or 0) >= 6 * GIB)
        check("outside: the summary places it", "outside it" in r["summary"])
    if want("clean"):
        r = run_job(gpumon, work, "clean", "clean")
        doc = r["doc"]
        check("clean: exit 0, no out-of-memory, no cause, no alert, verdict none",
              r["rc"] == 0 and doc.get("oom") is None and not doc.get("alerts") and
              (doc.get("leak") or {}).get("verdict") == "none" and "leak suspected" not in r["stderr"],
              rc=r["rc"], leak=(doc.get("leak") or {}).get("verdict"), alerts=doc.get("alerts"))
        check("clean: the allocator's figures came from inside (framework series)",
              ((doc.get("leak") or {}).get("series") or {}).get("kind") == "framework", leak=doc.get("leak"))


def bench(gpumon, work, rounds, steps):
    """Step time of a real training loop, the configurations alternated: the median of each."""
    configs = {"plain": [PY, JOBS, "bench", str(steps)],
               "no-inside": [gpumon, "run", "--no-record", "-q", "--no-inside", "--", PY, JOBS, "bench", str(steps)],
               "inside": [gpumon, "run", "--no-record", "-q", "--", PY, JOBS, "bench", str(steps)],
               "history": [gpumon, "run", "--no-record", "-q", "--history", "--", PY, JOBS, "bench", str(steps)]}
    times = {k: [] for k in configs}
    for _ in range(rounds):
        for k, cmd in configs.items():
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            try:
                times[k].append(json.loads(p.stdout.strip().splitlines()[-1])["step_ms"])
            except Exception:
                print(f"bench {k}: no result: {p.stderr[-500:]}", flush=True)
    med = {k: statistics.median(v) if v else None for k, v in times.items()}
    out = {"steps": steps, "rounds": rounds, "step_ms": times, "median_ms": med}
    if med["plain"] and med["inside"]:
        out["inside_pct"] = (med["inside"] / med["no-inside"] - 1) * 100
        out["history_pct"] = (med["history"] / med["no-inside"] - 1) * 100
        out["run_pct"] = (med["no-inside"] / med["plain"] - 1) * 100
        check(f"cost: the inside view <= 0.5 % of step time ({out['inside_pct']:+.2f} %)", out["inside_pct"] <= 0.5,
              **{k: v for k, v in out.items() if k != "step_ms"})
        check(f"cost: the history ring <= 2 % of step time ({out['history_pct']:+.2f} %)", out["history_pct"] <= 2.0)
    return out


def condense_cost():
    """A whole card of 6 MiB blocks with the history kept, fragmented: the snapshot torch takes, its JSON,
    and gpumon's condensing (the library, through the extension). torch's first snapshot with stacks
    imports much of torch (torch._dynamo, fsdp: 3-7 s on the H200, whose torch has no bytecode cache);
    the monitor pays it at a step boundary once the history holds a frame (python/gpumon/_inside.py,
    warm()), so that the out-of-memory does not: here likewise, a snapshot after the first block. The
    cold figure (what a job without optimizer steps pays at its out-of-memory) is measured too."""
    code = r'''
import json, time, torch, gpumon._gpumon as g
MIB, GIB = 1 << 20, 1 << 30
torch.cuda.init()
torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=20000)
blocks = [torch.empty(6 * MIB, dtype=torch.uint8, device="cuda")]
import sys
cold = "torch._inductor" not in sys.modules
t0 = time.perf_counter(); torch.cuda.memory._snapshot(); warm = time.perf_counter() - t0  # as the monitor's warm()

while torch.cuda.mem_get_info()[0] > 12 * GIB:
    blocks.extend(torch.empty(6 * MIB, dtype=torch.uint8, device="cuda") for _ in range(300))
kept = blocks[2::3]; del blocks
out = {}
for i in range(2):
    t0 = time.perf_counter(); s = torch.cuda.memory._snapshot(); t1 = time.perf_counter()
    text = json.dumps(s); t2 = time.perf_counter()
    c = g.snapshot_condense(text, 0, 40 * GIB); t3 = time.perf_counter()
    out[f"call{i}"] = {"snapshot_s": t1 - t0, "json_s": t2 - t1, "condense_s": t3 - t2, "total_s": t3 - t0,
                       "json_bytes": len(text), "segments": len(s["segments"])}
out["warmup_s"] = warm  # torch's first snapshot with frames: what a job without steps pays at its out-of-memory
out["warmup_was_cold"] = cold
print(json.dumps(out))
'''
    p = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=300)
    try:
        r = json.loads(p.stdout.strip().splitlines()[-1])
    except Exception:
        r = {"error": p.stderr[-2000:]}
    c0 = r.get("call0", {})
    check(f"cost: an out-of-memory snapshot of the whole card condensed in <= 1 s ({c0.get('total_s', -1):.2f} s: "
          f"torch {c0.get('snapshot_s', -1):.2f}, json {c0.get('json_s', -1):.2f}, gpumon {c0.get('condense_s', -1):.2f})",
          0 <= c0.get("total_s", 99) <= 1.0, **r)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpumon", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--condense-only", action="store_true", help="only the snapshot's cost (no jobs, no loop bench)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=600)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    global OUT_JSON
    OUT_JSON = os.path.join(a.out, "inside_check.json")
    work = tempfile.mkdtemp()
    only = set(x for x in a.only.split(",") if x)
    result = {}
    try:
        if not a.condense_only:
            scenarios(a.gpumon, work, only)
    finally:  # what ran comes back, also when the rest did not
        with tarfile.open(os.path.join(a.out, "inside_runs.tar.gz"), "w:gz") as t:
            for n in sorted(os.listdir(work)):
                if not n.endswith((".gpumon-wal", ".gpumon-shm")):
                    t.add(os.path.join(work, n), arcname=n)
    if a.condense_only:
        result["condense"] = condense_cost()
    elif not a.no_bench:
        result["bench"] = bench(a.gpumon, work, a.rounds, a.steps)
        result["condense"] = condense_cost()
    passed = all(c["passed"] for c in checks)
    result.update(passed=passed, checks=checks)
    with open(os.path.join(a.out, "inside_check.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"{sum(c['passed'] for c in checks)}/{len(checks)} checks passed")
    sys.exit(0 if passed else 1)


if __name__ == "__main__":
    main()
