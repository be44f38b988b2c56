/* SPDX-License-Identifier: MIT */
/* report_csv.c — reading a text file of samples for `gpumon report` (docs/report.md) into the
 * library's run model: gpumon's CSV, `gpumon export --csv`, the Python monitor's CSV and JSON
 * lines, nvidia-smi's and `gpumon query`'s CSV logs (what each column means: report_import_cols.c).
 * Each row becomes records (the GPU, a process, the framework's figures); the model judges.
 * Streams line by line in bounded memory; a row that cannot be read is skipped and named, never
 * read as 0. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"
#include "report_import.h"

#define MAX_LINE (1 << 20)
#define MAX_COLS 256
#define MAX_DEVS 64   /* GPUs a file may name */
#define MAX_ROUND 512 /* rows of one nvidia-smi -l round, for files without a time */

/* Splits line (modified in place) at commas, honouring "quoted, fields" with "" for a quote.
 * Returns the number of fields (at most cap). */
static int split(char *line, char **field, int cap)
{
	int n = 0;
	char *p = line;
	while (n < cap) {
		char *out = p, *start = p;
		if (*p == '"') {
			p++;
			while (*p) {
				if (*p == '"' && p[1] == '"') {
					*out++ = '"';
					p += 2;
				} else if (*p == '"') {
					p++;
					break;
				} else {
					*out++ = *p++;
				}
			}
			while (*p && *p != ',')
				p++;
		} else {
			while (*p && *p != ',')
				p++;
			out = p;
		}
		int more = *p == ',';
		*out = 0;
		if (more)
			p++;
		field[n++] = start;
		if (!more)
			break;
	}
	return n;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = 0;
	return s;
}

struct gpu {                 /* a GPU the file names */
	char key[96];            /* its UUID or bus id as the file gives it; "" for an index */
	int total_known;         /* its total, once a row gave it */
	uint64_t total;
	gpumon_device_info info; /* as declared to the model: declared again whole when the total comes */
};

struct csv_state {
	const char *path;
	unsigned flags;
	double period_s;    /* rows apart, for a log without a time ... */
	int period_assumed; /* ... not given: 1 s */
	struct import_header h;
	char *header_line;  /* as read: a repeated header is skipped */
	int jsonl;
	long line, skipped;
	char first_problem[160];
	int64_t last_t_ns;
	int have_last, started;
	double t0;          /* the first row's time, for times since 1970 */
	int have_t0;
	int real_pids;      /* the file names its processes; else one stand-in (REPORT_CSV_PID) */
	struct gpu gpus[MAX_DEVS];
	unsigned ngpus;
	long no_total, first_no_total; /* rows whose used memory came with no total known (room unknown) */
	long round;         /* the -l round of a log without a time, and the GPUs and pids seen in it */
	uint64_t seen[MAX_ROUND];
	size_t nseen;
	/* a --query-gpu log that names no GPU: nvidia-smi prints one row per GPU per interval, in index
	   order, the rows of an interval sharing a timestamp: a row's GPU is its place among them */
	int by_order;
	int place;          /* the current row's place; -1 unknown */
	double group_ts;    /* the current interval's timestamp, its rows so far and its first line */
	unsigned group_n;
	long group_line;
	unsigned group_size; /* rows of the first interval: every interval has as many, or the GPUs
				cannot be told apart */
	unsigned uneven_n;
	long uneven_line;    /* the first interval of another size; 0 none */
	gpumon_model *m;
};

static void skip(struct csv_state *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void skip(struct csv_state *st, const char *fmt, ...)
{
	if (!st->skipped++) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(st->first_problem, sizeof st->first_problem, fmt, ap);
		va_end(ap);
	}
}

static int has_col(const struct csv_state *st, int role)
{
	return st->h.col[role] >= 0;
}

/* Whether a row names its GPU (an index, UUID or bus id column). */
static int names_gpu(const struct csv_state *st)
{
	return has_col(st, R_DEV) || has_col(st, R_UUID) || has_col(st, R_BUS);
}

/* Whether the file has columns of a process (the framework's figures, or NVML's for the process). */
static int has_process(const struct csv_state *st)
{
	return has_col(st, R_ALLOC) || has_col(st, R_RESERVED) || has_col(st, R_MAXALLOC) || has_col(st, R_PROC);
}

static const char *const dialect_names[] = {"CSV", "Python monitor's file", "gpumon export table",
					    "nvidia-smi log"};

static const char *query_with_index(const struct csv_state *st, char *buf, size_t len);

/* The header's checks: a time (except for nvidia-smi's logs, whose rows are a period apart) and a
 * memory column. 0, or an exit status with err set. */
static int check_header(struct csv_state *st, char **f, int n, char *err, size_t errlen)
{
	int known = 0, mem = 0;
	for (int r = 0; r < NROLES; r++)
		known |= st->h.col[r] >= 0;
	mem = has_process(st) || has_col(st, R_DEVUSED);
	char names[240] = "";
	size_t used = 0;
	for (int i = 0; i < n && used < sizeof names; i++) {
		char shown[100]; /* the file's text, as it can be printed */
		int k = snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
				 cli_safe_text(shown, sizeof shown, trim(f[i])));
		used += k > 0 ? (size_t)k : 0;
	}
	if (!known && n < 2) { /* a line of prose or code, not a header */
		char shown[64];
		cli_set_err(err, errlen,
			"%s is not a CSV of samples: its first line has no commas (%s); expected a header naming "
			"columns, such as time,allocated or nvidia-smi's timestamp, memory.used [MiB] (docs/report.md)",
			st->path, cli_safe_text(shown, sizeof shown, f[0]));
		return EXIT_USAGE;
	}
	if (!known) {
		cli_set_err(err, errlen,
			"%s is not a CSV of samples: its first line names no column gpumon reads (time, t_s, timestamp, "
			"memory.used, allocated, ...; docs/report.md); it names: %s",
			st->path, names);
		return EXIT_USAGE;
	}
	if (st->h.dialect == D_GPUMON && !has_col(st, R_TIME)) {
		cli_set_err(err, errlen, "%s: the CSV header has no `time` column (seconds); it names: %s", st->path,
			    names);
		return EXIT_USAGE;
	}
	if (!mem && st->h.dialect == D_GPUMON) {
		cli_set_err(err, errlen,
			"%s is not a CSV of samples: its first line names no memory column (it names: %s); expected at "
			"least one of allocated, reserved, max_allocated, process_used, device_used (bytes)",
			st->path, names);
		return EXIT_USAGE;
	}
	if (!mem) {
		cli_set_err(err, errlen,
			"%s: the %s has no memory column (memory.used, used_gpu_memory, used_bytes, allocated_bytes, "
			"...); it names: %s",
			st->path, dialect_names[st->h.dialect], names);
		return EXIT_USAGE;
	}
	st->real_pids = has_col(st, R_PID);
	st->by_order = st->h.dialect == D_SMI && !st->real_pids && !names_gpu(st);
	if (st->by_order && !has_col(st, R_TIMESTAMP)) {
		char q[300];
		cli_set_err(err, errlen,
			    "%s: cannot tell its GPUs apart: it has no GPU column (index, uuid, pci.bus_id) and no "
			    "timestamp; log them: nvidia-smi --query-gpu=%s --format=csv -l 1",
			    st->path, query_with_index(st, q, sizeof q));
		return EXIT_USAGE;
	}
	return 0;
}

/* The document's name of the file's kind: "csv" for the files of one unnamed process (their pid
 * is a stand-in the words leave out), else the tool's. */
static const char *source_type(const struct csv_state *st)
{
	if (st->h.dialect == D_SMI)
		return "nvidia-smi";
	if (st->h.dialect == D_EXPORT)
		return "gpumon export";
	return "csv";
}

/* Creates the model a file feeds, starting at its time 0: a run whose job is its one process, or,
 * when it has only a GPU's columns or names its processes, a view of the machine. */
static int new_model(struct csv_state *st)
{
	int run = !st->real_pids && has_process(st);
	gpumon_run_meta meta = {.size = sizeof meta, .kind = run ? "run" : "record", .start_mono_ns = REPORT_CSV_T0_NS,
				.exit_status = -1};
	if (st->have_t0 && st->t0 > 0) /* a file of wall-clock times: the document's start_utc */
		meta.start_wall_ns = (uint64_t)(st->t0 * 1e9);
	gpumon_model_config cfg = GPUMON_CONFIG_INIT(gpumon_model_config);
	cfg.flags = st->flags;
	cfg.meta = &meta;
	cfg.source = st->path;
	cfg.source_type = source_type(st);
	return gpumon_model_create(&cfg, &st->m);
}

/* The GPU of a row: its index, else its UUID or bus id numbered in the order the file names them,
 * else its place among the rows of its interval (place >= 0), else 0. Declared to the model when
 * new. -1 when the file names more than MAX_DEVS. */
static int gpu_of(struct csv_state *st, const struct import_row *row, int place)
{
	const char *key = row->known[R_UUID] ? row->text[R_UUID] : row->known[R_BUS] ? row->text[R_BUS] : NULL;
	unsigned dev = 0;
	if (place >= 0) {
		if (place >= MAX_DEVS)
			return -1;
		dev = (unsigned)place;
	} else if (row->known[R_DEV]) {
		if (row->v[R_DEV] < 0 || row->v[R_DEV] >= MAX_DEVS || row->v[R_DEV] != floor(row->v[R_DEV]))
			return -1;
		dev = (unsigned)row->v[R_DEV];
	} else if (key) {
		while (dev < st->ngpus && strcmp(st->gpus[dev].key, key))
			dev++;
		if (dev >= MAX_DEVS)
			return -1;
	}
	if (dev < st->ngpus)
		return (int)dev;
	gpumon_device_info info = {.index = dev};
	if (row->known[R_GPUNAME] && snprintf(info.name, sizeof info.name, "%s", row->text[R_GPUNAME]) >= 0)
		info.present |= GPUMON_INFO_NAME;
	if (row->known[R_UUID] && snprintf(info.uuid, sizeof info.uuid, "%s", row->text[R_UUID]) >= 0)
		info.present |= GPUMON_INFO_UUID;
	if (row->known[R_BUS] && snprintf(info.pci_bus_id, sizeof info.pci_bus_id, "%s", row->text[R_BUS]) >= 0)
		info.present |= GPUMON_INFO_PCI_BUS_ID;
	for (unsigned d = st->ngpus; d <= dev; d++) {
		memset(&st->gpus[d], 0, sizeof st->gpus[d]);
		st->gpus[d].info.index = d;
	}
	snprintf(st->gpus[dev].key, sizeof st->gpus[dev].key, "%s", key && !row->known[R_DEV] ? key : "");
	st->gpus[dev].info = info;
	st->ngpus = dev + 1;
	if (gpumon_model_device(st->m, &info) != GPUMON_OK)
		return -2;
	return (int)dev;
}

/* The GPU's total from a row: declared to the model when it is new or changed. */
static int take_total(struct csv_state *st, unsigned dev, uint64_t total)
{
	struct gpu *g = &st->gpus[dev];
	if (g->total_known && g->total == total)
		return GPUMON_OK;
	g->total = total;
	g->total_known = 1;
	g->info.present |= GPUMON_INFO_MEMORY_TOTAL;
	g->info.memory_total_bytes = total;
	return gpumon_model_device(st->m, &g->info);
}

static uint64_t bytes(const struct import_row *row, int role)
{
	return (uint64_t)llround(row->v[role]);
}

/* The GPU's row: its total is the file's, else used + free (+ reserved) when it gives free memory;
 * without either (a log of memory.used alone) the used figure goes alone (GPUMON_F_MEMORY_USED):
 * the model judges and peaks it, and the free memory stays unknown, never read as 0 (counted, and
 * said in the document). */
static size_t device_record(struct csv_state *st, unsigned dev, uint64_t t, const struct import_row *row,
			    gpumon_record *r)
{
	const struct gpu *g = &st->gpus[dev];
	uint64_t used = bytes(row, R_DEVUSED), total;
	int reserved = row->known[R_DEVRESERVED];
	if (g->total_known)
		total = g->total;
	else if (row->known[R_DEVFREE])
		total = used + bytes(row, R_DEVFREE) + (reserved ? bytes(row, R_DEVRESERVED) : 0);
	else
		total = 0;
	r->kind = GPUMON_REC_DEVICE;
	r->dev = dev;
	r->t_ns = r->sample.t_ns = t;
	if (!total) {
		if (!st->no_total++)
			st->first_no_total = st->line;
		r->sample.present = GPUMON_F_MEMORY_USED;
		r->sample.memory_used_bytes = used;
		return 1;
	}
	r->sample.present = GPUMON_F_MEMORY | (reserved ? GPUMON_F_MEM_RESERVED : 0);
	r->sample.memory_used_bytes = used;
	r->sample.memory_total_bytes = total;
	r->sample.memory_free_bytes = row->known[R_DEVFREE] ? bytes(row, R_DEVFREE) : total > used ? total - used : 0;
	r->sample.memory_reserved_bytes = reserved ? bytes(row, R_DEVRESERVED) : 0;
	/* the exact extremes between two rows, as the sampler kept them: spikes between rows count */
	if (row->known[R_USEDMIN] && row->known[R_USEDMAX] && row->known[R_USEDMAX_T] && row->known[R_SAMPLES] &&
	    row->v[R_SAMPLES] >= 1 && row->v[R_SAMPLES] < 4e9 && row->v[R_USEDMAX_T] >= 0 && row->v[R_USEDMAX_T] < 9.2e9) {
		r->interval_samples = (unsigned)row->v[R_SAMPLES];
		r->used_min_bytes = bytes(row, R_USEDMIN);
		r->used_max_bytes = bytes(row, R_USEDMAX);
		r->used_max_t_ns = REPORT_CSV_T0_NS + (uint64_t)llround(row->v[R_USEDMAX_T] * 1e9);
	}
	return 1;
}

static void copy_text(char *dst, size_t len, const struct import_row *row, int role, unsigned *flags, unsigned bit)
{
	if (row->known[role] && snprintf(dst, len, "%s", row->text[role]) >= 0)
		*flags |= bit;
}

/* The records of one row: the process first (the GPU's row is the moment its figures are judged,
 * and a peak's owner is the process that rose; *p, zeroed, holds it), then the GPU, then the
 * framework's figures. */
static size_t records(struct csv_state *st, unsigned dev, uint64_t t, const struct import_row *row, gpumon_record *rec,
		      gpumon_process *p)
{
	size_t n = 0;
	unsigned pid = st->real_pids ? (unsigned)row->v[R_PID] : REPORT_CSV_PID;
	int gone = row->known[R_GONE] && row->v[R_GONE] == 1;
	if (row->known[R_PROC] || gone) {
		gpumon_record *r = &rec[n++];
		r->process = p;
		r->kind = gone ? GPUMON_REC_PROCESS_GONE : GPUMON_REC_PROCESS;
		r->dev = dev;
		r->t_ns = t;
		p->pid = pid;
		p->flags = GPUMON_PROC_COMPUTE | (row->known[R_PROC] ? GPUMON_PROC_USED_KNOWN : 0);
		p->used_bytes = row->known[R_PROC] ? bytes(row, R_PROC) : 0;
		copy_text(p->user, sizeof p->user, row, R_USER, &p->flags, GPUMON_PROC_USER_KNOWN);
		copy_text(p->name, sizeof p->name, row, R_PNAME, &p->flags, GPUMON_PROC_NAME_KNOWN);
		copy_text(p->cmdline, sizeof p->cmdline, row, R_CMD, &p->flags, GPUMON_PROC_CMDLINE_KNOWN);
	}
	if (row->known[R_DEVUSED])
		n += device_record(st, dev, t, row, &rec[n]);
	if (row->known[R_ALLOC] || row->known[R_RESERVED] || row->known[R_MAXALLOC]) {
		gpumon_record *r = &rec[n++];
		gpumon_framework_sample *f = &r->framework;
		r->kind = GPUMON_REC_FRAMEWORK;
		r->t_ns = f->t_ns = t;
		f->pid = pid;
		f->device = row->known[R_FWDEV] && row->v[R_FWDEV] >= 0 && row->v[R_FWDEV] < 1e6 ? (int)row->v[R_FWDEV] : -1;
		f->step = row->known[R_STEP] ? (int64_t)row->v[R_STEP] : -1;
		if (row->known[R_FWNAME])
			snprintf(f->framework, sizeof f->framework, "%s", row->text[R_FWNAME]);
		f->allocated_known = row->known[R_ALLOC];
		f->reserved_known = row->known[R_RESERVED];
		f->max_allocated_known = row->known[R_MAXALLOC];
		f->allocated_bytes = row->known[R_ALLOC] ? bytes(row, R_ALLOC) : 0;
		f->reserved_bytes = row->known[R_RESERVED] ? bytes(row, R_RESERVED) : 0;
		f->max_allocated_bytes = row->known[R_MAXALLOC] ? bytes(row, R_MAXALLOC) : 0;
	}
	return n;
}

static int is_bytes(int role)
{
	return role == R_ALLOC || role == R_RESERVED || role == R_MAXALLOC || role == R_PROC || role == R_DEVUSED ||
	       role == R_DEVFREE || role == R_DEVTOTAL || role == R_DEVRESERVED || role == R_USEDMIN || role == R_USEDMAX;
}

/* An interval of a log that names no GPU ends: it had as many rows as the first one, or the GPUs
 * cannot be told apart (said at the end). The last may be shorter: the log stopped within it. */
static void end_interval(struct csv_state *st, int last)
{
	if (!st->group_n)
		return;
	if (!st->group_size)
		st->group_size = st->group_n;
	else if (st->group_n != st->group_size && !(last && st->group_n < st->group_size) && !st->uneven_line) {
		st->uneven_line = st->group_line;
		st->uneven_n = st->group_n;
	}
}

/* The place of a row of a log that names no GPU among the rows sharing its timestamp: counted for
 * every row, a skipped one too, so that one bad field moves no other row to another GPU. */
static void interval_place(struct csv_state *st, char **f, int n)
{
	struct import_row ts;
	int c = st->h.col[R_TIMESTAMP];
	memset(&ts, 0, sizeof ts);
	st->place = -1;
	if (c < 0 || c >= n || import_field(R_TIMESTAMP, 1, trim(f[c]), &ts) != 1)
		return;
	if (st->group_n && ts.v[R_TIMESTAMP] == st->group_ts) {
		st->place = (int)st->group_n++;
		return;
	}
	end_interval(st, 0);
	st->group_ts = ts.v[R_TIMESTAMP];
	st->group_n = 1;
	st->group_line = st->line;
	st->place = 0;
}

/* The query that logs what the file has, with each GPU's index: a header's fields without units. */
static const char *query_with_index(const struct csv_state *st, char *buf, size_t len)
{
	char line[512], *f[MAX_COLS];
	size_t used = 0;
	snprintf(line, sizeof line, "%s", st->header_line ? st->header_line : "");
	int n = split(line, f, MAX_COLS), have_ts = 0;
	buf[0] = 0;
	for (int i = 0; i < n; i++)
		have_ts |= !strcmp(trim(f[i]), "timestamp");
	for (int i = -1; i < n && used < len; i++) {
		char name[64], shown[64];
		snprintf(name, sizeof name, "%s", i < 0 ? (have_ts ? "timestamp" : "timestamp,index") : trim(f[i]));
		name[strcspn(name, " [")] = 0; /* "memory.used [MiB]" */
		if (i >= 0 && !strcmp(name, "timestamp"))
			snprintf(name, sizeof name, "index");
		if (!name[0])
			continue;
		int k = snprintf(buf + used, len - used, "%s%s", used ? "," : "", cli_safe_text(shown, sizeof shown, name));
		used += k > 0 ? (size_t)k : 0;
	}
	return buf;
}

/* A CSV line's fields into row; 0, or -1 after naming the field that is not a value (skipped). */
static int csv_fields(struct csv_state *st, char *line, struct import_row *row)
{
	char *f[MAX_COLS];
	int n = split(line, f, MAX_COLS);
	if (st->by_order)
		interval_place(st, f, n);
	for (int r = 0; r < NROLES; r++) {
		if (st->h.col[r] < 0 || st->h.col[r] >= n)
			continue;
		char *s = trim(f[st->h.col[r]]), shown[161]; /* the field as it can be printed */
		int k = import_field(r, st->h.scale[r], s, row);
		if (k < 0 || (k && !import_is_text(r) && r != R_STEP && r != R_FWDEV && row->v[r] < 0)) {
			skip(st, "line %ld: '%s' is not a %s in column %s", st->line, cli_safe_text(shown, 41, s),
			     r == R_TIME || r == R_TIME_UNIX ? "time in seconds"
			     : r == R_TIMESTAMP		    ? "timestamp"
			     : r == R_STEP		    ? "step number"
			     : is_bytes(r)		    ? "byte count"
							    : "number",
			     st->h.name[r]);
			return -1;
		}
	}
	return 0;
}

/* The row's time in seconds from the start into *t; -1 (named) when it has none or it is absurd.
 * A log without a time counts -l rounds: a round ends when a GPU (and pid) comes again. */
static int row_time(struct csv_state *st, const struct import_row *row, int dev, double *t)
{
	int abs_role = row->known[R_TIMESTAMP] ? R_TIMESTAMP : row->known[R_TIME_UNIX] ? R_TIME_UNIX : -1;
	if (row->known[R_TIME]) {
		*t = row->v[R_TIME];
	} else if (abs_role >= 0) {
		if (!st->have_t0) {
			st->t0 = row->v[abs_role];
			st->have_t0 = 1;
		}
		*t = round((row->v[abs_role] - st->t0) * 1e6) / 1e6; /* to the microsecond: 1.8e9 s in a double is
									  not exact below it */
	} else if (st->h.dialect == D_SMI && !has_col(st, R_TIMESTAMP)) {
		uint64_t key = (uint64_t)dev << 32 | (row->known[R_PID] ? (uint64_t)row->v[R_PID] : 0);
		size_t i = 0;
		while (i < st->nseen && st->seen[i] != key)
			i++;
		if (i < st->nseen || st->nseen == MAX_ROUND) {
			st->round++;
			st->nseen = 0;
		}
		st->seen[st->nseen++] = key;
		*t = (double)st->round * st->period_s;
	} else {
		skip(st, "line %ld: no time", st->line);
		return -1;
	}
	if (*t > 9.2e9 || *t < -9.2e9) {
		skip(st, "line %ld: time %.0f s is out of range", st->line, *t);
		return -1;
	}
	return 0;
}

/* Range checks of a row's figures; -1 (named) when one is beyond what any GPU holds. */
static int row_ranges(struct csv_state *st, const struct import_row *row)
{
	for (int r = 0; r < NROLES; r++)
		if (row->known[r] && is_bytes(r) && row->v[r] > (double)GPUMON_MAX_BYTES) {
			/* 2^63 would wrap in a signed sum: refused, named */
			skip(st, "line %ld: %.0f in column %s is out of range (1 PiB or more)", st->line, row->v[r],
			     st->h.name[r]);
			return -1;
		}
	if (row->known[R_STEP] && (row->v[R_STEP] < 0 || row->v[R_STEP] > 9.2e18)) { /* unknown is -1 */
		skip(st, "line %ld: step %.0f is out of range", st->line, row->v[R_STEP]);
		return -1;
	}
	if (st->real_pids && (!row->known[R_PID] || row->v[R_PID] < 1 || row->v[R_PID] > 4294967295.0)) {
		skip(st, "line %ld: no pid", st->line);
		return -1;
	}
	return 0;
}

/* One row into records for the model. 0, or a negative status (no memory). */
static int take_row(struct csv_state *st, const struct import_row *row)
{
	double secs;
	if (row_ranges(st, row))
		return 0;
	if (!st->m) {
		/* the model starts with the first row: a file of wall-clock times gives its start */
		int abs_role = row->known[R_TIMESTAMP] ? R_TIMESTAMP : row->known[R_TIME_UNIX] ? R_TIME_UNIX : -1;
		if (abs_role >= 0 && !st->have_t0) {
			st->t0 = row->v[abs_role];
			st->have_t0 = 1;
		}
		if (new_model(st) != GPUMON_OK)
			return GPUMON_E_NOMEM;
	}
	/* a file of the framework's figures alone names no GPU: none is declared */
	int gpus = has_col(st, R_DEVUSED) || has_col(st, R_PROC) || has_col(st, R_DEV) || has_col(st, R_UUID) ||
		   has_col(st, R_BUS) || has_col(st, R_DEVTOTAL);
	int dev = gpus ? gpu_of(st, row, st->by_order ? st->place : -1) : 0;
	if (dev == -2)
		return GPUMON_E_NOMEM;
	if (dev < 0) {
		skip(st, "line %ld: more than %d GPUs", st->line, MAX_DEVS);
		return 0;
	}
	if (row_time(st, row, dev, &secs))
		return 0;
	int64_t t_ns = (int64_t)llround(secs * 1e9);
	if ((st->have_last && t_ns < st->last_t_ns) || t_ns < 0) {
		skip(st, "line %ld: time %.3f s goes back", st->line, secs);
		return 0;
	}
	st->last_t_ns = t_ns;
	st->have_last = 1;
	uint64_t t = REPORT_CSV_T0_NS + (uint64_t)t_ns;
	gpumon_record rec[4];
	gpumon_process job = {.pid = REPORT_CSV_PID}, proc;
	memset(rec, 0, sizeof rec);
	memset(&proc, 0, sizeof proc);
	size_t nrec = 0;
	if (!st->started && !st->real_pids && has_process(st)) { /* the file's one process is the run's job */
		st->started = 1;
		rec[nrec].kind = GPUMON_REC_JOB;
		rec[nrec].t_ns = t;
		rec[nrec++].process = &job;
	}
	if (row->known[R_DEVTOTAL] && take_total(st, (unsigned)dev, bytes(row, R_DEVTOTAL)) != GPUMON_OK)
		return GPUMON_E_NOMEM;
	nrec += records(st, (unsigned)dev, t, row, rec + nrec, &proc);
	return gpumon_model_add(st->m, rec, nrec);
}

/* A JSON line of the Python monitor into a row; -1 (named) when it is not one. */
static int json_fields(struct csv_state *st, const char *line, struct import_row *row, json_t **keep)
{
	json_error_t jerr;
	char why[96];
	json_t *o = json_loads(line, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(o)) {
		skip(st, "line %ld: not a JSON object", st->line);
		json_decref(o);
		return -1;
	}
	if (import_json_row(o, &st->h, row, why, sizeof why)) {
		skip(st, "line %ld: %s", st->line, why);
		json_decref(o);
		return -1;
	}
	*keep = o; /* row's texts point into it */
	return 0;
}

/* The first line (the header, or a JSON line's object): sets what the file is. */
static int first_line(struct csv_state *st, char *t, char *err, size_t errlen)
{
	char *f[MAX_COLS];
	if (*t == '{') {
		st->jsonl = 1;
		import_jsonl_header(&st->h);
		st->real_pids = 0;
		return 0;
	}
	if (!(st->header_line = strdup(t))) {
		cli_set_err(err, errlen, "out of memory");
		return EXIT_OTHER;
	}
	int n = split(t, f, MAX_COLS);
	for (int i = 0; i < n; i++)
		f[i] = trim(f[i]);
	import_map_header(f, n, &st->h);
	return check_header(st, f, n, err, errlen);
}

/* One data line. 0, or a negative status (no memory). */
static int data_line(struct csv_state *st, char *t)
{
	struct import_row row;
	json_t *keep = NULL;
	memset(&row, 0, sizeof row);
	if (!st->jsonl && st->header_line && !strcmp(t, st->header_line))
		return 0; /* the header again (a log appended to, or printed each round) */
	if (st->jsonl ? json_fields(st, t, &row, &keep) : csv_fields(st, t, &row))
		return 0;
	int rc = take_row(st, &row);
	json_decref(keep);
	return rc;
}

/* Names in the document what the model did not get: skipped rows, GPU rows without a total (their
 * room is unknown), and a period that was assumed. */
static int name_losses(const struct csv_state *st)
{
	char text[400];
	int rc = GPUMON_OK;
	if (st->skipped) {
		snprintf(text, sizeof text, "%ld rows skipped (the first: %s)", st->skipped, st->first_problem);
		rc = gpumon_model_damage(st->m, text);
	}
	if (!rc && st->no_total) {
		snprintf(text, sizeof text,
			 "%s of %ld rows without %s (the first: line %ld): the GPU's free memory is unknown there, and "
			 "so the time to out-of-memory",
			 st->h.name[R_DEVUSED], st->no_total,
			 st->h.dialect == D_SMI ? "memory.total (or memory.free)" : "device_total", st->first_no_total);
		rc = gpumon_model_damage(st->m, text);
	}
	return rc;
}

/* The note of a log that names no GPU: how several were told apart, or, for a log of processes,
 * that they are taken as GPU 0's (right on a machine of one GPU). */
static int name_order(struct csv_state *st)
{
	int apps = st->h.dialect == D_SMI && st->real_pids && !names_gpu(st);
	if ((!st->by_order || st->group_size < 2 || !st->m) && !(apps && st->m))
		return GPUMON_OK;
	char text[220];
	snprintf(text, sizeof text, apps ? "no GPU column: every process taken as GPU 0's; on a machine of several "
					   "GPUs log gpu_uuid too (nvidia-smi --query-compute-apps=...,gpu_uuid)"
					 : "no index column: %u GPUs told apart by the order of the rows sharing a timestamp "
					   "(nvidia-smi prints them in index order)",
		 st->group_size);
	gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = REPORT_CSV_T0_NS, .event_kind = "note", .event_text = text};
	return gpumon_model_add(st->m, &e, 1);
}

/* The note of a log without a time: its rows were taken a period apart. Also said on stderr. */
static int name_period(struct csv_state *st, char *notice, size_t nlen)
{
	if (st->h.dialect != D_SMI || has_col(st, R_TIMESTAMP) || !st->m)
		return GPUMON_OK;
	char text[300];
	if (st->period_assumed)
		snprintf(text, sizeof text,
			 "no timestamp column: rounds of rows taken as %g s apart, a period assumed (nvidia-smi -l's; "
			 "gpumon report --period gives the log's)",
			 st->period_s);
	else
		snprintf(text, sizeof text, "no timestamp column: rounds of rows taken as %g s apart (--period)",
			 st->period_s);
	if (notice && st->period_assumed)
		snprintf(notice, nlen, "%s: %s", st->path, text);
	gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = REPORT_CSV_T0_NS, .event_kind = "note", .event_text = text};
	return gpumon_model_add(st->m, &e, 1);
}

/* Reads every line; 0 or an exit status with err set. */
static int read_lines(struct csv_state *st, FILE *f, char *line, char *err, size_t errlen)
{
	int have_first = 0, rc = 0;
	while (fgets(line, MAX_LINE + 2, f)) {
		st->line++;
		size_t len = strlen(line);
		if (len > MAX_LINE || (len == MAX_LINE + 1 && line[len - 1] != '\n')) {
			cli_set_err(err, errlen, "%s: line %ld is longer than %d bytes: not a CSV of samples", st->path,
				    st->line, MAX_LINE);
			return EXIT_USAGE;
		}
		char *t = trim(line);
		if (!have_first && st->line == 1 && (unsigned char)t[0] == 0xEF && (unsigned char)t[1] == 0xBB &&
		    (unsigned char)t[2] == 0xBF)
			t += 3; /* a UTF-8 byte-order mark */
		if (!*t || *t == '#')
			continue;
		if (!have_first) {
			if ((rc = first_line(st, t, err, errlen)) != 0)
				return rc;
			have_first = 1;
			if (!st->jsonl)
				continue;
		}
		if (data_line(st, t) != GPUMON_OK) {
			cli_set_err(err, errlen, "out of memory");
			return EXIT_OTHER;
		}
	}
	if (ferror(f)) {
		cli_set_err(err, errlen, "%s: read error: %s", st->path, strerror(errno));
		return EXIT_OTHER;
	}
	if (st->by_order) {
		end_interval(st, 1);
		if (st->uneven_line) {
			char q[300];
			cli_set_err(err, errlen,
				    "%s: cannot tell its GPUs apart: it has no index column, and its rows sharing a "
				    "timestamp come %u at a time, but %u at line %ld; log the index: nvidia-smi "
				    "--query-gpu=%s --format=csv -l 1",
				    st->path, st->group_size, st->uneven_n, st->uneven_line, query_with_index(st, q, sizeof q));
			return EXIT_USAGE;
		}
	}
	if (!have_first) {
		cli_set_err(err, errlen,
			    "%s holds only blank lines and # comments: expected a CSV header naming columns (docs/report.md)",
			    st->path);
		return EXIT_USAGE;
	}
	/* a report of nothing would read as a run that held no memory: refused, with why */
	if (st->m && gpumon_model_samples(st->m))
		return 0;
	if (st->skipped)
		cli_set_err(err, errlen, "%s: nothing could be read: %ld rows skipped (the first: %s)", st->path,
			    st->skipped, st->first_problem);
	else
		cli_set_err(err, errlen, "%s: nothing could be read: no rows of samples after its header", st->path);
	return EXIT_USAGE;
}

int report_read_text(const char *path, FILE *f, unsigned model_flags, double period_s, gpumon_model **out,
		     char *notice, size_t nlen, char *err, size_t errlen)
{
	struct csv_state *st = calloc(1, sizeof *st);
	char *line = malloc(MAX_LINE + 2);
	*out = NULL;
	if (notice && nlen)
		notice[0] = 0;
	if (!st || !line) {
		free(st);
		free(line);
		cli_set_err(err, errlen, "out of memory");
		return EXIT_OTHER;
	}
	st->path = path;
	st->flags = model_flags;
	st->period_s = period_s > 0 ? period_s : 1;
	st->period_assumed = !(period_s > 0);
	int rc = read_lines(st, f, line, err, errlen);
	free(line);
	if (!rc && (name_losses(st) != GPUMON_OK || name_period(st, notice, nlen) != GPUMON_OK ||
		    name_order(st) != GPUMON_OK)) {
		cli_set_err(err, errlen, "out of memory");
		rc = EXIT_OTHER;
	}
	if (rc)
		gpumon_model_destroy(st->m);
	else
		*out = st->m;
	free(st->header_line);
	free(st);
	return rc;
}

int report_csv_model(const char *path, FILE *f, unsigned model_flags, gpumon_model **out, char *err, size_t errlen)
{
	return report_read_text(path, f, model_flags, 0, out, NULL, 0, err, errlen);
}
