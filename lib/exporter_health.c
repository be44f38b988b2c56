/* SPDX-License-Identifier: MIT */
/* exporter_health.c — the exporter's memory health figures: a thread of their own reads each
 * GPU's ECC counts, remapped rows and retired pages every 30 s (a GPU whose driver calls hang
 * stalls only it, never the collector or a scrape), and the collector counts the XID errors the
 * sampler reports. The verdict on them is the library's (gpumon_health_problems). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "exporter.h"

#define HEALTH_PERIOD_NS 30000000000ull

/* Shared by the exporter and its health thread; freed by the last of the two to let go (a thread
 * left in a hung driver call frees it when the call returns). */
struct exporter_health {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int stop, done, refs;
	gpumon *g;
	unsigned n;
	gpumon_device_props *props; /* n; props[i].size 0: not read (yet), or a MIG device */
	int *mig;                   /* n: MIG devices have no health of their own (their GPU has it) */
};

static void health_unref_locked(struct exporter_health *h)
{
	int last = --h->refs == 0;
	pthread_mutex_unlock(&h->lock);
	if (last) {
		pthread_cond_destroy(&h->wake);
		pthread_mutex_destroy(&h->lock);
		free(h->props);
		free(h->mig);
		free(h);
	}
}

static void *health_main(void *arg)
{
	struct exporter_health *h = arg;
	pthread_setname_np(pthread_self(), "gpumon-health");
	pthread_mutex_lock(&h->lock);
	while (!h->stop) {
		for (unsigned i = 0; i < h->n && !h->stop; i++) {
			if (h->mig[i])
				continue;
			pthread_mutex_unlock(&h->lock);
			gpumon_device_props p = {.size = sizeof p};
			int st = gpumon_device_props_read(h->g, i, GPUMON_P_HEALTH, &p);
			pthread_mutex_lock(&h->lock);
			if (st == GPUMON_OK)
				h->props[i] = p;
			else
				h->props[i].size = 0; /* lost, or not answering: no figures rather than old ones */
		}
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		uint64_t at = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec + HEALTH_PERIOD_NS;
		t.tv_sec = (time_t)(at / 1000000000u);
		t.tv_nsec = (long)(at % 1000000000u);
		while (!h->stop && pthread_cond_timedwait(&h->wake, &h->lock, &t) != ETIMEDOUT)
			;
	}
	h->done = 1;
	pthread_cond_broadcast(&h->wake);
	gpumon *g = h->g;
	health_unref_locked(h);
	gpumon__release(g);
	return NULL;
}

int gpumon__exporter_health_start(gpumon_exporter *e)
{
	if (!e->g || e->replaying || !e->ngpus)
		return GPUMON_OK;
	struct exporter_health *h = calloc(1, sizeof *h);
	if (!h)
		return GPUMON_E_NOMEM;
	h->n = e->ngpus;
	h->g = e->g;
	h->props = calloc(h->n, sizeof *h->props);
	h->mig = calloc(h->n, sizeof *h->mig);
	pthread_condattr_t a;
	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->wake, &a);
	pthread_condattr_destroy(&a);
	if (!h->props || !h->mig) {
		h->refs = 1;
		pthread_mutex_lock(&h->lock);
		health_unref_locked(h);
		return GPUMON_E_NOMEM;
	}
	for (unsigned i = 0; i < h->n; i++)
		h->mig[i] = e->gpus[i].info.mig;
	h->refs = 2;
	gpumon__hold(e->g);
	pthread_t t;
	if (pthread_create(&t, NULL, health_main, h) != 0) {
		gpumon__release(e->g);
		h->refs = 1;
		pthread_mutex_lock(&h->lock);
		health_unref_locked(h);
		return GPUMON_E_NOMEM;
	}
	pthread_detach(t);
	e->health = h;
	return GPUMON_OK;
}

void gpumon__exporter_health_stop(gpumon_exporter *e)
{
	struct exporter_health *h = e->health;
	if (!h)
		return;
	e->health = NULL;
	pthread_mutex_lock(&h->lock);
	h->stop = 1;
	pthread_cond_broadcast(&h->wake);
	/* a thread in a driver call that hangs is not waited for beyond 0.2 s: it lets go of h (and
	   of g) when the call returns */
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += 200000000;
	if (t.tv_nsec >= 1000000000) {
		t.tv_nsec -= 1000000000;
		t.tv_sec++;
	}
	while (!h->done && pthread_cond_timedwait(&h->wake, &h->lock, &t) != ETIMEDOUT)
		;
	health_unref_locked(h);
}

void gpumon__exporter_health_copy(gpumon_exporter *e)
{
	struct exporter_health *h = e->health;
	if (!h)
		return;
	pthread_mutex_lock(&h->lock);
	for (unsigned i = 0; i < h->n && i < e->ngpus; i++) {
		struct prom_gpu *g = &e->gpus[i];
		g->have_health = h->props[i].size != 0;
		g->health = h->props[i];
		g->health_problems = g->have_health ? gpumon_health_problems(&g->health) : 0;
	}
	pthread_mutex_unlock(&h->lock);
}

void gpumon__exporter_xid(gpumon_exporter *e, const gpumon_record *r)
{
	if (r->dev >= e->ngpus || !r->event_text)
		return;
	const char *at = strstr(r->event_text, "XID ");
	unsigned long code;
	char *end;
	if (!at || (code = strtoul(at + 4, &end, 10), end == at + 4))
		return;
	struct prom_gpu *g = &e->gpus[r->dev];
	g->last_xid = (unsigned)code;
	g->have_xid = 1;
	for (unsigned i = 0; i < g->nxid; i++)
		if (g->xid[i].code == code) {
			g->xid[i].count++;
			return;
		}
	/* a GPU that reports more kinds than the table holds: the rest are summed under the last */
	if (g->nxid == PROM_MAX_XID_CODES) {
		g->xid[PROM_MAX_XID_CODES - 1].count++;
		return;
	}
	g->xid[g->nxid].code = (unsigned)code;
	g->xid[g->nxid++].count = 1;
}
