/* SPDX-License-Identifier: MIT */
/* tap.h — a few lines of TAP output for the C unit tests, and a helper that points libgpumon at
 * the fake NVML with a scenario written to a temporary file. A check made while tap_todo names a
 * known library bug is a TAP "TODO": its failure is shown but does not fail the program. */
#ifndef GPUMON_TAP_H
#define GPUMON_TAP_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int tap_n, tap_failed;
static const char *tap_todo; /* set around checks of a known, reported bug; NULL otherwise */

#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(got, want, ...)                                                                        \
	do {                                                                                          \
		long long g_ = (long long)(got), w_ = (long long)(want);                              \
		if (!ok(g_ == w_, __VA_ARGS__))                                                       \
			printf("#   got %lld, want %lld\n", g_, w_);                                      \
	} while (0)
#define is_str(got, want, ...)                                                                        \
	do {                                                                                          \
		const char *g_ = (got), *w_ = (want);                                                 \
		if (!ok(g_ && !strcmp(g_, w_), __VA_ARGS__))                                          \
			printf("#   got \"%s\", want \"%s\"\n", g_ ? g_ : "(null)", w_);                  \
	} while (0)

__attribute__((format(printf, 4, 5))) static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	printf("%s %d - ", cond ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (tap_todo)
		printf(" # TODO %s", tap_todo);
	printf("\n");
	if (!cond) {
		printf("#   failed at %s:%d\n", file, line);
		tap_failed += !tap_todo;
	}
	return cond;
}

static int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}

/* CLOCK_MONOTONIC in nanoseconds, the clock of samples and recordings. */
static inline uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Writes the scenario text to a temporary file and selects the fake NVML (full, or v1-only). */
static inline void use_scenario(const char *text, int v1_only)
{
	static char path[64];
	if (!path[0]) {
		snprintf(path, sizeof path, "/tmp/gpumon-unit-%d.scn", (int)getpid());
	}
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		printf("Bail out! cannot write %s\n", path);
		exit(1);
	}
	setenv("FAKE_NVML_SCENARIO", path, 1);
	setenv("GPUMON_NVML_LIBRARY", v1_only ? FAKE_NVML_V1_LIB : FAKE_NVML_LIB, 1);
}

#ifdef GPUMON_GPUMON_H
/* Opens libgpumon on the fake NVML with this scenario; bails out of the test when it cannot. */
static inline gpumon *open_fake(const char *scenario, int v1_only)
{
	use_scenario(scenario, v1_only);
	gpumon *g = NULL;
	if (gpumon_create(&g) != GPUMON_OK) {
		printf("Bail out! open failed: %s\n", gpumon_errmsg(g));
		exit(1);
	}
	return g;
}

/* A new zeroed process that lives until the test exits: a record refers to its process, so records
 * kept longer than their maker keeps it (a sampler's until its next poll, a reader's until its next
 * call), and records a test makes, need one that outlives them. Reachable from here, so a leak
 * checker does not count them. */
static inline gpumon_process *kept_process(void)
{
	static gpumon_process **all;
	static size_t n, cap;
	if (n == cap) {
		cap = cap ? 2 * cap : 256;
		all = realloc(all, cap * sizeof *all);
		if (!all)
			abort();
	}
	gpumon_process *p = calloc(1, sizeof *p);
	if (!p)
		abort();
	return all[n++] = p;
}

/* Points r at a copy of its process that stays. */
static inline void keep_process(gpumon_record *r)
{
	if (r->process) {
		gpumon_process *p = kept_process();
		*p = *r->process;
		r->process = p;
	}
}

/* Drains a sampler's records for ms milliseconds into a growing array (malloc'd; NULL when out of
 * memory); *n is how many. Their processes are copies that stay. */
static inline gpumon_record *collect_records(gpumon_sampler *s, unsigned ms, size_t *n)
{
	size_t cap = 1024;
	gpumon_record *all = malloc(cap * sizeof *all);
	*n = 0;
	uint64_t end = now_ns() + (uint64_t)ms * 1000000u;
	while (all && now_ns() < end) {
		if (*n + 64 > cap) {
			gpumon_record *a = realloc(all, (cap *= 2) * sizeof *all);
			if (!a)
				break;
			all = a;
		}
		size_t got = 0;
		gpumon_sampler_poll(s, all + *n, 64, &got, 20);
		for (size_t k = 0; k < got; k++)
			keep_process(&all[*n + k]);
		*n += got;
	}
	return all;
}
#endif

static inline void remove_scenario(void)
{
	const char *p = getenv("FAKE_NVML_SCENARIO");
	if (p)
		unlink(p);
}

#endif
