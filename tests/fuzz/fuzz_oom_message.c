/* SPDX-License-Identifier: MIT */
/* fuzz_oom_message.c — libFuzzer target for the readers of what frameworks say at out-of-memory:
 * any bytes as a message (parse, detail, match) and as the figures' JSON (decode). What parse
 * reads is always in range and always survives encode and decode unchanged; so does what decode
 * accepts. */
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* The figures as the contract bounds them. */
static int in_range(const gpumon_oom_figures *f)
{
	const uint64_t b[] = {f->request_bytes, f->capacity_bytes,     f->free_bytes,
			      f->process_bytes, f->allocated_bytes,    f->reserved_bytes,
			      f->cap_bytes,	f->largest_free_bytes, f->peak_bytes};
	if (f->known >> 10 || !memchr(f->framework, 0, sizeof f->framework) ||
	    f->nothers > GPUMON_OOM_MAX_OTHERS)
		return 0;
	if ((f->known & GPUMON_FIG_DEVICE) && (f->device < 0 || f->device > 65535))
		return 0;
	for (unsigned i = 0; i < sizeof b / sizeof b[0]; i++)
		if (b[i] > GPUMON_MAX_BYTES)
			return 0;
	for (unsigned i = 0; i < f->nothers; i++)
		if (f->others[i].bytes > GPUMON_MAX_BYTES)
			return 0;
	return 1;
}

/* Encodes f and decodes it back; aborts unless the same figures come back. */
static void round_trip(const gpumon_oom_figures *f)
{
	char *json = NULL;
	gpumon_oom_figures g;
	if (gpumon_oom_figures_encode(f, &json) != GPUMON_OK)
		abort();
	if (gpumon_oom_figures_decode(json, strlen(json), &g) != GPUMON_OK || g.known != f->known ||
	    strcmp(g.framework, f->framework) || g.pid != f->pid || g.nothers != f->nothers ||
	    ((f->known & GPUMON_FIG_DEVICE) && g.device != f->device) ||
	    g.request_bytes != f->request_bytes || g.capacity_bytes != f->capacity_bytes ||
	    g.free_bytes != f->free_bytes || g.process_bytes != f->process_bytes ||
	    g.allocated_bytes != f->allocated_bytes || g.reserved_bytes != f->reserved_bytes ||
	    g.cap_bytes != f->cap_bytes || g.largest_free_bytes != f->largest_free_bytes ||
	    g.peak_bytes != f->peak_bytes)
		abort();
	for (unsigned i = 0; i < f->nothers; i++)
		if (g.others[i].pid != f->others[i].pid || g.others[i].bytes != f->others[i].bytes)
			abort();
	gpumon_free(json);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	/* an exact-size copy, so that a read past the text's end is caught */
	char *text = malloc(size ? size : 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	gpumon_oom_figures f;
	int n = gpumon_oom_message_parse(text, size, &f), bits = 0;
	for (unsigned k = f.known; k; k &= k - 1)
		bits++;
	if (n != bits || !in_range(&f) || (f.framework[0] && !n && !f.nothers))
		abort();
	round_trip(&f);
	int d = gpumon_oom_message_detail(text, size);
	if (d != 0 && d != 1)
		abort();
	const char *m = gpumon_oom_message_match(text, size);
	if (m && strlen(m) > 16)
		abort();
	if (gpumon_oom_figures_decode(text, size, &f) == GPUMON_OK) {
		if (!in_range(&f))
			abort();
		round_trip(&f);
	}
	free(text);
	return 0;
}
