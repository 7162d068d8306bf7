/* A small strict JSON reader for one egress-log line (RFC 8259): objects,
 * arrays, strings, numbers, true, false, null. Pure and bounded: at most
 * ELOG_JSON_MAX_TOKENS values, ELOG_JSON_MAX_DEPTH levels of nesting, and
 * the line's own length (ELOG_LINE_MAX); all storage is inside struct
 * elog_json, so parsing allocates nothing. Raw bytes inside strings must
 * be well-formed UTF-8; \u0000 decodes to U+FFFD so that every decoded
 * string is a C string. With duplicate keys the first one is found. */
#ifndef AIRLOCK_ELOG_JSON_H
#define AIRLOCK_ELOG_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elog/elog.h"

#define ELOG_JSON_MAX_TOKENS 1024
#define ELOG_JSON_MAX_DEPTH  16

enum elog_json_type {
	ELOG_JSON_NULL = 0,
	ELOG_JSON_FALSE,
	ELOG_JSON_TRUE,
	ELOG_JSON_NUMBER,
	ELOG_JSON_STRING,
	ELOG_JSON_ARRAY,
	ELOG_JSON_OBJECT,
};

/* One value. In an object, members are stored as key token (a STRING)
 * followed by its value; next skips a whole value with its children. */
struct elog_json_tok {
	uint8_t type;
	uint32_t next;  /* index of the token after this value's subtree */
	uint32_t count; /* ARRAY: elements; OBJECT: members */
	uint32_t off;   /* STRING: offset of the decoded text in strings;
	                 * NUMBER: offset of the literal in the line */
	uint32_t len;   /* its length in bytes */
};

struct elog_json {
	uint32_t n_tok;
	struct elog_json_tok tok[ELOG_JSON_MAX_TOKENS];
	const char *src; /* the line (borrowed, valid while in use) */
	size_t str_len;
	char strings[ELOG_LINE_MAX + 1]; /* decoded strings, NUL-separated */
};

/* Parse exactly one JSON value spanning line[0..len) (surrounding
 * whitespace allowed; a trailing newline should be removed by the caller
 * or is accepted as whitespace). Returns 0, or -1 with *why set to a short
 * static reason ("unterminated string at byte 12" style text is written
 * into why_buf). Token 0 is the top value. */
int elog_json_parse(struct elog_json *j, const char *line, size_t len, char *why, size_t whylen);

/* Index of key's value in the object at index obj, or -1. */
int elog_json_get(const struct elog_json *j, int obj, const char *key);
/* Decoded string of token i (NUL-terminated, borrowed from j), or NULL
 * when i < 0 or not a string. */
const char *elog_json_str(const struct elog_json *j, int i);
/* Number of token i as an unsigned integer without fraction or exponent;
 * returns 0 and sets *out, or -1 (missing, not such a number, too big). */
int elog_json_u64(const struct elog_json *j, int i, uint64_t *out);
/* Same for a signed integer. */
int elog_json_i64(const struct elog_json *j, int i, int64_t *out);
/* Array element k of the array at i, or -1. */
int elog_json_elem(const struct elog_json *j, int i, uint32_t k);
int elog_json_type(const struct elog_json *j, int i);

#endif
