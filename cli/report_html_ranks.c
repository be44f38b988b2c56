/* SPDX-License-Identifier: MIT */
/* report_html_ranks.c — the Ranks section of the `gpumon report --html` page: a distributed job's
 * workers (the document's ranks[]) in a table worded as the text report's rank table (words.c), the
 * skew between their peaks and means, the hosts when several nodes' recordings were read together,
 * and the place where the page's script draws each rank's memory over time. */
#include <string.h>

#include "report_html_put.h"
#include "words.h"

/* A cell of a whole number, or n/a. */
static void put_num_cell(FILE *f, const json_t *o, const char *key)
{
	double v;
	fputs("<td class=\"num\">", f);
	if (html_jnum(o, key, &v))
		html_put(f, "%.0f", v);
	else
		html_na(f);
	fputs("</td>", f);
}

/* One worker: rank, host (when several), GPU, pid, its figure's peak, mean and latest, its verdict,
 * and whether it is the one that ran out of memory. */
static void put_rank_row(FILE *f, const json_t *r, const json_t *hosts)
{
	const json_t *leak = html_jobj(r, "leak");
	const char *verdict = html_jstr(leak, "verdict");
	int oom = json_is_true(json_object_get(r, "oom"));
	double v;
	char w[64];

	fputs("<tr", f);
	if (html_jnum(r, "rank", &v))
		html_put(f, " data-rank=\"%.0f\"", v);
	fputs(" data-verdict=\"", f);
	html_text(f, verdict ? verdict : "n/a");
	fputs(oom ? "\" data-oom=\"true\" class=\"oom-rank\">" : "\">", f);
	put_num_cell(f, r, "rank");
	if (json_array_size(hosts) > 1) { /* its host by its number in hosts[] */
		const json_t *h = html_jnum(r, "host", &v) && v >= 0 ? json_array_get(hosts, (size_t)v) : NULL;
		fputs("<td>", f);
		html_text_or_na(f, html_jstr(h, "name"));
		fputs("</td>", f);
	}
	put_num_cell(f, r, "dev");
	put_num_cell(f, r, "pid");
	const char *bytes[] = {"peak_bytes", "mean_bytes", "last_bytes"};
	for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++) {
		fputs("<td class=\"num\">", f);
		html_bytes(f, r, bytes[i]);
		fputs("</td>", f);
	}
	fputs(verdict && !strcmp(verdict, "leak") ? "<td class=\"verdict bad\">" : "<td class=\"verdict\">", f);
	if (verdict)
		html_text(f, words_rank_verdict(w, sizeof w, leak));
	else
		html_na(f);
	fputs(oom ? "</td><td class=\"oom bad\">ran out of memory</td></tr>\n" : "</td><td></td></tr>\n", f);
}

/* How far the ranks drift apart, as the text report says it (words_ranks), with the page's byte
 * figures. */
static void put_skew(FILE *f, const json_t *k)
{
	double v;
	if (!k)
		return;
	fputs("<p id=\"rank-skew\">Skew over ", f);
	if (html_jnum(k, "ranks", &v))
		html_put(f, "%.0f", v);
	else
		html_na(f);
	fputs(" ranks: ", f);
	const char *what[] = {"peak", "mean"};
	for (size_t i = 0; i < 2; i++) {
		char key[32];
		html_put(f, "%ss ", what[i]);
		for (int end = 0; end < 2; end++) { /* "A (rank a) to B (rank b), " */
			snprintf(key, sizeof key, "%s_%s_bytes", what[i], end ? "max" : "min");
			html_bytes(f, k, key);
			snprintf(key, sizeof key, "%s_%s_rank", what[i], end ? "max" : "min");
			if (html_jnum(k, key, &v))
				html_put(f, " (rank %.0f)", v);
			fputs(end ? ", " : " to ", f);
		}
		snprintf(key, sizeof key, "%s_skew_bytes", what[i]);
		html_bytes(f, k, key);
		fputs(i ? " apart.</p>\n" : " apart; ", f);
	}
}

/* Several nodes' recordings of one job read together: each host with its GPUs and how its clock was
 * put beside the first's, in the text report's words (words_host). */
static void put_hosts(FILE *f, const json_t *hosts)
{
	char w[512];
	size_t n = json_array_size(hosts);
	if (n < 2)
		return;
	html_put(f, "<div id=\"hosts\"><h3>Hosts (%zu)</h3>\n<ul class=\"notes\">\n", n);
	for (size_t i = 0; i < n; i++) {
		html_put(f, "<li data-host=\"%zu\">", i);
		html_text(f, words_host(w, sizeof w, hosts, i));
		fputs("</li>\n", f);
	}
	fputs("</ul></div>\n", f);
}

void report_html_ranks(FILE *f, const json_t *doc)
{
	const json_t *ranks = html_jarr(doc, "ranks"), *hosts = html_jarr(doc, "hosts"), *r;
	size_t n = json_array_size(ranks), i;
	char w[160];
	if (!n)
		return;
	fputs("<section id=\"ranks\">\n<h2>Ranks <span class=\"dim\">(", f);
	html_text(f, words_rank_job(w, sizeof w, doc));
	html_put(f,
		 ")</span></h2>\n<p id=\"ranks-seen\">%zu worker%s seen; each one's memory as NVML listed its process: its "
		 "peak, its mean over the time it was listed, its latest figure and the verdict on it.</p>\n",
		 n, n == 1 ? "" : "s");
	put_hosts(f, hosts);
	fputs("<div class=\"scroll\"><table id=\"rank-table\">\n<tr><th class=\"num\">rank</th>", f);
	if (json_array_size(hosts) > 1)
		fputs("<th>host</th>", f);
	fputs("<th class=\"num\">GPU</th><th class=\"num\">pid</th><th class=\"num\">peak</th><th class=\"num\">mean</th>"
	      "<th class=\"num\">latest</th><th>verdict</th><th></th></tr>\n",
	      f);
	json_array_foreach(ranks, i, r) put_rank_row(f, r, hosts);
	fputs("</table></div>\n", f);
	put_skew(f, html_jobj(doc, "rank_skew"));
	/* report_html.js draws each rank's memory over time here */
	fputs("<div id=\"rank-chart\"></div>\n</section>\n", f);
}
