/* SPDX-License-Identifier: MIT */
/* exporter.c — the Prometheus exporter's life cycle: its configuration (TLS and basic-auth files
 * read), the listen address bound (a non-loopback one refused without TLS and basic auth unless
 * told otherwise), the sampler or the replay, the collector's thread, then the HTTP server
 * (exporter_http.c); and the framework figures an embedding program pushes. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exporter.h"

#define DEFAULT_LISTEN "127.0.0.1:19400"
#define MAX_FILE (1024 * 1024)   /* certificate, key, password file */

/* ---- files and addresses ------------------------------------------------------------------------ */

/* Reads a whole small file into a new NUL-terminated string. */
static int read_file(gpumon_exporter *e, const char *what, const char *path, char **out)
{
	*out = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gpumon__exporter_err(e, GPUMON_E_IO, "cannot open the %s %s: %s", what, path, strerror(errno));
	char *buf = malloc(MAX_FILE + 1);
	size_t len = 0;
	ssize_t n = 0;
	while (buf && len < MAX_FILE && (n = read(fd, buf + len, MAX_FILE - len)) > 0)
		len += (size_t)n;
	int err = errno;
	close(fd);
	if (!buf)
		return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory reading %s", path);
	if (n < 0 || len == MAX_FILE || len == 0) {
		free(buf);
		return gpumon__exporter_err(e, GPUMON_E_IO, "cannot read the %s %s: %s", what, path,
				      n < 0 ? strerror(err) : len ? "larger than 1 MiB" : "the file is empty");
	}
	buf[len] = 0;
	*out = buf;
	return GPUMON_OK;
}

static int load_auth(gpumon_exporter *e, const char *path)
{
	char *text;
	int st = read_file(e, "basic auth file", path, &text);
	if (st != GPUMON_OK)
		return st;
	size_t n = strcspn(text, "\r\n");
	text[n] = 0;
	if (!strchr(text, ':') || text[0] == ':' || n >= sizeof e->auth) {
		free(text);
		return gpumon__exporter_err(e, GPUMON_E_INVAL,
				      "basic auth file %s: the first line must be USER:PASSWORD (at most %zu bytes)", path,
				      sizeof e->auth - 1);
	}
	memcpy(e->auth, text, n + 1);
	e->auth_len = n;
	memset(text, 0, n);
	free(text);
	return GPUMON_OK;
}

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a))
			return a->s6_addr[12] == 127;
		return IN6_IS_ADDR_LOOPBACK(a);
	}
	return 0;
}

static void format_address(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof host);
		port = ntohs(s6->sin6_port);
		snprintf(buf, len, "[%s]:%u", host, port);
	} else {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof host);
		port = ntohs(s4->sin_port);
		snprintf(buf, len, "%s:%u", host, port);
	}
}

/* Parses "ADDR:PORT" / "[V6]:PORT", binds and listens. Sets *fd; checks the loopback rule. */
static int bind_listen(gpumon_exporter *e, const char *spec, int secured, int insecure_ok, int *fd)
{
	char host[256], port[16];
	const char *colon = strrchr(spec, ':');
	size_t hl = colon ? (size_t)(colon - spec) : 0;
	if (!colon || hl >= sizeof host || strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof port ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "listen address '%s': expected ADDR:PORT (for example 127.0.0.1:%d)",
				      spec, GPUMON_EXPORTER_DEFAULT_PORT);
	memcpy(host, spec, hl);
	host[hl] = 0;
	snprintf(port, sizeof port, "%s", colon + 1);
	if (atol(port) > 65535)
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "listen address '%s': port above 65535", spec);
	if (host[0] == '[' && hl >= 2 && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *res;
	int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
	if (rc != 0)
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "listen address '%s': %s", spec, gai_strerror(rc));
	if (!is_loopback(res->ai_addr) && !secured && !insecure_ok) {
		freeaddrinfo(res);
		return gpumon__exporter_err(e, GPUMON_E_INVAL,
				      "refusing to listen on %s, which is not a loopback address, without TLS and basic auth "
				      "(--tls-cert, --tls-key, --basic-auth-file): anyone who can reach it would see every "
				      "process's command line; pass --insecure-listen to do it anyway", spec);
	}
	int s = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1, err = 0;
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
	    bind(s, res->ai_addr, res->ai_addrlen) != 0 || listen(s, 1024) != 0)
		err = errno;
	freeaddrinfo(res);
	if (err) {
		if (s >= 0)
			close(s);
		return gpumon__exporter_err(e, GPUMON_E_IO, "cannot listen on %s: %s", spec, strerror(err));
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	getsockname(s, (struct sockaddr *)&ss, &sl);
	format_address((struct sockaddr *)&ss, e->address, sizeof e->address);
	*fd = s;
	return GPUMON_OK;
}

/* ---- life cycle -------------------------------------------------------------------------------- */

int gpumon__exporter_err(gpumon_exporter *e, int status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	if (e->g)
		gpumon__seterr(e->g, status, "%s", e->msg);
	return status;
}

static int configure(gpumon_exporter *e, const gpumon_exporter_config *c)
{
	/* per-pid series are opt-in: a pid label makes a new series per job (docs/metrics.md) */
	e->max_processes = c->no_processes ? 0 : c->max_processes;
	e->processes = !c->no_processes;
	e->compat = c->compat;
	if (c->compat & ~(unsigned)(GPUMON_COMPAT_DCGM | GPUMON_COMPAT_NVIDIA_SMI))
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "unknown compat bits 0x%x", c->compat);
	if (c->interval_ms && (c->interval_ms < 1 || c->interval_ms > 60000))
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "interval %u ms: expected 1 to 60000", c->interval_ms);
	/* the connection limits' ranges, as gpumon serve's options and the Python exporter say them */
	const struct {
		const char *name;
		unsigned v, max;
	} lim[] = {{"max_connections", c->max_connections, GPUMON_EXPORTER_CONNECTIONS_MAX},
		   {"max_connections_per_ip", c->max_connections_per_ip, GPUMON_EXPORTER_CONNECTIONS_MAX},
		   {"timeout", c->timeout_s, GPUMON_EXPORTER_SECONDS_MAX},
		   {"keepalive", c->keepalive_s, GPUMON_EXPORTER_SECONDS_MAX}};
	for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
		if (lim[i].v > lim[i].max)
			return gpumon__exporter_err(e, GPUMON_E_INVAL, "%s %u: expected 1 to %u (0: the default)",
						    lim[i].name, lim[i].v, lim[i].max);
	if (!e->g && !c->replay)
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "no gpumon handle and no recording to replay: nothing to export");
	if (c->replay && !c->replay[0])
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "the recording to replay has an empty name");
	e->peak_window_ns = (uint64_t)(c->peak_window_s ? c->peak_window_s : 60) * 1000000000ull;
	if (!!c->tls_cert_file != !!c->tls_key_file)
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "TLS needs both a certificate and a key file");
	int st = GPUMON_OK;
	if (c->tls_cert_file)
		st = read_file(e, "TLS certificate", c->tls_cert_file, &e->tls_cert);
	if (st == GPUMON_OK && c->tls_key_file)
		st = read_file(e, "TLS key", c->tls_key_file, &e->tls_key);
	if (st == GPUMON_OK && c->basic_auth_file)
		st = load_auth(e, c->basic_auth_file);
	return st;
}

/* The live source: a sampler of the exporter's own, and the first records of every GPU, so that the
 * first snapshot already holds their figures. */
static int start_sampling(gpumon_exporter *e, const gpumon_exporter_config *c)
{
	int st = gpumon__exporter_collect_init(e);
	if (st != GPUMON_OK)
		return st;
	gpumon_sampler_config sc = {
		.size = sizeof sc,
		.period_us = (c->interval_ms ? c->interval_ms : 10) * 1000u,
		.process_period_us = e->processes ? 0 : UINT32_MAX,
		/* the collector drains every 50 ms, but the first process lists come all at once, a record
		   each (1.8 KiB): 8,192 holds 8 GPUs x 1,000 processes. A record dropped there would be lost
		   for good (only changes follow), so the queue is sized for that burst; malloc'd, it is
		   resident only as far as a burst fills it */
		.queue_records = 8192,
		.slow_fields = GPUMON_F_UTIL_GPU | GPUMON_F_UTIL_MEMORY | GPUMON_F_TEMPERATURE | GPUMON_F_POWER |
			       GPUMON_F_CLOCK_SM | GPUMON_F_CLOCK_MEM | (c->no_energy ? 0 : GPUMON_F_ENERGY),
	};
	st = gpumon_sampler_create(e->g, &sc, &e->sampler);
	if (st != GPUMON_OK) {
		snprintf(e->msg, sizeof e->msg, "%s", gpumon_errmsg(e->g));
		return st;
	}
	/* wait for the first records (< 1 s) */
	uint64_t until = gpumon__now_ns() + 1000000000ull;
	do
		gpumon__exporter_collect_once(e, 20);
	while (!gpumon__exporter_collect_ready(e) && gpumon__now_ns() < until);
	/* the first process lists follow the device samples: take records until 50 ms pass without one */
	while (gpumon__exporter_collect_once(e, 50) > 0 && gpumon__now_ns() < until)
		;
	return GPUMON_OK;
}

/* Stops what runs and frees what e holds, keeping e and its message (a failed create's exporter,
 * or the first half of destroy). Idempotent. */
static void shut(gpumon_exporter *e)
{
	gpumon__exporter_http_stop(e);
	atomic_store(&e->stopping, 1);
	if (e->collector_started)
		pthread_join(e->collector, NULL);
	e->collector_started = 0;
	gpumon__exporter_health_stop(e);
	gpumon_sampler_destroy(e->sampler);
	e->sampler = NULL;
	gpumon__exporter_collect_free(e);
	free(e->tls_cert);
	e->tls_cert = NULL;
	if (e->tls_key) {
		memset(e->tls_key, 0, strlen(e->tls_key));
		free(e->tls_key);
	}
	e->tls_key = NULL;
	memset(e->auth, 0, sizeof e->auth);
	e->auth_len = 0;
	e->address[0] = 0;
}

int gpumon_exporter_create(gpumon *g, const gpumon_exporter_config *cfg, gpumon_exporter **out)
{
	if (!out)
		return GPUMON_E_INVAL;
	*out = NULL;
	gpumon_exporter *e = calloc(1, sizeof *e);
	if (!e)
		return g ? gpumon__seterr(g, GPUMON_E_NOMEM, "out of memory for the exporter") : GPUMON_E_NOMEM;
	e->g = g;
	pthread_mutex_init(&e->snap_lock, NULL);
	pthread_mutex_init(&e->fw_lock, NULL);
	*out = e;
	gpumon_exporter_config c;
	int fd = -1;
	int st = gpumon__config_take(&c, sizeof c, cfg);
	if (st != GPUMON_OK)
		st = gpumon__exporter_err(e, GPUMON_E_INVAL, "exporter configuration: size %u is not that of any version of "
					  "gpumon_exporter_config (set it to sizeof the struct)", cfg->size);
	if (st == GPUMON_OK)
		st = configure(e, &c);
	if (st == GPUMON_OK)
		st = bind_listen(e, c.listen ? c.listen : DEFAULT_LISTEN, e->tls_cert && e->auth_len, c.insecure_listen, &fd);
	if (st == GPUMON_OK) /* the address is known for its messages */
		st = gpumon__exporter_http_load(e);
	if (st == GPUMON_OK && c.replay) {
		e->replay = c.replay;
		st = gpumon__exporter_replay(e);
		e->replay = NULL;
	} else if (st == GPUMON_OK) {
		st = start_sampling(e, &c);
		if (st == GPUMON_OK && gpumon__exporter_health_start(e) != GPUMON_OK)
			st = gpumon__exporter_err(e, GPUMON_E_NOMEM, "cannot start the exporter's memory health thread");
	}
	if (st == GPUMON_OK && gpumon__exporter_render(e) != GPUMON_OK)
		st = gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory rendering the metrics");
	if (st == GPUMON_OK) {
		if (pthread_create(&e->collector, NULL, gpumon__exporter_collector_main, e) != 0)
			st = gpumon__exporter_err(e, GPUMON_E_NOMEM, "cannot start the exporter's collector thread");
		else
			e->collector_started = 1;
	}
	if (st == GPUMON_OK) {
		st = gpumon__exporter_http_start(e, &c, fd);
		fd = -1;
	}
	if (st != GPUMON_OK) {
		if (fd >= 0)
			close(fd);
		shut(e); /* e stays, holding the message, for the caller to destroy */
		return st;
	}
	return GPUMON_OK;
}

void gpumon_exporter_address(const gpumon_exporter *e, char *buf, size_t len)
{
	if (buf && len)
		snprintf(buf, len, "%s", e ? e->address : "");
}

int gpumon_exporter_framework(gpumon_exporter *e, const gpumon_framework_sample *s)
{
	if (!e || !s)
		return GPUMON_E_INVAL;
	int st = GPUMON_OK;
	gpumon_framework_sample f = *s;
	f.framework[sizeof f.framework - 1] = 0;
	if (!f.t_ns) /* the model orders samples in time: one without a time is taken as now */
		f.t_ns = gpumon__now_ns();
	pthread_mutex_lock(&e->fw_lock);
	size_t i = 0;
	while (i < e->nfw && (e->fw[i].pid != f.pid || e->fw[i].device != f.device))
		i++;
	if (i == EXPORTER_MAX_FRAMEWORK) {
		st = GPUMON_E_NOMEM;
	} else {
		e->fw[i] = f;
		if (i == e->nfw)
			e->nfw++;
		/* a replay's model holds the recording, finished: pushed figures are shown, not judged;
		   a collector that fell this far behind lets the model miss a few */
		if (e->fw_pending && !e->replaying && e->npending < EXPORTER_MAX_PENDING)
			e->fw_pending[e->npending++] = f;
	}
	pthread_mutex_unlock(&e->fw_lock);
	return st;
}

const char *gpumon_exporter_errmsg(const gpumon_exporter *e)
{
	return e ? e->msg : "";
}

void gpumon_exporter_destroy(gpumon_exporter *e)
{
	if (!e)
		return;
	shut(e);
	pthread_mutex_destroy(&e->snap_lock);
	pthread_mutex_destroy(&e->fw_lock);
	free(e);
}
