/* SPDX-License-Identifier: MIT */
/* report_html.h — the page of `gpumon report --html OUT`: one self-contained HTML file with the
 * report's summary and its interactive timelines (docs/report-html.md). */
#ifndef GPUMON_REPORT_HTML_H
#define GPUMON_REPORT_HTML_H

#include <stddef.h>
#include <stdio.h>

#include <gpumon/gpumon.h>

/*
 * Writes the run model m to out as one HTML page that loads nothing from the network or from other
 * files: the summary as plain HTML, from the model's typed answers in the library's words, then the
 * timelines drawn in the browser by the embedded chart library from doc_text, the model's document
 * with its timeline (gpumon_model_document with GPUMON_DOC_TIMELINE), embedded as it is. Every
 * string of the input is escaped, so a command line holding markup shows as text; a figure the
 * model does not know is shown as "n/a", never as 0. m and doc_text are only read; out is flushed
 * (to catch write errors) but not closed.
 * Returns 0, or -1 with one sentence in err (errlen bytes, always NUL-terminated) when writing to out
 * failed or memory ran out.
 */
int report_html_write(FILE *out, const gpumon_model *m, const char *doc_text, char *err, size_t errlen);

#endif
