/* SPDX-License-Identifier: MIT */
/* bench_sample.c — what one libgpumon sample costs next to the raw NVML call it wraps: per-call
 * time of nvmlDeviceGetMemoryInfo(_v2) and nvmlDeviceGetComputeRunningProcesses_v3 called
 * directly, against gpumon_device_sample_read() and gpumon_process_list(). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

/*
 * How the time is taken. Every call is timed on its own with a pair of clock_gettime
 * (CLOCK_MONOTONIC) reads, which is what gives a median, a p99 and a minimum and not only a mean.
 * A pair of reads costs some tens of ns (the vDSO clock); that overhead is measured as the
 * variant "timer" and printed, and it is the same constant for every variant, small next to the
 * microseconds of a driver call. It is not subtracted.
 *
 * Drift (clock boost, other load on the machine, the driver's own caches) must hit every variant
 * alike, so the variants are interleaved: each round runs a chunk of calls (default 100) of every
 * variant in turn, and the starting variant rotates from one round to the next so no variant is
 * always first after another one. The warm-up is interleaved the same way and not recorded.
 */

/* ---- NVML's own ABI, declared here (never nvml.h); see REFERENCE.md ---- */
typedef int nvml_ret;
typedef void *nvml_device;

#define NVML_OK 0

struct raw_memory_v1 {
	unsigned long long total, free, used;
};

struct raw_memory_v2 {
	unsigned version; /* sizeof(struct) | 2 << 24 == 0x02000028 */
	unsigned long long total, reserved, free, used;
};
#define RAW_MEMORY_V2_VERSION ((unsigned)(sizeof(struct raw_memory_v2) | (2u << 24)))

struct raw_process_v3 {
	unsigned pid;
	unsigned long long used;
	unsigned gpu_instance_id, compute_instance_id;
};

struct raw_nvml {
	void *lib;
	const char *path;
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	nvml_ret (*handle_by_index)(unsigned, nvml_device *);
	nvml_ret (*memory_v1)(nvml_device, struct raw_memory_v1 *);
	nvml_ret (*memory_v2)(nvml_device, struct raw_memory_v2 *);
	nvml_ret (*procs_v3)(nvml_device, unsigned *, struct raw_process_v3 *);
	nvml_device dev;
	int initialised;
};

#define RAW_PROC_CAP 256

/* Everything a timed call may touch, set up before the timing starts. */
struct bench {
	struct raw_nvml nvml;
	gpumon *g;
	unsigned dev;
	struct raw_process_v3 procbuf[RAW_PROC_CAP];
	gpumon_device_sample sample;
};

/* ---- the variants ---- */
typedef int (*call_fn)(struct bench *b);

static int call_timer(struct bench *b)
{
	(void)b;
	return 0;
}

static int call_raw_v2(struct bench *b)
{
	struct raw_memory_v2 m;
	m.version = RAW_MEMORY_V2_VERSION;
	return b->nvml.memory_v2(b->nvml.dev, &m);
}

static int call_raw_v1(struct bench *b)
{
	struct raw_memory_v1 m;
	return b->nvml.memory_v1(b->nvml.dev, &m);
}

static int call_gpumon_memory(struct bench *b)
{
	return gpumon_device_sample_read(b->g, b->dev, GPUMON_F_MEMORY, &b->sample);
}

static int call_gpumon_all(struct bench *b)
{
	return gpumon_device_sample_read(b->g, b->dev, GPUMON_F_ALL, &b->sample);
}

/* One optional field group on top of the memory call: what each field adds to a sample. */
#define CALL_FIELD(fname, bits)                                                                       \
	static int call_gpumon_##fname(struct bench *b)                                               \
	{                                                                                             \
		return gpumon_device_sample_read(b->g, b->dev, GPUMON_F_MEMORY | (bits), &b->sample); \
	}
CALL_FIELD(util, GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY)
CALL_FIELD(temp, GPUMON_F_TEMPERATURE)
CALL_FIELD(power, GPUMON_F_POWER)
CALL_FIELD(energy, GPUMON_F_ENERGY)
CALL_FIELD(clocks, GPUMON_F_CLOCK_SM | GPUMON_F_CLOCK_MEM)

/* One call into a buffer already big enough: the least a caller of the raw API can pay. */
static int call_raw_procs_v3(struct bench *b)
{
	unsigned n = RAW_PROC_CAP;
	return b->nvml.procs_v3(b->nvml.dev, &n, b->procbuf);
}

/* The list and its free: both are what a caller of gpumon_process_list() pays per sample. */
static int call_gpumon_procs(struct bench *b)
{
	gpumon_process *list = NULL;
	size_t n = 0;
	int st = gpumon_process_list(b->g, b->dev, &list, &n);
	gpumon_free(list);
	return st;
}

enum { GROUP_TIMER = 1, GROUP_MEM = 2, GROUP_PROC = 4, GROUP_FIELDS = 8 };

struct variant {
	const char *name;
	const char *what;
	call_fn fn;
	unsigned group;
	int enabled;
	const char *skip_reason;
	uint64_t *ns;    /* per-call times, n of them */
	size_t n;
	unsigned long errors;
	int first_error;
	/* statistics */
	double mean;
	uint64_t median, p99, min, max;
};

static struct variant variants[] = {
	{.name = "timer", .group = GROUP_TIMER, .fn = call_timer,
	 .what = "clock_gettime pair alone (timing overhead)"},
	{.name = "raw_v2", .group = GROUP_MEM, .fn = call_raw_v2,
	 .what = "nvmlDeviceGetMemoryInfo_v2 (direct)"},
	{.name = "raw_v1", .group = GROUP_MEM, .fn = call_raw_v1,
	 .what = "nvmlDeviceGetMemoryInfo (direct)"},
	{.name = "gpumon_memory", .group = GROUP_MEM, .fn = call_gpumon_memory,
	 .what = "gpumon_device_sample_read(F_MEMORY)"},
	{.name = "gpumon_all", .group = GROUP_MEM, .fn = call_gpumon_all,
	 .what = "gpumon_device_sample_read(F_ALL)"},
	{.name = "mem+util", .group = GROUP_FIELDS, .fn = call_gpumon_util,
	 .what = "sample_read(F_MEMORY | utilization)"},
	{.name = "mem+temp", .group = GROUP_FIELDS, .fn = call_gpumon_temp,
	 .what = "sample_read(F_MEMORY | temperature)"},
	{.name = "mem+power", .group = GROUP_FIELDS, .fn = call_gpumon_power,
	 .what = "sample_read(F_MEMORY | power)"},
	{.name = "mem+energy", .group = GROUP_FIELDS, .fn = call_gpumon_energy,
	 .what = "sample_read(F_MEMORY | energy)"},
	{.name = "mem+clocks", .group = GROUP_FIELDS, .fn = call_gpumon_clocks,
	 .what = "sample_read(F_MEMORY | SM and memory clocks)"},
	{.name = "raw_procs_v3", .group = GROUP_PROC, .fn = call_raw_procs_v3,
	 .what = "nvmlDeviceGetComputeRunningProcesses_v3 (direct)"},
	{.name = "gpumon_procs", .group = GROUP_PROC, .fn = call_gpumon_procs,
	 .what = "gpumon_process_list + _free"},
};
#define NVARIANTS (sizeof variants / sizeof variants[0])

static struct variant *variant_named(const char *name)
{
	for (size_t i = 0; i < NVARIANTS; i++)
		if (strcmp(variants[i].name, name) == 0)
			return &variants[i];
	return NULL;
}

/* ---- raw NVML loading ---- */

/* dlsym into a function pointer without the object/function pointer cast. */
static int sym(void *lib, const char *name, void *fnptr)
{
	void *p = dlsym(lib, name);
	memcpy(fnptr, &p, sizeof p);
	return p != NULL;
}

static int raw_open(struct raw_nvml *n, unsigned dev, char *err, size_t errlen)
{
	const char *env = getenv("GPUMON_NVML_LIBRARY");
	n->path = env && *env ? env : "libnvidia-ml.so.1";
	n->lib = dlopen(n->path, RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		snprintf(err, errlen, "dlopen %s: %s", n->path, dlerror());
		return -1;
	}
	if (!sym(n->lib, "nvmlInit_v2", &n->init) && !sym(n->lib, "nvmlInit", &n->init)) {
		snprintf(err, errlen, "%s has no nvmlInit", n->path);
		return -1;
	}
	sym(n->lib, "nvmlShutdown", &n->shutdown);
	if (!sym(n->lib, "nvmlDeviceGetHandleByIndex_v2", &n->handle_by_index) &&
	    !sym(n->lib, "nvmlDeviceGetHandleByIndex", &n->handle_by_index)) {
		snprintf(err, errlen, "%s has no nvmlDeviceGetHandleByIndex", n->path);
		return -1;
	}
	sym(n->lib, "nvmlDeviceGetMemoryInfo", &n->memory_v1);
	sym(n->lib, "nvmlDeviceGetMemoryInfo_v2", &n->memory_v2);
	sym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3", &n->procs_v3);
	nvml_ret r = n->init();
	if (r != NVML_OK) {
		snprintf(err, errlen, "nvmlInit: NVML error %d", r);
		return -1;
	}
	n->initialised = 1;
	r = n->handle_by_index(dev, &n->dev);
	if (r != NVML_OK) {
		snprintf(err, errlen, "nvmlDeviceGetHandleByIndex(%u): NVML error %d", dev, r);
		return -1;
	}
	return 0;
}

static void raw_close(struct raw_nvml *n)
{
	if (n->initialised && n->shutdown)
		n->shutdown();
	if (n->lib)
		dlclose(n->lib);
}

/* ---- timing ---- */

static inline uint64_t ts_ns(const struct timespec *t)
{
	return (uint64_t)t->tv_sec * 1000000000u + (uint64_t)t->tv_nsec;
}

/* Runs `calls` calls of v; records their times when rec is set. */
static void run_chunk(struct bench *b, struct variant *v, size_t calls, int rec)
{
	for (size_t i = 0; i < calls; i++) {
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int st = v->fn(b);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (!rec)
			continue;
		v->ns[v->n++] = ts_ns(&t1) - ts_ns(&t0);
		if (st != 0 && v->errors++ == 0)
			v->first_error = st;
	}
}

/* Interleaved rounds until every enabled variant has done `per_variant` calls. */
static void run_rounds(struct bench *b, size_t per_variant, size_t chunk, int rec)
{
	struct variant *on[NVARIANTS];
	size_t non = 0;
	for (size_t i = 0; i < NVARIANTS; i++)
		if (variants[i].enabled)
			on[non++] = &variants[i];
	if (non == 0)
		return;
	size_t done = 0;
	for (size_t round = 0; done < per_variant; round++) {
		size_t calls = per_variant - done < chunk ? per_variant - done : chunk;
		for (size_t k = 0; k < non; k++)
			run_chunk(b, on[(round + k) % non], calls, rec);
		done += calls;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void compute_stats(struct variant *v)
{
	if (v->n == 0)
		return;
	double sum = 0;
	for (size_t i = 0; i < v->n; i++)
		sum += (double)v->ns[i];
	v->mean = sum / (double)v->n;
	qsort(v->ns, v->n, sizeof v->ns[0], cmp_u64);
	v->min = v->ns[0];
	v->max = v->ns[v->n - 1];
	v->median = v->n % 2 ? v->ns[v->n / 2] : (v->ns[v->n / 2 - 1] + v->ns[v->n / 2]) / 2;
	size_t k = (size_t)((double)v->n * 0.99 + 0.999999); /* nearest rank, ceil(0.99 n) */
	if (k < 1)
		k = 1;
	if (k > v->n)
		k = v->n;
	v->p99 = v->ns[k - 1];
}

/* ---- output ---- */

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static double ratio(const char *num, const char *den, int use_median)
{
	struct variant *a = variant_named(num), *b = variant_named(den);
	if (!a || !b || !a->n || !b->n)
		return -1;
	double x = use_median ? (double)a->median : a->mean;
	double y = use_median ? (double)b->median : b->mean;
	return y > 0 ? x / y : -1;
}

struct ratio_def {
	const char *key, *num, *den;
};

static const struct ratio_def ratio_defs[] = {
	{"gpumon_memory_over_raw_v2", "gpumon_memory", "raw_v2"},
	{"gpumon_memory_over_raw_v1", "gpumon_memory", "raw_v1"},
	{"gpumon_all_over_raw_v2", "gpumon_all", "raw_v2"},
	{"gpumon_procs_over_raw_procs_v3", "gpumon_procs", "raw_procs_v3"},
};

static void print_table(FILE *f)
{
	fprintf(f, "%-14s %-50s %10s %10s %10s %10s %10s %8s\n", "variant", "what", "mean_ns",
		"median_ns", "p99_ns", "min_ns", "max_ns", "errors");
	for (size_t i = 0; i < NVARIANTS; i++) {
		struct variant *v = &variants[i];
		if (!v->enabled) {
			if (v->skip_reason)
				fprintf(f, "%-14s %-50s skipped: %s\n", v->name, v->what, v->skip_reason);
			continue;
		}
		fprintf(f, "%-14s %-50s %10.0f %10" PRIu64 " %10" PRIu64 " %10" PRIu64 " %10" PRIu64
			   " %8lu\n",
			v->name, v->what, v->mean, v->median, v->p99, v->min, v->max, v->errors);
		if (v->errors)
			fprintf(f, "%-14s   first error: %d (%s)\n", "", v->first_error,
				v->fn == call_raw_v2 || v->fn == call_raw_v1 || v->fn == call_raw_procs_v3
					? "NVML return code"
					: gpumon_strerror(v->first_error));
	}
	for (size_t i = 0; i < sizeof ratio_defs / sizeof ratio_defs[0]; i++) {
		double m = ratio(ratio_defs[i].num, ratio_defs[i].den, 1);
		double a = ratio(ratio_defs[i].num, ratio_defs[i].den, 0);
		if (m >= 0)
			fprintf(f, "ratio %-32s median %.3f  mean %.3f\n", ratio_defs[i].key, m, a);
	}
}

static void print_json(FILE *f, const char *label, unsigned dev, const char *devname,
		       const char *nvml_path, size_t n, size_t warmup, size_t chunk, unsigned memory_api,
		       long nprocs)
{
	fputs("{\"bench\":\"gpumon_bench_sample\",\"label\":", f);
	json_string(f, label);
	fprintf(f, ",\"device_index\":%u,\"device_name\":", dev);
	json_string(f, devname);
	fputs(",\"nvml_library\":", f);
	json_string(f, nvml_path);
	fprintf(f, ",\"calls_per_variant\":%zu,\"warmup\":%zu,\"chunk\":%zu,\"gpumon_memory_api\":%u,"
		   "\"processes_listed\":%ld,\"results\":{",
		n, warmup, chunk, memory_api, nprocs);
	int first = 1;
	for (size_t i = 0; i < NVARIANTS; i++) {
		struct variant *v = &variants[i];
		if (!v->enabled)
			continue;
		fprintf(f, "%s\"%s\":{\"what\":", first ? "" : ",", v->name);
		json_string(f, v->what);
		fprintf(f, ",\"n\":%zu,\"mean_ns\":%.1f,\"median_ns\":%" PRIu64 ",\"p99_ns\":%" PRIu64
			   ",\"min_ns\":%" PRIu64 ",\"max_ns\":%" PRIu64 ",\"errors\":%lu}",
			v->n, v->mean, v->median, v->p99, v->min, v->max, v->errors);
		first = 0;
	}
	fputs("},\"skipped\":{", f);
	first = 1;
	for (size_t i = 0; i < NVARIANTS; i++) {
		struct variant *v = &variants[i];
		if (v->enabled || !v->skip_reason)
			continue;
		fprintf(f, "%s\"%s\":", first ? "" : ",", v->name);
		json_string(f, v->skip_reason);
		first = 0;
	}
	fputs("},\"ratios_median\":{", f);
	first = 1;
	for (size_t i = 0; i < sizeof ratio_defs / sizeof ratio_defs[0]; i++) {
		double m = ratio(ratio_defs[i].num, ratio_defs[i].den, 1);
		if (m < 0)
			continue;
		fprintf(f, "%s\"%s\":%.4f", first ? "" : ",", ratio_defs[i].key, m);
		first = 0;
	}
	fputs("},\"ratios_mean\":{", f);
	first = 1;
	for (size_t i = 0; i < sizeof ratio_defs / sizeof ratio_defs[0]; i++) {
		double m = ratio(ratio_defs[i].num, ratio_defs[i].den, 0);
		if (m < 0)
			continue;
		fprintf(f, "%s\"%s\":%.4f", first ? "" : ",", ratio_defs[i].key, m);
		first = 0;
	}
	fputs("}}\n", f);
}

static void usage(FILE *f)
{
	fputs("usage: gpumon_bench_sample [-n CALLS] [-w WARMUP] [-b CHUNK] [-d DEV] [-g GROUPS]\n"
	      "                           [-l LABEL] [-j JSONFILE]\n"
	      "  -n CALLS   timed calls per variant (default 200000)\n"
	      "  -w WARMUP  untimed calls per variant first (default 1000)\n"
	      "  -b CHUNK   calls of one variant before switching to the next (default 100)\n"
	      "  -d DEV     GPU index (default 0)\n"
	      "  -g GROUPS  comma list of mem, proc, fields (default all three)\n"
	      "  -l LABEL   free text copied into the JSON (e.g. \"idle\")\n"
	      "  -j FILE    also write the JSON line to FILE\n"
	      "GPUMON_NVML_LIBRARY names the NVML library for both gpumon and the direct calls.\n",
	      f);
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v == 0)
		return -1;
	*out = (size_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = 200000, warmup = 1000, chunk = 100;
	unsigned dev = 0;
	unsigned groups = GROUP_MEM | GROUP_PROC | GROUP_FIELDS;
	const char *label = "", *json_path = NULL;
	int c;
	while ((c = getopt(argc, argv, "n:w:b:d:g:l:j:h")) != -1) {
		size_t v;
		switch (c) {
		case 'n':
			if (parse_size(optarg, &n))
				goto bad;
			break;
		case 'w':
			if (strcmp(optarg, "0") == 0)
				warmup = 0;
			else if (parse_size(optarg, &warmup))
				goto bad;
			break;
		case 'b':
			if (parse_size(optarg, &chunk))
				goto bad;
			break;
		case 'd':
			if (strcmp(optarg, "0") == 0)
				v = 0;
			else if (parse_size(optarg, &v))
				goto bad;
			dev = (unsigned)v;
			break;
		case 'g':
			groups = 0;
			if (strstr(optarg, "mem"))
				groups |= GROUP_MEM;
			if (strstr(optarg, "proc"))
				groups |= GROUP_PROC;
			if (strstr(optarg, "field"))
				groups |= GROUP_FIELDS;
			if (!groups)
				goto bad;
			break;
		case 'l':
			label = optarg;
			break;
		case 'j':
			json_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc)
		goto bad;

	static struct bench b;
	b.dev = dev;
	int st = gpumon_create(&b.g);
	if (st != 0) {
		fprintf(stderr, "gpumon_bench_sample: gpumon_create: %s (%s)\n", gpumon_strerror(st),
			b.g ? gpumon_errmsg(b.g) : "");
		gpumon_destroy(b.g);
		return 1;
	}
	gpumon_device_info info;
	st = gpumon_device_info_get(b.g, dev, &info);
	if (st != 0) {
		fprintf(stderr, "gpumon_bench_sample: no GPU %u: %s\n", dev, gpumon_strerror(st));
		gpumon_destroy(b.g);
		return 1;
	}
	char err[512];
	if (raw_open(&b.nvml, dev, err, sizeof err) != 0) {
		fprintf(stderr, "gpumon_bench_sample: %s\n", err);
		raw_close(&b.nvml);
		gpumon_destroy(b.g);
		return 1;
	}

	/* Decide which variants run, and check once, untimed, that each works. */
	for (size_t i = 0; i < NVARIANTS; i++) {
		struct variant *v = &variants[i];
		v->enabled = (v->group & (groups | GROUP_TIMER)) != 0;
	}
	struct variant *v;
	if (!b.nvml.memory_v2)
		variant_named("raw_v2")->skip_reason = "no nvmlDeviceGetMemoryInfo_v2 in the library";
	if (!b.nvml.memory_v1)
		variant_named("raw_v1")->skip_reason = "no nvmlDeviceGetMemoryInfo in the library";
	if (!b.nvml.procs_v3)
		variant_named("raw_procs_v3")->skip_reason =
			"no nvmlDeviceGetComputeRunningProcesses_v3 in the library";
	for (size_t i = 0; i < NVARIANTS; i++) {
		v = &variants[i];
		if (!v->enabled)
			continue;
		if (v->skip_reason) {
			v->enabled = 0;
			continue;
		}
		int r = v->fn(&b);
		if (r != 0) {
			static char reasons[NVARIANTS][96];
			snprintf(reasons[i], sizeof reasons[i], "first call failed: %d", r);
			v->skip_reason = reasons[i];
			v->enabled = 0;
		}
	}

	/* What the two sides see, once: the figures must describe the same thing. */
	struct raw_memory_v2 m2 = {0};
	m2.version = RAW_MEMORY_V2_VERSION;
	int have_m2 = b.nvml.memory_v2 && b.nvml.memory_v2(b.nvml.dev, &m2) == NVML_OK;
	gpumon_device_sample s;
	memset(&s, 0, sizeof s);
	int sst = gpumon_device_sample_read(b.g, dev, GPUMON_F_ALL, &s);
	long nprocs = -1;
	gpumon_process *list = NULL;
	size_t nlist = 0;
	if (gpumon_process_list(b.g, dev, &list, &nlist) == 0)
		nprocs = (long)nlist;
	gpumon_free(list);

	printf("gpumon_bench_sample: GPU %u \"%s\", NVML library %s\n", dev, info.name, b.nvml.path);
	printf("  %zu timed calls per variant after %zu warm-up calls, interleaved in chunks of %zu\n",
	       n, warmup, chunk);
	if (have_m2)
		printf("  raw v2 memory: total %llu reserved %llu free %llu used %llu bytes\n", m2.total,
		       m2.reserved, m2.free, m2.used);
	if (sst == 0)
		printf("  gpumon sample: memory api v%u, total %" PRIu64 " reserved %" PRIu64
		       " free %" PRIu64 " used %" PRIu64 " bytes, present 0x%x\n",
		       s.memory_api, s.memory_total_bytes, s.memory_reserved_bytes, s.memory_free_bytes,
		       s.memory_used_bytes, s.present);
	else
		printf("  gpumon sample failed: %s\n", gpumon_strerror(sst));
	if (have_m2 && sst == 0 && s.memory_api != GPUMON_MEMAPI_V2)
		printf("  NOTE: gpumon read memory with the v1 call while v2 is available\n");
	printf("  processes on the GPU: %ld\n", nprocs);
	fflush(stdout);

	for (size_t i = 0; i < NVARIANTS; i++) {
		v = &variants[i];
		if (!v->enabled)
			continue;
		v->ns = malloc(n * sizeof v->ns[0]);
		if (!v->ns) {
			fprintf(stderr, "gpumon_bench_sample: out of memory\n");
			return 1;
		}
	}
	if (warmup)
		run_rounds(&b, warmup, chunk, 0);
	run_rounds(&b, n, chunk, 1);
	for (size_t i = 0; i < NVARIANTS; i++)
		if (variants[i].enabled)
			compute_stats(&variants[i]);

	print_table(stdout);
	print_json(stdout, label, dev, info.name, b.nvml.path, n, warmup, chunk,
		   sst == 0 ? s.memory_api : 0, nprocs);
	if (json_path) {
		FILE *f = fopen(json_path, "w");
		if (!f) {
			fprintf(stderr, "gpumon_bench_sample: cannot write %s: %s\n", json_path,
				strerror(errno));
		} else {
			print_json(f, label, dev, info.name, b.nvml.path, n, warmup, chunk,
				   sst == 0 ? s.memory_api : 0, nprocs);
			fclose(f);
		}
	}

	int failed = 0;
	for (size_t i = 0; i < NVARIANTS; i++) {
		failed |= variants[i].errors != 0;
		free(variants[i].ns);
	}
	raw_close(&b.nvml);
	gpumon_destroy(b.g);
	return failed ? 3 : 0;

bad:
	usage(stderr);
	return 2;
}
