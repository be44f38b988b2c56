/* SPDX-License-Identifier: MIT */
/* model_judge.c — what the run model says: the verdict on each series and the one rule that picks
 * the run's, what is left before out-of-memory and which bound that is, alerts, the peak with the
 * process whose rise made it, and the memory the allocator caches or does not account for. */
#include "model.h"

#include <stdlib.h>
#include <string.h>

/* ---- time to out-of-memory ------------------------------------------------------------------------ */

static void consider(gpumon_verdict *v, int kind, uint64_t bound, uint64_t figure)
{
	uint64_t room = bound > figure ? bound - figure : 0;
	if (v->room == GPUMON_ROOM_UNKNOWN || room < v->room_bytes) {
		v->room = kind;
		v->room_bytes = room;
	}
}

/* The nearest bound for a series on dev whose figure is `figure` now: the GPU's free memory at the
 * series' last point (a job that has ended has freed its memory: that is not room it had), a
 * ceiling set for the job (on the process's NVML figure when known), the allocator's cap. */
static void room_for(const gpumon_model *m, gpumon_verdict *v, int free_known, uint64_t free, uint64_t figure,
		     int nvml_known, uint64_t nvml_figure, uint64_t cap, uint64_t cap_figure)
{
	const struct mdev *d = v->dev >= 0 && (unsigned)v->dev < m->ndev && m->dev[v->dev].seen ? &m->dev[v->dev] : NULL;
	if (free_known)
		consider(v, GPUMON_ROOM_FREE, free, 0);
	if (m->cfg.limit_bytes)
		consider(v, GPUMON_ROOM_LIMIT, m->cfg.limit_bytes, nvml_known ? nvml_figure : figure);
	if (cap)
		consider(v, GPUMON_ROOM_CAP, cap, cap_figure);
	if (v->room == GPUMON_ROOM_UNKNOWN && d) {
		uint64_t total = gpumon__model_total(m, v->dev);
		if (total)
			consider(v, GPUMON_ROOM_TOTAL, total, d->have ? d->used : figure);
	}
}

void gpumon__model_verdict_fill(const gpumon_model *m, int series, int dev, const struct mproc *p,
				const struct mseg *s, gpumon_verdict *out)
{
	memset(out, 0, sizeof *out);
	out->series = series;
	out->dev = dev;
	out->pid = -1;
	out->device = -1;
	out->seconds_to_oom = out->steps_to_oom = -1;
	const struct mdev *d = dev >= 0 && (unsigned)dev < m->ndev ? &m->dev[dev] : NULL;
	const gpumon_leak *l = NULL;
	uint64_t figure = 0, nvml = 0, cap = 0, cap_figure = 0, free = 0;
	int nvml_known = 0, free_known = 0;
	switch (series) {
	case GPUMON_SERIES_FRAMEWORK:
		l = s->leak;
		out->pid = s->pid;
		out->device = s->device;
		out->segment = s->segment;
		memcpy(out->framework, s->framework, sizeof out->framework);
		dev = gpumon__model_map_device(m, s->pid, s->device);
		out->dev = dev = dev >= 0 ? dev : -1; /* the verdict says -1 for no GPU, whatever the reason */
		figure = s->allocated;
		if (dev >= 0) {
			const struct mproc *np = gpumon__model_proc(m, (unsigned)dev, s->pid);
			nvml_known = np && np->present && np->used_known;
			nvml = nvml_known ? np->used : 0;
		}
		/* under the cap, what the allocator can still hand out: its cache (torch frees it before
		 * failing) and a pre-allocated pool (JAX's is the cap itself) are room, not use */
		cap = s->limit;
		cap_figure = s->allocated;
		free_known = s->free_known;
		free = s->free_at_last;
		break;
	case GPUMON_SERIES_JOB:
		l = d ? d->job_leak : NULL;
		figure = d ? d->job_bytes : 0;
		free_known = d && d->free_known;
		free = d ? d->job_free : 0;
		break;
	case GPUMON_SERIES_PROCESS:
		l = p->leak;
		out->pid = p->pid;
		figure = p->used;
		nvml_known = p->used_known;
		nvml = p->used;
		free_known = d && d->free_known;
		free = p->free_at_last;
		break;
	case GPUMON_SERIES_DEVICE:
		l = d ? d->leak : NULL;
		figure = d ? d->used : 0;
		free_known = d && d->free_known;
		free = d ? d->free : 0;
		break;
	}
	gpumon_leak_result_get(l, &out->leak);
	out->rank = series == GPUMON_SERIES_PROCESS ? (p->rank.launcher[0] ? p->rank.rank : -1)
		    : series == GPUMON_SERIES_FRAMEWORK ? (dev >= 0 ? gpumon__model_rank_of(m, (unsigned)dev, s->pid) : -1)
		    : series == GPUMON_SERIES_JOB       ? gpumon__model_job_rank(m, dev)
							: -1;
	room_for(m, out, free_known, free, figure, nvml_known, nvml, cap, cap_figure);
	const gpumon_leak_result *r = &out->leak;
	if (r->verdict != GPUMON_LEAK_SUSPECTED || out->room == GPUMON_ROOM_UNKNOWN)
		return;
	if (r->rate_bytes_per_second > 0)
		out->seconds_to_oom = (double)out->room_bytes / r->rate_bytes_per_second;
	if (r->rate_bytes_per_step > 0)
		out->steps_to_oom = (double)out->room_bytes / r->rate_bytes_per_step;
}

/* ---- the series and the rule ------------------------------------------------------------------------ */

/* Whether framework segment s is the job's (every source counts when the job is not known). */
static int seg_counts(const gpumon_model *m, const struct mseg *s)
{
	return !m->kind_run || gpumon__model_is_job(m, s->pid) || (!m->meta.job_pid && !m->njob);
}

/* Whether the job reports its allocator's figures: it is then judged on those, not on NVML's. */
static int job_reports(const gpumon_model *m)
{
	for (size_t i = 0; i < m->nsegs; i++)
		if (seg_counts(m, &m->segs[i]) && m->segs[i].allocated_known)
			return 1;
	return 0;
}

/* Better in the order the rule reads: a leak before the rest, then a verdict before too little
 * data, then the more confident leak, then the series with more points. */
static int better(const gpumon_verdict *a, const gpumon_verdict *b)
{
	int sa = a->leak.verdict == GPUMON_LEAK_SUSPECTED, sb = b->leak.verdict == GPUMON_LEAK_SUSPECTED;
	if (sa != sb)
		return sa > sb;
	int da = a->leak.verdict != GPUMON_LEAK_INSUFFICIENT_DATA, db = b->leak.verdict != GPUMON_LEAK_INSUFFICIENT_DATA;
	if (da != db)
		return da > db;
	if (sa && a->leak.confidence != b->leak.confidence)
		return a->leak.confidence > b->leak.confidence;
	return a->leak.points > b->leak.points;
}

/* Every series of one kind, sorted best first, appended at out[*n..]. */
static void collect_kind(const gpumon_model *m, int kind, gpumon_verdict *out, size_t cap, size_t *n)
{
	size_t first = *n;
	gpumon_verdict v;
	switch (kind) {
	case GPUMON_SERIES_FRAMEWORK:
		for (size_t i = 0; i < m->nsegs; i++) {
			if (!seg_counts(m, &m->segs[i]) || !m->segs[i].allocated_known)
				continue;
			gpumon__model_verdict_fill(m, kind, -1, NULL, &m->segs[i], &v);
			if (*n < cap)
				out[*n] = v;
			(*n)++;
		}
		break;
	case GPUMON_SERIES_JOB:
	case GPUMON_SERIES_DEVICE:
		for (unsigned d = 0; d < m->ndev; d++) {
			if (!m->dev[d].seen || (kind == GPUMON_SERIES_JOB ? !m->dev[d].job_seen : !m->dev[d].have))
				continue;
			gpumon__model_verdict_fill(m, kind, (int)d, NULL, NULL, &v);
			if (*n < cap)
				out[*n] = v;
			(*n)++;
		}
		break;
	case GPUMON_SERIES_PROCESS:
		for (size_t i = 0; i < m->nprocs; i++) {
			const struct mproc *p = &m->procs[i];
			if (!p->leak || (m->kind_run && !p->job))
				continue;
			gpumon__model_verdict_fill(m, kind, (int)p->dev, p, NULL, &v);
			if (*n < cap)
				out[*n] = v;
			(*n)++;
		}
		break;
	}
	/* insertion sort of what fitted: few series */
	size_t end = *n < cap ? *n : cap;
	for (size_t i = first + 1; i < end; i++)
		for (size_t j = i; j > first && better(&out[j], &out[j - 1]); j--) {
			gpumon_verdict t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
}

/* The series a verdict may be on, best first. A job's run is judged on the job's own figures only: a
 * GPU's used memory mixes in whatever else runs there (and the job's own start-up ramp from an idle
 * card), so it is no verdict on the job. */
static const int rule_run[] = {GPUMON_SERIES_FRAMEWORK, GPUMON_SERIES_JOB, GPUMON_SERIES_PROCESS, 0};
static const int rule_system[] = {GPUMON_SERIES_FRAMEWORK, GPUMON_SERIES_PROCESS, GPUMON_SERIES_DEVICE, 0};

static const int *rule_of(const gpumon_model *m)
{
	return m->kind_run ? rule_run : rule_system;
}

size_t gpumon_model_verdicts(const gpumon_model *m, gpumon_verdict *out, size_t cap)
{
	size_t n = 0;
	if (!m)
		return 0;
	for (const int *k = rule_of(m); *k; k++)
		collect_kind(m, *k, out, out ? cap : 0, &n);
	return n;
}

int gpumon_model_verdict(const gpumon_model *m, gpumon_verdict *out)
{
	if (!m || !out)
		return GPUMON_E_INVAL;
	/* the first kind, in the rule's order, whose best series has a verdict; else the first kind
	   that has a series at all */
	int found = 0;
	for (const int *k = rule_of(m); *k; k++) {
		size_t n = 0;
		collect_kind(m, *k, NULL, 0, &n);
		if (!n)
			continue;
		gpumon_verdict *v = calloc(n, sizeof *v);
		if (!v)
			return GPUMON_E_NOMEM;
		size_t got = 0;
		collect_kind(m, *k, v, n, &got);
		if (!found || v[0].leak.verdict != GPUMON_LEAK_INSUFFICIENT_DATA) {
			*out = v[0];
			found = 1;
		}
		int decided = v[0].leak.verdict != GPUMON_LEAK_INSUFFICIENT_DATA;
		free(v);
		if (decided)
			return GPUMON_OK;
	}
	return found ? GPUMON_OK : GPUMON_E_NOT_FOUND;
}

int gpumon_model_process_verdict(const gpumon_model *m, unsigned dev, unsigned pid, gpumon_verdict *out)
{
	if (!m || !out)
		return GPUMON_E_INVAL;
	const struct mproc *p = gpumon__model_proc(m, dev, pid);
	if (!p || !p->leak)
		return GPUMON_E_NOT_FOUND;
	gpumon__model_verdict_fill(m, GPUMON_SERIES_PROCESS, (int)dev, p, NULL, out);
	return GPUMON_OK;
}

int gpumon_model_gpu_oom(const gpumon_model *m, unsigned dev, double *seconds)
{
	if (!m || !seconds)
		return GPUMON_E_INVAL;
	if (dev >= m->ndev || !m->dev[dev].have)
		return GPUMON_E_NOT_FOUND;
	if (m->kind_run) { /* a job: the run's verdict, when it is on this GPU and alerts */
		gpumon_verdict v;
		if (gpumon_model_verdict(m, &v) || v.dev != (int)dev || !v.leak.alert || v.seconds_to_oom < 0)
			return GPUMON_E_NOT_FOUND;
		*seconds = v.seconds_to_oom;
		return GPUMON_OK;
	}
	/* a machine: every process that alerts eats the same free memory */
	double rate = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		gpumon_leak_result r;
		if (p->dev != dev || !p->present || !p->leak)
			continue;
		gpumon_leak_result_get(p->leak, &r);
		if (r.alert && r.verdict == GPUMON_LEAK_SUSPECTED && r.rate_bytes_per_second > 0)
			rate += r.rate_bytes_per_second;
	}
	if (rate <= 0)
		return GPUMON_E_NOT_FOUND;
	*seconds = (double)m->dev[dev].free / rate;
	return GPUMON_OK;
}

/* ---- alerts ---------------------------------------------------------------------------------------- */

int gpumon__model_push_alert(gpumon_model *m, const gpumon_alert *a)
{
	if (m->nalerts >= MODEL_MAX_ALERTS)
		return GPUMON_E_NOMEM;
	size_t cap = m->alerts_cap;
	size_t need = m->nalerts + 1;
	if (need > cap) {
		size_t ncap = cap ? cap * 2 : 8;
		gpumon_alert *n = realloc(m->alerts, ncap * sizeof *n);
		if (!n)
			return GPUMON_E_NOMEM;
		m->alerts = n;
		m->alerts_cap = ncap;
	}
	m->alerts[m->nalerts++] = *a;
	return GPUMON_OK;
}

void gpumon__model_check_alert(gpumon_model *m, int series, int dev, const struct mproc *p, const struct mseg *s,
			       int *alerted, const gpumon_leak *l, uint64_t t_ns)
{
	gpumon_leak_result r;
	gpumon_leak_result_get(l, &r);
	if (!r.alert)
		return;
	/* a job that reports its allocator is told about on those figures, not on NVML's */
	if (m->kind_run && series == GPUMON_SERIES_JOB && job_reports(m))
		return;
	*alerted = 1;
	gpumon_alert a = {.kind = GPUMON_ALERT_LEAK, .t_ns = t_ns, .dev = dev, .pid = -1};
	gpumon__model_verdict_fill(m, series, dev, p, s, &a.verdict);
	a.dev = a.verdict.dev;
	gpumon__model_push_alert(m, &a);
}

size_t gpumon_model_alerts(const gpumon_model *m, size_t from, gpumon_alert *out, size_t cap)
{
	if (!m || from >= m->nalerts)
		return 0;
	size_t n = m->nalerts - from;
	for (size_t i = 0; out && i < n && i < cap; i++)
		out[i] = m->alerts[from + i];
	return n;
}

/* ---- peaks and memory figures -------------------------------------------------------------------- */

void gpumon__model_owners(const gpumon_model *m, unsigned dev, int job_only, int64_t *owner, int64_t *largest)
{
	const struct mdev *d = dev < m->ndev ? &m->dev[dev] : NULL;
	uint64_t best_rise = 0, best_size = 0;
	*owner = *largest = -1;
	for (size_t i = 0; d && i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->dev != dev || !p->present || !p->used_known)
			continue;
		if (*largest < 0 || p->used > best_size) {
			best_size = p->used;
			*largest = p->pid;
		}
		if (job_only && !p->job)
			continue;
		uint64_t ref = p->ref_gen == d->ref_gen ? p->ref_bytes : 0;
		uint64_t rise = p->used > ref ? p->used - ref : 0;
		if (rise > best_rise) {
			best_rise = rise;
			*owner = p->pid;
		}
	}
	if (*owner < 0 && job_only) /* no job process rose: its largest */
		for (size_t i = 0; d && i < m->nprocs; i++) {
			const struct mproc *p = &m->procs[i];
			if (p->dev == dev && p->present && p->used_known && p->job &&
			    (*owner < 0 || p->used > gpumon__model_proc(m, dev, (unsigned)*owner)->used))
				*owner = p->pid;
		}
}

int gpumon_model_peak(const gpumon_model *m, int *what, int *dev, gpumon_peak *peak, gpumon_peak *win, size_t cap,
		      size_t *nwin)
{
	if (!m || !what || !dev || !peak)
		return GPUMON_E_INVAL;
	const gpumon_peaks *src = NULL;
	gpumon_peak g;
	*what = 0;
	*dev = -1;
	if (m->kind_run) /* the job's: its processes together, on the GPU where they peaked highest */
		for (unsigned d = 0; d < m->ndev; d++)
			if (m->dev[d].seen && m->dev[d].job_seen && gpumon_peaks_global(m->dev[d].job_peaks, &g) == GPUMON_OK &&
			    (!src || g.bytes > peak->bytes)) {
				src = m->dev[d].job_peaks;
				*peak = g;
				*what = GPUMON_PEAK_JOB;
				*dev = (int)d;
			}
	if (!src) /* the fullest GPU's */
		for (unsigned d = 0; d < m->ndev; d++)
			if (m->dev[d].seen && gpumon_peaks_global(m->dev[d].peaks, &g) == GPUMON_OK &&
			    (!src || g.bytes > peak->bytes)) {
				src = m->dev[d].peaks;
				*peak = g;
				*what = GPUMON_PEAK_DEVICE;
				*dev = (int)d;
			}
	if (!src && gpumon_peaks_global(m->fw_peaks, &g) == GPUMON_OK) {
		src = m->fw_peaks;
		*peak = g;
		*what = GPUMON_PEAK_FRAMEWORK;
	}
	if (nwin)
		*nwin = src ? gpumon_peaks_windows(src, win, win ? cap : 0) : 0;
	return src ? GPUMON_OK : GPUMON_E_NOT_FOUND;
}

int gpumon_model_framework_peak(const gpumon_model *m, uint64_t *allocated_bytes, uint64_t *reserved_bytes,
				uint64_t *steps)
{
	if (!m || !allocated_bytes || !reserved_bytes)
		return GPUMON_E_INVAL;
	*allocated_bytes = *reserved_bytes = 0;
	if (steps)
		*steps = 0;
	int any = 0;
	for (size_t i = 0; i < m->nsegs; i++) {
		const struct mseg *s = &m->segs[i];
		any |= s->allocated_known || s->reserved_known || s->max_allocated_known;
		if (s->allocated_peak > *allocated_bytes)
			*allocated_bytes = s->allocated_peak;
		if (s->reserved_peak > *reserved_bytes)
			*reserved_bytes = s->reserved_peak;
		if (steps && s->nsteps > *steps)
			*steps = s->nsteps;
	}
	return any ? GPUMON_OK : GPUMON_E_NOT_FOUND;
}

void gpumon_placed_split(uint64_t nvml_bytes, uint64_t reserved_bytes, uint64_t allocated_bytes, gpumon_placed *out)
{
	if (!out)
		return;
	out->nvml_bytes = nvml_bytes;
	out->reserved_bytes = reserved_bytes;
	out->allocated_bytes = allocated_bytes;
	out->cached_bytes = reserved_bytes > allocated_bytes ? reserved_bytes - allocated_bytes : 0;
	out->outside_known = nvml_bytes >= reserved_bytes;
	out->outside_bytes = out->outside_known ? nvml_bytes - reserved_bytes : 0;
}

void gpumon_model_memory(const gpumon_model *m, gpumon_model_figure *fragmentation, gpumon_model_figure *unaccounted)
{
	gpumon_model_figure none = {.pid = -1, .dev = -1};
	if (fragmentation)
		*fragmentation = none;
	if (unaccounted)
		*unaccounted = none;
	for (size_t i = 0; m && i < m->nsegs; i++) {
		const struct mseg *s = &m->segs[i];
		if (fragmentation && s->frag.known && (!fragmentation->known || s->frag.bytes > fragmentation->bytes))
			*fragmentation = s->frag;
		if (unaccounted && s->unacc.known && (!unaccounted->known || s->unacc.bytes > unaccounted->bytes))
			*unaccounted = s->unacc;
	}
}

/* ---- alerts a front end acts on ------------------------------------------------------------------ */

static int pid_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return (x > y) - (x < y);
}

/* Whether pid had its LIMIT alert; else, with add, records it (0 when out of memory: told later). */
static int limit_told(gpumon_model *m, unsigned pid, int add)
{
	if (m->nlimit_told && bsearch(&pid, m->limit_told, m->nlimit_told, sizeof pid, pid_cmp))
		return 1;
	if (!add)
		return 0;
	if (m->nlimit_told == m->limit_told_cap) {
		size_t cap = m->limit_told_cap ? m->limit_told_cap * 2 : 8;
		unsigned *n = realloc(m->limit_told, cap * sizeof *n);
		if (!n)
			return 0;
		m->limit_told = n;
		m->limit_told_cap = cap;
	}
	size_t i = m->nlimit_told++; /* kept sorted for bsearch; few pids pass a limit */
	for (; i > 0 && m->limit_told[i - 1] > pid; i--)
		m->limit_told[i] = m->limit_told[i - 1];
	m->limit_told[i] = pid;
	return 1;
}

void gpumon__model_check_limit(gpumon_model *m, const gpumon_record *r)
{
	if (!m->cfg.limit_bytes || r->kind != GPUMON_REC_PROCESS || !r->process)
		return;
	unsigned pid = r->process->pid;
	if (!gpumon__model_is_job(m, pid) ||
	    limit_told(m, pid, 0))
		return;
	/* the limit is per process: its figures on every GPU that lists it now, together */
	uint64_t used = 0;
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid && m->procs[i].present && m->procs[i].used_known)
			used += m->procs[i].used;
	if (used <= m->cfg.limit_bytes || !limit_told(m, pid, 1))
		return;
	gpumon_alert a = {.kind = GPUMON_ALERT_LIMIT, .t_ns = r->t_ns, .dev = (int)r->dev, .pid = pid,
			  .used_bytes = used, .limit_bytes = m->cfg.limit_bytes};
	a.verdict.dev = a.verdict.device = -1;
	a.verdict.pid = -1;
	gpumon__model_push_alert(m, &a);
}

void gpumon__model_check_projection(gpumon_model *m, uint64_t t_ns)
{
	double within = m->cfg.oom_within_steps;
	int leak = 0;
	if (!(within > 0) || m->projected)
		return;
	for (size_t i = 0; i < m->nalerts && !leak; i++)
		leak = m->alerts[i].kind == GPUMON_ALERT_LEAK;
	gpumon_alert a = {.kind = GPUMON_ALERT_OOM_PROJECTED, .t_ns = t_ns, .pid = -1};
	/* the run's verdict (its one rule), once it projects out-of-memory within the steps asked */
	if (!leak || gpumon_model_verdict(m, &a.verdict) != GPUMON_OK || a.verdict.leak.verdict != GPUMON_LEAK_SUSPECTED ||
	    !a.verdict.leak.alert || a.verdict.steps_to_oom < 0 || a.verdict.steps_to_oom > within)
		return;
	m->projected = 1;
	a.dev = a.verdict.dev;
	gpumon__model_push_alert(m, &a);
}
