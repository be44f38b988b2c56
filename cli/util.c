/* SPDX-License-Identifier: MIT */
/* util.c — helpers the subcommands share: messages, exit statuses, opening the library with a
 * clear line when there is no driver, GPU selection, byte formatting, and the one way text that
 * another process chose (command lines, names, users) is made safe to print. */
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "%s: ", cli_progname);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_exit_status(int status)
{
	switch (status) {
	case GPUMON_OK: return EXIT_OK;
	case GPUMON_E_INVAL:
	case GPUMON_E_AMBIGUOUS: return EXIT_USAGE;
	case GPUMON_E_NO_PERMISSION: return EXIT_NO_PERMISSION;
	case GPUMON_E_NOT_FOUND: return EXIT_NOT_FOUND;
	case GPUMON_E_DRIVER:
	case GPUMON_E_TIMEOUT: return EXIT_NO_DRIVER; /* there, but not answering */
	case GPUMON_E_NO_LIBRARY: return EXIT_NO_LIBRARY;
	case GPUMON_E_LOST: return EXIT_GPU_LOST;
	default: return EXIT_OTHER;
	}
}

gpumon *cli_open(int *exit_status)
{
	gpumon *g = NULL;
	int st = gpumon_create(&g);
	if (st == GPUMON_OK) {
		*exit_status = EXIT_OK;
		return g;
	}
	const char *env = getenv("GPUMON_NVML_LIBRARY");
	if (st == GPUMON_E_NO_LIBRARY && !(env && env[0]))
		cli_error("no NVIDIA driver: libnvidia-ml.so.1 not found. Install the NVIDIA driver "
			  "(it provides libnvidia-ml.so.1), or set GPUMON_NVML_LIBRARY to the library's path.");
	else if (st == GPUMON_E_NO_LIBRARY)
		cli_error("no NVIDIA driver: %s (GPUMON_NVML_LIBRARY names a file that cannot be loaded)",
			  gpumon_errmsg(g));
	else if (st == GPUMON_E_DRIVER)
		cli_error("the NVIDIA driver is not usable: %s. Is the nvidia kernel module loaded "
			  "(does nvidia-smi work)?", gpumon_errmsg(g));
	else
		cli_error("%s", g ? gpumon_errmsg(g) : gpumon_strerror(st));
	gpumon_destroy(g);
	*exit_status = cli_exit_status(st);
	return NULL;
}

void cli_leave(gpumon *g)
{
	static gpumon *left; /* reachable until exit: not a leak */
	if (left)
		gpumon_destroy(left); /* a second handle in one process (not done today) */
	left = g;
}

int cli_select_devices(gpumon *g, const char *spec, unsigned *sel, unsigned cap, unsigned *count)
{
	unsigned n = gpumon_device_count(g);
	*count = 0;
	if (!spec) {
		for (unsigned i = 0; i < n && i < cap; i++)
			sel[(*count)++] = i;
		return EXIT_OK;
	}
	char *copy = strdup(spec);
	if (!copy) {
		cli_error("out of memory");
		return EXIT_OTHER;
	}
	int rc = EXIT_OK;
	char *save = NULL;
	int any = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned dev;
		int st = gpumon_device_find(g, tok, &dev);
		if (st == GPUMON_E_INVAL)
			continue; /* an empty item between commas */
		any = 1;
		if (st != GPUMON_OK) {
			cli_error("-i %s: %s", spec, gpumon_errmsg(g));
			rc = cli_exit_status(st);
			break;
		}
		int dup = 0;
		for (unsigned k = 0; k < *count; k++)
			dup |= sel[k] == dev;
		if (!dup && *count < cap)
			sel[(*count)++] = dev;
	}
	free(copy);
	if (rc == EXIT_OK && !any) {
		cli_error("-i: no GPU named in '%s'", spec);
		rc = EXIT_USAGE;
	}
	return rc;
}

uint64_t cli_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cli_wait(int fd, uint64_t deadline_ns, const sigset_t *stops, const volatile sig_atomic_t *stop)
{
	sigset_t orig;
	int ready = 0;
	sigprocmask(SIG_BLOCK, stops, &orig);
	for (;;) {
		uint64_t now = cli_now_ns();
		if (*stop || (deadline_ns && now >= deadline_ns))
			break;
		uint64_t left = deadline_ns - now;
		struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (ppoll(fd >= 0 ? &p : NULL, fd >= 0 ? 1 : 0, deadline_ns ? &ts : NULL, &orig) > 0) {
			ready = 1;
			break;
		}
	}
	sigprocmask(SIG_SETMASK, &orig, NULL);
	return ready;
}

const char *cli_format_bytes(char *buf, size_t len, uint64_t bytes)
{
	return gpumon_words_bytes(bytes, buf, len);
}

const char *cli_option_value(int argc, char **argv, int *i, const char *long_name,
			     const char *short_name, int *bad)
{
	const char *a = argv[*i];
	size_t ln = long_name ? strlen(long_name) : 0;
	if (long_name && !strncmp(a, long_name, ln) && a[ln] == '=')
		return a + ln + 1;
	if ((long_name && !strcmp(a, long_name)) || (short_name && !strcmp(a, short_name))) {
		if (*i + 1 >= argc) {
			cli_error("option %s needs a value", a);
			*bad = 1;
			return NULL;
		}
		return argv[++*i];
	}
	return NULL;
}

int cli_same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void cli_set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	if (!len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

int cli_grow(void **array, size_t *cap, size_t used, size_t size, size_t first)
{
	if (used < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : first;
	if (ncap < *cap || ncap > SIZE_MAX / size)
		return -1;
	void *a = realloc(*array, ncap * size);
	if (!a)
		return -1;
	*array = a;
	*cap = ncap;
	return 0;
}

int cli_record_event(gpumon_recording *r, uint64_t t_ns, const char *kind, const char *text)
{
	gpumon_record rec = {.kind = GPUMON_REC_EVENT, .t_ns = t_ns, .event_kind = kind, .event_text = text};
	return gpumon_recording_write(r, &rec, 1);
}

const char *cli_safe_text(char *buf, size_t len, const char *s)
{
	return gpumon_words_safe(s, buf, len);
}

char *cli_safe_text_dup(const char *s)
{
	size_t room = strlen(s ? s : "") * 4 + 1; /* an escape takes at most 4 bytes for each byte */
	char *buf = malloc(room);
	return buf ? (char *)cli_safe_text(buf, room, s) : NULL;
}

const char *cli_csv_field(char *buf, size_t len, const char *s)
{
	char safe[1024];
	cli_safe_text(safe, sizeof safe, s);
	size_t n = strlen(safe), w = 0;
	/* quoted when a reader would split or trim it: a comma, a quote, a blank at either end */
	int quote = strpbrk(safe, ",\"") || (n && (safe[0] == ' ' || safe[n - 1] == ' '));
	if (!len)
		return buf;
	if (!quote) {
		snprintf(buf, len, "%s", safe);
		return buf;
	}
	if (len < 3) {
		buf[0] = 0;
		return buf;
	}
	buf[w++] = '"';
	for (size_t i = 0; i < n && w + 3 < len; i++) {
		if (safe[i] == '"')
			buf[w++] = '"';
		buf[w++] = safe[i];
	}
	buf[w++] = '"';
	buf[w] = 0;
	return buf;
}
