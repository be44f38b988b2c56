/* SPDX-License-Identifier: MIT */
/* model.h — the run model's state, shared by its files and nothing else: model.c (feeding it),
 * model_judge.c (verdicts, time to out-of-memory, peaks, memory figures), model_oom.c (the
 * out-of-memory moment), model_view.c (the typed answers the document is made of). Everything is
 * bounded. */
#ifndef GPUMON_MODEL_H
#define GPUMON_MODEL_H

#include <gpumon/gpumon.h>

#include "timeline.h"

#define MODEL_RING 512          /* device rows kept per GPU for the out-of-memory moment */
#define MODEL_MAX_SEGMENTS 256  /* framework source segments */
#define MODEL_MAX_EVENTS 500
#define MODEL_MAX_ALERTS 1000
#define MODEL_MAX_DEVICES 4096
#define MODEL_MAX_PROCESSES 8192 /* with GPUMON_MAX_BYTES each, a GPU's sum stays below 2^63 */
#define MODEL_EARLY_NS (5ull * 1000000000ull)   /* "the job's first seconds" */
#define MODEL_OOM_WINDOW_NS (10ull * 1000000000ull)
#define MODEL_PEAK_WINDOW_NS (60ull * 1000000000ull)
#define MODEL_PEAK_WINDOWS 64

struct mring {
	uint64_t t_ns, used_max, used_min;
	uint64_t job;               /* the job's processes together on the GPU then (NVML) */
};

struct mdev {
	int seen;                   /* declared or a record named it */
	gpumon_device_info info;
	int have;                   /* a device record with memory figures arrived */
	int free_known;             /* the latest one had total and free too (GPUMON_F_MEMORY), not the
				       used figure alone (GPUMON_F_MEMORY_USED) */
	uint64_t total, used, free, reserved, last_t;
	int reserved_known;
	int lost;
	uint64_t lost_t;            /* when a record said it was lost; 0 unknown */
	gpumon_leak *leak;          /* used (the interval minimum), a step function */
	gpumon_peaks *peaks;        /* used_max: owner = largest rise, largest holder */
	uint64_t floor;             /* the latest row's interval minimum (the device series' value) */
	uint64_t ref_used;          /* the lowest used so far: the reference for "whose rise" */
	unsigned ref_gen;           /* bumps when the reference moves; processes keep theirs */
	int ref_have;
	struct mring ring[MODEL_RING];
	unsigned ring_head, ring_n;
	/* the job on this GPU (its processes together, NVML) */
	gpumon_leak *job_leak;
	gpumon_peaks *job_peaks;
	uint64_t job_bytes, job_first_t, job_early;
	uint64_t job_free;          /* the GPU's free memory at the job series' last point */
	uint64_t others_bytes;      /* every other process on the GPU together, now ... */
	uint64_t others_peak;       /* ... at most */
	uint64_t job_top, others_at_job_top; /* the job's highest figure, and the others' then */
	long double job_integral;   /* byte-nanoseconds of the job's figure since job_first_t ... */
	uint64_t job_integral_t;    /* ... up to this moment */
	int job_seen;
	int job_alerted, headroom_low;
	struct timeline line;       /* used floor, used max, reserved */
	unsigned host;              /* its host (gpumon_model_load_many); 0 otherwise */
};

struct mproc {
	unsigned dev, pid;
	int present, used_known, job;
	uint64_t used, peak, first_t, gone_t, last_t;
	unsigned flags;             /* GPUMON_PROC_* as last listed */
	char user[64], command[512];
	gpumon_owner *owner;        /* its container, pod, Slurm job or unit; NULL when none is known */
	gpumon_rank rank;           /* its place in a distributed job (rank.launcher "" when none) */
	long double integral;       /* byte-nanoseconds of its figure while listed ... */
	uint64_t integral_t, span_ns; /* ... up to this moment, over this long */
	int floor_known;            /* floor holds the lowest figure it held after its first seconds */
	uint64_t floor;
	int at_oom_known;           /* its figure at the out-of-memory moment (a worker of the job) */
	uint64_t at_oom;
	gpumon_leak *leak;          /* its figure at every device row of its GPU while listed */
	int alerted;
	uint64_t free_at_last;      /* the GPU's free memory at its series' last point */
	uint64_t ref_bytes;         /* its figure when the device's reference (lowest used) was taken */
	unsigned ref_gen;
	struct timeline line;
};

struct mseg {                   /* a framework source, one segment per restart of its steps */
	unsigned pid;
	int device;
	char framework[16];
	unsigned segment;
	gpumon_leak *leak;          /* allocated, samples, on steps when given */
	int alerted;
	uint64_t points, first_t, last_t;
	int64_t last_step;
	uint64_t nsteps;            /* distinct steps its samples named (a step counted once) */
	int allocated_known, reserved_known;
	uint64_t allocated, reserved, limit;
	int free_known;
	uint64_t free_at_last;      /* its GPU's free memory at its last sample */
	uint64_t allocated_peak, reserved_peak;
	uint64_t max_allocated;     /* the latest max_allocated figure (its usual peak so far) */
	int max_allocated_known;
	int unacc_why;              /* MAP_* when unaccounted memory is not known; 0 when it is */
	struct {                    /* every byte placed at its latest sample where NVML listed its
				       process: NVML's figure = reserved (allocated + cached) + outside */
		int known;
		uint64_t t_ns, nvml, reserved, allocated;
		int64_t step;
		unsigned dev;
	} placed;
	gpumon_model_figure frag, unacc;
	struct timeline line;       /* allocated, reserved, max_allocated, step */
};

struct mevent {
	uint64_t t_ns;
	char *kind, *text;
	int dev; /* the GPU an event of the sampler's names (stale, answering, xid); -1 none or unknown */
};

struct gpumon_model {
	gpumon_model_config cfg;
	gpumon_run_meta meta;
	char *meta_strings[5];      /* kind, command, settings, host, driver (owned copies) */
	int kind_run;               /* a job: meta kind "run" */
	char *cvd;                  /* CUDA_VISIBLE_DEVICES as the job got it, or NULL */
	char *source, *source_type; /* for the document */
	struct mdev *dev;
	unsigned ndev, dev_cap;
	struct mproc *procs;
	size_t nprocs, procs_cap;
	uint32_t *proc_index;       /* open addressing on (dev, pid): index + 1, 0 empty */
	size_t index_cap;           /* a power of two, at least twice nprocs */
	size_t procs_dropped;
	unsigned *job_pids;         /* sorted */
	size_t njob, job_cap;
	struct mseg *segs;
	size_t nsegs, segs_cap, segs_dropped;
	gpumon_peaks *fw_peaks;     /* max_allocated of every source, owner = its pid */
	struct mevent events[MODEL_MAX_EVENTS];
	size_t nevents, events_dropped;
	gpumon_alert *alerts;
	size_t nalerts, alerts_cap;
	int projected;              /* the OOM_PROJECTED alert was given */
	unsigned *limit_told;       /* the job's pids a LIMIT alert was given for, sorted */
	size_t nlimit_told, limit_told_cap;
	/* the out-of-memory moment */
	int oom_have, oom_diagnosed;
	uint64_t oom_last_sign_t;   /* the latest sign: one within 5 s of it is the same episode */
	uint64_t report_t, report_request; /* the latest report from inside the job with its request: the
				       message the job prints after it is the same episode */
	gpumon_model_oom oom;
	/* what the frameworks said of it: the monitor inside the job, its messages, its log's lines
	   (kept apart: the figures are merged in that order of trust when asked) */
	gpumon_oom_figures fig_inside, fig_msg, fig_detail;
	uint64_t fig_detail_t;      /* the latest log line's moment */
	int snap_have;
	gpumon_alloc_snapshot snap; /* the allocator's snapshot nearest the moment */
	uint64_t snap_t;
	/* the input's span */
	uint64_t first_t, last_t, end_t;
	int exit_status, finished;
	uint64_t records, refused;
	uint64_t samples;            /* records of memory (a GPU's, a process's, a framework's) taken */
	uint64_t out_of_range;      /* records left out for a byte figure above GPUMON_MAX_BYTES ... */
	char out_of_range_first[128]; /* ... and the first of them, described */
	char *damage;
	char msg[256];
	/* the hosts of recordings read together (gpumon_model_load_many); 0: one host, the meta's */
	gpumon_model_host *hosts;
	unsigned nhosts;
};

/* gpumon__model_map_device's answers when a framework's device is no GPU of the model */
enum {
	MAP_UNKNOWN = -1,        /* the framework did not say its device and the process is on several GPUs */
	MAP_NOT_VISIBLE = -2,    /* the device index is not in CUDA_VISIBLE_DEVICES */
	MAP_MIG = -3,            /* the device is a MIG instance */
	MAP_NO_GPU = -4,         /* CUDA_VISIBLE_DEVICES names no GPU of the recording there */
	MAP_NO_NVML_FIGURE = -5, /* mapped, but NVML lists no memory of the process on that GPU */
};

/* model.c */
int gpumon__model_take_meta(gpumon_model *m, const gpumon_run_meta *meta);
struct mdev *gpumon__model_dev(gpumon_model *m, unsigned dev);
uint64_t gpumon__model_total(const gpumon_model *m, int dev);
double gpumon__model_seconds(const gpumon_model *m, uint64_t t_ns);
const struct mproc *gpumon__model_proc(const gpumon_model *m, unsigned dev, unsigned pid);
int gpumon__model_is_job(const gpumon_model *m, unsigned pid);
int gpumon__model_map_device(const gpumon_model *m, unsigned pid, int cuda_device);

/* model_judge.c */
void gpumon__model_verdict_fill(const gpumon_model *m, int series, int dev, const struct mproc *p,
				const struct mseg *s, gpumon_verdict *out);
/* After a series' detector was fed: records its first alert (front ends read gpumon_model_alerts). */
void gpumon__model_check_alert(gpumon_model *m, int series, int dev, const struct mproc *p, const struct mseg *s,
			       int *alerted, const gpumon_leak *l, uint64_t t_ns);
int gpumon__model_push_alert(gpumon_model *m, const gpumon_alert *a);
/* After a process record: a LIMIT alert when a job process passed config limit_bytes, once a pid. */
void gpumon__model_check_limit(gpumon_model *m, const gpumon_record *r);
/* After a framework record: the OOM_PROJECTED alert when config oom_within_steps asks for it. */
void gpumon__model_check_projection(gpumon_model *m, uint64_t t_ns);
/* The owner of a rise on dev now: the process whose figure rose most since the reference, and the
 * largest holder; job_only limits the first to the job's processes. */
void gpumon__model_owners(const gpumon_model *m, unsigned dev, int job_only, int64_t *owner, int64_t *largest);

/* model_rank.c: what a listing says of the process's rank (kept once known), and its figure held
 * until t (for its mean) */
void gpumon__model_take_rank(struct mproc *p, const gpumon_process *src);
void gpumon__model_hold(struct mproc *p, uint64_t t);
/* At the out-of-memory moment: every worker's figure then. */
void gpumon__model_ranks_at_oom(gpumon_model *m);
/* The rank of the process pid on dev, -1 none; the rank a "[rankN]:" prefix of text names, -1 none;
 * the pid of rank on dev (0 none, or several). */
int gpumon__model_rank_of(const gpumon_model *m, unsigned dev, unsigned pid);
int gpumon__model_rank_in_text(const char *text);
unsigned gpumon__model_pid_of_rank(const gpumon_model *m, int dev, int rank);
/* The rank a JOB series on dev is of: the one worker of the job there, else the worker whose own
 * figure leaks fastest; -1 none. */
int gpumon__model_job_rank(const gpumon_model *m, int dev);
/* The GPU of rank's worker: -1 when no process has that rank, or its processes are on several. */
int gpumon__model_rank_dev(const gpumon_model *m, int rank);

/* model_view.c: the end of the input (the run's end, else the last record's); a framework source's
 * bytes placed (its latest sample where NVML listed its process) */
uint64_t gpumon__model_end(const gpumon_model *m);
void gpumon__model_placed_fill(const struct mseg *s, gpumon_placed *out);

/* model_refuse.c: 1 when r has a byte figure above GPUMON_MAX_BYTES (counted, the first described:
 * the document names it), 0 when the model may take it. */
int gpumon__model_refuse(gpumon_model *m, const gpumon_record *r);

/* model_oom.c */
void gpumon__model_oom_signal(gpumon_model *m, uint64_t t_ns, const char *text);
/* The out-of-memory events other than "oom" (GPUMON_EVENT_OOM_DETAIL, _OOM_FIGURES, _SNAPSHOT):
 * 1 when kind is one of them (taken), 0 otherwise. */
int gpumon__model_oom_event(gpumon_model *m, uint64_t t_ns, const char *kind, const char *text);
/* A process record just after the moment: the job's holders take what it says, when higher. */
void gpumon__model_oom_settle(gpumon_model *m, const struct mproc *p, uint64_t t);
void gpumon__model_oom_finish(gpumon_model *m);
int gpumon__model_job_dev(const gpumon_model *m);

#endif
