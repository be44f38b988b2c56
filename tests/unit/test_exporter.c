/* SPDX-License-Identifier: MIT */
/* test_exporter.c — the exporter's public API on the fake NVML: start on an ephemeral port, the
 * bound address, a scrape over a plain socket, framework figures pushed in-process, the
 * non-loopback rule, bad addresses, and stop. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gpumon/gpumon.h>

#include "tap.h"

static const char SCN[] =
	"gpu 0 name=\"NVIDIA H200\" uuid=GPU-04b38c5d-59f0-8f43-a379-7bd1cb7dae51 total=140GiB used=1GiB\n"
	"proc 0 4194999 used=1GiB name=\"python t.py\"\n";

/* GET path from 127.0.0.1:port; returns the whole response (malloc'd) or NULL. */
static char *http_get(unsigned port, const char *path)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
		if (s >= 0)
			close(s);
		return NULL;
	}
	char req[256];
	int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
	if (write(s, req, (size_t)n) != n) {
		close(s);
		return NULL;
	}
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	ssize_t k;
	while (buf && (k = read(s, buf + len, cap - len)) > 0) {
		len += (size_t)k;
		if (len == cap) {
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	close(s);
	if (buf)
		buf[len] = 0;
	return buf;
}

static unsigned port_of(gpumon_exporter *e)
{
	char addr[96];
	gpumon_exporter_address(e, addr, sizeof addr);
	const char *c = strrchr(addr, ':');
	return c ? (unsigned)atoi(c + 1) : 0;
}

static void test_scrape_and_framework(void)
{
	gpumon *g = open_fake(SCN, 0);
	gpumon_exporter_config c = {.listen = "127.0.0.1:0"};
	gpumon_exporter *e = NULL;
	int st = gpumon_exporter_create(g, &c, &e);
	is_int(st, GPUMON_OK, "start on an ephemeral port (%s)", gpumon_errmsg(g));
	if (st != GPUMON_OK) {
		gpumon_destroy(g);
		return;
	}
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
	ok(r && !strstr(r, "gpumon_framework_"), "no framework figures before one is pushed");
	free(r);

	gpumon_framework_sample f = {.pid = 4194999, .device = 0, .allocated_bytes = 123456789, .allocated_known = 1,
				     .max_allocated_bytes = 200000000, .max_allocated_known = 1};
	snprintf(f.framework, sizeof f.framework, "torch");
	is_int(gpumon_exporter_framework(e, &f), GPUMON_OK, "framework sample accepted");
	f.allocated_bytes = 987654321; /* the same pid and device: replaced */
	is_int(gpumon_exporter_framework(e, &f), GPUMON_OK, "a newer one replaces it");
	sleep_ms(400); /* the next snapshot: at most 250 ms */
	r = http_get(port_of(e), "/metrics");
	ok(r && strstr(r, "gpumon_framework_allocated_bytes{pid=\"4194999\",device=\"0\",framework=\"torch\"} 987654321\n"),
	   "allocated bytes exported, the latest value");
	ok(r && strstr(r, "gpumon_framework_allocated_peak_bytes{pid=\"4194999\",device=\"0\",framework=\"torch\"} 200000000\n"),
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
	gpumon_destroy(g);
}

static void test_refusals(void)
{
	gpumon *g = open_fake(SCN, 0);
	gpumon_exporter *e = (gpumon_exporter *)&e;
	gpumon_exporter_config c = {.listen = "0.0.0.0:0"};
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_E_INVAL, "non-loopback refused without TLS and auth");
	ok(e == NULL, "*out is NULL on failure");
	ok(strstr(gpumon_errmsg(g), "not a loopback address") != NULL, "message: %s", gpumon_errmsg(g));
	c.listen = "localhost";
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_E_INVAL, "address without a port");
	c.listen = "[::1]:0";
	int st = gpumon_exporter_create(g, &c, &e);
	if (st == GPUMON_OK) { /* IPv6 may be off on the test machine */
		char addr[96];
		gpumon_exporter_address(e, addr, sizeof addr);
		ok(!strncmp(addr, "[::1]:", 6), "IPv6 loopback: %s", addr);
		gpumon_exporter_destroy(e);
	} else {
		ok(st == GPUMON_E_IO || st == GPUMON_E_INVAL, "IPv6 unavailable: %s", gpumon_errmsg(g));
	}
	c.listen = "127.0.0.1:0";
	c.compat = 1u << 7;
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_E_INVAL, "unknown compat bits");
	c.compat = 0;
	c.tls_cert_file = "/nonexistent/cert.pem";
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_E_INVAL, "a certificate without a key");
	c.tls_key_file = "/nonexistent/key.pem";
	is_int(gpumon_exporter_create(g, &c, &e), GPUMON_E_IO, "a missing certificate file");
	ok(strstr(gpumon_errmsg(g), "/nonexistent/cert.pem") != NULL, "message names it: %s", gpumon_errmsg(g));
	is_int(gpumon_exporter_create(NULL, &c, &e), GPUMON_E_INVAL, "NULL handle");
	gpumon_destroy(g);
}

int main(void)
{
	test_scrape_and_framework();
	test_refusals();
	remove_scenario();
	return tap_done();
}
