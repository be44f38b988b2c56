/* SPDX-License-Identifier: MIT */
/* exporter.c — the Prometheus exporter's life cycle and HTTP server (libmicrohttpd): binds the
 * listen address, refuses a non-loopback one without TLS and basic auth unless told otherwise,
 * answers GET/HEAD on /metrics, /healthz and / from the collector's latest snapshot over kept-alive
 * connections, and bounds what a client can make it hold (header bytes here; connections, per
 * address and in time, in exporter_guard.c). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "exporter.h"
#include "exporter_guard.h"

#define DEFAULT_LISTEN "127.0.0.1:19400"
#define MEMORY_LIMIT (16 * 1024) /* per connection: request line and headers (~8 KiB) */
#define MAX_FILE (1024 * 1024)   /* certificate, key, password file */
#define HEALTHY_NS 5000000000ull  /* /healthz fails when the snapshot is older than this */
#define DEFAULT_PER_ADDRESS 64    /* connections from one address: Prometheus servers and people need a few */
#define DEFAULT_KEEPALIVE_S 120   /* longer than the usual scrape intervals (15 s to 1 min) */

static const char CONTENT_TYPE[] = "text/plain; version=0.0.4; charset=utf-8";
static const char INDEX_HTML[] =
	"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpumon exporter</title></head>\n"
	"<body><h1>gpumon exporter</h1>\n<ul><li><a href=\"metrics\">metrics</a> (Prometheus text format)</li>\n"
	"<li><a href=\"healthz\">healthz</a></li></ul></body></html>\n";

/* ---- libmicrohttpd, loaded when an exporter starts ------------------------------------------------ */

/* libmicrohttpd pulls in GnuTLS and p11-kit, whose start-up costs every program about 25 ms and
 * 3 MB of memory: it is loaded with dlopen by the exporter only, never linked into libgpumon. */
#define MHD_LIBRARY_FILE "libmicrohttpd.so.12"

struct mhd_api {
	__typeof__(MHD_start_daemon) *start_daemon;
	__typeof__(MHD_stop_daemon) *stop_daemon;
	__typeof__(MHD_is_feature_supported) *is_feature_supported;
	__typeof__(MHD_create_response_from_buffer) *create_response_from_buffer;
	__typeof__(MHD_create_response_from_iovec) *create_response_from_iovec;
	__typeof__(MHD_add_response_header) *add_response_header;
	__typeof__(MHD_queue_response) *queue_response;
	__typeof__(MHD_destroy_response) *destroy_response;
	__typeof__(MHD_lookup_connection_value) *lookup_connection_value;
	__typeof__(MHD_get_connection_info) *get_connection_info;
};

static int load_mhd(gpumon_exporter *e)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
		{"MHD_start_daemon", offsetof(struct mhd_api, start_daemon)},
		{"MHD_stop_daemon", offsetof(struct mhd_api, stop_daemon)},
		{"MHD_is_feature_supported", offsetof(struct mhd_api, is_feature_supported)},
		{"MHD_create_response_from_buffer", offsetof(struct mhd_api, create_response_from_buffer)},
		{"MHD_create_response_from_iovec", offsetof(struct mhd_api, create_response_from_iovec)},
		{"MHD_add_response_header", offsetof(struct mhd_api, add_response_header)},
		{"MHD_queue_response", offsetof(struct mhd_api, queue_response)},
		{"MHD_destroy_response", offsetof(struct mhd_api, destroy_response)},
		{"MHD_lookup_connection_value", offsetof(struct mhd_api, lookup_connection_value)},
		{"MHD_get_connection_info", offsetof(struct mhd_api, get_connection_info)},
	};
	e->api = calloc(1, sizeof *e->api);
	if (!e->api)
		return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory for the exporter");
	e->mhd_lib = dlopen(MHD_LIBRARY_FILE, RTLD_NOW | RTLD_LOCAL);
	if (!e->mhd_lib) {
		const char *why = dlerror();
		return gpumon__exporter_err(e, GPUMON_E_NOT_SUPPORTED,
				      "cannot load %s for the HTTP server (%s): install the Debian package libmicrohttpd12",
				      MHD_LIBRARY_FILE, why ? why : "not found");
	}
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		void *f = dlsym(e->mhd_lib, syms[i].name);
		if (!f)
			return gpumon__exporter_err(e, GPUMON_E_NOT_SUPPORTED,
					      "%s has no %s: libmicrohttpd 0.9.74 or newer is needed", MHD_LIBRARY_FILE,
					      syms[i].name);
		memcpy((char *)e->api + syms[i].off, &f, sizeof f);
	}
	return GPUMON_OK;
}

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

/* ---- HTTP ------------------------------------------------------------------------------------- */

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes canonical base64 (padded, or unpadded) into out; returns the length, or -1 for anything
 * else: a character outside the alphabet, a bad or misplaced padding, bits left over, anything
 * after the padding. */
static long b64_decode(const char *in, unsigned char *out, size_t cap)
{
	size_t n = 0, chars = 0;
	unsigned acc = 0, bits = 0;
	for (; *in && *in != '='; in++, chars++) {
		int v = b64_value((unsigned char)*in);
		if (v < 0)
			return -1;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == cap)
				return -1;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	size_t pad = strspn(in, "=");
	if (in[pad] || chars % 4 == 1 || pad > 2 || (pad && (chars + pad) % 4 != 0) || (acc & ((1u << bits) - 1)) != 0)
		return -1;
	return (long)n;
}

/* Compares in time that depends only on the expected length, not on where they differ. */
static int equal_ct(const unsigned char *got, size_t got_len, const char *want, size_t want_len)
{
	unsigned diff = got_len != want_len;
	for (size_t i = 0; i < want_len; i++)
		diff |= (unsigned)(got[i < got_len ? i : 0] ^ (unsigned char)want[i]);
	return diff == 0;
}

static int authorized(gpumon_exporter *e, struct MHD_Connection *c)
{
	if (!e->auth_len)
		return 1;
	const char *h = e->api->lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	unsigned char dec[sizeof e->auth + 4];
	if (!h || strncasecmp(h, "Basic ", 6) != 0)
		return 0;
	long n = b64_decode(h + 6 + strspn(h + 6, " "), dec, sizeof dec);
	return n >= 0 && equal_ct(dec, (size_t)n, e->auth, e->auth_len);
}

/* Queues r with the headers every response carries, and frees the caller's reference. */
static enum MHD_Result send_response(gpumon_exporter *e, struct MHD_Connection *c, unsigned status,
				     struct MHD_Response *r, const char *type)
{
	const struct mhd_api *api = e->api;
	api->add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	api->add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (e->no_keepalive)
		api->add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	enum MHD_Result ret = api->queue_response(c, status, r);
	api->destroy_response(r);
	return ret;
}

static enum MHD_Result reply(gpumon_exporter *e, struct MHD_Connection *c, unsigned status, const char *type,
			     const char *body, size_t len, const char *hname, const char *hvalue)
{
	struct MHD_Response *r = e->api->create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	if (hname)
		e->api->add_response_header(r, hname, hvalue);
	return send_response(e, c, status, r, type);
}

static enum MHD_Result text(gpumon_exporter *e, struct MHD_Connection *c, unsigned status, const char *msg)
{
	return reply(e, c, status, "text/plain; charset=utf-8", msg, strlen(msg), NULL, NULL);
}

/* A /metrics response: the shared snapshot and this scrape's own families. */
struct scrape {
	struct snapshot *snap;
	char tail[2048];
};

static void scrape_free(void *cls)
{
	struct scrape *r = cls;
	gpumon__snapshot_release(r->snap);
	free(r);
}

/* The families of this scrape: the exporter's own counters, read now. Returns the length, 0 if
 * they do not fit (they do: 2 KiB holds them with room to spare). */
static size_t scrape_tail(gpumon_exporter *e, char *buf, size_t cap)
{
	unsigned long long n = atomic_fetch_add(&e->scrapes, 1) + 1;
	double last = (double)atomic_load(&e->last_scrape_ns) / 1e9;
	struct guard_counts gc;
	gpumon__guard_counts(e->guard, &gc);
	int k = snprintf(buf, cap,
			 "# HELP gpumon_exporter_scrapes_total Requests for /metrics answered, this one included.\n"
			 "# TYPE gpumon_exporter_scrapes_total counter\ngpumon_exporter_scrapes_total %llu\n"
			 "# HELP gpumon_exporter_scrape_duration_seconds Time the previous /metrics request took to answer, in seconds.\n"
			 "# TYPE gpumon_exporter_scrape_duration_seconds gauge\ngpumon_exporter_scrape_duration_seconds %.9f\n"
			 "# HELP gpumon_exporter_connections HTTP connections open, this one included.\n"
			 "# TYPE gpumon_exporter_connections gauge\ngpumon_exporter_connections %u\n"
			 "# HELP gpumon_exporter_connections_closed_total Connections the exporter closed before the client did, by "
			 "reason: timeout (a request head not whole, or a response not taken, in time), full (the connection table "
			 "was full: the one that had waited longest for a request), per_address (its address held its maximum).\n"
			 "# TYPE gpumon_exporter_connections_closed_total counter\n"
			 "gpumon_exporter_connections_closed_total{reason=\"timeout\"} %llu\n"
			 "gpumon_exporter_connections_closed_total{reason=\"full\"} %llu\n"
			 "gpumon_exporter_connections_closed_total{reason=\"per_address\"} %llu\n",
			 n, last, gc.open, gc.closed[GUARD_TIMEOUT], gc.closed[GUARD_FULL], gc.closed[GUARD_PER_ADDRESS]);
	return k > 0 && (size_t)k < cap ? (size_t)k : 0;
}

/* Answers /metrics with the latest snapshot (sent from where it lies, no copy) and the per-scrape
 * families after it. */
static enum MHD_Result metrics(gpumon_exporter *e, struct MHD_Connection *c, uint64_t t0)
{
	struct scrape *r = malloc(sizeof *r);
	if (!r)
		return text(e, c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	pthread_mutex_lock(&e->snap_lock);
	r->snap = e->snap;
	if (r->snap)
		atomic_fetch_add(&r->snap->refs, 1);
	pthread_mutex_unlock(&e->snap_lock);
	if (!r->snap) {
		free(r);
		return text(e, c, MHD_HTTP_SERVICE_UNAVAILABLE, "no snapshot yet\n");
	}
	struct MHD_IoVec iov[2] = {
		{r->snap->data, r->snap->len},
		{r->tail, scrape_tail(e, r->tail, sizeof r->tail)},
	};
	struct MHD_Response *resp = e->api->create_response_from_iovec(iov, 2, scrape_free, r);
	if (!resp) {
		scrape_free(r);
		return MHD_NO;
	}
	enum MHD_Result ret = send_response(e, c, MHD_HTTP_OK, resp, CONTENT_TYPE);
	atomic_store(&e->last_scrape_ns, gpumon__now_ns() - t0);
	return ret;
}

/* Whether the request announces a body. A response queued before the body is read makes
 * libmicrohttpd close the connection after it (it will not read a body it was not asked for), so
 * only such requests are answered at once. */
static int has_body(gpumon_exporter *e, struct MHD_Connection *c)
{
	const char *len = e->api->lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	return e->api->lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) ||
	       (len && strcmp(len, "0") != 0);
}

static enum MHD_Result answer(gpumon_exporter *e, struct MHD_Connection *c, const char *url, const char *method)
{
	uint64_t t0 = gpumon__now_ns();
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply(e, c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", "only GET and HEAD\n", 18,
			     MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (!authorized(e, c))
		return reply(e, c, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8", "authentication required\n", 24,
			     MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Basic realm=\"gpumon\", charset=\"UTF-8\"");
	if (!strcmp(url, "/metrics"))
		return metrics(e, c, t0);
	if (!strcmp(url, "/healthz")) {
		pthread_mutex_lock(&e->snap_lock);
		uint64_t t = e->snap ? e->snap->t_ns : 0;
		pthread_mutex_unlock(&e->snap_lock);
		if (t && t0 - t < HEALTHY_NS)
			return text(e, c, MHD_HTTP_OK, "ok\n");
		return text(e, c, MHD_HTTP_SERVICE_UNAVAILABLE, "stale: the collector has not rendered for 5 s\n");
	}
	if (!strcmp(url, "/"))
		return reply(e, c, MHD_HTTP_OK, "text/html; charset=utf-8", INDEX_HTML, sizeof INDEX_HTML - 1, NULL, NULL);
	return text(e, c, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
}

/* libmicrohttpd calls this when a request's head is in (*req_cls NULL), then again once its body is
 * in. A request without a body is answered on the second call, so that the connection can be kept
 * alive for the next one (a response queued on the first call closes it). */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls)
{
	gpumon_exporter *e = cls;
	(void)version;
	(void)upload_data;
	if (!*req_cls) {
		gpumon__guard_request(e->guard, c);
		*req_cls = e; /* any non-NULL mark: the head was seen */
		if (!has_body(e, c))
			return MHD_YES;
	}
	*upload_data_size = 0; /* a body is not kept */
	return answer(e, c, url, method);
}

/* ---- life cycle -------------------------------------------------------------------------------- */

static int start_http(gpumon_exporter *e, const gpumon_exporter_config *c, int fd)
{
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ERROR_LOG;
	unsigned timeout = c->timeout_s ? c->timeout_s : 10;
	unsigned keepalive = c->no_keepalive ? timeout : c->keepalive_s ? c->keepalive_s : DEFAULT_KEEPALIVE_S;
	struct guard_limits gl = {
		.max_connections = c->max_connections ? c->max_connections : 1024,
		.per_address = c->max_connections_per_ip ? c->max_connections_per_ip : DEFAULT_PER_ADDRESS,
		.head_ms = timeout * 1000u,
		.keepalive_ms = keepalive * 1000u,
		.tls = e->tls_cert != NULL,
	};
	e->no_keepalive = c->no_keepalive;
	if (gpumon__guard_create(&gl, e->api->get_connection_info, &e->guard) != GPUMON_OK) {
		close(fd);
		return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory for the exporter's connection guard");
	}
	struct MHD_OptionItem opts[8];
	int k = 0;
	opts[k++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, fd, NULL};
	opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, gl.max_connections, NULL};
	/* libmicrohttpd's idle timeout, which each byte resets, is only a backstop: the guard's
	   deadlines, which bytes do not extend, come first */
	opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, timeout > keepalive ? timeout : keepalive, NULL};
	opts[k++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, MEMORY_LIMIT, NULL};
	if (e->tls_cert) {
		if (e->api->is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			close(fd);
			return gpumon__exporter_err(e, GPUMON_E_IO, "this libmicrohttpd was built without TLS");
		}
		flags |= MHD_USE_TLS;
		opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, e->tls_cert};
		opts[k++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, e->tls_key};
	}
	opts[k++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	/* the logger first, or libmicrohttpd prints the messages of the options before it */
	e->mhd = e->api->start_daemon(flags, 0, NULL, NULL, handle, e,
				      MHD_OPTION_EXTERNAL_LOGGER, gpumon__guard_log, e->guard, MHD_OPTION_ARRAY, opts,
				      MHD_OPTION_NOTIFY_CONNECTION, gpumon__guard_notify_connection, e->guard,
				      MHD_OPTION_NOTIFY_COMPLETED, gpumon__guard_completed, e->guard, MHD_OPTION_END);
	if (!e->mhd) {
		const char *why = gpumon__guard_start_message(e->guard);
		close(fd);
		return gpumon__exporter_err(e, GPUMON_E_IO, "cannot start the HTTP server on %s%s%s%s", e->address,
					    e->tls_cert ? " (is the TLS certificate and key a matching PEM pair?)" : "",
					    why[0] ? ": libmicrohttpd says: " : "", why);
	}
	gpumon__guard_serving(e->guard);
	return GPUMON_OK;
}

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
		/* the flight recorder is not used here: keep it small (it is resident memory) */
		.ring_seconds = 1,
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
	gpumon__guard_stop(e->guard); /* it shuts sockets down: not while the daemon closes them */
	if (e->mhd)
		e->api->stop_daemon(e->mhd);
	e->mhd = NULL;
	gpumon__guard_destroy(e->guard);
	e->guard = NULL;
	if (e->mhd_lib)
		dlclose(e->mhd_lib);
	e->mhd_lib = NULL;
	free(e->api);
	e->api = NULL;
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
		st = load_mhd(e);
	if (st == GPUMON_OK)
		st = bind_listen(e, c.listen ? c.listen : DEFAULT_LISTEN, e->tls_cert && e->auth_len, c.insecure_listen, &fd);
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
		st = start_http(e, &c, fd);
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
