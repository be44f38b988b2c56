/* SPDX-License-Identifier: MIT */
/* test_fake_scenario.c — TAP test of the fake NVML's scenario parser and time model: good files
 * and their defaults, every kind of error with its line number, and changes over time. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario.h"

#define GiB (1024ull * 1024 * 1024)
#define MiB (1024ull * 1024)

static int tests_run, tests_failed;

__attribute__((format(printf, 2, 3))) static int ok(int cond, const char *fmt, ...)
{
	va_list ap;
	printf("%sok %d - ", cond ? "" : "not ", ++tests_run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	tests_failed += !cond;
	return cond;
}

/* Parses a NUL-terminated text; reports a parse failure as a failed test. */
static struct scn *parse_ok(const char *what, const char *text)
{
	char err[256];
	struct scn *s = NULL;
	int line = scn_parse(text, strlen(text), &s, err, sizeof err);
	if (!ok(line == 0 && s != NULL, "parses: %s", what))
		printf("# error: %s\n", err);
	return s;
}

/* Checks that text fails at line `line` with a message containing `msg`. */
static void parse_err(const char *text, size_t len, int line, const char *msg)
{
	char err[256] = "";
	struct scn *s = (struct scn *)&err; /* must be reset to NULL */
	int got = scn_parse(text, len, &s, err, sizeof err);
	char want[64];
	snprintf(want, sizeof want, "%d: ", line);
	int good = got == line && s == NULL && strncmp(err, want, strlen(want)) == 0 && strstr(err, msg);
	if (!ok(good, "error at line %d: %s", line, msg))
		printf("# got %d, '%s'\n", got, err);
	if (s != (struct scn *)&err)
		scn_free(s);
}

static void err_str(const char *text, int line, const char *msg)
{
	parse_err(text, strlen(text), line, msg);
}

static struct scn_state shared_state; /* the state at() returns */

/* The state of s at time t, computed afresh in st. */
static struct scn_state *at(const struct scn *s, double t)
{
	scn_state_free(&shared_state);
	if (scn_state_init(&shared_state, s) < 0) {
		ok(0, "state allocated");
		exit(1);
	}
	scn_state_update(&shared_state, s, t);
	return &shared_state;
}

static size_t present(const struct scn_state *st, unsigned gpu)
{
	size_t n = 0;
	for (size_t i = st->gpu_first[gpu]; i < st->gpu_first[gpu + 1]; i++)
		n += st->proc[i].present;
	return n;
}

static const struct scn_proc *find_proc(const struct scn_state *st, unsigned gpu, unsigned pid)
{
	for (size_t i = st->gpu_first[gpu]; i < st->gpu_first[gpu + 1]; i++)
		if (st->proc[i].pid == pid)
			return &st->proc[i];
	return NULL;
}

static void test_empty_and_defaults(void)
{
	struct scn *s = parse_ok("empty file", "");
	if (s) {
		ok(scn_gpu_count(s) == 0, "empty file has no GPU");
		ok(strcmp(scn_driver_version(s), "580.159.04") == 0, "default driver version");
		ok(strcmp(scn_nvml_version(s), "12.580.159.04") == 0, "default NVML version");
		ok(scn_init_error(s) == 0, "no init error by default");
		at(s, 0);
	}
	scn_free(s);

	s = parse_ok("defaults", "gpu 1\ngpu 0\n");
	if (!s)
		return;
	struct scn_state *st = at(s, 0);
	const struct scn_gpu *g = &st->gpu[1];
	ok(scn_gpu_count(s) == 2 && st->ngpus == 2, "two GPUs declared in any order");
	ok(strcmp(g->name, "Fake GPU") == 0, "default name");
	ok(strcmp(g->uuid, "GPU-00000000-0000-0000-0000-000000000001") == 0, "default uuid");
	ok(strcmp(g->bus_id, "00000000:01:00.0") == 0 && strcmp(g->bus_id_legacy, "0000:01:00.0") == 0,
	   "default bus id");
	ok(g->total == 80 * GiB && g->reserved == 0 && g->used == 0, "default memory");
	ok(g->util == 0 && g->memutil == 0 && g->temp_c == 30 && g->power_mw == 100000 &&
		   g->energy_mj == 0 && g->sm_mhz == 1500 && g->mem_mhz == 2600 && !g->lost,
	   "default readings");
	scn_free(s);
}

static void test_h200(void)
{
	struct scn *s = parse_ok(
		"the reference H200",
		"# reference machine\r\n"
		"driver 580.159.04\r\n"
		"nvml \"12.580.159.04\"\r\n"
		"gpu 0 name=\"NVIDIA H200\" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 \t"
		"bus=00000000:00:06.0 total=150754820096 reserved=644939776 used=0 util=0 memutil=0 "
		"temp=41 power=127790 energy=123456789 sm=1980 mem=3201 # idle\r\n");
	if (!s)
		return;
	struct scn_state *st = at(s, 0);
	const struct scn_gpu *g = &st->gpu[0];
	ok(strcmp(g->name, "NVIDIA H200") == 0, "quoted name with a blank");
	ok(strcmp(g->uuid, "GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51") == 0, "uuid");
	ok(strcmp(g->bus_id, "00000000:00:06.0") == 0, "bus id");
	ok(strcmp(g->bus_id_legacy, "0000:00:06.0") == 0, "legacy bus id derived");
	ok(g->pci_domain == 0 && g->pci_bus == 0 && g->pci_device == 6, "pci numbers");
	ok(g->total == 150754820096ull && g->reserved == 644939776ull && g->used == 0, "memory");
	ok(g->temp_c == 41 && g->power_mw == 127790 && g->energy_mj == 123456789 &&
		   g->sm_mhz == 1980 && g->mem_mhz == 3201,
	   "readings");
	ok(strcmp(scn_nvml_version(s), "12.580.159.04") == 0, "quoted version");
	scn_free(s);
}

static void test_values(void)
{
	struct scn *s = parse_ok("sizes, bus ids, codes",
				 "gpu 0 total=1.5GiB reserved=1KiB used=0.5MiB bus=1a:Bc:1f.7\n"
				 "gpu 1 total=2TiB reserved=3 used=1.25GiB bus=0000ABCD:00:00.0\n"
				 "init_error NVML_ERROR_LIB_RM_VERSION_MISMATCH\n");
	if (!s)
		return;
	struct scn_state *st = at(s, 0);
	ok(st->gpu[0].total == 1610612736ull, "1.5GiB");
	ok(st->gpu[0].reserved == 1024 && st->gpu[0].used == 512 * 1024, "KiB, fractional MiB");
	ok(st->gpu[1].total == 2048 * GiB && st->gpu[1].reserved == 3, "TiB, plain bytes");
	ok(st->gpu[1].used == 1342177280ull, "1.25GiB");
	ok(strcmp(st->gpu[0].bus_id, "0000001A:BC:1F.7") == 0 &&
		   strcmp(st->gpu[0].bus_id_legacy, "001A:BC:1F.7") == 0,
	   "bus id normalised to 8 upper-case digits");
	ok(st->gpu[1].pci_domain == 0xabcd, "bus domain");
	ok(scn_init_error(s) == 18, "init_error by name with prefix");
	scn_free(s);

	s = parse_ok("init_error by number", "init_error 9\n");
	ok(s && scn_init_error(s) == 9, "init_error 9");
	scn_free(s);
	s = parse_ok("init_error short name", "init_error DRIVER_NOT_LOADED");
	ok(s && scn_init_error(s) == 9, "init_error DRIVER_NOT_LOADED without a final newline");
	scn_free(s);
	s = parse_ok("escapes in quotes",
		     "gpu 0 name=\"a \\\"b\\\" \\\\ # c\"\n\"gpu\" 1 \"name=x y\"\n");
	if (s) {
		st = at(s, 0);
		ok(strcmp(st->gpu[0].name, "a \"b\" \\ # c") == 0, "escaped quote and backslash");
		ok(strcmp(st->gpu[1].name, "x y") == 0, "quoted key=value token");
	}
	scn_free(s);
}

static void test_processes(void)
{
	struct scn *s = parse_ok("processes",
				 "gpu 0\ngpu 1\n"
				 "proc 1 10 used=1GiB name=\"python train.py\" type=both gi=1 ci=2\n"
				 "proc 0 20\n"
				 "proc 0 21 used=na type=graphics\n"
				 "procs 1 1000 1000 used=1MiB name=worker\n"
				 "proc 1 5 type=compute\n");
	if (!s)
		return;
	struct scn_state *st = at(s, 0);
	const struct scn_proc *p = find_proc(st, 1, 10), *q = find_proc(st, 0, 20);
	ok(st->nprocs == 1004 && present(st, 0) == 2 && present(st, 1) == 1002,
	   "processes grouped by GPU");
	ok(p && p->present && p->used_known && p->used == GiB && p->gi == 1 && p->ci == 2 &&
		   p->type == (SCN_PROC_COMPUTE | SCN_PROC_GRAPHICS) &&
		   strcmp(p->name, "python train.py") == 0,
	   "process keys");
	ok(q && q->type == SCN_PROC_COMPUTE && q->used_known && q->used == 0 && q->name == NULL &&
		   q->gi == 0xFFFFFFFFu && q->ci == 0xFFFFFFFFu,
	   "process defaults");
	q = find_proc(st, 0, 21);
	ok(q && !q->used_known && q->type == SCN_PROC_GRAPHICS, "used=na, type=graphics");
	ok(st->proc[st->gpu_first[1]].pid == 10 && st->proc[st->gpu_first[1] + 1].pid == 1000 &&
		   st->proc[st->gpu_first[1] + 1000].pid == 1999 &&
		   st->proc[st->gpu_first[2] - 1].pid == 5,
	   "file order kept within a GPU");
	q = find_proc(st, 1, 1999);
	ok(q && q->used == MiB && strcmp(q->name, "worker") == 0, "procs keys apply to all");
	scn_free(s);
}

static void test_time(void)
{
	struct scn *s = parse_ok("time model",
				 "gpu 0 used=1GiB\n"
				 "gpu 1\n"
				 "proc 0 100 used=1GiB\n"
				 "at 5 gpu 0 used=2GiB util=50\n"
				 "at 2 gpu 0 util=20\n"          /* later line wins once both are due */
				 "at 5 proc 0 100 used=2GiB\n"
				 "at 3 proc 0 200 used=3GiB name=late\n"
				 "at 7.5 proc 0 100 gone\n"
				 "at 9 proc 0 100\n"             /* a new process with that pid */
				 "at 4 lost 1\n");
	if (!s)
		return;
	struct scn_state st;
	if (!ok(scn_state_init(&st, s) == 0, "state init"))
		return;
	scn_state_update(&st, s, 0);
	ok(st.gpu[0].used == GiB && st.gpu[0].util == 0 && present(&st, 0) == 1,
	   "t=0: declarations only");
	scn_state_update(&st, s, 2.5);
	ok(st.gpu[0].util == 20 && st.gpu[0].used == GiB, "t=2.5: at 2 applied");
	scn_state_update(&st, s, 3);
	const struct scn_proc *p = find_proc(&st, 0, 200);
	ok(p && p->present && p->used == 3 * GiB && strcmp(p->name, "late") == 0 &&
		   present(&st, 0) == 2,
	   "t=3: process added by at");
	ok(!st.gpu[1].lost, "t=3: gpu 1 not lost yet");
	scn_state_update(&st, s, 4);
	ok(st.gpu[1].lost, "t=4: gpu 1 lost (T <= t)");
	scn_state_update(&st, s, 6);
	ok(st.gpu[0].used == 2 * GiB && st.gpu[0].util == 20, "t=6: file order, not time order");
	ok(find_proc(&st, 0, 100)->used == 2 * GiB, "t=6: process changed");
	scn_state_update(&st, s, 8);
	ok(!find_proc(&st, 0, 100)->present && present(&st, 0) == 1, "t=8: process gone");
	scn_state_update(&st, s, 9);
	p = find_proc(&st, 0, 100);
	ok(p->present && p->used == 0, "t=9: pid back with defaults");
	scn_state_update(&st, s, 1);
	ok(st.gpu[0].util == 0 && !st.gpu[1].lost && find_proc(&st, 0, 100)->used == GiB,
	   "going back in time recomputes");
	scn_state_free(&st);
	scn_state_free(&st);
	scn_free(s);
}

/* grow=SIZE: used rises by SIZE a second from the line that set it, between events too. */
static void test_grow(void)
{
	struct scn *s = parse_ok("grow",
				 "gpu 0\n"
				 "proc 0 100 used=1GiB grow=1MiB\n"
				 "at 10 proc 0 100 grow=0\n"
				 "at 20 proc 0 100 used=2GiB grow=2MiB\n");
	if (!s)
		return;
	struct scn_state st;
	if (!ok(scn_state_init(&st, s) == 0, "state init"))
		return;
	scn_state_update(&st, s, 0);
	ok(find_proc(&st, 0, 100)->used == GiB, "grow: t=0 the declared figure");
	scn_state_update(&st, s, 5);
	ok(find_proc(&st, 0, 100)->used == GiB + 5 * MiB, "grow: t=5 five seconds of growth");
	scn_state_update(&st, s, 7.5);
	ok(find_proc(&st, 0, 100)->used == GiB + 7 * MiB + MiB / 2, "grow: t=7.5 between events (cached state)");
	scn_state_update(&st, s, 15);
	ok(find_proc(&st, 0, 100)->used == GiB + 10 * MiB, "grow: t=15 stopped at 10 s, growth kept");
	scn_state_update(&st, s, 21);
	ok(find_proc(&st, 0, 100)->used == 2 * GiB + 2 * MiB, "grow: t=21 a new base and rate");
	scn_state_update(&st, s, 3);
	ok(find_proc(&st, 0, 100)->used == GiB + 3 * MiB, "grow: going back in time recomputes");
	scn_state_free(&st);
	scn_free(s);
	err_str("gpu 0\nproc 0 1 grow=fast\n", 2, "bad size 'fast' for grow");
}

static void test_rules(void)
{
	int code = -1;
	struct scn *s = parse_ok("error lines",
				 "gpu 0\ngpu 1\n"
				 "error nvmlDeviceGetPowerUsage NOT_SUPPORTED gpu=1\n"
				 "error nvmlDeviceGetMemoryInfo_v2 15 from=2 until=4.5\n"
				 "error nvmlDeviceGetMemoryInfo_v2 TIMEOUT from=3 gpu=0\n"
				 "error nvmlSystemGetDriverVersion NVML_ERROR_NOT_SUPPORTED\n"
				 "error nvmlInit_v2 DRIVER_NOT_LOADED until=1\n");
	if (!s)
		return;
	ok(scn_rule_code(s, SCN_FN_POWER, 1, 0, &code) && code == 3, "gpu= matches its GPU");
	ok(!scn_rule_code(s, SCN_FN_POWER, 0, 0, &code), "gpu= does not match another GPU");
	ok(!scn_rule_code(s, SCN_FN_MEMORY_V2, 0, 1.99, &code), "before from");
	ok(scn_rule_code(s, SCN_FN_MEMORY_V2, 1, 2, &code) && code == 15, "from is inclusive");
	ok(scn_rule_code(s, SCN_FN_MEMORY_V2, 0, 3.5, &code) && code == 10, "last matching line wins");
	ok(scn_rule_code(s, SCN_FN_MEMORY_V2, 1, 3.5, &code) && code == 15, "earlier line, other GPU");
	ok(!scn_rule_code(s, SCN_FN_MEMORY_V2, 1, 4.5, &code), "until is exclusive");
	ok(scn_rule_code(s, SCN_FN_DRIVER_VERSION, -1, 100, &code) && code == 3, "non-device call");
	ok(scn_rule_code(s, SCN_FN_INIT_V2, -1, 0, &code) && code == 9 &&
		   !scn_rule_code(s, SCN_FN_INIT, -1, 0, &code),
	   "functions matched by exact name");
	ok(strcmp(scn_fn_name(SCN_FN_GRAPHICS_PROCS_V3), "nvmlDeviceGetGraphicsRunningProcesses_v3") ==
		   0 && strcmp(scn_fn_name(SCN_FN_N), "?") == 0,
	   "function names");
	scn_free(s);
}

static void test_errors(void)
{
	err_str("foo 1\n", 1, "unknown keyword 'foo'");
	err_str("# comment\n\ngpu 0 fo=1\n", 3, "unknown key 'fo'");
	err_str("gpu 0 temp=abc\n", 1, "bad number 'abc' for temp");
	err_str("gpu 0 temp=-1\n", 1, "bad number");
	err_str("gpu 0 power=4294967296\n", 1, "bad number");
	err_str("gpu 0 energy=18446744073709551616\n", 1, "bad number");
	err_str("gpu 0 total=12XB\n", 1, "bad size '12XB'");
	err_str("gpu 0 total=1.5\n", 1, "bad size");
	err_str("gpu 0 total=1.GiB\n", 1, "bad size");
	err_str("gpu 0 total=99999999999999999999999999\n", 1, "bad size");
	err_str("gpu 0 total=20000000TiB\n", 1, "bad size");
	err_str("gpu 0 util=101\n", 1, "bad percentage");
	err_str("gpu 0 bus=0:0:0\n", 1, "bad bus id");
	err_str("gpu 0 bus=10000:00:00.0\n", 1, "bad bus id");
	err_str("gpu 0 name\n", 1, "expected key=value, got 'name'");
	err_str("gpu 0 =5\n", 1, "expected key=value");
	err_str("gpu 0\ngpu 0\n", 2, "gpu 0 declared twice (first at line 1)");
	err_str("gpu 0\n\ngpu 2\n", 3, "gpu 1 is not declared");
	err_str("gpu 4096\n", 1, "more than 4096 GPUs");
	err_str("gpu x\n", 1, "bad GPU index 'x'");
	err_str("gpu 0\nproc 1 5\n", 2, "gpu 1 is not declared");
	err_str("proc 0 5\ngpu 0\n", 1, "gpu 0 is not declared");
	err_str("gpu 0\nat 1 gpu 1 util=5\n", 2, "gpu 1 is not declared");
	err_str("gpu 0\nlost 3\n", 2, "gpu 3 is not declared");
	err_str("gpu 0\nat 1 lost 1\n", 2, "gpu 1 is not declared");
	err_str("gpu 0\nerror nvmlDeviceGetName 3 gpu=2\n", 2, "gpu 2 is not declared");
	err_str("gpu 0 total=1GiB reserved=600MiB used=500MiB\n", 1, "reserved + used exceed total");
	err_str("gpu 0 reserved=81GiB\n", 1, "reserved + used exceed total");
	err_str("gpu\n", 1, "missing arguments");
	err_str("gpu 0\nproc 0\n", 2, "missing arguments");
	err_str("gpu 0\nprocs 0 1\n", 2, "missing arguments");
	err_str("at 5\n", 1, "missing arguments");
	err_str("gpu 0\nat 5 gpu 0\n", 2, "missing arguments");
	err_str("lost\n", 1, "missing arguments");
	err_str("driver\n", 1, "missing arguments");
	err_str("error nvmlInit\n", 1, "missing arguments");
	err_str("driver 1 2\n", 1, "unexpected '2'");
	err_str("gpu 0\nat 1 proc 0 5 gone now\n", 2, "unexpected 'now'");
	err_str("gpu 0\nproc 0 5\nproc 0 5\n", 3, "pid 5 declared twice on gpu 0 (first at line 2)");
	err_str("gpu 0\nprocs 0 1 10\nprocs 0 10 5\n", 3, "pid 10 declared twice");
	err_str("gpu 0\nproc 0 x\n", 2, "bad pid 'x'");
	err_str("gpu 0\nproc 0 4294967296\n", 2, "bad pid");
	err_str("gpu 0\nprocs 0 4294967295 2\n", 2, "pids past");
	err_str("gpu 0\nprocs 0 1 0\n", 2, "bad count");
	err_str("gpu 0\nproc 0 1 type=cuda\n", 2, "bad process type");
	err_str("gpu 0\nproc 0 1 used=lots\n", 2, "bad size 'lots' for used");
	err_str("gpu 0\nproc 0 1 gone\n", 2, "expected key=value, got 'gone'");
	err_str("gpu 0\nat x gpu 0 util=1\n", 2, "bad time 'x'");
	err_str("gpu 0\nat -1 gpu 0 util=1\n", 2, "bad time");
	err_str("gpu 0\nat 1e3 gpu 0 util=1\n", 2, "bad time");
	err_str("gpu 0\nat 99999999999999 gpu 0 util=1\n", 2, "bad time");
	err_str("gpu 0\nat 1 gpus 0\n", 2, "unknown keyword 'gpus' after 'at'");
	err_str("error nvmlDeviceGetFoo 3\n", 1, "unknown function 'nvmlDeviceGetFoo'");
	err_str("error nvmlErrorString 3\n", 1, "unknown function");
	err_str("error nvmlInit BOGUS\n", 1, "bad return code 'BOGUS'");
	err_str("error nvmlInit 3 gpu=0\n", 1, "gpu= does not apply to nvmlInit");
	err_str("error nvmlInit 3 from=5 until=5\n", 1, "until must be later than from");
	err_str("error nvmlInit 3 after=5\n", 1, "unknown key 'after'");
	err_str("init_error 2147483648\n", 1, "bad return code");
	err_str("gpu 0 name=\"unterminated\n", 1, "unterminated quote");
	err_str("driver 0123456789012345678901234567890123456789012345678901234567890123456789"
		"0123456789\n", 1, "version longer than 79 bytes");

	char name[200];
	memset(name, 'n', sizeof name);
	name[sizeof name - 1] = '\0';
	char line[300];
	snprintf(line, sizeof line, "gpu 0 name=%.96s\n", name);
	err_str(line, 1, "name longer than 95 bytes");

	parse_err("gpu 0\ngpu\0 1\n", 13, 2, "NUL byte in line");

	size_t n = SCN_MAX_LINE + 20;
	char *big = malloc(n);
	if (big) {
		memset(big, ' ', n);
		memcpy(big, "gpu 0\n# ", 8);
		big[6 + SCN_MAX_LINE + 1] = '\n'; /* line 2 is 4097 bytes */
		parse_err(big, n, 2, "line longer than 4096 bytes");
		big[6 + SCN_MAX_LINE] = '\n'; /* now 4096 bytes: fine */
		struct scn *s = NULL;
		ok(scn_parse(big, n, &s, NULL, 0) == 0 && s, "a line of exactly 4096 bytes is fine");
		scn_free(s);
		free(big);
	}
	err_str("gpu 0\nprocs 0 1 1000001\n", 2, "more than 1000000 processes");
	err_str("gpu 0\nprocs 0 1 1000000\nproc 0 0\n", 3, "more than 1000000 processes");
}

static void test_limits(void)
{
	struct scn *s = parse_ok("a million processes",
				 "gpu 0\nprocs 0 1 1000000 used=1MiB\n"
				 "at 1 proc 0 1 gone\nat 1 proc 0 1000000 used=2MiB\n");
	if (s) {
		struct scn_state *st = at(s, 0);
		ok(st->nprocs == 1000000 && present(st, 0) == 1000000, "all present at t=0");
		st = at(s, 1);
		ok(present(st, 0) == 999999 && st->proc[999999].used == 2 * MiB,
		   "changes to existing pids need no new process");
	}
	scn_free(s);

	char err[8];
	int line = scn_parse("x\n", 2, &s, err, sizeof err);
	ok(line == 1 && s == NULL && strlen(err) == sizeof err - 1, "message truncated to errlen");
	ok(scn_parse("gpu 0\n\nbad\n", 11, &s, NULL, 0) == 3 && s == NULL, "no message buffer");
	ok(scn_parse("gpu 0 util=1", 5, &s, NULL, 0) == 0 && s, "len bounds the text");
	scn_free(s);
	scn_free(NULL);
}

int main(void)
{
	test_empty_and_defaults();
	test_h200();
	test_values();
	test_processes();
	test_time();
	test_grow();
	test_rules();
	test_errors();
	test_limits();
	scn_state_free(&shared_state);
	printf("1..%d\n", tests_run);
	return tests_failed ? 1 : 0;
}
