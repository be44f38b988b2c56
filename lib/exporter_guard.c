/* SPDX-License-Identifier: MIT */
/* exporter_guard.c — the exporter's connection guard: a record for each connection libmicrohttpd
 * holds, in the phase it is in (waiting for its first request head, being answered, kept alive
 * and waiting for the next head) with that phase's deadline, swept by a thread of its own; the
 * connections of each address counted; room kept in a full table by closing the connection that
 * has waited longest for a request. Closing is a shutdown() of the socket: libmicrohttpd then sees
 * the end of the stream and frees the connection in its own thread, as for any client that left. */
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "exporter_guard.h"
#include "internal.h"

#define SWEEP_MS 100

enum phase { NEW, BUSY, KEPT };

struct conn {
	struct conn *prev, *next;   /* in waiting or busy, oldest phase first */
	struct conn *hprev, *hnext; /* in its address's bucket */
	struct MHD_Connection *mc;
	uint64_t since_ns; /* when the phase began */
	int fd;
	enum phase phase;
	int closing; /* shut down by the guard: out of the lists, waits for libmicrohttpd */
	unsigned hash;
	unsigned char addr[17]; /* the address (an IPv6 one's /64) and its family: what the cap counts */
};

struct list {
	struct conn *head, *tail;
};

struct guard {
	struct guard_limits l;
	mhd_conn_info_fn *conn_info;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	int thread_started, stopping;
	struct list waiting; /* NEW and KEPT: these may be closed to make room */
	struct list busy;    /* BUSY: a request being answered, never closed to make room */
	struct conn **buckets;
	unsigned mask;	  /* number of buckets - 1, a power of two less one */
	unsigned held;	  /* connections libmicrohttpd holds, closing ones included */
	unsigned closing; /* of which shut down by the guard (or refused), not yet freed */
	atomic_ullong closed[GUARD_NREASONS];
	int serving;
	char start_msg[200];
};

/* ---- lists and buckets (under the lock) ----------------------------------------------------------- */

static void list_push(struct list *l, struct conn *c)
{
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
}

static void list_unlink(struct list *l, struct conn *c)
{
	if (c->prev)
		c->prev->next = c->next;
	else
		l->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		l->tail = c->prev;
	c->prev = c->next = NULL;
}

static struct list *list_of(struct guard *g, const struct conn *c)
{
	return c->phase == BUSY ? &g->busy : &g->waiting;
}

static void bucket_push(struct guard *g, struct conn *c)
{
	struct conn **b = &g->buckets[c->hash & g->mask];
	c->hprev = NULL;
	c->hnext = *b;
	if (*b)
		(*b)->hprev = c;
	*b = c;
}

static void bucket_unlink(struct guard *g, struct conn *c)
{
	if (c->hprev)
		c->hprev->hnext = c->hnext;
	else
		g->buckets[c->hash & g->mask] = c->hnext;
	if (c->hnext)
		c->hnext->hprev = c->hprev;
	c->hprev = c->hnext = NULL;
}

/* A whole IPv6 /64 usually belongs to one host: counted as one address. */
static void address_key(const struct sockaddr *sa, unsigned char key[17])
{
	memset(key, 0, 17);
	if (sa && sa->sa_family == AF_INET) {
		memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		key[16] = 4;
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			memcpy(key, a->s6_addr + 12, 4);
			key[16] = 4;
		} else {
			memcpy(key, a->s6_addr, 8);
			key[16] = 6;
		}
	}
}

static unsigned key_hash(const unsigned char key[17])
{
	unsigned h = 2166136261u; /* FNV-1a */
	for (int i = 0; i < 17; i++)
		h = (h ^ key[i]) * 16777619u;
	return h;
}

/* ---- the rules (under the lock) ------------------------------------------------------------------- */

static uint64_t deadline_ns(const struct guard *g, const struct conn *c)
{
	unsigned ms = c->phase == KEPT ? g->l.keepalive_ms : g->l.head_ms;
	return c->since_ns + (uint64_t)ms * 1000000u;
}

/* Shuts c down for libmicrohttpd to free; it leaves the lists and its address's count at once.
 * reason < 0: not a loss (a kept-alive connection's time is up). */
static void close_conn(struct guard *g, struct conn *c, int reason)
{
	if (c->closing)
		return;
	list_unlink(list_of(g, c), c);
	bucket_unlink(g, c);
	c->closing = 1;
	g->closing++;
	shutdown(c->fd, SHUT_RDWR);
	if (reason >= 0)
		atomic_fetch_add(&g->closed[reason], 1);
}

static void set_phase(struct guard *g, struct conn *c, enum phase p)
{
	if (c->closing)
		return;
	list_unlink(list_of(g, c), c);
	c->phase = p;
	c->since_ns = gpumon__now_ns();
	list_push(list_of(g, c), c);
}

/* A full table stops libmicrohttpd accepting, and then nothing new would arrive to make room: one
 * slot is kept free (or being freed) by closing the connection that has waited longest for a
 * request head, never one being answered, nor keep (which is making the room). */
static void make_room(struct guard *g, const struct conn *keep)
{
	while (g->held - g->closing >= g->l.max_connections) {
		struct conn *c = g->waiting.head;
		if (c == keep && c)
			c = c->next;
		if (!c)
			return; /* every connection is being answered: new ones wait in the kernel's queue */
		close_conn(g, c, GUARD_FULL);
	}
}

/* How many connections c's address holds, c included, and which of the others, not being
 * answered, has waited longest. */
static unsigned address_count(struct guard *g, const struct conn *n, struct conn **oldest)
{
	unsigned count = 0;
	*oldest = NULL;
	for (struct conn *c = g->buckets[n->hash & g->mask]; c; c = c->hnext) {
		if (memcmp(c->addr, n->addr, sizeof c->addr) != 0)
			continue;
		count++;
		if (c != n && c->phase != BUSY && (!*oldest || c->since_ns < (*oldest)->since_ns))
			*oldest = c;
	}
	return count;
}

static void sweep(struct guard *g)
{
	uint64_t now = gpumon__now_ns();
	struct conn *next;
	for (struct conn *c = g->waiting.head; c; c = next) {
		next = c->next;
		if (deadline_ns(g, c) <= now)
			close_conn(g, c, c->phase == NEW ? GUARD_TIMEOUT : -1);
	}
	/* busy is in order of deadline: one offset for all */
	for (struct conn *c = g->busy.head; c && deadline_ns(g, c) <= now; c = next) {
		next = c->next;
		close_conn(g, c, GUARD_TIMEOUT);
	}
	make_room(g, NULL);
}

static void *sweeper(void *arg)
{
	struct guard *g = arg;
	pthread_mutex_lock(&g->lock);
	while (!g->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += SWEEP_MS * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&g->wake, &g->lock, &ts);
		if (!g->stopping)
			sweep(g);
	}
	pthread_mutex_unlock(&g->lock);
	return NULL;
}

/* ---- libmicrohttpd's callbacks (its thread) ------------------------------------------------------- */

static struct conn *record(struct guard *g, struct MHD_Connection *mc)
{
	const union MHD_ConnectionInfo *i = g->conn_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return i ? i->socket_context : NULL;
}

static void started(struct guard *g, struct MHD_Connection *mc, void **ctx)
{
	const union MHD_ConnectionInfo *fd = g->conn_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ad = g->conn_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	struct conn *c = fd ? calloc(1, sizeof *c) : NULL;
	*ctx = c;
	pthread_mutex_lock(&g->lock);
	g->held++;
	if (!c) {
		/* a connection the guard cannot follow cannot be held to its deadlines: refused */
		g->closing++;
		if (fd)
			shutdown(fd->connect_fd, SHUT_RDWR);
		pthread_mutex_unlock(&g->lock);
		return;
	}
	c->mc = mc;
	c->fd = fd->connect_fd;
	c->phase = NEW;
	c->since_ns = gpumon__now_ns();
	address_key(ad ? ad->client_addr : NULL, c->addr);
	c->hash = key_hash(c->addr);
	list_push(&g->waiting, c);
	bucket_push(g, c);
	/* over its address's cap: that address's longest-waiting connection goes, so that a client
	   sharing an address with whoever holds its slots still gets in; the newcomer is refused only
	   when all of them are being answered */
	struct conn *victim;
	if (address_count(g, c, &victim) > g->l.per_address)
		close_conn(g, victim ? victim : c, GUARD_PER_ADDRESS);
	make_room(g, c);
	pthread_mutex_unlock(&g->lock);
}

static void closed(struct guard *g, void **ctx)
{
	struct conn *c = *ctx;
	pthread_mutex_lock(&g->lock);
	g->held--;
	if (!c || c->closing) {
		g->closing--;
	} else {
		list_unlink(list_of(g, c), c);
		bucket_unlink(g, c);
	}
	pthread_mutex_unlock(&g->lock);
	free(c);
	*ctx = NULL;
}

void gpumon__guard_notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
				     enum MHD_ConnectionNotificationCode code)
{
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		started(cls, c, socket_context);
	else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
		closed(cls, socket_context);
}

void gpumon__guard_request(struct guard *g, struct MHD_Connection *mc)
{
	struct conn *c = record(g, mc);
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	set_phase(g, c, BUSY);
	pthread_mutex_unlock(&g->lock);
}

void gpumon__guard_completed(void *cls, struct MHD_Connection *mc, void **req_cls,
			     enum MHD_RequestTerminationCode toe)
{
	struct guard *g = cls;
	(void)req_cls;
	(void)toe;
	struct conn *c = record(g, mc);
	if (!c)
		return;
	pthread_mutex_lock(&g->lock);
	set_phase(g, c, KEPT);
	make_room(g, NULL);
	pthread_mutex_unlock(&g->lock);
}

/* libmicrohttpd 0.9.75 refuses some request heads itself once they are in (a Content-Length that is
 * not a number, or too large for one): it queues its 400 or 413 and then writes the status line and
 * headers a second time, its state machine going on as if the head were fine. Nothing of ours runs
 * between the two but its error log, when that connection is the only one whose head is in (its
 * size known), with no response queued (HTTP_STATUS, which every libmicrohttpd we load has) and not
 * handed to the access handler (not BUSY): a state no connection rests in. It is answered 400 here,
 * once, and shut down, so that what libmicrohttpd writes after goes nowhere. */
static void refuse_bad_heads(struct guard *g)
{
	static const char body[] = "bad request: the request head is malformed\n";
	struct conn *next;
	for (struct conn *c = g->waiting.head; c; c = next) {
		next = c->next;
		if (!g->conn_info(c->mc, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE) ||
		    g->conn_info(c->mc, MHD_CONNECTION_INFO_HTTP_STATUS))
			continue;
		char msg[256];
		int n = snprintf(msg, sizeof msg,
				 "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; "
				 "charset=utf-8\r\n"
				 "Content-Length: %zu\r\n\r\n%s",
				 sizeof body - 1, body);
		if (!g->l.tls && n > 0 && (size_t)n < sizeof msg) /* under TLS, only a close can be said */
			(void)!send(c->fd, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		close_conn(g, c, -1);
	}
}

/* The library never prints: messages before the daemon serves are kept (why it did not start),
 * later ones only mark the moment of a refused head. */
void gpumon__guard_log(void *cls, const char *fmt, va_list ap)
{
	struct guard *g = cls;
	pthread_mutex_lock(&g->lock);
	if (!g->serving) {
		if (!g->start_msg[0]) {
			vsnprintf(g->start_msg, sizeof g->start_msg, fmt, ap);
			g->start_msg[strcspn(g->start_msg, "\r\n")] = 0;
		}
	} else {
		refuse_bad_heads(g);
	}
	pthread_mutex_unlock(&g->lock);
}

/* ---- life cycle ------------------------------------------------------------------------------------ */

int gpumon__guard_create(const struct guard_limits *l, mhd_conn_info_fn *conn_info, struct guard **out)
{
	*out = NULL;
	struct guard *g = calloc(1, sizeof *g);
	if (!g)
		return GPUMON_E_NOMEM;
	g->l = *l;
	g->conn_info = conn_info;
	unsigned n = 64;
	while (n < l->max_connections && n < (1u << 20))
		n <<= 1;
	g->mask = n - 1;
	g->buckets = calloc(n, sizeof *g->buckets);
	pthread_condattr_t ca;
	int ok = g->buckets && pthread_condattr_init(&ca) == 0;
	if (ok) {
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		ok = pthread_cond_init(&g->wake, &ca) == 0;
		pthread_condattr_destroy(&ca);
	}
	if (!ok) {
		free(g->buckets);
		free(g);
		return GPUMON_E_NOMEM;
	}
	pthread_mutex_init(&g->lock, NULL);
	if (pthread_create(&g->thread, NULL, sweeper, g) != 0) {
		gpumon__guard_destroy(g);
		return GPUMON_E_NOMEM;
	}
	g->thread_started = 1;
	*out = g;
	return GPUMON_OK;
}

void gpumon__guard_serving(struct guard *g)
{
	pthread_mutex_lock(&g->lock);
	g->serving = 1;
	pthread_mutex_unlock(&g->lock);
}

const char *gpumon__guard_start_message(const struct guard *g)
{
	return g ? g->start_msg : "";
}

void gpumon__guard_counts(struct guard *g, struct guard_counts *out)
{
	pthread_mutex_lock(&g->lock);
	out->open = g->held - g->closing;
	pthread_mutex_unlock(&g->lock);
	for (int i = 0; i < GUARD_NREASONS; i++)
		out->closed[i] = atomic_load(&g->closed[i]);
}

void gpumon__guard_stop(struct guard *g)
{
	if (!g || !g->thread_started)
		return;
	pthread_mutex_lock(&g->lock);
	g->stopping = 1;
	pthread_cond_signal(&g->wake);
	pthread_mutex_unlock(&g->lock);
	pthread_join(g->thread, NULL);
	g->thread_started = 0;
}

void gpumon__guard_destroy(struct guard *g)
{
	if (!g)
		return;
	gpumon__guard_stop(g);
	/* the daemon has stopped and told of every close: anything left was never started */
	struct conn *next;
	for (struct list *l = &g->waiting; l; l = l == &g->waiting ? &g->busy : NULL)
		for (struct conn *c = l->head; c; c = next) {
			next = c->next;
			free(c);
		}
	pthread_cond_destroy(&g->wake);
	pthread_mutex_destroy(&g->lock);
	free(g->buckets);
	free(g);
}
