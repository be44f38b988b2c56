/* SPDX-License-Identifier: MIT */
/* snapshot_text.c — the strings of PyTorch's allocator snapshot: held to RFC 8259 and UTF-8 where
 * yajl, which reads the snapshot, is lenient; its integers; a string cut to fit a field; and which
 * frame of a stack is the user's (the allocation's site). Pure functions (snapshot.h). */
#include <limits.h>
#include <string.h>

#include "snapshot.h"

/* ---- what yajl leaves to check -------------------------------------------------------------------
 * yajl checks the grammar and the shape of UTF-8 sequences. What it lets through, RFC 8259 and UTF-8
 * do not: overlong forms, surrogates and code points past U+10FFFF written as bytes; escapes of a
 * lone surrogate (yajl writes '?' or CESU-8 for them) and of U+0000 (refused as jansson refuses
 * it). */

size_t gpumon__utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	unsigned cp, min;
	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, cp = s[0] & 0x1fu, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, cp = s[0] & 0x0fu, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, cp = s[0] & 0x07u, min = 0x10000;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3fu);
	}
	return cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) ? 0 : len;
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int i = 0; i < 4; i++) {
		int d = hex_digit(s[i]);
		if (d < 0)
			return 0;
		*v = *v << 4 | (unsigned)d;
	}
	return 1;
}

/* The length of a \u escape yajl read at s (n bytes there, its 4 hex digits checked), a surrogate pair
 * taken together; 0 for a lone surrogate or \u0000. */
static size_t u_escape_len(const char *s, size_t n)
{
	unsigned hi, lo;
	if (!hex4(s + 2, &hi) || hi == 0)
		return 0;
	if (hi < 0xd800 || hi > 0xdfff)
		return 6;
	return hi <= 0xdbff && n >= 12 && s[6] == '\\' && s[7] == 'u' && hex4(s + 8, &lo) && lo >= 0xdc00 &&
		       lo <= 0xdfff
		   ? 12
		   : 0;
}

/* Where a string as written (n bytes between its quotes, read by yajl) is not good, with what is
 * wrong in *what; n when it is. */
static size_t string_fault(const char *s, size_t n, const char **what)
{
	for (size_t i = 0, k; i < n; i += k) {
		unsigned char ch = (unsigned char)s[i];
		k = 1;
		if (ch == '\\' && !(k = s[i + 1] == 'u' ? u_escape_len(s + i, n - i) : 2)) {
			*what = "an invalid escape";
			return i;
		}
		if (ch >= 0x80 && !(k = gpumon__utf8_len((const unsigned char *)s + i, n - i))) {
			*what = "invalid UTF-8";
			return i;
		}
	}
	return n;
}

static int ascii(const unsigned char *s, size_t n)
{
	uint64_t any = 0, w;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		memcpy(&w, s + i, 8);
		any |= w;
	}
	for (; i < n; i++)
		any |= s[i];
	return !(any & 0x8080808080808080ull);
}

/* The opening quote of the string whose closing quote is at text[close]: the first quote before it
 * that no backslash escapes (yajl read it: a quote inside is escaped, by an odd run of them). */
static size_t opening_quote(const char *text, size_t close)
{
	for (size_t i = close; i--;) {
		size_t b = i;
		if (text[i] != '"')
			continue;
		while (b && text[b - 1] == '\\')
			b--;
		if ((i - b) % 2 == 0)
			return i;
	}
	return 0;
}

int gpumon__json_string_check(const char *text, size_t close, const char *s, size_t n, size_t *at,
			      const char **what)
{
	size_t from, bad;
	if (s + n == text + close) { /* yajl's view of the text: no escape, bytes to check only */
		if (ascii((const unsigned char *)s, n))
			return 0;
		from = close - n;
	} else {
		from = opening_quote(text, close) + 1;
	}
	bad = string_fault(text + from, close - from, what);
	*at = from + bad;
	return bad == close - from ? 0 : -1;
}

/* yajl's own conversion would stop the whole text at "integer overflow": the number as written is read
 * here, and only where gpumon uses it. */
int gpumon__json_integer(const char *s, size_t n, int64_t *v)
{
	size_t i = n && s[0] == '-';
	uint64_t mag = 0;
	if (i == n)
		return 0;
	for (; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (d > 9 || mag > ((uint64_t)INT64_MAX - d) / 10)
			return 0;
		mag = mag * 10 + d;
	}
	*v = s[0] == '-' ? -(int64_t)mag : (int64_t)mag;
	return 1;
}

void gpumon__put_text(const char *s, size_t n, char *dst, size_t size, int keep_end)
{
	size_t from = 0;
	if (n >= size && keep_end) {
		from = n - (size - 4);
		while (from < n && (s[from] & 0xc0) == 0x80)
			from++;
		memcpy(dst, "...", 3);
		dst += 3;
	} else if (n >= size) {
		n = size - 1;
		while (n && (s[n] & 0xc0) == 0x80)
			n--;
	}
	memcpy(dst, s + from, n - from);
	dst[n - from] = '\0';
}

/* ---- which frame is the allocation's site --------------------------------------------------------
 * A frame belongs to the framework, to Python or to gpumon, or it is the user's (a library's counts
 * as the user's: it is the code that asked for the memory). Decided on the file's path, split at '/'
 * and '\\', by where packages live rather than by a word anywhere in it, so that a project of the
 * user's in a directory named "torch" is still the user's:
 *  - PyTorch's: a component "torch" right under "site-packages" or "dist-packages", or right under
 *    "pytorch" (a source checkout, pip install -e); a component "torchinductor_*" (the code
 *    torch.compile writes and runs); a C/C++ source or library (a frame of stacks="all": the
 *    allocator and the framework underneath the Python code);
 *  - Python's: a component "pythonX.Y" right under "lib" or "lib64", with no "site-packages" or
 *    "dist-packages" further on (the standard library);
 *  - gpumon's: "gpumon" right under site-packages/dist-packages, or a file "_*.py" right in a
 *    directory "gpumon" (the package's own modules, wherever it is imported from);
 *  - no file: empty, "??", or "<...>" ("<frozen runpy>", "<string>", torch.fx's "<eval_with_key>.3").
 * The site is the innermost frame that is the user's; the innermost frame when none is. */

static int comp_is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(s, lit, n);
}

static int ends_with(const char *s, size_t n, const char *lit)
{
	size_t m = strlen(lit);
	return n >= m && !memcmp(s + n - m, lit, m);
}

/* "python3.11", "python3.13t" */
static int is_python_dir(const char *s, size_t n)
{
	size_t i = 6;
	if (n < 9 || memcmp(s, "python", 6) || s[i] < '0' || s[i] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	if (i >= n || s[i++] != '.' || i >= n || s[i] < '0' || s[i] > '9')
		return 0;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++;
	while (i < n && s[i] >= 'a' && s[i] <= 'z')
		i++;
	return i == n;
}

static int native_file(const char *s, size_t n)
{
	static const char *const ext[] = {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".so"};
	for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
		if (ends_with(s, n, ext[i]))
			return 1;
	return memmem(s, n, ".so.", 4) != NULL; /* libcuda.so.1 */
}

int gpumon__frame_is_users(const char *s, size_t n)
{
	const char *prev = "", *c = s;
	size_t prevn = 0;
	int stdlib = 0, packages = 0;
	if (n == 0 || s[0] == '<' || comp_is(s, n, "??") || native_file(s, n))
		return 0;
	for (const char *e = s; e <= s + n; e++) {
		if (e < s + n && *e != '/' && *e != '\\')
			continue;
		size_t cn = (size_t)(e - c);
		int under_packages =
		    comp_is(prev, prevn, "site-packages") || comp_is(prev, prevn, "dist-packages");
		if ((under_packages && (comp_is(c, cn, "torch") || comp_is(c, cn, "gpumon"))) ||
		    (comp_is(prev, prevn, "pytorch") && comp_is(c, cn, "torch")) ||
		    (cn > 14 && !memcmp(c, "torchinductor_", 14)) ||
		    (e == s + n && comp_is(prev, prevn, "gpumon") && cn > 4 && c[0] == '_' &&
		     ends_with(c, cn, ".py")))
			return 0;
		if (comp_is(c, cn, "site-packages") || comp_is(c, cn, "dist-packages"))
			packages = 1;
		if ((comp_is(prev, prevn, "lib") || comp_is(prev, prevn, "lib64")) && is_python_dir(c, cn))
			stdlib = 1, packages = 0;
		if (cn)
			prev = c, prevn = cn;
		c = e + 1;
	}
	return !stdlib || packages;
}
