/* SPDX-License-Identifier: MIT */
/* bench_startup.c — where a one-shot query's time goes: each phase of starting NVML (dlopen, init,
 * device enumeration, one memory read, shutdown, dlclose) and of gpumon_create/_destroy, each timed in
 * a fresh process, RUNS times, medians reported. Honours GPUMON_NVML_LIBRARY. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

#define MAX_PHASES 12
#define MAX_RUNS 1000

static const char *const raw_phases[] = {"dlopen", "nvmlInit_v2", "GetCount", "GetHandleByIndex",
					 "GetName", "GetUUID", "GetPciInfo_v3", "GetMemoryInfo_v2",
					 "nvmlShutdown", "dlclose"};
static const char *const lib_phases[] = {"gpumon_create", "sample_read(F_MEMORY)", "gpumon_destroy"};
#define NRAW (sizeof raw_phases / sizeof raw_phases[0])
#define NLIB (sizeof lib_phases / sizeof lib_phases[0])

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static const char *library(void)
{
	const char *env = getenv("GPUMON_NVML_LIBRARY");
	return env && env[0] ? env : "libnvidia-ml.so.1";
}

/* dlsym into a function pointer without an object-to-function pointer cast. */
static void *fn(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "bench_startup: %s missing\n", name);
		exit(1);
	}
	return p;
}

/* Child: the raw NVML phases, one line of nanoseconds per phase. */
static int child_raw(void)
{
	uint64_t t[NRAW + 1];
	char buf[96];
	unsigned char pci[68];
	struct {
		unsigned version;
		unsigned long long total, reserved, free, used;
	} mem;
	unsigned count = 0;
	void *dev = NULL;
	t[0] = now_ns();
	void *lib = dlopen(library(), RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "bench_startup: %s\n", dlerror());
		return 1;
	}
	int (*init)(void), (*shutdown)(void), (*getcount)(unsigned *), (*byindex)(unsigned, void **);
	int (*name)(void *, char *, unsigned), (*uuid)(void *, char *, unsigned), (*pciinfo)(void *, void *);
	int (*meminfo)(void *, void *);
	*(void **)&init = fn(lib, "nvmlInit_v2");
	*(void **)&shutdown = fn(lib, "nvmlShutdown");
	*(void **)&getcount = fn(lib, "nvmlDeviceGetCount_v2");
	*(void **)&byindex = fn(lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = fn(lib, "nvmlDeviceGetName");
	*(void **)&uuid = fn(lib, "nvmlDeviceGetUUID");
	*(void **)&pciinfo = fn(lib, "nvmlDeviceGetPciInfo_v3");
	*(void **)&meminfo = fn(lib, "nvmlDeviceGetMemoryInfo_v2");
	t[1] = now_ns();
	int bad = init();
	t[2] = now_ns();
	bad |= getcount(&count);
	t[3] = now_ns();
	bad |= byindex(0, &dev);
	t[4] = now_ns();
	bad |= name(dev, buf, sizeof buf);
	t[5] = now_ns();
	bad |= uuid(dev, buf, sizeof buf);
	t[6] = now_ns();
	bad |= pciinfo(dev, pci);
	t[7] = now_ns();
	mem.version = (unsigned)sizeof mem | 2u << 24;
	bad |= meminfo(dev, &mem);
	t[8] = now_ns();
	shutdown();
	t[9] = now_ns();
	dlclose(lib);
	t[10] = now_ns();
	if (bad) {
		fprintf(stderr, "bench_startup: an NVML call failed\n");
		return 1;
	}
	for (size_t i = 0; i < NRAW; i++)
		printf("%llu%c", (unsigned long long)(t[i + 1] - t[i]), i + 1 < NRAW ? ' ' : '\n');
	return 0;
}

/* Child: the same through libgpumon. */
static int child_lib(void)
{
	uint64_t t[NLIB + 1];
	gpumon *g;
	gpumon_device_sample s;
	t[0] = now_ns();
	int st = gpumon_create(&g);
	t[1] = now_ns();
	if (st == GPUMON_OK)
		st = gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s);
	t[2] = now_ns();
	if (st != GPUMON_OK) {
		fprintf(stderr, "bench_startup: %s\n", gpumon_errmsg(g));
		return 1;
	}
	gpumon_destroy(g);
	t[3] = now_ns();
	for (size_t i = 0; i < NLIB; i++)
		printf("%llu%c", (unsigned long long)(t[i + 1] - t[i]), i + 1 < NLIB ? ' ' : '\n');
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static double median_ms(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof *v, cmp_u64);
	return (n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2) / 1e6;
}

/* Runs `self MODE` RUNS times; collects the phase times and the wall time of each process. */
static int measure(const char *self, const char *mode, const char *const *phases, size_t nphases, int runs)
{
	static uint64_t v[MAX_PHASES + 1][MAX_RUNS];
	for (int r = 0; r < runs; r++) {
		int fds[2];
		if (pipe(fds) != 0)
			return 1;
		uint64_t t0 = now_ns();
		pid_t pid = fork();
		if (pid == 0) {
			dup2(fds[1], 1);
			close(fds[0]);
			execl(self, self, mode, (char *)NULL);
			_exit(127);
		}
		close(fds[1]);
		char line[512] = "";
		ssize_t got = read(fds[0], line, sizeof line - 1);
		close(fds[0]);
		int status;
		waitpid(pid, &status, 0);
		v[nphases][r] = now_ns() - t0;
		if (got <= 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "bench_startup: child %s failed\n", mode);
			return 1;
		}
		char *p = line;
		for (size_t i = 0; i < nphases; i++)
			v[i][r] = strtoull(p, &p, 10);
	}
	double sum = 0;
	printf("%-24s %10s   (%s, %d fresh processes)\n", "phase", "median_ms", mode, runs);
	for (size_t i = 0; i < nphases; i++) {
		double m = median_ms(v[i], (size_t)runs);
		sum += m;
		printf("%-24s %10.3f\n", phases[i], m);
	}
	printf("%-24s %10.3f\n", "sum of phase medians", sum);
	printf("%-24s %10.3f\n", "whole process (wall)", median_ms(v[nphases], (size_t)runs));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--child-raw"))
		return child_raw();
	if (argc == 2 && !strcmp(argv[1], "--child-lib"))
		return child_lib();
	int runs = argc == 3 && !strcmp(argv[1], "-r") ? atoi(argv[2]) : 30;
	if (runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "usage: gpumon_bench_startup [-r RUNS]   (1..%d, default 30)\n", MAX_RUNS);
		return 2;
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	printf("gpumon_bench_startup: NVML library %s\n", library());
	if (measure(self, "--child-raw", raw_phases, NRAW, runs) != 0)
		return 1;
	return measure(self, "--child-lib", lib_phases, NLIB, runs);
}
