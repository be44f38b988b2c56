/* SPDX-License-Identifier: MIT */
/* run_stop.c — how `gpumon run` ends a job before its own end: --limit (the run model's LIMIT alert:
 * a job process over the limit) and --steps (the job reported its N training steps). Both go one way: SIGTERM to the
 * job's processes, then SIGKILL when the job still runs after the grace of --on-exceed term:GRACE. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "run_state.h"

/* Sends sig to every process of the job. */
static void signal_job(struct run *r, int sig)
{
	for (size_t i = 0; i < r->tree.n; i++)
		if (r->tree.pids[i] != getpid())
			kill(r->tree.pids[i], sig);
	if (!r->done)
		kill(r->child, sig);
}

/* A grace period in words: "30 s", "0.5 s", "2 min". */
static void format_grace(char *buf, size_t len, uint64_t ns)
{
	if (ns >= 60000000000ull && ns % 60000000000ull == 0)
		snprintf(buf, len, "%llu min", (unsigned long long)(ns / 60000000000ull));
	else
		snprintf(buf, len, "%g s", (double)ns / 1e9);
}

/* The one way a job is asked to end: SIGTERM now, SIGKILL after the grace (run_escalate). */
static void terminate(struct run *r)
{
	r->acted = 1;
	r->term_ns = cli_now_ns();
	signal_job(r, SIGTERM);
}

void run_enforce(struct run *r, const gpumon_alert *a)
{
	unsigned pid = (unsigned)a->pid;
	uint64_t t = a->t_ns, total = a->used_bytes;
	char a1[32], b[32];
	if (r->acted)
		return;
	char act[96], grace[32];
	format_grace(grace, sizeof grace, r->o->term_grace_ns);
	if (r->o->on_exceed == EXCEED_TERM)
		snprintf(act, sizeof act, "sending SIGTERM to the job (SIGKILL after %s)", grace);
	else
		snprintf(act, sizeof act, "%s", r->o->on_exceed == EXCEED_KILL ? "sending SIGKILL to the job"
										: "warning only (--on-exceed warn)");
	cli_format_bytes(a1, sizeof a1, total);
	cli_format_bytes(b, sizeof b, a->limit_bytes);
	cli_error("run: job process %u holds %s of GPU memory, over --limit %s: %s", pid, a1, b, act);
	run_event(r, t, GPUMON_EVENT_ALERT, "pid %u holds %llu bytes, over the limit of %llu: %s", pid, (unsigned long long)total,
		  (unsigned long long)a->limit_bytes, act);
	run_oom_event(r, t, "memory at the limit: job process %u held %s, over --limit %s", pid, a1, b);
	if (r->o->on_exceed == EXCEED_TERM) {
		terminate(r);
	} else if (r->o->on_exceed == EXCEED_KILL) {
		r->acted = 1;
		signal_job(r, SIGKILL);
	}
}

void run_escalate(struct run *r, uint64_t now)
{
	char grace[32];
	if (!r->term_ns || r->escalated || r->done || now < r->term_ns + r->o->term_grace_ns)
		return;
	r->escalated = 1;
	format_grace(grace, sizeof grace, r->o->term_grace_ns);
	cli_error("run: the job is still running %s after SIGTERM: sending SIGKILL", grace);
	run_event(r, now, GPUMON_EVENT_NOTE, "the job is still running %s after SIGTERM: sending SIGKILL", grace);
	run_refresh_tree(r); /* the processes it started since */
	signal_job(r, SIGKILL);
}

void run_steps_seen(struct run *r, int64_t step)
{
	size_t lo = 0, hi = r->nsteps;
	if (!r->o->steps || r->nsteps >= r->o->steps)
		return;
	while (lo < hi) { /* steps mostly come in order: the search ends at the top */
		size_t mid = lo + (hi - lo) / 2;
		if (r->steps[mid] == step)
			return;
		if (r->steps[mid] < step)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (r->nsteps == r->steps_cap) {
		size_t cap = r->steps_cap ? r->steps_cap * 2 : 64;
		if (cap > r->o->steps)
			cap = r->o->steps;
		int64_t *a = realloc(r->steps, cap * sizeof *a);
		if (!a)
			return; /* out of memory: the step is counted when it is seen again */
		r->steps = a;
		r->steps_cap = cap;
	}
	memmove(r->steps + lo + 1, r->steps + lo, (r->nsteps - lo) * sizeof *r->steps);
	r->steps[lo] = step;
	r->nsteps++;
}

void run_steps_check(struct run *r)
{
	char grace[32], act[96];
	/* a job --limit already stops ends for that reason: its status is then the one to give */
	if (!r->o->steps || r->nsteps < r->o->steps || r->acted || r->done)
		return;
	r->steps_stopped = 1;
	format_grace(grace, sizeof grace, r->o->term_grace_ns);
	snprintf(act, sizeof act, "sending SIGTERM to the job (SIGKILL after %s)", grace);
	if (!r->o->quiet)
		fprintf(stderr, "%s: note: the job reported %u steps (--steps): %s\n", cli_progname, r->o->steps, act);
	run_event(r, cli_now_ns(), GPUMON_EVENT_NOTE, "stopped after %u steps (--steps): %s", r->o->steps, act);
	run_refresh_tree(r); /* the processes it started since the last scan */
	terminate(r);
}
