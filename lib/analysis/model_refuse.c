/* SPDX-License-Identifier: MIT */
/* model_refuse.c — what the run model refuses to take: a record with a byte figure above
 * GPUMON_MAX_BYTES (a job's made-up sample, a hand-edited file), left out before it reaches a sum,
 * counted and the first described for the document's source.damage. */
#include <stdio.h>

#include "model.h"

/* The first byte figure of r above GPUMON_MAX_BYTES (its name into *what), or 0 when none is. */
static uint64_t out_of_range(const gpumon_record *r, const char **what)
{
	const gpumon_device_sample *d = &r->sample;
	const gpumon_framework_sample *f = &r->framework;
	const gpumon_process *proc = r->kind == GPUMON_REC_PROCESS ? r->process : NULL; /* every value below is read */
	const struct {
		int known;
		uint64_t v;
		const char *name;
	} fig[] = {
	    {r->kind == GPUMON_REC_DEVICE && (d->present & (GPUMON_F_MEMORY | GPUMON_F_MEMORY_USED)),
	     d->memory_used_bytes, "used"},
	    {r->kind == GPUMON_REC_DEVICE && (d->present & GPUMON_F_MEMORY), d->memory_free_bytes, "free"},
	    {r->kind == GPUMON_REC_DEVICE && (d->present & GPUMON_F_MEMORY), d->memory_total_bytes, "total"},
	    {r->kind == GPUMON_REC_DEVICE && (d->present & GPUMON_F_MEM_RESERVED), d->memory_reserved_bytes, "reserved"},
	    {r->kind == GPUMON_REC_DEVICE && r->interval_samples, r->used_max_bytes, "used at most"},
	    {r->kind == GPUMON_REC_DEVICE && r->interval_samples, r->used_min_bytes, "used at least"},
	    {proc && (proc->flags & GPUMON_PROC_USED_KNOWN), proc ? proc->used_bytes : 0, "used"},
	    {r->kind == GPUMON_REC_FRAMEWORK && f->allocated_known, f->allocated_bytes, "allocated"},
	    {r->kind == GPUMON_REC_FRAMEWORK && f->reserved_known, f->reserved_bytes, "reserved"},
	    {r->kind == GPUMON_REC_FRAMEWORK && f->max_allocated_known, f->max_allocated_bytes, "max_allocated"},
	    {r->kind == GPUMON_REC_FRAMEWORK, f->limit_bytes, "limit"},
	};
	for (size_t i = 0; i < sizeof fig / sizeof fig[0]; i++)
		if (fig[i].known && fig[i].v > GPUMON_MAX_BYTES) {
			*what = fig[i].name;
			return fig[i].v;
		}
	return 0;
}

int gpumon__model_refuse(gpumon_model *m, const gpumon_record *r)
{
	const char *what = NULL;
	uint64_t v = out_of_range(r, &what);
	if (!v)
		return 0;
	if (m->out_of_range++)
		return 1;
	char who[48];
	if (r->kind == GPUMON_REC_FRAMEWORK)
		snprintf(who, sizeof who, "a framework sample of pid %u", r->framework.pid);
	else if (r->kind == GPUMON_REC_PROCESS)
		snprintf(who, sizeof who, "pid %u on GPU %u", r->process->pid, r->dev);
	else
		snprintf(who, sizeof who, "GPU %u", r->dev);
	snprintf(m->out_of_range_first, sizeof m->out_of_range_first, "%s at %.3f s: %s %llu bytes", who,
		 gpumon__model_seconds(m, r->t_ns), what, (unsigned long long)v);
	return 1;
}

