/* SPDX-License-Identifier: MIT */
/* test_tfevents.c — the TensorBoard writer against golden bytes (REFERENCE.md), its file naming,
 * bad arguments, and an unwritable directory. The Python tests decode the same files with the
 * official protobuf classes. */
#include <dirent.h>

#include "gpumon/gpumon.h"
#include "tap.h"

/* Reads the whole file at path into buf; returns its size or -1. */
static long slurp(const char *path, unsigned char *buf, size_t cap)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, cap, f);
	fclose(f);
	return (long)n;
}

static int unhex(const char *hex, unsigned char *out)
{
	int n = 0;
	for (const char *s = hex; *s; s++) {
		if (*s == ' ')
			continue;
		unsigned v;
		sscanf(s, "%2x", &v);
		out[n++] = (unsigned char)v;
		s++;
	}
	return n;
}

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "events.out.tfevents.", 20))
			n++;
	closedir(d);
	return n;
}

int main(void)
{
	char dir[] = "/tmp/gpumon-tfevents-XXXXXX";
	ok(mkdtemp(dir) != NULL, "a scratch directory");
	char sub[256];
	snprintf(sub, sizeof sub, "%s/a/b", dir);

	gpumon_tfevents *w = NULL;
	is_int(gpumon_tfevents_create(sub, 1.0, &w), 0, "open creates the missing directories");
	const char *path = gpumon_tfevents_path(w);
	char want_prefix[300];
	snprintf(want_prefix, sizeof want_prefix, "%s/events.out.tfevents.0000000001.", sub);
	ok(!strncmp(path, want_prefix, strlen(want_prefix)), "file name: %s", path);
	is_int(gpumon_tfevents_scalar(w, "gpu/mem", 5, 1.0, 0.5f), 0, "a scalar");
	is_int(gpumon_tfevents_scalar(w, "", 5, 1.0, 0.5f), GPUMON_E_INVAL, "an empty tag is refused");
	ok(strstr(gpumon_tfevents_errmsg(w), "tag") != NULL, "the message names the tag");
	is_int(gpumon_tfevents_scalar(w, "x", -1, 1.0, 0.5f), GPUMON_E_INVAL, "a negative step is refused");
	is_int(gpumon_tfevents_flush(w), 0, "flush");

	unsigned char got[512], want[512];
	long n = slurp(path, got, sizeof got);
	int wn = unhex(
	    "1800000000000000 a37f4b22 09000000000000f03f1a0d627261696e2e4576656e743a32 86bf577a"
	    "1d00000000000000 602fdf23 09000000000000f03f10052a100a0e0a076770752f6d656d150000003f 28e85066",
	    want);
	is_int(n, wn, "the file holds exactly the two records");
	ok(n == wn && !memcmp(got, want, (size_t)wn), "byte for byte the golden records");

	/* a second writer in the same second never shares the file */
	gpumon_tfevents *w2 = NULL;
	is_int(gpumon_tfevents_create(sub, 1.0, &w2), 0, "a second writer");
	ok(strcmp(gpumon_tfevents_path(w2), path) != 0, "gets another file: %s", gpumon_tfevents_path(w2));
	is_int(count_files(sub), 2, "two files");
	/* destroy reports nothing: a failed write shows in flush, which comes first */
	is_int(gpumon_tfevents_flush(w2), 0, "flush the second");
	gpumon_tfevents_destroy(w2);
	is_int(gpumon_tfevents_scalar(w, "gpu/mem", 6, 2.0, 0.25f), 0, "a scalar before destroy");
	char kept[300];
	snprintf(kept, sizeof kept, "%s", path); /* the writer's copy goes with it */
	gpumon_tfevents_destroy(w);
	ok(slurp(kept, got, sizeof got) > n, "destroy writes what was buffered");
	gpumon_tfevents_destroy(NULL); /* a no-op */

	/* a directory that cannot be created */
	char bad[300];
	snprintf(bad, sizeof bad, "%s/file", dir);
	FILE *f = fopen(bad, "w");
	fclose(f);
	snprintf(bad, sizeof bad, "%s/file/sub", dir);
	w = NULL;
	is_int(gpumon_tfevents_create(bad, 0, &w), GPUMON_E_IO, "a path through a file is refused");
	ok(w && strstr(gpumon_tfevents_errmsg(w), bad), "the message names it: %s",
	   w ? gpumon_tfevents_errmsg(w) : "");
	gpumon_tfevents_destroy(w);
	w = NULL;
	is_int(gpumon_tfevents_create("", 0, &w), GPUMON_E_INVAL, "an empty directory name is refused");
	gpumon_tfevents_destroy(w);

	remove_scenario(); /* tap.h's; no scenario was written */
	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ok(system(cmd) == 0, "clean up");
	return tap_done();
}
