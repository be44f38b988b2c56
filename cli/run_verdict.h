/* SPDX-License-Identifier: MIT */
/* run_verdict.h — the leak verdict of `gpumon run`'s summary: the library's detector fed with what
 * one process of the job reports (allocated bytes after each step). */
#ifndef GPUMON_RUN_VERDICT_H
#define GPUMON_RUN_VERDICT_H

#include <stdio.h>
#include <gpumon/gpumon.h>

/* Feeds one framework sample; creates the detector at the first usable one (*l NULL before).
 * Samples without an allocated figure are skipped; a step counter that goes back (a restarted
 * loop) starts the series afresh. */
void run_verdict_add(gpumon_leak **l, const gpumon_framework_sample *s, uint64_t limit_bytes);

/* When the detector alerts (a leak suspected for long enough: gpumon_leak_result.alert), writes
 * "WHAT rises by 8.00 MiB a step from step 40; out of memory in about 1200 more steps" into buf
 * and returns 1; else 0. */
int run_verdict_alert(const gpumon_leak *l, const char *what, char *buf, size_t len);

/* Prints "  leak (WHO): ..." for the detector's verdict on the series named by what ("the
 * allocated floor", ...). Nothing when l is NULL. */
void run_verdict_print(FILE *f, const gpumon_leak *l, const char *who, const char *what);

#endif
