/* SPDX-License-Identifier: MIT */
/* fuzz_prom_label.c — libFuzzer target for the exporter's label-value writer: any bytes (a
 * process's command line, a GPU name) with any length limit must come out as valid UTF-8 with
 * every quote, backslash and newline escaped, no longer than the limit allows, so that a hostile
 * command line can never break the /metrics page. */
#include <stdlib.h>
#include <string.h>

#include "sinks/prometheus.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* 1 when s[0..n) is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static int valid_utf8(const unsigned char *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		unsigned c = s[i], len, cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			len = 2, cp = c & 0x1F, min = 0x80;
		else if ((c & 0xF0) == 0xE0)
			len = 3, cp = c & 0x0F, min = 0x800;
		else if ((c & 0xF8) == 0xF0)
			len = 4, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (i + len > n)
			return 0;
		for (unsigned k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += len;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t max = data[0]; /* the limit, 0..255 bytes */
	char *v = malloc(size);
	if (!v)
		return 0;
	memcpy(v, data + 1, size - 1);
	v[size - 1] = 0; /* C strings: stops at the first NUL, as a label value does */
	struct prom_buf b = {0};
	gpumon__prom_label_value(&b, v, max);
	const unsigned char *o = (const unsigned char *)(b.p ? b.p : "");
	size_t n = b.len;
	if (!valid_utf8(o, n))
		abort();
	/* escapes: a quote or newline only after a backslash; a backslash always starts a pair */
	for (size_t i = 0; i < n; i++) {
		if (o[i] == '\n' || o[i] == '"')
			abort();
		if (o[i] == '\\') {
			if (i + 1 >= n || (o[i + 1] != '\\' && o[i + 1] != '"' && o[i + 1] != 'n'))
				abort();
			i++;
		}
	}
	/* at most two output bytes per input byte kept, plus "..." */
	if (n > 2 * max + 3)
		abort();
	gpumon__prom_free(&b);
	free(v);
	return 0;
}
