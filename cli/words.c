/* SPDX-License-Identifier: MIT */
/* words.c — the run model's document in plain words for the HTML page (words.h), which renders
 * the document alone (tests render hand-made ones): verdicts, alerts, the bound of a time to
 * out-of-memory, and the out-of-memory diagnosis with what to try. Nothing here decides. */
#include "words.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Appends to buf (used so far in *at). */
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	if (*at + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}

const char *doc_str(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

int doc_has_num(const json_t *o, const char *key)
{
	return json_is_number(json_object_get(o, key));
}

double doc_num(const json_t *o, const char *key)
{
	return json_number_value(json_object_get(o, key));
}

const char *words_bytes(char *buf, size_t len, const json_t *v)
{
	if (!json_is_number(v) || json_number_value(v) < 0) {
		snprintf(buf, len, "n/a");
		return buf;
	}
	return cli_format_bytes(buf, len, (uint64_t)json_number_value(v));
}

const char *words_duration(char *buf, size_t len, double s)
{
	return gpumon_words_duration(s, buf, len);
}

const char *words_series(char *buf, size_t len, const json_t *s)
{
	const char *kind = doc_str(s, "kind");
	size_t at = 0;
	buf[0] = 0;
	if (!kind) {
		snprintf(buf, len, "no memory series");
		return buf;
	}
	if (!strcmp(kind, "framework")) {
		add(buf, len, &at, "the framework's allocated memory");
		const char *fw = doc_str(s, "framework");
		int seg = doc_has_num(s, "segment") && doc_num(s, "segment") > 0;
		add(buf, len, &at, " (");
		char safe[64]; /* the name the job's process gave itself */
		if (fw && fw[0])
			add(buf, len, &at, "%s, ", cli_safe_text(safe, sizeof safe, fw));
		if (doc_has_num(s, "pid"))
			add(buf, len, &at, "pid %lld", (long long)doc_num(s, "pid"));
		else /* a CSV: its one process, unnamed */
			add(buf, len, &at, "the process");
		if (doc_has_num(s, "rank"))
			add(buf, len, &at, ", rank %lld", (long long)doc_num(s, "rank"));
		if (seg) /* a restarted step counter: the n-th run of the loop */
			add(buf, len, &at, ", loop restart %lld", (long long)doc_num(s, "segment"));
		add(buf, len, &at, ")");
	} else if (!strcmp(kind, "job")) {
		add(buf, len, &at, "the job's processes on GPU %lld (NVML)", (long long)doc_num(s, "dev"));
		if (doc_has_num(s, "rank")) /* the rank there, or the one of several that leaks */
			add(buf, len, &at, ", rank %lld", (long long)doc_num(s, "rank"));
	} else if (!strcmp(kind, "process")) {
		if (doc_has_num(s, "pid"))
			add(buf, len, &at, "pid %lld", (long long)doc_num(s, "pid"));
		else
			add(buf, len, &at, "the process");
		if (doc_has_num(s, "rank"))
			add(buf, len, &at, " (rank %lld)", (long long)doc_num(s, "rank"));
		add(buf, len, &at, " on GPU %lld (NVML)", (long long)doc_num(s, "dev"));
	} else if (!strcmp(kind, "device")) {
		add(buf, len, &at, "GPU %lld's used memory (NVML)", (long long)doc_num(s, "dev"));
	} else {
		add(buf, len, &at, "%s", kind);
	}
	return buf;
}

const char *words_room(char *buf, size_t len, const json_t *v)
{
	const char *room = doc_str(v, "room");
	if (!room)
		snprintf(buf, len, "an unknown limit");
	else if (!strcmp(room, "free"))
		snprintf(buf, len, "the GPU's free memory");
	else if (!strcmp(room, "limit"))
		snprintf(buf, len, "the --limit set for the job");
	else if (!strcmp(room, "cap"))
		snprintf(buf, len, "the cap the job set on its allocator");
	else if (!strcmp(room, "total"))
		snprintf(buf, len, "the GPU's total, what other processes hold unknown");
	else
		snprintf(buf, len, "%s", room);
	return buf;
}

/* "+8.00 MiB a step from step 40" ("8.00 MiB ..." without the sign, after "rises by") */
static void rate(char *buf, size_t len, size_t *at, const json_t *v, const char *sign)
{
	char a[32];
	if (doc_has_num(v, "rate_bytes_per_step") && doc_num(v, "rate_bytes_per_step") > 0)
		add(buf, len, at, "%s%s a step", sign, words_bytes(a, sizeof a, json_object_get(v, "rate_bytes_per_step")));
	else
		add(buf, len, at, "%s%s a second", sign, words_bytes(a, sizeof a, json_object_get(v, "rate_bytes_per_second")));
	if (doc_has_num(v, "start_step"))
		add(buf, len, at, " from step %lld", (long long)doc_num(v, "start_step"));
	else if (doc_has_num(v, "start_time"))
		add(buf, len, at, " from %.1f s", doc_num(v, "start_time"));
}

/* "; out of memory in about 1,200 more steps (about 2 min 10 s, around 4:37 from the start)" */
static void to_oom(char *buf, size_t len, size_t *at, const json_t *v, double now_s)
{
	char d[32], c[32], r[96], a[32];
	int steps = doc_has_num(v, "steps_to_oom"), secs = doc_has_num(v, "seconds_to_oom");
	if (!steps && !secs)
		return;
	add(buf, len, at, "; out of memory in about ");
	if (steps)
		add(buf, len, at, "%.0f more steps%s", doc_num(v, "steps_to_oom"), secs ? " (" : "");
	if (secs) {
		add(buf, len, at, "%s", words_duration(d, sizeof d, doc_num(v, "seconds_to_oom")));
		if (now_s >= 0)
			add(buf, len, at, ", around %s from the start",
			    gpumon_words_clock(now_s + doc_num(v, "seconds_to_oom"), c, sizeof c));
		if (steps)
			add(buf, len, at, ")");
	}
	add(buf, len, at, " at this rate, against %s (%s left)", words_room(r, sizeof r, v),
	    words_bytes(a, sizeof a, json_object_get(v, "room_bytes")));
}

const char *words_verdict(char *buf, size_t len, const json_t *v, double now_s)
{
	char s[160];
	size_t at = 0;
	buf[0] = 0;
	const char *verdict = doc_str(v, "verdict");
	words_series(s, sizeof s, json_object_get(v, "series"));
	if (!verdict || !strcmp(verdict, "insufficient_data")) {
		add(buf, len, &at, "not enough data to tell (%lld points of %s)", (long long)doc_num(v, "points"), s);
		return buf;
	}
	if (!strcmp(verdict, "none")) {
		add(buf, len, &at, "none: %s does not keep rising (confidence %.2f, %lld points)", s, doc_num(v, "confidence"),
		    (long long)doc_num(v, "points"));
		return buf;
	}
	add(buf, len, &at, "LEAK on %s: ", s);
	rate(buf, len, &at, v, "+");
	add(buf, len, &at, " (confidence %.2f%s)", doc_num(v, "confidence"),
	    json_is_true(json_object_get(v, "alert")) ? ", sustained" : "");
	to_oom(buf, len, &at, v, now_s);
	return buf;
}

const char *words_alert(char *buf, size_t len, const json_t *a)
{
	char s[160], b[32], c[32];
	size_t at = 0;
	buf[0] = 0;
	const char *kind = doc_str(a, "kind");
	if (kind && !strcmp(kind, "headroom")) {
		add(buf, len, &at, "GPU %lld has %s free of %s", (long long)doc_num(a, "dev"),
		    words_bytes(b, sizeof b, json_object_get(a, "free_bytes")),
		    words_bytes(c, sizeof c, json_object_get(a, "total_bytes")));
		return buf;
	}
	add(buf, len, &at, "%s rises by ", words_series(s, sizeof s, json_object_get(a, "series")));
	rate(buf, len, &at, a, "");
	to_oom(buf, len, &at, a, doc_has_num(a, "time") ? doc_num(a, "time") : -1);
	return buf;
}

/* The framework that ran out, as the document's oom.framework names it ("torch", ...), or "". */
static const char *oom_framework(const json_t *oom)
{
	const char *fw = doc_str(json_object_get(oom, "framework"), "framework");
	return fw ? fw : "";
}

static void co_tenant_text(char *buf, size_t len, size_t *at, const json_t *oom, const json_t *f)
{
	char a[32], b[32], c[32];
	const json_t *total = json_object_get(f, "total_bytes");
	add(buf, len, at, "Another process held the memory: other processes had %s of the %s card when the job ran out",
	    words_bytes(a, sizeof a, json_object_get(f, "others_bytes")), words_bytes(b, sizeof b, total));
	const json_t *top = json_object_get(f, "top_other");
	if (json_is_object(top)) {
		add(buf, len, at, ", the largest pid %lld (%s", (long long)doc_num(top, "pid"),
		    words_bytes(c, sizeof c, json_object_get(f, "top_other_bytes")));
		char safe[121]; /* another user's text, escaped and cut to 120 bytes */
		if (doc_str(top, "user"))
			add(buf, len, at, ", user %s", cli_safe_text(safe, sizeof safe, doc_str(top, "user")));
		if (doc_str(top, "command"))
			add(buf, len, at, ": %s", cli_safe_text(safe, sizeof safe, doc_str(top, "command")));
		add(buf, len, at, ")");
		char owner[200];
		if (words_owner(owner, sizeof owner, top)[0])
			add(buf, len, at, " %s", owner);
	}
	if (doc_has_num(f, "job_bytes"))
		add(buf, len, at, "; the job itself held %s", words_bytes(a, sizeof a, json_object_get(f, "job_bytes")));
	if (doc_has_num(f, "growth_bytes"))
		add(buf, len, at, ", having gained %s in %.1f s", words_bytes(a, sizeof a, json_object_get(f, "growth_bytes")),
		    doc_num(f, "growth_seconds"));
	add(buf, len, at, ". Run it on a free GPU (gpumon run --gpu auto) or ask the owner to free it.");
	if (json_is_true(json_object_get(oom, "also_leak")))
		add(buf, len, at, " The job's own memory was also rising steadily (a leak is suspected).");
}

static void fragmentation_text(char *buf, size_t len, size_t *at, const json_t *oom, const json_t *f)
{
	char a[32], b[32], c[32];
	add(buf, len, at, "Fragmentation: the allocator held %s free, but in pieces none of which was large enough for "
			  "the %s asked",
	    words_bytes(a, sizeof a, json_object_get(f, "cached_bytes")),
	    words_bytes(b, sizeof b, json_object_get(f, "request_bytes")));
	if (doc_has_num(f, "largest_free_bytes"))
		add(buf, len, at, " (the largest was %s)", words_bytes(c, sizeof c, json_object_get(f, "largest_free_bytes")));
	if (doc_has_num(f, "available_bytes"))
		add(buf, len, at, "; with the card's free memory %s was there in all",
		    words_bytes(a, sizeof a, json_object_get(f, "available_bytes")));
	if (!strcmp(oom_framework(oom), "torch") || !oom_framework(oom)[0])
		add(buf, len, at, ". Let the allocator join freed memory: gpumon run --expandable "
				  "(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), or free the cache between phases "
				  "(torch.cuda.empty_cache()).");
	else
		add(buf, len, at, ". Allocate the largest buffers first and keep their sizes alike between steps, or "
				  "free the allocator's cache between phases.");
}

static void outside_text(char *buf, size_t len, size_t *at, const json_t *f)
{
	char a[32], b[32];
	add(buf, len, at, "Memory outside the allocator: the process held %s on the GPU beyond the allocator's %s",
	    words_bytes(a, sizeof a, json_object_get(f, "outside_bytes")),
	    words_bytes(b, sizeof b, json_object_get(f, "reserved_bytes")));
	add(buf, len, at, ": the CUDA context takes about 0.5 GiB, the rest is NCCL's buffers, cuBLAS or cuDNN "
			  "workspaces, or another allocator in the process (CuPy, JAX, TensorFlow, a raw cudaMalloc). Find "
			  "the library that holds it (NCCL_BUFFSIZE and XLA_PYTHON_CLIENT_PREALLOCATE=false bound two "
			  "common ones).");
}

static void cap_text(char *buf, size_t len, size_t *at, const json_t *oom, const json_t *f)
{
	char a[32], b[32];
	const json_t *said = json_object_get(oom, "framework");
	const char *fw = oom_framework(oom);
	add(buf, len, at, "The job's own cap: its allocator may take at most %s",
	    words_bytes(a, sizeof a, json_object_get(f, "cap_bytes")));
	if (doc_has_num(f, "limit_bytes") && doc_num(f, "limit_bytes") == doc_num(f, "cap_bytes"))
		add(buf, len, at, " (gpumon run --limit)");
	else if (!strcmp(fw, "torch"))
		add(buf, len, at, " (torch.cuda.set_per_process_memory_fraction)");
	else if (!strcmp(fw, "jax"))
		add(buf, len, at, " (XLA's limit: XLA_PYTHON_CLIENT_MEM_FRACTION, 75 %% of the card unless set)");
	if (doc_has_num(said, "free_bytes"))
		add(buf, len, at, ", while the card had %s free", words_bytes(b, sizeof b, json_object_get(said, "free_bytes")));
	add(buf, len, at, ". Raise or remove the cap, or make the job fit under it.");
}

static void too_big_text(char *buf, size_t len, size_t *at, const json_t *f)
{
	char a[32], b[32], c[32];
	add(buf, len, at, "Too big from the start: the job failed before it ever held a steady level");
	if (doc_has_num(f, "request_bytes"))
		add(buf, len, at, ", asking for %s", words_bytes(a, sizeof a, json_object_get(f, "request_bytes")));
	if (doc_has_num(f, "available_bytes"))
		add(buf, len, at, " with %s available", words_bytes(b, sizeof b, json_object_get(f, "available_bytes")));
	if (doc_has_num(f, "shortfall_bytes"))
		add(buf, len, at, ": %s short at least", words_bytes(c, sizeof c, json_object_get(f, "shortfall_bytes")));
	add(buf, len, at, ". The model or the first batch does not fit this GPU even alone: a smaller batch, mixed "
			  "precision, gradient checkpointing, or sharding the model.");
}

static void transient_text(char *buf, size_t len, size_t *at, const json_t *f)
{
	char a[32], b[32];
	if (doc_has_num(f, "steady_bytes") && doc_has_num(f, "excess_bytes") && doc_has_num(f, "request_bytes")) {
		add(buf, len, at, "A transient peak: the job's usual peak was %s; at the end it needed %s more",
		    words_bytes(a, sizeof a, json_object_get(f, "steady_bytes")),
		    words_bytes(b, sizeof b, json_object_get(f, "excess_bytes")));
	} else {
		add(buf, len, at, "A transient peak: memory climbed from its usual %s to %s",
		    words_bytes(a, sizeof a, json_object_get(f, "floor_bytes")),
		    words_bytes(b, sizeof b, json_object_get(f, "used_bytes")));
		if (doc_has_num(f, "rise_seconds"))
			add(buf, len, at, " within %.1f s", doc_num(f, "rise_seconds"));
	}
	add(buf, len, at, " and ran out; the rest of the run fitted. One batch needed much more than the others (a long "
			  "sequence, attention, evaluation): cap the batch or sequence length for the worst case, or use "
			  "gradient checkpointing.");
}

static void preallocation_text(char *buf, size_t len, size_t *at, const json_t *oom, const json_t *f)
{
	char a[32], b[32], c[32];
	const json_t *total = json_object_get(f, "total_bytes");
	if (json_is_true(json_object_get(oom, "by_early_figure")))
		add(buf, len, at, "The job took %s of the %s card in its first seconds: an allocator that "
				  "pre-reserves most of the card. ",
		    words_bytes(a, sizeof a, json_object_get(f, "early_bytes")), words_bytes(b, sizeof b, total));
	else
		add(buf, len, at, "The allocator had reserved %s of the %s card but tensors used only %s: the "
				  "memory went to the allocator's cache or a pre-allocated pool, not to the model. ",
		    words_bytes(a, sizeof a, json_object_get(f, "reserved_bytes")), words_bytes(b, sizeof b, total),
		    words_bytes(c, sizeof c, json_object_get(f, "allocated_bytes")));
	add(buf, len, at, "Limit the pool (Paddle FLAGS_fraction_of_gpu_memory_to_use, JAX "
			  "XLA_PYTHON_CLIENT_MEM_FRACTION, PyTorch PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) "
			  "or free the cache between phases.");
}

/* One cause in words (name as the document has it). */
static void cause_text(char *buf, size_t len, size_t *at, const char *cause, const json_t *oom)
{
	char a[32], b[32];
	const json_t *f = json_object_get(oom, "figures");
	if (!strcmp(cause, "co-tenant"))
		co_tenant_text(buf, len, at, oom, f);
	else if (!strcmp(cause, "leak"))
		add(buf, len, at, "A leak: the job's memory floor kept rising until no room was left (on the card, "
				  "or under a cap the job set). Look for tensors kept from one step to the next: a "
				  "loss summed without .item(), outputs appended to a list, a graph kept alive by a "
				  "stored tensor.");
	else if (!strcmp(cause, "pre-allocation"))
		preallocation_text(buf, len, at, oom, f);
	else if (!strcmp(cause, "transient peak"))
		transient_text(buf, len, at, f);
	else if (!strcmp(cause, "fragmentation"))
		fragmentation_text(buf, len, at, oom, f);
	else if (!strcmp(cause, "outside the allocator"))
		outside_text(buf, len, at, f);
	else if (!strcmp(cause, "cap"))
		cap_text(buf, len, at, oom, f);
	else if (!strcmp(cause, "too big"))
		too_big_text(buf, len, at, f);
	else {
		add(buf, len, at, "The job ran out of memory");
		if (doc_has_num(f, "used_bytes") && doc_has_num(f, "total_bytes"))
			add(buf, len, at, " with %s of %s in use", words_bytes(a, sizeof a, json_object_get(f, "used_bytes")),
			    words_bytes(b, sizeof b, json_object_get(f, "total_bytes")));
		add(buf, len, at, ", but no leak, other process, cap, fragmentation, pre-allocation or sudden peak shows "
				  "in the figures: the model and batch may simply not fit. Reduce the batch size, use mixed "
				  "precision or gradient checkpointing.");
	}
}

const char *words_cause(const json_t *oom)
{
	const char *c = doc_str(oom, "cause");
	return c ? c : "unknown";
}

const char *words_causes(char *buf, size_t len, const json_t *oom)
{
	size_t at = 0, i;
	const json_t *c;
	buf[0] = 0;
	add(buf, len, &at, "%s", words_cause(oom));
	json_array_foreach(json_object_get(oom, "causes"), i, c)
	{
		const char *name = json_string_value(c);
		if (name && strcmp(name, words_cause(oom)))
			add(buf, len, &at, ", %s", name);
	}
	return buf;
}

const char *words_oom(char *buf, size_t len, const json_t *oom)
{
	size_t at = 0, i;
	const json_t *c;
	buf[0] = 0;
	cause_text(buf, len, &at, words_cause(oom), oom);
	json_array_foreach(json_object_get(oom, "causes"), i, c)
	{
		const char *name = json_string_value(c);
		if (!name || !strcmp(name, words_cause(oom)) || (!strcmp(name, "leak") && json_is_true(json_object_get(oom, "also_leak"))))
			continue;
		add(buf, len, &at, " Also: ");
		cause_text(buf, len, &at, name, oom);
	}
	return buf;
}

const char *words_said(char *buf, size_t len, const json_t *oom)
{
	char a[32], b[32], c[32];
	size_t at = 0;
	const json_t *f = json_object_get(oom, "framework");
	buf[0] = 0;
	if (!json_is_object(f))
		return buf;
	const char *fw = doc_str(f, "framework");
	char safe[32];
	add(buf, len, &at, "%s", fw && fw[0] ? cli_safe_text(safe, sizeof safe, fw) : "the framework");
	if (doc_has_num(f, "device"))
		add(buf, len, &at, " (device %lld)", (long long)doc_num(f, "device"));
	const char *sep = ": ";
	if (doc_has_num(f, "request_bytes")) {
		add(buf, len, &at, "%stried to allocate %s", sep, words_bytes(a, sizeof a, json_object_get(f, "request_bytes")));
		sep = "; ";
	}
	if (doc_has_num(f, "free_bytes")) {
		add(buf, len, &at, "%s%s free", sep, words_bytes(a, sizeof a, json_object_get(f, "free_bytes")));
		if (doc_has_num(f, "capacity_bytes"))
			add(buf, len, &at, " of %s", words_bytes(b, sizeof b, json_object_get(f, "capacity_bytes")));
		sep = "; ";
	}
	if (doc_has_num(f, "cap_bytes")) {
		add(buf, len, &at, "%s%s allowed", sep, words_bytes(a, sizeof a, json_object_get(f, "cap_bytes")));
		sep = "; ";
	}
	if (doc_has_num(f, "allocated_bytes") || doc_has_num(f, "reserved_bytes")) {
		add(buf, len, &at, "%sthe allocator held %s", sep, words_bytes(a, sizeof a, json_object_get(f, "reserved_bytes")));
		if (doc_has_num(f, "cached_bytes")) {
			add(buf, len, &at, " (%s allocated + %s cached)", words_bytes(b, sizeof b, json_object_get(f, "allocated_bytes")),
			    words_bytes(c, sizeof c, json_object_get(f, "cached_bytes")));
		} else if (doc_has_num(f, "allocated_bytes")) {
			add(buf, len, &at, " (%s allocated)", words_bytes(b, sizeof b, json_object_get(f, "allocated_bytes")));
		}
		sep = "; ";
	}
	if (doc_has_num(f, "process_bytes")) {
		add(buf, len, &at, "%sthe process %s in all", sep, words_bytes(a, sizeof a, json_object_get(f, "process_bytes")));
		sep = "; ";
	}
	if (doc_has_num(f, "largest_free_bytes"))
		add(buf, len, &at, "%sthe largest free block %s", sep,
		    words_bytes(a, sizeof a, json_object_get(f, "largest_free_bytes")));
	size_t i;
	const json_t *o;
	json_array_foreach(json_object_get(f, "others"), i, o)
	{
		add(buf, len, &at, "%s pid %lld %s", i ? "," : "; other processes:", (long long)doc_num(o, "pid"),
		    words_bytes(a, sizeof a, json_object_get(o, "bytes")));
	}
	return buf;
}

const char *words_snapshot(char *buf, size_t len, const json_t *snap)
{
	char a[32], b[32], c[32];
	size_t at = 0;
	buf[0] = 0;
	if (!json_is_object(snap))
		return buf;
	add(buf, len, &at, "the allocator held %s in %lld segment%s: %s live in %lld block%s, %s free",
	    words_bytes(a, sizeof a, json_object_get(snap, "reserved_bytes")), (long long)doc_num(snap, "segments"),
	    doc_num(snap, "segments") == 1 ? "" : "s", words_bytes(b, sizeof b, json_object_get(snap, "allocated_bytes")),
	    (long long)doc_num(snap, "blocks"), doc_num(snap, "blocks") == 1 ? "" : "s",
	    words_bytes(c, sizeof c, json_object_get(snap, "free_bytes")));
	if (doc_num(snap, "free_bytes") > 0) {
		add(buf, len, &at, ", the largest free piece %s", words_bytes(a, sizeof a, json_object_get(snap, "largest_free_bytes")));
		if (doc_has_num(snap, "request_bytes"))
			add(buf, len, &at, " (%s of the free memory too small for the %s asked)",
			    words_bytes(b, sizeof b, json_object_get(snap, "unusable_free_bytes")),
			    words_bytes(c, sizeof c, json_object_get(snap, "request_bytes")));
	}
	return buf;
}

const char *words_placed(char *buf, size_t len, const json_t *placed)
{
	char a[32], b[32], c[32], d[32];
	size_t at = 0;
	buf[0] = 0;
	if (!json_is_object(placed))
		return buf;
	add(buf, len, &at, "NVML %s = the allocator's %s (%s allocated + %s cached)",
	    words_bytes(a, sizeof a, json_object_get(placed, "nvml_bytes")),
	    words_bytes(b, sizeof b, json_object_get(placed, "reserved_bytes")),
	    words_bytes(c, sizeof c, json_object_get(placed, "allocated_bytes")),
	    words_bytes(d, sizeof d, json_object_get(placed, "cached_bytes")));
	if (doc_has_num(placed, "outside_bytes"))
		add(buf, len, &at, " + %s outside it (the CUDA context, libraries' workspaces, other allocators)",
		    words_bytes(a, sizeof a, json_object_get(placed, "outside_bytes")));
	else
		add(buf, len, &at, "; outside it n/a (NVML's figure was behind the allocator's)");
	return buf;
}

const char *words_owner(char *buf, size_t len, const json_t *who)
{
	return gpumon_words_owner(doc_str(who, "owner"), buf, len);
}

const char *words_peak_what(char *buf, size_t len, const json_t *peak)
{
	const char *what = doc_str(peak, "what");
	long long dev = doc_has_num(peak, "dev") ? (long long)doc_num(peak, "dev") : -1;
	if (what && !strcmp(what, "job") && dev >= 0)
		snprintf(buf, len, "the job's processes on GPU %lld", dev);
	else if (what && !strcmp(what, "job"))
		snprintf(buf, len, "the job's processes");
	else if (what && !strcmp(what, "device") && dev >= 0)
		snprintf(buf, len, "GPU %lld's used memory", dev);
	else if (what && !strcmp(what, "framework"))
		snprintf(buf, len, "the framework's highest allocated");
	else
		snprintf(buf, len, "%s", what ? what : "n/a");
	return buf;
}

const char *words_unaccounted_why(const char *why)
{
	static const char *const code[] = {"device_unknown", "not_visible", "mig", "no_gpu", "no_nvml_figure"};
	static const int value[] = {GPUMON_UNACCOUNTED_DEVICE_UNKNOWN, GPUMON_UNACCOUNTED_NOT_VISIBLE, GPUMON_UNACCOUNTED_MIG,
				    GPUMON_UNACCOUNTED_NO_GPU, GPUMON_UNACCOUNTED_NO_NVML_FIGURE};
	for (size_t i = 0; why && i < sizeof code / sizeof code[0]; i++)
		if (!strcmp(why, code[i]))
			return gpumon_words_unaccounted_why(value[i]);
	return NULL;
}

/* Sets every member named "pid" under v to null. */
static void unname(json_t *v)
{
	const char *key;
	json_t *x;
	size_t i;
	if (json_is_object(v)) {
		json_object_foreach(v, key, x)
		{
			if (!strcmp(key, "pid"))
				json_object_set_new(v, key, json_null());
			else
				unname(x);
		}
	} else if (json_is_array(v)) {
		json_array_foreach(v, i, x) unname(x);
	}
}

json_t *words_document(const json_t *doc)
{
	json_t *copy = json_deep_copy(doc);
	const char *type = doc_str(json_object_get(doc, "source"), "type");
	if (copy && type && !strcmp(type, "csv"))
		unname(copy);
	return copy;
}

/* Whether an entry of alerts[] is at time t (the model marks the one an "alert" event stands for). */
static int model_alert_at(const json_t *alerts, double t)
{
	size_t i;
	const json_t *a;
	json_array_foreach(alerts, i, a) if (doc_has_num(a, "time") && doc_num(a, "time") == t) return 1;
	return 0;
}

/* Sorts by time, keeping the order of equal times (an insertion sort: a few hundred at most). */
static void sort_by_time(json_t **items, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && doc_num(items[j], "time") < doc_num(items[j - 1], "time"); j--) {
			json_t *t = items[j];
			items[j] = items[j - 1];
			items[j - 1] = t;
		}
}

/* Appends {time, kind, text, live} to list; -1 when out of memory. */
static int note(json_t *list, const json_t *time, const char *kind, const char *text, int live)
{
	json_t *o = json_pack("{s:O, s:s, s:s?, s:b}", "time", time ? (json_t *)time : json_null(), "kind", kind,
			      "text", text, "live", live);
	return o ? json_array_append_new(list, o) : -1;
}

json_t *words_alert_list(const json_t *doc)
{
	const json_t *alerts = json_object_get(doc, "alerts"), *x;
	json_t *list = json_array();
	char buf[1024];
	size_t i;
	int bad = !list;
	json_array_foreach(alerts, i, x)
	{
		const char *kind = doc_str(x, "kind");
		if (!bad)
			bad = note(list, json_object_get(x, "time"), kind && !strcmp(kind, "headroom") ? "headroom" : "leak",
				   words_alert(buf, sizeof buf, x), json_is_true(json_object_get(x, "live")));
	}
	json_array_foreach(json_object_get(doc, "events"), i, x)
	{
		const char *kind = doc_str(x, "kind");
		if (bad || !kind || (strcmp(kind, "alert") && strcmp(kind, "oom")))
			continue;
		if (!strcmp(kind, "alert") && doc_has_num(x, "time") && model_alert_at(alerts, doc_num(x, "time")))
			continue; /* the model's alert above, given live */
		bad = note(list, json_object_get(x, "time"), kind, doc_str(x, "text") ? doc_str(x, "text") : kind, 1);
	}
	size_t n = bad ? 0 : json_array_size(list);
	json_t **items = n ? malloc(n * sizeof *items) : NULL;
	if (n && !items)
		bad = 1;
	for (i = 0; !bad && i < n; i++)
		items[i] = json_incref(json_array_get(list, i));
	if (!bad && n) { /* oldest first; the model's alert before an event at the same moment */
		sort_by_time(items, n);
		json_array_clear(list);
		for (i = 0; i < n; i++)
			json_array_append_new(list, items[i]);
	}
	free(items);
	if (bad) {
		json_decref(list);
		return NULL;
	}
	return list;
}

const char *words_rank_verdict(char *buf, size_t len, const json_t *leak)
{
	const char *v = doc_str(leak, "verdict");
	char r[32];
	if (!v)
		snprintf(buf, len, "n/a");
	else if (!strcmp(v, "leak") && doc_has_num(leak, "rate_bytes_per_second"))
		snprintf(buf, len, "LEAK +%s/s",
			 words_bytes(r, sizeof r, json_object_get(leak, "rate_bytes_per_second")));
	else if (!strcmp(v, "leak"))
		snprintf(buf, len, "LEAK");
	else if (!strcmp(v, "none"))
		snprintf(buf, len, "no leak");
	else
		snprintf(buf, len, "too short to tell");
	return buf;
}

const char *words_rank_job(char *buf, size_t len, const json_t *doc)
{
	const json_t *first = json_array_get(json_object_get(doc, "ranks"), 0);
	const char *launcher = doc_str(first, "launcher"), *id = doc_str(first, "job_id");
	char safe[72];
	size_t at = 0;
	if (!len)
		return buf;
	buf[0] = 0;
	add(buf, len, &at, "%s", launcher ? cli_safe_text(safe, 20, launcher) : "distributed");
	if (id)
		add(buf, len, &at, " job %s", cli_safe_text(safe, sizeof safe, id));
	if (doc_has_num(first, "world_size"))
		add(buf, len, &at, ", world size %lld", (long long)doc_num(first, "world_size"));
	return buf;
}

const char *words_host(char *buf, size_t len, const json_t *hosts, size_t i)
{
	const json_t *h = json_array_get(hosts, i);
	const char *name = doc_str(h, "name"), *first = doc_str(json_array_get(hosts, 0), "name");
	long long g0 = (long long)doc_num(h, "first_dev"), n = (long long)doc_num(h, "gpus");
	char a[81], b[81];
	size_t at = 0;
	if (!len)
		return buf;
	buf[0] = 0;
	add(buf, len, &at, "%s: GPU%s %lld", name ? cli_safe_text(a, sizeof a, name) : "an unnamed host", n > 1 ? "s" : "",
	    g0);
	if (n > 1)
		add(buf, len, &at, "-%lld", g0 + n - 1);
	if (i == 0) {
		add(buf, len, &at, " (the clock of this report)");
		return buf;
	}
	add(buf, len, &at, "; its times moved by %+.3f s by the wall clocks of both hosts", doc_num(h, "clock_offset_s"));
	if (doc_has_num(h, "step_skew_s"))
		add(buf, len, &at, "; checked by %lld steps both reached: %+.3f s from %s's moments (median)",
		    (long long)doc_num(h, "steps_checked"), doc_num(h, "step_skew_s"),
		    first ? cli_safe_text(b, sizeof b, first) : "an unnamed host");
	else
		add(buf, len, &at, " (not checked: no steps reported on both)");
	return buf;
}
