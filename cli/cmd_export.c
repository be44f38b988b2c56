/* SPDX-License-Identifier: MIT */
/* cmd_export.c — `gpumon export`: writes the samples of a recording out as CSV or JSON lines,
 * reading the file with SQLite in the format docs/recording.md documents (version 1). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>
#include <sqlite3.h>

#include "cli.h"
#include "recfile.h"


/* What a table of the export is made of. The first column is the row's t_ns; every column whose
 * name ends in "t_ns" is written as seconds since the start ("..._t_s"). */
struct table {
	const char *name;
	const char *sql;
};

static const struct table tables[] = {
    {"device", "SELECT s.t_ns AS t_ns, s.dev AS dev, d.uuid AS uuid, s.memory_api AS memory_api,"
	       " s.used_bytes AS used_bytes, s.free_bytes AS free_bytes, s.reserved_bytes AS reserved_bytes,"
	       " s.total_bytes AS total_bytes, s.used_min_bytes AS used_min_bytes,"
	       " s.used_max_bytes AS used_max_bytes, s.used_max_t_ns AS used_max_t_ns, s.samples AS samples,"
	       " s.util_gpu_pct AS util_gpu_pct, s.util_memory_pct AS util_memory_pct,"
	       " s.temperature_c AS temperature_c, s.power_mw AS power_mw, s.energy_mj AS energy_mj,"
	       " s.clock_sm_mhz AS clock_sm_mhz, s.clock_mem_mhz AS clock_mem_mhz"
	       " FROM device_samples s LEFT JOIN devices d ON d.dev = s.dev ORDER BY s.t_ns, s.rowid"},
    /* the appearance a sample belongs to: the latest one of that pid on that GPU begun by then */
    {"process",
     "SELECT s.t_ns AS t_ns, s.dev AS dev, d.uuid AS uuid, s.pid AS pid, s.used_bytes AS used_bytes,"
     " s.gone AS gone, p.user AS user, p.name AS name, p.command AS command"
     " FROM process_samples s LEFT JOIN devices d ON d.dev = s.dev"
     " LEFT JOIN processes p ON p.rowid = (SELECT rowid FROM processes WHERE dev = s.dev"
     " AND pid = s.pid AND (first_t_ns IS NULL OR first_t_ns <= s.t_ns)"
     " ORDER BY first_t_ns DESC LIMIT 1) ORDER BY s.t_ns, s.rowid"},
    {"framework", "SELECT s.t_ns AS t_ns, f.pid AS pid, f.device AS device, f.framework AS framework,"
		  " s.step AS step, s.allocated_bytes AS allocated_bytes, s.reserved_bytes AS reserved_bytes,"
		  " s.max_allocated_bytes AS max_allocated_bytes FROM framework_samples s"
		  " LEFT JOIN framework_sources f ON f.source = s.source ORDER BY s.t_ns, s.rowid"},
    {"events", "SELECT t_ns AS t_ns, kind AS kind, text AS text FROM events ORDER BY t_ns, rowid"},
};

enum { FMT_NONE, FMT_CSV, FMT_JSONL };

struct opts {
	const char *file, *out;
	const struct table *table;
	int format;
};

/* The clocks of the run's start, to turn t_ns into seconds and wall times. */
struct start {
	int64_t mono_ns, wall_ns;
};

static void help(void)
{
	printf("Usage: gpumon export FILE (--csv | --jsonl) [--table TABLE] [-o OUT]\n"
	       "Writes the samples of a recording (made by gpumon record or gpumon run) out.\n\n"
	       "Options:\n"
	       "  --csv              comma-separated values with a header row\n"
	       "  --jsonl            one JSON object per line\n"
	       "  -t, --table TABLE  device     GPU memory, utilization, temperature, power (the default)\n"
	       "                     process    memory of each process on each GPU\n"
	       "                     framework  allocator figures reported from inside the training job\n"
	       "                     events     markers, alerts and notes\n"
	       "  -o, --output OUT   write to OUT (replaced if it exists) instead of standard output\n"
	       "  -h, --help         this help\n\n"
	       "t_s is the time in seconds since the run started, to the microsecond (CSV: 6 decimals,\n"
	       "0.003420; JSON: a number without the trailing zeros, 0.00342), time_utc the wall time\n"
	       "(ISO 8601, UTC). A value the recording does not hold is empty in CSV and null in JSON,\n"
	       "never 0. The file format is described in docs/recording.md; the sqlite3 shell reads it.\n"
	       "Exit status: 0 ok, 2 bad usage, 255 the file cannot be read or is not a gpumon recording.\n");
}

static const struct table *find_table(const char *name)
{
	for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++)
		if (!strcmp(tables[i].name, name))
			return &tables[i];
	return NULL;
}

/* Returns EXIT_OK, EXIT_USAGE (message printed), or -1 after --help. */
static int parse(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){.table = &tables[0]};
	for (int i = 1; i < argc; i++) {
		int bad = 0;
		const char *v;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if (!strcmp(argv[i], "--csv") || !strcmp(argv[i], "--jsonl")) {
			int f = argv[i][2] == 'c' ? FMT_CSV : FMT_JSONL;
			if (o->format && o->format != f) {
				cli_error("export: --csv and --jsonl exclude each other");
				return EXIT_USAGE;
			}
			o->format = f;
		} else if ((v = cli_option_value(argc, argv, &i, "--table", "-t", &bad))) {
			if (!(o->table = find_table(v))) {
				cli_error("export: unknown table '%s' (device, process, framework or events)",
					  v);
				return EXIT_USAGE;
			}
		} else if ((v = cli_option_value(argc, argv, &i, "--output", "-o", &bad))) {
			o->out = v;
		} else if (!bad && argv[i][0] != '-' && !o->file) {
			o->file = argv[i];
		} else {
			if (!bad)
				cli_error("export: unexpected argument '%s' (see gpumon export --help)",
					  argv[i]);
			return EXIT_USAGE;
		}
	}
	if (!o->file || !o->format) {
		cli_error("export: %s (see gpumon export --help)",
			  !o->file ? "which recording? name a FILE" : "choose --csv or --jsonl");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Nanoseconds to microseconds, rounded half away from zero. */
static int64_t round_us(int64_t ns)
{
	return ns / 1000 + (ns % 1000 >= 500) - (ns % 1000 <= -500);
}

/* Seconds from the start, to the microsecond: "12.345678", "-0.000100". */
static const char *format_seconds(char *buf, size_t len, int64_t since_start_ns)
{
	int64_t us = round_us(since_start_ns);
	uint64_t a = us < 0 ? (uint64_t) - (us + 1) + 1 : (uint64_t)us;
	snprintf(buf, len, "%s%" PRIu64 ".%06" PRIu64, us < 0 ? "-" : "", a / 1000000, a % 1000000);
	return buf;
}

/* "2025-05-01T12:34:56.123456Z" */
static const char *format_utc(char *buf, size_t len, int64_t wall_ns)
{
	time_t secs = (time_t)(wall_ns / 1000000000);
	long us = (long)(wall_ns % 1000000000 / 1000);
	struct tm tm;
	if (wall_ns < 0 || !gmtime_r(&secs, &tm)) {
		snprintf(buf, len, "%s", "");
		return buf;
	}
	size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf + n, len - n, ".%06ldZ", us);
	return buf;
}

/* The output name of column i: t_ns columns become seconds (t_s, used_max_t_s, ...). */
static const char *column_name(sqlite3_stmt *s, int i, char *buf, size_t len)
{
	const char *name = sqlite3_column_name(s, i);
	size_t n = strlen(name);
	if (n < 4 || strcmp(name + n - 4, "t_ns"))
		return name;
	snprintf(buf, len, "%.*st_s", (int)(n - 4), name);
	return buf;
}

static int is_time(sqlite3_stmt *s, int i)
{
	const char *name = sqlite3_column_name(s, i);
	size_t n = strlen(name);
	return n >= 4 && !strcmp(name + n - 4, "t_ns");
}

/* A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). */
static void csv_text(FILE *f, const char *t)
{
	if (!t[strcspn(t, ",\"\r\n")]) {
		fputs(t, f);
		return;
	}
	fputc('"', f);
	for (; *t; t++) {
		if (*t == '"')
			fputc('"', f);
		fputc(*t, f);
	}
	fputc('"', f);
}

static void csv_header(FILE *f, sqlite3_stmt *s)
{
	char b[64];
	fputs("t_s,time_utc", f);
	for (int i = 1; i < sqlite3_column_count(s); i++) {
		fputc(',', f);
		csv_text(f, column_name(s, i, b, sizeof b));
	}
	fputc('\n', f);
}

static void csv_row(FILE *f, sqlite3_stmt *s, const struct start *st)
{
	char b[64];
	int64_t t = sqlite3_column_int64(s, 0);
	fprintf(f, "%s,", format_seconds(b, sizeof b, t - st->mono_ns));
	fputs(format_utc(b, sizeof b, st->wall_ns + (t - st->mono_ns)), f);
	for (int i = 1; i < sqlite3_column_count(s); i++) {
		fputc(',', f);
		int type = sqlite3_column_type(s, i);
		if (type == SQLITE_NULL)
			continue;
		if (type == SQLITE_INTEGER && is_time(s, i))
			fputs(format_seconds(b, sizeof b, sqlite3_column_int64(s, i) - st->mono_ns), f);
		else if (type == SQLITE_INTEGER)
			fprintf(f, "%lld", (long long)sqlite3_column_int64(s, i));
		else
			csv_text(f, (const char *)sqlite3_column_text(s, i));
	}
	fputc('\n', f);
}

/* A column's value as JSON: integers, text, null; times as seconds (a number). */
static json_t *json_value(sqlite3_stmt *s, int i, const struct start *st)
{
	switch (sqlite3_column_type(s, i)) {
	case SQLITE_NULL: return json_null();
	case SQLITE_INTEGER:
		if (is_time(s, i))
			return json_real((double)round_us(sqlite3_column_int64(s, i) - st->mono_ns) / 1e6);
		return json_integer(sqlite3_column_int64(s, i));
	case SQLITE_FLOAT: return json_real(sqlite3_column_double(s, i));
	default: return json_string((const char *)sqlite3_column_text(s, i));
	}
}

/* One line of JSON; -1 when out of memory (or text that is not UTF-8). */
static int json_row(FILE *f, sqlite3_stmt *s, const struct start *st)
{
	char b[64];
	json_t *o = json_object();
	int64_t t = sqlite3_column_int64(s, 0);
	int bad = !o || json_object_set_new(o, "t_s", json_value(s, 0, st)) ||
		  json_object_set_new(o, "time_utc",
				      json_string(format_utc(b, sizeof b, st->wall_ns + (t - st->mono_ns))));
	for (int i = 1; i < sqlite3_column_count(s) && !bad; i++)
		bad = json_object_set_new(o, column_name(s, i, b, sizeof b), json_value(s, i, st)) != 0;
	/* 15 significant digits print microsecond times as written (3600.123456, not ...0001) */
	char *line = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
	json_decref(o);
	if (!line)
		return -1;
	fputs(line, f);
	fputc('\n', f);
	free(line);
	return 0;
}

static int export_rows(sqlite3 *db, const struct opts *o, const struct start *st, FILE *f)
{
	sqlite3_stmt *s = NULL;
	if (sqlite3_prepare_v2(db, o->table->sql, -1, &s, NULL) != SQLITE_OK) {
		cli_error("export: cannot read %s: %s", o->file, sqlite3_errmsg(db));
		return EXIT_OTHER;
	}
	if (o->format == FMT_CSV)
		csv_header(f, s);
	int rc, bad = 0;
	while (!bad && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (o->format == FMT_CSV)
			csv_row(f, s, st);
		else
			bad = json_row(f, s, st);
	}
	if (bad)
		cli_error("export: %s: a row could not be converted to JSON (out of memory, or text that is "
			  "not UTF-8)",
			  o->file);
	else if (rc != SQLITE_DONE)
		cli_error("export: reading %s: %s", o->file, sqlite3_errmsg(db));
	sqlite3_finalize(s);
	return bad || rc != SQLITE_DONE ? EXIT_OTHER : EXIT_OK;
}

int cmd_export(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	if (o.out && cli_same_file(o.file, o.out)) {
		cli_error("export: -o %s would overwrite the recording", o.out);
		return EXIT_USAGE;
	}
	recfile rf;
	char err[512];
	struct start st = {0, 0};
	rc = recfile_open(o.file, &rf, err, sizeof err);
	if (rc != EXIT_OK)
		cli_error("export: %s", err);
	else if (!rf.start_mono_ns && !rf.start_wall_ns) {
		cli_error("export: %s is damaged: its meta table has no start time", o.file);
		rc = EXIT_OTHER;
	}
	st.mono_ns = rf.start_mono_ns;
	st.wall_ns = rf.start_wall_ns;
	sqlite3 *db = rc == EXIT_OK ? rf.db : NULL;
	FILE *f = stdout;
	if (rc == EXIT_OK && o.out && !(f = fopen(o.out, "w"))) {
		cli_error("export: cannot create %s: %s", o.out, strerror(errno));
		rc = EXIT_OTHER;
	}
	if (rc == EXIT_OK)
		rc = export_rows(db, &o, &st, f);
	int write_failed = f && ferror(f);
	if (f && (f != stdout ? fclose(f) : fflush(f)) != 0)
		write_failed = 1;
	if (write_failed && rc == EXIT_OK) {
		cli_error("export: cannot write %s: %s", o.out ? o.out : "the output", strerror(errno));
		rc = EXIT_OTHER;
	}
	recfile_close(&rf);
	return rc;
}
