#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# python_check.sh — the Python package on a real GPU with real torch, from the repository root:
#   bash tests/gpu/python_check.sh          (results in ./gpu-out, or in $OUT when set)
# Builds libgpumon, gpumon and the extension in Release, then runs tests/gpu/python_check.py
# (leak flagged within 100 steps sampled every step and within 30 s at the default sampling, clean
# loop not flagged, section() against torch's own peaks, TensorBoard read back by EventAccumulator,
# the process figure against pynvml, a record= recording against pynvml, `gpumon report` and
# gpumon.report(), the example under `gpumon run`, a training loop's slowdown at the default
# sampling, step() cost) and bench/bench_python.py; arguments go to python_check.py
# (--only record,run: just those checks). Needs torch with CUDA and tensorboard; pynvml optional.
# About 2-3 minutes;
# stops within 4 (PY_CHECK_DEADLINE_S). Files in $OUT (3): python_check.txt python_check.json
# bench_python.json. Exit status 0 when every check passed.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build-py}
PY=${PYTHON:-python3}
start=$(date +%s)
deadline=$((start + ${PY_CHECK_DEADLINE_S:-235}))
left() { echo $((deadline - $(date +%s))); }

. tests/gpu/deps.sh

gpumon_build "$BUILD" gpumon gpumon_python >"$OUT/python_check.txt" 2>&1
if [ $? -ne 0 ] || [ ! -f "$BUILD/python/gpumon/_gpumon.abi3.so" ]; then
	echo "build failed; last lines of $OUT/python_check.txt:"
	tail -n 25 "$OUT/python_check.txt"
	exit 1
fi
echo "built in $(($(date +%s) - start)) s"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"

timeout 25 "$PY" bench/bench_python.py --calls 1000000 --json "$OUT/bench_python.json" >/dev/null 2>&1 ||
	echo "bench_python.py did not finish (see its JSON, if any)"
tmp=$(mktemp -d)
timeout "$(left)" "$PY" tests/gpu/python_check.py --gpumon "$BUILD/cli/gpumon" --out "$tmp" "$@" 2>&1 | tail -n 40
rc=${PIPESTATUS[0]}
# python_check.py writes its own log; keep the build log in front of it
[ -f "$tmp/python_check.txt" ] && cat "$tmp/python_check.txt" >>"$OUT/python_check.txt"
[ -f "$tmp/python_check.json" ] && mv "$tmp/python_check.json" "$OUT/python_check.json"
rm -rf "$tmp"
[ "$rc" -eq 124 ] && echo "python_check.py ran past the deadline" | tee -a "$OUT/python_check.txt"
echo "total $(($(date +%s) - start)) s; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exit "$rc"
