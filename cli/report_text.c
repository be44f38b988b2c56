/* SPDX-License-Identifier: MIT */
/* report_text.c — the plain-text summary of `gpumon report`, worded by the library (gpumon_words_*)
 * from the run model's typed answers, the same the JSON document is made of, so that the text, the
 * JSON and the HTML page say one answer. Nothing here decides.
 * Every string of the file (commands, users, names, messages) is printed escaped (cli_safe_text). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"

/* Escaped text of a file: room for 600 bytes each written as an escape. */
#define SAFE_MAX 2400

/* s escaped and cut to max bytes (at most SAFE_MAX - 1). */
static const char *safe_str(char *buf, size_t max, const char *s)
{
	return cli_safe_text(buf, max + 1 < SAFE_MAX ? max + 1 : SAFE_MAX, s);
}

static const char *bytes_if(char *buf, size_t len, int known, uint64_t v)
{
	if (!known) {
		snprintf(buf, len, "n/a");
		return buf;
	}
	return gpumon_words_bytes(v, buf, len);
}

static double secs(const gpumon_model *m, uint64_t t_ns)
{
	return gpumon_model_seconds(m, t_ns);
}

static void print_source(FILE *f, const gpumon_model_source *s)
{
	char a[SAFE_MAX], b[SAFE_MAX], c[SAFE_MAX];
	const char *type = safe_str(a, 40, s->type), *kind = s->kind ? safe_str(b, 40, s->kind) : NULL;
	int csv = !strcmp(type, "csv");
	fprintf(f, "Report of %s (%s", s->path ? safe_str(c, SAFE_MAX, s->path) : "n/a", csv ? "CSV" : type);
	if (kind && (!strcmp(type, "recording") || !strcmp(type, "live"))) /* not a tool's file */
		fprintf(f, " of gpumon %s", kind);
	fprintf(f, ")\n");
	if (s->command)
		fprintf(f, "Command:        %s\n", safe_str(a, SAFE_MAX, s->command));
	if (s->host)
		fprintf(f, "Host:           %s\n", safe_str(a, 255, s->host));
	if (s->start_utc[0])
		fprintf(f, "Started:        %s\n", safe_str(a, 40, s->start_utc));
	if (s->duration_known)
		fprintf(f, "Duration:       %.1f s\n", s->duration_s);
	if (s->exit_status >= 0)
		fprintf(f, "Exit status:    %d\n", s->exit_status);
}

/* Recordings of one job's nodes read together: each host with its GPUs, and how its clock was put
 * beside the first's. */
static void print_hosts(FILE *f, const gpumon_model *m)
{
	char w[512];
	size_t n = gpumon_model_hosts(m, NULL, 0);
	for (size_t i = 0; n > 1 && i < n; i++)
		fprintf(f, "%s%s\n", i ? "                " : "Hosts:          ", gpumon_words_host(m, i, w, sizeof w));
}

/* Whether e is a stale or answering event that names no GPU. */
static int unnamed_gpu_event(const gpumon_model_event *e)
{
	return e->dev < 0 && e->kind && (!strcmp(e->kind, GPUMON_EVENT_STALE) || !strcmp(e->kind, GPUMON_EVENT_ANSWERING));
}

/* The events that name GPU dev (a driver call on it that hung, its return, an Xid), one a line
 * under it; dev -1: the stale and answering events that name no GPU (a recording made before
 * events kept theirs), under "GPU n/a". */
static void print_gpu_events(FILE *f, const gpumon_model *m, int dev)
{
	gpumon_model_event e = {.size = sizeof e};
	char t[SAFE_MAX];
	for (size_t i = 0; gpumon_model_event_get(m, i, &e) == GPUMON_OK; i++)
		if (dev >= 0 ? e.dev == dev : unnamed_gpu_event(&e))
			fprintf(f, "  %.1f s: %s\n", secs(m, e.t_ns), e.text ? safe_str(t, 300, e.text) : safe_str(t, 40, e.kind));
}

/* ", the rise of <who>" when the peak names whose rise made it. */
static void print_rise(FILE *f, const gpumon_model *m, const gpumon_peak *p)
{
	char w[640];
	if (p->owner_pid >= 0)
		fprintf(f, ", the rise of %s", gpumon_words_who(m, -1, p->owner_pid, w, sizeof w));
}

/* A GPU: its name and total, then what the run did on it. */
static void print_device(FILE *f, const gpumon_model *m, const gpumon_model_gpu *d)
{
	char a[32], b[32], c[32], name[SAFE_MAX];
	fprintf(f, "GPU %u:          %s%s%s%s\n", d->dev, d->name[0] ? safe_str(name, 95, d->name) : "",
		d->name[0] ? ", " : "", bytes_if(a, sizeof a, d->total_bytes > 0, d->total_bytes), d->lost ? ", LOST" : "");
	if (d->lost && d->lost_t_ns)
		fprintf(f, "  lost at %.1f s: it fell off the bus or needs a reset; nothing of it was read after that\n",
			secs(m, d->lost_t_ns));
	else if (d->lost)
		fprintf(f, "  lost: it fell off the bus or needs a reset; nothing of it was read after that\n");
	if (d->peak_known) {
		fprintf(f, "  used at most %s at %.1f s", gpumon_words_bytes(d->peak.bytes, a, sizeof a), secs(m, d->peak.t_ns));
		print_rise(f, m, &d->peak);
		fprintf(f, "\n");
	}
	if (d->job_peak_known)
		fprintf(f, "  the job at most %s at %.1f s, %s on average\n", gpumon_words_bytes(d->job_peak.bytes, a, sizeof a),
			secs(m, d->job_peak.t_ns), bytes_if(b, sizeof b, d->job_mean_known, d->job_mean_bytes));
	if (d->job_peak_known && d->others_peak_bytes > 0)
		fprintf(f, "  the other processes %s at the job's peak, at most %s together\n",
			bytes_if(c, sizeof c, d->job_known, d->others_at_job_peak_bytes),
			gpumon_words_bytes(d->others_peak_bytes, a, sizeof a));
	print_gpu_events(f, m, (int)d->dev);
}

/* Whether any stale or answering event names no GPU. */
static int gpu_events_unnamed(const gpumon_model *m)
{
	gpumon_model_event e = {.size = sizeof e};
	for (size_t i = 0; gpumon_model_event_get(m, i, &e) == GPUMON_OK; i++)
		if (unnamed_gpu_event(&e))
			return 1;
	return 0;
}

/* The run's verdict, and every series judged when there are several (a restarted step counter's
 * segments each among them). */
static void print_leak(FILE *f, const gpumon_model *m)
{
	char w[1024];
	gpumon_verdict v;
	if (gpumon_model_verdict(m, &v) == GPUMON_OK)
		fprintf(f, "Leak:           %s\n", gpumon_words_verdict(m, &v, -1, w, sizeof w));
	else
		fprintf(f, "Leak:           n/a (no memory series)\n");
	size_t n = gpumon_model_verdicts(m, NULL, 0);
	gpumon_verdict *all = n > 1 ? calloc(n, sizeof *all) : NULL;
	if (!all)
		return;
	n = gpumon_model_verdicts(m, all, n);
	fprintf(f, "Series judged:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %s\n", gpumon_words_verdict(m, &all[i], -1, w, sizeof w));
	free(all);
}

static void print_peak(FILE *f, const gpumon_model *m, int what, int dev, const gpumon_peak *p)
{
	char a[32], w[640], kind[96];
	fprintf(f, "Peak:           ");
	if (!p) {
		fprintf(f, "n/a (no memory figures)\n");
		return;
	}
	fprintf(f, "%s of %s at %.1f s", gpumon_words_bytes(p->bytes, a, sizeof a),
		gpumon_words_peak_what(what, dev, kind, sizeof kind), secs(m, p->t_ns));
	print_rise(f, m, p);
	if (p->largest_pid >= 0 && p->largest_pid != p->owner_pid)
		fprintf(f, "; the largest holder then %s", gpumon_words_who(m, -1, p->largest_pid, w, sizeof w));
	fprintf(f, "\n");
}

/* ", pid N", ", the process" (a CSV's), or "" when the figure names no process. */
static const char *whose(char *buf, size_t len, const gpumon_model_figure *x, int named)
{
	buf[0] = 0;
	if (x->pid >= 0 && named)
		snprintf(buf, len, ", pid %lld", (long long)x->pid);
	else if (!named)
		snprintf(buf, len, ", the process");
	return buf;
}

static void print_memory(FILE *f, const gpumon_model *m, int named)
{
	char a[32], b[48];
	gpumon_model_figure fr, un;
	gpumon_model_memory(m, &fr, &un);
	if (fr.known)
		fprintf(f, "Fragmentation:  at most %s reserved but not allocated (at %.1f s%s)\n",
			gpumon_words_bytes(fr.bytes, a, sizeof a), secs(m, fr.t_ns), whose(b, sizeof b, &fr, named));
	else
		fprintf(f, "Fragmentation:  n/a (needs the framework's allocated and reserved figures)\n");
	gpumon_model_framework fw = {.size = sizeof fw};
	const char *why = NULL;
	for (size_t i = 0; gpumon_model_framework_get(m, i, &fw) == GPUMON_OK; i++) {
		char w[400], name[24];
		if (!why)
			why = gpumon_words_unaccounted_why(fw.unaccounted_why);
		if (!fw.placed_known)
			continue;
		char who[48] = "the process"; /* a CSV names none */
		if (named)
			snprintf(who, sizeof who, "pid %u", fw.pid);
		fprintf(f, "Placed:         %s (%s) at %.1f s", who, fw.framework[0] ? cli_safe_text(name, sizeof name, fw.framework) : "n/a",
			secs(m, fw.placed.t_ns));
		if (fw.placed.step >= 0)
			fprintf(f, ", step %lld", (long long)fw.placed.step);
		fprintf(f, ": %s\n", gpumon_words_placed(&fw.placed, w, sizeof w));
	}
	if (un.known)
		fprintf(f, "Unaccounted:    at most %s held outside the allocator (NVML - reserved; at %.1f s%s)\n",
			gpumon_words_bytes(un.bytes, a, sizeof a), secs(m, un.t_ns), whose(b, sizeof b, &un, named));
	else
		fprintf(f, "Unaccounted:    n/a (%s)\n",
			why ? why : "needs the framework's reserved figure and the process's NVML figure");
}

static void print_windows(FILE *f, const gpumon_model *m, const gpumon_peak *win, size_t n)
{
	char a[32];
	for (size_t i = 0; i < n; i++) {
		if (i == 0)
			fprintf(f, "Peaks by window:\n");
		fprintf(f, "  %8.1f-%-8.1f s %10s at %.1f s", secs(m, win[i].start_t_ns), secs(m, win[i].end_t_ns),
			gpumon_words_bytes(win[i].bytes, a, sizeof a), secs(m, win[i].t_ns));
		print_rise(f, m, &win[i]);
		fprintf(f, "\n");
	}
}

/* What held the memory, from the allocator's snapshot: its figures and every allocation site. */
static void print_snapshot(FILE *f, const gpumon_alloc_snapshot *snap)
{
	char a[32], w[2048];
	fprintf(f, "  what held the memory: %s\n", gpumon_words_snapshot(snap, w, sizeof w));
	for (unsigned k = 0; k < snap->nsites && k < GPUMON_SNAPSHOT_SITES; k++) {
		if (k == 0)
			fprintf(f, "  live memory by allocation site:\n");
		fprintf(f, "    %s\n", gpumon_words_site(&snap->sites[k], w, sizeof w));
	}
	if (!(snap->known & GPUMON_SNAP_STACKS))
		fprintf(f, "  (no allocation sites: the allocator kept no stacks; gpumon run --history keeps them)\n");
	else if (snap->unsited_bytes > 0)
		fprintf(f, "    and %s allocated before the stacks were kept\n", gpumon_words_bytes(snap->unsited_bytes, a, sizeof a));
}

static void print_oom(FILE *f, const gpumon_model *m, const gpumon_model_oom *o, int named)
{
	char a[32], w[2048], u[SAFE_MAX], c[SAFE_MAX];
	fprintf(f, "Out of memory:  at %.1f s", secs(m, o->t_ns));
	if (o->dev >= 0)
		fprintf(f, " on GPU %d", o->dev);
	if (o->rank >= 0) /* a distributed job: which rank ran out first */
		fprintf(f, " (rank %d)", o->rank);
	char causes[160];
	fprintf(f, ": %s\n  %s\n", gpumon_words_causes(o, causes, sizeof causes), gpumon_words_oom(m, o, w, sizeof w));
	if (gpumon_words_said(m, o, w, sizeof w)[0])
		fprintf(f, "  the framework said: %s\n", w);
	if (o->input.known & GPUMON_OOM_F_SNAPSHOT)
		print_snapshot(f, &o->input.snapshot);
	if (o->message[0])
		fprintf(f, "  message: %s\n", safe_str(c, 300, o->message));
	else /* the model's rule: a job that failed with its GPU full ran out of memory then */
		fprintf(f, "  (no message was seen: the job failed with its GPU 99 %% full or more)\n");
	for (size_t i = 0; i < o->nholders && i < 16; i++) {
		const gpumon_holder *h = &o->holders[i];
		if (i == 0)
			fprintf(f, "  who held what:\n");
		if (named)
			fprintf(f, "    %-11u", h->pid);
		else
			fprintf(f, "    %-11s", "the process");
		gpumon_model_who who = {.size = sizeof who};
		gpumon_model_who_get(m, o->dev, h->pid, &who);
		char owner[200], job[32];
		gpumon_words_owner(who.owner, owner, sizeof owner);
		fprintf(f, " %-10s %10s %-4s %s%s%s\n", h->user[0] ? safe_str(u, 10, h->user) : "n/a",
			bytes_if(a, sizeof a, h->used_known, h->used_bytes), gpumon_words_holder_job(h, "job", "", job, sizeof job),
			h->command[0] ? safe_str(c, 60, h->command) : "", owner[0] ? "  " : "", owner);
	}
	for (size_t i = 0; i < o->nlast && i < 16; i++) {
		if (i == 0)
			fprintf(f, "  the last seconds (used):");
		fprintf(f, " %.1fs %s", secs(m, o->last[i].t_ns), gpumon_words_bytes(o->last[i].used_bytes, a, sizeof a));
	}
	if (o->nlast)
		fprintf(f, "\n");
}

static void print_alerts(FILE *f, const gpumon_model *m)
{
	size_t n = gpumon_words_told(m, NULL, 0);
	gpumon_told *list = n ? calloc(n, sizeof *list) : NULL;
	char t[SAFE_MAX];
	if (n && !list) {
		fprintf(f, "Alerts:         n/a (out of memory)\n");
		return;
	}
	n = gpumon_words_told(m, list, n);
	for (size_t i = 0; i < n; i++) {
		const gpumon_told *x = &list[i];
		if (i == 0)
			fprintf(f, "Alerts:\n");
		fprintf(f, "  %.1f s: ", x->time_s);
		/* the texts of "oom" and "alert" events are the file's: a job's message, escaped */
		if (x->kind == GPUMON_TOLD_LEAK)
			fprintf(f, "leak: %s%s\n", safe_str(t, SAFE_MAX, x->text), x->live ? " (given live)" : "");
		else if (x->kind == GPUMON_TOLD_OOM)
			fprintf(f, "out of memory: %s\n", safe_str(t, 300, x->text));
		else if (x->kind == GPUMON_TOLD_HEADROOM)
			fprintf(f, "%s\n", safe_str(t, SAFE_MAX, x->text));
		else
			fprintf(f, "%s (given live)\n", safe_str(t, 300, x->text));
	}
	free(list);
}

/* The notes of the input (how a log's GPUs were told apart, a period assumed, what gpumon run did
 * to the job), one a line with its time: the texts are the file's, escaped. */
static void print_notes(FILE *f, const gpumon_model *m)
{
	gpumon_model_event e = {.size = sizeof e};
	size_t k = 0;
	char t[SAFE_MAX];
	for (size_t i = 0; gpumon_model_event_get(m, i, &e) == GPUMON_OK; i++) {
		if (!e.kind || strcmp(e.kind, "note"))
			continue;
		if (k++ == 0)
			fprintf(f, "Notes:\n");
		fprintf(f, "  %.1f s: %s\n", secs(m, e.t_ns), safe_str(t, SAFE_MAX, e.text));
	}
}

/* The lines of text (each ended by '\n') under indent. */
static void put_lines(FILE *f, const char *text)
{
	if (text)
		fputs(text, f);
}

void report_print_text(FILE *f, const gpumon_model *m)
{
	gpumon_model_source s = {.size = sizeof s};
	if (gpumon_model_source_get(m, &s) != GPUMON_OK) {
		fprintf(f, "(out of memory)\n");
		return;
	}
	print_source(f, &s);
	print_hosts(f, m);
	gpumon_model_gpu d = {.size = sizeof d};
	for (size_t i = 0; gpumon_model_gpu_get(m, i, &d) == GPUMON_OK; i++)
		print_device(f, m, &d);
	if (gpu_events_unnamed(m)) {
		fprintf(f, "GPU n/a:        the recording did not keep which GPU these were about\n");
		print_gpu_events(f, m, -1);
	}
	print_leak(f, m);
	gpumon_peak p, win[64];
	int what, dev;
	size_t nwin = 0;
	int have = gpumon_model_peak(m, &what, &dev, &p, win, 64, &nwin) == GPUMON_OK;
	print_peak(f, m, what, dev, have ? &p : NULL);
	print_memory(f, m, s.names_processes);
	print_windows(f, m, win, have ? (nwin < 64 ? nwin : 64) : 0);
	char *ranks = NULL;
	gpumon_words_ranks(m, 64, &ranks);
	put_lines(f, ranks);
	gpumon_free(ranks);
	gpumon_model_oom o;
	if (gpumon_model_oom_get(m, &o) == GPUMON_OK)
		print_oom(f, m, &o, s.names_processes);
	print_alerts(f, m);
	print_notes(f, m);
	char *damage = NULL;
	gpumon_model_damage_get(m, &damage);
	if (damage) { /* it quotes what could not be read */
		char *t = cli_safe_text_dup(damage);
		fprintf(f, "Not read:       %s\n", t ? t : "(out of memory)");
		free(t);
	}
	gpumon_free(damage);
}
