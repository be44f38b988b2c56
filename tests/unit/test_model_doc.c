/* SPDX-License-Identifier: MIT */
/* test_model_doc.c — the run model's JSON document (format 2, lib/sinks/document.c): its keys,
 * null for what is not known, timelines whose change-only lines reach the end, the job's figures
 * per GPU, the memory the allocator caches or does not account for; and the same document whether
 * the records are fed live or read back from a recording written with them. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <errno.h>
#include <math.h>

#include "rec_util.h"
#include "model_util.h"

/* ---- the document --------------------------------------------------------------------------------------- */

static void test_document(void)
{
	model_new(100, GPUMON_MODEL_TIMELINES, 0, 0, 0);
	VISITOR = 1;
	run_scenario(120, 16 * MiB, 120, 4 * MiB, 20 * GiB);
	VISITOR = 0;
	for (unsigned i = 0; i < 502; i++)
		ev(T0 + 130 * S + i, i ? "marker" : "step", "x");
	uint64_t end = T0 + 200 * S;
	gpumon_model_finish(M, end, 0);
	json_t *d = document(GPUMON_DOC_TIMELINE);
	ok(d != NULL, "the document is JSON");
	is_int(json_integer_value(json_object_get(d, "format")), 2, "format 2");
	static const char *const top[] = {"source", "devices", "leak", "series", "peak", "windows", "fragmentation",
					  "unaccounted", "oom", "alerts", "events", "events_dropped", "timeline"};
	for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
		ok(json_object_get(d, top[i]) != NULL, "key %s", top[i]);
	static const char *const src[] = {"path", "type", "kind", "command", "host", "start_utc", "duration_s",
					  "exit_status", "damage", "records"};
	for (size_t i = 0; i < sizeof src / sizeof src[0]; i++)
		ok(at(d, "source") && json_object_get(at(d, "source"), src[i]), "source.%s", src[i]);
	is_str(json_string_value(at(d, "source.kind")), "run", "source.kind");
	is_str(json_string_value(at(d, "source.start_utc")), "2023-11-14T22:13:20Z", "start in UTC");
	ok(fabs(json_real_value(at(d, "source.duration_s")) - 200) < 1e-6, "duration to the end given");
	ok(json_is_null(at(d, "source.host")), "an unknown host is null");
	json_t *dev = json_array_get(at(d, "devices"), 0);
	ok(json_integer_value(json_object_get(dev, "total_bytes")) == (json_int_t)TOTAL &&
	       json_object_get(dev, "peak") && json_object_get(dev, "job_peak") && json_object_get(dev, "job_mean_bytes"),
	   "a device: total, peak, job's peak and mean");
	static const char *const leak[] = {"verdict", "series", "rate_bytes_per_step", "rate_bytes_per_second",
					   "start_step", "start_time", "confidence", "floor_bytes", "points", "alert",
					   "alert_time", "room", "room_bytes", "steps_to_oom", "seconds_to_oom"};
	for (size_t i = 0; i < sizeof leak / sizeof leak[0]; i++)
		ok(json_object_get(at(d, "leak"), leak[i]) != NULL, "leak.%s", leak[i]);
	is_str(json_string_value(at(d, "leak.series.kind")), "framework", "the verdict's series kind");
	ok(json_is_null(at(d, "oom")), "no out-of-memory: null");
	is_int(json_array_size(at(d, "events")), 500, "events: at most 500, \"step\" left out");
	is_int(json_integer_value(at(d, "events_dropped")), 1, "the one more counted");
	/* timelines: a change-only process line ends with the point the document adds at the end */
	json_t *p, *cot = NULL, *left = NULL;
	size_t i;
	json_array_foreach(at(d, "timeline.processes"), i, p)
	{
		json_int_t pid = json_integer_value(json_object_get(p, "pid"));
		if (pid == 200)
			cot = p;
		if (pid == 300)
			left = p;
	}
	json_t *ct = json_object_get(cot, "t"), *cu = json_object_get(cot, "used");
	size_t cn = json_array_size(ct);
	ok(cn == 2 && json_array_size(cu) == 2, "the flat co-tenant: its one point and the end (%zu)", cn);
	ok(cn && fabs(json_real_value(json_array_get(ct, cn - 1)) - 200) < 1e-6 &&
	       json_integer_value(json_array_get(cu, cn - 1)) == (json_int_t)(20 * GiB),
	   "its line spans the run, at 20 GiB");
	json_t *lt = json_object_get(left, "t");
	ok(json_array_size(lt) && fabs(json_real_value(json_array_get(lt, json_array_size(lt) - 1)) - 40) < 1e-6,
	   "a process that left ends where it left");
	json_t *dl = json_array_get(at(d, "timeline.devices"), 0);
	ok(dl && json_array_size(json_object_get(dl, "t")) == json_array_size(json_object_get(dl, "used")) &&
	       json_object_get(dl, "used_max") && json_object_get(dl, "reserved"),
	   "a device's timeline: t, used, used_max, reserved");
	json_t *fl = json_array_get(at(d, "timeline.framework"), 0);
	ok(fl && json_object_get(fl, "allocated") && json_object_get(fl, "step"), "a framework timeline");
	json_decref(d);
	done();

	model_new(0, 0, 0, 0, 0); /* nothing fed: nulls, not zeros */
	gpumon_model_finish(M, 0, -1);
	d = document(0);
	ok(d && json_is_null(at(d, "leak")) && json_is_null(at(d, "peak")) && json_is_null(at(d, "source.duration_s")) &&
	       json_is_null(at(d, "source.exit_status")) && !json_object_get(d, "timeline"),
	   "an empty model: null verdict, peak, duration and exit status; no timeline unless asked");
	json_decref(d);
	done();
}

/* ---- live and from a recording: the same answers ---------------------------------------------------------- */

static void rich_scenario(void)
{
	VISITOR = 1;
	run_scenario(200, 32 * MiB, 200, 4 * MiB, 20 * GiB);
	VISITOR = 0;
	ev(T0 + 201 * S, "oom", "PyTorch: torch.OutOfMemoryError: CUDA out of memory.");
	gone(0, T0 + 202 * S, 100);
}

static void test_live_and_recorded(void)
{
	const char *path = tmp_path("same.gpumon");
	write_recording(path, rich_scenario);

	gpumon_reader *r = NULL;
	gpumon_model *from_file = NULL;
	gpumon_model_config c = {.size = sizeof c, .source = path, .source_type = "recording"};
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "read back");
	gpumon_model_create(&c, &from_file);
	is_int(gpumon_model_load(from_file, r), GPUMON_OK, "loaded into a model");
	gpumon_model_finish(from_file, 0, -1);

	/* live: the run's metadata and GPUs as the file has them, then the same records one by one */
	const gpumon_run_meta *fm = gpumon_reader_meta(r);
	c = (gpumon_model_config){.size = sizeof c, .meta = fm, .source = path, .source_type = "recording"};
	gpumon_model_create(&c, &M);
	for (unsigned i = 0; i < gpumon_reader_device_count(r); i++) {
		gpumon_device_info info;
		gpumon_reader_device(r, i, &info);
		gpumon_model_device(M, &info);
	}
	rich_scenario();
	gpumon_model_finish(M, fm->end_mono_ns, fm->exit_status);
	json_t *live = document(0);
	gpumon_model *keep = M;
	M = from_file;
	json_t *file = document(0);
	M = keep;
	static const char *const keys[] = {"leak", "series", "peak", "windows", "oom", "alerts", "devices",
					   "fragmentation", "unaccounted", "events"};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		int same = json_equal(json_object_get(live, keys[i]), json_object_get(file, keys[i]));
		ok(same, "%s: the same fed live and from the recording", keys[i]);
		if (!same) {
			char *a = json_dumps(json_object_get(live, keys[i]), JSON_COMPACT);
			char *b = json_dumps(json_object_get(file, keys[i]), JSON_COMPACT);
			printf("#   live: %.600s\n#   file: %.600s\n", a ? a : "", b ? b : "");
			free(a);
			free(b);
		}
	}
	ok(!json_is_null(json_object_get(live, "oom")) && !strcmp(json_string_value(at(live, "leak.verdict")), "leak"),
	   "(a leak and an out-of-memory moment to compare)");
	json_decref(live);
	json_decref(file);
	gpumon_model_destroy(from_file);
	gpumon_reader_destroy(r);
	done();
	T0 = 1000 * S;
}

/* ---- figures ---------------------------------------------------------------------------------------------- */

/* The job's mean and peak on its GPU, and the others' memory beside it. */
static void test_job_figures(void)
{
	model_new(100, 0, 0, 0, 0);
	proc(0, T0 + 1, 200, 10 * GiB);
	proc(0, T0 + 1, 100, 2 * GiB);
	proc(0, T0 + 100 * S, 100, 6 * GiB);
	proc(0, T0 + 120 * S, 200, 12 * GiB);
	proc(0, T0 + 150 * S, 100, 4 * GiB);
	gpumon_model_finish(M, T0 + 200 * S + 1, 0);
	json_t *d = document(0), *dev = json_array_get(at(d, "devices"), 0);
	double mean = (double)json_integer_value(json_object_get(dev, "job_mean_bytes"));
	ok(fabs(mean - 3.5 * GiB) < 1024, "the job's mean over its time on the GPU: 3.5 GiB (%.0f)", mean);
	is_int(json_integer_value(at(dev, "job_peak.bytes")), 6 * GiB, "its peak");
	is_int(json_integer_value(json_object_get(dev, "others_at_job_peak_bytes")), 10 * GiB, "the others then");
	is_int(json_integer_value(json_object_get(dev, "others_peak_bytes")), 12 * GiB, "the others at most");
	json_decref(d);
	done();

	model_new(100, 0, 0, 0, 0); /* never on a GPU: no job figures, not zeros */
	proc(0, T0 + 1, 200, 10 * GiB);
	gpumon_model_finish(M, T0 + 10 * S, 0);
	d = document(0);
	dev = json_array_get(at(d, "devices"), 0);
	ok(json_is_null(json_object_get(dev, "job_mean_bytes")) && json_is_null(json_object_get(dev, "job_peak")) &&
	       json_is_null(json_object_get(dev, "others_at_job_peak_bytes")),
	   "a job never listed on the GPU: its figures are null");
	json_decref(d);
	done();
}

/* Memory the allocator caches (reserved - allocated) and memory outside it (NVML - reserved). */
static void test_memory_figures(void)
{
	gpumon_model_figure frag, unacc;
	model_new(100, 0, 0, 0, 0);
	gpumon_model_memory(M, &frag, &unacc);
	ok(!frag.known && !unacc.known && frag.pid == -1 && unacc.dev == -1, "nothing fed: neither known");
	proc(0, T0 + S, 100, 6 * GiB);
	fw(T0 + 2 * S, 100, 1, 2 * GiB, 5 * GiB, 0);
	fw(T0 + 3 * S, 100, 2, 4 * GiB, 5 * GiB, 0);
	proc(0, T0 + 4 * S, 100, 7 * GiB);
	fw(T0 + 5 * S, 100, 3, 4 * GiB, 5 * GiB, 0);
	gpumon_model_memory(M, &frag, &unacc);
	ok(frag.known && frag.bytes == 3 * GiB && frag.t_ns == T0 + 2 * S && frag.pid == 100,
	   "fragmentation: the largest reserved - allocated, when and whose");
	ok(unacc.known && unacc.bytes == 2 * GiB && unacc.t_ns == T0 + 5 * S && unacc.pid == 100 && unacc.dev == 0,
	   "unaccounted: the largest NVML figure - reserved, on its GPU");
	json_t *d = document(0);
	ok(json_integer_value(at(d, "fragmentation.bytes")) == (json_int_t)(3 * GiB) &&
	       fabs(json_real_value(at(d, "fragmentation.time")) - 2) < 1e-9 &&
	       json_integer_value(at(d, "unaccounted.dev")) == 0,
	   "both in the document");
	json_decref(d);
	done();
}

/* A JOB record and the first listing of its pid at the same moment: a recording gives them back
 * in its own order (process rows before events), so the model must not depend on which comes first. */
static json_t *tie(int job_first)
{
	model_new(100, 0, 0, 0, 0);
	gpumon_record job = job_rec(T0, 101);
	if (job_first)
		put(job);
	proc(0, T0, 101, GiB);
	if (!job_first)
		put(job);
	proc(0, T0, 200, 10 * GiB);
	for (unsigned i = 0; i < 120; i++) {
		uint64_t t = T0 + S + i * S;
		proc(0, t, 101, GiB + i * 16 * MiB);
		dev_row(0, t + 1, 11 * GiB + i * 16 * MiB);
	}
	gpumon_model_finish(M, 0, 0);
	json_t *d = document(0);
	done();
	return d;
}

static void test_same_moment(void)
{
	json_t *a = tie(1), *b = tie(0);
	ok(json_equal(at(a, "devices"), at(b, "devices")), "the GPUs' figures do not depend on the order");
	ok(json_equal(at(a, "windows"), at(b, "windows")), "nor the peak's windows");
	ok(json_equal(at(a, "leak"), at(b, "leak")), "nor the verdict");
	json_decref(a);
	json_decref(b);
}

int main(void)
{
	make_tmpdir("model-doc");
	test_document();
	test_job_figures();
	test_memory_figures();
	test_same_moment();
	test_live_and_recorded();
	remove_dir(tmpdir);
	remove_scenario();
	return tap_done();
}
