/* SPDX-License-Identifier: MIT */
/* test_threads.c — one handle used from several threads at once (as the sampler, exporter and
 * Python package will): samples and process lists stay right, and each thread keeps its own
 * error message. */
#include "tap.h"

#include <pthread.h>

#include <gpumon/gpumon.h>

#define ROUNDS 2000

static gpumon *g;

struct result {
	int bad_samples, bad_lists, bad_msgs;
};

static void *worker(void *arg)
{
	struct result *r = arg;
	for (int i = 0; i < ROUNDS; i++) {
		unsigned dev = (unsigned)i & 1;
		gpumon_device_sample s;
		if (gpumon_device_sample_read(g, dev, GPUMON_F_ALL, &s) != GPUMON_OK ||
		    s.memory_used_bytes != (dev ? 2ULL << 30 : 1ULL << 30))
			r->bad_samples++;
		if (i % 50 == 0) {
			gpumon_process *l;
			size_t n;
			if (gpumon_process_list(g, 0, &l, &n) != GPUMON_OK || n != 100)
				r->bad_lists++;
			gpumon_free(l);
		}
		/* a failure in this thread; its message must be this thread's */
		char spec[32];
		snprintf(spec, sizeof spec, "nosuch%p", (void *)r);
		unsigned d;
		gpumon_device_find(g, spec, &d);
		if (!strstr(gpumon_errmsg(g), spec))
			r->bad_msgs++;
	}
	return NULL;
}

int main(void)
{
	use_scenario("gpu 0 total=80GiB used=1GiB\ngpu 1 total=80GiB used=2GiB\nprocs 0 5000 100 used=1MiB\n", 0);
	is_int(gpumon_create(&g), GPUMON_OK, "open");
	pthread_t t[4];
	struct result r[4];
	memset(r, 0, sizeof r);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, worker, &r[i]);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 4; i++) {
		is_int(r[i].bad_samples, 0, "thread %d: every sample right", i);
		is_int(r[i].bad_lists, 0, "thread %d: every process list right", i);
		is_int(r[i].bad_msgs, 0, "thread %d: its own error messages", i);
	}
	is_str(gpumon_errmsg(g), "", "the main thread saw no error");
	gpumon_destroy(g);
	remove_scenario();
	return tap_done();
}
