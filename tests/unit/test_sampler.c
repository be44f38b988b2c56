/* SPDX-License-Identifier: MIT */
/* test_sampler.c — the background sampler against the fake NVML: change-only records with exact
 * min/max, heartbeats, process arrivals/changes/departures, a lost GPU, the flight recorder, a
 * full queue (drops counted), the absolute schedule, prompt stop and bad configurations. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>


#define GIB (1ULL << 30)
#define MS 1000000ULL

static void test_records(void)
{
	gpumon *g = open_fake("gpu 0 total=80GiB used=1GiB util=10 power=100000\n"
			    "gpu 1 total=80GiB used=3GiB\n"
			    "at 0.10 gpu 0 used=2GiB\n"
			    "at 0.20 gpu 0 used=8GiB\n"  /* a 30 ms spike */
			    "at 0.23 gpu 0 used=2GiB\n"
			    "at 0.12 proc 0 7001 used=1GiB\n"
			    "at 0.25 proc 0 7001 used=2GiB\n"
			    "at 0.35 proc 0 7001 gone\n"
			    "at 0.40 lost 1\n", 0);
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 2000, .process_period_us = 20000, .heartbeat_ms = 100,
				   .ring_seconds = 60};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "sampler starts");
	size_t n = 0;
	gpumon_record *r = collect_records(s, 600, &n);
	gpumon_sampler_stats st;
	gpumon_sampler_stats_get(s, &st);

	int dev0 = 0, lost1 = 0, after_lost1 = 0, saw_spike = 0, spike_max = 0, proc_new = 0, proc_chg = 0,
	    proc_gone = 0, first_ok = 0;
	uint64_t last_t[2] = {0, 0}, t0 = r && n ? r[0].t_ns : 0;
	int ordered = 1, heartbeat_gap_ok = 1;
	for (size_t i = 0; i < n; i++) {
		const gpumon_record *x = &r[i];
		if (x->kind == GPUMON_REC_DEVICE) {
			if (x->dev == 0)
				dev0++;
			if (last_t[x->dev] && x->t_ns < last_t[x->dev])
				ordered = 0;
			if (last_t[x->dev] && x->t_ns - last_t[x->dev] > 150 * MS)
				heartbeat_gap_ok = 0;
			if (!last_t[x->dev] && x->dev == 0 && x->sample.memory_used_bytes == GIB &&
			    (x->sample.present & GPUMON_F_POWER) && x->sample.power_mw == 100000)
				first_ok = 1;
			last_t[x->dev] = x->t_ns;
			if (x->dev == 0 && x->sample.memory_used_bytes == 8 * GIB)
				saw_spike = 1;
			if (x->dev == 0 && x->used_max_bytes == 8 * GIB && x->used_min_bytes <= 8 * GIB)
				spike_max = 1;
			if (x->dev == 1 && lost1)
				after_lost1++;
			if (x->used_min_bytes > x->sample.memory_used_bytes ||
			    x->used_max_bytes < x->sample.memory_used_bytes || x->interval_samples == 0)
				ordered = 0;
		} else if (x->kind == GPUMON_REC_LOST) {
			lost1 += x->dev == 1;
		} else if (x->process && x->process->pid == 7001) {
			if (x->kind == GPUMON_REC_PROCESS && x->process->used_bytes == GIB)
				proc_new++;
			if (x->kind == GPUMON_REC_PROCESS && x->process->used_bytes == 2 * GIB)
				proc_chg++;
			if (x->kind == GPUMON_REC_PROCESS_GONE)
				proc_gone++;
		}
	}
	ok(first_ok, "the first record of GPU 0 holds memory and the slow fields");
	ok(ordered, "records of a device in time order, min <= value <= max");
	ok(saw_spike, "the 30 ms spike to 8 GiB is recorded");
	ok(spike_max, "and its exact maximum");
	ok(heartbeat_gap_ok, "no gap above the 100 ms heartbeat (plus slack)");
	ok(dev0 >= 6 && dev0 < 40, "GPU 0: change + heartbeat records only (%d in 0.6 s at 2 ms)", dev0);
	is_int(proc_new, 1, "process 7001 appeared once");
	is_int(proc_chg, 1, "its change to 2 GiB recorded once");
	is_int(proc_gone, 1, "its departure recorded once");
	is_int(lost1, 1, "GPU 1 lost: one record");
	is_int(after_lost1, 0, "no record of GPU 1 after it was lost");
	is_int(st.dropped, 0, "nothing dropped");
	ok(st.samples > 200, "samples taken: %llu", (unsigned long long)st.samples);
	gpumon_device_sample *ring = NULL;
	size_t rn = 0;
	is_int(gpumon_sampler_ring(s, 0, t0, &ring, &rn), GPUMON_OK, "flight recorder readable");
	int ring_ordered = rn > 100;
	for (size_t i = 1; i < rn; i++)
		ring_ordered &= ring[i].t_ns > ring[i - 1].t_ns;
	ok(ring_ordered, "ring holds every raw sample in order (%zu)", rn);
	/* absolute deadlines: every period since the start is either a sample of GPU 0 or counted as
	   missed, whatever the scheduler did in between */
	gpumon_sampler_stats_get(s, &st);
	uint64_t ticks = rn ? (ring[rn - 1].t_ns - st.started_ns) / (2 * MS) + 1 : 1000;
	ok(rn + st.overruns + 2 + ticks / 20 >= ticks && rn <= ticks + 2, "one sample per period: %zu samples + %llu missed for %llu periods",
	   rn, (unsigned long long)st.overruns, (unsigned long long)ticks);
	int ring_spike = 0;
	for (size_t i = 0; i < rn; i++)
		ring_spike += ring[i].memory_used_bytes == 8 * GIB;
	ok(ring_spike >= 1, "the spike is in the ring (%d samples)", ring_spike);
	free(ring);
	is_int(gpumon_sampler_ring(s, 5, 0, &ring, &rn), GPUMON_E_NOT_FOUND, "ring of an unsampled GPU");
	free(r);
	gpumon_sampler_destroy(s);
	gpumon_destroy(g);
}

static void test_queue_full_and_stop(void)
{
	gpumon *g = open_fake("gpu 0 total=80GiB used=1GiB\n", 0);
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 1000, .heartbeat_ms = 1, .queue_records = 4};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "sampler with a 4-record queue");
	sleep_ms(100);
	gpumon_sampler_stats st;
	gpumon_sampler_stats_get(s, &st);
	ok(st.dropped > 0, "a full queue drops records and counts them (%llu)", (unsigned long long)st.dropped);
	ok(st.samples > 30, "sampling went on regardless (%llu samples)", (unsigned long long)st.samples);
	gpumon_record r[8];
	size_t n = 0;
	gpumon_sampler_poll(s, r, 8, &n, 0);
	is_int(n, 4, "the queue holds its 4 records");
	ok(n == 4 && r[0].t_ns < r[3].t_ns, "oldest first");
	gpumon_sampler_destroy(s);
	gpumon_sampler_destroy(NULL);

	c = (gpumon_sampler_config){.size = sizeof c, .period_us = 2000000};
	gpumon_sampler_create(g, &c, &s);
	sleep_ms(20);
	uint64_t t = now_ns();
	gpumon_sampler_destroy(s);
	ok(now_ns() - t < 500 * MS, "stop does not wait out a 2 s period");
	gpumon_destroy(g);
}

/* A consumer waiting for ever in poll while another thread destroys the sampler: the wait ends,
 * and destroy must not free the queue's lock under the waiter. That is what ThreadSanitizer
 * (make test-tsan) checks here; a plain build sees the wait end. */
struct waiter {
	gpumon_sampler *s;
	atomic_int entered, returned;
	int status;
};

static void *wait_forever(void *arg)
{
	struct waiter *w = arg;
	gpumon_record r[4];
	size_t n = 0;
	gpumon_sampler_poll(w->s, r, 4, &n, 0); /* the first sample, taken at once */
	atomic_store(&w->entered, 1);
	w->status = gpumon_sampler_poll(w->s, r, 4, &n, -1);
	atomic_store(&w->returned, 1);
	return NULL;
}

static void test_destroy_while_polling(void)
{
	gpumon *g = open_fake("gpu 0 total=80GiB used=1GiB\n", 0);
	int returned = 0, status_ok = 0;
	for (int i = 0; i < 5; i++) {
		/* nothing new for a minute: the waiter sits in poll(-1) */
		gpumon_sampler_config c = {.size = sizeof c, .period_us = 60000000, .heartbeat_ms = 60000,
					   .process_period_us = UINT32_MAX};
		struct waiter w = {.s = NULL};
		gpumon_sampler_create(g, &c, &w.s);
		sleep_ms(20);
		pthread_t t;
		pthread_create(&t, NULL, wait_forever, &w);
		while (!atomic_load(&w.entered))
			sleep_ms(1);
		sleep_ms(30); /* into the wait */
		gpumon_sampler_destroy(w.s);
		uint64_t until = now_ns() + 2000 * MS;
		while (!atomic_load(&w.returned) && now_ns() < until)
			sleep_ms(1);
		if (!atomic_load(&w.returned))
			break; /* the waiter is stuck: joining it would hang the test */
		returned += 1;
		pthread_join(t, NULL);
		status_ok += w.status == GPUMON_OK;
	}
	is_int(returned, 5, "destroy ends the wait of a poll(-1) in another thread (5 of 5)");
	is_int(status_ok, 5, "that poll returns 0");
	gpumon_destroy(g);
}

static void test_bad_config(void)
{
	gpumon *g = open_fake("gpu 0 total=80GiB\ngpu 1 total=80GiB\n", 0);
	gpumon_sampler *s = (gpumon_sampler *)1;
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 500};
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_E_INVAL, "period below 1 ms refused");
	ok(s == NULL && strstr(gpumon_errmsg(g), "1 ms"), "message: %s", gpumon_errmsg(g));
	unsigned devs[] = {1, 5};
	c = (gpumon_sampler_config){.size = sizeof c, .devices = devs, .ndevices = 2};
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_E_INVAL, "unknown GPU refused");
	ok(strstr(gpumon_errmsg(g), "GPU 5") != NULL, "message names it: %s", gpumon_errmsg(g));
	c = (gpumon_sampler_config){.size = sizeof c, .devices = devs, .ndevices = 1, .period_us = 1000};
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "only GPU 1");
	gpumon_record r[16];
	size_t n = 0;
	gpumon_sampler_poll(s, r, 16, &n, 500);
	ok(n >= 1 && r[0].dev == 1, "its records name GPU 1");
	gpumon_device_sample *ring;
	size_t rn;
	is_int(gpumon_sampler_ring(s, 0, 0, &ring, &rn), GPUMON_E_NOT_FOUND, "GPU 0 not sampled");
	gpumon_sampler_destroy(s);
	is_int(gpumon_sampler_create(NULL, NULL, &s), GPUMON_E_INVAL, "NULL handle");
	gpumon_destroy(g);
}

/* A sampler of one GPU with one process (pid 7001), sampling both every period_us; *g its handle. */
static gpumon_sampler *one_process_sampler(gpumon **g, unsigned period_us)
{
	*g = open_fake("gpu 0 total=80GiB used=2GiB\n"
		       "proc 0 7001 used=1GiB\n", 0);
	gpumon_sampler_config c = {.size = sizeof c, .period_us = period_us, .process_period_us = period_us};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(*g, &c, &s), GPUMON_OK, "sampler starts");
	return s;
}

/* The descriptor is readable once a tick's records are queued (the GPU's sample and its processes
 * together), and not after a poll took them all. */
static void test_fd(void)
{
	gpumon *g;
	gpumon_sampler *s = one_process_sampler(&g, 100000);
	int fd = gpumon_sampler_fd(s);
	ok(fd >= 0, "a descriptor");
	is_int(gpumon_sampler_fd(s), fd, "the same one each time");
	struct pollfd p = {.fd = fd, .events = POLLIN};
	is_int(poll(&p, 1, 3000), 1, "readable once the first tick is queued");
	gpumon_record r[64];
	size_t n = 0, dev = 0, procs = 0;
	gpumon_sampler_poll(s, r, 64, &n, 0);
	for (size_t i = 0; i < n; i++) {
		dev += r[i].kind == GPUMON_REC_DEVICE;
		procs += r[i].kind == GPUMON_REC_PROCESS;
	}
	ok(dev == 1 && procs == 1, "the GPU's sample and its process came together (%zu, %zu)", dev, procs);
	is_int(poll(&p, 1, 0), 0, "not readable once the queue is empty (nothing changes before the heartbeat)");
	gpumon_sampler_destroy(s);
	gpumon_destroy(g);
	is_int(gpumon_sampler_fd(NULL), -1, "NULL: -1");
}

/* A process record refers to the sampler's copy of the process: it holds until the next poll, while
 * the sampling thread lists the GPU again and again (under ASan a copy freed early is caught), and
 * every other kind refers to none. */
static void test_process_until_next_poll(void)
{
	gpumon *g;
	gpumon_sampler *s = one_process_sampler(&g, 1000);
	gpumon_record r[64];
	size_t n = 0, procs = 0, others = 0;
	uint64_t end = now_ns() + 2000 * MS;
	for (int found = 0; !found && now_ns() < end;) {
		gpumon_sampler_poll(s, r, 64, &n, 50);
		for (size_t i = 0; i < n; i++)
			found |= r[i].kind == GPUMON_REC_PROCESS;
	}
	for (size_t i = 0; i < n; i++)
		if (r[i].kind == GPUMON_REC_PROCESS)
			procs += r[i].process != NULL;
		else
			others += r[i].process == NULL;
	ok(procs == 1, "one process record, with its process");
	is_int(others, n - procs, "no process on records of other kinds");
	sleep_ms(50); /* the thread lists the GPU about 50 times meanwhile */
	const gpumon_process *p = NULL;
	for (size_t i = 0; i < n; i++)
		if (r[i].kind == GPUMON_REC_PROCESS)
			p = r[i].process;
	ok(p && p->pid == 7001 && p->used_bytes == GIB && (p->flags & GPUMON_PROC_USED_KNOWN),
	   "the process still reads as listed before the next poll");
	gpumon_sampler_poll(s, r, 64, &n, 0);
	gpumon_sampler_destroy(s);
	gpumon_destroy(g);
}

/* A listing's changes come in one piece: a consumer draining the queue as fast as it can never takes
 * part of a list (3,000 processes, all new at the first listing; before, each was queued under its own
 * hold of the lock, and such a consumer took the first few hundred). */
static void test_list_in_one_piece(void)
{
	gpumon *g = open_fake("gpu 0 total=80GiB used=1GiB\n"
			      "procs 0 4000000 3000 used=1MiB\n", 0);
	/* one listing while the test runs: a second, slow under a sanitizer, could outlast the stop's
	   grace and keep the fake driver open into the next test */
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 10000, .process_period_us = 30000000};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "sampler starts");
	static gpumon_record r[4096];
	size_t first = 0, total = 0, polls = 0;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		size_t n = 0, procs = 0;
		gpumon_sampler_poll(s, r, 4096, &n, 0);
		for (size_t i = 0; i < n; i++)
			procs += r[i].kind == GPUMON_REC_PROCESS;
		if (procs && !first)
			first = procs;
		total += procs;
		polls++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (total < 3000 && t.tv_sec - t0.tv_sec < 10);
	is_int(total, 3000, "every process came (%zu polls)", polls);
	is_int(first, 3000, "the first poll that took any took them all");
	gpumon_sampler_destroy(s);
	gpumon_destroy(g);
}

/* The sampler's message says its last failure; "" before any. */
static void test_errmsg(void)
{
	gpumon *g = open_fake("gpu 0 total=80GiB\n", 0);
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, NULL, &s), GPUMON_OK, "sampler starts");
	is_str(gpumon_sampler_errmsg(s), "", "no failure: \"\"");
	gpumon_device_sample *ring = NULL;
	size_t rn = 0;
	is_int(gpumon_sampler_ring(s, 3, 0, &ring, &rn), GPUMON_E_NOT_FOUND, "ring of a GPU not sampled");
	is_str(gpumon_sampler_errmsg(s), "GPU 3 is not sampled: no flight recorder for it", "the message names it");
	ring = (gpumon_device_sample *)&rn;
	rn = 7;
	is_int(gpumon_sampler_ring(s, 0, 0, &ring, &rn), GPUMON_E_NOT_FOUND, "no flight recorder unless asked for");
	ok(ring == NULL && rn == 0, "nothing handed back");
	is_str(gpumon_sampler_errmsg(s), "this sampler keeps no flight recorder (its ring_seconds was 0)",
	       "the message says why");
	is_int(gpumon_sampler_poll(s, NULL, 4, &rn, 0), GPUMON_E_INVAL, "poll into no buffer");
	is_str(gpumon_sampler_errmsg(s), "gpumon_sampler_poll: the buffer is NULL", "the message says so");
	is_str(gpumon_sampler_errmsg(NULL), "", "NULL: \"\"");
	gpumon_sampler_destroy(s);
	gpumon_destroy(g);
}

int main(void)
{
	test_fd();
	test_records();
	test_process_until_next_poll();
	test_list_in_one_piece();
	test_errmsg();
	test_queue_full_and_stop();
	test_destroy_while_polling();
	test_bad_config();
	remove_scenario();
	return tap_done();
}
