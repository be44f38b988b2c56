/* SPDX-License-Identifier: MIT */
/* test_leak.c — the leak detector on synthetic series with deterministic noise: what must not be
 * called a leak (warm-up, caching and dynamic shapes that plateau, a spike, one rise of the
 * floor, long flat noise, 20,000-step runs with all of these), what must (fast, slow, late
 * leaks), online = offline, alerts within max(30 s, 100 steps) of a leak's start (also late in a
 * long run), the same verdict for a step function fed every 100 ms, every second, or on change with
 * heartbeats, bounded memory over ten million points, bad input and too little data. */
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
	LONG_CLEAN,
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
	[LONG_CLEAN] = {"20,000 steps: warm-up, caching, dynamic shapes, two floor jumps, a spike", 0, 20000, 0, -1},
	[FAST_LEAK] = {"fast leak from step 0", 1, 600, 20 * MIB, 0},
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
	case LONG_CLEAN: {
		/* a cache that fills over the first 2,000 steps ever more slowly, shapes that vary, the
		 * optimizer's state at 30 %, a cache filled once at 70 %, one huge batch at 50 % */
		if (i == 0)
			*state = 600 * MIB;
		if (i < 2000)
			*state *= 0.998;
		return 1 * GIB + 600 * MIB - *state + dynamic(s, 200 * MIB) + (i >= n * 3 / 10 ? 300 * MIB : 0) +
		       (i >= n * 7 / 10 ? 256 * MIB : 0) + (i == n / 2 ? 8 * GIB : 0);
	}
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
	(void)limit;
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
		gpumon_leak_add(on, i, t, b);
		gpumon_leak_add(off, i, t, b);
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
	       a->start_t_ns == b->start_t_ns && a->confidence == b->confidence && a->floor_bytes == b->floor_bytes &&
	       a->points == b->points && a->alert == b->alert && a->alert_t_ns == b->alert_t_ns;
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
		int alerted = 0, within = 0;
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
				/* 50 ms a step: 30 s are 600 steps, later than 100 */
				within += r.first_alert >= c->start_step && r.first_alert - c->start_step <= 600;
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
		if (c->leak && k != SLOW_LEAK) /* the slow leak under heavy noise: its figure is printed */
			is_int(within, SEEDS, "%s: alert within 30 s (600 steps) of the start on %d of %d seeds", c->name,
			       within, SEEDS);
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

/* A leak's floor now: the fitted line at the last point (the model projects from it). */
static void test_floor(void)
{
	struct run r;
	run_case(FAST_LEAK, 3, 0, &r);
	const gpumon_leak_result *e = &r.offline_end;
	is_int(e->verdict, GPUMON_LEAK_SUSPECTED, "fast leak: SUSPECTED");
	/* the floor after step 599 is 1 GiB + 599 * 20 MiB */
	double want = 1 * GIB + 599 * 20 * MIB;
	ok(fabs((double)e->floor_bytes - want) / want < 0.02, "floor now %.0f MiB, want about %.0f MiB",
	   (double)e->floor_bytes / MIB, want / MIB);
	ok(fabs(e->rate_bytes_per_second - 20 * MIB * 1e9 / (double)STEP_NS) / (20 * MIB * 20) < 0.2,
	   "rate per second %.0f B/s", e->rate_bytes_per_second);
	ok(e->alert && e->alert_t_ns > 0, "the alert's moment is kept");
}

/* Without step numbers the detector works in time: rate per step 0, start step unknown. */
static void test_time_only(void)
{
	gpumon_leak *l = NULL;
	gpumon_leak_create(NULL, &l);
	uint64_t s = 42;
	for (long i = 0; i < 6000; i++) /* 100 Hz for a minute, 1 MiB a second */
		gpumon_leak_add(l, -1, (uint64_t)i * 10000000, (uint64_t)(GIB + MIB * (double)i / 100 +
									  rnd_unit(&s) * 4 * MIB));
	gpumon_leak_result r;
	gpumon_leak_result_get(l, &r);
	is_int(r.verdict, GPUMON_LEAK_SUSPECTED, "time only: SUSPECTED");
	ok(r.rate_bytes_per_step == 0 && r.start_step == -1, "time only: no rate per step, no start step");
	ok(fabs(r.rate_bytes_per_second - MIB) / MIB < 0.2, "time only: %.0f B/s, want %.0f",
	   r.rate_bytes_per_second, MIB);
	gpumon_leak_destroy(l);
}

/* A process's memory as NVML shows it, at time t (seconds), for the feed tests: a caching allocator
 * turns a leak into a staircase (+128 MiB every 4 s), a clean job into a few early stairs. */
static uint64_t staircase(int leak, double t)
{
	if (leak == 2) /* fast: 200 MiB a second in 2 MiB segments */
		return (uint64_t)(3 * GIB + 2 * MIB * (double)(long long)(t * 100));
	if (leak)
		return (uint64_t)(3 * GIB + 128 * MIB * (double)(long long)(t / 4));
	return (uint64_t)(3 * GIB + (t > 2 ? 512 * MIB : 0) + (t > 5 ? 256 * MIB : 0) + (t > 9 ? 64 * MIB : 0));
}

/* One series fed three ways: polled every 100 ms, polled every second, and as the sampler gives it
 * (a row on each change, at least one a second). A step function read so must get one verdict. */
static void feed_three(int leak, double seconds, gpumon_leak_result *out)
{
	gpumon_leak_config c = {.size = sizeof c, .mode = GPUMON_LEAK_HELD};
	gpumon_leak *l[3];
	for (int k = 0; k < 3; k++)
		gpumon_leak_create(&c, &l[k]);
	uint64_t last = UINT64_MAX;
	double last_row = -1;
	for (long i = 0; i <= (long)(seconds * 100); i++) { /* the sampler's 10 ms clock */
		double t = (double)i / 100;
		uint64_t v = staircase(leak, t), t_ns = (uint64_t)i * 10000000ull;
		if (i % 10 == 0)
			gpumon_leak_add(l[0], -1, t_ns, v);
		if (i % 100 == 0)
			gpumon_leak_add(l[1], -1, t_ns, v);
		if (v != last || t - last_row >= 1.0) {
			gpumon_leak_add(l[2], -1, t_ns, v);
			last = v;
			last_row = t;
		}
	}
	for (int k = 0; k < 3; k++) {
		gpumon_leak_result_get(l[k], &out[k]);
		gpumon_leak_destroy(l[k]);
	}
}

static void test_held_feeds(void)
{
	static const char *const names[] = {"clean stairs", "staircase leak", "fast leak"};
	for (int leak = 0; leak <= 2; leak++)
		for (double secs = 20; secs <= 120; secs += 50) {
			gpumon_leak_result r[3];
			feed_three(leak, secs, r);
			int want = leak ? GPUMON_LEAK_SUSPECTED : GPUMON_LEAK_NONE;
			ok(r[0].verdict == want && r[1].verdict == want && r[2].verdict == want,
			   "%s, %.0f s: %s polled every 100 ms, every 1 s and fed on change: %s / %s / %s", names[leak],
			   secs, verdict_name(want), verdict_name(r[0].verdict), verdict_name(r[1].verdict),
			   verdict_name(r[2].verdict));
			if (!leak)
				continue;
			double a = r[0].rate_bytes_per_second, b = r[1].rate_bytes_per_second, c = r[2].rate_bytes_per_second;
			ok(fabs(c - a) / a <= 0.01, "%s, %.0f s: rate on change %.1f MiB/s, every 100 ms %.1f MiB/s (1 %%)",
			   names[leak], secs, c / MIB, a / MIB);
			ok(fabs(b - a) / a <= 0.05, "%s, %.0f s: rate every 1 s %.1f MiB/s, every 100 ms %.1f MiB/s (5 %%)",
			   names[leak], secs, b / MIB, a / MIB);
		}
}

/* A leak that starts late in a long run is told about within 30 s (or 100 steps, whichever is
 * later), though the whole run's windows are minutes wide by then: NVML rows of a process (held,
 * in time) after two hours, and a framework's figure after each step after 36,000 steps. */
static void test_late_in_long_run(void)
{
	gpumon_leak_config c = {.size = sizeof c, .mode = GPUMON_LEAK_HELD};
	gpumon_leak *l = NULL;
	gpumon_leak_create(&c, &l);
	uint64_t s = 11, start = 7200ull * 1000000000ull, alert = 0;
	/* 0.1 % of an 80 GiB card a minute, in 2 MiB segments; one row a second, and one on each change */
	double rate = 0.001 * 80 * GIB / 60;
	uint64_t last = 0;
	for (uint64_t t = 0; t < start + 120ull * 1000000000ull; t += 100000000ull) {
		uint64_t v = (uint64_t)(2 * GIB) + (rnd_next(&s) % 1000 == 0 ? 2 * (uint64_t)MIB : 0);
		if (t >= start)
			v += (uint64_t)((double)(long long)((double)(t - start) / 1e9 * rate / (2 * MIB)) * 2 * MIB);
		if (v != last || t % 1000000000ull == 0) {
			gpumon_leak_add(l, -1, t, v);
			last = v;
		}
		gpumon_leak_result r;
		gpumon_leak_result_get(l, &r);
		if (r.alert && !alert)
			alert = r.alert_t_ns ? r.alert_t_ns : t;
	}
	ok(alert >= start && alert - start <= 30ull * 1000000000ull,
	   "NVML, a leak of 0.1 %% of the card a minute after 2 h: alert %.1f s after it began (30 s at most)",
	   alert ? ((double)alert - (double)start) / 1e9 : -1);
	gpumon_leak_destroy(l);

	gpumon_leak_create(NULL, &l);
	alert = 0;
	long first = 36000, alert_step = -1;
	for (long i = 0; i < first + 600; i++) { /* 0.2 s a step */
		uint64_t v = (uint64_t)(GIB + dynamic(&s, 64 * MIB) / 8) + (i >= first ? (uint64_t)(i - first) * (uint64_t)MIB : 0);
		gpumon_leak_add(l, i, (uint64_t)i * 200000000ull, v);
		if (i >= first - 10 && alert_step < 0) {
			gpumon_leak_result r;
			gpumon_leak_result_get(l, &r);
			if (r.alert)
				alert_step = i;
		}
	}
	/* 30 s at 0.2 s a step is 150 steps, later than 100 */
	ok(alert_step >= first && alert_step - first <= 150,
	   "steps, 1 MiB a step after 36,000 clean steps: alert %ld steps after it began (150 at most)",
	   alert_step >= 0 ? alert_step - first : -1);
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
				       (uint64_t)(2 * GIB + (double)(i / 10000) * MIB) + rnd_next(&s) % (64 << 20)) != 0;
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
	gpumon_leak_config big = {.size = sizeof big + 8};
	is_int(gpumon_leak_create(&big, &l), GPUMON_E_INVAL, "a config larger than the library knows: INVAL");
	ok(l == NULL, "no detector made");
	gpumon_leak_config bad_mode = {.size = sizeof bad_mode, .mode = 7};
	is_int(gpumon_leak_create(&bad_mode, &l), GPUMON_E_INVAL, "an unknown mode: INVAL");
	/* a verdict given for a mode is caught: the two enums share no value */
	int verdicts[] = {GPUMON_LEAK_INSUFFICIENT_DATA, GPUMON_LEAK_NONE, GPUMON_LEAK_SUSPECTED};
	for (int i = 0; i < 3; i++) {
		ok(verdicts[i] != GPUMON_LEAK_SAMPLES && verdicts[i] != GPUMON_LEAK_HELD, "verdict %d is no mode", verdicts[i]);
		bad_mode.mode = verdicts[i];
		if (verdicts[i] != 0) /* 0: a zeroed config, the default mode */
			is_int(gpumon_leak_create(&bad_mode, &l), GPUMON_E_INVAL, "verdict %d as a mode: INVAL", verdicts[i]);
	}
	bad_mode.mode = 0;
	is_int(gpumon_leak_create(&bad_mode, &l), GPUMON_OK, "mode 0 (a zeroed config): samples");
	gpumon_leak_destroy(l);
	gpumon_leak_config old = {.size = sizeof(unsigned) + sizeof(int), .mode = GPUMON_LEAK_HELD};
	is_int(gpumon_leak_create(&old, &l), GPUMON_OK, "a config of an older, shorter version: fine");
	gpumon_leak_destroy(l);
	is_int(gpumon_leak_add(NULL, 0, 1, 1), GPUMON_E_INVAL, "add to NULL: INVAL");
	is_int(gpumon_leak_create(NULL, &l), GPUMON_OK, "create");
	is_int(gpumon_leak_add(l, 5, 2000, 1), GPUMON_OK, "a point");
	is_int(gpumon_leak_add(l, 6, 1999, 1), GPUMON_E_INVAL, "an earlier time: INVAL");
	ok(gpumon_leak_errmsg(l)[0] != 0, "and a message says why");
	is_int(gpumon_leak_add(l, 4, 2001, 1), GPUMON_E_INVAL, "an earlier step: INVAL");
	is_int(gpumon_leak_add(l, 6, 2000, 1), GPUMON_OK, "the same time again: fine");
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
	for (long i = 0; i < 32; i++) { /* a steep rise, but too short to tell: 32 steps are 31 windows */
		gpumon_leak_add(l, i, (uint64_t)i * STEP_NS, (uint64_t)(GIB + 100 * MIB * (double)i));
		gpumon_leak_result_get(l, &r);
		early += r.verdict != GPUMON_LEAK_INSUFFICIENT_DATA;
	}
	is_int(early, 0, "fewer than 32 windows: INSUFFICIENT_DATA throughout");
	is_int((long long)r.points, 32, "32 points");
	gpumon_leak_destroy(l);

	gpumon_leak_create(NULL, &l);
	for (long i = 0; i < 15; i++) /* 15 samples 100 steps apart: windows, but too few points */
		gpumon_leak_add(l, i * 100, (uint64_t)i * 100 * STEP_NS, (uint64_t)(GIB + 100 * MIB * (double)i));
	gpumon_leak_result_get(l, &r);
	is_int(r.verdict, GPUMON_LEAK_INSUFFICIENT_DATA, "15 samples far apart: INSUFFICIENT_DATA");
	gpumon_leak_destroy(l);

	gpumon_leak_create(NULL, &l);
	for (long i = 0; i < 1000; i++) /* all at one instant: no span */
		gpumon_leak_add(l, -1, 5, (uint64_t)(GIB + MIB * (double)i));
	gpumon_leak_result_get(l, &r);
	is_int(r.verdict, GPUMON_LEAK_INSUFFICIENT_DATA, "1000 points at one instant: INSUFFICIENT_DATA");
	gpumon_leak_destroy(l);
}

int main(void)
{
	test_bad_input();
	test_insufficient();
	test_cases();
	test_floor();
	test_time_only();
	test_held_feeds();
	test_late_in_long_run();
	test_bounded();
	remove_scenario(); /* tap.h's; no scenario was written */
	return tap_done();
}
