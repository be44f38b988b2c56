/* SPDX-License-Identifier: MIT */
/* run_state.h — the state of one `gpumon run`, shared by cmd_run.c (the loop), run_oom.c (out-of-
 * memory forensics, the NVML leak verdict, the job's peak) and run_summary.c (the end summary). */
#ifndef GPUMON_RUN_STATE_H
#define GPUMON_RUN_STATE_H

#include <stdint.h>
#include <sys/types.h>

#include <gpumon/gpumon.h>

#include "run_alloc.h"
#include "run_tree.h"

enum { EXCEED_WARN, EXCEED_TERM, EXCEED_KILL };

#define MAX_FW 64

struct opts {
	struct run_alloc_opts alloc;
	const char *framework, *out, *gpu;
	unsigned interval_ms;
	int on_exceed, on_exceed_set, quiet;
	char **cmd;
};

struct proc_mem {           /* a process holding memory on a GPU now */
	unsigned dev, pid;
	uint64_t used;
	int job;
};

struct gpu_acc {            /* what the summary says about one GPU */
	int sampled;
	uint64_t job_now, others_now, job_peak, job_peak_t, others_at_peak, last_t, others_peak;
	long double job_integral; /* byte-nanoseconds, for the average */
	uint64_t used_peak, used_peak_t;
};

struct fw_acc {             /* what one process reported over the socket */
	unsigned pid;
	char framework[16], version[32];
	uint64_t peak_allocated, peak_reserved;
	int has_allocated, has_reserved;
	gpumon_leak *leak;         /* the verdict on its allocated floor */
	int alerted;               /* its leak alert was given */
	int device;                /* the framework's device index of the last sample; -1 unknown */
	uint64_t last_allocated, last_reserved; /* the last sample's figures ... */
	int last_allocated_known, last_reserved_known; /* ... when it gave them */
	/* unaccounted memory: the NVML figure of pid on its GPU and the framework's reserved, taken
	   together at the last sample where both were known (ua_known) */
	int ua_known;
	unsigned ua_dev;
	uint64_t ua_nvml, ua_reserved;
	char ua_why[160];          /* why it is unknown, when it is */
};

struct run_oom;
struct run_stderr;

struct run {
	struct opts *o;
	gpumon *g;
	gpumon_recording *rec;
	int rec_failed;
	struct run_server *srv;
	gpumon_sampler *smp;
	pid_t child;
	int done, status;
	uint64_t start_ns, end_ns, last_tree_ns, last_commit_ns;
	double start_wall;
	pid_t *job;                /* every pid seen in the job's tree, sorted */
	size_t njob;
	struct run_tree tree;      /* the latest scan */
	struct proc_mem *procs;
	size_t nprocs;
	struct gpu_acc *gpus;
	unsigned ngpus;
	struct fw_acc fw[MAX_FW];
	size_t nfw;
	unsigned *warned;          /* pids already warned about (EXCEED_WARN) */
	size_t nwarned;
	int acted;                 /* term/kill sent */
	struct run_alloc_plan plan;
	char cvd[512];             /* CUDA_VISIBLE_DEVICES as the job got it ... */
	int cvd_set;               /* ... when it got one */
	struct run_stderr *err;    /* the job's stderr, passed through and scanned (run_stderr.c) */
	struct run_oom *oom;       /* forensics, fallback verdict, peaks (run_oom.c) */
};

/* Whether pid belongs to the job's process tree (as far as the scans have seen). */
int run_job_has(const struct run *r, unsigned pid);

/* Records an event in the recording (nothing once the recording has stopped). */
void run_event(struct run *r, uint64_t t, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* A leak alert while the job runs: an `alert` event, and a line on stderr unless -q. text says what
 * rises and how fast (run_verdict_alert). */
void run_leak_alert(struct run *r, uint64_t t, const char *text);

/* A framework sample of process f: keeps its last figures and, for the summary's unaccounted
 * memory, the NVML figure of the process on the GPU the sample's device maps to (run_summary.c). */
void run_summary_fw_sample(struct run *r, struct fw_acc *f, const gpumon_framework_sample *s);

/* The end summary on stderr (run_summary.c). */
void run_summary_print(const struct run *r, const char *path, const gpumon_sampler_stats *ss);

#endif
