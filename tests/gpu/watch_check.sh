#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# watch_check.sh — `gpumon watch` on a real GPU, from the repository root:
#   OUT=gpu-out bash tests/gpu/watch_check.sh
# (1) builds gpumon in Release; (2) runs `gpumon watch --interval 100` on a 100x30 pseudo-terminal
# while a torch job leaks 64 MiB every 0.25 s, and checks that the screen shows the GPU, the job's
# row (pid, user, command) and the leak mark; (3) measures the CPU of `gpumon watch` at --interval
# 1000 and 100 over 50 s each (bench/bench_watch.py --terminal pty). Needs the NVIDIA driver and
# python3 with torch; no tmux. About 3 minutes. Files in $OUT (3): watch_check.txt (the log and
# the verdicts), watch_screen.txt (the text of the screen in step 2), watch_bench.json.
# Exit status: 0 when every check and goal held, 1 otherwise.
set -u

OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
BUILD=${GPUMON_BUILD:-/tmp/gpumon-build-watch}
PY=${PYTHON:-python3}
log=$OUT/watch_check.txt
: >"$log"
say() { echo "$*" | tee -a "$log"; }

# Debian's libraries unpacked under .deps/ where the machine lacks them (tests/gpu/README.md)
. tests/gpu/deps.sh

say "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')  commit: $(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)"
say "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -n1)"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') x $(nproc)"

# ---- (1) build ------------------------------------------------------------------------------------
if ! gpumon_build "$BUILD" gpumon >>"$log" 2>&1; then
	say "FAIL build: see $log"
	exit 1
fi
export GPUMON_BIN=$BUILD/cli/gpumon
status=0

# ---- (2) the screen, with a leaking torch job -----------------------------------------------------
timeout 90 "$PY" - "$OUT/watch_screen.txt" <<'EOF' 2>&1 | tee -a "$log"
import os, re, subprocess, sys, time
sys.path.insert(0, "bench")
from bench_watch import PtyTerminal

job = subprocess.Popen([sys.executable, "-c", """
import time, torch
keep = [torch.empty(1 << 30, dtype=torch.uint8, device="cuda")]
print("ready", flush=True)
for _ in range(240):
    keep.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))  # the leak
    torch.cuda.synchronize()
    time.sleep(0.25)
"""], stdout=subprocess.PIPE, text=True)
assert job.stdout.readline().strip() == "ready"
env = dict(os.environ, LANG="C.UTF-8", TERM="xterm-256color")
term = PtyTerminal()
term.start([os.environ["GPUMON_BIN"], "watch", "--interval", "100"], env)
seen, deadline = "", time.monotonic() + 40
def text_of(raw):
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][0-9A-Za-z]|\x1b[=>]", " ", raw)
while time.monotonic() < deadline and "LEAK suspected" not in text_of(seen):
    os.write(term.fd, b"\x0c")  # Ctrl-L: the whole screen again, not only what changed
    term.out = b""
    term.pump(1)
    seen = term.screen()
term.stop()
job.kill()
text = text_of(seen)
open(sys.argv[1], "w").write(text[-20000:])
checks = {
    "the GPU (NVIDIA ...)": "NVIDIA" in text,
    f"the job's pid {job.pid}": str(job.pid) in text,
    "the job's command (python)": "python" in text,
    "the leak mark (LEAK suspected)": "LEAK suspected" in text,
}
for what, ok in checks.items():
    print(f"{'ok  ' if ok else 'FAIL'} screen shows {what}")
sys.exit(0 if all(checks.values()) else 1)
EOF
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# ---- (3) CPU cost ---------------------------------------------------------------------------------
timeout 140 "$PY" bench/bench_watch.py --terminal pty --seconds 50 --intervals 1000,100 \
	--json "$OUT/watch_bench.json" 2>&1 | tee -a "$log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

say "watch_check: $([ $status -eq 0 ] && echo PASS || echo FAIL)"
exit $status
