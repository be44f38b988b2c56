/* SPDX-License-Identifier: MIT */
/* test_open_hang.c — opening while the driver hangs: gpumon_create gives up after the bound the
 * sampler uses, with GPUMON_E_TIMEOUT and a message naming the call (nvmlInit_v2, nvmlInit of an
 * old driver, a query of the device listing), leaves a handle that is safe to use and to destroy,
 * and the library opens again once the driver answers; a driver slow within the bound opens. */
#include <signal.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

#include "tap.h"

/* gpumon_create's answer on this scenario; *g is set (to be destroyed by the caller). */
static int open_on(const char *scenario, int v1_only, gpumon **g)
{
	use_scenario(scenario, v1_only);
	*g = NULL;
	return gpumon_create(g);
}

static void on_alarm(int sig)
{
	(void)sig;
	static const char msg[] = "not ok - gpumon_create or gpumon_destroy waited for a driver call that never returns\n";
	if (write(1, msg, sizeof msg - 1) < 0)
		_exit(2);
	_exit(1);
}

/* First, while no hung call holds the fake's session: a call that answers late, within the bound. */
static void test_slow_within_bound(void)
{
	gpumon *g;
	is_int(open_on("gpu 0 name=\"NVIDIA H200\"\nhang nvmlInit_v2 until=0.2\n", 0, &g), GPUMON_OK,
	       "an nvmlInit_v2 that answers after 0.2 s opens");
	is_int(gpumon_device_count(g), 1, "with its GPU");
	gpumon_destroy(g);
}

static void test_init_hangs(void)
{
	gpumon *g;
	is_int(open_on("gpu 0\nhang nvmlInit_v2\n", 0, &g), GPUMON_E_TIMEOUT, "nvmlInit_v2 never returns: GPUMON_E_TIMEOUT");
	is_str(gpumon_errmsg(g), "the NVIDIA driver did not answer within 2 s (nvmlInit_v2)", "the message names the call");
	is_int(gpumon_device_count(g), 0, "no devices");
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s), GPUMON_E_DRIVER, "a read on the handle: E_DRIVER");
	char v[64];
	is_int(gpumon_driver_version(g, v, sizeof v), GPUMON_E_DRIVER, "no driver version");
	gpumon_destroy(g);
	ok(1, "gpumon_destroy returns while the call still hangs");

	/* the hung call keeps no lock: the driver, answering again, is opened afresh */
	is_int(open_on("gpu 0\ngpu 1\n", 0, &g), GPUMON_OK, "the next open works");
	is_int(gpumon_device_count(g), 2, "and lists the GPUs");
	gpumon_destroy(g);

	is_int(open_on("gpu 0\nhang nvmlInit\n", 1, &g), GPUMON_E_TIMEOUT, "an old driver's nvmlInit hangs");
	is_str(gpumon_errmsg(g), "the NVIDIA driver did not answer within 2 s (nvmlInit)",
	       "the message names the call that driver has");
	gpumon_destroy(g);
}

/* Last: the hung query keeps the fake's session open until the process ends. */
static void test_device_query_hangs(void)
{
	gpumon *g;
	is_int(open_on("gpu 0\ngpu 1\nhang nvmlDeviceGetName gpu=1\n", 0, &g), GPUMON_E_TIMEOUT,
	       "a device query of the listing never returns: GPUMON_E_TIMEOUT");
	is_str(gpumon_errmsg(g), "the NVIDIA driver did not answer within 2 s (nvmlDeviceGetName)", "naming it");
	is_str(gpumon_strerror(GPUMON_E_TIMEOUT), "the NVIDIA driver did not answer in time", "gpumon_strerror");
	gpumon_destroy(g);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0); /* the alarm's exit loses nothing written before it */
	signal(SIGALRM, on_alarm);
	alarm(30); /* three opens give up after 2 s each: far more than this is a wait for a hung call */
	test_slow_within_bound();
	test_init_hangs();
	test_device_query_hangs();
	alarm(0);
	remove_scenario();
	return tap_done();
}
