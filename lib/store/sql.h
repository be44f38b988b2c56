/* SPDX-License-Identifier: MIT */
/* sql.h — SQLite for the recording files, loaded with dlopen the first time a recording is made or
 * read, so that the commands which never touch one (gpumon query, list, the main view, watch,
 * serve) neither load nor map it: it was the largest library every gpumon process started with.
 * lib/store includes this instead of <sqlite3.h>; its sqlite3_* calls go through the table. */
#ifndef GPUMON_STORE_SQL_H
#define GPUMON_STORE_SQL_H

#include <stddef.h>

#include <sqlite3.h>

struct gpumon__sqlite {
	int (*bind_int)(sqlite3_stmt *, int, int);
	int (*bind_int64)(sqlite3_stmt *, int, sqlite3_int64);
	int (*bind_null)(sqlite3_stmt *, int);
	int (*bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
	int (*busy_timeout)(sqlite3 *, int);
	int (*close)(sqlite3 *);
	int (*column_count)(sqlite3_stmt *);
	int (*column_int)(sqlite3_stmt *, int);
	sqlite3_int64 (*column_int64)(sqlite3_stmt *, int);
	const unsigned char *(*column_text)(sqlite3_stmt *, int);
	int (*column_type)(sqlite3_stmt *, int);
	const char *(*errmsg)(sqlite3 *);
	int (*exec)(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
	int (*file_control)(sqlite3 *, const char *, int, void *);
	int (*finalize)(sqlite3_stmt *);
	int (*get_autocommit)(sqlite3 *);
	sqlite3_int64 (*last_insert_rowid)(sqlite3 *);
	int (*open_v2)(const char *, sqlite3 **, int, const char *);
	int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
	int (*prepare_v3)(sqlite3 *, const char *, int, unsigned, sqlite3_stmt **, const char **);
	int (*reset)(sqlite3_stmt *);
	int (*step)(sqlite3_stmt *);
	int (*system_errno)(sqlite3 *);
	int (*wal_checkpoint_v2)(sqlite3 *, const char *, int, int *, int *);
};

/* The table, filled once per process and read-only after (the one process-wide state of the
 * library: the loaded library, like the dynamic loader's own). */
extern struct gpumon__sqlite gpumon__sql;

/* Loads libsqlite3.so.0 the first time (thread-safe). Returns 0, or -1 with why in err (the file
 * or a symbol missing). Called before the first sqlite3_open_v2; every other call follows one. */
int gpumon__sqlite_load(char *err, size_t len);

#define sqlite3_bind_int gpumon__sql.bind_int
#define sqlite3_bind_int64 gpumon__sql.bind_int64
#define sqlite3_bind_null gpumon__sql.bind_null
#define sqlite3_bind_text gpumon__sql.bind_text
#define sqlite3_busy_timeout gpumon__sql.busy_timeout
/* NULL is a no-op, as in SQLite, also before the library was loaded (a failed open's clean-up) */
#define sqlite3_close(db) ((db) ? gpumon__sql.close(db) : SQLITE_OK)
#define sqlite3_column_count gpumon__sql.column_count
#define sqlite3_column_int gpumon__sql.column_int
#define sqlite3_column_int64 gpumon__sql.column_int64
#define sqlite3_column_text gpumon__sql.column_text
#define sqlite3_column_type gpumon__sql.column_type
#define sqlite3_errmsg gpumon__sql.errmsg
#define sqlite3_exec gpumon__sql.exec
#define sqlite3_file_control gpumon__sql.file_control
#define sqlite3_finalize(st) ((st) ? gpumon__sql.finalize(st) : SQLITE_OK)
#define sqlite3_get_autocommit gpumon__sql.get_autocommit
#define sqlite3_last_insert_rowid gpumon__sql.last_insert_rowid
#define sqlite3_open_v2 gpumon__sql.open_v2
#define sqlite3_prepare_v2 gpumon__sql.prepare_v2
#define sqlite3_prepare_v3 gpumon__sql.prepare_v3
#define sqlite3_reset gpumon__sql.reset
#define sqlite3_step gpumon__sql.step
#define sqlite3_system_errno gpumon__sql.system_errno
#define sqlite3_wal_checkpoint_v2 gpumon__sql.wal_checkpoint_v2

#endif
