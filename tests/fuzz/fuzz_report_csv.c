/* SPDX-License-Identifier: MIT */
/* fuzz_report_csv.c — libFuzzer target for `gpumon report`'s CSV reader and everything it feeds:
 * any bytes as a CSV file, into the run model's records, to the document with timelines, and the
 * text output worded from the model's answers. */
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "report.h"

const char *cli_progname = "gpumon";
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	FILE *f = fmemopen((void *)data, size, "r");
	if (!f)
		return 0;
	gpumon_model *m = NULL;
	char err[256];
	if (report_csv_model("fuzz.csv", f, GPUMON_MODEL_TIMELINES, &m, err, sizeof err) == 0) {
		gpumon_model_finish(m, 0, -1);
		char *text = NULL;
		if (gpumon_model_document(m, GPUMON_DOC_TIMELINE, &text) != GPUMON_OK)
			abort();
		json_error_t jerr;
		json_t *doc = json_loads(text, 0, &jerr);
		if (!doc)
			abort(); /* the document must be valid JSON (every string valid UTF-8) */
		FILE *null = fopen("/dev/null", "w");
		if (null) {
			report_print_text(null, m);
			fclose(null);
		}
		json_decref(doc);
		gpumon_free(text);
	}
	gpumon_model_destroy(m);
	fclose(f);
	return 0;
}
