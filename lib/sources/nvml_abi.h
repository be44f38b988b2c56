/* SPDX-License-Identifier: MIT */
/* nvml_abi.h — NVML's structs and constants as the driver lays them out (REFERENCE.md), declared
 * here so that libgpumon never includes nvml.h. Shared by the NVML source files only. */
#ifndef GPUMON_NVML_ABI_H
#define GPUMON_NVML_ABI_H

#include <stddef.h>

#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define NVML_NO_INSTANCE 0xFFFFFFFFu

/* NVML's structs, laid out as in REFERENCE.md. */
struct nvml_memory_v1 {
	unsigned long long total, free, used;
};
struct nvml_memory_v2 {
	unsigned version;
	unsigned long long total, reserved, free, used;
};
#define NVML_MEMORY_V2_VERSION ((unsigned)sizeof(struct nvml_memory_v2) | (2u << 24))
struct nvml_pci_v3 {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};
struct nvml_pci_v1 {
	char bus_id[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	unsigned reserved[4];
};
struct nvml_utilization {
	unsigned gpu, memory;
};
struct nvml_proc_v1 {
	unsigned pid;
	unsigned long long used;
};
struct nvml_proc_v2 {
	unsigned pid;
	unsigned long long used;
	unsigned gpu_instance_id, compute_instance_id;
};
_Static_assert(sizeof(struct nvml_memory_v2) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert(offsetof(struct nvml_pci_v3, bus_id) == 36, "busId at offset 36");
_Static_assert(sizeof(struct nvml_pci_v3) == 68, "nvmlPciInfo_t is 68 bytes");
_Static_assert(sizeof(struct nvml_proc_v1) == 16, "nvmlProcessInfo_v1_t is 16 bytes");
_Static_assert(sizeof(struct nvml_proc_v2) == 24, "nvmlProcessInfo_v2_t is 24 bytes");

enum { NVML_TEMPERATURE_GPU = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2 };


#endif
