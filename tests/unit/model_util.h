/* SPDX-License-Identifier: MIT */
/* model_util.h — what the run model's tests share: a model fed one record at a time (and, when a
 * recording is open, the same records written to it), records with known figures on an 80 GiB
 * GPU, the model's document parsed with jansson, and the run most tests start from. Include after
 * gpumon.h, tap.h and rec_util.h. */
#ifndef GPUMON_MODEL_UTIL_H
#define GPUMON_MODEL_UTIL_H

#include <jansson.h>

#define S     1000000000ull
#define TOTAL (80 * GiB)
#define RESV  (512 * MiB)

static gpumon_model *M;         /* the model being fed */
static gpumon_recording *REC;   /* and, when set, a recording written with the same records */
static uint64_t T0 = 1000 * S;  /* the run's start */
static int VISITOR;             /* run_scenario: process 300 comes at 30 s and leaves at 40 s */
static const char *SETTINGS;    /* model_new: the run's settings ("NAME=VALUE" lines) */

/* A model of a run of job pid job_pid (0: a machine, "record"). */
static inline gpumon_model *model_new(unsigned job_pid, unsigned flags, uint64_t limit, unsigned max_procs, double headroom)
{
	gpumon_run_meta meta = {.size = sizeof meta, .kind = job_pid ? "run" : "record",
				.command = job_pid ? "python train.py" : NULL, .settings = SETTINGS, .job_pid = job_pid,
				.start_mono_ns = T0, .start_wall_ns = 1700000000ull * S, .exit_status = -1};
	gpumon_model_config c = {.size = sizeof c, .flags = flags, .meta = &meta, .limit_bytes = limit,
				 .max_processes = max_procs, .headroom_share = headroom, .source = "synthetic",
				 .source_type = "live"};
	gpumon_model *m = NULL;
	if (gpumon_model_create(&c, &m) != GPUMON_OK) {
		printf("Bail out! gpumon_model_create\n");
		exit(1);
	}
	gpumon_device_info d = {.index = 0, .present = GPUMON_INFO_NAME | GPUMON_INFO_MEMORY_TOTAL,
				.name = "NVIDIA H100", .memory_total_bytes = TOTAL};
	gpumon_model_device(m, &d);
	return M = m;
}

static inline void put(gpumon_record r)
{
	if (gpumon_model_add(M, &r, 1) != GPUMON_OK)
		printf("# gpumon_model_add: %s\n", gpumon_model_errmsg(M));
	if (REC && gpumon_recording_write(REC, &r, 1) != GPUMON_OK)
		printf("# gpumon_recording_write: %s\n", gpumon_recording_errmsg(REC));
}

/* A device row of GPU dev: used, the driver's reserve, the rest free; an interval of one value. */
static inline void dev_row(unsigned dev, uint64_t t, uint64_t used)
{
	gpumon_record r = {.kind = GPUMON_REC_DEVICE, .dev = dev, .t_ns = t};
	r.sample.t_ns = t;
	r.sample.present = GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED;
	r.sample.memory_api = GPUMON_MEMAPI_V2;
	r.sample.memory_total_bytes = TOTAL;
	r.sample.memory_reserved_bytes = RESV;
	r.sample.memory_used_bytes = used;
	r.sample.memory_free_bytes = TOTAL - RESV - used;
	r.used_min_bytes = r.used_max_bytes = used;
	r.used_max_t_ns = t;
	r.interval_samples = 10;
	put(r);
}

static inline void proc(unsigned dev, uint64_t t, unsigned pid, uint64_t used)
{
	/* fed at once: the process may live on the stack (these come by the thousand) */
	gpumon_process p = {.pid = pid, .flags = KNOWN_PROC, .used_bytes = used, .uid = 1000, .user = "alice",
			    .name = "python"};
	snprintf(p.cmdline, sizeof p.cmdline, "python %s.py", pid >= 200 && pid < 300 ? "other" : "train");
	gpumon_record r = {.kind = GPUMON_REC_PROCESS, .dev = dev, .t_ns = t, .process = &p};
	put(r);
}

static inline void gone(unsigned dev, uint64_t t, unsigned pid)
{
	gpumon_process p = {.pid = pid, .flags = KNOWN_PROC, .uid = 1000, .user = "alice", .name = "python"};
	snprintf(p.cmdline, sizeof p.cmdline, "python train.py --note \"a, b\"");
	gpumon_record r = {.kind = GPUMON_REC_PROCESS_GONE, .dev = dev, .t_ns = t, .process = &p};
	put(r);
}

/* A torch sample of pid on its CUDA device `device`: allocated, reserved, the allocator's cap. */
static inline void fw_on(uint64_t t, unsigned pid, int device, int64_t step, uint64_t allocated, uint64_t reserved,
			 uint64_t cap)
{
	gpumon_record r = fw_rec(t, pid, device, step, "torch");
	r.framework.allocated_bytes = allocated;
	r.framework.reserved_bytes = reserved;
	r.framework.max_allocated_bytes = allocated + 256 * MiB;
	r.framework.allocated_known = r.framework.reserved_known = r.framework.max_allocated_known = 1;
	r.framework.limit_bytes = cap;
	put(r);
}

static inline void fw(uint64_t t, unsigned pid, int64_t step, uint64_t allocated, uint64_t reserved, uint64_t cap)
{
	fw_on(t, pid, 0, step, allocated, reserved, cap);
}

static inline void ev(uint64_t t, const char *kind, const char *text)
{
	put(event_rec(t, kind, text));
}

/* Writes what scenario feeds (records of a run of job pid 100 from T0, which is moved to a moment
 * after now, as the fake H200 gives its times) to a recording at path, through a scratch model. */
static inline void write_recording(const char *path, void (*scenario)(void))
{
	gpumon *g = open_fake(H200, 0);
	gpumon_run_meta meta = {.size = sizeof meta, .kind = "run", .command = "python train.py", .job_pid = 100,
				.exit_status = -1};
	int st = gpumon_recording_create(g, path, &meta, &REC);
	T0 = now_ns() + S;
	gpumon_model *scratch = model_new(100, 0, 0, 0, 0); /* the records go to the file here */
	scenario();
	if (!st)
		st = gpumon_recording_finish(REC, 1);
	is_int(st, GPUMON_OK, "the records written");
	gpumon_recording_destroy(REC);
	REC = NULL;
	gpumon_destroy(g);
	gpumon_model_destroy(scratch);
}

static inline gpumon_verdict verdict_of(void)
{
	gpumon_verdict v;
	memset(&v, 0, sizeof v);
	if (gpumon_model_verdict(M, &v) != GPUMON_OK)
		printf("# no verdict\n");
	return v;
}

static inline json_t *document(unsigned flags)
{
	char *text = NULL;
	json_error_t err;
	if (gpumon_model_document(M, flags, &text) != GPUMON_OK) {
		printf("# no document\n");
		return NULL;
	}
	json_t *j = json_loads(text, 0, &err);
	if (!j)
		printf("# not JSON: %s at %d\n", err.text, err.position);
	gpumon_free(text);
	return j;
}

/* j's member at a path of keys ("peak.owner.pid"), or NULL. */
static inline json_t *at(json_t *j, const char *path)
{
	char key[64];
	while (j && *path) {
		size_t n = strcspn(path, ".");
		snprintf(key, sizeof key, "%.*s", (int)n, path);
		j = json_object_get(j, key);
		path += n + (path[n] == '.');
	}
	return j;
}

static inline void done(void)
{
	gpumon_model_destroy(M);
	M = NULL;
}

/* A run of job 100 (its child 101 named by a JOB record) beside a co-tenant 200 holding cotenant
 * bytes: n device rows a second apart, the job's NVML figure rising job_rate bytes a second; with
 * fw_points framework samples (0: none) rising fw_rate a step. */
static inline void run_scenario(unsigned n, uint64_t job_rate, unsigned fw_points, uint64_t fw_rate, uint64_t cotenant)
{
	put(job_rec(T0, 101)); /* known as the job's before NVML lists it */
	if (cotenant)
		proc(0, T0 + 1, 200, cotenant);
	proc(0, T0 + 1, 101, GiB);
	for (unsigned i = 0; i < n; i++) {
		uint64_t t = T0 + S + i * S, job = 2 * GiB + i * job_rate;
		if (VISITOR && i == 29)
			proc(0, T0 + 30 * S, 300, GiB);
		if (VISITOR && i == 39)
			gone(0, T0 + 40 * S, 300);
		proc(0, t, 100, job);
		if (i < fw_points)
			fw(t + 1, 100, i, GiB + i * fw_rate, GiB + i * fw_rate + 2 * GiB, 0);
		dev_row(0, t + 2, cotenant + job + GiB);
	}
}

#endif
