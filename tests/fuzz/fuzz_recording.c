/* SPDX-License-Identifier: MIT */
/* fuzz_recording.c — libFuzzer target for reading recordings: any bytes as a file (seeded with a
 * real recording, so mutations make damaged pages and headers), opened, walked to the end and
 * turned into the report document. Nothing may crash, leak or loop; damage must be named. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "report.h"

const char *cli_progname = "gpumon";
int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static char path[64];
	if (!path[0])
		snprintf(path, sizeof path, "/tmp/gpumon-fuzz-%d.gpumon", (int)getpid());
	FILE *f = fopen(path, "wb");
	if (!f)
		return 0;
	fwrite(data, 1, size, f);
	fclose(f);
	recfile rf;
	char err[256];
	if (recfile_open(path, &rf, err, sizeof err) == 0) {
		report_source src = {.path = path, .type = "recording", .start_mono_ns = rf.start_mono_ns,
				     .end_mono_ns = rf.end_mono_ns, .exit_status = rf.exit_status,
				     .devices = rf.devices, .ndevices = rf.ndevices, .kind = rf.kind};
		report *r = report_create(&src);
		recfile_iter *it = NULL;
		if (r && recfile_iter_start(&rf, &it, err, sizeof err) == 0) {
			recrow row;
			long n = 0;
			while (recfile_iter_next(it, &row) > 0 && n++ < 1000000)
				report_add(r, &row);
			recfile_iter_end(it);
			report_finish(r);
			json_t *doc = report_document(r, 1);
			if (!doc)
				abort();
			char *s = json_dumps(doc, 0);
			if (!s)
				abort();
			free(s);
			json_decref(doc);
		}
		report_destroy(r);
		recfile_close(&rf);
	}
	unlink(path);
	return 0;
}
