/* SPDX-License-Identifier: MIT */
/* exporter_guard.c — the exporter's connection guard: a record for each connection the HTTP server
 * holds, in the phase it is in (waiting for its first request head, being answered, kept alive
 * and waiting for the next head) with that phase's deadline; the connections of each address
 * counted; room kept in a full table by closing the connection that has waited longest for a
 * request. Closing is a shutdown() of the socket: the server then sees the end of the stream and
 * frees the connection, as for any client that left. Everything runs in the server's thread. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exporter_guard.h"
#include "internal.h"

enum phase { NEW, BUSY, KEPT };

struct guard_conn {
	struct guard_conn *prev, *next;   /* in waiting or busy, oldest phase first */
	struct guard_conn *hprev, *hnext; /* in its address's bucket */
	struct guard_conn *fnext;         /* in its socket's bucket */
	struct guard *g;
	void *owner;
	uint64_t since_ns; /* when the phase began */
	int fd;
	enum phase phase;
	int closing; /* shut down by the guard: out of the lists, waits for the server's close */
	unsigned hash;
	unsigned char addr[17]; /* the address (an IPv6 one's /64) and its family: what the cap counts */
};

struct list {
	struct guard_conn *head, *tail;
};

struct guard {
	struct guard_limits l;
	struct list waiting; /* NEW and KEPT: these may be closed to make room */
	struct list busy;    /* BUSY: a request being answered, never closed to make room */
	struct guard_conn **buckets; /* by address */
	struct guard_conn **by_fd;   /* by socket */
	unsigned mask;	  /* number of buckets - 1, a power of two less one */
	unsigned held;	  /* connections the server holds, closing ones included */
	unsigned closing; /* of which shut down by the guard (or refused), not yet closed */
	unsigned long long closed[GUARD_NREASONS];
};

/* ---- lists and buckets ----------------------------------------------------------- */

static void list_push(struct list *l, struct guard_conn *c)
{
	c->next = NULL;
	c->prev = l->tail;
	if (l->tail)
		l->tail->next = c;
	else
		l->head = c;
	l->tail = c;
}

static void list_unlink(struct list *l, struct guard_conn *c)
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

static struct list *list_of(struct guard *g, const struct guard_conn *c)
{
	return c->phase == BUSY ? &g->busy : &g->waiting;
}

static void bucket_push(struct guard *g, struct guard_conn *c)
{
	struct guard_conn **b = &g->buckets[c->hash & g->mask];
	c->hprev = NULL;
	c->hnext = *b;
	if (*b)
		(*b)->hprev = c;
	*b = c;
}

static void bucket_unlink(struct guard *g, struct guard_conn *c)
{
	if (c->hprev)
		c->hprev->hnext = c->hnext;
	else
		g->buckets[c->hash & g->mask] = c->hnext;
	if (c->hnext)
		c->hnext->hprev = c->hprev;
	c->hprev = c->hnext = NULL;
}

static void fd_push(struct guard *g, struct guard_conn *c)
{
	struct guard_conn **b = &g->by_fd[(unsigned)c->fd & g->mask];
	c->fnext = *b;
	*b = c;
}

static void fd_unlink(struct guard *g, struct guard_conn *c)
{
	struct guard_conn **p = &g->by_fd[(unsigned)c->fd & g->mask];
	while (*p && *p != c)
		p = &(*p)->fnext;
	if (*p)
		*p = c->fnext;
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

/* ---- the rules ------------------------------------------------------------------- */

static uint64_t deadline_ns(const struct guard *g, const struct guard_conn *c)
{
	unsigned ms = c->phase == KEPT ? g->l.keepalive_ms : g->l.head_ms;
	return c->since_ns + (uint64_t)ms * 1000000u;
}

/* Shuts c down for the server to close; it leaves the lists and its address's count at once.
 * reason < 0: not a loss (a kept-alive connection's time is up). */
static void close_conn(struct guard *g, struct guard_conn *c, int reason)
{
	if (c->closing)
		return;
	list_unlink(list_of(g, c), c);
	bucket_unlink(g, c);
	c->closing = 1;
	g->closing++;
	shutdown(c->fd, SHUT_RDWR);
	if (reason >= 0)
		g->closed[reason]++;
}

static void set_phase(struct guard *g, struct guard_conn *c, enum phase p)
{
	if (c->closing)
		return;
	list_unlink(list_of(g, c), c);
	c->phase = p;
	c->since_ns = gpumon__now_ns();
	list_push(list_of(g, c), c);
}

/* One slot of the table is kept free (or being freed), so that Prometheus's next scrape finds room,
 * by closing the connection that has waited longest for a request head, never one being answered,
 * nor keep (which is making the room). */
static void make_room(struct guard *g, const struct guard_conn *keep)
{
	while (g->held - g->closing >= g->l.max_connections) {
		struct guard_conn *c = g->waiting.head;
		if (c == keep && c)
			c = c->next;
		if (!c)
			return; /* every connection is being answered (a newcomer over the table is refused) */
		close_conn(g, c, GUARD_FULL);
	}
}

/* How many connections c's address holds, c included, and which of the others, not being
 * answered, has waited longest. */
static unsigned address_count(struct guard *g, const struct guard_conn *n, struct guard_conn **oldest)
{
	unsigned count = 0;
	*oldest = NULL;
	for (struct guard_conn *c = g->buckets[n->hash & g->mask]; c; c = c->hnext) {
		if (memcmp(c->addr, n->addr, sizeof c->addr) != 0)
			continue;
		count++;
		if (c != n && c->phase != BUSY && (!*oldest || c->since_ns < (*oldest)->since_ns))
			*oldest = c;
	}
	return count;
}

uint64_t gpumon__guard_sweep(struct guard *g)
{
	uint64_t now = gpumon__now_ns(), next_ns = 0;
	struct guard_conn *next;
	for (struct guard_conn *c = g->waiting.head; c; c = next) {
		next = c->next;
		uint64_t d = deadline_ns(g, c);
		if (d <= now)
			close_conn(g, c, c->phase == NEW ? GUARD_TIMEOUT : -1);
		else if (!next_ns || d < next_ns)
			next_ns = d;
	}
	/* busy is in order of deadline: one offset for all */
	for (struct guard_conn *c = g->busy.head; c; c = next) {
		next = c->next;
		uint64_t d = deadline_ns(g, c);
		if (d > now) {
			if (!next_ns || d < next_ns)
				next_ns = d;
			break;
		}
		close_conn(g, c, GUARD_TIMEOUT);
	}
	make_room(g, NULL);
	return next_ns;
}

/* ---- the server's calls ------------------------------------------------------------------------- */

struct guard_conn *gpumon__guard_started(struct guard *g, int fd, const struct sockaddr *peer, void *owner)
{
	struct guard_conn *c = calloc(1, sizeof *c);
	if (!c) {
		/* a connection the guard cannot follow cannot be held to its deadlines: refused */
		shutdown(fd, SHUT_RDWR);
		return NULL;
	}
	g->held++;
	c->g = g;
	c->owner = owner;
	c->fd = fd;
	c->phase = NEW;
	c->since_ns = gpumon__now_ns();
	address_key(peer, c->addr);
	c->hash = key_hash(c->addr);
	list_push(&g->waiting, c);
	bucket_push(g, c);
	fd_push(g, c);
	/* over its address's cap: that address's longest-waiting connection goes, so that a client
	   sharing an address with whoever holds its slots still gets in; the newcomer is refused only
	   when all of them are being answered */
	struct guard_conn *victim;
	if (address_count(g, c, &victim) > g->l.per_address)
		close_conn(g, victim ? victim : c, GUARD_PER_ADDRESS);
	make_room(g, c);
	/* every other connection is being answered and the table is full: the newcomer is refused */
	if (!c->closing && g->held - g->closing > g->l.max_connections)
		close_conn(g, c, GUARD_FULL);
	return c;
}

struct guard_conn *gpumon__guard_find(const struct guard *g, int fd)
{
	struct guard_conn *c = fd >= 0 ? g->by_fd[(unsigned)fd & g->mask] : NULL;
	while (c && c->fd != fd)
		c = c->fnext;
	return c;
}

void *gpumon__guard_conn_owner(const struct guard_conn *c)
{
	return c->owner;
}

void gpumon__guard_closed(struct guard_conn *c)
{
	struct guard *g = c->g;
	g->held--;
	if (c->closing) {
		g->closing--;
	} else {
		list_unlink(list_of(g, c), c);
		bucket_unlink(g, c);
	}
	fd_unlink(g, c);
	free(c);
}

void gpumon__guard_request(struct guard_conn *c)
{
	if (c)
		set_phase(c->g, c, BUSY);
}

void gpumon__guard_completed(struct guard_conn *c)
{
	if (!c)
		return;
	set_phase(c->g, c, KEPT);
	make_room(c->g, NULL);
}

/* ---- life cycle ------------------------------------------------------------------------------------ */

int gpumon__guard_create(const struct guard_limits *l, struct guard **out)
{
	*out = NULL;
	struct guard *g = calloc(1, sizeof *g);
	if (!g)
		return GPUMON_E_NOMEM;
	g->l = *l;
	unsigned n = 64;
	while (n < l->max_connections && n < (1u << 20))
		n <<= 1;
	g->mask = n - 1;
	g->buckets = calloc(n, sizeof *g->buckets);
	g->by_fd = calloc(n, sizeof *g->by_fd);
	if (!g->buckets || !g->by_fd) {
		free(g->buckets);
		free(g->by_fd);
		free(g);
		return GPUMON_E_NOMEM;
	}
	*out = g;
	return GPUMON_OK;
}

void gpumon__guard_counts(const struct guard *g, struct guard_counts *out)
{
	out->open = g->held - g->closing;
	for (int i = 0; i < GUARD_NREASONS; i++)
		out->closed[i] = g->closed[i];
}

void gpumon__guard_destroy(struct guard *g)
{
	if (!g)
		return;
	/* the server has closed every connection it told of: anything left was never closed */
	struct guard_conn *next;
	for (struct list *l = &g->waiting; l; l = l == &g->waiting ? &g->busy : NULL)
		for (struct guard_conn *c = l->head; c; c = next) {
			next = c->next;
			free(c);
		}
	free(g->buckets);
	free(g->by_fd);
	free(g);
}
