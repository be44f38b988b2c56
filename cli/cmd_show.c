/* SPDX-License-Identifier: MIT */
/* cmd_show.c — `gpumon` with no command: one screen for the machine. Reads each selected GPU and
 * the processes holding memory once into a model (show.h), filters and sorts the processes, and
 * hands the model to the text view (fitted to the terminal, show_text.c) or to JSON (show_json.c). */
#include <langinfo.h>
#include <locale.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "show.h"

/* Only what is shown: the energy counter costs milliseconds on some drivers (BENCHMARKS.md). */
#define SHOWN_FIELDS                                                                                  \
	(GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED | GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY |         \
	 GPUMON_F_TEMPERATURE | GPUMON_F_POWER)
#define DEFAULT_WIDTH 80

enum color_mode { COLOR_AUTO, COLOR_ALWAYS, COLOR_NEVER };

struct opts {
	const char *ids;
	const char *user;
	enum show_sort sort;
	int no_processes;
	int json;
	enum color_mode color;
	const char *replay; /* --replay FILE */
	const char *at;     /* --at SECONDS, or NULL: the recording's end */
};

static void help(void)
{
	printf("Usage: gpumon [show] [-i LIST] [-u NAME] [-s KEY] [-P] [--json] [--color[=WHEN]]\n"
	       "                     [--replay FILE [--at SECONDS|peak]]\n"
	       "One screen for this machine: per GPU the memory used, reserved by the driver and total,\n"
	       "with a bar (# used, %% reserved, . free), utilisation, temperature and power; then the\n"
	       "processes holding GPU memory (GPU, pid, user, memory, owner, command), largest first.\n"
	       "The owner column (pod, Slurm job, container or systemd unit) appears when a process has\n"
	       "one. Lines fit the terminal (else $COLUMNS, else 80 columns) and never wrap: when it is\n"
	       "narrow, the command is cut first, then the owner, user and GPU columns are left out.\n"
	       "A process of another PID namespace (a container) has the name the driver gives it,\n"
	       "marked (other PID namespace).\n"
	       "A value the driver does not report is shown as n/a (null in JSON).\n\n"
	       "Options:\n"
	       "  -i, --id LIST        only these GPUs: comma-separated indexes, UUIDs or PCI bus ids\n"
	       "  -u, --user NAME      only the processes of this user (a login name or a uid)\n"
	       "  -s, --sort KEY       order of the processes: memory (largest first, the default),\n"
	       "                       pid, user (then memory) or gpu (then memory)\n"
	       "  -P, --no-processes   leave the processes out\n"
	       "  --json               one JSON document with every figure, null where unknown\n"
	       "                       (docs/show-json.md; schema docs/show.schema.json)\n"
	       "  --color[=WHEN]       auto (the default: on a terminal unless NO_COLOR is set),\n"
	       "                       always (also a bare --color) or never\n"
	       "  --replay FILE        the machine as a recording (gpumon record, gpumon run) holds it,\n"
	       "                       at its end; needs no driver, and says it is a replay\n"
	       "  --at WHEN            with --replay: SECONDS after the recording's start (negative:\n"
	       "                       before its end), or peak: the moment of the run's peak\n"
	       "  -h, --help           this help\n\n"
	       "Examples:\n"
	       "  gpumon show --replay examples/recordings/h200_train_leak.gpumon --at peak\n");
}

static int parse_sort(const char *v, enum show_sort *out)
{
	static const enum show_sort all[] = {SHOW_SORT_MEMORY, SHOW_SORT_PID, SHOW_SORT_USER, SHOW_SORT_GPU};
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
		if (!strcmp(v, show_sort_name(all[i]))) {
			*out = all[i];
			return 0;
		}
	cli_error("--sort: '%s' is not one of memory, pid, user, gpu", v);
	return -1;
}

static int parse_color(const char *v, enum color_mode *out)
{
	if (!strcmp(v, "auto"))
		*out = COLOR_AUTO;
	else if (!strcmp(v, "always"))
		*out = COLOR_ALWAYS;
	else if (!strcmp(v, "never"))
		*out = COLOR_NEVER;
	else {
		cli_error("--color: '%s' is not one of auto, always, never", v);
		return -1;
	}
	return 0;
}

/* Parses argv into *o. Returns -1 after printing help, EXIT_USAGE after a usage error, else 0. */
static int parse(int argc, char **argv, struct opts *o)
{
	for (int i = 1; i < argc; i++) {
		int bad = 0;
		const char *v;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if (!strcmp(argv[i], "--json")) {
			o->json = 1;
		} else if (!strcmp(argv[i], "-P") || !strcmp(argv[i], "--no-processes")) {
			o->no_processes = 1;
		} else if (!strcmp(argv[i], "--color") || !strcmp(argv[i], "--colour")) {
			o->color = COLOR_ALWAYS; /* as ls and grep take a bare --color */
		} else if ((v = cli_option_value(argc, argv, &i, "--id", "-i", &bad))) {
			o->ids = v;
		} else if ((v = cli_option_value(argc, argv, &i, "--replay", NULL, &bad))) {
			o->replay = v;
		} else if ((v = cli_option_value(argc, argv, &i, "--at", NULL, &bad))) {
			o->at = v;
		} else if ((v = cli_option_value(argc, argv, &i, "--user", "-u", &bad))) {
			if (!*v) {
				cli_error("--user: the name is empty");
				return EXIT_USAGE;
			}
			o->user = v;
		} else if ((v = cli_option_value(argc, argv, &i, "--sort", "-s", &bad))) {
			if (parse_sort(v, &o->sort))
				return EXIT_USAGE;
		} else if (!strncmp(argv[i], "--color=", 8) || !strncmp(argv[i], "--colour=", 9)) {
			if (parse_color(strchr(argv[i], '=') + 1, &o->color))
				return EXIT_USAGE;
		} else {
			if (!bad)
				cli_error("unknown option '%s' (see gpumon show --help)", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (o->at && !o->replay) {
		cli_error("--at: a moment of a recording: give the recording with --replay FILE");
		return EXIT_USAGE;
	}
	return 0;
}

/* ---- the model -------------------------------------------------------------------------------- */

/* Whether the process belongs to --user: its login name, or its uid written in decimal. */
static int user_matches(const gpumon_process *p, const char *user)
{
	if (!user)
		return 1;
	if (!(p->flags & GPUMON_PROC_USER_KNOWN))
		return 0;
	if (!strcmp(p->user, user))
		return 1;
	char *end;
	unsigned long uid = strtoul(user, &end, 10);
	return *end == 0 && end != user && uid == p->uid;
}

static int cmp_memory(const show_row *a, const show_row *b)
{
	int ka = !!(a->p.flags & GPUMON_PROC_USED_KNOWN), kb = !!(b->p.flags & GPUMON_PROC_USED_KNOWN);
	if (ka != kb)
		return kb - ka; /* unknown memory last */
	if (a->p.used_bytes != b->p.used_bytes)
		return a->p.used_bytes < b->p.used_bytes ? 1 : -1;
	return 0;
}

static int cmp_pid_gpu(const show_row *a, const show_row *b)
{
	if (a->p.pid != b->p.pid)
		return a->p.pid < b->p.pid ? -1 : 1;
	return a->gpu < b->gpu ? -1 : a->gpu > b->gpu;
}

/* qsort_r's comparison: ctx points to the enum show_sort of --sort. Ties fall to the largest
 * memory, then pid and GPU, so that the order never depends on the driver's. */
static int row_cmp(const void *x, const void *y, void *ctx)
{
	const show_row *a = x, *b = y;
	enum show_sort sort_key = *(const enum show_sort *)ctx;
	int c = 0;
	switch (sort_key) {
	case SHOW_SORT_PID:
		return cmp_pid_gpu(a, b);
	case SHOW_SORT_USER: {
		/* unknown users last, as unknown memory is */
		int ka = !!(a->p.flags & GPUMON_PROC_USER_KNOWN), kb = !!(b->p.flags & GPUMON_PROC_USER_KNOWN);
		c = ka != kb ? kb - ka : ka ? strcmp(a->p.user, b->p.user) : 0;
		break;
	}
	case SHOW_SORT_GPU:
		c = a->gpu < b->gpu ? -1 : a->gpu > b->gpu;
		break;
	case SHOW_SORT_MEMORY:
		break;
	}
	if (!c)
		c = cmp_memory(a, b);
	if (!c && sort_key == SHOW_SORT_MEMORY && a->gpu != b->gpu)
		c = a->gpu < b->gpu ? -1 : 1;
	return c ? c : cmp_pid_gpu(a, b);
}

/* The row's owner column: gpumon_owner_describe's phrase, escaped (the owner's names come from another
 * process's cgroup and the node's pod logs); none for a pid of another PID namespace, whose command
 * column says so already. */
static void row_owner(show_row *r, show_model *m)
{
	char phrase[sizeof r->owner];
	gpumon_owner_describe(&r->p.owner, phrase, sizeof phrase);
	if (!(r->p.owner.present & ~(unsigned)GPUMON_OWNER_UNRESOLVED))
		phrase[0] = 0;
	cli_safe_text(r->owner, sizeof r->owner, phrase);
	if (r->owner[0])
		m->any_owner = 1;
}

/* m->when and m->when_iso: the local time t, and the same in RFC 3339 (+0100 becomes +01:00). */
static void set_when(time_t t, show_model *m)
{
	struct tm tm;
	char zone[8];
	localtime_r(&t, &tm);
	strftime(m->when, sizeof m->when, "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof zone, "%z", &tm);
	snprintf(m->when_iso, sizeof m->when_iso, "%.10sT%s%.3s:%.2s", m->when, m->when + 11, zone,
		 strlen(zone) == 5 ? zone + 3 : "00");
}

/* Adds the processes of GPU dev that pass --user to the model. Returns 0, or -1 when out of memory. */
static int gather_gpu(gpumon *g, unsigned dev, show_model *m, show_gpu *gpu, size_t *cap)
{
	gpumon_process *list;
	size_t n;
	int st = gpumon_process_list(g, dev, &list, &n);
	if (st == GPUMON_E_NOMEM)
		return -1;
	if (st != GPUMON_OK) {
		gpu->procs = st == GPUMON_E_NOT_SUPPORTED ? SHOW_PROCS_UNSUPPORTED : SHOW_PROCS_FAILED;
		return 0;
	}
	gpu->procs = SHOW_PROCS_LISTED;
	for (size_t i = 0; i < n; i++) {
		if (!user_matches(&list[i], m->user))
			continue;
		if (cli_grow((void **)&m->rows, cap, m->n_rows, sizeof *m->rows, 16)) {
			gpumon_free(list);
			return -1;
		}
		show_row *r = &m->rows[m->n_rows++];
		r->gpu = gpu->info.index;
		r->uuid = (gpu->info.present & GPUMON_INFO_UUID) ? gpu->info.uuid : NULL;
		r->p = list[i];
		row_owner(r, m);
	}
	gpumon_free(list);
	return 0;
}

static int shown(const unsigned *sel, unsigned count, unsigned dev)
{
	for (unsigned i = 0; i < count; i++)
		if (sel[i] == dev)
			return 1;
	return 0;
}

/* Reads the machine and the selected GPUs into *m. Returns 0, or -1 when out of memory. */
static int gather(gpumon *g, const unsigned *sel, unsigned count, show_model *m)
{
	size_t cap = 0;
	gethostname(m->host, sizeof m->host - 1);
	if (gpumon_driver_version(g, m->driver, sizeof m->driver) != GPUMON_OK)
		m->driver[0] = 0;
	set_when(time(NULL), m);
	m->gpus = calloc(count ? count : 1, sizeof *m->gpus);
	if (!m->gpus)
		return -1;
	for (unsigned k = 0; k < count; k++) {
		show_gpu *gpu = &m->gpus[m->n_gpus++];
		gpumon_device_info_get(g, sel[k], &gpu->info);
		gpu->status = gpumon_device_sample_read(g, sel[k], SHOWN_FIELDS, &gpu->s);
		if (gpu->status != GPUMON_E_LOST) {
			gpu->health.size = sizeof gpu->health;
			if (gpumon_device_props_read(g, sel[k], GPUMON_P_HEALTH, &gpu->health) == GPUMON_OK)
				gpu->health_problems = gpumon_health_problems(&gpu->health);
			else
				gpu->health.size = 0;
		}
		if (gpu->status == GPUMON_E_LOST)
			m->any_lost = 1;
		else if (gpu->status != GPUMON_OK)
			snprintf(gpu->error, sizeof gpu->error, "%s", gpumon_errmsg(g));
		/* a GPU whose memory cannot be read may still list its processes; a lost one cannot; a
		   MIG device's processes are on its GPU's list already (with their instance ids), unless
		   the GPU is not shown */
		int on_parent = gpu->info.mig && shown(sel, count, gpu->info.parent);
		if (m->processes && gpu->status != GPUMON_E_LOST && !on_parent && gather_gpu(g, sel[k], m, gpu, &cap))
			return -1;
	}
	if (m->n_rows)
		qsort_r(m->rows, m->n_rows, sizeof *m->rows, row_cmp, &m->sort);
	return 0;
}

/* ---- a recording (--replay) ------------------------------------------------------------------ */

/* Whether the -i list (comma-separated indexes or UUIDs; NULL: all) names the recorded device. */
static int replay_selected(const char *ids, const gpumon_device_info *info)
{
	if (!ids)
		return 1;
	char idx[16];
	snprintf(idx, sizeof idx, "%u", info->index);
	for (const char *s = ids; *s;) {
		size_t n = strcspn(s, ",");
		if ((n == strlen(idx) && !strncmp(s, idx, n)) ||
		    ((info->present & GPUMON_INFO_UUID) && n == strlen(info->uuid) && !strncasecmp(s, info->uuid, n)))
			return 1;
		s += n + (s[n] == ',');
	}
	return 0;
}

/* Keeps the process table of the recording as its records come: a PROCESS record adds or updates
 * its (device, pid), PROCESS_GONE removes it. Returns 0, or -1 when out of memory. */
static int replay_track(const gpumon_record *rec, show_row **rows, size_t *n, size_t *cap)
{
	size_t i = 0;
	while (i < *n && !((*rows)[i].gpu == rec->dev && (*rows)[i].p.pid == rec->process->pid))
		i++;
	if (rec->kind == GPUMON_REC_PROCESS_GONE) {
		if (i < *n)
			(*rows)[i] = (*rows)[--*n];
		return 0;
	}
	if (i == *n) {
		if (cli_grow((void **)rows, cap, *n, sizeof **rows, 16))
			return -1;
		memset(&(*rows)[i], 0, sizeof **rows);
		(*n)++;
	}
	(*rows)[i].gpu = rec->dev; /* a device position until the model is built */
	(*rows)[i].p = *rec->process; /* a copy: the reader's is gone at its next call */
	return 0;
}

/* The moment --at names, on the recording's clock: UINT64_MAX for its end (no --at), start + SECONDS,
 * SECONDS before its end when negative, or the run's peak as the library's model finds it ("peak").
 * Returns 0, or an exit status (the error said). */
static int replay_target(const char *path, const char *at, uint64_t *target)
{
	*target = UINT64_MAX;
	if (!at)
		return EXIT_OK;
	double d = 0;
	char *end = NULL;
	int peak = !strcmp(at, "peak");
	if (!peak) {
		d = strtod(at, &end);
		if (end == at || *end || d != d || d > 1e9 || d < -1e9) {
			cli_error("--at: '%s' is not a number of seconds (from the recording's start; negative: before "
				  "its end) nor 'peak'", at);
			return EXIT_USAGE;
		}
	}
	gpumon_reader *rd = NULL;
	gpumon_model *m = NULL;
	int st = gpumon_reader_create(path, &rd), rc = EXIT_OK;
	if (st != GPUMON_OK) {
		cli_error("--replay: %s", rd && gpumon_reader_errmsg(rd)[0] ? gpumon_reader_errmsg(rd) : gpumon_strerror(st));
		gpumon_reader_destroy(rd);
		return EXIT_OTHER;
	}
	const gpumon_run_meta *meta = gpumon_reader_meta(rd);
	uint64_t start = meta->start_mono_ns, last = meta->end_mono_ns;
	if (d >= 0 && !peak) {
		*target = start + (uint64_t)(d * 1e9);
	} else if (!peak) { /* back from the end: the recorded one, else the last record's */
		gpumon_record rec;
		while (!meta->end_mono_ns && gpumon_reader_next(rd, &rec) == 1)
			last = rec.t_ns > last ? rec.t_ns : last;
		uint64_t back = (uint64_t)(-d * 1e9);
		*target = last - start > back ? last - back : start;
	} else if (gpumon_model_create(NULL, &m) != GPUMON_OK) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
	} else { /* the run's peak, as every other command finds it */
		int what, dev;
		gpumon_peak pk;
		gpumon_model_load(m, rd);
		if (gpumon_model_peak(m, &what, &dev, &pk, NULL, 0, NULL) == GPUMON_OK) {
			*target = pk.t_ns;
		} else {
			cli_error("--at peak: the recording holds no memory figure to find a peak in");
			rc = EXIT_OTHER;
		}
	}
	gpumon_model_destroy(m);
	gpumon_reader_destroy(rd);
	return rc;
}

/* Reads the recording up to the moment asked into *m: its devices with their last sample, and the
 * processes listed on them then. Returns an exit status (the error said). */
static int replay_gather(const struct opts *o, show_model *m)
{
	uint64_t target;
	int rc = replay_target(o->replay, o->at, &target);
	if (rc != EXIT_OK)
		return rc;
	gpumon_reader *rd = NULL;
	int st = gpumon_reader_create(o->replay, &rd);
	if (st != GPUMON_OK) {
		cli_error("--replay: %s", rd && gpumon_reader_errmsg(rd)[0] ? gpumon_reader_errmsg(rd) : gpumon_strerror(st));
		gpumon_reader_destroy(rd);
		return EXIT_OTHER;
	}
	const gpumon_run_meta *meta = gpumon_reader_meta(rd);
	unsigned nd = gpumon_reader_device_count(rd);
	uint64_t start = meta->start_mono_ns, end = meta->end_mono_ns;
	/* the devices' last samples and the process table, on the recording's device positions */
	show_gpu *dev = calloc(nd ? nd : 1, sizeof *dev);
	show_row *rows = NULL;
	size_t n_rows = 0, cap = 0;
	if (!dev) {
		cli_error("out of memory");
		gpumon_reader_destroy(rd);
		return EXIT_OTHER;
	}
	for (unsigned d = 0; d < nd; d++) {
		gpumon_reader_device(rd, d, &dev[d].info);
		dev[d].status = GPUMON_E_NOT_FOUND;
		snprintf(dev[d].error, sizeof dev[d].error, "no sample recorded by then");
		dev[d].procs = SHOW_PROCS_LISTED;
	}
	uint64_t last = start;
	gpumon_record rec;
	int got;
	while ((got = gpumon_reader_next(rd, &rec)) == 1) {
		if (rec.t_ns > target)
			break;
		last = rec.t_ns > last ? rec.t_ns : last;
		if (rec.dev >= nd && (rec.kind == GPUMON_REC_DEVICE || rec.kind == GPUMON_REC_LOST ||
				      rec.kind == GPUMON_REC_PROCESS || rec.kind == GPUMON_REC_PROCESS_GONE))
			continue;
		if (rec.kind == GPUMON_REC_DEVICE) {
			dev[rec.dev].s = rec.sample;
			dev[rec.dev].status = GPUMON_OK;
		} else if (rec.kind == GPUMON_REC_LOST) {
			dev[rec.dev].status = GPUMON_E_LOST;
		} else if ((rec.kind == GPUMON_REC_PROCESS || rec.kind == GPUMON_REC_PROCESS_GONE) &&
			   replay_track(&rec, &rows, &n_rows, &cap)) {
			cli_error("out of memory");
			rc = EXIT_OTHER;
			break;
		}
	}
	if (got < 0 && rc == EXIT_OK) /* what came before is good: shown, and the loss named */
		cli_error("--replay: %s (shown up to there)",
			  gpumon_reader_damage(rd)[0] ? gpumon_reader_damage(rd) : gpumon_strerror(got));
	if (got == 1) /* stopped at the moment: the span is still the recording's */
		for (last = rec.t_ns; !end && gpumon_reader_next(rd, &rec) == 1;)
			last = rec.t_ns > last ? rec.t_ns : last;
	if (!end)
		end = last;
	uint64_t moment = target < end ? target : end;
	const char *base = strrchr(o->replay, '/');
	snprintf(m->host, sizeof m->host, "%s", meta->host ? meta->host : "n/a");
	snprintf(m->driver, sizeof m->driver, "%s", meta->driver_version ? meta->driver_version : "");
	/* the moment's wall-clock time: the recording's start on both clocks places it */
	set_when((time_t)(((int64_t)meta->start_wall_ns + ((int64_t)moment - (int64_t)meta->start_mono_ns)) / 1000000000), m);
	snprintf(m->replay, sizeof m->replay, "%s", base ? base + 1 : o->replay);
	m->replay_at_s = (double)(moment - start) / 1e9;
	m->replay_span_s = (double)(end - start) / 1e9;
	if (rc == EXIT_OK && !(m->gpus = calloc(nd ? nd : 1, sizeof *m->gpus))) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
	}
	for (unsigned d = 0; rc == EXIT_OK && d < nd; d++) {
		m->gpu_count += !dev[d].info.mig;
		if (!replay_selected(o->ids, &dev[d].info))
			continue;
		m->gpus[m->n_gpus++] = dev[d];
		m->any_lost |= dev[d].status == GPUMON_E_LOST;
	}
	/* the rows take their GPU's index and UUID, and pass --user */
	size_t keep = 0, rcap = 0;
	for (size_t i = 0; rc == EXIT_OK && i < n_rows; i++) {
		unsigned d = rows[i].gpu;
		/* a MIG device's processes are on its GPU's list already, as live, when the GPU is shown */
		int on_parent = dev[d].info.mig && dev[d].info.parent < nd && replay_selected(o->ids, &dev[dev[d].info.parent].info);
		if (!replay_selected(o->ids, &dev[d].info) || !user_matches(&rows[i].p, m->user) || on_parent)
			continue;
		if (cli_grow((void **)&m->rows, &rcap, keep, sizeof *m->rows, 16)) {
			cli_error("out of memory");
			rc = EXIT_OTHER;
			break;
		}
		show_row *r = &m->rows[keep++];
		*r = rows[i];
		r->gpu = dev[d].info.index;
		for (unsigned k = 0; k < m->n_gpus; k++)
			if (m->gpus[k].info.index == dev[d].info.index && !strcmp(m->gpus[k].info.uuid, dev[d].info.uuid))
				r->uuid = (m->gpus[k].info.present & GPUMON_INFO_UUID) ? m->gpus[k].info.uuid : NULL;
		row_owner(r, m);
	}
	m->n_rows = keep;
	if (m->n_rows)
		qsort_r(m->rows, m->n_rows, sizeof *m->rows, row_cmp, &m->sort);
	if (rc == EXIT_OK && o->ids && !m->n_gpus) {
		cli_error("-i: the recording has no GPU '%s'", o->ids);
		rc = EXIT_NOT_FOUND;
	}
	free(rows);
	free(dev);
	gpumon_reader_destroy(rd);
	return rc;
}

/* ---- the terminal ----------------------------------------------------------------------------- */

/* Columns to fit: the terminal's, else $COLUMNS, else 80. */
static int out_width(void)
{
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	const char *c = getenv("COLUMNS");
	if (c && *c) {
		char *end;
		long v = strtol(c, &end, 10);
		if (*end == 0 && v > 0 && v <= 10000)
			return (int)v;
	}
	return DEFAULT_WIDTH;
}

/* Colour when asked, or on a terminal that can show it and NO_COLOR (no-color.org) is not set. */
static int use_color(enum color_mode mode)
{
	if (mode != COLOR_AUTO)
		return mode == COLOR_ALWAYS;
	const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
	if (no && *no)
		return 0;
	if (term && !strcmp(term, "dumb"))
		return 0;
	return isatty(STDOUT_FILENO);
}

static void style_init(show_style *st, enum color_mode mode)
{
	st->width = out_width();
	st->color = use_color(mode);
	/* the locale says how the terminal counts a character's columns */
	st->utf8 = setlocale(LC_CTYPE, "") && !strcasecmp(nl_langinfo(CODESET), "UTF-8");
}

/* GPUs, not their MIG devices: what the header counts. */
static unsigned count_gpus(gpumon *g, unsigned n)
{
	unsigned k = 0;
	for (unsigned d = 0; d < n; d++) {
		gpumon_device_info info;
		k += gpumon_device_info_get(g, d, &info) == GPUMON_OK && !info.mig;
	}
	return k;
}

/* Each MIG device right after its GPU (the table has the GPUs first, then the MIG devices); GPUs
 * keep their order, and a MIG device whose GPU is not selected goes last. */
static int order_mig_devices(gpumon *g, unsigned *sel, unsigned count)
{
	gpumon_device_info *info = calloc(count ? count : 1, sizeof *info);
	unsigned *out = calloc(count ? count : 1, sizeof *out);
	if (!info || !out) {
		free(info);
		free(out);
		return -1;
	}
	for (unsigned i = 0; i < count; i++)
		if (gpumon_device_info_get(g, sel[i], &info[i]) != GPUMON_OK)
			info[i].mig = 0;
	unsigned n = 0;
	for (unsigned i = 0; i < count; i++) {
		if (info[i].mig)
			continue;
		out[n++] = sel[i];
		for (unsigned j = 0; j < count; j++)
			if (info[j].mig && info[j].parent == sel[i])
				out[n++] = sel[j];
	}
	for (unsigned j = 0; j < count; j++)
		if (info[j].mig && !shown(sel, count, info[j].parent))
			out[n++] = sel[j];
	memcpy(sel, out, count * sizeof *sel);
	free(info);
	free(out);
	return 0;
}

/* Prints the model as asked. Returns the exit status: a lost GPU says so. */
static int render(const struct opts *o, const show_model *m)
{
	if (o->json) {
		if (show_json(m) != 0) {
			cli_error("out of memory");
			return EXIT_OTHER;
		}
	} else {
		show_style st;
		style_init(&st, o->color);
		show_text(m, &st);
	}
	return m->any_lost ? EXIT_GPU_LOST : EXIT_OK;
}

/* gpumon show --replay FILE: the recording's machine, no driver needed. */
static int show_replay(const struct opts *o)
{
	show_model m = {.processes = !o->no_processes, .sort = o->sort, .user = o->user};
	int rc = replay_gather(o, &m);
	if (rc == EXIT_OK)
		rc = render(o, &m);
	free(m.rows);
	free(m.gpus);
	return rc;
}

int cmd_show(int argc, char **argv)
{
	struct opts o = {.sort = SHOW_SORT_MEMORY, .color = COLOR_AUTO};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	if (o.replay)
		return show_replay(&o);
	gpumon *g = cli_open(&rc);
	if (!g)
		return rc;
	unsigned n = gpumon_device_count(g);
	unsigned *sel = calloc(n ? n : 1, sizeof *sel), count = 0;
	if (!sel) {
		gpumon_destroy(g);
		cli_error("out of memory");
		return EXIT_OTHER;
	}
	rc = cli_select_devices(g, o.ids, sel, n, &count);
	if (rc == EXIT_OK && order_mig_devices(g, sel, count) != 0) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
	}
	show_model m = {.gpu_count = count_gpus(g, n), .processes = !o.no_processes, .sort = o.sort, .user = o.user};
	if (rc == EXIT_OK && gather(g, sel, count, &m) != 0) {
		cli_error("out of memory");
		rc = EXIT_OTHER;
	} else if (rc == EXIT_OK) {
		rc = render(&o, &m);
	}
	free(m.rows);
	free(m.gpus);
	free(sel);
	cli_leave(g);
	return rc;
}
