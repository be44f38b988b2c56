/* SPDX-License-Identifier: MIT */
/* exporter_http.c — the exporter's HTTP server: libevent's evhttp, loaded with dlopen when an
 * exporter starts, in a thread of its own; OpenSSL (through libevent_openssl) only when TLS is
 * asked for. It answers GET/HEAD on /metrics, /healthz and / from the collector's latest snapshot
 * over kept-alive connections, bounds the bytes a request may bring (its head, no body), and tells
 * the connection guard (exporter_guard.c) of every connection's phases: accepted, answering,
 * answered, closed. The guard's deadlines are one timer of the server's loop, set to the next. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "exporter.h"
#include "exporter_guard.h"

#define HEALTHY_NS 5000000000ull  /* /healthz fails when the snapshot is older than this */
#define DEFAULT_PER_ADDRESS 64    /* connections from one address: Prometheus servers and people need a few */
#define DEFAULT_KEEPALIVE_S 120   /* longer than the usual scrape intervals (15 s to 1 min) */
#define MAX_HEAD (16 * 1024)      /* a request line and headers (~8 KiB in practice) */
#define MAX_BODY 4096             /* a request body is read and dropped: a small one is let through */
#define ACCEPT_RETRY_MS 100       /* out of descriptors: accepting pauses this long */

static const char CONTENT_TYPE[] = "text/plain; version=0.0.4; charset=utf-8";
static const char TEXT_TYPE[] = "text/plain; charset=utf-8";
static const char INDEX_HTML[] =
	"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>gpumon exporter</title></head>\n"
	"<body><h1>gpumon exporter</h1>\n<ul><li><a href=\"metrics\">metrics</a> (Prometheus text format)</li>\n"
	"<li><a href=\"healthz\">healthz</a></li></ul></body></html>\n";

/* ---- libevent and OpenSSL, loaded when an exporter starts --------------------------------------- */

/* libevent_extra holds evhttp and brings libevent_core; libevent_openssl brings the same core and
 * OpenSSL, whose start-up (and some 3 MB of memory) only a TLS exporter pays. */
#define EVENT_LIBRARY_FILE "libevent_extra-2.1.so.7"
#define EVENT_PACKAGE "libevent-extra-2.1-7"
#define TLS_LIBRARY_FILE "libevent_openssl-2.1.so.7"
#define TLS_PACKAGE "libevent-openssl-2.1-7"

#define EVENT_CALLS(X)                                                                                             \
	X(event_base_new) X(event_base_free) X(event_base_dispatch) X(event_base_loopbreak) X(event_new)         \
	X(event_free) X(event_add) X(event_del) X(event_active) X(event_set_log_callback) X(evconnlistener_new)  \
	X(evconnlistener_set_error_cb) X(evconnlistener_enable) X(evconnlistener_disable) X(evconnlistener_free) \
	X(evhttp_new) \
	X(evhttp_free) X(evhttp_bind_listener) X(evhttp_set_gencb) X(evhttp_set_bevcb) X(evhttp_set_timeout)    \
	X(evhttp_set_max_headers_size) X(evhttp_set_max_body_size) X(evhttp_set_allowed_methods)                \
	X(evhttp_request_get_command) X(evhttp_request_get_evhttp_uri) X(evhttp_uri_get_path)                   \
	X(evhttp_request_get_input_headers) X(evhttp_request_get_output_headers) X(evhttp_find_header)          \
	X(evhttp_add_header) X(evhttp_send_reply) X(evhttp_request_set_on_complete_cb)                          \
	X(evhttp_request_get_connection) X(evhttp_connection_get_bufferevent) X(evhttp_connection_set_closecb)  \
	X(evbuffer_new) X(evbuffer_free) X(evbuffer_add) X(evbuffer_add_reference) X(evbuffer_get_length)       \
	X(bufferevent_socket_new) X(bufferevent_getfd) X(bufferevent_getcb) X(bufferevent_incref)               \
	X(bufferevent_decref)

#define TLS_CALLS(X)                                                                                               \
	X(bufferevent_openssl_socket_new) X(TLS_server_method) X(SSL_CTX_new) X(SSL_CTX_free) X(SSL_CTX_ctrl)   \
	X(SSL_CTX_use_certificate) X(SSL_CTX_use_PrivateKey) X(SSL_CTX_check_private_key) X(SSL_new) X(SSL_free) \
	X(BIO_new_mem_buf) X(BIO_free) X(PEM_read_bio_X509) X(PEM_read_bio_PrivateKey) X(X509_free)             \
	X(EVP_PKEY_free) X(ERR_get_error) X(ERR_error_string_n) X(ERR_clear_error)

#define FIELD(name) __typeof__(name) *name;
struct ev_api {
	EVENT_CALLS(FIELD)
};
struct tls_api {
	TLS_CALLS(FIELD)
};
#undef FIELD

/* A connection accepted whose socket evhttp has not set yet: met again once the accept is over. */
struct fresh {
	struct bufferevent *bev;
	int refuse; /* it could not be given TLS: closed as soon as it is known */
};

struct exporter_http {
	gpumon_exporter *e;
	void *lib;  /* libevent_extra (dlclose'd at the end) */
	void *tls_lib; /* libevent_openssl, kept: OpenSSL is not meant to be unloaded */
	struct ev_api ev;
	struct tls_api tls;
	SSL_CTX *ctx;
	struct event_base *base;
	struct evhttp *http;
	struct evconnlistener *listener;
	struct event *wake, *sweep, *fresh_ev, *retry;
	int wake_fd;
	struct guard *guard;
	struct fresh *fresh;
	size_t nfresh, cap_fresh;
	int no_keepalive;
	pthread_t thread;
	int thread_started;
};

static int load_api(gpumon_exporter *e, void **lib, const char *file, const char *package, const char *const *names,
		    void **fns, size_t n, const char *what)
{
	*lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
	if (!*lib) {
		const char *why = dlerror();
		return gpumon__exporter_err(e, GPUMON_E_NOT_SUPPORTED,
					    "cannot load %s for %s (%s): install the Debian package %s", file, what,
					    why ? why : "not found", package);
	}
	for (size_t i = 0; i < n; i++)
		if (!(fns[i] = dlsym(*lib, names[i])))
			return gpumon__exporter_err(e, GPUMON_E_NOT_SUPPORTED, "%s has no %s: %s 2.1.12 or newer is needed",
						    file, names[i], package);
	return GPUMON_OK;
}

#define NAME(name) #name,
static const char *const EVENT_NAMES[] = {EVENT_CALLS(NAME)};
static const char *const TLS_NAMES[] = {TLS_CALLS(NAME)};
#undef NAME

/* libevent's messages are for its own debugging: the exporter reports what fails in its own words */
static void quiet(int severity, const char *msg)
{
	(void)severity;
	(void)msg;
}

static int load_event(struct exporter_http *h)
{
	/* a program that has libevent loaded already keeps its own way of logging (the core's) */
	void *had = dlopen("libevent_core-2.1.so.7", RTLD_NOW | RTLD_NOLOAD);
	if (had)
		dlclose(had);
	_Static_assert(sizeof h->ev == sizeof EVENT_NAMES / sizeof EVENT_NAMES[0] * sizeof(void *), "one name a call");
	int st = load_api(h->e, &h->lib, EVENT_LIBRARY_FILE, EVENT_PACKAGE, EVENT_NAMES, (void **)&h->ev,
			  sizeof EVENT_NAMES / sizeof EVENT_NAMES[0], "the HTTP server");
	if (st == GPUMON_OK && !had)
		h->ev.event_set_log_callback(quiet);
	return st;
}

/* ---- TLS ---------------------------------------------------------------------------------------- */

static int tls_err(struct exporter_http *h, const char *what)
{
	char why[256] = "";
	unsigned long code = h->tls.ERR_get_error();
	if (code)
		h->tls.ERR_error_string_n(code, why, sizeof why);
	h->tls.ERR_clear_error();
	return gpumon__exporter_err(h->e, GPUMON_E_IO, "cannot start the HTTP server on %s: %s%s%s%s", h->e->address,
				    what, why[0] ? " (OpenSSL says: " : "", why, why[0] ? ")" : "");
}

/* An encrypted key is refused: OpenSSL would otherwise ask for its passphrase on the terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return 0;
}

/* The certificate (with the chain after it) and the key, from the PEM text read at configure. */
static int start_tls(struct exporter_http *h)
{
	_Static_assert(sizeof h->tls == sizeof TLS_NAMES / sizeof TLS_NAMES[0] * sizeof(void *), "one name a call");
	int st = load_api(h->e, &h->tls_lib, TLS_LIBRARY_FILE, TLS_PACKAGE, TLS_NAMES, (void **)&h->tls,
			  sizeof TLS_NAMES / sizeof TLS_NAMES[0], "TLS");
	if (st != GPUMON_OK)
		return st;
	struct tls_api *t = &h->tls;
	h->ctx = t->SSL_CTX_new(t->TLS_server_method());
	if (!h->ctx)
		return tls_err(h, "OpenSSL cannot make a TLS context");
	t->SSL_CTX_ctrl(h->ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	/* 1,000 idle TLS connections do not each keep 34 KiB of buffers */
	t->SSL_CTX_ctrl(h->ctx, SSL_CTRL_MODE, SSL_MODE_RELEASE_BUFFERS, NULL);
	BIO *b = t->BIO_new_mem_buf(h->e->tls_cert, -1);
	X509 *x = b ? t->PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
	int ok = x && t->SSL_CTX_use_certificate(h->ctx, x) == 1;
	if (x)
		t->X509_free(x);
	while (ok && (x = t->PEM_read_bio_X509(b, NULL, no_passphrase, NULL)))
		if (t->SSL_CTX_ctrl(h->ctx, SSL_CTRL_CHAIN_CERT, 0, x) != 1) { /* add0: the context owns x */
			t->X509_free(x);
			ok = 0;
		}
	if (b)
		t->BIO_free(b);
	if (!ok)
		return tls_err(h, "the TLS certificate file holds no PEM certificate OpenSSL takes");
	t->ERR_clear_error(); /* the end of the chain is an error to PEM_read_bio_X509 */
	b = t->BIO_new_mem_buf(h->e->tls_key, -1);
	EVP_PKEY *k = b ? t->PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL) : NULL;
	if (b)
		t->BIO_free(b);
	if (!k)
		return tls_err(h, "the TLS key file holds no unencrypted PEM private key OpenSSL takes");
	/* OpenSSL compares the key with the certificate as it takes it */
	ok = t->SSL_CTX_use_PrivateKey(h->ctx, k) == 1 && t->SSL_CTX_check_private_key(h->ctx) == 1;
	t->EVP_PKEY_free(k);
	if (!ok)
		return tls_err(h, "the TLS certificate and key are not a matching pair");
	return GPUMON_OK;
}

/* ---- connections: the guard told of each -------------------------------------------------------- */

static void rearm(struct exporter_http *h)
{
	uint64_t next = gpumon__guard_sweep(h->guard);
	if (!next) {
		h->ev.event_del(h->sweep);
		return;
	}
	uint64_t now = gpumon__now_ns(), wait = next > now ? next - now : 0;
	wait += 1000000; /* a timer early by its rounding would find nothing due yet */
	struct timeval tv = {(time_t)(wait / 1000000000u), (suseconds_t)(wait % 1000000000u / 1000u)};
	h->ev.event_add(h->sweep, &tv);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	rearm(arg);
}

static void on_closed(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	struct guard_conn *c = arg;
	struct exporter_http *h = gpumon__guard_conn_owner(c);
	gpumon__guard_closed(c);
	rearm(h);
}

/* Every connection is made here (evhttp's bevcb), before evhttp sets its socket: it is met again,
 * with its socket and its evhttp connection, once the accept is over (on_fresh). */
static struct bufferevent *new_connection(struct event_base *base, void *arg)
{
	struct exporter_http *h = arg;
	int refuse = 0;
	struct bufferevent *bev = NULL;
	if (h->ctx) {
		SSL *ssl = h->tls.SSL_new(h->ctx);
		if (ssl && !(bev = h->tls.bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
									 BEV_OPT_CLOSE_ON_FREE)))
			h->tls.SSL_free(ssl);
		refuse = !bev; /* never plain HTTP on the TLS port: a plain one that is closed at once */
	}
	if (!bev)
		bev = h->ev.bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (!bev)
		return NULL;
	if (h->nfresh == h->cap_fresh) {
		size_t cap = h->cap_fresh ? 2 * h->cap_fresh : 16;
		struct fresh *f = realloc(h->fresh, cap * sizeof *f);
		if (!f)
			return bev; /* not followed: evhttp's own idle timeout is its only bound */
		h->fresh = f;
		h->cap_fresh = cap;
	}
	h->ev.bufferevent_incref(bev); /* it stays readable here even if evhttp frees it first */
	h->fresh[h->nfresh++] = (struct fresh){bev, refuse};
	h->ev.event_active(h->fresh_ev, 0, 0);
	return bev;
}

static void on_fresh(evutil_socket_t unused, short what, void *arg)
{
	(void)unused;
	(void)what;
	struct exporter_http *h = arg;
	for (size_t i = 0; i < h->nfresh; i++) {
		struct bufferevent *bev = h->fresh[i].bev;
		void *evcon = NULL;
		h->ev.bufferevent_getcb(bev, NULL, NULL, NULL, &evcon); /* evhttp's: its connection */
		int fd = h->ev.bufferevent_getfd(bev);
		/* NULL: evhttp let it go already. Not the connection of this bufferevent: an evhttp that
		   keeps something else there, whose connections the guard could not follow: refused */
		if (evcon && fd >= 0 && h->ev.evhttp_connection_get_bufferevent(evcon) != bev) {
			shutdown(fd, SHUT_RDWR);
			evcon = NULL;
		}
		if (evcon && fd >= 0) {
			/* a response goes in a few writes (the page, this scrape's lines, then the next
			   response's head): without this, Nagle holds the last one until the client's
			   delayed acknowledgement, some 40 ms a scrape */
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
			struct sockaddr_storage ss;
			socklen_t sl = sizeof ss;
			int known = getpeername(fd, (struct sockaddr *)&ss, &sl) == 0;
			struct guard_conn *c = gpumon__guard_started(h->guard, fd, known ? (struct sockaddr *)&ss : NULL, h);
			if (c)
				h->ev.evhttp_connection_set_closecb(evcon, on_closed, c);
			if (h->fresh[i].refuse)
				shutdown(fd, SHUT_RDWR);
		}
		h->ev.bufferevent_decref(bev);
	}
	h->nfresh = 0;
	rearm(h);
}

static struct guard_conn *conn_of(struct exporter_http *h, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = h->ev.evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? h->ev.evhttp_connection_get_bufferevent(evcon) : NULL;
	return bev ? gpumon__guard_find(h->guard, h->ev.bufferevent_getfd(bev)) : NULL;
}

static void on_answered(struct evhttp_request *req, void *arg)
{
	struct exporter_http *h = arg;
	gpumon__guard_completed(conn_of(h, req));
	rearm(h);
}

/* Out of descriptors: accepting pauses a moment instead of spinning on the same error. */
static void on_accept_error(struct evconnlistener *lev, void *arg)
{
	struct exporter_http *h = arg;
	if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM)
		return;
	h->ev.evconnlistener_disable(lev);
	struct timeval tv = {0, ACCEPT_RETRY_MS * 1000};
	h->ev.event_add(h->retry, &tv);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct exporter_http *h = arg;
	h->ev.evconnlistener_enable(h->listener);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct exporter_http *h = arg;
	h->ev.event_base_loopbreak(h->base);
}

/* ---- answers ------------------------------------------------------------------------------------ */

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

static int authorized(struct exporter_http *h, struct evhttp_request *req)
{
	gpumon_exporter *e = h->e;
	if (!e->auth_len)
		return 1;
	const char *a = h->ev.evhttp_find_header(h->ev.evhttp_request_get_input_headers(req), "Authorization");
	unsigned char dec[sizeof e->auth + 4];
	if (!a || strncasecmp(a, "Basic ", 6) != 0)
		return 0;
	long n = b64_decode(a + 6 + strspn(a + 6, " "), dec, sizeof dec);
	return n >= 0 && equal_ct(dec, (size_t)n, e->auth, e->auth_len);
}

/* Sends body (taken) with the headers every response carries; hname/hvalue one more, or NULL. */
static void respond(struct exporter_http *h, struct evhttp_request *req, int status, const char *type,
		 struct evbuffer *body, const char *hname, const char *hvalue)
{
	struct evkeyvalq *out = h->ev.evhttp_request_get_output_headers(req);
	h->ev.evhttp_add_header(out, "Content-Type", type);
	h->ev.evhttp_add_header(out, "Cache-Control", "no-store");
	if (hname)
		h->ev.evhttp_add_header(out, hname, hvalue);
	if (h->no_keepalive)
		h->ev.evhttp_add_header(out, "Connection", "close");
	if (h->ev.evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) { /* what GET would say; no body */
		char len[24];
		snprintf(len, sizeof len, "%zu", h->ev.evbuffer_get_length(body));
		h->ev.evhttp_add_header(out, "Content-Length", len);
	}
	h->ev.evhttp_send_reply(req, status, NULL, body);
	h->ev.evbuffer_free(body);
}

/* A response whose body is a constant string (not copied). */
static void reply(struct exporter_http *h, struct evhttp_request *req, int status, const char *type, const char *body,
		  const char *hname, const char *hvalue)
{
	struct evbuffer *b = h->ev.evbuffer_new();
	if (!b || h->ev.evbuffer_add_reference(b, body, strlen(body), NULL, NULL) != 0) {
		if (b)
			h->ev.evbuffer_free(b);
		b = NULL;
	}
	if (!b) { /* out of memory: the connection is closed without an answer */
		struct evhttp_connection *evcon = h->ev.evhttp_request_get_connection(req);
		struct bufferevent *bev = evcon ? h->ev.evhttp_connection_get_bufferevent(evcon) : NULL;
		if (bev)
			shutdown(h->ev.bufferevent_getfd(bev), SHUT_RDWR);
		return;
	}
	respond(h, req, status, type, b, hname, hvalue);
}

static void snapshot_done(const void *data, size_t len, void *snap)
{
	(void)data;
	(void)len;
	gpumon__snapshot_release(snap);
}

/* The families of this scrape: the exporter's own counters, read now. Returns the length, 0 if
 * they do not fit (they do: 2 KiB holds them with room to spare). */
static size_t scrape_tail(struct exporter_http *h, char *buf, size_t cap)
{
	gpumon_exporter *e = h->e;
	unsigned long long n = atomic_fetch_add(&e->scrapes, 1) + 1;
	double last = (double)atomic_load(&e->last_scrape_ns) / 1e9;
	struct guard_counts gc;
	gpumon__guard_counts(h->guard, &gc);
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

/* /metrics: the latest snapshot, sent from where it lies (no copy; its reference is dropped once
 * it is written), and this scrape's own families after it. */
static void metrics(struct exporter_http *h, struct evhttp_request *req, uint64_t t0)
{
	gpumon_exporter *e = h->e;
	pthread_mutex_lock(&e->snap_lock);
	struct snapshot *snap = e->snap;
	if (snap)
		atomic_fetch_add(&snap->refs, 1);
	pthread_mutex_unlock(&e->snap_lock);
	if (!snap) {
		reply(h, req, 503, TEXT_TYPE, "no snapshot yet\n", NULL, NULL);
		return;
	}
	char tail[2048];
	size_t tl = scrape_tail(h, tail, sizeof tail);
	struct evbuffer *b = h->ev.evbuffer_new();
	if (!b || h->ev.evbuffer_add_reference(b, snap->data, snap->len, snapshot_done, snap) != 0) {
		gpumon__snapshot_release(snap);
		if (b)
			h->ev.evbuffer_free(b);
		reply(h, req, 503, TEXT_TYPE, "out of memory\n", NULL, NULL);
		return;
	}
	if (h->ev.evbuffer_add(b, tail, tl) != 0) {
		h->ev.evbuffer_free(b); /* drops the snapshot's reference */
		reply(h, req, 503, TEXT_TYPE, "out of memory\n", NULL, NULL);
		return;
	}
	respond(h, req, 200, CONTENT_TYPE, b, NULL, NULL);
	atomic_store(&e->last_scrape_ns, gpumon__now_ns() - t0);
}

/* evhttp calls this once a request (head, and the small body it may have) is in; malformed or
 * oversized requests it answers itself (400, 413) and closes. */
static void on_request(struct evhttp_request *req, void *arg)
{
	struct exporter_http *h = arg;
	uint64_t t0 = gpumon__now_ns();
	gpumon__guard_request(conn_of(h, req));
	h->ev.evhttp_request_set_on_complete_cb(req, on_answered, h);
	enum evhttp_cmd_type cmd = h->ev.evhttp_request_get_command(req);
	const struct evhttp_uri *uri = h->ev.evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? h->ev.evhttp_uri_get_path(uri) : NULL;
	if (cmd != EVHTTP_REQ_GET && cmd != EVHTTP_REQ_HEAD)
		reply(h, req, 405, TEXT_TYPE, "only GET and HEAD\n", "Allow", "GET, HEAD");
	else if (!authorized(h, req))
		reply(h, req, 401, TEXT_TYPE, "authentication required\n", "WWW-Authenticate",
		      "Basic realm=\"gpumon\", charset=\"UTF-8\"");
	else if (path && !strcmp(path, "/metrics"))
		metrics(h, req, t0);
	else if (path && !strcmp(path, "/healthz")) {
		gpumon_exporter *e = h->e;
		pthread_mutex_lock(&e->snap_lock);
		uint64_t t = e->snap ? e->snap->t_ns : 0;
		pthread_mutex_unlock(&e->snap_lock);
		if (t && t0 - t < HEALTHY_NS)
			reply(h, req, 200, TEXT_TYPE, "ok\n", NULL, NULL);
		else
			reply(h, req, 503, TEXT_TYPE, "stale: the collector has not rendered for 5 s\n", NULL, NULL);
	} else if (path && !strcmp(path, "/"))
		reply(h, req, 200, "text/html; charset=utf-8", INDEX_HTML, NULL, NULL);
	else
		reply(h, req, 404, TEXT_TYPE, "not found: try /metrics\n", NULL, NULL);
	rearm(h);
}

/* ---- the server's thread and life cycle --------------------------------------------------------- */

static void *serve_main(void *arg)
{
	struct exporter_http *h = arg;
	pthread_setname_np(pthread_self(), "gpumon-http");
	/* a client gone mid-response is an EPIPE for libevent, not a SIGPIPE for the program */
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	h->ev.event_base_dispatch(h->base);
	return NULL;
}

static int start_server(struct exporter_http *h, const gpumon_exporter_config *c, int fd)
{
	struct ev_api *ev = &h->ev;
	unsigned timeout = c->timeout_s ? c->timeout_s : 10;
	unsigned keepalive = c->no_keepalive ? timeout : c->keepalive_s ? c->keepalive_s : DEFAULT_KEEPALIVE_S;
	struct guard_limits gl = {
		.max_connections = c->max_connections ? c->max_connections : 1024,
		.per_address = c->max_connections_per_ip ? c->max_connections_per_ip : DEFAULT_PER_ADDRESS,
		.head_ms = timeout * 1000u,
		.keepalive_ms = keepalive * 1000u,
	};
	h->no_keepalive = c->no_keepalive;
	if (gpumon__guard_create(&gl, &h->guard) != GPUMON_OK) {
		close(fd);
		return gpumon__exporter_err(h->e, GPUMON_E_NOMEM, "out of memory for the exporter's connection guard");
	}
	h->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (h->wake_fd < 0) {
		int err = errno;
		close(fd);
		return gpumon__exporter_err(h->e, GPUMON_E_IO, "cannot make the HTTP server's wake-up descriptor: %s",
					    strerror(err));
	}
	int flags = fcntl(fd, F_GETFL);
	if (!(h->base = ev->event_base_new()) ||
	    !(h->wake = ev->event_new(h->base, h->wake_fd, EV_READ, on_wake, h)) ||
	    !(h->sweep = ev->event_new(h->base, -1, 0, on_sweep, h)) ||
	    !(h->fresh_ev = ev->event_new(h->base, -1, 0, on_fresh, h)) ||
	    !(h->retry = ev->event_new(h->base, -1, 0, on_retry, h)) || !(h->http = ev->evhttp_new(h->base)) ||
	    flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0 ||
	    !(h->listener = ev->evconnlistener_new(h->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0,
						   fd))) {
		close(fd);
		return gpumon__exporter_err(h->e, GPUMON_E_NOMEM, "cannot start the HTTP server on %s: out of memory",
					    h->e->address);
	}
	/* the listener now owns fd, and the server the listener */
	if (!ev->evhttp_bind_listener(h->http, h->listener)) {
		ev->evconnlistener_free(h->listener);
		h->listener = NULL;
		return gpumon__exporter_err(h->e, GPUMON_E_NOMEM, "cannot start the HTTP server on %s: out of memory",
					    h->e->address);
	}
	ev->evconnlistener_set_error_cb(h->listener, on_accept_error);
	ev->evhttp_set_gencb(h->http, on_request, h);
	ev->evhttp_set_bevcb(h->http, new_connection, h);
	/* every method reaches on_request, which says 405 to all but GET and HEAD */
	ev->evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
							EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
							EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	ev->evhttp_set_max_headers_size(h->http, MAX_HEAD);
	ev->evhttp_set_max_body_size(h->http, MAX_BODY);
	/* evhttp's idle timeout, which each byte resets, is only a backstop: the guard's deadlines,
	   which bytes do not extend, come first */
	ev->evhttp_set_timeout(h->http, (int)(timeout > keepalive ? timeout : keepalive));
	if (ev->event_add(h->wake, NULL) != 0)
		return gpumon__exporter_err(h->e, GPUMON_E_IO, "cannot start the HTTP server on %s", h->e->address);
	if (pthread_create(&h->thread, NULL, serve_main, h) != 0)
		return gpumon__exporter_err(h->e, GPUMON_E_NOMEM, "cannot start the HTTP server's thread");
	h->thread_started = 1;
	return GPUMON_OK;
}

int gpumon__exporter_http_load(gpumon_exporter *e)
{
	struct exporter_http *h = calloc(1, sizeof *h);
	if (!h)
		return gpumon__exporter_err(e, GPUMON_E_NOMEM, "out of memory for the exporter's HTTP server");
	h->e = e;
	h->wake_fd = -1;
	e->http = h;
	int st = load_event(h);
	if (st == GPUMON_OK && e->tls_cert)
		st = start_tls(h);
	return st;
}

int gpumon__exporter_http_start(gpumon_exporter *e, const gpumon_exporter_config *c, int fd)
{
	if (!e->http) {
		close(fd);
		return gpumon__exporter_err(e, GPUMON_E_INVAL, "the HTTP server's library was not loaded");
	}
	return start_server(e->http, c, fd);
}

void gpumon__exporter_http_stop(gpumon_exporter *e)
{
	struct exporter_http *h = e->http;
	if (!h)
		return;
	e->http = NULL;
	if (h->thread_started) {
		uint64_t one = 1;
		(void)!write(h->wake_fd, &one, sizeof one);
		pthread_join(h->thread, NULL);
	}
	struct ev_api *ev = &h->ev;
	/* evhttp closes the connections it holds (each told to the guard) and the listener; what
	   TLS may write to a client gone meanwhile is an EPIPE here too, not a SIGPIPE for the
	   program (the one that may come is taken before the mask is put back) */
	sigset_t pipe, old;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	if (h->http)
		ev->evhttp_free(h->http);
	struct timespec none = {0, 0};
	while (!sigismember(&old, SIGPIPE) && sigtimedwait(&pipe, NULL, &none) == SIGPIPE)
		;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (size_t i = 0; i < h->nfresh; i++)
		ev->bufferevent_decref(h->fresh[i].bev);
	free(h->fresh);
	struct event *evs[] = {h->wake, h->sweep, h->fresh_ev, h->retry};
	for (size_t i = 0; i < sizeof evs / sizeof evs[0]; i++)
		if (evs[i])
			ev->event_free(evs[i]);
	if (h->base)
		ev->event_base_free(h->base);
	if (h->wake_fd >= 0)
		close(h->wake_fd);
	gpumon__guard_destroy(h->guard);
	if (h->ctx)
		h->tls.SSL_CTX_free(h->ctx);
	if (h->lib)
		dlclose(h->lib);
	free(h);
}
