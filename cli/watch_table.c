/* SPDX-License-Identifier: MIT */
/* watch_table.c — the process table of the `gpumon watch` screen: which columns fit the terminal
 * (GPU, pid, user and memory always; then change and leak rate per minute, host CPU %, RSS, the
 * owner when any process has one, and run time), the rows with their leak marks, and the line on
 * the selected process. The command takes what is left, so no line is ever wider than the screen. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "watch_draw.h"

#define MIN_COMMAND 16 /* columns the command keeps at least */

enum { C_MARK, C_GPU, C_PID, C_USER, C_MEMORY, C_CHANGE, C_LEAK, C_CPU, C_RSS, C_TIME, C_OWNER, C_COUNT };

static const struct column {
	const char *head;
	int width, left;
} columns[C_COUNT] = {
	[C_MARK] = {"", 1, 0},         [C_GPU] = {"GPU", 3, 0},        [C_PID] = {"PID", 7, 0},
	[C_USER] = {"USER", 10, 1},    [C_MEMORY] = {"MEMORY", 10, 0}, [C_CHANGE] = {"CHG/MIN", 10, 0},
	[C_LEAK] = {"LEAK/MIN", 10, 0}, [C_CPU] = {"CPU%", 5, 0},      [C_RSS] = {"RSS", 8, 0},
	[C_TIME] = {"TIME", 9, 0},     [C_OWNER] = {"OWNER", 20, 1},
};

/* The columns shown: a bit per column, in the order of the enum. */
typedef unsigned layout;

/* The columns that fit cols: the first five always, then the others by importance while the command
 * keeps MIN_COMMAND columns; host figures only live, the owner only when a row has one. */
static layout choose(const watch_snap *snap, const watch_view *v, int cols)
{
	static const int optional[] = {C_CHANGE, C_LEAK, C_CPU, C_RSS, C_OWNER, C_TIME};
	layout l = 0;
	int used = 0;
	for (int c = C_MARK; c <= C_MEMORY; c++) {
		l |= 1u << c;
		used += columns[c].width + 1;
	}
	int any_owner = 0;
	for (size_t i = 0; i < snap->nproc && !any_owner; i++)
		any_owner = snap->procs[i].owner[0] != 0;
	for (size_t k = 0; k < sizeof optional / sizeof optional[0]; k++) {
		int c = optional[k];
		if ((c == C_CPU || c == C_RSS || c == C_TIME) && !v->host)
			continue;
		if (c == C_OWNER && !any_owner)
			continue;
		if (used + columns[c].width + 1 + MIN_COMMAND <= cols) {
			l |= 1u << c;
			used += columns[c].width + 1;
		}
	}
	return l;
}

/* Appends one cell, padded to its column's width (longer text is cut), and a blank. */
static size_t cell(char *buf, size_t len, size_t at, int c, const char *text)
{
	if (at >= len)
		return at;
	int n = columns[c].left ? snprintf(buf + at, len - at, "%-*.*s ", columns[c].width, columns[c].width, text)
				: snprintf(buf + at, len - at, "%*.*s ", columns[c].width, columns[c].width, text);
	return n < 0 ? at : at + (size_t)n < len ? at + (size_t)n : len - 1;
}

/* Where column c starts in a line of layout l. */
static int column_x(layout l, int c)
{
	int x = 0;
	for (int k = 0; k < c; k++)
		if (l & (1u << k))
			x += columns[k].width + 1;
	return x;
}

static void header_text(layout l, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	for (int c = 0; c < C_COUNT; c++)
		if (l & (1u << c))
			at = cell(buf, len, at, c, columns[c].head);
	if (at < len)
		snprintf(buf + at, len - at, "COMMAND");
}

/* One row in layout l: the values of the columns shown, then the command. */
static void row_text(const watch_proc *p, const watch_host *h, layout l, char *buf, size_t len)
{
	char t[C_COUNT][100]; /* room for the longest user or owner: the cell cuts it */
	snprintf(t[C_MARK], sizeof t[C_MARK], "%c", p->leak ? '!' : ' ');
	snprintf(t[C_GPU], sizeof t[C_GPU], "%u", p->gpu);
	snprintf(t[C_PID], sizeof t[C_PID], "%u", p->pid);
	snprintf(t[C_USER], sizeof t[C_USER], "%s", p->user[0] ? p->user : "n/a");
	if (p->flags & GPUMON_PROC_USED_KNOWN)
		cli_format_bytes(t[C_MEMORY], sizeof t[C_MEMORY], p->used_bytes);
	else
		snprintf(t[C_MEMORY], sizeof t[C_MEMORY], "n/a");
	if (p->change_known)
		watch_format_change(t[C_CHANGE], sizeof t[C_CHANGE], p->change_bytes_per_min);
	else
		snprintf(t[C_CHANGE], sizeof t[C_CHANGE], "n/a");
	t[C_LEAK][0] = 0;
	if (p->leak && p->leak_rate_known)
		watch_format_change(t[C_LEAK], sizeof t[C_LEAK], p->leak_bytes_per_min);
	snprintf(t[C_CPU], sizeof t[C_CPU], h->cpu_known ? (h->cpu_pct < 999.5 ? "%.1f" : "%.0f") : "n/a", h->cpu_pct);
	if (h->rss_known)
		cli_format_bytes(t[C_RSS], sizeof t[C_RSS], h->rss_bytes);
	else
		snprintf(t[C_RSS], sizeof t[C_RSS], "n/a");
	if (h->elapsed_known)
		watch_format_elapsed(t[C_TIME], sizeof t[C_TIME], h->elapsed_s);
	else
		snprintf(t[C_TIME], sizeof t[C_TIME], "n/a");
	snprintf(t[C_OWNER], sizeof t[C_OWNER], "%s", p->owner[0] ? p->owner : "n/a");
	size_t at = 0;
	buf[0] = 0;
	for (int c = 0; c < C_COUNT; c++)
		if (l & (1u << c))
			at = cell(buf, len, at, c, t[c]);
	const char *cmd = p->command[0] ? p->command : (p->flags & GPUMON_PROC_FOREIGN) ? "(other PID namespace)" : "n/a";
	if (at < len)
		snprintf(buf + at, len - at, "%s", cmd);
}

static void table_header(const watch_view *v, layout l, int y, int cols)
{
	char h[256], filt[192] = "";
	header_text(l, h, sizeof h);
	move(y, 0);
	attrset(A_REVERSE);
	hline(' ', cols);
	watch_put(y, 0, cols, A_REVERSE | A_BOLD, h);
	/* the filters, then the sort order; shorter forms, then without the sort order, when narrow */
	for (int form = 0; form < 3; form++) {
		int n = 0;
		filt[0] = 0;
		if (v->gpu_filter >= 0)
			n += snprintf(filt + n, sizeof filt - (size_t)n, form ? " GPU %d" : " GPU %d only", v->gpu_filter);
		if (v->user_filter[0] && n < (int)sizeof filt)
			n += snprintf(filt + n, sizeof filt - (size_t)n, form ? " user~%s" : " user ~%s", v->user_filter);
		if (v->text_filter[0] && n < (int)sizeof filt)
			n += snprintf(filt + n, sizeof filt - (size_t)n, form ? " /%s" : " filter /%s", v->text_filter);
		if (form < 2 && n < (int)sizeof filt)
			snprintf(filt + n, sizeof filt - (size_t)n, form ? " by %s" : "  sort: %s", watch_sort_name(v->sort));
		int w = (int)strlen(filt) + 1;
		if (cols - w > (int)strlen(h)) { /* else the key line says it */
			watch_put(y, cols - w, cols, A_REVERSE | A_BOLD, filt);
			break;
		}
	}
}

static void table_row(const watch_proc *p, const watch_view *v, layout l, uint64_t now_ns, int y, int cols,
		      int selected)
{
	char line[900];
	watch_host h;
	memset(&h, 0, sizeof h);
	if (v->host && !(p->flags & GPUMON_PROC_FOREIGN))
		watch_hoststat_get(v->host, p->pid, now_ns, &h);
	row_text(p, &h, l, line, sizeof line);
	attr_t at = selected ? A_REVERSE : A_NORMAL;
	if (selected) {
		move(y, 0);
		attrset(at);
		hline(' ', cols);
	}
	watch_put(y, 0, cols, at, line);
	if (p->leak) {
		attr_t red = at | watch_attr(v, WATCH_PAIR_FULL, A_BOLD) | A_BOLD;
		int x = column_x(l, C_LEAK);
		watch_put(y, 0, 1, red, "!");
		if (l & (1u << C_LEAK) && (size_t)x < strlen(line)) {
			char leak[16];
			snprintf(leak, sizeof leak, "%.*s", columns[C_LEAK].width, line + x);
			watch_put(y, x, x + columns[C_LEAK].width, red, leak);
		}
	}
}

/* One line on the selected process: where it is, whether it leaks, its host figures and owner, its
 * whole command. */
static void detail(const watch_proc *p, const watch_view *v, uint64_t now_ns, int y, int cols)
{
	char line[1200], extra[256] = "", a[32], b[32];
	if (!p) {
		watch_put(y, 0, cols, A_DIM, v->gpu_filter >= 0 || v->user_filter[0] || v->text_filter[0]
						     ? "no process matches the filter (c clears it)" : "no process holds GPU memory");
		return;
	}
	if (p->leak) {
		watch_put(y, 0, cols, watch_attr(v, WATCH_PAIR_FULL, A_BOLD), watch_detail_text(p, line, sizeof line));
		return;
	}
	watch_host h;
	memset(&h, 0, sizeof h);
	if (v->host && !(p->flags & GPUMON_PROC_FOREIGN))
		watch_hoststat_get(v->host, p->pid, now_ns, &h);
	int n = 0;
	if (p->owner[0])
		n += snprintf(extra + n, sizeof extra - (size_t)n, ", %s", p->owner);
	if (p->rank >= 0 && p->world_size > 0 && n < (int)sizeof extra)
		n += snprintf(extra + n, sizeof extra - (size_t)n, ", rank %d of %d", p->rank, p->world_size);
	else if (p->rank >= 0 && n < (int)sizeof extra)
		n += snprintf(extra + n, sizeof extra - (size_t)n, ", rank %d", p->rank);
	if (h.cpu_known && n < (int)sizeof extra)
		n += snprintf(extra + n, sizeof extra - (size_t)n, ", CPU %.1f %%", h.cpu_pct);
	if (h.rss_known && n < (int)sizeof extra)
		n += snprintf(extra + n, sizeof extra - (size_t)n, ", RSS %s", cli_format_bytes(a, sizeof a, h.rss_bytes));
	if (h.elapsed_known && n < (int)sizeof extra)
		snprintf(extra + n, sizeof extra - (size_t)n, ", up %s", watch_format_elapsed(b, sizeof b, h.elapsed_s));
	if (p->placed_known && n < (int)sizeof extra) {
		n += snprintf(extra + n, sizeof extra - (size_t)n, ", allocator %s",
			      cli_format_bytes(a, sizeof a, p->placed.reserved_bytes));
		if (p->placed.outside_known && n < (int)sizeof extra)
			snprintf(extra + n, sizeof extra - (size_t)n, " + outside %s",
				 cli_format_bytes(b, sizeof b, p->placed.outside_bytes));
	}
	snprintf(line, sizeof line, "pid %u on GPU %u (user %s%s): %s", p->pid, p->gpu, p->user[0] ? p->user : "n/a",
		 extra, p->command[0] ? p->command : "n/a");
	watch_put(y, 0, cols, A_NORMAL, line);
}

void watch_draw_table(const watch_snap *snap, watch_view *v, const size_t *idx, size_t n, int y, int cols)
{
	layout l = choose(snap, v, cols);
	uint64_t now = cli_now_ns();
	watch_hoststat_sweep(v->host);
	table_header(v, l, y++, cols);
	for (size_t i = v->top; i < n && i < v->top + v->page_rows; i++)
		table_row(&snap->procs[idx[i]], v, l, now, y++, cols, i == v->cur);
	if (!n)
		watch_put(y, 2, cols, A_DIM, "(none)");
	detail(n ? &snap->procs[idx[v->cur]] : NULL, v, now, getmaxy(stdscr) - 2, cols);
}

const char *watch_placed_text(const watch_proc *p, char *buf, size_t len)
{
	char a[32], b[32], c[32], d[32];
	buf[0] = 0;
	if (!p->placed_known)
		return buf;
	const gpumon_placed *pl = &p->placed;
	int n = snprintf(buf, len, "pid %u on GPU %u: NVML %s = allocator %s (%s allocated + %s cached)", p->pid, p->gpu,
			 cli_format_bytes(a, sizeof a, pl->nvml_bytes), cli_format_bytes(b, sizeof b, pl->reserved_bytes),
			 cli_format_bytes(c, sizeof c, pl->allocated_bytes),
			 cli_format_bytes(d, sizeof d, pl->cached_bytes));
	if (n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " + outside %s",
			 pl->outside_known ? cli_format_bytes(a, sizeof a, pl->outside_bytes) : "n/a");
	return buf;
}

const char *watch_oom_text(const watch_oom *o, char *buf, size_t len)
{
	char a[32];
	buf[0] = 0;
	if (!o->known)
		return buf;
	int n = snprintf(buf, len, "out of memory at %.1f s", o->t_s);
	if (o->dev >= 0 && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " on GPU %d", o->dev);
	if (n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ": %s", o->causes);
	if (o->site_known && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, "; most held at %s, %s", o->site, cli_format_bytes(a, sizeof a, o->site_bytes));
	return buf;
}
