/* SPDX-License-Identifier: MIT */
/* run_tree.h — the process tree below a pid (children, grandchildren ...), read from /proc in one
 * pass, so that `gpumon run` can tell the job's GPU memory from its neighbours'. */
#ifndef GPUMON_RUN_TREE_H
#define GPUMON_RUN_TREE_H

#include <stddef.h>
#include <sys/types.h>

struct run_tree {
	pid_t *pids; /* the root and its descendants, sorted ascending */
	size_t n;
};

/*
 * Parses the text of /proc/PID/stat: "pid (comm) state ppid ...". The command name may hold
 * blanks and parentheses, so the last ')' ends it. Returns 0 and sets *pid and *ppid, or -1.
 */
int run_tree_parse_stat(const char *buf, size_t len, pid_t *pid, pid_t *ppid);

/*
 * Fills *t with root and every process descending from it, from one scan of /proc (at most
 * max_procs entries read; 0 = 1,000,000). Processes that vanish during the scan are skipped; the
 * root is always in the set. Returns 0, or -1 when /proc cannot be read or memory runs out (*t
 * then holds only the root, or is empty). Free with run_tree_free().
 */
int run_tree_scan(pid_t root, size_t max_procs, struct run_tree *t);

/* Whether pid is in the tree (binary search). */
int run_tree_contains(const struct run_tree *t, pid_t pid);

/* Frees the set and empties *t. */
void run_tree_free(struct run_tree *t);

#endif
