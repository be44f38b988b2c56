/* SPDX-License-Identifier: MIT */
/* test_reader.c — the recording's reader beside its writer: every kind of record written comes
 * back from gpumon_reader_next as it was written, merged in time order across tables, with the
 * run's metadata; an older file of format 1 (no framework_samples.limit_bytes, "pid N: command" job
 * events) still reads; a file cut short or with a damaged page reads as far as it is intact and
 * names the loss; other files are refused with a message that says why. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <errno.h>
#include <sys/stat.h>

#include "rec_util.h"

#define MAX_READ 64

/* Creates a recording at path on the fake two GPUs, writes recs and finishes with exit_status
 * (finish < -1: destroyed without finishing). Returns the start time the writer stored. */
static uint64_t write_file(const char *path, const gpumon_run_meta *meta, const gpumon_record *recs, size_t n,
			   int exit_status)
{
	gpumon *g = open_fake(TWO_GPUS, 0);
	gpumon_recording *r = NULL;
	int st = gpumon_recording_create(g, path, meta, &r);
	if (!st)
		st = gpumon_recording_write(r, recs, n);
	if (!st && exit_status >= -1)
		st = gpumon_recording_finish(r, exit_status);
	if (st)
		printf("# writing %s: %s\n", path, gpumon_recording_errmsg(r));
	gpumon_recording_destroy(r);
	gpumon_destroy(g);
	sqlite3 *db = db_open(path);
	uint64_t start = (uint64_t)q(db, "SELECT value FROM meta WHERE key = 'start_mono_ns'");
	sqlite3_close(db);
	return start;
}

/* Reads every record of path into out[0..cap-1]; returns how many there were, -1 when the file
 * did not open or the walk failed. */
static long read_file(const char *path, gpumon_record *out, size_t cap, char *damage, size_t dlen)
{
	gpumon_reader *r = NULL;
	if (gpumon_reader_create(path, &r) != GPUMON_OK) {
		printf("# %s: %s\n", path, gpumon_reader_errmsg(r));
		gpumon_reader_destroy(r);
		return -1;
	}
	gpumon_record rec;
	long n = 0;
	int rc;
	while ((rc = gpumon_reader_next(r, &rec)) > 0) {
		if ((size_t)n < cap) {
			out[n] = rec;
			out[n].event_kind = out[n].event_text = NULL; /* valid only until the next call */
			keep_process(&out[n]);                          /* likewise: copied */
		}
		n++;
	}
	if (damage)
		snprintf(damage, dlen, "%s", gpumon_reader_damage(r));
	gpumon_reader_destroy(r);
	return rc < 0 ? -1 : n;
}

static int same_sample(const gpumon_device_sample *a, const gpumon_device_sample *b)
{
	unsigned p = a->present;
	return a->present == b->present && a->t_ns == b->t_ns && a->memory_api == b->memory_api &&
	       (!(p & GPUMON_F_MEMORY) || (a->memory_total_bytes == b->memory_total_bytes &&
					   a->memory_used_bytes == b->memory_used_bytes &&
					   a->memory_free_bytes == b->memory_free_bytes)) &&
	       (!(p & GPUMON_F_MEM_RESERVED) || a->memory_reserved_bytes == b->memory_reserved_bytes) &&
	       (!(p & GPUMON_F_UTIL_GPU) || a->util_gpu_pct == b->util_gpu_pct) &&
	       (!(p & GPUMON_F_UTIL_MEMORY) || a->util_memory_pct == b->util_memory_pct) &&
	       (!(p & GPUMON_F_TEMPERATURE) || a->temperature_c == b->temperature_c) &&
	       (!(p & GPUMON_F_POWER) || a->power_mw == b->power_mw) &&
	       (!(p & GPUMON_F_ENERGY) || a->energy_mj == b->energy_mj) &&
	       (!(p & GPUMON_F_CLOCK_SM) || a->clock_sm_mhz == b->clock_sm_mhz) &&
	       (!(p & GPUMON_F_CLOCK_MEM) || a->clock_mem_mhz == b->clock_mem_mhz);
}

/* Process records compare on what their flags say is known. */
static int same_process(const gpumon_process *a, const gpumon_process *b)
{
	unsigned f = a->flags;
	return a->pid == b->pid && a->flags == b->flags &&
	       (!(f & GPUMON_PROC_USED_KNOWN) || a->used_bytes == b->used_bytes) &&
	       (!(f & GPUMON_PROC_USER_KNOWN) || (a->uid == b->uid && !strcmp(a->user, b->user))) &&
	       (!(f & GPUMON_PROC_NAME_KNOWN) || !strcmp(a->name, b->name)) &&
	       (!(f & GPUMON_PROC_CMDLINE_KNOWN) || !strcmp(a->cmdline, b->cmdline)) &&
	       (!(f & GPUMON_PROC_PPID_KNOWN) || a->ppid == b->ppid) &&
	       (!(f & GPUMON_PROC_MIG) ||
		(a->gpu_instance_id == b->gpu_instance_id && a->compute_instance_id == b->compute_instance_id));
}

static int same_framework(const gpumon_framework_sample *a, const gpumon_framework_sample *b)
{
	return a->t_ns == b->t_ns && a->pid == b->pid && a->device == b->device && a->step == b->step &&
	       a->allocated_known == b->allocated_known && a->reserved_known == b->reserved_known &&
	       a->max_allocated_known == b->max_allocated_known &&
	       (!a->allocated_known || a->allocated_bytes == b->allocated_bytes) &&
	       (!a->reserved_known || a->reserved_bytes == b->reserved_bytes) &&
	       (!a->max_allocated_known || a->max_allocated_bytes == b->max_allocated_bytes) &&
	       a->limit_bytes == b->limit_bytes && !strcmp(a->framework, b->framework);
}

/* Whether got is the record want was written as (events compare their strings separately). */
static int same_record(const gpumon_record *want, const gpumon_record *got)
{
	if (want->kind != got->kind || want->t_ns != got->t_ns)
		return 0;
	switch (want->kind) {
	case GPUMON_REC_DEVICE:
		return want->dev == got->dev && same_sample(&want->sample, &got->sample) &&
		       want->interval_samples == got->interval_samples &&
		       (!want->interval_samples ||
			(want->used_min_bytes == got->used_min_bytes && want->used_max_bytes == got->used_max_bytes &&
			 want->used_max_t_ns == got->used_max_t_ns));
	case GPUMON_REC_PROCESS:
	case GPUMON_REC_PROCESS_GONE: return want->dev == got->dev && same_process(want->process, got->process);
	case GPUMON_REC_LOST: return want->dev == got->dev;
	case GPUMON_REC_FRAMEWORK: return same_framework(&want->framework, &got->framework);
	case GPUMON_REC_JOB: return want->process->pid == got->process->pid;
	default: return 1;
	}
}

/* One record of every kind, and of each kind with its optional parts present and absent, at
 * distinct times in the order written. */
static size_t every_kind(uint64_t t, gpumon_record *r)
{
	size_t n = 0;
	r[n++] = device_rec(0, t + 1 * MS, 3 * GiB);
	r[n++] = device_rec_v1(1, t + 2 * MS);
	r[n] = device_rec(0, t + 3 * MS, 4 * GiB); /* energy and power only, no interval */
	r[n].sample.present = GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED | GPUMON_F_ENERGY | GPUMON_F_POWER;
	r[n].sample.energy_mj = 123456789012ull;
	r[n++].interval_samples = 0;
	r[n] = process_rec(GPUMON_REC_PROCESS, 0, t + 4 * MS, 4242, 2 * GiB,
			   KNOWN_PROC | GPUMON_PROC_GRAPHICS | GPUMON_PROC_PPID_KNOWN);
	process_of(&r[n++])->ppid = 4241;
	r[n++] = process_rec(GPUMON_REC_PROCESS, 1, t + 5 * MS, 999, 0, GPUMON_PROC_COMPUTE | GPUMON_PROC_FOREIGN);
	r[n] = process_rec(GPUMON_REC_PROCESS, 0, t + 6 * MS, 500, 0,
			   GPUMON_PROC_COMPUTE | GPUMON_PROC_USED_KNOWN | GPUMON_PROC_MIG);
	process_of(&r[n])->gpu_instance_id = 3;
	process_of(&r[n++])->compute_instance_id = 1;
	r[n++] = process_rec(GPUMON_REC_PROCESS_GONE, 0, t + 7 * MS, 4242, 0,
			     KNOWN_PROC & ~(unsigned)GPUMON_PROC_USED_KNOWN);
	process_of(&r[n - 1])->flags |= GPUMON_PROC_GRAPHICS | GPUMON_PROC_PPID_KNOWN;
	process_of(&r[n - 1])->ppid = 4241;
	r[n++] = process_rec(GPUMON_REC_PROCESS_GONE, 0, t + 8 * MS, 31337, 0, GPUMON_PROC_COMPUTE);
	r[n++] = (gpumon_record){.kind = GPUMON_REC_LOST, .dev = 1, .t_ns = t + 9 * MS};
	r[n] = fw_rec(t + 10 * MS, 4242, 0, 5, "torch");
	gpumon_framework_sample *f = &r[n++].framework;
	f->allocated_bytes = 5 * GiB;
	f->reserved_bytes = 6 * GiB;
	f->max_allocated_bytes = 7 * GiB;
	f->allocated_known = f->reserved_known = f->max_allocated_known = 1;
	f->limit_bytes = 40 * GiB;
	r[n++] = fw_rec(t + 11 * MS, 77, -1, -1, "paddle");
	r[n] = fw_rec(t + 12 * MS, 4242, 0, 6, "torch");
	r[n].framework.allocated_known = 1; /* 0 bytes, known */
	n++;
	r[n++] = event_rec(t + 13 * MS, "marker", "epoch 1");
	r[n++] = event_rec(t + 14 * MS, "note", NULL);
	r[n++] = job_rec(t + 15 * MS, 4243);
	return n;
}

static void test_every_kind(void)
{
	const char *path = tmp_path("kinds.gpumon");
	gpumon_record want[32], got[MAX_READ];
	size_t n = every_kind(now_ns(), want);
	write_file(path, NULL, want, n, 0);
	char damage[256];
	long m = read_file(path, got, MAX_READ, damage, sizeof damage);
	is_int(m, (long)n, "every record comes back, and nothing else");
	is_str(damage, "", "no damage");
	static const char *const names[] = {"", "DEVICE", "PROCESS", "PROCESS_GONE", "LOST", "FRAMEWORK", "EVENT", "JOB"};
	for (size_t i = 0; i < n && (long)i < m; i++)
		ok(same_record(&want[i], &got[i]), "record %zu (%s) comes back as written", i, names[want[i].kind]);
	/* the strings of events are valid only until the next call: walk again for them */
	gpumon_reader *r = NULL;
	gpumon_record rec;
	int events = 0;
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "open again");
	while (gpumon_reader_next(r, &rec) > 0)
		if (rec.kind == GPUMON_REC_EVENT) {
			if (events++ == 0)
				ok(!strcmp(rec.event_kind, "marker") && rec.event_text && !strcmp(rec.event_text, "epoch 1"),
				   "an event's kind and text");
			else
				ok(!strcmp(rec.event_kind, "note") && rec.event_text == NULL, "an event without text: NULL");
		}
	is_int(events, 2, "two events");
	is_int(gpumon_reader_next(r, &rec), 0, "the end stays the end");
	gpumon_reader_destroy(r);
}

/* Two GPUs lost at the same moment: each LOST record names its own GPU. */
static void test_lost_together(void)
{
	const char *path = tmp_path("lost.gpumon");
	uint64_t t = now_ns();
	gpumon_record want[] = {{.kind = GPUMON_REC_LOST, .dev = 0, .t_ns = t}, {.kind = GPUMON_REC_LOST, .dev = 1, .t_ns = t}};
	gpumon_record got[4];
	write_file(path, NULL, want, 2, 0);
	long m = read_file(path, got, 4, NULL, 0);
	is_int(m, 2, "two records");
	int seen0 = 0, seen1 = 0;
	for (long i = 0; i < m && i < 4; i++) {
		seen0 += got[i].kind == GPUMON_REC_LOST && got[i].dev == 0;
		seen1 += got[i].kind == GPUMON_REC_LOST && got[i].dev == 1;
	}
	ok(seen0 == 1 && seen1 == 1, "GPU 0 and GPU 1 each lost once (%d, %d)", seen0, seen1);
}

/* A process's command line changes after exec while its flags stay (it was listed between fork and
 * exec with its parent's): the records read back carry the command line it ran with, not the
 * parent's; and a name no longer known is not given back. */
static void test_identity_changes(void)
{
	const char *path = tmp_path("exec.gpumon");
	uint64_t t = now_ns();
	gpumon_record want[3] = {
	    process_rec(GPUMON_REC_PROCESS, 0, t + MS, 4242, GiB, KNOWN_PROC),
	    process_rec(GPUMON_REC_PROCESS, 0, t + 2 * MS, 4242, 2 * GiB, KNOWN_PROC),
	    process_rec(GPUMON_REC_PROCESS, 0, t + 3 * MS, 4242, 3 * GiB, KNOWN_PROC & ~(unsigned)GPUMON_PROC_NAME_KNOWN),
	};
	snprintf(process_of(&want[0])->cmdline, sizeof process_of(&want[0])->cmdline, "gpumon run -- python train.py");
	gpumon_record got[4];
	write_file(path, NULL, want, 2, 0);
	long m = read_file(path, got, 4, NULL, 0);
	is_int(m, 2, "two records");
	ok(m == 2 && got[1].process->used_bytes == 2 * GiB, "the figures of each record");
	ok(m == 2 && !strcmp(got[1].process->cmdline, process_of(&want[1])->cmdline), "the command line after exec: %s",
	   m == 2 ? got[1].process->cmdline : "");

	path = tmp_path("noname.gpumon");
	write_file(path, NULL, want + 1, 2, 0);
	m = read_file(path, got, 4, NULL, 0);
	ok(m == 2 && !(got[1].process->flags & GPUMON_PROC_NAME_KNOWN) && !got[1].process->name[0],
	   "a name no longer known is not given back");
	ok(m == 2 && !strcmp(got[1].process->cmdline, process_of(&want[1])->cmdline), "the command line stays");
}

/* Written table by table, each out of step with the others: read back in one time order. */
static void test_merged_in_time_order(void)
{
	const char *path = tmp_path("merge.gpumon");
	uint64_t t = now_ns();
	gpumon_record recs[40];
	size_t n = 0;
	for (int i = 0; i < 10; i++) /* device rows at 0, 4, 8 ... ms */
		recs[n++] = device_rec(0, t + (uint64_t)(4 * i) * MS, GiB + (uint64_t)i * MiB);
	for (int i = 0; i < 10; i++) { /* framework at 1, 5, 9 ... */
		recs[n] = fw_rec(t + (uint64_t)(4 * i + 1) * MS, 4242, 0, i, "torch");
		recs[n++].framework.allocated_known = 1;
	}
	for (int i = 0; i < 10; i++) /* processes at 2, 6, 10 ... */
		recs[n++] = process_rec(GPUMON_REC_PROCESS, 0, t + (uint64_t)(4 * i + 2) * MS, 4242, GiB + (uint64_t)i * MiB,
					KNOWN_PROC);
	for (int i = 0; i < 10; i++) /* events at 3, 7, 11 ... */
		recs[n++] = event_rec(t + (uint64_t)(4 * i + 3) * MS, "marker", "m");
	write_file(path, NULL, recs, n, 0);
	gpumon_record got[MAX_READ];
	long m = read_file(path, got, MAX_READ, NULL, 0);
	is_int(m, 40, "every record");
	int ordered = 1, kinds = 1;
	static const int cycle[4] = {GPUMON_REC_DEVICE, GPUMON_REC_FRAMEWORK, GPUMON_REC_PROCESS, GPUMON_REC_EVENT};
	for (long i = 0; i < m && i < MAX_READ; i++) {
		ordered &= got[i].t_ns == t + (uint64_t)i * MS;
		kinds &= got[i].kind == cycle[i % 4];
	}
	ok(ordered, "in time order across the four tables");
	ok(kinds, "device, framework, process, event, in turn");
}

static void test_meta(void)
{
	const char *path = tmp_path("meta.gpumon");
	gpumon_run_meta meta = {.size = sizeof meta, .kind = "run", .command = "python train.py 'a b'",
				.settings = "CUDA_VISIBLE_DEVICES=1\nA=2", .job_pid = 4242, .exit_status = -1};
	uint64_t before = now_ns();
	gpumon_record rec = device_rec(0, before + MS, GiB);
	uint64_t start = write_file(path, &meta, &rec, 1, 3);
	uint64_t after = now_ns();
	gpumon_reader *r = NULL;
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "open");
	is_str(gpumon_reader_errmsg(r), "", "no message");
	const gpumon_run_meta *m = gpumon_reader_meta(r);
	is_str(m->kind, "run", "kind");
	is_str(m->command, "python train.py 'a b'", "command");
	is_str(m->settings, "CUDA_VISIBLE_DEVICES=1\nA=2", "settings");
	is_int(m->job_pid, 4242, "job pid");
	is_int(m->start_mono_ns, start, "start on the monotonic clock, as stored");
	ok(m->start_mono_ns >= before && m->start_mono_ns <= after, "taken while it was written");
	ok(llabs((long long)(m->start_wall_ns / 1000000000u) - (long long)time(NULL)) < 60, "start on the wall clock");
	ok(m->end_mono_ns >= m->start_mono_ns && m->end_mono_ns <= after, "end after the start");
	is_int(m->exit_status, 3, "exit status");
	ok(m->host && m->host[0], "host: %s", m->host ? m->host : "(null)");
	is_str(m->driver_version, "580.159.04", "driver version");
	is_int(gpumon_reader_device_count(r), 2, "two GPUs");
	gpumon_device_info d;
	is_int(gpumon_reader_device(r, 0, &d), GPUMON_OK, "GPU 0");
	ok(d.index == 0 && !strcmp(d.name, "NVIDIA H200") && !strcmp(d.uuid, "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51") &&
	       !strcmp(d.pci_bus_id, "00000000:00:06.0") && d.memory_total_bytes == 150754820096ull && !d.lost,
	   "its name, UUID, bus id and total");
	ok(d.present == (GPUMON_INFO_NAME | GPUMON_INFO_UUID | GPUMON_INFO_PCI_BUS_ID | GPUMON_INFO_MEMORY_TOTAL |
			 GPUMON_INFO_MIG_MODE),
	   "all present");
	is_int(gpumon_reader_device(r, 1, &d), GPUMON_OK, "GPU 1");
	ok(!(d.present & GPUMON_INFO_NAME) && d.memory_total_bytes == 80 * GiB, "its name unknown, its total");
	is_int(gpumon_reader_device(r, 2, &d), GPUMON_E_NOT_FOUND, "no GPU 2");
	gpumon_reader_destroy(r);

	/* no meta, no job, no exit status */
	path = tmp_path("bare.gpumon");
	write_file(path, NULL, &rec, 1, -1);
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "open a recording without meta");
	m = gpumon_reader_meta(r);
	is_str(m->kind, "record", "kind defaults to record");
	ok(!m->command && !m->settings, "no command, no settings: NULL");
	ok(m->job_pid == 0 && m->exit_status == -1, "no job pid (0), no exit status (-1)");
	ok(m->end_mono_ns > 0, "an end");
	gpumon_reader_destroy(r);

	/* not finished: committed records, no end */
	path = tmp_path("unfinished.gpumon");
	write_file(path, &meta, &rec, 1, -2);
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "open a recording never finished");
	m = gpumon_reader_meta(r);
	ok(m->end_mono_ns == 0 && m->exit_status == -1, "no end, no exit status");
	gpumon_record got;
	is_int(gpumon_reader_next(r, &got), 1, "its record");
	ok(same_record(&rec, &got), "as written");
	is_int(gpumon_reader_next(r, &got), 0, "and the end");
	gpumon_reader_destroy(r);
}

/* A reader opened while the file is written reads what was committed. */
static void test_read_while_written(void)
{
	gpumon *g = open_fake(H200, 0);
	const char *path = tmp_path("live.gpumon");
	gpumon_recording *w = NULL;
	gpumon_reader *r = NULL;
	gpumon_record recs[3], got;
	uint64_t t = now_ns();
	for (int i = 0; i < 3; i++)
		recs[i] = device_rec(0, t + (uint64_t)i * MS, GiB);
	is_int(gpumon_recording_create(g, path, NULL, &w), GPUMON_OK, "create");
	gpumon_recording_write(w, recs, 3);
	is_int(gpumon_recording_commit(w), GPUMON_OK, "commit");
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "a reader opens the file being written");
	int n = 0;
	while (gpumon_reader_next(r, &got) > 0)
		n++;
	is_int(n, 3, "and reads the three committed records");
	is_int(gpumon_reader_meta(r)->end_mono_ns, 0, "no end yet");
	gpumon_reader_destroy(r);
	is_int(gpumon_recording_finish(w, -1), GPUMON_OK, "finish with a reader gone");
	gpumon_recording_destroy(w);
	gpumon_destroy(g);
}

/* An older file of format 1: framework_samples without limit_bytes, job events that name the
 * command ("pid N: command"). */
static void test_older_file(void)
{
	const char *path = tmp_path("older.gpumon");
	uint64_t t = now_ns();
	gpumon_record recs[3] = {fw_rec(t + MS, 4242, 0, 1, "torch"), fw_rec(t + 2 * MS, 4242, 0, 2, "torch"),
				 device_rec(0, t + 3 * MS, GiB)};
	for (int i = 0; i < 2; i++) {
		recs[i].framework.allocated_bytes = (uint64_t)(i + 1) * GiB;
		recs[i].framework.allocated_known = 1;
	}
	recs[1].framework.limit_bytes = 40 * GiB;
	write_file(path, NULL, recs, 3, 0);
	ok(db_exec(path, "BEGIN;"
			 "CREATE TABLE old AS SELECT t_ns, source, step, allocated_bytes, reserved_bytes,"
			 " max_allocated_bytes FROM framework_samples ORDER BY rowid;"
			 "DROP TABLE framework_samples;"
			 "CREATE TABLE framework_samples (t_ns INTEGER NOT NULL, source INTEGER NOT NULL, step INTEGER,"
			 " allocated_bytes INTEGER, reserved_bytes INTEGER, max_allocated_bytes INTEGER);"
			 "INSERT INTO framework_samples SELECT * FROM old; DROP TABLE old;"
			 "INSERT INTO events (t_ns, kind, text) VALUES (1, 'job', 'pid 4243: python worker.py');"
			 "COMMIT;"),
	   "made into an older file: no limit_bytes column, a job event with its command");
	gpumon_record got[8];
	char damage[256];
	long m = read_file(path, got, 8, damage, sizeof damage);
	is_int(m, 4, "four records");
	is_str(damage, "", "no damage");
	recs[1].framework.limit_bytes = 0; /* not in the file: none known */
	ok(m == 4 && same_record(&recs[0], &got[1]) && same_record(&recs[1], &got[2]),
	   "framework samples as written, without a cap");
	ok(m == 4 && same_record(&recs[2], &got[3]), "the device record");
	ok(m >= 1 && got[0].kind == GPUMON_REC_JOB && got[0].process->pid == 4243,
	   "\"pid N: command\" is a pid of the job (kind %d, pid %u)", got[0].kind, got[0].process->pid);
}

/* A file whose start time is lost: counted from the first record, and said. */
static void test_no_start(void)
{
	const char *path = tmp_path("nostart.gpumon");
	uint64_t t = now_ns() + 5 * MS;
	gpumon_record recs[2] = {device_rec(0, t, GiB), device_rec(0, t + MS, GiB)};
	write_file(path, NULL, recs, 2, 0);
	db_exec(path, "DELETE FROM meta WHERE key IN ('start_mono_ns', 'start_wall_ns')");
	gpumon_reader *r = NULL;
	gpumon_record got;
	is_int(gpumon_reader_create(path, &r), GPUMON_OK, "a file without its start time opens");
	ok(strstr(gpumon_reader_damage(r), "start time"), "the damage says so: %s", gpumon_reader_damage(r));
	is_int(gpumon_reader_next(r, &got), 1, "its first record");
	is_int(gpumon_reader_meta(r)->start_mono_ns, t, "the start is the first record's time");
	gpumon_reader_destroy(r);
}

/* A recording of n device rows and n framework samples, 10 ms apart. */
static void big_file(const char *path, int n)
{
	gpumon_record *recs = calloc(2 * (size_t)n, sizeof *recs);
	if (!recs) {
		printf("Bail out! out of memory\n");
		exit(1);
	}
	uint64_t t = now_ns() + 1000 * MS;
	for (int i = 0; i < n; i++) {
		recs[2 * i] = device_rec(0, t + (uint64_t)i * 10 * MS, 10 * GiB + (uint64_t)i * MiB);
		recs[2 * i + 1] = fw_rec(t + (uint64_t)i * 10 * MS + 1, 4242, 0, i, "torch");
		recs[2 * i + 1].framework.allocated_bytes = 2 * GiB + (uint64_t)i * MiB;
		recs[2 * i + 1].framework.allocated_known = 1;
	}
	write_file(path, NULL, recs, 2 * (size_t)n, 0);
	free(recs);
}

/* Walks path: how many records, whether in time order, the last time; the damage into buf. */
static long walk(const char *path, int *ordered, uint64_t *last, int *failed, char *buf, size_t len)
{
	gpumon_reader *r = NULL;
	*ordered = 1;
	*last = 0;
	*failed = 0;
	if (gpumon_reader_create(path, &r) != GPUMON_OK) {
		printf("# %s\n", gpumon_reader_errmsg(r));
		gpumon_reader_destroy(r);
		return -1;
	}
	gpumon_record rec;
	long n = 0;
	int rc;
	while ((rc = gpumon_reader_next(r, &rec)) > 0) {
		*ordered &= rec.t_ns >= *last;
		*last = rec.t_ns;
		n++;
	}
	*failed = rc < 0;
	snprintf(buf, len, "%s", gpumon_reader_damage(r));
	gpumon_reader_destroy(r);
	return n;
}

static void copy_file(const char *from, const char *to, long cut, long scribble_at, long scribble_len)
{
	FILE *f = fopen(from, "rb");
	long size = 0;
	char *data = NULL;
	if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && (data = malloc((size_t)size)) &&
	    fseek(f, 0, SEEK_SET) == 0 && fread(data, 1, (size_t)size, f) == (size_t)size) {
		if (scribble_at >= 0 && scribble_at + scribble_len <= size)
			memset(data + scribble_at, 0x5a, (size_t)scribble_len);
		FILE *o = fopen(to, "wb");
		if (!o || fwrite(data, 1, (size_t)(cut > 0 && cut < size ? cut : size), o) == 0)
			printf("# cannot write %s\n", to);
		if (o)
			fclose(o);
	}
	if (f)
		fclose(f);
	free(data);
}

static void test_damaged(void)
{
	const char *whole = tmp_path("whole.gpumon");
	big_file(whole, 20000);
	char damage[512];
	int ordered, failed;
	uint64_t last_whole, last;
	long all = walk(whole, &ordered, &last_whole, &failed, damage, sizeof damage);
	is_int(all, 40000, "the whole file: every record");
	is_str(damage, "", "no damage");
	struct stat sb;
	stat(whole, &sb);
	sqlite3 *db = db_open(whole);
	long page = (long)q(db, "PRAGMA page_size");
	sqlite3_close(db);

	const char *cut = tmp_path("cut.gpumon");
	copy_file(whole, cut, (long)sb.st_size * 2 / 3, -1, 0);
	long n = walk(cut, &ordered, &last, &failed, damage, sizeof damage);
	ok(n > 0 && n < all, "cut short: what is intact is read (%ld of %ld records)", n, all);
	ok(ordered, "in time order");
	ok(!failed, "the walk ends without failing");
	ok(strstr(damage, "unreadable") != NULL, "the damage names the loss: %s", damage);

	const char *bad = tmp_path("bad.gpumon");
	long mid = ((long)sb.st_size / page / 2) * page;
	copy_file(whole, bad, 0, mid, page);
	n = walk(bad, &ordered, &last, &failed, damage, sizeof damage);
	ok(n > all / 2 && n < all, "a damaged page: the rest is read (%ld of %ld records)", n, all);
	ok(ordered, "in time order");
	is_int(last, last_whole, "up to the last record, after the damaged page");
	ok(strstr(damage, "rows of table") && strstr(damage, "are unreadable"), "the damage counts the rows lost: %s",
	   damage);
}

/* Opens path expecting status and a message holding want. */
static void refused(const char *path, int status, const char *want, const char *what)
{
	gpumon_reader *r = NULL;
	is_int(gpumon_reader_create(path, &r), status, "%s: refused", what);
	ok(r && strstr(gpumon_reader_errmsg(r), want), "%s: %s", what, r ? gpumon_reader_errmsg(r) : "no reader");
	gpumon_record rec;
	ok(gpumon_reader_next(r, &rec) < 0, "%s: nothing to read", what);
	gpumon_reader_destroy(r);
}

static void test_refused(void)
{
	const char *text = tmp_path("notes.txt");
	FILE *f = fopen(text, "w");
	for (int i = 0; f && i < 100; i++)
		fputs("hello\n", f);
	if (f)
		fclose(f);
	refused(text, GPUMON_E_INVAL, "is not a gpumon recording (not an SQLite database)", "a text file");
	const char *other = tmp_path("other.db");
	sqlite3 *db = NULL;
	sqlite3_open(other, &db);
	sqlite3_exec(db, "CREATE TABLE t (x)", NULL, NULL, NULL);
	sqlite3_close(db);
	refused(other, GPUMON_E_INVAL, "an SQLite database of another program", "another program's database");
	const char *newer = tmp_path("newer.gpumon");
	gpumon_record rec = device_rec(0, now_ns(), GiB);
	write_file(newer, NULL, &rec, 1, 0);
	db_exec(newer, "PRAGMA user_version = 2");
	refused(newer, GPUMON_E_INVAL, "format version 2", "a newer format");
	gpumon_reader *r = NULL;
	gpumon_reader_create(newer, &r);
	ok(strstr(gpumon_reader_errmsg(r), "newer gpumon"), "says to read it with a newer gpumon");
	gpumon_reader_destroy(r);
	refused(tmp_path("missing.gpumon"), GPUMON_E_IO, "No such file or directory", "a missing file");
	refused(tmpdir, GPUMON_E_IO, "is a directory", "a directory");
	refused("", GPUMON_E_INVAL, "no recording", "an empty name");
	is_int(gpumon_reader_create(text, NULL), GPUMON_E_INVAL, "no out");
	gpumon_reader_destroy(NULL); /* a no-op */
	is_int(gpumon_reader_device_count(NULL), 0, "no reader: no GPUs");
	is_int(gpumon_reader_next(NULL, &rec), GPUMON_E_INVAL, "next(NULL)");
}

/* ---- out of memory: said as such, never as damage ------------------------------------------------- */

/* SQLite's allocator, with a budget: after `budget` more allocations every one fails. */
static sqlite3_mem_methods real_mem;
static long budget = -1; /* < 0: no limit */

/* Whether this allocation fails: once the budget is spent, every one does. */
static int spent(void)
{
	if (budget < 0)
		return 0;
	if (budget == 0)
		return 1;
	budget--;
	return 0;
}

static void *failing_malloc(int n)
{
	return spent() ? NULL : real_mem.xMalloc(n);
}

static void *failing_realloc(void *p, int n)
{
	return spent() ? NULL : real_mem.xRealloc(p, n);
}

/* Reads path with SQLite out of memory after `after` allocations. Returns the walk's outcome: the
 * status that ended it (0 at its end), with the damage named and the message. */
static int read_starved(const char *path, long after, char *damage, size_t dlen, char *msg, size_t mlen)
{
	gpumon_reader *r = NULL;
	gpumon_record rec;
	budget = after;
	int st = gpumon_reader_create(path, &r);
	if (st == GPUMON_OK)
		while ((st = gpumon_reader_next(r, &rec)) > 0)
			;
	budget = -1;
	snprintf(damage, dlen, "%s", gpumon_reader_damage(r));
	snprintf(msg, mlen, "%s", gpumon_reader_errmsg(r));
	gpumon_reader_destroy(r);
	return st;
}

static void test_out_of_memory(void)
{
	const char *path = tmp_path("starved.gpumon");
	gpumon_record want[32];
	size_t n = every_kind(now_ns(), want);
	write_file(path, NULL, want, n, 0);
	sqlite3_shutdown(); /* the allocator can only be changed while SQLite is not initialised */
	sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real_mem);
	sqlite3_mem_methods m = real_mem;
	m.xMalloc = failing_malloc;
	m.xRealloc = failing_realloc;
	if (sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK || sqlite3_initialize() != SQLITE_OK) {
		ok(0, "SQLite's allocator could not be replaced");
		return;
	}
	/* every allocation point in turn fails: the reader says out of memory, or reads it all, and
	   never calls an intact file damaged or failing */
	int whole = 0, starved = 0, wrong = 0;
	char damage[1024], msg[256], first_wrong[1400] = "";
	for (long after = 0; after < 5000 && !whole; after++) {
		int st = read_starved(path, after, damage, sizeof damage, msg, sizeof msg);
		if (st == GPUMON_OK && !damage[0])
			whole = 1;
		else if (st == GPUMON_E_NOMEM && strstr(msg, "out of memory") && !damage[0])
			starved++;
		else if (!wrong++)
			snprintf(first_wrong, sizeof first_wrong, "after %ld allocations: status %d, \"%s\", damage \"%s\"",
				 after, st, msg, damage);
	}
	ok(whole, "with enough memory the file reads whole");
	ok(starved > 10, "short of memory at %d points: each said \"out of memory\"", starved);
	ok(!wrong, "never taken for damage or a failing file (%d times; the first %s)", wrong, first_wrong);
	sqlite3_shutdown();
	sqlite3_config(SQLITE_CONFIG_MALLOC, &real_mem);
	sqlite3_initialize();
}

int main(void)
{
	make_tmpdir("reader");
	test_every_kind();
	test_lost_together();
	test_identity_changes();
	test_merged_in_time_order();
	test_meta();
	test_read_while_written();
	test_older_file();
	test_no_start();
	test_damaged();
	test_refused();
	test_out_of_memory();
	remove_dir(tmpdir);
	remove_scenario();
	return tap_done();
}
