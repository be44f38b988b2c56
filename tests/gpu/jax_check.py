#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""JAX on a real GPU under `gpumon run` (run by tests/gpu/jax_check.sh). Three jobs, one at a time,
each this file with --job: `context` (one 4-byte array, --no-prealloc), `growing` (8 arrays of
256 MiB, --no-prealloc) and `prealloc` (the same arrays, JAX's default pre-allocation). The
checks:

  noprealloc  growing: NVML's figure for the process within 10 % of bytes_in_use + the context
              (the context job's NVML figure: the CUDA context and what JAX sets up with it).
              Equal arrays of a power-of-two size, a power-of-two many: the BFC allocator's
              regions double (256, 256, 512, 1024 MiB), so a growing pool ends at what they hold
  prealloc    prealloc: the process holds 75 % of the card (within 5 points)
  stats       in each job GPUMonitor(framework="jax")'s figures equal Device.memory_stats() read
              at the same moment (allocated = bytes_in_use, peak = peak_bytes_in_use, reserved =
              pool_bytes, cap = bytes_limit)
  recording   each run's recording names jax as the framework (framework_sources, gpumon.report()
              on the job's GPU) with JAX's limit as the cap, gpumon run's summary names jax, the
              --no-prealloc runs' settings hold XLA_PYTHON_CLIENT_PREALLOCATE=false, which the job saw
  jobs        no job imported torch; framework="auto" found jax in each

The orchestrating process imports neither jax nor torch. Writes jax_check.json, jax_check.txt,
each run's recording (NAME.gpumon), gpumon run's stderr (NAME.log) and the job's figures
(NAME.json) under --out; exit status 1 when a check failed.
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
import traceback

MIB = 1 << 20
XLA_VARS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR")
results = {"checks": [], "runs": {}}
log_lines = []


def say(msg):
    print(msg, flush=True)
    log_lines.append(msg)


def check(name, ok, detail):
    results["checks"].append({"name": name, "ok": bool(ok), "detail": detail})
    say(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")


def mib(b):
    return "n/a" if b is None else f"{b / MIB:,.1f} MiB"


# ---- the job (under gpumon run) ------------------------------------------------------------------


def smi_process_mib(pid):
    """nvidia-smi's figure for pid (MiB; it rounds), beside libgpumon's; None when not listed."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=10)
        for line in r.stdout.splitlines():
            p, used = [x.strip() for x in line.split(",")[:2]]
            if p == str(pid):
                return float(used)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    return None


def job(a):
    out = {"pid": os.getpid(), "env": {v: os.environ.get(v) for v in XLA_VARS + ("CUDA_VISIBLE_DEVICES",)}}
    try:
        import numpy as np
        import jax
        import gpumon
        from gpumon._frameworks import resolve_name
        out["auto"] = resolve_name("auto")
        dev = jax.local_devices()[0]
        out["jax"] = {"version": jax.__version__, "device": repr(dev), "platform": dev.platform, "id": dev.id,
                      "local_hardware_id": getattr(dev, "local_hardware_id", None),
                      "kind": getattr(dev, "device_kind", None), "local_devices": len(jax.local_devices())}
        held = []
        if a.count == 0:
            held.append(jax.device_put(np.zeros(1, np.float32), dev))
        for i in range(a.count):
            held.append(jax.device_put(np.full(a.mib * MIB // 4, i, np.float32), dev))
        for x in held:
            x.block_until_ready()
        out["held_bytes"] = sum(int(x.nbytes) for x in held)
        mon = gpumon.GPUMonitor(framework="jax", interval=1, logger=False, min_headroom=None)
        for _ in range(40):  # samples for gpumon run's recording: enough for a verdict on them
            mon.step()
            time.sleep(0.025)
        time.sleep(0.3)
        # the monitor's figures and memory_stats() at one moment: nothing allocates in between;
        # should something (a runtime thread), try again
        for attempt in range(5):
            before = dev.memory_stats()
            s = mon.sample()
            after = dev.memory_stats()
            if before == after:
                break
        out["stats_stable"] = before == after
        out["attempts"] = attempt + 1
        out["memory_stats"] = after
        out["sample"] = {k: getattr(s, k) for k in ("allocated", "peak", "reserved", "max_reserved", "cap", "process",
                                                     "device_total", "device_used", "device_free", "device")}
        out["nvml_index"] = mon.nvml_index
        out["framework"] = mon.framework
        out["smi_process_mib"] = smi_process_mib(os.getpid())
        mon.close()
        del held
    except Exception:
        out["error"] = traceback.format_exc()
    out["torch_imported"] = "torch" in sys.modules
    with open(a.result, "w") as f:
        json.dump(out, f, indent=1)
    return 1 if "error" in out else 0


# ---- the orchestrator ----------------------------------------------------------------------------


def run(a, name, flags, count, size_mib):
    """One job under `gpumon run -o OUT/NAME.gpumon FLAGS`: its figures (the job's JSON) and the
    recording's framework rows; None when it failed (said)."""
    rec = os.path.join(a.out, f"{name}.gpumon")
    res = os.path.join(a.out, f"{name}.json")
    for p in (rec, res):
        if os.path.exists(p):
            os.remove(p)
    env = {k: v for k, v in os.environ.items() if k not in XLA_VARS}  # JAX's defaults unless gpumon run sets one
    cmd = [a.gpumon, "run", "-o", rec, "--gpu", a.gpu, *flags, "--", sys.executable, os.path.abspath(__file__),
           "--job", "--count", str(count), "--mib", str(size_mib), "--result", res]
    t = time.time()
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.job_timeout)
        rc, stdout, stderr = r.returncode, r.stdout, r.stderr
    except subprocess.TimeoutExpired as e:
        rc, stdout, stderr = "timeout", e.stdout or "", e.stderr or ""
        stdout = stdout.decode() if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode() if isinstance(stderr, bytes) else stderr
    with open(os.path.join(a.out, f"{name}.log"), "w") as f:
        f.write(f"$ {' '.join(cmd)}\n(exit {rc}, {time.time() - t:.1f} s)\n--- stdout\n{stdout}--- stderr\n{stderr}")
    say(f"   ({name}: gpumon run exited {rc} in {time.time() - t:.1f} s)")
    try:
        with open(res) as f:
            j = json.load(f)
    except (OSError, ValueError):
        check(f"{name}_job", False, f"no figures from the job (gpumon run exited {rc}); stderr: {stderr[-1500:]}")
        return None
    if "error" in j or rc != 0:
        check(f"{name}_job", False, f"gpumon run exited {rc}; {j.get('error', '')}{stderr[-800:]}")
        return None
    j["summary"] = stderr
    j["rec"] = rec
    results["runs"][name] = {k: v for k, v in j.items() if k != "summary"}
    return j


def stats_check(name, j):
    st, s = j["memory_stats"] or {}, j["sample"]

    def key(k):  # the adapter's rule: -1 or a missing key is not known
        v = st.get(k)
        return v if isinstance(v, int) and v >= 0 else None
    want = {"allocated": key("bytes_in_use"), "peak": key("peak_bytes_in_use"), "reserved": key("pool_bytes"),
            "max_reserved": key("peak_pool_bytes"), "cap": key("bytes_limit")}
    if want["reserved"] is None and key("bytes_reserved"):
        want["reserved"], want["max_reserved"] = key("bytes_reserved"), key("peak_bytes_reserved")
    got = {k: s[k] for k in want}
    check(f"stats_{name}", j["stats_stable"] and got == want and want["allocated"] is not None,
          f"GPUMonitor {got} vs memory_stats() {want} (read {j['attempts']}x; keys {sorted(st)})")


def recording_check(name, j, want_setting):
    import gpumon
    db = sqlite3.connect(j["rec"])
    sources = db.execute("SELECT framework, device FROM framework_sources").fetchall()
    limits = [r[0] for r in db.execute("SELECT limit_bytes FROM framework_samples ORDER BY t_ns")]
    row = db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
    settings = row[0] if row else ""
    db.close()
    doc = gpumon.report(j["rec"])
    fws = [(f.get("framework"), f.get("dev")) for f in doc.get("frameworks", [])]
    limit = j["memory_stats"].get("bytes_limit")
    said = ("XLA_PYTHON_CLIENT_PREALLOCATE=false" in settings) == want_setting and \
        (j["env"]["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false") == want_setting
    check(f"recording_{name}",
          sources == [("jax", j["sample"]["device"])] and fws == [("jax", j["nvml_index"])] and limits
          and limits[-1] == limit and said,
          f"framework_sources {sources}; report frameworks (name, GPU) {fws}, job's GPU {j['nvml_index']}; "
          f"limit_bytes {limits[-1] if limits else None} vs bytes_limit {limit}; "
          f"settings {settings.split()} / job saw XLA_PYTHON_CLIENT_PREALLOCATE={j['env']['XLA_PYTHON_CLIENT_PREALLOCATE']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", action="store_true", help="(internal) be the JAX job")
    ap.add_argument("--count", type=int, default=8)
    ap.add_argument("--mib", type=int, default=256)
    ap.add_argument("--result")
    ap.add_argument("--gpumon", help="the gpumon program")
    ap.add_argument("--out", default="gpu-out")
    ap.add_argument("--gpu", default=os.environ.get("JAX_CHECK_GPU", "auto"), help="gpumon run --gpu (default auto)")
    ap.add_argument("--job-timeout", type=float, default=40)
    a = ap.parse_args()
    if a.job:
        return job(a)
    if not a.gpumon:
        ap.error("--gpumon is required")
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    results["env"] = {"python": sys.version.split()[0], "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    ctx = run(a, "context", ["--no-prealloc"], 0, 0)
    grow = run(a, "growing", ["--no-prealloc"], a.count, a.mib)
    pre = run(a, "prealloc", [], a.count, a.mib)
    jobs = {n: j for n, j in (("context", ctx), ("growing", grow), ("prealloc", pre)) if j}
    if jobs:
        results["env"]["jax"] = next(iter(jobs.values()))["jax"]
        say(f"env: {results['env']}")

    if ctx and grow:
        context = ctx["sample"]["process"]
        in_use, pool = grow["memory_stats"].get("bytes_in_use"), grow["memory_stats"].get("pool_bytes")
        proc = grow["sample"]["process"]
        want = in_use + context if in_use is not None and context is not None else None
        err = (proc - want) / want if proc is not None and want else None
        results["figures"] = {"context_bytes": context, "growing_process_bytes": proc, "growing_in_use_bytes": in_use,
                              "growing_pool_bytes": pool, "growing_error": err}
        check("noprealloc", err is not None and abs(err) <= 0.10,
              f"NVML {mib(proc)} (nvidia-smi {grow['smi_process_mib']} MiB) vs bytes_in_use {mib(in_use)} + context "
              f"{mib(context)} = {mib(want)}: {100 * err if err is not None else float('nan'):+.1f} % (goal within "
              f"10 %); the arrays {mib(grow['held_bytes'])}, JAX's pool_bytes {mib(pool)} "
              f"(pool + context {mib(pool + context) if pool is not None and context is not None else 'n/a'})")
    if pre:
        s = pre["sample"]
        share = s["process"] / s["device_total"] if s["process"] is not None and s["device_total"] else None
        st = pre["memory_stats"]
        others = s["device_used"] - s["process"] if s["device_used"] is not None and s["process"] is not None else None
        results["figures_prealloc"] = {"share": share, "bytes_limit": st.get("bytes_limit"), "pool": st.get("pool_bytes")}
        check("prealloc", share is not None and abs(share - 0.75) <= 0.05,
              f"the process holds {mib(s['process'])} of {mib(s['device_total'])}: "
              f"{100 * share if share is not None else float('nan'):.1f} % (goal 75 +- 5); JAX's bytes_limit "
              f"{mib(st.get('bytes_limit'))}, pool_bytes {mib(st.get('pool_bytes'))}, bytes_in_use "
              f"{mib(st.get('bytes_in_use'))}; other processes on the GPU {mib(others)}")
    for n, j in jobs.items():
        stats_check(n, j)
        recording_check(n, j, want_setting=n != "prealloc")
    # the summary's verdict is on the job's framework series once it has enough points (40)
    lines = {n: next((" ".join(x.split()) for x in " ".join(j["summary"].split()).split(" leak: ")[1:2]), None)
             for n, j in jobs.items()}
    check("summary", len(jobs) == 3 and all(x and "(jax, pid " in x for x in lines.values()),
          "; ".join(f"{n}: leak: {(x or 'no leak line')[:160]}" for n, x in lines.items()))
    check("jobs", len(jobs) == 3 and all(not j["torch_imported"] and j["auto"] == "jax" and j["framework"] == "jax"
                                         for j in jobs.values()),
          "; ".join(f"{n}: torch imported {j['torch_imported']}, auto {j['auto']}" for n, j in jobs.items())
          + f" ({len(jobs)} of 3 jobs gave figures)")

    results["seconds"] = time.time() - t0
    failed = [c["name"] for c in results["checks"] if not c["ok"]]
    say(f"== {len(results['checks']) - len(failed)} passed, {len(failed)} failed {failed} in {results['seconds']:.0f} s")
    with open(os.path.join(a.out, "jax_check.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(a.out, "jax_check.txt"), "w") as f:
        f.write("\n".join(log_lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
