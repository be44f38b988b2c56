/* SPDX-License-Identifier: MIT */
/* internal.h — what the files of libgpumon share and nothing outside lib/ sees: the handle, the
 * NVML function table, and the helpers that set the per-thread error message. */
#ifndef GPUMON_INTERNAL_H
#define GPUMON_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/types.h>

#include <gpumon/gpumon.h>

/* NVML's own types, declared here so that we never include nvml.h (ABI in REFERENCE.md). */
typedef int nvml_ret;
typedef void *nvml_device;

enum {
	NVML_SUCCESS = 0,
	NVML_ERROR_UNINITIALIZED = 1,
	NVML_ERROR_INVALID_ARGUMENT = 2,
	NVML_ERROR_NOT_SUPPORTED = 3,
	NVML_ERROR_NO_PERMISSION = 4,
	NVML_ERROR_NOT_FOUND = 6,
	NVML_ERROR_INSUFFICIENT_SIZE = 7,
	NVML_ERROR_DRIVER_NOT_LOADED = 9,
	NVML_ERROR_TIMEOUT = 10,
	NVML_ERROR_LIBRARY_NOT_FOUND = 12,
	NVML_ERROR_FUNCTION_NOT_FOUND = 13,
	NVML_ERROR_GPU_IS_LOST = 15,
	NVML_ERROR_RESET_REQUIRED = 16,
	NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
	NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
	NVML_ERROR_GPU_NOT_FOUND = 28,
	NVML_ERROR_UNKNOWN = 999,
};

/* Which generation of the process-list call is loaded. */
enum { PROC_API_NONE = 0, PROC_API_V1 = 1, PROC_API_V2 = 2, PROC_API_V3 = 3 };

/* NVML entry points; a NULL pointer means the driver does not have the symbol. */
struct nvml_api {
	void *lib;
	nvml_ret (*init)(void);
	nvml_ret (*shutdown)(void);
	const char *(*error_string)(nvml_ret);
	nvml_ret (*device_count)(unsigned *);
	nvml_ret (*handle_by_index)(unsigned, nvml_device *);
	nvml_ret (*memory_v1)(nvml_device, void *);
	nvml_ret (*memory_v2)(nvml_device, void *);
	nvml_ret (*name)(nvml_device, char *, unsigned);
	nvml_ret (*uuid)(nvml_device, char *, unsigned);
	nvml_ret (*pci_v3)(nvml_device, void *); /* _v3 or _v2: same 68-byte layout */
	nvml_ret (*pci_v1)(nvml_device, void *);
	nvml_ret (*utilization)(nvml_device, void *);
	nvml_ret (*temperature)(nvml_device, unsigned, unsigned *);
	nvml_ret (*power)(nvml_device, unsigned *);
	nvml_ret (*energy)(nvml_device, unsigned long long *);
	nvml_ret (*clock)(nvml_device, unsigned, unsigned *);
	nvml_ret (*driver_version)(char *, unsigned);
	nvml_ret (*nvml_version)(char *, unsigned);
	nvml_ret (*process_name)(unsigned, char *, unsigned);
	nvml_ret (*compute_procs)(nvml_device, unsigned *, void *);
	nvml_ret (*graphics_procs)(nvml_device, unsigned *, void *);
	/* device properties and memory health (sources/nvml_props.c) */
	nvml_ret (*power_limit)(nvml_device, unsigned *);
	nvml_ret (*power_enforced)(nvml_device, unsigned *);
	nvml_ret (*power_default)(nvml_device, unsigned *);
	nvml_ret (*power_constraints)(nvml_device, unsigned *, unsigned *);
	nvml_ret (*power_mode)(nvml_device, int *);
	nvml_ret (*fan)(nvml_device, unsigned *);
	nvml_ret (*pstate)(nvml_device, int *);
	nvml_ret (*field_values)(nvml_device, int, void *);
	nvml_ret (*max_clock)(nvml_device, unsigned, unsigned *);
	nvml_ret (*serial)(nvml_device, char *, unsigned);
	nvml_ret (*vbios)(nvml_device, char *, unsigned);
	nvml_ret (*compute_mode)(nvml_device, int *);
	nvml_ret (*persistence)(nvml_device, int *);
	nvml_ret (*pcie_gen)(nvml_device, unsigned *);
	nvml_ret (*pcie_gen_max)(nvml_device, unsigned *);
	nvml_ret (*pcie_width)(nvml_device, unsigned *);
	nvml_ret (*pcie_width_max)(nvml_device, unsigned *);
	nvml_ret (*mig_mode)(nvml_device, unsigned *, unsigned *);
	nvml_ret (*ecc_mode)(nvml_device, int *, int *);
	nvml_ret (*ecc_total)(nvml_device, int, int, unsigned long long *);
	nvml_ret (*ecc_counter)(nvml_device, int, int, int, unsigned long long *);
	nvml_ret (*retired_pages)(nvml_device, int, unsigned *, unsigned long long *);
	nvml_ret (*retired_pending)(nvml_device, int *);
	nvml_ret (*remapped_rows)(nvml_device, unsigned *, unsigned *, unsigned *, unsigned *);
	/* events (sources/nvml_events.c) */
	nvml_ret (*event_set_create)(void **);
	nvml_ret (*register_events)(nvml_device, unsigned long long, void *);
	nvml_ret (*event_set_wait)(void *, void *, unsigned);
	nvml_ret (*event_set_free)(void *);
	/* MIG (nvml.c's MIG block) */
	nvml_ret (*max_mig_count)(nvml_device, unsigned *);
	nvml_ret (*mig_handle)(nvml_device, unsigned, nvml_device *);
	nvml_ret (*gpu_instance_id)(nvml_device, unsigned *);
	nvml_ret (*compute_instance_id)(nvml_device, unsigned *);
	nvml_ret (*is_mig_handle)(nvml_device, unsigned *);
	int proc_api;            /* PROC_API_* of the two calls above */
	int compute_procs_is_v3; /* for the 535.43-535.86 layout check */
};

struct device {
	nvml_device handle;
	gpumon_device_info info;
	atomic_int lost;
	atomic_int memory_v2_unusable; /* the v2 call failed once with a version/support error */
	atomic_int memory_v2_worked;   /* the v2 call has answered: from then on v1 never stands in */
};

/* Distinct NVML functions whose failures are counted (gpumon_nvml_errors_get). */
#define GPUMON_NVML_ERROR_FUNCTIONS 32

struct errbuf {
	struct errbuf *next;
	char msg[256];
};

struct gpumon {
	struct nvml_api nvml;
	int initialised;   /* nvml.init succeeded: shutdown owed */
	int open_status;   /* status of gpumon_create; calls on a failed handle return E_DRIVER */
	char path[512];    /* library file loaded or tried */
	char driver_version[96];
	char nvml_version[96];
	unsigned ndev;     /* devices in the table: GPUs, then MIG devices */
	unsigned ngpu;     /* GPUs: positions 0 .. ngpu-1 (NVML's indexes) */
	struct device *dev;

	/* per-thread error messages: one buffer per thread that saw an error, freed at close */
	pthread_key_t err_key;
	int err_key_ok;
	pthread_mutex_t err_lock;
	struct errbuf *err_all;
	struct errbuf open_err; /* for errors before the key exists */

	/* failed NVML calls by function, counted by gpumon__seterr (under err_lock) */
	struct { char function[48]; uint64_t count; } nvml_errors[GPUMON_NVML_ERROR_FUNCTIONS];
	unsigned n_nvml_errors;

	/* threads that may call the driver after their owner let go of them (a sampler's thread left
	   in a hung call): the handle is freed, and NVML shut down, when the last of them and
	   gpumon_destroy are done (under hold_lock) */
	pthread_mutex_t hold_lock;
	unsigned holds;
	int closing;

	struct gpumon__proc_cache *procs; /* /proc answers per pid (NULL when out of memory: no cache) */

	/* the NVML function being called while the handle opens (a static name; NULL before the
	   first): gpumon_create names it when the driver does not answer in time */
	_Atomic(const char *) calling;
};

/* A driver call still running after this has hung: the sampler reports its GPU stale, and
   gpumon_create gives up opening (healthy calls take microseconds to a few milliseconds; this
   leaves room for a loaded machine). */
#define GPUMON__DRIVER_DEADLINE_NS 2000000000ull

/* Whether an EVENT record of this kind names a GPU in its dev (the sampler's word on one GPU's
 * health: stale, answering, Xid): the recording keeps it, the model lists the event under that
 * GPU. Inline: the reader and the model are also compiled alone into the fuzz targets. */
static inline int gpumon__event_names_gpu(const char *kind)
{
	return kind && (!strcmp(kind, GPUMON_EVENT_STALE) || !strcmp(kind, GPUMON_EVENT_ANSWERING) ||
			!strcmp(kind, GPUMON_EVENT_XID));
}

/* Keeps g alive for a thread of the library until the matching gpumon__release(). */
void gpumon__hold(gpumon *g);
/* Ends a hold; frees g when gpumon_destroy has been called and this was the last hold. */
void gpumon__release(gpumon *g);

/* Records a message for the calling thread and returns status (for `return seterr(...)`). */
int gpumon__seterr(gpumon *g, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Maps an NVML return code to a status. */
int gpumon__status_from_nvml(nvml_ret r);

/* NVML's message for r (its own nvmlErrorString when present). */
const char *gpumon__nvml_errstr(const gpumon *g, nvml_ret r);

/* sources/nvml.c (each notes in g->calling the call it is about to make) */
int gpumon__nvml_load(gpumon *g);   /* dlopen + symbols + init; message on failure */
void gpumon__nvml_unload(gpumon *g);
int gpumon__nvml_enumerate(gpumon *g); /* fills g->dev / g->ndev / g->ngpu, MIG devices included */

/* sources/nvml_sample.c: reads the memory figures (v2, else v1) into s; E_LOST marks d lost. Once
 * v2 has answered on d, a v2 failure is a failure (a missing sample), never v1's figures. */
int gpumon__nvml_memory(gpumon *g, struct device *d, gpumon_device_sample *s);

/* sources/nvml_events.c: XID errors of the devices devs[0..n), each queued as an EVENT record of s
 * (gpumon__sampler_event) when asked for. Returns NULL where the driver offers no events or none
 * of the devices takes them, or out of memory. */
struct gpumon__xid_watch;
struct gpumon__xid_watch *gpumon__xid_start(gpumon *g, gpumon_sampler *s, const unsigned *devs, unsigned n);
/* Takes the XIDs waiting, without waiting, if a second has passed since the last time (now is
 * gpumon__now_ns); any thread, at any time: one that finds another asking returns. NULL: no-op. */
void gpumon__xid_poll(struct gpumon__xid_watch *w, uint64_t now);
/* Frees w, once no thread can ask it any more; NULL is a no-op. */
void gpumon__xid_free(struct gpumon__xid_watch *w);

/* sampler.c: queues an EVENT record for device dev; kind and text must outlive the sampler. */
void gpumon__sampler_event(gpumon_sampler *s, unsigned dev, uint64_t t_ns, const char *kind, const char *text);

/* sources/procfs.c: completes a process entry (user, cmdline, name, owner) from /proc (or
 * GPUMON_PROC_ROOT); sets GPUMON_PROC_FOREIGN and GPUMON_OWNER_UNRESOLVED when the pid is not in
 * our /proc. */
void gpumon__procfs_fill(gpumon_process *p);

/* sources/host_process.c: a distributed worker's place from the pid's environment into *out (-1 and
 * "" each when it is none); 0, or -1 when the environment cannot be read (*out then all unknown). */
int gpumon__env_rank(unsigned pid, gpumon_rank *out);
/* gpumon_process_rank's test on a process's flags and rank (a recording's rows keep them apart). */
int gpumon__worker_rank(unsigned flags, const gpumon_rank *r);

/* store/recording_read.c: the distributed job a recording's processes belong to: the first worker's
 * place that names a job id, else the first that names a rendezvous, else the first worker's. 1 when
 * the recording holds a worker, 0 when none. Reads the processes' rows when the walk has not yet
 * begun (gpumon_reader_next then goes on from the first record). */
int gpumon__reader_job(gpumon_reader *r, gpumon_rank *out);
/* sources/nvml_sample.c: device dev of an open handle that is not lost; a status with the message
 * on g (E_INVAL, E_DRIVER, E_NOT_FOUND, E_LOST) otherwise. */
int gpumon__device_get(gpumon *g, unsigned dev, struct device **out);
/* Reads up to len-1 bytes of the pid's /proc file `leaf` (under GPUMON_PROC_ROOT) into buf,
 * NUL-terminated; returns the bytes read, or -1. */
ssize_t gpumon__procfs_read(unsigned pid, const char *leaf, char *buf, size_t len);
/* The /proc every process read goes to: GPUMON_PROC_ROOT when set and not empty, else "/proc". */
const char *gpumon__proc_root(void);
/* Opens the pid's /proc file `leaf` read-only; a descriptor, or -1 with errno set. */
int gpumon__procfs_open(unsigned pid, const char *leaf);
/* The login name of uid into user (truncated to len), or the uid in decimal when it has none. */
void gpumon__user_name(unsigned uid, char *user, size_t len);

/* sources/host_process.c: the fields of /proc/PID/stat the library uses. */
struct gpumon__proc_stat {
	unsigned pid, ppid;
	char state;
	uint64_t utime, stime, start, rss_pages; /* clock ticks; start since boot; pages */
};
/* Parses the text of /proc/PID/stat (len bytes, NUL not needed): "pid (comm) state ppid ...", the
 * command name may hold blanks and parentheses (the last ')' ends it). 0, or -1 when malformed. */
int gpumon__proc_stat_parse(const char *buf, size_t len, struct gpumon__proc_stat *out);
/* Reads and parses the pid's stat under the proc root; 0, or -1 when gone or malformed. */
int gpumon__proc_stat_read(unsigned pid, struct gpumon__proc_stat *out);

/* sources/proc_cache.c: what /proc and NVML's process name said of a pid, kept 5 s, keyed by pid
 * and start time (thread-safe). */
struct gpumon__proc_cache;
struct gpumon__proc_cache *gpumon__proc_cache_new(void);
void gpumon__proc_cache_free(struct gpumon__proc_cache *c);
/* The pid's start time (clock ticks since boot) from /proc/PID/stat; 0, or -1 when unreadable. */
int gpumon__proc_start(unsigned pid, uint64_t *start);
/* Fills p's /proc fields (user, uid, ppid, name, command line, owner, their flags) from the cache
 * when it holds the pid with that start time, read less than 5 s ago; returns 1, else 0. */
int gpumon__proc_cache_get(struct gpumon__proc_cache *c, gpumon_process *p, uint64_t start, uint64_t now);
/* Keeps those fields of p (read now) for the pid with that start time. */
void gpumon__proc_cache_put(struct gpumon__proc_cache *c, const gpumon_process *p, uint64_t start, uint64_t now);

/* sources/cgroup.c: the owner told by the text of a /proc/PID/cgroup file (cgroup v1, v2 or both;
 * systemd or cgroupfs driver): container runtime and id, pod UID, Slurm job and step, else the
 * systemd unit. out is zeroed first; returns out->present. Pure: reads nothing else. */
int gpumon__owner_from_cgroup(const char *cgroup_file_text, gpumon_owner *out);
/* For an owner with a pod UID: namespace and pod (and the container, when the pod's directory
 * holds exactly one) from the node's pod log directory (entries NAMESPACE_POD_UID/CONTAINER/).
 * Returns 1 when the pod's entry was found, 0 otherwise (o unchanged). */
int gpumon__owner_pod_names(gpumon_owner *o, const char *pods_dir);

/* Takes a caller's configuration struct (first member `unsigned size`): copies what its size covers
 * into dst (have bytes) and zeroes the rest, so older callers get the defaults of newer fields.
 * src NULL: all zero. GPUMON_E_INVAL when the size is below one member or above what we know. */
int gpumon__config_take(void *dst, size_t have, const void *src);

/* Monotonic clock in nanoseconds. */
uint64_t gpumon__now_ns(void);

#endif
