/* SPDX-License-Identifier: MIT */
/* scenario.c — parser of the fake NVML's scenario files. Every line becomes a list of small "set
 * key K of target X to V" events, replayed by the time model in scenario_state.c. Pure: no I/O,
 * no globals written. */
#include "scenario.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_DRIVER "580.159.04"
#define DEFAULT_NVML "12.580.159.04"
#define MAX_TOKENS (SCN_MAX_LINE / 2 + 2)
#define MAX_TIME 1e12 /* seconds; larger times are rejected as bad numbers */

/* ---- the scenario ---------------------------------------------------------------------------- */

#include "scenario_internal.h"

/* Value types of keys */
enum vtype { VT_NAME, VT_UUID, VT_BUS, VT_SIZE, VT_PCT, VT_U32, VT_U64, VT_USED, VT_TYPE, VT_TEXT };

struct key {
	const char *name;
	unsigned char type;
};

static const struct key gpu_keys[GK_N] = {
	[GK_NAME] = {"name", VT_NAME},         [GK_UUID] = {"uuid", VT_UUID},
	[GK_BUS] = {"bus", VT_BUS},            [GK_TOTAL] = {"total", VT_SIZE},
	[GK_RESERVED] = {"reserved", VT_SIZE}, [GK_USED] = {"used", VT_SIZE},
	[GK_UTIL] = {"util", VT_PCT},          [GK_MEMUTIL] = {"memutil", VT_PCT},
	[GK_TEMP] = {"temp", VT_U32},          [GK_POWER] = {"power", VT_U32},
	[GK_ENERGY] = {"energy", VT_U64},      [GK_SM] = {"sm", VT_U32},
	[GK_MEM] = {"mem", VT_U32},
};

static const struct key proc_keys[PK_N] = {
	[PK_USED] = {"used", VT_USED}, [PK_TYPE] = {"type", VT_TYPE}, [PK_NAME] = {"name", VT_TEXT},
	[PK_GI] = {"gi", VT_U32},      [PK_CI] = {"ci", VT_U32},      [PK_GROW] = {"grow", VT_SIZE},
};


/* Exported names, in enum scn_fn order; is_dev: the call is about one GPU (gpu= applies). */
static const struct {
	const char *name;
	int is_dev;
} fns[SCN_FN_N] = {
	{"nvmlInit", 0}, {"nvmlInit_v2", 0}, {"nvmlShutdown", 0}, {"nvmlErrorString", 0},
	{"nvmlDeviceGetCount", 0}, {"nvmlDeviceGetCount_v2", 0}, {"nvmlDeviceGetHandleByIndex", 1},
	{"nvmlDeviceGetHandleByIndex_v2", 1}, {"nvmlDeviceGetMemoryInfo", 1},
	{"nvmlDeviceGetMemoryInfo_v2", 1}, {"nvmlDeviceGetName", 1}, {"nvmlDeviceGetUUID", 1},
	{"nvmlDeviceGetPciInfo", 1}, {"nvmlDeviceGetPciInfo_v2", 1}, {"nvmlDeviceGetPciInfo_v3", 1},
	{"nvmlDeviceGetUtilizationRates", 1}, {"nvmlDeviceGetTemperature", 1},
	{"nvmlDeviceGetPowerUsage", 1}, {"nvmlDeviceGetTotalEnergyConsumption", 1},
	{"nvmlDeviceGetClockInfo", 1}, {"nvmlSystemGetDriverVersion", 0},
	{"nvmlSystemGetNVMLVersion", 0}, {"nvmlSystemGetProcessName", 0},
	{"nvmlDeviceGetComputeRunningProcesses", 1}, {"nvmlDeviceGetComputeRunningProcesses_v2", 1},
	{"nvmlDeviceGetComputeRunningProcesses_v3", 1}, {"nvmlDeviceGetGraphicsRunningProcesses", 1},
	{"nvmlDeviceGetGraphicsRunningProcesses_v2", 1},
	{"nvmlDeviceGetGraphicsRunningProcesses_v3", 1},
	/* properties, memory health and events (fake_props_calls.c) */
	{"nvmlDeviceGetPowerManagementLimit", 1}, {"nvmlDeviceGetEnforcedPowerLimit", 1},
	{"nvmlDeviceGetPowerManagementDefaultLimit", 1}, {"nvmlDeviceGetPowerManagementLimitConstraints", 1},
	{"nvmlDeviceGetPowerManagementMode", 1}, {"nvmlDeviceGetFanSpeed", 1},
	{"nvmlDeviceGetPerformanceState", 1}, {"nvmlDeviceGetFieldValues", 1}, {"nvmlDeviceGetMaxClockInfo", 1},
	{"nvmlDeviceGetSerial", 1}, {"nvmlDeviceGetVbiosVersion", 1}, {"nvmlDeviceGetComputeMode", 1},
	{"nvmlDeviceGetPersistenceMode", 1}, {"nvmlDeviceGetCurrPcieLinkGeneration", 1},
	{"nvmlDeviceGetMaxPcieLinkGeneration", 1}, {"nvmlDeviceGetCurrPcieLinkWidth", 1},
	{"nvmlDeviceGetMaxPcieLinkWidth", 1}, {"nvmlDeviceGetMigMode", 1}, {"nvmlDeviceGetEccMode", 1},
	{"nvmlDeviceGetTotalEccErrors", 1}, {"nvmlDeviceGetMemoryErrorCounter", 1},
	{"nvmlDeviceGetRetiredPages", 1}, {"nvmlDeviceGetRetiredPagesPendingStatus", 1},
	{"nvmlDeviceGetRemappedRows", 1}, {"nvmlEventSetCreate", 0}, {"nvmlDeviceRegisterEvents", 1},
	{"nvmlEventSetWait_v2", 0}, {"nvmlEventSetFree", 0},
	/* MIG */
	{"nvmlDeviceGetMaxMigDeviceCount", 1},
	{"nvmlDeviceGetMigDeviceHandleByIndex", 1}, {"nvmlDeviceGetGpuInstanceId", 1},
	{"nvmlDeviceGetComputeInstanceId", 1}, {"nvmlDeviceIsMigDeviceHandle", 1},
	{"nvmlDeviceGetDeviceHandleFromMigDeviceHandle", 1},
};

/* NVML's return codes by name (without the NVML_ERROR_ prefix, which is also accepted). */
static const struct {
	const char *name;
	int code;
} codes[] = {
	{"SUCCESS", 0}, {"UNINITIALIZED", 1}, {"INVALID_ARGUMENT", 2}, {"NOT_SUPPORTED", 3},
	{"NO_PERMISSION", 4}, {"ALREADY_INITIALIZED", 5}, {"NOT_FOUND", 6}, {"INSUFFICIENT_SIZE", 7},
	{"INSUFFICIENT_POWER", 8}, {"DRIVER_NOT_LOADED", 9}, {"TIMEOUT", 10}, {"IRQ_ISSUE", 11},
	{"LIBRARY_NOT_FOUND", 12}, {"FUNCTION_NOT_FOUND", 13}, {"CORRUPTED_INFOROM", 14},
	{"GPU_IS_LOST", 15}, {"RESET_REQUIRED", 16}, {"OPERATING_SYSTEM", 17},
	{"LIB_RM_VERSION_MISMATCH", 18}, {"IN_USE", 19}, {"MEMORY", 20}, {"NO_DATA", 21},
	{"VGPU_ECC_NOT_ENABLED", 22}, {"INSUFFICIENT_RESOURCES", 23}, {"FREQ_NOT_SUPPORTED", 24},
	{"ARGUMENT_VERSION_MISMATCH", 25}, {"DEPRECATED", 26}, {"NOT_READY", 27},
	{"GPU_NOT_FOUND", 28}, {"INVALID_STATE", 29}, {"UNKNOWN", 999},
};

const char *scn_fn_name(unsigned fn)
{
	return fn < SCN_FN_N ? fns[fn].name : "?";
}

unsigned scn_gpu_count(const struct scn *s)
{
	return s->ngpus;
}

const char *scn_driver_version(const struct scn *s)
{
	return s->driver;
}

const char *scn_nvml_version(const struct scn *s)
{
	return s->nvml;
}

int scn_init_error(const struct scn *s)
{
	return s->init_error;
}

int scn_rule_code(const struct scn *s, unsigned fn, int gpu, double t, int *code)
{
	for (size_t i = s->nrules; i-- > 0;) {
		const struct rule *r = &s->rule[i];
		if (!r->hang && r->fn == fn && (r->gpu < 0 || r->gpu == gpu) && r->from <= t && t < r->until) {
			*code = r->code;
			return 1;
		}
	}
	return 0;
}

int scn_hang_until(const struct scn *s, unsigned fn, int gpu, double t, double *until)
{
	for (size_t i = s->nrules; i-- > 0;) {
		const struct rule *r = &s->rule[i];
		if (r->hang && r->fn == fn && (r->gpu < 0 || r->gpu == gpu) && r->from <= t && t < r->until) {
			*until = r->until;
			return 1;
		}
	}
	return 0;
}

void scn_free(struct scn *s)
{
	if (!s)
		return;
	free(s->slot);
	free(s->gpu_first);
	free(s->xid);
	free(s->decl);
	free(s->at);
	free(s->rule);
	free(s->pool);
	scn__mig_free(s);
	free(s);
}

/* ---- the parser ------------------------------------------------------------------------------ */

struct kv {
	unsigned key;
	uint64_t val;
};

struct parser {
	struct scn *s;
	int line;
	int failed;
	char *err;
	size_t errlen;
	char buf[SCN_MAX_LINE + 1];
	char *tok[MAX_TOKENS];
	size_t ntok;
	struct kv kv[MAX_TOKENS];
	size_t nkv;
	int gpu_line[SCN_MAX_GPUS]; /* line that declared each GPU; 0: not declared */
	size_t next[SCN_MAX_GPUS];  /* finish(): next free place of each GPU's slots */
	uint32_t *hash;             /* (gpu, pid) -> slot + 1; 0: empty */
	size_t hash_cap;
};

__attribute__((format(printf, 2, 3))) static int fail(struct parser *p, const char *fmt, ...)
{
	if (p->failed)
		return -1;
	p->failed = 1;
	if (p->err && p->errlen > 0) {
		char msg[256];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof msg, fmt, ap);
		va_end(ap);
		snprintf(p->err, p->errlen, "%d: %s", p->line, msg);
	}
	return -1;
}

/* A token as it may appear in a message: 40 bytes at most, unprintable bytes as '?'. */
static const char *shown(const char *tok, char out[48])
{
	size_t i = 0;
	for (; tok[i] && i < 40; i++)
		out[i] = (tok[i] >= 0x20 && tok[i] < 0x7f) ? tok[i] : '?';
	if (tok[i]) {
		memcpy(out + i, "...", 3);
		i += 3;
	}
	out[i] = '\0';
	return out;
}

/* Ensures room for need elements of size elem in *arr (capacity *cap, at most max). */
static int reserve(struct parser *p, void **arr, size_t *cap, size_t need, size_t elem, size_t max)
{
	if (need <= *cap)
		return 0;
	if (need > max)
		return -1;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	if (n > max)
		n = max;
	void *q = realloc(*arr, n * elem);
	if (!q)
		return fail(p, "out of memory");
	*arr = q;
	*cap = n;
	return 0;
}

static int pool_add(struct parser *p, const char *str, uint64_t *off)
{
	struct scn *s = p->s;
	size_t n = strlen(str) + 1;
	if (reserve(p, (void **)&s->pool, &s->pool_cap, s->pool_len + n, 1, SCN_MAX_TEXT) < 0)
		return fail(p, "more than %u MiB of strings", SCN_MAX_TEXT >> 20);
	memcpy(s->pool + s->pool_len, str, n);
	*off = s->pool_len;
	s->pool_len += n;
	return 0;
}

static int emit(struct parser *p, int at, double t, int kind, size_t target, size_t count, unsigned key,
		uint64_t val)
{
	struct scn *s = p->s;
	struct event **arr = at ? &s->at : &s->decl;
	size_t *n = at ? &s->nat : &s->ndecl, *cap = at ? &s->at_cap : &s->decl_cap;
	if (s->nat + s->ndecl >= SCN_MAX_EVENTS ||
	    reserve(p, (void **)arr, cap, *n + 1, sizeof **arr, SCN_MAX_EVENTS) < 0)
		return fail(p, "more than %d changes in the file", SCN_MAX_EVENTS);
	(*arr)[(*n)++] = (struct event){.t = t, .val = val, .target = (uint32_t)target,
					.count = (uint32_t)count, .kind = (uint8_t)kind, .key = (uint8_t)key};
	return 0;
}

/* ---- slots: the (gpu, pid) pairs, found through an open-addressing hash ---------------------- */

static size_t hash_of(uint32_t gpu, uint32_t pid, size_t cap)
{
	uint64_t x = ((uint64_t)gpu << 32 | pid) * 0x9E3779B97F4A7C15ull;
	return (size_t)(x ^ (x >> 29)) & (cap - 1);
}

/* Index of the slot of (gpu, pid) in the hash, or of the empty place where it would go. */
static size_t hash_place(const struct parser *p, uint32_t gpu, uint32_t pid)
{
	size_t h = hash_of(gpu, pid, p->hash_cap);
	for (;; h = (h + 1) & (p->hash_cap - 1)) {
		uint32_t v = p->hash[h];
		if (!v || (p->s->slot[v - 1].gpu == gpu && p->s->slot[v - 1].pid == pid))
			return h;
	}
}

static int hash_grow(struct parser *p, size_t need)
{
	if (need * 2 <= p->hash_cap)
		return 0;
	size_t cap = p->hash_cap ? p->hash_cap : 64;
	while (need * 2 > cap)
		cap *= 2;
	uint32_t *h = calloc(cap, sizeof *h);
	if (!h)
		return fail(p, "out of memory");
	free(p->hash);
	p->hash = h;
	p->hash_cap = cap;
	for (size_t i = 0; i < p->s->nslots; i++)
		p->hash[hash_place(p, p->s->slot[i].gpu, p->s->slot[i].pid)] = (uint32_t)(i + 1);
	return 0;
}

static int slot_exists(const struct parser *p, uint32_t gpu, uint32_t pid)
{
	return p->hash_cap && p->hash[hash_place(p, gpu, pid)];
}

/* The slot of (gpu, pid), made if new; room was reserved by the caller. */
static size_t slot_get(struct parser *p, uint32_t gpu, uint32_t pid)
{
	struct scn *s = p->s;
	size_t h = hash_place(p, gpu, pid);
	if (p->hash[h])
		return p->hash[h] - 1;
	s->slot[s->nslots] = (struct slot){.gpu = gpu, .pid = pid, .decl_line = 0};
	p->hash[h] = (uint32_t)(++s->nslots);
	return s->nslots - 1;
}

static int slots_reserve(struct parser *p, size_t more)
{
	struct scn *s = p->s;
	if (more > SCN_MAX_PROCS - s->nslots)
		return fail(p, "more than %d processes", SCN_MAX_PROCS);
	if (reserve(p, (void **)&s->slot, &s->slot_cap, s->nslots + more, sizeof *s->slot,
		    SCN_MAX_PROCS) < 0)
		return -1;
	return hash_grow(p, s->nslots + more);
}

/* ---- values ---------------------------------------------------------------------------------- */

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static int parse_u64(const char *str, uint64_t *v)
{
	uint64_t x = 0;
	if (!*str)
		return -1;
	for (; *str; str++) {
		if (!is_digit(*str) || x > (UINT64_MAX - (uint64_t)(*str - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*str - '0');
	}
	*v = x;
	return 0;
}

static int parse_u32(const char *str, uint64_t *v)
{
	return parse_u64(str, v) < 0 || *v > UINT32_MAX ? -1 : 0;
}

int scn__parse_u32(const char *str, uint64_t *v)
{
	return parse_u32(str, v);
}

/* DIGITS[.DIGITS]: the integer part in *ip and the fraction in *frac; returns the rest. */
static const char *parse_decimal(const char *str, uint64_t *ip, double *frac, uint64_t max)
{
	uint64_t x = 0;
	double f = 0, scale = 0.1;
	if (!is_digit(*str))
		return NULL;
	for (; is_digit(*str); str++) {
		uint64_t d = (uint64_t)(*str - '0');
		if (x > (max - d) / 10)
			return NULL;
		x = x * 10 + d;
	}
	if (*str == '.') {
		if (!is_digit(*++str))
			return NULL;
		for (; is_digit(*str); str++, scale /= 10)
			f += (*str - '0') * scale;
	}
	*ip = x;
	*frac = f;
	return str;
}

/* Bytes: DIGITS, or DIGITS[.DIGITS] followed by KiB, MiB, GiB or TiB. */
static int parse_size(const char *str, uint64_t *v)
{
	static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
	uint64_t ip, mult = 1;
	double frac;
	const char *rest = parse_decimal(str, &ip, &frac, UINT64_MAX);
	if (!rest)
		return -1;
	if (*rest) {
		size_t u = 0;
		while (u < 4 && strcmp(rest, units[u]) != 0)
			u++;
		if (u == 4)
			return -1;
		mult = (uint64_t)1 << (10 * (u + 1));
	} else if (strchr(str, '.')) {
		return -1; /* no fractions of a byte */
	}
	if (ip > (UINT64_MAX - 1) / mult)
		return -1;
	uint64_t whole = ip * mult, part = (uint64_t)(frac * (double)mult);
	if (part >= USED_NA - whole)
		return -1;
	*v = whole + part;
	return 0;
}

int scn__parse_size(const char *str, uint64_t *v)
{
	return parse_size(str, v);
}

static int parse_time(const char *str, double *t)
{
	uint64_t ip;
	double frac;
	const char *rest = parse_decimal(str, &ip, &frac, (uint64_t)MAX_TIME);
	if (!rest || *rest)
		return -1;
	*t = (double)ip + frac;
	return 0;
}

static int hex_field(const char **str, unsigned maxdigits, unsigned *v)
{
	unsigned x = 0, n = 0;
	for (;; n++, (*str)++) {
		char c = **str;
		int d = is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
					       : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
		if (d < 0)
			break;
		if (n == maxdigits)
			return -1;
		x = x * 16 + (unsigned)d;
	}
	*v = x;
	return n ? 0 : -1;
}

/* DOMAIN:BUS:DEVICE.FUNCTION in hex, packed as domain << 16 | bus << 8 | device << 3 | function. */
static int parse_bus(const char *str, uint64_t *v)
{
	unsigned dom, bus, dev, fn;
	if (hex_field(&str, 8, &dom) < 0 || *str++ != ':' || hex_field(&str, 2, &bus) < 0 ||
	    *str++ != ':' || hex_field(&str, 2, &dev) < 0 || *str++ != '.' ||
	    hex_field(&str, 1, &fn) < 0 || *str || dom > 0xFFFF || dev > 0x1F || fn > 7)
		return -1;
	*v = (uint64_t)dom << 16 | bus << 8 | dev << 3 | fn;
	return 0;
}

/* A return code: a number, or a name with or without the NVML_ERROR_ prefix. */
static int parse_code(const char *str, int *code)
{
	uint64_t v;
	if (parse_u64(str, &v) == 0) {
		if (v > INT_MAX)
			return -1;
		*code = (int)v;
		return 0;
	}
	if (strncmp(str, "NVML_ERROR_", 11) == 0)
		str += 11;
	else if (strcmp(str, "NVML_SUCCESS") == 0)
		str += 5;
	for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
		if (strcmp(str, codes[i].name) == 0) {
			*code = codes[i].code;
			return 0;
		}
	}
	return -1;
}

static int parse_string(struct parser *p, const char *key, const char *val, size_t max, uint64_t *v)
{
	if (strlen(val) >= max)
		return fail(p, "%s longer than %zu bytes", key, max - 1);
	return pool_add(p, val, v);
}

static int parse_value(struct parser *p, const struct key *k, const char *val, uint64_t *v)
{
	char b[48];
	const char *what = NULL;
	switch (k->type) {
	case VT_NAME: return parse_string(p, k->name, val, SCN_NAME_LEN, v);
	case VT_UUID: return parse_string(p, k->name, val, SCN_UUID_LEN, v);
	case VT_TEXT: return parse_string(p, k->name, val, SCN_MAX_LINE + 1, v);
	case VT_BUS: what = parse_bus(val, v) < 0 ? "bus id" : NULL; break;
	case VT_SIZE: what = parse_size(val, v) < 0 ? "size" : NULL; break;
	case VT_PCT: what = parse_u32(val, v) < 0 || *v > 100 ? "percentage" : NULL; break;
	case VT_U32: what = parse_u32(val, v) < 0 ? "number" : NULL; break;
	case VT_U64: what = parse_u64(val, v) < 0 ? "number" : NULL; break;
	case VT_USED:
		if (strcmp(val, "na") == 0)
			*v = USED_NA;
		else
			what = parse_size(val, v) < 0 ? "size" : NULL;
		break;
	case VT_TYPE:
		*v = strcmp(val, "compute") == 0    ? SCN_PROC_COMPUTE
		     : strcmp(val, "graphics") == 0 ? SCN_PROC_GRAPHICS
		     : strcmp(val, "both") == 0     ? SCN_PROC_COMPUTE | SCN_PROC_GRAPHICS : 0;
		what = *v ? NULL : "process type (compute, graphics or both)";
		break;
	}
	return what ? fail(p, "bad %s '%s' for %s", what, shown(val, b), k->name) : 0;
}

/* A property key of a `gpu` line (fake_props.h): its key is GK_N + the FP_* index. */
static int parse_prop(struct parser *p, const char *name, const char *val, unsigned *key, uint64_t *v)
{
	char b[48];
	int kind, fp = fake_prop_key(name, &kind);
	if (fp < 0)
		return fail(p, "unknown key '%s'", shown(name, b));
	*key = GK_N + (unsigned)fp;
	if (kind == FPT_TEXT && val[0] != '!')
		return parse_string(p, name, val, FP_TEXT_LEN, v);
	const char *what = fake_prop_parse(kind, val, parse_code, v);
	return what ? fail(p, "bad %s '%s' for %s", what, shown(val, b), name) : 0;
}

/* Parses tokens a[0..n) as key=value pairs of the keys in table[0..nkeys) into p->kv. */
static int parse_kvs(struct parser *p, char **a, size_t n, const struct key *table, unsigned nkeys)
{
	char b[48];
	p->nkv = 0;
	for (size_t i = 0; i < n; i++) {
		char *eq = strchr(a[i], '=');
		if (!eq || eq == a[i])
			return fail(p, "expected key=value, got '%s'", shown(a[i], b));
		*eq = '\0';
		unsigned k = 0;
		while (k < nkeys && strcmp(a[i], table[k].name) != 0)
			k++;
		if (k == nkeys && table == gpu_keys) {
			if (parse_prop(p, a[i], eq + 1, &p->kv[p->nkv].key, &p->kv[p->nkv].val) < 0)
				return -1;
			p->nkv++;
			continue;
		}
		if (k == nkeys)
			return fail(p, "unknown key '%s'", shown(a[i], b));
		p->kv[p->nkv].key = k;
		if (parse_value(p, &table[k], eq + 1, &p->kv[p->nkv].val) < 0)
			return -1;
		p->nkv++;
	}
	return 0;
}

/* A GPU index in a line that refers to a declared GPU. */
static int declared_gpu(struct parser *p, const char *str, unsigned *gpu)
{
	char b[48];
	uint64_t v;
	if (parse_u64(str, &v) < 0)
		return fail(p, "bad GPU index '%s'", shown(str, b));
	if (v >= SCN_MAX_GPUS || !p->gpu_line[v])
		return fail(p, "gpu %s is not declared", shown(str, b));
	*gpu = (unsigned)v;
	return 0;
}

/* ---- lines ----------------------------------------------------------------------------------- */

static int need_args(struct parser *p, char **a, size_t n, size_t min, size_t max,
		     const char *usage)
{
	char b[48];
	if (n < min)
		return fail(p, "missing arguments: %s", usage);
	if (n > max)
		return fail(p, "unexpected '%s' (%s)", shown(a[max], b), usage);
	return 0;
}

static int line_version(struct parser *p, char **a, size_t n, char *dst, const char *usage)
{
	if (need_args(p, a, n, 1, 1, usage) < 0)
		return -1;
	if (strlen(a[0]) >= SCN_VERSION_LEN)
		return fail(p, "version longer than %d bytes", SCN_VERSION_LEN - 1);
	strcpy(dst, a[0]);
	return 0;
}

static int line_driver(struct parser *p, char **a, size_t n)
{
	return line_version(p, a, n, p->s->driver, "driver VERSION");
}

static int line_nvml(struct parser *p, char **a, size_t n)
{
	return line_version(p, a, n, p->s->nvml, "nvml VERSION");
}

static int line_init_error(struct parser *p, char **a, size_t n)
{
	char b[48];
	if (need_args(p, a, n, 1, 1, "init_error CODE") < 0)
		return -1;
	if (parse_code(a[0], &p->s->init_error) < 0)
		return fail(p, "bad return code '%s'", shown(a[0], b));
	return 0;
}

static int line_gpu_decl(struct parser *p, char **a, size_t n)
{
	char b[48];
	uint64_t idx, mem[3] = {80ull << 30, 0, 0}; /* total, reserved, used */
	if (need_args(p, a, n, 1, SIZE_MAX, "gpu INDEX key=value ...") < 0)
		return -1;
	if (parse_u64(a[0], &idx) < 0)
		return fail(p, "bad GPU index '%s'", shown(a[0], b));
	if (idx >= SCN_MAX_GPUS)
		return fail(p, "more than %d GPUs", SCN_MAX_GPUS);
	if (p->gpu_line[idx])
		return fail(p, "gpu %u declared twice (first at line %d)", (unsigned)idx,
			    p->gpu_line[idx]);
	if (parse_kvs(p, a + 1, n - 1, gpu_keys, GK_N) < 0)
		return -1;
	for (size_t i = 0; i < p->nkv; i++) {
		if (p->kv[i].key >= GK_TOTAL && p->kv[i].key <= GK_USED)
			mem[p->kv[i].key - GK_TOTAL] = p->kv[i].val;
		if (emit(p, 0, 0, EV_GPU_SET, idx, 1, p->kv[i].key, p->kv[i].val) < 0)
			return -1;
	}
	if (mem[1] > mem[0] || mem[2] > mem[0] - mem[1])
		return fail(p, "reserved + used exceed total");
	p->gpu_line[idx] = p->line;
	if (idx >= p->s->ngpus)
		p->s->ngpus = (unsigned)idx + 1;
	return 0;
}

static int line_gpu_at(struct parser *p, char **a, size_t n, double t)
{
	unsigned gpu;
	if (need_args(p, a, n, 2, SIZE_MAX, "at T gpu INDEX key=value ...") < 0 ||
	    declared_gpu(p, a[0], &gpu) < 0 || parse_kvs(p, a + 1, n - 1, gpu_keys, GK_N) < 0)
		return -1;
	for (size_t i = 0; i < p->nkv; i++)
		if (emit(p, 1, t, EV_GPU_SET, gpu, 1, p->kv[i].key, p->kv[i].val) < 0)
			return -1;
	return 0;
}

static int line_lost(struct parser *p, char **a, size_t n, int at, double t)
{
	unsigned gpu;
	if (need_args(p, a, n, 1, 1, at ? "at T lost GPU" : "lost GPU") < 0 ||
	    declared_gpu(p, a[0], &gpu) < 0)
		return -1;
	return emit(p, at, t, EV_GPU_LOST, gpu, 1, 0, 0);
}

/* Emits kind and p->kv for a run of consecutive slots. */
static int emit_run(struct parser *p, int at, double t, int kind, size_t first, size_t count)
{
	if (emit(p, at, t, kind, first, count, 0, 0) < 0)
		return -1;
	for (size_t i = 0; kind == EV_PROC_ADD && i < p->nkv; i++)
		if (emit(p, at, t, EV_PROC_SET, first, count, p->kv[i].key, p->kv[i].val) < 0)
			return -1;
	return 0;
}

/* Applies kind (add with p->kv, or gone) to pids first .. first + count - 1 of gpu. */
static int procs(struct parser *p, int at, double t, int kind, unsigned gpu, uint64_t first,
		 uint64_t count)
{
	size_t run = 0, run_len = 0;
	if ((count > 1 || !slot_exists(p, gpu, (uint32_t)first)) && slots_reserve(p, count) < 0)
		return -1;
	for (uint64_t pid = first; pid < first + count; pid++) {
		size_t i = slot_get(p, gpu, (uint32_t)pid);
		struct slot *sl = &p->s->slot[i];
		if (!at && sl->decl_line)
			return fail(p, "pid %u declared twice on gpu %u (first at line %d)",
				    (unsigned)pid, gpu, sl->decl_line);
		if (!at)
			sl->decl_line = p->line;
		if (run_len && i == run + run_len) {
			run_len++;
			continue;
		}
		if (run_len && emit_run(p, at, t, kind, run, run_len) < 0)
			return -1;
		run = i;
		run_len = 1;
	}
	return emit_run(p, at, t, kind, run, run_len);
}

static int line_proc(struct parser *p, char **a, size_t n, int at, double t)
{
	char b[48];
	unsigned gpu;
	uint64_t pid;
	if (need_args(p, a, n, 2, SIZE_MAX, "proc GPU PID key=value ...") < 0 ||
	    declared_gpu(p, a[0], &gpu) < 0)
		return -1;
	if (parse_u32(a[1], &pid) < 0)
		return fail(p, "bad pid '%s'", shown(a[1], b));
	if (at && n >= 3 && strcmp(a[2], "gone") == 0) {
		if (need_args(p, a, n, 3, 3, "at T proc GPU PID gone") < 0)
			return -1;
		p->nkv = 0;
		return procs(p, at, t, EV_PROC_GONE, gpu, pid, 1);
	}
	if (parse_kvs(p, a + 2, n - 2, proc_keys, PK_N) < 0)
		return -1;
	return procs(p, at, t, EV_PROC_ADD, gpu, pid, 1);
}

static int line_procs(struct parser *p, char **a, size_t n)
{
	char b[48];
	unsigned gpu;
	uint64_t pid, count;
	if (need_args(p, a, n, 3, SIZE_MAX, "procs GPU FIRSTPID COUNT key=value ...") < 0 ||
	    declared_gpu(p, a[0], &gpu) < 0)
		return -1;
	if (parse_u32(a[1], &pid) < 0)
		return fail(p, "bad pid '%s'", shown(a[1], b));
	if (parse_u64(a[2], &count) < 0 || count == 0)
		return fail(p, "bad count '%s'", shown(a[2], b));
	if (count > SCN_MAX_PROCS)
		return fail(p, "more than %d processes", SCN_MAX_PROCS);
	if (pid + count - 1 > UINT32_MAX)
		return fail(p, "pids past %u", UINT32_MAX);
	if (parse_kvs(p, a + 3, n - 3, proc_keys, PK_N) < 0)
		return -1;
	return procs(p, 0, 0, EV_PROC_ADD, gpu, pid, count);
}

/* `at T xid GPU CODE`: an XID error event for nvmlEventSetWait (kept in time order). */
static int line_xid(struct parser *p, char **a, size_t n, double t)
{
	char b[48];
	unsigned gpu;
	uint64_t code;
	struct scn *s = p->s;
	if (need_args(p, a, n, 2, 2, "at T xid GPU CODE") < 0 || declared_gpu(p, a[0], &gpu) < 0)
		return -1;
	if (parse_u64(a[1], &code) < 0)
		return fail(p, "bad XID code '%s'", shown(a[1], b));
	if (reserve(p, (void **)&s->xid, &s->xid_cap, s->nxid + 1, sizeof *s->xid, SCN_MAX_RULES) < 0)
		return p->failed ? -1 : fail(p, "more than %d xid lines", SCN_MAX_RULES);
	size_t at = s->nxid;
	while (at > 0 && s->xid[at - 1].t > t)
		at--;
	memmove(s->xid + at + 1, s->xid + at, (s->nxid - at) * sizeof *s->xid);
	s->xid[at] = (struct fake_xid){t, gpu, code};
	s->nxid++;
	return 0;
}

size_t scn_xid_count(const struct scn *s)
{
	return s->nxid;
}

const struct fake_xid *scn_xid(const struct scn *s, size_t i)
{
	return i < s->nxid ? &s->xid[i] : NULL;
}

static int line_at(struct parser *p, char **a, size_t n)
{
	char b[48];
	double t;
	if (need_args(p, a, n, 2, SIZE_MAX, "at T gpu|proc|lost ...") < 0)
		return -1;
	if (parse_time(a[0], &t) < 0)
		return fail(p, "bad time '%s'", shown(a[0], b));
	if (strcmp(a[1], "gpu") == 0)
		return line_gpu_at(p, a + 2, n - 2, t);
	if (strcmp(a[1], "proc") == 0)
		return line_proc(p, a + 2, n - 2, 1, t);
	if (strcmp(a[1], "lost") == 0)
		return line_lost(p, a + 2, n - 2, 1, t);
	if (strcmp(a[1], "xid") == 0)
		return line_xid(p, a + 2, n - 2, t);
	return fail(p, "unknown keyword '%s' after 'at'", shown(a[1], b));
}

static int rule_option(struct parser *p, struct rule *r, char *opt)
{
	char b[48];
	char *eq = strchr(opt, '=');
	if (!eq)
		return fail(p, "expected key=value, got '%s'", shown(opt, b));
	*eq++ = '\0';
	if (strcmp(opt, "gpu") == 0) {
		unsigned gpu;
		if (!fns[r->fn].is_dev)
			return fail(p, "gpu= does not apply to %s", fns[r->fn].name);
		if (declared_gpu(p, eq, &gpu) < 0)
			return -1;
		r->gpu = (int)gpu;
	} else if (strcmp(opt, "from") == 0 || strcmp(opt, "until") == 0) {
		if (parse_time(eq, opt[0] == 'f' ? &r->from : &r->until) < 0)
			return fail(p, "bad time '%s'", shown(eq, b));
	} else {
		return fail(p, "unknown key '%s'", shown(opt, b));
	}
	return 0;
}

/* `error FUNCTION CODE ...` (hang 0) or `hang FUNCTION ...` (hang 1): the same options. */
static int line_rule(struct parser *p, char **a, size_t n, int hang)
{
	char b[48];
	struct scn *s = p->s;
	struct rule r = {.from = 0, .until = HUGE_VAL, .gpu = -1, .fn = 0, .hang = hang};
	if (need_args(p, a, n, hang ? 1 : 2, hang ? 4 : 5,
		      hang ? "hang FUNCTION [gpu=INDEX] [from=T] [until=T]"
			   : "error FUNCTION CODE [gpu=INDEX] [from=T] [until=T]") < 0)
		return -1;
	while (r.fn < SCN_FN_N && strcmp(a[0], fns[r.fn].name) != 0)
		r.fn++;
	/* a shutdown is not made to hang: a test could not close the library */
	if (r.fn == SCN_FN_N || r.fn == SCN_FN_ERROR_STRING || (hang && r.fn == SCN_FN_SHUTDOWN))
		return fail(p, "unknown function '%s'", shown(a[0], b));
	if (!hang && parse_code(a[1], &r.code) < 0)
		return fail(p, "bad return code '%s'", shown(a[1], b));
	for (size_t i = hang ? 1 : 2; i < n; i++)
		if (rule_option(p, &r, a[i]) < 0)
			return -1;
	if (r.until <= r.from)
		return fail(p, "until must be later than from");
	if (reserve(p, (void **)&s->rule, &s->rule_cap, s->nrules + 1, sizeof r, SCN_MAX_RULES) < 0)
		return fail(p, "more than %d error and hang lines", SCN_MAX_RULES);
	s->rule[s->nrules++] = r;
	return 0;
}

static int line_error(struct parser *p, char **a, size_t n)
{
	return line_rule(p, a, n, 0);
}

static int line_hang(struct parser *p, char **a, size_t n)
{
	return line_rule(p, a, n, 1);
}

static int line_proc_decl(struct parser *p, char **a, size_t n)
{
	return line_proc(p, a, n, 0, 0);
}

static int line_lost_decl(struct parser *p, char **a, size_t n)
{
	return line_lost(p, a, n, 0, 0);
}

/* `mig GPU ...`: parsed by scenario_mig.c once the GPU is known to be declared. */
static int line_mig(struct parser *p, char **a, size_t n)
{
	unsigned gpu;
	char msg[200];
	if (need_args(p, a, n, 2, SIZE_MAX, "mig GPU on|off [pending=on|off], or mig GPU gi=N ci=N key=value ...") < 0 ||
	    declared_gpu(p, a[0], &gpu) < 0)
		return -1;
	if (scn__mig_line(p->s, gpu, a + 1, n - 1, msg, sizeof msg) < 0)
		return fail(p, "%s", msg);
	return 0;
}

static const struct {
	const char *word;
	int (*parse)(struct parser *p, char **args, size_t n);
} keywords[] = {
	{"driver", line_driver}, {"nvml", line_nvml},     {"init_error", line_init_error},
	{"gpu", line_gpu_decl},  {"proc", line_proc_decl}, {"procs", line_procs},
	{"lost", line_lost_decl}, {"at", line_at},         {"error", line_error},
	{"hang", line_hang},      {"mig", line_mig},
};

static int is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Splits line l[0..n) into p->tok: blanks separate, "..." groups (\" and \\ escape), # comments. */
static int tokenize(struct parser *p, const char *l, size_t n)
{
	size_t i = 0;
	char *o = p->buf;
	p->ntok = 0;
	for (;;) {
		while (i < n && is_blank(l[i]))
			i++;
		if (i == n || l[i] == '#')
			return 0;
		p->tok[p->ntok++] = o;
		while (i < n && !is_blank(l[i]) && l[i] != '#') {
			if (l[i] != '"') {
				*o++ = l[i++];
				continue;
			}
			for (i++;; i++) {
				if (i == n)
					return fail(p, "unterminated quote");
				if (l[i] == '"')
					break;
				if (l[i] == '\\' && i + 1 < n && (l[i + 1] == '"' || l[i + 1] == '\\'))
					i++;
				*o++ = l[i];
			}
			i++;
		}
		*o++ = '\0';
	}
}

static int parse_line(struct parser *p, const char *l, size_t n)
{
	char b[48];
	if (n > SCN_MAX_LINE)
		return fail(p, "line longer than %d bytes", SCN_MAX_LINE);
	if (memchr(l, '\0', n))
		return fail(p, "NUL byte in line");
	if (tokenize(p, l, n) < 0 || p->ntok == 0)
		return p->failed ? -1 : 0;
	for (size_t k = 0; k < sizeof keywords / sizeof keywords[0]; k++)
		if (strcmp(p->tok[0], keywords[k].word) == 0)
			return keywords[k].parse(p, p->tok + 1, p->ntok - 1);
	return fail(p, "unknown keyword '%s'", shown(p->tok[0], b));
}

/* Checks that GPUs run 0..N-1 and orders the slots by GPU (stable), renumbering the events. */
static int finish(struct parser *p)
{
	struct scn *s = p->s;
	for (unsigned g = 0; g < s->ngpus; g++) {
		if (!p->gpu_line[g]) {
			p->line = p->gpu_line[s->ngpus - 1];
			return fail(p, "gpu %u is not declared (indexes must run 0..%u)", g,
				    s->ngpus - 1);
		}
	}
	s->gpu_first = calloc((size_t)s->ngpus + 1, sizeof *s->gpu_first);
	uint32_t *map = malloc((s->nslots ? s->nslots : 1) * sizeof *map);
	struct slot *sorted = malloc((s->nslots ? s->nslots : 1) * sizeof *sorted);
	if (!s->gpu_first || !map || !sorted) {
		free(map);
		free(sorted);
		return fail(p, "out of memory");
	}
	for (size_t i = 0; i < s->nslots; i++)
		s->gpu_first[s->slot[i].gpu + 1]++;
	for (unsigned g = 0; g < s->ngpus; g++)
		s->gpu_first[g + 1] += s->gpu_first[g];
	memcpy(p->next, s->gpu_first, s->ngpus * sizeof *p->next);
	for (size_t i = 0; i < s->nslots; i++) {
		map[i] = (uint32_t)p->next[s->slot[i].gpu]++;
		sorted[map[i]] = s->slot[i];
	}
	for (int w = 0; w < 2; w++) {
		struct event *ev = w ? s->at : s->decl;
		for (size_t i = 0, n = w ? s->nat : s->ndecl; i < n; i++)
			if (ev[i].kind >= EV_PROC_ADD)
				ev[i].target = map[ev[i].target];
	}
	free(map);
	free(s->slot);
	s->slot = sorted;
	return 0;
}

int scn_parse(const char *text, size_t len, struct scn **out, char *err, size_t errlen)
{
	struct parser *p = calloc(1, sizeof *p);
	struct scn *s = calloc(1, sizeof *s);
	int line = 0;
	*out = NULL;
	if (err && errlen)
		snprintf(err, errlen, "1: out of memory");
	if (!p || !s) {
		free(p);
		free(s);
		return 1;
	}
	p->s = s;
	p->err = err;
	p->errlen = errlen;
	strcpy(s->driver, DEFAULT_DRIVER);
	strcpy(s->nvml, DEFAULT_NVML);
	if (len > SCN_MAX_TEXT) {
		p->line = 1;
		fail(p, "scenario larger than %u MiB", SCN_MAX_TEXT >> 20);
	}
	for (size_t pos = 0; !p->failed && pos < len;) {
		const char *nl = memchr(text + pos, '\n', len - pos);
		p->line++;
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos, next = pos + n + 1;
		if (n > 0 && text[pos + n - 1] == '\r')
			n--;
		parse_line(p, text + pos, n);
		pos = next;
	}
	if (p->line == 0)
		p->line = 1; /* an empty file: errors of finish() are on line 1 */
	if (!p->failed)
		finish(p);
	if (p->failed) {
		line = p->line;
		scn_free(s);
	} else {
		*out = s;
		if (err && errlen)
			err[0] = '\0';
	}
	free(p->hash);
	free(p);
	return line;
}
