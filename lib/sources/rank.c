/* SPDX-License-Identifier: MIT */
/* rank.c — whether a process is a distributed job's worker, and its rank: the one test the sampler's
 * listings, the recording, the model, the exporter and watch use (host_process.c reads the rank). */
#include "../internal.h"

int gpumon__worker_rank(unsigned flags, const gpumon_rank *r)
{
	return (flags & GPUMON_PROC_RANK_KNOWN) && r->launcher[0] && r->rank >= 0 ? r->rank : -1;
}

int gpumon_process_rank(const gpumon_process *p)
{
	return p ? gpumon__worker_rank(p->flags, &p->rank) : -1;
}
