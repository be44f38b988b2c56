/* SPDX-License-Identifier: MIT */
/* gen_day.c — writes a synthetic recording of a day-long training run through the library's
 * recording API, for timing `gpumon report` on it (bench/bench_report.sh): one GPU, a device
 * record a second, the job's process changing every 10 s, a co-tenant, framework samples at
 * 10 Hz with dynamic shapes and a slow leak, a marker an hour. Needs the fake NVML (the device
 * table comes from it). Usage: gen_day OUT.gpumon [HOURS] */
#include <gpumon/gpumon.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S 1000000000ull
#define MIB (1024ull * 1024)
#define GIB (1024 * MIB)

/* A process record of p, which the caller keeps until the record is written. */
static gpumon_record proc(gpumon_process *p, unsigned pid, uint64_t t, uint64_t used, const char *cmd)
{
	gpumon_record r;
	memset(&r, 0, sizeof r);
	memset(p, 0, sizeof *p);
	r.kind = GPUMON_REC_PROCESS;
	r.t_ns = t;
	r.process = p;
	p->pid = pid;
	p->used_bytes = used;
	p->flags = GPUMON_PROC_COMPUTE | GPUMON_PROC_USED_KNOWN | GPUMON_PROC_CMDLINE_KNOWN | GPUMON_PROC_NAME_KNOWN;
	snprintf(p->name, sizeof p->name, "python3");
	snprintf(p->cmdline, sizeof p->cmdline, "%s", cmd);
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s OUT.gpumon [HOURS]\n", argv[0]);
		return 2;
	}
	double hours = argc > 2 ? atof(argv[2]) : 24;
	gpumon *g = NULL;
	if (gpumon_create(&g) != GPUMON_OK) {
		fprintf(stderr, "gpumon_create: %s\n", gpumon_errmsg(g));
		return 1;
	}
	gpumon_run_meta info = {.size = sizeof info, .kind = "run", .command = "python3 train.py", .job_pid = 1000,
				.exit_status = -1};
	gpumon_recording *rec = NULL;
	if (gpumon_recording_create(g, argv[1], &info, &rec) != GPUMON_OK) {
		fprintf(stderr, "%s\n", gpumon_recording_errmsg(rec));
		return 1;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t t0 = (uint64_t)ts.tv_sec * S + (uint64_t)ts.tv_nsec + S;
	gpumon_process job_pid = {.pid = 1000}, pr;
	gpumon_record job = {.kind = GPUMON_REC_JOB, .t_ns = t0, .process = &job_pid};
	gpumon_recording_write(rec, &job, 1);
	uint64_t seconds = (uint64_t)(hours * 3600), step = 0, rnd = 1;
	gpumon_record co = proc(&pr, 2000, t0, 15 * GIB, "python3 colleague.py");
	gpumon_recording_write(rec, &co, 1);
	for (uint64_t s = 0; s < seconds; s++) {
		uint64_t t = t0 + s * S;
		uint64_t leak = step * 40 * 1024; /* 40 KiB a step: about 3.3 GiB a day */
		for (int k = 0; k < 10; k++, step++) {
			rnd = rnd * 6364136223846793005ull + 1442695040888963407ull;
			gpumon_record fr;
			memset(&fr, 0, sizeof fr);
			fr.kind = GPUMON_REC_FRAMEWORK;
			gpumon_framework_sample f;
			memset(&f, 0, sizeof f);
			f.t_ns = t + (uint64_t)k * S / 10;
			f.pid = 1000;
			f.device = 0;
			f.step = (int64_t)step;
			f.allocated_bytes = 20 * GIB + leak + (rnd >> 61) * 256 * MIB;
			f.reserved_bytes = 30 * GIB + leak;
			f.max_allocated_bytes = 22 * GIB + leak;
			f.allocated_known = f.reserved_known = f.max_allocated_known = 1;
			snprintf(f.framework, sizeof f.framework, "torch");
			fr.t_ns = f.t_ns;
			fr.framework = f;
			gpumon_recording_write(rec, &fr, 1);
		}
		gpumon_record d;
		memset(&d, 0, sizeof d);
		d.kind = GPUMON_REC_DEVICE;
		d.t_ns = t;
		d.sample.present = GPUMON_F_MEMORY;
		d.sample.memory_total_bytes = 140 * GIB;
		d.sample.memory_used_bytes = 46 * GIB + leak;
		d.sample.memory_free_bytes = d.sample.memory_total_bytes - d.sample.memory_used_bytes;
		d.used_min_bytes = d.sample.memory_used_bytes;
		d.used_max_bytes = d.sample.memory_used_bytes + (rnd >> 62) * GIB;
		d.used_max_t_ns = t;
		d.interval_samples = 100;
		gpumon_recording_write(rec, &d, 1);
		if (s % 10 == 0) {
			gpumon_record p = proc(&pr, 1000, t, 31 * GIB + leak, "python3 train.py");
			gpumon_recording_write(rec, &p, 1);
		}
		if (s % 3600 == 0) {
			gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = t, .event_kind = "marker", .event_text = "epoch"};
			gpumon_recording_write(rec, &e, 1);
		}
	}
	int rc = gpumon_recording_finish(rec, 0);
	if (rc)
		fprintf(stderr, "%s\n", gpumon_recording_errmsg(rec));
	gpumon_recording_destroy(rec);
	gpumon_destroy(g);
	if (rc) {
		fprintf(stderr, "closing the recording failed: %d\n", rc);
		return 1;
	}
	printf("%s: %.1f h, %llu framework samples\n", argv[1], hours, (unsigned long long)step);
	return 0;
}
