#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# serve_check.sh — `gpumon serve` on a real NVIDIA GPU: builds gpumon, starts a small CUDA job
# (torch, 1 GiB) so there is a process to see, starts `gpumon serve` on loopback, scrapes it once
# and diffs it against nvidia-smi (--query-gpu and --query-compute-apps): memory total, used,
# free, reserved, utilisation, temperature, power, and each process's memory. Then times 500
# scrapes (p50, p99) and reads the exporter's resident memory with the real NVML loaded.
# Usage, from the repository root:   OUT=gpu-out bash tests/gpu/serve_check.sh
# Needs: the driver, nvidia-smi, cmake, gcc, python3 (torch optional: without it no process is
# compared); libevent from the system or unpacked under .deps/libevent (tests/gpu/README.md).
# Writes $OUT/serve_check.txt (the verdicts), $OUT/serve_check.json, $OUT/serve_metrics.txt (the
# scrape). Exit status 0 when every comparison passed, 1 on a mismatch, 2 when it could not run.
# About 1 minute.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-serve-build}
PY=${PYTHON:-python3}

. tests/gpu/deps.sh

txt=$OUT/serve_check.txt
: >"$txt"
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

echo "== build" | tee -a "$txt"
if ! gpumon_build "$BUILD" gpumon >"$tmp/build.log" 2>&1; then
	tail -30 "$tmp/build.log" | tee -a "$txt"
	exit 2
fi
grep -i "warning.*libevent" "$tmp/build.log" | tee -a "$txt"

# a CUDA job holding 1 GiB, so that there is a process to compare
if "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	"$PY" -c '
import sys, time, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
open(sys.argv[1], "w").close()
time.sleep(120)' "$tmp/ready" &
	pids+=($!)
	for _ in $(seq 300); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
	[ -e "$tmp/ready" ] && echo "torch job holds 1 GiB on GPU 0" | tee -a "$txt"
else
	echo "no torch with CUDA: no process to compare" | tee -a "$txt"
fi

"$BUILD/cli/gpumon" serve --listen 127.0.0.1:0 --processes all 2>"$tmp/serve.err" &
pids+=($!)
serve_pid=$!
for _ in $(seq 100); do grep -q serving "$tmp/serve.err" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*/metrics' "$tmp/serve.err")
if [ -z "$url" ]; then
	cat "$tmp/serve.err" | tee -a "$txt"
	exit 2
fi
sleep 1.5 # one slow round (utilisation, power ...) after start

"$PY" - "$url" "$serve_pid" "$OUT" <<'PYEOF' 2>&1 | tee -a "$txt"
import json, re, subprocess, sys, time, urllib.request
url, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
MIB = 1 << 20

def scrape():
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.headers.get("Content-Type"), r.read().decode()

def smi(args):
    return [[c.strip() for c in l.split(",")] for l in subprocess.run(["nvidia-smi"] + args, capture_output=True,
            text=True, check=True).stdout.strip().splitlines() if l.strip()]

gpu_q = "index,uuid,memory.total,memory.used,memory.free,memory.reserved,utilization.gpu,temperature.gpu,power.draw"
before = smi([f"--query-gpu={gpu_q}", "--format=csv,noheader,nounits"])
ctype, body = scrape()
after = smi([f"--query-gpu={gpu_q}", "--format=csv,noheader,nounits"])
apps = smi(["--query-compute-apps=pid,used_memory,gpu_uuid", "--format=csv,noheader,nounits"])
open(f"{out}/serve_metrics.txt", "w").write(body)

samples = {}
for line in body.splitlines():
    m = re.match(r'^([a-z_]+)\{(.*)\} (\S+)$', line)
    if m:
        labels = dict(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', m.group(2)))
        samples.setdefault(m.group(1), []).append((labels, float(m.group(3))))

def val(name, **want):
    rows = [v for l, v in samples.get(name, []) if all(l.get(k) == x for k, x in want.items())]
    return rows[0] if len(rows) == 1 else None

checks = []
def check(what, got, lo, hi):
    ok = got is not None and lo <= got <= hi
    checks.append({"check": what, "gpumon": got, "expected_from": lo, "expected_to": hi, "ok": ok})
    print(f"{'ok  ' if ok else 'FAIL'} {what}: gpumon {got} expected [{lo}, {hi}]")

check("content type", 1 if ctype == "text/plain; version=0.0.4; charset=utf-8" else 0, 1, 1)
for b, a in zip(before, after):
    idx, uuid = b[0], b[1]
    def rng(col, scale, slack):
        vals = [float(x[col]) * scale for x in (b, a) if x[col] not in ("[N/A]", "[Not Supported]")]
        return (min(vals) - slack, max(vals) + slack) if vals else (None, None)
    check(f"GPU {idx} up", val("gpumon_gpu_up", uuid=uuid), 1, 1)
    # nvidia-smi prints whole MiB (rounded): allow 1 MiB, and what moved between the two calls
    for col, name in ((2, "total"), (3, "used"), (4, "free"), (5, "reserved")):
        lo, hi = rng(col, MIB, 1 * MIB)
        if lo is not None:
            check(f"GPU {idx} memory {name} bytes", val(f"gpumon_memory_{name}_bytes", uuid=uuid), lo, hi)
    lo, hi = rng(6, 0.01, 0.25)   # utilisation moves: 25 points
    if lo is not None:
        check(f"GPU {idx} utilization ratio", val("gpumon_utilization_ratio", uuid=uuid), max(lo, 0), min(hi, 1))
    lo, hi = rng(7, 1, 3)         # temperature: 3 C
    if lo is not None:
        check(f"GPU {idx} temperature C", val("gpumon_temperature_celsius", uuid=uuid), lo, hi)
    lo, hi = rng(8, 1, 0)         # power: 25 % or 30 W
    if lo is not None:
        check(f"GPU {idx} power W", val("gpumon_power_watts", uuid=uuid), min(lo * 0.75, lo - 30), max(hi * 1.25, hi + 30))
    peak = val("gpumon_memory_used_peak_bytes", uuid=uuid)
    used = val("gpumon_memory_used_bytes", uuid=uuid)
    check(f"GPU {idx} peak >= used", None if peak is None or used is None else peak - used, 0, float("inf"))
for p, used, uuid in apps:
    if used in ("[N/A]", "[Not Supported]"):
        continue
    check(f"process {p} on {uuid[:12]} bytes", val("gpumon_process_memory_used_bytes", pid=p, uuid=uuid),
          float(used) * MIB - MIB, float(used) * MIB + MIB)
smi_pids = {(p, u) for p, _, u in apps}
exp_pids = {(l["pid"], l["uuid"]) for l, _ in samples.get("gpumon_process_memory_used_bytes", [])}
check("processes: same set as --query-compute-apps", 1 if exp_pids >= smi_pids else 0, 1, 1)

# scrape latency and the exporter's memory with the real NVML loaded
lat = []
for _ in range(500):
    t = time.perf_counter()
    scrape()
    lat.append((time.perf_counter() - t) * 1000)
lat.sort()
status = open(f"/proc/{pid}/status").read()
rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
hwm = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
priv = sum(int(x) for x in re.findall(r"^Private_Dirty:\s+(\d+)", open(f"/proc/{pid}/smaps_rollup").read(), re.M))
fig = {"scrape_ms_p50": round(lat[249], 3), "scrape_ms_p99": round(lat[494], 3), "page_bytes": len(body),
       "samples": sum(len(v) for v in samples.values()), "rss_kib": rss, "rss_peak_kib": hwm, "private_dirty_kib": priv}
print("figures (python urllib client, one connection per scrape): " + json.dumps(fig))
fails = [c for c in checks if not c["ok"]]
json.dump({"checks": checks, "figures": fig, "failed": len(fails)}, open(f"{out}/serve_check.json", "w"), indent=1)
print(f"{len(checks) - len(fails)}/{len(checks)} checks passed")
sys.exit(1 if fails else 0)
PYEOF
rc=${PIPESTATUS[0]}
echo "exit status $rc" | tee -a "$txt"
exit "$rc"
