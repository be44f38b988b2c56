/* SPDX-License-Identifier: MIT */
/* cmd_record.c — `gpumon record`: a system-wide recording of the chosen GPUs and their processes
 * into a SQLite file, until Ctrl-C or the duration. The sampler takes the samples; this loop only
 * moves its records into the file. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define BATCH 256
/* Without the sampler's descriptor, records wait at most this long in its queue; with the
 * recording's 200 ms commit rule a kill -9 loses at most 0.25 s. */
#define DRAIN_MS 40
/* Rows written are committed by the recording once its last commit is 200 ms old, at a write: the
 * loop writes (nothing, if nothing came) this long after rows, so that they are committed in time */
#define COMMIT_DUE_NS 210000000ull

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void help(void)
{
	printf("Usage: gpumon record [-o FILE] [-i GPUS] [--interval MS] [--duration S]\n"
	       "Records GPU memory (every MS milliseconds, change-only with exact peaks between\n"
	       "records), utilisation, temperature, power and clocks (every second) and the processes\n"
	       "holding memory (every 100 ms) into a SQLite file, until Ctrl-C or the duration.\n\n"
	       "Options:\n"
	       "  -o, --output FILE   the recording (default ./gpumon-record-YYYYmmdd-HHMMSS.gpumon);\n"
	       "                      an existing file is never overwritten\n"
	       "  -i, --id GPUS       only these GPUs: comma-separated indexes, UUIDs or PCI bus ids\n"
	       "  --interval MS       memory sampling period, 1 to 60000 ms (default 10)\n"
	       "  --duration S        stop after S seconds (default: until Ctrl-C)\n"
	       "  -h, --help          this help\n"
	       "Read it with `gpumon export FILE --csv` or the sqlite3 shell (docs/recording.md).\n");
}

struct opts {
	const char *out, *ids;
	unsigned interval_ms;
	double duration_s;
};

static int parse_number(const char *opt, const char *v, double lo, double hi, double *out)
{
	char *end;
	double x = strtod(v, &end);
	if (end == v || *end || !(x >= lo && x <= hi)) {
		cli_error("record: %s '%s': expected a number from %g to %g", opt, v, lo, hi);
		return EXIT_USAGE;
	}
	*out = x;
	return EXIT_OK;
}

static int parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->interval_ms = 10;
	for (int i = 1; i < argc; i++) {
		int bad = 0, rc = EXIT_OK;
		double x;
		const char *v;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if ((v = cli_option_value(argc, argv, &i, "--output", "-o", &bad))) {
			o->out = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--id", "-i", &bad))) {
			o->ids = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--interval", NULL, &bad))) {
			rc = parse_number("--interval", v, 1, 60000, &x);
			o->interval_ms = (unsigned)x;
			if (rc == EXIT_OK && x != (double)o->interval_ms) {
				cli_error("record: --interval '%s': expected a whole number of milliseconds", v);
				rc = EXIT_USAGE;
			}
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--duration", NULL, &bad))) {
			rc = parse_number("--duration", v, 0.001, 1e9, &o->duration_s);
		} else {
			if (!bad)
				cli_error("record: unknown option '%s' (see gpumon record --help)", argv[i]);
			return EXIT_USAGE;
		}
		if (bad || rc != EXIT_OK)
			return rc != EXIT_OK ? rc : EXIT_USAGE;
	}
	return EXIT_OK;
}

/* What the summary says of each GPU: its peak, and when it was lost (0: it was not). */
struct seen {
	uint64_t *peak, *peak_t, *lost_t;
	unsigned ndev;
	uint64_t started_ns;
};

/* Says a GPU's loss the moment its record comes: the recording goes on with the others. */
static void note_lost(struct seen *v, const gpumon_record *rec)
{
	if (rec->dev >= v->ndev || v->lost_t[rec->dev])
		return;
	v->lost_t[rec->dev] = rec->t_ns ? rec->t_ns : 1;
	cli_error("GPU %u is lost at %.1f s: it fell off the bus or needs a reset; the recording goes on with "
		  "the other GPUs",
		  rec->dev, rec->t_ns > v->started_ns ? (double)(rec->t_ns - v->started_ns) / 1e9 : 0.0);
}

/* Moves queued records into the file (*moved: how many). A failed write is said at once, with the
 * file's reason (into why, for the summary); returns its status. */
static int drain(gpumon_sampler *s, gpumon_recording *r, gpumon_record *buf, int timeout_ms, struct seen *v,
		 char *why, size_t whylen, size_t *moved)
{
	size_t n = 0;
	gpumon_sampler_poll(s, buf, BATCH, &n, timeout_ms);
	*moved = n;
	for (size_t i = 0; i < n; i++) {
		unsigned d = buf[i].dev;
		if (buf[i].kind == GPUMON_REC_DEVICE && d < v->ndev && buf[i].used_max_bytes > v->peak[d]) {
			v->peak[d] = buf[i].used_max_bytes;
			v->peak_t[d] = buf[i].used_max_t_ns;
		} else if (buf[i].kind == GPUMON_REC_LOST) {
			note_lost(v, &buf[i]);
		} else if (buf[i].kind == GPUMON_REC_EVENT && buf[i].event_text &&
			   (!strcmp(buf[i].event_kind, GPUMON_EVENT_STALE) ||
			    !strcmp(buf[i].event_kind, GPUMON_EVENT_ANSWERING))) {
			/* a GPU whose driver calls hang, and its return: said as it happens (the file keeps both) */
			fprintf(stderr, "gpumon: %s\n", buf[i].event_text);
		}
	}
	int st = gpumon_recording_write(r, buf, n); /* even empty: it commits what is 200 ms old */
	if (st != GPUMON_OK) {
		snprintf(why, whylen, "%s", gpumon_recording_errmsg(r)[0] ? gpumon_recording_errmsg(r) : gpumon_strerror(st));
		cli_error("%s; recording stopped, what was written stays readable", why);
	}
	return st;
}

static void default_name(char *buf, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;
	strftime(buf, len, "gpumon-record-%Y%m%d-%H%M%S.gpumon", localtime_r(&now, &tm));
}

/* The last lines: the file, how long, what was lost (records, a GPU, the end of the recording) and
 * each GPU's peak. why: the reason the recording stopped early, "" when it did not. */
static void summary(const char *path, gpumon_sampler_stats *st, const struct seen *v, const unsigned *sel,
		    unsigned count, const char *why)
{
	double secs = (double)(cli_now_ns() - st->started_ns) / 1e9;
	fprintf(stderr, "gpumon: recording %s%s%s%s: %.1f s, %llu samples, %llu records", path,
		why[0] ? " (stopped early: " : "", why, why[0] ? ")" : "", secs, (unsigned long long)st->samples,
		(unsigned long long)st->records);
	if (st->dropped)
		fprintf(stderr, ", %llu records DROPPED (the disk was too slow)", (unsigned long long)st->dropped);
	fputc('\n', stderr);
	for (unsigned k = 0; k < count; k++) {
		char b[32];
		unsigned d = sel[k];
		if (v->peak_t[d])
			fprintf(stderr, "  GPU %u peak %s at %.3f s\n", d, cli_format_bytes(b, sizeof b, v->peak[d]),
				(double)(v->peak_t[d] - st->started_ns) / 1e9);
		if (v->lost_t[d])
			fprintf(stderr, "  GPU %u LOST at %.3f s: nothing of it was recorded after that\n", d,
				v->lost_t[d] > st->started_ns ? (double)(v->lost_t[d] - st->started_ns) / 1e9 : 0.0);
	}
}

int cmd_record(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	gpumon *g = cli_open(&rc);
	if (!g)
		return rc;
	unsigned n = gpumon_device_count(g), count = 0;
	unsigned *sel = calloc(n ? n : 1, sizeof *sel);
	struct seen seen = {calloc(n ? n : 1, sizeof(uint64_t)), calloc(n ? n : 1, sizeof(uint64_t)),
			    calloc(n ? n : 1, sizeof(uint64_t)), n, 0};
	gpumon_record *buf = malloc(BATCH * sizeof *buf);
	gpumon_recording *r = NULL;
	gpumon_sampler *s = NULL;
	char name[64], why[512] = "";
	const char *path = o.out;
	if (!sel || !seen.peak || !seen.peak_t || !seen.lost_t || !buf) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
		goto out;
	}
	rc = cli_select_devices(g, o.ids, sel, n, &count);
	if (rc != EXIT_OK)
		goto out;
	if (!path) {
		default_name(name, sizeof name);
		path = name;
	}
	signal(SIGXFSZ, SIG_IGN); /* a file-size limit is a full disk: an error, not death */
	gpumon_run_meta info = {.size = sizeof info, .kind = "record"};
	int st = gpumon_recording_create(g, path, &info, &r);
	if (st != GPUMON_OK) {
		cli_error("%s", r ? gpumon_recording_errmsg(r) : gpumon_strerror(st));
		rc = st == GPUMON_E_EXISTS ? EXIT_USAGE : EXIT_OTHER;
		goto out;
	}
	gpumon_sampler_config c = {.size = sizeof c, .period_us = o.interval_ms * 1000u, .devices = sel, .ndevices = count};
	st = gpumon_sampler_create(g, &c, &s);
	if (st != GPUMON_OK) {
		cli_error("%s", gpumon_errmsg(g));
		rc = cli_exit_status(st);
		goto out;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal); /* the terminal closed: the recording is closed as on Ctrl-C */
	fprintf(stderr, "gpumon: recording %u GPU%s every %u ms into %s%s\n", count, count == 1 ? "" : "s",
		o.interval_ms, path, o.duration_s > 0 ? "" : " (Ctrl-C to stop)");
	gpumon_sampler_stats ss;
	gpumon_sampler_stats_get(s, &ss);
	seen.started_ns = ss.started_ns;
	uint64_t end = o.duration_s > 0 ? cli_now_ns() + (uint64_t)(o.duration_s * 1e9) : 0;
	int write_failed = 0;
	size_t moved = 0;
	/* The loop sleeps until the sampler has records (its descriptor), rows are due for their
	   commit, a signal comes or the end, rather than waking every DRAIN_MS: on an idle GPU, twice
	   a second (its heartbeat, then the commit); cli_wait does not sleep through a stop signal. No
	   descriptor (none to spare): every DRAIN_MS. */
	int fd = gpumon_sampler_fd(s);
	uint64_t due = 0;   /* when rows written are due for their commit; 0 none */
	size_t written = 0; /* records moved into the file */
	sigset_t stops;
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	for (;;) {
		uint64_t now = cli_now_ns();
		if (stop_signal || (end && now >= end) || write_failed)
			break;
		if (fd >= 0) {
			uint64_t until = end;
			if (due && (!until || due < until))
				until = due;
			cli_wait(fd, until, &stops, &stop_signal);
			if (stop_signal)
				break;
		}
		write_failed = drain(s, r, buf, fd >= 0 ? 0 : DRAIN_MS, &seen, why, sizeof why, &moved) != GPUMON_OK;
		now = cli_now_ns();
		written += moved;
		if (moved)
			due = now + COMMIT_DUE_NS;
		else if (due && now >= due)
			due = 0; /* the write just made committed them */
	}
	/* what is queued now, and what the round under way brings; a recording stopped before the
	   first round's records came waits for them (a second at most), so that it is not empty */
	int wait_ms = written ? DRAIN_MS : 1000;
	do {
		write_failed = write_failed || drain(s, r, buf, wait_ms, &seen, why, sizeof why, &moved) != GPUMON_OK;
		written += moved;
		wait_ms = 0;
	} while (!write_failed && moved);
	gpumon_sampler_stats_get(s, &ss);
	gpumon_sampler_destroy(s);
	s = NULL;
	if (!write_failed && ss.dropped) {
		char text[96];
		snprintf(text, sizeof text, "%llu records dropped: the recording could not keep up",
			 (unsigned long long)ss.dropped);
		cli_record_event(r, cli_now_ns(), GPUMON_EVENT_NOTE, text);
	}
	st = gpumon_recording_finish(r, -1);
	if (st != GPUMON_OK && !write_failed) { /* the last rows and the end time could not be written */
		snprintf(why, sizeof why, "%s", gpumon_recording_errmsg(r)[0] ? gpumon_recording_errmsg(r) : gpumon_strerror(st));
		cli_error("closing the %s; what was written before stays readable", why);
	}
	gpumon_recording_destroy(r);
	r = NULL;
	summary(path, &ss, &seen, sel, count, why);
	/* a lost GPU is an error for scripts (15, as nvidia-smi's "GPU is lost") though the recording
	   keeps all it got; a recording that could not be written says more, and wins */
	int lost = 0;
	for (unsigned k = 0; k < count; k++)
		lost |= seen.lost_t[sel[k]] != 0;
	rc = write_failed || st != GPUMON_OK ? EXIT_OTHER : lost ? EXIT_GPU_LOST : EXIT_OK;
out:
	gpumon_sampler_destroy(s);
	gpumon_recording_destroy(r);
	free(buf);
	free(seen.peak);
	free(seen.peak_t);
	free(seen.lost_t);
	free(sel);
	gpumon_destroy(g);
	return rc;
}
