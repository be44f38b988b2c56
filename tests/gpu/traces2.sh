#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# traces2.sh — records the second trace corpus (examples/traces/, README there) on a GPU machine:
# staircase leaks of several sizes and step lengths, clean runs of 10,000+ steps with warm-up,
# caching, dynamic shapes and one-off floor jumps, 30 s clean and leaking jobs, and a leak that
# runs out of memory next to a 20 GiB co-tenant. Every job runs under `gpumon run` at its default
# settings and reports torch's figures after every step. Recordings go to $OUT/traces2.tar.gz.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
T=$(mktemp -d)
. tests/gpu/deps.sh
gpumon_build "$BUILD" gpumon >"$OUT/traces2-build.log" 2>&1 || { echo "build failed"; tail "$OUT/traces2-build.log"; exit 1; }
G="$BUILD/cli/gpumon"
# name | trainer options (behaviour custom). The names say the label; the list after HOLDOUT is
# kept out of tuning.
tune=(
	"leak_stair_1m|--dynamic --leak-kib 1024 --steps 800 --sleep 0.01"
	"leak_stair_2m_slow|--leak-kib 2048 --steps 400 --sleep 0.05"
	"leak_late|--dynamic --leak-kib 2048 --leak-from 0.5 --steps 1200 --sleep 0.005"
	"leak_30s|--leak-kib 4096 --steps 1500 --sleep 0.015"
	"clean_30s|--steps 1500 --sleep 0.015"
	"clean_dyn_10k|--dynamic --steps 10000 --batch 4 --hidden 512 --sleep 0"
	"clean_jumps_10k|--late-state 0.3 --cache-once 0.7:256 --rare-long 0.5 --steps 10000 --batch 4 --hidden 512 --sleep 0"
)
hold=(
	"holdout_leak_stair_512k|--dynamic --leak-kib 512 --steps 3000 --batch 8 --sleep 0.002"
	"holdout_leak_slowstep|--dynamic --leak-kib 1024 --steps 300 --sleep 0.1"
	"holdout_leak_min_rate|--leak-kib 32 --steps 3000 --batch 4 --hidden 512 --sleep 0.01"
	"holdout_clean_warmcache_10k|--warm-cache 2000 --dynamic --steps 10000 --batch 4 --hidden 512 --sleep 0"
	"holdout_clean_late_long_12k|--dynamic --rare-long 0.85 --steps 12000 --batch 4 --hidden 512 --sleep 0"
)
for e in "${tune[@]}" "${hold[@]}"; do
	name=${e%%|*}
	opts=${e#*|}
	s=$(date +%s%N)
	# shellcheck disable=SC2086
	timeout 90 "$G" run -q -o "$T/$name.gpumon" -- python3 tests/gpu/trainer.py custom $opts >"$T/$name.log" 2>&1
	rc=$?
	echo "$name: exit $rc in $((($(date +%s%N) - s) / 1000000)) ms: $(tail -n 1 "$T/$name.log")"
	tar -C "$T" -czf "$OUT/traces2.tar.gz" . # what is done comes back even if time runs out
done
# a leak that runs out of memory next to a co-tenant holding 20 GiB (outside the job's tree)
python3 tests/gpu/oom_job.py hold 20 "$T/held" >"$T/hold.log" 2>&1 &
HOLDER=$!
for _ in $(seq 100); do [ -e "$T/held" ] && break; sleep 0.1; done
timeout 120 "$G" run -q -o "$T/leak_cotenant_oom.gpumon" -- python3 tests/gpu/trainer.py custom \
	--leak-kib 131072 --steps 100000 --sleep 0.02 >"$T/leak_cotenant_oom.log" 2>&1
echo "leak_cotenant_oom: exit $? (co-tenant pid $HOLDER): $(grep -c 'out of memory' "$T/leak_cotenant_oom.log") OOM lines"
echo "$HOLDER" >"$T/leak_cotenant_oom.holder"
kill "$HOLDER" 2>/dev/null; wait "$HOLDER" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$T/machine.txt"
python3 -c 'import torch; print("torch", torch.__version__)' >>"$T/machine.txt"
tar -C "$T" -czf "$OUT/traces2.tar.gz" .
ls -la "$T"
