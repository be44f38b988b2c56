/* SPDX-License-Identifier: MIT */
/* sql.c — loads SQLite for the recordings on first use (sql.h says why), with the same kind of
 * symbol table as the NVML and libevent loaders: every call required, a missing one named. */
#include "sql.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define SQLITE_LIBRARY_FILE "libsqlite3.so.0"

struct gpumon__sqlite gpumon__sql;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_failed;
static char load_error[256];

#define SYM(name) {"sqlite3_" #name, (void **)&gpumon__sql.name}

static void load(void)
{
	static const struct {
		const char *name;
		void **slot;
	} syms[] = {
		SYM(bind_int), SYM(bind_int64), SYM(bind_null), SYM(bind_text), SYM(busy_timeout), SYM(close),
		SYM(column_count), SYM(column_int), SYM(column_int64), SYM(column_text), SYM(column_type),
		SYM(errmsg), SYM(exec), SYM(file_control), SYM(finalize), SYM(get_autocommit),
		SYM(last_insert_rowid), SYM(open_v2), SYM(prepare_v2), SYM(prepare_v3), SYM(reset), SYM(step),
		SYM(system_errno), SYM(wal_checkpoint_v2),
	};
	/* never closed: the table lives as long as the process, as a linked library would */
	void *lib = dlopen(SQLITE_LIBRARY_FILE, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		const char *why = dlerror();
		snprintf(load_error, sizeof load_error,
			 "recordings need SQLite: %s cannot be loaded (%s); install the Debian package libsqlite3-0",
			 SQLITE_LIBRARY_FILE, why ? why : "not found");
		load_failed = 1;
		return;
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		void *f = dlsym(lib, syms[i].name);
		if (!f) {
			snprintf(load_error, sizeof load_error,
				 "recordings need SQLite 3.20 or newer: %s has no %s", SQLITE_LIBRARY_FILE, syms[i].name);
			load_failed = 1;
			memset(&gpumon__sql, 0, sizeof gpumon__sql);
			dlclose(lib);
			return;
		}
		memcpy(syms[i].slot, &f, sizeof f);
	}
}

int gpumon__sqlite_load(char *err, size_t len)
{
	pthread_once(&once, load);
	if (!load_failed)
		return 0;
	if (err && len)
		snprintf(err, len, "%s", load_error);
	return -1;
}
