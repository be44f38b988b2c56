/* SPDX-License-Identifier: MIT */
/* names.c — the short codes of the run model's answers (a verdict, a series, a room, an alert) as
 * the JSON document and every front end that hands them on (the Python package's dicts) say them,
 * kept here once so that no front end keeps a copy. */
#include "gpumon/gpumon.h"

const char *gpumon_leak_verdict_name(int verdict)
{
	return verdict == GPUMON_LEAK_SUSPECTED ? "leak" : verdict == GPUMON_LEAK_NONE ? "none" : "insufficient_data";
}

/* Indexed by the codes of gpumon.h, which count from 0 (or 1) without gaps. */
static const char *const series_names[] = {"none", "framework", "job", "process", "device"};
static const char *const room_names[] = {NULL, "free", "limit", "cap", "total"};
static const char *const alert_names[] = {NULL, "leak", "headroom", "oom_projected", "limit"};

#define N(a) (int)(sizeof a / sizeof a[0])

const char *gpumon_series_name(int series)
{
	return series > 0 && series < N(series_names) ? series_names[series] : "none";
}

const char *gpumon_room_name(int room)
{
	return room > 0 && room < N(room_names) ? room_names[room] : NULL;
}

const char *gpumon_alert_name(int kind)
{
	return kind > 0 && kind < N(alert_names) ? alert_names[kind] : NULL;
}
