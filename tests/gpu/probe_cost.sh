#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# probe_cost.sh — where a one-shot query, 1 kHz sampling and watch spend their time on a real GPU
# (exploration before tuning).  OUT=gpu-out bash tests/gpu/probe_cost.sh
set -u
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
. tests/gpu/deps.sh
exec > >(tee "$OUT/probe_cost.txt") 2>&1
gpumon_build "$BUILD" gpumon gpumon_bench_startup gpumon_bench_sampler >"$OUT/probe_build.log" 2>&1 || { echo build failed; tail -30 "$OUT/probe_build.log"; exit 2; }
G=$BUILD/cli/gpumon
cat > /tmp/noattach.c <<'CEOF'
#include <dlfcn.h>
#include <stdio.h>
#include <time.h>
typedef struct { unsigned long long total, free, used; } mem1;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(int argc,char**argv){ unsigned flags = argc>1? (unsigned)atoi(argv[1]):0;
 double t0=now(); void*h=dlopen("libnvidia-ml.so.1",RTLD_NOW); double t1=now();
 int(*initf)(unsigned)=dlsym(h,"nvmlInitWithFlags"); int(*hbi)(unsigned,void**)=dlsym(h,"nvmlDeviceGetHandleByIndex_v2");
 int(*mi)(void*,mem1*)=dlsym(h,"nvmlDeviceGetMemoryInfo"); int(*sd)(void)=dlsym(h,"nvmlShutdown");
 int r=initf(flags); double t2=now(); void*d=0; int r2=hbi(0,&d); double t3=now(); mem1 m={0}; int r3=mi(d,&m); double t4=now();
 int r4=sd(); double t5=now();
 printf("flags=%u dlopen %.2f init %.2f(rc%d) handle %.2f(rc%d) mem %.3f(rc%d used=%llu) shutdown %.2f(rc%d)\n",flags,t1-t0,t2-t1,r,t3-t2,r2,t4-t3,r3,m.used,t5-t4,r4);return 0;}
CEOF
gcc -O2 -o /tmp/noattach /tmp/noattach.c -ldl -include stdlib.h && for f in 0 2 0 2 0 2; do /tmp/noattach $f; done
echo "== startup phases"; "$BUILD/bench/gpumon_bench_startup" -r 20
echo "== one-shot wall ms, 30 alternated runs (median)"
for i in $(seq 30); do
 for c in "nvidia-smi --query-gpu=memory.used --format=csv,noheader" "$G query --query-gpu=memory.used --format=csv,noheader" "$G --version" "true"; do
  s=$(date +%s%N); $c >/dev/null 2>&1; e=$(date +%s%N); echo "$c|$(( (e-s)/1000 ))"; done
done > /tmp/oneshot.txt
awk -F'|' '{a[$1]=a[$1]" "$2} END {for (k in a) print k"|"a[k]}' /tmp/oneshot.txt | while IFS='|' read k v; do echo "$k: median $(echo $v | tr ' ' '\n' | sort -n | awk '{x[NR]=$1} END {print x[int((NR+1)/2)]/1000}') ms"; done
echo "== LD_DEBUG=statistics gpumon --version"; LD_DEBUG=statistics $G --version 2>&1 | grep -i "total startup\|relocation" | head -5
ldd $G | wc -l
strace -V >/dev/null 2>&1 && { strace -c -f $G query --query-gpu=memory.used --format=csv,noheader 2>&1 | tail -25; }
echo "== 1 kHz, 10 s each: floor C loop, pynvml, gpumon record"
cat > /tmp/floor.c <<'CEOF'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <sys/resource.h>
typedef struct { unsigned version; unsigned long long total, reserved, free, used; } mem2;
int main(int argc,char**argv){ double secs=atof(argv[1]); void*h=dlopen("libnvidia-ml.so.1",RTLD_NOW);
 int(*initf)(void)=dlsym(h,"nvmlInit_v2"); int(*hbi)(unsigned,void**)=dlsym(h,"nvmlDeviceGetHandleByIndex_v2");
 int(*mi)(void*,mem2*)=dlsym(h,"nvmlDeviceGetMemoryInfo_v2"); initf(); void*d; hbi(0,&d);
 struct rusage u0,u1; struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); getrusage(RUSAGE_SELF,&u0);
 long n=(long)(secs*1000); for(long i=0;i<n;i++){ t.tv_nsec+=1000000; if(t.tv_nsec>=1000000000){t.tv_nsec-=1000000000;t.tv_sec++;}
  clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&t,0); mem2 m={.version=(unsigned)(sizeof(mem2)|(2<<24))}; mi(d,&m);} getrusage(RUSAGE_SELF,&u1);
 double c=(u1.ru_utime.tv_sec-u0.ru_utime.tv_sec)+(u1.ru_utime.tv_usec-u0.ru_utime.tv_usec)/1e6+(u1.ru_stime.tv_sec-u0.ru_stime.tv_sec)+(u1.ru_stime.tv_usec-u0.ru_stime.tv_usec)/1e6;
 printf("floor C loop 1 kHz: %.2f %% of a core\n", c/secs*100); return 0;}
CEOF
gcc -O2 -o /tmp/floor /tmp/floor.c -ldl && /tmp/floor 10
python3 - <<'PYEOF'
import time, resource, pynvml
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.monotonic(); n = 10000
for i in range(n):
    t += 0.001
    d = t - time.monotonic()
    if d > 0: time.sleep(d)
    pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
r1 = resource.getrusage(resource.RUSAGE_SELF)
print("pynvml loop 1 kHz: %.2f %% of a core" % ((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / 10 * 100))
PYEOF
cpu_of() { local p=$1 s=$2; sleep 1; local a=$(awk '{print $14+$15}' /proc/$p/stat); sleep $s; local b=$(awk '{print $14+$15}' /proc/$p/stat); awk "BEGIN{printf \"%.2f\", ($b-$a)/$(getconf CLK_TCK)/$s*100}"; }
rm -f /tmp/r1.gpumon; $G record --interval 1 -i 0 -o /tmp/r1.gpumon --duration 13 & p=$!; echo "gpumon record --interval 1: $(cpu_of $p 10) %"; 
echo "threads:"; ls /proc/$p/task | wc -l; for t in /proc/$p/task/*; do echo "$(cat $t/comm) $(awk '{print $14+$15}' $t/stat)"; done; wait $p
rm -f /tmp/r2.gpumon; "$BUILD/bench/gpumon_bench_sampler" -p 1000 -s 10 -o /tmp/r2.gpumon
"$BUILD/bench/gpumon_bench_sampler" -p 1000 -s 10
echo "== watch"
for iv in 100 1000; do GPUMON_BIN=$G python3 bench/bench_watch.py --seconds 15 --intervals $iv --terminal pty 2>&1 | tail -4; done
