/* SPDX-License-Identifier: MIT */
/* report_html_ranks.c — the Ranks section of the `gpumon report --html` page: a distributed job's
 * workers (gpumon_model_ranks) in a table worded as the text report's rank table (the library's
 * gpumon_words_rank_*), the skew between their peaks and means, the hosts when several nodes'
 * recordings were read together, and the place where the page's script draws each rank's memory
 * over time. */
#include <stdlib.h>
#include <string.h>

#include "report_html_put.h"

/* One worker: rank, host (when several), GPU, pid, its figure's peak, mean and latest, its verdict,
 * and whether it is the one that ran out of memory. */
static void put_rank_row(FILE *f, const gpumon_rank_row *r, const gpumon_model_host *hosts, size_t nhosts)
{
	int judged = r->verdict.series != GPUMON_SERIES_NONE;
	const char *verdict = judged ? gpumon_leak_verdict_name(r->verdict.leak.verdict) : NULL;
	char w[64];

	html_put(f, "<tr data-rank=\"%d\" data-verdict=\"", r->rank.rank);
	html_text(f, verdict ? verdict : "n/a");
	fputs(r->oom ? "\" data-oom=\"true\" class=\"oom-rank\">" : "\">", f);
	html_put(f, "<td class=\"num\">%d</td>", r->rank.rank);
	if (nhosts > 1) {
		const gpumon_model_host *h = r->host < nhosts ? &hosts[r->host] : NULL;
		fputs("<td>", f);
		html_text_or_na(f, h ? h->name : NULL);
		fputs("</td>", f);
	}
	html_put(f, "<td class=\"num\">%u</td><td class=\"num\">%u</td>", r->dev, r->pid);
	const uint64_t bytes[] = {r->peak_bytes, r->mean_bytes, r->last_bytes};
	for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++) {
		fputs("<td class=\"num\">", f);
		html_bytes(f, r->used_known, bytes[i]);
		fputs("</td>", f);
	}
	fputs(verdict && r->verdict.leak.verdict == GPUMON_LEAK_SUSPECTED ? "<td class=\"verdict bad\">"
									  : "<td class=\"verdict\">",
	      f);
	if (verdict)
		html_text(f, gpumon_words_rank_verdict(r, w, sizeof w));
	else
		html_na(f);
	fputs(r->oom ? "</td><td class=\"oom bad\">ran out of memory</td></tr>\n" : "</td><td></td></tr>\n", f);
}

/* How far the ranks drift apart, as the text report says it, with the page's byte figures. */
static void put_skew(FILE *f, const gpumon_model *m)
{
	gpumon_rank_skew k;
	if (gpumon_model_rank_skew(m, &k) != GPUMON_OK)
		return;
	html_put(f, "<p id=\"rank-skew\">Skew over %u ranks: ", k.ranks);
	const char *what[] = {"peak", "mean"};
	const uint64_t lo[] = {k.peak_min_bytes, k.mean_min_bytes}, hi[] = {k.peak_max_bytes, k.mean_max_bytes};
	const int lo_rank[] = {k.peak_min_rank, k.mean_min_rank}, hi_rank[] = {k.peak_max_rank, k.mean_max_rank};
	for (size_t i = 0; i < 2; i++) {
		html_put(f, "%ss ", what[i]);
		html_bytes(f, 1, lo[i]); /* "A (rank a) to B (rank b), " */
		html_put(f, " (rank %d) to ", lo_rank[i]);
		html_bytes(f, 1, hi[i]);
		html_put(f, " (rank %d), ", hi_rank[i]);
		html_bytes(f, 1, hi[i] - lo[i]);
		fputs(i ? " apart.</p>\n" : " apart; ", f);
	}
}

/* Several nodes' recordings of one job read together: each host with its GPUs and how its clock was
 * put beside the first's, in the text report's words (gpumon_words_host). */
static void put_hosts(FILE *f, const gpumon_model *m, size_t n)
{
	char w[512];
	if (n < 2)
		return;
	html_put(f, "<div id=\"hosts\"><h3>Hosts (%zu)</h3>\n<ul class=\"notes\">\n", n);
	for (size_t i = 0; i < n; i++) {
		html_put(f, "<li data-host=\"%zu\">", i);
		html_text(f, gpumon_words_host(m, i, w, sizeof w));
		fputs("</li>\n", f);
	}
	fputs("</ul></div>\n", f);
}

int report_html_ranks(FILE *f, const gpumon_model *m)
{
	size_t n = gpumon_model_ranks(m, NULL, 0), nh = gpumon_model_hosts(m, NULL, 0);
	char w[160];
	if (!n)
		return 0;
	gpumon_rank_row *rows = calloc(n, sizeof *rows);
	gpumon_model_host *hosts = calloc(nh ? nh : 1, sizeof *hosts);
	if (!rows || !hosts) {
		free(rows);
		free(hosts);
		return -1;
	}
	n = gpumon_model_ranks(m, rows, n);
	nh = gpumon_model_hosts(m, hosts, nh);
	fputs("<section id=\"ranks\">\n<h2>Ranks <span class=\"dim\">(", f);
	html_text(f, gpumon_words_rank_job(&rows[0], w, sizeof w));
	html_put(f,
		 ")</span></h2>\n<p id=\"ranks-seen\">%zu worker%s seen; each one's memory as NVML listed its process: its "
		 "peak, its mean over the time it was listed, its latest figure and the verdict on it.</p>\n",
		 n, n == 1 ? "" : "s");
	put_hosts(f, m, nh);
	fputs("<div class=\"scroll\"><table id=\"rank-table\">\n<tr><th class=\"num\">rank</th>", f);
	if (nh > 1)
		fputs("<th>host</th>", f);
	fputs("<th class=\"num\">GPU</th><th class=\"num\">pid</th><th class=\"num\">peak</th><th class=\"num\">mean</th>"
	      "<th class=\"num\">latest</th><th>verdict</th><th></th></tr>\n",
	      f);
	for (size_t i = 0; i < n; i++)
		put_rank_row(f, &rows[i], hosts, nh);
	fputs("</table></div>\n", f);
	put_skew(f, m);
	/* report_html.js draws each rank's memory over time here */
	fputs("<div id=\"rank-chart\"></div>\n</section>\n", f);
	free(rows);
	free(hosts);
	return 0;
}
