/* SPDX-License-Identifier: MIT */
/* scenario_state.c — the fake NVML's time model: the state of every GPU and process at time t,
 * replaying a parsed scenario's declarations and then its due `at` events in file order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"

int scn_state_init(struct scn_state *st, const struct scn *s)
{
	memset(st, 0, sizeof *st);
	st->ngpus = s->ngpus;
	st->nprocs = s->nslots;
	st->gpu = calloc(s->ngpus ? s->ngpus : 1, sizeof *st->gpu);
	st->proc = calloc(s->nslots ? s->nslots : 1, sizeof *st->proc);
	st->gpu_first = s->gpu_first;
	if (!st->gpu || !st->proc) {
		scn_state_free(st);
		return -1;
	}
	return 0;
}

void scn_state_free(struct scn_state *st)
{
	free(st->gpu);
	free(st->proc);
	st->gpu = NULL;
	st->proc = NULL;
	st->valid = 0;
}

static void set_bus(struct scn_gpu *g, uint64_t packed)
{
	unsigned dom = (unsigned)(packed >> 16) & 0xFFFF, bus = (unsigned)(packed >> 8) & 0xFF;
	unsigned dev = (unsigned)(packed >> 3) & 0x1F, fn = (unsigned)packed & 7;
	snprintf(g->bus_id, sizeof g->bus_id, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
	snprintf(g->bus_id_legacy, sizeof g->bus_id_legacy, "%04X:%02X:%02X.%X", dom, bus, dev, fn);
	g->pci_domain = dom;
	g->pci_bus = bus;
	g->pci_device = dev;
}

static void gpu_defaults(struct scn_gpu *g, unsigned index)
{
	memset(g, 0, sizeof *g);
	strcpy(g->name, "Fake GPU");
	snprintf(g->uuid, sizeof g->uuid, "GPU-00000000-0000-0000-0000-%012x", index);
	set_bus(g, (uint64_t)(index >> 8) << 16 | (index & 0xFF) << 8);
	g->total = 80ull << 30;
	g->temp_c = 30;
	g->power_mw = 100000;
	g->sm_mhz = 1500;
	g->mem_mhz = 2600;
	fake_props_defaults(&g->props);
}

static void gpu_set(struct scn_gpu *g, const struct scn *s, unsigned key, uint64_t v)
{
	switch (key) {
	case GK_NAME: snprintf(g->name, sizeof g->name, "%s", s->pool + v); break;
	case GK_UUID: snprintf(g->uuid, sizeof g->uuid, "%s", s->pool + v); break;
	case GK_BUS: set_bus(g, v); break;
	case GK_TOTAL: g->total = v; break;
	case GK_RESERVED: g->reserved = v; break;
	case GK_USED: g->used = v; break;
	case GK_UTIL: g->util = (unsigned)v; break;
	case GK_MEMUTIL: g->memutil = (unsigned)v; break;
	case GK_TEMP: g->temp_c = (unsigned)v; break;
	case GK_POWER: g->power_mw = (unsigned)v; break;
	case GK_ENERGY: g->energy_mj = v; break;
	case GK_SM: g->sm_mhz = (unsigned)v; break;
	case GK_MEM: g->mem_mhz = (unsigned)v; break;
	default:
		if (key >= GK_N) /* a property: fake_props.h */
			fake_props_set(&g->props, key - GK_N, v, s->pool);
		break;
	}
}

/* used at t: the base plus the growth since grow_t0, kept below USED_NA. */
static uint64_t grown(const struct scn_proc *pr, double t)
{
	double x = (double)pr->used_base + (double)pr->grow * (t > pr->grow_t0 ? t - pr->grow_t0 : 0);
	return x >= (double)(USED_NA - 1) ? USED_NA - 1 : (uint64_t)x;
}

static void proc_set(struct scn_proc *pr, const struct scn *s, unsigned key, uint64_t v, double t)
{
	switch (key) {
	case PK_USED:
		pr->used_known = v != USED_NA;
		pr->used = pr->used_base = pr->used_known ? v : 0;
		pr->grow_t0 = t;
		break;
	case PK_GROW: /* growth so far is kept; the new rate counts from t */
		pr->used = pr->used_base = grown(pr, t);
		pr->grow = v;
		pr->grow_t0 = t;
		break;
	case PK_TYPE: pr->type = (unsigned)v; break;
	case PK_NAME: pr->name = s->pool + v; break;
	case PK_GI: pr->gi = (unsigned)v; break;
	case PK_CI: pr->ci = (unsigned)v; break;
	}
}

static void apply(struct scn_state *st, const struct scn *s, const struct event *e)
{
	struct scn_proc *pr = st->proc + e->target;
	switch (e->kind) {
	case EV_GPU_SET: gpu_set(&st->gpu[e->target], s, e->key, e->val); return;
	case EV_GPU_LOST: st->gpu[e->target].lost = 1; return;
	}
	for (size_t i = 0; i < e->count; i++, pr++) {
		if (e->kind == EV_PROC_GONE) {
			pr->present = 0;
		} else if (e->kind == EV_PROC_SET) {
			proc_set(pr, s, e->key, e->val, e->t);
		} else if (!pr->present) {
			*pr = (struct scn_proc){.gpu = pr->gpu, .pid = pr->pid, .present = 1,
						.type = SCN_PROC_COMPUTE, .used_known = 1,
						.gi = NO_INSTANCE, .ci = NO_INSTANCE};
		}
	}
}

static void recompute(struct scn_state *st, const struct scn *s, double t);

void scn_state_update(struct scn_state *st, const struct scn *s, double t)
{
	if (!(st->valid && t >= st->valid_from && t < st->valid_until))
		recompute(st, s, t);
	for (size_t i = 0; i < st->nprocs; i++) /* grow= changes used between events */
		if (st->proc[i].grow && st->proc[i].used_known)
			st->proc[i].used = grown(&st->proc[i], t);
}

static void recompute(struct scn_state *st, const struct scn *s, double t)
{
	for (unsigned g = 0; g < st->ngpus; g++)
		gpu_defaults(&st->gpu[g], g);
	for (size_t i = 0; i < st->nprocs; i++)
		st->proc[i] = (struct scn_proc){.gpu = s->slot[i].gpu, .pid = s->slot[i].pid};
	for (size_t i = 0; i < s->ndecl; i++)
		apply(st, s, &s->decl[i]);
	st->valid_from = -HUGE_VAL;
	st->valid_until = HUGE_VAL;
	for (size_t i = 0; i < s->nat; i++) {
		const struct event *e = &s->at[i];
		if (e->t <= t) {
			apply(st, s, e);
			st->valid_from = e->t > st->valid_from ? e->t : st->valid_from;
		} else if (e->t < st->valid_until) {
			st->valid_until = e->t;
		}
	}
	st->valid = 1;
}
