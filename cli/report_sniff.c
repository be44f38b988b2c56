/* SPDX-License-Identifier: MIT */
/* report_sniff.c — what a file given to `gpumon report` is, from its name and first bytes: a
 * recording (the library's reader then names one that is not), a text file of samples, or something
 * else, refused in one line that says what it is (empty, compressed, UTF-16, binary, a script, a web
 * page) and what was expected, rather than a complaint about the columns of a "CSV" it never was. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "report.h"

#define SNIFF_BYTES 4096

/* A file's first line for a message: up to its end, made safe to print. */
static const char *first_line(char *buf, size_t len, const unsigned char *head, size_t n)
{
	char line[81];
	size_t k = 0;
	while (k < n && k < sizeof line - 1 && head[k] != '\n' && head[k] != '\r')
		k++;
	memcpy(line, head, k);
	line[k] = 0;
	return cli_safe_text(buf, len, line);
}

static int has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* Compressed files by their magic numbers: the tool that undoes each. */
static const struct {
	const char *magic;
	size_t len;
	const char *what, *undo;
} packed[] = {
	{"\x1f\x8b", 2, "gzip-compressed", "gzip -d"},
	{"\x28\xb5\x2f\xfd", 4, "zstd-compressed", "zstd -d"},
	{"\xfd\x37\x7a\x58\x5a\x00", 6, "xz-compressed", "xz -d"},
	{"BZh", 3, "bzip2-compressed", "bzip2 -d"},
	{"PK\x03\x04", 4, "a zip archive", "unzip"},
};

int report_file_kind(const char *path, int *kind, char *err, size_t errlen)
{
	unsigned char head[SNIFF_BYTES];
	char shown[100];
	*kind = REPORT_FILE_TEXT;
	FILE *f = fopen(path, "rb");
	if (!f) /* the reader of text names why it cannot be opened */
		return EXIT_OK;
	size_t n = fread(head, 1, sizeof head, f);
	int failed = ferror(f);
	fclose(f);
	if (failed) /* likewise a directory, or a read error */
		return EXIT_OK;
	if (n == 0) {
		cli_set_err(err, errlen, "%s is empty: expected a gpumon recording or a text file of samples (docs/report.md)",
			    path);
		return EXIT_USAGE;
	}
	/* SQLite's header, or a recording's name: the reader says what it is when it is not one */
	if ((n >= 16 && !memcmp(head, "SQLite format 3", 16)) || has_suffix(path, ".gpumon")) {
		*kind = REPORT_FILE_RECORDING;
		return EXIT_OK;
	}
	for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++)
		if (n >= packed[i].len && !memcmp(head, packed[i].magic, packed[i].len)) {
			cli_set_err(err, errlen, "%s is %s, not a CSV of samples: unpack it first (%s)", path,
				    packed[i].what, packed[i].undo);
			return EXIT_USAGE;
		}
	/* nvidia-smi's output redirected by Windows PowerShell */
	if (n >= 2 && ((head[0] == 0xFF && head[1] == 0xFE) || (head[0] == 0xFE && head[1] == 0xFF))) {
		cli_set_err(err, errlen,
			    "%s is UTF-16 text, not a CSV of samples in UTF-8: convert it first (iconv -f UTF-16 -t "
			    "UTF-8)",
			    path);
		return EXIT_USAGE;
	}
	/* no text holds a NUL byte; other control bytes may be a process's name in a log */
	const unsigned char *nul = memchr(head, 0, n);
	if (nul) {
		cli_set_err(err, errlen,
			    "%s is not a CSV of samples nor a gpumon recording: it holds binary data (a NUL byte at "
			    "offset %zu)",
			    path, (size_t)(nul - head));
		return EXIT_USAGE;
	}
	size_t at = n >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF ? 3 : 0; /* a UTF-8 BOM */
	while (at < n && (head[at] == ' ' || head[at] == '\t' || head[at] == '\r' || head[at] == '\n'))
		at++;
	const char *what = n - at >= 2 && head[at] == '#' && head[at + 1] == '!' ? "a script"
			   : at < n && head[at] == '<'				  ? "HTML or XML"
										  : NULL;
	if (what) {
		cli_set_err(err, errlen,
			    "%s is not a CSV of samples: it is %s (its first line: %s); expected a header naming "
			    "columns, such as time,allocated (docs/report.md)",
			    path, what, first_line(shown, sizeof shown, head + at, n - at));
		return EXIT_USAGE;
	}
	return EXIT_OK;
}
