/* SPDX-License-Identifier: MIT */
/* model_oom.c — the out-of-memory moment in the run model: at the first sign (an "oom" event: a
 * message the job printed, or the card full when a job failed) it keeps what was on the GPU then —
 * the last seconds, who held what, the framework's figures — and at the end it asks
 * gpumon_oom_diagnose() for the cause, with the run's leak verdict. */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_LIMIT_SHARE 0.99

/* The job's GPU: where its processes hold the most now, else where they peaked; else the fullest
 * GPU. -1 when there is none. */
int gpumon__model_job_dev(const gpumon_model *m)
{
	int best = -1;
	uint64_t most = 0;
	for (unsigned d = 0; d < m->ndev; d++)
		if (m->dev[d].seen && m->dev[d].job_seen && (best < 0 || m->dev[d].job_bytes > most)) {
			best = (int)d;
			most = m->dev[d].job_bytes;
		}
	if (best >= 0 && most == 0) { /* the job has let go already: where it peaked */
		gpumon_peak g, bg = {0};
		for (unsigned d = 0; d < m->ndev; d++)
			if (m->dev[d].job_seen && gpumon_peaks_global(m->dev[d].job_peaks, &g) == GPUMON_OK && g.bytes > bg.bytes) {
				bg = g;
				best = (int)d;
			}
	}
	if (best >= 0)
		return best;
	double share = -1;
	for (unsigned d = 0; d < m->ndev; d++) {
		uint64_t total = gpumon__model_total(m, (int)d);
		if (m->dev[d].have && total && (double)m->dev[d].used / (double)total > share) {
			share = (double)m->dev[d].used / (double)total;
			best = (int)d;
		}
	}
	return best;
}

/* Ring entry k back from the newest (0 = newest). */
static const struct mring *back(const struct mdev *d, unsigned k)
{
	return &d->ring[(d->ring_head + MODEL_RING - 1 - k) % MODEL_RING];
}

/* The device's last seconds before t: the peak within the window, the usual level before it and
 * how long the climb took; about one point a second for the summary. */
static void last_seconds(gpumon_model *m, const struct mdev *d, uint64_t t)
{
	gpumon_oom_input *in = &m->oom.input;
	uint64_t from = t > MODEL_OOM_WINDOW_NS ? t - MODEL_OOM_WINDOW_NS : 0;
	uint64_t from3 = t > 3 * MODEL_OOM_WINDOW_NS ? t - 3 * MODEL_OOM_WINDOW_NS : 0;
	int have_peak = 0;
	uint64_t peak = 0, peak_t = 0;
	unsigned peak_k = 0, oldest = 0;
	for (unsigned k = 0; k < d->ring_n; k++) {
		const struct mring *e = back(d, k);
		if (e->t_ns < from3)
			break;
		oldest = k;
		if (e->t_ns <= t + 100000000ull && e->t_ns >= from && (!have_peak || e->used_max > peak)) {
			peak = e->used_max;
			peak_t = e->t_ns;
			peak_k = k;
			have_peak = 1;
		}
	}
	if (!have_peak)
		return;
	in->known |= GPUMON_OOM_F_USED;
	in->used_bytes = peak;
	/* the usual level: the lowest figure between the start of the window and the peak; the climb
	   starts where memory was last near it */
	uint64_t floor = peak;
	for (unsigned k = peak_k; k <= oldest; k++)
		if (back(d, k)->used_min < floor)
			floor = back(d, k)->used_min;
	uint64_t near = floor + (peak - floor) / 10;
	unsigned rise = peak_k;
	while (rise < oldest && back(d, rise)->used_min > near)
		rise++;
	/* a usual level needs the job to have run at it for a while: a job that climbs from its start
	   until it dies did not fit, it had no transient peak */
	if (rise < oldest && back(d, rise)->t_ns >= back(d, oldest)->t_ns + 1000000000ull) {
		in->known |= GPUMON_OOM_F_FLOOR;
		in->floor_bytes = floor;
		in->rise_seconds = (double)(peak_t - back(d, rise)->t_ns) / 1e9;
	}
	/* about one point a second, back from the moment, then oldest first */
	size_t n = 0;
	uint64_t next = t + 100000000ull;
	for (unsigned k = 0; k < d->ring_n && n < 16; k++) {
		const struct mring *e = back(d, k);
		if (e->t_ns > next)
			continue;
		if (e->t_ns < from)
			break;
		m->oom.last[n].t_ns = e->t_ns;
		m->oom.last[n].used_bytes = e->used_max;
		n++;
		next = e->t_ns > 1000000000ull ? e->t_ns - 1000000000ull : 0;
	}
	for (size_t a = 0, b = n ? n - 1 : 0; a < b; a++, b--) {
		uint64_t tt = m->oom.last[a].t_ns, uu = m->oom.last[a].used_bytes;
		m->oom.last[a] = m->oom.last[b];
		m->oom.last[b].t_ns = tt;
		m->oom.last[b].used_bytes = uu;
	}
	m->oom.nlast = n;
}

static int cmp_holder(const void *a, const void *b)
{
	const gpumon_holder *x = a, *y = b;
	return x->used_bytes < y->used_bytes ? 1 : x->used_bytes > y->used_bytes ? -1 : (x->pid > y->pid) - (x->pid < y->pid);
}

/* Who held what on dev at the moment: every process listed then. */
static void holders(gpumon_model *m, unsigned dev)
{
	gpumon_oom_input *in = &m->oom.input;
	gpumon_holder all[64];
	size_t n = 0;
	int job_listed = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->dev != dev || !p->present)
			continue;
		uint64_t used = p->used_known ? p->used : 0;
		if (p->job) {
			in->job_bytes += used;
			job_listed = 1;
		} else {
			in->others_bytes += used;
			if (p->used_known && (in->top_other_pid < 0 || used > in->top_other_bytes)) {
				in->top_other_pid = p->pid;
				in->top_other_bytes = used;
			}
		}
		if (n < sizeof all / sizeof all[0]) {
			gpumon_holder *h = &all[n++];
			memset(h, 0, sizeof *h);
			h->dev = dev;
			h->pid = p->pid;
			h->used_known = p->used_known;
			h->used_bytes = used;
			h->job = p->job;
			memcpy(h->user, p->user, sizeof h->user);
			memcpy(h->command, p->command, sizeof h->command);
		}
	}
	qsort(all, n, sizeof all[0], cmp_holder);
	m->oom.nholders = n < 16 ? n : 16;
	memcpy(m->oom.holders, all, m->oom.nholders * sizeof all[0]);
	in->known |= GPUMON_OOM_F_OTHERS | (job_listed ? GPUMON_OOM_F_JOB : 0);
}

/* The framework's last figures on dev: the source holding the most. */
static void framework(gpumon_model *m, unsigned dev)
{
	gpumon_oom_input *in = &m->oom.input;
	const struct mseg *best = NULL;
	for (size_t i = 0; i < m->nsegs; i++) {
		const struct mseg *s = &m->segs[i];
		if (!s->allocated_known || !s->reserved_known)
			continue;
		int d = gpumon__model_map_device(m, s->pid, s->device);
		if (d >= 0 && (unsigned)d != dev)
			continue;
		if (!best || s->reserved > best->reserved)
			best = s;
	}
	if (!best)
		return;
	in->known |= GPUMON_OOM_F_FRAMEWORK;
	in->allocated_bytes = best->allocated;
	in->reserved_bytes = best->reserved;
}

/* A job process at its --limit: the job ran out against that ceiling, not against the card; what
 * other processes hold does not matter to it. */
static void at_the_limit(gpumon_model *m, unsigned dev)
{
	gpumon_oom_input *in = &m->oom.input;
	uint64_t limit = m->cfg.limit_bytes, top = 0;
	if (!limit)
		return;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->dev == dev && p->present && p->used_known && p->job && p->used > top)
			top = p->used;
	}
	if ((double)top < 0.99 * (double)limit)
		return;
	in->known = (in->known | GPUMON_OOM_F_TOTAL | GPUMON_OOM_F_USED) & ~(unsigned)(GPUMON_OOM_F_OTHERS | GPUMON_OOM_F_FLOOR);
	in->total_bytes = limit;
	in->used_bytes = top;
}

void gpumon__model_oom_signal(gpumon_model *m, uint64_t t_ns, const char *text)
{
	m->oom.signs++;
	/* in a traceback the exception's own line comes last: the message quoted is the last one */
	if (text && text[0])
		snprintf(m->oom.message, sizeof m->oom.message, "%s", text);
	if (m->oom_have)
		return;
	int dev = gpumon__model_job_dev(m);
	m->oom_have = 1;
	m->oom.t_ns = t_ns;
	m->oom.dev = dev;
	gpumon_oom_input *in = &m->oom.input;
	memset(in, 0, sizeof *in);
	in->top_other_pid = -1;
	in->rise_seconds = -1;
	if (dev < 0)
		return;
	const struct mdev *d = &m->dev[dev];
	uint64_t total = gpumon__model_total(m, dev);
	if (total) {
		in->known |= GPUMON_OOM_F_TOTAL;
		in->total_bytes = total;
	}
	last_seconds(m, d, t_ns);
	holders(m, (unsigned)dev);
	if (d->job_seen && t_ns > d->job_first_t + MODEL_EARLY_NS) {
		in->known |= GPUMON_OOM_F_EARLY;
		in->early_bytes = d->job_early;
	}
	framework(m, (unsigned)dev);
	at_the_limit(m, (unsigned)dev);
}

void gpumon__model_oom_finish(gpumon_model *m)
{
	/* a job that failed with its GPU full in its last seconds, with no message seen: out of memory */
	int dev = gpumon__model_job_dev(m);
	if (!m->oom_have && m->exit_status > 0 && (m->njob || m->meta.job_pid) && dev >= 0) {
		const struct mdev *d = &m->dev[dev];
		uint64_t total = gpumon__model_total(m, dev);
		uint64_t from = m->end_t > MODEL_OOM_WINDOW_NS ? m->end_t - MODEL_OOM_WINDOW_NS : 0;
		for (unsigned k = 0; total && k < d->ring_n; k++) {
			const struct mring *e = back(d, k);
			if (e->t_ns < from)
				break;
			if ((double)e->used_max >= AT_LIMIT_SHARE * (double)total) {
				gpumon__model_oom_signal(m, e->t_ns, NULL);
				break;
			}
		}
	}
}

int gpumon_model_oom_get(const gpumon_model *m, gpumon_model_oom *out)
{
	if (!m || !out)
		return GPUMON_E_INVAL;
	if (!m->oom_have)
		return GPUMON_E_NOT_FOUND;
	*out = m->oom;
	/* diagnosed with the run's leak verdict as it stands (at the end, the whole run's) */
	gpumon_verdict v;
	if (gpumon_model_verdict(m, &v) == GPUMON_OK) {
		out->input.known |= GPUMON_OOM_F_LEAK;
		out->input.leak = v.leak;
	}
	gpumon_oom_diagnose(&out->input, &out->diagnosis);
	return GPUMON_OK;
}
