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
PY=${PYTHON:-python3}

. tests/gpu/deps.sh
gpumon_ready "$OUT/fit_build.log" gpumon gpumon_python || exit 1
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
PYTHONUNBUFFERED=1 "$PY" tests/gpu/fit_check.py --gpumon "$BUILD/cli/gpumon" --out "$OUT" "$@" 2>&1 |
	tee "$OUT/fit_check.txt"
exit "${PIPESTATUS[0]}"
