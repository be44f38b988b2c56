/* SPDX-License-Identifier: MIT */
/* show_json.c — `gpumon show --json`: the same model as the text view as one JSON document, every
 * figure with its unit in its name and null where the driver does not say (docs/show-json.md,
 * checked against docs/show.schema.json by the tests). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "show.h"

const char *show_sort_name(enum show_sort s)
{
	static const char *const names[] = {"memory", "pid", "user", "gpu"};
	return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "memory";
}

/* A string as the terminal would show it (cli_safe_text: another process's text can hold escapes,
 * and bytes that are not UTF-8, which jansson refuses), or null when absent. */
static json_t *text(const char *s, int known)
{
	if (!known)
		return json_null();
	char *safe = cli_safe_text_dup(s);
	json_t *j = safe ? json_string(safe) : NULL;
	free(safe);
	return j;
}

static json_t *num(uint64_t v, int known)
{
	return known ? json_integer((json_int_t)v) : json_null();
}

/* Sets key to v (a new reference), counting a failure in *bad (v NULL: out of memory). */
static void set(json_t *o, const char *key, json_t *v, int *bad)
{
	if (!v || json_object_set_new(o, key, v) != 0)
		*bad = 1;
}

/* The memory health figures the card gave (null each when it did not) and the problems they call
 * for, by name; null when they could not be read. */
static json_t *health_object(const show_gpu *gpu, int *bad)
{
	const gpumon_device_props *h = &gpu->health;
	if (!h->size)
		return json_null();
	uint64_t has = h->present;
	json_t *o = json_object(), *problems = json_array();
	if (!o || !problems) {
		json_decref(o);
		json_decref(problems);
		*bad = 1;
		return NULL;
	}
	for (unsigned bit = 1; bit; bit <<= 1)
		if ((gpu->health_problems & bit) && gpumon_health_problem_name(bit) &&
		    json_array_append_new(problems, json_string(gpumon_health_problem_name(bit))))
			*bad = 1;
	set(o, "problems", problems, bad);
	set(o, "ecc_uncorrected_volatile", num(h->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_VOLATILE],
						has & GPUMON_P_ECC_TOTAL), bad);
	set(o, "ecc_corrected_volatile", num(h->ecc_total[GPUMON_ECC_CORRECTED][GPUMON_ECC_VOLATILE],
					      has & GPUMON_P_ECC_TOTAL), bad);
	set(o, "remapped_rows_pending",
	    (has & GPUMON_P_REMAPPED_ROWS) ? json_boolean(h->remapped_pending) : json_null(), bad);
	set(o, "remapped_rows_failure",
	    (has & GPUMON_P_REMAPPED_ROWS) ? json_boolean(h->remapped_failure) : json_null(), bad);
	set(o, "retired_pages_pending",
	    (has & GPUMON_P_RETIRED_PENDING) ? json_boolean(h->retired_pending) : json_null(), bad);
	return o;
}

static json_t *gpu_object(const show_gpu *gpu, int *bad)
{
	const gpumon_device_info *d = &gpu->info;
	const gpumon_device_sample *s = &gpu->s;
	int ok = gpu->status == GPUMON_OK;
	unsigned p = ok ? s->present : 0;
	json_t *o = json_object();
	if (!o) {
		*bad = 1;
		return NULL;
	}
	set(o, "index", json_integer(d->index), bad);
	set(o, "name", text(d->name, d->present & GPUMON_INFO_NAME), bad);
	set(o, "uuid", text(d->uuid, d->present & GPUMON_INFO_UUID), bad);
	set(o, "pci_bus_id", text(d->pci_bus_id, d->present & GPUMON_INFO_PCI_BUS_ID), bad);
	set(o, "lost", json_boolean(gpu->status == GPUMON_E_LOST), bad);
	set(o, "error", text(gpu->error, !ok && gpu->status != GPUMON_E_LOST), bad);
	set(o, "memory_total_bytes", num(s->memory_total_bytes, p & GPUMON_F_MEMORY), bad);
	set(o, "memory_used_bytes", num(s->memory_used_bytes, p & GPUMON_F_MEMORY), bad);
	set(o, "memory_free_bytes", num(s->memory_free_bytes, p & GPUMON_F_MEMORY), bad);
	set(o, "memory_reserved_bytes", num(s->memory_reserved_bytes, p & GPUMON_F_MEM_RESERVED), bad);
	/* the v1 memory call counts driver-reserved memory as used */
	set(o, "memory_used_includes_reserved",
	    (p & GPUMON_F_MEMORY) ? json_boolean(s->memory_api == GPUMON_MEMAPI_V1) : json_null(), bad);
	set(o, "utilization_gpu_pct", num(s->util_gpu_pct, p & GPUMON_F_UTIL_GPU), bad);
	set(o, "utilization_memory_pct", num(s->util_memory_pct, p & GPUMON_F_UTIL_MEMORY), bad);
	set(o, "temperature_c", num(s->temperature_c, p & GPUMON_F_TEMPERATURE), bad);
	set(o, "power_mw", num(s->power_mw, p & GPUMON_F_POWER), bad);
	set(o, "mig", d->mig ? json_pack("{s:i, s:o, s:o, s:o}", "gpu", (int)d->parent, "gpu_instance_id",
					      num(d->gpu_instance_id, d->present & GPUMON_INFO_MIG_IDS),
					      "compute_instance_id",
					      num(d->compute_instance_id, d->present & GPUMON_INFO_MIG_IDS), "profile",
					      text(d->mig_profile, d->present & GPUMON_INFO_MIG_PROFILE))
			     : json_null(), bad);
	set(o, "memory_health", health_object(gpu, bad), bad);
	set(o, "processes_listed",
	    gpu->procs == SHOW_PROCS_NOT_ASKED ? json_null() : json_boolean(gpu->procs == SHOW_PROCS_LISTED), bad);
	return o;
}

static json_t *process_object(const show_row *r, int *bad)
{
	const gpumon_process *p = &r->p;
	unsigned f = p->flags;
	json_t *o = json_object();
	if (!o) {
		*bad = 1;
		return NULL;
	}
	set(o, "gpu", json_integer(r->gpu), bad);
	set(o, "gpu_uuid", text(r->uuid, r->uuid != NULL), bad);
	set(o, "pid", json_integer(p->pid), bad);
	set(o, "used_bytes", num(p->used_bytes, f & GPUMON_PROC_USED_KNOWN), bad);
	set(o, "type",
	    json_string((f & GPUMON_PROC_COMPUTE) && (f & GPUMON_PROC_GRAPHICS) ? "compute+graphics"
			: (f & GPUMON_PROC_GRAPHICS)                       ? "graphics"
									   : "compute"),
	    bad);
	set(o, "user", text(p->user, f & GPUMON_PROC_USER_KNOWN), bad);
	set(o, "uid", num(p->uid, f & GPUMON_PROC_USER_KNOWN), bad);
	set(o, "name", text(p->name, f & GPUMON_PROC_NAME_KNOWN), bad);
	set(o, "command", text(p->cmdline, f & GPUMON_PROC_CMDLINE_KNOWN), bad);
	set(o, "owner", r->owner[0] ? json_string(r->owner) : json_null(), bad);
	set(o, "other_pid_namespace", json_boolean(f & GPUMON_PROC_FOREIGN), bad);
	set(o, "gpu_instance_id", num(p->gpu_instance_id, f & GPUMON_PROC_MIG), bad);
	set(o, "compute_instance_id", num(p->compute_instance_id, f & GPUMON_PROC_MIG), bad);
	return o;
}

/* Builds the document; NULL when out of memory. */
static json_t *document(const show_model *m)
{
	int bad = 0;
	json_t *doc = json_object(), *gpus = json_array(), *procs = m->processes ? json_array() : json_null();
	if (!doc || !gpus || !procs) {
		json_decref(doc), json_decref(gpus), json_decref(procs);
		return NULL;
	}
	set(doc, "host", text(m->host, 1), &bad);
	set(doc, "time", json_string(m->when_iso), &bad);
	set(doc, "driver_version", text(m->driver, m->driver[0] != 0), &bad);
	set(doc, "gpu_count", json_integer(m->gpu_count), &bad);
	set(doc, "user", text(m->user, m->user != NULL), &bad);
	set(doc, "sort", json_string(show_sort_name(m->sort)), &bad);
	for (unsigned k = 0; k < m->n_gpus && !bad; k++) {
		json_t *g = gpu_object(&m->gpus[k], &bad);
		if (g && json_array_append_new(gpus, g) != 0)
			bad = 1;
	}
	set(doc, "gpus", gpus, &bad);
	for (size_t i = 0; m->processes && i < m->n_rows && !bad; i++) {
		json_t *p = process_object(&m->rows[i], &bad);
		if (p && json_array_append_new(procs, p) != 0)
			bad = 1;
	}
	set(doc, "processes", procs, &bad);
	if (m->replay[0] && !bad) {
		json_t *r = json_object();
		if (!r)
			bad = 1;
		set(r, "file", text(m->replay, 1), &bad);
		set(r, "at_s", json_real(m->replay_at_s), &bad);
		set(r, "span_s", json_real(m->replay_span_s), &bad);
		set(doc, "replay", r, &bad);
	}
	if (bad) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}

int show_json(const show_model *m)
{
	json_t *doc = document(m);
	if (!doc)
		return -1;
	int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (rc != 0)
		return -1;
	putchar('\n');
	return 0;
}
