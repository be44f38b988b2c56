/* SPDX-License-Identifier: MIT */
/* procfs.c — what /proc tells about a pid that NVML listed: user, command line, name and owner
 * (container, pod, Slurm job, unit). A pid that our /proc does not have (the GPU is used from
 * another PID namespace) is flagged, not dropped. /proc is GPUMON_PROC_ROOT when set (the host's
 * /proc mounted into an exporter's container). */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"

const char *gpumon__proc_root(void)
{
	const char *r = getenv("GPUMON_PROC_ROOT");
	return r && r[0] ? r : "/proc";
}

/* The path of leaf ("" for the pid's directory) of pid under the proc root; 0, or -1 when it
 * does not fit. */
static int proc_path(char *path, size_t cap, unsigned pid, const char *leaf)
{
	int n = snprintf(path, cap, "%s/%u%s%s", gpumon__proc_root(), pid, leaf[0] ? "/" : "", leaf);
	return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int gpumon__procfs_open(unsigned pid, const char *leaf)
{
	char path[4096];
	if (proc_path(path, sizeof path, pid, leaf) != 0) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Reads up to len-1 bytes of a /proc file into buf (NUL-terminated); returns bytes read or -1. */
ssize_t gpumon__procfs_read(unsigned pid, const char *leaf, char *buf, size_t len)
{
	int fd = gpumon__procfs_open(pid, leaf);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < len - 1) {
		ssize_t r = read(fd, buf + got, len - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	return (ssize_t)got;
}

/* Copies a string, truncated to fit (deliberately: names longer than the field are cut). */
static void copy_truncated(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);
	memcpy(dst, src, n);
	dst[n] = 0;
}

void gpumon__user_name(unsigned uid, char *user, size_t len)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name)
		copy_truncated(user, len, res->pw_name);
	else
		snprintf(user, len, "%u", uid);
}

static void fill_user(gpumon_process *p)
{
	char status[4096];
	if (gpumon__procfs_read(p->pid, "status", status, sizeof status) <= 0)
		return;
	const char *pp = strstr(status, "\nPPid:");
	if (pp && sscanf(pp + 6, "%u", &p->ppid) == 1)
		p->flags |= GPUMON_PROC_PPID_KNOWN;
	const char *line = strstr(status, "\nUid:");
	unsigned uid;
	if (!line || sscanf(line + 5, "%u", &uid) != 1)
		return;
	p->uid = uid;
	p->flags |= GPUMON_PROC_USER_KNOWN;
	gpumon__user_name(uid, p->user, sizeof p->user);
}

static void fill_cmdline(gpumon_process *p)
{
	char buf[sizeof p->cmdline];
	ssize_t n = gpumon__procfs_read(p->pid, "cmdline", buf, sizeof buf);
	if (n > 0) {
		/* argv[0] is the process name when NVML does not give one */
		copy_truncated(p->name, sizeof p->name, buf);
		p->flags |= GPUMON_PROC_NAME_KNOWN;
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == 0 || buf[i] == '\n' || buf[i] == '\t')
				buf[i] = ' ';
		while (n > 0 && buf[n - 1] == ' ')
			buf[--n] = 0;
		memcpy(p->cmdline, buf, (size_t)n + 1);
		p->flags |= GPUMON_PROC_CMDLINE_KNOWN;
		return;
	}
	/* no command line (a zombie, or a kernel thread): show the kernel's name in brackets */
	char comm[64];
	n = gpumon__procfs_read(p->pid, "comm", comm, sizeof comm);
	if (n > 0) {
		comm[strcspn(comm, "\n")] = 0;
		snprintf(p->cmdline, sizeof p->cmdline, "[%s]", comm);
		copy_truncated(p->name, sizeof p->name, comm);
		p->flags |= GPUMON_PROC_CMDLINE_KNOWN | GPUMON_PROC_NAME_KNOWN;
	}
}

/* The owner from the pid's cgroup file, and a pod's names from the node's pod log directory
 * (GPUMON_PODS_DIR, default /var/log/pods) when it is there to read. */
static void fill_owner(gpumon_process *p)
{
	/* a process in many v1 hierarchies with long paths still fits: 13 lines of ~300 bytes */
	char text[8192];
	if (gpumon__procfs_read(p->pid, "cgroup", text, sizeof text) <= 0)
		return;
	if (!gpumon__owner_from_cgroup(text, &p->owner))
		return;
	const char *pods = getenv("GPUMON_PODS_DIR");
	gpumon__owner_pod_names(&p->owner, pods && pods[0] ? pods : "/var/log/pods");
}

void gpumon__procfs_fill(gpumon_process *p)
{
	char path[4096];
	struct stat st;
	memset(&p->owner, 0, sizeof p->owner);
	memset(&p->rank, 0, sizeof p->rank);
	p->rank.rank = p->rank.local_rank = p->rank.world_size = p->rank.node_rank = -1;
	int unreadable = p->pid == 0 || proc_path(path, sizeof path, p->pid, "") != 0;
	if (unreadable || stat(path, &st) != 0) {
		if (unreadable || errno == ENOENT) {
			p->flags |= GPUMON_PROC_FOREIGN;
			p->owner.present = GPUMON_OWNER_UNRESOLVED;
		}
		return;
	}
	fill_user(p);
	fill_cmdline(p);
	fill_owner(p);
	if (gpumon__env_rank(p->pid, &p->rank) == 0)
		p->flags |= GPUMON_PROC_RANK_KNOWN;
}
