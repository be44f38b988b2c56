/* SPDX-License-Identifier: MIT */
/* eval_leak.c — scores the run model's leak verdicts and alerts on labelled recordings
 * (examples/traces/labels.tsv), fed as each front end feeds it: the whole recording (gpumon run,
 * gpumon report), NVML only (a job that reports nothing; gpumon watch and gpumon serve see no
 * framework figures), NVML with device rows only once a second (the same run, fed less often), and
 * framework samples taken at most every 0.25 s (the Python monitor's default). Per file and feed:
 * the verdict at the end, the series it is on, and the first alert's delay after the leak began,
 * against the bound max(30 s, 100 steps). */
#include <gpumon/gpumon.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

enum { FEED_ALL, FEED_NVML, FEED_NVML_1HZ, FEED_PY, FEEDS };
static const char *const feed_names[FEEDS] = {"recording", "nvml", "nvml-1hz", "python-0.1s"};

struct label {
	char file[128];
	int leak;            /* 1 leak, 0 clean, -1 unknown */
	long long start_step;
	char set[16];
};

/* The label of a recording from labels.tsv beside it (by base name without .gpumon). */
static void find_label(const char *path, struct label *out)
{
	char dir[512], base[128], line[1024];
	const char *slash = strrchr(path, '/');
	snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	snprintf(base, sizeof base, "%s", slash ? slash + 1 : path);
	char *dot = strstr(base, ".gpumon");
	if (dot)
		*dot = 0;
	memset(out, 0, sizeof *out);
	out->leak = -1;
	out->start_step = -1;
	snprintf(out->file, sizeof out->file, "%s", base);
	char lp[600];
	snprintf(lp, sizeof lp, "%s/labels.tsv", dir);
	FILE *f = fopen(lp, "r");
	if (!f)
		return;
	while (fgets(line, sizeof line, f)) {
		char name[128], label[16], start[32], set[16];
		if (line[0] == '#' || sscanf(line, "%127s %15s %31s %15s", name, label, start, set) != 4)
			continue;
		if (strcmp(name, base))
			continue;
		out->leak = !strcmp(label, "leak");
		out->start_step = strcmp(start, "-") ? atoll(start) : -1;
		snprintf(out->set, sizeof out->set, "%s", set);
	}
	fclose(f);
}

struct result {
	gpumon_verdict v;
	int have;
	uint64_t alert_t;   /* first leak alert; 0 none */
	uint64_t end_t;     /* the last record's time */
	int64_t alert_step; /* the step then (-1 unknown) */
};

/* Runs one feed of path through a model. start_t/step_at: the time of the leak's start step and
 * of start+100 (0 unknown), found in the framework rows. */
static int run_feed(const char *path, int feed, struct result *res, int64_t start_step, uint64_t *start_t,
		    uint64_t *bound_t)
{
	gpumon_reader *r = NULL;
	if (gpumon_reader_create(path, &r) != GPUMON_OK) {
		fprintf(stderr, "%s: %s\n", path, gpumon_reader_errmsg(r));
		gpumon_reader_destroy(r);
		return -1;
	}
	gpumon_model_config c = {.size = sizeof c, .meta = gpumon_reader_meta(r)};
	gpumon_model *m = NULL;
	if (gpumon_model_create(&c, &m) != GPUMON_OK) {
		gpumon_reader_destroy(r);
		return -1;
	}
	for (unsigned i = 0; i < gpumon_reader_device_count(r); i++) {
		gpumon_device_info info;
		gpumon_reader_device(r, i, &info);
		gpumon_model_device(m, &info);
	}
	memset(res, 0, sizeof *res);
	res->alert_step = -1;
	gpumon_record rec;
	uint64_t last_dev_t = 0, last_fw_t = 0;
	int64_t last_step = -1;
	size_t seen = 0;
	while (gpumon_reader_next(r, &rec) > 0) {
		if (rec.kind == GPUMON_REC_FRAMEWORK) {
			int64_t s = rec.framework.step;
			if (s >= 0)
				last_step = s;
			if (start_step >= 0 && s >= start_step && !*start_t)
				*start_t = rec.t_ns;
			if (start_step >= 0 && s >= start_step + 100 && !*bound_t)
				*bound_t = rec.t_ns;
			if (feed == FEED_NVML || feed == FEED_NVML_1HZ)
				continue;
			if (feed == FEED_PY) {
				if (last_fw_t && rec.t_ns - last_fw_t < 100000000ull)
					continue;
				last_fw_t = rec.t_ns;
			}
		}
		if (feed == FEED_NVML_1HZ && rec.kind == GPUMON_REC_DEVICE) {
			if (last_dev_t && rec.t_ns - last_dev_t < 1000000000ull)
				continue;
			last_dev_t = rec.t_ns;
		}
		gpumon_model_add(m, &rec, 1);
		res->end_t = rec.t_ns;
		gpumon_alert a;
		size_t n = gpumon_model_alerts(m, seen, &a, 1);
		for (; n > 0; seen++, n = gpumon_model_alerts(m, seen, &a, 1))
			if (a.kind == GPUMON_ALERT_LEAK && !res->alert_t) {
				res->alert_t = a.t_ns;
				res->alert_step = last_step;
			}
	}
	gpumon_model_finish(m, 0, -1);
	res->have = gpumon_model_verdict(m, &res->v) == GPUMON_OK;
	gpumon_model_destroy(m);
	gpumon_reader_destroy(r);
	return 0;
}

static const char *series_name(int s)
{
	static const char *const names[] = {"-", "framework", "job", "process", "device"};
	return s >= 0 && s <= 4 ? names[s] : "?";
}

static const char *verdict_name(int v)
{
	return v == GPUMON_LEAK_SUSPECTED ? "LEAK" : v == GPUMON_LEAK_NONE ? "none" : "insufficient";
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s RECORDING... (labels from labels.tsv beside each)\n", argv[0]);
		return 2;
	}
	int tp[FEEDS] = {0}, fp[FEEDS] = {0}, fn[FEEDS] = {0}, tn[FEEDS] = {0}, late[FEEDS] = {0}, falarm[FEEDS] = {0};
	int short_runs[FEEDS] = {0};
	printf("%-30s %-6s %-13s %-12s %-10s %12s %10s %8s\n", "file", "label", "feed", "verdict", "series",
	       "rate", "alert s", "bound s");
	for (int i = 1; i < argc; i++) {
		struct label lab;
		find_label(argv[i], &lab);
		for (int feed = 0; feed < FEEDS; feed++) {
			struct result res;
			uint64_t start_t = 0, bound_t = 0;
			if (run_feed(argv[i], feed, &res, lab.leak == 1 ? lab.start_step : -1, &start_t, &bound_t))
				continue;
			int said = res.have && res.v.leak.verdict == GPUMON_LEAK_SUSPECTED;
			char rate[32] = "", delay[32] = "never", bound[32] = "";
			if (said)
				snprintf(rate, sizeof rate, "%.3g MiB/%s",
					 (res.v.leak.rate_bytes_per_step > 0 ? res.v.leak.rate_bytes_per_step
									     : res.v.leak.rate_bytes_per_second) / MIB,
					 res.v.leak.rate_bytes_per_step > 0 ? "st" : "s");
			double b = 30;
			if (start_t && bound_t && (double)(bound_t - start_t) / 1e9 > b)
				b = (double)(bound_t - start_t) / 1e9;
			if (lab.leak == 1)
				snprintf(bound, sizeof bound, "%.1f", b);
			if (res.alert_t) {
				double d = start_t && res.alert_t >= start_t ? (double)(res.alert_t - start_t) / 1e9 : -1;
				snprintf(delay, sizeof delay, lab.leak == 1 ? "%.1f" : "ALERT", d);
			}
			if (lab.leak == 1) {
				if (said)
					tp[feed]++;
				else
					fn[feed]++;
				/* a run that ended before the bound cannot be late: it is counted apart */
				if (!res.alert_t && start_t && (double)(res.end_t - start_t) / 1e9 < b) {
					short_runs[feed]++;
					snprintf(delay, sizeof delay, "(ended)");
				} else if (!res.alert_t || !start_t || (double)(res.alert_t - start_t) / 1e9 > b) {
					late[feed]++;
				}
			} else if (lab.leak == 0) {
				if (said)
					fp[feed]++;
				else
					tn[feed]++;
				if (res.alert_t)
					falarm[feed]++;
			}
			printf("%-30s %-6s %-13s %-12s %-10s %12s %10s %8s\n", lab.file,
			       lab.leak == 1 ? "leak" : lab.leak == 0 ? "clean" : "?", feed_names[feed],
			       res.have ? verdict_name(res.v.leak.verdict) : "-", res.have ? series_name(res.v.series) : "-",
			       rate, delay, bound);
		}
	}
	printf("\n%-13s %5s %5s %5s %5s %12s %12s %16s\n", "feed", "TP", "FN", "FP", "TN", "late alerts", "false alerts",
	       "ended before");
	for (int feed = 0; feed < FEEDS; feed++)
		printf("%-13s %5d %5d %5d %5d %12d %12d %16d\n", feed_names[feed], tp[feed], fn[feed], fp[feed], tn[feed],
		       late[feed], falarm[feed], short_runs[feed]);
	return 0;
}
