/* SPDX-License-Identifier: MIT */
/* exporter.h — what the two halves of the Prometheus exporter share: exporter.c (lifecycle and
 * the HTTP server) and exporter_collect.c (the collector thread that drains the sampler and
 * renders snapshots). Internal to libgpumon. */
#ifndef GPUMON_EXPORTER_H
#define GPUMON_EXPORTER_H

#include <pthread.h>
#include <stdatomic.h>

#include "internal.h"
#include "sinks/prometheus.h"

#define EXPORTER_MAX_FRAMEWORK 256

/* A rendered page, shared by the responses that send it; freed by the last reference. */
struct snapshot {
	atomic_uint refs;
	uint64_t t_ns;   /* when it was rendered */
	size_t len;
	char data[]; /* len bytes, not NUL-terminated */
};

/* Drops a reference; NULL is a no-op. */
void gpumon__snapshot_release(struct snapshot *s);

/* A process on a GPU, as the collector knows it. */
struct eproc {
	struct prom_proc pub;  /* what is rendered */
	gpumon_leak *leak;     /* fed with used_bytes at each process record */
	double seconds_to_oom; /* while alerting; < 0 otherwise */
	uint64_t peak_cur, peak_prev;
	int have_cur, have_prev;
};

/* Peak buckets of a GPU. */
struct egpu {
	uint64_t peak_cur, peak_prev;
	int have_cur, have_prev;
};

struct gpumon_exporter {
	gpumon *g;
	gpumon_sampler *sampler;
	unsigned max_processes, compat;
	int processes;
	uint64_t peak_window_ns;
	char address[96];
	char hostname[256];
	char auth[512];        /* "USER:PASSWORD"; "" = no authentication */
	size_t auth_len;
	char *tls_cert, *tls_key;

	/* collector thread only */
	gpumon_record *recbuf;
	struct prom_gpu *gpus;
	struct egpu *eg;
	unsigned ngpus;
	struct eproc *procs;
	size_t nprocs, cap_procs;
	const struct prom_proc **order; /* scratch for rendering, cap_procs long */
	uint64_t window_start_ns;
	double render_seconds;
	size_t last_len;       /* the previous page's length */

	pthread_t collector;
	int collector_started;
	atomic_int stopping;

	/* the latest snapshot, swapped by the collector; HTTP threads take a reference and send it
	   without copying it */
	pthread_mutex_t snap_lock;
	struct snapshot *snap;

	/* framework figures pushed by the embedding program */
	pthread_mutex_t fw_lock;
	gpumon_framework_sample fw[EXPORTER_MAX_FRAMEWORK];
	size_t nfw;

	atomic_ullong scrapes;
	atomic_ullong last_scrape_ns;
	void *mhd;             /* struct MHD_Daemon */
	void *mhd_lib;         /* libmicrohttpd, loaded by gpumon_exporter_create (exporter.c) */
	struct mhd_api *api;
};

/* exporter_collect.c */
/* Prepares the collector's tables from g's devices; GPUMON_E_NOMEM on failure. */
int gpumon__exporter_collect_init(gpumon_exporter *e);
/* Drains the sampler (waiting up to wait_ms for the first record), applies the records;
 * returns how many. */
int gpumon__exporter_collect_once(gpumon_exporter *e, int wait_ms);
/* 1 when every GPU has a sample or is lost. */
int gpumon__exporter_collect_ready(const gpumon_exporter *e);
/* Renders a snapshot and publishes it; 0 or GPUMON_E_NOMEM (the previous snapshot stays). */
int gpumon__exporter_render(gpumon_exporter *e);
/* The collector thread's body. */
void *gpumon__exporter_collector_main(void *arg);
/* Frees the collector's tables. */
void gpumon__exporter_collect_free(gpumon_exporter *e);

#endif
