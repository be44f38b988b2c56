/* SPDX-License-Identifier: MIT */
/* cli.h — what the subcommands of the `gpumon` program share: the command table entry, exit
 * statuses (nvidia-smi's, so scripts that check them keep working), and small helpers. */
#ifndef GPUMON_CLI_H
#define GPUMON_CLI_H

#include <signal.h>
#include <stdio.h>
#include <gpumon/gpumon.h>

/* Exit statuses, chosen to match nvidia-smi's documented return values. */
enum {
	EXIT_OK = 0,
	EXIT_USAGE = 2,         /* bad argument or unknown field */
	EXIT_NO_PERMISSION = 4, /* the driver refused */
	EXIT_NOT_FOUND = 6,     /* a GPU named with -i does not exist */
	EXIT_NO_DRIVER = 9,     /* NVML is there but the NVIDIA driver is not loaded */
	EXIT_NO_LIBRARY = 12,   /* libnvidia-ml.so.1 not found: no NVIDIA driver installed */
	EXIT_GPU_LOST = 15,     /* a GPU has fallen off the bus (the others were still reported) */
	EXIT_OTHER = 255,
};

typedef struct cli_command {
	const char *name;    /* subcommand word; NULL for the default view */
	const char *summary; /* one line for `gpumon --help` */
	int (*run)(int argc, char **argv); /* argv[0] is the subcommand word; returns an exit status */
} cli_command;

/* Subcommands (one file each: cmd_<name>.c). */
int cmd_show(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_fit(int argc, char **argv);

/* The program's name for messages ("gpumon"). */
extern const char *cli_progname;

/* Prints "gpumon: <message>\n" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Maps a libgpumon status to an exit status. */
int cli_exit_status(int status);

/*
 * Opens libgpumon. On failure prints one clear line (for a missing driver: what is missing and
 * what to do) and returns NULL with *exit_status set; on success returns the handle.
 */
gpumon *cli_open(int *exit_status);

/* The end of a one-shot command's handle: the process exits next, and the OS and the driver release
 * all of it then, so nvmlShutdown and dlclose (1.3-3 ms of every `gpumon query`, BENCHMARKS.md) are
 * not paid; the handle is kept where a leak checker still sees it. Call once, as the last use of g. */
void cli_leave(gpumon *g);

/*
 * Parses a GPU selection as nvidia-smi's -i takes it: comma-separated indexes, UUIDs or PCI bus
 * ids. Fills sel[0..count-1] with device positions (at most cap, no duplicates, in the order
 * given). spec NULL selects every GPU. Returns 0, or prints a usage error naming the bad part
 * and returns its exit status.
 */
int cli_select_devices(gpumon *g, const char *spec, unsigned *sel, unsigned cap, unsigned *count);

/* CLOCK_MONOTONIC in nanoseconds: the clock of libgpumon's samples and recordings. */
uint64_t cli_now_ns(void);

/* Waits until fd (-1: none) is readable, CLOCK_MONOTONIC reaches deadline_ns (0: none), or *stop is
 * set by the handler of a signal in stops. Those signals are blocked from the check of *stop until
 * ppoll unblocks them atomically, so one arriving in between ends the wait instead of being slept
 * through. Returns 1 when fd is readable, else 0. */
int cli_wait(int fd, uint64_t deadline_ns, const sigset_t *stops, const volatile sig_atomic_t *stop);

/* Appends an event (kind, text) at t_ns to a recording: a record of kind GPUMON_REC_EVENT. */
int cli_record_event(gpumon_recording *r, uint64_t t_ns, const char *kind, const char *text);

/* Whether two paths name the same file (an output that would overwrite the input). */
int cli_same_file(const char *a, const char *b);

/* Formats one sentence into err[0..len-1] (nothing when len is 0). */
void cli_set_err(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Makes room for one more element in a growing array: when used == *cap, doubles *cap (first
 * when 0) and reallocates *array of elements of size bytes. 0, or -1 when out of memory (the
 * array is left as it was). */
int cli_grow(void **array, size_t *cap, size_t used, size_t size, size_t first);

/*
 * Text that another process chose (its command line, name or user; a recording's or a job's
 * strings) made safe to print on a terminal, into buf (len bytes, NUL-terminated; s NULL: ""):
 * every control character (C0, DEL, C1), every byte that is not part of valid UTF-8 and the
 * Unicode bidirectional overrides are written as escapes ("\n", "\r", "\t", "\x1b", "\u202e"),
 * so that none of it can move the cursor, retitle the window or clear the screen. Everything else
 * is kept as it is. Truncated at a whole character or escape. Returns buf. Every place that prints
 * such text goes through this function.
 */
const char *cli_safe_text(char *buf, size_t len, const char *s);

/* cli_safe_text of the whole of s, however long, in a buffer of its own (free() it); NULL when out
 * of memory. */
char *cli_safe_text_dup(const char *s);

/* cli_safe_text's text as one CSV field of `gpumon query`: in double quotes (a quote doubled, as
 * RFC 4180 has it) when it holds a comma or a quote or begins or ends with a blank, so that a
 * reader splitting on commas still sees one row of the same columns. Returns buf. */
const char *cli_csv_field(char *buf, size_t len, const char *s);

/* "1.5 GiB", "512 MiB", ... into buf (IEC units, 3 significant digits). */
const char *cli_format_bytes(char *buf, size_t len, uint64_t bytes);

/* Matches "--name=value" or "--name value" (and -x value): returns the value and advances *i, or
 * NULL when argv[*i] is not that option. Prints a usage error and sets *bad when the value is
 * missing. */
const char *cli_option_value(int argc, char **argv, int *i, const char *long_name,
			     const char *short_name, int *bad);

#endif
