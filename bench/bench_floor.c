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
 * `loop-all-thread SECONDS [PERIOD_MS]`: loop-all's work in a second thread (the first waits to join
 * it), with an XID event set registered and asked, without waiting, once a second — the shape of
 * gpumon's sampler (a thread a GPU, the driver's event state) without any of gpumon's code.
 * Calls NVML directly through dlopen; honours GPUMON_NVML_LIBRARY. */
#include <dlfcn.h>
#include <pthread.h>
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

struct loop {
	void *dev;
	mem_fn mem;
	long n, period_ms;
	procs_fn compute, graphics; /* NULL: memory only */
	u2_fn power;
	u_arg_fn temperature, clock;
	int (*util)(void *, unsigned[2]);
	void *events; /* an XID event set, asked once a second; NULL: none */
	int (*event_wait)(void *, void *, unsigned);
};

static void *loop_main(void *arg)
{
	struct loop *L = arg;
	void *dev = L->dev;
	struct mem_v2 m;
	static struct proc_v2 procs[64];
	long every_proc = 100 / L->period_ms > 0 ? 100 / L->period_ms : 1, every_slow = 1000 / L->period_ms;
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	for (long i = 0; i < L->n; i++) {
		t.tv_nsec += L->period_ms * 1000000;
		while (t.tv_nsec >= 1000000000) {
			t.tv_nsec -= 1000000000;
			t.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		m.version = (unsigned)(sizeof m | (2u << 24));
		L->mem(dev, &m);
		if (L->compute && i % every_proc == 0) {
			unsigned k = 64;
			L->compute(dev, &k, procs);
			k = 64;
			L->graphics(dev, &k, procs);
		}
		if (L->compute && i % every_slow == 0) {
			unsigned u[2], v;
			L->util(dev, u);
			L->temperature(dev, 0 /* NVML_TEMPERATURE_GPU */, &v);
			L->power(dev, &v);
			L->clock(dev, 1 /* NVML_CLOCK_SM */, &v);
			L->clock(dev, 2 /* NVML_CLOCK_MEM */, &v);
		}
		if (L->events && i % every_slow == 0) {
			unsigned char data[64]; /* nvmlEventData_t */
			L->event_wait(L->events, data, 0);
		}
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2 || (strcmp(argv[1], "oneshot") && strcmp(argv[1], "oneshot-shutdown") &&
			 strcmp(argv[1], "loop") && strcmp(argv[1], "loop-all") && strcmp(argv[1], "loop-all-thread"))) {
		fprintf(stderr,
			"usage: gpumon_bench_floor oneshot | oneshot-shutdown | loop SECONDS [PERIOD_MS] | "
			"loop-all SECONDS [PERIOD_MS] | loop-all-thread SECONDS [PERIOD_MS]\n");
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
	struct loop L = {.dev = dev, .mem = mem, .n = (long)(secs * 1000) / period_ms, .period_ms = period_ms};
	int threaded = !strcmp(argv[1], "loop-all-thread");
	if (!strcmp(argv[1], "loop-all") || threaded) {
		*(void **)&L.compute = sym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
		*(void **)&L.graphics = sym(lib, "nvmlDeviceGetGraphicsRunningProcesses_v3");
		*(void **)&L.util = sym(lib, "nvmlDeviceGetUtilizationRates");
		*(void **)&L.temperature = sym(lib, "nvmlDeviceGetTemperature");
		*(void **)&L.power = sym(lib, "nvmlDeviceGetPowerUsage");
		*(void **)&L.clock = sym(lib, "nvmlDeviceGetClockInfo");
	}
	if (!threaded) {
		loop_main(&L);
		return 0;
	}
	int (*set_create)(void **), (*reg)(void *, unsigned long long, void *);
	*(void **)&set_create = sym(lib, "nvmlEventSetCreate");
	*(void **)&reg = sym(lib, "nvmlDeviceRegisterEvents");
	*(void **)&L.event_wait = sym(lib, "nvmlEventSetWait_v2");
	if (set_create(&L.events) != 0 || reg(dev, 0x8 /* nvmlEventTypeXidCriticalError */, L.events) != 0)
		L.events = NULL; /* as gpumon does: no XIDs where the driver has none */
	pthread_t th;
	if (pthread_create(&th, NULL, loop_main, &L) != 0)
		return 1;
	pthread_join(th, NULL);
	return 0;
}
