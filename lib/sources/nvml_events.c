/* SPDX-License-Identifier: MIT */
/* nvml_events.c — XID errors (NVML's critical error events): an NVML event set that the sampling
 * threads ask, without waiting, once a second (whichever thread comes first), each XID queued as an
 * EVENT record of the sampler. No thread of its own: one that waited on the set woke ten times a
 * second to see a stop, most of an idle `gpumon watch`'s cost above its floor, and a longer wait
 * would have held up every stop. A driver without events gets no set and no error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "nvml_abi.h"

/* The set is asked this often: an XID is seen within a second (or a sampling period, if longer). */
#define POLL_NS 1000000000ull
/* After a failed ask (not "none"): a lost GPU or a driver in trouble, which the sampler reports */
#define RETRY_NS 5000000000ull
/* Events taken in one ask at most; more are taken at the next. */
#define MAX_TAKEN 64
/* Distinct (GPU, code) texts kept: records point at them until the sampler is destroyed. */
#define MAX_TEXTS 1024u

/* The text of an XID record; lives as long as the watch. */
struct xid_text {
	struct xid_text *next;
	unsigned dev;
	unsigned long long code;
	char text[64];
};

struct gpumon__xid_watch {
	gpumon *g;
	gpumon_sampler *s;
	void *set;           /* nvmlEventSet_t */
	pthread_mutex_t lock; /* held by the thread asking the set */
	atomic_ullong next_ns; /* when it is next asked */
	unsigned n;          /* devices registered */
	unsigned *dev;       /* their positions */
	struct xid_text *texts;
	unsigned ntexts;
	char overflow[96];    /* used once MAX_TEXTS distinct texts are kept */
};

/* The device position of an event's handle, or UINT32_MAX when it is none of ours. */
static unsigned dev_of(const struct gpumon__xid_watch *w, const void *handle)
{
	for (unsigned i = 0; i < w->n; i++)
		if (w->g->dev[w->dev[i]].handle == handle)
			return w->dev[i];
	return UINT32_MAX;
}

/* The text "GPU N: XID CODE", made once per distinct pair (under w->lock). */
static const char *xid_text(struct gpumon__xid_watch *w, unsigned dev, unsigned long long code)
{
	for (struct xid_text *t = w->texts; t; t = t->next)
		if (t->dev == dev && t->code == code)
			return t->text;
	struct xid_text *t = w->ntexts < MAX_TEXTS ? calloc(1, sizeof *t) : NULL;
	if (!t)
		return w->overflow;
	t->dev = dev;
	t->code = code;
	snprintf(t->text, sizeof t->text, "GPU %u: XID %llu", dev, code);
	t->next = w->texts;
	w->texts = t;
	w->ntexts++;
	return t->text;
}

void gpumon__xid_poll(struct gpumon__xid_watch *w, uint64_t now)
{
	if (!w || now < atomic_load_explicit(&w->next_ns, memory_order_relaxed) || pthread_mutex_trylock(&w->lock) != 0)
		return;
	if (now >= atomic_load_explicit(&w->next_ns, memory_order_relaxed)) {
		const struct nvml_api *api = &w->g->nvml;
		nvml_ret r = NVML_SUCCESS;
		for (int k = 0; k < MAX_TAKEN; k++) {
			struct nvml_event_data e;
			memset(&e, 0, sizeof e);
			if ((r = api->event_set_wait(w->set, &e, 0)) != NVML_SUCCESS)
				break;
			unsigned dev = (e.event_type & NVML_EVENT_TYPE_XID_CRITICAL_ERROR) ? dev_of(w, e.device) : UINT32_MAX;
			if (dev != UINT32_MAX)
				gpumon__sampler_event(w->s, dev, now, GPUMON_EVENT_XID, xid_text(w, dev, e.event_data));
		}
		uint64_t next = r == NVML_SUCCESS ? now : now + (r == NVML_ERROR_TIMEOUT ? POLL_NS : RETRY_NS);
		atomic_store_explicit(&w->next_ns, next, memory_order_relaxed);
	}
	pthread_mutex_unlock(&w->lock);
}

static void watch_free(struct gpumon__xid_watch *w)
{
	if (w->set)
		w->g->nvml.event_set_free(w->set);
	while (w->texts) {
		struct xid_text *t = w->texts;
		w->texts = t->next;
		free(t);
	}
	free(w->dev);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

/* Registers the devices for XID events; returns how many took them. */
static unsigned register_devices(struct gpumon__xid_watch *w, const unsigned *devs, unsigned n)
{
	const struct nvml_api *api = &w->g->nvml;
	for (unsigned i = 0; i < n; i++) {
		unsigned dev = devs ? devs[i] : i;
		if (dev >= w->g->ndev || atomic_load(&w->g->dev[dev].lost))
			continue;
		/* NOT_SUPPORTED (no such events on this GPU) or any other refusal: no XIDs from it */
		if (api->register_events(w->g->dev[dev].handle, NVML_EVENT_TYPE_XID_CRITICAL_ERROR, w->set) ==
		    NVML_SUCCESS)
			w->dev[w->n++] = dev;
	}
	return w->n;
}

struct gpumon__xid_watch *gpumon__xid_start(gpumon *g, gpumon_sampler *s, const unsigned *devs, unsigned n)
{
	const struct nvml_api *api = &g->nvml;
	if (!api->event_set_create || !api->register_events || !api->event_set_wait || !api->event_set_free || n == 0)
		return NULL;
	struct gpumon__xid_watch *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->g = g;
	w->s = s;
	pthread_mutex_init(&w->lock, NULL);
	atomic_init(&w->next_ns, 0);
	snprintf(w->overflow, sizeof w->overflow, "XID error (more than %u distinct errors: code not kept)", MAX_TEXTS);
	w->dev = calloc(n, sizeof *w->dev);
	if (!w->dev || api->event_set_create(&w->set) != NVML_SUCCESS) {
		w->set = NULL;
		watch_free(w);
		return NULL;
	}
	if (register_devices(w, devs, n) == 0) {
		watch_free(w);
		return NULL;
	}
	return w;
}

void gpumon__xid_free(struct gpumon__xid_watch *w)
{
	if (w)
		watch_free(w);
}
