/* SPDX-License-Identifier: MIT */
/* test_leak.c — the leak detector on synthetic series with deterministic noise: what must not be
 * called a leak (warm-up, caching and dynamic shapes that plateau, a spike, one rise of the
 * floor, long flat noise), what must (fast, slow, late leaks), online = offline, bounded memory
 * over ten million points, bad input, too little data, and the projection to out-of-memory. */
#include <gpumon/gpumon.h>

#include "tap.h"

#include <malloc.h>
#include <stdint.h>
#include <time.h>

#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * MIB)
#define SEEDS 10
#define STEP_NS 50000000ull /* 50 ms a step */

/* no libm needed */
static double fabs_(double x)
{
	return x < 0 ? -x : x;
}
#define fabs fabs_

/* splitmix64: a small deterministic generator, so every run sees the same series */
static uint64_t rnd_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rnd_unit(uint64_t *s)
{
	return (double)(rnd_next(s) >> 11) / 9007199254740992.0;
}

/* Per-step dynamic allocations of one of six sizes up to `max` (sequence lengths), plus jitter. */
static double dynamic(uint64_t *s, double max)
{
	return (double)(rnd_next(s) % 6) * max / 5 + rnd_unit(s) * 256 * 1024;
}

enum kind {
	WARMUP_FLAT,
	CACHING_PLATEAU,
	DYNAMIC_SHAPES,
	RESERVED_PLATEAUS,
	ONE_SPIKE,
	LATE_STATE,
	FLAT_LONG,
	FAST_LEAK,
	SLOW_LEAK,
	LATE_LEAK,
	KINDS
};

struct scase {
	const char *name;
	int leak;              /* must be flagged */
	long steps;
	double rate_per_step;  /* truth, bytes */
	long start_step;       /* truth */
};

static const struct scase cases[KINDS] = {
	[WARMUP_FLAT] = {"warm-up then flat", 0, 1000, 0, -1},
	[CACHING_PLATEAU] = {"caching growth that plateaus", 0, 1000, 0, -1},
	[DYNAMIC_SHAPES] = {"dynamic shapes on a flat floor", 0, 1000, 0, -1},
	[RESERVED_PLATEAUS] = {"reserved-like plateaus (running maximum)", 0, 1000, 0, -1},
	[ONE_SPIKE] = {"a one-off spike", 0, 1000, 0, -1},
	[LATE_STATE] = {"one rise of the floor at 40 %", 0, 1000, 0, -1},
	[FLAT_LONG] = {"long flat noisy", 0, 100000, 0, -1},
	[FAST_LEAK] = {"fast leak from step 0", 1, 400, 20 * MIB, 0},
	[SLOW_LEAK] = {"slow leak, 4 MiB every 10 steps, 0-500 MiB dynamic", 1, 1000, 0.4 * MIB, 0},
	[LATE_LEAK] = {"leak from 50 % after a clean start", 1, 1000, 2 * MIB, 500},
};

/* The figure of step i of a series of kind k (the state s carries the noise and any memory). */
static double figure(enum kind k, long i, long n, uint64_t *s, double *state)
{
	switch (k) {
	case WARMUP_FLAT:
		return 1 * GIB + 300 * MIB * (i < 50 ? (double)i / 50 : 1) + dynamic(s, 64 * MIB);
	case CACHING_PLATEAU:
		/* the cache fills geometrically: 1 % of what is left each step */
		if (i == 0)
			*state = 800 * MIB;
		*state *= 0.99;
		return 1 * GIB + 800 * MIB - *state + rnd_unit(s) * MIB;
	case DYNAMIC_SHAPES:
		return 2 * GIB + dynamic(s, 500 * MIB);
	case RESERVED_PLATEAUS: {
		/* what a process figure does under dynamic shapes: the cache grows to the largest
		 * shape seen so far, in ever rarer steps */
		double want = 2 * GIB + 1 * GIB * rnd_unit(s) * rnd_unit(s) * rnd_unit(s);
		if (want > *state)
			*state = (double)((uint64_t)(want / (2 * MIB)) + 1) * 2 * MIB;
		return *state + rnd_unit(s) * 64 * 1024;
	}
	case ONE_SPIKE:
		return 1 * GIB + dynamic(s, 32 * MIB) + (i == n * 6 / 10 ? 10 * GIB : 0);
	case LATE_STATE:
		return 1 * GIB + (i >= n * 4 / 10 ? 268 * MIB : 0) + dynamic(s, 64 * MIB);
	case FLAT_LONG:
		return 4 * GIB + rnd_unit(s) * 8 * MIB + rnd_unit(s) * 8 * MIB;
	case FAST_LEAK:
		return 1 * GIB + 20 * MIB * (double)i + dynamic(s, 64 * MIB);
	case SLOW_LEAK:
		return 2 * GIB + 4 * MIB * (double)(i / 10) + dynamic(s, 500 * MIB);
	case LATE_LEAK:
		return 1 * GIB + (i >= 500 ? 2 * MIB * (double)(i - 500) : 0) + dynamic(s, 100 * MIB);
	case KINDS:
		break;
	}
	return 0;
}

struct run {
	gpumon_leak_result online_end, offline_end;
	long first_suspected; /* step of the first SUSPECTED when fed point by point; -1 never */
	long first_alert;     /* step of the first alert; -1 never */
	int online_flips;     /* how often the online verdict went from SUSPECTED back to NONE */
};

/* Feeds series k (seed) to two detectors: one asked after every point, one only at the end. */
static void run_case(enum kind k, uint64_t seed, uint64_t limit, struct run *r)
{
	const struct scase *c = &cases[k];
	gpumon_leak *on = NULL, *off = NULL;
	if (gpumon_leak_create(NULL, &on) || gpumon_leak_create(NULL, &off)) {
		printf("Bail out! gpumon_leak_create failed\n");
		exit(1);
	}
	uint64_t s = seed * 7919 + (uint64_t)k;
	double state = 0;
	r->first_suspected = -1;
	r->first_alert = -1;
	r->online_flips = 0;
	int prev = GPUMON_LEAK_INSUFFICIENT_DATA;
	/* asking after every point costs O(windows^2); the long series is asked every 100 points */
	long every = c->steps > 10000 ? 100 : 1;
	for (long i = 0; i < c->steps; i++) {
		uint64_t t = 1000000000ull + (uint64_t)i * STEP_NS + rnd_next(&s) % 1000000;
		uint64_t b = (uint64_t)figure(k, i, c->steps, &s, &state);
		gpumon_leak_add(on, i, t, b, limit);
		gpumon_leak_add(off, i, t, b, limit);
		if (i % every == every - 1 || i == c->steps - 1) {
			gpumon_leak_result_get(on, &r->online_end);
			int v = r->online_end.verdict;
			if (v == GPUMON_LEAK_SUSPECTED && r->first_suspected < 0)
				r->first_suspected = i;
			if (r->online_end.alert && r->first_alert < 0)
				r->first_alert = i;
			if (prev == GPUMON_LEAK_SUSPECTED && v == GPUMON_LEAK_NONE)
				r->online_flips++;
			prev = v;
		}
	}
	gpumon_leak_result_get(off, &r->offline_end);
	gpumon_leak_destroy(on);
	gpumon_leak_destroy(off);
}

static int same_result(const gpumon_leak_result *a, const gpumon_leak_result *b)
{
	return a->verdict == b->verdict && a->rate_bytes_per_step == b->rate_bytes_per_step &&
	       a->rate_bytes_per_second == b->rate_bytes_per_second && a->start_step == b->start_step &&
	       a->start_t_ns == b->start_t_ns && a->confidence == b->confidence &&
	       a->steps_to_oom == b->steps_to_oom && a->seconds_to_oom == b->seconds_to_oom &&
	       a->points == b->points && a->alert == b->alert && a->suspected_points == b->suspected_points;
}

static const char *verdict_name(int v)
{
	return v == GPUMON_LEAK_SUSPECTED ? "SUSPECTED" : v == GPUMON_LEAK_NONE ? "NONE" : "INSUFFICIENT";
}

/* Every case on SEEDS seeds: the verdict, the rate and the start, and online = offline. */
static void test_cases(void)
{
	int tp = 0, fp = 0, fn = 0, tn = 0, flips = 0, alarms = 0, false_alerts = 0;
	double delay_sum = 0;
	for (int k = 0; k < KINDS; k++) {
		const struct scase *c = &cases[k];
		int right = 0, rate_ok = 0, start_ok = 0, same = 0, case_alarms = 0, case_flips = 0;
		int alerted = 0;
		double worst_rate = 0, worst_start = 0, delay = 0, alert_delay = 0;
		for (uint64_t seed = 1; seed <= SEEDS; seed++) {
			struct run r;
			run_case((enum kind)k, seed, 0, &r);
			const gpumon_leak_result *e = &r.offline_end;
			same += same_result(&r.online_end, e);
			int want = c->leak ? GPUMON_LEAK_SUSPECTED : GPUMON_LEAK_NONE;
			right += e->verdict == want;
			if (e->verdict != want)
				printf("#   %s, seed %d: %s, confidence %.3f, %.0f B/step from step %lld\n", c->name,
				       (int)seed, verdict_name(e->verdict), e->confidence, e->rate_bytes_per_step,
				       (long long)e->start_step);
			flips += r.online_flips;
			case_flips += r.online_flips;
			case_alarms += !c->leak && r.first_suspected >= 0;
			if (c->leak) {
				tp += e->verdict == GPUMON_LEAK_SUSPECTED;
				fn += e->verdict != GPUMON_LEAK_SUSPECTED;
				double re = fabs(e->rate_bytes_per_step - c->rate_per_step) / c->rate_per_step;
				double se = fabs((double)(e->start_step - c->start_step)) / (double)c->steps;
				rate_ok += re <= 0.2;
				start_ok += se <= 0.15;
				worst_rate = re > worst_rate ? re : worst_rate;
				worst_start = se > worst_start ? se : worst_start;
				delay += (double)(r.first_suspected - c->start_step);
				alert_delay += (double)(r.first_alert - c->start_step);
				alerted += e->alert;
			} else {
				fp += e->verdict == GPUMON_LEAK_SUSPECTED;
				alarms += r.first_suspected >= 0;
				false_alerts += r.first_alert >= 0;
				alerted += r.first_alert < 0;
				tn += e->verdict != GPUMON_LEAK_SUSPECTED;
			}
		}
		is_int(right, SEEDS, "%s: %s on %d of %d seeds", c->name, c->leak ? "SUSPECTED" : "NONE", right,
		       SEEDS);
		is_int(same, SEEDS, "%s: online = offline", c->name);
		is_int(alerted, SEEDS, "%s: %s on %d of %d seeds", c->name,
		       c->leak ? "alert at the end" : "never an alert", alerted, SEEDS);
		if (case_alarms || case_flips)
			printf("# %s, online: SUSPECTED before the end on %d seeds, back to NONE %d times\n",
			       c->name, case_alarms, case_flips);
		if (c->leak) {
			is_int(rate_ok, SEEDS, "%s: rate within 20 %% (worst %.1f %%)", c->name, worst_rate * 100);
			is_int(start_ok, SEEDS, "%s: start within 15 %% of the run (worst %.1f %%)", c->name,
			       worst_start * 100);
			delay_sum += delay;
			printf("# %s: first SUSPECTED %.0f steps after the start on average (%.1f %% of %ld), "
			       "first alert %.0f\n", c->name, delay / SEEDS, delay / SEEDS / (double)c->steps * 100,
			       c->steps, alert_delay / SEEDS);
		}
	}
	printf("# synthetic: %d series, tp %d fp %d tn %d fn %d; precision %.3f recall %.3f\n", KINDS * SEEDS, tp,
	       fp, tn, fn, tp + fp ? (double)tp / (tp + fp) : 1.0, tp + fn ? (double)tp / (tp + fn) : 1.0);
	printf("# online: %d clean series said SUSPECTED at some point before the end; the verdict went "
	       "from SUSPECTED back to NONE %d times in all; %d clean series raised an alert\n", alarms, flips,
	       false_alerts);
	(void)delay_sum;
}

/* With a limit, the time to out-of-memory is (limit - floor now) / rate. */
static void test_oom(void)
{
	struct run r;
	uint64_t limit = (uint64_t)(80 * GIB);
	run_case(FAST_LEAK, 3, limit, &r);
	const gpumon_leak_result *e = &r.offline_end;
	is_int(e->verdict, GPUMON_LEAK_SUSPECTED, "fast leak with a limit: SUSPECTED");
	/* the floor after step 399 is 1 GiB + 399 * 20 MiB */
	double want = (80 * GIB - (1 * GIB + 399 * 20 * MIB)) / (20 * MIB);
	ok(fabs(e->steps_to_oom - want) / want < 0.1, "steps to OOM %.0f, want about %.0f", e->steps_to_oom, want);
	double want_s = want * (double)STEP_NS / 1e9;
	ok(fabs(e->seconds_to_oom - want_s) / want_s < 0.1, "seconds to OOM %.1f, want about %.1f",
	   e->seconds_to_oom, want_s);
	ok(fabs(e->rate_bytes_per_second - 20 * MIB * 1e9 / (double)STEP_NS) / (20 * MIB * 20) < 0.2,
	   "rate per second %.0f B/s", e->rate_bytes_per_second);
	run_case(FAST_LEAK, 3, 0, &r);
	ok(r.offline_end.steps_to_oom < 0 && r.offline_end.seconds_to_oom < 0, "no limit: time to OOM unknown");
}

/* Without step numbers the detector works in time: rate per step 0, start step unknown. */
static void test_time_only(void)
{
	gpumon_leak *l = NULL;
	gpumon_leak_create(NULL, &l);
	uint64_t s = 42;
	for (long i = 0; i < 2000; i++) /* 1 kHz, 1 MiB a second */
		gpumon_leak_add(l, -1, (uint64_t)i * 1000000, (uint64_t)(GIB + MIB * (double)i / 1000 +
									 rnd_unit(&s) * 4 * MIB), 0);
	gpumon_leak_result r;
	gpumon_leak_result_get(l, &r);
	is_int(r.verdict, GPUMON_LEAK_SUSPECTED, "time only: SUSPECTED");
	ok(r.rate_bytes_per_step == 0 && r.start_step == -1, "time only: no rate per step, no start step");
	ok(fabs(r.rate_bytes_per_second - MIB) / MIB < 0.2, "time only: %.0f B/s, want %.0f",
	   r.rate_bytes_per_second, MIB);
	gpumon_leak_destroy(l);
}

static size_t heap_in_use(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	return mallinfo2().uordblks;
#else
	return 0;
#endif
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Ten million points (a slow leak at 1 kHz for almost three hours): the heap does not grow. */
static void test_bounded(void)
{
	gpumon_leak *l = NULL;
	gpumon_leak_create(NULL, &l);
	uint64_t s = 7;
	size_t before = heap_in_use();
	double t0 = now_s();
	int bad = 0;
	for (long i = 0; i < 10000000; i++)
		bad += gpumon_leak_add(l, i, (uint64_t)i * 1000000,
				       (uint64_t)(2 * GIB + (double)(i / 10000) * MIB) + rnd_next(&s) % (64 << 20),
				       (uint64_t)(141 * GIB)) != 0;
	double t1 = now_s();
	size_t after = heap_in_use();
	gpumon_leak_result r;
	gpumon_leak_result_get(l, &r);
	double t2 = now_s();
	is_int(bad, 0, "10 million points accepted");
	is_int((long long)after, (long long)before, "heap in use unchanged after 10 million points");
	is_int((long long)r.points, 10000000, "points counted");
	is_int(r.verdict, GPUMON_LEAK_SUSPECTED, "10 million points, 1 MiB every 10,000 steps: SUSPECTED");
	ok(fabs(r.rate_bytes_per_step - MIB / 10000) / (MIB / 10000) < 0.2, "rate %.1f B/step, want %.1f",
	   r.rate_bytes_per_step, MIB / 10000);
	printf("# %.1f ns per point added, %.3f ms per verdict\n", (t1 - t0) / 1e7 * 1e9, (t2 - t1) * 1e3);
	gpumon_leak_destroy(l);
}

static void test_bad_input(void)
{
	gpumon_leak *l = NULL;
	is_int(gpumon_leak_create(NULL, NULL), GPUMON_E_INVAL, "create without out: INVAL");
	int opt = 0;
	is_int(gpumon_leak_create(&opt, &l), GPUMON_E_INVAL, "create with options: INVAL (none defined)");
	ok(l == NULL, "no detector made");
	is_int(gpumon_leak_add(NULL, 0, 1, 1, 0), GPUMON_E_INVAL, "add to NULL: INVAL");
	is_int(gpumon_leak_create(NULL, &l), GPUMON_OK, "create");
	is_int(gpumon_leak_add(l, 5, 2000, 1, 0), GPUMON_OK, "a point");
	is_int(gpumon_leak_add(l, 6, 1999, 1, 0), GPUMON_E_INVAL, "an earlier time: INVAL");
	is_int(gpumon_leak_add(l, 4, 2001, 1, 0), GPUMON_E_INVAL, "an earlier step: INVAL");
	is_int(gpumon_leak_add(l, 6, 2000, 1, 0), GPUMON_OK, "the same time again: fine");
	gpumon_leak_result r;
	gpumon_leak_result_get(l, &r);
	is_int((long long)r.points, 2, "the rejected points were not counted");
	gpumon_leak_result_get(NULL, &r);
	is_int(r.verdict, GPUMON_LEAK_INSUFFICIENT_DATA, "result of NULL: INSUFFICIENT_DATA");
	gpumon_leak_result_get(l, NULL); /* must not crash */
	gpumon_leak_destroy(l);
	gpumon_leak_destroy(NULL);
	ok(1, "destroy(NULL) is a no-op");
}

static void test_insufficient(void)
{
	gpumon_leak *l = NULL;
	gpumon_leak_create(NULL, &l);
	gpumon_leak_result r;
	gpumon_leak_result_get(l, &r);
	is_int(r.verdict, GPUMON_LEAK_INSUFFICIENT_DATA, "no points: INSUFFICIENT_DATA");
	int early = 0;
	for (long i = 0; i < 63; i++) { /* a steep rise, but too short to tell */
		gpumon_leak_add(l, i, (uint64_t)i * STEP_NS, (uint64_t)(GIB + 100 * MIB * (double)i), 0);
		gpumon_leak_result_get(l, &r);
		early += r.verdict != GPUMON_LEAK_INSUFFICIENT_DATA;
	}
	is_int(early, 0, "fewer than 64 points: INSUFFICIENT_DATA throughout");
	is_int((long long)r.points, 63, "63 points");
	gpumon_leak_destroy(l);

	gpumon_leak_create(NULL, &l);
	for (long i = 0; i < 1000; i++) /* all at one instant: no span */
		gpumon_leak_add(l, -1, 5, (uint64_t)(GIB + MIB * (double)i), 0);
	gpumon_leak_result_get(l, &r);
	is_int(r.verdict, GPUMON_LEAK_INSUFFICIENT_DATA, "1000 points at one instant: INSUFFICIENT_DATA");
	gpumon_leak_destroy(l);
}

int main(void)
{
	test_bad_input();
	test_insufficient();
	test_cases();
	test_oom();
	test_time_only();
	test_bounded();
	remove_scenario(); /* tap.h's; no scenario was written */
	return tap_done();
}
