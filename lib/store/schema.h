/* SPDX-License-Identifier: MIT */
/* schema.h — the identity and layout of a recording (docs/recording.md, format 1), shared by its
 * writer (recording_write.c) and its reader (recording_read.c): nothing else knows the format. */
#ifndef GPUMON_STORE_SCHEMA_H
#define GPUMON_STORE_SCHEMA_H

#define REC_STR_(x) #x
#define REC_STR(x)  REC_STR_(x)
#define REC_FORMAT_VERSION 1
#define REC_APPLICATION_ID 0x4750554d /* "GPUM" in ASCII */

/* The schema of format version 1. Within a version, tables and columns may be added (readers name
 * the columns they read); framework_samples.limit_bytes and processes.owner_* were added this way,
 * so a reader checks for them before reading them; so were processes.rank ... rank_master. events.dev (the GPU an event of the sampler names, NULL for
 * the others) was added the same way. */
/* clang-format off */
#define REC_SCHEMA_SQL \
	"PRAGMA application_id = " REC_STR(REC_APPLICATION_ID) ";" \
	"PRAGMA user_version = " REC_STR(REC_FORMAT_VERSION) ";" \
	"CREATE TABLE meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;" \
	"CREATE TABLE devices (dev INTEGER PRIMARY KEY, uuid TEXT, name TEXT, pci_bus_id TEXT," \
	" memory_total_bytes INTEGER, lost_t_ns INTEGER);" \
	"CREATE TABLE processes (dev INTEGER NOT NULL, pid INTEGER NOT NULL, first_t_ns INTEGER," \
	" gone_t_ns INTEGER, flags INTEGER NOT NULL, foreign_pid INTEGER NOT NULL, uid INTEGER," \
	" user TEXT, name TEXT, command TEXT, gpu_instance_id INTEGER, compute_instance_id INTEGER," \
	" ppid INTEGER, owner_present INTEGER, owner_runtime TEXT, owner_container_id TEXT," \
	" owner_pod_uid TEXT, owner_namespace TEXT, owner_pod TEXT, owner_container TEXT," \
	" owner_slurm_job TEXT, owner_slurm_step TEXT, owner_unit TEXT, rank INTEGER, local_rank INTEGER," \
	" world_size INTEGER, node_rank INTEGER, rank_job TEXT, rank_launcher TEXT, rank_master TEXT);" \
	"CREATE TABLE device_samples (t_ns INTEGER NOT NULL, dev INTEGER NOT NULL, memory_api INTEGER," \
	" used_bytes INTEGER, free_bytes INTEGER, reserved_bytes INTEGER, total_bytes INTEGER," \
	" used_min_bytes INTEGER, used_max_bytes INTEGER, used_max_t_ns INTEGER, samples INTEGER," \
	" util_gpu_pct INTEGER, util_memory_pct INTEGER, temperature_c INTEGER, power_mw INTEGER," \
	" energy_mj INTEGER, clock_sm_mhz INTEGER, clock_mem_mhz INTEGER);" \
	"CREATE TABLE process_samples (t_ns INTEGER NOT NULL, dev INTEGER NOT NULL, pid INTEGER NOT NULL," \
	" used_bytes INTEGER, gone INTEGER NOT NULL);" \
	"CREATE TABLE framework_sources (source INTEGER PRIMARY KEY, pid INTEGER NOT NULL," \
	" device INTEGER, framework TEXT, first_t_ns INTEGER NOT NULL);" \
	"CREATE TABLE framework_samples (t_ns INTEGER NOT NULL, source INTEGER NOT NULL, step INTEGER," \
	" allocated_bytes INTEGER, reserved_bytes INTEGER, max_allocated_bytes INTEGER, limit_bytes INTEGER);" \
	"CREATE TABLE events (t_ns INTEGER NOT NULL, kind TEXT NOT NULL, text TEXT, dev INTEGER);"
/* clang-format on */

/* The MIG side of the device table (added within format 1; recording_mig.c): one row per device
 * that has MIG facts: a GPU whose MIG mode is known (is_mig 0, mode and mode_pending 0 disabled / 1
 * enabled) and each MIG device (is_mig 1: parent is its GPU's dev, mig_index its number under it,
 * the instance ids and profile, NULL when not known). A recording without the table has none. */
#define REC_MIG_SQL \
	"CREATE TABLE mig (dev INTEGER PRIMARY KEY, is_mig INTEGER NOT NULL, parent INTEGER, mig_index INTEGER," \
	" gpu_instance_id INTEGER, compute_instance_id INTEGER, profile TEXT, mode INTEGER, mode_pending INTEGER);"

/* The event kind that records a pid of the job's process tree ("pid N"): GPUMON_REC_JOB. */
#define REC_JOB_EVENT "job"
/* The event kind that records a GPU's loss: GPUMON_REC_LOST (its text "GPU N is lost"). */
#define REC_LOST_EVENT "lost"

/* The columns the reader walks, per table, in the order the reader reads them. The first is t_ns. */
#define REC_DEVICE_COLUMNS                                                                                  \
	"t_ns, dev, memory_api, used_bytes, free_bytes, reserved_bytes, total_bytes, used_min_bytes, "       \
	"used_max_bytes, used_max_t_ns, samples, util_gpu_pct, util_memory_pct, temperature_c, power_mw, "    \
	"energy_mj, clock_sm_mhz, clock_mem_mhz"
#define REC_PROCESS_COLUMNS "t_ns, dev, pid, used_bytes, gone"
#define REC_FRAMEWORK_COLUMNS "t_ns, source, step, allocated_bytes, reserved_bytes, max_allocated_bytes"
#define REC_FRAMEWORK_COLUMNS_LIMIT REC_FRAMEWORK_COLUMNS ", limit_bytes"
/* processes' owner columns, in the order recording_owner.c binds and reads them */
#define REC_OWNER_COLUMNS                                                                                   \
	"owner_present, owner_runtime, owner_container_id, owner_pod_uid, owner_namespace, owner_pod, "      \
	"owner_container, owner_slurm_job, owner_slurm_step, owner_unit"
#define REC_OWNER_SET                                                                                       \
	"owner_present = ?14, owner_runtime = ?15, owner_container_id = ?16, owner_pod_uid = ?17, "          \
	"owner_namespace = ?18, owner_pod = ?19, owner_container = ?20, owner_slurm_job = ?21, "             \
	"owner_slurm_step = ?22, owner_unit = ?23"
/* processes' rank columns (a distributed worker's place), in the order recording_owner.c binds and
 * reads them */
#define REC_RANK_COLUMNS "rank, local_rank, world_size, node_rank, rank_job, rank_launcher, rank_master"
#define REC_RANK_SET                                                                                        \
	"rank = ?24, local_rank = ?25, world_size = ?26, node_rank = ?27, rank_job = ?28, rank_launcher = ?29, " \
	"rank_master = ?30"
#define REC_EVENT_COLUMNS "t_ns, kind, text"
#define REC_EVENT_COLUMNS_DEV REC_EVENT_COLUMNS ", dev"

#endif
