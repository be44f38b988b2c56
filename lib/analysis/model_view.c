/* SPDX-License-Identifier: MIT */
/* model_view.c — the run model's typed answers (gpumon.h, "typed answers"): the source, the GPUs,
 * a process's identity, the framework sources and the events, each read from the model's state
 * once here, so that the document (../sinks/document.c) and every front end take the same
 * figures from the same place. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"

/* Copies full (full_size bytes, its first member the size) into out, keeping out->size: an older,
 * smaller struct gets the fields it has. min: the first version's size. 0, or GPUMON_E_INVAL. */
static int give(void *out, const void *full, size_t full_size, size_t min)
{
	unsigned size;
	if (!out)
		return GPUMON_E_INVAL;
	memcpy(&size, out, sizeof size);
	if (size < min || size > full_size)
		return GPUMON_E_INVAL;
	memcpy((char *)out + sizeof size, (const char *)full + sizeof size, size - sizeof size);
	return GPUMON_OK;
}

/* Whether out's size is one give() takes. */
static int size_ok(const void *out, size_t full_size, size_t min)
{
	unsigned size;
	if (!out)
		return 0;
	memcpy(&size, out, sizeof size);
	return size >= min && size <= full_size;
}

uint64_t gpumon__model_end(const gpumon_model *m)
{
	return m->end_t > m->last_t ? m->end_t : m->last_t;
}

int gpumon_model_source_get(const gpumon_model *m, gpumon_model_source *out)
{
	if (!m || !size_ok(out, sizeof *out, sizeof *out))
		return GPUMON_E_INVAL;
	gpumon_model_source s = {.size = sizeof s};
	s.path = m->source && m->source[0] ? m->source : NULL;
	s.type = m->source_type;
	s.kind = m->meta.kind && m->meta.kind[0] ? m->meta.kind : NULL;
	s.command = m->meta.command;
	s.host = m->meta.host && m->meta.host[0] ? m->meta.host : NULL;
	if (m->meta.start_wall_ns > 0) {
		time_t t = (time_t)(m->meta.start_wall_ns / 1000000000u);
		struct tm tm;
		gmtime_r(&t, &tm);
		strftime(s.start_utc, sizeof s.start_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
	}
	s.duration_known = m->records > 0;
	s.duration_s = gpumon__model_seconds(m, gpumon__model_end(m));
	s.exit_status = m->exit_status >= 0 ? m->exit_status : -1;
	s.records = m->records;
	s.names_processes = !(m->source_type && !strcmp(m->source_type, "csv"));
	s.events_dropped = m->events_dropped;
	return give(out, &s, sizeof s, sizeof s);
}

int gpumon_model_damage_get(const gpumon_model *m, char **text)
{
	if (!m || !text)
		return GPUMON_E_INVAL;
	*text = NULL;
	if (!m->out_of_range) {
		if (m->damage && !(*text = strdup(m->damage)))
			return GPUMON_E_NOMEM;
		return GPUMON_OK;
	}
	char note[256];
	snprintf(note, sizeof note, "%llu record%s with a byte figure of 1 PiB or more left out (the first: %s)",
		 (unsigned long long)m->out_of_range, m->out_of_range == 1 ? "" : "s", m->out_of_range_first);
	size_t n = (m->damage ? strlen(m->damage) + 2 : 0) + strlen(note) + 1;
	if (!(*text = malloc(n)))
		return GPUMON_E_NOMEM;
	snprintf(*text, n, "%s%s%s", m->damage ? m->damage : "", m->damage ? "; " : "", note);
	return GPUMON_OK;
}

int gpumon_model_gpu_get(const gpumon_model *m, size_t i, gpumon_model_gpu *out)
{
	if (!m || !size_ok(out, sizeof *out, sizeof *out))
		return GPUMON_E_INVAL;
	unsigned d = 0;
	for (size_t k = 0; d < m->ndev; d++)
		if (m->dev[d].seen && k++ == i)
			break;
	if (d >= m->ndev)
		return GPUMON_E_NOT_FOUND;
	const struct mdev *x = &m->dev[d];
	uint64_t end = gpumon__model_end(m);
	gpumon_model_gpu g = {.size = sizeof g, .dev = d};
	memcpy(g.name, x->info.name, sizeof g.name);
	memcpy(g.uuid, x->info.uuid, sizeof g.uuid);
	memcpy(g.pci_bus_id, x->info.pci_bus_id, sizeof g.pci_bus_id);
	g.name[sizeof g.name - 1] = g.uuid[sizeof g.uuid - 1] = g.pci_bus_id[sizeof g.pci_bus_id - 1] = 0;
	g.total_bytes = gpumon__model_total(m, (int)d);
	g.lost = x->lost || x->info.lost;
	g.lost_t_ns = x->lost_t;
	g.host = x->host;
	g.peak_known = gpumon_peaks_global(x->peaks, &g.peak) == GPUMON_OK;
	g.job_known = x->job_seen;
	g.job_peak_known = x->job_seen && gpumon_peaks_global(x->job_peaks, &g.job_peak) == GPUMON_OK;
	g.others_at_job_peak_bytes = x->job_seen ? x->others_at_job_top : 0;
	g.others_peak_bytes = x->others_peak;
	/* the job's figure held from its last point to the end counts in its mean */
	long double integral = x->job_integral;
	if (x->job_seen && end > x->job_integral_t)
		integral += (long double)x->job_bytes * (long double)(end - x->job_integral_t);
	g.job_mean_known = x->job_seen && end > x->job_first_t;
	if (g.job_mean_known)
		g.job_mean_bytes = (uint64_t)(int64_t)(integral / (long double)(end - x->job_first_t));
	return give(out, &g, sizeof g, sizeof g);
}

int gpumon_model_who_get(const gpumon_model *m, int dev, unsigned pid, gpumon_model_who *out)
{
	if (!m || !size_ok(out, sizeof *out, sizeof *out))
		return GPUMON_E_INVAL;
	const struct mproc *best = NULL;
	const gpumon_owner *owner = NULL;
	for (size_t i = 0; i < m->nprocs; i++) {
		const struct mproc *p = &m->procs[i];
		if (p->pid != pid || (dev >= 0 && p->dev != (unsigned)dev))
			continue;
		if (!best || (!best->command[0] && p->command[0]))
			best = p;
		if (!owner && p->owner)
			owner = p->owner;
	}
	gpumon_model_who w = {.size = sizeof w, .pid = pid, .rank = -1};
	if (best) {
		memcpy(w.user, best->user, sizeof w.user);
		memcpy(w.command, best->command, sizeof w.command);
		w.user[sizeof w.user - 1] = w.command[sizeof w.command - 1] = 0;
		w.rank = best->rank.rank >= 0 ? best->rank.rank : -1;
	}
	if (owner && gpumon_owner_describe(owner, w.owner, sizeof w.owner)) {
		w.owner_known = 1;
		w.owner_parts = *owner;
	} else {
		w.owner[0] = 0;
	}
	int st = give(out, &w, sizeof w, sizeof w);
	return st == GPUMON_OK && !best ? GPUMON_E_NOT_FOUND : st;
}

void gpumon__model_placed_fill(const struct mseg *s, gpumon_placed *out)
{
	memset(out, 0, sizeof *out);
	out->t_ns = s->placed.t_ns;
	out->step = s->placed.step;
	memcpy(out->framework, s->framework, sizeof out->framework);
	gpumon_placed_split(s->placed.nvml, s->placed.reserved, s->placed.allocated, out);
}

/* GPUMON_UNACCOUNTED_* of a source whose unaccounted memory is not known. */
static int unaccounted_why(const struct mseg *s)
{
	switch (s->unacc_why) {
	case MAP_UNKNOWN: return GPUMON_UNACCOUNTED_DEVICE_UNKNOWN;
	case MAP_NOT_VISIBLE: return GPUMON_UNACCOUNTED_NOT_VISIBLE;
	case MAP_MIG: return GPUMON_UNACCOUNTED_MIG;
	case MAP_NO_GPU: return GPUMON_UNACCOUNTED_NO_GPU;
	case MAP_NO_NVML_FIGURE: return GPUMON_UNACCOUNTED_NO_NVML_FIGURE;
	}
	return GPUMON_UNACCOUNTED_NOT_SAID;
}

int gpumon_model_framework_get(const gpumon_model *m, size_t i, gpumon_model_framework *out)
{
	if (!m || !size_ok(out, sizeof *out, sizeof *out))
		return GPUMON_E_INVAL;
	if (i >= m->nsegs)
		return GPUMON_E_NOT_FOUND;
	const struct mseg *s = &m->segs[i];
	gpumon_model_framework f = {.size = sizeof f, .pid = s->pid, .device = s->device >= 0 ? s->device : -1,
				    .segment = s->segment, .points = s->points};
	memcpy(f.framework, s->framework, sizeof f.framework);
	f.framework[sizeof f.framework - 1] = 0;
	int dev = gpumon__model_map_device(m, s->pid, s->device);
	f.dev = dev >= 0 ? dev : -1;
	f.allocated_peak_bytes = s->allocated_peak;
	f.reserved_peak_bytes = s->reserved_peak;
	f.fragmentation = s->frag;
	f.unaccounted = s->unacc;
	f.unaccounted_why = s->unacc.known ? GPUMON_UNACCOUNTED_KNOWN : unaccounted_why(s);
	f.placed_known = s->placed.known;
	if (f.placed_known)
		gpumon__model_placed_fill(s, &f.placed);
	return give(out, &f, sizeof f, sizeof f);
}

int gpumon_model_event_get(const gpumon_model *m, size_t i, gpumon_model_event *out)
{
	if (!m || !size_ok(out, sizeof *out, sizeof *out))
		return GPUMON_E_INVAL;
	if (i >= m->nevents)
		return GPUMON_E_NOT_FOUND;
	const struct mevent *e = &m->events[i];
	gpumon_model_event v = {.size = sizeof v, .t_ns = e->t_ns, .kind = e->kind, .text = e->text,
				.dev = e->dev >= 0 ? e->dev : -1};
	return give(out, &v, sizeof v, sizeof v);
}
