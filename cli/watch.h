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
	unsigned health;           /* gpumon_health_problems() of the card's memory (live only), 0 none */
	char health_text[256];     /* gpumon_words_health()'s problems, "" when none */
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
	char owner[96];            /* gpumon_owner_describe's phrase (pod, Slurm job, container), "" none */
	int rank, world_size;      /* a distributed worker's place (gpumon_process.rank); -1 unknown */
	unsigned uid;              /* valid with GPUMON_PROC_USER_KNOWN */
	/* every byte placed (gpumon_model_placed): for a process whose framework reports its figures */
	int placed_known;
	gpumon_placed placed;
} watch_proc;

/* The out-of-memory moment, as the run model has it (a replay of a run that ran out) */
typedef struct watch_oom {
	int known;
	double t_s;                /* seconds since the start */
	int dev;                   /* -1 unknown */
	char causes[160];          /* "fragmentation, outside the allocator" (gpumon_oom_cause_name) */
	int site_known;            /* the allocation site that held the most, from the snapshot */
	char site[200];            /* "/srv/job/train.py:71 (step)", escaped */
	uint64_t site_bytes;
} watch_oom;

typedef struct watch_snap {
	uint64_t now_ns;           /* the latest record time seen */
	unsigned ngpu;
	watch_gpu *gpus;
	size_t nproc, cap;
	watch_proc *procs;
	watch_oom oom;
} watch_snap;

/* Fills snap from m, with the verdicts of the run model `judge` on its processes, reusing snap's
 * arrays (zero it before the first use). Returns 0 or GPUMON_E_NOMEM (snap then keeps its previous
 * content). */
int watch_model_snapshot(const watch_model *m, const gpumon_model *judge, watch_snap *snap);
void watch_snap_free(watch_snap *snap);

/* ---- view: what the keys change ---------------------------------------------------------------- */
enum { WATCH_SORT_MEMORY, WATCH_SORT_CHANGE, WATCH_SORT_GPU, WATCH_SORT_PID, WATCH_SORT_USER,
       WATCH_SORT_COMMAND, WATCH_SORT_COUNT };

typedef struct watch_hoststat watch_hoststat;

/* A signal waiting for the user's y (watch_signal.c). */
typedef struct watch_confirm {
	int sig;                   /* 0: none pending */
	unsigned pid;
	unsigned long long start_ticks; /* the process's start time when asked: a pid reused since is
					   another process, and is not signalled */
	char text[256];            /* the question on the key line */
} watch_confirm;

typedef struct watch_view {
	int sort;                  /* WATCH_SORT_* */
	int gpu_filter;            /* device position shown alone, -1 all */
	const unsigned char *picked; /* with -i: picked[dev] for the GPUs watched; NULL all */
	char user_filter[64];      /* substring of the user, any case; "" all */
	char text_filter[64];      /* substring of the user, command, pid or owner, any case; "" all */
	int paused, help;
	int prompting;             /* the prompt open: 'u' (user filter), '/' (filter), 0 none */
	char input[64];            /* what has been typed at the prompt (empty when it opens) */
	watch_confirm confirm;     /* a signal to send once confirmed */
	watch_hoststat *host;      /* live: the host figures of the rows shown (CPU, RSS, time); NULL in
				      a replay, whose pids are not this machine's */
	int replay;                /* a recording: the keys that seek apply */
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
	char message[256];         /* a one-off note on the key line ("" none) */
} watch_view;

/* The filtered and sorted process rows: fills idx (capacity snap->nproc) with indexes into
 * snap->procs; returns how many. The filters match substrings in any case (ASCII letters). */
size_t watch_rows(const watch_snap *snap, const watch_view *v, size_t *idx);

/* Whether p passes the view's user and text filters. */
int watch_row_matches(const watch_proc *p, const watch_view *v);

/* Whether the two snapshots would draw the same screen (everything but their clock and the
 * sample times). */
int watch_snap_same(const watch_snap *a, const watch_snap *b);

/* Copies src into dst, reusing dst's arrays (zero dst before the first use). 0 or GPUMON_E_NOMEM. */
int watch_snap_copy(watch_snap *dst, const watch_snap *src);

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
/* "pid 7 on GPU 0: NVML 20.5 GiB = allocator 13.9 GiB (12.0 GiB allocated) + outside 6.60 GiB" for a
 * process whose figures are placed ("" otherwise). */
const char *watch_placed_text(const watch_proc *p, char *buf, size_t len);
/* "out of memory at 12.3 s on GPU 0: fragmentation, outside the allocator; most held at
 * /srv/job/train.py:71 (step) 24.0 GiB" ("" when the run has not run out). */
const char *watch_oom_text(const watch_oom *o, char *buf, size_t len);
/* 1 when the GPU's memory is WATCH_NEARLY_FULL_PCT used; then who holds it: " nearly full (97 %):
 * pid 744 root 31.6 GiB python3 train.py; ..." (the three largest). */
int watch_nearly_full(const watch_gpu *g);
const char *watch_holders_text(const watch_snap *snap, const watch_gpu *g, char *buf, size_t len);

/* ---- host figures of a live process (watch_hoststat.c) ---------------------------------------------- */
/* What the library reads of a process on this machine (gpumon_host_process_read): CPU % of one core
 * over the last second or more, resident memory and time since it started. Read only for the rows on
 * the screen, at most once per period a pid, and kept for the rows that stay. */
typedef struct watch_host {
	int cpu_known, rss_known, elapsed_known; /* which figures hold values */
	double cpu_pct;            /* of one core, over the time since the previous reading */
	uint64_t rss_bytes;
	double elapsed_s;
} watch_host;

/* Creates the cache; period_ms: the least time between two readings of a pid (the CPU % is
 * measured over it). Returns NULL when out of memory. */
watch_hoststat *watch_hoststat_create(unsigned period_ms);
void watch_hoststat_destroy(watch_hoststat *h);

/* The figures of pid at monotonic time now_ns into out (all unknown when the pid is not in /proc or
 * cannot be read). Asks the library again when the cached reading is a period old. */
void watch_hoststat_get(watch_hoststat *h, unsigned pid, uint64_t now_ns, watch_host *out);

/* Forgets the pids not asked for since the previous call (a draw calls it first). */
void watch_hoststat_sweep(watch_hoststat *h);

/* The start time of pid in clock ticks since boot (field 22 of /proc/PID/stat), and its real uid;
 * 0, -1 when the pid is gone or unreadable, or -2 when GPUMON_PROC_ROOT is a /proc that does not
 * number pids as our PID namespace does (a signal to that pid would reach another process). */
int watch_proc_identity(unsigned pid, unsigned long long *start_ticks, unsigned *uid);

/* "1:02:03", "12:05", "3d 04h" into buf. */
const char *watch_format_elapsed(char *buf, size_t len, double seconds);

/* ---- signals to a process (watch_signal.c) --------------------------------------------------------- */
/* Asks to send sig (SIGTERM, SIGKILL, SIGINT) to the selected process p: fills v->confirm with the
 * question when it may be sent, else sets v->message to why not (a replay, another user's process,
 * another PID namespace, gone). */
void watch_signal_ask(watch_view *v, const watch_proc *p, int sig);

/* The answer to the question: y sends the signal (when the pid is still the same process), any
 * other key cancels; v->message says what happened. */
void watch_signal_answer(watch_view *v, int key);

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

/* Where a seek goes: by an offset from the position, to the start, to the end. */
enum { WATCH_SEEK_BY, WATCH_SEEK_START, WATCH_SEEK_END };

/* Moves the play position (clamped to the recording) at wall time now_ns: by offset_ns with
 * WATCH_SEEK_BY, else to the start or the end. A position before what has been fed already rewinds
 * the reader: it returns 1, and the caller gives the replay fresh sinks (the records are fed again
 * from the start up to the position at the next advance). Returns 0 when the position moved forward
 * (or stayed), 1 rewound, -1 when the file could not be opened again (err says why). */
int watch_replay_seek(watch_replay *r, int whence, int64_t offset_ns, uint64_t now_ns, char *err, size_t errlen);

/* Stops or restarts the replay clock at now_ns; changes the speed from now_ns on. */
void watch_replay_pause(watch_replay *r, int paused, uint64_t now_ns);
void watch_replay_set_speed(watch_replay *r, double speed, uint64_t now_ns);
double watch_replay_speed(const watch_replay *r);

/* "00:07 / 00:12  speed 1x" (or "END of recording 00:12 / 00:12") into buf. */
void watch_replay_position(const watch_replay *r, char *buf, size_t len);

#endif
