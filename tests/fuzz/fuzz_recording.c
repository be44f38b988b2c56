/* SPDX-License-Identifier: MIT */
/* fuzz_recording.c — libFuzzer target for the public recording reader: any bytes as a file (seeded
 * with a real recording, so mutations make damaged pages and headers), opened with
 * gpumon_reader_create, walked to the end, and fed to a run model whose document is made. Nothing
 * may crash, leak or loop; every record has a known kind; a failure must come with a message. */
#include <gpumon/gpumon.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Walks r to its end, as a front end that reads every record would. */
static void walk(gpumon_reader *r)
{
	gpumon_record rec;
	int rc;
	/* not checked: time order. Each table is read in write order, so rows whose times were
	   damaged (or written out of order) come back where they lie */
	while ((rc = gpumon_reader_next(r, &rec)) > 0)
		if (rec.kind < GPUMON_REC_DEVICE || rec.kind > GPUMON_REC_JOB ||
		    (rec.kind == GPUMON_REC_EVENT && !rec.event_kind))
			abort();
	if (rc < 0 && !gpumon_reader_errmsg(r)[0])
		abort();
	if (gpumon_reader_next(r, &rec) > 0) /* the end stays the end */
		abort();
}

/* Reads the file again into a model, and makes its document: it must be JSON. */
static void model(const char *path)
{
	gpumon_reader *r = NULL;
	gpumon_model *m = NULL;
	gpumon_model_config cfg = {.size = sizeof cfg, .flags = GPUMON_MODEL_TIMELINES, .headroom_share = 0.05,
				   .source = path, .source_type = "recording"};
	if (gpumon_reader_create(path, &r) == GPUMON_OK && gpumon_model_create(&cfg, &m) == GPUMON_OK) {
		gpumon_model_load(m, r);
		gpumon_model_finish(m, 0, -1);
		char *doc = NULL;
		if (gpumon_model_document(m, GPUMON_DOC_TIMELINE, &doc) != GPUMON_OK)
			abort();
		json_t *j = json_loads(doc, 0, NULL);
		if (!j || json_integer_value(json_object_get(j, "format")) != 2)
			abort();
		json_decref(j);
		gpumon_free(doc);
	}
	gpumon_model_destroy(m);
	gpumon_reader_destroy(r);
}

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
	gpumon_reader *r = NULL;
	int st = gpumon_reader_create(path, &r);
	if (st != GPUMON_OK && st != GPUMON_E_NOMEM && (!r || !gpumon_reader_errmsg(r)[0]))
		abort(); /* a refusal says why */
	if (st == GPUMON_OK)
		walk(r);
	gpumon_reader_destroy(r);
	if (st == GPUMON_OK)
		model(path);
	unlink(path);
	return 0;
}
