/* SPDX-License-Identifier: MIT */
/* fit_dir.h — the directory of a `gpumon fit`'s runs: made with its owner written in it, so that a
 * later fit removes the runs of one that was killed (-9, a lost machine) before it could. */
#ifndef GPUMON_FIT_DIR_H
#define GPUMON_FIT_DIR_H

#include <stddef.h>

/* Removes the run directories under tmp ("gpumon-fit-*", ours) whose fit has exited without
 * removing them (their owner file names a process that is gone), saying so on stderr; a directory
 * kept with --keep, another user's, or one whose fit still runs stays. */
void fit_dir_sweep(const char *tmp);

/* Makes tmp/gpumon-fit-XXXXXX (mode 0700) into dir and writes this process in its owner file.
 * 0, or -1 with errno set (dir then holds the name asked for). */
int fit_dir_make(const char *tmp, char *dir, size_t len);

/* Removes the owner file: the directory is kept (--keep), not swept. */
void fit_dir_keep(const char *dir);

/* The owner file's name in dir, into buf. */
void fit_dir_owner_path(const char *dir, char *buf, size_t len);

#endif
