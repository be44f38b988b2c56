/* SPDX-License-Identifier: MIT */
/* watch_gpu.c — the GPU panels of `gpumon watch`: per GPU a title line with utilisation,
 * temperature and power, a memory bar (driver-reserved, the selected process's share, other used,
 * free) with its figures, a memory history graph of the last minutes, and who holds the memory when
 * the GPU is nearly full. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "watch_draw.h"

#define GRAPH_LABEL 10 /* columns left of the graph for its scale */
#define MAX_GRAPH_ROWS 4
#define BAR_TEXT 46 /* columns right of the bar for its figures: the longest they can be */
#define COMPACT_TEXT 52 /* likewise on the one-line form */
#define COMPACT_BAR_X 7 /* where the bar starts on the one-line form, after "GPU NN" */

int watch_nearly_full(const watch_gpu *g)
{
	return g->have_sample && !g->lost && g->s.memory_total_bytes &&
	       g->s.memory_used_bytes * 100 >= g->s.memory_total_bytes * WATCH_NEARLY_FULL_PCT;
}

static int shown(const watch_view *v, unsigned i)
{
	return (!v->picked || v->picked[i]) && (v->gpu_filter < 0 || (unsigned)v->gpu_filter == i);
}

/* Appends to the text at *p (room *n), truncating. */
static void addf(char **p, size_t *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void addf(char **p, size_t *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(*p, *n, fmt, ap);
	va_end(ap);
	if (k > 0 && (size_t)k < *n) {
		*p += k;
		*n -= (size_t)k;
	}
}

const char *watch_gpu_stats_text(const watch_gpu *g, char *buf, size_t len)
{
	char *p = buf;
	size_t n = len;
	const gpumon_device_sample *s = &g->s;
	buf[0] = 0;
	if (s->present & GPUMON_F_UTIL_GPU)
		addf(&p, &n, "util %3u %%", s->util_gpu_pct);
	else
		addf(&p, &n, "util  n/a");
	if (s->present & GPUMON_F_UTIL_MEMORY)
		addf(&p, &n, "  mem-util %3u %%", s->util_memory_pct);
	else
		addf(&p, &n, "  mem-util  n/a");
	if (s->present & GPUMON_F_TEMPERATURE)
		addf(&p, &n, "  %3u C", s->temperature_c);
	else
		addf(&p, &n, "  temp n/a");
	if (s->present & GPUMON_F_POWER)
		addf(&p, &n, "  %6.1f W", s->power_mw / 1000.0);
	else
		addf(&p, &n, "  power n/a");
	return buf;
}

static void title_line(const watch_gpu *g, const watch_view *v, int y, int cols)
{
	char left[160], right[128];
	snprintf(left, sizeof left, "GPU %u  %s", g->info.index,
		 (g->info.present & GPUMON_INFO_NAME) ? g->info.name : "n/a");
	int x = watch_put(y, 0, cols, A_BOLD, left);
	if (g->lost) {
		watch_put(y, x + 2, cols, watch_attr(v, WATCH_PAIR_FULL, A_REVERSE),
			  "LOST: fell off the bus or needs a reset; the other GPUs go on");
		return;
	}
	if (!g->have_sample) {
		watch_put(y, x + 2, cols, A_NORMAL, "waiting for the first sample");
		return;
	}
	watch_gpu_stats_text(g, right, sizeof right);
	int w = (int)strlen(right);
	watch_put(y, cols - w > x + 2 ? cols - w : x + 2, cols, A_NORMAL, right);
}

/* Draws "[bar]" from column x0 with w cells inside: driver-reserved, the selected process's share,
 * other used memory, free; widths rounded up so that any use shows. Returns the column after it. */
static int draw_bar(const watch_gpu *g, const watch_view *v, const watch_proc *sel, int y, int x0, int w)
{
	const gpumon_device_sample *s = &g->s;
	uint64_t total = s->memory_total_bytes ? s->memory_total_bytes : 1;
	uint64_t reserved = (s->present & GPUMON_F_MEM_RESERVED) ? s->memory_reserved_bytes : 0;
	uint64_t used = s->memory_used_bytes, mine = 0;
	if (sel && sel->gpu == g->info.index && (sel->flags & GPUMON_PROC_USED_KNOWN))
		mine = sel->used_bytes < used ? sel->used_bytes : used;
	int rw = (int)((reserved * (uint64_t)w + total - 1) / total);
	int uw = (int)((used * (uint64_t)w + total - 1) / total);
	int mw = mine ? (int)((mine * (uint64_t)w + total - 1) / total) : 0;
	if (rw > w)
		rw = w;
	if (uw > w - rw)
		uw = w - rw;
	if (mw > uw)
		mw = uw;
	unsigned pct = (unsigned)(used * 100 / total);
	int pair = pct >= WATCH_NEARLY_FULL_PCT ? WATCH_PAIR_FULL : pct >= 75 ? WATCH_PAIR_WARN : WATCH_PAIR_USED;
	int x = watch_put(y, x0, x0 + 1, A_NORMAL, "[");
	watch_fill(v, y, x, rw, watch_attr(v, WATCH_PAIR_RESERVED, A_NORMAL), L'\u2592', '%');
	x += rw;
	watch_fill(v, y, x, mw, watch_attr(v, WATCH_PAIR_SEL, A_BOLD), L'\u2593', '@');
	x += mw;
	watch_fill(v, y, x, uw - mw, watch_attr(v, pair, A_NORMAL), L'\u2588', '#');
	x += uw - mw;
	watch_fill(v, y, x, w - rw - uw, A_DIM, L'\u2591', '.');
	x += w - rw - uw;
	return watch_put(y, x, x + 1, A_NORMAL, "]");
}

static unsigned used_pct(const watch_gpu *g)
{
	uint64_t total = g->s.memory_total_bytes ? g->s.memory_total_bytes : 1;
	return (unsigned)(g->s.memory_used_bytes * 100 / total);
}

/* The bar with used, reserved and total; the same bar width on every GPU, so that they compare at
 * a glance. */
const char *watch_gpu_memory_text(const watch_gpu *g, char *buf, size_t len)
{
	const gpumon_device_sample *s = &g->s;
	char a[32], b[32], c[32];
	if (s->present & GPUMON_F_MEM_RESERVED)
		snprintf(buf, len, "%s used + %s rsv / %s  %u %%", cli_format_bytes(a, sizeof a, s->memory_used_bytes),
			 cli_format_bytes(b, sizeof b, s->memory_reserved_bytes),
			 cli_format_bytes(c, sizeof c, s->memory_total_bytes), used_pct(g));
	else
		snprintf(buf, len, "%s used (with rsv) / %s  %u %%", cli_format_bytes(a, sizeof a, s->memory_used_bytes),
			 cli_format_bytes(c, sizeof c, s->memory_total_bytes), used_pct(g));
	return buf;
}

static void bar_line(const watch_gpu *g, const watch_view *v, const watch_proc *sel, int y, int cols)
{
	char text[128];
	watch_gpu_memory_text(g, text, sizeof text);
	int x = draw_bar(g, v, sel, y, 1, cols - 5 - BAR_TEXT);
	watch_put(y, x + 1, cols, used_pct(g) >= WATCH_NEARLY_FULL_PCT ? A_BOLD : A_NORMAL, text);
}

/* One line for a GPU when there are too many for the full panels: index, bar, figures. */
static void compact_line(const watch_gpu *g, const watch_view *v, const watch_proc *sel, int y, int cols)
{
	char label[16], text[160], a[32], c[32], *p = text;
	size_t n = sizeof text;
	const gpumon_device_sample *s = &g->s;
	snprintf(label, sizeof label, "GPU %u", g->info.index);
	int x = watch_put(y, 0, cols, A_BOLD, label);
	if (g->lost || !g->have_sample) {
		watch_put(y, x + 1, cols, g->lost ? watch_attr(v, WATCH_PAIR_FULL, A_REVERSE) : A_NORMAL,
			  g->lost ? "LOST: fell off the bus or needs a reset" : "waiting for the first sample");
		return;
	}
	addf(&p, &n, "%8s / %-8s %3u %%", cli_format_bytes(a, sizeof a, s->memory_used_bytes),
	     cli_format_bytes(c, sizeof c, s->memory_total_bytes), used_pct(g));
	if (s->present & GPUMON_F_UTIL_GPU)
		addf(&p, &n, "  util %3u %%", s->util_gpu_pct);
	else
		addf(&p, &n, "  util  n/a");
	if (s->present & GPUMON_F_TEMPERATURE)
		addf(&p, &n, "  %3u C", s->temperature_c);
	else
		addf(&p, &n, "  n/a C");
	if (s->present & GPUMON_F_POWER)
		addf(&p, &n, "  %4.0f W", s->power_mw / 1000.0);
	else
		addf(&p, &n, "  n/a W");
	x = draw_bar(g, v, sel, y, COMPACT_BAR_X, cols - COMPACT_BAR_X - 3 - COMPACT_TEXT);
	watch_put(y, x + 1, cols, used_pct(g) >= WATCH_NEARLY_FULL_PCT ? A_BOLD : A_NORMAL, text);
}

/* The largest value over the seconds [from, to) of the history, WATCH_NONE when none. */
static uint64_t hist_max(const watch_gpu *g, size_t from, size_t to)
{
	uint64_t m = WATCH_NONE;
	for (size_t i = from; i < to && i < WATCH_HIST_SECONDS; i++)
		if (g->hist[i] != WATCH_NONE && (m == WATCH_NONE || g->hist[i] > m))
			m = g->hist[i];
	return m;
}

/* The history graph: the last 1-5 minutes (as much as is known), one column a few seconds, scaled
 * to the range of the window (or 0..total when the memory barely moved), in eighths of a row. */
static void graph(const watch_gpu *g, const watch_view *v, int y, int h, int cols)
{
	static const wchar_t blocks[9] = L" \u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588";
	int w = cols - GRAPH_LABEL - 1;
	unsigned minutes = (g->hist_known + 59) / 60;
	minutes = minutes < 1 ? 1 : minutes > 5 ? 5 : minutes;
	size_t span = minutes * 60u, first = WATCH_HIST_SECONDS - span;
	uint64_t lo = WATCH_NONE, hi = 0;
	for (size_t i = first; i < WATCH_HIST_SECONDS; i++)
		if (g->hist[i] != WATCH_NONE) {
			lo = g->hist[i] < lo ? g->hist[i] : lo;
			hi = g->hist[i] > hi ? g->hist[i] : hi;
		}
	uint64_t total = g->s.memory_total_bytes;
	if (lo == WATCH_NONE)
		lo = hi = 0;
	if (hi - lo < (total / 100 > (1u << 20) ? total / 100 : (1u << 20))) {
		lo = 0;
		hi = total > hi ? total : hi;
	}
	char a[32], label[32];
	for (int r = 0; r < h; r++) {
		label[0] = 0;
		if (r == 0)
			snprintf(label, sizeof label, "%9s", cli_format_bytes(a, sizeof a, hi));
		else if (r == h - 1)
			snprintf(label, sizeof label, "%9s", cli_format_bytes(a, sizeof a, lo));
		else if (r == 1)
			snprintf(label, sizeof label, "%5u min", minutes);
		if (h == 1)
			snprintf(label, sizeof label, "last %u m", minutes);
		watch_put(y + r, 0, GRAPH_LABEL, A_DIM, label);
	}
	attr_t at = watch_attr(v, WATCH_PAIR_GRAPH, A_NORMAL);
	for (int c = 0; c < w; c++) {
		uint64_t m = hist_max(g, first + (size_t)c * span / (size_t)w, first + ((size_t)c + 1) * span / (size_t)w);
		if (m == WATCH_NONE)
			m = hist_max(g, first + (size_t)c * span / (size_t)w, first + (size_t)c * span / (size_t)w + 1);
		if (m == WATCH_NONE)
			continue;
		uint64_t range = hi > lo ? hi - lo : 1, v8 = (uint64_t)h * 8;
		uint64_t e = m <= lo ? 1 : 1 + (m - lo) * (v8 - 1) / range;
		for (int r = 0; r < h; r++) {
			uint64_t level = (uint64_t)(h - 1 - r) * 8;
			int fill = e <= level ? 0 : e - level >= 8 ? 8 : (int)(e - level);
			if (!fill)
				continue;
			watch_fill(v, y + r, GRAPH_LABEL + c, 1, at, blocks[fill], fill == 8 ? '#' : fill >= 4 ? '+' : '.');
		}
	}
}

const char *watch_holders_text(const watch_snap *snap, const watch_gpu *g, char *buf, size_t len)
{
	char a[32];
	size_t used_idx[3];
	int n = 0;
	for (size_t k = 0; k < 3; k++) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < snap->nproc; i++) {
			const watch_proc *p = &snap->procs[i];
			int taken = 0;
			for (int j = 0; j < n; j++)
				taken |= used_idx[j] == i;
			if (p->gpu != g->info.index || taken)
				continue;
			if (best == SIZE_MAX || p->used_bytes > snap->procs[best].used_bytes)
				best = i;
		}
		if (best != SIZE_MAX)
			used_idx[n++] = best;
	}
	int at = snprintf(buf, len, " nearly full (%u %%): ", used_pct(g));
	if (!n && at > 0 && (size_t)at < len)
		snprintf(buf + at, len - (size_t)at, "no process is listed as holding it");
	for (int j = 0; j < n && at > 0 && (size_t)at < len; j++) {
		const watch_proc *p = &snap->procs[used_idx[j]];
		at += snprintf(buf + at, len - (size_t)at, "%spid %u %s %s %.40s", j ? "; " : "", p->pid,
			       p->user[0] ? p->user : "n/a",
			       (p->flags & GPUMON_PROC_USED_KNOWN) ? cli_format_bytes(a, sizeof a, p->used_bytes) : "n/a",
			       p->command[0] ? p->command : "n/a");
	}
	return buf;
}

/* "nearly full (97 %): pid 744 root 31.6 GiB python3 train.py; ..." — the three largest holders. */
static void holders_line(const watch_snap *snap, const watch_gpu *g, const watch_view *v, int y, int cols)
{
	char line[512];
	watch_put(y, 0, cols, watch_attr(v, WATCH_PAIR_FULL, A_BOLD), watch_holders_text(snap, g, line, sizeof line));
}

/* "! memory health: ..." under a GPU whose memory needs attention: its problems, cut to the width
 * (show gives one a line). */
static void health_line(const watch_gpu *g, const watch_view *v, int y, int cols)
{
	char line[300];
	snprintf(line, sizeof line, "! memory health: %s", g->health_text);
	watch_put(y, 0, cols, watch_attr(v, WATCH_PAIR_FULL, A_BOLD), line);
}

static int panel_rows(const watch_gpu *g, int h)
{
	return (g->lost ? 1 : !g->have_sample ? 1 : 2 + h + watch_nearly_full(g)) + (g->health != 0);
}

/* Rows the shown GPUs need: full panels with h graph rows (h >= 0), or one line each (h < 0), with
 * or without the lines naming who holds a nearly full GPU. */
static int rows_needed(const watch_snap *snap, const watch_view *v, int h, int holders)
{
	int need = 0;
	for (unsigned i = 0; i < snap->ngpu; i++)
		if (shown(v, i))
			need += h >= 0 ? panel_rows(&snap->gpus[i], h)
				       : 1 + (holders && watch_nearly_full(&snap->gpus[i])) + (snap->gpus[i].health != 0);
	return need;
}

int watch_draw_gpus(const watch_snap *snap, const watch_view *v, const watch_proc *sel, int y, int max_rows,
		    int cols)
{
	/* the most that fits: full panels with the tallest graph, then one line a GPU (with, then
	 * without, who holds a nearly full one), then as many lines as fit */
	int h = MAX_GRAPH_ROWS, holders = 1;
	while (h >= 0 && rows_needed(snap, v, h, 1) > max_rows)
		h--;
	if (h < 0 && rows_needed(snap, v, -1, 1) > max_rows)
		holders = 0;
	int row = 0, truncated = rows_needed(snap, v, h, holders) > max_rows;
	for (unsigned i = 0; i < snap->ngpu; i++) {
		const watch_gpu *g = &snap->gpus[i];
		if (!shown(v, i))
			continue;
		int need = h >= 0 ? panel_rows(g, h) : 1 + (holders && watch_nearly_full(g)) + (g->health != 0);
		if (row + need > max_rows - truncated) {
			char more[96];
			unsigned left = 0;
			for (unsigned j = i; j < snap->ngpu; j++)
				left += (unsigned)shown(v, j);
			snprintf(more, sizeof more, "+%u more GPU%s: press g to show one GPU at a time", left,
				 left == 1 ? "" : "s");
			watch_put(y + row++, 0, cols, A_BOLD, more);
			break;
		}
		if (h < 0) {
			compact_line(g, v, sel, y + row++, cols);
		} else {
			title_line(g, v, y + row++, cols);
			if (g->health)
				health_line(g, v, y + row++, cols);
			if (g->lost || !g->have_sample)
				continue;
			bar_line(g, v, sel, y + row++, cols);
			if (h > 0)
				graph(g, v, y + row, h, cols);
			row += h;
		}
		if (watch_nearly_full(g) && (h >= 0 || holders))
			holders_line(snap, g, v, y + row++, cols);
		if (h < 0 && g->health)
			health_line(g, v, y + row++, cols);
	}
	return row;
}
