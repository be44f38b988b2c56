#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# parity_check.sh — gpumon beside nvidia-smi and the floors on a real GPU, in one go, from the
# repository root:   OUT=gpu-out bash tests/gpu/parity_check.sh
# (1) compare.py: every query field (health, MIG mode, power, clocks, PCIe, timestamp, -f ...), -L,
# the main view, against nvidia-smi byte for byte; (2) what a one-shot query costs beside
# nvidia-smi and the NVML floor (bench/bench_oneshot.py, 30 alternated runs); (3) 1 kHz sampling
# beside the floor C loop and a pynvml loop (bench/bench_sampling.py); (4) watch at a 100 ms
# refresh (bench/bench_watch.py); (5) nvidia-smi's own -l logs and reference answers
# (smi_reference.sh), packed as $OUT/smi.tar.gz. Files: $OUT/parity_check.txt and each step's own.
# About 6 minutes.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OUT
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
PY=${PYTHON:-python3}
. tests/gpu/deps.sh
exec > >(tee "$OUT/parity_check.txt") 2>&1
echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')  commit: $(git rev-parse --short HEAD 2>/dev/null)  gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
gpumon_build "$BUILD" gpumon gpumon_bench_floor >"$OUT/parity_build.log" 2>&1 ||
	{ echo "build failed (see $OUT/parity_build.log)"; tail -20 "$OUT/parity_build.log"; exit 2; }
export GPUMON_BIN=$BUILD/cli/gpumon GPUMON_FLOOR=$BUILD/bench/gpumon_bench_floor
fail=0
echo "== (1) compare.py"
timeout 200 "$PY" tests/gpu/compare.py --gpumon "$GPUMON_BIN" --out "$OUT" --quiet --budget 170 || fail=1
echo "== (2) one-shot query"
timeout 90 "$PY" bench/bench_oneshot.py --runs 30 --json "$OUT/oneshot.json" || fail=1
echo "== (3) 1 kHz sampling"
timeout 150 "$PY" bench/bench_sampling.py --seconds 10 --rounds 3 --json "$OUT/sampling.json" || fail=1
echo "== (4) watch at 100 ms"
timeout 60 "$PY" bench/bench_watch.py --seconds 20 --intervals 100 --terminal pty --json "$OUT/watch.json" || fail=1
echo "== (5) nvidia-smi references"
timeout 60 bash tests/gpu/smi_reference.sh >/dev/null 2>&1
tar -C "$OUT" -czf "$OUT/smi.tar.gz" smi && rm -rf "$OUT/smi"
echo "parity_check: $([ $fail = 0 ] && echo all goals met || echo SOMETHING FAILED)"
exit $fail
