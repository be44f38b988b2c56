/* SPDX-License-Identifier: MIT */
/* watch_replay.c — `gpumon watch --replay FILE`: plays a recording (docs/recording.md) through the
 * library's reader into the display state and the run model at the speed asked for, as if its
 * records came from the sampler now. The reader walks the file one record at a time, so a recording
 * of days plays in bounded memory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "watch.h"

struct watch_replay {
	gpumon_reader *rd;
	gpumon_record pending;  /* the next record, not yet due (its strings live until the next read) */
	int have_pending, ended;
	uint64_t first_t_ns;    /* the recording's span on its own clock: its start ... */
	uint64_t end_t_ns;      /* ... and its end: the recorded one, else the last record once read */
	int end_known;
	double speed;           /* 0: as fast as it can */
	int paused, started;
	uint64_t clock_rec_ns;  /* the play position ... */
	uint64_t clock_wall_ns; /* ... at this wall time */
	char file[256];
	char *path;             /* to open it again for a seek backwards */
};

int watch_replay_open(const char *path, double speed, watch_replay **out, char *err, size_t errlen)
{
	watch_replay *r = calloc(1, sizeof *r);
	*out = NULL;
	if (!r) {
		snprintf(err, errlen, "out of memory");
		return EXIT_OTHER;
	}
	int st = gpumon_reader_create(path, &r->rd);
	if (st != GPUMON_OK) {
		snprintf(err, errlen, "%s", r->rd && gpumon_reader_errmsg(r->rd)[0] ? gpumon_reader_errmsg(r->rd)
										 : gpumon_strerror(st));
		gpumon_reader_destroy(r->rd);
		free(r);
		return EXIT_OTHER;
	}
	r->path = strdup(path);
	if (!r->path) {
		snprintf(err, errlen, "out of memory");
		watch_replay_close(r);
		return EXIT_OTHER;
	}
	const char *base = strrchr(path, '/');
	snprintf(r->file, sizeof r->file, "%s", base ? base + 1 : path);
	r->speed = speed;
	const gpumon_run_meta *meta = gpumon_reader_meta(r->rd);
	r->first_t_ns = meta->start_mono_ns;
	r->end_known = meta->end_mono_ns != 0; /* a recording cut short says where it ends once read */
	r->end_t_ns = r->end_known ? meta->end_mono_ns : r->first_t_ns;
	*out = r;
	return EXIT_OK;
}

void watch_replay_close(watch_replay *r)
{
	if (!r)
		return;
	gpumon_reader_destroy(r->rd);
	free(r->path);
	free(r);
}

const gpumon_run_meta *watch_replay_meta(const watch_replay *r)
{
	return gpumon_reader_meta(r->rd);
}

unsigned watch_replay_ngpu(const watch_replay *r)
{
	return gpumon_reader_device_count(r->rd);
}

void watch_replay_info(const watch_replay *r, unsigned dev, gpumon_device_info *out)
{
	if (gpumon_reader_device(r->rd, dev, out) != GPUMON_OK) {
		memset(out, 0, sizeof *out);
		out->index = dev;
	}
}

void watch_replay_describe(const watch_replay *r, char *buf, size_t len)
{
	const gpumon_run_meta *meta = gpumon_reader_meta(r->rd);
	const char *damage = gpumon_reader_damage(r->rd);
	char date[48] = "date unknown";
	if (meta->start_wall_ns) {
		time_t t = (time_t)(meta->start_wall_ns / 1000000000u);
		struct tm tm;
		strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime_r(&t, &tm));
	}
	int system_wide = !meta->kind || !strcmp(meta->kind, "record");
	const char *what = meta->command ? meta->command : system_wide ? "all processes (gpumon record)" : "command unknown";
	char host[256], cmd[1024], lost[1024]; /* the file's strings, escaped */
	snprintf(buf, len, "RECORDING of %s, %s: %s%s%s",
		 cli_safe_text(host, sizeof host, meta->host && meta->host[0] ? meta->host : "an unknown host"), date,
		 cli_safe_text(cmd, sizeof cmd, what), damage[0] ? "; " : "", cli_safe_text(lost, sizeof lost, damage));
}

/* The play position at wall time now_ns, on the recording's clock. */
static uint64_t wall_to_rec(const watch_replay *r, uint64_t now_ns)
{
	if (r->speed == 0 && r->started)
		return UINT64_MAX;
	if (r->paused || !r->started || now_ns < r->clock_wall_ns)
		return r->clock_rec_ns;
	return r->clock_rec_ns + (uint64_t)((double)(now_ns - r->clock_wall_ns) * r->speed);
}

/* Reads the next record into pending; returns 1, 0 at the end, < 0 when the file failed. */
static int read_next(watch_replay *r, char *err, size_t errlen)
{
	int st = gpumon_reader_next(r->rd, &r->pending);
	if (st < 0) {
		const char *damage = gpumon_reader_damage(r->rd);
		snprintf(err, errlen, "reading the recording %s failed: %s", r->file,
			 damage[0] ? damage : gpumon_reader_errmsg(r->rd));
		r->ended = 1;
		return st;
	}
	if (st == 0) {
		r->ended = 1;
		return 0;
	}
	r->have_pending = 1;
	return 1;
}

int watch_replay_advance(watch_replay *r, uint64_t now_ns, const watch_sink *s, char *err, size_t errlen)
{
	if (!r->started) {
		r->started = 1;
		r->clock_wall_ns = now_ns;
		r->clock_rec_ns = r->first_t_ns;
	}
	uint64_t pos = wall_to_rec(r, now_ns);
	while (!r->ended) {
		if (!r->have_pending) {
			int st = read_next(r, err, errlen);
			if (st < 0)
				return -1;
			if (st == 0)
				break;
		}
		if (r->pending.t_ns > pos)
			break;
		if (watch_feed(s, &r->pending) != GPUMON_OK) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		if (!r->end_known && r->pending.t_ns > r->end_t_ns)
			r->end_t_ns = r->pending.t_ns;
		r->have_pending = 0;
	}
	if (r->ended)
		r->end_known = 1;
	if (r->ended && pos > r->end_t_ns && r->speed != 0) {
		/* the clock stops at the end, so that a seek back counts from there */
		r->clock_rec_ns = r->end_t_ns;
		r->clock_wall_ns = now_ns;
	}
	return r->ended && pos >= r->end_t_ns;
}

/* Opens the file again, before its first record: the records are fed again from the start. */
static int rewind_reader(watch_replay *r, char *err, size_t errlen)
{
	gpumon_reader *rd = NULL;
	int st = gpumon_reader_create(r->path, &rd);
	if (st != GPUMON_OK) {
		snprintf(err, errlen, "opening the recording %s again failed: %s", r->file,
			 rd && gpumon_reader_errmsg(rd)[0] ? gpumon_reader_errmsg(rd) : gpumon_strerror(st));
		gpumon_reader_destroy(rd);
		return -1;
	}
	gpumon_reader_destroy(r->rd);
	r->rd = rd;
	r->have_pending = 0;
	r->ended = 0;
	return 0;
}

int watch_replay_seek(watch_replay *r, int whence, int64_t offset_ns, uint64_t now_ns, char *err, size_t errlen)
{
	if (!r->started)
		return 0;
	if (r->speed == 0) /* played to its end at once: from now on it plays in real time */
		r->speed = 1;
	uint64_t pos = wall_to_rec(r, now_ns), target;
	if (r->end_known && pos > r->end_t_ns)
		pos = r->end_t_ns;
	if (whence == WATCH_SEEK_START)
		target = r->first_t_ns;
	else if (whence == WATCH_SEEK_END)
		target = r->end_known ? r->end_t_ns : UINT64_MAX / 2; /* the end, once read */
	else if (offset_ns < 0)
		target = pos - r->first_t_ns > (uint64_t)-offset_ns ? pos - (uint64_t)-offset_ns : r->first_t_ns;
	else
		target = pos + (uint64_t)offset_ns;
	if (r->end_known && target > r->end_t_ns)
		target = r->end_t_ns;
	r->clock_rec_ns = target;
	r->clock_wall_ns = now_ns;
	if (target >= pos)
		return 0;
	return rewind_reader(r, err, errlen) < 0 ? -1 : 1;
}

void watch_replay_pause(watch_replay *r, int paused, uint64_t now_ns)
{
	if (paused == r->paused || r->speed == 0)
		return;
	r->clock_rec_ns = wall_to_rec(r, now_ns);
	r->clock_wall_ns = now_ns;
	r->paused = paused;
}

void watch_replay_set_speed(watch_replay *r, double speed, uint64_t now_ns)
{
	if (r->speed == 0) /* it has played to its end already */
		return;
	r->clock_rec_ns = wall_to_rec(r, now_ns);
	r->clock_wall_ns = now_ns;
	r->speed = speed;
}

double watch_replay_speed(const watch_replay *r)
{
	return r->speed;
}

static void mmss(char *buf, size_t len, double s)
{
	/* a hand-edited end can lie centuries away: hours then, and never a cast past the type */
	unsigned long long t = s > 0 ? (s < 1e15 ? (unsigned long long)s : 1000000000000000ull) : 0;
	if (t >= 3600)
		snprintf(buf, len, "%llu:%02llu:%02llu", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(buf, len, "%02llu:%02llu", t / 60, t % 60);
}

void watch_replay_position(const watch_replay *r, char *buf, size_t len)
{
	char a[32], b[32] = "?";
	uint64_t pos = wall_to_rec(r, cli_now_ns());
	if (r->end_known && pos > r->end_t_ns)
		pos = r->end_t_ns;
	mmss(a, sizeof a, ((double)pos - (double)r->first_t_ns) / 1e9);
	if (r->end_known)
		mmss(b, sizeof b, ((double)r->end_t_ns - (double)r->first_t_ns) / 1e9);
	if (r->ended && pos >= r->end_t_ns)
		snprintf(buf, len, "END of recording %s / %s", a, b);
	else
		snprintf(buf, len, "%s / %s  speed %gx", a, b, r->speed);
}

const char *watch_replay_file(const watch_replay *r)
{
	return r->file;
}
