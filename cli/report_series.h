/* SPDX-License-Identifier: MIT */
/* report_series.h — a timeline reduced to a fixed number of buckets as it streams in: each bucket
 * keeps, per field, the smallest or the largest value of its samples (so floors and peaks
 * survive), and when the buckets are full, neighbours merge pairwise. */
#ifndef GPUMON_REPORT_SERIES_H
#define GPUMON_REPORT_SERIES_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define SERIES_MAX_FIELDS 4
#define SERIES_BUCKETS 2000

enum { SERIES_MIN, SERIES_MAX, SERIES_LAST };

typedef struct series {
	int nfields;
	int mode[SERIES_MAX_FIELDS];
	const char *name[SERIES_MAX_FIELDS];
	size_t n;         /* buckets in use (the last may be filling) */
	uint64_t width;   /* samples per bucket */
	uint64_t filled;  /* samples in the last bucket */
	double *t;        /* the first time of each bucket, seconds */
	int64_t *v;       /* v[f * SERIES_BUCKETS + i] */
	uint8_t *known;   /* bit f: field f known in bucket i */
} series;

/* Sets up s with nfields fields named and reduced as given; -1 when out of memory. */
int series_init(series *s, int nfields, const char *const *names, const int *modes);
void series_free(series *s);

/* Adds one sample at t seconds; vals[f] / known[f] per field. */
void series_add(series *s, double t, const int64_t *vals, const int *known);

/* Adds "t" and one array per field (null where unknown) to obj. 0, or -1 out of memory. */
int series_json(const series *s, json_t *obj);

#endif
