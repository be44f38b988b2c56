/* SPDX-License-Identifier: MIT */
/* recfile.c — reading a recording (docs/recording.md, format 1) in bounded memory: the run's
 * metadata and GPUs, then the rows of the sample and event tables merged in time order. Each table
 * is read in rowid (write) order, so nothing is sorted; a damaged page costs only the rows on it:
 * the walk skips ahead to the next readable row and counts what it skipped. */
#include "recfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#define APPLICATION_ID 0x4750554d /* "GPUM" */
#define FORMAT_VERSION 1
/* Skips over damage per table before the rest of it is given up as unreadable. */
#define MAX_RESUMES 1000

static int is_damage(int rc)
{
	rc &= 0xff;
	return rc == SQLITE_CORRUPT || rc == SQLITE_NOTADB || rc == SQLITE_IOERR || rc == SQLITE_FORMAT ||
	       rc == SQLITE_RANGE;
}

/* The first column of the first row of sql: 1 found (integer or text copied into text), 0 none,
 * -1 error (rc in *rc). */
static int query_one(sqlite3 *db, const char *sql, int64_t *v, char *text, size_t textlen, int *rc_out)
{
	sqlite3_stmt *s = NULL;
	int found = 0, rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		int type = sqlite3_column_type(s, 0);
		if (type == SQLITE_INTEGER && v) {
			*v = sqlite3_column_int64(s, 0);
			found = 1;
		} else if (type == SQLITE_TEXT && text) {
			snprintf(text, textlen, "%s", (const char *)sqlite3_column_text(s, 0));
			found = 1;
		}
	}
	sqlite3_finalize(s);
	if (rc_out)
		*rc_out = rc;
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? found : -1;
}

static void add_damage(recfile *rf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_damage(recfile *rf, const char *fmt, ...)
{
	size_t used = strlen(rf->damage);
	if (used + 4 >= sizeof rf->damage)
		return;
	if (used)
		used += (size_t)snprintf(rf->damage + used, sizeof rf->damage - used, "; ");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(rf->damage + used, sizeof rf->damage - used, fmt, ap);
	va_end(ap);
}

static int meta_int(recfile *rf, const char *key, int64_t *v)
{
	char sql[128];
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key = '%s'", key);
	return query_one(rf->db, sql, v, NULL, 0, NULL) == 1;
}

static void meta_text(recfile *rf, const char *key, char *buf, size_t len)
{
	char sql[128];
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key = '%s'", key);
	if (query_one(rf->db, sql, NULL, buf, len, NULL) != 1)
		buf[0] = 0;
}

static void read_devices(recfile *rf)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_prepare_v2(rf->db,
				    "SELECT dev, uuid, name, pci_bus_id, memory_total_bytes, lost_t_ns FROM devices "
				    "ORDER BY dev",
				    -1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (rf->ndevices >= RECFILE_MAX_DEVICES)
			continue;
		recfile_device *d = &rf->devices[rf->ndevices++];
		const char *t;
		d->dev = sqlite3_column_int(s, 0);
		snprintf(d->uuid, sizeof d->uuid, "%s", (t = (const char *)sqlite3_column_text(s, 1)) ? t : "");
		snprintf(d->name, sizeof d->name, "%s", (t = (const char *)sqlite3_column_text(s, 2)) ? t : "");
		snprintf(d->pci_bus_id, sizeof d->pci_bus_id, "%s",
			 (t = (const char *)sqlite3_column_text(s, 3)) ? t : "");
		d->total_bytes = sqlite3_column_type(s, 4) == SQLITE_INTEGER ? sqlite3_column_int64(s, 4) : -1;
		d->lost_t_ns = sqlite3_column_type(s, 5) == SQLITE_INTEGER ? sqlite3_column_int64(s, 5) : -1;
	}
	if (rc != SQLITE_DONE && rc != SQLITE_OK)
		add_damage(rf, "the list of GPUs is unreadable after %d of them", rf->ndevices);
	sqlite3_finalize(s);
}

int recfile_open(const char *path, recfile *rf, char *err, size_t errlen)
{
	struct stat sb;
	int64_t app = 0, version = 0;
	int rc;
	memset(rf, 0, sizeof *rf);
	rf->path = path;
	rf->end_mono_ns = -1;
	rf->job_pid = -1;
	rf->exit_status = -1;
	if (stat(path, &sb) != 0) {
		cli_set_err(err, errlen, "%s: %s", path, strerror(errno));
		return EXIT_OTHER;
	}
	if (S_ISDIR(sb.st_mode)) {
		cli_set_err(err, errlen, "%s is a directory", path);
		return EXIT_OTHER;
	}
	rc = sqlite3_open_v2(path, &rf->db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(rf->db, 2000);
		if (query_one(rf->db, "PRAGMA application_id", &app, NULL, 0, &rc) < 0 && rc == SQLITE_OK)
			rc = SQLITE_ERROR;
		else if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (rc == SQLITE_NOTADB || (rc == SQLITE_OK && app != APPLICATION_ID)) {
		cli_set_err(err, errlen, "%s is not a gpumon recording (%s)", path,
			rc == SQLITE_NOTADB ? "not an SQLite database" : "an SQLite database of another program");
		recfile_close(rf);
		return EXIT_OTHER;
	}
	if ((rc & 0xff) == SQLITE_CORRUPT) {
		/* SQLite refuses a file shorter than its header says (cut off by a full disk or a partial
		 * copy) unless the schema may be "written"; on a read-only connection that only lets it
		 * read the pages that are there */
		sqlite3_exec(rf->db, "PRAGMA writable_schema = ON", NULL, NULL, NULL);
		if (query_one(rf->db, "PRAGMA application_id", &app, NULL, 0, &rc) >= 0) {
			rc = app == APPLICATION_ID ? SQLITE_OK : SQLITE_NOTADB;
			add_damage(rf, "the file is damaged or cut short (%lld bytes)", (long long)sb.st_size);
		}
	}
	if (rc == SQLITE_NOTADB && app != 0 && app != APPLICATION_ID) {
		cli_set_err(err, errlen, "%s is not a gpumon recording (an SQLite database of another program)", path);
		recfile_close(rf);
		return EXIT_OTHER;
	}
	if (rc != SQLITE_OK) {
		cli_set_err(err, errlen, "cannot read %s: %s", path, rf->db ? sqlite3_errmsg(rf->db) : "out of memory");
		recfile_close(rf);
		return EXIT_OTHER;
	}
	if (query_one(rf->db, "PRAGMA user_version", &version, NULL, 0, NULL) == 1 && version != FORMAT_VERSION) {
		cli_set_err(err, errlen,
			"%s is a gpumon recording of format version %" PRId64 "; this gpumon (%s) reads version %d%s",
			path, version, GPUMON_VERSION_STRING, FORMAT_VERSION,
			version > FORMAT_VERSION ? ": read it with a newer gpumon" : "");
		recfile_close(rf);
		return EXIT_OTHER;
	}
	if (!meta_int(rf, "start_mono_ns", &rf->start_mono_ns) || !meta_int(rf, "start_wall_ns", &rf->start_wall_ns)) {
		rf->start_mono_ns = rf->start_wall_ns = 0;
		add_damage(rf, "its start time is unreadable (times are counted from the first sample)");
	}
	int64_t v;
	if (meta_int(rf, "end_mono_ns", &v))
		rf->end_mono_ns = v;
	if (meta_int(rf, "job_pid", &v))
		rf->job_pid = v;
	if (meta_int(rf, "exit_status", &v))
		rf->exit_status = (int)v;
	meta_text(rf, "kind", rf->kind, sizeof rf->kind);
	meta_text(rf, "host", rf->host, sizeof rf->host);
	meta_text(rf, "driver_version", rf->driver_version, sizeof rf->driver_version);
	char cmd[4096];
	meta_text(rf, "command", cmd, sizeof cmd);
	if (cmd[0])
		rf->command = strdup(cmd);
	read_devices(rf);
	return EXIT_OK;
}

void recfile_close(recfile *rf)
{
	if (!rf)
		return;
	sqlite3_close(rf->db);
	free(rf->command);
	rf->db = NULL;
	rf->command = NULL;
}

double recfile_seconds(const recfile *rf, int64_t t_ns)
{
	return (double)(t_ns - rf->start_mono_ns) / 1e9;
}

/* ---- the walk ---------------------------------------------------------------------------------- */

/* One appearance of a process (the processes table), kept for the whole walk: a few per process. */
struct proc {
	int dev;
	int64_t pid, first_t_ns;
	recval ppid;
	char *user, *name, *command;
};

struct source {
	int64_t id, pid;
	recval device;
	char *framework;
};

/* A table read in rowid order, one row ahead. */
struct cursor {
	const char *table, *columns;
	int kind;
	sqlite3_stmt *st;
	int64_t last_rowid;
	int have, done;
	int64_t lost;     /* rows skipped over damage */
	int lost_end;     /* the rest of the table was unreadable */
	int resumed;      /* no row read since the last skip over damage */
	int resumes;
};

struct recfile_iter {
	recfile *rf;
	struct cursor c[4];
	struct proc *procs;
	size_t nprocs;
	struct source *sources;
	size_t nsources;
	int64_t *job_pids;
	size_t njob;
	char *kind_buf, *text_buf; /* copies for the event row handed out */
	int64_t first_t_ns;
	int failed;
};

static char *dup_col(sqlite3_stmt *s, int i)
{
	const char *t = (const char *)sqlite3_column_text(s, i);
	return t ? strdup(t) : NULL;
}

static recval col(sqlite3_stmt *s, int i)
{
	recval r = {0, 0};
	if (sqlite3_column_type(s, i) == SQLITE_INTEGER) {
		r.v = sqlite3_column_int64(s, i);
		r.known = 1;
	}
	return r;
}

/* Reads the small side tables (process appearances, framework sources, the job's pids). */
static void read_side_tables(recfile_iter *it)
{
	sqlite3 *db = it->rf->db;
	sqlite3_stmt *s = NULL;
	size_t cap = 0;
	int rc = sqlite3_prepare_v2(db,
				    "SELECT dev, pid, first_t_ns, ppid, user, name, command FROM processes ORDER BY rowid",
				    -1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (cli_grow((void **)&it->procs, &cap, it->nprocs, sizeof *it->procs, 64) != 0)
			break;
		struct proc *p = &it->procs[it->nprocs++];
		p->dev = sqlite3_column_int(s, 0);
		p->pid = sqlite3_column_int64(s, 1);
		p->first_t_ns = sqlite3_column_type(s, 2) == SQLITE_INTEGER ? sqlite3_column_int64(s, 2) : INT64_MIN;
		p->ppid = col(s, 3);
		p->user = dup_col(s, 4);
		p->name = dup_col(s, 5);
		p->command = dup_col(s, 6);
	}
	if (rc != SQLITE_DONE)
		add_damage(it->rf, "process names after the first %zu are unreadable", it->nprocs);
	sqlite3_finalize(s);

	cap = 0;
	rc = sqlite3_prepare_v2(db, "SELECT source, pid, device, framework FROM framework_sources ORDER BY source", -1,
				&s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (cli_grow((void **)&it->sources, &cap, it->nsources, sizeof *it->sources, 8) != 0)
			break;
		struct source *f = &it->sources[it->nsources++];
		f->id = sqlite3_column_int64(s, 0);
		f->pid = sqlite3_column_int64(s, 1);
		f->device = col(s, 2);
		f->framework = dup_col(s, 3);
	}
	if (rc != SQLITE_DONE)
		add_damage(it->rf, "framework sources after the first %zu are unreadable", it->nsources);
	sqlite3_finalize(s);

	cap = 0;
	rc = sqlite3_prepare_v2(db, "SELECT text FROM events WHERE kind = 'job' ORDER BY rowid", -1, &s, NULL);
	while ((rc == SQLITE_OK || rc == SQLITE_ROW) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		const char *t = (const char *)sqlite3_column_text(s, 0);
		long long pid;
		if (!t || sscanf(t, "pid %lld", &pid) != 1)
			continue;
		if (cli_grow((void **)&it->job_pids, &cap, it->njob, sizeof *it->job_pids, 16) != 0)
			break;
		it->job_pids[it->njob++] = pid;
	}
	sqlite3_finalize(s);
	if (it->rf->job_pid > 0 && it->njob == 0 && (it->job_pids = malloc(sizeof *it->job_pids))) {
		it->job_pids[0] = it->rf->job_pid;
		it->njob = 1;
	}
}

static int cursor_prepare(recfile_iter *it, struct cursor *c)
{
	char sql[512];
	snprintf(sql, sizeof sql, "SELECT rowid, %s FROM %s WHERE rowid > ?1 ORDER BY rowid", c->columns, c->table);
	sqlite3_finalize(c->st);
	c->st = NULL;
	if (sqlite3_prepare_v2(it->rf->db, sql, -1, &c->st, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(c->st, 1, c->last_rowid);
	return 0;
}

/* After a damaged page: the next rowid that reads, probing ever further ahead; -1 none. */
static int64_t next_readable(recfile_iter *it, struct cursor *c)
{
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT rowid FROM %s WHERE rowid >= ?1 ORDER BY rowid LIMIT 1", c->table);
	for (int64_t gap = 1; gap > 0 && gap < ((int64_t)1 << 40); gap *= 2) {
		sqlite3_stmt *s = NULL;
		if (sqlite3_prepare_v2(it->rf->db, sql, -1, &s, NULL) != SQLITE_OK)
			return -1;
		sqlite3_bind_int64(s, 1, c->last_rowid + gap);
		int rc = sqlite3_step(s);
		int64_t r = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
		sqlite3_finalize(s);
		if (rc == SQLITE_ROW && r > c->last_rowid) /* a damaged tree can answer out of order */
			return r;
		if (rc == SQLITE_ROW)
			continue;
		if (rc == SQLITE_DONE)
			return -1;
	}
	return -1;
}

/* Steps c to its next row (c->have), past damaged pages. */
static void cursor_advance(recfile_iter *it, struct cursor *c)
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
			it->failed = 1;
			return;
		}
		if (c->resumed) /* failed again right where it resumed: skip that row too */
			c->last_rowid++, c->lost++;
		int64_t next = ++c->resumes > MAX_RESUMES ? -1 : next_readable(it, c);
		if (next < 0) {
			c->done = 1;
			c->lost_end = 1;
			return;
		}
		c->lost += next - c->last_rowid - 1;
		c->last_rowid = next - 1;
		c->resumed = 1;
		if (cursor_prepare(it, c) != 0) {
			c->done = 1;
			c->lost_end = 1;
		}
	}
}

int recfile_iter_start(recfile *rf, recfile_iter **out, char *err, size_t errlen)
{
	static const struct {
		const char *table, *columns;
		int kind;
	} tables[4] = {
		{"device_samples",
		 "t_ns, dev, used_bytes, free_bytes, reserved_bytes, total_bytes, used_min_bytes, used_max_bytes, "
		 "used_max_t_ns, util_gpu_pct, util_memory_pct, temperature_c, power_mw, clock_sm_mhz, clock_mem_mhz",
		 RECROW_DEVICE},
		{"process_samples", "t_ns, dev, pid, used_bytes, gone", RECROW_PROCESS},
		{"framework_samples", "t_ns, source, step, allocated_bytes, reserved_bytes, max_allocated_bytes",
		 RECROW_FRAMEWORK},
		{"events", "t_ns, kind, text", RECROW_EVENT},
	};
	recfile_iter *it = calloc(1, sizeof *it);
	if (!it) {
		cli_set_err(err, errlen, "out of memory");
		return EXIT_OTHER;
	}
	it->rf = rf;
	read_side_tables(it);
	for (int i = 0; i < 4; i++) {
		struct cursor *c = &it->c[i];
		c->table = tables[i].table;
		c->columns = tables[i].columns;
		c->kind = tables[i].kind;
		if (cursor_prepare(it, c) != 0) {
			/* a table that cannot even be prepared: its root page or the schema is damaged */
			c->done = 1;
			c->lost_end = 1;
			continue;
		}
		cursor_advance(it, c);
	}
	*out = it;
	return EXIT_OK;
}

static const struct proc *find_proc(const recfile_iter *it, int dev, int64_t pid, int64_t t_ns)
{
	const struct proc *best = NULL;
	for (size_t i = it->nprocs; i-- > 0;) {
		const struct proc *p = &it->procs[i];
		if (p->dev != dev || p->pid != pid)
			continue;
		if (p->first_t_ns <= t_ns && (!best || p->first_t_ns > best->first_t_ns))
			best = p;
	}
	return best;
}

static int is_job(const recfile_iter *it, int64_t pid)
{
	for (size_t i = 0; i < it->njob; i++)
		if (it->job_pids[i] == pid)
			return 1;
	return 0;
}

static void fill(recfile_iter *it, const struct cursor *c, recrow *r)
{
	sqlite3_stmt *s = c->st;
	memset(r, 0, sizeof *r);
	r->kind = c->kind;
	r->t_ns = sqlite3_column_int64(s, 1);
	switch (c->kind) {
	case RECROW_DEVICE:
		r->u.device.dev = sqlite3_column_int(s, 2);
		r->u.device.used = col(s, 3);
		r->u.device.free = col(s, 4);
		r->u.device.reserved = col(s, 5);
		r->u.device.total = col(s, 6);
		r->u.device.used_min = col(s, 7);
		r->u.device.used_max = col(s, 8);
		r->u.device.used_max_t_ns = col(s, 9);
		r->u.device.util_gpu = col(s, 10);
		r->u.device.util_mem = col(s, 11);
		r->u.device.temperature_c = col(s, 12);
		r->u.device.power_mw = col(s, 13);
		r->u.device.clock_sm = col(s, 14);
		r->u.device.clock_mem = col(s, 15);
		break;
	case RECROW_PROCESS: {
		r->u.process.dev = sqlite3_column_int(s, 2);
		r->u.process.pid = sqlite3_column_int64(s, 3);
		r->u.process.used = col(s, 4);
		r->u.process.gone = sqlite3_column_int(s, 5) != 0;
		r->u.process.job = is_job(it, r->u.process.pid);
		const struct proc *p = find_proc(it, r->u.process.dev, r->u.process.pid, r->t_ns);
		if (p) {
			r->u.process.ppid = p->ppid;
			r->u.process.user = p->user;
			r->u.process.name = p->name;
			r->u.process.command = p->command;
		}
		break;
	}
	case RECROW_FRAMEWORK: {
		int64_t id = sqlite3_column_int64(s, 2);
		r->u.framework.pid = -1;
		for (size_t i = 0; i < it->nsources; i++)
			if (it->sources[i].id == id) {
				r->u.framework.pid = it->sources[i].pid;
				r->u.framework.device = it->sources[i].device;
				r->u.framework.framework = it->sources[i].framework;
			}
		r->u.framework.step = col(s, 3);
		r->u.framework.allocated = col(s, 4);
		r->u.framework.reserved = col(s, 5);
		r->u.framework.max_allocated = col(s, 6);
		break;
	}
	case RECROW_EVENT:
		free(it->kind_buf);
		free(it->text_buf);
		it->kind_buf = dup_col(s, 2);
		it->text_buf = dup_col(s, 3);
		r->u.event.kind = it->kind_buf ? it->kind_buf : "";
		r->u.event.text = it->text_buf;
		break;
	}
}

/* Names what the walk could not read, once it is over. */
static void note_losses(recfile_iter *it)
{
	for (int i = 0; i < 4; i++) {
		struct cursor *c = &it->c[i];
		if (c->lost && c->lost_end)
			add_damage(it->rf, "%" PRId64 " rows and the end of table %s are unreadable", c->lost, c->table);
		else if (c->lost)
			add_damage(it->rf, "%" PRId64 " rows of table %s are unreadable", c->lost, c->table);
		else if (c->lost_end && c->last_rowid > 0)
			add_damage(it->rf, "table %s is unreadable after row %" PRId64, c->table, c->last_rowid);
		else if (c->lost_end)
			add_damage(it->rf, "table %s is unreadable", c->table);
		c->lost = 0;
		c->lost_end = 0;
	}
}

int recfile_iter_next(recfile_iter *it, recrow *row)
{
	struct cursor *best = NULL;
	for (int i = 0; i < 4; i++) {
		struct cursor *c = &it->c[i];
		if (c->have && (!best || sqlite3_column_int64(c->st, 1) < sqlite3_column_int64(best->st, 1)))
			best = c;
	}
	if (!best) {
		note_losses(it);
		return it->failed ? -1 : 0;
	}
	fill(it, best, row);
	if (!it->rf->start_mono_ns && !it->first_t_ns) {
		/* no start time in meta: count from the first row */
		it->first_t_ns = row->t_ns;
		it->rf->start_mono_ns = row->t_ns;
	}
	cursor_advance(it, best);
	return 1;
}

void recfile_iter_end(recfile_iter *it)
{
	if (!it)
		return;
	for (int i = 0; i < 4; i++)
		sqlite3_finalize(it->c[i].st);
	for (size_t i = 0; i < it->nprocs; i++) {
		free(it->procs[i].user);
		free(it->procs[i].name);
		free(it->procs[i].command);
	}
	for (size_t i = 0; i < it->nsources; i++)
		free(it->sources[i].framework);
	free(it->procs);
	free(it->sources);
	free(it->job_pids);
	free(it->kind_buf);
	free(it->text_buf);
	free(it);
}
