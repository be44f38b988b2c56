/* SPDX-License-Identifier: MIT */
/* test_owner_recording.c — a process's owner through a recording: written into the owner_* columns
 * of `processes` and given back by the reader as it was (a pod with names, a Slurm step, a
 * container, a unit, a pid of another PID namespace, none); an owner learnt later updates the row;
 * a file from before these columns reads with no owner. A distributed worker's rank goes the same
 * way through the rank columns: written, read back, unknown when the environment was not read, and
 * none in a file from before them. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include "rec_util.h"

#define CID "3f1c0e6a9b2d4c8e7f1a0b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a"

static gpumon_owner pod_owner(void)
{
	gpumon_owner o = {.present = GPUMON_OWNER_POD | GPUMON_OWNER_POD_NAMES | GPUMON_OWNER_CONTAINER};
	snprintf(o.runtime, sizeof o.runtime, "containerd");
	snprintf(o.container_id, sizeof o.container_id, CID);
	snprintf(o.pod_uid, sizeof o.pod_uid, "8f2b5d0e-3c1a-4f7e-9b2d-0a1b2c3d4e5f");
	snprintf(o.k8s_namespace, sizeof o.k8s_namespace, "ml-team");
	snprintf(o.pod, sizeof o.pod, "trainer-0");
	snprintf(o.container, sizeof o.container, "pytorch");
	return o;
}

/* Writes recs to a new file at path on the fake two GPUs. */
static void write_recs(const char *path, const gpumon_record *recs, size_t n)
{
	gpumon *g = open_fake(TWO_GPUS, 0);
	gpumon_recording *r = NULL;
	int st = gpumon_recording_create(g, path, NULL, &r);
	if (!st)
		st = gpumon_recording_write(r, recs, n);
	if (!st)
		st = gpumon_recording_finish(r, 0);
	ok(st == GPUMON_OK, "written (%s)", st ? gpumon_recording_errmsg(r) : "ok");
	gpumon_recording_destroy(r);
	gpumon_destroy(g);
}

/* Reads the process records of path, in order, into out (at most cap); returns how many. */
static size_t read_procs(const char *path, gpumon_record *out, size_t cap)
{
	gpumon_reader *r = NULL;
	size_t n = 0;
	if (gpumon_reader_create(path, &r) != GPUMON_OK) {
		ok(0, "open %s: %s", path, r ? gpumon_reader_errmsg(r) : "?");
		gpumon_reader_destroy(r);
		return 0;
	}
	gpumon_record rec;
	while (gpumon_reader_next(r, &rec) > 0)
		if (rec.kind == GPUMON_REC_PROCESS && n < cap) {
			keep_process(&rec); /* the reader's is valid until its next call */
			out[n++] = rec;
		}
	gpumon_reader_destroy(r);
	return n;
}

static int same_owner(const gpumon_owner *a, const gpumon_owner *b)
{
	return a->present == b->present && !strcmp(a->runtime, b->runtime) &&
	       !strcmp(a->container_id, b->container_id) && !strcmp(a->pod_uid, b->pod_uid) &&
	       !strcmp(a->k8s_namespace, b->k8s_namespace) && !strcmp(a->pod, b->pod) &&
	       !strcmp(a->container, b->container) && !strcmp(a->slurm_job, b->slurm_job) &&
	       !strcmp(a->slurm_step, b->slurm_step) && !strcmp(a->unit, b->unit);
}

static void test_round_trip(void)
{
	const char *path = tmp_path("owners.gpumon");
	uint64_t t = now_ns();
	gpumon_record recs[7];
	for (unsigned i = 0; i < 6; i++)
		recs[i] = process_rec(GPUMON_REC_PROCESS, 0, t + (i + 1) * MS, 100 + i, GiB, KNOWN_PROC);
	process_of(&recs[0])->owner = pod_owner();
	process_of(&recs[1])->owner = (gpumon_owner){.present = GPUMON_OWNER_SLURM, .slurm_job = "4242", .slurm_step = "batch"};
	process_of(&recs[2])->owner = (gpumon_owner){.present = GPUMON_OWNER_CONTAINER, .runtime = "docker", .container_id = CID};
	process_of(&recs[3])->owner = (gpumon_owner){.present = GPUMON_OWNER_UNIT, .unit = "train.service"};
	process_of(&recs[4])->flags |= GPUMON_PROC_FOREIGN;
	process_of(&recs[4])->owner = (gpumon_owner){.present = GPUMON_OWNER_UNRESOLVED};
	/* recs[5]: no owner known */
	/* pid 103 again, now in a pod: the row learns it */
	recs[6] = process_rec(GPUMON_REC_PROCESS, 0, t + 10 * MS, 103, 2 * GiB, KNOWN_PROC);
	process_of(&recs[6])->owner = pod_owner();
	write_recs(path, recs, 7);

	sqlite3 *db = db_open(path);
	char b[128];
	is_str(qs(db, "SELECT owner_namespace || '/' || owner_pod || ' ' || owner_container FROM processes WHERE pid = 100",
		  b, sizeof b), "ml-team/trainer-0 pytorch", "the pod's names in their columns");
	is_str(qs(db, "SELECT owner_slurm_job || '.' || owner_slurm_step FROM processes WHERE pid = 101", b, sizeof b),
	       "4242.batch", "the Slurm step in its columns");
	is_int(q(db, "SELECT owner_present FROM processes WHERE pid = 105"), 0, "no owner: present 0");
	is_int(q(db, "SELECT count(*) FROM processes WHERE pid = 105 AND owner_runtime IS NULL AND owner_pod IS NULL"
		     " AND owner_unit IS NULL"), 1, "and its texts NULL, not empty");
	is_int(q(db, "SELECT count(*) FROM processes WHERE pid = 103"), 1, "an owner learnt later: the same row");
	is_str(qs(db, "SELECT owner_pod FROM processes WHERE pid = 103", b, sizeof b), "trainer-0", "updated");
	sqlite3_close(db);

	gpumon_record got[8];
	size_t n = read_procs(path, got, 8);
	is_int(n, 7, "seven process records back");
	/* one row per appearance holds what was learnt last: pid 103's records read its pod */
	gpumon_owner later = pod_owner();
	for (size_t i = 0; i < 6 && i < n; i++)
		ok(got[i].process->pid == process_of(&recs[i])->pid &&
		       same_owner(&got[i].process->owner, i == 3 ? &later : &process_of(&recs[i])->owner),
		   "pid %u: its owner as written", process_of(&recs[i])->pid);
	char phrase[128];
	if (n > 0) {
		gpumon_owner_describe(&got[0].process->owner, phrase, sizeof phrase);
		is_str(phrase, "pod ml-team/trainer-0", "the pod's phrase from the file");
	}

	/* a file written before the owner columns */
	ok(db_exec(path, "ALTER TABLE processes DROP COLUMN owner_present; ALTER TABLE processes DROP COLUMN owner_pod;"
			 "ALTER TABLE processes DROP COLUMN owner_unit;"),
	   "made into an older file: no owner columns");
	n = read_procs(path, got, 8);
	is_int(n, 7, "still seven process records");
	int none = 1;
	for (size_t i = 0; i < n; i++)
		none &= got[i].process->owner.present == 0 && !got[i].process->owner.pod[0];
	ok(none, "each with no owner");
	ok(n > 0 && !strcmp(got[0].process->user, "alice"), "and the rest as before");
}

/* A hand edit: bits this version does not know, or a text longer than its field, give no owner
 * rather than a wrong or cut one. */
static void test_hand_edits(void)
{
	const char *path = tmp_path("edited.gpumon");
	uint64_t t = now_ns();
	gpumon_record recs[2] = {process_rec(GPUMON_REC_PROCESS, 0, t + MS, 200, GiB, KNOWN_PROC),
				 process_rec(GPUMON_REC_PROCESS, 0, t + 2 * MS, 201, GiB, KNOWN_PROC)};
	process_of(&recs[0])->owner = pod_owner();
	process_of(&recs[1])->owner = pod_owner();
	write_recs(path, recs, 2);
	ok(db_exec(path, "UPDATE processes SET owner_present = owner_present | 1024 WHERE pid = 200;"
			 "UPDATE processes SET owner_namespace = printf('%.100c', 'x') WHERE pid = 201;"),
	   "edited: an unknown bit, a namespace of 100 bytes");
	gpumon_record got[2];
	size_t n = read_procs(path, got, 2);
	is_int(n, 2, "both records read");
	ok(n == 2 && got[0].process->owner.present == 0, "unknown bit: no owner");
	ok(n == 2 && got[1].process->owner.present == 0 && !got[1].process->owner.k8s_namespace[0],
	   "overlong text: no owner, nothing cut");
}

static gpumon_rank worker(int rank)
{
	gpumon_rank w = {.rank = rank, .local_rank = rank % 4, .world_size = 8, .node_rank = rank / 4,
			 .job_id = "elastic-7", .launcher = "torchrun", .master = "node-a:29500"};
	return w;
}

static void test_rank_round_trip(void)
{
	const char *path = tmp_path("ranks.gpumon");
	uint64_t t = now_ns();
	gpumon_record recs[4];
	for (unsigned i = 0; i < 4; i++)
		recs[i] = process_rec(GPUMON_REC_PROCESS, i % 2, t + (i + 1) * MS, 300 + i, GiB, KNOWN_PROC);
	process_of(&recs[0])->flags |= GPUMON_PROC_RANK_KNOWN;
	process_of(&recs[0])->rank = worker(5);
	process_of(&recs[1])->flags |= GPUMON_PROC_RANK_KNOWN; /* read: no worker */
	process_of(&recs[1])->rank = (gpumon_rank){.rank = -1, .local_rank = -1, .world_size = -1, .node_rank = -1};
	process_of(&recs[2])->rank = worker(2); /* the flag not set: the environment was not read */
	process_of(&recs[3])->flags |= GPUMON_PROC_RANK_KNOWN;
	process_of(&recs[3])->rank = (gpumon_rank){.rank = 3, .local_rank = -1, .world_size = -1, .node_rank = -1,
					     .launcher = "mpi"};
	write_recs(path, recs, 4);
	sqlite3 *db = db_open(path);
	char b[128];
	is_str(qs(db, "SELECT rank || '/' || world_size || ' ' || rank_launcher || ' ' || rank_job || ' ' || rank_master"
		      " FROM processes WHERE pid = 300", b, sizeof b),
	       "5/8 torchrun elastic-7 node-a:29500", "a worker's place in its columns");
	is_int(q(db, "SELECT count(*) FROM processes WHERE pid IN (301, 302) AND rank IS NULL AND rank_launcher IS NULL"),
	       2, "none, and not read: NULL");
	is_int(q(db, "SELECT count(*) FROM processes WHERE pid = 303 AND world_size IS NULL AND rank = 3"), 1,
	       "an MPI rank without a size: the size NULL");
	sqlite3_close(db);

	gpumon_record got[4];
	size_t n = read_procs(path, got, 4);
	is_int(n, 4, "four process records back");
	gpumon_rank w = worker(5);
	ok(n == 4 && (got[0].process->flags & GPUMON_PROC_RANK_KNOWN) && got[0].process->rank.rank == 5 &&
	       got[0].process->rank.local_rank == 1 && got[0].process->rank.world_size == 8 &&
	       got[0].process->rank.node_rank == 1 && !strcmp(got[0].process->rank.job_id, w.job_id) &&
	       !strcmp(got[0].process->rank.launcher, "torchrun") && !strcmp(got[0].process->rank.master, w.master),
	   "rank 5 of 8 back as written");
	ok(n == 4 && (got[1].process->flags & GPUMON_PROC_RANK_KNOWN) && got[1].process->rank.rank == -1 &&
	       !got[1].process->rank.launcher[0], "read and no worker: rank -1, flag kept");
	ok(n == 4 && !(got[2].process->flags & GPUMON_PROC_RANK_KNOWN) && got[2].process->rank.rank == -1,
	   "not read: no flag, rank -1 (never 0)");
	ok(n == 4 && got[3].process->rank.rank == 3 && got[3].process->rank.world_size == -1, "MPI: rank 3, size unknown");

	ok(db_exec(path, "UPDATE processes SET rank = -4 WHERE pid = 300; UPDATE processes SET rank_launcher = "
			 "printf('%.40c', 'x') WHERE pid = 303;"), "edited: a negative rank, a launcher of 40 bytes");
	n = read_procs(path, got, 4);
	ok(n == 4 && got[0].process->rank.rank == -1 && !got[0].process->rank.launcher[0] && got[3].process->rank.rank == -1,
	   "hand edits: the rank unknown, not wrong");

	ok(db_exec(path, "ALTER TABLE processes DROP COLUMN rank_launcher; ALTER TABLE processes DROP COLUMN rank;"),
	   "made into an older file: no rank columns");
	n = read_procs(path, got, 4);
	int none = n == 4;
	for (size_t i = 0; i < n; i++)
		none &= !(got[i].process->flags & GPUMON_PROC_RANK_KNOWN) && got[i].process->rank.rank == -1;
	ok(none, "each with its rank unknown");
}

int main(void)
{
	make_tmpdir("owner-rec");
	test_round_trip();
	test_hand_edits();
	test_rank_round_trip();
	remove_dir(tmpdir);
	remove_scenario();
	return tap_done();
}
