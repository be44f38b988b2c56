/* SPDX-License-Identifier: MIT */
/* watch_replay.c — `gpumon watch --replay FILE`: plays a recording (docs/recording.md) into the
 * watch model at the speed asked for, as if its records came from the sampler now. The rows are
 * read through recfile.h one at a time, so a recording of days plays in bounded memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "recfile.h"
#include "watch.h"

struct watch_replay {
	recfile rf;
	recfile_iter *it;
	gpumon_record pending; /* the next row, not yet due */
	int have_pending, ended;
	int64_t first_t_ns, end_t_ns; /* the recording's span on its own clock */
	double speed;
	int paused, started;
	int64_t clock_rec_ns;   /* the play position ... */
	uint64_t clock_wall_ns; /* ... at this wall time */
	unsigned char lost_fed[RECFILE_MAX_DEVICES];
	char file[256];
};

static int64_t query_i64(sqlite3 *db, const char *sql, int64_t dflt)
{
	sqlite3_stmt *s = NULL;
	int64_t v = dflt;
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW &&
	    sqlite3_column_type(s, 0) == SQLITE_INTEGER)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

int watch_replay_open(const char *path, double speed, watch_replay **out, char *err, size_t errlen)
{
	watch_replay *r = calloc(1, sizeof *r);
	*out = NULL;
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return EXIT_OTHER;
	}
	int rc = recfile_open(path, &r->rf, err, errlen);
	if (rc != EXIT_OK) {
		free(r);
		return rc;
	}
	rc = recfile_iter_start(&r->rf, &r->it, err, errlen);
	if (rc != EXIT_OK) {
		recfile_close(&r->rf);
		free(r);
		return rc;
	}
	const char *base = strrchr(path, '/');
	snprintf(r->file, sizeof r->file, "%s", base ? base + 1 : path);
	r->speed = speed;
	/* the span: from the recorded start (else the first sample) to the recorded end (else the last) */
	r->first_t_ns = r->rf.start_mono_ns ? r->rf.start_mono_ns
					    : query_i64(r->rf.db, "SELECT min(t_ns) FROM device_samples", 0);
	r->end_t_ns = r->rf.end_mono_ns >= 0 ? r->rf.end_mono_ns
					     : query_i64(r->rf.db, "SELECT max(t_ns) FROM device_samples", r->first_t_ns);
	*out = r;
	return EXIT_OK;
}

void watch_replay_close(watch_replay *r)
{
	if (!r)
		return;
	recfile_iter_end(r->it);
	recfile_close(&r->rf);
	free(r);
}

unsigned watch_replay_ngpu(const watch_replay *r)
{
	int n = 0;
	for (int i = 0; i < r->rf.ndevices; i++)
		if (r->rf.devices[i].dev >= n && r->rf.devices[i].dev < RECFILE_MAX_DEVICES)
			n = r->rf.devices[i].dev + 1;
	return (unsigned)n;
}

void watch_replay_info(const watch_replay *r, unsigned dev, gpumon_device_info *out)
{
	memset(out, 0, sizeof *out);
	out->index = dev;
	for (int i = 0; i < r->rf.ndevices; i++) {
		const recfile_device *d = &r->rf.devices[i];
		if (d->dev != (int)dev)
			continue;
		snprintf(out->name, sizeof out->name, "%s", d->name);
		snprintf(out->uuid, sizeof out->uuid, "%s", d->uuid);
		snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", d->pci_bus_id);
		out->present = (d->name[0] ? GPUMON_INFO_NAME : 0) | (d->uuid[0] ? GPUMON_INFO_UUID : 0) |
			       (d->pci_bus_id[0] ? GPUMON_INFO_PCI_BUS_ID : 0);
		if (d->total_bytes >= 0) {
			out->memory_total_bytes = (uint64_t)d->total_bytes;
			out->present |= GPUMON_INFO_MEMORY_TOTAL;
		}
	}
}

void watch_replay_describe(const watch_replay *r, char *buf, size_t len)
{
	char date[48] = "date unknown";
	if (r->rf.start_wall_ns) {
		time_t t = (time_t)(r->rf.start_wall_ns / 1000000000);
		struct tm tm;
		strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime_r(&t, &tm));
	}
	const char *what = r->rf.command ? r->rf.command
			   : !strcmp(r->rf.kind, "record") ? "all processes (gpumon record)" : "command unknown";
	snprintf(buf, len, "RECORDING of %s, %s: %s%s%s", r->rf.host[0] ? r->rf.host : "an unknown host", date, what,
		 r->rf.damage[0] ? "; " : "", r->rf.damage);
}

static uint64_t wall_to_rec(const watch_replay *r, uint64_t now_ns)
{
	if (r->paused || !r->started || now_ns < r->clock_wall_ns)
		return (uint64_t)r->clock_rec_ns;
	return (uint64_t)r->clock_rec_ns + (uint64_t)((double)(now_ns - r->clock_wall_ns) * r->speed);
}

static void set(uint64_t *v, unsigned *present, unsigned bit, recval x)
{
	if (x.known && x.v >= 0) {
		*v = (uint64_t)x.v;
		*present |= bit;
	}
}

static void set_u(unsigned *v, unsigned *present, unsigned bit, recval x)
{
	uint64_t w = 0;
	set(&w, present, bit, x);
	*v = (unsigned)w;
}

/* Turns a row into the sampler record it was made from; 0 for rows the screen does not use. */
static int to_record(const recrow *row, gpumon_record *rec)
{
	memset(rec, 0, sizeof *rec);
	rec->t_ns = (uint64_t)row->t_ns;
	if (row->kind == RECROW_DEVICE) {
		gpumon_device_sample *s = &rec->sample;
		unsigned mem = 0, dummy = 0;
		rec->kind = GPUMON_REC_DEVICE;
		rec->dev = (unsigned)row->u.device.dev;
		s->t_ns = rec->t_ns;
		set(&s->memory_used_bytes, &mem, GPUMON_F_MEMORY, row->u.device.used);
		set(&s->memory_total_bytes, &dummy, GPUMON_F_MEMORY, row->u.device.total);
		set(&s->memory_free_bytes, &dummy, GPUMON_F_MEMORY, row->u.device.free);
		s->present = mem;
		set(&s->memory_reserved_bytes, &s->present, GPUMON_F_MEM_RESERVED, row->u.device.reserved);
		set_u(&s->util_gpu_pct, &s->present, GPUMON_F_UTIL_GPU, row->u.device.util_gpu);
		set_u(&s->util_memory_pct, &s->present, GPUMON_F_UTIL_MEMORY, row->u.device.util_mem);
		set_u(&s->temperature_c, &s->present, GPUMON_F_TEMPERATURE, row->u.device.temperature_c);
		set_u(&s->power_mw, &s->present, GPUMON_F_POWER, row->u.device.power_mw);
		set_u(&s->clock_sm_mhz, &s->present, GPUMON_F_CLOCK_SM, row->u.device.clock_sm);
		set_u(&s->clock_mem_mhz, &s->present, GPUMON_F_CLOCK_MEM, row->u.device.clock_mem);
		rec->used_max_bytes = rec->used_min_bytes = s->memory_used_bytes;
		set(&rec->used_max_bytes, &dummy, 0, row->u.device.used_max);
		set(&rec->used_min_bytes, &dummy, 0, row->u.device.used_min);
		return 1;
	}
	if (row->kind != RECROW_PROCESS || row->u.process.pid < 0)
		return 0;
	gpumon_process *p = &rec->process;
	rec->kind = row->u.process.gone ? GPUMON_REC_PROCESS_GONE : GPUMON_REC_PROCESS;
	rec->dev = (unsigned)row->u.process.dev;
	p->pid = (unsigned)row->u.process.pid;
	set(&p->used_bytes, &p->flags, GPUMON_PROC_USED_KNOWN, row->u.process.used);
	set_u(&p->ppid, &p->flags, GPUMON_PROC_PPID_KNOWN, row->u.process.ppid);
	if (row->u.process.user) {
		snprintf(p->user, sizeof p->user, "%s", row->u.process.user);
		p->flags |= GPUMON_PROC_USER_KNOWN;
	}
	if (row->u.process.name) {
		snprintf(p->name, sizeof p->name, "%s", row->u.process.name);
		p->flags |= GPUMON_PROC_NAME_KNOWN;
	}
	if (row->u.process.command) {
		snprintf(p->cmdline, sizeof p->cmdline, "%s", row->u.process.command);
		p->flags |= GPUMON_PROC_CMDLINE_KNOWN;
	}
	return 1;
}

int watch_replay_advance(watch_replay *r, uint64_t now_ns, watch_model *m, char *err, size_t errlen)
{
	if (!r->started) {
		r->started = 1;
		r->clock_wall_ns = now_ns;
		r->clock_rec_ns = r->first_t_ns;
	}
	uint64_t pos = wall_to_rec(r, now_ns);
	while (!r->ended) {
		if (!r->have_pending) {
			recrow row;
			int st = recfile_iter_next(r->it, &row);
			if (st < 0) {
				snprintf(err, errlen, "reading the recording %s failed: %s", r->file,
					 r->rf.damage[0] ? r->rf.damage : "unreadable");
				r->ended = 1;
				return -1;
			}
			if (st == 0) {
				r->ended = 1;
				break;
			}
			r->have_pending = to_record(&row, &r->pending);
			if (!r->have_pending)
				continue;
		}
		if (r->pending.t_ns > pos)
			break;
		if (watch_model_record(m, &r->pending) != GPUMON_OK) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		r->have_pending = 0;
	}
	for (int i = 0; i < r->rf.ndevices; i++) {
		const recfile_device *d = &r->rf.devices[i];
		if (d->lost_t_ns >= 0 && (uint64_t)d->lost_t_ns <= pos && d->dev >= 0 && !r->lost_fed[d->dev]) {
			gpumon_record lost = {.kind = GPUMON_REC_LOST, .dev = (unsigned)d->dev, .t_ns = (uint64_t)d->lost_t_ns};
			r->lost_fed[d->dev] = 1;
			watch_model_record(m, &lost);
		}
	}
	return r->ended && (int64_t)pos >= r->end_t_ns;
}

void watch_replay_pause(watch_replay *r, int paused, uint64_t now_ns)
{
	if (paused == r->paused)
		return;
	r->clock_rec_ns = (int64_t)wall_to_rec(r, now_ns);
	r->clock_wall_ns = now_ns;
	r->paused = paused;
}

void watch_replay_set_speed(watch_replay *r, double speed, uint64_t now_ns)
{
	r->clock_rec_ns = (int64_t)wall_to_rec(r, now_ns);
	r->clock_wall_ns = now_ns;
	r->speed = speed;
}

double watch_replay_speed(const watch_replay *r)
{
	return r->speed;
}

static void mmss(char *buf, size_t len, double s)
{
	unsigned t = s > 0 ? (unsigned)s : 0;
	if (t >= 3600)
		snprintf(buf, len, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, len, "%02u:%02u", t / 60, t % 60);
}

void watch_replay_position(const watch_replay *r, char *buf, size_t len)
{
	char a[16], b[16];
	int64_t pos = (int64_t)wall_to_rec(r, cli_now_ns());
	if (pos > r->end_t_ns)
		pos = r->end_t_ns;
	mmss(a, sizeof a, (double)(pos - r->first_t_ns) / 1e9);
	mmss(b, sizeof b, (double)(r->end_t_ns - r->first_t_ns) / 1e9);
	if (r->ended && pos >= r->end_t_ns)
		snprintf(buf, len, "END of recording %s / %s", a, b);
	else
		snprintf(buf, len, "%s / %s  speed %gx", a, b, r->speed);
}

const char *watch_replay_file(const watch_replay *r)
{
	return r->file;
}
