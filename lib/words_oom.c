/* SPDX-License-Identifier: MIT */
/* words_oom.c — the out-of-memory moment in plain words (gpumon.h, "Words"): each cause with the
 * figures that decided it and what to try, what the framework said, and the allocator's snapshot.
 * Nothing here decides: the causes and figures are the model's (gpumon_model_oom_get). */
#include <stdio.h>
#include <string.h>

#include <gpumon/gpumon.h>

#include "words.h"

#define add gpumon__words_add
#define bytes_if gpumon__words_bytes_if

/* A figure of the card then, when its bits are known, as "n/a" otherwise. */
#define F(bit, v) bytes_if((in->known & (bit)) == (bit), (double)(v), a_, sizeof a_)

/* The framework that ran out, as what it said names it ("torch", ...), or "". */
static const char *oom_framework(const gpumon_model_oom *o)
{
	return (o->input.known & GPUMON_OOM_F_FIGURES) ? o->input.figures.framework : "";
}

/* The card's free memory with what the allocator held that no request could use: known when the
 * diagnosis had a request and the framework said the card's free memory. */
static int available_known(const gpumon_model_oom *o)
{
	return o->diagnosis.request_bytes && (o->input.figures.known & GPUMON_FIG_FREE);
}

static void co_tenant_text(char *buf, size_t len, size_t *at, const gpumon_model *m, const gpumon_model_oom *o)
{
	char a[32], b[32], c[32];
	const gpumon_oom_input *in = &o->input;
	const gpumon_oom_diagnosis *d = &o->diagnosis;
	int named = gpumon__words_named(m);
	add(buf, len, at, "Another process held the memory: other processes had %s of the %s card when the job ran out",
	    bytes_if((in->known & GPUMON_OOM_F_OTHERS) != 0, (double)in->others_bytes, a, sizeof a),
	    bytes_if((in->known & GPUMON_OOM_F_TOTAL) != 0, (double)in->total_bytes, b, sizeof b));
	if (in->top_other_pid >= 0) {
		gpumon_model_who w = {.size = sizeof w};
		gpumon_model_who_get(m, -1, (unsigned)in->top_other_pid, &w);
		add(buf, len, at, ", the largest pid %lld (%s", named ? (long long)in->top_other_pid : 0ll,
		    gpumon_words_bytes(in->top_other_bytes, c, sizeof c));
		char s[121]; /* another user's text, escaped and cut to 120 bytes */
		if (w.user[0])
			add(buf, len, at, ", user %s", gpumon_words_safe(w.user, s, sizeof s));
		if (w.command[0])
			add(buf, len, at, ": %s", gpumon_words_safe(w.command, s, sizeof s));
		add(buf, len, at, ")");
		char owner[200];
		if (gpumon_words_owner(w.owner, owner, sizeof owner)[0])
			add(buf, len, at, " %s", owner);
	}
	if (in->known & GPUMON_OOM_F_JOB)
		add(buf, len, at, "; the job itself held %s", gpumon_words_bytes(in->job_bytes, a, sizeof a));
	if (d->growth_bytes > 0)
		add(buf, len, at, ", having gained %s in %.1f s", gpumon_words_bytes(d->growth_bytes, a, sizeof a),
		    d->growth_seconds);
	add(buf, len, at, ". Run it on a free GPU (gpumon run --gpu auto) or ask the owner to free it.");
	if (d->also & GPUMON_OOM_ALSO_LEAK)
		add(buf, len, at, " The job's own memory was also rising steadily (a leak is suspected).");
}

static void fragmentation_text(char *buf, size_t len, size_t *at, const gpumon_model_oom *o)
{
	char a[32], b[32], c[32];
	const gpumon_oom_diagnosis *d = &o->diagnosis;
	add(buf, len, at, "Fragmentation: the allocator held %s free, but in pieces none of which was large enough for "
			  "the %s asked",
	    bytes_if(d->cached_bytes > 0, (double)d->cached_bytes, a, sizeof a),
	    bytes_if(d->request_bytes > 0, (double)d->request_bytes, b, sizeof b));
	if (d->largest_free_bytes > 0)
		add(buf, len, at, " (the largest was %s)", gpumon_words_bytes(d->largest_free_bytes, c, sizeof c));
	if (available_known(o))
		add(buf, len, at, "; with the card's free memory %s was there in all",
		    gpumon_words_bytes(d->available_bytes, a, sizeof a));
	if (!strcmp(oom_framework(o), "torch") || !oom_framework(o)[0])
		add(buf, len, at, ". Let the allocator join freed memory: gpumon run --expandable "
				  "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), or free the cache between phases "
				  "(torch.cuda.empty_cache()).");
	else
		add(buf, len, at, ". Allocate the largest buffers first and keep their sizes alike between steps, or "
				  "free the allocator's cache between phases.");
}

static void outside_text(char *buf, size_t len, size_t *at, const gpumon_model_oom *o)
{
	char a[32], b[32];
	const gpumon_oom_input *in = &o->input;
	add(buf, len, at, "Memory outside the allocator: the process held %s on the GPU beyond the allocator's %s",
	    bytes_if(o->diagnosis.outside_bytes > 0, (double)o->diagnosis.outside_bytes, a, sizeof a),
	    bytes_if((in->known & GPUMON_OOM_F_FRAMEWORK) != 0, (double)in->reserved_bytes, b, sizeof b));
	add(buf, len, at, ": the CUDA context takes about 0.5 GiB, the rest is NCCL's buffers, cuBLAS or cuDNN "
			  "workspaces, or another allocator in the process (CuPy, JAX, TensorFlow, a raw cudaMalloc). Find "
			  "the library that holds it (NCCL_BUFFSIZE and XLA_PYTHON_CLIENT_PREALLOCATE=false bound two "
			  "common ones).");
}

static void cap_text(char *buf, size_t len, size_t *at, const gpumon_model_oom *o)
{
	char a[32], b[32];
	const gpumon_oom_input *in = &o->input;
	const char *fw = oom_framework(o);
	uint64_t cap = o->diagnosis.cap_bytes;
	add(buf, len, at, "The job's own cap: its allocator may take at most %s", bytes_if(cap > 0, (double)cap, a, sizeof a));
	if ((in->known & GPUMON_OOM_F_LIMIT) && in->limit_bytes == cap)
		add(buf, len, at, " (gpumon run --limit)");
	else if (!strcmp(fw, "torch"))
		add(buf, len, at, " (torch.cuda.set_per_process_memory_fraction)");
	else if (!strcmp(fw, "jax"))
		add(buf, len, at, " (XLA's limit: XLA_PYTHON_CLIENT_MEM_FRACTION, 75 %% of the card unless set)");
	if ((in->known & GPUMON_OOM_F_FIGURES) && (in->figures.known & GPUMON_FIG_FREE))
		add(buf, len, at, ", while the card had %s free", gpumon_words_bytes(in->figures.free_bytes, b, sizeof b));
	add(buf, len, at, ". Raise or remove the cap, or make the job fit under it.");
}

static void too_big_text(char *buf, size_t len, size_t *at, const gpumon_model_oom *o)
{
	char a[32];
	const gpumon_oom_diagnosis *d = &o->diagnosis;
	add(buf, len, at, "Too big from the start: the job failed before it ever held a steady level");
	if (d->request_bytes > 0)
		add(buf, len, at, ", asking for %s", gpumon_words_bytes(d->request_bytes, a, sizeof a));
	if (available_known(o))
		add(buf, len, at, " with %s available", gpumon_words_bytes(d->available_bytes, a, sizeof a));
	if (d->shortfall_bytes > 0)
		add(buf, len, at, ": %s short at least", gpumon_words_bytes(d->shortfall_bytes, a, sizeof a));
	add(buf, len, at, ". The model or the first batch does not fit this GPU even alone: a smaller batch, mixed "
			  "precision, gradient checkpointing, or sharding the model.");
}

static void transient_text(char *buf, size_t len, size_t *at, const gpumon_model_oom *o)
{
	char a[32], b[32], a_[32];
	const gpumon_oom_input *in = &o->input;
	const gpumon_oom_diagnosis *d = &o->diagnosis;
	int steady = (in->known & GPUMON_OOM_F_STEADY) && in->steady;
	if (steady && d->excess_bytes > 0 && d->request_bytes > 0) {
		add(buf, len, at, "A transient peak: the job's usual peak was %s; at the end it needed %s more",
		    gpumon_words_bytes(in->steady_bytes, a, sizeof a), gpumon_words_bytes(d->excess_bytes, b, sizeof b));
	} else {
		add(buf, len, at, "A transient peak: memory climbed from its usual %s to %s",
		    F(GPUMON_OOM_F_FLOOR, in->floor_bytes), bytes_if((in->known & GPUMON_OOM_F_USED) != 0,
								    (double)in->used_bytes, b, sizeof b));
		if (in->rise_seconds >= 0)
			add(buf, len, at, " within %.1f s", in->rise_seconds);
	}
	add(buf, len, at, " and ran out; the rest of the run fitted. One batch needed much more than the others (a long "
			  "sequence, attention, evaluation): cap the batch or sequence length for the worst case, or use "
			  "gradient checkpointing.");
}

static void preallocation_text(char *buf, size_t len, size_t *at, const gpumon_model_oom *o)
{
	char a[32], b[32], c[32];
	const gpumon_oom_input *in = &o->input;
	int fw = (in->known & GPUMON_OOM_F_FRAMEWORK) != 0;
	const char *total = bytes_if((in->known & GPUMON_OOM_F_TOTAL) != 0, (double)in->total_bytes, b, sizeof b);
	if (o->diagnosis.also & GPUMON_OOM_BY_EARLY_FIGURE)
		add(buf, len, at, "The job took %s of the %s card in its first seconds: an allocator that "
				  "pre-reserves most of the card. ",
		    bytes_if((in->known & GPUMON_OOM_F_EARLY) != 0, (double)in->early_bytes, a, sizeof a), total);
	else
		add(buf, len, at, "The allocator had reserved %s of the %s card but tensors used only %s: the "
				  "memory went to the allocator's cache or a pre-allocated pool, not to the model. ",
		    bytes_if(fw, (double)in->reserved_bytes, a, sizeof a), total,
		    bytes_if(fw, (double)in->allocated_bytes, c, sizeof c));
	add(buf, len, at, "Limit the pool (Paddle FLAGS_fraction_of_gpu_memory_to_use, JAX "
			  "XLA_PYTHON_CLIENT_MEM_FRACTION, PyTorch PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) "
			  "or free the cache between phases.");
}

/* One cause in words. */
static void cause_text(char *buf, size_t len, size_t *at, int cause, const gpumon_model *m, const gpumon_model_oom *o)
{
	char a[32], b[32];
	const gpumon_oom_input *in = &o->input;
	switch (cause) {
	case GPUMON_OOM_CO_TENANT: co_tenant_text(buf, len, at, m, o); return;
	case GPUMON_OOM_LEAK:
		add(buf, len, at, "A leak: the job's memory floor kept rising until no room was left (on the card, "
				  "or under a cap the job set). Look for tensors kept from one step to the next: a "
				  "loss summed without .item(), outputs appended to a list, a graph kept alive by a "
				  "stored tensor.");
		return;
	case GPUMON_OOM_PREALLOCATION: preallocation_text(buf, len, at, o); return;
	case GPUMON_OOM_TRANSIENT_PEAK: transient_text(buf, len, at, o); return;
	case GPUMON_OOM_FRAGMENTATION: fragmentation_text(buf, len, at, o); return;
	case GPUMON_OOM_OUTSIDE: outside_text(buf, len, at, o); return;
	case GPUMON_OOM_CAP: cap_text(buf, len, at, o); return;
	case GPUMON_OOM_TOO_BIG: too_big_text(buf, len, at, o); return;
	}
	add(buf, len, at, "The job ran out of memory");
	if ((in->known & GPUMON_OOM_F_USED) && (in->known & GPUMON_OOM_F_TOTAL))
		add(buf, len, at, " with %s of %s in use", gpumon_words_bytes(in->used_bytes, a, sizeof a),
		    gpumon_words_bytes(in->total_bytes, b, sizeof b));
	add(buf, len, at, ", but no leak, other process, cap, fragmentation, pre-allocation or sudden peak shows "
			  "in the figures: the model and batch may simply not fit. Reduce the batch size, use mixed "
			  "precision or gradient checkpointing.");
}

const char *gpumon_words_causes(const gpumon_model_oom *o, char *buf, size_t len)
{
	size_t at = 0;
	const gpumon_oom_diagnosis *d = &o->diagnosis;
	buf[0] = 0;
	add(buf, len, &at, "%s", gpumon_oom_cause_name(d->cause));
	for (int c = 1; c < GPUMON_OOM_NCAUSES; c++)
		if ((d->causes & GPUMON_OOM_BIT(c)) && c != d->cause)
			add(buf, len, &at, ", %s", gpumon_oom_cause_name(c));
	return buf;
}

const char *gpumon_words_oom(const gpumon_model *m, const gpumon_model_oom *o, char *buf, size_t len)
{
	size_t at = 0;
	const gpumon_oom_diagnosis *d = &o->diagnosis;
	buf[0] = 0;
	cause_text(buf, len, &at, d->cause, m, o);
	for (int c = 1; c < GPUMON_OOM_NCAUSES; c++) {
		if (!(d->causes & GPUMON_OOM_BIT(c)) || c == d->cause ||
		    (c == GPUMON_OOM_LEAK && (d->also & GPUMON_OOM_ALSO_LEAK)))
			continue;
		add(buf, len, &at, " Also: ");
		cause_text(buf, len, &at, c, m, o);
	}
	return buf;
}

const char *gpumon_words_said(const gpumon_model *m, const gpumon_model_oom *o, char *buf, size_t len)
{
	char a[32], b[32], c[32], s[32];
	size_t at = 0;
	const gpumon_oom_figures *f = &o->input.figures;
	buf[0] = 0;
	if (!(o->input.known & GPUMON_OOM_F_FIGURES))
		return buf;
#define HAS(bit) ((f->known & (bit)) != 0)
	add(buf, len, &at, "%s", f->framework[0] ? gpumon_words_safe(f->framework, s, sizeof s) : "the framework");
	if (HAS(GPUMON_FIG_DEVICE))
		add(buf, len, &at, " (device %d)", f->device);
	const char *sep = ": ";
	if (HAS(GPUMON_FIG_REQUEST)) {
		add(buf, len, &at, "%stried to allocate %s", sep, gpumon_words_bytes(f->request_bytes, a, sizeof a));
		sep = "; ";
	}
	if (HAS(GPUMON_FIG_FREE)) {
		add(buf, len, &at, "%s%s free", sep, gpumon_words_bytes(f->free_bytes, a, sizeof a));
		if (HAS(GPUMON_FIG_CAPACITY))
			add(buf, len, &at, " of %s", gpumon_words_bytes(f->capacity_bytes, b, sizeof b));
		sep = "; ";
	}
	if (HAS(GPUMON_FIG_CAP)) {
		add(buf, len, &at, "%s%s allowed", sep, gpumon_words_bytes(f->cap_bytes, a, sizeof a));
		sep = "; ";
	}
	if (HAS(GPUMON_FIG_ALLOCATED) || HAS(GPUMON_FIG_RESERVED)) {
		add(buf, len, &at, "%sthe allocator held %s", sep,
		    bytes_if(HAS(GPUMON_FIG_RESERVED), (double)f->reserved_bytes, a, sizeof a));
		if (HAS(GPUMON_FIG_ALLOCATED) && HAS(GPUMON_FIG_RESERVED) && f->reserved_bytes >= f->allocated_bytes)
			add(buf, len, &at, " (%s allocated + %s cached)", gpumon_words_bytes(f->allocated_bytes, b, sizeof b),
			    gpumon_words_bytes(f->reserved_bytes - f->allocated_bytes, c, sizeof c));
		else if (HAS(GPUMON_FIG_ALLOCATED))
			add(buf, len, &at, " (%s allocated)", gpumon_words_bytes(f->allocated_bytes, b, sizeof b));
		sep = "; ";
	}
	if (HAS(GPUMON_FIG_PROCESS)) {
		add(buf, len, &at, "%sthe process %s in all", sep, gpumon_words_bytes(f->process_bytes, a, sizeof a));
		sep = "; ";
	}
	if (HAS(GPUMON_FIG_LARGEST_FREE))
		add(buf, len, &at, "%sthe largest free block %s", sep, gpumon_words_bytes(f->largest_free_bytes, a, sizeof a));
#undef HAS
	int named = gpumon__words_named(m);
	for (unsigned i = 0; i < f->nothers && i < GPUMON_OOM_MAX_OTHERS; i++)
		add(buf, len, &at, "%s pid %lld %s", i ? "," : "; other processes:", named ? (long long)f->others[i].pid : 0ll,
		    gpumon_words_bytes(f->others[i].bytes, a, sizeof a));
	return buf;
}

const char *gpumon_words_snapshot(const gpumon_alloc_snapshot *s, char *buf, size_t len)
{
	char a[32], b[32], c[32];
	size_t at = 0;
	buf[0] = 0;
	add(buf, len, &at, "the allocator held %s in %llu segment%s: %s live in %llu block%s, %s free",
	    gpumon_words_bytes(s->reserved_bytes, a, sizeof a), (unsigned long long)s->segments, s->segments == 1 ? "" : "s",
	    gpumon_words_bytes(s->allocated_bytes, b, sizeof b), (unsigned long long)s->blocks, s->blocks == 1 ? "" : "s",
	    gpumon_words_bytes(s->free_bytes, c, sizeof c));
	if (s->free_bytes > 0) {
		add(buf, len, &at, ", the largest free piece %s", gpumon_words_bytes(s->largest_free_bytes, a, sizeof a));
		if (s->known & GPUMON_SNAP_REQUEST)
			add(buf, len, &at, " (%s of the free memory too small for the %s asked)",
			    gpumon_words_bytes(s->unusable_free_bytes, b, sizeof b),
			    gpumon_words_bytes(s->request_bytes, c, sizeof c));
	}
	return buf;
}

const char *gpumon_words_site(const gpumon_alloc_site *s, char *buf, size_t len)
{
	char a[32], f[200], fn[72];
	snprintf(buf, len, "%s:%u (%s)  %s in %llu block%s", gpumon_words_safe(s->file, f, sizeof f), s->line,
		 gpumon_words_safe(s->function, fn, sizeof fn), gpumon_words_bytes(s->bytes, a, sizeof a),
		 (unsigned long long)s->blocks, s->blocks == 1 ? "" : "s");
	return buf;
}
