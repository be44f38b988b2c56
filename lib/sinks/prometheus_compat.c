/* SPDX-License-Identifier: MIT */
/* prometheus_compat.c — the peers' metric names and labels (dcgm-exporter, nvidia_gpu_exporter),
 * rendered from the same state as gpumon's own families so that existing dashboards keep working
 * (gpumon serve --compat dcgm|nvidia_smi). Units are the peers': dcgm-exporter reports MiB. */
#include <stdio.h>

#include "prometheus.h"

#define MIB (1024.0 * 1024.0)

enum cfield {
	C_TOTAL, C_USED, C_FREE, C_RESERVED, C_UTIL, C_MEMUTIL, C_TEMP, C_POWER, C_SM, C_MEM, C_INDEX,
	/* memory health (dcgm-exporter's names) */
	C_ECC_SBE_VOL, C_ECC_DBE_VOL, C_ECC_SBE_AGG, C_ECC_DBE_AGG, C_RETIRED_SBE, C_RETIRED_DBE,
	C_RETIRED_PENDING, C_REMAP_CORR, C_REMAP_UNC, C_REMAP_PENDING, C_REMAP_FAILURE, C_XID_LAST,
};

struct cfamily {
	const char *name, *help;
	enum cfield f;
	double scale; /* value = raw * scale */
};

/* dcgm-exporter's default counters (etc/default-counters.csv) for what NVML gives us; the energy
 * counter is left out: dcgm-exporter types it a counter without _total, which promtool rejects. */
static const struct cfamily dcgm[] = {
	{"DCGM_FI_DEV_FB_TOTAL", "Framebuffer memory total (in MiB).", C_TOTAL, 1.0 / MIB},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", C_USED, 1.0 / MIB},
	{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", C_FREE, 1.0 / MIB},
	{"DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", C_RESERVED, 1.0 / MIB},
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", C_UTIL, 1},
	{"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", C_MEMUTIL, 1},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", C_TEMP, 1},
	{"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", C_POWER, 1.0 / 1000},
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", C_SM, 1},
	{"DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", C_MEM, 1},
	/* memory health; typed gauge here: dcgm-exporter's counters lack _total, which promtool rejects */
	{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.", C_ECC_SBE_VOL, 1},
	{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.", C_ECC_DBE_VOL, 1},
	{"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.", C_ECC_SBE_AGG, 1},
	{"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.", C_ECC_DBE_AGG, 1},
	{"DCGM_FI_DEV_RETIRED_SBE", "Total number of retired pages due to single-bit errors.", C_RETIRED_SBE, 1},
	{"DCGM_FI_DEV_RETIRED_DBE", "Total number of retired pages due to double-bit errors.", C_RETIRED_DBE, 1},
	{"DCGM_FI_DEV_RETIRED_PENDING", "Total number of pages pending retirement.", C_RETIRED_PENDING, 1},
	{"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors.", C_REMAP_CORR, 1},
	{"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable errors.", C_REMAP_UNC, 1},
	{"DCGM_FI_DEV_ROW_REMAP_PENDING", "Whether remapping of rows is pending.", C_REMAP_PENDING, 1},
	{"DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed.", C_REMAP_FAILURE, 1},
	{"DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", C_XID_LAST, 1},
};

/* nvidia_gpu_exporter (utkuozdemir/nvidia_gpu_exporter): nvidia-smi's field names. */
static const struct cfamily nsmi[] = {
	{"nvidia_smi_index", "index", C_INDEX, 1},
	{"nvidia_smi_memory_total_bytes", "memory.total [MiB]", C_TOTAL, 1},
	{"nvidia_smi_memory_used_bytes", "memory.used [MiB]", C_USED, 1},
	{"nvidia_smi_memory_free_bytes", "memory.free [MiB]", C_FREE, 1},
	{"nvidia_smi_memory_reserved_bytes", "memory.reserved [MiB]", C_RESERVED, 1},
	{"nvidia_smi_utilization_gpu_ratio", "utilization.gpu [%]", C_UTIL, 0.01},
	{"nvidia_smi_utilization_memory_ratio", "utilization.memory [%]", C_MEMUTIL, 0.01},
	{"nvidia_smi_temperature_gpu", "temperature.gpu", C_TEMP, 1},
	{"nvidia_smi_power_draw_watts", "power.draw [W]", C_POWER, 1.0 / 1000},
	{"nvidia_smi_clocks_current_sm_clock_hz", "clocks.current.sm [MHz]", C_SM, 1e6},
	{"nvidia_smi_clocks_current_memory_clock_hz", "clocks.current.memory [MHz]", C_MEM, 1e6},
};

/* The health figures (counts, 0/1 flags, the last XID code); 0 when absent. */
static int health_raw(const struct prom_gpu *g, enum cfield f, double *x)
{
	const gpumon_device_props *h = &g->health;
	uint64_t has = g->have_health ? h->present : 0;
	switch (f) {
	case C_ECC_SBE_VOL: *x = (double)h->ecc_total[GPUMON_ECC_CORRECTED][GPUMON_ECC_VOLATILE]; return !!(has & GPUMON_P_ECC_TOTAL);
	case C_ECC_DBE_VOL: *x = (double)h->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_VOLATILE]; return !!(has & GPUMON_P_ECC_TOTAL);
	case C_ECC_SBE_AGG: *x = (double)h->ecc_total[GPUMON_ECC_CORRECTED][GPUMON_ECC_AGGREGATE]; return !!(has & GPUMON_P_ECC_TOTAL);
	case C_ECC_DBE_AGG: *x = (double)h->ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_AGGREGATE]; return !!(has & GPUMON_P_ECC_TOTAL);
	case C_RETIRED_SBE: *x = h->retired_sbe; return !!(has & GPUMON_P_RETIRED_SBE);
	case C_RETIRED_DBE: *x = h->retired_dbe; return !!(has & GPUMON_P_RETIRED_DBE);
	case C_RETIRED_PENDING: *x = h->retired_pending; return !!(has & GPUMON_P_RETIRED_PENDING);
	case C_REMAP_CORR: *x = h->remapped_correctable; return !!(has & GPUMON_P_REMAPPED_ROWS);
	case C_REMAP_UNC: *x = h->remapped_uncorrectable; return !!(has & GPUMON_P_REMAPPED_ROWS);
	case C_REMAP_PENDING: *x = h->remapped_pending; return !!(has & GPUMON_P_REMAPPED_ROWS);
	case C_REMAP_FAILURE: *x = h->remapped_failure; return !!(has & GPUMON_P_REMAPPED_ROWS);
	case C_XID_LAST: *x = g->last_xid; return g->have_xid;
	default: return 0;
	}
}

/* The raw value of f (bytes, percent, C, mW, MHz); 0 when absent. */
static int raw(const struct prom_gpu *g, enum cfield f, double *x)
{
	unsigned p = g->up && !g->stale && g->have_sample ? g->s.present : 0;
	const gpumon_device_sample *s = &g->s;
	switch (f) {
	case C_TOTAL: *x = (double)s->memory_total_bytes; return !!(p & GPUMON_F_MEMORY);
	case C_USED: *x = (double)s->memory_used_bytes; return !!(p & GPUMON_F_MEMORY);
	case C_FREE: *x = (double)s->memory_free_bytes; return !!(p & GPUMON_F_MEMORY);
	case C_RESERVED: *x = (double)s->memory_reserved_bytes; return !!(p & GPUMON_F_MEM_RESERVED);
	case C_UTIL: *x = s->util_gpu_pct; return !!(p & GPUMON_F_UTIL_GPU);
	case C_MEMUTIL: *x = s->util_memory_pct; return !!(p & GPUMON_F_UTIL_MEMORY);
	case C_TEMP: *x = s->temperature_c; return !!(p & GPUMON_F_TEMPERATURE);
	case C_POWER: *x = s->power_mw; return !!(p & GPUMON_F_POWER);
	case C_SM: *x = s->clock_sm_mhz; return !!(p & GPUMON_F_CLOCK_SM);
	case C_MEM: *x = s->clock_mem_mhz; return !!(p & GPUMON_F_CLOCK_MEM);
	case C_INDEX: *x = g->info.index; return 1;
	default: return health_raw(g, f, x);
	}
	return 0;
}

static void render_table(const struct prom_view *v, struct prom_buf *b, const struct cfamily *t, size_t n, int is_dcgm)
{
	for (size_t k = 0; k < n; k++) {
		int header = 0;
		for (unsigned i = 0; i < v->ngpus; i++) {
			const struct prom_gpu *g = &v->gpus[i];
			double x;
			if (!raw(g, t[k].f, &x))
				continue;
			if (!header++)
				gpumon__prom_family(b, t[k].name, "gauge", t[k].help);
			if (is_dcgm) {
				/* dcgm-exporter prints whole MiB */
				gpumon__prom_printf(b, "%s{%s%s} %.0f\n", t[k].name, g->dcgm_labels,
						    g->dcgm_owner ? g->dcgm_owner : "", x * t[k].scale);
			} else {
				gpumon__prom_printf(b, "%s{uuid=\"", t[k].name);
				gpumon__prom_label_value(b, g->info.uuid, sizeof g->info.uuid);
				gpumon__prom_printf(b, "\"} %.10g\n", x * t[k].scale);
			}
		}
	}
}

static void render_nsmi_extra(const struct prom_view *v, struct prom_buf *b)
{
	if (v->ngpus)
		gpumon__prom_family(b, "nvidia_smi_gpu_info", "gauge", "A metric with a constant '1' value labeled by gpu uuid, name, driver_version.");
	for (unsigned i = 0; i < v->ngpus; i++) {
		const struct prom_gpu *g = &v->gpus[i];
		gpumon__prom_puts(b, "nvidia_smi_gpu_info{uuid=\"");
		gpumon__prom_label_value(b, g->info.uuid, sizeof g->info.uuid);
		gpumon__prom_puts(b, "\",name=\"");
		gpumon__prom_label_value(b, g->info.name, sizeof g->info.name);
		gpumon__prom_puts(b, "\",driver_version=\"");
		gpumon__prom_label_value(b, v->driver_version ? v->driver_version : "", 96);
		gpumon__prom_puts(b, "\"} 1\n");
	}
	int header = 0;
	for (size_t i = 0; v->processes && i < v->nprocs; i++) {
		const struct prom_proc *p = v->procs[i];
		if (!p->used_known || p->dev >= v->ngpus)
			continue;
		if (!header++)
			gpumon__prom_family(b, "nvidia_smi_compute_app_used_memory_bytes", "gauge", "used_memory [MiB] of a compute app.");
		gpumon__prom_printf(b, "nvidia_smi_compute_app_used_memory_bytes{pid=\"%u\",process_name=\"%s\",uuid=\"", p->pid, p->name);
		gpumon__prom_label_value(b, v->gpus[p->dev].info.uuid, sizeof v->gpus[p->dev].info.uuid);
		gpumon__prom_printf(b, "\"} %llu\n", (unsigned long long)p->used_bytes);
	}
}

void gpumon__prom_render_compat(const struct prom_view *v, struct prom_buf *b)
{
	if (v->compat & GPUMON_COMPAT_DCGM)
		render_table(v, b, dcgm, sizeof dcgm / sizeof dcgm[0], 1);
	if (v->compat & GPUMON_COMPAT_NVIDIA_SMI) {
		render_table(v, b, nsmi, sizeof nsmi / sizeof nsmi[0], 0);
		render_nsmi_extra(v, b);
	}
}
