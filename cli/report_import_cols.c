/* SPDX-License-Identifier: MIT */
/* report_import_cols.c — the columns of the text files `gpumon report` reads (report_import.h):
 * which kind of file a header is, what each of its columns means, and the values as those tools
 * write them (nvidia-smi's units, "[N/A]" and timestamps; JSON numbers and nulls). */
#include "report_import.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB 1048576.0

struct col {
	const char *name;
	int role;
};

static const struct col gpumon_cols[] = {{"time", R_TIME},
					 {"step", R_STEP},
					 {"allocated", R_ALLOC},
					 {"reserved", R_RESERVED},
					 {"max_allocated", R_MAXALLOC},
					 {"process_used", R_PROC},
					 {"device_used", R_DEVUSED},
					 {"device_total", R_DEVTOTAL},
					 {NULL, 0}};

/* python/gpumon/_sinks.py FIELDS; `device` is the framework's device index, the device_* columns
 * the GPU's as NVML gives them */
static const struct col python_cols[] = {{"step", R_STEP},
					 {"time", R_TIME_UNIX},
					 {"framework", R_FWNAME},
					 {"device", R_FWDEV},
					 {"allocated_bytes", R_ALLOC},
					 {"peak_bytes", R_MAXALLOC},
					 {"reserved_bytes", R_RESERVED},
					 {"process_bytes", R_PROC},
					 {"device_used_bytes", R_DEVUSED},
					 {"device_reserved_bytes", R_DEVRESERVED},
					 {"device_free_bytes", R_DEVFREE},
					 {"device_total_bytes", R_DEVTOTAL},
					 {NULL, 0}};

/* cli/cmd_export.c's tables: device, process, framework (t_s and time_utc first in each) */
static const struct col export_device_cols[] = {{"t_s", R_TIME},
						{"dev", R_DEV},
						{"uuid", R_UUID},
						{"used_bytes", R_DEVUSED},
						{"free_bytes", R_DEVFREE},
						{"total_bytes", R_DEVTOTAL},
						{"reserved_bytes", R_DEVRESERVED},
						{"used_min_bytes", R_USEDMIN},
						{"used_max_bytes", R_USEDMAX},
						{"used_max_t_s", R_USEDMAX_T},
						{"samples", R_SAMPLES},
						{NULL, 0}};
static const struct col export_process_cols[] = {
    {"t_s", R_TIME},  {"dev", R_DEV},	{"uuid", R_UUID},  {"pid", R_PID},     {"used_bytes", R_PROC},
    {"gone", R_GONE}, {"user", R_USER}, {"name", R_PNAME}, {"command", R_CMD}, {NULL, 0}};
static const struct col export_framework_cols[] = {{"t_s", R_TIME},
						   {"pid", R_PID},
						   {"device", R_FWDEV},
						   {"framework", R_FWNAME},
						   {"step", R_STEP},
						   {"allocated_bytes", R_ALLOC},
						   {"reserved_bytes", R_RESERVED},
						   {"max_allocated_bytes", R_MAXALLOC},
						   {NULL, 0}};

/* nvidia-smi --query-gpu and --query-compute-apps (tests/fixtures/smi/help-query-*.txt), with the
 * names it prints in the header for aliases; `name` is the process's in a table of processes */
static const struct col smi_cols[] = {{"timestamp", R_TIMESTAMP},
				      {"index", R_DEV},
				      {"uuid", R_UUID},
				      {"gpu_uuid", R_UUID},
				      {"pci.bus_id", R_BUS},
				      {"gpu_bus_id", R_BUS},
				      {"name", R_GPUNAME},
				      {"gpu_name", R_GPUNAME},
				      {"memory.used", R_DEVUSED},
				      {"memory.total", R_DEVTOTAL},
				      {"memory.free", R_DEVFREE},
				      {"memory.reserved", R_DEVRESERVED},
				      {"pid", R_PID},
				      {"process_name", R_PNAME},
				      {"used_gpu_memory", R_PROC},
				      {"used_memory", R_PROC},
				      {NULL, 0}};

int import_is_text(int role)
{
	return role == R_FWNAME || role == R_USER || role == R_PNAME || role == R_CMD || role == R_UUID ||
	       role == R_BUS || role == R_GPUNAME || role == R_TIMESTAMP;
}

/* Bytes in a unit as nvidia-smi writes it ("MiB"); 0 when it is not one. */
static double unit_bytes(const char *u)
{
	static const struct {
		const char *u;
		double b;
	} units[] = {{"B", 1}, {"KiB", 1024.0}, {"MiB", MIB}, {"GiB", MIB * 1024}, {"TiB", MIB * MIB}};
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
		if (!strcmp(u, units[i].u))
			return units[i].b;
	return 0;
}

/* "memory.used [MiB]" -> name "memory.used", scale 2^20; a name without a unit has scale 1. */
static void split_unit(const char *field, char *name, size_t len, double *scale)
{
	const char *open = strstr(field, " [");
	size_t n = strlen(field);
	*scale = 1;
	if (open && n > 2 && field[n - 1] == ']') {
		char u[16];
		size_t ul = n - (size_t)(open - field) - 3;
		if (ul < sizeof u) {
			memcpy(u, open + 2, ul);
			u[ul] = 0;
			double b = unit_bytes(u);
			if (b > 0)
				*scale = b;
		}
		n = (size_t)(open - field);
	}
	snprintf(name, len, "%.*s", (int)(n < len ? n : len - 1), field);
}

static int has(char **names, int n, const char *want)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], want))
			return 1;
	return 0;
}

/* The dialect of a header (names already without their units). */
static int dialect_of(char **names, int n)
{
	if (has(names, n, "t_s"))
		return D_EXPORT;
	for (const struct col *c = python_cols; c->name; c++)
		if (strstr(c->name, "_bytes") && has(names, n, c->name))
			return D_PYTHON;
	/* nvidia-smi's names; a CSV of gpumon's own (`time`) may have other columns named alike */
	for (const struct col *c = smi_cols; c->name && !has(names, n, "time"); c++)
		if (strcmp(c->name, "name") && has(names, n, c->name))
			return D_SMI;
	return D_GPUMON;
}

static const struct col *table_of(int dialect, char **names, int n)
{
	if (dialect == D_PYTHON)
		return python_cols;
	if (dialect == D_SMI)
		return smi_cols;
	if (dialect == D_EXPORT && has(names, n, "gone"))
		return export_process_cols;
	if (dialect == D_EXPORT && has(names, n, "allocated_bytes"))
		return export_framework_cols;
	if (dialect == D_EXPORT)
		return export_device_cols;
	return gpumon_cols;
}

void import_map_header(char **fields, int n, struct import_header *h)
{
	char names[256][48];
	char *np[256];
	double scale[256];
	if (n > 256)
		n = 256;
	for (int i = 0; i < n; i++) {
		split_unit(fields[i], names[i], sizeof names[i], &scale[i]);
		np[i] = names[i];
	}
	memset(h, 0, sizeof *h);
	h->dialect = dialect_of(np, n);
	const struct col *t = table_of(h->dialect, np, n);
	int procs = has(np, n, "pid");
	for (int r = 0; r < NROLES; r++)
		h->col[r] = -1;
	for (int i = 0; i < n; i++)
		for (const struct col *c = t; c->name; c++) {
			int role = c->role;
			if (strcmp(names[i], c->name))
				continue;
			if (role == R_GPUNAME && procs && !strcmp(c->name, "name"))
				role = R_PNAME; /* --query-compute-apps=name is the process's */
			if (h->col[role] >= 0)
				continue; /* the first of two columns of one meaning */
			h->col[role] = i;
			h->scale[role] = scale[i];
			snprintf(h->name[role], sizeof h->name[role], "%s", fields[i]);
		}
}

void import_jsonl_header(struct import_header *h)
{
	memset(h, 0, sizeof *h);
	h->dialect = D_PYTHON;
	for (int r = 0; r < NROLES; r++)
		h->col[r] = -1;
	int i = 0;
	for (const struct col *c = python_cols; c->name; c++, i++) {
		h->col[c->role] = i;
		h->scale[c->role] = 1;
		snprintf(h->name[c->role], sizeof h->name[c->role], "%s", c->name);
	}
}

static int unknown_text(const char *s)
{
	static const char *const na[] = {"",
					 "NA",
					 "n/a",
					 "N/A",
					 "null",
					 "[N/A]",
					 "[Not Supported]",
					 "Not Supported",
					 "[Unknown Error]",
					 "[Insufficient Permissions]"};
	for (size_t i = 0; i < sizeof na / sizeof na[0]; i++)
		if (!strcmp(s, na[i]))
			return 1;
	return 0;
}

/* "2026/12/03 08:49:06.061" (local time) -> seconds since 1970; -1 when it is not one. */
static int parse_timestamp(const char *s, double *out)
{
	int y, mo, d, h, mi, sec, used = 0;
	char frac[16] = "";
	if (sscanf(s, "%4d/%2d/%2d %2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6)
		return -1;
	if (s[used] == '.') {
		size_t k = strspn(s + used + 1, "0123456789");
		if (!k || k >= sizeof frac)
			return -1;
		memcpy(frac, s + used, k + 1);
		frac[k + 1] = 0;
		used += (int)k + 1;
	}
	if (s[used] || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970)
		return -1;
	struct tm tm = {.tm_year = y - 1900,
			.tm_mon = mo - 1,
			.tm_mday = d,
			.tm_hour = h,
			.tm_min = mi,
			.tm_sec = sec,
			.tm_isdst = -1};
	time_t t = mktime(&tm);
	if (t == (time_t)-1)
		return -1;
	*out = (double)t + (frac[0] ? strtod(frac, NULL) : 0);
	return 0;
}

int import_field(int role, double scale, const char *s, struct import_row *row)
{
	if (unknown_text(s))
		return 0;
	if (role == R_TIMESTAMP) {
		if (parse_timestamp(s, &row->v[role]))
			return -1;
		row->text[role] = s;
		return row->known[role] = 1;
	}
	if (import_is_text(role)) {
		row->text[role] = s;
		return row->known[role] = 1;
	}
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (end == s || errno == ERANGE || !isfinite(d))
		return -1;
	if (*end == ' ' && unit_bytes(end + 1) > 0) /* "1024 MiB": the value's own unit */
		d *= unit_bytes(end + 1);
	else if (*end)
		return -1;
	else
		d *= scale > 0 ? scale : 1;
	row->v[role] = d;
	return row->known[role] = 1;
}

int import_json_row(const json_t *o, const struct import_header *h, struct import_row *row, char *why,
		    size_t len)
{
	(void)h;
	for (const struct col *c = python_cols; c->name; c++) {
		const json_t *v = json_object_get(o, c->name);
		if (!v || json_is_null(v))
			continue;
		if (import_is_text(c->role) ? !json_is_string(v) : !json_is_number(v)) {
			snprintf(why, len, "%s is not a %s", c->name,
				 import_is_text(c->role) ? "string" : "number");
			return -1;
		}
		if (import_is_text(c->role))
			row->text[c->role] = json_string_value(v);
		else
			row->v[c->role] = json_number_value(v);
		row->known[c->role] = 1;
	}
	return 0;
}
