/* SPDX-License-Identifier: MIT */
/* test_sample.c — device samples against the fake NVML: nvidia-smi's memory meaning (v2) and the
 * v1 fallback, only the calls asked for, every optional call failing on its own, values that
 * change over time, a GPU lost while sampling, and bad arguments. */
#include <gpumon/gpumon.h>

#include "tap.h" /* after gpumon.h: it then offers open_fake() */

#include <time.h>


#define H200_LINE                                                                                     \
	"gpu 0 name=\"NVIDIA H200\" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 bus=00000000:00:06.0 " \
	"total=150754820096 reserved=644939776 used=1GiB util=35 memutil=12 temp=41 power=127790 "         \
	"energy=123456789 sm=1980 mem=3201\n"

static void test_full_sample(void)
{
	gpumon *g = open_fake(H200_LINE, 0);
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s), GPUMON_OK, "sample all fields");
	is_int(s.present, GPUMON_F_ALL, "every field present");
	is_int(s.memory_api, GPUMON_MEMAPI_V2, "memory from the v2 call");
	is_int(s.memory_total_bytes, 150754820096LL, "total");
	is_int(s.memory_reserved_bytes, 644939776, "reserved");
	is_int(s.memory_used_bytes, 1LL << 30, "used excludes reserved (nvidia-smi's meaning)");
	is_int(s.memory_free_bytes, 150754820096LL - 644939776 - (1LL << 30), "free");
	is_int(s.memory_total_bytes, s.memory_reserved_bytes + s.memory_used_bytes + s.memory_free_bytes,
	       "reserved + used + free == total");
	is_int(s.util_gpu_pct, 35, "utilization.gpu");
	is_int(s.util_memory_pct, 12, "utilization.memory");
	is_int(s.temperature_c, 41, "temperature");
	is_int(s.power_mw, 127790, "power");
	is_int(s.energy_mj, 123456789, "energy");
	is_int(s.clock_sm_mhz, 1980, "SM clock");
	is_int(s.clock_mem_mhz, 3201, "memory clock");
	uint64_t now = now_ns();
	ok(s.t_ns > 0 && s.t_ns <= now && now - s.t_ns < 1000000000u, "timestamp is monotonic now");

	gpumon_device_sample m;
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &m), GPUMON_OK, "memory only");
	is_int(m.present, GPUMON_F_MEMORY | GPUMON_F_MEM_RESERVED, "only memory fields present");
	ok(m.t_ns >= s.t_ns, "timestamps do not go back");
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
	snprintf(trace, sizeof trace, "/tmp/gpumon-trace-%d", (int)getpid());
	unlink(trace);
	setenv("FAKE_NVML_TRACE", trace, 1);
	gpumon *g = open_fake(H200_LINE, 0);
	ok(truncate(trace, 0) == 0, "trace emptied"); /* count what sampling does, not what opening did */
	gpumon_device_sample s;
	for (int i = 0; i < 10; i++)
		gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s);
	is_int(count_lines(trace, "nvmlDevice"), 10, "10 memory samples: 10 driver calls");
	is_int(count_lines(trace, "nvmlDeviceGetMemoryInfo_v2"), 10, "all of them the memory call");
	ok(truncate(trace, 0) == 0, "trace emptied");
	gpumon_device_sample_read(g, 0, GPUMON_F_POWER, &s);
	is_int(count_lines(trace, "nvmlDeviceGetPowerUsage"), 1, "power asked: power read");
	is_int(count_lines(trace, "nvmlDeviceGetTemperature"), 0, "temperature not asked: not read");
	gpumon_destroy(g);
	unsetenv("FAKE_NVML_TRACE");
	unlink(trace);
}

static void test_v1_only(void)
{
	gpumon *g = open_fake(H200_LINE, 1);
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s), GPUMON_OK, "v1-only driver samples");
	is_int(s.memory_api, GPUMON_MEMAPI_V1, "memory from the v1 call, and says so");
	ok(!(s.present & GPUMON_F_MEM_RESERVED), "reserved absent, not 0");
	is_int(s.memory_used_bytes, (1LL << 30) + 644939776, "v1 used includes reserved");
	ok(!(s.present & GPUMON_F_ENERGY), "energy absent (no symbol)");
	ok((s.present & GPUMON_F_POWER) && s.power_mw == 127790, "power still read");
	gpumon_device_info d;
	gpumon_device_info_get(g, 0, &d);
	is_str(d.pci_bus_id, "00000000:00:06.0", "bus id from the v1 PCI call, in nvidia-smi's form");
	gpumon_destroy(g);
}

static void test_optional_errors(void)
{
	static const struct {
		const char *fn;
		unsigned bits;
	} cases[] = {
		{"nvmlDeviceGetUtilizationRates", GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY},
		{"nvmlDeviceGetTemperature", GPUMON_F_TEMPERATURE},
		{"nvmlDeviceGetPowerUsage", GPUMON_F_POWER},
		{"nvmlDeviceGetTotalEnergyConsumption", GPUMON_F_ENERGY},
		{"nvmlDeviceGetClockInfo", GPUMON_F_CLOCK_SM | GPUMON_F_CLOCK_MEM},
		{"nvmlDeviceGetMemoryInfo_v2", GPUMON_F_MEM_RESERVED},
	};
	static const char *const codes[] = {"NOT_SUPPORTED", "UNKNOWN", "NO_PERMISSION"};
	for (size_t c = 0; c < sizeof codes / sizeof codes[0]; c++) {
		for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
			char text[1024];
			snprintf(text, sizeof text, "%serror %s %s\n", H200_LINE, cases[i].fn, codes[c]);
			gpumon *g = open_fake(text, 0);
			gpumon_device_sample s;
			int st = gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s);
			is_int(st, GPUMON_OK, "%s %s: sample still succeeds", cases[i].fn, codes[c]);
			is_int(s.present, GPUMON_F_ALL & ~cases[i].bits, "%s %s: only its fields absent", cases[i].fn,
			       codes[c]);
			ok(s.present & GPUMON_F_MEMORY, "%s %s: memory still there", cases[i].fn, codes[c]);
			gpumon_destroy(g);
		}
	}
	/* the v2 memory call failing falls back to v1 */
	gpumon *g = open_fake(H200_LINE "error nvmlDeviceGetMemoryInfo_v2 NOT_SUPPORTED\n", 0);
	gpumon_device_sample s;
	gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s);
	is_int(s.memory_api, GPUMON_MEMAPI_V1, "v2 not supported: v1 used");
	gpumon_destroy(g);
	/* the required memory call failing is an error with a message */
	g = open_fake(H200_LINE "error nvmlDeviceGetMemoryInfo_v2 UNKNOWN from=0.2\nerror nvmlDeviceGetMemoryInfo UNKNOWN from=0.2\n", 0);
	sleep_ms(300);
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s), GPUMON_E_NVML, "memory call failing: error");
	ok(strstr(gpumon_errmsg(g), "nvmlDeviceGetMemoryInfo") != NULL, "message names the call: %s", gpumon_errmsg(g));
	is_int(s.present, 0, "nothing present after a failed sample");
	gpumon_destroy(g);
	/* names and UUIDs are optional too */
	g = open_fake(H200_LINE "error nvmlDeviceGetName NOT_SUPPORTED\nerror nvmlDeviceGetUUID UNKNOWN\n", 0);
	gpumon_device_info d;
	gpumon_device_info_get(g, 0, &d);
	is_int(d.present, GPUMON_INFO_PCI_BUS_ID | GPUMON_INFO_MEMORY_TOTAL | GPUMON_INFO_MIG_MODE,
	       "name and UUID absent, the rest there");
	gpumon_destroy(g);
}

static void test_changes_and_lost(void)
{
	gpumon *g = open_fake(H200_LINE
			    "gpu 1 name=\"Second\" total=80GiB used=2GiB\n"
			    "at 0.3 gpu 0 used=5GiB\n"
			    "at 0.3 lost 1\n",
			    0);
	gpumon_device_sample s;
	gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s);
	is_int(s.memory_used_bytes, 1LL << 30, "GPU 0 before: 1 GiB");
	is_int(gpumon_device_sample_read(g, 1, GPUMON_F_ALL, &s), GPUMON_OK, "GPU 1 before: answers");
	sleep_ms(400);
	gpumon_device_sample_read(g, 0, GPUMON_F_MEMORY, &s);
	is_int(s.memory_used_bytes, 5LL << 30, "GPU 0 after: 5 GiB");
	is_int(gpumon_device_sample_read(g, 1, GPUMON_F_ALL, &s), GPUMON_E_LOST, "GPU 1 after: lost");
	ok(strstr(gpumon_errmsg(g), "lost") != NULL, "message says lost: %s", gpumon_errmsg(g));
	gpumon_device_info d;
	gpumon_device_info_get(g, 1, &d);
	is_int(d.lost, 1, "GPU 1 marked lost");
	is_str(d.name, "Second", "its name is still known");
	is_int(gpumon_device_sample_read(g, 1, GPUMON_F_MEMORY, &s), GPUMON_E_LOST, "stays lost");
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s), GPUMON_OK, "GPU 0 keeps working");
	gpumon_destroy(g);

	/* lost reported by an optional call, not the memory call */
	g = open_fake(H200_LINE "error nvmlDeviceGetPowerUsage GPU_IS_LOST\n", 0);
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, &s), GPUMON_E_LOST, "lost seen through the power call");
	gpumon_destroy(g);
}

static void test_bad_arguments(void)
{
	gpumon *g = open_fake(H200_LINE, 0);
	gpumon_device_sample s;
	is_int(gpumon_device_sample_read(g, 1, GPUMON_F_ALL, &s), GPUMON_E_NOT_FOUND, "device 1 of 1");
	is_int(gpumon_device_sample_read(g, 0, 1u << 20, &s), GPUMON_E_INVAL, "unknown field bits");
	is_int(gpumon_device_sample_read(g, 0, GPUMON_F_ALL, NULL), GPUMON_E_INVAL, "NULL sample");
	is_int(gpumon_device_sample_read(NULL, 0, GPUMON_F_ALL, &s), GPUMON_E_INVAL, "NULL handle");
	gpumon_destroy(g);
}

int main(void)
{
	test_full_sample();
	test_only_needed_calls();
	test_v1_only();
	test_optional_errors();
	test_changes_and_lost();
	test_bad_arguments();
	remove_scenario();
	return tap_done();
}
