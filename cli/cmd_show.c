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
};

static void help(void)
{
	printf("Usage: gpumon [show] [-i LIST] [-u NAME] [-s KEY] [-P] [--json] [--color[=WHEN]]\n"
	       "One screen for this machine: per GPU the memory used, reserved by the driver and total,\n"
	       "with a bar (# used, %% reserved, . free), utilisation, temperature and power; then the\n"
	       "processes holding GPU memory (GPU, pid, user, memory, owner, command), largest first.\n"
	       "The owner column (pod, Slurm job, container or systemd unit) appears when a process has\n"
	       "one. Lines fit the terminal (else $COLUMNS, else 80 columns) and never wrap: when it is\n"
	       "narrow, the command is cut first, then the owner, user and GPU columns are left out.\n"
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
	       "  -h, --help           this help\n");
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
		char phrase[sizeof r->owner];
		r->gpu = gpu->info.index;
		r->uuid = (gpu->info.present & GPUMON_INFO_UUID) ? gpu->info.uuid : NULL;
		r->p = list[i];
		/* the owner's names come from another process's cgroup and the node's pod logs: escaped */
		gpumon_owner_describe(&list[i].owner, phrase, sizeof phrase);
		/* a pid of another PID namespace: its command column says so already */
		if (!(list[i].owner.present & ~(unsigned)GPUMON_OWNER_UNRESOLVED))
			phrase[0] = 0;
		cli_safe_text(r->owner, sizeof r->owner, phrase);
		if (r->owner[0])
			m->any_owner = 1;
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
	time_t now = time(NULL);
	struct tm tm;
	char zone[8];
	size_t cap = 0;
	gethostname(m->host, sizeof m->host - 1);
	if (gpumon_driver_version(g, m->driver, sizeof m->driver) != GPUMON_OK)
		m->driver[0] = 0;
	localtime_r(&now, &tm);
	strftime(m->when, sizeof m->when, "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof zone, "%z", &tm); /* +0100; RFC 3339 wants +01:00 */
	snprintf(m->when_iso, sizeof m->when_iso, "%.10sT%s%.3s:%.2s", m->when, m->when + 11, zone,
		 strlen(zone) == 5 ? zone + 3 : "00");
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

int cmd_show(int argc, char **argv)
{
	struct opts o = {.sort = SHOW_SORT_MEMORY, .color = COLOR_AUTO};
	int rc = parse(argc, argv, &o);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
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
		if (o.json) {
			if (show_json(&m) != 0) {
				cli_error("out of memory");
				rc = EXIT_OTHER;
			}
		} else {
			show_style st;
			style_init(&st, o.color);
			show_text(&m, &st);
		}
		if (rc == EXIT_OK && m.any_lost)
			rc = EXIT_GPU_LOST;
	}
	free(m.rows);
	free(m.gpus);
	free(sel);
	gpumon_destroy(g);
	return rc;
}
