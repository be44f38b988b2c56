/* SPDX-License-Identifier: MIT */
/* words_ranks.c — a distributed job in plain words (gpumon.h, "Words"): its hosts, and its ranks as
 * a table with what each held at the out-of-memory and the skew between them, from the model's
 * typed answers (gpumon_model_hosts, _ranks, _rank_skew, _oom_get). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

#include "words.h"

#define add gpumon__words_add

const char *gpumon_words_host(const gpumon_model *m, size_t i, char *buf, size_t len)
{
	size_t n = gpumon_model_hosts(m, NULL, 0), at = 0;
	gpumon_model_host *h = n ? calloc(n, sizeof *h) : NULL;
	char a[81], b[81];
	if (!len)
		return free(h), buf;
	buf[0] = 0;
	if (!h || i >= gpumon_model_hosts(m, h, n))
		return free(h), buf;
	const gpumon_model_host *x = &h[i];
	unsigned g0 = x->first_dev, g = x->ndev;
	add(buf, len, &at, "%s: GPU%s %u", x->name[0] ? gpumon_words_safe(x->name, a, sizeof a) : "an unnamed host",
	    g > 1 ? "s" : "", g0);
	if (g > 1)
		add(buf, len, &at, "-%u", g0 + g - 1);
	if (i == 0) {
		add(buf, len, &at, " (the clock of this report)");
		return free(h), buf;
	}
	add(buf, len, &at, "; its times moved by %+.3f s by the wall clocks of both hosts", (double)x->offset_ns / 1e9);
	if (x->steps > 0)
		add(buf, len, &at, "; checked by %u steps both reached: %+.3f s from %s's moments (median)", x->steps,
		    (double)x->step_skew_ns / 1e9, h[0].name[0] ? gpumon_words_safe(h[0].name, b, sizeof b) : "an unnamed host");
	else
		add(buf, len, &at, " (not checked: no steps reported on both)");
	free(h);
	return buf;
}

const char *gpumon_words_rank_verdict(const gpumon_rank_row *r, char *buf, size_t len)
{
	char a[32];
	const gpumon_leak_result *l = &r->verdict.leak;
	if (r->verdict.series == GPUMON_SERIES_NONE)
		snprintf(buf, len, "n/a");
	else if (l->verdict == GPUMON_LEAK_SUSPECTED)
		snprintf(buf, len, "LEAK +%s/s", gpumon__words_bytes_if(1, l->rate_bytes_per_second, a, sizeof a));
	else if (l->verdict == GPUMON_LEAK_NONE)
		snprintf(buf, len, "no leak");
	else
		snprintf(buf, len, "too short to tell");
	return buf;
}

const char *gpumon_words_rank_job(const gpumon_rank_row *first, char *buf, size_t len)
{
	char s[72];
	size_t at = 0;
	buf[0] = 0;
	add(buf, len, &at, "%s", gpumon_words_safe(first->rank.launcher, s, 20));
	if (first->rank.job_id[0])
		add(buf, len, &at, " job %s", gpumon_words_safe(first->rank.job_id, s, sizeof s));
	if (first->rank.world_size >= 0)
		add(buf, len, &at, ", world size %d", first->rank.world_size);
	return buf;
}

/* Appends line and '\n' to the growing text (*at bytes of *cap used); -1 when out of memory. */
static int line(char **text, size_t *at, size_t *cap, const char *l)
{
	size_t n = strlen(l);
	if (*at + n + 2 > *cap) {
		size_t c = (*cap ? *cap * 2 : 4096) + n;
		char *t = realloc(*text, c);
		if (!t)
			return -1;
		*text = t;
		*cap = c;
	}
	memcpy(*text + *at, l, n);
	(*text)[*at + n] = '\n';
	*at += n + 1;
	(*text)[*at] = 0;
	return 0;
}

/* The rows of the table (the heading, the column names, a row a worker, at most max_rows). */
static int rows(const gpumon_model *m, const gpumon_rank_row *r, size_t n, size_t max_rows, char **text,
		size_t *at, size_t *cap)
{
	char t[400], job[128], s[72];
	size_t nh = gpumon_model_hosts(m, NULL, 0);
	gpumon_model_host *h = calloc(nh ? nh : 1, sizeof *h);
	if (!h)
		return -1;
	nh = gpumon_model_hosts(m, h, nh);
	int many = nh > 1, bad = 0;
	snprintf(t, sizeof t, "ranks (%s): %zu worker%s seen", gpumon_words_rank_job(&r[0], job, sizeof job), n, n == 1 ? "" : "s");
	bad |= line(text, at, cap, t);
	snprintf(t, sizeof t, "  %4s %3s %8s %9s %9s %9s  %s%s", "RANK", "GPU", "PID", "PEAK", "MEAN", "FLOOR", "VERDICT",
		 many ? " (HOST)" : "");
	bad |= line(text, at, cap, t);
	for (size_t i = 0; i < n && !bad; i++) {
		if (i == max_rows) {
			snprintf(t, sizeof t, "  ... and %zu more (gpumon report --json lists them all)", n - max_rows);
			bad |= line(text, at, cap, t);
			break;
		}
		char a[32], b[32], c[32], v[48];
		snprintf(t, sizeof t, "  %4d %3u %8u %9s %9s %9s  %s%s", r[i].rank.rank, r[i].dev, r[i].pid,
			 gpumon__words_bytes_if(r[i].used_known, (double)r[i].peak_bytes, a, sizeof a),
			 gpumon__words_bytes_if(r[i].used_known, (double)r[i].mean_bytes, b, sizeof b),
			 gpumon__words_bytes_if(r[i].floor_known, (double)r[i].floor_bytes, c, sizeof c),
			 gpumon_words_rank_verdict(&r[i], v, sizeof v), r[i].oom ? " + OOM" : "");
		const char *host = many && r[i].host < nh ? h[r[i].host].name : "";
		if (host[0]) {
			size_t end = strlen(t);
			add(t, sizeof t, &end, " (%s)", gpumon_words_safe(host, s, 40));
		}
		bad |= line(text, at, cap, t);
	}
	free(h);
	return bad ? -1 : 0;
}

int gpumon_words_ranks(const gpumon_model *m, size_t max_rows, char **text)
{
	if (!m || !text)
		return GPUMON_E_INVAL;
	*text = NULL;
	size_t n = gpumon_model_ranks(m, NULL, 0), at = 0, cap = 0;
	if (!n)
		return GPUMON_OK;
	gpumon_rank_row *r = calloc(n, sizeof *r);
	if (!r)
		return GPUMON_E_NOMEM;
	n = gpumon_model_ranks(m, r, n);
	int bad = rows(m, r, n, max_rows, text, &at, &cap);
	/* what each rank held when one ran out: the others' share of the moment */
	gpumon_model_oom o;
	char t[400];
	if (!bad && gpumon_model_oom_get(m, &o) == GPUMON_OK) {
		size_t shown = 0, w = (size_t)snprintf(t, sizeof t, "  at the out-of-memory (%.2f s):",
						       gpumon_model_seconds(m, o.t_ns));
		for (size_t i = 0; i < n; i++) {
			char a[32];
			if (!r[i].at_oom_known || shown == 16)
				continue;
			add(t, sizeof t, &w, "%s rank %d %s%s", shown ? "," : "", r[i].rank.rank,
			    gpumon_words_bytes(r[i].at_oom_bytes, a, sizeof a), r[i].oom ? " (ran out)" : "");
			shown++;
		}
		if (shown == 16 && n > 16)
			add(t, sizeof t, &w, ", ...");
		if (shown)
			bad = line(text, &at, &cap, t);
	}
	gpumon_rank_skew k;
	if (!bad && gpumon_model_rank_skew(m, &k) == GPUMON_OK) {
		char lo[32], hi[32], d[32], mlo[32], mhi[32], md[32];
		snprintf(t, sizeof t, "  skew over %u ranks: peaks %s (rank %d) to %s (rank %d), %s apart; means %s (rank %d) "
			 "to %s (rank %d), %s apart",
			 k.ranks, gpumon_words_bytes(k.peak_min_bytes, lo, sizeof lo), k.peak_min_rank,
			 gpumon_words_bytes(k.peak_max_bytes, hi, sizeof hi), k.peak_max_rank,
			 gpumon_words_bytes(k.peak_max_bytes - k.peak_min_bytes, d, sizeof d),
			 gpumon_words_bytes(k.mean_min_bytes, mlo, sizeof mlo), k.mean_min_rank,
			 gpumon_words_bytes(k.mean_max_bytes, mhi, sizeof mhi), k.mean_max_rank,
			 gpumon_words_bytes(k.mean_max_bytes - k.mean_min_bytes, md, sizeof md));
		bad = line(text, &at, &cap, t);
	}
	free(r);
	if (bad) {
		free(*text);
		*text = NULL;
		return GPUMON_E_NOMEM;
	}
	return GPUMON_OK;
}
