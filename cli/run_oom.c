/* SPDX-License-Identifier: MIT */
/* run_oom.c — out-of-memory forensics for `gpumon run`: recognises the frameworks' messages,
 * captures the moment (the flight recorder's last seconds, who held what on the GPU), and at the
 * end asks gpumon_oom_diagnose() for the cause. Also keeps what the summary needs besides: the
 * job's NVML figure as a leak series, the job's peak, and the CUDA index -> GPU mapping. */
#include "run_oom.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "run_verdict.h"

#define WINDOW_NS 10000000000ull    /* the flight recorder's seconds looked at */
#define TICK_NS 100000000ull        /* the NVML leak series: one point every 100 ms */
#define KEEP_GONE_NS 60000000000ull /* processes that left are remembered this long */
#define EARLY_NS 5000000000ull      /* "the job's first seconds on the card" */
#define MAX_OOM_EVENTS 100          /* `oom` events recorded; the rest are counted */
#define AT_LIMIT_SHARE 0.99         /* memory "at the limit" at the end */

static const struct {
	const char *text, *framework;
} patterns[] = {
	{"CUDA out of memory", "PyTorch"},
	{"torch.OutOfMemoryError", "PyTorch"},
	{"torch.cuda.OutOfMemoryError", "PyTorch"},
	{"ResourceExhaustedError", "Paddle"},
	{"Out of memory error on GPU", "Paddle"},
	{"RESOURCE_EXHAUSTED: Out of memory", "JAX/XLA"},
	{"OOM when allocating", "TensorFlow"},
	{"cudaErrorMemoryAllocation", "CUDA"},
	{"CUDA_ERROR_OUT_OF_MEMORY", "CUDA"},
};
#define NPATTERNS (sizeof patterns / sizeof patterns[0])

struct holder {             /* a process seen on a GPU, kept a while after it left */
	unsigned dev, pid;
	uint64_t used, first_t, gone_t; /* gone_t 0: still there */
	int used_known;
	char user[32], cmd[120];
};

struct run_oom {
	struct holder *h;
	size_t nh;
	uint64_t *dev_used, *dev_total; /* the last device record of each GPU */
	unsigned char *dev_known;
	uint64_t next_tick;
	gpumon_leak *nvml_leak, *dev_leak; /* the job's NVML figure; the sampled GPUs' used */
	int nvml_alerted;               /* the alert on nvml_leak was given */
	int job_seen;
	uint64_t job_first_t, early_bytes;
	gpumon_peaks *peaks;
	unsigned signs;                 /* out-of-memory signs seen */
	/* the moment: captured at the first sign */
	int have;
	uint64_t t_ns;
	char why[420];
	unsigned dev;
	gpumon_device_sample *ring;
	size_t nring;
	struct holder *mh;              /* the holders then */
	size_t nmh;
	/* the end */
	int diagnosed;
	gpumon_oom_input in;
	gpumon_oom_diagnosis d;
	uint64_t peak_t;
};

static const char *const cause_words[] = {
	[GPUMON_OOM_UNKNOWN] = "unknown", [GPUMON_OOM_LEAK] = "leak",
	[GPUMON_OOM_CO_TENANT] = "co-tenant", [GPUMON_OOM_TRANSIENT_PEAK] = "transient-peak",
	[GPUMON_OOM_PREALLOCATION] = "pre-allocation"};

const char *run_oom_match(const char *line, size_t len)
{
	for (size_t i = 0; i < NPATTERNS; i++)
		if (memmem(line, len, patterns[i].text, strlen(patterns[i].text)))
			return patterns[i].framework;
	return NULL;
}

size_t run_oom_longest(void)
{
	size_t m = 0;
	for (size_t i = 0; i < NPATTERNS; i++)
		if (strlen(patterns[i].text) > m)
			m = strlen(patterns[i].text);
	return m;
}

int run_oom_create(struct run *r)
{
	struct run_oom *o = calloc(1, sizeof *o);
	unsigned n = r->ngpus ? r->ngpus : 1;
	if (!o)
		return -1;
	o->dev_used = calloc(n, sizeof *o->dev_used);
	o->dev_total = calloc(n, sizeof *o->dev_total);
	o->dev_known = calloc(n, 1);
	if (!o->dev_used || !o->dev_total || !o->dev_known ||
	    gpumon_peaks_create(WINDOW_NS, 256, &o->peaks) != GPUMON_OK) {
		r->oom = o;
		run_oom_destroy(r);
		return -1;
	}
	r->oom = o;
	return 0;
}

void run_oom_destroy(struct run *r)
{
	struct run_oom *o = r->oom;
	if (!o)
		return;
	free(o->h);
	free(o->dev_used);
	free(o->dev_total);
	free(o->dev_known);
	gpumon_leak_destroy(o->nvml_leak);
	gpumon_leak_destroy(o->dev_leak);
	gpumon_peaks_destroy(o->peaks);
	free(o->ring);
	free(o->mh);
	free(o);
	r->oom = NULL;
}

/* ---- who held what ------------------------------------------------------------------------------ */

static void forget_old(struct run_oom *o, uint64_t t)
{
	for (size_t i = 0; i < o->nh;)
		if (o->h[i].gone_t && t > o->h[i].gone_t + KEEP_GONE_NS)
			o->h[i] = o->h[--o->nh];
		else
			i++;
}

static void on_process(struct run_oom *o, const gpumon_record *rec)
{
	const gpumon_process *p = &rec->process;
	size_t i;
	for (i = 0; i < o->nh; i++)
		if (o->h[i].dev == rec->dev && o->h[i].pid == p->pid && !o->h[i].gone_t)
			break;
	if (rec->kind == GPUMON_REC_PROCESS_GONE) {
		if (i < o->nh)
			o->h[i].gone_t = rec->t_ns;
		return;
	}
	if (i == o->nh) {
		forget_old(o, rec->t_ns);
		struct holder *n = realloc(o->h, (o->nh + 1) * sizeof *n);
		if (!n)
			return;
		o->h = n;
		i = o->nh++;
		memset(&o->h[i], 0, sizeof o->h[i]);
		o->h[i].dev = rec->dev;
		o->h[i].pid = p->pid;
		o->h[i].first_t = rec->t_ns;
	}
	/* again each time: a pid first listed between fork and exec had gpumon's command line; but
	   not the "[name]" of a process that is exiting */
	if (p->flags & GPUMON_PROC_USER_KNOWN)
		snprintf(o->h[i].user, sizeof o->h[i].user, "%.31s", p->user);
	if ((p->flags & GPUMON_PROC_CMDLINE_KNOWN) && p->cmdline[0] && p->cmdline[0] != '[')
		snprintf(o->h[i].cmd, sizeof o->h[i].cmd, "%.119s", p->cmdline);
	else if ((p->flags & GPUMON_PROC_NAME_KNOWN) && !o->h[i].cmd[0])
		snprintf(o->h[i].cmd, sizeof o->h[i].cmd, "%.119s", p->name);
	else if ((p->flags & GPUMON_PROC_CMDLINE_KNOWN) && !o->h[i].cmd[0])
		snprintf(o->h[i].cmd, sizeof o->h[i].cmd, "%.119s", p->cmdline);
	o->h[i].used_known = !!(p->flags & GPUMON_PROC_USED_KNOWN);
	o->h[i].used = o->h[i].used_known ? p->used_bytes : 0;
}

void run_oom_on_record(struct run *r, const gpumon_record *rec)
{
	struct run_oom *o = r->oom;
	if (!o || rec->dev >= r->ngpus)
		return;
	if (rec->kind == GPUMON_REC_PROCESS || rec->kind == GPUMON_REC_PROCESS_GONE)
		on_process(o, rec);
	else if (rec->kind == GPUMON_REC_DEVICE && (rec->sample.present & GPUMON_F_MEMORY)) {
		o->dev_used[rec->dev] = rec->sample.memory_used_bytes;
		o->dev_total[rec->dev] = rec->sample.memory_total_bytes;
		o->dev_known[rec->dev] = 1;
	}
}

/* ---- the series: NVML leak verdict and the job's peak ---------------------------------------------- */

static void feed(gpumon_leak **l, uint64_t t, uint64_t bytes, uint64_t limit)
{
	if (!*l && gpumon_leak_create(NULL,  l) != GPUMON_OK)
		return;
	(void)limit;
	gpumon_leak_add(*l, -1, t, bytes);
}

/* Whether a process of the job reports its allocator's figures: it is judged on those, not on
 * NVML's. */
static int framework_series(const struct run *r)
{
	for (size_t i = 0; i < r->nfw; i++)
		if (r->fw[i].leak)
			return 1;
	return 0;
}

void run_oom_tick(struct run *r, uint64_t t)
{
	struct run_oom *o = r->oom;
	if (!o || t < o->next_tick)
		return;
	o->next_tick = t + TICK_NS;
	uint64_t job = 0, used = 0, total = 0, job_total = 0;
	int any = 0, job_gpus = 0;
	for (unsigned d = 0; d < r->ngpus; d++) {
		if (!r->gpus[d].sampled)
			continue;
		job += r->gpus[d].job_now;
		if (r->gpus[d].job_now) {
			job_gpus++;
			job_total += o->dev_known[d] ? o->dev_total[d] : 0;
		}
		if (o->dev_known[d]) {
			used += o->dev_used[d];
			total += o->dev_total[d];
			any = 1;
		}
	}
	/* the job's series starts when it first holds memory: the zeros before are not its floor */
	if (job && !o->job_seen) {
		o->job_seen = 1;
		o->job_first_t = t;
	}
	/* out of memory when the job's GPU is full (at --limit when smaller); a job spread over several
	   GPUs (data parallel) is judged on its sum, which reaches their sum of memory when each is full */
	uint64_t limit = run_alloc_ceiling(&r->o->alloc);
	if (job_total && (job_gpus > 1 || !r->o->alloc.limit_bytes || job_total < r->o->alloc.limit_bytes))
		limit = job_total;
	if (o->job_seen) {
		feed(&o->nvml_leak, t, job, limit);
		char text[300];
		if (!o->nvml_alerted && !framework_series(r) &&
		    run_verdict_alert(o->nvml_leak, "the job's memory as NVML lists it", text, sizeof text)) {
			o->nvml_alerted = 1;
			run_leak_alert(r, t, text);
		}
		if (t - o->job_first_t <= EARLY_NS && job > o->early_bytes)
			o->early_bytes = job;
	}
	if (any)
		feed(&o->dev_leak, t, used, total);
}

void run_oom_job_changed(struct run *r, uint64_t t)
{
	uint64_t total = 0, top = 0;
	int64_t owner = -1;
	if (!r->oom)
		return;
	for (size_t i = 0; i < r->nprocs; i++) {
		if (!r->procs[i].job)
			continue;
		total += r->procs[i].used;
		if (r->procs[i].used > top) {
			top = r->procs[i].used;
			owner = r->procs[i].pid;
		}
	}
	gpumon_peaks_add(r->oom->peaks, t, total, owner, -1);
}

/* ---- the moment --------------------------------------------------------------------------------- */

/* The highest used in samples [0, n) and when. */
static size_t ring_peak(const gpumon_device_sample *s, size_t n)
{
	size_t best = 0;
	for (size_t i = 1; i < n; i++)
		if (s[i].memory_used_bytes > s[best].memory_used_bytes)
			best = i;
	return best;
}

/* Whether dev is one of the job's GPUs: one where NVML listed a process of the job, or any
   sampled GPU when it listed none (a job in another PID namespace, a driver without process lists). */
static int job_gpu(const struct run *r, unsigned dev)
{
	int any = 0;
	for (unsigned d = 0; d < r->ngpus; d++)
		any |= r->gpus[d].sampled && (r->gpus[d].job_now || r->gpus[d].job_peak);
	return r->gpus[dev].sampled && (!any || r->gpus[dev].job_now || r->gpus[dev].job_peak);
}

/* The GPU to diagnose: of the job's GPUs, the fullest over the window; its ring becomes the
   moment's. */
static void capture_ring(struct run *r, uint64_t t)
{
	struct run_oom *o = r->oom;
	double best = -1;
	for (unsigned d = 0; d < r->ngpus; d++) {
		gpumon_device_sample *s = NULL;
		size_t n = 0;
		if (!job_gpu(r, d))
			continue;
		uint64_t since = t > WINDOW_NS ? t - WINDOW_NS : 0;
		if (gpumon_sampler_ring(r->smp, d, since, &s, &n) != GPUMON_OK)
			continue;
		while (n && s[n - 1].t_ns > t + TICK_NS) /* what came after the moment */
			n--;
		size_t k = n ? ring_peak(s, n) : 0;
		double share = n && s[k].memory_total_bytes ? (double)s[k].memory_used_bytes / (double)s[k].memory_total_bytes : 0;
		if (n && share > best) {
			best = share;
			free(o->ring);
			o->ring = s;
			o->nring = n;
			o->dev = d;
		} else {
			free(s);
		}
	}
}

/* The command line of a live pid from /proc, over what the first listing said (a process may be
   listed between fork and exec); unchanged when it cannot be read. */
static void fresh_command(struct holder *h)
{
	char buf[sizeof h->cmd];
	if (cli_read_cmdline(h->pid, buf, sizeof buf) > 0)
		memcpy(h->cmd, buf, sizeof buf);
}

static void capture_holders(struct run_oom *o, uint64_t t)
{
	uint64_t since = o->nring ? o->ring[ring_peak(o->ring, o->nring)].t_ns : t;
	free(o->mh);
	o->mh = calloc(o->nh ? o->nh : 1, sizeof *o->mh);
	o->nmh = 0;
	for (size_t i = 0; o->mh && i < o->nh; i++)
		if (o->h[i].dev == o->dev && o->h[i].first_t <= t && (!o->h[i].gone_t || o->h[i].gone_t >= since)) {
			o->mh[o->nmh] = o->h[i];
			if (!o->h[i].gone_t)
				fresh_command(&o->mh[o->nmh]);
			o->nmh++;
		}
}

void run_oom_signal(struct run *r, uint64_t t, const char *framework, const char *text)
{
	struct run_oom *o = r->oom;
	if (!o)
		return;
	if (o->signs++ < MAX_OOM_EVENTS)
		run_event(r, t, "oom", "%s%s%.300s", framework ? framework : "", framework ? ": " : "", text);
	/* the summary quotes the last message: in a traceback, the exception's own line comes last */
	if (!o->have || framework)
		snprintf(o->why, sizeof o->why, "%s%s%.300s", framework ? framework : "",
			 framework ? " message on the job's stderr: " : "", text);
	if (o->have)
		return;
	o->have = 1;
	o->t_ns = t;
	capture_ring(r, t);
	capture_holders(o, t);
}

/* ---- the diagnosis -------------------------------------------------------------------------------- */

/* The framework process to take figures from: mapped to the GPU diagnosed, the largest reserved. */
static const struct fw_acc *fw_on(const struct run *r, unsigned dev)
{
	const struct fw_acc *best = NULL;
	for (size_t i = 0; i < r->nfw; i++) {
		const struct fw_acc *f = &r->fw[i];
		unsigned d;
		char why[8];
		if (!f->last_allocated_known && !f->last_reserved_known && !f->leak)
			continue;
		if (f->device >= 0 && run_oom_map_device(r, f->device, &d, why, sizeof why) == 0 && d != dev)
			continue;
		if (!best || f->last_reserved > best->last_reserved)
			best = f;
	}
	return best;
}

/* The leak verdict to tell: the framework's when it has one, else the NVML series'. */
static const gpumon_leak *leak_of(const struct run *r, const struct fw_acc *f, const char **series)
{
	gpumon_leak_result v;
	if (f && f->leak) {
		gpumon_leak_result_get(f->leak, &v);
		if (v.verdict != GPUMON_LEAK_INSUFFICIENT_DATA) {
			*series = "framework";
			return f->leak;
		}
	}
	*series = "NVML";
	return r->oom->nvml_leak;
}

static void usual_level(const struct run *r, gpumon_oom_input *in, uint64_t *peak_t)
{
	const struct run_oom *o = r->oom;
	size_t k = ring_peak(o->ring, o->nring);
	*peak_t = o->ring[k].t_ns;
	in->known |= GPUMON_OOM_F_USED | GPUMON_OOM_F_TOTAL;
	in->used_bytes = o->ring[k].memory_used_bytes;
	in->total_bytes = o->ring[k].memory_total_bytes;
	uint64_t floor = in->used_bytes;
	size_t first = 0;
	while (first < k && o->ring[first].t_ns < r->start_ns)
		first++;
	for (size_t i = first; i <= k; i++)
		if (o->ring[i].memory_used_bytes < floor)
			floor = o->ring[i].memory_used_bytes;
	/* the climb starts where memory was last near its floor */
	uint64_t near = floor + (in->used_bytes - floor) / 10;
	size_t rise = k;
	while (rise > first && o->ring[rise].memory_used_bytes > near)
		rise--;
	/* a usual level needs the job to have run at it for a while: a job that climbs from its start
	   until it dies did not fit, it had no transient peak */
	if (first < k && o->ring[rise].t_ns >= o->ring[first].t_ns + 1000000000ull) {
		in->known |= GPUMON_OOM_F_FLOOR;
		in->floor_bytes = floor;
		in->rise_seconds = (double)(o->ring[k].t_ns - o->ring[rise].t_ns) / 1e9;
	}
}

static void gather(const struct run *r, gpumon_oom_input *in, uint64_t *peak_t)
{
	const struct run_oom *o = r->oom;
	memset(in, 0, sizeof *in);
	in->top_other_pid = -1;
	in->rise_seconds = -1;
	*peak_t = o->t_ns;
	if (o->nring)
		usual_level(r, in, peak_t);
	else if (o->dev < r->ngpus && o->dev_known[o->dev]) {
		in->known |= GPUMON_OOM_F_TOTAL;
		in->total_bytes = o->dev_total[o->dev];
	}
	int job_listed = 0;
	for (size_t i = 0; i < o->nmh; i++) {
		const struct holder *h = &o->mh[i];
		if (run_job_has(r, h->pid)) {
			in->job_bytes += h->used;
			job_listed = 1;
		} else {
			in->others_bytes += h->used;
			if (in->top_other_pid < 0 || h->used > in->top_other_bytes) {
				in->top_other_pid = h->pid;
				in->top_other_bytes = h->used;
			}
		}
	}
	in->known |= GPUMON_OOM_F_OTHERS | (job_listed ? GPUMON_OOM_F_JOB : 0);
	if (o->job_seen && o->t_ns > o->job_first_t + EARLY_NS) {
		in->known |= GPUMON_OOM_F_EARLY;
		in->early_bytes = o->early_bytes;
	}
	const struct fw_acc *f = fw_on(r, o->dev);
	if (f && f->last_allocated_known && f->last_reserved_known) {
		in->known |= GPUMON_OOM_F_FRAMEWORK;
		in->allocated_bytes = f->last_allocated;
		in->reserved_bytes = f->last_reserved;
	}
	const char *series;
	const gpumon_leak *l = leak_of(r, f, &series);
	if (l) {
		in->known |= GPUMON_OOM_F_LEAK;
		gpumon_leak_result_get(l, &in->leak);
	}
}

void run_oom_finish(struct run *r)
{
	struct run_oom *o = r->oom;
	if (!o || r->status == 0)
		return;
	for (unsigned d = 0; !o->have && d < r->ngpus; d++) {
		gpumon_device_sample *s = NULL;
		size_t n = 0;
		if (!job_gpu(r, d) || gpumon_sampler_ring(r->smp, d, r->end_ns > WINDOW_NS ? r->end_ns - WINDOW_NS : 0,
							  &s, &n) != GPUMON_OK)
			continue;
		size_t k = n ? ring_peak(s, n) : 0;
		if (n && s[k].memory_total_bytes &&
		    (double)s[k].memory_used_bytes >= AT_LIMIT_SHARE * (double)s[k].memory_total_bytes) {
			char a[32], b[32], text[200];
			snprintf(text, sizeof text, "memory at the limit: GPU %u used %s of %s before the job ended", d,
				 cli_format_bytes(a, sizeof a, s[k].memory_used_bytes),
				 cli_format_bytes(b, sizeof b, s[k].memory_total_bytes));
			run_oom_signal(r, s[k].t_ns, NULL, text);
		}
		free(s);
	}
	if (!o->have)
		return;
	gather(r, &o->in, &o->peak_t);
	gpumon_oom_diagnose(&o->in, &o->d);
	o->diagnosed = 1;
	run_event(r, r->end_ns, "diagnosis", "%s: %s", cause_words[o->d.cause], "");
}

/* ---- the summary ------------------------------------------------------------------------------------ */

static double secs(const struct run *r, uint64_t t)
{
	return t > r->start_ns ? (double)(t - r->start_ns) / 1e9 : 0;
}

/* A command for one row of a table: control characters (a newline in python -c) as blanks. */
static const char *one_line(const char *cmd, char *buf, size_t len)
{
	size_t i;
	for (i = 0; cmd[i] && i + 1 < len; i++)
		buf[i] = (unsigned char)cmd[i] < 0x20 || cmd[i] == 0x7f ? ' ' : cmd[i];
	buf[i] = 0;
	return buf;
}

static void print_holders(FILE *f, const struct run *r)
{
	const struct run_oom *o = r->oom;
	char a[32], cmd[sizeof o->mh->cmd];
	if (!o->nmh) {
		fprintf(f, "    no process was listed on GPU %u then\n", o->dev);
		return;
	}
	fprintf(f, "    %8s  %-12s %9s  %-3s  %s\n", "pid", "user", "GiB", "job", "command");
	for (size_t i = 0; i < o->nmh; i++) {
		const struct holder *h = &o->mh[i];
		if (h->used_known)
			snprintf(a, sizeof a, "%.2f", (double)h->used / (1024.0 * 1024 * 1024));
		else
			snprintf(a, sizeof a, "n/a");
		fprintf(f, "    %8u  %-12.12s %9s  %-3s  %.60s%s\n", h->pid, h->user[0] ? h->user : "?", a,
			run_job_has(r, h->pid) ? "yes" : "no", h->cmd[0] ? one_line(h->cmd, cmd, sizeof cmd) : "?",
			strlen(h->cmd) > 60 ? "..." : "");
	}
}

/* Used memory at 1 s steps before the peak: the highest of each second. */
static void print_last_seconds(FILE *f, const struct run *r)
{
	const struct run_oom *o = r->oom;
	char a[32];
	if (!o->nring)
		return;
	uint64_t end = o->ring[o->nring - 1].t_ns;
	fprintf(f, "    GPU %u used, highest of each second before the last sample:", o->dev);
	int shown = 0;
	for (int sec = 9; sec >= 0; sec--) {
		uint64_t hi = 0;
		int any = 0;
		for (size_t i = 0; i < o->nring; i++) {
			uint64_t back = end - o->ring[i].t_ns;
			if (back >= (uint64_t)sec * 1000000000ull && back < (uint64_t)(sec + 1) * 1000000000ull) {
				hi = any && hi > o->ring[i].memory_used_bytes ? hi : o->ring[i].memory_used_bytes;
				any = 1;
			}
		}
		if (any)
			fprintf(f, "%s %s%d s: %s", shown++ ? "," : "", sec ? "-" : "", sec, cli_format_bytes(a, sizeof a, hi));
	}
	fprintf(f, "\n");
}

static void print_peak(FILE *f, const struct run *r)
{
	gpumon_peak p;
	char a[32], cmd[sizeof r->oom->h->cmd];
	if (gpumon_peaks_global(r->oom->peaks, &p) != GPUMON_OK || !p.bytes)
		return;
	fprintf(f, "  job peak (its processes together, NVML): %s at %.2f s", cli_format_bytes(a, sizeof a, p.bytes),
		secs(r, p.t_ns));
	if (p.owner_pid >= 0) {
		fprintf(f, ", largest process pid %lld", (long long)p.owner_pid);
		for (size_t i = 0; i < r->oom->nh; i++)
			if (r->oom->h[i].pid == (unsigned)p.owner_pid && r->oom->h[i].cmd[0]) {
				fprintf(f, " (%.60s)", one_line(r->oom->h[i].cmd, cmd, sizeof cmd));
				break;
			}
	}
	fprintf(f, "\n");
}

void run_oom_print(FILE *f, const struct run *r)
{
	const struct run_oom *o = r->oom;
	if (!o)
		return;
	print_peak(f, r);
	int fw_series = framework_series(r);
	if (!fw_series && o->nvml_leak)
		run_verdict_print(f, o->nvml_leak, "job, NVML", "the job's memory as NVML lists it (its processes together, read every 100 ms)");
	else if (!fw_series && o->dev_leak)
		run_verdict_print(f, o->dev_leak, "GPU, NVML", "the GPUs' used memory (every process on them, read every 100 ms)");
	if (!o->have)
		return;
	fprintf(f, "  out of memory at %.2f s: %s\n", secs(r, o->t_ns), o->why);
	if (o->signs > 1)
		fprintf(f, "    (%u out-of-memory signs in all)\n", o->signs);
	if (!o->diagnosed) {
		fprintf(f, "    the job exited with status 0: it recovered, no forensics\n");
		return;
	}
	fprintf(f, "  diagnosis: %s: %s\n", cause_words[o->d.cause], "");
	gpumon_device_info info;
	if (gpumon_device_info_get(r->g, o->dev, &info) == GPUMON_OK)
		fprintf(f, "    who held GPU %u %s at %.2f s:\n", o->dev, info.uuid, secs(r, o->t_ns));
	print_holders(f, r);
	print_last_seconds(f, r);
}

/* ---- CUDA's device index -> NVML's ------------------------------------------------------------------- */

int run_oom_map_device(const struct run *r, int cuda_dev, unsigned *dev, char *why, size_t whylen)
{
	if (cuda_dev < 0) {
		snprintf(why, whylen, "the framework did not say its device");
		return -1;
	}
	if (!r->cvd_set) {
		if ((unsigned)cuda_dev >= r->ngpus) {
			snprintf(why, whylen, "device %d: there are %u GPUs", cuda_dev, r->ngpus);
			return -1;
		}
		*dev = (unsigned)cuda_dev;
		return 0;
	}
	const char *p = r->cvd;
	for (int i = 0; i < cuda_dev && p; i++) {
		p = strchr(p, ',');
		p = p ? p + 1 : NULL;
	}
	if (!p || !*p) {
		snprintf(why, whylen, "device %d is not in CUDA_VISIBLE_DEVICES=%.60s", cuda_dev, r->cvd);
		return -1;
	}
	char entry[128];
	size_t n = strcspn(p, ",");
	snprintf(entry, sizeof entry, "%.*s", (int)(n < sizeof entry ? n : sizeof entry - 1), p);
	if (!strncmp(entry, "MIG-", 4)) {
		snprintf(why, whylen, "device %d is a MIG instance (%.60s)", cuda_dev, entry);
		return -1;
	}
	if (gpumon_device_find(r->g, entry, dev) != GPUMON_OK) {
		snprintf(why, whylen, "device %d (%.60s in CUDA_VISIBLE_DEVICES) names no GPU", cuda_dev, entry);
		return -1;
	}
	return 0;
}
