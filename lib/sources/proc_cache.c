/* SPDX-License-Identifier: MIT */
/* proc_cache.c — what /proc (and NVML's process name) said about a pid, kept for a few seconds
 * keyed by pid and start time, so that listing a node's thousands of GPU processes ten times a
 * second reads one small file per process, not five and the password database. A pid reused by
 * a new process has another start time and is read afresh; an entry is read again after 5 s
 * anyway (a process may exec, or be moved to another cgroup). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../internal.h"

#define FRESH_NS 5000000000ull   /* an entry is used this long, then read again */
#define FORGET_NS 30000000000ull /* an entry not asked for this long goes at the next rebuild */
#define MIN_CAP 64u

/* The flags /proc gives (the rest are NVML's and are the caller's). */
#define PROC_BITS                                                                                   \
	(GPUMON_PROC_USER_KNOWN | GPUMON_PROC_CMDLINE_KNOWN | GPUMON_PROC_NAME_KNOWN | GPUMON_PROC_PPID_KNOWN |    \
	 GPUMON_PROC_RANK_KNOWN)

struct entry {
	unsigned pid;               /* 0: empty slot */
	uint64_t start;             /* /proc/PID/stat's start time, in clock ticks since boot */
	uint64_t read_ns, used_ns;  /* when read, when last asked for */
	unsigned flags;             /* PROC_BITS */
	unsigned uid, ppid;
	char user[sizeof ((gpumon_process *)0)->user];
	char name[sizeof ((gpumon_process *)0)->name];
	char cmdline[sizeof ((gpumon_process *)0)->cmdline];
	gpumon_owner owner;
	gpumon_rank rank;
};

struct gpumon__proc_cache {
	pthread_mutex_t lock;
	struct entry *e;
	size_t cap, n;   /* cap a power of two; n slots in use */
};

struct gpumon__proc_cache *gpumon__proc_cache_new(void)
{
	struct gpumon__proc_cache *c = calloc(1, sizeof *c);
	if (c)
		pthread_mutex_init(&c->lock, NULL);
	return c;
}

void gpumon__proc_cache_free(struct gpumon__proc_cache *c)
{
	if (!c)
		return;
	pthread_mutex_destroy(&c->lock);
	free(c->e);
	free(c);
}

static size_t slot_of(const struct gpumon__proc_cache *c, unsigned pid)
{
	size_t i = ((size_t)pid * 2654435761u) & (c->cap - 1);
	while (c->e[i].pid && c->e[i].pid != pid)
		i = (i + 1) & (c->cap - 1);
	return i;
}

/* Rebuilds the table at twice the entries still wanted (those asked for in the last FORGET_NS).
 * Returns 0, or -1 when out of memory (the table stays as it was). */
static int rebuild(struct gpumon__proc_cache *c, uint64_t now)
{
	size_t keep = 0;
	for (size_t i = 0; i < c->cap; i++)
		keep += c->e[i].pid && now - c->e[i].used_ns < FORGET_NS;
	size_t cap = MIN_CAP;
	while (cap < 4 * (keep + 1))
		cap *= 2;
	struct entry *old = c->e, *e = calloc(cap, sizeof *e);
	if (!e)
		return -1;
	size_t oldcap = c->cap;
	c->e = e;
	c->cap = cap;
	c->n = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].pid && now - old[i].used_ns < FORGET_NS) {
			c->e[slot_of(c, old[i].pid)] = old[i];
			c->n++;
		}
	free(old);
	return 0;
}

int gpumon__proc_start(unsigned pid, uint64_t *start)
{
	struct gpumon__proc_stat st;
	if (gpumon__proc_stat_read(pid, &st) != 0)
		return -1;
	*start = st.start;
	return 0;
}

int gpumon__proc_cache_get(struct gpumon__proc_cache *c, gpumon_process *p, uint64_t start, uint64_t now)
{
	int hit = 0;
	pthread_mutex_lock(&c->lock);
	if (c->cap) {
		struct entry *e = &c->e[slot_of(c, p->pid)];
		if (e->pid == p->pid && e->start == start && now - e->read_ns < FRESH_NS) {
			p->flags = (p->flags & ~(unsigned)PROC_BITS) | e->flags;
			p->uid = e->uid;
			p->ppid = e->ppid;
			memcpy(p->user, e->user, sizeof p->user);
			memcpy(p->name, e->name, sizeof p->name);
			memcpy(p->cmdline, e->cmdline, sizeof p->cmdline);
			p->owner = e->owner;
			p->rank = e->rank;
			e->used_ns = now;
			hit = 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return hit;
}

void gpumon__proc_cache_put(struct gpumon__proc_cache *c, const gpumon_process *p, uint64_t start, uint64_t now)
{
	pthread_mutex_lock(&c->lock);
	if ((c->n + 1) * 2 > c->cap && rebuild(c, now) != 0) {
		pthread_mutex_unlock(&c->lock); /* out of memory: not kept, read again next time */
		return;
	}
	struct entry *e = &c->e[slot_of(c, p->pid)];
	if (!e->pid)
		c->n++;
	e->pid = p->pid;
	e->start = start;
	e->read_ns = e->used_ns = now;
	e->flags = p->flags & PROC_BITS;
	e->uid = p->uid;
	e->ppid = p->ppid;
	memcpy(e->user, p->user, sizeof e->user);
	memcpy(e->name, p->name, sizeof e->name);
	memcpy(e->cmdline, p->cmdline, sizeof e->cmdline);
	e->owner = p->owner;
	e->rank = p->rank;
	pthread_mutex_unlock(&c->lock);
}
