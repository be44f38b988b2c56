/* SPDX-License-Identifier: MIT */
/* cmd_query.c — `gpumon query`: nvidia-smi's --query-gpu and --query-compute-apps, byte for byte
 * in CSV (so scripts written for nvidia-smi keep working) or as JSON, once or in a loop. A lost
 * GPU is reported on its row and once on stderr while the other GPUs go on being reported. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "query_fields.h"

#define USAGE_HINT "Run 'gpumon query --help' for usage."
#define FIELDS_HINT "Run 'gpumon query --help' for the list of fields."

/* Most bytes one CSV value or header takes: a 256-byte process name with every byte escaped. */
#define VALUE_MAX 2048

/* One JSON document per line; %.15g prints 127.79 W as 127.79, not 127.79000000000001. ASCII: a
 * process name's C1 controls (U+0080..U+009F) are \u escapes, as jansson writes C0 ones. */
#define JSON_FLAGS (JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(15))

/* What the command line asks for. */
struct options {
	struct qf_list list[2]; /* indexed by enum qf_table */
	int want[2];
	struct qf_format fmt;
	const char *ids;        /* -i, NULL for all GPUs */
	const char *filename;   /* -f, NULL for stdout */
	uint64_t period_ns;     /* -l / -lms; 0 for one query */
};

/* Bits of run.warned: what has been said on stderr about a GPU. */
enum { WARNED_LOST = 1, WARNED_FAILED = 2 };

/* State of one run over the selected GPUs. */
struct run {
	const struct options *o;
	gpumon *g;
	unsigned count;        /* devices in the table (GPUs, then MIG devices) */
	unsigned ngpus;        /* GPUs: what nvidia-smi counts */
	unsigned *sel;         /* selected GPUs, ascending */
	unsigned nsel;
	unsigned sample_bits;  /* GPUMON_F_* bits the GPU fields need */
	uint64_t props_bits;   /* GPUMON_P_* bits the GPU fields need */
	int want_time;         /* the timestamp field is asked */
	char timestamp[32];    /* of the query being written */
	char driver[96];
	int have_driver;
	unsigned char *warned; /* per GPU: WARNED_* */
	int any_lost;
	int header_done;
};

/* Set by SIGINT/SIGTERM in a loop. */
static volatile sig_atomic_t stop_signal;

static const char *const json_key[2] = {"gpu", "compute_apps"};

/* ---- help --------------------------------------------------------------------------------------- */

/* One line per field of table t: name with the unit CSV shows, description, aliases. */
static void help_fields(FILE *f, enum qf_table t)
{
	for (unsigned id = 0; id < qf_field_count(); id++) {
		const struct qf_field *q = qf_field_get(id);
		char name[64];
		if (q->table != t)
			continue;
		if (q->unit && !q->csv_unitless)
			snprintf(name, sizeof name, "%s [%s]", q->name, q->unit);
		else
			snprintf(name, sizeof name, "%s", q->name);
		if (strlen(name) > 24) /* the long ECC names: the description goes below */
			fprintf(f, "  %s\n  %-24s %s", name, "", q->desc);
		else
			fprintf(f, "  %-24s %s", name, q->desc);
		for (int a = 0; a < 2 && q->aliases[a]; a++)
			fprintf(f, "%s%s", a ? ", " : " Also ", q->aliases[a]);
		fputs(q->aliases[0] ? ".\n" : "\n", f);
	}
}

static void help(FILE *f)
{
	fputs("Usage: gpumon query --query-gpu=FIELDS [--query-compute-apps=FIELDS] --format=FORMAT\n"
	      "                    [-i|--id GPUS] [-f|--filename FILE] [-l|--loop SEC | -lms|--loop-ms MS]\n"
	      "       gpumon query --query-compute-apps=FIELDS --format=FORMAT [...]\n"
	      "\n"
	      "Prints the chosen fields of each GPU, or of each process computing on one, as\n"
	      "nvidia-smi --query-gpu / --query-compute-apps prints them in CSV, or as JSON.\n"
	      "With both queries the GPU table comes first, then the processes.\n"
	      "\n"
	      "Options:\n"
	      "  --query-gpu=FIELDS           comma-separated GPU fields (below)\n"
	      "  --query-compute-apps=FIELDS  comma-separated fields of the compute processes (below)\n"
	      "  --format=FORMAT              csv[,noheader][,nounits] or json (below; default csv)\n"
	      "  -i, --id=GPUS                only these GPUs: comma-separated indexes, UUIDs or PCI\n"
	      "                               bus ids (default: all)\n"
	      "  -f, --filename=FILE          write the output to FILE (created, or emptied first)\n"
	      "                               instead of stdout; messages stay on stderr\n"
	      "  -l, --loop=SEC               query every SEC seconds until interrupted\n"
	      "  -lms, --loop-ms=MS           query every MS milliseconds until interrupted\n"
	      "  -h, --help                   this help\n"
	      "\n"
	      "GPU fields (--query-gpu; names are case-sensitive) and the units CSV shows:\n",
	      f);
	help_fields(f, QF_TABLE_GPU);
	fputs("\nCompute process fields (--query-compute-apps), one row per process per GPU:\n", f);
	help_fields(f, QF_TABLE_APPS);
	fputs("\n"
	      "Formats:\n"
	      "  csv       a header line, then one line per GPU or process, values separated by \", \";\n"
	      "            text with a comma, a quote or a blank at an end is in double quotes (a quote\n"
	      "            doubled), and control characters in names are escaped (\\n, \\x1b)\n"
	      "  noheader  leave out the header line\n"
	      "  nounits   leave the units out of the values (\"143771\", not \"143771 MiB\"); the header keeps them\n"
	      "  json      one JSON document per query (one per line when looping):\n"
	      "            {\"gpu\": [{field: value, ...}], \"compute_apps\": [...], \"units\": {field: unit}}\n"
	      "            with numbers in the units above; null where CSV shows a bracketed word\n"
	      "\n"
	      "Values that are not numbers: [Not Supported] (the driver or GPU does not offer it),\n"
	      "[N/A] (not available; also what nvidia-smi prints for the properties and memory health\n"
	      "fields, from power.limit on, that the driver or GPU does not offer), [GPU is lost] (the\n"
	      "GPU fell off the bus or needs a reset), [Insufficient Permissions], [Unknown Error].\n"
	      "A value that is missing is never shown as 0.\n"
	      "\n"
	      "Exit status:\n"
	      "  0    success (also when a loop is stopped by SIGINT or SIGTERM)\n"
	      "  2    bad argument or unknown field\n"
	      "  4    the driver refused for lack of permission\n"
	      "  6    a GPU named with -i does not exist\n"
	      "  9    the NVIDIA driver is not loaded\n"
	      "  12   libnvidia-ml.so.1 not found: no NVIDIA driver installed\n"
	      "  15   a GPU is lost (the other GPUs were still reported)\n"
	      "  255  another error\n",
	      f);
}

/* ---- options ------------------------------------------------------------------------------------ */

/* Prints "gpumon: MESSAGE" and the usage hint; returns EXIT_USAGE. */
__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cli_error("%s", msg);
	fprintf(stderr, "%s\n", USAGE_HINT);
	return EXIT_USAGE;
}

static int parse_fields(struct options *o, enum qf_table t, const char *text)
{
	char err[512];
	if (qf_parse_list(text, t, &o->list[t], err, sizeof err) != 0) {
		/* nvidia-smi's own sentence, unprefixed, so that scripts matching it keep working */
		fprintf(stderr, "%s\n%s\n", err, FIELDS_HINT);
		return EXIT_USAGE;
	}
	o->want[t] = 1;
	return EXIT_OK;
}

static int parse_format(struct options *o, const char *text)
{
	char err[512];
	if (qf_parse_format(text, &o->fmt, err, sizeof err) != 0)
		return usage_error("%s", err);
	return EXIT_OK;
}

/* -l SEC (ns_per_unit 1e9) or -lms MS (1e6). */
static int parse_period(struct options *o, const char *opt, const char *text, uint64_t ns_per_unit)
{
	char err[512];
	unsigned v;
	if (qf_parse_period(opt, text, &v, err, sizeof err) != 0)
		return usage_error("%s", err);
	if (o->period_ns)
		return usage_error("give one of -l and -lms, once");
	o->period_ns = (uint64_t)v * ns_per_unit;
	return EXIT_OK;
}

/* Status of parse_options when the command should go on. */
enum { PARSED = -1 };

/* Handles argv[*i] when it is a value option; sets *st. Returns 0 when argv[*i] is none of them. */
static int value_option(int argc, char **argv, int *i, struct options *o, int *st)
{
	int bad = 0;
	const char *v;
	*st = EXIT_OK;
	if ((v = cli_option_value(argc, argv, i, "--query-gpu", NULL, &bad)))
		*st = parse_fields(o, QF_TABLE_GPU, v);
	else if (!bad && (v = cli_option_value(argc, argv, i, "--query-compute-apps", NULL, &bad)))
		*st = parse_fields(o, QF_TABLE_APPS, v);
	else if (!bad && (v = cli_option_value(argc, argv, i, "--format", NULL, &bad)))
		*st = parse_format(o, v);
	else if (!bad && (v = cli_option_value(argc, argv, i, "--id", "-i", &bad)))
		o->ids = v;
	else if (!bad && (v = cli_option_value(argc, argv, i, "--filename", "-f", &bad)))
		o->filename = v;
	else if (!bad && (v = cli_option_value(argc, argv, i, "--loop-ms", "-lms", &bad)))
		*st = parse_period(o, "-lms", v, 1000000u);
	else if (!bad && (v = cli_option_value(argc, argv, i, "--loop", "-l", &bad)))
		*st = parse_period(o, "-l", v, 1000000000u);
	if (bad) {
		fprintf(stderr, "%s\n", USAGE_HINT);
		*st = EXIT_USAGE;
	}
	return v != NULL || bad;
}

/* Fills *o from the command line. Returns PARSED, or the exit status to leave with. */
static int parse_options(int argc, char **argv, struct options *o)
{
	memset(o, 0, sizeof *o);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int st;
		if (!strcmp(a, "-h") || !strcmp(a, "--help") || !strcmp(a, "--help-query-gpu") ||
		    !strcmp(a, "--help-query-compute-apps")) {
			help(stdout);
			return EXIT_OK;
		}
		if (value_option(argc, argv, &i, o, &st)) {
			if (st != EXIT_OK)
				return st;
			continue;
		}
		if (a[0] == '-')
			return usage_error("unknown option \"%s\"", a);
		return usage_error("unexpected argument \"%s\"", a);
	}
	if (!o->want[QF_TABLE_GPU] && !o->want[QF_TABLE_APPS])
		return usage_error("give --query-gpu=FIELDS, --query-compute-apps=FIELDS or both");
	/* without --format: csv, as nvidia-smi defaults to (o->fmt starts zeroed) */
	return PARSED;
}

/* ---- GPUs and their troubles -------------------------------------------------------------------- */

static int by_value(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return (x > y) - (x < y);
}

/* Rows are GPUs, as nvidia-smi's --query-gpu and --query-compute-apps print them: a MIG device is
 * not a row (its processes are listed on its GPU) and `count` counts GPUs. */
static void drop_mig_devices(struct run *r)
{
	unsigned k = 0;
	r->ngpus = 0;
	for (unsigned d = 0; d < r->count; d++) {
		gpumon_device_info info;
		if (gpumon_device_info_get(r->g, d, &info) != GPUMON_OK || !info.mig)
			r->ngpus++;
	}
	for (unsigned i = 0; i < r->nsel; i++) {
		gpumon_device_info info;
		if (gpumon_device_info_get(r->g, r->sel[i], &info) == GPUMON_OK && info.mig)
			continue;
		r->sel[k++] = r->sel[i];
	}
	r->nsel = k;
}

/* Opens the library and selects the GPUs. Returns EXIT_OK or the status to leave with. */
static int run_open(struct run *r, const struct options *o)
{
	int st;
	memset(r, 0, sizeof *r);
	r->o = o;
	r->g = cli_open(&st);
	if (!r->g)
		return st;
	r->count = gpumon_device_count(r->g);
	r->sel = calloc((size_t)r->count + 1, sizeof *r->sel);
	r->warned = calloc((size_t)r->count + 1, 1);
	if (!r->sel || !r->warned) {
		cli_error("out of memory");
		return EXIT_OTHER;
	}
	st = cli_select_devices(r->g, o->ids, r->sel, r->count, &r->nsel);
	if (st != EXIT_OK)
		return st;
	/* nvidia-smi lists GPUs in index order, whatever order -i names them in */
	qsort(r->sel, r->nsel, sizeof *r->sel, by_value);
	drop_mig_devices(r);
	if (o->want[QF_TABLE_GPU]) {
		r->sample_bits = qf_list_sample_bits(&o->list[QF_TABLE_GPU]);
		r->props_bits = qf_list_props_bits(&o->list[QF_TABLE_GPU]);
		r->want_time = qf_list_uses(&o->list[QF_TABLE_GPU], QF_SRC_TIME);
		if (qf_list_uses(&o->list[QF_TABLE_GPU], QF_SRC_DRIVER))
			r->have_driver = gpumon_driver_version(r->g, r->driver, sizeof r->driver) == GPUMON_OK;
	}
	return EXIT_OK;
}

static void run_close(struct run *r)
{
	free(r->sel);
	free(r->warned);
	cli_leave(r->g);
}

static void report_lost(struct run *r, unsigned dev)
{
	gpumon_device_info info;
	r->any_lost = 1;
	if (r->warned[dev] & WARNED_LOST)
		return;
	r->warned[dev] |= WARNED_LOST;
	int known = gpumon_device_info_get(r->g, dev, &info) == GPUMON_OK && (info.present & GPUMON_INFO_UUID);
	cli_error("GPU %u (%s) is lost: it has fallen off the bus or needs a reset; the other GPUs are "
		  "still reported.", dev, known ? info.uuid : "UUID unknown");
}

/* Says once per GPU why a read failed; the row shows the failure in its fields. */
static void report_failure(struct run *r, unsigned dev, int status)
{
	if (status == GPUMON_E_LOST) {
		report_lost(r, dev);
		return;
	}
	if (r->warned[dev] & WARNED_FAILED)
		return;
	r->warned[dev] |= WARNED_FAILED;
	const char *msg = gpumon_errmsg(r->g);
	cli_error("GPU %u: %s", dev, msg[0] ? msg : gpumon_strerror(status));
}

/* ---- output ------------------------------------------------------------------------------------- */

/* Where rows go: stdout as CSV, or a JSON array. */
struct sink {
	int nounits;
	json_t *rows; /* NULL for CSV */
};

static void csv_header(const struct qf_list *l)
{
	char buf[VALUE_MAX];
	for (unsigned i = 0; i < l->n; i++) {
		if (i)
			fputs(", ", stdout);
		fputs(qf_csv_header(qf_field_get(l->id[i]), buf, sizeof buf), stdout);
	}
	putchar('\n');
}

static void csv_row(const struct qf_list *l, const struct qf_ctx *c, int nounits)
{
	char buf[VALUE_MAX];
	for (unsigned i = 0; i < l->n; i++) {
		const struct qf_field *f = qf_field_get(l->id[i]);
		struct qf_value v;
		qf_value_get(f, c, &v);
		if (i)
			fputs(", ", stdout);
		/* text can come from another process (its name): escaped and quoted, one row stays one row */
		if (v.kind == QV_TEXT)
			fputs(cli_csv_field(buf, sizeof buf, v.text), stdout);
		else
			fputs(qf_csv_value(f, &v, nounits, buf, sizeof buf), stdout);
	}
	putchar('\n');
}

/* Bytes in the UTF-8 sequence that lead byte c starts; 0 when c cannot start one. */
static size_t utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
}

/* A JSON string. A process name from /proc may hold any bytes: each sequence jansson takes for
 * UTF-8 is kept, each other byte becomes '?'. */
static json_t *json_text(const char *s)
{
	json_t *j = json_string(s);
	if (j)
		return j;
	char copy[VALUE_MAX];
	size_t w = 0;
	for (size_t i = 0; s[i] && w + 4 < sizeof copy;) {
		size_t n = utf8_len((unsigned char)s[i]);
		json_t *seq = n && strnlen(s + i, n) == n ? json_stringn(s + i, n) : NULL;
		if (seq) {
			memcpy(copy + w, s + i, n);
			w += n;
			i += n;
			json_decref(seq);
		} else {
			copy[w++] = '?';
			i++;
		}
	}
	copy[w] = 0;
	return json_string(copy);
}

static json_t *json_value(const struct qf_value *v)
{
	switch (v->kind) {
	case QV_TEXT: return json_text(v->text);
	case QV_UINT: return json_integer((json_int_t)v->num);
	case QV_CENTI: return json_real((double)v->num / 100.0);
	default: return json_null();
	}
}

static json_t *json_row(const struct qf_list *l, const struct qf_ctx *c)
{
	json_t *row = json_object();
	for (unsigned i = 0; row && i < l->n; i++) {
		const struct qf_field *f = qf_field_get(l->id[i]);
		struct qf_value v;
		qf_value_get(f, c, &v);
		if (json_object_set_new(row, f->name, json_value(&v)) != 0) {
			json_decref(row);
			row = NULL;
		}
	}
	return row;
}

/* The "units" object: the unit of each queried field that has one. */
static json_t *json_units(const struct options *o)
{
	json_t *units = json_object();
	for (int t = 0; units && t < 2; t++) {
		for (unsigned i = 0; o->want[t] && i < o->list[t].n; i++) {
			const struct qf_field *f = qf_field_get(o->list[t].id[i]);
			if (f->unit && json_object_set_new(units, f->name, json_string(f->unit)) != 0) {
				json_decref(units);
				return NULL;
			}
		}
	}
	return units;
}

/* Writes one row; returns 0, or -1 when out of memory. */
static int emit_row(struct sink *s, const struct qf_list *l, const struct qf_ctx *c)
{
	if (s->rows)
		return json_array_append_new(s->rows, json_row(l, c));
	csv_row(l, c, s->nounits);
	return 0;
}

/* ---- one query ---------------------------------------------------------------------------------- */

static int gpu_rows(struct run *r, struct sink *s)
{
	const struct qf_list *l = &r->o->list[QF_TABLE_GPU];
	for (unsigned k = 0; k < r->nsel; k++) {
		unsigned dev = r->sel[k];
		gpumon_device_info info;
		gpumon_device_sample sample;
		gpumon_device_props props = {.size = sizeof props};
		struct qf_ctx c = {&info, &sample, GPUMON_OK, r->have_driver ? r->driver : NULL, r->ngpus, NULL,
				   &props, GPUMON_OK, r->want_time ? r->timestamp : NULL};
		memset(&sample, 0, sizeof sample);
		if (r->sample_bits) {
			c.sample_status = gpumon_device_sample_read(r->g, dev, r->sample_bits, &sample);
			if (c.sample_status != GPUMON_OK)
				report_failure(r, dev, c.sample_status);
		}
		if (r->props_bits) {
			c.props_status = gpumon_device_props_read(r->g, dev, r->props_bits, &props);
			if (c.props_status != GPUMON_OK)
				report_failure(r, dev, c.props_status);
		}
		if (gpumon_device_info_get(r->g, dev, &info) != GPUMON_OK)
			c.info = NULL;
		if (emit_row(s, l, &c) != 0)
			return -1;
	}
	return 0;
}

/* One row per compute process per GPU, in the library's order (most memory first). */
static int app_rows(struct run *r, struct sink *s)
{
	const struct qf_list *l = &r->o->list[QF_TABLE_APPS];
	for (unsigned k = 0; k < r->nsel; k++) {
		unsigned dev = r->sel[k];
		gpumon_process *procs;
		size_t n;
		int st = gpumon_process_list(r->g, dev, &procs, &n);
		if (st != GPUMON_OK) {
			report_failure(r, dev, st);
			continue;
		}
		gpumon_device_info info;
		struct qf_ctx c = {&info, NULL, GPUMON_OK, NULL, r->ngpus, NULL, NULL, GPUMON_OK, NULL};
		if (gpumon_device_info_get(r->g, dev, &info) != GPUMON_OK)
			c.info = NULL;
		for (size_t i = 0; i < n && st == 0; i++) {
			if (!(procs[i].flags & GPUMON_PROC_COMPUTE))
				continue; /* graphics-only: nvidia-smi's compute apps leave it out */
			c.proc = &procs[i];
			st = emit_row(s, l, &c);
		}
		gpumon_free(procs);
		if (st != 0)
			return -1;
	}
	return 0;
}

/* Writes table t of one query: CSV rows (header the first time), or an array into doc. */
static int emit_table(struct run *r, enum qf_table t, json_t *doc)
{
	const struct options *o = r->o;
	struct sink s = {o->fmt.nounits, NULL};
	if (doc) {
		s.rows = json_array();
		if (json_object_set_new(doc, json_key[t], s.rows) != 0)
			return -1;
	} else if (!r->header_done && !o->fmt.noheader) {
		csv_header(&o->list[t]);
	}
	return t == QF_TABLE_GPU ? gpu_rows(r, &s) : app_rows(r, &s);
}

static int write_failed(void)
{
	cli_error("cannot write the output: %s", errno ? strerror(errno) : "write error");
	return EXIT_OTHER;
}

/* Queries the selected GPUs once and writes the result. Returns EXIT_OK or an exit status. */
static int query_once(struct run *r)
{
	const struct options *o = r->o;
	json_t *doc = NULL;
	int st = 0;
	if (r->want_time) {
		/* one time for every row of the query, taken before the driver is asked */
		struct timespec now;
		clock_gettime(CLOCK_REALTIME, &now);
		qf_timestamp((long long)now.tv_sec, now.tv_nsec, r->timestamp, sizeof r->timestamp);
	}
	if (o->fmt.json && !(doc = json_object()))
		st = -1;
	for (int t = 0; t < 2 && st == 0; t++)
		if (o->want[t])
			st = emit_table(r, (enum qf_table)t, doc);
	r->header_done = 1;
	if (doc && st == 0)
		st = json_object_set_new(doc, "units", json_units(o));
	if (st != 0) {
		json_decref(doc);
		cli_error("out of memory");
		return EXIT_OTHER;
	}
	errno = 0;
	if (doc) {
		int bad = json_dumpf(doc, stdout, JSON_FLAGS) != 0;
		json_decref(doc);
		if (bad || putchar('\n') == EOF)
			return write_failed();
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		return write_failed();
	return EXIT_OK;
}

/* ---- the loop ----------------------------------------------------------------------------------- */

static void on_stop(int sig)
{
	if (stop_signal) {
		/* a second signal while a driver call hangs: leave the way the signal would */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	stop_signal = sig;
}

/* Queries every period on a fixed grid of deadlines (no drift; a late query skips the ticks it
 * missed) until SIGINT or SIGTERM. */
static int query_loop(struct run *r)
{
	struct sigaction sa, old_int, old_term;
	sigset_t stops;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_stop;
	sa.sa_flags = SA_RESTART; /* a driver call in progress goes on; ppoll is never restarted */
	sigemptyset(&sa.sa_mask);
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	stop_signal = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);

	const uint64_t period = r->o->period_ns;
	uint64_t next = cli_now_ns();
	int st = EXIT_OK;
	while (!stop_signal && st == EXIT_OK) {
		st = query_once(r);
		next += period;
		uint64_t now = cli_now_ns();
		if (next <= now)
			next += ((now - next) / period + 1) * period;
		if (st == EXIT_OK)
			cli_wait(-1, next, &stops, &stop_signal);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	return st;
}

/* -f FILE: the output goes to FILE, created or emptied, as nvidia-smi's -f does; errors stay on
 * stderr. Returns EXIT_OK or EXIT_OTHER with a message. */
static int redirect_output(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0) {
		cli_error("cannot write %s: %s", path, strerror(errno));
		return EXIT_OTHER;
	}
	fflush(stdout);
	int ok = dup2(fd, STDOUT_FILENO) >= 0;
	int why = errno;
	close(fd);
	if (!ok) {
		cli_error("cannot write %s: %s", path, strerror(why));
		return EXIT_OTHER;
	}
	return EXIT_OK;
}

int cmd_query(int argc, char **argv)
{
	struct options o;
	struct run r;
	int st = parse_options(argc, argv, &o);
	if (st != PARSED)
		return st;
	if (o.filename && (st = redirect_output(o.filename)) != EXIT_OK)
		return st;
	st = run_open(&r, &o);
	if (st == EXIT_OK)
		st = o.period_ns ? query_loop(&r) : query_once(&r);
	run_close(&r);
	if (st == EXIT_OK && r.any_lost)
		st = EXIT_GPU_LOST;
	return st;
}
