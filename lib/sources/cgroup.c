/* SPDX-License-Identifier: MIT */
/* cgroup.c — who a process belongs to, read from the text of /proc/PID/cgroup (container runtime
 * and id, Kubernetes pod, Slurm job and step, systemd unit) and, for a pod, its names from the
 * node's pod log directory. The parser is pure so that fixture strings of every runtime test it. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "../internal.h"

/* One cgroup path component: a pointer into the file's text and its length. */
struct comp {
	const char *s;
	size_t n;
};

static int is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

static int is_hex64(const char *s, size_t n)
{
	if (n != 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!is_hex(s[i]))
			return 0;
	return 1;
}

static int starts(struct comp c, const char *prefix)
{
	size_t k = strlen(prefix);
	return c.n >= k && memcmp(c.s, prefix, k) == 0;
}

static int ends(struct comp c, const char *suffix)
{
	size_t k = strlen(suffix);
	return c.n >= k && memcmp(c.s + c.n - k, suffix, k) == 0;
}

static int contains(struct comp c, const char *needle)
{
	size_t k = strlen(needle);
	for (size_t i = 0; i + k <= c.n; i++)
		if (memcmp(c.s + i, needle, k) == 0)
			return 1;
	return 0;
}

static void put(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, s, n);
	dst[n] = 0;
}

/* A pod UID as the kubelet writes it in a cgroup name: 36 characters with dashes (cgroupfs) or
 * underscores (systemd, where '-' separates the slice's levels), or the 32 hex digits of a static
 * pod's hash. Copies it with dashes into out (40 bytes); 1 when it is one. */
static int take_pod_uid(const char *s, size_t n, char *out)
{
	if (n != 36 && n != 32)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!is_hex(c) && c != '-' && c != '_')
			return 0;
		out[i] = c == '_' ? '-' : c;
	}
	out[n] = 0;
	return 1;
}

/* The pod UID in a component under kubepods: "pod<uid>" (cgroupfs) or "...-pod<uid>.slice"
 * (systemd); 1 when c names one. */
static int pod_uid_of(struct comp c, char *out)
{
	if (starts(c, "pod"))
		return take_pod_uid(c.s + 3, c.n - 3, out);
	if (!ends(c, ".slice"))
		return 0;
	size_t n = c.n - 6;
	for (size_t i = n; i >= 4; i--)
		if (memcmp(c.s + i - 4, "-pod", 4) == 0)
			return take_pod_uid(c.s + i, n - i, out);
	return 0;
}

/* Container scopes as each runtime names them under systemd, or under cgroupfs with a prefix. The
 * conmon scopes hold the runtime's monitor of that container, so they name the same container. */
static const struct {
	const char *prefix, *runtime;
} scope_prefixes[] = {
	{"docker-", "docker"},       {"cri-containerd-", "containerd"}, {"nerdctl-", "containerd"},
	{"crio-conmon-", "cri-o"},   {"crio-", "cri-o"},                {"libpod-conmon-", "podman"},
	{"libpod-", "podman"},
};

/* The runtime named by the middle part of containerd's "SLICE:PREFIX:ID" form (cgroup v1 with the
 * systemd driver), or NULL. */
static const char *colon_runtime(const char *s, size_t n)
{
	if (n == 14 && memcmp(s, "cri-containerd", 14) == 0)
		return "containerd";
	if (n == 4 && memcmp(s, "crio", 4) == 0)
		return "cri-o";
	if (n == 6 && memcmp(s, "docker", 6) == 0)
		return "docker";
	return NULL;
}

struct parsed {
	gpumon_owner o;
	int pod, container, slurm_root, job, step;
	struct comp unit;
};

/* A container id in component c (prev: the component above it, for a bare id); 1 when found. A
 * bare id says its runtime only through its parent: under kubepods (cgroupfs driver) containerd
 * and dockershim write the same path, so the runtime stays "" (unknown) rather than guessed. */
static int container_of(struct comp c, struct comp prev, struct parsed *st)
{
	const char *runtime = NULL;
	struct comp id = c;
	const char *colon = memchr(c.s, ':', c.n);
	if (colon) { /* kubepods-...-pod<uid>.slice:cri-containerd:<id> */
		const char *second = memchr(colon + 1, ':', (size_t)(c.s + c.n - colon - 1));
		if (!second)
			return 0;
		runtime = colon_runtime(colon + 1, (size_t)(second - colon - 1));
		id.s = second + 1;
		id.n = (size_t)(c.s + c.n - id.s);
		if (!runtime || !is_hex64(id.s, id.n))
			return 0;
	} else if (is_hex64(c.s, c.n)) {
		if (prev.n == 6 && memcmp(prev.s, "docker", 6) == 0)
			runtime = "docker";
		else
			runtime = "";
	} else {
		if (ends(id, ".scope"))
			id.n -= 6;
		for (size_t i = 0; i < sizeof scope_prefixes / sizeof scope_prefixes[0] && !runtime; i++)
			if (starts(id, scope_prefixes[i].prefix)) {
				size_t k = strlen(scope_prefixes[i].prefix);
				if (!is_hex64(id.s + k, id.n - k))
					return 0;
				runtime = scope_prefixes[i].runtime;
				id.s += k;
				id.n -= k;
			}
		if (!runtime)
			return 0;
	}
	put(st->o.runtime, sizeof st->o.runtime, runtime, strlen(runtime));
	put(st->o.container_id, sizeof st->o.container_id, id.s, id.n);
	st->container = 1;
	return 1;
}

/* Slurm's step names: a number, or batch / extern / interactive (and what later versions add). */
static int is_step_name(const char *s, size_t n)
{
	if (n == 0 || n >= sizeof((gpumon_owner *)0)->slurm_step)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') || s[i] == '_'))
			return 0;
	return 1;
}

static int is_digits(const char *s, size_t n)
{
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* Slurm's cgroup plugin: /slurm[_NODE]/uid_U/job_J/step_S (v1) and
 * /system.slice/[NODE_]slurmstepd.scope/job_J/step_S (v2); a job_ only counts below a slurm
 * component, so that another tool's "job_1" directory is not taken for a Slurm job. */
static void slurm_of(struct comp c, struct parsed *st)
{
	if (starts(c, "slurm") || contains(c, "_slurmstepd.scope")) {
		st->slurm_root = 1;
		return;
	}
	if (!st->slurm_root)
		return;
	if (!st->job && starts(c, "job_") && is_digits(c.s + 4, c.n - 4) &&
	    c.n - 4 < sizeof st->o.slurm_job) {
		put(st->o.slurm_job, sizeof st->o.slurm_job, c.s + 4, c.n - 4);
		st->job = 1;
	} else if (st->job && !st->step && starts(c, "step_") && is_step_name(c.s + 5, c.n - 5)) {
		put(st->o.slurm_step, sizeof st->o.slurm_step, c.s + 5, c.n - 5);
		st->step = 1;
	}
}

/* c up to its first colon: the slice part of containerd's "SLICE:PREFIX:ID" form. */
static struct comp colon_free(struct comp c)
{
	const char *colon = memchr(c.s, ':', c.n);
	if (colon)
		c.n = (size_t)(colon - c.s);
	return c;
}

/* Reads one cgroup path (the text after the second colon of a line) into st. */
static void parse_path(const char *path, size_t len, struct parsed *st)
{
	struct comp prev = {"", 0};
	int in_kube = 0;
	size_t i = 0;
	while (i < len) {
		while (i < len && path[i] == '/')
			i++;
		size_t j = i;
		while (j < len && path[j] != '/')
			j++;
		struct comp c = {path + i, j - i};
		if (c.n == 0)
			break;
		if (contains(c, "kubepods"))
			in_kube = 1;
		char uid[40];
		if (in_kube && !st->pod && pod_uid_of(colon_free(c), uid)) {
			memcpy(st->o.pod_uid, uid, sizeof uid);
			st->pod = 1;
		}
		/* the deepest container wins: a container started inside another is the process's own */
		if (!container_of(c, prev, st)) {
			slurm_of(c, st);
			/* a service is an owner (train.service, jupyter.service); a scope is not (a login
			   session, a terminal's app scope, init: the user column says whose it is), nor a
			   user's service manager */
			if (ends(c, ".service") && !starts(c, "user@"))
				st->unit = c;
		}
		prev = c;
		i = j;
	}
}

/* What a line's owner tells, most specific first, to pick one line of a hybrid (v1 + v2) file. */
static int rank(const struct parsed *st)
{
	return st->pod ? 4 : st->job ? 3 : st->container ? 2 : st->unit.n ? 1 : 0;
}

static void finish(struct parsed *st)
{
	gpumon_owner *o = &st->o;
	if (st->pod)
		o->present |= GPUMON_OWNER_POD;
	if (st->container)
		o->present |= GPUMON_OWNER_CONTAINER;
	else
		o->runtime[0] = o->container_id[0] = 0;
	if (st->job)
		o->present |= GPUMON_OWNER_SLURM;
	else
		o->slurm_step[0] = 0;
	/* the unit only when nothing more specific holds the process: the scope or service around a
	   container or a Slurm step is the runtime's, not the owner's */
	if (!o->present && st->unit.n) {
		put(o->unit, sizeof o->unit, st->unit.s, st->unit.n);
		o->present |= GPUMON_OWNER_UNIT;
	}
}

int gpumon__owner_from_cgroup(const char *text, gpumon_owner *out)
{
	memset(out, 0, sizeof *out);
	if (!text)
		return 0;
	struct parsed best;
	memset(&best, 0, sizeof best);
	int best_rank = 0;
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);
		/* ID:CONTROLLERS:PATH; the path may itself hold colons (containerd's v1 form) */
		const char *c1 = memchr(line, ':', n);
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(line + n - c1 - 1)) : NULL;
		if (c2) {
			struct parsed st;
			memset(&st, 0, sizeof st);
			parse_path(c2 + 1, (size_t)(line + n - c2 - 1), &st);
			int r = rank(&st);
			if (r > best_rank) {
				best = st;
				best_rank = r;
			}
		}
		line += n;
		if (*line)
			line++;
	}
	finish(&best);
	*out = best.o;
	return (int)out->present;
}

/* The number of directories in dir (. and .. aside), stopping at 2; the one's name into first. */
static int count_dirs(const char *dir, char *first, size_t cap)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while (n < 2 && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
			continue;
		char path[4096];
		struct stat st;
		if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path ||
		    stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		if (n++ == 0)
			put(first, cap, e->d_name, strlen(e->d_name));
	}
	closedir(d);
	return n;
}

/* Fills namespace, pod and (with one container) container from an entry NS_POD_UID of dir. Names
 * that do not fit their field are left out rather than cut (a cut name would name another pod). */
static int take_entry(gpumon_owner *o, const char *dir, const char *name)
{
	const char *u1 = strchr(name, '_'), *u2 = strrchr(name, '_');
	if (!u1 || u1 == u2 || u1 == name || u2 == u1 + 1)
		return 0;
	size_t ns = (size_t)(u1 - name), pod = (size_t)(u2 - u1 - 1);
	if (ns >= sizeof o->k8s_namespace || pod >= sizeof o->pod)
		return 0;
	put(o->k8s_namespace, sizeof o->k8s_namespace, name, ns);
	put(o->pod, sizeof o->pod, u1 + 1, pod);
	o->present |= GPUMON_OWNER_POD_NAMES;
	char path[4096], container[256] = "";
	if (snprintf(path, sizeof path, "%s/%s", dir, name) < (int)sizeof path &&
	    count_dirs(path, container, sizeof container) == 1 && strlen(container) < sizeof o->container)
		put(o->container, sizeof o->container, container, strlen(container));
	return 1;
}

int gpumon__owner_pod_names(gpumon_owner *o, const char *pods_dir)
{
	if (!(o->present & GPUMON_OWNER_POD) || !pods_dir || !pods_dir[0])
		return 0;
	DIR *d = opendir(pods_dir);
	if (!d)
		return 0;
	size_t ul = strlen(o->pod_uid);
	int found = 0;
	struct dirent *e;
	while (!found && (e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		if (n > ul + 1 && e->d_name[n - ul - 1] == '_' && strcmp(e->d_name + n - ul, o->pod_uid) == 0)
			found = take_entry(o, pods_dir, e->d_name);
	}
	closedir(d);
	return found;
}
