/* SPDX-License-Identifier: MIT */
/* test_mig_scenario.c — TAP test of the fake NVML's `mig` lines (scenario_mig.c): MIG mode, MIG
 * devices with their defaults, and every error with its line number. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "scenario.h"

#define GiB (1024ull * 1024 * 1024)

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

/* Checks that text fails at line `line` with a message containing msg. */
static void parse_fails(const char *text, int line, const char *msg)
{
	char err[256] = "";
	struct scn *s = NULL;
	int got = scn_parse(text, strlen(text), &s, err, sizeof err);
	if (!ok(got == line && !s && strstr(err, msg), "fails at line %d with '%s'", line, msg))
		printf("# got line %d: %s\n", got, err);
	scn_free(s);
}

static void test_good(void)
{
	char err[256] = "";
	struct scn *s = NULL;
	const char *text = "gpu 0 name=X\ngpu 1\ngpu 2\n"
			   "mig 0 gi=7 ci=0 profile=1g.18gb uuid=MIG-a total=16.5GiB reserved=1GiB used=2GiB\n"
			   "mig 0 gi=7 ci=1\n"
			   "mig 1 off pending=on\n";
	ok(scn_parse(text, strlen(text), &s, err, sizeof err) == 0 && s, "parses: %s", err);
	if (!s)
		return;
	int cur, pend;
	scn_mig_mode(s, 0, &cur, &pend);
	ok(cur == 1 && pend == 1, "a device line turns MIG mode on");
	scn_mig_mode(s, 1, &cur, &pend);
	ok(cur == 0 && pend == 1, "mode and pending apart");
	scn_mig_mode(s, 2, &cur, &pend);
	ok(cur == 0 && pend == 0, "default off");
	ok(scn_mig_count(s) == 2, "two MIG devices");
	const struct scn_mig *m = scn_mig_get(s, 0);
	ok(m && m->gpu == 0 && m->gi == 7 && m->ci == 0 && !strcmp(m->profile, "1g.18gb") && !strcmp(m->uuid, "MIG-a"),
	   "keys kept");
	ok(m && m->total == 16 * GiB + GiB / 2 && m->reserved == GiB && m->used == 2 * GiB, "sizes kept");
	m = scn_mig_get(s, 1);
	ok(m && !strcmp(m->profile, "1g.10gb") && m->total == 10 * GiB && m->used == 0, "defaults");
	ok(m && !strncmp(m->uuid, "MIG-", 4) && strlen(m->uuid) == 40 && strcmp(m->uuid, scn_mig_get(s, 0)->uuid),
	   "a default UUID of MIG form: %s", m ? m->uuid : "");
	ok(scn_mig_find(s, 0, 1) == 1 && scn_mig_find(s, 0, 2) == -1 && scn_mig_find(s, 1, 0) == -1,
	   "k-th device of a GPU");
	ok(scn_mig_get(s, 2) == NULL, "out of range: NULL");
	scn_free(s);
}

static void test_errors(void)
{
	parse_fails("mig 0 on\n", 1, "gpu 0 is not declared");
	parse_fails("gpu 0\nmig 0\n", 2, "missing arguments");
	parse_fails("gpu 0\nmig 0 maybe\n", 2, "expected on or off");
	parse_fails("gpu 0\nmig 0 on pending=x\n", 2, "pending=on|off");
	parse_fails("gpu 0\nmig 0 on\nmig 0 off\n", 3, "given twice");
	parse_fails("gpu 0\nmig 0 gi=1\n", 2, "needs gi=N and ci=N");
	parse_fails("gpu 0\nmig 0 gi=1 ci=0 colour=red\n", 2, "unknown key 'colour'");
	parse_fails("gpu 0\nmig 0 gi=x ci=0\n", 2, "bad value 'x' for gi");
	parse_fails("gpu 0\nmig 0 gi=1 ci=0 total=1GiB used=2GiB\n", 2, "exceed total");
	parse_fails("gpu 0\nmig 0 gi=1 ci=0\nmig 0 gi=1 ci=0\n", 3, "twice");
	parse_fails("gpu 0\nmig 0 off\nmig 0 gi=1 ci=0\n", 3, "MIG mode is off");
	parse_fails("gpu 0\nmig 0 gi=1 ci=0\nmig 0 off\n", 3, "cannot be off");
	parse_fails("gpu 0\nmig 0 gi=1 ci=0 profile=0123456789012345678901234567890123\n", 2, "longer than 31");
}

int main(void)
{
	test_good();
	test_errors();
	printf("1..%d\n", tests_run);
	return tests_failed ? 1 : 0;
}
