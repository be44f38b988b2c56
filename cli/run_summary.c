/* SPDX-License-Identifier: MIT */
/* run_summary.c — the end summary of `gpumon run`, rendered from the run model's typed answers (per
 * GPU the job's peak, its owner and mean against the other processes, the verdicts, the memory the
 * allocator caches or does not account for, the out-of-memory moment and its diagnosis) and from
 * the launcher's own facts. The library words them (gpumon_words_*); nothing here decides. */
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

/* "pid 2 (python3 train.py)" of a process the model knows; "" for pid < 0. */
static const char *who(char *buf, size_t len, const gpumon_model *m, int64_t pid)
{
	char cmd[72];
	if (pid < 0) {
		buf[0] = 0;
		return buf;
	}
	gpumon_model_who w = {.size = sizeof w};
	gpumon_model_who_get(m, -1, (unsigned)pid, &w);
	if (w.command[0])
		snprintf(buf, len, "pid %lld (%s)", (long long)pid, short_command(w.command, cmd, sizeof cmd));
	else
		snprintf(buf, len, "pid %lld", (long long)pid);
	return buf;
}

static const char *bytes_if(char *buf, size_t len, int known, uint64_t v)
{
	if (!known) {
		snprintf(buf, len, "n/a");
		return buf;
	}
	return gpumon_words_bytes(v, buf, len);
}

/* ---- per GPU ------------------------------------------------------------------------------------ */

/* "      made by the rise of pid 2 (python3 train.py)", when the peak names its owner. */
static void print_owner(FILE *out, const gpumon_model *m, const gpumon_peak *p)
{
	char w[128];
	if (who(w, sizeof w, m, p->owner_pid)[0])
		say(out, "        ", "      made by the rise of %s", w);
	if (p->largest_pid != p->owner_pid && who(w, sizeof w, m, p->largest_pid)[0])
		say(out, "        ", "      the largest holder then: %s", w);
}

static void print_gpu(FILE *out, const gpumon_model *m, const gpumon_model_gpu *d)
{
	char a[32], b[32];
	if (!d->peak_known && !d->job_peak_known)
		return; /* not sampled */
	const char *name = d->name[0] ? d->name : NULL;
	say(out, "    ", "  GPU %u %s%s%s%s:", d->dev, d->uuid, name ? " (" : "", name ? name : "", name ? ")" : "");
	if (d->job_peak_known) {
		say(out, "      ", "    job peak %s at %.2f s (other processes held %s then)",
		    gpumon_words_bytes(d->job_peak.bytes, a, sizeof a), gpumon_model_seconds(m, d->job_peak.t_ns),
		    bytes_if(b, sizeof b, d->job_known, d->others_at_job_peak_bytes));
		print_owner(out, m, &d->job_peak);
		say(out, "      ", "    job mean %s, other processes peak %s",
		    bytes_if(a, sizeof a, d->job_mean_known, d->job_mean_bytes),
		    gpumon_words_bytes(d->others_peak_bytes, b, sizeof b));
	} else {
		/* not "0 B": the driver never listed a process of the job with memory here */
		say(out, "      ", "    no process of the job held memory here; other processes peak %s",
		    gpumon_words_bytes(d->others_peak_bytes, b, sizeof b));
	}
	if (d->peak_known) {
		say(out, "      ", "    GPU used peak %s at %.2f s", gpumon_words_bytes(d->peak.bytes, a, sizeof a),
		    gpumon_model_seconds(m, d->peak.t_ns));
		print_owner(out, m, &d->peak);
	}
}

/* ---- verdicts and memory figures ---------------------------------------------------------------- */

/* The run's verdict and every other series of its kind, in the model's order: each framework
 * series (a restarted loop is a series of its own), or the job on each of its GPUs, ... */
static void print_verdicts(FILE *out, const gpumon_model *m, double now_s)
{
	char text[1200];
	gpumon_verdict run;
	size_t n = gpumon_model_verdicts(m, NULL, 0);
	gpumon_verdict *all = n ? calloc(n, sizeof *all) : NULL;
	if (all && gpumon_model_verdict(m, &run) == GPUMON_OK) {
		n = gpumon_model_verdicts(m, all, n);
		for (size_t i = 0; i < n; i++)
			if (all[i].series == run.series)
				wrap(out, "  leak: ", "    ", gpumon_words_verdict(m, &all[i], now_s, text, sizeof text));
	}
	free(all);
	gpumon_peak p;
	int what, dev;
	size_t nwin;
	if (gpumon_model_peak(m, &what, &dev, &p, NULL, 0, &nwin) == GPUMON_OK && what == GPUMON_PEAK_FRAMEWORK) {
		char a[32], w[128];
		who(w, sizeof w, m, p.owner_pid);
		say(out, "    ", "  framework peak (allocated): %s at %.2f s%s%s", gpumon_words_bytes(p.bytes, a, sizeof a),
		    gpumon_model_seconds(m, p.t_ns), w[0] ? ", " : "", w);
	}
}

/* The allocator's cache and the memory outside it at most, each when known, and every framework
 * source's process placed. */
static void print_memory(FILE *out, const gpumon_model *m)
{
	char a[32], line[400];
	gpumon_model_figure f, u;
	gpumon_model_memory(m, &f, &u);
	if (f.known) {
		snprintf(line, sizeof line, "%s at %.2f s (pid %lld): memory the allocator reserved that no tensor used",
			 gpumon_words_bytes(f.bytes, a, sizeof a), gpumon_model_seconds(m, f.t_ns),
			 f.pid >= 0 ? (long long)f.pid : 0ll);
		wrap(out, "  allocator cache, at most: ", "    ", line);
	}
	gpumon_model_framework fw = {.size = sizeof fw};
	for (size_t i = 0; gpumon_model_framework_get(m, i, &fw) == GPUMON_OK; i++) {
		if (!fw.placed_known)
			continue;
		char first[128], w[400], name[24], step[40] = "";
		if (fw.placed.step >= 0)
			snprintf(step, sizeof step, ", step %lld", (long long)fw.placed.step);
		snprintf(first, sizeof first, "  memory of pid %u (%s) at %.2f s%s: ", fw.pid,
			 fw.framework[0] ? cli_safe_text(name, sizeof name, fw.framework) : "n/a",
			 gpumon_model_seconds(m, fw.placed.t_ns), step);
		wrap(out, first, "    ", gpumon_words_placed(&fw.placed, w, sizeof w));
	}
	if (u.known) {
		char gpu[32] = "";
		if (u.dev >= 0)
			snprintf(gpu, sizeof gpu, " on GPU %d", u.dev);
		snprintf(line, sizeof line,
			 "%s%s (pid %lld at %.2f s): NVML's figure beyond the allocator's reserved: the CUDA context, "
			 "libraries' workspaces, other allocators",
			 gpumon_words_bytes(u.bytes, a, sizeof a), gpu, u.pid >= 0 ? (long long)u.pid : 0ll,
			 gpumon_model_seconds(m, u.t_ns));
		wrap(out, "  unaccounted, at most: ", "    ", line);
	}
}

/* ---- out of memory ------------------------------------------------------------------------------ */

static void print_holders(FILE *out, const gpumon_model *m, const gpumon_model_oom *o)
{
	char a[32], cmd[72], user[16];
	if (!o->nholders) {
		say(out, "      ", "    no process was listed on the GPU then");
		return;
	}
	say(out, "      ", "    %8s  %-12s %9s  %-3s  %s", "pid", "user", "GiB", "job", "command");
	for (size_t i = 0; i < o->nholders && i < 16; i++) {
		const gpumon_holder *h = &o->holders[i];
		if (h->used_known)
			snprintf(a, sizeof a, "%.2f", (double)h->used_bytes / (1024.0 * 1024 * 1024));
		else
			snprintf(a, sizeof a, "n/a");
		gpumon_model_who w = {.size = sizeof w};
		gpumon_model_who_get(m, o->dev, h->pid, &w);
		char owner[200], job[32];
		gpumon_words_owner(w.owner, owner, sizeof owner);
		gpumon_words_holder_job(h, "yes", "no", job, sizeof job);
		say(out, "      ", "    %8u  %-12s %9s  %-3s  %s%s%s", h->pid,
		    h->user[0] ? cli_safe_text(user, 13, h->user) : "n/a", a, job,
		    h->command[0] ? short_command(h->command, cmd, sizeof cmd) : "n/a", owner[0] ? "  " : "", owner);
	}
}

/* The GPU's used memory about one point a second up to the moment, each said as seconds before it
 * ("2 s before: 60.0 GiB", not "-2 s", which reads as a duration unknown). */
static void print_last_seconds(FILE *out, const gpumon_model *m, const gpumon_model_oom *o)
{
	char line[1024], a[32];
	size_t at = 0;
	if (!o->nlast)
		return;
	line[0] = 0;
	double moment = gpumon_model_seconds(m, o->t_ns);
	for (size_t i = 0; i < o->nlast && i < 16; i++) {
		long s = lround(gpumon_model_seconds(m, o->last[i].t_ns) - moment);
		char when[32];
		if (s)
			snprintf(when, sizeof when, "%ld s %s", labs(s), s < 0 ? "before" : "after");
		else
			snprintf(when, sizeof when, "then");
		int n = snprintf(line + at, sizeof line - at, "%s%s: %s", i ? ", " : "", when,
				 gpumon_words_bytes(o->last[i].used_bytes, a, sizeof a));
		if (n < 0 || (size_t)n >= sizeof line - at)
			break;
		at += (size_t)n;
	}
	char first[64];
	snprintf(first, sizeof first, "    GPU %d used, about one point a second up to then: ", o->dev >= 0 ? o->dev : 0);
	wrap(out, first, "      ", line);
}

/* What held the memory, from the allocator's snapshot: its figures and the allocation sites that
 * held the most (five at most here; the report lists them all). */
static void print_snapshot(FILE *out, const gpumon_model_oom *o)
{
	char text[1200];
	const gpumon_alloc_snapshot *snap = &o->input.snapshot;
	if (!(o->input.known & GPUMON_OOM_F_SNAPSHOT))
		return;
	wrap(out, "    what held the memory: ", "      ", gpumon_words_snapshot(snap, text, sizeof text));
	for (unsigned i = 0; i < snap->nsites && i < GPUMON_SNAPSHOT_SITES; i++) {
		if (i == 5) {
			say(out, "        ", "      ... %u sites in all (gpumon report lists them)", snap->nsites);
			break;
		}
		say(out, "        ", "      %s", gpumon_words_site(&snap->sites[i], text, sizeof text));
	}
	if (!(snap->known & GPUMON_SNAP_STACKS))
		say(out, "      ", "      no allocation sites: the allocator kept no stacks (gpumon run --history "
				  "keeps them)");
	else if (snap->unsited_bytes > 0)
		say(out, "      ", "      and %s allocated before the stacks were kept",
		    gpumon_words_bytes(snap->unsited_bytes, text, sizeof text));
}

static void print_oom(FILE *out, const gpumon_model *m, const gpumon_model_source *src)
{
	gpumon_model_oom o;
	char text[2000], gpu[32] = "", label[64];
	if (gpumon_model_oom_get(m, &o) != GPUMON_OK)
		return;
	double moment = gpumon_model_seconds(m, o.t_ns);
	if (o.dev >= 0)
		snprintf(gpu, sizeof gpu, " on GPU %d", o.dev);
	if (o.rank >= 0) /* a distributed job: which rank ran out first */
		snprintf(gpu + strlen(gpu), sizeof gpu - strlen(gpu), " (rank %d)", o.rank);
	snprintf(label, sizeof label, "  out of memory at %.2f s%s: ", moment, gpu);
	if (o.message[0]) /* the job's own line, escapes and all: shown escaped */
		wrap(out, label, "    ", cli_safe_text(text, sizeof text, o.message));
	else
		wrap(out, label, "    ", "no message; the GPU was full when the job failed");
	if (o.signs > 1)
		say(out, "      ", "    (%u out-of-memory signs in all)", o.signs);
	if (src->exit_status == 0)
		say(out, "      ", "    the job went on and exited with status 0: it recovered");
	char causes[160];
	snprintf(label, sizeof label, "  diagnosis: %.40s: ", gpumon_words_causes(&o, causes, sizeof causes));
	wrap(out, label, "    ", gpumon_words_oom(m, &o, text, sizeof text));
	if (gpumon_words_said(m, &o, text, sizeof text)[0])
		wrap(out, "    the framework said: ", "      ", text);
	print_snapshot(out, &o);
	char uuid[96] = "";
	gpumon_model_gpu d = {.size = sizeof d};
	for (size_t i = 0; o.dev >= 0 && gpumon_model_gpu_get(m, i, &d) == GPUMON_OK; i++)
		if (d.dev == (unsigned)o.dev)
			snprintf(uuid, sizeof uuid, "%s", d.uuid);
	if (o.dev >= 0)
		say(out, "      ", "    who held GPU %d%s%s at %.2f s:", o.dev, uuid[0] ? " " : "", uuid, moment);
	else
		say(out, "      ", "    who held the GPU at %.2f s:", moment);
	print_holders(out, m, &o);
	print_last_seconds(out, m, &o);
}

/* ---- the rest ----------------------------------------------------------------------------------- */

static void print_alerts(FILE *out, const gpumon_model *m)
{
	char s[200], text[800];
	gpumon_alert a;
	for (size_t i = 0; gpumon_model_alerts(m, i, &a, 1) > 0; i++) {
		if (a.kind == GPUMON_ALERT_LEAK)
			say(out, "    ", "  alert at %.2f s%s: leak suspected on %s", gpumon_model_seconds(m, a.t_ns),
			    a.live ? " (told live)" : "", gpumon_words_series(m, &a.verdict, s, sizeof s));
		else
			say(out, "    ", "  alert at %.2f s: %s", gpumon_model_seconds(m, a.t_ns),
			    gpumon_words_alert(m, &a, text, sizeof text));
	}
}

static void print_facts(FILE *out, const gpumon_model *m, const struct run_facts *f)
{
	for (size_t i = 0; f->plan && i < f->plan->nvars; i++)
		say(out, "    ", "  set %s=%s", f->plan->vars[i].name, f->plan->vars[i].value);
	/* the notes said at the start: those of settings without effect, every one with -v */
	for (size_t i = 0; f->plan && i < f->plan->nnotes; i++)
		if (f->verbose || f->plan->loud[i])
			wrap(out, "  note: ", "    ", f->plan->notes[i]);
	char *damage = NULL;
	gpumon_model_damage_get(m, &damage);
	char safe[2048];
	if (damage && damage[0])
		wrap(out, "  note: ", "    ", cli_safe_text(safe, sizeof safe, damage));
	gpumon_free(damage);
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

/* The rank table's lines (each ended by '\n'), wrapped like every other line of the summary. */
static void print_ranks(FILE *out, const gpumon_model *m)
{
	char *text = NULL;
	gpumon_words_ranks(m, 32, &text);
	for (char *l = text, *nl; l && (nl = strchr(l, '\n')); l = nl + 1) {
		*nl = 0;
		say(out, "        ", "  %s", l);
	}
	gpumon_free(text);
}

void run_summary_print(FILE *out, const gpumon_model *m, const struct run_facts *f)
{
	gpumon_model_source src = {.size = sizeof src};
	gpumon_model_source_get(m, &src);
	double now_s = src.duration_known ? src.duration_s : -1;
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
	else if (src.exit_status >= 0)
		say(out, "    ", "  job exited with status %d%s", src.exit_status, after);
	else
		say(out, "    ", "  job's exit status unknown%s", after);
	if (f->steps)
		say(out, "    ", "  %s", f->steps);
	gpumon_model_gpu d = {.size = sizeof d};
	for (size_t i = 0; gpumon_model_gpu_get(m, i, &d) == GPUMON_OK; i++)
		print_gpu(out, m, &d);
	print_verdicts(out, m, now_s);
	print_ranks(out, m);
	print_memory(out, m);
	print_alerts(out, m);
	print_oom(out, m, &src);
	print_facts(out, m, f);
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

/* The end: the model finishes at the end the recording stores, and its answers are the summary. */
void run_summary_end(struct run *r, const char *path, uint64_t end_ns, const gpumon_sampler_stats *ss)
{
	char why[96] = "", steps[96];
	gpumon_model_finish(r->model, end_ns, r->status);
	if (r->o->quiet)
		return;
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
	run_summary_print(stderr, r->model, &f);
}
