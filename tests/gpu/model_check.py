# SPDX-License-Identifier: MIT
"""The checks of tests/gpu/model_check.sh on the recordings it made: every front end gives the run
model's one answer, and the time to out-of-memory next to a real co-tenant is the GPU's free memory
divided by the rate. Arguments: WORK (the recordings, summaries, exit statuses) and the JSON file to
write."""
import json
import os
import sqlite3
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "consistency"))
import frontends as fe  # noqa: E402

work, out = sys.argv[1], sys.argv[2]
G = os.environ["GPUMON_BIN"]
checks = []


def check(name, fn):
    try:
        detail = fn()
        checks.append(dict(name=name, passed=True, detail=detail))
        print("PASS", name, "" if detail is None else json.dumps(detail))
    except Exception as e:  # a failed comparison says what differed
        checks.append(dict(name=name, passed=False, error=f"{type(e).__name__}: {e}"[:2000]))
        print("FAIL", name, f"{type(e).__name__}: {e}"[:2000])


def read(name):
    p = os.path.join(work, name)
    return open(p, errors="replace").read() if os.path.exists(p) else ""


docs = {}
for run in ("clean", "leak", "cotenant"):
    rec = os.path.join(work, run + ".gpumon")

    def same_everywhere(run=run, rec=rec):
        doc = docs[run] = fe.report_json(G, rec)
        assert fe.python_report(rec) == doc, "gpumon.report() differs from gpumon report --json"
        fe.check_run_summary(fe.run_summary_facts(read(run + ".err")), doc)
        fe.check_serve(fe.serve_gauges(G, rec), doc)
        fe.check_watch(fe.watch_marks(G, rec), doc)
        live = [l for l in read(run + ".err").splitlines() if l.startswith("gpumon: leak suspected: ")]
        leak_alerts = [a for a in doc["alerts"] if a["kind"] == "leak"]
        assert len(live) == len(leak_alerts) and all(a["live"] for a in leak_alerts), (live, leak_alerts)
        l = doc["leak"]
        return dict(verdict=l["verdict"], series=l["series"], rate_bytes_per_step=l["rate_bytes_per_step"],
                    rate_bytes_per_second=l["rate_bytes_per_second"], seconds_to_oom=l["seconds_to_oom"],
                    room=l["room"], alerts=[(round(a["time"], 2), a["live"]) for a in leak_alerts],
                    duration_s=doc["source"]["duration_s"])
    check(f"{run}: run's summary, report --json, serve --replay, watch --replay and gpumon.report() agree",
          same_everywhere)


def clean_is_none():
    d = docs["clean"]
    assert d["leak"]["verdict"] == "none" and not d["alerts"], (d["leak"]["verdict"], d["alerts"])
    return dict(points=d["leak"]["points"])


def leak_is_leak():
    d = docs["leak"]
    l = d["leak"]
    assert l["verdict"] == "leak" and l["series"]["kind"] == "framework", l
    assert abs(l["rate_bytes_per_step"] - 4 * 2**20) <= 0.02 * 4 * 2**20, l["rate_bytes_per_step"]
    a = [x for x in d["alerts"] if x["kind"] == "leak"]
    assert a, "no alert"
    return dict(alert_s=a[0]["time"], start_s=l["start_time"])


check("a 30 s clean torch job: none, no alert, everywhere", lambda: clean_is_none())
check("a leaking one (4 MiB a step): a leak on the framework's figure, alerted", lambda: leak_is_leak())


def oom_next_to_co_tenant():
    d = docs["cotenant"]
    l = d["leak"]
    assert l["verdict"] == "leak" and l["room"] == "free", l
    # free memory at the series' last point, from the raw rows: total - reserved - the interval's peak
    db = sqlite3.connect(f"file:{os.path.join(work, 'cotenant.gpumon')}?mode=ro", uri=True)
    last_fw = db.execute("SELECT max(t_ns) FROM framework_samples").fetchone()[0]
    total, reserved, used_max = db.execute(
        "SELECT total_bytes, reserved_bytes, coalesce(used_max_bytes, used_bytes) FROM device_samples "
        "WHERE t_ns <= ? ORDER BY t_ns DESC LIMIT 1", (last_fw,)).fetchone()
    free = total - (reserved or 0) - used_max
    want = free / l["rate_bytes_per_second"]
    assert abs(l["seconds_to_oom"] - want) <= 0.02 * want + 0.5, (l["seconds_to_oom"], want)
    # what the live alert projected, against when the job did run out
    start = db.execute("SELECT value FROM meta WHERE key = 'start_mono_ns'").fetchone()[0]
    oom_t = db.execute("SELECT min(t_ns) FROM events WHERE kind = 'oom'").fetchone()[0]
    holder = read("holder.pid").strip()
    a = [x for x in d["alerts"] if x["kind"] == "leak"][0]
    oom_s = (oom_t - start) / 1e9 if oom_t else None
    predicted = a["time"] + a["seconds_to_oom"]
    assert d["oom"] and d["oom"]["cause"] in ("co-tenant", "leak"), d["oom"]
    return dict(seconds_to_oom_at_end=l["seconds_to_oom"], free_over_rate=want, alert_s=a["time"],
                alert_seconds_to_oom=a["seconds_to_oom"], predicted_oom_s=predicted, actual_oom_s=oom_s,
                error_pct=None if not oom_s else round(100 * (predicted - oom_s) / (oom_s - a["time"]), 1),
                cause=d["oom"]["cause"], co_tenant=holder, top_other=d["oom"]["figures"]["top_other"])


check("next to a 20 GiB co-tenant: time to out-of-memory = free / rate (2 %), and against what happened",
      oom_next_to_co_tenant)
passed = all(c["passed"] for c in checks)
json.dump({"passed": passed, "checks": checks, "exit": {r: read(r + ".rc").strip() for r in docs}},
          open(out, "w"), indent=2)
sys.exit(0 if passed else 1)
