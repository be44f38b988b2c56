/* SPDX-License-Identifier: MIT */
/* watch_signal.c — sending SIGTERM, SIGKILL or SIGINT from `gpumon watch` to the selected process,
 * as nvitop does: one key asks, y confirms. Only one's own processes (root: any); a pid reused
 * between the question and the answer is another process and is left alone. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "watch.h"

static const char *signame(int sig)
{
	return sig == SIGTERM ? "SIGTERM" : sig == SIGKILL ? "SIGKILL" : sig == SIGINT ? "SIGINT" : "a signal";
}

void watch_signal_ask(watch_view *v, const watch_proc *p, int sig)
{
	v->confirm.sig = 0;
	if (v->replay || !v->host) {
		snprintf(v->message, sizeof v->message, "%s: this is a recording; its processes are not on this machine",
			 signame(sig));
		return;
	}
	if (!p) {
		snprintf(v->message, sizeof v->message, "%s: no process is selected", signame(sig));
		return;
	}
	if (p->flags & GPUMON_PROC_FOREIGN) {
		snprintf(v->message, sizeof v->message, "%s: pid %u is in another PID namespace (a container): "
			 "signal it from there", signame(sig), p->pid);
		return;
	}
	unsigned long long start;
	unsigned uid;
	int id = watch_proc_identity(p->pid, &start, &uid);
	if (id == -2) {
		snprintf(v->message, sizeof v->message, "%s: pid %u is numbered by another PID namespace's /proc "
			 "(GPUMON_PROC_ROOT): signal it from there", signame(sig), p->pid);
		return;
	}
	if (id < 0) {
		snprintf(v->message, sizeof v->message, "%s: pid %u has exited", signame(sig), p->pid);
		return;
	}
	if (geteuid() != 0 && uid != getuid() && uid != geteuid()) {
		char who[80];
		if (p->user[0])
			snprintf(who, sizeof who, "user %s", p->user);
		else
			snprintf(who, sizeof who, "uid %u", uid);
		snprintf(v->message, sizeof v->message, "%s refused: pid %u belongs to %s, not to you (only root may "
			 "signal other users' processes)", signame(sig), p->pid, who);
		return;
	}
	v->confirm.sig = sig;
	v->confirm.pid = p->pid;
	v->confirm.start_ticks = start;
	snprintf(v->confirm.text, sizeof v->confirm.text, "Send %s to pid %u (%s): %.60s? y: send, any other key: no",
		 signame(sig), p->pid, p->user[0] ? p->user : "n/a", p->command[0] ? p->command : "n/a");
}

void watch_signal_answer(watch_view *v, int key)
{
	watch_confirm c = v->confirm;
	v->confirm.sig = 0;
	if (!c.sig)
		return;
	if (key != 'y' && key != 'Y') {
		snprintf(v->message, sizeof v->message, "%s not sent to pid %u", signame(c.sig), c.pid);
		return;
	}
	unsigned long long start;
	unsigned uid;
	if (watch_proc_identity(c.pid, &start, &uid) < 0 || start != c.start_ticks) {
		snprintf(v->message, sizeof v->message, "%s not sent: pid %u has exited since", signame(c.sig), c.pid);
		return;
	}
	if (kill((pid_t)c.pid, c.sig) != 0) {
		snprintf(v->message, sizeof v->message, "%s to pid %u failed: %s", signame(c.sig), c.pid, strerror(errno));
		return;
	}
	snprintf(v->message, sizeof v->message, "%s sent to pid %u", signame(c.sig), c.pid);
}
