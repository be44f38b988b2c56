/* SPDX-License-Identifier: MIT */
/* cmd_serve.c — `gpumon serve`: the Prometheus exporter. A thin front end over
 * gpumon_exporter_create(): parses the options, raises the open-file limit for the connection
 * limit, serves this machine's GPUs (or a recording's end, with --replay) until SIGINT, SIGTERM or
 * SIGHUP.
 * The metrics are listed in docs/metrics.md. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cli.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void help(void)
{
	printf("Usage: gpumon serve [--listen ADDR:PORT] [--interval MS] [--processes N|all|none]\n"
	       "                    [--compat dcgm|nvidia_smi] [--replay FILE] [OPTIONS]\n"
	       "Serves Prometheus metrics over HTTP: /metrics (text format 0.0.4), /healthz, and / (links).\n"
	       "Per GPU memory total/used/free/reserved, the exact peak of used memory over the peak\n"
	       "window, utilisation, temperature, power, energy, clocks and up/down; the memory each\n"
	       "owner holds on it (Kubernetes pod and container, Slurm job, container, else user), its\n"
	       "processes and a leak flag; the projected time to out-of-memory. With --processes, also\n"
	       "per process (pid): the memory held, its peak, a leak flag and growth rate.\n"
	       "Leaks and time to out-of-memory are the run model's answers, as gpumon report gives them.\n"
	       "HTTP requests never call the driver: they get the latest snapshot (at most 0.25 s old).\n\n"
	       "Options:\n"
	       "  --listen ADDR:PORT      where to listen (default 127.0.0.1:%d; [::1]:PORT for IPv6;\n"
	       "                          port 0 picks a free one, printed at start)\n"
	       "  --interval MS           memory sampling period, 1 to 60000 ms (default 10)\n"
	       "  --processes N|all|none  also export the N largest processes of the node one by one,\n"
	       "                          labelled by pid and command (default none: a pid label makes\n"
	       "                          new series for every job; per-owner series are always there)\n"
	       "  --compat dcgm|nvidia_smi  also emit dcgm-exporter's or nvidia_gpu_exporter's names\n"
	       "                          (repeat, or separate with commas, for both)\n"
	       "  --peak-window S         peaks cover the last S to 2S seconds (default 60)\n"
	       "  --replay FILE           serve a recording (gpumon record, gpumon run) as at its end\n"
	       "                          instead of this machine: no driver needed\n"
	       "  --max-connections N     simultaneous connections (default 1024); when all are held,\n"
	       "                          the one that has waited longest for a request makes room\n"
	       "  --max-connections-per-ip N  connections from one address (an IPv6 /64; default 64);\n"
	       "                          beyond it, that address's longest-waiting one is closed\n"
	       "  --timeout S             a request head must arrive whole, and a response be taken,\n"
	       "                          within S seconds (default 10); bytes do not extend it\n"
	       "  --keepalive S           after a response, keep the connection S seconds for the next\n"
	       "                          request's whole head (default 120); 0: close after each one\n"
	       "  --tls-cert FILE --tls-key FILE   serve HTTPS with this PEM certificate and key\n"
	       "  --basic-auth-file FILE  require HTTP basic auth; the file's first line is USER:PASSWORD\n"
	       "  --insecure-listen       allow a non-loopback address without TLS and basic auth\n"
	       "  --no-energy             do not read the energy counter (~3 ms a call on some drivers)\n"
	       "  -h, --help              this help\n"
	       "A non-loopback address is refused unless TLS and basic auth are both given, or\n"
	       "--insecure-listen: the page shows users, pods and jobs (and with --processes, every\n"
	       "process's command line).\n",
	       GPUMON_EXPORTER_DEFAULT_PORT);
}

static int parse_uint(const char *opt, const char *v, unsigned long lo, unsigned long hi, unsigned *out)
{
	char *end;
	unsigned long x = strtoul(v, &end, 10);
	if (end == v || *end || v[0] == '-' || x < lo || x > hi) {
		cli_error("serve: %s '%s': expected a whole number from %lu to %lu", opt, v, lo, hi);
		return EXIT_USAGE;
	}
	*out = (unsigned)x;
	return EXIT_OK;
}

static int parse_compat(const char *v, unsigned *bits)
{
	char buf[64];
	snprintf(buf, sizeof buf, "%s", v);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (!strcmp(t, "dcgm"))
			*bits |= GPUMON_COMPAT_DCGM;
		else if (!strcmp(t, "nvidia_smi"))
			*bits |= GPUMON_COMPAT_NVIDIA_SMI;
		else {
			cli_error("serve: --compat '%s': expected dcgm or nvidia_smi", t);
			return EXIT_USAGE;
		}
	}
	return EXIT_OK;
}

static int parse_processes(const char *v, gpumon_exporter_config *c)
{
	if (!strcmp(v, "all")) {
		c->max_processes = GPUMON_EXPORTER_ALL_PROCESSES;
		return EXIT_OK;
	}
	if (!strcmp(v, "none")) { /* the default: per-owner series only */
		c->max_processes = 0;
		return EXIT_OK;
	}
	char *end;
	unsigned long x = strtoul(v, &end, 10);
	if (end == v || *end || v[0] == '-' || x < 1 || x > 100000) { /* the message names every accepted form */
		cli_error("serve: --processes '%s': expected all, none or a whole number from 1 to 100000", v);
		return EXIT_USAGE;
	}
	c->max_processes = (unsigned)x;
	return EXIT_OK;
}

static int parse(int argc, char **argv, gpumon_exporter_config *c)
{
	memset(c, 0, sizeof *c);
	c->size = sizeof *c;
	for (int i = 1; i < argc; i++) {
		int bad = 0, rc = EXIT_OK;
		const char *v;
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			help();
			return -1;
		} else if (!strcmp(argv[i], "--insecure-listen")) {
			c->insecure_listen = 1;
		} else if (!strcmp(argv[i], "--no-energy")) {
			c->no_energy = 1;
		} else if ((v = cli_option_value(argc, argv, &i, "--listen", NULL, &bad))) {
			c->listen = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--interval", NULL, &bad))) {
			rc = parse_uint("--interval", v, 1, 60000, &c->interval_ms);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--processes", NULL, &bad))) {
			rc = parse_processes(v, c);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--compat", NULL, &bad))) {
			rc = parse_compat(v, &c->compat);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--peak-window", NULL, &bad))) {
			rc = parse_uint("--peak-window", v, 1, 86400, &c->peak_window_s);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--max-connections", NULL, &bad))) {
			rc = parse_uint("--max-connections", v, 1, GPUMON_EXPORTER_CONNECTIONS_MAX, &c->max_connections);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--max-connections-per-ip", NULL, &bad))) {
			rc = parse_uint("--max-connections-per-ip", v, 1, GPUMON_EXPORTER_CONNECTIONS_MAX,
					       &c->max_connections_per_ip);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--timeout", NULL, &bad))) {
			rc = parse_uint("--timeout", v, 1, GPUMON_EXPORTER_SECONDS_MAX, &c->timeout_s);
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--keepalive", NULL, &bad))) {
			rc = parse_uint("--keepalive", v, 0, GPUMON_EXPORTER_SECONDS_MAX, &c->keepalive_s);
			c->no_keepalive = rc == EXIT_OK && c->keepalive_s == 0;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--tls-cert", NULL, &bad))) {
			c->tls_cert_file = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--tls-key", NULL, &bad))) {
			c->tls_key_file = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--basic-auth-file", NULL, &bad))) {
			c->basic_auth_file = v;
		} else if (!bad && (v = cli_option_value(argc, argv, &i, "--replay", NULL, &bad))) {
			c->replay = v;
		} else {
			if (!bad)
				cli_error("serve: unknown option '%s' (see gpumon serve --help)", argv[i]);
			return EXIT_USAGE;
		}
		if (bad || rc != EXIT_OK)
			return rc != EXIT_OK ? rc : EXIT_USAGE;
	}
	if (!!c->tls_cert_file != !!c->tls_key_file) {
		cli_error("serve: --tls-cert and --tls-key go together");
		return EXIT_USAGE;
	}
	/* a replay serves what was recorded: how this machine would be sampled does not apply */
	if (c->replay && (c->interval_ms || c->no_energy)) {
		cli_error("serve: %s applies to sampling this machine; --replay serves the recording's figures as "
			  "they were recorded", c->interval_ms ? "--interval" : "--no-energy");
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* Each connection is a file descriptor: lift the soft limit to the hard one so that the
 * connection limit, not the descriptor limit, is what a flood of clients meets. */
static void raise_fd_limit(void)
{
	struct rlimit r;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

int cmd_serve(int argc, char **argv)
{
	gpumon_exporter_config c;
	int rc = parse(argc, argv, &c);
	if (rc != EXIT_OK)
		return rc < 0 ? EXIT_OK : rc;
	gpumon *g = NULL;
	if (!c.replay && !(g = cli_open(&rc))) /* a replay needs no driver */
		return rc;
	raise_fd_limit();
	signal(SIGPIPE, SIG_IGN);
	/* SIGINT/SIGTERM/SIGHUP (the terminal closed) are blocked in every thread (the exporter's
	   threads inherit the mask) and taken only in sigsuspend below, so that none is lost between a
	   check and a wait */
	static const int stops[] = {SIGINT, SIGTERM, SIGHUP};
	sigset_t stop_set, old;
	sigemptyset(&stop_set);
	for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
		sigaddset(&stop_set, stops[i]);
	pthread_sigmask(SIG_BLOCK, &stop_set, &old);
	for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++) {
		sigdelset(&old, stops[i]);
		signal(stops[i], on_signal);
	}
	gpumon_exporter *e = NULL;
	int st = gpumon_exporter_create(g, &c, &e);
	if (st != GPUMON_OK) {
		cli_error("serve: %s", e ? gpumon_exporter_errmsg(e) : g ? gpumon_errmsg(g) : gpumon_strerror(st));
		gpumon_exporter_destroy(e);
		gpumon_destroy(g);
		return st == GPUMON_E_INVAL ? EXIT_USAGE : cli_exit_status(st);
	}
	char addr[96];
	gpumon_exporter_address(e, addr, sizeof addr);
	if (c.replay)
		fprintf(stderr, "gpumon: serving %s://%s/metrics as at the end of the recording %s (Ctrl-C to stop)\n",
			c.tls_cert_file ? "https" : "http", addr, c.replay);
	else
		fprintf(stderr, "gpumon: serving %s://%s/metrics for %u GPU%s (Ctrl-C to stop)\n",
			c.tls_cert_file ? "https" : "http", addr, gpumon_device_count(g),
			gpumon_device_count(g) == 1 ? "" : "s");
	while (!stop_signal)
		sigsuspend(&old);
	gpumon_exporter_destroy(e);
	gpumon_destroy(g);
	return EXIT_OK;
}
