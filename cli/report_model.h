/* SPDX-License-Identifier: MIT */
/* report_model.h — the state of `gpumon report` while rows stream in (report_model.c), shared with
 * the code that turns it into the document (report_doc.c). Everything is bounded: timelines are
 * reduced, peaks are windowed, processes and events are capped. */
#ifndef GPUMON_REPORT_MODEL_H
#define GPUMON_REPORT_MODEL_H

#include <gpumon/gpumon.h>

#include "report.h"
#include "report_series.h"

#define MAX_PROCS 4096
#define PROC_HASH 8192 /* a power of two above MAX_PROCS */
#define MAX_FW 64
#define MAX_EVENTS 500
#define RING 512                     /* device points kept for the out-of-memory snapshot */
#define EARLY_NS (5ll * 1000000000)  /* "the job's first seconds" */
#define OOM_WINDOW_NS (10ll * 1000000000)

struct rdev {
	int seen;
	int64_t total;
	int total_known;
	series line;         /* used (floor), used_max, reserved */
	gpumon_leak *leak;   /* on the floor of used */
	gpumon_peaks *peaks; /* on used_max, owner = the largest process then */
	struct {
		int64_t t_ns, used;
	} ring[RING];        /* the latest device points, for the out-of-memory snapshot */
	int ring_head, ring_n;
};

struct rproc {
	int dev;
	int64_t pid;
	int job, present, used_known;
	int64_t used, peak;
	char *label, *user, *command;
	series line;
	gpumon_leak *leak; /* its NVML figure at each device row of its GPU while it is listed */
	int64_t alert_t_ns;
};

struct rfw {
	int64_t pid, device;
	char *framework;
	series line; /* allocated (floor), reserved, max_allocated, step */
	gpumon_leak *leak;
	int64_t alert_t_ns; /* first online alert; 0 none */
	uint64_t points, refused;
	int64_t allocated, reserved;
	int allocated_known, reserved_known;
	int64_t frag, frag_t_ns;
	int frag_known;
	int64_t unacc, unacc_t_ns; /* largest NVML figure - reserved */
	int unacc_known;
};

struct revent {
	int64_t t_ns;
	char *kind, *text;
};

struct holder {
	int64_t pid, bytes;
	int job;
	const char *user, *command; /* owned by the rproc */
};

/* What was on the card when the job ran out of memory. */
struct oom_snapshot {
	int64_t t_ns;          /* -1: no out-of-memory seen */
	char line[256];        /* the message that said so */
	int dev;
	gpumon_oom_input in;
	gpumon_oom_diagnosis diag;
	struct holder *holders;
	size_t nholders;
	struct {
		int64_t t_ns, used;
	} last[16];
	int nlast;
};

struct report {
	report_source src;
	recfile_device devinfo[RECFILE_MAX_DEVICES];
	int ndevinfo;
	struct rdev dev[RECFILE_MAX_DEVICES];
	int ndev;
	struct rproc *procs;
	size_t nprocs, procs_cap, procs_dropped;
	uint32_t *proc_index; /* open addressing on (dev, pid): index + 1, 0 empty */
	struct rfw fw[MAX_FW];
	size_t nfw;
	struct revent events[MAX_EVENTS];
	size_t nevents, events_dropped;
	/* the job (a `run` recording, or a CSV's process column) */
	int job_known, job_dev;
	int64_t job_total, job_dev_best, job_early, job_first_t_ns;
	gpumon_leak *job_leak;
	int64_t job_alert_t_ns;
	gpumon_peaks *job_peaks, *fw_peaks;
	struct oom_snapshot oom;
	int64_t first_t_ns, last_t_ns;
	uint64_t rows;
	char *damage;
};

double report_seconds(const report *r, int64_t t_ns);
uint64_t report_dev_total(const report *r, int dev);

/* Remembers the time of the first alert of l (once). */
void report_note_alert(report *r, const gpumon_leak *l, int64_t *first_alert_t_ns, int64_t t_ns);

/* Freezes what is on the card now as the out-of-memory moment (report_doc.c). */
void report_snapshot_oom(report *r, int64_t t_ns, const char *line);

/* The leak result the report states, and which series it is on (report_doc.c). */
void report_leak_choice(report *r, gpumon_leak_result *res, char *what, size_t len, int64_t *alert_t_ns);

#endif
