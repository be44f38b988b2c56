/* SPDX-License-Identifier: MIT */
/* recording_read.h — the reader's state, shared by its two files and nothing else:
 * recording_read.c (opening, metadata, the walk in time order) and recording_rows.c (a row of a
 * table into a record, the GPUs and side tables). */
#ifndef GPUMON_STORE_RECORDING_READ_H
#define GPUMON_STORE_RECORDING_READ_H

#include "sql.h"

#include "../internal.h"

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
	gpumon_owner *owner; /* NULL when the file says none (or predates the owner columns) */
	gpumon_rank rank;    /* -1 and "" each when the file says none */
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
	gpumon_process proc; /* the process of the record handed out (valid until the next call) */
	int failed;         /* the file failed under the walk (not damage: an I/O error) */
	int nomem;          /* memory ran out: what is read stops here, said as such, never as damage */
	char damage[2048];   /* what was lost, a sentence for each table at most */
	char msg[512];
};


/* Appends a sentence to what the reader names as lost (gpumon_reader_damage). */
void gpumon__rec_damage(gpumon_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Whether SQLite's status rc means it ran out of memory; if so, notes it in r, so that the reader
 * says "out of memory" and never calls the file damaged for it. */
int gpumon__rec_nomem(gpumon_reader *r, int rc);

/* Whether table has column (one added within the format version). */
int gpumon__rec_has_column(gpumon_reader *r, const char *table, const char *column);

/* The devices table into r->devices (positions 0..n-1). 0, or GPUMON_E_NOMEM. */
int gpumon__rec_read_devices(gpumon_reader *r);

/* The small side tables (process appearances, framework sources), before the walk. */
void gpumon__rec_read_side_tables(gpumon_reader *r);

/* The current row of cursor c into o (o->t_ns set): 1, 0 for a row that names nothing the file
 * knows (skipped), -1 for a row refused for a figure out of range (counted in c). */
int gpumon__rec_fill(gpumon_reader *r, struct cursor *c, gpumon_record *o);

#endif
