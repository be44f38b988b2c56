/* SPDX-License-Identifier: MIT */
/* bench_floor.c — the floors gpumon's costs are held to: what any program pays that reads GPU memory
 * through NVML and nothing else. `oneshot`: load NVML, start it, take the first GPU's handle, read its
 * memory once, print the used figure and leave (no shutdown: the floor of a one-shot query);
 * `oneshot-shutdown`: the same, calling nvmlShutdown before leaving.
 * `loop SECONDS [PERIOD_MS]`: read the first GPU's memory with nvmlDeviceGetMemoryInfo_v2 every
 * PERIOD_MS (default 1) to an absolute deadline (CLOCK_MONOTONIC, TIMER_ABSTIME) for SECONDS: the floor
 * of a 1 kHz sampler, of a live view refreshed every 100 ms, and the resident memory of any process
 * that keeps NVML open.
 * `loop-all SECONDS [PERIOD_MS]`: the same loop plus every other read `gpumon record` makes on its
 * GPU, on its schedule: the compute and graphics process lists (_v3, room for 64) every 100 ms and
 * its default slow fields (utilisation, temperature, power, SM and memory clocks) every second —
 * the floor of the same work, which tells what gpumon adds from what the driver's calls cost.
 * Calls NVML directly through dlopen; honours GPUMON_NVML_LIBRARY. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct mem_v2 {
	unsigned version;
	unsigned long long total, reserved, free, used;
};

typedef int (*init_fn)(void);
typedef int (*handle_fn)(unsigned, void **);
typedef int (*mem_fn)(void *, struct mem_v2 *);
typedef int (*procs_fn)(void *, unsigned *, void *);
typedef int (*u2_fn)(void *, unsigned *);	  /* nvmlDeviceGetPowerUsage */
typedef int (*u_arg_fn)(void *, int, unsigned *); /* nvmlDeviceGetTemperature, _GetClockInfo */

struct proc_v2 { /* nvmlProcessInfo_v2_t, what the _v3 lists fill */
	unsigned pid;
	unsigned long long used;
	unsigned gpu_instance_id, compute_instance_id;
};

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (!p) {
		fprintf(stderr, "gpumon_bench_floor: %s: %s\n", name, dlerror());
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "oneshot") && strcmp(argv[1], "oneshot-shutdown") &&
			 strcmp(argv[1], "loop") && strcmp(argv[1], "loop-all"))) {
		fprintf(stderr,
			"usage: gpumon_bench_floor oneshot | oneshot-shutdown | loop SECONDS [PERIOD_MS] | "
			"loop-all SECONDS [PERIOD_MS]\n");
		return 2;
	}
	const char *env = getenv("GPUMON_NVML_LIBRARY");
	void *lib = dlopen(env && env[0] ? env : "libnvidia-ml.so.1", RTLD_NOW);
	if (!lib) {
		fprintf(stderr, "gpumon_bench_floor: %s\n", dlerror());
		return 1;
	}
	init_fn init;
	handle_fn handle;
	mem_fn mem;
	*(void **)&init = sym(lib, "nvmlInit_v2");
	*(void **)&handle = sym(lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&mem = sym(lib, "nvmlDeviceGetMemoryInfo_v2");
	void *dev = NULL;
	if (init() != 0 || handle(0, &dev) != 0) {
		fprintf(stderr, "gpumon_bench_floor: NVML did not start or has no GPU 0\n");
		return 1;
	}
	struct mem_v2 m = {.version = (unsigned)(sizeof m | (2u << 24))};
	if (!strncmp(argv[1], "oneshot", 7)) {
		if (mem(dev, &m) != 0)
			return 1;
		printf("%llu MiB\n", m.used >> 20);
		fflush(stdout);
		if (argv[1][7]) {
			init_fn shutdown;
			*(void **)&shutdown = sym(lib, "nvmlShutdown");
			shutdown();
		}
		_exit(0);
	}
	double secs = argc > 2 ? atof(argv[2]) : 10;
	long period_ms = argc > 3 ? atol(argv[3]) : 1;
	if (period_ms < 1 || period_ms > 1000) {
		fprintf(stderr, "gpumon_bench_floor: PERIOD_MS must be 1 to 1000\n");
		return 2;
	}
	long n = (long)(secs * 1000) / period_ms;
	int all = !strcmp(argv[1], "loop-all");
	procs_fn compute = NULL, graphics = NULL;
	u2_fn power = NULL;
	u_arg_fn temperature = NULL, clock = NULL;
	int (*util)(void *, unsigned[2]) = NULL;
	static struct proc_v2 procs[64];
	if (all) {
		*(void **)&compute = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
		*(void **)&graphics = sym(lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
		*(void **)&util = sym(lib, "nvmlDeviceGetUtilizationRates");
		*(void **)&temperature = sym(lib, "nvmlDeviceGetTemperature");
		*(void **)&power = sym(lib, "nvmlDeviceGetPowerUsage");
		*(void **)&clock = sym(lib, "nvmlDeviceGetClockInfo");
	}
	long every_proc = 100 / period_ms > 0 ? 100 / period_ms : 1, every_slow = 1000 / period_ms;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (long i = 0; i < n; i++) {
		t.tv_nsec += period_ms * 1000000;
		while (t.tv_nsec >= 1000000000) {
			t.tv_nsec -= 1000000000;
			t.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		m.version = (unsigned)(sizeof m | (2u << 24));
		mem(dev, &m);
		if (all && i % every_proc == 0) {
			unsigned k = 64;
			compute(dev, &k, procs);
			k = 64;
			graphics(dev, &k, procs);
		}
		if (all && i % every_slow == 0) {
			unsigned u[2], v;
			util(dev, u);
			temperature(dev, 0 /* NVML_TEMPERATURE_GPU */, &v);
			power(dev, &v);
			clock(dev, 1 /* NVML_CLOCK_SM */, &v);
			clock(dev, 2 /* NVML_CLOCK_MEM */, &v);
		}
	}
	return 0;
}
