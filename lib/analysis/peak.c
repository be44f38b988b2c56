/* SPDX-License-Identifier: MIT */
/* peak.c — the highest figure of a series, globally and per window of time, with when and whose.
 * Windows are fixed slots from the first point; when the series outgrows them they merge pairwise
 * (each twice as long), so a tracker for days of 1 kHz data stays a few kilobytes. */
#include <gpumon/gpumon.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gpumon_peaks {
	char msg[128]; /* the last failure of gpumon_peaks_add ("" none) */
	uint64_t t0, window_ns;
	unsigned max_windows, nslots; /* nslots: slots in use (the last window with points + 1) */
	gpumon_peak global;
	gpumon_peak slot[];
};

int gpumon_peaks_create(uint64_t window_ns, unsigned max_windows, gpumon_peaks **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	*out = NULL;
	if (window_ns == 0 || max_windows < 2 || max_windows > 4096)
		return GPUMON_E_INVAL;
	gpumon_peaks *p = calloc(1, sizeof *p + max_windows * sizeof p->slot[0]);
	if (!p)
		return GPUMON_E_NOMEM;
	p->window_ns = window_ns;
	p->max_windows = max_windows;
	*out = p;
	return GPUMON_OK;
}

void gpumon_peaks_destroy(gpumon_peaks *p)
{
	free(p);
}

/* The higher of two peaks (the earlier on a tie), spanning both windows. */
static gpumon_peak merge(const gpumon_peak *a, const gpumon_peak *b)
{
	gpumon_peak m = b->points && (!a->points || b->bytes > a->bytes) ? *b : *a;
	m.points = a->points + b->points;
	return m;
}

/* Halves the number of windows: slot i becomes slots 2i and 2i+1, twice as long. */
static void coarsen(gpumon_peaks *p)
{
	unsigned n = (p->nslots + 1) / 2;
	for (unsigned i = 0; i < n; i++) {
		gpumon_peak empty = {0};
		const gpumon_peak *b = 2 * i + 1 < p->nslots ? &p->slot[2 * i + 1] : &empty;
		p->slot[i] = merge(&p->slot[2 * i], b);
	}
	memset(&p->slot[n], 0, (p->max_windows - n) * sizeof p->slot[0]);
	p->nslots = n;
	p->window_ns *= 2;
}

int gpumon_peaks_add(gpumon_peaks *p, uint64_t t_ns, uint64_t bytes, int64_t owner_pid, int64_t largest_pid)
{
	if (!p)
		return GPUMON_E_INVAL;
	if (p->global.points == 0) {
		p->t0 = t_ns;
	} else if (t_ns < p->t0) {
		snprintf(p->msg, sizeof p->msg, "a point at %" PRIu64 " ns, before the first one (%" PRIu64 " ns), is refused",
			 t_ns, p->t0);
		return GPUMON_E_INVAL;
	}
	uint64_t k;
	while ((k = (t_ns - p->t0) / p->window_ns) >= p->max_windows)
		coarsen(p);
	gpumon_peak *w = &p->slot[k];
	if (!w->points || bytes > w->bytes) {
		w->bytes = bytes;
		w->t_ns = t_ns;
		w->owner_pid = owner_pid;
		w->largest_pid = largest_pid;
	}
	w->points++;
	if (k + 1 > p->nslots)
		p->nslots = (unsigned)k + 1;
	gpumon_peak *g = &p->global;
	if (!g->points || bytes > g->bytes) {
		g->bytes = bytes;
		g->t_ns = t_ns;
		g->owner_pid = owner_pid;
		g->largest_pid = largest_pid;
	}
	if (!g->points || t_ns >= g->end_t_ns)
		g->end_t_ns = t_ns + 1;
	g->points++;
	return GPUMON_OK;
}

int gpumon_peaks_global(const gpumon_peaks *p, gpumon_peak *out)
{
	if (!p || !out)
		return GPUMON_E_INVAL;
	if (!p->global.points)
		return GPUMON_E_NOT_FOUND;
	*out = p->global;
	out->start_t_ns = p->t0;
	return GPUMON_OK;
}

size_t gpumon_peaks_windows(const gpumon_peaks *p, gpumon_peak *out, size_t cap)
{
	size_t n = 0;
	if (!p)
		return 0;
	for (unsigned i = 0; i < p->nslots; i++) {
		if (!p->slot[i].points)
			continue;
		if (out && n < cap) {
			out[n] = p->slot[i];
			out[n].start_t_ns = p->t0 + i * p->window_ns;
			out[n].end_t_ns = out[n].start_t_ns + p->window_ns;
		}
		n++;
	}
	return n;
}

const char *gpumon_peaks_errmsg(const gpumon_peaks *p)
{
	return p ? p->msg : "";
}
