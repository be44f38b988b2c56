/* SPDX-License-Identifier: MIT */
/* model_rank.c — a distributed job in the run model: each worker by its rank (read from its
 * launcher's variables with its listing), its NVML figure's peak, mean and verdict, how far the
 * ranks drift apart, and which rank ran out of memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

void gpumon__model_take_rank(struct mproc *p, const gpumon_process *src)
{
	/* a listing that could not read the environment says nothing, and one between fork and exec
	   has the launcher's: a worker's rank, once known, stays */
	if (gpumon_process_rank(src) >= 0)
		p->rank = src->rank;
}

void gpumon__model_hold(struct mproc *p, uint64_t t)
{
	if (p->present && p->used_known && p->integral_t && t > p->integral_t) {
		p->integral += (long double)p->used * (long double)(t - p->integral_t);
		p->span_ns += t - p->integral_t;
	}
	p->integral_t = t;
	/* the floor: the lowest figure held after its first seconds (warm-up, the context and the
	   first batch's allocations, are no floor); a figure held across that moment counts */
	if (p->present && p->used_known && p->first_t && t > p->first_t + MODEL_EARLY_NS &&
	    (!p->floor_known || p->used < p->floor)) {
		p->floor = p->used;
		p->floor_known = 1;
	}
}

void gpumon__model_ranks_at_oom(gpumon_model *m)
{
	for (size_t i = 0; i < m->nprocs; i++) {
		struct mproc *p = &m->procs[i];
		p->at_oom_known = p->rank.launcher[0] && p->present && p->used_known;
		p->at_oom = p->at_oom_known ? p->used : 0;
	}
}

int gpumon__model_rank_of(const gpumon_model *m, unsigned dev, unsigned pid)
{
	const struct mproc *p = gpumon__model_proc(m, dev, pid);
	return p && p->rank.launcher[0] ? p->rank.rank : -1;
}

/* torchrun prefixes each line of a worker's output with "[rankN]:" (torch >= 2.2; "[default0]:"
 * with --tee is the local rank and not taken). */
int gpumon__model_rank_in_text(const char *text)
{
	int found = -1;
	for (const char *s = text; s && (s = strstr(s, "[rank")) != NULL; s += 5) {
		const char *d = s + 5;
		long v = 0;
		int digits = 0;
		while (*d >= '0' && *d <= '9' && digits < 9) {
			v = v * 10 + (*d++ - '0');
			digits++;
		}
		if (digits && d[0] == ']' && d[1] == ':')
			found = (int)v; /* the last one: the exception's line comes last */
	}
	return found;
}

unsigned gpumon__model_pid_of_rank(const gpumon_model *m, int dev, int rank)
{
	unsigned pid = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (!p->rank.launcher[0] || p->rank.rank != rank || (dev >= 0 && p->dev != (unsigned)dev))
			continue;
		if (pid && pid != p->pid)
			return 0;
		pid = p->pid;
	}
	return pid;
}

int gpumon__model_rank_dev(const gpumon_model *m, int rank)
{
	int dev = -1;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (!p->rank.launcher[0] || p->rank.rank != rank)
			continue;
		if (dev >= 0 && (unsigned)dev != p->dev)
			return -1;
		dev = (int)p->dev;
	}
	return dev;
}

int gpumon__model_job_rank(const gpumon_model *m, int dev)
{
	int only = -1, several = 0, fastest = -1;
	double rate = 0;
	for (size_t i = 0; dev >= 0 && i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->dev != (unsigned)dev || !p->job || !p->rank.launcher[0] || p->rank.rank < 0)
			continue;
		if (only >= 0 && only != p->rank.rank)
			several = 1;
		only = p->rank.rank;
		gpumon_leak_result r;
		gpumon_leak_result_get(p->leak, &r);
		if (r.verdict == GPUMON_LEAK_SUSPECTED && r.rate_bytes_per_second > rate) {
			rate = r.rate_bytes_per_second;
			fastest = p->rank.rank;
		}
	}
	return several ? fastest : only;
}

/* In a run, the job's workers; in a system-wide view, every worker. */
static int counts(const gpumon_model *m, const struct mproc *p)
{
	return p->rank.launcher[0] && p->rank.rank >= 0 && (!m->kind_run || p->job);
}

static void row_of(const gpumon_model *m, const struct mproc *p, const gpumon_model_oom *oom, int have_oom,
		   gpumon_rank_row *r)
{
	memset(r, 0, sizeof *r);
	r->rank = p->rank;
	r->dev = p->dev;
	r->pid = p->pid;
	r->host = p->dev < m->ndev ? m->dev[p->dev].host : 0;
	r->present = p->present;
	r->first_t_ns = p->first_t;
	r->last_t_ns = p->present ? p->last_t : p->gone_t;
	r->used_known = p->peak > 0 || p->used_known;
	r->peak_bytes = p->peak;
	r->last_bytes = p->used;
	/* its figure held until the end of the input counts in its mean and floor, as a record then
	   would count it */
	struct mproc q = *p;
	gpumon__model_hold(&q, m->end_t ? m->end_t : m->last_t);
	r->mean_bytes = q.span_ns ? (uint64_t)(q.integral / (long double)q.span_ns) : p->used;
	r->floor_known = q.floor_known;
	r->floor_bytes = q.floor;
	r->at_oom_known = p->at_oom_known;
	r->at_oom_bytes = p->at_oom;
	if (gpumon_model_process_verdict(m, p->dev, p->pid, &r->verdict) != GPUMON_OK) {
		r->verdict.series = GPUMON_SERIES_NONE;
		r->verdict.rank = p->rank.rank;
	}
	r->oom = have_oom && oom->pid == p->pid && oom->dev == (int)p->dev;
}

static int cmp_row(const void *a, const void *b)
{
	const gpumon_rank_row *x = a, *y = b;
	if (x->rank.rank != y->rank.rank)
		return x->rank.rank < y->rank.rank ? -1 : 1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

size_t gpumon_model_ranks(const gpumon_model *m, gpumon_rank_row *out, size_t cap)
{
	if (!m)
		return 0;
	size_t n = 0;
	gpumon_model_oom *oom = NULL;
	int have_oom = 0;
	for (size_t i = 0; i < m->nprocs; i++)
		n += counts(m, &m->procs[i]);
	if (!n || !out || !cap)
		return n;
	if (m->oom_have && (oom = malloc(sizeof *oom)) != NULL)
		have_oom = gpumon_model_oom_get(m, oom) == GPUMON_OK;
	size_t k = 0;
	for (size_t i = 0; i < m->nprocs && k < cap; i++)
		if (counts(m, &m->procs[i]))
			row_of(m, &m->procs[i], oom, have_oom, &out[k++]);
	free(oom);
	qsort(out, k, sizeof *out, cmp_row);
	return n;
}

static int same_job(const gpumon_rank *a, const gpumon_rank *b)
{
	return !strcmp(a->job_id, b->job_id) && !strcmp(a->master, b->master) && !strcmp(a->launcher, b->launcher);
}

int gpumon_model_rank_skew(const gpumon_model *m, gpumon_rank_skew *out)
{
	if (!m || !out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	out->peak_min_rank = out->peak_max_rank = out->mean_min_rank = out->mean_max_rank = -1;
	size_t n = gpumon_model_ranks(m, NULL, 0);
	if (n < 2)
		return GPUMON_E_NOT_FOUND;
	gpumon_rank_row *rows = malloc(n * sizeof *rows);
	if (!rows)
		return GPUMON_E_NOMEM;
	n = gpumon_model_ranks(m, rows, n);
	/* the job most rows belong to */
	size_t best = 0, best_n = 0;
	for (size_t i = 0; i < n; i++) {
		size_t c = 0;
		for (size_t k = 0; k < n; k++)
			c += same_job(&rows[i].rank, &rows[k].rank);
		if (c > best_n)
			best = i, best_n = c;
	}
	const gpumon_rank job = rows[best].rank;
	snprintf(out->job_id, sizeof out->job_id, "%s", job.job_id);
	/* rows are ordered by rank: each rank's row with the highest peak */
	for (size_t i = 0; i < n;) {
		size_t pick = n, k = i;
		for (; k < n && rows[k].rank.rank == rows[i].rank.rank; k++)
			if (same_job(&rows[k].rank, &job) && rows[k].used_known &&
			    (pick == n || rows[k].peak_bytes > rows[pick].peak_bytes))
				pick = k;
		if (pick < n) {
			const gpumon_rank_row *r = &rows[pick];
			if (!out->ranks || r->peak_bytes < out->peak_min_bytes)
				out->peak_min_bytes = r->peak_bytes, out->peak_min_rank = r->rank.rank;
			if (!out->ranks || r->peak_bytes > out->peak_max_bytes)
				out->peak_max_bytes = r->peak_bytes, out->peak_max_rank = r->rank.rank;
			if (!out->ranks || r->mean_bytes < out->mean_min_bytes)
				out->mean_min_bytes = r->mean_bytes, out->mean_min_rank = r->rank.rank;
			if (!out->ranks || r->mean_bytes > out->mean_max_bytes)
				out->mean_max_bytes = r->mean_bytes, out->mean_max_rank = r->rank.rank;
			out->ranks++;
		}
		i = k;
	}
	free(rows);
	return out->ranks >= 2 ? GPUMON_OK : GPUMON_E_NOT_FOUND;
}
