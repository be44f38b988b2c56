/* SPDX-License-Identifier: MIT */
/* cmd_show.c — `gpumon` with no command: one screen for the machine. Per GPU the memory used,
 * driver-reserved and total with a bar, utilisation, temperature and power; then every process
 * holding GPU memory, largest first, with its user and command. */
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define BAR_WIDTH 40
#define SHOWN_FIELDS                                                                                  \
	(GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED | GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY |         \
	 GPUMON_F_TEMPERATURE | GPUMON_F_POWER)

static void help(void)
{
	printf("Usage: gpumon [show] [-i LIST]\n"
	       "One screen for this machine: per GPU the memory used, reserved by the driver and total,\n"
	       "with a bar (# used, %% reserved, . free), utilisation, temperature and power; then the\n"
	       "processes holding GPU memory, largest first (GPU, pid, user, memory, command).\n"
	       "A value the driver does not report is shown as n/a.\n\n"
	       "Options:\n"
	       "  -i, --id LIST  only these GPUs: comma-separated indexes, UUIDs or PCI bus ids\n"
	       "  -h, --help     this help\n");
}

/* The bar: '#' used, '%' driver-reserved, '.' free, rounded so that any use shows. */
static void print_bar(const gpumon_device_sample *s)
{
	char bar[BAR_WIDTH + 1];
	uint64_t total = s->memory_total_bytes ? s->memory_total_bytes : 1;
	uint64_t reserved = (s->present & GPUMON_F_MEM_RESERVED) ? s->memory_reserved_bytes : 0;
	unsigned used_w = (unsigned)((s->memory_used_bytes * BAR_WIDTH + total - 1) / total);
	unsigned res_w = (unsigned)((reserved * BAR_WIDTH + total - 1) / total);
	if (used_w > BAR_WIDTH)
		used_w = BAR_WIDTH;
	if (res_w > BAR_WIDTH - used_w)
		res_w = BAR_WIDTH - used_w;
	memset(bar, '.', BAR_WIDTH);
	memset(bar, '%', res_w);
	memset(bar + res_w, '#', used_w);
	bar[BAR_WIDTH] = 0;
	printf("  memory [%s]", bar);
}

static void print_gpu(gpumon *g, unsigned dev, int *any_lost)
{
	gpumon_device_info d;
	gpumon_device_sample s;
	char a[32], b[32], c[32];
	/* only what is shown: the energy counter costs milliseconds on some drivers (BENCHMARKS.md) */
	int st = gpumon_device_sample_read(g, dev, SHOWN_FIELDS, &s);
	gpumon_device_info_get(g, dev, &d);
	printf("GPU %u  %s  %s  %s\n", d.index, (d.present & GPUMON_INFO_NAME) ? d.name : "n/a",
	       (d.present & GPUMON_INFO_PCI_BUS_ID) ? d.pci_bus_id : "n/a",
	       (d.present & GPUMON_INFO_UUID) ? d.uuid : "n/a");
	if (st == GPUMON_E_LOST) {
		*any_lost = 1;
		printf("  GPU is lost: it has fallen off the bus or needs a reset\n");
		return;
	}
	if (st != GPUMON_OK) {
		printf("  memory n/a (%s)\n", gpumon_errmsg(g));
		return;
	}
	print_bar(&s);
	printf(" %s used", cli_format_bytes(a, sizeof a, s.memory_used_bytes));
	if (s.present & GPUMON_F_MEM_RESERVED)
		printf(" + %s reserved", cli_format_bytes(b, sizeof b, s.memory_reserved_bytes));
	else
		printf(" (includes driver-reserved)");
	printf(" of %s\n", cli_format_bytes(c, sizeof c, s.memory_total_bytes));

	printf("  util ");
	(s.present & GPUMON_F_UTIL_GPU) ? printf("%3u %%", s.util_gpu_pct) : printf("  n/a");
	printf("   mem-util ");
	(s.present & GPUMON_F_UTIL_MEMORY) ? printf("%3u %%", s.util_memory_pct) : printf("  n/a");
	printf("   temp ");
	(s.present & GPUMON_F_TEMPERATURE) ? printf("%u C", s.temperature_c) : printf("n/a");
	printf("   power ");
	(s.present & GPUMON_F_POWER) ? printf("%.1f W", s.power_mw / 1000.0) : printf("n/a");
	printf("\n");
}

struct row {
	unsigned gpu;
	gpumon_process p;
};

static int row_cmp(const void *x, const void *y)
{
	const struct row *a = x, *b = y;
	int ka = !!(a->p.flags & GPUMON_PROC_USED_KNOWN), kb = !!(b->p.flags & GPUMON_PROC_USED_KNOWN);
	if (ka != kb)
		return kb - ka;
	if (a->p.used_bytes != b->p.used_bytes)
		return a->p.used_bytes < b->p.used_bytes ? 1 : -1;
	if (a->gpu != b->gpu)
		return a->gpu < b->gpu ? -1 : 1;
	return a->p.pid < b->p.pid ? -1 : a->p.pid > b->p.pid;
}

/* Gathers the processes of the selected GPUs into one list; returns -1 when out of memory. */
static long gather(gpumon *g, const unsigned *sel, unsigned count, struct row **out, int *unsupported)
{
	struct row *rows = NULL;
	size_t n = 0;
	for (unsigned k = 0; k < count; k++) {
		gpumon_process *list;
		size_t m;
		int st = gpumon_process_list(g, sel[k], &list, &m);
		if (st == GPUMON_E_NOT_SUPPORTED)
			*unsupported = 1;
		if (st != GPUMON_OK || m == 0)
			continue;
		struct row *r = realloc(rows, (n + m) * sizeof *rows);
		if (!r) {
			gpumon_free(list);
			free(rows);
			return -1;
		}
		rows = r;
		for (size_t i = 0; i < m; i++) {
			rows[n + i].gpu = sel[k];
			rows[n + i].p = list[i];
		}
		n += m;
		gpumon_free(list);
	}
	if (n)
		qsort(rows, n, sizeof *rows, row_cmp);
	*out = rows;
	return (long)n;
}

static void print_processes(gpumon *g, const unsigned *sel, unsigned count)
{
	struct row *rows = NULL;
	int unsupported = 0;
	long n = gather(g, sel, count, &rows, &unsupported);
	if (n < 0) {
		cli_error("out of memory");
		return;
	}
	printf("\nProcesses holding GPU memory (largest first)\n");
	if (n == 0) {
		printf(unsupported ? "  n/a: the driver does not list processes\n" : "  none\n");
		return;
	}
	int width = 0;
	struct winsize ws;
	if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 40)
		width = ws.ws_col - 38; /* room left for the command on a terminal */
	printf("  GPU      PID  USER          MEMORY  COMMAND\n");
	for (long i = 0; i < n; i++) {
		const gpumon_process *p = &rows[i].p;
		char mem[32], user[sizeof p->user * 4], cmd[sizeof p->cmdline * 4];
		/* another user's text: shown with its control characters escaped */
		cli_safe_text(user, sizeof user, (p->flags & GPUMON_PROC_USER_KNOWN) ? p->user : "n/a");
		cli_safe_text(cmd, sizeof cmd, (p->flags & GPUMON_PROC_CMDLINE_KNOWN) ? p->cmdline
					       : (p->flags & GPUMON_PROC_FOREIGN) ? "(not in this PID namespace: container?)"
					       : (p->flags & GPUMON_PROC_NAME_KNOWN) ? p->name : "n/a");
		if (p->flags & GPUMON_PROC_USED_KNOWN)
			cli_format_bytes(mem, sizeof mem, p->used_bytes);
		else
			snprintf(mem, sizeof mem, "n/a");
		printf("  %3u %8u  %-10.10s %10s  %.*s%s\n", rows[i].gpu, p->pid, user, mem,
		       width ? width : (int)strlen(cmd), cmd,
		       (p->flags & GPUMON_PROC_GRAPHICS) && !(p->flags & GPUMON_PROC_COMPUTE) ? " [graphics]" : "");
	}
	free(rows);
}

int cmd_show(int argc, char **argv)
{
	const char *ids = NULL;
	for (int i = 1; i < argc; i++) {
		int bad = 0;
		const char *v;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return EXIT_OK;
		} else if ((v = cli_option_value(argc, argv, &i, "--id", "-i", &bad))) {
			ids = v;
		} else {
			if (!bad)
				cli_error("unknown option '%s' (see gpumon --help)", argv[i]);
			return EXIT_USAGE;
		}
	}
	int rc;
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
	rc = cli_select_devices(g, ids, sel, n, &count);
	if (rc == EXIT_OK) {
		char host[256] = "", drv[96] = "n/a", when[32] = "";
		time_t now = time(NULL);
		struct tm tm;
		gethostname(host, sizeof host - 1);
		gpumon_driver_version(g, drv, sizeof drv);
		strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
		printf("%s  %s  driver %s  %u GPU%s\n", host, when, drv, n, n == 1 ? "" : "s");
		if (n == 0)
			printf("No NVIDIA GPU found.\n");
		int any_lost = 0;
		for (unsigned k = 0; k < count; k++)
			print_gpu(g, sel[k], &any_lost);
		if (count)
			print_processes(g, sel, count);
		if (any_lost)
			rc = EXIT_GPU_LOST;
	}
	free(sel);
	gpumon_destroy(g);
	return rc;
}
