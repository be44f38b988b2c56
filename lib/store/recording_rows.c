/* SPDX-License-Identifier: MIT */
/* recording_rows.c — a recording's rows into what the reader gives back: the GPUs, the side tables
 * (process appearances, framework sources), and each sample or event row into a gpumon_record.
 * A byte figure outside 0..GPUMON_MAX_BYTES (a hand edit) refuses its row; a string SQLite could
 * not hand over for want of memory is noted as that, never as a missing value. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "recording_read.h"
#include "recording_owner.h"
#include "schema.h"

/* Text column i into dst (truncated; "" when NULL). */
static void copy_text(gpumon_reader *r, sqlite3_stmt *s, int i, char *dst, size_t len)
{
	const unsigned char *t = sqlite3_column_text(s, i);
	if (!t && sqlite3_column_type(s, i) != SQLITE_NULL)
		r->nomem = 1; /* SQLite could not convert it: out of memory */
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

/* A copy of text column i, NULL when it is NULL (or memory ran out: noted in r). */
static char *dup_col(gpumon_reader *r, sqlite3_stmt *s, int i)
{
	if (sqlite3_column_type(s, i) == SQLITE_NULL)
		return NULL;
	const char *t = (const char *)sqlite3_column_text(s, i);
	char *c = t ? strdup(t) : NULL;
	if (!c)
		r->nomem = 1;
	return c;
}

static int col_known(sqlite3_stmt *s, int i)
{
	return sqlite3_column_type(s, i) == SQLITE_INTEGER;
}

/* A column as an unsigned figure: 1 when it holds a non-negative integer. */
static int col_u64(sqlite3_stmt *s, int i, uint64_t *v)
{
	if (!col_known(s, i) || sqlite3_column_int64(s, i) < 0)
		return 0;
	*v = (uint64_t)sqlite3_column_int64(s, i);
	return 1;
}

/* A byte column: 1 with *v when it holds a figure gpumon takes (an integer from 0 to
 * GPUMON_MAX_BYTES, just under 1 PiB), 0 when it is NULL (not known), -1 when it holds anything else: a hand edit,
 * which the caller refuses with the row. */
static int col_bytes(sqlite3_stmt *s, int i, uint64_t *v)
{
	if (sqlite3_column_type(s, i) == SQLITE_NULL)
		return 0;
	if (!col_known(s, i) || sqlite3_column_int64(s, i) < 0 || (uint64_t)sqlite3_column_int64(s, i) > GPUMON_MAX_BYTES)
		return -1;
	*v = (uint64_t)sqlite3_column_int64(s, i);
	return 1;
}

/* Notes the row of c that holds column i (named name) out of range; returns -1 for the fill. */
static int refuse_row(struct cursor *c, sqlite3_stmt *s, int i, const char *name)
{
	if (!c->out_of_range++) {
		const unsigned char *t = sqlite3_column_text(s, i); /* the value as SQLite prints it */
		snprintf(c->first_bad, sizeof c->first_bad, "row %lld, %s = %.40s", (long long)sqlite3_column_int64(s, 0),
			 name, t ? (const char *)t : "?");
	}
	return -1;
}

static int col_u32(sqlite3_stmt *s, int i, unsigned *v)
{
	uint64_t w;
	if (!col_u64(s, i, &w) || w > UINT32_MAX)
		return 0;
	*v = (unsigned)w;
	return 1;
}

/* Reads the small side tables (process appearances, framework sources). */
void gpumon__rec_read_side_tables(gpumon_reader *r)
{
	sqlite3_stmt *s = NULL;
	size_t cap = 0;
	/* files written before the owner columns read with no owner */
	int owners = gpumon__rec_has_column(r, "processes", "owner_present");
	/* and before the rank columns with no rank (those come only after the owner's) */
	int ranks = owners && gpumon__rec_has_column(r, "processes", "rank_launcher");
	const char *sql = ranks    ? "SELECT dev, pid, first_t_ns, flags, uid, ppid, gpu_instance_id, "
				     "compute_instance_id, user, name, command, " REC_OWNER_COLUMNS ", " REC_RANK_COLUMNS
				     " FROM processes ORDER BY rowid"
			  : owners ? "SELECT dev, pid, first_t_ns, flags, uid, ppid, gpu_instance_id, "
				     "compute_instance_id, user, name, command, " REC_OWNER_COLUMNS
				     " FROM processes ORDER BY rowid"
				   : "SELECT dev, pid, first_t_ns, flags, uid, ppid, gpu_instance_id, "
				     "compute_instance_id, user, name, command FROM processes ORDER BY rowid";
	int rc = sqlite3_prepare_v2(r->db, sql, -1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (r->nprocs == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct proc *p = realloc(r->procs, ncap * sizeof *p);
			if (!p) {
				r->nomem = 1;
				break;
			}
			r->procs = p;
			cap = ncap;
		}
		struct proc *p = &r->procs[r->nprocs];
		memset(p, 0, sizeof *p);
		p->rank.rank = p->rank.local_rank = p->rank.world_size = p->rank.node_rank = -1;
		if (!col_u32(s, 0, &p->dev) || !col_u32(s, 1, &p->pid))
			continue;
		p->first_t_ns = col_known(s, 2) ? sqlite3_column_int64(s, 2) : INT64_MIN;
		col_u32(s, 3, &p->flags);
		p->flags &= ~(unsigned)GPUMON_PROC_USED_KNOWN;
		p->uid_known = col_u32(s, 4, &p->uid);
		p->ppid_known = col_u32(s, 5, &p->ppid);
		p->mig_known = col_u32(s, 6, &p->gi) && col_u32(s, 7, &p->ci);
		p->user = dup_col(r, s, 8);
		p->name = dup_col(r, s, 9);
		p->command = dup_col(r, s, 10);
		/* the flag says the environment was read; the columns what it held */
		if (ranks)
			gpumon__rec_read_rank(s, 11 + 1 + REC_OWNER_TEXTS, &p->rank);
		else
			p->flags &= ~(unsigned)GPUMON_PROC_RANK_KNOWN;
		gpumon_owner o;
		if (owners && gpumon__rec_read_owner(s, 11, &o)) {
			p->owner = malloc(sizeof *p->owner);
			if (p->owner)
				*p->owner = o;
			else
				r->nomem = 1;
		}
		r->nprocs++;
	}
	if (rc != SQLITE_DONE && !gpumon__rec_nomem(r, rc) && !r->nomem)
		gpumon__rec_damage(r, "process names after the first %zu are unreadable", r->nprocs);
	sqlite3_finalize(s);

	cap = 0;
	rc = sqlite3_prepare_v2(r->db, "SELECT source, pid, device, framework FROM framework_sources ORDER BY source",
				-1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (r->nsources == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct source *f = realloc(r->sources, ncap * sizeof *f);
			if (!f) {
				r->nomem = 1;
				break;
			}
			r->sources = f;
			cap = ncap;
		}
		struct source *f = &r->sources[r->nsources];
		memset(f, 0, sizeof *f);
		unsigned dev;
		f->id = sqlite3_column_int64(s, 0);
		if (!col_u32(s, 1, &f->pid))
			continue;
		f->device = col_u32(s, 2, &dev) && dev <= INT32_MAX ? (int)dev : -1;
		copy_text(r, s, 3, f->framework, sizeof f->framework);
		r->nsources++;
	}
	if (rc != SQLITE_DONE && !gpumon__rec_nomem(r, rc) && !r->nomem)
		gpumon__rec_damage(r, "framework sources after the first %zu are unreadable", r->nsources);
	sqlite3_finalize(s);
}

int gpumon__rec_read_devices(gpumon_reader *r)
{
	sqlite3_stmt *s = NULL;
	size_t cap = 0;
	int rc = sqlite3_prepare_v2(r->db,
				    "SELECT dev, uuid, name, pci_bus_id, memory_total_bytes, lost_t_ns FROM devices "
				    "ORDER BY dev",
				    -1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t dev = sqlite3_column_int64(s, 0);
		if (dev < 0 || dev >= MAX_DEVICES || (unsigned)dev != r->ndevices)
			continue; /* positions run 0..n-1; anything else is not a device of ours */
		if (r->ndevices == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			gpumon_device_info *d = realloc(r->devices, ncap * sizeof *d);
			int64_t *l = d ? realloc(r->lost_t_ns, ncap * sizeof *l) : NULL;
			if (d)
				r->devices = d;
			if (!l) {
				sqlite3_finalize(s);
				r->nomem = 1;
				return GPUMON_E_NOMEM;
			}
			r->lost_t_ns = l;
			cap = ncap;
		}
		gpumon_device_info *d = &r->devices[r->ndevices];
		memset(d, 0, sizeof *d);
		d->index = (unsigned)dev;
		copy_text(r, s, 1, d->uuid, sizeof d->uuid);
		copy_text(r, s, 2, d->name, sizeof d->name);
		copy_text(r, s, 3, d->pci_bus_id, sizeof d->pci_bus_id);
		d->present = (d->uuid[0] ? GPUMON_INFO_UUID : 0) | (d->name[0] ? GPUMON_INFO_NAME : 0) |
			     (d->pci_bus_id[0] ? GPUMON_INFO_PCI_BUS_ID : 0);
		uint64_t total = 0;
		int k = col_bytes(s, 4, &total);
		if (k > 0 && total > 0) {
			d->memory_total_bytes = total;
			d->present |= GPUMON_INFO_MEMORY_TOTAL;
		} else if (k < 0) {
			gpumon__rec_damage(r, "GPU %u's total memory left out: %.40s is outside 0..1 PiB", r->ndevices,
				   (const char *)sqlite3_column_text(s, 4));
		}
		int lost = sqlite3_column_type(s, 5) == SQLITE_INTEGER;
		r->lost_t_ns[r->ndevices] = lost ? sqlite3_column_int64(s, 5) : INT64_MIN;
		d->lost = lost;
		r->ndevices++;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_OK && !gpumon__rec_nomem(r, rc))
		gpumon__rec_damage(r, "the list of GPUs is unreadable after %u of them", r->ndevices);
	sqlite3_finalize(s);
	return r->nomem ? GPUMON_E_NOMEM : GPUMON_OK;
}

static const struct proc *find_proc(const gpumon_reader *r, unsigned dev, unsigned pid, int64_t t_ns)
{
	const struct proc *best = NULL;
	for (size_t i = r->nprocs; i-- > 0;) {
		const struct proc *p = &r->procs[i];
		if (p->dev != dev || p->pid != pid)
			continue;
		if (p->first_t_ns <= t_ns && (!best || p->first_t_ns > best->first_t_ns))
			best = p;
	}
	return best;
}

/* Sets field bit of *present and *v from column i when it holds a value. */
static void opt64(sqlite3_stmt *s, int i, uint64_t *v, unsigned *present, unsigned bit)
{
	if (col_u64(s, i, v))
		*present |= bit;
}

static void opt32(sqlite3_stmt *s, int i, unsigned *v, unsigned *present, unsigned bit)
{
	if (col_u32(s, i, v))
		*present |= bit;
}

/* Columns: 0 rowid, then REC_DEVICE_COLUMNS from 1. Returns 1, 0 for a row that names no GPU of
 * the file, -1 for one with a byte figure out of range (counted in c). */
static int fill_device(gpumon_reader *r, struct cursor *c, sqlite3_stmt *s, gpumon_record *o)
{
	static const char *const names[] = {[4] = "used_bytes", [5] = "free_bytes", [6] = "reserved_bytes",
					    [7] = "total_bytes", [8] = "used_min_bytes", [9] = "used_max_bytes"};
	gpumon_device_sample *d = &o->sample;
	unsigned p = 0, api = 0;
	int k[10] = {0};
	uint64_t mn = 0, mx = 0, mt;
	uint64_t *at[10] = {[4] = &d->memory_used_bytes, [5] = &d->memory_free_bytes, [6] = &d->memory_reserved_bytes,
			    [7] = &d->memory_total_bytes, [8] = &mn, [9] = &mx};
	if (!col_u32(s, 2, &o->dev) || o->dev >= r->ndevices)
		return 0;
	for (int i = 4; i <= 9; i++)
		if ((k[i] = col_bytes(s, i, at[i])) < 0)
			return refuse_row(c, s, i, names[i]);
	o->kind = GPUMON_REC_DEVICE;
	if (k[4] && k[5] && k[7])
		p |= GPUMON_F_MEMORY;
	if (k[6])
		p |= GPUMON_F_MEM_RESERVED;
	if (col_u32(s, 3, &api) && api <= GPUMON_MEMAPI_V2)
		d->memory_api = api;
	unsigned n;
	if ((p & GPUMON_F_MEMORY) && k[8] && k[9] && col_u64(s, 10, &mt) && col_u32(s, 11, &n) && n > 0) {
		o->used_min_bytes = mn;
		o->used_max_bytes = mx;
		o->used_max_t_ns = mt;
		o->interval_samples = n;
	} else if (p & GPUMON_F_MEMORY) { /* no interval: the sample is its own extremes */
		o->used_min_bytes = o->used_max_bytes = d->memory_used_bytes;
		o->used_max_t_ns = o->t_ns;
	}
	opt32(s, 12, &d->util_gpu_pct, &p, GPUMON_F_UTIL_GPU);
	opt32(s, 13, &d->util_memory_pct, &p, GPUMON_F_UTIL_MEMORY);
	opt32(s, 14, &d->temperature_c, &p, GPUMON_F_TEMPERATURE);
	opt32(s, 15, &d->power_mw, &p, GPUMON_F_POWER);
	opt64(s, 16, &d->energy_mj, &p, GPUMON_F_ENERGY);
	opt32(s, 17, &d->clock_sm_mhz, &p, GPUMON_F_CLOCK_SM);
	opt32(s, 18, &d->clock_mem_mhz, &p, GPUMON_F_CLOCK_MEM);
	d->present = p;
	d->t_ns = o->t_ns;
	return 1;
}

static void fill_process_info(gpumon_process *p, const struct proc *a)
{
	p->flags |= a->flags;
	if (a->uid_known)
		p->uid = a->uid;
	if (a->ppid_known)
		p->ppid = a->ppid;
	if (a->mig_known) {
		p->gpu_instance_id = a->gi;
		p->compute_instance_id = a->ci;
	}
	/* the stored flags say which are known; a text that is missing is not */
	if (a->user)
		snprintf(p->user, sizeof p->user, "%s", a->user);
	else
		p->flags &= ~(unsigned)GPUMON_PROC_USER_KNOWN;
	if (a->name)
		snprintf(p->name, sizeof p->name, "%s", a->name);
	else
		p->flags &= ~(unsigned)GPUMON_PROC_NAME_KNOWN;
	if (a->owner)
		p->owner = *a->owner;
	p->rank = a->rank;
	if (a->command)
		snprintf(p->cmdline, sizeof p->cmdline, "%s", a->command);
	else
		p->flags &= ~(unsigned)GPUMON_PROC_CMDLINE_KNOWN;
	if (!a->ppid_known)
		p->flags &= ~(unsigned)GPUMON_PROC_PPID_KNOWN;
}

/* Columns: 0 rowid, 1 t_ns, 2 dev, 3 pid, 4 used_bytes, 5 gone. Returns as fill_device. */
static int fill_process(gpumon_reader *r, struct cursor *c, sqlite3_stmt *s, gpumon_record *o)
{
	gpumon_process *p = &r->proc;
	uint64_t used = 0;
	if (!col_u32(s, 2, &o->dev) || o->dev >= r->ndevices || !col_u32(s, 3, &p->pid))
		return 0;
	int gone = sqlite3_column_int(s, 5) != 0, known = gone ? 0 : col_bytes(s, 4, &used);
	if (known < 0)
		return refuse_row(c, s, 4, "used_bytes");
	o->kind = gone ? GPUMON_REC_PROCESS_GONE : GPUMON_REC_PROCESS;
	o->process = p;
	p->rank.rank = p->rank.local_rank = p->rank.world_size = p->rank.node_rank = -1;
	const struct proc *a = find_proc(r, o->dev, p->pid, (int64_t)o->t_ns);
	if (a)
		fill_process_info(p, a);
	if (known) {
		p->used_bytes = used;
		p->flags |= GPUMON_PROC_USED_KNOWN;
	}
	return 1;
}

/* Columns: 0 rowid, 1 t_ns, 2 source, 3 step, 4 allocated, 5 reserved, 6 max_allocated[, 7 limit].
 * Returns as fill_device. */
static int fill_framework(gpumon_reader *r, struct cursor *c, sqlite3_stmt *s, gpumon_record *o)
{
	static const char *const names[] = {"allocated_bytes", "reserved_bytes", "max_allocated_bytes", "limit_bytes"};
	gpumon_framework_sample *f = &o->framework;
	uint64_t v[4] = {0};
	int k[4] = {0};
	for (int i = 0; i < 4 && 4 + i < sqlite3_column_count(s); i++)
		if ((k[i] = col_bytes(s, 4 + i, &v[i])) < 0)
			return refuse_row(c, s, 4 + i, names[i]);
	int64_t id = sqlite3_column_int64(s, 2);
	const struct source *src = NULL;
	for (size_t i = 0; i < r->nsources && !src; i++)
		if (r->sources[i].id == id)
			src = &r->sources[i];
	if (!src)
		return 0; /* a sample of a source the file does not name: not attributable */
	o->kind = GPUMON_REC_FRAMEWORK;
	f->t_ns = o->t_ns;
	f->pid = src->pid;
	f->device = src->device;
	memcpy(f->framework, src->framework, sizeof f->framework);
	uint64_t step;
	f->step = col_u64(s, 3, &step) && step <= INT64_MAX ? (int64_t)step : -1;
	f->allocated_known = k[0], f->allocated_bytes = v[0];
	f->reserved_known = k[1], f->reserved_bytes = v[1];
	f->max_allocated_known = k[2], f->max_allocated_bytes = v[2];
	f->limit_bytes = v[3];
	return 1;
}

/* Columns: 0 rowid, 1 t_ns, 2 kind, 3 text[, 4 dev]. "job" events are the job's pids, "lost" events a
 * GPU's loss: both go back to the records they were written from. An event names its GPU when the
 * recording kept one (GPUMON_DEV_NONE otherwise, and for a GPU the file does not list). */
static int fill_event(gpumon_reader *r, sqlite3_stmt *s, gpumon_record *o)
{
	free(r->kind_buf);
	free(r->text_buf);
	r->kind_buf = dup_col(r, s, 2);
	r->text_buf = dup_col(r, s, 3);
	if (!r->kind_buf)
		return 0;
	unsigned pid, named;
	int end = 0;
	/* "pid N", or "pid N: the command" */
	if (!strcmp(r->kind_buf, REC_JOB_EVENT) && r->text_buf && sscanf(r->text_buf, "pid %u%n", &pid, &end) == 1 &&
	    (r->text_buf[end] == '\0' || r->text_buf[end] == ':')) {
		gpumon_process *p = &r->proc;
		o->kind = GPUMON_REC_JOB;
		o->process = p;
		p->pid = pid;
		if (r->text_buf[end] == ':' && r->text_buf[end + 1] == ' ' && r->text_buf[end + 2]) {
			snprintf(p->cmdline, sizeof p->cmdline, "%s", r->text_buf + end + 2);
			p->flags |= GPUMON_PROC_CMDLINE_KNOWN;
		}
		return 1;
	}
	/* GPUs lost at the same moment: the text names which */
	int has_name = r->text_buf && sscanf(r->text_buf, "GPU %u is lost", &named) == 1;
	if (!strcmp(r->kind_buf, REC_LOST_EVENT))
		for (unsigned d = 0; d < r->ndevices; d++)
			if (r->lost_t_ns[d] == (int64_t)o->t_ns && (!has_name || d == named)) {
				o->kind = GPUMON_REC_LOST;
				o->dev = d;
				return 1;
			}
	unsigned dev;
	o->kind = GPUMON_REC_EVENT;
	o->dev = sqlite3_column_count(s) > 4 && col_u32(s, 4, &dev) && dev < r->ndevices ? dev : GPUMON_DEV_NONE;
	o->event_kind = r->kind_buf;
	o->event_text = r->text_buf;
	return 1;
}


int gpumon__rec_fill(gpumon_reader *r, struct cursor *c, gpumon_record *o)
{
	switch (c - r->c) {
	case C_DEVICE: return fill_device(r, c, c->st, o);
	case C_PROCESS: return fill_process(r, c, c->st, o);
	case C_FRAMEWORK: return fill_framework(r, c, c->st, o);
	default: return fill_event(r, c->st, o);
	}
}

