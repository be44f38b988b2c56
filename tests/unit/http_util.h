/* SPDX-License-Identifier: MIT */
/* http_util.h — one plain HTTP/1.0 GET against 127.0.0.1, for the unit tests that scrape an
 * exporter they started. */
#ifndef GPUMON_HTTP_UTIL_H
#define GPUMON_HTTP_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

/* GET path from 127.0.0.1:port; returns the whole response (malloc'd) or NULL. */
static inline char *http_get(unsigned port, const char *path)
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

#endif
