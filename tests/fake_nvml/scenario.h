/* SPDX-License-Identifier: MIT */
/* scenario.h — the fake NVML's scenario files: a pure parser (text in, struct or error message
 * out) and the time model that gives the GPUs' and processes' state at a time t. Kept apart from
 * the NVML functions so that tests and a fuzz target can drive it directly. */
#ifndef FAKE_NVML_SCENARIO_H
#define FAKE_NVML_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "fake_props.h"

/* Limits; going past one is a parse error, so memory stays bounded on any input. */
#define SCN_MAX_LINE 4096        /* bytes in one line, without its newline */
#define SCN_MAX_GPUS 4096
#define SCN_MAX_PROCS 1000000    /* distinct (gpu, pid) pairs in the whole file */
#define SCN_MAX_EVENTS 1000000   /* key changes from declarations and `at` lines together */
#define SCN_MAX_RULES 100000     /* `error` and `hang` lines together */
#define SCN_MAX_TEXT (256u << 20)/* bytes of text, for all strings and for the whole file */

/* Lengths of strings in the state, terminating NUL included (NVML's buffer sizes). */
#define SCN_NAME_LEN 96
#define SCN_UUID_LEN 96
#define SCN_VERSION_LEN 80

/* The NVML return codes the fake knows by name. */
enum {
	SCN_SUCCESS = 0,
	SCN_ERROR_UNINITIALIZED = 1,
	SCN_ERROR_INVALID_ARGUMENT = 2,
	SCN_ERROR_NOT_SUPPORTED = 3,
	SCN_ERROR_NO_PERMISSION = 4,
	SCN_ERROR_NOT_FOUND = 6,
	SCN_ERROR_INSUFFICIENT_SIZE = 7,
	SCN_ERROR_DRIVER_NOT_LOADED = 9,
	SCN_ERROR_TIMEOUT = 10,
	SCN_ERROR_LIBRARY_NOT_FOUND = 12,
	SCN_ERROR_FUNCTION_NOT_FOUND = 13,
	SCN_ERROR_GPU_IS_LOST = 15,
	SCN_ERROR_RESET_REQUIRED = 16,
	SCN_ERROR_LIB_RM_VERSION_MISMATCH = 18,
	SCN_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	SCN_ERROR_GPU_NOT_FOUND = 28,
	SCN_ERROR_UNKNOWN = 999,
};

/* The NVML functions of the fake, for `error` lines and traces; names in scn_fn_name(). */
enum scn_fn {
	SCN_FN_INIT,
	SCN_FN_INIT_V2,
	SCN_FN_SHUTDOWN,
	SCN_FN_ERROR_STRING,
	SCN_FN_COUNT,
	SCN_FN_COUNT_V2,
	SCN_FN_HANDLE,
	SCN_FN_HANDLE_V2,
	SCN_FN_MEMORY,
	SCN_FN_MEMORY_V2,
	SCN_FN_NAME,
	SCN_FN_UUID,
	SCN_FN_PCI,
	SCN_FN_PCI_V2,
	SCN_FN_PCI_V3,
	SCN_FN_UTILIZATION,
	SCN_FN_TEMPERATURE,
	SCN_FN_POWER,
	SCN_FN_ENERGY,
	SCN_FN_CLOCK,
	SCN_FN_DRIVER_VERSION,
	SCN_FN_NVML_VERSION,
	SCN_FN_PROCESS_NAME,
	SCN_FN_COMPUTE_PROCS,
	SCN_FN_COMPUTE_PROCS_V2,
	SCN_FN_COMPUTE_PROCS_V3,
	SCN_FN_GRAPHICS_PROCS,
	SCN_FN_GRAPHICS_PROCS_V2,
	SCN_FN_GRAPHICS_PROCS_V3,
	/* properties, memory health and events (fake_props_calls.c) */
	SCN_FN_POWER_LIMIT, SCN_FN_POWER_ENFORCED, SCN_FN_POWER_DEFAULT, SCN_FN_POWER_CONSTRAINTS,
	SCN_FN_POWER_MODE, SCN_FN_FAN, SCN_FN_PSTATE, SCN_FN_FIELD_VALUES, SCN_FN_MAX_CLOCK, SCN_FN_SERIAL,
	SCN_FN_VBIOS, SCN_FN_COMPUTE_MODE, SCN_FN_PERSISTENCE, SCN_FN_PCIE_GEN, SCN_FN_PCIE_GEN_MAX,
	SCN_FN_PCIE_WIDTH, SCN_FN_PCIE_WIDTH_MAX, SCN_FN_MIG_MODE, SCN_FN_ECC_MODE, SCN_FN_ECC_TOTAL,
	SCN_FN_ECC_COUNTER, SCN_FN_RETIRED_PAGES, SCN_FN_RETIRED_PENDING, SCN_FN_REMAPPED_ROWS,
	SCN_FN_EVENT_SET_CREATE, SCN_FN_REGISTER_EVENTS, SCN_FN_EVENT_SET_WAIT_V2, SCN_FN_EVENT_SET_FREE,
	/* MIG (scenario_mig.c) */
	SCN_FN_MAX_MIG_COUNT,
	SCN_FN_MIG_HANDLE,
	SCN_FN_GPU_INSTANCE_ID,
	SCN_FN_COMPUTE_INSTANCE_ID,
	SCN_FN_IS_MIG_HANDLE,
	SCN_FN_MIG_PARENT,
	SCN_FN_N
};

/* The exported name of function fn ("nvmlDeviceGetPowerUsage"); "?" when out of range. */
const char *scn_fn_name(unsigned fn);

/* Bits of scn_proc.type */
enum { SCN_PROC_COMPUTE = 1u, SCN_PROC_GRAPHICS = 2u };

/* One GPU at a time t. */
struct scn_gpu {
	char name[SCN_NAME_LEN];
	char uuid[SCN_UUID_LEN];
	char bus_id[32];        /* "00000000:00:06.0" */
	char bus_id_legacy[16]; /* "0000:00:06.0" */
	unsigned pci_domain, pci_bus, pci_device;
	uint64_t total, reserved, used; /* bytes; free is derived */
	uint64_t energy_mj;
	unsigned util, memutil, temp_c, power_mw, sm_mhz, mem_mhz;
	int lost;
	struct fake_props props; /* properties and memory health (fake_props.h) */
};

/* One (gpu, pid) pair ever named by the file, at a time t; listed only while present. */
struct scn_proc {
	unsigned gpu, pid;
	int present;
	unsigned type;          /* SCN_PROC_* bits */
	int used_known;         /* 0: used=na, NVML's "not available" */
	uint64_t used;
	uint64_t grow;          /* grow=: bytes per second added to used since grow_t0 */
	uint64_t used_base;     /* used at grow_t0 */
	double grow_t0;         /* time of the last line that set used or grow */
	const char *name;       /* NULL when the file gives none; points into the scenario */
	unsigned gi, ci;
};

struct scn;

/*
 * Parses a scenario from text[0..len) (need not be NUL-terminated; NUL bytes are an error).
 * On success returns 0 and sets *out to a new scenario the caller frees with scn_free(). On
 * failure returns the line number (>= 1) of the error, sets *out to NULL and writes
 * "LINE: message" into err (NUL-terminated, truncated to errlen; err may be NULL when errlen is
 * 0). Never prints, exits or aborts; running out of memory is reported as an error.
 */
int scn_parse(const char *text, size_t len, struct scn **out, char *err, size_t errlen);

/* Frees a scenario; NULL is a no-op. */
void scn_free(struct scn *s);

/* Number of GPUs declared (indexes 0 .. count-1). */
unsigned scn_gpu_count(const struct scn *s);

/* The driver and NVML version strings (defaults "580.159.04" and "12.580.159.04"). */
const char *scn_driver_version(const struct scn *s);
const char *scn_nvml_version(const struct scn *s);

/* The code of an `init_error` line, or 0 when the file has none. */
int scn_init_error(const struct scn *s);

/*
 * Looks up the `error` lines for a call of function fn at time t: gpu is the device the call is
 * about, or -1 for calls about no device. When one or more lines match, the last in the file
 * wins: sets *code and returns 1. Returns 0 when none matches.
 */
int scn_rule_code(const struct scn *s, unsigned fn, int gpu, double t, int *code);

/*
 * Looks up the `hang` lines for a call of function fn made at time t (gpu as above). When one or
 * more match, the last in the file wins: sets *until (HUGE_VAL: forever) and returns 1: the call
 * must not return before that time. Returns 0 when none matches.
 */
int scn_hang_until(const struct scn *s, unsigned fn, int gpu, double t, double *until);

/* The `at T xid GPU CODE` lines, by time (file order among equal times): xid[0..count). */
size_t scn_xid_count(const struct scn *s);
const struct fake_xid *scn_xid(const struct scn *s, size_t i);

/*
 * State at a time. gpu[0..ngpus) and proc[0..nprocs); the processes of GPU g are
 * proc[gpu_first[g] .. gpu_first[g + 1]), in the order the file first names them.
 */
struct scn_state {
	unsigned ngpus;
	size_t nprocs;
	struct scn_gpu *gpu;
	struct scn_proc *proc;
	const size_t *gpu_first;
	/* The state holds for valid_from <= t < valid_until; private to scenario.c. */
	int valid;
	double valid_from, valid_until;
};

/* Allocates a state for s (not yet computed). Returns 0, or -1 when out of memory. */
int scn_state_init(struct scn_state *st, const struct scn *s);

/*
 * Brings st to time t (seconds): the declarations, then every `at T` change with T <= t in file
 * order. Recomputes only when t leaves the interval the state was computed for.
 */
void scn_state_update(struct scn_state *st, const struct scn *s, double t);

/* Frees what scn_state_init() allocated; the state may be zeroed or freed twice. */
void scn_state_free(struct scn_state *st);

/* ---- MIG (scenario_mig.c): declared by `mig` lines, the same at every t ---------------------- */

#define SCN_MAX_MIG 4096        /* MIG devices in the whole file */

/* A MIG device: one compute instance of a GPU instance of a GPU in MIG mode. */
struct scn_mig {
	unsigned gpu, gi, ci;
	char profile[32];       /* "1g.18gb"; the device's name is the GPU's + " MIG " + this */
	char uuid[SCN_UUID_LEN];
	uint64_t total, reserved, used;
};

/* The MIG mode of GPU gpu: current and pending, 1 enabled, 0 disabled (the default). */
void scn_mig_mode(const struct scn *s, unsigned gpu, int *current, int *pending);

/* Number of MIG devices of all GPUs, and device i of them (NULL when out of range). */
size_t scn_mig_count(const struct scn *s);
const struct scn_mig *scn_mig_get(const struct scn *s, size_t i);

/* The position (for scn_mig_get) of GPU gpu's k-th MIG device, in file order; -1 when none. */
long scn_mig_find(const struct scn *s, unsigned gpu, unsigned k);

#endif
