/* SPDX-License-Identifier: MIT */
/* document.c — the run model as one JSON document (docs/report.md, format 2): codes and figures,
 * no sentences, so that `gpumon report --json`, the HTML page, `gpumon run`'s summary and the
 * Python package's gpumon.report() all render the one answer. Times are seconds since the run's
 * start; bytes are integers; null is "not available". Every piece is one of the model's typed answers
 * (gpumon.h), so that the document and the front ends that ask them cannot disagree. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "../analysis/model.h"

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

static json_t *jstr_or_null(const char *s)
{
	return s && s[0] ? jstr(s) : json_null();
}

static json_t *num_or_null(int known, double v)
{
	return known ? json_real(v) : json_null();
}

static json_t *int_or_null(int known, int64_t v)
{
	return known ? json_integer(v) : json_null();
}

static json_t *u64(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

static json_t *secs(const gpumon_model *m, uint64_t t_ns)
{
	return json_real(gpumon__model_seconds(m, t_ns));
}

/* Sets key to v in o; a failed allocation (v NULL) fails the document. */
static int put(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

/* ---- names of codes --------------------------------------------------------------------------- */

static const char *peak_name(int w)
{
	return w == GPUMON_PEAK_JOB ? "job" : w == GPUMON_PEAK_DEVICE ? "device" : w == GPUMON_PEAK_FRAMEWORK ? "framework" : NULL;
}

/* ---- pieces ----------------------------------------------------------------------------------- */

/* Sets "owner" (the phrase gpumon_owner_describe makes, the one every front end shows; null when
 * none is known) and "owner_parts" (each part, null when unknown; null with no owner) on o. */
static int put_owner(json_t *o, const gpumon_model_who *w)
{
	if (!o)
		return -1;
	if (!w->owner_known)
		return put(o, "owner", json_null()) || put(o, "owner_parts", json_null());
	const gpumon_owner *p = &w->owner_parts;
	json_t *parts = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "namespace",
				  jstr_or_null(p->k8s_namespace), "pod", jstr_or_null(p->pod), "container",
				  jstr_or_null(p->container), "pod_uid", jstr_or_null(p->pod_uid), "slurm_job",
				  jstr_or_null(p->slurm_job), "slurm_step", jstr_or_null(p->slurm_step),
				  "container_id", jstr_or_null(p->container_id), "runtime", jstr_or_null(p->runtime),
				  "unit", jstr_or_null(p->unit));
	return put(o, "owner", jstr(w->owner)) || put(o, "owner_parts", parts);
}

/* {pid, user, command, owner, owner_parts} of a process (any GPU), or null. */
static json_t *who(const gpumon_model *m, int64_t pid)
{
	if (pid < 0)
		return json_null();
	gpumon_model_who w = {.size = sizeof w};
	gpumon_model_who_get(m, -1, (unsigned)pid, &w);
	json_t *o = json_pack("{s:I, s:o, s:o}", "pid", (json_int_t)pid, "user", jstr_or_null(w.user), "command",
			      jstr_or_null(w.command));
	if (put_owner(o, &w)) { /* o NULL, or out of memory */
		json_decref(o);
		return NULL;
	}
	return o;
}

/* source.damage: what the model was told was lost, and the records it left out itself for a
 * figure out of range; null when nothing was lost. */
static json_t *damage_json(const gpumon_model *m)
{
	char *text = NULL;
	if (gpumon_model_damage_get(m, &text) != GPUMON_OK)
		return NULL;
	json_t *j = jstr(text);
	gpumon_free(text);
	return j;
}

static json_t *source_json(const gpumon_model *m)
{
	gpumon_model_source src = {.size = sizeof src};
	json_t *s = json_object();
	if (!s || gpumon_model_source_get(m, &src) != GPUMON_OK || put(s, "path", jstr_or_null(src.path)) ||
	    put(s, "type", jstr(src.type)) || put(s, "kind", jstr_or_null(src.kind)) ||
	    put(s, "command", jstr(src.command)) || put(s, "host", jstr_or_null(src.host)) ||
	    put(s, "start_utc", jstr_or_null(src.start_utc)) ||
	    put(s, "duration_s", num_or_null(src.duration_known, src.duration_s)) ||
	    put(s, "exit_status", int_or_null(src.exit_status >= 0, src.exit_status)) || put(s, "damage", damage_json(m)) ||
	    put(s, "records", u64(src.records))) {
		json_decref(s);
		return NULL;
	}
	return s;
}

static json_t *peak_entry(const gpumon_model *m, const gpumon_peak *p, int whole);

/* A GPU's own peak (used), the job's peak there and the job's mean there, until the end. */
static int device_peaks(const gpumon_model *m, const gpumon_model_gpu *g, json_t *o)
{
	json_t *peak = g->peak_known ? peak_entry(m, &g->peak, 1) : json_null();
	json_t *job = g->job_peak_known ? peak_entry(m, &g->job_peak, 1) : json_null();
	return put(o, "peak", peak) || put(o, "job_peak", job) ||
	       put(o, "others_at_job_peak_bytes", int_or_null(g->job_known, (int64_t)g->others_at_job_peak_bytes)) ||
	       put(o, "others_peak_bytes", u64(g->others_peak_bytes)) ||
	       put(o, "job_mean_bytes", int_or_null(g->job_mean_known, (int64_t)g->job_mean_bytes));
}

static json_t *devices_json(const gpumon_model *m)
{
	json_t *a = json_array();
	gpumon_model_gpu g = {.size = sizeof g};
	for (size_t i = 0; a && gpumon_model_gpu_get(m, i, &g) == GPUMON_OK; i++) {
		json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:o, s:b, s:o, s:i}", "dev", (int)g.dev, "name",
				      jstr_or_null(g.name), "uuid", jstr_or_null(g.uuid), "pci_bus_id",
				      jstr_or_null(g.pci_bus_id), "total_bytes",
				      int_or_null(g.total_bytes > 0, (int64_t)g.total_bytes), "lost", g.lost, "lost_time",
				      num_or_null(g.lost_t_ns > 0, gpumon_model_seconds(m, g.lost_t_ns)), "host", (int)g.host);
		if (!o || json_array_append_new(a, o) || device_peaks(m, &g, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* The hosts (several when recordings of one job's nodes were read together). */
static json_t *hosts_json(const gpumon_model *m)
{
	size_t n = gpumon_model_hosts(m, NULL, 0);
	gpumon_model_host *h = calloc(n, sizeof *h);
	json_t *a = json_array();
	if (!h || !a)
		return free(h), json_decref(a), NULL;
	n = gpumon_model_hosts(m, h, n);
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:i, s:o, s:i, s:i, s:f, s:i, s:o}", "host", (int)i, "name", jstr_or_null(h[i].name),
				      "first_dev", (int)h[i].first_dev, "gpus", (int)h[i].ndev, "clock_offset_s",
				      (double)h[i].offset_ns / 1e9, "steps_checked", (int)h[i].steps, "step_skew_s",
				      num_or_null(h[i].steps > 0, (double)h[i].step_skew_ns / 1e9));
		if (!o || json_array_append_new(a, o))
			return free(h), json_decref(a), NULL;
	}
	free(h);
	return a;
}

/* One verdict: the series, the detector's figures and the projection. */
static json_t *verdict_json(const gpumon_model *m, const gpumon_verdict *v)
{
	const gpumon_leak_result *r = &v->leak;
	int leak = r->verdict == GPUMON_LEAK_SUSPECTED;
	int fw = v->series == GPUMON_SERIES_FRAMEWORK;
	json_t *series = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "kind", gpumon_series_name(v->series), "dev",
				   int_or_null(v->dev >= 0, v->dev), "pid", int_or_null(v->pid >= 0, v->pid), "device",
				   int_or_null(fw && v->device >= 0, v->device), "segment",
				   int_or_null(fw, (int64_t)v->segment), "framework",
				   fw ? jstr_or_null(v->framework) : json_null(), "rank", int_or_null(v->rank >= 0, v->rank));
	json_t *o = json_object();
	const char *room = gpumon_room_name(v->room);
	if (!series || !o || put(o, "verdict", json_string(gpumon_leak_verdict_name(r->verdict))) || put(o, "series", series) ||
	    put(o, "rate_bytes_per_step", num_or_null(leak && r->rate_bytes_per_step > 0, r->rate_bytes_per_step)) ||
	    put(o, "rate_bytes_per_second", num_or_null(leak, r->rate_bytes_per_second)) ||
	    put(o, "start_step", int_or_null(leak && r->start_step >= 0, r->start_step)) ||
	    put(o, "start_time", leak && r->start_t_ns ? secs(m, r->start_t_ns) : json_null()) ||
	    put(o, "confidence", num_or_null(r->verdict != GPUMON_LEAK_INSUFFICIENT_DATA, r->confidence)) ||
	    put(o, "floor_bytes", int_or_null(leak, (int64_t)r->floor_bytes)) ||
	    put(o, "points", u64(r->points)) ||
	    put(o, "alert", json_boolean(r->alert)) ||
	    put(o, "alert_time", r->alert && r->alert_t_ns ? secs(m, r->alert_t_ns) : json_null()) ||
	    put(o, "room", room ? json_string(room) : json_null()) ||
	    put(o, "room_bytes", int_or_null(room != NULL, (int64_t)v->room_bytes)) ||
	    put(o, "steps_to_oom", num_or_null(leak && v->steps_to_oom >= 0, v->steps_to_oom)) ||
	    put(o, "seconds_to_oom", num_or_null(leak && v->seconds_to_oom >= 0, v->seconds_to_oom))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int verdicts_json(const gpumon_model *m, json_t *doc)
{
	gpumon_verdict v;
	if (gpumon_model_verdict(m, &v) == GPUMON_OK) {
		if (put(doc, "leak", verdict_json(m, &v)))
			return -1;
	} else if (put(doc, "leak", json_null())) {
		return -1;
	}
	size_t n = gpumon_model_verdicts(m, NULL, 0);
	gpumon_verdict *all = n ? calloc(n, sizeof *all) : NULL;
	json_t *a = json_array();
	if ((n && !all) || !a) {
		free(all);
		json_decref(a);
		return -1;
	}
	gpumon_model_verdicts(m, all, n);
	for (size_t i = 0; i < n; i++)
		if (json_array_append_new(a, verdict_json(m, &all[i]))) {
			free(all);
			json_decref(a);
			return -1;
		}
	free(all);
	return put(doc, "series", a);
}

static json_t *peak_entry(const gpumon_model *m, const gpumon_peak *p, int whole)
{
	json_t *o = json_pack("{s:I, s:o, s:o, s:o}", "bytes", (json_int_t)p->bytes, "time", secs(m, p->t_ns), "owner",
			      who(m, p->owner_pid), "largest",
			      p->largest_pid >= 0 && p->largest_pid != p->owner_pid ? who(m, p->largest_pid) : json_null());
	if (o && !whole && (put(o, "start", secs(m, p->start_t_ns)) || put(o, "end", secs(m, p->end_t_ns)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int peak_json(const gpumon_model *m, json_t *doc)
{
	gpumon_peak p, win[MODEL_PEAK_WINDOWS];
	int what, dev;
	size_t nwin = 0;
	json_t *windows = json_array();
	if (!windows)
		return -1;
	if (gpumon_model_peak(m, &what, &dev, &p, win, MODEL_PEAK_WINDOWS, &nwin) != GPUMON_OK) {
		if (put(doc, "peak", json_null()))
			return json_decref(windows), -1;
		return put(doc, "windows", windows);
	}
	json_t *o = peak_entry(m, &p, 1);
	if (!o || put(o, "what", json_string(peak_name(what))) || put(o, "dev", int_or_null(dev >= 0, dev)) ||
	    put(doc, "peak", o)) {
		json_decref(windows);
		return -1;
	}
	for (size_t i = 0; i < nwin && i < MODEL_PEAK_WINDOWS; i++)
		if (json_array_append_new(windows, peak_entry(m, &win[i], 0)))
			return json_decref(windows), -1;
	return put(doc, "windows", windows);
}

static json_t *figure_json(const gpumon_model *m, const gpumon_model_figure *f)
{
	if (!f->known)
		return json_null();
	return json_pack("{s:I, s:o, s:o, s:o}", "bytes", (json_int_t)f->bytes, "time", secs(m, f->t_ns), "pid",
			 int_or_null(f->pid >= 0, f->pid), "dev", int_or_null(f->dev >= 0, f->dev));
}

static const char *unacc_why_name(int why)
{
	switch (why) {
	case GPUMON_UNACCOUNTED_DEVICE_UNKNOWN: return "device_unknown";
	case GPUMON_UNACCOUNTED_NOT_VISIBLE: return "not_visible";
	case GPUMON_UNACCOUNTED_MIG: return "mig";
	case GPUMON_UNACCOUNTED_NO_GPU: return "no_gpu";
	case GPUMON_UNACCOUNTED_NO_NVML_FIGURE: return "no_nvml_figure";
	}
	return NULL;
}

/* Each framework source segment: its peaks, the memory its allocator caches, the memory its process
 * holds outside it (or why that is not known). */
static json_t *frameworks_json(const gpumon_model *m)
{
	json_t *a = json_array();
	gpumon_model_framework s = {.size = sizeof s};
	for (size_t i = 0; a && gpumon_model_framework_get(m, i, &s) == GPUMON_OK; i++) {
		const char *why = unacc_why_name(s.unaccounted_why);
		const gpumon_placed *p = &s.placed;
		json_t *placed = json_null();
		if (s.placed_known) /* outside is unknown when NVML's figure lags behind the allocator's */
			placed = json_pack("{s:o, s:o, s:I, s:I, s:I, s:I, s:o}", "time", secs(m, p->t_ns), "step",
					   int_or_null(p->step >= 0, p->step), "nvml_bytes", (json_int_t)p->nvml_bytes,
					   "reserved_bytes", (json_int_t)p->reserved_bytes, "allocated_bytes",
					   (json_int_t)p->allocated_bytes, "cached_bytes", (json_int_t)p->cached_bytes,
					   "outside_bytes", int_or_null(p->outside_known, (int64_t)p->outside_bytes));
		json_t *o = json_pack("{s:I, s:o, s:o, s:i, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "pid", (json_int_t)s.pid,
				      "device", int_or_null(s.device >= 0, s.device), "framework",
				      jstr_or_null(s.framework), "segment", (int)s.segment, "dev",
				      int_or_null(s.dev >= 0, s.dev), "points", (json_int_t)s.points, "allocated_peak_bytes",
				      int_or_null(s.allocated_peak_bytes > 0, (int64_t)s.allocated_peak_bytes),
				      "reserved_peak_bytes", int_or_null(s.reserved_peak_bytes > 0, (int64_t)s.reserved_peak_bytes),
				      "fragmentation", figure_json(m, &s.fragmentation), "unaccounted",
				      figure_json(m, &s.unaccounted), "unaccounted_why", why ? json_string(why) : json_null(),
				      "placed", placed ? placed : json_null());
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* A JSON object the library encoded (figures, a snapshot: st its status, text what it wrote, freed
 * here), as a value of the document; null when it cannot be had. */
static json_t *encoded(int st, char *text)
{
	json_t *j = st == GPUMON_OK ? json_loads(text, 0, NULL) : NULL;
	gpumon_free(text);
	return j ? j : json_null();
}

/* Every cause that holds, the main one first. */
static json_t *causes_json(const gpumon_oom_diagnosis *d)
{
	json_t *a = json_array();
	if (a && d->causes)
		json_array_append_new(a, json_string(gpumon_oom_cause_name(d->cause)));
	for (int c = 1; a && c < GPUMON_OOM_NCAUSES; c++)
		if ((d->causes & GPUMON_OOM_BIT(c)) && c != d->cause)
			json_array_append_new(a, json_string(gpumon_oom_cause_name(c)));
	return a;
}

static json_t *oom_json(const gpumon_model *m)
{
	gpumon_model_oom o;
	if (gpumon_model_oom_get(m, &o) != GPUMON_OK)
		return json_null();
	const gpumon_oom_input *in = &o.input;
	const gpumon_oom_diagnosis *dg = &o.diagnosis;
	json_t *holders = json_array(), *last = json_array();
	for (size_t i = 0; holders && i < o.nholders; i++) {
		const gpumon_holder *h = &o.holders[i];
		json_t *x = json_pack("{s:I, s:o, s:o, s:o, s:b, s:o}", "pid", (json_int_t)h->pid, "user",
				      jstr_or_null(h->user), "command", jstr_or_null(h->command), "bytes",
				      int_or_null(h->used_known, (int64_t)h->used_bytes), "job", h->job, "rank",
				      int_or_null(h->rank >= 0, h->rank));
		gpumon_model_who w = {.size = sizeof w};
		gpumon_model_who_get(m, o.dev, h->pid, &w);
		if (put_owner(x, &w) ? (json_decref(x), 1) : json_array_append_new(holders, x)) {
			json_decref(holders);
			holders = NULL;
		}
	}
	uint64_t total = gpumon__model_total(m, o.dev);
	for (size_t i = 0; last && i < o.nlast; i++)
		json_array_append_new(last, json_pack("{s:o, s:I, s:o}", "time", secs(m, o.last[i].t_ns), "used_bytes",
						      (json_int_t)o.last[i].used_bytes, "total_bytes",
						      int_or_null(total > 0, (int64_t)total)));
#define F(bit, v) int_or_null((in->known & (bit)) == (bit), (int64_t)(v))
#define D(v) int_or_null(dg->v > 0, (int64_t)dg->v)
	json_t *figures = json_pack(
	    "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "total_bytes", F(GPUMON_OOM_F_TOTAL, in->total_bytes),
	    "used_bytes", F(GPUMON_OOM_F_USED, in->used_bytes), "job_bytes", F(GPUMON_OOM_F_JOB, in->job_bytes),
	    "others_bytes", F(GPUMON_OOM_F_OTHERS, in->others_bytes), "top_other",
	    in->top_other_pid >= 0 ? who(m, in->top_other_pid) : json_null(), "top_other_bytes",
	    int_or_null(in->top_other_pid >= 0, (int64_t)in->top_other_bytes), "floor_bytes",
	    F(GPUMON_OOM_F_FLOOR, in->floor_bytes), "rise_seconds", num_or_null(in->rise_seconds >= 0, in->rise_seconds),
	    "early_bytes", F(GPUMON_OOM_F_EARLY, in->early_bytes), "allocated_bytes",
	    F(GPUMON_OOM_F_FRAMEWORK, in->allocated_bytes), "reserved_bytes", F(GPUMON_OOM_F_FRAMEWORK, in->reserved_bytes));
	/* what decided the causes */
	if (figures &&
	    (put(figures, "steady", (in->known & GPUMON_OOM_F_STEADY) ? json_boolean(in->steady) : json_null()) ||
	     put(figures, "steady_bytes", int_or_null((in->known & GPUMON_OOM_F_STEADY) && in->steady, (int64_t)in->steady_bytes)) ||
	     put(figures, "process_bytes", F(GPUMON_OOM_F_PROCESS, in->process_bytes)) ||
	     put(figures, "limit_bytes", F(GPUMON_OOM_F_LIMIT, in->limit_bytes)) ||
	     put(figures, "request_bytes", D(request_bytes)) || put(figures, "available_bytes", int_or_null(
		     dg->request_bytes && (in->figures.known & GPUMON_FIG_FREE), (int64_t)dg->available_bytes)) ||
	     put(figures, "shortfall_bytes", D(shortfall_bytes)) || put(figures, "cached_bytes", D(cached_bytes)) ||
	     put(figures, "largest_free_bytes", D(largest_free_bytes)) || put(figures, "outside_bytes", D(outside_bytes)) ||
	     put(figures, "cap_bytes", D(cap_bytes)) || put(figures, "excess_bytes", D(excess_bytes)) ||
	     put(figures, "growth_bytes", D(growth_bytes)) ||
	     put(figures, "growth_seconds", num_or_null(dg->growth_bytes > 0, dg->growth_seconds)))) {
		json_decref(figures);
		figures = NULL;
	}
#undef D
#undef F
	char *text = NULL;
	json_t *said = json_null(), *snap = json_null();
	if (in->known & GPUMON_OOM_F_FIGURES) {
		const gpumon_oom_figures *f = &in->figures;
		int st = gpumon_oom_figures_encode(f, &text);
		said = encoded(st, text);
		/* what the allocator held that no tensor used then */
		unsigned both = GPUMON_FIG_ALLOCATED | GPUMON_FIG_RESERVED;
		if (json_is_object(said) && (f->known & both) == both && f->reserved_bytes >= f->allocated_bytes &&
		    put(said, "cached_bytes", u64(f->reserved_bytes - f->allocated_bytes))) {
			json_decref(said);
			said = NULL;
		}
	}
	if (in->known & GPUMON_OOM_F_SNAPSHOT) {
		text = NULL;
		int st = gpumon_snapshot_encode(&in->snapshot, &text);
		snap = encoded(st, text);
	}
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:s, s:o, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:i}", "time",
			 secs(m, o.t_ns), "dev", int_or_null(o.dev >= 0, o.dev), "pid", int_or_null(o.pid > 0, o.pid),
			 "rank", int_or_null(o.rank >= 0, o.rank), "message",
			 jstr_or_null(o.message), "cause", gpumon_oom_cause_name(dg->cause), "causes", causes_json(dg), "also_leak",
			 !!(dg->also & GPUMON_OOM_ALSO_LEAK), "by_early_figure", !!(dg->also & GPUMON_OOM_BY_EARLY_FIGURE),
			 "figures", figures ? figures : json_null(), "framework", said, "snapshot", snap, "holders",
			 holders ? holders : json_null(), "last_seconds", last ? last : json_null(), "signs", (int)o.signs);
}

/* A distributed job's workers (gpumon_model_ranks) and their skew; [] and null when none. */
static json_t *ranks_json(const gpumon_model *m)
{
	size_t n = gpumon_model_ranks(m, NULL, 0);
	gpumon_rank_row *rows = n ? calloc(n, sizeof *rows) : NULL;
	json_t *a = json_array();
	if ((n && !rows) || !a)
		return free(rows), json_decref(a), NULL;
	n = gpumon_model_ranks(m, rows, n);
	for (size_t i = 0; i < n; i++) {
		const gpumon_rank_row *r = &rows[i];
		const gpumon_rank *k = &r->rank;
		json_t *o = json_pack(
		    "{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:b, s:o, s:b}", "rank", k->rank,
		    "local_rank", int_or_null(k->local_rank >= 0, k->local_rank), "world_size",
		    int_or_null(k->world_size >= 0, k->world_size), "node_rank", int_or_null(k->node_rank >= 0, k->node_rank),
		    "job_id", jstr_or_null(k->job_id), "launcher", jstr(k->launcher), "master", jstr_or_null(k->master),
		    "dev", (int)r->dev, "pid", (json_int_t)r->pid, "peak_bytes",
		    int_or_null(r->used_known, (int64_t)r->peak_bytes), "mean_bytes",
		    int_or_null(r->used_known, (int64_t)r->mean_bytes), "last_bytes",
		    int_or_null(r->used_known, (int64_t)r->last_bytes), "first_time", secs(m, r->first_t_ns), "last_time",
		    secs(m, r->last_t_ns), "present", r->present, "leak",
		    r->verdict.series != GPUMON_SERIES_NONE ? verdict_json(m, &r->verdict) : json_null(), "oom", r->oom);
		if (o && (put(o, "host", json_integer(r->host)) ||
			  put(o, "floor_bytes", int_or_null(r->floor_known, (int64_t)r->floor_bytes)) ||
			  put(o, "at_oom_bytes", int_or_null(r->at_oom_known, (int64_t)r->at_oom_bytes)))) {
			json_decref(o);
			o = NULL;
		}
		if (!o || json_array_append_new(a, o))
			return free(rows), json_decref(a), NULL;
	}
	free(rows);
	return a;
}

static json_t *rank_skew_json(const gpumon_model *m)
{
	gpumon_rank_skew k;
	if (gpumon_model_rank_skew(m, &k) != GPUMON_OK)
		return json_null();
	return json_pack("{s:i, s:o, s:I, s:i, s:I, s:i, s:I, s:I, s:i, s:I, s:i, s:I}", "ranks", (int)k.ranks, "job_id",
			 jstr_or_null(k.job_id), "peak_min_bytes", (json_int_t)k.peak_min_bytes, "peak_min_rank",
			 k.peak_min_rank, "peak_max_bytes", (json_int_t)k.peak_max_bytes, "peak_max_rank", k.peak_max_rank,
			 "peak_skew_bytes", (json_int_t)(k.peak_max_bytes - k.peak_min_bytes), "mean_min_bytes",
			 (json_int_t)k.mean_min_bytes, "mean_min_rank", k.mean_min_rank, "mean_max_bytes",
			 (json_int_t)k.mean_max_bytes, "mean_max_rank", k.mean_max_rank, "mean_skew_bytes",
			 (json_int_t)(k.mean_max_bytes - k.mean_min_bytes));
}

static json_t *alert_json(const gpumon_model *m, const gpumon_alert *a)
{
	int judged = a->kind == GPUMON_ALERT_LEAK || a->kind == GPUMON_ALERT_OOM_PROJECTED;
	json_t *o = judged ? verdict_json(m, &a->verdict) : json_object();
	if (!o || put(o, "time", secs(m, a->t_ns)) ||
	    put(o, "kind", json_string(gpumon_alert_name(a->kind))) ||
	    put(o, "live", json_boolean(a->live)) || put(o, "dev", int_or_null(a->dev >= 0, a->dev))) {
		json_decref(o);
		return NULL;
	}
	if (a->kind == GPUMON_ALERT_HEADROOM &&
	    (put(o, "free_bytes", u64(a->free_bytes)) || put(o, "total_bytes", u64(a->total_bytes)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int alerts_events_json(const gpumon_model *m, json_t *doc)
{
	json_t *alerts = json_array(), *events = json_array();
	if (!alerts || !events || put(doc, "alerts", alerts) || put(doc, "events", events)) {
		json_decref(alerts);
		json_decref(events);
		return -1;
	}
	gpumon_alert a;
	for (size_t i = 0; gpumon_model_alerts(m, i, &a, 1) > 0; i++)
		if (a.kind != GPUMON_ALERT_LIMIT && /* LIMIT: said by the front end that acted on it */
		    json_array_append_new(alerts, alert_json(m, &a)))
			return -1;
	gpumon_model_event e = {.size = sizeof e};
	for (size_t i = 0; gpumon_model_event_get(m, i, &e) == GPUMON_OK; i++)
		if (json_array_append_new(events, json_pack("{s:o, s:o, s:o, s:o}", "time", secs(m, e.t_ns), "kind",
							    jstr(e.kind), "text", jstr(e.text), "dev",
							    e.dev >= 0 ? json_integer(e.dev) : json_null())))
			return -1;
	gpumon_model_source src = {.size = sizeof src};
	gpumon_model_source_get(m, &src);
	return put(doc, "events_dropped", u64(src.events_dropped));
}

/* ---- timelines: the reduced series, each value holding until the next, carried to the end -------- */

static int line_json(const gpumon_model *m, const struct timeline *tl, const char *const *names, uint64_t end_t,
		     json_t *o)
{
	json_t *t = json_array();
	if (!t || put(o, "t", t))
		return json_decref(t), -1;
	size_t n = tl->n;
	/* a step function holds its last value until the series ends: one more point says so */
	int extend = n && end_t > tl->last_t && end_t > tl->t[n - 1];
	for (size_t i = 0; i < n; i++)
		json_array_append_new(t, secs(m, tl->t[i]));
	if (extend)
		json_array_append_new(t, secs(m, end_t));
	for (int f = 0; f < tl->nfields; f++) {
		json_t *a = json_array();
		if (!a || put(o, names[f], a))
			return json_decref(a), -1;
		for (size_t i = 0; i < n; i++)
			json_array_append_new(a, (tl->known[i] >> f) & 1 ? json_integer(tl->v[f * TIMELINE_BUCKETS + i])
									  : json_null());
		if (extend)
			json_array_append_new(a, (tl->known[n - 1] >> f) & 1
						     ? json_integer(tl->v[f * TIMELINE_BUCKETS + n - 1])
						     : json_null());
	}
	return 0;
}

/* Processes whose timeline the document carries: the TIMELINE_PROCESSES with the highest peaks, and
 * the workers of a distributed job (ranks[]) besides them, until TIMELINE_RANKS workers are carried,
 * so that a page can draw each rank; a process drawn is at most TIMELINE_BUCKETS points. */
#define TIMELINE_PROCESSES 64
#define TIMELINE_RANKS 256

/* Highest peak first, the job's processes first among equals, then in the model's order. */
static int cmp_peak(const void *a, const void *b)
{
	const struct mproc *x = *(const struct mproc *const *)a, *y = *(const struct mproc *const *)b;
	if (x->peak != y->peak)
		return x->peak > y->peak ? -1 : 1;
	if (!x->job != !y->job)
		return x->job ? -1 : 1;
	return (x > y) - (x < y);
}

/* The processes that have a timeline, in cmp_peak's order (*n of them); NULL when out of memory. */
static const struct mproc **by_peak(const gpumon_model *m, size_t *n)
{
	const struct mproc **order = malloc((m->nprocs ? m->nprocs : 1) * sizeof *order);
	*n = 0;
	for (size_t i = 0; order && i < m->nprocs; i++)
		if (m->procs[i].line.n)
			order[(*n)++] = &m->procs[i];
	if (order)
		qsort(order, *n, sizeof *order, cmp_peak);
	return order;
}

/* Which of its workers a page needs most: 0 the one that ran out of memory, 1 one whose own figure
 * leaks, 2 an end of the skew between the ranks, 3 the others (by rank). */
static int rank_need(const gpumon_rank_row *r, const gpumon_rank_skew *k)
{
	if (r->oom)
		return 0;
	if (r->verdict.series != GPUMON_SERIES_NONE && r->verdict.leak.verdict == GPUMON_LEAK_SUSPECTED)
		return 1;
	int end = r->rank.rank == k->peak_min_rank || r->rank.rank == k->peak_max_rank ||
		  r->rank.rank == k->mean_min_rank || r->rank.rank == k->mean_max_rank;
	return end ? 2 : 3;
}

/* Marks in taken[] (one a process of m) the processes whose timeline the document carries: the
 * first TIMELINE_PROCESSES of order (n processes with a timeline, by_peak's), then workers not among
 * them, the most needed first (rank_need), until TIMELINE_RANKS workers are carried. 0, or -1 when
 * out of memory. */
static int pick_timelines(const gpumon_model *m, const struct mproc **order, size_t n, char *taken)
{
	for (size_t k = 0; k < n && k < TIMELINE_PROCESSES; k++)
		taken[order[k] - m->procs] = 1;
	size_t nr = gpumon_model_ranks(m, NULL, 0), carried = 0;
	if (!nr)
		return 0;
	gpumon_rank_row *rows = calloc(nr, sizeof *rows);
	if (!rows)
		return -1;
	nr = gpumon_model_ranks(m, rows, nr);
	gpumon_rank_skew skew;
	if (gpumon_model_rank_skew(m, &skew) != GPUMON_OK) /* no ends: every rank is -1 there */
		skew.peak_min_rank = skew.peak_max_rank = skew.mean_min_rank = skew.mean_max_rank = -1;
	for (size_t i = 0; i < nr; i++) {
		const struct mproc *p = gpumon__model_proc(m, rows[i].dev, rows[i].pid);
		carried += p && p->line.n && taken[p - m->procs];
	}
	for (int need = 0; need < 4; need++)
		for (size_t i = 0; i < nr && carried < TIMELINE_RANKS; i++) {
			const struct mproc *p = gpumon__model_proc(m, rows[i].dev, rows[i].pid);
			if (rank_need(&rows[i], &skew) != need || !p || !p->line.n || taken[p - m->procs])
				continue;
			taken[p - m->procs] = 1;
			carried++;
		}
	free(rows);
	return 0;
}

int gpumon_model_timeline_processes(const gpumon_model *m, size_t *carried, size_t *left_out)
{
	if (!m || !carried || !left_out)
		return GPUMON_E_INVAL;
	size_t n = 0;
	const struct mproc **order = by_peak(m, &n);
	char *taken = calloc(m->nprocs ? m->nprocs : 1, 1);
	int bad = !order || !taken || pick_timelines(m, order, n, taken) != 0;
	*carried = 0;
	for (size_t k = 0; !bad && k < n; k++)
		*carried += taken[order[k] - m->procs] != 0;
	*left_out = bad ? 0 : n - *carried;
	free(order);
	free(taken);
	return bad ? GPUMON_E_NOMEM : GPUMON_OK;
}

static json_t *timeline_json(const gpumon_model *m)
{
	static const char *const dev_names[] = {"used", "used_max", "reserved"};
	static const char *const proc_names[] = {"used"};
	static const char *const seg_names[] = {"allocated", "reserved", "max_allocated", "step"};
	uint64_t end = gpumon__model_end(m);
	json_t *t = json_object(), *devs = json_array(), *procs = json_array(), *fws = json_array();
	if (!t || !devs || !procs || !fws || put(t, "devices", devs) || put(t, "processes", procs) ||
	    put(t, "framework", fws)) {
		json_decref(t);
		return NULL;
	}
	for (unsigned d = 0; d < m->ndev; d++) {
		const struct mdev *x = &m->dev[d];
		if (!x->seen || !x->line.n)
			continue;
		uint64_t total = gpumon__model_total(m, (int)d);
		json_t *o = json_pack("{s:i, s:o}", "dev", (int)d, "total_bytes", int_or_null(total > 0, (int64_t)total));
		if (!o || json_array_append_new(devs, o) || line_json(m, &x->line, dev_names, end, o))
			return json_decref(t), NULL;
	}
	/* the processes carried (pick_timelines); how many more had a timeline is said
	   (processes_left_out), so that a page drawing these knows what it misses */
	size_t n = 0, carried = 0;
	const struct mproc **order = by_peak(m, &n);
	char *taken = calloc(m->nprocs ? m->nprocs : 1, 1);
	if (!order || !taken || pick_timelines(m, order, n, taken) != 0) {
		free(order);
		free(taken);
		json_decref(t);
		return NULL;
	}
	for (size_t k = 0; k < n; k++) {
		const struct mproc *p = order[k];
		if (!taken[p - m->procs])
			continue;
		carried++;
		json_t *o = json_pack("{s:i, s:I, s:o, s:o, s:b}", "dev", (int)p->dev, "pid", (json_int_t)p->pid, "user",
				      jstr_or_null(p->user), "command", jstr_or_null(p->command), "job", p->job);
		gpumon_model_who w = {.size = sizeof w};
		gpumon_model_who_get(m, (int)p->dev, p->pid, &w);
		int bad = put_owner(o, &w) ? (json_decref(o), 1) : json_array_append_new(procs, o);
		if (bad || line_json(m, &p->line, proc_names, p->present ? end : 0, o)) {
			free(order);
			free(taken);
			json_decref(t);
			return NULL;
		}
	}
	free(order);
	free(taken);
	if (put(t, "processes_left_out", json_integer((json_int_t)(n - carried)))) {
		json_decref(t);
		return NULL;
	}
	for (size_t i = 0; i < m->nsegs; i++) {
		const struct mseg *s = &m->segs[i];
		if (!s->line.n)
			continue;
		json_t *o = json_pack("{s:I, s:o, s:o, s:i}", "pid", (json_int_t)s->pid, "device",
				      int_or_null(s->device >= 0, s->device), "framework", jstr_or_null(s->framework),
				      "segment", (int)s->segment);
		if (!o || json_array_append_new(fws, o) || line_json(m, &s->line, seg_names, 0, o))
			return json_decref(t), NULL;
	}
	return t;
}

int gpumon_model_document(const gpumon_model *m, unsigned flags, char **json)
{
	if (!m || !json)
		return GPUMON_E_INVAL;
	*json = NULL;
	json_t *doc = json_object();
	gpumon_model_figure frag, unacc;
	gpumon_model_memory(m, &frag, &unacc);
	int bad = !doc || put(doc, "format", json_integer(2)) || put(doc, "source", source_json(m)) ||
		  put(doc, "hosts", hosts_json(m)) || put(doc, "devices", devices_json(m)) || verdicts_json(m, doc) || peak_json(m, doc) ||
		  put(doc, "fragmentation", figure_json(m, &frag)) || put(doc, "unaccounted", figure_json(m, &unacc)) ||
		  put(doc, "frameworks", frameworks_json(m)) ||
		  put(doc, "ranks", ranks_json(m)) || put(doc, "rank_skew", rank_skew_json(m)) ||
		  put(doc, "oom", oom_json(m)) || alerts_events_json(m, doc);
	if (!bad && (flags & GPUMON_DOC_TIMELINE))
		bad = put(doc, "timeline", timeline_json(m));
	/* ASCII: a command line's C1 controls and bidirectional overrides are \u escapes (jansson
	   escapes C0 ones), so the text is safe to print as it is */
	char *text = bad ? NULL : json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(doc);
	if (!text)
		return GPUMON_E_NOMEM;
	/* json_dumps's buffer comes from jansson's allocator (malloc by default): copied, so that
	   gpumon_free() is the one way to free what the library hands out */
	*json = strdup(text);
	free(text);
	return *json ? GPUMON_OK : GPUMON_E_NOMEM;
}
