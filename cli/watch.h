/* SPDX-License-Identifier: MIT */
/* watch.h — the parts of `gpumon watch`: the display state fed with records (live from the sampler,
 * or replayed from a recording) beside the library's run model, which judges them; the snapshot of
 * both that one screen shows; the view state the keys change; the screen drawing and its plain-text
 * form for batch mode. cmd_watch.c ties them together. */
#ifndef GPUMON_WATCH_H
#define GPUMON_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <gpumon/gpumon.h>

#define WATCH_HIST_SECONDS 600 /* memory history kept per GPU, one value a second */
#define WATCH_NONE UINT64_MAX  /* no value for that second */
#define WATCH_NEARLY_FULL_PCT 90

/* ---- display state: what the records said last, for the screen ---------------------------------- */
typedef struct watch_model watch_model;

/* Creates the display state for ngpu devices (positions 0 .. ngpu-1). Returns 0 or GPUMON_E_NOMEM. */
int watch_model_create(unsigned ngpu, watch_model **out);
void watch_model_destroy(watch_model *m);

/* Sets what is known of device dev (name, UUID, total) before any record arrives. */
void watch_model_set_info(watch_model *m, unsigned dev, const gpumon_device_info *info);

/* Takes one record (GPUMON_REC_*; records of unknown devices and kinds the screen does not show are
 * ignored). Records must come in time order per device. Returns 0 or GPUMON_E_NOMEM (the record is
 * then lost). */
int watch_model_record(watch_model *m, const gpumon_record *r);

/* Where every record goes: the display state, and the run model that judges leaks and time to
 * out-of-memory (what gpumon report says of the same records). */
typedef struct watch_sink {
	watch_model *view;
	gpumon_model *model;
} watch_sink;

/* Feeds one record to both. Returns 0 or GPUMON_E_NOMEM. */
int watch_feed(const watch_sink *s, const gpumon_record *r);

/* ---- snapshot: what one screen shows, computed from the model ---------------------------------- */
typedef struct watch_gpu {
	gpumon_device_info info;
	int have_sample;           /* s holds the latest sample */
	int lost;                  /* the GPU reported itself lost */
	gpumon_device_sample s;
	uint64_t hist[WATCH_HIST_SECONDS]; /* largest used bytes of each second, oldest first, the last
					      one the snapshot's second; WATCH_NONE: no data */
	unsigned hist_known;       /* seconds of history since the first sample (<= WATCH_HIST_SECONDS) */
} watch_gpu;

typedef struct watch_proc {
	unsigned gpu, pid, flags;  /* flags: GPUMON_PROC_* */
	uint64_t used_bytes;       /* valid with GPUMON_PROC_USED_KNOWN */
	int change_known;          /* change_bytes_per_min holds a value */
	double change_bytes_per_min;
	/* the run model's verdict on the process (gpumon_model_process_verdict) */
	int leak;                  /* it alerts: the ! mark */
	int leak_rate_known;       /* the verdict is a leak: leak_bytes_per_min holds its rate */
	double leak_bytes_per_min;
	double leak_seconds_to_oom;/* at that rate, against what is left; < 0 unknown */
	char user[64];             /* "" unknown */
	char command[512];         /* command line, else the name; "" unknown */
} watch_proc;

typedef struct watch_snap {
	uint64_t now_ns;           /* the latest record time seen */
	unsigned ngpu;
	watch_gpu *gpus;
	size_t nproc, cap;
	watch_proc *procs;
} watch_snap;

/* Fills snap from m, with the verdicts of the run model `judge` on its processes, reusing snap's
 * arrays (zero it before the first use). Returns 0 or GPUMON_E_NOMEM (snap then keeps its previous
 * content). */
int watch_model_snapshot(const watch_model *m, const gpumon_model *judge, watch_snap *snap);
void watch_snap_free(watch_snap *snap);

/* ---- view: what the keys change ---------------------------------------------------------------- */
enum { WATCH_SORT_MEMORY, WATCH_SORT_CHANGE, WATCH_SORT_GPU, WATCH_SORT_PID, WATCH_SORT_USER,
       WATCH_SORT_COMMAND, WATCH_SORT_COUNT };

typedef struct watch_view {
	int sort;                  /* WATCH_SORT_* */
	int gpu_filter;            /* device position shown alone, -1 all */
	const unsigned char *picked; /* with -i: picked[dev] for the GPUs watched; NULL all */
	char user_filter[64];      /* "" all */
	int paused, help;
	int prompting;             /* the user filter prompt is open */
	char input[64];            /* what has been typed at the prompt */
	size_t cur, top;           /* cursor and first shown row, in the filtered, sorted rows */
	int moved;                 /* a key moved the cursor: it stays there, not on sel_pid */
	int sel_valid;             /* the cursor follows this process when the rows change order */
	unsigned sel_gpu, sel_pid;
	size_t page_rows;          /* rows of the table on the last screen drawn */
	unsigned interval_ms;
	int color, utf8;
	char title[160];           /* "live on host", or the recording's description */
	char banner[2][320];       /* up to two lines under the title ("" none): recording, reason */
	char position[96];         /* replay: where in the recording; "" live */
	char message[160];         /* a one-off note on the key line ("" none) */
} watch_view;

/* The filtered and sorted process rows: fills idx (capacity snap->nproc) with indexes into
 * snap->procs; returns how many. */
size_t watch_rows(const watch_snap *snap, const watch_view *v, size_t *idx);

/* The name of a sort order for the screen. */
const char *watch_sort_name(int sort);

/* ---- screen ------------------------------------------------------------------------------------- */
/* Starts curses on the terminal (colour unless NO_COLOR is set or the terminal has none; wide
 * characters when the locale is UTF-8). Returns 0, or -1 with a message in err. */
int watch_screen_start(watch_view *v, char *err, size_t errlen);
void watch_screen_end(void);

/* Draws the whole screen from snap (the help screen when v->help). */
void watch_draw(const watch_snap *snap, watch_view *v);

/* The GPU panels (watch_gpu.c): draws from row y on, at most max_rows rows; returns rows used.
 * sel is the selected process (NULL none), whose share the bar shows. */
int watch_draw_gpus(const watch_snap *snap, const watch_view *v, const watch_proc *sel, int y, int max_rows,
		    int cols);

/* Signed byte change ("+12.0 MiB", "-1.00 GiB", "0 B") into buf. */
const char *watch_format_change(char *buf, size_t len, double bytes);

/* ---- text the screen and batch mode share --------------------------------------------------------- */
/* The process table's header and one row (mark, GPU, PID, USER, MEMORY, CHG/MIN, LEAK/MIN, COMMAND). */
const char *watch_table_header(char *buf, size_t len);
const char *watch_row_text(const watch_proc *p, char *buf, size_t len);
/* "pid 7 on GPU 0: LEAK suspected, +1.00 GiB/min, full in ~12 min: COMMAND", or the process's user
 * and command when it does not leak. */
const char *watch_detail_text(const watch_proc *p, char *buf, size_t len);
/* A GPU's "util  95 %  mem-util  40 %   62 C   550.0 W", and its memory "20.0 GiB used + 512 MiB
 * rsv / 80.0 GiB  25 %". */
const char *watch_gpu_stats_text(const watch_gpu *g, char *buf, size_t len);
const char *watch_gpu_memory_text(const watch_gpu *g, char *buf, size_t len);
/* 1 when the GPU's memory is WATCH_NEARLY_FULL_PCT used; then who holds it: " nearly full (97 %):
 * pid 744 root 31.6 GiB python3 train.py; ..." (the three largest). */
int watch_nearly_full(const watch_gpu *g);
const char *watch_holders_text(const watch_snap *snap, const watch_gpu *g, char *buf, size_t len);

/* ---- batch mode (watch_batch.c) ------------------------------------------------------------------- */
/* Prints one snapshot as plain text: the title, the GPUs, the process table (the rows v shows, in
 * its sort order) with the leak marks, and a line for each process that leaks; a blank line ends
 * it. Returns 0, or -1 when writing failed. */
int watch_batch_print(FILE *f, const watch_snap *snap, const watch_view *v);

/* ---- replay of a recording (watch_replay.c) ---------------------------------------------------- */
typedef struct watch_replay watch_replay;

/* Opens a recording for replay at speed (> 0; 0: as fast as it can, the whole recording at the first
 * advance). Returns 0, or an exit status (cli.h) with err set. */
int watch_replay_open(const char *path, double speed, watch_replay **out, char *err, size_t errlen);
void watch_replay_close(watch_replay *r);

/* The run the recording holds, for the run model (valid until watch_replay_close). */
const gpumon_run_meta *watch_replay_meta(const watch_replay *r);

/* The GPUs of the recording, as device infos. */
unsigned watch_replay_ngpu(const watch_replay *r);
void watch_replay_info(const watch_replay *r, unsigned dev, gpumon_device_info *out);

/* "RECORDING of HOST, DATE UTC: COMMAND" (and what is damaged) into buf. */
void watch_replay_describe(const watch_replay *r, char *buf, size_t len);

/* The recording's file name (without its directory). */
const char *watch_replay_file(const watch_replay *r);

/* Feeds s every record due at wall time now_ns (CLOCK_MONOTONIC). Returns 1 when the recording is
 * over, 0 while it plays, < 0 when reading it failed (err says why). */
int watch_replay_advance(watch_replay *r, uint64_t now_ns, const watch_sink *s, char *err, size_t errlen);

/* Stops or restarts the replay clock at now_ns; changes the speed from now_ns on. */
void watch_replay_pause(watch_replay *r, int paused, uint64_t now_ns);
void watch_replay_set_speed(watch_replay *r, double speed, uint64_t now_ns);
double watch_replay_speed(const watch_replay *r);

/* "00:07 / 00:12  speed 1x" (or "END of recording 00:12 / 00:12") into buf. */
void watch_replay_position(const watch_replay *r, char *buf, size_t len);

#endif
