/* SPDX-License-Identifier: MIT */
/* health.c — what a card's memory health figures call for, decided here once so that show, watch
 * and the exporter raise the same warnings from the same figures. */
#include "../internal.h"

const char *gpumon_health_problem_name(unsigned bit)
{
	switch (bit) {
	case GPUMON_HEALTH_ECC_UNCORRECTED: return "ecc_uncorrected";
	case GPUMON_HEALTH_RETIRED_PENDING: return "retired_pages_pending";
	case GPUMON_HEALTH_RETIRED_DBE: return "retired_pages_double_bit";
	case GPUMON_HEALTH_REMAP_PENDING: return "remapped_rows_pending";
	case GPUMON_HEALTH_REMAP_FAILURE: return "remapped_rows_failure";
	case GPUMON_HEALTH_REMAP_UNCORRECTABLE: return "remapped_rows_uncorrectable";
	default: return NULL;
	}
}

unsigned gpumon_health_problems(const gpumon_device_props *p)
{
	if (!p)
		return 0;
	unsigned bits = 0;
	uint64_t has = p->present;
	if ((has & GPUMON_P_ECC_TOTAL) && p->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_VOLATILE] > 0)
		bits |= GPUMON_HEALTH_ECC_UNCORRECTED;
	if ((has & GPUMON_P_RETIRED_PENDING) && p->retired_pending)
		bits |= GPUMON_HEALTH_RETIRED_PENDING;
	if ((has & GPUMON_P_RETIRED_DBE) && p->retired_dbe > 0)
		bits |= GPUMON_HEALTH_RETIRED_DBE;
	if (has & GPUMON_P_REMAPPED_ROWS) {
		if (p->remapped_pending)
			bits |= GPUMON_HEALTH_REMAP_PENDING;
		if (p->remapped_failure)
			bits |= GPUMON_HEALTH_REMAP_FAILURE;
		if (p->remapped_uncorrectable > 0)
			bits |= GPUMON_HEALTH_REMAP_UNCORRECTABLE;
	}
	return bits;
}
