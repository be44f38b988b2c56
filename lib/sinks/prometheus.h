/* SPDX-License-Identifier: MIT */
/* prometheus.h — the Prometheus text format (0.0.4) renderer of the exporter: a growable buffer,
 * label escaping, and the pure function that turns a view of the exporter's state into the body
 * of /metrics. Internal to libgpumon. */
#ifndef GPUMON_SINKS_PROMETHEUS_H
#define GPUMON_SINKS_PROMETHEUS_H

#include <stddef.h>
#include <stdint.h>

#include <gpumon/gpumon.h>

/* A growable text buffer; after an allocation failure `failed` is set and appends do nothing. */
struct prom_buf {
	char *p;
	size_t len, cap;
	int failed;
};

void gpumon__prom_free(struct prom_buf *b);
/* Makes room for extra more bytes; 0, or -1 with failed set. */
int gpumon__prom_reserve(struct prom_buf *b, size_t extra);
void gpumon__prom_put(struct prom_buf *b, const char *s, size_t n);
void gpumon__prom_puts(struct prom_buf *b, const char *s);
void gpumon__prom_printf(struct prom_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "# HELP name help\n# TYPE name type\n" */
void gpumon__prom_family(struct prom_buf *b, const char *name, const char *type, const char *help);
/* Appends v as a label value: at most max_bytes of it (cut on a character boundary, "..." added
 * when cut), invalid UTF-8 bytes replaced by '?', then \ " and newline escaped. */
void gpumon__prom_label_value(struct prom_buf *b, const char *v, size_t max_bytes);

/* Label strings are prebuilt once (they do not change while a GPU or process lives). */
#define PROM_GPU_LABELS 640
#define PROM_MAX_XID_CODES 16 /* distinct XID codes counted per GPU */

struct prom_gpu {
	gpumon_device_info info;
	int up;                     /* 0 once lost */
	int stale;                  /* a driver call on it has not returned in time (the sampler's
				       GPUMON_EVENT_STALE): it is down, its figures left out, until it
				       answers again */
	int have_sample;
	gpumon_device_sample s;     /* the latest device record's sample */
	int have_peak;
	uint64_t peak_bytes;        /* max used over the peak window */
	double oom_seconds;         /* the model's time to OOM (gpumon_model_gpu_oom); < 0: none (omitted) */
	unsigned nprocs;            /* processes holding memory on it (all of them) */
	char labels[PROM_GPU_LABELS];      /* gpu="0",uuid="...",name="...",pci_bus_id="..." */
	char short_labels[PROM_GPU_LABELS];/* gpu="0",uuid="...": what every other family carries */
	char dcgm_labels[PROM_GPU_LABELS]; /* gpu="0",UUID="...",pci_bus_id="...",device="nvidia0",... */
	const char *dcgm_owner;            /* ,namespace="...",pod="...",container="..." when one pod's
					      container holds every process of the GPU (dcgm-exporter's
					      pod labels), else "" */
	/* memory health (exporter_health.c): the latest GPUMON_P_HEALTH figures and their verdict */
	int have_health;
	gpumon_device_props health;
	unsigned health_problems;   /* gpumon_health_problems(&health) */
	/* XID errors the sampler reported since the exporter started, by code */
	struct {
		unsigned code;
		uint64_t count;
	} xid[PROM_MAX_XID_CODES];
	unsigned nxid, last_xid;
	int have_xid;
};

struct prom_proc {
	unsigned dev, pid;
	int used_known;
	uint64_t used_bytes;
	int have_peak;
	uint64_t peak_bytes;
	int leak_alert;             /* the model's verdict on the process alerts */
	int rate_known;             /* the verdict is a leak: rate below holds a value */
	double rate_bytes_per_second;
	char name[64];              /* process name for nvidia_smi compat (escaped) */
	char *labels;               /* gpu,uuid,pid,user,command[,container_id][,rank[,job_id]]; malloc'd,
				       exact size (hundreds of processes: fixed arrays would waste memory) */
	char *owner;                /* owner_kind="..." and the owner's labels (docs/metrics.md), and a
				       distributed worker's rank, without gpu/uuid; malloc'd */
	char *dcgm_owner;           /* ,namespace=...,pod=...,container=... for a named pod, else NULL */
	int owner_leak;             /* scratch of the owner aggregation: the model's leak alert */
};

/* The processes of one owner on one GPU, summed (gpumon_owner_* families). */
struct prom_owner {
	unsigned dev;
	const char *labels;         /* the owner's labels (prom_proc.owner of its processes) */
	int used_known;             /* at least one process's figure is known */
	uint64_t used_bytes;        /* the sum of the known figures */
	unsigned nprocs;
	int leak_alert;             /* one of its processes' leak verdicts alerts */
};

/* gpumon_framework_* gpu/uuid labels of a framework sample whose GPU cannot be known */
#define PROM_GPU_UNKNOWN "unknown"

struct prom_view {
	unsigned compat;            /* GPUMON_COMPAT_* */
	const char *hostname, *driver_version, *nvml_version;
	const struct prom_gpu *gpus;
	unsigned ngpus;
	int processes;              /* 1: the process list is sampled */
	int per_pid;                /* 1: per-pid series asked for (--processes N): the verdict's pid label */
	const struct prom_proc *const *procs; /* the processes exported one by one (--processes), ordered */
	size_t nprocs;
	const struct prom_owner *owners; /* every owner of every GPU that answers */
	size_t nowners;
	const gpumon_framework_sample *fw;
	const int *fw_gpu;          /* per framework sample: its GPU's position, -1 when not known */
	const int64_t *fw_outside;  /* per framework sample: its process's memory outside the allocator
				       (the run model's), -1 when not known */
	size_t nfw;
	const gpumon_nvml_error_count *errs;
	size_t nerrs;
	int have_sampler;           /* 0: a replay, no sampler (its families are left out) */
	int have_verdict;           /* the run model's verdict (gpumon_model_verdict) is in verdict */
	gpumon_verdict verdict;
	gpumon_sampler_stats sampler;
	double render_seconds;      /* how long the previous snapshot took to build */
	unsigned peak_window_s;
};

/* Renders the whole body (every family but the per-scrape ones). Returns 0 or GPUMON_E_NOMEM. */
int gpumon__prom_render(const struct prom_view *v, struct prom_buf *b);

/* prometheus_compat.c: the peers' families for the compat bits of v. */
void gpumon__prom_render_compat(const struct prom_view *v, struct prom_buf *b);

#endif
