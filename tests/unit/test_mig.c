/* SPDX-License-Identifier: MIT */
/* test_mig.c — MIG in the device table, against the fake NVML: a GPU in MIG mode followed by its
 * MIG devices (UUIDs, instance ids, profiles, memory, processes per instance), a MIG-disabled GPU,
 * a driver without MIG calls, finding MIG devices by UUID, and a recording that keeps the MIG
 * fields of its device table. */
#include "tap.h"

#include <gpumon/gpumon.h>

#define GIB (1ull << 30)

/* GPU 0 in MIG mode with two MIG devices (NVML index order: gi=7 first), GPU 1 not. */
static const char *const two_gpus =
	"gpu 0 name=\"NVIDIA H200\" uuid=GPU-8f5ee126-6430-18cc-b53b-e920eb26d0af bus=00000000:00:06.0 "
	"total=150754820096 reserved=644939776 used=22GiB\n"
	"gpu 1 name=\"NVIDIA H200\" uuid=GPU-11111111-2222-3333-4444-555555555555 bus=00000000:00:07.0 "
	"total=150754820096 used=1GiB\n"
	"mig 0 gi=7 ci=0 profile=1g.18gb uuid=MIG-51fa7c7a-4c41-59bf-b08a-9cb4b47525a7 total=16.5GiB used=2GiB\n"
	"mig 0 gi=1 ci=0 profile=3g.71gb uuid=MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4 total=70GiB "
	"reserved=1GiB used=20GiB\n"
	"proc 0 4242 used=2GiB gi=7 ci=0\n"
	"proc 0 5151 used=20GiB gi=1 ci=0\n";

static gpumon *open_ok(const char *scn, int v1)
{
	use_scenario(scn, v1);
	gpumon *g = NULL;
	int st = gpumon_create(&g);
	if (!ok(st == GPUMON_OK, "opens: %s", g ? gpumon_errmsg(g) : "no handle")) {
		printf("Bail out! cannot open the fake NVML\n");
		exit(1);
	}
	return g;
}

static void test_table(void)
{
	gpumon *g = open_ok(two_gpus, 0);
	is_int(gpumon_device_count(g), 4, "2 GPUs and 2 MIG devices");
	gpumon_device_info d[4];
	for (unsigned i = 0; i < 4; i++)
		is_int(gpumon_device_info_get(g, i, &d[i]), GPUMON_OK, "info of device %u", i);

	ok(!d[0].mig && !d[1].mig, "GPUs first, at their NVML indexes");
	is_int(d[0].index, 0, "GPU 0 at 0");
	is_int(d[0].parent, 0, "a GPU is its own parent");
	ok(d[0].present & GPUMON_INFO_MIG_MODE, "GPU 0's MIG mode known");
	is_int(d[0].mig_mode, GPUMON_MIG_ENABLED, "GPU 0 in MIG mode");
	is_int(d[0].mig_mode_pending, GPUMON_MIG_ENABLED, "and after its reset");
	is_int(d[1].mig_mode, GPUMON_MIG_DISABLED, "GPU 1 not in MIG mode");
	ok(d[1].present & GPUMON_INFO_MIG_MODE, "GPU 1's MIG mode known (Disabled, not absent)");

	ok(d[2].mig && d[3].mig, "then the MIG devices");
	is_int(d[2].index, 2, "position in index");
	is_int(d[2].parent, 0, "MIG device 0's GPU");
	is_int(d[2].mig_index, 0, "its number under the GPU");
	is_int(d[3].mig_index, 1, "the next one");
	is_str(d[2].uuid, "MIG-51fa7c7a-4c41-59bf-b08a-9cb4b47525a7", "own UUID");
	is_str(d[2].name, "NVIDIA H200 MIG 1g.18gb", "NVML's name of a MIG device");
	ok(d[2].present & GPUMON_INFO_MIG_PROFILE, "profile known");
	is_str(d[2].mig_profile, "1g.18gb", "profile from the name");
	is_str(d[3].mig_profile, "3g.71gb", "second profile");
	ok(d[2].present & GPUMON_INFO_MIG_IDS, "instance ids known");
	is_int(d[2].gpu_instance_id, 7, "GPU instance id");
	is_int(d[2].compute_instance_id, 0, "compute instance id");
	is_int(d[3].gpu_instance_id, 1, "second GPU instance id");
	is_str(d[2].pci_bus_id, "00000000:00:06.0", "the GPU's bus id");
	is_int(d[2].memory_total_bytes, 16 * GIB + GIB / 2, "instance's total memory");
	ok(!(d[0].present & GPUMON_INFO_MIG_IDS) && !(d[0].present & GPUMON_INFO_MIG_PROFILE),
	   "a GPU has no instance ids nor profile");
	gpumon_destroy(g);
}

static void test_samples(void)
{
	gpumon *g = open_ok(two_gpus, 0);
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 3, GPUMON_F_ALL, &s), GPUMON_OK, "a MIG device samples");
	is_int(s.memory_used_bytes, 20 * GIB, "its own used memory");
	is_int(s.memory_reserved_bytes, GIB, "its own reserved memory");
	is_int(s.memory_total_bytes, 70 * GIB, "its own total");
	ok(!(s.present & (GPUMON_F_UTIL_GPU | GPUMON_F_TEMPERATURE | GPUMON_F_POWER | GPUMON_F_CLOCK_SM)),
	   "per-GPU fields absent on a MIG device, never 0");
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s), GPUMON_OK, "the GPU in MIG mode samples");
	is_int(s.memory_used_bytes, 22 * GIB, "the whole GPU's memory on the GPU");
	ok(!(s.present & GPUMON_F_UTIL_GPU), "no utilization in MIG mode");
	ok(s.present & GPUMON_F_TEMPERATURE, "temperature still read on the GPU");

	gpumon_process *p = NULL;
	size_t n = 0;
	is_int(gpumon_process_list(g, 2, &p, &n), GPUMON_OK, "processes of MIG device 2");
	is_int(n, 1, "only its instance's");
	if (n == 1) {
		is_int(p[0].pid, 4242, "the pid on gi 7");
		ok(p[0].flags & GPUMON_PROC_MIG, "with MIG ids");
		is_int(p[0].gpu_instance_id, 7, "gi");
	}
	gpumon_free(p);
	is_int(gpumon_process_list(g, 0, &p, &n), GPUMON_OK, "processes of the GPU");
	is_int(n, 2, "every instance's on the GPU");
	gpumon_free(p);
	gpumon_destroy(g);
}

static void test_find(void)
{
	gpumon *g = open_ok(two_gpus, 0);
	unsigned dev = 99;
	is_int(gpumon_device_find(g, "MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4", &dev), GPUMON_OK, "whole MIG UUID");
	is_int(dev, 3, "found");
	dev = 99;
	is_int(gpumon_device_find(g, "mig-51fa7c7a", &dev), GPUMON_OK, "MIG UUID prefix");
	is_int(dev, 2, "found by prefix");
	is_int(gpumon_device_find(g, "GPU-51fa7c7a", &dev), GPUMON_E_NOT_FOUND, "a GPU- prefix is no MIG device's");
	is_int(gpumon_device_find(g, "2", &dev), GPUMON_E_NOT_FOUND, "indexes name GPUs only");
	ok(strstr(gpumon_errmsg(g), "2 GPUs") != NULL, "message counts GPUs: %s", gpumon_errmsg(g));
	is_int(gpumon_device_find(g, "00:06.0", &dev), GPUMON_OK, "bus id shared with MIG devices");
	is_int(dev, 0, "names the GPU");
	gpumon_destroy(g);
}

static void test_disabled_and_old(void)
{
	static const char *const plain = "gpu 0 name=\"NVIDIA H200\" total=140GiB\n";
	gpumon *g = open_ok(plain, 0);
	gpumon_device_info d;
	is_int(gpumon_device_count(g), 1, "MIG-disabled GPU: no MIG devices");
	gpumon_device_info_get(g, 0, &d);
	is_int(d.mig_mode, GPUMON_MIG_DISABLED, "Disabled");
	ok(d.present & GPUMON_INFO_MIG_MODE, "known");
	gpumon_destroy(g);

	g = open_ok(plain, 1);
	gpumon_device_info_get(g, 0, &d);
	ok(!(d.present & GPUMON_INFO_MIG_MODE), "a driver without MIG calls: mode absent");
	gpumon_destroy(g);

	g = open_ok("gpu 0\nerror nvmlDeviceGetMigMode NOT_SUPPORTED\n", 0);
	gpumon_device_info_get(g, 0, &d);
	ok(!(d.present & GPUMON_INFO_MIG_MODE), "a GPU without MIG: mode absent, not Disabled");
	gpumon_destroy(g);

	/* MIG mode on with no instance yet; and a refused handle call keeps the GPU */
	g = open_ok("gpu 0\nmig 0 on\n", 0);
	is_int(gpumon_device_count(g), 1, "MIG mode without instances: the GPU alone");
	gpumon_destroy(g);
	g = open_ok("gpu 0\nmig 0 gi=1 ci=0\nerror nvmlDeviceGetMigDeviceHandleByIndex NO_PERMISSION\n", 0);
	is_int(gpumon_device_count(g), 1, "MIG handles refused: the GPU alone, opening still works");
	gpumon_destroy(g);
	g = open_ok("gpu 0\nmig 0 off pending=on\n", 0);
	gpumon_device_info_get(g, 0, &d);
	ok(d.mig_mode == GPUMON_MIG_DISABLED && d.mig_mode_pending == GPUMON_MIG_ENABLED, "pending mode apart");
	gpumon_destroy(g);
}

static void test_recording(void)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/gpumon-test-mig-%d.gpumon", (int)getpid());
	unlink(path);
	gpumon *g = open_ok(two_gpus, 0);
	gpumon_recording *r = NULL;
	int st = gpumon_recording_create(g, path, NULL, &r);
	is_int(st, GPUMON_OK, "recording created: %s", r ? gpumon_recording_errmsg(r) : "");
	gpumon_recording_destroy(r);
	gpumon_destroy(g);

	gpumon_reader *rd = NULL;
	is_int(gpumon_reader_create(path, &rd), GPUMON_OK, "read back: %s", rd ? gpumon_reader_errmsg(rd) : "");
	is_int(gpumon_reader_device_count(rd), 4, "4 devices recorded");
	gpumon_device_info d;
	memset(&d, 0, sizeof d);
	gpumon_reader_device(rd, 3, &d);
	is_str(d.uuid, "MIG-27b1a30b-e164-5ba8-9904-9d949f65d8e4", "MIG device by its UUID");
	ok(d.mig, "still a MIG device");
	is_int(d.parent, 0, "its GPU");
	is_int(d.mig_index, 1, "its number");
	ok(d.present & GPUMON_INFO_MIG_IDS, "ids kept");
	is_int(d.gpu_instance_id, 1, "gi kept");
	is_int(d.compute_instance_id, 0, "ci kept");
	is_str(d.mig_profile, "3g.71gb", "profile kept");
	memset(&d, 0, sizeof d);
	gpumon_reader_device(rd, 0, &d);
	ok(!d.mig && d.mig_mode == GPUMON_MIG_ENABLED && (d.present & GPUMON_INFO_MIG_MODE), "GPU's MIG mode kept");
	gpumon_reader_device(rd, 1, &d);
	ok(!d.mig && d.mig_mode == GPUMON_MIG_DISABLED && (d.present & GPUMON_INFO_MIG_MODE), "Disabled kept");
	gpumon_reader_destroy(rd);
	unlink(path);
	for (const char *suffix = "-wal"; suffix; suffix = suffix[1] == 'w' ? "-shm" : NULL) {
		char side[80]; /* SQLite's write-ahead log and its index, left by the reader */
		snprintf(side, sizeof side, "%s%s", path, suffix);
		unlink(side);
	}
}

int main(void)
{
	test_table();
	test_samples();
	test_find();
	test_disabled_and_old();
	test_recording();
	return tap_done();
}
