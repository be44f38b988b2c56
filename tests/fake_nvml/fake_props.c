/* SPDX-License-Identifier: MIT */
/* fake_props.c — the `gpu` keys of the fake NVML's device properties and memory health: their
 * names, value parsing and H200 defaults (tests/fixtures/smi/fields.tsv). Part of the pure
 * scenario library; the NVML calls that answer from them are in fake_props_calls.c. */
#include "fake_props.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	int kind;
} keys[FP_N] = {
	[FP_POWER_LIMIT] = {"power_limit", FPT_U32},     [FP_POWER_ENFORCED] = {"power_enforced", FPT_U32},
	[FP_POWER_DEFAULT] = {"power_default", FPT_U32}, [FP_POWER_MIN] = {"power_min", FPT_U32},
	[FP_POWER_MAX] = {"power_max", FPT_U32},         [FP_POWER_MGMT] = {"power_mgmt", FPT_ONOFF},
	[FP_FAN] = {"fan", FPT_U32},                     [FP_PSTATE] = {"pstate", FPT_PSTATE},
	[FP_MEM_TEMP] = {"mem_temp", FPT_U32},           [FP_MAX_SM] = {"max_sm", FPT_U32},
	[FP_MAX_MEM] = {"max_mem", FPT_U32},             [FP_MAX_GR] = {"max_gr", FPT_U32},
	[FP_SERIAL] = {"serial", FPT_TEXT},              [FP_VBIOS] = {"vbios", FPT_TEXT},
	[FP_COMPUTE_MODE] = {"compute_mode", FPT_COMPUTE}, [FP_PERSISTENCE] = {"persistence", FPT_ONOFF},
	[FP_PCIE_GEN] = {"pcie_gen", FPT_U32},           [FP_PCIE_GEN_MAX] = {"pcie_gen_max", FPT_U32},
	[FP_PCIE_WIDTH] = {"pcie_width", FPT_U32},       [FP_PCIE_WIDTH_MAX] = {"pcie_width_max", FPT_U32},
	[FP_MIG] = {"mig", FPT_ONOFF},                   [FP_MIG_PENDING] = {"mig_pending", FPT_ONOFF},
	[FP_ECC] = {"ecc", FPT_ONOFF},                   [FP_ECC_PENDING] = {"ecc_pending", FPT_ONOFF},
	[FP_ECC_CV_TOTAL] = {"ecc_cv_total", FPT_U64},   [FP_ECC_CA_TOTAL] = {"ecc_ca_total", FPT_U64},
	[FP_ECC_UV_TOTAL] = {"ecc_uv_total", FPT_U64},   [FP_ECC_UA_TOTAL] = {"ecc_ua_total", FPT_U64},
	[FP_ECC_CV_DRAM] = {"ecc_cv_dram", FPT_U64},     [FP_ECC_CA_DRAM] = {"ecc_ca_dram", FPT_U64},
	[FP_ECC_UV_DRAM] = {"ecc_uv_dram", FPT_U64},     [FP_ECC_UA_DRAM] = {"ecc_ua_dram", FPT_U64},
	[FP_ECC_CV_SRAM] = {"ecc_cv_sram", FPT_U64},     [FP_ECC_CA_SRAM] = {"ecc_ca_sram", FPT_U64},
	[FP_ECC_UV_SRAM] = {"ecc_uv_sram", FPT_U64},     [FP_ECC_UA_SRAM] = {"ecc_ua_sram", FPT_U64},
	[FP_RETIRED_SBE] = {"retired_sbe", FPT_U32},     [FP_RETIRED_DBE] = {"retired_dbe", FPT_U32},
	[FP_RETIRED_PENDING] = {"retired_pending", FPT_ONOFF},
	[FP_REMAP_CORR] = {"remap_corr", FPT_U32},       [FP_REMAP_UNC] = {"remap_unc", FPT_U32},
	[FP_REMAP_PENDING] = {"remap_pending", FPT_ONOFF}, [FP_REMAP_FAILURE] = {"remap_failure", FPT_ONOFF},
};

int fake_prop_key(const char *name, int *kind)
{
	for (int i = 0; i < FP_N; i++) {
		if (strcmp(keys[i].name, name) == 0) {
			*kind = keys[i].kind;
			return i;
		}
	}
	return -1;
}

/* A decimal number up to max; 0 or -1. */
static int parse_num(const char *s, uint64_t max, uint64_t *v)
{
	uint64_t x = 0;
	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || x > (max - (uint64_t)(*s - '0')) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	*v = x;
	return 0;
}

const char *fake_prop_parse(int kind, const char *text, int (*parse_code)(const char *, int *), uint64_t *v)
{
	if (text[0] == '!') {
		int code;
		if (parse_code(text + 1, &code) < 0 || code < 0 || code > 0xFFFF)
			return "return code after '!'";
		*v = FP_CODE_FLAG | (uint64_t)code;
		return NULL;
	}
	switch (kind) {
	case FPT_U32: return parse_num(text, UINT32_MAX, v) < 0 ? "number" : NULL;
	case FPT_U64: return parse_num(text, UINT64_MAX >> 1, v) < 0 ? "number" : NULL;
	case FPT_ONOFF:
		if (!strcmp(text, "on") || !strcmp(text, "1"))
			*v = 1;
		else if (!strcmp(text, "off") || !strcmp(text, "0"))
			*v = 0;
		else
			return "on or off";
		return NULL;
	case FPT_PSTATE:
		if (text[0] == 'P' && parse_num(text + 1, 15, v) == 0)
			return NULL;
		return parse_num(text, 32, v) < 0 ? "pstate (P0 .. P15, or 32 for unknown)" : NULL;
	case FPT_COMPUTE: {
		static const char *const modes[] = {"default", "exclusive_thread", "prohibited", "exclusive_process"};
		for (uint64_t i = 0; i < 4; i++) {
			if (!strcmp(text, modes[i])) {
				*v = i;
				return NULL;
			}
		}
		return "compute mode (default, exclusive_thread, prohibited, exclusive_process)";
	}
	default: return "value";
	}
}

void fake_props_defaults(struct fake_props *p)
{
	static const struct {
		int key;
		uint64_t v;
	} h200[] = {
		{FP_POWER_LIMIT, 700000}, {FP_POWER_ENFORCED, 700000}, {FP_POWER_DEFAULT, 700000},
		{FP_POWER_MIN, 200000}, {FP_POWER_MAX, 700000}, {FP_POWER_MGMT, 1},
		{FP_FAN, FP_CODE_FLAG | 3 /* NOT_SUPPORTED: the H200 has no fan of its own */},
		{FP_PSTATE, 0}, {FP_MEM_TEMP, 35}, {FP_MAX_SM, 1980}, {FP_MAX_MEM, 3201}, {FP_MAX_GR, 1980},
		{FP_PERSISTENCE, 1}, {FP_PCIE_GEN, 5}, {FP_PCIE_GEN_MAX, 5}, {FP_PCIE_WIDTH, 16},
		{FP_PCIE_WIDTH_MAX, 16}, {FP_ECC, 1}, {FP_ECC_PENDING, 1},
		/* the H200 remaps rows instead of retiring pages */
		{FP_RETIRED_SBE, FP_CODE_FLAG | 3}, {FP_RETIRED_DBE, FP_CODE_FLAG | 3},
		{FP_RETIRED_PENDING, FP_CODE_FLAG | 3},
	};
	memset(p, 0, sizeof *p);
	for (size_t i = 0; i < sizeof h200 / sizeof h200[0]; i++)
		p->val[h200[i].key] = h200[i].v;
	snprintf(p->serial, sizeof p->serial, "1653924291387");
	snprintf(p->vbios, sizeof p->vbios, "96.00.A5.00.1A");
}

void fake_props_set(struct fake_props *p, unsigned key, uint64_t v, const char *pool)
{
	if (key >= FP_N)
		return;
	const char *text = (key == FP_SERIAL || key == FP_VBIOS) && !(v & FP_CODE_FLAG) ? pool + v : NULL;
	p->val[key] = v;
	if (text && key == FP_SERIAL)
		snprintf(p->serial, sizeof p->serial, "%s", text);
	else if (text && key == FP_VBIOS)
		snprintf(p->vbios, sizeof p->vbios, "%s", text);
}
