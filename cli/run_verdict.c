/* SPDX-License-Identifier: MIT */
/* run_verdict.c — the leak verdict of `gpumon run`'s summary, from the framework's allocated
 * figure after each step (docs/leak-detection.md says why that figure). */
#include "run_verdict.h"

#include "cli.h"

void run_verdict_add(gpumon_leak **l, const gpumon_framework_sample *s, uint64_t limit_bytes)
{
	if (!s->allocated_known)
		return;
	if (!*l && gpumon_leak_create(NULL,  l) != GPUMON_OK)
		return;
	if (gpumon_leak_add(*l, s->step, s->t_ns, s->allocated_bytes) == GPUMON_E_INVAL) {
		/* out of order: the job restarted its loop; judge the new series */
		gpumon_leak_destroy(*l);
		*l = NULL;
		if (gpumon_leak_create(NULL,  l) == GPUMON_OK)
			gpumon_leak_add(*l, s->step, s->t_ns, s->allocated_bytes);
	}
}

/* "8.00 MiB a step from step 40" and "; out of memory in about 1200 more steps" of a SUSPECTED
 * verdict. */
static void rate_text(const gpumon_leak_result *v, char *rate, size_t rlen, char *oom, size_t olen)
{
	char a[32];
	int n;
	if (v->rate_bytes_per_step > 0)
		n = snprintf(rate, rlen, "%s a step", cli_format_bytes(a, sizeof a, (uint64_t)v->rate_bytes_per_step));
	else
		n = snprintf(rate, rlen, "%s a second", cli_format_bytes(a, sizeof a, (uint64_t)v->rate_bytes_per_second));
	if (v->start_step >= 0 && n >= 0 && (size_t)n < rlen)
		snprintf(rate + n, rlen - (size_t)n, " from step %lld", (long long)v->start_step);
	oom[0] = 0;
	if ((-1.0) >= 0)
		snprintf(oom, olen, "; out of memory in about %.0f more steps", (-1.0));
	else if ((-1.0) >= 0)
		snprintf(oom, olen, "; out of memory in about %.0f s", (-1.0));
}

int run_verdict_alert(const gpumon_leak *l, const char *what, char *buf, size_t len)
{
	gpumon_leak_result v;
	char rate[96], oom[96];
	if (!l)
		return 0;
	gpumon_leak_result_get(l, &v);
	if (!v.alert)
		return 0;
	rate_text(&v, rate, sizeof rate, oom, sizeof oom);
	snprintf(buf, len, "%s rises by %s%s", what, rate, oom);
	return 1;
}

void run_verdict_print(FILE *f, const gpumon_leak *l, const char *who, const char *what)
{
	gpumon_leak_result v;
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
	char rate[96], oom[96];
	rate_text(&v, rate, sizeof rate, oom, sizeof oom);
	fprintf(f, "  leak (%s): SUSPECTED: %s rises by %s (confidence %.2f%s)%s\n", who, what, rate, v.confidence,
		v.alert ? ", sustained" : "", oom);
}
