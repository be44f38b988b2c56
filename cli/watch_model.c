/* SPDX-License-Identifier: MIT */
/* watch_model.c — what `gpumon watch` shows of the records: the latest sample of each GPU with a
 * per-second history of its memory, and the processes holding memory with their recent figures (for
 * the change per minute). Whether a process leaks is the run model's verdict, taken into the
 * snapshot, so a paused screen keeps still while both go on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "watch.h"

#define POINTS 128                /* recent figures of a process, at least 1 s apart */
#define NS 1000000000ull
#define CHANGE_WINDOW_NS (60 * NS) /* "change per minute" looks this far back */
#define CHANGE_MIN_NS (5 * NS)    /* a younger process has no change figure yet */

struct mgpu {
	gpumon_device_info info;
	int have_sample, lost;
	gpumon_device_sample s;
	uint64_t val[WATCH_HIST_SECONDS]; /* slot sec % WATCH_HIST_SECONDS: largest used bytes */
	uint64_t sec[WATCH_HIST_SECONDS]; /* the second a slot holds, + 1 (0: empty) */
	uint64_t first_sec;
	int any;
};

struct mproc {
	unsigned gpu;
	gpumon_process p;
	uint64_t pt_t[POINTS], pt_v[POINTS]; /* ring of recent figures, oldest at head when full */
	unsigned npt, head;
};

struct watch_model {
	unsigned ngpu;
	struct mgpu *g;
	struct mproc **procs;
	size_t nproc, cap;
	uint64_t now_ns;
};

int watch_model_create(unsigned ngpu, watch_model **out)
{
	watch_model *m = calloc(1, sizeof *m);
	*out = NULL;
	if (!m)
		return GPUMON_E_NOMEM;
	m->ngpu = ngpu;
	m->g = calloc(ngpu ? ngpu : 1, sizeof *m->g);
	if (!m->g) {
		free(m);
		return GPUMON_E_NOMEM;
	}
	for (unsigned i = 0; i < ngpu; i++)
		m->g[i].info.index = i;
	*out = m;
	return GPUMON_OK;
}

void watch_model_destroy(watch_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nproc; i++)
		free(m->procs[i]);
	free(m->procs);
	free(m->g);
	free(m);
}

void watch_model_set_info(watch_model *m, unsigned dev, const gpumon_device_info *info)
{
	if (dev < m->ngpu) {
		m->g[dev].info = *info;
		/* a recording's name may have been written by anyone: shown escaped */
		cli_safe_text(m->g[dev].info.name, sizeof m->g[dev].info.name, info->name);
		m->g[dev].lost = m->g[dev].lost || info->lost;
	}
}

static void device_record(struct mgpu *g, const gpumon_record *r)
{
	g->have_sample = 1;
	g->s = r->sample;
	if (!(r->sample.present & GPUMON_F_MEMORY))
		return;
	uint64_t v = r->used_max_bytes > r->sample.memory_used_bytes ? r->used_max_bytes : r->sample.memory_used_bytes;
	uint64_t sec = r->t_ns / NS;
	size_t slot = sec % WATCH_HIST_SECONDS;
	if (!g->any || sec < g->first_sec) {
		g->any = 1;
		g->first_sec = sec;
	}
	if (g->sec[slot] != sec + 1) {
		g->sec[slot] = sec + 1;
		g->val[slot] = v;
	} else if (v > g->val[slot]) {
		g->val[slot] = v;
	}
}

static struct mproc *proc_find(const watch_model *m, unsigned dev, unsigned pid, size_t *at)
{
	for (size_t i = 0; i < m->nproc; i++)
		if (m->procs[i]->gpu == dev && m->procs[i]->p.pid == pid) {
			if (at)
				*at = i;
			return m->procs[i];
		}
	return NULL;
}

static void proc_remove(watch_model *m, size_t i)
{
	free(m->procs[i]);
	m->procs[i] = m->procs[--m->nproc];
}

/* Adds a figure to the ring; figures less than a second after the newest update it instead, so the
 * ring always spans at least POINTS - 1 seconds. */
static void proc_point(struct mproc *p, uint64_t t_ns, uint64_t v)
{
	if (p->npt > 1) { /* the oldest figure stays: it is what the change is measured from */
		unsigned last = (p->head + p->npt - 1) % POINTS;
		if (t_ns < p->pt_t[last] + NS) {
			p->pt_v[last] = v;
			return;
		}
	}
	unsigned slot = (p->head + p->npt) % POINTS;
	if (p->npt == POINTS)
		p->head = (p->head + 1) % POINTS;
	else
		p->npt++;
	p->pt_t[slot] = t_ns;
	p->pt_v[slot] = v;
}

static int process_record(watch_model *m, const gpumon_record *r)
{
	struct mproc *p = proc_find(m, r->dev, r->process->pid, NULL);
	if (!p) {
		if (m->nproc == m->cap) {
			size_t cap = m->cap ? 2 * m->cap : 64;
			struct mproc **n = realloc(m->procs, cap * sizeof *n);
			if (!n)
				return GPUMON_E_NOMEM;
			m->procs = n;
			m->cap = cap;
		}
		p = calloc(1, sizeof *p);
		if (!p)
			return GPUMON_E_NOMEM;
		p->gpu = r->dev;
		m->procs[m->nproc++] = p;
	}
	p->p = *r->process; /* a copy: the producer's lasts until its next call */
	if (r->process->flags & GPUMON_PROC_USED_KNOWN)
		proc_point(p, r->t_ns, r->process->used_bytes);
	return GPUMON_OK;
}

int watch_model_record(watch_model *m, const gpumon_record *r)
{
	if (r->dev >= m->ngpu)
		return GPUMON_OK;
	if (r->t_ns > m->now_ns)
		m->now_ns = r->t_ns;
	struct mgpu *g = &m->g[r->dev];
	size_t at;
	switch (r->kind) {
	case GPUMON_REC_DEVICE:
		device_record(g, r);
		break;
	case GPUMON_REC_PROCESS:
		return process_record(m, r);
	case GPUMON_REC_PROCESS_GONE:
		if (proc_find(m, r->dev, r->process->pid, &at))
			proc_remove(m, at);
		break;
	case GPUMON_REC_LOST:
		g->lost = 1;
		g->info.lost = 1;
		for (size_t i = m->nproc; i-- > 0;)
			if (m->procs[i]->gpu == r->dev)
				proc_remove(m, i);
		break;
	default:
		break;
	}
	return GPUMON_OK;
}

int watch_feed(const watch_sink *s, const gpumon_record *r)
{
	int st = gpumon_model_add(s->model, r, 1);
	int vs = watch_model_record(s->view, r);
	return st != GPUMON_OK ? st : vs;
}

/* The change of p's memory over the last minute (since it appeared, for a younger process). */
static int proc_change(const struct mproc *p, uint64_t now_ns, double *out)
{
	if (!p->npt || !(p->p.flags & GPUMON_PROC_USED_KNOWN))
		return 0;
	uint64_t since = now_ns > CHANGE_WINDOW_NS ? now_ns - CHANGE_WINDOW_NS : 0;
	double now_v = (double)p->p.used_bytes;
	for (unsigned k = p->npt; k-- > 0;) {
		unsigned i = (p->head + k) % POINTS;
		if (p->pt_t[i] <= since) {
			*out = now_v - (double)p->pt_v[i];
			return 1;
		}
	}
	uint64_t t0 = p->pt_t[p->head];
	if (now_ns < t0 + CHANGE_MIN_NS)
		return 0;
	*out = now_v - (double)p->pt_v[p->head]; /* all of its life lies within the last minute */
	return 1;
}

static void gpu_snapshot(const struct mgpu *g, uint64_t now_ns, watch_gpu *o)
{
	o->info = g->info;
	o->have_sample = g->have_sample;
	o->lost = g->lost;
	o->s = g->s;
	o->hist_known = 0;
	uint64_t now_sec = now_ns / NS, carry = WATCH_NONE;
	for (size_t i = 0; i < WATCH_HIST_SECONDS; i++) {
		uint64_t age = WATCH_HIST_SECONDS - 1 - i;
		o->hist[i] = WATCH_NONE;
		if (!g->any || now_sec < age || now_sec - age < g->first_sec)
			continue;
		uint64_t sec = now_sec - age;
		size_t slot = sec % WATCH_HIST_SECONDS;
		if (g->sec[slot] == sec + 1)
			carry = g->val[slot];
		o->hist[i] = carry; /* a second without a record kept the previous figure */
		o->hist_known++;
	}
}

/* The run model's verdict on the process: the mark, the rate and the time to out-of-memory. */
static void judged(const gpumon_model *judge, watch_proc *o)
{
	gpumon_verdict v;
	o->leak_seconds_to_oom = -1;
	if (!judge || gpumon_model_process_verdict(judge, o->gpu, o->pid, &v) != GPUMON_OK)
		return;
	o->leak = v.leak.alert;
	o->leak_rate_known = v.leak.verdict == GPUMON_LEAK_SUSPECTED;
	o->leak_bytes_per_min = o->leak_rate_known ? v.leak.rate_bytes_per_second * 60.0 : 0;
	o->leak_seconds_to_oom = v.seconds_to_oom >= 0 ? v.seconds_to_oom : -1;
}

/* The run model's out-of-memory moment, its causes and the site that held the most. */
static void oom_snapshot(const gpumon_model *judge, watch_oom *o)
{
	gpumon_model_oom *mo = malloc(sizeof *mo); /* large: the snapshot's sites are in it */
	memset(o, 0, sizeof *o);
	if (!mo)
		return;
	if (judge && gpumon_model_oom_get(judge, mo) == GPUMON_OK) {
		const gpumon_oom_diagnosis *d = &mo->diagnosis;
		size_t at = 0;
		o->known = 1;
		o->t_s = gpumon_model_seconds(judge, mo->t_ns);
		o->dev = mo->dev;
		at += (size_t)snprintf(o->causes, sizeof o->causes, "%s", gpumon_oom_cause_name(d->cause));
		for (int c = 1; c < GPUMON_OOM_NCAUSES && at < sizeof o->causes; c++)
			if ((d->causes & GPUMON_OOM_BIT(c)) && c != d->cause)
				at += (size_t)snprintf(o->causes + at, sizeof o->causes - at, ", %s", gpumon_oom_cause_name(c));
		const gpumon_alloc_snapshot *sn = &mo->input.snapshot;
		if ((mo->input.known & GPUMON_OOM_F_SNAPSHOT) && sn->nsites) {
			char raw[sizeof sn->sites[0].file + sizeof sn->sites[0].function + 32];
			snprintf(raw, sizeof raw, "%s:%u (%s)", sn->sites[0].file, sn->sites[0].line, sn->sites[0].function);
			cli_safe_text(o->site, sizeof o->site, raw);
			o->site_bytes = sn->sites[0].bytes;
			o->site_known = 1;
		}
	}
	free(mo);
}

int watch_model_snapshot(const watch_model *m, const gpumon_model *judge, watch_snap *snap)
{
	if (snap->ngpu != m->ngpu || !snap->gpus) {
		watch_gpu *g = calloc(m->ngpu ? m->ngpu : 1, sizeof *g);
		if (!g)
			return GPUMON_E_NOMEM;
		free(snap->gpus);
		snap->gpus = g;
		snap->ngpu = m->ngpu;
	}
	if (snap->cap < m->nproc) {
		watch_proc *p = realloc(snap->procs, m->nproc * sizeof *p);
		if (!p)
			return GPUMON_E_NOMEM;
		snap->procs = p;
		snap->cap = m->nproc;
	}
	snap->now_ns = m->now_ns;
	for (unsigned i = 0; i < m->ngpu; i++)
		gpu_snapshot(&m->g[i], m->now_ns, &snap->gpus[i]);
	oom_snapshot(judge, &snap->oom);
	snap->nproc = m->nproc;
	for (size_t i = 0; i < m->nproc; i++) {
		const struct mproc *p = m->procs[i];
		watch_proc *o = &snap->procs[i];
		memset(o, 0, sizeof *o);
		o->gpu = p->gpu;
		o->pid = p->p.pid;
		o->flags = p->p.flags;
		o->used_bytes = p->p.used_bytes;
		o->change_known = proc_change(p, m->now_ns, &o->change_bytes_per_min);
		judged(judge, o);
		/* another user's text: what the screen and the batch text show, escaped */
		if (p->p.flags & GPUMON_PROC_USER_KNOWN)
			cli_safe_text(o->user, sizeof o->user, p->p.user);
		if ((p->p.flags & GPUMON_PROC_CMDLINE_KNOWN) && p->p.cmdline[0])
			cli_safe_text(o->command, sizeof o->command, p->p.cmdline);
		else if (p->p.flags & GPUMON_PROC_NAME_KNOWN)
			cli_safe_text(o->command, sizeof o->command, p->p.name);
		o->uid = p->p.uid;
		o->placed_known = judge && gpumon_model_placed(judge, o->gpu, o->pid, &o->placed) == GPUMON_OK;
		char owner[sizeof o->owner];
		if (gpumon_owner_describe(&p->p.owner, owner, sizeof owner))
			cli_safe_text(o->owner, sizeof o->owner, owner);
		o->rank = gpumon_process_rank(&p->p);
		o->world_size = o->rank >= 0 ? p->p.rank.world_size : -1;
	}
	return GPUMON_OK;
}

/* Whether two GPUs draw the same: everything but the time of their samples. */
static int gpu_same(const watch_gpu *a, const watch_gpu *b)
{
	gpumon_device_sample x = a->s, y = b->s;
	x.t_ns = y.t_ns = 0;
	return a->have_sample == b->have_sample && a->lost == b->lost && a->hist_known == b->hist_known &&
	       a->health == b->health && !strcmp(a->health_text, b->health_text) &&
	       !memcmp(&a->info, &b->info, sizeof a->info) && !memcmp(&x, &y, sizeof x) &&
	       !memcmp(a->hist, b->hist, sizeof a->hist);
}

int watch_snap_same(const watch_snap *a, const watch_snap *b)
{
	if (a->ngpu != b->ngpu || a->nproc != b->nproc || a->now_ns / NS != b->now_ns / NS ||
	    memcmp(&a->oom, &b->oom, sizeof a->oom))
		return 0;
	for (unsigned i = 0; i < a->ngpu; i++)
		if (!gpu_same(&a->gpus[i], &b->gpus[i]))
			return 0;
	/* rows are memset before they are filled, so that padding compares equal */
	return !a->nproc || !memcmp(a->procs, b->procs, a->nproc * sizeof *a->procs);
}

int watch_snap_copy(watch_snap *dst, const watch_snap *src)
{
	if (dst->ngpu != src->ngpu || !dst->gpus) {
		watch_gpu *g = calloc(src->ngpu ? src->ngpu : 1, sizeof *g);
		if (!g)
			return GPUMON_E_NOMEM;
		free(dst->gpus);
		dst->gpus = g;
		dst->ngpu = src->ngpu;
	}
	if (dst->cap < src->nproc) {
		watch_proc *p = realloc(dst->procs, src->nproc * sizeof *p);
		if (!p)
			return GPUMON_E_NOMEM;
		dst->procs = p;
		dst->cap = src->nproc;
	}
	dst->now_ns = src->now_ns;
	dst->oom = src->oom;
	if (src->ngpu)
		memcpy(dst->gpus, src->gpus, src->ngpu * sizeof *src->gpus);
	dst->nproc = src->nproc;
	if (src->nproc)
		memcpy(dst->procs, src->procs, src->nproc * sizeof *src->procs);
	return GPUMON_OK;
}

void watch_snap_free(watch_snap *snap)
{
	free(snap->gpus);
	free(snap->procs);
	memset(snap, 0, sizeof *snap);
}
