/* SPDX-License-Identifier: MIT */
/* test_analysis.c — peaks (global and per window, with owner, in bounded memory) and the
 * out-of-memory diagnosis: each cause of the seed's table on figures that show it, and the
 * unknown answer when none does. */
#include <gpumon/gpumon.h>

#include "tap.h"

#define S 1000000000ull
#define GIB (1024ull * 1024 * 1024)
#define MIB (1024ull * 1024)

static void test_peaks(void)
{
	gpumon_peaks *p = NULL;
	gpumon_peak g, w[64];
	is_int(gpumon_peaks_create(0, 8, &p), GPUMON_E_INVAL, "window 0 refused");
	is_int(gpumon_peaks_create(S, 1, &p), GPUMON_E_INVAL, "one window refused");
	is_int(gpumon_peaks_create(60 * S, 8, &p), GPUMON_OK, "created");
	is_int(gpumon_peaks_global(p, &g), GPUMON_E_NOT_FOUND, "empty: no peak");
	is_int(gpumon_peaks_windows(p, w, 64), 0, "empty: no windows");
	/* 5 minutes at 1 Hz: a baseline of 1 GiB + t MiB, a spike of 9 GiB at 150 s owned by pid 7, and
	 * a second equal spike at 200 s (the first one is the peak) */
	for (uint64_t t = 0; t < 300; t++) {
		uint64_t b = GIB + t * MIB;
		int64_t owner = 1;
		if (t == 150 || t == 200) {
			b = 9 * GIB;
			owner = 7;
		}
		gpumon_peaks_add(p, 1000 * S + t * S, b, owner);
	}
	is_int(gpumon_peaks_global(p, &g), GPUMON_OK, "a peak");
	is_int(g.bytes, 9 * GIB, "global peak bytes");
	is_int(g.t_ns, 1150 * S, "global peak at the first of two equal spikes");
	is_int(g.owner_pid, 7, "global peak owner");
	is_int(g.points, 300, "points");
	size_t n = gpumon_peaks_windows(p, w, 64);
	is_int(n, 5, "five windows of a minute");
	is_int(w[0].bytes, GIB + 59 * MIB, "window 0: its last point");
	is_int(w[0].start_t_ns, 1000 * S, "window 0 starts at the first point");
	is_int(w[2].bytes, 9 * GIB, "window 2 holds the spike");
	is_int(w[2].t_ns, 1150 * S, "window 2: when");
	is_int(w[3].owner_pid, 7, "window 3: the second spike's owner");
	is_int(w[4].bytes, GIB + 299 * MIB, "window 4: its last point");
	/* 20 minutes more: 25 windows needed, 8 kept -> windows of 4 minutes */
	for (uint64_t t = 300; t < 1500; t++)
		gpumon_peaks_add(p, 1000 * S + t * S, GIB, 2);
	n = gpumon_peaks_windows(p, w, 64);
	ok(n <= 8, "windows stay bounded (%zu)", n);
	is_int(w[0].end_t_ns - w[0].start_t_ns, 240 * S, "windows merged to 4 minutes");
	is_int(w[0].bytes, 9 * GIB, "the merged first window keeps the spike");
	is_int(w[0].t_ns, 1150 * S, "and its time");
	uint64_t pts = 0;
	for (size_t i = 0; i < n; i++)
		pts += w[i].points;
	is_int(pts, 1500, "no point lost in merging");
	is_int(gpumon_peaks_add(p, 999 * S, GIB, 1), GPUMON_E_INVAL, "a point before the first refused");
	/* a gap: windows without points are not listed */
	gpumon_peaks_destroy(p);
	gpumon_peaks_create(S, 16, &p);
	gpumon_peaks_add(p, 0, 5, -1);
	gpumon_peaks_add(p, 10 * S, 6, -1);
	is_int(gpumon_peaks_windows(p, w, 64), 2, "a gap leaves no empty windows");
	is_int(gpumon_peaks_windows(p, NULL, 0), 2, "count without a buffer");
	gpumon_peaks_destroy(p);
	gpumon_peaks_destroy(NULL);
}

static gpumon_oom_input base(void)
{
	gpumon_oom_input in;
	memset(&in, 0, sizeof in);
	in.known = GPUMON_OOM_F_TOTAL | GPUMON_OOM_F_USED | GPUMON_OOM_F_JOB | GPUMON_OOM_F_OTHERS |
		   GPUMON_OOM_F_FLOOR | GPUMON_OOM_F_LEAK;
	in.total_bytes = 80 * GIB;
	in.used_bytes = 80 * GIB;
	in.job_bytes = 78 * GIB;
	in.others_bytes = 0;
	in.top_other_pid = -1;
	in.floor_bytes = 76 * GIB;
	in.rise_seconds = 30;
	in.leak.verdict = GPUMON_LEAK_NONE;
	in.leak.start_step = -1;
	return in;
}

static void test_oom(void)
{
	gpumon_oom_diagnosis d;
	is_int(gpumon_oom_diagnose(NULL, &d), GPUMON_E_INVAL, "NULL input refused");

	gpumon_oom_input in = base();
	in.job_bytes = 50 * GIB;
	in.others_bytes = 30 * GIB;
	in.top_other_pid = 4242;
	in.top_other_bytes = 15 * GIB;
	in.top_other_user = "bob";
	in.top_other_command = "python other.py";
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "a colleague's 30 GiB: co-tenant");
	ok(strstr(d.text, "4242") && strstr(d.text, "bob") && strstr(d.text, "30.0 GiB"),
	   "names the pid, the user and the figure: %s", d.text);

	in = base();
	in.leak.verdict = GPUMON_LEAK_SUSPECTED;
	in.leak.rate_bytes_per_step = 4.0 * MIB;
	in.leak.start_step = 120;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_LEAK, "a suspected leak: leak");
	ok(strstr(d.text, "4.00 MiB a step") && strstr(d.text, "step 120"), "says the rate and start: %s", d.text);

	in.others_bytes = 20 * GIB;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "a co-tenant and a leak: the co-tenant first ...");
	ok(strstr(d.text, "leak"), "... and the leak named too");

	in = base();
	in.known |= GPUMON_OOM_F_FRAMEWORK;
	in.reserved_bytes = 70 * GIB;
	in.allocated_bytes = 10 * GIB;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_PREALLOCATION, "70 GiB reserved, 10 GiB allocated: pre-allocation");
	ok(strstr(d.text, "70.0 GiB") && strstr(d.text, "10.0 GiB"), "with the figures: %s", d.text);

	in = base();
	in.floor_bytes = 30 * GIB;
	in.rise_seconds = 0.4;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_TRANSIENT_PEAK, "30 -> 80 GiB in 0.4 s: transient peak");
	ok(strstr(d.text, "30.0 GiB") && strstr(d.text, "0.4 s"), "with the figures: %s", d.text);

	in.rise_seconds = 120;
	gpumon_oom_diagnose(&in, &d);
	ok(d.cause != GPUMON_OOM_TRANSIENT_PEAK, "a slow climb over two minutes is not a transient peak");

	in = base(); /* flat near the top, nothing else: does not fit */
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "nothing stands out: unknown");
	ok(strstr(d.text, "not fit"), "and says the model may not fit: %s", d.text);

	in = base(); /* without framework figures: took 90 % in its first seconds */
	in.known |= GPUMON_OOM_F_EARLY;
	in.early_bytes = 72 * GIB;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_PREALLOCATION, "NVML only, 90 %% taken at once: pre-allocation");
	ok(strstr(d.text, "72.0 GiB") && strstr(d.text, "first seconds"), "says so: %s", d.text);
	in.early_bytes = 8 * GIB;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "10 %% at first, growing to the top over time: not pre-allocation");

	in = base(); /* knowing nothing but the total */
	in.known = GPUMON_OOM_F_TOTAL;
	gpumon_oom_diagnose(&in, &d);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "no figures: unknown, no guess");
	ok(!strstr(d.text, " 0 B"), "and no 0 shown for what is unknown: %s", d.text);
}

int main(void)
{
	test_peaks();
	test_oom();
	return tap_done();
}
