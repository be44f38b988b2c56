/* SPDX-License-Identifier: MIT */
/* words.h — the run model's codes and figures in plain words, for every text the program prints
 * (`gpumon report`'s text and HTML, `gpumon run`'s alerts and summary, `gpumon watch`). The words
 * are made from the model's JSON document (docs/report.md), so two commands cannot word one answer
 * two ways. Every function writes a NUL-terminated sentence (truncated to len) and returns buf. */
#ifndef GPUMON_WORDS_H
#define GPUMON_WORDS_H

#include <stddef.h>

#include <jansson.h>

/* A byte figure ("1.50 GiB"), or "n/a" when v is not a number. */
const char *words_bytes(char *buf, size_t len, const json_t *v);

/* A span of seconds as people say it: "45 s", "4 min 37 s", "2 h 05 min". */
const char *words_duration(char *buf, size_t len, double seconds);

/* What a verdict's series is: "the framework's allocated memory (torch, pid 775)", "the job's
 * processes on GPU 0 (NVML)", "pid 4242 on GPU 1 (NVML)", "GPU 0's used memory (NVML)". */
const char *words_series(char *buf, size_t len, const json_t *series);

/* What bounds the projection: "the GPU's free memory", "--limit", "the allocator's cap", "the
 * GPU's total (other processes unknown)". */
const char *words_room(char *buf, size_t len, const json_t *verdict);

/* A verdict (the document's "leak" or an entry of "series") in one sentence: "LEAK: +4.00 MiB a step
 * from step 3 (confidence 1.00); out of memory in about 34,866 more steps (about 13 min) at this
 * rate, against the GPU's free memory (136 GiB left)", "none: ... does not keep rising", "not enough
 * data to tell (40 points)". start_s: the run's elapsed seconds "now" for "around 4:37 from the
 * start" (< 0 to leave it out). */
const char *words_verdict(char *buf, size_t len, const json_t *verdict, double now_s);

/* A leak alert as a front end tells it the moment it comes: "<series> rises by 8.00 MiB a step from
 * step 40; out of memory in about 1,200 more steps (about 2 min, around 4:37 from the start)". */
const char *words_alert(char *buf, size_t len, const json_t *alert);

/* The out-of-memory diagnosis (the document's "oom") in plain words, with the figures that decided
 * it and what to try. */
const char *words_oom(char *buf, size_t len, const json_t *oom);

/* The short name of an out-of-memory cause code ("co-tenant", ...), as the document has it. */
const char *words_cause(const json_t *oom);

#endif
