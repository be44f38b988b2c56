/* SPDX-License-Identifier: MIT */
/* run_tree.c — the job's process tree as `gpumon run` keeps it: the library reads /proc and walks
 * the tree (gpumon_host_process_tree); this keeps the answer as a sorted set of pids. */
#include <stdlib.h>

#include <gpumon/gpumon.h>

#include "run_tree.h"

int run_tree_scan(pid_t root, size_t max_procs, struct run_tree *t)
{
	unsigned *v = NULL;
	size_t n = 0;
	t->n = 0;
	t->pids = malloc(sizeof *t->pids);
	if (!t->pids)
		return -1;
	t->pids[t->n++] = root;
	if (root <= 0 || gpumon_host_process_tree((unsigned)root, max_procs, &v, &n) != GPUMON_OK)
		return -1;
	pid_t *p = n ? malloc(n * sizeof *p) : NULL;
	if (!p) {
		gpumon_free(v);
		return n ? -1 : 0;
	}
	for (size_t i = 0; i < n; i++) /* ascending as the library gives them */
		p[i] = (pid_t)v[i];
	gpumon_free(v);
	free(t->pids);
	t->pids = p;
	t->n = n;
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return x < y ? -1 : x > y;
}

int run_tree_contains(const struct run_tree *t, pid_t pid)
{
	return t->n && bsearch(&pid, t->pids, t->n, sizeof *t->pids, cmp_pid) != NULL;
}

void run_tree_free(struct run_tree *t)
{
	free(t->pids);
	t->pids = NULL;
	t->n = 0;
}
