/* SPDX-License-Identifier: MIT */
/* fuzz_scenario.c — libFuzzer target for the fake NVML's scenario parser: any bytes must give
 * either a scenario whose state can be computed at a few times, or a "LINE: message" error. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Walks a state so that every field computed from the events is read at least once. */
static unsigned long long touch(const struct scn_state *st)
{
	unsigned long long sum = 0;
	for (unsigned g = 0; g < st->ngpus; g++) {
		const struct scn_gpu *gpu = &st->gpu[g];
		sum += strlen(gpu->name) + strlen(gpu->uuid) + strlen(gpu->bus_id) + gpu->used +
		       gpu->reserved + (unsigned)gpu->lost;
		for (size_t i = st->gpu_first[g]; i < st->gpu_first[g + 1]; i++)
			if (st->proc[i].present)
				sum += st->proc[i].used + (st->proc[i].name ? strlen(st->proc[i].name) : 0);
	}
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const double times[] = {0, 0.5, 5, 1e6, 2};
	static volatile unsigned long long sink;
	char err[128];
	struct scn *s = NULL;
	int line = scn_parse((const char *)data, size, &s, err, sizeof err);
	if (line) {
		if (s || line < 1 || strlen(err) >= sizeof err)
			abort();
		return 0;
	}
	struct scn_state st;
	if (scn_state_init(&st, s) == 0) {
		int code;
		for (size_t i = 0; i < sizeof times / sizeof times[0]; i++) {
			scn_state_update(&st, s, times[i]);
			sink = sink + touch(&st);
			unsigned fn = (unsigned)i * 7 % SCN_FN_N;
			sink = sink + (unsigned)scn_rule_code(s, fn, 0, times[i], &code);
		}
		scn_state_free(&st);
	}
	scn_free(s);
	return 0;
}
