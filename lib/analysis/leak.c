/* SPDX-License-Identifier: MIT */
/* leak.c — the leak detector: a leak is a floor that keeps rising. The series is cut into windows
 * on its axis (steps, else time) that keep their minimum; when all are taken, neighbours merge
 * pairwise, so memory stays bounded. A second set of one-second windows slides over the last
 * minute, so that a leak starting late in a long run is seen within seconds, not only once the
 * whole-run windows have grown. The verdict is drawn from the minima: a robust trend that is
 * significant, persists to the end at a steady rate, and is not one jump of the floor
 * (docs/leak-detection.md). */
#include <gpumon/gpumon.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Windows kept; when all are full, neighbours merge pairwise and each window spans twice as much of
 * the axis. The analysis therefore sees between WINDOWS/2 and WINDOWS window minima. */
#define WINDOWS 64
/* First window widths: one training step, or half a second. */
#define STEP_W0 1.0
#define TIME_W0 0.5e9
/* The sliding set: one-second windows over the last WINDOWS seconds. */
#define RECENT_W 1e9
/* No verdict before this many windows with a value ... */
#define MIN_WINDOWS 32
/* ... and, for samples, this many points (a step function's windows hold its value: known exactly,
 * however few rows said it). */
#define MIN_POINTS 16
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
/* An alert needs the verdict SUSPECTED at every window close for at least this many closes and
 * this share of the span since the growth started: a verdict that flickers on while a series
 * settles (a cache filling ever more slowly) is no alert. */
#define ALERT_MIN_CLOSES 8
#define ALERT_SHARE 0.25
/* ... and not while the rise slows down: the last quarter under this share of the one before. */
#define ALERT_SLOWDOWN 0.9
#define ALERT_HALF_SLOWDOWN 0.75
/* No alert before the series has run this long (and, with steps, this many steps): a start-up ramp
 * (loading the model, the allocator's first caches) looks like a leak until it ends. Both are well
 * inside the 30 s / 100 steps in which a leak is to be told. */
#define ALERT_MIN_SPAN_NS 20e9
#define ALERT_MIN_STEPS 60
/* The sliding windows judge what the whole run's cannot see yet: once the run is half as long as
 * they reach, from shortly before the knee of the rise, over at least this many windows. They are
 * one second wide; when steps are given and take this long or longer, one step wide (a minute of
 * one-second windows holds too few steps then). */
#define RECENT_MIN_WINDOWS 16
#define SLOW_STEP_NS 0.5e9

/* One window: its points and their smallest figure (has: a value, from a point or held). */
struct window {
	uint64_t n;
	uint64_t min_bytes;
	int has;
	double a0, a1;        /* axis span of its points (steps, or ns since the first point) */
	double t0, t1;        /* time span of its points, ns since the first point */
	int64_t s0, s1;       /* steps of its first and last points (-1 unknown) */
};

/* A set of windows on one axis. */
struct wset {
	struct window w[WINDOWS];
	size_t nw;            /* complete windows */
	struct window cur;    /* the window being filled: index nw */
	double width;         /* axis units per window */
	int sliding;          /* 1: drop the oldest instead of merging */
	double origin;        /* axis position of window 0 */
	uint64_t closes;      /* windows closed so far */
	/* the verdict at window closes, for alerts */
	uint64_t suspect_closes;  /* consecutive closes that said SUSPECTED */
	double suspect_from;      /* axis position where that run of SUSPECTED began */
	int alert;
	uint64_t alert_t_ns;
	gpumon_leak_result last;  /* the verdict at the last close */
};

struct gpumon_leak {
	gpumon_leak_config cfg;
	struct wset steps, time, recent_time, recent_steps;
	int steps_ok;         /* every point so far had a step (and the axis may be steps) */
	uint64_t points;
	uint64_t first_t_ns, last_t_ns;
	int64_t first_step, last_step;
	uint64_t last_bytes;
	int alert;
	uint64_t alert_t_ns;
	char msg[160];
};

/* The series as the analysis sees it: one entry per complete window with a value. */
struct series {
	size_t n;
	double x[WINDOWS];    /* position on the axis */
	double xs[WINDOWS];   /* position in seconds since the first point */
	double y[WINDOWS];    /* the window's minimum, bytes */
	size_t idx[WINDOWS];  /* the window each entry came from */
};

static void wset_init(struct wset *s, double width, int sliding)
{
	memset(s, 0, sizeof *s);
	s->width = width;
	s->sliding = sliding;
}

int gpumon_leak_create(const gpumon_leak_config *cfg, gpumon_leak **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	*out = NULL;
	if (cfg && (cfg->size < sizeof(unsigned) || cfg->size > sizeof *cfg))
		return GPUMON_E_INVAL;
	gpumon_leak *l = calloc(1, sizeof *l);
	if (!l)
		return GPUMON_E_NOMEM;
	l->cfg.size = sizeof l->cfg;
	if (cfg)
		memcpy(&l->cfg, cfg, cfg->size);
	l->cfg.size = sizeof l->cfg;
	if (l->cfg.mode == 0) /* a zeroed config: the default */
		l->cfg.mode = GPUMON_LEAK_SAMPLES;
	if (l->cfg.mode != GPUMON_LEAK_SAMPLES && l->cfg.mode != GPUMON_LEAK_HELD) {
		free(l);
		return GPUMON_E_INVAL;
	}
	wset_init(&l->steps, STEP_W0, 0);
	wset_init(&l->time, TIME_W0, 0);
	wset_init(&l->recent_time, RECENT_W, 1);
	wset_init(&l->recent_steps, STEP_W0, 1);
	l->steps_ok = !l->cfg.time_axis;
	l->last_step = -1;
	*out = l;
	return GPUMON_OK;
}

void gpumon_leak_destroy(gpumon_leak *l)
{
	free(l);
}

const char *gpumon_leak_errmsg(const gpumon_leak *l)
{
	return l ? l->msg : "";
}

/* ---- windows -------------------------------------------------------------------------------- */

static struct window merge(const struct window *a, const struct window *b)
{
	struct window m = *a;
	m.n = a->n + b->n;
	if (!a->has)
		m.min_bytes = b->min_bytes;
	else if (b->has && b->min_bytes < a->min_bytes)
		m.min_bytes = b->min_bytes;
	m.has = a->has || b->has;
	if (!a->n) {
		m.a0 = b->a0;
		m.t0 = b->t0;
		m.s0 = b->s0;
	}
	if (b->n) {
		m.a1 = b->a1;
		m.t1 = b->t1;
		m.s1 = b->s1;
	}
	return m;
}

/* A new window after the current one: empty, or holding the last value when the series is a step
 * function (the value held on into it). */
static void open_window(struct wset *s, int held, uint64_t held_bytes)
{
	memset(&s->cur, 0, sizeof s->cur);
	if (held) {
		s->cur.has = 1;
		s->cur.min_bytes = held_bytes;
	}
}

static void evaluate(const gpumon_leak *l, const struct wset *s, gpumon_leak_result *out);

/* Closes the current window; when every slot is taken, halves their number by merging pairs (or,
 * sliding, drops the oldest). Returns 1 when a window closed with a value. */
static void close_window(gpumon_leak *l, struct wset *s, int held)
{
	s->w[s->nw++] = s->cur;
	s->closes++;
	open_window(s, held, l->last_bytes);
	if (s->nw == WINDOWS) {
		if (s->sliding) {
			memmove(s->w, s->w + 1, (WINDOWS - 1) * sizeof s->w[0]);
			s->nw = WINDOWS - 1;
			s->origin += s->width;
		} else {
			for (size_t i = 0; i < WINDOWS / 2; i++)
				s->w[i] = merge(&s->w[2 * i], &s->w[2 * i + 1]);
			s->nw = WINDOWS / 2;
			s->width *= 2;
		}
	}
}

/* The verdict at a close, how long it has said SUSPECTED, and the alert (once given, it stays:
 * it is what was told). The verdict changes only when a window closes. */
static void follow(gpumon_leak *l, struct wset *s, double pos, uint64_t t_ns)
{
	gpumon_leak_result r;
	evaluate(l, s, &r);
	s->last = r;
	if (r.verdict != GPUMON_LEAK_SUSPECTED) {
		s->suspect_closes = 0;
		return;
	}
	if (!s->suspect_closes++)
		s->suspect_from = pos;
	if (r.alert && !l->alert) {
		l->alert = 1;
		l->alert_t_ns = t_ns;
	}
}

/* Feeds one point at axis position a (time t, both relative to the first point). */
static void wset_add(gpumon_leak *l, struct wset *s, double a, double t, int64_t step, uint64_t t_ns,
		     uint64_t bytes, int held, int judge)
{
	double idx = floor((a - s->origin) / s->width);
	if (s->sliding && idx - (double)s->nw > 2 * WINDOWS) {
		/* a gap longer than the sliding windows reach: none of them holds a point any more; start
		   them afresh just before the point (a step function's value held over them) instead of
		   closing empty windows one by one, which a gap of years would make endless */
		close_window(l, s, held);
		for (size_t i = 0; i < s->nw; i++)
			s->w[i] = s->cur;
		s->origin += (idx - (double)s->nw) * s->width;
	}
	for (;;) {
		idx = floor((a - s->origin) / s->width);
		if (idx <= (double)s->nw)
			break;
		close_window(l, s, held);
		/* every close is judged, also of a window no point fell in: how often the series is fed
		   must not change how soon suspicion counts as held */
		if (judge)
			follow(l, s, s->origin + (double)s->nw * s->width, t_ns);
	}
	struct window *w = &s->cur;
	if (!w->n) {
		w->a0 = a;
		w->t0 = t;
		w->s0 = step;
	}
	if (!w->has || bytes < w->min_bytes)
		w->min_bytes = bytes;
	w->has = 1;
	w->n++;
	w->a1 = a;
	w->t1 = t;
	w->s1 = step;
}

/* Whether the steps so far (this one included) take SLOW_STEP_NS or more on average. */
static int slow_steps(const gpumon_leak *l, int64_t step, uint64_t t_ns)
{
	if (!l->steps_ok || step < 0 || !l->points || step <= l->first_step)
		return 0;
	return (double)(t_ns - l->first_t_ns) / (double)(step - l->first_step) >= SLOW_STEP_NS;
}

int gpumon_leak_add(gpumon_leak *l, int64_t step, uint64_t t_ns, uint64_t bytes)
{
	if (!l)
		return GPUMON_E_INVAL;
	if (l->points > 0 && t_ns < l->last_t_ns) {
		snprintf(l->msg, sizeof l->msg, "a point before the last one in time: ignored");
		return GPUMON_E_INVAL;
	}
	/* a step counter that goes back is out of order too (a restarted job is another series) */
	if (l->points > 0 && l->steps_ok && step >= 0 && step < l->last_step) {
		snprintf(l->msg, sizeof l->msg, "step %lld after step %lld: a restarted counter is a new series",
			 (long long)step, (long long)l->last_step);
		return GPUMON_E_INVAL;
	}
	if (l->points == 0) {
		l->first_t_ns = t_ns;
		l->first_step = step;
	}
	if (step < 0)
		l->steps_ok = 0; /* from now on the analysis works in time only */
	int held = l->cfg.mode == GPUMON_LEAK_HELD;
	double t = (double)(t_ns - l->first_t_ns);
	int slow = slow_steps(l, step, t_ns);
	if (l->steps_ok) {
		wset_add(l, &l->steps, (double)(step - l->first_step), t, step, t_ns, bytes, held, 1);
		wset_add(l, &l->recent_steps, (double)(step - l->first_step), t, step, t_ns, bytes, held, !l->alert && slow);
	}
	wset_add(l, &l->time, t, t, step, t_ns, bytes, held, !l->steps_ok);
	wset_add(l, &l->recent_time, t, t, step, t_ns, bytes, held, !l->alert && !slow);
	l->points++;
	l->last_t_ns = t_ns;
	l->last_step = step;
	l->last_bytes = bytes;
	return GPUMON_OK;
}

/* ---- statistics over entries [a, b) of a series ------------------------------------------------ */

/* The k-th smallest of v[0..n) (v is reordered): Hoare's selection, linear on average, where a sort
 * would cost n log n at every window close of every process an exporter follows. */
static double select_kth(double *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;
	while (lo < hi) {
		double pivot = v[lo + (hi - lo) / 2];
		size_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				double t = v[i];
				v[i] = v[j];
				v[j] = t;
				i++;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return v[k];
	}
	return v[k];
}

static double median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	double hi = select_kth(v, n, n / 2);
	if (n % 2)
		return hi;
	/* the lower middle is the largest of what now lies below the upper one */
	double lo = v[0];
	for (size_t i = 1; i < n / 2; i++)
		if (v[i] > lo)
			lo = v[i];
	return (lo + hi) / 2;
}

/* Theil-Sen slope: the median of the slopes between every pair of entries. */
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

/* Mann-Kendall trend statistic as a z score: positive when later entries tend to be higher.
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

/* Where one jump best explains entries [a, b): the first entry of the upper level of the two-level
 * model with the smallest squared error. Returns a when there is no room for it. */
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
 * squared error over all entries (warm-up included: a leak may start at once). */
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

/* The windows of s that hold a value. A window sits at the middle of its points (samples) or of
 * its span (a step function: the value covers the whole window). */
static void load_series(const gpumon_leak *l, const struct wset *s, int step_axis, struct series *out)
{
	int held = l->cfg.mode == GPUMON_LEAK_HELD;
	out->n = 0;
	for (size_t i = 0; i < s->nw; i++) {
		const struct window *w = &s->w[i];
		if (!w->has)
			continue;
		size_t k = out->n++;
		double mid = s->origin + ((double)i + 0.5) * s->width;
		out->x[k] = held || !w->n ? mid : (w->a0 + w->a1) / 2;
		if (step_axis)
			out->xs[k] = (w->t0 + w->t1) / 2e9;
		else
			out->xs[k] = out->x[k] / 1e9;
		out->y[k] = (double)w->min_bytes;
		out->idx[k] = i;
	}
}

/* Rates since the start and where it started, and the floor now. */
static void describe_leak(const gpumon_leak *l, const struct series *s, int step_axis, gpumon_leak_result *out)
{
	size_t c = hinge_start(s->x, s->y, s->n);
	if (s->n - c < MIN_TAIL)
		c = s->n - MIN_TAIL;
	double per_axis = theil_sen(s->x, s->y, c, s->n);
	double per_second = theil_sen(s->xs, s->y, c, s->n);
	out->rate_bytes_per_second = per_second;
	out->start_t_ns = l->first_t_ns + (uint64_t)(s->xs[c] * 1e9 > 0 ? s->xs[c] * 1e9 : 0);
	if (step_axis) {
		out->rate_bytes_per_step = per_axis;
		out->start_step = l->first_step + (int64_t)s->x[c];
	}
	/* the floor now: the fitted line at the last point */
	double now = step_axis ? (double)(l->last_step - l->first_step) : (double)(l->last_t_ns - l->first_t_ns);
	double floor = theil_sen_intercept(s->x, s->y, c, s->n, per_axis) + per_axis * now;
	out->floor_bytes = floor > 0 ? (uint64_t)floor : 0;
}

/* Growth that slows down is a cache filling, not yet a leak: the last quarter of the windows rises
 * at well under the rate of the quarter before it, or the later half of the windows judged at well
 * under the rate of the earlier half (a cache that fills ever more slowly over minutes). */
static int slowing_down(const struct series *s, size_t skip)
{
	size_t q = s->n / 4;
	if (q < MIN_SIDE)
		return 0;
	double recent = theil_sen(s->x, s->y, s->n - q, s->n), before = theil_sen(s->x, s->y, s->n - 2 * q, s->n - q);
	if (before > 0 && recent < ALERT_SLOWDOWN * before)
		return 1;
	size_t h = skip + (s->n - skip) / 2;
	if (h - skip < 2 * MIN_SIDE || s->n - h < 2 * MIN_SIDE)
		return 0;
	double later = theil_sen(s->x, s->y, h, s->n), earlier = theil_sen(s->x, s->y, skip, h);
	return earlier > 0 && later < ALERT_HALF_SLOWDOWN * earlier;
}

static void blank(const gpumon_leak *l, gpumon_leak_result *out)
{
	memset(out, 0, sizeof *out);
	out->verdict = GPUMON_LEAK_INSUFFICIENT_DATA;
	out->start_step = -1;
	out->points = l ? l->points : 0;
}

static void evaluate(const gpumon_leak *l, const struct wset *ws, gpumon_leak_result *out)
{
	blank(l, out);
	if (l->cfg.mode == GPUMON_LEAK_SAMPLES && l->points < MIN_POINTS)
		return;
	int step_axis = ws == &l->steps || ws == &l->recent_steps;
	struct series s;
	load_series(l, ws, step_axis, &s);
	size_t n = s.n, skip = (size_t)((double)n * WARMUP_SHARE);
	if (n < MIN_WINDOWS || !(s.x[n - 1] > s.x[0]) || !(s.xs[n - 1] > s.xs[0]))
		return; /* too few windows, or no span to speak of a rate over */
	if (ws->sliding) {
		/* a rise that began within the last minute: judged from just before its knee, so that the
		   flat minute before it does not outvote it */
		double span = step_axis ? (double)(l->last_step - l->first_step) : (double)(l->last_t_ns - l->first_t_ns);
		if (span < (double)(WINDOWS / 2) * ws->width)
			return;
		size_t c = hinge_start(s.x, s.y, n);
		skip = c > MIN_SIDE ? c - MIN_SIDE : 0;
		if (n - skip < RECENT_MIN_WINDOWS)
			return;
	}
	out->verdict = GPUMON_LEAK_NONE;

	/* the cheap test first: most series (a flat process) end here */
	double z = mann_kendall_z(s.y, skip, n);
	if (z < Z_TREND) {
		out->confidence = z <= 0 ? 1 : 1 - phi(z - Z_TREND);
		return;
	}
	double slope = theil_sen(s.x, s.y, skip, n);
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
	describe_leak(l, &s, step_axis, out);
	/* alert: SUSPECTED at every close for long enough, over a share of the growth, not slowing */
	double since_start = step_axis ? s.x[n - 1] - (double)(out->start_step - l->first_step)
				       : s.x[n - 1] - (double)(out->start_t_ns - l->first_t_ns);
	double suspected_for = s.x[n - 1] - ws->suspect_from;
	int old_enough = (double)(l->last_t_ns - l->first_t_ns) >= ALERT_MIN_SPAN_NS &&
			 (!l->steps_ok || l->last_step - l->first_step >= ALERT_MIN_STEPS);
	out->alert = old_enough && ws->suspect_closes >= ALERT_MIN_CLOSES && suspected_for >= ALERT_SHARE * since_start &&
		     !slowing_down(&s, skip);
}

/* A result from the sliding (time) windows of a series with steps: the rate per step at the pace of
 * the steps those windows span, and the step where the growth started. */
static void per_step_from_time(const gpumon_leak *l, gpumon_leak_result *out)
{
	const struct wset *s = &l->recent_time;
	const struct window *a = NULL, *b = NULL;
	if (!l->steps_ok)
		return;
	for (size_t i = 0; i < s->nw; i++)
		if (s->w[i].n) {
			if (!a)
				a = &s->w[i];
			b = &s->w[i];
		}
	if (!a || b->s1 <= a->s0 || b->t1 <= a->t0)
		return;
	double steps_per_second = (double)(b->s1 - a->s0) / ((b->t1 - a->t0) / 1e9);
	out->rate_bytes_per_step = out->rate_bytes_per_second / steps_per_second;
	double since = (double)(out->start_t_ns - l->first_t_ns) - a->t0;
	out->start_step = a->s0 + (int64_t)(since > 0 ? since / 1e9 * steps_per_second : 0);
}

void gpumon_leak_result_get(const gpumon_leak *l, gpumon_leak_result *out)
{
	if (!out)
		return;
	if (!l) {
		blank(l, out);
		return;
	}
	/* the whole run decides the verdict; the last minute may add an alert the whole run's coarser
	   windows cannot see yet (a leak that started late in a long run) */
	const struct wset *main = l->steps_ok ? &l->steps : &l->time;
	evaluate(l, main, out);
	const struct wset *recent = l->recent_steps.last.alert ? &l->recent_steps : &l->recent_time;
	if (!out->alert && recent->last.verdict == GPUMON_LEAK_SUSPECTED && recent->last.alert) {
		gpumon_leak_result r = recent->last;
		if (out->verdict != GPUMON_LEAK_SUSPECTED) {
			/* the recent rise is what is said; per step at the pace of the steps it spans */
			*out = r;
			out->points = l->points;
			if (recent == &l->recent_time)
				per_step_from_time(l, out);
		}
		out->alert = 1;
	}
	out->alert = out->alert || l->alert;
	out->alert_t_ns = l->alert_t_ns;
}
