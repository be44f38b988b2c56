/* SPDX-License-Identifier: MIT */
/* run_tree.c — one scan of /proc/[0-9]*\/stat gives every (pid, parent) pair; a breadth-first walk
 * from the root over those pairs gives the tree. Processes may exit mid-scan: a stat file that
 * cannot be read or parsed is skipped, never an error. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run_tree.h"

#define DEFAULT_MAX_PROCS 1000000

struct pair {
	pid_t pid, ppid;
};

/* Parses a decimal pid (1 .. 2^31-1) at s..end; returns it or -1. */
static long parse_pid(const char *s, const char *end, const char **stop)
{
	long v = 0;
	const char *p = s;
	while (p < end && *p >= '0' && *p <= '9') {
		v = v * 10 + (*p - '0');
		if (v > 0x7fffffffL)
			return -1;
		p++;
	}
	*stop = p;
	return p == s ? -1 : v;
}

int run_tree_parse_stat(const char *buf, size_t len, pid_t *pid, pid_t *ppid)
{
	const char *end = buf + len, *p, *close = NULL;
	long a = parse_pid(buf, end, &p);
	if (a <= 0 || p + 2 > end || p[0] != ' ' || p[1] != '(')
		return -1;
	for (const char *q = p + 2; q < end; q++)
		if (*q == ')')
			close = q;
	/* after the name: " S PPID " (state is one character) */
	if (!close || end - close < 5 || close[1] != ' ' || close[3] != ' ')
		return -1;
	long b = parse_pid(close + 4, end, &p);
	if (b < 0 || (p < end && *p != ' ' && *p != '\n'))
		return -1;
	*pid = (pid_t)a;
	*ppid = (pid_t)b;
	return 0;
}

/* Reads one stat file; returns 0 and the pair, or -1 when the process is gone or odd. */
static int read_pair(const char *name, struct pair *out)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%s/stat", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r;
	do
		r = read(fd, buf, sizeof buf);
	while (r < 0 && errno == EINTR);
	close(fd);
	if (r <= 0)
		return -1;
	return run_tree_parse_stat(buf, (size_t)r, &out->pid, &out->ppid);
}

static int is_pid_name(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/* Every (pid, ppid) of /proc, at most max entries; returns the count or -1. */
static long scan_all(struct pair **out, size_t max)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	struct pair *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL && n < max) {
		struct pair p;
		if (!is_pid_name(e->d_name) || read_pair(e->d_name, &p) != 0)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 512;
			struct pair *nv = realloc(v, nc * sizeof *nv);
			if (!nv) {
				free(v);
				closedir(d);
				return -1;
			}
			v = nv;
			cap = nc;
		}
		v[n++] = p;
	}
	closedir(d);
	*out = v;
	return (long)n;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_ppid(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	return x->ppid < y->ppid ? -1 : x->ppid > y->ppid;
}

/* Index of the first pair whose parent is ppid in v (sorted by ppid), or n. */
static size_t first_child(const struct pair *v, size_t n, pid_t ppid)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].ppid < ppid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int run_tree_scan(pid_t root, size_t max_procs, struct run_tree *t)
{
	struct pair *v = NULL;
	t->n = 0;
	t->pids = malloc(sizeof *t->pids);
	if (!t->pids)
		return -1;
	t->pids[t->n++] = root;
	long n = scan_all(&v, max_procs ? max_procs : DEFAULT_MAX_PROCS);
	if (n <= 0)
		return n < 0 ? -1 : 0;
	qsort(v, (size_t)n, sizeof *v, cmp_ppid);
	/* the queue is t->pids itself; each pid is queued once since a pid has one parent, and the
	   walk stops at n entries whatever /proc said (a pid reused mid-scan cannot loop it) */
	pid_t *q = realloc(t->pids, ((size_t)n + 1) * sizeof *q);
	if (!q) {
		free(v);
		return -1;
	}
	t->pids = q;
	for (size_t head = 0; head < t->n && t->n <= (size_t)n; head++) {
		pid_t p = t->pids[head];
		for (size_t i = first_child(v, (size_t)n, p); i < (size_t)n && v[i].ppid == p; i++)
			if (v[i].pid != root && v[i].pid != p && t->n <= (size_t)n)
				t->pids[t->n++] = v[i].pid;
	}
	free(v);
	qsort(t->pids, t->n, sizeof *t->pids, cmp_pid);
	/* drop duplicates a racing scan could produce */
	size_t w = 0;
	for (size_t i = 0; i < t->n; i++)
		if (w == 0 || t->pids[w - 1] != t->pids[i])
			t->pids[w++] = t->pids[i];
	t->n = w;
	return 0;
}

int run_tree_contains(const struct run_tree *t, pid_t pid)
{
	return t->n && bsearch(&pid, t->pids, t->n, sizeof *t->pids, cmp_pid) != NULL;
}

void run_tree_free(struct run_tree *t)
{
	free(t->pids);
	t->pids = NULL;
	t->n = 0;
}
