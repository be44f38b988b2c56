/* SPDX-License-Identifier: MIT */
/* bench_sampler.c — what the sampler costs: CPU time of the whole process (sampling thread and a
 * consumer draining its queue, optionally into a recording) as a share of one core, at a given
 * period, over a given time. Honours GPUMON_NVML_LIBRARY. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

static double now_s(clockid_t c)
{
	struct timespec t;
	clock_gettime(c, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)u.ru_utime.tv_sec + (double)u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
	       (double)u.ru_stime.tv_usec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/*
 * What one memory read costs right after a 1 ms sleep (as in the sampler) against back to back:
 * the driver call is slower on a CPU that has just woken.
 */
static void cold_calls(gpumon *g)
{
	enum { N = 2000 };
	static double cold[N], hot[N];
	gpumon_device_sample x;
	struct timespec ms = {0, 1000000};
	for (int i = 0; i < N; i++) {
		nanosleep(&ms, NULL);
		double t0 = now_s(CLOCK_MONOTONIC);
		gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &x);
		double t1 = now_s(CLOCK_MONOTONIC);
		gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &x);
		cold[i] = (t1 - t0) * 1e6;
		hot[i] = (now_s(CLOCK_MONOTONIC) - t1) * 1e6;
	}
	qsort(cold, N, sizeof cold[0], cmp_double);
	qsort(hot, N, sizeof hot[0], cmp_double);
	printf("memory read after a 1 ms sleep: median %.2f us, p90 %.2f us; the next one at once: median %.2f us, "
	       "p90 %.2f us\n", cold[N / 2], cold[N * 9 / 10], hot[N / 2], hot[N * 9 / 10]);
}

int main(int argc, char **argv)
{
	unsigned period_us = 1000;
	double seconds = 10;
	const char *out = NULL;
	int c;
	int cold = 0;
	while ((c = getopt(argc, argv, "p:s:o:ch")) != -1) {
		if (c == 'c')
			cold = 1;
		else if (c == 'p')
			period_us = (unsigned)strtoul(optarg, NULL, 10);
		else if (c == 's')
			seconds = strtod(optarg, NULL);
		else if (c == 'o')
			out = optarg;
		else {
			fprintf(stderr, "usage: gpumon_bench_sampler [-p PERIOD_US] [-s SECONDS] [-o RECORDING] [-c]\n"
					"  -c  also time a memory read right after a 1 ms sleep, and back to back\n");
			return 2;
		}
	}
	gpumon *g;
	if (gpumon_create(&g) != GPUMON_OK) {
		fprintf(stderr, "gpumon_bench_sampler: %s\n", gpumon_errmsg(g));
		return 1;
	}
	if (cold)
		cold_calls(g);
	gpumon_recording *r = NULL;
	if (out && gpumon_recording_create(g, out, NULL, &r) != GPUMON_OK) {
		fprintf(stderr, "gpumon_bench_sampler: %s\n", r ? gpumon_recording_errmsg(r) : "cannot create");
		return 1;
	}
	unsigned dev0 = 0;
	gpumon_sampler_config cfg = {.size = sizeof cfg, .period_us = period_us, .devices = &dev0, .ndevices = 1};
	gpumon_sampler *s;
	double cpu0 = cpu_s(), wall0 = now_s(CLOCK_MONOTONIC);
	if (gpumon_sampler_create(g, &cfg, &s) != GPUMON_OK) {
		fprintf(stderr, "gpumon_bench_sampler: %s\n", gpumon_errmsg(g));
		return 1;
	}
	static gpumon_record buf[256];
	unsigned long long records = 0;
	while (now_s(CLOCK_MONOTONIC) - wall0 < seconds) {
		size_t n = 0;
		gpumon_sampler_poll(s, buf, 256, &n, 100);
		records += n;
		if (r && n)
			gpumon_recording_write(r, buf, n);
	}
	gpumon_sampler_stats st;
	gpumon_sampler_stats_get(s, &st);
	gpumon_sampler_destroy(s);
	double wall = now_s(CLOCK_MONOTONIC) - wall0, cpu = cpu_s() - cpu0;
	if (r && gpumon_recording_finish(r, -1) != GPUMON_OK)
		fprintf(stderr, "gpumon_bench_sampler: %s\n", gpumon_recording_errmsg(r));
	gpumon_recording_destroy(r);
	printf("period_us %u  seconds %.2f  samples %llu  records %llu  dropped %llu  overruns %llu  errors %llu\n",
	       period_us, wall, (unsigned long long)st.samples, records, (unsigned long long)st.dropped,
	       (unsigned long long)st.overruns, (unsigned long long)st.errors);
	printf("cpu %.4f s = %.3f %% of one core   (sampling thread busy %.3f %%, %.2f us a sample)\n", cpu,
	       100 * cpu / wall, 100 * (double)st.busy_ns / 1e9 / wall,
	       st.samples ? (double)st.busy_ns / 1e3 / (double)st.samples : 0.0);
	printf("{\"period_us\":%u,\"seconds\":%.3f,\"samples\":%llu,\"records\":%llu,\"dropped\":%llu,"
	       "\"overruns\":%llu,\"cpu_percent_of_core\":%.4f,\"busy_percent\":%.4f}\n",
	       period_us, wall, (unsigned long long)st.samples, records, (unsigned long long)st.dropped,
	       (unsigned long long)st.overruns, 100 * cpu / wall, 100 * (double)st.busy_ns / 1e9 / wall);
	gpumon_destroy(g);
	return 0;
}
