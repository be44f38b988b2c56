/* SPDX-License-Identifier: MIT */
/* report_import.h — the text files `gpumon report` reads besides recordings (docs/report.md): the
 * columns each kind of file names (gpumon's CSV, `gpumon export --csv`, the Python monitor's CSV
 * and JSON lines, nvidia-smi's and `gpumon query`'s CSV logs) and what each column means, so that
 * one reader (report_csv.c) turns any of them into the run model's records. Nothing here judges. */
#ifndef GPUMON_REPORT_IMPORT_H
#define GPUMON_REPORT_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* What a column means. */
enum import_role {
	R_TIME,	     /* seconds from the start */
	R_TIME_UNIX, /* seconds since 1970 (the Python monitor's `time`) */
	R_TIMESTAMP, /* nvidia-smi's "YYYY/MM/DD HH:MM:SS.mmm", local time */
	R_STEP,
	R_ALLOC,    /* the framework's allocated bytes */
	R_RESERVED, /* the framework's reserved bytes */
	R_MAXALLOC, /* the framework's peak of allocated */
	R_FWDEV,    /* the framework's device index */
	R_FWNAME,   /* text: the framework's name */
	R_PROC,	    /* a process's memory on the GPU, as NVML lists it */
	R_PID,
	R_GONE,	   /* 1: the process left the GPU (gpumon export's process table) */
	R_USER,	   /* text */
	R_PNAME,   /* text: the process's name */
	R_CMD,	   /* text: its command line */
	R_DEVUSED, /* the GPU's used memory */
	R_DEVFREE,
	R_DEVTOTAL,
	R_DEVRESERVED, /* memory the driver reserves */
	R_DEV,	       /* the GPU's index */
	R_UUID,	       /* text */
	R_BUS,	       /* text: PCI bus id */
	R_GPUNAME,     /* text */
	R_USEDMIN,     /* the lowest and highest used memory since the GPU's last row, when (seconds from
			  the start) and over how many samples (gpumon export's device table) */
	R_USEDMAX,
	R_USEDMAX_T,
	R_SAMPLES,
	NROLES
};

/* The kinds of file, told apart by their header. */
enum import_dialect {
	D_GPUMON, /* time, step, allocated, reserved, max_allocated, process_used, device_used, device_total
		   */
	D_PYTHON, /* the Python monitor's csv= / jsonl= file (python/gpumon/_sinks.py FIELDS) */
	D_EXPORT, /* gpumon export --csv: its device, process or framework table */
	D_SMI,	  /* nvidia-smi --query-gpu / --query-compute-apps --format=csv, gpumon query */
};

/* A header, mapped: for each role the field index (-1 absent), its scale (bytes per unit of the
 * header's "[MiB]"; 1 without), and the column's name as the file gives it (for messages). */
struct import_header {
	int dialect;
	int col[NROLES];
	double scale[NROLES];
	char name[NROLES][48];
};

/* One row's values: a number or a text for each role that holds one (known); every other role is
 * unknown, never 0. */
struct import_row {
	double v[NROLES];
	int known[NROLES];
	const char *text[NROLES];
};

/* Whether role holds text rather than a number. */
int import_is_text(int role);

/* Maps the header's fields (trimmed names, n of them) to roles, telling the dialect from the names:
 * t_s is gpumon export's, `time` with the Python monitor's *_bytes columns the Python monitor's,
 * nvidia-smi's field names (timestamp, memory.used [MiB], pid, ...) nvidia-smi's, else gpumon's
 * CSV. Fields it does not know are ignored. */
void import_map_header(char **names, int n, struct import_header *h);

/* The Python monitor's JSON lines use its CSV's names: the header of a JSON-lines file. */
void import_jsonl_header(struct import_header *h);

/*
 * Parses field s of role into row: 1 known, 0 unknown (empty, NA, n/a, null, [N/A], [Not
 * Supported], N/A), -1 not a value of that role. A byte count may carry a unit ("1024 MiB"); a
 * bare number counts in scale bytes. Text is kept as s (not copied). A timestamp becomes seconds
 * since 1970 in local time.
 */
int import_field(int role, double scale, const char *s, struct import_row *row);

/* Fills row from one JSON object of the Python monitor's JSON lines. Returns 0, or -1 with why
 * (at most len bytes) when a member is of the wrong type. */
int import_json_row(const json_t *o, const struct import_header *h, struct import_row *row, char *why,
		    size_t len);

#endif
