/* SPDX-License-Identifier: MIT */
/* query_fields.c — the field table of `gpumon query` and its pure parsers: field lists, --format
 * and loop periods, and the rendering of one value as nvidia-smi's CSV prints it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "query_fields.h"

/* ---- formatters: raw value at base + off -> qf_value ----------------------------------------- */

static void fmt_text(const void *base, size_t off, struct qf_value *out)
{
	out->kind = QV_TEXT;
	out->text = (const char *)base + off;
}

static void fmt_uint(const void *base, size_t off, struct qf_value *out)
{
	unsigned v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = QV_UINT;
	out->num = v;
}

/* Bytes -> MiB, rounded up: nvidia-smi shows 644,939,776 B (615.06 MiB) as 616 MiB. */
static void fmt_mib(const void *base, size_t off, struct qf_value *out)
{
	uint64_t v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = QV_UINT;
	out->num = v / 1048576u + (v % 1048576u != 0);
}

/* Milliwatts -> watts with two decimals, rounded half up (127790 mW -> 127.79). */
static void fmt_milli_to_centi(const void *base, size_t off, struct qf_value *out)
{
	unsigned v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = QV_CENTI;
	out->num = ((uint64_t)v + 5) / 10;
}

static void fmt_u64(const void *base, size_t off, struct qf_value *out)
{
	uint64_t v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = QV_UINT;
	out->num = v;
}

/* An int flag as a word pair: no[0] for 0, else no[1]. */
static void fmt_word(const void *base, size_t off, struct qf_value *out, const char *no, const char *yes)
{
	int v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = QV_TEXT;
	out->text = v ? yes : no;
}

/* Modes as nvidia-smi words them: "Enabled" / "Disabled". */
static void fmt_enabled(const void *base, size_t off, struct qf_value *out)
{
	fmt_word(base, off, out, "Disabled", "Enabled");
}

/* Pending remappings and retirements: "Yes" / "No". */
static void fmt_yes_no(const void *base, size_t off, struct qf_value *out)
{
	fmt_word(base, off, out, "No", "Yes");
}

static void fmt_pstate(const void *base, size_t off, struct qf_value *out)
{
	static const char *const names[16] = {"P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7",
					      "P8", "P9", "P10", "P11", "P12", "P13", "P14", "P15"};
	unsigned v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = v < 16 ? QV_TEXT : QV_NA;
	out->text = v < 16 ? names[v] : NULL;
}

/* nvidia-smi's words for the compute modes (help-query-gpu.txt). */
static void fmt_compute_mode(const void *base, size_t off, struct qf_value *out)
{
	static const char *const names[4] = {"Default", "Exclusive_Thread", "Prohibited", "Exclusive_Process"};
	unsigned v;
	memcpy(&v, (const char *)base + off, sizeof v);
	out->kind = v < 4 ? QV_TEXT : QV_NA;
	out->text = v < 4 ? names[v] : NULL;
}

/* ---- the table ---------------------------------------------------------------------------------- */

/* Source, bit and offset of a field, in qf_field's member order. */
#define INFO(m, bit) QF_SRC_INFO, bit, offsetof(gpumon_device_info, m)
#define SAMPLE(m, bit) QF_SRC_SAMPLE, bit, offsetof(gpumon_device_sample, m)
#define PROC(m, bit) QF_SRC_PROCESS, bit, offsetof(gpumon_process, m)
#define PROPS(m, bit) QF_SRC_PROPS, bit, offsetof(gpumon_device_props, m)
#define NO_ALIAS {NULL, NULL}
#define G QF_TABLE_GPU
/* An ECC count: corrected or uncorrected (ty), volatile or aggregate (ctr), where (loc) */
#define ECC(name, arr, ty, ctr, bit, desc)                                                           \
	{name, NO_ALIAS, name, NULL, 0, G, PROPS(arr[GPUMON_ECC_##ty][GPUMON_ECC_##ctr], bit), fmt_u64, desc}

static const struct qf_field fields[] = {
	/* --query-gpu */
	{"count", NO_ALIAS, "count", NULL, 0, QF_TABLE_GPU, QF_SRC_COUNT, 0, 0, fmt_uint,
	 "Number of GPUs in the machine, not only those -i selects."},
	{"index", NO_ALIAS, "index", NULL, 0, QF_TABLE_GPU, INFO(index, 0), fmt_uint,
	 "NVML index of the GPU (CUDA's numbering may differ)."},
	{"name", {"gpu_name", NULL}, "name", NULL, 0, QF_TABLE_GPU, INFO(name, GPUMON_INFO_NAME), fmt_text,
	 "Product name of the GPU."},
	{"uuid", {"gpu_uuid", NULL}, "uuid", NULL, 0, QF_TABLE_GPU, INFO(uuid, GPUMON_INFO_UUID), fmt_text,
	 "Unique id of the GPU: \"GPU-\" and 32 hex digits."},
	{"pci.bus_id", {"gpu_bus_id", NULL}, "pci.bus_id", NULL, 0, QF_TABLE_GPU,
	 INFO(pci_bus_id, GPUMON_INFO_PCI_BUS_ID), fmt_text, "PCI bus id: domain:bus:device.function in hex."},
	{"driver_version", NO_ALIAS, "driver_version", NULL, 0, QF_TABLE_GPU, QF_SRC_DRIVER, 0, 0, fmt_text,
	 "Version of the installed NVIDIA driver."},
	{"memory.total", NO_ALIAS, "memory.total", "MiB", 0, QF_TABLE_GPU,
	 SAMPLE(memory_total_bytes, GPUMON_F_MEMORY), fmt_mib, "Total memory of the GPU."},
	{"memory.reserved", NO_ALIAS, "memory.reserved", "MiB", 0, QF_TABLE_GPU,
	 SAMPLE(memory_reserved_bytes, GPUMON_F_MEM_RESERVED), fmt_mib,
	 "Memory kept by the driver and firmware (v2 memory call only)."},
	{"memory.used", NO_ALIAS, "memory.used", "MiB", 0, QF_TABLE_GPU,
	 SAMPLE(memory_used_bytes, GPUMON_F_MEMORY), fmt_mib,
	 "Memory allocated (v1-only drivers count the reserved in)."},
	{"memory.free", NO_ALIAS, "memory.free", "MiB", 0, QF_TABLE_GPU,
	 SAMPLE(memory_free_bytes, GPUMON_F_MEMORY), fmt_mib, "Memory not allocated: total - reserved - used."},
	{"utilization.gpu", NO_ALIAS, "utilization.gpu", "%", 0, QF_TABLE_GPU,
	 SAMPLE(util_gpu_pct, GPUMON_F_UTIL_GPU), fmt_uint,
	 "Percent of recent time a kernel was running."},
	{"utilization.memory", NO_ALIAS, "utilization.memory", "%", 0, QF_TABLE_GPU,
	 SAMPLE(util_memory_pct, GPUMON_F_UTIL_MEMORY), fmt_uint,
	 "Percent of recent time memory was read or written."},
	{"temperature.gpu", NO_ALIAS, "temperature.gpu", "C", 1, QF_TABLE_GPU,
	 SAMPLE(temperature_c, GPUMON_F_TEMPERATURE), fmt_uint, "Core temperature, degrees Celsius (no unit in CSV)."},
	{"power.draw", NO_ALIAS, "power.draw", "W", 0, QF_TABLE_GPU, SAMPLE(power_mw, GPUMON_F_POWER),
	 fmt_milli_to_centi, "Power drawn by the whole board."},
	{"clocks.sm", {"clocks.current.sm", NULL}, "clocks.current.sm", "MHz", 0, QF_TABLE_GPU,
	 SAMPLE(clock_sm_mhz, GPUMON_F_CLOCK_SM), fmt_uint, "Current SM clock."},
	{"clocks.mem", {"clocks.current.memory", NULL}, "clocks.current.memory", "MHz", 0, QF_TABLE_GPU,
	 SAMPLE(clock_mem_mhz, GPUMON_F_CLOCK_MEM), fmt_uint, "Current memory clock."},
	{"timestamp", NO_ALIAS, "timestamp", NULL, 0, G, QF_SRC_TIME, 0, 0, fmt_text,
	 "Local time of the query: YYYY/MM/DD HH:MM:SS.mmm."},
	{"power.limit", {"gpu.power.requested_limit", NULL}, "power.limit", "W", 0, G,
	 PROPS(power_limit_mw, GPUMON_P_POWER_LIMIT), fmt_milli_to_centi, "Power limit set by software."},
	{"enforced.power.limit", {"gpu.power.current_limit", NULL}, "enforced.power.limit", "W", 0, G,
	 PROPS(power_enforced_mw, GPUMON_P_POWER_ENFORCED), fmt_milli_to_centi,
	 "Power limit in force (lowest limiter)."},
	{"power.default_limit", {"gpu.power.default_limit", NULL}, "power.default_limit", "W", 0, G,
	 PROPS(power_default_mw, GPUMON_P_POWER_DEFAULT), fmt_milli_to_centi, "Default power limit."},
	{"power.min_limit", {"gpu.power.min_limit", NULL}, "power.min_limit", "W", 0, G,
	 PROPS(power_min_mw, GPUMON_P_POWER_MIN), fmt_milli_to_centi, "Lowest power limit that may be set."},
	{"power.max_limit", {"gpu.power.max_limit", NULL}, "power.max_limit", "W", 0, G,
	 PROPS(power_max_mw, GPUMON_P_POWER_MAX), fmt_milli_to_centi, "Highest power limit that may be set."},
	{"power.management", NO_ALIAS, "power.management", NULL, 0, G,
	 PROPS(power_management, GPUMON_P_POWER_MANAGEMENT), fmt_enabled, "Power management: Enabled or Disabled."},
	{"fan.speed", NO_ALIAS, "fan.speed", "%", 0, G, PROPS(fan_pct, GPUMON_P_FAN), fmt_uint,
	 "Intended fan speed ([N/A]: no fan of its own)."},
	{"pstate", NO_ALIAS, "pstate", NULL, 0, G, PROPS(pstate, GPUMON_P_PSTATE), fmt_pstate,
	 "Performance state, P0 (fastest) to P12."},
	{"temperature.memory", NO_ALIAS, "temperature.memory", "C", 1, G,
	 PROPS(memory_temp_c, GPUMON_P_MEMORY_TEMP), fmt_uint, "Memory (HBM) temperature, degrees Celsius (no unit in CSV)."},
	{"clocks.max.graphics", {"clocks.max.gr", NULL}, "clocks.max.graphics", "MHz", 0, G,
	 PROPS(clock_max_graphics_mhz, GPUMON_P_CLOCK_MAX_GRAPHICS), fmt_uint, "Highest graphics clock."},
	{"clocks.max.sm", NO_ALIAS, "clocks.max.sm", "MHz", 0, G, PROPS(clock_max_sm_mhz, GPUMON_P_CLOCK_MAX_SM),
	 fmt_uint, "Highest SM clock."},
	{"clocks.max.memory", {"clocks.max.mem", NULL}, "clocks.max.memory", "MHz", 0, G,
	 PROPS(clock_max_mem_mhz, GPUMON_P_CLOCK_MAX_MEM), fmt_uint, "Highest memory clock."},
	{"serial", {"gpu_serial", NULL}, "serial", NULL, 0, G, PROPS(serial, GPUMON_P_SERIAL), fmt_text,
	 "Serial number printed on the board."},
	{"vbios_version", NO_ALIAS, "vbios_version", NULL, 0, G, PROPS(vbios, GPUMON_P_VBIOS), fmt_text,
	 "Version of the board's BIOS."},
	{"compute_mode", NO_ALIAS, "compute_mode", NULL, 0, G, PROPS(compute_mode, GPUMON_P_COMPUTE_MODE),
	 fmt_compute_mode, "Default, Exclusive_Thread, Prohibited or Exclusive_Process."},
	{"persistence_mode", NO_ALIAS, "persistence_mode", NULL, 0, G, PROPS(persistence, GPUMON_P_PERSISTENCE),
	 fmt_enabled, "Persistence mode: Enabled or Disabled."},
	{"pcie.link.gen.current", NO_ALIAS, "pcie.link.gen.current", NULL, 0, G,
	 PROPS(pcie_gen_current, GPUMON_P_PCIE_GEN), fmt_uint, "Current PCIe generation (lower when idle)."},
	{"pcie.link.gen.max", NO_ALIAS, "pcie.link.gen.max", NULL, 0, G, PROPS(pcie_gen_max, GPUMON_P_PCIE_GEN_MAX),
	 fmt_uint, "Highest PCIe generation of this GPU in this system."},
	{"pcie.link.width.current", NO_ALIAS, "pcie.link.width.current", NULL, 0, G,
	 PROPS(pcie_width_current, GPUMON_P_PCIE_WIDTH), fmt_uint, "Current PCIe link width (lanes)."},
	{"pcie.link.width.max", NO_ALIAS, "pcie.link.width.max", NULL, 0, G,
	 PROPS(pcie_width_max, GPUMON_P_PCIE_WIDTH_MAX), fmt_uint, "Widest PCIe link of this GPU in this system."},
	{"mig.mode.current", NO_ALIAS, "mig.mode.current", NULL, 0, G, PROPS(mig_current, GPUMON_P_MIG_MODE),
	 fmt_enabled, "MIG mode now: Enabled or Disabled."},
	{"mig.mode.pending", NO_ALIAS, "mig.mode.pending", NULL, 0, G, PROPS(mig_pending, GPUMON_P_MIG_MODE),
	 fmt_enabled, "MIG mode after the next GPU reset."},
	{"ecc.mode.current", NO_ALIAS, "ecc.mode.current", NULL, 0, G, PROPS(ecc_current, GPUMON_P_ECC_MODE),
	 fmt_enabled, "ECC mode now: Enabled or Disabled."},
	{"ecc.mode.pending", NO_ALIAS, "ecc.mode.pending", NULL, 0, G, PROPS(ecc_pending, GPUMON_P_ECC_MODE),
	 fmt_enabled, "ECC mode after the next reboot."},
	ECC("ecc.errors.corrected.volatile.device_memory", ecc_dram, CORRECTED, VOLATILE, GPUMON_P_ECC_DRAM,
	    "Corrected errors in device memory since the driver loaded."),
	ECC("ecc.errors.corrected.volatile.dram", ecc_dram, CORRECTED, VOLATILE, GPUMON_P_ECC_DRAM,
	    "Corrected errors in DRAM since the driver loaded."),
	ECC("ecc.errors.corrected.volatile.sram", ecc_sram, CORRECTED, VOLATILE, GPUMON_P_ECC_SRAM,
	    "Corrected errors in on-chip SRAM since the driver loaded."),
	ECC("ecc.errors.corrected.volatile.total", ecc_total, CORRECTED, VOLATILE, GPUMON_P_ECC_TOTAL,
	    "Corrected errors in the whole chip since the driver loaded."),
	ECC("ecc.errors.corrected.aggregate.device_memory", ecc_dram, CORRECTED, AGGREGATE, GPUMON_P_ECC_DRAM,
	    "Corrected errors in device memory over the board's life."),
	ECC("ecc.errors.corrected.aggregate.dram", ecc_dram, CORRECTED, AGGREGATE, GPUMON_P_ECC_DRAM,
	    "Corrected errors in DRAM over the board's life."),
	ECC("ecc.errors.corrected.aggregate.sram", ecc_sram, CORRECTED, AGGREGATE, GPUMON_P_ECC_SRAM,
	    "Corrected errors in on-chip SRAM over the board's life."),
	ECC("ecc.errors.corrected.aggregate.total", ecc_total, CORRECTED, AGGREGATE, GPUMON_P_ECC_TOTAL,
	    "Corrected errors in the whole chip over the board's life."),
	ECC("ecc.errors.uncorrected.volatile.device_memory", ecc_dram, UNCORRECTED, VOLATILE, GPUMON_P_ECC_DRAM,
	    "Uncorrected errors in device memory since the driver loaded."),
	ECC("ecc.errors.uncorrected.volatile.dram", ecc_dram, UNCORRECTED, VOLATILE, GPUMON_P_ECC_DRAM,
	    "Uncorrected errors in DRAM since the driver loaded."),
	ECC("ecc.errors.uncorrected.volatile.sram", ecc_sram, UNCORRECTED, VOLATILE, GPUMON_P_ECC_SRAM,
	    "Uncorrected errors in on-chip SRAM since the driver loaded."),
	ECC("ecc.errors.uncorrected.volatile.total", ecc_total, UNCORRECTED, VOLATILE, GPUMON_P_ECC_TOTAL,
	    "Uncorrected errors in the whole chip since the driver loaded."),
	ECC("ecc.errors.uncorrected.aggregate.device_memory", ecc_dram, UNCORRECTED, AGGREGATE, GPUMON_P_ECC_DRAM,
	    "Uncorrected errors in device memory over the board's life."),
	ECC("ecc.errors.uncorrected.aggregate.dram", ecc_dram, UNCORRECTED, AGGREGATE, GPUMON_P_ECC_DRAM,
	    "Uncorrected errors in DRAM over the board's life."),
	ECC("ecc.errors.uncorrected.aggregate.sram", ecc_sram, UNCORRECTED, AGGREGATE, GPUMON_P_ECC_SRAM,
	    "Uncorrected errors in on-chip SRAM over the board's life."),
	ECC("ecc.errors.uncorrected.aggregate.total", ecc_total, UNCORRECTED, AGGREGATE, GPUMON_P_ECC_TOTAL,
	    "Uncorrected errors in the whole chip over the board's life."),
	{"retired_pages.single_bit_ecc.count", {"retired_pages.sbe", NULL}, "retired_pages.single_bit_ecc.count",
	 NULL, 0, G, PROPS(retired_sbe, GPUMON_P_RETIRED_SBE), fmt_uint,
	 "Pages retired for repeated single-bit errors."},
	{"retired_pages.double_bit.count", {"retired_pages.dbe", NULL}, "retired_pages.double_bit.count", NULL, 0, G,
	 PROPS(retired_dbe, GPUMON_P_RETIRED_DBE), fmt_uint, "Pages retired for a double-bit error."},
	{"retired_pages.pending", NO_ALIAS, "retired_pages.pending", NULL, 0, G,
	 PROPS(retired_pending, GPUMON_P_RETIRED_PENDING), fmt_yes_no, "Pages wait to be retired at the next reboot: Yes or No."},
	{"remapped_rows.correctable", {"remapped_rows.sbe", NULL}, "remapped_rows.correctable", NULL, 0, G,
	 PROPS(remapped_correctable, GPUMON_P_REMAPPED_ROWS), fmt_uint, "Rows remapped for correctable errors."},
	{"remapped_rows.uncorrectable", {"remapped_rows.dbe", NULL}, "remapped_rows.uncorrectable", NULL, 0, G,
	 PROPS(remapped_uncorrectable, GPUMON_P_REMAPPED_ROWS), fmt_uint, "Rows remapped for uncorrectable errors."},
	{"remapped_rows.pending", NO_ALIAS, "remapped_rows.pending", NULL, 0, G,
	 PROPS(remapped_pending, GPUMON_P_REMAPPED_ROWS), fmt_yes_no, "A remapping waits for the next GPU reset: Yes or No."},
	{"remapped_rows.failure", NO_ALIAS, "remapped_rows.failure", NULL, 0, G,
	 PROPS(remapped_failure, GPUMON_P_REMAPPED_ROWS), fmt_yes_no, "A remapping has failed (service the board): Yes or No."},
	/* --query-compute-apps */
	{"pid", NO_ALIAS, "pid", NULL, 0, QF_TABLE_APPS, PROC(pid, 0), fmt_uint,
	 "Process id as the host sees it."},
	{"process_name", {"name", NULL}, "process_name", NULL, 0, QF_TABLE_APPS,
	 PROC(name, GPUMON_PROC_NAME_KNOWN), fmt_text,
	 "Process name ([N/A] when in another PID namespace)."},
	{"used_memory", {"used_gpu_memory", NULL}, "used_gpu_memory", "MiB", 0, QF_TABLE_APPS,
	 PROC(used_bytes, GPUMON_PROC_USED_KNOWN), fmt_mib,
	 "GPU memory of the process ([N/A] if unknown)."},
	{"gpu_name", NO_ALIAS, "gpu_name", NULL, 0, QF_TABLE_APPS, INFO(name, GPUMON_INFO_NAME), fmt_text,
	 "Product name of the process's GPU."},
	{"gpu_uuid", NO_ALIAS, "gpu_uuid", NULL, 0, QF_TABLE_APPS, INFO(uuid, GPUMON_INFO_UUID), fmt_text,
	 "UUID of the process's GPU."},
	{"gpu_bus_id", NO_ALIAS, "gpu_bus_id", NULL, 0, QF_TABLE_APPS,
	 INFO(pci_bus_id, GPUMON_INFO_PCI_BUS_ID), fmt_text, "PCI bus id of the process's GPU."},
};

#define NFIELDS (sizeof fields / sizeof fields[0])

unsigned qf_field_count(void)
{
	return (unsigned)NFIELDS;
}

const struct qf_field *qf_field_get(unsigned id)
{
	return id < NFIELDS ? &fields[id] : NULL;
}

/* ---- parsers ------------------------------------------------------------------------------------ */

/* Writes a message into err when there is room for one; always returns -1. */
__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	if (err && errlen > 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

static int is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The next comma-separated item of *p with blanks trimmed: sets *start and *len, moves *p past
 * the comma. Returns 0 when the text is used up. */
static int next_item(const char **p, const char **start, size_t *len)
{
	const char *s = *p;
	if (!s)
		return 0;
	const char *comma = strchr(s, ',');
	size_t n = comma ? (size_t)(comma - s) : strlen(s);
	*p = comma ? comma + 1 : NULL;
	while (n > 0 && is_blank(*s)) {
		s++;
		n--;
	}
	while (n > 0 && is_blank(s[n - 1]))
		n--;
	*start = s;
	*len = n;
	return 1;
}

/* Bounds a length for a "%.*s" conversion. */
static int print_len(size_t n)
{
	return n > 256 ? 256 : (int)n;
}

static int name_is(const char *name, const char *s, size_t n)
{
	return name && strlen(name) == n && memcmp(name, s, n) == 0;
}

/* The id of field s[0..n) in table t, or -1. */
static int find_field(enum qf_table t, const char *s, size_t n)
{
	for (unsigned i = 0; i < NFIELDS; i++) {
		const struct qf_field *f = &fields[i];
		if (f->table == t && (name_is(f->name, s, n) || name_is(f->aliases[0], s, n) ||
				      name_is(f->aliases[1], s, n)))
			return (int)i;
	}
	return -1;
}

int qf_parse_list(const char *text, enum qf_table t, struct qf_list *out, char *err, size_t errlen)
{
	const char *p = text, *s;
	size_t n;
	out->n = 0;
	if (!text)
		return fail(err, errlen, "No fields given.");
	while (next_item(&p, &s, &n)) {
		if (n == 0)
			continue; /* nvidia-smi ignores empty items: "index,,name" */
		int id = find_field(t, s, n);
		if (id < 0)
			return fail(err, errlen, "Field \"%.*s\" is not a valid field to query.", print_len(n), s);
		if (out->n == QF_MAX_FIELDS)
			return fail(err, errlen, "Too many fields: at most %d can be queried.", QF_MAX_FIELDS);
		out->id[out->n++] = (unsigned short)id;
	}
	if (out->n == 0)
		return fail(err, errlen, "No fields given.");
	return 0;
}

#define FORMAT_HINT "expected csv[,noheader][,nounits] or json"

int qf_parse_format(const char *text, struct qf_format *out, char *err, size_t errlen)
{
	const char *p = text, *s;
	size_t n;
	int csv = 0;
	memset(out, 0, sizeof *out);
	if (!text)
		return fail(err, errlen, "no --format given: " FORMAT_HINT);
	while (next_item(&p, &s, &n)) {
		if (name_is("csv", s, n))
			csv = 1;
		else if (name_is("json", s, n))
			out->json = 1;
		else if (name_is("noheader", s, n))
			out->noheader = 1;
		else if (name_is("nounits", s, n))
			out->nounits = 1;
		else
			return fail(err, errlen, "invalid --format option \"%.*s\": " FORMAT_HINT, print_len(n), s);
	}
	if (csv && out->json)
		return fail(err, errlen, "--format \"%.*s\" asks for both csv and json: " FORMAT_HINT,
			    print_len(strlen(text)), text);
	if (!csv && !out->json)
		return fail(err, errlen, "--format \"%.*s\" names no format: " FORMAT_HINT,
			    print_len(strlen(text)), text);
	if (out->json && (out->noheader || out->nounits))
		return fail(err, errlen, "--format \"%.*s\": noheader and nounits apply to csv only",
			    print_len(strlen(text)), text);
	return 0;
}

int qf_parse_period(const char *what, const char *text, unsigned *out, char *err, size_t errlen)
{
	size_t n = text ? strlen(text) : 0;
	if (n == 0 || n > 9 || strspn(text, "0123456789") != n)
		return fail(err, errlen, "%s needs a positive whole number, not \"%.*s\"", what,
			    print_len(n), text ? text : "");
	unsigned v = 0;
	for (size_t i = 0; i < n; i++)
		v = v * 10 + (unsigned)(text[i] - '0');
	if (v == 0)
		return fail(err, errlen, "%s needs a positive whole number, not \"%s\"", what, text);
	*out = v;
	return 0;
}

unsigned qf_list_sample_bits(const struct qf_list *l)
{
	unsigned bits = 0;
	for (unsigned i = 0; i < l->n; i++)
		if (fields[l->id[i]].source == QF_SRC_SAMPLE)
			bits |= (unsigned)fields[l->id[i]].bit;
	return bits;
}

uint64_t qf_list_props_bits(const struct qf_list *l)
{
	uint64_t bits = 0;
	for (unsigned i = 0; i < l->n; i++)
		if (fields[l->id[i]].source == QF_SRC_PROPS)
			bits |= fields[l->id[i]].bit;
	return bits;
}

const char *qf_timestamp(long long sec, long nsec, char *buf, size_t len)
{
	time_t t = (time_t)sec;
	struct tm tm;
	char day[32];
	if (len == 0)
		return buf;
	buf[0] = 0;
	if (!localtime_r(&t, &tm) || strftime(day, sizeof day, "%Y/%m/%d %H:%M:%S", &tm) == 0)
		return buf;
	snprintf(buf, len, "%s.%03ld", day, (nsec < 0 ? 0 : nsec) / 1000000);
	return buf;
}

int qf_list_uses(const struct qf_list *l, enum qf_source s)
{
	for (unsigned i = 0; i < l->n; i++)
		if (fields[l->id[i]].source == s)
			return 1;
	return 0;
}

/* ---- values ------------------------------------------------------------------------------------- */

/* What a failed sample read makes of every sample field. */
static enum qf_kind kind_of_status(int status)
{
	switch (status) {
	case GPUMON_E_LOST: return QV_LOST;
	case GPUMON_E_NOT_SUPPORTED: return QV_NOT_SUPPORTED;
	case GPUMON_E_NO_PERMISSION: return QV_NO_PERMISSION;
	default: return QV_ERROR;
	}
}

void qf_value_get(const struct qf_field *f, const struct qf_ctx *c, struct qf_value *out)
{
	const void *base = NULL;
	int known = 0;
	enum qf_kind absent = QV_NA;
	memset(out, 0, sizeof *out);
	switch (f->source) {
	case QF_SRC_INFO:
		/* read at open: missing because the GPU was lost by then, or for a reason the library
		 * does not keep (`gpumon list` says [Unknown Error] too) */
		base = c->info;
		known = c->info && (!f->bit || (c->info->present & f->bit));
		absent = c->info && c->info->lost ? QV_LOST : QV_ERROR;
		break;
	case QF_SRC_SAMPLE:
		if (c->sample_status != GPUMON_OK) {
			out->kind = kind_of_status(c->sample_status);
			return;
		}
		base = c->sample;
		known = c->sample && (c->sample->present & f->bit);
		absent = QV_NOT_SUPPORTED;
		break;
	case QF_SRC_DRIVER:
		base = c->driver_version;
		known = base != NULL;
		absent = QV_NOT_SUPPORTED; /* gpumon_driver_version's only failure */
		break;
	case QF_SRC_COUNT:
		base = &c->gpu_count;
		known = 1;
		break;
	case QF_SRC_PROCESS:
		base = c->proc;
		known = c->proc && (!f->bit || (c->proc->flags & f->bit));
		break;
	case QF_SRC_PROPS:
		if (c->props_status != GPUMON_OK) {
			out->kind = kind_of_status(c->props_status);
			return;
		}
		base = c->props;
		known = c->props && (c->props->present & f->bit);
		/* nvidia-smi 580 prints [N/A] where the driver says NOT_SUPPORTED (fan.speed, retired_pages
		   on an H200: tests/fixtures/smi/fields.tsv) */
		absent = !c->props ? QV_ERROR
			 : (c->props->not_supported & f->bit) ? QV_NA
			 : (c->props->no_permission & f->bit) ? QV_NO_PERMISSION : QV_ERROR;
		break;
	case QF_SRC_TIME:
		base = c->timestamp;
		known = base != NULL;
		absent = QV_ERROR;
		break;
	}
	if (!known) {
		out->kind = absent;
		return;
	}
	f->format(base, f->off, out);
}

const char *qf_value_marker(enum qf_kind k)
{
	switch (k) {
	case QV_NOT_SUPPORTED: return "[Not Supported]";
	case QV_NA: return "[N/A]";
	case QV_LOST: return "[GPU is lost]";
	case QV_NO_PERMISSION: return "[Insufficient Permissions]";
	case QV_ERROR: return "[Unknown Error]";
	default: return NULL;
	}
}

/* The unit CSV shows for f, or NULL. */
static const char *csv_unit(const struct qf_field *f, int nounits)
{
	return nounits || f->csv_unitless ? NULL : f->unit;
}

const char *qf_csv_value(const struct qf_field *f, const struct qf_value *v, int nounits, char *buf, size_t len)
{
	const char *unit = csv_unit(f, nounits);
	const char *sep = unit ? " " : "", *u = unit ? unit : "";
	if (len == 0)
		return buf;
	switch (v->kind) {
	case QV_TEXT:
		snprintf(buf, len, "%s", v->text);
		break;
	case QV_UINT:
		snprintf(buf, len, "%llu%s%s", (unsigned long long)v->num, sep, u);
		break;
	case QV_CENTI:
		snprintf(buf, len, "%llu.%02llu%s%s", (unsigned long long)(v->num / 100),
			 (unsigned long long)(v->num % 100), sep, u);
		break;
	default:
		snprintf(buf, len, "%s", qf_value_marker(v->kind));
		break;
	}
	return buf;
}

const char *qf_csv_header(const struct qf_field *f, char *buf, size_t len)
{
	const char *unit = csv_unit(f, 0);
	if (unit)
		snprintf(buf, len, "%s [%s]", f->header, unit);
	else
		snprintf(buf, len, "%s", f->header);
	return buf;
}
