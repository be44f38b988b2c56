/* SPDX-License-Identifier: MIT */
/* exporter_stub.c — the exporter API in a libgpumon built without libevent's and OpenSSL's headers:
 * every call says so, and the rest of the library works as usual. CMake compiles this file instead
 * of the exporter's when libevent-dev or libssl-dev is missing (with a warning). */
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define NO_EXPORTER "this libgpumon was built without libevent's and OpenSSL's headers, so it has no HTTP " \
		    "exporter: install libevent-dev and libssl-dev and build again"

/* Only what a failed create hands back: the message. */
struct gpumon_exporter {
	char msg[192];
};

int gpumon_exporter_create(gpumon *g, const gpumon_exporter_config *cfg, gpumon_exporter **out)
{
	(void)cfg;
	if (!out)
		return GPUMON_E_INVAL;
	*out = calloc(1, sizeof **out);
	if (*out)
		snprintf((*out)->msg, sizeof (*out)->msg, "%s", NO_EXPORTER);
	return g ? gpumon__seterr(g, GPUMON_E_NOT_SUPPORTED, "%s", NO_EXPORTER) : GPUMON_E_NOT_SUPPORTED;
}

void gpumon_exporter_address(const gpumon_exporter *e, char *buf, size_t len)
{
	(void)e;
	if (buf && len)
		buf[0] = 0;
}

int gpumon_exporter_framework(gpumon_exporter *e, const gpumon_framework_sample *s)
{
	(void)e;
	(void)s;
	return GPUMON_E_NOT_SUPPORTED;
}

const char *gpumon_exporter_errmsg(const gpumon_exporter *e)
{
	return e ? e->msg : "";
}

void gpumon_exporter_destroy(gpumon_exporter *e)
{
	free(e);
}
