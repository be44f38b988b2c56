/* SPDX-License-Identifier: MIT */
/* cmd_fit.c — `gpumon fit -- CMD ... {batch} ...`: the largest batch that fits a GPU as it is now,
 * found before the real run. Runs the unmodified job a few steps at a few small batch sizes, each
 * under `gpumon run --steps N` (the inside view gives the allocator's figures, NVML the job's), reads
 * each recording with the library's model, and hands the peaks to the library's fit
 * (gpumon_fit_batch, gpumon_fit_next): the sizes to try, the fit, the margin and the answer are the
 * library's; this file runs the jobs and renders. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "fit_dir.h"
#include "run_job.h"

#define MAX_RUNS 12
#define MAX_PROBES 10 /* runs that bisect a bound the fit could not see (a verified answer that failed) */
#define MAX_TRIALS (MAX_RUNS + 1 + MAX_PROBES)
#define PLACEHOLDER "{batch}"

/* The signal that asked fit to stop (Ctrl-C reaches the run and its job too: they stop; fit then
 * starts no other run). */
static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

struct opts {
	const char *gpu;     /* -i / --gpu: N, UUID, bus id or auto (the default) */
	uint64_t batches[MAX_RUNS];
	size_t nbatches;     /* --batch LIST; 0: chosen by the library */
	unsigned steps;      /* --steps: training steps a run takes (default 3) */
	uint64_t first;      /* --first: the first batch tried when none are given (default 1) */
	unsigned runs;       /* --max-runs (default 8) */
	unsigned multiple_of;
	int json, verify, keep, verbose;
	char **cmd;          /* the job, its placeholders not yet replaced */
	int ncmd;
};

/* What one run gave, beside what the fit takes. */
struct trial {
	gpumon_fit_run run;
	int status;          /* gpumon run's exit status (0: stopped after its steps) */
	uint64_t steps;      /* distinct steps the job reported */
	int nvml;            /* peak_bytes is NVML's figure of the job; 0: the allocator's reserved */
	int verify;          /* the --verify run */
	int probe;           /* a run bisecting the bound a failed verification found */
	char path[PATH_MAX];
	char log[PATH_MAX];  /* the job's standard error */
};

static void help(void)
{
	printf("Usage: gpumon fit [OPTIONS] -- CMD [ARGS...]   (an argument holds {batch})\n"
	       "The largest batch size that fits a GPU as it is now, found before the real run and\n"
	       "without running it out of memory: runs the unmodified job a few steps at a few small\n"
	       "batch sizes ({batch} in its arguments replaced by each), each under gpumon run --steps\n"
	       "(the inside view reads the allocator; NVML the job's memory), fits\n"
	       "peak = fixed + per_sample x batch (or a square, when the peaks grow faster), and names\n"
	       "the largest batch whose predicted peak and a margin (the fragmentation the runs showed)\n"
	       "fit the GPU's free memory now, co-tenants and the driver's reserve left out.\n\n"
	       "Options:\n"
	       "  -i, --gpu SPEC     the GPU: auto (the most free memory, the default), an index, a\n"
	       "                     UUID or a PCI bus id; the job gets it through CUDA_VISIBLE_DEVICES\n"
	       "  --batch LIST       the batch sizes to measure (comma-separated, at most %d); without\n"
	       "                     it gpumon chooses them from the first run's figures\n"
	       "  --first N          the first batch size tried when gpumon chooses (default 1)\n"
	       "  --max-runs N       at most N runs when gpumon chooses (default 8, at most %d)\n"
	       "  --steps N          training steps each run takes before gpumon stops it (default 3)\n"
	       "  --multiple-of N    the answer is a multiple of N (default 1)\n"
	       "  --verify           run the answer once, and say how its peak compared\n"
	       "  --json             one JSON document (max_batch, predicted_peak_bytes, per_sample_bytes,\n"
	       "                     fixed_bytes, margin_bytes, room_bytes, runs, ...)\n"
	       "  --keep             keep the runs' recordings (their directory is named)\n"
	       "  -v, --verbose      the jobs' standard error as they run\n"
	       "  -h, --help         this help\n"
	       "Never runs a batch predicted not to fit; when the verified answer runs out of memory\n"
	       "anyway, runs below it find the largest batch that runs (to 1 %%).\n"
	       "Exit status: 0 an answer, 1 no batch fits or the peaks do not follow the batch,\n"
	       "2 bad option or no {batch} in the command, 255 a run failed (the job's last lines shown),\n"
	       "128+N stopped by signal N (Ctrl-C stops the run, its job and fit).\n\n"
	       "Examples:\n"
	       "  gpumon fit -- python train.py --batch-size {batch} --max-steps 10\n"
	       "  gpumon fit --batch 4,8,16 --verify -- python train.py --bs={batch}\n",
	       MAX_RUNS, MAX_RUNS);
}

static int parse_count(const char *opt, const char *v, unsigned long lo, unsigned long hi, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 10);
	if (end == v || *end || v[0] == '-' || errno || x < lo || x > hi) {
		cli_error("fit: %s '%s': expected a whole number from %lu to %lu", opt, v, lo, hi);
		return EXIT_USAGE;
	}
	*out = x;
	return EXIT_OK;
}

static int parse_batches(const char *v, struct opts *o)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", v);
	o->nbatches = 0;
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (o->nbatches == MAX_RUNS) {
			cli_error("fit: --batch: at most %d sizes", MAX_RUNS);
			return EXIT_USAGE;
		}
		if (parse_count("--batch", t, 1, 1000000000, &o->batches[o->nbatches]))
			return EXIT_USAGE;
		o->nbatches++;
	}
	if (!o->nbatches) {
		cli_error("fit: --batch '%s': expected sizes such as 4,8,16", v);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Parses argv into *o. Returns -1 after printing help, EXIT_USAGE after a usage error, else 0. */
static int parse(int argc, char **argv, struct opts *o)
{
	int i;
	uint64_t x;
	for (i = 1; i < argc; i++) {
		int bad = 0, rc = EXIT_OK;
		const char *v;
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if (!strcmp(argv[i], "--json")) {
			o->json = 1;
		} else if (!strcmp(argv[i], "--verify")) {
			o->verify = 1;
		} else if (!strcmp(argv[i], "--keep")) {
			o->keep = 1;
		} else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			o->verbose = 1;
		} else if ((v = cli_option_value(argc, argv, &i, "--gpu", "-i", &bad))) {
			o->gpu = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--batch", NULL, &bad))) {
			rc = parse_batches(v, o);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--first", NULL, &bad))) {
			rc = parse_count("--first", v, 1, 1000000000, &o->first);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--max-runs", NULL, &bad))) {
			if (!(rc = parse_count("--max-runs", v, 2, MAX_RUNS, &x)))
				o->runs = (unsigned)x;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--steps", NULL, &bad))) {
			if (!(rc = parse_count("--steps", v, 1, 1000, &x)))
				o->steps = (unsigned)x;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--multiple-of", NULL, &bad))) {
			if (!(rc = parse_count("--multiple-of", v, 1, 1000000, &x)))
				o->multiple_of = (unsigned)x;
		} else if (!bad && argv[i][0] != '-') {
			break; /* the command, without -- */
		} else {
			if (!bad)
				cli_error("fit: unknown option '%s' (see gpumon fit --help)", argv[i]);
			return EXIT_USAGE;
		}
		if (bad || rc)
			return EXIT_USAGE;
	}
	o->cmd = argv + i;
	o->ncmd = argc - i;
	if (!o->ncmd) {
		cli_error("fit: no command: gpumon fit [OPTIONS] -- CMD ... {batch} ...");
		return EXIT_USAGE;
	}
	int holes = 0;
	for (int k = 0; k < o->ncmd; k++)
		holes += strstr(o->cmd[k], PLACEHOLDER) != NULL;
	if (!holes) {
		cli_error("fit: the command has no %s: put it where the batch size goes (--batch-size %s)",
			  PLACEHOLDER, PLACEHOLDER);
		return EXIT_USAGE;
	}
	return 0;
}

/* ---- one run ----------------------------------------------------------------------------------- */

/* s with every {batch} replaced by the batch; NULL when out of memory. */
static char *with_batch(const char *s, uint64_t batch)
{
	char num[24];
	size_t n = 0, len = strlen(s);
	snprintf(num, sizeof num, "%llu", (unsigned long long)batch);
	for (const char *p = s; (p = strstr(p, PLACEHOLDER)); p += strlen(PLACEHOLDER))
		n++;
	char *out = malloc(len + n * strlen(num) + 1), *w = out;
	if (!out)
		return NULL;
	for (const char *p = s, *h; *p; p = h + strlen(PLACEHOLDER)) {
		if (!(h = strstr(p, PLACEHOLDER))) {
			strcpy(w, p);
			return out;
		}
		memcpy(w, p, (size_t)(h - p));
		w += h - p;
		strcpy(w, num);
		w += strlen(num);
	}
	*w = 0;
	return out;
}

/* Runs `gpumon run -q --steps N --gpu UUID -o t->path -- CMD(batch)`: the job's standard output
 * goes nowhere, its standard error to t->log (and here with -v). Returns 0 with t->status set, or
 * an exit status (the error said). */
static int run_once(const struct opts *o, const char *gpu, const char *dir, struct trial *t)
{
	char self[PATH_MAX], steps[16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		cli_error("fit: cannot find this program (/proc/self/exe): %s", strerror(errno));
		return EXIT_OTHER;
	}
	self[n] = 0;
	snprintf(steps, sizeof steps, "%u", o->steps);
	const char *what = t->verify ? "-verify" : t->probe ? "-probe" : "";
	snprintf(t->path, sizeof t->path, "%s/batch-%llu%s.gpumon", dir, (unsigned long long)t->run.batch, what);
	snprintf(t->log, sizeof t->log, "%s/batch-%llu%s.stderr", dir, (unsigned long long)t->run.batch, what);
	char **argv = calloc((size_t)o->ncmd + 12, sizeof *argv);
	int k = 0, rc = EXIT_OK;
	if (!argv)
		goto nomem;
	argv[k++] = self;
	argv[k++] = "run";
	argv[k++] = "-q";
	argv[k++] = "--steps";
	argv[k++] = steps;
	argv[k++] = "--gpu";
	argv[k++] = (char *)gpu;
	argv[k++] = "-o";
	argv[k++] = t->path;
	argv[k++] = "--";
	for (int i = 0; i < o->ncmd; i++)
		if (!(argv[k++] = with_batch(o->cmd[i], (uint64_t)t->run.batch)))
			goto nomem;
	fflush(NULL);
	pid_t parent = getpid(), pid = fork();
	if (pid < 0) {
		cli_error("fit: cannot start a run: %s", strerror(errno));
		rc = EXIT_OTHER;
	} else if (pid == 0) {
		/* fit killed (kill -9): the run is told as by Ctrl-C, and stops its job, not left running */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
			_exit(128 + SIGTERM);
		int out = open("/dev/null", O_WRONLY), err = open(t->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (out >= 0)
			dup2(out, STDOUT_FILENO);
		if (err >= 0 && !o->verbose)
			dup2(err, STDERR_FILENO);
		execv(self, argv);
		_exit(127);
	} else {
		int ws;
		while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
			;
		t->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + (WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	}
	for (int i = 10; i < k; i++)
		free(argv[i]);
	free(argv);
	return rc;
nomem:
	for (int i = 10; argv && i < k; i++)
		free(argv[i]);
	free(argv);
	cli_error("out of memory");
	return EXIT_OTHER;
}

/* Reads a run's recording: the job's peak (NVML's figure of its processes, else the allocator's
 * reserved), the allocator's peaks, its steps, whether it ran out of memory. Returns 0, or an exit
 * status (the error said). */
static int read_run(struct trial *t)
{
	gpumon_reader *r = NULL;
	gpumon_model *m = NULL;
	int st = gpumon_reader_create(t->path, &r);
	if (st != GPUMON_OK) {
		cli_error("fit: the run at batch %.0f left no readable recording: %s", t->run.batch,
			  r && gpumon_reader_errmsg(r)[0] ? gpumon_reader_errmsg(r) : gpumon_strerror(st));
		gpumon_reader_destroy(r);
		return EXIT_OTHER;
	}
	gpumon_model_config cfg = GPUMON_CONFIG_INIT(gpumon_model_config);
	cfg.meta = gpumon_reader_meta(r);
	cfg.source = t->path;
	cfg.source_type = "recording";
	if ((st = gpumon_model_create(&cfg, &m)) == GPUMON_OK) {
		gpumon_model_load(m, r);
		gpumon_model_finish(m, 0, -1);
	}
	if (st != GPUMON_OK) {
		cli_error("out of memory");
		gpumon_reader_destroy(r);
		return EXIT_OTHER;
	}
	int what, dev;
	gpumon_peak pk;
	gpumon_model_oom oom;
	gpumon_fit_measure fm = {.size = sizeof fm, .batch = t->run.batch};
	gpumon_model_framework_peak(m, &fm.allocated_peak_bytes, &fm.reserved_peak_bytes, &t->steps);
	if (gpumon_model_peak(m, &what, &dev, &pk, NULL, 0, NULL) == GPUMON_OK && what == GPUMON_PEAK_JOB)
		fm.nvml_peak_bytes = pk.bytes;
	fm.failed = gpumon_model_oom_get(m, &oom) == GPUMON_OK;
	gpumon_fit_run_from(&fm, &t->run); /* the run's peak is the library's rule */
	t->nvml = fm.nvml_peak_bytes && t->run.peak_bytes == fm.nvml_peak_bytes;
	gpumon_model_destroy(m);
	gpumon_reader_destroy(r);
	return EXIT_OK;
}

/* The last line of the job's standard error, for a run that failed ("" when none). */
static void last_line(const char *path, char *out, size_t len)
{
	char buf[4096];
	out[0] = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(buf, sizeof buf, f)) {
		buf[strcspn(buf, "\r\n")] = 0;
		if (buf[0])
			cli_safe_text(out, len, buf);
	}
	fclose(f);
}

/* ---- the GPU ----------------------------------------------------------------------------------- */

/* The GPU's free memory now: what the job may take (co-tenants and the driver's reserve are out). */
static int room_now(gpumon *g, unsigned dev, uint64_t *room)
{
	gpumon_device_sample s;
	int st = gpumon_device_sample_read(g, dev, GPUMON_F_MEMORY, &s);
	if (st != GPUMON_OK) {
		cli_error("fit: GPU %u: %s", dev, gpumon_errmsg(g));
		return cli_exit_status(st);
	}
	/* between runs the job holds nothing: its room is the free memory, by the library's rule */
	gpumon_job_room_input in = {.size = sizeof in, .free_known = (s.present & GPUMON_F_MEMORY) != 0,
				    .free_bytes = s.memory_free_bytes};
	gpumon_job_room jr = {.size = sizeof jr};
	if (gpumon_job_room_get(&in, &jr) != GPUMON_OK) {
		cli_error("fit: GPU %u: the driver does not tell its free memory", dev);
		return EXIT_OTHER;
	}
	*room = jr.room_bytes;
	return EXIT_OK;
}

/* ---- output ------------------------------------------------------------------------------------ */

static double predicted(const gpumon_fit *f, double b)
{
	return f->fixed_bytes + f->per_sample_bytes * b + f->per_sample2_bytes * b * b;
}

static const char *shape_name(int shape)
{
	return shape == GPUMON_FIT_LINEAR ? "linear" : shape == GPUMON_FIT_QUADRATIC ? "quadratic" : "none";
}

static void print_text(const gpumon_device_info *gi, uint64_t room, const struct trial *t, size_t n, const gpumon_fit *f)
{
	char a[32], b[32], c[32], d[32], e[96];
	if (f->shape != GPUMON_FIT_NONE && f->max_batch) {
		cli_format_bytes(a, sizeof a, f->predicted_peak_bytes);
		cli_format_bytes(b, sizeof b, f->margin_bytes);
		cli_format_bytes(c, sizeof c, room);
		printf("batch %llu fits GPU %u (%s) as it is now: predicted peak %s + %s margin of %s free\n",
		       (unsigned long long)f->max_batch, gi->index, gi->name, a, b, c);
	} else {
		printf("no batch size can be named for GPU %u (%s)%s%s\n", gi->index, gi->name, f->note[0] ? ": " : "",
		       f->note);
	}
	if (f->shape != GPUMON_FIT_NONE) {
		cli_format_bytes(a, sizeof a, (uint64_t)(f->fixed_bytes > 0 ? f->fixed_bytes : 0));
		cli_format_bytes(b, sizeof b, (uint64_t)(f->per_sample_bytes > 0 ? f->per_sample_bytes : 0));
		if (f->shape == GPUMON_FIT_QUADRATIC) {
			cli_format_bytes(c, sizeof c, (uint64_t)(f->per_sample2_bytes > 0 ? f->per_sample2_bytes : 0));
			printf("  peak = %s + %s x batch + %s x batch^2", a, b, c);
		} else {
			printf("  peak = %s + %s x batch", a, b);
		}
		printf(", the runs within %.1f %% of it\n", f->misfit * 100);
	}
	if (f->note[0] && f->shape != GPUMON_FIT_NONE && f->max_batch)
		printf("  %s\n", f->note);
	printf("  %7s %6s %12s %12s %12s %12s  %s\n", "BATCH", "STEPS", "PEAK", "ALLOCATED", "RESERVED", "PREDICTED",
	       "RUN");
	for (size_t i = 0; i < n; i++) {
		cli_format_bytes(a, sizeof a, t[i].run.peak_bytes);
		snprintf(b, sizeof b, "n/a");
		snprintf(c, sizeof c, "n/a");
		snprintf(d, sizeof d, "n/a");
		if (t[i].run.allocated_peak_bytes)
			cli_format_bytes(b, sizeof b, t[i].run.allocated_peak_bytes);
		if (t[i].run.reserved_peak_bytes)
			cli_format_bytes(c, sizeof c, t[i].run.reserved_peak_bytes);
		if (f->shape != GPUMON_FIT_NONE)
			cli_format_bytes(d, sizeof d, (uint64_t)predicted(f, t[i].run.batch));
		if (t[i].run.failed)
			snprintf(e, sizeof e, "out of memory");
		else
			snprintf(e, sizeof e, "%s%s", t[i].nvml ? "" : "peak: the allocator's reserved (NVML: no job process)",
				 t[i].verify ? (t[i].nvml ? "the answer, verified" : "; the answer, verified")
				 : t[i].probe ? (t[i].nvml ? "bisecting" : "; bisecting") : "");
		printf("  %7.0f %6llu %12s %12s %12s %12s  %s\n", t[i].run.batch, (unsigned long long)t[i].steps, a, b, c,
		       d, e);
	}
}

static json_t *num_or_null(uint64_t v, int known)
{
	return known ? json_integer((json_int_t)v) : json_null();
}

static int print_json(const gpumon_device_info *gi, uint64_t room, const struct trial *t, size_t n, const gpumon_fit *f)
{
	int none = f->shape == GPUMON_FIT_NONE;
	json_t *runs = json_array();
	for (size_t i = 0; runs && i < n; i++) {
		json_t *r = json_pack("{s:I, s:I, s:i, s:I, s:s, s:o, s:o, s:b, s:b, s:b, s:o}", "batch", (json_int_t)t[i].run.batch, "steps",
				      (json_int_t)t[i].steps, "status", t[i].status, "peak_bytes",
				      (json_int_t)t[i].run.peak_bytes, "peak_source", t[i].nvml ? "nvml" : "allocator",
				      "allocated_peak_bytes", num_or_null(t[i].run.allocated_peak_bytes, t[i].run.allocated_peak_bytes != 0),
				      "reserved_peak_bytes", num_or_null(t[i].run.reserved_peak_bytes, t[i].run.reserved_peak_bytes != 0),
				      "out_of_memory", t[i].run.failed, "verify", t[i].verify, "probe", t[i].probe,
				      "predicted_peak_bytes",
				      num_or_null((uint64_t)predicted(f, t[i].run.batch), !none));
		if (!r || json_array_append_new(runs, r)) {
			json_decref(runs);
			runs = NULL;
		}
	}
	json_t *doc = runs ? json_pack("{s:{s:i, s:s, s:s}, s:I, s:o, s:o, s:o, s:o, s:o, s:s, s:f, s:I, s:b, s:o, s:o}",
				       "gpu", "index", (int)gi->index, "name", gi->name, "uuid", gi->uuid, "room_bytes",
				       (json_int_t)room, "max_batch", num_or_null(f->max_batch, !none && f->max_batch),
				       "predicted_peak_bytes", num_or_null(f->predicted_peak_bytes, !none && f->max_batch),
				       "fixed_bytes", none ? json_null() : json_real(f->fixed_bytes),
				       "per_sample_bytes", none ? json_null() : json_real(f->per_sample_bytes),
				       "per_sample2_bytes", none ? json_null() : json_real(f->per_sample2_bytes),
				       "shape", shape_name(f->shape), "misfit", f->misfit, "margin_bytes",
				       (json_int_t)f->margin_bytes, "extrapolated", f->extrapolated, "note",
				       f->note[0] ? json_string(f->note) : json_null(), "runs", runs)
			   : NULL;
	char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(doc);
	if (!text)
		return -1;
	puts(text);
	free(text);
	return 0;
}

/* ---- the command ------------------------------------------------------------------------------- */

static void remove_dir(const char *dir, const struct trial *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char p[PATH_MAX + 8];
		unlink(t[i].path);
		unlink(t[i].log);
		snprintf(p, sizeof p, "%s-wal", t[i].path);
		unlink(p);
		snprintf(p, sizeof p, "%s-shm", t[i].path);
		unlink(p);
	}
	char owner[PATH_MAX + 32];
	fit_dir_owner_path(dir, owner, sizeof owner);
	unlink(owner);
	rmdir(dir);
}

/* Runs the job at batch as trial *n (the answer verified, or a probe bisecting a bound) and reads
 * its recording; the trial is counted, and its run is runs[*n], even when that fails, so that its
 * files are removed with the others. Returns 0, or an exit status (the error said). */
static int trial_run(const struct opts *o, const char *uuid, const char *dir, struct trial *t, gpumon_fit_run *runs,
		     size_t *n, uint64_t batch, int verify, int probe)
{
	struct trial *tr = &t[*n];
	memset(tr, 0, sizeof *tr);
	tr->run.batch = (double)batch;
	tr->verify = verify;
	tr->probe = probe;
	int rc = run_once(o, uuid, dir, tr);
	if (rc == EXIT_OK)
		rc = read_run(tr);
	runs[(*n)++] = tr->run;
	return rc;
}

/* Measures the runs, fitting after each; returns the exit status (0: an answer). */
static int measure(const struct opts *o, gpumon *g, unsigned dev, const char *uuid, const char *dir,
		   struct trial *t, size_t *n, gpumon_fit *f, uint64_t *room)
{
	gpumon_fit_config cfg = GPUMON_CONFIG_INIT(gpumon_fit_config);
	gpumon_fit_run runs[MAX_TRIALS];
	cfg.multiple_of = o->multiple_of;
	for (size_t k = 0; k < (o->nbatches ? o->nbatches : o->runs); k++) {
		if (stop_signal)
			return 128 + stop_signal;
		int rc = room_now(g, dev, room);
		if (rc)
			return rc;
		cfg.room_bytes = *room;
		uint64_t batch = o->nbatches ? o->batches[k] : gpumon_fit_next(runs, *n, &cfg, o->first);
		if (!batch)
			break;
		if (*n >= 2 && gpumon_fit_batch(runs, *n, &cfg, f) == GPUMON_OK && f->shape != GPUMON_FIT_NONE &&
		    batch > f->max_batch) { /* never a batch predicted not to fit */
			if (!o->json)
				fprintf(stderr, "gpumon: fit: batch %llu not run: predicted not to fit (the answer is %llu)\n",
					(unsigned long long)batch, (unsigned long long)f->max_batch);
			continue;
		}
		if ((rc = trial_run(o, uuid, dir, t, runs, n, batch, 0, 0)))
			return rc;
		const struct trial *tr = &t[*n - 1];
		if (stop_signal)
			return 128 + stop_signal;
		if (!tr->steps && !tr->run.failed) { /* died before a step: nothing to fit */
			char line[512];
			last_line(tr->log, line, sizeof line);
			cli_error("fit: the job at batch %llu ended (status %d) before it reported a step%s%s",
				  (unsigned long long)batch, tr->status, line[0] ? ": " : " (it said nothing)", line);
			return EXIT_OTHER;
		}
	}
	cfg.room_bytes = *room;
	int st = gpumon_fit_batch(runs, *n, &cfg, f);
	if (st != GPUMON_OK) {
		cli_error("fit: %s", gpumon_strerror(st));
		return EXIT_OTHER;
	}
	if (o->verify && !stop_signal && f->shape != GPUMON_FIT_NONE && f->max_batch && *n < MAX_TRIALS) {
		int rc = trial_run(o, uuid, dir, t, runs, n, f->max_batch, 1, 0);
		if (rc)
			return rc;
		if (t[*n - 1].run.failed) { /* a finding: the bound is bisected, and the answer is the largest that ran */
			if (!o->json)
				fprintf(stderr, "gpumon: fit: batch %llu ran out of memory when verified: finding the "
						"largest batch that runs below it\n", (unsigned long long)f->max_batch);
			uint64_t next;
			while (!stop_signal && *n < MAX_TRIALS && room_now(g, dev, room) == EXIT_OK &&
			       (cfg.room_bytes = *room, next = gpumon_fit_next(runs, *n, &cfg, o->first)) != 0)
				if ((rc = trial_run(o, uuid, dir, t, runs, n, next, 0, 1)))
					return rc;
			if ((st = gpumon_fit_batch(runs, *n, &cfg, f)) != GPUMON_OK)
				return EXIT_OTHER;
		}
	}
	return f->shape != GPUMON_FIT_NONE && f->max_batch ? EXIT_OK : 1;
}

int cmd_fit(int argc, char **argv)
{
	struct opts o = {.gpu = "auto", .steps = 3, .first = 1, .runs = 8, .multiple_of = 1};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	gpumon *g = cli_open(&rc);
	if (!g)
		return rc;
	struct sigaction sa = {.sa_handler = on_stop};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	unsigned dev;
	gpumon_device_info gi;
	if ((rc = run_job_choose_gpu(g, o.gpu, &dev)) != EXIT_OK) {
		gpumon_destroy(g);
		return rc;
	}
	gpumon_device_info_get(g, dev, &gi);
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX];
	tmp = tmp && *tmp ? tmp : "/tmp";
	fit_dir_sweep(tmp); /* the runs of a fit killed before it could remove them */
	if (fit_dir_make(tmp, dir, sizeof dir) != 0) {
		cli_error("fit: cannot make a directory for the runs (%s): %s", dir, strerror(errno));
		gpumon_destroy(g);
		return EXIT_OTHER;
	}
	struct trial *t = calloc(MAX_TRIALS, sizeof *t);
	size_t n = 0;
	uint64_t room = 0;
	gpumon_fit f = GPUMON_CONFIG_INIT(gpumon_fit);
	if (!t) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
	} else {
		char uuid[96]; /* what the runs' --gpu names: the UUID, else the index */
		if (gi.present & GPUMON_INFO_UUID)
			snprintf(uuid, sizeof uuid, "%s", gi.uuid);
		else
			snprintf(uuid, sizeof uuid, "%u", gi.index);
		rc = measure(&o, g, dev, uuid, dir, t, &n, &f, &room);
		if (stop_signal)
			cli_error("fit: stopped by SIG%s after %zu run%s: no answer", sigabbrev_np(stop_signal), n,
				  n == 1 ? "" : "s");
		else if (rc == EXIT_OK || rc == 1) {
			if (o.json ? print_json(&gi, room, t, n, &f) != 0 : (print_text(&gi, room, t, n, &f), 0)) {
				cli_error("out of memory");
				rc = EXIT_OTHER;
			}
		}
	}
	if (o.keep && t) {
		fit_dir_keep(dir);
		fprintf(stderr, "gpumon: fit: the runs' recordings are in %s\n", dir);
	} else if (t) {
		remove_dir(dir, t, n);
	}
	free(t);
	gpumon_destroy(g);
	return rc;
}
