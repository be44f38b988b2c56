/* SPDX-License-Identifier: MIT */
/* run_inside.h — the inside view of `gpumon run`: the bootstrap (python/gpumon/_bootstrap.py,
 * embedded at build time) written as sitecustomize.py into the run's private directory, the
 * variables that put it first on the job's Python path, and the records made of what the monitor
 * it starts inside the job sends back (out-of-memory figures, the allocator's snapshot, whether it
 * started). The bootstrap decides everything on the job's side; gpumon never reads Python. */
#ifndef GPUMON_RUN_INSIDE_H
#define GPUMON_RUN_INSIDE_H

#include <stddef.h>
#include <stdint.h>

#include <gpumon/gpumon.h>

#define RUN_INSIDE_MAX_SNAPSHOTS 8 /* allocator snapshots kept in a run; later ones are counted */
#define RUN_INSIDE_MAX_REASONS 32  /* distinct reasons the inside view was off, said once each */

struct run_inside {
	int on;                      /* the bootstrap is written and the job gets the variables */
	int history;                 /* --history */
	gpumon_env_var vars[4];      /* PYTHONPATH, GPUMON_INSIDE, GPUMON_INSIDE_HISTORY and
					GPUMON_INSIDE_PYTHONPATH; a NULL value removes the name */
	size_t nvars;
	unsigned snapshots;          /* snapshot messages recorded ... */
	uint64_t snapshots_dropped;  /* ... and left out beyond RUN_INSIDE_MAX_SNAPSHOTS */
	uint64_t told[RUN_INSIDE_MAX_REASONS]; /* hashes of the "off" reasons said on stderr */
	size_t ntold;
};

/*
 * Writes the bootstrap as DIR/sitecustomize.py (dir: the run's private directory, mode 0700) and
 * makes the job's variables: PYTHONPATH = dir, then the PYTHONPATH of envp when it has one (no empty
 * entry is added: Python reads one as the current directory); GPUMON_INSIDE=1;
 * GPUMON_INSIDE_HISTORY=1 when in->history, else removed; GPUMON_INSIDE_PYTHONPATH = a directory from
 * which `import gpumon` finds this gpumon's package (the build tree's when this program runs from
 * it, the package this program sits in when pip installed it, the installed package), else
 * removed. Sets in->on. Returns 0, or -1 with the reason in err (nothing is then added for the job).
 */
int run_inside_prepare(struct run_inside *in, const char *dir, char *const *envp, char *err, size_t errlen);

/* Frees the variables' values. */
void run_inside_free(struct run_inside *in);

struct run;
struct run_msg;

/*
 * Records an `oom`, `snapshot` or `inside` message of pid (the message's, else the peer's) at t
 * (gpumon's clock): an oom_figures event (an out-of-memory sign, within the run's bound of them),
 * an alloc_snapshot event (the first RUN_INSIDE_MAX_SNAPSHOTS), a note (and, for "off", a line on
 * stderr once per distinct reason, not with -q). Returns 0, or -1 when the message does not hold
 * (a snapshot the library cannot read): the line is then malformed.
 */
int run_inside_msg(struct run *r, const struct run_msg *m, unsigned pid, uint64_t t);

#endif
