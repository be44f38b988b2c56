/* SPDX-License-Identifier: MIT */
/* test_prometheus.c — the exporter's text renderer on its own (compiled in from lib/sinks):
 * label escaping, UTF-8 repair and shortening, absent fields left out, lost GPUs, the peers'
 * units. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sinks/prometheus.h"
#include "tap.h"

static char *label(const char *v, size_t max)
{
	static char out[512];
	struct prom_buf b = {0};
	gpumon__prom_label_value(&b, v, max);
	snprintf(out, sizeof out, "%s", b.p ? b.p : "");
	gpumon__prom_free(&b);
	return out;
}

static void test_labels(void)
{
	is_str(label("a\"b\\c\nd", 64), "a\\\"b\\\\c\\nd", "quote, backslash and newline escaped");
	is_str(label("\xff\xfeok", 64), "??ok", "invalid bytes replaced");
	is_str(label("\xc0\xaf", 64), "??", "an overlong encoding is invalid");
	is_str(label("\xed\xa0\x80", 64), "???", "a surrogate is invalid");
	is_str(label("caf\xc3\xa9 \xe2\x82\xac", 64), "caf\xc3\xa9 \xe2\x82\xac", "valid UTF-8 kept");
	is_str(label("abcdefgh", 5), "abcde...", "shortened with ...");
	is_str(label("ab\xe2\x82\xac", 4), "ab...", "not cut inside a character");
	is_str(label("", 5), "", "empty");
}

static struct prom_gpu gpu(unsigned i, unsigned present)
{
	struct prom_gpu g;
	memset(&g, 0, sizeof g);
	g.info.index = i;
	snprintf(g.info.uuid, sizeof g.info.uuid, "GPU-%u", i);
	snprintf(g.labels, sizeof g.labels, "gpu=\"%u\"", i);
	snprintf(g.dcgm_labels, sizeof g.dcgm_labels, "gpu=\"%u\"", i);
	g.up = 1;
	g.have_sample = 1;
	g.s.present = present;
	g.s.memory_total_bytes = 80ull << 30;
	g.s.memory_used_bytes = (1ull << 30) + (700ull << 10); /* 1024.68 MiB */
	g.s.memory_free_bytes = g.s.memory_total_bytes - g.s.memory_used_bytes;
	g.s.util_gpu_pct = 7;
	g.s.power_mw = 123456;
	g.oom_seconds = -1;
	return g;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_render(void)
{
	struct prom_gpu gs[2] = {gpu(0, GPUMON_F_MEMORY | GPUMON_F_UTIL_GPU | GPUMON_F_POWER), gpu(1, GPUMON_F_MEMORY)};
	gs[1].up = 0; /* lost */
	struct prom_view v = {.gpus = gs, .ngpus = 2, .driver_version = "580.159.04", .nvml_version = "12.580",
			      .compat = GPUMON_COMPAT_DCGM | GPUMON_COMPAT_NVIDIA_SMI};
	struct prom_buf b = {0};
	is_int(gpumon__prom_render(&v, &b), GPUMON_OK, "renders");
	const char *t = b.p;
	ok(strstr(t, "gpumon_gpu_up{gpu=\"0\"} 1\n") && strstr(t, "gpumon_gpu_up{gpu=\"1\"} 0\n"), "lost GPU shown as 0");
	ok(strstr(t, "gpumon_memory_used_bytes{gpu=\"0\"} 1074458624\n") && !strstr(t, "gpumon_memory_used_bytes{gpu=\"1\"}"),
	   "a lost GPU has no memory figures");
	ok(strstr(t, "gpumon_utilization_ratio{gpu=\"0\"} 0.07\n"), "percent as a ratio");
	ok(strstr(t, "gpumon_power_watts{gpu=\"0\"} 123.456\n"), "milliwatts as watts");
	ok(!strstr(t, "gpumon_temperature_celsius"), "a field absent everywhere: no family at all");
	ok(!strstr(t, "gpumon_memory_reserved_bytes"), "reserved absent (v1 memory call): left out");
	ok(!strstr(t, "gpumon_memory_oom_projected_seconds"), "no projection: left out, not 0");
	is_int(count(t, "# TYPE gpumon_gpu_up gauge\n"), 1, "one TYPE line per family");
	ok(strstr(t, "DCGM_FI_DEV_FB_USED{gpu=\"0\"} 1025\n"), "dcgm: whole MiB");
	ok(strstr(t, "nvidia_smi_memory_used_bytes{uuid=\"GPU-0\"} 1074458624\n"), "nvidia_smi: bytes");
	ok(strstr(t, "nvidia_smi_utilization_gpu_ratio{uuid=\"GPU-0\"} 0.07\n"), "nvidia_smi: ratio");
	ok(strstr(t, "gpumon_build_info{version=\"" GPUMON_VERSION "\",driver_version=\"580.159.04\",nvml_version=\"12.580\"} 1\n"),
	   "build info");
	ok(!strstr(t, "gpumon_process_"), "no processes: no process families");
	ok(b.len > 0 && t[b.len - 1] == '\n', "ends with a newline");
	ok(!strstr(t, "gpumon_sampler_"), "no sampler (a replay): its counters are left out, not 0");
	gpumon__prom_free(&b);
	v.have_sampler = 1;
	v.sampler.samples = 42;
	is_int(gpumon__prom_render(&v, &b), GPUMON_OK, "renders with a sampler");
	ok(b.p && strstr(b.p, "gpumon_sampler_samples_total 42\n") && strstr(b.p, "gpumon_sampler_dropped_records_total 0\n"),
	   "a sampler's counters are shown");
	gpumon__prom_free(&b);
}

/* The model's answers as the gauges show them: the projection and the leak flag and rate. */
static void test_model_gauges(void)
{
	struct prom_gpu g = gpu(0, GPUMON_F_MEMORY);
	g.oom_seconds = 812.25;
	struct prom_proc a = {.dev = 0, .pid = 7, .used_known = 1, .used_bytes = 1 << 30, .leak_alert = 1, .rate_known = 1,
			      .rate_bytes_per_second = 2097152, .labels = "pid=\"7\""};
	struct prom_proc b2 = {.dev = 0, .pid = 8, .used_known = 1, .used_bytes = 1 << 20, .labels = "pid=\"8\""};
	const struct prom_proc *procs[2] = {&a, &b2};
	struct prom_view v = {.gpus = &g, .ngpus = 1, .processes = 1, .procs = procs, .nprocs = 2};
	struct prom_buf b = {0};
	is_int(gpumon__prom_render(&v, &b), GPUMON_OK, "renders");
	const char *t = b.p ? b.p : "";
	ok(strstr(t, "gpumon_memory_oom_projected_seconds{gpu=\"0\"} 812.2"), "the projection, in seconds");
	ok(strstr(t, "gpumon_process_leak_suspected{pid=\"7\"} 1\n") && strstr(t, "gpumon_process_leak_suspected{pid=\"8\"} 0\n"),
	   "the leak flag of every exported process");
	ok(strstr(t, "gpumon_process_memory_growth_bytes_per_second{pid=\"7\"} 2097152.0\n") &&
	   !strstr(t, "gpumon_process_memory_growth_bytes_per_second{pid=\"8\"}"), "a rate only where the verdict is a leak");
	gpumon__prom_free(&b);
	g.up = 0;
	is_int(gpumon__prom_render(&v, &b), GPUMON_OK, "renders a lost GPU");
	ok(b.p && !strstr(b.p, "gpumon_memory_oom_projected_seconds"), "a lost GPU has no projection");
	gpumon__prom_free(&b);
}

int main(void)
{
	test_labels();
	test_render();
	test_model_gauges();
	(void)remove_scenario; /* tap.h's fake-NVML helpers are not used here */
	(void)use_scenario;
	return tap_done();
}
