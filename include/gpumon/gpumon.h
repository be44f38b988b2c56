/* SPDX-License-Identifier: MIT */
/*
 * gpumon.h — the whole public interface of libgpumon: GPU memory, activity and the
 * processes holding memory, read from NVML (loaded at run time) and /proc.
 * Nothing outside this header is API.
 */
#ifndef GPUMON_GPUMON_H
#define GPUMON_GPUMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUMON_VERSION_MAJOR 0
#define GPUMON_VERSION_MINOR 1
#define GPUMON_VERSION_PATCH 0
#define GPUMON_VERSION_STRING "0.1.0"

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
};

/* A short English description of a status code; never NULL, static storage. */
GPUMON_API const char *gpumon_strerror(int status);

/* The library version as "MAJOR.MINOR.PATCH"; static storage. */
GPUMON_API const char *gpumon_version(void);

/* ---------------------------------------------------------------------------------------------
 * Handle
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon gpumon;

/*
 * Opens a handle: loads NVML, initialises it and builds the device table.
 *
 * The library loaded is the file named by the environment variable GPUMON_NVML_LIBRARY when it
 * is set and non-empty, else "libnvidia-ml.so.1" from the system's search path.
 *
 * On success returns 0 and sets *out to a new handle. On failure returns a negative status; *out
 * is then still set to a handle that holds the error message (gpumon_errmsg()) and must be passed
 * to gpumon_close(), except after GPUMON_E_NOMEM, when *out may be NULL. GPUMON_E_NO_LIBRARY: no
 * NVML library; GPUMON_E_NO_PERMISSION: NVML refused to start for lack of permission;
 * GPUMON_E_DRIVER: the driver is not loaded or not usable. A handle whose open failed answers
 * every other call with GPUMON_E_DRIVER.
 *
 * Thread-safety: the returned handle may be used from several threads at once; each call is
 * independent. gpumon_close() must not race with other calls on the same handle.
 */
GPUMON_API int gpumon_open(gpumon **out);

/* Shuts NVML down (once per handle) and frees the handle. gpumon_close(NULL) is a no-op. */
GPUMON_API void gpumon_close(gpumon *g);

/*
 * The message of the last failure on this handle, in the calling thread: a sentence naming what
 * failed and why (for example "nvmlDeviceGetMemoryInfo on GPU 1: GPU is lost"). "" when no call
 * has failed in this thread. The pointer stays valid until the next call on the handle from the
 * same thread, or until gpumon_close().
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
 * Devices. A device is named by its position in the table built at open (0 .. count-1), which is
 * NVML's index at that moment. NVML's order is not guaranteed to match CUDA's: key stored data by
 * UUID, not by index.
 * ------------------------------------------------------------------------------------------- */

/* Number of GPUs in the table (may be 0). */
GPUMON_API unsigned gpumon_device_count(const gpumon *g);

/* Bits of gpumon_device_info.present */
enum {
	GPUMON_INFO_NAME = 1u << 0,
	GPUMON_INFO_UUID = 1u << 1,
	GPUMON_INFO_PCI_BUS_ID = 1u << 2,
	GPUMON_INFO_MEMORY_TOTAL = 1u << 3,
};

typedef struct gpumon_device_info {
	unsigned index;              /* position in the table == NVML index at open */
	unsigned present;            /* GPUMON_INFO_* bits for the fields below that are known */
	int lost;                    /* 1 once the GPU reported itself lost */
	char name[96];               /* "NVIDIA H200" */
	char uuid[96];               /* "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51" */
	char pci_bus_id[32];         /* "00000000:00:06.0" (8-digit domain, as nvidia-smi prints it) */
	uint64_t memory_total_bytes; /* from the memory query at open */
} gpumon_device_info;

/* Fills *out for device dev. GPUMON_E_NOT_FOUND when dev >= count. Never touches the driver. */
GPUMON_API int gpumon_device_info_get(const gpumon *g, unsigned dev, gpumon_device_info *out);

/*
 * Finds the device named by spec, as nvidia-smi's -i accepts it: a decimal index, a UUID (whole,
 * or a unique prefix of at least 8 characters after "GPU-"; case-insensitive), or a PCI bus id
 * ("00000000:00:06.0", "0000:00:06.0" or "00:06.0"; case-insensitive). Leading and trailing
 * blanks are ignored. Sets *dev and returns 0, or GPUMON_E_NOT_FOUND / GPUMON_E_AMBIGUOUS /
 * GPUMON_E_INVAL (empty spec) with a message naming spec.
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
 * memory figures themselves cannot be read. Cost: one NVML call per field group asked for.
 */
GPUMON_API int gpumon_device_sample_read(gpumon *g, unsigned dev, unsigned want, gpumon_device_sample *out);

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
};

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
} gpumon_process;

/*
 * Lists the processes holding memory on device dev: compute and graphics lists merged (a pid in
 * both appears once, with both flags), each completed from /proc. A pid missing from /proc is
 * kept and flagged GPUMON_PROC_FOREIGN. Order: used_bytes descending, unknown last, then pid.
 *
 * On success sets *out to a new array of *count entries (NULL when 0) that the caller frees with
 * gpumon_process_list_free(). Returns 0, or GPUMON_E_LOST / GPUMON_E_NOT_FOUND / GPUMON_E_NOMEM /
 * GPUMON_E_NOT_SUPPORTED (the driver has no process call) / another status.
 */
GPUMON_API int gpumon_process_list(gpumon *g, unsigned dev, gpumon_process **out, size_t *count);

/* Frees an array from gpumon_process_list(). NULL is a no-op. */
GPUMON_API void gpumon_process_list_free(gpumon_process *list);


/* ---------------------------------------------------------------------------------------------
 * Sampler: a background thread that samples the chosen GPUs and their processes at a fixed period
 * (absolute deadlines on CLOCK_MONOTONIC, no spinning), keeps every raw device sample of the last
 * seconds in a ring (the flight recorder), and hands change-only records to one consumer through a
 * bounded queue. A slow consumer never stalls sampling: records that do not fit are dropped and
 * counted.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_sampler gpumon_sampler;

typedef struct gpumon_sampler_config {
	unsigned period_us;         /* memory sampling period; 0 = 10000 (10 ms); at least 1000 */
	unsigned slow_period_us;    /* utilization, temperature, power, clocks; 0 = 1000000 (1 s) */
	unsigned process_period_us; /* process lists; 0 = 100000 (100 ms); UINT32_MAX = never */
	unsigned heartbeat_ms;      /* a device record at least this often even when nothing
				       changed; 0 = 1000 */
	unsigned ring_seconds;      /* flight recorder length; 0 = 60 */
	unsigned queue_records;     /* queue capacity in records; 0 = 8192 */
	unsigned slow_fields;       /* GPUMON_F_* read at slow_period_us; 0 = utilization,
				       temperature, power and clocks (the energy counter is slow on
				       some drivers: ask for it explicitly) */
	const unsigned *devices;    /* device positions to sample; NULL = all */
	unsigned ndevices;
} gpumon_sampler_config;

/* Kinds of gpumon_record */
enum {
	GPUMON_REC_DEVICE = 1,       /* a device sample: it changed, or a heartbeat */
	GPUMON_REC_PROCESS = 2,      /* a process appeared on the device, or its memory changed */
	GPUMON_REC_PROCESS_GONE = 3, /* a process is no longer listed on the device */
	GPUMON_REC_LOST = 4,         /* the device reported itself lost; no more records from it */
};

typedef struct gpumon_record {
	int kind;                      /* GPUMON_REC_* */
	unsigned dev;                  /* device position */
	uint64_t t_ns;                 /* CLOCK_MONOTONIC */
	/* GPUMON_REC_DEVICE: the sample, and the exact extremes of memory_used_bytes over every
	   sample taken since the previous device record of this device (this one included) */
	gpumon_device_sample sample;
	uint64_t used_min_bytes, used_max_bytes;
	uint64_t used_max_t_ns;        /* when the maximum was seen */
	unsigned interval_samples;     /* samples that interval held */
	/* GPUMON_REC_PROCESS / _GONE: the process as listed (user, command line from /proc) */
	gpumon_process process;
} gpumon_record;

typedef struct gpumon_sampler_stats {
	uint64_t samples;       /* device samples taken (all devices) */
	uint64_t records;       /* records queued */
	uint64_t dropped;       /* records lost because the queue was full */
	uint64_t overruns;      /* periods missed because sampling took longer than the period */
	uint64_t errors;        /* failed driver reads (other than lost GPUs) */
	uint64_t busy_ns;       /* time the sampling thread spent working (not sleeping) */
	uint64_t started_ns;    /* CLOCK_MONOTONIC at start */
} gpumon_sampler_stats;

/*
 * Starts sampling. cfg may be NULL for the defaults. The sampler uses g until stopped: stop it
 * before gpumon_close(g). Returns 0 and sets *out, or GPUMON_E_INVAL (bad period, unknown device;
 * message on g), GPUMON_E_NOMEM. One consumer thread may call the functions below while the
 * sampling thread runs.
 */
GPUMON_API int gpumon_sampler_start(gpumon *g, const gpumon_sampler_config *cfg, gpumon_sampler **out);

/*
 * Takes up to cap queued records, oldest first, into buf; sets *n. Waits up to timeout_ms
 * (0: do not wait, -1: until a record arrives or the sampler stops) when none is queued.
 * Returns 0, or GPUMON_E_INVAL.
 */
GPUMON_API int gpumon_sampler_poll(gpumon_sampler *s, gpumon_record *buf, size_t cap, size_t *n, int timeout_ms);

/* Copies the counters (safe while sampling). */
GPUMON_API void gpumon_sampler_stats_get(gpumon_sampler *s, gpumon_sampler_stats *out);

/*
 * The flight recorder: copies the raw samples of device dev taken at or after since_ns, oldest
 * first, into a new array (free with free()) of *n entries. Returns 0, GPUMON_E_NOT_FOUND (dev not
 * sampled), GPUMON_E_NOMEM.
 */
GPUMON_API int gpumon_sampler_ring(gpumon_sampler *s, unsigned dev, uint64_t since_ns,
				   gpumon_device_sample **out, size_t *n);

/* Stops the thread and frees the sampler; records still queued are discarded. NULL is a no-op. */
GPUMON_API void gpumon_sampler_stop(gpumon_sampler *s);

/* ---------------------------------------------------------------------------------------------
 * Recordings: a SQLite file (WAL) holding a run's metadata, its devices and processes, the
 * records of a sampler, framework samples and events. The schema is documented in
 * docs/recording.md and versioned (PRAGMA user_version). Readers may open the file while it is
 * written. Writes are batched in transactions committed at least every 200 ms, so a kill -9
 * loses at most the last 0.25 s.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_recording gpumon_recording;

typedef struct gpumon_run_info {
	const char *kind;     /* "record" (system-wide) or "run" (a launched job); NULL = "record" */
	const char *command;  /* the job's command line, shell-quoted; NULL when none */
	const char *settings; /* settings applied to the job, one "NAME=VALUE" per line; NULL when none */
	int job_pid;          /* the job's pid, 0 when none */
} gpumon_run_info;

/*
 * Creates the recording file at path (GPUMON_E_EXISTS when it exists: nothing is overwritten),
 * writes the schema, the run metadata (host, driver, gpumon version, start time on both clocks,
 * info) and every device of g. On failure *out is still set when possible, to a handle holding
 * the message, and must be closed; GPUMON_E_IO names the path and the reason.
 */
GPUMON_API int gpumon_recording_create(gpumon *g, const char *path, const gpumon_run_info *info,
				       gpumon_recording **out);

/* The last error message of the recording ("" when none); valid until the next call on it. */
GPUMON_API const char *gpumon_recording_errmsg(const gpumon_recording *r);

/*
 * Appends sampler records. Committed when the open transaction is older than 200 ms, or by
 * gpumon_recording_commit/_close. Returns 0, or GPUMON_E_IO (disk full, file removed ...): the
 * recording then stops accepting writes (every later write returns GPUMON_E_IO at once) and what
 * was committed stays readable.
 */
GPUMON_API int gpumon_recording_write(gpumon_recording *r, const gpumon_record *recs, size_t n);

/* A framework sample from inside the training process (allocator figures; a value is absent
 * when its *_known is 0). */
typedef struct gpumon_framework_sample {
	uint64_t t_ns;              /* CLOCK_MONOTONIC of this machine */
	unsigned pid;               /* the reporting process */
	int device;                 /* the framework's device index (CUDA order), -1 unknown */
	int64_t step;               /* training step, -1 unknown */
	uint64_t allocated_bytes, reserved_bytes, max_allocated_bytes;
	int allocated_known, reserved_known, max_allocated_known;
	char framework[16];         /* "torch", "paddle", ... */
} gpumon_framework_sample;

GPUMON_API int gpumon_recording_framework(gpumon_recording *r, const gpumon_framework_sample *f);

/* An event: kind is a short word ("marker", "step", "alert", "note", "exit"), text free. */
GPUMON_API int gpumon_recording_event(gpumon_recording *r, uint64_t t_ns, const char *kind, const char *text);

/* Commits what is pending now. */
GPUMON_API int gpumon_recording_commit(gpumon_recording *r);

/*
 * Commits, stores the end time and the job's exit status (exit_status < 0: none), checkpoints the
 * WAL into the main file and frees r. Returns the first error seen, 0 when none. NULL: no-op, 0.
 */
GPUMON_API int gpumon_recording_close(gpumon_recording *r, int exit_status);

/* ---------------------------------------------------------------------------------------------
 * Leak detection: pure analysis of one series of memory figures, fed point by point (online, for
 * alerts) or all at once (offline, a whole recording); the answer is the same either way. Feed the
 * figure that says most: the framework's allocated bytes measured at the same point of each step
 * when known, else the job's per-process NVML figure, else the device figure. It must not call
 * warm-up, allocator caching or dynamic shapes that plateau, a one-off spike, or a single rise of
 * the floor (optimizer state created late) a leak; it must call steady growth, fast or slow, one.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_leak gpumon_leak;

/* Verdicts */
enum {
	GPUMON_LEAK_INSUFFICIENT_DATA = 0, /* too few points or too short a span to tell */
	GPUMON_LEAK_NONE = 1,
	GPUMON_LEAK_SUSPECTED = 2,
};

typedef struct gpumon_leak_result {
	int verdict;                    /* GPUMON_LEAK_* */
	double rate_bytes_per_step;     /* growth of the floor; 0 when no step numbers were given */
	double rate_bytes_per_second;
	int64_t start_step;             /* where the growth started; -1 unknown */
	uint64_t start_t_ns;            /* likewise in time; 0 unknown */
	double confidence;              /* 0..1 */
	double steps_to_oom;            /* at this rate until limit_bytes; < 0 unknown */
	double seconds_to_oom;          /* likewise; < 0 unknown */
	uint64_t points;                /* points fed */
	uint64_t suspected_points;      /* points over which the verdict has said SUSPECTED without a break */
	int alert;                      /* 1: SUSPECTED for long enough to tell someone (the last quarter of
					 * the points, at least 16): what online alerts use */
} gpumon_leak_result;

/* Creates a detector (no options yet: pass NULL). Returns 0 / GPUMON_E_INVAL / GPUMON_E_NOMEM. */
GPUMON_API int gpumon_leak_create(const void *options, gpumon_leak **out);

/*
 * Feeds one point: step (-1 when unknown), time (CLOCK_MONOTONIC ns), the figure in bytes, and the
 * bytes at which the process would run out (the device total, a --limit; 0 unknown). Points must
 * come in time order (GPUMON_E_INVAL otherwise, the point ignored). Memory grows with the number
 * of points only through a bounded summary: the detector runs for days.
 */
GPUMON_API int gpumon_leak_add(gpumon_leak *l, int64_t step, uint64_t t_ns, uint64_t bytes, uint64_t limit_bytes);

/* The verdict on what was fed so far. */
GPUMON_API void gpumon_leak_result_get(const gpumon_leak *l, gpumon_leak_result *out);

/* Frees the detector; NULL is a no-op. */
GPUMON_API void gpumon_leak_destroy(gpumon_leak *l);

/* ---------------------------------------------------------------------------------------------
 * Peaks: the highest figure of a series and of each window of time, with when and whose, in
 * bounded memory. Windows start at the first point and are window_ns long; when more than
 * max_windows would be needed, neighbours merge pairwise and windows become twice as long.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_peaks gpumon_peaks;

typedef struct gpumon_peak {
	uint64_t bytes;       /* the highest figure */
	uint64_t t_ns;        /* when it was seen (the first time, if it repeats) */
	int64_t owner_pid;    /* whose it was as the caller said (e.g. the largest process); -1 unknown */
	uint64_t start_t_ns;  /* the window: [start, end); the whole series for the global peak */
	uint64_t end_t_ns;
	uint64_t points;      /* points in the window */
} gpumon_peak;

/* Creates a tracker. window_ns > 0, 2 <= max_windows <= 4096. GPUMON_E_INVAL / GPUMON_E_NOMEM. */
GPUMON_API int gpumon_peaks_create(uint64_t window_ns, unsigned max_windows, gpumon_peaks **out);

/* Feeds one point (CLOCK_MONOTONIC ns, bytes, owner pid or -1). Points before the first one are
 * refused with GPUMON_E_INVAL; later points may come slightly out of order. */
GPUMON_API int gpumon_peaks_add(gpumon_peaks *p, uint64_t t_ns, uint64_t bytes, int64_t owner_pid);

/* The global peak: 0, or GPUMON_E_NOT_FOUND when nothing was fed. */
GPUMON_API int gpumon_peaks_global(const gpumon_peaks *p, gpumon_peak *out);

/* Copies the peaks of the windows that hold points, oldest first, into out[0..cap-1]; returns
 * how many there are (which may exceed cap). */
GPUMON_API size_t gpumon_peaks_windows(const gpumon_peaks *p, gpumon_peak *out, size_t cap);

/* Frees the tracker; NULL is a no-op. */
GPUMON_API void gpumon_peaks_destroy(gpumon_peaks *p);

/* ---------------------------------------------------------------------------------------------
 * Out-of-memory forensics: from what was on the card when a job ran out of memory, the most likely
 * cause in plain words (the seed's table: a leak, another process holding the card, a transient
 * peak, an allocator that pre-reserved most of it). A pure function: the caller gathers the figures
 * (a recording, or the sampler's flight recorder) and says which it knows.
 * ------------------------------------------------------------------------------------------- */
enum {
	GPUMON_OOM_UNKNOWN = 0,
	GPUMON_OOM_LEAK = 1,           /* the job's floor kept rising until the card was full */
	GPUMON_OOM_CO_TENANT = 2,      /* other processes held the memory the job needed */
	GPUMON_OOM_TRANSIENT_PEAK = 3, /* a sudden peak well above the job's usual level */
	GPUMON_OOM_PREALLOCATION = 4,  /* the allocator had reserved most of the card, little of it in use */
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

typedef struct gpumon_oom_input {
	unsigned known;               /* GPUMON_OOM_F_* */
	uint64_t total_bytes;         /* the card's memory, or the limit the job ran against */
	uint64_t used_bytes;          /* used on the card at the moment (the peak of the last seconds) */
	uint64_t job_bytes;           /* the job's processes together (NVML) at that moment */
	uint64_t others_bytes;        /* every other process on the card at that moment */
	int64_t top_other_pid;        /* the largest other process; -1 none */
	uint64_t top_other_bytes;
	const char *top_other_user;   /* NULL unknown */
	const char *top_other_command;
	uint64_t floor_bytes;         /* the job's usual level: the lowest used over the seconds before */
	double rise_seconds;          /* how long the climb from floor to the peak took; < 0 unknown */
	uint64_t early_bytes;         /* the job's figure (NVML) in its first seconds on the card */
	uint64_t allocated_bytes;     /* the framework's figures just before the end */
	uint64_t reserved_bytes;
	gpumon_leak_result leak;      /* the leak detector's result on the job */
} gpumon_oom_input;

typedef struct gpumon_oom_diagnosis {
	int cause;                    /* GPUMON_OOM_* */
	char text[640];               /* the diagnosis in plain words, with the figures and what to do */
} gpumon_oom_diagnosis;

/* Fills *out from *in. GPUMON_E_INVAL on NULL. */
GPUMON_API int gpumon_oom_diagnose(const gpumon_oom_input *in, gpumon_oom_diagnosis *out);

/* ---------------------------------------------------------------------------------------------
 * TensorBoard event files: scalars that TensorBoard (or any TFRecord + protobuf reader) reads,
 * written without TensorFlow. One writer owns one new file in a directory; values are float32, as
 * TensorBoard's simple_value stores them. Not thread-safe: one thread per writer.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_tfevents gpumon_tfevents;

/*
 * Creates dir when missing (and its parents) and a new file in it named
 * events.out.tfevents.<unix seconds, 10 digits>.<host>.<pid>.<counter> (counter: the first not
 * taken; nothing is overwritten), and writes the file-version record. wall_time is the Unix time
 * in seconds for the name and that record; <= 0 means now. On success returns 0 and sets *out.
 * On failure returns GPUMON_E_INVAL (dir NULL or empty), GPUMON_E_IO (the directory or file
 * could not be created: the message names the path and the reason) or GPUMON_E_NOMEM; *out is
 * then still set when possible, to a writer holding the message, and must be closed.
 */
GPUMON_API int gpumon_tfevents_open(const char *dir, double wall_time, gpumon_tfevents **out);

/* The path of the file being written ("" when none); valid until gpumon_tfevents_close(). */
GPUMON_API const char *gpumon_tfevents_path(const gpumon_tfevents *w);

/* The last error message ("" when none); valid until the next call on w. */
GPUMON_API const char *gpumon_tfevents_errmsg(const gpumon_tfevents *w);

/*
 * Appends one scalar event: tag (1..1024 bytes, UTF-8, e.g. "memory/allocated_mib"), step >= 0,
 * wall_time in Unix seconds (<= 0: now), value. Buffered: gpumon_tfevents_flush() or _close()
 * makes it visible to readers. Returns 0, GPUMON_E_INVAL (bad tag or step; nothing written) or
 * GPUMON_E_IO (disk full, file removed ...): the writer then refuses every later write.
 */
GPUMON_API int gpumon_tfevents_scalar(gpumon_tfevents *w, const char *tag, int64_t step, double wall_time,
				      float value);

/* Writes what is buffered to the file. Returns 0 or GPUMON_E_IO. */
GPUMON_API int gpumon_tfevents_flush(gpumon_tfevents *w);

/* Flushes, closes the file and frees w. Returns the first write error seen, 0 when none.
 * NULL: no-op, 0. */
GPUMON_API int gpumon_tfevents_close(gpumon_tfevents *w);

/* ---------------------------------------------------------------------------------------------
 * NVML failures by function, counted since gpumon_open (for an exporter's error counter).
 * A field the driver does not offer is not a failure and is not counted.
 * ------------------------------------------------------------------------------------------- */
typedef struct gpumon_nvml_error_count {
	char function[48];  /* "nvmlDeviceGetMemoryInfo_v2" */
	uint64_t count;
} gpumon_nvml_error_count;

/* Copies up to cap entries into out (may be NULL with cap 0) and returns how many functions have
 * failed so far (at most 32 distinct functions are tracked). Safe from any thread. */
GPUMON_API size_t gpumon_nvml_errors_get(gpumon *g, gpumon_nvml_error_count *out, size_t cap);

/* ---------------------------------------------------------------------------------------------
 * Prometheus exporter: an HTTP server (libmicrohttpd) answering /metrics (text format 0.0.4),
 * /healthz and /. A collector thread drains a sampler of its own and renders a snapshot a few
 * times a second; HTTP threads only send the latest snapshot and never call the driver. The
 * metrics are listed in docs/metrics.md.
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
	const char *listen;          /* "ADDR:PORT" ("[::1]:PORT" for IPv6); NULL = "127.0.0.1:19400";
				        port 0 = any free port (see gpumon_exporter_address) */
	unsigned interval_ms;        /* memory sampling period; 0 = 10 */
	unsigned max_processes;      /* processes exported, the largest of the node; 0 = 50;
				        GPUMON_EXPORTER_ALL_PROCESSES = all */
	int no_processes;            /* 1: no process list at all (no per-process metrics) */
	unsigned compat;             /* GPUMON_COMPAT_* */
	unsigned peak_window_s;      /* peaks cover the last W to 2W seconds; 0 = 60 */
	unsigned max_connections;    /* simultaneous HTTP connections; 0 = 1024 */
	unsigned timeout_s;          /* an idle connection is closed after this; 0 = 10 */
	const char *tls_cert_file;   /* PEM files; both or neither: HTTPS instead of HTTP */
	const char *tls_key_file;
	const char *basic_auth_file; /* a file whose first line is "USER:PASSWORD": every request
				        must carry it (HTTP basic authentication); NULL = none */
	int insecure_listen;         /* 1: allow a non-loopback address without TLS and basic auth */
	int no_energy;               /* 1: do not read the energy counter (~3 ms a call on some drivers) */
} gpumon_exporter_config;

/*
 * Starts the sampler, the collector thread and the HTTP server. cfg may be NULL for the defaults.
 * A non-loopback listen address needs TLS and basic auth, or insecure_listen. Returns 0 and sets
 * *out, or GPUMON_E_INVAL (bad address or option, a non-loopback address refused), GPUMON_E_IO
 * (the address cannot be bound, a file cannot be read, TLS not available), GPUMON_E_NOMEM, or a
 * sampler status; the message (gpumon_errmsg(g)) says which and why. g must outlive the exporter.
 */
GPUMON_API int gpumon_exporter_start(gpumon *g, const gpumon_exporter_config *cfg, gpumon_exporter **out);

/* The bound address as "ADDR:PORT" ("[::1]:19400" for IPv6), NUL-terminated, truncated to len. */
GPUMON_API void gpumon_exporter_address(const gpumon_exporter *e, char *buf, size_t len);

/*
 * Publishes the allocator figures of a framework in this process (the latest per pid and device
 * is exported as gpumon_framework_*_bytes). Safe from any thread. Returns 0, GPUMON_E_INVAL, or
 * GPUMON_E_NOMEM (more than 256 distinct pid/device pairs).
 */
GPUMON_API int gpumon_exporter_framework(gpumon_exporter *e, const gpumon_framework_sample *s);

/* Stops serving (open connections are closed), stops the threads and frees e. NULL is a no-op. */
GPUMON_API void gpumon_exporter_stop(gpumon_exporter *e);

#ifdef __cplusplus
}
#endif
#endif /* GPUMON_GPUMON_H */
