/* SPDX-License-Identifier: MIT */
/* oom_message.c — reading what frameworks say when they run out of GPU memory: which line says so,
 * which lines carry figures around it, the figures a message holds, and those figures as JSON and
 * back. Numbers are read digit by digit, so that the caller's locale (a decimal comma) cannot change
 * them, and never past the length given. */
#include <gpumon/gpumon.h>

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* ---- which line says the job ran out of memory ------------------------------------------------ */

static const struct {
	const char *text, *framework;
} patterns[] = {
    {"CUDA out of memory", "PyTorch"},
    {"torch.OutOfMemoryError", "PyTorch"},
    {"torch.cuda.OutOfMemoryError", "PyTorch"},
    /* TensorFlow's line also says ResourceExhaustedError: its own words go before Paddle's */
    {"OOM when allocating", "TensorFlow"},
    {"ResourceExhaustedError", "Paddle"},
    {"Out of memory error on GPU", "Paddle"},
    {"RESOURCE_EXHAUSTED: Out of memory", "JAX/XLA"},
    {"cudaErrorMemoryAllocation", "CUDA"},
    {"CUDA_ERROR_OUT_OF_MEMORY", "CUDA"},
};
#define NPATTERNS (sizeof patterns / sizeof patterns[0])

const char *gpumon_oom_message_match(const char *line, size_t len)
{
	if (!line)
		return NULL;
	for (size_t i = 0; i < NPATTERNS; i++)
		if (memmem(line, len, patterns[i].text, strlen(patterns[i].text)))
			return patterns[i].framework;
	return NULL;
}

size_t gpumon_oom_message_longest(void)
{
	size_t m = 0;
	for (size_t i = 0; i < NPATTERNS; i++)
		if (strlen(patterns[i].text) > m)
			m = strlen(patterns[i].text);
	return m;
}

/* ---- reading text: a cursor s and an end, never a NUL ------------------------------------------ */

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The position after lit when [s, end) starts with it; NULL otherwise. */
static const char *skip(const char *s, const char *end, const char *lit)
{
	size_t n = strlen(lit);
	return s && (size_t)(end - s) >= n && !memcmp(s, lit, n) ? s + n : NULL;
}

/* The first lit in [s, end), or NULL. */
static const char *find(const char *s, const char *end, const char *lit)
{
	return s ? memmem(s, (size_t)(end - s), lit, strlen(lit)) : NULL;
}

/* The position after the first lit in [s, end), or NULL. */
static const char *after(const char *s, const char *end, const char *lit)
{
	const char *p = find(s, end, lit);
	return p ? p + strlen(lit) : NULL;
}

/* An unsigned integer of at most max: the position after its digits, or NULL (no digit, or too
 * large). */
static const char *read_uint(const char *s, const char *end, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	const char *p = s;
	if (!s)
		return NULL;
	for (; p < end && is_digit(*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (x > (max - d) / 10)
			return NULL;
		x = x * 10 + d;
	}
	if (p == s)
		return NULL;
	*v = x;
	return p;
}

/* A size's unit as a framework prints it, and its power of two. */
struct unit {
	const char *name;
	unsigned shift;
};

/* c10's format_size: "N bytes" up to 1024, then two decimals of KiB, MiB, GiB */
static const struct unit torch_units[] = {
    {" bytes", 0}, {" KiB", 10}, {" MiB", 20}, {" GiB", 30}, {" TiB", 40},
};
/* Paddle's HumanReadableSize: six decimals, binary steps, SI-looking names, no space */
static const struct unit paddle_units[] = {
    {"B", 0}, {"kB", 10}, {"KB", 10}, {"MB", 20}, {"GB", 30}, {"TB", 40}, {"PB", 50},
};
/* XLA's HumanReadableNumBytes ("1.00GiB", "512B"), and jax 0.4's "N bytes" */
static const struct unit xla_units[] = {
    {" bytes", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}, {"PiB", 50}, {"EiB", 60},
};
#define UNITS(u) u, sizeof u / sizeof u[0]

/* 10^18: up to 18 decimals are read, more are skipped (frameworks print at most six) */
#define MAX_SCALE 1000000000000000000ull
/* A size too large to be a figure; dropped where it would be set. */
#define TOO_BIG UINT64_MAX

/* round(f * 2^shift / d) for f < d <= 10^18, half up: a long division one bit at a time, so that
 * nothing overflows whatever the unit. */
static uint64_t scaled_fraction(uint64_t f, uint64_t d, unsigned shift)
{
	uint64_t q = 0, r = f;
	for (unsigned i = 0; i < shift; i++) {
		r <<= 1;
		q <<= 1;
		if (r >= d) {
			q |= 1;
			r -= d;
		}
	}
	return q + (r >= d - r);
}

/*
 * A size at s: a decimal number ("139.80", "0") followed at once by one of the units. Returns the
 * position after the unit, or NULL when s holds no such size. *bytes is the figure rounded to the
 * nearest byte (half up), exactly (integer arithmetic), or TOO_BIG above GPUMON_MAX_BYTES.
 */
static const char *read_size(const char *s, const char *end, const struct unit *units, size_t nunits,
			     uint64_t *bytes)
{
	if (!s)
		return NULL;
	uint64_t whole = 0, frac = 0, scale = 1;
	int big = 0;
	const char *p = s;
	for (; p < end && is_digit(*p); p++) {
		if (whole > GPUMON_MAX_BYTES)
			big = 1;
		else
			whole = whole * 10 + (unsigned)(*p - '0');
	}
	if (p == s)
		return NULL;
	if (end - p >= 2 && *p == '.' && is_digit(p[1]))
		for (p++; p < end && is_digit(*p); p++)
			if (scale < MAX_SCALE) {
				frac = frac * 10 + (unsigned)(*p - '0');
				scale *= 10;
			}
	for (size_t i = 0; i < nunits; i++) {
		const char *q = skip(p, end, units[i].name);
		if (!q)
			continue;
		unsigned sh = units[i].shift;
		if (big || whole > (GPUMON_MAX_BYTES >> sh)) {
			*bytes = TOO_BIG;
		} else {
			*bytes = (whole << sh) + scaled_fraction(frac, scale, sh);
			if (*bytes > GPUMON_MAX_BYTES)
				*bytes = TOO_BIG;
		}
		return q;
	}
	return NULL;
}

/*
 * The size that ends right before pos (torch 1.x's "130.35 MiB already allocated;": the words are
 * found, the figure is the one before them): walks back over a unit, a number, and reads it forward,
 * which must end at pos. lo bounds the walk. Returns 1 and *bytes, or 0.
 */
static int size_before(const char *lo, const char *pos, const struct unit *units, size_t nunits,
		       uint64_t *bytes)
{
	for (size_t i = 0; i < nunits; i++) {
		size_t n = strlen(units[i].name);
		if ((size_t)(pos - lo) < n || memcmp(pos - n, units[i].name, n))
			continue;
		const char *p = pos - n;
		while (p > lo && (is_digit(p[-1]) || p[-1] == '.'))
			p--;
		return read_size(p, pos, units, nunits, bytes) == pos;
	}
	return 0;
}

/* ---- the figures --------------------------------------------------------------------------------- */

/* Each byte figure: its bit, its field, its name (the run protocol's `oom` key, Python's keyword; the
 * JSON key is the name with "_bytes"). */
static const struct {
	unsigned bit;
	size_t off;
	const char *name;
} figures[] = {
    {GPUMON_FIG_REQUEST, offsetof(gpumon_oom_figures, request_bytes), "request"},
    {GPUMON_FIG_CAPACITY, offsetof(gpumon_oom_figures, capacity_bytes), "capacity"},
    {GPUMON_FIG_FREE, offsetof(gpumon_oom_figures, free_bytes), "free"},
    {GPUMON_FIG_PROCESS, offsetof(gpumon_oom_figures, process_bytes), "process"},
    {GPUMON_FIG_ALLOCATED, offsetof(gpumon_oom_figures, allocated_bytes), "allocated"},
    {GPUMON_FIG_RESERVED, offsetof(gpumon_oom_figures, reserved_bytes), "reserved"},
    {GPUMON_FIG_CAP, offsetof(gpumon_oom_figures, cap_bytes), "cap"},
    {GPUMON_FIG_LARGEST_FREE, offsetof(gpumon_oom_figures, largest_free_bytes), "largest_free"},
    {GPUMON_FIG_PEAK, offsetof(gpumon_oom_figures, peak_bytes), "peak"},
};
#define NFIGURES   (sizeof figures / sizeof figures[0])
#define ALL_BITS   ((GPUMON_FIG_PEAK << 1) - 1u)
#define MAX_DEVICE 65535

static uint64_t *field(gpumon_oom_figures *f, size_t i)
{
	return (uint64_t *)(void *)((char *)f + figures[i].off);
}

const char *gpumon_oom_figure_name(unsigned bit)
{
	for (size_t i = 0; i < NFIGURES; i++)
		if (figures[i].bit == bit)
			return figures[i].name;
	return NULL;
}

uint64_t *gpumon_oom_figure_field(gpumon_oom_figures *f, unsigned bit)
{
	for (size_t i = 0; f && i < NFIGURES; i++)
		if (figures[i].bit == bit)
			return field(f, i);
	return NULL;
}

/* What one reading of a text has found so far. */
struct reading {
	gpumon_oom_figures *f;
	int request_exact; /* the request is the BFC allocator's "(rounded to N)", not a rounded figure */
	int xla;	   /* XLA's words gave figures: the framework is named from the whole text */
};

static void name(struct reading *r, const char *framework)
{
	if (framework && !r->f->framework[0])
		strcpy(r->f->framework, framework);
	if (!framework)
		r->xla = 1;
}

/* Sets a byte figure unless it is known already (the first report's figure stays) or too large;
 * framework NULL: XLA's words. */
static void set(struct reading *r, unsigned bit, uint64_t v, const char *framework)
{
	if (v > GPUMON_MAX_BYTES || (r->f->known & bit))
		return;
	for (size_t i = 0; i < NFIGURES; i++)
		if (figures[i].bit == bit) {
			*field(r->f, i) = v;
			r->f->known |= bit;
			name(r, framework);
		}
}

static void set_device(struct reading *r, const char *s, const char *end, const char *framework)
{
	uint64_t d;
	if (!(r->f->known & GPUMON_FIG_DEVICE) && read_uint(s, end, MAX_DEVICE, &d)) {
		r->f->device = (int)d;
		r->f->known |= GPUMON_FIG_DEVICE;
		name(r, framework);
	}
}

/* ---- PyTorch ------------------------------------------------------------------------------------- */

/* "<size><words>": the figures torch prints before what they are */
static const struct {
	const char *words;
	unsigned bit;
} torch_suffixed[] = {
    {" total capacity;", GPUMON_FIG_CAPACITY},		    /* 1.x */
    {" already allocated;", GPUMON_FIG_ALLOCATED},	    /* 1.x */
    {" free;", GPUMON_FIG_FREE},			    /* 1.x */
    {" reserved in total by PyTorch", GPUMON_FIG_RESERVED}, /* 1.x */
    {" allowed;", GPUMON_FIG_CAP},			    /* a per-process fraction, both wordings */
    {" is free", GPUMON_FIG_FREE},			    /* 2.1 on: "of which F is free" */
};

static void torch_line(struct reading *r, const char *s, const char *end)
{
	uint64_t v = 0, v2 = 0, pid = 0;
	const char *p = after(s, end, "Tried to allocate ");
	if (!p)
		return;
	if ((p = read_size(p, end, UNITS(torch_units), &v))) {
		set(r, GPUMON_FIG_REQUEST, v, "torch");
		set_device(r, skip(p, end, " (GPU "), end, "torch"); /* 1.x */
	}
	for (size_t i = 0; i < sizeof torch_suffixed / sizeof torch_suffixed[0]; i++) {
		p = find(s, end, torch_suffixed[i].words);
		if (p && size_before(s, p, UNITS(torch_units), &v))
			set(r, torch_suffixed[i].bit, v, "torch");
	}
	/* 2.1 on: "GPU N has a total capacity of T of which F is free" (2.1 spelled "capacty") */
	for (p = s; (p = after(p, end, "GPU "));) {
		const char *c = p;
		while (c < end && is_digit(*c))
			c++;
		if (c == p || !(c = skip(c, end, " has a total capac")))
			continue;
		set_device(r, p, end, "torch");
		c = skip(c, end, "i") ? c + 1 : c;
		if ((c = read_size(skip(c, end, "ty of "), end, UNITS(torch_units), &v)))
			set(r, GPUMON_FIG_CAPACITY, v, "torch");
		break;
	}
	if ((p = read_size(after(s, end, "this process has "), end, UNITS(torch_units), &v)) &&
	    skip(p, end, " memory in use"))
		set(r, GPUMON_FIG_PROCESS, v, "torch");
	/* 2.1 on: "A is allocated by PyTorch, [with P allocated in private pools (e.g., CUDA Graphs), ]and
	   U is reserved by PyTorch but unallocated": A counts the private pools; reserved is A + U */
	p = find(s, end, " is allocated by PyTorch");
	if (p && size_before(s, p, UNITS(torch_units), &v)) {
		set(r, GPUMON_FIG_ALLOCATED, v, "torch");
		p = find(p, end, " is reserved by PyTorch but unallocated");
		if (p && size_before(s, p, UNITS(torch_units), &v2) && v <= GPUMON_MAX_BYTES &&
		    v2 <= GPUMON_MAX_BYTES)
			set(r, GPUMON_FIG_RESERVED, v + v2, "torch");
	}
	/* "Process P has X memory in use", each other process in the message's order */
	for (p = s; (p = after(p, end, "Process "));) {
		const char *q = read_size(skip(read_uint(p, end, 0xffffffffu, &pid), end, " has "), end,
					  UNITS(torch_units), &v);
		if (!q || !skip(q, end, " memory in use") || v > GPUMON_MAX_BYTES)
			continue;
		gpumon_oom_figures *f = r->f;
		unsigned i = 0;
		while (i < f->nothers && f->others[i].pid != pid)
			i++;
		if (i == f->nothers && i < GPUMON_OOM_MAX_OTHERS) {
			f->others[i].pid = (unsigned)pid;
			f->others[i].bytes = v;
			f->nothers++;
			name(r, "torch");
		}
	}
}

/* ---- PaddlePaddle -------------------------------------------------------------------------------- */

/* "Cannot allocate X memory on GPU N, [Y memory has been allocated and ]available memory is only Z." */
static void paddle_line(struct reading *r, const char *s, const char *end)
{
	uint64_t v;
	const char *p = after(s, end, "Cannot allocate ");
	if (!p)
		return;
	set_device(r, after(s, end, "Out of memory error on GPU "), end, "paddle");
	if (!(p = read_size(p, end, UNITS(paddle_units), &v)))
		return;
	set(r, GPUMON_FIG_REQUEST, v, "paddle");
	if (!(p = skip(p, end, " memory on GPU ")))
		return;
	set_device(r, p, end, "paddle");
	uint64_t d;
	if (!(p = skip(read_uint(p, end, UINT64_MAX, &d), end, ", ")))
		return;
	const char *q = read_size(p, end, UNITS(paddle_units), &v);
	if (q && (q = skip(q, end, " memory has been allocated and "))) {
		set(r, GPUMON_FIG_RESERVED, v, "paddle");
		p = q;
	}
	if (read_size(skip(p, end, "available memory is only "), end, UNITS(paddle_units), &v))
		set(r, GPUMON_FIG_FREE, v, "paddle");
}

/* ---- XLA (JAX, TensorFlow) ----------------------------------------------------------------------- */

/* The BFC allocator's statistics, one a line: "Limit:        112583507968" */
static const struct {
	const char *label;
	unsigned bit; /* 0: not a figure of ours (BFC's "Reserved" is not its pool) */
} bfc_stats[] = {
    {"Limit:", GPUMON_FIG_CAP},	    {"InUse:", GPUMON_FIG_ALLOCATED},
    {"MaxInUse:", GPUMON_FIG_PEAK}, {"NumAllocs:", 0},
    {"MaxAllocSize:", 0},	    {"Reserved:", 0},
    {"PeakReserved:", 0},	    {"LargestFreeBlock:", GPUMON_FIG_LARGEST_FREE},
};
#define STAT_BLANKS 4

/* Whether [s, end) is a Stats line: a label, at least STAT_BLANKS blanks, digits only (a line end
 * aside). Returns the label's index and the value (TOO_BIG when it does not fit), or -1. */
static int bfc_stat(const char *s, const char *end, uint64_t *v)
{
	while (end > s && (end[-1] == '\n' || end[-1] == '\r'))
		end--;
	for (size_t i = 0; i < sizeof bfc_stats / sizeof bfc_stats[0]; i++) {
		const char *p = skip(s, end, bfc_stats[i].label), *q = p;
		if (!p)
			continue;
		while (q < end && (*q == ' ' || *q == '\t'))
			q++;
		if (q - p < STAT_BLANKS || q == end)
			return -1;
		for (p = q; p < end; p++)
			if (!is_digit(*p))
				return -1;
		if (!read_uint(q, end, UINT64_MAX, v))
			*v = TOO_BIG;
		return (int)i;
	}
	return -1;
}

static void xla_line(struct reading *r, const char *s, const char *end)
{
	uint64_t v;
	const char *p;
	/* "Out of memory while trying to allocate X[ with allocator NAME on device N]" */
	if ((p = read_size(after(s, end, "Out of memory while trying to allocate "), end, UNITS(xla_units),
			   &v))) {
		set(r, GPUMON_FIG_REQUEST, v, NULL);
		if ((p = skip(p, end, " with allocator "))) {
			while (p < end && *p != ' ')
				p++;
			set_device(r, skip(p, end, " on device "), end, NULL);
		}
	}
	/* the BFC allocator's "ran out of memory trying to allocate 1.00GiB (rounded to 1073741824)":
	   the exact figure, taken over a rounded one */
	p = read_size(after(s, end, "ran out of memory trying to allocate "), end, UNITS(xla_units), &v);
	if ((p = read_uint(skip(p, end, " (rounded to "), end, GPUMON_MAX_BYTES, &v)) && skip(p, end, ")") &&
	    !r->request_exact) {
		r->f->known &= ~(unsigned)GPUMON_FIG_REQUEST;
		set(r, GPUMON_FIG_REQUEST, v, NULL);
		r->request_exact = 1;
	}
	int i = bfc_stat(s, end, &v);
	if (i >= 0 && bfc_stats[i].bit)
		set(r, bfc_stats[i].bit, v, NULL);
}

/* ---- TensorFlow ---------------------------------------------------------------------------------- */

static const struct {
	const char *name;
	unsigned size;
} tf_types[] = {
    /* one byte */
    {"int8", 1},
    {"uint8", 1},
    {"bool", 1},
    {"qint8", 1},
    {"quint8", 1},
    /* two */
    {"half", 2},
    {"float16", 2},
    {"bfloat16", 2},
    {"int16", 2},
    {"uint16", 2},
    {"qint16", 2},
    {"quint16", 2},
    /* four */
    {"float", 4},
    {"float32", 4},
    {"int32", 4},
    {"uint32", 4},
    {"qint32", 4},
    /* eight, sixteen */
    {"double", 8},
    {"float64", 8},
    {"int64", 8},
    {"uint64", 8},
    {"complex64", 8},
    {"complex128", 16},
};

static uint64_t mul_saturated(uint64_t a, uint64_t b)
{
	return a && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

/* "OOM when allocating tensor with shape[16384,16384,16] and type float on .../device:GPU:0 ...":
 * the request is the shape's elements times the type's size. */
static void tf_line(struct reading *r, const char *s, const char *end)
{
	const char *p = after(s, end, "OOM when allocating tensor with shape[");
	if (!p && !(p = after(s, end, "OOM when allocating tensor of shape [")))
		return;
	uint64_t n = 1, d;
	int ok = 1;
	if (p < end && *p != ']')
		for (;;) {
			if (!(p = read_uint(p, end, UINT64_MAX, &d))) {
				ok = 0;
				break;
			}
			n = mul_saturated(n, d);
			if (p >= end || *p != ',')
				break;
			p = skip(p + 1, end, " ") ? p + 2 : p + 1;
		}
	if (!ok || !(p = skip(p, end, "] and type ")))
		return;
	const char *t = p;
	while (p < end && *p != ' ' && *p != ',' && *p != ')')
		p++;
	for (size_t i = 0; i < sizeof tf_types / sizeof tf_types[0]; i++)
		if (strlen(tf_types[i].name) == (size_t)(p - t) &&
		    !memcmp(t, tf_types[i].name, (size_t)(p - t))) {
			set(r, GPUMON_FIG_REQUEST, mul_saturated(n, tf_types[i].size), "tf");
			break;
		}
	set_device(r, after(p, end, "device:GPU:"), end, "tf");
}

/* ---- the text ------------------------------------------------------------------------------------ */

/* Names the framework of XLA's words from the whole text: JAX's exception classes, TensorFlow's
 * words, then the status code (both print it; JAX's exception starts with it). */
static const char *xla_framework(const char *s, const char *end)
{
	if (find(s, end, "JaxRuntimeError") || find(s, end, "XlaRuntimeError"))
		return "jax";
	if (find(s, end, "tensorflow") || find(s, end, "OOM when allocating"))
		return "tf";
	if (find(s, end, "RESOURCE_EXHAUSTED"))
		return "jax";
	return "";
}

int gpumon_oom_message_parse(const char *text, size_t len, gpumon_oom_figures *out)
{
	if (!text || !out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	struct reading r = {.f = out};
	const char *end = text + len;
	for (const char *s = text; s < end;) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;
		/* TensorFlow's allocator says it ran out, then that this is no failure: nothing to read */
		if (!find(s, e, "this is not a failure")) {
			torch_line(&r, s, e);
			paddle_line(&r, s, e);
			xla_line(&r, s, e);
			tf_line(&r, s, e);
		}
		s = nl ? nl + 1 : end;
	}
	if (r.xla && !out->framework[0])
		strcpy(out->framework, xla_framework(text, end));
	int n = 0;
	for (unsigned k = out->known; k; k &= k - 1)
		n++;
	return n;
}

int gpumon_oom_message_detail(const char *line, size_t len)
{
	uint64_t v;
	if (!line)
		return 0;
	const char *end = line + len;
	if (find(line, end, "ran out of memory trying to allocate") &&
	    !find(line, end, "this is not a failure"))
		return 1;
	return bfc_stat(line, end, &v) >= 0;
}

/* ---- as JSON --------------------------------------------------------------------------------------- */

/* Sets key to v in o; a failed allocation (v NULL) fails the document. */
static int put(json_t *o, const char *key, json_t *v)
{
	return v ? json_object_set_new(o, key, v) : -1;
}

/* A framework's name as the figures carry it: printable ASCII, at most 15 bytes. */
static int framework_ok(const char *s, size_t n)
{
	if (n >= sizeof((gpumon_oom_figures *)0)->framework)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return 0;
	return 1;
}

/* Whether f is what decode could give back: known bits, figures and device in range, a framework
 * name as framework_ok() takes. */
static int encodable(gpumon_oom_figures *f)
{
	const char *nul = memchr(f->framework, 0, sizeof f->framework);
	if ((f->known & ~ALL_BITS) || !nul || !framework_ok(f->framework, (size_t)(nul - f->framework)) ||
	    f->nothers > GPUMON_OOM_MAX_OTHERS)
		return 0;
	if ((f->known & GPUMON_FIG_DEVICE) && (f->device < 0 || f->device > MAX_DEVICE))
		return 0;
	for (size_t i = 0; i < NFIGURES; i++)
		if ((f->known & figures[i].bit) && *field(f, i) > GPUMON_MAX_BYTES)
			return 0;
	for (unsigned i = 0; i < f->nothers; i++)
		if (f->others[i].bytes > GPUMON_MAX_BYTES)
			return 0;
	return 1;
}

static json_t *others_json(const gpumon_oom_figures *f)
{
	json_t *a = json_array();
	for (unsigned i = 0; a && i < f->nothers; i++) {
		json_t *o = json_pack("{s:I, s:I}", "pid", (json_int_t)f->others[i].pid, "bytes",
				      (json_int_t)f->others[i].bytes);
		if (!o || json_array_append_new(a, o)) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int gpumon_oom_figures_encode(const gpumon_oom_figures *f, char **json)
{
	if (json)
		*json = NULL;
	if (!f || !json)
		return GPUMON_E_INVAL;
	gpumon_oom_figures c = *f; /* field() takes a writable struct */
	if (!encodable(&c))
		return GPUMON_E_INVAL;
	json_t *o = json_object();
	int bad = !o || put(o, "framework", json_string(c.framework));
	if (!bad && c.pid)
		bad = put(o, "pid", json_integer((json_int_t)c.pid));
	if (!bad && (c.known & GPUMON_FIG_DEVICE))
		bad = put(o, "device", json_integer(c.device));
	for (size_t i = 0; !bad && i < NFIGURES; i++)
		if (c.known & figures[i].bit) {
			char key[32];
			snprintf(key, sizeof key, "%s_bytes", figures[i].name);
			bad = put(o, key, json_integer((json_int_t)*field(&c, i)));
		}
	if (!bad)
		bad = put(o, "others", others_json(&c));
	char *text = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	json_decref(o);
	if (!text)
		return GPUMON_E_NOMEM;
	/* json_dumps's buffer comes from jansson's allocator: copied, so that gpumon_free() frees it */
	*json = strdup(text);
	free(text);
	return *json ? GPUMON_OK : GPUMON_E_NOMEM;
}

/* An integer member of o in 0..max: 1 and *v when there, 0 when absent, -1 when it is anything
 * else. */
static int member(json_t *o, const char *key, uint64_t max, uint64_t *v)
{
	json_t *j = json_object_get(o, key);
	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0 || (uint64_t)json_integer_value(j) > max)
		return -1;
	*v = (uint64_t)json_integer_value(j);
	return 1;
}

static int decode_others(json_t *a, gpumon_oom_figures *out)
{
	if (!json_is_array(a) || json_array_size(a) > GPUMON_OOM_MAX_OTHERS)
		return -1;
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *o = json_array_get(a, i);
		uint64_t pid, bytes;
		if (!json_is_object(o) || member(o, "pid", 0xffffffffu, &pid) != 1 ||
		    member(o, "bytes", GPUMON_MAX_BYTES, &bytes) != 1)
			return -1;
		out->others[i].pid = (unsigned)pid;
		out->others[i].bytes = bytes;
		out->nothers++;
	}
	return 0;
}

static int decode(json_t *o, gpumon_oom_figures *out)
{
	uint64_t v;
	int m;
	if (!json_is_object(o))
		return -1;
	json_t *fw = json_object_get(o, "framework");
	if (fw) {
		if (!json_is_string(fw) || !framework_ok(json_string_value(fw), json_string_length(fw)))
			return -1;
		memcpy(out->framework, json_string_value(fw), json_string_length(fw));
	}
	if ((m = member(o, "pid", 0xffffffffu, &v)) < 0)
		return -1;
	out->pid = m ? (unsigned)v : 0;
	if ((m = member(o, "device", MAX_DEVICE, &v)) < 0)
		return -1;
	if (m) {
		out->device = (int)v;
		out->known |= GPUMON_FIG_DEVICE;
	}
	for (size_t i = 0; i < NFIGURES; i++) {
		char key[32];
		snprintf(key, sizeof key, "%s_bytes", figures[i].name);
		if ((m = member(o, key, GPUMON_MAX_BYTES, field(out, i))) < 0)
			return -1;
		if (m)
			out->known |= figures[i].bit;
	}
	json_t *others = json_object_get(o, "others");
	return others ? decode_others(others, out) : 0;
}

int gpumon_oom_figures_decode(const char *json, size_t len, gpumon_oom_figures *out)
{
	if (!json || !out)
		return GPUMON_E_INVAL;
	memset(out, 0, sizeof *out);
	json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
	int rc = decode(o, out);
	json_decref(o);
	if (rc) {
		memset(out, 0, sizeof *out);
		return GPUMON_E_INVAL;
	}
	return GPUMON_OK;
}
