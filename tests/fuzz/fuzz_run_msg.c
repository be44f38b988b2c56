/* SPDX-License-Identifier: MIT */
/* fuzz_run_msg.c — libFuzzer target for the `gpumon run` socket protocol's line parser
 * (run_msg_parse in cli/run_socket.c): any bytes as one line, into error buffers of every size;
 * every type reached from the seed corpus, the inside view's oom, snapshot and inside among them. */
#include <stdlib.h>
#include <string.h>

#include "run_socket.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct run_msg m;
	char err[128];
	/* an exact-size copy, so that a read past the line's end is caught */
	char *line = malloc(size ? size : 1);
	if (!line)
		return 0;
	memcpy(line, data, size);
	size_t errlen = size ? data[0] % sizeof err : 0;
	int rc = run_msg_parse(line, size, &m, err, errlen);
	if (rc != 0 && rc != -1)
		abort();
	if (errlen && !memchr(err, 0, errlen))
		abort();
	if (rc == 0 && (m.type < RUN_MSG_HELLO || m.type > RUN_MSG_UNKNOWN))
		abort();
	if (rc == 0 && (!memchr(m.framework, 0, sizeof m.framework) || !memchr(m.fw_version, 0, sizeof m.fw_version) ||
			!memchr(m.text, 0, sizeof m.text)))
		abort();
	/* a snapshot comes with its text, and only a snapshot */
	if (rc == 0 && (m.type == RUN_MSG_SNAPSHOT) != (m.snapshot != NULL))
		abort();
	if (m.snapshot && (strlen(m.snapshot) != m.snapshot_len || m.snapshot[0] != '{'))
		abort();
	/* the figures of an oom message are within the library's bound */
	for (unsigned bit = 1; rc == 0 && m.type == RUN_MSG_OOM && bit; bit <<= 1)
		if ((m.fig.known & bit) && gpumon_oom_figure_field(&m.fig, bit) &&
		    *gpumon_oom_figure_field(&m.fig, bit) > GPUMON_MAX_BYTES)
			abort();
	run_msg_release(&m);
	free(line);
	return 0;
}
