/* SPDX-License-Identifier: MIT */
/* model_oom.c — the out-of-memory moment in the run model: at the first sign (an "oom" event: a
 * message the job printed; the figures the monitor inside the job sent; or the card full when a job
 * failed) it keeps what was on the GPU then — the last seconds, who held what, whether the job had
 * reached a steady level, its own growth, the allocator's last figures — and what the framework
 * said of it (its message and log lines read with gpumon_oom_message_parse, the inside monitor's
 * figures, the allocator's snapshot); asked, it gives gpumon_oom_diagnose() all of it with the
 * run's leak verdict. */
#include "model.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AT_LIMIT_SHARE 0.99
#define S_NS 1000000000ull
/* What a framework says within this long of the moment belongs to that out-of-memory; signs closer
   than SAME_SIGN_NS to the previous one are the same episode (a traceback's lines, the monitor's
   report and the message it raised). */
#define NEAR_NS (60 * S_NS)
#define SAME_SIGN_NS (5 * S_NS)
/* A steady level: held for this long within a band (10 %, at least 256 MiB) ... */
#define STEADY_NS (2 * S_NS)
#define STEADY_BAND_MIN (256ull << 20)
/* ... at a level the job had really allocated (a CUDA context alone is about 0.5 GiB). */
#define REAL_LEVEL (1ull << 30)
/* The job's own growth is measured over this long before the moment. */
#define GROWTH_NS (60 * S_NS)
/* The job's processes listed this long after the moment still tell what they held at it. */
#define SETTLE_NS (S_NS / 2)

/* The job's GPU: where its processes hold the most now, else where they peaked; else the fullest
 * GPU. -1 when there is none. */
int gpumon__model_job_dev(const gpumon_model *m)
{
	int best = -1;
	uint64_t most = 0;
	for (unsigned d = 0; d < m->ndev; d++)
		if (m->dev[d].seen && m->dev[d].job_seen && (best < 0 || m->dev[d].job_bytes > most)) {
			best = (int)d;
			most = m->dev[d].job_bytes;
		}
	if (best >= 0 && most == 0) { /* the job has let go already: where it peaked */
		gpumon_peak g, bg = {0};
		for (unsigned d = 0; d < m->ndev; d++)
			if (m->dev[d].job_seen && gpumon_peaks_global(m->dev[d].job_peaks, &g) == GPUMON_OK && g.bytes > bg.bytes) {
				bg = g;
				best = (int)d;
			}
	}
	if (best >= 0)
		return best;
	double share = -1;
	for (unsigned d = 0; d < m->ndev; d++) {
		uint64_t total = gpumon__model_total(m, (int)d);
		if (m->dev[d].have && total && (double)m->dev[d].used / (double)total > share) {
			share = (double)m->dev[d].used / (double)total;
			best = (int)d;
		}
	}
	return best;
}

/* Ring entry k back from the newest (0 = newest). */
static const struct mring *back(const struct mdev *d, unsigned k)
{
	return &d->ring[(d->ring_head + MODEL_RING - 1 - k) % MODEL_RING];
}

/* The device's last seconds before t: the peak within the window, the usual level before it and
 * how long the climb took; about one point a second for the summary. */
static void last_seconds(gpumon_model *m, const struct mdev *d, uint64_t t)
{
	gpumon_oom_input *in = &m->oom.input;
	uint64_t from = t > MODEL_OOM_WINDOW_NS ? t - MODEL_OOM_WINDOW_NS : 0;
	uint64_t from3 = t > 3 * MODEL_OOM_WINDOW_NS ? t - 3 * MODEL_OOM_WINDOW_NS : 0;
	int have_peak = 0;
	uint64_t peak = 0, peak_t = 0;
	unsigned peak_k = 0, oldest = 0;
	for (unsigned k = 0; k < d->ring_n; k++) {
		const struct mring *e = back(d, k);
		if (e->t_ns < from3)
			break;
		oldest = k;
		if (e->t_ns <= t + 100000000ull && e->t_ns >= from && (!have_peak || e->used_max > peak)) {
			peak = e->used_max;
			peak_t = e->t_ns;
			peak_k = k;
			have_peak = 1;
		}
	}
	if (!have_peak)
		return;
	in->known |= GPUMON_OOM_F_USED;
	in->used_bytes = peak;
	/* the usual level: the lowest figure between the start of the window and the peak; the climb
	   starts where memory was last near it */
	uint64_t floor = peak, floor_job = 0;
	for (unsigned k = peak_k; k <= oldest; k++)
		if (back(d, k)->used_min < floor) {
			floor = back(d, k)->used_min;
			floor_job = back(d, k)->job;
		}
	uint64_t near = floor + (peak - floor) / 10;
	unsigned rise = peak_k;
	while (rise < oldest && back(d, rise)->used_min > near)
		rise++;
	/* a usual level needs the job to have run at it for a while, holding memory it allocated: a job
	   that climbs from its start until it dies, or had not allocated yet, had no transient peak */
	if (rise < oldest && back(d, rise)->t_ns >= back(d, oldest)->t_ns + 1000000000ull &&
	    (!d->job_seen || floor_job >= REAL_LEVEL)) {
		in->known |= GPUMON_OOM_F_FLOOR;
		in->floor_bytes = floor;
		in->rise_seconds = (double)(peak_t - back(d, rise)->t_ns) / 1e9;
	}
	/* about one point a second, back from the moment, then oldest first */
	size_t n = 0;
	uint64_t next = t + 100000000ull;
	for (unsigned k = 0; k < d->ring_n && n < 16; k++) {
		const struct mring *e = back(d, k);
		if (e->t_ns > next)
			continue;
		if (e->t_ns < from)
			break;
		m->oom.last[n].t_ns = e->t_ns;
		m->oom.last[n].used_bytes = e->used_max;
		n++;
		next = e->t_ns > 1000000000ull ? e->t_ns - 1000000000ull : 0;
	}
	for (size_t a = 0, b = n ? n - 1 : 0; a < b; a++, b--) {
		uint64_t tt = m->oom.last[a].t_ns, uu = m->oom.last[a].used_bytes;
		m->oom.last[a] = m->oom.last[b];
		m->oom.last[b].t_ns = tt;
		m->oom.last[b].used_bytes = uu;
	}
	m->oom.nlast = n;
}

static int cmp_holder(const void *a, const void *b)
{
	const gpumon_holder *x = a, *y = b;
	return x->used_bytes < y->used_bytes ? 1 : x->used_bytes > y->used_bytes ? -1 : (x->pid > y->pid) - (x->pid < y->pid);
}

/* Who held what on dev at the moment: every process listed then. */
static void holders(gpumon_model *m, unsigned dev)
{
	gpumon_oom_input *in = &m->oom.input;
	gpumon_holder all[64];
	size_t n = 0;
	int job_listed = 0;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->dev != dev || !p->present)
			continue;
		uint64_t used = p->used_known ? p->used : 0;
		if (p->job) {
			in->job_bytes += used;
			job_listed = 1;
		} else {
			in->others_bytes += used;
			if (p->used_known && (in->top_other_pid < 0 || used > in->top_other_bytes)) {
				in->top_other_pid = p->pid;
				in->top_other_bytes = used;
			}
		}
		if (n < sizeof all / sizeof all[0]) {
			gpumon_holder *h = &all[n++];
			memset(h, 0, sizeof *h);
			h->dev = dev;
			h->pid = p->pid;
			h->used_known = p->used_known;
			h->used_bytes = used;
			h->job = p->job;
			h->rank = p->rank.launcher[0] ? p->rank.rank : -1;
			memcpy(h->user, p->user, sizeof h->user);
			memcpy(h->command, p->command, sizeof h->command);
		}
	}
	qsort(all, n, sizeof all[0], cmp_holder);
	m->oom.nholders = n < 16 ? n : 16;
	memcpy(m->oom.holders, all, m->oom.nholders * sizeof all[0]);
	in->known |= GPUMON_OOM_F_OTHERS | (job_listed ? GPUMON_OOM_F_JOB : 0);
}

/* Processes are listed every 100 ms or so, after the device's figure: the listing before the moment
 * may miss the job's last allocations. A job process listed within SETTLE_NS after it held at least
 * what that listing says (its allocator stopped at the out-of-memory; what it freed since is
 * unwinding), so its holder takes the higher figure. Other processes keep theirs: they may have
 * grown since. */
void gpumon__model_oom_settle(gpumon_model *m, const struct mproc *p, uint64_t t)
{
	if (!m->oom_have || m->oom.dev < 0 || p->dev != (unsigned)m->oom.dev || !p->job || !p->used_known ||
	    t < m->oom.t_ns || t > m->oom.t_ns + SETTLE_NS)
		return;
	gpumon_oom_input *in = &m->oom.input;
	for (size_t i = 0; i < m->oom.nholders; i++) {
		gpumon_holder *h = &m->oom.holders[i];
		if (h->pid != p->pid || (h->used_known && h->used_bytes >= p->used))
			continue;
		in->job_bytes += p->used - (h->used_known ? h->used_bytes : 0);
		h->used_known = 1;
		h->used_bytes = p->used;
		qsort(m->oom.holders, m->oom.nholders, sizeof m->oom.holders[0], cmp_holder);
		return;
	}
}

/* The framework's last figures on dev: the source holding the most. */
static void framework(gpumon_model *m, unsigned dev)
{
	gpumon_oom_input *in = &m->oom.input;
	const struct mseg *best = NULL;
	for (size_t i = 0; i < m->nsegs; i++) {
		const struct mseg *s = &m->segs[i];
		if (!s->allocated_known || !s->reserved_known)
			continue;
		int d = gpumon__model_map_device(m, s->pid, s->device);
		if (d >= 0 && (unsigned)d != dev)
			continue;
		if (!best || s->reserved > best->reserved)
			best = s;
	}
	if (!best)
		return;
	in->known |= GPUMON_OOM_F_FRAMEWORK;
	in->allocated_bytes = best->allocated;
	in->reserved_bytes = best->reserved;
}

/* A job process at its --limit: the job ran out against that ceiling, not against the card; what
 * other processes hold does not matter to it. */
static void at_the_limit(gpumon_model *m, unsigned dev)
{
	gpumon_oom_input *in = &m->oom.input;
	uint64_t limit = m->cfg.limit_bytes, top = 0;
	if (!limit)
		return;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->dev == dev && p->present && p->used_known && p->job && p->used > top)
			top = p->used;
	}
	if ((double)top < 0.99 * (double)limit)
		return;
	in->known = (in->known | GPUMON_OOM_F_TOTAL | GPUMON_OOM_F_USED | GPUMON_OOM_F_LIMIT) &
		    ~(unsigned)(GPUMON_OOM_F_OTHERS | GPUMON_OOM_F_FLOOR);
	in->total_bytes = limit;
	in->used_bytes = top;
	in->limit_bytes = limit;
}

/* Whether a job process is one the model knows as the job's (every process when it knows none:
 * a recording of the whole machine). */
static int of_job(const gpumon_model *m, unsigned pid)
{
	return (!m->njob && !m->meta.job_pid) || gpumon__model_is_job(m, pid);
}

/* Whether the job had held a level before the moment, and which: from its framework figures when
 * they count steps (two steps done — the first allocates the optimizer's state — and its usual
 * peak then), else from its NVML figure on dev (a stretch of STEADY_NS within a band, at a level it
 * really allocated). Unknown (no bit) when neither tells: the ring does not reach back to the
 * job's start. */
static void steadiness(gpumon_model *m, const struct mdev *d, unsigned dev, uint64_t t)
{
	gpumon_oom_input *in = &m->oom.input;
	const struct mseg *best = NULL;
	for (size_t i = 0; i < m->nsegs; i++) {
		const struct mseg *s = &m->segs[i];
		int sd = gpumon__model_map_device(m, s->pid, s->device);
		if (!of_job(m, s->pid) || s->last_step < 0 || s->first_t > t || (sd >= 0 && (unsigned)sd != dev))
			continue;
		if (!best || s->last_t > best->last_t)
			best = s;
	}
	if (best) {
		in->known |= GPUMON_OOM_F_STEADY;
		in->steady = best->nsteps >= 2;
		if (in->steady)
			in->steady_bytes = best->max_allocated_known ? best->max_allocated : best->allocated_peak;
		return;
	}
	if (!d->job_seen || !d->ring_n)
		return;
	int found = 0;
	uint64_t ref = 0, from = 0, level = 0, oldest = UINT64_MAX;
	for (unsigned k = d->ring_n; k-- > 0;) { /* oldest first */
		const struct mring *e = back(d, k);
		if (e->t_ns > t)
			break;
		if (e->t_ns < oldest)
			oldest = e->t_ns;
		if (e->t_ns < d->job_first_t)
			continue;
		uint64_t band = ref / 10 > STEADY_BAND_MIN ? ref / 10 : STEADY_BAND_MIN;
		if (!from || e->job + band < ref || e->job > ref + band) {
			ref = level = e->job;
			from = e->t_ns;
			continue;
		}
		if (e->job > level)
			level = e->job;
		if (e->t_ns >= from + STEADY_NS && ref >= REAL_LEVEL) {
			found = 1;
			in->steady_bytes = level;
		}
	}
	if (found || d->ring_n < MODEL_RING || oldest <= d->job_first_t) { /* the ring reaches back to its start */
		in->known |= GPUMON_OOM_F_STEADY;
		in->steady = found;
	}
}

/* The job's own rise on dev over the last GROWTH_NS (since it first held memory there): from its
 * lowest figure then to its figure at the moment. */
static void growth(gpumon_model *m, const struct mdev *d, uint64_t t)
{
	gpumon_oom_input *in = &m->oom.input;
	if (!d->job_seen)
		return;
	uint64_t lo = UINT64_MAX, lo_t = 0, from = t > GROWTH_NS ? t - GROWTH_NS : 0;
	if (from < d->job_first_t)
		from = d->job_first_t;
	for (unsigned k = 0; k < d->ring_n; k++) {
		const struct mring *e = back(d, k);
		if (e->t_ns < from)
			break;
		if (e->t_ns <= t && e->job < lo) { /* the newest at the lowest: where the climb began */
			lo = e->job;
			lo_t = e->t_ns;
		}
	}
	if (lo == UINT64_MAX || d->job_bytes <= lo)
		return;
	in->known |= GPUMON_OOM_F_GROWTH;
	in->growth_bytes = d->job_bytes - lo;
	in->growth_seconds = (double)(t - lo_t) / 1e9;
}

/* Takes the bits of src that dst lacks (framework, pid, device and the other processes likewise). */
static void merge_figures(gpumon_oom_figures *dst, const gpumon_oom_figures *src)
{
	static const struct {
		unsigned bit;
		size_t off;
	} f[] = {
		{GPUMON_FIG_REQUEST, offsetof(gpumon_oom_figures, request_bytes)},
		{GPUMON_FIG_CAPACITY, offsetof(gpumon_oom_figures, capacity_bytes)},
		{GPUMON_FIG_FREE, offsetof(gpumon_oom_figures, free_bytes)},
		{GPUMON_FIG_PROCESS, offsetof(gpumon_oom_figures, process_bytes)},
		{GPUMON_FIG_ALLOCATED, offsetof(gpumon_oom_figures, allocated_bytes)},
		{GPUMON_FIG_RESERVED, offsetof(gpumon_oom_figures, reserved_bytes)},
		{GPUMON_FIG_CAP, offsetof(gpumon_oom_figures, cap_bytes)},
		{GPUMON_FIG_LARGEST_FREE, offsetof(gpumon_oom_figures, largest_free_bytes)},
		{GPUMON_FIG_PEAK, offsetof(gpumon_oom_figures, peak_bytes)},
	};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		if ((src->known & f[i].bit) && !(dst->known & f[i].bit)) {
			memcpy((char *)dst + f[i].off, (const char *)src + f[i].off, sizeof(uint64_t));
			dst->known |= f[i].bit;
		}
	if ((src->known & GPUMON_FIG_DEVICE) && !(dst->known & GPUMON_FIG_DEVICE)) {
		dst->device = src->device;
		dst->known |= GPUMON_FIG_DEVICE;
	}
	if (!dst->framework[0])
		memcpy(dst->framework, src->framework, sizeof dst->framework);
	if (!dst->pid)
		dst->pid = src->pid;
	if (!dst->nothers && src->nothers) {
		dst->nothers = src->nothers;
		memcpy(dst->others, src->others, sizeof dst->others);
	}
}

/* Whether something said at t belongs to the out-of-memory (the first one's, or the one to come). */
static int near_moment(const gpumon_model *m, uint64_t t)
{
	return !m->oom_have || (t + NEAR_NS >= m->oom.t_ns && t <= m->oom.t_ns + NEAR_NS);
}

/* The GPU of the moment: the one the framework names, when it maps to one of the model's, else the
 * job's. */
static int moment_dev(const gpumon_model *m, const gpumon_oom_figures *f, int rank)
{
	/* a distributed worker's message names its rank ("[rank3]:"): that rank's GPU, when it has one
	   (the device index the message gives is its host's, and hosts of merged recordings share pids) */
	int rd = rank >= 0 ? gpumon__model_rank_dev(m, rank) : -1;
	if (rd >= 0)
		return rd;
	if (f && (f->known & GPUMON_FIG_DEVICE)) {
		int d = gpumon__model_map_device(m, f->pid, f->device);
		if (d >= 0)
			return d;
	}
	return gpumon__model_job_dev(m);
}

/* Whether f is the message of the out-of-memory the monitor inside the job reported last (its
 * request, as printed, within 1 % of the report's exact one, within NEAR_NS after it): the job
 * prints it once the snapshot is taken, which may take seconds. */
static int reported_before(const gpumon_model *m, uint64_t t_ns, const gpumon_oom_figures *f)
{
	if (!f || !(f->known & GPUMON_FIG_REQUEST) || !m->report_t || t_ns < m->report_t || t_ns > m->report_t + NEAR_NS)
		return 0;
	double a = (double)f->request_bytes, b = (double)m->report_request;
	return a <= b * 1.01 && a >= b * 0.99;
}

/* A sign at t_ns: the first one is the moment; f: the figures it came with (NULL none). */
static void sign(gpumon_model *m, uint64_t t_ns, const gpumon_oom_figures *f, int rank)
{
	if (!m->oom_have || (t_ns > m->oom_last_sign_t + SAME_SIGN_NS && !reported_before(m, t_ns, f)))
		m->oom.signs++;
	if (t_ns > m->oom_last_sign_t)
		m->oom_last_sign_t = t_ns;
	if (m->oom_have)
		return;
	int dev = moment_dev(m, f, rank);
	m->oom_have = 1;
	gpumon__model_ranks_at_oom(m);
	m->oom.t_ns = t_ns;
	m->oom.dev = dev;
	gpumon_oom_input *in = &m->oom.input;
	memset(in, 0, sizeof *in);
	in->top_other_pid = -1;
	in->rise_seconds = -1;
	if (dev < 0)
		return;
	const struct mdev *d = &m->dev[dev];
	uint64_t total = gpumon__model_total(m, dev);
	if (total) {
		in->known |= GPUMON_OOM_F_TOTAL;
		in->total_bytes = total;
	}
	last_seconds(m, d, t_ns);
	holders(m, (unsigned)dev);
	if (d->job_seen && t_ns > d->job_first_t + MODEL_EARLY_NS) {
		in->known |= GPUMON_OOM_F_EARLY;
		in->early_bytes = d->job_early;
	}
	framework(m, (unsigned)dev);
	steadiness(m, d, (unsigned)dev, t_ns);
	growth(m, d, t_ns);
	at_the_limit(m, (unsigned)dev);
}

void gpumon__model_oom_signal(gpumon_model *m, uint64_t t_ns, const char *text)
{
	gpumon_oom_figures f;
	int got = 0;
	/* in a traceback the exception's own line comes last: the message quoted is the last one */
	if (text && text[0]) {
		snprintf(m->oom.message, sizeof m->oom.message, "%s", text);
		got = gpumon_oom_message_parse(text, strlen(text), &f) > 0;
		if (got && near_moment(m, t_ns))
			merge_figures(&m->fig_msg, &f);
	}
	sign(m, t_ns, got ? &f : NULL, gpumon__model_rank_in_text(text));
}

int gpumon__model_oom_event(gpumon_model *m, uint64_t t_ns, const char *kind, const char *text)
{
	gpumon_oom_figures f;
	size_t len = text ? strlen(text) : 0;
	if (!strcmp(kind, GPUMON_EVENT_OOM_DETAIL)) {
		if (len && gpumon_oom_message_parse(text, len, &f) > 0 && near_moment(m, t_ns)) {
			merge_figures(&m->fig_detail, &f);
			m->fig_detail_t = t_ns;
		}
		return 1;
	}
	if (!strcmp(kind, GPUMON_EVENT_OOM_FIGURES)) {
		if (!len || gpumon_oom_figures_decode(text, len, &f) != GPUMON_OK) {
			gpumon_model_damage(m, "an out-of-memory report from inside the job could not be read");
			return 1;
		}
		if (near_moment(m, t_ns)) {
			merge_figures(&m->fig_inside, &f);
			if (f.pid && !m->oom.pid)
				m->oom.pid = f.pid;
		}
		sign(m, t_ns, &f, -1);
		if (f.known & GPUMON_FIG_REQUEST) {
			m->report_t = t_ns;
			m->report_request = f.request_bytes;
		}
		return 1;
	}
	if (!strcmp(kind, GPUMON_EVENT_SNAPSHOT)) {
		gpumon_alloc_snapshot s;
		if (!len || gpumon_snapshot_decode(text, len, &s) != GPUMON_OK) {
			gpumon_model_damage(m, "an allocator snapshot from inside the job could not be read");
			return 1;
		}
		/* the one taken at the moment: the first near it */
		if (!m->snap_have && near_moment(m, t_ns)) {
			m->snap = s;
			m->snap_t = t_ns;
			m->snap_have = 1;
		}
		return 1;
	}
	return 0;
}

void gpumon__model_oom_finish(gpumon_model *m)
{
	/* a job that failed with its GPU full in its last seconds, with no message seen: out of memory */
	int dev = gpumon__model_job_dev(m);
	if (!m->oom_have && m->exit_status > 0 && (m->njob || m->meta.job_pid) && dev >= 0) {
		const struct mdev *d = &m->dev[dev];
		uint64_t total = gpumon__model_total(m, dev);
		uint64_t from = m->end_t > MODEL_OOM_WINDOW_NS ? m->end_t - MODEL_OOM_WINDOW_NS : 0;
		for (unsigned k = 0; total && k < d->ring_n; k++) {
			const struct mring *e = back(d, k);
			if (e->t_ns < from)
				break;
			if ((double)e->used_max >= AT_LIMIT_SHARE * (double)total) {
				gpumon__model_oom_signal(m, e->t_ns, NULL);
				break;
			}
		}
	}
}

/* The rank that ran out, in a distributed job: the process's when it is known; else the one the
 * message's "[rankN]:" prefix names (and then its process, when that rank has one on the GPU); else
 * the only worker among the job's holders on the GPU. */
static void which_rank(const gpumon_model *m, gpumon_model_oom *out)
{
	out->rank = out->pid && out->dev >= 0 ? gpumon__model_rank_of(m, (unsigned)out->dev, out->pid) : -1;
	if (out->rank >= 0)
		return;
	int named = gpumon__model_rank_in_text(out->message);
	if (named >= 0) {
		out->rank = named;
		if (!out->pid)
			out->pid = gpumon__model_pid_of_rank(m, out->dev, named);
		return;
	}
	if (out->pid)
		return;
	int only = -1, workers = 0;
	for (size_t i = 0; i < out->nholders; i++)
		if (out->holders[i].job && out->holders[i].rank >= 0)
			only = out->holders[i].rank, workers++;
	if (workers == 1) {
		out->rank = only;
		out->pid = gpumon__model_pid_of_rank(m, out->dev, only);
	}
}

int gpumon_model_oom_get(const gpumon_model *m, gpumon_model_oom *out)
{
	if (!m || !out)
		return GPUMON_E_INVAL;
	if (!m->oom_have)
		return GPUMON_E_NOT_FOUND;
	*out = m->oom;
	gpumon_oom_input *in = &out->input;
	/* what the framework said: the monitor inside the job first (exact bytes), then its message
	   (rounded as printed), then its log's lines */
	gpumon_oom_figures f = m->fig_inside;
	merge_figures(&f, &m->fig_msg);
	if (m->fig_detail.known && m->fig_detail_t + NEAR_NS >= m->oom.t_ns && m->fig_detail_t <= m->oom.t_ns + NEAR_NS)
		merge_figures(&f, &m->fig_detail);
	if (f.known) {
		in->known |= GPUMON_OOM_F_FIGURES;
		in->figures = f;
	}
	if (m->snap_have) {
		in->known |= GPUMON_OOM_F_SNAPSHOT;
		in->snapshot = m->snap;
	}
	if (!out->pid)
		out->pid = f.pid ? f.pid : m->snap_have ? m->snap.pid : 0;
	which_rank(m, out);
	/* NVML's figure of the process that ran out (else the job's largest on the GPU) */
	const gpumon_holder *h = NULL;
	for (size_t i = 0; i < out->nholders; i++)
		if (out->pid ? out->holders[i].pid == out->pid : out->holders[i].job) {
			h = &out->holders[i];
			break;
		}
	if (h && h->used_known) {
		in->known |= GPUMON_OOM_F_PROCESS;
		in->process_bytes = h->used_bytes;
	}
	/* diagnosed with the leak verdict as it stands (at the end, the whole run's) on the GPU that ran
	   out: in a job on several GPUs (a distributed one, one rank a GPU) a leak on another GPU did not
	   fill this one. The verdicts come in the rule's order: the first on this GPU is its verdict. */
	gpumon_verdict v;
	int have = 0;
	if (out->dev >= 0) {
		size_t n = gpumon_model_verdicts(m, NULL, 0);
		gpumon_verdict *all = n ? malloc(n * sizeof *all) : NULL;
		n = all ? gpumon_model_verdicts(m, all, n) : 0;
		for (size_t i = 0; i < n && !have; i++)
			if (all[i].dev == out->dev) {
				v = all[i];
				have = 1;
			}
		free(all);
	}
	if (!have)
		have = gpumon_model_verdict(m, &v) == GPUMON_OK;
	if (have) {
		in->known |= GPUMON_OOM_F_LEAK;
		in->leak = v.leak;
	}
	gpumon_oom_diagnose(in, &out->diagnosis);
	return GPUMON_OK;
}
