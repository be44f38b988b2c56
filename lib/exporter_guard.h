/* SPDX-License-Identifier: MIT */
/* exporter_guard.h — the exporter's connection guard (exporter_guard.c): it follows every
 * connection libmicrohttpd holds, gives each phase of a request a deadline that bytes do not
 * extend, caps the connections of one address and keeps room in a full table, so that clients
 * that hold connections without finishing requests cannot lock Prometheus out. Internal to
 * libgpumon; only exporter.c and exporter_guard.c include it. */
#ifndef GPUMON_EXPORTER_GUARD_H
#define GPUMON_EXPORTER_GUARD_H

#include <microhttpd.h>
#include <stdarg.h>

typedef __typeof__(MHD_get_connection_info) mhd_conn_info_fn;

struct guard_limits {
	unsigned max_connections; /* libmicrohttpd's table */
	unsigned per_address;	  /* connections from one address (one /64 for IPv6) */
	unsigned head_ms;	  /* a request head must arrive whole within this, and a response be taken */
	unsigned keepalive_ms; /* a kept-alive connection's next request head, from the previous response */
	int tls;	       /* the sockets carry TLS: nothing can be written to them outside it */
};

/* Why connections were closed by the guard, counted for the page. */
enum guard_reason { GUARD_TIMEOUT, GUARD_FULL, GUARD_PER_ADDRESS, GUARD_NREASONS };

struct guard_counts {
	unsigned long long closed[GUARD_NREASONS];
	unsigned open; /* connections held now */
};

struct guard;

/* Starts a guard and its sweeping thread; GPUMON_OK or GPUMON_E_NOMEM (*out NULL). conn_info is
 * libmicrohttpd's MHD_get_connection_info, as loaded. */
int gpumon__guard_create(const struct guard_limits *l, mhd_conn_info_fn *conn_info, struct guard **out);
/* Stops the sweeping thread (call before stopping the daemon). NULL is a no-op. */
void gpumon__guard_stop(struct guard *g);
/* Frees the guard, after the daemon has stopped. NULL is a no-op. */
void gpumon__guard_destroy(struct guard *g);
/* The first message libmicrohttpd logged before serving, "" if none (why a daemon did not start). */
const char *gpumon__guard_start_message(const struct guard *g);
/* Marks the daemon started: from now on log messages are not kept. */
void gpumon__guard_serving(struct guard *g);
/* A request's head arrived whole (the access handler's first call): its response phase begins. */
void gpumon__guard_request(struct guard *g, struct MHD_Connection *c);
void gpumon__guard_counts(struct guard *g, struct guard_counts *out);

/* libmicrohttpd's callbacks, cls = the guard: MHD_OPTION_NOTIFY_CONNECTION,
 * MHD_OPTION_NOTIFY_COMPLETED and MHD_OPTION_EXTERNAL_LOGGER. */
void gpumon__guard_notify_connection(void *cls, struct MHD_Connection *c, void **socket_context,
				     enum MHD_ConnectionNotificationCode code);
void gpumon__guard_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			     enum MHD_RequestTerminationCode toe);
void gpumon__guard_log(void *cls, const char *fmt, va_list ap);

#endif
