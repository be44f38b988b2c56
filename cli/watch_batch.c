/* SPDX-License-Identifier: MIT */
/* watch_batch.c — `gpumon watch --batch`: a snapshot as plain text, as `top -b` prints one: the
 * title, each GPU with its figures, and the process table with the same columns and leak marks as
 * the screen, without curses or escape codes, for scripts and for comparing with other commands. */
#include <stdio.h>
#include <stdlib.h>

#include "watch.h"

static int shown(const watch_view *v, unsigned i)
{
	return !v->picked || v->picked[i];
}

/* The title line: what is shown, where, and how many GPUs and processes. */
static void title(FILE *f, const watch_snap *snap, const watch_view *v)
{
	unsigned n = 0;
	for (unsigned i = 0; i < snap->ngpu; i++)
		n += (unsigned)shown(v, i);
	fprintf(f, "gpumon watch  %s", v->title);
	if (v->position[0])
		fprintf(f, "  %s", v->position);
	if (v->picked)
		fprintf(f, "  %u of %u GPU%s", n, snap->ngpu, snap->ngpu == 1 ? "" : "s");
	else
		fprintf(f, "  %u GPU%s", n, n == 1 ? "" : "s");
	fprintf(f, "  %zu proc%s\n", snap->nproc, snap->nproc == 1 ? "" : "s");
	for (int b = 0; b < 2; b++)
		if (v->banner[b][0])
			fprintf(f, "%s\n", v->banner[b]);
}

static void gpu(FILE *f, const watch_snap *snap, const watch_gpu *g)
{
	char text[512];
	fprintf(f, "GPU %u  %s  ", g->info.index, (g->info.present & GPUMON_INFO_NAME) ? g->info.name : "n/a");
	if (g->lost) {
		fprintf(f, "LOST: fell off the bus or needs a reset; the other GPUs go on\n");
		return;
	}
	if (!g->have_sample) {
		fprintf(f, "waiting for the first sample\n");
		return;
	}
	fprintf(f, "%s\n", watch_gpu_stats_text(g, text, sizeof text));
	fprintf(f, "  %s\n", watch_gpu_memory_text(g, text, sizeof text));
	if (watch_nearly_full(g))
		fprintf(f, "%s\n", watch_holders_text(snap, g, text, sizeof text));
}

int watch_batch_print(FILE *f, const watch_snap *snap, const watch_view *v)
{
	char line[1024];
	title(f, snap, v);
	for (unsigned i = 0; i < snap->ngpu; i++)
		if (shown(v, i))
			gpu(f, snap, &snap->gpus[i]);
	size_t *idx = malloc((snap->nproc ? snap->nproc : 1) * sizeof *idx);
	if (!idx)
		return -1;
	size_t n = watch_rows(snap, v, idx);
	fprintf(f, "%s\n", watch_table_header(line, sizeof line));
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", watch_row_text(&snap->procs[idx[i]], line, sizeof line));
	if (!n)
		fprintf(f, "  (none)\n");
	for (size_t i = 0; i < n; i++) /* what the screen's detail line says of the selected one */
		if (snap->procs[idx[i]].leak)
			fprintf(f, "%s\n", watch_detail_text(&snap->procs[idx[i]], line, sizeof line));
	for (size_t i = 0; i < n; i++)
		if (snap->procs[idx[i]].placed_known)
			fprintf(f, "%s\n", watch_placed_text(&snap->procs[idx[i]], line, sizeof line));
	if (snap->oom.known)
		fprintf(f, "%s\n", watch_oom_text(&snap->oom, line, sizeof line));
	free(idx);
	fputc('\n', f);
	return fflush(f) == 0 && !ferror(f) ? 0 : -1;
}
