/* SPDX-License-Identifier: MIT */
/* util.c — helpers the subcommands share: messages, exit statuses, opening the library with a
 * clear line when there is no driver, GPU selection, byte formatting, and the one way text that
 * another process chose (command lines, names, users) is made safe to print. */
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

const char *cli_format_bytes(char *buf, size_t len, uint64_t bytes)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
	return buf;
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

/* Bytes of the UTF-8 character at s (1 to 4), or 0 when s does not start a valid, shortest-form
 * one (a stray continuation byte, an overlong form, a surrogate, a cut-off sequence). *cp gets its
 * code point. */
static size_t utf8_char(const unsigned char *s, unsigned *cp)
{
	size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
	static const unsigned lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07}, least[5] = {0, 0, 0x80, 0x800, 0x10000};
	if (!n)
		return 0;
	unsigned c = s[0] & lead_mask[n];
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3F);
	}
	if (c < least[n] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
		return 0;
	*cp = c;
	return n;
}

/* Whether a terminal could take code point c for something other than a character to show: C0,
 * DEL, C1 (0x9B is CSI to a terminal that reads 8-bit controls), and the bidirectional overrides
 * and isolates that make text read differently from the bytes it holds. */
static int is_control(unsigned c)
{
	return c < 0x20 || (c >= 0x7F && c <= 0x9F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069);
}

const char *cli_safe_text(char *buf, size_t len, const char *s)
{
	size_t w = 0;
	if (!len)
		return buf;
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p;) {
		char esc[12];
		unsigned c = 0;
		size_t n = utf8_char(p, &c), out;
		if (n && !is_control(c)) {
			out = n;
			memcpy(esc, p, n);
		} else if (n == 1 && (c == '\n' || c == '\r' || c == '\t')) {
			out = 2;
			esc[0] = '\\', esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
		} else if (n <= 1) { /* an ASCII control, or a byte that is not UTF-8: its value */
			n = 1;
			out = (size_t)snprintf(esc, sizeof esc, "\\x%02x", p[0]);
		} else {
			out = (size_t)snprintf(esc, sizeof esc, "\\u%04x", c);
		}
		if (w + out >= len)
			break; /* whole characters and escapes only */
		memcpy(buf + w, esc, out);
		w += out;
		p += n;
	}
	buf[w] = 0;
	return buf;
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
