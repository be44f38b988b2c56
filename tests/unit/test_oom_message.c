/* SPDX-License-Identifier: MIT */
/* test_oom_message.c — the frameworks' out-of-memory messages read into figures: every fixture of
 * tests/fixtures/oom with each figure worked out by hand from the printed one, held against what
 * the framework knew exactly (captured.json); cut texts, a decimal-comma locale, absurd figures,
 * TensorFlow's "not a failure" line, the detail lines, and the figures as JSON and back. */
#include <gpumon/gpumon.h>

#include <errno.h>
#include <locale.h>

#include "tap.h"

#define KIB 1024ull
#define MIB (1024ull * 1024)
#define GIB (1024ull * 1024 * 1024)

static const char *fw_names[] = {"request",  "capacity", "free",   "process",	   "allocated",
				 "reserved", "cap",	 "device", "largest_free", "peak"};

/* ---- helpers ------------------------------------------------------------------------------------ */

/* The whole fixture in a buffer of its exact size (no NUL: a read past the end is caught under
 * ASan); bails out when it cannot be read. */
static char *slurp(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", OOM_FIXTURES, name);
	FILE *f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) || ftell(f) < 0) {
		printf("Bail out! cannot read %s: %s\n", path, strerror(errno));
		exit(1);
	}
	*len = (size_t)ftell(f);
	rewind(f);
	char *buf = malloc(*len ? *len : 1);
	if (!buf || fread(buf, 1, *len, f) != *len) {
		printf("Bail out! cannot read %s\n", path);
		exit(1);
	}
	fclose(f);
	return buf;
}

static int parse_str(const char *s, gpumon_oom_figures *f)
{
	return gpumon_oom_message_parse(s, strlen(s), f);
}

/* A byte figure of f by its bit. */
static uint64_t figure(const gpumon_oom_figures *f, unsigned bit)
{
	switch (bit) {
	case GPUMON_FIG_REQUEST: return f->request_bytes;
	case GPUMON_FIG_CAPACITY: return f->capacity_bytes;
	case GPUMON_FIG_FREE: return f->free_bytes;
	case GPUMON_FIG_PROCESS: return f->process_bytes;
	case GPUMON_FIG_ALLOCATED: return f->allocated_bytes;
	case GPUMON_FIG_RESERVED: return f->reserved_bytes;
	case GPUMON_FIG_CAP: return f->cap_bytes;
	case GPUMON_FIG_DEVICE: return (uint64_t)f->device;
	case GPUMON_FIG_LARGEST_FREE: return f->largest_free_bytes;
	case GPUMON_FIG_PEAK: return f->peak_bytes;
	}
	return 0;
}

static int same_figures(const gpumon_oom_figures *a, const gpumon_oom_figures *b)
{
	if (a->known != b->known || strcmp(a->framework, b->framework) || a->pid != b->pid ||
	    a->nothers != b->nothers)
		return 0;
	for (unsigned bit = 1; bit <= GPUMON_FIG_PEAK; bit <<= 1)
		if ((a->known & bit) && figure(a, bit) != figure(b, bit))
			return 0;
	for (unsigned i = 0; i < a->nothers; i++)
		if (a->others[i].pid != b->others[i].pid || a->others[i].bytes != b->others[i].bytes)
			return 0;
	return 1;
}

/* s for a TAP line: control characters shown as '~' (static storage, cut to 60 bytes). */
static const char *shown(const char *s)
{
	static char buf[61];
	size_t i = 0;
	for (; s[i] && i < sizeof buf - 1; i++)
		buf[i] = (unsigned char)s[i] < 0x20 ? '~' : s[i];
	buf[i] = 0;
	return buf;
}

static int bits(unsigned k)
{
	int n = 0;
	for (; k; k &= k - 1)
		n++;
	return n;
}

/* An integer of captured.json: key inside the top-level entry `entry`; 0 when absent. */
static uint64_t captured(const char *json, const char *entry, const char *key)
{
	char pat[128];
	snprintf(pat, sizeof pat, "\"%s\": {", entry);
	const char *s = strstr(json, pat), *e = s ? strstr(s, "\n }") : NULL;
	snprintf(pat, sizeof pat, "\"%s\": ", key);
	const char *k = s ? strstr(s, pat) : NULL;
	if (!k || k > e)
		return 0;
	return strtoull(k + strlen(pat), NULL, 10);
}

/* Whether a figure printed with two decimals of unit agrees with the exact one: within half a
 * hundredth of the unit, and the half byte of rounding the printed figure to bytes. */
static int agrees(uint64_t parsed, uint64_t exact, uint64_t unit)
{
	uint64_t d = parsed > exact ? parsed - exact : exact - parsed;
	return 200 * d <= unit + 100;
}

/* ---- every fixture, every figure ---------------------------------------------------------------- */

struct want {
	const char *file, *framework;
	int nfig; /* figures read: the return value */
	unsigned known;
	int device;
	uint64_t request, capacity, free, process, allocated, reserved, cap, largest_free, peak;
	unsigned nothers;
	unsigned other_pid;
	uint64_t other_bytes;
};

#define R  GPUMON_FIG_REQUEST
#define C  GPUMON_FIG_CAPACITY
#define F  GPUMON_FIG_FREE
#define P  GPUMON_FIG_PROCESS
#define A  GPUMON_FIG_ALLOCATED
#define RS GPUMON_FIG_RESERVED
#define CP GPUMON_FIG_CAP
#define D  GPUMON_FIG_DEVICE
#define LF GPUMON_FIG_LARGEST_FREE
#define PK GPUMON_FIG_PEAK

/* Each figure is the printed one times its unit (KiB/MiB/GiB/TiB, binary for Paddle's kB..TB too),
 * rounded to the nearest byte; the torch 2.1+ reserved figure is the allocated one plus "reserved
 * but unallocated", each rounded. */
/* clang-format off */
static const struct want wants[] = {
	{"torch-2.11-fragmentation.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = 42949672960,                  /* 40.00 GiB */
	 .capacity = 150109106995,                /* 139.80 GiB */
	 .free = 11145440133,                     /* 10.38 GiB */
	 .process = 138952929444,                 /* 129.41 GiB */
	 .allocated = 41521596334,                /* 38.67 GiB */
	 .reserved = 41521596334 + 96883724780},  /* + 90.23 GiB */
	{"torch-2.11-full.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = GIB,                          /* 1024.00 MiB */
	 .capacity = 150109106995,
	 .free = 307358597,                       /* 293.12 MiB */
	 .process = 149797721866,                 /* 139.51 GiB */
	 .allocated = 139 * GIB,
	 .reserved = 139 * GIB},                  /* + 0 bytes */
	{"torch-2.11-outside.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = GIB,
	 .capacity = 150109106995,
	 .free = 307358597,
	 .process = 149797721866,
	 .allocated = 133 * GIB,
	 .reserved = 133 * GIB},
	{"torch-2.11-expandable.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = GIB,
	 .capacity = 150109106995,
	 .free = 303164293,                       /* 289.12 MiB */
	 .process = 149797721866,
	 .allocated = 139 * GIB,
	 .reserved = 139 * GIB + 4 * MIB},
	{"torch-2.11-fraction.txt", "torch", 8, R | C | F | P | A | RS | CP | D, 0,
	 .request = GIB,
	 .capacity = 150109106995,
	 .free = 113054276649,                    /* 105.29 GiB */
	 .process = 37054830346,                  /* 34.51 GiB */
	 .cap = 37527276749,                      /* 34.95 GiB allowed */
	 .allocated = 34 * GIB,
	 .reserved = 34 * GIB},
	{"torch-2.11-fraction-small.txt", "torch", 8, R | C | F | P | A | RS | CP | D, 0,
	 .request = 2 * GIB,
	 .capacity = 150109106995,
	 .free = 149142739354,                    /* 138.90 GiB */
	 .process = 918 * MIB,
	 .cap = 1503238554,                       /* 1.40 GiB allowed */
	 .allocated = 120 * MIB,
	 .reserved = 120 * MIB + 280 * MIB},
	{"torch-2.11-cotenant.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = GIB,
	 .capacity = 150109106995,
	 .free = 735638979,                       /* 701.56 MiB */
	 .process = 84299470602,                  /* 78.51 GiB */
	 .allocated = 78 * GIB,
	 .reserved = 78 * GIB,
	 .nothers = 1, .other_pid = 870,
	 .other_bytes = 65068754534},             /* 60.60 GiB */
	{"torch-2.11-too-big.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = 200 * GIB,
	 .capacity = 150109106995,
	 .free = 149561498665,                    /* 139.29 GiB */
	 .process = 518 * MIB,
	 .allocated = 0,
	 .reserved = 0},
	{"torch-2.5-container.txt", "torch", 6, R | C | F | A | RS | D, 1,
	 .request = 1342177280,                   /* 1.25 GiB */
	 .capacity = 99879464468,                 /* 93.02 GiB */
	 .free = 1267015352,                      /* 1.18 GiB */
	 .allocated = 97313221509,                /* 90.63 GiB */
	 .reserved = 97313221509 + 126395351,     /* + 120.54 MiB */
	 .nothers = 1, .other_pid = 2752205,
	 .other_bytes = 98590974280},             /* 91.82 GiB */
	{"torch-2.5-public.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = 21131239096,                  /* 19.68 GiB */
	 .capacity = 25426206392,                 /* 23.68 GiB */
	 .free = 12756052869,                     /* 11.88 GiB */
	 .process = 12659416105,                  /* 11.79 GiB */
	 .allocated = 12283606467,                /* 11.44 GiB */
	 .reserved = 12283606467 + 45707428},     /* + 43.59 MiB */
	{"torch-2.1-cotenant.txt", "torch", 7, R | C | F | P | A | RS | D, 0,
	 .request = GIB,
	 .capacity = 84986665370,                 /* 79.15 GiB, "capacty" */
	 .free = 500 * MIB,
	 .process = 30741228421,                  /* 28.63 GiB */
	 .allocated = 27 * GIB,
	 .reserved = 27 * GIB + 1170378588,       /* + 1.09 GiB */
	 .nothers = 1, .other_pid = 1234, .other_bytes = 50 * GIB},
	{"torch-1.12-full.txt", "torch", 6, R | C | F | A | RS | D, 0,
	 .request = 36 * MIB,
	 .capacity = 8514772664,                  /* 7.93 GiB */
	 .allocated = 136681882,                  /* 130.35 MiB */
	 .free = 49345987,                        /* 47.06 MiB */
	 .reserved = 188 * MIB},
	{"torch-1.13-fraction.txt", "torch", 7, R | C | F | A | RS | CP | D, 0,
	 .request = 2 * GIB,
	 .capacity = 84986665370,                 /* 79.15 GiB */
	 .allocated = 18 * GIB,
	 .free = 63683627581,                     /* 59.31 GiB */
	 .cap = 21249350697,                      /* 19.79 GiB allowed */
	 .reserved = 19348827668},                /* 18.02 GiB */
	{"paddle-2.2-kb.txt", "paddle", 4, R | F | RS | D, 7,
	 .request = 40192,                        /* 39.250000kB */
	 .reserved = 93911631187627,              /* 85.412131TB */
	 .free = 0},                              /* 0.000000B */
	{"paddle-2.4-zero.txt", "paddle", 4, R | F | RS | D, 0,
	 .request = 251920640,                    /* 240.250244MB */
	 .reserved = 0,
	 .free = 0},
	{"paddle-2.6.txt", "paddle", 4, R | F | RS | D, 0,
	 .request = 128 * MIB,
	 .reserved = 25159729441,                 /* 23.431824GB */
	 .free = 102367232},                      /* 97.625000MB */
	{"tf-2.x.txt", "tf", 2, R | D, 0,
	 .request = 16384ull * 16384 * 16 * 4},   /* shape[16384,16384,16], float */
	{"tf-not-a-failure.txt", "", 0, 0, 0, .request = 0},
	{"jax-0.11-prealloc.txt", "jax", 2, R | D, 0, .request = GIB},
	{"jax-0.11-noprealloc.txt", "jax", 2, R | D, 0, .request = GIB},
	{"jax-0.11-platform.txt", "jax", 2, R | D, 0, .request = GIB},
	{"jax-0.11-prealloc.stderr", "", 1, R, 0, .request = 1073741824}, /* (rounded to 1073741824) */
	{"jax-0.11-noprealloc.stderr", "", 1, R, 0, .request = 1073741824},
	/* the platform allocator's log carries no report */
	{"jax-0.11-platform.stderr", "", 0, 0, 0, .request = 0},
	{"jax-0.4-bytes.txt", "jax", 1, R, 0, .request = 17179869184},
	{"jax-bfc-stats.stderr", "", 5, R | CP | A | LF | PK, 0,
	 .request = 1073741824,
	 .cap = 112583507968,
	 .allocated = 111669149696,
	 .peak = 111669150208,
	 .largest_free = 914357760},
};
/* clang-format on */
#define NWANTS (sizeof wants / sizeof wants[0])

static void check(const struct want *w, const gpumon_oom_figures *f, int rc, const char *what)
{
	is_int(rc, w->nfig, "%s%s: figures read", w->file, what);
	is_int(f->known, w->known, "%s%s: which", w->file, what);
	is_str(f->framework, w->framework, "%s%s: framework", w->file, what);
	is_int(f->pid, 0, "%s%s: a message names no reporting pid", w->file, what);
	const uint64_t want[] = {w->request,	  w->capacity, w->free, w->process,
				 w->allocated,	  w->reserved, w->cap,	(uint64_t)w->device,
				 w->largest_free, w->peak};
	for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
		if (w->known & (1u << i))
			is_int(figure(f, 1u << i), want[i], "%s%s: %s", w->file, what, fw_names[i]);
	is_int(f->nothers, w->nothers, "%s%s: other processes", w->file, what);
	if (w->nothers && f->nothers) {
		is_int(f->others[0].pid, w->other_pid, "%s%s: other's pid", w->file, what);
		is_int(f->others[0].bytes, w->other_bytes, "%s%s: other's bytes", w->file, what);
	}
}

static void test_fixtures(void)
{
	for (size_t i = 0; i < NWANTS; i++) {
		size_t len;
		char *text = slurp(wants[i].file, &len);
		gpumon_oom_figures f;
		memset(&f, 0xa5, sizeof f); /* cleared by parse */
		check(&wants[i], &f, gpumon_oom_message_parse(text, len, &f), "");
		free(text);
	}
}

/* What the framework knew exactly at that moment agrees with what it printed. */
static void test_captured(void)
{
	size_t len;
	char *raw = slurp("captured.json", &len), *json = malloc(len + 1);
	if (!json)
		exit(1);
	memcpy(json, raw, len);
	json[len] = 0;
	free(raw);
	static const struct {
		const char *name;
		uint64_t request_unit, free_unit;
	} torch[] = {
	    {"torch-2.11-fragmentation", GIB, GIB}, {"torch-2.11-fraction-small", GIB, GIB},
	    {"torch-2.11-fraction", MIB, GIB},	    {"torch-2.11-full", MIB, MIB},
	    {"torch-2.11-too-big", GIB, GIB},	    {"torch-2.11-outside", MIB, MIB},
	    {"torch-2.11-expandable", MIB, MIB},    {"torch-2.11-cotenant", MIB, MIB},
	};
	for (size_t i = 0; i < sizeof torch / sizeof torch[0]; i++) {
		char file[64];
		snprintf(file, sizeof file, "%s.txt", torch[i].name);
		char *text = slurp(file, &len);
		gpumon_oom_figures f;
		gpumon_oom_message_parse(text, len, &f);
		free(text);
		uint64_t alloc = captured(json, torch[i].name, "alloc");
		uint64_t dfree = captured(json, torch[i].name, "device_free");
		/* mem_get_info: [free, total] */
		uint64_t total = 0;
		const char *m = strstr(strstr(json, torch[i].name), "\"mem_get_info\": [");
		if (m && strchr(m, ','))
			total = strtoull(strchr(m, ',') + 1, NULL, 10);
		ok(alloc && agrees(f.request_bytes, alloc, torch[i].request_unit),
		   "%s: request %llu agrees with the observer's %llu", torch[i].name,
		   (unsigned long long)f.request_bytes, (unsigned long long)alloc);
		ok(dfree && agrees(f.free_bytes, dfree, torch[i].free_unit),
		   "%s: free %llu agrees with the observer's %llu", torch[i].name,
		   (unsigned long long)f.free_bytes, (unsigned long long)dfree);
		ok(total && agrees(f.capacity_bytes, total, GIB),
		   "%s: capacity %llu agrees with mem_get_info's %llu", torch[i].name,
		   (unsigned long long)f.capacity_bytes, (unsigned long long)total);
	}
	uint64_t holder = captured(json, "torch-2.11-cotenant", "holder_pid");
	gpumon_oom_figures f;
	char *text = slurp("torch-2.11-cotenant.txt", &len);
	gpumon_oom_message_parse(text, len, &f);
	free(text);
	ok(holder && f.nothers == 1 && f.others[0].pid == holder,
	   "cotenant: the other process is the one that held the card (pid %llu)",
	   (unsigned long long)holder);

	/* JAX: the 2-decimal request against the BFC allocator's exact one, and its Stats against
	   memory_stats() */
	const char *jax[] = {"jax-0.11-prealloc", "jax-0.11-noprealloc"};
	for (size_t i = 0; i < 2; i++) {
		char file[64];
		gpumon_oom_figures t, s;
		snprintf(file, sizeof file, "%s.txt", jax[i]);
		text = slurp(file, &len);
		gpumon_oom_message_parse(text, len, &t);
		free(text);
		snprintf(file, sizeof file, "%s.stderr", jax[i]);
		text = slurp(file, &len);
		gpumon_oom_message_parse(text, len, &s);
		const char *rt = memmem(text, len, "(rounded to ", 12);
		uint64_t rounded = rt ? strtoull(rt + 12, NULL, 10) : 0;
		free(text);
		ok(rounded && agrees(t.request_bytes, rounded, GIB),
		   "%s: request agrees with the BFC's exact %llu", jax[i], (unsigned long long)rounded);
		is_int(s.request_bytes, rounded, "%s: the BFC line's request is its exact figure", jax[i]);
		is_int(captured(json, jax[i], "largest_alloc_size"), rounded,
		       "%s: memory_stats' largest alloc", jax[i]);
	}
	text = slurp("jax-bfc-stats.stderr", &len);
	gpumon_oom_message_parse(text, len, &f);
	free(text);
	is_int(f.cap_bytes, captured(json, "jax-0.11-prealloc", "bytes_limit"), "BFC Limit is bytes_limit");
	is_int(f.allocated_bytes, captured(json, "jax-0.11-prealloc", "bytes_in_use"),
	       "BFC InUse is bytes_in_use");
	is_int(f.peak_bytes, captured(json, "jax-0.11-prealloc", "peak_bytes_in_use"),
	       "BFC MaxInUse is peak_bytes_in_use");
	is_int(f.largest_free_bytes, captured(json, "jax-0.11-prealloc", "largest_free_block_bytes"),
	       "BFC LargestFreeBlock is largest_free_block_bytes");
	free(json);
}

/* Texts joined as a log holds them: the BFC allocator's exact request wins over JAX's rounded one
 * in either order; the framework is named from the whole text. */
static void test_joined(void)
{
	size_t a, b;
	char *t = slurp("jax-0.11-prealloc.txt", &a), *s = slurp("jax-0.11-prealloc.stderr", &b);
	char *both = malloc(a + b);
	gpumon_oom_figures f;
	if (!both)
		exit(1);
	memcpy(both, s, b);
	memcpy(both + b, t, a);
	is_int(gpumon_oom_message_parse(both, a + b, &f), 2, "stderr then exception: two figures");
	is_int(f.request_bytes, GIB, "stderr then exception: request");
	is_str(f.framework, "jax", "stderr then exception: jax");
	free(both);
	free(t);
	free(s);

	const char *log1 =
	    "W bfc_allocator.cc:598] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
	    "1.50GiB (rounded to 1610612992) from the lower end\n"
	    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
	    "1.50GiB with allocator GPU_0_bfc on device 3.";
	const char *log2 =
	    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
	    "1.50GiB with allocator GPU_0_bfc on device 3.\n"
	    "W bfc_allocator.cc:598] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
	    "1.50GiB (rounded to 1610612992) from the lower end";
	const char *logs[] = {log1, log2};
	for (int i = 0; i < 2; i++) {
		is_int(parse_str(logs[i], &f), 2, "joined log %d: two figures", i);
		is_int(f.request_bytes, 1610612992, "joined log %d: the exact figure, not 1.50GiB's %llu", i,
		       (unsigned long long)(3 * GIB / 2));
		is_int(f.device, 3, "joined log %d: device", i);
		is_str(f.framework, "jax", "joined log %d: jax", i);
	}
	/* the same words in a TensorFlow log */
	is_int(parse_str(
		   "2024-01-01 W tensorflow/core/common_runtime/bfc_allocator.cc:462] Allocator (GPU_0_bfc) "
		   "ran out of memory trying to allocate 2.11GiB (rounded to 2267432448) requested by op",
		   &f),
	       1, "TensorFlow's fatal BFC line: a figure");
	is_int(f.request_bytes, 2267432448u, "TensorFlow's fatal BFC line: the exact request");
	is_str(f.framework, "tf", "TensorFlow's words: tf");
	/* torch 2.1 on with CUDA graphs: the allocated figure counts the private pools, and reserved is
	   it plus the unallocated part */
	is_int(
	    parse_str(
		"CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB "
		"of which 1.00 MiB is free. Of the allocated memory 10.00 GiB is allocated by PyTorch, with "
		"2.00 GiB allocated in private pools (e.g., CUDA Graphs), and 1.00 GiB is reserved by "
		"PyTorch "
		"but unallocated.",
		&f),
	    6, "private pools: six figures");
	ok(f.allocated_bytes == 10 * GIB && f.reserved_bytes == 11 * GIB,
	   "private pools: allocated 10, reserved 11");
	/* two torch reports: the first one's figures stay, and a process is listed once */
	const char *two =
	    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
	    "capacity of 10.00 GiB of which 1.00 GiB is free. Process 9 has 3.00 GiB memory in use.\n"
	    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total "
	    "capacity of 20.00 GiB of which 2.00 GiB is free. Process 9 has 5.00 GiB memory in use.";
	is_int(parse_str(two, &f), 4, "two reports: request, device, capacity, free");
	ok(f.request_bytes == 2 * GIB && f.device == 0 && f.capacity_bytes == 10 * GIB && f.free_bytes == GIB,
	   "two reports: the first one's figures");
	ok(f.nothers == 1 && f.others[0].pid == 9 && f.others[0].bytes == 3 * GIB, "two reports: pid 9 once");
}

/* Every prefix of every fixture: no read past the end (each in a buffer of its exact size), the
 * figures a subset of the whole text's, and the same values when the cut is not inside a number. */
static void test_cut(void)
{
	for (size_t i = 0; i < NWANTS; i++) {
		size_t len;
		char *text = slurp(wants[i].file, &len);
		gpumon_oom_figures whole, f;
		gpumon_oom_message_parse(text, len, &whole);
		int bad = 0;
		for (size_t n = 0; n <= len && !bad; n++) {
			char *cut = malloc(n ? n : 1);
			if (!cut)
				exit(1);
			memcpy(cut, text, n);
			int rc = gpumon_oom_message_parse(cut, n, &f);
			gpumon_oom_message_detail(cut, n);
			gpumon_oom_message_match(cut, n);
			if (rc != bits(f.known) || (f.known & ~whole.known) || f.nothers > whole.nothers)
				bad = 1;
			if (n && (cut[n - 1] < '0' || cut[n - 1] > '9') && f.known) {
				for (unsigned bit = 1; bit <= GPUMON_FIG_PEAK; bit <<= 1)
					if ((f.known & bit) && figure(&f, bit) != figure(&whole, bit))
						bad = 1;
				if (f.framework[0] && strcmp(f.framework, whole.framework))
					bad = 1;
			}
			if (bad)
				printf("# %s cut at %zu\n", wants[i].file, n);
			free(cut);
		}
		ok(!bad, "%s: each of its %zu prefixes parses to a part of the whole", wants[i].file,
		   len + 1);
		free(text);
	}
}

/* A locale with a decimal comma changes nothing: the figures are read digit by digit. */
static void test_locale(void)
{
	char dir[] = "/tmp/gpumon-locale-XXXXXX";
	int made = 0;
	const char *name = setlocale(LC_ALL, "de_DE.UTF-8");
	if (!name && mkdtemp(dir)) {
		/* not installed: built into a scratch directory, when the system can */
		char cmd[256];
		snprintf(cmd, sizeof cmd, "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
		made = 1;
		if (system(cmd) == 0) {
			setenv("LOCPATH", dir, 1);
			name = setlocale(LC_ALL, "de_DE.UTF-8");
		}
	}
	if (!name) {
		ok(1, "# SKIP de_DE.UTF-8 is not installed and localedef could not build it");
	} else {
		is_str(localeconv()->decimal_point, ",", "de_DE.UTF-8: the decimal point is a comma");
		for (size_t i = 0; i < NWANTS; i++) {
			size_t len;
			char *text = slurp(wants[i].file, &len);
			gpumon_oom_figures f;
			check(&wants[i], &f, gpumon_oom_message_parse(text, len, &f), " (de_DE)");
			free(text);
		}
		setlocale(LC_ALL, "C");
	}
	if (made) {
		char cmd[256];
		snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
		unsetenv("LOCPATH");
	}
}

static void test_absurd(void)
{
	gpumon_oom_figures f;
	is_int(gpumon_oom_message_parse(NULL, 0, &f), GPUMON_E_INVAL, "NULL text refused");
	is_int(gpumon_oom_message_parse("x", 1, NULL), GPUMON_E_INVAL, "NULL out refused");
	is_int(gpumon_oom_message_parse("", 0, &f), 0, "empty text: nothing");
	is_int(parse_str("epoch 3: loss 0.123", &f), 0, "a plain line: nothing");
	is_str(f.framework, "", "a plain line: no framework");

	/* the limit: GPUMON_MAX_BYTES is 2^50 - 1, 1048576 GiB is 2^50 */
	is_int(parse_str("Tried to allocate 1048575.99 GiB.", &f), 1, "just under 2^50: read");
	is_int(f.request_bytes, (1ull << 50) - 10737418, "just under 2^50: 2^50 - 0.01 GiB");
	is_int(parse_str("Tried to allocate 1048576.00 GiB.", &f), 0, "2^50: left out");
	is_int(f.known, 0, "2^50: no bit");
	is_int(parse_str("Tried to allocate 99999999999999999999999999999999999.00 GiB.", &f), 0,
	       "35 digits: left out");
	is_int(parse_str("Tried to allocate 1.0000000000000000000000000000001 GiB.", &f), 1,
	       "31 decimals: read");
	is_int(f.request_bytes, GIB, "31 decimals: 1 GiB");
	is_int(
	    parse_str("Cannot allocate 1.000000PB memory on GPU 0, available memory is only 0.000000B.", &f),
	    2, "Paddle, 1 PB: request left out, device and free kept");
	ok(!(f.known & GPUMON_FIG_REQUEST) && f.device == 0 && f.free_bytes == 0, "Paddle, 1 PB: which");
	is_int(parse_str(
		   "Tried to allocate 1.00 GiB. GPU 70000 has a total capacity of 2.00 GiB of which 0 bytes "
		   "is free.",
		   &f),
	       3, "device 70000: left out");
	ok(!(f.known & GPUMON_FIG_DEVICE) && f.capacity_bytes == 2 * GIB, "device 70000: the rest read");

	/* rounding: half a byte goes up */
	is_int(
	    parse_str("Cannot allocate 0.500000B memory on GPU 0, available memory is only 1.499999B.", &f),
	    3, "Paddle, fractions of a byte");
	is_int(f.request_bytes, 1, "0.5 B rounds up to 1");
	is_int(f.free_bytes, 1, "1.499999 B rounds down to 1");
	is_int(parse_str("Tried to allocate 0.01 KiB.", &f), 1, "0.01 KiB");
	is_int(f.request_bytes, 10, "0.01 KiB is 10.24 bytes: 10");
	is_int(parse_str("Tried to allocate 1023.99 KiB.", &f), 1, "1023.99 KiB");
	is_int(f.request_bytes, 1048566, "1023.99 KiB is 1048565.76 bytes: 1048566");

	/* malformed sizes are no figures */
	const char *bad[] = {
	    "Tried to allocate 1.00GiB.",   "Tried to allocate .5 GiB.",
	    "Tried to allocate 1,00 GiB.",  "Tried to allocate -1.00 GiB.",
	    "Tried to allocate 1.00 GB.",   "Tried to allocate 1.00 GiB",
	    "Tried to allocate  1.00 GiB.", "Tried to allocate 1. GiB.",
	    "Tried to allocate ",	    "Tried to allocate 18446744073709551617 bytes.",
	};
	is_int(parse_str(bad[5], &f), 1, "a size at the very end is read");
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (i != 5)
			is_int(parse_str(bad[i], &f), 0, "no figure: \"%s\"", bad[i]);

	/* more processes than kept: the first ones, in order; a process over the limit is left out */
	char many[1024] = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. ";
	strcat(many, "Process 99 has 2000000.00 GiB memory in use. ");
	for (int i = 1; i <= 10; i++)
		snprintf(many + strlen(many), sizeof many - strlen(many),
			 "Process %d has %d.00 GiB memory in use. ", i, i);
	parse_str(many, &f);
	is_int(f.nothers, GPUMON_OOM_MAX_OTHERS, "ten processes: %d kept", GPUMON_OOM_MAX_OTHERS);
	int order = 1;
	for (unsigned i = 0; i < f.nothers; i++)
		order &= f.others[i].pid == i + 1 && f.others[i].bytes == (i + 1) * GIB;
	ok(order, "ten processes: the first ones, in the message's order; the absurd one left out");
	is_int(parse_str("Tried to allocate 1.00 GiB. Process 4294967296 has 1.00 GiB memory in use.", &f), 1,
	       "a pid over 32 bits: not listed");
	is_int(f.nothers, 0, "a pid over 32 bits: no other");

	/* TensorFlow: the product of the shape, checked */
	struct {
		const char *line;
		int rc;
		uint64_t request;
	} tf[] = {
	    {"OOM when allocating tensor with shape[] and type double on /job:localhost/device:GPU:2", 2, 8},
	    {"OOM when allocating tensor with shape[3, 5] and type bfloat16 on /device:GPU:0", 2, 30},
	    {"OOM when allocating tensor with shape[1048576,1048576,256] and type int8 on x", 1, 1ull << 48},
	    {"OOM when allocating tensor with shape[1048576,1048576,256] and type float on x", 0, 0},
	    {"OOM when allocating tensor with shape[4294967296,4294967296,4294967296] and type bool on x", 0,
	     0},
	    {"OOM when allocating tensor with shape[99999999999999999999999] and type bool on x", 0, 0},
	    {"OOM when allocating tensor with shape[1024,1024] and type string on x", 0, 0},
	    {"OOM when allocating tensor with shape[1024,?] and type float on x", 0, 0},
	    {"OOM when allocating tensor with shape[1024,1024 and type float on x", 0, 0},
	    {"OOM when allocating tensor with shape[1024,1024] and type complex128 on x", 1, 16ull << 20},
	    {"OOM when allocating tensor of shape [1024,1024] and type float", 1, 4ull << 20},
	};
	for (size_t i = 0; i < sizeof tf / sizeof tf[0]; i++) {
		is_int(parse_str(tf[i].line, &f), tf[i].rc, "TensorFlow: %s", tf[i].line + 39);
		if (tf[i].rc)
			is_int(f.request_bytes, tf[i].request, "TensorFlow: request of %s", tf[i].line + 39);
	}
	parse_str(tf[0].line, &f);
	is_int(f.device, 2, "TensorFlow: device:GPU:2");

	/* BFC figures too large, or in the wrong shape */
	is_int(parse_str("Limit:                    99999999999999999999999", &f), 0,
	       "Limit over 64 bits: none");
	is_int(parse_str("Limit:                    1125899906842624", &f), 0, "Limit of 2^50: none");
	is_int(parse_str("Limit: 5\nInUse:   6\nMaxInUse:     7 \n", &f), 0,
	       "Stats of the wrong shape: none");
	is_int(parse_str("Reserved:           5\nPeakReserved:     6\nNumAllocs:      7\r\n", &f), 0,
	       "BFC's Reserved, PeakReserved, NumAllocs: not ours");
	is_int(parse_str("InUse:\t\t\t\t42\r\n", &f), 1, "Stats with tabs and CRLF");
	is_int(f.allocated_bytes, 42, "InUse: allocated");
	is_int(parse_str("ran out of memory trying to allocate 1.00GiB (rounded to 1125899906842624)", &f), 0,
	       "a rounded-to figure of 2^50: none");
}

/* TensorFlow's allocator runs out, retries, and says this is not a failure: nothing in it is read,
 * nothing in it matches, nor is it a detail line. */
static void test_not_a_failure(void)
{
	size_t len;
	char *text = slurp("tf-not-a-failure.txt", &len);
	gpumon_oom_figures f;
	is_int(gpumon_oom_message_parse(text, len, &f), 0, "not a failure: no figure");
	ok(gpumon_oom_message_match(text, len) == NULL, "not a failure: no match");
	is_int(gpumon_oom_message_detail(text, len), 0, "not a failure: no detail");
	free(text);
	/* even when it names the exact size, and next to a real report whose figures stay */
	const char *log =
	    "W bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.11GiB "
	    "(rounded to 2267432448) with freed_by_count=0. The caller indicates that this is not a "
	    "failure, but this may mean that there could be performance gains\n"
	    "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate "
	    "1.00GiB with allocator GPU_0_bfc on device 0.";
	is_int(parse_str(log, &f), 2, "not a failure, then a report: the report's figures");
	is_int(f.request_bytes, GIB, "not a failure, then a report: the report's request");
	is_int(gpumon_oom_message_detail(log, strchr(log, '\n') - log), 0,
	       "the not-a-failure line is no detail");
}

static void test_detail(void)
{
	const char *yes[] = {
	    ("W1204 19:23:24.567683     692 bfc_allocator.cc:598] Allocator (GPU_0_bfc) ran out of memory "
	     "trying to allocate 1.00GiB (rounded to 1073741824) from the lower end requested by op "),
	    /* TensorFlow 1.x, fatal */
	    ("Allocator (GPU_0_bfc) ran out of memory trying to allocate 3.14GiB.  Current allocation "
	     "summary follows."),
	    "Limit:                    112583507968",
	    "InUse:                    111669149696",
	    "MaxInUse:                 111669150208",
	    "NumAllocs:                         314",
	    "MaxAllocSize:               1073741824",
	    "Reserved:                            0",
	    "PeakReserved:                        0",
	    "LargestFreeBlock:            914357760",
	    "Limit:    5",
	    "Limit:\t\t\t\t5\n",
	    "InUse:     7\r\n",
	};
	const char *no[] = {
	    "Limit: 5",
	    "Limit:   5",
	    "Limit:    5 GiB",
	    "Limit:    ",
	    "Limit:",
	    "limit:     5",
	    "  Limit:     5",
	    "Reserved:    -1",
	    "Limit:    5x",
	    "Limit:    1.5",
	    "Stats: ",
	    "MaxInUse:",
	    "Bytes: 5",
	    "Foo:        5",
	    "epoch 3: loss 0.123",
	    "",
	    "Limit:    5 \n",
	    "LargestFreeBlock 914357760",
	    ("W bfc_allocator.cc:290] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.11GiB "
	     "with freed_by_count=0. The caller indicates that this is not a failure, but this may mean"),
	};
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		is_int(gpumon_oom_message_detail(yes[i], strlen(yes[i])), 1, "detail: \"%s\"", shown(yes[i]));
	for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
		is_int(gpumon_oom_message_detail(no[i], strlen(no[i])), 0, "no detail: \"%s\"", shown(no[i]));
	is_int(gpumon_oom_message_detail(NULL, 5), 0, "NULL: no detail");
	/* only len bytes: a Stats line whose digits go on past len is read up to len */
	char buf[32];
	memcpy(buf, "Limit:    5 GiB", 15);
	is_int(gpumon_oom_message_detail(buf, 11), 1, "a Stats line cut by len before its unit");
	is_int(gpumon_oom_message_detail(buf, 15), 0, "the same line whole");
	/* the detail lines are no out-of-memory signs by themselves */
	for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
		ok(gpumon_oom_message_match(yes[i], strlen(yes[i])) == NULL, "detail is no sign: \"%s\"",
		   shown(yes[i]));
}

/* ---- JSON ------------------------------------------------------------------------------------------ */

static void round_trip(const gpumon_oom_figures *f, const char *what)
{
	char *json = NULL;
	gpumon_oom_figures back;
	is_int(gpumon_oom_figures_encode(f, &json), GPUMON_OK, "%s: encoded", what);
	if (!json)
		return;
	ok(!strchr(json, ' ') && !strchr(json, '\n'), "%s: compact", what);
	memset(&back, 0x5a, sizeof back);
	is_int(gpumon_oom_figures_decode(json, strlen(json), &back), GPUMON_OK, "%s: decoded", what);
	ok(same_figures(f, &back), "%s: the same figures back (%s)", what, json);
	gpumon_free(json);
}

static void test_json(void)
{
	gpumon_oom_figures f, g;
	char *json = NULL;
	for (size_t i = 0; i < NWANTS; i++) {
		size_t len;
		char *text = slurp(wants[i].file, &len);
		gpumon_oom_message_parse(text, len, &f);
		free(text);
		round_trip(&f, wants[i].file);
	}

	/* the exact text of a small one: figures only when known, others always */
	parse_str("Tried to allocate 1.00 GiB (GPU 2; 79.15 GiB total capacity;", &f);
	is_int(gpumon_oom_figures_encode(&f, &json), GPUMON_OK, "small: encoded");
	is_str(json,
	       "{\"framework\":\"torch\",\"device\":2,\"request_bytes\":1073741824,\"capacity_bytes\":"
	       "84986665370,\"others\":[]}",
	       "small: the text");
	gpumon_free(json);

	/* everything, at the limits */
	memset(&f, 0, sizeof f);
	f.known = (GPUMON_FIG_PEAK << 1) - 1;
	strcpy(f.framework, "123456789012345");
	f.pid = 4294967295u;
	f.device = 65535;
	f.request_bytes = GPUMON_MAX_BYTES;
	f.capacity_bytes = 1;
	f.free_bytes = 0;
	f.process_bytes = 3;
	f.allocated_bytes = 4;
	f.reserved_bytes = 5;
	f.cap_bytes = 6;
	f.largest_free_bytes = 7;
	f.peak_bytes = GPUMON_MAX_BYTES - 1;
	f.nothers = GPUMON_OOM_MAX_OTHERS;
	for (unsigned i = 0; i < f.nothers; i++) {
		f.others[i].pid = i * 1000u;
		f.others[i].bytes = i ? GPUMON_MAX_BYTES - i : 0;
	}
	round_trip(&f, "every figure at its limit");
	memset(&f, 0, sizeof f);
	round_trip(&f, "nothing known");

	/* what cannot be written */
	is_int(gpumon_oom_figures_encode(NULL, &json), GPUMON_E_INVAL, "encode: NULL figures");
	ok(json == NULL, "encode: *json NULL on failure");
	is_int(gpumon_oom_figures_encode(&f, NULL), GPUMON_E_INVAL, "encode: NULL out");
	g = f, g.known = 1u << 10;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: an unknown bit");
	g = f, g.known = GPUMON_FIG_REQUEST, g.request_bytes = GPUMON_MAX_BYTES + 1;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: a figure over the limit");
	g = f, g.request_bytes = GPUMON_MAX_BYTES + 1;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_OK, "encode: an unknown figure is not looked at");
	gpumon_free(json);
	g = f, g.known = GPUMON_FIG_DEVICE, g.device = -1;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: device -1");
	g = f, g.known = GPUMON_FIG_DEVICE, g.device = 65536;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: device 65536");
	g = f, g.nothers = GPUMON_OOM_MAX_OTHERS + 1;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: too many others");
	g = f, g.nothers = 1, g.others[0].bytes = GPUMON_MAX_BYTES + 1;
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL,
	       "encode: another's bytes over the limit");
	g = f, memset(g.framework, 'x', sizeof g.framework);
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: a framework without its NUL");
	g = f, strcpy(g.framework, "t\xc3\xb6rch");
	is_int(gpumon_oom_figures_encode(&g, &json), GPUMON_E_INVAL, "encode: a framework not in ASCII");
	ok(json == NULL, "encode: *json NULL after a refusal");

	/* what is read */
	const char *good[] = {
	    "{}",
	    "{\"framework\":\"123456789012345\"}",
	    "{\"x\":[1,{\"y\":2}],\"request_bytes\":5,\"others\":[{\"pid\":1,\"bytes\":2,\"z\":3}]}",
	    "{\"device\":65535,\"request_bytes\":1125899906842623}",
	    " {\"device\":0}\n",
	};
	for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
		is_int(gpumon_oom_figures_decode(good[i], strlen(good[i]), &f), GPUMON_OK, "decode: %s",
		       shown(good[i]));
	gpumon_oom_figures_decode(good[2], strlen(good[2]), &f);
	ok(f.known == GPUMON_FIG_REQUEST && f.request_bytes == 5 && f.nothers == 1 && f.others[0].pid == 1 &&
	       f.others[0].bytes == 2 && !f.framework[0],
	   "decode: unknown keys ignored, the rest read");
	/* len is the length: a document cut by it is cut */
	is_int(gpumon_oom_figures_decode("{\"device\":1}xyz", 12, &f), GPUMON_OK, "decode: only len bytes");
	is_int(gpumon_oom_figures_decode("{\"device\":1}", 11, &f), GPUMON_E_INVAL, "decode: a cut document");

	const char *badj[] = {
	    "",
	    "[]",
	    "1",
	    "\"x\"",
	    "null",
	    "{",
	    "{}x",
	    "{\"request_bytes\":-1}",
	    "{\"request_bytes\":1125899906842624}",
	    "{\"request_bytes\":1.5}",
	    "{\"request_bytes\":1e3}",
	    "{\"request_bytes\":\"1\"}",
	    "{\"request_bytes\":null}",
	    "{\"request_bytes\":true}",
	    "{\"peak_bytes\":99999999999999999999999}",
	    "{\"device\":65536}",
	    "{\"device\":-1}",
	    "{\"device\":\"0\"}",
	    "{\"pid\":-1}",
	    "{\"pid\":4294967296}",
	    "{\"framework\":\"1234567890123456\"}",
	    "{\"framework\":5}",
	    "{\"framework\":\"t\\u00f6rch\"}",
	    "{\"framework\":\"a\\nb\"}",
	    "{\"others\":{}}",
	    "{\"others\":[1]}",
	    "{\"others\":[{\"pid\":1}]}",
	    "{\"others\":[{\"bytes\":1}]}",
	    "{\"others\":[{\"pid\":1,\"bytes\":1125899906842624}]}",
	    "{\"others\":[{\"pid\":4294967296,\"bytes\":1}]}",
	    "{\"others\":[{\"pid\":1,\"bytes\":-1}]}",
	    "{\"others\":[{\"pid\":1,\"bytes\":1},{\"pid\":2,\"bytes\":1},{\"pid\":3,\"bytes\":1},{\"pid\":4,"
	    "\"bytes\":1},"
	    "{\"pid\":5,\"bytes\":1},{\"pid\":6,\"bytes\":1},{\"pid\":7,\"bytes\":1},{\"pid\":8,\"bytes\":1},"
	    "{\"pid\":9,\"bytes\":1}]}",
	    "{\"device\":1,\"device\":2}",
	};
	for (size_t i = 0; i < sizeof badj / sizeof badj[0]; i++) {
		memset(&f, 0x5a, sizeof f);
		is_int(gpumon_oom_figures_decode(badj[i], strlen(badj[i]), &f), GPUMON_E_INVAL, "refused: %s",
		       shown(badj[i]));
		ok(f.known == 0 && f.nothers == 0 && !f.framework[0], "refused: out cleared");
	}
	is_int(gpumon_oom_figures_decode(NULL, 0, &f), GPUMON_E_INVAL, "decode: NULL text");
	is_int(gpumon_oom_figures_decode("{}", 2, NULL), GPUMON_E_INVAL, "decode: NULL out");
}

int main(void)
{
	test_fixtures();
	test_captured();
	test_joined();
	test_cut();
	test_locale();
	test_absurd();
	test_not_a_failure();
	test_detail();
	test_json();
	return tap_done();
}
