/* SPDX-License-Identifier: MIT */
/* run_stderr.h — the job's stderr through `gpumon run`: every byte written on to gpumon's own
 * stderr unchanged and at once, by a thread of its own, while lines are scanned for the
 * frameworks' out-of-memory messages. */
#ifndef GPUMON_RUN_STDERR_H
#define GPUMON_RUN_STDERR_H

#include <stdint.h>
#include <sys/types.h>

struct run_stderr;

/*
 * Creates the channel: a pseudo-terminal in raw mode (bytes unchanged, the window size copied)
 * when gpumon's stderr is a terminal, so that the job still sees one, else a pipe. Returns it and
 * sets *job_fd to the end the job gets as its stderr (close-on-exec in gpumon); NULL when neither
 * could be made (then the job keeps gpumon's stderr and nothing is scanned).
 */
struct run_stderr *run_stderr_open(int *job_fd);

/* Starts the thread that passes the bytes on. Closes gpumon's copy of job_fd (the job has it).
 * job: its pid, signalled (SIGWINCH) when gpumon's terminal is resized. Returns 0, or -1 (the
 * job's writes then fail: call only once the job exists). */
int run_stderr_start(struct run_stderr *s, int job_fd, pid_t job);

/* The job has been reaped: its pid may be reused, and is no longer signalled. */
void run_stderr_job_ended(void);

/* One out-of-memory line: the framework's name from run_oom_match, the line (control characters
 * turned into blanks, at most 400 bytes) and when it was read (CLOCK_MONOTONIC). */
typedef void (*run_stderr_fn)(void *ctx, uint64_t t_ns, const char *framework, const char *line);

/* Hands the out-of-memory lines seen since the last call to fn, oldest first. */
void run_stderr_take(struct run_stderr *s, run_stderr_fn fn, void *ctx);

/*
 * Waits up to timeout_ms for every writer to close the job's end (processes the job left behind
 * may hold it), passes on what is left, stops the thread and frees s. The lines not taken yet go
 * to fn first. NULL: no-op.
 */
void run_stderr_close(struct run_stderr *s, int timeout_ms, run_stderr_fn fn, void *ctx);

#endif
