/* SPDX-License-Identifier: MIT */
/* report.h — `gpumon report`: a recording (through the library's reader) or a text file of samples
 * (read here into records) feeds the library's run model, whose document (docs/report.md) is printed as
 * it is (--json), whose answers in the library's words (text), or both as an HTML page. */
#ifndef GPUMON_REPORT_H
#define GPUMON_REPORT_H

#include <stdio.h>

#include <gpumon/gpumon.h>

/* The pid that stands for a CSV's one process in its records: a CSV names no process, and no
 * process has pid 0. Its document says 0; every rendering says "the process"
 * (gpumon_model_source.names_processes). */
#define REPORT_CSV_PID 0u

/* The CSV's clock: a CSV time of t seconds is REPORT_CSV_T0_NS + t * 1e9 on the model's clock, the
 * run starting at REPORT_CSV_T0_NS, so the document's times are the CSV's own (a time of 0 would
 * read as "unknown" on the model's clock). */
#define REPORT_CSV_T0_NS 1000000000ull

/*
 * Reads a CSV of samples (docs/report.md) from f into a new run model (model_flags: GPUMON_MODEL_*
 * for the model's config): a run whose one process is the job, or, for a CSV of a GPU's columns
 * only, that GPU's view (meta kind "record"). Rows that cannot be read are
 * skipped and named in the document's damage. Returns 0 and sets *out (not yet finished), or an
 * exit status (cli.h) with err naming the problem: EXIT_USAGE for a file that is not a CSV of
 * samples (no `time` column, no memory column, a line over 1 MiB, empty), EXIT_OTHER for a read
 * error or no memory.
 */
int report_csv_model(const char *path, FILE *f, unsigned model_flags, gpumon_model **out, char *err,
		     size_t errlen);

/*
 * Reads any text file of samples `gpumon report` knows (docs/report.md: gpumon's CSV, gpumon export
 * --csv, the Python monitor's CSV and JSON lines, nvidia-smi's and gpumon query's CSV logs) from f
 * into a new run model, as report_csv_model does. period_s: how far apart the rows of a log
 * without a time are (nvidia-smi -l's period; 0: not given, 1 s assumed, and then notice (nlen
 * bytes; "" else) says so, as a note in the document's events does).
 */
int report_read_text(const char *path, FILE *f, unsigned model_flags, double period_s, gpumon_model **out,
		     char *notice, size_t nlen, char *err, size_t errlen);

/* What report_file_kind found: a recording (SQLite's header, or a name ending in .gpumon: the
 * library's reader then says when it is not one), or text to read as samples. */
enum { REPORT_FILE_RECORDING = 1, REPORT_FILE_TEXT = 2 };

/* Sets *kind from the file's name and first bytes. Returns EXIT_OK, or EXIT_USAGE with err naming
 * what the file is instead (empty, compressed, UTF-16, binary, a script, HTML). A file that cannot
 * be opened or read is left to the reader of text (*kind TEXT, EXIT_OK), which names why. */
int report_file_kind(const char *path, int *kind, char *err, size_t errlen);

/* Prints the finished model's answers as the plain-text summary (the library's words). */
void report_print_text(FILE *f, const gpumon_model *m);

#endif
