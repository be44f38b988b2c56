/* SPDX-License-Identifier: MIT */
/* nvml_sample.c — reading one device: the memory figures (v2, v1 where v2 never worked), the optional
 * activity fields, and the merged compute + graphics process list. A GPU that reports itself lost
 * is marked so here and answers GPUMON_E_LOST from then on. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "nvml_abi.h"

static int is_lost_code(nvml_ret r)
{
	return r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED;
}

static int mark_lost(gpumon *g, struct device *d, const char *call)
{
	atomic_store(&d->lost, 1);
	return gpumon__seterr(g, GPUMON_E_LOST, "%s on GPU %u: GPU is lost (fallen off the bus or needs a reset)",
			      call, d->info.index);
}

/* Looks up a device for a call: NOT_FOUND, DRIVER (failed handle) or LOST, with a message. */
int gpumon__device_get(gpumon *g, unsigned dev, struct device **out)
{
	if (!g)
		return GPUMON_E_INVAL;
	if (g->open_status != GPUMON_OK)
		return gpumon__seterr(g, GPUMON_E_DRIVER, "gpumon_create failed; no device can be read");
	if (dev >= g->ndev)
		return gpumon__seterr(g, GPUMON_E_NOT_FOUND, "no GPU %u (%u GPUs)", dev, g->ndev);
	struct device *d = &g->dev[dev];
	if (atomic_load(&d->lost))
		return gpumon__seterr(g, GPUMON_E_LOST, "GPU %u is lost (fallen off the bus or needs a reset)", dev);
	*out = d;
	return GPUMON_OK;
}

int gpumon__nvml_memory(gpumon *g, struct device *d, gpumon_device_sample *s)
{
	const struct nvml_api *api = &g->nvml;
	nvml_ret r = NVML_ERROR_FUNCTION_NOT_FOUND;
	if (api->memory_v2 && !atomic_load_explicit(&d->memory_v2_unusable, memory_order_relaxed)) {
		struct nvml_memory_v2 m;
		memset(&m, 0, sizeof m);
		m.version = NVML_MEMORY_V2_VERSION;
		r = api->memory_v2(d->handle, &m);
		if (r == NVML_SUCCESS) {
			s->memory_total_bytes = m.total;
			s->memory_reserved_bytes = m.reserved;
			s->memory_free_bytes = m.free;
			s->memory_used_bytes = m.used;
			s->memory_api = GPUMON_MEMAPI_V2;
			s->present |= GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED;
			atomic_store_explicit(&d->memory_v2_worked, 1, memory_order_relaxed);
			return GPUMON_OK;
		}
		if (is_lost_code(r))
			return mark_lost(g, d, "nvmlDeviceGetMemoryInfo_v2");
		/* v1 counts the driver's reserve as used: standing in for a v2 that answered before, it
		   would put a figure that is too high (a false peak) among v2's, and drop the reserve */
		if (atomic_load_explicit(&d->memory_v2_worked, memory_order_relaxed))
			return gpumon__seterr(g, gpumon__status_from_nvml(r), "nvmlDeviceGetMemoryInfo_v2 on GPU %u: %s",
					      d->info.index, gpumon__nvml_errstr(g, r));
		/* A driver that knows the symbol but not the struct version falls back for good. */
		if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND ||
		    r == NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
			atomic_store_explicit(&d->memory_v2_unusable, 1, memory_order_relaxed);
	}
	if (api->memory_v1) {
		struct nvml_memory_v1 m;
		memset(&m, 0, sizeof m);
		r = api->memory_v1(d->handle, &m);
		if (r == NVML_SUCCESS) {
			s->memory_total_bytes = m.total;
			s->memory_free_bytes = m.free;
			s->memory_used_bytes = m.used;
			s->memory_api = GPUMON_MEMAPI_V1;
			s->present |= GPUMON_F_MEMORY;
			return GPUMON_OK;
		}
		if (is_lost_code(r))
			return mark_lost(g, d, "nvmlDeviceGetMemoryInfo");
	}
	return gpumon__seterr(g, gpumon__status_from_nvml(r), "nvmlDeviceGetMemoryInfo on GPU %u: %s",
			      d->info.index, gpumon__nvml_errstr(g, r));
}

/* Result of an optional call: 1 value read, 0 absent, -1 the GPU is lost. */
static int optional(nvml_ret r)
{
	if (r == NVML_SUCCESS)
		return 1;
	return is_lost_code(r) ? -1 : 0;
}

/* Reads the optional field groups in want; returns 0 or the lost status. */
static int read_optional(gpumon *g, struct device *d, unsigned want, gpumon_device_sample *s)
{
	const struct nvml_api *api = &g->nvml;
	nvml_device h = d->handle;
	int k;
	if ((want & (GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY)) && api->utilization) {
		struct nvml_utilization u = {0, 0};
		if ((k = optional(api->utilization(h, &u))) < 0)
			return mark_lost(g, d, "nvmlDeviceGetUtilizationRates");
		if (k) {
			s->util_gpu_pct = u.gpu;
			s->util_memory_pct = u.memory;
			s->present |= want & (GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY);
		}
	}
	if ((want & GPUMON_F_TEMPERATURE) && api->temperature) {
		if ((k = optional(api->temperature(h, NVML_TEMPERATURE_GPU, &s->temperature_c))) < 0)
			return mark_lost(g, d, "nvmlDeviceGetTemperature");
		s->present |= k ? GPUMON_F_TEMPERATURE : 0;
	}
	if ((want & GPUMON_F_POWER) && api->power) {
		if ((k = optional(api->power(h, &s->power_mw))) < 0)
			return mark_lost(g, d, "nvmlDeviceGetPowerUsage");
		s->present |= k ? GPUMON_F_POWER : 0;
	}
	if ((want & GPUMON_F_ENERGY) && api->energy) {
		unsigned long long mj = 0;
		if ((k = optional(api->energy(h, &mj))) < 0)
			return mark_lost(g, d, "nvmlDeviceGetTotalEnergyConsumption");
		s->energy_mj = mj;
		s->present |= k ? GPUMON_F_ENERGY : 0;
	}
	if ((want & GPUMON_F_CLOCK_SM) && api->clock) {
		if ((k = optional(api->clock(h, NVML_CLOCK_SM, &s->clock_sm_mhz))) < 0)
			return mark_lost(g, d, "nvmlDeviceGetClockInfo");
		s->present |= k ? GPUMON_F_CLOCK_SM : 0;
	}
	if ((want & GPUMON_F_CLOCK_MEM) && api->clock) {
		if ((k = optional(api->clock(h, NVML_CLOCK_MEM, &s->clock_mem_mhz))) < 0)
			return mark_lost(g, d, "nvmlDeviceGetClockInfo");
		s->present |= k ? GPUMON_F_CLOCK_MEM : 0;
	}
	return GPUMON_OK;
}

int gpumon_device_sample_read(gpumon *g, unsigned dev, unsigned want, gpumon_device_sample *out)
{
	struct device *d = NULL;
	if (!out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	if (want & ~(unsigned)GPUMON_F_ALL)
		return g ? gpumon__seterr(g, GPUMON_E_INVAL, "unknown field bits 0x%x", want & ~(unsigned)GPUMON_F_ALL)
			 : GPUMON_E_INVAL;
	int st = gpumon__device_get(g, dev, &d);
	if (st != GPUMON_OK)
		return st;
	out->t_ns = gpumon__now_ns();
	st = gpumon__nvml_memory(g, d, out);
	if (st != GPUMON_OK)
		return st;
	if (want & ~(unsigned)(GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED))
		st = read_optional(g, d, want, out);
	return st;
}

/* ---- processes ---------------------------------------------------------------------------- */

typedef nvml_ret (*proc_fn)(nvml_device, unsigned *, void *);

/* fetch_procs's answer when malloc fails (NVML's codes are never negative). */
enum { FETCH_OUT_OF_MEMORY = -1 };

/*
 * Calls one process-list function. The first call offers room for PROC_FIRST_GUESS entries, which
 * holds the whole list on nearly every GPU, so one driver call usually does (a separate sizing call
 * would double the cost); when the driver says INSUFFICIENT_SIZE it also says how many there are,
 * and we retry with headroom (the list can grow between calls). Sets *buf (malloc'd, entry size
 * esize) and *n. Returns the NVML code or FETCH_OUT_OF_MEMORY.
 */
#define PROC_FIRST_GUESS 64
static nvml_ret fetch_procs(proc_fn fn, nvml_device h, size_t esize, void **buf, unsigned *n)
{
	unsigned want = PROC_FIRST_GUESS;
	nvml_ret r = NVML_ERROR_INSUFFICIENT_SIZE;
	*buf = NULL;
	*n = 0;
	for (int attempt = 0; attempt < 8; attempt++) {
		if (want > (1u << 24))
			return NVML_ERROR_UNKNOWN; /* no GPU has sixteen million processes */
		unsigned cap = want + want / 2 + 16;
		void *p = realloc(*buf, (size_t)cap * esize);
		if (!p) {
			free(*buf);
			*buf = NULL;
			return FETCH_OUT_OF_MEMORY;
		}
		*buf = p;
		unsigned got = cap;
		r = fn(h, &got, *buf);
		if (r == NVML_SUCCESS) {
			*n = got <= cap ? got : cap;
			return r;
		}
		if (r != NVML_ERROR_INSUFFICIENT_SIZE)
			break;
		want = got > want ? got : want * 2;
	}
	free(*buf);
	*buf = NULL;
	return r;
}

/* Appends n driver entries to the list, flagged kind. */
static void append_procs(gpumon_process *list, size_t *len, const void *buf, unsigned n, int api, unsigned kind)
{
	for (unsigned i = 0; i < n; i++) {
		gpumon_process *p = &list[(*len)++];
		memset(p, 0, sizeof *p);
		unsigned long long used;
		if (api == PROC_API_V1) {
			const struct nvml_proc_v1 *e = (const struct nvml_proc_v1 *)buf + i;
			p->pid = e->pid;
			used = e->used;
		} else {
			const struct nvml_proc_v2 *e = (const struct nvml_proc_v2 *)buf + i;
			p->pid = e->pid;
			used = e->used;
			if (e->gpu_instance_id != NVML_NO_INSTANCE) {
				p->gpu_instance_id = e->gpu_instance_id;
				p->compute_instance_id = e->compute_instance_id;
				p->flags |= GPUMON_PROC_MIG;
			}
		}
		p->flags |= kind;
		if (used != NVML_VALUE_NOT_AVAILABLE) {
			p->used_bytes = used;
			p->flags |= GPUMON_PROC_USED_KNOWN;
		}
	}
}

static int by_pid(const void *a, const void *b)
{
	unsigned x = ((const gpumon_process *)a)->pid, y = ((const gpumon_process *)b)->pid;
	return (x > y) - (x < y);
}

static int by_used_desc(const void *a, const void *b)
{
	const gpumon_process *x = a, *y = b;
	int kx = !!(x->flags & GPUMON_PROC_USED_KNOWN), ky = !!(y->flags & GPUMON_PROC_USED_KNOWN);
	if (kx != ky)
		return ky - kx;
	if (x->used_bytes != y->used_bytes)
		return x->used_bytes < y->used_bytes ? 1 : -1;
	return by_pid(a, b);
}

/* Merges entries with the same pid (a process both computing and drawing): flags or'ed, the
 * larger memory figure kept (NVML reports the same per-process figure in both lists). */
static size_t merge_same_pid(gpumon_process *list, size_t n)
{
	if (n == 0)
		return 0;
	qsort(list, n, sizeof *list, by_pid);
	size_t w = 0;
	for (size_t i = 1; i < n; i++) {
		gpumon_process *a = &list[w], *b = &list[i];
		if (a->pid != b->pid) {
			list[++w] = *b;
			continue;
		}
		if ((b->flags & GPUMON_PROC_USED_KNOWN) &&
		    (!(a->flags & GPUMON_PROC_USED_KNOWN) || b->used_bytes > a->used_bytes))
			a->used_bytes = b->used_bytes;
		a->flags |= b->flags;
	}
	return w + 1;
}

static void fill_names(gpumon *g, gpumon_process *list, size_t n)
{
	uint64_t now = gpumon__now_ns();
	for (size_t i = 0; i < n; i++) {
		gpumon_process *p = &list[i];
		/* what /proc and NVML said of this very process a moment ago still holds: the start
		   time tells a pid reused by another process */
		uint64_t start;
		int known = p->pid && g->procs && gpumon__proc_start(p->pid, &start) == 0;
		if (known && gpumon__proc_cache_get(g->procs, p, start, now))
			continue;
		gpumon__procfs_fill(p);
		/* NVML's own name is what nvidia-smi prints; /proc's argv[0] is the fallback */
		if (g->nvml.process_name) {
			char name[sizeof p->name];
			if (g->nvml.process_name(p->pid, name, sizeof name) == NVML_SUCCESS && name[0]) {
				name[sizeof name - 1] = 0;
				memcpy(p->name, name, sizeof name);
				p->flags |= GPUMON_PROC_NAME_KNOWN;
			}
		}
		if (known)
			gpumon__proc_cache_put(g->procs, p, start, now);
	}
}

int gpumon_process_list(gpumon *g, unsigned dev, gpumon_process **out, size_t *count)
{
	struct device *d = NULL;
	if (!out || !count)
		return GPUMON_E_INVAL;
	*out = NULL;
	*count = 0;
	int st = gpumon__device_get(g, dev, &d);
	if (st != GPUMON_OK)
		return st;
	const struct nvml_api *api = &g->nvml;
	if (api->proc_api == PROC_API_NONE)
		return gpumon__seterr(g, GPUMON_E_NOT_SUPPORTED, "this driver has no process-list call");
	size_t esize = api->proc_api == PROC_API_V1 ? sizeof(struct nvml_proc_v1) : sizeof(struct nvml_proc_v2);

	static const char *const names[2] = {"nvmlDeviceGetComputeRunningProcesses",
					     "nvmlDeviceGetGraphicsRunningProcesses"};
	proc_fn fns[2] = {api->compute_procs, api->graphics_procs};
	void *bufs[2] = {NULL, NULL};
	unsigned ns[2] = {0, 0};
	int supported = 0;
	for (int k = 0; k < 2; k++) {
		if (!fns[k])
			continue;
		nvml_ret r = fetch_procs(fns[k], d->handle, esize, &bufs[k], &ns[k]);
		if (r == NVML_SUCCESS) {
			supported = 1;
		} else if (r == FETCH_OUT_OF_MEMORY) {
			st = gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory listing processes on GPU %u", dev);
		} else if (is_lost_code(r)) {
			st = mark_lost(g, d, names[k]);
		} else if (r != NVML_ERROR_NOT_SUPPORTED) {
			st = gpumon__seterr(g, gpumon__status_from_nvml(r), "%s on GPU %u: %s", names[k], dev,
					    gpumon__nvml_errstr(g, r));
		}
		if (st != GPUMON_OK)
			break;
	}
	if (st == GPUMON_OK && !supported)
		st = gpumon__seterr(g, GPUMON_E_NOT_SUPPORTED, "GPU %u does not list its processes", dev);

	gpumon_process *list = NULL;
	size_t total = (size_t)ns[0] + ns[1], n = 0;
	if (st == GPUMON_OK && total > 0) {
		list = calloc(total, sizeof *list);
		if (!list)
			st = gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory for %zu processes", total);
	}
	if (st == GPUMON_OK && total > 0) {
		append_procs(list, &n, bufs[0], ns[0], api->proc_api, GPUMON_PROC_COMPUTE);
		append_procs(list, &n, bufs[1], ns[1], api->proc_api, GPUMON_PROC_GRAPHICS);
		n = merge_same_pid(list, n);
		fill_names(g, list, n);
		qsort(list, n, sizeof *list, by_used_desc);
	}
	free(bufs[0]);
	free(bufs[1]);
	if (st != GPUMON_OK) {
		free(list);
		return st;
	}
	*out = n ? list : NULL;
	if (!n)
		free(list);
	*count = n;
	return GPUMON_OK;
}
