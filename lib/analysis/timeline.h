/* SPDX-License-Identifier: MIT */
/* timeline.h — a timeline reduced to a fixed number of buckets as it streams in, for charts: each
 * bucket keeps, per field, the smallest, the largest or the last value of its samples (so floors
 * and peaks survive); when the buckets are full, neighbours merge pairwise. A value holds until the
 * next one (change-only rows are a step function), so the last value is carried to the series'
 * end when it is read. */
#ifndef GPUMON_TIMELINE_H
#define GPUMON_TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#define TIMELINE_MAX_FIELDS 4
#define TIMELINE_BUCKETS 2000

enum { TL_MIN, TL_MAX, TL_LAST };

struct timeline {
	int nfields;
	int mode[TIMELINE_MAX_FIELDS];
	size_t n;         /* buckets in use (the last may be filling) */
	uint64_t width;   /* samples per bucket */
	uint64_t filled;  /* samples in the last bucket */
	uint64_t *t;      /* the first time of each bucket (t_ns) */
	int64_t *v;       /* v[f * TIMELINE_BUCKETS + i] */
	uint8_t *known;   /* bit f: field f known in bucket i */
	uint64_t last_t;  /* the latest sample's time */
};

/* Sets up tl with nfields fields reduced as modes say; -1 when out of memory. A timeline that was
 * never set up (all zero) takes no samples and frees nothing. */
int gpumon__timeline_init(struct timeline *tl, int nfields, const int *modes);
void gpumon__timeline_free(struct timeline *tl);

/* Adds one sample at t_ns; vals[f] / known[f] per field. */
void gpumon__timeline_add(struct timeline *tl, uint64_t t_ns, const int64_t *vals, const int *known);

#endif
