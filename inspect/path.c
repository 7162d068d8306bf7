/* Canonical request paths and path globs (inspect/path.h). */
#include "inspect/path.h"

#include "common/util.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

/* RFC 3986 2.3 */
static bool
unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

/* RFC 3986 3.3: pchar without pct-encoded (handled apart) */
static bool
pchar(unsigned char c)
{
	return unreserved(c) || (c != '\0' && strchr("!$&'()*+,;=:@", c) != NULL);
}

static const char hex_upper[] = "0123456789ABCDEF";

/* The escape at in[i] ('%') of in[0..len), checked: its value, or -1
 * (*err set). */
static int
escape_take(const char *in, size_t len, size_t i, enum inspect_path_err *err)
{
	int hi = i + 2 < len ? hex_value((unsigned char)in[i + 1]) : -1;
	int lo = i + 2 < len ? hex_value((unsigned char)in[i + 2]) : -1;

	if (hi < 0 || lo < 0) {
		*err = INSPECT_PATH_ESCAPE;
		return -1;
	}
	if (hi == 0 && lo == 0) {
		*err = INSPECT_PATH_NUL;
		return -1;
	}
	return hi * 16 + lo;
}

static size_t
put_escape(char *out, size_t o, int v)
{
	out[o++] = '%';
	out[o++] = hex_upper[v >> 4];
	out[o++] = hex_upper[v & 15];
	return o;
}

/* The query: checked byte by byte, escapes normalised, nothing decoded. */
static enum inspect_path_err
query_canon(const char *q, size_t len, size_t base, char *out, size_t *at)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)q[i];
		enum inspect_path_err err;
		int v;

		if (c == '%') {
			if ((v = escape_take(q, len, i, &err)) < 0) {
				*at = base + i;
				return err;
			}
			o = put_escape(out, o, v);
			i += 2;
		} else if (c == '#') {
			*at = base + i;
			return INSPECT_PATH_FRAGMENT;
		} else if (pchar(c) || c == '/' || c == '?') {
			out[o++] = (char)c;
		} else {
			*at = base + i;
			return INSPECT_PATH_CHAR;
		}
	}
	out[o] = '\0';
	return INSPECT_PATH_OK;
}

/* An empty, "." or ".." part of a segment between encoded slashes. */
static bool
dot_piece(const char *p, size_t n)
{
	return n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.');
}

/* Remove the last segment of out[0..*o): back to its '/', which stays
 * out (the caller writes the next "/seg"). At the root, nothing. */
static void
segment_pop(const char *out, size_t *o)
{
	while (*o > 0 && out[*o - 1] != '/')
		(*o)--;
	if (*o > 0)
		(*o)--; /* its '/' */
}

enum inspect_path_err
inspect_path_canon(const char *target, size_t len, bool allow_encoded_slash,
                   struct inspect_target *out, size_t *at)
{
	size_t dummy, plen, o = 0;
	bool trailing = false;
	const char *qmark;

	if (at == NULL)
		at = &dummy;
	*at = 0;
	if (len > INSPECT_TARGET_MAX)
		return *at = INSPECT_TARGET_MAX, INSPECT_PATH_TOO_LONG;
	if (len == 0 || target[0] != '/')
		return INSPECT_PATH_NOT_ORIGIN;
	qmark = memchr(target, '?', len);
	plen = qmark != NULL ? (size_t)(qmark - target) : len;
	out->has_query = qmark != NULL;
	out->query[0] = '\0';

	/* Segment by segment: each starts after a '/', its canonical text is
	 * written after a '/' of its own at out->path[o], then kept, dropped
	 * (empty, ".") or, for "..", taken back with the one before it. */
	for (size_t i = 1; i <= plen;) {
		size_t seg = o, n, piece, esc_at = 0;
		bool params = false, esc = false;

		out->path[o++] = '/';
		piece = o; /* the part since the segment's start or its last encoded slash */
		for (; i < plen && target[i] != '/'; i++) {
			unsigned char c = (unsigned char)target[i];
			enum inspect_path_err err;
			int v;

			if (c == '%') {
				if ((v = escape_take(target, plen, i, &err)) < 0) {
					*at = i;
					return err;
				}
				i += 2;
				if (params)
					continue;
				if (v < 0x80 && unreserved((unsigned char)v)) {
					out->path[o++] = (char)v;
				} else if ((v == '/' || v == '\\') && !allow_encoded_slash) {
					*at = i - 2;
					return INSPECT_PATH_SLASH;
				} else if (v == '/' || v == '\\') {
					/* Kept, but servers that decode it before
					 * routing (nginx, Tomcat with decoding on, IIS
					 * for '\\') would see its neighbours as
					 * segments: none may be empty, "." or "..". */
					if (dot_piece(out->path + piece, o - piece)) {
						*at = i - 2;
						return INSPECT_PATH_SLASH_DOTS;
					}
					o = put_escape(out->path, o, v);
					piece = o;
					esc = true;
					esc_at = i - 2;
				} else {
					o = put_escape(out->path, o, v);
				}
			} else if (c == '#') {
				*at = i;
				return INSPECT_PATH_FRAGMENT;
			} else if (c == ';') {
				params = true; /* the rest of the segment goes */
			} else if (pchar(c)) {
				if (!params)
					out->path[o++] = (char)c;
			} else {
				*at = i;
				return INSPECT_PATH_CHAR;
			}
		}
		if (esc && dot_piece(out->path + piece, o - piece)) {
			*at = esc_at;
			return INSPECT_PATH_SLASH_DOTS;
		}
		n = o - seg - 1;
		trailing = false;
		if (n == 0 || (n == 1 && out->path[seg + 1] == '.')) {
			o = seg;
			trailing = true;
		} else if (n == 2 && out->path[seg + 1] == '.' && out->path[seg + 2] == '.') {
			o = seg;
			segment_pop(out->path, &o);
			trailing = true;
		}
		i++; /* past the '/' (or the end) */
	}
	if (o == 0 || trailing)
		out->path[o++] = '/';
	out->path[o] = '\0';
	if (qmark != NULL)
		return query_canon(qmark + 1, len - plen - 1, plen + 1, out->query, at);
	return INSPECT_PATH_OK;
}

const char *
inspect_path_err_text(enum inspect_path_err e)
{
	switch (e) {
	case INSPECT_PATH_OK:
		return "ok";
	case INSPECT_PATH_NOT_ORIGIN:
		return "the request target is not a path (origin-form)";
	case INSPECT_PATH_TOO_LONG:
		return "the request target is too long";
	case INSPECT_PATH_CHAR:
		return "a byte no path may hold";
	case INSPECT_PATH_FRAGMENT:
		return "a fragment ('#') in the request target";
	case INSPECT_PATH_ESCAPE:
		return "a '%' not followed by two hex digits";
	case INSPECT_PATH_NUL:
		return "an encoded NUL (%00)";
	case INSPECT_PATH_SLASH:
		return "an encoded slash (%2F or %5C), which the rule does not allow";
	case INSPECT_PATH_SLASH_DOTS:
		return "an empty, '.' or '..' part beside an encoded slash (a server that decodes "
		       "it would resolve it)";
	}
	return "unknown error";
}

/* ---- globs ---- */

/* One segment of a '/'-rooted string that ends at end: s .. s+n, ""
 * for the last after a trailing '/'. */
struct seg {
	const char *s;
	size_t n;
	const char *end;
};

static size_t
seg_span(const char *s, const char *end)
{
	const char *slash = memchr(s, '/', (size_t)(end - s));

	return (size_t)((slash != NULL ? slash : end) - s);
}

static void
seg_first(const char *str, size_t len, struct seg *g)
{
	g->s = str + 1;
	g->end = str + len;
	g->n = seg_span(g->s, g->end);
}

/* Whether g is the string's last segment. */
static bool
seg_last(const struct seg *g)
{
	return g->s + g->n >= g->end;
}

static bool
seg_next(struct seg *g)
{
	if (seg_last(g))
		return false;
	g->s += g->n + 1;
	g->n = seg_span(g->s, g->end);
	return true;
}

static bool
seg_is_any(const struct seg *g)
{
	return g->n == 2 && g->s[0] == '*' && g->s[1] == '*';
}

/* A glob segment against a path segment: '*' any run of bytes (greedy,
 * with one point to come back to, so linear in both). An empty path
 * segment (a trailing '/') is matched by an empty glob segment alone. */
static bool
seg_match(const struct seg *glob, const struct seg *path, bool nocase)
{
	size_t g = 0, p = 0, star = SIZE_MAX, mark = 0;

	if (path->n == 0)
		return glob->n == 0;
	while (p < path->n) {
		if (g < glob->n && glob->s[g] == '*') {
			star = g++;
			mark = p;
		} else if (g < glob->n &&
		           (glob->s[g] == path->s[p] ||
		            (nocase && tolower((unsigned char)glob->s[g]) ==
		                               tolower((unsigned char)path->s[p])))) {
			g++;
			p++;
		} else if (star != SIZE_MAX) {
			g = star + 1;
			p = ++mark;
		} else {
			return false;
		}
	}
	while (g < glob->n && glob->s[g] == '*')
		g++;
	return g == glob->n;
}

/* glob[0..glen) against path[0..plen), both '/'-rooted. */
static bool
glob_match(const char *glob, size_t glen, const char *path, size_t plen, bool nocase)
{
	struct seg g, p, star_g = {0}, mark = {0};
	bool g_more = true, p_more = true, have_star = false;

	if (glen == 0 || plen == 0 || glob[0] != '/' || path[0] != '/')
		return false;
	seg_first(glob, glen, &g);
	seg_first(path, plen, &p);
	/* The same greedy walk, over segments, with "**" as the star. */
	while (p_more) {
		if (g_more && seg_is_any(&g)) {
			have_star = true;
			star_g = g;
			mark = p;
			g_more = seg_next(&g);
		} else if (g_more && seg_match(&g, &p, nocase)) {
			g_more = seg_next(&g);
			p_more = seg_next(&p);
		} else if (have_star) {
			g = star_g;
			g_more = seg_next(&g);
			p = mark;
			p_more = seg_next(&p);
			mark = p;
		} else {
			return false;
		}
	}
	while (g_more && seg_is_any(&g))
		g_more = seg_next(&g);
	return !g_more;
}

bool
inspect_glob_match(const char *glob, const char *path)
{
	return glob_match(glob, strlen(glob), path, strlen(path), false);
}

/* The length of s without its trailing '/' ("/" keeps it). */
static size_t
untrailed_len(const char *s)
{
	size_t n = strlen(s);

	return n > 1 && s[n - 1] == '/' ? n - 1 : n;
}

bool
inspect_glob_match_loose(const char *glob, const char *path)
{
	/* Both without a trailing '/': a glob ending in '/' or in "**"
	 * then matches the path with or without one, and nothing that the
	 * exact match takes is lost (an empty last segment is matched only
	 * by an empty glob segment, dropped alike, or by "**"). */
	return glob_match(glob, untrailed_len(glob), path, untrailed_len(path), true);
}

const char *
inspect_glob_check(const char *glob, size_t *at)
{
	size_t dummy, len = strnlen(glob, INSPECT_GLOB_MAX + 1), stars = 0;
	struct seg g;

	if (at == NULL)
		at = &dummy;
	*at = 0;
	if (len > INSPECT_GLOB_MAX)
		return "a path glob longer than 1024 bytes";
	if (glob[0] != '/')
		return "a path glob starts with '/'";
	seg_first(glob, len, &g);
	for (bool more = true; more; more = seg_next(&g)) {
		bool last = seg_last(&g);

		*at = (size_t)(g.s - glob);
		if (g.n == 0 && !last)
			return "an empty segment ('//') in a path glob";
		if ((g.n == 1 && g.s[0] == '.') || (g.n == 2 && g.s[0] == '.' && g.s[1] == '.'))
			return "a '.' or '..' segment in a path glob (paths are matched resolved)";
		if (seg_is_any(&g)) {
			if (++stars > INSPECT_GLOB_MAX_STAR)
				return "more than four '**' segments in one path glob";
			continue;
		}
		for (size_t i = 0; i < g.n; i++) {
			unsigned char c = (unsigned char)g.s[i];
			int hi, lo, v;

			*at = (size_t)(g.s - glob) + i;
			if (c == '*') {
				if (i + 1 < g.n && g.s[i + 1] == '*')
					return "'**' is a whole segment of a path glob";
				continue;
			}
			if (c == ';')
				return "';' in a path glob (parameters are removed from paths)";
			if (c == '%') {
				hi = i + 2 < g.n ? hex_value((unsigned char)g.s[i + 1]) : -1;
				lo = hi >= 0 ? hex_value((unsigned char)g.s[i + 2]) : -1;
				if (hi < 0 || lo < 0)
					return "a '%' not followed by two hex digits in a path glob";
				v = hi * 16 + lo;
				if (g.s[i + 1] != hex_upper[hi] || g.s[i + 2] != hex_upper[lo])
					return "an escape in a path glob in lower case (write it as %2F)";
				if (v == 0)
					return "an encoded NUL (%00) in a path glob";
				if (v < 0x80 && unreserved((unsigned char)v))
					return "an escaped letter, digit or '-._~' in a path glob (write "
					       "the character)";
				i += 2;
				continue;
			}
			if (!pchar(c))
				return c == '?' || c == '#' ? "a query or fragment in a path glob"
				                            : "a byte no path may hold, in a path glob";
		}
	}
	return NULL;
}
