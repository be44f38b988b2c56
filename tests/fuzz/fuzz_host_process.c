/* SPDX-License-Identifier: MIT */
/* fuzz_host_process.c — libFuzzer target for the library's /proc readers (gpumon_host_process_read):
 * the input, cut at its first 0xff byte, becomes /proc/PID/stat and /proc/PID/environ (the rest also
 * /proc/PID/status) of a /proc of its own (GPUMON_PROC_ROOT). Whatever the files hold, the call
 * returns, its texts are terminated, its ranks are -1 or a count, and nothing is read past them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static char root[64], dir[96];

/* The /proc of its own is removed at exit, as a fuzz run leaves nothing behind. */
static void cleanup(void)
{
	static const char *const names[] = {"stat", "environ", "status"};
	char path[128];
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		unlink(path);
	}
	rmdir(dir);
	rmdir(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	snprintf(root, sizeof root, "/tmp/gpumon-fuzz-proc-%d", (int)getpid());
	snprintf(dir, sizeof dir, "%s/4242", root);
	mkdir(root, 0700);
	mkdir(dir, 0700);
	setenv("GPUMON_PROC_ROOT", root, 1);
	atexit(cleanup);
	return 0;
}

static void put(const char *name, const unsigned char *data, size_t size)
{
	char path[128];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		abort();
	if (size && fwrite(data, 1, size, f) != size)
		abort();
	fclose(f);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	const unsigned char *cut = memchr(data, 0xff, size);
	size_t a = cut ? (size_t)(cut - data) : size, b = cut ? size - a - 1 : 0;
	put("stat", data, a);
	put("environ", cut ? cut + 1 : data, b);
	put("status", cut ? cut + 1 : data, b);
	gpumon_host_process h;
	memset(&h, 0x5a, sizeof h);
	h.size = sizeof h;
	int st = gpumon_host_process_read(4242, GPUMON_HOST_USER | GPUMON_HOST_RANK, &h);
	if (st == GPUMON_OK) {
		if (!memchr(h.user, 0, sizeof h.user) || !memchr(h.rank.job_id, 0, sizeof h.rank.job_id) ||
		    !memchr(h.rank.launcher, 0, sizeof h.rank.launcher))
			abort();
		if (h.rank.rank < -1 || h.rank.local_rank < -1 || h.rank.world_size < -1 || h.rank.node_rank < -1)
			abort();
		if (h.pid != 4242)
			abort();
	}
	return 0;
}
