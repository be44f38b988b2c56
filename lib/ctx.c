/* SPDX-License-Identifier: MIT */
/* ctx.c — the gpumon handle: open (bounded in time: a hung driver cannot block it) and close,
 * per-thread error messages, status strings, and the device table with its look-up by index,
 * UUID or PCI bus id. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "internal.h"

#if defined(__LP64__)
/* the size the header promises: a field added or moved changes the stride of every caller's array */
_Static_assert(sizeof(gpumon_record) == GPUMON_RECORD_SIZE, "gpumon_record is not GPUMON_RECORD_SIZE bytes");
#endif

const char *gpumon_version(void)
{
	return GPUMON_VERSION;
}

const char *gpumon_strerror(int status)
{
	switch (status) {
	case GPUMON_OK: return "success";
	case GPUMON_E_INVAL: return "invalid argument";
	case GPUMON_E_NOMEM: return "out of memory";
	case GPUMON_E_NO_LIBRARY: return "NVIDIA driver library (libnvidia-ml.so.1) not found";
	case GPUMON_E_DRIVER: return "NVIDIA driver not available";
	case GPUMON_E_NOT_FOUND: return "not found";
	case GPUMON_E_LOST: return "GPU is lost";
	case GPUMON_E_NOT_SUPPORTED: return "not supported by this driver or GPU";
	case GPUMON_E_NO_PERMISSION: return "permission denied by the driver";
	case GPUMON_E_NVML: return "NVML call failed";
	case GPUMON_E_AMBIGUOUS: return "ambiguous device name";
	case GPUMON_E_IO: return "file error";
	case GPUMON_E_EXISTS: return "file exists";
	case GPUMON_E_TIMEOUT: return "the NVIDIA driver did not answer in time";
	default: return "unknown status";
	}
}

void gpumon_free(void *p)
{
	free(p);
}

int gpumon__config_take(void *dst, size_t have, const void *src)
{
	memset(dst, 0, have);
	if (src) {
		unsigned size;
		memcpy(&size, src, sizeof size);
		if (size < sizeof(unsigned) || size > have)
			return GPUMON_E_INVAL;
		memcpy(dst, src, size);
	}
	memcpy(dst, &(unsigned){(unsigned)have}, sizeof(unsigned));
	return GPUMON_OK;
}

uint64_t gpumon__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The calling thread's message buffer, created on first use; NULL when out of memory. */
static struct errbuf *errbuf_get(gpumon *g, int create)
{
	if (!g->err_key_ok)
		return &g->open_err;
	struct errbuf *b = pthread_getspecific(g->err_key);
	if (b || !create)
		return b;
	b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	if (pthread_setspecific(g->err_key, b) != 0) {
		free(b);
		return NULL;
	}
	pthread_mutex_lock(&g->err_lock);
	b->next = g->err_all;
	g->err_all = b;
	pthread_mutex_unlock(&g->err_lock);
	return b;
}

/* Counts a failed NVML call when msg starts with the function's name ("nvmlDeviceGet... on GPU 1:
 * ..."), which is how every NVML failure is worded; other messages are not NVML failures. */
static void count_nvml_error(gpumon *g, const char *msg)
{
	size_t n = 0;
	if (strncmp(msg, "nvml", 4) != 0)
		return;
	while (n < sizeof g->nvml_errors[0].function - 1 &&
	       ((msg[n] >= 'a' && msg[n] <= 'z') || (msg[n] >= 'A' && msg[n] <= 'Z') ||
		(msg[n] >= '0' && msg[n] <= '9') || msg[n] == '_'))
		n++;
	pthread_mutex_lock(&g->err_lock);
	unsigned i = 0;
	while (i < g->n_nvml_errors && (strncmp(g->nvml_errors[i].function, msg, n) != 0 ||
					g->nvml_errors[i].function[n] != 0))
		i++;
	if (i == g->n_nvml_errors && i < GPUMON_NVML_ERROR_FUNCTIONS) {
		memcpy(g->nvml_errors[i].function, msg, n);
		g->nvml_errors[i].function[n] = 0;
		g->n_nvml_errors++;
	}
	if (i < g->n_nvml_errors)
		g->nvml_errors[i].count++;
	pthread_mutex_unlock(&g->err_lock);
}

int gpumon__seterr(gpumon *g, int status, const char *fmt, ...)
{
	struct errbuf *b = errbuf_get(g, 1);
	char local[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b ? b->msg : local, b ? sizeof b->msg : sizeof local, fmt, ap);
	va_end(ap);
	count_nvml_error(g, b ? b->msg : local);
	return status;
}

size_t gpumon_nvml_errors_get(gpumon *g, gpumon_nvml_error_count *out, size_t cap)
{
	if (!g)
		return 0;
	pthread_mutex_lock(&g->err_lock);
	size_t n = g->n_nvml_errors;
	for (size_t i = 0; out && i < n && i < cap; i++) {
		memset(&out[i], 0, sizeof out[i]);
		snprintf(out[i].function, sizeof out[i].function, "%s", g->nvml_errors[i].function);
		out[i].count = g->nvml_errors[i].count;
	}
	pthread_mutex_unlock(&g->err_lock);
	return n;
}

const char *gpumon_errmsg(gpumon *g)
{
	if (!g)
		return "out of memory";
	struct errbuf *b = errbuf_get(g, 0);
	return b ? b->msg : "";
}

int gpumon__status_from_nvml(nvml_ret r)
{
	switch (r) {
	case NVML_SUCCESS: return GPUMON_OK;
	case NVML_ERROR_INVALID_ARGUMENT: return GPUMON_E_INVAL;
	case NVML_ERROR_NOT_SUPPORTED:
	case NVML_ERROR_FUNCTION_NOT_FOUND: return GPUMON_E_NOT_SUPPORTED;
	case NVML_ERROR_NO_PERMISSION: return GPUMON_E_NO_PERMISSION;
	case NVML_ERROR_NOT_FOUND:
	case NVML_ERROR_GPU_NOT_FOUND: return GPUMON_E_NOT_FOUND;
	case NVML_ERROR_GPU_IS_LOST:
	case NVML_ERROR_RESET_REQUIRED: return GPUMON_E_LOST;
	case NVML_ERROR_UNINITIALIZED:
	case NVML_ERROR_DRIVER_NOT_LOADED:
	case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return GPUMON_E_DRIVER;
	case NVML_ERROR_LIBRARY_NOT_FOUND: return GPUMON_E_NO_LIBRARY;
	default: return GPUMON_E_NVML;
	}
}

/* ---- opening under the driver deadline ------------------------------------------------------------ */

/* NVML is loaded and the devices listed by a thread of their own, into a scratch handle (w) that
 * only that thread touches until it is done: when the driver does not answer within
 * GPUMON__DRIVER_DEADLINE_NS the caller gives up and never touches w again, and the thread, if its
 * call ever returns, shuts NVML down, unloads it and frees w and itself. It is detached: exit()
 * does not wait for it, so the process can still end (a call stuck inside the kernel may delay
 * that, which no thread of ours can change). */
struct opener {
	pthread_mutex_t lock;
	pthread_cond_t done_cv; /* CLOCK_MONOTONIC */
	int done;               /* the thread has finished (under lock) */
	int abandoned;          /* the caller gave up: the thread frees (under lock) */
	int status;             /* the thread's result, once done */
	gpumon *w;
};

static void free_handle(gpumon *g);

/* The scratch handle: its messages go to w->open_err (no thread key), its counts to its table. */
static gpumon *scratch_new(void)
{
	gpumon *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	pthread_mutex_init(&w->err_lock, NULL);
	pthread_mutex_init(&w->hold_lock, NULL);
	return w;
}

static void opener_free(struct opener *o)
{
	pthread_mutex_destroy(&o->lock);
	pthread_cond_destroy(&o->done_cv);
	free(o);
}

static int open_nvml(gpumon *w)
{
	int st = gpumon__nvml_load(w);
	return st == GPUMON_OK ? gpumon__nvml_enumerate(w) : st;
}

static void *opener_main(void *arg)
{
	struct opener *o = arg;
	pthread_setname_np(pthread_self(), "gpumon-open");
	int st = open_nvml(o->w);
	pthread_mutex_lock(&o->lock);
	o->status = st;
	o->done = 1;
	int abandoned = o->abandoned;
	pthread_cond_signal(&o->done_cv);
	pthread_mutex_unlock(&o->lock);
	if (abandoned) { /* nobody waits: what was opened is closed here */
		free_handle(o->w);
		opener_free(o);
	}
	return NULL;
}

/* Moves what the scratch handle opened into g (the caller's thread), its message included. */
static int adopt(gpumon *g, gpumon *w, int st)
{
	g->nvml = w->nvml;
	g->initialised = w->initialised;
	memcpy(g->path, w->path, sizeof g->path);
	memcpy(g->driver_version, w->driver_version, sizeof g->driver_version);
	memcpy(g->nvml_version, w->nvml_version, sizeof g->nvml_version);
	g->dev = w->dev;
	g->ndev = w->ndev;
	g->ngpu = w->ngpu;
	memcpy(g->nvml_errors, w->nvml_errors, sizeof g->nvml_errors);
	g->n_nvml_errors = w->n_nvml_errors;
	if (st != GPUMON_OK) {
		struct errbuf *b = errbuf_get(g, 1); /* counted once already, in w */
		snprintf(b ? b->msg : g->open_err.msg, sizeof g->open_err.msg, "%s", w->open_err.msg);
	}
	pthread_mutex_destroy(&w->err_lock);
	pthread_mutex_destroy(&w->hold_lock);
	free(w);
	return st;
}

/* Runs open_nvml on a scratch handle in a thread and waits for it up to the deadline; returns its
 * status, GPUMON_E_TIMEOUT with a message naming the call that did not return, or GPUMON_E_NOMEM. */
static int open_bounded(gpumon *g)
{
	struct opener *o = calloc(1, sizeof *o);
	gpumon *w = scratch_new();
	if (!o || !w) {
		free(o);
		free(w);
		return gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory for opening NVML");
	}
	o->w = w;
	pthread_mutex_init(&o->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->done_cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_t t;
	if (pthread_create(&t, NULL, opener_main, o) != 0) { /* no thread to spare: open here, unbounded */
		opener_free(o);
		return adopt(g, w, open_nvml(w));
	}
	uint64_t deadline = gpumon__now_ns() + GPUMON__DRIVER_DEADLINE_NS;
	struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
	pthread_mutex_lock(&o->lock);
	while (!o->done && pthread_cond_timedwait(&o->done_cv, &o->lock, &ts) != ETIMEDOUT)
		;
	if (!o->done) {
		const char *call = atomic_load(&w->calling);
		o->abandoned = 1; /* from here on the thread owns o and w */
		pthread_mutex_unlock(&o->lock);
		pthread_detach(t);
		return gpumon__seterr(g, GPUMON_E_TIMEOUT, "the NVIDIA driver did not answer within %u s (%s)",
				      (unsigned)(GPUMON__DRIVER_DEADLINE_NS / 1000000000u), call ? call : "dlopen");
	}
	int st = o->status;
	pthread_mutex_unlock(&o->lock);
	pthread_join(t, NULL);
	opener_free(o);
	return adopt(g, w, st);
}

int gpumon_create(gpumon **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	gpumon *g = calloc(1, sizeof *g);
	*out = g;
	if (!g)
		return GPUMON_E_NOMEM;
	pthread_mutex_init(&g->err_lock, NULL);
	pthread_mutex_init(&g->hold_lock, NULL);
	g->procs = gpumon__proc_cache_new(); /* none when out of memory: /proc is then read each time */
	g->open_status = GPUMON_E_DRIVER;
	int st = GPUMON_OK;
	if (pthread_key_create(&g->err_key, NULL) != 0)
		st = gpumon__seterr(g, GPUMON_E_NOMEM, "cannot create a thread key");
	else
		g->err_key_ok = 1;
	if (st == GPUMON_OK)
		st = open_bounded(g);
	g->open_status = st;
	return st;
}

static void free_handle(gpumon *g)
{
	gpumon__nvml_unload(g);
	free(g->dev);
	if (g->err_key_ok)
		pthread_key_delete(g->err_key);
	for (struct errbuf *b = g->err_all, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	pthread_mutex_destroy(&g->err_lock);
	pthread_mutex_destroy(&g->hold_lock);
	gpumon__proc_cache_free(g->procs);
	free(g);
}

void gpumon__hold(gpumon *g)
{
	pthread_mutex_lock(&g->hold_lock);
	g->holds++;
	pthread_mutex_unlock(&g->hold_lock);
}

void gpumon__release(gpumon *g)
{
	pthread_mutex_lock(&g->hold_lock);
	int last = --g->holds == 0 && g->closing;
	pthread_mutex_unlock(&g->hold_lock);
	if (last)
		free_handle(g);
}

/* A sampler's thread left in a call that never returns keeps the handle: NVML is not shut down
 * (nor unloaded) under it, and it finds the handle when its call returns. */
void gpumon_destroy(gpumon *g)
{
	if (!g)
		return;
	pthread_mutex_lock(&g->hold_lock);
	g->closing = 1;
	int last = g->holds == 0;
	pthread_mutex_unlock(&g->hold_lock);
	if (last)
		free_handle(g);
}

const char *gpumon_nvml_path(const gpumon *g)
{
	return g ? g->path : "";
}

static int copy_version(gpumon *g, const char *v, const char *what, char *buf, size_t len)
{
	if (!g || !buf || len == 0)
		return GPUMON_E_INVAL;
	if (g->open_status != GPUMON_OK)
		return GPUMON_E_DRIVER;
	if (!v[0])
		return gpumon__seterr(g, GPUMON_E_NOT_SUPPORTED, "the driver does not report its %s", what);
	snprintf(buf, len, "%s", v);
	return GPUMON_OK;
}

int gpumon_driver_version(gpumon *g, char *buf, size_t len)
{
	return copy_version(g, g ? g->driver_version : "", "driver version", buf, len);
}

int gpumon_nvml_version(gpumon *g, char *buf, size_t len)
{
	return copy_version(g, g ? g->nvml_version : "", "NVML version", buf, len);
}

unsigned gpumon_device_count(const gpumon *g)
{
	return g && g->open_status == GPUMON_OK ? g->ndev : 0;
}

int gpumon_device_info_get(const gpumon *g, unsigned dev, gpumon_device_info *out)
{
	if (!g || !out)
		return GPUMON_E_INVAL;
	if (dev >= gpumon_device_count(g))
		return GPUMON_E_NOT_FOUND;
	*out = g->dev[dev].info;
	out->lost = atomic_load(&g->dev[dev].lost);
	return GPUMON_OK;
}

/* Normalises a PCI bus id to "DDDDDDDD:BB:DD.F" in lower case; 0 when s is not one. */
static int pci_normalise(const char *s, size_t n, char out[32])
{
	unsigned long dom = 0;
	unsigned bus, devn, fn;
	char tail;
	char tmp[64];
	if (n == 0 || n >= sizeof tmp)
		return 0;
	memcpy(tmp, s, n);
	tmp[n] = 0;
	if (sscanf(tmp, "%lx:%x:%x.%x%c", &dom, &bus, &devn, &fn, &tail) == 4) {
		/* domain given */
	} else if (sscanf(tmp, "%x:%x.%x%c", &bus, &devn, &fn, &tail) == 3) {
		dom = 0;
	} else {
		return 0;
	}
	if (dom > 0xffffffffUL || bus > 0xff || devn > 0x1f || fn > 7)
		return 0;
	snprintf(out, 32, "%08lx:%02x:%02x.%x", dom, bus, devn, fn);
	return 1;
}

/* Compares a spec against a device's UUID: whole, or a prefix of >= 8 characters past "GPU-" (a
 * GPU's) or "MIG-" (a MIG device's); the prefix may be given with or without those 4 letters. */
static int uuid_matches(const char *uuid, const char *spec, size_t n, int *exact)
{
	*exact = strlen(uuid) == n && strncasecmp(uuid, spec, n) == 0;
	if (*exact)
		return 1;
	int gpu = strncasecmp(uuid, "GPU-", 4) == 0, mig = strncasecmp(uuid, "MIG-", 4) == 0;
	size_t skip = 0;
	if (strncasecmp(spec, "GPU-", 4) == 0 || strncasecmp(spec, "MIG-", 4) == 0) {
		if (strncasecmp(spec, uuid, 4) != 0)
			return 0; /* a GPU- prefix never names a MIG device, nor the reverse */
		skip = 4;
	}
	if (n - skip < 8 || (!gpu && !mig))
		return 0;
	return strncasecmp(uuid + 4, spec + skip, n - skip) == 0;
}

int gpumon_device_find(gpumon *g, const char *spec, unsigned *dev)
{
	if (!g || !spec || !dev)
		return GPUMON_E_INVAL;
	while (isspace((unsigned char)*spec))
		spec++;
	size_t n = strlen(spec);
	while (n > 0 && isspace((unsigned char)spec[n - 1]))
		n--;
	if (n == 0)
		return gpumon__seterr(g, GPUMON_E_INVAL, "empty GPU name");
	unsigned count = gpumon_device_count(g);

	size_t digits = strspn(spec, "0123456789");
	if (digits == n) {
		/* indexes are the GPUs' (NVML's), as nvidia-smi's -i: MIG devices have none */
		unsigned ngpu = count ? g->ngpu : 0;
		unsigned long idx = n > 9 ? (unsigned long)-1 : strtoul(spec, NULL, 10);
		if (idx >= ngpu)
			return gpumon__seterr(g, GPUMON_E_NOT_FOUND, "no GPU with index %.*s (%u GPU%s)",
					      (int)n, spec, ngpu, ngpu == 1 ? "" : "s");
		*dev = (unsigned)idx;
		return GPUMON_OK;
	}

	char want[32];
	int is_pci = pci_normalise(spec, n, want);
	unsigned found = 0, hits = 0;
	for (unsigned i = 0; i < count; i++) {
		const gpumon_device_info *d = &g->dev[i].info;
		int exact = 0;
		int hit = 0;
		if (is_pci && d->mig)
			continue; /* a MIG device shares its GPU's bus id: the id names the GPU */
		if (is_pci && (d->present & GPUMON_INFO_PCI_BUS_ID)) {
			char have[32];
			hit = pci_normalise(d->pci_bus_id, strlen(d->pci_bus_id), have) && strcmp(have, want) == 0;
			exact = hit;
		} else if (d->present & GPUMON_INFO_UUID) {
			hit = uuid_matches(d->uuid, spec, n, &exact);
		}
		if (exact) {
			*dev = i;
			return GPUMON_OK;
		}
		if (hit) {
			found = i;
			hits++;
		}
	}
	if (hits == 1) {
		*dev = found;
		return GPUMON_OK;
	}
	if (hits > 1)
		return gpumon__seterr(g, GPUMON_E_AMBIGUOUS, "\"%.*s\" matches %u GPUs; give more of the UUID",
				      (int)n, spec, hits);
	return gpumon__seterr(g, GPUMON_E_NOT_FOUND, "no GPU matches \"%.*s\" (not an index, UUID or PCI bus id of this machine)",
			      (int)n, spec);
}
