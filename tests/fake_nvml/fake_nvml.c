/* SPDX-License-Identifier: MIT */
/* fake_nvml.c — a test double of libnvidia-ml: the NVML functions gpumon loads, answering from
 * the scenario file named by FAKE_NVML_SCENARIO at the time elapsed since the first nvmlInit.
 * Built twice: in full, and with -DFAKE_NVML_V1_ONLY exporting only the oldest drivers' calls. */
#ifndef _GNU_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scenario.h"

#define FAKE_API __attribute__((visibility("default")))

/* ---- NVML's ABI, declared here as the driver lays it out (never from nvml.h) ----------------- */

typedef enum {
	NVML_SUCCESS = SCN_SUCCESS,
	NVML_ERROR_UNINITIALIZED = SCN_ERROR_UNINITIALIZED,
	NVML_ERROR_INVALID_ARGUMENT = SCN_ERROR_INVALID_ARGUMENT,
	NVML_ERROR_NOT_FOUND = SCN_ERROR_NOT_FOUND,
	NVML_ERROR_INSUFFICIENT_SIZE = SCN_ERROR_INSUFFICIENT_SIZE,
	NVML_ERROR_TIMEOUT = SCN_ERROR_TIMEOUT,
	NVML_ERROR_GPU_IS_LOST = SCN_ERROR_GPU_IS_LOST,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = SCN_ERROR_ARGUMENT_VERSION_MISMATCH,
	NVML_ERROR_UNKNOWN = SCN_ERROR_UNKNOWN,
	/* the fake's own, no NVML code: the scenario could not be loaded; nvmlErrorString says why, so
	   that the program under test shows the fake's problem, not a driver's */
	FAKE_NVML_ERROR_SCENARIO = 1000,
} nvmlReturn_t;

struct fake_dev {
	unsigned index;
};
typedef struct fake_dev *nvmlDevice_t;

typedef struct {
	unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
	char busId[16];
	unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
	unsigned reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfo_v1_t;

typedef struct {
	unsigned gpu, memory;
} nvmlUtilization_t;

typedef struct {
	unsigned pid;
	unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

_Static_assert(sizeof(nvmlReturn_t) == 4, "nvmlReturn_t is a 4-byte enum");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is 24 bytes");
_Static_assert(sizeof(nvmlPciInfo_v1_t) == 52, "the v1 nvmlPciInfo_t is 52 bytes");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t is 16 bytes");

#ifndef FAKE_NVML_V1_ONLY
typedef struct {
	unsigned version;
	unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct {
	char busIdLegacy[16];
	unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned pid;
	unsigned long long usedGpuMemory;
	unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define NVML_MEMORY_V2 ((unsigned)sizeof(nvmlMemory_v2_t) | 2u << 24)
_Static_assert(NVML_MEMORY_V2 == 0x02000028, "nvmlMemory_v2 is version 2 of 40 bytes");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t is 68 bytes");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t is 24 bytes");
#endif

/* ---- the exported functions ------------------------------------------------------------------ */

FAKE_API nvmlReturn_t nvmlInit(void);
FAKE_API nvmlReturn_t nvmlShutdown(void);
FAKE_API const char *nvmlErrorString(nvmlReturn_t r);
FAKE_API nvmlReturn_t nvmlDeviceGetCount(unsigned *count);
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t *dev);
FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem);
FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t dev, nvmlPciInfo_v1_t *pci);
FAKE_API nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util);
FAKE_API nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, unsigned sensor, unsigned *temp);
FAKE_API nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *mw);
FAKE_API nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, unsigned type, unsigned *mhz);
FAKE_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned len);
FAKE_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned *count,
							  nvmlProcessInfo_v1_t *infos);
FAKE_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t dev, unsigned *count,
							   nvmlProcessInfo_v1_t *infos);
#ifndef FAKE_NVML_V1_ONLY
FAKE_API nvmlReturn_t nvmlInit_v2(void);
FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *count);
FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *dev);
FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem);
FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t dev, nvmlPciInfo_t *pci);
FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci);
FAKE_API nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *mj);
FAKE_API nvmlReturn_t nvmlSystemGetProcessName(unsigned pid, char *name, unsigned len);
FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned *count,
							     nvmlProcessInfo_t *infos);
FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned *count,
							     nvmlProcessInfo_t *infos);
FAKE_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t dev, unsigned *count,
							      nvmlProcessInfo_t *infos);
FAKE_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t dev, unsigned *count,
							      nvmlProcessInfo_t *infos);
FAKE_API nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t dev, unsigned *current, unsigned *pending);
FAKE_API nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned *count);
FAKE_API nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned index, nvmlDevice_t *mig);
FAKE_API nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned *id);
FAKE_API nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned *id);
FAKE_API nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned *is_mig);
FAKE_API nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *dev);
#endif

/* ---- state: one scenario per process, behind one mutex --------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct scn *scenario;     /* loaded by the nvmlInit that finds no session open */
static struct scn_state state;
static unsigned init_count;      /* nvmlInit calls not yet matched by nvmlShutdown */
static int started;              /* t0 is set: an nvmlInit has succeeded */
static struct timespec t0;
static struct fake_dev devs[SCN_MAX_GPUS]; /* device handles point here */
/* MIG device handles point here: index is the parent GPU + 1 once handed out, 0 before */
static struct fake_dev mig_devs[SCN_MAX_MIG];
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static int trace_fd = -1;
static char scenario_error[1024]; /* why the last nvmlInit could not load the scenario */

static void trace_open(void)
{
	const char *path = getenv("FAKE_NVML_TRACE");
	if (path && *path)
		trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* Appends the function's name to the trace file, in one write so that lines never mix. */
static void trace(unsigned fn)
{
	char line[64];
	pthread_once(&trace_once, trace_open);
	if (trace_fd < 0)
		return;
	int n = snprintf(line, sizeof line, "%s\n", scn_fn_name(fn));
	if (n > 0 && (size_t)n < sizeof line && write(trace_fd, line, (size_t)n) < 0)
		return; /* a trace is best effort */
}

/* Seconds since the first successful nvmlInit of the process; 0 before it. */
static double elapsed(void)
{
	struct timespec now;
	if (!started)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) * 1e-9;
}

/* Reads the file at path into a new buffer; past SCN_MAX_TEXT bytes it stops (the parser
 * rejects that length). */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (n > SCN_MAX_TEXT)
			break;
		if (n == cap) {
			char *nb = realloc(buf, cap = cap ? cap * 2 : 65536);
			if (!nb) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (got == 0)
			break;
	}
	int bad = ferror(f) ? (errno ? errno : EIO) : 0;
	fclose(f);
	if (bad) {
		free(buf);
		errno = bad;
		return NULL;
	}
	*len = n;
	return buf;
}

/* Frees the scenario once no session needs it, so that dlclose() leaves nothing behind. */
static void unload_scenario(void)
{
	scn_state_free(&state);
	scn_free(scenario);
	scenario = NULL;
}

/* Runs at dlclose() and at exit; a session still open keeps its scenario (threads may use it). */
__attribute__((destructor)) static void fake_nvml_fini(void)
{
	pthread_mutex_lock(&lock);
	if (!init_count)
		unload_scenario();
	if (trace_fd >= 0)
		close(trace_fd);
	trace_fd = -1;
	pthread_mutex_unlock(&lock);
}

/* Loads the scenario file afresh; on failure keeps why in scenario_error (for nvmlErrorString) and
 * returns -1. */
static int load_scenario(void)
{
	const char *path = getenv("FAKE_NVML_SCENARIO");
	char err[320];
	size_t len = 0;
	char *text;
	struct scn *s = NULL;
	if (!path || !*path) {
		snprintf(scenario_error, sizeof scenario_error,
			 "fake_nvml has no scenario: set FAKE_NVML_SCENARIO to a scenario file (tests/fake_nvml/README.md)");
		return -1;
	}
	if (!(text = read_file(path, &len))) {
		snprintf(scenario_error, sizeof scenario_error, "fake_nvml: %.600s: %s", path, strerror(errno));
		return -1;
	}
	int line = scn_parse(text, len, &s, err, sizeof err);
	free(text);
	if (line) {
		snprintf(scenario_error, sizeof scenario_error, "fake_nvml: %.600s:%s", path, err);
		return -1;
	}
	unload_scenario();
	scenario = s;
	if (scn_state_init(&state, s) < 0) {
		snprintf(scenario_error, sizeof scenario_error, "fake_nvml: %.600s: out of memory", path);
		unload_scenario();
		return -1;
	}
	return 0;
}

/* ---- the shape of every call ----------------------------------------------------------------- */

/* What a call needs once begun: its GPU (device calls) and the time. */
struct call {
	struct scn_gpu *gpu;
	unsigned index;
	double t;
	const struct scn_mig *mig; /* a call on a MIG device handle: the device (gpu points at view) */
	struct scn_gpu view;       /* the MIG device as a GPU: its name, UUID and memory */
};

/* Locks and traces; UNINITIALIZED unless a session is open. The lock is held on return. */
static nvmlReturn_t begin(struct call *c, unsigned fn, int args_ok)
{
	pthread_mutex_lock(&lock);
	trace(fn);
	c->gpu = NULL;
	c->mig = NULL;
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	if (!args_ok)
		return NVML_ERROR_INVALID_ARGUMENT;
	c->t = elapsed();
	scn_state_update(&state, scenario, c->t);
	return NVML_SUCCESS;
}

/* Sleeps until `until` seconds after t0 on CLOCK_MONOTONIC (forever when it is infinite). */
static void sleep_until(double until)
{
	if (!isfinite(until)) {
		for (;;)
			sleep(3600);
	}
	time_t whole = (time_t)until; /* times are below 10^12 s */
	struct timespec at = {.tv_sec = t0.tv_sec + whole, .tv_nsec = t0.tv_nsec + (long)((until - (double)whole) * 1e9)};
	if (at.tv_nsec >= 1000000000L) {
		at.tv_sec++;
		at.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
}

/* Sleeps for secs seconds (forever when it is infinite). */
static void sleep_for(double secs)
{
	if (!isfinite(secs)) {
		for (;;)
			sleep(3600);
	}
	struct timespec d = {.tv_sec = (time_t)secs, .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
	while (nanosleep(&d, &d) == EINTR)
		;
}

/*
 * A `hang` line for the call (lock held, session open): sleeps until its end without the lock, so
 * that the other GPUs' calls go on, as a GPU in a bad state blocks its own calls. Then the call
 * goes on at the new time; UNINITIALIZED when the session was shut down meanwhile.
 */
static nvmlReturn_t maybe_hang(struct call *c, unsigned fn, int gpu)
{
	double until;
	if (!scn_hang_until(scenario, fn, gpu, c->t, &until))
		return NVML_SUCCESS;
	pthread_mutex_unlock(&lock);
	sleep_until(until);
	pthread_mutex_lock(&lock);
	if (!init_count)
		return NVML_ERROR_UNINITIALIZED;
	c->t = elapsed();
	scn_state_update(&state, scenario, c->t);
	return NVML_SUCCESS;
}

/* A call about no GPU: begin(), a `hang` line, then an `error` line for it. */
static nvmlReturn_t begin_sys(struct call *c, unsigned fn, int args_ok)
{
	int code;
	nvmlReturn_t r = begin(c, fn, args_ok);
	if (r == NVML_SUCCESS)
		r = maybe_hang(c, fn, -1);
	if (r == NVML_SUCCESS && scn_rule_code(scenario, fn, -1, c->t, &code))
		r = (nvmlReturn_t)code;
	return r;
}

/* A call about GPU index: bad index, then `hang` lines, `error` lines, then a lost GPU. */
static nvmlReturn_t begin_index(struct call *c, unsigned fn, unsigned index, int args_ok)
{
	int code;
	nvmlReturn_t r = begin(c, fn, args_ok);
	if (r != NVML_SUCCESS)
		return r;
	if (index >= scn_gpu_count(scenario))
		return NVML_ERROR_INVALID_ARGUMENT;
	if ((r = maybe_hang(c, fn, (int)index)) != NVML_SUCCESS)
		return r;
	if (scn_rule_code(scenario, fn, (int)index, c->t, &code))
		return (nvmlReturn_t)code;
	c->index = index;
	c->gpu = &state.gpu[index];
	return c->gpu->lost ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

static long mig_slot(nvmlDevice_t dev);
static nvmlReturn_t begin_mig(struct call *c, unsigned fn, size_t k, int args_ok);
static nvmlReturn_t mig_refuses(const struct call *c, unsigned fn);

/* A call on a device handle, which must be one that nvmlDeviceGetHandleByIndex gives (or a MIG
 * device handle from nvmlDeviceGetMigDeviceHandleByIndex). */
static nvmlReturn_t begin_dev(struct call *c, unsigned fn, nvmlDevice_t dev, int args_ok)
{
	long k = mig_slot(dev);
	if (k >= 0)
		return begin_mig(c, fn, (size_t)k, args_ok);
	uintptr_t off = (uintptr_t)dev - (uintptr_t)devs;
	unsigned index = SCN_MAX_GPUS; /* begin_index() rejects it */
	if (dev && (uintptr_t)dev >= (uintptr_t)devs && off % sizeof devs[0] == 0 &&
	    off / sizeof devs[0] < SCN_MAX_GPUS)
		index = (unsigned)(off / sizeof devs[0]);
	nvmlReturn_t r = begin_index(c, fn, index, args_ok);
	return r == NVML_SUCCESS ? mig_refuses(c, fn) : r;
}

static nvmlReturn_t end(nvmlReturn_t r)
{
	pthread_mutex_unlock(&lock);
	return r;
}

static nvmlReturn_t copy_string(char *dst, unsigned len, const char *src)
{
	size_t n = strlen(src) + 1;
	if (len < n)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	memcpy(dst, src, n);
	return NVML_SUCCESS;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* total - reserved - used, or 0 when the scenario overcommits the GPU. */
static uint64_t free_bytes(const struct scn_gpu *g)
{
	uint64_t taken = sat_add(g->reserved, g->used);
	return g->total > taken ? g->total - taken : 0;
}

/* ---- initialisation -------------------------------------------------------------------------- */

static nvmlReturn_t init(unsigned fn)
{
	nvmlReturn_t r = NVML_SUCCESS;
	int code;
	pthread_mutex_lock(&lock);
	trace(fn);
	if (!init_count && load_scenario() < 0)
		return end(FAKE_NVML_ERROR_SCENARIO);
	double until, t = elapsed();
	if (scn_hang_until(scenario, fn, -1, t, &until)) {
		/* no clock runs before the first init: its wait counts from the call */
		pthread_mutex_unlock(&lock);
		sleep_for(until - t);
		pthread_mutex_lock(&lock);
		if (!init_count && load_scenario() < 0) /* another init may have changed it meanwhile */
			return end(FAKE_NVML_ERROR_SCENARIO);
	}
	if (scn_init_error(scenario))
		r = (nvmlReturn_t)scn_init_error(scenario);
	else if (scn_rule_code(scenario, fn, -1, elapsed(), &code))
		r = (nvmlReturn_t)code;
	if (r != NVML_SUCCESS) {
		if (!init_count)
			unload_scenario();
		return end(r);
	}
	if (!started) {
		clock_gettime(CLOCK_MONOTONIC, &t0);
		started = 1;
	}
	init_count++;
	return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlInit(void)
{
	return init(SCN_FN_INIT);
}

nvmlReturn_t nvmlShutdown(void)
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, SCN_FN_SHUTDOWN, 1);
	if (r == NVML_SUCCESS && --init_count == 0)
		unload_scenario();
	return end(r);
}

const char *nvmlErrorString(nvmlReturn_t r)
{
	static const char *const text[] = {
		[0] = "Success", [1] = "Uninitialized", [2] = "Invalid Argument",
		[3] = "Not Supported", [4] = "Insufficient Permissions", [5] = "Already Initialized",
		[6] = "Not Found", [7] = "Insufficient Size", [8] = "Insufficient External Power",
		[9] = "Driver Not Loaded", [10] = "Timeout", [11] = "Interrupt Request Issue",
		[12] = "NVML Shared Library Not Found", [13] = "Function Not Found",
		[14] = "Corrupted infoROM", [15] = "GPU is lost", [16] = "GPU requires restart",
		[17] = "The operating system has blocked the request",
		[18] = "RM has detected an NVML/RM version mismatch", [19] = "In use by another client",
		[20] = "Insufficient Memory", [21] = "No data",
		[22] = "vGPU operation not available: ECC is enabled",
		[23] = "Ran out of critical resources, other than memory",
		[24] = "The requested frequency is not supported", [25] = "Argument version mismatch",
		[26] = "The requested functionality has been deprecated",
		[27] = "The system is not ready for the request", [28] = "GPU not found",
		[29] = "Invalid state",
	};
	pthread_mutex_lock(&lock);
	trace(SCN_FN_ERROR_STRING);
	pthread_mutex_unlock(&lock);
	if (r == FAKE_NVML_ERROR_SCENARIO) /* set once init failed, before the caller asks */
		return scenario_error[0] ? scenario_error : "fake_nvml: the scenario could not be loaded";
	if ((unsigned)r < sizeof text / sizeof text[0] && text[r])
		return text[r];
	return "Unknown Error";
}

/* ---- devices --------------------------------------------------------------------------------- */

static nvmlReturn_t device_count(unsigned fn, unsigned *n)
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, fn, n != NULL);
	if (r == NVML_SUCCESS)
		*n = scn_gpu_count(scenario);
	return end(r);
}

nvmlReturn_t nvmlDeviceGetCount(unsigned *n)
{
	return device_count(SCN_FN_COUNT, n);
}

static nvmlReturn_t handle(unsigned fn, unsigned index, nvmlDevice_t *dev)
{
	struct call c;
	nvmlReturn_t r = begin_index(&c, fn, index, dev != NULL);
	if (r == NVML_SUCCESS) {
		devs[index].index = index;
		*dev = &devs[index];
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t *dev)
{
	return handle(SCN_FN_HANDLE, index, dev);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *mem)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_MEMORY, dev, mem != NULL);
	if (r == NVML_SUCCESS) {
		/* the oldest call counts the driver's reserved memory as used */
		mem->total = c.gpu->total;
		mem->free = free_bytes(c.gpu);
		mem->used = sat_add(c.gpu->used, c.gpu->reserved);
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned len)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_NAME, dev, name != NULL);
	if (r == NVML_SUCCESS)
		r = copy_string(name, len, c.gpu->name);
	return end(r);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned len)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_UUID, dev, uuid != NULL);
	if (r == NVML_SUCCESS)
		r = copy_string(uuid, len, c.gpu->uuid);
	return end(r);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t dev, nvmlPciInfo_v1_t *pci)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_PCI, dev, pci != NULL);
	if (r == NVML_SUCCESS) {
		memset(pci, 0, sizeof *pci);
		memcpy(pci->busId, c.gpu->bus_id_legacy, sizeof pci->busId);
		pci->domain = c.gpu->pci_domain;
		pci->bus = c.gpu->pci_bus;
		pci->device = c.gpu->pci_device;
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t dev, nvmlUtilization_t *util)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_UTILIZATION, dev, util != NULL);
	if (r == NVML_SUCCESS) {
		util->gpu = c.gpu->util;
		util->memory = c.gpu->memutil;
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t dev, unsigned sensor, unsigned *temp)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_TEMPERATURE, dev, temp != NULL && sensor == 0);
	if (r == NVML_SUCCESS)
		*temp = c.gpu->temp_c;
	return end(r);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t dev, unsigned *mw)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_POWER, dev, mw != NULL);
	if (r == NVML_SUCCESS)
		*mw = c.gpu->power_mw;
	return end(r);
}

/* Clock types: 0 graphics, 1 SM, 2 memory, 3 video; graphics and video follow the SM clock. */
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t dev, unsigned type, unsigned *mhz)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_CLOCK, dev, mhz != NULL && type <= 3);
	if (r == NVML_SUCCESS)
		*mhz = type == 2 ? c.gpu->mem_mhz : c.gpu->sm_mhz;
	return end(r);
}

/* ---- system ---------------------------------------------------------------------------------- */

static nvmlReturn_t version(unsigned fn, char *buf, unsigned len, const char *(*get)(const struct scn *))
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, fn, buf != NULL);
	if (r == NVML_SUCCESS)
		r = copy_string(buf, len, get(scenario));
	return end(r);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len)
{
	return version(SCN_FN_DRIVER_VERSION, buf, len, scn_driver_version);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *buf, unsigned len)
{
	return version(SCN_FN_NVML_VERSION, buf, len, scn_nvml_version);
}

/* ---- processes ------------------------------------------------------------------------------- */

/* Whether a process is listed by the call: on a MIG device handle, only its instance's. */
static int on_mig(const struct call *c, const struct scn_proc *p)
{
	return !c->mig || (p->gi == c->mig->gi && p->ci == c->mig->ci);
}

/*
 * Lists the present processes of the call's GPU whose type has a bit of `type` into infos, as
 * NVML does: too small a *count gets INSUFFICIENT_SIZE and the count needed. v2 entries are the
 * 24-byte ones with MIG ids; v1 entries the 16-byte ones.
 */
static nvmlReturn_t processes(unsigned fn, nvmlDevice_t dev, unsigned type, unsigned *count,
			      void *infos, int v2)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, fn, dev, count != NULL);
	if (r != NVML_SUCCESS)
		return end(r);
	const struct scn_proc *pr = state.proc + state.gpu_first[c.index];
	const struct scn_proc *last = state.proc + state.gpu_first[c.index + 1];
	unsigned n = 0;
	for (const struct scn_proc *q = pr; q < last; q++)
		n += q->present && (q->type & type) && on_mig(&c, q);
	if (*count < n) {
		*count = n;
		return end(NVML_ERROR_INSUFFICIENT_SIZE);
	}
	if (n && !infos)
		return end(NVML_ERROR_INVALID_ARGUMENT);
	*count = n;
	for (unsigned i = 0; pr < last; pr++) {
		if (!pr->present || !(pr->type & type) || !on_mig(&c, pr))
			continue;
		unsigned long long used = pr->used_known ? pr->used : ~0ULL;
#ifndef FAKE_NVML_V1_ONLY
		if (v2) {
			((nvmlProcessInfo_t *)infos)[i++] = (nvmlProcessInfo_t){
				.pid = pr->pid, .usedGpuMemory = used, .gpuInstanceId = pr->gi,
				.computeInstanceId = pr->ci};
			continue;
		}
#endif
		(void)v2;
		((nvmlProcessInfo_v1_t *)infos)[i++] =
			(nvmlProcessInfo_v1_t){.pid = pr->pid, .usedGpuMemory = used};
	}
	return end(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t dev, unsigned *count,
						  nvmlProcessInfo_v1_t *infos)
{
	return processes(SCN_FN_COMPUTE_PROCS, dev, SCN_PROC_COMPUTE, count, infos, 0);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t dev, unsigned *count,
						   nvmlProcessInfo_v1_t *infos)
{
	return processes(SCN_FN_GRAPHICS_PROCS, dev, SCN_PROC_GRAPHICS, count, infos, 0);
}

/* ---- calls of newer drivers ------------------------------------------------------------------ */
#ifndef FAKE_NVML_V1_ONLY

nvmlReturn_t nvmlInit_v2(void)
{
	return init(SCN_FN_INIT_V2);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n)
{
	return device_count(SCN_FN_COUNT_V2, n);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *dev)
{
	return handle(SCN_FN_HANDLE_V2, index, dev);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *mem)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_MEMORY_V2, dev, mem != NULL);
	if (r == NVML_SUCCESS && mem->version != NVML_MEMORY_V2)
		r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	if (r == NVML_SUCCESS) {
		mem->total = c.gpu->total;
		mem->reserved = c.gpu->reserved;
		mem->free = free_bytes(c.gpu);
		mem->used = c.gpu->used;
	}
	return end(r);
}

static nvmlReturn_t pci_info(unsigned fn, nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, fn, dev, pci != NULL);
	if (r == NVML_SUCCESS) {
		memset(pci, 0, sizeof *pci);
		memcpy(pci->busIdLegacy, c.gpu->bus_id_legacy, sizeof pci->busIdLegacy);
		memcpy(pci->busId, c.gpu->bus_id, sizeof pci->busId);
		pci->domain = c.gpu->pci_domain;
		pci->bus = c.gpu->pci_bus;
		pci->device = c.gpu->pci_device;
	}
	return end(r);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	return pci_info(SCN_FN_PCI_V2, dev, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci)
{
	return pci_info(SCN_FN_PCI_V3, dev, pci);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t dev, unsigned long long *mj)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_ENERGY, dev, mj != NULL);
	if (r == NVML_SUCCESS)
		*mj = c.gpu->energy_mj;
	return end(r);
}

/* The name the scenario gives a present process with that pid on any GPU; truncated to len. */
nvmlReturn_t nvmlSystemGetProcessName(unsigned pid, char *name, unsigned len)
{
	struct call c;
	nvmlReturn_t r = begin_sys(&c, SCN_FN_PROCESS_NAME, name != NULL && len > 0);
	if (r != NVML_SUCCESS)
		return end(r);
	for (size_t i = 0; i < state.nprocs; i++) {
		const struct scn_proc *pr = &state.proc[i];
		if (pr->present && pr->pid == pid && pr->name) {
			snprintf(name, len, "%s", pr->name);
			return end(NVML_SUCCESS);
		}
	}
	return end(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned *count,
						     nvmlProcessInfo_t *infos)
{
	return processes(SCN_FN_COMPUTE_PROCS_V2, dev, SCN_PROC_COMPUTE, count, infos, 1);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned *count,
						     nvmlProcessInfo_t *infos)
{
	return processes(SCN_FN_COMPUTE_PROCS_V3, dev, SCN_PROC_COMPUTE, count, infos, 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t dev, unsigned *count,
						      nvmlProcessInfo_t *infos)
{
	return processes(SCN_FN_GRAPHICS_PROCS_V2, dev, SCN_PROC_GRAPHICS, count, infos, 1);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t dev, unsigned *count,
						      nvmlProcessInfo_t *infos)
{
	return processes(SCN_FN_GRAPHICS_PROCS_V3, dev, SCN_PROC_GRAPHICS, count, infos, 1);
}

/* properties, memory health and XID events: a file of their own, sharing the helpers above */
#include "fake_props_calls.c"

#endif /* FAKE_NVML_V1_ONLY */

/* ---- MIG (the scenario's `mig` lines, scenario_mig.c) ------------------------------------------ */

/* The functions a MIG device handle answers; every other call on one is NOT_SUPPORTED, as NVML
 * answers the calls that only make sense for a whole GPU (utilization, clocks, power ...). */
static int mig_handle_ok(unsigned fn)
{
	switch (fn) {
	case SCN_FN_MEMORY: case SCN_FN_MEMORY_V2: case SCN_FN_NAME: case SCN_FN_UUID:
	case SCN_FN_COMPUTE_PROCS: case SCN_FN_COMPUTE_PROCS_V2: case SCN_FN_COMPUTE_PROCS_V3:
	case SCN_FN_GRAPHICS_PROCS: case SCN_FN_GRAPHICS_PROCS_V2: case SCN_FN_GRAPHICS_PROCS_V3:
	case SCN_FN_GPU_INSTANCE_ID: case SCN_FN_COMPUTE_INSTANCE_ID: case SCN_FN_IS_MIG_HANDLE:
	case SCN_FN_MIG_PARENT:
		return 1;
	default:
		return 0;
	}
}

/* The MIG device slot a handle points at, or -1 when it is not a MIG device handle. */
static long mig_slot(nvmlDevice_t dev)
{
	uintptr_t off = (uintptr_t)dev - (uintptr_t)mig_devs;
	if (!dev || (uintptr_t)dev < (uintptr_t)mig_devs || off % sizeof mig_devs[0] != 0 ||
	    off / sizeof mig_devs[0] >= SCN_MAX_MIG)
		return -1;
	return (long)(off / sizeof mig_devs[0]);
}

/*
 * A call on MIG device handle k: the parent GPU's `hang`, `error` and lost rules apply; then the
 * call sees the MIG device as its GPU (c->view: the parent's fields with the device's name, UUID
 * and memory; c->mig set). A handle never handed out is INVALID_ARGUMENT.
 */
static nvmlReturn_t begin_mig(struct call *c, unsigned fn, size_t k, int args_ok)
{
	unsigned parent = mig_devs[k].index ? mig_devs[k].index - 1 : SCN_MAX_GPUS;
	nvmlReturn_t r = begin_index(c, fn, parent, args_ok);
	const struct scn_mig *m = r == NVML_SUCCESS ? scn_mig_get(scenario, k) : NULL;
	if (r != NVML_SUCCESS)
		return r;
	if (!m || m->gpu != parent)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (!mig_handle_ok(fn))
		return (nvmlReturn_t)SCN_ERROR_NOT_SUPPORTED;
	c->view = *c->gpu;
	snprintf(c->view.name, sizeof c->view.name, "%.59s MIG %s", c->gpu->name, m->profile);
	memcpy(c->view.uuid, m->uuid, sizeof c->view.uuid);
	c->view.total = m->total;
	c->view.reserved = m->reserved;
	c->view.used = m->used;
	c->gpu = &c->view;
	c->mig = m;
	return NVML_SUCCESS;
}

/* A GPU in MIG mode does not report its utilization (nvidia-smi: "not currently supported"). */
static nvmlReturn_t mig_refuses(const struct call *c, unsigned fn)
{
	int cur, pend;
	scn_mig_mode(scenario, c->index, &cur, &pend);
	return fn == SCN_FN_UTILIZATION && cur ? (nvmlReturn_t)SCN_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

#ifndef FAKE_NVML_V1_ONLY


/* 7 (an H100's or H200's most) in MIG mode, or as many as the file declares when more; else 0. */
static unsigned max_mig(unsigned gpu)
{
	int cur, pend;
	unsigned n = 0;
	scn_mig_mode(scenario, gpu, &cur, &pend);
	if (!cur)
		return 0;
	while (scn_mig_find(scenario, gpu, n) >= 0)
		n++;
	return n > 7 ? n : 7;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t dev, unsigned *count)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_MAX_MIG_COUNT, dev, count != NULL);
	if (r == NVML_SUCCESS)
		*count = max_mig(c.index);
	return end(r);
}

/* The index-th MIG device of the GPU: NOT_SUPPORTED out of MIG mode, NOT_FOUND for an index
 * below the most that holds no device (devices take indexes 0, 1, ... in file order). */
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t dev, unsigned index, nvmlDevice_t *mig)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_MIG_HANDLE, dev, mig != NULL);
	if (r == NVML_SUCCESS && c.mig)
		r = (nvmlReturn_t)SCN_ERROR_NOT_SUPPORTED; /* MIG devices have no MIG devices */
	if (r != NVML_SUCCESS)
		return end(r);
	unsigned max = max_mig(c.index);
	long k = scn_mig_find(scenario, c.index, index);
	if (!max)
		r = (nvmlReturn_t)SCN_ERROR_NOT_SUPPORTED;
	else if (index >= max)
		r = NVML_ERROR_INVALID_ARGUMENT;
	else if (k < 0)
		r = NVML_ERROR_NOT_FOUND;
	else {
		mig_devs[k].index = c.index + 1;
		*mig = &mig_devs[k];
	}
	return end(r);
}

static nvmlReturn_t instance_id(unsigned fn, nvmlDevice_t dev, unsigned *id)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, fn, dev, id != NULL);
	if (r == NVML_SUCCESS && !c.mig)
		r = NVML_ERROR_INVALID_ARGUMENT; /* NVML: not a MIG device handle */
	if (r == NVML_SUCCESS)
		*id = fn == SCN_FN_GPU_INSTANCE_ID ? c.mig->gi : c.mig->ci;
	return end(r);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t dev, unsigned *id)
{
	return instance_id(SCN_FN_GPU_INSTANCE_ID, dev, id);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t dev, unsigned *id)
{
	return instance_id(SCN_FN_COMPUTE_INSTANCE_ID, dev, id);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t dev, unsigned *is_mig)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_IS_MIG_HANDLE, dev, is_mig != NULL);
	if (r == NVML_SUCCESS)
		*is_mig = c.mig != NULL;
	return end(r);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *dev)
{
	struct call c;
	nvmlReturn_t r = begin_dev(&c, SCN_FN_MIG_PARENT, mig, dev != NULL);
	if (r == NVML_SUCCESS && !c.mig)
		r = NVML_ERROR_INVALID_ARGUMENT;
	if (r == NVML_SUCCESS)
		*dev = &devs[c.index];
	return end(r);
}

#endif /* FAKE_NVML_V1_ONLY */
