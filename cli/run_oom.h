/* SPDX-License-Identifier: MIT */
/* run_oom.h — what `gpumon run` knows about running out of memory: the frameworks' out-of-memory
 * messages, the moment it happened (flight recorder, who held what), the diagnosis at the end, and
 * the figures the summary adds: the NVML leak verdict when the job reports nothing, the job's peak
 * and the framework device -> GPU mapping for unaccounted memory. */
#ifndef GPUMON_RUN_OOM_H
#define GPUMON_RUN_OOM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "run_state.h"

/*
 * Looks for an out-of-memory message of PyTorch, Paddle, JAX/XLA, TensorFlow or CUDA in a line of
 * len bytes (need not be NUL-terminated). Returns the framework's name ("PyTorch", ...; static
 * storage) when one is there, else NULL.
 */
const char *run_oom_match(const char *line, size_t len);

/* Length of the longest message run_oom_match looks for (for scanners that cut long lines). */
size_t run_oom_longest(void);

/* Creates r->oom (0, or -1 when out of memory: the run goes on without forensics). */
int run_oom_create(struct run *r);
void run_oom_destroy(struct run *r);

/* Each sampler record, after cmd_run.c has accounted for it. */
void run_oom_on_record(struct run *r, const gpumon_record *rec);

/* Called from the loop; every 100 ms it feeds the NVML leak series (the job's per-process
 * figure, and the device figure) the current values. */
void run_oom_tick(struct run *r, uint64_t t);

/* The job's processes changed: feeds the peak of the job (all its processes, all GPUs). */
void run_oom_job_changed(struct run *r, uint64_t t);

/*
 * An out-of-memory sign at time t: a line on the job's stderr (framework = the name from
 * run_oom_match, text = the line) or memory at a limit (framework NULL, text says which). Records
 * an `oom` event; the first one also captures the moment (the last 10 s of the flight recorder,
 * who held what).
 */
void run_oom_signal(struct run *r, uint64_t t, const char *framework, const char *text);

/* At the job's end, before the sampler stops: memory at >= 99 % of a job's GPU counts as a sign;
 * after a non-zero exit with a sign, diagnoses and records a `diagnosis` event. */
void run_oom_finish(struct run *r);

/* The summary's lines: the forensics (when there are), the NVML verdict (when the job reported no
 * framework samples), the job's peak. */
void run_oom_print(FILE *f, const struct run *r);

/*
 * The NVML device of the framework's CUDA device index cuda_dev, through the job's
 * CUDA_VISIBLE_DEVICES (indexes, UUIDs or UUID prefixes; a MIG entry maps to nothing), or the
 * index as-is without one. Returns 0 and sets *dev, or -1 with the reason in why.
 */
int run_oom_map_device(const struct run *r, int cuda_dev, unsigned *dev, char *why, size_t whylen);

#endif
