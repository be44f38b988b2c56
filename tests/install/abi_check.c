/* SPDX-License-Identifier: MIT */
/* abi_check.c — a program built against the installed libgpumon alone, with the flags pkg-config
 * gives: the library is the version of the header it was compiled with, an array of records has
 * the documented stride, and a real call runs (the driver's devices, listed). Prints what it saw;
 * exits 1 on any mismatch. */
#include <gpumon/gpumon.h>

#include <stdio.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)

int main(void)
{
	int bad = 0;
	const char *numbers = STR(GPUMON_VERSION_MAJOR) "." STR(GPUMON_VERSION_MINOR) "." STR(GPUMON_VERSION_PATCH);
	printf("header %s, library %s\n", GPUMON_VERSION, gpumon_version());
	if (strcmp(numbers, GPUMON_VERSION) != 0) {
		fprintf(stderr, "the header's GPUMON_VERSION %s is not its numbers %s\n", GPUMON_VERSION, numbers);
		bad = 1;
	}
	if (strcmp(gpumon_version(), GPUMON_VERSION) != 0) {
		fprintf(stderr, "the library is %s, the header %s\n", gpumon_version(), GPUMON_VERSION);
		bad = 1;
	}
	gpumon_record recs[2];
	size_t stride = (size_t)((char *)&recs[1] - (char *)&recs[0]);
	printf("record stride %zu\n", stride);
	if (stride != GPUMON_RECORD_SIZE) {
		fprintf(stderr, "a record is %zu bytes, GPUMON_RECORD_SIZE says %d\n", stride, GPUMON_RECORD_SIZE);
		bad = 1;
	}
	gpumon *g = NULL;
	int st = gpumon_create(&g);
	if (st != GPUMON_OK) {
		fprintf(stderr, "gpumon_create: %s\n", g ? gpumon_errmsg(g) : gpumon_strerror(st));
		gpumon_destroy(g);
		return 1;
	}
	for (unsigned i = 0; i < gpumon_device_count(g); i++) {
		gpumon_device_info info;
		if (gpumon_device_info_get(g, i, &info) == GPUMON_OK)
			printf("GPU %u: %s %s\n", i, info.name, info.uuid);
	}
	gpumon_destroy(g);
	return bad;
}
