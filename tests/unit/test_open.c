/* SPDX-License-Identifier: MIT */
/* test_open.c — opening libgpumon against the fake NVML: missing library, failing driver, 0, 1
 * and 16 GPUs, a GPU lost from the start, and finding devices by index, UUID and PCI bus id. */
#include "tap.h"

#include <gpumon/gpumon.h>

#define H200_LINE                                                                                     \
	"gpu 0 name=\"NVIDIA H200\" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 " \
	"total=150754820096 reserved=644939776 used=0\n"

static void test_no_library(void)
{
	setenv("GPUMON_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
	gpumon *g = NULL;
	int st = gpumon_create(&g);
	is_int(st, GPUMON_E_NO_LIBRARY, "missing library: GPUMON_E_NO_LIBRARY");
	ok(g != NULL, "a handle holds the message");
	ok(strstr(gpumon_errmsg(g), "/nonexistent/libnvidia-ml.so.1") != NULL, "message names the file: %s",
	   gpumon_errmsg(g));
	is_int(gpumon_device_count(g), 0, "no devices on a failed handle");
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s), GPUMON_E_DRIVER, "sample on a failed handle");
	char buf[32];
	is_int(gpumon_driver_version(g, buf, sizeof buf), GPUMON_E_DRIVER, "driver version on a failed handle");
	gpumon_destroy(g);
	gpumon_destroy(NULL);
	ok(1, "gpumon_destroy(NULL) is a no-op");
}

static void test_not_nvml(void)
{
	/* a real shared library that is not NVML: every required symbol missing */
	setenv("GPUMON_NVML_LIBRARY", "libm.so.6", 1);
	gpumon *g = NULL;
	is_int(gpumon_create(&g), GPUMON_E_DRIVER, "a library without NVML symbols is refused");
	ok(strstr(gpumon_errmsg(g), "nvmlInit") != NULL, "message names the missing symbol: %s", gpumon_errmsg(g));
	gpumon_destroy(g);
}

static void test_init_error(void)
{
	use_scenario("init_error DRIVER_NOT_LOADED\n" H200_LINE, 0);
	gpumon *g = NULL;
	is_int(gpumon_create(&g), GPUMON_E_DRIVER, "driver not loaded: GPUMON_E_DRIVER");
	ok(strstr(gpumon_errmsg(g), "initialisation") != NULL, "message says init failed: %s", gpumon_errmsg(g));
	gpumon_destroy(g);
}

static void test_zero_gpus(void)
{
	use_scenario("# no GPU\n", 0);
	gpumon *g = NULL;
	is_int(gpumon_create(&g), GPUMON_OK, "0 GPUs opens");
	is_int(gpumon_device_count(g), 0, "count 0");
	gpumon_device_info d;
	is_int(gpumon_device_info_get(g, 0, &d), GPUMON_E_NOT_FOUND, "info of device 0: not found");
	unsigned dev;
	is_int(gpumon_device_find(g, "0", &dev), GPUMON_E_NOT_FOUND, "find 0: not found");
	gpumon_destroy(g);
}

static void test_one_gpu(void)
{
	use_scenario("driver 580.159.04\nnvml 12.580.159.04\n" H200_LINE, 0);
	gpumon *g = NULL;
	is_int(gpumon_create(&g), GPUMON_OK, "one H200 opens");
	is_int(gpumon_device_count(g), 1, "count 1");
	gpumon_device_info d;
	is_int(gpumon_device_info_get(g, 0, &d), GPUMON_OK, "info");
	is_str(d.name, "NVIDIA H200", "name");
	is_str(d.uuid, "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51", "uuid");
	is_str(d.pci_bus_id, "00000000:00:06.0", "bus id in nvidia-smi's form");
	is_int(d.memory_total_bytes, 150754820096LL, "total bytes");
	is_int(d.present, GPUMON_INFO_NAME | GPUMON_INFO_UUID | GPUMON_INFO_PCI_BUS_ID | GPUMON_INFO_MEMORY_TOTAL |
				  GPUMON_INFO_MIG_MODE, /* MIG Disabled, as the H200 reports it */
	       "all info present");
	is_int(d.lost, 0, "not lost");
	char v[96];
	is_int(gpumon_driver_version(g, v, sizeof v), GPUMON_OK, "driver version");
	is_str(v, "580.159.04", "driver version text");
	is_int(gpumon_nvml_version(g, v, sizeof v), GPUMON_OK, "nvml version");
	is_str(v, "12.580.159.04", "nvml version text");
	char tiny[4];
	gpumon_driver_version(g, tiny, sizeof tiny);
	is_str(tiny, "580", "driver version truncated to the buffer");

	unsigned dev = 9;
	is_int(gpumon_device_find(g, "0", &dev), GPUMON_OK, "find by index");
	is_int(dev, 0, "index 0");
	is_int(gpumon_device_find(g, "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51", &dev), GPUMON_OK, "find by UUID");
	is_int(gpumon_device_find(g, "gpu-04B38C5D-59F0-8f43-a379-7bd1cb7dae51", &dev), GPUMON_OK,
	       "UUID is case-insensitive");
	is_int(gpumon_device_find(g, "GPU-04b38c5d", &dev), GPUMON_OK, "find by UUID prefix");
	is_int(gpumon_device_find(g, "04b38c5d", &dev), GPUMON_OK, "prefix without GPU-");
	is_int(gpumon_device_find(g, "GPU-04b3", &dev), GPUMON_E_NOT_FOUND, "a 4-character prefix is too short");
	is_int(gpumon_device_find(g, "00000000:00:06.0", &dev), GPUMON_OK, "find by bus id");
	is_int(gpumon_device_find(g, "0000:00:06.0", &dev), GPUMON_OK, "find by legacy bus id");
	is_int(gpumon_device_find(g, " 00:06.0 ", &dev), GPUMON_OK, "find by short bus id with blanks");
	is_int(gpumon_device_find(g, "00:07.0", &dev), GPUMON_E_NOT_FOUND, "other bus id: not found");
	ok(strstr(gpumon_errmsg(g), "00:07.0") != NULL, "message names the spec: %s", gpumon_errmsg(g));
	is_int(gpumon_device_find(g, "1", &dev), GPUMON_E_NOT_FOUND, "index 1 of 1: not found");
	is_int(gpumon_device_find(g, "99999999999999999999", &dev), GPUMON_E_NOT_FOUND, "huge index: not found");
	is_int(gpumon_device_find(g, "", &dev), GPUMON_E_INVAL, "empty spec");
	is_int(gpumon_device_find(g, "GPU-zzzzzzzz", &dev), GPUMON_E_NOT_FOUND, "unknown UUID");
	is_int(gpumon_device_find(g, NULL, &dev), GPUMON_E_INVAL, "NULL spec");
	gpumon_destroy(g);
}

static void test_sixteen_gpus_and_lost(void)
{
	char text[8192] = "";
	for (int i = 0; i < 16; i++) {
		char line[256];
		snprintf(line, sizeof line, "gpu %d name=\"GPU %d\" uuid=GPU-%08x-0000-0000-0000-00000000%04x total=80GiB used=%dGiB\n",
			 i, i, 0xabc00000u + (unsigned)(i < 2 ? 0 : i), i, i);
		strcat(text, line);
	}
	strcat(text, "lost 3\n");
	use_scenario(text, 0);
	gpumon *g = NULL;
	is_int(gpumon_create(&g), GPUMON_OK, "16 GPUs, one lost, open");
	is_int(gpumon_device_count(g), 16, "count 16 (the lost one kept)");
	gpumon_device_info d;
	gpumon_device_info_get(g, 15, &d);
	is_str(d.name, "GPU 15", "name of the 16th");
	gpumon_device_info_get(g, 3, &d);
	is_int(d.lost, 1, "GPU 3 marked lost at open");
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 3, GPUMON_F_MEMORY, &s), GPUMON_E_LOST, "sample of the lost GPU");
	is_int(gpumon_device_sample_read(g, 4, GPUMON_F_MEMORY, &s), GPUMON_OK, "the next GPU still answers");
	is_int(s.memory_used_bytes, 4LL << 30, "GPU 4 used 4 GiB");
	unsigned dev;
	is_int(gpumon_device_find(g, "GPU-abc00000", &dev), GPUMON_E_AMBIGUOUS, "prefix shared by two GPUs");
	ok(strstr(gpumon_errmsg(g), "2 GPUs") != NULL, "message counts the matches: %s", gpumon_errmsg(g));
	is_int(gpumon_device_find(g, "GPU-abc00000-0000-0000-0000-000000000001", &dev), GPUMON_OK, "whole UUID wins");
	is_int(dev, 1, "GPU 1");
	gpumon_destroy(g);
}

/* A handle's message is its own: a failure on one handle leaves another's as it was. */
static void test_errmsg_per_handle(void)
{
	gpumon *a = NULL, *b = NULL;
	use_scenario("gpu 0 total=80GiB\n", 0);
	is_int(gpumon_create(&a) | gpumon_create(&b), GPUMON_OK, "two handles");
	unsigned dev;
	is_int(gpumon_device_find(a, "7", &dev), GPUMON_E_NOT_FOUND, "a failure on one handle");
	ok(strstr(gpumon_errmsg(a), "7") != NULL, "its message names the spec: %s", gpumon_errmsg(a));
	is_str(gpumon_errmsg(b), "", "the other handle's message stays empty");
	gpumon_destroy(a);
	gpumon_destroy(b);
}

static void test_strerror(void)
{
	int all_named = 1;
	for (int st = 0; st >= GPUMON_E_TIMEOUT; st--)
		all_named &= strcmp(gpumon_strerror(st), "unknown status") != 0;
	ok(all_named, "every status has a message");
	is_str(gpumon_strerror(-1000), "unknown status", "unknown code");
	is_str(gpumon_version(), GPUMON_VERSION, "version");
}

int main(void)
{
	test_no_library();
	test_not_nvml();
	test_init_error();
	test_zero_gpus();
	test_one_gpu();
	test_sixteen_gpus_and_lost();
	test_errmsg_per_handle();
	test_strerror();
	remove_scenario();
	return tap_done();
}
