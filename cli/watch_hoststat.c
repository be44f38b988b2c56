/* SPDX-License-Identifier: MIT */
/* watch_hoststat.c — the host side of a GPU process on the live screen of `gpumon watch`: CPU % of
 * one core, resident memory and time since it started, from /proc/PID/stat. Only the rows on the
 * screen are read, each at most once a period, so the cost stays that of a few small reads a second
 * whatever the refresh. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "watch.h"

struct entry {
	unsigned pid;
	int seen;                       /* asked for since the last sweep */
	unsigned long long start_ticks; /* which process this is (a reused pid starts later) */
	unsigned long long cpu_ticks;   /* utime + stime at the last reading */
	uint64_t read_ns;               /* when it was read (CLOCK_MONOTONIC) */
	int cpu_known;
	double cpu_pct;
	uint64_t rss_bytes;
};

struct watch_hoststat {
	uint64_t period_ns;
	struct entry *e;
	size_t n, cap;
	long tick_hz, page_bytes;
};

watch_hoststat *watch_hoststat_create(unsigned period_ms)
{
	watch_hoststat *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->period_ns = (uint64_t)period_ms * 1000000u;
	h->tick_hz = sysconf(_SC_CLK_TCK);
	h->page_bytes = sysconf(_SC_PAGESIZE);
	if (h->tick_hz <= 0)
		h->tick_hz = 100;
	if (h->page_bytes <= 0)
		h->page_bytes = 4096;
	return h;
}

void watch_hoststat_destroy(watch_hoststat *h)
{
	if (!h)
		return;
	free(h->e);
	free(h);
}

/* The fields of /proc/PID/stat after the command name (which may hold blanks and parentheses: the
 * last ')' ends it): utime, stime, starttime, rss. Returns 0, or -1 when gone or unreadable. */
struct stat_fields {
	unsigned long long utime, stime, start, rss_pages;
};

static int read_stat(unsigned pid, struct stat_fields *out)
{
	char path[48], buf[1024];
	snprintf(path, sizeof path, "/proc/%u/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, buf, sizeof buf - 1);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	/* field 3 (state) onwards; utime is field 14, stime 15, starttime 22, rss 24 (proc(5)) */
	unsigned long long f[22];
	int k = 0;
	for (p++; k < 22 && *p;) {
		while (*p == ' ')
			p++;
		char *end;
		f[k] = strtoull(p, &end, 10);
		if (end == p) { /* the state letter */
			f[k] = 0;
			while (*end && *end != ' ')
				end++;
		}
		p = end;
		k++;
	}
	if (k < 22)
		return -1;
	out->utime = f[11];
	out->stime = f[12];
	out->start = f[19];
	out->rss_pages = f[21];
	return 0;
}

int watch_proc_identity(unsigned pid, unsigned long long *start_ticks, unsigned *uid)
{
	struct stat_fields sf;
	if (pid == 0 || read_stat(pid, &sf) < 0)
		return -1;
	*start_ticks = sf.start;
	char path[48], buf[4096];
	snprintf(path, sizeof path, "/proc/%u/status", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	int found = 0;
	while (!found && fgets(buf, sizeof buf, f))
		found = sscanf(buf, "Uid: %u", uid) == 1;
	fclose(f);
	return found ? 0 : -1;
}

static double boot_seconds(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
		return -1;
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct entry *find(watch_hoststat *h, unsigned pid)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->e[i].pid == pid)
			return &h->e[i];
	return NULL;
}

static struct entry *add(watch_hoststat *h, unsigned pid)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 32;
		if (cap > SIZE_MAX / sizeof *h->e)
			return NULL;
		struct entry *e = realloc(h->e, cap * sizeof *e);
		if (!e)
			return NULL;
		h->e = e;
		h->cap = cap;
	}
	struct entry *e = &h->e[h->n++];
	memset(e, 0, sizeof *e);
	e->pid = pid;
	return e;
}

/* Reads the pid again: the CPU % over the time since the previous reading of the same process. */
static int refresh(watch_hoststat *h, struct entry *e, uint64_t now_ns)
{
	struct stat_fields sf;
	if (read_stat(e->pid, &sf) < 0)
		return -1;
	unsigned long long ticks = sf.utime + sf.stime;
	int same = e->read_ns && e->start_ticks == sf.start;
	e->cpu_known = same && now_ns > e->read_ns && ticks >= e->cpu_ticks;
	if (e->cpu_known)
		e->cpu_pct = 100.0 * (double)(ticks - e->cpu_ticks) / (double)h->tick_hz / ((double)(now_ns - e->read_ns) / 1e9);
	e->start_ticks = sf.start;
	e->cpu_ticks = ticks;
	e->read_ns = now_ns;
	e->rss_bytes = sf.rss_pages * (uint64_t)h->page_bytes;
	return 0;
}

void watch_hoststat_get(watch_hoststat *h, unsigned pid, uint64_t now_ns, watch_host *out)
{
	memset(out, 0, sizeof *out);
	if (!h || pid == 0)
		return;
	struct entry *e = find(h, pid);
	if (!e && !(e = add(h, pid)))
		return;
	e->seen = 1;
	if ((!e->read_ns || now_ns >= e->read_ns + h->period_ns) && refresh(h, e, now_ns) < 0) {
		e->read_ns = 0; /* gone: nothing is shown, and a pid that comes back is read afresh */
		return;
	}
	if (!e->read_ns)
		return;
	out->cpu_known = e->cpu_known;
	out->cpu_pct = e->cpu_pct;
	out->rss_known = 1;
	out->rss_bytes = e->rss_bytes;
	double up = boot_seconds();
	if (up >= 0) {
		out->elapsed_known = 1;
		out->elapsed_s = up - (double)e->start_ticks / (double)h->tick_hz;
		if (out->elapsed_s < 0)
			out->elapsed_s = 0;
	}
}

void watch_hoststat_sweep(watch_hoststat *h)
{
	if (!h)
		return;
	size_t k = 0;
	for (size_t i = 0; i < h->n; i++)
		if (h->e[i].seen) {
			h->e[i].seen = 0;
			h->e[k++] = h->e[i];
		}
	h->n = k;
}

const char *watch_format_elapsed(char *buf, size_t len, double seconds)
{
	unsigned long long t = seconds > 0 ? (seconds < 1e12 ? (unsigned long long)seconds : 1000000000000ull) : 0;
	if (t >= 86400)
		snprintf(buf, len, "%llud %02lluh", t / 86400, t / 3600 % 24);
	else if (t >= 3600)
		snprintf(buf, len, "%llu:%02llu:%02llu", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, len, "%02llu:%02llu", t / 60, t % 60);
	return buf;
}
