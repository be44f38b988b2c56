/* SPDX-License-Identifier: MIT */
/* watch_curses.c — loads ncursesw for `gpumon watch`'s screen (watch_curses.h says why). */
#define WATCH_CURSES_LOADER
#include "watch_curses.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* ncurses's ABI 6; its terminfo part (libtinfo.so.6) comes with it as its dependency */
#define CURSES_LIBRARY_FILE "libncursesw.so.6"

struct watch_curses watch_curses;

int watch_curses_load(char *err, size_t errlen)
{
	static int loaded;
	if (loaded)
		return 0;
	void *lib = dlopen(CURSES_LIBRARY_FILE, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *why = dlerror();
		snprintf(err, errlen, "cannot load %s for the screen (%s): install the Debian package libncursesw6, "
			 "or use --batch", CURSES_LIBRARY_FILE, why ? why : "not found");
		return -1;
	}
	static const char *const names[] = {
#define WATCH_CURSES_NAME(name) #name,
		WATCH_CURSES_CALLS(WATCH_CURSES_NAME)
#undef WATCH_CURSES_NAME
	};
	_Static_assert(offsetof(struct watch_curses, stdscr) == sizeof names, "one name a call");
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		void *f = dlsym(lib, names[i]);
		if (!f) {
			snprintf(err, errlen, "%s has no %s: ncursesw 6.1 or newer is needed", CURSES_LIBRARY_FILE, names[i]);
			return -1; /* the library stays loaded: the program ends on this */
		}
		memcpy((char *)&watch_curses + i * sizeof f, &f, sizeof f);
	}
	watch_curses.stdscr = dlsym(lib, "stdscr");
	watch_curses.curscr = dlsym(lib, "curscr");
	if (!watch_curses.stdscr || !watch_curses.curscr) {
		snprintf(err, errlen, "%s has no stdscr or curscr", CURSES_LIBRARY_FILE);
		return -1;
	}
	loaded = 1; /* kept for the program's life: curses is used until it ends */
	return 0;
}
