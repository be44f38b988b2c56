/* SPDX-License-Identifier: MIT */
/* timeline.c — timelines reduced in a fixed number of buckets as they stream in (timeline.h): a
 * day of 1 kHz data becomes at most TIMELINE_BUCKETS points a field. */
#include "timeline.h"

#include <stdlib.h>
#include <string.h>

int gpumon__timeline_init(struct timeline *tl, int nfields, const int *modes)
{
	memset(tl, 0, sizeof *tl);
	if (nfields < 1 || nfields > TIMELINE_MAX_FIELDS)
		return -1;
	tl->nfields = nfields;
	for (int f = 0; f < nfields; f++)
		tl->mode[f] = modes[f];
	tl->width = 1;
	tl->t = malloc(TIMELINE_BUCKETS * sizeof *tl->t);
	tl->v = malloc((size_t)nfields * TIMELINE_BUCKETS * sizeof *tl->v);
	tl->known = calloc(TIMELINE_BUCKETS, 1);
	if (!tl->t || !tl->v || !tl->known) {
		gpumon__timeline_free(tl);
		return -1;
	}
	return 0;
}

void gpumon__timeline_free(struct timeline *tl)
{
	free(tl->t);
	free(tl->v);
	free(tl->known);
	tl->t = NULL;
	tl->v = NULL;
	tl->known = NULL;
	tl->n = 0;
}

/* Folds value b (known kb) into a (known ka) by mode. */
static void fold(int mode, int64_t *a, int *ka, int64_t b, int kb)
{
	if (!kb)
		return;
	if (!*ka || mode == TL_LAST || (mode == TL_MIN && b < *a) || (mode == TL_MAX && b > *a))
		*a = b;
	*ka = 1;
}

/* Halves the buckets: i takes 2i and 2i+1. */
static void merge_pairs(struct timeline *tl)
{
	size_t half = tl->n / 2;
	for (size_t i = 0; i < half; i++) {
		tl->t[i] = tl->t[2 * i];
		uint8_t k = 0;
		for (int f = 0; f < tl->nfields; f++) {
			int64_t a = tl->v[f * TIMELINE_BUCKETS + 2 * i], b = tl->v[f * TIMELINE_BUCKETS + 2 * i + 1];
			int ka = (tl->known[2 * i] >> f) & 1, kb = (tl->known[2 * i + 1] >> f) & 1;
			fold(tl->mode[f], &a, &ka, b, kb);
			tl->v[f * TIMELINE_BUCKETS + i] = a;
			k |= (uint8_t)(ka << f);
		}
		tl->known[i] = k;
	}
	tl->n = half;
	tl->width *= 2;
	tl->filled = tl->width; /* the last merged bucket is complete */
}

void gpumon__timeline_add(struct timeline *tl, uint64_t t_ns, const int64_t *vals, const int *known)
{
	if (!tl->t)
		return;
	if (tl->n == 0 || tl->filled >= tl->width) {
		if (tl->n == TIMELINE_BUCKETS)
			merge_pairs(tl);
		size_t i = tl->n++;
		tl->t[i] = t_ns;
		tl->known[i] = 0;
		tl->filled = 0;
		for (int f = 0; f < tl->nfields; f++)
			tl->v[f * TIMELINE_BUCKETS + i] = 0;
	}
	size_t i = tl->n - 1;
	for (int f = 0; f < tl->nfields; f++) {
		int ka = (tl->known[i] >> f) & 1;
		fold(tl->mode[f], &tl->v[f * TIMELINE_BUCKETS + i], &ka, vals[f], known[f]);
		tl->known[i] = (uint8_t)((tl->known[i] & ~(1u << f)) | ((unsigned)ka << f));
	}
	tl->filled++;
	if (t_ns > tl->last_t)
		tl->last_t = t_ns;
}
