#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# watch_cost.sh — where `gpumon watch --interval 100` spends its CPU on a real GPU, part by part:
# the whole (bench/bench_watch.py, twice), an XID event wait loop as the library runs it (NVML's
# nvmlEventSetWait_v2 in 100 ms slices), a memory read every 100 ms (gpumon query -lms 100, one
# field) and the memory health fields read every 100 ms (their cost a read); bench_watch.py gives
# each thread's share. Also nvidia-smi's reference answers and -l logs (smi_reference.sh).
# From the repository root:   OUT=gpu-out bash tests/gpu/watch_cost.sh      (about 3 minutes)
# Files: $OUT/watch_cost.txt, $OUT/smi.tar.gz.
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
. tests/gpu/deps.sh
exec > >(tee "$OUT/watch_cost.txt") 2>&1
gpumon_build "$BUILD" gpumon >"$OUT/watch_cost_build.log" 2>&1 || { echo "build failed"; tail -20 "$OUT/watch_cost_build.log"; exit 2; }
G=$BUILD/cli/gpumon
echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')  gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1)"
# CPU share of one core of PID over S seconds (all threads, schedstat ns)
cpu_of() {
	local p=$1 s=$2 a b
	a=$(cat /proc/$p/task/*/schedstat 2>/dev/null | awk '{t += $1} END {print t}')
	sleep "$s"
	b=$(cat /proc/$p/task/*/schedstat 2>/dev/null | awk '{t += $1} END {print t}')
	awk "BEGIN { printf \"%.3f\", ($b - $a) / 1e9 / $s * 100 }"
}
echo "== the whole: watch --interval 100, 20 s, twice"
for i in 1 2; do GPUMON_BIN=$G python3 bench/bench_watch.py --seconds 20 --intervals 100 --terminal pty 2>&1 | tail -2; done
echo "== an XID wait loop in 100 ms slices (the library's event thread), 10 s"
cat >/tmp/xidloop.c <<'CEOF'
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
typedef struct { void *device; unsigned long long type, data; unsigned gi, ci; } ev;
int main(void){ void*h=dlopen("libnvidia-ml.so.1",RTLD_NOW); int(*init)(void)=dlsym(h,"nvmlInit_v2");
 int(*hbi)(unsigned,void**)=dlsym(h,"nvmlDeviceGetHandleByIndex_v2"); int(*mk)(void**)=dlsym(h,"nvmlEventSetCreate");
 int(*reg)(void*,unsigned long long,void*)=dlsym(h,"nvmlDeviceRegisterEvents"); int(*wt)(void*,ev*,unsigned)=dlsym(h,"nvmlEventSetWait_v2");
 init(); void*d; hbi(0,&d); void*set; int r1=mk(&set); int r2=reg(d,8ull,set); printf("create %d register %d\n",r1,r2); fflush(stdout);
 struct timespec t0,t1; clock_gettime(CLOCK_MONOTONIC,&t0); int n=0; do { ev e; wt(set,&e,100); n++; clock_gettime(CLOCK_MONOTONIC,&t1);} while(t1.tv_sec-t0.tv_sec<12);
 printf("waits %d\n",n); return 0; }
CEOF
gcc -O2 -o /tmp/xidloop /tmp/xidloop.c -ldl && { /tmp/xidloop & xp=$!; sleep 1.5; echo "XID wait loop: $(cpu_of $xp 10) % of a core"; wait $xp; }
echo "== one memory field every 100 ms (gpumon query -lms 100), 10 s"
$G query --query-gpu=memory.used --format=csv,noheader -lms 100 >/dev/null & qp=$!; sleep 1.5
echo "query memory.used -lms 100: $(cpu_of $qp 10) % of a core"; kill $qp; wait $qp 2>/dev/null
echo "== the memory health fields every 100 ms, 10 s"
$G query --query-gpu=ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.aggregate.total,ecc.errors.uncorrected.aggregate.total,ecc.errors.corrected.volatile.dram,ecc.errors.uncorrected.volatile.dram,ecc.errors.corrected.volatile.sram,ecc.errors.uncorrected.volatile.sram,ecc.mode.current,ecc.mode.pending,retired_pages.single_bit_ecc.count,retired_pages.double_bit.count,retired_pages.pending,remapped_rows.correctable,remapped_rows.pending --format=csv,noheader -lms 100 >/dev/null & qp=$!; sleep 1.5
echo "query health fields -lms 100: $(cpu_of $qp 10) % of a core"; kill $qp; wait $qp 2>/dev/null
echo "== nvidia-smi references"
timeout 60 bash tests/gpu/smi_reference.sh >/dev/null 2>&1
tar -C "$OUT" -czf "$OUT/smi.tar.gz" smi && rm -rf "$OUT/smi"
ls -la "$OUT"
