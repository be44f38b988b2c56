/* SPDX-License-Identifier: MIT */
/* show.h — what `gpumon show` gathers once (the machine, each selected GPU, the processes after
 * --user and --sort) and the two renderers that print it: text fitted to the terminal (show_text.c)
 * and JSON (show_json.c), so that both say the same figures. */
#ifndef GPUMON_SHOW_H
#define GPUMON_SHOW_H

#include <stddef.h>

#include "cli.h"

enum show_sort { SHOW_SORT_MEMORY, SHOW_SORT_PID, SHOW_SORT_USER, SHOW_SORT_GPU };

/* What the processes of a GPU came to. */
enum show_procs {
	SHOW_PROCS_NOT_ASKED = 0, /* --no-processes, or the GPU could not be read */
	SHOW_PROCS_LISTED,
	SHOW_PROCS_UNSUPPORTED, /* the driver has no process call */
	SHOW_PROCS_FAILED,      /* the call failed (lost GPU, driver error) */
};

typedef struct show_gpu {
	gpumon_device_info info;
	gpumon_device_sample s; /* valid when status is GPUMON_OK */
	int status;             /* gpumon_device_sample_read's status */
	char error[256];        /* the library's message when status is neither OK nor LOST */
	int procs;              /* enum show_procs */
	gpumon_device_props health;  /* GPUMON_P_HEALTH fields (health.size is 0 when not read) */
	unsigned health_problems;    /* gpumon_health_problems(&health) */
} show_gpu;

typedef struct show_row {
	unsigned gpu;        /* the GPU's index */
	const char *uuid;    /* the GPU's UUID (points into its show_gpu), NULL when unknown */
	gpumon_process p;
	char owner[192];     /* gpumon_owner_describe's phrase, escaped; "" when none is known */
} show_row;

typedef struct show_model {
	char host[256];
	char when[32];     /* local time, "2026-12-03 08:55:41" */
	char when_iso[40]; /* the same in RFC 3339, "2026-12-03T08:55:41+01:00" */
	char driver[96];   /* "" when the driver does not say */
	unsigned gpu_count;/* GPUs in the machine, not only the selected ones */
	show_gpu *gpus;
	unsigned n_gpus;
	int processes;     /* 0 with --no-processes */
	show_row *rows;
	size_t n_rows;
	int any_owner;     /* some row has an owner: the text shows the column */
	int any_lost;
	enum show_sort sort;
	const char *user;  /* --user, or NULL */
	char replay[256];  /* a recording's file name when this is its replay (show --replay), else "" */
	double replay_at_s, replay_span_s; /* the moment shown and the recording's length, from its start */
} show_model;

/* Output settings of the text view. */
typedef struct show_style {
	int width; /* columns: every line is cut to fit, none wraps */
	int color; /* SGR colour escapes */
	int utf8;  /* the locale's text is UTF-8: wide characters counted as the terminal shows them */
} show_style;

/* Prints the model as text, each line at most st->width columns. */
void show_text(const show_model *m, const show_style *st);

/* Prints the model as one JSON document (docs/show-json.md). Returns 0, or -1 when out of memory
 * (nothing printed). */
int show_json(const show_model *m);

/* The word of --sort for s ("memory", "pid", "user", "gpu"). */
const char *show_sort_name(enum show_sort s);

#endif
