/* SPDX-License-Identifier: MIT */
/* run_job.c — the job's life: environment, fork/exec as a shell does it, signals passed on, and
 * the exit status read back. The handlers only call kill(2) and write(2). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run_job.h"

/* Read by the signal handlers: the job's pid and the wake pipe's write end. */
static volatile sig_atomic_t job_pid;
static int wake_fd = -1;
static int gate_fd = -1; /* the parent's end of the pipe the forked job waits on before exec */
static struct rlimit job_nofile; /* the open-file limit the job gets: gpumon's own, before it was raised */
static int nofile_raised;

/* SIGUSR1/SIGUSR2: many trainers take them as a checkpoint request; their default action would end
   gpumon and leave the job unsupervised */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

int run_job_command_exists(const char *cmd)
{
	if (strchr(cmd, '/'))
		return access(cmd, F_OK) == 0;
	const char *path = getenv("PATH");
	char buf[4096];
	for (const char *p = path && *path ? path : "/usr/local/bin:/usr/bin:/bin"; p;) {
		const char *e = strchr(p, ':');
		int n = e ? (int)(e - p) : (int)strlen(p);
		snprintf(buf, sizeof buf, "%.*s/%s", n, n ? p : ".", cmd);
		if (access(buf, X_OK) == 0)
			return 1;
		p = e ? e + 1 : NULL;
	}
	return 0;
}

/* The command line, shell-quoted, for the recording. */
void run_job_default_name(char *buf, size_t len, unsigned attempt)
{
	struct timespec now;
	struct tm tm;
	char stamp[32], suffix[16] = "";
	clock_gettime(CLOCK_REALTIME, &now);
	if (!localtime_r(&now.tv_sec, &tm) || !strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm))
		snprintf(stamp, sizeof stamp, "%lld", (long long)now.tv_sec);
	if (attempt > 1)
		snprintf(suffix, sizeof suffix, "-%u", attempt);
	snprintf(buf, len, "gpumon-run-%s.%03ld-%ld%s.gpumon", stamp, now.tv_nsec / 1000000, (long)getpid(), suffix);
}

char *run_job_quote(char **cmd)
{
	size_t cap = 1;
	for (char **a = cmd; *a; a++)
		cap += 4 * strlen(*a) + 3;
	char *s = malloc(cap), *p = s;
	if (!s)
		return NULL;
	for (char **a = cmd; *a; a++) {
		int plain = **a && strspn(*a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
					      "-_./=:,+@%") == strlen(*a);
		if (a != cmd)
			*p++ = ' ';
		if (!plain)
			*p++ = '\'';
		for (const char *c = *a; *c; c++)
			p += (*c == '\'' && !plain) ? (size_t)sprintf(p, "'\\''") : (size_t)(*p = *c, 1);
		if (!plain)
			*p++ = '\'';
	}
	*p = 0;
	return s;
}

unsigned run_job_detect(char **cmd)
{
	char buf[65536];
	unsigned bits = 0;
	for (char **a = cmd; *a && !bits; a++) {
		size_t l = strlen(*a);
		if (l < 4 || strcmp(*a + l - 3, ".py"))
			continue;
		int fd = open(*a, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof buf);
		close(fd);
		if (n > 0)
			bits = gpumon_framework_detect(buf, (size_t)n);
	}
	return bits ? bits : GPUMON_FW_ALL;
}

/* --gpu: the device the job gets; auto = the one with the most free memory now. */
int run_job_choose_gpu(gpumon *g, const char *spec, unsigned *dev)
{
	if (strcmp(spec, "auto")) {
		int st = gpumon_device_find(g, spec, dev);
		if (st)
			cli_error("run: --gpu %s: %s", spec, gpumon_errmsg(g));
		return st ? cli_exit_status(st) : EXIT_OK;
	}
	uint64_t best = 0;
	int found = 0;
	for (unsigned i = 0; i < gpumon_device_count(g); i++) {
		gpumon_device_sample s;
		if (gpumon_device_sample_read(g, i, GPUMON_F_MEMORY, &s) != GPUMON_OK)
			continue;
		if (!found || s.memory_free_bytes > best) {
			best = s.memory_free_bytes;
			*dev = i;
			found = 1;
		}
	}
	if (!found)
		cli_error("run: --gpu auto: no GPU answers");
	return found ? EXIT_OK : EXIT_NOT_FOUND;
}

/* "NAME=VALUE" in new memory, or NULL. */
static char *pair(const char *name, const char *value)
{
	size_t len = strlen(name) + strlen(value) + 2;
	char *s = malloc(len);
	if (s)
		snprintf(s, len, "%s=%s", name, value);
	return s;
}

/* Whether entry ("NAME=VALUE") is of name. */
static int named(const char *entry, const char *name)
{
	size_t nl = strlen(name);
	return !strncmp(entry, name, nl) && entry[nl] == '=';
}

char **run_job_env(char *const *envp, const gpumon_env_var *vars, size_t nvars, const char *cvd,
		   const char *sock)
{
	size_t n = 0, k = 0;
	while (envp && envp[n])
		n++;
	char **e = calloc(n + nvars + 3, sizeof *e);
	if (!e)
		return NULL;
	/* every string is copied so that run_job_env_free can free them all */
	for (size_t i = 0; i < nvars + 2; i++) {
		const char *name = i < nvars ? vars[i].name : i == nvars ? "CUDA_VISIBLE_DEVICES" : "GPUMON_RUN_SOCKET";
		const char *value = i < nvars ? vars[i].value : i == nvars ? cvd : sock;
		if (value && !(e[k++] = pair(name, value))) {
			run_job_env_free(e);
			return NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		/* set above, or removed (a NULL value) */
		int replaced = (cvd && named(envp[i], "CUDA_VISIBLE_DEVICES")) || (sock && named(envp[i], "GPUMON_RUN_SOCKET"));
		for (size_t j = 0; j < nvars && !replaced; j++)
			replaced = named(envp[i], vars[j].name);
		if (!replaced && !(e[k++] = strdup(envp[i]))) {
			run_job_env_free(e);
			return NULL;
		}
	}
	return e;
}

void run_job_env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

void run_job_raise_fd_limit(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max)
		return;
	job_nofile = r;
	r.rlim_cur = r.rlim_max;
	nofile_raised = setrlimit(RLIMIT_NOFILE, &r) == 0;
}

static void wake(char c)
{
	if (write(wake_fd, &c, 1) < 0) {
		/* the pipe is full: the loop is awake anyway */
	}
}

static void on_chld(int sig)
{
	int e = errno;
	(void)sig;
	wake(0);
	errno = e;
}

/* A signal sent by a process (si_code <= 0: kill, sigqueue) is passed on; one the terminal
   generated already reached the job, which is in our process group, and is not sent twice. */
static void on_forward(int sig, siginfo_t *si, void *uc)
{
	int e = errno;
	(void)uc;
	if (si->si_code <= 0 && job_pid > 0) {
		kill((pid_t)job_pid, sig);
		wake((char)sig);
	}
	errno = e;
}

static void __attribute__((noreturn)) exec_child(char **cmd, char **env, const sigset_t *old, int gate, int err_fd)
{
	char go = 0;
	ssize_t n;
	for (size_t i = 0; i < NFORWARDED; i++)
		signal(forwarded[i], SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGXFSZ, SIG_DFL);
	if (nofile_raised) /* a job that uses select(2) may need the soft limit it would have had */
		setrlimit(RLIMIT_NOFILE, &job_nofile);
	sigprocmask(SIG_SETMASK, old, NULL);
	close(gate_fd);
	do
		n = read(gate, &go, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || go != 'g')
		_exit(0); /* gpumon could not start recording: run nothing */
	if (err_fd >= 0 && dup2(err_fd, STDERR_FILENO) < 0)
		_exit(126);
	execvpe(cmd[0], cmd, env);
	int e = errno;
	/* write(2) only: this runs between fork and exec in a process that has threads */
	const char *why = e == ENOENT ? "command not found" : e == EACCES ? "Permission denied"
			  : e == ENOEXEC ? "cannot execute binary file: Exec format error" : "cannot execute";
	const char *parts[] = {cli_progname, ": ", cmd[0], ": ", why, "\n"};
	for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
		if (write(STDERR_FILENO, parts[i], strlen(parts[i])) < 0)
			break;
	_exit(e == ENOENT ? 127 : 126);
}

int run_job_start(char **cmd, char **env, int err_fd, pid_t *pid)
{
	int p[2], gate[2];
	sigset_t block, old;
	if (pipe2(gate, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
		close(gate[0]);
		close(gate[1]);
		return -1;
	}
	wake_fd = p[1];
	gate_fd = gate[1];
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	struct sigaction sa = {.sa_handler = on_chld, .sa_flags = SA_RESTART | SA_NOCLDSTOP};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
	sa = (struct sigaction){.sa_sigaction = on_forward, .sa_flags = SA_RESTART | SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	sigemptyset(&block);
	sigaddset(&block, SIGCHLD);
	for (size_t i = 0; i < NFORWARDED; i++) {
		sigaction(forwarded[i], &sa, NULL);
		sigaddset(&block, forwarded[i]);
	}
	/* blocked until job_pid is set, so that nothing arrives in between unforwarded */
	sigprocmask(SIG_BLOCK, &block, &old);
	pid_t c = fork();
	if (c == 0)
		exec_child(cmd, env, &old, gate[0], err_fd);
	int e = errno;
	close(gate[0]);
	if (c > 0)
		job_pid = c;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (c < 0) {
		run_job_finish(p[0]);
		errno = e;
		return -1;
	}
	*pid = c;
	return p[0];
}

void run_job_release(int go)
{
	if (gate_fd < 0)
		return;
	if (go && write(gate_fd, "g", 1) != 1) {
		/* cannot happen with a fresh pipe; the job then leaves without running */
	}
	close(gate_fd);
	gate_fd = -1;
}

unsigned run_job_wake(int fd)
{
	unsigned sigs = 0;
	char buf[64];
	ssize_t n;
	while ((n = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] > 0 && buf[i] < 32)
				sigs |= 1u << buf[i];
	return sigs;
}

int run_job_reap(pid_t job, int *status, int *signal)
{
	int ws, found = 0;
	pid_t p;
	while ((p = waitpid(-1, &ws, WNOHANG)) > 0) {
		if (p != job)
			continue;
		found = 1;
		*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 255;
		*signal = WIFSIGNALED(ws) ? WTERMSIG(ws) : 0;
		job_pid = 0;
	}
	return found;
}

void run_job_finish(int fd)
{
	/* the job is gone: a checkpoint request has no one to go to, and must not cut the recording's
	   end short; the others stop gpumon as they would any program */
	for (size_t i = 0; i < NFORWARDED; i++)
		signal(forwarded[i], forwarded[i] == SIGUSR1 || forwarded[i] == SIGUSR2 ? SIG_IGN : SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	run_job_release(0);
	if (fd >= 0)
		close(fd);
	if (wake_fd >= 0)
		close(wake_fd);
	wake_fd = -1;
}
