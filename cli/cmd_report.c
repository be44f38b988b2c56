/* SPDX-License-Identifier: MIT */
/* cmd_report.c — `gpumon report FILE [--json] [--html OUT]`: reads a recording or a CSV of
 * samples in one streaming pass and prints what it means: the leak verdict, the peak and who held
 * it, fragmentation, unaccounted memory, and after an out-of-memory death, its likely cause. */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report.h"
#include "report_html.h"

static void help(void)
{
	printf("Usage: gpumon report FILE [--json] [--html OUT]\n"
	       "Summarises a run: the leak verdict (rate, start, time to out-of-memory), the peak with its time\n"
	       "and owner, peaks per window, fragmentation (reserved - allocated), memory outside the allocator\n"
	       "(NVML - reserved) and, when the job died of out-of-memory, the likely cause and who held what.\n\n"
	       "FILE is a recording (gpumon record / gpumon run) or a CSV whose header names `time` (seconds),\n"
	       "optionally `step`, and any of allocated, reserved, max_allocated, process_used, device_used,\n"
	       "device_total (bytes); other columns are ignored. See docs/report.md.\n\n"
	       "Options:\n"
	       "  --json       print the summary as JSON (keys in docs/report.md) instead of text\n"
	       "  --html OUT   also write a self-contained HTML page (no network needed) with the summary\n"
	       "               and interactive timelines: GPUs, processes stacked, the framework's\n"
	       "               figures, marks for the peak, the leak start, alerts (docs/report-html.md)\n"
	       "  -h, --help   this help\n\n"
	       "A damaged recording is read as far as it is intact; what could not be read is named.\n"
	       "Exit status: 0 ok, 2 bad usage or an unusable CSV, 255 unreadable file.\n");
}

struct opts {
	const char *file, *html;
	int json;
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
		} else if (bad) {
			return EXIT_USAGE;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_error("report: unknown option '%s' (see gpumon report --help)", argv[i]);
			return EXIT_USAGE;
		} else if (o->file) {
			cli_error("report: one file at a time ('%s' and '%s')", o->file, argv[i]);
			return EXIT_USAGE;
		} else {
			o->file = argv[i];
		}
	}
	if (!o->file) {
		cli_error("report: which file? Usage: gpumon report FILE [--json] [--html OUT]");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Streams a recording into a new report. */
static int read_recording(const char *path, report **out, char *err, size_t errlen)
{
	recfile rf;
	int rc = recfile_open(path, &rf, err, errlen);
	if (rc != EXIT_OK)
		return rc;
	report_source src = {
		.path = path,
		.type = "recording",
		.kind = rf.kind,
		.command = rf.command,
		.host = rf.host,
		.start_wall_ns = rf.start_wall_ns,
		.start_mono_ns = rf.start_mono_ns,
		.end_mono_ns = rf.end_mono_ns,
		.exit_status = rf.exit_status,
		.devices = rf.devices,
		.ndevices = rf.ndevices,
	};
	recfile_iter *it = NULL;
	report *r = NULL;
	recrow row;
	int got = 0;
	if (rc == EXIT_OK)
		rc = recfile_iter_start(&rf, &it, err, errlen);
	if (rc == EXIT_OK) /* the first row: a file without a start time counts from it */
		got = recfile_iter_next(it, &row);
	src.start_mono_ns = rf.start_mono_ns;
	if (rc == EXIT_OK && !(r = report_create(&src))) {
		snprintf(err, errlen, "out of memory");
		rc = EXIT_OTHER;
	}
	for (; rc == EXIT_OK && got > 0; got = recfile_iter_next(it, &row))
		if (report_add(r, &row) != 0) {
			snprintf(err, errlen, "out of memory");
			rc = EXIT_OTHER;
		}
	recfile_iter_end(it);
	if (r && rf.damage[0])
		report_damage(r, rf.damage);
	if (r)
		report_finish(r);
	recfile_close(&rf);
	if (rc != EXIT_OK) {
		report_destroy(r);
		return rc;
	}
	*out = r;
	return EXIT_OK;
}

static int read_csv(const char *path, report **out, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return EXIT_OTHER;
	}
	report_source src = {.path = path, .type = "csv", .end_mono_ns = -1, .exit_status = -1};
	report *r = report_create(&src);
	int rc = r ? report_read_csv(path, f, r, err, errlen) : EXIT_OTHER;
	if (!r)
		snprintf(err, errlen, "out of memory");
	else
		report_finish(r);
	fclose(f);
	if (rc != EXIT_OK) {
		report_destroy(r);
		return rc;
	}
	*out = r;
	return EXIT_OK;
}

int cmd_report(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	char err[512] = "";
	report *r = NULL;
	rc = report_is_sqlite(o.file) ? read_recording(o.file, &r, err, sizeof err) : read_csv(o.file, &r, err, sizeof err);
	if (rc != EXIT_OK) {
		cli_error("report: %s", err);
		return rc;
	}
	if (o.html && cli_same_file(o.file, o.html)) {
		cli_error("report: --html %s would overwrite the input", o.html);
		report_destroy(r);
		return EXIT_USAGE;
	}
	json_t *doc = report_document(r, o.html != NULL);
	if (!doc) {
		cli_error("report: out of memory");
		report_destroy(r);
		return EXIT_OTHER;
	}
	if (o.html) {
		FILE *f = fopen(o.html, "w");
		if (!f) {
			cli_error("report: cannot create %s: %s", o.html, strerror(errno));
			json_decref(doc);
			report_destroy(r);
			return EXIT_OTHER;
		}
		int bad = report_html_write(f, doc, err, sizeof err);
		if (fclose(f) != 0 && !bad) {
			snprintf(err, sizeof err, "could not write %s: %s", o.html, strerror(errno));
			bad = -1;
		}
		if (bad) {
			cli_error("report: %s", err);
			json_decref(doc);
			report_destroy(r);
			return EXIT_OTHER;
		}
		json_object_del(doc, "timeline"); /* the text and JSON outputs stay the same with --html */
	}
	if (o.json) {
		if (json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) == 0)
			fputc('\n', stdout);
	} else {
		report_print_text(stdout, doc);
	}
	json_decref(doc);
	report_destroy(r);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("report: cannot write the output: %s", strerror(errno));
		return EXIT_OTHER;
	}
	return EXIT_OK;
}
