/* SPDX-License-Identifier: MIT */
/* recording_owner.c — a process's owner (container, pod, Slurm job, unit) in the owner_* columns
 * of a recording's `processes` table, and its rank in a distributed job in the rank columns: bound
 * by the writer, read back by the reader, in the one column order REC_OWNER_COLUMNS and
 * REC_RANK_COLUMNS name. */
#include <string.h>

#include "recording_owner.h"

/* The owner's texts in column order (after owner_present). */
static void texts(const gpumon_owner *o, const char *t[REC_OWNER_TEXTS], size_t cap[REC_OWNER_TEXTS])
{
	const char *v[REC_OWNER_TEXTS] = {o->runtime, o->container_id, o->pod_uid, o->k8s_namespace, o->pod,
					  o->container, o->slurm_job, o->slurm_step, o->unit};
	const size_t c[REC_OWNER_TEXTS] = {sizeof o->runtime, sizeof o->container_id, sizeof o->pod_uid,
					   sizeof o->k8s_namespace, sizeof o->pod, sizeof o->container,
					   sizeof o->slurm_job, sizeof o->slurm_step, sizeof o->unit};
	memcpy(t, v, sizeof v);
	memcpy(cap, c, sizeof c);
}

void gpumon__rec_bind_owner(sqlite3_stmt *s, int first, const gpumon_owner *o)
{
	const char *t[REC_OWNER_TEXTS];
	size_t cap[REC_OWNER_TEXTS];
	texts(o, t, cap);
	sqlite3_bind_int64(s, first, o->present);
	for (int i = 0; i < REC_OWNER_TEXTS; i++) {
		size_t len = strnlen(t[i], cap[i]);
		if (len)
			sqlite3_bind_text(s, first + 1 + i, t[i], (int)len, SQLITE_STATIC);
		else
			sqlite3_bind_null(s, first + 1 + i);
	}
}

uint64_t gpumon__rec_owner_hash(uint64_t h, const gpumon_owner *o)
{
	const char *t[REC_OWNER_TEXTS];
	size_t cap[REC_OWNER_TEXTS];
	texts(o, t, cap);
	h = (h ^ o->present) * 0x100000001b3ull;
	for (int i = 0; i < REC_OWNER_TEXTS; i++) {
		for (size_t k = 0; k < cap[i] && t[i][k]; k++)
			h = (h ^ (unsigned char)t[i][k]) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	return h;
}

/* Column i's text into dst; 0 when it does not fit (then dst is ""): a cut id or name would name
 * another owner. */
static int take(sqlite3_stmt *s, int i, char *dst, size_t cap)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	size_t n = t ? strlen((const char *)t) : 0;
	dst[0] = 0;
	if (n >= cap)
		return 0;
	memcpy(dst, t ? (const char *)t : "", n + 1);
	return 1;
}

int gpumon__rec_read_owner(sqlite3_stmt *s, int first, gpumon_owner *o)
{
	memset(o, 0, sizeof *o);
	if (sqlite3_column_type(s, first) != SQLITE_INTEGER)
		return 0;
	int64_t present = sqlite3_column_int64(s, first);
	const unsigned known = GPUMON_OWNER_CONTAINER | GPUMON_OWNER_POD | GPUMON_OWNER_POD_NAMES |
			       GPUMON_OWNER_SLURM | GPUMON_OWNER_UNIT | GPUMON_OWNER_UNRESOLVED;
	if (present <= 0)
		return 0;
	char *t[REC_OWNER_TEXTS] = {o->runtime, o->container_id, o->pod_uid, o->k8s_namespace, o->pod,
				    o->container, o->slurm_job, o->slurm_step, o->unit};
	const size_t cap[REC_OWNER_TEXTS] = {sizeof o->runtime, sizeof o->container_id, sizeof o->pod_uid,
					     sizeof o->k8s_namespace, sizeof o->pod, sizeof o->container,
					     sizeof o->slurm_job, sizeof o->slurm_step, sizeof o->unit};
	int fits = 1;
	for (int i = 0; i < REC_OWNER_TEXTS; i++)
		fits &= take(s, first + 1 + i, t[i], cap[i]);
	/* bits this version does not know, or a text too long for its field (a hand edit): no owner
	   rather than a wrong one */
	if (!fits || ((uint64_t)present & ~(uint64_t)known)) {
		memset(o, 0, sizeof *o);
		return 0;
	}
	o->present = (unsigned)present;
	/* a bit whose texts are missing says nothing */
	if (!o->container_id[0])
		o->present &= ~(unsigned)GPUMON_OWNER_CONTAINER;
	if (!o->pod_uid[0])
		o->present &= ~(unsigned)(GPUMON_OWNER_POD | GPUMON_OWNER_POD_NAMES);
	if (!o->k8s_namespace[0] || !o->pod[0])
		o->present &= ~(unsigned)GPUMON_OWNER_POD_NAMES;
	if (!o->slurm_job[0])
		o->present &= ~(unsigned)GPUMON_OWNER_SLURM;
	if (!o->unit[0])
		o->present &= ~(unsigned)GPUMON_OWNER_UNIT;
	return o->present != 0;
}

/* ---- rank columns ------------------------------------------------------------------------------ */

#define RANK_FIGURES 4
#define RANK_TEXTS 3

void gpumon__rec_bind_rank(sqlite3_stmt *s, int first, const gpumon_rank *r)
{
	const int fig[RANK_FIGURES] = {r ? r->rank : -1, r ? r->local_rank : -1, r ? r->world_size : -1,
				       r ? r->node_rank : -1};
	const char *t[RANK_TEXTS] = {r ? r->job_id : "", r ? r->launcher : "", r ? r->master : ""};
	const size_t cap[RANK_TEXTS] = {sizeof r->job_id, sizeof r->launcher, sizeof r->master};
	for (int i = 0; i < RANK_FIGURES; i++)
		if (fig[i] >= 0)
			sqlite3_bind_int64(s, first + i, fig[i]);
		else
			sqlite3_bind_null(s, first + i);
	for (int i = 0; i < RANK_TEXTS; i++) {
		size_t len = strnlen(t[i], cap[i]);
		if (len)
			sqlite3_bind_text(s, first + RANK_FIGURES + i, t[i], (int)len, SQLITE_STATIC);
		else
			sqlite3_bind_null(s, first + RANK_FIGURES + i);
	}
}

uint64_t gpumon__rec_rank_hash(uint64_t h, const gpumon_rank *r)
{
	const int fig[RANK_FIGURES] = {r->rank, r->local_rank, r->world_size, r->node_rank};
	for (int i = 0; i < RANK_FIGURES; i++)
		h = (h ^ (uint64_t)(uint32_t)fig[i]) * 0x100000001b3ull;
	const char *t[RANK_TEXTS] = {r->job_id, r->launcher, r->master};
	const size_t cap[RANK_TEXTS] = {sizeof r->job_id, sizeof r->launcher, sizeof r->master};
	for (int i = 0; i < RANK_TEXTS; i++) {
		for (size_t k = 0; k < cap[i] && t[i][k]; k++)
			h = (h ^ (unsigned char)t[i][k]) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	return h;
}

int gpumon__rec_read_rank(sqlite3_stmt *s, int first, gpumon_rank *r)
{
	memset(r, 0, sizeof *r);
	int *fig[RANK_FIGURES] = {&r->rank, &r->local_rank, &r->world_size, &r->node_rank};
	char *t[RANK_TEXTS] = {r->job_id, r->launcher, r->master};
	const size_t cap[RANK_TEXTS] = {sizeof r->job_id, sizeof r->launcher, sizeof r->master};
	int fits = 1;
	for (int i = 0; i < RANK_FIGURES; i++) {
		*fig[i] = -1;
		if (sqlite3_column_type(s, first + i) == SQLITE_NULL)
			continue;
		int64_t v = sqlite3_column_int64(s, first + i);
		if (sqlite3_column_type(s, first + i) != SQLITE_INTEGER || v < 0 || v > INT32_MAX)
			fits = 0;
		else
			*fig[i] = (int)v;
	}
	for (int i = 0; i < RANK_TEXTS; i++)
		fits &= take(s, first + RANK_FIGURES + i, t[i], cap[i]);
	if (!fits) {
		memset(r, 0, sizeof *r);
		r->rank = r->local_rank = r->world_size = r->node_rank = -1;
		return 0;
	}
	return r->launcher[0] != 0;
}
