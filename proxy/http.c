/* HTTP/1.x heads, targets and framing for the forwarding proxy (RFC 9110,
 * RFC 9112). See http.h for the contract. */
#include "proxy/http.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/util.h"

_Static_assert(HTTP_MAX_EMPTY_LINES == 8, "http_parse_request's message says 8");

/* Chunk-size line with extensions, and one trailer line. */
#define HTTP_MAX_CHUNK_LINE 1024
#define HTTP_MAX_TRAILERS   8192

static bool
is_tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-value bytes: VCHAR, obs-text, SP, HTAB. */
static bool
is_field_char(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static struct http_span
span(size_t off, size_t len)
{
	struct http_span s = {(uint16_t)off, (uint16_t)len};
	return s;
}

static enum http_result
bad(struct http_head *h, const char *why)
{
	h->error = why;
	return HTTP_BAD_SYNTAX;
}

/* Find the end of the head (CRLFCRLF) within the limit. Returns its length
 * or 0 with *r set (and h->error for a bad byte). */
static size_t
head_end(const char *buf, size_t len, size_t start, enum http_result *r, struct http_head *h)
{
	size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;

	for (size_t i = start; i < lim; i++) {
		/* A bare LF or CR is refused at once rather than waited on. */
		if (buf[i] == '\n' && (i == start || buf[i - 1] != '\r')) {
			*r = bad(h, "bare LF (lines must end in CRLF)");
			return 0;
		}
		if (buf[i] == '\r' && i + 1 < lim && buf[i + 1] != '\n') {
			*r = bad(h, "bare CR");
			return 0;
		}
		if (i + 3 < lim && buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
		    buf[i + 3] == '\n')
			return i + 4;
	}
	*r = len >= HTTP_MAX_HEAD ? HTTP_TOO_LARGE : HTTP_INCOMPLETE;
	return 0;
}

/* Fields from pos up to the final CRLF at end-2. */
static enum http_result
parse_fields(const char *buf, size_t pos, size_t end, struct http_head *h)
{
	h->n_headers = 0;
	while (pos < end - 2) {
		size_t name_start = pos, name_end, v0, v1, eol;

		while (pos < end && is_tchar((unsigned char)buf[pos]))
			pos++;
		if (pos == name_start && (buf[pos] == ' ' || buf[pos] == '\t'))
			return bad(h, "obs-fold (a field line starting with whitespace)");
		if (pos == name_start || pos >= end || buf[pos] != ':')
			return bad(h, "a field name that is not a token followed by ':'");
		name_end = pos++;
		while (pos < end && (buf[pos] == ' ' || buf[pos] == '\t'))
			pos++;
		v0 = pos;
		while (pos < end && buf[pos] != '\r') {
			if (!is_field_char((unsigned char)buf[pos]))
				return bad(h, "a control byte in a field value");
			pos++;
		}
		if (pos + 1 >= end || buf[pos + 1] != '\n')
			return bad(h, "bare CR");
		eol = pos;
		v1 = eol;
		while (v1 > v0 && (buf[v1 - 1] == ' ' || buf[v1 - 1] == '\t'))
			v1--;
		if (h->n_headers == HTTP_MAX_HEADERS)
			return HTTP_TOO_MANY_HEADERS;
		h->headers[h->n_headers].name = span(name_start, name_end - name_start);
		h->headers[h->n_headers].value = span(v0, v1 - v0);
		h->n_headers++;
		pos = eol + 2;
	}
	return HTTP_OK;
}

static int
parse_version(const char *p, size_t len, int *minor)
{
	if (len != 8 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1'))
		return -1;
	*minor = p[7] - '0';
	return 0;
}

/* The request line buf[start..eol), eol at its CR: method SP target SP
 * version, one space each (RFC 9112 3). */
static enum http_result
parse_request_line(const char *buf, size_t start, size_t eol, struct http_head *h)
{
	size_t pos = start, sp;

	while (pos < eol && is_tchar((unsigned char)buf[pos]))
		pos++;
	if (pos == start || buf[pos] != ' ')
		return bad(h, "the method is not a token followed by one space");
	h->method = span(start, pos - start);
	sp = ++pos;
	while (pos < eol && buf[pos] > 0x20 && buf[pos] < 0x7f)
		pos++;
	if (pos == sp)
		return bad(h, "no request target after one space");
	if (pos == eol)
		return bad(h, "no HTTP version after the target (HTTP/0.9 is not served)");
	if (buf[pos] != ' ')
		return bad(h, "a control byte or non-ASCII byte in the request target");
	h->target = span(sp, pos - sp);
	sp = ++pos;
	if (parse_version(buf + sp, eol - sp, &h->minor) != 0)
		return bad(h, "the version is not HTTP/1.0 or HTTP/1.1");
	return HTTP_OK;
}

enum http_result
http_parse_request(const char *buf, size_t len, struct http_head *h)
{
	enum http_result r = HTTP_OK;
	size_t start = 0, end, eol;

	memset(h, 0, offsetof(struct http_head, headers));
	/* RFC 9112 2.2: ignore at least one empty line before the request.
	 * A few are skipped (servers skip more, so the sniffer reads them as
	 * a request too, and more are refused, never passed on unread). */
	while (start < 2 * HTTP_MAX_EMPTY_LINES && start + 1 < len && buf[start] == '\r' &&
	       buf[start + 1] == '\n')
		start += 2;
	if (start + 1 < len && buf[start] == '\r' && buf[start + 1] == '\n')
		return bad(h, "more than 8 empty lines before the request line");
	if ((end = head_end(buf, len, start, &r, h)) == 0) {
		const char *lf;

		if (r == HTTP_BAD_SYNTAX)
			return r;
		/* An early look at the request line rejects garbage at once
		 * instead of waiting out the header timeout: the whole line
		 * if it is in, else the method so far. */
		lf = memchr(buf + start, '\n', (len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD) - start);
		if (lf != NULL)
			return parse_request_line(buf, start, (size_t)(lf - buf) - 1, h) == HTTP_OK
			               ? r
			               : HTTP_BAD_SYNTAX;
		for (size_t i = start; i < len && i < HTTP_MAX_HEAD; i++) {
			if (buf[i] == ' ' || (buf[i] == '\r' && i + 1 == len))
				break;
			if (!is_tchar((unsigned char)buf[i]))
				return bad(h, "the method is not a token followed by one space");
		}
		return r;
	}
	eol = start;
	while (buf[eol] != '\r')
		eol++;
	if ((r = parse_request_line(buf, start, eol, h)) != HTTP_OK)
		return r;
	h->head_len = end;
	return parse_fields(buf, eol + 2, end, h);
}

enum http_result
http_parse_response(const char *buf, size_t len, struct http_head *h)
{
	enum http_result r = HTTP_OK;
	size_t end, pos;

	memset(h, 0, offsetof(struct http_head, headers));
	if ((end = head_end(buf, len, 0, &r, h)) == 0) {
		if (r == HTTP_BAD_SYNTAX)
			return r;
		if (len >= 5 && memcmp(buf, "HTTP/", 5) != 0)
			return HTTP_BAD_SYNTAX;
		return r;
	}
	if (end < 12 + 4 || parse_version(buf, 8, &h->minor) != 0 || buf[8] != ' ')
		return HTTP_BAD_SYNTAX;
	for (int i = 9; i < 12; i++) {
		if (buf[i] < '0' || buf[i] > '9')
			return HTTP_BAD_SYNTAX;
		h->status = h->status * 10 + (buf[i] - '0');
	}
	if (h->status < 100)
		return HTTP_BAD_SYNTAX;
	pos = 12;
	if (buf[pos] != ' ' && buf[pos] != '\r')
		return HTTP_BAD_SYNTAX;
	while (pos < end && buf[pos] != '\r') {
		if (!is_field_char((unsigned char)buf[pos]))
			return HTTP_BAD_SYNTAX;
		pos++;
	}
	if (buf[pos + 1] != '\n')
		return HTTP_BAD_SYNTAX;
	h->head_len = end;
	return parse_fields(buf, pos + 2, end, h);
}

const char *
http_result_str(enum http_result r)
{
	switch (r) {
	case HTTP_OK:
		return "ok";
	case HTTP_INCOMPLETE:
		return "incomplete head";
	case HTTP_TOO_LARGE:
		return "head larger than 16 KiB";
	case HTTP_TOO_MANY_HEADERS:
		return "more than 100 header fields";
	case HTTP_BAD_SYNTAX:
		return "malformed request head";
	}
	return "?";
}

static bool
is_alpha(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Whether s[0..len) starts with "scheme://" (RFC 3986 3.1). */
static bool
starts_scheme(const char *s, size_t len)
{
	size_t i = 1;

	if (len == 0 || !is_alpha((unsigned char)s[0]))
		return false;
	while (i < len && (is_alpha((unsigned char)s[i]) || (s[i] >= '0' && s[i] <= '9') ||
	                   s[i] == '+' || s[i] == '-' || s[i] == '.'))
		i++;
	return len - i >= 3 && memcmp(s + i, "://", 3) == 0;
}

/* Whitespace between the parts of a request line, as the most lenient
 * servers split it (Apache outside its strict mode: any isspace). */
static bool
is_line_space(char c)
{
	return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

/* Whether the line s[0..len) has whitespace followed by "HTTP/", in any
 * case: a version, wherever a lenient server would find it. */
static bool
has_version(const char *s, size_t len)
{
	for (size_t i = 1; i + 5 <= len; i++)
		if (is_line_space(s[i - 1]) && strncasecmp(s + i, "HTTP/", 5) == 0)
			return true;
	return false;
}

enum http_sniff
http_sniff_request(const char *buf, size_t len)
{
	size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD, i = 0, m, t;
	bool lines = false;
	const char *lf;

	/* Empty lines, however ended: nothing but HTTP starts so. Blanks
	 * too (Apache's lenient mode skips them), if a token follows. */
	for (; i < lim && (buf[i] == '\r' || buf[i] == '\n' || is_line_space(buf[i])); i++)
		lines = lines || buf[i] == '\r' || buf[i] == '\n';
	m = i;
	while (i < lim && is_tchar((unsigned char)buf[i]))
		i++;
	/* A token without its end: the rest decides, unless the limit is
	 * reached (that is HTTP for a server with larger limits). */
	if (i == lim)
		return lim == HTTP_MAX_HEAD ? HTTP_SNIFF_HTTP
		       : lines              ? HTTP_SNIFF_PARTIAL
		                            : HTTP_SNIFF_UNSURE;
	if (i == m || !is_line_space(buf[i]))
		return HTTP_SNIFF_OTHER;
	t = i;
	while (t < lim && is_line_space(buf[t]))
		t++;
	if ((lf = memchr(buf + t, '\n', lim - t)) == NULL)
		return lim == HTTP_MAX_HEAD ? HTTP_SNIFF_HTTP : HTTP_SNIFF_PARTIAL;
	/* A whole first line: a version, or a target only HTTP puts there
	 * (HTTP/0.9 has none, and is refused as HTTP, not tunnelled). */
	if (has_version(buf + t - 1, (size_t)(lf - buf) - t + 1) || buf[t] == '/' ||
	    buf[t] == '*' || starts_scheme(buf + t, (size_t)(lf - buf) - t))
		return HTTP_SNIFF_HTTP;
	return HTTP_SNIFF_OTHER;
}

bool
http_span_eq(const char *buf, struct http_span s, const char *str)
{
	return strlen(str) == s.len && strncasecmp(buf + s.off, str, s.len) == 0;
}

int
http_find_header(const char *buf, const struct http_head *h, const char *name, size_t from)
{
	for (size_t i = from; i < h->n_headers; i++)
		if (http_span_eq(buf, h->headers[i].name, name))
			return (int)i;
	return -1;
}

/* The next element of a comma-separated list value from *i on, without
 * its surrounding white space: [*s, *e); false at the end (empty elements
 * are skipped). */
static bool
list_next(const char *v, size_t len, size_t *i, size_t *s, size_t *e)
{
	while (*i < len && (v[*i] == ' ' || v[*i] == '\t' || v[*i] == ','))
		(*i)++;
	if (*i == len)
		return false;
	*s = *i;
	while (*i < len && v[*i] != ',')
		(*i)++;
	*e = *i;
	while (*e > *s && (v[*e - 1] == ' ' || v[*e - 1] == '\t'))
		(*e)--;
	return true;
}

static bool
list_elem_is(const char *v, size_t s, size_t e, const char *token, size_t tl)
{
	return e - s == tl && strncasecmp(v + s, token, tl) == 0;
}

/* Whether a comma-separated list value holds token (case-insensitive). */
static bool
list_has(const char *v, size_t len, const char *token)
{
	size_t tl = strlen(token), i = 0, s, e;

	while (list_next(v, len, &i, &s, &e))
		if (list_elem_is(v, s, e, token, tl))
			return true;
	return false;
}

bool
http_has_token(const char *buf, const struct http_head *h, const char *name, const char *token)
{
	for (int i = http_find_header(buf, h, name, 0); i >= 0;
	     i = http_find_header(buf, h, name, (size_t)i + 1))
		if (list_has(buf + h->headers[i].value.off, h->headers[i].value.len, token))
			return true;
	return false;
}

int
http_parse_authority(const char *s, size_t len, bool need_port, uint16_t default_port,
                     struct http_authority *out)
{
	size_t hl, i = 0;
	const char *host;

	memset(out, 0, sizeof(*out));
	if (len == 0)
		return -1;
	if (s[0] == '[') {
		char tmp[INET6_ADDRSTRLEN];
		struct in6_addr a6;
		const char *close = memchr(s, ']', len);

		if (close == NULL)
			return -1;
		host = s + 1;
		hl = (size_t)(close - host);
		if (hl == 0 || hl >= sizeof(tmp))
			return -1;
		memcpy(tmp, host, hl);
		tmp[hl] = '\0';
		if (inet_pton(AF_INET6, tmp, &a6) != 1)
			return -1;
		i = (size_t)(close - s) + 1;
		out->ip_literal = true;
	} else {
		host = s;
		while (i < len && s[i] != ':')
			i++;
		hl = i;
		if (hl == 0)
			return -1;
		for (size_t k = 0; k < hl; k++) {
			unsigned char c = (unsigned char)s[k];
			if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			      (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'))
				return -1;
		}
	}
	if (hl >= sizeof(out->host))
		return -1;
	for (size_t k = 0; k < hl; k++) {
		char c = host[k];
		out->host[k] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
	}
	out->host[hl] = '\0';
	if (!out->ip_literal) {
		struct in_addr a4;
		out->ip_literal = inet_pton(AF_INET, out->host, &a4) == 1;
	}
	if (i < len) {
		unsigned port = 0;

		if (s[i] != ':' || i + 1 == len || len - i - 1 > 5)
			return -1;
		for (size_t k = i + 1; k < len; k++) {
			if (s[k] < '0' || s[k] > '9')
				return -1;
			port = port * 10 + (unsigned)(s[k] - '0');
		}
		if (port == 0 || port > 65535)
			return -1;
		out->port = (uint16_t)port;
		out->has_port = true;
	} else {
		if (need_port)
			return -1;
		out->port = default_port;
	}
	return 0;
}

/* "http://" (or, with https, also "https://") and an authority without
 * userinfo, then the path at *path_off. Returns 0 or -1. */
static int
parse_absolute(const char *s, size_t len, bool https, struct http_authority *out, size_t *path_off)
{
	size_t a, e;
	uint16_t port;

	if (len >= 8 && strncasecmp(s, "http://", 7) == 0) {
		a = 7;
		port = 80;
	} else if (https && len >= 9 && strncasecmp(s, "https://", 8) == 0) {
		a = 8;
		port = 443;
	} else {
		return -1;
	}
	e = a;
	while (e < len && s[e] != '/' && s[e] != '?' && s[e] != '#')
		e++;
	if (memchr(s, '#', len) != NULL || memchr(s + a, '@', e - a) != NULL)
		return -1;
	if (http_parse_authority(s + a, e - a, false, port, out) != 0)
		return -1;
	*path_off = e;
	return 0;
}

int
http_parse_absolute(const char *s, size_t len, struct http_authority *out, const char **path,
                    size_t *path_len)
{
	size_t e;

	if (parse_absolute(s, len, false, out, &e) != 0)
		return -1;
	*path = s + e;
	*path_len = len - e;
	return 0;
}

/* Host names equal but for case and one trailing dot. */
static bool
same_host(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la > 0 && a[la - 1] == '.')
		la--;
	if (lb > 0 && b[lb - 1] == '.')
		lb--;
	return la == lb && strncasecmp(a, b, la) == 0;
}

enum http_name
http_request_name(const char *buf, const struct http_head *h, uint16_t default_port,
                  struct http_authority *name, struct http_authority *other)
{
	const char *t = buf + h->target.off;
	size_t tl = h->target.len, path_off;
	int hi = http_find_header(buf, h, "host", 0);
	bool from_target = false;
	struct http_authority host;

	memset(name, 0, sizeof(*name));
	if (http_span_eq(buf, h->method, "CONNECT")) {
		if (http_parse_authority(t, tl, true, 0, name) != 0)
			return HTTP_NAME_BAD_TARGET;
		from_target = true;
	} else if (tl > 0 && t[0] == '/') {
		/* origin-form: the name is Host's */
	} else if (tl == 1 && t[0] == '*' && http_span_eq(buf, h->method, "OPTIONS")) {
		/* asterisk-form: the same */
	} else if (parse_absolute(t, tl, true, name, &path_off) == 0) {
		from_target = true;
	} else {
		return HTTP_NAME_BAD_TARGET;
	}
	if (hi < 0)
		return from_target ? HTTP_NAME_OK : HTTP_NAME_NONE;
	if (http_find_header(buf, h, "host", (size_t)hi + 1) >= 0)
		return HTTP_NAME_MANY_HOSTS;
	if (http_parse_authority(buf + h->headers[hi].value.off, h->headers[hi].value.len, false,
	                         default_port, &host) != 0)
		return HTTP_NAME_BAD_HOST;
	if (!from_target) {
		*name = host;
		return HTTP_NAME_OK;
	}
	if (!same_host(name->host, host.host) ||
	    (name->has_port && host.has_port && name->port != host.port)) {
		*other = host;
		return HTTP_NAME_MISMATCH;
	}
	return HTTP_NAME_OK;
}

/* Whether a comma-separated list value has at least one element and every
 * element is token (case-insensitive). */
static bool
list_only(const char *v, size_t len, const char *token)
{
	size_t tl = strlen(token), i = 0, s, e, n = 0;

	while (list_next(v, len, &i, &s, &e)) {
		if (!list_elem_is(v, s, e, token, tl))
			return false;
		n++;
	}
	return n > 0;
}

enum http_upgrade
http_request_upgrade(const char *buf, const struct http_head *h, int *idx)
{
	enum http_upgrade u = HTTP_UPGRADE_NONE;

	for (int i = http_find_header(buf, h, "upgrade", 0); i >= 0;
	     i = http_find_header(buf, h, "upgrade", (size_t)i + 1)) {
		if (!list_only(buf + h->headers[i].value.off, h->headers[i].value.len,
		               "websocket")) {
			*idx = i;
			return HTTP_UPGRADE_OTHER;
		}
		u = HTTP_UPGRADE_WEBSOCKET;
	}
	return u;
}

const char *
http_connection_framing(const char *buf, const struct http_head *h)
{
	static const char *const framing[] = {"Content-Length", "Transfer-Encoding", "Host"};

	for (size_t i = 0; i < sizeof(framing) / sizeof(framing[0]); i++)
		if (http_has_token(buf, h, "connection", framing[i]))
			return framing[i];
	return NULL;
}

/* Parse a Content-Length value: 1*DIGIT, at most 15 digits. */
static int
parse_length(const char *v, size_t len, uint64_t *out)
{
	uint64_t n = 0;

	if (len == 0 || len > 15)
		return -1;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return -1;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n;
	return 0;
}

/* The Content-Length of a message: 0 none, 1 found, -1 malformed or
 * conflicting. */
static int
content_length(const char *buf, const struct http_head *h, uint64_t *length)
{
	int found = 0;

	for (int i = http_find_header(buf, h, "content-length", 0); i >= 0;
	     i = http_find_header(buf, h, "content-length", (size_t)i + 1)) {
		uint64_t n;
		if (parse_length(buf + h->headers[i].value.off, h->headers[i].value.len, &n) != 0)
			return -1;
		if (found && n != *length)
			return -1;
		*length = n;
		found = 1;
	}
	return found;
}

int
http_request_framing(const char *buf, const struct http_head *h, enum http_framing *f,
                     uint64_t *length)
{
	int te = http_find_header(buf, h, "transfer-encoding", 0);
	int cl;

	*length = 0;
	cl = content_length(buf, h, length);
	if (cl < 0)
		return -1;
	if (te >= 0) {
		if (cl > 0 || http_find_header(buf, h, "transfer-encoding", (size_t)te + 1) >= 0 ||
		    !http_span_eq(buf, h->headers[te].value, "chunked") || h->minor == 0)
			return -1;
		*f = HTTP_BODY_CHUNKED;
		return 0;
	}
	*f = (cl > 0 && *length > 0) ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
	return 0;
}

int
http_response_framing(const char *buf, const struct http_head *h, bool head_request,
                      enum http_framing *f, uint64_t *length)
{
	int te = http_find_header(buf, h, "transfer-encoding", 0);
	int cl;

	*length = 0;
	if (head_request || (h->status >= 100 && h->status < 200) || h->status == 204 ||
	    h->status == 304) {
		*f = HTTP_BODY_NONE;
		return 0;
	}
	if (te >= 0) {
		/* RFC 9112 6.3: chunked last means chunked; otherwise the
		 * body runs until close. */
		int last = te;
		for (int i = te; i >= 0;
		     i = http_find_header(buf, h, "transfer-encoding", (size_t)i + 1))
			last = i;
		const char *v = buf + h->headers[last].value.off;
		size_t vl = h->headers[last].value.len, s = vl;
		while (s > 0 && v[s - 1] != ',')
			s--;
		while (s < vl && (v[s] == ' ' || v[s] == '\t'))
			s++;
		*f = (vl - s == 7 && strncasecmp(v + s, "chunked", 7) == 0) ? HTTP_BODY_CHUNKED
		                                                            : HTTP_BODY_CLOSE;
		return 0;
	}
	cl = content_length(buf, h, length);
	if (cl < 0)
		return -1;
	*f = cl > 0 ? (*length > 0 ? HTTP_BODY_LENGTH : HTTP_BODY_NONE) : HTTP_BODY_CLOSE;
	return 0;
}

bool
http_is_hop_by_hop(const char *buf, const struct http_head *h, size_t idx)
{
	static const char *const fixed[] = {
	        "connection", "proxy-connection", "keep-alive",          "te",
	        "trailer",    "upgrade",          "proxy-authorization", "proxy-authenticate",
	};
	struct http_span name = h->headers[idx].name;
	char lname[64];

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (http_span_eq(buf, name, fixed[i]))
			return true;
	if (name.len >= sizeof(lname))
		return false;
	memcpy(lname, buf + name.off, name.len);
	lname[name.len] = '\0';
	return http_has_token(buf, h, "connection", lname);
}

/* Append len bytes to out at *pos; -1 if it would not fit. */
static int
put(char *out, size_t outlen, size_t *pos, const char *s, size_t len)
{
	if (len > outlen - *pos)
		return -1;
	memcpy(out + *pos, s, len);
	*pos += len;
	return 0;
}

static int
put_str(char *out, size_t outlen, size_t *pos, const char *s)
{
	return put(out, outlen, pos, s, strlen(s));
}

static int
put_fields(const char *buf, const struct http_head *h, bool request, bool drop_length, char *out,
           size_t outlen, size_t *pos)
{
	for (size_t i = 0; i < h->n_headers; i++) {
		const struct http_header *hd = &h->headers[i];

		if (http_is_hop_by_hop(buf, h, i))
			continue;
		if (request && http_span_eq(buf, hd->name, "host"))
			continue;
		if (drop_length && http_span_eq(buf, hd->name, "content-length"))
			continue;
		if (put(out, outlen, pos, buf + hd->name.off, hd->name.len) != 0 ||
		    put_str(out, outlen, pos, ": ") != 0 ||
		    put(out, outlen, pos, buf + hd->value.off, hd->value.len) != 0 ||
		    put_str(out, outlen, pos, "\r\n") != 0)
			return -1;
	}
	return 0;
}

ssize_t
http_rewrite_request(const char *buf, const struct http_head *h, const char *path, size_t path_len,
                     const char *host_hdr, char *out, size_t outlen)
{
	size_t pos = 0;

	if (put(out, outlen, &pos, buf + h->method.off, h->method.len) != 0 ||
	    put_str(out, outlen, &pos, " ") != 0)
		return -1;
	if (path_len == 0 || path[0] == '?')
		if (put_str(out, outlen, &pos, "/") != 0)
			return -1;
	if (put(out, outlen, &pos, path, path_len) != 0 ||
	    put_str(out, outlen, &pos, " HTTP/1.1\r\nHost: ") != 0 ||
	    put_str(out, outlen, &pos, host_hdr) != 0 || put_str(out, outlen, &pos, "\r\n") != 0 ||
	    put_fields(buf, h, true, false, out, outlen, &pos) != 0 ||
	    put_str(out, outlen, &pos,
	            h->minor == 0 ? "Via: 1.0 airlock\r\n\r\n" : "Via: 1.1 airlock\r\n\r\n") != 0)
		return -1;
	return (ssize_t)pos;
}

ssize_t
http_rewrite_response(const char *buf, const struct http_head *h, bool close, char *out,
                      size_t outlen)
{
	size_t pos = 0, line_end = 0;
	bool te = http_find_header(buf, h, "transfer-encoding", 0) >= 0;

	while (line_end + 1 < h->head_len && buf[line_end] != '\r')
		line_end++;
	/* "HTTP/1.x" is replaced by our own version: we speak 1.1. */
	if (line_end < 8 || put_str(out, outlen, &pos, "HTTP/1.1") != 0 ||
	    put(out, outlen, &pos, buf + 8, line_end - 8) != 0 ||
	    put_str(out, outlen, &pos, "\r\n") != 0 ||
	    put_fields(buf, h, false, te, out, outlen, &pos) != 0 ||
	    put_str(out, outlen, &pos,
	            h->minor == 0 ? "Via: 1.0 airlock\r\n" : "Via: 1.1 airlock\r\n") != 0 ||
	    (close && put_str(out, outlen, &pos, "Connection: close\r\n") != 0) ||
	    put_str(out, outlen, &pos, "\r\n") != 0)
		return -1;
	return (ssize_t)pos;
}

enum {
	CH_SIZE_START,
	CH_SIZE,
	CH_SIZE_BWS, /* whitespace after the size: only ';' or CR may follow */
	CH_EXT,
	CH_SIZE_LF,
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TRAILER_START,
	CH_TRAILER_NAME,  /* a trailer field's name, up to ':' */
	CH_TRAILER_VALUE, /* its value, up to CR */
	CH_TRAILER_LF,
	CH_LAST_LF,
	CH_DONE,
};

void
http_chunked_init(struct http_chunked *c)
{
	memset(c, 0, sizeof(*c));
	c->state = CH_SIZE_START;
}

ssize_t
http_chunked_feed(struct http_chunked *c, const uint8_t *p, size_t len, bool *done)
{
	size_t i = 0;

	*done = c->state == CH_DONE;
	while (i < len && c->state != CH_DONE) {
		uint8_t b = p[i];
		int hv;

		switch (c->state) {
		case CH_SIZE_START:
		case CH_SIZE:
			if ((hv = hex_value(b)) >= 0) {
				/* 15 hex digits: far beyond any real body,
				 * far from overflow. */
				if (++c->line > 15)
					return -1;
				c->remaining = c->remaining << 4 | (uint64_t)hv;
				c->state = CH_SIZE;
			} else if (c->state == CH_SIZE && b == ';') {
				c->state = CH_EXT;
			} else if (c->state == CH_SIZE && (b == ' ' || b == '\t')) {
				c->state = CH_SIZE_BWS;
			} else if (c->state == CH_SIZE && b == '\r') {
				c->state = CH_SIZE_LF;
			} else {
				return -1;
			}
			break;
		case CH_SIZE_BWS:
			/* RFC 9112 7.1.1: whitespace (BWS) only before an
			 * extension's ';'. "1 0" is not size 1 with an extension
			 * " 0": a server that drops the space reads 0x10. */
			if (++c->line > HTTP_MAX_CHUNK_LINE)
				return -1;
			if (b == ';')
				c->state = CH_EXT;
			else if (b == '\r')
				c->state = CH_SIZE_LF;
			else if (b != ' ' && b != '\t')
				return -1;
			break;
		case CH_EXT:
			/* The line ends at its CR whatever the extension says
			 * (a quoted-string holds no CR or LF); no control byte
			 * in it but HTAB, as in a field value. */
			if (++c->line > HTTP_MAX_CHUNK_LINE)
				return -1;
			if (b == '\r')
				c->state = CH_SIZE_LF;
			else if (!is_field_char(b))
				return -1;
			break;
		case CH_SIZE_LF:
			if (b != '\n')
				return -1;
			c->line = 0;
			c->state = c->remaining == 0 ? CH_TRAILER_START : CH_DATA;
			break;
		case CH_DATA: {
			size_t n = len - i;
			if (n > c->remaining)
				n = (size_t)c->remaining;
			c->remaining -= n;
			i += n;
			if (c->remaining == 0)
				c->state = CH_DATA_CR;
			continue;
		}
		case CH_DATA_CR:
			if (b != '\r')
				return -1;
			c->state = CH_DATA_LF;
			break;
		case CH_DATA_LF:
			if (b != '\n')
				return -1;
			c->line = 0;
			c->state = CH_SIZE_START;
			break;
		case CH_TRAILER_START:
			if (b == '\r') {
				c->state = CH_LAST_LF;
				break;
			}
			/* A trailer line is a field line, checked as a head's
			 * are (parse_fields): a name token, ':', a value. Else
			 * "0\r\nGET / HTTP/1.1\r\n..." would be a trailer here
			 * and the next request to a server that ends the body
			 * at the last chunk's line. Nor obs-fold. */
			c->state = CH_TRAILER_NAME;
			/* fall through */
		case CH_TRAILER_NAME:
			if (++c->trailer > HTTP_MAX_TRAILERS)
				return -1;
			if (b == ':' && c->line > 0)
				c->state = CH_TRAILER_VALUE;
			else if (is_tchar(b))
				c->line++;
			else
				return -1;
			break;
		case CH_TRAILER_VALUE:
			if (++c->trailer > HTTP_MAX_TRAILERS)
				return -1;
			if (b == '\r')
				c->state = CH_TRAILER_LF;
			else if (!is_field_char(b))
				return -1;
			break;
		case CH_TRAILER_LF:
			if (b != '\n')
				return -1;
			c->line = 0;
			c->state = CH_TRAILER_START;
			break;
		case CH_LAST_LF:
			if (b != '\n')
				return -1;
			c->state = CH_DONE;
			break;
		default:
			return -1;
		}
		i++;
	}
	*done = c->state == CH_DONE;
	return (ssize_t)i;
}

uint64_t
http_chunked_data_left(const struct http_chunked *c)
{
	return c->state == CH_DATA ? c->remaining : 0;
}

void
http_chunked_skip(struct http_chunked *c, uint64_t n)
{
	if (c->state != CH_DATA || n > c->remaining)
		return;
	c->remaining -= n;
	if (c->remaining == 0)
		c->state = CH_DATA_CR;
}
