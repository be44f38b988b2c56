/* SPDX-License-Identifier: MIT */
/* cmd_watch.c — `gpumon watch`: the live terminal view. Records come from the library's sampler
 * (or from a recording with --replay, or the bundled recording when this machine has no NVIDIA
 * driver) into the display state and the library's run model, which judges leaks; the screen is
 * redrawn from a snapshot of both every interval and after each key. --batch prints the snapshots
 * as plain text instead, as `top -b` does. */
#include <errno.h>
#include <limits.h>
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
#define SLOW_PERIOD_US 1000000u /* figures read at most once a second */
#define MIN_SPEED (1.0 / 64)
#define MAX_SPEED 1024.0

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void help(void)
{
	printf("Usage: gpumon watch [-i GPUS] [--interval MS] [--replay FILE [--speed X]] [-b [-n N]]\n"
	       "The live view: per GPU a memory bar (driver-reserved, the selected process's share, used,\n"
	       "free), utilisation, temperature, power and a memory graph of the last minutes; the\n"
	       "processes holding memory (GPU, pid, user, memory, change per minute, command), largest\n"
	       "first, marked with ! when the run model's leak verdict on their memory alerts (as gpumon\n"
	       "report says of the same records); live, each process's host CPU %%, RSS and run time, and\n"
	       "its owner (pod, Slurm job, container) when known; when a GPU is nearly full, who holds it.\n"
	       "Keys: q quit, arrows PgUp PgDn move, s sort, g GPU, / filter (user, command, pid or owner,\n"
	       "any part, any case), u user filter, c clear filters, p or space pause, T/K/I send\n"
	       "SIGTERM/SIGKILL/SIGINT to the selected process (y confirms; your own processes, any as\n"
	       "root); in a replay: Left/Right seek 10 s, Home/End start/end, r restart, + - speed;\n"
	       "h help. Needs an 80x24 terminal, except with --batch.\n\n"
	       "Options:\n"
	       "  -i, --id GPUS   only these GPUs: comma-separated indexes, UUIDs or PCI bus ids\n"
	       "  --interval MS   refresh and memory sampling period, 50 to 60000 ms (default 1000);\n"
	       "                  utilisation, temperature, power and the process list at most once a\n"
	       "                  second\n"
	       "  --replay FILE   play a recording (gpumon record, gpumon run) instead of this machine\n"
	       "  --speed X       replay speed, %g to %g (default 1: real time); 0: as fast as it can\n"
	       "                  (the end of the recording at once)\n"
	       "  -b, --batch     plain-text snapshots on stdout, every interval, without curses: the GPU\n"
	       "                  lines and the process table with the screen's columns and marks, and a\n"
	       "                  line for each process that leaks; a replay stops at its end\n"
	       "  -n N            with --batch: stop after N snapshots\n"
	       "  -h, --help      this help\n\n"
	       "Without an NVIDIA driver it plays a bundled recording of a training job with a leak,\n"
	       "and says so on the screen (--batch then fails instead). NO_COLOR set: no colours.\n"
	       "See gpumon(1).\n",
	       MIN_SPEED, MAX_SPEED);
}

struct opts {
	unsigned interval_ms;
	const char *ids;
	const char *replay;
	double speed;
	int speed_given, interval_given;
	int batch;
	long count; /* -n: snapshots to print; 0: until stopped */
};

/* Parses one option with a value into o; returns EXIT_OK or EXIT_USAGE (with a message). */
static int parse_value(const char *name, const char *v, struct opts *o)
{
	char *end;
	if (!strcmp(name, "--interval")) {
		long x = strtol(v, &end, 10);
		if (end == v || *end || x < 50 || x > 60000) {
			cli_error("watch: --interval '%s': expected a whole number of milliseconds from 50 to 60000", v);
			return EXIT_USAGE;
		}
		o->interval_ms = (unsigned)x;
		o->interval_given = 1;
	} else if (!strcmp(name, "--speed")) {
		o->speed = strtod(v, &end);
		if (end == v || *end || !(o->speed == 0 || (o->speed >= MIN_SPEED && o->speed <= MAX_SPEED))) {
			cli_error("watch: --speed '%s': expected 0 (as fast as it can) or a number from %g to %g", v,
				  MIN_SPEED, MAX_SPEED);
			return EXIT_USAGE;
		}
		o->speed_given = 1;
	} else if (!strcmp(name, "-n")) {
		long x = strtol(v, &end, 10);
		if (end == v || *end || x < 1) {
			cli_error("watch: -n '%s': expected a whole number of snapshots, 1 or more", v);
			return EXIT_USAGE;
		}
		o->count = x;
	}
	return EXIT_OK;
}

static int check(const struct opts *o)
{
	if (o->speed_given && !o->replay) {
		cli_error("watch: --speed applies to --replay only");
		return EXIT_USAGE;
	}
	if (o->ids && o->replay) {
		cli_error("watch: -i applies to this machine's GPUs; in a replay, g shows one GPU at a time");
		return EXIT_USAGE;
	}
	if (o->count && !o->batch) {
		cli_error("watch: -n applies to --batch only");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const char *const valued[] = {"--interval", "--speed", "-n"};
	memset(o, 0, sizeof *o);
	o->interval_ms = 1000;
	o->speed = 1;
	for (int i = 1; i < argc; i++) {
		int bad = 0, rc = EXIT_OK, known = 0;
		const char *v;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		}
		if (!strcmp(argv[i], "-b") || !strcmp(argv[i], "--batch")) {
			o->batch = 1;
			continue;
		}
		for (size_t k = 0; !known && !bad && k < sizeof valued / sizeof valued[0]; k++)
			if ((v = cli_option_value(argc, argv, &i, valued[k][1] == '-' ? valued[k] : NULL,
						  valued[k][1] == '-' ? NULL : valued[k], &bad))) {
				known = 1;
				rc = parse_value(valued[k], v, o);
			}
		if (!known && !bad && (v = cli_option_value(argc, argv, &i, "--id", "-i", &bad))) {
			known = 1;
			o->ids = v;
		} else if (!known && !bad && (v = cli_option_value(argc, argv, &i, "--replay", NULL, &bad))) {
			known = 1;
			o->replay = v;
		}
		if (!known && !bad)
			cli_error("watch: unknown option '%s' (see gpumon watch --help)", argv[i]);
		if (!known || bad || rc != EXIT_OK)
			return rc != EXIT_OK ? rc : EXIT_USAGE;
	}
	return check(o);
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

/* Where the records come from (the sampler, or a replay) and where they go. */
struct source {
	gpumon *g;
	gpumon_sampler *s;
	watch_replay *r;
	const char *replay;     /* the recording's path (NULL live) */
	unsigned ngpu;
	gpumon_record *buf;
	watch_sink sink;
	int replay_over;
	int snapped;            /* a snapshot was taken */
	char err[256];
	/* live: each GPU's memory health, read every HEALTH_PERIOD_NS (30 s, as the exporter: the
	   counts move seldom, and a read is a dozen driver calls) */
	unsigned *health;
	char (*health_text)[256];
	uint64_t health_next;
};

#define HEALTH_PERIOD_NS 30000000000ull

/* Reads each GPU's memory health when it is due (live only) and puts it into the snapshot; the
 * library judges it (gpumon_health_problems) and words it (gpumon_words_health). */
static void health_into(struct source *src, watch_snap *snap)
{
	if (!src->g || !src->health)
		return;
	uint64_t now = cli_now_ns();
	if (now >= src->health_next) {
		src->health_next = now + HEALTH_PERIOD_NS;
		for (unsigned i = 0; i < src->ngpu; i++) {
			gpumon_device_props p = {.size = sizeof p};
			src->health[i] = gpumon_device_props_read(src->g, i, GPUMON_P_HEALTH, &p) == GPUMON_OK
						 ? gpumon_health_problems(&p) : 0;
			gpumon_words_health(src->health[i], &p, src->health_text[i], sizeof src->health_text[i]);
		}
	}
	for (unsigned i = 0; i < snap->ngpu && i < src->ngpu; i++) {
		snap->gpus[i].health = src->health[i];
		snprintf(snap->gpus[i].health_text, sizeof snap->gpus[i].health_text, "%s", src->health_text[i]);
	}
}

/* Moves what the source has for now into the display state and the run model. Returns 1 when
 * something came (a replay: always), 0 when nothing did, or -1 with src->err set. */
static int feed(struct source *src, uint64_t now_ns)
{
	if (src->r) {
		int st = watch_replay_advance(src->r, now_ns, &src->sink, src->err, sizeof src->err);
		if (st < 0)
			return -1;
		if (st && !src->replay_over) /* the end of the run: nothing more comes */
			gpumon_model_finish(src->sink.model, 0, -1);
		src->replay_over = st;
		return 1;
	}
	size_t n, got = 0;
	do {
		n = 0;
		gpumon_sampler_poll(src->s, src->buf, BATCH, &n, 0);
		for (size_t i = 0; i < n; i++)
			if (watch_feed(&src->sink, &src->buf[i]) != GPUMON_OK) {
				snprintf(src->err, sizeof src->err, "out of memory");
				return -1;
			}
		got += n;
	} while (n == BATCH);
	return got > 0;
}

static int snapshot(const struct source *src, watch_snap *snap)
{
	return watch_model_snapshot(src->sink.view, src->sink.model, snap);
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

/* A key at the filter prompt: the text typed becomes the filter at Enter. */
static void prompt_key(watch_view *v, int ch)
{
	size_t n = strlen(v->input);
	if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		if (v->prompting == 'u')
			snprintf(v->user_filter, sizeof v->user_filter, "%s", v->input);
		else
			snprintf(v->text_filter, sizeof v->text_filter, "%s", v->input);
		v->prompting = 0;
		v->cur = v->top = 0;
	} else if (ch == 27) {
		v->prompting = 0;
	} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
		if (n)
			v->input[n - 1] = 0;
	} else if (ch >= ' ' && ch < 127 && n + 1 < sizeof v->input) {
		v->input[n] = (char)ch;
		v->input[n + 1] = 0;
	}
}

static int make_model(struct source *src, const char *replay, unsigned ngpu);

/* New display state and run model, for a replay rewound to feed its records again. Returns 0, or -1
 * with src->err set. */
static int reset_sinks(struct source *src)
{
	watch_model_destroy(src->sink.view);
	gpumon_model_destroy(src->sink.model);
	src->sink.view = NULL;
	src->sink.model = NULL;
	src->replay_over = 0;
	if (watch_model_create(src->ngpu, &src->sink.view) != GPUMON_OK || make_model(src, src->replay, src->ngpu) < 0) {
		snprintf(src->err, sizeof src->err, "out of memory");
		return -1;
	}
	return 0;
}

/* What a key asks of the loop. */
enum { K_NONE, K_QUIT, K_FEED /* feed and take a snapshot now, paused or not (a seek) */, K_FAIL };

/* A replay key: seek, restart. */
static int seek_key(watch_view *v, struct source *src, int ch)
{
	int whence = ch == KEY_HOME || ch == 'r' ? WATCH_SEEK_START : ch == KEY_END ? WATCH_SEEK_END : WATCH_SEEK_BY;
	int64_t by = ch == KEY_LEFT ? -10000000000ll : 10000000000ll;
	if (ch == 'r' && v->paused) { /* restart: it plays */
		v->paused = 0;
		watch_replay_pause(src->r, 0, cli_now_ns());
	}
	int st = watch_replay_seek(src->r, whence, by, cli_now_ns(), src->err, sizeof src->err);
	if (st < 0 || (st == 1 && reset_sinks(src) < 0))
		return K_FAIL;
	return K_FEED;
}

/* The process the cursor is on (NULL none). */
static const watch_proc *selected(const watch_view *v, const watch_snap *snap)
{
	for (size_t i = 0; v->sel_valid && i < snap->nproc; i++)
		if (snap->procs[i].gpu == v->sel_gpu && snap->procs[i].pid == v->sel_pid &&
		    watch_row_matches(&snap->procs[i], v))
			return &snap->procs[i];
	return NULL;
}

/* Handles one key; returns K_*. */
static int key(watch_view *v, struct source *src, const watch_snap *snap, int ch)
{
	v->message[0] = 0;
	if (v->confirm.sig) {
		if (ch != KEY_RESIZE)
			watch_signal_answer(v, ch);
		return K_NONE;
	}
	if (v->prompting) {
		prompt_key(v, ch);
		return K_NONE;
	}
	if (ch == 'q' || ch == 'Q')
		return K_QUIT;
	if (v->help) { /* any other key leaves the help screen */
		if (ch != KEY_RESIZE)
			v->help = 0;
		return K_NONE;
	}
	if (src->r && (ch == KEY_LEFT || ch == KEY_RIGHT || ch == KEY_HOME || ch == KEY_END || ch == 'r'))
		return seek_key(v, src, ch);
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
		while (next < (int)src->ngpu && v->picked && !v->picked[next])
			next++;
		v->gpu_filter = next >= (int)src->ngpu ? -1 : next;
		v->cur = v->top = 0;
		break;
	}
	case 'u': case '/': /* a fresh prompt: the filter in force shows on the table's header */
		v->prompting = ch;
		v->input[0] = 0;
		break;
	case 'c':
		v->gpu_filter = -1;
		v->user_filter[0] = v->text_filter[0] = 0;
		break;
	case 'T': watch_signal_ask(v, selected(v, snap), SIGTERM); break;
	case 'K': watch_signal_ask(v, selected(v, snap), SIGKILL); break;
	case 'I': watch_signal_ask(v, selected(v, snap), SIGINT); break;
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
	case KEY_LEFT: case KEY_RIGHT: case 'r':
		snprintf(v->message, sizeof v->message, "seeking is for a replay (--replay FILE); this is live");
		break;
	default: break;
	}
	return K_NONE;
}

/* Feeds what is due and takes a snapshot (also while paused when force); 0, or -1 with src->err. */
static int refresh_snapshot(struct source *src, const watch_view *v, watch_snap *snap, int force)
{
	int got = feed(src, cli_now_ns());
	if (got < 0)
		return -1;
	/* nothing new from the sampler (rows come on a change, and a heartbeat a second): the
	   snapshot would be the one taken already, so a fast refresh of an idle GPU costs a poll */
	if (!got && !force && src->snapped)
		return 0;
	if ((force || !v->paused) && snapshot(src, snap) != GPUMON_OK) {
		snprintf(src->err, sizeof src->err, "out of memory");
		return -1;
	}
	src->snapped = 1;
	health_into(src, snap);
	return 0;
}

/* Whether the screen would change: the snapshot against the one last drawn (a copy is kept), and
 * the title (its clock, or the replay's position). Refreshes with nothing new draw nothing: the
 * cost of a fast refresh on an idle machine is then the sampling alone. */
static int changed(const watch_snap *snap, watch_snap *drawn, const watch_view *v, const char *title,
		   const char *position)
{
	int same = watch_snap_same(snap, drawn) && !strcmp(title, v->title) && !strcmp(position, v->position);
	if (!same && watch_snap_copy(drawn, snap) != GPUMON_OK)
		drawn->ngpu = UINT_MAX; /* out of memory: the next comparison fails, the screen is drawn */
	return !same;
}

/* Rounds in a row in which the terminal was readable and gave no key before it counts as gone. */
#define UNREAD_ROUNDS 3

/*
 * Whether the terminal has gone away, after a poll (ready: its result) and the keys read after it:
 * hung up or invalid (closed); a read that failed with EIO (a terminal no longer ours: a process
 * group left in the background when its shell died); or readable round after round without a key
 * (read() gives 0: the end of input). Each of these makes poll return at once, so without this the
 * loop would spin a core until killed. *unread counts the readable rounds without a key.
 */
static int terminal_gone(const struct pollfd *pfd, int ready, int keys, int read_eio, int *unread)
{
	if ((pfd->revents & (POLLHUP | POLLERR | POLLNVAL)) || read_eio)
		return 1;
	if (ready > 0 && (pfd->revents & POLLIN) && keys == 0)
		return ++*unread >= UNREAD_ROUNDS;
	*unread = 0;
	return 0;
}

/* Milliseconds to the next second of the wall clock (the title's clock turns then). */
static int ms_to_next_second(void)
{
	struct timespec t;
	clock_gettime(CLOCK_REALTIME, &t);
	return 1000 - (int)(t.tv_nsec / 1000000);
}

/* The loop: feed, snapshot (unless paused), draw when something changed, at most once an interval;
 * keys in between. Live, the screen does not wake every interval to find nothing new: once an
 * interval has passed it waits for the sampler's next record (rows come on a change, and a heartbeat
 * a second), the clock's next second or a key, so a 100 ms refresh of an idle GPU wakes it a few
 * times a second, not ten. It ends on q, a stop signal (SIGINT, SIGTERM, SIGHUP) or when the
 * terminal goes away, with EXIT_OK; on a failure with EXIT_OTHER and src->err. */
static int loop(struct source *src, watch_view *v)
{
	watch_snap snap, drawn;
	memset(&snap, 0, sizeof snap);
	memset(&drawn, 0, sizeof drawn);
	uint64_t interval_ns = (uint64_t)v->interval_ms * 1000000u, next = cli_now_ns();
	int rc = EXIT_OK, dirty = 1, first = 1, unread = 0, due = 1;
	int sampler_fd = src->r ? -1 : gpumon_sampler_fd(src->s); /* readable when records are queued */
	char title[sizeof v->title], position[sizeof v->position];
	while (!stop_signal) {
		uint64_t now = cli_now_ns();
		if (due && now >= next) {
			if (refresh_snapshot(src, v, &snap, 0) < 0) {
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
			memcpy(title, v->title, sizeof title);
			memcpy(position, v->position, sizeof position);
			set_title(v, src);
			dirty |= changed(&snap, &drawn, v, title, position);
			due = 0; /* live: the next refresh waits for something new (below) */
		}
		if (dirty) {
			set_title(v, src);
			watch_draw(&snap, v);
			dirty = 0;
		}
		/* a replay, a paused screen (it feeds, and the clock runs), or no descriptor: every interval */
		int records_fd = v->paused ? -1 : sampler_fd;
		if (records_fd < 0)
			due = 1;
		struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = records_fd, .events = POLLIN}};
		now = cli_now_ns();
		int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		if (!due)
			wait_ms = ms_to_next_second();
		int ready = poll(pfd, due ? 1 : 2, wait_ms);
		if (ready < 0 && errno != EINTR)
			break;
		if (!due && ready >= 0 && ((pfd[1].revents & POLLIN) || ready == 0))
			due = 1; /* a record, or the clock's second: refreshed once the interval is over */
		int ch = 0, k = K_NONE, keys = 0;
		errno = 0;
		while (k != K_QUIT && k != K_FAIL && (ch = getch()) != ERR) {
			int was_paused = v->paused;
			k = key(v, src, &snap, ch);
			if ((k == K_FEED || (was_paused && !v->paused)) && refresh_snapshot(src, v, &snap, 1) < 0)
				k = K_FAIL;
			dirty = 1;
			keys++;
			errno = 0;
		}
		if (k == K_FAIL)
			rc = EXIT_OTHER;
		if (k == K_QUIT || k == K_FAIL)
			break;
		if (terminal_gone(&pfd[0], ready, keys, ch == ERR && errno == EIO, &unread))
			break;
	}
	watch_snap_free(&snap);
	watch_snap_free(&drawn);
	return rc;
}

/* Sleeps until the monotonic time t_ns (a signal cuts it short). */
static void sleep_until(uint64_t t_ns)
{
	uint64_t now = cli_now_ns();
	if (t_ns <= now)
		return;
	struct timespec ts = {.tv_sec = (time_t)((t_ns - now) / 1000000000u), .tv_nsec = (long)((t_ns - now) % 1000000000u)};
	nanosleep(&ts, NULL);
}

/* Batch mode: a plain-text snapshot every interval, the first once the first records are in (live)
 * or at once (a replay); count of them (0: until stopped), or until the replay is over. */
static int batch_loop(struct source *src, watch_view *v, long count)
{
	watch_snap snap;
	memset(&snap, 0, sizeof snap);
	uint64_t interval_ns = (uint64_t)v->interval_ms * 1000000u;
	uint64_t next = cli_now_ns() + (src->r ? 0 : interval_ns < FIRST_REFRESH_NS ? interval_ns : FIRST_REFRESH_NS);
	int rc = EXIT_OK;
	for (long printed = 0; !stop_signal;) {
		sleep_until(next);
		if (stop_signal)
			break;
		uint64_t now = cli_now_ns();
		if (feed(src, now) < 0 || snapshot(src, &snap) != GPUMON_OK) {
			if (!src->err[0])
				snprintf(src->err, sizeof src->err, "out of memory");
			rc = EXIT_OTHER;
			break;
		}
		set_title(v, src);
		if (watch_batch_print(stdout, &snap, v) < 0) {
			snprintf(src->err, sizeof src->err, "cannot write the output: %s", strerror(errno));
			rc = EXIT_OTHER;
			break;
		}
		if (src->replay_over || (count > 0 && ++printed >= count))
			break;
		next += interval_ns;
		if (next <= now)
			next = now + interval_ns;
	}
	watch_snap_free(&snap);
	return rc;
}

/* The run model that judges what is watched: this machine (a system-wide view), or the run the
 * recording holds; the devices declared. */
static int make_model(struct source *src, const char *replay, unsigned ngpu)
{
	/* watch shows what runs: a process that left needs no summary (memory stays flat for days) */
	gpumon_model_config c = {.size = sizeof c, .flags = GPUMON_MODEL_FORGET_GONE, .source_type = "live"};
	if (src->r) {
		c.meta = watch_replay_meta(src->r);
		c.source = replay;
		c.source_type = "recording";
	}
	if (gpumon_model_create(&c, &src->sink.model) != GPUMON_OK)
		return -1;
	for (unsigned i = 0; i < ngpu; i++) {
		gpumon_device_info d;
		if (src->r)
			watch_replay_info(src->r, i, &d);
		else
			gpumon_device_info_get(src->g, i, &d);
		if (gpumon_model_device(src->sink.model, &d) != GPUMON_OK)
			return -1;
		if (src->r) /* a GPU lost in the recording shows as lost from its lost record on */
			d.lost = 0;
		watch_model_set_info(src->sink.view, i, &d);
	}
	return 0;
}

/* Opens this machine, or, without a driver, picks the bundled recording (not in batch mode: a
 * script must not take a recording for this machine). Returns EXIT_OK with src->g or *replay set. */
static int open_source(const struct opts *o, struct source *src, watch_view *v, const char **replay)
{
	int rc;
	*replay = o->replay;
	if (o->replay)
		return EXIT_OK;
	src->g = cli_open(&rc);
	if (src->g)
		return EXIT_OK;
	if (rc != EXIT_NO_LIBRARY)
		return rc;
	if (o->ids) {
		cli_error("watch: -i needs the driver; without -i, gpumon watch plays a bundled recording");
		return rc;
	}
	if (o->batch) {
		cli_error("watch: --batch needs the driver (or --replay FILE)");
		return rc;
	}
	*replay = bundled_recording();
	if (!*replay) {
		cli_error("watch: and the bundled recording %s is not installed either (looked in %s/examples/recordings "
			  "and %s)", BUNDLED_NAME, GPUMON_SOURCE_DIR, GPUMON_DATA_DIR);
		return rc;
	}
	snprintf(v->banner[1], sizeof v->banner[1],
		 "No NVIDIA driver (libnvidia-ml.so.1 not found): a recording, not this machine");
	return EXIT_OK;
}

/* Resolves -i into the sampler's device list and the view's picked table. */
static int pick(const struct opts *o, struct source *src, watch_view *v, unsigned ngpu, unsigned **sel,
		unsigned *nsel, unsigned char **picked)
{
	*sel = malloc((ngpu ? ngpu : 1) * sizeof **sel);
	*picked = calloc(ngpu ? ngpu : 1, 1);
	if (!*sel || !*picked) {
		cli_error("out of memory");
		return EXIT_OTHER;
	}
	int rc = cli_select_devices(src->g, o->ids, *sel, ngpu, nsel);
	if (rc != EXIT_OK) {
		cli_error("watch: see gpumon list for this machine's GPUs");
		return rc;
	}
	for (unsigned k = 0; k < *nsel; k++)
		(*picked)[(*sel)[k]] = 1;
	v->picked = *picked;
	return EXIT_OK;
}

static int start_sampler(const struct opts *o, struct source *src, const unsigned *sel, unsigned nsel)
{
	unsigned period_us = o->interval_ms * 1000u;
	/* Memory at every refresh. Utilisation, temperature and power at most once a second: the driver
	   averages them over 1/6 s to 1 s, so a faster read shows the same figure for a driver call
	   each. The process list likewise: each listing reads /proc for every pid, and a process's
	   change is judged over a minute; the GPU's memory bar and graph still move at the refresh. */
	unsigned slow_us = period_us > SLOW_PERIOD_US ? period_us : SLOW_PERIOD_US;
	/* device rows when memory changes, and a heartbeat a second (the sampler's default) otherwise:
	   the screen shows the latest figures either way, and the run model judges a process on
	   windows of time at its GPU's rows (at least one a second), as the exporter feeds it, so a
	   faster refresh does not feed it more rows to judge the same */
	gpumon_sampler_config c = {.size = sizeof c, .period_us = period_us, .slow_period_us = slow_us,
				   .process_period_us = slow_us, .devices = sel, .ndevices = nsel};
	int st = gpumon_sampler_create(src->g, &c, &src->s);
	if (st != GPUMON_OK) {
		cli_error("watch: %s", gpumon_errmsg(src->g));
		return cli_exit_status(st);
	}
	return EXIT_OK;
}

/* Runs the screen (or the batch output) until the end; returns the exit status. */
static int run(const struct opts *o, struct source *src, watch_view *v)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
	int rc;
	if (o->batch) {
		rc = batch_loop(src, v, o->count);
	} else {
		char err[256];
		if (watch_screen_start(v, err, sizeof err) < 0) {
			cli_error("watch: %s", err);
			return EXIT_OTHER;
		}
		rc = loop(src, v);
		watch_screen_end();
	}
	if (rc != EXIT_OK)
		cli_error("watch: %s", src->err);
	return rc;
}

int cmd_watch(int argc, char **argv)
{
	struct opts o;
	int rc = parse(argc, argv, &o);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	if (!o.batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))) {
		cli_error("watch: needs a terminal (stdin and stdout); in scripts use `gpumon watch --batch`, "
			  "`gpumon query` or `gpumon record`");
		return EXIT_USAGE;
	}
	struct source src;
	memset(&src, 0, sizeof src);
	watch_view v;
	memset(&v, 0, sizeof v);
	v.gpu_filter = -1;
	v.interval_ms = o.interval_ms;
	unsigned char *picked = NULL; /* with -i: the GPUs watched */
	unsigned *sel = NULL, nsel = 0, ngpu;
	const char *replay;
	rc = open_source(&o, &src, &v, &replay);
	if (rc != EXIT_OK)
		return rc;
	if (replay) {
		rc = watch_replay_open(replay, o.speed, &src.r, src.err, sizeof src.err);
		if (rc != EXIT_OK) {
			cli_error("watch: %s", src.err);
			goto out;
		}
		ngpu = watch_replay_ngpu(src.r);
		snprintf(v.title, sizeof v.title, "REPLAY of %s", watch_replay_file(src.r));
		watch_replay_describe(src.r, v.banner[0], sizeof v.banner[0]);
		if (!o.interval_given) /* the clock on the screen moves more smoothly */
			v.interval_ms = 500;
	} else {
		ngpu = gpumon_device_count(src.g);
		/* CPU % over a second at least: /proc counts in ticks of 10 ms */
		v.host = watch_hoststat_create(o.interval_ms > 1000 ? o.interval_ms : 1000);
		src.health = calloc(ngpu ? ngpu : 1, sizeof *src.health);
		src.health_text = calloc(ngpu ? ngpu : 1, sizeof *src.health_text);
		if (!v.host || !src.health || !src.health_text) {
			cli_error("out of memory");
			rc = EXIT_OTHER;
			goto out;
		}
	}
	src.replay = replay;
	src.ngpu = ngpu;
	v.replay = src.r != NULL;
	if (o.ids && (rc = pick(&o, &src, &v, ngpu, &sel, &nsel, &picked)) != EXIT_OK)
		goto out;
	src.buf = malloc(BATCH * sizeof *src.buf);
	if (!src.buf || watch_model_create(ngpu, &src.sink.view) != GPUMON_OK || make_model(&src, replay, ngpu) < 0) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
		goto out;
	}
	if (!src.r && (rc = start_sampler(&o, &src, sel, nsel)) != EXIT_OK)
		goto out;
	rc = run(&o, &src, &v);
out:
	gpumon_sampler_destroy(src.s);
	watch_replay_close(src.r);
	watch_model_destroy(src.sink.view);
	gpumon_model_destroy(src.sink.model);
	free(src.buf);
	free(sel);
	free(picked);
	watch_hoststat_destroy(v.host);
	free(src.health);
	free(src.health_text);
	gpumon_destroy(src.g);
	return rc;
}
