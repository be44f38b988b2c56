/* SPDX-License-Identifier: MIT */
/*
 * gpumon.h — the whole public interface of libgpumon: GPU memory, activity and the processes
 * holding memory, read from NVML (loaded at run time) and /proc; recordings of them; and the
 * analysis that judges a run (leaks, peaks, out-of-memory). Nothing outside this header is API.
 *
 * Objects. Each is an opaque handle made by its constructor and freed by its destructor;
 * destroy(NULL) is a no-op.
 *
 *   object            constructor                    destructor                 what it is
 *   gpumon            gpumon_create                  gpumon_destroy             NVML opened, the device table
 *   gpumon_sampler    gpumon_sampler_create(g)       gpumon_sampler_destroy     threads sampling GPUs into records
 *   gpumon_recording  gpumon_recording_create(g)     gpumon_recording_destroy   a recording file being written
 *                                                    (after _finish)
 *   gpumon_reader     gpumon_reader_create           gpumon_reader_destroy      a recording file read back
 *   gpumon_leak       gpumon_leak_create             gpumon_leak_destroy        one series' leak detector
 *   gpumon_peaks      gpumon_peaks_create            gpumon_peaks_destroy       one series' peaks per window
 *   gpumon_model      gpumon_model_create            gpumon_model_destroy       the run model: what a run means
 *   gpumon_tfevents   gpumon_tfevents_create         gpumon_tfevents_destroy    a TensorBoard event file
 *   gpumon_exporter   gpumon_exporter_create(g)      gpumon_exporter_destroy    the Prometheus HTTP exporter
 *
 * A sampler and an exporter use their gpumon handle until they are destroyed: destroy them first.
 * A recording reads the handle only while it is created. Everything else stands alone, and the
 * functions outside any object (status words, the out-of-memory message parser, the allocator
 * snapshot, fit, health and owner words) are pure: any thread may call them at any time.
 *
 * Who owns what the calls hand out:
 * - Arrays and texts made for the caller (process lists, host process trees, the flight recorder's
 *   samples, JSON documents and encodings) are the caller's, freed with gpumon_free().
 * - Strings an object returns (messages, paths, metadata) are the object's: valid until its next
 *   call or its destruction, as each function says.
 * - The pointers inside a gpumon_record (process, event_kind, event_text) belong to whoever made
 *   the record: a sampler's stay valid until its next gpumon_sampler_poll, a reader's until its
 *   next gpumon_reader_next; a caller that keeps a record longer copies what they point to. Records
 *   the caller makes are read by the call they are given to (gpumon_recording_write,
 *   gpumon_model_add) and not kept.
 * - Structs filled in for the caller (device info, samples, verdicts) are plain values: the
 *   caller's.
 *
 * Threads: a gpumon handle may be used from several threads at once (only its destruction must
 * not race with other calls). A sampler has one consumer thread, which another thread may stop by
 * destroying the sampler while the consumer waits in gpumon_sampler_poll. Every other object is
 * used by one thread at a time; different objects are independent. gpumon_exporter_framework may
 * be called from any thread. The library starts threads of its own (sampling, the exporter's
 * collector and HTTP server, a watchdog for driver calls that hang) and never calls back into the
 * caller from them.
 *
 * Errors: a function that can fail returns 0 (GPUMON_OK) or a negative GPUMON_E_*
 * (gpumon_strerror() words it). Each object keeps the message of its last failure, a sentence
 * naming what failed and why, read with gpumon_X_errmsg() ("" when nothing has failed). The gpumon
 * handle's message is its own (another handle's failures do not touch it) and, since one handle is
 * shared by threads, kept per thread: gpumon_errmsg() says the last failure of the calling
 * thread's calls, never another thread's. A constructor that fails returns the status and, where
 * it can, still sets *out to an object holding the message, which the caller destroys (a sampler's
 * constructor puts its message on g). The library never prints, never exits, never aborts on bad
 * input.
 *
 * Versions and the ABI: GPUMON_VERSION is this header's version, gpumon_version() the library's;
 * the soname is libgpumon.so.MAJOR. Configuration and result structs that may grow start with
 * `unsigned size`, set by the caller to sizeof the struct (GPUMON_CONFIG_INIT does it): fields a
 * caller's older header does not have take their defaults, and a struct larger than the library
 * knows is refused (GPUMON_E_INVAL); a NULL configuration means all defaults. gpumon_record is
 * GPUMON_RECORD_SIZE bytes. The structs the library fills in arrays the caller gives (gpumon_peak,
 * gpumon_model_host, gpumon_verdict, gpumon_alert, gpumon_rank_row, gpumon_told,
 * gpumon_nvml_error_count) keep their size, the arrays' stride, within a major version: each ends
 * with reserved room, zeroed, that a field added later takes; such a field is 0
 * from an older library, so it comes with a presence flag or a meaning for 0.
 *
 * Units: times are CLOCK_MONOTONIC nanoseconds (t_ns) unless named wall; sizes are bytes; "not
 * available" is a cleared presence bit or a documented sentinel, never 0.
 */
#ifndef GPUMON_GPUMON_H
#define GPUMON_GPUMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header; gpumon_version() says the library's. CMakeLists.txt's project()
 * version must equal it (the build stops otherwise), and the shared library's soname is
 * libgpumon.so.MAJOR: a release that breaks the ABI raises MAJOR. */
#define GPUMON_VERSION_MAJOR 1
#define GPUMON_VERSION_MINOR 0
#define GPUMON_VERSION_PATCH 0
#define GPUMON_VERSION "1.0.0"

/* Sets a configuration struct's size field (see "Versions and the ABI" above). */
#define GPUMON_CONFIG_INIT(type) {.size = sizeof(type)}

/* Marks the exported functions; everything else in the library is hidden. */
#ifndef GPUMON_API
#define GPUMON_API __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------------------------------------
 * Status codes. Every function that can fail returns 0 (GPUMON_OK) or one of these negatives.
 * ------------------------------------------------------------------------------------------- */
enum {
	GPUMON_OK = 0,
	GPUMON_E_INVAL = -1,         /* bad argument (NULL, unknown device spec, bad field mask) */
	GPUMON_E_NOMEM = -2,         /* out of memory */
	GPUMON_E_NO_LIBRARY = -3,    /* libnvidia-ml could not be loaded: no NVIDIA driver installed */
	GPUMON_E_DRIVER = -4,        /* NVML loaded but the driver did not answer (not loaded, mismatch) */
	GPUMON_E_NOT_FOUND = -5,     /* no such device, or a device spec matched nothing */
	GPUMON_E_LOST = -6,          /* the GPU fell off the bus or needs a reset; it stays lost */
	GPUMON_E_NOT_SUPPORTED = -7, /* the driver or GPU does not offer this */
	GPUMON_E_NO_PERMISSION = -8, /* the driver refused for lack of permission */
	GPUMON_E_NVML = -9,          /* any other NVML failure; the message says which */
	GPUMON_E_AMBIGUOUS = -10,    /* a device spec matched more than one device */
	GPUMON_E_IO = -11,           /* a file could not be created, written or read; message says why */
	GPUMON_E_EXISTS = -12,       /* the output file exists already */
	GPUMON_E_TIMEOUT = -13,      /* the driver did not answer within the bound (2 s); message names the call */
};

/* A short English description of a status code; never NULL, static storage. */
GPUMON_API const char *gpumon_strerror(int status);

/* The library's version as "MAJOR.MINOR.PATCH" (static storage): GPUMON_VERSION of the header it
 * was built with, which a program built against another header may compare with its own. */
GPUMON_API const char *gpumon_version(void);

/* Frees a buffer the library handed out (process lists, flight-recorder copies, documents).
 * NULL is a no-op. */
GPUMON_API void gpumon_free(void *p);

/* ---------------------------------------------------------------------------------------------
 * Handle
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon gpumon;

/*
 * Creates a handle: loads NVML, initialises it and builds the device table.
 *
 * The library loaded is the file named by the environment variable GPUMON_NVML_LIBRARY when it
 * is set and non-empty, else "libnvidia-ml.so.1" from the system's search path.
 *
 * On success returns 0 and sets *out to a new handle. On failure returns a negative status; *out
 * is then still set to a handle that holds the error message (gpumon_errmsg()) and must be passed
 * to gpumon_destroy(), except after GPUMON_E_NOMEM, when *out may be NULL. GPUMON_E_NO_LIBRARY: no
 * NVML library; GPUMON_E_NO_PERMISSION: NVML refused to start for lack of permission;
 * GPUMON_E_DRIVER: the driver is not loaded or not usable; GPUMON_E_NVML: the library answered with
 * a code that is not NVML's (the message has its own words); GPUMON_E_TIMEOUT: a driver call
 * (nvmlInit, or a query of the first device listing) did not return within 2 s, the bound the
 * sampler uses too. A handle whose create failed answers every other call with GPUMON_E_DRIVER.
 *
 * A call that hung is left to a detached thread of the library, which touches nothing the caller
 * holds: if the call returns one day, that thread shuts its NVML session down and ends; until then
 * it stays, and exit() does not wait for it.
 *
 * Thread-safety: the returned handle may be used from several threads at once; each call is
 * independent. gpumon_destroy() must not race with other calls on the same handle.
 */
GPUMON_API int gpumon_create(gpumon **out);

/* Shuts NVML down (once per handle) and frees the handle. NULL is a no-op. A sampler's thread left
 * in a driver call that has not returned (gpumon_sampler_destroy) keeps NVML and the handle's
 * memory until that call returns; gpumon_destroy() itself returns at once. */
GPUMON_API void gpumon_destroy(gpumon *g);

/*
 * The message of the last failure on this handle, in the calling thread: a sentence naming what
 * failed and why (for example "nvmlDeviceGetMemoryInfo on GPU 1: GPU is lost"). "" when no call
 * has failed in this thread. Per handle and per thread (see "Errors" at the top): the threads
 * sharing a handle, a sampler's among them, never overwrite each other's message. The pointer
 * stays valid until the next call on the handle from the same thread, or until gpumon_destroy().
 */
GPUMON_API const char *gpumon_errmsg(gpumon *g);

/* The path or name of the NVML library file that was loaded (or tried); never NULL. */
GPUMON_API const char *gpumon_nvml_path(const gpumon *g);

/*
 * Copies the driver version ("580.159.04") into buf (NUL-terminated, truncated to len).
 * Returns GPUMON_E_NOT_SUPPORTED when the driver does not tell it.
 */
GPUMON_API int gpumon_driver_version(gpumon *g, char *buf, size_t len);

/* Same for the NVML library version ("12.580.159.04"). */
GPUMON_API int gpumon_nvml_version(gpumon *g, char *buf, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Devices. A device is named by its position in the table built at open (0 .. count-1). The GPUs
 * come first, each at its NVML index at that moment; then the MIG devices of every GPU in MIG mode
 * (Multi-Instance GPU), grouped by GPU in GPU order, each in NVML's order under its GPU. NVML's
 * order is not guaranteed to match CUDA's: key stored data by UUID, not by index.
 *
 * MIG: a MIG device is one compute instance of a GPU instance of a GPU in MIG mode, with its own
 * UUID ("MIG-..."), memory and processes; gpumon_device_info says which GPU it belongs to. Each
 * device of the table reads its own figures:
 * - a GPU in MIG mode still reports memory: the whole GPU's (NVML's figure for the GPU, the sum
 *   over its instances, which is what nvidia-smi shows on the GPU's line); the driver may refuse
 *   it to an unprivileged caller, and then it is absent. Its process list holds the processes of
 *   every instance (each with GPUMON_PROC_MIG and its instance ids). Utilization is not reported
 *   for a GPU in MIG mode (absent, as nvidia-smi's [N/A]).
 * - a MIG device reports its instance's memory and the processes of its instance only; fields
 *   NVML keeps per GPU (utilization, temperature, power, clocks) are absent on it.
 * So a GPU's figures already include its MIG devices': never add them up.
 * ------------------------------------------------------------------------------------------- */

/* Number of devices in the table: GPUs, then MIG devices (may be 0). */
GPUMON_API unsigned gpumon_device_count(const gpumon *g);

/* Bits of gpumon_device_info.present */
enum {
	GPUMON_INFO_NAME = 1u << 0,
	GPUMON_INFO_UUID = 1u << 1,
	GPUMON_INFO_PCI_BUS_ID = 1u << 2,
	GPUMON_INFO_MEMORY_TOTAL = 1u << 3,
	/* MIG bits from 16 up */
	GPUMON_INFO_MIG_MODE = 1u << 16,    /* a GPU: mig_mode and mig_mode_pending hold values (the
					       driver answered; a GPU without MIG support: absent) */
	GPUMON_INFO_MIG_IDS = 1u << 17,     /* a MIG device: gpu_instance_id and compute_instance_id */
	GPUMON_INFO_MIG_PROFILE = 1u << 18, /* a MIG device: mig_profile */
};

/* Values of gpumon_device_info.mig_mode and mig_mode_pending (nvidia-smi's mig.mode.*) */
enum { GPUMON_MIG_DISABLED = 0, GPUMON_MIG_ENABLED = 1 };

typedef struct gpumon_device_info {
	unsigned index;              /* position in the table == NVML index at open */
	unsigned present;            /* GPUMON_INFO_* bits for the fields below that are known */
	int lost;                    /* 1 once the GPU reported itself lost */
	char name[96];               /* "NVIDIA H200" */
	char uuid[96];               /* "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51" */
	char pci_bus_id[32];         /* "00000000:00:06.0" (8-digit domain, as nvidia-smi prints it) */
	uint64_t memory_total_bytes; /* from the memory query at open */
	/* MIG (see "Devices" above) */
	int mig;                     /* 1: a MIG device; 0: a GPU */
	unsigned parent;             /* a MIG device: its GPU's position; a GPU: its own position */
	unsigned mig_index;          /* a MIG device: its number under its GPU, counted from 0 in NVML's
					order, as nvidia-smi -L prints it ("Device  0") */
	unsigned mig_mode;           /* a GPU: GPUMON_MIG_* now (GPUMON_INFO_MIG_MODE) */
	unsigned mig_mode_pending;   /* a GPU: GPUMON_MIG_* after its next reset (GPUMON_INFO_MIG_MODE) */
	unsigned gpu_instance_id;    /* a MIG device: its GPU instance (GPUMON_INFO_MIG_IDS) */
	unsigned compute_instance_id;/* a MIG device: its compute instance in that GPU instance */
	char mig_profile[32];        /* a MIG device: its profile, "1g.18gb" (GPUMON_INFO_MIG_PROFILE), as
					nvidia-smi -L prints it after "MIG " and dcgm-exporter's GPU_I_PROFILE;
					name is the GPU's name followed by " MIG " and the profile */
} gpumon_device_info;

/* Fills *out for device dev. GPUMON_E_NOT_FOUND when dev >= count. Never touches the driver. */
GPUMON_API int gpumon_device_info_get(const gpumon *g, unsigned dev, gpumon_device_info *out);

/*
 * Finds the device named by spec, as nvidia-smi's -i accepts it: a decimal index (of a GPU: MIG
 * devices have none), a UUID (whole, or a unique prefix of at least 8 characters after "GPU-" or
 * "MIG-"; case-insensitive), or a PCI bus id ("00000000:00:06.0", "0000:00:06.0" or "00:06.0";
 * case-insensitive; it names the GPU, not its MIG devices). Leading and trailing blanks are ignored.
 * Sets *dev and returns 0, or GPUMON_E_NOT_FOUND / GPUMON_E_AMBIGUOUS / GPUMON_E_INVAL (empty spec)
 * with a message naming spec.
 */
GPUMON_API int gpumon_device_find(gpumon *g, const char *spec, unsigned *dev);

/* ---------------------------------------------------------------------------------------------
 * Device samples
 * ------------------------------------------------------------------------------------------- */

/* Fields of a device sample; used both to ask for fields and as the presence bitmask. */
enum {
	GPUMON_F_MEMORY = 1u << 0,      /* memory_total/used/free_bytes */
	GPUMON_F_MEM_RESERVED = 1u << 1,/* memory_reserved_bytes (only with the v2 memory call) */
	GPUMON_F_UTIL_GPU = 1u << 2,
	GPUMON_F_UTIL_MEMORY = 1u << 3,
	GPUMON_F_TEMPERATURE = 1u << 4,
	GPUMON_F_POWER = 1u << 5,
	GPUMON_F_ENERGY = 1u << 6,      /* slow on some drivers: ~3 ms a call on an H200 (580.159.04) */
	GPUMON_F_CLOCK_SM = 1u << 7,
	GPUMON_F_CLOCK_MEM = 1u << 8,
	GPUMON_F_ALL = (1u << 9) - 1,
	/* Presence only, never asked for: memory_used_bytes holds a value and total and free are not
	 * known (a log of another tool that gave the used figure alone). Never with GPUMON_F_MEMORY.
	 * The run model judges and peaks such a series; what room is left is then unknown. A recording
	 * does not keep it (gpumon_recording_write refuses such a record). */
	GPUMON_F_MEMORY_USED = 1u << 9,
};

/* Which NVML memory call produced a sample's memory figures. */
enum {
	GPUMON_MEMAPI_NONE = 0,
	GPUMON_MEMAPI_V1 = 1, /* nvmlDeviceGetMemoryInfo: "used" includes driver-reserved memory */
	GPUMON_MEMAPI_V2 = 2, /* nvmlDeviceGetMemoryInfo_v2: "used" excludes it, as nvidia-smi shows */
};

typedef struct gpumon_device_sample {
	uint64_t t_ns;                 /* CLOCK_MONOTONIC, taken just before the first driver call */
	unsigned present;              /* GPUMON_F_* bits of the fields that hold a value */
	unsigned memory_api;           /* GPUMON_MEMAPI_* */
	uint64_t memory_total_bytes;
	uint64_t memory_used_bytes;    /* nvidia-smi's memory.used */
	uint64_t memory_free_bytes;
	uint64_t memory_reserved_bytes;/* driver/firmware reserved; total = reserved + used + free */
	unsigned util_gpu_pct;         /* percent of time a kernel ran, over the driver's period */
	unsigned util_memory_pct;      /* percent of time memory was read or written */
	unsigned temperature_c;
	unsigned power_mw;
	uint64_t energy_mj;            /* counter since the driver was loaded */
	unsigned clock_sm_mhz;
	unsigned clock_mem_mhz;
} gpumon_device_sample;

/*
 * Reads the fields in `want` (GPUMON_F_* bits; GPUMON_F_ALL for all) of device dev into *out.
 * Only the driver calls needed for `want` are made. A field the driver does not offer (missing
 * symbol, NOT_SUPPORTED, or any per-field error) is left out of out->present, never set to 0;
 * that is not a failure. GPUMON_F_MEMORY is always read.
 *
 * Returns 0, or GPUMON_E_NOT_FOUND (bad dev), GPUMON_E_LOST (the GPU is lost: the device is
 * marked lost and every later call on it returns this at once), or another status when the
 * memory figures themselves cannot be read. The v1 memory call stands in only where the v2 call
 * never answered (a driver without it): once v2 has answered on a device, its failure is such a
 * status, never v1's figures. Cost: one NVML call per field group asked for.
 */
GPUMON_API int gpumon_device_sample_read(gpumon *g, unsigned dev, unsigned want, gpumon_device_sample *out);

/* ---------------------------------------------------------------------------------------------
 * Device properties and memory health: the settings and counters nvidia-smi's --query-gpu shows
 * beside memory (power limits, fan, performance state, maximum clocks, serial, VBIOS, modes, PCIe
 * link) and the health of the memory (ECC errors, retired pages, remapped rows). They change
 * seldom or never: read them when needed, not at the sampling rate.
 * ------------------------------------------------------------------------------------------- */

/* Fields of gpumon_device_props; used both to ask for fields and as its bitmasks. One bit may
 * stand for several members that one driver call fills together. */
#define GPUMON_P_POWER_LIMIT       (1ull << 0)  /* power_limit_mw: the limit software set */
#define GPUMON_P_POWER_ENFORCED    (1ull << 1)  /* power_enforced_mw: the limit in force */
#define GPUMON_P_POWER_DEFAULT     (1ull << 2)  /* power_default_mw */
#define GPUMON_P_POWER_MIN         (1ull << 3)  /* power_min_mw: lowest limit that may be set */
#define GPUMON_P_POWER_MAX         (1ull << 4)  /* power_max_mw: highest limit that may be set */
#define GPUMON_P_POWER_MANAGEMENT  (1ull << 5)  /* power_management */
#define GPUMON_P_FAN               (1ull << 6)  /* fan_pct */
#define GPUMON_P_PSTATE            (1ull << 7)  /* pstate */
#define GPUMON_P_MEMORY_TEMP       (1ull << 8)  /* memory_temp_c */
#define GPUMON_P_CLOCK_MAX_SM      (1ull << 9)  /* clock_max_sm_mhz */
#define GPUMON_P_CLOCK_MAX_MEM     (1ull << 10) /* clock_max_mem_mhz */
#define GPUMON_P_CLOCK_MAX_GRAPHICS (1ull << 11)/* clock_max_graphics_mhz */
#define GPUMON_P_SERIAL            (1ull << 12) /* serial */
#define GPUMON_P_VBIOS             (1ull << 13) /* vbios */
#define GPUMON_P_COMPUTE_MODE      (1ull << 14) /* compute_mode */
#define GPUMON_P_PERSISTENCE       (1ull << 15) /* persistence */
#define GPUMON_P_PCIE_GEN          (1ull << 16) /* pcie_gen_current */
#define GPUMON_P_PCIE_GEN_MAX      (1ull << 17) /* pcie_gen_max */
#define GPUMON_P_PCIE_WIDTH        (1ull << 18) /* pcie_width_current */
#define GPUMON_P_PCIE_WIDTH_MAX    (1ull << 19) /* pcie_width_max */
#define GPUMON_P_MIG_MODE          (1ull << 20) /* mig_current, mig_pending */
#define GPUMON_P_ECC_MODE          (1ull << 21) /* ecc_current, ecc_pending */
#define GPUMON_P_ECC_TOTAL         (1ull << 22) /* ecc_total[][] */
#define GPUMON_P_ECC_DRAM          (1ull << 23) /* ecc_dram[][] (nvidia-smi's dram and device_memory) */
#define GPUMON_P_ECC_SRAM          (1ull << 24) /* ecc_sram[][] */
#define GPUMON_P_RETIRED_SBE       (1ull << 25) /* retired_sbe */
#define GPUMON_P_RETIRED_DBE       (1ull << 26) /* retired_dbe */
#define GPUMON_P_RETIRED_PENDING   (1ull << 27) /* retired_pending */
#define GPUMON_P_REMAPPED_ROWS     (1ull << 28) /* remapped_correctable ... remapped_failure */
#define GPUMON_P_ALL               ((1ull << 29) - 1)
/* The memory health fields: what a front end watches for a warning */
#define GPUMON_P_HEALTH (GPUMON_P_ECC_MODE | GPUMON_P_ECC_TOTAL | GPUMON_P_ECC_DRAM | GPUMON_P_ECC_SRAM | \
			 GPUMON_P_RETIRED_SBE | GPUMON_P_RETIRED_DBE | GPUMON_P_RETIRED_PENDING |           \
			 GPUMON_P_REMAPPED_ROWS)

/* Indexes of the ECC counter arrays: [GPUMON_ECC_CORRECTED or _UNCORRECTED][_VOLATILE or
 * _AGGREGATE]. Volatile counts restart with the driver; aggregate ones last the board's life. */
enum { GPUMON_ECC_CORRECTED = 0, GPUMON_ECC_UNCORRECTED = 1 };
enum { GPUMON_ECC_VOLATILE = 0, GPUMON_ECC_AGGREGATE = 1 };

/* Values of gpumon_device_props.compute_mode (NVML's) */
enum {
	GPUMON_COMPUTE_DEFAULT = 0,
	GPUMON_COMPUTE_EXCLUSIVE_THREAD = 1,
	GPUMON_COMPUTE_PROHIBITED = 2,
	GPUMON_COMPUTE_EXCLUSIVE_PROCESS = 3,
};

typedef struct gpumon_device_props {
	unsigned size;              /* set by the caller: sizeof(gpumon_device_props) */
	uint64_t present;           /* GPUMON_P_* of the fields that hold a value */
	uint64_t not_supported;     /* asked for, and the driver or GPU does not offer it (a driver
				       without the call, NVML's NOT_SUPPORTED, or nothing to count:
				       no ECC on the card) */
	uint64_t no_permission;     /* asked for, and the driver refused for lack of permission */
	/* a field asked for and in none of the three masks failed otherwise (the message names it) */
	unsigned power_limit_mw, power_enforced_mw, power_default_mw, power_min_mw, power_max_mw;
	int power_management;       /* 1 enabled, 0 disabled */
	unsigned fan_pct;           /* intended speed, percent of the maximum (may exceed 100) */
	unsigned pstate;            /* 0 (P0, fastest) .. 15 */
	unsigned memory_temp_c;
	unsigned clock_max_sm_mhz, clock_max_mem_mhz, clock_max_graphics_mhz;
	char serial[32];            /* the board's serial number */
	char vbios[32];             /* "96.00.A5.00.1A" */
	unsigned compute_mode;      /* GPUMON_COMPUTE_* */
	int persistence;            /* 1 enabled, 0 disabled */
	unsigned pcie_gen_current, pcie_gen_max, pcie_width_current, pcie_width_max;
	int mig_current, mig_pending; /* 1 enabled, 0 disabled */
	int ecc_current, ecc_pending; /* 1 enabled, 0 disabled */
	uint64_t ecc_total[2][2];   /* every location of the chip; [type][counter] as above */
	uint64_t ecc_dram[2][2];    /* device memory (DRAM, HBM) */
	uint64_t ecc_sram[2][2];    /* on-chip SRAM */
	unsigned retired_sbe;       /* pages retired for repeated single-bit errors */
	unsigned retired_dbe;       /* pages retired for a double-bit error */
	int retired_pending;        /* 1: pages wait to be retired at the next reboot */
	unsigned remapped_correctable;   /* rows remapped for correctable errors */
	unsigned remapped_uncorrectable; /* rows remapped for uncorrectable errors */
	int remapped_pending;       /* 1: a remapping waits for the next GPU reset */
	int remapped_failure;       /* 1: a remapping failed (the board needs service) */
} gpumon_device_props;

/*
 * Reads the fields in `want` (GPUMON_P_* bits; GPUMON_P_ALL for all) of device dev into *out,
 * whose size the caller sets first (fields past it are not written). Only the driver calls
 * needed for `want` are made, each once: about 40 for GPUMON_P_ALL. A field the driver does not
 * offer, or whose call fails, is left out of out->present (never set to 0) and put in
 * not_supported or no_permission when that is why; that is not a failure. out->size is kept, the
 * rest zeroed first.
 *
 * Returns 0, or GPUMON_E_INVAL (NULL, size below that of the first version, unknown bits),
 * GPUMON_E_NOT_FOUND (bad dev), GPUMON_E_LOST (the GPU is lost: the device is marked lost).
 * Thread-safety: as the handle's other calls. A health warning should look at present first:
 * an uncorrected count, a retired or pending page, a pending or failed row remapping is one.
 */
GPUMON_API int gpumon_device_props_read(gpumon *g, unsigned dev, uint64_t want, gpumon_device_props *out);

/* Bits of gpumon_health_problems(): what a card's memory health figures call for. */
enum {
	GPUMON_HEALTH_ECC_UNCORRECTED = 1u << 0, /* uncorrectable ECC errors since the driver loaded */
	GPUMON_HEALTH_RETIRED_PENDING = 1u << 1, /* pages wait to be retired: reboot */
	GPUMON_HEALTH_RETIRED_DBE = 1u << 2,     /* pages were retired for double-bit errors */
	GPUMON_HEALTH_REMAP_PENDING = 1u << 3,   /* a row remapping waits for a GPU reset */
	GPUMON_HEALTH_REMAP_FAILURE = 1u << 4,   /* a row remapping failed: the board needs service */
	GPUMON_HEALTH_REMAP_UNCORRECTABLE = 1u << 5, /* rows were remapped for uncorrectable errors */
};

/*
 * The memory health verdict every front end shows (the warning line of show and watch, the
 * exporter's gpumon_gpu_memory_health_problem series): the GPUMON_HEALTH_* bits that p's figures
 * call for, judged only on the fields p holds (a field absent is no problem and no all-clear).
 * Corrected errors and rows remapped for them are normal wear and raise nothing. 0 when p is NULL.
 */
GPUMON_API unsigned gpumon_health_problems(const gpumon_device_props *p);

/* The name of one GPUMON_HEALTH_* bit as JSON documents and metric labels give it
 * ("ecc_uncorrected", "retired_pages_pending", "retired_pages_double_bit", "remapped_rows_pending",
 * "remapped_rows_failure", "remapped_rows_uncorrectable"); NULL for anything else. Static storage. */
GPUMON_API const char *gpumon_health_problem_name(unsigned bit);

/* event_kind of the sampler's EVENT records for an XID error (NVML's critical error event):
 * event_text is "GPU N: XID CODE" (dev set). NVML gives no time with the event: t_ns is when the
 * sampler took it, within a second of the driver's report (or a sampling period, if longer); XIDs
 * taken together share a time and keep their order. Drivers that do not offer the events give
 * none. */
#define GPUMON_EVENT_XID "xid"

/* ---------------------------------------------------------------------------------------------
 * Processes
 * ------------------------------------------------------------------------------------------- */

/* Bits of gpumon_process.flags */
enum {
	GPUMON_PROC_COMPUTE = 1u << 0,   /* listed by the compute-process call */
	GPUMON_PROC_GRAPHICS = 1u << 1,  /* listed by the graphics-process call */
	GPUMON_PROC_USED_KNOWN = 1u << 2,/* used_bytes holds a value (NVML may say "not available") */
	GPUMON_PROC_FOREIGN = 1u << 3,   /* pid is not in our /proc: another PID namespace (container) */
	GPUMON_PROC_USER_KNOWN = 1u << 4,/* uid and user hold values */
	GPUMON_PROC_CMDLINE_KNOWN = 1u << 5, /* cmdline holds a value */
	GPUMON_PROC_NAME_KNOWN = 1u << 6,/* name holds a value */
	GPUMON_PROC_MIG = 1u << 7,       /* gpu/compute instance ids hold values (MIG enabled) */
	GPUMON_PROC_PPID_KNOWN = 1u << 8,/* ppid holds a value */
	GPUMON_PROC_RANK_KNOWN = 1u << 9,/* the environment was read: rank says what it holds (rank.rank
					    still -1 when the process is no distributed worker) */
};

/* A distributed worker's place, read from the variables its launcher set in its environment
 * (/proc/PID/environ, readable by the process's own user and root). torchrun's variables win over
 * Slurm's (torchrun under srun), Slurm's over Open MPI's, and those over PMIx's; DeepSpeed and
 * Accelerate launch through one of these. */
typedef struct gpumon_rank {
	int rank;           /* global rank: RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMIX_RANK; -1 none */
	int local_rank;     /* on its node: LOCAL_RANK, SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK; -1 */
	int world_size;     /* WORLD_SIZE, SLURM_NTASKS, OMPI_COMM_WORLD_SIZE; -1 */
	int node_rank;      /* GROUP_RANK, SLURM_NODEID; -1 */
	char job_id[64];    /* TORCHELASTIC_RUN_ID, else SLURM_JOB_ID; "" when none */
	char launcher[16];  /* "torchrun", "slurm", "mpi", or "" */
	char master[80];    /* MASTER_ADDR:MASTER_PORT, the rendezvous of torch.distributed; "" none */
} gpumon_rank;

/* Bits of gpumon_owner.present */
enum {
	GPUMON_OWNER_CONTAINER = 1u << 0,  /* runtime and container_id hold values */
	GPUMON_OWNER_POD = 1u << 1,        /* pod_uid holds a value (a Kubernetes pod) */
	GPUMON_OWNER_POD_NAMES = 1u << 2,  /* k8s_namespace, pod and container hold values (read from the
					      node's /var/log/pods, when it is there to read) */
	GPUMON_OWNER_SLURM = 1u << 3,      /* slurm_job (and slurm_step when the cgroup names one) */
	GPUMON_OWNER_UNIT = 1u << 4,       /* unit: the systemd service (a scope, such as a login session or an app,
					      is no owner, nor a user@UID.service manager) */
	GPUMON_OWNER_UNRESOLVED = 1u << 5, /* the pid is not in our /proc (another PID namespace): its
					      owner is unknown, and nothing is guessed */
};

/* Who a GPU process belongs to on a cluster node, from /proc/PID/cgroup (no daemon is asked).
 * Strings are "" when not known; `present` says which hold values. */
typedef struct gpumon_owner {
	unsigned present;        /* GPUMON_OWNER_* */
	char runtime[16];        /* "docker", "containerd", "cri-o", "podman"; "" when the cgroup does
				    not say (a bare id under kubepods, cgroupfs driver) */
	char container_id[72];   /* 64 hex digits */
	char pod_uid[40];        /* "8f2b5d0e-3c1a-4f7e-9b2d-0a1b2c3d4e5f" */
	char k8s_namespace[64];
	char pod[256];
	char container[64];
	char slurm_job[24];      /* "1234" */
	char slurm_step[24];     /* "0", "batch", "extern", "interactive"; "" when the job's own cgroup */
	char unit[128];          /* "train.service", "jupyter.service" */
} gpumon_owner;

typedef struct gpumon_process {
	unsigned pid;                  /* host PID as NVML reports it */
	unsigned flags;                /* GPUMON_PROC_* */
	uint64_t used_bytes;           /* GPU memory the process holds on this device */
	unsigned gpu_instance_id;      /* MIG ids, valid with GPUMON_PROC_MIG */
	unsigned compute_instance_id;
	unsigned uid;
	unsigned ppid;                 /* parent pid, from /proc (valid with GPUMON_PROC_PPID_KNOWN) */
	char user[64];                 /* login name, or the uid in decimal when it has none */
	char name[256];                /* process name as nvidia-smi's process_name shows it */
	char cmdline[512];             /* /proc/PID/cmdline, arguments joined by spaces, truncated */
	gpumon_owner owner;            /* container, pod, Slurm job or systemd unit, from /proc */
	gpumon_rank rank;              /* its place in a distributed job (GPUMON_PROC_RANK_KNOWN) */
} gpumon_process;

/*
 * How every front end names an owner, in one short phrase written into buf (NUL-terminated,
 * truncated to len): "pod NAMESPACE/POD" (with names), "pod UID" (without), "slurm job 1234" or
 * "slurm job 1234.0" (with a step), "RUNTIME ID12" (a container outside Kubernetes: the runtime and
 * the first 12 digits of its id, as `docker ps` shows it; "container ID12" when the runtime is not
 * known), "unit NAME", "another PID namespace"
 * (unresolved), or "" when nothing is known. The most specific wins in that order. Returns the
 * length of the phrase.
 */
GPUMON_API size_t gpumon_owner_describe(const gpumon_owner *o, char *buf, size_t len);

/*
 * The global rank of p when it is a distributed job's worker — its environment was read
 * (GPUMON_PROC_RANK_KNOWN) and names a launcher and a rank — else -1: a process that is no worker,
 * one whose environment could not be read (another user's), one in a Slurm allocation that srun did
 * not start, or one that only knows a rendezvous. The one test every front end uses.
 */
GPUMON_API int gpumon_process_rank(const gpumon_process *p);

/*
 * Lists the processes holding memory on device dev: compute and graphics lists merged (a pid in
 * both appears once, with both flags), each completed from /proc. A pid missing from /proc is
 * kept and flagged GPUMON_PROC_FOREIGN. Order: used_bytes descending, unknown last, then pid.
 *
 * On success sets *out to a new array of *count entries (NULL when 0) that the caller frees with
 * gpumon_free(). Returns 0, or GPUMON_E_LOST / GPUMON_E_NOT_FOUND / GPUMON_E_NOMEM /
 * GPUMON_E_NOT_SUPPORTED (the driver has no process call) / another status.
 */
GPUMON_API int gpumon_process_list(gpumon *g, unsigned dev, gpumon_process **out, size_t *count);

/*
 * Host figures of any process on this machine, read from /proc (GPUMON_PROC_ROOT when set: the
 * host's /proc mounted into a container), with no handle and no driver. These calls keep no cache
 * and no state: they may be called from any thread.
 */

/* Bits of gpumon_host_process.present; GPUMON_HOST_USER and GPUMON_HOST_RANK are also the `fields`
 * a caller asks for. */
enum {
	GPUMON_HOST_STAT = 1u << 0,     /* ppid, state, start_ticks, start_wall_ns, cpu_ns, rss_bytes
					   (always read: with the pid they tell which process this is) */
	GPUMON_HOST_USER = 1u << 1,     /* uid and user (/proc/PID/status) */
	GPUMON_HOST_RANK = 1u << 2,     /* the environment was read: rank ... launcher say what it holds
					   (still -1 / "" when the process is no distributed worker) */
	GPUMON_HOST_OWN_PIDS = 1u << 3, /* the /proc read numbers pids as the caller's PID namespace does,
					   so kill(pid) reaches this very process; not set when
					   GPUMON_PROC_ROOT is another namespace's /proc (or one whose
					   `self` does not say) */
};

typedef struct gpumon_host_process {
	unsigned size;             /* sizeof(gpumon_host_process): set by the caller */
	unsigned pid, ppid;
	unsigned present;          /* GPUMON_HOST_* */
	unsigned uid;              /* real uid */
	char user[64];             /* login name, or the uid in decimal when it has none */
	uint64_t start_ticks;      /* /proc/PID/stat starttime, clock ticks since boot: with pid, the
				      process's identity (a reused pid has another) */
	uint64_t start_wall_ns;    /* the same moment as CLOCK_REALTIME nanoseconds */
	uint64_t cpu_ns;           /* CPU time used, user + system */
	uint64_t rss_bytes;        /* resident memory */
	char state;                /* R, S, D, Z, T, ... as /proc/PID/stat has it */
	gpumon_rank rank;          /* a distributed worker's place (GPUMON_HOST_RANK); -1 and "" each
				      when not known */
} gpumon_host_process;

/*
 * What /proc says of pid: always its stat figures (GPUMON_HOST_STAT), and those of `fields`
 * (GPUMON_HOST_USER, GPUMON_HOST_RANK) that could be read: a field group that could not be read
 * (another user's environment) leaves its bit clear in out->present, never an error. The
 * environment is read in bounded memory; entries without '=' or with odd values are skipped.
 *
 * out->size must be set (an older, smaller struct gets the fields it has). Returns 0;
 * GPUMON_E_NOT_FOUND when the pid is not in that /proc (it has exited, or is another PID
 * namespace's); GPUMON_E_INVAL for pid 0, a NULL out, a bad size or an unknown field bit.
 */
GPUMON_API int gpumon_host_process_read(unsigned pid, unsigned fields, gpumon_host_process *out);

/*
 * The process tree below root: root and its descendants (children, grandchildren ...) from one scan
 * of /proc (at most max_procs processes read; 0 = 1,000,000). A process that exits during the scan
 * is skipped. On success *pids is a new array of *count pids, ascending, root always among them,
 * which the caller frees with gpumon_free().
 *
 * Returns 0; GPUMON_E_NOT_SUPPORTED when GPUMON_PROC_ROOT names a /proc that does not number pids
 * as the caller's PID namespace does (GPUMON_HOST_OWN_PIDS), since a caller signals these pids;
 * GPUMON_E_IO when /proc cannot be listed; GPUMON_E_NOMEM; GPUMON_E_INVAL (root 0, NULL pointers).
 */
GPUMON_API int gpumon_host_process_tree(unsigned root, size_t max_procs, unsigned **pids, size_t *count);

/* ---------------------------------------------------------------------------------------------
 * Records: the one stream that everything reads and writes. The sampler produces device and
 * process records; a training process produces framework samples; a front end adds events and the
 * job's processes. A recording stores every kind, its reader gives them back as they were written,
 * and the run model (below) takes them, live or from a file, through the same call.
 * ------------------------------------------------------------------------------------------- */

/* A framework sample from inside a training process: its allocator's figures (a value is absent
 * when its *_known is 0). */
typedef struct gpumon_framework_sample {
	uint64_t t_ns;              /* CLOCK_MONOTONIC of this machine */
	unsigned pid;               /* the reporting process */
	int device;                 /* the framework's device index (CUDA order), -1 unknown */
	int64_t step;               /* training step, -1 unknown */
	uint64_t allocated_bytes, reserved_bytes, max_allocated_bytes;
	int allocated_known, reserved_known, max_allocated_known;
	uint64_t limit_bytes;       /* the allocator's cap (torch's per-process fraction ...); 0 none known */
	char framework[16];         /* "torch", "paddle", ... */
} gpumon_framework_sample;

/* Kinds of gpumon_record */
enum {
	GPUMON_REC_DEVICE = 1,       /* a device sample: it changed, or a heartbeat */
	GPUMON_REC_PROCESS = 2,      /* a process appeared on the device, or its memory changed */
	GPUMON_REC_PROCESS_GONE = 3, /* a process is no longer listed on the device */
	GPUMON_REC_LOST = 4,         /* the device reported itself lost; no more records from it */
	GPUMON_REC_FRAMEWORK = 5,    /* a framework sample (framework) */
	GPUMON_REC_EVENT = 6,        /* an event: event_kind (a GPUMON_EVENT_*, below), event_text */
	GPUMON_REC_JOB = 7,          /* process->pid belongs to the job (a launched job's process tree) */
};

/* Event kinds (gpumon_record.event_kind) that front ends write and the run model reads. Any other
 * short word is kept and shown as it is. The sampler's are GPUMON_EVENT_STALE, _ANSWERING and
 * _XID; those about out-of-memory GPUMON_EVENT_OOM, _OOM_DETAIL, _OOM_FIGURES and _SNAPSHOT. */
#define GPUMON_EVENT_ALERT "alert"   /* an alert given live (text: its words); the model marks its own
					alert of that moment live */
#define GPUMON_EVENT_MARKER "marker" /* a mark the job set (text: its label) */
#define GPUMON_EVENT_NOTE "note"     /* what gpumon did or saw (text: a sentence) */
#define GPUMON_EVENT_STEP "step"     /* the job reached a training step (text: the step number); the
					model skips these, framework samples say steps better */

typedef struct gpumon_record {
	int kind;                      /* GPUMON_REC_* */
	unsigned dev;                  /* device position (DEVICE, PROCESS, PROCESS_GONE, LOST, and the
					  sampler's EVENTs) */
	uint64_t t_ns;                 /* CLOCK_MONOTONIC; for FRAMEWORK equal to framework.t_ns */
	/* DEVICE: the sample, and the exact extremes of memory_used_bytes over every sample taken since
	   the previous device record of this device (this one included); interval_samples 0: unknown */
	gpumon_device_sample sample;
	uint64_t used_min_bytes, used_max_bytes;
	uint64_t used_max_t_ns;        /* when the maximum was seen */
	unsigned interval_samples;     /* samples that interval held */
	/* PROCESS / PROCESS_GONE: the process as listed; JOB: process->pid (and its command line when
	   known). NULL for every other kind. Like the event strings below, it belongs to whoever made
	   the record: a sampler's stays valid until the next gpumon_sampler_poll, a reader's until its
	   next call; a caller that keeps a record longer copies *process. */
	const gpumon_process *process;
	/* FRAMEWORK */
	gpumon_framework_sample framework;
	/* EVENT: kind (a short word) and text (may be NULL); the strings belong to whoever made the
	   record (a reader's stay valid until its next call) */
	const char *event_kind, *event_text;
} gpumon_record;

/* sizeof(gpumon_record) on LP64 targets (x86-64, aarch64): 240 bytes, the stride of the arrays
 * gpumon_sampler_poll fills and gpumon_recording_write and gpumon_model_add read. It is part of the
 * ABI: the library is built only when its record has this size. */
#define GPUMON_RECORD_SIZE 240

/* ---------------------------------------------------------------------------------------------
 * Sampler: background threads, one per GPU, that sample the chosen GPUs and their processes at a
 * fixed period (absolute deadlines on CLOCK_MONOTONIC, no spinning), keep every raw device sample of
 * the last seconds in a ring when asked (the flight recorder), and hand change-only records to one
 * consumer through a bounded queue. A slow consumer never stalls sampling: records that do not fit are
 * dropped and counted.
 * A GPU in a bad state can block a driver call for seconds; that delays its own thread only. When a
 * call on a GPU has not returned within 2 s, an EVENT record of kind GPUMON_EVENT_STALE is queued
 * for it (dev set): its samples are missing from then on. When the call returns, an EVENT of kind
 * GPUMON_EVENT_ANSWERING follows, and sampling goes on; the answer of a call that took 2 s or more
 * is dropped. Their event_text (a sentence naming the GPU) stays valid until the sampler is
 * destroyed.
 * Thread rules: one consumer thread calls the functions below while the sampling threads run.
 * gpumon_sampler_destroy() may be called from another thread while the consumer waits in
 * gpumon_sampler_poll(): the wait ends, and destroy returns after poll has; no other call may race
 * with destroy.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_sampler gpumon_sampler;

/* event_kind of the sampler's EVENT records */
#define GPUMON_EVENT_STALE "stale"         /* a driver call on GPU dev has not returned in 2 s */
#define GPUMON_EVENT_ANSWERING "answering" /* GPU dev answers again */

/* The dev of an EVENT record that names no GPU: a recording's events of kinds that name one
 * (GPUMON_EVENT_STALE, GPUMON_EVENT_ANSWERING, GPUMON_EVENT_XID) keep their GPU; read from a
 * recording written before they did, and every event of other kinds read back, dev is this. */
#define GPUMON_DEV_NONE 0xFFFFFFFFu

typedef struct gpumon_sampler_config {
	unsigned size;              /* sizeof(gpumon_sampler_config) */
	unsigned period_us;         /* memory sampling period; 0 = 10000 (10 ms); at least 1000 */
	unsigned slow_period_us;    /* utilization, temperature, power, clocks; 0 = 1000000 (1 s) */
	unsigned process_period_us; /* process lists; 0 = 100000 (100 ms); UINT32_MAX = never */
	unsigned heartbeat_ms;      /* a device record at least this often even when nothing
				       changed; 0 = 1000 */
	unsigned ring_seconds;      /* flight recorder length, up to 3600; 0 = none (no memory for it,
				       nothing written a sample; gpumon_sampler_ring says so) */
	unsigned queue_records;     /* queue capacity in records; 0 = 8192 */
	unsigned slow_fields;       /* GPUMON_F_* read at slow_period_us; 0 = utilization,
				       temperature, power and clocks (the energy counter is slow on
				       some drivers: ask for it explicitly) */
	const unsigned *devices;    /* device positions to sample; NULL = all */
	unsigned ndevices;
} gpumon_sampler_config;

typedef struct gpumon_sampler_stats {
	uint64_t samples;       /* device samples taken (all devices) */
	uint64_t records;       /* records queued */
	uint64_t dropped;       /* records lost because the queue was full */
	uint64_t overruns;      /* periods missed because sampling took longer than the period (all
				   devices) */
	uint64_t errors;        /* failed driver reads (other than lost GPUs) */
	uint64_t busy_ns;       /* time the sampling threads spent working (not sleeping), summed */
	uint64_t started_ns;    /* CLOCK_MONOTONIC at start */
} gpumon_sampler_stats;

/*
 * Starts sampling. cfg may be NULL for the defaults. The sampler uses g until destroyed: destroy it
 * before gpumon_destroy(g). Returns 0 and sets *out, or GPUMON_E_INVAL (bad period, unknown device;
 * message on g), GPUMON_E_NOMEM.
 */
GPUMON_API int gpumon_sampler_create(gpumon *g, const gpumon_sampler_config *cfg, gpumon_sampler **out);

/*
 * Takes up to cap queued records, oldest first, into buf; sets *n. Waits up to timeout_ms
 * (0: do not wait, -1: until a record arrives or the sampler stops) when none is queued.
 * The processes the records point to are the sampler's, valid until the next poll (or the
 * sampler's destruction). Returns 0, or GPUMON_E_INVAL (the message says which argument).
 */
GPUMON_API int gpumon_sampler_poll(gpumon_sampler *s, gpumon_record *buf, size_t cap, size_t *n, int timeout_ms);

/*
 * A file descriptor that is readable while records are queued, for a consumer that waits on other
 * descriptors too (a terminal's keys): poll() it with them, then gpumon_sampler_poll(..., 0) until
 * that gives none. It becomes readable once a GPU's sampling round has queued all its records (its
 * sample and its processes together) or an event was queued; records queued before the first call
 * make it readable at the end of the next round. Made by the first call (one per sampler, the same each time), owned and closed by
 * the sampler (gpumon_sampler_destroy): never read or close it. Returns it, or -1 (errno says why:
 * no descriptor to spare).
 */
GPUMON_API int gpumon_sampler_fd(gpumon_sampler *s);

/* Copies the counters (safe while sampling). */
GPUMON_API void gpumon_sampler_stats_get(gpumon_sampler *s, gpumon_sampler_stats *out);

/*
 * The flight recorder: copies the raw samples of device dev taken at or after since_ns, oldest
 * first, into a new array (free with gpumon_free()) of *n entries. Returns 0, GPUMON_E_NOT_FOUND
 * (dev not sampled, or no flight recorder: ring_seconds was 0), GPUMON_E_NOMEM.
 */
GPUMON_API int gpumon_sampler_ring(gpumon_sampler *s, unsigned dev, uint64_t since_ns,
				   gpumon_device_sample **out, size_t *n);

/* The message of the last failure of a call on the sampler (poll, ring; "" none), valid until the
 * next call. Its threads' failures are counted (gpumon_sampler_stats.errors) and told by events,
 * and a failed create leaves its message on g. */
GPUMON_API const char *gpumon_sampler_errmsg(const gpumon_sampler *s);

/* Stops the threads and frees the sampler; records still queued are discarded. NULL is a no-op.
 * A thread blocked in a driver call is waited for at most 0.2 s: it is then left to end by itself
 * when the call returns (a GPU that hangs for good keeps it, and g's memory, until the process
 * exits). */
GPUMON_API void gpumon_sampler_destroy(gpumon_sampler *s);

/* ---------------------------------------------------------------------------------------------
 * Recordings: a SQLite file (WAL) holding a run's metadata, its devices and every kind of record.
 * The format is documented in docs/recording.md and versioned (PRAGMA user_version); the writer and
 * the reader below are its only code. Readers may open the file while it is written. Writes are
 * batched in transactions committed at least every 200 ms, so a kill -9 loses at most the last
 * 0.25 s.
 * Thread rules: one thread at a time per recording or reader; different ones are independent.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_recording gpumon_recording;

/* What a recording says about its run (the `meta` table). */
typedef struct gpumon_run_meta {
	unsigned size;           /* sizeof(gpumon_run_meta) when given to the library */
	const char *kind;        /* "record" (system-wide) or "run" (a launched job); NULL = "record" */
	const char *command;     /* the job's command line, shell-quoted; NULL when none */
	const char *settings;    /* settings applied to the job, one "NAME=VALUE" per line; NULL none */
	const char *host;        /* NULL unknown (the writer fills it in) */
	const char *driver_version; /* NULL unknown (the writer fills it in) */
	unsigned job_pid;        /* the job's pid, 0 when none */
	uint64_t start_mono_ns;  /* the start on both clocks; 0 unknown (the writer reads the clocks) */
	uint64_t start_wall_ns;
	uint64_t end_mono_ns;    /* 0: no end recorded (killed, or still written) */
	int exit_status;         /* the job's exit status; -1 none or unknown */
	uint64_t limit_bytes;    /* a per-process ceiling set for the job (gpumon run --limit); 0 none */
} gpumon_run_meta;

/*
 * Creates the recording file at path (GPUMON_E_EXISTS when it exists: nothing is overwritten),
 * writes the schema, the run metadata (host, driver, gpumon version, start time on both clocks —
 * meta's when it gives both, else read now — meta's kind, command, settings, job pid and limit) and
 * every device of g. meta may be NULL. On failure
 * *out is still set when possible, to a handle holding the message, which the caller destroys;
 * GPUMON_E_IO names the path and the reason.
 */
GPUMON_API int gpumon_recording_create(gpumon *g, const char *path, const gpumon_run_meta *meta,
				       gpumon_recording **out);

/* The last error message of the recording ("" when none); valid until the next call on it. */
GPUMON_API const char *gpumon_recording_errmsg(const gpumon_recording *r);

/* The run's metadata as written: the start on both clocks as the writer read them (or as meta gave
 * them, when it gave both), and after gpumon_recording_finish the end and exit status. Lets a front
 * end count times from the recording's own start and end, as a reader of the file will. Valid until
 * the recording is destroyed. */
GPUMON_API const gpumon_run_meta *gpumon_recording_meta(const gpumon_recording *r);

/*
 * Appends records of any kind. Committed when the open transaction is older than 200 ms, or by
 * gpumon_recording_commit / _finish. A batch with a bad record (unknown kind, a device not in the
 * recording, an event without a kind) is refused whole with GPUMON_E_INVAL. Returns 0, or
 * GPUMON_E_IO (disk full, file removed ...): the recording then stops accepting writes (every later
 * write returns GPUMON_E_IO at once) and what was committed stays readable.
 */
GPUMON_API int gpumon_recording_write(gpumon_recording *r, const gpumon_record *recs, size_t n);

/* Commits what is pending now. */
GPUMON_API int gpumon_recording_commit(gpumon_recording *r);

/*
 * The end of the run: stores the end time and the job's exit status (exit_status < 0: none),
 * commits and checkpoints the WAL into the main file. Returns the first error seen, 0 when none.
 * Later writes return GPUMON_E_INVAL.
 */
GPUMON_API int gpumon_recording_finish(gpumon_recording *r, int exit_status);

/* Frees r (a recording not finished keeps what was committed, without an end). NULL: no-op. */
GPUMON_API void gpumon_recording_destroy(gpumon_recording *r);

/* Reading a recording: its metadata and devices, then every record merged in time order, in
 * memory that does not grow with the file. A damaged or cut-off file is read as far as it is
 * intact: the walk skips damaged pages and gpumon_reader_damage() names what was lost. */
typedef struct gpumon_reader gpumon_reader;

/*
 * Opens path read-only. Returns 0 and sets *out, or GPUMON_E_IO (cannot be read, a directory),
 * GPUMON_E_INVAL (not a gpumon recording, or a format this library does not read: the message
 * says which), GPUMON_E_NOMEM. *out is set when possible to a reader holding the message, which
 * the caller destroys.
 */
GPUMON_API int gpumon_reader_create(const char *path, gpumon_reader **out);

/* The run's metadata; the strings stay valid until the reader is destroyed. start_mono_ns is the
 * first record's time when the file lacks it (then the damage says so). */
GPUMON_API const gpumon_run_meta *gpumon_reader_meta(const gpumon_reader *r);

/* The devices of the recording: how many, and each (index = position, lost = it was lost). */
GPUMON_API unsigned gpumon_reader_device_count(const gpumon_reader *r);
GPUMON_API int gpumon_reader_device(const gpumon_reader *r, unsigned i, gpumon_device_info *out);

/*
 * The next record: returns 1 and fills *out, 0 at the end, or a negative status when the file
 * failed under the walk (what came before is good; the damage names the loss). The tables are
 * merged in time order, each read in the order it was written (time order for what one writer
 * wrote; nothing is sorted, so memory stays bounded); a row without a positive time is skipped as
 * damage. Process records carry what the recording knows of the process (user, name, command
 * line); strings of EVENT records stay valid until the next call.
 */
GPUMON_API int gpumon_reader_next(gpumon_reader *r, gpumon_record *out);

/* One sentence naming what could not be read ("" when the file is whole so far). */
GPUMON_API const char *gpumon_reader_damage(const gpumon_reader *r);

/* The message of the reader's last failure ("" none; "Errors" at the top). */
GPUMON_API const char *gpumon_reader_errmsg(const gpumon_reader *r);

/* Closes the file and frees the reader. NULL is a no-op. */
GPUMON_API void gpumon_reader_destroy(gpumon_reader *r);

/* ---------------------------------------------------------------------------------------------
 * Leak detection: pure analysis of one series of memory figures, fed point by point; the verdict
 * after the last point is the same whether it was fed live or from a file. A leak is a floor that
 * keeps rising: the series is cut into windows on its axis (training steps when every point has
 * one, else time) that hold their minimum, and the verdict is drawn from those minima
 * (docs/leak-detection.md). Windows are measured on the axis, not in points, so the same run fed
 * every 100 ms, every second, or on change with heartbeats gets the same verdict.
 * Thread rules: one thread at a time per detector.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_leak gpumon_leak;

/* Modes of gpumon_leak_config. Their values are none of the verdicts' below (GPUMON_LEAK_NONE ...),
 * so that a verdict given for a mode is refused. */
enum {
	GPUMON_LEAK_SAMPLES = 0x10, /* points are measurements; between them nothing is known */
	GPUMON_LEAK_HELD = 0x11,    /* a step function: each value holds until the next point (a sampler's
				       change-only rows with heartbeats, where no row means no change) */
};

typedef struct gpumon_leak_config {
	unsigned size;           /* sizeof(gpumon_leak_config) */
	int mode;                /* GPUMON_LEAK_SAMPLES or GPUMON_LEAK_HELD; 0 (a zeroed config): samples */
	int time_axis;           /* 1: judge in time even when steps are given */
} gpumon_leak_config;

/* Verdicts */
enum {
	GPUMON_LEAK_INSUFFICIENT_DATA = 0, /* too short a span to tell */
	GPUMON_LEAK_NONE = 1,
	GPUMON_LEAK_SUSPECTED = 2,
};

typedef struct gpumon_leak_result {
	int verdict;                    /* GPUMON_LEAK_* */
	double rate_bytes_per_step;     /* growth of the floor; 0 when steps are unknown */
	double rate_bytes_per_second;
	int64_t start_step;             /* where the growth started; -1 unknown */
	uint64_t start_t_ns;            /* likewise in time; 0 unknown */
	double confidence;              /* 0..1 */
	uint64_t floor_bytes;           /* the fitted floor at the last point (SUSPECTED only) */
	uint64_t points;                /* points fed */
	int alert;                      /* 1: SUSPECTED for long enough to tell someone: what online
					   alerts use */
	uint64_t alert_t_ns;            /* the first point at which alert was set; 0 never */
} gpumon_leak_result;

/* Creates a detector; cfg NULL = samples, axis automatic. Returns 0 / GPUMON_E_INVAL (a size this
 * library does not know, a mode that is not one) / _NOMEM. */
GPUMON_API int gpumon_leak_create(const gpumon_leak_config *cfg, gpumon_leak **out);

/*
 * Feeds one point: step (-1 when unknown), time (CLOCK_MONOTONIC ns) and the figure in bytes.
 * Points must come in time order, and steps must not go back (a restarted counter is a new series):
 * GPUMON_E_INVAL otherwise, the point ignored. Memory stays bounded: the detector runs for days.
 */
GPUMON_API int gpumon_leak_add(gpumon_leak *l, int64_t step, uint64_t t_ns, uint64_t bytes);

/* The verdict on what was fed so far. */
GPUMON_API void gpumon_leak_result_get(const gpumon_leak *l, gpumon_leak_result *out);

/* The message of the detector's last failure ("" none; "Errors" at the top). */
GPUMON_API const char *gpumon_leak_errmsg(const gpumon_leak *l);

/* Frees the detector; NULL is a no-op. */
GPUMON_API void gpumon_leak_destroy(gpumon_leak *l);

/* ---------------------------------------------------------------------------------------------
 * Peaks: the highest figure of a series and of each window of time, with when and whose, in
 * bounded memory. Windows start at the first point and are window_ns long; when more than
 * max_windows would be needed, neighbours merge pairwise and windows become twice as long.
 * Thread rules: one thread at a time per tracker.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_peaks gpumon_peaks;

typedef struct gpumon_peak {
	uint64_t bytes;       /* the highest figure */
	uint64_t t_ns;        /* when it was seen (the first time, if it repeats) */
	int64_t owner_pid;    /* the process whose rise made it, as the caller said; -1 unknown */
	int64_t largest_pid;  /* the largest holder at that moment; -1 unknown */
	uint64_t start_t_ns;  /* the window: [start, end); the whole series for the global peak */
	uint64_t end_t_ns;
	uint64_t points;      /* points in the window */
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_peak;

/* Creates a tracker. window_ns > 0, 2 <= max_windows <= 4096. GPUMON_E_INVAL / GPUMON_E_NOMEM. */
GPUMON_API int gpumon_peaks_create(uint64_t window_ns, unsigned max_windows, gpumon_peaks **out);

/* Feeds one point (CLOCK_MONOTONIC ns, bytes, the pid whose rise made it and the largest holder,
 * each -1 unknown). Points before the first one are refused with GPUMON_E_INVAL; later points may
 * come slightly out of order. */
GPUMON_API int gpumon_peaks_add(gpumon_peaks *p, uint64_t t_ns, uint64_t bytes, int64_t owner_pid,
				int64_t largest_pid);

/* The global peak: 0, or GPUMON_E_NOT_FOUND when nothing was fed. */
GPUMON_API int gpumon_peaks_global(const gpumon_peaks *p, gpumon_peak *out);

/* Copies the peaks of the windows that hold points, oldest first, into out[0..cap-1]; returns
 * how many there are (which may exceed cap). */
GPUMON_API size_t gpumon_peaks_windows(const gpumon_peaks *p, gpumon_peak *out, size_t cap);

/* The message of the tracker's last failure (a point refused by gpumon_peaks_add; "" none). */
GPUMON_API const char *gpumon_peaks_errmsg(const gpumon_peaks *p);

/* Frees the tracker; NULL is a no-op. */
GPUMON_API void gpumon_peaks_destroy(gpumon_peaks *p);

/* ---------------------------------------------------------------------------------------------
 * What a framework says when it runs out of memory: its message (PyTorch, Paddle, JAX/XLA,
 * TensorFlow) read into figures, once, here. Pure functions.
 * ------------------------------------------------------------------------------------------- */

/* Bits of gpumon_oom_figures.known: which figures hold values */
enum {
	GPUMON_FIG_REQUEST = 1u << 0,      /* request_bytes: the allocation that failed */
	GPUMON_FIG_CAPACITY = 1u << 1,     /* capacity_bytes: the device's memory as the framework saw it
					      (torch's "total capacity": the driver's reserve left out) */
	GPUMON_FIG_FREE = 1u << 2,         /* free_bytes: free on the device then (the driver's figure; Paddle:
					      what was available to it) */
	GPUMON_FIG_PROCESS = 1u << 3,      /* process_bytes: this process on the device, memory outside the
					      allocator included (torch: "this process has X memory in use") */
	GPUMON_FIG_ALLOCATED = 1u << 4,    /* allocated_bytes: held by tensors */
	GPUMON_FIG_RESERVED = 1u << 5,     /* reserved_bytes: held by the allocator, allocated + cached
					      (torch: allocated + "reserved but unallocated"; Paddle: what
					      "has been allocated" from the device; XLA: its pool) */
	GPUMON_FIG_CAP = 1u << 6,          /* cap_bytes: the most the allocator may take (torch's "allowed"
					      of a per-process fraction, XLA's limit) */
	GPUMON_FIG_DEVICE = 1u << 7,       /* device: the framework's device index (CUDA order) */
	GPUMON_FIG_LARGEST_FREE = 1u << 8, /* largest_free_bytes: the allocator's largest free block */
	GPUMON_FIG_PEAK = 1u << 9,         /* peak_bytes: the most the allocator had in use */
};

#define GPUMON_OOM_MAX_OTHERS 8

/* The figures of one out-of-memory report; a figure is a value only when its bit is set. */
typedef struct gpumon_oom_figures {
	unsigned known;            /* GPUMON_FIG_* */
	char framework[16];        /* "torch", "paddle", "jax", "tf"; "" when the text does not tell */
	unsigned pid;              /* the process that reported it; 0 unknown (a message names none) */
	int device;                /* with GPUMON_FIG_DEVICE */
	uint64_t request_bytes, capacity_bytes, free_bytes, process_bytes, allocated_bytes, reserved_bytes,
		cap_bytes, largest_free_bytes, peak_bytes;
	unsigned nothers;          /* other processes the message names, in its order (torch 2.1 on:
				      "Process 870 has 60.60 GiB memory in use"); at most
				      GPUMON_OOM_MAX_OTHERS are kept */
	struct {
		unsigned pid;
		uint64_t bytes;
	} others[GPUMON_OOM_MAX_OTHERS];
} gpumon_oom_figures;

/*
 * Reads the figures of an out-of-memory report from text (len bytes, need not be NUL-terminated;
 * one line or many: a traceback's tail, an allocator's log): PyTorch's CUDA message in the
 * wordings of torch 1.x ("Tried to allocate X (GPU N; T total capacity; A already allocated; F
 * free; C allowed; R reserved in total by PyTorch)") and 2.1 on ("GPU N has a total capacity of T
 * of which F is free. Process P has X memory in use. Including non-PyTorch memory, this process
 * has X memory in use. C allowed; Of the allocated memory A is allocated by PyTorch, and U is
 * reserved by PyTorch but unallocated."); Paddle's ("Cannot allocate X memory on GPU N, Y memory
 * has been allocated and available memory is only Z"); JAX/XLA's ("Out of memory while trying to
 * allocate X [bytes] [with allocator GPU_0_bfc on device N]", the BFC allocator's "(rounded to N)"
 * and its Stats: Limit, InUse, MaxInUse, LargestFreeBlock); TensorFlow's ("OOM when allocating
 * tensor with shape[...] and type T on .../device:GPU:N": the request is the shape's elements
 * times the type's size; an unknown type gives no request). Sizes are read as each framework
 * prints them (torch's "1.50 GiB", "0 bytes"; Paddle's "1.000000GB", binary; XLA's "1.00GiB"); a
 * rounded figure is taken as printed: the decimal figure times its unit, computed exactly and
 * rounded to the nearest byte, halves up (139.80 GiB is 150109106995), whatever the caller's
 * locale. The BFC allocator's exact "(rounded to N)" is taken over a rounded request, in either
 * order; otherwise, when the text holds several reports, the first one's figures stay, and a
 * process is listed once. A figure above GPUMON_MAX_BYTES, a device above 65535, a pid above 32
 * bits are left out. TensorFlow's "The caller indicates that this is not a failure" lines give
 * nothing. The framework is named only when a figure of its words was read; XLA's words are
 * "jax" when the text says JaxRuntimeError or XlaRuntimeError, else "tf" when it says tensorflow
 * or "OOM when allocating", else "jax" when it says RESOURCE_EXHAUSTED, else "" (the BFC
 * allocator's log alone). Fills *out (cleared first) and returns how many bits of known it set
 * (0: none; others[] are not counted), or GPUMON_E_INVAL when text or out is NULL.
 */
GPUMON_API int gpumon_oom_message_parse(const char *text, size_t len, gpumon_oom_figures *out);

/*
 * Whether a line of a job's output says it ran out of GPU memory (PyTorch, Paddle, JAX/XLA,
 * TensorFlow, CUDA): returns the framework's name ("PyTorch", ...; static storage) or NULL. line
 * need not be NUL-terminated. gpumon_oom_message_longest() is the longest text looked for, for
 * scanners that cut long lines.
 */
GPUMON_API const char *gpumon_oom_message_match(const char *line, size_t len);
GPUMON_API size_t gpumon_oom_message_longest(void);

/*
 * Whether a line carries figures of an out-of-memory report without saying by itself that the job
 * ran out (an allocator's log around the failure: the BFC allocator's "ran out of memory trying to
 * allocate" line and its Stats lines; not the lines TensorFlow marks "not a failure"): returns 1 or
 * 0. A Stats line is exactly a label of the BFC allocator's (Limit:, InUse:, MaxInUse:,
 * NumAllocs:, MaxAllocSize:, Reserved:, PeakReserved:, LargestFreeBlock:) at the line's start, at
 * least 4 blanks, then digits only (a line end aside), so that a job's "Limit: 5" is none. NULL: 0.
 * A scanner keeps such lines as GPUMON_EVENT_OOM_DETAIL events; the run model uses them only next
 * to an out-of-memory moment.
 */
GPUMON_API int gpumon_oom_message_detail(const char *line, size_t len);

/* ---------------------------------------------------------------------------------------------
 * The allocator's snapshot at an out-of-memory (PyTorch's torch.cuda.memory._snapshot(), as JSON):
 * condensed, once, here, into what holds the memory — live bytes by allocation site, the segment
 * map, the free memory no request of that size could use. Pure functions.
 * ------------------------------------------------------------------------------------------- */

#define GPUMON_SNAPSHOT_SITES 16
#define GPUMON_SNAPSHOT_SEGMENTS 16

/* Bits of gpumon_alloc_snapshot.known */
enum {
	GPUMON_SNAP_REQUEST = 1u << 0, /* request_bytes holds the allocation that failed, and
					  unusable_free_bytes is measured against it */
	GPUMON_SNAP_STACKS = 1u << 1,  /* the allocator recorded stacks (torch's _record_memory_history):
					  sites are known */
	GPUMON_SNAP_DEVICE = 1u << 2,  /* device holds the framework's device index */
};

/* Where live memory was allocated: the innermost frame of its stack outside the framework's own
 * code, Python's and gpumon's (the user's line, or that of the library which asked for the memory;
 * the rule is gpumon_snapshot_condense's). */
typedef struct gpumon_alloc_site {
	char file[192];         /* as the stack names it ("/srv/job/train.py"); a longer path keeps
				   its end (the file's name) after "..." */
	unsigned line;
	char function[64];      /* cut to fit */
	uint64_t bytes;         /* live (allocated) bytes of blocks allocated there */
	uint64_t blocks;
} gpumon_alloc_site;

/* One segment of the allocator (memory it took from the driver in one piece). */
typedef struct gpumon_alloc_segment {
	uint64_t size_bytes;
	uint64_t allocated_bytes;   /* its live blocks */
	uint64_t largest_free_bytes; /* its largest free block */
	int expandable;             /* an expandable segment (PYTORCH_CUDA_ALLOC_CONF=expandable_segments) */
} gpumon_alloc_segment;

typedef struct gpumon_alloc_snapshot {
	unsigned known;                 /* GPUMON_SNAP_* */
	char framework[16];             /* "torch" */
	unsigned pid;                   /* the process whose allocator it is; 0 unknown */
	int device;                     /* with GPUMON_SNAP_DEVICE */
	uint64_t request_bytes;         /* with GPUMON_SNAP_REQUEST */
	uint64_t reserved_bytes;        /* the segments' sizes together */
	uint64_t allocated_bytes;       /* live blocks together */
	uint64_t free_bytes;            /* free blocks inside the segments: reserved - allocated (the
					   free blocks' sum where a malformed snapshot disagrees) */
	uint64_t largest_free_bytes;    /* the largest free block of any segment */
	uint64_t unusable_free_bytes;   /* free bytes in blocks smaller than the request (all the free
					   bytes when none is large enough): memory held but useless to it */
	uint64_t segments, segments_with_free, blocks; /* segments_with_free: those holding a free block */
	uint64_t unsited_bytes;         /* live bytes of blocks without a recorded stack (allocated before
					   the history was turned on) */
	unsigned nsites;                /* the sites holding the most, largest first (ties: by file,
					   line, function) */
	gpumon_alloc_site sites[GPUMON_SNAPSHOT_SITES];
	unsigned nsegments;             /* the segments with the most free memory, most first (the
					   earlier in the snapshot on a tie) */
	gpumon_alloc_segment top_segments[GPUMON_SNAPSHOT_SEGMENTS];
} gpumon_alloc_snapshot;

/*
 * Condenses a PyTorch allocator snapshot (the JSON of torch.cuda.memory._snapshot(): "segments",
 * each with its "blocks", their "state" and, when history was recorded, "frames"; len bytes, need
 * not be NUL-terminated) into *out (cleared first), for device (< 0: every device the snapshot
 * holds) and the request that failed (0: none known).
 *  - Figures: reserved is the segments' total_size; allocated the blocks active_allocated or
 *    active_pending_free (not usable yet); free the inactive blocks. device is known when one is
 *    asked or the snapshot holds one; pid is left 0 for the caller to set.
 *  - Sites: a live block's site is the innermost frame of its stack that is not PyTorch's (a
 *    directory "torch" right under site-packages, dist-packages or a "pytorch" checkout; the code
 *    torch.compile writes in torchinductor_*; C/C++ frames), not Python's standard library
 *    (lib/pythonX.Y, outside site-packages), not gpumon's (gpumon under site-packages, gpumon/_*.py)
 *    and not a pseudo-file (empty, "??", "<frozen ...>", "<string>"); the innermost frame when all
 *    are. Decided by where packages live, not by a word anywhere in the path: the user's project in a
 *    directory named torch is the user's. Live blocks without frames count in unsited_bytes.
 *  - At most 4096 distinct sites are tracked: when the table fills, the half holding the least is
 *    dropped (a site stays while it holds more than 1/2048 of the sited bytes read so far), and the
 *    sites kept are counted again at the end, so the bytes and blocks listed are exact.
 * Returns 0; GPUMON_E_NOMEM; or GPUMON_E_INVAL for NULL, a request past GPUMON_MAX_BYTES, or text
 * that is not such a snapshot: not JSON (RFC 8259, UTF-8; \u0000 refused), no "segments" array, a
 * segment without an integer device or total_size or a blocks array, a block without an integer
 * size or a known state, a size negative or past GPUMON_MAX_BYTES, a block larger than its segment,
 * sizes that add up past GPUMON_MAX_BYTES (over every device). The message names what is wrong
 * ("segment 12: block 3 has no integer size"), in err when err_len > 0 ("" on success). Keys it
 * does not use (device_traces, what newer versions add) are ignored; a malformed frame is taken as
 * one without a file. The text is read as it streams (yajl), never parsed into a tree: memory is
 * the site table (about 240 KiB) with its sites' names and the longest string, and a snapshot of a
 * full card (tens of MB) takes a fraction of a second (bench/bench_snapshot.c).
 */
GPUMON_API int gpumon_snapshot_condense(const char *json, size_t len, int device, uint64_t request_bytes,
					gpumon_alloc_snapshot *out, char *err, size_t err_len);

/* The condensed snapshot as compact JSON (docs/report.md's "snapshot" object): keys named after the
 * fields, in their order; "device" and "request_bytes" only when known; "stacks": true or false;
 * "sites" [{"file", "line", "function", "bytes", "blocks"}]; "top_segments" [{"size_bytes",
 * "allocated_bytes", "largest_free_bytes", "expandable": true or false}]. Sets *json, freed with
 * gpumon_free(). 0, GPUMON_E_NOMEM, or GPUMON_E_INVAL for NULL or a snapshot it could not read back
 * as it is: an unknown bit in known, a known device < 0 or request of 0, more sites or segments
 * than the arrays hold, a string not NUL-terminated in its array or not UTF-8, a figure past
 * GPUMON_MAX_BYTES, expandable other than 0 or 1 (*json stays NULL). */
GPUMON_API int gpumon_snapshot_encode(const gpumon_alloc_snapshot *s, char **json);

/* Reads what gpumon_snapshot_encode wrote (a recording's GPUMON_EVENT_SNAPSHOT text) back into *out
 * (cleared first): encode then decode gives the same fields. 0, or GPUMON_E_INVAL when the text is
 * not such a document: not a JSON object, a key missing, a figure out of range (negative, past
 * GPUMON_MAX_BYTES; pid and line past 32 bits), a string longer than its array, more sites or
 * segments than the arrays hold (*out is left cleared). Unknown keys are ignored. */
GPUMON_API int gpumon_snapshot_decode(const char *json, size_t len, gpumon_alloc_snapshot *out);

/* The figures of an out-of-memory report as compact JSON (the GPUMON_EVENT_OOM_FIGURES text: what
 * a monitor inside the job knew at that moment), and back. Same conventions as the snapshot's. The
 * object: "framework" (always), "pid" (when not 0), "device" and the byte figures by their field
 * names ("request_bytes", ...) when known, "others" (always; [{"pid", "bytes"}]). Encode refuses
 * (GPUMON_E_INVAL) what decode would: bits of known this header does not define, a known figure
 * above GPUMON_MAX_BYTES, a device outside 0..65535, more than GPUMON_OOM_MAX_OTHERS others, a
 * framework that is not printable ASCII of at most 15 bytes. Decode ignores keys it does not know
 * and refuses the rest of what is not such an object (a figure that is not an integer, negative
 * or too large, duplicate keys); *out is cleared then. */
GPUMON_API int gpumon_oom_figures_encode(const gpumon_oom_figures *f, char **json);
GPUMON_API int gpumon_oom_figures_decode(const char *json, size_t len, gpumon_oom_figures *out);

/* The byte figures by their bit (each GPUMON_FIG_* but GPUMON_FIG_DEVICE): the name the `gpumon run`
 * socket's `oom` message and Python's oom_figures() give it ("request", "capacity", "free", "process",
 * "allocated", "reserved", "cap", "largest_free", "peak"; the JSON above says NAME_bytes), and the
 * field of f that holds it. NULL for any other bit (or f NULL). Front ends read and write the
 * figures by these, so that the names are the library's only. */
GPUMON_API const char *gpumon_oom_figure_name(unsigned bit);
GPUMON_API uint64_t *gpumon_oom_figure_field(gpumon_oom_figures *f, unsigned bit);

/* Event kinds (gpumon_record.event_kind) the run model reads about out-of-memory */
#define GPUMON_EVENT_OOM "oom"                 /* a sign: the job ran out of memory (text: the line it
						  printed, which the model reads with
						  gpumon_oom_message_parse) */
#define GPUMON_EVENT_OOM_DETAIL "oom_detail"   /* a line with figures of a report, not a sign by itself */
#define GPUMON_EVENT_OOM_FIGURES "oom_figures" /* a sign with figures, from inside the job (text:
						  gpumon_oom_figures_encode) */
#define GPUMON_EVENT_SNAPSHOT "alloc_snapshot" /* the allocator's snapshot then (text:
						  gpumon_snapshot_encode) */

/* ---------------------------------------------------------------------------------------------
 * Out-of-memory forensics: from what was on the card when a job ran out of memory, and what the
 * framework said, the causes — several may hold together — each with the figures that decided it.
 * A pure function: it returns codes and figures; front ends word them.
 * ------------------------------------------------------------------------------------------- */
enum {
	GPUMON_OOM_UNKNOWN = 0,        /* none of the others shows */
	GPUMON_OOM_LEAK = 1,           /* the job's floor kept rising until the memory was gone */
	GPUMON_OOM_CO_TENANT = 2,      /* other processes held the memory the job needed */
	GPUMON_OOM_TRANSIENT_PEAK = 3, /* a sudden demand well above the job's usual level */
	GPUMON_OOM_PREALLOCATION = 4,  /* the allocator had reserved most of the card, little of it in use */
	GPUMON_OOM_FRAGMENTATION = 5,  /* the allocator held enough free memory, in pieces none of which
					  was large enough */
	GPUMON_OOM_OUTSIDE = 6,        /* memory outside the allocator (CUDA context, NCCL, cuBLAS/cuDNN
					  workspaces, other allocators) took a real share */
	GPUMON_OOM_CAP = 7,            /* the job's own cap (a per-process fraction, XLA's limit,
					  gpumon run --limit) stopped it while the card had room */
	GPUMON_OOM_TOO_BIG = 8,        /* it failed before any steady level: the model or the first batch
					  does not fit */
	GPUMON_OOM_NCAUSES = 9
};

/* Which fields of gpumon_oom_input are known */
#define GPUMON_OOM_F_TOTAL      (1u << 0)
#define GPUMON_OOM_F_USED       (1u << 1)
#define GPUMON_OOM_F_JOB        (1u << 2)
#define GPUMON_OOM_F_OTHERS     (1u << 3)
#define GPUMON_OOM_F_FLOOR      (1u << 4)
#define GPUMON_OOM_F_FRAMEWORK  (1u << 5) /* allocated_bytes and reserved_bytes */
#define GPUMON_OOM_F_LEAK       (1u << 6)
#define GPUMON_OOM_F_EARLY      (1u << 7)
#define GPUMON_OOM_F_FIGURES    (1u << 8)  /* figures: what the framework said (its message, or the
					      monitor inside the job) */
#define GPUMON_OOM_F_STEADY     (1u << 9)  /* steady: whether the job had reached a steady level is
					      known (steady_bytes its level when it had) */
#define GPUMON_OOM_F_GROWTH     (1u << 10) /* growth_bytes in growth_seconds: the job's own rise */
#define GPUMON_OOM_F_PROCESS    (1u << 11) /* process_bytes: NVML's figure of the failing process */
#define GPUMON_OOM_F_SNAPSHOT   (1u << 12) /* snapshot: the allocator's snapshot then */
#define GPUMON_OOM_F_LIMIT      (1u << 13) /* limit_bytes: gpumon run --limit, and the job reached it */

typedef struct gpumon_oom_input {
	unsigned known;               /* GPUMON_OOM_F_* */
	uint64_t total_bytes;         /* the card's memory, or the limit the job ran against */
	uint64_t used_bytes;          /* used on the card at the moment (the peak of the last seconds) */
	uint64_t job_bytes;           /* the job's processes together (NVML) at that moment */
	uint64_t others_bytes;        /* every other process on the card at that moment */
	int64_t top_other_pid;        /* the largest other process; -1 none */
	uint64_t top_other_bytes;
	uint64_t floor_bytes;         /* the card's usual level: the lowest used over the seconds before */
	double rise_seconds;          /* how long the climb from floor to the peak took; < 0 unknown */
	uint64_t early_bytes;         /* the job's figure (NVML) in its first seconds on the card */
	uint64_t allocated_bytes;     /* the framework's figures just before the end */
	uint64_t reserved_bytes;
	gpumon_leak_result leak;      /* the leak detector's result on the job */
	gpumon_oom_figures figures;   /* what the framework said at the moment */
	int steady;                   /* 1: the job had held a level (steady_bytes) for a while before the
					 end; 0: it climbed from its start until it failed */
	uint64_t steady_bytes;        /* its usual level: the framework's allocated figure when known, else
					 its NVML figure */
	uint64_t growth_bytes;        /* the job's own rise over its last seconds ... */
	double growth_seconds;        /* ... and how long it took */
	uint64_t process_bytes;       /* NVML's figure of the process that failed (its allocator + outside) */
	uint64_t limit_bytes;         /* gpumon run --limit */
	gpumon_alloc_snapshot snapshot;
} gpumon_oom_input;

/* Bits of gpumon_oom_diagnosis.also */
enum {
	GPUMON_OOM_ALSO_LEAK = 1u << 0,        /* with CO_TENANT: the job's own floor was rising too */
	GPUMON_OOM_BY_EARLY_FIGURE = 1u << 1,  /* PREALLOCATION told from the job's first seconds, not
						  from the framework's figures */
};

/* A cause's bit in gpumon_oom_diagnosis.causes */
#define GPUMON_OOM_BIT(cause) (1u << (cause))

typedef struct gpumon_oom_diagnosis {
	int cause;                    /* GPUMON_OOM_*: the main cause */
	unsigned also;                /* GPUMON_OOM_ALSO_LEAK, GPUMON_OOM_BY_EARLY_FIGURE */
	unsigned causes;              /* GPUMON_OOM_BIT() of every cause that holds, the main one
					 included; 0 with UNKNOWN */
	/* the figures the causes were decided on; 0 when not part of any */
	uint64_t request_bytes;       /* the allocation that failed */
	uint64_t available_bytes;     /* what the allocator could still have given: the card's free
					 memory (or the room under the cap) + its own free memory */
	uint64_t shortfall_bytes;     /* request - available: how much was missing (0: it was there, in
					 pieces) */
	uint64_t cached_bytes;        /* FRAGMENTATION: reserved but unallocated */
	uint64_t largest_free_bytes;  /* FRAGMENTATION: the largest free piece, when the snapshot tells */
	uint64_t outside_bytes;       /* OUTSIDE: the process's NVML figure beyond its allocator's */
	uint64_t cap_bytes;           /* CAP: the cap */
	uint64_t excess_bytes;        /* TRANSIENT_PEAK: the demand above the usual level */
	uint64_t growth_bytes;        /* CO_TENANT: the job's own rise in growth_seconds (0: it did not
					 grow) */
	double growth_seconds;
} gpumon_oom_diagnosis;

/* Fills *out from *in. GPUMON_E_INVAL on NULL. */
GPUMON_API int gpumon_oom_diagnose(const gpumon_oom_input *in, gpumon_oom_diagnosis *out);

/* A cause's short name as every front end and the document say it ("fragmentation", "co-tenant",
 * "transient peak", "pre-allocation", "outside the allocator", "cap", "too big", "leak", "unknown");
 * static storage. */
GPUMON_API const char *gpumon_oom_cause_name(int cause);

/* ---------------------------------------------------------------------------------------------
 * The run model: what a run means, decided once. Every front end (gpumon run's summary and live
 * alerts, gpumon report, gpumon watch, the exporter, the Python package) feeds it records, live or
 * from a recording, and asks it; the same records give the same answers. It keeps per device, per
 * process and per framework source (a new segment when a step counter restarts) bounded summaries:
 * leak detectors, peaks, the last seconds, reduced timelines.
 * Thread rules: one thread at a time per model.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_model gpumon_model;

/* The largest byte figure gpumon takes as GPU memory: just under 1 PiB (2^50), some thousand
 * times the largest GPU of today. Anything larger (a hand-edited file, a figure a job made up) is
 * refused where it is read, with a message naming it, and never reaches a sum: the model's sums of
 * at most 8192 processes then fit in a signed 64-bit integer. */
#define GPUMON_MAX_BYTES ((1ull << 50) - 1)

/* Bits of gpumon_model_config.flags */
enum {
	GPUMON_MODEL_TIMELINES = 1u << 0,   /* keep reduced timelines for the document (reports, charts) */
	GPUMON_MODEL_FORGET_GONE = 1u << 1, /* free a process's summary when it leaves (a view of what runs
					       now, for months: the exporter, gpumon watch); its verdict is
					       then gone from gpumon_model_verdicts */
};

typedef struct gpumon_model_config {
	unsigned size;                  /* sizeof(gpumon_model_config) */
	unsigned flags;                 /* GPUMON_MODEL_* */
	const gpumon_run_meta *meta;    /* the run (copied); NULL: a system-wide view ("record") */
	uint64_t limit_bytes;           /* a per-process ceiling set for the job (gpumon run --limit); 0:
					   meta's, else none */
	const char *cuda_visible_devices; /* as the job got it, to map framework device indexes to GPUs;
					     NULL: meta's settings, else indexes are NVML's */
	double headroom_share;          /* alert when a GPU's free memory falls below this share of its
					   total (0..1); 0 = no headroom alerts */
	unsigned max_processes;         /* process summaries kept (the oldest gone go first); 0 = 4096,
					   at most 8192 (more are taken as 8192) */
	const char *source;             /* what was read, for the document ("run.gpumon"); NULL none */
	const char *source_type;        /* "recording", "csv", "live"; NULL = "live" */
	double oom_within_steps;        /* > 0: after a leak alert, one OOM_PROJECTED alert once the run's
					   verdict projects out-of-memory within this many steps; 0 = none */
} gpumon_model_config;

/*
 * Creates a model. cfg may be NULL (system-wide, no timelines). Returns 0 and sets *out, or
 * GPUMON_E_INVAL / GPUMON_E_NOMEM.
 */
GPUMON_API int gpumon_model_create(const gpumon_model_config *cfg, gpumon_model **out);

/* Declares a device before its records (its position is info->index; name, UUID and total help
 * the document and the device mapping). Records of undeclared devices declare them bare. */
GPUMON_API int gpumon_model_device(gpumon_model *m, const gpumon_device_info *info);

/*
 * Feeds records of any kind, in time order (a record a little out of order across devices is
 * taken; one that goes back within a series is counted and skipped). A record with a byte figure
 * above GPUMON_MAX_BYTES is left out, counted and named in the document's source.damage. Returns 0
 * or GPUMON_E_NOMEM (the model then misses that record; what it knew stays). Events the model
 * reads: "oom" (the moment the job ran out of memory; text = the message), "alert" (an alert given
 * live).
 */
GPUMON_API int gpumon_model_add(gpumon_model *m, const gpumon_record *recs, size_t n);

/*
 * Feeds every record of a reader from where it stands to its end, after taking its devices and
 * (when the model was created without meta) its metadata. Returns 0, or the reader's failure
 * (what was read before is in the model; gpumon_reader_damage says what is lost).
 */
GPUMON_API int gpumon_model_load(gpumon_model *m, gpumon_reader *r);

/*
 * Recordings of one distributed job made on several hosts (gpumon run or gpumon record on each
 * node), read into m as one run, as gpumon_model_load reads one: recording i's GPUs come after
 * those of recordings 0 .. i-1 (gpumon_model_hosts says which are whose), its times are moved onto
 * recording 0's clock by the two hosts' wall clocks at their starts, and the records of all are fed
 * in one time order, so the first out-of-memory of any rank is the run's. The figures of each
 * process are its host's; a pid is taken as one process across hosts (two hosts' processes with the
 * same pid are rare, and would be read as one). The metadata is recording 0's.
 * Refused with GPUMON_E_INVAL, m untouched and its message naming the recordings and the
 * difference, when they are not of one job: each must hold workers of a distributed job (their
 * rank read from their environment), and their job ids must agree (else, when a recording has none,
 * their rendezvous MASTER_ADDR:MASTER_PORT), and no host may come twice; also when a recording
 * lacks its start on the wall clock. Returns 0, or a reader's failure (what was read before is in
 * the model). n must be 1 .. 64.
 */
GPUMON_API int gpumon_model_load_many(gpumon_model *m, gpumon_reader *const *readers, size_t n);

/* A host of a model read by gpumon_model_load_many (one host, number 0, for any other model). */
typedef struct gpumon_model_host {
	char name[256];              /* its recording's host name; "" unknown */
	unsigned first_dev, ndev;    /* its GPUs' positions in the model */
	int64_t offset_ns;           /* added to its recording's times to put them on host 0's clock */
	/* The check of that alignment by the job's own steps (the same step reached on this host and
	   on host 0, as their inside views reported it): how many steps both reported, and the median
	   of this host's moment minus host 0's (0 for host 0). steps 0: not checked. */
	unsigned steps;
	int64_t step_skew_ns;
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_model_host;

/* Copies up to cap hosts and returns how many there are (at least 1). */
GPUMON_API size_t gpumon_model_hosts(const gpumon_model *m, gpumon_model_host *out, size_t cap);

/*
 * The end of the input: the run's end time (0: the last record's) and the job's exit status (-1
 * unknown). A job that failed with its GPU full (99 %) in its last seconds, with no "oom" event,
 * is taken as out of memory then. Call once; later records are refused.
 */
GPUMON_API int gpumon_model_finish(gpumon_model *m, uint64_t end_t_ns, int exit_status);

/* Seconds from the run's start (the recording's, else the first record's) to t_ns, as the document
 * counts times. */
GPUMON_API double gpumon_model_seconds(const gpumon_model *m, uint64_t t_ns);

/* How many records of memory the model took (a GPU's, a process's, a framework's, a GPU lost):
 * 0 when nothing of its input could be read (events alone say nothing of memory). */
GPUMON_API uint64_t gpumon_model_samples(const gpumon_model *m);

/* Series a verdict can be about */
enum {
	GPUMON_SERIES_NONE = 0,
	GPUMON_SERIES_FRAMEWORK = 1, /* a framework source's allocated bytes (pid, device, segment) */
	GPUMON_SERIES_JOB = 2,       /* the job's processes together on a GPU, as NVML lists them (dev) */
	GPUMON_SERIES_PROCESS = 3,   /* one process on a GPU, as NVML lists it (dev, pid) */
	GPUMON_SERIES_DEVICE = 4,    /* a GPU's used memory (dev) */
};

/* What is left before out-of-memory: which bound is the nearest */
enum {
	GPUMON_ROOM_UNKNOWN = 0,
	GPUMON_ROOM_FREE = 1,   /* the GPU's free memory now (co-tenants at their level, the driver's
				   reserve taken out) */
	GPUMON_ROOM_LIMIT = 2,  /* the ceiling set for the job (config limit_bytes) */
	GPUMON_ROOM_CAP = 3,    /* the allocator's cap the framework reported (room: cap - allocated) */
	GPUMON_ROOM_TOTAL = 4,  /* only the GPU's total is known (a CSV): total - the figure */
};

typedef struct gpumon_verdict {
	int series;                  /* GPUMON_SERIES_* */
	int dev;                     /* the GPU (-1 unknown) */
	int64_t pid;                 /* PROCESS, FRAMEWORK: the process (-1 unknown) */
	int device;                  /* FRAMEWORK: its device index (-1 unknown) */
	unsigned segment;            /* FRAMEWORK: 0, 1, ... one per restart of the step counter */
	char framework[16];          /* FRAMEWORK: "torch", ... */
	gpumon_leak_result leak;     /* the detector's result */
	int room;                    /* GPUMON_ROOM_*: the bound of the projection */
	uint64_t room_bytes;         /* what is left under it now */
	double seconds_to_oom;       /* at the leak's rate; < 0 unknown or no leak */
	double steps_to_oom;         /* likewise in steps (framework series) */
	int rank;                    /* the distributed job's rank the series is of: a PROCESS or FRAMEWORK
					series' process's; a JOB series' GPU's one worker, else of its
					workers the one whose own figure leaks fastest; -1 none */
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_verdict;

/* The verdict of the run, by one rule: the job's framework figures when it reports them, else its
 * processes as NVML lists them, else each process's own figure, else a GPU's used memory; within
 * a kind, a leak first, then the series with the most points. GPUMON_E_NOT_FOUND: no series. */
GPUMON_API int gpumon_model_verdict(const gpumon_model *m, gpumon_verdict *out);

/* Every series judged, in the order of the rule above; returns how many (may exceed cap). */
GPUMON_API size_t gpumon_model_verdicts(const gpumon_model *m, gpumon_verdict *out, size_t cap);

/* The verdict on one process's NVML figure on device dev (watch, the exporter), or
 * GPUMON_E_NOT_FOUND. */
GPUMON_API int gpumon_model_process_verdict(const gpumon_model *m, unsigned dev, unsigned pid,
					    gpumon_verdict *out);

/* A GPU's time to out-of-memory: its free memory at the summed rate of every series on it that
 * alerts (a process, or the job). Returns 0 and sets *seconds, or GPUMON_E_NOT_FOUND (no alert). */
GPUMON_API int gpumon_model_gpu_oom(const gpumon_model *m, unsigned dev, double *seconds);

/* Kinds of alerts */
enum {
	GPUMON_ALERT_LEAK = 1,     /* a series' leak detector alerted (verdict holds the figures) */
	GPUMON_ALERT_HEADROOM = 2, /* a GPU's free memory fell below the configured share */
	GPUMON_ALERT_OOM_PROJECTED = 3, /* after a LEAK alert, the run's verdict (verdict) projects
					   out-of-memory within config oom_within_steps steps; once a run */
	GPUMON_ALERT_LIMIT = 4,    /* a process of the job holds more than config limit_bytes on all its
				      GPUs together (pid, used_bytes, limit_bytes; dev: the GPU whose
				      figure passed it); once a process */
};

typedef struct gpumon_alert {
	int kind;                /* GPUMON_ALERT_* */
	uint64_t t_ns;
	gpumon_verdict verdict;  /* LEAK, OOM_PROJECTED: the series and its figures at that moment */
	int dev;                 /* HEADROOM: the GPU, its free and total memory */
	uint64_t free_bytes, total_bytes;
	int live;                /* 1: an "alert" event at the same moment says it was given live */
	int64_t pid;             /* LIMIT: the process (-1 for other kinds) ... */
	uint64_t used_bytes;     /* ... what it held, NVML's figures on its GPUs summed ... */
	uint64_t limit_bytes;    /* ... and the limit it passed */
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_alert;

/* The alerts so far, oldest first, from the from-th on: copies up to cap and returns how many
 * there are from there (a live front end passes the count it has already shown). LIMIT alerts are
 * not in the document's "alerts": the front end that acts on them records what it did (gpumon run's
 * "alert" and "oom" events). */
GPUMON_API size_t gpumon_model_alerts(const gpumon_model *m, size_t from, gpumon_alert *out, size_t cap);

/* The short codes the JSON document (docs/report.md) gives the answers above, for a front end that
 * hands them on as data: a leak verdict ("leak", "none", "insufficient_data"), a series ("framework",
 * "job", "process", "device", "none"), a room ("free", "limit", "cap", "total"; NULL for UNKNOWN) and
 * an alert ("leak", "headroom", "oom_projected", "limit"; NULL for any other). Static storage. */
GPUMON_API const char *gpumon_leak_verdict_name(int verdict);
GPUMON_API const char *gpumon_series_name(int series);
GPUMON_API const char *gpumon_room_name(int room);
GPUMON_API const char *gpumon_alert_name(int kind);

/* Which peak a run's peak is */
enum {
	GPUMON_PEAK_JOB = 1,       /* the job's processes together (NVML) on its GPU */
	GPUMON_PEAK_DEVICE = 2,    /* a GPU's used memory (the sampler's exact maximum) */
	GPUMON_PEAK_FRAMEWORK = 3, /* a framework's max_allocated */
};

/* The run's peak: the job's for a run, else the fullest GPU's, else the framework's. Windows (a
 * minute, doubling to stay within 64) into win[0..cap-1]; *nwin gets how many there are. Returns
 * 0 or GPUMON_E_NOT_FOUND (no figure). */
GPUMON_API int gpumon_model_peak(const gpumon_model *m, int *what, int *dev, gpumon_peak *peak, gpumon_peak *win,
				 size_t cap, size_t *nwin);

/* The allocator's peaks over the run as its framework sources said them: the most allocated (its
 * max_allocated figure where it gives one) and the most reserved of any one source, and the most
 * distinct steps one source named (steps may be NULL). 0, GPUMON_E_NOT_FOUND (no framework
 * figures: all three are 0), GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_framework_peak(const gpumon_model *m, uint64_t *allocated_bytes, uint64_t *reserved_bytes,
					   uint64_t *steps);

/* A figure with its moment and process (fragmentation, unaccounted memory). */
typedef struct gpumon_model_figure {
	int known;
	uint64_t bytes;
	uint64_t t_ns;
	int64_t pid;   /* -1 unknown */
	int dev;       /* -1 unknown */
} gpumon_model_figure;

/* The largest reserved - allocated of any framework source (memory cached by the allocator that no
 * tensor uses), and the largest NVML figure - reserved (memory a process holds outside its
 * allocator: CUDA context, library workspaces, other allocators). */
GPUMON_API void gpumon_model_memory(const gpumon_model *m, gpumon_model_figure *fragmentation,
				    gpumon_model_figure *unaccounted);

/* Every byte of a process placed, at its latest framework sample where NVML listed it: NVML's
 * figure = the allocator's reserved (allocated + cached) + what it holds outside the allocator (the
 * CUDA context, libraries' workspaces, NCCL buffers, other allocators). */
typedef struct gpumon_placed {
	uint64_t t_ns;
	int64_t step;               /* the sample's step; -1 unknown */
	char framework[16];
	uint64_t nvml_bytes;        /* the process on the GPU, as NVML listed it */
	uint64_t reserved_bytes;    /* its allocator's, allocated included */
	uint64_t allocated_bytes;
	uint64_t cached_bytes;      /* reserved - allocated: held by the allocator, no tensor in it */
	int outside_known;          /* 0 when NVML's figure lagged behind the allocator's (below reserved) */
	uint64_t outside_bytes;     /* nvml - reserved */
} gpumon_placed;

/* The process pid on GPU dev placed (its newest framework source there). 0, GPUMON_E_NOT_FOUND
 * (no framework figures with NVML's figure beside them), GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_placed(const gpumon_model *m, unsigned dev, unsigned pid, gpumon_placed *out);

/* Places one moment's figures (the rule gpumon_model_placed, the fit's room and Python's
 * unaccounted figure follow): sets out's nvml_bytes, reserved_bytes and allocated_bytes from the
 * arguments, cached_bytes = reserved - allocated (0 below), outside_known = nvml >= reserved (NVML's
 * figure can lag the allocator's: then what is outside is not known) and outside_bytes = nvml -
 * reserved when known, else 0. Other fields untouched; out NULL: nothing. */
GPUMON_API void gpumon_placed_split(uint64_t nvml_bytes, uint64_t reserved_bytes, uint64_t allocated_bytes,
				    gpumon_placed *out);

/* A distributed job's worker on a GPU: one row per GPU and pid whose environment named a rank (in
 * a run, the job's processes only). Its figures are its NVML figure's over the time it was listed. */
typedef struct gpumon_rank_row {
	gpumon_rank rank;
	unsigned dev, pid;
	unsigned host;               /* its GPU's host (gpumon_model_hosts; 0 for a model of one) */
	int used_known;              /* 0: NVML gave no figure of it (the byte figures are then 0) */
	uint64_t peak_bytes;         /* the highest */
	uint64_t mean_bytes;         /* averaged over the time it was listed */
	uint64_t last_bytes;         /* the latest while listed (at leaving: its last) */
	int floor_known;             /* 0: listed 5 s or less (its first seconds are warm-up) */
	uint64_t floor_bytes;        /* the lowest it held after its first 5 s */
	int at_oom_known;            /* 0: no out-of-memory, or it was not listed with a figure then */
	uint64_t at_oom_bytes;       /* what it held at the out-of-memory moment (of any rank) */
	uint64_t first_t_ns, last_t_ns; /* first listed; last listed or gone */
	int present;                 /* still listed at the end of the input */
	gpumon_verdict verdict;      /* on its own NVML figure (GPUMON_SERIES_PROCESS); series NONE when
					its detector has nothing yet */
	int oom;                     /* 1: the process that ran out of memory (gpumon_model_oom_get) */
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_rank_row;

/* The workers, ordered by rank, then GPU and pid: copies up to cap rows and returns how many there
 * are (0: no process named a rank). */
GPUMON_API size_t gpumon_model_ranks(const gpumon_model *m, gpumon_rank_row *out, size_t cap);

/* How far the ranks of one distributed job drift apart: the highest and lowest of the ranks' peaks
 * and of their means, with which rank holds each (a rank on several rows counts by its highest
 * peak and the mean of that row). The job is the one most rows belong to (its id, rendezvous and
 * launcher). */
typedef struct gpumon_rank_skew {
	unsigned ranks;              /* distinct ranks with a figure */
	char job_id[64];             /* the job's id, "" none */
	uint64_t peak_min_bytes, peak_max_bytes;
	int peak_min_rank, peak_max_rank;
	uint64_t mean_min_bytes, mean_max_bytes;
	int mean_min_rank, mean_max_rank;
} gpumon_rank_skew;

/* 0, GPUMON_E_NOT_FOUND (fewer than two ranks with a figure), GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_rank_skew(const gpumon_model *m, gpumon_rank_skew *out);

/* A process on a GPU at the out-of-memory moment */
typedef struct gpumon_holder {
	unsigned dev, pid;
	int used_known;
	uint64_t used_bytes;
	int job;                /* one of the job's processes */
	char user[64];          /* "" unknown */
	char command[512];      /* command line, else the name; "" unknown */
	int rank;               /* its global rank in a distributed job; -1 none or unknown */
} gpumon_holder;

typedef struct gpumon_model_oom {
	uint64_t t_ns;                /* the moment: the first sign (a message, the figures the monitor
					 inside the job sent, or the card full when the job failed) */
	int dev;                      /* the GPU it happened on */
	unsigned pid;                 /* the process that ran out, when a report names it; 0 unknown */
	char message[1024];           /* the last "oom" event's text (in a traceback the exception's
					 line comes last), "" when none */
	gpumon_oom_input input;       /* what the diagnosis was made from: the card then, the figures
					 the framework said (input.figures: the monitor inside the job's
					 first, then its message's, then its log's), the allocator's
					 snapshot (input.snapshot) */
	gpumon_oom_diagnosis diagnosis;
	size_t nholders;              /* who held what then (largest first) */
	gpumon_holder holders[16];
	size_t nlast;                 /* the GPU's used memory, about one point a second before it */
	struct {
		uint64_t t_ns, used_bytes;
	} last[16];
	unsigned signs;               /* out-of-memory episodes seen in all: signs within 5 s of the
					 previous one (a traceback's lines, the inside monitor's report and
					 the message), and the message of the request the inside monitor
					 reported (printed once its snapshot is taken, seconds later), are one */
	int rank;                     /* the rank that ran out (a distributed job): the process's, else
					 the one a "[rankN]:" prefix of the message names, else the only
					 worker on the GPU; -1 unknown */
} gpumon_model_oom;

/* The out-of-memory moment and its diagnosis: 0, or GPUMON_E_NOT_FOUND (none seen). */
GPUMON_API int gpumon_model_oom_get(const gpumon_model *m, gpumon_model_oom *out);

/* ---- typed answers: what the document says, asked one piece at a time ---------------------------
 * The front ends (gpumon run's summary and alerts, gpumon report, the Python package) ask these,
 * and the document (gpumon_model_document) is made from them, so that both say one thing. Each
 * struct starts with `size`, set by the caller to sizeof the struct it was built with (an older,
 * smaller struct gets the fields it has); a size below the first version's or above this header's
 * is GPUMON_E_INVAL. Strings given as pointers are the model's: valid until it is destroyed. */

/* What the model read (the document's "source"). */
typedef struct gpumon_model_source {
	unsigned size;               /* sizeof(gpumon_model_source): set by the caller */
	const char *path;            /* what was read ("run.gpumon", "a.gpumon + b.gpumon"); NULL none */
	const char *type;            /* "recording", "recordings", "csv", "live", ... never NULL */
	const char *kind;            /* the metadata's kind ("run", "record"); NULL unknown */
	const char *command;         /* the job's command line; NULL none */
	const char *host;            /* NULL unknown */
	char start_utc[24];          /* the start on the wall clock, "2026-01-02T03:04:05Z"; "" unknown */
	int duration_known;          /* 0: no record was read */
	double duration_s;           /* from the start to the end (gpumon_model_seconds) */
	int exit_status;             /* the job's; -1 unknown */
	uint64_t records;            /* records taken */
	int names_processes;         /* 0: a CSV, whose one process carries a stand-in pid (0) that names
					nothing: front ends say "the process" for every pid of it */
	uint64_t events_dropped;     /* events beyond the model's bound (gpumon_model_event_get lists the rest) */
} gpumon_model_source;

/* 0, or GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_source_get(const gpumon_model *m, gpumon_model_source *out);

/* What could not be read (the document's source.damage): what the model was told was lost
 * (gpumon_model_damage) and the records it left out itself for a figure above GPUMON_MAX_BYTES.
 * Sets *text to a string freed with gpumon_free(), or NULL when nothing was lost. 0,
 * GPUMON_E_NOMEM, GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_damage_get(const gpumon_model *m, char **text);

/* A GPU of the model and what the run did on it (the document's devices[]). */
typedef struct gpumon_model_gpu {
	unsigned size;               /* sizeof(gpumon_model_gpu): set by the caller */
	unsigned dev;                /* its position in the model */
	char name[96], uuid[96], pci_bus_id[32]; /* "" unknown */
	uint64_t total_bytes;        /* 0 unknown */
	int lost;                    /* it fell off the bus ... */
	uint64_t lost_t_ns;          /* ... then; 0 unknown */
	unsigned host;               /* its host (gpumon_model_hosts) */
	int peak_known;              /* peak: its used memory at most (owner: whose rise made it) */
	gpumon_peak peak;
	int job_known;               /* a process of the job held memory here; others_at_job_peak_bytes
					and job_peak_known are about that */
	int job_peak_known;          /* job_peak: the job's processes together at most */
	gpumon_peak job_peak;
	uint64_t others_at_job_peak_bytes; /* every other process together at the job's peak */
	uint64_t others_peak_bytes;  /* every other process together at most */
	int job_mean_known;          /* job_mean_bytes: the job's figure averaged to the end */
	uint64_t job_mean_bytes;
} gpumon_model_gpu;

/* The i-th GPU the model saw (in position order): 0, GPUMON_E_NOT_FOUND past the last,
 * GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_gpu_get(const gpumon_model *m, size_t i, gpumon_model_gpu *out);

/* A process as the model knows it, to name it: its user, command line, owner and rank. */
typedef struct gpumon_model_who {
	unsigned size;               /* sizeof(gpumon_model_who): set by the caller */
	unsigned pid;
	char user[64];               /* "" unknown */
	char command[512];           /* command line, else the name; "" unknown */
	char owner[512];             /* gpumon_owner_describe's phrase; "" when no owner is known */
	int owner_known;             /* owner_parts holds its container, pod, Slurm job or unit */
	gpumon_owner owner_parts;
	int rank;                    /* its global rank in a distributed job; -1 none or unknown */
} gpumon_model_who;

/* The process pid on GPU dev (dev < 0: on any GPU; the listing with a command line wins, the owner
 * is the first one known). 0; GPUMON_E_NOT_FOUND when the model knows no such process (out then
 * holds the pid alone, rank -1); GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_who_get(const gpumon_model *m, int dev, unsigned pid, gpumon_model_who *out);

/* Why the memory a framework source's process holds outside its allocator is not known */
enum {
	GPUMON_UNACCOUNTED_KNOWN = 0,
	GPUMON_UNACCOUNTED_DEVICE_UNKNOWN = 1, /* the framework did not say its device and the process is
						  on several GPUs */
	GPUMON_UNACCOUNTED_NOT_VISIBLE = 2,    /* the device index is not in CUDA_VISIBLE_DEVICES */
	GPUMON_UNACCOUNTED_MIG = 3,            /* the device is a MIG instance */
	GPUMON_UNACCOUNTED_NO_GPU = 4,         /* CUDA_VISIBLE_DEVICES names no GPU of the recording */
	GPUMON_UNACCOUNTED_NO_NVML_FIGURE = 5, /* mapped, but NVML lists no memory of the process there */
	GPUMON_UNACCOUNTED_NOT_SAID = 6,       /* the framework gave no reserved figure, or nothing to map */
};

/* A framework source (one segment per restart of its step counter; the document's frameworks[]). */
typedef struct gpumon_model_framework {
	unsigned size;               /* sizeof(gpumon_model_framework): set by the caller */
	unsigned pid;
	int device;                  /* the framework's device index; -1 unknown */
	char framework[16];          /* "torch", ... */
	unsigned segment;
	int dev;                     /* the GPU of the model it maps to; -1 none */
	uint64_t points;
	uint64_t allocated_peak_bytes, reserved_peak_bytes; /* 0 unknown */
	gpumon_model_figure fragmentation, unaccounted;     /* its own (gpumon_model_memory's are the largest) */
	int unaccounted_why;         /* GPUMON_UNACCOUNTED_*: why unaccounted is not known */
	int placed_known;            /* placed: every byte of its process at its latest sample */
	gpumon_placed placed;
} gpumon_model_framework;

/* The i-th framework source: 0, GPUMON_E_NOT_FOUND past the last, GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_framework_get(const gpumon_model *m, size_t i, gpumon_model_framework *out);

/* An event the model kept (a note, an alert given live, an out-of-memory sign, a GPU's stale or
 * answering driver, an Xid ...; the document's events[]). */
typedef struct gpumon_model_event {
	unsigned size;               /* sizeof(gpumon_model_event): set by the caller */
	uint64_t t_ns;
	const char *kind;            /* "note", "alert", "oom", GPUMON_EVENT_STALE, ... */
	const char *text;
	int dev;                     /* the GPU it names; -1 none or unknown */
} gpumon_model_event;

/* The i-th event, oldest first: 0, GPUMON_E_NOT_FOUND past the last, GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_event_get(const gpumon_model *m, size_t i, gpumon_model_event *out);

/* The processes the document's timeline carries (GPUMON_DOC_TIMELINE: the highest peaks, and a
 * distributed job's workers besides them) and how many more had a timeline and are left out, so
 * that a page drawing them can say what it misses. 0, GPUMON_E_NOMEM, GPUMON_E_INVAL. */
GPUMON_API int gpumon_model_timeline_processes(const gpumon_model *m, size_t *carried, size_t *left_out);

/* Bits of gpumon_model_document's flags */
enum {
	GPUMON_DOC_TIMELINE = 1u << 0, /* add the reduced timelines (needs GPUMON_MODEL_TIMELINES) */
};

/*
 * The whole model as one JSON document (docs/report.md: codes and figures, no sentences): the
 * source, devices, verdicts, peak, memory figures, out-of-memory moment, alerts, events and, with
 * GPUMON_DOC_TIMELINE, the timelines. Sets *json to a NUL-terminated string freed with
 * gpumon_free(). Returns 0 or GPUMON_E_NOMEM.
 */
GPUMON_API int gpumon_model_document(const gpumon_model *m, unsigned flags, char **json);

/* Says what the document cannot (a damaged source, rows skipped): added to the document's
 * source.damage. */
GPUMON_API int gpumon_model_damage(gpumon_model *m, const char *text);

/* The message of the model's last failure ("" none; "Errors" at the top). */
GPUMON_API const char *gpumon_model_errmsg(const gpumon_model *m);

/* Frees the model; NULL is a no-op. */
GPUMON_API void gpumon_model_destroy(gpumon_model *m);

/* ---------------------------------------------------------------------------------------------
 * Words: the model's answers in plain English, one phrasing for every front end (gpumon run's
 * alerts and summary, gpumon report's text and page, gpumon watch, the Python package). Nothing
 * here decides: each call words the typed answers above. Each writes a NUL-terminated text into
 * buf (cut to len, at a character) and returns buf; text of the input (commands, users, names) is
 * escaped for a terminal as gpumon_words_safe does. A model's words say "the process" where a
 * CSV's stand-in pid would be (gpumon_model_source.names_processes). Thread-safe for distinct
 * buffers and models not being fed.
 * ------------------------------------------------------------------------------------------- */

/* s with what a terminal would act on escaped: C0 and C1 controls, DEL and the bidirectional
 * overrides as \xNN or \uNNNN (\n, \r, \t as such), a byte that is not UTF-8 as \xNN; whole
 * characters and escapes only (cut before one that does not fit). s NULL: "". */
GPUMON_API const char *gpumon_words_safe(const char *s, char *buf, size_t len);

/* A byte figure as people read it: "512 B", "1.50 GiB", "42.0 MiB", "137 GiB". */
GPUMON_API const char *gpumon_words_bytes(uint64_t bytes, char *buf, size_t len);

/* A span of seconds: "45 s", "4 min 37 s", "2 h 05 min", "3 days". */
GPUMON_API const char *gpumon_words_duration(double seconds, char *buf, size_t len);

/* A moment as seconds from the run's start, on a clock: "4:37", "1:02:05". */
GPUMON_API const char *gpumon_words_clock(double seconds, char *buf, size_t len);

/* What a verdict's series is: "the framework's allocated memory (torch, pid 775)", "the job's
 * processes on GPU 0 (NVML)", "pid 4242 on GPU 1 (NVML)", "GPU 0's used memory (NVML)". */
GPUMON_API const char *gpumon_words_series(const gpumon_model *m, const gpumon_verdict *v, char *buf, size_t len);

/* What bounds a verdict's projection: "the GPU's free memory", "the --limit set for the job", "the
 * cap the job set on its allocator", "the GPU's total, what other processes hold unknown". */
GPUMON_API const char *gpumon_words_room(const gpumon_verdict *v, char *buf, size_t len);

/* A verdict in one sentence: "LEAK on <series>: +4.00 MiB a step from step 3 (confidence 1.00);
 * out of memory in about 34866 more steps (about 13 min) at this rate, against the GPU's free memory
 * (136 GiB left)", "none: <series> does not keep rising (...)", "not enough data to tell (40 points
 * of <series>)". now_s: the run's seconds now, for "around 4:37 from the start" (< 0: left out). */
GPUMON_API const char *gpumon_words_verdict(const gpumon_model *m, const gpumon_verdict *v, double now_s, char *buf,
					    size_t len);

/* An alert as a front end tells it the moment it comes: "<series> rises by 8.00 MiB a step from
 * step 40; out of memory in about 1200 more steps (about 2 min, around 4:37 from the start) ...";
 * a headroom alert: "GPU 0 has 1.20 GiB free of 80.0 GiB". */
GPUMON_API const char *gpumon_words_alert(const gpumon_model *m, const gpumon_alert *a, char *buf, size_t len);

/* Kinds of gpumon_told */
enum { GPUMON_TOLD_LEAK = 1, GPUMON_TOLD_HEADROOM = 2, GPUMON_TOLD_ALERT = 3, GPUMON_TOLD_OOM = 4 };

/* A line of a run's alerts as a front end lists them (a line of words; it does not grow). */
typedef struct gpumon_told {
	double time_s;       /* gpumon_model_seconds of its moment */
	int kind;            /* GPUMON_TOLD_*: LEAK and HEADROOM the model's alerts (worded by
				gpumon_words_alert); ALERT an "alert" event no alert of the model stands for
				(one given live at another moment, a --limit); OOM an "oom" event */
	int live;            /* it was given while the run went on */
	char text[1024];     /* the words, or the event's own text as it is (not escaped) */
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_told;

/* The alerts of a run, oldest first (the model's alert before an event of the same moment): each
 * alert of the model once, then each "alert" event no alert stands for and each "oom" event.
 * Copies up to cap and returns how many there are. */
GPUMON_API size_t gpumon_words_told(const gpumon_model *m, gpumon_told *out, size_t cap);

/* A process as the model names it: "pid 4242 (alice: python train.py) held by pod ml/trainer-0",
 * its parts left out when unknown; "the process" for pid < 0 or a CSV's. dev < 0: any GPU. */
GPUMON_API const char *gpumon_words_who(const gpumon_model *m, int dev, int64_t pid, char *buf, size_t len);

/* Whose a process is, from gpumon_owner_describe's phrase: "held by pod ml-team/trainer-0", "in
 * another PID namespace"; "" for "" or NULL. */
GPUMON_API const char *gpumon_words_owner(const char *phrase, char *buf, size_t len);

/* What a run's peak (gpumon_model_peak's what and dev) is of: "the job's processes on GPU 0", "GPU
 * 1's used memory", "the framework's highest allocated". */
GPUMON_API const char *gpumon_words_peak_what(int what, int dev, char *buf, size_t len);

/* Every byte of a process placed: "NVML 20.50 GiB = the allocator's 13.90 GiB (12.00 GiB allocated
 * + 1.90 GiB cached) + 6.60 GiB outside it (...)". */
GPUMON_API const char *gpumon_words_placed(const gpumon_placed *p, char *buf, size_t len);

/* Why a framework source's memory outside its allocator is not known (GPUMON_UNACCOUNTED_*), as a
 * clause: "NVML lists no memory of the process on its GPU"; NULL for KNOWN, NOT_SAID or another
 * code. Static storage. */
GPUMON_API const char *gpumon_words_unaccounted_why(int why);

/* The out-of-memory diagnosis in plain words, with the figures that decided each cause and what to
 * try ("Another process held the memory: ... Run it on a free GPU ..."); the main cause first, then
 * "Also: " each other one. */
GPUMON_API const char *gpumon_words_oom(const gpumon_model *m, const gpumon_model_oom *o, char *buf, size_t len);

/* Every cause that holds, the main one first: "fragmentation, outside the allocator". */
GPUMON_API const char *gpumon_words_causes(const gpumon_model_oom *o, char *buf, size_t len);

/* What the framework said at the out-of-memory: "torch (device 0): tried to allocate 40.00 GiB;
 * 10.38 GiB free of 139.80 GiB; the allocator held ...; the process 129.41 GiB in all"; "" when it
 * said nothing. */
GPUMON_API const char *gpumon_words_said(const gpumon_model *m, const gpumon_model_oom *o, char *buf, size_t len);

/* The allocator's snapshot in one sentence: what it held, live and free, the largest free piece
 * and how much free memory was too small for the request. */
GPUMON_API const char *gpumon_words_snapshot(const gpumon_alloc_snapshot *s, char *buf, size_t len);

/* One allocation site: "/srv/job/train.py:71 (step)  24.00 GiB in 120 blocks". */
GPUMON_API const char *gpumon_words_site(const gpumon_alloc_site *s, char *buf, size_t len);

/* Whether a holder of the out-of-memory moment is the job's, as yes or no says it, and its rank
 * when it is a distributed worker: "yes, rank 5". */
GPUMON_API const char *gpumon_words_holder_job(const gpumon_holder *h, const char *yes, const char *no, char *buf,
					       size_t len);

/* Host i of the model (gpumon_model_hosts): its GPUs and how its clock was put beside the first
 * host's: "node-a: GPUs 0-1 (the clock of this report)", "node-b: GPUs 2-3; its times moved by
 * +0.012 s by the wall clocks of both hosts; checked by 19 steps both reached: ...". */
GPUMON_API const char *gpumon_words_host(const gpumon_model *m, size_t i, char *buf, size_t len);

/* A worker's verdict on its own figure in a few words: "LEAK +630 MiB/s", "no leak", "too short to
 * tell", "n/a" (no verdict yet). */
GPUMON_API const char *gpumon_words_rank_verdict(const gpumon_rank_row *r, char *buf, size_t len);

/* The job a worker is of: "torchrun job job7, world size 8", "mpi, world size 2". */
GPUMON_API const char *gpumon_words_rank_job(const gpumon_rank_row *r, char *buf, size_t len);

/* A distributed job's ranks (gpumon_model_ranks, gpumon_model_rank_skew) as a table, one line a
 * '\n' after it: a heading naming the job, one row a worker (rank, GPU, pid, its NVML figure's
 * peak, mean and floor, its verdict, "+ OOM" for the one that ran out, its host when there are
 * several), at most max_rows rows (the rest counted), what each rank held at the out-of-memory, and
 * the skew between the ranks. Sets *text (gpumon_free()), NULL when the model has no ranks. 0,
 * GPUMON_E_NOMEM, GPUMON_E_INVAL. */
GPUMON_API int gpumon_words_ranks(const gpumon_model *m, size_t max_rows, char **text);

/* The memory health problems (gpumon_health_problems() bits) of p, parts joined by "; " ("2
 * uncorrectable ECC errors since the driver loaded; a row remapping waits for a GPU reset"); ""
 * when problems is 0. */
GPUMON_API const char *gpumon_words_health(unsigned problems, const gpumon_device_props *p, char *buf, size_t len);

/* ---------------------------------------------------------------------------------------------
 * Fit: the largest batch that fits, from the peaks of a few short runs. A job run a few steps at a
 * few batch sizes gives each run's peak; the fit says what the peak will be at a larger batch and
 * the largest batch whose peak, with a margin, fits the room the GPU has now. Pure functions:
 * `gpumon fit` and Python's gpumon.fit() and suggest_batch_size() ask these. Thread-safe.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_fit_run {
	double batch;                  /* the run's batch size (> 0) */
	uint64_t peak_bytes;           /* the job's peak on the GPU as NVML saw it (its processes together):
	                                  what must fit */
	uint64_t allocated_peak_bytes; /* the allocator's peak allocated (torch max_memory_allocated); 0 unknown */
	uint64_t reserved_peak_bytes;  /* the allocator's peak reserved; 0 unknown */
	int failed;                    /* 1: the run ran out of memory (peak_bytes is what it reached) */
} gpumon_fit_run;

enum { GPUMON_FIT_NONE = 0, GPUMON_FIT_LINEAR = 1, GPUMON_FIT_QUADRATIC = 2 };

typedef struct gpumon_fit_config {
	unsigned size;                 /* sizeof(gpumon_fit_config) */
	uint64_t room_bytes;           /* what the job may take on the GPU now: free memory with the
	                                  co-tenants' and the driver's reserve out (the caller measures it) */
	unsigned multiple_of;          /* the answer is a multiple of this; 0 = 1 */
	uint64_t fixed_bytes;          /* the peak at batch 0, when fixed_known: what stays allocated
	                                  whatever the batch (weights, gradients, optimizer state) */
	int fixed_known;               /* 1: fixed_bytes is known and the line goes through it, so that
	                                  runs at one batch size are enough (no quadratic is tried) */
} gpumon_fit_config;

typedef struct gpumon_fit {
	unsigned size;                 /* set by the caller: sizeof(gpumon_fit) */
	int shape;                     /* GPUMON_FIT_*: the model that holds; NONE: no answer (note says why) */
	double fixed_bytes, per_sample_bytes, per_sample2_bytes; /* peak = fixed + a*b + c*b^2 */
	double misfit;                 /* the largest |measured - fitted| / measured over the runs */
	uint64_t margin_bytes;         /* kept free beyond the prediction: the fragmentation the runs showed
	                                  (reserved - allocated at their peaks, scaled to the answer) and the
	                                  misfit, at least 1 % of room */
	uint64_t max_batch;            /* the largest batch whose predicted peak + margin <= room; 0: none */
	uint64_t predicted_peak_bytes; /* at max_batch */
	int extrapolated;              /* max_batch is more than 4x the largest run: said in note */
	char note[256];                /* one sentence when something is worth saying ("" otherwise) */
} gpumon_fit;

/*
 * Fits the runs (n >= 1; two distinct batch sizes at least for a fit, one when cfg->fixed_known)
 * and fills *out (out->size kept, the rest cleared first). The contract:
 * - The fit: least squares of peak_bytes on batch over the runs that did not fail. LINEAR when
 *   every such run is within 2 % of the line (misfit <= 0.02); with two batch sizes a line always
 *   fits exactly: then it is LINEAR and the note says a third run would check it. Otherwise, with
 *   three batch sizes or more, a quadratic (exact with three, within 2 % with more, growing faster
 *   than the batch: c > 0 and rising from the smallest run on): QUADRATIC, note "the peak grows
 *   faster than the batch (as attention does with length)". Neither: NONE, note "the peaks do not
 *   follow the batch ...". With cfg->fixed_known the line goes through (0, fixed_bytes) and no
 *   quadratic is tried.
 * - A line whose slope is <= 0: NONE, note "the peak does not grow with the batch: is {batch}
 *   used?" (an ignored placeholder shows so). Fewer batch sizes than needed, or every run failed:
 *   NONE, the note says so.
 *   For NONE the line's coefficients and misfit are still filled; max_batch is 0.
 * - Margin at batch b: (f + misfit) x predicted(b), where f is the largest (reserved - allocated)
 *   / peak_bytes of the runs that give both allocator figures (reserved >= allocated), and at least
 *   1 % of room (rounded up to a byte).
 * - max_batch: the largest multiple of multiple_of with fixed + a*b + c*b^2 + margin <= room;
 *   0 when even multiple_of does not fit (note "even batch N needs X, Y more than the room").
 *   predicted_peak_bytes and margin_bytes are those of max_batch (of multiple_of when it is 0).
 * - A failed run is an upper bound: when the fit alone would answer at or above the smallest failed
 *   batch F, max_batch is the largest batch that ran below F (rounded down to multiple_of): the
 *   runs know more than the fit there, and gpumon_fit_next bisects between them; the note says so.
 * - extrapolated: max_batch > 4 x the largest batch that ran; the note says a run nearer would
 *   check it. When several things are worth saying the note joins them with "; ".
 * Returns 0 (also for NONE), or GPUMON_E_INVAL for NULL runs/cfg/out, n == 0, a cfg->size or
 * out->size this library does not know, a batch that is not a positive finite number; the note,
 * when out is usable, then names the problem. Never prints, never aborts.
 */
GPUMON_API int gpumon_fit_batch(const gpumon_fit_run *runs, size_t n, const gpumon_fit_config *cfg,
                                gpumon_fit *out);

/*
 * The next batch size to measure, or 0 when the runs so far are enough to answer (or cannot be
 * improved on by a run, or are not valid input: gpumon_fit_batch then says why). Batch sizes
 * below count the runs that did not fail, the same batch once; F is the smallest failed batch.
 * - None: `first`, halved (rounded down) until it is below F; 0 when that reaches 0.
 * - One, b with peak p: 2b, unless the proportional prediction (p x 2, i.e. fixed taken as 0,
 *   which over-estimates the growth) passes half the room: then the largest x with p x / b <=
 *   room / 2, at least b + 1, and 0 when that is predicted not to fit (p x / b + 1 % of room >
 *   room). p is the largest peak at b. Kept below F: when that leaves nothing above b, 0.
 * - Two or more with a failed run: the bound bisected: the midpoint of the largest batch that ran
 *   below F and F (rounded down to multiple_of), while they are more than multiple_of and 1 % of
 *   the smaller apart; else 0.
 * - Two or more whose peaks have not grown measurably (the highest peak at the largest batch less
 *   the one at the smallest is under 32 MiB and under 1 % of the latter: the allocator's rounding
 *   hides the activations of a model whose weights dwarf them), without cfg->fixed_known: a larger
 *   run, 8 x the largest batch, or less where the steepest slope the runs allow ((growth + that
 *   threshold) / (largest - smallest batch)) predicts half the room, rounded down to multiple_of;
 *   0 when that is not over 1.25 x the largest, or when the runs already span 1024 x (the batch is
 *   then taken as unused, and gpumon_fit_batch says so).
 * - Two or more that grew: the fit (gpumon_fit_batch); a run at max_batch / 2 (rounded down to a
 *   multiple of multiple_of when at least one), when that is more than 1.25 x the largest batch
 *   run; else 0. At most 8 distinct batch sizes are run: then 0.
 * Never a batch predicted (prediction + margin) not to fit the room, never one at or above F.
 */
GPUMON_API uint64_t gpumon_fit_next(const gpumon_fit_run *runs, size_t n, const gpumon_fit_config *cfg,
                                    uint64_t first);

/* What one run measured, as a front end has it: the job's NVML figures and its allocator's. 0 is
 * "unknown" for every byte figure. */
typedef struct gpumon_fit_measure {
	unsigned size;                 /* sizeof(gpumon_fit_measure) */
	double batch;                  /* the run's batch size */
	int failed;                    /* 1: the run ran out of memory */
	uint64_t nvml_peak_bytes;      /* the highest NVML figure of the job's processes together during
	                                  the run (a recording's job peak) */
	uint64_t nvml_bytes;           /* the process's NVML figure at one moment of the run ... */
	uint64_t reserved_bytes;       /* ... and its allocator's reserved at that moment: what it holds
	                                  outside the allocator (CUDA context, libraries) is their difference */
	uint64_t allocated_peak_bytes; /* the allocator's peak allocated */
	uint64_t reserved_peak_bytes;  /* the allocator's peak reserved */
} gpumon_fit_measure;

/*
 * The run gpumon_fit_batch takes, from what the run measured: its peak is what NVML would have
 * seen at the allocator's peak, the highest of nvml_peak_bytes, nvml_bytes, and the allocator's
 * peak (reserved, else allocated) plus what the process holds outside the allocator
 * (nvml_bytes - reserved_bytes when both are known and positive, else 0). A sampled NVML peak may
 * miss the allocator's, and the allocator's misses the CUDA context: the larger is the run's.
 * batch, failed and the allocator's peaks are copied. Returns 0, or GPUMON_E_INVAL for a NULL
 * argument or an m->size this library does not know (*out untouched).
 */
GPUMON_API int gpumon_fit_run_from(const gpumon_fit_measure *m, gpumon_fit_run *out);

/* What a job's process may still take on its GPU, from its figures now. 0 is "unknown" or "none". */
typedef struct gpumon_job_room_input {
	unsigned size;                 /* sizeof(gpumon_job_room_input) */
	int free_known;                /* 0: the GPU's free memory is unknown (nothing can be said) */
	uint64_t free_bytes;           /* the GPU's free memory now */
	uint64_t process_bytes;        /* the process's NVML figure now */
	uint64_t reserved_bytes;       /* its allocator's reserved now (cached blocks are reusable) */
	uint64_t cap_bytes;            /* its allocator's cap (torch's per-process fraction, JAX's limit) */
} gpumon_job_room_input;

typedef struct gpumon_job_room {
	unsigned size;                 /* set by the caller: sizeof(gpumon_job_room) */
	uint64_t room_bytes;           /* what the process may hold in all, as NVML counts it: the free
	                                  memory plus what it holds (the larger of its NVML figure and its
	                                  reserve), no more than the cap plus outside_bytes */
	uint64_t allocator_bytes;      /* what its allocator may reach: room_bytes - outside_bytes (a
	                                  framework's peak is compared with this one) */
	uint64_t outside_bytes;        /* held outside the allocator: NVML figure - reserved, 0 when
	                                  NVML's figure is not above the reserve */
} gpumon_job_room;

/*
 * The room of a job's process on its GPU (the room gpumon fit, gpumon.fit() and
 * suggest_batch_size() fit to), filled into *out (out->size kept). Returns 0, GPUMON_E_NOT_FOUND
 * when the free memory is unknown (*out zeroed), GPUMON_E_INVAL for NULL arguments or a size this
 * library does not know.
 */
GPUMON_API int gpumon_job_room_get(const gpumon_job_room_input *in, gpumon_job_room *out);

/* ---------------------------------------------------------------------------------------------
 * Allocator plan: allocator settings (a cap, a fraction, no pre-allocation, PyTorch's keys ...)
 * turned into the environment variables each framework reads (Paddle FLAGS_*,
 * PYTORCH_CUDA_ALLOC_CONF, XLA_PYTHON_CLIENT_*, TF_*), with sentences for the settings that have
 * no effect where. `gpumon run` and Python's limit_pool() ask these. Pure functions, thread-safe.
 * ------------------------------------------------------------------------------------------- */

/* Frameworks, as bits */
enum {
	GPUMON_FW_TORCH = 1u << 0,
	GPUMON_FW_PADDLE = 1u << 1,
	GPUMON_FW_JAX = 1u << 2,
	GPUMON_FW_TF = 1u << 3,
	GPUMON_FW_ALL = (1u << 4) - 1,
};

/* Bits of gpumon_alloc_opts.flags */
enum {
	GPUMON_ALLOC_ENFORCED = 1u << 0,     /* the caller enforces limit_bytes itself at the NVML level
						(gpumon run): a framework without a cap variable is then
						only explained, not warned about */
	GPUMON_ALLOC_PYTHON_NAMES = 1u << 1, /* notes and errors name settings as Python's limit_pool()
						keywords (fraction, paddle_strategy='naive_best_fit'), not
						as gpumon run's options (--fraction, --paddle-strategy ...) */
};

typedef struct gpumon_alloc_opts {
	unsigned size;                /* sizeof(gpumon_alloc_opts) */
	unsigned flags;               /* GPUMON_ALLOC_* */
	unsigned frameworks;          /* GPUMON_FW_* bits; 0 = all */
	uint64_t limit_bytes;         /* a cap of the pool; 0 = none */
	uint64_t initial_bytes;       /* the pool's first size; 0 = none */
	double fraction;              /* a share of the GPU; 0 = none, else 0 < F <= 1 */
	int no_prealloc;              /* no pre-allocation */
	int growth;                   /* grow as needed (gpumon run --growth) */
	int expandable;               /* PyTorch expandable_segments */
	uint64_t max_split_bytes;     /* PyTorch max_split_size_mb; 0 = none */
	double gc_threshold;          /* PyTorch garbage_collection_threshold; 0 = none, else 0 < F < 1 */
	const char *paddle_strategy;  /* FLAGS_allocator_strategy; NULL = none */
	int jax_platform_allocator;   /* XLA_PYTHON_CLIENT_ALLOCATOR=platform */
	uint64_t gpu_total_bytes;     /* memory of the GPU the job gets (for JAX's fraction); 0 unknown */
	const char *gpu_spec;         /* gpumon run --gpu as given; NULL none */
	const char *visible_devices;  /* with gpu_spec: the CUDA_VISIBLE_DEVICES the job gets */
} gpumon_alloc_opts;

typedef struct gpumon_env_var {
	char *name;
	char *value;
} gpumon_env_var;

typedef struct gpumon_alloc_plan {
	gpumon_env_var *vars;     /* to set in the job's environment, in a stable order */
	size_t nvars;
	char **notes;             /* sentences for the user */
	unsigned char *loud;      /* per note: 1 when a setting given has no effect at all (said
				     always), 0 when it only explains or acts through another framework */
	unsigned char *no_effect; /* per note: 1 when it says a setting has no effect on a framework of
				     the selection (loud notes included) */
	size_t nnotes;
} gpumon_alloc_plan;

/*
 * Parses a size: digits with an optional fraction and unit, K/M/G/T with or without "i" and "B"
 * (all binary: "8G", "8GB" and "8GiB" are 8 * 2^30, as the frameworks' _mb flags count MiB), or
 * plain bytes. Returns 0 and sets *out, or GPUMON_E_INVAL (bad text, zero or overflow).
 */
GPUMON_API int gpumon_size_parse(const char *s, uint64_t *out);

/* Parses a fraction in (0, hi] (hi_inclusive) or (0, hi). Returns 0 or GPUMON_E_INVAL. */
GPUMON_API int gpumon_fraction_parse(const char *s, double hi, int hi_inclusive, double *out);

/* "torch" (or "pytorch"), "paddle" (or "paddlepaddle"), "jax", "tf" (or "tensorflow"), "all" ->
 * GPUMON_FW_* bits; 0 when unknown. */
GPUMON_API unsigned gpumon_framework_bits(const char *name);

/* Guesses the frameworks a script uses from its text (import lines); 0 when none is named. */
GPUMON_API unsigned gpumon_framework_detect(const char *text, size_t len);

/* Validates the options (conflicts, ranges). Returns 0, or GPUMON_E_INVAL with a one-line reason in
 * err (named as flags says). */
GPUMON_API int gpumon_alloc_check(const gpumon_alloc_opts *o, char *err, size_t errlen);

/*
 * Builds the variables and notes for the options o, given the current environment envp
 * (NULL-terminated "NAME=VALUE" strings; NULL = empty): values the user already has are merged
 * (PYTORCH_CUDA_ALLOC_CONF keys) or reported. Returns 0, GPUMON_E_INVAL for a NULL argument or an
 * o->size this library does not know, or GPUMON_E_NOMEM (out is then empty). Free with
 * gpumon_alloc_plan_free().
 */
GPUMON_API int gpumon_alloc_plan_build(const gpumon_alloc_opts *o, char *const *envp, gpumon_alloc_plan *out);

/* Frees what gpumon_alloc_plan_build() allocated and empties *p; NULL: nothing. */
GPUMON_API void gpumon_alloc_plan_free(gpumon_alloc_plan *p);

/* The value of name in envp ("NAME=VALUE" strings, NULL-terminated), or NULL. */
GPUMON_API const char *gpumon_env_get(char *const *envp, const char *name);

/* ---------------------------------------------------------------------------------------------
 * TensorBoard event files: scalars that TensorBoard (or any TFRecord + protobuf reader) reads,
 * written without TensorFlow. One writer owns one new file in a directory; values are float32, as
 * TensorBoard's simple_value stores them.
 * Thread rules: one thread at a time per writer.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_tfevents gpumon_tfevents;

/*
 * Creates dir when missing (and its parents) and a new file in it named
 * events.out.tfevents.<unix seconds, 10 digits>.<host>.<pid>.<counter> (counter: the first not
 * taken; nothing is overwritten), and writes the file-version record. wall_time is the Unix time
 * in seconds for the name and that record; <= 0 means now. On success returns 0 and sets *out.
 * On failure returns GPUMON_E_INVAL (dir NULL or empty), GPUMON_E_IO (the directory or file
 * could not be created: the message names the path and the reason) or GPUMON_E_NOMEM; *out is
 * then still set when possible, to a writer holding the message, which the caller destroys.
 */
GPUMON_API int gpumon_tfevents_create(const char *dir, double wall_time, gpumon_tfevents **out);

/* The path of the file being written ("" when none); valid until gpumon_tfevents_destroy(). */
GPUMON_API const char *gpumon_tfevents_path(const gpumon_tfevents *w);

/* The last error message ("" when none); valid until the next call on w. */
GPUMON_API const char *gpumon_tfevents_errmsg(const gpumon_tfevents *w);

/*
 * Appends one scalar event: tag (1..1024 bytes, UTF-8, e.g. "memory/allocated_mib"), step >= 0,
 * wall_time in Unix seconds (<= 0: now), value. Buffered: gpumon_tfevents_flush() or _destroy()
 * makes it visible to readers. Returns 0, GPUMON_E_INVAL (bad tag or step; nothing written) or
 * GPUMON_E_IO (disk full, file removed ...): the writer then refuses every later write.
 */
GPUMON_API int gpumon_tfevents_scalar(gpumon_tfevents *w, const char *tag, int64_t step, double wall_time,
				      float value);

/* Writes what is buffered to the file. Returns 0 or GPUMON_E_IO (the first write error seen). */
GPUMON_API int gpumon_tfevents_flush(gpumon_tfevents *w);

/* Flushes, closes the file and frees w (call gpumon_tfevents_flush() first to learn of a failed
 * write). NULL: no-op. */
GPUMON_API void gpumon_tfevents_destroy(gpumon_tfevents *w);

/* ---------------------------------------------------------------------------------------------
 * NVML failures by function, counted since gpumon_create (for an exporter's error counter).
 * A field the driver does not offer is not a failure and is not counted.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_nvml_error_count {
	char function[48];  /* "nvmlDeviceGetMemoryInfo_v2" */
	uint64_t count;
	uint64_t reserved[4];        /* 0: room for fields to come ("Versions and the ABI" above) */
} gpumon_nvml_error_count;

/* Copies up to cap entries into out (may be NULL with cap 0) and returns how many functions have
 * failed so far (at most 32 distinct functions are tracked). Safe from any thread. */
GPUMON_API size_t gpumon_nvml_errors_get(gpumon *g, gpumon_nvml_error_count *out, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Prometheus exporter: an HTTP server (libevent's evhttp, loaded when an exporter is created;
 * OpenSSL only for TLS) answering /metrics (text format 0.0.4), /healthz and /. A collector
 * thread feeds a run model from a sampler of its own (or from a recording, replayed) and renders
 * a snapshot a few times a second; the HTTP thread only sends the latest snapshot and never calls
 * the driver. The metrics are listed in docs/metrics.md.
 * Thread rules: gpumon_exporter_framework() is safe from any thread; create and destroy from one.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_exporter gpumon_exporter;

/* Default TCP port: on no exporter's list (dcgm-exporter uses 9400, nvidia_gpu_exporter 9835). */
#define GPUMON_EXPORTER_DEFAULT_PORT 19400

/* Bits of gpumon_exporter_config.compat: the peers' metric names, in addition to gpumon's own. */
enum {
	GPUMON_COMPAT_DCGM = 1u << 0,       /* dcgm-exporter: DCGM_FI_DEV_FB_USED{gpu,UUID,...} (MiB) */
	GPUMON_COMPAT_NVIDIA_SMI = 1u << 1, /* nvidia_gpu_exporter: nvidia_smi_memory_used_bytes{uuid} */
};

/* gpumon_exporter_config.max_processes: every process */
#define GPUMON_EXPORTER_ALL_PROCESSES 0xFFFFFFFFu

typedef struct gpumon_exporter_config {
	unsigned size;               /* sizeof(gpumon_exporter_config) */
	const char *listen;          /* "ADDR:PORT" ("[::1]:PORT" for IPv6); NULL = "127.0.0.1:19400";
				        port 0 = any free port (see gpumon_exporter_address) */
	unsigned interval_ms;        /* memory sampling period; 0 = 10 */
	unsigned max_processes;      /* processes exported one by one (pid labels), the largest of the
				        node; 0 = none: the per-owner series only (docs/metrics.md);
				        GPUMON_EXPORTER_ALL_PROCESSES = all */
	int no_processes;            /* 1: no process list at all (no per-process or per-owner metrics) */
	unsigned compat;             /* GPUMON_COMPAT_* */
	unsigned peak_window_s;      /* peaks cover the last W to 2W seconds; 0 = 60 */
	unsigned max_connections;    /* simultaneous HTTP connections; 0 = 1024. When all are held, the
				        one that has waited longest for a request is closed for a new one */
	unsigned timeout_s;          /* a request head must arrive whole within this many seconds of the
				        connection's opening, and a response be taken within as many;
				        0 = 10 */
	const char *tls_cert_file;   /* PEM files; both or neither: HTTPS instead of HTTP */
	const char *tls_key_file;
	const char *basic_auth_file; /* a file whose first line is "USER:PASSWORD": every request
				        must carry it (HTTP basic authentication); NULL = none */
	int insecure_listen;         /* 1: allow a non-loopback address without TLS and basic auth */
	int no_energy;               /* 1: do not read the energy counter (~3 ms a call on some drivers) */
	const char *replay;          /* a recording to replay instead of sampling (g may then be NULL):
				        its records are fed at once and the figures then stay as at its end */
	unsigned max_connections_per_ip; /* connections from one address (one /64 for IPv6); 0 = 64.
				        A new one beyond it closes that address's longest-waiting one */
	unsigned keepalive_s;        /* a kept-alive connection gets this many seconds, from the end of a
				        response, to send its next request head whole; 0 = 120 */
	int no_keepalive;            /* 1: close the connection after every response */
} gpumon_exporter_config;

/* The largest max_connections and max_connections_per_ip, and the largest timeout_s and
 * keepalive_s, gpumon_exporter_create takes (above: GPUMON_E_INVAL naming the field); the front ends
 * that take these limits (gpumon serve, Python's Exporter) say the same ranges with these. */
#define GPUMON_EXPORTER_CONNECTIONS_MAX 65536u
#define GPUMON_EXPORTER_SECONDS_MAX 3600u

/*
 * Starts the sampler (or the replay), the collector thread and the HTTP server. cfg may be NULL for
 * the defaults. A non-loopback listen address needs TLS and basic auth, or insecure_listen. Returns
 * 0 and sets *out, or GPUMON_E_INVAL (bad address or option, a non-loopback address refused),
 * GPUMON_E_IO (the address cannot be bound, a file cannot be read, TLS not available),
 * GPUMON_E_NOMEM, or a sampler status; *out is then set when possible to an exporter holding the
 * message (gpumon_exporter_errmsg), which the caller destroys. g must outlive the exporter.
 */
GPUMON_API int gpumon_exporter_create(gpumon *g, const gpumon_exporter_config *cfg, gpumon_exporter **out);

/* The bound address as "ADDR:PORT" ("[::1]:19400" for IPv6), NUL-terminated, truncated to len. */
GPUMON_API void gpumon_exporter_address(const gpumon_exporter *e, char *buf, size_t len);

/*
 * Publishes the allocator figures of a framework in this process (the latest per pid and device
 * is exported as gpumon_framework_*_bytes; the model judges them). Returns 0, GPUMON_E_INVAL, or
 * GPUMON_E_NOMEM (more than 256 distinct pid/device pairs).
 */
GPUMON_API int gpumon_exporter_framework(gpumon_exporter *e, const gpumon_framework_sample *s);

/* The message of the exporter's last failure ("" none; "Errors" at the top). */
GPUMON_API const char *gpumon_exporter_errmsg(const gpumon_exporter *e);

/* Stops serving (open connections are closed), stops the threads and frees e. NULL is a no-op. */
GPUMON_API void gpumon_exporter_destroy(gpumon_exporter *e);

#ifdef __cplusplus
}
#endif
#endif /* GPUMON_GPUMON_H */
