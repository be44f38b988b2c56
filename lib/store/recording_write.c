/* SPDX-License-Identifier: MIT */
/* recording_write.c — writing recordings: a run's metadata, devices and records of every kind in
 * one SQLite file, in the schema of schema.h (docs/recording.md, format version 1). Writes are
 * batched into transactions committed once the last commit is 200 ms old. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sql.h"

#include "../internal.h"

#include "recording_mig.h"
#include "recording_owner.h"
#include "schema.h"

#define COMMIT_AFTER_NS 200000000ull
#define BUSY_TIMEOUT_MS 1000

static const char schema_sql[] = REC_SCHEMA_SQL;

/* The statements a recording keeps prepared, in the order of stmt_sql[]. */
enum {
	ST_BEGIN,
	ST_COMMIT,
	ST_META,
	ST_DEVICE,
	ST_DEVICE_LOST,
	ST_DSAMPLE,
	ST_PSAMPLE,
	ST_PROC_NEW,
	ST_PROC_INFO,
	ST_PROC_GONE,
	ST_SOURCE,
	ST_FSAMPLE,
	ST_EVENT,
	ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_META] = "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
    [ST_DEVICE] = "INSERT INTO devices (dev, uuid, name, pci_bus_id, memory_total_bytes, lost_t_ns)"
		  " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_DEVICE_LOST] = "UPDATE devices SET lost_t_ns = ?2 WHERE dev = ?1 AND lost_t_ns IS NULL",
    [ST_DSAMPLE] = "INSERT INTO device_samples VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
		   " ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
    [ST_PSAMPLE] = "INSERT INTO process_samples (t_ns, dev, pid, used_bytes, gone)"
		   " VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_PROC_NEW] = "INSERT INTO processes (dev, pid, first_t_ns, gone_t_ns, flags, foreign_pid, uid,"
		    " user, name, command, gpu_instance_id, compute_instance_id, ppid, " REC_OWNER_COLUMNS ", "
		    REC_RANK_COLUMNS ")"
		    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19,"
		    " ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)",
    [ST_PROC_INFO] = "UPDATE processes SET flags = ?5, foreign_pid = ?6, uid = ?7, user = ?8, name = ?9,"
		     " command = ?10, gpu_instance_id = ?11, compute_instance_id = ?12, ppid = ?13, " REC_OWNER_SET
		     ", " REC_RANK_SET " WHERE rowid = ?1",
    [ST_PROC_GONE] = "UPDATE processes SET gone_t_ns = ?2 WHERE rowid = ?1",
    [ST_SOURCE] =
	"INSERT INTO framework_sources (pid, device, framework, first_t_ns) VALUES (?1, ?2, ?3, ?4)",
    [ST_FSAMPLE] = "INSERT INTO framework_samples (t_ns, source, step, allocated_bytes, reserved_bytes,"
		   " max_allocated_bytes, limit_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_EVENT] = "INSERT INTO events (t_ns, kind, text, dev) VALUES (?1, ?2, ?3, ?4)",
};

/* A process listed on a device and not yet gone: its row in `processes`. */
struct appearance {
	unsigned dev, pid;
	unsigned flags;    /* the descriptive flags stored in the row (USED_KNOWN left out) */
	uint64_t identity; /* a hash of the user, name and command line stored */
	sqlite3_int64 row;
	gpumon_rank rank;  /* the rank stored (flags says whether the environment was read) */
};

/* A stream of framework samples: one (pid, device, framework) and its row in framework_sources. */
struct source {
	unsigned pid;
	int device;
	char framework[sizeof(((gpumon_framework_sample *)0)->framework)];
	sqlite3_int64 id;
};

/*
 * Thread-safety: one thread at a time may use a recording (calls on it are not synchronised);
 * different recordings are independent. The gpumon handle is read only by create.
 */
struct gpumon_recording {
	sqlite3 *db;
	sqlite3_stmt *st[ST_COUNT];
	char *path;
	int status;  /* the first failure: once set, every write returns it at once */
	int finished; /* gpumon_recording_finish was called */
	int claimed; /* we created the file: a failed create removes it */
	int in_tx;   /* a transaction is open */
	uint64_t start_mono_ns;
	gpumon_run_meta meta;  /* as written (gpumon_recording_meta); strings owned below */
	char *meta_text[5];
	uint64_t last_commit_ns;
	unsigned ndev;
	struct appearance *procs;
	size_t nprocs, procs_cap;
	struct source *sources;
	size_t nsources, sources_cap, last_source;
	char msg[512];
};

__attribute__((format(printf, 3, 4))) static int seterr(gpumon_recording *r, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->msg, sizeof r->msg, fmt, ap);
	va_end(ap);
	return status;
}

/* Writes the message for SQLite's failure rc: it names the path and says "disk full" when the
 * disk is full. Call it before the failed statement is reset. */
static void describe(gpumon_recording *r, int rc)
{
	/* the errno of the last system call SQLite made: only meaningful for an I/O failure */
	int e =
	    (rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN ? sqlite3_system_errno(r->db) : 0;
	char ebuf[128];
	if (rc == SQLITE_FULL || e == ENOSPC || e == EDQUOT)
		seterr(r, 0, "recording %s: disk full", r->path);
	else if (e)
		seterr(r, 0, "recording %s: %s (%s)", r->path, sqlite3_errmsg(r->db),
		       strerror_r(e, ebuf, sizeof ebuf));
	else
		seterr(r, 0, "recording %s: %s", r->path, sqlite3_errmsg(r->db));
}

/* Puts the recording in the failed state: the open transaction is rolled back, so that what was
 * committed stays as it was, and every later write returns GPUMON_E_IO at once. */
static int give_up(gpumon_recording *r)
{
	r->status = GPUMON_E_IO;
	if (!sqlite3_get_autocommit(r->db))
		sqlite3_exec(r->db, "ROLLBACK", NULL, NULL, NULL);
	r->in_tx = 0;
	return r->status;
}

static int fail(gpumon_recording *r, int rc)
{
	if (r->status)
		return r->status;
	describe(r, rc);
	return give_up(r);
}

/* Runs a prepared statement to its end and resets it; 0, or the failure. */
static int run(gpumon_recording *r, int which)
{
	sqlite3_stmt *s = r->st[which];
	int rc = sqlite3_step(s);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
		sqlite3_reset(s);
		return GPUMON_OK;
	}
	if (!r->status)
		describe(r, rc);
	sqlite3_reset(s);
	return give_up(r);
}

/* SQLite integers are signed 64-bit: larger values (never seen in practice) are clamped. */
static void bind_u64(sqlite3_stmt *s, int i, uint64_t v)
{
	sqlite3_bind_int64(s, i, v > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)v);
}

/* Binds v, or NULL when the value is absent ("not available" is never 0). */
static void bind_opt(sqlite3_stmt *s, int i, int known, uint64_t v)
{
	if (known)
		bind_u64(s, i, v);
	else
		sqlite3_bind_null(s, i);
}

/* Binds the text of a fixed-size field (not necessarily NUL-terminated), or NULL when unknown
 * or empty. The text must stay put until the statement has run. */
static void bind_field(sqlite3_stmt *s, int i, int known, const char *text, size_t cap)
{
	size_t len = known ? strnlen(text, cap) : 0;
	if (len)
		sqlite3_bind_text(s, i, text, (int)len, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, i);
}

/* CLOCK_REALTIME in ns (gpumon__now_ns() is the monotonic one). */
static uint64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int begin(gpumon_recording *r)
{
	if (r->in_tx)
		return GPUMON_OK;
	int st = run(r, ST_BEGIN);
	r->in_tx = st == GPUMON_OK;
	return st;
}

/* Commits the open transaction (if any), unless the file was removed or renamed meanwhile:
 * rows written there would be lost to every reader. */
static int commit_now(gpumon_recording *r, uint64_t now)
{
	int moved = 0;
	if (sqlite3_file_control(r->db, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK && moved) {
		seterr(r, 0, "recording %s: the file was removed or renamed", r->path);
		return give_up(r);
	}
	r->last_commit_ns = now;
	if (!r->in_tx)
		return GPUMON_OK;
	r->in_tx = 0;
	return run(r, ST_COMMIT);
}

/* Commits when the last commit is 200 ms old, so that a kill loses at most the last 0.2 s
 * written (plus the time until the next write call). */
static int maybe_commit(gpumon_recording *r)
{
	uint64_t now = gpumon__now_ns();
	return now - r->last_commit_ns >= COMMIT_AFTER_NS ? commit_now(r, now) : GPUMON_OK;
}

/* meta rows: an integer, or a text (NULL text: no row). */
static int meta_int(gpumon_recording *r, const char *key, int64_t v)
{
	sqlite3_bind_text(r->st[ST_META], 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(r->st[ST_META], 2, v);
	return run(r, ST_META);
}

static int meta_text(gpumon_recording *r, const char *key, const char *v)
{
	if (!v)
		return GPUMON_OK;
	sqlite3_bind_text(r->st[ST_META], 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_text(r->st[ST_META], 2, v, -1, SQLITE_STATIC);
	return run(r, ST_META);
}

/* The run's metadata at start. The wall clock is read on both sides of the monotonic one so
 * that the pair is as close as two clock reads allow. */
static int write_start_meta(gpumon_recording *r, gpumon *g, const gpumon_run_meta *info)
{
	char host[256] = "", driver[96], nvml[96];
	uint64_t w0 = wall_ns(), mono = gpumon__now_ns(), w1 = wall_ns();
	uint64_t wall = w0 + (w1 - w0) / 2;
	if (info && info->start_mono_ns && info->start_wall_ns) { /* the caller read the clocks at its start */
		mono = info->start_mono_ns;
		wall = info->start_wall_ns;
	}
	if (gethostname(host, sizeof host - 1) != 0)
		host[0] = '\0';
	int st = meta_int(r, "format_version", REC_FORMAT_VERSION);
	if (!st)
		st = meta_text(r, "gpumon_version", gpumon_version());
	if (!st)
		st = meta_text(r, "host", host[0] ? host : NULL);
	if (!st)
		st = meta_text(r, "driver_version",
			       gpumon_driver_version(g, driver, sizeof driver) ? NULL : driver);
	if (!st)
		st = meta_text(r, "nvml_version", gpumon_nvml_version(g, nvml, sizeof nvml) ? NULL : nvml);
	if (!st)
		st = meta_text(r, "nvml_library", gpumon_nvml_path(g));
	if (!st)
		st = meta_text(r, "kind", info && info->kind ? info->kind : "record");
	if (!st)
		st = meta_text(r, "command", info ? info->command : NULL);
	if (!st)
		st = meta_text(r, "settings", info ? info->settings : NULL);
	if (!st && info && info->job_pid > 0)
		st = meta_int(r, "job_pid", (int64_t)info->job_pid);
	if (!st && info && info->limit_bytes > 0 && info->limit_bytes <= INT64_MAX)
		st = meta_int(r, "limit_bytes", (int64_t)info->limit_bytes);
	if (!st)
		st = meta_int(r, "start_wall_ns", (int64_t)wall);
	if (!st)
		st = meta_int(r, "start_mono_ns", (int64_t)mono);
	r->start_mono_ns = mono;
	/* what gpumon_recording_meta says */
	const char *text[5] = {info && info->kind ? info->kind : "record", info ? info->command : NULL,
			       info ? info->settings : NULL, host[0] ? host : NULL,
			       gpumon_driver_version(g, driver, sizeof driver) ? NULL : driver};
	for (int i = 0; i < 5 && !st; i++)
		if (text[i] && !(r->meta_text[i] = strdup(text[i])))
			st = seterr(r, GPUMON_E_NOMEM, "recording %s: out of memory", r->path);
	r->meta = (gpumon_run_meta){.size = sizeof r->meta, .kind = r->meta_text[0], .command = r->meta_text[1],
				    .settings = r->meta_text[2], .host = r->meta_text[3],
				    .driver_version = r->meta_text[4], .job_pid = info ? info->job_pid : 0,
				    .start_mono_ns = mono, .start_wall_ns = wall, .exit_status = -1,
				    .limit_bytes = info ? info->limit_bytes : 0};
	return st;
}

static int write_devices(gpumon_recording *r, gpumon *g)
{
	sqlite3_stmt *s = r->st[ST_DEVICE];
	int st = GPUMON_OK;
	r->ndev = gpumon_device_count(g);
	for (unsigned i = 0; i < r->ndev && !st; i++) {
		gpumon_device_info d;
		if (gpumon_device_info_get(g, i, &d) != GPUMON_OK)
			continue;
		sqlite3_bind_int64(s, 1, i);
		bind_field(s, 2, d.present & GPUMON_INFO_UUID, d.uuid, sizeof d.uuid);
		bind_field(s, 3, d.present & GPUMON_INFO_NAME, d.name, sizeof d.name);
		bind_field(s, 4, d.present & GPUMON_INFO_PCI_BUS_ID, d.pci_bus_id, sizeof d.pci_bus_id);
		bind_opt(s, 5, d.present & GPUMON_INFO_MEMORY_TOTAL, d.memory_total_bytes);
		bind_opt(s, 6, d.lost, r->start_mono_ns); /* lost before the start */
		st = run(r, ST_DEVICE);
	}
	int rc = st ? SQLITE_OK : gpumon__rec_write_mig(r->db, g, r->ndev);
	return rc == SQLITE_OK ? st : fail(r, rc);
}

/* Claims path with O_EXCL, so that nothing is ever overwritten, then opens it with SQLite. */
static int open_file(gpumon_recording *r)
{
	char ebuf[256];
	if (gpumon__sqlite_load(ebuf, sizeof ebuf) != 0)
		return seterr(r, GPUMON_E_NO_LIBRARY, "recording %s: %s", r->path, ebuf);
	int fd = open(r->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0 && errno == EEXIST)
		return seterr(r, GPUMON_E_EXISTS,
			      "recording %s: the file exists (a recording never overwrites one)", r->path);
	if (fd < 0)
		return seterr(r, GPUMON_E_IO, "recording %s: %s", r->path,
			      strerror_r(errno, ebuf, sizeof ebuf));
	close(fd);
	r->claimed = 1;
	int rc = sqlite3_open_v2(r->path, &r->db, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK)
		return r->db ? fail(r, rc)
			     : seterr(r, GPUMON_E_NOMEM, "recording %s: out of memory", r->path);
	return GPUMON_OK;
}

/* Journal and durability settings, the schema and the prepared statements. */
static int setup(gpumon_recording *r)
{
	sqlite3_busy_timeout(r->db, BUSY_TIMEOUT_MS);
	/* WAL: readers see the committed rows while the file is written, and a kill leaves a file
	 * that opens; NORMAL: a commit is one write to the WAL, no fsync (a power cut may lose the
	 * last commits, a process crash loses none). */
	int rc =
	    sqlite3_exec(r->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(r->db, "BEGIN;", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(r->db, schema_sql, NULL, NULL, NULL);
	for (int i = 0; i < ST_COUNT && rc == SQLITE_OK; i++)
		rc = sqlite3_prepare_v3(r->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT, &r->st[i], NULL);
	if (rc != SQLITE_OK)
		return fail(r, rc);
	r->in_tx = 1;
	return GPUMON_OK;
}

static void close_db(gpumon_recording *r)
{
	for (int i = 0; i < ST_COUNT; i++) {
		sqlite3_finalize(r->st[i]);
		r->st[i] = NULL;
	}
	sqlite3_close(r->db);
	r->db = NULL;
}

/* Removes the file a failed create made, with the WAL files SQLite may have left beside it. */
static void remove_files(const char *path)
{
	size_t len = strlen(path);
	char *aux = malloc(len + 5);
	unlink(path);
	if (!aux)
		return;
	memcpy(aux, path, len);
	memcpy(aux + len, "-wal", 5);
	unlink(aux);
	memcpy(aux + len, "-shm", 5);
	unlink(aux);
	free(aux);
}

int gpumon_recording_create(gpumon *g, const char *path, const gpumon_run_meta *info, gpumon_recording **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	gpumon_recording *r = calloc(1, sizeof *r);
	*out = r;
	if (!r)
		return GPUMON_E_NOMEM;
	if (!g || !path || !path[0])
		return r->status = seterr(r, GPUMON_E_INVAL, "recording: %s",
					  g ? "no file name" : "no gpumon handle");
	r->path = strdup(path);
	if (!r->path)
		return r->status = seterr(r, GPUMON_E_NOMEM, "recording %s: out of memory", path);
	int st = open_file(r);
	if (!st)
		st = setup(r);
	if (!st)
		st = write_start_meta(r, g, info);
	if (!st)
		st = write_devices(r, g);
	if (!st)
		st = commit_now(r, gpumon__now_ns());
	if (st) {
		r->status = st;
		if (r->claimed) { /* an unfinished file is of no use: give the name back */
			close_db(r);
			remove_files(r->path);
		}
	}
	return st;
}

const gpumon_run_meta *gpumon_recording_meta(const gpumon_recording *r)
{
	static const gpumon_run_meta none = {.size = sizeof none, .exit_status = -1};
	return r && r->meta.size ? &r->meta : &none;
}

const char *gpumon_recording_errmsg(const gpumon_recording *r)
{
	return r ? r->msg : "";
}

/* The open appearance of (dev, pid), or NULL. */
static struct appearance *find_appearance(gpumon_recording *r, unsigned dev, unsigned pid)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].dev == dev && r->procs[i].pid == pid)
			return &r->procs[i];
	return NULL;
}

/* Grows *arr (elements of size) to hold one more than *len; 0 or GPUMON_E_NOMEM. */
static int grow(void **arr, size_t *cap, size_t len, size_t size)
{
	if (len < *cap)
		return GPUMON_OK;
	size_t ncap = *cap ? *cap * 2 : 8;
	if (ncap > SIZE_MAX / size)
		return GPUMON_E_NOMEM;
	void *p = realloc(*arr, ncap * size);
	if (!p)
		return GPUMON_E_NOMEM;
	*arr = p;
	*cap = ncap;
	return GPUMON_OK;
}

/* Binds ?5..?30 of ST_PROC_NEW / ST_PROC_INFO: what is known of the process. */
static void bind_process_info(sqlite3_stmt *s, const gpumon_process *p)
{
	int user = p->flags & GPUMON_PROC_USER_KNOWN, mig = p->flags & GPUMON_PROC_MIG;
	sqlite3_bind_int64(s, 5, p->flags & ~(unsigned)GPUMON_PROC_USED_KNOWN);
	sqlite3_bind_int(s, 6, !!(p->flags & GPUMON_PROC_FOREIGN));
	bind_opt(s, 7, user, p->uid);
	bind_field(s, 8, user, p->user, sizeof p->user);
	bind_field(s, 9, p->flags & GPUMON_PROC_NAME_KNOWN, p->name, sizeof p->name);
	bind_field(s, 10, p->flags & GPUMON_PROC_CMDLINE_KNOWN, p->cmdline, sizeof p->cmdline);
	bind_opt(s, 11, mig, p->gpu_instance_id);
	bind_opt(s, 12, mig, p->compute_instance_id);
	bind_opt(s, 13, p->flags & GPUMON_PROC_PPID_KNOWN, p->ppid);
	gpumon__rec_bind_owner(s, 14, &p->owner);
	gpumon__rec_bind_rank(s, 24, p->flags & GPUMON_PROC_RANK_KNOWN ? &p->rank : NULL);
}

/* A new row of `processes`; first_t_ns is NULL for a process seen only leaving. */
static int insert_process(gpumon_recording *r, const gpumon_record *rec, int gone, sqlite3_int64 *row)
{
	sqlite3_stmt *s = r->st[ST_PROC_NEW];
	sqlite3_bind_int64(s, 1, rec->dev);
	sqlite3_bind_int64(s, 2, rec->process->pid);
	bind_opt(s, 3, !gone, rec->t_ns);
	bind_opt(s, 4, gone, rec->t_ns);
	bind_process_info(s, rec->process);
	int st = run(r, ST_PROC_NEW);
	*row = sqlite3_last_insert_rowid(r->db);
	return st;
}

/* FNV-1a over the texts a row stores of a process (a pid listed between fork and exec has its
 * parent's command line, then its own; and its parent's cgroup until its runtime moves it). */
static uint64_t identity(const gpumon_process *p)
{
	uint64_t h = 0xcbf29ce484222325ull;
	const char *parts[3] = {p->user, p->name, p->cmdline};
	const size_t caps[3] = {sizeof p->user, sizeof p->name, sizeof p->cmdline};
	for (int i = 0; i < 3; i++) {
		for (size_t k = 0; k < caps[i] && parts[i][k]; k++)
			h = (h ^ (unsigned char)parts[i][k]) * 0x100000001b3ull;
		h = (h ^ 0xff) * 0x100000001b3ull;
	}
	h = gpumon__rec_owner_hash(h, &p->owner);
	return p->flags & GPUMON_PROC_RANK_KNOWN ? gpumon__rec_rank_hash(h, &p->rank) : h;
}

/* A process listed: opens its appearance, or refreshes what is known of it when that changed. */
static int process_listed(gpumon_recording *r, const gpumon_record *rec)
{
	struct appearance *a = find_appearance(r, rec->dev, rec->process->pid);
	/* a process listed once it has left /proc (exiting, the driver not yet told) says less of
	   itself than the row holds: what was learnt of it stays */
	if (a && (rec->process->flags & GPUMON_PROC_FOREIGN) && !(a->flags & GPUMON_PROC_FOREIGN))
		return GPUMON_OK;
	gpumon_process p = *rec->process;
	/* and a worker's rank, once known, stays (a listing between fork and exec, or one that could
	   not read the environment, does not erase it) */
	if (a && gpumon__worker_rank(a->flags, &a->rank) >= 0 && gpumon_process_rank(&p) < 0) {
		p.rank = a->rank;
		p.flags |= GPUMON_PROC_RANK_KNOWN;
	}
	unsigned flags = p.flags & ~(unsigned)GPUMON_PROC_USED_KNOWN;
	uint64_t id = identity(&p);
	if (a && a->flags == flags && a->identity == id)
		return GPUMON_OK;
	if (a) {
		sqlite3_stmt *s = r->st[ST_PROC_INFO];
		sqlite3_bind_int64(s, 1, a->row);
		bind_process_info(s, &p);
		a->flags = flags;
		a->identity = id;
		a->rank = p.rank;
		return run(r, ST_PROC_INFO);
	}
	if (grow((void **)&r->procs, &r->procs_cap, r->nprocs, sizeof *r->procs) != GPUMON_OK)
		return seterr(r, GPUMON_E_NOMEM, "recording %s: out of memory", r->path);
	a = &r->procs[r->nprocs];
	*a = (struct appearance){.dev = rec->dev, .pid = rec->process->pid, .flags = flags, .identity = id,
				 .rank = p.rank};
	int st = insert_process(r, rec, 0, &a->row);
	r->nprocs += st == GPUMON_OK;
	return st;
}

/* A process gone: closes its appearance (or records one seen only leaving). */
static int process_gone(gpumon_recording *r, const gpumon_record *rec)
{
	struct appearance *a = find_appearance(r, rec->dev, rec->process->pid);
	if (!a) {
		sqlite3_int64 row;
		return insert_process(r, rec, 1, &row);
	}
	sqlite3_stmt *s = r->st[ST_PROC_GONE];
	sqlite3_bind_int64(s, 1, a->row);
	bind_u64(s, 2, rec->t_ns);
	*a = r->procs[--r->nprocs];
	return run(r, ST_PROC_GONE);
}

static int write_process(gpumon_recording *r, const gpumon_record *rec)
{
	int gone = rec->kind == GPUMON_REC_PROCESS_GONE;
	int st = gone ? process_gone(r, rec) : process_listed(r, rec);
	if (st)
		return st;
	sqlite3_stmt *s = r->st[ST_PSAMPLE];
	bind_u64(s, 1, rec->t_ns);
	sqlite3_bind_int64(s, 2, rec->dev);
	sqlite3_bind_int64(s, 3, rec->process->pid);
	bind_opt(s, 4, !gone && (rec->process->flags & GPUMON_PROC_USED_KNOWN), rec->process->used_bytes);
	sqlite3_bind_int(s, 5, gone);
	return run(r, ST_PSAMPLE);
}

static int write_device(gpumon_recording *r, const gpumon_record *rec)
{
	const gpumon_device_sample *d = &rec->sample;
	sqlite3_stmt *s = r->st[ST_DSAMPLE];
	unsigned p = d->present;
	int mem = p & GPUMON_F_MEMORY, interval = mem && rec->interval_samples > 0;
	bind_u64(s, 1, rec->t_ns);
	sqlite3_bind_int64(s, 2, rec->dev);
	bind_opt(s, 3, mem && d->memory_api != GPUMON_MEMAPI_NONE, d->memory_api);
	bind_opt(s, 4, mem, d->memory_used_bytes);
	bind_opt(s, 5, mem, d->memory_free_bytes);
	bind_opt(s, 6, p & GPUMON_F_MEM_RESERVED, d->memory_reserved_bytes);
	bind_opt(s, 7, mem, d->memory_total_bytes);
	bind_opt(s, 8, interval, rec->used_min_bytes);
	bind_opt(s, 9, interval, rec->used_max_bytes);
	bind_opt(s, 10, interval, rec->used_max_t_ns);
	bind_opt(s, 11, interval, rec->interval_samples);
	bind_opt(s, 12, p & GPUMON_F_UTIL_GPU, d->util_gpu_pct);
	bind_opt(s, 13, p & GPUMON_F_UTIL_MEMORY, d->util_memory_pct);
	bind_opt(s, 14, p & GPUMON_F_TEMPERATURE, d->temperature_c);
	bind_opt(s, 15, p & GPUMON_F_POWER, d->power_mw);
	bind_opt(s, 16, p & GPUMON_F_ENERGY, d->energy_mj);
	bind_opt(s, 17, p & GPUMON_F_CLOCK_SM, d->clock_sm_mhz);
	bind_opt(s, 18, p & GPUMON_F_CLOCK_MEM, d->clock_mem_mhz);
	return run(r, ST_DSAMPLE);
}

/* A lost GPU: devices.lost_t_ns, and an event so that timelines show it. */
static int write_lost(gpumon_recording *r, const gpumon_record *rec)
{
	char text[48];
	sqlite3_bind_int64(r->st[ST_DEVICE_LOST], 1, rec->dev);
	bind_u64(r->st[ST_DEVICE_LOST], 2, rec->t_ns);
	int st = run(r, ST_DEVICE_LOST);
	if (st)
		return st;
	snprintf(text, sizeof text, "GPU %u is lost", rec->dev);
	sqlite3_stmt *s = r->st[ST_EVENT];
	bind_u64(s, 1, rec->t_ns);
	sqlite3_bind_text(s, 2, REC_LOST_EVENT, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
	sqlite3_bind_null(s, 4); /* the reader knows the lost GPU from devices.lost_t_ns */
	return run(r, ST_EVENT);
}

/* Checks a batch before any of it is written, so that a bad record leaves the file as it was. */
static int check_records(gpumon_recording *r, const gpumon_record *recs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int k = recs[i].kind;
		if (k < GPUMON_REC_DEVICE || k > GPUMON_REC_JOB)
			return seterr(r, GPUMON_E_INVAL, "recording %s: record %zu has an unknown kind %d",
				      r->path, i, k);
		if (k <= GPUMON_REC_LOST && recs[i].dev >= r->ndev)
			return seterr(r, GPUMON_E_INVAL,
				      "recording %s: record %zu names GPU %u, not in the recording", r->path,
				      i, recs[i].dev);
		if ((k == GPUMON_REC_PROCESS || k == GPUMON_REC_PROCESS_GONE || k == GPUMON_REC_JOB) && !recs[i].process)
			return seterr(r, GPUMON_E_INVAL, "recording %s: record %zu is about a process and names none",
				      r->path, i);
		if (k == GPUMON_REC_EVENT && (!recs[i].event_kind || !recs[i].event_kind[0]))
			return seterr(r, GPUMON_E_INVAL, "recording %s: record %zu is an event without a kind",
				      r->path, i);
		/* the format keeps a GPU's used memory with its total and free: refused, not lost */
		if (k == GPUMON_REC_DEVICE && (recs[i].sample.present & GPUMON_F_MEMORY_USED) &&
		    !(recs[i].sample.present & GPUMON_F_MEMORY))
			return seterr(r, GPUMON_E_INVAL,
				      "recording %s: record %zu has the used memory of GPU %u without its total and "
				      "free, which a recording does not keep",
				      r->path, i, recs[i].dev);
	}
	return GPUMON_OK;
}

/* An event; dev: the GPU it names (an event of the sampler's about one GPU), or -1. */
static int write_event(gpumon_recording *r, uint64_t t_ns, const char *kind, const char *text, int64_t dev)
{
	sqlite3_stmt *s = r->st[ST_EVENT];
	bind_u64(s, 1, t_ns);
	sqlite3_bind_text(s, 2, kind, -1, SQLITE_STATIC);
	if (text)
		sqlite3_bind_text(s, 3, text, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(s, 3);
	if (dev >= 0)
		sqlite3_bind_int64(s, 4, dev);
	else
		sqlite3_bind_null(s, 4);
	return run(r, ST_EVENT);
}

/* "pid N", or "pid N: the command" when the record says it (for people reading the file). */
static int write_job(gpumon_recording *r, const gpumon_record *rec)
{
	char text[sizeof rec->process->cmdline + 32];
	const gpumon_process *p = rec->process;
	if ((p->flags & GPUMON_PROC_CMDLINE_KNOWN) && p->cmdline[0])
		snprintf(text, sizeof text, "pid %u: %.*s", p->pid, (int)sizeof p->cmdline, p->cmdline);
	else
		snprintf(text, sizeof text, "pid %u", p->pid);
	return write_event(r, rec->t_ns, REC_JOB_EVENT, text, -1);
}

static int write_framework(gpumon_recording *r, const gpumon_record *rec);

int gpumon_recording_write(gpumon_recording *r, const gpumon_record *recs, size_t n)
{
	if (!r)
		return GPUMON_E_INVAL;
	if (r->status)
		return r->status;
	if (r->finished)
		return seterr(r, GPUMON_E_INVAL, "recording %s: written after its end", r->path);
	if (n && !recs)
		return seterr(r, GPUMON_E_INVAL, "recording %s: no records", r->path);
	int st = check_records(r, recs, n);
	if (!st && n)
		st = begin(r);
	for (size_t i = 0; i < n && !st; i++) {
		const gpumon_record *rec = &recs[i];
		switch (rec->kind) {
		case GPUMON_REC_DEVICE: st = write_device(r, rec); break;
		case GPUMON_REC_LOST: st = write_lost(r, rec); break;
		case GPUMON_REC_FRAMEWORK: st = write_framework(r, rec); break;
		case GPUMON_REC_EVENT:
			st = write_event(r, rec->t_ns, rec->event_kind, rec->event_text,
					 gpumon__event_names_gpu(rec->event_kind) && rec->dev < r->ndev ? (int64_t)rec->dev : -1);
			break;
		case GPUMON_REC_JOB: st = write_job(r, rec); break;
		default: st = write_process(r, rec); break;
		}
	}
	return st ? st : maybe_commit(r);
}

/* The id of f's (pid, device, framework) in framework_sources, added on first use. */
static int source_id(gpumon_recording *r, const gpumon_framework_sample *f, sqlite3_int64 *id)
{
	size_t flen = strnlen(f->framework, sizeof f->framework);
	int device = f->device < 0 ? -1 : f->device;
	for (size_t k = 0; k < r->nsources; k++) {
		size_t i = (r->last_source + k) % r->nsources; /* the last one used is the likely one */
		struct source *c = &r->sources[i];
		if (c->pid == f->pid && c->device == device &&
		    !strncmp(c->framework, f->framework, sizeof c->framework)) {
			r->last_source = i;
			*id = c->id;
			return GPUMON_OK;
		}
	}
	if (grow((void **)&r->sources, &r->sources_cap, r->nsources, sizeof *r->sources) != GPUMON_OK)
		return seterr(r, GPUMON_E_NOMEM, "recording %s: out of memory", r->path);
	struct source *c = &r->sources[r->nsources];
	*c = (struct source){.pid = f->pid, .device = device};
	memcpy(c->framework, f->framework, flen);
	sqlite3_stmt *s = r->st[ST_SOURCE];
	sqlite3_bind_int64(s, 1, f->pid);
	bind_opt(s, 2, device >= 0, (uint64_t)device);
	bind_field(s, 3, 1, c->framework, sizeof c->framework);
	bind_u64(s, 4, f->t_ns);
	int st = run(r, ST_SOURCE);
	if (st)
		return st;
	c->id = *id = sqlite3_last_insert_rowid(r->db);
	r->last_source = r->nsources++;
	return GPUMON_OK;
}

static int write_framework(gpumon_recording *r, const gpumon_record *rec)
{
	const gpumon_framework_sample *f = &rec->framework;
	sqlite3_int64 id = 0;
	int st = source_id(r, f, &id);
	if (st)
		return st;
	sqlite3_stmt *s = r->st[ST_FSAMPLE];
	bind_u64(s, 1, rec->t_ns);
	sqlite3_bind_int64(s, 2, id);
	bind_opt(s, 3, f->step >= 0, (uint64_t)f->step);
	bind_opt(s, 4, f->allocated_known, f->allocated_bytes);
	bind_opt(s, 5, f->reserved_known, f->reserved_bytes);
	bind_opt(s, 6, f->max_allocated_known, f->max_allocated_bytes);
	bind_opt(s, 7, f->limit_bytes > 0, f->limit_bytes);
	return run(r, ST_FSAMPLE);
}

int gpumon_recording_commit(gpumon_recording *r)
{
	if (!r)
		return GPUMON_E_INVAL;
	if (r->status)
		return r->status;
	return commit_now(r, gpumon__now_ns());
}

/* The end of the run in meta, committed; then the WAL is moved into the main file and the file
 * goes back to a rollback journal, so that a finished recording is one self-contained file that
 * opens even where a -wal/-shm pair cannot be created (read-only media). A reader still attached
 * keeps it in WAL mode, which is harmless. */
static int finish(gpumon_recording *r, int exit_status)
{
	uint64_t mono = gpumon__now_ns(), wall = wall_ns();
	int st = begin(r);
	if (!st)
		st = meta_int(r, "end_wall_ns", (int64_t)wall);
	if (!st)
		st = meta_int(r, "end_mono_ns", (int64_t)mono);
	if (!st && exit_status >= 0)
		st = meta_int(r, "exit_status", exit_status);
	if (!st) {
		r->meta.end_mono_ns = mono;
		r->meta.exit_status = exit_status >= 0 ? exit_status : -1;
	}
	if (!st)
		st = commit_now(r, mono);
	if (st)
		return st;
	int rc = sqlite3_wal_checkpoint_v2(r->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
		return fail(r, rc);
	sqlite3_exec(r->db, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
	return GPUMON_OK;
}

int gpumon_recording_finish(gpumon_recording *r, int exit_status)
{
	if (!r)
		return GPUMON_E_INVAL;
	if (r->finished)
		return r->status;
	r->finished = 1;
	if (!r->status)
		r->status = finish(r, exit_status);
	return r->status;
}

void gpumon_recording_destroy(gpumon_recording *r)
{
	if (!r)
		return;
	if (!r->finished && !r->status && r->db && r->in_tx) /* keep what was written, without an end */
		commit_now(r, gpumon__now_ns());
	close_db(r);
	for (int i = 0; i < 5; i++)
		free(r->meta_text[i]);
	free(r->procs);
	free(r->sources);
	free(r->path);
	free(r);
}
