/* SPDX-License-Identifier: MIT */
/* snapshot.h — what the files of the allocator's snapshot share: snapshot.c condenses its JSON,
 * snapshot_text.c judges its strings and frames, snapshot_json.c writes and reads the condensed
 * form. Pure functions. */
#ifndef GPUMON_SNAPSHOT_H
#define GPUMON_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

/* The length of the UTF-8 sequence at s (n > 0 bytes there), 0 when it is not a valid one: overlong
 * forms, surrogates and code points past U+10FFFF are not. */
size_t gpumon__utf8_len(const unsigned char *s, size_t n);

/* A string of a JSON text that yajl read (its grammar and the shape of its UTF-8 checked), held to
 * RFC 8259 and UTF-8 where yajl is lenient: its closing quote at text[close], and s, n as yajl
 * handed it over (a view of the text when it holds no escape, else decoded). 0 when it is good; -1
 * with *at (an offset in text) and *what ("invalid UTF-8", "an invalid escape") when it is not. */
int gpumon__json_string_check(const char *text, size_t close, const char *s, size_t n, size_t *at,
			      const char **what);

/* An integer in int64_t's range, from a number as yajl read it: 1 with *v; 0 for a fraction, an
 * exponent or an integer out of range. */
int gpumon__json_integer(const char *s, size_t n, int64_t *v);

/* Copies s (n bytes of UTF-8) into dst (size > 4 bytes, NUL-terminated), cut at a character's start
 * to fit: a path (keep_end) keeps its end, the file's name and the directories nearest it, after
 * "...". */
void gpumon__put_text(const char *s, size_t n, char *dst, size_t size, int keep_end);

/* Whether a frame whose file is s (n bytes) is the user's code rather than the framework's,
 * Python's or gpumon's, or no file at all (the rule is gpumon_snapshot_condense's, written out in
 * snapshot_text.c). */
int gpumon__frame_is_users(const char *s, size_t n);

#endif
