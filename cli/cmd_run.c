/* SPDX-License-Identifier: MIT */
/* cmd_run.c — `gpumon run [OPTIONS] -- CMD [ARGS...]`: launches a job with the allocator settings
 * asked for, records the GPUs, the job's process tree, its neighbours and what the job itself
 * reports over GPUMON_RUN_SOCKET into one recording, enforces --limit, and exits with the job's
 * status. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run_alloc.h"
#include "run_job.h"
#include "run_oom.h"
#include "run_socket.h"
#include "run_state.h"
#include "run_stderr.h"
#include "run_tree.h"
#include "run_verdict.h"

extern char **environ;

#define TREE_PERIOD_NS 100000000ull
#define COMMIT_PERIOD_NS 200000000ull
#define RECBUF 256
#define STDERR_GRACE_MS 200 /* how long the job's stderr may stay open after it ended */

static void help(void)
{
	printf("Usage: gpumon run [OPTIONS] [--] CMD [ARGS...]\n"
	       "Runs CMD with the GPU allocator settings asked for, records GPU memory, the job's\n"
	       "process tree, the other processes on its GPUs and what the job reports over\n"
	       "GPUMON_RUN_SOCKET into one recording, and exits with CMD's status.\n\n"
	       "Allocator settings (turned into each framework's variables; notes say what has no effect):\n"
	       "  --limit SIZE           hard cap per process (Paddle; JAX as a fraction; NVML-enforced for all)\n"
	       "  --initial SIZE         initial pool (Paddle naive_best_fit)\n"
	       "  --no-prealloc          do not pre-allocate (JAX, TensorFlow, Paddle auto_growth)\n"
	       "  --growth               grow on demand (the same variables as --no-prealloc)\n"
	       "  --fraction F           0 < F <= 1 of GPU memory (JAX; Paddle naive_best_fit)\n"
	       "  --expandable           PyTorch expandable segments\n"
	       "  --max-split SIZE       PyTorch max_split_size_mb\n"
	       "  --gc-threshold F       PyTorch garbage_collection_threshold, 0 < F < 1\n"
	       "  --paddle-strategy S    auto_growth, naive_best_fit or thread_local\n"
	       "  --jax-platform-allocator  XLA_PYTHON_CLIENT_ALLOCATOR=platform (frees at once; slow)\n"
	       "  --framework F          auto, torch, paddle, jax, tf or all (default all: they do not conflict)\n"
	       "Job:\n"
	       "  -o FILE                recording (default ./gpumon-run-YYYYmmdd-HHMMSS.gpumon; never overwritten)\n"
	       "  --gpu auto|N|UUID|BUS  give the job this GPU (auto: the most free memory) through\n"
	       "                         CUDA_VISIBLE_DEVICES; without it every GPU is sampled\n"
	       "  --interval MS          sampling period (default 10, at least 1)\n"
	       "  --on-exceed warn|term|kill  when a job process holds more than --limit (default warn)\n"
	       "  -q, --quiet            no notes at start, no leak alerts, no summary at the end\n"
	       "  -h, --help             this help\n"
	       "SIZE: bytes, or with K, M, G, T (binary; 8G = 8GiB). Exit status: CMD's (128+N when a\n"
	       "signal N killed it; 127 not found, 126 not executable); 2 bad option or -o FILE exists,\n"
	       "255 recording error.\n"
	       "The protocol of GPUMON_RUN_SOCKET is in docs/run-protocol.md. CMD's stderr passes through\n"
	       "gpumon unchanged (a pseudo-terminal when gpumon's is a terminal) and is scanned for\n"
	       "out-of-memory messages: after an out-of-memory death the summary names the likely cause.\n");
}

static int bad_value(const char *opt, const char *v, const char *want)
{
	cli_error("run: %s '%s': %s", opt, v, want);
	return EXIT_USAGE;
}

/* One option with a value; returns 1 when argv[*i] was it, -1 after an error. */
static int value_opt(struct opts *o, int argc, char **argv, int *i, int *rc)
{
	int bad = 0;
	const char *v;
	struct run_alloc_opts *a = &o->alloc;
#define OPT(l, s) (v = cli_option_value(argc, argv, i, l, s, &bad)) != NULL
	if (OPT("--limit", NULL)) {
		if (run_alloc_parse_size(v, &a->limit_bytes))
			*rc = bad_value("--limit", v, "expected a size such as 8G or 8192M");
	} else if (OPT("--initial", NULL)) {
		if (run_alloc_parse_size(v, &a->initial_bytes))
			*rc = bad_value("--initial", v, "expected a size such as 2G");
	} else if (OPT("--max-split", NULL)) {
		if (run_alloc_parse_size(v, &a->max_split_bytes))
			*rc = bad_value("--max-split", v, "expected a size such as 128M");
	} else if (OPT("--fraction", NULL)) {
		if (run_alloc_parse_fraction(v, 1, 1, &a->fraction))
			*rc = bad_value("--fraction", v, "expected a number with 0 < F <= 1");
	} else if (OPT("--gc-threshold", NULL)) {
		if (run_alloc_parse_fraction(v, 1, 0, &a->gc_threshold))
			*rc = bad_value("--gc-threshold", v, "expected a number with 0 < F < 1");
	} else if (OPT("--framework", NULL)) {
		o->framework = v;
		if (strcmp(v, "auto") && !(a->frameworks = run_alloc_framework_bits(v)))
			*rc = bad_value("--framework", v, "expected auto, torch, paddle, jax, tf or all");
	} else if (OPT("--paddle-strategy", NULL)) {
		a->paddle_strategy = v;
	} else if (OPT("--output", "-o")) {
		o->out = v;
	} else if (OPT("--gpu", NULL)) {
		o->gpu = v;
	} else if (OPT("--interval", NULL)) {
		char *end;
		unsigned long ms = strtoul(v, &end, 10);
		if (*end || end == v || ms < 1 || ms > 60000)
			*rc = bad_value("--interval", v, "expected milliseconds, 1 to 60000");
		o->interval_ms = (unsigned)ms;
	} else if (OPT("--on-exceed", NULL)) {
		o->on_exceed_set = 1;
		if (!strcmp(v, "warn") || !strcmp(v, "term") || !strcmp(v, "kill"))
			o->on_exceed = v[0] == 'w' ? EXCEED_WARN : v[0] == 't' ? EXCEED_TERM : EXCEED_KILL;
		else
			*rc = bad_value("--on-exceed", v, "expected warn, term or kill");
	} else {
		if (bad)
			*rc = EXIT_USAGE;
		return bad ? -1 : 0;
	}
#undef OPT
	return *rc ? -1 : 1;
}

/* Parses the options; returns EXIT_OK, EXIT_USAGE, or -1 after --help. */
static int parse(int argc, char **argv, struct opts *o)
{
	int i, rc = EXIT_OK;
	o->interval_ms = 10;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int r;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help();
			return -1;
		}
		if (!strcmp(a, "--no-prealloc"))
			o->alloc.no_prealloc = 1;
		else if (!strcmp(a, "--growth"))
			o->alloc.growth = 1;
		else if (!strcmp(a, "--expandable"))
			o->alloc.expandable = 1;
		else if (!strcmp(a, "--jax-platform-allocator"))
			o->alloc.jax_platform_allocator = 1;
		else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
			o->quiet = 1;
		else if ((r = value_opt(o, argc, argv, &i, &rc)) < 0)
			return rc;
		else if (r == 0) {
			cli_error("run: unknown option '%s' (see gpumon run --help)", a);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		cli_error("run: no command given (gpumon run [OPTIONS] -- CMD [ARGS...])");
		return EXIT_USAGE;
	}
	o->cmd = argv + i;
	if (o->on_exceed_set && !o->alloc.limit_bytes) {
		cli_error("run: --on-exceed needs --limit");
		return EXIT_USAGE;
	}
	char err[256];
	if (run_alloc_check(&o->alloc, err, sizeof err)) {
		cli_error("run: %s", err);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* ---- the recording: every failure stops it, once, and never the job ------------------------- */

static void rec_check(struct run *r, int st)
{
	if (st == GPUMON_OK || r->rec_failed)
		return;
	r->rec_failed = 1;
	cli_error("run: recording stopped: %s; the job keeps running (what was written stays readable)",
		  gpumon_recording_errmsg(r->rec));
}

void run_event(struct run *r, uint64_t t, const char *kind, const char *fmt, ...)
{
	char text[1200];
	va_list ap;
	if (r->rec_failed || !r->rec)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	rec_check(r, cli_record_event(r->rec, t, kind, text));
}

void run_leak_alert(struct run *r, uint64_t t, const char *text)
{
	run_event(r, t, "alert", "leak suspected: %s", text);
	if (!r->o->quiet)
		fprintf(stderr, "gpumon: leak suspected: %s (at %.1f s)\n", text,
			t > r->start_ns ? (double)(t - r->start_ns) / 1e9 : 0.0);
}

/* ---- the job's processes -------------------------------------------------------------------- */

int run_job_has(const struct run *r, unsigned pid)
{
	size_t lo = 0, hi = r->njob;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if ((unsigned)r->job[mid] == pid)
			return 1;
		if ((unsigned)r->job[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Adds a pid to the job's set (kept sorted) and records that it joined. */
static void job_add(struct run *r, pid_t pid, uint64_t t)
{
	size_t i = 0;
	while (i < r->njob && r->job[i] < pid)
		i++;
	pid_t *n = realloc(r->job, (r->njob + 1) * sizeof *n);
	if (!n)
		return;
	r->job = n;
	memmove(n + i + 1, n + i, (r->njob - i) * sizeof *n);
	n[i] = pid;
	r->njob++;
	char cmd[256];
	cli_read_cmdline(pid, cmd, sizeof cmd);
	/* the job's process tree, one "job" event per pid as it joins (docs/run-protocol.md) */
	if (pid == r->child)
		run_event(r, t, "job", "pid %d: the command", (int)pid);
	else
		run_event(r, t, "job", "pid %d: %s", (int)pid, cmd);
}

static void recount(struct run *r, unsigned dev, uint64_t t);

/* Scans the tree below gpumon (a subreaper, so orphaned grandchildren stay below it). */
static void refresh_tree(struct run *r, uint64_t t)
{
	run_tree_free(&r->tree);
	run_tree_scan(getpid(), 0, &r->tree);
	for (size_t i = 0; i < r->tree.n; i++)
		if (r->tree.pids[i] != getpid() && !run_job_has(r, (unsigned)r->tree.pids[i]))
			job_add(r, r->tree.pids[i], t);
	if (r->child > 0 && !run_job_has(r, (unsigned)r->child))
		job_add(r, r->child, t);
	int changed = 0;
	for (size_t i = 0; i < r->nprocs; i++)
		if (!r->procs[i].job && run_job_has(r, r->procs[i].pid)) {
			r->procs[i].job = 1;
			changed = 1;
		}
	for (unsigned d = 0; changed && d < r->ngpus; d++)
		if (r->gpus[d].sampled)
			recount(r, d, t);
	r->last_tree_ns = t;
}

/* Sends sig to every process of the job. */
static void signal_job(struct run *r, int sig)
{
	for (size_t i = 0; i < r->tree.n; i++)
		if (r->tree.pids[i] != getpid())
			kill(r->tree.pids[i], sig);
	if (!r->done)
		kill(r->child, sig);
}

/* --limit at the NVML level: what one job process holds on all GPUs together. */
static void enforce(struct run *r, unsigned pid, uint64_t t)
{
	uint64_t total = 0;
	char a[32], b[32];
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid)
			total += r->procs[i].used;
	if (!r->o->alloc.limit_bytes || total <= r->o->alloc.limit_bytes || r->acted)
		return;
	for (size_t i = 0; i < r->nwarned; i++)
		if (r->warned[i] == pid)
			return;
	unsigned *w = realloc(r->warned, (r->nwarned + 1) * sizeof *w);
	if (w) {
		r->warned = w;
		w[r->nwarned++] = pid;
	}
	const char *act = r->o->on_exceed == EXCEED_TERM   ? "sending SIGTERM to the job"
			  : r->o->on_exceed == EXCEED_KILL ? "sending SIGKILL to the job"
							   : "warning only (--on-exceed warn)";
	cli_format_bytes(a, sizeof a, total);
	cli_format_bytes(b, sizeof b, r->o->alloc.limit_bytes);
	cli_error("run: job process %u holds %s of GPU memory, over --limit %s: %s", pid, a, b, act);
	run_event(r, t, "alert", "pid %u holds %llu bytes, over the limit of %llu: %s", pid,
		  (unsigned long long)total, (unsigned long long)r->o->alloc.limit_bytes, act);
	char text[160];
	snprintf(text, sizeof text, "memory at the limit: job process %u held %s, over --limit %s", pid, a, b);
	run_oom_signal(r, t, NULL, text);
	if (r->o->on_exceed != EXCEED_WARN) {
		r->acted = 1;
		signal_job(r, r->o->on_exceed == EXCEED_TERM ? SIGTERM : SIGKILL);
	}
}

/* ---- accounting per GPU ----------------------------------------------------------------------- */

/* Sums the job's and the others' memory on dev; follows the job's peak and average. */
static void recount(struct run *r, unsigned dev, uint64_t t)
{
	struct gpu_acc *a = &r->gpus[dev];
	uint64_t job = 0, others = 0;
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].dev == dev)
			*(r->procs[i].job ? &job : &others) += r->procs[i].used;
	if (t > a->last_t && a->last_t)
		a->job_integral += (long double)a->job_now * (long double)(t - a->last_t);
	a->last_t = t > a->last_t ? t : a->last_t;
	a->job_now = job;
	a->others_now = others;
	if (others > a->others_peak)
		a->others_peak = others;
	if (job > a->job_peak) {
		a->job_peak = job;
		a->job_peak_t = t;
		a->others_at_peak = others;
	}
	run_oom_job_changed(r, t);
}

static void on_process(struct run *r, const gpumon_record *rec)
{
	unsigned pid = rec->process.pid;
	size_t i;
	for (i = 0; i < r->nprocs; i++)
		if (r->procs[i].dev == rec->dev && r->procs[i].pid == pid)
			break;
	if (rec->kind == GPUMON_REC_PROCESS_GONE) {
		if (i < r->nprocs)
			r->procs[i] = r->procs[--r->nprocs];
	} else {
		if (i == r->nprocs) {
			struct proc_mem *n = realloc(r->procs, (r->nprocs + 1) * sizeof *n);
			if (!n)
				return;
			r->procs = n;
			r->nprocs++;
			/* a pid new to the GPU: is it the job's? a fresh scan says (at most every 10 ms) */
			if (!run_job_has(r, pid) && rec->t_ns > r->last_tree_ns + TREE_PERIOD_NS / 10)
				refresh_tree(r, rec->t_ns);
			r->procs[i] = (struct proc_mem){rec->dev, pid, 0, run_job_has(r, pid)};
		}
		r->procs[i].used = (rec->process.flags & GPUMON_PROC_USED_KNOWN) ? rec->process.used_bytes : 0;
	}
	recount(r, rec->dev, rec->t_ns);
	if (rec->kind == GPUMON_REC_PROCESS && i < r->nprocs && r->procs[i].job)
		enforce(r, pid, rec->t_ns);
}

static void on_records(struct run *r, const gpumon_record *recs, size_t n)
{
	if (!r->rec_failed)
		rec_check(r, gpumon_recording_write(r->rec, recs, n));
	for (size_t k = 0; k < n; k++) {
		const gpumon_record *rec = &recs[k];
		if (rec->dev >= r->ngpus)
			continue;
		run_oom_on_record(r, rec);
		if (rec->kind == GPUMON_REC_DEVICE && rec->used_max_bytes > r->gpus[rec->dev].used_peak) {
			r->gpus[rec->dev].used_peak = rec->used_max_bytes;
			r->gpus[rec->dev].used_peak_t = rec->used_max_t_ns;
		} else if (rec->kind == GPUMON_REC_PROCESS || rec->kind == GPUMON_REC_PROCESS_GONE) {
			on_process(r, rec);
		}
	}
}

/* Takes what the sampler has queued; returns the number of records. */
static size_t drain_sampler(struct run *r, gpumon_sampler *s, int timeout_ms)
{
	static gpumon_record buf[RECBUF];
	size_t n = 0, total = 0;
	for (int round = 0; round < 64; round++) {
		if (gpumon_sampler_poll(s, buf, RECBUF, &n, round ? 0 : timeout_ms) != GPUMON_OK || n == 0)
			break;
		on_records(r, buf, n);
		total += n;
		if (n < RECBUF)
			break;
	}
	return total;
}

/* ---- what the job reports over the socket ------------------------------------------------------ */

/* The sender's wall-clock time on our monotonic clock; the receive time when absent or absurd. */
static uint64_t msg_time(const struct run *r, const struct run_msg *m)
{
	uint64_t now = cli_now_ns();
	if (!(m->has & RUN_HAS_T))
		return now;
	double d = ((double)r->start_ns + (m->t - r->start_wall) * 1e9);
	if (d < 0 || d > (double)now + 60e9 || d < (double)now - 3600e9)
		return now;
	return (uint64_t)d;
}

static struct fw_acc *fw_of(struct run *r, unsigned pid)
{
	for (size_t i = 0; i < r->nfw; i++)
		if (r->fw[i].pid == pid)
			return &r->fw[i];
	if (r->nfw == MAX_FW)
		return NULL;
	memset(&r->fw[r->nfw], 0, sizeof r->fw[0]);
	r->fw[r->nfw].pid = pid;
	r->fw[r->nfw].device = -1;
	return &r->fw[r->nfw++];
}

static void on_msg(void *ctx, const struct run_msg *m, unsigned peer_pid)
{
	struct run *r = ctx;
	unsigned pid = (m->has & RUN_HAS_PID) ? m->pid : peer_pid;
	uint64_t t = msg_time(r, m);
	struct fw_acc *f = fw_of(r, pid);
	if (m->type == RUN_MSG_HELLO) {
		if (f) {
			snprintf(f->framework, sizeof f->framework, "%s", m->framework);
			snprintf(f->version, sizeof f->version, "%s", m->fw_version);
		}
		run_event(r, t, "note", "hello from pid %u: protocol %d, %s %s", pid, m->v,
			  m->framework[0] ? m->framework : "unknown framework", m->fw_version);
	} else if (m->type == RUN_MSG_SAMPLE) {
		gpumon_framework_sample s = {
			.t_ns = t, .pid = pid, .device = (m->has & RUN_HAS_DEVICE) ? m->device : -1,
			.step = (m->has & RUN_HAS_STEP) ? m->step : -1,
			.allocated_bytes = m->allocated, .reserved_bytes = m->reserved,
			.max_allocated_bytes = m->max_allocated,
			.allocated_known = !!(m->has & RUN_HAS_ALLOCATED),
			.reserved_known = !!(m->has & RUN_HAS_RESERVED),
			.max_allocated_known = !!(m->has & RUN_HAS_MAX_ALLOCATED)};
		if (f)
			snprintf(s.framework, sizeof s.framework, "%s", f->framework);
		if (!r->rec_failed)
			rec_check(r, gpumon_recording_write(r->rec, &(gpumon_record){.kind = GPUMON_REC_FRAMEWORK,
										   .t_ns = s.t_ns, .framework = s}, 1));
		if (f) { /* out of memory at the job's card (the smallest, when it has several) */
			/* out of memory at the card's size or --limit, or at the cap the code gave its allocator */
			uint64_t ceiling = run_alloc_ceiling(&r->o->alloc);
			if ((m->has & RUN_HAS_LIMIT) && m->limit && (!ceiling || m->limit < ceiling))
				ceiling = m->limit;
			run_verdict_add(&f->leak, &s, ceiling);
			run_summary_fw_sample(r, f, &s);
			char what[64], text[300];
			snprintf(what, sizeof what, "the allocated floor of pid %u", pid);
			if (!f->alerted && run_verdict_alert(f->leak, what, text, sizeof text)) {
				f->alerted = 1;
				run_leak_alert(r, t, text);
			}
		}
		uint64_t peak = s.max_allocated_known && m->max_allocated > m->allocated ? m->max_allocated : m->allocated;
		if (f && (s.allocated_known || s.max_allocated_known) && peak >= f->peak_allocated) {
			f->peak_allocated = peak;
			f->has_allocated = 1;
		}
		if (f && s.reserved_known && m->reserved >= f->peak_reserved) {
			f->peak_reserved = m->reserved;
			f->has_reserved = 1;
		}
	} else if (m->type == RUN_MSG_STEP) {
		run_event(r, t, "step", "%lld", (long long)m->step);
	} else if (m->type == RUN_MSG_MARKER) {
		run_event(r, t, "marker", "%s", m->text);
	}
}

/* ---- the run ------------------------------------------------------------------------------------ */

/* Settings as the recording stores them: one NAME=VALUE per line. */
static char *settings_text(const struct run *r, const char *cvd)
{
	size_t cap = 256 + (cvd ? strlen(cvd) : 0);
	for (size_t i = 0; i < r->plan.nvars; i++)
		cap += strlen(r->plan.vars[i].name) + strlen(r->plan.vars[i].value) + 2;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < r->plan.nvars; i++)
		n += (size_t)snprintf(s + n, cap - n, "%s=%s\n", r->plan.vars[i].name, r->plan.vars[i].value);
	if (cvd)
		n += (size_t)snprintf(s + n, cap - n, "CUDA_VISIBLE_DEVICES=%s\n", cvd);
	n += (size_t)snprintf(s + n, cap - n, "gpumon.interval_ms=%u\n", r->o->interval_ms);
	if (r->o->alloc.limit_bytes)
		snprintf(s + n, cap - n, "gpumon.limit_bytes=%llu\ngpumon.on_exceed=%s\n",
			 (unsigned long long)r->o->alloc.limit_bytes,
			 r->o->on_exceed == EXCEED_TERM ? "term" : r->o->on_exceed == EXCEED_KILL ? "kill" : "warn");
	return s;
}

/* An out-of-memory message on the job's stderr. */
static void on_oom_line(void *ctx, uint64_t t, const char *framework, const char *line)
{
	run_oom_signal(ctx, t, framework, line);
}

static void loop(struct run *r, gpumon_sampler *smp, int wake)
{
	static const char *const names[32] = {[SIGINT] = "SIGINT", [SIGTERM] = "SIGTERM",
					      [SIGHUP] = "SIGHUP", [SIGQUIT] = "SIGQUIT"};
	int wait_ms = r->o->interval_ms < 10 ? 1 : 5;
	while (!r->done) {
		struct pollfd p = {.fd = wake, .events = POLLIN};
		int woke = r->srv ? run_server_poll(r->srv, wake, wait_ms, on_msg, r) : poll(&p, 1, wait_ms) > 0;
		uint64_t t = cli_now_ns();
		if (woke) {
			unsigned sigs = run_job_wake(wake);
			for (int s = 1; s < 32; s++)
				if (sigs & (1u << s))
					run_event(r, t, "note", "gpumon passed %s to the job", names[s] ? names[s] : "a signal");
		}
		r->done = run_job_reap(r->child, &r->status);
		if (r->done)
			run_stderr_job_ended();
		drain_sampler(r, smp, 0);
		run_stderr_take(r->err, on_oom_line, r);
		run_oom_tick(r, t);
		if (t - r->last_tree_ns >= TREE_PERIOD_NS && !r->done)
			refresh_tree(r, t);
		if (t - r->last_commit_ns >= COMMIT_PERIOD_NS && !r->rec_failed) {
			rec_check(r, gpumon_recording_commit(r->rec));
			r->last_commit_ns = t;
		}
	}
	r->end_ns = cli_now_ns();
	/* the last samples (one period and a little) and whatever the job sent before it ended */
	drain_sampler(r, smp, (int)r->o->interval_ms * 2 + 5);
	for (int round = 0; r->srv && round < 50; round++) {
		struct run_server_stats a, b;
		run_server_stats_get(r->srv, &a);
		run_server_poll(r->srv, -1, 0, on_msg, r);
		run_server_stats_get(r->srv, &b);
		if (!memcmp(&a, &b, sizeof a) && round > 1)
			break;
	}
	drain_sampler(r, smp, 0);
}

/* The GPU, the plan and the recording's path: everything decided before the job is forked. */
static int prepare(struct run *r, char *cvd, size_t cvdlen, const char **path, char *defpath, size_t deflen)
{
	struct opts *o = r->o;
	unsigned dev = 0;
	int rc;
	r->ngpus = gpumon_device_count(r->g);
	r->gpus = calloc(r->ngpus ? r->ngpus : 1, sizeof *r->gpus);
	if (!r->gpus)
		return EXIT_OTHER;
	if (o->gpu && (rc = run_job_choose_gpu(r->g, o->gpu, &dev)) != EXIT_OK)
		return rc;
	for (unsigned d = 0; d < r->ngpus; d++) {
		gpumon_device_info info;
		gpumon_device_info_get(r->g, d, &info);
		r->gpus[d].sampled = !o->gpu || d == dev;
		/* JAX's fraction from --limit: of the job's GPU, or of the smallest when all are used */
		if (r->gpus[d].sampled && (info.present & GPUMON_INFO_MEMORY_TOTAL) &&
		    (!o->alloc.gpu_total_bytes || info.memory_total_bytes < o->alloc.gpu_total_bytes))
			o->alloc.gpu_total_bytes = info.memory_total_bytes;
		if (o->gpu && d == dev) {
			if (!(info.present & GPUMON_INFO_UUID)) {
				cli_error("run: --gpu %s: the driver does not tell the GPU's UUID", o->gpu);
				return EXIT_OTHER;
			}
			snprintf(cvd, cvdlen, "%s", info.uuid);
			o->alloc.gpu_spec = o->gpu;
			o->alloc.visible_devices = cvd;
		}
	}
	if (run_alloc_build(&o->alloc, environ, &r->plan))
		return EXIT_OTHER;
	if (!o->out) {
		time_t now = time(NULL);
		struct tm tm;
		strftime(defpath, deflen, "gpumon-run-%Y%m%d-%H%M%S.gpumon", localtime_r(&now, &tm));
	}
	*path = o->out ? o->out : defpath;
	char err[256];
	if (run_server_open(&r->srv, err, sizeof err))
		cli_error("run: no GPUMON_RUN_SOCKET for the job (%s); sampling goes on", err);
	return EXIT_OK;
}

/* Creates the recording (the job is forked and waiting, so its pid is known) and the sampler. */
static int start_recording(struct run *r, const char *path, const char *cvd, gpumon_sampler **smp)
{
	char *command = run_job_quote(r->o->cmd), *settings = settings_text(r, r->o->gpu ? cvd : NULL);
	gpumon_run_meta info = {.size = sizeof info, .kind = "run", .command = command, .settings = settings, .job_pid = (unsigned)r->child};
	int st = command && settings ? gpumon_recording_create(r->g, path, &info, &r->rec) : GPUMON_E_NOMEM;
	free(command);
	free(settings);
	if (st != GPUMON_OK) {
		cli_error("run: %s", r->rec ? gpumon_recording_errmsg(r->rec) : gpumon_strerror(st));
		gpumon_recording_destroy(r->rec);
		r->rec = NULL; /* never removed: it may be someone else's file */
		/* as gpumon record: an existing file is refused like a bad option */
		return st == GPUMON_E_INVAL || st == GPUMON_E_EXISTS ? EXIT_USAGE : EXIT_OTHER;
	}
	unsigned *devs = calloc(r->ngpus ? r->ngpus : 1, sizeof *devs), n = 0;
	if (!devs)
		return EXIT_OTHER;
	for (unsigned d = 0; d < r->ngpus; d++)
		if (r->gpus[d].sampled)
			devs[n++] = d;
	gpumon_sampler_config cfg = {.size = sizeof cfg, .period_us = r->o->interval_ms * 1000, .devices = devs, .ndevices = n};
	st = gpumon_sampler_create(r->g, &cfg, smp);
	free(devs);
	r->smp = *smp;
	if (st != GPUMON_OK) {
		cli_error("run: cannot start sampling: %s", gpumon_errmsg(r->g));
		return EXIT_OTHER;
	}
	return EXIT_OK;
}

/* Runs the job to its end; returns its exit status. */
static int run_job(struct run *r, gpumon_sampler *smp, int wake)
{
	if (!r->o->quiet)
		for (size_t i = 0; i < r->plan.nnotes; i++)
			fprintf(stderr, "%s: note: %s\n", cli_progname, r->plan.notes[i]);
	struct timespec wall;
	r->start_ns = cli_now_ns();
	clock_gettime(CLOCK_REALTIME, &wall);
	r->start_wall = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
	for (size_t i = 0; i < r->plan.nnotes; i++)
		run_event(r, r->start_ns, "note", "%s", r->plan.notes[i]);
	run_event(r, r->start_ns, "note", "job started: pid %d", (int)r->child);
	run_job_release(1);
	refresh_tree(r, cli_now_ns());
	loop(r, smp, wake);
	/* the job's last words on stderr (an out-of-memory message is often among them), then the
	   forensics while the flight recorder still runs */
	run_stderr_close(r->err, STDERR_GRACE_MS, on_oom_line, r);
	r->err = NULL;
	drain_sampler(r, smp, 0);
	run_oom_finish(r);
	run_event(r, r->end_ns, "exit", "%d", r->status);
	return r->status;
}

int cmd_run(int argc, char **argv)
{
	struct opts o = {0};
	struct run r = {.o = &o, .child = -1, .status = 255};
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	if (!run_job_command_exists(o.cmd[0])) {
		cli_error("run: %s: command not found", o.cmd[0]);
		return 127;
	}
	/* a file size limit (ulimit -f) stops the recording like a full disk, not gpumon; the job
	   gets the default action back before exec */
	signal(SIGXFSZ, SIG_IGN);
	if (o.framework && !strcmp(o.framework, "auto"))
		o.alloc.frameworks = run_job_detect(o.cmd);
	if (!(r.g = cli_open(&rc)))
		return rc;
	char cvd[96] = "", defpath[64];
	const char *path = NULL;
	gpumon_sampler *smp = NULL;
	char **env = NULL;
	int wake = -1;
	rc = prepare(&r, cvd, sizeof cvd, &path, defpath, sizeof defpath);
	if (rc == EXIT_OK && !(env = run_job_env(environ, r.plan.vars, r.plan.nvars, o.gpu ? cvd : NULL,
						  r.srv ? run_server_path(r.srv) : NULL)))
		rc = EXIT_OTHER;
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], "CUDA_VISIBLE_DEVICES=", 21))
			r.cvd_set = snprintf(r.cvd, sizeof r.cvd, "%s", env[i] + 21) >= 0;
	if (rc == EXIT_OK && run_oom_create(&r))
		cli_error("run: out of memory for the forensics; the job runs without them");
	/* the job's stderr through gpumon, scanned for out-of-memory messages; the job is forked
	   first and waits, so that the recording names its pid */
	int err_fd = -1;
	if (rc == EXIT_OK)
		r.err = run_stderr_open(&err_fd);
	if (rc == EXIT_OK && (wake = run_job_start(o.cmd, env, err_fd, &r.child)) < 0) {
		cli_error("run: cannot start the job: %s", strerror(errno));
		rc = EXIT_OTHER;
	}
	if (r.err && r.child <= 0)
		close(err_fd);
	if (r.err && (r.child <= 0 || run_stderr_start(r.err, err_fd, r.child))) {
		run_stderr_close(r.err, 0, on_oom_line, &r);
		r.err = NULL;
	}
	run_job_env_free(env);
	if (rc == EXIT_OK && (rc = start_recording(&r, path, cvd, &smp)) != EXIT_OK)
		run_job_release(0); /* the job leaves without running anything */
	if (rc == EXIT_OK)
		rc = run_job(&r, smp, wake);
	else if (r.child > 0)
		waitpid(r.child, NULL, 0);
	run_job_finish(wake);
	run_stderr_close(r.err, STDERR_GRACE_MS, on_oom_line, &r);
	gpumon_sampler_stats ss = {0};
	if (smp) {
		gpumon_sampler_stats_get(smp, &ss);
		gpumon_sampler_destroy(smp);
	}
	if (r.rec && r.end_ns) {
		int st = gpumon_recording_finish(r.rec, r.status);
		gpumon_recording_destroy(r.rec);
		if (st != GPUMON_OK && !r.rec_failed)
			cli_error("run: the recording could not be completed: %s", gpumon_strerror(st));
		if (!o.quiet)
			run_summary_print(&r, path, &ss);
	} else if (r.rec) {
		gpumon_recording_destroy(r.rec);
		unlink(path); /* ours, and nothing ran: leave no empty recording behind */
	}
	run_server_close(r.srv);
	gpumon_destroy(r.g);
	run_alloc_plan_free(&r.plan);
	run_tree_free(&r.tree);
	free(r.gpus);
	free(r.procs);
	free(r.job);
	for (size_t i = 0; i < r.nfw; i++)
		gpumon_leak_destroy(r.fw[i].leak);
	free(r.warned);
	run_oom_destroy(&r);
	return rc;
}
