/* SPDX-License-Identifier: MIT */
/* exporter.h — what the parts of the Prometheus exporter share: exporter.c (lifecycle),
 * exporter_http.c (the HTTP server) and exporter_collect.c (the collector: it feeds the run model and its own
 * figures from the sampler, or from a recording replayed, and renders snapshots). Internal to
 * libgpumon. */
#ifndef GPUMON_EXPORTER_H
#define GPUMON_EXPORTER_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "internal.h"
#include "sinks/prometheus.h"

#define EXPORTER_MAX_FRAMEWORK 256
#define EXPORTER_MAX_PENDING 4096 /* framework samples waiting for the collector to feed the model */

/* A rendered page, shared by the responses that send it; freed by the last reference. */
struct snapshot {
	atomic_uint refs;
	uint64_t t_ns;   /* when it was rendered */
	size_t len;
	char data[]; /* len bytes, not NUL-terminated */
};

/* Drops a reference; NULL is a no-op. */
void gpumon__snapshot_release(struct snapshot *s);

/* A process on a GPU, as the collector shows it; whether it leaks is the model's answer. */
struct eproc {
	struct prom_proc pub;  /* what is rendered */
	uint64_t peak_cur, peak_prev;
	int have_cur, have_prev;
};

/* Peak buckets of a GPU. */
struct egpu {
	uint64_t peak_cur, peak_prev;
	int have_cur, have_prev;
};

struct gpumon_exporter {
	gpumon *g;             /* NULL in a replay without a handle */
	gpumon_sampler *sampler; /* NULL in a replay */
	const char *replay;    /* the recording replayed (the caller's string, during create only) */
	int replaying;         /* figures come from a recording: no sampler, no /proc */
	unsigned max_processes, compat;
	int processes;
	uint64_t peak_window_ns;
	char address[96];
	char hostname[256];
	char driver_version[96], nvml_version[96];
	char auth[512];        /* "USER:PASSWORD"; "" = no authentication */
	size_t auth_len;
	char *tls_cert, *tls_key;
	char msg[320];         /* the message of the failure of create; "" none */

	/* collector thread only (and create, before the thread starts) */
	gpumon_model *model;   /* judges leaks and time to out-of-memory */
	gpumon_record *recbuf;
	struct prom_gpu *gpus;
	struct egpu *eg;
	unsigned ngpus;
	struct eproc *procs;
	size_t nprocs, cap_procs;
	const struct prom_proc **order; /* scratch for rendering, cap_procs long */
	const struct prom_proc **oorder; /* scratch: the same, by GPU and owner (exporter_owner.c) */
	struct prom_owner *owners;       /* the owners of the last render, cap_owners long */
	size_t cap_owners;
	gpumon_framework_sample *fw_feed; /* scratch: pending samples taken for the model */
	uint64_t window_start_ns;
	double render_seconds;
	size_t last_len;       /* the previous page's length */

	pthread_t collector;
	int collector_started;
	atomic_int stopping;

	/* the latest snapshot, swapped by the collector; the HTTP thread takes a reference and sends it
	   without copying it */
	pthread_mutex_t snap_lock;
	struct snapshot *snap;

	/* framework figures pushed by the embedding program: the latest per pid and device (exported),
	   and those the collector has not yet fed to the model */
	pthread_mutex_t fw_lock;
	gpumon_framework_sample fw[EXPORTER_MAX_FRAMEWORK];
	size_t nfw;
	gpumon_framework_sample *fw_pending; /* EXPORTER_MAX_PENDING long */
	size_t npending;

	atomic_ullong scrapes;
	atomic_ullong last_scrape_ns;
	struct exporter_http *http; /* the HTTP server (exporter_http.c); NULL none */
	struct exporter_health *health; /* the health thread's figures (exporter_health.c); NULL none */
};

/* Keeps the message on e (gpumon_exporter_errmsg) and on e->g when there is one; returns status. */
int gpumon__exporter_err(gpumon_exporter *e, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* exporter_http.c */
/* Loads the HTTP server's libraries (and OpenSSL's, with its certificate and key, when e->tls_cert
 * is set), before the collector starts so that what is missing is said at once: GPUMON_OK, or a
 * status with the message on e. e->http is set either way, for gpumon__exporter_http_stop. */
int gpumon__exporter_http_load(gpumon_exporter *e);
/* Serves on the listening socket fd (taken, closed on failure) in a thread of its own. A status
 * with the message on e. */
int gpumon__exporter_http_start(gpumon_exporter *e, const gpumon_exporter_config *c, int fd);
/* Stops the server, closing its connections, and frees it. No server: a no-op. */
void gpumon__exporter_http_stop(gpumon_exporter *e);
/* exporter_collect.c */
/* Prepares the collector's tables and model from g's devices; a status with the message on e. */
int gpumon__exporter_collect_init(gpumon_exporter *e);
/* A replay: reads the whole recording e->replay into the model and the tables, as at its end;
 * a status with the message on e. */
int gpumon__exporter_replay(gpumon_exporter *e);
/* Drains the sampler (waiting up to wait_ms for the first record) and the framework samples
 * pushed, applies the records; returns how many sampler records. */
int gpumon__exporter_collect_once(gpumon_exporter *e, int wait_ms);
/* 1 when every GPU has a sample or is lost. */
int gpumon__exporter_collect_ready(const gpumon_exporter *e);
/* Renders a snapshot and publishes it; 0 or GPUMON_E_NOMEM (the previous snapshot stays). */
int gpumon__exporter_render(gpumon_exporter *e);
/* exporter_owner.c */
/* Sets ep->pub.owner (and dcgm_owner) from the process's owner, and its rank when it is a
 * distributed worker; 0 or GPUMON_E_NOMEM. */
int gpumon__exporter_owner_labels(const gpumon_exporter *e, struct eproc *ep, const gpumon_process *p);
/* Sums the n processes shown (on GPUs that answer) by GPU and owner into e->owners and sets each
 * GPU's dcgm_owner; returns how many owners, or 0 with nothing rendered when out of memory. */
size_t gpumon__exporter_owners(gpumon_exporter *e, const struct prom_proc *const *shown, size_t n);
/* The GPU (position) of a framework sample, -1 when it cannot be known (never a guess). */
int gpumon__exporter_framework_gpu(const gpumon_exporter *e, const gpumon_framework_sample *f);
/* exporter_health.c */
/* Starts the thread that reads each GPU's memory health every 30 s (nothing in a replay). */
int gpumon__exporter_health_start(gpumon_exporter *e);
/* Stops it (waits at most 0.2 s for a thread in a hung driver call; it then ends by itself). */
void gpumon__exporter_health_stop(gpumon_exporter *e);
/* The collector: copies the latest figures into e->gpus, with the library's verdict. */
void gpumon__exporter_health_copy(gpumon_exporter *e);
/* The collector: counts an XID EVENT record (GPUMON_EVENT_XID) on its GPU. */
void gpumon__exporter_xid(gpumon_exporter *e, const gpumon_record *r);
/* The collector thread's body. */
void *gpumon__exporter_collector_main(void *arg);
/* Frees the collector's tables and model. */
void gpumon__exporter_collect_free(gpumon_exporter *e);

#endif
