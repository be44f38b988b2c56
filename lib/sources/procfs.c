/* SPDX-License-Identifier: MIT */
/* procfs.c — what /proc tells about a pid that NVML listed: owner, command line and name. A pid
 * that our /proc does not have (the GPU is used from another PID namespace) is flagged, not
 * dropped. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"

/* Reads up to len-1 bytes of a /proc file into buf (NUL-terminated); returns bytes read or -1. */
static ssize_t read_proc_file(unsigned pid, const char *leaf, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%u/%s", pid, leaf);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
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

static void fill_user(gpumon_process *p)
{
	char status[4096];
	if (read_proc_file(p->pid, "status", status, sizeof status) <= 0)
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
	struct passwd pw, *res = NULL;
	char buf[4096];
	if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name)
		copy_truncated(p->user, sizeof p->user, res->pw_name);
	else
		snprintf(p->user, sizeof p->user, "%u", uid);
}

static void fill_cmdline(gpumon_process *p)
{
	char buf[sizeof p->cmdline];
	ssize_t n = read_proc_file(p->pid, "cmdline", buf, sizeof buf);
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
	n = read_proc_file(p->pid, "comm", comm, sizeof comm);
	if (n > 0) {
		comm[strcspn(comm, "\n")] = 0;
		snprintf(p->cmdline, sizeof p->cmdline, "[%s]", comm);
		copy_truncated(p->name, sizeof p->name, comm);
		p->flags |= GPUMON_PROC_CMDLINE_KNOWN | GPUMON_PROC_NAME_KNOWN;
	}
}

void gpumon__procfs_fill(gpumon_process *p)
{
	char path[64];
	struct stat st;
	snprintf(path, sizeof path, "/proc/%u", p->pid);
	if (p->pid == 0 || stat(path, &st) != 0) {
		if (errno == ENOENT || p->pid == 0)
			p->flags |= GPUMON_PROC_FOREIGN;
		return;
	}
	fill_user(p);
	fill_cmdline(p);
}
