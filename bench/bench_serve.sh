#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_serve.sh — `gpumon serve` under load, side by side with a Python prometheus_client exporter
# serving the same series, both measured with wrk on loopback in one run: 8 GPUs x 64 processes
# from the fake NVML (--processes all: 512 process series). Prints requests/s, latency p50/p99,
# and the resident memory of gpumon serve; goals: >= 20 x the Python throughput, p99 <= 1 ms,
# RSS <= 4 MB.
# Usage (repository root, after a build; needs wrk and python3-prometheus-client:
#   apt-get install wrk python3-prometheus-client):
#   BUILD=build bash bench/bench_serve.sh
# Environment: BUILD (default build), DURATION (wrk seconds, default 10), CONNS (default 8),
# THREADS (wrk threads, default 1), PYTHON (default /usr/bin/python3).
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=${BUILD:-build}
GPUMON=$BUILD/cli/gpumon
FAKE=$BUILD/tests/fake_nvml/libnvidia-ml-fake.so
DURATION=${DURATION:-10}
CONNS=${CONNS:-8}
THREADS=${THREADS:-1}
PY=${PYTHON:-/usr/bin/python3}
for x in "$GPUMON" "$FAKE"; do
	[ -e "$x" ] || { echo "bench_serve: $x is missing: build first (cmake --build $BUILD)" >&2; exit 2; }
done
command -v wrk >/dev/null || { echo "bench_serve: wrk is not installed (apt-get install wrk)" >&2; exit 2; }
"$PY" -c 'import prometheus_client' 2>/dev/null ||
	{ echo "bench_serve: $PY lacks prometheus_client (apt-get install python3-prometheus-client)" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# 8 H200s, 64 processes each
{
	for g in 0 1 2 3 4 5 6 7; do
		echo "gpu $g name=\"NVIDIA H200\" total=150754820096 reserved=644939776 used=$((40 + g))GiB util=$((50 + g)) memutil=20 temp=$((40 + g)) power=$((300000 + g * 1000)) energy=123456789"
		echo "procs $g $((400000 + g * 100)) 64 used=$((256 + g))MiB name=\"python train.py --rank $g\""
	done
} > "$tmp/8x64.scn"

GPUMON_NVML_LIBRARY=$FAKE FAKE_NVML_SCENARIO=$tmp/8x64.scn "$GPUMON" serve --listen 127.0.0.1:0 --processes all \
	2> "$tmp/serve.err" &
pids+=($!)
serve_pid=$!
for _ in $(seq 50); do grep -q serving "$tmp/serve.err" && break; sleep 0.1; done
addr=$(grep -o 'http://[^ ]*/metrics' "$tmp/serve.err")
[ -n "$addr" ] || { cat "$tmp/serve.err"; exit 1; }
pyport=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$PY" "$here/bench_serve_py.py" "$addr" "$pyport" > "$tmp/py.out" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q serving "$tmp/py.out" && break; sleep 0.1; done
pyaddr=http://127.0.0.1:$pyport/metrics

series=$(curl -s "$addr" | grep -vc '^#')
bytes=$(curl -s "$addr" | wc -c)
pyseries=$(curl -s "$pyaddr" | grep -vc '^#')
echo "page: $series samples, $bytes bytes (gpumon); $pyseries samples (prometheus_client)"

# wrk's summary -> "rps p50_ms p99_ms"
run_wrk() {
	wrk -t"$THREADS" -c"$2" -d"${DURATION}s" --latency "$1" > "$tmp/wrk.txt" 2>&1
	awk '
	function ms(v) { if (v ~ /us$/) return v / 1000; if (v ~ /ms$/) return v + 0; if (v ~ /s$/) return v * 1000; return v }
	/Requests\/sec/ { rps = $2 }
	$1 == "50%" { p50 = ms($2) }
	$1 == "99%" { p99 = ms($2) }
	/Non-2xx/ { bad = $NF }
	END { printf "%.0f %.3f %.3f %s\n", rps, p50, p99, bad ? bad : 0 }' "$tmp/wrk.txt"
}

# throughput: CONNS connections at once; latency: one connection, as one Prometheus scrapes
read -r g_rps g_p50 g_p99 g_bad < <(run_wrk "$addr" "$CONNS")
read -r p_rps p_p50 p_p99 p_bad < <(run_wrk "$pyaddr" "$CONNS")
read -r g1_rps g1_p50 g1_p99 _ < <(run_wrk "$addr" 1)
read -r p1_rps p1_p50 p1_p99 _ < <(run_wrk "$pyaddr" 1)
rss=$(awk '/VmRSS/ {print $2}' "/proc/$serve_pid/status")
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$serve_pid/status")
priv=$(awk '/^Private_Dirty/ {print $2}' "/proc/$serve_pid/smaps_rollup")
ratio=$(awk -v a="$g_rps" -v b="$p_rps" 'BEGIN { printf "%.1f", (b > 0) ? a / b : 0 }')

printf '\n%-26s %14s %14s %10s %10s %8s\n' "exporter" "req/s (c=$CONNS)" "req/s (c=1)" "p50 ms c=1" "p99 ms c=1" "non-2xx"
printf '%-26s %14s %14s %10s %10s %8s\n' "gpumon serve" "$g_rps" "$g1_rps" "$g1_p50" "$g1_p99" "$g_bad"
printf '%-26s %14s %14s %10s %10s %8s\n' "python prometheus_client" "$p_rps" "$p1_rps" "$p1_p50" "$p1_p99" "$p_bad"
echo "(with $CONNS connections at once: gpumon p50 $g_p50 ms p99 $g_p99 ms; python p50 $p_p50 ms p99 $p_p99 ms)"
echo
echo "throughput ratio: $ratio x (goal >= 20)"
echo "gpumon serve scrape latency p99 (one connection): $g1_p99 ms (goal <= 1)"
echo "gpumon serve RSS: $rss KiB now, $hwm KiB peak, of which private (not shared library pages) $priv KiB (goal <= 4096)"
echo "wrk -t$THREADS -d${DURATION}s --latency; $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
