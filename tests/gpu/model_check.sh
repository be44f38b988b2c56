#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# model_check.sh — one run, one answer, on a real GPU: builds gpumon and its Python package, runs
# a clean torch job of about 30 s and a leaking one side by side under `gpumon run` (default
# settings), then a leaking job next to a real co-tenant holding 20 GiB until it runs out of memory;
# then holds what `gpumon run` said against `gpumon report --json`, `gpumon serve --replay`,
# `gpumon watch --batch --replay` and the Python package's gpumon.report() (tests/consistency/
# frontends.py), and the time to out-of-memory next to the co-tenant against what really happened.
# Usage, from the repository root:   OUT=gpu-out bash tests/gpu/model_check.sh
# Needs the driver, python3 with torch, cmake, gcc (tests/gpu/README.md for the libraries).
# Writes $OUT/model_check.json, $OUT/model_check.txt and $OUT/model_runs.tar.gz (the recordings and
# summaries). Exit status 0 when every check held. About 3 minutes.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
PY=${PYTHON:-python3}
WORK=$(mktemp -d)
HOLDER=
cleanup() {
	[ -n "$HOLDER" ] && kill "$HOLDER" 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

. tests/gpu/deps.sh
gpumon_build "$BUILD" gpumon gpumon_python >"$OUT/model_build.log" 2>&1 || {
	echo "build failed (see $OUT/model_build.log)"
	exit 2
}
G=$BUILD/cli/gpumon

# a clean job and a leaking one, side by side (each is the other's co-tenant: each is judged on its own)
"$G" run -o "$WORK/clean.gpumon" -- "$PY" tests/gpu/trainer.py custom --steps 1000 --sleep 0.012 \
	>"$WORK/clean.out" 2>"$WORK/clean.err" &
a=$!
"$G" run -o "$WORK/leak.gpumon" -- "$PY" tests/gpu/trainer.py custom --leak-kib 4096 --steps 1000 --sleep 0.012 \
	>"$WORK/leak.out" 2>"$WORK/leak.err" &
b=$!
wait $a
echo "$?" >"$WORK/clean.rc"
wait $b
echo "$?" >"$WORK/leak.rc"

# a leak next to a co-tenant holding 20 GiB (outside the job's tree), until out of memory
"$PY" tests/gpu/oom_job.py hold 20 "$WORK/held" >"$WORK/hold.log" 2>&1 &
HOLDER=$!
for _ in $(seq 600); do [ -e "$WORK/held" ] && break; sleep 0.1; done
echo "$HOLDER" >"$WORK/holder.pid"
timeout 150 "$G" run -o "$WORK/cotenant.gpumon" -- "$PY" tests/gpu/trainer.py custom --leak-kib 131072 \
	--steps 100000 --sleep 0.02 >"$WORK/cotenant.out" 2>"$WORK/cotenant.err"
echo "$?" >"$WORK/cotenant.rc"
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
HOLDER=

GPUMON_BIN=$G PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH} "$PY" tests/gpu/model_check.py "$WORK" \
	"$OUT/model_check.json" | tee "$OUT/model_check.txt"
rc=${PIPESTATUS[0]}
tar -C "$WORK" -czf "$OUT/model_runs.tar.gz" --exclude held .
exit "$rc"
