/* SPDX-License-Identifier: MIT */
/* fuzz_snapshot.c — libFuzzer target for PyTorch's allocator snapshot read as it streams
 * (gpumon_snapshot_condense: every device and one picked from the input, a request from it, error
 * buffers of every size) and for the condensed document (gpumon_snapshot_decode). What either
 * accepts must hold together and come back the same through encode and decode. */
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int terminated(const char *s, size_t size)
{
	return memchr(s, 0, size) != NULL;
}

/* What condense or decode gave: within its arrays and bounds, and the same after encode + decode. */
static void check(const gpumon_alloc_snapshot *s, int condensed)
{
	if (s->nsites > GPUMON_SNAPSHOT_SITES || s->nsegments > GPUMON_SNAPSHOT_SEGMENTS ||
	    !terminated(s->framework, sizeof s->framework))
		abort();
	if (condensed) {
		uint64_t sited = 0;
		if (strcmp(s->framework, "torch") || s->largest_free_bytes > s->free_bytes ||
		    s->unusable_free_bytes > s->free_bytes || s->segments_with_free > s->segments ||
		    s->allocated_bytes + s->free_bytes > GPUMON_MAX_BYTES || s->unsited_bytes > s->allocated_bytes)
			abort();
		for (unsigned i = 0; i < s->nsites; i++) {
			if (!terminated(s->sites[i].file, sizeof s->sites[i].file) ||
			    !terminated(s->sites[i].function, sizeof s->sites[i].function) || !s->sites[i].blocks ||
			    (i && s->sites[i].bytes > s->sites[i - 1].bytes))
				abort();
			sited += s->sites[i].bytes;
		}
		if (sited + s->unsited_bytes > s->allocated_bytes)
			abort();
	}
	char *json = NULL;
	gpumon_alloc_snapshot back;
	if (gpumon_snapshot_encode(s, &json) != GPUMON_OK)
		abort();
	if (gpumon_snapshot_decode(json, strlen(json), &back) != GPUMON_OK || memcmp(s, &back, sizeof back))
		abort();
	gpumon_free(json);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	/* an exact-size copy, so that a read past the text's end is caught */
	char *text = malloc(size ? size : 1), err[160];
	gpumon_alloc_snapshot s;
	if (!text)
		return 0;
	memcpy(text, data, size);
	/* the device and the request from bytes of the input (the text stays whole: seeds are snapshots) */
	int device = size ? data[size / 2] % 3 : 0;
	uint64_t request = size > 1 ? (uint64_t)data[size / 3] << (data[size / 5] % 32) : 0;
	size_t err_len = size % sizeof err;
	for (int pass = 0; pass < 2; pass++) {
		int rc = gpumon_snapshot_condense(text, size, pass ? device : -1, pass ? request : 0, &s, err, err_len);
		if (rc != GPUMON_OK && rc != GPUMON_E_INVAL)
			abort();
		if (err_len && !terminated(err, err_len))
			abort();
		if (rc == GPUMON_E_INVAL && err_len > 1 && !err[0])
			abort(); /* a refusal says why */
		if (rc == GPUMON_OK)
			check(&s, 1);
	}
	int rc = gpumon_snapshot_decode(text, size, &s);
	if (rc != GPUMON_OK && rc != GPUMON_E_INVAL)
		abort();
	if (rc == GPUMON_OK)
		check(&s, 0);
	free(text);
	return 0;
}
