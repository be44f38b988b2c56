/* SPDX-License-Identifier: MIT */
/* model_merge.c — recordings of one distributed job made on several hosts, read into one run model:
 * the same job or refused by name, each recording's GPUs after the previous ones', its times moved
 * onto the first recording's clock by the hosts' wall clocks, that alignment checked against the
 * job's own steps where both hosts' inside views gave them, and every record fed in one time order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "model.h"

#define MAX_RECORDINGS 64
#define MAX_STEPS 4096 /* steps kept per host for the clock check */

struct input {
	gpumon_reader *r;
	const gpumon_run_meta *meta;
	gpumon_rank job;
	unsigned first_dev, ndev;
	int64_t offset;      /* added to its times */
	gpumon_record rec;   /* the next record, when have */
	int have, rc;
	int64_t *step_t;     /* step -> the first moment a sample named it (on host 0's clock); INT64_MIN none */
};

static const char *name_of(const gpumon_run_meta *meta)
{
	return meta->host && meta->host[0] ? meta->host : "an unnamed host";
}

/* Why recordings a and b are not of one job, into msg; 0 when they are. */
static int differ(const struct input *a, const struct input *b, size_t ia, size_t ib, char *msg, size_t len)
{
	if (a->job.job_id[0] && b->job.job_id[0]) {
		if (strcmp(a->job.job_id, b->job.job_id))
			return snprintf(msg, len, "recording %zu (%s) is of job %s, recording %zu (%s) of job %s: not one job",
					ia + 1, name_of(a->meta), a->job.job_id, ib + 1, name_of(b->meta), b->job.job_id),
			       1;
		return 0;
	}
	if (a->job.master[0] && b->job.master[0]) {
		if (strcmp(a->job.master, b->job.master))
			return snprintf(msg, len,
					"recording %zu (%s) met at %s, recording %zu (%s) at %s: not one job", ia + 1,
					name_of(a->meta), a->job.master, ib + 1, name_of(b->meta), b->job.master),
			       1;
		return 0;
	}
	return snprintf(msg, len,
			"recordings %zu (%s) and %zu (%s) name no job id or rendezvous they share: they cannot be told to "
			"be one job", ia + 1, name_of(a->meta), ib + 1, name_of(b->meta)),
	       1;
}

/* Reads each recording's metadata, job and clock offset into in[]; GPUMON_E_INVAL, the message on m,
 * when they are not of one job or cannot be put on one clock. */
static int check(gpumon_model *m, struct input *in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		in[i].meta = gpumon_reader_meta(in[i].r);
		if (!gpumon__reader_job(in[i].r, &in[i].job)) {
			snprintf(m->msg, sizeof m->msg,
				 "recording %zu (%s) holds no worker of a distributed job (no process's environment named a "
				 "rank): it cannot be merged",
				 i + 1, name_of(in[i].meta));
			return GPUMON_E_INVAL;
		}
		if (!in[i].meta->start_mono_ns || !in[i].meta->start_wall_ns) {
			snprintf(m->msg, sizeof m->msg,
				 "recording %zu (%s) does not say when it started on the wall clock: its times cannot be "
				 "put beside the others'", i + 1, name_of(in[i].meta));
			return GPUMON_E_INVAL;
		}
		/* onto recording 0's clock: the two hosts' wall clocks less their monotonic ones at the starts */
		in[i].offset = (int64_t)(in[i].meta->start_wall_ns - in[i].meta->start_mono_ns) -
			       (int64_t)(in[0].meta->start_wall_ns - in[0].meta->start_mono_ns);
		for (size_t k = 0; k < i; k++) {
			if (differ(&in[k], &in[i], k, i, m->msg, sizeof m->msg))
				return GPUMON_E_INVAL;
			if (in[k].meta->host && in[i].meta->host && !strcmp(in[k].meta->host, in[i].meta->host)) {
				snprintf(m->msg, sizeof m->msg,
					 "recordings %zu and %zu are both of host %s: give one recording a host", k + 1, i + 1,
					 in[i].meta->host);
				return GPUMON_E_INVAL;
			}
		}
	}
	return GPUMON_OK;
}

/* Onto host 0's clock: times move by the offset, GPUs by the host's first position. */
static void move(gpumon_record *r, const struct input *in)
{
#define MOVE(t) ((t) ? (uint64_t)((int64_t)(t) + in->offset) : 0)
	r->t_ns = MOVE(r->t_ns);
	switch (r->kind) {
	case GPUMON_REC_DEVICE:
		r->sample.t_ns = MOVE(r->sample.t_ns);
		r->used_max_t_ns = MOVE(r->used_max_t_ns);
		r->dev += in->first_dev;
		break;
	case GPUMON_REC_PROCESS:
	case GPUMON_REC_PROCESS_GONE:
	case GPUMON_REC_LOST:
		r->dev += in->first_dev;
		break;
	case GPUMON_REC_FRAMEWORK:
		r->framework.t_ns = MOVE(r->framework.t_ns);
		break;
	case GPUMON_REC_EVENT:
		if (r->dev != GPUMON_DEV_NONE)
			r->dev += in->first_dev;
		break;
	}
#undef MOVE
}

static void pull(struct input *in)
{
	in->have = 0;
	if (in->rc <= 0)
		return;
	in->rc = gpumon_reader_next(in->r, &in->rec);
	if (in->rc > 0) {
		move(&in->rec, in);
		in->have = 1;
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

/* The median of host i's moment of a step minus host 0's, over the steps both named. */
static void step_check(const struct input *in, size_t i, gpumon_model_host *h)
{
	int64_t d[MAX_STEPS];
	unsigned k = 0;
	for (unsigned s = 0; in[0].step_t && in[i].step_t && s < MAX_STEPS; s++)
		if (in[0].step_t[s] != INT64_MIN && in[i].step_t[s] != INT64_MIN)
			d[k++] = in[i].step_t[s] - in[0].step_t[s];
	h->steps = k;
	if (!k)
		return;
	qsort(d, k, sizeof d[0], cmp_i64);
	h->step_skew_ns = k % 2 ? d[k / 2] : d[k / 2 - 1] / 2 + d[k / 2] / 2;
}

int gpumon_model_load_many(gpumon_model *m, gpumon_reader *const *readers, size_t n)
{
	if (!m || !readers || n == 0 || n > MAX_RECORDINGS || m->records || m->nhosts)
		return GPUMON_E_INVAL;
	for (size_t i = 0; i < n; i++)
		if (!readers[i])
			return GPUMON_E_INVAL;
	if (n == 1)
		return gpumon_model_load(m, readers[0]);
	struct input *in = calloc(n, sizeof *in);
	gpumon_model_host *hosts = calloc(n, sizeof *hosts);
	if (!in || !hosts) {
		free(in);
		free(hosts);
		return GPUMON_E_NOMEM;
	}
	for (size_t i = 0; i < n; i++)
		in[i].r = readers[i];
	int st = check(m, in, n);
	if (!st && !m->meta.kind && !m->meta.start_mono_ns)
		st = gpumon__model_take_meta(m, in[0].meta);
	if (!st) {
		/* CUDA_VISIBLE_DEVICES is each host's: a framework's device maps to the GPU its process is on */
		free(m->cvd);
		m->cvd = NULL;
		/* the run ends with the last host's end, and failed when any host's job failed */
		uint64_t end = 0;
		int ends = 1, status = 0;
		for (size_t i = 0; i < n; i++) {
			const gpumon_run_meta *x = in[i].meta;
			if (!x->end_mono_ns)
				ends = 0;
			else if ((uint64_t)((int64_t)x->end_mono_ns + in[i].offset) > end)
				end = (uint64_t)((int64_t)x->end_mono_ns + in[i].offset);
			if (x->exit_status < 0 && status == 0)
				status = -1;
			else if (x->exit_status > 0 && status <= 0)
				status = x->exit_status;
		}
		m->meta.end_mono_ns = ends ? end : 0;
		m->meta.exit_status = status;
	}
	unsigned next = 0;
	for (size_t i = 0; !st && i < n; i++) {
		in[i].first_dev = next;
		in[i].ndev = gpumon_reader_device_count(in[i].r);
		if (next + in[i].ndev > MODEL_MAX_DEVICES) {
			snprintf(m->msg, sizeof m->msg, "the recordings hold more than %d GPUs together", MODEL_MAX_DEVICES);
			st = GPUMON_E_INVAL;
			break;
		}
		for (unsigned d = 0; d < in[i].ndev; d++) {
			gpumon_device_info info;
			if (gpumon_reader_device(in[i].r, d, &info) != GPUMON_OK)
				continue;
			info.index = next + d;
			if ((st = gpumon_model_device(m, &info)) != GPUMON_OK)
				break;
			m->dev[next + d].host = (unsigned)i;
		}
		gpumon_model_host *h = &hosts[i];
		snprintf(h->name, sizeof h->name, "%s", in[i].meta->host ? in[i].meta->host : "");
		h->first_dev = next;
		h->ndev = in[i].ndev;
		h->offset_ns = in[i].offset;
		next += in[i].ndev;
		if (!st && (in[i].step_t = malloc(MAX_STEPS * sizeof *in[i].step_t)) == NULL)
			st = GPUMON_E_NOMEM;
		for (unsigned s = 0; !st && s < MAX_STEPS; s++)
			in[i].step_t[s] = INT64_MIN;
	}
	if (!st) {
		m->hosts = hosts;
		m->nhosts = (unsigned)n;
		hosts = NULL;
		if (!m->meta.start_mono_ns)
			m->meta.start_mono_ns = in[0].meta->start_mono_ns;
		for (size_t i = 0; i < n; i++) {
			in[i].rc = 1;
			pull(&in[i]);
		}
	}
	/* the records of all in one time order: the earliest next record of any recording first */
	while (!st) {
		size_t pick = n;
		for (size_t i = 0; i < n; i++)
			if (in[i].have && (pick == n || in[i].rec.t_ns < in[pick].rec.t_ns))
				pick = i;
		if (pick == n)
			break;
		const gpumon_record *r = &in[pick].rec;
		if (r->kind == GPUMON_REC_FRAMEWORK && r->framework.step >= 0 && r->framework.step < MAX_STEPS &&
		    in[pick].step_t[r->framework.step] == INT64_MIN)
			in[pick].step_t[r->framework.step] = (int64_t)r->framework.t_ns;
		st = gpumon_model_add(m, r, 1);
		pull(&in[pick]);
	}
	for (size_t i = 0; i < n && m->hosts; i++) {
		if (i > 0)
			step_check(in, i, &m->hosts[i]);
		if (gpumon_reader_damage(in[i].r)[0]) {
			char what[600];
			snprintf(what, sizeof what, "recording %zu (%s): %s", i + 1, name_of(in[i].meta),
				 gpumon_reader_damage(in[i].r));
			gpumon_model_damage(m, what);
		}
		if (!st && in[i].rc < 0) {
			snprintf(m->msg, sizeof m->msg, "%s", gpumon_reader_errmsg(in[i].r));
			st = in[i].rc;
		}
	}
	for (size_t i = 0; i < n; i++)
		free(in[i].step_t);
	free(in);
	free(hosts);
	return st;
}

size_t gpumon_model_hosts(const gpumon_model *m, gpumon_model_host *out, size_t cap)
{
	if (!m)
		return 0;
	if (!m->nhosts) {
		if (out && cap) {
			memset(out, 0, sizeof *out);
			snprintf(out->name, sizeof out->name, "%s", m->meta.host ? m->meta.host : "");
			out->ndev = m->ndev;
		}
		return 1;
	}
	for (unsigned i = 0; out && i < m->nhosts && i < cap; i++)
		out[i] = m->hosts[i];
	return m->nhosts;
}
