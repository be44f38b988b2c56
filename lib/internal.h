/* SPDX-License-Identifier: MIT */
/* internal.h — what the files of libgpumon share and nothing outside lib/ sees: the handle, the
 * NVML function table, and the helpers that set the per-thread error message. */
#ifndef GPUMON_INTERNAL_H
#define GPUMON_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

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
	unsigned ndev;
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
};

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

/* sources/nvml.c */
int gpumon__nvml_load(gpumon *g);   /* dlopen + symbols + init; message on failure */
void gpumon__nvml_unload(gpumon *g);
int gpumon__nvml_enumerate(gpumon *g); /* fills g->dev / g->ndev */

/* sources/nvml_sample.c: reads the memory figures (v2, else v1) into s; E_LOST marks d lost. Once
 * v2 has answered on d, a v2 failure is a failure (a missing sample), never v1's figures. */
int gpumon__nvml_memory(gpumon *g, struct device *d, gpumon_device_sample *s);

/* sources/procfs.c: completes a process entry (user, cmdline, name, owner) from /proc (or
 * GPUMON_PROC_ROOT); sets GPUMON_PROC_FOREIGN and GPUMON_OWNER_UNRESOLVED when the pid is not in
 * our /proc. */
void gpumon__procfs_fill(gpumon_process *p);

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
