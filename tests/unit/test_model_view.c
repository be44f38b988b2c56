/* SPDX-License-Identifier: MIT */
/* test_model_view.c — the run model's typed answers (gpumon_model_source_get, _damage_get, _gpu_get,
 * _who_get, _framework_get, _event_get) for a model read from a recording: each equals what the
 * document (made from them) says, and a struct's size is checked as the header says. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <errno.h>
#include <math.h>

#include "rec_util.h"
#include "model_util.h"

/* Whether the document's number at o.key is v (null: !known). */
static int num_is(json_t *o, const char *key, int known, double v)
{
	json_t *j = json_object_get(o, key);
	return known ? json_is_number(j) && json_number_value(j) == v : json_is_null(j);
}

/* Whether the document's string at o.key is s (null: s NULL or ""). */
static int str_is(json_t *o, const char *key, const char *s)
{
	json_t *j = json_object_get(o, key);
	return s && s[0] ? json_is_string(j) && !strcmp(json_string_value(j), s) : json_is_null(j);
}

/* A run with a leak, a visitor, a framework and an out-of-memory moment. */
static void scenario(void)
{
	VISITOR = 1;
	run_scenario(200, 32 * MiB, 200, 4 * MiB, 20 * GiB);
	VISITOR = 0;
	ev(T0 + 201 * S, "oom", "PyTorch: torch.OutOfMemoryError: CUDA out of memory.");
	gone(0, T0 + 202 * S, 100);
}

/* The scenario's recording read back into a model, with a loss named. */
static gpumon_model *recorded_model(void)
{
	const char *path = tmp_path("view.gpumon");
	write_recording(path, scenario);
	gpumon_reader *r = NULL;
	gpumon_model *m = NULL;
	gpumon_model_config c = {.size = sizeof c, .source = path, .source_type = "recording"};
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "read back");
	gpumon_model_create(&c, &m);
	is_int(gpumon_model_load(m, r), GPUMON_OK, "loaded into a model");
	gpumon_reader_destroy(r);
	gpumon_model_damage(m, "rows 3-4 unreadable");
	gpumon_model_finish(m, 0, -1);
	T0 = 1000 * S;
	return M = m;
}

static void test_source(json_t *d)
{
	gpumon_model_source s = {.size = sizeof s};
	json_t *src = at(d, "source");
	is_int(gpumon_model_source_get(M, &s), GPUMON_OK, "source");
	ok(str_is(src, "path", s.path) && str_is(src, "type", s.type) && str_is(src, "kind", s.kind) &&
	       str_is(src, "command", s.command) && str_is(src, "host", s.host) && str_is(src, "start_utc", s.start_utc),
	   "source: its strings are the document's");
	ok(num_is(src, "duration_s", s.duration_known, s.duration_s) &&
	       num_is(src, "exit_status", s.exit_status >= 0, s.exit_status) && num_is(src, "records", 1, (double)s.records),
	   "source: its figures are the document's");
	ok(s.names_processes && num_is(d, "events_dropped", 1, (double)s.events_dropped), "a recording names its pids");
	char *text = NULL;
	is_int(gpumon_model_damage_get(M, &text), GPUMON_OK, "damage");
	ok(text && str_is(src, "damage", text) && strstr(text, "rows 3-4"), "damage: the document's (%s)", text ? text : "NULL");
	gpumon_free(text);
	s.size = sizeof s + 1;
	is_int(gpumon_model_source_get(M, &s), GPUMON_E_INVAL, "a size larger than the header's is refused");
	s.size = 0;
	is_int(gpumon_model_source_get(M, &s), GPUMON_E_INVAL, "a size of 0 is refused");
}

/* The document's {pid, user, command, owner} w names the process as gpumon_model_who_get does. */
static int who_is(json_t *w, int dev)
{
	gpumon_model_who who = {.size = sizeof who};
	if (!json_is_object(w))
		return 0;
	gpumon_model_who_get(M, dev, (unsigned)json_integer_value(json_object_get(w, "pid")), &who);
	return str_is(w, "user", who.user) && str_is(w, "command", who.command) && str_is(w, "owner", who.owner);
}

static void test_gpus(json_t *d)
{
	gpumon_model_gpu g = {.size = sizeof g};
	size_t i, n = 0;
	json_t *x;
	json_array_foreach(at(d, "devices"), i, x)
	{
		if (gpumon_model_gpu_get(M, i, &g) != GPUMON_OK)
			break;
		json_t *peak = json_object_get(x, "peak"), *job = json_object_get(x, "job_peak");
		n += num_is(x, "dev", 1, g.dev) && str_is(x, "name", g.name) && str_is(x, "uuid", g.uuid) &&
		     num_is(x, "total_bytes", g.total_bytes > 0, (double)g.total_bytes) &&
		     json_is_true(json_object_get(x, "lost")) == !!g.lost && num_is(x, "host", 1, g.host) &&
		     g.peak_known && num_is(peak, "bytes", 1, (double)g.peak.bytes) &&
		     num_is(peak, "time", 1, gpumon_model_seconds(M, g.peak.t_ns)) && g.job_peak_known &&
		     num_is(job, "bytes", 1, (double)g.job_peak.bytes) &&
		     num_is(x, "others_at_job_peak_bytes", g.job_known, (double)g.others_at_job_peak_bytes) &&
		     num_is(x, "others_peak_bytes", 1, (double)g.others_peak_bytes) &&
		     num_is(x, "job_mean_bytes", g.job_mean_known, (double)g.job_mean_bytes) &&
		     (!json_is_object(json_object_get(peak, "owner")) || who_is(json_object_get(peak, "owner"), -1));
	}
	ok(n == 1 && json_array_size(at(d, "devices")) == 1, "GPUs: each the document's (%zu)", n);
	is_int(gpumon_model_gpu_get(M, 1, &g), GPUMON_E_NOT_FOUND, "no GPU past the last");
	ok(g.others_peak_bytes >= 20 * GiB, "(the visitor's memory is there to compare)");
}

static void test_who(json_t *d)
{
	gpumon_model_who w = {.size = sizeof w};
	json_t *h;
	size_t i, n = 0;
	json_array_foreach(at(d, "oom.holders"), i, h) n += who_is(h, (int)json_integer_value(at(d, "oom.dev")));
	ok(n && n == json_array_size(at(d, "oom.holders")), "the holders' owners are the document's (%zu)", n);
	is_int(gpumon_model_who_get(M, -1, 100, &w), GPUMON_OK, "the job's process is known");
	ok(w.pid == 100 && w.command[0], "its command line (%s)", w.command);
	is_int(gpumon_model_who_get(M, -1, 99999, &w), GPUMON_E_NOT_FOUND, "an unknown pid");
	ok(w.pid == 99999 && !w.user[0] && !w.command[0] && !w.owner[0] && w.rank == -1, "holds the pid alone");
}

static void test_frameworks(json_t *d)
{
	gpumon_model_framework f = {.size = sizeof f};
	size_t i, n = 0;
	json_t *x;
	json_array_foreach(at(d, "frameworks"), i, x)
	{
		if (gpumon_model_framework_get(M, i, &f) != GPUMON_OK)
			break;
		json_t *p = json_object_get(x, "placed");
		n += num_is(x, "pid", 1, f.pid) && num_is(x, "device", f.device >= 0, f.device) &&
		     str_is(x, "framework", f.framework) && num_is(x, "segment", 1, f.segment) &&
		     num_is(x, "dev", f.dev >= 0, f.dev) && num_is(x, "points", 1, (double)f.points) &&
		     num_is(x, "allocated_peak_bytes", f.allocated_peak_bytes > 0, (double)f.allocated_peak_bytes) &&
		     num_is(x, "reserved_peak_bytes", f.reserved_peak_bytes > 0, (double)f.reserved_peak_bytes) &&
		     json_is_object(p) == f.placed_known &&
		     (!f.placed_known || (num_is(p, "nvml_bytes", 1, (double)f.placed.nvml_bytes) &&
					  num_is(p, "cached_bytes", 1, (double)f.placed.cached_bytes) &&
					  num_is(p, "outside_bytes", f.placed.outside_known, (double)f.placed.outside_bytes))) &&
		     json_is_null(json_object_get(x, "unaccounted_why")) == (f.unaccounted_why == GPUMON_UNACCOUNTED_KNOWN ||
									     f.unaccounted_why == GPUMON_UNACCOUNTED_NOT_SAID);
	}
	ok(n && n == json_array_size(at(d, "frameworks")), "framework sources: each the document's (%zu)", n);
	is_int(gpumon_model_framework_get(M, n, &f), GPUMON_E_NOT_FOUND, "none past the last");
}

static void test_events(json_t *d)
{
	gpumon_model_event e = {.size = sizeof e};
	size_t i, n = 0;
	json_t *x;
	json_array_foreach(at(d, "events"), i, x)
	{
		if (gpumon_model_event_get(M, i, &e) != GPUMON_OK)
			break;
		n += str_is(x, "kind", e.kind) && str_is(x, "text", e.text) && num_is(x, "dev", e.dev >= 0, e.dev) &&
		     num_is(x, "time", 1, gpumon_model_seconds(M, e.t_ns));
	}
	ok(n && n == json_array_size(at(d, "events")), "events: each the document's (%zu)", n);
	is_int(gpumon_model_event_get(M, n, &e), GPUMON_E_NOT_FOUND, "none past the last");
}

/* Whether the n elements of size each at out have their reserved room (the last 32 bytes) zeroed. */
static int room_zero(const void *out, size_t n, size_t size)
{
	const unsigned char *b = out;
	for (size_t i = 0; i < n; i++)
		for (size_t k = size - 4 * sizeof(uint64_t); k < size; k++)
			if (b[i * size + k])
				return 0;
	return 1;
}

/* The structs filled in arrays keep room for fields to come, zeroed whatever the caller's memory
 * held: each getter is given memory full of 0xAA. */
static void test_array_room(void)
{
	static unsigned char mem[64 * 1024];
	memset(mem, 0xAA, sizeof mem);
	size_t n = gpumon_model_verdicts(M, (gpumon_verdict *)mem, 4);
	ok(n >= 1 && room_zero(mem, n < 4 ? n : 4, sizeof(gpumon_verdict)), "verdicts: room zeroed (%zu)", n);
	memset(mem, 0xAA, sizeof mem);
	n = gpumon_model_alerts(M, 0, (gpumon_alert *)mem, 4);
	ok(n >= 1 && room_zero(mem, n < 4 ? n : 4, sizeof(gpumon_alert)), "alerts (%zu)", n);
	memset(mem, 0xAA, sizeof mem);
	n = gpumon_model_hosts(M, (gpumon_model_host *)mem, 4);
	ok(n >= 1 && room_zero(mem, n < 4 ? n : 4, sizeof(gpumon_model_host)), "hosts (%zu)", n);
	memset(mem, 0xAA, sizeof mem);
	n = gpumon_words_told(M, (gpumon_told *)mem, 4);
	ok(n >= 1 && room_zero(mem, n < 4 ? n : 4, sizeof(gpumon_told)), "told (%zu)", n);
	gpumon_verdict v;
	memset(&v, 0xAA, sizeof v);
	ok(gpumon_model_verdict(M, &v) == GPUMON_OK && room_zero(&v, 1, sizeof v), "the verdict alone too");

	gpumon_peaks *p = NULL;
	is_int(gpumon_peaks_create(S, 8, &p), GPUMON_OK, "a peak tracker");
	for (unsigned i = 0; i < 30; i++)
		gpumon_peaks_add(p, T0 + i * S / 4, GiB + i, -1, -1);
	memset(mem, 0xAA, sizeof mem);
	n = gpumon_peaks_windows(p, (gpumon_peak *)mem, 8);
	ok(n >= 2 && room_zero(mem, n < 8 ? n : 8, sizeof(gpumon_peak)), "peak windows (%zu)", n);
	gpumon_peaks_destroy(p);

	/* a worker of a distributed job, for the rank rows */
	gpumon_model *keep = M;
	model_new(0, 0, 0, 0, 0);
	gpumon_process w = {.pid = 4000, .flags = KNOWN_PROC | GPUMON_PROC_RANK_KNOWN, .used_bytes = GiB, .name = "python",
			    .rank = {.rank = 0, .local_rank = 0, .world_size = 2, .node_rank = 0, .launcher = "torchrun"}};
	gpumon_record r = {.kind = GPUMON_REC_PROCESS, .dev = 0, .t_ns = T0, .process = &w};
	put(r);
	dev_row(0, T0 + 1, GiB);
	memset(mem, 0xAA, sizeof mem);
	n = gpumon_model_ranks(M, (gpumon_rank_row *)mem, 4);
	ok(n == 1 && room_zero(mem, 1, sizeof(gpumon_rank_row)), "rank rows (%zu)", n);
	done();
	M = keep;

	gpumon *g = open_fake(H200 "error nvmlDeviceGetComputeRunningProcesses_v3 UNKNOWN gpu=0\n", 0);
	gpumon_process *procs = NULL;
	size_t np = 0;
	gpumon_process_list(g, 0, &procs, &np);
	gpumon_free(procs);
	memset(mem, 0xAA, sizeof mem);
	n = gpumon_nvml_errors_get(g, (gpumon_nvml_error_count *)mem, 4);
	ok(n >= 1 && room_zero(mem, n < 4 ? n : 4, sizeof(gpumon_nvml_error_count)), "NVML error counts (%zu)", n);
	gpumon_destroy(g);
}

int main(void)
{
	make_tmpdir("model-view");
	recorded_model();
	json_t *d = document(0);
	ok(d && json_is_object(at(d, "oom")), "(a document with an out-of-memory moment)");
	test_source(d);
	test_gpus(d);
	test_who(d);
	test_frameworks(d);
	test_events(d);
	test_array_room();
	json_decref(d);
	gpumon_model_destroy(M);
	remove_dir(tmpdir);
	remove_scenario();
	return tap_done();
}
