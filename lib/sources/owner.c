/* SPDX-License-Identifier: MIT */
/* owner.c — the one phrase that names a process's owner (pod, Slurm job, container, unit) in
 * every front end, so that `show`, `watch`, reports and the exporter never word it differently. */
#include <stdio.h>
#include <string.h>

#include "../internal.h"

static size_t put(char *buf, size_t len, int n)
{
	if (n < 0) {
		if (len)
			buf[0] = 0;
		return 0;
	}
	return (size_t)n < len ? (size_t)n : (len ? len - 1 : 0);
}

size_t gpumon_owner_describe(const gpumon_owner *o, char *buf, size_t len)
{
	if (!buf || !len)
		return 0;
	buf[0] = 0;
	if (!o)
		return 0;
	unsigned p = o->present;
	if (p & GPUMON_OWNER_POD_NAMES)
		return put(buf, len, snprintf(buf, len, "pod %s/%s", o->k8s_namespace, o->pod));
	if (p & GPUMON_OWNER_POD)
		return put(buf, len, snprintf(buf, len, "pod %s", o->pod_uid));
	if (p & GPUMON_OWNER_SLURM)
		return put(buf, len, snprintf(buf, len, "slurm job %s%s%s", o->slurm_job,
					      o->slurm_step[0] ? "." : "", o->slurm_step));
	if (p & GPUMON_OWNER_CONTAINER)
		/* a bare id under kubepods does not say its runtime: "container ID12" then */
		return put(buf, len, snprintf(buf, len, "%s %.12s", o->runtime[0] ? o->runtime : "container",
					      o->container_id));
	if (p & GPUMON_OWNER_UNIT)
		return put(buf, len, snprintf(buf, len, "unit %s", o->unit));
	if (p & GPUMON_OWNER_UNRESOLVED)
		return put(buf, len, snprintf(buf, len, "another PID namespace"));
	return 0;
}
