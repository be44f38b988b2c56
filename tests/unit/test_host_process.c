/* SPDX-License-Identifier: MIT */
/* test_host_process.c — gpumon_host_process_read and gpumon_host_process_tree on a /proc tree of
 * our own (GPUMON_PROC_ROOT): stat lines with odd command names, the rank variables of torchrun,
 * Slurm, Open MPI and PMIx, junk and an unreadable environment, vanished pids; then on the real
 * /proc for this process. */
#include <gpumon/gpumon.h>
#include "tap.h"
#include <stddef.h>
#include <sys/stat.h>

static char root[64];

static void write_bytes(const char *dir, const char *leaf, const char *data, size_t len)
{
	char path[256];
	snprintf(path, sizeof path, "%s/%s", dir, leaf);
	FILE *f = fopen(path, "w");
	int good = f && fwrite(data, 1, len, f) == len;
	if (f && fclose(f) != 0)
		good = 0;
	if (!good)
		ok(0, "cannot write %s", path);
}

/* A process directory with a stat line holding comm, and optionally an environment. */
static void make_proc(unsigned pid, const char *comm, unsigned ppid, const char *env, size_t envlen)
{
	char dir[128], stat[512];
	snprintf(dir, sizeof dir, "%s/%u", root, pid);
	mkdir(dir, 0700);
	/* utime 250, stime 50, starttime 123456, rss 1000 pages; priority and nice negative */
	snprintf(stat, sizeof stat,
		 "%u (%s) S %u %u %u 0 -1 4194560 100 0 0 0 250 50 0 0 -20 -5 4 0 123456 9000000 1000 "
		 "18446744073709551615 1 1 0 0 0 0 0 16781312 17610 0 0 0 17 3 0 0 0 0 0\n",
		 pid, comm, ppid, pid, pid);
	write_bytes(dir, "stat", stat, strlen(stat));
	const char *status = "Name:\tpython\nUmask:\t0022\nState:\tS (sleeping)\nPPid:\t1\nUid:\t0\t0\t0\t0\n";
	write_bytes(dir, "status", status, strlen(status));
	if (env)
		write_bytes(dir, "environ", env, envlen);
}

#define ENV(lit) lit, sizeof lit - 1

static gpumon_host_process read_pid(unsigned pid, unsigned fields, int *rc)
{
	gpumon_host_process h;
	memset(&h, 0x5a, sizeof h);
	h.size = sizeof h;
	*rc = gpumon_host_process_read(pid, fields, &h);
	return h;
}

static void test_stat(void)
{
	make_proc(4101, "a) b (c", 4100, NULL, 0);
	int rc;
	gpumon_host_process h = read_pid(4101, 0, &rc);
	is_int(rc, GPUMON_OK, "a pid of the fixture");
	ok(h.pid == 4101 && h.ppid == 4100 && h.state == 'S', "pid, parent and state past a name with ') b ('");
	ok(h.start_ticks == 123456, "start time in ticks: %llu", (unsigned long long)h.start_ticks);
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	ok(h.cpu_ns == 300ull * (1000000000ull / (uint64_t)hz), "CPU time is utime + stime");
	ok(h.rss_bytes == 1000ull * (uint64_t)page, "resident memory in bytes");
	struct timespec wall, boot;
	clock_gettime(CLOCK_REALTIME, &wall);
	clock_gettime(CLOCK_BOOTTIME, &boot);
	double want = (double)wall.tv_sec - (double)boot.tv_sec + 123456.0 / (double)hz;
	ok(h.start_wall_ns && ((double)h.start_wall_ns / 1e9 - want) < 2 && (want - (double)h.start_wall_ns / 1e9) < 2,
	   "start on the wall clock: boot time + start ticks");
	is_int(h.present, GPUMON_HOST_STAT, "stat only: no user asked, and the fixture's pids are not ours");
	ok(h.rank.rank == -1 && h.rank.local_rank == -1 && h.rank.world_size == -1 && h.rank.node_rank == -1 && !h.rank.job_id[0] &&
	   !h.rank.launcher[0], "no environment asked: rank fields unknown");
	h = read_pid(4101, GPUMON_HOST_USER, &rc);
	ok(rc == 0 && (h.present & GPUMON_HOST_USER) && h.uid == 0 && !strcmp(h.user, "root"), "uid and user: %s",
	   h.user);
	/* malformed stat lines: the pid is not found, nothing guessed */
	const char *bad[] = {"", "4102", "4102 (x", "4102 (x) S", "x (y) S 1", "4102 (x) S -1 ", "4102 (x) S 99999999999 ",
			     "4102 (x) S 1 2 3", "4103 (x) S 1 1 1 0 -1 0 0 0 0 0 1 1 0 0 20 0 1 0 5 1 1\n"};
	int all = 1;
	char dir[128];
	snprintf(dir, sizeof dir, "%s/4102", root);
	mkdir(dir, 0700);
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		write_bytes(dir, "stat", bad[i], strlen(bad[i]));
		read_pid(4102, 0, &rc);
		all &= rc == GPUMON_E_NOT_FOUND;
	}
	ok(all, "odd stat lines (and another pid's) refused");
	read_pid(4999, GPUMON_HOST_USER | GPUMON_HOST_RANK, &rc);
	is_int(rc, GPUMON_E_NOT_FOUND, "a vanished pid");
}

static void test_rank(void)
{
	int rc;
	make_proc(4201, "python", 1,
		  ENV("PATH=/bin\0RANK=3\0LOCAL_RANK=1\0WORLD_SIZE=8\0GROUP_RANK=1\0TORCHELASTIC_RUN_ID=job42\0"));
	gpumon_host_process h = read_pid(4201, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && (h.present & GPUMON_HOST_RANK), "torchrun: environment read");
	ok(h.rank.rank == 3 && h.rank.local_rank == 1 && h.rank.world_size == 8 && h.rank.node_rank == 1, "torchrun's ranks");
	is_str(h.rank.launcher, "torchrun", "torchrun's launcher");
	is_str(h.rank.job_id, "job42", "torchrun's run id");
	is_str(h.rank.master, "", "no MASTER_ADDR: no rendezvous");

	make_proc(4226, "python", 1, ENV("RANK=1\0MASTER_ADDR=node-a.cluster\0MASTER_PORT=29500\0"));
	h = read_pid(4226, GPUMON_HOST_RANK, &rc);
	is_str(h.rank.master, "node-a.cluster:29500", "the rendezvous: MASTER_ADDR:MASTER_PORT");
	make_proc(4227, "python", 1, ENV("MASTER_ADDR=node-a\0MASTER_PORT=29500\0"));
	h = read_pid(4227, GPUMON_HOST_RANK, &rc);
	ok(h.rank.rank == -1 && !h.rank.launcher[0] && !h.rank.master[0], "a rendezvous alone is no worker");
	make_proc(4228, "python", 1, ENV("RANK=1\0MASTER_ADDR=node a\0MASTER_PORT=29x\0"));
	h = read_pid(4228, GPUMON_HOST_RANK, &rc);
	ok(h.rank.rank == 1 && !h.rank.master[0], "an address with a space and a port with a letter are not taken: '%s'",
	   h.rank.master);

	make_proc(4202, "python", 1,
		  ENV("SLURM_PROCID=5\0SLURM_LOCALID=1\0SLURM_NTASKS=16\0SLURM_NODEID=2\0SLURM_JOB_ID=1234\0HOME=/root"));
	h = read_pid(4202, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && h.rank.rank == 5 && h.rank.local_rank == 1 && h.rank.world_size == 16 && h.rank.node_rank == 2, "Slurm's ranks");
	ok(!strcmp(h.rank.launcher, "slurm") && !strcmp(h.rank.job_id, "1234"), "Slurm: %s %s", h.rank.launcher, h.rank.job_id);

	make_proc(4203, "python", 1, ENV("OMPI_COMM_WORLD_RANK=2\0OMPI_COMM_WORLD_LOCAL_RANK=0\0OMPI_COMM_WORLD_SIZE=4\0"));
	h = read_pid(4203, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && h.rank.rank == 2 && h.rank.local_rank == 0 && h.rank.world_size == 4 && h.rank.node_rank == -1, "Open MPI's ranks");
	ok(!strcmp(h.rank.launcher, "mpi") && !h.rank.job_id[0], "Open MPI: mpi, no job id");

	make_proc(4204, "python", 1, ENV("PMIX_RANK=7\0"));
	h = read_pid(4204, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && h.rank.rank == 7 && h.rank.world_size == -1 && !strcmp(h.rank.launcher, "mpi"), "PMIx: the rank alone");

	/* torchrun under srun: torchrun's figures win; its run id "none" is none, so Slurm's job is the id */
	make_proc(4205, "python", 1,
		  ENV("SLURM_PROCID=0\0SLURM_LOCALID=0\0SLURM_NTASKS=2\0SLURM_NODEID=1\0SLURM_JOB_ID=99\0"
		      "RANK=6\0LOCAL_RANK=2\0WORLD_SIZE=16\0GROUP_RANK=1\0TORCHELASTIC_RUN_ID=none\0"));
	h = read_pid(4205, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && h.rank.rank == 6 && h.rank.local_rank == 2 && h.rank.world_size == 16 && h.rank.node_rank == 1, "torchrun wins over Slurm");
	ok(!strcmp(h.rank.launcher, "torchrun") && !strcmp(h.rank.job_id, "99"), "torchrun under srun: %s, job %s", h.rank.launcher,
	   h.rank.job_id);

	/* junk: no '=', an empty name, values that are no counts, a long entry holding "RANK=1" */
	static char junk[3 << 20];
	size_t n = 0;
	const char head[] = "NOEQUALS\0=5\0RANK=abc\0WORLD_SIZE=-3\0LOCAL_RANK=99999999999\0GROUP_RANK=\0"
			    "TORCHELASTIC_RUN_ID=a\tb\0\0\0";
	memcpy(junk, head, sizeof head - 1);
	n += sizeof head - 1;
	n += (size_t)snprintf(junk + n, 32, "X=");
	memset(junk + n, 'a', 10000);
	n += 10000;
	n += (size_t)snprintf(junk + n, 32, "RANK=1") + 1;
	make_proc(4216, "python", 1, junk, n);
	h = read_pid(4216, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && (h.present & GPUMON_HOST_RANK), "junk: read, no error");
	ok(h.rank.rank == -1 && h.rank.local_rank == -1 && h.rank.world_size == -1 && h.rank.node_rank == -1 && !h.rank.launcher[0] &&
	   !h.rank.job_id[0], "junk: nothing taken (rank %d launcher '%s' job '%s')", h.rank.rank, h.rank.launcher, h.rank.job_id);

	/* an environment of MBs: entries before and after a long one are all seen */
	n = 0;
	n += (size_t)snprintf(junk + n, 32, "SLURM_JOB_ID=77") + 1;
	while (n < sizeof junk - 64) {
		size_t k = sizeof junk - 64 - n < 100 ? sizeof junk - 64 - n : 100;
		memset(junk + n, 'v', k - 1);
		junk[n + k - 1] = 0;
		n += k;
	}
	n += (size_t)snprintf(junk + n, 32, "SLURM_PROCID=6") + 1;
	make_proc(4207, "python", 1, junk, n);
	h = read_pid(4207, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && h.rank.rank == 6 && !strcmp(h.rank.job_id, "77") && !strcmp(h.rank.launcher, "slurm"),
	   "3 MiB of environment: the first and the last entries");

	/* another user's environment cannot be read (EACCES; as root, a directory in its place) */
	char dir[128];
	make_proc(4208, "python", 1, NULL, 0);
	snprintf(dir, sizeof dir, "%s/4208/environ", root);
	mkdir(dir, 0700);
	h = read_pid(4208, GPUMON_HOST_RANK | GPUMON_HOST_USER, &rc);
	is_int(rc, GPUMON_OK, "an unreadable environment is no error");
	ok(!(h.present & GPUMON_HOST_RANK) && (h.present & GPUMON_HOST_USER), "its bit clear, the rest read");
	ok(h.rank.rank == -1 && h.rank.local_rank == -1 && h.rank.world_size == -1 && h.rank.node_rank == -1, "ranks unknown");
	make_proc(4209, "python", 1, NULL, 0);
	h = read_pid(4209, GPUMON_HOST_RANK, &rc);
	ok(rc == 0 && !(h.present & GPUMON_HOST_RANK), "no environment file: its bit clear");
}

static void test_args(void)
{
	gpumon_host_process h = {.size = sizeof h};
	is_int(gpumon_host_process_read(0, 0, &h), GPUMON_E_INVAL, "pid 0");
	is_int(gpumon_host_process_read(4101, 0, NULL), GPUMON_E_INVAL, "no out");
	is_int(gpumon_host_process_read(4101, 1u << 9, &h), GPUMON_E_INVAL, "an unknown field bit");
	h.size = sizeof h + 8;
	is_int(gpumon_host_process_read(4101, 0, &h), GPUMON_E_INVAL, "a struct larger than known");
	h.size = 0;
	is_int(gpumon_host_process_read(4101, 0, &h), GPUMON_E_INVAL, "size not set");
	/* an older caller's struct that ends before the rank fields: nothing written past it */
	gpumon_host_process old;
	memset(&old, 0x5a, sizeof old);
	old.size = (unsigned)offsetof(gpumon_host_process, rank);
	is_int(gpumon_host_process_read(4201, GPUMON_HOST_RANK, &old), GPUMON_OK, "an older, smaller struct");
	ok(old.pid == 4201 && old.rank.rank == 0x5a5a5a5a, "filled up to its size only");
	unsigned *pids = NULL;
	size_t n = 0;
	is_int(gpumon_host_process_tree(0, 0, &pids, &n), GPUMON_E_INVAL, "tree of pid 0");
	is_int(gpumon_host_process_tree(1, 0, NULL, &n), GPUMON_E_INVAL, "tree without out");
}

static void test_tree(void)
{
	/* 4300 -> 4301 -> 4302, 4300 -> 4304; 4303 beside; 4310 <-> 4311 a loop a racing scan could see */
	static const unsigned fam[][2] = {{4300, 1}, {4301, 4300}, {4302, 4301}, {4303, 1}, {4304, 4300},
					  {4310, 4311}, {4311, 4310}};
	for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++)
		make_proc(fam[i][0], "sh", fam[i][1], NULL, 0);
	char junkdir[128], self[160], me[32];
	snprintf(junkdir, sizeof junkdir, "%s/12a", root);
	mkdir(junkdir, 0700);
	unsigned *pids = NULL;
	size_t n = 0;
	/* no `self` in the fixture: whose pids these are is not known, and a caller signals them */
	is_int(gpumon_host_process_tree(4300, 0, &pids, &n), GPUMON_E_NOT_SUPPORTED, "a /proc without self: refused");
	snprintf(self, sizeof self, "%s/self", root);
	ok(symlink("1", self) == 0, "a self of another namespace");
	is_int(gpumon_host_process_tree(4300, 0, &pids, &n), GPUMON_E_NOT_SUPPORTED, "another namespace's /proc: refused");
	int rc;
	gpumon_host_process h = read_pid(4300, 0, &rc);
	ok(rc == 0 && !(h.present & GPUMON_HOST_OWN_PIDS), "and its pids are not ours");
	unlink(self);
	snprintf(me, sizeof me, "%ld", (long)getpid());
	ok(symlink(me, self) == 0, "a self that is us");
	h = read_pid(4300, 0, &rc);
	ok(rc == 0 && (h.present & GPUMON_HOST_OWN_PIDS), "its pids are ours");
	is_int(gpumon_host_process_tree(4300, 0, &pids, &n), GPUMON_OK, "the tree below 4300");
	ok(n == 4 && pids[0] == 4300 && pids[1] == 4301 && pids[2] == 4302 && pids[3] == 4304, "4300 4301 4302 4304");
	gpumon_free(pids);
	is_int(gpumon_host_process_tree(4310, 0, &pids, &n), GPUMON_OK, "a loop of parents");
	ok(n == 2 && pids[0] == 4310 && pids[1] == 4311, "ends, each once");
	gpumon_free(pids);
	is_int(gpumon_host_process_tree(4999, 0, &pids, &n), GPUMON_OK, "a pid not there");
	ok(n == 1 && pids[0] == 4999, "only itself");
	gpumon_free(pids);
	unlink(self);
}

/* The real /proc for this very process. */
static void test_real(void)
{
	unsetenv("GPUMON_PROC_ROOT");
	int rc;
	gpumon_host_process h = read_pid((unsigned)getpid(), GPUMON_HOST_USER | GPUMON_HOST_RANK, &rc);
	is_int(rc, GPUMON_OK, "this process");
	ok(h.ppid == (unsigned)getppid() && h.state == 'R', "its parent, running");
	ok((h.present & (GPUMON_HOST_STAT | GPUMON_HOST_USER | GPUMON_HOST_RANK | GPUMON_HOST_OWN_PIDS)) ==
	   (GPUMON_HOST_STAT | GPUMON_HOST_USER | GPUMON_HOST_RANK | GPUMON_HOST_OWN_PIDS), "everything read, pids ours");
	ok(h.uid == (unsigned)getuid() && h.rss_bytes > 0, "its uid and resident memory");
	unsigned *pids = NULL;
	size_t n = 0;
	is_int(gpumon_host_process_tree(1, 0, &pids, &n), GPUMON_OK, "the whole tree below pid 1");
	int found = 0;
	for (size_t i = 0; i < n; i++)
		found |= pids[i] == (unsigned)getpid();
	ok(found || getppid() == 0, "holds this process");
	gpumon_free(pids);
}

int main(void)
{
	snprintf(root, sizeof root, "/tmp/gpumon-hostproc-XXXXXX");
	if (!mkdtemp(root)) {
		ok(0, "cannot make a fixture /proc");
		return tap_done();
	}
	setenv("GPUMON_PROC_ROOT", root, 1);
	test_stat();
	test_rank();
	test_args();
	test_tree();
	test_real();
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	if (system(cmd) != 0)
		ok(0, "cannot remove %s", root);
	return tap_done();
}
