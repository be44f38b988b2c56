/* SPDX-License-Identifier: MIT */
/* bench_snapshot.c — what condensing PyTorch's allocator snapshot of a full card costs: generates in
 * memory a snapshot of a 140 GiB card (20,000 segments, 60,000 live blocks each with a stack of 10
 * frames from a few hundred allocation sites, 20,000 free blocks: about 63 MB of JSON), times
 * gpumon_snapshot_condense on it and prints the time and the peak RSS; then, for comparison,
 * jansson's json_loadb of the same text (a tree of it). Usage: gpumon_bench_snapshot [RUNS] */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <gpumon/gpumon.h>
#include <jansson.h>

#define SEGMENTS	 20000
#define LIVE_PER_SEGMENT 3
#define MIB		 (1024ull * 1024)

struct buf {
	char *p;
	size_t n, cap;
};

__attribute__((format(printf, 2, 3))) static void add(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	for (;;) {
		va_start(ap, fmt);
		int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k < 0) {
			fprintf(stderr, "vsnprintf failed\n");
			exit(1);
		}
		if ((size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		b->cap = b->cap * 2 + (size_t)k;
		if (!(b->p = realloc(b->p, b->cap))) {
			fprintf(stderr, "out of memory\n");
			exit(1);
		}
	}
}

static uint32_t rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

static void frame(struct buf *b, const char *name, const char *file, unsigned line, int first)
{
	add(b, "%s{\"name\":\"%s\",\"filename\":\"%s\",\"line\":%u}", first ? "" : ",", name, file, line);
}

/* A live block's stack, innermost first: torch's tensor factory and module call, then the user's
 * model code (one of 30 files x 10 lines: 300 sites) and its callers, then the interpreter's start. */
static void stack(struct buf *b, uint64_t *seed)
{
	static const char *torch[] = {"/usr/local/lib/python3.11/dist-packages/torch/nn/modules/linear.py",
				      "/usr/local/lib/python3.11/dist-packages/torch/nn/modules/module.py",
				      "/usr/local/lib/python3.11/dist-packages/torch/utils/_contextlib.py"};
	unsigned file = rnd(seed) % 30, line = 10 + rnd(seed) % 10;
	char user[64];
	add(b, "[");
	frame(b, "forward", torch[0], 125, 1);
	frame(b, "_call_impl", torch[1], 1747, 0);
	snprintf(user, sizeof user, "/srv/job/model/block%u.py", file);
	frame(b, "forward", user, line * 7, 0);
	frame(b, "_call_impl", torch[1], 1747, 0);
	frame(b, "forward", "/srv/job/model/net.py", 88, 0);
	frame(b, "step", "/srv/job/train.py", 140 + rnd(seed) % 4, 0);
	frame(b, "decorate_context", torch[2], 116, 0);
	frame(b, "main", "/srv/job/train.py", 201, 0);
	frame(b, "_run_code", "/usr/lib/python3.11/runpy.py", 88, 0);
	frame(b, "<module>", "/srv/job/train.py", 230, 0);
	add(b, "]");
}

static char *generate(size_t *len)
{
	struct buf b = {malloc(1 << 20), 0, 1 << 20};
	uint64_t seed = 42, addr = 0x7f0000000000ull;
	if (!b.p)
		exit(1);
	add(&b, "{\"segments\":[");
	for (int s = 0; s < SEGMENTS; s++) {
		uint64_t live = (1 + rnd(&seed) % 3) * MIB, free = (rnd(&seed) % 2 + 1) * MIB;
		uint64_t total = LIVE_PER_SEGMENT * live + free;
		add(&b,
		    "%s{\"device\":0,\"address\":%llu,\"total_size\":%llu,\"allocated_size\":%llu,\"active_"
		    "size\":%llu,"
		    "\"requested_size\":%llu,\"stream\":0,\"segment_type\":\"large\",\"segment_pool_id\":[0,"
		    "0],"
		    "\"is_expandable\":false,\"frames\":[],\"blocks\":[",
		    s ? "," : "", (unsigned long long)addr, (unsigned long long)total,
		    (unsigned long long)(total - free), (unsigned long long)(total - free),
		    (unsigned long long)(total - free));
		for (int k = 0; k < LIVE_PER_SEGMENT; k++) {
			add(&b,
			    "{\"address\":%llu,\"size\":%llu,\"requested_size\":%llu,\"state\":\"active_"
			    "allocated\",\"frames\":",
			    (unsigned long long)(addr + k * live), (unsigned long long)live,
			    (unsigned long long)live);
			stack(&b, &seed);
			add(&b, "},");
		}
		add(&b,
		    "{\"address\":%llu,\"size\":%llu,\"requested_size\":0,\"state\":\"inactive\",\"frames\":["
		    "]}]}",
		    (unsigned long long)(addr + LIVE_PER_SEGMENT * live), (unsigned long long)free);
		addr += total;
	}
	add(&b, "],\"device_traces\":[[]],\"allocator_settings\":{\"expandable_segments\":false}}");
	*len = b.n;
	return b.p;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double peak_mib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_maxrss / 1024.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 5;
	if (runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: %s [RUNS (1-1000)]\n", argv[0]);
		return 2;
	}
	size_t len;
	char *text = generate(&len);
	double rss_text = peak_mib();
	printf("snapshot: %.1f MB of JSON, %d segments, %d live blocks with 10 frames, %d free blocks\n",
	       len / 1e6, SEGMENTS, SEGMENTS * LIVE_PER_SEGMENT, SEGMENTS);

	double t[1000];
	gpumon_alloc_snapshot s;
	char err[256];
	for (int i = 0; i < runs; i++) {
		double t0 = now();
		int rc = gpumon_snapshot_condense(text, len, -1, 4096 * MIB, &s, err, sizeof err);
		t[i] = now() - t0;
		if (rc != GPUMON_OK) {
			fprintf(stderr, "gpumon_snapshot_condense: %s: %s\n", gpumon_strerror(rc), err);
			return 1;
		}
	}
	qsort(t, (size_t)runs, sizeof t[0], cmp_double);
	double rss_condense = peak_mib();
	printf("gpumon_snapshot_condense: best %.3f s, median %.3f s over %d runs (%.0f MB/s)\n", t[0],
	       t[runs / 2], runs, len / 1e6 / t[runs / 2]);
	printf("  reserved %.1f GiB, allocated %.1f GiB, %u sites (largest %s:%u, %.2f GiB), %llu blocks\n",
	       s.reserved_bytes / 1073741824.0, s.allocated_bytes / 1073741824.0, s.nsites,
	       s.nsites ? s.sites[0].file : "-", s.nsites ? s.sites[0].line : 0,
	       s.nsites ? s.sites[0].bytes / 1073741824.0 : 0.0, (unsigned long long)s.blocks);
	printf("  peak RSS: %.1f MiB with the text, %.1f MiB after condensing (+%.1f MiB)\n", rss_text,
	       rss_condense, rss_condense - rss_text);

	/* the same text as a jansson tree, the way a document is usually read */
	double t0 = now();
	json_error_t jerr;
	json_t *tree = json_loadb(text, len, 0, &jerr);
	double tj = now() - t0;
	if (!tree) {
		fprintf(stderr, "json_loadb: %s\n", jerr.text);
		return 1;
	}
	printf("for comparison, jansson's json_loadb of the same text: %.3f s, peak RSS %.1f MiB\n", tj,
	       peak_mib());
	json_decref(tree);
	free(text);
	return 0;
}
