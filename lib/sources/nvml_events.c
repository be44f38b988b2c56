/* SPDX-License-Identifier: MIT */
/* nvml_events.c — XID errors (NVML's critical error events) on a thread of their own: it waits on
 * an NVML event set in short slices and queues each XID as an EVENT record of the sampler, so the
 * sampling threads never wait for it. A driver without events gets no thread and no error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../internal.h"
#include "nvml_abi.h"

/* One wait lasts at most this long, so a stop is seen within it. */
#define WAIT_MS 100u
/* After a failed wait (not a timeout), pause this long before the next one rather than spin. */
#define RETRY_NS 100000000L
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
	pthread_t thread;
	atomic_int stop;
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

/* The text "GPU N: XID CODE", made once per distinct pair (only this thread touches the list). */
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

static void *xid_main(void *arg)
{
	struct gpumon__xid_watch *w = arg;
	const struct nvml_api *api = &w->g->nvml;
	pthread_setname_np(pthread_self(), "gpumon-xid");
	while (!atomic_load(&w->stop)) {
		struct nvml_event_data e;
		memset(&e, 0, sizeof e);
		nvml_ret r = api->event_set_wait(w->set, &e, WAIT_MS);
		if (r == NVML_ERROR_TIMEOUT)
			continue;
		if (r != NVML_SUCCESS) {
			/* a lost GPU or a driver in trouble: the sampler reports those; do not spin */
			struct timespec ts = {0, RETRY_NS};
			nanosleep(&ts, NULL);
			continue;
		}
		if (!(e.event_type & NVML_EVENT_TYPE_XID_CRITICAL_ERROR))
			continue;
		unsigned dev = dev_of(w, e.device);
		if (dev != UINT32_MAX)
			gpumon__sampler_event(w->s, dev, gpumon__now_ns(), GPUMON_EVENT_XID,
					      xid_text(w, dev, e.event_data));
	}
	return NULL;
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
	atomic_init(&w->stop, 0);
	snprintf(w->overflow, sizeof w->overflow, "XID error (more than %u distinct errors: code not kept)", MAX_TEXTS);
	w->dev = calloc(n, sizeof *w->dev);
	if (!w->dev || api->event_set_create(&w->set) != NVML_SUCCESS) {
		w->set = NULL;
		watch_free(w);
		return NULL;
	}
	if (register_devices(w, devs, n) == 0 || pthread_create(&w->thread, NULL, xid_main, w) != 0) {
		watch_free(w);
		return NULL;
	}
	return w;
}

void gpumon__xid_stop(struct gpumon__xid_watch *w)
{
	if (!w)
		return;
	atomic_store(&w->stop, 1);
	pthread_join(w->thread, NULL);
	watch_free(w);
}
