/* Request targets on inspected connections (DESIGN.md, "TLS inspection and
 * L7 rules"): the one canonical form of a path, which is both what the
 * rules are checked against and what is forwarded, so that no server can
 * read a request differently from the way it was decided; and the globs
 * rules write paths with.
 *
 * Canonical form, from an origin-form target ("/a/b?q"):
 *  - every byte is one RFC 3986 allows in a path (pchar or '/'); anything
 *    else (controls, space, '\', '"', '<', '>', '^', '`', '{', '|', '}',
 *    bytes >= 0x80) refuses the target, as does a '#';
 *  - percent escapes are checked (two hex digits; %00 refused), those of
 *    unreserved characters decoded (so %2e%2e is "..") and the rest
 *    written with upper-case hex; an encoded '/' or '\' (%2F, %5C) is
 *    refused unless the rule allows encoded slashes, and then kept as an
 *    escape, part of its segment, as long as no part of the segment
 *    between them is empty, "." or ".." (a server that decodes them before
 *    routing would resolve those: "/@s%2F..%2Fadmin" is "/admin" to nginx);
 *  - ";params" are removed from every segment (servlet containers route
 *    "/admin;x/" as "/admin/", and read "..;" as ".."); they are not
 *    forwarded;
 *  - "." and ".." segments are resolved (RFC 3986 5.2.4; ".." at the root
 *    stays at the root) and empty segments ("//") merged; a trailing '/'
 *    is kept;
 *  - the query is kept apart, checked the same way (pchar, '/', '?'),
 *    its escapes normalised but none decoded.
 * Pure and bounded: no allocation, output no longer than the input.
 * Fuzzed: tests/fuzz/fuzz_path.c. */
#ifndef AIRLOCK_INSPECT_PATH_H
#define AIRLOCK_INSPECT_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* The longest request target taken (path and query), in bytes. */
#define INSPECT_TARGET_MAX 8192

enum inspect_path_err {
	INSPECT_PATH_OK = 0,
	INSPECT_PATH_NOT_ORIGIN, /* not "/...": absolute-form, authority- or asterisk-form */
	INSPECT_PATH_TOO_LONG,   /* longer than INSPECT_TARGET_MAX */
	INSPECT_PATH_CHAR,       /* a byte no path may hold */
	INSPECT_PATH_FRAGMENT,   /* a '#' */
	INSPECT_PATH_ESCAPE,     /* '%' not followed by two hex digits */
	INSPECT_PATH_NUL,        /* %00 */
	INSPECT_PATH_SLASH,      /* %2F or %5C, and the rule does not allow them */
	INSPECT_PATH_SLASH_DOTS, /* allowed, but beside an empty, "." or ".." part */
};

struct inspect_target {
	/* NUL-terminated, each at most the input's length */
	char path[INSPECT_TARGET_MAX + 1];  /* canonical, starts with '/' */
	char query[INSPECT_TARGET_MAX + 1]; /* after '?', "" when none */
	bool has_query;                     /* a '?' was present (maybe empty) */
};

/* Canonicalise len bytes of target into *out. allow_encoded_slash keeps
 * %2F and %5C (npm's scoped names, "/@scope%2Fname") instead of refusing
 * them. On failure *at is the offset of the offending byte in target (may
 * be NULL) and *out is unspecified. */
enum inspect_path_err inspect_path_canon(const char *target, size_t len, bool allow_encoded_slash,
                                         struct inspect_target *out, size_t *at);

/* A short sentence for an error, e.g. "a byte no path may hold". */
const char *inspect_path_err_text(enum inspect_path_err e);

/* ---- globs ---- */

/* The longest glob, and how many "**" segments one may hold (each costs
 * the match a pass over the remaining segments). */
#define INSPECT_GLOB_MAX      1024
#define INSPECT_GLOB_MAX_STAR 4

/* Check a rule's path glob: "/"-rooted, segments of pchar bytes (escapes
 * as the canonical form writes them) in which '*' matches any run of
 * bytes within one segment, or a whole segment "**" that matches any
 * number of segments, none included (with "**" as its last segment,
 * "/org/" followed by "**" matches "/org" and "/org/a/b"). No '?', '#', ';', dot segments or empty segments. Returns
 * NULL, or a static sentence saying what is wrong; *at is then its offset
 * (may be NULL). */
const char *inspect_glob_check(const char *glob, size_t *at);

/* Whether the canonical path (inspect_path_canon's) matches a glob that
 * inspect_glob_check accepted. A trailing '/' of the path is a last,
 * empty segment, matched by "**" and by nothing else but a glob that ends
 * in '/' too. Bounded: at most INSPECT_GLOB_MAX_STAR passes per "**". */
bool inspect_glob_match(const char *glob, const char *path);
/* The same, read the widest way servers route: ASCII case ignored, and a
 * trailing '/' of the glob or the path optional ("/admin" matches
 * "/Admin/"). For deny rules, never for what allows. */
bool inspect_glob_match_loose(const char *glob, const char *path);

#endif
