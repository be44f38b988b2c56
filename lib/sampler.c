/* SPDX-License-Identifier: MIT */
/* sampler.c — the background sampler: one thread per GPU reads it at absolute deadlines, keeps
 * every raw sample of the last seconds in a ring (the flight recorder), and queues change-only
 * records with the exact min/max of used memory between them. A GPU whose driver call hangs stalls
 * only its own thread: a watchdog reports it stale, and the thread is left, never waited for, until
 * the call returns. The queue is bounded: a slow consumer costs dropped records, counted, never a
 * late sample. A process record's process is a copy of its own, made by the sampling thread and
 * freed by the poll after the one that handed it out. */
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define DEFAULT_PERIOD_US 10000u
#define MIN_PERIOD_US 1000u
#define DEFAULT_SLOW_PERIOD_US 1000000u
#define DEFAULT_PROCESS_PERIOD_US 100000u
#define DEFAULT_HEARTBEAT_MS 1000u
#define DEFAULT_QUEUE_RECORDS 8192u
#define DEFAULT_SLOW_FIELDS                                                                           \
	(GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY | GPUMON_F_TEMPERATURE | GPUMON_F_POWER |            \
	 GPUMON_F_CLOCK_SM | GPUMON_F_CLOCK_MEM)
#define MEMORY_FIELDS (GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED)
/* A driver call on a GPU still running after this: the GPU is stale (the bound gpumon_create
   opens under too) */
#define DEADLINE_NS GPUMON__DRIVER_DEADLINE_NS
/* destroy leaves a thread whose driver call has lasted this long to finish alone */
#define STOP_GRACE_NS 200000000ull

/* Raw samples of one device, oldest overwritten first. */
struct ring {
	gpumon_device_sample *buf;
	size_t cap, next, len;
};

struct devstate {
	gpumon_sampler *s;
	unsigned dev;
	pthread_t thread;
	int started;                  /* the thread was created */
	_Atomic uint64_t call_ns;     /* a driver call began then; 0: none (cleared under s->lock) */
	/* under s->lock */
	int stale;                    /* reported stale; its call has not returned yet */
	int exited;                   /* the thread is done with the sampler */
	struct ring ring;
	/* the thread's own */
	int lost;
	int have_emitted;
	gpumon_device_sample emitted; /* the last sample queued as a record */
	gpumon_device_sample slow;    /* the latest slow-field read */
	/* the interval since the last record */
	uint64_t used_min, used_max, used_max_t;
	unsigned n;
	gpumon_process *procs; /* the previous process list, by pid */
	size_t nprocs;
	/* texts of its "stale" and "answering" events: they live as long as the sampler */
	char stale_text[112], answer_text[48];
};

struct gpumon_sampler {
	gpumon *g;
	gpumon_sampler_config cfg;
	struct devstate *ds;
	unsigned nds;
	pthread_t watchdog;
	int watchdog_started;

	/* everything below: queue, rings, counters, stopping */
	pthread_mutex_t lock;
	pthread_cond_t queued; /* a record was queued, or the sampler stops (CLOCK_MONOTONIC) */
	pthread_cond_t wake;   /* the sampler stops: sleeps end (CLOCK_MONOTONIC) */
	pthread_cond_t idle;   /* a thread ended, or a poll returned, while stopping */
	gpumon_record *q;
	size_t qcap, qhead, qlen;
	int evfd;                 /* gpumon_sampler_fd's eventfd, -1 until asked for: readable while qlen > 0 */
	int signalled;            /* evfd has been written since the queue was last emptied */
	/* processes of the records the last poll handed out: theirs until the next poll (at most qcap) */
	gpumon_process **handed;
	size_t nhanded;
	char msg[160]; /* the last failure of a call of the consumer (only it writes and reads this) */
	gpumon_sampler_stats st;
	_Atomic int stopping; /* written under lock; a GPU thread's short sleep reads it without */
	unsigned pollers; /* consumers inside gpumon_sampler_poll */
	unsigned refs;    /* the owner, and each GPU thread still running: the last frees */
	struct gpumon__xid_watch *xid; /* XID errors, asked by the GPU threads (sources/nvml_events.c); NULL: none */
};

static struct timespec ns_to_ts(uint64_t ns)
{
	struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	return t;
}

/* ---- queue (s->lock held) ---------------------------------------------------------------------- */

/* Makes gpumon_sampler_fd's descriptor readable when records are queued (once: it stays so until a
 * poll empties the queue). */
static void notify_locked(gpumon_sampler *s)
{
	if (s->evfd < 0 || s->qlen == 0 || s->signalled)
		return;
	uint64_t one = 1;
	ssize_t w = write(s->evfd, &one, sizeof one);
	s->signalled = w == (ssize_t)sizeof one;
}

/* Queues a record; counts a drop when the queue is full. Returns 1 when queued, 0 when dropped. */
static int push_locked(gpumon_sampler *s, const gpumon_record *r)
{
	if (s->qlen == s->qcap) {
		s->st.dropped++;
		return 0;
	}
	s->q[(s->qhead + s->qlen) % s->qcap] = *r;
	s->qlen++;
	/* a GPU's sample and its processes come in one tick: the descriptor says so once the tick is
	   done (notify_locked at its end), so that a screen woken by it sees them together */
	if (r->kind != GPUMON_REC_DEVICE && r->kind != GPUMON_REC_PROCESS && r->kind != GPUMON_REC_PROCESS_GONE)
		notify_locked(s);
	s->st.records++;
	pthread_cond_signal(&s->queued);
	return 1;
}

static void push_event_locked(gpumon_sampler *s, const struct devstate *d, uint64_t t, const char *kind,
			      const char *text)
{
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = GPUMON_REC_EVENT;
	r.dev = d->dev;
	r.t_ns = t;
	r.event_kind = kind;
	r.event_text = text;
	push_locked(s, &r);
}

void gpumon__sampler_event(gpumon_sampler *s, unsigned dev, uint64_t t_ns, const char *kind, const char *text)
{
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = GPUMON_REC_EVENT;
	r.dev = dev;
	r.t_ns = t_ns;
	r.event_kind = kind;
	r.event_text = text;
	pthread_mutex_lock(&s->lock);
	push_locked(s, &r);
	pthread_mutex_unlock(&s->lock);
}

static void push_lost_locked(gpumon_sampler *s, struct devstate *d, uint64_t t)
{
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = GPUMON_REC_LOST;
	r.dev = d->dev;
	r.t_ns = t;
	d->lost = 1;
	push_locked(s, &r);
}

/* ---- driver calls under a deadline ------------------------------------------------------------- */

static void call_begin(struct devstate *d)
{
	atomic_store(&d->call_ns, gpumon__now_ns());
}

/* The call of d has returned (s->lock held): a GPU reported stale answers again. Returns 1 when the
 * call took the deadline or longer: its answer is dropped (when it was read is not known well
 * enough to place it among the other samples). */
static int call_end_locked(gpumon_sampler *s, struct devstate *d)
{
	uint64_t now = gpumon__now_ns(), began = atomic_load(&d->call_ns);
	atomic_store(&d->call_ns, 0);
	if (d->stale) {
		d->stale = 0;
		push_event_locked(s, d, now, GPUMON_EVENT_ANSWERING, d->answer_text);
	}
	return now - began >= DEADLINE_NS;
}

/* The watchdog: reports each GPU whose call has passed the deadline, once per call, waking at the
 * next deadline; it never calls the driver, so a hung GPU cannot stall it. */
static void *watchdog_main(void *arg)
{
	gpumon_sampler *s = arg;
	pthread_setname_np(pthread_self(), "gpumon-watchdog"); /* top -H, perf: whose thread */
	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		uint64_t now = gpumon__now_ns(), next = now + DEADLINE_NS;
		for (unsigned i = 0; i < s->nds; i++) {
			struct devstate *d = &s->ds[i];
			uint64_t began = atomic_load(&d->call_ns);
			if (!began || d->stale || d->exited)
				continue;
			if (now - began >= DEADLINE_NS) {
				d->stale = 1;
				push_event_locked(s, d, now, GPUMON_EVENT_STALE, d->stale_text);
			} else if (began + DEADLINE_NS < next) {
				next = began + DEADLINE_NS;
			}
		}
		struct timespec t = ns_to_ts(next);
		pthread_cond_timedwait(&s->wake, &s->lock, &t);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* ---- device records ---------------------------------------------------------------------------- */

static int memory_differs(const gpumon_device_sample *a, const gpumon_device_sample *b)
{
	return (a->present & MEMORY_FIELDS) != (b->present & MEMORY_FIELDS) ||
	       a->memory_used_bytes != b->memory_used_bytes || a->memory_free_bytes != b->memory_free_bytes ||
	       a->memory_reserved_bytes != b->memory_reserved_bytes ||
	       a->memory_total_bytes != b->memory_total_bytes;
}

static int slow_differs(const gpumon_device_sample *a, const gpumon_device_sample *b, unsigned fields)
{
	return (a->present & fields) != (b->present & fields) || a->util_gpu_pct != b->util_gpu_pct ||
	       a->util_memory_pct != b->util_memory_pct || a->temperature_c != b->temperature_c ||
	       a->power_mw != b->power_mw || a->energy_mj != b->energy_mj ||
	       a->clock_sm_mhz != b->clock_sm_mhz || a->clock_mem_mhz != b->clock_mem_mhz;
}

/* Copies the slow fields of `from` into `to`. */
static void merge_slow(gpumon_device_sample *to, const gpumon_device_sample *from, unsigned fields)
{
	to->util_gpu_pct = from->util_gpu_pct;
	to->util_memory_pct = from->util_memory_pct;
	to->temperature_c = from->temperature_c;
	to->power_mw = from->power_mw;
	to->energy_mj = from->energy_mj;
	to->clock_sm_mhz = from->clock_sm_mhz;
	to->clock_mem_mhz = from->clock_mem_mhz;
	to->present = (to->present & ~fields) | (from->present & fields);
}

static void ring_put_locked(struct ring *r, const gpumon_device_sample *x)
{
	r->buf[r->next] = *x;
	r->next = (r->next + 1) % r->cap;
	if (r->len < r->cap)
		r->len++;
}

/* Emits a device record from the interval so far, and starts a new interval. */
static void emit_device(gpumon_sampler *s, struct devstate *d, const gpumon_device_sample *x)
{
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = GPUMON_REC_DEVICE;
	r.dev = d->dev;
	r.t_ns = x->t_ns;
	r.sample = *x;
	r.used_min_bytes = d->used_min;
	r.used_max_bytes = d->used_max;
	r.used_max_t_ns = d->used_max_t;
	r.interval_samples = d->n;
	pthread_mutex_lock(&s->lock);
	push_locked(s, &r);
	pthread_mutex_unlock(&s->lock);
	d->emitted = *x;
	d->have_emitted = 1;
	d->n = 0;
}

/* One tick of one device: the memory read, the slow fields when due, the record when due. A read
 * that failed, or answered after the deadline, is a missing sample. */
static void sample_device(gpumon_sampler *s, struct devstate *d, int slow_due)
{
	gpumon_device_sample x;
	unsigned want = MEMORY_FIELDS | (slow_due ? s->cfg.slow_fields : 0);
	call_begin(d);
	int st = gpumon_device_sample_read(s->g, d->dev, want, &x);
	pthread_mutex_lock(&s->lock);
	int late = call_end_locked(s, d);
	if (st == GPUMON_E_LOST) {
		push_lost_locked(s, d, gpumon__now_ns());
		pthread_mutex_unlock(&s->lock);
		return;
	}
	if (!late) {
		s->st.samples++;
		if (st != GPUMON_OK)
			s->st.errors++;
		else if (d->ring.cap)
			ring_put_locked(&d->ring, &x);
	}
	pthread_mutex_unlock(&s->lock);
	if (st != GPUMON_OK || late)
		return;

	if (slow_due)
		d->slow = x;
	int changed = !d->have_emitted || memory_differs(&x, &d->emitted) ||
		      (slow_due && slow_differs(&x, &d->emitted, s->cfg.slow_fields));
	merge_slow(&x, &d->slow, s->cfg.slow_fields);

	uint64_t used = x.memory_used_bytes;
	if (d->n == 0 || used < d->used_min)
		d->used_min = used;
	if (d->n == 0 || used > d->used_max) {
		d->used_max = used;
		d->used_max_t = x.t_ns;
	}
	d->n++;
	uint64_t heartbeat_ns = (uint64_t)s->cfg.heartbeat_ms * 1000000u;
	if (changed || x.t_ns - d->emitted.t_ns >= heartbeat_ns)
		emit_device(s, d, &x);
}

/* ---- process records ---------------------------------------------------------------------------- */

static int proc_by_pid(const void *a, const void *b)
{
	unsigned x = ((const gpumon_process *)a)->pid, y = ((const gpumon_process *)b)->pid;
	return (x > y) - (x < y);
}

/* Queues a process record with a copy of p (s->lock held): the list it comes from is freed at the
 * next listing, long before a slow consumer polls. A copy that cannot be made is a dropped record. */
static void emit_process_locked(gpumon_sampler *s, struct devstate *d, int kind, const gpumon_process *p,
				uint64_t now)
{
	gpumon_process *copy = malloc(sizeof *copy);
	if (!copy) {
		s->st.dropped++;
		return;
	}
	*copy = *p;
	gpumon_record r;
	memset(&r, 0, sizeof r);
	r.kind = kind;
	r.dev = d->dev;
	r.t_ns = now;
	r.process = copy;
	if (!push_locked(s, &r))
		free(copy);
}

/* A record when its memory changed, and when what /proc tells of it did: a process first listed
 * before /proc could say who it is (its pid not yet there, its environment not yet readable) whose
 * memory then holds still would otherwise keep its unknown user, command and rank for good. */
static int process_changed(const gpumon_process *a, const gpumon_process *b)
{
	unsigned k = GPUMON_PROC_USED_KNOWN | GPUMON_PROC_FOREIGN | GPUMON_PROC_USER_KNOWN | GPUMON_PROC_CMDLINE_KNOWN |
		     GPUMON_PROC_RANK_KNOWN;
	return (a->flags & k) != (b->flags & k) || a->used_bytes != b->used_bytes ||
	       ((a->flags & GPUMON_PROC_RANK_KNOWN) && a->rank.rank != b->rank.rank);
}

/* Lists the device's processes and queues what appeared, changed or left since the last list. A
 * list that failed or came after the deadline changes nothing. */
static void sample_processes(gpumon_sampler *s, struct devstate *d)
{
	gpumon_process *list = NULL;
	size_t n = 0;
	call_begin(d);
	int st = gpumon_process_list(s->g, d->dev, &list, &n);
	uint64_t now = gpumon__now_ns();
	pthread_mutex_lock(&s->lock);
	int late = call_end_locked(s, d);
	if (st == GPUMON_E_LOST)
		push_lost_locked(s, d, now);
	else if (st != GPUMON_OK)
		s->st.errors += st != GPUMON_E_NOT_SUPPORTED;
	pthread_mutex_unlock(&s->lock);
	if (st != GPUMON_OK || late) {
		gpumon_free(list);
		return;
	}
	if (n > 1)
		qsort(list, n, sizeof *list, proc_by_pid);
	/* the whole difference in one hold of the lock: a consumer never takes half of a list (a screen
	   drawn from the first ten of forty processes would show, and select, the wrong largest) */
	pthread_mutex_lock(&s->lock);
	size_t i = 0, j = 0;
	while (i < n || j < d->nprocs) {
		if (j == d->nprocs || (i < n && list[i].pid < d->procs[j].pid)) {
			emit_process_locked(s, d, GPUMON_REC_PROCESS, &list[i++], now);
		} else if (i == n || d->procs[j].pid < list[i].pid) {
			emit_process_locked(s, d, GPUMON_REC_PROCESS_GONE, &d->procs[j++], now);
		} else {
			if (process_changed(&list[i], &d->procs[j]))
				emit_process_locked(s, d, GPUMON_REC_PROCESS, &list[i], now);
			i++;
			j++;
		}
	}
	pthread_mutex_unlock(&s->lock);
	gpumon_free(d->procs);
	d->procs = list;
	d->nprocs = n;
}

/* ---- the threads -------------------------------------------------------------------------------- */

/* Waits shorter than this sleep on the clock alone (a stop is seen when they end); longer ones wait
 * on the condition variable, which a stop ends at once. */
#define SHORT_WAIT_NS 20000000u

/*
 * Sleeps until the absolute deadline (CLOCK_MONOTONIC) or a stop; returns 1 when stopping. At the
 * periods that sample memory (1 to 20 ms) this is the thread's one wake-up per sample: a plain
 * clock_nanosleep costs less than a condition variable's wait there (no mutex to take back on each
 * wake-up, nor to read the stop flag after it), and a stop waits at most 20 ms for it (destroy
 * waits up to 0.2 s). now: the clock a moment ago.
 */
static int wait_until(gpumon_sampler *s, uint64_t deadline_ns, uint64_t now)
{
	struct timespec t = ns_to_ts(deadline_ns);
	if (deadline_ns > now && deadline_ns - now <= SHORT_WAIT_NS) {
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
			;
		return atomic_load(&s->stopping);
	}
	pthread_mutex_lock(&s->lock);
	while (!s->stopping && pthread_cond_timedwait(&s->wake, &s->lock, &t) != ETIMEDOUT)
		;
	int stopping = s->stopping;
	pthread_mutex_unlock(&s->lock);
	return stopping;
}

static void free_sampler(gpumon_sampler *s);

/* A thread is done with s: drops its reference (the last one frees s). d may be freed on return. */
static void thread_done(gpumon_sampler *s, struct devstate *d)
{
	pthread_mutex_lock(&s->lock);
	d->exited = 1;
	int last = --s->refs == 0;
	pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	if (last)
		free_sampler(s);
}

/* One GPU's thread: its own schedule, so that a call that hangs on it delays no other GPU. */
static void *device_main(void *arg)
{
	struct devstate *d = arg;
	gpumon_sampler *s = d->s;
	gpumon *g = s->g;
	char name[16];
	snprintf(name, sizeof name, "gpumon-gpu%u", d->dev);
	pthread_setname_np(pthread_self(), name);
	uint64_t period = (uint64_t)s->cfg.period_us * 1000u;
	uint64_t slow_period = (uint64_t)s->cfg.slow_period_us * 1000u;
	uint64_t proc_period = s->cfg.process_period_us == UINT32_MAX ? 0 : (uint64_t)s->cfg.process_period_us * 1000u;
	uint64_t next = gpumon__now_ns(), next_slow = next, next_proc = next;
	while (!d->lost) {
		uint64_t woke = gpumon__now_ns();
		int slow_due = woke >= next_slow, proc_due = proc_period && woke >= next_proc;
		sample_device(s, d, slow_due);
		if (proc_due && !d->lost)
			sample_processes(s, d);
		gpumon__xid_poll(s->xid, woke); /* once a second, by whichever GPU's thread comes first */
		if (slow_due)
			next_slow += slow_period * ((woke - next_slow) / slow_period + 1);
		if (proc_due)
			next_proc += proc_period * ((woke - next_proc) / proc_period + 1);

		uint64_t done = gpumon__now_ns();
		next += period;
		pthread_mutex_lock(&s->lock);
		notify_locked(s); /* this tick's records are all queued */
		s->st.busy_ns += done - woke;
		if (done >= next) { /* sampling took longer than a period: skip what was missed */
			uint64_t missed = (done - next) / period + 1;
			s->st.overruns += missed;
			next += missed * period;
		}
		pthread_mutex_unlock(&s->lock);
		if (wait_until(s, next, done))
			break;
	}
	thread_done(s, d);
	gpumon__release(g); /* after s: the handle may go with it */
	return NULL;
}

/* ---- public ---------------------------------------------------------------------------------- */

static void free_sampler(gpumon_sampler *s)
{
	gpumon__xid_free(s->xid); /* the last thread that could ask it has ended */
	for (unsigned i = 0; s->ds && i < s->nds; i++) {
		free(s->ds[i].ring.buf);
		gpumon_free(s->ds[i].procs);
	}
	free(s->ds);
	for (size_t k = 0; s->q && k < s->qlen; k++)
		free((gpumon_process *)s->q[(s->qhead + k) % s->qcap].process);
	for (size_t k = 0; k < s->nhanded; k++)
		free(s->handed[k]);
	free(s->handed);
	free(s->q);
	if (s->evfd >= 0)
		close(s->evfd);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->queued);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->idle);
	free(s);
}

/* Fills in defaults and checks the configuration; returns a status with a message on g. */
static int configure(gpumon *g, const gpumon_sampler_config *in, gpumon_sampler_config *c)
{
	if (gpumon__config_take(c, sizeof *c, in))
		return gpumon__seterr(g, GPUMON_E_INVAL, "sampler configuration: size %u is not that of any version of "
				      "gpumon_sampler_config (set it to sizeof the struct)", in->size);
	c->period_us = c->period_us ? c->period_us : DEFAULT_PERIOD_US;
	c->slow_period_us = c->slow_period_us ? c->slow_period_us : DEFAULT_SLOW_PERIOD_US;
	c->process_period_us = c->process_period_us ? c->process_period_us : DEFAULT_PROCESS_PERIOD_US;
	c->heartbeat_ms = c->heartbeat_ms ? c->heartbeat_ms : DEFAULT_HEARTBEAT_MS;
	c->queue_records = c->queue_records ? c->queue_records : DEFAULT_QUEUE_RECORDS;
	c->slow_fields = c->slow_fields ? c->slow_fields : DEFAULT_SLOW_FIELDS;
	if (c->period_us < MIN_PERIOD_US)
		return gpumon__seterr(g, GPUMON_E_INVAL, "sampling period %u us is below the 1 ms minimum", c->period_us);
	if (c->slow_fields & ~(unsigned)GPUMON_F_ALL)
		return gpumon__seterr(g, GPUMON_E_INVAL, "unknown field bits 0x%x", c->slow_fields);
	if (c->ring_seconds > 3600 || c->queue_records > (1u << 22))
		return gpumon__seterr(g, GPUMON_E_INVAL, "ring of %u s or queue of %u records is too large",
				      c->ring_seconds, c->queue_records);
	c->slow_fields &= ~(unsigned)MEMORY_FIELDS;
	unsigned count = gpumon_device_count(g);
	for (unsigned i = 0; c->devices && i < c->ndevices; i++)
		if (c->devices[i] >= count)
			return gpumon__seterr(g, GPUMON_E_INVAL, "no GPU %u to sample (%u GPUs)", c->devices[i], count);
	return GPUMON_OK;
}

/* 1 while stop() waits for the thread of d (s->lock held): it has not ended, and it is not in a
 * driver call that has lasted STOP_GRACE_NS already (one that may never return). */
static int worth_waiting(struct devstate *d, uint64_t now)
{
	if (!d->started || d->exited)
		return 0;
	uint64_t began = atomic_load(&d->call_ns);
	return !began || now - began < STOP_GRACE_NS;
}

/* Stops the threads and drops the owner's reference. Waits for consumers inside poll (they return
 * at once), for the watchdog, and for each GPU thread unless it is in a driver call that has
 * lasted STOP_GRACE_NS: such a thread is left to finish alone (it holds its own references on s
 * and on the handle). */
static void stop(gpumon_sampler *s)
{
	pthread_mutex_lock(&s->lock);
	s->stopping = 1;
	pthread_cond_broadcast(&s->wake);
	pthread_cond_broadcast(&s->queued);
	for (;;) {
		uint64_t now = gpumon__now_ns();
		int wait = s->pollers > 0;
		for (unsigned i = 0; i < s->nds; i++)
			wait |= worth_waiting(&s->ds[i], now);
		if (!wait)
			break;
		/* a thread between calls may begin one, and tells nobody: look again soon */
		struct timespec t = ns_to_ts(now + 10000000u);
		pthread_cond_timedwait(&s->idle, &s->lock, &t);
	}
	int *join = calloc(s->nds ? s->nds : 1, sizeof *join);
	for (unsigned i = 0; i < s->nds; i++)
		if (join)
			join[i] = s->ds[i].exited;
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->nds; i++) {
		if (!s->ds[i].started)
			continue;
		if (join && join[i]) /* done: joining it takes no time */
			pthread_join(s->ds[i].thread, NULL);
		else
			pthread_detach(s->ds[i].thread);
	}
	free(join);
	if (s->watchdog_started)
		pthread_join(s->watchdog, NULL);
	pthread_mutex_lock(&s->lock);
	int last = --s->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (last)
		free_sampler(s);
}

/* Starts the watchdog and one thread per GPU (each with its references); 0 or -1. */
static int start_threads(gpumon_sampler *s)
{
	if (pthread_create(&s->watchdog, NULL, watchdog_main, s) != 0)
		return -1;
	s->watchdog_started = 1;
	for (unsigned i = 0; i < s->nds; i++) {
		struct devstate *d = &s->ds[i];
		gpumon__hold(s->g);
		pthread_mutex_lock(&s->lock);
		s->refs++;
		pthread_mutex_unlock(&s->lock);
		if (pthread_create(&d->thread, NULL, device_main, d) != 0) {
			pthread_mutex_lock(&s->lock);
			s->refs--;
			pthread_mutex_unlock(&s->lock);
			gpumon__release(s->g);
			return -1;
		}
		d->started = 1;
	}
	return 0;
}

/* The sampler's memory and locks, before any thread runs; NULL when out of memory. */
static gpumon_sampler *sampler_new(gpumon *g, const gpumon_sampler_config *c)
{
	gpumon_sampler *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* absolute deadlines on the sampling clock */
	pthread_cond_init(&s->queued, &ca);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->idle, &ca);
	pthread_condattr_destroy(&ca);
	s->g = g;
	s->evfd = -1;
	s->cfg = *c;
	s->cfg.devices = NULL; /* not kept: the caller's array may go away */
	s->refs = 1;
	s->nds = c->devices ? c->ndevices : gpumon_device_count(g);
	/* no flight recorder unless asked: at 1 kHz it is 4.8 MB a GPU, and each sample's write, to
	   memory long out of the cache, was the largest part of a sample's own work (perf) */
	size_t ring_cap = c->ring_seconds ? (size_t)c->ring_seconds * 1000000u / c->period_us + 1 : 0;
	s->qcap = c->queue_records;
	s->q = malloc(s->qcap * sizeof *s->q);
	s->handed = malloc(s->qcap * sizeof *s->handed);
	s->ds = calloc(s->nds ? s->nds : 1, sizeof *s->ds);
	int ok = s->q && s->handed && s->ds;
	for (unsigned i = 0; ok && i < s->nds; i++) {
		struct devstate *d = &s->ds[i];
		d->s = s;
		d->dev = c->devices ? c->devices[i] : i;
		d->ring.cap = ring_cap;
		d->ring.buf = ring_cap ? malloc(ring_cap * sizeof *d->ring.buf) : NULL;
		ok = !ring_cap || d->ring.buf != NULL;
		snprintf(d->stale_text, sizeof d->stale_text,
			 "GPU %u has not answered a driver call for %u s: its samples are missing until it does",
			 d->dev, (unsigned)(DEADLINE_NS / 1000000000u));
		snprintf(d->answer_text, sizeof d->answer_text, "GPU %u answers again", d->dev);
	}
	if (!ok) {
		free_sampler(s);
		return NULL;
	}
	return s;
}

int gpumon_sampler_create(gpumon *g, const gpumon_sampler_config *cfg, gpumon_sampler **out)
{
	if (!g || !out)
		return GPUMON_E_INVAL;
	*out = NULL;
	if (g->open_status != GPUMON_OK)
		return gpumon__seterr(g, GPUMON_E_DRIVER, "gpumon_create failed; nothing to sample");
	gpumon_sampler_config c;
	int st = configure(g, cfg, &c);
	if (st != GPUMON_OK)
		return st;
	gpumon_sampler *s = sampler_new(g, &c);
	if (!s)
		return gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory for the sampler's ring and queue");
	s->st.started_ns = gpumon__now_ns();
	/* XIDs where the driver has events; none (or out of memory) leaves the sampler as it is */
	s->xid = gpumon__xid_start(g, s, c.devices, c.devices ? c.ndevices : s->nds);
	if (start_threads(s) != 0) {
		stop(s);
		return gpumon__seterr(g, GPUMON_E_NOMEM, "cannot start the sampling threads");
	}
	*out = s;
	return GPUMON_OK;
}

/* Sets the message of the consumer's last failure and returns status. */
static int seterr(gpumon_sampler *s, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int seterr(gpumon_sampler *s, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->msg, sizeof s->msg, fmt, ap);
	va_end(ap);
	return status;
}

int gpumon_sampler_poll(gpumon_sampler *s, gpumon_record *buf, size_t cap, size_t *n, int timeout_ms)
{
	if (!s)
		return GPUMON_E_INVAL;
	if (!n || (!buf && cap))
		return seterr(s, GPUMON_E_INVAL, "gpumon_sampler_poll: %s is NULL", !n ? "the count" : "the buffer");
	*n = 0;
	pthread_mutex_lock(&s->lock);
	s->pollers++;
	/* the processes the previous poll handed out: the caller is done with them now */
	for (size_t k = 0; k < s->nhanded; k++)
		free(s->handed[k]);
	s->nhanded = 0;
	if (s->qlen == 0 && timeout_ms != 0) {
		struct timespec dl = ns_to_ts(gpumon__now_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u);
		while (s->qlen == 0 && !s->stopping) {
			int r = timeout_ms < 0 ? pthread_cond_wait(&s->queued, &s->lock)
					       : pthread_cond_timedwait(&s->queued, &s->lock, &dl);
			if (r == ETIMEDOUT)
				break;
		}
	}
	while (*n < cap && s->qlen > 0) {
		buf[(*n)++] = s->q[s->qhead];
		if (s->q[s->qhead].process)
			s->handed[s->nhanded++] = (gpumon_process *)s->q[s->qhead].process;
		s->qhead = (s->qhead + 1) % s->qcap;
		s->qlen--;
	}
	if (s->qlen == 0 && s->evfd >= 0 && s->signalled) {
		uint64_t count;
		ssize_t rd = read(s->evfd, &count, sizeof count); /* not readable until the next tick's records */
		(void)rd;
		s->signalled = 0;
	}
	/* a destroy in another thread waits for this: the lock must outlive the wait */
	if (--s->pollers == 0 && s->stopping)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
	return GPUMON_OK;
}

void gpumon_sampler_stats_get(gpumon_sampler *s, gpumon_sampler_stats *out)
{
	if (!s || !out)
		return;
	pthread_mutex_lock(&s->lock);
	*out = s->st;
	pthread_mutex_unlock(&s->lock);
}

int gpumon_sampler_ring(gpumon_sampler *s, unsigned dev, uint64_t since_ns, gpumon_device_sample **out,
			size_t *n)
{
	if (!s)
		return GPUMON_E_INVAL;
	if (!out || !n)
		return seterr(s, GPUMON_E_INVAL, "gpumon_sampler_ring: %s is NULL", !out ? "the output" : "the count");
	*out = NULL;
	*n = 0;
	struct devstate *d = NULL;
	for (unsigned i = 0; i < s->nds; i++)
		if (s->ds[i].dev == dev)
			d = &s->ds[i];
	if (!d)
		return seterr(s, GPUMON_E_NOT_FOUND, "GPU %u is not sampled: no flight recorder for it", dev);
	if (!d->ring.cap)
		return seterr(s, GPUMON_E_NOT_FOUND, "this sampler keeps no flight recorder (its ring_seconds was 0)");
	pthread_mutex_lock(&s->lock);
	const struct ring *r = &d->ring;
	size_t first = (r->next + r->cap - r->len) % r->cap, keep = 0;
	for (size_t k = 0; k < r->len; k++)
		keep += r->buf[(first + k) % r->cap].t_ns >= since_ns;
	gpumon_device_sample *a = keep ? malloc(keep * sizeof *a) : NULL;
	if (keep && !a) {
		pthread_mutex_unlock(&s->lock);
		return seterr(s, GPUMON_E_NOMEM, "out of memory for %zu samples of GPU %u's flight recorder", keep, dev);
	}
	for (size_t k = 0; k < r->len; k++) {
		const gpumon_device_sample *x = &r->buf[(first + k) % r->cap];
		if (x->t_ns >= since_ns)
			a[(*n)++] = *x;
	}
	pthread_mutex_unlock(&s->lock);
	*out = a;
	return GPUMON_OK;
}

const char *gpumon_sampler_errmsg(const gpumon_sampler *s)
{
	/* the sampling threads report by counters and events; create's failures are on g */
	return s ? s->msg : "";
}

int gpumon_sampler_fd(gpumon_sampler *s)
{
	if (!s)
		return -1;
	pthread_mutex_lock(&s->lock);
	if (s->evfd < 0) {
		/* not written now, though records may be queued: a GPU's round may be half done; every
		   round's end writes it while records wait (notify_locked), within one period */
		s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	}
	int fd = s->evfd;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

void gpumon_sampler_destroy(gpumon_sampler *s)
{
	if (s)
		stop(s);
}
