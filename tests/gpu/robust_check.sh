#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# robust_check.sh — the sampler's threads and the output hygiene on a real GPU, from the repository
# root:   OUT=gpu-out bash tests/gpu/robust_check.sh
# (1) sampler CPU with one thread per GPU and a watchdog (gpumon_bench_sampler, 100 Hz and 1 kHz,
# 20 s each, into a recording) and `gpumon record --interval 1` for 20 s (CPU from /proc);
# (2) per-call costs (gpumon_bench_sample, 5,000 calls); (3) a CUDA process whose argv[0] holds a
# comma, quotes, an escape sequence and a newline: what nvidia-smi --query-compute-apps prints for
# it, byte for byte, beside gpumon query's CSV, show and watch --batch (no raw ESC may reach them).
# Files in $OUT: robust_check.txt (everything), hostile_*.bin (raw outputs). About 2 minutes.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
PY=${PYTHON:-python3}
. tests/gpu/deps.sh
exec > >(tee "$OUT/robust_check.txt") 2>&1
gpumon_build "$BUILD" gpumon gpumon_bench_sampler gpumon_bench_sample >"$OUT/robust_build.log" 2>&1 ||
	{ echo "build failed (see $OUT/robust_build.log)"; exit 2; }
G=$BUILD/cli/gpumon
fail=0
echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')  gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"

echo "== (1) sampler CPU (one GPU, idle, into a recording)"
for p in 10000 1000; do
	rm -f "/tmp/rs-$p.gpumon"
	"$BUILD/bench/gpumon_bench_sampler" -p $p -s 20 -o "/tmp/rs-$p.gpumon" || fail=1
done
echo "== gpumon record --interval 1 -i 0 for 20 s: CPU of the process"
rm -f /tmp/rr.gpumon
"$G" record --interval 1 -i 0 -o /tmp/rr.gpumon --duration 20 &
rp=$!
sleep 1
t0=$(awk '{print $14 + $15}' /proc/$rp/stat)
sleep 15
t1=$(awk '{print $14 + $15}' /proc/$rp/stat)
wait $rp
echo "gpumon record --interval 1: $(awk "BEGIN { printf \"%.2f\", ($t1 - $t0) / $(getconf CLK_TCK) / 15 * 100 }") % of a core over 15 s (utime+stime, $(getconf CLK_TCK) ticks/s)"

echo "== (2) per-call costs: gpumon_bench_sample -n 5000 -l idle"
timeout 90 "$BUILD/bench/gpumon_bench_sample" -n 5000 -l idle || fail=1

echo "== (3) a CUDA process with a hostile argv[0]"
NAME=$'evil, "quoted" \e]0;pwned\a\e[2J\nsecond line'
READY=$(mktemp)
# with a made-up argv[0] Python cannot find the venv it runs from (torch often lives in one): name
# the machine Python's packages
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
NAME="$NAME" READY="$READY" PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}" bash -c 'exec -a "$NAME" '"$(command -v "$PY")"' -c "
import os, time, torch
x = torch.empty(256 << 20, dtype=torch.uint8, device=\"cuda\"); torch.cuda.synchronize()
open(os.environ[\"READY\"], \"w\").write(\"1\")
time.sleep(60)
"' &
hp=$!
for _ in $(seq 300); do [ -s "$READY" ] && break; sleep 0.1; done
if [ ! -s "$READY" ]; then
	echo "FAIL the process with a hostile argv[0] did not start (no CUDA or torch for it): its checks are void"
	fail=1
fi
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >"$OUT/hostile_nvidia_smi.bin" 2>&1
"$G" query --query-compute-apps=pid,process_name,used_memory --format=csv >"$OUT/hostile_gpumon_query.bin" 2>&1
"$G" show >"$OUT/hostile_gpumon_show.bin" 2>&1
timeout 10 "$G" watch --batch -n 1 >"$OUT/hostile_gpumon_watch.bin" 2>&1
kill $hp 2>/dev/null
wait $hp 2>/dev/null
rm -f "$READY"
for f in nvidia_smi gpumon_query gpumon_show gpumon_watch; do
	echo "--- $f (od -c of the lines with pid $hp)"
	grep -a -A1 "$hp" "$OUT/hostile_$f.bin" | od -c | head -n 12
done
for f in gpumon_query gpumon_show gpumon_watch; do
	if grep -q $'\e' "$OUT/hostile_$f.bin" && [ "$f" = gpumon_query ]; then
		echo "FAIL raw ESC in $f"
		fail=1
	elif grep -a "$hp" "$OUT/hostile_$f.bin" | grep -q $'\e'; then
		echo "FAIL raw ESC in $f's row"
		fail=1
	else
		echo "ok   no raw ESC in $f's row"
	fi
done
rows=$(grep -a -c "^$hp," "$OUT/hostile_gpumon_query.bin")
lines=$(wc -l <"$OUT/hostile_gpumon_query.bin")
echo "gpumon query: $lines lines, the process's row starts $rows line(s)"
echo "robust_check: $([ $fail -eq 0 ] && echo PASS || echo FAIL)"
exit $fail
