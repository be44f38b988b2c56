/* SPDX-License-Identifier: MIT */
/* test_stale.c — driver faults that must not change what is recorded: a memory call that fails for
 * a moment (a missing sample, never the v1 figure), a GPU whose calls hang (the others sampled on
 * time, the hung one reported stale, then answering again, in the records and on the exporter's
 * page), and a sampler stopped while one of its GPUs hangs for good. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */
#include "http_util.h"

#define GIB (1ULL << 30)
#define MIB (1ULL << 20)
#define MS 1000000ULL

/* Opens the fake with a scenario whose two "%.3f" are a and b seconds from now (the fake's clock
 * starts when it is loaded, at open, as no handle of an earlier test holds it); sets *t0 to now. */
static gpumon *open_timed(const char *fmt, double a, double b, uint64_t *t0)
{
	char text[1024];
	snprintf(text, sizeof text, fmt, a, b);
	*t0 = now_ns();
	return open_fake(text, 0);
}

/* ---- item: a short failure of the v2 memory call ---------------------------------------------- */

/* The v2 call worked at open; while it fails, the v1 call (which counts the driver's reserve as
 * used) must not stand in for it: those samples are missing, and every figure recorded stays v2's. */
static void test_v2_fails_for_a_moment(void)
{
	uint64_t t0;
	gpumon *g = open_timed("gpu 0 total=80GiB reserved=512MiB used=10GiB\n"
			       "error nvmlDeviceGetMemoryInfo_v2 UNKNOWN gpu=0 from=%.3f until=%.3f\n", 0.30, 0.36, &t0);
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 2000, .heartbeat_ms = 50, .ring_seconds = 10};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "sampler starts");
	size_t n = 0;
	gpumon_record *r = collect_records(s, 600, &n);
	gpumon_sampler_stats st;
	gpumon_sampler_stats_get(s, &st);
	int records = 0, v1 = 0, no_reserved = 0, above = 0;
	for (size_t i = 0; r && i < n; i++) {
		if (r[i].kind != GPUMON_REC_DEVICE)
			continue;
		records++;
		v1 += r[i].sample.memory_api != GPUMON_MEMAPI_V2;
		no_reserved += !(r[i].sample.present & GPUMON_F_MEM_RESERVED);
		above += r[i].sample.memory_used_bytes > 10 * GIB || r[i].used_max_bytes > 10 * GIB;
	}
	ok(records >= 5, "device records taken (%d)", records);
	is_int(v1, 0, "no record holds the v1 call's figures");
	is_int(no_reserved, 0, "every record keeps the reserved figure");
	is_int(above, 0, "no record, and no interval maximum, counts the driver's reserve as used");
	ok(st.errors > 0, "the failed reads are counted as errors (%llu)", (unsigned long long)st.errors);
	gpumon_device_sample *ring = NULL;
	size_t rn = 0, ring_above = 0;
	gpumon_sampler_ring(s, 0, 0, &ring, &rn);
	for (size_t i = 0; i < rn; i++)
		ring_above += ring[i].memory_used_bytes > 10 * GIB || ring[i].memory_api != GPUMON_MEMAPI_V2;
	ok(rn > 50 && ring_above == 0, "the flight recorder holds only v2 figures (%zu of %zu)", ring_above, rn);
	gpumon_free(ring);
	free(r);
	gpumon_sampler_destroy(s);

	gpumon_destroy(g);

	/* a direct read in such a window: an error naming the call, not a figure */
	g = open_timed("gpu 0 total=80GiB reserved=512MiB used=10GiB\n"
		       "error nvmlDeviceGetMemoryInfo_v2 UNKNOWN gpu=0 from=%.3f until=%.3f\n", 0.2, 0.5, &t0);
	sleep_ms(250);
	gpumon_device_sample x;
	int rc = gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &x);
	if (now_ns() < t0 + 500 * MS) { /* a loaded machine may have slept past the window */
		is_int(rc, GPUMON_E_NVML, "a read while v2 fails is an error");
		ok(strstr(gpumon_errmsg(g), "nvmlDeviceGetMemoryInfo_v2") != NULL, "naming the call: %s", gpumon_errmsg(g));
	} else {
		ok(1, "# SKIP the machine was too slow to read inside the window");
		ok(1, "# SKIP");
	}
	sleep_ms(300);
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &x), GPUMON_OK, "after the window it reads again");
	ok(x.memory_api == GPUMON_MEMAPI_V2 && x.memory_used_bytes == 10 * GIB, "with v2's figures");
	gpumon_destroy(g);

	/* a driver without a usable v2 call still gets v1's figures: that is not a failure */
	g = open_fake("gpu 0 total=80GiB reserved=512MiB used=10GiB\n"
		      "error nvmlDeviceGetMemoryInfo_v2 NOT_SUPPORTED\n", 0);
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &x), GPUMON_OK, "v2 not supported: v1 read");
	ok(x.memory_api == GPUMON_MEMAPI_V1 && x.memory_used_bytes == 10 * GIB + 512 * MIB, "with v1's figures");
	gpumon_destroy(g);
}

/* ---- item: a GPU whose calls hang ------------------------------------------------------------ */

/* GPU 1's memory call hangs from 0.5 s to 4.0 s (the fake's time starts at open). */
static void test_hang_others_on_time(void)
{
	uint64_t t0;
	gpumon *g = open_timed("gpu 0 total=80GiB used=1GiB\n"
			       "gpu 1 total=80GiB used=2GiB\n"
			       "hang nvmlDeviceGetMemoryInfo_v2 gpu=1 from=%.3f until=%.3f\n", 0.5, 4.0, &t0);
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 10000, .heartbeat_ms = 100};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "sampler starts");
	size_t n = 0;
	gpumon_record *r = collect_records(s, 5000, &n);
	uint64_t last0 = 0, gap0 = 0, stale_t = 0, answer_t = 0, in_hang1 = 0, after1 = 0;
	int stale = 0, answering = 0, order = 1;
	const char *stale_text = "", *answer_text = "";
	for (size_t i = 0; r && i < n; i++) {
		const gpumon_record *x = &r[i];
		uint64_t t = x->t_ns - t0;
		if (x->kind == GPUMON_REC_DEVICE && x->dev == 0) {
			if (last0 && x->t_ns - last0 > gap0)
				gap0 = x->t_ns - last0;
			last0 = x->t_ns;
		} else if (x->kind == GPUMON_REC_DEVICE && x->dev == 1) {
			in_hang1 += t > 600 * MS && t < 3900 * MS;
			after1 += t > 4000 * MS;
		} else if (x->kind == GPUMON_REC_EVENT && x->dev == 1 && x->event_kind && !strcmp(x->event_kind, "stale")) {
			stale++;
			stale_t = t;
			stale_text = x->event_text ? x->event_text : "";
			order &= !answering;
		} else if (x->kind == GPUMON_REC_EVENT && x->dev == 1 && x->event_kind &&
			   !strcmp(x->event_kind, "answering")) {
			answering++;
			answer_t = t;
			answer_text = x->event_text ? x->event_text : "";
		}
	}
	ok(last0 && gap0 < 1000 * MS, "GPU 0 sampled on time while GPU 1 hangs (largest gap %.3f s)", (double)gap0 / 1e9);
	ok(last0 && last0 - t0 > 4500 * MS, "and to the end");
	is_int(stale, 1, "GPU 1 reported stale once");
	ok(stale_t > 1500 * MS && stale_t < 4000 * MS, "after its deadline, while it hangs (%.3f s)", (double)stale_t / 1e9);
	ok(strstr(stale_text, "GPU 1") != NULL, "the event names the GPU: %s", stale_text);
	is_int(answering, 1, "then answering again, once");
	ok(order && answer_t >= 4000 * MS, "after the hang ends (%.3f s)", (double)answer_t / 1e9);
	ok(strstr(answer_text, "GPU 1") != NULL, "naming it: %s", answer_text);
	is_int(in_hang1, 0, "no figure of GPU 1 from inside the hang");
	ok(after1 > 0, "GPU 1 sampled again after it (%llu records)", (unsigned long long)after1);
	free(r);
	gpumon_sampler_destroy(s);
	gpumon_destroy(g);
}

/* ---- the exporter's page: gpu_up 0 with a reason, then 1 again --------------------------------- */

/* The value of the sample of `name` whose labels contain `labels`, or -1 when absent. */
static double metric(const char *page, const char *name, const char *labels)
{
	size_t n = strlen(name);
	for (const char *p = page; p && (p = strstr(p, name)); p += n) {
		if ((p != page && p[-1] != '\n') || p[n] != '{')
			continue;
		const char *end = strchr(p, '}');
		const char *hit = strstr(p, labels);
		if (end && hit && hit < end)
			return strtod(end + 1, NULL);
	}
	return -1;
}

static void test_exporter_up_down(void)
{
	uint64_t t0;
	gpumon *g = open_timed("gpu 0 total=80GiB used=1GiB\n"
			       "gpu 1 total=80GiB used=2GiB\n"
			       "hang nvmlDeviceGetMemoryInfo_v2 gpu=1 from=%.3f until=%.3f\n", 1.0, 4.5, &t0);
	gpumon_exporter_config c = GPUMON_CONFIG_INIT(gpumon_exporter_config);
	c.listen = "127.0.0.1:0";
	gpumon_exporter *e = NULL;
	int st = gpumon_exporter_create(g, &c, &e);
	if (st == GPUMON_E_NOT_SUPPORTED) {
		ok(1, "# SKIP built without the exporter");
		gpumon_exporter_destroy(e);
		gpumon_destroy(g);
		return;
	}
	is_int(st, GPUMON_OK, "exporter starts (%s)", gpumon_exporter_errmsg(e));
	if (st != GPUMON_OK) {
		gpumon_exporter_destroy(e);
		gpumon_destroy(g);
		return;
	}
	char addr[96];
	gpumon_exporter_address(e, addr, sizeof addr);
	unsigned port = (unsigned)atoi(strrchr(addr, ':') + 1);
	/* phases: 0 up before, 1 down, 2 up again */
	int phase = 0, down_reason = 0, gpu0_while_down = 1, down_figures = 0, up_clean = 0;
	uint64_t end = now_ns() + 9000 * MS;
	while (phase < 2 && now_ns() < end) {
		char *p = http_get(port, "/metrics");
		double up1 = p ? metric(p, "gpumon_gpu_up", "gpu=\"1\"") : -1;
		if (phase == 0 && up1 == 0)
			phase = 1;
		if (phase == 1 && up1 == 0) {
			down_reason |= metric(p, "gpumon_gpu_down_info", "gpu=\"1\"") == 1 &&
				       strstr(p, "reason=\"not_answering\"") != NULL;
			gpu0_while_down &= metric(p, "gpumon_gpu_up", "gpu=\"0\"") == 1 &&
					   metric(p, "gpumon_memory_used_bytes", "gpu=\"0\"") == (double)GIB;
			down_figures += metric(p, "gpumon_memory_used_bytes", "gpu=\"1\"") >= 0;
		}
		if (phase == 1 && up1 == 1) {
			phase = 2;
			up_clean = metric(p, "gpumon_gpu_down_info", "gpu=\"1\"") < 0 &&
				   metric(p, "gpumon_memory_used_bytes", "gpu=\"1\"") == 2.0 * GIB;
		}
		free(p);
		sleep_ms(100);
	}
	ok(phase >= 1, "gpumon_gpu_up of the hung GPU goes to 0");
	ok(down_reason, "gpumon_gpu_down_info says why: not_answering");
	ok(phase >= 1 && gpu0_while_down, "GPU 0 stays up, with its figures, meanwhile");
	ok(phase >= 1 && down_figures == 0, "no memory figure of the hung GPU is shown as current (%d pages)", down_figures);
	is_int(phase, 2, "gpumon_gpu_up goes back to 1 once it answers");
	ok(up_clean, "with its figures back and no down_info");
	gpumon_exporter_destroy(e);
	gpumon_destroy(g);
}

/* ---- a sampler stopped while a GPU hangs for good ---------------------------------------------- */

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "not ok - destroy waited for a driver call that never returns\n";
	if (write(1, msg, sizeof msg - 1) < 0)
		_exit(2);
	_exit(1);
}

/* Last: the hung call's thread is left behind, blocked until the process exits. */
static void test_destroy_while_hung(void)
{
	uint64_t t0;
	gpumon *g = open_timed("gpu 0 total=80GiB used=1GiB\n"
			       "gpu 1 total=80GiB used=2GiB\n"
			       "hang nvmlDeviceGetMemoryInfo_v2 gpu=1 from=%.3f until=%.0f\n", 0.3, 1e9, &t0);
	gpumon_sampler_config c = {.size = sizeof c, .period_us = 10000};
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, &c, &s), GPUMON_OK, "sampler starts");
	sleep_ms(600);
	signal(SIGALRM, on_alarm);
	alarm(10);
	uint64_t t = now_ns();
	gpumon_sampler_destroy(s);
	uint64_t took = now_ns() - t;
	ok(took < 1500 * MS, "destroy returns although GPU 1's call never does (%.3f s)", (double)took / 1e9);
	t = now_ns();
	gpumon_destroy(g);
	ok(now_ns() - t < 1500 * MS, "and so does gpumon_destroy");
	alarm(0);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* the alarm's exit loses nothing written before it */
	test_v2_fails_for_a_moment();
	test_hang_others_on_time();
	test_exporter_up_down();
	test_destroy_while_hung();
	remove_scenario();
	return tap_done();
}
