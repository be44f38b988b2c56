#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fit_check.sh — `gpumon fit` on a real GPU, from the repository root:
#   OUT=gpu-out bash tests/gpu/fit_check.sh [--models mlp,resnet,bert,gpt2]
# Builds gpumon (Release) unless GPUMON_PREBUILT=DIR names one, then tests/gpu/fit_check.py: for an
# MLP, a ResNet-like CNN, BERT-base and GPT-2-small (tests/gpu/fit_train.py, built from configs, no
# downloads) the answer of `gpumon fit --verify` against the true largest batch (bisection), its
# predicted peak against the verified run's, its time against Lightning's BatchSizeFinder; then the
# answer next to a real 60 GiB co-tenant. Needs the driver, python3 with torch, transformers and
# lightning. Writes $OUT/fit_check.json and $OUT/fit_check.txt; exit 0 when every check held.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
PY=${PYTHON:-python3}

. tests/gpu/deps.sh
if [ -n "${GPUMON_PREBUILT:-}" ]; then
	BUILD=$(cd "$GPUMON_PREBUILT" && pwd)
	export LD_LIBRARY_PATH="$BUILD${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
elif ! gpumon_build "$BUILD" gpumon gpumon_python >"$OUT/fit_build.log" 2>&1; then
	echo "FAIL build; last lines of $OUT/fit_build.log:"
	tail -n 25 "$OUT/fit_build.log"
	exit 1
fi
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONUNBUFFERED=1 "$PY" tests/gpu/fit_check.py --gpumon "$BUILD/cli/gpumon" --out "$OUT" "$@" 2>&1 |
	tee "$OUT/fit_check.txt"
exit "${PIPESTATUS[0]}"
