/* SPDX-License-Identifier: MIT */
/* rec_util.h — what the recording tests share: records of every kind built with known figures, a
 * fake GPU table, and a second SQLite connection that reads (or damages) a file as another program
 * would. Include after gpumon.h and tap.h. */
#ifndef GPUMON_REC_UTIL_H
#define GPUMON_REC_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>

#include <sqlite3.h>

#define H200                                                                                                 \
	"gpu 0 name=\"NVIDIA H200\" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 "     \
	"total=150754820096 reserved=644939776 used=1GiB\n"
/* A second GPU whose name the driver does not tell. */
#define TWO_GPUS H200 "gpu 1 total=80GiB\nerror nvmlDeviceGetName UNKNOWN gpu=1\n"

#define GiB	       (1ull << 30)
#define MiB	       (1ull << 20)
#define MS	       1000000ull
#define NULL_VALUE     LLONG_MIN /* what q() returns for SQL NULL */
#define APPLICATION_ID 0x4750554d

#define KNOWN_PROC                                                                                           \
	(GPUMON_PROC_COMPUTE | GPUMON_PROC_USED_KNOWN | GPUMON_PROC_USER_KNOWN | GPUMON_PROC_NAME_KNOWN |    \
	 GPUMON_PROC_CMDLINE_KNOWN)

static char tmpdir[64];

/* Makes the test's scratch directory; bails out when it cannot. */
static inline void make_tmpdir(const char *name)
{
	snprintf(tmpdir, sizeof tmpdir, "/tmp/gpumon-%s-XXXXXX", name);
	if (!mkdtemp(tmpdir)) {
		printf("Bail out! mkdtemp: %s\n", strerror(errno));
		exit(1);
	}
}

/* A path in the test's directory (four at a time stay valid). */
static inline const char *tmp_path(const char *name)
{
	static char buf[4][128];
	static int k;
	char *p = buf[k++ % 4];
	snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
	return p;
}

static inline void remove_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[512];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
			if (unlink(p) != 0)
				remove_dir(p);
		}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* A connection of another program to the file. */
static inline sqlite3 *db_open(const char *path)
{
	sqlite3 *db = NULL;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		printf("# cannot open %s: %s\n", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 2000);
	return db;
}

/* The first column of the first row of sql: NULL_VALUE for NULL, NULL_VALUE + 1 on error. */
static inline long long q(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	long long v = NULL_VALUE + 1;
	if (!db || sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		printf("# %s: %s\n", sql, db ? sqlite3_errmsg(db) : "no database");
		return v;
	}
	int rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		v = sqlite3_column_type(s, 0) == SQLITE_NULL ? NULL_VALUE : sqlite3_column_int64(s, 0);
	else
		printf("# %s: %s\n", sql, rc == SQLITE_DONE ? "no row" : sqlite3_errmsg(db));
	sqlite3_finalize(s);
	return v;
}

/* The same for a text column, copied to buf ("(null)" for NULL, "(error)" on error). */
static inline const char *qs(sqlite3 *db, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *s = NULL;
	snprintf(buf, len, "(error)");
	if (db && sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
		const unsigned char *t = sqlite3_column_text(s, 0);
		snprintf(buf, len, "%s", t ? (const char *)t : "(null)");
	} else {
		printf("# %s: %s\n", sql, db ? sqlite3_errmsg(db) : "no database");
	}
	sqlite3_finalize(s);
	return buf;
}

/* Runs sql on the file; 1 when it worked. */
static inline int db_exec(const char *path, const char *sql)
{
	sqlite3 *db = db_open(path);
	char *err = NULL;
	int rc = db ? sqlite3_exec(db, sql, NULL, NULL, &err) : SQLITE_ERROR;
	if (rc != SQLITE_OK)
		printf("# %s: %s\n", sql, err ? err : "cannot open");
	sqlite3_free(err);
	sqlite3_close(db);
	return rc == SQLITE_OK;
}

/* A device record of the H200 with every field but energy, and an interval around it. */
static inline gpumon_record device_rec(unsigned dev, uint64_t t, uint64_t used)
{
	gpumon_record r = {.kind = GPUMON_REC_DEVICE, .dev = dev, .t_ns = t};
	gpumon_device_sample *s = &r.sample;
	s->t_ns = t;
	s->present = GPUMON_F_ALL & ~(unsigned)GPUMON_F_ENERGY;
	s->memory_api = GPUMON_MEMAPI_V2;
	s->memory_total_bytes = 150754820096ull;
	s->memory_reserved_bytes = 644939776ull;
	s->memory_used_bytes = used;
	s->memory_free_bytes = s->memory_total_bytes - s->memory_reserved_bytes - used;
	s->util_gpu_pct = 97;
	s->util_memory_pct = 41;
	s->temperature_c = 63;
	s->power_mw = 612345;
	s->clock_sm_mhz = 1980;
	s->clock_mem_mhz = 3201;
	r.used_min_bytes = used - 4096;
	r.used_max_bytes = used + 4096;
	r.used_max_t_ns = t - 3 * MS;
	r.interval_samples = 100;
	return r;
}

/* A device record holding only the memory figures of the v1 call (no interval). */
static inline gpumon_record device_rec_v1(unsigned dev, uint64_t t)
{
	gpumon_record r = {.kind = GPUMON_REC_DEVICE, .dev = dev, .t_ns = t};
	r.sample.t_ns = t;
	r.sample.present = GPUMON_F_MEMORY;
	r.sample.memory_api = GPUMON_MEMAPI_V1;
	r.sample.memory_total_bytes = 80 * GiB;
	r.sample.memory_used_bytes = 10 * GiB;
	r.sample.memory_free_bytes = 70 * GiB;
	return r;
}

/* A process record; the flags say which of user, name and command line are filled in. Its
 * process stays until the test exits; the caller may change it (process_of). */
static inline gpumon_record process_rec(int kind, unsigned dev, uint64_t t, unsigned pid, uint64_t used,
					unsigned flags)
{
	gpumon_record r = {.kind = kind, .dev = dev, .t_ns = t};
	gpumon_process *p = kept_process();
	r.process = p;
	p->pid = pid;
	p->flags = flags;
	p->used_bytes = used;
	if (flags & GPUMON_PROC_USER_KNOWN) {
		p->uid = 1000;
		snprintf(p->user, sizeof p->user, "alice");
	}
	if (flags & GPUMON_PROC_NAME_KNOWN)
		snprintf(p->name, sizeof p->name, "python");
	if (flags & GPUMON_PROC_CMDLINE_KNOWN)
		snprintf(p->cmdline, sizeof p->cmdline, "python train.py --note \"a, b\"");
	return r;
}

/* A framework record with nothing known but its source; the caller fills in the figures. */
static inline gpumon_record fw_rec(uint64_t t, unsigned pid, int device, int64_t step, const char *name)
{
	gpumon_record r = {.kind = GPUMON_REC_FRAMEWORK, .t_ns = t};
	gpumon_framework_sample *f = &r.framework;
	f->t_ns = t;
	f->pid = pid;
	f->device = device;
	f->step = step;
	snprintf(f->framework, sizeof f->framework, "%s", name);
	return r;
}

static inline gpumon_record event_rec(uint64_t t, const char *kind, const char *text)
{
	gpumon_record r = {.kind = GPUMON_REC_EVENT, .t_ns = t, .event_kind = kind, .event_text = text};
	return r;
}

static inline gpumon_record job_rec(uint64_t t, unsigned pid)
{
	gpumon_record r = {.kind = GPUMON_REC_JOB, .t_ns = t};
	gpumon_process *p = kept_process();
	p->pid = pid;
	r.process = p;
	return r;
}

/* The process of a record these helpers made, to change it. */
static inline gpumon_process *process_of(gpumon_record *r)
{
	return (gpumon_process *)r->process;
}

/* Writes recs and finishes; 0, or the first failure (printed). */
static inline int write_all(gpumon_recording *r, const gpumon_record *recs, size_t n, int exit_status)
{
	int st = gpumon_recording_write(r, recs, n);
	int fin = gpumon_recording_finish(r, exit_status);
	if (st || fin)
		printf("# writing failed: %s\n", gpumon_recording_errmsg(r));
	return st ? st : fin;
}

#endif
