/* SPDX-License-Identifier: MIT */
/* recording_owner.h — the owner_* and rank columns of `processes`, shared by the recording's writer and
 * reader (recording_owner.c) and nothing else. */
#ifndef GPUMON_STORE_RECORDING_OWNER_H
#define GPUMON_STORE_RECORDING_OWNER_H

#include "sql.h"
#include <stdint.h>

#include <gpumon/gpumon.h>

#define REC_OWNER_TEXTS 9 /* the text columns after owner_present */

/* Binds owner_present to parameter first and the texts to first+1 .. first+9 ("" as NULL). The
 * texts are bound SQLITE_STATIC: o must outlive the statement's step. */
void gpumon__rec_bind_owner(sqlite3_stmt *s, int first, const gpumon_owner *o);

/* Folds the owner into an FNV-1a hash h (the writer's "did what it knows of the process change"). */
uint64_t gpumon__rec_owner_hash(uint64_t h, const gpumon_owner *o);

/* Reads the owner from column first (owner_present) and the next 9 of the current row into o
 * (zeroed first). Returns 1 when an owner is known, 0 when not (NULL in files written before these
 * columns, 0, or a value this version cannot take). */
int gpumon__rec_read_owner(sqlite3_stmt *s, int first, gpumon_owner *o);

/* Binds rank .. rank_master to parameters first .. first+6 (NULL each when r is NULL, a figure is -1
 * or a text is ""); texts bound SQLITE_STATIC as above. */
void gpumon__rec_bind_rank(sqlite3_stmt *s, int first, const gpumon_rank *r);

/* Folds a rank into h as gpumon__rec_owner_hash does. */
uint64_t gpumon__rec_rank_hash(uint64_t h, const gpumon_rank *r);

/* Reads rank .. rank_master from column first on into r (unknown each first). Returns 1 when a
 * launcher is named (the process is a distributed worker), 0 otherwise; a figure out of range or a
 * text too long for its field (a hand edit) makes the whole rank unknown. */
int gpumon__rec_read_rank(sqlite3_stmt *s, int first, gpumon_rank *r);

#endif
