/* SPDX-License-Identifier: MIT */
/* exporter_collect.c — the exporter's collector: feeds every record (the sampler's, the framework
 * samples pushed in, or a recording's, replayed) to a run model, which says which process leaks and
 * when a GPU runs out of memory, and to the figures /metrics shows (latest samples, exact peaks over
 * the peak window, labels), and renders them into a snapshot a few times a second. Only the
 * collector touches this state; HTTP threads see nothing but the published snapshot. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exporter.h"

#define BATCH 64         /* records per poll (about 1 KiB each) */
#define RENDER_NS 250000000ull /* a snapshot at most this old */
#define COMMAND_BYTES 64       /* command label length before "..." */

/* ---- labels ------------------------------------------------------------------------------------ */

/* Copies the buffer into dst (len bytes), or "" when it failed or does not fit. */
static void take(struct prom_buf *b, char *dst, size_t len)
{
	if (b->p && !b->failed && b->len < len)
		memcpy(dst, b->p, b->len + 1);
	else
		dst[0] = 0;
	gpumon__prom_free(b);
}

/* A MIG device's series carry its GPU's index in `gpu` and its instance in labels of their own:
 * natively gpu_instance_id, compute_instance_id and mig_profile beside its own uuid; in dcgm mode
 * dcgm-exporter's GPU_I_ID and GPU_I_PROFILE beside its GPU's UUID, as dcgm-exporter labels them. */
static void mig_labels(struct prom_buf *b, const gpumon_device_info *d, int dcgm)
{
	if (!d->mig)
		return;
	if (dcgm) {
		gpumon__prom_printf(b, ",GPU_I_ID=\"%u\",GPU_I_PROFILE=\"", d->gpu_instance_id);
	} else {
		gpumon__prom_printf(b, ",gpu_instance_id=\"%u\",compute_instance_id=\"%u\",mig_profile=\"",
				    d->gpu_instance_id, d->compute_instance_id);
	}
	gpumon__prom_label_value(b, d->mig_profile, sizeof d->mig_profile);
	gpumon__prom_puts(b, "\"");
}

static void gpu_labels(gpumon_exporter *e, struct prom_gpu *g)
{
	struct prom_buf b = {0};
	const gpumon_device_info *d = &g->info;
	unsigned gpu = d->mig && d->parent < e->ngpus ? d->parent : d->index;
	const gpumon_device_info *top = &e->gpus[gpu].info;
	gpumon__prom_printf(&b, "gpu=\"%u\",uuid=\"", gpu);
	gpumon__prom_label_value(&b, d->uuid, sizeof d->uuid);
	gpumon__prom_puts(&b, "\",name=\"");
	gpumon__prom_label_value(&b, d->name, sizeof d->name);
	gpumon__prom_puts(&b, "\",pci_bus_id=\"");
	gpumon__prom_label_value(&b, d->pci_bus_id, sizeof d->pci_bus_id);
	gpumon__prom_puts(&b, "\"");
	mig_labels(&b, d, 0);
	take(&b, g->labels, sizeof g->labels);

	gpumon__prom_printf(&b, "gpu=\"%u\",uuid=\"", gpu);
	gpumon__prom_label_value(&b, d->uuid, sizeof d->uuid);
	gpumon__prom_puts(&b, "\"");
	take(&b, g->short_labels, sizeof g->short_labels);
	g->dcgm_owner = "";

	gpumon__prom_printf(&b, "gpu=\"%u\",UUID=\"", gpu);
	gpumon__prom_label_value(&b, top->uuid, sizeof top->uuid);
	gpumon__prom_puts(&b, "\",pci_bus_id=\"");
	gpumon__prom_label_value(&b, d->pci_bus_id, sizeof d->pci_bus_id);
	gpumon__prom_printf(&b, "\",device=\"nvidia%u\",modelName=\"", gpu);
	gpumon__prom_label_value(&b, top->name, sizeof top->name);
	gpumon__prom_puts(&b, "\",Hostname=\"");
	gpumon__prom_label_value(&b, e->hostname, 128);
	gpumon__prom_puts(&b, "\"");
	mig_labels(&b, d, 1);
	take(&b, g->dcgm_labels, sizeof g->dcgm_labels);
}

static void proc_labels(gpumon_exporter *e, struct eproc *ep, const gpumon_process *p)
{
	struct prom_buf b = {0};
	const struct prom_gpu *g = &e->gpus[ep->pub.dev];
	const char *cmd = (p->flags & GPUMON_PROC_CMDLINE_KNOWN) && p->cmdline[0] ? p->cmdline
			  : (p->flags & GPUMON_PROC_NAME_KNOWN) ? p->name : "";
	/* the library read it with the rest of the owner (GPUMON_PROC_ROOT's /proc); a recording's
	   owner is as recorded */
	const char *cid = (p->owner.present & GPUMON_OWNER_CONTAINER) ? p->owner.container_id : "";
	gpumon__prom_printf(&b, "gpu=\"%u\",uuid=\"", g->info.mig ? g->info.parent : g->info.index);
	gpumon__prom_label_value(&b, g->info.uuid, sizeof g->info.uuid);
	gpumon__prom_printf(&b, "\",pid=\"%u\",user=\"", p->pid);
	gpumon__prom_label_value(&b, (p->flags & GPUMON_PROC_USER_KNOWN) ? p->user : "", sizeof p->user);
	gpumon__prom_puts(&b, "\",command=\"");
	gpumon__prom_label_value(&b, cmd, COMMAND_BYTES);
	gpumon__prom_puts(&b, "\"");
	if (cid[0]) {
		gpumon__prom_puts(&b, ",container_id=\"");
		gpumon__prom_label_value(&b, cid, sizeof p->owner.container_id);
		gpumon__prom_puts(&b, "\"");
	}
	/* a pid's series is its own already: its rank and job add none */
	int rank = gpumon_process_rank(p);
	if (rank >= 0)
		gpumon__prom_printf(&b, ",rank=\"%d\"", rank);
	if (rank >= 0 && p->rank.job_id[0]) {
		gpumon__prom_puts(&b, ",job_id=\"");
		gpumon__prom_label_value(&b, p->rank.job_id, sizeof p->rank.job_id);
		gpumon__prom_puts(&b, "\"");
	}
	ep->pub.labels = b.p && !b.failed ? strdup(b.p) : NULL;
	gpumon__prom_free(&b);
	gpumon__prom_label_value(&b, (p->flags & GPUMON_PROC_NAME_KNOWN) ? p->name : "", 28);
	take(&b, ep->pub.name, sizeof ep->pub.name);
}

/* ---- records: the exporter's own figures ------------------------------------------------------- */

static struct eproc *find_proc(gpumon_exporter *e, unsigned dev, unsigned pid)
{
	for (size_t i = 0; i < e->nprocs; i++)
		if (e->procs[i].pub.dev == dev && e->procs[i].pub.pid == pid)
			return &e->procs[i];
	return NULL;
}

static void free_proc(struct eproc *ep)
{
	free(ep->pub.labels);
	free(ep->pub.owner);
	free(ep->pub.dcgm_owner);
}

static void drop_proc(gpumon_exporter *e, struct eproc *ep)
{
	free_proc(ep);
	*ep = e->procs[--e->nprocs];
}

static struct eproc *add_proc(gpumon_exporter *e, unsigned dev, const gpumon_process *p)
{
	if (e->nprocs == e->cap_procs) {
		size_t cap = e->cap_procs ? e->cap_procs * 2 : 64;
		struct eproc *np = realloc(e->procs, cap * sizeof *np);
		if (!np)
			return NULL;
		e->procs = np;
		void *no = realloc(e->order, cap * sizeof *e->order);
		if (!no)
			return NULL;
		e->order = no;
		no = realloc(e->oorder, cap * sizeof *e->oorder);
		if (!no)
			return NULL;
		e->oorder = no;
		e->cap_procs = cap;
	}
	struct eproc *ep = &e->procs[e->nprocs];
	memset(ep, 0, sizeof *ep);
	ep->pub.dev = dev;
	ep->pub.pid = p->pid;
	proc_labels(e, ep, p);
	if (!ep->pub.labels || gpumon__exporter_owner_labels(e, ep, p) != GPUMON_OK) {
		free_proc(ep);
		return NULL;
	}
	e->nprocs++;
	return ep;
}

static void on_process(gpumon_exporter *e, const gpumon_record *r)
{
	struct eproc *ep = find_proc(e, r->dev, r->process->pid);
	if (!ep && !(ep = add_proc(e, r->dev, r->process)))
		return; /* out of memory: the process is left out, the rest goes on */
	const gpumon_process *p = r->process;
	ep->pub.used_known = !!(p->flags & GPUMON_PROC_USED_KNOWN);
	if (!ep->pub.used_known)
		return;
	ep->pub.used_bytes = p->used_bytes;
	if (!ep->have_cur || p->used_bytes > ep->peak_cur)
		ep->peak_cur = p->used_bytes;
	ep->have_cur = 1;
}

/* The sampler's word on a GPU whose driver calls hang: down until it answers again, live or
 * replayed (a recording keeps the GPU of these events; one made before it did names none, dev
 * GPUMON_DEV_NONE, and marks nothing). A replay counts no Xid: those are the live driver's. */
static void on_event(gpumon_exporter *e, const gpumon_record *r)
{
	if (r->dev >= e->ngpus || !r->event_kind)
		return;
	if (!strcmp(r->event_kind, GPUMON_EVENT_STALE))
		e->gpus[r->dev].stale = 1;
	else if (!strcmp(r->event_kind, GPUMON_EVENT_ANSWERING))
		e->gpus[r->dev].stale = 0;
	else if (!e->replaying && !strcmp(r->event_kind, GPUMON_EVENT_XID))
		gpumon__exporter_xid(e, r);
}

static void on_record(gpumon_exporter *e, const gpumon_record *r)
{
	if (r->kind == GPUMON_REC_EVENT)
		on_event(e, r);
	if (r->kind == GPUMON_REC_FRAMEWORK || r->kind == GPUMON_REC_EVENT || r->kind == GPUMON_REC_JOB ||
	    r->dev >= e->ngpus || ((r->kind == GPUMON_REC_PROCESS || r->kind == GPUMON_REC_PROCESS_GONE) && !r->process))
		return;
	struct prom_gpu *g = &e->gpus[r->dev];
	struct egpu *eg = &e->eg[r->dev];
	switch (r->kind) {
	case GPUMON_REC_DEVICE: {
		g->s = r->sample;
		g->have_sample = 1;
		/* the interval's exact maximum when the record carries it (a recording may not) */
		uint64_t max = r->interval_samples && r->used_max_bytes > r->sample.memory_used_bytes
				       ? r->used_max_bytes : r->sample.memory_used_bytes;
		if (!(r->sample.present & GPUMON_F_MEMORY))
			break;
		if (!eg->have_cur || max > eg->peak_cur)
			eg->peak_cur = max;
		eg->have_cur = 1;
		break;
	}
	case GPUMON_REC_PROCESS:
		on_process(e, r);
		break;
	case GPUMON_REC_PROCESS_GONE: {
		struct eproc *ep = find_proc(e, r->dev, r->process->pid);
		if (ep)
			drop_proc(e, ep);
		break;
	}
	case GPUMON_REC_LOST:
		g->up = 0;
		for (size_t i = e->nprocs; i-- > 0;)
			if (e->procs[i].pub.dev == r->dev)
				drop_proc(e, &e->procs[i]);
		break;
	}
}

/* Starts a new peak window when the current one is W old (on the clock of the records: the wall's
 * live, the recording's in a replay): the previous bucket is forgotten, and the new one starts from
 * the figures held now (they belong to the new window too). */
static void rotate_peaks(gpumon_exporter *e, uint64_t now)
{
	if (now < e->window_start_ns || now - e->window_start_ns < e->peak_window_ns)
		return;
	e->window_start_ns = now;
	for (unsigned i = 0; i < e->ngpus; i++) {
		struct egpu *eg = &e->eg[i];
		eg->peak_prev = eg->peak_cur;
		eg->have_prev = eg->have_cur;
		eg->have_cur = e->gpus[i].have_sample && (e->gpus[i].s.present & GPUMON_F_MEMORY);
		eg->peak_cur = e->gpus[i].s.memory_used_bytes;
	}
	for (size_t i = 0; i < e->nprocs; i++) {
		struct eproc *ep = &e->procs[i];
		ep->peak_prev = ep->peak_cur;
		ep->have_prev = ep->have_cur;
		ep->have_cur = ep->pub.used_known;
		ep->peak_cur = ep->pub.used_bytes;
	}
}

/* One record to the model and to the figures. A record the model cannot take for want of memory
 * is left out of its judgement; what it knew stays. */
static void apply(gpumon_exporter *e, const gpumon_record *r)
{
	gpumon_model_add(e->model, r, 1);
	on_record(e, r);
}

/* The framework samples pushed since the last call, fed to the model here, in the collector,
 * so that the model has one thread. */
static void feed_framework(gpumon_exporter *e)
{
	pthread_mutex_lock(&e->fw_lock);
	size_t n = e->npending;
	memcpy(e->fw_feed, e->fw_pending, n * sizeof *e->fw_feed);
	e->npending = 0;
	pthread_mutex_unlock(&e->fw_lock);
	for (size_t i = 0; i < n; i++) {
		gpumon_record r;
		memset(&r, 0, sizeof r);
		r.kind = GPUMON_REC_FRAMEWORK;
		r.t_ns = e->fw_feed[i].t_ns;
		r.framework = e->fw_feed[i];
		gpumon_model_add(e->model, &r, 1);
	}
}

int gpumon__exporter_collect_once(gpumon_exporter *e, int wait_ms)
{
	size_t n = 0, total = 0;
	do { /* a full batch means more may be waiting: take them now, without waiting */
		gpumon_sampler_poll(e->sampler, e->recbuf, BATCH, &n, wait_ms);
		for (size_t i = 0; i < n; i++)
			apply(e, &e->recbuf[i]);
		total += n;
		wait_ms = 0;
	} while (n == BATCH);
	feed_framework(e);
	rotate_peaks(e, gpumon__now_ns());
	return total > INT32_MAX ? INT32_MAX : (int)total;
}

int gpumon__exporter_collect_ready(const gpumon_exporter *e)
{
	for (unsigned i = 0; i < e->ngpus; i++)
		if (e->gpus[i].up && !e->gpus[i].have_sample)
			return 0;
	return 1;
}

/* ---- rendering -------------------------------------------------------------------------------- */

void gpumon__snapshot_release(struct snapshot *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		free(s);
}

static int by_used_desc(const void *a, const void *b)
{
	const struct prom_proc *x = *(const struct prom_proc *const *)a, *y = *(const struct prom_proc *const *)b;
	if (x->used_bytes != y->used_bytes)
		return x->used_bytes < y->used_bytes ? 1 : -1;
	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* The model's answers for what is exported: per GPU the time to out-of-memory, per exported process
 * whether it leaks and at what rate. */
static void judge(gpumon_exporter *e, size_t nexp)
{
	for (unsigned i = 0; i < e->ngpus; i++) {
		double s;
		e->gpus[i].oom_seconds = gpumon_model_gpu_oom(e->model, i, &s) == GPUMON_OK && s >= 0 ? s : -1;
	}
	for (size_t i = 0; i < nexp; i++) {
		struct prom_proc *p = (struct prom_proc *)e->order[i]; /* ours: the array is const for the view */
		gpumon_verdict v;
		int found = gpumon_model_process_verdict(e->model, p->dev, p->pid, &v) == GPUMON_OK;
		p->leak_alert = found && v.leak.alert;
		p->rate_known = found && v.leak.verdict == GPUMON_LEAK_SUSPECTED;
		p->rate_bytes_per_second = p->rate_known ? v.leak.rate_bytes_per_second : 0;
	}
}

/* Renders v into a new snapshot and publishes it. */
static int publish(gpumon_exporter *e, const struct prom_view *v, uint64_t t0)
{
	/* rendered straight into the snapshot's memory, behind room for its header, then shrunk to
	   size: no copy, and the capacity of the last page avoids growing step by step */
	static const char header[offsetof(struct snapshot, data)];
	struct prom_buf b = {0};
	gpumon__prom_reserve(&b, sizeof header + e->last_len + 4096);
	gpumon__prom_put(&b, header, sizeof header);
	int st = gpumon__prom_render(v, &b);
	if (st != GPUMON_OK) {
		gpumon__prom_free(&b);
		return st;
	}
	char *mem = realloc(b.p, b.len);
	if (mem)
		b.p = mem;
	struct snapshot *snap = (struct snapshot *)(void *)b.p;
	atomic_init(&snap->refs, 1);
	snap->len = b.len - sizeof header;
	e->last_len = snap->len;
	uint64_t t1 = gpumon__now_ns();
	snap->t_ns = t1;
	pthread_mutex_lock(&e->snap_lock);
	struct snapshot *old = e->snap;
	e->snap = snap;
	pthread_mutex_unlock(&e->snap_lock);
	gpumon__snapshot_release(old);
	e->render_seconds = (double)(t1 - t0) / 1e9;
	return GPUMON_OK;
}

int gpumon__exporter_render(gpumon_exporter *e)
{
	uint64_t t0 = gpumon__now_ns();
	gpumon__exporter_health_copy(e);
	for (unsigned i = 0; i < e->ngpus; i++) {
		struct prom_gpu *g = &e->gpus[i];
		struct egpu *eg = &e->eg[i];
		g->have_peak = eg->have_cur || eg->have_prev;
		g->peak_bytes = eg->have_prev && (!eg->have_cur || eg->peak_prev > eg->peak_cur) ? eg->peak_prev : eg->peak_cur;
		g->nprocs = 0;
	}
	size_t nshown = 0;
	for (size_t i = 0; i < e->nprocs; i++) {
		struct eproc *ep = &e->procs[i];
		ep->pub.have_peak = ep->have_cur || ep->have_prev;
		ep->pub.peak_bytes = ep->have_prev && (!ep->have_cur || ep->peak_prev > ep->peak_cur) ? ep->peak_prev : ep->peak_cur;
		e->gpus[ep->pub.dev].nprocs++;
		/* a GPU that does not answer has no current process figures: kept for when it does */
		if (!e->gpus[ep->pub.dev].stale)
			e->order[nshown++] = &ep->pub;
	}
	size_t nowners = e->processes ? gpumon__exporter_owners(e, e->order, nshown) : 0;
	if (nshown > 1 && e->max_processes)
		qsort(e->order, nshown, sizeof *e->order, by_used_desc);
	size_t nexp = nshown < e->max_processes ? nshown : e->max_processes;
	judge(e, nexp);
	gpumon_nvml_error_count errs[GPUMON_NVML_ERROR_FUNCTIONS];
	size_t nerrs = e->g && !e->replaying ? gpumon_nvml_errors_get(e->g, errs, GPUMON_NVML_ERROR_FUNCTIONS) : 0;
	struct prom_view v = {
		.compat = e->compat,
		.hostname = e->hostname,
		.driver_version = e->driver_version,
		.nvml_version = e->nvml_version,
		.gpus = e->gpus,
		.ngpus = e->ngpus,
		.processes = e->processes,
		.per_pid = e->processes && e->max_processes > 0,
		.procs = e->order,
		.nprocs = nexp,
		.owners = e->owners,
		.nowners = nowners,
		.errs = errs,
		.nerrs = nerrs < GPUMON_NVML_ERROR_FUNCTIONS ? nerrs : GPUMON_NVML_ERROR_FUNCTIONS,
		.render_seconds = e->render_seconds,
		.peak_window_s = (unsigned)(e->peak_window_ns / 1000000000u),
		.have_sampler = e->sampler != NULL,
	};
	if (e->sampler)
		gpumon_sampler_stats_get(e->sampler, &v.sampler);
	v.have_verdict = gpumon_model_verdict(e->model, &v.verdict) == GPUMON_OK;
	gpumon_framework_sample fw[EXPORTER_MAX_FRAMEWORK];
	pthread_mutex_lock(&e->fw_lock);
	v.nfw = e->nfw;
	memcpy(fw, e->fw, e->nfw * sizeof *fw);
	pthread_mutex_unlock(&e->fw_lock);
	v.fw = fw;
	int fw_gpu[EXPORTER_MAX_FRAMEWORK];
	int64_t fw_outside[EXPORTER_MAX_FRAMEWORK];
	for (size_t i = 0; i < v.nfw; i++) {
		gpumon_placed pl;
		fw_gpu[i] = gpumon__exporter_framework_gpu(e, &fw[i]);
		fw_outside[i] = fw_gpu[i] >= 0 && gpumon_model_placed(e->model, (unsigned)fw_gpu[i], fw[i].pid, &pl) == GPUMON_OK &&
					pl.outside_known ? (int64_t)pl.outside_bytes : -1;
	}
	v.fw_gpu = fw_gpu;
	v.fw_outside = fw_outside;
	return publish(e, &v, t0);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

void *gpumon__exporter_collector_main(void *arg)
{
	gpumon_exporter *e = arg;
	pthread_setname_np(pthread_self(), "gpumon-collect");
	uint64_t last = gpumon__now_ns();
	while (!atomic_load(&e->stopping)) {
		if (e->replaying) /* the figures stay as at the recording's end; the page stays fresh */
			sleep_ms(50);
		else
			gpumon__exporter_collect_once(e, 50);
		uint64_t now = gpumon__now_ns();
		if (now - last >= RENDER_NS) {
			gpumon__exporter_render(e);
			last = now;
		}
	}
	return NULL;
}

/* ---- set-up ----------------------------------------------------------------------------------- */

/* The tables for n GPUs, and the model (cfg: the run, for a replay; NULL: this machine). */
static int tables(gpumon_exporter *e, unsigned n, const gpumon_model_config *cfg)
{
	e->ngpus = n;
	e->recbuf = malloc(BATCH * sizeof *e->recbuf);
	e->gpus = calloc(n ? n : 1, sizeof *e->gpus);
	e->eg = calloc(n ? n : 1, sizeof *e->eg);
	e->fw_pending = malloc(EXPORTER_MAX_PENDING * sizeof *e->fw_pending);
	e->fw_feed = malloc(EXPORTER_MAX_PENDING * sizeof *e->fw_feed);
	if (!e->recbuf || !e->gpus || !e->eg || !e->fw_pending || !e->fw_feed)
		return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory for the exporter's tables");
	/* a system-wide view with its default bound on processes, no timelines: it runs for months */
	/* framework figures come from this process (gpumon_exporter_framework): its CUDA_VISIBLE_DEVICES
	   maps their device indexes to GPUs */
	const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
	gpumon_model_config live = {.size = sizeof live, .flags = GPUMON_MODEL_FORGET_GONE, .source_type = "live",
				    .cuda_visible_devices = cvd && cvd[0] ? cvd : NULL};
	int st = gpumon_model_create(cfg ? cfg : &live, &e->model);
	if (st != GPUMON_OK)
		return gpumon__exporter_err(e, st, "cannot create the exporter's run model: %s", gpumon_strerror(st));
	return GPUMON_OK;
}

int gpumon__exporter_collect_init(gpumon_exporter *e)
{
	int st = tables(e, gpumon_device_count(e->g), NULL);
	if (st != GPUMON_OK)
		return st;
	snprintf(e->driver_version, sizeof e->driver_version, "%s", e->g->driver_version);
	snprintf(e->nvml_version, sizeof e->nvml_version, "%s", e->g->nvml_version);
	if (gethostname(e->hostname, sizeof e->hostname - 1) != 0)
		snprintf(e->hostname, sizeof e->hostname, "unknown");
	for (unsigned i = 0; i < e->ngpus; i++) {
		gpumon_device_info_get(e->g, i, &e->gpus[i].info);
		e->gpus[i].up = !e->gpus[i].info.lost;
		e->gpus[i].oom_seconds = -1;
		gpu_labels(e, &e->gpus[i]);
		if (gpumon_model_device(e->model, &e->gpus[i].info) != GPUMON_OK)
			return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory for the exporter's run model");
	}
	e->window_start_ns = gpumon__now_ns();
	return GPUMON_OK;
}

/* The recording's GPUs, host and driver, for the labels. */
static int replay_tables(gpumon_exporter *e, gpumon_reader *r)
{
	const gpumon_run_meta *meta = gpumon_reader_meta(r);
	/* a recording is finite: every process it holds is judged, as gpumon report judges it */
	gpumon_model_config c = {.size = sizeof c, .meta = meta, .source = e->replay, .source_type = "recording"};
	int st = tables(e, gpumon_reader_device_count(r), &c);
	if (st != GPUMON_OK)
		return st;
	snprintf(e->hostname, sizeof e->hostname, "%s", meta->host ? meta->host : "unknown");
	snprintf(e->driver_version, sizeof e->driver_version, "%s", meta->driver_version ? meta->driver_version : "");
	for (unsigned i = 0; i < e->ngpus; i++) {
		if (gpumon_reader_device(r, i, &e->gpus[i].info) != GPUMON_OK)
			e->gpus[i].info.index = i;
		e->gpus[i].up = 1; /* a GPU lost in the recording goes down at its record */
		e->gpus[i].oom_seconds = -1;
		gpu_labels(e, &e->gpus[i]);
		if (gpumon_model_device(e->model, &e->gpus[i].info) != GPUMON_OK)
			return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory for the exporter's run model");
	}
	e->window_start_ns = meta->start_mono_ns;
	return GPUMON_OK;
}

int gpumon__exporter_replay(gpumon_exporter *e)
{
	gpumon_reader *r = NULL;
	int st = gpumon_reader_create(e->replay, &r);
	if (st != GPUMON_OK) { /* not there, not a recording, a format this library does not read */
		const char *why = r && gpumon_reader_errmsg(r)[0] ? gpumon_reader_errmsg(r) : gpumon_strerror(st);
		st = gpumon__exporter_err(e, st == GPUMON_E_NOMEM ? st : GPUMON_E_IO, "cannot replay the recording: %s", why);
		gpumon_reader_destroy(r);
		return st;
	}
	e->replaying = 1;
	st = replay_tables(e, r);
	gpumon_record rec;
	int rc = 0;
	while (st == GPUMON_OK && (rc = gpumon_reader_next(r, &rec)) > 0) {
		apply(e, &rec);
		rotate_peaks(e, rec.t_ns);
		/* the recording's framework figures are shown as the job's process pushed them live: the
		   latest of each source, with what its process held outside the allocator */
		if (rec.kind == GPUMON_REC_FRAMEWORK)
			gpumon_exporter_framework(e, &rec.framework);
	}
	/* what the file holds up to where it failed is served; the damage is the model's to tell */
	if (st == GPUMON_OK && (gpumon_reader_damage(r)[0] || rc < 0))
		gpumon_model_damage(e->model, gpumon_reader_damage(r)[0] ? gpumon_reader_damage(r) : gpumon_reader_errmsg(r));
	if (st == GPUMON_OK) {
		gpumon_model_finish(e->model, 0, -1);
		for (unsigned i = 0; i < e->ngpus; i++)
			if (e->gpus[i].info.lost)
				e->gpus[i].up = 0;
	}
	gpumon_reader_destroy(r);
	return st;
}

void gpumon__exporter_collect_free(gpumon_exporter *e)
{
	for (size_t i = 0; i < e->nprocs; i++)
		free_proc(&e->procs[i]);
	gpumon_model_destroy(e->model);
	free(e->procs);
	free(e->order);
	free(e->oorder);
	free(e->owners);
	e->oorder = NULL;
	e->owners = NULL;
	e->cap_owners = 0;
	free(e->gpus);
	free(e->eg);
	free(e->recbuf);
	free(e->fw_pending);
	free(e->fw_feed);
	e->model = NULL;
	e->recbuf = NULL;
	e->procs = NULL;
	e->order = NULL;
	e->gpus = NULL;
	e->eg = NULL;
	e->fw_pending = e->fw_feed = NULL;
	e->nprocs = e->cap_procs = e->npending = 0;
	gpumon__snapshot_release(e->snap);
	e->snap = NULL;
}
