/* SPDX-License-Identifier: MIT */
/* run_opts.c — the options of `gpumon run`: its help, and parsing into struct opts with a usage
 * error (exit status 2) that names the bad option before anything is started. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run_state.h"

static void help(void)
{
	printf("Usage: gpumon run [OPTIONS] [--] CMD [ARGS...]\n"
	       "Runs CMD with the GPU allocator settings asked for, records GPU memory, the job's\n"
	       "process tree, the other processes on its GPUs and what the job reports over\n"
	       "GPUMON_RUN_SOCKET into one recording, and exits with CMD's status.\n\n"
	       "Allocator settings (turned into each framework's variables; a note says when one has no effect):\n"
	       "  --limit SIZE           hard cap per process (Paddle; JAX as a fraction; NVML-enforced for all)\n"
	       "  --initial SIZE         initial pool (Paddle naive_best_fit)\n"
	       "  --no-prealloc          do not pre-allocate (JAX, TensorFlow, Paddle auto_growth)\n"
	       "  --growth               grow on demand (the same variables as --no-prealloc)\n"
	       "  --fraction F           0 < F <= 1 of GPU memory (JAX; Paddle naive_best_fit)\n"
	       "  --expandable           PyTorch expandable segments\n"
	       "  --max-split SIZE       PyTorch max_split_size_mb\n"
	       "  --gc-threshold F       PyTorch garbage_collection_threshold, 0 < F < 1\n"
	       "  --paddle-strategy S    auto_growth, naive_best_fit or thread_local\n"
	       "  --jax-platform-allocator  XLA_PYTHON_CLIENT_ALLOCATOR=platform (frees at once; slow)\n"
	       "  --framework F          auto, torch, paddle, jax, tf or all (default all: they do not conflict)\n"
	       "Job:\n"
	       "  -o FILE                recording (default ./gpumon-run-YYYYmmdd-HHMMSS.mmm-PID.gpumon: jobs\n"
	       "                         started together never collide; an existing file is never overwritten)\n"
	       "  --no-record            no recording: the alerts and the summary still come (from memory)\n"
	       "  --gpu auto|N|UUID|BUS  give the job this GPU (auto: the most free memory) through\n"
	       "                         CUDA_VISIBLE_DEVICES; without it every GPU is sampled\n"
	       "  --interval MS          sampling period (default 10, at least 1)\n"
	       "  --on-exceed warn|term[:GRACE]|kill  when a job process holds more than --limit (default\n"
	       "                         warn); term sends SIGTERM, then SIGKILL if the job still runs\n"
	       "                         GRACE later (default 30s; e.g. term:2m, term:500ms)\n"
	       "  --steps N              stop the job once it has reported N training steps (1 to 1000000;\n"
	       "                         a step any of its processes reports counts once): SIGTERM, then\n"
	       "                         SIGKILL after the grace of --on-exceed term:GRACE (default 30s);\n"
	       "                         gpumon then exits 0\n"
	       "  --no-inside            no inside view: no bootstrap, nothing added to the job's environment\n"
	       "  --history              the monitor inside a PyTorch job keeps the allocator's recent history\n"
	       "                         with Python stacks, so that an out-of-memory names the source lines\n"
	       "                         that hold memory; it costs the job time on every allocation\n"
	       "                         (measured in BENCHMARKS.md, \"Inside the job\")\n"
	       "  -v, --verbose          every allocator note (without it, only settings that have no effect)\n"
	       "  -q, --quiet            no notes at start, no leak alerts, no summary at the end\n"
	       "  -h, --help             this help\n"
	       "SIZE: bytes, or with K, M, G, T (binary; 8G = 8GiB). Exit status: CMD's (128+N when a\n"
	       "signal N killed it; 127 not found, 126 not executable; 0 when --steps stopped it); 2 bad\n"
	       "option or -o FILE exists, 255 recording error.\n"
	       "The protocol of GPUMON_RUN_SOCKET is in docs/run-protocol.md. CMD's stderr passes through\n"
	       "gpumon unchanged (a pseudo-terminal when gpumon's is a terminal) and is scanned for\n"
	       "out-of-memory messages: after an out-of-memory death the summary names the likely cause.\n"
	       "The leak alerts and the summary are the run model's answers, as gpumon report gives them\n"
	       "for the recording.\n"
	       "The inside view: gpumon puts a bootstrap sitecustomize.py first on the job's PYTHONPATH\n"
	       "(in the socket's private directory, removed at the end); when the job imports torch, paddle\n"
	       "or jax, it starts a monitor in that process which sends the allocator's figures, what it\n"
	       "said at an out-of-memory and its snapshot over GPUMON_RUN_SOCKET. The job's code is not\n"
	       "changed; when the view cannot start, gpumon says why once and the job runs untouched.\n");
}

static int bad_value(const char *opt, const char *v, const char *want)
{
	cli_error("run: %s '%s': %s", opt, v, want);
	return EXIT_USAGE;
}

/* GRACE of --on-exceed term:GRACE: a number of seconds, or with ms, s or m; at least 1 ms and
 * at most a day. Returns 0 and *ns, or -1. */
static int parse_grace(const char *s, uint64_t *ns)
{
	char *end;
	if (!(*s >= '0' && *s <= '9'))
		return -1;
	double v = strtod(s, &end), unit = 1e9;
	if (!strcmp(end, "ms"))
		unit = 1e6;
	else if (!strcmp(end, "m"))
		unit = 60e9;
	else if (strcmp(end, "s") && *end)
		return -1;
	v *= unit;
	if (!(v >= 1e6 && v <= 86400e9))
		return -1;
	*ns = (uint64_t)v;
	return 0;
}

/* --on-exceed warn|term[:GRACE]|kill */
static int parse_on_exceed(struct opts *o, const char *v)
{
	o->on_exceed_set = 1;
	o->term_grace_ns = DEFAULT_TERM_GRACE_NS;
	if (!strcmp(v, "warn"))
		o->on_exceed = EXCEED_WARN;
	else if (!strcmp(v, "kill"))
		o->on_exceed = EXCEED_KILL;
	else if (!strncmp(v, "term", 4) && (v[4] == 0 || (v[4] == ':' && !parse_grace(v + 5, &o->term_grace_ns))))
		o->on_exceed = EXCEED_TERM;
	else
		return bad_value("--on-exceed", v, "expected warn, kill, term or term:GRACE (such as term:30s, "
				 "term:500ms or term:2m; at most a day)");
	return EXIT_OK;
}

/* One option with a value; returns 1 when argv[*i] was it, -1 after an error. */
static int value_opt(struct opts *o, int argc, char **argv, int *i, int *rc)
{
	int bad = 0;
	const char *v;
	gpumon_alloc_opts *a = &o->alloc;
#define OPT(l, s) (v = cli_option_value(argc, argv, i, l, s, &bad)) != NULL
	if (OPT("--limit", NULL)) {
		if (gpumon_size_parse(v, &a->limit_bytes))
			*rc = bad_value("--limit", v, "expected a size such as 8G or 8192M");
	} else if (OPT("--initial", NULL)) {
		if (gpumon_size_parse(v, &a->initial_bytes))
			*rc = bad_value("--initial", v, "expected a size such as 2G");
	} else if (OPT("--max-split", NULL)) {
		if (gpumon_size_parse(v, &a->max_split_bytes))
			*rc = bad_value("--max-split", v, "expected a size such as 128M");
	} else if (OPT("--fraction", NULL)) {
		if (gpumon_fraction_parse(v, 1, 1, &a->fraction))
			*rc = bad_value("--fraction", v, "expected a number with 0 < F <= 1");
	} else if (OPT("--gc-threshold", NULL)) {
		if (gpumon_fraction_parse(v, 1, 0, &a->gc_threshold))
			*rc = bad_value("--gc-threshold", v, "expected a number with 0 < F < 1");
	} else if (OPT("--framework", NULL)) {
		o->framework = v;
		if (strcmp(v, "auto") && !(a->frameworks = gpumon_framework_bits(v)))
			*rc = bad_value("--framework", v, "expected auto, torch, paddle, jax, tf or all");
	} else if (OPT("--paddle-strategy", NULL)) {
		a->paddle_strategy = v;
	} else if (OPT("--output", "-o")) {
		o->out = v;
	} else if (OPT("--gpu", NULL)) {
		o->gpu = v;
	} else if (OPT("--interval", NULL)) {
		char *end;
		unsigned long ms = strtoul(v, &end, 10);
		if (*end || end == v || ms < 1 || ms > 60000)
			*rc = bad_value("--interval", v, "expected milliseconds, 1 to 60000");
		o->interval_ms = (unsigned)ms;
	} else if (OPT("--on-exceed", NULL)) {
		*rc = parse_on_exceed(o, v);
	} else if (OPT("--steps", NULL)) {
		char *end;
		unsigned long n = strtoul(v, &end, 10);
		if (!(*v >= '0' && *v <= '9') || *end || n < 1 || n > MAX_STEPS)
			*rc = bad_value("--steps", v, "expected a number of training steps, 1 to 1000000");
		o->steps = (unsigned)n;
	} else {
		if (bad)
			*rc = EXIT_USAGE;
		return bad ? -1 : 0;
	}
#undef OPT
	return *rc ? -1 : 1;
}

int run_opts_parse(int argc, char **argv, struct opts *o)
{
	int i, rc = EXIT_OK;
	o->alloc.size = sizeof o->alloc;
	o->alloc.flags = GPUMON_ALLOC_ENFORCED; /* gpumon run watches --limit itself (the model's LIMIT alert) */
	o->interval_ms = 10;
	o->term_grace_ns = DEFAULT_TERM_GRACE_NS; /* --steps' grace without --on-exceed term:GRACE */
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int r;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (a[0] != '-')
			break;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			help();
			return -1;
		}
		if (!strcmp(a, "--no-prealloc"))
			o->alloc.no_prealloc = 1;
		else if (!strcmp(a, "--growth"))
			o->alloc.growth = 1;
		else if (!strcmp(a, "--expandable"))
			o->alloc.expandable = 1;
		else if (!strcmp(a, "--jax-platform-allocator"))
			o->alloc.jax_platform_allocator = 1;
		else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
			o->quiet = 1;
		else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
			o->verbose = 1;
		else if (!strcmp(a, "--no-record"))
			o->no_record = 1;
		else if (!strcmp(a, "--no-inside"))
			o->no_inside = 1;
		else if (!strcmp(a, "--history"))
			o->history = 1;
		else if ((r = value_opt(o, argc, argv, &i, &rc)) < 0)
			return rc;
		else if (r == 0) {
			cli_error("run: unknown option '%s' (see gpumon run --help)", a);
			return EXIT_USAGE;
		}
	}
	if (i >= argc) {
		cli_error("run: no command given (gpumon run [OPTIONS] -- CMD [ARGS...])");
		return EXIT_USAGE;
	}
	o->cmd = argv + i;
	if (o->no_record && o->out) {
		cli_error("run: -o %s and --no-record: choose one", o->out);
		return EXIT_USAGE;
	}
	if (o->no_inside && o->history) {
		cli_error("run: --history asks the monitor inside the job, which --no-inside turns off: choose one");
		return EXIT_USAGE;
	}
	if (o->on_exceed_set && !o->alloc.limit_bytes) {
		cli_error("run: --on-exceed needs --limit");
		return EXIT_USAGE;
	}
	char err[256];
	if (gpumon_alloc_check(&o->alloc, err, sizeof err)) {
		cli_error("run: %s", err);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}
