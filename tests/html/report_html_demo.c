/* SPDX-License-Identifier: MIT */
/* report_html_demo.c — test driver of the HTML report page: reads a report document (JSON) and
 * writes the page report_html_write() makes of it, so that tests can render it in a browser. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "report_html.h"

const char *cli_progname = "report_html_demo";

int main(int argc, char **argv)
{
	json_error_t jerr;
	char err[256];
	FILE *out;
	json_t *doc;

	if (argc != 3) {
		fprintf(stderr, "usage: report_html_demo REPORT.json OUT.html\n");
		return 2;
	}
	doc = json_load_file(argv[1], 0, &jerr);
	if (!doc) {
		fprintf(stderr, "report_html_demo: %s: line %d: %s\n", argv[1], jerr.line, jerr.text);
		return 1;
	}
	out = strcmp(argv[2], "-") ? fopen(argv[2], "w") : stdout;
	if (!out) {
		perror(argv[2]);
		json_decref(doc);
		return 1;
	}
	int rc = report_html_write(out, doc, err, sizeof err);
	if (rc != 0)
		fprintf(stderr, "report_html_demo: %s\n", err);
	if (out != stdout && fclose(out) != 0 && rc == 0) {
		perror(argv[2]);
		rc = -1;
	}
	json_decref(doc);
	return rc ? 1 : 0;
}
