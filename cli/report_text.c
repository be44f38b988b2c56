/* SPDX-License-Identifier: MIT */
/* report_text.c — the plain-text summary of `gpumon report`, worded (words.c) from the run model's
 * document, so that the text, the JSON and the HTML page say one answer. Nothing here decides.
 * Every string of the file (commands, users, names, messages) is printed escaped (cli_safe_text). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"
#include "words.h"

/* Escaped text of a file: room for 600 bytes each written as an escape. */
#define SAFE_MAX 2400

/* o's string at key, escaped and cut to max bytes (at most SAFE_MAX - 1), or NULL. */
static const char *safe_str(char *buf, size_t max, const json_t *o, const char *key)
{
	const char *s = doc_str(o, key);
	return s ? cli_safe_text(buf, max + 1 < SAFE_MAX ? max + 1 : SAFE_MAX, s) : NULL;
}

static const char *bytes(char *buf, size_t len, const json_t *o, const char *key)
{
	return words_bytes(buf, len, json_object_get(o, key));
}

static void print_source(FILE *f, const json_t *s)
{
	char a[SAFE_MAX], b[SAFE_MAX], c[SAFE_MAX];
	const char *type = safe_str(a, 40, s, "type"), *kind = safe_str(b, 40, s, "kind");
	int csv = type && !strcmp(type, "csv");
	fprintf(f, "Report of %s (%s", doc_str(s, "path") ? safe_str(c, SAFE_MAX, s, "path") : "n/a",
		csv ? "CSV" : type ? type : "n/a");
	if (kind && (!type || !strcmp(type, "recording") || !strcmp(type, "live"))) /* not a tool's file */
		fprintf(f, " of gpumon %s", kind);
	fprintf(f, ")\n");
	if (doc_str(s, "command"))
		fprintf(f, "Command:        %s\n", safe_str(a, SAFE_MAX, s, "command"));
	if (doc_str(s, "host"))
		fprintf(f, "Host:           %s\n", safe_str(a, 255, s, "host"));
	if (doc_str(s, "start_utc"))
		fprintf(f, "Started:        %s\n", safe_str(a, 40, s, "start_utc"));
	if (doc_has_num(s, "duration_s"))
		fprintf(f, "Duration:       %.1f s\n", doc_num(s, "duration_s"));
	if (doc_has_num(s, "exit_status"))
		fprintf(f, "Exit status:    %lld\n", (long long)doc_num(s, "exit_status"));
}

/* Recordings of one job's nodes read together: each host with its GPUs, and how its clock was put
 * beside the first's. */
static void print_hosts(FILE *f, const json_t *hosts)
{
	char w[512];
	if (json_array_size(hosts) < 2)
		return;
	for (size_t i = 0; i < json_array_size(hosts); i++)
		fprintf(f, "%s%s\n", i ? "                " : "Hosts:          ", words_host(w, sizeof w, hosts, i));
}

/* The events that name GPU dev (a driver call on it that hung, its return, an Xid: the document's
 * events with that dev), one a line under it; dev -1: the stale and answering events that name no
 * GPU (a recording made before events kept theirs), under "GPU n/a". */
static void print_gpu_events(FILE *f, const json_t *events, long long dev)
{
	const json_t *e;
	size_t i;
	char t[SAFE_MAX];
	json_array_foreach(events, i, e)
	{
		const json_t *d = json_object_get(e, "dev");
		const char *kind = doc_str(e, "kind");
		int here = dev >= 0 ? json_is_integer(d) && json_integer_value(d) == dev
				    : !json_is_integer(d) && kind &&
					  (!strcmp(kind, GPUMON_EVENT_STALE) || !strcmp(kind, GPUMON_EVENT_ANSWERING));
		if (here)
			fprintf(f, "  %.1f s: %s\n", doc_num(e, "time"),
				doc_str(e, "text") ? safe_str(t, 300, e, "text") : safe_str(t, 40, e, "kind"));
	}
}

/* A GPU: its name and total, then what the run did on it, where the document has it. */
static void print_device(FILE *f, const json_t *d, const json_t *events)
{
	char a[32], b[32], c[32], w[640], name[SAFE_MAX];
	long long dev = (long long)doc_num(d, "dev");
	int lost = json_is_true(json_object_get(d, "lost"));
	fprintf(f, "GPU %lld:          %s%s%s%s\n", dev, doc_str(d, "name") ? safe_str(name, 95, d, "name") : "",
		doc_str(d, "name") ? ", " : "", bytes(a, sizeof a, d, "total_bytes"), lost ? ", LOST" : "");
	if (lost && doc_has_num(d, "lost_time"))
		fprintf(f, "  lost at %.1f s: it fell off the bus or needs a reset; nothing of it was read after that\n",
			doc_num(d, "lost_time"));
	else if (lost)
		fprintf(f, "  lost: it fell off the bus or needs a reset; nothing of it was read after that\n");
	const json_t *peak = json_object_get(d, "peak"), *job = json_object_get(d, "job_peak");
	if (json_is_object(peak)) {
		fprintf(f, "  used at most %s at %.1f s", bytes(a, sizeof a, peak, "bytes"), doc_num(peak, "time"));
		if (json_is_object(json_object_get(peak, "owner")))
			fprintf(f, ", the rise of %s", words_who(w, sizeof w, json_object_get(peak, "owner")));
		fprintf(f, "\n");
	}
	if (json_is_object(job))
		fprintf(f, "  the job at most %s at %.1f s, %s on average\n", bytes(a, sizeof a, job, "bytes"), doc_num(job, "time"),
			bytes(b, sizeof b, d, "job_mean_bytes"));
	if (json_is_object(job) && doc_has_num(d, "others_peak_bytes") && doc_num(d, "others_peak_bytes") > 0)
		fprintf(f, "  the other processes %s at the job's peak, at most %s together\n",
			bytes(c, sizeof c, d, "others_at_job_peak_bytes"), bytes(a, sizeof a, d, "others_peak_bytes"));
	print_gpu_events(f, events, dev);
}

/* Whether any stale or answering event names no GPU. */
static int gpu_events_unnamed(const json_t *events)
{
	const json_t *e;
	size_t i;
	json_array_foreach(events, i, e)
	{
		const char *kind = doc_str(e, "kind");
		if (!json_is_integer(json_object_get(e, "dev")) && kind &&
		    (!strcmp(kind, GPUMON_EVENT_STALE) || !strcmp(kind, GPUMON_EVENT_ANSWERING)))
			return 1;
	}
	return 0;
}

/* The run's verdict, and every series judged when there are several (a restarted step counter's
 * segments each among them). */
static void print_leak(FILE *f, const json_t *doc)
{
	char w[1024];
	const json_t *leak = json_object_get(doc, "leak"), *all = json_object_get(doc, "series"), *v;
	if (json_is_object(leak))
		fprintf(f, "Leak:           %s\n", words_verdict(w, sizeof w, leak, -1));
	else
		fprintf(f, "Leak:           n/a (no memory series)\n");
	size_t i;
	if (json_array_size(all) < 2)
		return;
	fprintf(f, "Series judged:\n");
	json_array_foreach(all, i, v) fprintf(f, "  %s\n", words_verdict(w, sizeof w, v, -1));
}

static void print_peak(FILE *f, const json_t *p)
{
	char a[32], w[640], what[96];
	fprintf(f, "Peak:           ");
	if (!doc_has_num(p, "bytes")) {
		fprintf(f, "n/a (no memory figures)\n");
		return;
	}
	fprintf(f, "%s of %s at %.1f s", bytes(a, sizeof a, p, "bytes"), words_peak_what(what, sizeof what, p),
		doc_num(p, "time"));
	if (json_is_object(json_object_get(p, "owner")))
		fprintf(f, ", the rise of %s", words_who(w, sizeof w, json_object_get(p, "owner")));
	if (json_is_object(json_object_get(p, "largest")))
		fprintf(f, "; the largest holder then %s", words_who(w, sizeof w, json_object_get(p, "largest")));
	fprintf(f, "\n");
}

/* ", pid N", ", the process" (a CSV's), or "" when the figure names no process. */
static const char *whose(char *buf, size_t len, const json_t *o, int csv)
{
	buf[0] = 0;
	if (doc_has_num(o, "pid"))
		snprintf(buf, len, ", pid %lld", (long long)doc_num(o, "pid"));
	else if (csv)
		snprintf(buf, len, ", the process");
	return buf;
}

/* Why no framework source's memory outside its allocator is known, as the document says it. */
static const char *why_unaccounted(const json_t *doc)
{
	size_t i;
	const json_t *x;
	json_array_foreach(json_object_get(doc, "frameworks"), i, x)
	{
		const char *w = words_unaccounted_why(doc_str(x, "unaccounted_why"));
		if (w)
			return w;
	}
	return "needs the framework's reserved figure and the process's NVML figure";
}

static void print_memory(FILE *f, const json_t *doc, int csv)
{
	char a[32], b[48];
	const json_t *fr = json_object_get(doc, "fragmentation"), *un = json_object_get(doc, "unaccounted");
	if (json_is_object(fr))
		fprintf(f, "Fragmentation:  at most %s reserved but not allocated (at %.1f s%s)\n", bytes(a, sizeof a, fr, "bytes"),
			doc_num(fr, "time"), whose(b, sizeof b, fr, csv));
	else
		fprintf(f, "Fragmentation:  n/a (needs the framework's allocated and reserved figures)\n");
	size_t i;
	const json_t *fw;
	json_array_foreach(json_object_get(doc, "frameworks"), i, fw)
	{
		char w[400], name[24];
		const json_t *placed = json_object_get(fw, "placed");
		if (!json_is_object(placed))
			continue;
		char who[48] = "the process"; /* a CSV names none */
		if (doc_has_num(fw, "pid"))
			snprintf(who, sizeof who, "pid %lld", (long long)doc_num(fw, "pid"));
		fprintf(f, "Placed:         %s (%s) at %.1f s", who,
			doc_str(fw, "framework") ? cli_safe_text(name, sizeof name, doc_str(fw, "framework")) : "n/a",
			doc_num(placed, "time"));
		if (doc_has_num(placed, "step"))
			fprintf(f, ", step %lld", (long long)doc_num(placed, "step"));
		fprintf(f, ": %s\n", words_placed(w, sizeof w, placed));
	}
	if (json_is_object(un))
		fprintf(f, "Unaccounted:    at most %s held outside the allocator (NVML - reserved; at %.1f s%s)\n",
			bytes(a, sizeof a, un, "bytes"), doc_num(un, "time"), whose(b, sizeof b, un, csv));
	else
		fprintf(f, "Unaccounted:    n/a (%s)\n", why_unaccounted(doc));
}

static void print_windows(FILE *f, const json_t *doc)
{
	char a[32], w[640];
	size_t i;
	const json_t *x;
	json_array_foreach(json_object_get(doc, "windows"), i, x)
	{
		if (i == 0)
			fprintf(f, "Peaks by window:\n");
		fprintf(f, "  %8.1f-%-8.1f s %10s at %.1f s", doc_num(x, "start"), doc_num(x, "end"), bytes(a, sizeof a, x, "bytes"),
			doc_num(x, "time"));
		if (json_is_object(json_object_get(x, "owner")))
			fprintf(f, ", the rise of %s", words_who(w, sizeof w, json_object_get(x, "owner")));
		fprintf(f, "\n");
	}
}

static void print_oom(FILE *f, const json_t *o)
{
	char a[32], w[2048], u[SAFE_MAX], c[SAFE_MAX];
	fprintf(f, "Out of memory:  at %.1f s", doc_num(o, "time"));
	if (doc_has_num(o, "dev"))
		fprintf(f, " on GPU %lld", (long long)doc_num(o, "dev"));
	if (doc_has_num(o, "rank")) /* a distributed job: which rank ran out first */
		fprintf(f, " (rank %lld)", (long long)doc_num(o, "rank"));
	char causes[160];
	fprintf(f, ": %s\n  %s\n", words_causes(causes, sizeof causes, o), words_oom(w, sizeof w, o));
	if (words_said(w, sizeof w, o)[0])
		fprintf(f, "  the framework said: %s\n", w);
	const json_t *snap = json_object_get(o, "snapshot"), *site;
	size_t k;
	if (json_is_object(snap)) {
		fprintf(f, "  what held the memory: %s\n", words_snapshot(w, sizeof w, snap));
		json_array_foreach(json_object_get(snap, "sites"), k, site)
		{
			if (k == 0)
				fprintf(f, "  live memory by allocation site:\n");
			fprintf(f, "    %s\n", words_site(w, sizeof w, site));
		}
		if (!json_is_true(json_object_get(snap, "stacks")))
			fprintf(f, "  (no allocation sites: the allocator kept no stacks; gpumon run --history keeps them)\n");
		else if (doc_num(snap, "unsited_bytes") > 0)
			fprintf(f, "    and %s allocated before the stacks were kept\n",
				bytes(a, sizeof a, snap, "unsited_bytes"));
	}
	if (doc_str(o, "message"))
		fprintf(f, "  message: %s\n", safe_str(c, 300, o, "message"));
	else /* the model's rule: a job that failed with its GPU full ran out of memory then */
		fprintf(f, "  (no message was seen: the job failed with its GPU 99 %% full or more)\n");
	size_t i;
	const json_t *h;
	json_array_foreach(json_object_get(o, "holders"), i, h)
	{
		if (i == 0)
			fprintf(f, "  who held what:\n");
		if (doc_has_num(h, "pid"))
			fprintf(f, "    %-11lld", (long long)doc_num(h, "pid"));
		else
			fprintf(f, "    %-11s", "the process");
		char owner[200];
		words_owner(owner, sizeof owner, h);
		char job[32];
		fprintf(f, " %-10s %10s %-4s %s%s%s\n", doc_str(h, "user") ? safe_str(u, 10, h, "user") : "n/a",
			bytes(a, sizeof a, h, "bytes"), words_holder_job(job, sizeof job, h, "job", ""),
			doc_str(h, "command") ? safe_str(c, 60, h, "command") : "", owner[0] ? "  " : "", owner);
	}
	json_array_foreach(json_object_get(o, "last_seconds"), i, h)
	{
		if (i == 0)
			fprintf(f, "  the last seconds (used):");
		fprintf(f, " %.1fs %s", doc_num(h, "time"), bytes(a, sizeof a, h, "used_bytes"));
	}
	if (json_array_size(json_object_get(o, "last_seconds")))
		fprintf(f, "\n");
}

static void print_alerts(FILE *f, const json_t *doc)
{
	json_t *list = words_alert_list(doc), *x;
	char t[SAFE_MAX];
	size_t i;
	if (!list) {
		fprintf(f, "Alerts:         n/a (out of memory)\n");
		return;
	}
	json_array_foreach(list, i, x)
	{
		const char *kind = doc_str(x, "kind");
		if (i == 0)
			fprintf(f, "Alerts:\n");
		fprintf(f, "  %.1f s: ", doc_num(x, "time"));
		/* the texts of "oom" and "alert" events are the file's: a job's message, escaped */
		if (!strcmp(kind, "leak"))
			fprintf(f, "leak: %s%s\n", safe_str(t, SAFE_MAX, x, "text"),
				json_is_true(json_object_get(x, "live")) ? " (given live)" : "");
		else if (!strcmp(kind, "oom"))
			fprintf(f, "out of memory: %s\n", safe_str(t, 300, x, "text"));
		else if (!strcmp(kind, "headroom"))
			fprintf(f, "%s\n", safe_str(t, SAFE_MAX, x, "text"));
		else
			fprintf(f, "%s (given live)\n", safe_str(t, 300, x, "text"));
	}
	json_decref(list);
}

/* The notes of the input (how a log's GPUs were told apart, a period assumed, what gpumon run did
 * to the job), one a line with its time: the texts are the file's, escaped. */
static void print_notes(FILE *f, const json_t *doc)
{
	const json_t *e;
	size_t i, k = 0;
	char t[SAFE_MAX];
	json_array_foreach(json_object_get(doc, "events"), i, e)
	{
		const char *kind = doc_str(e, "kind");
		if (!kind || strcmp(kind, "note"))
			continue;
		if (k++ == 0)
			fprintf(f, "Notes:\n");
		fprintf(f, "  %.1f s: %s\n", doc_num(e, "time"), safe_str(t, SAFE_MAX, e, "text"));
	}
}

static void put_line(void *f, const char *text)
{
	fprintf(f, "%s\n", text);
}

void report_print_text(FILE *f, const json_t *document)
{
	/* a CSV's stand-in pid is taken out: its process is "the process" */
	json_t *doc = words_document(document);
	if (!doc) {
		fprintf(f, "(out of memory)\n");
		return;
	}
	const json_t *s = json_object_get(doc, "source"), *d;
	const char *type = doc_str(s, "type");
	int csv = type && !strcmp(type, "csv");
	size_t i;
	print_source(f, s);
	print_hosts(f, json_object_get(doc, "hosts"));
	const json_t *events = json_object_get(doc, "events");
	json_array_foreach(json_object_get(doc, "devices"), i, d) print_device(f, d, events);
	if (gpu_events_unnamed(events)) {
		fprintf(f, "GPU n/a:        the recording did not keep which GPU these were about\n");
		print_gpu_events(f, events, -1);
	}
	print_leak(f, doc);
	print_peak(f, json_object_get(doc, "peak"));
	print_memory(f, doc, csv);
	print_windows(f, doc);
	words_ranks(doc, 64, put_line, f);
	if (json_is_object(json_object_get(doc, "oom")))
		print_oom(f, json_object_get(doc, "oom"));
	print_alerts(f, doc);
	print_notes(f, doc);
	if (doc_str(s, "damage")) { /* it quotes what could not be read */
		char *t = cli_safe_text_dup(doc_str(s, "damage"));
		fprintf(f, "Not read:       %s\n", t ? t : "(out of memory)");
		free(t);
	}
	json_decref(doc);
}
