/* SPDX-License-Identifier: MIT */
/* recording_read.c — reading recordings (schema.h, docs/recording.md) in bounded memory: the run's
 * metadata and GPUs, then the records of the sample and event tables merged in time order and
 * given back as the gpumon_record values the writer took. Each table is read in rowid (write)
 * order, so nothing is sorted; a damaged page costs only the rows on it: the walk skips ahead to
 * the next readable row and counts what it skipped. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "../internal.h"
#include "schema.h"

/* Skips over damage per table before the rest of it is given up as unreadable. */
#define MAX_RESUMES 1000
#define MAX_DEVICES 4096

enum { C_DEVICE, C_PROCESS, C_FRAMEWORK, C_EVENT, NCURSORS };

/* One appearance of a process (the processes table), kept for the whole walk: a few per process. */
struct proc {
	unsigned dev, pid, flags, uid, ppid, gi, ci;
	int64_t first_t_ns; /* INT64_MIN: seen only leaving */
	int uid_known, ppid_known, mig_known;
	char *user, *name, *command;
};

struct source {
	int64_t id;
	unsigned pid;
	int device;
	char framework[16];
};

/* A table read in rowid order, one row ahead. */
struct cursor {
	const char *table, *columns;
	sqlite3_stmt *st;
	int64_t last_rowid;
	int have, done;
	int64_t lost;     /* rows skipped over damage */
	int lost_end;     /* the rest of the table was unreadable */
	int resumed;      /* no row read since the last skip over damage */
	int resumes;
	int64_t out_of_range;  /* rows left out for a figure out of range (a hand edit) ... */
	char first_bad[96];    /* ... and the first of them: "row 17, used_bytes = -1" */
};

struct gpumon_reader {
	sqlite3 *db;
	char *path;
	gpumon_run_meta meta;
	char *kind, *command, *settings, *host, *driver;
	gpumon_device_info *devices;
	int64_t *lost_t_ns; /* per device; INT64_MIN never */
	unsigned ndevices;
	int started;        /* the walk has begun */
	int meta_start;     /* meta holds the start time */
	struct cursor c[NCURSORS];
	struct proc *procs;
	size_t nprocs;
	struct source *sources;
	size_t nsources;
	char *kind_buf, *text_buf; /* copies for the event record handed out */
	int failed;
	char damage[2048];   /* what was lost, a sentence for each table at most */
	char msg[512];
};

__attribute__((format(printf, 3, 4))) static int seterr(gpumon_reader *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof r->msg, fmt, ap);
	va_end(ap);
	return status;
}

static void add_damage(gpumon_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_damage(gpumon_reader *r, const char *fmt, ...)
{
	size_t used = strlen(r->damage);
	if (used + 4 >= sizeof r->damage)
		return;
	if (used)
		used += (size_t)snprintf(r->damage + used, sizeof r->damage - used, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->damage + used, sizeof r->damage - used, fmt, ap);
	va_end(ap);
}

static int is_damage(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_IOERR || rc == SQLITE_FORMAT ||
	       rc == SQLITE_RANGE;
}

/* The first column of the first row of sql: 1 found (an integer into *v, or a copy of the text into
 * *text), 0 none, -1 error (rc in *rc_out). */
static int query_one(sqlite3 *db, const char *sql, int64_t *v, char **text, int *rc_out)
{
	sqlite3_stmt *s = NULL;
	int found = 0, rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int type = sqlite3_column_type(s, 0);
		if (type == SQLITE_INTEGER && v) {
			*v = sqlite3_column_int64(s, 0);
			found = 1;
		} else if (type == SQLITE_TEXT && text) {
			*text = strdup((const char *)sqlite3_column_text(s, 0));
			found = *text != NULL;
		}
	}
	sqlite3_finalize(s);
	if (rc_out)
		*rc_out = rc;
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? found : -1;
}

static int meta_int(gpumon_reader *r, const char *key, int64_t *v)
{
	char sql[128];
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key = '%s'", key);
	return query_one(r->db, sql, v, NULL, NULL) == 1;
}

static char *meta_text(gpumon_reader *r, const char *key)
{
	char sql[128], *t = NULL;
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key = '%s'", key);
	return query_one(r->db, sql, NULL, &t, NULL) == 1 ? t : NULL;
}

static void copy_text(char *dst, size_t len, const unsigned char *t)
{
	snprintf(dst, len, "%s", t ? (const char *)t : "");
}

static int col_bytes(sqlite3_stmt *s, int i, uint64_t *v);

static int read_devices(gpumon_reader *r)
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
				return seterr(r, GPUMON_E_NOMEM, "%s: out of memory", r->path);
			}
			r->lost_t_ns = l;
			cap = ncap;
		}
		gpumon_device_info *d = &r->devices[r->ndevices];
		memset(d, 0, sizeof *d);
		d->index = (unsigned)dev;
		copy_text(d->uuid, sizeof d->uuid, sqlite3_column_text(s, 1));
		copy_text(d->name, sizeof d->name, sqlite3_column_text(s, 2));
		copy_text(d->pci_bus_id, sizeof d->pci_bus_id, sqlite3_column_text(s, 3));
		d->present = (d->uuid[0] ? GPUMON_INFO_UUID : 0) | (d->name[0] ? GPUMON_INFO_NAME : 0) |
			     (d->pci_bus_id[0] ? GPUMON_INFO_PCI_BUS_ID : 0);
		uint64_t total = 0;
		int k = col_bytes(s, 4, &total);
		if (k > 0 && total > 0) {
			d->memory_total_bytes = total;
			d->present |= GPUMON_INFO_MEMORY_TOTAL;
		} else if (k < 0) {
			add_damage(r, "GPU %u's total memory left out: %.40s is outside 0..1 PiB", r->ndevices,
				   (const char *)sqlite3_column_text(s, 4));
		}
		int lost = sqlite3_column_type(s, 5) == SQLITE_INTEGER;
		r->lost_t_ns[r->ndevices] = lost ? sqlite3_column_int64(s, 5) : INT64_MIN;
		d->lost = lost;
		r->ndevices++;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_OK)
		add_damage(r, "the list of GPUs is unreadable after %u of them", r->ndevices);
	sqlite3_finalize(s);
	return GPUMON_OK;
}

/* Opens the database and checks it is a recording of a format we read. */
static int open_checked(gpumon_reader *r)
{
	struct stat sb;
	int64_t app = 0, version = 0;
	int rc;
	if (stat(r->path, &sb) != 0)
		return seterr(r, GPUMON_E_IO, "%s: %s", r->path, strerror(errno));
	if (S_ISDIR(sb.st_mode))
		return seterr(r, GPUMON_E_IO, "%s is a directory", r->path);
	rc = sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(r->db, 2000);
		if (query_one(r->db, "PRAGMA application_id", &app, NULL, &rc) < 0 && rc == SQLITE_OK)
			rc = SQLITE_ERROR;
		else if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc == SQLITE_NOTADB || (rc == SQLITE_OK && app != REC_APPLICATION_ID))
		return seterr(r, GPUMON_E_INVAL, "%s is not a gpumon recording (%s)", r->path,
			      rc == SQLITE_NOTADB ? "not an SQLite database" : "an SQLite database of another program");
	if ((rc & 0xff) == SQLITE_CORRUPT) {
		/* SQLite refuses a file shorter than its header says (cut off by a full disk or a partial
		 * copy) unless the schema may be "written"; on a read-only connection that only lets it
		 * read the pages that are there */
		sqlite3_exec(r->db, "PRAGMA writable_schema = ON", NULL, NULL, NULL);
		if (query_one(r->db, "PRAGMA application_id", &app, NULL, &rc) >= 0) {
			rc = app == REC_APPLICATION_ID ? SQLITE_OK : SQLITE_NOTADB;
			add_damage(r, "the file is damaged or cut short (%lld bytes)", (long long)sb.st_size);
		}
	}
	if (rc == SQLITE_NOTADB && app != 0 && app != REC_APPLICATION_ID)
		return seterr(r, GPUMON_E_INVAL, "%s is not a gpumon recording (an SQLite database of another program)",
			      r->path);
	if (rc != SQLITE_OK)
		return seterr(r, GPUMON_E_IO, "cannot read %s: %s", r->path, r->db ? sqlite3_errmsg(r->db) : "out of memory");
	if (query_one(r->db, "PRAGMA user_version", &version, NULL, NULL) == 1 && version != REC_FORMAT_VERSION)
		return seterr(r, GPUMON_E_INVAL,
			      "%s is a gpumon recording of format version %" PRId64 "; this gpumon (%s) reads version %d%s",
			      r->path, version, GPUMON_VERSION_STRING, REC_FORMAT_VERSION,
			      version > REC_FORMAT_VERSION ? ": read it with a newer gpumon" : "");
	return GPUMON_OK;
}

static void read_meta(gpumon_reader *r)
{
	int64_t v, start_mono = 0, start_wall = 0;
	gpumon_run_meta *m = &r->meta;
	m->size = sizeof *m;
	m->exit_status = -1;
	if (meta_int(r, "start_mono_ns", &start_mono) && meta_int(r, "start_wall_ns", &start_wall) &&
	    start_mono > 0 && start_wall > 0) {
		m->start_mono_ns = (uint64_t)start_mono;
		m->start_wall_ns = (uint64_t)start_wall;
		r->meta_start = 1;
	} else {
		add_damage(r, "its start time is unreadable (times are counted from the first sample)");
	}
	if (meta_int(r, "end_mono_ns", &v) && v > 0)
		m->end_mono_ns = (uint64_t)v;
	if (meta_int(r, "job_pid", &v) && v > 0 && v <= UINT32_MAX)
		m->job_pid = (unsigned)v;
	if (meta_int(r, "exit_status", &v) && v >= 0 && v <= 255)
		m->exit_status = (int)v;
	if (meta_int(r, "limit_bytes", &v) && v > 0 && (uint64_t)v <= GPUMON_MAX_BYTES)
		m->limit_bytes = (uint64_t)v;
	else if (meta_int(r, "limit_bytes", &v) && v > 0)
		add_damage(r, "the job's limit left out: %" PRId64 " bytes is outside 0..1 PiB", v);
	m->kind = r->kind = meta_text(r, "kind");
	m->command = r->command = meta_text(r, "command");
	m->settings = r->settings = meta_text(r, "settings");
	m->host = r->host = meta_text(r, "host");
	m->driver_version = r->driver = meta_text(r, "driver_version");
}

/* ---- the walk ---------------------------------------------------------------------------------- */

static char *dup_col(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	return t ? strdup(t) : NULL;
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
static void read_side_tables(gpumon_reader *r)
{
	sqlite3_stmt *s = NULL;
	size_t cap = 0;
	int rc = sqlite3_prepare_v2(r->db,
				    "SELECT dev, pid, first_t_ns, flags, uid, ppid, gpu_instance_id, compute_instance_id, "
				    "user, name, command FROM processes ORDER BY rowid",
				    -1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (r->nprocs == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct proc *p = realloc(r->procs, ncap * sizeof *p);
			if (!p)
				break;
			r->procs = p;
			cap = ncap;
		}
		struct proc *p = &r->procs[r->nprocs];
		memset(p, 0, sizeof *p);
		if (!col_u32(s, 0, &p->dev) || !col_u32(s, 1, &p->pid))
			continue;
		p->first_t_ns = col_known(s, 2) ? sqlite3_column_int64(s, 2) : INT64_MIN;
		col_u32(s, 3, &p->flags);
		p->flags &= ~(unsigned)GPUMON_PROC_USED_KNOWN;
		p->uid_known = col_u32(s, 4, &p->uid);
		p->ppid_known = col_u32(s, 5, &p->ppid);
		p->mig_known = col_u32(s, 6, &p->gi) && col_u32(s, 7, &p->ci);
		p->user = dup_col(s, 8);
		p->name = dup_col(s, 9);
		p->command = dup_col(s, 10);
		r->nprocs++;
	}
	if (rc != SQLITE_DONE)
		add_damage(r, "process names after the first %zu are unreadable", r->nprocs);
	sqlite3_finalize(s);

	cap = 0;
	rc = sqlite3_prepare_v2(r->db, "SELECT source, pid, device, framework FROM framework_sources ORDER BY source",
				-1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (r->nsources == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct source *f = realloc(r->sources, ncap * sizeof *f);
			if (!f)
				break;
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
		copy_text(f->framework, sizeof f->framework, sqlite3_column_text(s, 3));
		r->nsources++;
	}
	if (rc != SQLITE_DONE)
		add_damage(r, "framework sources after the first %zu are unreadable", r->nsources);
	sqlite3_finalize(s);
}

/* Whether table has column (a column added within the format version). */
static int has_column(sqlite3 *db, const char *table, const char *column)
{
	char sql[128];
	sqlite3_stmt *s = NULL;
	int found = 0;
	snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", table);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK)
		while (!found && sqlite3_step(s) == SQLITE_ROW) {
			const char *n = (const char *)sqlite3_column_text(s, 1);
			found = n && !strcmp(n, column);
		}
	sqlite3_finalize(s);
	return found;
}

static int cursor_prepare(gpumon_reader *r, struct cursor *c)
{
	char sql[640];
	snprintf(sql, sizeof sql, "SELECT rowid, %s FROM %s WHERE rowid > ?1 ORDER BY rowid", c->columns, c->table);
	sqlite3_finalize(c->st);
	c->st = NULL;
	if (sqlite3_prepare_v2(r->db, sql, -1, &c->st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(c->st, 1, c->last_rowid);
	return 0;
}

/* After a damaged page: the next rowid that reads, probing ever further ahead; -1 none. */
static int64_t next_readable(gpumon_reader *r, struct cursor *c)
{
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT rowid FROM %s WHERE rowid >= ?1 ORDER BY rowid LIMIT 1", c->table);
	for (int64_t gap = 1; gap > 0 && gap < ((int64_t)1 << 40); gap *= 2) {
		sqlite3_stmt *s = NULL;
		if (sqlite3_prepare_v2(r->db, sql, -1, &s, NULL) != SQLITE_OK)
			return -1;
		sqlite3_bind_int64(s, 1, c->last_rowid + gap);
		int rc = sqlite3_step(s);
		int64_t id = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
		sqlite3_finalize(s);
		if (rc == SQLITE_ROW && id > c->last_rowid) /* a damaged tree can answer out of order */
			return id;
		if (rc == SQLITE_ROW)
			continue;
		if (rc == SQLITE_DONE)
			return -1;
	}
	return -1;
}

/* Steps c to its next row (c->have), past damaged pages. */
static void cursor_advance(gpumon_reader *r, struct cursor *c)
{
	c->have = 0;
	while (!c->done) {
		int rc = c->st ? sqlite3_step(c->st) : SQLITE_ERROR;
		if (rc == SQLITE_ROW) {
			int64_t id = sqlite3_column_int64(c->st, 0);
			if (id <= c->last_rowid) /* out of order: a damaged page; never go back */
				continue;
			c->last_rowid = id;
			c->have = 1;
			c->resumed = 0;
			return;
		}
		if (rc == SQLITE_DONE) {
			c->done = 1;
			return;
		}
		if (!is_damage(rc) && c->st) {
			c->done = 1;
			c->lost_end = 1;
			r->failed = 1;
			return;
		}
		if (c->resumed) /* failed again right where it resumed: skip that row too */
			c->last_rowid++, c->lost++;
		int64_t next = ++c->resumes > MAX_RESUMES ? -1 : next_readable(r, c);
		if (next < 0) {
			c->done = 1;
			c->lost_end = 1;
			return;
		}
		c->lost += next - c->last_rowid - 1;
		c->last_rowid = next - 1;
		c->resumed = 1;
		if (cursor_prepare(r, c) != 0) {
			c->done = 1;
			c->lost_end = 1;
		}
	}
}

static void start_walk(gpumon_reader *r)
{
	static const char *const tables[NCURSORS] = {"device_samples", "process_samples", "framework_samples", "events"};
	const char *columns[NCURSORS] = {REC_DEVICE_COLUMNS, REC_PROCESS_COLUMNS,
					 has_column(r->db, "framework_samples", "limit_bytes")
					     ? REC_FRAMEWORK_COLUMNS_LIMIT
					     : REC_FRAMEWORK_COLUMNS,
					 REC_EVENT_COLUMNS};
	r->started = 1;
	read_side_tables(r);
	for (int i = 0; i < NCURSORS; i++) {
		struct cursor *c = &r->c[i];
		c->table = tables[i];
		c->columns = columns[i];
		if (cursor_prepare(r, c) != 0) {
			/* a table that cannot even be prepared: its root page or the schema is damaged */
			c->done = 1;
			c->lost_end = 1;
			continue;
		}
		cursor_advance(r, c);
	}
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
	gpumon_process *p = &o->process;
	uint64_t used = 0;
	if (!col_u32(s, 2, &o->dev) || o->dev >= r->ndevices || !col_u32(s, 3, &p->pid))
		return 0;
	int gone = sqlite3_column_int(s, 5) != 0, known = gone ? 0 : col_bytes(s, 4, &used);
	if (known < 0)
		return refuse_row(c, s, 4, "used_bytes");
	o->kind = gone ? GPUMON_REC_PROCESS_GONE : GPUMON_REC_PROCESS;
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

/* Columns: 0 rowid, 1 t_ns, 2 kind, 3 text. "job" events are the job's pids, "lost" events a
 * GPU's loss: both go back to the records they were written from. */
static int fill_event(gpumon_reader *r, sqlite3_stmt *s, gpumon_record *o)
{
	free(r->kind_buf);
	free(r->text_buf);
	r->kind_buf = dup_col(s, 2);
	r->text_buf = dup_col(s, 3);
	if (!r->kind_buf)
		return 0;
	unsigned pid, named;
	int end = 0;
	/* "pid N", or "pid N: the command" */
	if (!strcmp(r->kind_buf, REC_JOB_EVENT) && r->text_buf && sscanf(r->text_buf, "pid %u%n", &pid, &end) == 1 &&
	    (r->text_buf[end] == '\0' || r->text_buf[end] == ':')) {
		o->kind = GPUMON_REC_JOB;
		o->process.pid = pid;
		if (r->text_buf[end] == ':' && r->text_buf[end + 1] == ' ' && r->text_buf[end + 2]) {
			snprintf(o->process.cmdline, sizeof o->process.cmdline, "%s", r->text_buf + end + 2);
			o->process.flags |= GPUMON_PROC_CMDLINE_KNOWN;
		}
		return 1;
	}
	/* GPUs lost at the same moment: the text names which */
	int has_name = r->text_buf && sscanf(r->text_buf, "GPU %u is lost", &named) == 1;
	if (!strcmp(r->kind_buf, "lost"))
		for (unsigned d = 0; d < r->ndevices; d++)
			if (r->lost_t_ns[d] == (int64_t)o->t_ns && (!has_name || d == named)) {
				o->kind = GPUMON_REC_LOST;
				o->dev = d;
				return 1;
			}
	o->kind = GPUMON_REC_EVENT;
	o->event_kind = r->kind_buf;
	o->event_text = r->text_buf;
	return 1;
}

/* Names what the walk could not read, once it is over. */
static void note_losses(gpumon_reader *r)
{
	for (int i = 0; i < NCURSORS; i++) {
		struct cursor *c = &r->c[i];
		if (c->lost && c->lost_end)
			add_damage(r, "%" PRId64 " rows and the end of table %s are unreadable", c->lost, c->table);
		else if (c->lost)
			add_damage(r, "%" PRId64 " rows of table %s are unreadable", c->lost, c->table);
		else if (c->lost_end && c->last_rowid > 0)
			add_damage(r, "table %s is unreadable after row %" PRId64, c->table, c->last_rowid);
		else if (c->lost_end)
			add_damage(r, "table %s is unreadable", c->table);
		if (c->out_of_range)
			add_damage(r, "%" PRId64 " row%s of table %s left out for a byte figure outside 0..1 PiB (the first: %s)",
				   c->out_of_range, c->out_of_range == 1 ? "" : "s", c->table, c->first_bad);
		c->lost = 0;
		c->lost_end = 0;
		c->out_of_range = 0;
	}
}

int gpumon_reader_next(gpumon_reader *r, gpumon_record *out)
{
	if (!r || !out)
		return GPUMON_E_INVAL;
	if (!r->db)
		return GPUMON_E_INVAL;
	if (!r->started)
		start_walk(r);
	for (;;) {
		struct cursor *best = NULL;
		for (int i = 0; i < NCURSORS; i++) {
			struct cursor *c = &r->c[i];
			if (c->have && (!best || sqlite3_column_int64(c->st, 1) < sqlite3_column_int64(best->st, 1)))
				best = c;
		}
		if (!best) {
			note_losses(r);
			return r->failed ? seterr(r, GPUMON_E_IO, "%s: the file failed while it was read", r->path) : 0;
		}
		memset(out, 0, sizeof *out);
		int64_t t = sqlite3_column_int64(best->st, 1);
		if (t <= 0) { /* no time a clock gave: a damaged or hand-edited row */
			best->lost++;
			cursor_advance(r, best);
			continue;
		}
		out->t_ns = (uint64_t)t;
		int ok;
		switch (best - r->c) {
		case C_DEVICE: ok = fill_device(r, best, best->st, out); break;
		case C_PROCESS: ok = fill_process(r, best, best->st, out); break;
		case C_FRAMEWORK: ok = fill_framework(r, best, best->st, out); break;
		default: ok = fill_event(r, best->st, out); break;
		}
		cursor_advance(r, best);
		if (ok <= 0)
			continue; /* a row that names nothing we know (damage, a hand edit), or one refused: skipped */
		if (!r->meta_start && !r->meta.start_mono_ns)
			r->meta.start_mono_ns = out->t_ns; /* no start time in meta: count from the first record */
		return 1;
	}
}

/* ---- the object ------------------------------------------------------------------------------- */

int gpumon_reader_create(const char *path, gpumon_reader **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	gpumon_reader *r = calloc(1, sizeof *r);
	*out = r;
	if (!r)
		return GPUMON_E_NOMEM;
	if (!path || !path[0])
		return seterr(r, GPUMON_E_INVAL, "no recording named");
	r->path = strdup(path);
	if (!r->path)
		return seterr(r, GPUMON_E_NOMEM, "out of memory");
	int st = open_checked(r);
	if (st) {
		sqlite3_close(r->db);
		r->db = NULL;
		return st;
	}
	read_meta(r);
	return read_devices(r);
}

const gpumon_run_meta *gpumon_reader_meta(const gpumon_reader *r)
{
	static const gpumon_run_meta none = {.size = sizeof none, .exit_status = -1};
	return r ? &r->meta : &none;
}

unsigned gpumon_reader_device_count(const gpumon_reader *r)
{
	return r ? r->ndevices : 0;
}

int gpumon_reader_device(const gpumon_reader *r, unsigned i, gpumon_device_info *out)
{
	if (!r || !out || i >= r->ndevices)
		return GPUMON_E_NOT_FOUND;
	*out = r->devices[i];
	return GPUMON_OK;
}

const char *gpumon_reader_damage(const gpumon_reader *r)
{
	return r ? r->damage : "";
}

const char *gpumon_reader_errmsg(const gpumon_reader *r)
{
	return r ? r->msg : "";
}

void gpumon_reader_destroy(gpumon_reader *r)
{
	if (!r)
		return;
	for (int i = 0; i < NCURSORS; i++)
		sqlite3_finalize(r->c[i].st);
	sqlite3_close(r->db);
	for (size_t i = 0; i < r->nprocs; i++) {
		free(r->procs[i].user);
		free(r->procs[i].name);
		free(r->procs[i].command);
	}
	free(r->procs);
	free(r->sources);
	free(r->devices);
	free(r->lost_t_ns);
	free(r->kind_buf);
	free(r->text_buf);
	free(r->kind);
	free(r->command);
	free(r->settings);
	free(r->host);
	free(r->driver);
	free(r->path);
	free(r);
}
