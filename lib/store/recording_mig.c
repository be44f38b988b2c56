/* SPDX-License-Identifier: MIT */
/* recording_mig.c — MIG in recordings: a MIG device is recorded as a device with its own UUID (the
 * devices table), and what makes it one (its GPU, instance ids, profile) and each GPU's MIG mode
 * go to the `mig` table, so that a recording's device table reads back as the live one did. */
#include <stdio.h>
#include <string.h>

#include "recording_mig.h"
#include "recording_read.h"
#include "schema.h"

static void bind_known(sqlite3_stmt *s, int col, int known, int64_t v)
{
	if (known)
		sqlite3_bind_int64(s, col, v);
	else
		sqlite3_bind_null(s, col);
}

int gpumon__rec_write_mig(sqlite3 *db, gpumon *g, unsigned ndev)
{
	sqlite3_stmt *s = NULL;
	int rc = sqlite3_exec(db, REC_MIG_SQL, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(db, "INSERT INTO mig VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)", -1, &s, NULL);
	for (unsigned i = 0; i < ndev && rc == SQLITE_OK; i++) {
		gpumon_device_info d;
		if (gpumon_device_info_get(g, i, &d) != GPUMON_OK || (!d.mig && !(d.present & GPUMON_INFO_MIG_MODE)))
			continue;
		int ids = d.mig && (d.present & GPUMON_INFO_MIG_IDS), mode = !d.mig && (d.present & GPUMON_INFO_MIG_MODE);
		sqlite3_bind_int64(s, 1, i);
		sqlite3_bind_int(s, 2, d.mig);
		bind_known(s, 3, d.mig, d.parent);
		bind_known(s, 4, d.mig, d.mig_index);
		bind_known(s, 5, ids, d.gpu_instance_id);
		bind_known(s, 6, ids, d.compute_instance_id);
		if (d.mig && (d.present & GPUMON_INFO_MIG_PROFILE))
			sqlite3_bind_text(s, 7, d.mig_profile, (int)strnlen(d.mig_profile, sizeof d.mig_profile), SQLITE_TRANSIENT);
		else
			sqlite3_bind_null(s, 7);
		bind_known(s, 8, mode, d.mig_mode);
		bind_known(s, 9, mode, d.mig_mode_pending);
		rc = sqlite3_step(s);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
		sqlite3_reset(s);
	}
	sqlite3_finalize(s);
	return rc;
}

/* An integer column in 0 .. max, or -1 (NULL, not an integer, out of range). */
static int64_t col_small(sqlite3_stmt *s, int col, int64_t max)
{
	if (sqlite3_column_type(s, col) != SQLITE_INTEGER)
		return -1;
	int64_t v = sqlite3_column_int64(s, col);
	return v >= 0 && v <= max ? v : -1;
}

/* One row into its device. */
static void read_row(gpumon_reader *r, sqlite3_stmt *s)
{
	int64_t dev = col_small(s, 0, (int64_t)r->ndevices - 1);
	if (dev < 0)
		return;
	gpumon_device_info *d = &r->devices[dev];
	if (sqlite3_column_int64(s, 1) == 1) {
		int64_t parent = col_small(s, 2, (int64_t)r->ndevices - 1), k = col_small(s, 3, 0xffffffff);
		int64_t gi = col_small(s, 4, 0xfffffffe), ci = col_small(s, 5, 0xfffffffe);
		if (parent < 0 || parent == dev || k < 0)
			return; /* a MIG device without its GPU is not one we can place */
		d->mig = 1;
		d->parent = (unsigned)parent;
		d->mig_index = (unsigned)k;
		if (gi >= 0 && ci >= 0) {
			d->gpu_instance_id = (unsigned)gi;
			d->compute_instance_id = (unsigned)ci;
			d->present |= GPUMON_INFO_MIG_IDS;
		}
		const unsigned char *p = sqlite3_column_text(s, 6);
		if (p && *p) {
			snprintf(d->mig_profile, sizeof d->mig_profile, "%s", (const char *)p);
			d->present |= GPUMON_INFO_MIG_PROFILE;
		}
		return;
	}
	int64_t mode = col_small(s, 7, 1), pending = col_small(s, 8, 1);
	if (mode >= 0 && pending >= 0) {
		d->mig_mode = (unsigned)mode;
		d->mig_mode_pending = (unsigned)pending;
		d->present |= GPUMON_INFO_MIG_MODE;
	}
}

int gpumon__rec_read_mig(gpumon_reader *r)
{
	sqlite3_stmt *s = NULL;
	for (unsigned i = 0; i < r->ndevices; i++)
		r->devices[i].parent = i; /* a GPU is its own parent */
	int rc = sqlite3_prepare_v2(r->db,
				    "SELECT dev, is_mig, parent, mig_index, gpu_instance_id, compute_instance_id, profile,"
				    " mode, mode_pending FROM mig ORDER BY dev",
				    -1, &s, NULL);
	if (rc != SQLITE_OK) { /* no such table: a recording made before it, or by a GPU-less writer */
		sqlite3_finalize(s);
		return gpumon__rec_nomem(r, rc) ? GPUMON_E_NOMEM : GPUMON_OK;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		read_row(r, s);
	sqlite3_finalize(s);
	return gpumon__rec_nomem(r, rc) ? GPUMON_E_NOMEM : GPUMON_OK;
}
