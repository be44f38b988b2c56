/* SPDX-License-Identifier: MIT */
/* run_stderr.h — the job's stderr through `gpumon run`: every byte written on to gpumon's own
 * stderr unchanged and at once, by a thread of its own, while lines are scanned for the
 * frameworks' out-of-memory messages (gpumon_oom_message_match) and the allocator's lines around
 * them (gpumon_oom_message_detail); the loop takes those lines. */
#ifndef GPUMON_RUN_STDERR_H
#define GPUMON_RUN_STDERR_H

#include <stddef.h>
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

/* Bytes of a line kept: PyTorch's message is some 650 bytes, its figures in the second half */
#define RUN_STDERR_TEXT_CAP 2048
#define RUN_STDERR_MAX_DETAILS 64 /* detail lines queued in a run; later ones are left out */

enum {
	RUN_STDERR_OOM = 1, /* a line that says the job ran out of memory (gpumon_oom_message_match) */
	RUN_STDERR_DETAIL,  /* a line with figures of such a report (gpumon_oom_message_detail) */
};

/* A line that carries an out-of-memory message, or figures of one. */
struct run_stderr_line {
	uint64_t t_ns;           /* when it was read (CLOCK_MONOTONIC) */
	int kind;                /* RUN_STDERR_* */
	const char *framework;   /* OOM: gpumon_oom_message_match's name ("PyTorch", ...; static
				    storage); DETAIL: NULL */
	char line[RUN_STDERR_TEXT_CAP + 1]; /* the line, control characters as blanks, truncated */
};

/* Copies up to cap of the lines seen and not taken yet into out, oldest first, and returns how
 * many. At most 16 out-of-memory lines (more when fewer detail lines wait) and the run's
 * RUN_STDERR_MAX_DETAILS detail lines wait between two takes; more are dropped. NULL s: 0. */
size_t run_stderr_take(struct run_stderr *s, struct run_stderr_line *out, size_t cap);

/*
 * Waits up to timeout_ms for every writer to close the job's end (processes the job left behind
 * may hold it), passes on what is left and stops the thread; a last line without its newline is
 * scanned. The lines found stay queued for run_stderr_take(). NULL or stopped: no-op.
 */
void run_stderr_stop(struct run_stderr *s, int timeout_ms);

/* Stops the thread at once when it still runs and frees s. NULL: no-op. */
void run_stderr_free(struct run_stderr *s);

#endif
