/* SPDX-License-Identifier: MIT */
/* test_exporter_owner.c — the exporter's per-owner series on their own (lib/exporter_owner.c and the
 * renderer compiled in): owners set by hand (pod with and without names, Slurm job with steps,
 * container, user, another PID namespace) summed per GPU and owner, a distributed job's ranks each
 * a series of their own, the leak flag from the model's processes, dcgm-exporter's pod labels, and
 * the GPU of a framework sample. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/model.h"
#include "exporter.h"
#include "tap.h"

/* ---- what the code under test uses of the rest of the library, stood in for ------------------------ */

static int map_answer = -1; /* what the model's CUDA_VISIBLE_DEVICES mapping says */

int gpumon__model_map_device(const gpumon_model *m, unsigned pid, int cuda_device)
{
	(void)m;
	(void)pid;
	(void)cuda_device;
	return map_answer;
}

/* a leak detector "alerts" when its handle is this marker */
#define ALERTING ((gpumon_leak *)(uintptr_t)0x1)

void gpumon_leak_result_get(const gpumon_leak *l, gpumon_leak_result *out)
{
	memset(out, 0, sizeof *out);
	out->alert = l == ALERTING;
}

/* ---- fixtures --------------------------------------------------------------------------------------- */

static gpumon_process proc(unsigned pid, uint64_t used, const char *user)
{
	gpumon_process p;
	memset(&p, 0, sizeof p);
	p.pid = pid;
	p.used_bytes = used;
	p.flags = GPUMON_PROC_COMPUTE | GPUMON_PROC_USED_KNOWN;
	if (user) {
		p.flags |= GPUMON_PROC_USER_KNOWN;
		snprintf(p.user, sizeof p.user, "%s", user);
	}
	return p;
}

static gpumon_process pod(unsigned pid, uint64_t used, const char *ns, const char *name, const char *container)
{
	gpumon_process p = proc(pid, used, "root");
	p.owner.present = GPUMON_OWNER_CONTAINER | GPUMON_OWNER_POD;
	snprintf(p.owner.pod_uid, sizeof p.owner.pod_uid, "8f2b5d0e-3c1a-4f7e-9b2d-0a1b2c3d4e5f");
	snprintf(p.owner.runtime, sizeof p.owner.runtime, "containerd");
	snprintf(p.owner.container_id, sizeof p.owner.container_id, "%064x", pid);
	if (ns) {
		p.owner.present |= GPUMON_OWNER_POD_NAMES;
		snprintf(p.owner.k8s_namespace, sizeof p.owner.k8s_namespace, "%s", ns);
		snprintf(p.owner.pod, sizeof p.owner.pod, "%s", name);
		snprintf(p.owner.container, sizeof p.owner.container, "%s", container);
	}
	return p;
}

static gpumon_process slurm(unsigned pid, uint64_t used, const char *job, const char *step)
{
	gpumon_process p = proc(pid, used, "alice");
	p.owner.present = GPUMON_OWNER_SLURM;
	snprintf(p.owner.slurm_job, sizeof p.owner.slurm_job, "%s", job);
	snprintf(p.owner.slurm_step, sizeof p.owner.slurm_step, "%s", step);
	return p;
}

/* p as the library fills a process whose environment it read: launcher "" is no worker */
static gpumon_process ranked(gpumon_process p, const char *launcher, int rank, const char *job)
{
	p.flags |= GPUMON_PROC_RANK_KNOWN;
	p.rank = (gpumon_rank){.rank = rank, .local_rank = rank, .world_size = 4, .node_rank = 0};
	snprintf(p.rank.launcher, sizeof p.rank.launcher, "%s", launcher);
	snprintf(p.rank.job_id, sizeof p.rank.job_id, "%s", job);
	return p;
}

struct fixture {
	gpumon_exporter e;
	struct prom_gpu gpus[2];
	struct eproc procs[16];
	const struct prom_proc *order[16], *oorder[16];
	struct gpumon_model model;
	struct mproc mprocs[16];
};

static void setup(struct fixture *f)
{
	memset(f, 0, sizeof *f);
	f->e.gpus = f->gpus;
	f->e.ngpus = 2;
	f->e.procs = f->procs;
	f->e.cap_procs = 16;
	f->e.order = f->order;
	f->e.oorder = f->oorder;
	f->e.model = &f->model;
	f->model.procs = f->mprocs;
	for (unsigned i = 0; i < 2; i++) {
		f->gpus[i].info.index = i;
		f->gpus[i].up = f->gpus[i].have_sample = 1;
		snprintf(f->gpus[i].short_labels, sizeof f->gpus[i].short_labels, "gpu=\"%u\",uuid=\"GPU-%u\"", i, i);
		f->gpus[i].dcgm_owner = "";
	}
}

static void add(struct fixture *f, unsigned dev, gpumon_process p)
{
	struct eproc *ep = &f->procs[f->e.nprocs];
	ep->pub.dev = dev;
	ep->pub.pid = p.pid;
	ep->pub.used_known = !!(p.flags & GPUMON_PROC_USED_KNOWN);
	ep->pub.used_bytes = p.used_bytes;
	ok(gpumon__exporter_owner_labels(&f->e, ep, &p) == GPUMON_OK, "labels of pid %u", p.pid);
	f->order[f->e.nprocs++] = &ep->pub;
}

static char *render(struct fixture *f, size_t nowners, unsigned compat)
{
	struct prom_view v = {.compat = compat, .gpus = f->gpus, .ngpus = 2, .processes = 1, .owners = f->e.owners,
			      .nowners = nowners, .hostname = "h"};
	struct prom_buf b = {0};
	ok(gpumon__prom_render(&v, &b) == GPUMON_OK, "rendered");
	return b.p;
}

static void teardown(struct fixture *f)
{
	for (size_t i = 0; i < f->e.nprocs; i++) {
		free(f->procs[i].pub.labels);
		free(f->procs[i].pub.owner);
		free(f->procs[i].pub.dcgm_owner);
	}
	free(f->e.owners);
}

/* ---- tests ------------------------------------------------------------------------------------------ */

static void test_kinds_and_sums(void)
{
	struct fixture f;
	setup(&f);
	const uint64_t G = 1ull << 30;
	add(&f, 0, pod(101, 4 * G, "team-a", "train-0", "trainer"));
	add(&f, 0, pod(102, 2 * G, "team-a", "train-0", "trainer")); /* same container: summed */
	add(&f, 0, pod(103, 1 * G, "team-a", "train-0", "sidecar"));
	add(&f, 0, pod(104, 1 * G, NULL, NULL, NULL));                /* names not readable */
	add(&f, 1, slurm(201, 3 * G, "4242", "0"));
	add(&f, 1, slurm(202, 5 * G, "4242", "batch"));               /* the job's steps together */
	gpumon_process c = proc(301, 1 * G, "bob");
	c.owner.present = GPUMON_OWNER_CONTAINER;
	snprintf(c.owner.runtime, sizeof c.owner.runtime, "docker");
	snprintf(c.owner.container_id, sizeof c.owner.container_id, "0123456789ab%052d", 0);
	add(&f, 1, c);
	gpumon_process u = proc(401, 7 * G, "carol");
	u.owner.present = GPUMON_OWNER_UNIT; /* a unit is not a label: session scopes churn */
	snprintf(u.owner.unit, sizeof u.owner.unit, "session-3.scope");
	add(&f, 1, u);
	add(&f, 1, proc(402, 1 * G, "carol"));
	gpumon_process x = proc(501, 0, NULL);
	x.flags = (x.flags & ~GPUMON_PROC_USED_KNOWN) | GPUMON_PROC_FOREIGN;
	x.owner.present = GPUMON_OWNER_UNRESOLVED;
	add(&f, 1, x);

	size_t n = gpumon__exporter_owners(&f.e, f.order, f.e.nprocs);
	is_int(n, 7, "seven owners: 3 on GPU 0 (2 named containers, 1 pod by uid), 4 on GPU 1");
	char *page = render(&f, n, 0);
	ok(page && strstr(page, "gpumon_owner_memory_used_bytes{gpu=\"0\",uuid=\"GPU-0\",owner_kind=\"pod\","
				"namespace=\"team-a\",pod=\"train-0\",container=\"trainer\",user=\"root\"} 6442450944\n"),
	   "a pod container's processes summed, with its names");
	ok(page && strstr(page, "gpumon_owner_processes{gpu=\"0\",uuid=\"GPU-0\",owner_kind=\"pod\",namespace=\"team-a\","
				"pod=\"train-0\",container=\"trainer\",user=\"root\"} 2\n"),
	   "and counted");
	ok(page && strstr(page, "{gpu=\"0\",uuid=\"GPU-0\",owner_kind=\"pod\",pod_uid=\"8f2b5d0e-3c1a-4f7e-9b2d-0a1b2c3d4e5f\","
				"user=\"root\"} 1073741824\n"),
	   "a pod without names: its uid");
	ok(page && strstr(page, "{gpu=\"1\",uuid=\"GPU-1\",owner_kind=\"slurm\",slurm_job=\"4242\",user=\"alice\"} 8589934592\n"),
	   "a Slurm job's steps summed under the job");
	ok(page && strstr(page, "{gpu=\"1\",uuid=\"GPU-1\",owner_kind=\"container\",container_id=\"0123456789ab\",user=\"bob\"} 1073741824\n"),
	   "a container outside Kubernetes: 12 digits of its id");
	ok(page && strstr(page, "{gpu=\"1\",uuid=\"GPU-1\",owner_kind=\"user\",user=\"carol\"} 8589934592\n"),
	   "else the user (a systemd scope is not a label)");
	ok(page && !strstr(page, "gpumon_owner_memory_used_bytes{gpu=\"1\",uuid=\"GPU-1\",owner_kind=\"unresolved\""),
	   "an owner whose figures are all unknown has no memory sample (not 0)");
	ok(page && strstr(page, "gpumon_owner_processes{gpu=\"1\",uuid=\"GPU-1\",owner_kind=\"unresolved\"} 1\n"),
	   "another PID namespace: counted, nothing guessed");
	ok(page && !strstr(page, "pid=") && !strstr(page, "command="), "no pid or command label");
	ok(page && strstr(page, "gpumon_owner_leak_suspected{gpu=\"0\",uuid=\"GPU-0\",owner_kind=\"pod\",namespace=\"team-a\","
				"pod=\"train-0\",container=\"trainer\",user=\"root\"} 0\n"), "the leak flag 0 without a model alert");
	free(page);
	teardown(&f);
}

/* Whether page holds the line "gpumon_owner_FAMILY{gpu=GPU,uuid=GPU-GPU,LABELS} VALUE\n". */
static int has(const char *page, const char *family, unsigned gpu, const char *labels, const char *value)
{
	char line[512];
	snprintf(line, sizeof line, "gpumon_owner_%s{gpu=\"%u\",uuid=\"GPU-%u\",%s} %s\n", family, gpu, gpu,
		 labels, value);
	return page && strstr(page, line);
}

#define DDP "owner_kind=\"pod\",namespace=\"ml\",pod=\"ddp-0\",container=\"trainer\",user=\"root\""
#define JOB77 "owner_kind=\"slurm\",slurm_job=\"77\",user=\"alice\""
#define ERIN "owner_kind=\"user\",user=\"erin\""

static void test_ranks(void)
{
	struct fixture f;
	setup(&f);
	const uint64_t G = 1ull << 30;
	add(&f, 0, ranked(pod(11, 4 * G, "ml", "ddp-0", "trainer"), "torchrun", 0, "run-a"));
	/* rank 0's second process on its GPU (a DataLoader worker that touched CUDA) */
	add(&f, 0, ranked(pod(12, 1 * G, "ml", "ddp-0", "trainer"), "torchrun", 0, "run-a"));
	add(&f, 1, ranked(pod(13, 6 * G, "ml", "ddp-0", "trainer"), "torchrun", 1, "run-a"));
	add(&f, 0, pod(14, 2 * G, "ml", "ddp-0", "trainer"));                    /* the same pod, no worker */
	add(&f, 1, ranked(slurm(21, 3 * G, "77", "0"), "slurm", 5, "77"));
	add(&f, 1, ranked(slurm(22, 1 * G, "77", "batch"), "slurm", -1, "77")); /* the allocation, no rank */
	add(&f, 1, ranked(proc(31, 1 * G, "erin"), "", -1, ""));               /* read: no launcher */
	gpumon_process hidden = proc(32, 1 * G, "erin");                       /* not read: fields unused */
	hidden.rank = (gpumon_rank){.rank = 3, .launcher = "mpi"};
	add(&f, 1, hidden);
	add(&f, 1, ranked(proc(33, 2 * G, "erin"), "mpi", 2, ""));

	size_t n = gpumon__exporter_owners(&f.e, f.order, f.e.nprocs);
	is_int(n, 7, "GPU 0: rank 0, the pod; GPU 1: rank 1, job 77's rank 5, the job, erin, rank 2");
	char *page = render(&f, n, 0);
	ok(has(page, "memory_used_bytes", 0, DDP ",rank=\"0\"", "5368709120"),
	   "a rank's processes on the GPU summed, with the owner's labels and the rank");
	ok(has(page, "processes", 0, DDP ",rank=\"0\"", "2"), "and counted");
	ok(has(page, "memory_used_bytes", 0, DDP, "2147483648"),
	   "a process of the owner that is no worker: the owner's series, no rank label");
	ok(has(page, "leak_suspected", 1, DDP ",rank=\"1\"", "0"), "each family carries the rank");
	ok(has(page, "memory_used_bytes", 1, JOB77 ",rank=\"5\"", "3221225472"), "a Slurm task's rank");
	ok(has(page, "memory_used_bytes", 1, JOB77, "1073741824"), "the allocation's process without a rank");
	ok(has(page, "memory_used_bytes", 1, ERIN, "2147483648"),
	   "no launcher, or an environment not read: no rank, whatever the fields hold");
	ok(has(page, "memory_used_bytes", 1, ERIN ",rank=\"2\"", "2147483648"), "an MPI rank, no job id");
	ok(page && !strstr(page, "rank=\"-1\"") && !strstr(page, "rank=\"\"") && !strstr(page, "rank=\"3\""),
	   "no empty or unknown rank label");
	ok(page && !strstr(page, "job_id") && !strstr(page, "run-a"), "the job's id is no owner label");
	free(page);
	teardown(&f);

	/* the same ranks' next job (new pids, a new id) on the same GPUs: the same series */
	setup(&f);
	add(&f, 0, ranked(pod(41, 4 * G, "ml", "ddp-0", "trainer"), "torchrun", 0, "run-b"));
	add(&f, 1, ranked(pod(43, 6 * G, "ml", "ddp-0", "trainer"), "torchrun", 1, "run-b"));
	n = gpumon__exporter_owners(&f.e, f.order, f.e.nprocs);
	page = render(&f, n, 0);
	is_int(n, 2, "one series per rank");
	ok(has(page, "memory_used_bytes", 1, DDP ",rank=\"1\"", "6442450944"), "the next job's rank 1");
	free(page);
	teardown(&f);
}

static void test_leak_flag(void)
{
	struct fixture f;
	setup(&f);
	add(&f, 0, proc(11, 100, "dave"));
	add(&f, 0, proc(12, 100, "dave"));
	add(&f, 1, proc(11, 100, "dave")); /* the same pid on the other GPU does not alert there */
	f.mprocs[0] = (struct mproc){.dev = 0, .pid = 12, .present = 1, .alerted = 1, .leak = ALERTING};
	f.mprocs[1] = (struct mproc){.dev = 1, .pid = 11, .present = 1, .alerted = 0, .leak = ALERTING};
	f.model.nprocs = 2;
	size_t n = gpumon__exporter_owners(&f.e, f.order, f.e.nprocs);
	is_int(n, 2, "one owner per GPU");
	is_int(f.e.owners[0].leak_alert, 1, "GPU 0: one of dave's processes alerts");
	is_int(f.e.owners[1].leak_alert, 0, "GPU 1: a detector that never alerted is not asked");
	is_int(f.e.owners[0].nprocs, 2, "two processes");
	teardown(&f);
}

static void test_dcgm_pod_labels(void)
{
	struct fixture f;
	setup(&f);
	f.gpus[0].s.present = f.gpus[1].s.present = GPUMON_F_MEMORY;
	f.gpus[0].s.memory_used_bytes = f.gpus[1].s.memory_used_bytes = 1 << 20;
	snprintf(f.gpus[0].dcgm_labels, sizeof f.gpus[0].dcgm_labels, "gpu=\"0\"");
	snprintf(f.gpus[1].dcgm_labels, sizeof f.gpus[1].dcgm_labels, "gpu=\"1\"");
	add(&f, 0, pod(1, 1, "ns", "p", "c"));
	add(&f, 0, pod(2, 1, "ns", "p", "c"));
	add(&f, 1, pod(3, 1, "ns", "p", "c"));
	add(&f, 1, proc(4, 1, "erin")); /* a second owner on GPU 1 */
	size_t n = gpumon__exporter_owners(&f.e, f.order, f.e.nprocs);
	char *page = render(&f, n, GPUMON_COMPAT_DCGM);
	ok(page && strstr(page, "DCGM_FI_DEV_FB_USED{gpu=\"0\",namespace=\"ns\",pod=\"p\",container=\"c\"} 1\n"),
	   "a GPU held by one pod container carries dcgm-exporter's pod labels");
	ok(page && strstr(page, "DCGM_FI_DEV_FB_USED{gpu=\"1\"} 1\n"), "a shared GPU carries none");
	free(page);
	teardown(&f);
}

static void test_framework_gpu(void)
{
	struct fixture f;
	setup(&f);
	gpumon_framework_sample s = {.pid = 77, .device = 0};
	is_int(gpumon__exporter_framework_gpu(&f.e, &s), -1, "two GPUs, pid not listed: unknown, not CUDA index 0");
	add(&f, 1, proc(77, 1, "x"));
	is_int(gpumon__exporter_framework_gpu(&f.e, &s), 1, "the one GPU NVML lists the pid on");
	add(&f, 0, proc(77, 1, "x"));
	is_int(gpumon__exporter_framework_gpu(&f.e, &s), -1, "listed on both: unknown");
	char cvd[] = "GPU-1";
	f.model.cvd = cvd;
	map_answer = 1;
	is_int(gpumon__exporter_framework_gpu(&f.e, &s), 1, "with CUDA_VISIBLE_DEVICES: the model's mapping");
	map_answer = -2;
	is_int(gpumon__exporter_framework_gpu(&f.e, &s), -1, "the model's no-GPU answers are unknown");
	f.model.cvd = NULL;

	gpumon_framework_sample fw[2] = {{.pid = 77, .device = 0, .allocated_known = 1, .allocated_bytes = 5},
					 {.pid = 78, .device = 1, .allocated_known = 1, .allocated_bytes = 6}};
	snprintf(fw[0].framework, sizeof fw[0].framework, "torch");
	snprintf(fw[1].framework, sizeof fw[1].framework, "torch");
	int gpu[2] = {1, -1};
	struct prom_view v = {.gpus = f.gpus, .ngpus = 2, .fw = fw, .fw_gpu = gpu, .nfw = 2};
	struct prom_buf b = {0};
	gpumon__prom_render(&v, &b);
	ok(b.p && strstr(b.p, "gpumon_framework_allocated_bytes{gpu=\"1\",uuid=\"GPU-1\",pid=\"77\",device=\"0\",framework=\"torch\"} 5\n"),
	   "a framework sample carries its GPU's gpu/uuid");
	ok(b.p && strstr(b.p, "gpumon_framework_allocated_bytes{gpu=\"unknown\",uuid=\"unknown\",pid=\"78\",device=\"1\",framework=\"torch\"} 6\n"),
	   "and says unknown when it cannot be known");
	gpumon__prom_free(&b);
	teardown(&f);
}

int main(void)
{
	test_kinds_and_sums();
	test_ranks();
	test_leak_flag();
	test_dcgm_pod_labels();
	test_framework_gpu();
	return tap_done();
}
