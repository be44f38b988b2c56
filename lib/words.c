/* SPDX-License-Identifier: MIT */
/* words.c — the run model's answers in plain words (gpumon.h, "Words"): figures, verdicts, alerts,
 * processes, hosts and the ranks' table, made from the model's typed answers, so that every front
 * end says one answer one way. Nothing here decides; the out-of-memory words are words_oom.c's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gpumon/gpumon.h>

#include "words.h"

void gpumon__words_add(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	if (*at + 1 >= len)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}
#define add gpumon__words_add

const char *gpumon__words_bytes_if(int known, double v, char *buf, size_t len)
{
	if (!known || v < 0) {
		snprintf(buf, len, "n/a");
		return buf;
	}
	return gpumon_words_bytes((uint64_t)v, buf, len);
}
#define bytes_if gpumon__words_bytes_if

int gpumon__words_named(const gpumon_model *m)
{
	gpumon_model_source s = {.size = sizeof s};
	return !m || gpumon_model_source_get(m, &s) != GPUMON_OK || s.names_processes;
}

/* ---- text and figures ------------------------------------------------------------------------- */

/* Bytes of the UTF-8 character at s (1 to 4), or 0 when s does not start a valid, shortest-form
 * one (a stray continuation byte, an overlong form, a surrogate, a cut-off sequence). *cp gets its
 * code point. */
static size_t utf8_char(const unsigned char *s, unsigned *cp)
{
	size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
	static const unsigned lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07}, least[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (!n)
		return 0;
	unsigned c = s[0] & lead_mask[n];
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3F);
	}
	if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return n;
}

/* Whether a terminal could take code point c for something other than a character to show: C0,
 * DEL, C1 (0x9B is CSI to a terminal that reads 8-bit controls), and the bidirectional overrides
 * and isolates that make text read differently from the bytes it holds. */
static int is_control(unsigned c)
{
	return c < 0x20 || (c >= 0x7F && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

const char *gpumon_words_safe(const char *s, char *buf, size_t len)
{
	size_t w = 0;
	if (!len)
		return buf;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		char esc[12];
		unsigned c = 0;
		size_t n = utf8_char(p, &c), out;
		if (n && !is_control(c)) {
			out = n;
			memcpy(esc, p, n);
		} else if (n == 1 && (c == '\n' || c == '\r' || c == '\t')) {
			out = 2;
			esc[0] = '\\', esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		} else if (n <= 1) { /* an ASCII control, or a byte that is not UTF-8: its value */
			n = 1;
			out = (size_t)snprintf(esc, sizeof esc, "\\x%02x", p[0]);
		} else {
			out = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
		}
		if (w + out >= len)
			break; /* whole characters and escapes only */
		memcpy(buf + w, esc, out);
		w += out;
		p += n;
	}
	buf[w] = 0;
	return buf;
}
#define safe(buf, len, s) gpumon_words_safe(s, buf, len)

const char *gpumon_words_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
}

const char *gpumon_words_duration(double s, char *buf, size_t len)
{
	long long t = s > 0 ? (long long)(s + 0.5) : 0;
	if (t < 60)
		snprintf(buf, len, "%lld s", t);
	else if (t < 3600)
		snprintf(buf, len, "%lld min %02lld s", t / 60, t % 60);
	else if (t < 2 * 86400)
		snprintf(buf, len, "%lld h %02lld min", t / 3600, t / 60 % 60);
	else
		snprintf(buf, len, "%lld days", t / 86400);
	return buf;
}

const char *gpumon_words_clock(double s, char *buf, size_t len)
{
	long long t = (long long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, len, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, len, "%lld:%02lld", t / 60, t % 60);
	return buf;
}

/* ---- verdicts and alerts ---------------------------------------------------------------------- */

const char *gpumon_words_series(const gpumon_model *m, const gpumon_verdict *v, char *buf, size_t len)
{
	size_t at = 0;
	long long dev = v->dev >= 0 ? v->dev : 0;
	int pid = v->pid >= 0 && gpumon__words_named(m);
	buf[0] = 0;
	if (v->series == GPUMON_SERIES_FRAMEWORK) {
		add(buf, len, &at, "the framework's allocated memory (");
		char name[64]; /* the name the job's process gave itself */
		if (v->framework[0])
			add(buf, len, &at, "%s, ", safe(name, sizeof name, v->framework));
		if (pid)
			add(buf, len, &at, "pid %lld", (long long)v->pid);
		else /* a CSV: its one process, unnamed */
			add(buf, len, &at, "the process");
		if (v->rank >= 0)
			add(buf, len, &at, ", rank %d", v->rank);
		if (v->segment > 0) /* a restarted step counter: the n-th run of the loop */
			add(buf, len, &at, ", loop restart %u", v->segment);
		add(buf, len, &at, ")");
	} else if (v->series == GPUMON_SERIES_JOB) {
		add(buf, len, &at, "the job's processes on GPU %lld (NVML)", dev);
		if (v->rank >= 0) /* the rank there, or the one of several that leaks */
			add(buf, len, &at, ", rank %d", v->rank);
	} else if (v->series == GPUMON_SERIES_PROCESS) {
		if (pid)
			add(buf, len, &at, "pid %lld", (long long)v->pid);
		else
			add(buf, len, &at, "the process");
		if (v->rank >= 0)
			add(buf, len, &at, " (rank %d)", v->rank);
		add(buf, len, &at, " on GPU %lld (NVML)", dev);
	} else if (v->series == GPUMON_SERIES_DEVICE) {
		add(buf, len, &at, "GPU %lld's used memory (NVML)", dev);
	} else {
		add(buf, len, &at, "none");
	}
	return buf;
}

const char *gpumon_words_room(const gpumon_verdict *v, char *buf, size_t len)
{
	switch (v->room) {
	case GPUMON_ROOM_FREE: snprintf(buf, len, "the GPU's free memory"); break;
	case GPUMON_ROOM_LIMIT: snprintf(buf, len, "the --limit set for the job"); break;
	case GPUMON_ROOM_CAP: snprintf(buf, len, "the cap the job set on its allocator"); break;
	case GPUMON_ROOM_TOTAL: snprintf(buf, len, "the GPU's total, what other processes hold unknown"); break;
	default: snprintf(buf, len, "an unknown limit");
	}
	return buf;
}

static int is_leak(const gpumon_verdict *v)
{
	return v->leak.verdict == GPUMON_LEAK_SUSPECTED;
}

/* "+8.00 MiB a step from step 40" ("8.00 MiB ..." without the sign, after "rises by") */
static void rate(char *buf, size_t len, size_t *at, const gpumon_model *m, const gpumon_verdict *v, const char *sign)
{
	char a[32];
	const gpumon_leak_result *r = &v->leak;
	if (is_leak(v) && r->rate_bytes_per_step > 0)
		add(buf, len, at, "%s%s a step", sign, bytes_if(1, r->rate_bytes_per_step, a, sizeof a));
	else
		add(buf, len, at, "%s%s a second", sign, bytes_if(is_leak(v), r->rate_bytes_per_second, a, sizeof a));
	if (is_leak(v) && r->start_step >= 0)
		add(buf, len, at, " from step %lld", (long long)r->start_step);
	else if (is_leak(v) && r->start_t_ns)
		add(buf, len, at, " from %.1f s", gpumon_model_seconds(m, r->start_t_ns));
}

/* "; out of memory in about 1200 more steps (about 2 min 10 s, around 4:37 from the start) ..." */
static void to_oom(char *buf, size_t len, size_t *at, const gpumon_verdict *v, double now_s)
{
	char d[32], c[32], r[96], a[32];
	int steps = is_leak(v) && v->steps_to_oom >= 0, secs = is_leak(v) && v->seconds_to_oom >= 0;
	if (!steps && !secs)
		return;
	add(buf, len, at, "; out of memory in about ");
	if (steps)
		add(buf, len, at, "%.0f more steps%s", v->steps_to_oom, secs ? " (" : "");
	if (secs) {
		add(buf, len, at, "%s", gpumon_words_duration(v->seconds_to_oom, d, sizeof d));
		if (now_s >= 0)
			add(buf, len, at, ", around %s from the start", gpumon_words_clock(now_s + v->seconds_to_oom, c, sizeof c));
		if (steps)
			add(buf, len, at, ")");
	}
	add(buf, len, at, " at this rate, against %s (%s left)", gpumon_words_room(v, r, sizeof r),
	    bytes_if(v->room != GPUMON_ROOM_UNKNOWN, (double)v->room_bytes, a, sizeof a));
}

const char *gpumon_words_verdict(const gpumon_model *m, const gpumon_verdict *v, double now_s, char *buf, size_t len)
{
	char s[160];
	size_t at = 0;
	buf[0] = 0;
	gpumon_words_series(m, v, s, sizeof s);
	if (v->leak.verdict == GPUMON_LEAK_NONE) {
		add(buf, len, &at, "none: %s does not keep rising (confidence %.2f, %lld points)", s, v->leak.confidence,
		    (long long)v->leak.points);
	} else if (!is_leak(v)) {
		add(buf, len, &at, "not enough data to tell (%lld points of %s)", (long long)v->leak.points, s);
	} else {
		add(buf, len, &at, "LEAK on %s: ", s);
		rate(buf, len, &at, m, v, "+");
		add(buf, len, &at, " (confidence %.2f%s)", v->leak.confidence, v->leak.alert ? ", sustained" : "");
		to_oom(buf, len, &at, v, now_s);
	}
	return buf;
}

const char *gpumon_words_alert(const gpumon_model *m, const gpumon_alert *a, char *buf, size_t len)
{
	char s[160], b[32], c[32];
	size_t at = 0;
	buf[0] = 0;
	if (a->kind == GPUMON_ALERT_HEADROOM) {
		if (a->dev >= 0)
			add(buf, len, &at, "GPU %d", a->dev);
		else
			add(buf, len, &at, "The GPU");
		/* under CUDA_VISIBLE_DEVICES the job calls it by another number: both are said */
		gpumon_model_framework f = {.size = sizeof f};
		for (size_t i = 0; a->dev >= 0 && gpumon_model_framework_get(m, i, &f) == GPUMON_OK; i++)
			if (f.dev == a->dev && f.device >= 0 && f.device != a->dev) {
				add(buf, len, &at, " (%s's device %d)", gpumon_words_safe(f.framework, s, sizeof s), f.device);
				break;
			}
		add(buf, len, &at, " has %s free of %s", gpumon_words_bytes(a->free_bytes, b, sizeof b),
		    gpumon_words_bytes(a->total_bytes, c, sizeof c));
		return buf;
	}
	add(buf, len, &at, "%s rises by ", gpumon_words_series(m, &a->verdict, s, sizeof s));
	rate(buf, len, &at, m, &a->verdict, "");
	to_oom(buf, len, &at, &a->verdict, gpumon_model_seconds(m, a->t_ns));
	return buf;
}

/* Whether an alert of the model is at the moment t (the model marks the one an "alert" event
 * stands for). */
static int alert_at(const gpumon_model *m, double t)
{
	gpumon_alert a;
	for (size_t i = 0; gpumon_model_alerts(m, i, &a, 1) > 0; i++)
		if (gpumon_model_seconds(m, a.t_ns) == t)
			return 1;
	return 0;
}

/* Appends a line to out (n so far, cap at most); returns the count with it. */
static size_t tell(gpumon_told *out, size_t n, size_t cap, double t, int kind, int live, const char *text)
{
	if (out && n < cap) {
		memset(&out[n], 0, sizeof out[n]);
		out[n].time_s = t;
		out[n].kind = kind;
		out[n].live = live;
		snprintf(out[n].text, sizeof out[n].text, "%s", text);
	}
	return n + 1;
}

size_t gpumon_words_told(const gpumon_model *m, gpumon_told *out, size_t cap)
{
	size_t n = 0;
	char text[1024];
	gpumon_alert a;
	if (!m)
		return 0;
	for (size_t i = 0; gpumon_model_alerts(m, i, &a, 1) > 0; i++)
		n = tell(out, n, cap, gpumon_model_seconds(m, a.t_ns),
			 a.kind == GPUMON_ALERT_HEADROOM ? GPUMON_TOLD_HEADROOM : GPUMON_TOLD_LEAK, a.live,
			 gpumon_words_alert(m, &a, text, sizeof text));
	gpumon_model_event e = {.size = sizeof e};
	for (size_t i = 0; gpumon_model_event_get(m, i, &e) == GPUMON_OK; i++) {
		int alert = e.kind && !strcmp(e.kind, "alert"), oom = e.kind && !strcmp(e.kind, "oom");
		double t = gpumon_model_seconds(m, e.t_ns);
		if ((!alert && !oom) || (alert && alert_at(m, t)))
			continue; /* not an alert, or the model's alert above, given live */
		n = tell(out, n, cap, t, alert ? GPUMON_TOLD_ALERT : GPUMON_TOLD_OOM, 1, e.text ? e.text : e.kind);
	}
	/* oldest first, keeping the order of equal times (an insertion sort: some hundreds at most) */
	size_t k = n < cap ? n : cap;
	for (size_t i = 1; out && i < k; i++)
		for (size_t j = i; j > 0 && out[j].time_s < out[j - 1].time_s; j--) {
			gpumon_told t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return n;
}

/* ---- processes, peaks, memory ------------------------------------------------------------------ */

const char *gpumon_words_owner(const char *phrase, char *buf, size_t len)
{
	char s[161]; /* a pod's name comes from the node's directories: escaped, cut to 160 bytes */
	buf[0] = 0;
	if (!phrase || !phrase[0])
		return buf;
	/* the library's phrase for a pid it could not resolve reads as a place, not a holder */
	int placed = !strcmp(phrase, "another PID namespace");
	snprintf(buf, len, "%s %s", placed ? "in" : "held by", safe(s, sizeof s, phrase));
	return buf;
}

const char *gpumon_words_who(const gpumon_model *m, int dev, int64_t pid, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	if (pid < 0 || !gpumon__words_named(m)) {
		add(buf, len, &at, "the process");
		return buf;
	}
	gpumon_model_who w = {.size = sizeof w};
	gpumon_model_who_get(m, dev, (unsigned)pid, &w);
	char u[101], c[101]; /* another user's text, escaped and cut to 100 bytes */
	add(buf, len, &at, "pid %lld", (long long)pid);
	if (w.user[0] && w.command[0])
		add(buf, len, &at, " (%s: %s)", safe(u, sizeof u, w.user), safe(c, sizeof c, w.command));
	else if (w.user[0] || w.command[0])
		add(buf, len, &at, " (%s)", safe(c, sizeof c, w.user[0] ? w.user : w.command));
	char owner[200];
	if (gpumon_words_owner(w.owner, owner, sizeof owner)[0])
		add(buf, len, &at, " %s", owner);
	return buf;
}

const char *gpumon_words_peak_what(int what, int dev, char *buf, size_t len)
{
	if (what == GPUMON_PEAK_JOB && dev >= 0)
		snprintf(buf, len, "the job's processes on GPU %d", dev);
	else if (what == GPUMON_PEAK_JOB)
		snprintf(buf, len, "the job's processes");
	else if (what == GPUMON_PEAK_DEVICE && dev >= 0)
		snprintf(buf, len, "GPU %d's used memory", dev);
	else if (what == GPUMON_PEAK_FRAMEWORK)
		snprintf(buf, len, "the framework's highest allocated");
	else
		snprintf(buf, len, "%s", what == GPUMON_PEAK_DEVICE ? "device" : "n/a");
	return buf;
}

const char *gpumon_words_placed(const gpumon_placed *p, char *buf, size_t len)
{
	char a[32], b[32], c[32], d[32];
	size_t at = 0;
	buf[0] = 0;
	add(buf, len, &at, "NVML %s = the allocator's %s (%s allocated + %s cached)",
	    gpumon_words_bytes(p->nvml_bytes, a, sizeof a), gpumon_words_bytes(p->reserved_bytes, b, sizeof b),
	    gpumon_words_bytes(p->allocated_bytes, c, sizeof c), gpumon_words_bytes(p->cached_bytes, d, sizeof d));
	if (p->outside_known)
		add(buf, len, &at, " + %s outside it (the CUDA context, libraries' workspaces, other allocators)",
		    gpumon_words_bytes(p->outside_bytes, a, sizeof a));
	else
		add(buf, len, &at, "; outside it n/a (NVML's figure was behind the allocator's)");
	return buf;
}

const char *gpumon_words_unaccounted_why(int why)
{
	switch (why) {
	case GPUMON_UNACCOUNTED_DEVICE_UNKNOWN:
		return "the framework did not say its device and its process is on several GPUs";
	case GPUMON_UNACCOUNTED_NOT_VISIBLE: return "the framework's device index is not in the job's CUDA_VISIBLE_DEVICES";
	case GPUMON_UNACCOUNTED_MIG:
		return "the framework's device is a MIG instance, whose memory NVML does not list per process";
	case GPUMON_UNACCOUNTED_NO_GPU:
		return "the job's CUDA_VISIBLE_DEVICES names no GPU of the recording for the framework's device";
	case GPUMON_UNACCOUNTED_NO_NVML_FIGURE: return "NVML lists no memory of the process on its GPU";
	}
	return NULL;
}

const char *gpumon_words_holder_job(const gpumon_holder *h, const char *yes, const char *no, char *buf, size_t len)
{
	const char *job = h->job ? yes : no;
	if (h->rank >= 0)
		snprintf(buf, len, "%s%srank %d", job, job[0] ? ", " : "", h->rank);
	else
		snprintf(buf, len, "%s", job);
	return buf;
}

/* ---- memory health ------------------------------------------------------------------------------ */

/* Appends a part to buf, after "; " when buf holds one already (kept NUL-terminated, cut at len). */
static void add_part(char *buf, size_t len, const char *part)
{
	size_t n = strlen(buf);
	if (n + 1 < len)
		snprintf(buf + n, len - n, "%s%s", n ? "; " : "", part);
}

const char *gpumon_words_health(unsigned problems, const gpumon_device_props *p, char *buf, size_t len)
{
	char part[128];
	if (!len)
		return buf;
	buf[0] = 0;
	if (problems & GPUMON_HEALTH_ECC_UNCORRECTED) {
		unsigned long long n = (unsigned long long)p->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_VOLATILE];
		snprintf(part, sizeof part, "%llu uncorrectable ECC error%s since the driver loaded", n, n == 1 ? "" : "s");
		add_part(buf, len, part);
	}
	if (problems & GPUMON_HEALTH_REMAP_FAILURE)
		add_part(buf, len, "a row remapping failed: the board needs service");
	if (problems & GPUMON_HEALTH_REMAP_PENDING)
		add_part(buf, len, "a row remapping waits for a GPU reset");
	if (problems & GPUMON_HEALTH_REMAP_UNCORRECTABLE) {
		snprintf(part, sizeof part, "%u row%s remapped for uncorrectable errors", p->remapped_uncorrectable,
			 p->remapped_uncorrectable == 1 ? "" : "s");
		add_part(buf, len, part);
	}
	if (problems & GPUMON_HEALTH_RETIRED_PENDING)
		add_part(buf, len, "pages wait to be retired at the next reboot");
	if (problems & GPUMON_HEALTH_RETIRED_DBE) {
		snprintf(part, sizeof part, "%u page%s retired for double-bit errors", p->retired_dbe,
			 p->retired_dbe == 1 ? "" : "s");
		add_part(buf, len, part);
	}
	return buf;
}
