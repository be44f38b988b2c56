/* SPDX-License-Identifier: MIT */
/* recording_read.c — reading recordings (schema.h, docs/recording.md) in bounded memory: the run's
 * metadata and GPUs, then the records of the sample and event tables merged in time order and
 * given back as the gpumon_record values the writer took (recording_rows.c makes them). Each
 * table is read in rowid (write) order, so nothing is sorted; a damaged page costs only the rows on
 * it: the walk skips ahead to the next readable row and counts what it skipped. Running out of
 * memory is said as that, never as damage. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "recording_read.h"
#include "recording_mig.h"
#include "schema.h"

__attribute__((format(printf, 3, 4))) static int seterr(gpumon_reader *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof r->msg, fmt, ap);
	va_end(ap);
	return status;
}

void gpumon__rec_damage(gpumon_reader *r, const char *fmt, ...)
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

int gpumon__rec_nomem(gpumon_reader *r, int rc)
{
	if ((rc & 0xff) != SQLITE_NOMEM && rc != SQLITE_IOERR_NOMEM)
		return 0;
	r->nomem = 1;
	return 1;
}

static int is_damage(int rc)
{
	if (rc == SQLITE_IOERR_NOMEM)
		return 0; /* out of memory, said as such */
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
			const char *t = (const char *)sqlite3_column_text(s, 0);
			*text = t ? strdup(t) : NULL;
			found = *text != NULL;
			if (!found)
				rc = SQLITE_NOMEM;
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
	int rc;
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key = '%s'", key);
	int found = query_one(r->db, sql, v, NULL, &rc) == 1;
	gpumon__rec_nomem(r, rc);
	return found;
}

static char *meta_text(gpumon_reader *r, const char *key)
{
	char sql[128], *t = NULL;
	int rc;
	snprintf(sql, sizeof sql, "SELECT value FROM meta WHERE key = '%s'", key);
	int found = query_one(r->db, sql, NULL, &t, &rc) == 1;
	gpumon__rec_nomem(r, rc);
	return found ? t : NULL;
}

/* The one wording of a file that is not a recording (every front end shows the reader's message):
 * not SQLite at all, or another program's database. */
static int not_a_recording(gpumon_reader *r, int sqlite)
{
	return seterr(r, GPUMON_E_INVAL, "%s is not a gpumon recording (%s)", r->path,
		      sqlite ? "an SQLite database of another program" : "not an SQLite database");
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
	char why[256];
	if (gpumon__sqlite_load(why, sizeof why) != 0)
		return seterr(r, GPUMON_E_NO_LIBRARY, "%s: %s", r->path, why);
	rc = sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READONLY, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_busy_timeout(r->db, 2000);
		if (query_one(r->db, "PRAGMA application_id", &app, NULL, &rc) < 0 && rc == SQLITE_OK)
			rc = SQLITE_ERROR;
		else if (rc == SQLITE_ROW || rc == SQLITE_DONE)
			rc = SQLITE_OK;
	}
	if (gpumon__rec_nomem(r, rc) || !r->db)
		return seterr(r, GPUMON_E_NOMEM, "%s: out of memory", r->path);
	if (rc == SQLITE_NOTADB || (rc == SQLITE_OK && app != REC_APPLICATION_ID))
		return not_a_recording(r, rc != SQLITE_NOTADB);
	if ((rc & 0xff) == SQLITE_CORRUPT) {
		/* SQLite refuses a file shorter than its header says (cut off by a full disk or a partial
		 * copy) unless the schema may be "written"; on a read-only connection that only lets it
		 * read the pages that are there */
		sqlite3_exec(r->db, "PRAGMA writable_schema = ON", NULL, NULL, NULL);
		if (query_one(r->db, "PRAGMA application_id", &app, NULL, &rc) >= 0) {
			rc = app == REC_APPLICATION_ID ? SQLITE_OK : SQLITE_NOTADB;
			gpumon__rec_damage(r, "the file is damaged or cut short (%lld bytes)", (long long)sb.st_size);
		}
	}
	if (rc == SQLITE_NOTADB && app != 0 && app != REC_APPLICATION_ID)
		return not_a_recording(r, 1);
	if (gpumon__rec_nomem(r, rc))
		return seterr(r, GPUMON_E_NOMEM, "%s: out of memory", r->path);
	if (rc != SQLITE_OK)
		return seterr(r, GPUMON_E_IO, "cannot read %s: %s", r->path, sqlite3_errmsg(r->db));
	int found = query_one(r->db, "PRAGMA user_version", &version, NULL, &rc);
	if (gpumon__rec_nomem(r, rc))
		return seterr(r, GPUMON_E_NOMEM, "%s: out of memory", r->path);
	if (found == 1 && version != REC_FORMAT_VERSION)
		return seterr(r, GPUMON_E_INVAL,
			      "%s is a gpumon recording of format version %" PRId64 "; this gpumon (%s) reads version %d%s",
			      r->path, version, GPUMON_VERSION, REC_FORMAT_VERSION,
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
	} else if (!r->nomem) {
		gpumon__rec_damage(r, "its start time is unreadable (times are counted from the first sample)");
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
		gpumon__rec_damage(r, "the job's limit left out: %" PRId64 " bytes is outside 0..1 PiB", v);
	m->kind = r->kind = meta_text(r, "kind");
	m->command = r->command = meta_text(r, "command");
	m->settings = r->settings = meta_text(r, "settings");
	m->host = r->host = meta_text(r, "host");
	m->driver_version = r->driver = meta_text(r, "driver_version");
}

/* ---- the walk ---------------------------------------------------------------------------------- */

int gpumon__rec_has_column(gpumon_reader *r, const char *table, const char *column)
{
	char sql[128];
	sqlite3_stmt *s = NULL;
	int found = 0, rc;
	snprintf(sql, sizeof sql, "PRAGMA table_info(%s)", table);
	if ((rc = sqlite3_prepare_v2(r->db, sql, -1, &s, NULL)) == SQLITE_OK)
		while (!found && (rc = sqlite3_step(s)) == SQLITE_ROW) {
			const char *n = (const char *)sqlite3_column_text(s, 1);
			found = n && !strcmp(n, column);
		}
	gpumon__rec_nomem(r, rc);
	sqlite3_finalize(s);
	return found;
}

static int cursor_prepare(gpumon_reader *r, struct cursor *c)
{
	char sql[640];
	snprintf(sql, sizeof sql, "SELECT rowid, %s FROM %s WHERE rowid > ?1 ORDER BY rowid", c->columns, c->table);
	sqlite3_finalize(c->st);
	c->st = NULL;
	int rc = sqlite3_prepare_v2(r->db, sql, -1, &c->st, NULL);
	if (rc != SQLITE_OK) {
		gpumon__rec_nomem(r, rc);
		return -1;
	}
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
		int rc = sqlite3_prepare_v2(r->db, sql, -1, &s, NULL);
		if (rc != SQLITE_OK) {
			gpumon__rec_nomem(r, rc);
			return -1;
		}
		sqlite3_bind_int64(s, 1, c->last_rowid + gap);
		rc = sqlite3_step(s);
		if (gpumon__rec_nomem(r, rc)) {
			sqlite3_finalize(s);
			return -1;
		}
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
		if (gpumon__rec_nomem(r, rc)) { /* the walk stops and says why (gpumon_reader_next) */
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
		if (r->nomem) {
			c->done = 1;
			return;
		}
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
			c->lost_end = !r->nomem;
		}
	}
}

static void start_walk(gpumon_reader *r)
{
	static const char *const tables[NCURSORS] = {"device_samples", "process_samples", "framework_samples", "events"};
	const char *columns[NCURSORS] = {REC_DEVICE_COLUMNS, REC_PROCESS_COLUMNS,
					 gpumon__rec_has_column(r, "framework_samples", "limit_bytes")
					     ? REC_FRAMEWORK_COLUMNS_LIMIT
					     : REC_FRAMEWORK_COLUMNS,
					 gpumon__rec_has_column(r, "events", "dev") ? REC_EVENT_COLUMNS_DEV : REC_EVENT_COLUMNS};
	r->started = 1;
	gpumon__rec_read_side_tables(r);
	for (int i = 0; i < NCURSORS && !r->nomem; i++) {
		struct cursor *c = &r->c[i];
		c->table = tables[i];
		c->columns = columns[i];
		if (cursor_prepare(r, c) != 0) {
			/* a table that cannot even be prepared: its root page or the schema is damaged (or
			   memory ran out, which the walk says instead) */
			c->done = 1;
			c->lost_end = !r->nomem;
			continue;
		}
		cursor_advance(r, c);
	}
}

/* Names what the walk could not read, once it is over. */
static void note_losses(gpumon_reader *r)
{
	for (int i = 0; i < NCURSORS; i++) {
		struct cursor *c = &r->c[i];
		if (c->lost && c->lost_end)
			gpumon__rec_damage(r, "%" PRId64 " rows and the end of table %s are unreadable", c->lost, c->table);
		else if (c->lost)
			gpumon__rec_damage(r, "%" PRId64 " rows of table %s are unreadable", c->lost, c->table);
		else if (c->lost_end && c->last_rowid > 0)
			gpumon__rec_damage(r, "table %s is unreadable after row %" PRId64, c->table, c->last_rowid);
		else if (c->lost_end)
			gpumon__rec_damage(r, "table %s is unreadable", c->table);
		if (c->out_of_range)
			gpumon__rec_damage(r, "%" PRId64 " row%s of table %s left out for a byte figure outside 0..1 PiB (the first: %s)",
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
		if (r->nomem) /* not the file's fault: said as what it is, and the walk ends here */
			return seterr(r, GPUMON_E_NOMEM, "%s: out of memory: the recording was read only in part", r->path);
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
		memset(&r->proc, 0, sizeof r->proc);
		int64_t t = sqlite3_column_int64(best->st, 1);
		if (t <= 0) { /* no time a clock gave: a damaged or hand-edited row */
			best->lost++;
			cursor_advance(r, best);
			continue;
		}
		out->t_ns = (uint64_t)t;
		int ok = gpumon__rec_fill(r, best, out);
		if (r->nomem)
			continue;
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
	st = r->nomem ? GPUMON_E_NOMEM : gpumon__rec_read_devices(r);
	st = st ? st : gpumon__rec_read_mig(r);
	return st == GPUMON_E_NOMEM ? seterr(r, st, "%s: out of memory", r->path) : st;
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
		free(r->procs[i].owner);
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

int gpumon__reader_job(gpumon_reader *r, gpumon_rank *out)
{
	if (!r->started) /* the processes' rows are read as the walk starts */
		start_walk(r);
	const gpumon_rank *best = NULL;
	int best_score = -1;
	for (size_t i = 0; i < r->nprocs; i++) {
		const gpumon_rank *k = &r->procs[i].rank;
		if (gpumon__worker_rank(r->procs[i].flags, k) < 0)
			continue;
		int score = k->job_id[0] ? 2 : k->master[0] ? 1 : 0;
		if (score > best_score)
			best = k, best_score = score;
	}
	if (best)
		*out = *best;
	return best != NULL;
}
