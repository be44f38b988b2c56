/* SPDX-License-Identifier: MIT */
/* watch_draw.h — curses helpers the drawing files of `gpumon watch` share: colour pairs with their
 * monochrome stand-ins, and text put at a place, clipped to the screen. */
#ifndef GPUMON_WATCH_DRAW_H
#define GPUMON_WATCH_DRAW_H

#include "watch_curses.h" /* curses.h, its calls through the table loaded when the screen starts */

#include "watch.h"

enum {
	WATCH_PAIR_USED = 1, /* used memory, below the warning level */
	WATCH_PAIR_WARN,     /* used memory at 75 % or more */
	WATCH_PAIR_FULL,     /* nearly full, lost GPUs, leak marks */
	WATCH_PAIR_RESERVED, /* driver-reserved memory */
	WATCH_PAIR_SEL,      /* the selected process's share */
	WATCH_PAIR_TITLE,    /* the title line */
	WATCH_PAIR_GRAPH,    /* the history graph */
	WATCH_PAIR_REPLAY,   /* the line saying this is a recording */
};

/* The attribute for pair: the colour when the screen has colour, else mono (A_BOLD, A_REVERSE, ...). */
attr_t watch_attr(const watch_view *v, int pair, attr_t mono);

/* Puts s at (y, x) with attr, clipped at column `end` (exclusive); returns the column after it. */
int watch_put(int y, int x, int end, attr_t attr, const char *s);

/* Puts the same glyph n times from (y, x): wide when v->utf8, else the ASCII stand-in. */
void watch_fill(const watch_view *v, int y, int x, int n, attr_t attr, wchar_t wide, char ascii);

/* The process table from row y (header, the rows of idx[0..n-1] from v->top, v->cur selected) and
 * the line on the selected process above the key line (watch_table.c). */
void watch_draw_table(const watch_snap *snap, watch_view *v, const size_t *idx, size_t n, int y, int cols);

#endif
