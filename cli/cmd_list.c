/* SPDX-License-Identifier: MIT */
/* cmd_list.c — `gpumon list` (also `gpumon -L`, `--list-gpus`): one line per GPU and per MIG
 * device, in nvidia-smi -L's layout, so that anything reading that format keeps working. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static void help(void)
{
	printf("Usage: gpumon list [-i LIST]   (also: gpumon -L, gpumon --list-gpus)\n"
	       "One line per GPU, as nvidia-smi -L prints it, and under a GPU in MIG mode one line per\n"
	       "MIG device:\n"
	       "  GPU 0: NVIDIA H200 (UUID: GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51)\n"
	       "    MIG 1g.18gb     Device  0: (UUID: MIG-51fa7c7a-4c41-59bf-b08a-9cb4b47525a7)\n\n"
	       "Options:\n"
	       "  -i, --id LIST  only these GPUs: comma-separated indexes, UUIDs or PCI bus ids (a MIG\n"
	       "                 device's UUID lists that device under its GPU)\n"
	       "  -h, --help     this help\n"
	       "A GPU that has fallen off the bus is listed with [GPU is lost] and the exit status is 15.\n");
}

/* Marks what -i chose: a GPU with all its MIG devices, a MIG device with its GPU's line. */
static void mark(gpumon *g, const unsigned *sel, unsigned count, unsigned n, unsigned char *shown)
{
	for (unsigned k = 0; k < count; k++) {
		gpumon_device_info d;
		if (gpumon_device_info_get(g, sel[k], &d) != GPUMON_OK)
			continue;
		shown[sel[k]] = 1;
		for (unsigned i = 0; !d.mig && i < n; i++) {
			gpumon_device_info m;
			if (gpumon_device_info_get(g, i, &m) == GPUMON_OK && m.mig && m.parent == sel[k])
				shown[i] = 1;
		}
	}
}

/* Prints one device's line; returns 1 when it is lost. One memory read tells whether it answers. */
static int print_device(gpumon *g, unsigned dev)
{
	gpumon_device_sample s;
	gpumon_device_info d;
	gpumon_device_sample_read(g, dev, GPUMON_F_MEMORY, &s);
	if (gpumon_device_info_get(g, dev, &d) != GPUMON_OK)
		return 0;
	const char *uuid = (d.present & GPUMON_INFO_UUID) ? d.uuid : "[Unknown Error]";
	const char *lost = d.lost ? " [GPU is lost]" : "";
	if (d.mig)
		printf("  MIG %-11s Device %2u: (UUID: %s)%s\n",
		       (d.present & GPUMON_INFO_MIG_PROFILE) ? d.mig_profile : "[N/A]", d.mig_index, uuid, lost);
	else
		printf("GPU %u: %s (UUID: %s)%s\n", d.index, (d.present & GPUMON_INFO_NAME) ? d.name : "[Unknown Error]",
		       uuid, lost);
	return d.lost;
}

/* The GPUs in the order -i named them (each once), each followed by its chosen MIG devices. */
static int print_list(gpumon *g, const unsigned *sel, unsigned count, unsigned n, unsigned char *shown)
{
	int any_lost = 0;
	mark(g, sel, count, n, shown);
	for (unsigned k = 0; k < count; k++) {
		gpumon_device_info d;
		if (gpumon_device_info_get(g, sel[k], &d) != GPUMON_OK)
			continue;
		unsigned gpu = d.mig ? d.parent : sel[k];
		if (shown[gpu] == 2)
			continue;
		any_lost |= print_device(g, gpu);
		shown[gpu] = 2;
		for (unsigned i = 0; i < n; i++) {
			gpumon_device_info m;
			if (shown[i] == 1 && gpumon_device_info_get(g, i, &m) == GPUMON_OK && m.mig && m.parent == gpu) {
				any_lost |= print_device(g, i);
				shown[i] = 2;
			}
		}
	}
	return any_lost;
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
	unsigned char *shown = calloc(n ? n : 1, 1);
	if (!sel || !shown) {
		free(sel);
		free(shown);
		gpumon_destroy(g);
		cli_error("out of memory");
		return EXIT_OTHER;
	}
	rc = cli_select_devices(g, ids, sel, n, &count);
	if (rc == EXIT_OK && print_list(g, sel, count, n, shown))
		rc = EXIT_GPU_LOST;
	free(sel);
	free(shown);
	cli_leave(g);
	return rc;
}
