/* SPDX-License-Identifier: MIT */
/* words.h — the run model's document (docs/report.md) in plain words, for the HTML page of `gpumon
 * report`, which renders a document alone. Every other text the program prints words the model's
 * typed answers with the library's gpumon_words_*. Every function writes a NUL-terminated sentence
 * (truncated to len) and returns buf. */
#ifndef GPUMON_WORDS_H
#define GPUMON_WORDS_H

#include <stddef.h>

#include <jansson.h>
#include <gpumon/gpumon.h>

/* Reading the document: o's string at key (NULL when absent or not a string), whether key holds a
 * number, and that number (0 when not). */
const char *doc_str(const json_t *o, const char *key);
int doc_has_num(const json_t *o, const char *key);
double doc_num(const json_t *o, const char *key);

/* A byte figure ("1.50 GiB"), or "n/a" when v is not a number. */
const char *words_bytes(char *buf, size_t len, const json_t *v);

/* A span of seconds as people say it: "45 s", "4 min 37 s", "2 h 05 min". */
const char *words_duration(char *buf, size_t len, double seconds);

/* What a verdict's series is: "the framework's allocated memory (torch, pid 775)", "the job's
 * processes on GPU 0 (NVML)", "pid 4242 on GPU 1 (NVML)", "GPU 0's used memory (NVML)". */
const char *words_series(char *buf, size_t len, const json_t *series);

/* What bounds the projection: "the GPU's free memory", "the --limit set for the job", "the cap the
 * job set on its allocator", "the GPU's total, what other processes hold unknown". */
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

/* Every cause that holds, the main one first: "fragmentation, outside the allocator". */
const char *words_causes(char *buf, size_t len, const json_t *oom);

/* What the framework said at the out-of-memory (the document's oom.framework): "torch (device 0):
 * tried to allocate 40.00 GiB; 10.38 GiB free of 139.80 GiB; the allocator held 128.90 GiB (38.67 GiB
 * allocated + 90.23 GiB cached); the process 129.41 GiB in all"; "" when it said nothing. */
const char *words_said(char *buf, size_t len, const json_t *oom);

/* The allocator's snapshot at the out-of-memory (oom.snapshot) in one sentence: what it held, live
 * and free, the largest free piece and how much was too small for the request; "" when none. */
const char *words_snapshot(char *buf, size_t len, const json_t *snapshot);

/* Every byte of a framework source's process placed (frameworks[].placed): "NVML 20.50 GiB = the
 * allocator's 13.90 GiB (12.00 GiB allocated + 1.90 GiB cached) + 6.60 GiB outside it (...)". */
const char *words_placed(char *buf, size_t len, const json_t *placed);

/* Whose a process of the document is, from its "owner" phrase (gpumon_owner_describe's): "held by
 * pod ml-team/trainer-0", "held by slurm job 4242.0", "in another PID namespace"; "" when the
 * document names no owner. Escaped for a terminal. */
const char *words_owner(char *buf, size_t len, const json_t *who);

/* What a peak (the document's "peak") is of: "the job's processes on GPU 0", "GPU 1's used memory",
 * "the framework's highest allocated". */
const char *words_peak_what(char *buf, size_t len, const json_t *peak);

/* The alerts of a document as a front end lists them, oldest first, as a new array of {time, kind,
 * text, live}: each entry of "alerts" once (kind "leak" or "headroom", worded by words_alert; live:
 * it was also given while the run went on), then each "alert" event that no entry of "alerts"
 * stands for (kind "alert": one given live at another moment, a --limit) and each "oom" event
 * (kind "oom"), with their own text. NULL when out of memory. */
json_t *words_alert_list(const json_t *doc);

/* Why the memory a framework source's process holds outside its allocator is not known (the
 * document's frameworks[].unaccounted_why), as a clause: "NVML lists no memory of the process on
 * its GPU"; NULL for a code it does not know or NULL. */
const char *words_unaccounted_why(const char *why);

/* A copy of the document to word. A CSV names no process: the records of its one process carry a
 * stand-in pid (docs/report.md), so in a CSV's document every "pid" is made null, and the words say
 * "the process" where a pid would be. Other documents are copied as they are. New reference; NULL
 * when out of memory. */
json_t *words_document(const json_t *doc);

/* A worker's verdict (ranks[].leak) in a few words: "LEAK +630 MiB/s", "no leak", "too short to
 * tell", "n/a". */
const char *words_rank_verdict(char *buf, size_t len, const json_t *leak);

/* The job the ranks are of: "torchrun job job7, world size 8", "mpi, world size 2", "distributed". */
const char *words_rank_job(char *buf, size_t len, const json_t *doc);

/* hosts[i] of the document (several recordings of one job's nodes read together): its GPUs and how
 * its clock was put beside the first host's: "node-a: GPUs 0-1 (the clock of this report)", "node-b:
 * GPUs 2-3; its times moved by +0.012 s by the wall clocks of both hosts; checked by 19 steps both
 * reached: +0.004 s from node-a's moments (median)". */
const char *words_host(char *buf, size_t len, const json_t *hosts, size_t i);

#endif
