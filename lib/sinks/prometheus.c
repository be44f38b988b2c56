/* SPDX-License-Identifier: MIT */
/* prometheus.c — renders the exporter's state as Prometheus text format 0.0.4: gpumon's own
 * families (per GPU, per process, framework, the exporter's own). Pure: no I/O, no driver calls;
 * the names, types and units are listed in docs/metrics.md. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prometheus.h"

/* ---- buffer ----------------------------------------------------------------------------------- */

void gpumon__prom_free(struct prom_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* Makes room for extra more bytes (plus a NUL); 0 or -1 (failed set). */
int gpumon__prom_reserve(struct prom_buf *b, size_t extra)
{
	if (b->failed)
		return -1;
	if (b->len + extra + 1 <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 4096;
	while (cap < b->len + extra + 1) {
		if (cap > SIZE_MAX / 2) {
			b->failed = 1;
			return -1;
		}
		cap *= 2;
	}
	char *p = realloc(b->p, cap);
	if (!p) {
		b->failed = 1;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

void gpumon__prom_put(struct prom_buf *b, const char *s, size_t n)
{
	if (gpumon__prom_reserve(b, n) != 0)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

void gpumon__prom_puts(struct prom_buf *b, const char *s)
{
	gpumon__prom_put(b, s, strlen(s));
}

void gpumon__prom_printf(struct prom_buf *b, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(small, sizeof small, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->failed = 1;
		return;
	}
	if ((size_t)n < sizeof small) {
		gpumon__prom_put(b, small, (size_t)n);
		return;
	}
	if (gpumon__prom_reserve(b, (size_t)n) != 0)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void gpumon__prom_family(struct prom_buf *b, const char *name, const char *type, const char *help)
{
	gpumon__prom_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes available), 0 when invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned min;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xE0) == 0xC0)
		len = 2, min = 0x80;
	else if ((s[0] & 0xF0) == 0xE0)
		len = 3, min = 0x800;
	else if ((s[0] & 0xF8) == 0xF0)
		len = 4, min = 0x10000;
	else
		return 0;
	if (len > n)
		return 0;
	unsigned cp = s[0] & (0x7F >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

void gpumon__prom_label_value(struct prom_buf *b, const char *v, size_t max_bytes)
{
	const unsigned char *s = (const unsigned char *)v;
	size_t n = strlen(v), used = 0;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_len(s + i, n - i);
		size_t out = k ? k : 1;
		if (used + out > max_bytes) {
			gpumon__prom_put(b, "...", 3);
			return;
		}
		used += out;
		if (!k)
			gpumon__prom_put(b, "?", 1);
		else if (s[i] == '\\')
			gpumon__prom_put(b, "\\\\", 2);
		else if (s[i] == '"')
			gpumon__prom_put(b, "\\\"", 2);
		else if (s[i] == '\n')
			gpumon__prom_put(b, "\\n", 2);
		else
			gpumon__prom_put(b, (const char *)s + i, k);
		i += out;
	}
}

/* ---- per GPU ---------------------------------------------------------------------------------- */

enum gfield {
	G_UP, G_TOTAL, G_USED, G_FREE, G_RESERVED, G_PEAK, G_UTIL, G_MEMUTIL, G_TEMP, G_POWER, G_ENERGY,
	G_CLOCK_SM, G_CLOCK_MEM, G_OOM, G_NPROCS,
};

struct gfamily {
	const char *name, *type, *help;
	enum gfield f;
};

static const struct gfamily gpu_families[] = {
	{"gpumon_gpu_up", "gauge",
	 "1 while the GPU answers; 0 once it is lost (fallen off the bus), or while a driver call on it has not returned in 2 s (gpumon_gpu_down_info says which).", G_UP},
	{"gpumon_memory_total_bytes", "gauge", "GPU memory in all, in bytes (total = reserved + used + free).", G_TOTAL},
	{"gpumon_memory_used_bytes", "gauge", "GPU memory in use, in bytes, as nvidia-smi's memory.used.", G_USED},
	{"gpumon_memory_free_bytes", "gauge", "GPU memory free, in bytes.", G_FREE},
	{"gpumon_memory_reserved_bytes", "gauge", "GPU memory the driver and firmware keep for themselves, in bytes.", G_RESERVED},
	{"gpumon_memory_used_peak_bytes", "gauge",
	 "Exact maximum of used memory over every sample (every --interval ms) of the peak window: the last W to 2W seconds (W = --peak-window), the same for every scraper.", G_PEAK},
	{"gpumon_utilization_ratio", "gauge", "Fraction of the driver's last period during which a kernel ran (0-1).", G_UTIL},
	{"gpumon_memory_utilization_ratio", "gauge", "Fraction of the driver's last period during which memory was read or written (0-1).", G_MEMUTIL},
	{"gpumon_temperature_celsius", "gauge", "GPU core temperature in degrees Celsius.", G_TEMP},
	{"gpumon_power_watts", "gauge", "Power drawn by the GPU, in watts.", G_POWER},
	{"gpumon_energy_joules_total", "counter", "Energy used by the GPU since the driver was loaded, in joules.", G_ENERGY},
	{"gpumon_clock_sm_hertz", "gauge", "Current SM clock, in hertz.", G_CLOCK_SM},
	{"gpumon_clock_memory_hertz", "gauge", "Current memory clock, in hertz.", G_CLOCK_MEM},
	{"gpumon_memory_oom_projected_seconds", "gauge",
	 "Seconds until the GPU runs out of memory: its free memory over the summed growth rate of the processes on it whose leak is alerted (a replayed run: the run's verdict); absent when none alerts.", G_OOM},
	{"gpumon_gpu_processes", "gauge", "Processes holding memory on the GPU (all of them, also those not exported one by one).", G_NPROCS},
};

/* The value of field f of g into buf; 0 when absent (the sample omitted). */
static int gpu_value(const struct prom_gpu *g, enum gfield f, int processes, char *buf, size_t len)
{
	const gpumon_device_sample *s = &g->s;
	int up = g->up && !g->stale; /* a GPU that does not answer has no current figures */
	unsigned p = up && g->have_sample ? s->present : 0;
	switch (f) {
	case G_UP: snprintf(buf, len, "%d", up); return 1;
	case G_TOTAL:
		if (!(p & GPUMON_F_MEMORY))
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)s->memory_total_bytes);
		return 1;
	case G_USED:
		if (!(p & GPUMON_F_MEMORY))
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)s->memory_used_bytes);
		return 1;
	case G_FREE:
		if (!(p & GPUMON_F_MEMORY))
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)s->memory_free_bytes);
		return 1;
	case G_RESERVED:
		if (!(p & GPUMON_F_MEM_RESERVED))
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)s->memory_reserved_bytes);
		return 1;
	case G_PEAK:
		if (!up || !g->have_peak)
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)g->peak_bytes);
		return 1;
	case G_UTIL:
		if (!(p & GPUMON_F_UTIL_GPU))
			return 0;
		snprintf(buf, len, "%g", s->util_gpu_pct / 100.0);
		return 1;
	case G_MEMUTIL:
		if (!(p & GPUMON_F_UTIL_MEMORY))
			return 0;
		snprintf(buf, len, "%g", s->util_memory_pct / 100.0);
		return 1;
	case G_TEMP:
		if (!(p & GPUMON_F_TEMPERATURE))
			return 0;
		snprintf(buf, len, "%u", s->temperature_c);
		return 1;
	case G_POWER:
		if (!(p & GPUMON_F_POWER))
			return 0;
		snprintf(buf, len, "%.3f", s->power_mw / 1000.0);
		return 1;
	case G_ENERGY:
		if (!(p & GPUMON_F_ENERGY))
			return 0;
		snprintf(buf, len, "%.3f", (double)s->energy_mj / 1000.0);
		return 1;
	case G_CLOCK_SM:
		if (!(p & GPUMON_F_CLOCK_SM))
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)s->clock_sm_mhz * 1000000ull);
		return 1;
	case G_CLOCK_MEM:
		if (!(p & GPUMON_F_CLOCK_MEM))
			return 0;
		snprintf(buf, len, "%llu", (unsigned long long)s->clock_mem_mhz * 1000000ull);
		return 1;
	case G_OOM:
		if (!up || g->oom_seconds < 0)
			return 0;
		snprintf(buf, len, "%.1f", g->oom_seconds);
		return 1;
	case G_NPROCS:
		if (!up || !processes)
			return 0;
		snprintf(buf, len, "%u", g->nprocs);
		return 1;
	}
	return 0;
}

/* Why each GPU whose gpumon_gpu_up is 0 is down; nothing while every GPU answers. */
static void render_down(const struct prom_view *v, struct prom_buf *b)
{
	int header = 0;
	for (unsigned i = 0; i < v->ngpus; i++) {
		const struct prom_gpu *g = &v->gpus[i];
		const char *why = !g->up ? "lost" : g->stale ? "not_answering" : NULL;
		if (!why)
			continue;
		if (!header++)
			gpumon__prom_family(b, "gpumon_gpu_down_info", "gauge",
					    "1 for each GPU whose gpumon_gpu_up is 0; reason: lost (fallen off the bus, for good) or not_answering (a driver call on it has not returned in 2 s; back to up when it answers).");
		gpumon__prom_printf(b, "gpumon_gpu_down_info{%s,reason=\"%s\"} 1\n", g->labels, why);
	}
}

static void render_gpus(const struct prom_view *v, struct prom_buf *b)
{
	char val[64];
	for (size_t k = 0; k < sizeof gpu_families / sizeof gpu_families[0]; k++) {
		const struct gfamily *f = &gpu_families[k];
		int header = 0;
		for (unsigned i = 0; i < v->ngpus; i++) {
			if (!gpu_value(&v->gpus[i], f->f, v->processes, val, sizeof val))
				continue;
			if (!header++) /* a family with no sample at all is left out entirely */
				gpumon__prom_family(b, f->name, f->type, f->help);
			gpumon__prom_printf(b, "%s{%s} %s\n", f->name, v->gpus[i].labels, val);
		}
		if (f->f == G_UP)
			render_down(v, b);
	}
}

/* ---- memory health ----------------------------------------------------------------------------- */

/* One family of the health figures: a header when the first GPU has the figure, a sample per GPU
 * (labels: the GPU's and `extra`). */
struct hsample {
	const char *name, *type, *help, *extra;
	uint64_t bit;           /* GPUMON_P_* the figure needs */
	uint64_t (*get)(const gpumon_device_props *h);
};

static uint64_t ecc_cv(const gpumon_device_props *h) { return h->ecc_total[GPUMON_ECC_CORRECTED][GPUMON_ECC_VOLATILE]; }
static uint64_t ecc_ca(const gpumon_device_props *h) { return h->ecc_total[GPUMON_ECC_CORRECTED][GPUMON_ECC_AGGREGATE]; }
static uint64_t ecc_uv(const gpumon_device_props *h) { return h->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_VOLATILE]; }
static uint64_t ecc_ua(const gpumon_device_props *h) { return h->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_AGGREGATE]; }
static uint64_t remap_corr(const gpumon_device_props *h) { return h->remapped_correctable; }
static uint64_t remap_unc(const gpumon_device_props *h) { return h->remapped_uncorrectable; }
static uint64_t remap_pending(const gpumon_device_props *h) { return (uint64_t)(h->remapped_pending != 0); }
static uint64_t remap_failed(const gpumon_device_props *h) { return (uint64_t)(h->remapped_failure != 0); }
static uint64_t retired_sbe(const gpumon_device_props *h) { return h->retired_sbe; }
static uint64_t retired_dbe(const gpumon_device_props *h) { return h->retired_dbe; }
static uint64_t retired_pending(const gpumon_device_props *h) { return (uint64_t)(h->retired_pending != 0); }

#define ECC_HELP "ECC errors counted by the GPU: type corrected or uncorrected; counter volatile (since the driver loaded) or aggregate (the board's life)."
#define REMAP_HELP "Rows of GPU memory remapped to spare rows, by cause: correctable or uncorrectable errors."
#define RETIRED_HELP "Pages of GPU memory retired (older GPUs; newer ones remap rows), by cause: single_bit or double_bit errors."
static const struct hsample health_families[] = {
	{"gpumon_ecc_errors_total", "counter", ECC_HELP, "type=\"corrected\",counter=\"volatile\"", GPUMON_P_ECC_TOTAL, ecc_cv},
	{NULL, NULL, NULL, "type=\"corrected\",counter=\"aggregate\"", GPUMON_P_ECC_TOTAL, ecc_ca},
	{NULL, NULL, NULL, "type=\"uncorrected\",counter=\"volatile\"", GPUMON_P_ECC_TOTAL, ecc_uv},
	{NULL, NULL, NULL, "type=\"uncorrected\",counter=\"aggregate\"", GPUMON_P_ECC_TOTAL, ecc_ua},
	{"gpumon_remapped_rows", "gauge", REMAP_HELP, "cause=\"correctable\"", GPUMON_P_REMAPPED_ROWS, remap_corr},
	{NULL, NULL, NULL, "cause=\"uncorrectable\"", GPUMON_P_REMAPPED_ROWS, remap_unc},
	{"gpumon_remapped_rows_pending", "gauge", "1 while a row remapping waits for the next GPU reset.", NULL,
	 GPUMON_P_REMAPPED_ROWS, remap_pending},
	{"gpumon_remapped_rows_failed", "gauge", "1 when a row remapping failed: the board needs service.", NULL,
	 GPUMON_P_REMAPPED_ROWS, remap_failed},
	{"gpumon_retired_pages", "gauge", RETIRED_HELP, "cause=\"single_bit\"", GPUMON_P_RETIRED_SBE, retired_sbe},
	{NULL, NULL, NULL, "cause=\"double_bit\"", GPUMON_P_RETIRED_DBE, retired_dbe},
	{"gpumon_retired_pages_pending", "gauge", "1 while pages wait to be retired at the next reboot.", NULL,
	 GPUMON_P_RETIRED_PENDING, retired_pending},
};


/* Whether GPU g's health figures are shown: read, and the GPU answers. */
static int health_shown(const struct prom_gpu *g)
{
	return g->have_health && g->up && !g->stale;
}

static void render_health(const struct prom_view *v, struct prom_buf *b)
{
	const struct hsample *fam = NULL;
	int header = 0;
	for (size_t k = 0; k < sizeof health_families / sizeof health_families[0]; k++) {
		const struct hsample *f = &health_families[k];
		if (f->name) { /* a new family; rows without a name add samples to the one before */
			fam = f;
			header = 0;
		}
		for (unsigned i = 0; i < v->ngpus; i++) {
			const struct prom_gpu *g = &v->gpus[i];
			if (!health_shown(g) || !(g->health.present & f->bit))
				continue;
			if (!header++)
				gpumon__prom_family(b, fam->name, fam->type, fam->help);
			gpumon__prom_printf(b, "%s{%s%s%s} %llu\n", fam->name, g->short_labels, f->extra ? "," : "",
					    f->extra ? f->extra : "", (unsigned long long)f->get(&g->health));
		}
	}
	header = 0;
	for (unsigned i = 0; i < v->ngpus; i++) {
		const struct prom_gpu *g = &v->gpus[i];
		for (unsigned bit = 1; health_shown(g) && bit; bit <<= 1) {
			const char *name = gpumon_health_problem_name(bit);
			if (!(g->health_problems & bit) || !name)
				continue;
			if (!header++)
				gpumon__prom_family(b, "gpumon_memory_health_problem", "gauge",
						    "1 for each problem the library finds in the GPU's memory health figures (gpumon_health_problems; the warning show and watch give); absent when none.");
			gpumon__prom_printf(b, "gpumon_memory_health_problem{%s,problem=\"%s\"} 1\n", g->short_labels,
					    name);
		}
	}
	header = 0;
	for (unsigned i = 0; i < v->ngpus; i++) {
		const struct prom_gpu *g = &v->gpus[i];
		for (unsigned k = 0; k < g->nxid; k++) {
			if (!header++)
				gpumon__prom_family(b, "gpumon_xid_errors_total", "counter",
						    "XID errors the driver reported on the GPU since the exporter started, by code (NVML's critical error events).");
			gpumon__prom_printf(b, "gpumon_xid_errors_total{%s,xid=\"%u\"} %llu\n", g->short_labels,
					    g->xid[k].code, (unsigned long long)g->xid[k].count);
		}
	}
}

/* ---- per process ------------------------------------------------------------------------------ */

static void render_procs(const struct prom_view *v, struct prom_buf *b)
{
	if (!v->processes)
		return;
	int header = 0;
	for (size_t i = 0; i < v->nprocs; i++) {
		const struct prom_proc *p = v->procs[i];
		if (!p->used_known)
			continue;
		if (!header++)
			gpumon__prom_family(b, "gpumon_process_memory_used_bytes", "gauge",
					    "GPU memory held by the process on the GPU, in bytes (the largest processes of the node, with --processes).");
		gpumon__prom_printf(b, "gpumon_process_memory_used_bytes{%s} %llu\n", p->labels,
				    (unsigned long long)p->used_bytes);
	}
	header = 0;
	for (size_t i = 0; i < v->nprocs; i++) {
		const struct prom_proc *p = v->procs[i];
		if (!p->have_peak)
			continue;
		if (!header++)
			gpumon__prom_family(b, "gpumon_process_memory_used_peak_bytes", "gauge",
					    "Maximum of the process's GPU memory over every process sample (every 100 ms) of the peak window: the last W to 2W seconds (W = --peak-window).");
		gpumon__prom_printf(b, "gpumon_process_memory_used_peak_bytes{%s} %llu\n", p->labels,
				    (unsigned long long)p->peak_bytes);
	}
	if (v->nprocs)
		gpumon__prom_family(b, "gpumon_process_leak_suspected", "gauge",
				    "1 when the run model's leak verdict on the process's GPU memory alerts (docs/leak-detection.md), else 0.");
	for (size_t i = 0; i < v->nprocs; i++)
		gpumon__prom_printf(b, "gpumon_process_leak_suspected{%s} %d\n", v->procs[i]->labels,
				    v->procs[i]->leak_alert);
	header = 0;
	for (size_t i = 0; i < v->nprocs; i++) {
		const struct prom_proc *p = v->procs[i];
		if (!p->rate_known)
			continue;
		if (!header++)
			gpumon__prom_family(b, "gpumon_process_memory_growth_bytes_per_second", "gauge",
					    "Growth rate of the floor of the process's GPU memory, in bytes per second; present only while a leak is suspected.");
		gpumon__prom_printf(b, "gpumon_process_memory_growth_bytes_per_second{%s} %.1f\n", p->labels,
				    p->rate_bytes_per_second);
	}
}

/* ---- per owner -------------------------------------------------------------------------------- */

/* The processes of each GPU summed by owner: series that stay while jobs come and go under the
 * same pod, Slurm job, container or user. */
static void render_owners(const struct prom_view *v, struct prom_buf *b)
{
	int header = 0;
	for (size_t i = 0; i < v->nowners; i++) {
		const struct prom_owner *o = &v->owners[i];
		if (!o->used_known)
			continue;
		if (!header++)
			gpumon__prom_family(b, "gpumon_owner_memory_used_bytes", "gauge",
					    "GPU memory held on the GPU by the processes of one owner (owner_kind: pod, slurm, container, user, unresolved), in bytes.");
		gpumon__prom_printf(b, "gpumon_owner_memory_used_bytes{%s,%s} %llu\n", v->gpus[o->dev].short_labels,
				    o->labels, (unsigned long long)o->used_bytes);
	}
	if (v->nowners)
		gpumon__prom_family(b, "gpumon_owner_processes", "gauge", "Processes of the owner holding memory on the GPU.");
	for (size_t i = 0; i < v->nowners; i++)
		gpumon__prom_printf(b, "gpumon_owner_processes{%s,%s} %u\n", v->gpus[v->owners[i].dev].short_labels,
				    v->owners[i].labels, v->owners[i].nprocs);
	if (v->nowners)
		gpumon__prom_family(b, "gpumon_owner_leak_suspected", "gauge",
				    "1 when the run model's leak verdict on one of the owner's processes on the GPU alerts, else 0.");
	for (size_t i = 0; i < v->nowners; i++)
		gpumon__prom_printf(b, "gpumon_owner_leak_suspected{%s,%s} %d\n", v->gpus[v->owners[i].dev].short_labels,
				    v->owners[i].labels, v->owners[i].leak_alert);
}

/* ---- the run model's verdict ---------------------------------------------------------------------- */

static const char *series_label(int s)
{
	switch (s) {
	case GPUMON_SERIES_FRAMEWORK: return "framework";
	case GPUMON_SERIES_JOB: return "job";
	case GPUMON_SERIES_PROCESS: return "process";
	case GPUMON_SERIES_DEVICE: return "device";
	}
	return "none";
}

/* The verdict the run model gives the whole view (gpumon report's "leak"), on the series its rule
 * picks: one set of labels, which change only when that series does. */
static void render_verdict(const struct prom_view *v, struct prom_buf *b)
{
	if (!v->have_verdict)
		return;
	const gpumon_verdict *d = &v->verdict;
	char labels[160];
	/* without per-pid series the pid is left out: the series the rule picks changes with the jobs,
	   and a pid label would make a new series each time */
	if (v->per_pid)
		snprintf(labels, sizeof labels, "series=\"%s\",gpu=\"%d\",pid=\"%lld\",segment=\"%u\"",
			 series_label(d->series), d->dev, (long long)d->pid, d->segment);
	else
		snprintf(labels, sizeof labels, "series=\"%s\",gpu=\"%d\",segment=\"%u\"", series_label(d->series), d->dev,
			 d->segment);
	gpumon__prom_family(b, "gpumon_leak_verdict", "gauge",
			    "The run model's leak verdict on the series its rule picks (docs/leak-detection.md): 0 not enough data, 1 none, 2 leak; gpu and pid (with --processes) are -1 when unknown.");
	gpumon__prom_printf(b, "gpumon_leak_verdict{%s} %d\n", labels,
			    d->leak.verdict == GPUMON_LEAK_SUSPECTED ? 2 : d->leak.verdict == GPUMON_LEAK_NONE ? 1 : 0);
	if (d->leak.verdict != GPUMON_LEAK_SUSPECTED)
		return;
	gpumon__prom_family(b, "gpumon_leak_rate_bytes_per_second", "gauge",
			    "Growth rate of the floor of that series while its verdict is a leak, in bytes per second.");
	gpumon__prom_printf(b, "gpumon_leak_rate_bytes_per_second{%s} %.1f\n", labels, d->leak.rate_bytes_per_second);
	if (d->leak.rate_bytes_per_step > 0) {
		gpumon__prom_family(b, "gpumon_leak_rate_bytes_per_step", "gauge",
				    "Growth rate of the floor of that series per training step, when it has steps.");
		gpumon__prom_printf(b, "gpumon_leak_rate_bytes_per_step{%s} %.1f\n", labels, d->leak.rate_bytes_per_step);
	}
	if (d->seconds_to_oom >= 0) {
		static const char *const rooms[] = {"unknown", "free", "limit", "cap", "total"};
		gpumon__prom_family(b, "gpumon_leak_oom_projected_seconds", "gauge",
				    "Seconds until that series runs out of memory at its rate, against the nearest bound (room: the GPU's free memory, the job's --limit, the allocator's cap, or the GPU's total).");
		gpumon__prom_printf(b, "gpumon_leak_oom_projected_seconds{%s,room=\"%s\"} %.1f\n", labels,
				    rooms[d->room >= 0 && d->room <= 4 ? d->room : 0], d->seconds_to_oom);
	}
}

/* ---- framework figures ------------------------------------------------------------------------- */

static void render_framework(const struct prom_view *v, struct prom_buf *b)
{
	static const struct {
		const char *name, *help;
		int which;
	} fams[] = {
		{"gpumon_framework_allocated_bytes", "Bytes the framework's allocator has handed out to tensors (torch.cuda.memory_allocated), as the process reported it.", 0},
		{"gpumon_framework_reserved_bytes", "Bytes the framework's caching allocator holds from the driver (torch.cuda.memory_reserved).", 1},
		{"gpumon_framework_allocated_peak_bytes", "The framework's own peak of allocated bytes (torch.cuda.max_memory_allocated).", 2},
		{"gpumon_framework_outside_bytes", "Bytes the process holds on the GPU outside the framework's allocator (its NVML figure - reserved: the CUDA context, libraries' workspaces, other allocators).", 3},
	};
	for (size_t k = 0; k < sizeof fams / sizeof fams[0]; k++) {
		int header = 0;
		for (size_t i = 0; i < v->nfw; i++) {
			const gpumon_framework_sample *f = &v->fw[i];
			int w = fams[k].which;
			int known = w == 0 ? f->allocated_known : w == 1 ? f->reserved_known : w == 2 ? f->max_allocated_known
								      : v->fw_outside && v->fw_outside[i] >= 0;
			uint64_t x = w == 0 ? f->allocated_bytes : w == 1 ? f->reserved_bytes : w == 2 ? f->max_allocated_bytes
										 : known ? (uint64_t)v->fw_outside[i] : 0;
			if (!known)
				continue;
			if (!header++)
				gpumon__prom_family(b, fams[k].name, "gauge", fams[k].help);
			int d = v->fw_gpu ? v->fw_gpu[i] : -1;
			if (d >= 0 && (unsigned)d < v->ngpus)
				gpumon__prom_printf(b, "%s{%s,", fams[k].name, v->gpus[d].short_labels);
			else /* said, not guessed: CUDA's order may differ from NVML's */
				gpumon__prom_printf(b, "%s{gpu=\"" PROM_GPU_UNKNOWN "\",uuid=\"" PROM_GPU_UNKNOWN "\",", fams[k].name);
			gpumon__prom_printf(b, "pid=\"%u\",device=\"%d\",framework=\"", f->pid, f->device);
			gpumon__prom_label_value(b, f->framework, sizeof f->framework);
			gpumon__prom_printf(b, "\"} %llu\n", (unsigned long long)x);
		}
	}
}

/* ---- the exporter's own ------------------------------------------------------------------------- */

static void render_self(const struct prom_view *v, struct prom_buf *b)
{
	gpumon__prom_family(b, "gpumon_build_info", "gauge", "Always 1; the labels say which gpumon and which driver.");
	gpumon__prom_printf(b, "gpumon_build_info{version=\"%s\",driver_version=\"", GPUMON_VERSION);
	gpumon__prom_label_value(b, v->driver_version ? v->driver_version : "", 96);
	gpumon__prom_puts(b, "\",nvml_version=\"");
	gpumon__prom_label_value(b, v->nvml_version ? v->nvml_version : "", 96);
	gpumon__prom_puts(b, "\"} 1\n");
	if (v->nerrs) {
		gpumon__prom_family(b, "gpumon_nvml_errors_total", "counter", "Failed NVML calls, by function.");
		for (size_t i = 0; i < v->nerrs; i++) {
			gpumon__prom_puts(b, "gpumon_nvml_errors_total{function=\"");
			gpumon__prom_label_value(b, v->errs[i].function, sizeof v->errs[i].function);
			gpumon__prom_printf(b, "\"} %llu\n", (unsigned long long)v->errs[i].count);
		}
	}
	if (v->have_sampler) { /* a replay has none: its counters are not known, not 0 */
		gpumon__prom_family(b, "gpumon_sampler_samples_total", "counter", "Device samples taken by the sampler (all GPUs).");
		gpumon__prom_printf(b, "gpumon_sampler_samples_total %llu\n", (unsigned long long)v->sampler.samples);
		gpumon__prom_family(b, "gpumon_sampler_overruns_total", "counter", "Sampling periods missed because a round of driver calls took longer than the period.");
		gpumon__prom_printf(b, "gpumon_sampler_overruns_total %llu\n", (unsigned long long)v->sampler.overruns);
		gpumon__prom_family(b, "gpumon_sampler_dropped_records_total", "counter", "Sampler records lost because the exporter's collector fell behind.");
		gpumon__prom_printf(b, "gpumon_sampler_dropped_records_total %llu\n", (unsigned long long)v->sampler.dropped);
	}
	gpumon__prom_family(b, "gpumon_exporter_render_duration_seconds", "gauge", "Time the collector took to build the previous snapshot of this page, in seconds.");
	gpumon__prom_printf(b, "gpumon_exporter_render_duration_seconds %.9f\n", v->render_seconds);
}

int gpumon__prom_render(const struct prom_view *v, struct prom_buf *b)
{
	render_gpus(v, b);
	render_health(v, b);
	render_procs(v, b);
	if (v->processes)
		render_owners(v, b);
	render_verdict(v, b);
	render_framework(v, b);
	gpumon__prom_render_compat(v, b);
	render_self(v, b);
	return b->failed ? GPUMON_E_NOMEM : GPUMON_OK;
}
