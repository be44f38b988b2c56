/* SPDX-License-Identifier: MIT */
/* leak.c — the leak detector: a leak is a floor that keeps rising. The series is kept as a fixed
 * number of windows holding their minimum (pairs merge as the run grows, so memory stays bounded),
 * and the verdict is drawn from those minima: a robust trend that is significant, persists to the
 * end at a steady rate, and is not one jump of the floor (docs/leak-detection.md). */
#include <gpumon/gpumon.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Windows kept; when all are full, neighbours merge pairwise and each window spans twice as many
 * points. The analysis therefore always sees between WINDOWS/2 and WINDOWS window minima. */
#define WINDOWS 64
/* No verdict before this many points (each window then holds at least 2) ... */
#define MIN_POINTS 64
/* ... and this many complete windows. */
#define MIN_WINDOWS 32
/* The first share of the windows is warm-up (allocator caching, lazy initialisation): not tested. */
#define WARMUP_SHARE 0.2
/* Mann-Kendall z over the windows after warm-up; one-sided p of about 0.0013. */
#define Z_TREND 3.0
/* Mann-Kendall z over the tail (the last half, or after the biggest jump if that is later). */
#define Z_TAIL 2.5
/* The tail must hold this many windows: a jump too close to the end cannot be told from a trend. */
#define MIN_TAIL 8
/* The tail must rise at least this share of the overall rate: growth that slows down is warm-up. */
#define TAIL_RATIO 0.5
/* Smaller total rises are ignored: below the allocators' granularity (2 MiB segments). */
#define MIN_RISE_BYTES (1024.0 * 1024.0)
/* Each side of a step (one jump) model holds at least this many windows. */
#define MIN_SIDE 3
/* An alert needs the verdict SUSPECTED at every window close for at least this many points and
 * this share of the time since the growth started: a verdict that flickers on while a series
 * settles (a cache filling ever more slowly) is no alert. */
#define ALERT_MIN_POINTS 16
#define ALERT_SHARE 0.35
/* ... and not while the rise slows down: the last quarter under this share of the one before. */
#define ALERT_SLOWDOWN 0.9

/* One window: how many points, their smallest figure, and the span of steps and times. */
struct window {
	uint64_t n;
	uint64_t min_bytes;
	int64_t step0, step1; /* first and last step; meaningful only while every point had one */
	uint64_t t0, t1;      /* first and last time, ns since the first point */
};

struct gpumon_leak {
	struct window w[WINDOWS];
	size_t nw;          /* complete windows */
	struct window cur;  /* the window being filled (cur.n < width) */
	uint64_t width;     /* points per complete window */
	uint64_t points;
	uint64_t first_t_ns, last_t_ns;
	int64_t last_step;
	int steps;          /* every point so far came with a step number */
	uint64_t limit_bytes; /* the latest non-zero limit */
	uint64_t suspect_from; /* points when the verdict last turned SUSPECTED (and stayed); 0 when not */
	uint64_t suspect_t_ns; /* the time of that point */
};

/* The series as the analysis sees it: one entry per complete window. */
struct series {
	size_t n;
	double x[WINDOWS];  /* position: step, or seconds when steps are unknown */
	double xs[WINDOWS]; /* position in seconds */
	double y[WINDOWS];  /* the window's minimum, bytes */
};

int gpumon_leak_create(const void *options, gpumon_leak **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	*out = NULL;
	if (options)
		return GPUMON_E_INVAL; /* no options are defined yet */
	gpumon_leak *l = calloc(1, sizeof *l);
	if (!l)
		return GPUMON_E_NOMEM;
	l->width = 1;
	l->steps = 1;
	l->last_step = -1;
	*out = l;
	return GPUMON_OK;
}

void gpumon_leak_destroy(gpumon_leak *l)
{
	free(l);
}

static void evaluate(const gpumon_leak *l, gpumon_leak_result *out);

static struct window merge(const struct window *a, const struct window *b)
{
	struct window m = *a;
	m.n = a->n + b->n;
	m.min_bytes = b->min_bytes < a->min_bytes ? b->min_bytes : a->min_bytes;
	m.step1 = b->step1;
	m.t1 = b->t1;
	return m;
}

/* Closes the current window; when every slot is taken, halves their number by merging pairs. */
static void close_window(gpumon_leak *l)
{
	l->w[l->nw++] = l->cur;
	l->cur.n = 0;
	if (l->nw < WINDOWS)
		return;
	for (size_t i = 0; i < WINDOWS / 2; i++)
		l->w[i] = merge(&l->w[2 * i], &l->w[2 * i + 1]);
	l->nw = WINDOWS / 2;
	l->width *= 2;
}

int gpumon_leak_add(gpumon_leak *l, int64_t step, uint64_t t_ns, uint64_t bytes, uint64_t limit_bytes)
{
	if (!l)
		return GPUMON_E_INVAL;
	if (l->points > 0 && t_ns < l->last_t_ns)
		return GPUMON_E_INVAL;
	/* a step counter that goes back is out of order too (a restarted job is another series) */
	if (l->points > 0 && l->steps && step >= 0 && step < l->last_step)
		return GPUMON_E_INVAL;
	if (l->points == 0)
		l->first_t_ns = t_ns;
	if (step < 0)
		l->steps = 0; /* from now on the analysis works in time only */
	uint64_t rel = t_ns - l->first_t_ns;
	if (l->cur.n == 0) {
		l->cur.min_bytes = bytes;
		l->cur.step0 = step;
		l->cur.t0 = rel;
	} else if (bytes < l->cur.min_bytes) {
		l->cur.min_bytes = bytes;
	}
	l->cur.n++;
	l->cur.step1 = step;
	l->cur.t1 = rel;
	l->points++;
	l->last_t_ns = t_ns;
	l->last_step = step;
	if (limit_bytes)
		l->limit_bytes = limit_bytes;
	if (l->cur.n >= l->width) {
		close_window(l);
		/* the verdict changes only when a window closes: follow how long it has said SUSPECTED */
		gpumon_leak_result r;
		evaluate(l, &r);
		if (r.verdict != GPUMON_LEAK_SUSPECTED)
			l->suspect_from = 0;
		else if (!l->suspect_from) {
			l->suspect_from = l->points;
			l->suspect_t_ns = t_ns;
		}
	}
	return GPUMON_OK;
}

/* ---- statistics over windows [a, b) of the series ------------------------------------------- */

static int cmp_double(const void *pa, const void *pb)
{
	double a = *(const double *)pa, b = *(const double *)pb;
	return (a > b) - (a < b);
}

static double median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Theil-Sen slope: the median of the slopes between every pair of windows. */
static double theil_sen(const double *x, const double *y, size_t a, size_t b)
{
	double s[WINDOWS * (WINDOWS - 1) / 2];
	size_t k = 0;
	for (size_t i = a; i < b; i++)
		for (size_t j = i + 1; j < b; j++)
			if (x[j] > x[i])
				s[k++] = (y[j] - y[i]) / (x[j] - x[i]);
	return median(s, k);
}

/* The intercept that goes with a Theil-Sen slope: the median of y - slope * x. */
static double theil_sen_intercept(const double *x, const double *y, size_t a, size_t b, double slope)
{
	double r[WINDOWS];
	size_t k = 0;
	for (size_t i = a; i < b; i++)
		r[k++] = y[i] - slope * x[i];
	return median(r, k);
}

/* Mann-Kendall trend statistic as a z score: positive when later windows tend to be higher.
 * Ties count for nothing and the variance is not reduced for them, which errs towards "no trend". */
static double mann_kendall_z(const double *y, size_t a, size_t b)
{
	double n = (double)(b - a);
	if (n < 3)
		return 0;
	long s = 0;
	for (size_t i = a; i < b; i++)
		for (size_t j = i + 1; j < b; j++)
			s += (y[j] > y[i]) - (y[j] < y[i]);
	double var = n * (n - 1) * (2 * n + 5) / 18;
	if (s > 0)
		s--; /* continuity correction */
	else if (s < 0)
		s++;
	return (double)s / sqrt(var);
}

/* Where one jump best explains windows [a, b): the first window of the upper level of the
 * two-level model with the smallest squared error. Returns a when there is no room for it. */
static size_t best_step(const double *y, size_t a, size_t b)
{
	size_t best = a;
	double best_sse = INFINITY, tot = 0, tot2 = 0;
	for (size_t i = a; i < b; i++) {
		tot += y[i];
		tot2 += y[i] * y[i];
	}
	double left = 0, left2 = 0;
	for (size_t k = a; k < b; k++) {
		size_t nl = k - a, nr = b - k;
		if (nl >= MIN_SIDE && nr >= MIN_SIDE) {
			double right = tot - left, right2 = tot2 - left2;
			double sse = left2 - left * left / (double)nl + right2 - right * right / (double)nr;
			if (sse < best_sse) {
				best_sse = sse;
				best = k;
			}
		}
		left += y[k];
		left2 += y[k] * y[k];
	}
	return best;
}

/* Where the growth started: the knee of the "flat, then a straight rise" model with the smallest
 * squared error over all windows (warm-up included: a leak may start at once). */
static size_t hinge_start(const double *x, const double *y, size_t n)
{
	size_t best = 0;
	double best_sse = INFINITY;
	for (size_t c = 0; c + MIN_SIDE < n; c++) {
		double su = 0, sy = 0, suu = 0, suy = 0, m = (double)n;
		for (size_t i = 0; i < n; i++) {
			double u = x[i] > x[c] ? x[i] - x[c] : 0;
			su += u;
			sy += y[i];
			suu += u * u;
			suy += u * y[i];
		}
		double det = m * suu - su * su;
		if (det <= 0)
			continue;
		double slope = (m * suy - su * sy) / det;
		double level = (sy - slope * su) / m;
		if (slope <= 0)
			continue;
		double sse = 0;
		for (size_t i = 0; i < n; i++) {
			double u = x[i] > x[c] ? x[i] - x[c] : 0;
			double e = y[i] - level - slope * u;
			sse += e * e;
		}
		if (sse < best_sse) {
			best_sse = sse;
			best = c;
		}
	}
	return best;
}

/* Standard normal distribution function. */
static double phi(double z)
{
	return 0.5 * erfc(-z / sqrt(2.0));
}

/* ---- the verdict ------------------------------------------------------------------------------ */

static void load_series(const gpumon_leak *l, struct series *s)
{
	s->n = l->nw;
	for (size_t i = 0; i < l->nw; i++) {
		const struct window *w = &l->w[i];
		s->xs[i] = ((double)w->t0 + (double)w->t1) / 2e9;
		s->x[i] = l->steps ? ((double)w->step0 + (double)w->step1) / 2 : s->xs[i];
	}
	for (size_t i = 0; i < l->nw; i++)
		s->y[i] = (double)l->w[i].min_bytes;
}

/* Rates since the start, the projection to the limit, and where it started. */
static void describe_leak(const gpumon_leak *l, const struct series *s, gpumon_leak_result *out)
{
	size_t c = hinge_start(s->x, s->y, s->n);
	if (s->n - c < MIN_TAIL)
		c = s->n - MIN_TAIL;
	double per_second = theil_sen(s->xs, s->y, c, s->n);
	out->rate_bytes_per_second = per_second;
	out->start_t_ns = l->first_t_ns + l->w[c].t0;
	if (l->steps) {
		out->rate_bytes_per_step = theil_sen(s->x, s->y, c, s->n);
		out->start_step = l->w[c].step0;
	}
	if (!l->limit_bytes || per_second <= 0)
		return;
	/* the floor now: the fitted line at the last point */
	double now_s = (double)(l->last_t_ns - l->first_t_ns) / 1e9;
	double floor = theil_sen_intercept(s->xs, s->y, c, s->n, per_second) + per_second * now_s;
	double room = (double)l->limit_bytes - floor;
	if (room < 0)
		room = 0;
	out->seconds_to_oom = room / per_second;
	if (l->steps && out->rate_bytes_per_step > 0)
		out->steps_to_oom = room / out->rate_bytes_per_step;
}

/* Growth that slows down is a cache filling, not yet a leak: the last quarter of the windows rises
 * at well under the rate of the quarter before it. */
static int slowing_down(const gpumon_leak *l)
{
	struct series s;
	load_series(l, &s);
	size_t q = s.n / 4;
	if (q < MIN_SIDE)
		return 0;
	double recent = theil_sen(s.x, s.y, s.n - q, s.n), before = theil_sen(s.x, s.y, s.n - 2 * q, s.n - q);
	return before > 0 && recent < ALERT_SLOWDOWN * before;
}

void gpumon_leak_result_get(const gpumon_leak *l, gpumon_leak_result *out)
{
	if (!out)
		return;
	evaluate(l, out);
	if (!l || out->verdict != GPUMON_LEAK_SUSPECTED || !l->suspect_from)
		return;
	out->suspected_points = l->points - l->suspect_from + 1;
	double since_start = (double)(l->last_t_ns - out->start_t_ns);
	double suspected_for = (double)(l->last_t_ns - l->suspect_t_ns);
	out->alert = out->suspected_points >= ALERT_MIN_POINTS && suspected_for >= ALERT_SHARE * since_start &&
		     !slowing_down(l);
}

static void evaluate(const gpumon_leak *l, gpumon_leak_result *out)
{
	memset(out, 0, sizeof *out);
	out->verdict = GPUMON_LEAK_INSUFFICIENT_DATA;
	out->start_step = -1;
	out->steps_to_oom = -1;
	out->seconds_to_oom = -1;
	if (!l)
		return;
	out->points = l->points;
	if (l->points < MIN_POINTS || l->nw < MIN_WINDOWS)
		return;
	struct series s;
	load_series(l, &s);
	size_t n = s.n, skip = (size_t)((double)n * WARMUP_SHARE);
	if (!(s.x[n - 1] > s.x[0]) || !(s.xs[n - 1] > s.xs[0]))
		return; /* no span to speak of a rate over */
	out->verdict = GPUMON_LEAK_NONE;

	double slope = theil_sen(s.x, s.y, skip, n);
	double z = mann_kendall_z(s.y, skip, n);
	/* the tail: the last half, or what follows the biggest jump when that comes later */
	size_t jump = best_step(s.y, skip, n), tail = skip + (n - skip) / 2;
	if (jump > tail)
		tail = jump;
	if (slope <= 0) {
		out->confidence = 1;
		return;
	}
	if (n - tail < MIN_TAIL) {
		out->confidence = 0.5; /* a jump too near the end: a trend may be starting, or not */
		return;
	}
	double tail_slope = theil_sen(s.x, s.y, tail, n);
	double tail_z = mann_kendall_z(s.y, tail, n);
	double rise = slope * (s.x[n - 1] - s.x[skip]);
	if (tail_slope < TAIL_RATIO * slope || rise < MIN_RISE_BYTES) {
		out->confidence = 1; /* growth that stops or slows down, or too small to matter */
		return;
	}
	/* the margin of the weaker test over its threshold, as a probability */
	double margin = z - Z_TREND < tail_z - Z_TAIL ? z - Z_TREND : tail_z - Z_TAIL;
	double p = phi(margin);
	if (margin < 0) {
		out->confidence = 1 - p;
		return;
	}
	out->verdict = GPUMON_LEAK_SUSPECTED;
	out->confidence = p;
	describe_leak(l, &s, out);
}
