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

/* ---- device properties, memory health and events (nvml_props.c, nvml_events.c) ---- */

/* nvmlFieldValue_t: one entry of nvmlDeviceGetFieldValues */
struct nvml_field_value {
	unsigned field_id, scope_id;
	long long timestamp, latency_us;
	int value_type; /* NVML_VALUE_TYPE_* */
	int ret;        /* nvmlReturn_t of this field */
	union {
		double d;
		unsigned ui;
		unsigned long ul;
		unsigned long long ull;
		long long sll;
		int si;
		unsigned short us;
	} value;
};
_Static_assert(sizeof(struct nvml_field_value) == 40, "nvmlFieldValue_t is 40 bytes");
enum { NVML_FI_DEV_MEMORY_TEMP = 82 };
enum {
	NVML_VALUE_TYPE_DOUBLE = 0, NVML_VALUE_TYPE_UNSIGNED_INT = 1, NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
	NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3, NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
	NVML_VALUE_TYPE_SIGNED_INT = 5, NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};

/* nvmlClockType_t (NVML_CLOCK_SM and _MEM above), nvmlMemoryErrorType_t, nvmlEccCounterType_t,
 * nvmlMemoryLocation_t, nvmlPageRetirementCause_t, nvmlPstates_t */
enum { NVML_CLOCK_GRAPHICS = 0 };
enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum { NVML_MEMORY_LOCATION_DRAM = 2, NVML_MEMORY_LOCATION_SRAM = 7 }; /* DRAM == DEVICE_MEMORY */
enum { NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
       NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1 };
enum { NVML_PSTATE_15 = 15, NVML_PSTATE_UNKNOWN = 32 };

/* nvmlEventData_t; nvmlEventSet_t is an opaque pointer */
struct nvml_event_data {
	void *device;
	unsigned long long event_type, event_data;
	unsigned gpu_instance_id, compute_instance_id;
};
_Static_assert(sizeof(struct nvml_event_data) == 32 || sizeof(void *) != 8, "nvmlEventData_t is 32 bytes");
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR 0x0000000000000008ULL

#endif
