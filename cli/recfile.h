/* SPDX-License-Identifier: MIT */
/* recfile.h — reading a recording (docs/recording.md, format 1): opening it read-only with its
 * checks (application id, version, damage), its run metadata and GPUs, and one time-ordered stream
 * of its rows that `gpumon report`, `gpumon watch --replay` and `gpumon export` walk through. */
#ifndef GPUMON_RECFILE_H
#define GPUMON_RECFILE_H

#include <stddef.h>
#include <stdint.h>

#include <sqlite3.h>

#define RECFILE_MAX_DEVICES 64

typedef struct recfile_device {
	int dev;
	char uuid[96], name[96], pci_bus_id[32];
	int64_t total_bytes; /* -1 unknown */
	int64_t lost_t_ns;   /* -1 never lost */
} recfile_device;

typedef struct recfile {
	sqlite3 *db;
	const char *path;
	int64_t start_mono_ns, start_wall_ns; /* from meta; both 0 when the file lacks them */
	int64_t end_mono_ns;                  /* -1: no end row (the writer was killed or still writes) */
	int64_t job_pid;                      /* -1 none */
	int exit_status;                      /* -1 none or unknown */
	char kind[16];                        /* "run", "record", or "" */
	char host[128], driver_version[64];
	char *command;                        /* the job's command line, or NULL */
	recfile_device devices[RECFILE_MAX_DEVICES];
	int ndevices;
	/* What could not be read: empty when the file is whole; otherwise one sentence naming the
	 * loss ("2 of 40 pages of table device_samples are unreadable"); what was read is still good. */
	char damage[256];
} recfile;

/*
 * Opens path read-only and reads its metadata and GPUs. On error returns an exit status (cli.h)
 * with one clear sentence in err (not a recording, a newer format, unreadable); 0 on success.
 * A file whose end was cut off or whose pages are damaged still opens: rf->damage says what is lost.
 */
int recfile_open(const char *path, recfile *rf, char *err, size_t errlen);
void recfile_close(recfile *rf);

/* Seconds since the start of the run for a t_ns of this file. */
double recfile_seconds(const recfile *rf, int64_t t_ns);

/* The kinds of rows of the stream. */
enum { RECROW_DEVICE, RECROW_PROCESS, RECROW_FRAMEWORK, RECROW_EVENT };

/* A value that may be absent in the file (NULL): known 0/1. */
typedef struct recval {
	int64_t v;
	int known;
} recval;

typedef struct recrow {
	int kind; /* RECROW_* */
	int64_t t_ns;
	union {
		struct { /* device_samples */
			int dev;
			recval used, free, reserved, total, used_min, used_max, used_max_t_ns;
			recval util_gpu, util_mem, temperature_c, power_mw, clock_sm, clock_mem;
		} device;
		struct { /* process_samples, with its processes row */
			int dev;
			int64_t pid;
			recval used;
			int gone;
			int job;                 /* 1: a pid of the job's tree (events of kind `job`) */
			recval ppid;
			const char *user, *name, *command; /* NULL unknown; valid until the next row */
		} process;
		struct { /* framework_samples, with its framework_sources row */
			int64_t pid;
			recval device, step, allocated, reserved, max_allocated;
			const char *framework; /* NULL unknown; valid until the next row */
		} framework;
		struct { /* events */
			const char *kind, *text; /* valid until the next row; text may be NULL */
		} event;
	} u;
} recrow;

typedef struct recfile_iter recfile_iter;

/*
 * Starts a walk through every row of the four sample/event tables, merged in time order, with
 * memory bounded whatever the file's size. Returns 0, or an exit status with err set.
 */
int recfile_iter_start(recfile *rf, recfile_iter **it, char *err, size_t errlen);

/* The next row: 1 and *row filled, 0 at the end, < 0 when the file failed under the walk (what
 * was returned before is good; rf->damage then names the loss). */
int recfile_iter_next(recfile_iter *it, recrow *row);

void recfile_iter_end(recfile_iter *it);

#endif
