#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# run.sh — the whole real-GPU check in one go, from the repository root, on a machine with an
# NVIDIA GPU, its driver, nvidia-smi, python3 with torch and pynvml:
#   bash tests/gpu/run.sh                  (results in ./gpu-out, or in $OUT when set)
# Steps: (1) record the machine, (2) build gpumon and the benchmark in Release, (3) compare gpumon
# with nvidia-smi and NVML (tests/gpu/compare.py), (4) run the benchmarks (bench/run_bench.sh).
# A failed step is recorded and the next steps still run. Exit status: 0 when every comparison
# passed, 1 otherwise. Takes about 2 minutes; every step has a time limit and the whole script
# stops within 7.5 minutes (RUN_DEADLINE_S, seconds).
# Files written to $OUT (8): env.txt run.log compare.txt compare.json rounding.txt mainview.txt
# bench.txt bench.json.
set -u

OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OUT
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
export GPUMON_BUILD=$BUILD
PY=${PYTHON:-python3}
export PYTHON=$PY
log=$OUT/run.log
: >"$log"

# Debian's jansson and sqlite3 unpacked under .deps/ for machines that do not have them
# (tests/gpu/README.md says how); tests/gpu/deps.sh sets CMake and the loader up for them
. tests/gpu/deps.sh

steps=()
step() { # step NAME STATUS SECONDS
	steps+=("$(printf '%-14s %-10s %5s' "$1" "$2" "$3")")
	printf '### step %s: %s (%s s)\n' "$1" "$2" "$3" >>"$log"
}
now() { date +%s; }
deadline=$(($(now) + ${RUN_DEADLINE_S:-450}))
# limit WANT [RESERVE]: seconds a step may take: WANT, less when the deadline minus RESERVE (time
# kept for the later steps) is nearer
limit() {
	local want=$1 rest=$((deadline - $(now) - ${2:-0}))
	[ "$rest" -lt "$want" ] && want=$rest
	[ "$want" -lt 10 ] && want=10
	echo "$want"
}

# ---- (1) environment ----------------------------------------------------------------------------
t0=$(now)
{
	echo "date:    $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
	echo "uname:   $(uname -a)"
	echo "cpu:     $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
	echo "memory:  $(free -g | awk '/^Mem:/ {print $2 " GiB"}')"
	echo "commit:  $(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)"
	echo "gcc:     $(gcc --version 2>&1 | head -n1)"
	echo "cmake:   $(cmake --version 2>&1 | head -n1)"
	echo "python:  $("$PY" --version 2>&1)"
	"$PY" - <<'EOF' 2>&1
for mod in ("torch", "pynvml", "numpy"):
    try:
        m = __import__(mod)
        v = getattr(m, "__version__", None)
        if v is None and mod == "pynvml":
            try:
                from importlib.metadata import version
                v = version("nvidia-ml-py")
            except Exception:
                v = "?"
        print("%-8s %s" % (mod + ":", v))
    except Exception as e:
        print("%-8s missing (%s)" % (mod + ":", e))
EOF
	jansson=system
	for f in .deps/jansson/usr/lib/x86_64-linux-gnu/libjansson.so.*; do
		[ -e "$f" ] && jansson=$f
	done
	echo "jansson: $jansson"
	echo "libnvidia-ml: $(ldconfig -p 2>/dev/null | grep -m1 'libnvidia-ml.so.1' | sed 's/.*=> //')"
	echo
	echo "\$ nvidia-smi --query-gpu=driver_version,name,persistence_mode,pstate --format=csv"
	timeout 30 nvidia-smi --query-gpu=driver_version,name,persistence_mode,pstate --format=csv 2>&1
	echo
	echo "\$ nvidia-smi -q | head -n 40"
	timeout 30 nvidia-smi -q 2>&1 | head -n 40
	echo
	echo "\$ nvidia-smi"
	timeout 30 nvidia-smi 2>&1
} >"$OUT/env.txt" 2>&1
step environment ok $(($(now) - t0))
head -n 12 "$OUT/env.txt"

# ---- (2) build ----------------------------------------------------------------------------------
t0=$(now)
echo "== build into $BUILD"
{
	echo "\$ cmake -S . -B $BUILD -DCMAKE_BUILD_TYPE=Release -DGPUMON_TESTS=OFF ${prefix_args[*]}"
	timeout "$(limit 60 240)" cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DGPUMON_TESTS=OFF \
		"${prefix_args[@]}"
} >>"$log" 2>&1
cfg=$?
build_gpumon=FAIL
build_bench=FAIL
if [ $cfg -eq 0 ]; then
	timeout "$(limit 150 240)" cmake --build "$BUILD" -j16 --target gpumon >>"$log" 2>&1 &&
		build_gpumon=ok
	timeout "$(limit 60 240)" cmake --build "$BUILD" -j16 --target gpumon_bench_sample gpumon_bench_startup \
		>>"$log" 2>&1 && build_bench=ok
else
	echo "cmake configure failed (exit $cfg)" >>"$log"
fi
# the program's place in the build tree: cli/gpumon or gpumon
GPUMON_BIN=$BUILD/cli/gpumon
[ -x "$GPUMON_BIN" ] || GPUMON_BIN=$BUILD/gpumon
export GPUMON_BIN
step "build gpumon" "$build_gpumon" $(($(now) - t0))
step "build bench" "$build_bench" 0
if [ "$build_gpumon" != ok ] || [ "$build_bench" != ok ]; then
	echo "build failed: last lines of $log"
	grep -E 'error|Error|warning' "$log" | tail -n 20
fi

# ---- (3) comparison -----------------------------------------------------------------------------
t0=$(now)
compare_rc=1
if [ -x "$GPUMON_BIN" ]; then
	echo "== compare.py"
	climit=$(limit 240 100)
	timeout "$climit" "$PY" tests/gpu/compare.py --gpumon "$GPUMON_BIN" --out "$OUT" --quiet \
		--budget $((climit * 2 / 3)) 2>>"$log"
	compare_rc=$?
	if [ $compare_rc -eq 0 ]; then
		step compare ok $(($(now) - t0))
	elif [ $compare_rc -eq 124 ]; then
		step compare TIMEOUT $(($(now) - t0))
	else
		step compare "FAIL($compare_rc)" $(($(now) - t0))
	fi
else
	step compare "NOT RUN" 0
fi

# ---- (4) benchmarks -----------------------------------------------------------------------------
t0=$(now)
echo "== bench/run_bench.sh"
timeout "$(limit 150)" bash bench/run_bench.sh 2>>"$log"
bench_rc=$?
if [ $bench_rc -eq 0 ]; then
	step bench ok $(($(now) - t0))
else
	step bench "FAIL($bench_rc)" $(($(now) - t0))
fi

# ---- summary ------------------------------------------------------------------------------------
{
	echo
	echo "== summary =="
	printf '%-14s %-10s %5s\n' step status secs
	printf '%s\n' "${steps[@]}"
	"$PY" - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
try:
    c = json.load(open(os.path.join(out, "compare.json")))
    n = c["counts"]
    print("compare: %d PASS, %d FAIL, %d WARN, %d SKIP" % (n["PASS"], n["FAIL"], n["WARN"],
                                                           n["SKIP"]))
    for ch in c["checks"]:
        if ch["status"] == "FAIL":
            print("  FAIL %s/%s: %s" % (ch["section"], ch["name"], ch["detail"][:200]))
    for q, r in c["rounding"]["conclusion"].items():
        print("  rounding %-26s %s" % (q, r["rule"]))
except Exception as e:
    print("compare: no results (%s)" % e)
try:
    b = json.load(open(os.path.join(out, "bench.json")))
    for g in b["goals"]:
        v = g["value"]
        print("goal %-16s %s (<= %s) %s" % (g["goal"], "n/a" if v is None else "%.3f" % v,
              g["limit"], "met" if g["met"] else ("MISSED" if v is not None else "n/a")))
except Exception as e:
    print("bench: no results (%s)" % e)
EOF
	echo "files in $OUT: $(cd "$OUT" && printf '%s ' *)"
} | tee -a "$log"

[ $compare_rc -eq 0 ] || exit 1
exit 0
