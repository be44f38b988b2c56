/* SPDX-License-Identifier: MIT */
/* oom.c — out-of-memory forensics: which of the usual causes (another process on the card, a leak,
 * an allocator that pre-reserved the card, a transient peak) the figures at the moment of death
 * point to, said in plain words with the figures and what to try. */
#include <gpumon/gpumon.h>

#include <stdarg.h>
#include <stdio.h>
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

static const char *bytes_text(char *buf, size_t len, uint64_t b)
{
	static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)b;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u == 0 ? "%.0f %s" : v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

static void say(gpumon_oom_diagnosis *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(gpumon_oom_diagnosis *out, const char *fmt, ...)
{
	size_t used = strlen(out->text);
	if (used + 1 >= sizeof out->text)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out->text + used, sizeof out->text - used, fmt, ap);
	va_end(ap);
}

static int has(const gpumon_oom_input *in, unsigned f)
{
	return (in->known & f) == f;
}

static void co_tenant(const gpumon_oom_input *in, gpumon_oom_diagnosis *out)
{
	char a[32], b[32], c[32];
	out->cause = GPUMON_OOM_CO_TENANT;
	say(out, "Another process held the memory: other processes had %s of the %s card when the job ran out",
	    bytes_text(a, sizeof a, in->others_bytes), bytes_text(b, sizeof b, in->total_bytes));
	if (in->top_other_pid >= 0) {
		say(out, ", the largest pid %lld (%s", (long long)in->top_other_pid,
		    bytes_text(c, sizeof c, in->top_other_bytes));
		if (in->top_other_user)
			say(out, ", user %s", in->top_other_user);
		if (in->top_other_command)
			say(out, ": %.120s", in->top_other_command);
		say(out, ")");
	}
	if (has(in, GPUMON_OOM_F_JOB))
		say(out, "; the job itself held %s", bytes_text(a, sizeof a, in->job_bytes));
	say(out, ". Run it on a free GPU (gpumon run --gpu auto) or ask the owner to free it.");
}

static void leak(const gpumon_oom_input *in, gpumon_oom_diagnosis *out)
{
	char a[32];
	out->cause = GPUMON_OOM_LEAK;
	say(out, "A leak: the job's memory floor kept rising by ");
	if (in->leak.rate_bytes_per_step > 0)
		say(out, "%s a step", bytes_text(a, sizeof a, (uint64_t)in->leak.rate_bytes_per_step));
	else
		say(out, "%s a second", bytes_text(a, sizeof a, (uint64_t)in->leak.rate_bytes_per_second));
	if (in->leak.start_step >= 0)
		say(out, " from step %lld", (long long)in->leak.start_step);
	say(out, " until the card was full. Look for tensors kept from one step to the next: a loss summed "
		 "without .item(), outputs appended to a list, a graph kept alive by a stored tensor.");
}

static void preallocation(const gpumon_oom_input *in, gpumon_oom_diagnosis *out)
{
	char a[32], b[32], c[32];
	out->cause = GPUMON_OOM_PREALLOCATION;
	if (has(in, GPUMON_OOM_F_FRAMEWORK))
		say(out, "The allocator had reserved %s of the %s card but tensors used only %s: the memory went to "
			 "the allocator's cache or a pre-allocated pool, not to the model. ",
		    bytes_text(a, sizeof a, in->reserved_bytes), bytes_text(b, sizeof b, in->total_bytes),
		    bytes_text(c, sizeof c, in->allocated_bytes));
	else
		say(out, "The job took %s of the %s card in its first seconds: an allocator that pre-reserves most "
			 "of the card. ",
		    bytes_text(a, sizeof a, in->early_bytes), bytes_text(b, sizeof b, in->total_bytes));
	say(out, "Limit the pool (Paddle FLAGS_fraction_of_gpu_memory_to_use, JAX XLA_PYTHON_CLIENT_MEM_FRACTION, "
		 "PyTorch PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) or free the cache between phases.");
}

static void transient(const gpumon_oom_input *in, gpumon_oom_diagnosis *out)
{
	char a[32], b[32];
	out->cause = GPUMON_OOM_TRANSIENT_PEAK;
	say(out, "A transient peak: memory climbed from its usual %s to %s", bytes_text(a, sizeof a, in->floor_bytes),
	    bytes_text(b, sizeof b, in->used_bytes));
	if (in->rise_seconds >= 0)
		say(out, " within %.1f s", in->rise_seconds);
	say(out, " and ran out; the rest of the run fitted. One batch needed much more than the others (a long "
		 "sequence, attention, evaluation): cap the batch or sequence length for the worst case, or use "
		 "gradient checkpointing.");
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
		co_tenant(in, out);
		if (leaking)
			say(out, " The job's own memory was also rising steadily (a leak is suspected).");
		return GPUMON_OK;
	}
	if (leaking) {
		leak(in, out);
		return GPUMON_OK;
	}
	if (total > 0 && has(in, GPUMON_OOM_F_FRAMEWORK) && (double)in->reserved_bytes >= PREALLOC_RESERVED_SHARE * total &&
	    (double)in->allocated_bytes < PREALLOC_IN_USE_SHARE * (double)in->reserved_bytes) {
		preallocation(in, out);
		return GPUMON_OK;
	}
	if (total > 0 && has(in, GPUMON_OOM_F_FLOOR | GPUMON_OOM_F_USED) && in->used_bytes > in->floor_bytes &&
	    (double)(in->used_bytes - in->floor_bytes) >= TRANSIENT_SHARE * total &&
	    (in->rise_seconds < 0 || in->rise_seconds <= TRANSIENT_SECONDS)) {
		transient(in, out);
		return GPUMON_OK;
	}
	if (total > 0 && !has(in, GPUMON_OOM_F_FRAMEWORK) && has(in, GPUMON_OOM_F_EARLY) &&
	    (double)in->early_bytes >= PREALLOC_EARLY_SHARE * total) {
		preallocation(in, out);
		return GPUMON_OK;
	}
	char a[32], b[32];
	out->cause = GPUMON_OOM_UNKNOWN;
	say(out, "The job ran out of memory");
	if (has(in, GPUMON_OOM_F_USED) && total > 0)
		say(out, " with %s of %s in use", bytes_text(a, sizeof a, in->used_bytes),
		    bytes_text(b, sizeof b, in->total_bytes));
	say(out, ", but no leak, other process, pre-allocation or sudden peak shows in the figures: the model "
		 "and batch may simply not fit. Reduce the batch size, use mixed precision or gradient "
		 "checkpointing.");
	return GPUMON_OK;
}
