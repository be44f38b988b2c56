/* SPDX-License-Identifier: MIT */
/* fit.c — the largest batch that fits the GPU, from the peaks of a few short runs: a least-squares
 * line (or quadratic) of peak on batch, a margin from what the runs showed, and the next batch
 * worth measuring. Decided here once for `gpumon fit` and Python's fit() and suggest_batch_size(). */
#include <gpumon/gpumon.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define FIT_TOLERANCE 0.02   /* a model holds when every run is within 2 % of it */
#define MARGIN_FLOOR 0.01    /* at least 1 % of the room stays free */
#define EXTRAPOLATED 4.0     /* an answer past 4x the largest run is said to be extrapolated */
#define THIRD_RUN_OVER 1.25  /* a third run checks the line only beyond 1.25x the largest run */
/* Growth the runs must show before a line is drawn through them: the allocator rounds blocks to
 * 2 MiB and caches segments of 20 MiB, so a model whose weights dwarf its activations peaks at the
 * same figure at batch 1 and 2 (measured on the H200: an MLP at 4.07 GiB, a ResNet at 1.06 GiB). */
#define GROWTH_MIN_BYTES (32.0 * 1048576.0)
#define GROWTH_MIN_SHARE 0.01
#define FLAT_STEP 8.0        /* while the peak stays flat, the next run is 8x the largest ... */
#define FLAT_SPAN 1024.0     /* ... until the runs span 1024x: then the batch is taken as unused */
#define MAX_DISTINCT 8       /* batch sizes run at most (the failures bisected aside) */
#define BATCH_MAX 9.0e15     /* below 2^53: every batch handled is exact as a double and a uint64 */
#define CONFIG_V1 offsetof(gpumon_fit_config, fixed_bytes) /* the first version's size */

/* What the runs that did not fail say, gathered once. */
typedef struct view {
	size_t ok;         /* runs that did not fail */
	size_t distinct;   /* distinct batch sizes among them */
	double bmin, bmax; /* their smallest and largest batch */
	double failed_min; /* the smallest failed batch; INFINITY when none failed */
	double ran_below;  /* the largest batch that ran below failed_min (0 none): the bound a failure
			      leaves the answer */
	double frag;       /* the largest (reserved - allocated) / peak of the runs that give both */
	double pmin, pmax; /* the highest peak at bmin and at bmax */
} view;

/* peak = k[0] + k[1] b + k[2] b^2 */
static double predict(const double k[3], double b)
{
	return k[0] + k[1] * b + k[2] * b * b;
}

/* Appends one clause to the note, clauses joined by "; " (truncated at the note's size). */
__attribute__((format(printf, 2, 3))) static void say(gpumon_fit *out, const char *fmt, ...)
{
	size_t len = strlen(out->note);
	if (len && len + 2 < sizeof out->note) {
		memcpy(out->note + len, "; ", 3);
		len += 2;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->note + len, sizeof out->note - len, fmt, ap);
	va_end(ap);
}

/* "12.3 GiB" or "640 MiB" */
static const char *human(double bytes, char *buf, size_t len)
{
	if (bytes >= 1073741824.0)
		snprintf(buf, len, "%.1f GiB", bytes / 1073741824.0);
	else
		snprintf(buf, len, "%.0f MiB", ceil(bytes / 1048576.0));
	return buf;
}

/* The configuration with defaults for the fields past cfg->size; -1 when it cannot be read. */
static int take_config(const gpumon_fit_config *cfg, gpumon_fit_config *c)
{
	if (!cfg || cfg->size < CONFIG_V1 || cfg->size > sizeof *c)
		return -1;
	memset(c, 0, sizeof *c);
	memcpy(c, cfg, cfg->size);
	if (!c->multiple_of)
		c->multiple_of = 1;
	return 0;
}

/* Reads the runs into *v; -1 (and *bad the index) when a batch is not a positive finite number. */
static int take_runs(const gpumon_fit_run *runs, size_t n, view *v, size_t *bad)
{
	memset(v, 0, sizeof *v);
	v->failed_min = INFINITY;
	for (size_t i = 0; i < n; i++) {
		const gpumon_fit_run *r = &runs[i];
		if (!(r->batch > 0) || !isfinite(r->batch) || r->batch > BATCH_MAX) {
			*bad = i;
			return -1;
		}
		if (r->failed) {
			v->failed_min = fmin(v->failed_min, r->batch);
			continue;
		}
		int seen = 0;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !runs[j].failed && runs[j].batch == r->batch;
		v->distinct += !seen;
		double p = (double)r->peak_bytes;
		if (!v->ok || r->batch < v->bmin)
			v->bmin = r->batch, v->pmin = p;
		else if (r->batch == v->bmin)
			v->pmin = fmax(v->pmin, p);
		if (r->batch > v->bmax)
			v->bmax = r->batch, v->pmax = p;
		else if (r->batch == v->bmax)
			v->pmax = fmax(v->pmax, p);
		v->ok++;
		if (r->allocated_peak_bytes && r->reserved_peak_bytes >= r->allocated_peak_bytes && r->peak_bytes)
			v->frag = fmax(v->frag, (double)(r->reserved_peak_bytes - r->allocated_peak_bytes) /
							(double)r->peak_bytes);
	}
	for (size_t i = 0; i < n; i++)
		if (!runs[i].failed && runs[i].batch < v->failed_min)
			v->ran_below = fmax(v->ran_below, runs[i].batch);
	return 0;
}

/* The largest |measured - fitted| / measured over the runs that did not fail. */
static double misfit_of(const gpumon_fit_run *runs, size_t n, const double k[3])
{
	double worst = 0;
	for (size_t i = 0; i < n; i++)
		if (!runs[i].failed) {
			double p = (double)runs[i].peak_bytes;
			worst = fmax(worst, fabs(p - predict(k, runs[i].batch)) / fmax(p, 1));
		}
	return worst;
}

/* Least squares line; through (0, fixed) when the fixed part is known. */
static void fit_line(const gpumon_fit_run *runs, size_t n, const gpumon_fit_config *c, double k[3])
{
	double sb = 0, sp = 0, m = 0;
	k[0] = k[1] = k[2] = 0;
	if (c->fixed_known) {
		double f = (double)c->fixed_bytes, sbp = 0, sbb = 0;
		for (size_t i = 0; i < n; i++)
			if (!runs[i].failed) {
				sbp += runs[i].batch * ((double)runs[i].peak_bytes - f);
				sbb += runs[i].batch * runs[i].batch;
			}
		k[0] = f;
		k[1] = sbb > 0 ? sbp / sbb : 0;
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!runs[i].failed) {
			sb += runs[i].batch;
			sp += (double)runs[i].peak_bytes;
			m++;
		}
	double mb = sb / m, mp = sp / m, sbb = 0, sbp = 0;
	for (size_t i = 0; i < n; i++)
		if (!runs[i].failed) {
			double db = runs[i].batch - mb;
			sbb += db * db;
			sbp += db * ((double)runs[i].peak_bytes - mp);
		}
	k[1] = sbb > 0 ? sbp / sbb : 0;
	k[0] = mp - k[1] * mb;
}

/* Least squares quadratic, on batch and peak scaled to at most 1 so that the normal equations stay
 * well conditioned. -1 when they are singular. */
static int fit_quadratic(const gpumon_fit_run *runs, size_t n, const view *v, double k[3])
{
	double a[3][4] = {{0}}, pmax = 1;
	for (size_t i = 0; i < n; i++)
		if (!runs[i].failed)
			pmax = fmax(pmax, (double)runs[i].peak_bytes);
	for (size_t i = 0; i < n; i++) {
		if (runs[i].failed)
			continue;
		double x = runs[i].batch / v->bmax, y = (double)runs[i].peak_bytes / pmax;
		double pw[5] = {1, x, x * x, x * x * x, x * x * x * x};
		for (int r = 0; r < 3; r++) {
			for (int col = 0; col < 3; col++)
				a[r][col] += pw[r + col];
			a[r][3] += pw[r] * y;
		}
	}
	for (int col = 0; col < 3; col++) { /* Gauss-Jordan with partial pivoting */
		int piv = col;
		for (int r = col + 1; r < 3; r++)
			if (fabs(a[r][col]) > fabs(a[piv][col]))
				piv = r;
		if (fabs(a[piv][col]) < 1e-12)
			return -1;
		for (int j = 0; j < 4; j++) {
			double t = a[col][j];
			a[col][j] = a[piv][j];
			a[piv][j] = t;
		}
		for (int r = 0; r < 3; r++) {
			if (r == col)
				continue;
			double f = a[r][col] / a[col][col];
			for (int j = col; j < 4; j++)
				a[r][j] -= f * a[col][j];
		}
	}
	k[0] = a[0][3] / a[0][0] * pmax;
	k[1] = a[1][3] / a[1][1] * pmax / v->bmax;
	k[2] = a[2][3] / a[2][2] * pmax / (v->bmax * v->bmax);
	return 0;
}

/* What is kept free beyond the prediction at batch b. */
static double margin_at(const double k[3], double misfit, const view *v, double room, double b)
{
	double m = (v->frag + misfit) * fmax(predict(k, b), 0);
	return ceil(fmax(m, MARGIN_FLOOR * room));
}

static int fits(const double k[3], double misfit, const view *v, double room, double b)
{
	return predict(k, b) + margin_at(k, misfit, v, room, b) <= room;
}

/* The largest multiple of mult that fits, 0 when none does. The peak rises with the batch from the
 * smallest run on, so the bound found in closed form is only nudged for rounding. */
static double largest_fit(const double k[3], double misfit, const view *v, double room, double mult)
{
	double cap = fmin(room / (1 + v->frag + misfit), room - ceil(MARGIN_FLOOR * room)), b;
	if (k[2] > 0) {
		double disc = k[1] * k[1] - 4 * k[2] * (k[0] - cap);
		b = disc < 0 ? 0 : (-k[1] + sqrt(disc)) / (2 * k[2]);
	} else {
		b = (cap - k[0]) / k[1];
	}
	if (!(b > 0))
		return 0;
	b = floor(fmin(b, BATCH_MAX) / mult) * mult;
	for (int i = 0; i < 8 && b >= mult && !fits(k, misfit, v, room, b); i++)
		b -= mult;
	for (int i = 0; i < 8 && b + mult <= BATCH_MAX && fits(k, misfit, v, room, b + mult); i++)
		b += mult;
	return b >= mult && fits(k, misfit, v, room, b) ? b : 0;
}

/* The shape that holds, coefficients in k; NONE with the reason said. */
static int choose_shape(const gpumon_fit_run *runs, size_t n, const gpumon_fit_config *c, const view *v,
			gpumon_fit *out, double k[3])
{
	fit_line(runs, n, c, k);
	out->misfit = misfit_of(runs, n, k);
	if (!(k[1] > 0)) {
		say(out, "the peak does not grow with the batch: is {batch} used?");
		return GPUMON_FIT_NONE;
	}
	if (out->misfit <= FIT_TOLERANCE) {
		if (v->distinct == 2 && !c->fixed_known)
			say(out, "two batch sizes fit any line: a run at a third would check it");
		return GPUMON_FIT_LINEAR;
	}
	double q[3];
	if (v->distinct >= 3 && !c->fixed_known && !fit_quadratic(runs, n, v, q) && q[2] > 0 &&
	    q[1] + 2 * q[2] * v->bmin > 0) {
		double mq = misfit_of(runs, n, q);
		if (mq <= FIT_TOLERANCE) {
			memcpy(k, q, sizeof q);
			out->misfit = mq;
			say(out, "the peak grows faster than the batch (as attention does with length)");
			return GPUMON_FIT_QUADRATIC;
		}
	}
	say(out, "the peaks do not follow the batch (the runs are %.0f %% off the best line)", out->misfit * 100);
	return GPUMON_FIT_NONE;
}

int gpumon_fit_batch(const gpumon_fit_run *runs, size_t n, const gpumon_fit_config *cfg, gpumon_fit *out)
{
	if (!out || out->size != sizeof *out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	out->size = sizeof *out;
	gpumon_fit_config c;
	view v;
	size_t bad = 0;
	if (!runs || !n) {
		say(out, "no runs to fit");
		return GPUMON_E_INVAL;
	}
	if (take_config(cfg, &c)) {
		say(out, "the fit's configuration is missing or of a size this library does not know");
		return GPUMON_E_INVAL;
	}
	if (take_runs(runs, n, &v, &bad)) {
		say(out, "run %zu: the batch must be a positive number (up to 2^53), got %g", bad + 1, runs[bad].batch);
		return GPUMON_E_INVAL;
	}
	if (!v.ok) {
		say(out, "every run ran out of memory: even batch %g did not fit", v.failed_min);
		return 0;
	}
	if (v.distinct < 2 && !c.fixed_known) {
		say(out, "a fit needs runs at two or more different batch sizes");
		return 0;
	}
	double k[3], room = (double)c.room_bytes, mult = c.multiple_of;
	out->shape = choose_shape(runs, n, &c, &v, out, k);
	out->fixed_bytes = k[0];
	out->per_sample_bytes = k[1];
	out->per_sample2_bytes = k[2];
	if (out->shape == GPUMON_FIT_NONE)
		return 0;

	double best = largest_fit(k, out->misfit, &v, room, mult), at = best;
	char h1[32], h2[32];
	if (!best) {
		double need = predict(k, mult) + margin_at(k, out->misfit, &v, room, mult);
		say(out, "even batch %.0f needs %s, %s more than the room", mult, human(need, h1, sizeof h1),
		    human(need - room, h2, sizeof h2));
		at = mult;
	} else if (best >= v.failed_min) {
		/* the runs know more than the fit: the largest batch that ran below the failure is the answer */
		say(out, "batch %g ran out of memory: the answer is the largest batch that ran below it (the fit alone "
			 "said %.0f)", v.failed_min, best);
		best = floor(v.ran_below / mult) * mult;
		at = best ? best : mult;
	}
	out->max_batch = (uint64_t)best;
	out->predicted_peak_bytes = (uint64_t)ceil(fmax(predict(k, at), 0));
	out->margin_bytes = (uint64_t)margin_at(k, out->misfit, &v, room, at);
	if (best > EXTRAPOLATED * v.bmax) {
		out->extrapolated = 1;
		say(out, "batch %.0f is more than 4x the largest run (%g): a run nearer it would check the fit", best,
		    v.bmax);
	}
	return 0;
}

uint64_t gpumon_fit_next(const gpumon_fit_run *runs, size_t n, const gpumon_fit_config *cfg, uint64_t first)
{
	gpumon_fit_config c;
	view v;
	size_t bad;
	if ((n && !runs) || take_config(cfg, &c) || take_runs(runs, n, &v, &bad))
		return 0;
	double room = (double)c.room_bytes;
	if (!v.distinct) {
		double x = (double)first;
		while (x >= v.failed_min)
			x = floor(x / 2);
		return (uint64_t)x;
	}
	if (v.distinct == 1) {
		double b = v.bmax, p = 0;
		for (size_t i = 0; i < n; i++)
			if (!runs[i].failed)
				p = fmax(p, (double)runs[i].peak_bytes);
		double x = floor(2 * b);
		if (2 * p > room / 2) { /* the proportional prediction p x / b over-estimates the growth */
			x = fmax(floor(room / 2 * b / p), floor(b) + 1);
			if (p * x / b + ceil(MARGIN_FLOOR * room) > room)
				return 0;
		}
		if (x >= v.failed_min)
			x = ceil(v.failed_min) - 1;
		return x > b ? (uint64_t)fmin(x, BATCH_MAX) : 0;
	}
	if (isfinite(v.failed_min)) { /* a bound the fit could not see: bisected down to 1 % */
		double ran = v.ran_below, mult = c.multiple_of > 1 ? c.multiple_of : 1;
		double mid = floor((ran + v.failed_min) / 2 / mult) * mult;
		if (ran > 0 && v.failed_min - ran > fmax(mult, ran / 100) && mid > ran && mid < v.failed_min)
			return (uint64_t)mid;
		return 0;
	}
	if (v.distinct >= MAX_DISTINCT)
		return 0;
	double growth = v.pmax - v.pmin, least = fmax(GROWTH_MIN_BYTES, GROWTH_MIN_SHARE * v.pmin);
	if (!c.fixed_known && growth < least) {
		/* flat so far: a larger run, as far as the steepest slope the runs allow (what they could
		   have hidden below `least`) predicts half the room */
		if (v.bmax >= FLAT_SPAN * v.bmin)
			return 0;
		double slope = (fmax(growth, 0) + least) / (v.bmax - v.bmin);
		double x = floor(fmin(FLAT_STEP * v.bmax, v.bmax + (room / 2 - v.pmax) / slope));
		if (c.multiple_of > 1)
			x = floor(x / c.multiple_of) * c.multiple_of;
		return x > THIRD_RUN_OVER * v.bmax ? (uint64_t)fmin(x, BATCH_MAX) : 0;
	}
	gpumon_fit f = {.size = sizeof f};
	if (gpumon_fit_batch(runs, n, cfg, &f) || f.shape == GPUMON_FIT_NONE)
		return 0;
	uint64_t h = f.max_batch / 2;
	if (c.multiple_of > 1 && h >= c.multiple_of)
		h -= h % c.multiple_of;
	return (double)h > THIRD_RUN_OVER * v.bmax ? h : 0;
}

int gpumon_fit_run_from(const gpumon_fit_measure *m, gpumon_fit_run *out)
{
	if (!m || !out || m->size != sizeof *m)
		return GPUMON_E_INVAL;
	gpumon_placed pl = {0};
	if (m->nvml_bytes && m->reserved_bytes) /* both known: what is outside the allocator */
		gpumon_placed_split(m->nvml_bytes, m->reserved_bytes, 0, &pl);
	uint64_t outside = pl.outside_bytes;
	uint64_t top = m->reserved_peak_bytes ? m->reserved_peak_bytes : m->allocated_peak_bytes;
	uint64_t peak = m->nvml_peak_bytes > m->nvml_bytes ? m->nvml_peak_bytes : m->nvml_bytes;
	if (top && outside + top > peak)
		peak = outside + top;
	*out = (gpumon_fit_run){.batch = m->batch, .peak_bytes = peak, .allocated_peak_bytes = m->allocated_peak_bytes,
				.reserved_peak_bytes = m->reserved_peak_bytes, .failed = !!m->failed};
	return 0;
}

int gpumon_job_room_get(const gpumon_job_room_input *in, gpumon_job_room *out)
{
	if (!in || !out || in->size != sizeof *in || out->size != sizeof *out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	out->size = sizeof *out;
	if (!in->free_known)
		return GPUMON_E_NOT_FOUND;
	/* NVML's figure may lag the allocator's: the process holds at least its reserve */
	uint64_t held = in->process_bytes > in->reserved_bytes ? in->process_bytes : in->reserved_bytes;
	gpumon_placed pl = {0};
	if (in->process_bytes && in->reserved_bytes)
		gpumon_placed_split(in->process_bytes, in->reserved_bytes, 0, &pl);
	out->outside_bytes = pl.outside_bytes;
	out->room_bytes = in->free_bytes + held;
	if (in->cap_bytes && in->cap_bytes + out->outside_bytes < out->room_bytes)
		out->room_bytes = in->cap_bytes + out->outside_bytes;
	out->allocator_bytes = out->room_bytes - out->outside_bytes;
	return 0;
}
