#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# jax_check.sh — a JAX job under `gpumon run` on a real GPU, from the repository root:
#   bash tests/gpu/jax_check.sh             (results in ./gpu-out, or in $OUT when set)
# Builds gpumon and the Python extension in Release, then runs tests/gpu/jax_check.py: under
# --no-prealloc the job's NVML figure is within 10 % of JAX's bytes_in_use + the CUDA context
# (measured by a job holding a 4-byte array), without it JAX holds 75 % of the card (+-5 points),
# GPUMonitor(framework="jax") equals Device.memory_stats() read at the same moment, and each run's
# recording and summary name jax (with JAX's limit as the allocator's cap). Needs jax with CUDA
# (jax[cuda12]) and numpy, and a GPU no other process holds much of; the jobs import no torch.
# JAX_CHECK_GPU picks gpumon run's --gpu (default auto). About 1-2 minutes; stops within 2.5
# (JAX_CHECK_DEADLINE_S). Files in $OUT: jax_check.txt jax_check.json, and per run (context,
# growing, prealloc) NAME.gpumon NAME.log NAME.json. Exit status 0 when every check passed.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build-jax}
PY=${PYTHON:-python3}
start=$(date +%s)
deadline=$((start + ${JAX_CHECK_DEADLINE_S:-150}))
left() { echo $((deadline - $(date +%s))); }

if ! "$PY" -c 'import jax, numpy' 2>/dev/null; then
	echo "FAIL setup: $PY cannot import jax and numpy"
	exit 1
fi

. tests/gpu/deps.sh

gpumon_build "$BUILD" gpumon gpumon_python >"$OUT/jax_check.build.txt" 2>&1
if [ $? -ne 0 ] || [ ! -f "$BUILD/python/gpumon/_gpumon.abi3.so" ]; then
	echo "FAIL build; last lines of $OUT/jax_check.build.txt:"
	tail -n 25 "$OUT/jax_check.build.txt"
	exit 1
fi
echo "built in $(($(date +%s) - start)) s"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"

timeout "$(left)" "$PY" tests/gpu/jax_check.py --gpumon "$BUILD/cli/gpumon" --out "$OUT" "$@"
rc=$?
[ "$rc" -eq 124 ] && echo "FAIL deadline: jax_check.py ran past $((deadline - start)) s" | tee -a "$OUT/jax_check.txt"
echo "total $(($(date +%s) - start)) s; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exit "$rc"
