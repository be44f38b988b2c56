/* SPDX-License-Identifier: MIT */
/* eval_leak.c — runs the leak detector online over gpumon recordings and scores it: per file the
 * verdict at the end, the step it first said SUSPECTED, the rate; over files labelled by name
 * (leak_* must be SUSPECTED, clean_* NONE) precision, recall and the mean detection delay. */
#include <gpumon/gpumon.h>

#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

/* Which series a recording offers, best first (docs/leak-detection.md says why). */
static const struct {
	const char *what;
	const char *sql;
} series[] = {
	{"framework allocated",
	 "SELECT s.t_ns, coalesce(s.step, -1), s.allocated_bytes FROM framework_samples s "
	 "WHERE s.allocated_bytes IS NOT NULL AND s.source = (SELECT source FROM framework_samples "
	 "GROUP BY source ORDER BY count(*) DESC LIMIT 1) ORDER BY s.t_ns"},
	{"job process (NVML)",
	 "SELECT t_ns, -1, used_bytes FROM process_samples WHERE used_bytes IS NOT NULL AND gone = 0 "
	 "AND pid = (SELECT value FROM meta WHERE key = 'job_pid') ORDER BY t_ns"},
	{"device used minimum (NVML)",
	 "SELECT t_ns, -1, coalesce(used_min_bytes, used_bytes) FROM device_samples "
	 "WHERE coalesce(used_min_bytes, used_bytes) IS NOT NULL AND dev = (SELECT dev FROM device_samples "
	 "GROUP BY dev ORDER BY count(*) DESC LIMIT 1) ORDER BY t_ns"},
};

struct outcome {
	int label;          /* 1 leak, 0 clean, -1 unlabelled */
	int verdict;
	long long first_step; /* step (or point index without steps) of the first SUSPECTED; -1 never */
	long long first_alert; /* likewise, of the first alert (SUSPECTED for long enough) */
};

/* The device total, the limit the job ran against; 0 when the recording does not say. */
static uint64_t device_total(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	uint64_t total = 0;
	if (sqlite3_prepare_v2(db, "SELECT max(memory_total_bytes) FROM devices", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		total = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return total;
}

/* Feeds one query's rows to a fresh detector; returns the number of points, or -1 on error. */
static long long feed(sqlite3 *db, const char *sql, uint64_t limit, struct outcome *o, gpumon_leak_result *end)
{
	sqlite3_stmt *st = NULL;
	gpumon_leak *l = NULL;
	long long n = 0, rejected = 0;
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	if (gpumon_leak_create(NULL, &l) != GPUMON_OK) {
		sqlite3_finalize(st);
		return -1;
	}
	o->first_step = -1;
	o->first_alert = -1;
	while (sqlite3_step(st) == SQLITE_ROW) {
		int64_t step = sqlite3_column_int64(st, 1);
		if (gpumon_leak_add(l, step, (uint64_t)sqlite3_column_int64(st, 0),
				    (uint64_t)sqlite3_column_int64(st, 2), limit) != GPUMON_OK) {
			rejected++;
			continue;
		}
		gpumon_leak_result_get(l, end);
		if (end->verdict == GPUMON_LEAK_SUSPECTED && o->first_step < 0)
			o->first_step = step >= 0 ? step : n;
		if (end->alert && o->first_alert < 0)
			o->first_alert = step >= 0 ? step : n;
		n++;
	}
	sqlite3_finalize(st);
	gpumon_leak_result_get(l, end);
	gpumon_leak_destroy(l);
	if (rejected)
		printf("  %lld points out of order, skipped\n", rejected);
	return n;
}

static const char *verdict_name(int v)
{
	return v == GPUMON_LEAK_SUSPECTED ? "SUSPECTED" : v == GPUMON_LEAK_NONE ? "NONE" : "INSUFFICIENT_DATA";
}

static int evaluate(const char *path, struct outcome *o)
{
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	o->label = !strncmp(base, "leak_", 5) ? 1 : !strncmp(base, "clean_", 6) ? 0 : -1;
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		printf("%s: cannot open: %s\n", path, db ? sqlite3_errmsg(db) : "out of memory");
		sqlite3_close(db);
		return -1;
	}
	uint64_t limit = device_total(db);
	gpumon_leak_result r;
	long long n = 0;
	size_t i;
	for (i = 0; i < sizeof series / sizeof series[0]; i++) {
		n = feed(db, series[i].sql, limit, o, &r);
		if (n > 0)
			break;
	}
	sqlite3_close(db);
	if (n <= 0) {
		printf("%s: no memory series found\n", path);
		return -1;
	}
	o->verdict = r.verdict;
	printf("%s: %s from %lld points of %s; label %s\n", base, verdict_name(r.verdict), n, series[i].what,
	       o->label == 1 ? "leak" : o->label == 0 ? "clean" : "none");
	if (r.verdict == GPUMON_LEAK_SUSPECTED)
		printf("  rate %.3f MiB/step, %.3f MiB/s, from step %lld, confidence %.3f, %.0f steps to OOM\n",
		       r.rate_bytes_per_step / MIB, r.rate_bytes_per_second / MIB, (long long)r.start_step,
		       r.confidence, r.steps_to_oom);
	if (o->first_step >= 0)
		printf("  first SUSPECTED at step %lld, first alert at step %lld\n", o->first_step, o->first_alert);
	if (o->label >= 0)
		printf("  %s\n", (o->label == 1) == (r.verdict == GPUMON_LEAK_SUSPECTED) ? "right" : "WRONG");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s RECORDING.gpumon...\n", argv[0]);
		return 2;
	}
	int tp = 0, fp = 0, tn = 0, fn = 0, delays = 0, failed = 0, false_alerts = 0, alerts = 0;
	double delay_sum = 0, alert_sum = 0;
	for (int i = 1; i < argc; i++) {
		struct outcome o;
		if (evaluate(argv[i], &o) != 0) {
			failed++;
			continue;
		}
		int said = o.verdict == GPUMON_LEAK_SUSPECTED;
		if (o.label == 1) {
			tp += said;
			fn += !said;
			if (o.first_step >= 0) { /* the labelled leaks grow from their first step */
				delay_sum += (double)o.first_step;
				delays++;
			}
			if (o.first_alert >= 0) {
				alert_sum += (double)o.first_alert;
				alerts++;
			}
		} else if (o.label == 0) {
			fp += said;
			tn += !said;
			false_alerts += o.first_alert >= 0;
		}
	}
	printf("\nlabelled files: %d leak, %d clean; tp %d fp %d tn %d fn %d\n", tp + fn, tn + fp, tp, fp, tn, fn);
	printf("precision %.3f  recall %.3f  mean detection delay %.1f steps\n",
	       tp + fp ? (double)tp / (tp + fp) : 1.0, tp + fn ? (double)tp / (tp + fn) : 1.0,
	       delays ? delay_sum / delays : 0.0);
	printf("online alerts: %d of %d leaks alerted, mean first alert at step %.1f; %d clean files ever alerted\n",
	       alerts, tp + fn, alerts ? alert_sum / alerts : 0.0, false_alerts);
	return failed ? 1 : 0;
}
