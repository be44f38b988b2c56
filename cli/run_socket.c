/* SPDX-License-Identifier: MIT */
/* run_socket.c — the server side of the run protocol (docs/run-protocol.md): a listening Unix
 * socket in a private directory, many clients at once, one JSON object per line parsed with
 * jansson. Bad input is counted and skipped; nothing a client sends can stop the run. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "run_socket.h"

#define FD_HEADROOM 32       /* descriptors left to gpumon's own files: /proc scans, the recording */
#define BUF_FIRST 4096       /* a client's buffer starts at this and grows to a line's limit */
#define REST_NS 100000000ull /* the listener rests this long when a connection cannot even be refused */

struct client {
	int fd;
	unsigned peer_pid;
	int discarding; /* inside a line that was too long: skip to its newline */
	size_t len, cap;
	char *buf;      /* cap bytes, at most RUN_MSG_MAX_LINE + 1; NULL until the first read */
};

struct run_server {
	int fd;
	int reserve;    /* /dev/null, given up for a moment to take a connection off the backlog and close
			   it when gpumon is out of descriptors: a listener left readable makes poll spin */
	uint64_t rest_until_ns; /* the listener is not polled before this (monotonic ns) */
	char dir[128];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct client *clients;
	size_t nclients, cap;
	struct pollfd *pfd;     /* cap + 2 entries: the caller's fd, the listener, the clients */
	struct run_server_stats stats;
};

/* ---- parsing ------------------------------------------------------------------------------- */

static int fail(char *err, size_t errlen, const char *why, const char *key)
{
	if (errlen)
		snprintf(err, errlen, key ? "%s: \"%s\"" : "%s", why, key);
	return -1;
}

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = 0;
}

/* An integer field in [lo, hi]: 1 when present, 0 when missing or null, -1 when wrong. */
static int get_int(json_t *o, const char *key, long long lo, long long hi, long long *out)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v))
		return -1;
	long long x = json_integer_value(v);
	if (x < lo || x > hi)
		return -1;
	*out = x;
	return 1;
}

/* A byte count up to max: a non-negative integer (or a whole real, as some senders write large
 * numbers). */
static int get_bytes(json_t *o, const char *key, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (json_is_integer(v) && json_integer_value(v) >= 0 && (uint64_t)json_integer_value(v) <= max) {
		*out = (uint64_t)json_integer_value(v);
		return 1;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);
		if (isfinite(d) && d >= 0 && d < 1.8e19 && d == (double)(uint64_t)d && (uint64_t)d <= max) {
			*out = (uint64_t)d;
			return 1;
		}
	}
	return -1;
}

/* A string field: 1 copied, 0 missing or null, -1 not a string. */
static int get_str(json_t *o, const char *key, char *dst, size_t cap)
{
	json_t *v = json_object_get(o, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return -1;
	copy_str(dst, cap, json_string_value(v));
	return 1;
}

static int msg_type(const char *t)
{
	if (!strcmp(t, "hello"))
		return RUN_MSG_HELLO;
	if (!strcmp(t, "sample"))
		return RUN_MSG_SAMPLE;
	if (!strcmp(t, "step"))
		return RUN_MSG_STEP;
	if (!strcmp(t, "marker"))
		return RUN_MSG_MARKER;
	if (!strcmp(t, "oom"))
		return RUN_MSG_OOM;
	if (!strcmp(t, "snapshot"))
		return RUN_MSG_SNAPSHOT;
	if (!strcmp(t, "inside"))
		return RUN_MSG_INSIDE;
	return RUN_MSG_UNKNOWN;
}

/* The fields common to every type (pid, t, step, device). */
static int parse_common(json_t *o, struct run_msg *m, char *err, size_t errlen)
{
	long long x;
	int r;
	if ((r = get_int(o, "pid", 1, 0x7fffffffLL, &x)) < 0)
		return fail(err, errlen, "bad value for", "pid");
	if (r) {
		m->pid = (unsigned)x;
		m->has |= RUN_HAS_PID;
	}
	json_t *t = json_object_get(o, "t");
	if (t && !json_is_null(t)) {
		if (!json_is_number(t) || !isfinite(json_number_value(t)) || json_number_value(t) < 0)
			return fail(err, errlen, "bad value for", "t");
		m->t = json_number_value(t);
		m->has |= RUN_HAS_T;
	}
	if ((r = get_int(o, "step", 0, INT64_MAX, &x)) < 0)
		return fail(err, errlen, "bad value for", "step");
	if (r) {
		m->step = x;
		m->has |= RUN_HAS_STEP;
	}
	if ((r = get_int(o, "device", 0, 65535, &x)) < 0)
		return fail(err, errlen, "bad value for", "device");
	if (r) {
		m->device = (int)x;
		m->has |= RUN_HAS_DEVICE;
	}
	return 0;
}

struct byte_field {
	const char *key;
	unsigned bit;
	size_t off;
};

#define FIELD(key, bit, member) {key, bit, offsetof(struct run_msg, member)}
static const struct byte_field sample_bytes[] = {
	FIELD("allocated", RUN_HAS_ALLOCATED, allocated),
	FIELD("reserved", RUN_HAS_RESERVED, reserved),
	FIELD("max_allocated", RUN_HAS_MAX_ALLOCATED, max_allocated),
	FIELD("limit", RUN_HAS_LIMIT, limit),
};
#undef FIELD

/* The byte fields of a table, each at most max. */
static int parse_bytes(json_t *o, struct run_msg *m, const struct byte_field *f, size_t n, uint64_t max, char *err,
		       size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t *dst = (uint64_t *)(void *)((char *)m + f[i].off);
		int r = get_bytes(o, f[i].key, max, dst);
		if (r < 0)
			return fail(err, errlen, "bad value for", f[i].key);
		if (r)
			m->has |= f[i].bit;
	}
	return 0;
}

/* oom: the library's byte figures, by the names it gives them, each at most GPUMON_MAX_BYTES. */
static int parse_figures(json_t *o, gpumon_oom_figures *f, char *err, size_t errlen)
{
	for (unsigned bit = 1; bit; bit <<= 1) {
		const char *name = gpumon_oom_figure_name(bit);
		if (!name)
			continue;
		int r = get_bytes(o, name, GPUMON_MAX_BYTES, gpumon_oom_figure_field(f, bit));
		if (r < 0)
			return fail(err, errlen, "bad value for", name);
		if (r)
			f->known |= bit;
	}
	return 0;
}

/* inside: "state" "on" or "off" (required), framework and version as hello's, a reason that fits. */
static int parse_inside(json_t *o, struct run_msg *m, char *err, size_t errlen)
{
	const char *state = json_string_value(json_object_get(o, "state"));
	json_t *reason = json_object_get(o, "reason");
	if (!state || (strcmp(state, "on") && strcmp(state, "off")))
		return fail(err, errlen, "\"on\" or \"off\" wanted for", "state");
	m->inside_on = !strcmp(state, "on");
	if (get_str(o, "framework", m->framework, sizeof m->framework) < 0 ||
	    get_str(o, "version", m->fw_version, sizeof m->fw_version) < 0)
		return fail(err, errlen, "framework and version must be strings", NULL);
	if (reason && !json_is_null(reason) && (!json_is_string(reason) || json_string_length(reason) > RUN_REASON_MAX))
		return fail(err, errlen, "a string of at most 1023 bytes wanted for", "reason");
	if (reason && json_is_string(reason))
		copy_str(m->text, sizeof m->text, json_string_value(reason));
	return 0;
}

/* snapshot: the object, kept as compact JSON for the library to read (cmd_run.c). */
static int parse_snapshot(json_t *o, struct run_msg *m, char *err, size_t errlen)
{
	json_t *snap = json_object_get(o, "snapshot");
	if (!json_is_object(snap))
		return fail(err, errlen, "an object wanted for", "snapshot");
	if (!(m->snapshot = json_dumps(snap, JSON_COMPACT)))
		return fail(err, errlen, "out of memory", NULL);
	m->snapshot_len = strlen(m->snapshot);
	return 0;
}

static int parse_fields(json_t *o, struct run_msg *m, char *err, size_t errlen)
{
	long long x;
	int r;
	if (parse_common(o, m, err, errlen))
		return -1;
	if (m->type == RUN_MSG_HELLO) {
		if ((r = get_int(o, "v", 0, 0x7fffffffLL, &x)) < 0)
			return fail(err, errlen, "bad value for", "v");
		if (r) {
			m->v = (int)x;
			m->has |= RUN_HAS_VERSION;
		}
		if (get_str(o, "framework", m->framework, sizeof m->framework) < 0 ||
		    get_str(o, "version", m->fw_version, sizeof m->fw_version) < 0)
			return fail(err, errlen, "framework and version must be strings", NULL);
	} else if (m->type == RUN_MSG_SAMPLE) {
		return parse_bytes(o, m, sample_bytes, sizeof sample_bytes / sizeof sample_bytes[0], UINT64_MAX, err,
				   errlen);
	} else if (m->type == RUN_MSG_MARKER) {
		if (get_str(o, "text", m->text, sizeof m->text) < 0)
			return fail(err, errlen, "bad value for", "text");
	} else if (m->type == RUN_MSG_OOM) {
		if (get_str(o, "framework", m->framework, sizeof m->framework) < 0)
			return fail(err, errlen, "bad value for", "framework");
		return parse_figures(o, &m->fig, err, errlen);
	} else if (m->type == RUN_MSG_INSIDE) {
		return parse_inside(o, m, err, errlen);
	} else if (m->type == RUN_MSG_SNAPSHOT) {
		return parse_snapshot(o, m, err, errlen);
	}
	return 0;
}

int run_msg_parse(const char *line, size_t len, struct run_msg *out, char *err, size_t errlen)
{
	json_error_t je;
	memset(out, 0, sizeof *out);
	out->device = -1;
	out->step = -1;
	if (errlen)
		err[0] = 0;
	if (len > RUN_MSG_MAX_LINE)
		return fail(err, errlen, "line longer than 64 KiB", NULL);
	json_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &je);
	if (!o)
		return fail(err, errlen, "not JSON", NULL);
	int rc = -1;
	json_t *type = json_object_get(o, "type");
	if (!json_is_object(o))
		fail(err, errlen, "not a JSON object", NULL);
	else if (!json_is_string(type))
		fail(err, errlen, "no string", "type");
	else {
		out->type = msg_type(json_string_value(type));
		rc = out->type == RUN_MSG_UNKNOWN ? 0 : parse_fields(o, out, err, errlen);
	}
	json_decref(o);
	return rc;
}

void run_msg_release(struct run_msg *m)
{
	free(m->snapshot); /* jansson's default allocator is malloc */
	m->snapshot = NULL;
	m->snapshot_len = 0;
}

/* ---- the server ---------------------------------------------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int run_server_open(struct run_server **out, char *err, size_t errlen)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	const char *tmp = getenv("TMPDIR");
	struct run_server *s = calloc(1, sizeof *s);
	*out = NULL;
	if (!s)
		return fail(err, errlen, "out of memory", NULL);
	s->fd = -1;
	s->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (!tmp || !*tmp || strlen(tmp) > 80)
		tmp = "/tmp";
	snprintf(s->dir, sizeof s->dir, "%s/gpumon-run-XXXXXX", tmp);
	if (!mkdtemp(s->dir)) {
		snprintf(err, errlen, "cannot create a directory in %s: %s", tmp, strerror(errno));
		s->dir[0] = 0;
		run_server_close(s);
		return -1;
	}
	chmod(s->dir, 0700);
	size_t dl = strlen(s->dir); /* at most 80 + 18 bytes, checked above */
	memcpy(s->path, s->dir, dl);
	memcpy(s->path + dl, "/sock", 6);
	memcpy(a.sun_path, s->path, sizeof a.sun_path);
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->fd, SOMAXCONN) != 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", s->path, strerror(errno));
		run_server_close(s);
		return -1;
	}
	*out = s;
	return 0;
}

const char *run_server_path(const struct run_server *s)
{
	return s->path;
}

const char *run_server_dir(const struct run_server *s)
{
	return s->dir;
}

void run_server_stats_get(const struct run_server *s, struct run_server_stats *out)
{
	*out = s->stats;
}

static void refuse(struct run_server *s, int fd, int why)
{
	close(fd);
	s->stats.refused++;
	s->stats.refused_errno = why;
}

/* Whether descriptor fd leaves too few for gpumon's own files (the soft RLIMIT_NOFILE). */
static int too_high(int fd)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
		return 0;
	return (rlim_t)fd + FD_HEADROOM >= r.rlim_cur;
}

/* Room for one more client in the table and the poll set; 0, or -1 out of memory. */
static int make_room(struct run_server *s)
{
	if (s->nclients < s->cap)
		return 0;
	size_t cap = s->cap ? s->cap * 2 : 16;
	struct client *c = realloc(s->clients, cap * sizeof *c);
	if (!c)
		return -1;
	s->clients = c;
	struct pollfd *p = realloc(s->pfd, (cap + 2) * sizeof *p);
	if (!p)
		return -1;
	s->pfd = p;
	s->cap = cap;
	return 0;
}

/* Out of descriptors: the reserve is given back for one accept, so that the connection at the head of
 * the backlog can be taken off it and closed. Returns its fd, or -1 (the listener then rests). */
static int accept_with_reserve(struct run_server *s)
{
	if (s->reserve < 0)
		return -1;
	close(s->reserve);
	int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	int e = errno;
	s->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	errno = e;
	return fd;
}

/* Takes every connection queued. One that cannot be kept (out of descriptors or memory) is closed at
 * once and counted, never left in the backlog. */
static void accept_all(struct run_server *s)
{
	if (s->reserve < 0)
		s->reserve = open("/dev/null", O_RDONLY | O_CLOEXEC);
	for (;;) {
		int fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), why = errno;
		if (fd < 0 && (why == EMFILE || why == ENFILE)) {
			if ((fd = accept_with_reserve(s)) >= 0) {
				refuse(s, fd, why);
				continue;
			}
			why = errno == EAGAIN || errno == EWOULDBLOCK ? 0 : why;
		}
		if (fd < 0) {
			if (why == EINTR || why == ECONNABORTED || why == EPROTO)
				continue;
			if (why && why != EAGAIN && why != EWOULDBLOCK) /* cannot even refuse: try again later */
				s->rest_until_ns = now_ns() + REST_NS;
			return;
		}
		if (too_high(fd)) {
			refuse(s, fd, EMFILE);
			continue;
		}
		if (make_room(s) != 0) {
			refuse(s, fd, ENOMEM);
			continue;
		}
		struct client *c = &s->clients[s->nclients++];
		struct ucred cred;
		socklen_t cl = sizeof cred;
		*c = (struct client){.fd = fd};
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0 && cred.pid > 0)
			c->peer_pid = (unsigned)cred.pid;
		s->stats.clients++;
	}
}

static void handle_line(struct run_server *s, const struct client *c, const char *line, size_t len,
			run_msg_fn fn, void *ctx)
{
	struct run_msg m;
	char err[128];
	if (len && line[len - 1] == '\r')
		len--;
	if (len == 0)
		return; /* blank lines are keep-alives */
	if (run_msg_parse(line, len, &m, err, sizeof err) != 0)
		s->stats.malformed++;
	else if (m.type == RUN_MSG_UNKNOWN)
		s->stats.unknown++;
	else if (fn(ctx, &m, c->peer_pid) != 0)
		s->stats.malformed++;
	else
		s->stats.messages++;
	run_msg_release(&m);
}

/* Splits the bytes just read into lines; a line that outgrows the buffer is dropped whole. */
static void take_lines(struct run_server *s, struct client *c, run_msg_fn fn, void *ctx)
{
	size_t start = 0;
	for (size_t i = 0; i < c->len; i++) {
		if (c->buf[i] != '\n')
			continue;
		if (!c->discarding)
			handle_line(s, c, c->buf + start, i - start, fn, ctx);
		c->discarding = 0;
		start = i + 1;
	}
	memmove(c->buf, c->buf + start, c->len - start);
	c->len -= start;
	if (c->len > RUN_MSG_MAX_LINE) {
		if (!c->discarding)
			s->stats.malformed++;
		c->discarding = 1;
		c->len = 0;
	}
}

/* A full buffer grows (doubling) up to a line's limit; 0, or -1 out of memory. */
static int grow(struct client *c)
{
	if (c->len < c->cap)
		return 0;
	size_t cap = c->cap ? c->cap * 2 : BUF_FIRST;
	if (cap > RUN_MSG_MAX_LINE + 1)
		cap = RUN_MSG_MAX_LINE + 1;
	char *b = realloc(c->buf, cap);
	if (!b)
		return -1;
	c->buf = b;
	c->cap = cap;
	return 0;
}

/* Reads what a client sent; returns -1 when it has hung up (or its buffer cannot grow). */
static int read_client(struct run_server *s, struct client *c, run_msg_fn fn, void *ctx)
{
	for (int rounds = 0; rounds < 16; rounds++) {
		if (grow(c) != 0) {
			s->stats.refused++; /* closed: gpumon cannot hold its line */
			s->stats.refused_errno = ENOMEM;
			return -1;
		}
		ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
		if (r == 0) {
			if (c->len && !c->discarding) /* a last line without its newline */
				handle_line(s, c, c->buf, c->len, fn, ctx);
			return -1;
		}
		c->len += (size_t)r;
		take_lines(s, c, fn, ctx);
	}
	return 0;
}

static void drop_client(struct run_server *s, size_t i)
{
	close(s->clients[i].fd);
	free(s->clients[i].buf);
	s->clients[i] = s->clients[--s->nclients];
}

int run_server_poll(struct run_server *s, int extra_fd, int timeout_ms, run_msg_fn fn, void *ctx)
{
	struct pollfd one[2], *p = s->pfd ? s->pfd : one;
	size_t n = 0, nc = s->nclients;
	int resting = s->rest_until_ns && now_ns() < s->rest_until_ns;
	p[n++] = (struct pollfd){.fd = extra_fd, .events = POLLIN};
	p[n++] = (struct pollfd){.fd = resting ? -1 : s->fd, .events = POLLIN}; /* poll skips fd -1 */
	for (size_t i = 0; i < nc; i++)
		p[n++] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLIN};
	if (poll(p, n, timeout_ms) <= 0)
		return 0;
	int extra = extra_fd >= 0 && (p[0].revents & (POLLIN | POLLHUP));
	int listener = (p[1].revents & POLLIN) != 0;
	/* clients first, from the last, so that dropping one does not move the others unread */
	for (size_t i = nc; i-- > 0;)
		if (p[2 + i].revents && read_client(s, &s->clients[i], fn, ctx) < 0)
			drop_client(s, i);
	if (listener)
		accept_all(s); /* may move s->pfd: p is not read after this */
	return extra;
}

/* Empties the directory open as fd (depth 0: its subdirectories too, one level down) and closes fd.
 * Links are removed, never followed. */
static void empty_dir(int fd, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(fd, e->d_name, 0) == 0 || errno != EISDIR || depth > 0)
			continue;
		int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub >= 0)
			empty_dir(sub, depth + 1);
		unlinkat(fd, e->d_name, AT_REMOVEDIR);
	}
	closedir(d); /* closes fd */
}

/* Removes the run's private directory: the socket and whatever else the run put there (the inside
 * view's bootstrap, and the __pycache__ Python wrote beside it). */
static void remove_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		empty_dir(fd, 0);
	rmdir(dir);
}

void run_server_close(struct run_server *s)
{
	if (!s)
		return;
	while (s->nclients)
		drop_client(s, s->nclients - 1);
	free(s->clients);
	free(s->pfd);
	if (s->fd >= 0)
		close(s->fd);
	if (s->reserve >= 0)
		close(s->reserve);
	if (s->dir[0])
		remove_dir(s->dir);
	free(s);
}

/* Why the socket closed a connection, in words; past: as the summary says it. */
void run_server_refusal_reason(char *buf, size_t len, int err, int past)
{
	struct rlimit rl;
	if (err == EMFILE && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		snprintf(buf, len, "gpumon %s out of file descriptors (ulimit -n %llu)", past ? "was" : "is",
			 (unsigned long long)rl.rlim_cur);
	else if (err == EMFILE || err == ENFILE)
		snprintf(buf, len, "%s out of file descriptors", err == ENFILE ? (past ? "the system was" : "the system is")
										: (past ? "gpumon was" : "gpumon is"));
	else
		snprintf(buf, len, "gpumon %s out of memory", past ? "was" : "is");
}
