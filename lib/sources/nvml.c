/* SPDX-License-Identifier: MIT */
/* nvml.c — NVML through dlopen with our own declarations: one symbol table with version
 * fallbacks, the device table, device samples and per-device process lists. A missing symbol or
 * NOT_SUPPORTED leaves a field absent; only the five required calls can make opening fail. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../internal.h"
#include "nvml_abi.h"

#define NVML_DEFAULT_LIBRARY "libnvidia-ml.so.1"
#define API_OFF(field) offsetof(struct nvml_api, field)

/* Newest name first; the first one the library exports is used. */
static const struct nvml_symbol {
	const char *names[3];
	size_t off;
	int required;
} nvml_symbols[] = {
	{{"nvmlInit_v2", "nvmlInit"}, API_OFF(init), 1},
	{{"nvmlShutdown"}, API_OFF(shutdown), 1},
	{{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, API_OFF(device_count), 1},
	{{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, API_OFF(handle_by_index), 1},
	{{"nvmlDeviceGetMemoryInfo"}, API_OFF(memory_v1), 1},
	{{"nvmlDeviceGetMemoryInfo_v2"}, API_OFF(memory_v2), 0},
	{{"nvmlErrorString"}, API_OFF(error_string), 0},
	{{"nvmlDeviceGetName"}, API_OFF(name), 0},
	{{"nvmlDeviceGetUUID"}, API_OFF(uuid), 0},
	{{"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, API_OFF(pci_v3), 0},
	{{"nvmlDeviceGetPciInfo"}, API_OFF(pci_v1), 0},
	{{"nvmlDeviceGetUtilizationRates"}, API_OFF(utilization), 0},
	{{"nvmlDeviceGetTemperature"}, API_OFF(temperature), 0},
	{{"nvmlDeviceGetPowerUsage"}, API_OFF(power), 0},
	{{"nvmlDeviceGetTotalEnergyConsumption"}, API_OFF(energy), 0},
	{{"nvmlDeviceGetClockInfo"}, API_OFF(clock), 0},
	{{"nvmlSystemGetDriverVersion"}, API_OFF(driver_version), 0},
	{{"nvmlSystemGetNVMLVersion"}, API_OFF(nvml_version), 0},
	{{"nvmlSystemGetProcessName"}, API_OFF(process_name), 0},
	/* device properties and memory health (nvml_props.c) */
	{{"nvmlDeviceGetPowerManagementLimit"}, API_OFF(power_limit), 0},
	{{"nvmlDeviceGetEnforcedPowerLimit"}, API_OFF(power_enforced), 0},
	{{"nvmlDeviceGetPowerManagementDefaultLimit"}, API_OFF(power_default), 0},
	{{"nvmlDeviceGetPowerManagementLimitConstraints"}, API_OFF(power_constraints), 0},
	{{"nvmlDeviceGetPowerManagementMode"}, API_OFF(power_mode), 0},
	{{"nvmlDeviceGetFanSpeed"}, API_OFF(fan), 0},
	{{"nvmlDeviceGetPerformanceState"}, API_OFF(pstate), 0},
	{{"nvmlDeviceGetFieldValues"}, API_OFF(field_values), 0},
	{{"nvmlDeviceGetMaxClockInfo"}, API_OFF(max_clock), 0},
	{{"nvmlDeviceGetSerial"}, API_OFF(serial), 0},
	{{"nvmlDeviceGetVbiosVersion"}, API_OFF(vbios), 0},
	{{"nvmlDeviceGetComputeMode"}, API_OFF(compute_mode), 0},
	{{"nvmlDeviceGetPersistenceMode"}, API_OFF(persistence), 0},
	{{"nvmlDeviceGetCurrPcieLinkGeneration"}, API_OFF(pcie_gen), 0},
	{{"nvmlDeviceGetMaxPcieLinkGeneration"}, API_OFF(pcie_gen_max), 0},
	{{"nvmlDeviceGetCurrPcieLinkWidth"}, API_OFF(pcie_width), 0},
	{{"nvmlDeviceGetMaxPcieLinkWidth"}, API_OFF(pcie_width_max), 0},
	{{"nvmlDeviceGetMigMode"}, API_OFF(mig_mode), 0},
	{{"nvmlDeviceGetEccMode"}, API_OFF(ecc_mode), 0},
	{{"nvmlDeviceGetTotalEccErrors"}, API_OFF(ecc_total), 0},
	{{"nvmlDeviceGetMemoryErrorCounter"}, API_OFF(ecc_counter), 0},
	/* _v2 adds timestamps we do not use; both take the same first arguments */
	{{"nvmlDeviceGetRetiredPages"}, API_OFF(retired_pages), 0},
	{{"nvmlDeviceGetRetiredPagesPendingStatus"}, API_OFF(retired_pending), 0},
	{{"nvmlDeviceGetRemappedRows"}, API_OFF(remapped_rows), 0},
	/* XID events (nvml_events.c) */
	{{"nvmlEventSetCreate"}, API_OFF(event_set_create), 0},
	{{"nvmlDeviceRegisterEvents"}, API_OFF(register_events), 0},
	{{"nvmlEventSetWait_v2", "nvmlEventSetWait"}, API_OFF(event_set_wait), 0},
	{{"nvmlEventSetFree"}, API_OFF(event_set_free), 0},
	/* MIG */
	{{"nvmlDeviceGetMaxMigDeviceCount"}, API_OFF(max_mig_count), 0},
	{{"nvmlDeviceGetMigDeviceHandleByIndex"}, API_OFF(mig_handle), 0},
	{{"nvmlDeviceGetGpuInstanceId"}, API_OFF(gpu_instance_id), 0},
	{{"nvmlDeviceGetComputeInstanceId"}, API_OFF(compute_instance_id), 0},
	{{"nvmlDeviceIsMigDeviceHandle"}, API_OFF(is_mig_handle), 0},
};

const char *gpumon__nvml_errstr(const gpumon *g, nvml_ret r)
{
	if (g->nvml.error_string) {
		const char *s = g->nvml.error_string(r);
		if (s)
			return s;
	}
	switch (r) {
	case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
	case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
	case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
	default: return "error";
	}
}

/* Stores dlsym's answer in the function pointer at offset off of the table (POSIX idiom). */
static void *sym_slot(struct nvml_api *api, size_t off)
{
	return (char *)api + off;
}

static int symbol_loaded(struct nvml_api *api, size_t off)
{
	void *p;
	memcpy(&p, sym_slot(api, off), sizeof p);
	return p != NULL;
}

static void resolve(struct nvml_api *api, const char *name, size_t off)
{
	void *p = dlsym(api->lib, name);
	memcpy(sym_slot(api, off), &p, sizeof p);
}

/* Notes in g->calling the exported name of the call at offset off that is about to be made (the
 * one the table resolved: newest first), so that gpumon_create can name a call that never returns. */
static void note_call(gpumon *g, size_t off)
{
	void *have;
	memcpy(&have, sym_slot(&g->nvml, off), sizeof have);
	for (size_t i = 0; i < sizeof nvml_symbols / sizeof nvml_symbols[0]; i++)
		for (size_t k = 0; nvml_symbols[i].off == off && k < 3 && nvml_symbols[i].names[k]; k++)
			if (dlsym(g->nvml.lib, nvml_symbols[i].names[k]) == have) {
				atomic_store(&g->calling, nvml_symbols[i].names[k]);
				return;
			}
}

/*
 * Drivers 535.43 to 535.86 shipped _v3 process calls that write 32-byte entries while the
 * header said 24; skip _v3 there (REFERENCE.md).
 */
static int driver_has_bad_v3_procs(const char *version)
{
	unsigned major = 0, minor = 0;
	if (sscanf(version, "%u.%u", &major, &minor) != 2)
		return 0;
	return major == 535 && minor >= 43 && minor <= 86;
}

static void resolve_process_calls(gpumon *g)
{
	static const struct {
		const char *compute, *graphics;
		int api;
	} gens[] = {
		{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3", PROC_API_V3},
		{"nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetGraphicsRunningProcesses_v2", PROC_API_V2},
		{"nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses", PROC_API_V1},
	};
	struct nvml_api *api = &g->nvml;
	int skip_v3 = driver_has_bad_v3_procs(g->driver_version);
	for (size_t i = 0; i < sizeof gens / sizeof gens[0]; i++) {
		if (gens[i].api == PROC_API_V3 && skip_v3)
			continue;
		resolve(api, gens[i].compute, API_OFF(compute_procs));
		resolve(api, gens[i].graphics, API_OFF(graphics_procs));
		if (api->compute_procs || api->graphics_procs) {
			api->proc_api = gens[i].api;
			return;
		}
	}
}

int gpumon__nvml_load(gpumon *g)
{
	const char *env = getenv("GPUMON_NVML_LIBRARY");
	const char *path = env && env[0] ? env : NVML_DEFAULT_LIBRARY;
	snprintf(g->path, sizeof g->path, "%s", path);

	g->nvml.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!g->nvml.lib) {
		const char *why = dlerror();
		return gpumon__seterr(g, GPUMON_E_NO_LIBRARY, "cannot load %s: %s", path, why ? why : "not found");
	}
	for (size_t i = 0; i < sizeof nvml_symbols / sizeof nvml_symbols[0]; i++) {
		const struct nvml_symbol *s = &nvml_symbols[i];
		for (size_t k = 0; k < 3 && s->names[k] && !symbol_loaded(&g->nvml, s->off); k++)
			resolve(&g->nvml, s->names[k], s->off);
	}
	for (size_t i = 0; i < sizeof nvml_symbols / sizeof nvml_symbols[0]; i++) {
		const struct nvml_symbol *s = &nvml_symbols[i];
		/* either memory call will do */
		int have = symbol_loaded(&g->nvml, s->off) ||
			   (s->off == API_OFF(memory_v1) && g->nvml.memory_v2);
		if (s->required && !have)
			return gpumon__seterr(g, GPUMON_E_DRIVER, "%s does not export %s: not a usable NVML library",
					      path, s->names[0]);
	}

	note_call(g, API_OFF(init));
	nvml_ret r = g->nvml.init();
	/* as nvidia-smi: refused for lack of permission, else no usable driver; a code above NVML's
	   last (UNKNOWN) is none of NVIDIA's, so no guess about the driver: the library's own words */
	if (r != NVML_SUCCESS)
		return gpumon__seterr(g, r == NVML_ERROR_LIBRARY_NOT_FOUND ? GPUMON_E_NO_LIBRARY
				      : r == NVML_ERROR_NO_PERMISSION ? GPUMON_E_NO_PERMISSION
				      : (unsigned)r > NVML_ERROR_UNKNOWN ? GPUMON_E_NVML : GPUMON_E_DRIVER,
				      "NVML initialisation failed: %s", gpumon__nvml_errstr(g, r));
	g->initialised = 1;
	note_call(g, API_OFF(driver_version));
	if (g->nvml.driver_version &&
	    g->nvml.driver_version(g->driver_version, sizeof g->driver_version) != NVML_SUCCESS)
		g->driver_version[0] = 0;
	note_call(g, API_OFF(nvml_version));
	if (g->nvml.nvml_version &&
	    g->nvml.nvml_version(g->nvml_version, sizeof g->nvml_version) != NVML_SUCCESS)
		g->nvml_version[0] = 0;
	resolve_process_calls(g);
	return GPUMON_OK;
}

void gpumon__nvml_unload(gpumon *g)
{
	if (g->initialised && g->nvml.shutdown)
		g->nvml.shutdown();
	g->initialised = 0;
	if (g->nvml.lib)
		dlclose(g->nvml.lib);
	g->nvml.lib = NULL;
}

/* Copies an NVML string into dst when the call succeeds; returns 1 when it did. */
static int read_string(nvml_ret (*fn)(nvml_device, char *, unsigned), nvml_device h, char *dst, size_t len)
{
	if (!fn || fn(h, dst, (unsigned)len) != NVML_SUCCESS) {
		dst[0] = 0;
		return 0;
	}
	dst[len - 1] = 0;
	return dst[0] != 0;
}

/* PCI bus id in nvidia-smi's form "00000000:00:06.0", from the newest call the driver has. */
static int read_pci(const struct nvml_api *api, nvml_device h, char out[32])
{
	if (api->pci_v3) {
		struct nvml_pci_v3 p;
		memset(&p, 0, sizeof p);
		if (api->pci_v3(h, &p) == NVML_SUCCESS && p.bus_id[0]) {
			p.bus_id[sizeof p.bus_id - 1] = 0;
			snprintf(out, 32, "%s", p.bus_id);
			return 1;
		}
	}
	if (api->pci_v1) {
		struct nvml_pci_v1 p;
		unsigned dom, bus, dev, fn;
		memset(&p, 0, sizeof p);
		p.bus_id[sizeof p.bus_id - 1] = 0;
		if (api->pci_v1(h, &p) == NVML_SUCCESS &&
		    sscanf(p.bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4) {
			snprintf(out, 32, "%08X:%02X:%02X.%X", dom, bus, dev, fn);
			return 1;
		}
	}
	return 0;
}

static int enumerate_one(gpumon *g, unsigned i, struct device *d)
{
	const struct nvml_api *api = &g->nvml;
	gpumon_device_info *info = &d->info;
	info->index = i;
	note_call(g, API_OFF(handle_by_index));
	nvml_ret r = api->handle_by_index(i, &d->handle);
	if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_RESET_REQUIRED) {
		atomic_store(&d->lost, 1);
		return GPUMON_OK; /* kept in the table, marked lost: the others still work */
	}
	if (r != NVML_SUCCESS)
		return gpumon__seterr(g, gpumon__status_from_nvml(r), "nvmlDeviceGetHandleByIndex(%u): %s", i,
				      gpumon__nvml_errstr(g, r));
	note_call(g, API_OFF(name));
	if (read_string(api->name, d->handle, info->name, sizeof info->name))
		info->present |= GPUMON_INFO_NAME;
	note_call(g, API_OFF(uuid));
	if (read_string(api->uuid, d->handle, info->uuid, sizeof info->uuid))
		info->present |= GPUMON_INFO_UUID;
	note_call(g, api->pci_v3 ? API_OFF(pci_v3) : API_OFF(pci_v1));
	if (read_pci(api, d->handle, info->pci_bus_id))
		info->present |= GPUMON_INFO_PCI_BUS_ID;
	gpumon_device_sample s;
	memset(&s, 0, sizeof s);
	note_call(g, api->memory_v2 ? API_OFF(memory_v2) : API_OFF(memory_v1));
	if (gpumon__nvml_memory(g, d, &s) == GPUMON_OK) {
		info->memory_total_bytes = s.memory_total_bytes;
		info->present |= GPUMON_INFO_MEMORY_TOTAL;
	}
	return GPUMON_OK;
}

/* ---- MIG: the MIG devices of each GPU in MIG mode, after the GPUs ---------------------------- */

#define MAX_MIG_PER_GPU 64 /* NVML says 7 on an A100/H100/H200; more would be a driver's bug */

/* The profile in a MIG device's name ("NVIDIA H200 MIG 1g.18gb" -> "1g.18gb"); 0 when none. */
static int profile_from_name(const char *name, char *out, size_t len)
{
	const char *p = NULL;
	for (const char *q = name; (q = strstr(q, "MIG ")) != NULL; q++)
		if (q == name || q[-1] == ' ')
			p = q + 4;
	if (!p || !*p)
		return 0;
	snprintf(out, len, "%s", p);
	return 1;
}

/* Appends MIG device h, the k-th under GPU gpu, to the table; a status only for lack of memory. */
static int add_mig(gpumon *g, unsigned gpu, unsigned k, nvml_device h)
{
	const struct nvml_api *api = &g->nvml;
	struct device *nd = realloc(g->dev, ((size_t)g->ndev + 1) * sizeof *nd);
	if (!nd)
		return gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory for the MIG devices of GPU %u", gpu);
	g->dev = nd;
	struct device *d = &g->dev[g->ndev];
	memset(d, 0, sizeof *d);
	atomic_init(&d->lost, 0);
	atomic_init(&d->memory_v2_unusable, 0);
	atomic_init(&d->memory_v2_worked, 0);
	d->handle = h;
	gpumon_device_info *info = &d->info, *parent = &g->dev[gpu].info;
	info->index = g->ndev;
	info->mig = 1;
	info->parent = gpu;
	info->mig_index = k;
	note_call(g, API_OFF(name));
	if (read_string(api->name, h, info->name, sizeof info->name))
		info->present |= GPUMON_INFO_NAME;
	note_call(g, API_OFF(uuid));
	if (read_string(api->uuid, h, info->uuid, sizeof info->uuid))
		info->present |= GPUMON_INFO_UUID;
	/* a MIG device sits on its GPU's bus: the GPU's id, as nvidia-smi shows it for both */
	memcpy(info->pci_bus_id, parent->pci_bus_id, sizeof info->pci_bus_id);
	info->present |= parent->present & GPUMON_INFO_PCI_BUS_ID;
	if (api->gpu_instance_id && api->compute_instance_id) {
		note_call(g, API_OFF(gpu_instance_id));
		int known = api->gpu_instance_id(h, &info->gpu_instance_id) == NVML_SUCCESS;
		note_call(g, API_OFF(compute_instance_id));
		if (known && api->compute_instance_id(h, &info->compute_instance_id) == NVML_SUCCESS)
			info->present |= GPUMON_INFO_MIG_IDS;
	}
	if ((info->present & GPUMON_INFO_NAME) &&
	    profile_from_name(info->name, info->mig_profile, sizeof info->mig_profile))
		info->present |= GPUMON_INFO_MIG_PROFILE;
	gpumon_device_sample s;
	memset(&s, 0, sizeof s);
	note_call(g, api->memory_v2 ? API_OFF(memory_v2) : API_OFF(memory_v1));
	if (gpumon__nvml_memory(g, d, &s) == GPUMON_OK) {
		info->memory_total_bytes = s.memory_total_bytes;
		info->present |= GPUMON_INFO_MEMORY_TOTAL;
	}
	g->ndev++;
	return GPUMON_OK;
}

/* Reads GPU gpu's MIG mode and, in MIG mode, adds its MIG devices. A driver without MIG, a GPU
 * that does not support it, or a refusal (no permission) leaves them out: that is not a failure. */
static int enumerate_gpu_mig(gpumon *g, unsigned gpu)
{
	const struct nvml_api *api = &g->nvml;
	nvml_device h = g->dev[gpu].handle;
	gpumon_device_info *info = &g->dev[gpu].info;
	unsigned cur = 0, pend = 0, max = 0;
	note_call(g, API_OFF(mig_mode));
	if (!api->mig_mode || atomic_load(&g->dev[gpu].lost) || api->mig_mode(h, &cur, &pend) != NVML_SUCCESS)
		return GPUMON_OK;
	info->mig_mode = cur == 1 ? GPUMON_MIG_ENABLED : GPUMON_MIG_DISABLED;
	info->mig_mode_pending = pend == 1 ? GPUMON_MIG_ENABLED : GPUMON_MIG_DISABLED;
	info->present |= GPUMON_INFO_MIG_MODE;
	note_call(g, API_OFF(max_mig_count));
	if (cur != 1 || !api->max_mig_count || !api->mig_handle || api->max_mig_count(h, &max) != NVML_SUCCESS)
		return GPUMON_OK;
	unsigned k = 0;
	for (unsigned i = 0; i < max && i < MAX_MIG_PER_GPU; i++) {
		nvml_device mh = NULL;
		unsigned is_mig = 1;
		note_call(g, API_OFF(mig_handle));
		/* NOT_FOUND: no instance at this index (indexes can have holes) */
		if (api->mig_handle(h, i, &mh) != NVML_SUCCESS || !mh)
			continue;
		note_call(g, API_OFF(is_mig_handle));
		if (api->is_mig_handle && api->is_mig_handle(mh, &is_mig) == NVML_SUCCESS && !is_mig)
			continue;
		int st = add_mig(g, gpu, k++, mh);
		if (st != GPUMON_OK)
			return st;
	}
	return GPUMON_OK;
}

static int enumerate_mig(gpumon *g)
{
	for (unsigned i = 0; i < g->ngpu; i++) {
		int st = enumerate_gpu_mig(g, i);
		if (st != GPUMON_OK)
			return st;
	}
	return GPUMON_OK;
}

int gpumon__nvml_enumerate(gpumon *g)
{
	unsigned n = 0;
	note_call(g, API_OFF(device_count));
	nvml_ret r = g->nvml.device_count(&n);
	if (r != NVML_SUCCESS)
		return gpumon__seterr(g, gpumon__status_from_nvml(r), "nvmlDeviceGetCount: %s",
				      gpumon__nvml_errstr(g, r));
	if (n > 65536)
		return gpumon__seterr(g, GPUMON_E_NVML, "nvmlDeviceGetCount: implausible count %u", n);
	g->dev = n ? calloc(n, sizeof *g->dev) : NULL;
	if (n && !g->dev)
		return gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory for %u devices", n);
	g->ndev = n;
	for (unsigned i = 0; i < n; i++) {
		int st = enumerate_one(g, i, &g->dev[i]);
		if (st != GPUMON_OK)
			return st;
	}
	g->ngpu = n;
	return enumerate_mig(g);
}
