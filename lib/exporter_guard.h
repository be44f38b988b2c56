/* SPDX-License-Identifier: MIT */
/* exporter_guard.h — the exporter's connection guard (exporter_guard.c): it follows every
 * connection the HTTP server holds, gives each phase of a request a deadline that bytes do not
 * extend, caps the connections of one address and keeps room in a full table, so that clients
 * that hold connections without finishing requests cannot lock Prometheus out. It knows sockets,
 * not the HTTP library: exporter_http.c tells it of each connection's phases and asks it to sweep
 * when the next deadline comes. Every call is made from the HTTP server's thread (counts included).
 * Internal to libgpumon; only exporter_http.c and exporter_guard.c include it. */
#ifndef GPUMON_EXPORTER_GUARD_H
#define GPUMON_EXPORTER_GUARD_H

#include <stdint.h>
#include <sys/socket.h>

struct guard_limits {
	unsigned max_connections; /* the table: connections held at once */
	unsigned per_address;	  /* connections from one address (one /64 for IPv6) */
	unsigned head_ms;	  /* a request head must arrive whole within this, and a response be taken */
	unsigned keepalive_ms; /* a kept-alive connection's next request head, from the previous response */
};

/* Why connections were closed by the guard, counted for the page. */
enum guard_reason { GUARD_TIMEOUT, GUARD_FULL, GUARD_PER_ADDRESS, GUARD_NREASONS };

struct guard_counts {
	unsigned long long closed[GUARD_NREASONS];
	unsigned open; /* connections held now */
};

struct guard;
struct guard_conn;

/* A guard; GPUMON_OK or GPUMON_E_NOMEM (*out NULL). */
int gpumon__guard_create(const struct guard_limits *l, struct guard **out);
/* Frees the guard and the records of connections never closed. NULL is a no-op. */
void gpumon__guard_destroy(struct guard *g);

/* A connection was accepted on socket fd from peer (NULL: not known); owner is the server's, for
 * gpumon__guard_conn_owner. Returns its record, or NULL when the guard cannot follow it (out of
 * memory): the socket is then shut down and not counted. Its address's cap and the table's room
 * are applied at once: the socket of this or another connection may be shut down. */
struct guard_conn *gpumon__guard_started(struct guard *g, int fd, const struct sockaddr *peer, void *owner);
/* The record of the connection on socket fd, NULL if none. */
struct guard_conn *gpumon__guard_find(const struct guard *g, int fd);
void *gpumon__guard_conn_owner(const struct guard_conn *c);
/* A request's head arrived whole: its response phase begins. NULL is a no-op. */
void gpumon__guard_request(struct guard_conn *c);
/* Its response was written whole: the connection waits for its next request head. NULL: no-op. */
void gpumon__guard_completed(struct guard_conn *c);
/* The server is about to close the connection's socket: c is freed. */
void gpumon__guard_closed(struct guard_conn *c);

/* Shuts down the sockets past their deadlines (the server then sees the end of their streams and
 * closes them as for any client that left). Returns the time of the next deadline
 * (gpumon__now_ns's clock), 0 when no connection has one. */
uint64_t gpumon__guard_sweep(struct guard *g);
void gpumon__guard_counts(const struct guard *g, struct guard_counts *out);

#endif
