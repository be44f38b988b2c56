/* SPDX-License-Identifier: MIT */
/* run_state.h — the state of one `gpumon run`, owned by cmd_run.c: the options, the job and its
 * process tree, the recording and the run model that every record is emitted to (it judges --limit
 * too), the GPUs' pids seen and the steps --steps counts. Nothing here judges the run. */
#ifndef GPUMON_RUN_STATE_H
#define GPUMON_RUN_STATE_H

#include <stdint.h>
#include <sys/types.h>

#include <gpumon/gpumon.h>

#include "run_inside.h"
#include "run_tree.h"

enum { EXCEED_WARN, EXCEED_TERM, EXCEED_KILL };

#define MAX_FW 64 /* reporting processes whose framework name (from hello) is kept */
#define MAX_OOM_EVENTS 100 /* out-of-memory signs recorded in a run (`oom`, `oom_figures`); later
			      ones are left out */
/* --on-exceed term: SIGKILL this long after SIGTERM when the job still runs (the grace that
   Kubernetes and Slurm give by default, time enough for most checkpoints) */
#define DEFAULT_TERM_GRACE_NS 30000000000ull
#define MAX_STEPS 1000000u /* --steps N: 1..this */

struct opts {
	gpumon_alloc_opts alloc;
	const char *framework, *out, *gpu;
	unsigned interval_ms;
	int on_exceed, on_exceed_set, quiet;
	int verbose;               /* -v: every allocator note, not only those of settings without effect */
	int no_record;             /* --no-record: the model alone, no file */
	int no_inside;             /* --no-inside: no bootstrap, the job's environment as before */
	int history;               /* --history: the monitor inside keeps the allocator's history */
	uint64_t term_grace_ns;    /* --on-exceed term:GRACE; the grace of --steps too */
	unsigned steps;            /* --steps N: the job is stopped after N steps; 0: runs to its end */
	char **cmd;
};

/* Parses `gpumon run`'s options into *o (run_opts.c): EXIT_OK, EXIT_USAGE after a message naming
 * the bad option, or -1 after --help. */
int run_opts_parse(int argc, char **argv, struct opts *o);

struct gpu_pid {            /* a process listed on a GPU now */
	unsigned dev, pid;
};

struct fw_name {            /* the framework a reporting process named in its hello */
	unsigned pid;
	char framework[16];
	char version[32];       /* its version, "" when not said */
};

struct run {
	struct opts *o;
	gpumon *g;
	gpumon_recording *rec;
	int rec_failed;            /* the recording stopped: the model is still fed */
	gpumon_model *model;
	int model_failed;          /* the model missed a record (said once) */
	size_t alerts_told;        /* the model's alerts told so far */
	struct run_server *srv;
	gpumon_sampler *smp;
	unsigned *sampled;         /* the GPUs sampled */
	unsigned nsampled;
	pid_t child;
	int done, status;
	int signal; /* the signal that ended the job (status is then 128 + it); 0: it exited */
	uint64_t start_ns, end_ns, last_tree_ns, last_commit_ns;
	double start_wall;         /* the job's start on the wall clock, for the socket's times */
	uint64_t fed_ns;           /* the newest sampler record emitted: a pid found in the job's tree
				      joins it just after, before any figure sampled later */
	pid_t *job;                /* every pid seen in the job's tree, sorted */
	size_t njob;
	struct run_tree tree;      /* the latest scan */
	struct gpu_pid *procs;
	size_t nprocs;
	struct fw_name fw[MAX_FW];
	size_t nfw;
	size_t limits_seen;        /* the model's alerts looked at for LIMIT so far */
	int acted;                 /* term/kill sent */
	uint64_t term_ns;          /* when SIGTERM was sent (--on-exceed term), 0 before */
	int escalated;             /* SIGKILL sent after the grace */
	int64_t *steps;            /* the distinct step numbers the job reported, sorted (--steps) */
	size_t nsteps, steps_cap;
	int steps_stopped;         /* the job was asked to stop after its --steps */
	int refusal_told;          /* a socket connection refused: said once */
	unsigned oom_events;       /* out-of-memory signs emitted (at most MAX_OOM_EVENTS) */
	gpumon_alloc_plan plan;
	char cvd[512];             /* CUDA_VISIBLE_DEVICES as the job got it ... */
	int cvd_set;               /* ... when it got one */
	struct run_stderr *err;    /* the job's stderr, passed through and scanned (run_stderr.c) */
	struct run_inside inside;  /* the inside view: the bootstrap, its variables, what it sent */
};

/* Emits records of the run: to the recording, then to the model, with the same times (cmd_run.c's
 * one path for every record). */
void run_emit(struct run *r, const gpumon_record *recs, size_t n);

/* An event of the run (kind and text as docs/recording.md lists them) at t, emitted (cmd_run.c). */
void run_event(struct run *r, uint64_t t, const char *kind, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* An out-of-memory sign: an `oom` event, which the model takes as the moment (the first one); at
 * most MAX_OOM_EVENTS in a run (cmd_run.c). */
void run_oom_event(struct run *r, uint64_t t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Scans the job's process tree again; a pid new to it joins the job (a JOB record; cmd_run.c). */
void run_refresh_tree(struct run *r);

/* --limit (run_stop.c): the model's LIMIT alert (a job process held more than the limit on its GPUs
 * together, told once per process) said and acted on as --on-exceed says; nothing after the job
 * was already asked to end. */
void run_enforce(struct run *r, const gpumon_alert *a);

/* After SIGTERM (--on-exceed term, --steps): a job still running when the grace is over gets
 * SIGKILL, once (run_stop.c). */
void run_escalate(struct run *r, uint64_t now);

/* --steps: a step number the job reported in a sample or step message, from any of its
 * processes; each distinct number counts once, so the ranks of one job reporting the same step
 * count it once. Kept until N are counted (run_stop.c). */
void run_steps_seen(struct run *r, int64_t step);

/* --steps: once the job has reported its N steps, says so and asks it to end as --on-exceed term
 * does; not when --limit already did (run_stop.c). */
void run_steps_check(struct run *r);

#endif
