#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bundle_recording.sh — on a GPU machine, makes the recording that `gpumon watch` plays when there
# is no driver (examples/recordings/): `gpumon record` of the whole machine while a torch training
# job with a leak (tests/gpu/trainer.py leak_cache: one activation kept per step) runs, then a
# quiet tail after it ends. Writes $OUT/h200_train_leak.gpumon and a report of it.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
. tests/gpu/deps.sh
gpumon_build "$BUILD" gpumon >/dev/null || { echo "build failed"; exit 1; }
rec="$OUT/h200_train_leak.gpumon"
rm -f "$rec"
"$BUILD/cli/gpumon" record -o "$rec" --interval 10 &
recorder=$!
sleep 3
python3 tests/gpu/trainer.py leak_cache --steps "${STEPS:-1500}" > "$OUT/bundle_job.txt" 2>&1 || echo "job exit $?"
sleep 5
kill -INT "$recorder"
wait "$recorder"
ls -la "$rec"
"$BUILD/cli/gpumon" report "$rec" > "$OUT/bundle_report.txt" 2>&1
cat "$OUT/bundle_report.txt"
