/* SPDX-License-Identifier: MIT */
/* report_csv.c — reading a CSV run for `gpumon report` (docs/report.md): a header naming `time`
 * (seconds), optional `step`, and any of allocated, reserved, max_allocated, process_used,
 * device_used, device_total (bytes); other columns are ignored. Streams line by line in bounded
 * memory; a row that cannot be read is skipped and named, never read as 0. */
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
	int have_last;
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
			int k = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", trim(f[i]));
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

/* One data line into rows for r. */
static int row(char *line, struct csv_state *st, report *r)
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
		int k = parse_num(s, &v[c]);
		if (k < 0 || (k && c != C_STEP && v[c] < 0)) {
			skip(st, "line %ld: '%.40s' is not a %s in column %s", st->line, s,
			     c == C_TIME ? "time in seconds" : c == C_STEP ? "step number" : "byte count", col_names[c]);
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
	int64_t t_ns = (int64_t)llround(v[C_TIME] * 1e9);
	if (st->have_last && t_ns < st->last_t_ns) {
		skip(st, "line %ld: time %.3f s goes back", st->line, v[C_TIME]);
		return 0;
	}
	st->last_t_ns = t_ns;
	st->have_last = 1;
	/* the NVML-side rows first: a framework row compares itself with the process figure of now */
	recrow rw;
	if (known[C_DEVUSED] || known[C_DEVTOTAL]) {
		memset(&rw, 0, sizeof rw);
		rw.kind = RECROW_DEVICE;
		rw.t_ns = t_ns;
		rw.u.device.used = (recval){known[C_DEVUSED] ? (int64_t)v[C_DEVUSED] : 0, known[C_DEVUSED]};
		rw.u.device.total = (recval){known[C_DEVTOTAL] ? (int64_t)v[C_DEVTOTAL] : 0, known[C_DEVTOTAL]};
		if (report_add(r, &rw) != 0)
			return -1;
	}
	if (known[C_PROC]) {
		memset(&rw, 0, sizeof rw);
		rw.kind = RECROW_PROCESS;
		rw.t_ns = t_ns;
		rw.u.process.pid = -1;
		rw.u.process.used = (recval){(int64_t)v[C_PROC], 1};
		rw.u.process.job = 1;
		rw.u.process.command = "process_used";
		if (report_add(r, &rw) != 0)
			return -1;
	}
	if (known[C_ALLOC] || known[C_RESERVED] || known[C_MAXALLOC]) {
		memset(&rw, 0, sizeof rw);
		rw.kind = RECROW_FRAMEWORK;
		rw.t_ns = t_ns;
		rw.u.framework.pid = -1;
		rw.u.framework.step = (recval){known[C_STEP] ? (int64_t)v[C_STEP] : 0, known[C_STEP]};
		rw.u.framework.allocated = (recval){known[C_ALLOC] ? (int64_t)v[C_ALLOC] : 0, known[C_ALLOC]};
		rw.u.framework.reserved = (recval){known[C_RESERVED] ? (int64_t)v[C_RESERVED] : 0, known[C_RESERVED]};
		rw.u.framework.max_allocated = (recval){known[C_MAXALLOC] ? (int64_t)v[C_MAXALLOC] : 0, known[C_MAXALLOC]};
		rw.u.framework.framework = "csv";
		if (report_add(r, &rw) != 0)
			return -1;
	}
	return 0;
}

int report_read_csv(const char *path, FILE *f, report *r, char *err, size_t errlen)
{
	struct csv_state st;
	memset(&st, 0, sizeof st);
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
			have_header = 1;
			continue;
		}
		if (row(t, &st, r) != 0) {
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
	if (st.skipped) {
		char text[256];
		snprintf(text, sizeof text, "%ld rows skipped (the first: %s)", st.skipped, st.first_problem);
		report_damage(r, text);
	}
	return rc;
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
