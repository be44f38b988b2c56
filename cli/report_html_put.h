/* SPDX-License-Identifier: MIT */
/* report_html_put.h — the writers the page of `gpumon report --html` is made with (report_html.c,
 * report_html_ranks.c): a member of the document read only when it has the type asked for, and
 * every string of the document written escaped, so that nothing in it is taken for markup. */
#ifndef GPUMON_REPORT_HTML_PUT_H
#define GPUMON_REPORT_HTML_PUT_H

#include <stdio.h>

#include <jansson.h>

/* o's member key: a string (NULL otherwise), a finite number (1 and *v, else 0), an object or an
 * array (NULL otherwise: null, missing, another type, or o not an object). */
const char *html_jstr(const json_t *o, const char *key);
int html_jnum(const json_t *o, const char *key, double *v);
const json_t *html_jobj(const json_t *o, const char *key);
const json_t *html_jarr(const json_t *o, const char *key);

/* raw as text: control characters shown escaped (as on the terminal), & < > " ' as entities, so it
 * is safe in an element and in a quoted attribute value. */
void html_text(FILE *f, const char *raw);

/* html_text of s, or n/a (styled as not available) when s is NULL. */
void html_text_or_na(FILE *f, const char *s);

/* printf of markup we write ourselves: numbers only, never a string of the document. */
void html_put(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* n/a, styled as not available. */
void html_na(FILE *f);

/* o's member key, seconds since the start, as <time data-t="402.5">6:42.5</time>; n/a when it is
 * not a number. */
void html_time(FILE *f, const json_t *o, const char *key);

/* o's member key, a byte figure, as <span class="bytes" data-bytes="...">1.50 GiB</span> in the
 * words every front end uses (words_bytes); n/a when it is not a number of 0 or more. */
void html_bytes(FILE *f, const json_t *o, const char *key);

/* The Ranks section (report_html_ranks.c): a distributed job's workers, their skew and hosts, and
 * the place the page's script draws them; nothing when the document has no ranks. */
void report_html_ranks(FILE *f, const json_t *doc);

#endif
