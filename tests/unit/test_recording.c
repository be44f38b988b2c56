/* SPDX-License-Identifier: MIT */
/* test_recording.c — recordings against the fake NVML: every table and its absent values (NULL,
 * never 0), refusing to overwrite, reading while written, the 200 ms commit, a writer killed with
 * SIGKILL, a full disk, and the size of an hour. `test_recording PATH [--kill]` writes a small
 * known recording to PATH instead (the export tests read it); --kill leaves it as a killed
 * writer would. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "rec_util.h"

/* The small recording of the export tests, with times at exact half seconds after the start. */
static int write_sample(const char *path, int kill_writer)
{
	gpumon *g = open_fake(TWO_GPUS, 0);
	gpumon_run_meta info = {.size = sizeof info, .kind = "run", .command = "python train.py",
				.settings = "A=1\nB=2", .job_pid = 4242, .exit_status = -1};
	gpumon_recording *r = NULL;
	int st = gpumon_recording_create(g, path, &info, &r);
	if (st != GPUMON_OK) {
		fprintf(stderr, "%s\n", gpumon_recording_errmsg(r));
		return 1;
	}
	sqlite3 *db = db_open(path);
	uint64_t t0 = (uint64_t)q(db, "SELECT value FROM meta WHERE key = 'start_mono_ns'"), h = 500 * MS;
	sqlite3_close(db);
	gpumon_record recs[] = {
	    device_rec(0, t0 + h, GiB),
	    device_rec_v1(1, t0 + h),
	    process_rec(GPUMON_REC_PROCESS, 0, t0 + h, 4242, GiB, KNOWN_PROC),
	    fw_rec(t0 + h, 4242, 0, 1, "torch"),
	    device_rec(0, t0 + 2 * h, 3 * GiB),
	    process_rec(GPUMON_REC_PROCESS, 1, t0 + 2 * h, 999, 0, GPUMON_PROC_COMPUTE | GPUMON_PROC_FOREIGN),
	    fw_rec(t0 + 2 * h, 4242, 0, 2, "torch"),
	    event_rec(t0 + 2 * h, "marker", "epoch 1"),
	    process_rec(GPUMON_REC_PROCESS_GONE, 0, t0 + 3 * h, 4242, 0, KNOWN_PROC),
	    event_rec(t0 + 3 * h, "note", "two words, \"quoted\"\nand a second line"),
	};
	gpumon_framework_sample *f1 = &recs[3].framework, *f2 = &recs[6].framework;
	f1->allocated_bytes = GiB;
	f1->reserved_bytes = 2 * GiB;
	f1->allocated_known = f1->reserved_known = 1;
	f2->allocated_bytes = f2->max_allocated_bytes = 3 * GiB / 2;
	f2->allocated_known = f2->max_allocated_known = 1;
	st = gpumon_recording_write(r, recs, sizeof recs / sizeof recs[0]);
	if (!st && kill_writer) {
		st = gpumon_recording_commit(r);
		_exit(st ? 1 : 0); /* no finish: the file stays as a killed writer leaves it */
	}
	if (!st)
		st = gpumon_recording_finish(r, 0);
	if (st)
		fprintf(stderr, "writing %s failed: %s\n", path, gpumon_recording_errmsg(r));
	gpumon_recording_destroy(r);
	gpumon_destroy(g);
	remove_scenario();
	return st ? 1 : 0;
}

static void test_tables(void)
{
	gpumon *g = open_fake(TWO_GPUS, 0);
	const char *path = tmp_path("tables.gpumon");
	char b[256];
	gpumon_run_meta info = {.size = sizeof info, .kind = "run", .command = "python train.py",
				.settings = "A=1\nB=2", .job_pid = 4242, .exit_status = -1};
	gpumon_recording *r = NULL;
	uint64_t t = now_ns();
	is_int(gpumon_recording_create(g, path, &info, &r), GPUMON_OK, "create");
	is_str(gpumon_recording_errmsg(r), "", "no message");
	gpumon_record recs[] = {
	    device_rec(0, t + 1 * MS, GiB),
	    device_rec_v1(1, t + 1 * MS),
	    process_rec(GPUMON_REC_PROCESS, 0, t + 2 * MS, 4242, GiB, KNOWN_PROC),
	    process_rec(GPUMON_REC_PROCESS, 0, t + 3 * MS, 4242, 2 * GiB, KNOWN_PROC),
	    process_rec(GPUMON_REC_PROCESS, 1, t + 3 * MS, 999, 0, GPUMON_PROC_COMPUTE | GPUMON_PROC_FOREIGN),
	    process_rec(GPUMON_REC_PROCESS_GONE, 0, t + 4 * MS, 4242, 0, KNOWN_PROC),
	    {.kind = GPUMON_REC_LOST, .dev = 1, .t_ns = t + 5 * MS},
	};
	is_int(gpumon_recording_write(r, recs, sizeof recs / sizeof recs[0]), GPUMON_OK, "write records");
	gpumon_record f = fw_rec(t + 6 * MS, 4242, 0, 10, "torch");
	f.framework.allocated_bytes = 5 * GiB;
	f.framework.reserved_bytes = 6 * GiB;
	f.framework.allocated_known = f.framework.reserved_known = 1;
	is_int(gpumon_recording_write(r, &f, 1), GPUMON_OK, "framework sample");
	f.t_ns = f.framework.t_ns += MS;
	f.framework.step = 11;
	f.framework.limit_bytes = 40 * GiB;
	is_int(gpumon_recording_write(r, &f, 1), GPUMON_OK, "framework sample, same source, with a cap");
	gpumon_record more[] = {
	    fw_rec(t + 8 * MS, 77, -1, -1, "paddle"),
	    event_rec(t + 9 * MS, "marker", "epoch 1"),
	    event_rec(t + 9 * MS, "note", NULL),
	    job_rec(t + 10 * MS, 4243),
	};
	is_int(gpumon_recording_write(r, more, 4), GPUMON_OK,
	       "a framework sample with nothing known, events with and without text, a pid of the job");
	is_int(gpumon_recording_finish(r, 3), GPUMON_OK, "finish");
	is_int(gpumon_recording_write(r, &f, 1), GPUMON_E_INVAL, "a write after the end is refused");
	ok(strstr(gpumon_recording_errmsg(r), "after its end"), "message: %s", gpumon_recording_errmsg(r));
	is_int(gpumon_recording_finish(r, 4), GPUMON_OK, "a second finish changes nothing");
	gpumon_recording_destroy(r);
	gpumon_destroy(g);

	sqlite3 *db = db_open(path);
	is_int(q(db, "PRAGMA application_id"), APPLICATION_ID, "application_id spells GPUM");
	is_int(q(db, "PRAGMA user_version"), 1, "format version 1");
	is_str(qs(db, "PRAGMA journal_mode", b, sizeof b), "delete", "a finished recording is one file");
	is_str(qs(db, "PRAGMA integrity_check", b, sizeof b), "ok", "integrity");
	/* meta */
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'kind'", b, sizeof b), "run", "meta kind");
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'command'", b, sizeof b), "python train.py",
	       "meta command");
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'settings'", b, sizeof b), "A=1\nB=2",
	       "meta settings");
	is_int(q(db, "SELECT value FROM meta WHERE key = 'job_pid'"), 4242, "meta job_pid");
	is_int(q(db, "SELECT value FROM meta WHERE key = 'exit_status'"), 3, "meta exit_status");
	is_int(q(db, "SELECT value FROM meta WHERE key = 'format_version'"), 1, "meta format_version");
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'gpumon_version'", b, sizeof b),
	       GPUMON_VERSION, "meta gpumon_version");
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'driver_version'", b, sizeof b), "580.159.04",
	       "meta driver");
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'nvml_version'", b, sizeof b), "12.580.159.04",
	       "meta nvml");
	ok(strlen(qs(db, "SELECT value FROM meta WHERE key = 'host'", b, sizeof b)) > 0, "meta host");
	long long start = q(db, "SELECT value FROM meta WHERE key = 'start_mono_ns'");
	long long end = q(db, "SELECT value FROM meta WHERE key = 'end_mono_ns'");
	ok((uint64_t)start >= t && (uint64_t)start - t < 1000 * MS, "start on the monotonic clock");
	ok(end >= start && end <= (long long)now_ns(), "end after start");
	long long wall = q(db, "SELECT value FROM meta WHERE key = 'start_wall_ns'");
	ok(llabs(wall / 1000000000 - (long long)time(NULL)) < 60, "start on the wall clock, in ns");
	is_int(q(db, "SELECT count(*) FROM meta WHERE typeof(value) = 'integer' AND key LIKE '%_ns'"), 4,
	       "times are integers");
	/* devices */
	is_int(q(db, "SELECT count(*) FROM devices"), 2, "two devices");
	is_str(qs(db, "SELECT uuid FROM devices WHERE dev = 0", b, sizeof b),
	       "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51", "uuid");
	is_str(qs(db, "SELECT name FROM devices WHERE dev = 0", b, sizeof b), "NVIDIA H200", "name");
	is_str(qs(db, "SELECT pci_bus_id FROM devices WHERE dev = 0", b, sizeof b), "00000000:00:06.0",
	       "bus id");
	is_int(q(db, "SELECT memory_total_bytes FROM devices WHERE dev = 0"), 150754820096LL, "total");
	is_int(q(db, "SELECT name FROM devices WHERE dev = 1"), NULL_VALUE, "unknown name is NULL");
	is_int(q(db, "SELECT lost_t_ns FROM devices WHERE dev = 0"), NULL_VALUE, "GPU 0 not lost");
	is_int(q(db, "SELECT lost_t_ns FROM devices WHERE dev = 1"), (long long)(t + 5 * MS),
	       "GPU 1 lost then");
	/* device samples */
	is_int(q(db, "SELECT count(*) FROM device_samples"), 2, "two device samples");
	is_int(q(db, "SELECT t_ns FROM device_samples WHERE dev = 0"), (long long)(t + MS), "t_ns as given");
	is_int(q(db, "SELECT used_bytes FROM device_samples WHERE dev = 0"), (long long)GiB, "used");
	is_int(q(db, "SELECT reserved_bytes FROM device_samples WHERE dev = 0"), 644939776, "reserved");
	is_int(q(db, "SELECT free_bytes + used_bytes + reserved_bytes - total_bytes FROM device_samples "
		     "WHERE dev = 0"),
	       0, "free + used + reserved = total");
	is_int(q(db, "SELECT used_max_bytes - used_min_bytes FROM device_samples WHERE dev = 0"), 8192,
	       "min/max");
	is_int(q(db, "SELECT used_max_t_ns FROM device_samples WHERE dev = 0"), (long long)(t - 2 * MS),
	       "max time");
	is_int(q(db, "SELECT samples FROM device_samples WHERE dev = 0"), 100, "samples");
	is_int(q(db, "SELECT memory_api FROM device_samples WHERE dev = 0"), 2, "memory api");
	is_int(q(db, "SELECT power_mw FROM device_samples WHERE dev = 0"), 612345, "power in mW");
	is_int(q(db, "SELECT util_gpu_pct + util_memory_pct + temperature_c + clock_sm_mhz + clock_mem_mhz"
		     " FROM device_samples WHERE dev = 0"),
	       97 + 41 + 63 + 1980 + 3201, "util, temperature, clocks");
	is_int(q(db, "SELECT energy_mj FROM device_samples WHERE dev = 0"), NULL_VALUE,
	       "energy absent: NULL");
	is_int(q(db, "SELECT memory_api FROM device_samples WHERE dev = 1"), 1, "v1 memory api");
	is_int(q(db, "SELECT count(*) FROM device_samples WHERE dev = 1 AND reserved_bytes IS NULL AND"
		     " used_min_bytes IS NULL AND used_max_bytes IS NULL AND used_max_t_ns IS NULL AND "
		     "samples IS NULL"
		     " AND util_gpu_pct IS NULL AND util_memory_pct IS NULL AND temperature_c IS NULL AND "
		     "power_mw IS NULL"
		     " AND energy_mj IS NULL AND clock_sm_mhz IS NULL AND clock_mem_mhz IS NULL"),
	       1, "every absent field of GPU 1 is NULL");
	is_int(q(db, "SELECT count(*) FROM device_samples WHERE 0 IN (reserved_bytes, samples, util_gpu_pct,"
		     " temperature_c, power_mw, energy_mj, clock_sm_mhz)"),
	       0, "no absent value stored as 0");
	/* processes */
	is_int(q(db, "SELECT count(*) FROM processes"), 2, "one row per appearance");
	is_int(q(db, "SELECT first_t_ns FROM processes WHERE pid = 4242"), (long long)(t + 2 * MS),
	       "first seen");
	is_int(q(db, "SELECT gone_t_ns FROM processes WHERE pid = 4242"), (long long)(t + 4 * MS), "gone");
	is_str(
	    qs(db, "SELECT user || ' ' || uid || ' ' || name FROM processes WHERE pid = 4242", b, sizeof b),
	    "alice 1000 python", "user, uid, name");
	is_str(qs(db, "SELECT command FROM processes WHERE pid = 4242", b, sizeof b),
	       "python train.py --note \"a, b\"", "command");
	is_int(q(db, "SELECT flags FROM processes WHERE pid = 4242"), KNOWN_PROC & ~GPUMON_PROC_USED_KNOWN,
	       "flags");
	is_int(q(db, "SELECT foreign_pid FROM processes WHERE pid = 999"), 1, "foreign pid");
	is_int(q(db,
		 "SELECT count(*) FROM processes WHERE pid = 999 AND gone_t_ns IS NULL AND user IS NULL AND"
		 " uid IS NULL AND name IS NULL AND command IS NULL AND gpu_instance_id IS NULL"),
	       1, "unknowns of a foreign process are NULL");
	is_int(q(db, "SELECT count(*) FROM process_samples"), 4, "process samples");
	is_int(q(db, "SELECT sum(used_bytes) FROM process_samples WHERE pid = 4242"), (long long)(3 * GiB),
	       "used");
	is_int(q(db, "SELECT used_bytes FROM process_samples WHERE pid = 999"), NULL_VALUE,
	       "unknown used is NULL");
	is_int(q(db,
		 "SELECT count(*) FROM process_samples WHERE gone = 1 AND used_bytes IS NULL AND pid = 4242"),
	       1, "the gone row");
	/* framework */
	is_int(q(db, "SELECT count(*) FROM framework_sources"), 2, "two framework sources");
	is_int(q(db, "SELECT count(*) FROM framework_samples"), 3, "three framework samples");
	is_int(
	    q(db,
	      "SELECT sum(s.allocated_bytes) FROM framework_samples s JOIN framework_sources USING (source)"
	      " WHERE framework = 'torch' AND pid = 4242 AND device = 0"),
	    (long long)(10 * GiB), "allocated");
	is_int(q(db, "SELECT max_allocated_bytes FROM framework_samples WHERE step = 10"), NULL_VALUE,
	       "unknown max_allocated is NULL");
	is_int(q(db, "SELECT limit_bytes FROM framework_samples WHERE step = 10"), NULL_VALUE,
	       "no cap known: NULL");
	is_int(q(db, "SELECT limit_bytes FROM framework_samples WHERE step = 11"), (long long)(40 * GiB),
	       "the allocator's cap");
	is_int(q(db,
		 "SELECT count(*) FROM framework_samples s JOIN framework_sources USING (source) WHERE"
		 " framework = 'paddle' AND device IS NULL AND step IS NULL AND allocated_bytes IS NULL AND"
		 " reserved_bytes IS NULL"),
	       1, "unknown device, step and figures are NULL");
	/* events */
	is_int(q(db, "SELECT count(*) FROM events"), 4, "events: lost, marker, note, job");
	is_str(qs(db, "SELECT text FROM events WHERE kind = 'job'", b, sizeof b), "pid 4243", "a pid of the job");
	is_str(qs(db, "SELECT text FROM events WHERE kind = 'marker'", b, sizeof b), "epoch 1",
	       "marker text");
	is_int(q(db, "SELECT text FROM events WHERE kind = 'note'"), NULL_VALUE, "no text: NULL");
	is_str(qs(db, "SELECT text FROM events WHERE kind = 'lost'", b, sizeof b), "GPU 1 is lost",
	       "lost event");
	sqlite3_close(db);
}

static void test_exists(void)
{
	gpumon *g = open_fake(H200, 0);
	const char *path = tmp_path("exists.gpumon");
	FILE *f = fopen(path, "w");
	fputs("keep me", f);
	fclose(f);
	gpumon_recording *r = NULL;
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_E_EXISTS,
	       "an existing file: GPUMON_E_EXISTS");
	ok(r && strstr(gpumon_recording_errmsg(r), path), "the message names the path: %s",
	   gpumon_recording_errmsg(r));
	is_int(gpumon_recording_write(r, NULL, 0), GPUMON_E_EXISTS, "writes on it fail");
	is_int(gpumon_recording_finish(r, 0), GPUMON_E_EXISTS, "finish returns the error");
	gpumon_recording_destroy(r);
	char b[32] = "";
	f = fopen(path, "r");
	ok(f && fgets(b, sizeof b, f) && !strcmp(b, "keep me"), "the file is untouched");
	if (f)
		fclose(f);
	struct stat st;
	ok(stat(tmp_path("exists.gpumon-wal"), &st) != 0, "no WAL beside it");
	gpumon_destroy(g);
}

static void test_unwritable(void)
{
	gpumon *g = open_fake(H200, 0);
	gpumon_recording *r = NULL;
	const char *path = "/nonexistent-gpumon-dir/x.gpumon";
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_E_IO, "a missing directory: GPUMON_E_IO");
	ok(strstr(gpumon_recording_errmsg(r), path) && strstr(gpumon_recording_errmsg(r), "No such file"),
	   "message: %s", gpumon_recording_errmsg(r));
	gpumon_recording_destroy(r);

	/* root writes anywhere: take the identity of nobody for the attempt */
	const char *dir = tmp_path("ro");
	mkdir(dir, 0555);
	chmod(tmpdir, 0755);
	char p[160];
	snprintf(p, sizeof p, "%s/x.gpumon", dir);
	int root = geteuid() == 0;
	if (root && seteuid(65534) != 0) {
		printf("ok %d # SKIP cannot take uid 65534: %s\n", ++tap_n, strerror(errno));
	} else {
		int st = gpumon_recording_create(g, p, NULL, &r);
		if (root && seteuid(0) != 0) {
			printf("Bail out! cannot return to uid 0\n");
			exit(1);
		}
		is_int(st, GPUMON_E_IO, "an unwritable directory: GPUMON_E_IO");
		ok(strstr(gpumon_recording_errmsg(r), p) && strstr(gpumon_recording_errmsg(r), "denied"),
		   "message: %s", gpumon_recording_errmsg(r));
		gpumon_recording_destroy(r);
	}
	chmod(tmpdir, 0700);
	gpumon_destroy(g);
}

static void test_bad_arguments(void)
{
	gpumon *g = open_fake(H200, 0);
	const char *path = tmp_path("bad.gpumon");
	gpumon_recording *r = NULL;
	is_int(gpumon_recording_create(g, NULL, NULL, &r), GPUMON_E_INVAL, "no path");
	gpumon_recording_destroy(r);
	is_int(gpumon_recording_create(NULL, path, NULL, &r), GPUMON_E_INVAL, "no handle");
	ok(r && strstr(gpumon_recording_errmsg(r), "handle"), "message: %s", gpumon_recording_errmsg(r));
	gpumon_recording_destroy(r);
	is_int(gpumon_recording_create(g, path, NULL, NULL), GPUMON_E_INVAL, "no out");
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_OK, "create");
	gpumon_record bad = device_rec(1, now_ns(), GiB);
	is_int(gpumon_recording_write(r, &bad, 1), GPUMON_E_INVAL, "a GPU not in the recording");
	ok(strstr(gpumon_recording_errmsg(r), "GPU 1"), "message: %s", gpumon_recording_errmsg(r));
	gpumon_record two[2] = {device_rec(0, now_ns(), GiB), {.kind = 99}};
	is_int(gpumon_recording_write(r, two, 2), GPUMON_E_INVAL, "an unknown kind");
	is_int(gpumon_recording_write(r, NULL, 1), GPUMON_E_INVAL, "no records");
	gpumon_record ev[2] = {two[0], event_rec(1, "", "x")};
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "an event with an empty kind");
	ev[1].event_kind = NULL;
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "an event without a kind");
	ok(strstr(gpumon_recording_errmsg(r), "record 1"), "message: %s", gpumon_recording_errmsg(r));
	ev[1] = (gpumon_record){.kind = 0};
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "kind 0");
	ev[1] = (gpumon_record){.kind = GPUMON_REC_LOST, .dev = 5};
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "a lost GPU not in the recording");
	ev[1] = device_rec(0, now_ns(), GiB);
	ev[1].sample.present = GPUMON_F_MEMORY_USED; /* a log's used figure alone: not kept, so refused */
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "used memory without total and free");
	ok(strstr(gpumon_recording_errmsg(r), "without its total"), "message: %s", gpumon_recording_errmsg(r));
	ev[1] = (gpumon_record){.kind = GPUMON_REC_PROCESS, .t_ns = now_ns()}; /* process NULL */
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "a process record without its process");
	ok(strstr(gpumon_recording_errmsg(r), "record 1 is about a process and names none"), "message: %s",
	   gpumon_recording_errmsg(r));
	ev[1].kind = GPUMON_REC_JOB;
	is_int(gpumon_recording_write(r, ev, 2), GPUMON_E_INVAL, "a job record without its process");
	is_int(gpumon_recording_write(r, two, 1), GPUMON_OK, "still writable after bad arguments");
	is_int(gpumon_recording_finish(r, -1), GPUMON_OK, "finish");
	gpumon_recording_destroy(r);
	sqlite3 *db = db_open(path);
	is_int(q(db, "SELECT count(*) FROM device_samples"), 1,
	       "nothing of the rejected batches was written");
	is_int(q(db, "SELECT count(*) FROM meta WHERE key = 'exit_status'"), 0, "no exit status: no row");
	is_str(qs(db, "SELECT value FROM meta WHERE key = 'kind'", (char[16]){0}, 16), "record",
	       "kind defaults");
	sqlite3_close(db);
	gpumon_recording_destroy(NULL); /* a no-op */
	is_int(gpumon_recording_finish(NULL, 0), GPUMON_E_INVAL, "finish(NULL)");
	is_str(gpumon_recording_errmsg(NULL), "", "errmsg(NULL)");
	is_int(gpumon_recording_write(NULL, NULL, 0), GPUMON_E_INVAL, "write(NULL)");
	is_int(gpumon_recording_commit(NULL), GPUMON_E_INVAL, "commit(NULL)");
	gpumon_destroy(g);
}

static void test_reading_while_written(void)
{
	gpumon *g = open_fake(H200, 0);
	const char *path = tmp_path("live.gpumon");
	gpumon_recording *r = NULL;
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_OK, "create");
	uint64_t t0 = now_ns();
	gpumon_record rec = device_rec(0, t0, GiB);
	is_int(gpumon_recording_write(r, &rec, 1), GPUMON_OK, "write");
	sqlite3 *db = db_open(path);
	is_int(q(db, "SELECT count(*) FROM devices"), 1,
	       "a second connection reads while a transaction is open");
	long long n = q(db, "SELECT count(*) FROM device_samples");
	if (now_ns() - t0 < 150 * MS)
		is_int(n, 0, "the row written now is not committed yet (batched)");
	/* a reader in the middle of a read transaction does not block the writer (WAL) */
	sqlite3_exec(db, "BEGIN; SELECT count(*) FROM device_samples;", NULL, NULL, NULL);
	sleep_ms(250);
	rec.t_ns = now_ns();
	is_int(gpumon_recording_write(r, &rec, 1), GPUMON_OK,
	       "a write 250 ms later, a reader inside a transaction");
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	is_int(q(db, "SELECT count(*) FROM device_samples WHERE t_ns = "
		     "(SELECT min(t_ns) FROM device_samples)"),
	       1, "the second connection sees the first row without an explicit commit");
	is_int(q(db, "SELECT count(*) FROM device_samples"), 2, "both rows: the write after 200 ms commits");
	char b[16];
	is_str(qs(db, "PRAGMA journal_mode", b, sizeof b), "wal", "WAL while written");
	rec.t_ns = now_ns();
	is_int(gpumon_recording_write(r, &rec, 1), GPUMON_OK, "a third write");
	is_int(gpumon_recording_commit(r), GPUMON_OK, "commit");
	is_int(q(db, "SELECT count(*) FROM device_samples"), 3, "an explicit commit shows it");
	rec.t_ns = now_ns();
	is_int(gpumon_recording_write(r, &rec, 1), GPUMON_OK, "a fourth write");
	sleep_ms(250);
	is_int(gpumon_recording_write(r, NULL, 0), GPUMON_OK, "an empty write 250 ms later");
	is_int(q(db, "SELECT count(*) FROM device_samples"), 4, "commits what is pending");
	is_int(gpumon_recording_finish(r, -1), GPUMON_OK, "finish with a reader attached");
	gpumon_recording_destroy(r);
	is_int(q(db, "SELECT count(*) FROM meta WHERE key = 'end_mono_ns'"), 1, "the reader sees the end");
	sqlite3_close(db);
	gpumon_destroy(g);
}

static void test_removed(void)
{
	gpumon *g = open_fake(H200, 0);
	const char *path = tmp_path("removed.gpumon");
	gpumon_recording *r = NULL;
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_OK, "create");
	unlink(path);
	gpumon_record rec = device_rec(0, now_ns(), GiB);
	int st = gpumon_recording_write(r, &rec, 1);
	if (!st)
		st = gpumon_recording_commit(r);
	is_int(st, GPUMON_E_IO, "the file removed: GPUMON_E_IO");
	ok(strstr(gpumon_recording_errmsg(r), "removed"), "message: %s", gpumon_recording_errmsg(r));
	is_int(gpumon_recording_write(r, &rec, 1), GPUMON_E_IO, "later writes fail");
	is_int(gpumon_recording_finish(r, 0), GPUMON_E_IO, "finish returns the error");
	gpumon_recording_destroy(r);
	gpumon_destroy(g);
}

/* The child of test_killed: writes a device record every millisecond until killed. */
static void write_forever(const char *path)
{
	gpumon *g = NULL;
	gpumon_recording *r = NULL;
	if (gpumon_create(&g) != GPUMON_OK || gpumon_recording_create(g, path, NULL, &r) != GPUMON_OK)
		_exit(1);
	for (uint64_t used = GiB;; used += 4096) {
		gpumon_record rec = device_rec(0, now_ns(), used);
		if (gpumon_recording_write(r, &rec, 1) != GPUMON_OK)
			_exit(2);
		sleep_ms(1);
	}
}

static void test_killed(void)
{
	use_scenario(H200, 0); /* the child opens its own handle */
	const char *path = tmp_path("killed.gpumon");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		write_forever(path);
	sleep_ms(1000);
	uint64_t kill_t = now_ns();
	kill(pid, SIGKILL);
	int status = 0;
	waitpid(pid, &status, 0);
	ok(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the writer was killed (status %d)", status);
	sqlite3 *db = db_open(path);
	char b[64];
	is_str(qs(db, "PRAGMA integrity_check", b, sizeof b), "ok",
	       "the file opens and passes integrity_check");
	long long n = q(db, "SELECT count(*) FROM device_samples");
	long long last = q(db, "SELECT max(t_ns) FROM device_samples");
	ok(n > 100, "rows written before the kill: %lld", n);
	double lost_s = (double)((long long)kill_t - last) / 1e9;
	printf("# last committed row %.3f s before the kill\n", lost_s);
	ok(last > 0 && lost_s <= 0.25, "rows up to within 0.25 s of the kill (%.3f s)", lost_s);
	sqlite3_close(db);
}

/* One hour of a training job on one GPU sampled at 1 kHz, as the sampler reports it: a heartbeat a
 * second, 300 memory changes, one process coming and going, and framework samples at 10 Hz;
 * committed every 200 ms as a live recording is. */
static void test_hour_size(void)
{
	gpumon *g = open_fake(H200, 0);
	const char *path = tmp_path("hour.gpumon");
	gpumon_recording *r = NULL;
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_OK, "create");
	/* times as on a machine up for 100 days: full-width integers, as in most real recordings */
	uint64_t t0 = 100ull * 86400 * 1000000000ull, used = 60 * GiB, started = now_ns();
	int st = GPUMON_OK;
	unsigned flags = KNOWN_PROC;
	for (unsigned tick = 0; tick < 3600 * 5 && !st; tick++) { /* 200 ms ticks */
		uint64_t t = t0 + tick * 200 * MS;
		gpumon_record recs[3];
		size_t n = 0;
		if (tick % 5 == 0) { /* heartbeat */
			recs[n] = device_rec(0, t, used);
			recs[n].sample.util_gpu_pct = 90 + tick % 11;
			recs[n].sample.temperature_c = 60 + tick % 7;
			recs[n].sample.power_mw = 550000 + (tick * 7919) % 150000;
			recs[n].interval_samples = 1000;
			n++;
		}
		if (tick % 60 == 30) { /* memory changes, every 12 s */
			used += (tick % 120 == 30 ? 1 : -1) * (int64_t)(256ull << 20);
			recs[n++] = device_rec(0, t + 37 * MS, used);
			recs[n++] = process_rec(GPUMON_REC_PROCESS, 0, t + 37 * MS, 4242, used - GiB, flags);
		}
		if (tick == 3600 * 5 - 50)
			recs[n++] = process_rec(GPUMON_REC_PROCESS_GONE, 0, t, 4242, 0, flags);
		st = gpumon_recording_write(r, recs, n);
		for (unsigned k = 0; k < 2 && !st; k++) { /* 10 Hz */
			gpumon_record fr = fw_rec(t + k * 100 * MS, 4242, 0, tick * 2 + k, "torch");
			gpumon_framework_sample *f = &fr.framework;
			f->allocated_bytes = used - 3 * GiB + (tick % 17) * (64ull << 20);
			f->reserved_bytes = used - 2 * GiB;
			f->max_allocated_bytes = used - GiB;
			f->allocated_known = f->reserved_known = f->max_allocated_known = 1;
			st = gpumon_recording_write(r, &fr, 1);
		}
		if (!st)
			st = gpumon_recording_commit(r);
	}
	is_int(st, GPUMON_OK, "an hour written");
	is_int(gpumon_recording_finish(r, 0), GPUMON_OK, "finish");
	gpumon_recording_destroy(r);
	printf("# writing the hour took %.2f s\n", (double)(now_ns() - started) / 1e9);
	struct stat sb;
	ok(stat(path, &sb) == 0, "the file exists");
	printf("# one hour: %lld bytes (%.2f MB)\n", (long long)sb.st_size, (double)sb.st_size / 1e6);
	ok(sb.st_size < 5000000, "one hour stays under 5 MB (%lld bytes)", (long long)sb.st_size);
	sqlite3 *db = db_open(path);
	is_int(q(db, "SELECT count(*) FROM framework_samples"), 36000, "36000 framework samples");
	is_int(q(db, "SELECT count(*) FROM device_samples"), 3600 + 300, "3900 device samples");
	sqlite3_close(db);
	gpumon_destroy(g);
}

/* Mounts a 512 KiB tmpfs on dir in a mount namespace of our own (as root, or else in a user
 * namespace where the kernel allows one). Returns 1, or 0 with the reason. */
static int small_fs(const char *dir, char *why, size_t len)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	if (unshare(CLONE_NEWNS) != 0) {
		int e = errno;
		if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
			snprintf(why, len, "no mount namespace: %s (as uid %u), user namespace: %s",
				 strerror(e), (unsigned)uid, strerror(errno));
			return 0;
		}
		char map[64];
		int fd;
		snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
		if ((fd = open("/proc/self/setgroups", O_WRONLY)) >= 0) {
			(void)!write(fd, "deny", 4);
			close(fd);
		}
		if ((fd = open("/proc/self/uid_map", O_WRONLY)) >= 0) {
			(void)!write(fd, map, strlen(map));
			close(fd);
		}
		snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
		if ((fd = open("/proc/self/gid_map", O_WRONLY)) >= 0) {
			(void)!write(fd, map, strlen(map));
			close(fd);
		}
	}
	/* private, so that the mount stays in this namespace whatever the host's propagation */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", dir, "tmpfs", 0, "size=512k") != 0) {
		snprintf(why, len, "cannot mount a small tmpfs: %s", strerror(errno));
		return 0;
	}
	return 1;
}

/* Runs last: it leaves the process in a mount namespace of its own. */
static void test_disk_full(void)
{
	char why[256], dir[160];
	snprintf(dir, sizeof dir, "%s/full", tmpdir);
	mkdir(dir, 0700);
	if (!small_fs(dir, why, sizeof why)) {
		printf("ok %d # SKIP disk full: %s\n", ++tap_n, why);
		return;
	}
	gpumon *g = open_fake(H200, 0);
	char path[200];
	snprintf(path, sizeof path, "%s/full.gpumon", dir);
	gpumon_recording *r = NULL;
	is_int(gpumon_recording_create(g, path, NULL, &r), GPUMON_OK, "create on a 512 KiB file system");
	long long committed = 0;
	int st = GPUMON_OK;
	uint64_t t = now_ns();
	for (int batch = 0; batch < 100000 && !st; batch++) {
		gpumon_record recs[50];
		for (int i = 0; i < 50; i++)
			recs[i] = device_rec(0, t += MS, GiB + (uint64_t)i * 4096);
		st = gpumon_recording_write(r, recs, 50);
		if (!st)
			st = gpumon_recording_commit(r);
		if (!st)
			committed += 50;
	}
	is_int(st, GPUMON_E_IO, "writing until the disk is full: GPUMON_E_IO");
	printf("# %lld rows committed before the disk was full\n", committed);
	ok(strstr(gpumon_recording_errmsg(r), "disk full") && strstr(gpumon_recording_errmsg(r), path),
	   "message: %s", gpumon_recording_errmsg(r));
	gpumon_record rec = device_rec(0, t + MS, GiB);
	uint64_t t1 = now_ns();
	is_int(gpumon_recording_write(r, &rec, 1), GPUMON_E_IO, "a later write fails");
	gpumon_record note = event_rec(t, "note", "x");
	is_int(gpumon_recording_write(r, &note, 1), GPUMON_E_IO, "a later event fails");
	is_int(gpumon_recording_commit(r), GPUMON_E_IO, "a later commit fails");
	uint64_t spent = now_ns() - t1;
	ok(spent < 5 * MS, "... at once (%llu us)", (unsigned long long)(spent / 1000));
	is_int(gpumon_recording_finish(r, 0), GPUMON_E_IO, "finish returns the error");
	gpumon_recording_destroy(r);
	sqlite3 *db = db_open(path);
	char b[64];
	is_str(qs(db, "PRAGMA integrity_check", b, sizeof b), "ok", "the file still opens");
	is_int(q(db, "SELECT count(*) FROM device_samples"), committed, "and holds every committed row");
	sqlite3_close(db);
	gpumon_destroy(g);
	umount2(dir, MNT_DETACH);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return write_sample(argv[1], argc > 2 && !strcmp(argv[2], "--kill"));
	make_tmpdir("rec");
	test_tables();
	test_exists();
	test_unwritable();
	test_bad_arguments();
	test_reading_while_written();
	test_removed();
	test_killed();
	test_hour_size();
	test_disk_full();
	remove_dir(tmpdir);
	remove_scenario();
	return tap_done();
}
