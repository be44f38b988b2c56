/* SPDX-License-Identifier: MIT */
/* test_props.c — device properties and memory health (gpumon_device_props_read) against the fake
 * NVML: the H200's values, only the calls asked for, each state of a field (not supported,
 * refused, failed, a driver without the call), a lost GPU, bad arguments, and XID errors as
 * sampler events. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <string.h>

#define H200 "gpu 0 name=\"NVIDIA H200\" total=150754820096 reserved=644939776\n"

static gpumon_device_props props_new(void)
{
	gpumon_device_props p;
	memset(&p, 0xAB, sizeof p); /* whatever the caller had: the read must clear it */
	p.size = sizeof p;
	return p;
}

static void test_h200_defaults(void)
{
	gpumon *g = open_fake(H200, 0);
	gpumon_device_props p = props_new();
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_ALL, &p), GPUMON_OK, "read every property");
	is_int(p.size, sizeof p, "size kept");
	const uint64_t na = GPUMON_P_FAN | GPUMON_P_RETIRED_SBE | GPUMON_P_RETIRED_DBE | GPUMON_P_RETIRED_PENDING;
	ok(p.present == (GPUMON_P_ALL & ~na), "all present but fan and retired pages (present %#llx)",
	   (unsigned long long)p.present);
	ok(p.not_supported == na, "those are not supported, as on the H200");
	is_int(p.no_permission, 0, "nothing refused");
	is_int(p.fan_pct, 0, "absent fields are zeroed, not left as they were");
	is_int(p.power_limit_mw, 700000, "power limit");
	is_int(p.power_enforced_mw, 700000, "enforced power limit");
	is_int(p.power_default_mw, 700000, "default power limit");
	is_int(p.power_min_mw, 200000, "min power limit");
	is_int(p.power_max_mw, 700000, "max power limit");
	is_int(p.power_management, 1, "power management enabled");
	is_int(p.pstate, 0, "P0");
	is_int(p.memory_temp_c, 35, "memory temperature through the field value");
	is_int(p.clock_max_sm_mhz, 1980, "max SM clock");
	is_int(p.clock_max_mem_mhz, 3201, "max memory clock");
	is_int(p.clock_max_graphics_mhz, 1980, "max graphics clock");
	is_str(p.serial, "1653924291387", "serial");
	is_str(p.vbios, "96.00.A5.00.1A", "VBIOS");
	is_int(p.compute_mode, GPUMON_COMPUTE_DEFAULT, "compute mode");
	is_int(p.persistence, 1, "persistence");
	is_int(p.pcie_gen_current * 100 + p.pcie_width_current, 516, "PCIe gen 5 x16");
	is_int(p.pcie_gen_max * 100 + p.pcie_width_max, 516, "PCIe max gen 5 x16");
	is_int(p.mig_current + p.mig_pending, 0, "MIG disabled");
	is_int(p.ecc_current + p.ecc_pending, 2, "ECC enabled");
	is_int(p.ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_AGGREGATE], 0, "no ECC errors");
	is_int(p.remapped_pending + p.remapped_failure, 0, "no remapping pending or failed");
	gpumon_destroy(g);
}

static void test_values_and_states(void)
{
	gpumon *g = open_fake("gpu 0 ecc_cv_total=7 ecc_ua_total=2 ecc_uv_dram=3 ecc_ca_sram=9 remap_corr=4 "
			      "remap_pending=on retired_sbe=5 retired_dbe=1 retired_pending=on pstate=P8 fan=40 "
			      "compute_mode=prohibited serial=!NO_PERMISSION vbios=!UNKNOWN power_max=!NOT_SUPPORTED "
			      "ecc_cv_sram=!NOT_SUPPORTED\n", 0);
	gpumon_device_props p = props_new();
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_ALL, &p), GPUMON_OK, "failed fields are no failure");
	is_int(p.ecc_total[GPUMON_ECC_CORRECTED][GPUMON_ECC_VOLATILE], 7, "corrected volatile total");
	is_int(p.ecc_total[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_AGGREGATE], 2, "uncorrected aggregate total");
	is_int(p.ecc_dram[GPUMON_ECC_UNCORRECTED][GPUMON_ECC_VOLATILE], 3, "uncorrected volatile DRAM");
	ok(!(p.present & GPUMON_P_ECC_SRAM) && (p.not_supported & GPUMON_P_ECC_SRAM),
	   "one SRAM counter not supported: the SRAM group is absent");
	is_int(p.remapped_correctable, 4, "remapped rows");
	is_int(p.remapped_pending, 1, "remapping pending");
	is_int(p.retired_sbe * 10 + p.retired_dbe, 51, "retired pages");
	is_int(p.retired_pending, 1, "retirement pending");
	is_int(p.pstate, 8, "P8");
	is_int(p.fan_pct, 40, "fan");
	is_int(p.compute_mode, GPUMON_COMPUTE_PROHIBITED, "compute mode");
	ok(!(p.present & GPUMON_P_SERIAL) && (p.no_permission & GPUMON_P_SERIAL), "serial refused");
	ok(!(p.present & GPUMON_P_VBIOS) && !(p.not_supported & GPUMON_P_VBIOS) && !(p.no_permission & GPUMON_P_VBIOS),
	   "VBIOS failed otherwise");
	ok(strstr(gpumon_errmsg(g), "nvmlDeviceGetVbiosVersion") != NULL, "the message names the failed call: %s",
	   gpumon_errmsg(g));
	ok(!(p.present & (GPUMON_P_POWER_MIN | GPUMON_P_POWER_MAX)) &&
	   (p.not_supported & (GPUMON_P_POWER_MIN | GPUMON_P_POWER_MAX)) == (GPUMON_P_POWER_MIN | GPUMON_P_POWER_MAX),
	   "min and max come from one call: both absent");
	gpumon_destroy(g);
}

static int count_lines(const char *path, const char *word)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int n = 0;
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		n += strstr(line, word) != NULL;
	fclose(f);
	return n;
}

static void test_only_needed_calls(void)
{
	char trace[64];
	snprintf(trace, sizeof trace, "/tmp/gpumon-props-trace-%d", (int)getpid());
	unlink(trace);
	setenv("FAKE_NVML_TRACE", trace, 1);
	gpumon *g = open_fake(H200, 0);
	ok(truncate(trace, 0) == 0, "trace emptied");
	gpumon_device_props p = props_new();
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_REMAPPED_ROWS | GPUMON_P_ECC_TOTAL, &p), GPUMON_OK, "two groups");
	is_int(count_lines(trace, "nvmlDevice"), 5, "one remapped-rows call and four ECC totals");
	is_int(count_lines(trace, "nvmlDeviceGetTotalEccErrors"), 4, "the four totals");
	ok(p.present == (GPUMON_P_REMAPPED_ROWS | GPUMON_P_ECC_TOTAL), "only those present");
	ok(truncate(trace, 0) == 0, "trace emptied");
	is_int(gpumon_device_props_read(g, 0, 0, &p), GPUMON_OK, "nothing asked");
	is_int(count_lines(trace, "nvml"), 0, "nothing asked: no call");
	gpumon_destroy(g);
	unsetenv("FAKE_NVML_TRACE");
	unlink(trace);
}

static void test_old_driver_and_lost(void)
{
	gpumon *g = open_fake(H200, 1);
	gpumon_device_props p = props_new();
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_ALL, &p), GPUMON_OK, "a driver without the calls");
	is_int(p.present, 0, "nothing present");
	ok(p.not_supported == GPUMON_P_ALL, "everything not supported");
	gpumon_destroy(g);

	g = open_fake(H200 "at 0 lost 0\n", 0);
	p = props_new();
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_SERIAL, &p), GPUMON_E_LOST, "lost GPU");
	is_int(p.present | p.not_supported | p.no_permission, 0, "no masks for a lost GPU");
	gpumon_device_info info;
	gpumon_device_info_get(g, 0, &info);
	is_int(info.lost, 1, "the device is marked lost");
	gpumon_destroy(g);
}

static void test_bad_arguments(void)
{
	gpumon *g = open_fake(H200, 0);
	gpumon_device_props p = props_new();
	is_int(gpumon_device_props_read(g, 1, GPUMON_P_ALL, &p), GPUMON_E_NOT_FOUND, "device 1 of 1");
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_ALL + 1, &p), GPUMON_E_INVAL, "unknown bits");
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_ALL, NULL), GPUMON_E_INVAL, "NULL props");
	is_int(gpumon_device_props_read(NULL, 0, GPUMON_P_ALL, &p), GPUMON_E_INVAL, "NULL handle");
	p.size = 8;
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_ALL, &p), GPUMON_E_INVAL, "size not set");
	ok(strstr(gpumon_errmsg(g), "size") != NULL, "the message says why");
	gpumon_destroy(g);
}

static void test_xid_events(void)
{
	gpumon *g = open_fake(H200 "gpu 1\nat 0.1 xid 1 79\nat 0.2 xid 0 13\n", 0);
	gpumon_sampler *s = NULL;
	is_int(gpumon_sampler_create(g, NULL, &s), GPUMON_OK, "sampler");
	size_t n = 0;
	gpumon_record *recs = collect_records(s, 1500, &n); /* XIDs are asked for once a second */
	int seen = 0;
	for (size_t i = 0; recs && i < n; i++) {
		if (recs[i].kind != GPUMON_REC_EVENT || strcmp(recs[i].event_kind, GPUMON_EVENT_XID) != 0)
			continue;
		if (seen == 0) {
			is_int(recs[i].dev, 1, "first XID on GPU 1");
			is_str(recs[i].event_text, "GPU 1: XID 79", "its text names GPU and code");
		} else if (seen == 1) {
			is_int(recs[i].dev, 0, "second on GPU 0");
			is_str(recs[i].event_text, "GPU 0: XID 13", "its text");
		}
		seen++;
	}
	is_int(seen, 2, "each XID once");
	free(recs);
	uint64_t t0 = now_ns();
	gpumon_sampler_destroy(s);
	ok(now_ns() - t0 < 2000000000u, "destroy does not wait for an XID");
	gpumon_destroy(g);
}

/* The health verdict: each problem from its figure, corrected errors are wear (no problem), and an
 * absent field is no problem either. */
static void test_health_problems(void)
{
	is_int(gpumon_health_problems(NULL), 0, "NULL: no problems");
	gpumon *g = open_fake(H200, 0);
	gpumon_device_props p = props_new();
	is_int(gpumon_device_props_read(g, 0, GPUMON_P_HEALTH, &p), GPUMON_OK, "clean H200 read");
	is_int(gpumon_health_problems(&p), 0, "a clean H200 has no problem");
	gpumon_destroy(g);

	g = open_fake(H200 "at 0 gpu 0 ecc_cv_total=500 remap_corr=7\n", 0);
	p = props_new();
	gpumon_device_props_read(g, 0, GPUMON_P_HEALTH, &p);
	is_int(gpumon_health_problems(&p), 0, "corrected errors and rows remapped for them are wear");
	gpumon_destroy(g);

	static const struct {
		const char *keys;
		unsigned want;
	} cases[] = {
		{"ecc_uv_total=1", GPUMON_HEALTH_ECC_UNCORRECTED},
		{"ecc_ua_total=3", 0}, /* aggregate only: an old error, cleared by the driver's reload */
		{"retired_pending=on", GPUMON_HEALTH_RETIRED_PENDING},
		{"retired_dbe=2", GPUMON_HEALTH_RETIRED_DBE},
		{"remap_pending=on", GPUMON_HEALTH_REMAP_PENDING},
		{"remap_failure=on", GPUMON_HEALTH_REMAP_FAILURE},
		{"remap_unc=1", GPUMON_HEALTH_REMAP_UNCORRECTABLE},
		{"ecc_uv_total=1 remap_pending=on", GPUMON_HEALTH_ECC_UNCORRECTED | GPUMON_HEALTH_REMAP_PENDING},
		{"ecc_uv_total=!NOT_SUPPORTED", 0}, /* the count cannot be read: no problem, no all-clear */
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char scn[256];
		snprintf(scn, sizeof scn, "gpu 0 name=\"NVIDIA H200\" %s\n", cases[i].keys);
		g = open_fake(scn, 0);
		p = props_new();
		gpumon_device_props_read(g, 0, GPUMON_P_HEALTH, &p);
		is_int(gpumon_health_problems(&p), cases[i].want, "problems of %s", cases[i].keys);
		gpumon_destroy(g);
	}
}

int main(void)
{
	test_h200_defaults();
	test_values_and_states();
	test_only_needed_calls();
	test_old_driver_and_lost();
	test_bad_arguments();
	test_xid_events();
	test_health_problems();
	remove_scenario();
	return tap_done();
}
