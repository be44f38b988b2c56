/* SPDX-License-Identifier: MIT */
/* snapshot.c — PyTorch's allocator snapshot (torch.cuda.memory._snapshot() as JSON) condensed into
 * what holds the memory: its figures, the segments with the most free memory and the live bytes by
 * allocation site; and that condensed form as JSON and back. */
#include <gpumon/gpumon.h>

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- a reader of JSON text in place --------------------------------------------------------------
 * A snapshot of a full card is tens of megabytes, most of it stack frames: a tree of it (jansson's)
 * takes seconds and ten times the text in memory, so the text is read where it stands (in one pass
 * when its keys come in torch's order) and checked as it goes (RFC 8259, UTF-8 included; \u0000
 * refused, as jansson refuses it). Strings are views of the text, decoded only where their content
 * matters. */

#define MAX_DEPTH 512 /* nesting; the reader recurses only into values it skips */

struct rd {
	const char *base, *p, *end;
	char *err; /* the first failure's message */
	size_t err_len;
	int failed;
};

/* a string as it stands between its quotes, escapes not decoded */
struct view {
	const char *s;
	size_t n;
	int esc;
};

__attribute__((format(printf, 2, 3))) static int fail(struct rd *r, const char *fmt, ...)
{
	if (!r->failed && r->err_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->err, r->err_len, fmt, ap);
		va_end(ap);
	}
	r->failed = 1;
	return -1;
}

static int syntax(struct rd *r, const char *what)
{
	return fail(r, "not JSON: %s at byte %zu", what, (size_t)(r->p - r->base));
}

static int peek(struct rd *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
	return r->p < r->end ? (unsigned char)*r->p : -1;
}

/* Length of the UTF-8 sequence at s (n bytes there), 0 when it is not a valid one (overlong forms,
 * surrogates and code points past U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp, min;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1fu, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0fu, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07u, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : len;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit(s[i]);
		if (d < 0)
			return 0;
		*v = *v << 4 | (unsigned)d;
	}
	return 1;
}

/* The escape at s (a backslash, n bytes there): its length, and its code point in *cp; 0 when it is
 * not a valid one (a lone surrogate, \u0000). */
static size_t unescape(const char *s, size_t n, unsigned *cp)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	unsigned hi, lo;
	if (n < 2)
		return 0;
	const char *k = s[1] ? strchr(from, s[1]) : NULL;
	if (k) {
		*cp = (unsigned char)to[k - from];
		return 2;
	}
	if (s[1] != 'u' || n < 6 || !hex4(s + 2, &hi) || hi == 0)
		return 0;
	if (hi < 0xd800 || hi > 0xdfff) {
		*cp = hi;
		return 6;
	}
	if (hi > 0xdbff || n < 12 || s[6] != '\\' || s[7] != 'u' || !hex4(s + 8, &lo) || lo < 0xdc00 ||
	    lo > 0xdfff)
		return 0;
	*cp = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
	return 12;
}

/* Decodes a string the reader checked into dst (room for v->n bytes: no escape decodes longer than
 * it is written) and returns its length. */
static size_t decode(const struct view *v, char *dst)
{
	size_t o = 0;
	for (size_t i = 0; i < v->n;) {
		unsigned cp;
		size_t k = v->s[i] == '\\' ? unescape(v->s + i, v->n - i, &cp) : 0;
		if (!k) {
			dst[o++] = v->s[i++];
			continue;
		}
		i += k;
		if (cp < 0x80) {
			dst[o++] = (char)cp;
		} else if (cp < 0x800) {
			dst[o++] = (char)(0xc0 | cp >> 6);
			dst[o++] = (char)(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			dst[o++] = (char)(0xe0 | cp >> 12);
			dst[o++] = (char)(0x80 | (cp >> 6 & 0x3f));
			dst[o++] = (char)(0x80 | (cp & 0x3f));
		} else {
			dst[o++] = (char)(0xf0 | cp >> 18);
			dst[o++] = (char)(0x80 | (cp >> 12 & 0x3f));
			dst[o++] = (char)(0x80 | (cp >> 6 & 0x3f));
			dst[o++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	return o;
}

static int str(struct rd *r, struct view *v)
{
	if (peek(r) != '"')
		return syntax(r, "expected a string");
	v->s = ++r->p;
	v->esc = 0;
	while (r->p < r->end) {
		unsigned char c = (unsigned char)*r->p;
		size_t k = 1;
		unsigned cp;
		if (c == '"') {
			v->n = (size_t)(r->p++ - v->s);
			return 0;
		}
		if (c < 0x20)
			return syntax(r, "a control character in a string");
		if (c == '\\') {
			v->esc = 1;
			if (!(k = unescape(r->p, (size_t)(r->end - r->p), &cp)))
				return syntax(r, "an invalid escape");
		} else if (c >= 0x80 &&
			   !(k = utf8_len((const unsigned char *)r->p, (size_t)(r->end - r->p)))) {
			return syntax(r, "invalid UTF-8");
		}
		r->p += k;
	}
	return syntax(r, "an unterminated string");
}

/* Whether a string is the word lit. */
static int is(const struct view *v, const char *lit)
{
	size_t n = strlen(lit);
	char buf[64];
	if (!v->esc)
		return v->n == n && !memcmp(v->s, lit, n);
	return v->n < sizeof buf && decode(v, buf) == n && !memcmp(buf, lit, n);
}

static int digits(struct rd *r)
{
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return syntax(r, "a malformed number");
	while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
		r->p++;
	return 0;
}

/* A number; *have: 1 an integer in int64_t's range (*v), -1 anything else. */
static int number(struct rd *r, int *have, int64_t *v)
{
	int neg = r->p < r->end && *r->p == '-', big = 0;
	uint64_t mag = 0;
	r->p += neg;
	if (r->p >= r->end || *r->p < '0' || *r->p > '9')
		return syntax(r, "a malformed number");
	if (*r->p == '0') /* no leading zeros: "01" is not a number */
		r->p++;
	else
		for (; r->p < r->end && *r->p >= '0' && *r->p <= '9'; r->p++) {
			unsigned d = (unsigned)(*r->p - '0');
			big |= mag > (UINT64_MAX - d) / 10;
			mag = mag * 10 + d;
		}
	*have = 1;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		*have = -1;
		if (digits(r))
			return -1;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		*have = -1;
		r->p += r->p < r->end && (*r->p == '+' || *r->p == '-');
		if (digits(r))
			return -1;
	}
	if (big || mag > (uint64_t)INT64_MAX) {
		*have = -1;
		*v = 0;
	} else {
		*v = neg ? -(int64_t)mag : (int64_t)mag;
	}
	return 0;
}

/* The next member of an object whose '{' was read: 1 with its key and ':' read, 0 at its '}' (read),
 * -1 on an error. *i counts the members so far. */
static int member(struct rd *r, size_t *i, struct view *key)
{
	int c = peek(r);
	if (c == '}') {
		r->p++;
		return 0;
	}
	if (*i) {
		if (c != ',')
			return syntax(r, "expected ',' or '}'");
		r->p++;
	}
	if (str(r, key))
		return -1;
	if (peek(r) != ':')
		return syntax(r, "expected ':'");
	r->p++;
	++*i;
	return 1;
}

/* The next element of an array whose '[' was read: 1 when one follows, 0 at its ']' (read). */
static int element(struct rd *r, size_t *i)
{
	int c = peek(r);
	if (c == ']') {
		r->p++;
		return 0;
	}
	if (*i) {
		if (c != ',')
			return syntax(r, "expected ',' or ']'");
		r->p++;
	}
	++*i;
	return 1;
}

static int word(struct rd *r, const char *w)
{
	size_t n = strlen(w);
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n))
		return syntax(r, "an unknown word");
	r->p += n;
	return 0;
}

/* Reads past any value, checking it. */
static int skip(struct rd *r, int depth)
{
	struct view v;
	size_t i = 0;
	int k, have;
	int64_t n;
	switch (peek(r)) {
	case '{':
	case '[':
		if (depth >= MAX_DEPTH)
			return syntax(r, "nesting too deep");
		if (*r->p++ == '{') {
			while ((k = member(r, &i, &v)) > 0)
				if (skip(r, depth + 1))
					return -1;
		} else {
			while ((k = element(r, &i)) > 0)
				if (skip(r, depth + 1))
					return -1;
		}
		return k;
	case '"': return str(r, &v);
	case 't': return word(r, "true");
	case 'f': return word(r, "false");
	case 'n': return word(r, "null");
	case -1: return syntax(r, "the text ends");
	default: return number(r, &have, &n);
	}
}

/* A value that should be an integer: *have 1 with *v when it is one, -1 when it is anything else. */
static int integer(struct rd *r, int *have, int64_t *v)
{
	int c = peek(r);
	if (c == '-' || (c >= '0' && c <= '9'))
		return number(r, have, v);
	*have = -1;
	return skip(r, 0);
}

/* ---- which frame is the allocation's site --------------------------------------------------------
 * A frame belongs to the framework, to Python or to gpumon, or it is the user's (a library's counts
 * as the user's: it is the code that asked for the memory). Decided on the file's path, split at '/'
 * and '\\', by where packages live rather than by a word anywhere in it, so that a project of the
 * user's in a directory named "torch" is still the user's:
 *  - PyTorch's: a component "torch" right under "site-packages" or "dist-packages", or right under
 *    "pytorch" (a source checkout, pip install -e); a component "torchinductor_*" (the code
 *    torch.compile writes and runs); a C/C++ source or library (a frame of stacks="all": the
 *    allocator and the framework underneath the Python code);
 *  - Python's: a component "pythonX.Y" right under "lib" or "lib64", with no "site-packages" or
 *    "dist-packages" further on (the standard library);
 *  - gpumon's: "gpumon" right under site-packages/dist-packages, or a file "_*.py" right in a
 *    directory "gpumon" (the package's own modules, wherever it is imported from);
 *  - no file: empty, "??", or "<...>" ("<frozen runpy>", "<string>", torch.fx's "<eval_with_key>.3").
 * The site is the innermost frame that is the user's; the innermost frame when none is. */

enum { FRAME_USER, FRAME_OTHER };

static int comp_is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(s, lit, n);
}

static int ends_with(const char *s, size_t n, const char *lit)
{
	size_t m = strlen(lit);
	return n >= m && !memcmp(s + n - m, lit, m);
}

/* "python3.11", "python3.13t" */
static int is_python_dir(const char *s, size_t n)
{
	size_t i = 6;
	if (n < 9 || memcmp(s, "python", 6) || s[i] < '0' || s[i] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i >= n || s[i++] != '.' || i >= n || s[i] < '0' || s[i] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	while (i < n && s[i] >= 'a' && s[i] <= 'z')
		i++;
	return i == n;
}

static int native_file(const char *s, size_t n)
{
	static const char *const ext[] = {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".so"};
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
		if (ends_with(s, n, ext[i]))
			return 1;
	return memmem(s, n, ".so.", 4) != NULL; /* libcuda.so.1 */
}

static int frame_kind(const char *s, size_t n)
{
	const char *prev = "", *c = s;
	size_t prevn = 0;
	int stdlib = 0, packages = 0;
	if (n == 0 || s[0] == '<' || comp_is(s, n, "??") || native_file(s, n))
		return FRAME_OTHER;
	for (const char *e = s; e <= s + n; e++) {
		if (e < s + n && *e != '/' && *e != '\\')
			continue;
		size_t cn = (size_t)(e - c);
		int under_packages =
		    comp_is(prev, prevn, "site-packages") || comp_is(prev, prevn, "dist-packages");
		if ((under_packages && (comp_is(c, cn, "torch") || comp_is(c, cn, "gpumon"))) ||
		    (comp_is(prev, prevn, "pytorch") && comp_is(c, cn, "torch")) ||
		    (cn > 14 && !memcmp(c, "torchinductor_", 14)) ||
		    (e == s + n && comp_is(prev, prevn, "gpumon") && cn > 4 && c[0] == '_' &&
		     ends_with(c, cn, ".py")))
			return FRAME_OTHER;
		if (comp_is(c, cn, "site-packages") || comp_is(c, cn, "dist-packages"))
			packages = 1;
		if ((comp_is(prev, prevn, "lib") || comp_is(prev, prevn, "lib64")) && is_python_dir(c, cn))
			stdlib = 1, packages = 0;
		if (cn)
			prev = c, prevn = cn;
		c = e + 1;
	}
	return stdlib && !packages ? FRAME_OTHER : FRAME_USER;
}

/* ---- condensing ---------------------------------------------------------------------------------- */

#define SITES_MAX   4096 /* distinct sites tracked (see gpumon_snapshot_condense) */
#define SITES_SLOTS 8192 /* their hash table, at most half full */

struct site {
	struct view file, func; /* as they stand in the snapshot */
	unsigned line;
	uint64_t hash, bytes, blocks;
};

struct seg {
	int have_dev, have_total, have_blocks, selected, checked;
	int64_t dev, total;
	int expandable;
	const char *blocks; /* the blocks array, when it came before device and total_size */
	uint64_t live, free, nfree, largest_free;
};

struct blk {
	int have_size, have_state, have_frames, live, checked;
	int array; /* frames is an array (read or to be read) */
	int64_t size;
	const char *frames; /* the frames array, when it came before size and state */
};

struct cx {
	struct rd r;
	int device;
	uint64_t request;
	gpumon_alloc_snapshot *out;
	const char *segments; /* the segments array */
	int recount;	      /* the second walk, which counts the kept sites' bytes again */
	int first_dev, many_devs, nomem;
	size_t nseg_all;
	uint64_t all_reserved, all_blocks; /* over every device */
	uint64_t top_free[GPUMON_SNAPSHOT_SEGMENTS];
	struct site *sites;
	uint16_t *slots; /* index + 1 into sites; 0 empty */
	unsigned nsites;
	int evicted;
	char *scratch; /* a decoded string */
	size_t scratch_cap;
};

static int nomem(struct cx *c)
{
	c->nomem = 1;
	return fail(&c->r, "out of memory");
}

/* A string's text, decoded when it holds escapes (into c->scratch). */
static int text(struct cx *c, const struct view *v, const char **s, size_t *n)
{
	if (!v->esc) {
		*s = v->s, *n = v->n;
		return 0;
	}
	if (v->n + 1 > c->scratch_cap) {
		char *p = realloc(c->scratch, v->n + 1);
		if (!p)
			return nomem(c);
		c->scratch = p, c->scratch_cap = v->n + 1;
	}
	*n = decode(v, c->scratch);
	*s = c->scratch;
	return 0;
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return h;
}

static int view_cmp(const struct view *a, const struct view *b)
{
	int d = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
	return d ? d : (a->n > b->n) - (a->n < b->n);
}

/* Largest first; ties by file, line, function. */
static int site_cmp(const void *pa, const void *pb)
{
	const struct site *a = pa, *b = pb;
	int d;
	if (a->bytes != b->bytes)
		return a->bytes < b->bytes ? 1 : -1;
	if ((d = view_cmp(&a->file, &b->file)))
		return d;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return view_cmp(&a->func, &b->func);
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

/* Adds a live block's bytes to its site. A full table drops the half holding the least (the sites
 * that hold much keep being counted, and a second walk counts the kept ones again exactly). */
static int site_add(struct cx *c, struct site *k, uint64_t bytes)
{
	if (!c->sites) {
		c->sites = malloc(SITES_MAX * sizeof *c->sites);
		c->slots = malloc(SITES_SLOTS * sizeof *c->slots);
		if (!c->sites || !c->slots)
			return nomem(c);
		memset(c->slots, 0, SITES_SLOTS * sizeof *c->slots);
	}
	uint64_t h = fnv(fnv(0xcbf29ce484222325ull, k->file.s, k->file.n), k->func.s, k->func.n);
	h = fnv(h, (const char *)&k->line, sizeof k->line);
	unsigned at = (unsigned)h & (SITES_SLOTS - 1);
	for (; c->slots[at]; at = (at + 1) & (SITES_SLOTS - 1)) {
		struct site *s = &c->sites[c->slots[at] - 1];
		if (s->hash == h && s->line == k->line && !view_cmp(&s->file, &k->file) &&
		    !view_cmp(&s->func, &k->func)) {
			s->bytes += bytes;
			s->blocks++;
			return 0;
		}
	}
	if (c->recount)
		return 0;
	if (c->nsites == SITES_MAX) {
		qsort(c->sites, c->nsites, sizeof *c->sites, site_cmp);
		c->nsites = SITES_MAX / 2;
		c->evicted = 1;
		slots_fill(c);
		for (at = (unsigned)h & (SITES_SLOTS - 1); c->slots[at]; at = (at + 1) & (SITES_SLOTS - 1))
			;
	}
	k->hash = h, k->bytes = bytes, k->blocks = 1;
	c->sites[c->nsites++] = *k;
	c->slots[at] = (uint16_t)c->nsites;
	return 0;
}

/* One frame (leniently: a frame torch would not write is taken as one without a file). */
static int frame(struct cx *c, struct site *f, int *kind)
{
	struct rd *r = &c->r;
	struct view key;
	size_t i = 0;
	int k, have = 0, have_file = 0;
	int64_t line = 0;
	memset(f, 0, sizeof *f);
	f->file.s = f->func.s = ""; /* no file or function: empty, never NULL */
	*kind = FRAME_OTHER;
	if (peek(r) != '{')
		return skip(r, 0);
	r->p++;
	while ((k = member(r, &i, &key)) > 0) {
		int string = peek(r) == '"';
		if (is(&key, "filename") && string)
			k = str(r, &f->file), have_file = 1;
		else if (is(&key, "name") && string)
			k = str(r, &f->func);
		else if (is(&key, "line"))
			k = integer(r, &have, &line);
		else
			k = skip(r, 0);
		if (k)
			return -1;
	}
	if (k < 0)
		return -1;
	f->line = have == 1 && line >= 0 && line <= UINT_MAX ? (unsigned)line : 0;
	if (have_file) {
		const char *s;
		size_t n;
		if (text(c, &f->file, &s, &n))
			return -1;
		*kind = frame_kind(s, n);
	}
	return 0;
}

/* A live block's frames (innermost first; r at the array's '['): its site in *site, *found 0 when
 * there are none. Reads to the array's end. */
static int frames_site(struct cx *c, struct site *site, int *found)
{
	struct rd *r = &c->r;
	struct site f;
	size_t i = 0;
	int k, kind, user = 0;
	*found = 0;
	r->p++;
	while ((k = element(r, &i)) > 0) {
		if (user) {
			if (skip(r, 0))
				return -1;
			continue;
		}
		if (frame(c, &f, &kind))
			return -1;
		if (i == 1 || kind == FRAME_USER)
			*site = f, *found = 1;
		user = kind == FRAME_USER;
	}
	return k;
}

/* A block's frames array (r at it), read through: its bytes to its site when it is live. */
static int block_frames(struct cx *c, const struct seg *s, const struct blk *b)
{
	struct site site;
	int found;
	if (!s->selected || !b->live)
		return skip(&c->r, 0);
	if (frames_site(c, &site, &found))
		return -1;
	if (found) {
		c->out->known |= GPUMON_SNAP_STACKS;
		return site_add(c, &site, (uint64_t)b->size);
	}
	if (!c->recount)
		c->out->unsited_bytes += (uint64_t)b->size;
	return 0;
}

/* A block's size and state, once both are read: checked, and counted in its segment. */
static int block_check(struct cx *c, struct seg *s, struct blk *b, size_t si, size_t bi)
{
	gpumon_alloc_snapshot *o = c->out;
	uint64_t size = (uint64_t)b->size;
	b->checked = 1;
	if (b->have_size != 1)
		return fail(&c->r, "segment %zu: block %zu has no integer size", si, bi);
	if (b->size < 0 || size > GPUMON_MAX_BYTES)
		return fail(&c->r, "segment %zu: block %zu: size %lld out of range (0 to 2^50-1)", si, bi,
			    (long long)b->size);
	if (b->size > s->total)
		return fail(&c->r, "segment %zu: block %zu is larger than its segment", si, bi);
	if (b->have_state != 1)
		return fail(&c->r, "segment %zu: block %zu has no state", si, bi);
	if (c->recount)
		return 0;
	if ((c->all_blocks += size) > GPUMON_MAX_BYTES)
		return fail(&c->r, "segment %zu: block %zu: the blocks add up past 2^50 bytes", si, bi);
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

/* The frames member of a block: read now when its size and state are known (torch's order), else
 * marked to be read after them. */
static int block_frames_member(struct cx *c, struct seg *s, struct blk *b, size_t si, size_t bi)
{
	struct rd *r = &c->r;
	int p = peek(r);
	if (p == 'n') /* null: none */
		return skip(r, 0);
	if (p != '[')
		return fail(r, "segment %zu: block %zu: frames is not an array", si, bi);
	b->array = 1;
	if (b->have_size && b->have_state)
		return block_check(c, s, b, si, bi) || block_frames(c, s, b) ? -1 : 0;
	b->frames = r->p;
	return skip(r, 0);
}

static int block_state(struct cx *c, struct blk *b, size_t si, size_t bi)
{
	struct rd *r = &c->r;
	struct view st;
	b->have_state = -1;
	if (peek(r) != '"')
		return skip(r, 0);
	if (str(r, &st))
		return -1;
	b->live = is(&st, "active_allocated") || is(&st, "active_pending_free"); /* pending: not usable yet */
	if (!b->live && !is(&st, "inactive"))
		return fail(r, "segment %zu: block %zu has an unknown state \"%.*s\"", si, bi,
			    (int)(st.n < 40 ? st.n : 40), st.s);
	b->have_state = 1;
	return 0;
}

static int block(struct cx *c, struct seg *s, size_t si, size_t bi)
{
	struct rd *r = &c->r;
	struct blk b = {0};
	struct view key;
	size_t i = 0;
	int k;
	if (peek(r) != '{')
		return skip(r, 0) ? -1 : fail(r, "segment %zu: block %zu is not an object", si, bi);
	r->p++;
	while ((k = member(r, &i, &key)) > 0) {
		int size = is(&key, "size"), state = is(&key, "state"), frames = is(&key, "frames");
		if ((size && b.have_size) || (state && b.have_state) || (frames && b.have_frames))
			return fail(r, "segment %zu: block %zu has two %.*s", si, bi, (int)key.n, key.s);
		if (size)
			k = integer(r, &b.have_size, &b.size);
		else if (state)
			k = block_state(c, &b, si, bi);
		else if (frames)
			b.have_frames = 1, k = block_frames_member(c, s, &b, si, bi);
		else
			k = skip(r, 0);
		if (k)
			return -1;
	}
	if (k < 0 || (!b.checked && block_check(c, s, &b, si, bi)))
		return -1;
	if (b.frames) {
		const char *after = r->p;
		r->p = b.frames;
		k = block_frames(c, s, &b);
		r->p = after;
		return k;
	}
	if (!b.array && b.live && s->selected && !c->recount) /* no frames: history was not recorded */
		c->out->unsited_bytes += (uint64_t)b.size;
	return 0;
}

/* A segment's device and size, once both are read: checked and counted. */
static int segment_check(struct cx *c, struct seg *s, size_t si)
{
	struct rd *r = &c->r;
	s->checked = 1;
	if (s->have_total != 1)
		return fail(r, "segment %zu has no integer total_size", si);
	if (s->total < 0 || (uint64_t)s->total > GPUMON_MAX_BYTES)
		return fail(r, "segment %zu: total_size %lld out of range (0 to 2^50-1)", si,
			    (long long)s->total);
	if (s->have_dev != 1)
		return fail(r, "segment %zu has no integer device", si);
	if (s->dev < 0 || s->dev > INT_MAX)
		return fail(r, "segment %zu: device %lld out of range", si, (long long)s->dev);
	s->selected = c->device < 0 || s->dev == c->device;
	if (c->recount)
		return 0;
	if ((c->all_reserved += (uint64_t)s->total) > GPUMON_MAX_BYTES)
		return fail(r, "segment %zu: the segments add up past 2^50 bytes", si);
	if (c->nseg_all++ == 0)
		c->first_dev = (int)s->dev;
	else if (s->dev != c->first_dev)
		c->many_devs = 1;
	return 0;
}

static int blocks(struct cx *c, struct seg *s, size_t si)
{
	struct rd *r = &c->r;
	size_t i = 0;
	int k;
	r->p++;
	while ((k = element(r, &i)) > 0)
		if (block(c, s, si, i - 1))
			return -1;
	return k;
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

static int segment(struct cx *c, size_t si)
{
	struct rd *r = &c->r;
	struct seg s = {0};
	struct view key;
	size_t i = 0;
	int k;
	if (peek(r) != '{')
		return skip(r, 0) ? -1 : fail(r, "segment %zu is not an object", si);
	r->p++;
	while ((k = member(r, &i, &key)) > 0) {
		int dev = is(&key, "device"), total = is(&key, "total_size"), blks = is(&key, "blocks");
		if ((dev && s.have_dev) || (total && s.have_total) || (blks && s.have_blocks))
			return fail(r, "segment %zu has two %.*s", si, (int)key.n, key.s);
		if (dev) {
			k = integer(r, &s.have_dev, &s.dev);
		} else if (total) {
			k = integer(r, &s.have_total, &s.total);
		} else if (is(&key, "is_expandable")) {
			s.expandable = peek(r) == 't';
			k = skip(r, 0);
		} else if (blks) {
			s.have_blocks = 1;
			if (peek(r) != '[')
				return fail(r, "segment %zu: blocks is not an array", si);
			if (s.have_dev && s.have_total) /* torch's order: read them now */
				k = segment_check(c, &s, si) || blocks(c, &s, si) ? -1 : 0;
			else
				s.blocks = r->p, k = skip(r, 0);
		} else {
			k = skip(r, 0);
		}
		if (k)
			return -1;
	}
	if (k < 0)
		return -1;
	if (!s.have_blocks)
		return fail(r, "segment %zu has no blocks array", si);
	if (s.blocks) {
		const char *after = r->p;
		r->p = s.blocks;
		k = segment_check(c, &s, si) || blocks(c, &s, si) ? -1 : 0;
		r->p = after;
		if (k)
			return -1;
	}
	if (!s.selected || c->recount)
		return 0;
	c->out->segments++;
	c->out->reserved_bytes += (uint64_t)s.total;
	c->out->segments_with_free += s.nfree > 0;
	top_segment(c, &s);
	return 0;
}

static int walk(struct cx *c)
{
	struct rd *r = &c->r;
	size_t i = 0;
	int k;
	r->p = c->segments + 1;
	while ((k = element(r, &i)) > 0)
		if (segment(c, i - 1))
			return -1;
	return k;
}

static int document(struct cx *c)
{
	struct rd *r = &c->r;
	struct view key;
	size_t i = 0;
	int k;
	if (peek(r) != '{')
		return skip(r, 0) ? -1 : fail(r, "not a snapshot: the text is not a JSON object");
	r->p++;
	while ((k = member(r, &i, &key)) > 0) {
		if (!is(&key, "segments")) { /* device_traces, allocator_settings, what newer torch adds */
			k = skip(r, 0);
		} else if (c->segments) {
			return fail(r, "two \"segments\" arrays");
		} else if (peek(r) != '[') {
			return fail(r, "\"segments\" is not an array");
		} else {
			c->segments = r->p;
			k = walk(c);
		}
		if (k)
			return -1;
	}
	if (k < 0)
		return -1;
	if (peek(r) != -1)
		return syntax(r, "text after the document");
	return c->segments ? 0 : fail(r, "not a snapshot: no \"segments\" array");
}

/* Copies a string of the snapshot into dst (size bytes), cut at a character's start to fit: a
 * path keeps its end (the file's name and the directories nearest it tell most), after "...". */
static int put_text(struct cx *c, const struct view *v, char *dst, size_t size, int keep_end)
{
	const char *s;
	size_t n, from = 0;
	if (text(c, v, &s, &n))
		return -1;
	if (n >= size && keep_end) {
		from = n - (size - 4);
		while (from < n && (s[from] & 0xc0) == 0x80)
			from++;
		memcpy(dst, "...", 3);
		dst += 3;
	} else if (n >= size) {
		n = size - 1;
		while (n && (s[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(dst, s + from, n - from);
	dst[n - from] = '\0';
	return 0;
}

static int finish(struct cx *c)
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
		gpumon_alloc_site *d = &o->sites[o->nsites++];
		if (put_text(c, &c->sites[i].file, d->file, sizeof d->file, 1) ||
		    put_text(c, &c->sites[i].func, d->function, sizeof d->function, 0))
			return -1;
		d->line = c->sites[i].line;
		d->bytes = c->sites[i].bytes;
		d->blocks = c->sites[i].blocks;
	}
	return 0;
}

int gpumon_snapshot_condense(const char *json, size_t len, int device, uint64_t request_bytes,
			     gpumon_alloc_snapshot *out, char *err, size_t err_len)
{
	struct cx c = {.r = {.base = json, .p = json, .err = err, .err_len = err ? err_len : 0},
		       .device = device < 0 ? -1 : device,
		       .request = request_bytes,
		       .out = out};
	if (c.r.err_len)
		err[0] = '\0';
	if (out)
		memset(out, 0, sizeof *out);
	if (!json || !out)
		return fail(&c.r, "no %s", json ? "place for the result" : "snapshot"), GPUMON_E_INVAL;
	c.r.end = json + len;
	if (request_bytes > GPUMON_MAX_BYTES)
		return fail(&c.r, "request of %llu bytes out of range", (unsigned long long)request_bytes),
		       GPUMON_E_INVAL;
	int rc = document(&c);
	if (!rc && c.evicted) {
		for (unsigned i = 0; i < c.nsites; i++)
			c.sites[i].bytes = c.sites[i].blocks = 0;
		c.recount = 1;
		rc = walk(&c);
	}
	if (!rc)
		rc = finish(&c);
	free(c.sites);
	free(c.slots);
	free(c.scratch);
	if (rc)
		memset(out, 0, sizeof *out);
	return !rc ? GPUMON_OK : c.nomem ? GPUMON_E_NOMEM : GPUMON_E_INVAL;
}

/* ---- the condensed snapshot as JSON, and back (jansson: a document of a few kilobytes) ----------- */

/* A NUL-terminated string of valid UTF-8 within size bytes. */
static int good_text(const char *s, size_t size)
{
	size_t n = strnlen(s, size), k;
	if (n == size)
		return 0;
	for (size_t i = 0; i < n; i += k)
		if (!(k = utf8_len((const unsigned char *)s + i, n - i)))
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
