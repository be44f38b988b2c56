/* SPDX-License-Identifier: MIT */
/* watch_ui.c — the screen of `gpumon watch`: curses set-up (colour or monochrome, wide characters
 * or ASCII), the title and recording lines, the process table with its leak marks, the selected
 * process's details, the key line, the help screen and the user filter prompt. The GPU panels are
 * in watch_gpu.c. */
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "watch_draw.h"

#define MIN_COLS 80
#define MIN_ROWS 24
#define MIN_TABLE_ROWS 5

/* ---- curses helpers ------------------------------------------------------------------------------ */

attr_t watch_attr(const watch_view *v, int pair, attr_t mono)
{
	return v->color ? (attr_t)COLOR_PAIR(pair) : mono;
}

int watch_put(int y, int x, int end, attr_t attr, const char *s)
{
	int maxy, maxx;
	getmaxyx(stdscr, maxy, maxx);
	if (end > maxx)
		end = maxx;
	if (y < 0 || y >= maxy || x >= end)
		return x;
	attrset(attr);
	/* multi-byte text (user names, command lines) is converted so that clipping counts columns */
	wchar_t w[1024];
	size_t n = mbstowcs(w, s, sizeof w / sizeof w[0] - 1);
	if (n == (size_t)-1) {
		mvaddnstr(y, x, s, end - x);
		n = strlen(s);
	} else {
		w[n] = 0;
		mvaddnwstr(y, x, w, end - x);
	}
	attrset(A_NORMAL);
	int after = x + (int)n;
	return after < end ? after : end;
}

void watch_fill(const watch_view *v, int y, int x, int n, attr_t attr, wchar_t wide, char ascii)
{
	int maxx = getmaxx(stdscr);
	if (n <= 0 || x >= maxx)
		return;
	if (x + n > maxx)
		n = maxx - x;
	attrset(attr);
	if (v->utf8) {
		wchar_t w[2] = {wide, 0};
		cchar_t cc;
		setcchar(&cc, w, attr & ~A_COLOR, (short)PAIR_NUMBER(attr), NULL);
		mvhline_set(y, x, &cc, n);
	} else {
		mvhline(y, x, (chtype)(unsigned char)ascii | attr, n);
	}
	attrset(A_NORMAL);
}

int watch_screen_start(watch_view *v, char *err, size_t errlen)
{
	setlocale(LC_ALL, "");
	v->utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8");
	if (watch_curses_load(err, errlen) != 0)
		return -1;
	if (!newterm(NULL, stdout, stdin)) {
		snprintf(err, errlen, "cannot start the terminal screen: is TERM (%s) a terminal type this "
			 "machine knows?", getenv("TERM") ? getenv("TERM") : "unset");
		return -1;
	}
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);
	curs_set(0);
	const char *nc = getenv("NO_COLOR");
	v->color = !(nc && nc[0]) && has_colors();
	if (v->color) {
		start_color();
		use_default_colors();
		init_pair(WATCH_PAIR_USED, COLOR_GREEN, -1);
		init_pair(WATCH_PAIR_WARN, COLOR_YELLOW, -1);
		init_pair(WATCH_PAIR_FULL, COLOR_RED, -1);
		init_pair(WATCH_PAIR_RESERVED, COLOR_BLUE, -1);
		init_pair(WATCH_PAIR_SEL, COLOR_MAGENTA, -1);
		init_pair(WATCH_PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
		init_pair(WATCH_PAIR_GRAPH, COLOR_CYAN, -1);
		init_pair(WATCH_PAIR_REPLAY, COLOR_BLACK, COLOR_YELLOW);
	}
	return 0;
}

void watch_screen_end(void)
{
	endwin();
}

/* ---- rows ----------------------------------------------------------------------------------------- */

const char *watch_sort_name(int sort)
{
	static const char *const names[WATCH_SORT_COUNT] = {"memory", "change/min", "GPU", "pid", "user", "command"};
	return sort >= 0 && sort < WATCH_SORT_COUNT ? names[sort] : "?";
}

/* qsort has no context argument: the sort order of the call in progress. */
static int sort_order;

static int cmp_u64_desc(uint64_t a, uint64_t b)
{
	return a < b ? 1 : a > b ? -1 : 0;
}

static int row_cmp(const void *x, const void *y)
{
	const watch_proc *a = x, *b = y;
	int ka, kb, c = 0;
	switch (sort_order) {
	case WATCH_SORT_MEMORY:
		ka = !!(a->flags & GPUMON_PROC_USED_KNOWN), kb = !!(b->flags & GPUMON_PROC_USED_KNOWN);
		c = ka != kb ? kb - ka : cmp_u64_desc(a->used_bytes, b->used_bytes);
		break;
	case WATCH_SORT_CHANGE:
		c = a->change_known != b->change_known ? b->change_known - a->change_known
		    : a->change_bytes_per_min < b->change_bytes_per_min ? 1
		    : a->change_bytes_per_min > b->change_bytes_per_min ? -1 : 0;
		break;
	case WATCH_SORT_GPU: c = (a->gpu > b->gpu) - (a->gpu < b->gpu); break;
	case WATCH_SORT_PID: c = (a->pid > b->pid) - (a->pid < b->pid); break;
	case WATCH_SORT_USER: c = strcmp(a->user, b->user); break;
	case WATCH_SORT_COMMAND: c = strcmp(a->command, b->command); break;
	}
	if (!c)
		c = (a->gpu > b->gpu) - (a->gpu < b->gpu);
	return c ? c : (a->pid > b->pid) - (a->pid < b->pid);
}

/* Whether text holds needle, ASCII letters in any case ("" is in everything). */
static int contains_anycase(const char *text, const char *needle)
{
	return strcasestr(text, needle) != NULL;
}

int watch_row_matches(const watch_proc *p, const watch_view *v)
{
	if (v->user_filter[0] && !contains_anycase(p->user, v->user_filter))
		return 0;
	if (!v->text_filter[0])
		return 1;
	char pid[16];
	snprintf(pid, sizeof pid, "%u", p->pid);
	return contains_anycase(p->user, v->text_filter) || contains_anycase(p->command, v->text_filter) ||
	       contains_anycase(pid, v->text_filter) || contains_anycase(p->owner, v->text_filter);
}

size_t watch_rows(const watch_snap *snap, const watch_view *v, size_t *idx)
{
	watch_proc *p = snap->procs;
	sort_order = v->sort;
	if (snap->nproc)
		qsort(p, snap->nproc, sizeof *p, row_cmp);
	size_t n = 0;
	for (size_t i = 0; i < snap->nproc; i++) {
		if (v->gpu_filter >= 0 && p[i].gpu != (unsigned)v->gpu_filter)
			continue;
		if (v->picked && (p[i].gpu >= snap->ngpu || !v->picked[p[i].gpu]))
			continue;
		if (!watch_row_matches(&p[i], v))
			continue;
		idx[n++] = i;
	}
	return n;
}

const char *watch_format_change(char *buf, size_t len, double bytes)
{
	char a[32];
	if (fabs(bytes) < 0.5)
		snprintf(buf, len, "0 B");
	else
		snprintf(buf, len, "%c%s", bytes < 0 ? '-' : '+', cli_format_bytes(a, sizeof a, (uint64_t)llround(fabs(bytes))));
	return buf;
}

/* ---- the main screen ------------------------------------------------------------------------------ */

static void title(const watch_snap *snap, const watch_view *v, int cols)
{
	char right[192];
	attr_t at = watch_attr(v, WATCH_PAIR_TITLE, A_REVERSE);
	move(0, 0);
	attrset(at);
	hline(' ', cols);
	int x = watch_put(0, 0, cols, at | A_BOLD, " gpumon watch  ");
	watch_put(0, x, cols, at, v->title);
	if (v->position[0]) /* a replay: where in the recording, rather than counts */
		snprintf(right, sizeof right, "%s%s ", v->paused ? "PAUSED  " : "", v->position);
	else {
		char of[32] = "";
		unsigned n = snap->ngpu;
		if (v->picked) { /* -i: "2 of 8 GPUs" */
			n = 0;
			for (unsigned i = 0; i < snap->ngpu; i++)
				n += v->picked[i] != 0;
			snprintf(of, sizeof of, " of %u", snap->ngpu);
		}
		snprintf(right, sizeof right, "%s%u%s GPU%s  %zu proc%s ", v->paused ? "PAUSED  " : "", n, of,
			 snap->ngpu == 1 ? "" : "s", snap->nproc, snap->nproc == 1 ? "" : "s");
	}
	int w = (int)strlen(right);
	if (cols - w > x + 1)
		watch_put(0, cols - w, cols, at | (v->paused ? A_BOLD : 0), right);
}

/* The column layout of the table: mark, GPU, PID, USER, MEMORY, CHG/MIN, LEAK/MIN, COMMAND. */
const char *watch_table_header(char *buf, size_t len)
{
	snprintf(buf, len, "%c %3s %7s %-10.10s %10s %10s %10s %s", ' ', "GPU", "PID", "USER", "MEMORY", "CHG/MIN",
		 "LEAK/MIN", "COMMAND");
	return buf;
}

const char *watch_row_text(const watch_proc *p, char *buf, size_t len)
{
	char mem[32], chg[32], leak[32] = "";
	if (p->flags & GPUMON_PROC_USED_KNOWN)
		cli_format_bytes(mem, sizeof mem, p->used_bytes);
	else
		snprintf(mem, sizeof mem, "n/a");
	if (p->change_known)
		watch_format_change(chg, sizeof chg, p->change_bytes_per_min);
	else
		snprintf(chg, sizeof chg, "n/a");
	if (p->leak && p->leak_rate_known)
		watch_format_change(leak, sizeof leak, p->leak_bytes_per_min);
	const char *cmd = p->command[0] ? p->command : (p->flags & GPUMON_PROC_FOREIGN) ? "(other PID namespace)" : "n/a";
	snprintf(buf, len, "%c %3u %7u %-10.10s %10s %10s %10s %s", p->leak ? '!' : ' ', p->gpu, p->pid,
		 p->user[0] ? p->user : "n/a", mem, chg, leak, cmd);
	return buf;
}

const char *watch_detail_text(const watch_proc *p, char *buf, size_t len)
{
	char a[32], rate[64] = "", full[64] = "";
	if (p->leak && p->leak_rate_known)
		snprintf(rate, sizeof rate, ", %s/min", watch_format_change(a, sizeof a, p->leak_bytes_per_min));
	if (p->leak && p->leak_seconds_to_oom >= 0)
		snprintf(full, sizeof full, ", full in ~%.0f min", p->leak_seconds_to_oom / 60.0);
	if (p->leak)
		snprintf(buf, len, "pid %u on GPU %u: LEAK suspected%s%s: %s", p->pid, p->gpu, rate, full,
			 p->command[0] ? p->command : "n/a");
	else
		snprintf(buf, len, "pid %u on GPU %u (user %s): %s", p->pid, p->gpu, p->user[0] ? p->user : "n/a",
			 p->command[0] ? p->command : "n/a");
	return buf;
}

static void key_line(const watch_view *v, int y, int cols)
{
	char line[320];
	if (v->prompting) {
		snprintf(line, sizeof line, "%s (any part, any case; empty: all; Esc: cancel): %s",
			 v->prompting == 'u' ? "Filter by user" : "Filter by user, command, pid or owner", v->input);
		/* the prompt keeps its end (what is typed) in sight on a narrow screen */
		int w = (int)strlen(line), skip = w >= cols ? w - cols + 1 : 0;
		int x = watch_put(y, 0, cols, A_BOLD, line + skip);
		curs_set(1);
		move(y, x);
		return;
	}
	curs_set(0);
	if (v->confirm.sig) {
		watch_put(y, 0, cols, watch_attr(v, WATCH_PAIR_FULL, A_REVERSE) | A_BOLD, v->confirm.text);
		return;
	}
	if (v->message[0]) {
		watch_put(y, 0, cols, A_BOLD, v->message);
		return;
	}
	if (v->gpu_filter >= 0 || v->user_filter[0] || v->text_filter[0] || v->sort != WATCH_SORT_MEMORY) {
		/* what is in force, where the table's header may have no room for it */
		int n = snprintf(line, sizeof line, "sort: %s", watch_sort_name(v->sort));
		if (v->gpu_filter >= 0 && n < (int)sizeof line)
			n += snprintf(line + n, sizeof line - (size_t)n, "  GPU %d only", v->gpu_filter);
		if (v->user_filter[0] && n < (int)sizeof line)
			n += snprintf(line + n, sizeof line - (size_t)n, "  user ~%s", v->user_filter);
		if (v->text_filter[0] && n < (int)sizeof line)
			n += snprintf(line + n, sizeof line - (size_t)n, "  filter /%s", v->text_filter);
		if (n < (int)sizeof line)
			snprintf(line + n, sizeof line - (size_t)n, "   c clears  s sorts  q quit  h help");
		watch_put(y, 0, cols, A_BOLD, line);
		return;
	}
	if (v->replay)
		snprintf(line, sizeof line, "q quit  %s seek  Home End  r restart  p pause  +- speed  / filter  h help",
			 v->utf8 ? "\u2190\u2192" : "<- ->");
	else /* fits 80 columns: the arrows need no word */
		snprintf(line, sizeof line, "q quit  / filter  u user  c clear  s sort  g GPU  p pause  T K I signal  h help");
	watch_put(y, 0, cols, A_NORMAL, line);
}

static void help_screen(const watch_view *v, int cols)
{
	static const char *const lines[] = {
		"gpumon watch: GPU memory, live",
		"",
		"  q            quit",
		"  Up/Down      move the selection (its share of its GPU shows in the bar)",
		"  PgUp/PgDn    a page up or down; Home/End (live): first or last process",
		"  s            sort by the next column: memory, change, GPU, pid, user, cmd",
		"  g            show one GPU after the other, then all again",
		"  /            filter: user, command, pid or owner holding the text, any case",
		"  u            user filter: user names holding the text; c clears the filters",
		"  p or space   pause: the screen stays still (live: sampling goes on)",
		"  T / K / I    send SIGTERM / SIGKILL / SIGINT to the selected process, once",
		"               y confirms: your own processes, or any as root",
		"  Replay:      Left/Right seek 10 s, Home/End start/end, r restart, +/- speed",
		"  h or ?       this help; any key returns.   Ctrl-L  redraw the whole screen",
		"",
		"Bar: reserved by the driver, the selected process, other used memory, free.",
		"CHG/MIN: how much the process's memory changed over the last minute.",
		"! and LEAK/MIN: the run model's leak verdict on the process alerts (as gpumon",
		"report says; docs/leak-detection.md); the rate is per minute. CPU% (a core,",
		"over the last second), RSS, TIME: the process on this host. OWNER: its pod,",
		"Slurm job or container. n/a: not known.",
	};
	erase();
	for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
		watch_put((int)i + 1, 2, cols, i == 0 ? A_BOLD : A_NORMAL, lines[i]);
	(void)v;
}

static void too_small(int rows, int cols)
{
	char line[96];
	erase();
	snprintf(line, sizeof line, "terminal too small: %dx%d", cols, rows);
	watch_put(rows / 2 - 1, 0, cols, A_BOLD, line);
	snprintf(line, sizeof line, "gpumon watch needs %dx%d", MIN_COLS, MIN_ROWS);
	watch_put(rows / 2, 0, cols, A_NORMAL, line);
	watch_put(rows / 2 + 1, 0, cols, A_NORMAL, "q quits");
}

void watch_draw(const watch_snap *snap, watch_view *v)
{
	int rows, cols;
	getmaxyx(stdscr, rows, cols);
	if (rows < MIN_ROWS || cols < MIN_COLS) {
		too_small(rows, cols);
		refresh();
		return;
	}
	if (v->help) {
		help_screen(v, cols);
		refresh();
		return;
	}
	erase();
	size_t *idx = malloc((snap->nproc ? snap->nproc : 1) * sizeof *idx);
	size_t n = idx ? watch_rows(snap, v, idx) : 0;
	for (size_t i = 0; v->sel_valid && !v->moved && i < n; i++)
		if (snap->procs[idx[i]].gpu == v->sel_gpu && snap->procs[idx[i]].pid == v->sel_pid)
			v->cur = i;
	v->moved = 0;
	if (v->cur >= n)
		v->cur = n ? n - 1 : 0;
	const watch_proc *sel = n ? &snap->procs[idx[v->cur]] : NULL;
	if (sel) {
		v->sel_valid = 1;
		v->sel_gpu = sel->gpu;
		v->sel_pid = sel->pid;
	}
	title(snap, v, cols);
	int y = 1;
	for (int b = 0; b < 2; b++)
		if (v->banner[b][0])
			watch_put(y++, 0, cols, watch_attr(v, WATCH_PAIR_REPLAY, A_REVERSE) | A_BOLD, v->banner[b]);
	if (snap->oom.known) { /* a replay of a run that ran out of memory, from its moment on */
		char line[512];
		watch_put(y++, 0, cols, watch_attr(v, WATCH_PAIR_FULL, A_BOLD), watch_oom_text(&snap->oom, line, sizeof line));
	}
	/* the table keeps at least MIN_TABLE_ROWS rows; the GPUs get the rest */
	int fixed = y + 1 /* header */ + 2 /* detail, keys */;
	y += watch_draw_gpus(snap, v, sel, y, rows - fixed - MIN_TABLE_ROWS, cols);
	int page = rows - 2 - (y + 1);
	v->page_rows = (size_t)(page > 0 ? page : 1);
	if (v->cur < v->top)
		v->top = v->cur;
	if (v->cur >= v->top + v->page_rows)
		v->top = v->cur - v->page_rows + 1;
	if (v->top + v->page_rows > n)
		v->top = n > v->page_rows ? n - v->page_rows : 0;
	watch_draw_table(snap, v, idx, n, y, cols);
	key_line(v, rows - 1, cols);
	free(idx);
	refresh();
}
