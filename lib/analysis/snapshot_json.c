/* SPDX-License-Identifier: MIT */
/* snapshot_json.c — the condensed allocator snapshot (gpumon_alloc_snapshot) as JSON and back, as a
 * recording keeps it (GPUMON_EVENT_SNAPSHOT) and the run model's document shows it: a document of a
 * few kilobytes, written and read with jansson. */
#include <gpumon/gpumon.h>

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "snapshot.h"

/* A NUL-terminated string of valid UTF-8 within size bytes. */
static int good_text(const char *s, size_t size)
{
	size_t n = strnlen(s, size), k;
	if (n == size)
		return 0;
	for (size_t i = 0; i < n; i += k)
		if (!(k = gpumon__utf8_len((const unsigned char *)s + i, n - i)))
			return 0;
	return 1;
}

static int good(const gpumon_alloc_snapshot *s)
{
	const uint64_t fig[] = {
	    s->reserved_bytes,	    s->allocated_bytes, s->free_bytes,	       s->largest_free_bytes,
	    s->unusable_free_bytes, s->segments,	s->segments_with_free, s->blocks,
	    s->unsited_bytes};
	if ((s->known & ~(unsigned)(GPUMON_SNAP_REQUEST | GPUMON_SNAP_STACKS | GPUMON_SNAP_DEVICE)) ||
	    ((s->known & GPUMON_SNAP_DEVICE) && s->device < 0) ||
	    ((s->known & GPUMON_SNAP_REQUEST) &&
	     (!s->request_bytes || s->request_bytes > GPUMON_MAX_BYTES)) ||
	    s->nsites > GPUMON_SNAPSHOT_SITES || s->nsegments > GPUMON_SNAPSHOT_SEGMENTS ||
	    !good_text(s->framework, sizeof s->framework))
		return 0;
	for (size_t i = 0; i < sizeof fig / sizeof fig[0]; i++)
		if (fig[i] > GPUMON_MAX_BYTES)
			return 0;
	for (unsigned i = 0; i < s->nsites; i++) {
		const gpumon_alloc_site *t = &s->sites[i];
		if (!good_text(t->file, sizeof t->file) || !good_text(t->function, sizeof t->function) ||
		    t->bytes > GPUMON_MAX_BYTES || t->blocks > GPUMON_MAX_BYTES)
			return 0;
	}
	for (unsigned i = 0; i < s->nsegments; i++) {
		const gpumon_alloc_segment *g = &s->top_segments[i];
		if (g->size_bytes > GPUMON_MAX_BYTES || g->allocated_bytes > GPUMON_MAX_BYTES ||
		    g->largest_free_bytes > GPUMON_MAX_BYTES || (g->expandable != 0 && g->expandable != 1))
			return 0;
	}
	return 1;
}

static int put(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

static json_t *num(uint64_t v)
{
	return json_integer((json_int_t)v); /* every figure is at most GPUMON_MAX_BYTES (good()) */
}

static json_t *encode_doc(const gpumon_alloc_snapshot *s)
{
	json_t *o = json_object(), *sites = json_array(), *segs = json_array();
	int bad = !o || !sites || !segs || put(o, "framework", json_string(s->framework)) ||
		  put(o, "pid", num(s->pid)) ||
		  ((s->known & GPUMON_SNAP_DEVICE) && put(o, "device", num((uint64_t)s->device))) ||
		  ((s->known & GPUMON_SNAP_REQUEST) && put(o, "request_bytes", num(s->request_bytes))) ||
		  put(o, "reserved_bytes", num(s->reserved_bytes)) ||
		  put(o, "allocated_bytes", num(s->allocated_bytes)) ||
		  put(o, "free_bytes", num(s->free_bytes)) ||
		  put(o, "largest_free_bytes", num(s->largest_free_bytes)) ||
		  put(o, "unusable_free_bytes", num(s->unusable_free_bytes)) ||
		  put(o, "segments", num(s->segments)) ||
		  put(o, "segments_with_free", num(s->segments_with_free)) ||
		  put(o, "blocks", num(s->blocks)) || put(o, "unsited_bytes", num(s->unsited_bytes)) ||
		  put(o, "stacks", json_boolean(s->known & GPUMON_SNAP_STACKS));
	for (unsigned i = 0; !bad && i < s->nsites; i++) {
		const gpumon_alloc_site *t = &s->sites[i];
		bad = json_array_append_new(sites,
					    json_pack("{s:s, s:I, s:s, s:I, s:I}", "file", t->file, "line",
						      (json_int_t)t->line, "function", t->function, "bytes",
						      (json_int_t)t->bytes, "blocks", (json_int_t)t->blocks));
	}
	for (unsigned i = 0; !bad && i < s->nsegments; i++) {
		const gpumon_alloc_segment *g = &s->top_segments[i];
		bad = json_array_append_new(
		    segs, json_pack("{s:I, s:I, s:I, s:b}", "size_bytes", (json_int_t)g->size_bytes,
				    "allocated_bytes", (json_int_t)g->allocated_bytes, "largest_free_bytes",
				    (json_int_t)g->largest_free_bytes, "expandable", g->expandable));
	}
	if (!bad && o) {
		bad = json_object_set(o, "sites", sites) || json_object_set(o, "top_segments", segs);
	}
	json_decref(sites);
	json_decref(segs);
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int gpumon_snapshot_encode(const gpumon_alloc_snapshot *s, char **json)
{
	if (json)
		*json = NULL;
	if (!s || !json || !good(s))
		return GPUMON_E_INVAL;
	json_t *o = encode_doc(s);
	char *t = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII) : NULL;
	json_decref(o);
	if (!t)
		return GPUMON_E_NOMEM;
	*json = strdup(t); /* from malloc, as every buffer gpumon_free() frees */
	free(t);
	return *json ? GPUMON_OK : GPUMON_E_NOMEM;
}

/* An integer in 0..max at key (optional: absent leaves *v and returns 0 when opt). */
static int get_u64(json_t *o, const char *key, uint64_t max, uint64_t *v, int opt)
{
	json_t *j = json_object_get(o, key);
	if (!j)
		return opt ? 0 : -1;
	if (!json_is_integer(j) || json_integer_value(j) < 0 || (uint64_t)json_integer_value(j) > max)
		return -1;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static int get_str(json_t *o, const char *key, char *dst, size_t size)
{
	json_t *j = json_object_get(o, key);
	if (!json_is_string(j) || json_string_length(j) >= size)
		return -1;
	memcpy(dst, json_string_value(j), json_string_length(j) + 1);
	return 0;
}

static int get_bool(json_t *o, const char *key, int *v)
{
	json_t *j = json_object_get(o, key);
	if (!json_is_boolean(j))
		return -1;
	*v = json_is_true(j);
	return 0;
}

static int decode_doc(json_t *o, gpumon_alloc_snapshot *s)
{
	uint64_t pid = 0, dev = UINT64_MAX, line;
	int stacks;
	json_t *sites = json_object_get(o, "sites"), *segs = json_object_get(o, "top_segments");
	if (!json_is_object(o) || get_str(o, "framework", s->framework, sizeof s->framework) ||
	    get_u64(o, "pid", UINT_MAX, &pid, 0) || get_u64(o, "device", INT_MAX, &dev, 1) ||
	    get_u64(o, "request_bytes", GPUMON_MAX_BYTES, &s->request_bytes, 1) ||
	    get_u64(o, "reserved_bytes", GPUMON_MAX_BYTES, &s->reserved_bytes, 0) ||
	    get_u64(o, "allocated_bytes", GPUMON_MAX_BYTES, &s->allocated_bytes, 0) ||
	    get_u64(o, "free_bytes", GPUMON_MAX_BYTES, &s->free_bytes, 0) ||
	    get_u64(o, "largest_free_bytes", GPUMON_MAX_BYTES, &s->largest_free_bytes, 0) ||
	    get_u64(o, "unusable_free_bytes", GPUMON_MAX_BYTES, &s->unusable_free_bytes, 0) ||
	    get_u64(o, "segments", GPUMON_MAX_BYTES, &s->segments, 0) ||
	    get_u64(o, "segments_with_free", GPUMON_MAX_BYTES, &s->segments_with_free, 0) ||
	    get_u64(o, "blocks", GPUMON_MAX_BYTES, &s->blocks, 0) ||
	    get_u64(o, "unsited_bytes", GPUMON_MAX_BYTES, &s->unsited_bytes, 0) ||
	    get_bool(o, "stacks", &stacks) || !json_is_array(sites) ||
	    json_array_size(sites) > GPUMON_SNAPSHOT_SITES || !json_is_array(segs) ||
	    json_array_size(segs) > GPUMON_SNAPSHOT_SEGMENTS || !good_text(s->framework, sizeof s->framework))
		return -1;
	s->pid = (unsigned)pid;
	if (dev != UINT64_MAX)
		s->known |= GPUMON_SNAP_DEVICE, s->device = (int)dev;
	if (json_object_get(o, "request_bytes")) {
		if (!s->request_bytes)
			return -1;
		s->known |= GPUMON_SNAP_REQUEST;
	}
	if (stacks)
		s->known |= GPUMON_SNAP_STACKS;
	for (size_t i = 0; i < json_array_size(sites); i++) {
		json_t *e = json_array_get(sites, i);
		gpumon_alloc_site *t = &s->sites[s->nsites++];
		if (!json_is_object(e) || get_str(e, "file", t->file, sizeof t->file) ||
		    get_u64(e, "line", UINT_MAX, &line, 0) ||
		    get_str(e, "function", t->function, sizeof t->function) ||
		    get_u64(e, "bytes", GPUMON_MAX_BYTES, &t->bytes, 0) ||
		    get_u64(e, "blocks", GPUMON_MAX_BYTES, &t->blocks, 0) ||
		    !good_text(t->file, sizeof t->file) || !good_text(t->function, sizeof t->function))
			return -1;
		t->line = (unsigned)line;
	}
	for (size_t i = 0; i < json_array_size(segs); i++) {
		json_t *e = json_array_get(segs, i);
		gpumon_alloc_segment *g = &s->top_segments[s->nsegments++];
		if (!json_is_object(e) || get_u64(e, "size_bytes", GPUMON_MAX_BYTES, &g->size_bytes, 0) ||
		    get_u64(e, "allocated_bytes", GPUMON_MAX_BYTES, &g->allocated_bytes, 0) ||
		    get_u64(e, "largest_free_bytes", GPUMON_MAX_BYTES, &g->largest_free_bytes, 0) ||
		    get_bool(e, "expandable", &g->expandable))
			return -1;
	}
	return 0;
}

int gpumon_snapshot_decode(const char *json, size_t len, gpumon_alloc_snapshot *out)
{
	if (out)
		memset(out, 0, sizeof *out);
	if (!json || !out)
		return GPUMON_E_INVAL;
	json_t *o = json_loadb(json, len, 0, NULL);
	int rc = o && !decode_doc(o, out) ? GPUMON_OK : GPUMON_E_INVAL;
	json_decref(o);
	if (rc)
		memset(out, 0, sizeof *out);
	return rc;
}
