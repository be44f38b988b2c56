#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run_bench.sh — runs the benchmarks (bench_sample.c's program, then bench_pynvml.py), writes
# $OUT/bench.txt and $OUT/bench.json, and prints the two ratios the project's goals are about:
#   gpumon memory sample / raw nvmlDeviceGetMemoryInfo_v2 call   (goal <= 1.2)
#   `gpumon query` process / the same `nvidia-smi` query process   (goal <= 0.5)
# Usage (from the repository root, after building; bench/README.md has the details):
#   OUT=gpu-out bash bench/run_bench.sh
# Environment: GPUMON_BUILD (default /tmp/gpumon-build), BENCH_N (200000), BENCH_RUNS (100),
# BENCH_WITH_PROCESS (auto|0|1: also time the process-list calls with a CUDA process alive),
# PYTHON (python3), GPUMON_NVML_LIBRARY (another NVML, e.g. the fake, for a smoke test).
set -u

here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-gpu-out}
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
BENCH_BIN=${BENCH_BIN:-$BUILD/bench/gpumon_bench_sample}
GPUMON_BIN=${GPUMON_BIN:-$BUILD/cli/gpumon}
[ -x "$GPUMON_BIN" ] || [ ! -x "$BUILD/gpumon" ] || GPUMON_BIN=$BUILD/gpumon
N=${BENCH_N:-200000}
RUNS=${BENCH_RUNS:-100}
PY=${PYTHON:-python3}
WITH_PROCESS=${BENCH_WITH_PROCESS:-auto}

mkdir -p "$OUT"
tmp=$(mktemp -d)
child=
# shellcheck disable=SC2317 # called by the trap
cleanup() {
	if [ -n "$child" ]; then
		kill "$child" 2>/dev/null
		wait "$child" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

status=0
echo "== gpumon_bench_sample (idle): $BENCH_BIN -n $N"
if [ -x "$BENCH_BIN" ]; then
	"$BENCH_BIN" -n "$N" -l idle -j "$tmp/sample.json" >"$tmp/sample.txt" 2>&1
	rc=$?
	# the JSON line is in the file; the table is what a person reads
	grep -v '^{' "$tmp/sample.txt"
	if [ $rc -ne 0 ]; then
		echo "gpumon_bench_sample exited $rc"
		status=1
	fi
else
	echo "no $BENCH_BIN: build the gpumon_bench_sample target first" | tee "$tmp/sample.txt"
	status=1
fi

# The process-list calls cost more with a process on the GPU (gpumon also reads /proc for it).
if [ "$WITH_PROCESS" = auto ]; then
	WITH_PROCESS=1
	[ -n "${GPUMON_NVML_LIBRARY:-}" ] && WITH_PROCESS=0 # a fake NVML lists no real process
fi
if [ "$WITH_PROCESS" = 1 ] && [ -x "$BENCH_BIN" ]; then
	echo "== gpumon_bench_sample (one CUDA process holding 1 GiB): -g proc -n $((N / 4))"
	"$PY" -u -c '
import os, time, torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.5)
' >"$tmp/child.out" 2>&1 &
	child=$!
	for _ in $(seq 1 240); do
		grep -q '^ready' "$tmp/child.out" && break
		kill -0 "$child" 2>/dev/null || break
		sleep 0.5
	done
	if grep -q '^ready' "$tmp/child.out"; then
		sleep 1
		"$BENCH_BIN" -n $((N / 4)) -g proc -l one-process -j "$tmp/sample_proc.json" \
			>"$tmp/sample_proc.txt" 2>&1 || status=1
		grep -v '^{' "$tmp/sample_proc.txt"
	else
		echo "the CUDA child did not start; skipped:"
		tail -n 5 "$tmp/child.out"
		tail -n 5 "$tmp/child.out" >"$tmp/sample_proc.txt"
	fi
	kill "$child" 2>/dev/null
	wait "$child" 2>/dev/null
	child=
fi

echo "== bench_pynvml.py: -n $N --runs $RUNS"
"$PY" "$here/bench_pynvml.py" -n "$N" --runs "$RUNS" --gpumon "$GPUMON_BIN" \
	--json "$tmp/py.json" >"$tmp/py.txt" 2>&1 || status=1
grep -v '^{' "$tmp/py.txt"

STARTUP_BIN=${STARTUP_BIN:-$BUILD/bench/gpumon_bench_startup}
echo "== gpumon_bench_startup: -r 30"
"$STARTUP_BIN" -r 30 >"$tmp/startup.txt" 2>&1 || status=1
cat "$tmp/startup.txt"

# Merge, write bench.txt / bench.json, print the goals.
"$PY" - "$tmp" "$OUT" <<'EOF'
import json, os, platform, sys, time
tmp, out = sys.argv[1], sys.argv[2]

def load(name):
    try:
        with open(os.path.join(tmp, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        return None

def text(name):
    try:
        with open(os.path.join(tmp, name)) as f:
            return "".join(l for l in f if not l.startswith("{"))
    except OSError:
        return ""

sample, sample_proc, py = load("sample.json"), load("sample_proc.json"), load("py.json")
goals = []

def goal(name, value, limit, what):
    ok = value is not None and value <= limit
    goals.append({"goal": name, "value": value, "limit": limit, "met": ok, "what": what})

r = (sample or {}).get("ratios_median", {})
goal("sample_overhead", r.get("gpumon_memory_over_raw_v2"), 1.2,
     "median gpumon_device_sample_read(F_MEMORY) / median raw nvmlDeviceGetMemoryInfo_v2")
rp = (py or {}).get("ratios", {})
goal("query_process", rp.get("gpumon_query_over_nvidia_smi_median"), 0.5,
     "median wall time of `gpumon query` / of the same nvidia-smi query, as processes")
info = {
    "gpumon_memory_over_raw_v2_mean":
        (sample or {}).get("ratios_mean", {}).get("gpumon_memory_over_raw_v2"),
    "gpumon_all_over_raw_v2_median": r.get("gpumon_all_over_raw_v2"),
    "gpumon_procs_over_raw_procs_v3_median_idle": r.get("gpumon_procs_over_raw_procs_v3"),
    "gpumon_procs_over_raw_procs_v3_median_one_process":
        (sample_proc or {}).get("ratios_median", {}).get("gpumon_procs_over_raw_procs_v3"),
    "gpumon_query_over_nvidia_smi_p90": rp.get("gpumon_query_over_nvidia_smi_p90"),
}
doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
       "kernel": platform.release(), "nvml_library": os.environ.get("GPUMON_NVML_LIBRARY") or
       "libnvidia-ml.so.1", "goals": goals, "other_ratios": info,
       "bench_sample": sample, "bench_sample_one_process": sample_proc, "bench_pynvml": py}
with open(os.path.join(out, "bench.json"), "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")

lines = ["gpumon benchmarks, %s, %s" % (doc["date"], doc["host"]),
         "NVML library: %s" % doc["nvml_library"], "",
         "== gpumon_bench_sample, idle GPU (per call, ns) ==", text("sample.txt"),
         "== gpumon_bench_sample, one CUDA process on the GPU (per call, ns) ==",
         text("sample_proc.txt") or "(not run)\n",
         "== bench_pynvml.py ==", text("py.txt"),
         "== gpumon_bench_startup (one-shot phases, ms) ==", text("startup.txt") or "(not run)\n",
         "== goals =="]
def fmt(v):
    return "n/a" if v is None else "%.3f" % v
for g in goals:
    lines.append("%-16s %6s  (goal <= %s) %-6s %s" % (
        g["goal"], fmt(g["value"]), g["limit"], "met" if g["met"] else
        ("MISSED" if g["value"] is not None else "n/a"), g["what"]))
lines.append("")
for k, v in info.items():
    lines.append("%-50s %s" % (k, fmt(v)))
report = "\n".join(lines) + "\n"
with open(os.path.join(out, "bench.txt"), "w") as f:
    f.write(report)
print("== goals ==")
print("\n".join(lines[lines.index("== goals ==") + 1:]))
EOF
exit $status
