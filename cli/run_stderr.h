/* SPDX-License-Identifier: MIT */
/* run_stderr.h — the job's stderr through `gpumon run`: every byte written on to gpumon's own
 * stderr unchanged and at once, by a thread of its own, while lines are scanned for the
 * frameworks' out-of-memory messages (gpumon_oom_message_match); the loop takes those lines. */
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

#define RUN_STDERR_TEXT_CAP 400 /* bytes of a line kept */

/* A line that carries an out-of-memory message. */
struct run_stderr_line {
	uint64_t t_ns;           /* when it was read (CLOCK_MONOTONIC) */
	const char *framework;   /* gpumon_oom_message_match's name ("PyTorch", ...; static storage) */
	char line[RUN_STDERR_TEXT_CAP + 1]; /* the line, control characters as blanks, truncated */
};

/* Copies up to cap of the out-of-memory lines seen and not taken yet into out, oldest first, and
 * returns how many. At most 16 wait between two takes; more are dropped. NULL s: 0. */
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
