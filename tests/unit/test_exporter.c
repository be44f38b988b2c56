/* SPDX-License-Identifier: MIT */
/* test_exporter.c — the exporter's public API on the fake NVML: start on an ephemeral port, the
 * bound address, a scrape over a plain socket, framework figures pushed in-process, the
 * non-loopback rule, bad addresses and configurations (the message kept on the exporter handed
 * back), stop, the replay of a recording without a handle, whose gauges are the run model's, and
 * the connection limits: keep-alive, the per-address cap, the deadline for a request head. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

#include "tap.h"
#include "http_util.h"

#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)
#define NS 1000000000ull

static const char SCN[] =
	"gpu 0 name=\"NVIDIA H200\" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 total=140GiB used=1GiB\n"
	"proc 0 4194999 used=1GiB name=\"python t.py\"\n";

static unsigned port_of(gpumon_exporter *e)
{
	char addr[96];
	gpumon_exporter_address(e, addr, sizeof addr);
	const char *c = strrchr(addr, ':');
	return c ? (unsigned)atoi(c + 1) : 0;
}

/* The value of the first sample of `name` whose labels contain `labels` ("" any), or -1 absent. */
static double metric(const char *page, const char *name, const char *labels)
{
	size_t n = strlen(name);
	for (const char *p = page; p && (p = strstr(p, name)); p += n) {
		if ((p != page && p[-1] != '\n') || p[n] != '{')
			continue;
		const char *end = strchr(p, '}');
		const char *hit = labels[0] ? strstr(p, labels) : p;
		if (!end || !hit || hit > end)
			continue;
		return strtod(end + 1, NULL);
	}
	return -1;
}

static void test_scrape_and_framework(void)
{
	gpumon *g = open_fake(SCN, 0);
	gpumon_exporter_config c = GPUMON_CONFIG_INIT(gpumon_exporter_config);
	c.listen = "127.0.0.1:0";
	c.max_processes = GPUMON_EXPORTER_ALL_PROCESSES; /* per-pid series are opt-in */
	gpumon_exporter *e = NULL;
	int st = gpumon_exporter_create(g, &c, &e);
	is_int(st, GPUMON_OK, "start on an ephemeral port (%s)", gpumon_exporter_errmsg(e));
	if (st != GPUMON_OK) {
		gpumon_exporter_destroy(e);
		gpumon_destroy(g);
		return;
	}
	is_str(gpumon_exporter_errmsg(e), "", "no message after a good start");
	char addr[96];
	gpumon_exporter_address(e, addr, sizeof addr);
	ok(!strncmp(addr, "127.0.0.1:", 10) && port_of(e) > 0, "address %s names the bound port", addr);
	char *r = http_get(port_of(e), "/metrics");
	ok(r && !strncmp(r, "HTTP/1.", 7) && !strncmp(r + 8, " 200 ", 5), "GET /metrics answers 200");
	ok(r && strstr(r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"), "with the 0.0.4 content type");
	ok(r && strstr(r, "gpumon_memory_used_bytes{gpu=\"0\",uuid=\"GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51\","
			  "name=\"NVIDIA H200\",pci_bus_id=\"00000000:00:00.0\"} 1073741824\n"),
	   "the first snapshot already holds the GPU's figures");
	ok(r && strstr(r, "pid=\"4194999\""), "and its process");
	ok(r && metric(r, "gpumon_process_leak_suspected", "pid=\"4194999\"") == 0,
	   "a process the model has not judged yet is not flagged");
	ok(r && strstr(r, "gpumon_sampler_samples_total "), "the sampler's counters, live");
	ok(r && !strstr(r, "gpumon_framework_"), "no framework figures before one is pushed");
	free(r);

	gpumon_framework_sample f = {.pid = 4194999, .device = 0, .allocated_bytes = 123456789, .allocated_known = 1,
				     .max_allocated_bytes = 200000000, .max_allocated_known = 1, .step = -1};
	snprintf(f.framework, sizeof f.framework, "torch");
	is_int(gpumon_exporter_framework(e, &f), GPUMON_OK, "framework sample accepted");
	f.allocated_bytes = 987654321; /* the same pid and device: replaced */
	is_int(gpumon_exporter_framework(e, &f), GPUMON_OK, "a newer one replaces it");
	sleep_ms(400); /* the next snapshot: at most 250 ms */
	r = http_get(port_of(e), "/metrics");
	/* one GPU, and NVML lists the pid there: the sample carries that GPU's gpu/uuid */
	ok(r && strstr(r, "gpumon_framework_allocated_bytes{gpu=\"0\",uuid=\"GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51\","
			  "pid=\"4194999\",device=\"0\",framework=\"torch\"} 987654321\n"),
	   "allocated bytes exported, the latest value");
	ok(r && strstr(r, "gpumon_framework_allocated_peak_bytes{gpu=\"0\",uuid=\"GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51\","
			  "pid=\"4194999\",device=\"0\",framework=\"torch\"} 200000000\n"),
	   "peak exported");
	ok(r && !strstr(r, "gpumon_framework_reserved_bytes"), "reserved not known: left out, not 0");
	free(r);
	int full = GPUMON_OK;
	for (unsigned i = 0; i < 300 && full == GPUMON_OK; i++) {
		f.pid = 1000 + i;
		full = gpumon_exporter_framework(e, &f);
	}
	is_int(full, GPUMON_E_NOMEM, "at most 256 pid/device pairs");
	is_int(gpumon_exporter_framework(e, NULL), GPUMON_E_INVAL, "NULL sample refused");

	r = http_get(port_of(e), "/healthz");
	ok(r && strstr(r, "\r\n\r\nok\n"), "/healthz says ok");
	free(r);
	unsigned port = port_of(e);
	gpumon_exporter_destroy(e);
	r = http_get(port, "/metrics");
	ok(r == NULL, "nothing listens after stop");
	free(r);
	gpumon_exporter_destroy(NULL);
	is_str(gpumon_exporter_errmsg(NULL), "", "errmsg(NULL) is \"\"");
	gpumon_destroy(g);
}

/* Creates with c, expects status want and a message holding `says` on the exporter handed back and
 * on g. */
static void refused(gpumon *g, const gpumon_exporter_config *c, int want, const char *says, const char *what)
{
	gpumon_exporter *e = (gpumon_exporter *)&e;
	is_int(gpumon_exporter_create(g, c, &e), want, "%s", what);
	ok(e != NULL && e != (gpumon_exporter *)&e, "an exporter holding the message is handed back");
	const char *msg = gpumon_exporter_errmsg(e);
	ok(strstr(msg, says) != NULL, "its message: %s", msg);
	ok(!g || strstr(gpumon_errmsg(g), says) != NULL, "the same on the handle: %s", g ? gpumon_errmsg(g) : "");
	char addr[96] = "x";
	gpumon_exporter_address(e, addr, sizeof addr);
	is_str(addr, "", "it listens nowhere");
	gpumon_exporter_destroy(e);
}

static void test_refusals(void)
{
	gpumon *g = open_fake(SCN, 0);
	gpumon_exporter_config c = GPUMON_CONFIG_INIT(gpumon_exporter_config);
	c.listen = "0.0.0.0:0";
	refused(g, &c, GPUMON_E_INVAL, "not a loopback address", "non-loopback refused without TLS and auth");
	c.listen = "localhost";
	refused(g, &c, GPUMON_E_INVAL, "expected ADDR:PORT", "address without a port");
	c.listen = "[::1]:0";
	gpumon_exporter *e = NULL;
	int st = gpumon_exporter_create(g, &c, &e);
	if (st == GPUMON_OK) { /* IPv6 may be off on the test machine */
		char addr[96];
		gpumon_exporter_address(e, addr, sizeof addr);
		ok(!strncmp(addr, "[::1]:", 6), "IPv6 loopback: %s", addr);
	} else {
		ok(st == GPUMON_E_IO || st == GPUMON_E_INVAL, "IPv6 unavailable: %s", gpumon_exporter_errmsg(e));
	}
	gpumon_exporter_destroy(e);
	c.listen = "127.0.0.1:0";
	c.compat = 1u << 7;
	refused(g, &c, GPUMON_E_INVAL, "unknown compat bits", "unknown compat bits");
	c.compat = 0;
	/* the connection limits' ranges are the library's: every front end gets the same refusal */
	c.max_connections = GPUMON_EXPORTER_CONNECTIONS_MAX + 1;
	refused(g, &c, GPUMON_E_INVAL, "max_connections 65537: expected 1 to 65536", "too many connections");
	c.max_connections = 0;
	c.max_connections_per_ip = GPUMON_EXPORTER_CONNECTIONS_MAX + 1;
	refused(g, &c, GPUMON_E_INVAL, "max_connections_per_ip 65537", "too many connections an address");
	c.max_connections_per_ip = 0;
	c.timeout_s = GPUMON_EXPORTER_SECONDS_MAX + 1;
	refused(g, &c, GPUMON_E_INVAL, "timeout 3601: expected 1 to 3600", "a timeout over an hour");
	c.timeout_s = 0;
	c.keepalive_s = GPUMON_EXPORTER_SECONDS_MAX + 1;
	refused(g, &c, GPUMON_E_INVAL, "keepalive 3601", "a keep-alive over an hour");
	c.keepalive_s = 0;
	c.tls_cert_file = "/nonexistent/cert.pem";
	refused(g, &c, GPUMON_E_INVAL, "both a certificate and a key", "a certificate without a key");
	c.tls_key_file = "/nonexistent/key.pem";
	refused(g, &c, GPUMON_E_IO, "/nonexistent/cert.pem", "a missing certificate file");
	c.tls_cert_file = c.tls_key_file = NULL;
	c.size = sizeof c + 8;
	refused(g, &c, GPUMON_E_INVAL, "size", "a configuration larger than the library knows");
	c.size = 0;
	refused(g, &c, GPUMON_E_INVAL, "size", "a configuration without its size");
	c.size = sizeof c;
	refused(NULL, &c, GPUMON_E_INVAL, "no recording to replay", "no handle and nothing to replay");
	c.replay = "/nonexistent/run.gpumon";
	refused(NULL, &c, GPUMON_E_IO, "/nonexistent/run.gpumon", "a recording that cannot be read");
	is_int(gpumon_exporter_create(g, &c, NULL), GPUMON_E_INVAL, "no place for the exporter");
	gpumon_destroy(g);
}

/* A system-wide recording of 80 s: a co-tenant at 20 GiB and a process rising 64 MiB a second on
 * an 80 GiB GPU, one device and process row a second. */
static int write_recording(const char *path)
{
	gpumon *g = open_fake("gpu 0 name=\"NVIDIA H100\" uuid=GPU-11111111-2222-3333-4444-555555555555 total=80GiB\n", 0);
	uint64_t t0 = now_ns();
	gpumon_run_meta meta = {.size = sizeof meta, .kind = "record", .start_mono_ns = t0, .start_wall_ns = 1e18};
	gpumon_recording *rec = NULL;
	unlink(path);
	int st = gpumon_recording_create(g, path, &meta, &rec);
	for (unsigned s = 0; st == GPUMON_OK && s <= 80; s++) {
		uint64_t t = t0 + s * NS, leak = 2 * GIB + s * 64 * MIB;
		gpumon_record r[3];
		gpumon_process p[3];
		memset(r, 0, sizeof r);
		memset(p, 0, sizeof p);
		for (int k = 1; k < 3; k++) {
			r[k].kind = GPUMON_REC_PROCESS;
			r[k].t_ns = t;
			r[k].process = &p[k];
			p[k].flags = GPUMON_PROC_USED_KNOWN | GPUMON_PROC_NAME_KNOWN;
		}
		p[1].pid = 4100;
		p[1].used_bytes = 20 * GIB;
		snprintf(p[1].name, sizeof p[1].name, "cotenant");
		p[2].pid = 4200;
		p[2].used_bytes = leak;
		snprintf(p[2].name, sizeof p[2].name, "leaky");
		r[0].kind = GPUMON_REC_DEVICE;
		r[0].t_ns = r[0].sample.t_ns = t;
		r[0].sample.present = GPUMON_F_MEMORY;
		r[0].sample.memory_total_bytes = 80 * GIB;
		r[0].sample.memory_used_bytes = 20 * GIB + leak;
		r[0].sample.memory_free_bytes = 80 * GIB - r[0].sample.memory_used_bytes;
		r[0].used_min_bytes = r[0].used_max_bytes = r[0].sample.memory_used_bytes;
		r[0].used_max_t_ns = t;
		r[0].interval_samples = 1;
		/* the processes' figures first, so that the device row judges them at their new level */
		gpumon_record order[3] = {r[1], r[2], r[0]};
		st = gpumon_recording_write(rec, order, 3);
	}
	if (st == GPUMON_OK)
		st = gpumon_recording_finish(rec, -1);
	gpumon_recording_destroy(rec);
	gpumon_destroy(g);
	return st;
}

/* What the model says of the file, fed as `gpumon report` feeds it. */
static int model_of(const char *path, gpumon_verdict *leaky, double *oom)
{
	gpumon_reader *r = NULL;
	gpumon_model *m = NULL;
	int st = gpumon_reader_create(path, &r);
	if (st == GPUMON_OK)
		st = gpumon_model_create(NULL, &m);
	if (st == GPUMON_OK)
		st = gpumon_model_load(m, r);
	if (st == GPUMON_OK)
		st = gpumon_model_finish(m, 0, -1);
	if (st == GPUMON_OK)
		st = gpumon_model_process_verdict(m, 0, 4200, leaky);
	if (st == GPUMON_OK)
		st = gpumon_model_gpu_oom(m, 0, oom);
	gpumon_model_destroy(m);
	gpumon_reader_destroy(r);
	return st;
}

static void test_replay_without_a_handle(void)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/gpumon-unit-%d.gpumon", (int)getpid());
	if (write_recording(path) != GPUMON_OK) {
		ok(0, "write the recording");
		return;
	}
	gpumon_verdict v;
	double oom = -1;
	int st = model_of(path, &v, &oom);
	is_int(st, GPUMON_OK, "the model judges the file");
	ok(st == GPUMON_OK && v.leak.alert && oom > 0, "the rising process alerts; the GPU has a time to OOM");

	gpumon_exporter_config c = GPUMON_CONFIG_INIT(gpumon_exporter_config);
	c.listen = "127.0.0.1:0";
	c.replay = path;
	c.max_processes = GPUMON_EXPORTER_ALL_PROCESSES;
	gpumon_exporter *e = NULL;
	st = gpumon_exporter_create(NULL, &c, &e);
	is_int(st, GPUMON_OK, "a replay needs no handle (%s)", gpumon_exporter_errmsg(e));
	char *page = st == GPUMON_OK ? http_get(port_of(e), "/metrics") : NULL;
	ok(page && strstr(page, " 200 "), "it serves the recording's end");
	if (page) {
		double used = metric(page, "gpumon_memory_used_bytes", "uuid=\"GPU-11111111-2222-3333-4444-555555555555\"");
		is_int((long long)used, (long long)(22 * GIB + 80 * 64 * MIB), "the GPU's figures at the end, labelled as recorded");
		is_int((long long)metric(page, "gpumon_process_leak_suspected", "pid=\"4200\""), 1, "the leak gauge is the model's");
		is_int((long long)metric(page, "gpumon_process_leak_suspected", "pid=\"4100\""), 0, "the co-tenant is no leak");
		double rate = metric(page, "gpumon_process_memory_growth_bytes_per_second", "pid=\"4200\"");
		ok(rate > 0 && rate - v.leak.rate_bytes_per_second < 0.06 && v.leak.rate_bytes_per_second - rate < 0.06,
		   "the rate is the model's: %.1f vs %.3f", rate, v.leak.rate_bytes_per_second);
		double secs = metric(page, "gpumon_memory_oom_projected_seconds", "gpu=\"0\"");
		ok(secs >= 0 && secs - oom < 0.06 && oom - secs < 0.06, "the projected seconds are the model's: %.1f vs %.3f",
		   secs, oom);
		ok(strstr(page, "command=\"leaky\"") != NULL, "processes named as recorded");
		ok(!strstr(page, "gpumon_sampler_samples_total"), "no sampler in a replay: its counters are left out");
		ok(!strstr(page, "container_id="), "no container ids: the recording's pids are not this machine's");
	}
	free(page);
	gpumon_exporter_destroy(e);
	unlink(path);
}

/* A socket connected to 127.0.0.1:port, reads time out after ms; -1 on failure. */
static int connect_to(unsigned port, int ms)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
	if (s >= 0 && (setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
		       connect(s, (struct sockaddr *)&a, sizeof a) != 0)) {
		close(s);
		s = -1;
	}
	return s;
}

/* Sends one HTTP/1.1 request and reads its response whole (by Content-Length); 1 if it is a 200
 * that does not say the connection closes. */
static int request_kept(int s, const char *path)
{
	char req[128], buf[1 << 16];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	if (write(s, req, (size_t)n) != n)
		return 0;
	size_t len = 0;
	const char *body = NULL;
	long want = -1;
	for (;;) {
		ssize_t k = read(s, buf + len, sizeof buf - 1 - len);
		if (k <= 0)
			return 0;
		len += (size_t)k;
		buf[len] = 0;
		if (!body && (body = strstr(buf, "\r\n\r\n"))) {
			const char *cl = strstr(buf, "Content-Length: ");
			want = cl ? atol(cl + 16) : -1;
			body += 4;
		}
		if (body && want >= 0 && (long)(len - (size_t)(body - buf)) >= want)
			break;
	}
	return !strncmp(buf + 8, " 200 ", 5) && !strstr(buf, "Connection: close");
}

/* 1 when the server closed s (a read ends the stream) within its read timeout. */
static int closed_by_server(int s)
{
	char b;
	return read(s, &b, 1) == 0;
}

static void test_connection_limits(void)
{
	gpumon *g = open_fake(SCN, 0);
	/* a program built against the previous version of the configuration (without the fields of
	   the connection limits) gets the defaults */
	gpumon_exporter_config c = GPUMON_CONFIG_INIT(gpumon_exporter_config);
	c.size = (unsigned)offsetof(gpumon_exporter_config, max_connections_per_ip);
	c.listen = "127.0.0.1:0";
	gpumon_exporter *e = NULL;
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_OK, "the previous configuration's size is taken (%s)",
	       gpumon_exporter_errmsg(e));
	int s = connect_to(port_of(e), 5000);
	ok(request_kept(s, "/metrics") && request_kept(s, "/healthz") && request_kept(s, "/metrics"),
	   "three requests on one kept-alive connection");
	close(s);
	gpumon_exporter_destroy(e);

	c = (gpumon_exporter_config)GPUMON_CONFIG_INIT(gpumon_exporter_config);
	c.listen = "127.0.0.1:0";
	c.max_connections_per_ip = 2;
	c.timeout_s = 1;
	e = NULL;
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_OK, "start with 2 connections an address, 1 s a head");
	int idle[3];
	for (int i = 0; i < 3; i++) {
		idle[i] = connect_to(port_of(e), 300);
		usleep(20000);
	}
	ok(closed_by_server(idle[0]), "a third connection from one address closes the first");
	ok(!closed_by_server(idle[1]) && !closed_by_server(idle[2]), "the other two stay");
	for (int i = 1; i < 3; i++) {
		struct timeval tv = {.tv_sec = 3};
		setsockopt(idle[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	}
	ok(closed_by_server(idle[1]) && closed_by_server(idle[2]), "no request head within 1 s: closed");
	for (int i = 0; i < 3; i++)
		close(idle[i]);
	char *r = http_get(port_of(e), "/metrics");
	ok(r && metric(r, "gpumon_exporter_connections_closed_total", "reason=\"per_address\"") == 1 &&
		   metric(r, "gpumon_exporter_connections_closed_total", "reason=\"timeout\"") == 2,
	   "each close counted by its reason");
	free(r);
	gpumon_exporter_destroy(e);

	c.no_keepalive = 1;
	e = NULL;
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_OK, "start without keep-alive");
	s = connect_to(port_of(e), 5000);
	ok(!request_kept(s, "/healthz") && closed_by_server(s), "the connection closes after the response");
	close(s);
	gpumon_exporter_destroy(e);
	gpumon_destroy(g);
}

int main(void)
{
	test_scrape_and_framework();
	test_refusals();
	test_replay_without_a_handle();
	test_connection_limits();
	remove_scenario();
	return tap_done();
}
