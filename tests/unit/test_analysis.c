/* SPDX-License-Identifier: MIT */
/* test_analysis.c — the pure analysis functions beside the leak detector: peaks (global and per
 * window, with the owner of the rise and the largest holder, in bounded memory), the out-of-memory
 * diagnosis (each cause code and `also` bit on figures that show it, unknown when none does), and
 * the frameworks' out-of-memory messages. */
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
	is_int(gpumon_peaks_create(S, 4097, &p), GPUMON_E_INVAL, "more than 4096 windows refused");
	is_int(gpumon_peaks_create(S, 8, NULL), GPUMON_E_INVAL, "no out refused");
	is_int(gpumon_peaks_create(60 * S, 8, &p), GPUMON_OK, "created");
	is_int(gpumon_peaks_global(p, &g), GPUMON_E_NOT_FOUND, "empty: no peak");
	is_int(gpumon_peaks_windows(p, w, 64), 0, "empty: no windows");
	/* 5 minutes at 1 Hz: a baseline of 1 GiB + t MiB owned by pid 1, a spike of 9 GiB at 150 s made
	 * by pid 7 while pid 3 is the largest holder, and a second equal spike at 200 s (the first one
	 * is the peak) made and held by pid 7 */
	for (uint64_t t = 0; t < 300; t++) {
		uint64_t b = GIB + t * MIB;
		int64_t owner = 1, largest = 1;
		if (t == 150)
			b = 9 * GIB, owner = 7, largest = 3;
		if (t == 200)
			b = 9 * GIB, owner = 7, largest = 7;
		gpumon_peaks_add(p, 1000 * S + t * S, b, owner, largest);
	}
	is_str(gpumon_peaks_errmsg(p), "", "no failure: no message");
	is_int(gpumon_peaks_add(p, 999 * S, GIB, 1, 1), GPUMON_E_INVAL, "a point before the first refused");
	is_str(gpumon_peaks_errmsg(p), "a point at 999000000000 ns, before the first one (1000000000000 ns), is refused",
	       "and the message says why");
	is_str(gpumon_peaks_errmsg(NULL), "", "NULL: no message");
	is_int(gpumon_peaks_global(p, &g), GPUMON_OK, "a peak");
	is_int(g.bytes, 9 * GIB, "global peak bytes");
	is_int(g.t_ns, 1150 * S, "global peak at the first of two equal spikes");
	is_int(g.owner_pid, 7, "global peak: the process whose rise made it");
	is_int(g.largest_pid, 3, "global peak: the largest holder then, another process");
	is_int(g.points, 300, "points");
	is_int(g.start_t_ns, 1000 * S, "the global peak spans the series from its first point");
	ok(g.end_t_ns > 1299 * S, "... to its last");
	size_t n = gpumon_peaks_windows(p, w, 64);
	is_int(n, 5, "five windows of a minute");
	is_int(w[0].bytes, GIB + 59 * MIB, "window 0: its last point");
	is_int(w[0].start_t_ns, 1000 * S, "window 0 starts at the first point");
	is_int(w[0].end_t_ns, 1060 * S, "window 0 ends a minute later");
	is_int(w[0].owner_pid, 1, "window 0: its owner");
	is_int(w[2].bytes, 9 * GIB, "window 2 holds the spike");
	is_int(w[2].t_ns, 1150 * S, "window 2: when");
	is_int(w[2].largest_pid, 3, "window 2: the largest holder");
	is_int(w[3].owner_pid, 7, "window 3: the second spike's owner");
	is_int(w[3].largest_pid, 7, "window 3: its largest holder is its owner");
	is_int(w[4].bytes, GIB + 299 * MIB, "window 4: its last point");
	is_int(gpumon_peaks_windows(p, w, 2), 5, "a short buffer: the count of every window");
	/* 20 minutes more: 25 windows needed, 8 kept -> windows of 4 minutes */
	for (uint64_t t = 300; t < 1500; t++)
		gpumon_peaks_add(p, 1000 * S + t * S, GIB, 2, 2);
	n = gpumon_peaks_windows(p, w, 64);
	ok(n <= 8, "windows stay bounded (%zu)", n);
	is_int(w[0].end_t_ns - w[0].start_t_ns, 240 * S, "windows merged to 4 minutes");
	is_int(w[0].bytes, 9 * GIB, "the merged first window keeps the spike");
	is_int(w[0].t_ns, 1150 * S, "and its time");
	is_int(w[0].owner_pid, 7, "and its owner");
	is_int(w[0].largest_pid, 3, "and its largest holder");
	uint64_t pts = 0;
	for (size_t i = 0; i < n; i++)
		pts += w[i].points;
	is_int(pts, 1500, "no point lost in merging");
	is_int(gpumon_peaks_add(p, 999 * S, GIB, 1, 1), GPUMON_E_INVAL, "a point before the first refused");
	is_int(gpumon_peaks_add(p, 1400 * S, 10 * GIB, 5, -1), GPUMON_OK,
	       "a later point slightly out of order is taken");
	gpumon_peaks_global(p, &g);
	ok(g.bytes == 10 * GIB && g.t_ns == 1400 * S && g.owner_pid == 5 && g.largest_pid == -1,
	   "it can be the peak, with an unknown largest holder");
	gpumon_peaks_destroy(p);

	/* a gap: windows without points are not listed */
	is_int(gpumon_peaks_create(S, 16, &p), GPUMON_OK, "created");
	gpumon_peaks_add(p, 0, 5, -1, -1);
	gpumon_peaks_add(p, 10 * S, 6, -1, -1);
	is_int(gpumon_peaks_windows(p, w, 64), 2, "a gap leaves no empty windows");
	is_int(gpumon_peaks_windows(p, NULL, 0), 2, "count without a buffer");
	gpumon_peaks_global(p, &g);
	ok(g.owner_pid == -1 && g.largest_pid == -1, "unknown owners stay unknown (-1)");
	gpumon_peaks_destroy(p);
	gpumon_peaks_destroy(NULL);
	is_int(gpumon_peaks_add(NULL, 0, 1, -1, -1), GPUMON_E_INVAL, "add on NULL");
}

/* A job flat near the top of an 80 GiB card with nothing else on it: no cause stands out. */
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

static gpumon_oom_diagnosis diagnose(const gpumon_oom_input *in)
{
	gpumon_oom_diagnosis d;
	memset(&d, 0xff, sizeof d); /* whatever was there before must not show through */
	if (gpumon_oom_diagnose(in, &d) != GPUMON_OK)
		printf("# gpumon_oom_diagnose failed\n");
	return d;
}

static void test_oom_co_tenant_and_leak(void)
{
	gpumon_oom_diagnosis d;
	is_int(gpumon_oom_diagnose(NULL, &d), GPUMON_E_INVAL, "NULL input refused");
	gpumon_oom_input in = base();
	is_int(gpumon_oom_diagnose(&in, NULL), GPUMON_E_INVAL, "NULL output refused");

	in.job_bytes = 50 * GIB;
	in.others_bytes = 30 * GIB;
	in.top_other_pid = 4242;
	in.top_other_bytes = 15 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "a colleague's 30 GiB: co-tenant");
	is_int(d.also, 0, "nothing else");

	in.others_bytes = 8 * GIB; /* exactly 10 % of the card */
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "others at 10 %% of the card: co-tenant");
	in.others_bytes = 8 * GIB - 1;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "others just under 10 %%: not a co-tenant");
	in.known &= ~(unsigned)GPUMON_OOM_F_OTHERS;
	in.others_bytes = 30 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "others' figure not known: no co-tenant told from it");

	in = base(); /* a small card: 10 % is under a GiB */
	in.total_bytes = 8 * GIB;
	in.used_bytes = in.floor_bytes = 8 * GIB;
	in.others_bytes = 900 * MIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "900 MiB of others on an 8 GiB card: under 1 GiB, not a co-tenant");
	in.others_bytes = GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "1 GiB of others on an 8 GiB card: co-tenant");

	in = base();
	in.leak.verdict = GPUMON_LEAK_SUSPECTED;
	in.leak.rate_bytes_per_step = 4.0 * MIB;
	in.leak.start_step = 120;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_LEAK, "a suspected leak: leak");
	is_int(d.also, 0, "a leak alone has no other bit");

	in.others_bytes = 20 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "a co-tenant and a leak: the co-tenant first ...");
	is_int(d.also, GPUMON_OOM_ALSO_LEAK, "... with the leak as ALSO_LEAK");

	in.known &= ~(unsigned)GPUMON_OOM_F_LEAK;
	d = diagnose(&in);
	is_int(d.also, 0, "a leak result not marked known is not used");
	in.others_bytes = 0;
	d = diagnose(&in);
	ok(d.cause != GPUMON_OOM_LEAK, "nor does it make a leak cause (cause %d)", d.cause);
}

static void test_oom_preallocation_and_peak(void)
{
	gpumon_oom_input in = base();
	gpumon_oom_diagnosis d;
	in.known |= GPUMON_OOM_F_FRAMEWORK;
	in.reserved_bytes = 70 * GIB;
	in.allocated_bytes = 10 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_PREALLOCATION, "70 GiB reserved, 10 GiB allocated: pre-allocation");
	is_int(d.also, 0, "told from the framework's figures: no BY_EARLY_FIGURE");
	in.allocated_bytes = 40 * GIB;
	d = diagnose(&in);
	ok(d.cause != GPUMON_OOM_PREALLOCATION, "70 GiB reserved, 40 GiB of it in use: not pre-allocation");
	in.allocated_bytes = 10 * GIB;
	in.reserved_bytes = 30 * GIB;
	d = diagnose(&in);
	ok(d.cause != GPUMON_OOM_PREALLOCATION, "30 GiB reserved of 80: not pre-allocation");

	in = base();
	in.floor_bytes = 30 * GIB;
	in.rise_seconds = 0.4;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_TRANSIENT_PEAK, "30 -> 80 GiB in 0.4 s: transient peak");
	in.rise_seconds = -1;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_TRANSIENT_PEAK, "a climb of unknown length: still a transient peak");
	in.rise_seconds = 120;
	d = diagnose(&in);
	ok(d.cause != GPUMON_OOM_TRANSIENT_PEAK, "a slow climb over two minutes is not a transient peak");
	in.rise_seconds = 0.4;
	in.floor_bytes = 70 * GIB;
	d = diagnose(&in);
	ok(d.cause != GPUMON_OOM_TRANSIENT_PEAK, "a climb of 10 GiB (12.5 %% of the card) is not one");
	in.floor_bytes = 30 * GIB;
	in.known &= ~(unsigned)GPUMON_OOM_F_FLOOR;
	d = diagnose(&in);
	ok(d.cause != GPUMON_OOM_TRANSIENT_PEAK, "no usual level known: no transient peak");

	in = base(); /* flat near the top, nothing else: does not fit */
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "nothing stands out: unknown");
	is_int(d.also, 0, "and no bit");

	in = base(); /* without framework figures: took 90 % in its first seconds */
	in.known |= GPUMON_OOM_F_EARLY;
	in.early_bytes = 72 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_PREALLOCATION, "NVML only, 90 %% taken at once: pre-allocation");
	is_int(d.also, GPUMON_OOM_BY_EARLY_FIGURE, "told from the first seconds: BY_EARLY_FIGURE");
	in.early_bytes = 8 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "10 %% at first, growing to the top over time: not pre-allocation");
	in.early_bytes = 72 * GIB; /* the framework's figures, when known, decide instead */
	in.known |= GPUMON_OOM_F_FRAMEWORK;
	in.reserved_bytes = 70 * GIB;
	in.allocated_bytes = 60 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "framework figures say the memory was in use: not pre-allocation");

	in = base(); /* knowing nothing but the total */
	in.known = GPUMON_OOM_F_TOTAL;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "no figures: unknown, no guess");
	in.known = 0; /* nor the total: every share is unknown */
	in.others_bytes = 30 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_UNKNOWN, "no total: no share-based cause");
}

/* Each framework's message as it prints it, and the name the match gives back. */
/* torch's figures at an out-of-memory, as its message says them (the H200 fixtures'), for the causes
 * that need them: request, free and capacity, the process, allocated and reserved (+ cap). */
static gpumon_oom_input torch_said(double request_gib, double free_gib, double process_gib, double alloc_gib,
				   double cached_gib)
{
	gpumon_oom_input in;
	memset(&in, 0, sizeof in);
	in.known = GPUMON_OOM_F_TOTAL | GPUMON_OOM_F_USED | GPUMON_OOM_F_JOB | GPUMON_OOM_F_OTHERS | GPUMON_OOM_F_FIGURES;
	in.total_bytes = 143771ull * MIB; /* NVML's total; torch's capacity leaves the driver's reserve out */
	in.used_bytes = in.total_bytes - (uint64_t)(free_gib * GIB) - 616 * MIB;
	in.job_bytes = (uint64_t)(process_gib * GIB);
	in.top_other_pid = -1;
	in.rise_seconds = -1;
	in.leak.verdict = GPUMON_LEAK_INSUFFICIENT_DATA;
	gpumon_oom_figures *f = &in.figures;
	f->known = GPUMON_FIG_REQUEST | GPUMON_FIG_CAPACITY | GPUMON_FIG_FREE | GPUMON_FIG_PROCESS | GPUMON_FIG_ALLOCATED |
		   GPUMON_FIG_RESERVED | GPUMON_FIG_DEVICE;
	snprintf(f->framework, sizeof f->framework, "torch");
	f->request_bytes = (uint64_t)(request_gib * GIB);
	f->capacity_bytes = (uint64_t)(139.80 * GIB);
	f->free_bytes = (uint64_t)(free_gib * GIB);
	f->process_bytes = (uint64_t)(process_gib * GIB);
	f->allocated_bytes = (uint64_t)(alloc_gib * GIB);
	f->reserved_bytes = (uint64_t)((alloc_gib + cached_gib) * GIB);
	return in;
}

#define HOLDS(d, c) (((d).causes & GPUMON_OOM_BIT(c)) != 0)

static void test_oom_causes(void)
{
	gpumon_oom_diagnosis d;
	/* tests/fixtures/oom/torch-2.11-fragmentation.txt: 40 GiB asked, 90.23 GiB cached in pieces */
	gpumon_oom_input in = torch_said(40.00, 10.38, 129.41, 38.67, 90.23);
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_FRAGMENTATION, "40 GiB asked with 90 GiB cached: fragmentation");
	is_int(d.causes, GPUMON_OOM_BIT(GPUMON_OOM_FRAGMENTATION), "and nothing else (not pre-allocation, not a peak)");
	is_int(d.cached_bytes, (uint64_t)(90.23 * GIB), "the cached bytes");
	is_int(d.request_bytes, 40 * GIB, "the request");
	is_int(d.shortfall_bytes, 0, "nothing was missing: it was there, in pieces");
	in.known |= GPUMON_OOM_F_SNAPSHOT;
	in.snapshot.largest_free_bytes = 12 * MIB;
	d = diagnose(&in);
	is_int(d.largest_free_bytes, 12 * MIB, "the snapshot's largest free piece is told");
	in.snapshot.largest_free_bytes = 41 * GIB;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_FRAGMENTATION), "a free piece as large as the request: not fragmentation");
	in = torch_said(40.00, 10.38, 129.41, 38.67, 2.0);
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_FRAGMENTATION), "2 GiB cached of a 140 GiB card: no real share, not fragmentation");
	in = torch_said(20.00, 7.06, 139.5, 125.35, 13.93); /* cached < request, but with the free memory enough */
	d = diagnose(&in);
	ok(HOLDS(d, GPUMON_OOM_FRAGMENTATION), "13.9 GiB cached + 7 GiB free for 20 GiB: fragmentation");
	is_int(d.available_bytes, in.figures.free_bytes + in.figures.reserved_bytes - in.figures.allocated_bytes,
	       "available: the card's free memory and the cache");

	/* tests/fixtures/oom/torch-2.11-fraction.txt: a cap of 34.95 GiB, 105 GiB free on the card */
	in = torch_said(1.0, 105.29, 34.51, 34.00, 0);
	in.figures.known |= GPUMON_FIG_CAP;
	in.figures.cap_bytes = (uint64_t)(34.95 * GIB);
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CAP, "set_per_process_memory_fraction: the job's own cap");
	is_int(d.cap_bytes, (uint64_t)(34.95 * GIB), "the cap");
	ok(!HOLDS(d, GPUMON_OOM_TOO_BIG), "not too big: it would fit the card");
	in.known |= GPUMON_OOM_F_STEADY; /* climbing from its start to the cap: still not "too big" */
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_TOO_BIG), "climbing to a cap is not too big for the card");
	in.figures.cap_bytes = (uint64_t)(139.0 * GIB);
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_CAP), "a cap at 99 %% of the card is no cap of the job's");

	/* tests/fixtures/oom/torch-2.11-cotenant.txt: another process holds 60.60 GiB */
	in = torch_said(1.0, 0.685, 78.51, 78.00, 0);
	in.others_bytes = (uint64_t)(60.60 * GIB);
	in.top_other_pid = 870;
	in.top_other_bytes = in.others_bytes;
	in.known |= GPUMON_OOM_F_GROWTH;
	in.growth_bytes = 77 * GIB;
	in.growth_seconds = 4.2;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CO_TENANT, "60 GiB held by another process: co-tenant");
	is_int(d.growth_bytes, 77 * GIB, "with the job's own growth");
	ok(d.growth_seconds > 4.1 && d.growth_seconds < 4.3, "and its time");
	in.figures.free_bytes = 2 * GIB;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_CO_TENANT), "the card had room for the 1 GiB asked: the others did not cause it");
	in = torch_said(10.0, 0.5, 50, 50, 0);
	in.others_bytes = 2 * GIB;
	in.figures.free_bytes = 0;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_CO_TENANT), "others hold 2 GiB, under 10 %% of the card: no co-tenant");
	in.others_bytes = 15 * GIB; /* 15 GiB of others, 9.5 GiB missing: they made the difference */
	d = diagnose(&in);
	ok(HOLDS(d, GPUMON_OOM_CO_TENANT), "others hold more than was missing: co-tenant");
	in.figures.request_bytes = 40 * GIB; /* 40 GiB missing, others hold 15: not theirs alone */
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_CO_TENANT), "others hold less than was missing: not the co-tenant's doing");

	/* tests/fixtures/oom/torch-2.11-too-big.txt: 200 GiB asked of a 139.80 GiB card, before any step */
	in = torch_said(200.0, 139.29, 0.506, 0, 0);
	in.known |= GPUMON_OOM_F_STEADY;
	in.steady = 0;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_TOO_BIG, "200 GiB asked before any steady level: too big");
	is_int(d.shortfall_bytes, (uint64_t)(200.0 * GIB) - (uint64_t)(139.29 * GIB), "short by what was asked beyond what was free");
	in.steady = 1;
	in.steady_bytes = 10 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_TRANSIENT_PEAK, "the same after a steady level of 10 GiB: a transient peak");
	is_int(d.excess_bytes, 190 * GIB, "its excess over the usual level");
	ok(!HOLDS(d, GPUMON_OOM_TOO_BIG), "and not too big from the start");
	in = torch_said(100.0, 30, 45, 40, 0); /* a peak against a level it never held */
	in.known |= GPUMON_OOM_F_STEADY | GPUMON_OOM_F_FLOOR;
	in.steady = 0;
	in.floor_bytes = 0;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_TRANSIENT_PEAK), "no steady level: never a transient peak, whatever the floor");
	is_int(d.cause, GPUMON_OOM_TOO_BIG, "140 GiB needed before a steady level on a 139.8 GiB card: too big");
	in.figures.request_bytes = 50 * GIB;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_TOO_BIG), "90 GiB needed would fit the card alone: not too big");

	/* tests/fixtures/oom/torch-2.11-outside.txt: 6 GiB from cuMemAlloc beside torch's 133 GiB */
	in = torch_said(1.0, 0.286, 139.51, 133.00, 0);
	d = diagnose(&in);
	ok(HOLDS(d, GPUMON_OOM_OUTSIDE), "6.5 GiB outside the allocator: said");
	is_int(d.outside_bytes, (uint64_t)(139.51 * GIB) - (uint64_t)(133.00 * GIB), "its size");
	in = torch_said(1.0, 0.286, 133.51, 133.00, 0); /* the CUDA context alone */
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_OUTSIDE), "half a GiB outside (the context): not a cause");
	in = torch_said(40.00, 10.38, 135.41, 38.67, 90.23); /* fragmentation and 6 GiB outside together */
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_FRAGMENTATION, "fragmentation first ...");
	ok(HOLDS(d, GPUMON_OOM_OUTSIDE), "... outside the allocator said with it");

	/* JAX's limit (tests/fixtures/oom/jax-0.11-prealloc.txt with memory_stats at the moment) */
	memset(&in, 0, sizeof in);
	in.known = GPUMON_OOM_F_TOTAL | GPUMON_OOM_F_FIGURES;
	in.total_bytes = 143771ull * MIB;
	in.top_other_pid = -1;
	in.rise_seconds = -1;
	in.figures.known = GPUMON_FIG_REQUEST | GPUMON_FIG_CAP | GPUMON_FIG_ALLOCATED | GPUMON_FIG_RESERVED |
			   GPUMON_FIG_PEAK | GPUMON_FIG_LARGEST_FREE;
	in.figures.request_bytes = GIB;
	in.figures.cap_bytes = 112583507968ull;
	in.figures.reserved_bytes = 112583507968ull;
	in.figures.allocated_bytes = 111669149696ull;
	in.figures.peak_bytes = 111669150208ull;
	in.figures.largest_free_bytes = 914357760ull;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CAP, "JAX at XLA's 75 %% limit: the job's own cap");
	ok(!HOLDS(d, GPUMON_OOM_PREALLOCATION), "its pool in use: no pre-allocation");

	/* a fragmented cache looks like a pool reserved up front: it is not pre-allocation */
	in = torch_said(40.00, 10.38, 129.41, 38.67, 90.23);
	in.known |= GPUMON_OOM_F_FRAMEWORK;
	in.reserved_bytes = in.figures.reserved_bytes;
	in.allocated_bytes = in.figures.allocated_bytes;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_PREALLOCATION), "fragmentation is not pre-allocation");
	in.figures.known &= ~(unsigned)GPUMON_FIG_REQUEST; /* without the request: the old rule stands */
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_PREALLOCATION, "no request known: 129 GiB reserved, 39 GiB used: pre-allocation");
	in.figures.known |= GPUMON_FIG_PEAK;
	in.figures.peak_bytes = 120 * GIB;
	d = diagnose(&in);
	ok(!HOLDS(d, GPUMON_OOM_PREALLOCATION), "a peak of 120 GiB once in use: cached after use, not pre-allocated");

	/* --limit reached (the model sets F_LIMIT when a job process held it) */
	in = base();
	in.known |= GPUMON_OOM_F_LIMIT;
	in.total_bytes = in.limit_bytes = 40 * GIB;
	in.used_bytes = 40 * GIB;
	d = diagnose(&in);
	is_int(d.cause, GPUMON_OOM_CAP, "at gpumon run --limit: the cap");
	is_int(d.cap_bytes, 40 * GIB, "the limit as the cap");

	/* the names every front end says */
	is_str(gpumon_oom_cause_name(GPUMON_OOM_FRAGMENTATION), "fragmentation", "name: fragmentation");
	is_str(gpumon_oom_cause_name(GPUMON_OOM_OUTSIDE), "outside the allocator", "name: outside");
	is_str(gpumon_oom_cause_name(GPUMON_OOM_TOO_BIG), "too big", "name: too big");
	is_str(gpumon_oom_cause_name(99), "unknown", "name of an unknown code");
}

static void test_oom_messages(void)
{
	static const struct {
		const char *line, *want;
	} cases[] = {
	    {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total "
	     "capacity of 139.81 GiB of which 1.20 GiB is free.",
	     "PyTorch"},
	    {"RuntimeError: CUDA out of memory. Tried to allocate 2.00 MiB (GPU 0; 79.15 GiB total capacity)",
	     "PyTorch"},
	    {"torch.cuda.OutOfMemoryError: CUDA error", "PyTorch"},
	    {"ResourceExhaustedError: ", "Paddle"},
	    {"Out of memory error on GPU 0. Cannot allocate 1.250000GB memory on GPU 0, 79.1GB memory has "
	     "been allocated and available memory is only 512.0MB.",
	     "Paddle"},
	    {"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
	     "allocate 85899345920 bytes.",
	     "JAX/XLA"},
	    {"2024-05-01 12:00:00.000000: W tensorflow/core/common_runtime/bfc_allocator.cc:479] OOM when "
	     "allocating tensor with shape[1024,1024,1024] and type float",
	     "TensorFlow"},
	    {"cudaErrorMemoryAllocation: out of memory", "CUDA"},
	    {"CUDA_ERROR_OUT_OF_MEMORY: out of memory", "CUDA"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
		is_str(gpumon_oom_message_match(cases[i].line, strlen(cases[i].line)), cases[i].want, "%s: %.40s...",
		       cases[i].want, cases[i].line);

	/* TensorFlow raises its out-of-memory as a ResourceExhaustedError too: the line names both */
	const char *tf = "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
			 "tensor with shape[10000,10000] and type float on /job:localhost/replica:0/task:0/device:GPU:0";
	is_str(gpumon_oom_message_match(tf, strlen(tf)), "TensorFlow", "TensorFlow's exception line: TensorFlow");

	const char *plain[] = {"epoch 3: loss 0.123", "out of memory", "Killed", "", "CUDA out of"};
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
		ok(gpumon_oom_message_match(plain[i], strlen(plain[i])) == NULL, "no match: \"%s\"", plain[i]);
	ok(gpumon_oom_message_match(NULL, 10) == NULL, "NULL: no match");

	/* the line need not end in NUL: only len bytes are read */
	char buf[64];
	memcpy(buf, "xx CUDA out of memory yy", 24);
	memset(buf + 24, 'z', sizeof buf - 24);
	is_str(gpumon_oom_message_match(buf, 24), "PyTorch", "a line without a NUL");
	ok(gpumon_oom_message_match(buf, 20) == NULL, "a match cut by len is no match");

	size_t longest = gpumon_oom_message_longest();
	ok(longest >= strlen("RESOURCE_EXHAUSTED: Out of memory") && longest < 64,
	   "the longest text looked for: %zu bytes", longest);
}

int main(void)
{
	test_peaks();
	test_oom_co_tenant_and_leak();
	test_oom_preallocation_and_peak();
	test_oom_causes();
	test_oom_messages();
	return tap_done();
}
