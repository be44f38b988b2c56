#!/bin/sh
# SPDX-License-Identifier: MIT
# Time and memory of `gpumon report` on a synthetic day-long recording (bench/gen_day.c: one GPU,
# a device row a second, 10 framework samples a second with a slow leak) and on a CSV of a million
# rows. Runs against the fake NVML (only the device table comes from it), so any machine will do.
#   BUILD=build sh bench/bench_report.sh
set -eu
BUILD=${BUILD:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GPUMON_NVML_LIBRARY="$root/$BUILD/tests/fake_nvml/libnvidia-ml-fake.so"
export FAKE_NVML_SCENARIO="$root/tests/fake_nvml/scenarios/h200.scn"
"$root/$BUILD/bench/gpumon_gen_day" "$tmp/day.gpumon" 24
ls -l "$tmp/day.gpumon" | awk '{printf "recording: %.1f MB\n", $5 / 1e6}'
python3 - "$tmp/day.csv" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("time,step,allocated,reserved,device_used,device_total\n")
    for i in range(1_000_000):
        a = (2 << 30) + (i % 97) * (1 << 20)
        f.write(f"{i * 0.001:.3f},{i},{a},{a + (1 << 30)},{a + (2 << 30)},{80 << 30}\n")
PY
ls -l "$tmp/day.csv" | awk '{printf "csv: %.1f MB\n", $5 / 1e6}'
for input in day.gpumon day.csv; do
  for run in 1 2 3; do
    /usr/bin/time -f "$input run $run: %e s wall, %U s user, %S s sys, %M KiB max RSS" \
      "$root/$BUILD/cli/gpumon" report "$tmp/$input" --json >/dev/null
  done
done
