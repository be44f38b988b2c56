/* SPDX-License-Identifier: MIT */
/* run_socket.h — the channel between `gpumon run` and the monitor inside the training process: a
 * Unix stream socket in a private directory, named to the job by GPUMON_RUN_SOCKET, carrying
 * newline-delimited JSON (protocol version 1, docs/run-protocol.md). */
#ifndef GPUMON_RUN_SOCKET_H
#define GPUMON_RUN_SOCKET_H

#include <stddef.h>
#include <stdint.h>

#include <gpumon/gpumon.h>

#define RUN_PROTOCOL_VERSION 1
#define RUN_MSG_MAX_LINE (64 * 1024) /* bytes in a line, newline excluded */

enum {
	RUN_MSG_HELLO = 1,
	RUN_MSG_SAMPLE,
	RUN_MSG_STEP,
	RUN_MSG_MARKER,
	RUN_MSG_OOM,      /* the monitor inside the job saw an out-of-memory: its allocator's figures */
	RUN_MSG_SNAPSHOT, /* the allocator's snapshot, condensed inside the job */
	RUN_MSG_INSIDE,   /* what the bootstrap did: the inside view on or off */
	RUN_MSG_UNKNOWN,  /* a well-formed object of a type this version does not know */
};

#define RUN_REASON_MAX 1023 /* bytes of an `inside` message's reason; a longer one is malformed */

/* Bits of run_msg.has */
enum {
	RUN_HAS_PID = 1u << 0,
	RUN_HAS_T = 1u << 1,
	RUN_HAS_STEP = 1u << 2,
	RUN_HAS_DEVICE = 1u << 3,
	RUN_HAS_ALLOCATED = 1u << 4,
	RUN_HAS_RESERVED = 1u << 5,
	RUN_HAS_MAX_ALLOCATED = 1u << 6,
	RUN_HAS_VERSION = 1u << 7, /* hello's "v" */
	RUN_HAS_LIMIT = 1u << 8,
};

struct run_msg {
	int type;               /* RUN_MSG_* */
	unsigned has;           /* RUN_HAS_* of the fields below that hold a value */
	int v;                  /* hello: protocol version */
	unsigned pid;
	double t;               /* sender's wall clock, Unix seconds */
	int64_t step;
	int device;
	uint64_t allocated, reserved, max_allocated;
	uint64_t limit;         /* sample: the allocator's cap set in the code (bytes) */
	gpumon_oom_figures fig; /* oom: the byte figures by the library's names (fig.known), each at most
				   GPUMON_MAX_BYTES; pid, device and framework are the fields above */
	int inside_on;          /* inside: 1 "on", 0 "off" */
	char framework[16];     /* hello, oom, inside: "torch", ... (truncated) */
	char fw_version[32];    /* hello, inside: the framework's version (truncated) */
	char text[RUN_REASON_MAX + 1]; /* marker: its text (truncated); inside: the reason */
	char *snapshot;         /* snapshot: the object as compact JSON (malloc'd; run_msg_release) */
	size_t snapshot_len;
};

/*
 * Parses one line (without its newline; len bytes, need not be NUL-terminated). Returns 0 with
 * *out filled (an unknown "type" gives RUN_MSG_UNKNOWN), or -1 with a short reason in err when
 * the line is not a JSON object, has no string "type", or a known field has a wrong type or an
 * impossible value. null and missing values are "unknown", not errors. The snapshot's text is the
 * message's (out->snapshot): run_msg_release() frees it, after a success or a failure.
 */
int run_msg_parse(const char *line, size_t len, struct run_msg *out, char *err, size_t errlen);

/* Frees what a parsed message owns (its snapshot's text). The message stays readable otherwise. */
void run_msg_release(struct run_msg *m);

struct run_server;

struct run_server_stats {
	uint64_t clients;   /* connections accepted */
	uint64_t messages;  /* well-formed lines of a known type */
	uint64_t unknown;   /* well-formed lines of an unknown type */
	uint64_t malformed; /* lines that did not parse, or were too long */
	uint64_t refused;   /* connections gpumon closed for want of a file descriptor or memory */
	int refused_errno;  /* why the last one was: EMFILE, ENFILE or ENOMEM */
};

/* Called for each well-formed message; peer_pid is the sender's pid from the socket (0 unknown).
 * Returns 0, or -1 when what the message carries does not hold after all (a snapshot that is not
 * one): the line then counts as malformed. */
typedef int (*run_msg_fn)(void *ctx, const struct run_msg *m, unsigned peer_pid);

/*
 * Creates a private directory (mode 0700) under $TMPDIR or /tmp and listens on a socket in it.
 * Any number of clients may connect, as many as gpumon's open-file limit (RLIMIT_NOFILE) allows
 * less 32 descriptors kept for its own files; a connection beyond that, or one met when memory
 * runs out, is closed at once and counted in stats.refused. Returns 0 and *out, or -1 with the
 * reason in err.
 */
int run_server_open(struct run_server **out, char *err, size_t errlen);

/* The socket's path, to export as GPUMON_RUN_SOCKET. */
const char *run_server_path(const struct run_server *s);

/* The socket's private directory (mode 0700), where other files of the run may go: whatever is in
 * it when run_server_close() runs is removed with it. */
const char *run_server_dir(const struct run_server *s);

/*
 * Waits up to timeout_ms for the socket, its clients and extra_fd (-1: none), then accepts
 * connections and reads whatever is there, calling fn for each complete line. Returns 1 when
 * extra_fd is readable, else 0.
 */
int run_server_poll(struct run_server *s, int extra_fd, int timeout_ms, run_msg_fn fn, void *ctx);

void run_server_stats_get(const struct run_server *s, struct run_server_stats *out);

/* Why the socket closed a connection (err: run_server_stats.refused_errno), in words ("gpumon is
 * out of file descriptors (ulimit -n 1024)"); past: as the summary says it ("was"). */
void run_server_refusal_reason(char *buf, size_t len, int err, int past);

/* Closes every connection, removes the socket and its directory with the files in it (one level of
 * subdirectories too: Python's __pycache__), frees s. NULL: no-op. */
void run_server_close(struct run_server *s);

#endif
