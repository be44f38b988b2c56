/* SPDX-License-Identifier: MIT */
/* run_summary.c — the end summary of `gpumon run`, rendered from the run model's document (per GPU
 * the job's peak, its owner and mean against the other processes, the verdicts, the memory the
 * allocator caches or does not account for, the out-of-memory moment and its diagnosis) and from
 * the launcher's own facts. It only words what the document says (words.h); it decides nothing. */
#include "run_summary.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "run_socket.h"
#include "run_state.h"
#include "words.h"

#define MIN_WIDTH 20 /* narrower terminals get lines of 20 columns all the same */

/* The summary's width for this call of run_summary_print: every line wraps to it. */
static size_t width = 80;

int run_summary_width(void)
{
	struct winsize ws;
	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	const char *c = getenv("COLUMNS");
	char *end;
	long n = c ? strtol(c, &end, 10) : 0;
	return c && *c && !*end && n > 0 && n < 10000 ? (int)n : 80;
}

/* Writes text after first (the first line's indent and label), wrapped at the width at blanks, the
 * next lines indented by cont; a word longer than a line is cut. No line is longer than the width. */
static void wrap(FILE *out, const char *first, const char *cont, const char *text)
{
	size_t col = strlen(first), indent = strlen(cont);
	if (indent + 8 > width)
		indent = 0, cont = "";
	fputs(first, out);
	if (col >= width && *text) { /* a label as wide as the line: the text starts below it */
		fputc('\n', out);
		fputs(cont, out);
		col = indent;
	}
	if (!*text)
		fputc('\n', out);
	while (*text) {
		size_t room = col < width ? width - col : 1, n = strlen(text);
		if (n > room) {
			size_t cut = room;
			while (cut > 0 && text[cut] != ' ')
				cut--;
			n = cut ? cut : room; /* a word longer than the line is cut where the line ends ... */
			while (!cut && n > 1 && ((unsigned char)text[n] & 0xC0) == 0x80)
				n--; /* ... between two UTF-8 characters */
		}
		fprintf(out, "%.*s\n", (int)n, text);
		text += n;
		while (*text == ' ')
			text++;
		if (*text) {
			fputs(cont, out);
			col = indent;
		}
	}
}

/* A line of the summary: formatted, then wrapped (indented by cont after the first line). */
static void say(FILE *out, const char *cont, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(FILE *out, const char *cont, const char *fmt, ...)
{
	char text[2400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	size_t n = strlen(text), lead = 0;
	if (n && text[n - 1] == '\n')
		text[--n] = 0;
	while (text[lead] == ' ')
		lead++;
	char first[64];
	snprintf(first, sizeof first, "%.*s", (int)(lead < sizeof first ? lead : sizeof first - 1), text);
	wrap(out, first, cont, text + lead);
}

/* A command line on one short line: control characters escaped (cli_safe_text), at most 60 bytes
 * and "..." when it was longer. */
static const char *short_command(const char *cmd, char *buf, size_t len)
{
	char whole[64];
	size_t max = len > 64 ? 61 : len;
	cli_safe_text(whole, sizeof whole, cmd);
	cli_safe_text(buf, max, whole);
	if (strlen(whole) > strlen(buf) && strlen(buf) + 4 <= len)
		memcpy(buf + strlen(buf), "...", 4);
	return buf;
}

/* "pid 2 (python3 train.py)" of a {pid, user, command} object; "" when null. */
static const char *who(char *buf, size_t len, const json_t *w)
{
	char cmd[72];
	if (!json_is_object(w)) {
		buf[0] = 0;
		return buf;
	}
	const char *c = doc_str(w, "command");
	if (c)
		snprintf(buf, len, "pid %lld (%s)", (long long)doc_num(w, "pid"), short_command(c, cmd, sizeof cmd));
	else
		snprintf(buf, len, "pid %lld", (long long)doc_num(w, "pid"));
	return buf;
}

/* ---- per GPU ------------------------------------------------------------------------------------ */

/* "      made by the rise of pid 2 (python3 train.py)", when the peak names its owner. */
static void print_owner(FILE *out, const json_t *peak)
{
	char w[128];
	if (who(w, sizeof w, json_object_get(peak, "owner"))[0])
		say(out, "        ", "      made by the rise of %s", w);
	if (who(w, sizeof w, json_object_get(peak, "largest"))[0])
		say(out, "        ", "      the largest holder then: %s", w);
}

static void print_gpu(FILE *out, const json_t *d)
{
	char a[32], b[32];
	const json_t *peak = json_object_get(d, "peak"), *jp = json_object_get(d, "job_peak");
	if (!json_is_object(peak) && !json_is_object(jp))
		return; /* not sampled */
	const char *name = doc_str(d, "name");
	say(out, "    ", "  GPU %lld %s%s%s%s:", (long long)doc_num(d, "dev"), doc_str(d, "uuid") ? doc_str(d, "uuid") : "",
		name ? " (" : "", name ? name : "", name ? ")" : "");
	if (json_is_object(jp)) {
		say(out, "      ", "    job peak %s at %.2f s (other processes held %s then)",
			words_bytes(a, sizeof a, json_object_get(jp, "bytes")), doc_num(jp, "time"),
			words_bytes(b, sizeof b, json_object_get(d, "others_at_job_peak_bytes")));
		print_owner(out, jp);
		say(out, "      ", "    job mean %s, other processes peak %s",
			words_bytes(a, sizeof a, json_object_get(d, "job_mean_bytes")),
			words_bytes(b, sizeof b, json_object_get(d, "others_peak_bytes")));
	} else {
		/* not "0 B": the driver never listed a process of the job with memory here */
		say(out, "      ", "    no process of the job held memory here; other processes peak %s",
			words_bytes(b, sizeof b, json_object_get(d, "others_peak_bytes")));
	}
	if (json_is_object(peak)) {
		say(out, "      ", "    GPU used peak %s at %.2f s", words_bytes(a, sizeof a, json_object_get(peak, "bytes")),
			doc_num(peak, "time"));
		print_owner(out, peak);
	}
}

/* ---- verdicts and memory figures ---------------------------------------------------------------- */

/* The run's verdict and every other series of its kind, in the document's order: each framework
 * series (a restarted loop is a series of its own), or the job on each of its GPUs, ... */
static void print_verdicts(FILE *out, const json_t *doc, double now_s)
{
	char text[1200];
	size_t i;
	const json_t *v;
	const char *kind = doc_str(json_object_get(json_object_get(doc, "leak"), "series"), "kind");
	json_array_foreach(json_object_get(doc, "series"), i, v) {
		const char *k = doc_str(json_object_get(v, "series"), "kind");
		if (kind && k && !strcmp(k, kind))
			wrap(out, "  leak: ", "    ", words_verdict(text, sizeof text, v, now_s));
	}
	const json_t *peak = json_object_get(doc, "peak");
	if (json_is_object(peak) && doc_str(peak, "what") && !strcmp(doc_str(peak, "what"), "framework")) {
		char a[32], w[128];
		who(w, sizeof w, json_object_get(peak, "owner"));
		say(out, "    ", "  framework peak (allocated): %s at %.2f s%s%s",
		    words_bytes(a, sizeof a, json_object_get(peak, "bytes")), doc_num(peak, "time"), w[0] ? ", " : "", w);
	}
}

/* "fragmentation" and "unaccounted", each when known. */
static void print_memory(FILE *out, const json_t *doc)
{
	char a[32], line[400];
	const json_t *f = json_object_get(doc, "fragmentation"), *u = json_object_get(doc, "unaccounted");
	if (json_is_object(f)) {
		snprintf(line, sizeof line, "%s at %.2f s (pid %lld): memory the allocator reserved that no tensor used",
			 words_bytes(a, sizeof a, json_object_get(f, "bytes")), doc_num(f, "time"), (long long)doc_num(f, "pid"));
		wrap(out, "  allocator cache, at most: ", "    ", line);
	}
	size_t i;
	const json_t *fw;
	json_array_foreach(json_object_get(doc, "frameworks"), i, fw)
	{
		const json_t *placed = json_object_get(fw, "placed");
		if (!json_is_object(placed))
			continue;
		char first[128], w[400], name[24], step[40] = "";
		if (doc_has_num(placed, "step"))
			snprintf(step, sizeof step, ", step %lld", (long long)doc_num(placed, "step"));
		snprintf(first, sizeof first, "  memory of pid %lld (%s) at %.2f s%s: ", (long long)doc_num(fw, "pid"),
			 doc_str(fw, "framework") ? cli_safe_text(name, sizeof name, doc_str(fw, "framework")) : "n/a",
			 doc_num(placed, "time"), step);
		wrap(out, first, "    ", words_placed(w, sizeof w, placed));
	}
	if (json_is_object(u)) {
		char gpu[32] = "";
		if (doc_has_num(u, "dev"))
			snprintf(gpu, sizeof gpu, " on GPU %lld", (long long)doc_num(u, "dev"));
		snprintf(line, sizeof line,
			 "%s%s (pid %lld at %.2f s): NVML's figure beyond the allocator's reserved: the CUDA context, "
			 "libraries' workspaces, other allocators",
			 words_bytes(a, sizeof a, json_object_get(u, "bytes")), gpu, (long long)doc_num(u, "pid"), doc_num(u, "time"));
		wrap(out, "  unaccounted, at most: ", "    ", line);
	}
}

/* ---- out of memory ------------------------------------------------------------------------------ */

static void print_holders(FILE *out, const json_t *oom)
{
	char a[32], cmd[72], user[16];
	size_t i;
	const json_t *h, *holders = json_object_get(oom, "holders");
	if (!json_array_size(holders)) {
		say(out, "      ", "    no process was listed on the GPU then");
		return;
	}
	say(out, "      ", "    %8s  %-12s %9s  %-3s  %s", "pid", "user", "GiB", "job", "command");
	json_array_foreach(holders, i, h) {
		if (doc_has_num(h, "bytes"))
			snprintf(a, sizeof a, "%.2f", doc_num(h, "bytes") / (1024.0 * 1024 * 1024));
		else
			snprintf(a, sizeof a, "n/a");
		char owner[200];
		words_owner(owner, sizeof owner, h);
		char job[32];
		words_holder_job(job, sizeof job, h, "yes", "no");
		say(out, "      ", "    %8lld  %-12s %9s  %-3s  %s%s%s", (long long)doc_num(h, "pid"),
			doc_str(h, "user") ? cli_safe_text(user, 13, doc_str(h, "user")) : "n/a",
			a, job,
			doc_str(h, "command") ? short_command(doc_str(h, "command"), cmd, sizeof cmd) : "n/a",
			owner[0] ? "  " : "", owner);
	}
}

/* The GPU's used memory about one point a second up to the moment, each said as seconds before it
 * ("2 s before: 60.0 GiB", not "-2 s", which reads as a duration unknown). */
static void print_last_seconds(FILE *out, const json_t *oom)
{
	char line[1024], a[32];
	size_t at = 0, i;
	const json_t *p, *last = json_object_get(oom, "last_seconds");
	if (!json_array_size(last))
		return;
	line[0] = 0;
	json_array_foreach(last, i, p) {
		long s = lround(doc_num(p, "time") - doc_num(oom, "time"));
		char when[32];
		if (s)
			snprintf(when, sizeof when, "%ld s %s", labs(s), s < 0 ? "before" : "after");
		else
			snprintf(when, sizeof when, "then");
		int n = snprintf(line + at, sizeof line - at, "%s%s: %s", i ? ", " : "", when,
				 words_bytes(a, sizeof a, json_object_get(p, "used_bytes")));
		if (n < 0 || (size_t)n >= sizeof line - at)
			break;
		at += (size_t)n;
	}
	char first[64];
	snprintf(first, sizeof first, "    GPU %lld used, about one point a second up to then: ", (long long)doc_num(oom, "dev"));
	wrap(out, first, "      ", line);
}

/* What held the memory, from the allocator's snapshot: its figures and the allocation sites that
 * held the most (five at most here; the report lists them all). */
static void print_snapshot(FILE *out, const json_t *oom)
{
	char text[1200];
	const json_t *snap = json_object_get(oom, "snapshot"), *site;
	size_t i;
	if (!json_is_object(snap))
		return;
	wrap(out, "    what held the memory: ", "      ", words_snapshot(text, sizeof text, snap));
	json_array_foreach(json_object_get(snap, "sites"), i, site)
	{
		if (i == 5) {
			say(out, "        ", "      ... %zu sites in all (gpumon report lists them)",
			    json_array_size(json_object_get(snap, "sites")));
			break;
		}
		say(out, "        ", "      %s", words_site(text, sizeof text, site));
	}
	if (!json_is_true(json_object_get(snap, "stacks")))
		say(out, "      ", "      no allocation sites: the allocator kept no stacks (gpumon run --history "
				  "keeps them)");
	else if (doc_num(snap, "unsited_bytes") > 0)
		say(out, "      ", "      and %s allocated before the stacks were kept",
		    words_bytes(text, sizeof text, json_object_get(snap, "unsited_bytes")));
}

static void print_oom(FILE *out, const json_t *doc)
{
	const json_t *oom = json_object_get(doc, "oom");
	char text[2000], gpu[32] = "", label[64];
	if (!json_is_object(oom))
		return;
	if (doc_has_num(oom, "dev"))
		snprintf(gpu, sizeof gpu, " on GPU %lld", (long long)doc_num(oom, "dev"));
	if (doc_has_num(oom, "rank")) /* a distributed job: which rank ran out first */
		snprintf(gpu + strlen(gpu), sizeof gpu - strlen(gpu), " (rank %lld)", (long long)doc_num(oom, "rank"));
	snprintf(label, sizeof label, "  out of memory at %.2f s%s: ", doc_num(oom, "time"), gpu);
	if (doc_str(oom, "message")) /* the job's own line, escapes and all: shown escaped */
		wrap(out, label, "    ", cli_safe_text(text, sizeof text, doc_str(oom, "message")));
	else
		wrap(out, label, "    ", "no message; the GPU was full when the job failed");
	if (doc_num(oom, "signs") > 1)
		say(out, "      ", "    (%lld out-of-memory signs in all)", (long long)doc_num(oom, "signs"));
	const json_t *status = json_object_get(json_object_get(doc, "source"), "exit_status");
	if (json_is_integer(status) && json_integer_value(status) == 0)
		say(out, "      ", "    the job went on and exited with status 0: it recovered");
	char causes[160];
	snprintf(label, sizeof label, "  diagnosis: %.40s: ", words_causes(causes, sizeof causes, oom));
	wrap(out, label, "    ", words_oom(text, sizeof text, oom));
	if (words_said(text, sizeof text, oom)[0])
		wrap(out, "    the framework said: ", "      ", text);
	print_snapshot(out, oom);
	const json_t *d;
	size_t i;
	const char *uuid = NULL;
	json_array_foreach(json_object_get(doc, "devices"), i, d)
		if (doc_has_num(oom, "dev") && doc_num(d, "dev") == doc_num(oom, "dev"))
			uuid = doc_str(d, "uuid");
	if (doc_has_num(oom, "dev"))
		say(out, "      ", "    who held GPU %lld%s%s at %.2f s:", (long long)doc_num(oom, "dev"), uuid ? " " : "",
			uuid ? uuid : "", doc_num(oom, "time"));
	else
		say(out, "      ", "    who held the GPU at %.2f s:", doc_num(oom, "time"));
	print_holders(out, oom);
	print_last_seconds(out, oom);
}

/* ---- the rest ----------------------------------------------------------------------------------- */

static void print_alerts(FILE *out, const json_t *doc)
{
	char s[200], text[800];
	size_t i;
	const json_t *a;
	json_array_foreach(json_object_get(doc, "alerts"), i, a) {
		const char *kind = doc_str(a, "kind");
		if (kind && !strcmp(kind, "leak"))
			say(out, "    ", "  alert at %.2f s%s: leak suspected on %s", doc_num(a, "time"),
				json_is_true(json_object_get(a, "live")) ? " (told live)" : "",
				words_series(s, sizeof s, json_object_get(a, "series")));
		else
			say(out, "    ", "  alert at %.2f s: %s", doc_num(a, "time"), words_alert(text, sizeof text, a));
	}
}

static void print_facts(FILE *out, const json_t *doc, const struct run_facts *f)
{
	for (size_t i = 0; f->plan && i < f->plan->nvars; i++)
		say(out, "    ", "  set %s=%s", f->plan->vars[i].name, f->plan->vars[i].value);
	/* the notes said at the start: those of settings without effect, every one with -v */
	for (size_t i = 0; f->plan && i < f->plan->nnotes; i++)
		if (f->verbose || f->plan->loud[i])
			wrap(out, "  note: ", "    ", f->plan->notes[i]);
	const char *damage = doc_str(json_object_get(doc, "source"), "damage");
	char safe[2048];
	if (damage && damage[0])
		wrap(out, "  note: ", "    ", cli_safe_text(safe, sizeof safe, damage));
	if (f->dropped)
		say(out, "    ", "  dropped records: %llu (the %s misses some samples)", (unsigned long long)f->dropped,
		    f->path ? "recording" : "summary");
	char snaps[96] = "";
	if (f->snapshots_dropped)
		snprintf(snaps, sizeof snaps, "%s%llu allocator snapshot%s left out (the first %d are kept)",
			 f->malformed || f->unknown ? "; " : "", (unsigned long long)f->snapshots_dropped,
			 f->snapshots_dropped == 1 ? "" : "s", RUN_INSIDE_MAX_SNAPSHOTS);
	if (f->have_socket && (f->malformed || f->unknown))
		say(out, "    ", "  socket: %llu malformed and %llu unknown messages ignored%s",
		    (unsigned long long)f->malformed, (unsigned long long)f->unknown, snaps);
	else if (f->have_socket && snaps[0])
		say(out, "    ", "  socket: %s", snaps);
	if (f->refused)
		say(out, "    ", "  socket: %llu connection%s refused: %s; what %s sent is not in the %s",
		    (unsigned long long)f->refused, f->refused == 1 ? "" : "s", f->refused_why, f->refused == 1 ? "it" : "they",
		    f->path ? "recording" : "summary");
}

/* A line of the rank table, wrapped like every other line of the summary. */
static void rank_line(void *out, const char *text)
{
	say(out, "        ", "  %s", text);
}

void run_summary_print(FILE *out, const json_t *doc, const struct run_facts *f)
{
	const json_t *src = json_object_get(doc, "source");
	double now_s = doc_has_num(src, "duration_s") ? doc_num(src, "duration_s") : -1;
	char after[48] = "";
	width = f->width >= MIN_WIDTH ? (size_t)f->width : f->width > 0 ? MIN_WIDTH : 80;
	fprintf(out, "\ngpumon run summary\n");
	if (f->path)
		say(out, "    ", "  recording: %s%s", f->path, f->rec_failed ? " (stopped early, see above)" : "");
	else
		say(out, "    ", "  recording: none (--no-record)");
	if (now_s >= 0)
		snprintf(after, sizeof after, " after %.1f s", now_s);
	if (f->signal > 0 && sigabbrev_np(f->signal)) /* 137 could be exit(137): the signal says killed */
		say(out, "    ", "  job killed by SIG%s (status %d)%s", sigabbrev_np(f->signal), 128 + f->signal, after);
	else if (doc_has_num(src, "exit_status"))
		say(out, "    ", "  job exited with status %lld%s", (long long)doc_num(src, "exit_status"), after);
	else
		say(out, "    ", "  job's exit status unknown%s", after);
	if (f->steps)
		say(out, "    ", "  %s", f->steps);
	size_t i;
	const json_t *d;
	json_array_foreach(json_object_get(doc, "devices"), i, d)
		print_gpu(out, d);
	print_verdicts(out, doc, now_s);
	words_ranks(doc, 32, rank_line, out);
	print_memory(out, doc);
	print_alerts(out, doc);
	print_oom(out, doc);
	print_facts(out, doc, f);
}

/* --steps in words: stopped, or why not. */
static const char *steps_words(char *buf, size_t len, const struct run *r)
{
	if (!r->o->steps)
		return NULL;
	if (r->steps_stopped)
		snprintf(buf, len, "stopped after %u steps (--steps)", r->o->steps);
	else if (r->nsteps)
		snprintf(buf, len, "--steps %u: the job ended after reporting %zu step%s", r->o->steps, r->nsteps,
			 r->nsteps == 1 ? "" : "s");
	else /* no hello either: nothing inside the job spoke to gpumon */
		snprintf(buf, len, "--steps: the job reported no step (%s)",
			 r->nfw ? "its inside view sent none" : "no inside view");
	return buf;
}

/* The end: the model finishes at the end the recording stores, and its document is the summary. */
void run_summary_end(struct run *r, const char *path, uint64_t end_ns, const gpumon_sampler_stats *ss)
{
	char *text = NULL, why[96] = "", steps[96];
	gpumon_model_finish(r->model, end_ns, r->status);
	if (r->o->quiet)
		return;
	json_t *doc = gpumon_model_document(r->model, 0, &text) == GPUMON_OK ? json_loads(text, 0, NULL) : NULL;
	gpumon_free(text);
	if (!doc) {
		cli_error("run: out of memory: no summary%s%s%s", path ? " (the recording " : "", path ? path : "",
			  path ? " has the run)" : "");
		return;
	}
	struct run_facts f = {.signal = r->signal, .path = path, .rec_failed = r->rec_failed, .plan = &r->plan, .dropped = ss->dropped,
			      .have_socket = r->srv != NULL, .verbose = r->o->verbose, .width = run_summary_width(),
			      .refused_why = why, .steps = steps_words(steps, sizeof steps, r)};
	if (r->srv) {
		struct run_server_stats st;
		run_server_stats_get(r->srv, &st);
		f.malformed = st.malformed;
		f.unknown = st.unknown;
		f.snapshots_dropped = r->inside.snapshots_dropped;
		f.refused = st.refused;
		if (st.refused)
			run_server_refusal_reason(why, sizeof why, st.refused_errno, 1);
	}
	run_summary_print(stderr, doc, &f);
	json_decref(doc);
}
