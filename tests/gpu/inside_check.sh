#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# inside_check.sh — the inside view of `gpumon run` on a real GPU, from the repository root:
#   OUT=gpu-out bash tests/gpu/inside_check.sh [--only frag,leak,...] [--no-bench]
# Builds gpumon and its Python package (Release), then tests/gpu/inside_check.py runs the unmodified
# torch jobs of tests/gpu/inside_jobs.py under `gpumon run` — out of memory by fragmentation, by a
# leak, next to a co-tenant while growing, under a per-process fraction, too big from the start, at a
# transient evaluation peak; memory outside the allocator; a clean run — and holds the run summary
# and `gpumon report --json` against torch's message and NVML (1 %), the allocation sites of the leak
# and the fragmentation, then the inside view's cost on a training loop and the cost of condensing
# an out-of-memory snapshot of the whole card. Needs the driver, python3 with torch and pynvml,
# cmake, gcc (tests/gpu/README.md for the libraries). Writes $OUT/inside_check.json,
# $OUT/inside_check.txt, $OUT/inside_runs.tar.gz, $OUT/inside_build.log. Exit status 0 when every
# check held. About 8 minutes (3 with --no-bench; GPUMON_PREBUILT=DIR uses a Release build made
# elsewhere instead of building).
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
PY=${PYTHON:-python3}

. tests/gpu/deps.sh
start=$(date +%s)
if [ -n "${GPUMON_PREBUILT:-}" ]; then # a Release build made elsewhere, carried along
	BUILD=$(cd "$GPUMON_PREBUILT" && pwd)
	export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
	echo "prebuilt: $BUILD" >"$OUT/inside_build.log"
else
	gpumon_build "$BUILD" gpumon gpumon_python >"$OUT/inside_build.log" 2>&1
fi
if [ $? -ne 0 ] || [ ! -f "$BUILD/python/gpumon/_gpumon.abi3.so" ]; then
	echo "FAIL build; last lines of $OUT/inside_build.log:"
	tail -n 25 "$OUT/inside_build.log"
	exit 1
fi
echo "built in $(($(date +%s) - start)) s"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONUNBUFFERED=1 "$PY" tests/gpu/inside_check.py --gpumon "$BUILD/cli/gpumon" --out "$OUT" "$@" 2>&1 |
	tee "$OUT/inside_check.txt"
exit "${PIPESTATUS[0]}"
