#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# capture.sh — the capture checks on a machine with an NVIDIA GPU, torch and nvidia-smi, in one go
# from the repository root: sampler CPU at 100 Hz and 1 kHz, the spike experiment, bytes per hour
# of a recording at 1 kHz, and a real torch job under `gpumon run` with a co-tenant.
#   bash tests/gpu/capture.sh           (results in $OUT, default ./gpu-out)
set -u
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build}
. tests/gpu/deps.sh
exec > >(tee "$OUT/capture.txt") 2>&1
fail=0
gpumon_build "$BUILD" gpumon gpumon_bench_sampler >/dev/null || { echo "build failed"; exit 1; }
G=$BUILD/cli/gpumon

echo "== sampler CPU (one GPU, idle, consumer draining into a recording)"
for p in 10000 1000; do
	rm -f "/tmp/bs-$p.gpumon"
	"$BUILD/bench/gpumon_bench_sampler" -p $p -s 20 -o "/tmp/bs-$p.gpumon" | tee "$OUT/sampler-$p.txt"
	echo "recording: $(stat -c %s "/tmp/bs-$p.gpumon") bytes for 20 s"
done

echo "== spike experiment (gpumon record --interval 1)"
python3 tests/gpu/spikes.py --gpumon "$G" --out "$OUT" || fail=1

echo "== bytes per hour: gpumon record --interval 1 for 60 s while a torch job trains"
rm -f /tmp/hour.gpumon
"$G" record --interval 1 -i 0 -o /tmp/hour.gpumon --duration 60 &
rec=$!
python3 tests/gpu/job.py 30 >/dev/null
python3 tests/gpu/job.py 20 >/dev/null
wait $rec
size=$(stat -c %s /tmp/hour.gpumon)
echo "60 s at 1 kHz: $size bytes -> $((size * 60 / 1024)) KiB per hour"
python3 - /tmp/hour.gpumon <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for t in ("device_samples", "process_samples", "processes", "events"):
    print(t, db.execute(f"SELECT count(*) FROM {t}").fetchone()[0])
PY

echo "== a torch job under gpumon run, with a co-tenant holding 3 GiB"
python3 -c "
import torch, time
x = torch.empty(3 << 30, dtype=torch.uint8, device='cuda'); x.fill_(1); torch.cuda.synchronize()
print('cotenant ready', flush=True); time.sleep(60)" >"$OUT/cotenant.txt" &
cot=$!
for i in $(seq 50); do grep -q ready "$OUT/cotenant.txt" && break; sleep 0.2; done
rm -f "$OUT/job.gpumon"
"$G" run -o "$OUT/job.gpumon" --expandable --gpu 0 -- python3 tests/gpu/job.py 4 >"$OUT/job-stdout.txt"
echo "gpumon run exit status: $?"
cat "$OUT/job-stdout.txt"
kill $cot; wait $cot 2>/dev/null
python3 - "$OUT/job.gpumon" "$OUT/job-stdout.txt" "$cot" <<'PY' || fail=1
import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
m = re.search(r"job parent (\d+) child (\d+)", open(sys.argv[2]).read())
parent, child, cot = int(m.group(1)), int(m.group(2)), int(sys.argv[3])
meta = dict(db.execute("SELECT key, value FROM meta"))
procs = {r[0]: r for r in db.execute("SELECT pid, dev, first_t_ns, gone_t_ns, user, command FROM processes")}
job_events = " ".join(r[0] for r in db.execute("SELECT text FROM events WHERE kind = 'job'"))
fw = db.execute("SELECT count(*), max(allocated_bytes), max(reserved_bytes) FROM framework_samples").fetchone()
checks = {
    "exit status 0 recorded": str(meta.get("exit_status")) == "0",
    "settings recorded": "expandable_segments:True" in (meta.get("settings") or ""),
    "parent on the GPU": parent in procs,
    "child on the GPU": child in procs,
    "co-tenant on the GPU": cot in procs,
    "parent is the job's": f"pid {parent}" in job_events,
    "child is the job's": f"pid {child}" in job_events,
    "co-tenant is not the job's": f"pid {cot}" not in job_events,
    "framework samples": fw[0] >= 10 and fw[1] > 0,
}
for k, v in checks.items():
    print(("PASS " if v else "FAIL ") + k)
print("framework samples", fw, "processes", sorted(procs))
sys.exit(0 if all(checks.values()) else 1)
PY
echo "capture.sh: $([ $fail = 0 ] && echo all passed || echo FAILURES)"
exit $fail
