/* SPDX-License-Identifier: MIT */
/* query_fields.h — the fields of `gpumon query` (nvidia-smi's --query-gpu and
 * --query-compute-apps names) as one const table, and the pure parsers and value extraction
 * behind it: no I/O, no exit, no library calls, so a fuzz target can drive them alone. */
#ifndef GPUMON_CLI_QUERY_FIELDS_H
#define GPUMON_CLI_QUERY_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include <gpumon/gpumon.h>

/* Most fields one query list may name (repeats count). */
#define QF_MAX_FIELDS 128

/* The two tables nvidia-smi queries. */
enum qf_table { QF_TABLE_GPU, QF_TABLE_APPS };

/* Where a field's value comes from. */
enum qf_source {
	QF_SRC_INFO,    /* gpumon_device_info of the GPU (the process's GPU for compute apps); bit is
			 * the GPUMON_INFO_* bit, 0 when always known */
	QF_SRC_SAMPLE,  /* gpumon_device_sample; bit is the GPUMON_F_* field */
	QF_SRC_DRIVER,  /* the driver version string */
	QF_SRC_COUNT,   /* the number of GPUs in the machine */
	QF_SRC_PROCESS, /* gpumon_process; bit is the GPUMON_PROC_* "known" flag, 0 when always known */
	QF_SRC_PROPS,   /* gpumon_device_props; bit is the GPUMON_P_* field */
	QF_SRC_TIME,    /* the time of the query, as nvidia-smi writes it */
};

/* What a field holds at one moment. */
enum qf_kind {
	QV_TEXT,          /* text */
	QV_UINT,          /* an integer in the field's unit */
	QV_CENTI,         /* a number with two decimals: num is hundredths of the field's unit */
	QV_NOT_SUPPORTED, /* the driver or GPU does not offer it: "[Not Supported]" */
	QV_NA,            /* known to be unavailable: "[N/A]" */
	QV_LOST,          /* the GPU is lost: "[GPU is lost]" */
	QV_NO_PERMISSION, /* the driver refused: "[Insufficient Permissions]" */
	QV_ERROR,         /* the read failed otherwise: "[Unknown Error]" */
};

struct qf_value {
	enum qf_kind kind;
	uint64_t num;     /* QV_UINT, QV_CENTI */
	const char *text; /* QV_TEXT; points into the context */
};

/* Everything a field's value may be taken from; pointers unused by the fields asked may be NULL. */
struct qf_ctx {
	const gpumon_device_info *info;
	const gpumon_device_sample *sample;
	int sample_status;          /* what gpumon_device_sample_read returned */
	const char *driver_version; /* NULL when unknown */
	unsigned gpu_count;
	const gpumon_process *proc;
	const gpumon_device_props *props; /* NULL when not read */
	int props_status;           /* what gpumon_device_props_read returned */
	const char *timestamp;      /* "2026/12/03 08:49:06.061"; NULL when not asked */
};

/* Turns the raw value at base + off (a struct of the field's source) into a qf_value. */
typedef void (*qf_format_fn)(const void *base, size_t off, struct qf_value *out);

/* One row of the field table. */
struct qf_field {
	const char *name;        /* canonical name; the key in JSON output */
	const char *aliases[2];  /* other names accepted, NULL-padded */
	const char *header;      /* column name in CSV headers, without the unit */
	const char *unit;        /* unit of values ("MiB"), NULL when none */
	int csv_unitless;        /* nvidia-smi prints no unit in CSV although the value has one */
	enum qf_table table;
	enum qf_source source;
	uint64_t bit;            /* see enum qf_source */
	size_t off;              /* offset of the raw value in the source struct */
	qf_format_fn format;
	const char *desc;        /* one line for --help */
};

/* A parsed field list: indexes into the field table, in the order given. */
struct qf_list {
	unsigned n;
	unsigned short id[QF_MAX_FIELDS];
};

/* A parsed --format. */
struct qf_format {
	int json;     /* JSON instead of CSV */
	int noheader; /* CSV: no header line */
	int nounits;  /* CSV: no units in the header or values */
};

/* Number of rows in the field table. */
unsigned qf_field_count(void);

/* Row id of the table (id < qf_field_count()). */
const struct qf_field *qf_field_get(unsigned id);

/*
 * Parses a comma-separated field list of table t ("index, memory.used"); names may have blanks
 * around them and are case-sensitive, as nvidia-smi takes them. Returns 0, or -1 with a message
 * naming the bad part in err (NUL-terminated, truncated to errlen; nothing written when errlen
 * is 0). An unknown name gives nvidia-smi's sentence: Field "NAME" is not a valid field to query.
 */
int qf_parse_list(const char *text, enum qf_table t, struct qf_list *out, char *err, size_t errlen);

/* Parses a --format value: "csv" with optional ",noheader" and ",nounits" in any order, or
 * "json". Returns 0, or -1 with a message naming the bad part in err. */
int qf_parse_format(const char *text, struct qf_format *out, char *err, size_t errlen);

/* Parses a loop period: a positive decimal integer of at most 9 digits. Returns 0 and sets
 * *out, or -1 with a message naming what (e.g. "-l") and text in err. */
int qf_parse_period(const char *what, const char *text, unsigned *out, char *err, size_t errlen);

/* The GPUMON_F_* bits the sample fields of the list need (0 when none). */
unsigned qf_list_sample_bits(const struct qf_list *l);

/* The GPUMON_P_* bits the property fields of the list need (0 when none). */
uint64_t qf_list_props_bits(const struct qf_list *l);

/* Writes the local time of t (Unix seconds and nanoseconds) as nvidia-smi's timestamp field does,
 * "YYYY/MM/DD HH:MM:SS.mmm" (milliseconds truncated), into buf (at least 24 bytes). Returns buf,
 * or "" when the time cannot be converted. */
const char *qf_timestamp(long long sec, long nsec, char *buf, size_t len);

/* 1 when some field of the list takes its value from source s. */
int qf_list_uses(const struct qf_list *l, enum qf_source s);

/* The value of field f in context c. */
void qf_value_get(const struct qf_field *f, const struct qf_ctx *c, struct qf_value *out);

/* The marker nvidia-smi prints for a value without one ("[N/A]" ...); NULL for QV_TEXT/UINT/CENTI. */
const char *qf_value_marker(enum qf_kind k);

/* Writes a value as CSV shows it ("143771 MiB", "127.79", "[N/A]") into buf (NUL-terminated,
 * truncated to len). Returns buf. */
const char *qf_csv_value(const struct qf_field *f, const struct qf_value *v, int nounits, char *buf, size_t len);

/* Writes a column header ("memory.total [MiB]") into buf. nvidia-smi keeps the unit in the header
 * even with nounits (seen with driver 580.159.04), so the header has no nounits form. */
const char *qf_csv_header(const struct qf_field *f, char *buf, size_t len);

#endif
