#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# oom_check.sh — `gpumon run`'s end summary on a real GPU with torch, from the repository root:
#   bash tests/gpu/oom_check.sh            (results in ./gpu-out, or in $OUT when set)
# (a) a training loop with a planted leak of 8 MiB a step ends with a leak verdict and a rate within
# 10 % of it; (b) the same loop without the leak ends with `none`; (c) jobs pushed into
# out-of-memory end with forensics naming the cause: a leak under a capped memory fraction, and a
# co-tenant (a second process holding most of the card). (d) the leak again without reporting,
# judged on the job's NVML figure (reported, not a pass/fail check). (e) the leak of (a) is announced
# on stderr while the job runs (one `gpumon: leak suspected` line before the summary, an `alert`
# event), the clean loop of (b) gets no such line.
# Files written to $OUT (3): oom_summaries.txt (each run's stderr), oom_check.json (pass/fail and
# the figures), oom_build.log. Exit status: 0 when every check passed. About 3 minutes;
# OOM_CASES=leak_oom,cotenant (names of the runs below) runs only those and checks only them.
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
gpumon_build "$BUILD" gpumon >"$OUT/oom_build.log" 2>&1 || {
	echo "build failed (see $OUT/oom_build.log)"
	echo '{"passed": false, "error": "build failed"}' >"$OUT/oom_check.json"
	exit 1
}
GPUMON=$BUILD/cli/gpumon
export GPUMON_BIN=$GPUMON
SUMMARIES=$OUT/oom_summaries.txt
: >"$SUMMARIES"

# run NAME TIMEOUT ARGS...: gpumon run -o WORK/NAME.gpumon --gpu 0 -- python oom_job.py ARGS
# (OOM_CASES=a,b,... runs only those cases; the checks of the others are left out)
run() {
	local name=$1 limit=$2
	shift 2
	[ -z "${OOM_CASES:-}" ] || [[ ",$OOM_CASES," == *",$name,"* ]] || return 0
	local t0=$(date +%s.%N)
	timeout "$limit" "$GPUMON" run -o "$WORK/$name.gpumon" --gpu 0 -- "$PY" tests/gpu/oom_job.py "$@" \
		>"$WORK/$name.out" 2>"$WORK/$name.err"
	local rc=$?
	local t1=$(date +%s.%N)
	echo "$rc" >"$WORK/$name.rc"
	{
		printf '===== %s: gpumon run --gpu 0 -- python tests/gpu/oom_job.py %s (exit %s, %s s)\n' \
			"$name" "$*" "$rc" "$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }")"
		# the job's traceback can be long: its last lines and the whole summary
		awk '/^gpumon run summary/ {s = 1} !s' "$WORK/$name.err" | tail -n 8
		sed -n '/^gpumon run summary/,$p' "$WORK/$name.err"
		echo
	} >>"$SUMMARIES"
	echo "$name: exit $rc"
}

export STEPS=2500 # about 35 s: no alert comes before a run is 20 s old
run leak 120 leak
run clean 120 clean
unset STEPS
run leak_oom 90 leak_oom
# the co-tenant: outside the job's process tree, holding 120 GiB of the card
"$PY" tests/gpu/oom_job.py hold 120 "$WORK/held" >"$WORK/hold.log" 2>&1 &
HOLDER=$!
for _ in $(seq 600); do
	[ -e "$WORK/held" ] && break
	sleep 0.1
done
[ -e "$WORK/held" ] || echo "the co-tenant did not start: $(tail -n 3 "$WORK/hold.log")"
echo "$HOLDER" >"$WORK/holder.pid"
run cotenant 90 grow
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
HOLDER=
export STEPS=1500
run nvml_fallback 90 leak --no-report
unset STEPS

"$PY" - "$WORK" "$OUT/oom_check.json" <<'EOF'
import json, os, re, sqlite3, subprocess, sys
work, out = sys.argv[1], sys.argv[2]

def read(name):
    p = os.path.join(work, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""

def events(name, kind):
    try:
        db = sqlite3.connect(f"file:{os.path.join(work, name + '.gpumon')}?mode=ro", uri=True)
        return [t for (t,) in db.execute("select text from events where kind = ?", (kind,))]
    except Exception as e:
        return [f"(cannot read the recording: {e})"]

def line(err, prefix):
    return next((l for l in err.splitlines() if l.startswith(prefix)), "")

def mib(text):
    m = re.search(r"(?:rises by|: \+)([\d.]+) (B|KiB|MiB|GiB) a (step|second)", text)
    if not m:
        return None, None
    f = float(m.group(1)) * {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[m.group(2)]
    return f, m.group(3)

checks = []
skipped = []
def check(name, ok, **detail):
    checks.append(dict(name=name, passed=bool(ok), **detail))

def ran(*names):  # OOM_CASES may have left a case out
    missing = [n for n in names if not os.path.exists(os.path.join(work, n + ".rc"))]
    skipped.extend(missing)
    return not missing

err = read("leak.err")
v = line(err, "  leak: ")
rate, unit = mib(v)
ran("leak") and check("a: planted leak of 8 MiB/step -> leak verdict, rate within 10 %",
      read("leak.rc").strip() == "0" and v.startswith("  leak: LEAK on the framework's") and unit == "step"
      and rate and abs(rate - 8) <= 0.8,
      verdict=v, planted_mib_per_step=8, rate_mib_per_step=rate,
      error_pct=None if rate is None else round(abs(rate - 8) / 8 * 100, 2))
alert = line(err, "gpumon: leak suspected: ")
alert_events = events("leak", "alert")
summary_at = err.find("gpumon run summary")
ran("leak") and check("e: the planted leak announced while the job ran, once, with its rate",
      alert and err.count("gpumon: leak suspected: ") == 1 and 0 <= err.find(alert) < summary_at
      and mib(alert)[1] == "step" and abs(mib(alert)[0] - 8) <= 0.8
      and alert_events == [alert[len("gpumon: "):]],
      alert=alert, alert_events=alert_events)
err = read("clean.err")
v = line(err, "  leak: ")
ran("clean") and check("b: the same without the leak -> none", read("clean.rc").strip() == "0" and v.startswith("  leak: none: "),
      verdict=v)
ran("clean") and check("e: no leak announced for the clean loop", "gpumon: leak suspected" not in err and events("clean", "alert") == [],
      alert=line(err, "gpumon: leak suspected: "))
for name, cause in (("leak_oom", "leak"), ("cotenant", "co-tenant")):
    if not ran(name):
        continue
    err = read(name + ".err")
    d = line(err, "  diagnosis: ")
    oom = events(name, "oom")
    # the diagnosis is the run model's: the summary words it, and the report of the recording agrees
    rep = subprocess.run([os.environ["GPUMON_BIN"], "report", os.path.join(work, name + ".gpumon"), "--json"],
                         capture_output=True, text=True)
    rep_cause = (json.loads(rep.stdout).get("oom") or {}).get("cause") if rep.returncode == 0 else None
    ok = read(name + ".rc").strip() not in ("0", "124") and d.startswith(f"  diagnosis: {cause}: ") \
        and rep_cause == cause and oom
    if name == "cotenant":
        holder = read("holder.pid").strip()
        row = next((l for l in err.splitlines() if holder and l.strip().startswith(holder + " ")), "")
        if not row:  # NVML may list the host's pid (a container): the 120 GiB row that is not the job's
            row = next((l for l in err.splitlines()
                        if re.match(r"\s+\d+\s+\S+\s+1[12]\d\.\d\d\s+no\s", l)), "")
        ok = ok and row and " no " in row
        check(f"c: out of memory next to a co-tenant -> diagnosis {cause}, the holder in the table", ok,
              diagnosis=d, report_cause=rep_cause, holder_row=row, oom_events=oom[:3], exit=read(name + ".rc").strip())
    else:
        check(f"c: out of memory by a leak (capped fraction) -> diagnosis {cause}", ok, diagnosis=d,
              report_cause=rep_cause, oom_events=oom[:3], exit=read(name + ".rc").strip())
err = read("nvml_fallback.err")
v = line(err, "  leak: ")
rate, unit = mib(v)
info = dict(verdict=v, rate=rate, unit=unit, peak=line(err, "    job peak "),
            alert=line(err, "gpumon: leak suspected: "))
passed = all(c["passed"] for c in checks)
json.dump({"passed": passed, "checks": checks, "not_run": skipped, "info_nvml_fallback": info}, open(out, "w"), indent=2)
for c in checks:
    print(("PASS " if c["passed"] else "FAIL ") + c["name"])
if skipped:
    print("not run (OOM_CASES):", ", ".join(sorted(set(skipped))))
print("info: NVML fallback verdict:", v or "(none)")
print("info: NVML fallback alert:", info["alert"] or "(none)")
for c in checks:
    if c["name"].startswith("e: the planted"):
        print("info: leak alert:", c["alert"])
sys.exit(0 if passed else 1)
EOF
rc=$?
echo "results in $OUT: oom_summaries.txt oom_check.json oom_build.log"
exit $rc
