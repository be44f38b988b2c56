#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# traces.sh — records the labelled traces of tests/gpu/trainer.py under `gpumon run` on a GPU
# machine, one recording per behaviour, into $OUT (default ./gpu-out). They become the leak
# detector's evaluation corpus (examples/traces/).
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
. tests/gpu/deps.sh
gpumon_build "$BUILD" gpumon >/dev/null || { echo "build failed"; exit 1; }
for b in clean_warmup clean_dynamic clean_rare_long clean_late_state leak_graph leak_cache leak_slow; do
	rm -f "$OUT/$b.gpumon"
	"$BUILD/cli/gpumon" run -q -o "$OUT/$b.gpumon" --interval 10 --gpu 0 -- \
		python3 tests/gpu/trainer.py "$b" --steps "${STEPS:-400}" || echo "$b: exit $?"
	ls -la "$OUT/$b.gpumon"
done
