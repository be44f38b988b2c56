/* SPDX-License-Identifier: MIT */
/* report_text.c — the plain-text summary of `gpumon report`, printed from the report document so
 * that the text, JSON and HTML outputs cannot disagree. */
#include <string.h>

#include "cli.h"
#include "report.h"

static const char *bytes(char *buf, size_t len, const json_t *v)
{
	if (!json_is_number(v))
		return "n/a";
	double b = json_number_value(v);
	if (b < 0) {
		char tmp[32];
		snprintf(buf, len, "-%s", cli_format_bytes(tmp, sizeof tmp, (uint64_t)-b));
		return buf;
	}
	return cli_format_bytes(buf, len, (uint64_t)b);
}

static const char *str(const json_t *o, const char *key, const char *dflt)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : dflt;
}

static double num(const json_t *o, const char *key, double dflt)
{
	json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : dflt;
}

/* ", pid N" when o names a process, "" when not (a CSV) */
static const char *pid_text(char *buf, size_t len, const json_t *o)
{
	buf[0] = 0;
	if (json_is_integer(json_object_get(o, "pid")))
		snprintf(buf, len, ", pid %lld", (long long)num(o, "pid", -1));
	return buf;
}

static void print_owner(FILE *f, const json_t *owner)
{
	if (!json_is_object(owner))
		return;
	fprintf(f, " (pid %lld", (long long)num(owner, "pid", -1));
	if (json_is_string(json_object_get(owner, "user")))
		fprintf(f, ", %s", str(owner, "user", ""));
	if (json_is_string(json_object_get(owner, "command")))
		fprintf(f, ": %.60s", str(owner, "command", ""));
	fprintf(f, ")");
}

static void print_leak(FILE *f, const json_t *l)
{
	char a[32];
	const char *v = str(l, "verdict", "insufficient_data");
	fprintf(f, "Leak:           ");
	if (!strcmp(v, "insufficient_data")) {
		fprintf(f, "not enough data to tell (%lld points of %s)\n", (long long)num(l, "points", 0),
			str(l, "series", "no memory series"));
		return;
	}
	if (!strcmp(v, "none")) {
		fprintf(f, "none: the floor of %s does not keep rising (confidence %.2f)\n", str(l, "series", "?"),
			num(l, "confidence", 0));
		return;
	}
	fprintf(f, "LEAK on %s: ", str(l, "series", "?"));
	if (num(l, "rate_bytes_per_step", -1) > 0)
		fprintf(f, "+%s a step", bytes(a, sizeof a, json_object_get(l, "rate_bytes_per_step")));
	else
		fprintf(f, "+%s a second", bytes(a, sizeof a, json_object_get(l, "rate_bytes_per_second")));
	if (num(l, "start_step", -1) >= 0)
		fprintf(f, " from step %lld", (long long)num(l, "start_step", 0));
	else if (num(l, "start_time", -1) >= 0)
		fprintf(f, " from %.1f s", num(l, "start_time", 0));
	fprintf(f, " (confidence %.2f)", num(l, "confidence", 0));
	if (num(l, "steps_to_oom", -1) >= 0)
		fprintf(f, "; out of memory in about %.0f more steps", num(l, "steps_to_oom", 0));
	if (num(l, "seconds_to_oom", -1) >= 0)
		fprintf(f, " (%.0f s)", num(l, "seconds_to_oom", 0));
	fprintf(f, "\n");
}

static void print_oom(FILE *f, const json_t *o)
{
	char a[32];
	fprintf(f, "Out of memory:  at %.1f s on GPU %lld: %s\n", num(o, "time", 0), (long long)num(o, "dev", 0),
		str(o, "cause", "unknown"));
	fprintf(f, "  %s\n", str(o, "diagnosis", ""));
	if (json_is_string(json_object_get(o, "message")) && str(o, "message", "")[0])
		fprintf(f, "  message: %.200s\n", str(o, "message", ""));
	size_t i;
	json_t *h;
	json_array_foreach(json_object_get(o, "holders"), i, h)
	{
		if (i == 0)
			fprintf(f, "  who held what:\n");
		fprintf(f, "    %-8lld %-10.10s %10s %-4s %.50s\n", (long long)num(h, "pid", -1), str(h, "user", "?"),
			bytes(a, sizeof a, json_object_get(h, "bytes")),
			json_is_true(json_object_get(h, "job")) ? "job" : "", str(h, "command", ""));
	}
	json_t *p;
	json_array_foreach(json_object_get(o, "last_seconds"), i, p)
	{
		if (i == 0)
			fprintf(f, "  the last seconds (used):");
		fprintf(f, " %.1fs %s", num(p, "time", 0), bytes(a, sizeof a, json_object_get(p, "used_bytes")));
	}
	if (json_array_size(json_object_get(o, "last_seconds")))
		fprintf(f, "\n");
}

void report_print_text(FILE *f, const json_t *doc)
{
	char a[32], b[32];
	const json_t *s = json_object_get(doc, "source");
	fprintf(f, "Report of %s (%s%s%s)\n", str(s, "path", "?"), str(s, "type", "?"),
		json_is_string(json_object_get(s, "kind")) ? ", " : "", str(s, "kind", ""));
	if (json_is_string(json_object_get(s, "command")))
		fprintf(f, "Command:        %s\n", str(s, "command", ""));
	if (json_is_string(json_object_get(s, "host")))
		fprintf(f, "Host:           %s\n", str(s, "host", ""));
	if (json_is_string(json_object_get(s, "start_utc")))
		fprintf(f, "Started:        %s\n", str(s, "start_utc", ""));
	if (json_is_number(json_object_get(s, "duration_s")))
		fprintf(f, "Duration:       %.1f s\n", num(s, "duration_s", 0));
	if (json_is_number(json_object_get(s, "exit_status")))
		fprintf(f, "Exit status:    %lld\n", (long long)num(s, "exit_status", 0));
	size_t i;
	json_t *d;
	json_array_foreach(json_object_get(doc, "devices"), i, d)
	{
		fprintf(f, "GPU %lld:          %s, %s\n", (long long)num(d, "dev", 0), str(d, "name", "n/a"),
			bytes(a, sizeof a, json_object_get(d, "total_bytes")));
	}
	print_leak(f, json_object_get(doc, "leak"));
	const json_t *p = json_object_get(doc, "peak");
	fprintf(f, "Peak:           ");
	if (json_is_number(json_object_get(p, "bytes"))) {
		fprintf(f, "%s (%s", bytes(a, sizeof a, json_object_get(p, "bytes")), str(p, "what", "?"));
		if (json_is_number(json_object_get(p, "dev")))
			fprintf(f, ", GPU %lld", (long long)num(p, "dev", 0));
		fprintf(f, ") at %.1f s", num(p, "time", 0));
		print_owner(f, json_object_get(p, "owner"));
		fprintf(f, "\n");
	} else {
		fprintf(f, "n/a (no memory figures)\n");
	}
	const json_t *fr = json_object_get(doc, "fragmentation"), *un = json_object_get(doc, "unaccounted");
	if (json_is_object(fr))
		fprintf(f, "Fragmentation:  at most %s reserved but not allocated (at %.1f s%s)\n",
			bytes(a, sizeof a, json_object_get(fr, "bytes")), num(fr, "time", 0), pid_text(b, sizeof b, fr));
	else
		fprintf(f, "Fragmentation:  n/a (needs the framework's allocated and reserved figures)\n");
	if (json_is_object(un))
		fprintf(f, "Unaccounted:    at most %s held outside the allocator (NVML - reserved; at %.1f s%s)\n",
			bytes(a, sizeof a, json_object_get(un, "bytes")), num(un, "time", 0), pid_text(b, sizeof b, un));
	else
		fprintf(f, "Unaccounted:    n/a (needs the framework's reserved figure and the process's NVML figure)\n");
	json_t *w;
	json_array_foreach(json_object_get(doc, "windows"), i, w)
	{
		if (i == 0)
			fprintf(f, "Peaks by window:\n");
		fprintf(f, "  %8.1f-%-8.1f s %10s at %.1f s", num(w, "start", 0), num(w, "end", 0),
			bytes(a, sizeof a, json_object_get(w, "peak_bytes")), num(w, "peak_time", 0));
		print_owner(f, json_object_get(w, "owner"));
		fprintf(f, "\n");
	}
	if (json_is_object(json_object_get(doc, "oom")))
		print_oom(f, json_object_get(doc, "oom"));
	json_array_foreach(json_object_get(doc, "alerts"), i, w)
	{
		if (i == 0)
			fprintf(f, "Alerts:\n");
		fprintf(f, "  %.1f s: %s\n", num(w, "time", 0), str(w, "text", ""));
	}
	if (json_is_string(json_object_get(s, "damage")))
		fprintf(f, "Not read:       %s\n", str(s, "damage", ""));
}
