/* SPDX-License-Identifier: MIT */
/* test_procs.c — process lists against the fake NVML: completion from /proc (our own pid), a pid
 * from another PID namespace kept and flagged, unknown memory, compute+graphics merged, order,
 * 1,000 processes, MIG ids, the v1-only driver, errors, and processes coming and going. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <pwd.h>
#include <time.h>


#define GPU0 "gpu 0 name=\"NVIDIA H200\" total=140GiB used=20GiB\n"
#define FOREIGN_PID 4194000 /* above any pid our /proc has */

static const gpumon_process *find_pid(const gpumon_process *l, size_t n, unsigned pid)
{
	for (size_t i = 0; i < n; i++)
		if (l[i].pid == pid)
			return &l[i];
	return NULL;
}

static void test_completion(void)
{
	char text[1024];
	unsigned me = (unsigned)getpid();
	snprintf(text, sizeof text,
		 GPU0 "proc 0 %u used=3GiB name=\"python\"\n"
		      "proc 0 %u used=1GiB\n"
		      "proc 0 4000 used=na\n"
		      "proc 0 4001 used=2GiB type=graphics\n"
		      "proc 0 4002 used=5GiB type=both\n",
		 me, FOREIGN_PID);
	gpumon *g = open_fake(text, 0);
	gpumon_process *l = NULL;
	size_t n = 0;
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_OK, "list");
	is_int(n, 5, "five processes");
	const gpumon_process *p = find_pid(l, n, me);
	ok(p != NULL, "our own pid listed");
	if (p) {
		is_int(p->used_bytes, 3LL << 30, "its memory");
		ok(p->flags & GPUMON_PROC_COMPUTE, "compute");
		ok(!(p->flags & GPUMON_PROC_FOREIGN), "in our /proc");
		ok(p->flags & GPUMON_PROC_USER_KNOWN, "user known");
		struct passwd *pw = getpwuid(getuid());
		is_str(p->user, pw ? pw->pw_name : "", "user is ours");
		is_int(p->uid, getuid(), "uid is ours");
		ok((p->flags & GPUMON_PROC_PPID_KNOWN) && p->ppid == (unsigned)getppid(), "parent pid is ours");
		ok((p->flags & GPUMON_PROC_CMDLINE_KNOWN) && strstr(p->cmdline, "test_procs"), "cmdline: %s", p->cmdline);
		is_str(p->name, "python", "NVML's process name preferred");
	}
	p = find_pid(l, n, FOREIGN_PID);
	ok(p && (p->flags & GPUMON_PROC_FOREIGN), "a pid missing from /proc is kept and flagged");
	ok(p && !(p->flags & (GPUMON_PROC_USER_KNOWN | GPUMON_PROC_CMDLINE_KNOWN | GPUMON_PROC_PPID_KNOWN)),
	   "with no user, cmdline or parent");
	ok(p && p->used_bytes == (1LL << 30), "and its memory");
	p = find_pid(l, n, 4001);
	ok(p && (p->flags & GPUMON_PROC_GRAPHICS) && !(p->flags & GPUMON_PROC_COMPUTE), "graphics-only process");
	p = find_pid(l, n, 4002);
	ok(p && (p->flags & GPUMON_PROC_GRAPHICS) && (p->flags & GPUMON_PROC_COMPUTE), "both lists: merged once");
	p = find_pid(l, n, 4000);
	ok(p && !(p->flags & GPUMON_PROC_USED_KNOWN), "memory not available: flagged, not 0");
	if (n == 5) {
		is_int(l[0].pid, 4002, "largest first");
		is_int(l[1].pid, me, "then 3 GiB");
		is_int(l[2].pid, 4001, "then 2 GiB");
		is_int(l[3].pid, FOREIGN_PID, "then 1 GiB");
		is_int(l[4].pid, 4000, "unknown last");
	}
	ok(!(l[0].flags & GPUMON_PROC_MIG), "no MIG ids without MIG");
	gpumon_free(l);
	gpumon_free(NULL);
	gpumon_destroy(g);
}

static void test_thousand(void)
{
	gpumon *g = open_fake(GPU0 "procs 0 100000 1000 used=16MiB\n", 0);
	gpumon_process *l = NULL;
	size_t n = 0;
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_OK, "1,000 processes listed");
	is_int(n, 1000, "all of them");
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		sum += l[i].used_bytes;
	}
	is_int(sum, 1000LL * 16 << 20, "their memory adds up");
	is_int(l[0].pid, 100000, "equal memory: by pid");
	is_int(l[999].pid, 100999, "last pid");
	gpumon_free(l);
	gpumon_destroy(g);
}

static void test_mig_and_v1(void)
{
	gpumon *g = open_fake(GPU0 "proc 0 4100 used=1GiB gi=1 ci=0\n", 0);
	gpumon_process *l = NULL;
	size_t n = 0;
	gpumon_process_list(g, 0, &l, &n);
	ok(n == 1 && (l[0].flags & GPUMON_PROC_MIG) && l[0].gpu_instance_id == 1 && l[0].compute_instance_id == 0,
	   "MIG ids kept");
	gpumon_free(l);
	gpumon_destroy(g);

	g = open_fake(GPU0 "proc 0 4100 used=1GiB gi=1 ci=0 name=\"python\"\nproc 0 4101 used=2GiB type=graphics\n", 1);
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_OK, "v1-only driver lists processes");
	is_int(n, 2, "both");
	ok(n == 2 && l[0].pid == 4101 && l[1].used_bytes == 1LL << 30, "v1 entries read right");
	ok(n == 2 && !(l[1].flags & GPUMON_PROC_MIG), "v1 has no MIG ids");
	ok(n == 2 && !(l[1].flags & GPUMON_PROC_NAME_KNOWN), "no NVML name call, no /proc entry: name unknown");
	gpumon_free(l);
	gpumon_destroy(g);
}

static void test_errors_and_time(void)
{
	gpumon *g = open_fake(GPU0 "proc 0 4100 used=1GiB\nerror nvmlDeviceGetComputeRunningProcesses_v3 UNKNOWN\n", 0);
	gpumon_process *l = (gpumon_process *)1;
	size_t n = 7;
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_E_NVML, "driver error: error");
	ok(l == NULL && n == 0, "nothing returned on error");
	ok(strstr(gpumon_errmsg(g), "ComputeRunningProcesses") != NULL, "message names the call: %s", gpumon_errmsg(g));
	gpumon_destroy(g);

	g = open_fake(GPU0 "error nvmlDeviceGetComputeRunningProcesses_v3 NOT_SUPPORTED\n"
			 "error nvmlDeviceGetGraphicsRunningProcesses_v3 NOT_SUPPORTED\n", 0);
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_E_NOT_SUPPORTED, "neither list supported");
	gpumon_destroy(g);

	g = open_fake(GPU0 "proc 0 4100 used=1GiB\nat 0.3 proc 0 4100 gone\nat 0.3 proc 0 4200 used=2GiB\n"
			 "at 0.3 lost 0\n", 0);
	gpumon_process_list(g, 0, &l, &n);
	ok(n == 1 && l[0].pid == 4100, "before: 4100");
	gpumon_free(l);
	struct timespec ts = {0, 400000000};
	nanosleep(&ts, NULL);
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_E_LOST, "after: the GPU is lost");
	gpumon_destroy(g);

	g = open_fake(GPU0 "proc 0 4100 used=1GiB\nat 0.3 proc 0 4100 gone\nat 0.3 proc 0 4200 used=2GiB\n", 0);
	nanosleep(&ts, NULL);
	gpumon_process_list(g, 0, &l, &n);
	ok(n == 1 && l[0].pid == 4200, "processes come and go");
	gpumon_free(l);
	is_int(gpumon_process_list(g, 3, &l, &n), GPUMON_E_NOT_FOUND, "bad device");
	is_int(gpumon_process_list(g, 0, NULL, &n), GPUMON_E_INVAL, "NULL out");
	gpumon_destroy(g);
}

int main(void)
{
	test_completion();
	test_thousand();
	test_mig_and_v1();
	test_errors_and_time();
	remove_scenario();
	return tap_done();
}
