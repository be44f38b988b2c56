/* SPDX-License-Identifier: MIT */
/* main.c — the `gpumon` program: global options and the table of subcommands. Each subcommand
 * lives in its own cmd_<name>.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

const char *cli_progname = "gpumon";

static const cli_command commands[] = {
	{NULL, "show GPU memory and the processes holding it (the default)", cmd_show},
	{"show", "the same as `gpumon` with no command", cmd_show},
	{"list", "one line per GPU and MIG device, like nvidia-smi -L (also -L, --list-gpus)", cmd_list},
	{"query", "nvidia-smi-compatible --query-gpu / --query-compute-apps (CSV or JSON)", cmd_query},
	{"record", "record GPU memory and processes into a SQLite file until Ctrl-C", cmd_record},
	{"run", "run a job with allocator settings, record its GPU memory, exit with its status", cmd_run},
	{"export", "write a recording's samples out as CSV or JSON lines", cmd_export},
	{"watch", "the live terminal view: memory bars, history, processes, leak marks", cmd_watch},
	{"report", "what a recording or CSV means: leak verdict, peaks, out-of-memory cause", cmd_report},
	{"serve", "a Prometheus exporter: /metrics with memory, peaks, processes and leak alerts", cmd_serve},
	{"fit", "the largest batch that fits a GPU now, from a few short runs of the job", cmd_fit},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: gpumon [COMMAND] [OPTIONS]\n"
		   "GPU memory monitor for deep-learning training: who holds GPU memory, and how much.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name ? commands[i].name : "(none)", commands[i].summary);
	fprintf(f, "\nOptions:\n"
		   "  -h, --help     this help; `gpumon COMMAND --help` for a command's own\n"
		   "  -V, --version  print the version\n\n"
		   "Environment:\n"
		   "  GPUMON_NVML_LIBRARY  path of the NVML library to load instead of libnvidia-ml.so.1\n\n"
		   "Exit status: 0 ok, 2 bad usage, 4 no permission, 6 GPU not found, 9 driver not loaded\n"
		   "or not answering, 12 libnvidia-ml.so.1 not found, 15 a GPU is lost, 255 other errors\n"
		   "(as nvidia-smi).\n"
		   "See gpumon(1).\n");
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		usage(stdout);
		return EXIT_OK;
	}
	if (argc >= 2 && (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))) {
		printf("gpumon %s (libgpumon %s)\n", GPUMON_VERSION, gpumon_version());
		return EXIT_OK;
	}
	if (argc < 2)
		return cmd_show(argc, argv);
	/* nvidia-smi's habit: `gpumon --query-gpu=...` means `gpumon query --query-gpu=...` */
	if (!strncmp(argv[1], "--query-", 8) || !strncmp(argv[1], "--format", 8)) {
		argv[0] = "query";
		return cmd_query(argc, argv);
	}
	/* nvidia-smi's -L / --list-gpus: `gpumon list` */
	if (!strcmp(argv[1], "-L") || !strcmp(argv[1], "--list-gpus"))
		return cmd_list(argc - 1, argv + 1);
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (commands[i].name && !strcmp(commands[i].name, argv[1]))
			return commands[i].run(argc - 1, argv + 1);
	if (argv[1][0] == '-')
		return cmd_show(argc, argv);
	cli_error("unknown command '%s'", argv[1]);
	fprintf(stderr, "Run 'gpumon --help' for the list of commands.\n");
	return EXIT_USAGE;
}
