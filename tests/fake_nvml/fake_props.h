/* SPDX-License-Identifier: MIT */
/* fake_props.h — the fake NVML's device properties and memory health: the `gpu` keys that set
 * them (power limits, fan, pstate, clocks' maxima, serial, modes, PCIe, ECC, retired pages,
 * remapped rows), their H200 defaults, and the `at T xid GPU CODE` events. Pure: no I/O. */
#ifndef FAKE_NVML_FAKE_PROPS_H
#define FAKE_NVML_FAKE_PROPS_H

#include <stdint.h>

/* Property keys, in the order of the key table in fake_props.c. */
enum fake_prop {
	FP_POWER_LIMIT, FP_POWER_ENFORCED, FP_POWER_DEFAULT, FP_POWER_MIN, FP_POWER_MAX, FP_POWER_MGMT,
	FP_FAN, FP_PSTATE, FP_MEM_TEMP, FP_MAX_SM, FP_MAX_MEM, FP_MAX_GR, FP_SERIAL, FP_VBIOS,
	FP_COMPUTE_MODE, FP_PERSISTENCE, FP_PCIE_GEN, FP_PCIE_GEN_MAX, FP_PCIE_WIDTH, FP_PCIE_WIDTH_MAX,
	FP_MIG, FP_MIG_PENDING, FP_ECC, FP_ECC_PENDING,
	/* ECC counts: corrected/uncorrected x volatile/aggregate, for the total, DRAM and SRAM */
	FP_ECC_CV_TOTAL, FP_ECC_CA_TOTAL, FP_ECC_UV_TOTAL, FP_ECC_UA_TOTAL,
	FP_ECC_CV_DRAM, FP_ECC_CA_DRAM, FP_ECC_UV_DRAM, FP_ECC_UA_DRAM,
	FP_ECC_CV_SRAM, FP_ECC_CA_SRAM, FP_ECC_UV_SRAM, FP_ECC_UA_SRAM,
	FP_RETIRED_SBE, FP_RETIRED_DBE, FP_RETIRED_PENDING,
	FP_REMAP_CORR, FP_REMAP_UNC, FP_REMAP_PENDING, FP_REMAP_FAILURE,
	FP_N
};

/* A property's value as a scenario sets it: a number (or text), or the code its call returns. */
#define FP_CODE_FLAG (1ull << 63) /* val & FP_CODE_FLAG: the call returns (int)(val & 0xFFFF) */

#define FP_TEXT_LEN 96 /* serial and vbios: at most 95 bytes */

/* The properties of one GPU at a time t. */
struct fake_props {
	uint64_t val[FP_N];  /* numbers, or FP_CODE_FLAG | code */
	/* longer than NVML's own 30 and 32 bytes, so that a scenario can test a caller's buffer size */
	char serial[FP_TEXT_LEN], vbios[FP_TEXT_LEN];
};

/* Value kinds of the keys */
enum { FPT_U32, FPT_U64, FPT_TEXT, FPT_ONOFF, FPT_PSTATE, FPT_COMPUTE };

/* The key named name: sets *kind (FPT_*) and returns its FP_* index, or -1. */
int fake_prop_key(const char *name, int *kind);

/*
 * Parses the value text of a property of kind `kind` (not FPT_TEXT: the caller stores text) into
 * *v; "!CODE" (a code number or name, as parse_code takes it) becomes FP_CODE_FLAG | code. Returns
 * NULL, or what was expected ("number", "on or off", ...).
 */
const char *fake_prop_parse(int kind, const char *text, int (*parse_code)(const char *, int *), uint64_t *v);

/* Sets the H200 defaults of tests/fixtures/smi/fields.tsv. */
void fake_props_defaults(struct fake_props *p);

/* Sets property key to v; for a text property that is no code, v is an offset into pool. */
void fake_props_set(struct fake_props *p, unsigned key, uint64_t v, const char *pool);

/* An `at T xid GPU CODE` line. */
struct fake_xid {
	double t;
	unsigned gpu;
	unsigned long long code;
};

#endif
