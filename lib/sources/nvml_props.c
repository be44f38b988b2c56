/* SPDX-License-Identifier: MIT */
/* nvml_props.c — a device's properties and memory health (gpumon_device_props_read): power
 * limits, fan, performance state, maximum clocks, serial, VBIOS, modes, PCIe link, ECC errors,
 * retired pages and remapped rows, each through the one NVML call nvidia-smi uses for it. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "../internal.h"
#include "nvml_abi.h"

/* What one read is doing: the device, and the masks being filled. */
struct props_read {
	gpumon *g;
	struct device *d;
	uint64_t want;
	gpumon_device_props *p;
	int lost; /* a call said the GPU is lost: stop and report it */
};

/* Sorts the outcome r of the call behind the bits `bits`. Returns 1 when the call answered. */
static int outcome(struct props_read *pr, const char *call, nvml_ret r, uint64_t bits)
{
	if (r == NVML_SUCCESS) {
		pr->p->present |= bits;
		return 1;
	}
	if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED) {
		pr->lost = 1;
		atomic_store(&pr->d->lost, 1);
		gpumon__seterr(pr->g, GPUMON_E_LOST, "%s on GPU %u: GPU is lost (fallen off the bus or needs a reset)",
			       call, pr->d->info.index);
	} else if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
		pr->p->not_supported |= bits;
	} else if (r == NVML_ERROR_NO_PERMISSION) {
		pr->p->no_permission |= bits;
	} else {
		/* counted per function and named in the message; the field stays absent */
		gpumon__seterr(pr->g, gpumon__status_from_nvml(r), "%s on GPU %u: %s", call, pr->d->info.index,
			       gpumon__nvml_errstr(pr->g, r));
	}
	return 0;
}

/* 1 when some of bits is wanted and the read goes on; a missing symbol marks them unsupported. */
static int asked(struct props_read *pr, uint64_t bits, const void *fn)
{
	if (!(pr->want & bits) || pr->lost)
		return 0;
	if (!fn) {
		pr->p->not_supported |= pr->want & bits;
		return 0;
	}
	return 1;
}

/* One unsigned value through fn(handle, &value). */
static void read_uint(struct props_read *pr, uint64_t bit, nvml_ret (*fn)(nvml_device, unsigned *),
		      const char *call, unsigned *dst)
{
	unsigned v = 0;
	if (asked(pr, bit, (const void *)fn) && outcome(pr, call, fn(pr->d->handle, &v), bit))
		*dst = v;
}

/* An NVML enable state (0 disabled, 1 enabled) through fn(handle, &state). */
static void read_state(struct props_read *pr, uint64_t bit, nvml_ret (*fn)(nvml_device, int *), const char *call,
		       int *dst)
{
	int v = 0;
	if (asked(pr, bit, (const void *)fn) && outcome(pr, call, fn(pr->d->handle, &v), bit))
		*dst = v != 0;
}

/* The size of the text fields (serial, VBIOS): NVML's own buffers for them are 30 and 32 bytes. */
#define PROP_TEXT sizeof(((gpumon_device_props *)0)->serial)
_Static_assert(sizeof(((gpumon_device_props *)0)->vbios) == PROP_TEXT, "serial and vbios are one size");

/* A text through fn(handle, buf, size), asked with the field's own size: a text that does not fit
 * is NVML's INSUFFICIENT_SIZE (the field stays absent), never cut to a wrong value. */
static void read_text(struct props_read *pr, uint64_t bit, nvml_ret (*fn)(nvml_device, char *, unsigned),
		      const char *call, char dst[PROP_TEXT])
{
	char buf[PROP_TEXT];
	memset(buf, 0, sizeof buf);
	if (asked(pr, bit, (const void *)fn) && outcome(pr, call, fn(pr->d->handle, buf, (unsigned)sizeof buf), bit)) {
		buf[sizeof buf - 1] = 0;
		memcpy(dst, buf, sizeof buf);
	}
}

static void read_power(struct props_read *pr)
{
	const struct nvml_api *api = &pr->g->nvml;
	gpumon_device_props *p = pr->p;
	read_uint(pr, GPUMON_P_POWER_LIMIT, api->power_limit, "nvmlDeviceGetPowerManagementLimit", &p->power_limit_mw);
	read_uint(pr, GPUMON_P_POWER_ENFORCED, api->power_enforced, "nvmlDeviceGetEnforcedPowerLimit",
		  &p->power_enforced_mw);
	read_uint(pr, GPUMON_P_POWER_DEFAULT, api->power_default, "nvmlDeviceGetPowerManagementDefaultLimit",
		  &p->power_default_mw);
	const uint64_t minmax = GPUMON_P_POWER_MIN | GPUMON_P_POWER_MAX;
	unsigned lo = 0, hi = 0;
	if (asked(pr, minmax, (const void *)api->power_constraints) &&
	    outcome(pr, "nvmlDeviceGetPowerManagementLimitConstraints", api->power_constraints(pr->d->handle, &lo, &hi),
		    pr->want & minmax)) {
		p->power_min_mw = lo;
		p->power_max_mw = hi;
	}
	read_state(pr, GPUMON_P_POWER_MANAGEMENT, api->power_mode, "nvmlDeviceGetPowerManagementMode",
		   &p->power_management);
}

/* The performance state; NVML's "unknown" (32) is no value. */
static void read_pstate(struct props_read *pr)
{
	const struct nvml_api *api = &pr->g->nvml;
	int v = 0;
	if (!asked(pr, GPUMON_P_PSTATE, (const void *)api->pstate) ||
	    !outcome(pr, "nvmlDeviceGetPerformanceState", api->pstate(pr->d->handle, &v), GPUMON_P_PSTATE))
		return;
	if (v < 0 || v > NVML_PSTATE_15) {
		pr->p->present &= ~GPUMON_P_PSTATE;
		pr->p->not_supported |= GPUMON_P_PSTATE;
		return;
	}
	pr->p->pstate = (unsigned)v;
}

/* The memory (HBM) temperature: a field value, as no temperature sensor id names it. */
static void read_memory_temp(struct props_read *pr)
{
	const struct nvml_api *api = &pr->g->nvml;
	struct nvml_field_value fv;
	if (!asked(pr, GPUMON_P_MEMORY_TEMP, (const void *)api->field_values))
		return;
	memset(&fv, 0, sizeof fv);
	fv.field_id = NVML_FI_DEV_MEMORY_TEMP;
	nvml_ret r = api->field_values(pr->d->handle, 1, &fv);
	if (r == NVML_SUCCESS)
		r = fv.ret;
	if (!outcome(pr, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)", r, GPUMON_P_MEMORY_TEMP))
		return;
	unsigned long long v;
	switch (fv.value_type) {
	case NVML_VALUE_TYPE_UNSIGNED_INT: v = fv.value.ui; break;
	case NVML_VALUE_TYPE_UNSIGNED_LONG: v = fv.value.ul; break;
	case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: v = fv.value.ull; break;
	case NVML_VALUE_TYPE_SIGNED_LONG_LONG: v = fv.value.sll < 0 ? 0 : (unsigned long long)fv.value.sll; break;
	case NVML_VALUE_TYPE_SIGNED_INT: v = fv.value.si < 0 ? 0 : (unsigned long long)fv.value.si; break;
	case NVML_VALUE_TYPE_UNSIGNED_SHORT: v = fv.value.us; break;
	default: v = ~0ULL; break; /* a double, or a type newer than we know: not a temperature we trust */
	}
	if (v > 1000) {
		pr->p->present &= ~GPUMON_P_MEMORY_TEMP;
		gpumon__seterr(pr->g, GPUMON_E_NVML, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP) on GPU %u: "
			       "value of type %d not understood", pr->d->info.index, fv.value_type);
		return;
	}
	pr->p->memory_temp_c = (unsigned)v;
}

static void read_max_clock(struct props_read *pr, uint64_t bit, unsigned type, unsigned *dst)
{
	const struct nvml_api *api = &pr->g->nvml;
	unsigned v = 0;
	if (asked(pr, bit, (const void *)api->max_clock) &&
	    outcome(pr, "nvmlDeviceGetMaxClockInfo", api->max_clock(pr->d->handle, type, &v), bit))
		*dst = v;
}

static void read_identity(struct props_read *pr)
{
	const struct nvml_api *api = &pr->g->nvml;
	gpumon_device_props *p = pr->p;
	read_uint(pr, GPUMON_P_FAN, api->fan, "nvmlDeviceGetFanSpeed", &p->fan_pct);
	read_pstate(pr);
	read_memory_temp(pr);
	read_max_clock(pr, GPUMON_P_CLOCK_MAX_SM, NVML_CLOCK_SM, &p->clock_max_sm_mhz);
	read_max_clock(pr, GPUMON_P_CLOCK_MAX_MEM, NVML_CLOCK_MEM, &p->clock_max_mem_mhz);
	read_max_clock(pr, GPUMON_P_CLOCK_MAX_GRAPHICS, NVML_CLOCK_GRAPHICS, &p->clock_max_graphics_mhz);
	read_text(pr, GPUMON_P_SERIAL, api->serial, "nvmlDeviceGetSerial", p->serial);
	read_text(pr, GPUMON_P_VBIOS, api->vbios, "nvmlDeviceGetVbiosVersion", p->vbios);
	int mode = 0;
	if (asked(pr, GPUMON_P_COMPUTE_MODE, (const void *)api->compute_mode) &&
	    outcome(pr, "nvmlDeviceGetComputeMode", api->compute_mode(pr->d->handle, &mode), GPUMON_P_COMPUTE_MODE))
		p->compute_mode = (unsigned)mode;
	read_state(pr, GPUMON_P_PERSISTENCE, api->persistence, "nvmlDeviceGetPersistenceMode", &p->persistence);
	read_uint(pr, GPUMON_P_PCIE_GEN, api->pcie_gen, "nvmlDeviceGetCurrPcieLinkGeneration", &p->pcie_gen_current);
	read_uint(pr, GPUMON_P_PCIE_GEN_MAX, api->pcie_gen_max, "nvmlDeviceGetMaxPcieLinkGeneration", &p->pcie_gen_max);
	read_uint(pr, GPUMON_P_PCIE_WIDTH, api->pcie_width, "nvmlDeviceGetCurrPcieLinkWidth", &p->pcie_width_current);
	read_uint(pr, GPUMON_P_PCIE_WIDTH_MAX, api->pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth", &p->pcie_width_max);
}

static void read_modes(struct props_read *pr)
{
	const struct nvml_api *api = &pr->g->nvml;
	gpumon_device_props *p = pr->p;
	unsigned cur = 0, pend = 0;
	if (asked(pr, GPUMON_P_MIG_MODE, (const void *)api->mig_mode) &&
	    outcome(pr, "nvmlDeviceGetMigMode", api->mig_mode(pr->d->handle, &cur, &pend), GPUMON_P_MIG_MODE)) {
		p->mig_current = cur != 0;
		p->mig_pending = pend != 0;
	}
	int ec = 0, ep = 0;
	if (asked(pr, GPUMON_P_ECC_MODE, (const void *)api->ecc_mode) &&
	    outcome(pr, "nvmlDeviceGetEccMode", api->ecc_mode(pr->d->handle, &ec, &ep), GPUMON_P_ECC_MODE)) {
		p->ecc_current = ec != 0;
		p->ecc_pending = ep != 0;
	}
}

/*
 * One ECC counter group: the four counts [type][counter] of a location (location < 0: the chip's
 * total). The group holds a value only when all four calls answered; the first failure decides
 * what the group is marked.
 */
static void read_ecc_group(struct props_read *pr, uint64_t bit, int location, uint64_t out[2][2])
{
	const struct nvml_api *api = &pr->g->nvml;
	const void *fn = location < 0 ? (const void *)api->ecc_total : (const void *)api->ecc_counter;
	const char *call = location < 0 ? "nvmlDeviceGetTotalEccErrors" : "nvmlDeviceGetMemoryErrorCounter";
	uint64_t v[2][2];
	if (!asked(pr, bit, fn))
		return;
	for (int type = 0; type < 2; type++) {
		for (int counter = 0; counter < 2; counter++) {
			unsigned long long n = 0;
			nvml_ret r = location < 0 ? api->ecc_total(pr->d->handle, type, counter, &n)
						  : api->ecc_counter(pr->d->handle, type, counter, location, &n);
			if (r != NVML_SUCCESS) {
				outcome(pr, call, r, bit);
				return;
			}
			v[type][counter] = n;
		}
	}
	pr->p->present |= bit;
	memcpy(out, v, sizeof v);
}

static void read_retired(struct props_read *pr, uint64_t bit, int cause, unsigned *dst)
{
	const struct nvml_api *api = &pr->g->nvml;
	unsigned count = 0;
	if (!asked(pr, bit, (const void *)api->retired_pages))
		return;
	/* with no room for addresses NVML answers the count alone (INSUFFICIENT_SIZE when there are any) */
	nvml_ret r = api->retired_pages(pr->d->handle, cause, &count, NULL);
	if (r == NVML_ERROR_INSUFFICIENT_SIZE)
		r = NVML_SUCCESS;
	if (outcome(pr, "nvmlDeviceGetRetiredPages", r, bit))
		*dst = count;
}

static void read_health(struct props_read *pr)
{
	const struct nvml_api *api = &pr->g->nvml;
	gpumon_device_props *p = pr->p;
	read_ecc_group(pr, GPUMON_P_ECC_TOTAL, -1, p->ecc_total);
	read_ecc_group(pr, GPUMON_P_ECC_DRAM, NVML_MEMORY_LOCATION_DRAM, p->ecc_dram);
	read_ecc_group(pr, GPUMON_P_ECC_SRAM, NVML_MEMORY_LOCATION_SRAM, p->ecc_sram);
	read_retired(pr, GPUMON_P_RETIRED_SBE, NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &p->retired_sbe);
	read_retired(pr, GPUMON_P_RETIRED_DBE, NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, &p->retired_dbe);
	read_state(pr, GPUMON_P_RETIRED_PENDING, api->retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus",
		   &p->retired_pending);
	unsigned c = 0, u = 0, pend = 0, fail = 0;
	if (asked(pr, GPUMON_P_REMAPPED_ROWS, (const void *)api->remapped_rows) &&
	    outcome(pr, "nvmlDeviceGetRemappedRows", api->remapped_rows(pr->d->handle, &c, &u, &pend, &fail),
		    GPUMON_P_REMAPPED_ROWS)) {
		p->remapped_correctable = c;
		p->remapped_uncorrectable = u;
		p->remapped_pending = pend != 0;
		p->remapped_failure = fail != 0;
	}
}

int gpumon_device_props_read(gpumon *g, unsigned dev, uint64_t want, gpumon_device_props *out)
{
	if (!g || !out)
		return GPUMON_E_INVAL;
	unsigned size = out->size;
	if (size < sizeof(gpumon_device_props) || size > sizeof(gpumon_device_props))
		return gpumon__seterr(g, GPUMON_E_INVAL, "gpumon_device_props: size %u is not that of any version "
				      "(set it to sizeof the struct)", size);
	if (want & ~GPUMON_P_ALL)
		return gpumon__seterr(g, GPUMON_E_INVAL, "unknown property bits 0x%llx",
				      (unsigned long long)(want & ~GPUMON_P_ALL));
	memset(out, 0, sizeof *out);
	out->size = size;
	struct device *d;
	int st = gpumon__device_get(g, dev, &d);
	if (st != GPUMON_OK)
		return st;
	struct props_read pr = {g, d, want, out, 0};
	read_power(&pr);
	read_identity(&pr);
	read_modes(&pr);
	read_health(&pr);
	if (pr.lost) {
		out->present = out->not_supported = out->no_permission = 0;
		return GPUMON_E_LOST;
	}
	return GPUMON_OK;
}
