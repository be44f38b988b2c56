/* SPDX-License-Identifier: MIT */
/* report_model.c — the model behind `gpumon report`: rows of a run stream in and update bounded
 * summaries (per GPU, per process, per framework source: reduced timelines, peaks, leak
 * detectors); an out-of-memory event freezes what was on the card at that moment for the
 * forensics. report_doc.c turns the model into the report document. */
#include "cli.h"
#include "report_model.h"

#include <stdlib.h>
#include <string.h>

static const char *const dev_fields[] = {"used", "used_max", "reserved"};
static const int dev_modes[] = {SERIES_MIN, SERIES_MAX, SERIES_MAX};
static const char *const proc_fields[] = {"used"};
static const int proc_modes[] = {SERIES_MAX};
static const char *const fw_fields[] = {"allocated", "reserved", "max_allocated", "step"};
static const int fw_modes[] = {SERIES_MIN, SERIES_MAX, SERIES_MAX, SERIES_LAST};

static uint64_t t_rel(const report *r, int64_t t_ns)
{
	return (uint64_t)(t_ns - r->src.start_mono_ns);
}

double report_seconds(const report *r, int64_t t_ns)
{
	return (double)(t_ns - r->src.start_mono_ns) / 1e9;
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

report *report_create(const report_source *src)
{
	report *r = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->src = *src;
	r->src.path = dup_or_null(src->path);
	r->src.command = dup_or_null(src->command);
	r->src.host = dup_or_null(src->host);
	r->src.kind = dup_or_null(src->kind);
	r->src.devices = NULL;
	for (int i = 0; i < src->ndevices && i < RECFILE_MAX_DEVICES; i++)
		r->devinfo[i] = src->devices[i];
	r->ndevinfo = src->ndevices < RECFILE_MAX_DEVICES ? src->ndevices : RECFILE_MAX_DEVICES;
	r->first_t_ns = -1;
	r->job_first_t_ns = -1;
	r->oom.t_ns = -1;
	if (gpumon_leak_create(NULL,  &r->job_leak) != GPUMON_OK ||
	    gpumon_peaks_create(60ull * 1000000000ull, 64, &r->job_peaks) != GPUMON_OK ||
	    gpumon_peaks_create(60ull * 1000000000ull, 64, &r->fw_peaks) != GPUMON_OK) {
		report_destroy(r);
		return NULL;
	}
	return r;
}

void report_destroy(report *r)
{
	if (!r)
		return;
	for (int i = 0; i < RECFILE_MAX_DEVICES; i++) {
		struct rdev *d = &r->dev[i];
		series_free(&d->line);
		gpumon_leak_destroy(d->leak);
		gpumon_peaks_destroy(d->peaks);
	}
	for (size_t i = 0; i < r->nprocs; i++) {
		series_free(&r->procs[i].line);
		gpumon_leak_destroy(r->procs[i].leak);
		free(r->procs[i].label);
		free(r->procs[i].user);
		free(r->procs[i].command);
	}
	for (size_t i = 0; i < r->nfw; i++) {
		series_free(&r->fw[i].line);
		gpumon_leak_destroy(r->fw[i].leak);
		free(r->fw[i].framework);
	}
	for (size_t i = 0; i < r->nevents; i++) {
		free(r->events[i].kind);
		free(r->events[i].text);
	}
	free(r->oom.holders);
	free(r->procs);
	free(r->proc_index);
	gpumon_leak_destroy(r->job_leak);
	gpumon_peaks_destroy(r->job_peaks);
	gpumon_peaks_destroy(r->fw_peaks);
	free((char *)r->src.path);
	free((char *)r->src.command);
	free((char *)r->src.host);
	free((char *)r->src.kind);
	free(r->damage);
	free(r);
}

void report_damage(report *r, const char *text)
{
	size_t old = r->damage ? strlen(r->damage) : 0, add = strlen(text);
	char *d = realloc(r->damage, old + add + 3);
	if (!d)
		return;
	if (old)
		memcpy(d + old, "; ", 2), old += 2;
	memcpy(d + old, text, add + 1);
	r->damage = d;
}

uint64_t report_dev_total(const report *r, int dev)
{
	if (dev < 0 || dev >= RECFILE_MAX_DEVICES)
		return 0;
	if (r->dev[dev].total_known)
		return (uint64_t)r->dev[dev].total;
	for (int i = 0; i < r->ndevinfo; i++)
		if (r->devinfo[i].dev == dev && r->devinfo[i].total_bytes > 0)
			return (uint64_t)r->devinfo[i].total_bytes;
	return 0;
}

/* ---- devices ----------------------------------------------------------------------------------- */

static struct rdev *get_dev(report *r, int dev)
{
	if (dev < 0 || dev >= RECFILE_MAX_DEVICES)
		return NULL;
	struct rdev *d = &r->dev[dev];
	if (!d->seen) {
		if (series_init(&d->line, 3, dev_fields, dev_modes) != 0 || gpumon_leak_create(NULL,  &d->leak) != 0 ||
		    gpumon_peaks_create(60ull * 1000000000ull, 64, &d->peaks) != 0)
			return NULL;
		d->seen = 1;
		if (dev + 1 > r->ndev)
			r->ndev = dev + 1;
	}
	return d;
}

/* The largest process on dev now; -1 none. */
static int64_t largest_on(const report *r, int dev, int job_only)
{
	int64_t pid = -1, best = -1;
	for (size_t i = 0; i < r->nprocs; i++) {
		const struct rproc *p = &r->procs[i];
		if (p->dev == dev && p->present && p->used_known && (!job_only || p->job) && p->used > best) {
			best = p->used;
			pid = p->pid;
		}
	}
	return pid;
}

static void ring_push(struct rdev *d, int64_t t_ns, int64_t used)
{
	d->ring[d->ring_head].t_ns = t_ns;
	d->ring[d->ring_head].used = used;
	d->ring_head = (d->ring_head + 1) % RING;
	if (d->ring_n < RING)
		d->ring_n++;
}

static int add_device(report *r, const recrow *row)
{
	struct rdev *d = get_dev(r, row->u.device.dev);
	if (!d)
		return row->u.device.dev < 0 || row->u.device.dev >= RECFILE_MAX_DEVICES ? 0 : -1;
	const recval *u = &row->u.device.used, *mx = &row->u.device.used_max, *mn = &row->u.device.used_min;
	if (row->u.device.total.known) {
		d->total = row->u.device.total.v;
		d->total_known = 1;
	}
	int64_t used_max = mx->known ? mx->v : u->v;
	int max_known = mx->known || u->known;
	int64_t floor = mn->known ? mn->v : u->v;
	int floor_known = mn->known || u->known;
	int64_t vals[3] = {floor, used_max, row->u.device.reserved.v};
	int known[3] = {floor_known, max_known, row->u.device.reserved.known};
	series_add(&d->line, report_seconds(r, row->t_ns), vals, known);
	if (max_known) {
		int64_t at = row->u.device.used_max_t_ns.known ? row->u.device.used_max_t_ns.v : row->t_ns;
		if (at < r->src.start_mono_ns)
			at = r->src.start_mono_ns;
		gpumon_peaks_add(d->peaks, t_rel(r, at), (uint64_t)used_max, largest_on(r, row->u.device.dev, 0), -1);
		ring_push(d, at, used_max);
	}
	if (floor_known)
		gpumon_leak_add(d->leak, -1, t_rel(r, row->t_ns), (uint64_t)floor);
	/* each process's NVML figure and the job's, judged at the device rows' steady cadence (process
	 * rows come only on change, too sparse for the detector) */
	uint64_t limit = report_dev_total(r, row->u.device.dev);
	for (size_t i = 0; i < r->nprocs; i++) {
		struct rproc *p = &r->procs[i];
		if (p->dev != row->u.device.dev || !p->present || !p->used_known)
			continue;
		if (!p->leak && gpumon_leak_create(NULL,  &p->leak) != GPUMON_OK)
			return -1;
		if (gpumon_leak_add(p->leak, -1, t_rel(r, row->t_ns), (uint64_t)p->used) == GPUMON_OK)
			report_note_alert(r, p->leak, &p->alert_t_ns, row->t_ns);
	}
	if (r->job_known && row->u.device.dev == r->job_dev) {
		if (gpumon_leak_add(r->job_leak, -1, t_rel(r, row->t_ns), (uint64_t)r->job_total) == GPUMON_OK)
			report_note_alert(r, r->job_leak, &r->job_alert_t_ns, row->t_ns);
	}
	return 0;
}

/* ---- processes --------------------------------------------------------------------------------- */

static size_t hash_pid(int dev, int64_t pid)
{
	uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev;
	return (size_t)(h ^ (h >> 29)) & (PROC_HASH - 1);
}

static struct rproc *get_proc(report *r, const recrow *row)
{
	int dev = row->u.process.dev;
	int64_t pid = row->u.process.pid;
	if (!r->proc_index && !(r->proc_index = calloc(PROC_HASH, sizeof *r->proc_index)))
		return NULL;
	size_t h = hash_pid(dev, pid);
	for (size_t k = 0; k < PROC_HASH; k++, h = (h + 1) & (PROC_HASH - 1)) {
		uint32_t i = r->proc_index[h];
		if (i == 0)
			break;
		struct rproc *p = &r->procs[i - 1];
		if (p->dev == dev && p->pid == pid)
			return p;
	}
	if (r->nprocs >= MAX_PROCS) {
		if (!r->procs_dropped++)
			report_damage(r, "more than 4096 processes: the later ones are left out of the process timelines");
		return NULL;
	}
	if (cli_grow((void **)&r->procs, &r->procs_cap, r->nprocs, sizeof *r->procs, 64) != 0)
		return NULL;
	struct rproc *p = &r->procs[r->nprocs];
	memset(p, 0, sizeof *p);
	p->dev = dev;
	p->pid = pid;
	if (series_init(&p->line, 1, proc_fields, proc_modes) != 0)
		return NULL;
	r->nprocs++;
	r->proc_index[h] = (uint32_t)r->nprocs;
	return p;
}

static void set_label(struct rproc *p, const recrow *row)
{
	if (p->label)
		return;
	const char *cmd = row->u.process.command ? row->u.process.command : row->u.process.name;
	char buf[160];
	snprintf(buf, sizeof buf, "%lld %s %.100s", (long long)p->pid, row->u.process.user ? row->u.process.user : "?",
		 cmd ? cmd : "");
	p->label = strdup(buf);
	p->user = dup_or_null(row->u.process.user);
	p->command = dup_or_null(cmd);
}

static int add_process(report *r, const recrow *row)
{
	struct rproc *p = get_proc(r, row);
	if (!p)
		return r->nprocs >= MAX_PROCS ? 0 : -1;
	set_label(p, row);
	p->job = p->job || row->u.process.job;
	int64_t old = p->present && p->used_known ? p->used : 0;
	p->present = !row->u.process.gone;
	p->used_known = p->present && row->u.process.used.known;
	p->used = p->used_known ? row->u.process.used.v : 0;
	int64_t vals[1] = {p->used};
	int known[1] = {p->used_known};
	if (p->present)
		series_add(&p->line, report_seconds(r, row->t_ns), vals, known);
	if (p->used_known && p->used > p->peak)
		p->peak = p->used;
	if (p->job) {
		r->job_total += (p->used_known ? p->used : 0) - old;
		if (!r->job_known && p->used_known) {
			r->job_known = 1;
			r->job_dev = p->dev;
			r->job_first_t_ns = row->t_ns;
		}
		if (p->used_known && p->used > r->job_dev_best) {
			r->job_dev_best = p->used; /* the job's GPU: where it holds the most */
			r->job_dev = p->dev;
		}
		if (row->t_ns - r->job_first_t_ns <= EARLY_NS && r->job_total > r->job_early)
			r->job_early = r->job_total;
		if (p->used_known) /* the job's figure is only as known as its latest row */
			gpumon_peaks_add(r->job_peaks, t_rel(r, row->t_ns), (uint64_t)r->job_total,
					 largest_on(r, p->dev, 1), -1);
	}
	return 0;
}

/* ---- framework samples ------------------------------------------------------------------------- */

static struct rfw *get_fw(report *r, const recrow *row)
{
	int64_t dev = row->u.framework.device.known ? row->u.framework.device.v : -1;
	for (size_t i = 0; i < r->nfw; i++)
		if (r->fw[i].pid == row->u.framework.pid && r->fw[i].device == dev)
			return &r->fw[i];
	if (r->nfw >= MAX_FW)
		return NULL;
	struct rfw *f = &r->fw[r->nfw];
	memset(f, 0, sizeof *f);
	f->pid = row->u.framework.pid;
	f->device = dev;
	f->framework = dup_or_null(row->u.framework.framework);
	if (series_init(&f->line, 4, fw_fields, fw_modes) != 0 || gpumon_leak_create(NULL,  &f->leak) != 0)
		return NULL;
	r->nfw++;
	return f;
}

/* The NVML figure of pid on the GPU its framework device index maps to; -1 unknown. */
static int64_t nvml_figure(const report *r, int64_t pid, int64_t cuda_index)
{
	/* the process's GPUs in NVML order; CUDA index k is the k-th of them when it has several */
	const struct rproc *mine[16];
	int n = 0;
	for (size_t i = 0; i < r->nprocs && n < 16; i++)
		if (r->procs[i].pid == pid && r->procs[i].present)
			mine[n++] = &r->procs[i];
	if (n == 0)
		return -1;
	const struct rproc *p = mine[0];
	if (n > 1 && cuda_index >= 0) {
		for (int a = 0; a < n; a++) /* insertion sort by dev */
			for (int b = a + 1; b < n; b++)
				if (mine[b]->dev < mine[a]->dev) {
					const struct rproc *t = mine[a];
					mine[a] = mine[b];
					mine[b] = t;
				}
		p = cuda_index < n ? mine[cuda_index] : NULL;
	}
	return p && p->used_known ? p->used : -1;
}

static int add_framework(report *r, const recrow *row)
{
	struct rfw *f = get_fw(r, row);
	if (!f)
		return 0;
	const recval *a = &row->u.framework.allocated, *res = &row->u.framework.reserved,
		     *mx = &row->u.framework.max_allocated, *st = &row->u.framework.step;
	int64_t vals[4] = {a->v, res->v, mx->v, st->v};
	int known[4] = {a->known, res->known, mx->known, st->known};
	series_add(&f->line, report_seconds(r, row->t_ns), vals, known);
	f->points++;
	if (a->known) {
		f->allocated = a->v;
		f->allocated_known = 1;
		/* the GPU it runs out on: the job's, else its own, else the only one there is (a CSV) */
		int dev = r->job_known ? r->job_dev : f->device >= 0 ? (int)f->device
			: r->ndev == 1 || (r->ndev == 0 && r->ndevinfo == 1) ? 0 : -1;
		uint64_t limit = report_dev_total(r, dev);
		int rc = gpumon_leak_add(f->leak, st->known ? st->v : -1, t_rel(r, row->t_ns), (uint64_t)a->v);
		if (rc == GPUMON_OK)
			report_note_alert(r, f->leak, &f->alert_t_ns, row->t_ns);
		else
			f->refused++;
	}
	if (res->known) {
		f->reserved = res->v;
		f->reserved_known = 1;
	}
	int64_t peak = mx->known ? mx->v : a->known ? a->v : -1;
	if (peak >= 0)
		gpumon_peaks_add(r->fw_peaks, t_rel(r, row->t_ns), (uint64_t)peak, f->pid, -1);
	if (a->known && res->known && res->v - a->v > f->frag) {
		f->frag = res->v - a->v;
		f->frag_t_ns = row->t_ns;
		f->frag_known = 1;
	}
	int64_t nv = res->known ? nvml_figure(r, f->pid, f->device) : -1;
	if (nv >= 0 && (!f->unacc_known || nv - res->v > f->unacc)) {
		f->unacc = nv - res->v;
		f->unacc_t_ns = row->t_ns;
		f->unacc_known = 1;
	}
	return 0;
}

/* ---- events and the out-of-memory snapshot ------------------------------------------------------ */

void report_note_alert(report *r, const gpumon_leak *l, int64_t *first_alert_t_ns, int64_t t_ns)
{
	(void)r;
	if (*first_alert_t_ns)
		return;
	gpumon_leak_result v;
	gpumon_leak_result_get(l, &v);
	if (v.alert)
		*first_alert_t_ns = t_ns;
}

static int add_event(report *r, const recrow *row)
{
	const char *kind = row->u.event.kind;
	if (!strcmp(kind, "job") || !strcmp(kind, "step"))
		return 0; /* one per pid / per step: the process and framework rows say it better */
	if (!strcmp(kind, "oom") && r->oom.t_ns < 0)
		report_snapshot_oom(r, row->t_ns, row->u.event.text);
	if (r->nevents >= MAX_EVENTS) {
		r->events_dropped++;
		return 0;
	}
	struct revent *e = &r->events[r->nevents++];
	e->t_ns = row->t_ns;
	e->kind = strdup(kind);
	e->text = dup_or_null(row->u.event.text);
	return e->kind ? 0 : -1;
}

int report_add(report *r, const recrow *row)
{
	if (r->first_t_ns < 0)
		r->first_t_ns = row->t_ns;
	if (row->t_ns > r->last_t_ns)
		r->last_t_ns = row->t_ns;
	r->rows++;
	switch (row->kind) {
	case RECROW_DEVICE:
		return add_device(r, row);
	case RECROW_PROCESS:
		return add_process(r, row);
	case RECROW_FRAMEWORK:
		return add_framework(r, row);
	case RECROW_EVENT:
		return add_event(r, row);
	}
	return 0;
}

void report_finish(report *r)
{
	/* a job that died with a non-zero status and a full card, with no message seen: out of memory */
	if (r->oom.t_ns >= 0 || r->src.exit_status <= 0 || !r->job_known || r->job_dev < 0 ||
	    r->job_dev >= RECFILE_MAX_DEVICES)
		return;
	struct rdev *d = &r->dev[r->job_dev];
	uint64_t tot = report_dev_total(r, r->job_dev);
	if (!d->seen || !d->ring_n || !tot)
		return;
	int last = (d->ring_head + RING - 1) % RING;
	for (int k = 0; k < d->ring_n; k++) {
		int i = (d->ring_head + RING - 1 - k) % RING;
		if (d->ring[i].t_ns < d->ring[last].t_ns - OOM_WINDOW_NS)
			return;
		if ((double)d->ring[i].used >= 0.99 * (double)tot) {
			report_snapshot_oom(r, d->ring[i].t_ns, "(no message: the card was full when the job failed)");
			return;
		}
	}
}
