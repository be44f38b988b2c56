/* SPDX-License-Identifier: MIT */
/* cmd_export.c — `gpumon export`: writes the records of a recording out as CSV or JSON lines, one
 * table of them at a time, read through the library's reader (docs/recording.md). Device and
 * process rows are change-only: a value holds until the next row of that series. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"

/* A value of a column: absent (empty in CSV, null in JSON), a number, a time (seconds since the
 * start) or text. */
enum { V_NONE, V_INT, V_TIME, V_TEXT };

struct val {
	int type;
	int64_t i;  /* V_INT; V_TIME: t_ns */
	const char *s;
};

#define MAX_COLS 20

/* What a table of the export is made of: its columns (after t_s and time_utc) and the values of a
 * record of it (0 when the record is not of this table). */
struct table {
	const char *name;
	const char *cols[MAX_COLS];
	int (*fill)(const gpumon_reader *rd, const gpumon_record *rec, struct val *v, char *scratch, size_t len);
};

static struct val none(void)
{
	return (struct val){V_NONE, 0, NULL};
}

static struct val u64v(int known, uint64_t x)
{
	return known ? (struct val){V_INT, x > INT64_MAX ? INT64_MAX : (int64_t)x, NULL} : none();
}

static struct val text(int known, const char *t)
{
	return known && t ? (struct val){V_TEXT, 0, t} : none();
}

static const char *uuid_of(const gpumon_reader *rd, unsigned dev, char *buf, size_t len)
{
	gpumon_device_info info;
	if (gpumon_reader_device(rd, dev, &info) != GPUMON_OK || !(info.present & GPUMON_INFO_UUID))
		return NULL;
	snprintf(buf, len, "%s", info.uuid);
	return buf;
}

static int fill_device(const gpumon_reader *rd, const gpumon_record *r, struct val *v, char *scratch, size_t len)
{
	if (r->kind != GPUMON_REC_DEVICE)
		return 0;
	const gpumon_device_sample *s = &r->sample;
	unsigned p = s->present;
	int mem = !!(p & GPUMON_F_MEMORY), interval = mem && r->interval_samples > 0;
	v[0] = u64v(1, r->dev);
	v[1] = text(1, uuid_of(rd, r->dev, scratch, len));
	v[2] = u64v(s->memory_api != GPUMON_MEMAPI_NONE, s->memory_api);
	v[3] = u64v(mem, s->memory_used_bytes);
	v[4] = u64v(mem, s->memory_free_bytes);
	v[5] = u64v(p & GPUMON_F_MEM_RESERVED, s->memory_reserved_bytes);
	v[6] = u64v(mem, s->memory_total_bytes);
	v[7] = u64v(interval, r->used_min_bytes);
	v[8] = u64v(interval, r->used_max_bytes);
	v[9] = interval ? (struct val){V_TIME, (int64_t)r->used_max_t_ns, NULL} : none();
	v[10] = u64v(interval, r->interval_samples);
	v[11] = u64v(p & GPUMON_F_UTIL_GPU, s->util_gpu_pct);
	v[12] = u64v(p & GPUMON_F_UTIL_MEMORY, s->util_memory_pct);
	v[13] = u64v(p & GPUMON_F_TEMPERATURE, s->temperature_c);
	v[14] = u64v(p & GPUMON_F_POWER, s->power_mw);
	v[15] = u64v(p & GPUMON_F_ENERGY, s->energy_mj);
	v[16] = u64v(p & GPUMON_F_CLOCK_SM, s->clock_sm_mhz);
	v[17] = u64v(p & GPUMON_F_CLOCK_MEM, s->clock_mem_mhz);
	return 1;
}

static int fill_process(const gpumon_reader *rd, const gpumon_record *r, struct val *v, char *scratch, size_t len)
{
	if (r->kind != GPUMON_REC_PROCESS && r->kind != GPUMON_REC_PROCESS_GONE)
		return 0;
	const gpumon_process *p = r->process;
	v[0] = u64v(1, r->dev);
	v[1] = text(1, uuid_of(rd, r->dev, scratch, len));
	v[2] = u64v(1, p->pid);
	v[3] = u64v(p->flags & GPUMON_PROC_USED_KNOWN, p->used_bytes);
	v[4] = u64v(1, r->kind == GPUMON_REC_PROCESS_GONE);
	v[5] = text(p->flags & GPUMON_PROC_USER_KNOWN, p->user);
	v[6] = text(p->flags & GPUMON_PROC_NAME_KNOWN, p->name);
	v[7] = text(p->flags & GPUMON_PROC_CMDLINE_KNOWN, p->cmdline);
	return 1;
}

static int fill_framework(const gpumon_reader *rd, const gpumon_record *r, struct val *v, char *scratch, size_t len)
{
	(void)rd, (void)scratch, (void)len;
	if (r->kind != GPUMON_REC_FRAMEWORK)
		return 0;
	const gpumon_framework_sample *f = &r->framework;
	v[0] = u64v(1, f->pid);
	v[1] = f->device >= 0 ? (struct val){V_INT, f->device, NULL} : none();
	v[2] = text(f->framework[0] != 0, f->framework);
	v[3] = f->step >= 0 ? (struct val){V_INT, f->step, NULL} : none();
	v[4] = u64v(f->allocated_known, f->allocated_bytes);
	v[5] = u64v(f->reserved_known, f->reserved_bytes);
	v[6] = u64v(f->max_allocated_known, f->max_allocated_bytes);
	return 1;
}

/* Events, with the two kinds the reader gives back as the records they were written from: the
 * job's pids ("job", "pid N" or "pid N: command") and lost GPUs ("lost"), in the words their
 * writers store. */
static int fill_event(const gpumon_reader *rd, const gpumon_record *r, struct val *v, char *scratch, size_t len)
{
	(void)rd;
	if (r->kind == GPUMON_REC_EVENT) {
		v[0] = text(1, r->event_kind);
		v[1] = text(1, r->event_text);
	} else if (r->kind == GPUMON_REC_JOB) {
		if (r->process->flags & GPUMON_PROC_CMDLINE_KNOWN)
			snprintf(scratch, len, "pid %u: %s", r->process->pid, r->process->cmdline);
		else
			snprintf(scratch, len, "pid %u", r->process->pid);
		v[0] = text(1, "job");
		v[1] = text(1, scratch);
	} else if (r->kind == GPUMON_REC_LOST) {
		snprintf(scratch, len, "GPU %u is lost", r->dev);
		v[0] = text(1, "lost");
		v[1] = text(1, scratch);
	} else {
		return 0;
	}
	return 1;
}

static const struct table tables[] = {
    {"device",
     {"dev", "uuid", "memory_api", "used_bytes", "free_bytes", "reserved_bytes", "total_bytes", "used_min_bytes",
      "used_max_bytes", "used_max_t_s", "samples", "util_gpu_pct", "util_memory_pct", "temperature_c", "power_mw",
      "energy_mj", "clock_sm_mhz", "clock_mem_mhz"},
     fill_device},
    {"process", {"dev", "uuid", "pid", "used_bytes", "gone", "user", "name", "command"}, fill_process},
    {"framework", {"pid", "device", "framework", "step", "allocated_bytes", "reserved_bytes", "max_allocated_bytes"},
     fill_framework},
    {"events", {"kind", "text"}, fill_event},
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
	       "Writes the records of a recording (made by gpumon record or gpumon run) out.\n\n"
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
	       "never 0. Device and process rows are change-only: a row is written when a figure changes\n"
	       "(and a device row at least every second), and a value holds until the next row of that\n"
	       "series (the same GPU; the same process on that GPU, until a row with gone = 1).\n"
	       "CSV text keeps its exact bytes, quoted as RFC 4180 has it; written to a terminal, its\n"
	       "control characters are escaped (\\x1b) as everywhere else in gpumon.\n"
	       "The file format is described in docs/recording.md; the SQLite shell reads it.\n"
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

static int ncols(const struct table *t)
{
	int n = 0;
	while (n < MAX_COLS && t->cols[n])
		n++;
	return n;
}

/* A CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180). To a terminal,
 * another user's text (a command line may hold escape sequences) has its control characters
 * escaped first, as every other output shows it; to a file or pipe its bytes stay exact. */
static void csv_text(FILE *f, const char *t, int tty)
{
	char *safe = tty ? cli_safe_text_dup(t) : NULL, cut[256];
	if (tty) /* out of memory: the start of the text, escaped all the same */
		t = safe ? safe : cli_safe_text(cut, sizeof cut, t);
	if (!t[strcspn(t, ",\"\r\n")]) {
		fputs(t, f);
	} else {
		fputc('"', f);
		for (; *t; t++) {
			if (*t == '"')
				fputc('"', f);
			fputc(*t, f);
		}
		fputc('"', f);
	}
	free(safe);
}

static void csv_header(FILE *f, const struct table *t)
{
	fputs("t_s,time_utc", f);
	for (int i = 0; i < ncols(t); i++) {
		fputc(',', f);
		csv_text(f, t->cols[i], 0);
	}
	fputc('\n', f);
}

/* "2025-05-01T12:34:56.123456Z" at t_ns, or "" when the recording's wall clock is unknown or the
 * time is beyond any date (a hand-edited start or time: never a wrapped date). */
static const char *utc_of(char *buf, size_t len, const struct start *st, uint64_t t_ns)
{
	int64_t since, wall;
	if (!st->wall_ns || t_ns > INT64_MAX || __builtin_sub_overflow((int64_t)t_ns, st->mono_ns, &since) ||
	    __builtin_add_overflow(st->wall_ns, since, &wall))
		return buf[0] = 0, buf;
	return format_utc(buf, len, wall);
}

static void csv_row(FILE *f, const struct table *t, const gpumon_record *r, const struct val *v, const struct start *st,
		    int tty)
{
	char b[64];
	fprintf(f, "%s,", format_seconds(b, sizeof b, (int64_t)r->t_ns - st->mono_ns));
	fputs(utc_of(b, sizeof b, st, r->t_ns), f);
	for (int i = 0; i < ncols(t); i++) {
		fputc(',', f);
		if (v[i].type == V_INT)
			fprintf(f, "%" PRId64, v[i].i);
		else if (v[i].type == V_TIME)
			fputs(format_seconds(b, sizeof b, v[i].i - st->mono_ns), f);
		else if (v[i].type == V_TEXT)
			csv_text(f, v[i].s, tty);
	}
	fputc('\n', f);
}

static json_t *json_seconds(int64_t since_start_ns)
{
	return json_real((double)round_us(since_start_ns) / 1e6);
}

static json_t *json_value(const struct val *v, const struct start *st)
{
	switch (v->type) {
	case V_INT: return json_integer(v->i);
	case V_TIME: return json_seconds(v->i - st->mono_ns);
	case V_TEXT: return json_string(v->s);
	}
	return json_null();
}

/* One line of JSON; -1 when out of memory (or text that is not UTF-8). */
static int json_row(FILE *f, const struct table *t, const gpumon_record *r, const struct val *v, const struct start *st)
{
	char b[64];
	json_t *o = json_object();
	const char *utc = utc_of(b, sizeof b, st, r->t_ns);
	int bad = !o || json_object_set_new(o, "t_s", json_seconds((int64_t)r->t_ns - st->mono_ns)) ||
		  json_object_set_new(o, "time_utc", utc[0] ? json_string(utc) : json_null());
	for (int i = 0; i < ncols(t) && !bad; i++)
		bad = json_object_set_new(o, t->cols[i], json_value(&v[i], st)) != 0;
	/* 15 significant digits print microsecond times as written (3600.123456, not ...0001); ASCII, so
	   that a command line's C1 controls are \u escapes as its C0 ones are */
	char *line = bad ? NULL
			 : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15));
	json_decref(o);
	if (!line)
		return -1;
	fputs(line, f);
	fputc('\n', f);
	free(line);
	return 0;
}

static int export_rows(gpumon_reader *rd, const struct opts *o, const struct start *st, FILE *f)
{
	gpumon_record rec;
	struct val v[MAX_COLS];
	char scratch[640]; /* a job's pid with its command line */
	int got, bad = 0, tty = isatty(fileno(f));
	if (o->format == FMT_CSV)
		csv_header(f, o->table);
	while (!bad && (got = gpumon_reader_next(rd, &rec)) > 0) {
		if (!o->table->fill(rd, &rec, v, scratch, sizeof scratch))
			continue;
		if (o->format == FMT_CSV)
			csv_row(f, o->table, &rec, v, st, tty);
		else
			bad = json_row(f, o->table, &rec, v, st);
	}
	if (bad) {
		cli_error("export: %s: a row could not be converted to JSON (out of memory, or text that is not UTF-8)",
			  o->file);
		return EXIT_OTHER;
	}
	const char *damage = gpumon_reader_damage(rd);
	char *said = cli_safe_text_dup(damage); /* the damage quotes the file's values: escaped */
	if (got < 0) {
		cli_error("export: reading %s: %s", o->file, damage[0] && said ? said : gpumon_reader_errmsg(rd));
		free(said);
		return EXIT_OTHER;
	}
	/* what could be read is written; what could not is said, as gpumon report says it */
	if (damage[0])
		cli_error("export: %s: not everything could be read, the rest is written: %s", o->file,
			  said ? said : "out of memory");
	free(said);
	return EXIT_OK;
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
	gpumon_reader *rd = NULL;
	int st = gpumon_reader_create(o.file, &rd);
	if (st != GPUMON_OK) {
		cli_error("export: %s", rd && gpumon_reader_errmsg(rd)[0] ? gpumon_reader_errmsg(rd) : gpumon_strerror(st));
		gpumon_reader_destroy(rd);
		return EXIT_OTHER;
	}
	const gpumon_run_meta *meta = gpumon_reader_meta(rd);
	struct start start = {(int64_t)meta->start_mono_ns, (int64_t)meta->start_wall_ns};
	FILE *f = stdout;
	if (o.out && !(f = fopen(o.out, "w"))) {
		cli_error("export: cannot create %s: %s", o.out, strerror(errno));
		gpumon_reader_destroy(rd);
		return EXIT_OTHER;
	}
	rc = export_rows(rd, &o, &start, f);
	int write_failed = ferror(f);
	if ((f != stdout ? fclose(f) : fflush(f)) != 0)
		write_failed = 1;
	if (write_failed && rc == EXIT_OK) {
		cli_error("export: cannot write %s: %s", o.out ? o.out : "the output", strerror(errno));
		rc = EXIT_OTHER;
	}
	gpumon_reader_destroy(rd);
	return rc;
}
