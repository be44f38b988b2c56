/* SPDX-License-Identifier: MIT */
/* run_tree.h — the process tree below a pid (children, grandchildren ...), as the library reads it
 * from /proc in one pass, so that `gpumon run` can tell the job's GPU memory from its neighbours'. */
#ifndef GPUMON_RUN_TREE_H
#define GPUMON_RUN_TREE_H

#include <stddef.h>
#include <sys/types.h>

struct run_tree {
	pid_t *pids; /* the root and its descendants, sorted ascending */
	size_t n;
};

/*
 * Fills *t with root and every process descending from it, from one scan of /proc
 * (gpumon_host_process_tree: at most max_procs entries read, 0 = 1,000,000; GPUMON_PROC_ROOT when it
 * is of our PID namespace). Processes that vanish during the scan are skipped; the root is always in
 * the set. Returns 0, or -1 when /proc cannot be read or memory runs out (*t then holds only the
 * root, or is empty). Free with run_tree_free().
 */
int run_tree_scan(pid_t root, size_t max_procs, struct run_tree *t);

/* Whether pid is in the tree (binary search). */
int run_tree_contains(const struct run_tree *t, pid_t pid);

/* Frees the set and empties *t. */
void run_tree_free(struct run_tree *t);

#endif
