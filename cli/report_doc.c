/* SPDX-License-Identifier: MIT */
/* report_doc.c — from the model of a run to the report document (docs/report.md): which series
 * the leak verdict is on, the peak and its windows, fragmentation, unaccounted memory, the
 * out-of-memory forensics, and the reduced timelines for the HTML page. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "report_model.h"

/* A JSON string of s, or null for NULL; bytes that are not UTF-8 (a command line may hold any)
 * become '?', so one odd byte cannot drop a field. */
static json_t *jstr(const char *s)
{
	if (!s)
		return json_null();
	json_t *j = json_string(s);
	if (j)
		return j;
	char *c = strdup(s);
	if (!c)
		return json_null();
	for (char *p = c; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(c);
	free(c);
	return j ? j : json_null();
}

/* ---- the leak verdict ---------------------------------------------------------------------------- */

void report_leak_choice(report *r, gpumon_leak_result *res, char *what, size_t len, int64_t *alert_t_ns)
{
	gpumon_leak_result v;
	memset(res, 0, sizeof *res);
	res->verdict = GPUMON_LEAK_INSUFFICIENT_DATA;
	res->start_step = -1;
	/* (time to OOM now comes from the run model) */
	what[0] = 0;
	*alert_t_ns = 0;
	/* 1. the framework's allocated figure: a leak on any source, else the best-fed source */
	int best = -1;
	for (size_t i = 0; i < r->nfw; i++) {
		gpumon_leak_result_get(r->fw[i].leak, &v);
		if (v.points == 0)
			continue;
		int better = best < 0 || (v.verdict == GPUMON_LEAK_SUSPECTED && res->verdict != GPUMON_LEAK_SUSPECTED) ||
			     (v.verdict == res->verdict && v.points > res->points);
		if (better) {
			*res = v;
			best = (int)i;
		}
	}
	if (best >= 0) {
		if (r->fw[best].pid >= 0)
			snprintf(what, len, "framework allocated (pid %lld)", (long long)r->fw[best].pid);
		else /* a CSV: no process named */
			snprintf(what, len, "framework allocated");
		*alert_t_ns = r->fw[best].alert_t_ns;
		return;
	}
	/* 2. the job's processes as NVML sees them */
	gpumon_leak_result_get(r->job_leak, &v);
	if (r->job_known && v.points > 0) {
		*res = v;
		snprintf(what, len, "the job's processes on GPU %d (NVML)", r->job_dev);
		*alert_t_ns = r->job_alert_t_ns;
		return;
	}
	/* 3. one process as NVML sees it (a system-wide recording): a leak on any, else the best-fed */
	int bp = -1;
	for (size_t i = 0; i < r->nprocs; i++) {
		if (!r->procs[i].leak)
			continue;
		gpumon_leak_result_get(r->procs[i].leak, &v);
		int better = bp < 0 || (v.verdict == GPUMON_LEAK_SUSPECTED && res->verdict != GPUMON_LEAK_SUSPECTED) ||
			     (v.verdict == res->verdict && v.verdict == GPUMON_LEAK_SUSPECTED && v.confidence > res->confidence) ||
			     (v.verdict == res->verdict && v.verdict != GPUMON_LEAK_SUSPECTED && v.points > res->points);
		if (better) {
			*res = v;
			bp = (int)i;
		}
	}
	if (bp >= 0 && res->verdict != GPUMON_LEAK_INSUFFICIENT_DATA) {
		snprintf(what, len, "pid %lld on GPU %d (NVML)", (long long)r->procs[bp].pid, r->procs[bp].dev);
		*alert_t_ns = r->procs[bp].alert_t_ns;
		return;
	}
	memset(res, 0, sizeof *res);
	res->verdict = GPUMON_LEAK_INSUFFICIENT_DATA;
	res->start_step = -1;
	/* (time to OOM now comes from the run model) */
	/* 4. a GPU's used memory: a leak on any, else the best-fed */
	int bd = -1;
	for (int d = 0; d < r->ndev; d++) {
		if (!r->dev[d].seen)
			continue;
		gpumon_leak_result_get(r->dev[d].leak, &v);
		int better = bd < 0 || (v.verdict == GPUMON_LEAK_SUSPECTED && res->verdict != GPUMON_LEAK_SUSPECTED) ||
			     (v.verdict == res->verdict && v.points > res->points);
		if (better) {
			*res = v;
			bd = d;
		}
	}
	if (bd >= 0)
		snprintf(what, len, "GPU %d used (NVML)", bd);
}

/* ---- out of memory -------------------------------------------------------------------------------- */

static int cmp_holder(const void *a, const void *b)
{
	const struct holder *x = a, *y = b;
	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

void report_snapshot_oom(report *r, int64_t t_ns, const char *line)
{
	struct oom_snapshot *o = &r->oom;
	o->t_ns = t_ns;
	snprintf(o->line, sizeof o->line, "%s", line ? line : "");
	int dev = r->job_known ? r->job_dev : 0;
	if (!r->job_known) { /* no job: the fullest GPU */
		double best = -1;
		for (int d = 0; d < r->ndev; d++) {
			struct rdev *x = &r->dev[d];
			uint64_t tot = report_dev_total(r, d);
			if (x->seen && x->ring_n && tot) {
				double share = (double)x->ring[(x->ring_head + RING - 1) % RING].used / (double)tot;
				if (share > best) {
					best = share;
					dev = d;
				}
			}
		}
	}
	o->dev = dev;
	gpumon_oom_input *in = &o->in;
	memset(in, 0, sizeof *in);
	in->top_other_pid = -1;
	in->rise_seconds = -1;
	uint64_t total = report_dev_total(r, dev);
	if (total)
		in->known |= GPUMON_OOM_F_TOTAL, in->total_bytes = total;
	/* the device's last seconds: the peak, the floor before it, how long the climb took */
	struct rdev *d = dev < RECFILE_MAX_DEVICES ? &r->dev[dev] : NULL;
	if (d && d->seen && d->ring_n) {
		int64_t peak = -1, peak_t = 0, floor = -1;
		for (int k = 0; k < d->ring_n; k++) {
			int i = (d->ring_head + RING - 1 - k) % RING;
			if (d->ring[i].t_ns < t_ns - 3 * OOM_WINDOW_NS)
				break;
			if (d->ring[i].t_ns <= t_ns && d->ring[i].used > peak && d->ring[i].t_ns >= t_ns - OOM_WINDOW_NS)
				peak = d->ring[i].used, peak_t = d->ring[i].t_ns;
		}
		for (int k = 0; k < d->ring_n; k++) {
			int i = (d->ring_head + RING - 1 - k) % RING;
			if (d->ring[i].t_ns < t_ns - 3 * OOM_WINDOW_NS)
				break;
			if (d->ring[i].t_ns <= peak_t && (floor < 0 || d->ring[i].used < floor))
				floor = d->ring[i].used;
		}
		if (peak >= 0) {
			in->known |= GPUMON_OOM_F_USED | GPUMON_OOM_F_FLOOR;
			in->used_bytes = (uint64_t)peak;
			in->floor_bytes = (uint64_t)floor;
			/* the climb: from the last point near the floor before the peak */
			int64_t from = -1;
			for (int k = 0; k < d->ring_n; k++) {
				int i = (d->ring_head + RING - 1 - k) % RING;
				if (d->ring[i].t_ns > peak_t)
					continue;
				if (d->ring[i].used <= floor + (peak - floor) / 10) {
					from = d->ring[i].t_ns;
					break;
				}
			}
			if (from >= 0)
				in->rise_seconds = (double)(peak_t - from) / 1e9;
		}
		/* about one point a second over the last seconds, back from the moment, then oldest first */
		int n = 0;
		int64_t next = t_ns;
		for (int k = 0; k < d->ring_n && n < 16; k++) {
			int i = (d->ring_head + RING - 1 - k) % RING;
			if (d->ring[i].t_ns > next)
				continue;
			if (d->ring[i].t_ns < t_ns - OOM_WINDOW_NS)
				break;
			o->last[n].t_ns = d->ring[i].t_ns;
			o->last[n].used = d->ring[i].used;
			n++;
			next = d->ring[i].t_ns - 1000000000;
		}
		for (int a = 0, b = n - 1; a < b; a++, b--) {
			int64_t tt = o->last[a].t_ns, uu = o->last[a].used;
			o->last[a] = o->last[b];
			o->last[b].t_ns = tt;
			o->last[b].used = uu;
		}
		o->nlast = n;
	}
	/* who held what */
	size_t cap = 0;
	int64_t others = 0, job = 0;
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		if (p->dev != dev || !p->present || !p->used_known)
			continue;
		if (p->job)
			job += p->used;
		else {
			others += p->used;
			if (p->used > (int64_t)in->top_other_bytes || in->top_other_pid < 0) {
				in->top_other_pid = p->pid;
				in->top_other_bytes = (uint64_t)p->used;
				(void)p->user;
				(void)p->command;
			}
		}
		if (cli_grow((void **)&o->holders, &cap, o->nholders, sizeof *o->holders, 16) != 0)
			break;
		o->holders[o->nholders++] = (struct holder){p->pid, p->used, p->job, p->user, p->command};
	}
	if (o->nholders)
		qsort(o->holders, o->nholders, sizeof *o->holders, cmp_holder);
	if (r->nprocs) {
		in->known |= GPUMON_OOM_F_OTHERS;
		in->others_bytes = (uint64_t)others;
	}
	if (r->job_known) {
		in->known |= GPUMON_OOM_F_JOB | GPUMON_OOM_F_EARLY;
		in->job_bytes = (uint64_t)job;
		in->early_bytes = (uint64_t)r->job_early;
	}
	/* the framework: the source holding the most */
	int64_t best = -1;
	for (size_t i = 0; i < r->nfw; i++) {
		struct rfw *f = &r->fw[i];
		if (f->allocated_known && f->reserved_known && f->reserved > best) {
			best = f->reserved;
			in->known |= GPUMON_OOM_F_FRAMEWORK;
			in->allocated_bytes = (uint64_t)f->allocated;
			in->reserved_bytes = (uint64_t)f->reserved;
		}
	}
	char what[96];
	int64_t alert;
	report_leak_choice(r, &in->leak, what, sizeof what, &alert);
	if (in->leak.points)
		in->known |= GPUMON_OOM_F_LEAK;
	gpumon_oom_diagnose(in, &o->diag);
}

/* ---- the document ------------------------------------------------------------------------------------ */

static json_t *num_or_null(int known, double v)
{
	return known ? json_real(v) : json_null();
}

static json_t *int_or_null(int known, int64_t v)
{
	return known ? json_integer(v) : json_null();
}

static json_t *owner(const report *r, int64_t pid)
{
	if (pid < 0)
		return json_null();
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid)
			return json_pack("{s:I, s:o, s:o}", "pid", (json_int_t)pid, "user", jstr(r->procs[i].user),
					 "command", jstr(r->procs[i].command));
	return json_pack("{s:I, s:n, s:n}", "pid", (json_int_t)pid, "user", "command");
}

static json_t *source_json(const report *r)
{
	json_t *s = json_object();
	char utc[40] = "";
	if (r->src.start_wall_ns > 0) {
		time_t secs = (time_t)(r->src.start_wall_ns / 1000000000);
		struct tm tm;
		gmtime_r(&secs, &tm);
		strftime(utc, sizeof utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	int64_t end = r->src.end_mono_ns > r->last_t_ns ? r->src.end_mono_ns : r->last_t_ns;
	json_object_set_new(s, "path", jstr(r->src.path ? r->src.path : ""));
	json_object_set_new(s, "type", json_string(r->src.type ? r->src.type : "recording"));
	json_object_set_new(s, "kind", r->src.kind && r->src.kind[0] ? json_string(r->src.kind) : json_null());
	json_object_set_new(s, "command", jstr(r->src.command));
	json_object_set_new(s, "host", r->src.host && r->src.host[0] ? jstr(r->src.host) : json_null());
	json_object_set_new(s, "start_utc", utc[0] ? json_string(utc) : json_null());
	json_object_set_new(s, "duration_s", num_or_null(r->rows > 0, report_seconds(r, end)));
	json_object_set_new(s, "exit_status", int_or_null(r->src.exit_status >= 0, r->src.exit_status));
	json_object_set_new(s, "damage", jstr(r->damage));
	return s;
}

static json_t *devices_json(const report *r)
{
	json_t *a = json_array();
	for (int i = 0; i < r->ndevinfo; i++) {
		const recfile_device *d = &r->devinfo[i];
		json_array_append_new(a, json_pack("{s:i, s:o, s:o, s:o}", "dev", d->dev, "name", jstr(d->name), "uuid",
						   jstr(d->uuid), "total_bytes", int_or_null(d->total_bytes > 0, d->total_bytes)));
	}
	if (r->ndevinfo == 0) /* a CSV: the device column, if any */
		for (int d = 0; d < r->ndev; d++)
			if (r->dev[d].seen)
				json_array_append_new(a, json_pack("{s:i, s:n, s:n, s:o}", "dev", d, "name", "uuid",
								   "total_bytes",
								   int_or_null(r->dev[d].total_known, r->dev[d].total)));
	return a;
}

static json_t *leak_json(report *r, json_t **alerts)
{
	gpumon_leak_result v;
	char what[96];
	int64_t alert_t;
	report_leak_choice(r, &v, what, sizeof what, &alert_t);
	static const char *names[] = {"insufficient_data", "none", "leak"};
	int leak = v.verdict == GPUMON_LEAK_SUSPECTED;
	json_t *l = json_object();
	json_object_set_new(l, "verdict", json_string(names[v.verdict >= 0 && v.verdict <= 2 ? v.verdict : 0]));
	json_object_set_new(l, "series", what[0] ? jstr(what) : json_null());
	json_object_set_new(l, "rate_bytes_per_step", num_or_null(leak && v.rate_bytes_per_step > 0, v.rate_bytes_per_step));
	json_object_set_new(l, "rate_bytes_per_second", num_or_null(leak, v.rate_bytes_per_second));
	json_object_set_new(l, "start_step", int_or_null(leak && v.start_step >= 0, v.start_step));
	/* relative times: a growth from the first row starts at 0 */
	json_object_set_new(l, "start_time", num_or_null(leak, (double)v.start_t_ns / 1e9));
	json_object_set_new(l, "confidence", num_or_null(v.verdict != GPUMON_LEAK_INSUFFICIENT_DATA, v.confidence));
	json_object_set_new(l, "steps_to_oom", num_or_null(leak && (-1.0) >= 0, (-1.0)));
	json_object_set_new(l, "seconds_to_oom", num_or_null(leak && (-1.0) >= 0, (-1.0)));
	json_object_set_new(l, "points", json_integer((json_int_t)v.points));
	if (alert_t) {
		char text[160];
		snprintf(text, sizeof text, "leak suspected on %s: %.3g MiB a %s", what,
			 (v.rate_bytes_per_step > 0 ? v.rate_bytes_per_step : v.rate_bytes_per_second) / 1048576.0,
			 v.rate_bytes_per_step > 0 ? "step" : "second");
		json_array_append_new(*alerts, json_pack("{s:f, s:o}", "time", report_seconds(r, alert_t), "text", jstr(text)));
	}
	return l;
}

static json_t *peak_entry(const report *r, const gpumon_peak *p)
{
	return json_pack("{s:f, s:f, s:I, s:f, s:o}", "start", (double)p->start_t_ns / 1e9, "end",
			 (double)p->end_t_ns / 1e9, "peak_bytes", (json_int_t)p->bytes, "peak_time",
			 (double)p->t_ns / 1e9, "owner", owner(r, p->owner_pid));
}

/* The job's peak for a `run`, the fullest GPU's otherwise, the framework's without either. */
static void peak_json(const report *r, json_t *doc)
{
	const gpumon_peaks *src = NULL;
	const char *what = NULL;
	int dev = -1;
	gpumon_peak g;
	int is_run = r->src.kind && !strcmp(r->src.kind, "run");
	if (is_run && gpumon_peaks_global(r->job_peaks, &g) == GPUMON_OK) {
		src = r->job_peaks;
		what = "job";
		dev = r->job_dev;
	} else {
		uint64_t best = 0;
		for (int d = 0; d < r->ndev; d++)
			if (r->dev[d].seen && gpumon_peaks_global(r->dev[d].peaks, &g) == GPUMON_OK && (!src || g.bytes > best)) {
				best = g.bytes;
				src = r->dev[d].peaks;
				what = "device";
				dev = d;
			}
		if (!src && gpumon_peaks_global(r->job_peaks, &g) == GPUMON_OK) {
			src = r->job_peaks;
			what = "job";
			dev = r->job_dev;
		}
		if (!src && gpumon_peaks_global(r->fw_peaks, &g) == GPUMON_OK) {
			src = r->fw_peaks;
			what = "framework";
		}
	}
	json_t *windows = json_array();
	if (!src) {
		json_object_set_new(doc, "peak", json_pack("{s:n, s:n, s:n, s:n, s:n}", "bytes", "time", "what", "dev", "owner"));
		json_object_set_new(doc, "windows", windows);
		return;
	}
	gpumon_peaks_global(src, &g);
	json_object_set_new(doc, "peak",
			    json_pack("{s:I, s:f, s:s, s:o, s:o}", "bytes", (json_int_t)g.bytes, "time", (double)g.t_ns / 1e9,
				      "what", what, "dev", dev >= 0 ? json_integer(dev) : json_null(), "owner",
				      owner(r, g.owner_pid)));
	gpumon_peak w[64];
	size_t n = gpumon_peaks_windows(src, w, 64);
	for (size_t i = 0; i < n && i < 64; i++)
		json_array_append_new(windows, peak_entry(r, &w[i]));
	json_object_set_new(doc, "windows", windows);
}

static void frag_json(const report *r, json_t *doc)
{
	const struct rfw *fb = NULL, *ub = NULL;
	for (size_t i = 0; i < r->nfw; i++) {
		const struct rfw *f = &r->fw[i];
		if (f->frag_known && (!fb || f->frag > fb->frag))
			fb = f;
		if (f->unacc_known && (!ub || f->unacc > ub->unacc))
			ub = f;
	}
	json_object_set_new(doc, "fragmentation",
			    fb ? json_pack("{s:I, s:f, s:o}", "bytes", (json_int_t)fb->frag, "time",
					   report_seconds(r, fb->frag_t_ns), "pid", int_or_null(fb->pid >= 0, fb->pid))
			       : json_null());
	json_object_set_new(doc, "unaccounted",
			    ub ? json_pack("{s:I, s:f, s:o}", "bytes", (json_int_t)ub->unacc, "time",
					   report_seconds(r, ub->unacc_t_ns), "pid", int_or_null(ub->pid >= 0, ub->pid))
			       : json_null());
}

static const char *cause_word(int cause)
{
	switch (cause) {
	case GPUMON_OOM_LEAK: return "leak";
	case GPUMON_OOM_CO_TENANT: return "co-tenant";
	case GPUMON_OOM_TRANSIENT_PEAK: return "transient peak";
	case GPUMON_OOM_PREALLOCATION: return "pre-allocation";
	}
	return "unknown";
}

static json_t *oom_json(const report *r)
{
	const struct oom_snapshot *o = &r->oom;
	if (o->t_ns < 0)
		return json_null();
	json_t *holders = json_array(), *last = json_array();
	for (size_t i = 0; i < o->nholders && i < 20; i++) {
		const struct holder *h = &o->holders[i];
		json_array_append_new(holders, json_pack("{s:I, s:o, s:o, s:I, s:b}", "pid", (json_int_t)h->pid, "user",
							 jstr(h->user), "command", jstr(h->command), "bytes",
							 (json_int_t)h->bytes, "job", h->job));
	}
	uint64_t total = report_dev_total(r, o->dev);
	for (int i = 0; i < o->nlast; i++)
		json_array_append_new(last, json_pack("{s:f, s:I, s:o}", "time", report_seconds(r, o->last[i].t_ns),
						      "used_bytes", (json_int_t)o->last[i].used, "total_bytes",
						      int_or_null(total > 0, (int64_t)total)));
	return json_pack("{s:f, s:i, s:o, s:s, s:o, s:o, s:o}", "time", report_seconds(r, o->t_ns), "dev", o->dev,
			 "message", jstr(o->line), "cause", cause_word(o->diag.cause), "diagnosis", jstr(""),
			 "holders", holders, "last_seconds", last);
}

static json_t *timeline_json(const report *r)
{
	json_t *t = json_object(), *devs = json_array(), *procs = json_array(), *fws = json_array();
	json_object_set_new(t, "devices", devs);
	json_object_set_new(t, "processes", procs);
	json_object_set_new(t, "framework", fws);
	for (int d = 0; d < r->ndev; d++) {
		if (!r->dev[d].seen)
			continue;
		uint64_t tot = report_dev_total(r, d);
		json_t *o = json_pack("{s:i, s:o}", "dev", d, "total_bytes", int_or_null(tot > 0, (int64_t)tot));
		series_json(&r->dev[d].line, o);
		json_array_append_new(devs, o);
	}
	/* the 64 processes with the highest peaks, job processes first among equals */
	size_t n = r->nprocs, take = n < 64 ? n : 64;
	char *taken = calloc(n ? n : 1, 1);
	for (size_t k = 0; taken && k < take; k++) {
		size_t best = n;
		for (size_t i = 0; i < n; i++)
			if (!taken[i] && (best == n || r->procs[i].peak > r->procs[best].peak ||
					  (r->procs[i].peak == r->procs[best].peak && r->procs[i].job > r->procs[best].job)))
				best = i;
		taken[best] = 1;
		const struct rproc *p = &r->procs[best];
		json_t *o = json_pack("{s:i, s:I, s:o, s:b}", "dev", p->dev, "pid", (json_int_t)p->pid, "label",
				      jstr(p->label ? p->label : ""), "job", p->job);
		series_json(&p->line, o);
		json_array_append_new(procs, o);
	}
	free(taken);
	for (size_t i = 0; i < r->nfw; i++) {
		const struct rfw *f = &r->fw[i];
		json_t *o = json_pack("{s:o, s:o, s:o}", "pid", int_or_null(f->pid >= 0, f->pid), "device",
				      int_or_null(f->device >= 0, f->device), "framework",
				      jstr(f->framework));
		series_json(&f->line, o);
		json_array_append_new(fws, o);
	}
	return t;
}

json_t *report_document(report *r, int with_timeline)
{
	json_t *doc = json_object(), *alerts = json_array(), *events = json_array();
	if (!doc || !alerts || !events) {
		json_decref(doc);
		json_decref(alerts);
		json_decref(events);
		return NULL;
	}
	json_object_set_new(doc, "format", json_integer(1));
	json_object_set_new(doc, "source", source_json(r));
	json_object_set_new(doc, "devices", devices_json(r));
	json_object_set_new(doc, "leak", leak_json(r, &alerts));
	int own_leak_alert = json_array_size(alerts) > 0; /* the report's detector alerted on a leak */
	peak_json(r, doc);
	frag_json(r, doc);
	json_object_set_new(doc, "oom", oom_json(r));
	for (size_t i = 0; i < r->nevents; i++) {
		const struct revent *e = &r->events[i];
		json_t *o = json_pack("{s:f, s:o, s:o}", "time", report_seconds(r, e->t_ns), "kind", jstr(e->kind),
				      "text", jstr(e->text));
		json_array_append_new(events, o);
		/* a leak alert the job gave live (gpumon run, GPUMonitor) is the one above: listed once */
		int dup = own_leak_alert && !strcmp(e->kind, "alert") && e->text && strstr(e->text, "leak suspected");
		if (!dup && (!strcmp(e->kind, "alert") || !strcmp(e->kind, "oom")))
			json_array_append_new(alerts, json_pack("{s:f, s:o}", "time", report_seconds(r, e->t_ns), "text",
								jstr(e->text ? e->text : e->kind)));
	}
	json_object_set_new(doc, "alerts", alerts);
	json_object_set_new(doc, "events", events);
	if (with_timeline)
		json_object_set_new(doc, "timeline", timeline_json(r));
	return doc;
}
