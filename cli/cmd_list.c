/* SPDX-License-Identifier: MIT */
/* cmd_list.c — `gpumon list`: one line per GPU, in nvidia-smi -L's format, so that anything
 * reading that format keeps working. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help(void)
{
	printf("Usage: gpumon list [-i LIST]\n"
	       "One line per GPU, as nvidia-smi -L prints it:\n"
	       "  GPU 0: NVIDIA H200 (UUID: GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51)\n\n"
	       "Options:\n"
	       "  -i, --id LIST  only these GPUs: comma-separated indexes, UUIDs or PCI bus ids\n"
	       "  -h, --help     this help\n"
	       "A GPU that has fallen off the bus is listed with [GPU is lost] and the exit status is 15.\n");
}

int cmd_list(int argc, char **argv)
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
				cli_error("list: unknown option '%s' (see gpumon list --help)", argv[i]);
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
	int any_lost = 0;
	for (unsigned k = 0; rc == EXIT_OK && k < count; k++) {
		/* one memory read tells whether the GPU still answers */
		gpumon_device_sample s;
		gpumon_device_info d;
		gpumon_device_sample_read(g, sel[k], GPUMON_F_MEMORY, &s);
		gpumon_device_info_get(g, sel[k], &d);
		const char *name = (d.present & GPUMON_INFO_NAME) ? d.name : "[Unknown Error]";
		const char *uuid = (d.present & GPUMON_INFO_UUID) ? d.uuid : "[Unknown Error]";
		printf("GPU %u: %s (UUID: %s)%s\n", d.index, name, uuid, d.lost ? " [GPU is lost]" : "");
		any_lost |= d.lost;
	}
	if (rc == EXIT_OK && any_lost)
		rc = EXIT_GPU_LOST;
	free(sel);
	gpumon_destroy(g);
	return rc;
}
