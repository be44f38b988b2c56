/* SPDX-License-Identifier: MIT */
/* cmd_run.c — `gpumon run [OPTIONS] -- CMD [ARGS...]`: launches a job with the allocator settings
 * asked for and emits every record of the run — the sampler's, what the job reports over
 * GPUMON_RUN_SOCKET, its process tree, its out-of-memory messages, events — to one recording and
 * to the run model, which gives the live alerts and the end summary. Enforces --limit and --steps
 * (run_stop.c) and exits with the job's status. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "run_job.h"
#include "run_socket.h"
#include "run_state.h"
#include "run_stderr.h"
#include "run_summary.h"
#include "run_tree.h"

extern char **environ;

#define TREE_PERIOD_NS 100000000ull
#define COMMIT_PERIOD_NS 200000000ull
#define RECBUF 256
#define STDERR_GRACE_MS 200 /* how long the job's stderr may stay open after it ended */
#define JOBBUF 16

/* ---- one emit path: the recording, then the model ------------------------------------------- */

/* A failed write stops the recording, once, and never the job; the model is still fed. */
static void rec_check(struct run *r, int st)
{
	if (st == GPUMON_OK || r->rec_failed)
		return;
	r->rec_failed = 1;
	cli_error("run: recording stopped: %s; the job keeps running (what was written stays readable)",
		  gpumon_recording_errmsg(r->rec));
}

static void tell_alerts(struct run *r);
static void act_on_limits(struct run *r);

/* Every record of the run goes through here (run_state.h): written to the recording, then given to
 * the model, with the same t_ns, so that a replay of the recording is the run the model saw. */
void run_emit(struct run *r, const gpumon_record *recs, size_t n)
{
	if (!n)
		return;
	if (r->rec && !r->rec_failed)
		rec_check(r, gpumon_recording_write(r->rec, recs, n));
	if (r->model && gpumon_model_add(r->model, recs, n) != GPUMON_OK && !r->model_failed) {
		r->model_failed = 1;
		cli_error("run: %s (the summary misses it; the recording has it)", gpumon_model_errmsg(r->model));
	}
	tell_alerts(r);
	act_on_limits(r);
}

void run_event(struct run *r, uint64_t t, const char *kind, const char *fmt, ...)
{
	char text[1200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = t, .event_kind = kind, .event_text = text};
	run_emit(r, &e, 1);
}

/* Room for a whole message: PyTorch's, some 650 bytes, has its figures in the second half. */
void run_oom_event(struct run *r, uint64_t t, const char *fmt, ...)
{
	char text[RUN_STDERR_TEXT_CAP + 64];
	va_list ap;
	if (r->oom_events >= MAX_OOM_EVENTS)
		return;
	r->oom_events++;
	va_start(ap, fmt);
	vsnprintf(text, sizeof text, fmt, ap);
	va_end(ap);
	gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = t, .event_kind = GPUMON_EVENT_OOM, .event_text = text};
	run_emit(r, &e, 1);
}

/* The model's new alerts: one line each on stderr, in the library's words (as every front end words
 * it), and an `alert` event at the alert's own moment, which marks it as told live in a replay of
 * the recording. */
static void tell_alerts(struct run *r)
{
	size_t first = r->alerts_told, n = r->model ? gpumon_model_alerts(r->model, first, NULL, 0) : 0;
	if (!n)
		return;
	gpumon_alert *a = calloc(n, sizeof *a);
	if (!a)
		return; /* out of memory: tried again after the next record */
	gpumon_model_alerts(r->model, first, a, n);
	r->alerts_told = first + n; /* first: the events below come back through run_emit() */
	for (size_t i = 0; i < n; i++) {
		char words[800];
		if (a[i].kind != GPUMON_ALERT_LEAK)
			continue;
		gpumon_words_alert(r->model, &a[i], words, sizeof words);
		if (!r->o->quiet)
			fprintf(stderr, "%s: leak suspected: %s\n", cli_progname, words);
		run_event(r, a[i].t_ns, GPUMON_EVENT_ALERT, "leak suspected: %s", words);
	}
	free(a);
}

/* ---- the job's processes -------------------------------------------------------------------- */

static int job_has(const struct run *r, unsigned pid)
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

/* Adds a pid to the job's set (kept sorted) and a JOB record for it to recs, whose processes are
 * procs (as many). */
static void job_add(struct run *r, pid_t pid, gpumon_record *recs, gpumon_process *procs, size_t *n)
{
	size_t i = 0;
	while (i < r->njob && r->job[i] < pid)
		i++;
	pid_t *a = realloc(r->job, (r->njob + 1) * sizeof *a);
	if (!a)
		return;
	r->job = a;
	memmove(a + i + 1, a + i, (r->njob - i) * sizeof *a);
	a[i] = pid;
	r->njob++;
	/* just after the newest figure emitted: every figure sampled later counts as the job's, in the
	   model now and in a replay, which reads the recording in time order */
	procs[*n] = (gpumon_process){.pid = (unsigned)pid};
	recs[*n] = (gpumon_record){.kind = GPUMON_REC_JOB, .t_ns = r->fed_ns + 1, .process = &procs[*n]};
	(*n)++;
	if (*n == JOBBUF) {
		run_emit(r, recs, *n);
		*n = 0;
	}
}

/* The tree below gpumon: it is a subreaper, so orphaned grandchildren stay below it. */
void run_refresh_tree(struct run *r)
{
	gpumon_record recs[JOBBUF];
	gpumon_process procs[JOBBUF];
	size_t n = 0;
	run_tree_free(&r->tree);
	run_tree_scan(getpid(), 0, &r->tree);
	for (size_t i = 0; i < r->tree.n; i++)
		if (r->tree.pids[i] != getpid() && !job_has(r, (unsigned)r->tree.pids[i]))
			job_add(r, r->tree.pids[i], recs, procs, &n);
	if (r->child > 0 && !job_has(r, (unsigned)r->child))
		job_add(r, r->child, recs, procs, &n);
	run_emit(r, recs, n);
	r->last_tree_ns = cli_now_ns();
}

static long find_proc(const struct run *r, unsigned dev, unsigned pid)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].dev == dev && r->procs[i].pid == pid)
			return (long)i;
	return -1;
}

/* Keeps the (GPU, pid) pairs listed now, so that a pid new to a GPU is noticed (on_batch). */
static void track(struct run *r, const gpumon_record *rec)
{
	long i = find_proc(r, rec->dev, rec->process->pid);
	if (rec->kind == GPUMON_REC_PROCESS_GONE) {
		if (i >= 0)
			r->procs[i] = r->procs[--r->nprocs];
		return;
	}
	if (i >= 0)
		return;
	struct gpu_pid *p = realloc(r->procs, (r->nprocs + 1) * sizeof *p);
	if (!p)
		return;
	r->procs = p;
	r->procs[r->nprocs++] = (struct gpu_pid){.dev = rec->dev, .pid = rec->process->pid};
}

/* The model's new LIMIT alerts (a job process over --limit), acted on as --on-exceed says. */
static void act_on_limits(struct run *r)
{
	size_t first = r->limits_seen, n = r->model ? gpumon_model_alerts(r->model, first, NULL, 0) : 0;
	gpumon_alert *a = n ? calloc(n, sizeof *a) : NULL;
	if (!a)
		return; /* none, or out of memory: tried again after the next record */
	gpumon_model_alerts(r->model, first, a, n);
	r->limits_seen = first + n; /* first: what run_enforce emits comes back through run_emit() */
	for (size_t i = 0; i < n; i++)
		if (a[i].kind == GPUMON_ALERT_LIMIT)
			run_enforce(r, &a[i]);
	free(a);
}

/* ---- the sampler ----------------------------------------------------------------------------- */

static void on_batch(struct run *r, const gpumon_record *recs, size_t n)
{
	/* a pid new to a GPU may be a new process of the job: a fresh scan (at most every 10 ms) names it
	   the job's before its figures count */
	for (size_t k = 0; k < n; k++)
		if (recs[k].kind == GPUMON_REC_PROCESS && !job_has(r, recs[k].process->pid) &&
		    find_proc(r, recs[k].dev, recs[k].process->pid) < 0) {
			if (cli_now_ns() > r->last_tree_ns + TREE_PERIOD_NS / 10)
				run_refresh_tree(r);
			break;
		}
	run_emit(r, recs, n);
	for (size_t k = 0; k < n; k++) {
		if (recs[k].t_ns > r->fed_ns)
			r->fed_ns = recs[k].t_ns;
		if (recs[k].kind == GPUMON_REC_PROCESS || recs[k].kind == GPUMON_REC_PROCESS_GONE)
			track(r, &recs[k]);
	}
}

/* Takes what the sampler has queued; returns the number of records. */
static size_t drain_sampler(struct run *r, int timeout_ms)
{
	static gpumon_record buf[RECBUF];
	size_t n = 0, total = 0;
	for (int round = 0; r->smp && round < 64; round++) {
		if (gpumon_sampler_poll(r->smp, buf, RECBUF, &n, round ? 0 : timeout_ms) != GPUMON_OK || n == 0)
			break;
		on_batch(r, buf, n);
		total += n;
		if (n < RECBUF)
			break;
	}
	return total;
}

/* ---- what the job reports over the socket, and says on its stderr ---------------------------- */

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

/* The framework name pid gave in its hello (a new entry when set), or NULL. */
static struct fw_name *fw_of(struct run *r, unsigned pid, int add)
{
	for (size_t i = 0; i < r->nfw; i++)
		if (r->fw[i].pid == pid)
			return &r->fw[i];
	if (!add || r->nfw == MAX_FW)
		return NULL;
	r->fw[r->nfw] = (struct fw_name){.pid = pid};
	return &r->fw[r->nfw++];
}

static void on_sample(struct run *r, const struct run_msg *m, unsigned pid, uint64_t t)
{
	gpumon_record rec = {.kind = GPUMON_REC_FRAMEWORK, .t_ns = t};
	gpumon_framework_sample *s = &rec.framework;
	const struct fw_name *f = fw_of(r, pid, 0);
	*s = (gpumon_framework_sample){
		.t_ns = t, .pid = pid, .device = (m->has & RUN_HAS_DEVICE) ? m->device : -1,
		.step = (m->has & RUN_HAS_STEP) ? m->step : -1,
		.allocated_bytes = m->allocated, .reserved_bytes = m->reserved, .max_allocated_bytes = m->max_allocated,
		.allocated_known = !!(m->has & RUN_HAS_ALLOCATED), .reserved_known = !!(m->has & RUN_HAS_RESERVED),
		.max_allocated_known = !!(m->has & RUN_HAS_MAX_ALLOCATED),
		/* the allocator's cap the code set: the steps left count to it when it is the nearest */
		.limit_bytes = (m->has & RUN_HAS_LIMIT) ? m->limit : 0};
	if (f)
		snprintf(s->framework, sizeof s->framework, "%s", f->framework);
	run_emit(r, &rec, 1); /* first: the sample that completes the last step is recorded */
	if (m->has & RUN_HAS_STEP)
		run_steps_seen(r, m->step);
}

static int on_msg(void *ctx, const struct run_msg *m, unsigned peer_pid)
{
	struct run *r = ctx;
	unsigned pid = (m->has & RUN_HAS_PID) ? m->pid : peer_pid;
	uint64_t t = msg_time(r, m);
	struct fw_name *f;
	if (m->type == RUN_MSG_HELLO) {
		f = fw_of(r, pid, 1);
		if (f) {
			snprintf(f->framework, sizeof f->framework, "%s", m->framework);
			snprintf(f->version, sizeof f->version, "%s", m->fw_version);
		}
		run_event(r, t, GPUMON_EVENT_NOTE, "hello from pid %u: protocol %d, %s %s", pid, m->v,
		      m->framework[0] ? m->framework : "unknown framework", m->fw_version);
	} else if (m->type == RUN_MSG_SAMPLE) {
		on_sample(r, m, pid, t);
	} else if (m->type == RUN_MSG_STEP) {
		run_event(r, t, GPUMON_EVENT_STEP, "%lld", (long long)m->step);
		if (m->has & RUN_HAS_STEP)
			run_steps_seen(r, m->step);
	} else if (m->type == RUN_MSG_MARKER) {
		run_event(r, t, GPUMON_EVENT_MARKER, "%s", m->text);
	} else if (m->type == RUN_MSG_INSIDE && !m->fw_version[0] && (f = fw_of(r, pid, 0)) &&
		   !strcmp(f->framework, m->framework)) {
		struct run_msg with = *m; /* the version its hello gave: "inside view on for pid N: torch 2.11" */
		snprintf(with.fw_version, sizeof with.fw_version, "%s", f->version);
		return run_inside_msg(r, &with, pid, t);
	} else {
		return run_inside_msg(r, m, pid, t); /* the monitor inside the job: oom, snapshot, inside */
	}
	return 0;
}

/* A connection the socket could not keep loses what the job sends over it: said at once (once, -q
 * or not) and in the recording; the summary counts them all. */
static void tell_refusals(struct run *r)
{
	struct run_server_stats st;
	char why[96];
	if (!r->srv || r->refusal_told)
		return;
	run_server_stats_get(r->srv, &st);
	if (!st.refused)
		return;
	r->refusal_told = 1;
	run_server_refusal_reason(why, sizeof why, st.refused_errno, 0);
	cli_error("run: socket: a connection refused: %s; what the job sends over it is lost (the summary counts "
		  "them)", why);
	run_event(r, cli_now_ns(), GPUMON_EVENT_NOTE, "socket: a connection refused: %s", why);
}

/* The lines the stderr scanner found: an out-of-memory message becomes an `oom` event
 * "<Framework>: <line>", a line with figures around one an oom_detail event (the line). */
static void take_oom_lines(struct run *r)
{
	struct run_stderr_line l[8];
	size_t n;
	while ((n = run_stderr_take(r->err, l, sizeof l / sizeof l[0])) > 0)
		for (size_t i = 0; i < n; i++) {
			gpumon_record e = {.kind = GPUMON_REC_EVENT, .t_ns = l[i].t_ns, .event_kind = GPUMON_EVENT_OOM_DETAIL,
					   .event_text = l[i].line};
			if (l[i].kind == RUN_STDERR_OOM)
				run_oom_event(r, l[i].t_ns, "%s: %s", l[i].framework, l[i].line);
			else
				run_emit(r, &e, 1);
		}
}

/* ---- the run ------------------------------------------------------------------------------------ */

/* Settings as the recording stores them: one NAME=VALUE per line, CUDA_VISIBLE_DEVICES as the job
 * got it (a replay maps the framework's device indexes through it, as the live model does). */
static char *settings_text(const struct run *r)
{
	size_t cap = 320 + strlen(r->cvd);
	for (size_t i = 0; i < r->plan.nvars; i++)
		cap += strlen(r->plan.vars[i].name) + strlen(r->plan.vars[i].value) + 2;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < r->plan.nvars; i++)
		n += (size_t)snprintf(s + n, cap - n, "%s=%s\n", r->plan.vars[i].name, r->plan.vars[i].value);
	if (r->cvd_set)
		n += (size_t)snprintf(s + n, cap - n, "CUDA_VISIBLE_DEVICES=%s\n", r->cvd);
	n += (size_t)snprintf(s + n, cap - n, "gpumon.interval_ms=%u\n", r->o->interval_ms);
	n += (size_t)snprintf(s + n, cap - n, "gpumon.inside=%s\n%s", r->inside.on ? "on" : "off",
			      r->inside.on && r->inside.history ? "gpumon.history=on\n" : "");
	if (r->o->alloc.limit_bytes)
		n += (size_t)snprintf(s + n, cap - n, "gpumon.limit_bytes=%llu\ngpumon.on_exceed=%s\n",
				      (unsigned long long)r->o->alloc.limit_bytes,
				      r->o->on_exceed == EXCEED_TERM   ? "term"
				      : r->o->on_exceed == EXCEED_KILL ? "kill"
								       : "warn");
	if (r->o->steps)
		n += (size_t)snprintf(s + n, cap - n, "gpumon.steps=%u\n", r->o->steps);
	if ((r->o->alloc.limit_bytes && r->o->on_exceed == EXCEED_TERM) || r->o->steps)
		snprintf(s + n, cap - n, "gpumon.term_grace_ms=%llu\n", (unsigned long long)(r->o->term_grace_ns / 1000000));
	return s;
}

static void loop(struct run *r, int wake)
{
	static const char *const names[32] = {[SIGINT] = "SIGINT",   [SIGTERM] = "SIGTERM", [SIGHUP] = "SIGHUP",
					      [SIGQUIT] = "SIGQUIT", [SIGUSR1] = "SIGUSR1", [SIGUSR2] = "SIGUSR2"};
	int wait_ms = r->o->interval_ms < 10 ? 1 : 5;
	while (!r->done) {
		struct pollfd p = {.fd = wake, .events = POLLIN};
		int woke = r->srv ? run_server_poll(r->srv, wake, wait_ms, on_msg, r) : poll(&p, 1, wait_ms) > 0;
		tell_refusals(r);
		run_steps_check(r); /* after the poll: what the job sent with its last step is read */
		uint64_t t = cli_now_ns();
		if (woke) {
			unsigned sigs = run_job_wake(wake);
			for (int s = 1; s < 32; s++)
				if (sigs & (1u << s))
					run_event(r, t, GPUMON_EVENT_NOTE, "gpumon passed %s to the job", names[s] ? names[s] : "a signal");
		}
		r->done = run_job_reap(r->child, &r->status, &r->signal);
		if (r->done)
			run_stderr_job_ended();
		drain_sampler(r, 0);
		take_oom_lines(r);
		if (t - r->last_tree_ns >= TREE_PERIOD_NS && !r->done)
			run_refresh_tree(r);
		run_escalate(r, cli_now_ns());
		if (t - r->last_commit_ns >= COMMIT_PERIOD_NS && r->rec && !r->rec_failed) {
			rec_check(r, gpumon_recording_commit(r->rec));
			r->last_commit_ns = t;
		}
	}
	r->end_ns = cli_now_ns();
	/* the last samples (one period and a little) and whatever the job sent before it ended */
	drain_sampler(r, (int)r->o->interval_ms * 2 + 5);
	for (int round = 0; r->srv && round < 50; round++) {
		struct run_server_stats a, b;
		run_server_stats_get(r->srv, &a);
		run_server_poll(r->srv, -1, 0, on_msg, r);
		run_server_stats_get(r->srv, &b);
		if (!memcmp(&a, &b, sizeof a) && round > 1)
			break;
	}
	tell_refusals(r);
	drain_sampler(r, 0);
}

/* The GPU, the plan and the recording's path: everything decided before the job is forked. */
static int prepare(struct run *r, char *cvd, size_t cvdlen, const char **path, char *defpath, size_t deflen)
{
	struct opts *o = r->o;
	unsigned dev = 0, ngpus = gpumon_device_count(r->g);
	int rc;
	r->sampled = calloc(ngpus ? ngpus : 1, sizeof *r->sampled);
	if (!r->sampled)
		return EXIT_OTHER;
	if (o->gpu && (rc = run_job_choose_gpu(r->g, o->gpu, &dev)) != EXIT_OK)
		return rc;
	for (unsigned d = 0; d < ngpus; d++) {
		gpumon_device_info info;
		gpumon_device_info_get(r->g, d, &info);
		if (o->gpu && d != dev)
			continue;
		r->sampled[r->nsampled++] = d;
		/* JAX's fraction from --limit: of the job's GPU, or of the smallest when all are used */
		if ((info.present & GPUMON_INFO_MEMORY_TOTAL) &&
		    (!o->alloc.gpu_total_bytes || info.memory_total_bytes < o->alloc.gpu_total_bytes))
			o->alloc.gpu_total_bytes = info.memory_total_bytes;
		if (o->gpu) {
			if (!(info.present & GPUMON_INFO_UUID)) {
				cli_error("run: --gpu %s: the driver does not tell the GPU's UUID", o->gpu);
				return EXIT_OTHER;
			}
			snprintf(cvd, cvdlen, "%s", info.uuid);
			o->alloc.gpu_spec = o->gpu;
			o->alloc.visible_devices = cvd;
		}
	}
	if (gpumon_alloc_plan_build(&o->alloc, environ, &r->plan))
		return EXIT_OTHER;
	if (!o->out)
		run_job_default_name(defpath, deflen, 1);
	*path = o->no_record ? NULL : o->out ? o->out : defpath;
	char err[256];
	if (run_server_open(&r->srv, err, sizeof err))
		cli_error("run: no GPUMON_RUN_SOCKET for the job (%s): no inside view; sampling goes on", err);
	return EXIT_OK;
}

/* The job's environment: the allocator's variables, the inside view's (unless --no-inside: its
 * bootstrap is written next to the socket), the GPU (cvd; NULL none) and the socket. NULL when out of
 * memory. */
static char **job_env(struct run *r, const char *cvd)
{
	char err[512];
	r->inside.history = r->o->history;
	if (!r->o->no_inside && r->srv && run_inside_prepare(&r->inside, run_server_dir(r->srv), environ, err, sizeof err))
		cli_error("run: no inside view for the job (%s); sampling goes on", err);
	size_t n = r->plan.nvars + r->inside.nvars;
	gpumon_env_var *vars = calloc(n ? n : 1, sizeof *vars);
	if (!vars)
		return NULL;
	if (r->plan.nvars)
		memcpy(vars, r->plan.vars, r->plan.nvars * sizeof *vars);
	if (r->inside.nvars)
		memcpy(vars + r->plan.nvars, r->inside.vars, r->inside.nvars * sizeof *vars);
	char **env = run_job_env(environ, vars, n, cvd, r->srv ? run_server_path(r->srv) : NULL);
	free(vars);
	return env;
}

/*
 * The run model, with the recording's metadata: its start time is read back from the file, so that
 * the model counts time from the moment a replay of the recording does (the writer takes it
 * itself). guess_ns: the start when the file cannot be read back.
 */
static int start_model(struct run *r, const char *path, const gpumon_run_meta *meta, uint64_t guess_ns)
{
	gpumon_run_meta m = *meta;
	gpumon_reader *rd = NULL;
	m.start_mono_ns = guess_ns;
	if (path && gpumon_reader_create(path, &rd) == GPUMON_OK) {
		const gpumon_run_meta *got = gpumon_reader_meta(rd);
		m.start_mono_ns = got->start_mono_ns ? got->start_mono_ns : guess_ns;
		m.start_wall_ns = got->start_wall_ns;
		m.host = got->host;
		m.driver_version = got->driver_version;
	}
	gpumon_model_config cfg = {.size = sizeof cfg, .meta = &m, .limit_bytes = r->o->alloc.limit_bytes,
				   .cuda_visible_devices = r->cvd_set ? r->cvd : NULL, .source = path};
	int st = gpumon_model_create(&cfg, &r->model); /* copies meta's strings: rd may go */
	gpumon_reader_destroy(rd);
	for (unsigned d = 0; st == GPUMON_OK && d < gpumon_device_count(r->g); d++) {
		gpumon_device_info info;
		if (gpumon_device_info_get(r->g, d, &info) == GPUMON_OK)
			st = gpumon_model_device(r->model, &info);
	}
	if (st != GPUMON_OK) {
		cli_error("run: cannot create the run model: %s", gpumon_strerror(st));
		return EXIT_OTHER;
	}
	r->fed_ns = m.start_mono_ns;
	return EXIT_OK;
}

/* The processes already on the sampled GPUs, listed once before sampling starts, so that the model
 * knows what each held when the GPUs' first figures come (the sampler lists processes just after
 * each GPU's figure): a co-tenant's memory at the start is then not taken for a rise of its own. */
static void first_listing(struct run *r)
{
	uint64_t t = cli_now_ns();
	for (unsigned i = 0; i < r->nsampled; i++) {
		gpumon_process *list = NULL;
		size_t n = 0;
		if (gpumon_process_list(r->g, r->sampled[i], &list, &n) != GPUMON_OK)
			continue;
		for (size_t k = 0; k < n; k++) {
			gpumon_record rec = {.kind = GPUMON_REC_PROCESS, .dev = r->sampled[i], .t_ns = t, .process = &list[k]};
			run_emit(r, &rec, 1);
			track(r, &rec);
		}
		gpumon_free(list);
	}
	r->fed_ns = t;
}

/* Creates the recording at path, exclusively. A default name (path is defpath) found taken — a job
 * started in the same millisecond by this pid's predecessor — moves on to the next name in defpath
 * (a counter), so that no job of a sweep is refused for its name. */
static int create_recording(struct run *r, const char *path, char *defpath, size_t deflen,
			    const gpumon_run_meta *info)
{
	int st = gpumon_recording_create(r->g, path, info, &r->rec);
	for (unsigned attempt = 2; st == GPUMON_E_EXISTS && path == defpath && attempt <= 100; attempt++) {
		gpumon_recording_destroy(r->rec);
		r->rec = NULL;
		run_job_default_name(defpath, deflen, attempt); /* path is defpath: it follows */
		st = gpumon_recording_create(r->g, path, info, &r->rec);
	}
	return st;
}

/* Creates the recording (the job is forked and waiting, so its pid is known; none with
 * --no-record: path NULL), the model and the sampler. defpath: the default name, which may move on
 * when taken. */
static int start_recording(struct run *r, const char *path, char *defpath, size_t deflen)
{
	char *command = run_job_quote(r->o->cmd), *settings = settings_text(r);
	gpumon_run_meta info = {.size = sizeof info, .kind = "run", .command = command, .settings = settings,
				.job_pid = (unsigned)r->child, .exit_status = -1};
	uint64_t guess = cli_now_ns();
	int st = !command || !settings ? GPUMON_E_NOMEM
		 : path ? create_recording(r, path, defpath, deflen, &info) : GPUMON_OK;
	int rc = EXIT_OK;
	if (st != GPUMON_OK) {
		cli_error("run: %s", r->rec ? gpumon_recording_errmsg(r->rec) : gpumon_strerror(st));
		gpumon_recording_destroy(r->rec);
		r->rec = NULL; /* never removed: it may be someone else's file */
		/* as gpumon record: an existing file is refused like a bad option */
		rc = st == GPUMON_E_INVAL || st == GPUMON_E_EXISTS ? EXIT_USAGE : EXIT_OTHER;
	}
	if (rc == EXIT_OK)
		rc = start_model(r, path, &info, guess); /* path NULL: the start is the guess */
	free(command);
	free(settings);
	if (rc != EXIT_OK)
		return rc;
	first_listing(r);
	gpumon_sampler_config cfg = {.size = sizeof cfg, .period_us = r->o->interval_ms * 1000,
				     .devices = r->sampled, .ndevices = r->nsampled};
	if (gpumon_sampler_create(r->g, &cfg, &r->smp) != GPUMON_OK) {
		cli_error("run: cannot start sampling: %s", gpumon_errmsg(r->g));
		return EXIT_OTHER;
	}
	return EXIT_OK;
}

/* Runs the job to its end; returns its exit status (0 when --steps stopped it). */
static int run_job(struct run *r, int wake)
{
	/* the notes of settings without effect; with -v every note (all are in the recording) */
	if (!r->o->quiet)
		for (size_t i = 0; i < r->plan.nnotes; i++)
			if (r->o->verbose || r->plan.loud[i])
				fprintf(stderr, "%s: note: %s\n", cli_progname, r->plan.notes[i]);
	struct timespec wall;
	r->start_ns = cli_now_ns();
	clock_gettime(CLOCK_REALTIME, &wall);
	r->start_wall = (double)wall.tv_sec + (double)wall.tv_nsec / 1e9;
	for (size_t i = 0; i < r->plan.nnotes; i++)
		run_event(r, r->start_ns, GPUMON_EVENT_NOTE, "%s", r->plan.notes[i]);
	run_event(r, r->start_ns, GPUMON_EVENT_NOTE, "job started: pid %d", (int)r->child);
	run_job_release(1);
	run_refresh_tree(r);
	loop(r, wake);
	/* the job's last words on stderr: an out-of-memory message is often among them */
	run_stderr_stop(r->err, STDERR_GRACE_MS);
	take_oom_lines(r);
	drain_sampler(r, 0);
	run_event(r, r->end_ns, "exit", "%d", r->status);
	return r->steps_stopped ? EXIT_OK : r->status; /* it ended because --steps asked it to */
}

static void free_run(struct run *r)
{
	run_server_close(r->srv);
	gpumon_model_destroy(r->model);
	gpumon_destroy(r->g);
	gpumon_alloc_plan_free(&r->plan);
	run_inside_free(&r->inside);
	run_tree_free(&r->tree);
	free(r->sampled);
	free(r->procs);
	free(r->job);
	free(r->steps);
}

int cmd_run(int argc, char **argv)
{
	struct opts o = {0};
	struct run r = {.o = &o, .child = -1, .status = 255};
	int rc = run_opts_parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	if (!run_job_command_exists(o.cmd[0])) {
		cli_error("run: %s: command not found", o.cmd[0]);
		return 127;
	}
	/* a file size limit (ulimit -f) stops the recording like a full disk, not gpumon; the job
	   gets the default action back before exec */
	signal(SIGXFSZ, SIG_IGN);
	run_job_raise_fd_limit();
	if (o.framework && !strcmp(o.framework, "auto"))
		o.alloc.frameworks = run_job_detect(o.cmd);
	if (!(r.g = cli_open(&rc)))
		return rc;
	char cvd[96] = "", defpath[96];
	const char *path = NULL;
	char **env = NULL;
	int wake = -1;
	rc = prepare(&r, cvd, sizeof cvd, &path, defpath, sizeof defpath);
	if (rc == EXIT_OK && !(env = job_env(&r, o.gpu ? cvd : NULL)))
		rc = EXIT_OTHER;
	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], "CUDA_VISIBLE_DEVICES=", 21))
			r.cvd_set = snprintf(r.cvd, sizeof r.cvd, "%s", env[i] + 21) >= 0;
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
		run_stderr_free(r.err);
		r.err = NULL;
	}
	run_job_env_free(env);
	if (rc == EXIT_OK && (rc = start_recording(&r, path, defpath, sizeof defpath)) != EXIT_OK)
		run_job_release(0); /* the job leaves without running anything */
	if (rc == EXIT_OK)
		rc = run_job(&r, wake);
	else if (r.child > 0)
		waitpid(r.child, NULL, 0);
	run_job_finish(wake);
	run_stderr_free(r.err);
	gpumon_sampler_stats ss = {0};
	if (r.smp) {
		gpumon_sampler_stats_get(r.smp, &ss);
		gpumon_sampler_destroy(r.smp);
	}
	if (r.end_ns) { /* the job ran: with a recording or from memory alone (--no-record) */
		uint64_t end = cli_now_ns(); /* the end the recording stores is read the moment after */
		int st = r.rec ? gpumon_recording_finish(r.rec, r.status) : GPUMON_OK;
		gpumon_recording_destroy(r.rec);
		if (st != GPUMON_OK && !r.rec_failed)
			cli_error("run: the recording could not be completed: %s", gpumon_strerror(st));
		run_summary_end(&r, path, end, &ss);
	} else if (r.rec) {
		gpumon_recording_destroy(r.rec);
		unlink(path); /* ours, and nothing ran: leave no empty recording behind */
	}
	free_run(&r);
	return rc;
}
