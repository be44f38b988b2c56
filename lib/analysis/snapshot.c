/* SPDX-License-Identifier: MIT */
/* snapshot.c — PyTorch's allocator snapshot (torch.cuda.memory._snapshot() as JSON) condensed into
 * what holds the memory: its figures, the segments with the most free memory and the live bytes by
 * allocation site (gpumon_snapshot_condense). */
#include <gpumon/gpumon.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "snapshot.h"

/* A snapshot of a full card is tens of megabytes, most of it stack frames: a tree of it (jansson's)
 * takes seconds and ten times the text in memory. yajl hands over each value as it reads it: the
 * members of a segment, a block and a frame are kept as they come and acted on at the object's end,
 * so their order does not matter; memory is the site table with its sites' names, and the longest
 * string. What cannot wait in a few fields is a segment's blocks, which need its device and
 * total_size: when those come after them (keys sorted), that piece of the text is read again. */

#define MAX_DEPTH 512 /* nesting refused past it (yajl keeps a byte per level) */

#define SITES_MAX   4096 /* distinct sites tracked (see gpumon_snapshot_condense) */
#define SITES_SLOTS 8192 /* their hash table, at most half full */

struct site {
	char *text; /* its file, then its function (file_n + func_n bytes, owned) */
	size_t file_n, func_n;
	unsigned line;
	uint64_t hash, bytes, blocks;
};

struct str {
	char *p;
	size_t n, cap;
};

/* Where the reader is: the container whose values come next (the way down is always the same). */
enum where { W_TOP, W_DOC, W_SEGMENTS, W_SEGMENT, W_BLOCKS, W_BLOCK, W_FRAMES, W_FRAME, W_END };
/* The member of an object whose value comes next: those gpumon reads */
enum key {
	K_NONE,
	K_SEGS,
	K_DEV,
	K_TOTAL,
	K_EXPAND,
	K_BLOCKS,
	K_SIZE,
	K_STATE,
	K_FRAMES,
	K_FILE,
	K_NAME,
	K_LINE
};
enum type { V_NULL, V_FALSE, V_TRUE, V_NUMBER, V_STRING, V_MAP, V_ARRAY };

/* One run of yajl over text (at off0 in the snapshot): the whole snapshot, or a piece read again. */
struct pos {
	yajl_handle h;
	const char *text;
	size_t off0;
	int parsing; /* inside yajl_parse, whose offsets are into text */
	enum where at;
	enum key key;
	unsigned depth, skip; /* skip: the nesting inside a value not read */
	int deferring;	      /* the value skipped is a segment's blocks, read at the segment's end */
};

/* A segment's members as they come. Its blocks need its device and total_size: when they come
 * after the blocks (keys sorted), the blocks array is read again from the text at the segment's end. */
struct seg {
	int have_dev, have_total, have_blocks, selected, checked, expandable; /* have: 1, -1 not integer */
	int64_t dev, total;
	size_t from, to, nblocks; /* its blocks array in the text, when read again */
	uint64_t live, free, nfree, largest_free;
};

/* A block's members as they come: its site (from its frames) is taken at its end. */
struct blk {
	int have_size, have_state, have_frames, live, checked;
	int array, found, user; /* frames is an array; a frame was taken; it was the user's */
	int64_t size;
	size_t nframes;
};

struct cx {
	const char *json;
	struct pos *pos;
	char *err; /* the first failure's message */
	size_t err_len;
	int failed, nomem;
	int device;
	uint64_t request;
	gpumon_alloc_snapshot *out;
	int recount; /* the second reading, which counts the kept sites' bytes again */
	int not_object, have_segments, first_dev, many_devs;
	size_t seg_from, seg_to, nseg, nseg_all, si, bi;
	uint64_t all_reserved, all_blocks; /* over every device */
	uint64_t top_free[GPUMON_SNAPSHOT_SEGMENTS];
	struct seg seg;
	struct blk blk;
	struct str file, func, site_file, site_func; /* the frame being read; the block's site so far */
	unsigned line, site_line;
	struct site *sites;
	uint16_t *slots; /* index + 1 into sites; 0 empty */
	unsigned nsites;
	int evicted;
};

__attribute__((format(printf, 2, 3))) static int fail(struct cx *c, const char *fmt, ...)
{
	if (!c->failed && c->err_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err, c->err_len, fmt, ap);
		va_end(ap);
	}
	c->failed = 1;
	return -1;
}

static int nomem(struct cx *c)
{
	c->nomem = 1;
	return fail(c, "out of memory");
}

static size_t consumed(const struct cx *c)
{
	return yajl_get_bytes_consumed(c->pos->h);
}

static int str_set(struct cx *c, struct str *d, const char *s, size_t n)
{
	if (n > d->cap) {
		char *p = realloc(d->p, n);
		if (!p)
			return nomem(c);
		d->p = p, d->cap = n;
	}
	if (n)
		memcpy(d->p, s, n);
	d->n = n;
	return 0;
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static int text_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int d = memcmp(a, b, an < bn ? an : bn);
	return d ? d : (an > bn) - (an < bn);
}

/* Largest first; ties by file, line, function. */
static int site_cmp(const void *pa, const void *pb)
{
	const struct site *a = pa, *b = pb;
	int d;
	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	if ((d = text_cmp(a->text, a->file_n, b->text, b->file_n)))
		return d;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return text_cmp(a->text + a->file_n, a->func_n, b->text + b->file_n, b->func_n);
}

static void slots_fill(struct cx *c)
{
	memset(c->slots, 0, SITES_SLOTS * sizeof c->slots[0]);
	for (unsigned i = 0; i < c->nsites; i++) {
		unsigned at = (unsigned)c->sites[i].hash & (SITES_SLOTS - 1);
		while (c->slots[at])
			at = (at + 1) & (SITES_SLOTS - 1);
		c->slots[at] = (uint16_t)(i + 1);
	}
}

/* Adds a live block's bytes to its site (the block's, in c->site_*). A full table drops the half
 * holding the least (the sites that hold much keep being counted, and a second reading counts the
 * kept ones again exactly). */
static int site_add(struct cx *c, uint64_t bytes)
{
	const struct str *f = &c->site_file, *u = &c->site_func;
	const char *fp = f->n ? f->p : "", *up = u->n ? u->p : ""; /* never NULL to memcpy, memcmp */
	if (!c->sites) {
		c->sites = malloc(SITES_MAX * sizeof *c->sites);
		c->slots = calloc(SITES_SLOTS, sizeof *c->slots);
		if (!c->sites || !c->slots)
			return nomem(c);
	}
	uint64_t h = fnv(fnv(0xcbf29ce484222325ull, fp, f->n), up, u->n);
	h = fnv(h, (const char *)&c->site_line, sizeof c->site_line);
	unsigned at = (unsigned)h & (SITES_SLOTS - 1);
	for (; c->slots[at]; at = (at + 1) & (SITES_SLOTS - 1)) {
		struct site *s = &c->sites[c->slots[at] - 1];
		if (s->hash == h && s->line == c->site_line && s->file_n == f->n && s->func_n == u->n &&
		    !memcmp(s->text, fp, f->n) && !memcmp(s->text + f->n, up, u->n)) {
			s->bytes += bytes;
			s->blocks++;
			return 0;
		}
	}
	if (c->recount)
		return 0;
	char *text = malloc(f->n + u->n + 1);
	if (!text)
		return nomem(c);
	memcpy(text, fp, f->n);
	memcpy(text + f->n, up, u->n);
	if (c->nsites == SITES_MAX) {
		qsort(c->sites, c->nsites, sizeof *c->sites, site_cmp);
		for (unsigned i = SITES_MAX / 2; i < SITES_MAX; i++)
			free(c->sites[i].text);
		c->nsites = SITES_MAX / 2;
		c->evicted = 1;
		slots_fill(c);
		for (at = (unsigned)h & (SITES_SLOTS - 1); c->slots[at]; at = (at + 1) & (SITES_SLOTS - 1))
			;
	}
	c->sites[c->nsites++] = (struct site){text, f->n, u->n, c->site_line, h, bytes, 1};
	c->slots[at] = (uint16_t)c->nsites;
	return 0;
}

/* ---- a segment, a block, a frame ------------------------------------------------------------------- */

/* A segment's device and size, once both are read: checked and counted. */
static int segment_check(struct cx *c)
{
	struct seg *s = &c->seg;
	size_t si = c->si;
	s->checked = 1;
	if (s->have_total != 1)
		return fail(c, "segment %zu has no integer total_size", si);
	if (s->total < 0 || (uint64_t)s->total > GPUMON_MAX_BYTES)
		return fail(c, "segment %zu: total_size %lld out of range (0 to 2^50-1)", si,
			    (long long)s->total);
	if (s->have_dev != 1)
		return fail(c, "segment %zu has no integer device", si);
	if (s->dev < 0 || s->dev > INT_MAX)
		return fail(c, "segment %zu: device %lld out of range", si, (long long)s->dev);
	s->selected = c->device < 0 || s->dev == c->device;
	if (c->recount)
		return 0;
	if ((c->all_reserved += (uint64_t)s->total) > GPUMON_MAX_BYTES)
		return fail(c, "segment %zu: the segments add up past 2^50 bytes", si);
	if (c->nseg_all++ == 0)
		c->first_dev = (int)s->dev;
	else if (s->dev != c->first_dev)
		c->many_devs = 1;
	return 0;
}

/* A block's size and state, once both are read: checked, and counted in its segment. */
static int block_check(struct cx *c)
{
	gpumon_alloc_snapshot *o = c->out;
	struct seg *s = &c->seg;
	struct blk *b = &c->blk;
	uint64_t size = (uint64_t)b->size;
	size_t si = c->si, bi = c->bi;
	b->checked = 1;
	if (b->have_size != 1)
		return fail(c, "segment %zu: block %zu has no integer size", si, bi);
	if (b->size < 0 || size > GPUMON_MAX_BYTES)
		return fail(c, "segment %zu: block %zu: size %lld out of range (0 to 2^50-1)", si, bi,
			    (long long)b->size);
	if (b->size > s->total)
		return fail(c, "segment %zu: block %zu is larger than its segment", si, bi);
	if (b->have_state != 1)
		return fail(c, "segment %zu: block %zu has no state", si, bi);
	if (c->recount)
		return 0;
	if ((c->all_blocks += size) > GPUMON_MAX_BYTES)
		return fail(c, "segment %zu: block %zu: the blocks add up past 2^50 bytes", si, bi);
	if (!s->selected)
		return 0;
	o->blocks++;
	if (b->live) {
		o->allocated_bytes += size;
		s->live += size;
		return 0;
	}
	o->free_bytes += size;
	s->free += size;
	s->nfree++;
	if (size > s->largest_free)
		s->largest_free = size;
	if (size > o->largest_free_bytes)
		o->largest_free_bytes = size;
	if (size < c->request)
		o->unusable_free_bytes += size;
	return 0;
}

/* Keeps the segments with the most free memory, most first (the earlier on a tie). */
static void top_segment(struct cx *c, const struct seg *s)
{
	gpumon_alloc_snapshot *o = c->out;
	unsigned j = 0;
	while (j < o->nsegments && c->top_free[j] >= s->free)
		j++;
	if (j == GPUMON_SNAPSHOT_SEGMENTS)
		return;
	unsigned n = o->nsegments < GPUMON_SNAPSHOT_SEGMENTS ? o->nsegments++ : o->nsegments - 1;
	memmove(&o->top_segments[j + 1], &o->top_segments[j], (n - j) * sizeof o->top_segments[0]);
	memmove(&c->top_free[j + 1], &c->top_free[j], (n - j) * sizeof c->top_free[0]);
	c->top_free[j] = s->free;
	gpumon_alloc_segment *g = &o->top_segments[j]; /* field by field: the padding stays as cleared */
	g->size_bytes = (uint64_t)s->total;
	g->allocated_bytes = s->live;
	g->largest_free_bytes = s->largest_free;
	g->expandable = s->expandable;
}

static int parse(struct cx *c, const char *text, size_t len, size_t off0, enum where at, enum key key,
		 unsigned depth);

static int segment_end(struct cx *c)
{
	struct seg *s = &c->seg;
	if (!s->have_blocks)
		return fail(c, "segment %zu has no blocks array", c->si);
	if (!s->checked && (segment_check(c) || parse(c, c->json + s->from, s->to - s->from, s->from,
						      W_SEGMENT, K_BLOCKS, c->pos->depth + 1)))
		return -1;
	if (!s->selected || c->recount)
		return 0;
	c->out->segments++;
	c->out->reserved_bytes += (uint64_t)s->total;
	c->out->segments_with_free += s->nfree > 0;
	top_segment(c, s);
	return 0;
}

/* A block's end: checked if it was not yet, its bytes to its site when it is live. */
static int block_end(struct cx *c)
{
	struct blk *b = &c->blk;
	if (!b->checked && block_check(c))
		return -1;
	if (!c->seg.selected || !b->live)
		return 0;
	if (b->found) {
		c->out->known |= GPUMON_SNAP_STACKS;
		return site_add(c, (uint64_t)b->size);
	}
	if (!c->recount) /* no frames, or none recorded: history was not on */
		c->out->unsited_bytes += (uint64_t)b->size;
	return 0;
}

/* A frame read (file, function, line in c->file, c->func, c->line; a value that is not an object
 * is one without a file): the block's site when it is the innermost frame or the user's. Once the
 * user's is found, the outer frames are not read. */
static int frame_end(struct cx *c)
{
	struct blk *b = &c->blk;
	if (gpumon__frame_is_users(c->file.p, c->file.n))
		b->user = 1;
	else if (b->nframes > 1)
		return 0;
	struct str t = c->site_file;
	c->site_file = c->file, c->file = t;
	t = c->site_func;
	c->site_func = c->func, c->func = t;
	c->site_line = c->line;
	b->found = 1;
	return 0;
}

/* ---- the values, as yajl reads them ----------------------------------------------------------------
 * Each handler returns -1 on a failure, 0 when it took the value (or went into it), 1 when the value
 * is not one gpumon reads (a container is then skipped whole). */

static int doc_value(struct cx *c, enum type t)
{
	if (c->pos->key != K_SEGS)
		return 1;
	if (t != V_ARRAY)
		return fail(c, "\"segments\" is not an array");
	c->have_segments = 1;
	c->seg_from = c->pos->off0 + consumed(c) - 1;
	c->nseg = 0, c->pos->at = W_SEGMENTS;
	return 0;
}

static int segment_value(struct cx *c, enum type t, const char *s, size_t n)
{
	struct seg *g = &c->seg;
	struct pos *p = c->pos;
	switch (p->key) {
	case K_DEV: g->have_dev = t == V_NUMBER && gpumon__json_integer(s, n, &g->dev) ? 1 : -1; return 1;
	case K_TOTAL:
		g->have_total = t == V_NUMBER && gpumon__json_integer(s, n, &g->total) ? 1 : -1;
		return 1;
	case K_EXPAND: g->expandable = t == V_TRUE; return 1;
	case K_BLOCKS: break;
	default: return 1;
	}
	if (t != V_ARRAY)
		return fail(c, "segment %zu: blocks is not an array", c->si);
	if (!g->checked && !(g->have_dev && g->have_total)) { /* keys sorted: read at the segment's end */
		g->from = p->off0 + consumed(c) - 1;
		p->deferring = 1;
		return 1;
	}
	if (!g->checked && segment_check(c))
		return -1;
	g->nblocks = 0;
	p->at = W_BLOCKS;
	return 0;
}

static int block_state(struct cx *c, enum type t, const char *s, size_t n)
{
	struct blk *b = &c->blk;
	b->have_state = -1;
	if (t != V_STRING)
		return 1;
	b->live = (n == 16 && !memcmp(s, "active_allocated", n)) ||
		  (n == 19 && !memcmp(s, "active_pending_free", n)); /* pending: not usable yet */
	if (!b->live && !(n == 8 && !memcmp(s, "inactive", n)))
		return fail(c, "segment %zu: block %zu has an unknown state \"%.*s\"", c->si, c->bi,
			    (int)(n < 40 ? n : 40), s);
	b->have_state = 1;
	return 1;
}

static int block_value(struct cx *c, enum type t, const char *s, size_t n)
{
	struct blk *b = &c->blk;
	switch (c->pos->key) {
	case K_SIZE: b->have_size = t == V_NUMBER && gpumon__json_integer(s, n, &b->size) ? 1 : -1; return 1;
	case K_STATE: return block_state(c, t, s, n);
	case K_FRAMES: break;
	default: return 1;
	}
	if (t == V_NULL) /* none */
		return 1;
	if (t != V_ARRAY)
		return fail(c, "segment %zu: block %zu: frames is not an array", c->si, c->bi);
	b->array = 1;
	if (b->have_size && b->have_state && !b->checked && block_check(c)) /* torch's order */
		return -1;
	if (!c->seg.selected || (b->have_state == 1 && !b->live)) /* no site to find */
		return 1;
	c->pos->at = W_FRAMES;
	return 0;
}

/* An element of the frames array. */
static int frame_start(struct cx *c, enum type t)
{
	c->blk.nframes++;
	if (c->blk.user)
		return 1;
	c->file.n = c->func.n = 0;
	c->line = 0;
	if (t == V_MAP)
		return c->pos->at = W_FRAME, 0;
	return frame_end(c) ? -1 : 1;
}

static int frame_value(struct cx *c, enum type t, const char *s, size_t n)
{
	int64_t line;
	switch (c->pos->key) {
	case K_FILE: return t == V_STRING && str_set(c, &c->file, s, n) ? -1 : 1;
	case K_NAME: return t == V_STRING && str_set(c, &c->func, s, n) ? -1 : 1;
	case K_LINE:
		c->line = t == V_NUMBER && gpumon__json_integer(s, n, &line) && line >= 0 && line <= UINT_MAX
			      ? (unsigned)line
			      : 0;
		return 1;
	default: return 1;
	}
}

static int value(struct cx *c, enum type t, const char *s, size_t n)
{
	struct pos *p = c->pos;
	int k = 1, container = t == V_MAP || t == V_ARRAY;
	if (container && ++p->depth > MAX_DEPTH)
		return fail(c, "not JSON: nesting too deep at byte %zu", p->off0 + consumed(c) - 1);
	if (p->skip) {
		p->skip += (unsigned)container;
		return 0;
	}
	switch (p->at) {
	case W_TOP:
		if (t == V_MAP)
			p->at = W_DOC, k = 0;
		else
			c->not_object = 1;
		break;
	case W_DOC: k = doc_value(c, t); break;
	case W_SEGMENTS:
		c->si = c->nseg++;
		if (t != V_MAP)
			return fail(c, "segment %zu is not an object", c->si);
		memset(&c->seg, 0, sizeof c->seg);
		p->at = W_SEGMENT, k = 0;
		break;
	case W_SEGMENT: k = segment_value(c, t, s, n); break;
	case W_BLOCKS:
		c->bi = c->seg.nblocks++;
		if (t != V_MAP)
			return fail(c, "segment %zu: block %zu is not an object", c->si, c->bi);
		memset(&c->blk, 0, sizeof c->blk);
		p->at = W_BLOCK, k = 0;
		break;
	case W_BLOCK: k = block_value(c, t, s, n); break;
	case W_FRAMES: k = frame_start(c, t); break;
	case W_FRAME: k = frame_value(c, t, s, n); break;
	case W_END: break;
	}
	if (k < 0)
		return -1;
	if (k > 0 && container)
		p->skip = 1;
	return 0;
}

/* The end of a map or an array. */
static int end(struct cx *c)
{
	struct pos *p = c->pos;
	p->depth--;
	if (p->skip) {
		if (--p->skip == 0 && p->deferring) {
			c->seg.to = p->off0 + consumed(c);
			p->deferring = 0;
		}
		return 0;
	}
	switch (p->at) {
	case W_DOC: p->at = W_END; return 0;
	case W_SEGMENTS: p->at = W_DOC, c->seg_to = p->off0 + consumed(c); return 0;
	case W_SEGMENT: p->at = W_SEGMENTS; return segment_end(c);
	case W_BLOCKS: p->at = W_SEGMENT; return 0;
	case W_BLOCK: p->at = W_BLOCKS; return block_end(c);
	case W_FRAMES: p->at = W_BLOCK; return 0;
	case W_FRAME: p->at = W_FRAMES; return frame_end(c);
	default: return 0;
	}
}

/* A key or a string as yajl handed it over, held to RFC 8259 and UTF-8 where yajl is lenient. */
static int check_string(struct cx *c, const unsigned char *s, size_t n)
{
	struct pos *p = c->pos;
	const char *what;
	size_t at;
	if (!p->parsing || /* yajl calls back with whole strings inside yajl_parse only */
	    !gpumon__json_string_check(p->text, consumed(c) - 1, (const char *)s, n, &at, &what))
		return 0;
	return fail(c, "not JSON: %s at byte %zu", what, p->off0 + at);
}

static int is(const unsigned char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(s, lit, n);
}

static int member_key(struct cx *c, const unsigned char *s, size_t n)
{
	struct pos *p = c->pos;
	struct seg *g = &c->seg;
	struct blk *b = &c->blk;
	enum key k = K_NONE;
	if (check_string(c, s, n))
		return -1;
	if (p->skip)
		return 0;
	switch (p->at) {
	case W_DOC:
		if (is(s, n, "segments") && c->have_segments)
			return fail(c, "two \"segments\" arrays");
		k = is(s, n, "segments") ? K_SEGS : K_NONE;
		break;
	case W_SEGMENT:
		k = is(s, n, "device")		? K_DEV
		    : is(s, n, "total_size")	? K_TOTAL
		    : is(s, n, "is_expandable") ? K_EXPAND
		    : is(s, n, "blocks")	? K_BLOCKS
						: K_NONE;
		if ((k == K_DEV && g->have_dev) || (k == K_TOTAL && g->have_total) ||
		    (k == K_BLOCKS && g->have_blocks))
			return fail(c, "segment %zu has two %.*s", c->si, (int)n, (const char *)s);
		g->have_blocks |= k == K_BLOCKS;
		break;
	case W_BLOCK:
		k = is(s, n, "size")	 ? K_SIZE
		    : is(s, n, "state")	 ? K_STATE
		    : is(s, n, "frames") ? K_FRAMES
					 : K_NONE;
		if ((k == K_SIZE && b->have_size) || (k == K_STATE && b->have_state) ||
		    (k == K_FRAMES && b->have_frames))
			return fail(c, "segment %zu: block %zu has two %.*s", c->si, c->bi, (int)n,
				    (const char *)s);
		b->have_frames |= k == K_FRAMES;
		break;
	case W_FRAME:
		k = is(s, n, "filename") ? K_FILE
		    : is(s, n, "name")	 ? K_NAME
		    : is(s, n, "line")	 ? K_LINE
					 : K_NONE;
		break;
	default: break;
	}
	p->key = k;
	return 0;
}

/* yajl's callbacks: 1 to go on, 0 to stop (the message is in the context) */
static int on_null(void *c)
{
	return !value(c, V_NULL, NULL, 0);
}

static int on_boolean(void *c, int v)
{
	return !value(c, v ? V_TRUE : V_FALSE, NULL, 0);
}

static int on_number(void *c, const char *s, size_t n)
{
	return !value(c, V_NUMBER, s, n);
}

static int on_string(void *c, const unsigned char *s, size_t n)
{
	return !check_string(c, s, n) && !value(c, V_STRING, (const char *)s, n);
}

static int on_start_map(void *c)
{
	return !value(c, V_MAP, NULL, 0);
}

static int on_key(void *c, const unsigned char *s, size_t n)
{
	return !member_key(c, s, n);
}

static int on_start_array(void *c)
{
	return !value(c, V_ARRAY, NULL, 0);
}

static int on_end(void *c)
{
	return !end(c);
}

/* yajl_number takes every number as written: one past long long stops no text, and the integers
 * gpumon reads are converted here (a fraction, an exponent, out of range: not an integer). */
static const yajl_callbacks callbacks = {
    .yajl_null = on_null,
    .yajl_boolean = on_boolean,
    .yajl_number = on_number,
    .yajl_string = on_string,
    .yajl_start_map = on_start_map,
    .yajl_map_key = on_key,
    .yajl_end_map = on_end,
    .yajl_start_array = on_start_array,
    .yajl_end_array = on_end,
};

/* yajl's message ("parse error: premature EOF\n"): what, and where it stopped. */
static int json_error(struct cx *c, yajl_handle h, const char *text, size_t len, size_t at)
{
	unsigned char *e = yajl_get_error(h, 0, (const unsigned char *)text, len);
	const char *m = e ? strstr((const char *)e, ": ") : NULL;
	size_t n;
	m = m ? m + 2 : "malformed";
	n = strcspn(m, "\n");
	while (n && m[n - 1] == '.')
		n--;
	fail(c, "not JSON: %.*s at byte %zu", (int)n, m, at);
	if (e)
		yajl_free_error(h, e);
	return -1;
}

/* Reads text (at off0 in the snapshot) with yajl from where at and key say it starts: the snapshot
 * (W_TOP), or a piece of it read again (a segment's blocks, the segments array). */
static int parse(struct cx *c, const char *text, size_t len, size_t off0, enum where at, enum key key,
		 unsigned depth)
{
	struct pos p = {.text = text, .off0 = off0, .parsing = 1, .at = at, .key = key, .depth = depth},
		   *outer = c->pos;
	yajl_status st;
	size_t stop;
	if (!(p.h = yajl_alloc(&callbacks, NULL, c)))
		return nomem(c);
	/* RFC 8259: no comments, strings' UTF-8 checked; as by default, one whole value, nothing after */
	yajl_config(p.h, yajl_allow_comments, 0);
	yajl_config(p.h, yajl_dont_validate_strings, 0);
	c->pos = &p;
	st = yajl_parse(p.h, (const unsigned char *)text, len);
	stop = off0 + yajl_get_bytes_consumed(p.h);
	if (st == yajl_status_ok) {
		p.parsing = 0;
		st = yajl_complete_parse(p.h);
		stop = off0 + len;
	}
	if (st == yajl_status_error)
		json_error(c, p.h, text, len, stop);
	c->pos = outer;
	yajl_free(p.h);
	return st == yajl_status_ok && !c->failed ? 0 : -1;
}

/* The whole snapshot read: yajl takes \f and \v for white space too (any left in the text is such,
 * as yajl refuses them inside a string), RFC 8259 does not. */
static int document_end(struct cx *c, size_t len)
{
	const char *f = memchr(c->json, '\f', len), *v = memchr(c->json, '\v', len);
	if (f || v)
		return fail(c, "not JSON: a form feed or vertical tab at byte %zu",
			    (size_t)((f && (!v || f < v) ? f : v) - c->json));
	if (c->not_object)
		return fail(c, "not a snapshot: the text is not a JSON object");
	return c->have_segments ? 0 : fail(c, "not a snapshot: no \"segments\" array");
}

static void finish(struct cx *c)
{
	gpumon_alloc_snapshot *o = c->out;
	strcpy(o->framework, "torch");
	if (c->device >= 0 || (c->nseg_all && !c->many_devs)) {
		o->known |= GPUMON_SNAP_DEVICE;
		o->device = c->device >= 0 ? c->device : c->first_dev;
	}
	if (c->request) {
		o->known |= GPUMON_SNAP_REQUEST;
		o->request_bytes = c->request;
	}
	if (c->nsites)
		qsort(c->sites, c->nsites, sizeof *c->sites, site_cmp);
	for (unsigned i = 0; i < c->nsites && i < GPUMON_SNAPSHOT_SITES; i++) {
		const struct site *t = &c->sites[i];
		gpumon_alloc_site *d = &o->sites[o->nsites++];
		gpumon__put_text(t->text, t->file_n, d->file, sizeof d->file, 1);
		gpumon__put_text(t->text + t->file_n, t->func_n, d->function, sizeof d->function, 0);
		d->line = t->line;
		d->bytes = t->bytes;
		d->blocks = t->blocks;
	}
}

int gpumon_snapshot_condense(const char *json, size_t len, int device, uint64_t request_bytes,
			     gpumon_alloc_snapshot *out, char *err, size_t err_len)
{
	struct cx c = {.json = json,
		       .err = err,
		       .err_len = err ? err_len : 0,
		       .device = device < 0 ? -1 : device,
		       .request = request_bytes,
		       .out = out};
	if (c.err_len)
		err[0] = '\0';
	if (out)
		memset(out, 0, sizeof *out);
	if (!json || !out)
		return fail(&c, "no %s", json ? "place for the result" : "snapshot"), GPUMON_E_INVAL;
	if (request_bytes > GPUMON_MAX_BYTES)
		return fail(&c, "request of %llu bytes out of range", (unsigned long long)request_bytes),
		       GPUMON_E_INVAL;
	int rc = parse(&c, json, len, 0, W_TOP, K_NONE, 0) || document_end(&c, len);
	if (!rc && c.evicted) {
		for (unsigned i = 0; i < c.nsites; i++)
			c.sites[i].bytes = c.sites[i].blocks = 0;
		c.recount = 1;
		rc = parse(&c, json + c.seg_from, c.seg_to - c.seg_from, c.seg_from, W_DOC, K_SEGS, 1);
	}
	if (!rc)
		finish(&c);
	for (unsigned i = 0; i < c.nsites; i++)
		free(c.sites[i].text);
	free(c.sites);
	free(c.slots);
	free(c.file.p), free(c.func.p), free(c.site_file.p), free(c.site_func.p);
	if (rc)
		memset(out, 0, sizeof *out);
	return !rc ? GPUMON_OK : c.nomem ? GPUMON_E_NOMEM : GPUMON_E_INVAL;
}
