/* SPDX-License-Identifier: MIT */
/* fuzz_report_csv.c — libFuzzer target for `gpumon report`'s CSV reader and everything it feeds:
 * any bytes as a CSV file, through the model to the document with timelines, and the text output. */
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

const char *cli_progname = "gpumon";
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	report_source src = {.path = "fuzz.csv", .type = "csv", .end_mono_ns = -1, .exit_status = -1};
	report *r = report_create(&src);
	char err[256];
	if (r && report_read_csv("fuzz.csv", f, r, err, sizeof err) == 0) {
		report_finish(r);
		json_t *doc = report_document(r, 1);
		if (!doc)
			abort();
		FILE *null = fopen("/dev/null", "w");
		if (null) {
			report_print_text(null, doc);
			fclose(null);
		}
		char *s = json_dumps(doc, 0);
		if (!s)
			abort(); /* every string in the document must be valid UTF-8 */
		free(s);
		json_decref(doc);
	}
	report_destroy(r);
	fclose(f);
	return 0;
}
