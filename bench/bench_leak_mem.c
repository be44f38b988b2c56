/* SPDX-License-Identifier: MIT */
/* bench_leak_mem.c — the memory of one leak detector, measured: the heap bytes gpumon_leak_create
 * takes per detector (glibc's mallinfo2 before and after creating 1,000), and the bytes one
 * detector takes more after a million points (none: its memory is fixed). With --check FILE...,
 * each file must state the figure as "N B a detector" within 10 %, so that the documents that
 * quote it stay true. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

#define DETECTORS 1000
#define POINTS 1000000
#define SKIP 77 /* ctest's SKIP_RETURN_CODE: nothing to measure with */

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
static size_t heap_in_use(void)
{
	return mallinfo2().uordblks;
}
#else
static size_t heap_in_use(void)
{
	return 0; /* no mallinfo2: measure() says so */
}
#endif

/* Bytes a detector takes at creation, and the bytes one takes more after POINTS points. Returns 0,
 * or an exit status after a message (SKIP when the heap cannot be measured here). */
static int measure(size_t *each, long long *grown)
{
	static gpumon_leak *l[DETECTORS];
	gpumon_leak_config cfg = {.size = sizeof cfg, .mode = GPUMON_LEAK_SAMPLES};
	size_t before = heap_in_use();
	for (int i = 0; i < DETECTORS; i++)
		if (gpumon_leak_create(&cfg, &l[i]) != GPUMON_OK) {
			fprintf(stderr, "gpumon_leak_create failed after %d detectors\n", i);
			return 1;
		}
	size_t after = heap_in_use();
	if (after <= before) {
		fprintf(stderr, "mallinfo2 does not count this program's heap (a sanitizer's allocator?)\n");
		return SKIP;
	}
	*each = (after - before) / DETECTORS;
	/* a leak of 1 MiB a step with noise, a point every 0.1 s: windows fill, merge and slide */
	for (int64_t s = 0; s < POINTS; s++)
		gpumon_leak_add(l[0], s, (uint64_t)s * 100000000ull,
				(2ull << 30) + (uint64_t)s * (1u << 20) + (uint64_t)(s % 7) * (64u << 20));
	gpumon_leak_result r;
	gpumon_leak_result_get(l[0], &r);
	*grown = (long long)heap_in_use() - (long long)after;
	for (int i = 0; i < DETECTORS; i++)
		gpumon_leak_destroy(l[i]);
	return 0;
}

/* "19,584" */
static void with_commas(char *buf, size_t len, size_t v)
{
	char digits[32];
	int n = snprintf(digits, sizeof digits, "%zu", v), k = 0;
	for (int i = 0; i < n && (size_t)k + 2 < len; i++) {
		if (i && (n - i) % 3 == 0)
			buf[k++] = ',';
		buf[k++] = digits[i];
	}
	buf[k] = 0;
}

/* The number written just before p in text ("19,584" in "19,584 B a detector"), or -1. */
static long long number_before(const char *text, const char *p)
{
	const char *q = p;
	while (q > text && ((q[-1] >= '0' && q[-1] <= '9') || q[-1] == ','))
		q--;
	if (q == p)
		return -1;
	long long v = 0;
	for (; q < p; q++)
		if (*q != ',')
			v = v * 10 + (*q - '0');
	return v;
}

/* Every "N B a detector" in the file within 10 % of each; at least one. Returns 0, or 1 after a
 * message. */
static int check_file(const char *path, size_t each)
{
	static const char mark[] = " B a detector";
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t n = 0;
	if (!f) {
		perror(path);
		return 1;
	}
	if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > 0) {
		long len = ftell(f);
		rewind(f);
		if ((text = malloc((size_t)len + 1)) != NULL)
			n = fread(text, 1, (size_t)len, f);
	}
	fclose(f);
	if (!text) {
		fprintf(stderr, "%s: cannot read it\n", path);
		return 1;
	}
	text[n] = 0;
	int found = 0, bad = 0;
	for (const char *p = strstr(text, mark); p; p = strstr(p + 1, mark)) {
		long long said = number_before(text, p);
		found++;
		if (said < 0 || (double)said < 0.9 * (double)each || (double)said > 1.1 * (double)each) {
			fprintf(stderr, "%s says %lld B a detector; measured %zu B\n", path, said, each);
			bad = 1;
		}
	}
	if (!found)
		fprintf(stderr, "%s does not state a detector's memory as \"N B a detector\"\n", path);
	free(text);
	return bad || !found;
}

int main(int argc, char **argv)
{
	size_t each;
	long long grown;
	char c[32];
	if (argc > 1 && strcmp(argv[1], "--check")) {
		fprintf(stderr, "usage: %s [--check FILE...]\n", argv[0]);
		return 2;
	}
	int st = measure(&each, &grown);
	if (st != 0)
		return st;
	with_commas(c, sizeof c, each);
	printf("gpumon_leak_create: %s B a detector (heap in use, glibc mallinfo2, over %d detectors); "
	       "after %d points: %+lld B\n", c, DETECTORS, POINTS, grown);
	int rc = grown > 0;
	if (grown > 0)
		fprintf(stderr, "a detector grew by %lld B with its points: its memory is meant to be fixed\n", grown);
	for (int i = 2; i < argc; i++)
		rc |= check_file(argv[i], each);
	return rc;
}
