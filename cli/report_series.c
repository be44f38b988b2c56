/* SPDX-License-Identifier: MIT */
/* report_series.c — timelines reduced in a fixed number of buckets as they stream in (see
 * report_series.h): a day of 1 kHz data becomes at most SERIES_BUCKETS points a field. */
#include "report_series.h"

#include <stdlib.h>
#include <string.h>

int series_init(series *s, int nfields, const char *const *names, const int *modes)
{
	memset(s, 0, sizeof *s);
	if (nfields < 1 || nfields > SERIES_MAX_FIELDS)
		return -1;
	s->nfields = nfields;
	for (int f = 0; f < nfields; f++) {
		s->name[f] = names[f];
		s->mode[f] = modes[f];
	}
	s->width = 1;
	s->t = malloc(SERIES_BUCKETS * sizeof *s->t);
	s->v = malloc((size_t)nfields * SERIES_BUCKETS * sizeof *s->v);
	s->known = calloc(SERIES_BUCKETS, 1);
	if (!s->t || !s->v || !s->known) {
		series_free(s);
		return -1;
	}
	return 0;
}

void series_free(series *s)
{
	free(s->t);
	free(s->v);
	free(s->known);
	s->t = NULL;
	s->v = NULL;
	s->known = NULL;
}

/* Folds value b (known kb) into a (known ka) by mode. */
static void fold(int mode, int64_t *a, int *ka, int64_t b, int kb)
{
	if (!kb)
		return;
	if (!*ka || mode == SERIES_LAST || (mode == SERIES_MIN && b < *a) || (mode == SERIES_MAX && b > *a))
		*a = b;
	*ka = 1;
}

/* Halves the buckets: i takes 2i and 2i+1. */
static void merge_pairs(series *s)
{
	size_t half = s->n / 2;
	for (size_t i = 0; i < half; i++) {
		s->t[i] = s->t[2 * i];
		uint8_t k = 0;
		for (int f = 0; f < s->nfields; f++) {
			int64_t a = s->v[f * SERIES_BUCKETS + 2 * i], b = s->v[f * SERIES_BUCKETS + 2 * i + 1];
			int ka = (s->known[2 * i] >> f) & 1, kb = (s->known[2 * i + 1] >> f) & 1;
			fold(s->mode[f], &a, &ka, b, kb);
			s->v[f * SERIES_BUCKETS + i] = a;
			k |= (uint8_t)(ka << f);
		}
		s->known[i] = k;
	}
	s->n = half;
	s->width *= 2;
	s->filled = s->width; /* the last merged bucket is complete */
}

void series_add(series *s, double t, const int64_t *vals, const int *known)
{
	if (!s->t)
		return;
	if (s->n == 0 || s->filled >= s->width) {
		if (s->n == SERIES_BUCKETS)
			merge_pairs(s);
		size_t i = s->n++;
		s->t[i] = t;
		s->known[i] = 0;
		s->filled = 0;
		for (int f = 0; f < s->nfields; f++)
			s->v[f * SERIES_BUCKETS + i] = 0;
	}
	size_t i = s->n - 1;
	for (int f = 0; f < s->nfields; f++) {
		int ka = (s->known[i] >> f) & 1;
		fold(s->mode[f], &s->v[f * SERIES_BUCKETS + i], &ka, vals[f], known[f]);
		s->known[i] = (uint8_t)((s->known[i] & ~(1u << f)) | ((unsigned)ka << f));
	}
	s->filled++;
}

int series_json(const series *s, json_t *obj)
{
	json_t *t = json_array();
	if (!t || json_object_set_new(obj, "t", t))
		return -1;
	for (size_t i = 0; i < s->n; i++)
		if (json_array_append_new(t, json_real(s->t[i])))
			return -1;
	for (int f = 0; f < s->nfields; f++) {
		json_t *a = json_array();
		if (!a || json_object_set_new(obj, s->name[f], a))
			return -1;
		for (size_t i = 0; i < s->n; i++) {
			json_t *v = (s->known[i] >> f) & 1 ? json_integer(s->v[f * SERIES_BUCKETS + i]) : json_null();
			if (json_array_append_new(a, v))
				return -1;
		}
	}
	return 0;
}
