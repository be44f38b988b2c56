/* SPDX-License-Identifier: MIT */
/* report_html_put.c — the writers the page of `gpumon report --html` is made with: text, times and
 * byte figures written as escaped HTML, "n/a" where the model has no value (report_html_put.h). */
#include "report_html_put.h"

#include <stdarg.h>
#include <stdlib.h>

#include "cli.h"

/* A time since the start of the run as the charts' axis shows it: "0:35.2", "13:31.9", "1:02:03". */
static const char *fmt_clock(char *buf, size_t len, double s)
{
	const char *sign = s < 0 ? "-" : "";
	s = s < 0 ? -s : s;
	if (s >= 3600.0) {
		long long t = (long long)(s + 0.5);
		snprintf(buf, len, "%s%lld:%02lld:%02lld", sign, t / 3600, t / 60 % 60, t % 60);
	} else {
		long long m = (long long)(s / 60.0);
		double sec = s - 60.0 * (double)m;
		if (sec >= 59.95) { /* would print as 60.0 */
			m++;
			sec = 0;
		}
		snprintf(buf, len, "%s%lld:%04.1f", sign, m, sec);
	}
	return buf;
}

/* Text with the characters that mean something in HTML (also inside attribute values) escaped.
 * Control characters and bytes that are not UTF-8 (a command line, a job's message) are shown
 * escaped first, as on the terminal (cli_safe_text); the rest, UTF-8 included, goes out as it is:
 * the page declares UTF-8. */
void html_text(FILE *f, const char *raw)
{
	char *safe = cli_safe_text_dup(raw);
	if (!safe) {
		fputs("(out of memory)", f);
		return;
	}
	for (const char *s = safe; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: putc(*s, f);
		}
	}
	free(safe);
}

/* html_text of a member that may be missing: "n/a" in a span the page styles as not available. */
void html_text_or_na(FILE *f, const char *s)
{
	if (s && s[0])
		html_text(f, s);
	else
		fputs("<span class=\"na\">n/a</span>", f);
}

/* printf of markup we write ourselves; numbers only, never strings of the input (those go through
 * html_text). */
void html_put(FILE *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
}

void html_na(FILE *f)
{
	fputs("<span class=\"na\">n/a</span>", f);
}

/* A time mark: <time data-t="402.5">6:42.5</time>. */
void html_time(FILE *f, double t)
{
	char b[48];
	html_put(f, "<time data-t=\"%.10g\">%s</time>", t, fmt_clock(b, sizeof b, t));
}

void html_bytes(FILE *f, int known, uint64_t v)
{
	char b[48];
	if (known)
		html_put(f, "<span class=\"bytes\" data-bytes=\"%.17g\">%s</span>", (double)v,
			 cli_format_bytes(b, sizeof b, v));
	else
		html_na(f);
}
