/* SPDX-License-Identifier: MIT */
/* run_summary.h — the end summary of `gpumon run`: the run model's document in plain words
 * (words.h), with the few facts about the run that only the launcher knows. */
#ifndef GPUMON_RUN_SUMMARY_H
#define GPUMON_RUN_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "run_alloc.h"

/* What the summary says besides the document. */
struct run_facts {
	const char *path;                  /* the recording */
	int rec_failed;                    /* it stopped early */
	const struct run_alloc_plan *plan; /* the settings applied and the notes */
	uint64_t dropped;                  /* sampler records lost (queue full) */
	int have_socket;                   /* GPUMON_RUN_SOCKET was offered ... */
	uint64_t malformed, unknown;       /* ... and these lines were ignored */
};

/* Prints the summary of doc (gpumon_model_document, parsed) and f to out. */
void run_summary_print(FILE *out, const json_t *doc, const struct run_facts *f);

#endif
