/* SPDX-License-Identifier: MIT */
/* cmd_report.c — `gpumon report FILE... [--json] [--html OUT] [--period S]`: feeds a recording (the
 * library's reader) or a text file of samples (gpumon's CSV, gpumon export, the Python monitor,
 * nvidia-smi logs) to the library's run model in one streaming pass — or the recordings of one
 * distributed job made on several nodes, merged by the library — and prints the model's answers:
 * its document as it is (--json), in words, or as an HTML page with timelines. */
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report.h"
#include "report_html.h"

static void help(void)
{
	printf("Usage: gpumon report FILE [FILE...] [--json] [--html OUT] [--period SECONDS]\n"
	       "Summarises a run: the leak verdict (rate, start, time to out-of-memory), the peak with its time\n"
	       "and owner, peaks per window, fragmentation (reserved - allocated), memory outside the allocator\n"
	       "(NVML - reserved) and, when the job died of out-of-memory, the likely cause and who held what.\n\n"
	       "FILE is a recording (gpumon record / gpumon run), or a text file of samples, told apart by its\n"
	       "header: a CSV naming `time` (seconds) and any of allocated, reserved, max_allocated,\n"
	       "process_used, device_used, device_total (bytes); a table of gpumon export --csv (device,\n"
	       "process or framework); the Python monitor's csv= or jsonl= file; an nvidia-smi\n"
	       "--query-gpu or --query-compute-apps --format=csv log (units or nounits, with or without\n"
	       "timestamp) or gpumon query's. Other columns are ignored. See docs/report.md.\n\n"
	       "Several recordings of one distributed job, one from each node (gpumon run or gpumon record on\n"
	       "each), are read as one run: each node's GPUs after the previous node's, its times put on the\n"
	       "first recording's clock by the nodes' wall clocks (checked against the job's steps where the\n"
	       "inside view gave them), the ranks of all in one table. Recordings of different jobs (their\n"
	       "workers' job id, else MASTER_ADDR:MASTER_PORT, differ) are refused with the difference.\n\n"
	       "Options:\n"
	       "  --json       print the run model's document (JSON, format 2; keys in docs/report.md) instead\n"
	       "               of text: the same document as gpumon.report(FILE) in Python\n"
	       "  --html OUT   also write a self-contained HTML page (no network needed) with the summary\n"
	       "               and interactive timelines: GPUs, processes stacked, the framework's\n"
	       "               figures, marks for the peak, the leak start, alerts (docs/report-html.md);\n"
	       "               the file written and its size are said on stderr\n"
	       "  --period SECONDS  how far apart the rows of a log without a timestamp column are (its -l\n"
	       "               period; default 1, and the report then says it was assumed)\n"
	       "  -h, --help   this help\n\n"
	       "A file starting with SQLite's header or named *.gpumon is read as a recording. A damaged\n"
	       "recording is read as far as it is intact; what could not be read is named.\n"
	       "Exit status: 0 ok; 2 bad usage, a file that is not one of these, or one of which nothing\n"
	       "could be read; 255 a file that cannot be read or is not a gpumon recording.\n");
}

#define MAX_FILES 64

struct opts {
	const char *file, *html; /* file: the first */
	const char *files[MAX_FILES];
	size_t nfiles;
	int json;
	double period_s; /* --period; 0 when not given */
};

static int parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	for (int i = 1; i < argc; i++) {
		const char *v;
		int bad = 0;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if (!strcmp(argv[i], "--json")) {
			o->json = 1;
		} else if ((v = cli_option_value(argc, argv, &i, "--html", NULL, &bad))) {
			o->html = v;
		} else if ((v = cli_option_value(argc, argv, &i, "--period", NULL, &bad))) {
			char *end;
			o->period_s = strtod(v, &end);
			if (end == v || *end || !(o->period_s >= 0.001 && o->period_s <= 86400)) {
				cli_error("report: --period '%s': expected seconds, 0.001 to 86400", v);
				return EXIT_USAGE;
			}
		} else if (bad) {
			return EXIT_USAGE;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_error("report: unknown option '%s' (see gpumon report --help)", argv[i]);
			return EXIT_USAGE;
		} else if (o->nfiles == MAX_FILES) {
			cli_error("report: at most %d files at once", MAX_FILES);
			return EXIT_USAGE;
		} else {
			o->files[o->nfiles++] = argv[i];
		}
	}
	if (!o->nfiles) {
		cli_error("report: which file? Usage: gpumon report FILE [FILE...] [--json] [--html OUT] [--period SECONDS]");
		return EXIT_USAGE;
	}
	o->file = o->files[0];
	return EXIT_OK;
}

/* Reads a recording — or several recordings of one job, one a node, which the library reads as one
 * run (refusing recordings of different jobs, saying how they differ) — into a new model through
 * the library's reader. A file that is not a recording or of a newer format is refused with the
 * reader's message; damage is named in the document. */
static int read_recordings(const char *const *paths, size_t n, unsigned flags, gpumon_model **out)
{
	gpumon_reader *r[MAX_FILES] = {0};
	gpumon_model *m = NULL;
	char source[4096] = "";
	size_t at = 0;
	int rc = EXIT_OK;
	for (size_t i = 0; i < n && rc == EXIT_OK; i++) {
		int st = gpumon_reader_create(paths[i], &r[i]);
		if (st != GPUMON_OK) {
			cli_error("report: %s", r[i] && gpumon_reader_errmsg(r[i])[0] ? gpumon_reader_errmsg(r[i])
										   : gpumon_strerror(st));
			rc = EXIT_OTHER;
		}
		if (at < sizeof source)
			at += (size_t)snprintf(source + at, sizeof source - at, "%s%s", i ? " + " : "", paths[i]);
	}
	gpumon_model_config cfg = GPUMON_CONFIG_INIT(gpumon_model_config);
	cfg.flags = flags;
	cfg.source = source;
	cfg.source_type = n > 1 ? "recordings" : "recording";
	int st = rc == EXIT_OK ? gpumon_model_create(&cfg, &m) : GPUMON_OK;
	if (rc == EXIT_OK && st == GPUMON_OK)
		st = gpumon_model_load_many(m, r, n);
	/* what the readers said they lost (the model names it in the document) */
	const char *lost = "";
	for (size_t i = 0; i < n && !lost[0] && r[i]; i++)
		lost = gpumon_reader_damage(r[i]);
	if (rc == EXIT_OK && n > 1 && st == GPUMON_E_INVAL) { /* not one job */
		cli_error("report: %s", gpumon_model_errmsg(m));
		rc = EXIT_USAGE;
	} else if (rc == EXIT_OK && st != GPUMON_OK && st != GPUMON_E_NOMEM && m) {
		/* a file failing under the walk: what came before is good, and the loss is named */
		if (!lost[0])
			gpumon_model_damage(m, gpumon_model_errmsg(m)[0] ? gpumon_model_errmsg(m) : gpumon_strerror(st));
	} else if (rc == EXIT_OK && st != GPUMON_OK) {
		cli_error("report: %s: %s", source, gpumon_strerror(st));
		rc = EXIT_OTHER;
	}
	if (rc == EXIT_OK && !gpumon_model_samples(m)) {
		/* a report of nothing would read as a run that held no memory: refused, with what was lost */
		if (!lost[0])
			lost = gpumon_model_errmsg(m);
		if (lost[0])
			cli_error("report: %s: nothing could be read: %s", source, lost);
		else
			cli_error("report: %s: nothing could be read: the recording%s no samples", source,
				  n > 1 ? "s hold" : " holds");
		rc = EXIT_USAGE;
	}
	for (size_t i = 0; i < n; i++)
		gpumon_reader_destroy(r[i]);
	if (rc != EXIT_OK) {
		gpumon_model_destroy(m);
		return rc;
	}
	*out = m;
	return EXIT_OK;
}

/* A text file of samples; a period assumed for a log without times is said on stderr (the text and
 * JSON on stdout stay the document's). */
static int read_text(const char *path, unsigned flags, double period_s, gpumon_model **out)
{
	char err[512] = "", notice[512] = "";
	FILE *f = fopen(path, "r");
	if (!f) {
		cli_error("report: %s: %s", path, strerror(errno));
		return EXIT_OTHER;
	}
	int rc = report_read_text(path, f, flags, period_s, out, notice, sizeof notice, err, sizeof err);
	fclose(f);
	if (rc != EXIT_OK)
		cli_error("report: %s", err);
	else if (notice[0])
		cli_error("report: note: %s", notice);
	return rc;
}

/* The page: the model's answers, and its document with the timelines for the page's charts. */
static int write_html(const gpumon_model *m, const char *out)
{
	char err[512] = "", *doc = NULL;
	if (gpumon_model_document(m, GPUMON_DOC_TIMELINE, &doc) != GPUMON_OK) {
		cli_error("report: out of memory");
		return EXIT_OTHER;
	}
	FILE *f = fopen(out, "w");
	if (!f) {
		cli_error("report: cannot create %s: %s", out, strerror(errno));
		gpumon_free(doc);
		return EXIT_OTHER;
	}
	int bad = report_html_write(f, m, doc, err, sizeof err);
	if (fclose(f) != 0 && !bad) {
		snprintf(err, sizeof err, "could not write %s: %s", out, strerror(errno));
		bad = -1;
	}
	gpumon_free(doc);
	if (bad) {
		cli_error("report: %s", err);
		return EXIT_OTHER;
	}
	/* where the page went, on stderr: stdout carries the text or JSON report */
	struct stat sb;
	char size[32];
	if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode))
		fprintf(stderr, "%s: report: wrote %s (%s)\n", cli_progname, out,
			cli_format_bytes(size, sizeof size, (uint64_t)sb.st_size));
	else
		fprintf(stderr, "%s: report: wrote %s\n", cli_progname, out);
	return EXIT_OK;
}

int cmd_report(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	for (size_t i = 0; i < o.nfiles; i++)
		if (o.html && cli_same_file(o.files[i], o.html)) {
			cli_error("report: --html %s would overwrite the input", o.html);
			return EXIT_USAGE;
		}
	gpumon_model *m = NULL;
	unsigned flags = o.html ? GPUMON_MODEL_TIMELINES : 0;
	char err[512] = "";
	int kind;
	for (size_t i = 0; i < o.nfiles; i++) {
		FILE *f = o.nfiles > 1 ? fopen(o.files[i], "r") : NULL;
		if (o.nfiles > 1 && !f) { /* each named, before any is read */
			cli_error("report: %s: %s", o.files[i], strerror(errno));
			return EXIT_OTHER;
		}
		if (f)
			fclose(f);
		if ((rc = report_file_kind(o.files[i], &kind, err, sizeof err)) != EXIT_OK) {
			cli_error("report: %s", err);
			return rc;
		}
		if (o.nfiles > 1 && kind != REPORT_FILE_RECORDING) {
			cli_error("report: %s is no recording: several files are read together only when each is a "
				  "recording of one job's node", o.files[i]);
			return EXIT_USAGE;
		}
	}
	rc = kind == REPORT_FILE_RECORDING ? read_recordings(o.files, o.nfiles, flags, &m)
					   : read_text(o.file, flags, o.period_s, &m);
	if (rc != EXIT_OK)
		return rc;
	gpumon_model_finish(m, 0, -1);
	if (o.html && (rc = write_html(m, o.html)) != EXIT_OK) {
		gpumon_model_destroy(m);
		return rc;
	}
	/* the text and JSON are the same with --html or without: the text is the model's answers in
	   the library's words, the JSON its document without the timeline */
	char *text = NULL;
	if (o.json && gpumon_model_document(m, 0, &text) != GPUMON_OK) {
		cli_error("report: out of memory");
		gpumon_model_destroy(m);
		return EXIT_OTHER;
	}
	if (o.json) /* the library's document as it is: gpumon.report() in Python returns the same */
		printf("%s\n", text);
	else
		report_print_text(stdout, m);
	gpumon_free(text);
	gpumon_model_destroy(m);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("report: cannot write the output: %s", strerror(errno));
		return EXIT_OTHER;
	}
	return EXIT_OK;
}
