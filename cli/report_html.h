/* SPDX-License-Identifier: MIT */
/* report_html.h — the page of `gpumon report --html OUT`: one self-contained HTML file with the
 * report's summary and its interactive timelines (docs/report-html.md). */
#ifndef GPUMON_REPORT_HTML_H
#define GPUMON_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/*
 * Writes the report document doc (the JSON of `gpumon report --json`, plus its "timeline"; see
 * docs/report-html.md) to out as one HTML page that loads nothing from the network or from other
 * files: the summary as plain HTML, then the timelines drawn in the browser by the embedded chart
 * library from a copy of doc embedded in the page. Every string of doc is escaped, so a command
 * line holding markup shows as text; a value that is null or missing is shown as "n/a", never as 0.
 * doc is only read; out is flushed (to catch write errors) but not closed.
 * Returns 0, or -1 with one sentence in err (errlen bytes, always NUL-terminated) when doc is not a
 * JSON object or writing to out failed.
 */
int report_html_write(FILE *out, const json_t *doc, char *err, size_t errlen);

#endif
