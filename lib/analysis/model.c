/* SPDX-License-Identifier: MIT */
/* model.c — the run model, fed: records of every kind update bounded summaries per GPU, per
 * process and per framework source segment (leak detectors, peaks, the last seconds, timelines).
 * NVML figures are step functions (a value holds until the next change): each GPU's device rows,
 * which come at least once a second, are the clock at which its processes and its job are judged,
 * so every front end judges them at the same moments. */
#include "model.h"
#include "../internal.h" /* gpumon__event_names_gpu */

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_MAX_PROCESSES 4096

static const int dev_modes[] = {TL_MIN, TL_MAX, TL_MAX};
static const int proc_modes[] = {TL_MAX};
static const int seg_modes[] = {TL_MIN, TL_MAX, TL_MAX, TL_LAST};

static unsigned job_listed(const gpumon_model *m, unsigned dev);
static int feed_proc(gpumon_model *m, unsigned dev, struct mdev *d, struct mproc *p, uint64_t t);
static void feed_job(gpumon_model *m, unsigned dev, struct mdev *d, uint64_t t);

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static gpumon_leak *new_leak(int mode)
{
	gpumon_leak_config c = {.size = sizeof c, .mode = mode};
	gpumon_leak *l = NULL;
	return gpumon_leak_create(&c, &l) == GPUMON_OK ? l : NULL;
}

double gpumon__model_seconds(const gpumon_model *m, uint64_t t_ns)
{
	return ((double)t_ns - (double)m->meta.start_mono_ns) / 1e9;
}

double gpumon_model_seconds(const gpumon_model *m, uint64_t t_ns)
{
	return m ? gpumon__model_seconds(m, t_ns) : 0;
}

uint64_t gpumon_model_samples(const gpumon_model *m)
{
	return m ? m->samples : 0;
}

/* ---- the object ------------------------------------------------------------------------------- */

/* CUDA_VISIBLE_DEVICES from the run's settings ("NAME=VALUE" lines), or NULL. */
static char *cvd_from_settings(const char *settings)
{
	const char *p = settings;
	while (p && *p) {
		size_t n = strcspn(p, "\n");
		if (!strncmp(p, "CUDA_VISIBLE_DEVICES=", 21) && n >= 21) {
			char *v = malloc(n - 21 + 1);
			if (v) {
				memcpy(v, p + 21, n - 21);
				v[n - 21] = 0;
			}
			return v;
		}
		p += n + (p[n] == '\n');
	}
	return NULL;
}

int gpumon__model_take_meta(gpumon_model *m, const gpumon_run_meta *meta)
{
	for (int i = 0; i < 5; i++)
		free(m->meta_strings[i]);
	memset(&m->meta, 0, sizeof m->meta);
	m->meta.exit_status = -1;
	if (meta) {
		size_t n = meta->size < sizeof m->meta ? meta->size : sizeof m->meta;
		memcpy(&m->meta, meta, n);
	}
	m->meta.size = sizeof m->meta;
	const char *src[5] = {m->meta.kind, m->meta.command, m->meta.settings, m->meta.host, m->meta.driver_version};
	for (int i = 0; i < 5; i++)
		if (src[i] && !(m->meta_strings[i] = strdup(src[i])))
			return GPUMON_E_NOMEM;
	m->meta.kind = m->meta_strings[0];
	m->meta.command = m->meta_strings[1];
	m->meta.settings = m->meta_strings[2];
	m->meta.host = m->meta_strings[3];
	m->meta.driver_version = m->meta_strings[4];
	m->kind_run = m->meta.kind && !strcmp(m->meta.kind, "run");
	if (!m->cfg.limit_bytes) /* the run's own --limit, when a recording says it */
		m->cfg.limit_bytes = m->meta.limit_bytes;
	if (!m->cvd && !m->cfg.cuda_visible_devices)
		m->cvd = cvd_from_settings(m->meta.settings);
	return GPUMON_OK;
}

int gpumon_model_create(const gpumon_model_config *cfg, gpumon_model **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	*out = NULL;
	if (cfg && (cfg->size < sizeof(unsigned) || cfg->size > sizeof(gpumon_model_config)))
		return GPUMON_E_INVAL;
	if (cfg && cfg->size > offsetof(gpumon_model_config, headroom_share) &&
	    (cfg->headroom_share < 0 || cfg->headroom_share >= 1))
		return GPUMON_E_INVAL;
	gpumon_model *m = calloc(1, sizeof *m);
	if (!m)
		return GPUMON_E_NOMEM;
	if (cfg)
		memcpy(&m->cfg, cfg, cfg->size);
	m->cfg.size = sizeof m->cfg;
	m->cfg.meta = NULL;
	if (!m->cfg.max_processes)
		m->cfg.max_processes = DEFAULT_MAX_PROCESSES;
	if (m->cfg.max_processes > MODEL_MAX_PROCESSES) /* the sums of a GPU's processes fit in 63 bits */
		m->cfg.max_processes = MODEL_MAX_PROCESSES;
	m->exit_status = -1;
	int st = GPUMON_OK;
	if (m->cfg.cuda_visible_devices && !(m->cvd = strdup(m->cfg.cuda_visible_devices)))
		st = GPUMON_E_NOMEM;
	if (m->cfg.source && !(m->source = strdup(m->cfg.source)))
		st = GPUMON_E_NOMEM;
	if (!(m->source_type = strdup(m->cfg.source_type ? m->cfg.source_type : "live")))
		st = GPUMON_E_NOMEM;
	m->cfg.cuda_visible_devices = m->cfg.source = m->cfg.source_type = NULL;
	if (!st)
		st = gpumon__model_take_meta(m, cfg && cfg->size > offsetof(gpumon_model_config, meta) ? cfg->meta : NULL);
	if (!st)
		st = gpumon_peaks_create(MODEL_PEAK_WINDOW_NS, MODEL_PEAK_WINDOWS, &m->fw_peaks);
	if (st) {
		gpumon_model_destroy(m);
		return st;
	}
	*out = m;
	return GPUMON_OK;
}

static void free_dev(struct mdev *d)
{
	gpumon_leak_destroy(d->leak);
	gpumon_leak_destroy(d->job_leak);
	gpumon_peaks_destroy(d->peaks);
	gpumon_peaks_destroy(d->job_peaks);
	gpumon__timeline_free(&d->line);
}

void gpumon_model_destroy(gpumon_model *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->ndev; i++)
		free_dev(&m->dev[i]);
	for (size_t i = 0; i < m->nprocs; i++) {
		gpumon_leak_destroy(m->procs[i].leak);
		gpumon__timeline_free(&m->procs[i].line);
		free(m->procs[i].owner);
	}
	for (size_t i = 0; i < m->nsegs; i++) {
		gpumon_leak_destroy(m->segs[i].leak);
		gpumon__timeline_free(&m->segs[i].line);
	}
	for (size_t i = 0; i < m->nevents; i++) {
		free(m->events[i].kind);
		free(m->events[i].text);
	}
	for (int i = 0; i < 5; i++)
		free(m->meta_strings[i]);
	gpumon_peaks_destroy(m->fw_peaks);
	free(m->dev);
	free(m->procs);
	free(m->proc_index);
	free(m->job_pids);
	free(m->segs);
	free(m->alerts);
	free(m->limit_told);
	free(m->cvd);
	free(m->source);
	free(m->source_type);
	free(m->damage);
	free(m->hosts);
	free(m);
}

const char *gpumon_model_errmsg(const gpumon_model *m)
{
	return m ? m->msg : "";
}

int gpumon_model_damage(gpumon_model *m, const char *text)
{
	if (!m || !text || !text[0])
		return GPUMON_E_INVAL;
	size_t old = m->damage ? strlen(m->damage) : 0, add = strlen(text);
	char *d = realloc(m->damage, old + add + 3);
	if (!d)
		return GPUMON_E_NOMEM;
	if (old)
		memcpy(d + old, "; ", 2), old += 2;
	memcpy(d + old, text, add + 1);
	m->damage = d;
	return GPUMON_OK;
}

/* ---- devices ------------------------------------------------------------------------------------ */

static int grow(void **arr, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 8;
	while (n < need)
		n *= 2;
	void *p = realloc(*arr, n * size);
	if (!p)
		return -1;
	memset((char *)p + *cap * size, 0, (n - *cap) * size);
	*arr = p;
	*cap = n;
	return 0;
}

struct mdev *gpumon__model_dev(gpumon_model *m, unsigned dev)
{
	if (dev >= MODEL_MAX_DEVICES)
		return NULL;
	if (dev >= m->ndev) {
		size_t cap = m->dev_cap;
		if (grow((void **)&m->dev, &cap, dev + 1, sizeof *m->dev))
			return NULL;
		m->dev_cap = (unsigned)cap;
		m->ndev = dev + 1;
	}
	struct mdev *d = &m->dev[dev];
	if (!d->seen) {
		d->info.index = dev;
		if (!(d->leak = new_leak(GPUMON_LEAK_HELD)) || !(d->job_leak = new_leak(GPUMON_LEAK_HELD)) ||
		    gpumon_peaks_create(MODEL_PEAK_WINDOW_NS, MODEL_PEAK_WINDOWS, &d->peaks) ||
		    gpumon_peaks_create(MODEL_PEAK_WINDOW_NS, MODEL_PEAK_WINDOWS, &d->job_peaks) ||
		    ((m->cfg.flags & GPUMON_MODEL_TIMELINES) && gpumon__timeline_init(&d->line, 3, dev_modes))) {
			free_dev(d);
			memset(d, 0, sizeof *d);
			return NULL;
		}
		d->seen = 1;
	}
	return d;
}

int gpumon_model_device(gpumon_model *m, const gpumon_device_info *info)
{
	if (!m || !info)
		return GPUMON_E_INVAL;
	struct mdev *d = gpumon__model_dev(m, info->index);
	if (!d)
		return info->index >= MODEL_MAX_DEVICES ? GPUMON_E_INVAL : GPUMON_E_NOMEM;
	d->info = *info;
	return GPUMON_OK;
}

uint64_t gpumon__model_total(const gpumon_model *m, int dev)
{
	if (dev < 0 || (unsigned)dev >= m->ndev || !m->dev[dev].seen)
		return 0;
	const struct mdev *d = &m->dev[dev];
	if (d->have && d->total)
		return d->total;
	return (d->info.present & GPUMON_INFO_MEMORY_TOTAL) ? d->info.memory_total_bytes : 0;
}

/* ---- the job -------------------------------------------------------------------------------------- */

int gpumon__model_is_job(const gpumon_model *m, unsigned pid)
{
	size_t lo = 0, hi = m->njob;
	if (m->meta.job_pid && pid == m->meta.job_pid)
		return 1;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m->job_pids[mid] == pid)
			return 1;
		if (m->job_pids[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

static int add_job_pid(gpumon_model *m, unsigned pid)
{
	if (gpumon__model_is_job(m, pid))
		return GPUMON_OK;
	if (grow((void **)&m->job_pids, &m->job_cap, m->njob + 1, sizeof *m->job_pids))
		return GPUMON_E_NOMEM;
	size_t i = m->njob;
	while (i > 0 && m->job_pids[i - 1] > pid) {
		m->job_pids[i] = m->job_pids[i - 1];
		i--;
	}
	m->job_pids[i] = pid;
	m->njob++;
	/* its figures from now on count as the job's */
	for (size_t k = 0; k < m->nprocs; k++) {
		struct mproc *p = &m->procs[k];
		if (p->pid != pid || p->job)
			continue;
		p->job = 1;
		if (p->present && p->used_known && p->dev < m->ndev) {
			struct mdev *d = &m->dev[p->dev];
			d->job_bytes += p->used;
			d->others_bytes = d->others_bytes >= p->used ? d->others_bytes - p->used : 0;
			if (!d->job_seen) {
				d->job_seen = 1;
				d->job_first_t = d->job_integral_t = p->last_t;
			}
			/* the job's figure changed now, whichever came first: its process row or this */
			int64_t owner, largest;
			gpumon__model_owners(m, p->dev, 1, &owner, &largest);
			gpumon_peaks_add(d->job_peaks, p->last_t, d->job_bytes, owner, largest);
			if (d->job_bytes > d->job_top) {
				d->job_top = d->job_bytes;
				d->others_at_job_top = d->others_bytes;
			}
			feed_job(m, p->dev, d, p->last_t); /* as if its row had come after the pid joined */
		}
	}
	return GPUMON_OK;
}

/* ---- processes ----------------------------------------------------------------------------------- */

static size_t hash_pid(unsigned dev, unsigned pid, size_t cap)
{
	uint64_t h = (uint64_t)pid * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

static int reindex(gpumon_model *m, size_t cap)
{
	uint32_t *idx = calloc(cap, sizeof *idx);
	if (!idx)
		return -1;
	for (size_t i = 0; i < m->nprocs; i++) {
		size_t h = hash_pid(m->procs[i].dev, m->procs[i].pid, cap);
		while (idx[h])
			h = (h + 1) & (cap - 1);
		idx[h] = (uint32_t)(i + 1);
	}
	free(m->proc_index);
	m->proc_index = idx;
	m->index_cap = cap;
	return 0;
}

static struct mproc *find_proc(const gpumon_model *m, unsigned dev, unsigned pid)
{
	if (!m->index_cap)
		return NULL;
	for (size_t h = hash_pid(dev, pid, m->index_cap);; h = (h + 1) & (m->index_cap - 1)) {
		uint32_t i = m->proc_index[h];
		if (!i)
			return NULL;
		struct mproc *p = &m->procs[i - 1];
		if (p->dev == dev && p->pid == pid)
			return p;
	}
}

const struct mproc *gpumon__model_proc(const gpumon_model *m, unsigned dev, unsigned pid)
{
	return find_proc(m, dev, pid);
}

/* Forgets the process that left longest ago, to make room; 0, or -1 when none has left. */
static int evict_oldest_gone(gpumon_model *m)
{
	size_t best = m->nprocs;
	for (size_t i = 0; i < m->nprocs; i++)
		if (!m->procs[i].present && (best == m->nprocs || m->procs[i].gone_t < m->procs[best].gone_t))
			best = i;
	if (best == m->nprocs)
		return -1;
	gpumon_leak_destroy(m->procs[best].leak);
	gpumon__timeline_free(&m->procs[best].line);
	free(m->procs[best].owner);
	m->procs[best] = m->procs[--m->nprocs];
	return reindex(m, m->index_cap);
}

static struct mproc *get_proc(gpumon_model *m, unsigned dev, unsigned pid)
{
	struct mproc *p = find_proc(m, dev, pid);
	if (p)
		return p;
	if (m->nprocs >= m->cfg.max_processes && evict_oldest_gone(m)) {
		if (!m->procs_dropped++)
			gpumon_model_damage(m, "more processes than the model keeps: the later ones are left out");
		return NULL;
	}
	if (grow((void **)&m->procs, &m->procs_cap, m->nprocs + 1, sizeof *m->procs))
		return NULL;
	if ((m->nprocs + 1) * 2 > m->index_cap && reindex(m, m->index_cap ? m->index_cap * 2 : 64))
		return NULL;
	p = &m->procs[m->nprocs];
	memset(p, 0, sizeof *p);
	p->dev = dev;
	p->pid = pid;
	p->rank.rank = p->rank.local_rank = p->rank.world_size = p->rank.node_rank = -1;
	p->job = gpumon__model_is_job(m, pid);
	if ((m->cfg.flags & GPUMON_MODEL_TIMELINES) && gpumon__timeline_init(&p->line, 1, proc_modes))
		return NULL;
	size_t h = hash_pid(dev, pid, m->index_cap);
	while (m->proc_index[h])
		h = (h + 1) & (m->index_cap - 1);
	m->nprocs++;
	m->proc_index[h] = (uint32_t)m->nprocs;
	return p;
}

/* The container, pod, Slurm job or unit around the process, from the latest listing that told one
 * (a listing after the process left its cgroup says nothing, and does not erase it). Kept apart
 * from struct mproc, as most processes of a run have none to keep. 0, or GPUMON_E_NOMEM. */
static int take_owner(struct mproc *p, const gpumon_owner *o)
{
	if (!o->present)
		return GPUMON_OK;
	if (!p->owner && !(p->owner = malloc(sizeof *p->owner)))
		return GPUMON_E_NOMEM;
	*p->owner = *o;
	return GPUMON_OK;
}

/* What is known of the process's user and command line, kept from the listing that said most: a
 * pid listed between fork and exec has its parent's command line, one exiting only "[name]". */
static void take_identity(struct mproc *p, const gpumon_process *src)
{
	if (src->flags & GPUMON_PROC_USER_KNOWN)
		snprintf(p->user, sizeof p->user, "%s", src->user);
	if ((src->flags & GPUMON_PROC_CMDLINE_KNOWN) && src->cmdline[0] && src->cmdline[0] != '[')
		snprintf(p->command, sizeof p->command, "%s", src->cmdline);
	else if ((src->flags & GPUMON_PROC_NAME_KNOWN) && src->name[0] && !p->command[0])
		snprintf(p->command, sizeof p->command, "%s", src->name);
}

static int on_process(gpumon_model *m, const gpumon_record *r)
{
	struct mdev *d = gpumon__model_dev(m, r->dev);
	if (!d)
		return GPUMON_E_NOMEM;
	struct mproc *p = get_proc(m, r->dev, r->process->pid);
	if (!p)
		return m->procs_dropped ? GPUMON_OK : GPUMON_E_NOMEM;
	uint64_t old = p->present && p->used_known ? p->used : 0;
	gpumon__model_hold(p, r->t_ns);
	if (r->kind == GPUMON_REC_PROCESS_GONE) {
		if (p->present && p->used_known) { /* its figure held until now: the series ends here */
			if (p->leak)
				gpumon_leak_add(p->leak, -1, r->t_ns, p->used);
			if (p->job && d->job_seen && job_listed(m, r->dev) == 1)
				gpumon_leak_add(d->job_leak, -1, r->t_ns, d->job_bytes);
		}
		if (p->present) {
			p->present = 0;
			p->gone_t = r->t_ns;
			if (m->cfg.flags & GPUMON_MODEL_FORGET_GONE) { /* its detector is most of its memory */
				gpumon_leak_destroy(p->leak);
				p->leak = NULL;
			}
			if (p->job && d->job_bytes >= old)
				d->job_bytes -= old;
			else if (!p->job && d->others_bytes >= old)
				d->others_bytes -= old;
			if (p->line.t) { /* the figure held until now, then nothing */
				int64_t v = (int64_t)old;
				int k = p->used_known;
				gpumon__timeline_add(&p->line, r->t_ns, &v, &k);
			}
		}
		return GPUMON_OK;
	}
	if (!p->present) { /* a new appearance: a new series */
		if (p->leak && p->first_t)
			gpumon_leak_destroy(p->leak), p->leak = NULL;
		p->present = 1;
		p->first_t = r->t_ns;
		p->gone_t = 0;
		p->alerted = 0;
		old = 0;
		/* listed while the GPU has not risen above its reference: it was there when the reference
		   was taken (the sampler lists processes just after a device row), so its memory is part
		   of the reference, not a rise */
		if (d->ref_have && d->have && d->used <= d->ref_used && (r->process->flags & GPUMON_PROC_USED_KNOWN)) {
			p->ref_gen = d->ref_gen;
			p->ref_bytes = r->process->used_bytes;
		}
	}
	take_identity(p, r->process);
	gpumon__model_take_rank(p, r->process);
	if (take_owner(p, &r->process->owner))
		return GPUMON_E_NOMEM;
	p->flags = r->process->flags;
	p->used_known = !!(r->process->flags & GPUMON_PROC_USED_KNOWN);
	p->used = p->used_known ? r->process->used_bytes : 0;
	p->last_t = r->t_ns;
	if (p->used > p->peak)
		p->peak = p->used;
	if (!p->job) {
		d->others_bytes += p->used - old;
		if (d->others_bytes > d->others_peak)
			d->others_peak = d->others_bytes;
	} else {
		if (d->job_seen && r->t_ns > d->job_integral_t) { /* the figure held since the last change */
			d->job_integral += (long double)d->job_bytes * (long double)(r->t_ns - d->job_integral_t);
			d->job_integral_t = r->t_ns;
		}
		d->job_bytes += p->used - old;
		if (p->used_known && !d->job_seen) {
			d->job_seen = 1;
			d->job_first_t = d->job_integral_t = r->t_ns;
		}
		if (d->job_seen && r->t_ns - d->job_first_t <= MODEL_EARLY_NS && d->job_bytes > d->job_early)
			d->job_early = d->job_bytes;
		int64_t owner, largest;
		gpumon__model_owners(m, r->dev, 1, &owner, &largest);
		if (p->used_known)
			gpumon_peaks_add(d->job_peaks, r->t_ns, d->job_bytes, owner, largest);
		if (d->job_bytes > d->job_top) {
			d->job_top = d->job_bytes;
			d->others_at_job_top = d->others_bytes;
		}
	}
	if (p->line.t) {
		int64_t v = (int64_t)p->used;
		int k = p->used_known;
		gpumon__timeline_add(&p->line, r->t_ns, &v, &k);
	}
	gpumon__model_oom_settle(m, p, r->t_ns);
	/* a step function changes here: its series take the new value now, not at the next device row
	   (and a GPU without rows, a CSV's process column, is judged on these alone) */
	if (p->used_known) {
		if (feed_proc(m, r->dev, d, p, r->t_ns))
			return GPUMON_E_NOMEM;
		if (p->job && d->job_seen)
			feed_job(m, r->dev, d, r->t_ns);
	}
	return GPUMON_OK;
}

/* ---- device records: the clock of the NVML series ----------------------------------------------- */

static void ring_push(struct mdev *d, uint64_t t, uint64_t used_max, uint64_t used_min)
{
	d->ring[d->ring_head] = (struct mring){t, used_max, used_min, d->job_seen ? d->job_bytes : 0};
	d->ring_head = (d->ring_head + 1) % MODEL_RING;
	if (d->ring_n < MODEL_RING)
		d->ring_n++;
}

/* The device reached a new lowest figure: every process's figure now is the reference its later
 * rise is measured from. */
static void take_reference(gpumon_model *m, struct mdev *d, unsigned dev, uint64_t used)
{
	d->ref_used = used;
	d->ref_have = 1;
	d->ref_gen++;
	for (size_t i = 0; i < m->nprocs; i++) {
		struct mproc *p = &m->procs[i];
		if (p->dev != dev)
			continue;
		p->ref_gen = d->ref_gen;
		p->ref_bytes = p->present && p->used_known ? p->used : 0;
	}
}

/* How many of the job's processes are listed on dev with a figure. */
static unsigned job_listed(const gpumon_model *m, unsigned dev)
{
	unsigned n = 0;
	for (size_t i = 0; i < m->nprocs; i++)
		n += m->procs[i].dev == dev && m->procs[i].job && m->procs[i].present && m->procs[i].used_known;
	return n;
}

/* One process's series: its figure at t (a change, or the device's clock), and its alert. */
static int feed_proc(gpumon_model *m, unsigned dev, struct mdev *d, struct mproc *p, uint64_t t)
{
	if (!p->leak && !(p->leak = new_leak(GPUMON_LEAK_HELD)))
		return GPUMON_E_NOMEM;
	if (d->free_known)
		p->free_at_last = d->free;
	/* in a job's run its processes are told about together (the job series) */
	if (gpumon_leak_add(p->leak, -1, t, p->used) == GPUMON_OK && !p->alerted && !m->kind_run)
		gpumon__model_check_alert(m, GPUMON_SERIES_PROCESS, (int)dev, p, NULL, &p->alerted, p->leak, t);
	return GPUMON_OK;
}

static void feed_job(gpumon_model *m, unsigned dev, struct mdev *d, uint64_t t)
{
	if (d->free_known)
		d->job_free = d->free;
	if (gpumon_leak_add(d->job_leak, -1, t, d->job_bytes) == GPUMON_OK && !d->job_alerted)
		gpumon__model_check_alert(m, GPUMON_SERIES_JOB, (int)dev, NULL, NULL, &d->job_alerted, d->job_leak, t);
}

/* Feeds every NVML series of dev its figure at this row, and checks their alerts. Like a process's,
 * the job's series ends when its last process leaves: the zeros after it would hide its leak, and
 * the memory it freed was no room it had. */
static int feed_series(gpumon_model *m, unsigned dev, struct mdev *d, uint64_t t, uint64_t floor)
{
	unsigned job = 0;
	gpumon_leak_add(d->leak, -1, t, floor);
	for (size_t i = 0; i < m->nprocs; i++) {
		struct mproc *p = &m->procs[i];
		if (p->dev != dev || !p->present || !p->used_known)
			continue;
		job += p->job;
		if (feed_proc(m, dev, d, p, t))
			return GPUMON_E_NOMEM;
	}
	if (d->job_seen && job)
		feed_job(m, dev, d, t);
	return GPUMON_OK;
}

static void check_headroom(gpumon_model *m, unsigned dev, struct mdev *d, uint64_t t)
{
	double share = m->cfg.headroom_share;
	if (share <= 0 || !d->total)
		return;
	int low = (double)d->free < share * (double)d->total;
	if (low && !d->headroom_low) {
		gpumon_alert a = {.kind = GPUMON_ALERT_HEADROOM, .t_ns = t, .dev = (int)dev,
				  .free_bytes = d->free, .total_bytes = d->total, .pid = -1};
		gpumon__model_push_alert(m, &a);
	}
	d->headroom_low = low;
}

static int on_device(gpumon_model *m, const gpumon_record *r)
{
	struct mdev *d = gpumon__model_dev(m, r->dev);
	if (!d)
		return GPUMON_E_NOMEM;
	const gpumon_device_sample *s = &r->sample;
	int whole = !!(s->present & GPUMON_F_MEMORY);
	if (!whole && !(s->present & GPUMON_F_MEMORY_USED))
		return GPUMON_OK;
	d->have = 1;
	d->free_known = whole;
	d->total = whole ? s->memory_total_bytes : 0; /* 0: the total of the GPU's info, if any */
	d->used = s->memory_used_bytes;
	d->free = whole ? s->memory_free_bytes : 0;
	d->reserved_known = !!(s->present & GPUMON_F_MEM_RESERVED);
	d->reserved = d->reserved_known ? s->memory_reserved_bytes : 0;
	d->last_t = r->t_ns;
	int interval = r->interval_samples > 0;
	uint64_t used_max = interval ? r->used_max_bytes : s->memory_used_bytes;
	uint64_t used_min = interval ? r->used_min_bytes : s->memory_used_bytes;
	uint64_t max_t = interval && r->used_max_t_ns ? r->used_max_t_ns : r->t_ns;
	if (interval && used_max > s->memory_used_bytes) /* the free memory at the interval's peak */
		d->free = d->free > used_max - s->memory_used_bytes ? d->free - (used_max - s->memory_used_bytes) : 0;
	if (!d->ref_have || used_min < d->ref_used)
		take_reference(m, d, r->dev, used_min);
	int64_t owner, largest;
	gpumon__model_owners(m, r->dev, 0, &owner, &largest);
	gpumon_peaks_add(d->peaks, max_t < m->first_t ? m->first_t : max_t, used_max, owner, largest);
	ring_push(d, max_t, used_max, used_min);
	if (d->line.t) {
		int64_t v[3] = {(int64_t)used_min, (int64_t)used_max, (int64_t)d->reserved};
		int k[3] = {1, 1, d->reserved_known};
		gpumon__timeline_add(&d->line, r->t_ns, v, k);
	}
	check_headroom(m, r->dev, d, r->t_ns);
	d->floor = used_min;
	return feed_series(m, r->dev, d, r->t_ns, used_min);
}

static void on_lost(gpumon_model *m, const gpumon_record *r)
{
	struct mdev *d = gpumon__model_dev(m, r->dev);
	if (!d)
		return;
	if (!d->lost_t)
		d->lost_t = r->t_ns;
	d->lost = 1;
	d->info.lost = 1;
	for (size_t i = 0; i < m->nprocs; i++) {
		struct mproc *p = &m->procs[i];
		if (p->dev == r->dev && p->present) {
			p->present = 0;
			p->gone_t = r->t_ns;
		}
	}
	d->job_bytes = d->others_bytes = 0;
}

/* ---- framework samples ------------------------------------------------------------------------- */

/* The latest segment of (pid, device, framework), a new one when the step counter went back. */
static struct mseg *get_seg(gpumon_model *m, const gpumon_framework_sample *f)
{
	struct mseg *s = NULL;
	for (size_t i = m->nsegs; i-- > 0 && !s;)
		if (m->segs[i].pid == f->pid && m->segs[i].device == f->device &&
		    !strncmp(m->segs[i].framework, f->framework, sizeof f->framework))
			s = &m->segs[i];
	int restart = s && f->step >= 0 && s->last_step >= 0 && f->step < s->last_step;
	if (s && !restart)
		return s;
	if (m->nsegs >= MODEL_MAX_SEGMENTS) {
		if (!m->segs_dropped++)
			gpumon_model_damage(m, "more than 256 framework series: the later ones are left out");
		return NULL;
	}
	unsigned segment = s ? s->segment + 1 : 0;
	if (grow((void **)&m->segs, &m->segs_cap, m->nsegs + 1, sizeof *m->segs))
		return NULL;
	s = &m->segs[m->nsegs];
	memset(s, 0, sizeof *s);
	s->pid = f->pid;
	s->device = f->device < 0 ? -1 : f->device;
	memcpy(s->framework, f->framework, sizeof s->framework);
	s->framework[sizeof s->framework - 1] = 0;
	s->segment = segment;
	s->last_step = -1;
	s->frag.pid = s->unacc.pid = f->pid;
	s->frag.dev = s->unacc.dev = -1;
	if (!(s->leak = new_leak(GPUMON_LEAK_SAMPLES)) ||
	    ((m->cfg.flags & GPUMON_MODEL_TIMELINES) && gpumon__timeline_init(&s->line, 4, seg_modes))) {
		gpumon_leak_destroy(s->leak);
		return NULL;
	}
	m->nsegs++;
	return s;
}

int gpumon__model_map_device(const gpumon_model *m, unsigned pid, int cuda_device)
{
	if (cuda_device >= 0 && m->cvd) {
		const char *p = m->cvd;
		for (int i = 0; i < cuda_device && p; i++) {
			p = strchr(p, ',');
			p = p ? p + 1 : NULL;
		}
		if (!p || !*p)
			return MAP_NOT_VISIBLE;
		char entry[128];
		size_t n = strcspn(p, ",");
		snprintf(entry, sizeof entry, "%.*s", (int)(n < sizeof entry ? n : sizeof entry - 1), p);
		char *end;
		long idx = strtol(entry, &end, 10);
		if (end != entry && !*end)
			return idx >= 0 && (unsigned long)idx < m->ndev ? (int)idx : MAP_NO_GPU;
		if (strncmp(entry, "GPU-", 4))
			return !strncmp(entry, "MIG-", 4) ? MAP_MIG : MAP_NO_GPU;
		int found = -1;
		for (unsigned d = 0; d < m->ndev; d++)
			if (m->dev[d].seen && !strncasecmp(m->dev[d].info.uuid, entry, strlen(entry)))
				found = found < 0 ? (int)d : -2;
		return found >= 0 ? found : MAP_NO_GPU;
	}
	/* no mapping known: the GPU NVML lists the process on when it is one, else the index as NVML's */
	int only = -1;
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid && m->procs[i].present)
			only = only == -1 ? (int)m->procs[i].dev : -2;
	if (only >= 0)
		return only;
	if (cuda_device >= 0 && (unsigned)cuda_device < m->ndev && m->dev[cuda_device].seen)
		return cuda_device;
	return m->ndev == 1 ? 0 : MAP_UNKNOWN;
}

int gpumon_model_placed(const gpumon_model *m, unsigned dev, unsigned pid, gpumon_placed *out)
{
	if (!m || !out)
		return GPUMON_E_INVAL;
	for (size_t i = m->nsegs; i-- > 0;) {
		const struct mseg *s = &m->segs[i];
		if (s->pid != pid || !s->placed.known || s->placed.dev != dev)
			continue;
		gpumon__model_placed_fill(s, out);
		return GPUMON_OK;
	}
	return GPUMON_E_NOT_FOUND;
}

static int on_framework(gpumon_model *m, const gpumon_record *r)
{
	const gpumon_framework_sample *f = &r->framework;
	struct mseg *s = get_seg(m, f);
	if (!s)
		return m->segs_dropped ? GPUMON_OK : GPUMON_E_NOMEM;
	if (!s->points)
		s->first_t = r->t_ns;
	s->points++;
	s->last_t = r->t_ns;
	if (f->step >= 0 && f->step != s->last_step)
		s->nsteps++;
	if (f->step >= 0)
		s->last_step = f->step;
	if (f->limit_bytes)
		s->limit = f->limit_bytes;
	if (f->allocated_known) {
		s->allocated = f->allocated_bytes;
		s->allocated_known = 1;
		if (gpumon_leak_add(s->leak, f->step, r->t_ns, f->allocated_bytes) == GPUMON_OK) {
			if (!s->alerted)
				gpumon__model_check_alert(m, GPUMON_SERIES_FRAMEWORK, -1, NULL, s, &s->alerted, s->leak, r->t_ns);
		} else {
			m->refused++;
		}
	}
	if (f->reserved_known) {
		s->reserved = f->reserved_bytes;
		s->reserved_known = 1;
	}
	uint64_t peak = f->max_allocated_known ? f->max_allocated_bytes : f->allocated_bytes;
	if (f->max_allocated_known || f->allocated_known)
		gpumon_peaks_add(m->fw_peaks, r->t_ns, peak, f->pid, f->pid);
	if (f->allocated_known && f->reserved_known && f->reserved_bytes >= f->allocated_bytes &&
	    (!s->frag.known || f->reserved_bytes - f->allocated_bytes > s->frag.bytes)) {
		s->frag.known = 1;
		s->frag.bytes = f->reserved_bytes - f->allocated_bytes;
		s->frag.t_ns = r->t_ns;
	}
	int dev = gpumon__model_map_device(m, f->pid, f->device);
	if (s->frag.known && s->frag.t_ns == r->t_ns)
		s->frag.dev = dev >= 0 ? dev : -1;
	if (dev >= 0 && m->dev[dev].free_known) {
		s->free_known = 1;
		s->free_at_last = m->dev[dev].free;
	}
	if (f->allocated_known && f->reserved_known && f->allocated_bytes > s->allocated_peak)
		s->allocated_peak = f->allocated_bytes;
	if (f->max_allocated_known && f->max_allocated_bytes > s->allocated_peak)
		s->allocated_peak = f->max_allocated_bytes;
	if (f->max_allocated_known) {
		s->max_allocated = f->max_allocated_bytes;
		s->max_allocated_known = 1;
	}
	if (f->reserved_known && f->reserved_bytes > s->reserved_peak)
		s->reserved_peak = f->reserved_bytes;
	const struct mproc *p = dev >= 0 && f->reserved_known ? find_proc(m, (unsigned)dev, f->pid) : NULL;
	if (f->reserved_known && !s->unacc.known) /* why it is not known yet, for the words */
		s->unacc_why = dev < 0 ? dev : MAP_NO_NVML_FIGURE;
	if (p && p->present && p->used_known && f->allocated_known) {
		s->placed.known = 1;
		s->placed.t_ns = r->t_ns;
		s->placed.nvml = p->used;
		s->placed.reserved = f->reserved_bytes;
		s->placed.allocated = f->allocated_bytes;
		s->placed.step = f->step;
		s->placed.dev = (unsigned)dev;
	}
	if (p && p->present && p->used_known && p->used >= f->reserved_bytes &&
	    (!s->unacc.known || p->used - f->reserved_bytes > s->unacc.bytes)) {
		s->unacc.known = 1;
		s->unacc.bytes = p->used - f->reserved_bytes;
		s->unacc.t_ns = r->t_ns;
		s->unacc.dev = dev;
	}
	if (s->line.t) {
		int64_t v[4] = {(int64_t)f->allocated_bytes, (int64_t)f->reserved_bytes, (int64_t)f->max_allocated_bytes,
				f->step};
		int k[4] = {f->allocated_known, f->reserved_known, f->max_allocated_known, f->step >= 0};
		gpumon__timeline_add(&s->line, r->t_ns, v, k);
	}
	return GPUMON_OK;
}

/* ---- events ---------------------------------------------------------------------------------------- */

static int on_event(gpumon_model *m, const gpumon_record *r)
{
	const char *kind = r->event_kind;
	if (!kind || !kind[0])
		return GPUMON_OK;
	if (!strcmp(kind, GPUMON_EVENT_STEP))
		return GPUMON_OK; /* one per step: the framework rows say it better */
	if (!strcmp(kind, GPUMON_EVENT_OOM))
		gpumon__model_oom_signal(m, r->t_ns, r->event_text);
	else if (gpumon__model_oom_event(m, r->t_ns, kind, r->event_text) && strcmp(kind, GPUMON_EVENT_OOM_DETAIL))
		return GPUMON_OK; /* figures and snapshots: the document's oom object holds them, not its events */
	if (!strcmp(kind, GPUMON_EVENT_ALERT)) /* an alert given live at the moment the model gave one */
		for (size_t i = m->nalerts; i-- > 0 && m->alerts[i].t_ns >= r->t_ns;)
			if (m->alerts[i].t_ns == r->t_ns)
				m->alerts[i].live = 1;
	if (m->nevents >= MODEL_MAX_EVENTS) {
		m->events_dropped++;
		return GPUMON_OK;
	}
	struct mevent *e = &m->events[m->nevents];
	e->t_ns = r->t_ns;
	/* a recording made before events kept their GPU gives none: the event stays "GPU n/a" */
	e->dev = gpumon__event_names_gpu(kind) && r->dev < m->ndev ? (int)r->dev : -1;
	e->kind = strdup(kind);
	e->text = dup_or_null(r->event_text);
	if (!e->kind || (r->event_text && !e->text)) {
		free(e->kind);
		free(e->text);
		return GPUMON_E_NOMEM;
	}
	m->nevents++;
	return GPUMON_OK;
}

/* ---- feeding ----------------------------------------------------------------------------------------- */

static int add_one(gpumon_model *m, const gpumon_record *r)
{
	int st;
	int about_process = r->kind == GPUMON_REC_PROCESS || r->kind == GPUMON_REC_PROCESS_GONE || r->kind == GPUMON_REC_JOB;
	if (about_process && !r->process) { /* a record of a process that names none: nothing to take */
		m->refused++;
		return GPUMON_OK;
	}
	if (gpumon__model_refuse(m, r)) /* not GPU memory: left out before it reaches a sum, and said */
		return GPUMON_OK;
	if (!m->records++)
		m->first_t = r->t_ns;
	if (!m->meta.start_mono_ns)
		m->meta.start_mono_ns = r->t_ns;
	if (r->t_ns > m->last_t)
		m->last_t = r->t_ns;
	if (r->kind >= GPUMON_REC_DEVICE && r->kind <= GPUMON_REC_FRAMEWORK)
		m->samples++;
	switch (r->kind) {
	case GPUMON_REC_DEVICE: return on_device(m, r);
	case GPUMON_REC_PROCESS:
	case GPUMON_REC_PROCESS_GONE: st = on_process(m, r); gpumon__model_check_limit(m, r); return st;
	case GPUMON_REC_LOST: on_lost(m, r); return GPUMON_OK;
	case GPUMON_REC_FRAMEWORK: st = on_framework(m, r); gpumon__model_check_projection(m, r->t_ns); return st;
	case GPUMON_REC_EVENT: return on_event(m, r);
	case GPUMON_REC_JOB: return add_job_pid(m, r->process->pid);
	}
	m->refused++;
	return GPUMON_OK;
}

int gpumon_model_add(gpumon_model *m, const gpumon_record *recs, size_t n)
{
	if (!m || (n && !recs))
		return GPUMON_E_INVAL;
	if (m->finished) {
		snprintf(m->msg, sizeof m->msg, "a record after the end of the run");
		return GPUMON_E_INVAL;
	}
	int st = GPUMON_OK;
	for (size_t i = 0; i < n; i++) {
		int rc = add_one(m, &recs[i]);
		if (rc && !st) {
			st = rc;
			snprintf(m->msg, sizeof m->msg, "out of memory: a record was left out");
		}
	}
	return st;
}

int gpumon_model_load(gpumon_model *m, gpumon_reader *r)
{
	if (!m || !r)
		return GPUMON_E_INVAL;
	if (!m->records && !m->meta.kind && !m->meta.start_mono_ns) {
		int st = gpumon__model_take_meta(m, gpumon_reader_meta(r));
		if (st)
			return st;
	}
	for (unsigned i = 0; i < gpumon_reader_device_count(r); i++) {
		gpumon_device_info info;
		if (gpumon_reader_device(r, i, &info) == GPUMON_OK && gpumon_model_device(m, &info) != GPUMON_OK)
			return GPUMON_E_NOMEM;
	}
	gpumon_record rec;
	int rc;
	while ((rc = gpumon_reader_next(r, &rec)) > 0) {
		if (!m->meta.start_mono_ns)
			m->meta.start_mono_ns = gpumon_reader_meta(r)->start_mono_ns;
		int st = gpumon_model_add(m, &rec, 1);
		if (st)
			return st;
	}
	if (gpumon_reader_damage(r)[0])
		gpumon_model_damage(m, gpumon_reader_damage(r));
	if (rc < 0)
		snprintf(m->msg, sizeof m->msg, "%s", gpumon_reader_errmsg(r));
	return rc < 0 ? rc : GPUMON_OK;
}

int gpumon_model_finish(gpumon_model *m, uint64_t end_t_ns, int exit_status)
{
	if (!m)
		return GPUMON_E_INVAL;
	if (m->finished)
		return GPUMON_OK;
	m->finished = 1;
	m->end_t = end_t_ns ? end_t_ns : m->meta.end_mono_ns ? m->meta.end_mono_ns : m->last_t;
	m->exit_status = exit_status >= 0 ? exit_status : m->meta.exit_status;
	/* step functions hold their last value until the end: one last point says so, wherever the
	   last row happened to fall */
	for (unsigned dev = 0; dev < m->ndev; dev++) {
		struct mdev *d = &m->dev[dev];
		if (d->seen && d->have && !d->lost && m->end_t > d->last_t)
			feed_series(m, dev, d, m->end_t, d->floor);
	}
	gpumon__model_oom_finish(m);
	return GPUMON_OK;
}
