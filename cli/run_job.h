/* SPDX-License-Identifier: MIT */
/* run_job.h — starting and watching the job of `gpumon run`: its environment, fork and exec with
 * a shell's exit statuses, signal forwarding that does not deliver Ctrl-C twice, and reaping. */
#ifndef GPUMON_RUN_JOB_H
#define GPUMON_RUN_JOB_H

#include <stddef.h>
#include <sys/types.h>

#include <gpumon/gpumon.h>


/* Whether cmd can be found as a shell would look for it (PATH when it has no '/'). */
int run_job_command_exists(const char *cmd);

/* --gpu: the device the job gets (auto: the one with the most free memory now). Returns EXIT_OK
 * and sets *dev, or prints the reason and returns an exit status. */
int run_job_choose_gpu(gpumon *g, const char *spec, unsigned *dev);

/*
 * The default name of a recording: gpumon-run-YYYYmmdd-HHMMSS.mmm-PID.gpumon (local time to the
 * millisecond, gpumon's pid), "-N" before the extension for attempt N > 1: jobs started in one
 * directory at once get distinct names, and one that finds its name taken (the file is created
 * exclusively) tries the next attempt. Writes at most len bytes into buf.
 */
void run_job_default_name(char *buf, size_t len, unsigned attempt);

/* The command line, shell-quoted (for the recording); NULL when out of memory; free(). */
char *run_job_quote(char **cmd);

/* --framework auto: the frameworks the first *.py argument imports, else GPUMON_FW_ALL. */
unsigned run_job_detect(char **cmd);

/*
 * The job's environment: envp with vars set (replacing the same names; a var whose value is NULL
 * removes its name), then CUDA_VISIBLE_DEVICES = cvd and GPUMON_RUN_SOCKET = sock when not NULL.
 * Returns a NULL-terminated array, or NULL when out of memory; free with run_job_env_free().
 */
char **run_job_env(char *const *envp, const gpumon_env_var *vars, size_t nvars, const char *cvd,
		   const char *sock);
void run_job_env_free(char **env);

/* Lifts gpumon's soft open-file limit to the hard one, so that the socket can take as many of the
 * job's connections as the system allows; the job gets the limit as it was. Call before
 * run_job_start. */
void run_job_raise_fd_limit(void);

/*
 * Makes gpumon a subreaper (orphaned grandchildren stay below it), installs the handlers
 * (SIGCHLD wakes the loop; INT, TERM, HUP, QUIT, USR1 and USR2 sent by a process are passed to
 * the job, those from the terminal are left to the job, which shares the terminal's process group),
 * forks and execs cmd with env once run_job_release(1) is called, with err_fd as its stderr when
 * >= 0. The child exits 127 (not found) or 126 (not executable) after one line on stderr when exec
 * fails.
 * Returns the fd that becomes readable when something happened (pass it to run_job_wake) and sets
 * *pid; -1 when the fork failed (errno set).
 */
int run_job_start(char **cmd, char **env, int err_fd, pid_t *pid);

/* Lets the forked job exec (go) or leave with status 0 having run nothing (!go). Once only. */
void run_job_release(int go);

/* Empties the wake pipe; returns a bit (1 << sig) for each signal that was passed to the job. */
unsigned run_job_wake(int fd);

/*
 * Reaps every exited child (the job and adopted orphans) without waiting; returns 1 and sets
 * *status (as a shell reports it: the exit code, or 128+N after signal N) and *signal (N, or 0 when
 * it exited) when the job was one.
 */
int run_job_reap(pid_t job, int *status, int *signal);

/* Restores the signal handlers (SIGUSR1 and SIGUSR2, which have no job to go to, are then ignored)
 * and closes the pipes (a job still waiting leaves). */
void run_job_finish(int fd);

#endif
