/* SPDX-License-Identifier: MIT */
/* fuzz_device_spec.c — libFuzzer target for gpumon_device_find(), the parser behind -i: any bytes
 * as a GPU name, against the fake NVML with two GPUs. */
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static gpumon *handle(void)
{
	static gpumon *g;
	if (!g) {
		setenv("GPUMON_NVML_LIBRARY", FAKE_NVML_LIB, 1);
		setenv("FAKE_NVML_SCENARIO", FAKE_SCENARIO, 1);
		if (gpumon_create(&g) != GPUMON_OK || gpumon_device_count(g) != 2)
			abort(); /* the harness itself is broken */
	}
	return g;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	gpumon *g = handle();
	char *spec = malloc(size + 1);
	if (!spec)
		return 0;
	memcpy(spec, data, size);
	spec[size] = 0;
	unsigned dev = 99;
	int st = gpumon_device_find(g, spec, &dev);
	if (st == GPUMON_OK && dev >= 2)
		abort(); /* a device outside the table */
	if (st != GPUMON_OK && gpumon_errmsg(g)[0] == 0 && st != GPUMON_E_INVAL)
		abort(); /* a failure without a message */
	free(spec);
	return 0;
}
