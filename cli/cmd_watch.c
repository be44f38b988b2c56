/* SPDX-License-Identifier: MIT */
/* cmd_watch.c — `gpumon watch`: the live terminal view. Records come from the library's sampler
 * (or from a recording with --replay, or the bundled recording when this machine has no NVIDIA
 * driver) into the watch model; the screen is redrawn from a snapshot of it every interval and
 * after each key. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "watch_draw.h"

#define BATCH 256
#define FIRST_REFRESH_NS 150000000ull
#define BUNDLED_NAME "h200_train_leak.gpumon"
#ifndef GPUMON_SOURCE_DIR
#define GPUMON_SOURCE_DIR "."
#endif
#ifndef GPUMON_DATA_DIR
#define GPUMON_DATA_DIR "/usr/local/share/gpumon"
#endif
#define MIN_SPEED (1.0 / 64)
#define MAX_SPEED 1024.0

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void help(void)
{
	printf("Usage: gpumon watch [-i GPUS] [--interval MS] [--replay FILE [--speed X]]\n"
	       "The live view: per GPU a memory bar (driver-reserved, the selected process's share, used,\n"
	       "free), utilisation, temperature, power and a memory graph of the last minutes; the\n"
	       "processes holding memory (GPU, pid, user, memory, change per minute, command), largest\n"
	       "first, marked with ! when the leak detector sees their memory rising steadily; when a\n"
	       "GPU is nearly full, who holds it. Keys: q quit, arrows PgUp PgDn move, s sort, g GPU,\n"
	       "u user, c clear filters, p pause, + - replay speed, h help. Needs an 80x24 terminal.\n\n"
	       "Options:\n"
	       "  -i, --id GPUS   only these GPUs: comma-separated indexes, UUIDs or PCI bus ids\n"
	       "  --interval MS   refresh and sampling period, 50 to 60000 ms (default 1000)\n"
	       "  --replay FILE   play a recording (gpumon record, gpumon run) instead of this machine\n"
	       "  --speed X       replay speed, %g to %g (default 1: real time)\n"
	       "  -h, --help      this help\n\n"
	       "Without an NVIDIA driver it plays a bundled recording of a training job with a leak,\n"
	       "and says so on the screen. NO_COLOR set: no colours. See gpumon(1).\n",
	       MIN_SPEED, MAX_SPEED);
}

struct opts {
	unsigned interval_ms;
	const char *ids;
	const char *replay;
	double speed;
	int speed_given, interval_given;
};

static int parse(int argc, char **argv, struct opts *o)
{
	memset(o, 0, sizeof *o);
	o->interval_ms = 1000;
	o->speed = 1;
	for (int i = 1; i < argc; i++) {
		int bad = 0;
		const char *v;
		char *end;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if ((v = cli_option_value(argc, argv, &i, "--interval", NULL, &bad))) {
			long x = strtol(v, &end, 10);
			if (end == v || *end || x < 50 || x > 60000) {
				cli_error("watch: --interval '%s': expected a whole number of milliseconds from 50 "
					  "to 60000", v);
				return EXIT_USAGE;
			}
			o->interval_ms = (unsigned)x;
			o->interval_given = 1;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--id", "-i", &bad))) {
			o->ids = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--replay", NULL, &bad))) {
			o->replay = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--speed", NULL, &bad))) {
			o->speed = strtod(v, &end);
			if (end == v || *end || !(o->speed >= MIN_SPEED && o->speed <= MAX_SPEED)) {
				cli_error("watch: --speed '%s': expected a number from %g to %g", v, MIN_SPEED, MAX_SPEED);
				return EXIT_USAGE;
			}
			o->speed_given = 1;
		} else {
			if (!bad)
				cli_error("watch: unknown option '%s' (see gpumon watch --help)", argv[i]);
			return EXIT_USAGE;
		}
		if (bad)
			return EXIT_USAGE;
	}
	if (o->speed_given && !o->replay) {
		cli_error("watch: --speed applies to --replay only");
		return EXIT_USAGE;
	}
	if (o->ids && o->replay) {
		cli_error("watch: -i applies to this machine's GPUs; in a replay, g shows one GPU at a time");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* The recording played when this machine has no NVIDIA driver: in the source tree this program was
 * built from, else where `make install` put it. NULL when neither exists. */
static const char *bundled_recording(void)
{
	static const char *const paths[] = {GPUMON_SOURCE_DIR "/examples/recordings/" BUNDLED_NAME,
					    GPUMON_DATA_DIR "/" BUNDLED_NAME};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
		if (access(paths[i], R_OK) == 0)
			return paths[i];
	return NULL;
}

/* Where the records come from: the sampler, or a replay. */
struct source {
	gpumon *g;
	gpumon_sampler *s;
	watch_replay *r;
	gpumon_record *buf;
	int replay_over;
	char err[256];
};

/* Moves what the source has for now into the model. Returns 0, or -1 with src->err set. */
static int feed(struct source *src, watch_model *m, uint64_t now_ns)
{
	if (src->r) {
		int st = watch_replay_advance(src->r, now_ns, m, src->err, sizeof src->err);
		if (st < 0)
			return -1;
		src->replay_over = st;
		return 0;
	}
	size_t n;
	do {
		n = 0;
		gpumon_sampler_poll(src->s, src->buf, BATCH, &n, 0);
		for (size_t i = 0; i < n; i++)
			if (watch_model_record(m, &src->buf[i]) != GPUMON_OK) {
				snprintf(src->err, sizeof src->err, "out of memory");
				return -1;
			}
	} while (n == BATCH);
	return 0;
}

static void set_title(watch_view *v, const struct source *src)
{
	if (src->r) {
		watch_replay_position(src->r, v->position, sizeof v->position);
		return;
	}
	char host[64] = "", clock[16];
	time_t now = time(NULL);
	struct tm tm;
	gethostname(host, sizeof host - 1);
	strftime(clock, sizeof clock, "%H:%M:%S", localtime_r(&now, &tm));
	snprintf(v->title, sizeof v->title, "live on %s  %s  every %u ms", host, clock, v->interval_ms);
}

/* A key at the user filter prompt. */
static void prompt_key(watch_view *v, int ch)
{
	size_t n = strlen(v->input);
	if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		snprintf(v->user_filter, sizeof v->user_filter, "%s", v->input);
		v->prompting = 0;
		v->cur = v->top = 0;
	} else if (ch == 27) {
		v->prompting = 0;
	} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
		if (n)
			v->input[n - 1] = 0;
	} else if (ch > ' ' && ch < 127 && n + 1 < sizeof v->input) {
		v->input[n] = (char)ch;
		v->input[n + 1] = 0;
	}
}

/* Handles one key; returns 1 to quit. */
static int key(watch_view *v, struct source *src, unsigned ngpu, int ch)
{
	v->message[0] = 0;
	if (v->prompting) {
		prompt_key(v, ch);
		return 0;
	}
	if (ch == 'q' || ch == 'Q')
		return 1;
	if (v->help) { /* any other key leaves the help screen */
		if (ch != KEY_RESIZE)
			v->help = 0;
		return 0;
	}
	if (ch == KEY_UP || ch == KEY_DOWN || ch == KEY_PPAGE || ch == KEY_NPAGE || ch == KEY_HOME || ch == KEY_END ||
	    ch == 'j' || ch == 'k')
		v->moved = 1;
	switch (ch) {
	case KEY_UP: case 'k': v->cur = v->cur ? v->cur - 1 : 0; break;
	case KEY_DOWN: case 'j': v->cur++; break;
	case KEY_PPAGE: v->cur = v->cur > v->page_rows ? v->cur - v->page_rows : 0; break;
	case KEY_NPAGE: v->cur += v->page_rows; break;
	case KEY_HOME: v->cur = 0; break;
	case KEY_END: v->cur = (size_t)-1 / 2; break;
	case 's': v->sort = (v->sort + 1) % WATCH_SORT_COUNT; break;
	case 'S': v->sort = (v->sort + WATCH_SORT_COUNT - 1) % WATCH_SORT_COUNT; break;
	case 'g': { /* the next watched GPU alone, then all again */
		int next = v->gpu_filter + 1;
		while (next < (int)ngpu && v->picked && !v->picked[next])
			next++;
		v->gpu_filter = next >= (int)ngpu ? -1 : next;
		v->cur = v->top = 0;
		break;
	}
	case 'u':
		v->prompting = 1;
		snprintf(v->input, sizeof v->input, "%s", v->user_filter);
		break;
	case 'c':
		v->gpu_filter = -1;
		v->user_filter[0] = 0;
		break;
	case 'p': case ' ':
		v->paused = !v->paused;
		if (src->r)
			watch_replay_pause(src->r, v->paused, cli_now_ns());
		break;
	case 'h': case '?': v->help = 1; break;
	case 12: clearok(curscr, TRUE); break; /* Ctrl-L: redraw everything (a garbled SSH screen) */
	case '+': case '-':
		if (!src->r) {
			snprintf(v->message, sizeof v->message, "+ and - change the speed of a replay; this is live");
			break;
		}
		double sp = watch_replay_speed(src->r) * (ch == '+' ? 2 : 0.5);
		if (sp >= MIN_SPEED && sp <= MAX_SPEED)
			watch_replay_set_speed(src->r, sp, cli_now_ns());
		break;
	default: break;
	}
	return 0;
}

/* The loop: feed, snapshot (unless paused), draw every interval; keys in between. */
static int loop(struct source *src, watch_model *m, watch_view *v, unsigned ngpu)
{
	watch_snap snap;
	memset(&snap, 0, sizeof snap);
	uint64_t interval_ns = (uint64_t)v->interval_ms * 1000000u, next = cli_now_ns();
	int rc = EXIT_OK, dirty = 1, first = 1;
	while (!stop_signal) {
		uint64_t now = cli_now_ns();
		if (now >= next) {
			if (feed(src, m, now) < 0) {
				rc = EXIT_OTHER;
				break;
			}
			if (!v->paused && watch_model_snapshot(m, &snap) != GPUMON_OK) {
				snprintf(src->err, sizeof src->err, "out of memory");
				rc = EXIT_OTHER;
				break;
			}
			next += interval_ns;
			if (next <= now)
				next = now + interval_ns;
			if (first) { /* the sampler's first records come just after the start: show them */
				next = now + (interval_ns < FIRST_REFRESH_NS ? interval_ns : FIRST_REFRESH_NS);
				first = 0;
			}
			dirty = 1;
		}
		if (dirty) {
			set_title(v, src);
			watch_draw(&snap, v);
			dirty = 0;
		}
		struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
		now = cli_now_ns();
		int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		if (poll(&pfd, 1, wait_ms) < 0 && errno != EINTR)
			break;
		int ch, quit = 0;
		while (!quit && (ch = getch()) != ERR) {
			int was_paused = v->paused;
			quit = key(v, src, ngpu, ch);
			if (was_paused && !v->paused)
				watch_model_snapshot(m, &snap);
			dirty = 1;
		}
		if (quit)
			break;
		if (pfd.revents & (POLLHUP | POLLERR))
			break; /* the terminal went away */
	}
	watch_snap_free(&snap);
	return rc;
}

int cmd_watch(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		cli_error("watch: needs a terminal (stdin and stdout); in scripts use `gpumon`, `gpumon query` "
			  "or `gpumon record`");
		return EXIT_USAGE;
	}
	struct source src;
	memset(&src, 0, sizeof src);
	watch_view v;
	memset(&v, 0, sizeof v);
	v.gpu_filter = -1;
	v.interval_ms = o.interval_ms;
	watch_model *m = NULL;
	unsigned char *picked = NULL; /* with -i: the GPUs watched */
	unsigned *sel = NULL, nsel = 0;
	const char *replay = o.replay;
	if (!replay) {
		src.g = cli_open(&rc);
		if (!src.g && rc != EXIT_NO_LIBRARY)
			return rc;
		if (!src.g && o.ids) {
			cli_error("watch: -i needs the driver; without -i, gpumon watch plays a bundled recording");
			return rc;
		}
		if (!src.g) {
			replay = bundled_recording();
			if (!replay) {
				cli_error("watch: and the bundled recording %s is not installed either (looked in "
					  "%s/examples/recordings and %s)", BUNDLED_NAME, GPUMON_SOURCE_DIR, GPUMON_DATA_DIR);
				return rc;
			}
			snprintf(v.banner[1], sizeof v.banner[1],
				 "No NVIDIA driver (libnvidia-ml.so.1 not found): a recording, not this machine");
		}
	}
	unsigned ngpu;
	if (replay) {
		rc = watch_replay_open(replay, o.speed, &src.r, src.err, sizeof src.err);
		if (rc != EXIT_OK) {
			cli_error("watch: %s", src.err);
			return rc;
		}
		ngpu = watch_replay_ngpu(src.r);
		snprintf(v.title, sizeof v.title, "REPLAY of %s", watch_replay_file(src.r));
		watch_replay_describe(src.r, v.banner[0], sizeof v.banner[0]);
		if (!o.interval_given) /* the clock on the screen moves more smoothly */
			v.interval_ms = 500;
	} else {
		ngpu = gpumon_device_count(src.g);
	}
	if (o.ids) {
		sel = malloc((ngpu ? ngpu : 1) * sizeof *sel);
		picked = calloc(ngpu ? ngpu : 1, 1);
		if (!sel || !picked) {
			cli_error("out of memory");
			rc = EXIT_OTHER;
			goto out;
		}
		rc = cli_select_devices(src.g, o.ids, sel, ngpu, &nsel);
		if (rc != EXIT_OK) {
			cli_error("watch: see gpumon list for this machine's GPUs");
			goto out;
		}
		for (unsigned k = 0; k < nsel; k++)
			picked[sel[k]] = 1;
		v.picked = picked;
	}
	src.buf = malloc(BATCH * sizeof *src.buf);
	if (!src.buf || watch_model_create(ngpu, &m) != GPUMON_OK) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
		goto out;
	}
	for (unsigned i = 0; i < ngpu; i++) {
		gpumon_device_info d;
		if (src.r)
			watch_replay_info(src.r, i, &d);
		else
			gpumon_device_info_get(src.g, i, &d);
		watch_model_set_info(m, i, &d);
	}
	if (!src.r) {
		unsigned period_us = o.interval_ms * 1000u;
		gpumon_sampler_config c = {.size = sizeof c, .period_us = period_us, .slow_period_us = period_us,
					   .process_period_us = period_us,
					   .heartbeat_ms = o.interval_ms > 1000 ? o.interval_ms : 0,
					   .devices = sel, .ndevices = nsel};
		int st = gpumon_sampler_create(src.g, &c, &src.s);
		if (st != GPUMON_OK) {
			cli_error("watch: %s", gpumon_errmsg(src.g));
			rc = cli_exit_status(st);
			goto out;
		}
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	char err[256];
	if (watch_screen_start(&v, err, sizeof err) < 0) {
		cli_error("watch: %s", err);
		rc = EXIT_OTHER;
		goto out;
	}
	rc = loop(&src, m, &v, ngpu);
	watch_screen_end();
	if (rc != EXIT_OK)
		cli_error("watch: %s", src.err);
out:
	gpumon_sampler_destroy(src.s);
	watch_replay_close(src.r);
	watch_model_destroy(m);
	free(src.buf);
	free(sel);
	free(picked);
	gpumon_destroy(src.g);
	return rc;
}
