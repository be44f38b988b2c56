/* SPDX-License-Identifier: MIT */
/* report.h — `gpumon report`: a run's figures, fed row by row from a recording or a CSV file, go
 * into a model that keeps bounded summaries (leak detectors, peaks, reduced timelines) and turns
 * them into the report document (docs/report.md) that the text, JSON and HTML outputs print. */
#ifndef GPUMON_REPORT_H
#define GPUMON_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "recfile.h"

typedef struct report report;

/* What is known of the run before its rows (from a recording's metadata, or a CSV's name). */
typedef struct report_source {
	const char *path;
	const char *type;    /* "recording" or "csv" */
	const char *kind;    /* "run", "record", NULL */
	const char *command; /* NULL unknown */
	const char *host;
	int64_t start_wall_ns; /* 0 unknown */
	int64_t start_mono_ns; /* the t_ns of the start: times are seconds since it */
	int64_t end_mono_ns;   /* -1 unknown */
	int exit_status;       /* -1 unknown */
	const recfile_device *devices;
	int ndevices;
} report_source;

report *report_create(const report_source *src);
void report_destroy(report *r);

/* Feeds one row (recfile's row type; a CSV row is turned into the same shapes). Rows come in
 * time order, give or take; returns 0, or -1 when out of memory. */
int report_add(report *r, const recrow *row);

/* The end of the input: what only the whole run tells is settled (a job that failed with its card
 * full is taken as out of memory at that moment). Call once, after the last report_add. */
void report_finish(report *r);

/* Names damage or skipped input, to be shown with the report (may be called more than once). */
void report_damage(report *r, const char *text);

/* The report document; with_timeline adds the reduced series the HTML page draws. New reference;
 * NULL when out of memory. */
json_t *report_document(report *r, int with_timeline);

/* Prints the document as the plain-text summary. */
void report_print_text(FILE *f, const json_t *doc);

/* Reads a CSV file (docs/report.md) into r. Returns 0, or an exit status with err naming the
 * problem (no `time` column, no memory column, a line too long, unreadable file). Rows that cannot
 * be read (not a number, time going back) are skipped and named through report_damage. */
int report_read_csv(const char *path, FILE *f, report *r, char *err, size_t errlen);

/* Whether the first bytes of a file are SQLite's header (a recording) rather than text. */
int report_is_sqlite(const char *path);

#endif
