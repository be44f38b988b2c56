/* SPDX-License-Identifier: MIT */
/* report_csv.c — reading a CSV run for `gpumon report` (docs/report.md) into the library's run
 * model: a header naming `time` (seconds), optional `step`, and any of allocated, reserved,
 * max_allocated, process_used, device_used, device_total (bytes); other columns are ignored. Each
 * row becomes records (the GPU, the one process, its framework figures). Streams line by line in
 * bounded memory; a row that cannot be read is skipped and named, never read as 0. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"

#define MAX_LINE (1 << 20)
#define MAX_COLS 256

enum { C_TIME, C_STEP, C_ALLOC, C_RESERVED, C_MAXALLOC, C_PROC, C_DEVUSED, C_DEVTOTAL, NCOLS };
static const char *const col_names[NCOLS] = {"time",         "step",        "allocated",   "reserved",
					     "max_allocated", "process_used", "device_used", "device_total"};

/* Splits line (modified in place) at commas, honouring "quoted, fields" with "" for a quote.
 * Returns the number of fields (at most cap). */
static int split(char *line, char **field, int cap)
{
	int n = 0;
	char *p = line;
	while (n < cap) {
		char *out = p, *start = p;
		if (*p == '"') {
			p++;
			while (*p) {
				if (*p == '"' && p[1] == '"') {
					*out++ = '"';
					p += 2;
				} else if (*p == '"') {
					p++;
					break;
				} else {
					*out++ = *p++;
				}
			}
			while (*p && *p != ',')
				p++;
		} else {
			while (*p && *p != ',')
				p++;
			out = p;
		}
		int more = *p == ',';
		*out = 0;
		if (more)
			p++;
		field[n++] = start;
		if (!more)
			break;
	}
	return n;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = 0;
	return s;
}

/* A number, or not: 1 and *v set, 0 empty (unknown), -1 not a number. */
static int parse_num(const char *s, double *v)
{
	if (!*s || !strcmp(s, "NA") || !strcmp(s, "n/a") || !strcmp(s, "null") || !strcmp(s, "[N/A]"))
		return 0;
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (end == s || *end || errno == ERANGE || !isfinite(d))
		return -1;
	*v = d;
	return 1;
}

struct csv_state {
	int col[NCOLS]; /* the field index of each known column; -1 absent */
	long line;
	long skipped;
	char first_problem[160];
	int64_t last_t_ns;
	int have_last, started;
	/* the GPU's total, once a row gave it: the model's device, and its free memory */
	uint64_t total;
	int total_known;
	long unjudged; /* rows whose device_used came before any device_total */
	long first_unjudged;
	gpumon_model *m;
};

static void skip(struct csv_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skip(struct csv_state *st, const char *fmt, ...)
{
	if (!st->skipped++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(st->first_problem, sizeof st->first_problem, fmt, ap);
		va_end(ap);
	}
}

static int header(char *line, struct csv_state *st, const char *path, char *err, size_t errlen)
{
	char *f[MAX_COLS];
	int n = split(line, f, MAX_COLS);
	for (int c = 0; c < NCOLS; c++)
		st->col[c] = -1;
	for (int i = 0; i < n; i++) {
		char *name = trim(f[i]);
		for (int c = 0; c < NCOLS; c++)
			if (!strcmp(name, col_names[c]) && st->col[c] < 0)
				st->col[c] = i;
	}
	if (st->col[C_TIME] < 0) {
		char names[240] = "";
		size_t used = 0;
		for (int i = 0; i < n && used < sizeof names; i++) {
			char shown[100]; /* the file's text, as it can be printed */
			int k = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
					 cli_safe_text(shown, sizeof shown, trim(f[i])));
			used += k > 0 ? (size_t)k : 0;
		}
		cli_set_err(err, errlen, "%s: the CSV header has no `time` column (seconds); it names: %s", path,
			    names);
		return EXIT_USAGE;
	}
	int mem = 0;
	for (int c = C_ALLOC; c < NCOLS; c++)
		mem |= st->col[c] >= 0 && c != C_DEVTOTAL;
	if (!mem) {
		cli_set_err(err, errlen,
			"%s: the CSV has no memory column: it needs at least one of allocated, reserved, "
			"max_allocated, process_used, device_used (bytes)",
			path);
		return EXIT_USAGE;
	}
	return 0;
}

/* Whether the CSV has columns of a process (the framework's figures, or NVML's for the process). */
static int has_process(const struct csv_state *st)
{
	return st->col[C_ALLOC] >= 0 || st->col[C_RESERVED] >= 0 || st->col[C_MAXALLOC] >= 0 || st->col[C_PROC] >= 0;
}

/* The GPU's total from a row: declared to the model when it is new or changed. */
static int take_total(struct csv_state *st, uint64_t total)
{
	if (st->total_known && st->total == total)
		return GPUMON_OK;
	st->total = total;
	st->total_known = 1;
	gpumon_device_info info = {.index = 0, .present = GPUMON_INFO_MEMORY_TOTAL, .memory_total_bytes = total};
	return gpumon_model_device(st->m, &info);
}

/* The records of one row: the process first (the GPU's row is the moment its figures are judged,
 * and a peak's owner is the process that rose), then the GPU, then the framework's figures. */
static size_t records(struct csv_state *st, uint64_t t_ns, const double *v, const int *known, gpumon_record *rec)
{
	size_t n = 0;
	if (known[C_PROC]) {
		gpumon_record *r = &rec[n++];
		r->kind = GPUMON_REC_PROCESS;
		r->t_ns = t_ns;
		r->process.pid = REPORT_CSV_PID;
		r->process.flags = GPUMON_PROC_USED_KNOWN | GPUMON_PROC_COMPUTE;
		r->process.used_bytes = (uint64_t)v[C_PROC];
	}
	/* a GPU row needs its total: without one, its free memory would read as 0 */
	if (known[C_DEVUSED] && st->total_known) {
		gpumon_record *r = &rec[n++];
		uint64_t used = (uint64_t)v[C_DEVUSED];
		r->kind = GPUMON_REC_DEVICE;
		r->t_ns = r->sample.t_ns = t_ns;
		r->sample.present = GPUMON_F_MEMORY;
		r->sample.memory_used_bytes = used;
		r->sample.memory_total_bytes = st->total;
		r->sample.memory_free_bytes = st->total > used ? st->total - used : 0;
	} else if (known[C_DEVUSED] && !st->unjudged++) {
		st->first_unjudged = st->line;
	}
	if (known[C_ALLOC] || known[C_RESERVED] || known[C_MAXALLOC]) {
		gpumon_record *r = &rec[n++];
		gpumon_framework_sample *f = &r->framework;
		r->kind = GPUMON_REC_FRAMEWORK;
		r->t_ns = f->t_ns = t_ns;
		f->pid = REPORT_CSV_PID;
		f->device = -1;
		f->step = known[C_STEP] ? (int64_t)v[C_STEP] : -1;
		f->allocated_known = known[C_ALLOC];
		f->reserved_known = known[C_RESERVED];
		f->max_allocated_known = known[C_MAXALLOC];
		f->allocated_bytes = known[C_ALLOC] ? (uint64_t)v[C_ALLOC] : 0;
		f->reserved_bytes = known[C_RESERVED] ? (uint64_t)v[C_RESERVED] : 0;
		f->max_allocated_bytes = known[C_MAXALLOC] ? (uint64_t)v[C_MAXALLOC] : 0;
	}
	return n;
}

/* One data line into records for the model. 0, or a negative status (no memory). */
static int row(char *line, struct csv_state *st)
{
	char *f[MAX_COLS];
	int n = split(line, f, MAX_COLS);
	double v[NCOLS];
	int known[NCOLS];
	for (int c = 0; c < NCOLS; c++) {
		known[c] = 0;
		if (st->col[c] < 0 || st->col[c] >= n)
			continue;
		char *s = trim(f[st->col[c]]);
		char shown[161]; /* the field as it can be printed: a CSV may hold any bytes */
		int k = parse_num(s, &v[c]);
		if (k < 0 || (k && c != C_STEP && v[c] < 0)) {
			skip(st, "line %ld: '%s' is not a %s in column %s", st->line, cli_safe_text(shown, 41, s),
			     c == C_TIME ? "time in seconds" : c == C_STEP ? "step number" : "byte count", col_names[c]);
			return 0;
		}
		/* a byte count beyond what any GPU holds (2^63 would wrap in a signed sum): refused, named */
		if (k && c > C_STEP && v[c] > (double)GPUMON_MAX_BYTES) {
			skip(st, "line %ld: %s in column %s is out of range (1 PiB or more)", st->line,
			     cli_safe_text(shown, 41, s), col_names[c]);
			return 0;
		}
		known[c] = k;
	}
	if (!known[C_TIME]) {
		skip(st, "line %ld: no time", st->line);
		return 0;
	}
	if (v[C_TIME] > 9.2e9) {
		skip(st, "line %ld: time %.0f s is out of range", st->line, v[C_TIME]);
		return 0;
	}
	if (known[C_STEP] && (v[C_STEP] < 0 || v[C_STEP] > 9.2e18)) { /* "unknown" is -1 to the model */
		skip(st, "line %ld: step %.0f is out of range", st->line, v[C_STEP]);
		return 0;
	}
	int64_t t_ns = (int64_t)llround(v[C_TIME] * 1e9);
	if (st->have_last && t_ns < st->last_t_ns) {
		skip(st, "line %ld: time %.3f s goes back", st->line, v[C_TIME]);
		return 0;
	}
	st->last_t_ns = t_ns;
	st->have_last = 1;
	uint64_t t = REPORT_CSV_T0_NS + (uint64_t)t_ns;
	gpumon_record rec[4];
	memset(rec, 0, sizeof rec);
	size_t nrec = 0;
	if (!st->started && has_process(st)) { /* the CSV's process is the run's job */
		st->started = 1;
		rec[nrec].kind = GPUMON_REC_JOB;
		rec[nrec].t_ns = t;
		rec[nrec++].process.pid = REPORT_CSV_PID;
	}
	if (known[C_DEVTOTAL] && take_total(st, (uint64_t)v[C_DEVTOTAL]) != GPUMON_OK)
		return GPUMON_E_NOMEM;
	nrec += records(st, t, v, known, rec + nrec);
	return gpumon_model_add(st->m, rec, nrec);
}

/* Creates the model a CSV feeds, starting at the CSV's time 0: a run whose job is its process, or,
 * when it has only a GPU's columns, the view of that GPU (there is no job to speak of). */
static int new_model(const char *path, unsigned flags, int run, gpumon_model **out)
{
	gpumon_run_meta meta = {.size = sizeof meta, .kind = run ? "run" : "record", .start_mono_ns = REPORT_CSV_T0_NS,
				.exit_status = -1};
	gpumon_model_config cfg = GPUMON_CONFIG_INIT(gpumon_model_config);
	cfg.flags = flags;
	cfg.meta = &meta;
	cfg.source = path;
	cfg.source_type = "csv";
	return gpumon_model_create(&cfg, out);
}

/* Names in the document what the model did not get: skipped rows, GPU rows without a total. */
static int name_losses(const struct csv_state *st)
{
	char text[320];
	int rc = GPUMON_OK;
	if (st->skipped) {
		snprintf(text, sizeof text, "%ld rows skipped (the first: %s)", st->skipped, st->first_problem);
		rc = gpumon_model_damage(st->m, text);
	}
	if (!rc && st->unjudged) {
		snprintf(text, sizeof text,
			 "device_used of %ld rows left out (the first: line %ld): no device_total known by then, so the "
			 "GPU's free memory is unknown",
			 st->unjudged, st->first_unjudged);
		rc = gpumon_model_damage(st->m, text);
	}
	return rc;
}

int report_csv_model(const char *path, FILE *f, unsigned model_flags, gpumon_model **out, char *err, size_t errlen)
{
	struct csv_state st;
	memset(&st, 0, sizeof st);
	*out = NULL;
	char *line = malloc(MAX_LINE + 2);
	if (!line) {
		cli_set_err(err, errlen, "out of memory");
		return EXIT_OTHER;
	}
	int have_header = 0, rc = 0;
	while (fgets(line, MAX_LINE + 2, f)) {
		st.line++;
		size_t len = strlen(line);
		if (len > MAX_LINE || (len == MAX_LINE + 1 && line[len - 1] != '\n')) {
			cli_set_err(err, errlen, "%s: line %ld is longer than %d bytes: not a CSV of samples", path, st.line,
				MAX_LINE);
			rc = EXIT_USAGE;
			break;
		}
		char *t = trim(line);
		if (!have_header && st.line == 1 && (unsigned char)t[0] == 0xEF && (unsigned char)t[1] == 0xBB &&
		    (unsigned char)t[2] == 0xBF)
			t += 3; /* a UTF-8 byte-order mark */
		if (!*t || *t == '#')
			continue;
		if (!have_header) {
			if ((rc = header(t, &st, path, err, errlen)) != 0)
				break;
			if (new_model(path, model_flags, has_process(&st), &st.m) != GPUMON_OK) {
				cli_set_err(err, errlen, "out of memory");
				rc = EXIT_OTHER;
				break;
			}
			have_header = 1;
			continue;
		}
		if (row(t, &st) != GPUMON_OK) {
			cli_set_err(err, errlen, "out of memory");
			rc = EXIT_OTHER;
			break;
		}
	}
	if (!rc && ferror(f)) {
		cli_set_err(err, errlen, "%s: read error: %s", path, strerror(errno));
		rc = EXIT_OTHER;
	}
	if (!rc && !have_header) {
		cli_set_err(err, errlen, "%s is empty: no CSV header", path);
		rc = EXIT_USAGE;
	}
	free(line);
	if (!rc && name_losses(&st) != GPUMON_OK) {
		cli_set_err(err, errlen, "out of memory");
		rc = EXIT_OTHER;
	}
	if (rc) {
		gpumon_model_destroy(st.m);
		return rc;
	}
	*out = st.m;
	return EXIT_OK;
}

int report_is_sqlite(const char *path)
{
	char head[16];
	FILE *f = fopen(path, "rb");
	if (!f)
		return 0;
	size_t n = fread(head, 1, sizeof head, f);
	fclose(f);
	return n == 16 && !memcmp(head, "SQLite format 3", 16);
}
