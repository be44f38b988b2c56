#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# trainers_check.sh — gpumon's trainer callbacks on a real GPU, from the repository root:
#   bash tests/gpu/trainers_check.sh          (results in ./gpu-out, or in $OUT when set)
# Builds libgpumon, gpumon and the extension in Release, then runs tests/gpu/trainers_check.py: a
# small Lightning model and a small BERT under the Hugging Face Trainer (built locally, no
# download), each clean and with a planted 2 MiB-a-step leak, the four runs side by side: the leak
# told within 200 steps at its rate (within 10 %) as one line on stderr, the clean runs not, the
# logged figures equal to torch.cuda.memory_allocated() at the same step, and the built-in action's
# checkpoint before a projected out-of-memory. Arguments go to trainers_check.py (--only hf: one
# trainer). Needs torch with CUDA, lightning (or pytorch_lightning) and transformers; tensorboard
# optional. About 2 minutes; stops within 150 s (TRAINERS_CHECK_DEADLINE_S). Files in $OUT (7):
# trainers_check.txt trainers_check.json and the four runs' output (lightning-leak.stderr ...).
# Exit status 0 when every check passed.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build-trainers}
PY=${PYTHON:-python3}
start=$(date +%s)
deadline=$((start + ${TRAINERS_CHECK_DEADLINE_S:-150}))
left() { echo $((deadline - $(date +%s))); }

. tests/gpu/deps.sh

GPUMON_BUILD_TIMEOUT=${GPUMON_BUILD_TIMEOUT:-90} gpumon_build "$BUILD" gpumon gpumon_python >"$OUT/trainers_check.txt" 2>&1
if [ $? -ne 0 ] || [ ! -f "$BUILD/python/gpumon/_gpumon.abi3.so" ]; then
	echo "build failed; last lines of $OUT/trainers_check.txt:"
	tail -n 25 "$OUT/trainers_check.txt"
	exit 1
fi
echo "built in $(($(date +%s) - start)) s"
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
# the runs' own warnings are theirs; the check counts gpumon's lines
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

if [ "$(left)" -lt 70 ]; then  # the runs take about a minute
	echo "FAIL build: $(($(date +%s) - start)) s, too little time left for the runs" | tee -a "$OUT/trainers_check.txt"
	exit 1
fi
tmp=$(mktemp -d)
runs_s=$(($(left) - 10))
timeout "$(left)" "$PY" tests/gpu/trainers_check.py --out "$tmp" --deadline-s "$runs_s" "$@" 2>&1 | tail -n 40
rc=${PIPESTATUS[0]}
[ -f "$tmp/trainers_check.txt" ] && cat "$tmp/trainers_check.txt" >>"$OUT/trainers_check.txt"
for f in trainers_check.json lightning-leak.stderr lightning-clean.stderr hf-leak.stderr hf-clean.stderr; do
	[ -f "$tmp/$f" ] && cp "$tmp/$f" "$OUT/$f"
done
rm -rf "$tmp"
[ "$rc" -eq 124 ] && echo "trainers_check.py ran past the deadline" | tee -a "$OUT/trainers_check.txt"
echo "total $(($(date +%s) - start)) s; files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
exit "$rc"
