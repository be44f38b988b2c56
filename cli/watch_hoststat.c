/* SPDX-License-Identifier: MIT */
/* watch_hoststat.c — the host side of a GPU process on the live screen of `gpumon watch`: CPU % of
 * one core, resident memory and time since it started, as the library reads them
 * (gpumon_host_process_read). Only the rows on the screen are asked for, each at most once a period,
 * so the cost stays that of a few small reads a second whatever the refresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "watch.h"

struct entry {
	unsigned pid;
	int seen;                       /* asked for since the last sweep */
	uint64_t start_ticks;           /* which process this is (a reused pid starts later) */
	uint64_t start_wall_ns;         /* when it started, on the wall clock */
	uint64_t cpu_ns;                /* CPU time at the last reading */
	uint64_t read_ns;               /* when it was read (CLOCK_MONOTONIC) */
	int cpu_known;
	double cpu_pct;
	uint64_t rss_bytes;
};

struct watch_hoststat {
	uint64_t period_ns;
	struct entry *e;
	size_t n, cap;
};

watch_hoststat *watch_hoststat_create(unsigned period_ms)
{
	watch_hoststat *h = calloc(1, sizeof *h);
	if (!h)
		return NULL;
	h->period_ns = (uint64_t)period_ms * 1000000u;
	return h;
}

void watch_hoststat_destroy(watch_hoststat *h)
{
	if (!h)
		return;
	free(h->e);
	free(h);
}

int watch_proc_identity(unsigned pid, unsigned long long *start_ticks, unsigned *uid)
{
	gpumon_host_process hp = {.size = sizeof hp};
	if (pid == 0 || gpumon_host_process_read(pid, GPUMON_HOST_USER, &hp) != GPUMON_OK)
		return -1;
	if (!(hp.present & GPUMON_HOST_OWN_PIDS))
		return -2;
	if (!(hp.present & GPUMON_HOST_USER))
		return -1;
	*start_ticks = hp.start_ticks;
	*uid = hp.uid;
	return 0;
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
static int refresh(struct entry *e, uint64_t now_ns)
{
	gpumon_host_process hp = {.size = sizeof hp};
	if (gpumon_host_process_read(e->pid, 0, &hp) != GPUMON_OK)
		return -1;
	int same = e->read_ns && e->start_ticks == hp.start_ticks;
	e->cpu_known = same && now_ns > e->read_ns && hp.cpu_ns >= e->cpu_ns;
	if (e->cpu_known)
		e->cpu_pct = 100.0 * (double)(hp.cpu_ns - e->cpu_ns) / (double)(now_ns - e->read_ns);
	e->start_ticks = hp.start_ticks;
	e->start_wall_ns = hp.start_wall_ns;
	e->cpu_ns = hp.cpu_ns;
	e->read_ns = now_ns;
	e->rss_bytes = hp.rss_bytes;
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
	if ((!e->read_ns || now_ns >= e->read_ns + h->period_ns) && refresh(e, now_ns) < 0) {
		e->read_ns = 0; /* gone: nothing is shown, and a pid that comes back is read afresh */
		return;
	}
	if (!e->read_ns)
		return;
	out->cpu_known = e->cpu_known;
	out->cpu_pct = e->cpu_pct;
	out->rss_known = 1;
	out->rss_bytes = e->rss_bytes;
	struct timespec ts;
	if (e->start_wall_ns && clock_gettime(CLOCK_REALTIME, &ts) == 0) {
		out->elapsed_known = 1;
		out->elapsed_s = (double)ts.tv_sec + ts.tv_nsec / 1e9 - (double)e->start_wall_ns / 1e9;
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
