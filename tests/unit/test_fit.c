/* SPDX-License-Identifier: MIT */
/* test_fit.c — the batch-size fit on made-up runs: a line, two runs only, a quadratic, peaks that
 * follow neither, a batch that is ignored, a failed run as an upper bound, a room that holds not
 * even the smallest batch, the margin from fragmentation, extrapolation, a known fixed part, bad
 * input, and the next batch gpumon_fit_next asks for. Answers are checked against a plain search. */
#include <gpumon/gpumon.h>

#include "tap.h"

#include <math.h>
#include <string.h>

#define MIB 1048576.0
#define GIB 1073741824.0

/* no libm needed (the unit tests link libgpumon and libc only); ceil of values >= 0 */
static double fabs_(double x)
{
	return x < 0 ? -x : x;
}
static double fmax_(double a, double b)
{
	return a > b ? a : b;
}
static double ceil_(double x)
{
	double t = (double)(uint64_t)x;
	return t < x ? t + 1 : t;
}
#define fabs fabs_
#define fmax fmax_
#define ceil ceil_

static gpumon_fit_config config(double room, unsigned mult)
{
	gpumon_fit_config c = GPUMON_CONFIG_INIT(gpumon_fit_config);
	c.room_bytes = (uint64_t)room;
	c.multiple_of = mult;
	return c;
}

static gpumon_fit_run run(double batch, double peak)
{
	gpumon_fit_run r = {.batch = batch, .peak_bytes = (uint64_t)peak};
	return r;
}

/* The largest multiple of mult whose peak plus a margin of max(share x peak, 1 % of room) fits,
 * found by walking up batch by batch. */
static uint64_t search(double fixed, double a, double c, double share, double room, unsigned mult)
{
	uint64_t best = 0;
	for (uint64_t b = mult; b < 1000000; b += mult) {
		double p = fixed + a * (double)b + c * (double)b * (double)b;
		double m = fmax(share * p, ceil(0.01 * room));
		if (p + m > room)
			break;
		best = b;
	}
	return best;
}

static int fit(const gpumon_fit_run *r, size_t n, const gpumon_fit_config *c, gpumon_fit *f)
{
	memset(f, 0xa5, sizeof *f); /* what the library does not set would show */
	f->size = sizeof *f;
	return gpumon_fit_batch(r, n, c, f);
}

static void test_line(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(10 * GIB, 1);
	gpumon_fit_run r[3] = {run(8, 2 * GIB + 800 * MIB), run(16, 2 * GIB + 1600 * MIB), run(32, 2 * GIB + 3200 * MIB)};
	is_int(fit(r, 3, &c, &f), 0, "a line: fitted");
	is_int(f.shape, GPUMON_FIT_LINEAR, "three runs on a line: LINEAR");
	ok(fabs(f.fixed_bytes - 2 * GIB) < 1 && fabs(f.per_sample_bytes - 100 * MIB) < 1e-3 && f.per_sample2_bytes == 0,
	   "fixed 2 GiB, 100 MiB a sample");
	ok(f.misfit < 1e-9, "misfit 0");
	is_int(f.max_batch, search(2 * GIB, 100 * MIB, 0, 0, 10 * GIB, 1), "max_batch as the search finds it");
	is_int(f.max_batch, 80, "(10 GiB - 1 %% - 2 GiB) / 100 MiB = 80.9");
	is_int(f.margin_bytes, (uint64_t)ceil(0.01 * 10 * GIB), "the margin: 1 %% of room");
	ok(fabs((double)f.predicted_peak_bytes - (2 * GIB + 8000 * MIB)) <= 2, "the predicted peak at 80");
	ok(!f.extrapolated, "not extrapolated");
	is_str(f.note, "", "nothing worth saying");
	c.multiple_of = 32;
	fit(r, 3, &c, &f);
	is_int(f.max_batch, 64, "a multiple of 32");
	c.multiple_of = 0;
	fit(r, 3, &c, &f);
	is_int(f.max_batch, 80, "multiple_of 0 is 1");

	is_int(fit(r + 1, 2, &c, &f), 0, "two runs: fitted");
	is_int(f.shape, GPUMON_FIT_LINEAR, "two runs: LINEAR");
	is_str(f.note, "two batch sizes fit any line: a run at a third would check it", "two runs: a third would check");
	is_int(f.max_batch, 80, "two runs: the same answer");

	gpumon_fit_run noisy[4] = {run(8, 2 * GIB + 800 * MIB), run(16, (2 * GIB + 1600 * MIB) * 1.015),
				   run(24, 2 * GIB + 2400 * MIB), run(32, 2 * GIB + 3200 * MIB)};
	fit(noisy, 4, &c, &f);
	ok(f.shape == GPUMON_FIT_LINEAR && f.misfit > 0.005 && f.misfit <= 0.02, "a run 1.5 %% off: still LINEAR");
	is_int(f.max_batch, search(f.fixed_bytes, f.per_sample_bytes, 0, f.misfit, 10 * GIB, 1),
	       "the misfit is kept free at the answer");
}

static void test_quadratic(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(20 * GIB, 1);
	double k0 = GIB, k1 = 10 * MIB, k2 = 0.5 * MIB;
	gpumon_fit_run r[4];
	double b[4] = {16, 32, 64, 128};
	for (int i = 0; i < 4; i++)
		r[i] = run(b[i], k0 + k1 * b[i] + k2 * b[i] * b[i]);
	is_int(fit(r, 3, &c, &f), 0, "quadratic: fitted");
	is_int(f.shape, GPUMON_FIT_QUADRATIC, "three runs on a parabola: QUADRATIC");
	is_str(f.note, "the peak grows faster than the batch (as attention does with length)", "the note says why");
	ok(fabs(f.per_sample2_bytes - k2) / k2 < 1e-6 && fabs(f.per_sample_bytes - k1) / k1 < 1e-6 &&
		   fabs(f.fixed_bytes - k0) / k0 < 1e-6,
	   "the coefficients found back");
	is_int(f.max_batch, search(k0, k1, k2, 0, 20 * GIB, 1), "max_batch as the search finds it");
	fit(r, 4, &c, &f);
	ok(f.shape == GPUMON_FIT_QUADRATIC && f.misfit < 1e-6, "four runs: QUADRATIC by least squares");

	/* peaks that follow neither a line nor a parabola */
	gpumon_fit_run z[4] = {run(8, 4 * GIB), run(16, 9 * GIB), run(24, 5 * GIB), run(32, 12 * GIB)};
	fit(z, 4, &c, &f);
	is_int(f.shape, GPUMON_FIT_NONE, "zigzag peaks: NONE");
	is_int(f.max_batch, 0, "zigzag peaks: no answer");
	ok(!strncmp(f.note, "the peaks do not follow the batch", 33), "the note says they do not follow: %s", f.note);
	/* growing slower than the batch is not the quadratic of attention */
	gpumon_fit_run s[3] = {run(10, 10 * GIB), run(20, 15 * GIB), run(40, 17 * GIB)};
	fit(s, 3, &c, &f);
	is_int(f.shape, GPUMON_FIT_NONE, "a peak that levels off: NONE");
}

static void test_ignored_batch(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(80 * GIB, 1);
	gpumon_fit_run flat[3] = {run(1, 10 * GIB), run(2, 10 * GIB), run(4, 10 * GIB)};
	is_int(fit(flat, 3, &c, &f), 0, "flat peaks: not an error");
	is_int(f.shape, GPUMON_FIT_NONE, "flat peaks: NONE");
	is_int(f.max_batch, 0, "flat peaks: no answer");
	is_str(f.note, "the peak does not grow with the batch: is {batch} used?", "flat peaks: the note asks");
	gpumon_fit_run down[2] = {run(8, 10 * GIB), run(16, 9 * GIB)};
	fit(down, 2, &c, &f);
	ok(f.shape == GPUMON_FIT_NONE && f.per_sample_bytes < 0, "a falling peak: NONE, the slope kept");
}

/* Weights that dwarf the activations: the allocator's rounding makes batch 1 and 2 peak alike (an MLP
 * of 176 M parameters on the H200: 4,368,367,616 bytes at both), which is no ignored batch. */
static void test_flat_then_growing(void)
{
	gpumon_fit_config c = config(140 * GIB, 1);
	const double fixed = 4368367616.0, per = 200.0 * 1024; /* 200 KiB of activations a sample */
	gpumon_fit_run r[6] = {run(1, (uint64_t)fixed), run(2, (uint64_t)fixed)};
	is_int(gpumon_fit_next(r, 2, &c, 1), 16, "flat at 1 and 2: a run at 8x the largest");
	r[2] = run(16, (uint64_t)(fixed + 2 * MIB));
	is_int(gpumon_fit_next(r, 3, &c, 1), 128, "still within the allocator's rounding at 16: 8x again");
	r[3] = run(128, (uint64_t)(fixed + 128 * per));
	is_int(gpumon_fit_next(r, 4, &c, 1), 1024, "25 MiB more at 128: under 32 MiB, flat still");
	r[4] = run(1024, (uint64_t)(fixed + 1024 * per));
	uint64_t next = gpumon_fit_next(r, 5, &c, 1);
	gpumon_fit f;
	fit(r, 5, &c, &f);
	is_int(f.shape, GPUMON_FIT_LINEAR, "200 MiB more at 1024: a line");
	ok(fabs(f.per_sample_bytes - per) < per * 0.05, "its slope is the activations' (%.0f)", f.per_sample_bytes);
	ok(next == f.max_batch / 2, "a run near half the answer checks it (%llu of %llu)", (unsigned long long)next,
	   (unsigned long long)f.max_batch);
	/* the steepest slope the flat runs allow bounds the jump near a full GPU */
	gpumon_fit_config small = config(12 * GIB, 1);
	gpumon_fit_run near[2] = {run(1, 5 * GIB), run(2, 5 * GIB)};
	uint64_t x = gpumon_fit_next(near, 2, &small, 1);
	ok(x > 2 && x <= 16 && 5 * GIB + (double)(x - 2) * 32 * MIB <= 6 * GIB,
	   "near the room: no further than half the room at the steepest hidden slope (%llu)", (unsigned long long)x);
	/* a batch that is not used stays flat over 1024x: then no more runs, and the fit says so */
	gpumon_fit_run flat[5] = {run(1, 10 * GIB), run(2, 10 * GIB), run(16, 10 * GIB), run(128, 10 * GIB),
				  run(1024, 10 * GIB)};
	is_int(gpumon_fit_next(flat, 5, &c, 1), 0, "flat over 1024x: enough runs");
	fit(flat, 5, &c, &f);
	is_str(f.note, "the peak does not grow with the batch: is {batch} used?", "and the note asks");
}

static void test_failed(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(10 * GIB, 1);
	gpumon_fit_run r[4] = {run(8, 2 * GIB + 800 * MIB), run(16, 2 * GIB + 1600 * MIB), run(32, 2 * GIB + 3200 * MIB),
			       run(48, 9.9 * GIB)};
	r[3].failed = 1;
	is_int(fit(r, 4, &c, &f), 0, "a failed run: fitted");
	is_int(f.shape, GPUMON_FIT_LINEAR, "the failed run is not on the line");
	is_int(f.max_batch, 32, "below the failed batch: the largest batch that ran");
	is_str(f.note, "batch 48 ran out of memory: the answer is the largest batch that ran below it (the fit alone said 80)",
	       "the note says it corrected the fit");
	ok(fabs((double)f.predicted_peak_bytes - (2 * GIB + 3200 * MIB)) <= 2, "the prediction at 32");
	is_int(gpumon_fit_next(r, 4, &c, 8), 40, "the bound bisected: between 32 that ran and 48 that failed");
	gpumon_fit_run b[5] = {r[0], r[1], r[2], r[3], run(47, 2 * GIB + 4700 * MIB)};
	fit(b, 5, &c, &f);
	is_int(f.max_batch, 47, "a run just below the failure: the answer");
	is_int(gpumon_fit_next(b, 5, &c, 8), 0, "bisected to 1 %%: enough");
	c.multiple_of = 16;
	fit(r, 4, &c, &f);
	is_int(f.max_batch, 32, "below the failed batch, a multiple of 16");
	is_int(gpumon_fit_next(r, 4, &c, 8), 0, "32 and 48 are one multiple of 16 apart: nothing to bisect");
	c.multiple_of = 1;
	r[3].batch = 100;
	fit(r, 4, &c, &f);
	ok(f.max_batch == 80 && !f.note[0], "a failed run above the answer: nothing corrected");
	r[0].failed = r[1].failed = r[2].failed = 1;
	fit(r, 4, &c, &f);
	ok(f.shape == GPUMON_FIT_NONE && f.max_batch == 0, "every run failed: no answer");
	is_str(f.note, "every run ran out of memory: even batch 8 did not fit", "every run failed: said");
}

static void test_room(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(2 * GIB, 1);
	gpumon_fit_run r[3] = {run(8, 2 * GIB + 800 * MIB), run(16, 2 * GIB + 1600 * MIB), run(32, 2 * GIB + 3200 * MIB)};
	fit(r, 3, &c, &f);
	ok(f.shape == GPUMON_FIT_LINEAR && f.max_batch == 0, "a room below the fixed part: LINEAR, max_batch 0");
	/* 2148 MiB + 1 % of 2 GiB (20.5 MiB) = 2.1 GiB, 121 MiB more than 2 GiB */
	is_str(f.note, "even batch 1 needs 2.1 GiB, 121 MiB more than the room", "even batch 1: said with figures");
	ok(fabs((double)f.predicted_peak_bytes - (2 * GIB + 100 * MIB)) <= 2, "the prediction of batch 1");
	c.room_bytes = 0;
	ok(!fit(r, 3, &c, &f) && f.max_batch == 0, "no room at all: 0, not an error");
}

static void test_fragmentation(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(40 * GIB, 1);
	gpumon_fit_run r[3];
	double b[3] = {8, 16, 32};
	for (int i = 0; i < 3; i++) {
		double p = 4 * GIB + b[i] * 200 * MIB;
		r[i] = run(b[i], p);
		r[i].reserved_peak_bytes = (uint64_t)(p - 512 * MIB);
		r[i].allocated_peak_bytes = r[i].reserved_peak_bytes - (uint64_t)(p * (i == 1 ? 0.10 : 0.05));
	}
	fit(r, 3, &c, &f);
	is_int(f.max_batch, search(4 * GIB, 200 * MIB, 0, 0.10 + f.misfit, 40 * GIB, 1),
	       "the largest fragmentation share kept free at the answer");
	ok(fabs((double)f.margin_bytes - ceil(0.10 * (double)f.predicted_peak_bytes)) <= 16,
	   "margin_bytes: 10 %% of the prediction (%llu, %llu)", (unsigned long long)f.margin_bytes,
	   (unsigned long long)f.predicted_peak_bytes);
	r[1].allocated_peak_bytes = 0;
	fit(r, 3, &c, &f);
	is_int(f.max_batch, search(4 * GIB, 200 * MIB, 0, 0.05 + f.misfit, 40 * GIB, 1),
	       "a run without the allocator's figures adds nothing");
}

static void test_extrapolated_and_fixed(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(80 * GIB, 1);
	gpumon_fit_run r[2] = {run(1, GIB + 50 * MIB), run(2, GIB + 100 * MIB)};
	fit(r, 2, &c, &f);
	ok(f.extrapolated && f.max_batch > 8, "an answer past 4x the largest run: extrapolated");
	char want[256];
	snprintf(want, sizeof want,
		 "two batch sizes fit any line: a run at a third would check it; batch %llu is more than 4x the "
		 "largest run (2): a run nearer it would check the fit",
		 (unsigned long long)f.max_batch);
	is_str(f.note, want, "both said, in one sentence");

	/* the fixed part known: one run is enough (2 GiB fixed, 1 GiB more at 64: 16 MiB a sample) */
	gpumon_fit_run one = run(64, 3 * GIB);
	c = config(9 * GIB, 1);
	fit(&one, 1, &c, &f);
	ok(f.shape == GPUMON_FIT_NONE && f.max_batch == 0, "one run without the fixed part: NONE");
	is_str(f.note, "a fit needs runs at two or more different batch sizes", "one run: said");
	c.fixed_known = 1;
	c.fixed_bytes = 2 * (uint64_t)GIB;
	fit(&one, 1, &c, &f);
	is_int(f.shape, GPUMON_FIT_LINEAR, "one run with the fixed part: LINEAR");
	is_int(f.max_batch, 442, "(9 GiB - 1 %% - 2 GiB) / 16 MiB = 442.2");
	/* a caller of the first version: a config without the fixed part */
	gpumon_fit_config v1 = config(9 * GIB, 1);
	v1.size = (unsigned)offsetof(gpumon_fit_config, fixed_bytes);
	v1.fixed_known = 1;
	fit(&one, 1, &v1, &f);
	is_int(f.shape, GPUMON_FIT_NONE, "the first version's size: the fields past it are not read");
}

static void test_invalid(void)
{
	gpumon_fit f;
	gpumon_fit_config c = config(10 * GIB, 1);
	gpumon_fit_run r[2] = {run(8, GIB), run(16, 2 * GIB)};
	is_int(fit(NULL, 2, &c, &f), GPUMON_E_INVAL, "runs NULL");
	is_int(fit(r, 0, &c, &f), GPUMON_E_INVAL, "n 0");
	is_str(f.note, "no runs to fit", "n 0: said");
	is_int(fit(r, 2, NULL, &f), GPUMON_E_INVAL, "cfg NULL");
	c.size = sizeof c + 8;
	is_int(fit(r, 2, &c, &f), GPUMON_E_INVAL, "cfg larger than known");
	c.size = 4;
	is_int(fit(r, 2, &c, &f), GPUMON_E_INVAL, "cfg smaller than the first version");
	c.size = sizeof c;
	is_int(gpumon_fit_batch(r, 2, &c, NULL), GPUMON_E_INVAL, "out NULL");
	f.size = 8;
	is_int(gpumon_fit_batch(r, 2, &c, &f), GPUMON_E_INVAL, "out->size wrong");
	double bad[5] = {0, -1, NAN, INFINITY, 1e300};
	for (int i = 0; i < 5; i++) {
		r[1].batch = bad[i];
		is_int(fit(r, 2, &c, &f), GPUMON_E_INVAL, "batch %g refused", bad[i]);
	}
	r[1].batch = 0;
	fit(r, 2, &c, &f);
	is_str(f.note, "run 2: the batch must be a positive number (up to 2^53), got 0", "the note names the run");
	is_int(gpumon_fit_next(r, 2, &c, 8), 0, "fit_next: bad runs give 0");
	is_int(gpumon_fit_next(r, 0, NULL, 8), 0, "fit_next: no config gives 0");
}

static void test_next(void)
{
	gpumon_fit_config c = config(80 * GIB, 1);
	gpumon_fit_run r[3];
	is_int(gpumon_fit_next(NULL, 0, &c, 4), 4, "no runs: first");
	r[0] = run(16, 70 * GIB);
	r[0].failed = 1;
	is_int(gpumon_fit_next(r, 1, &c, 16), 8, "first failed: half of it");
	is_int(gpumon_fit_next(r, 1, &c, 40), 10, "first above a failed run: halved until below it");

	r[0] = run(8, 10 * GIB);
	is_int(gpumon_fit_next(r, 1, &c, 8), 16, "one run, far from the room: 2x");
	r[0] = run(8, 30 * GIB);
	is_int(gpumon_fit_next(r, 1, &c, 8), 10, "one run, 2x passes half the room: 40 GiB x 8 / 30 GiB = 10.7");
	r[0] = run(8, 39 * GIB);
	is_int(gpumon_fit_next(r, 1, &c, 8), 9, "one run near half the room: at least batch + 1");
	r[0] = run(8, 75 * GIB);
	is_int(gpumon_fit_next(r, 1, &c, 8), 0, "one run near the room: batch + 1 predicted not to fit");
	r[0] = run(8, 10 * GIB);
	r[1] = run(12, 70 * GIB);
	r[1].failed = 1;
	is_int(gpumon_fit_next(r, 2, &c, 8), 11, "one run and a failed one: below it");
	r[1].batch = 9;
	is_int(gpumon_fit_next(r, 2, &c, 8), 0, "a failed run just above: nothing left to measure");
	gpumon_fit_run same[2] = {run(8, 10 * GIB), run(8, 10.1 * GIB)};
	is_int(gpumon_fit_next(same, 2, &c, 8), 16, "two runs at one batch size count as one");

	c = config(10 * GIB, 1);
	r[0] = run(8, 2 * GIB + 800 * MIB);
	r[1] = run(16, 2 * GIB + 1600 * MIB);
	is_int(gpumon_fit_next(r, 2, &c, 8), 40, "two runs: a third at half of max_batch (80)");
	c.multiple_of = 16;
	is_int(gpumon_fit_next(r, 2, &c, 8), 32, "two runs: half of max_batch as a multiple of 16");
	c.multiple_of = 1;
	r[0] = run(32, 2 * GIB + 3200 * MIB);
	r[1] = run(64, 2 * GIB + 6400 * MIB);
	is_int(gpumon_fit_next(r, 2, &c, 8), 0, "two runs near the answer: enough");
	r[0] = run(8, 10 * GIB);
	r[1] = run(16, 10 * GIB);
	is_int(gpumon_fit_next(r, 2, &c, 8), 0, "two runs, flat: no third");
	r[0] = run(8, 2 * GIB + 800 * MIB);
	r[1] = run(16, 2 * GIB + 1600 * MIB);
	r[2] = run(32, 2 * GIB + 3200 * MIB);
	is_int(gpumon_fit_next(r, 3, &c, 8), 0, "three runs: enough");
	r[2].failed = 1;
	r[2].batch = 30;
	uint64_t x = gpumon_fit_next(r, 3, &c, 8);
	ok(x == 0 || x < 30, "never at or above a failed batch (%llu)", (unsigned long long)x);
}

/* A run's peak from what it measured: the larger of NVML's and the allocator's peak plus what the
 * process holds outside the allocator. */
static void test_run_from(void)
{
	gpumon_fit_measure m = {.size = sizeof m, .batch = 8, .nvml_bytes = 3 * GIB, .reserved_bytes = 2 * GIB,
				.allocated_peak_bytes = 5 * GIB, .reserved_peak_bytes = 6 * GIB};
	gpumon_fit_run r = {0};
	ok(gpumon_fit_run_from(&m, &r) == 0 && r.peak_bytes == 7 * GIB && r.batch == 8 && !r.failed &&
		   r.allocated_peak_bytes == 5 * GIB && r.reserved_peak_bytes == 6 * GIB,
	   "the reserve's peak plus the 1 GiB outside it (%llu)", (unsigned long long)r.peak_bytes);
	m.reserved_peak_bytes = 0;
	ok(gpumon_fit_run_from(&m, &r) == 0 && r.peak_bytes == 6 * GIB, "no reserved peak: the allocated one");
	m.nvml_peak_bytes = 9 * GIB;
	m.failed = 1;
	ok(gpumon_fit_run_from(&m, &r) == 0 && r.peak_bytes == 9 * GIB && r.failed, "a higher NVML peak is the run's");
	gpumon_fit_measure only = {.size = sizeof only, .batch = 4, .reserved_peak_bytes = 5 * GIB};
	ok(gpumon_fit_run_from(&only, &r) == 0 && r.peak_bytes == 5 * GIB, "no NVML figure: the reserve's peak");
	gpumon_fit_measure lag = {.size = sizeof lag, .batch = 4, .nvml_bytes = GIB, .reserved_bytes = 2 * GIB,
				  .reserved_peak_bytes = 3 * GIB};
	ok(gpumon_fit_run_from(&lag, &r) == 0 && r.peak_bytes == 3 * GIB, "NVML below the reserve: nothing outside");
	lag.size = 4;
	ok(gpumon_fit_run_from(&lag, &r) == GPUMON_E_INVAL && gpumon_fit_run_from(NULL, &r) == GPUMON_E_INVAL,
	   "a size it does not know, NULL: refused");
}

/* The room of a job's process: free memory plus what it holds, under its cap plus what it holds
 * outside the allocator. */
static void test_job_room(void)
{
	gpumon_job_room_input in = {.size = sizeof in, .free_known = 1, .free_bytes = 10 * GIB,
				    .process_bytes = 4 * GIB, .reserved_bytes = 3 * GIB};
	gpumon_job_room r = {.size = sizeof r};
	ok(gpumon_job_room_get(&in, &r) == 0 && r.room_bytes == 14 * GIB && r.outside_bytes == GIB &&
		   r.allocator_bytes == 13 * GIB, "free + held; the allocator's is free + reserved");
	in.cap_bytes = 5 * GIB;
	ok(gpumon_job_room_get(&in, &r) == 0 && r.room_bytes == 6 * GIB && r.allocator_bytes == 5 * GIB,
	   "a cap bounds the allocator; NVML's room is the cap plus what is outside it");
	in.cap_bytes = 0;
	in.process_bytes = 2 * GIB; /* NVML lags the allocator */
	ok(gpumon_job_room_get(&in, &r) == 0 && r.room_bytes == 13 * GIB && r.outside_bytes == 0 &&
		   r.allocator_bytes == 13 * GIB, "NVML below the reserve: the reserve is held");
	in.process_bytes = 0;
	ok(gpumon_job_room_get(&in, &r) == 0 && r.room_bytes == 13 * GIB, "no NVML figure: free + reserved");
	in.free_known = 0;
	ok(gpumon_job_room_get(&in, &r) == GPUMON_E_NOT_FOUND && r.room_bytes == 0 && r.size == sizeof r,
	   "free memory unknown: not found");
	r.size = 3;
	ok(gpumon_job_room_get(&in, &r) == GPUMON_E_INVAL && gpumon_job_room_get(NULL, &r) == GPUMON_E_INVAL,
	   "bad sizes, NULL: refused");
}

/* One moment's figures placed: cached in the allocator, outside it, or not known when NVML lags. */
static void test_placed_split(void)
{
	gpumon_placed p;
	memset(&p, 0xff, sizeof p);
	gpumon_placed_split((uint64_t)(5 * GIB), (uint64_t)(3 * GIB), (uint64_t)(2 * GIB), &p);
	ok(p.nvml_bytes == 5 * GIB && p.reserved_bytes == 3 * GIB && p.allocated_bytes == 2 * GIB && p.cached_bytes == GIB &&
		   p.outside_known == 1 && p.outside_bytes == 2 * GIB,
	   "NVML = reserved (allocated + cached) + outside");
	gpumon_placed_split((uint64_t)(2 * GIB), (uint64_t)(3 * GIB), (uint64_t)(4 * GIB), &p);
	ok(p.outside_known == 0 && p.outside_bytes == 0 && p.cached_bytes == 0,
	   "NVML below the reserve: outside not known (never a negative figure); allocated above reserved: no cache");
	gpumon_placed_split(1, 1, 1, NULL); /* nothing to fill: no crash */
}

int main(void)
{
	test_placed_split();
	test_run_from();
	test_job_room();
	test_line();
	test_quadratic();
	test_ignored_batch();
	test_flat_then_growing();
	test_failed();
	test_room();
	test_fragmentation();
	test_extrapolated_and_fixed();
	test_invalid();
	test_next();
	return tap_done();
}
