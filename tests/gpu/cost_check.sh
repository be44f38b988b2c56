#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# cost_check.sh — gpumon's costs beside their floors on a real GPU, in one run, from the repository
# root:   OUT=gpu-out bash tests/gpu/cost_check.sh
# Builds gpumon and gpumon_bench_floor (Release) unless GPUMON_PREBUILT=DIR names a build with both,
# then bench/bench_cost.py: a one-shot query beside nvidia-smi and the NVML floor, the exporter's RSS
# beside a bare NVML loop's, watch at 100 ms beside a 100 ms C loop, 1 kHz sampling beside the floor
# loop and pynvml. Writes $OUT/cost.txt and $OUT/cost.json. About 5 minutes; keep the GPU idle.
set -u
. tests/gpu/deps.sh
gpu_out
gpumon_ready "$OUT/cost_build.log" gpumon gpumon_bench_floor || exit 1
export GPUMON_BIN=$BUILD/cli/gpumon GPUMON_FLOOR=$BUILD/bench/gpumon_bench_floor PYTHON=$PY
{
	echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')  commit: $(git rev-parse --short HEAD 2>/dev/null)  gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1)"
	echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"
} | tee "$OUT/cost.txt"
"$PY" bench/bench_cost.py --json "$OUT/cost.json" 2>&1 | tee -a "$OUT/cost.txt"
exit "${PIPESTATUS[0]}"
