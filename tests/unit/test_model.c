/* SPDX-License-Identifier: MIT */
/* test_model.c — the run model's semantics on synthetic records (no driver): the rule that picks
 * the run's verdict, time to out-of-memory and its bound, the peak's owner, restarted step
 * counters, the out-of-memory moment, alerts, bounded process summaries, a job that ends, and
 * framework devices mapped to GPUs. test_model_doc.c holds the document's side. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <errno.h>
#include <math.h>

#include "rec_util.h"
#include "model_util.h"

static void test_rule(void)
{
	gpumon_verdict v, all[16];
	model_new(100, 0, 0, 0, 0);
	run_scenario(300, 0, 300, 4 * MiB, 20 * GiB);
	gpumon_model_finish(M, 0, 0);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_FRAMEWORK && v.pid == 100 && !strcmp(v.framework, "torch"),
	   "the job reports its allocator: the verdict is on the framework series (series %d)", v.series);
	is_int(v.leak.verdict, GPUMON_LEAK_SUSPECTED, "its leak, though NVML shows the job flat");
	size_t n = gpumon_model_verdicts(M, all, 16);
	int sorted = n >= 4;
	for (size_t i = 1; i < n && i < 16; i++)
		sorted &= all[i - 1].series <= all[i].series; /* the enum is in the rule's order */
	ok(sorted, "every series judged (%zu), in the rule's order", n);
	int kinds = 0;
	for (size_t i = 0; i < n && i < 16; i++)
		kinds |= 1 << all[i].series;
	/* a job's run is never judged on the GPU's used memory, which mixes in everything else there */
	is_int(kinds, (1 << 1) | (1 << 2) | (1 << 3), "framework, job and process series, no device series");
	for (size_t i = 0; i < n && i < 16; i++)
		if (all[i].series == GPUMON_SERIES_PROCESS)
			ok(all[i].pid == 100 || all[i].pid == 101, "a run's process series are the job's (pid %lld)",
			   (long long)all[i].pid);
	is_int(gpumon_model_verdicts(M, NULL, 0), n, "counted without a buffer");
	done();

	model_new(100, 0, 0, 0, 0); /* too few framework samples: the job's NVML series decides */
	run_scenario(300, 16 * MiB, 10, 4 * MiB, 20 * GiB);
	gpumon_model_finish(M, 0, 0);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_JOB && v.dev == 0, "framework without enough data: the job's series (%d)", v.series);
	is_int(v.leak.verdict, GPUMON_LEAK_SUSPECTED, "its leak");
	ok(fabs(v.leak.rate_bytes_per_second - 16.0 * MiB) < 0.01 * 16 * MiB, "at 16 MiB/s (%.0f)",
	   v.leak.rate_bytes_per_second);
	done();

	model_new(100, 0, 0, 0, 0); /* ... and its verdict may be "none" */
	run_scenario(300, 0, 10, 4 * MiB, 20 * GiB);
	gpumon_model_finish(M, 0, 0);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_JOB && v.leak.verdict == GPUMON_LEAK_NONE,
	   "a flat job, framework without enough data: none, on the job's series (%d, %d)", v.series, v.leak.verdict);
	done();

	model_new(100, 0, 0, 0, 0); /* nothing has enough data: the first kind there is */
	run_scenario(10, 16 * MiB, 10, 4 * MiB, 20 * GiB);
	gpumon_model_finish(M, 0, 0);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_FRAMEWORK && v.leak.verdict == GPUMON_LEAK_INSUFFICIENT_DATA,
	   "too little data anywhere: insufficient data, on the framework series (%d, %d)", v.series, v.leak.verdict);
	done();

	model_new(100, 0, 0, 0, 0); /* a co-tenant's framework figures are not the job's */
	put(job_rec(T0, 101));
	for (unsigned i = 0; i < 300; i++) {
		uint64_t t = T0 + S + i * S;
		proc(0, t, 100, 2 * GiB + i * 16 * MiB);
		fw(t + 1, 200, i, GiB + i * 64 * MiB, 10 * GiB, 0);
		dev_row(0, t + 2, 20 * GiB + i * 16 * MiB);
	}
	gpumon_model_finish(M, 0, 0);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_JOB, "another pid's framework series: the job's NVML series instead (%d)", v.series);
	done();

	model_new(0, 0, 0, 0, 0); /* a machine: each process on its own figure */
	for (unsigned i = 0; i < 300; i++) {
		uint64_t t = T0 + S + i * S;
		proc(0, t, 300, GiB + i * 8 * MiB);
		proc(0, t, 301, 5 * GiB);
		dev_row(0, t + 2, 6 * GiB + i * 8 * MiB);
	}
	gpumon_model_finish(M, 0, -1);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_PROCESS && v.pid == 300 && v.leak.verdict == GPUMON_LEAK_SUSPECTED,
	   "a machine: the leaking process (series %d, pid %lld)", v.series, (long long)v.pid);
	is_int(gpumon_model_process_verdict(M, 0, 301, &v), GPUMON_OK, "a process's own verdict");
	is_int(v.leak.verdict, GPUMON_LEAK_NONE, "the flat one: none");
	is_int(gpumon_model_process_verdict(M, 0, 999, &v), GPUMON_E_NOT_FOUND, "an unknown pid");
	done();

	model_new(0, 0, 0, 0, 0); /* only the GPU's figure */
	for (unsigned i = 0; i < 300; i++)
		dev_row(0, T0 + S + i * S, 6 * GiB + i * 8 * MiB);
	gpumon_model_finish(M, 0, -1);
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_DEVICE && v.dev == 0 && v.leak.verdict == GPUMON_LEAK_SUSPECTED,
	   "only device rows: the GPU's used memory (%d)", v.series);
	done();

	model_new(0, 0, 0, 0, 0);
	is_int(gpumon_model_verdict(M, &v), GPUMON_E_NOT_FOUND, "no records: no verdict");
	done();
}

/* ---- time to out-of-memory ------------------------------------------------------------------------ */

static void test_time_to_oom(void)
{
	const uint64_t rate = 16 * MiB, cotenant = 20 * GiB;
	model_new(100, 0, 0, 0, 0);
	run_scenario(300, rate, 0, 0, cotenant);
	uint64_t job_last = 2 * GiB + 299 * rate + GiB, used_last = cotenant + job_last;
	uint64_t free_last = TOTAL - RESV - used_last;
	gpumon_verdict v = verdict_of();
	is_int(v.series, GPUMON_SERIES_JOB, "the job's series");
	is_int(v.room, GPUMON_ROOM_FREE, "bounded by the GPU's free memory");
	is_int(v.room_bytes, free_last, "its free memory at the series' last point (the co-tenant's 20 GiB taken)");
	double want = (double)free_last / (double)rate;
	ok(fabs(v.seconds_to_oom - want) <= 0.02 * want, "time to out-of-memory %.1f s, free / rate = %.1f s",
	   v.seconds_to_oom, want);
	is_int(v.steps_to_oom < 0, 1, "no steps on an NVML series");
	double gpu_s = 0;
	is_int(gpumon_model_gpu_oom(M, 0, &gpu_s), GPUMON_OK, "the GPU's time to out-of-memory");
	ok(fabs(gpu_s - v.seconds_to_oom) < 1e-6, "is the run's (%.1f s)", gpu_s);
	done();

	uint64_t limit = job_last + 4 * GiB; /* --limit: 4 GiB above the job's last figure */
	model_new(100, 0, limit, 0, 0);
	run_scenario(300, rate, 0, 0, cotenant);
	v = verdict_of();
	is_int(v.room, GPUMON_ROOM_LIMIT, "a --limit below the free memory is the bound");
	is_int(v.room_bytes, 4 * GiB, "what is left under it");
	want = 4.0 * GiB / (double)rate;
	ok(fabs(v.seconds_to_oom - want) <= 0.02 * want, "%.1f s, want %.1f s", v.seconds_to_oom, want);
	done();

	model_new(100, 0, 0, 0, 0); /* the allocator's cap, 3 GiB above what it reserved last, 5 GiB above allocated */
	const uint64_t step_rate = 4 * MiB;
	uint64_t reserved_last = GiB + 299 * step_rate + 2 * GiB, cap = reserved_last + 3 * GiB;
	put(job_rec(T0, 101));
	for (unsigned i = 0; i < 300; i++) {
		uint64_t t = T0 + S + i * S;
		proc(0, t, 100, 10 * GiB);
		fw(t + 1, 100, i, GiB + i * step_rate, GiB + i * step_rate + 2 * GiB, cap);
		dev_row(0, t + 2, 10 * GiB);
	}
	v = verdict_of();
	ok(v.series == GPUMON_SERIES_FRAMEWORK && v.room == GPUMON_ROOM_CAP, "bounded by the allocator's cap (room %d)",
	   v.room);
	/* the allocator's 2 GiB cache is room too: cap - allocated (a pre-allocated pool that is the
	 * cap itself, JAX's default, would otherwise leave none) */
	is_int(v.room_bytes, 5 * GiB, "what is left under it (cap - allocated)");
	want = 5.0 * GiB / (double)step_rate;
	ok(fabs(v.steps_to_oom - want) <= 0.02 * want, "steps to out-of-memory %.1f, want %.1f", v.steps_to_oom, want);
	ok(v.seconds_to_oom > 0, "and seconds (%.1f)", v.seconds_to_oom);
	done();
}

/* ---- peaks ------------------------------------------------------------------------------------------ */

/* Process 100 rises from 1 to 10 GiB and back while co-tenant 200 holds 30 GiB, flat. */
static void peak_scenario(void)
{
	proc(0, T0, 200, 30 * GiB);
	for (unsigned i = 0; i < 120; i++) {
		uint64_t t = T0 + S + i * S, p = GiB + (i <= 60 ? i : 120 - i) * 150 * MiB;
		proc(0, t, 100, p);
		dev_row(0, t + 2, 30 * GiB + p);
	}
	gpumon_model_finish(M, 0, 0);
}

static void test_peak(void)
{
	int what = 0, dev = -1;
	gpumon_peak p, win[8];
	size_t nwin = 0;
	model_new(0, 0, 0, 0, 0);
	peak_scenario();
	is_int(gpumon_model_peak(M, &what, &dev, &p, win, 8, &nwin), GPUMON_OK, "a machine's peak");
	ok(what == GPUMON_PEAK_DEVICE && dev == 0, "the fullest GPU's");
	is_int(p.bytes, 30 * GiB + GiB + 60 * 150 * MiB, "its highest used");
	is_int(p.t_ns, T0 + 61 * S + 2, "when");
	is_int(p.owner_pid, 100, "owned by the process whose rise made it");
	is_int(p.largest_pid, 200, "the largest holder then: the flat co-tenant");
	is_int(nwin, 2, "two windows of a minute");
	json_t *d = document(0);
	ok(json_integer_value(at(d, "peak.owner.pid")) == 100 && json_integer_value(at(d, "peak.largest.pid")) == 200,
	   "the document names both");
	is_str(json_string_value(at(d, "peak.largest.command")), "python other.py", "with the co-tenant's command");
	is_str(json_string_value(at(d, "peak.what")), "device", "what: device");
	json_decref(d);
	done();

	model_new(100, 0, 0, 0, 0); /* the same as a run of job 100: the job's peak */
	peak_scenario();
	gpumon_model_peak(M, &what, &dev, &p, NULL, 0, &nwin);
	ok(what == GPUMON_PEAK_JOB && p.bytes == GiB + 60 * 150 * MiB, "a run: the job's own peak");
	ok(p.owner_pid == 100 && p.largest_pid == 200, "owner 100, largest 200 (%lld, %lld)", (long long)p.owner_pid,
	   (long long)p.largest_pid);
	done();
}

/* ---- framework segments ------------------------------------------------------------------------------ */

static void test_restarted_steps(void)
{
	model_new(100, GPUMON_MODEL_TIMELINES, 0, 0, 0);
	for (unsigned i = 0; i < 600; i++) { /* steps 0..299 leaking, then 0..299 again, flat */
		uint64_t t = T0 + S + i * (S / 10), step = i % 300;
		uint64_t a = i < 300 ? GiB + step * 4 * MiB : 3 * GiB;
		fw(t, 100, (int64_t)step, a, a + GiB, 0);
	}
	gpumon_model_finish(M, 0, 0);
	gpumon_verdict all[8];
	size_t n = gpumon_model_verdicts(M, all, 8);
	int seg0 = -1, seg1 = -1;
	for (size_t i = 0; i < n && i < 8; i++)
		if (all[i].series == GPUMON_SERIES_FRAMEWORK && all[i].pid == 100)
			*(all[i].segment ? &seg1 : &seg0) = all[i].leak.verdict;
	is_int(seg0, GPUMON_LEAK_SUSPECTED, "the first segment (steps 0..299) is judged: a leak");
	is_int(seg1, GPUMON_LEAK_NONE, "the second (the counter restarted) is judged apart: none");
	json_t *d = document(GPUMON_DOC_TIMELINE);
	json_t *series = json_object_get(d, "series"), *e;
	size_t i;
	int segs = 0;
	json_array_foreach(series, i, e) segs |= 1 << json_integer_value(at(e, "series.segment"));
	is_int(segs, 3, "the document's series hold segments 0 and 1");
	is_int(json_array_size(at(d, "timeline.framework")), 2, "and a timeline each");
	json_decref(d);
	done();
}

/* ---- the out-of-memory moment ------------------------------------------------------------------------ */

static void test_oom_event(void)
{
	gpumon_model_oom o;
	model_new(100, 0, 0, 0, 0);
	is_int(gpumon_model_oom_get(M, &o), GPUMON_E_NOT_FOUND, "no out-of-memory yet");
	run_scenario(300, 64 * MiB, 0, 0, 20 * GiB); /* the job climbs to 22.7 GiB, 43.7 GiB used */
	uint64_t t = T0 + 300 * S + S / 2;
	ev(t, "oom", "PyTorch: torch.OutOfMemoryError: CUDA out of memory.");
	ev(t + 6 * S, "oom", "PyTorch: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB");
	gpumon_model_finish(M, 0, 1);
	is_int(gpumon_model_oom_get(M, &o), GPUMON_OK, "an out-of-memory moment");
	is_int(o.t_ns, t, "at the first \"oom\" event");
	is_int(o.dev, 0, "on the job's GPU");
	is_str(o.message, "PyTorch: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
	       "the message quoted is the last one");
	is_int(o.signs, 2, "two signs, 6 s apart");
	ok((o.input.known & GPUMON_OOM_F_FIGURES) && (o.input.figures.known & GPUMON_FIG_REQUEST) &&
	       o.input.figures.request_bytes == 2 * GiB,
	   "the message's figures read: 2.00 GiB asked");
	is_int(o.nholders, 3, "three holders");
	ok(o.nholders == 3 && o.holders[0].pid == 100 && o.holders[0].job && o.holders[1].pid == 200 &&
	       !o.holders[1].job && o.holders[2].pid == 101 && o.holders[2].job,
	   "largest first, the job's marked (the child named by a JOB record too)");
	ok(o.nholders == 3 && !strcmp(o.holders[1].user, "alice") && !strcmp(o.holders[1].command, "python other.py") &&
	       o.holders[1].used_bytes == 20 * GiB,
	   "with user, command and figure");
	ok(o.nlast >= 5 && o.nlast <= 16, "the last seconds (%zu points)", o.nlast);
	int ordered = 1;
	for (size_t i = 0; i < o.nlast; i++)
		ordered &= o.last[i].t_ns <= t + S / 10 && o.last[i].t_ns + 10 * S >= t &&
			   (i == 0 || o.last[i].t_ns > o.last[i - 1].t_ns);
	ok(ordered, "about a second apart, oldest first, within 10 s before the moment");
	ok(o.nlast && o.last[o.nlast - 1].used_bytes == 20 * GiB + 2 * GiB + 299 * 64 * MiB + GiB,
	   "the last one is the last row's used memory");
	unsigned want = GPUMON_OOM_F_TOTAL | GPUMON_OOM_F_USED | GPUMON_OOM_F_JOB | GPUMON_OOM_F_OTHERS | GPUMON_OOM_F_LEAK;
	ok((o.input.known & want) == want, "figures known: total, used, job, others, leak (0x%x)", o.input.known);
	ok(o.input.total_bytes == TOTAL && o.input.others_bytes == 20 * GiB && o.input.top_other_pid == 200 &&
	       o.input.job_bytes == 2 * GiB + 299 * 64 * MiB + GiB,
	   "the card, the others (pid 200: 20 GiB) and the job then");
	ok(o.diagnosis.cause == GPUMON_OOM_CO_TENANT && (o.diagnosis.also & GPUMON_OOM_ALSO_LEAK),
	   "diagnosis: a co-tenant, and the job's leak too (%d, 0x%x)", o.diagnosis.cause, o.diagnosis.also);
	json_t *d = document(0);
	is_str(json_string_value(at(d, "oom.cause")), "co-tenant", "the document's cause");
	ok(json_is_true(at(d, "oom.also_leak")) && json_array_size(at(d, "oom.holders")) == 3 &&
	       json_integer_value(at(d, "oom.figures.top_other.pid")) == 200,
	   "also_leak, holders and the top other in the document");
	json_decref(d);
	done();
}

/* ---- what the framework said, the inside view ---------------------------------------------------- */

/* The job (pid 100) alone on GPU 0: idle, then its NVML figure follows job(i) at 10 rows a second. */
static void nvml_job(unsigned rows, uint64_t (*job)(unsigned))
{
	for (unsigned i = 0; i < rows; i++) {
		uint64_t t = T0 + S + i * (S / 10), b = job(i);
		proc(0, t, 100, b);
		dev_row(0, t + 2, b);
	}
}

static uint64_t from_nothing(unsigned i) /* 10 s holding its context only, then 3 GiB a row to full */
{
	uint64_t b = i < 100 ? 512 * MiB : 512 * MiB + (i - 99) * 3 * GiB;
	return b < TOTAL - RESV - GiB ? b : TOTAL - RESV - GiB;
}

static void test_oom_no_baseline(void)
{
	gpumon_model_oom o;
	model_new(100, 0, 0, 0, 0);
	nvml_job(130, from_nothing);
	ev(T0 + S + 129 * (S / 10), "oom",
	   "PyTorch: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
	   "79.50 GiB of which 512.00 MiB is free. Including non-PyTorch memory, this process has 78.50 GiB memory in use. "
	   "Of the allocated memory 77.90 GiB is allocated by PyTorch, and 100.00 MiB is reserved by PyTorch but "
	   "unallocated.");
	gpumon_model_finish(M, 0, 1);
	is_int(gpumon_model_oom_get(M, &o), GPUMON_OK, "an out-of-memory");
	ok(!(o.input.known & GPUMON_OOM_F_FLOOR), "a job holding only its context has no usual level to peak from");
	ok((o.input.known & GPUMON_OOM_F_STEADY) && !o.input.steady, "it never held a level: steady known, false");
	ok(!(o.diagnosis.causes & GPUMON_OOM_BIT(GPUMON_OOM_TRANSIENT_PEAK)), "not a transient peak (causes 0x%x)",
	   o.diagnosis.causes);
	is_int(o.diagnosis.cause, GPUMON_OOM_TOO_BIG, "too big from the start: 98 GiB needed of a 79.5 GiB card");
	json_t *d = document(0);
	is_str(json_string_value(at(d, "oom.cause")), "too big", "the document's cause");
	is_str(json_string_value(json_array_get(at(d, "oom.causes"), 0)), "too big", "first of its causes");
	is_int(json_integer_value(at(d, "oom.framework.request_bytes")), 20 * GiB, "what torch said: the request");
	ok(json_is_false(at(d, "oom.figures.steady")), "figures.steady false");
	json_decref(d);
	done();
}

static uint64_t steady_then_peak(unsigned i) /* 10 GiB for 20 s, then nothing moves: the request fails */
{
	(void)i;
	return 10 * GiB;
}

/* A training job with steps at a steady 10 GiB, then an evaluation asks for 75 GiB: a transient peak;
 * the monitor inside the job reports the figures and the allocator's snapshot. */
static void test_oom_inside_figures(void)
{
	gpumon_model_oom o;
	model_new(100, 0, 0, 0, 0);
	nvml_job(200, steady_then_peak);
	for (unsigned s = 1; s <= 20; s++)
		fw(T0 + S + s * S - S / 2, 100, s, 9 * GiB, 9 * GiB + 512 * MiB, 0);
	uint64_t t = T0 + 21 * S;
	gpumon_oom_figures f;
	memset(&f, 0, sizeof f);
	snprintf(f.framework, sizeof f.framework, "torch");
	f.pid = 100;
	f.device = 0;
	f.known = GPUMON_FIG_DEVICE | GPUMON_FIG_REQUEST | GPUMON_FIG_FREE | GPUMON_FIG_CAPACITY | GPUMON_FIG_ALLOCATED |
		  GPUMON_FIG_RESERVED;
	f.request_bytes = 75 * GiB + 12345;
	f.free_bytes = TOTAL - RESV - 10 * GiB;
	f.capacity_bytes = TOTAL - RESV;
	f.allocated_bytes = 9 * GiB;
	f.reserved_bytes = 9 * GiB + 512 * MiB;
	char *text = NULL;
	is_int(gpumon_oom_figures_encode(&f, &text), GPUMON_OK, "figures encoded");
	ev(t, GPUMON_EVENT_OOM_FIGURES, text);
	gpumon_free(text);
	gpumon_alloc_snapshot sn;
	memset(&sn, 0, sizeof sn);
	snprintf(sn.framework, sizeof sn.framework, "torch");
	sn.pid = 100;
	sn.known = GPUMON_SNAP_REQUEST | GPUMON_SNAP_STACKS | GPUMON_SNAP_DEVICE;
	sn.request_bytes = f.request_bytes;
	sn.reserved_bytes = f.reserved_bytes;
	sn.allocated_bytes = f.allocated_bytes;
	sn.free_bytes = 512 * MiB;
	sn.largest_free_bytes = 512 * MiB;
	sn.unusable_free_bytes = 512 * MiB;
	sn.segments = 4;
	sn.blocks = 10;
	sn.nsites = 1;
	snprintf(sn.sites[0].file, sizeof sn.sites[0].file, "/srv/job/train.py");
	sn.sites[0].line = 42;
	snprintf(sn.sites[0].function, sizeof sn.sites[0].function, "evaluate");
	sn.sites[0].bytes = 9 * GiB;
	sn.sites[0].blocks = 10;
	text = NULL;
	is_int(gpumon_snapshot_encode(&sn, &text), GPUMON_OK, "snapshot encoded");
	ev(t + S / 10, GPUMON_EVENT_SNAPSHOT, text);
	gpumon_free(text);
	/* then the message the job printed, rounded as torch prints it, once the snapshot was taken: 7 s
	   later (torch's first named snapshot imports much of torch) */
	ev(t + 7 * S, "oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 75.00 GiB. GPU 0 has a total "
			 "capacity of 79.50 GiB of which 69.50 GiB is free. Of the allocated memory 9.00 GiB is allocated "
			 "by PyTorch, and 512.00 MiB is reserved by PyTorch but unallocated.");
	gpumon_model_finish(M, 0, 1);
	is_int(gpumon_model_oom_get(M, &o), GPUMON_OK, "an out-of-memory");
	is_int(o.t_ns, t, "at the inside monitor's report, the first sign");
	is_int(o.signs, 1, "one episode: the report and the message of its request, 7 s apart");
	is_int(o.pid, 100, "the process that ran out");
	is_int(o.input.figures.request_bytes, 75 * GiB + 12345, "the inside monitor's exact request, not the rounded one");
	ok((o.input.known & GPUMON_OOM_F_STEADY) && o.input.steady, "20 steps done: a steady level");
	is_int(o.input.steady_bytes, 9 * GiB + 256 * MiB, "its usual peak: max_allocated at the last step");
	is_int(o.diagnosis.cause, GPUMON_OOM_TRANSIENT_PEAK, "a transient peak");
	ok((o.input.known & GPUMON_OOM_F_SNAPSHOT) && o.input.snapshot.nsites == 1, "the snapshot kept");
	ok((o.input.known & GPUMON_OOM_F_PROCESS) && o.input.process_bytes == 10 * GiB, "NVML's figure of the process");
	json_t *d = document(0);
	is_str(json_string_value(at(d, "oom.cause")), "transient peak", "the document's cause");
	is_str(json_string_value(json_array_get(at(d, "oom.snapshot.sites"), 0) ? json_object_get(
		   json_array_get(at(d, "oom.snapshot.sites"), 0), "file") : NULL),
	       "/srv/job/train.py", "the snapshot's top site in the document");
	is_int(json_integer_value(at(d, "oom.pid")), 100, "oom.pid");
	is_int(json_integer_value(at(d, "oom.framework.cached_bytes")), 512 * MiB, "what the framework said: cached");
	ok(json_integer_value(at(d, "oom.figures.excess_bytes")) > 70 * (json_int_t)GiB, "oom.figures.excess_bytes");
	size_t i;
	json_t *e;
	int leaked = 0;
	json_array_foreach(json_object_get(d, "events"), i, e)
		leaked |= !strcmp(json_string_value(json_object_get(e, "kind")), GPUMON_EVENT_SNAPSHOT) ||
			  !strcmp(json_string_value(json_object_get(e, "kind")), GPUMON_EVENT_OOM_FIGURES);
	ok(!leaked, "figures and snapshots are not listed as events");
	json_decref(d);
	done();
}

/* Memory outside the allocator, placed for every sample; the exporter and watch ask for it typed. */
static void test_placed(void)
{
	gpumon_placed pl;
	model_new(100, 0, 0, 0, 0);
	is_int(gpumon_model_placed(M, 0, 100, &pl), GPUMON_E_NOT_FOUND, "nothing placed yet");
	proc(0, T0 + S, 100, 17 * GiB);
	dev_row(0, T0 + S + 1, 17 * GiB);
	fw(T0 + 2 * S, 100, 5, 8 * GiB, 10 * GiB, 0);
	is_int(gpumon_model_placed(M, 0, 100, &pl), GPUMON_OK, "placed");
	ok(pl.nvml_bytes == 17 * GiB && pl.reserved_bytes == 10 * GiB && pl.allocated_bytes == 8 * GiB &&
	       pl.outside_known && pl.outside_bytes == 7 * GiB && pl.step == 5 && !strcmp(pl.framework, "torch") &&
	       pl.cached_bytes == 2 * GiB,
	   "NVML 17 GiB = 10 GiB reserved (8 allocated + 2 cached) + 7 GiB outside");
	fw(T0 + 3 * S, 100, 6, 8 * GiB, 18 * GiB, 0);
	is_int(gpumon_model_placed(M, 0, 100, &pl), GPUMON_OK, "placed again");
	ok(!pl.outside_known, "NVML's figure behind the allocator's: outside unknown, not 0");
	is_int(gpumon_model_placed(M, 1, 100, &pl), GPUMON_E_NOT_FOUND, "not on another GPU");
	json_t *d = document(0);
	json_t *p = at(json_array_get(json_object_get(d, "frameworks"), 0), "placed");
	ok(json_is_object(p) && json_integer_value(json_object_get(p, "nvml_bytes")) == (json_int_t)(17 * GiB) &&
	       json_is_null(json_object_get(p, "outside_bytes")),
	   "the document's frameworks[].placed, outside null");
	json_decref(d);
	done();
}

/* A job growing 1 GiB every 0.1 s next to a 60 GiB co-tenant: the co-tenant, and the job's growth. */
static uint64_t growing(unsigned i)
{
	return i < 10 ? 512 * MiB : 512 * MiB + (i - 9) * GiB;
}

static void test_oom_growth(void)
{
	gpumon_model_oom o;
	model_new(100, 0, 0, 0, 0);
	proc(0, T0 + 1, 200, 60 * GiB);
	for (unsigned i = 0; i < 28; i++) {
		uint64_t t = T0 + S + i * (S / 10), b = growing(i);
		proc(0, t, 100, b);
		dev_row(0, t + 2, b + 60 * GiB);
	}
	ev(T0 + S + 28 * (S / 10), "oom",
	   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 79.50 "
	   "GiB of which 100.00 MiB is free. Process 200 has 60.00 GiB memory in use. Including non-PyTorch memory, this "
	   "process has 19.50 GiB memory in use. Of the allocated memory 19.00 GiB is allocated by PyTorch, and 0 bytes is "
	   "reserved by PyTorch but unallocated.");
	/* the listing after the moment has the job's last gigabyte; the one a second later is past it */
	proc(0, T0 + S + 28 * (S / 10) + S / 5, 100, growing(28));
	proc(0, T0 + S + 28 * (S / 10) + 2 * S, 100, growing(40));
	proc(0, T0 + S + 28 * (S / 10) + S / 4, 200, 70 * GiB);
	gpumon_model_finish(M, 0, 1);
	is_int(gpumon_model_oom_get(M, &o), GPUMON_OK, "an out-of-memory");
	ok(o.nholders == 2 && o.holders[0].pid == 200 && o.holders[0].used_bytes == 60 * GiB,
	   "a co-tenant listed after the moment keeps its figure then");
	ok(o.nholders == 2 && o.holders[1].pid == 100 && o.holders[1].used_bytes == growing(28),
	   "the job listed 0.2 s after the moment: what it held when it ran out");
	is_int(o.input.job_bytes, growing(28), "and the job's figure with it, not the one 2 s later");
	is_int(o.diagnosis.cause, GPUMON_OOM_CO_TENANT, "the co-tenant");
	ok(o.diagnosis.growth_bytes == 18 * GiB, "the job's own growth to the moment: 18 GiB (%.2f GiB)",
	   (double)o.diagnosis.growth_bytes / GiB);
	ok(o.diagnosis.growth_seconds > 1.7 && o.diagnosis.growth_seconds < 2.0, "in about 1.9 s (%.2f s)",
	   o.diagnosis.growth_seconds);
	is_int(o.input.figures.nothers, 1, "the message's other process");
	done();
}

/* A job that failed with its GPU full, with no message seen. */
static void full_card(uint64_t top, int exit_status, gpumon_model_oom *o, int *found)
{
	model_new(100, 0, 0, 0, 0);
	for (unsigned i = 0; i < 30; i++) {
		uint64_t t = T0 + S + i * S, job = i < 25 ? 10 * GiB + i * GiB : top;
		proc(0, t, 100, job);
		dev_row(0, t + 2, job);
	}
	gpumon_model_finish(M, 0, exit_status);
	*found = gpumon_model_oom_get(M, o) == GPUMON_OK;
	done();
}

static void test_oom_full_card(void)
{
	gpumon_model_oom o;
	int found;
	uint64_t full = TOTAL - RESV - 64 * MiB; /* 99.3 % of the card */
	full_card(full, 1, &o, &found);
	ok(found, "a failed job with its GPU full at the end: out of memory");
	ok(found && o.t_ns == T0 + 30 * S + 2 && o.message[0] == 0 && o.dev == 0,
	   "at the last full row, no message");
	ok(found && o.input.used_bytes == full, "the figures then");
	full_card(full, 0, &o, &found);
	ok(!found, "the same card full, the job succeeded: no out-of-memory");
	full_card(TOTAL / 2, 1, &o, &found);
	ok(!found, "a failed job with half the card free: no out-of-memory");
}

/* ---- alerts ------------------------------------------------------------------------------------------- */

/* A machine whose process 300 leaks; each new alert is answered with an "alert" event at its time
 * when tell_live. Returns the number of leak alerts. */
static size_t alert_scenario(int tell_live, gpumon_alert *first)
{
	size_t seen = 0;
	for (unsigned i = 0; i < 400; i++) {
		uint64_t t = T0 + S + i * S;
		proc(0, t, 300, GiB + i * 8 * MiB);
		dev_row(0, t + 2, 2 * GiB + i * 8 * MiB);
		gpumon_alert a[4];
		size_t n = gpumon_model_alerts(M, seen, a, 4);
		for (size_t k = 0; k < n && k < 4; k++)
			if (tell_live)
				ev(a[k].t_ns, "alert", "leak suspected");
		seen += n;
	}
	gpumon_model_finish(M, 0, -1);
	return gpumon_model_alerts(M, 0, first, 1);
}

static void test_alerts(void)
{
	gpumon_alert a;
	model_new(0, 0, 0, 0, 0);
	is_int(alert_scenario(1, &a), 1, "a leak alerts once, however long it goes on");
	ok(a.kind == GPUMON_ALERT_LEAK && a.verdict.series == GPUMON_SERIES_PROCESS && a.verdict.pid == 300,
	   "on the leaking process");
	ok(a.live == 1, "an \"alert\" event at the same moment marks it live");
	gpumon_verdict v;
	gpumon_model_process_verdict(M, 0, 300, &v);
	is_int(a.t_ns, v.leak.alert_t_ns, "at the point the detector first alerted");
	is_int(gpumon_model_alerts(M, 1, &a, 1), 0, "none after it");
	json_t *d = document(0);
	ok(json_array_size(at(d, "alerts")) == 1 && json_is_true(json_object_get(json_array_get(at(d, "alerts"), 0), "live")),
	   "one alert in the document, live");
	size_t i;
	json_t *e;
	int kept = 0;
	json_array_foreach(at(d, "events"), i, e) kept += !strcmp(json_string_value(json_object_get(e, "kind")), "alert");
	is_int(kept, 1, "and the alert event among the events");
	json_decref(d);
	done();

	model_new(0, 0, 0, 0, 0);
	alert_scenario(0, &a);
	is_int(a.live, 0, "without the event: not live");
	done();

	gpumon_alert all[8];
	model_new(100, 0, 0, 0, 0); /* a run: told once, about the job's processes together */
	run_scenario(300, 16 * MiB, 0, 0, 20 * GiB);
	is_int(gpumon_model_alerts(M, 0, all, 8), 1, "a run's leak alerts once");
	is_int(all[0].verdict.series, GPUMON_SERIES_JOB, "on the job's series, not on each process");
	done();
	model_new(100, 0, 0, 0, 0); /* ... and on its allocator's figures when it reports them */
	run_scenario(300, 16 * MiB, 300, 4 * MiB, 20 * GiB);
	is_int(gpumon_model_alerts(M, 0, all, 8), 1, "a run that reports its allocator: one alert");
	is_int(all[0].verdict.series, GPUMON_SERIES_FRAMEWORK, "on the framework series");
	done();

	model_new(0, 0, 0, 0, 0.10); /* headroom: free under 10 % of the card */
	uint64_t low = TOTAL - RESV - 4 * GiB, high = 40 * GiB;
	uint64_t rows[] = {high, low, low, low, high, low};
	for (unsigned k = 0; k < 6; k++)
		dev_row(0, T0 + (k + 1) * S, rows[k]);
	gpumon_alert h[4];
	size_t n = gpumon_model_alerts(M, 0, h, 4);
	is_int(n, 2, "headroom: one alert each time the free memory falls under the share");
	ok(n == 2 && h[0].kind == GPUMON_ALERT_HEADROOM && h[0].t_ns == T0 + 2 * S && h[1].t_ns == T0 + 6 * S,
	   "when it falls, not while it stays");
	ok(n == 2 && h[0].dev == 0 && h[0].free_bytes == 4 * GiB && h[0].total_bytes == TOTAL, "with the figures");
	done();
}

/* ---- bounded summaries --------------------------------------------------------------------------------- */

static void test_bounded(void)
{
	model_new(0, GPUMON_MODEL_TIMELINES, 0, 64, 0);
	for (unsigned i = 0; i < 5000; i++) { /* each comes, is seen at a row, and goes */
		uint64_t t = T0 + i * (S / 10);
		proc(0, t, 10000 + i, GiB);
		dev_row(0, t + 1, GiB);
		gone(0, t + 2, 10000 + i);
	}
	gpumon_verdict v;
	is_int(gpumon_model_process_verdict(M, 0, 10000, &v), GPUMON_E_NOT_FOUND, "the first gone is forgotten");
	is_int(gpumon_model_process_verdict(M, 0, 14999, &v), GPUMON_OK, "the last one is kept");
	json_t *d = document(GPUMON_DOC_TIMELINE);
	ok(d && json_array_size(at(d, "timeline.processes")) <= 64, "at most max_processes in the document (%zu)",
	   json_array_size(at(d, "timeline.processes")));
	ok(json_is_null(at(d, "source.damage")), "nothing left out: each had gone");
	json_decref(d);
	done();

	model_new(0, 0, 0, 64, 0);
	for (unsigned i = 0; i < 100; i++) /* 100 at once, none gone */
		proc(0, T0 + i, 10000 + i, GiB);
	d = document(0);
	const char *damage = json_string_value(at(d, "source.damage"));
	ok(damage && strstr(damage, "more processes"), "more at once than kept: the document says so: %s",
	   damage ? damage : "(null)");
	json_decref(d);
	done();
}

/* Figures beyond GPUMON_MAX_BYTES (a job's made-up sample, a hand-edited file): left out before any
 * sum, counted and named; the sums of the largest figures taken stay below 2^63. */
static void test_out_of_range(void)
{
	model_new(100, 0, 0, 0, 0);
	put(job_rec(T0, 100));
	for (unsigned i = 0; i < 20; i++) {
		uint64_t t = T0 + i * S;
		proc(0, t, 100, 10 * GiB);
		proc(0, t + 1, 200, i == 5 ? (1ull << 63) : 2 * GiB); /* 2^63: a signed sum wraps at it */
		dev_row(0, t + 2, 12 * GiB);
		fw(t + 3, 100, i, i == 7 ? UINT64_MAX : 4 * GiB, 6 * GiB, 0);
	}
	json_t *d = document(0);
	const char *damage = json_string_value(at(d, "source.damage"));
	ok(damage && strstr(damage, "2 records with a byte figure of 1 PiB or more left out (the first: pid 200 on GPU 0 at "
				    "5.000 s: used 9223372036854775808 bytes)"),
	   "refused and named: %s", damage ? damage : "(null)");
	json_int_t others = json_integer_value(at(json_array_get(at(d, "devices"), 0), "others_peak_bytes"));
	ok(others == 2 * (json_int_t)GiB, "the co-tenant's figure never took the made-up one (%lld)", (long long)others);
	json_decref(d);
	done();

	/* the most processes the model keeps, each at the most it takes: the GPU's sum fits */
	model_new(0, 0, 0, 100000, 0);
	for (unsigned i = 0; i < 9000; i++)
		proc(0, T0 + i, 10000 + i, GPUMON_MAX_BYTES);
	d = document(0);
	others = json_integer_value(at(json_array_get(at(d, "devices"), 0), "others_peak_bytes"));
	ok(others == (json_int_t)(8192 * GPUMON_MAX_BYTES), "8192 processes kept at most, their sum exact: %lld",
	   (long long)others);
	damage = json_string_value(at(d, "source.damage"));
	ok(damage && strstr(damage, "more processes"), "the rest said: %s", damage ? damage : "(null)");
	json_decref(d);
	done();
}

/* ---- a job that ends ---------------------------------------------------------------------------------- */

/* The job leaks, then its processes leave while rows keep coming: its series ends with it. */
static void test_job_ended(void)
{
	model_new(100, 0, 0, 0, 0);
	run_scenario(300, 16 * MiB, 0, 0, 20 * GiB);
	gpumon_verdict before = verdict_of();
	uint64_t t = T0 + 301 * S;
	gone(0, t, 100);
	gone(0, t, 101);
	for (unsigned i = 0; i < 30; i++)
		dev_row(0, t + 2 + i * S, 20 * GiB);
	gpumon_model_finish(M, 0, 1);
	gpumon_verdict v = verdict_of();
	ok(v.series == GPUMON_SERIES_JOB && v.leak.verdict == GPUMON_LEAK_SUSPECTED,
	   "the job's leak stays a leak after it freed its memory (verdict %d)", v.leak.verdict);
	/* one more: its figure held until the moment it left */
	is_int(v.leak.points, before.leak.points + 1, "no points after its last process left");
	is_int(v.room_bytes, before.room_bytes, "its room: the free memory while it ran, not what it freed");
	done();
}

/* A machine: two processes leak on one GPU; its time to out-of-memory is its free memory at their
 * summed rate. */
static void test_machine_gpu_oom(void)
{
	model_new(0, 0, 0, 0, 0);
	uint64_t used = 0;
	for (unsigned i = 0; i < 300; i++) {
		uint64_t t = T0 + S + i * S, a = GiB + i * 8 * MiB, b = 2 * GiB + i * 24 * MiB;
		proc(0, t, 300, a);
		proc(0, t, 301, b);
		dev_row(0, t + 2, used = a + b);
	}
	double s = 0, want = (double)(TOTAL - RESV - used) / (32.0 * MiB);
	is_int(gpumon_model_gpu_oom(M, 0, &s), GPUMON_OK, "both alert: the GPU has a time to out-of-memory");
	ok(fabs(s - want) <= 0.02 * want, "free / (8 + 24 MiB/s): %.1f s, want %.1f s", s, want);
	is_int(gpumon_model_gpu_oom(M, 1, &s), GPUMON_E_NOT_FOUND, "a GPU it has not seen");
	done();
}

/* ---- framework devices and GPUs -------------------------------------------------------------------------- */

/* Job 100 reports CUDA device 0, which CUDA_VISIBLE_DEVICES makes GPU 1; GPU 0 is fuller. */
static gpumon_verdict mapped(const char *settings, const char *cvd)
{
	SETTINGS = settings;
	model_new(100, 0, 0, 0, 0);
	SETTINGS = NULL;
	if (cvd) { /* the configuration's mapping goes before the settings' */
		gpumon_model_destroy(M);
		gpumon_run_meta meta = {.size = sizeof meta, .kind = "run", .settings = settings, .job_pid = 100,
					.start_mono_ns = T0, .exit_status = -1};
		gpumon_model_config c = {.size = sizeof c, .meta = &meta, .cuda_visible_devices = cvd};
		gpumon_model_create(&c, &M);
	}
	gpumon_device_info d1 = {.index = 1, .present = GPUMON_INFO_UUID | GPUMON_INFO_MEMORY_TOTAL,
				 .uuid = "GPU-bbbbbbbb-1111-2222-3333-444444444444", .memory_total_bytes = TOTAL};
	gpumon_model_device(M, &d1);
	for (unsigned i = 0; i < 300; i++) {
		uint64_t t = T0 + S + i * S;
		fw(t, 100, i, GiB + i * 4 * MiB, 2 * GiB + i * 4 * MiB, 0);
		dev_row(0, t + 1, 60 * GiB);
		dev_row(1, t + 2, 10 * GiB);
	}
	gpumon_verdict v = verdict_of();
	done();
	return v;
}

static void test_device_mapping(void)
{
	gpumon_verdict v = mapped("A=1\nCUDA_VISIBLE_DEVICES=1,0", NULL);
	ok(v.series == GPUMON_SERIES_FRAMEWORK && v.device == 0 && v.dev == 1,
	   "CUDA_VISIBLE_DEVICES=1,0 in the settings: CUDA device 0 is GPU 1 (dev %d)", v.dev);
	is_int(v.room_bytes, TOTAL - RESV - 10 * GiB, "its room is GPU 1's free memory");
	v = mapped(NULL, "GPU-bbbbbbbb");
	is_int(v.dev, 1, "a UUID prefix names the GPU");
	v = mapped("CUDA_VISIBLE_DEVICES=0", "1");
	is_int(v.dev, 1, "the configuration's mapping before the settings'");
	v = mapped("CUDA_VISIBLE_DEVICES=MIG-0123", NULL);
	is_int(v.dev, -1, "a MIG instance: no GPU known");
	v = mapped(NULL, NULL);
	is_int(v.dev, 0, "no mapping, the process not listed: CUDA's index taken as NVML's");
}

static void test_arguments(void)
{
	gpumon_model *m = NULL;
	gpumon_model_config c = {.size = sizeof c + 8};
	is_int(gpumon_model_create(&c, &m), GPUMON_E_INVAL, "a config larger than the library knows");
	c.size = sizeof c;
	c.headroom_share = 1.5;
	is_int(gpumon_model_create(&c, &m), GPUMON_E_INVAL, "a headroom share over 1");
	is_int(gpumon_model_create(NULL, &m), GPUMON_OK, "no config: defaults");
	gpumon_record none[3] = {{.kind = GPUMON_REC_PROCESS, .t_ns = 1}, {.kind = GPUMON_REC_PROCESS_GONE, .t_ns = 2},
				 {.kind = GPUMON_REC_JOB, .t_ns = 3}}; /* each without its process */
	is_int(gpumon_model_add(m, none, 3), GPUMON_OK, "records of a process that name none: left out");
	is_int(gpumon_model_samples(m), 0, "and not taken");
	gpumon_record r = event_rec(1, "note", NULL);
	is_int(gpumon_model_finish(m, 0, -1), GPUMON_OK, "finish");
	is_int(gpumon_model_add(m, &r, 1), GPUMON_E_INVAL, "a record after the end is refused");
	is_int(gpumon_model_add(m, NULL, 1), GPUMON_E_INVAL, "no records");
	gpumon_model_destroy(m);
	gpumon_model_destroy(NULL); /* a no-op */
	is_int(gpumon_model_document(NULL, 0, NULL), GPUMON_E_INVAL, "document(NULL)");
}

int main(void)
{
	make_tmpdir("model");
	test_rule();
	test_time_to_oom();
	test_peak();
	test_restarted_steps();
	test_oom_event();
	test_oom_full_card();
	test_oom_no_baseline();
	test_oom_inside_figures();
	test_placed();
	test_oom_growth();
	test_alerts();
	test_bounded();
	test_out_of_range();
	test_job_ended();
	test_machine_gpu_oom();
	test_device_mapping();
	test_arguments();
	remove_dir(tmpdir);
	remove_scenario();
	return tap_done();
}
