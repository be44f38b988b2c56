/* SPDX-License-Identifier: MIT */
/* test_model_alerts.c — the alerts a front end acts on, decided by the run model: LIMIT (a job
 * process over the configured limit on its GPUs together, once a process) and OOM_PROJECTED (after
 * a leak alert, the run's verdict within the steps asked, once a run). */
#include <gpumon/gpumon.h>

#include "tap.h"

#include "rec_util.h"
#include "model_util.h"

/* Collects the model's alerts of one kind into out (up to cap); returns how many there are. */
static size_t alerts_of(int kind, gpumon_alert *out, size_t cap)
{
	gpumon_alert a[16];
	size_t n = gpumon_model_alerts(M, 0, a, 16), k = 0;
	for (size_t i = 0; i < n && i < 16; i++)
		if (a[i].kind == kind) {
			if (k < cap)
				out[k] = a[i];
			k++;
		}
	return k;
}

/* The headroom alert's words when the job's process (torch's device 0) is on GPU gpu and that GPU's
 * free memory falls under 10 %. */
static void headroom_words_on(unsigned gpu, const char *want, const char *what)
{
	char buf[256];
	gpumon_alert a[4];
	model_new(100, 0, 0, 0, 0.10);
	put(job_rec(T0, 100));
	proc(gpu, T0 + S, 100, 30 * GiB);
	fw_on(T0 + S, 100, 0, 1, 20 * GiB, 24 * GiB, 0);
	dev_row(gpu, T0 + 2 * S, 40 * GiB);
	dev_row(gpu, T0 + 3 * S, TOTAL - RESV - 4 * GiB);
	is_int(alerts_of(GPUMON_ALERT_HEADROOM, a, 4), 1, "headroom on GPU %u", gpu);
	is_str(gpumon_words_alert(M, &a[0], buf, sizeof buf), want, "%s", what);
	done();
}

/* The headroom alert names the GPU by NVML's number, and by the job's own where they differ
 * (CUDA_VISIBLE_DEVICES=1: torch's device 0 is GPU 1). */
static void test_headroom_words(void)
{
	headroom_words_on(1, "GPU 1 (torch's device 0) has 4.00 GiB free of 80.0 GiB", "NVML's number and the job's");
	headroom_words_on(0, "GPU 0 has 4.00 GiB free of 80.0 GiB", "one number when they agree");
}

static void test_limit(void)
{
	gpumon_alert a[4];
	model_new(100, 0, 4 * GiB, 0, 0);
	put(job_rec(T0, 101));
	proc(0, T0 + S, 200, 30 * GiB); /* a co-tenant: not the job's, whatever it holds */
	proc(0, T0 + S, 101, 3 * GiB);
	dev_row(0, T0 + S + 1, 33 * GiB);
	is_int(alerts_of(GPUMON_ALERT_LIMIT, a, 4), 0, "3 GiB under a 4 GiB limit: no alert; a co-tenant's 30 GiB neither");
	proc(1, T0 + 2 * S, 101, 2 * GiB);
	is_int(alerts_of(GPUMON_ALERT_LIMIT, a, 4), 1, "3 GiB + 2 GiB on a second GPU: over the limit");
	ok(a[0].pid == 101 && a[0].used_bytes == 5 * GiB && a[0].limit_bytes == 4 * GiB && a[0].dev == 1 &&
		   a[0].t_ns == T0 + 2 * S,
	   "the process, its GPUs summed, the limit, the GPU and moment that passed it");
	proc(1, T0 + 3 * S, 101, 3 * GiB);
	proc(0, T0 + 3 * S, 100, 5 * GiB);
	is_int(alerts_of(GPUMON_ALERT_LIMIT, a, 4), 2, "once a process: 101 again is not told, 100 is");
	ok(a[1].pid == 100 && a[1].used_bytes == 5 * GiB, "the job's own pid (the run's metadata) counts too");
	json_t *d = document(0);
	is_int(json_array_size(at(d, "alerts")), 0, "LIMIT alerts are not in the document (the front end records them)");
	json_decref(d);
	done();

	model_new(100, 0, 0, 0, 0);
	proc(0, T0 + S, 100, 70 * GiB);
	is_int(alerts_of(GPUMON_ALERT_LIMIT, a, 4), 0, "no limit set: no LIMIT alert");
	done();
	model_new(0, 0, 4 * GiB, 0, 0);
	proc(0, T0 + S, 100, 70 * GiB);
	is_int(alerts_of(GPUMON_ALERT_LIMIT, a, 4), 0, "no job (a machine's view): no LIMIT alert");
	done();
}

/* A job whose allocator leaks 4 MiB a step under a 3 GiB cap: steps to out-of-memory 512 - i at
 * step i. within 0: not asked. */
static void leaking_job(double within)
{
	gpumon_run_meta meta = {.size = sizeof meta, .kind = "run", .command = "python train.py", .job_pid = 100,
				.start_mono_ns = T0, .start_wall_ns = 1700000000ull * S, .exit_status = -1};
	gpumon_model_config c = {.size = sizeof c, .meta = &meta, .source_type = "live", .oom_within_steps = within};
	if (gpumon_model_create(&c, &M) != GPUMON_OK) {
		printf("Bail out! gpumon_model_create\n");
		exit(1);
	}
	for (unsigned i = 0; i < 400; i++) {
		uint64_t t = T0 + S + i * S;
		proc(0, t, 100, 2 * GiB + i * 4 * MiB);
		dev_row(0, t + 1, 2 * GiB + i * 4 * MiB);
		fw(t + 2, 100, i, GiB + i * 4 * MiB, GiB + i * 4 * MiB, 3 * GiB);
	}
}

static void test_projection(void)
{
	gpumon_alert a[4], leak;
	leaking_job(300);
	is_int(alerts_of(GPUMON_ALERT_LEAK, &leak, 1), 1, "the leak alerts");
	is_int(alerts_of(GPUMON_ALERT_OOM_PROJECTED, a, 4), 1, "then out-of-memory is projected, once");
	ok(a[0].t_ns > leak.t_ns && a[0].verdict.steps_to_oom <= 300 && a[0].verdict.steps_to_oom > 290 &&
		   a[0].verdict.room == GPUMON_ROOM_CAP && a[0].verdict.series == GPUMON_SERIES_FRAMEWORK,
	   "after the leak alert, as soon as the run's verdict is within 300 steps (%.1f), against the cap",
	   a[0].verdict.steps_to_oom);
	json_t *d = document(0);
	json_t *last = json_array_get(at(d, "alerts"), json_array_size(at(d, "alerts")) - 1);
	ok(!strcmp(json_string_value(at(last, "kind")), "oom_projected") && json_is_number(at(last, "steps_to_oom")),
	   "in the document as \"oom_projected\" with the verdict's figures");
	json_decref(d);
	done();

	leaking_job(0);
	is_int(alerts_of(GPUMON_ALERT_OOM_PROJECTED, a, 4), 0, "not asked: no projection");
	done();
	leaking_job(10);
	is_int(alerts_of(GPUMON_ALERT_OOM_PROJECTED, a, 4), 0, "never within 10 steps in the run: none");
	done();
}

int main(void)
{
	test_limit();
	test_projection();
	test_headroom_words();
	return tap_done();
}
