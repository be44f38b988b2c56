/* SPDX-License-Identifier: MIT */
/* run_verdict.c — the leak verdict of `gpumon run`'s summary, from the framework's allocated
 * figure after each step (docs/leak-detection.md says why that figure). */
#include "run_verdict.h"

#include "cli.h"

void run_verdict_add(gpumon_leak **l, const gpumon_framework_sample *s, uint64_t limit_bytes)
{
	if (!s->allocated_known)
		return;
	if (!*l && gpumon_leak_create(NULL, l) != GPUMON_OK)
		return;
	if (gpumon_leak_add(*l, s->step, s->t_ns, s->allocated_bytes, limit_bytes) == GPUMON_E_INVAL) {
		/* out of order: the job restarted its loop; judge the new series */
		gpumon_leak_destroy(*l);
		*l = NULL;
		if (gpumon_leak_create(NULL, l) == GPUMON_OK)
			gpumon_leak_add(*l, s->step, s->t_ns, s->allocated_bytes, limit_bytes);
	}
}

void run_verdict_print(FILE *f, const gpumon_leak *l, const char *who, const char *what)
{
	gpumon_leak_result v;
	char a[32];
	if (!l)
		return;
	gpumon_leak_result_get(l, &v);
	if (v.verdict == GPUMON_LEAK_INSUFFICIENT_DATA) {
		fprintf(f, "  leak (%s): not enough data to tell: %llu sample%s of %s\n", who, (unsigned long long)v.points,
			v.points == 1 ? "" : "s", what);
		return;
	}
	if (v.verdict == GPUMON_LEAK_NONE) {
		fprintf(f, "  leak (%s): none: %s does not keep rising (%llu samples)\n", who, what,
			(unsigned long long)v.points);
		return;
	}
	fprintf(f, "  leak (%s): SUSPECTED: %s rises by ", who, what);
	if (v.rate_bytes_per_step > 0)
		fprintf(f, "%s a step", cli_format_bytes(a, sizeof a, (uint64_t)v.rate_bytes_per_step));
	else
		fprintf(f, "%s a second", cli_format_bytes(a, sizeof a, (uint64_t)v.rate_bytes_per_second));
	if (v.start_step >= 0)
		fprintf(f, " from step %lld", (long long)v.start_step);
	fprintf(f, " (confidence %.2f%s)", v.confidence, v.alert ? ", sustained" : "");
	if (v.steps_to_oom >= 0)
		fprintf(f, "; out of memory in about %.0f more steps", v.steps_to_oom);
	else if (v.seconds_to_oom >= 0)
		fprintf(f, "; out of memory in about %.0f s", v.seconds_to_oom);
	fprintf(f, "\n");
}
