/* SPDX-License-Identifier: MIT */
/* run_summary.h — the end summary of `gpumon run`: the run model's answers in plain words (the
 * library's gpumon_words_*), with the few facts about the run that only the launcher knows. */
#ifndef GPUMON_RUN_SUMMARY_H
#define GPUMON_RUN_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include <gpumon/gpumon.h>


/* What the summary says besides the model. */
struct run_facts {
	const char *path;                  /* the recording; NULL: none (--no-record) */
	int rec_failed;                    /* it stopped early */
	const gpumon_alloc_plan *plan; /* the settings applied and the notes */
	uint64_t dropped;                  /* sampler records lost (queue full) */
	int have_socket;                   /* GPUMON_RUN_SOCKET was offered ... */
	uint64_t malformed, unknown;       /* ... and these lines were ignored */
	uint64_t snapshots_dropped;        /* allocator snapshots left out beyond the run's bound */
	uint64_t refused;                  /* connections the socket closed ... */
	const char *refused_why;           /* ... and why, in words */
	int verbose;                       /* -v: every allocator note */
	int width;                         /* columns no line may exceed (run_summary_width) */
	int signal;                        /* the signal that ended the job; 0: it exited (or unknown) */
	const char *steps;                 /* what became of --steps, in words; NULL: not given */
};

/* The terminal's width: stderr's (the summary's stream), else stdout's, else $COLUMNS, else 80. */
int run_summary_width(void);

/* Prints the summary of the finished model m and f to out, every line wrapped to f->width columns
 * (at least 20). */
void run_summary_print(FILE *out, const gpumon_model *m, const struct run_facts *f);

struct run;
/* The end of a run: finishes r's model at end_ns (the end the recording stores) and, unless -q,
 * prints its answers as the summary on stderr with the launcher's facts (ss: the sampler's
 * losses). path: the recording, NULL with --no-record. */
void run_summary_end(struct run *r, const char *path, uint64_t end_ns, const gpumon_sampler_stats *ss);

#endif
