/* SPDX-License-Identifier: MIT */
/* words.h — what the library's words (words.c, words_oom.c) share and nothing else. */
#ifndef GPUMON_LIB_WORDS_H
#define GPUMON_LIB_WORDS_H

#include <stddef.h>

#include <gpumon/gpumon.h>

/* Appends to buf (used so far in *at), cut at len. */
void gpumon__words_add(char *buf, size_t len, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A byte figure, or "n/a" when it is not known (or below 0). */
const char *gpumon__words_bytes_if(int known, double v, char *buf, size_t len);

/* 0 when m's pids name nothing (a CSV's stand-in pid): its processes are "the process". */
int gpumon__words_named(const gpumon_model *m);

#endif
