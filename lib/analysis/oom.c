/* SPDX-License-Identifier: MIT */
/* oom.c — out-of-memory forensics: which of the usual causes (another process on the card, a leak,
 * an allocator that pre-reserved the card, a transient peak) the figures at the moment of death
 * point to, as a code the front ends word. */
#include <gpumon/gpumon.h>

#include <string.h>

/* Another process "holds the card" when it takes at least this share of it (and 1 GiB). */
#define CO_TENANT_SHARE 0.10
#define GIB (1024.0 * 1024.0 * 1024.0)
/* Pre-allocation: the allocator holds at least this share of the card ... */
#define PREALLOC_RESERVED_SHARE 0.5
/* ... and tensors use less than this share of what it holds. */
#define PREALLOC_IN_USE_SHARE 0.5
/* Without the framework's figures: the job took this share of the card in its first seconds. */
#define PREALLOC_EARLY_SHARE 0.75
/* A transient peak: the climb above the usual level is at least this share of the card ... */
#define TRANSIENT_SHARE 0.15
/* ... and took at most this long. */
#define TRANSIENT_SECONDS 10.0

static int has(const gpumon_oom_input *in, unsigned f)
{
	return (in->known & f) == f;
}

int gpumon_oom_diagnose(const gpumon_oom_input *in, gpumon_oom_diagnosis *out)
{
	if (!in || !out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	double total = has(in, GPUMON_OOM_F_TOTAL) ? (double)in->total_bytes : 0;
	int leaking = has(in, GPUMON_OOM_F_LEAK) && in->leak.verdict == GPUMON_LEAK_SUSPECTED;
	if (total > 0 && has(in, GPUMON_OOM_F_OTHERS) && (double)in->others_bytes >= CO_TENANT_SHARE * total &&
	    (double)in->others_bytes >= GIB) {
		out->cause = GPUMON_OOM_CO_TENANT;
		out->also = leaking ? GPUMON_OOM_ALSO_LEAK : 0;
		return GPUMON_OK;
	}
	if (leaking) {
		out->cause = GPUMON_OOM_LEAK;
		return GPUMON_OK;
	}
	if (total > 0 && has(in, GPUMON_OOM_F_FRAMEWORK) && (double)in->reserved_bytes >= PREALLOC_RESERVED_SHARE * total &&
	    (double)in->allocated_bytes < PREALLOC_IN_USE_SHARE * (double)in->reserved_bytes) {
		out->cause = GPUMON_OOM_PREALLOCATION;
		return GPUMON_OK;
	}
	if (total > 0 && has(in, GPUMON_OOM_F_FLOOR | GPUMON_OOM_F_USED) && in->used_bytes > in->floor_bytes &&
	    (double)(in->used_bytes - in->floor_bytes) >= TRANSIENT_SHARE * total &&
	    (in->rise_seconds < 0 || in->rise_seconds <= TRANSIENT_SECONDS)) {
		out->cause = GPUMON_OOM_TRANSIENT_PEAK;
		return GPUMON_OK;
	}
	if (total > 0 && !has(in, GPUMON_OOM_F_FRAMEWORK) && has(in, GPUMON_OOM_F_EARLY) &&
	    (double)in->early_bytes >= PREALLOC_EARLY_SHARE * total) {
		out->cause = GPUMON_OOM_PREALLOCATION;
		out->also = GPUMON_OOM_BY_EARLY_FIGURE;
		return GPUMON_OK;
	}
	out->cause = GPUMON_OOM_UNKNOWN;
	return GPUMON_OK;
}
