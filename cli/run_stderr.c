/* SPDX-License-Identifier: MIT */
/* run_stderr.c — passes the job's stderr on to gpumon's, byte for byte and at once (a thread that
 * only reads, writes and scans), and queues the lines that carry an out-of-memory message, or an
 * allocator's figures around one, for the loop to take. Lines end at \n or \r (progress bars); a line longer than the buffer is scanned in
 * overlapping parts. */
#include "run_stderr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define LINE_CAP 4096 /* bytes of a line kept for scanning */
/* lines queued between two takes; more are dropped. The detail lines of a whole run fit beside 16
   out-of-memory lines, so that a burst of an allocator's log neither loses its lines nor crowds out
   the message itself */
#define MAX_HITS (16 + RUN_STDERR_MAX_DETAILS)
#define STOP_DRAIN (1 << 20) /* bytes still passed on after a stop */

struct run_stderr {
	int rd;                 /* the pipe's read end or the terminal's master side, non-blocking */
	int stop[2];            /* a byte here stops the thread */
	pthread_t thread;
	int started;
	pthread_mutex_t mu;     /* guards hits, nhits, done */
	struct run_stderr_line hits[MAX_HITS];
	size_t nhits;
	int done;               /* the thread has finished */
	/* the scanner: used by the thread only (and by close, after the join) */
	char line[LINE_CAP];
	size_t len;
	int matched;            /* this line was reported already */
	unsigned details;       /* detail lines queued in the run (at most RUN_STDERR_MAX_DETAILS) */
};

/* Queues the line being scanned as a line of kind (RUN_STDERR_*), unless the queue is full. Called
 * with the mutex held. */
static void queue_line(struct run_stderr *s, int kind, const char *fw)
{
	if (s->nhits >= MAX_HITS)
		return;
	struct run_stderr_line *h = &s->hits[s->nhits++];
	size_t n = s->len < RUN_STDERR_TEXT_CAP ? s->len : RUN_STDERR_TEXT_CAP;
	h->t_ns = cli_now_ns();
	h->kind = kind;
	h->framework = fw;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s->line[i];
		h->line[i] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
	}
	h->line[n] = 0;
}

static void check_line(struct run_stderr *s)
{
	const char *fw = NULL;
	int kind = 0;
	if (s->matched || !s->len)
		return;
	if ((fw = gpumon_oom_message_match(s->line, s->len)) != NULL)
		kind = RUN_STDERR_OOM;
	else if (s->details < RUN_STDERR_MAX_DETAILS && gpumon_oom_message_detail(s->line, s->len))
		kind = RUN_STDERR_DETAIL;
	if (!kind)
		return;
	s->matched = 1;
	pthread_mutex_lock(&s->mu);
	size_t before = s->nhits;
	queue_line(s, kind, fw);
	if (kind == RUN_STDERR_DETAIL && s->nhits > before)
		s->details++;
	pthread_mutex_unlock(&s->mu);
}

static void scan(struct run_stderr *s, const char *buf, size_t n)
{
	size_t keep = gpumon_oom_message_longest() - 1;
	for (size_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == '\n' || c == '\r') {
			check_line(s);
			s->len = 0;
			s->matched = 0;
			continue;
		}
		if (s->len == LINE_CAP) {
			/* a long line: scan what is there, keep its end so that a message cut here is found */
			check_line(s);
			memmove(s->line, s->line + LINE_CAP - keep, keep);
			s->len = keep;
		}
		s->line[s->len++] = c;
	}
}

/* Writes all of buf to gpumon's stderr; -1 when it is gone (closed pipe, error). */
static int write_out(const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(STDERR_FILENO, buf, n);
		if (w > 0) {
			buf += w;
			n -= (size_t)w;
		} else if (w < 0 && errno == EAGAIN) { /* someone made it non-blocking */
			struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
			poll(&p, 1, 100);
		} else if (w < 0 && errno == EINTR) {
			continue;
		} else {
			return -1;
		}
	}
	return 0;
}

/* One read: 1 when something was passed on or may come, 0 at the end, -1 when nothing is there. */
static int pass(struct run_stderr *s, char *buf, size_t cap)
{
	ssize_t n = read(s->rd, buf, cap);
	if (n > 0) {
		if (write_out(buf, (size_t)n) < 0)
			return 0; /* gpumon's stderr is gone: the job's writes now fail as they would have */
		scan(s, buf, (size_t)n);
		return 1;
	}
	if (n < 0 && errno == EINTR)
		return 1;
	if (n < 0 && errno == EAGAIN)
		return -1;
	return 0; /* end of file; EIO: a terminal whose other side every writer closed */
}

static void *pump(void *arg)
{
	struct run_stderr *s = arg;
	pthread_setname_np(pthread_self(), "gpumon-stderr");
	static char buf[65536];
	sigset_t all;
	/* the signal handlers run in the main thread; a closed stderr gives EPIPE here, not SIGPIPE */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd p[2] = {{.fd = s->rd, .events = POLLIN}, {.fd = s->stop[0], .events = POLLIN}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents) {
			if (pass(s, buf, sizeof buf) == 0)
				break;
			continue;
		}
		if (p[1].revents) {
			size_t drained = 0;
			int k;
			while (drained < STOP_DRAIN && (k = pass(s, buf, sizeof buf)) > 0)
				drained += sizeof buf;
			break;
		}
	}
	pthread_mutex_lock(&s->mu);
	s->done = 1;
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* The job's terminal while it has one: a resize of gpumon's terminal is passed on to it. gpumon
   copies the new size there when it gets the terminal's SIGWINCH, then signals the job once more:
   the job, in gpumon's process group, got the terminal's signal at the same moment and may have
   read its own terminal's size before gpumon changed it. */
static volatile sig_atomic_t winch_master = -1, winch_job = 0;
static struct sigaction winch_old;

static void on_winch(int sig)
{
	int e = errno, m = winch_master, job = winch_job;
	struct winsize ws, was;
	(void)sig;
	if (m >= 0 && ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 &&
	    (ioctl(m, TIOCGWINSZ, &was) != 0 || ws.ws_row != was.ws_row || ws.ws_col != was.ws_col) &&
	    ioctl(m, TIOCSWINSZ, &ws) == 0 && job > 0)
		kill((pid_t)job, SIGWINCH);
	errno = e;
}

static void follow_resizes(int master)
{
	struct sigaction sa = {.sa_handler = on_winch, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	winch_master = master;
	sigaction(SIGWINCH, &sa, &winch_old);
}

static void stop_following_resizes(void)
{
	if (winch_master < 0)
		return;
	winch_master = -1; /* first: a handler running on another thread now leaves the terminal alone */
	winch_job = 0;
	sigaction(SIGWINCH, &winch_old, NULL);
}

/* A terminal for the job when gpumon's stderr is one: raw, so that no byte is changed. */
static int open_terminal(int *master, int *job_fd)
{
	char name[128];
	struct termios t;
	struct winsize ws;
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return -1;
	int sl = -1;
	if (grantpt(m) == 0 && unlockpt(m) == 0 && ptsname_r(m, name, sizeof name) == 0)
		sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (sl < 0 || tcgetattr(sl, &t) != 0) {
		if (sl >= 0)
			close(sl);
		close(m);
		return -1;
	}
	cfmakeraw(&t);
	tcsetattr(sl, TCSANOW, &t);
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0)
		ioctl(m, TIOCSWINSZ, &ws);
	*master = m;
	*job_fd = sl;
	return 0;
}

struct run_stderr *run_stderr_open(int *job_fd)
{
	struct run_stderr *s = calloc(1, sizeof *s);
	int p[2];
	if (!s)
		return NULL;
	if (pipe2(s->stop, O_CLOEXEC) != 0) {
		free(s);
		return NULL;
	}
	if (isatty(STDERR_FILENO) && open_terminal(&s->rd, job_fd) == 0) {
		/* the job sees a terminal, as it would without gpumon, and its resizes */
		follow_resizes(s->rd);
	} else if (pipe2(p, O_CLOEXEC) == 0) {
		s->rd = p[0];
		*job_fd = p[1];
	} else {
		close(s->stop[0]);
		close(s->stop[1]);
		free(s);
		return NULL;
	}
	fcntl(s->rd, F_SETFL, fcntl(s->rd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

void run_stderr_job_ended(void)
{
	winch_job = 0;
}

int run_stderr_start(struct run_stderr *s, int job_fd, pid_t job)
{
	if (winch_master == s->rd)
		winch_job = (sig_atomic_t)job;
	close(job_fd);
	if (pthread_create(&s->thread, NULL, pump, s) != 0)
		return -1;
	s->started = 1;
	return 0;
}

size_t run_stderr_take(struct run_stderr *s, struct run_stderr_line *out, size_t cap)
{
	size_t n;
	if (!s)
		return 0;
	pthread_mutex_lock(&s->mu);
	n = s->nhits < cap ? s->nhits : cap;
	memcpy(out, s->hits, n * sizeof out[0]);
	memmove(s->hits, s->hits + n, (s->nhits - n) * sizeof s->hits[0]);
	s->nhits -= n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

void run_stderr_stop(struct run_stderr *s, int timeout_ms)
{
	if (!s || !s->started)
		return;
	uint64_t end = cli_now_ns() + (uint64_t)timeout_ms * 1000000u;
	for (;;) {
		pthread_mutex_lock(&s->mu);
		int done = s->done;
		pthread_mutex_unlock(&s->mu);
		if (done || cli_now_ns() >= end)
			break;
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
	if (write(s->stop[1], "s", 1) != 1) {
		/* cannot fail on a fresh pipe; the thread then ends at the end of file */
	}
	pthread_join(s->thread, NULL);
	s->started = 0;
	check_line(s); /* a last line without its newline */
}

void run_stderr_free(struct run_stderr *s)
{
	if (!s)
		return;
	run_stderr_stop(s, 0);
	if (winch_master == s->rd)
		stop_following_resizes();
	close(s->rd);
	close(s->stop[0]);
	close(s->stop[1]);
	pthread_mutex_destroy(&s->mu);
	free(s);
}
