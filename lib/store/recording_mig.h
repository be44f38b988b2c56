/* SPDX-License-Identifier: MIT */
/* recording_mig.h — the MIG side of a recording's device table (the `mig` table of schema.h),
 * written and read by recording_mig.c for recording_write.c and recording_rows.c. */
#ifndef GPUMON_STORE_RECORDING_MIG_H
#define GPUMON_STORE_RECORDING_MIG_H

#include "sql.h"

#include <gpumon/gpumon.h>

/* Creates the `mig` table in db (inside the writer's open transaction) and writes a row for every
 * device of g with MIG facts (devices 0 .. ndev-1). Returns SQLite's status (SQLITE_OK). */
int gpumon__rec_write_mig(sqlite3 *db, gpumon *g, unsigned ndev);

/* Completes r->devices from the `mig` table when the recording has one; rows naming no device, or
 * a parent that is not a GPU of the recording, are left out. 0, or GPUMON_E_NOMEM. */
int gpumon__rec_read_mig(gpumon_reader *r);

#endif
