/* SPDX-License-Identifier: MIT */
/* test_cgroup.c — a process's owner from /proc/PID/cgroup: the text each runtime writes (docker,
 * containerd, CRI-O, podman, Kubernetes QoS classes, Slurm, systemd; cgroup v1 and v2, systemd and
 * cgroupfs drivers), pod names from a pod log directory, GPUMON_PROC_ROOT, and a real process
 * moved into real cgroups made here, read back through the fake NVML. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "internal.h"

#define ID "3f1c0e6a9b2d4c8e7f1a0b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6a"
#define ID12 "3f1c0e6a9b2d"
#define UID "8f2b5d0e-3c1a-4f7e-9b2d-0a1b2c3d4e5f"
#define UID_ "8f2b5d0e_3c1a_4f7e_9b2d_0a1b2c3d4e5f"

struct want {
	unsigned present;
	const char *runtime, *id, *pod_uid, *job, *step, *unit, *phrase;
};

/* Parses text and checks every part of the owner against w. */
static void check(const char *name, const char *text, struct want w)
{
	gpumon_owner o;
	memset(&o, 0x55, sizeof o); /* the parser must clear what it does not set */
	int got = gpumon__owner_from_cgroup(text, &o);
	is_int(got, w.present, "%s: present bits", name);
	is_int(o.present, w.present, "%s: present field", name);
	is_str(o.runtime, w.runtime ? w.runtime : "", "%s: runtime", name);
	is_str(o.container_id, w.id ? w.id : "", "%s: container id", name);
	is_str(o.pod_uid, w.pod_uid ? w.pod_uid : "", "%s: pod uid", name);
	is_str(o.slurm_job, w.job ? w.job : "", "%s: slurm job", name);
	is_str(o.slurm_step, w.step ? w.step : "", "%s: slurm step", name);
	is_str(o.unit, w.unit ? w.unit : "", "%s: unit", name);
	ok(!o.k8s_namespace[0] && !o.pod[0] && !o.container[0], "%s: no names without a pod directory", name);
	char phrase[128];
	gpumon_owner_describe(&o, phrase, sizeof phrase);
	is_str(phrase, w.phrase, "%s: phrase", name);
}

/* The v1 controllers a process of a cgroup v1 machine is listed in, each with path p. */
#define V1(p)                                                                                         \
	"12:pids:" p "\n11:hugetlb:" p "\n10:net_cls,net_prio:" p "\n9:cpu,cpuacct:" p "\n8:memory:" p \
	"\n7:devices:" p "\n6:freezer:" p "\n5:blkio:" p "\n4:perf_event:" p "\n3:cpuset:" p           \
	"\n2:rdma:/\n1:name=systemd:" p "\n"

static void test_docker(void)
{
	struct want w = {GPUMON_OWNER_CONTAINER, "docker", ID, NULL, NULL, NULL, NULL, "docker " ID12};
	check("docker v1 cgroupfs", V1("/docker/" ID), w);
	check("docker v1 systemd", V1("/system.slice/docker-" ID ".scope"), w);
	check("docker v2 systemd", "0::/system.slice/docker-" ID ".scope\n", w);
	check("docker v2 cgroupfs", "0::/docker/" ID "\n", w);
	check("docker hybrid", V1("/docker/" ID) "0::/\n", w);
	check("docker without final newline", "0::/system.slice/docker-" ID ".scope", w);
	check("nerdctl v2 systemd", "0::/system.slice/nerdctl-" ID ".scope\n",
	      (struct want){GPUMON_OWNER_CONTAINER, "containerd", ID, NULL, NULL, NULL, NULL, "containerd " ID12});
}

static void test_kubernetes(void)
{
	const unsigned pc = GPUMON_OWNER_POD | GPUMON_OWNER_CONTAINER;
	struct want cd = {pc, "containerd", ID, UID, NULL, NULL, NULL, "pod " UID};
	check("containerd v2 systemd burstable",
	      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
	      ".slice/cri-containerd-" ID ".scope\n", cd);
	check("containerd v2 systemd besteffort",
	      "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_
	      ".slice/cri-containerd-" ID ".scope\n", cd);
	check("containerd v2 systemd guaranteed",
	      "0::/kubepods.slice/kubepods-pod" UID_ ".slice/cri-containerd-" ID ".scope\n", cd);
	check("containerd v1 systemd burstable",
	      V1("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/cri-containerd-" ID
		 ".scope"), cd);
	check("containerd v1 systemd, containerd's SLICE:PREFIX:ID form",
	      "11:memory:/system.slice/containerd.service/kubepods-burstable-pod" UID_ ".slice:cri-containerd:" ID
	      "\n1:name=systemd:/system.slice/containerd.service/kubepods-burstable-pod" UID_
	      ".slice:cri-containerd:" ID "\n", cd);
	check("kind: kubelet.slice nesting",
	      "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
	      "kubelet-kubepods-besteffort-pod" UID_ ".slice/cri-containerd-" ID ".scope\n", cd);
	/* cgroupfs driver: a bare id, whose runtime the path does not say */
	struct want bare = {pc, "", ID, UID, NULL, NULL, NULL, "pod " UID};
	check("cgroupfs v1 burstable", V1("/kubepods/burstable/pod" UID "/" ID), bare);
	check("cgroupfs v1 besteffort", V1("/kubepods/besteffort/pod" UID "/" ID), bare);
	check("cgroupfs v1 guaranteed", V1("/kubepods/pod" UID "/" ID), bare);
	check("cgroupfs v2 burstable", "0::/kubepods/burstable/pod" UID "/" ID "\n", bare);
	check("static pod (32-digit uid)", "0::/kubepods/burstable/pod3c3ab2bd0c3d4d1a86b2b6b4c1ef3a2b/" ID "\n",
	      (struct want){pc, "", ID, "3c3ab2bd0c3d4d1a86b2b6b4c1ef3a2b", NULL, NULL, NULL,
			    "pod 3c3ab2bd0c3d4d1a86b2b6b4c1ef3a2b"});
	check("pod sandbox cgroup, no container",
	      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice\n",
	      (struct want){GPUMON_OWNER_POD, NULL, NULL, UID, NULL, NULL, NULL, "pod " UID});
	/* CRI-O */
	struct want crio = {pc, "cri-o", ID, UID, NULL, NULL, NULL, "pod " UID};
	check("cri-o v2 systemd",
	      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/crio-" ID ".scope\n",
	      crio);
	check("cri-o v1 systemd",
	      V1("/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_ ".slice/crio-" ID ".scope"),
	      crio);
	check("cri-o conmon v2",
	      "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/crio-conmon-" ID
	      ".scope\n", crio);
	check("cri-o v1 cgroupfs", V1("/kubepods/burstable/pod" UID "/crio-" ID), crio);
	check("cri-o container's own sub-cgroup (v2, cgroup namespace off)",
	      "0::/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" ID ".scope/container\n", crio);
	check("docker (dockershim) v1 systemd",
	      V1("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/docker-" ID ".scope"),
	      (struct want){pc, "docker", ID, UID, NULL, NULL, NULL, "pod " UID});
}

static void test_podman(void)
{
	struct want w = {GPUMON_OWNER_CONTAINER, "podman", ID, NULL, NULL, NULL, NULL, "podman " ID12};
	check("podman rootful v2", "0::/machine.slice/libpod-" ID ".scope/container\n", w);
	check("podman rootful v2 (no sub-cgroup)", "0::/machine.slice/libpod-" ID ".scope\n", w);
	check("podman rootless v2",
	      "0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID ".scope/container\n", w);
	check("podman v1 cgroupfs", V1("/libpod_parent/libpod-" ID), w);
	check("podman v1 systemd", V1("/machine.slice/libpod-" ID ".scope"), w);
	check("podman conmon", "0::/machine.slice/libpod-conmon-" ID ".scope\n", w);
}

static void test_slurm(void)
{
	const unsigned s = GPUMON_OWNER_SLURM;
	check("slurm v1 step 0",
	      "11:freezer:/slurm/uid_1000/job_1234/step_0\n8:memory:/slurm/uid_1000/job_1234/step_0/task_0\n"
	      "7:devices:/slurm/uid_1000/job_1234/step_0\n4:cpuset:/slurm/uid_1000/job_1234/step_0\n"
	      "1:name=systemd:/system.slice/slurmd.service\n",
	      (struct want){s, NULL, NULL, NULL, "1234", "0", NULL, "slurm job 1234.0"});
	check("slurm v1 batch", V1("/slurm/uid_1000/job_1234/step_batch"),
	      (struct want){s, NULL, NULL, NULL, "1234", "batch", NULL, "slurm job 1234.batch"});
	check("slurm v1 extern", V1("/slurm/uid_1000/job_1234/step_extern"),
	      (struct want){s, NULL, NULL, NULL, "1234", "extern", NULL, "slurm job 1234.extern"});
	check("slurm v1 multiple-slurmd node", "4:memory:/slurm_node07/uid_1000/job_77/step_batch/task_0\n",
	      (struct want){s, NULL, NULL, NULL, "77", "batch", NULL, "slurm job 77.batch"});
	check("slurm v1 job cgroup, no step", "4:memory:/slurm/uid_1000/job_1234\n",
	      (struct want){s, NULL, NULL, NULL, "1234", NULL, NULL, "slurm job 1234"});
	check("slurm v2 step 0", "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
	      (struct want){s, NULL, NULL, NULL, "4242", "0", NULL, "slurm job 4242.0"});
	check("slurm v2 batch", "0::/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0\n",
	      (struct want){s, NULL, NULL, NULL, "4242", "batch", NULL, "slurm job 4242.batch"});
	check("slurm v2 extern", "0::/system.slice/slurmstepd.scope/job_4242/step_extern/user/task_special\n",
	      (struct want){s, NULL, NULL, NULL, "4242", "extern", NULL, "slurm job 4242.extern"});
	check("slurm v2 interactive", "0::/system.slice/slurmstepd.scope/job_4242/step_interactive/user/task_0\n",
	      (struct want){s, NULL, NULL, NULL, "4242", "interactive", NULL, "slurm job 4242.interactive"});
	check("slurm v2 stepd itself", "0::/system.slice/slurmstepd.scope/job_4242/step_0/slurm\n",
	      (struct want){s, NULL, NULL, NULL, "4242", "0", NULL, "slurm job 4242.0"});
	check("slurm v2 multiple-slurmd node", "0::/system.slice/node07_slurmstepd.scope/job_9/step_1/user/task_0\n",
	      (struct want){s, NULL, NULL, NULL, "9", "1", NULL, "slurm job 9.1"});
	check("slurm v2 hybrid machine", "10:memory:/\n1:name=systemd:/system.slice/slurmstepd.scope\n"
					 "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n",
	      (struct want){s, NULL, NULL, NULL, "4242", "0", NULL, "slurm job 4242.0"});
}

static void test_systemd(void)
{
	const unsigned u = GPUMON_OWNER_UNIT;
	check("service v2", "0::/system.slice/train.service\n",
	      (struct want){u, NULL, NULL, NULL, NULL, NULL, "train.service", "unit train.service"});
	check("service v1", V1("/system.slice/train.service"),
	      (struct want){u, NULL, NULL, NULL, NULL, NULL, "train.service", "unit train.service"});
	check("service hybrid (only name=systemd and v2 say it)",
	      "8:memory:/\n1:name=systemd:/system.slice/train.service\n0::/system.slice/train.service\n",
	      (struct want){u, NULL, NULL, NULL, NULL, NULL, "train.service", "unit train.service"});
	/* scopes and the user's service manager are no owner: the user column says whose they are */
	struct want nobody = {0, NULL, NULL, NULL, NULL, NULL, NULL, ""};
	check("login session", "0::/user.slice/user-1000.slice/session-3.scope\n", nobody);
	check("user manager's app scope",
	      "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-org.gnome.Terminal.slice/"
	      "vte-spawn-5c6e0a1b.scope\n", nobody);
	check("user service", "0::/user.slice/user-1000.slice/user@1000.service/app.slice/jupyter.service\n",
	      (struct want){u, NULL, NULL, NULL, NULL, NULL, "jupyter.service", "unit jupyter.service"});
	check("init", "0::/init.scope\n", nobody);
}

static void test_nothing(void)
{
	struct want none = {0, NULL, NULL, NULL, NULL, NULL, NULL, ""};
	check("root of v2", "0::/\n", none);
	check("root of v1", V1("/"), none);
	check("empty text", "", none);
	check("no colons", "garbage without fields\n", none);
	check("a job_ directory outside Slurm", "0::/batch/job_12/step_0\n", none);
	check("63 hex digits are no container", "0::/docker/3f1c0e6a9b2d4c8e7f1a0b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6\n",
	      none);
	check("upper-case hex is no container id", "0::/docker/3F1C0E6A9B2D4C8E7F1A0B2C3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F6A\n",
	      none);
	check("pod outside kubepods", "0::/pod" UID "/x\n", none);
	check("some other sandbox", "4:memory:/process_api/9374c04ebeba00d48cdb5a619b26d7b4\n0::/\n", none);
	gpumon_owner o;
	is_int(gpumon__owner_from_cgroup(NULL, &o), 0, "NULL text: nothing");
}

static void test_pod_names(void)
{
	gpumon_owner o;
	gpumon__owner_from_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
				  ".slice/cri-containerd-" ID ".scope\n", &o);
	is_int(gpumon__owner_pod_names(&o, CGROUP_FIXTURES "/pods"), 1, "pod found in the pod log directory");
	ok(o.present & GPUMON_OWNER_POD_NAMES, "names present");
	is_str(o.k8s_namespace, "ml-team", "namespace");
	is_str(o.pod, "trainer-7f9c6d-x2k4q", "pod name");
	is_str(o.container, "pytorch", "the pod's one container");
	char phrase[128];
	gpumon_owner_describe(&o, phrase, sizeof phrase);
	is_str(phrase, "pod ml-team/trainer-7f9c6d-x2k4q", "phrase with names");

	gpumon__owner_from_cgroup("0::/kubepods/besteffort/pod1e0c6a4d-2b3c-4d5e-8f90-a1b2c3d4e5f6/" ID "\n", &o);
	is_int(gpumon__owner_pod_names(&o, CGROUP_FIXTURES "/pods"), 1, "two-container pod found");
	is_str(o.k8s_namespace, "default", "its namespace");
	is_str(o.pod, "multi-0", "its name");
	is_str(o.container, "", "two containers: which one is not told by the directory, so none");

	gpumon__owner_from_cgroup("0::/kubepods/pod00000000-0000-0000-0000-000000000000/" ID "\n", &o);
	is_int(gpumon__owner_pod_names(&o, CGROUP_FIXTURES "/pods"), 0, "a pod not in the directory");
	ok(!(o.present & GPUMON_OWNER_POD_NAMES) && !o.pod[0], "keeps its uid only");
	gpumon_owner_describe(&o, phrase, sizeof phrase);
	is_str(phrase, "pod 00000000-0000-0000-0000-000000000000", "phrase with the uid");
	gpumon__owner_from_cgroup("0::/kubepods/pod" UID "/" ID "\n", &o);
	is_int(gpumon__owner_pod_names(&o, "/nonexistent/pods"), 0, "no pod directory on the node");
	gpumon__owner_from_cgroup("0::/docker/" ID "\n", &o);
	is_int(gpumon__owner_pod_names(&o, CGROUP_FIXTURES "/pods"), 0, "not a pod: not looked up");
}

/* ---- through the library: GPUMON_PROC_ROOT and real cgroups ------------------------------------ */

static int write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f)
		return -1;
	int bad = fputs(text, f) < 0;
	return fclose(f) != 0 || bad ? -1 : 0;
}

static const gpumon_process *find_pid(const gpumon_process *l, size_t n, unsigned pid)
{
	for (size_t i = 0; i < n; i++)
		if (l[i].pid == pid)
			return &l[i];
	return NULL;
}

/* A fixture /proc with one process in a Slurm step: the library reads it and nothing of ours. */
static void test_proc_root(void)
{
	char root[64], dir[128], path[160];
	snprintf(root, sizeof root, "/tmp/gpumon-procroot-%d", (int)getpid());
	snprintf(dir, sizeof dir, "%s/777", root);
	if (mkdir(root, 0700) != 0 || mkdir(dir, 0700) != 0) {
		ok(0, "cannot make %s: %s", dir, strerror(errno));
		return;
	}
	const char *files[][2] = {
		{"cgroup", "0::/system.slice/slurmstepd.scope/job_31/step_batch/user/task_0\n"},
		{"status", "Name:\tpython\nPPid:\t700\nUid:\t0\t0\t0\t0\n"},
		{"cmdline", "python\0train.py"},
	};
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
		ok(write_file(path, files[i][1]) == 0, "fixture %s", files[i][0]);
	}
	setenv("GPUMON_PROC_ROOT", root, 1);
	char scn[256];
	snprintf(scn, sizeof scn, "gpu 0 total=80GiB used=3GiB\nproc 0 777 used=1GiB\nproc 0 %u used=2GiB\n",
		 (unsigned)getpid());
	gpumon *g = open_fake(scn, 0);
	gpumon_process *l = NULL;
	size_t n = 0;
	is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_OK, "list with GPUMON_PROC_ROOT");
	const gpumon_process *p = find_pid(l, n, 777);
	ok(p && !(p->flags & GPUMON_PROC_FOREIGN), "the fixture's pid is ours");
	ok(p && p->ppid == 700 && (p->flags & GPUMON_PROC_PPID_KNOWN), "its parent from the fixture's status");
	is_str(p ? p->cmdline : NULL, "python", "its command line from the fixture");
	is_str(p ? p->owner.slurm_job : NULL, "31", "its Slurm job");
	is_str(p ? p->owner.slurm_step : NULL, "batch", "its Slurm step");
	p = find_pid(l, n, (unsigned)getpid());
	ok(p && (p->flags & GPUMON_PROC_FOREIGN), "our own pid is not in that /proc: foreign");
	is_int(p ? p->owner.present : 0, GPUMON_OWNER_UNRESOLVED, "and unresolved, nothing guessed");
	char phrase[64];
	gpumon_owner_describe(p ? &p->owner : NULL, phrase, sizeof phrase);
	is_str(phrase, "another PID namespace", "its phrase");
	gpumon_free(l);
	gpumon_destroy(g);
	unsetenv("GPUMON_PROC_ROOT");
	for (size_t i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, files[i][0]);
		unlink(path);
	}
	rmdir(dir);
	rmdir(root);
}

/* The mount point of the cgroup hierarchy of fstype ("cgroup2", or "cgroup" with option opt)
 * from our mountinfo, into out; 0 when there is one. */
static int find_mount(const char *fstype, const char *opt, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return -1;
	char line[1024];
	int found = -1;
	while (found && fgets(line, sizeof line, f)) {
		char point[512], type[64], super[512];
		const char *dash = strstr(line, " - ");
		if (!dash || sscanf(line, "%*s %*s %*s %*s %511s", point) != 1 ||
		    sscanf(dash + 3, "%63s %*s %511s", type, super) != 2 || strcmp(type, fstype) != 0)
			continue;
		if (opt && !strstr(super, opt))
			continue;
		snprintf(out, cap, "%s", point);
		found = 0;
	}
	fclose(f);
	return found;
}

/* The directories a test made, to remove them (deepest first) and only them. */
struct made {
	char dirs[8][512];
	int n;
};

/* Makes base/rel level by level; 0, or -1 with errno. */
static int make_cgroup(const char *base, const char *rel, struct made *m)
{
	char path[512];
	for (const char *s = rel; *s;) {
		const char *e = strchr(s, '/');
		size_t upto = e ? (size_t)(e - rel) : strlen(rel);
		if (snprintf(path, sizeof path, "%s/%.*s", base, (int)upto, rel) >= (int)sizeof path)
			return errno = ENAMETOOLONG, -1;
		if (mkdir(path, 0755) == 0) {
			if (m->n < 8)
				snprintf(m->dirs[m->n++], sizeof m->dirs[0], "%s", path);
		} else if (errno != EEXIST) {
			return -1;
		}
		s = e ? e + 1 : rel + upto;
	}
	return 0;
}

static void remove_cgroups(struct made *m)
{
	while (m->n > 0)
		if (rmdir(m->dirs[--m->n]) != 0)
			printf("# could not remove %s: %s\n", m->dirs[m->n], strerror(errno));
}

/* Starts a child that waits on a pipe, moves it into base/rel, lists it through the fake NVML and
 * checks its owner's phrase (and, when given, its container). */
static void real_cgroup(const char *what, const char *base, const char *rel, const char *phrase,
			const char *container)
{
	struct made m = {.n = 0};
	if (make_cgroup(base, rel, &m) != 0) {
		printf("# skip %s: cannot make %s/%s: %s\n", what, base, rel, strerror(errno));
		remove_cgroups(&m);
		return;
	}
	int fds[2];
	if (pipe(fds) != 0) {
		ok(0, "%s: pipe", what);
		remove_cgroups(&m);
		return;
	}
	pid_t child = fork();
	if (child == 0) {
		char c;
		close(fds[1]);
		while (read(fds[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(fds[0]);
	char procs[600], pid[32];
	snprintf(procs, sizeof procs, "%s/%s/cgroup.procs", base, rel);
	snprintf(pid, sizeof pid, "%d\n", (int)child);
	if (child < 0 || write_file(procs, pid) != 0) {
		printf("# skip %s: cannot move a process into %s: %s\n", what, procs, strerror(errno));
	} else {
		char scn[128];
		snprintf(scn, sizeof scn, "gpu 0 total=80GiB used=2GiB\nproc 0 %d used=1GiB\n", (int)child);
		gpumon *g = open_fake(scn, 0);
		gpumon_process *l = NULL;
		size_t n = 0;
		is_int(gpumon_process_list(g, 0, &l, &n), GPUMON_OK, "%s: list", what);
		const gpumon_process *p = find_pid(l, n, (unsigned)child);
		char got[128] = "";
		gpumon_owner_describe(p ? &p->owner : NULL, got, sizeof got);
		is_str(got, phrase, "%s: the owner the library reports", what);
		if (container)
			is_str(p ? p->owner.container : NULL, container, "%s: its container", what);
		gpumon_free(l);
		gpumon_destroy(g);
	}
	close(fds[1]);
	if (child > 0)
		waitpid(child, NULL, 0);
	remove_cgroups(&m);
}

static void test_real_cgroups(void)
{
	if (geteuid() != 0) {
		printf("# skip real cgroups: not root (uid %u), cannot make cgroups\n", (unsigned)geteuid());
		return;
	}
	char v2[512], v1[512];
	setenv("GPUMON_PODS_DIR", CGROUP_FIXTURES "/pods", 1);
	if (find_mount("cgroup2", NULL, v2, sizeof v2) != 0 || access(v2, W_OK) != 0) {
		printf("# skip real cgroups v2: no writable cgroup2 file system mounted\n");
	} else {
		real_cgroup("v2 kubernetes pod", v2,
			    "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_
			    ".slice/cri-containerd-" ID ".scope",
			    "pod ml-team/trainer-7f9c6d-x2k4q", "pytorch");
		real_cgroup("v2 slurm step", v2, "system.slice/slurmstepd.scope/job_4242/step_0",
			    "slurm job 4242.0", NULL);
	}
	/* a hierarchy of v1 holds a process apart from the v2 one: where the machine has both, the
	   v1 path must win over the v2 root */
	if (find_mount("cgroup", "pids", v1, sizeof v1) != 0 || access(v1, W_OK) != 0)
		printf("# skip real cgroups v1: no writable cgroup v1 pids hierarchy mounted\n");
	else
		real_cgroup("v1 slurm step", v1, "slurm/uid_0/job_77/step_batch", "slurm job 77.batch", NULL);
	unsetenv("GPUMON_PODS_DIR");
}

int main(void)
{
	test_docker();
	test_kubernetes();
	test_podman();
	test_slurm();
	test_systemd();
	test_nothing();
	test_pod_names();
	test_proc_root();
	test_real_cgroups();
	remove_scenario();
	return tap_done();
}
