/* SPDX-License-Identifier: MIT */
/* oom.c — out-of-memory forensics: which of the usual causes (another process on the card, a leak,
 * the job's own cap, fragmentation of the allocator's cache, memory outside the allocator, an
 * allocator that pre-reserved the card, a job too big from the start, a transient peak) the
 * figures at the moment of death point to — several may hold — as codes and figures the front
 * ends word. */
#include <gpumon/gpumon.h>

#include <string.h>

/* Another process "holds the card" when it takes at least this share of it (and 1 GiB). */
#define CO_TENANT_SHARE 0.10
#define GIB (1024.0 * 1024.0 * 1024.0)
/* Pre-allocation: the allocator holds at least this share of the card ... */
#define PREALLOC_RESERVED_SHARE 0.5
/* ... and tensors use less than this share of what it holds. */
#define PREALLOC_IN_USE_SHARE 0.5
/* Without the framework's figures: the job took this share of the card in its first seconds. */
#define PREALLOC_EARLY_SHARE 0.75
/* A transient peak: the climb above the usual level is at least this share of the card ... */
#define TRANSIENT_SHARE 0.15
/* ... and took at most this long. */
#define TRANSIENT_SECONDS 10.0
/* Fragmentation: the allocator's free memory is at least this share of the card (and could have
   held the request, with the card's free memory, had it been in one piece). */
#define FRAGMENTATION_SHARE 0.05
/* Outside the allocator: beyond its reserved memory the process holds at least this much and this
   share of the card (a CUDA context alone takes about 0.5 GiB). */
#define OUTSIDE_BYTES (1.5 * GIB)
#define OUTSIDE_SHARE 0.03
/* A cap is the job's own when it is below this share of the card. */
#define CAP_SHARE 0.97
/* Without a request figure: a job alone on the card that filled this share of it. */
#define FULL_SHARE 0.97
/* The job's own growth next to a co-tenant is worth saying from this much on. */
#define GROWTH_BYTES GIB

static int has(const gpumon_oom_input *in, unsigned f)
{
	return (in->known & f) == f;
}

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* The figures the causes are told from: what the framework said at the moment, else the
   allocator's last figures before it and its snapshot. A field is known when its bit is set. */
struct view {
	unsigned known; /* GPUMON_FIG_* */
	uint64_t request, capacity, free, process, allocated, reserved, cap, peak, cached, largest_free;
	int cached_known, largest_free_known;
};

static void view_of(const gpumon_oom_input *in, struct view *v)
{
	memset(v, 0, sizeof *v);
	if (has(in, GPUMON_OOM_F_FIGURES)) {
		const gpumon_oom_figures *f = &in->figures;
		v->known = f->known;
		v->request = f->request_bytes;
		v->capacity = f->capacity_bytes;
		v->free = f->free_bytes;
		v->process = f->process_bytes;
		v->allocated = f->allocated_bytes;
		v->reserved = f->reserved_bytes;
		v->cap = f->cap_bytes;
		v->peak = f->peak_bytes;
		v->largest_free = f->largest_free_bytes;
		v->largest_free_known = !!(f->known & GPUMON_FIG_LARGEST_FREE);
	}
	if (!(v->known & GPUMON_FIG_CAPACITY) && has(in, GPUMON_OOM_F_TOTAL) && !has(in, GPUMON_OOM_F_LIMIT)) {
		v->capacity = in->total_bytes;
		v->known |= GPUMON_FIG_CAPACITY;
	}
	if (!(v->known & (GPUMON_FIG_ALLOCATED | GPUMON_FIG_RESERVED)) && has(in, GPUMON_OOM_F_FRAMEWORK)) {
		v->allocated = in->allocated_bytes;
		v->reserved = in->reserved_bytes;
		v->known |= GPUMON_FIG_ALLOCATED | GPUMON_FIG_RESERVED;
	}
	if (!(v->known & GPUMON_FIG_PROCESS) && has(in, GPUMON_OOM_F_PROCESS)) {
		v->process = in->process_bytes;
		v->known |= GPUMON_FIG_PROCESS;
	}
	const gpumon_alloc_snapshot *s = &in->snapshot;
	if (has(in, GPUMON_OOM_F_SNAPSHOT)) {
		if (!(v->known & GPUMON_FIG_REQUEST) && (s->known & GPUMON_SNAP_REQUEST)) {
			v->request = s->request_bytes;
			v->known |= GPUMON_FIG_REQUEST;
		}
		if (!(v->known & (GPUMON_FIG_ALLOCATED | GPUMON_FIG_RESERVED))) {
			v->allocated = s->allocated_bytes;
			v->reserved = s->reserved_bytes;
			v->known |= GPUMON_FIG_ALLOCATED | GPUMON_FIG_RESERVED;
		}
		v->largest_free = s->largest_free_bytes;
		v->largest_free_known = 1;
	}
	if ((v->known & GPUMON_FIG_ALLOCATED) && (v->known & GPUMON_FIG_RESERVED) && v->reserved >= v->allocated) {
		v->cached = v->reserved - v->allocated;
		v->cached_known = 1;
	}
	if (has(in, GPUMON_OOM_F_LIMIT) && in->limit_bytes && (!(v->known & GPUMON_FIG_CAP) || in->limit_bytes < v->cap)) {
		v->cap = in->limit_bytes;
		v->known |= GPUMON_FIG_CAP;
	}
}

/* The main cause among those that hold, by what a user should look at first. */
static const int order[] = {GPUMON_OOM_CAP,          GPUMON_OOM_CO_TENANT, GPUMON_OOM_LEAK,
			    GPUMON_OOM_FRAGMENTATION, GPUMON_OOM_PREALLOCATION, GPUMON_OOM_TOO_BIG,
			    GPUMON_OOM_TRANSIENT_PEAK, GPUMON_OOM_OUTSIDE};

int gpumon_oom_diagnose(const gpumon_oom_input *in, gpumon_oom_diagnosis *out)
{
	if (!in || !out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	struct view v;
	view_of(in, &v);
	double total = has(in, GPUMON_OOM_F_TOTAL) ? (double)in->total_bytes : 0;
	double capacity = (v.known & GPUMON_FIG_CAPACITY) ? (double)v.capacity : total;
	int request = !!(v.known & GPUMON_FIG_REQUEST), free_known = !!(v.known & GPUMON_FIG_FREE);
	/* a cap below the card (--limit is one when a job process reached it: the model says so) */
	int cap = (v.known & GPUMON_FIG_CAP) &&
		  (has(in, GPUMON_OOM_F_LIMIT) || (capacity > 0 && (double)v.cap < CAP_SHARE * capacity));
	unsigned causes = 0;
	if (request)
		out->request_bytes = v.request;
	/* what the allocator could still have given: the card's free memory, or the room left under the
	   cap when that is less, and its own free memory */
	int available_known = request && free_known;
	if (available_known) {
		uint64_t room = v.free;
		if (cap && (v.known & GPUMON_FIG_RESERVED) && minus(v.cap, v.reserved) < room)
			room = minus(v.cap, v.reserved);
		out->available_bytes = room + (v.cached_known ? v.cached : 0);
		out->shortfall_bytes = minus(v.request, out->available_bytes);
	}
	uint64_t demand = v.allocated + v.request; /* in use once the request had been served */
	int demand_known = request && (v.known & GPUMON_FIG_ALLOCATED);

	/* the job's own cap, reached while the card had more */
	if (cap && (has(in, GPUMON_OOM_F_LIMIT) ||
		    (request && (v.known & GPUMON_FIG_RESERVED) && v.reserved + v.request > v.cap))) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_CAP);
		out->cap_bytes = v.cap;
	}
	/* other processes held what the job needed (not when the card had room for the request) */
	int card_had_room = request && free_known && v.free >= v.request;
	if (total > 0 && has(in, GPUMON_OOM_F_OTHERS) && (double)in->others_bytes >= CO_TENANT_SHARE * total &&
	    (double)in->others_bytes >= GIB && !card_had_room &&
	    !(available_known && out->shortfall_bytes && in->others_bytes < out->shortfall_bytes)) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_CO_TENANT);
		if (has(in, GPUMON_OOM_F_GROWTH) && in->growth_bytes >= GROWTH_BYTES) {
			out->growth_bytes = in->growth_bytes;
			out->growth_seconds = in->growth_seconds;
		}
	}
	int leaking = has(in, GPUMON_OOM_F_LEAK) && in->leak.verdict == GPUMON_LEAK_SUSPECTED;
	if (leaking)
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_LEAK);
	/* enough free memory in the allocator's hands, none of it in one piece large enough */
	if (request && v.cached_known && capacity > 0 && (double)v.cached >= FRAGMENTATION_SHARE * capacity &&
	    (v.cached >= v.request || (available_known && out->available_bytes >= v.request)) &&
	    !(v.largest_free_known && v.largest_free >= v.request)) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_FRAGMENTATION);
		out->cached_bytes = v.cached;
		if (v.largest_free_known)
			out->largest_free_bytes = v.largest_free;
	}
	/* most of the card reserved and little of it in use: taken up front, not cached after use */
	int in_use_once = (v.known & GPUMON_FIG_PEAK) && (v.known & GPUMON_FIG_RESERVED) &&
			  (double)v.peak >= PREALLOC_IN_USE_SHARE * (double)v.reserved;
	if (!(causes & GPUMON_OOM_BIT(GPUMON_OOM_FRAGMENTATION)) && !in_use_once && total > 0) {
		if ((v.known & GPUMON_FIG_ALLOCATED) && (v.known & GPUMON_FIG_RESERVED)) {
			if ((double)v.reserved >= PREALLOC_RESERVED_SHARE * total &&
			    (double)v.allocated < PREALLOC_IN_USE_SHARE * (double)v.reserved)
				causes |= GPUMON_OOM_BIT(GPUMON_OOM_PREALLOCATION);
		} else if (has(in, GPUMON_OOM_F_EARLY) && (double)in->early_bytes >= PREALLOC_EARLY_SHARE * total) {
			causes |= GPUMON_OOM_BIT(GPUMON_OOM_PREALLOCATION);
			out->also |= GPUMON_OOM_BY_EARLY_FIGURE;
		}
	}
	/* it failed before it ever held a level, and would not have fit alone on the card either */
	int climbing = has(in, GPUMON_OOM_F_STEADY) && !in->steady;
	if (climbing && capacity > 0 && demand_known && (double)demand > capacity) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_TOO_BIG);
		out->shortfall_bytes = minus(demand, (uint64_t)capacity) > out->shortfall_bytes
					       ? minus(demand, (uint64_t)capacity)
					       : out->shortfall_bytes;
	} else if (climbing && !demand_known && total > 0 && has(in, GPUMON_OOM_F_USED | GPUMON_OOM_F_OTHERS) &&
		   (double)in->used_bytes >= FULL_SHARE * total && (double)in->others_bytes < CO_TENANT_SHARE * total) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_TOO_BIG);
	}
	/* a demand well above the job's usual level: only against a level it really held */
	int baseline = !has(in, GPUMON_OOM_F_STEADY) || in->steady;
	if (baseline && has(in, GPUMON_OOM_F_STEADY) && demand_known && capacity > 0 && demand > in->steady_bytes &&
	    (double)(demand - in->steady_bytes) >= TRANSIENT_SHARE * capacity) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_TRANSIENT_PEAK);
		out->excess_bytes = demand - in->steady_bytes;
	} else if (baseline && total > 0 && has(in, GPUMON_OOM_F_FLOOR | GPUMON_OOM_F_USED) &&
		   in->used_bytes > in->floor_bytes && (double)(in->used_bytes - in->floor_bytes) >= TRANSIENT_SHARE * total &&
		   (in->rise_seconds < 0 || in->rise_seconds <= TRANSIENT_SECONDS)) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_TRANSIENT_PEAK);
		out->excess_bytes = in->used_bytes - in->floor_bytes;
	}
	/* memory the process holds beyond its allocator's */
	if ((v.known & GPUMON_FIG_PROCESS) && (v.known & GPUMON_FIG_RESERVED) && v.process > v.reserved &&
	    capacity > 0 && (double)(v.process - v.reserved) >= OUTSIDE_BYTES &&
	    (double)(v.process - v.reserved) >= OUTSIDE_SHARE * capacity) {
		causes |= GPUMON_OOM_BIT(GPUMON_OOM_OUTSIDE);
		out->outside_bytes = v.process - v.reserved;
	}
	out->causes = causes;
	out->cause = GPUMON_OOM_UNKNOWN;
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
		if (causes & GPUMON_OOM_BIT(order[i])) {
			out->cause = order[i];
			break;
		}
	if (out->cause == GPUMON_OOM_CO_TENANT && leaking)
		out->also |= GPUMON_OOM_ALSO_LEAK;
	if (out->cause != GPUMON_OOM_PREALLOCATION)
		out->also &= ~(unsigned)GPUMON_OOM_BY_EARLY_FIGURE;
	return GPUMON_OK;
}

const char *gpumon_oom_cause_name(int cause)
{
	switch (cause) {
	case GPUMON_OOM_LEAK: return "leak";
	case GPUMON_OOM_CO_TENANT: return "co-tenant";
	case GPUMON_OOM_TRANSIENT_PEAK: return "transient peak";
	case GPUMON_OOM_PREALLOCATION: return "pre-allocation";
	case GPUMON_OOM_FRAGMENTATION: return "fragmentation";
	case GPUMON_OOM_OUTSIDE: return "outside the allocator";
	case GPUMON_OOM_CAP: return "cap";
	case GPUMON_OOM_TOO_BIG: return "too big";
	}
	return "unknown";
}
