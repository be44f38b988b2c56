/* SPDX-License-Identifier: MIT */
/* report_html_doc.c — the model's document text written into the `gpumon report --html` page for its
 * charts, as it is but for the page's needs: nothing in it may end the <script> element, its reals
 * need no more than 12 digits there, and a CSV's stand-in pids name nothing. A single pass over the
 * characters, telling strings from the rest; nothing is read back from it. */
#include <stdlib.h>
#include <string.h>

#include "report_html_put.h"

/* A real as jansson writes one at 12 digits: "%.12g", ".0" added when it would read as an integer,
 * the exponent without '+' or leading zeros. */
static void put_real(FILE *f, const char *tok, size_t len)
{
	char in[64], out[64];
	if (len >= sizeof in) { /* no real of the library's is this long: as it is */
		fwrite(tok, 1, len, f);
		return;
	}
	memcpy(in, tok, len);
	in[len] = 0;
	int n = snprintf(out, sizeof out, "%.12g", strtod(in, NULL));
	if (n < 0 || (size_t)n >= sizeof out - 3) {
		fputs(in, f);
		return;
	}
	if (!strchr(out, '.') && !strchr(out, 'e'))
		strcat(out, ".0");
	char *e = strchr(out, 'e');
	if (e) {
		char *from = e + 1, *to = e + 1;
		if (*from == '+')
			from++;
		else if (*from == '-')
			from++, to++;
		while (*from == '0' && from[1])
			from++;
		memmove(to, from, strlen(from) + 1);
	}
	fputs(out, f);
}

/* One character outside a JSON string: the three that could end the element or open a comment
 * only occur inside strings, but are escaped wherever they are. */
static void put_char(FILE *f, char c)
{
	switch (c) {
	case '<': fputs("\\u003c", f); break;
	case '>': fputs("\\u003e", f); break;
	case '&': fputs("\\u0026", f); break;
	default: putc(c, f);
	}
}

void report_html_document(FILE *f, const char *s, int unnamed)
{
	int pid_key = 0; /* the last string was the key "pid" */
	while (*s) {
		if (*s == '"') { /* a string, to its closing quote, escapes kept */
			const char *start = s++;
			while (*s && *s != '"')
				s += s[0] == '\\' && s[1] ? 2 : 1;
			if (*s)
				s++;
			pid_key = unnamed && s - start == 5 && !strncmp(start, "\"pid\"", 5);
			for (const char *c = start; c < s; c++)
				put_char(f, *c);
			continue;
		}
		if (*s == '-' || (*s >= '0' && *s <= '9')) {
			size_t n = strspn(s, "-+.0123456789eE");
			if (pid_key) /* the key's value, after its ':' */
				fputs("null", f);
			else if (strcspn(s, ".eE") < n)
				put_real(f, s, n);
			else
				fwrite(s, 1, n, f);
			s += n;
			pid_key = 0;
			continue;
		}
		if (*s != ':')
			pid_key = 0;
		put_char(f, *s++);
	}
}
