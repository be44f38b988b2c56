/* SPDX-License-Identifier: MIT */
/* scenario_internal.h — the parsed scenario's layout, shared by the parser (scenario.c) and the
 * time model (scenario_state.c) and by nothing else. */
#ifndef FAKE_NVML_SCENARIO_INTERNAL_H
#define FAKE_NVML_SCENARIO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "scenario.h"

#define NO_INSTANCE 0xFFFFFFFFu
#define USED_NA UINT64_MAX /* value of used=na; sizes stop below it */

enum ev_kind { EV_GPU_SET, EV_GPU_LOST, EV_PROC_ADD, EV_PROC_SET, EV_PROC_GONE };

/* A change; proc events cover slots target .. target + count - 1. */
struct event {
	double t;
	uint64_t val; /* a number, a packed bus id, or an offset into the text pool */
	uint32_t target, count;
	uint8_t kind, key;
};

/* An `error` line, or a `hang` line (hang = 1: calls block until `until`; code unused). */
struct rule {
	double from, until;
	int code, gpu;
	unsigned fn;
	int hang;
};

/* One (gpu, pid) pair named by the file; decl_line != 0 once a declaration named it. */
struct slot {
	uint32_t gpu, pid;
	int decl_line;
};

struct scn {
	char driver[SCN_VERSION_LEN], nvml[SCN_VERSION_LEN];
	int init_error;
	unsigned ngpus;
	struct slot *slot;
	size_t nslots, slot_cap;
	size_t *gpu_first;
	struct event *decl, *at;
	size_t ndecl, decl_cap, nat, at_cap;
	struct rule *rule;
	size_t nrules, rule_cap;
	char *pool;
	size_t pool_len, pool_cap;
	struct fake_xid *xid; /* `at T xid` lines, kept sorted by time */
	size_t nxid, xid_cap;
	struct scn_migs *mig; /* scenario_mig.c; NULL until a `mig` line */
};

enum gpu_key { GK_NAME, GK_UUID, GK_BUS, GK_TOTAL, GK_RESERVED, GK_USED, GK_UTIL, GK_MEMUTIL,
	       GK_TEMP, GK_POWER, GK_ENERGY, GK_SM, GK_MEM, GK_N };

enum proc_key { PK_USED, PK_TYPE, PK_NAME, PK_GI, PK_CI, PK_GROW, PK_N };

/* scenario_mig.c: parses the arguments after `mig GPU` (the GPU is declared) into s; on error
 * returns -1 with a message in msg. scn__mig_free frees what it keeps (scn_free calls it). */
int scn__mig_line(struct scn *s, unsigned gpu, char **a, size_t n, char *msg, size_t len);
void scn__mig_free(struct scn *s);

/* scenario.c's value parsers, for scenario_mig.c: 0, or -1 for a bad value. */
int scn__parse_size(const char *str, uint64_t *v);
int scn__parse_u32(const char *str, uint64_t *v);

#endif
