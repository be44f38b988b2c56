#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench_serve_owners.sh — what `gpumon serve` costs with attribution on: 8 fake GPUs x 512 processes
# (4,096), each in a fixture /proc (GPUMON_PROC_ROOT) with a cgroup naming its owner (Kubernetes
# pods, Slurm jobs, containers, users' sessions) and the node's /var/log/pods (GPUMON_PODS_DIR).
# For each case: the CPU of gpumon serve (utime + stime over DURATION seconds, as a share of one
# core) while a client scrapes once a second, the scrape latency over one kept-alive connection
# (p50/p99 of SCRAPES scrapes), the page's samples and bytes, the collector's render time and RSS.
# Cases: owners resolved (the fixture /proc), the same pids unresolved (not in /proc: no reads, the
# baseline), memory changing on every process every 100 ms (every process record new), and
# --processes all (per-pid series too).
# Usage (repository root, after a build): BUILD=build bash bench/bench_serve_owners.sh
# Environment: BUILD (default build), DURATION (CPU window, seconds, default 20), SCRAPES (latency
# sample, default 300), PYTHON (default /usr/bin/python3).
set -u
BUILD=${BUILD:-build}
GPUMON=$BUILD/cli/gpumon
FAKE=$BUILD/tests/fake_nvml/libnvidia-ml-fake.so
DURATION=${DURATION:-20}
SCRAPES=${SCRAPES:-300}
PY=${PYTHON:-/usr/bin/python3}
for x in "$GPUMON" "$FAKE"; do
	[ -e "$x" ] || { echo "bench_serve_owners: $x is missing: build first (cmake --build $BUILD)" >&2; exit 2; }
done

tmp=$(mktemp -d)
serve_pid=
cleanup() {
	[ -n "$serve_pid" ] && kill "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

# the fixture /proc and pods directory, and two scenarios: steady, and every process's memory moving
"$PY" - "$tmp" <<'EOF'
import os, sys
tmp = sys.argv[1]
proc, pods = os.path.join(tmp, "proc"), os.path.join(tmp, "pods")
def pod_uid(k): return f"4a4a4a4a-0000-4000-8000-{k:012d}"
for k in range(16):  # 16 pods of one container
    os.makedirs(os.path.join(pods, f"team-{k % 4}_job-{k}_{pod_uid(k)}", "main"))
steady, moving = [], []
for g in range(8):
    line = f'gpu {g} name="NVIDIA H200" total=150754820096 reserved=644939776 used=100GiB util=90 temp=50 power=500000'
    steady.append(line); moving.append(line)
    for i in range(512):
        pid = 400000 + g * 1000 + i
        k = (g * 512 + i) % 64  # 64 owners: 16 pods, 16 Slurm jobs, 16 docker containers, 16 users
        if k < 16:
            u = pod_uid(k).replace("-", "_")
            cg, uid = f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{u}.slice/cri-containerd-{k:064x}.scope", 0
        elif k < 32:
            cg, uid = f"0::/system.slice/slurmstepd.scope/job_{7000 + k}/step_{i % 3}", 2000 + k
        elif k < 48:
            cg, uid = f"0::/system.slice/docker-{k:064x}.scope", 3000 + k
        else:
            cg, uid = f"0::/user.slice/user-{1000 + k}.slice/session-{i}.scope", 1000 + k
        d = os.path.join(proc, str(pid))
        os.makedirs(d)
        with open(os.path.join(d, "status"), "w") as f:
            f.write(f"Name:\tpython\nPPid:\t1\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
        with open(os.path.join(d, "cmdline"), "wb") as f:
            f.write(f"python\0train.py\0--rank\0{i}\0".encode())
        with open(os.path.join(d, "cgroup"), "w") as f:
            f.write(cg + "\n")
        with open(os.path.join(d, "stat"), "w") as f:  # as the kernel writes it: starttime is field 22
            f.write(f"{pid} (python) S 1 {pid} {pid} 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 {1000 + i} 0 0\n")
    steady.append(f'procs {g} {400000 + g * 1000} 512 used=128MiB name="python train.py"')
    moving.append(f'procs {g} {400000 + g * 1000} 512 used=128MiB grow=1MiB name="python train.py"')
open(os.path.join(tmp, "steady.scn"), "w").write("\n".join(steady) + "\n")
open(os.path.join(tmp, "moving.scn"), "w").write("\n".join(moving) + "\n")
EOF

# one case: starts gpumon serve, lets it settle, measures, stops it; prints one row
measure() { # name scenario proc_root args...
	local name=$1 scn=$2 root=$3
	shift 3
	GPUMON_NVML_LIBRARY=$FAKE FAKE_NVML_SCENARIO=$tmp/$scn GPUMON_PROC_ROOT=$root GPUMON_PODS_DIR=$tmp/pods \
		"$GPUMON" serve --listen 127.0.0.1:0 --no-energy "$@" 2> "$tmp/serve.err" &
	serve_pid=$!
	for _ in $(seq 100); do grep -q serving "$tmp/serve.err" && break; sleep 0.1; done
	local addr
	addr=$(grep -o 'http://[^ ]*/metrics' "$tmp/serve.err")
	[ -n "$addr" ] || { cat "$tmp/serve.err"; exit 1; }
	sleep 3 # the first process lists, their /proc reads, the first renders
	"$PY" - "$addr" "$serve_pid" "$DURATION" "$SCRAPES" "$name" <<'EOF'
import http.client, os, re, sys, time
addr, pid, duration, scrapes, name = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
host, port = addr.split("/")[2].split(":")
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick
c = http.client.HTTPConnection(host, int(port), timeout=10)
def scrape():
    c.request("GET", "/metrics")
    return c.getresponse().read().decode()
# CPU: one scrape a second, as Prometheus would
c0, t0 = cpu(), time.monotonic()
while time.monotonic() - t0 < duration:
    body = scrape()
    time.sleep(1)
share = (cpu() - c0) / (time.monotonic() - t0)
# latency: back to back over the kept-alive connection
lat = []
for _ in range(scrapes):
    s = time.perf_counter()
    body = scrape()
    lat.append((time.perf_counter() - s) * 1000)
lat.sort()
samples = sum(1 for l in body.splitlines() if l and not l.startswith("#"))
owners = sum(1 for l in body.splitlines() if l.startswith("gpumon_owner_processes{"))
kinds = sorted(set(re.findall(r'owner_kind="(\w+)"', body)))
render = re.search(r"^gpumon_exporter_render_duration_seconds (\S+)$", body, re.M)
rss = re.search(r"VmRSS:\s+(\d+)", open(f"/proc/{pid}/status").read()).group(1)
print(f"{name:<34} {share * 100:6.1f} % {lat[len(lat) // 2]:8.2f} {lat[int(len(lat) * 0.99)]:8.2f} "
      f"{samples:8d} {len(body):9d} {owners:6d} {float(render.group(1)) * 1000 if render else 0:8.2f} {int(rss) // 1024:6d}  "
      f"{','.join(kinds)}")
EOF
	kill "$serve_pid" 2>/dev/null
	wait "$serve_pid" 2>/dev/null
	serve_pid=
}

printf '%-34s %8s %8s %8s %8s %9s %6s %8s %6s  %s\n' "case (8 GPUs x 512 processes)" "CPU" "p50 ms" "p99 ms" \
	"samples" "bytes" "owners" "render" "RSS MB" "owner kinds"
measure "owners resolved, steady" steady.scn "$tmp/proc"
measure "unresolved (no /proc reads), steady" steady.scn "$tmp/no-proc"
measure "owners resolved, memory moving" moving.scn "$tmp/proc"
measure "owners resolved, --processes all" steady.scn "$tmp/proc" --processes all
echo
echo "CPU: utime+stime of gpumon serve over ${DURATION} s, one scrape a second; latency: $SCRAPES scrapes back to back"
echo "over one kept-alive connection (Python http.client); render: gpumon_exporter_render_duration_seconds."
echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
