/* SPDX-License-Identifier: MIT */
/* fit_dir.c — a `gpumon fit`'s run directory and its owner file ("PID START", the process and its
 * start time in clock ticks as /proc says them: a reused pid has another start), and the sweep of
 * the directories of fits that were killed before they could remove theirs. */
#include "fit_dir.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

#include "cli.h"

#define OWNER ".gpumon-fit-owner"
#define PREFIX "gpumon-fit-"

void fit_dir_owner_path(const char *dir, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" OWNER, dir);
}

/* Whether the owner file in dir names a process that is gone (1), one that runs (0), or cannot be
 * read (-1: not a fit's directory as this version makes them, or kept). */
static int owner_gone(const char *dir)
{
	char path[PATH_MAX + 32];
	fit_dir_owner_path(dir, path, sizeof path);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	unsigned pid = 0;
	uint64_t start = 0;
	int got = fscanf(f, "%u %" SCNu64, &pid, &start);
	fclose(f);
	if (got != 2 || !pid)
		return -1;
	gpumon_host_process h = {.size = sizeof h};
	if (gpumon_host_process_read(pid, 0, &h) != GPUMON_OK)
		return 1;
	return h.start_ticks != start;
}

/* The files a fit leaves are all directly in its directory: each removed, then the directory. */
static int remove_all(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	struct dirent *e;
	char path[PATH_MAX + 300];
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	return rmdir(dir);
}

void fit_dir_sweep(const char *tmp)
{
	DIR *d = opendir(tmp);
	if (!d)
		return;
	struct dirent *e;
	char dir[PATH_MAX];
	while ((e = readdir(d)) != NULL) {
		struct stat st;
		if (strncmp(e->d_name, PREFIX, strlen(PREFIX)))
			continue;
		snprintf(dir, sizeof dir, "%s/%s", tmp, e->d_name);
		if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (owner_gone(dir) == 1 && remove_all(dir) == 0)
			fprintf(stderr, "%s: fit: removed %s, the runs of a gpumon fit that ended without removing them\n",
				cli_progname, dir);
	}
	closedir(d);
}

int fit_dir_make(const char *tmp, char *dir, size_t len)
{
	snprintf(dir, len, "%s/" PREFIX "XXXXXX", tmp);
	char asked[PATH_MAX];
	snprintf(asked, sizeof asked, "%s", dir);
	if (!mkdtemp(dir)) {
		int err = errno;
		snprintf(dir, len, "%s", asked); /* mkdtemp fills the Xs even when it fails */
		errno = err;
		return -1;
	}
	gpumon_host_process h = {.size = sizeof h};
	char path[PATH_MAX + 32];
	fit_dir_owner_path(dir, path, sizeof path);
	FILE *f = gpumon_host_process_read((unsigned)getpid(), 0, &h) == GPUMON_OK ? fopen(path, "w") : NULL;
	if (f) {
		fprintf(f, "%u %" PRIu64 "\n", h.pid, h.start_ticks);
		fclose(f);
	}
	return 0;
}

void fit_dir_keep(const char *dir)
{
	char path[PATH_MAX + 32];
	fit_dir_owner_path(dir, path, sizeof path);
	unlink(path);
}
