/* SPDX-License-Identifier: MIT */
/* watch_curses.h — ncursesw for `gpumon watch`'s screen, loaded with dlopen when the screen starts
 * (watch_curses.c), so that no other command loads it and its terminfo library (about 0.5 ms of
 * every start and 0.26 MB of an exporter's memory). The drawing files include this instead of
 * <curses.h>: its types, constants and macros are curses.h's; the calls they make go through the
 * table below, to which the names are defined. */
#ifndef GPUMON_WATCH_CURSES_H
#define GPUMON_WATCH_CURSES_H

#include <stddef.h>

#define NCURSES_WIDECHAR 1
#include <curses.h>

/* Every ncursesw (and tinfo) symbol the watch files use: a new one is added here and below, or the
 * program fails to link (curses is no longer linked in). */
#define WATCH_CURSES_CALLS(X)                                                                                     \
	X(cbreak) X(clearok) X(curs_set) X(endwin) X(has_colors) X(init_pair) X(keypad) X(newterm) X(nodelay)    \
	X(noecho) X(nonl) X(set_escdelay) X(setcchar) X(start_color) X(use_default_colors) X(waddnstr)           \
	X(waddnwstr) X(wattrset) X(werase) X(wgetch) X(whline) X(whline_set) X(wmove) X(wrefresh)

struct watch_curses {
#define WATCH_CURSES_FIELD(name) __typeof__(name) *name;
	WATCH_CURSES_CALLS(WATCH_CURSES_FIELD)
#undef WATCH_CURSES_FIELD
	WINDOW **stdscr, **curscr;
};
extern struct watch_curses watch_curses;

/* Loads ncursesw (once): 0, or -1 with what to install in err. */
int watch_curses_load(char *err, size_t errlen);

#ifndef WATCH_CURSES_LOADER /* watch_curses.c fills the table under the real names */
#define cbreak (*watch_curses.cbreak)
#define clearok (*watch_curses.clearok)
#define curs_set (*watch_curses.curs_set)
#define endwin (*watch_curses.endwin)
#define has_colors (*watch_curses.has_colors)
#define init_pair (*watch_curses.init_pair)
#define keypad (*watch_curses.keypad)
#define newterm (*watch_curses.newterm)
#define nodelay (*watch_curses.nodelay)
#define noecho (*watch_curses.noecho)
#define nonl (*watch_curses.nonl)
#define set_escdelay (*watch_curses.set_escdelay)
#define setcchar (*watch_curses.setcchar)
#define start_color (*watch_curses.start_color)
#define use_default_colors (*watch_curses.use_default_colors)
#define waddnstr (*watch_curses.waddnstr)
#define waddnwstr (*watch_curses.waddnwstr)
#define wattrset (*watch_curses.wattrset)
#define werase (*watch_curses.werase)
#define wgetch (*watch_curses.wgetch)
#define whline (*watch_curses.whline)
#define whline_set (*watch_curses.whline_set)
#define wmove (*watch_curses.wmove)
#define wrefresh (*watch_curses.wrefresh)
#define stdscr (*watch_curses.stdscr)
#define curscr (*watch_curses.curscr)
#endif

#endif
