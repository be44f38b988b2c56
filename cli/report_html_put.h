/* SPDX-License-Identifier: MIT */
/* report_html_put.h — the writers the page of `gpumon report --html` is made with (report_html.c,
 * report_html_ranks.c): every string of the input written escaped, so that nothing in it is taken
 * for markup, and every figure the model does not know shown as n/a. */
#ifndef GPUMON_REPORT_HTML_PUT_H
#define GPUMON_REPORT_HTML_PUT_H

#include <stdint.h>
#include <stdio.h>

#include <gpumon/gpumon.h>

/* raw as text: control characters shown escaped (as on the terminal), & < > " ' as entities, so it
 * is safe in an element and in a quoted attribute value. */
void html_text(FILE *f, const char *raw);

/* html_text of s, or n/a (styled as not available) when s is NULL or "". */
void html_text_or_na(FILE *f, const char *s);

/* printf of markup we write ourselves: numbers only, never a string of the input. */
void html_put(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* n/a, styled as not available. */
void html_na(FILE *f);

/* Seconds since the start as <time data-t="402.5">6:42.5</time>. */
void html_time(FILE *f, double t);

/* A byte figure as <span class="bytes" data-bytes="...">1.50 GiB</span> in the words every front
 * end uses; n/a when it is not known. */
void html_bytes(FILE *f, int known, uint64_t v);

/* The Ranks section (report_html_ranks.c): a distributed job's workers, their skew and hosts, and
 * the place the page's script draws them; nothing when the model has no ranks. -1 when out of
 * memory. */
int report_html_ranks(FILE *f, const gpumon_model *m);

/* The model's document text (gpumon_model_document) written into the page's <script> element as it
 * is but for what the page needs (report_html_doc.c): < > & as \u escapes, reals at 12 digits,
 * and, unnamed (a CSV's), every "pid" null. */
void report_html_document(FILE *f, const char *text, int unnamed);

#endif
