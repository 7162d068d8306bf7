/* A pure, bounded HTTP/1.x message-head parser and the few pieces of
 * RFC 9110/9112 a forwarding proxy needs: request targets, body framing,
 * hop-by-hop header removal and a streaming chunked-body delimiter.
 *
 * Nothing here allocates or does I/O. Parsed fields are spans (offset,
 * length) into the caller's buffer, which must stay unchanged while they
 * are used. The input is never trusted: every length is bounded, every
 * byte checked, and anything ambiguous is an error rather than a guess
 * (request smuggling lives in the guesses). */
#ifndef AIRLOCK_PROXY_HTTP_H
#define AIRLOCK_PROXY_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define HTTP_MAX_HEAD    16384 /* request or response head, CRLFCRLF included */
#define HTTP_MAX_HEADERS 100
#define HTTP_HOST_MAX    256 /* a DNS name or [v6 literal] plus the NUL */
/* Empty lines (CRLF) skipped before a request line; more are refused. */
#define HTTP_MAX_EMPTY_LINES 8

struct http_span {
	uint16_t off, len;
};

struct http_header {
	struct http_span name, value; /* value without surrounding whitespace */
};

struct http_head {
	struct http_span method, target; /* request */
	int status;                      /* response: 100..999 */
	int minor;                       /* HTTP/1.minor: 0 or 1 */
	size_t head_len;                 /* bytes of the head, CRLFCRLF included */
	const char *error;               /* HTTP_BAD_SYNTAX: what was wrong (static) */
	size_t n_headers;
	struct http_header headers[HTTP_MAX_HEADERS];
};

enum http_result {
	HTTP_OK = 0,
	HTTP_INCOMPLETE,       /* no CRLFCRLF yet within the limit: read more */
	HTTP_TOO_LARGE,        /* no end of head within HTTP_MAX_HEAD bytes */
	HTTP_TOO_MANY_HEADERS, /* more than HTTP_MAX_HEADERS fields */
	HTTP_BAD_SYNTAX,       /* anything else RFC 9112 does not allow */
};

/* Parse a request head (up to HTTP_MAX_EMPTY_LINES leading empty lines
 * skipped, as RFC 9112 2.2 allows). Lines must end in CRLF; obs-fold, bare
 * CR/LF, control bytes and whitespace before a colon are errors, and so is
 * a request line that is complete and wrong, before the rest arrives.
 * Errors set h->error to a short text saying what was seen. */
enum http_result http_parse_request(const char *buf, size_t len, struct http_head *h);
/* Parse a response head (status line, fields). */
enum http_result http_parse_response(const char *buf, size_t len, struct http_head *h);
const char *http_result_str(enum http_result r);

/* What the first bytes of a stream say about it being an HTTP/1 request,
 * as a server would read it: servers skip empty lines (nginx any number,
 * bare LF too) and take any token as a method (RFC 9110 9.1), so the
 * sniffer must too. Bytes it calls HTTP go to http_parse_request, which
 * accepts them or says why it refuses them; bytes it calls OTHER are a
 * protocol that names nothing. */
enum http_sniff {
	HTTP_SNIFF_OTHER = 0, /* not an HTTP/1 request */
	HTTP_SNIFF_UNSURE,    /* too few bytes to tell: a token, no blank yet */
	/* The start of a request line: empty lines, or a token and a blank,
	 * and the line not complete yet. More bytes may still make it OTHER;
	 * at a deadline it is an incomplete request. */
	HTTP_SNIFF_PARTIAL,
	/* A complete first line with a version ("... HTTP/") or an origin-
	 * or absolute-form target (HTTP/0.9), or no end of it within
	 * HTTP_MAX_HEAD: HTTP as far as any server is concerned. Final: more
	 * bytes never change it. */
	HTTP_SNIFF_HTTP,
};
enum http_sniff http_sniff_request(const char *buf, size_t len);

/* Case-insensitive comparison of a span with a NUL-terminated string. */
bool http_span_eq(const char *buf, struct http_span s, const char *str);
/* Index of the first header named name at or after from, or -1. */
int http_find_header(const char *buf, const struct http_head *h, const char *name, size_t from);
/* True when some header named name has token in its comma-separated value
 * ("Connection: close", "Transfer-Encoding: chunked"). */
bool http_has_token(const char *buf, const struct http_head *h, const char *name,
                    const char *token);

/* A parsed authority (host[:port]): host lowercased; an IPv6 literal keeps
 * its brackets off (ip_literal is set for v4 and v6 literals). */
struct http_authority {
	char host[HTTP_HOST_MAX];
	uint16_t port;
	bool has_port;
	bool ip_literal;
};

/* Parse "host", "host:port" or "[v6]:port". Host names may hold letters,
 * digits, '-', '_' and '.'; no userinfo, no percent-encoding. With
 * need_port the port is required (CONNECT). Returns 0 or -1. */
int http_parse_authority(const char *s, size_t len, bool need_port, uint16_t default_port,
                         struct http_authority *out);

/* Parse an absolute-form target "http://authority[/path][?query]". On
 * success *path and *path_len point into s at the origin-form path (an empty
 * path is returned as length 0: send "/"). Only the http scheme is
 * accepted. Returns 0 or -1. */
int http_parse_absolute(const char *s, size_t len, struct http_authority *out, const char **path,
                        size_t *path_len);

/* The name a request presents to the server that reads it (RFC 9112
 * 3.2): an absolute-form target's authority (the origin ignores Host for
 * it, 3.2.2), a CONNECT's authority-form target, else Host. */
enum http_name {
	HTTP_NAME_OK = 0,     /* *name holds it */
	HTTP_NAME_NONE,       /* origin- or asterisk-form and no Host (HTTP/1.0) */
	HTTP_NAME_BAD_TARGET, /* not origin-form, absolute-form (http, https, no
	                       * userinfo), CONNECT's authority-form or OPTIONS * */
	HTTP_NAME_BAD_HOST,   /* a Host that is not host[:port] */
	HTTP_NAME_MANY_HOSTS, /* more than one Host */
	HTTP_NAME_MISMATCH,   /* Host names another host, or another explicit
	                       * port, than the target: *other holds Host's */
};
/* default_port is the port a Host without one means (the connection's).
 * Host names are compared lowercased and without a trailing dot. */
enum http_name http_request_name(const char *buf, const struct http_head *h, uint16_t default_port,
                                 struct http_authority *name, struct http_authority *other);

/* What the request's Upgrade fields ask for (every field, every protocol
 * in them, whether or not Connection lists "upgrade": a server may not
 * check). */
enum http_upgrade {
	HTTP_UPGRADE_NONE = 0,
	HTTP_UPGRADE_WEBSOCKET, /* websocket and nothing else */
	HTTP_UPGRADE_OTHER,     /* anything else (h2c, empty, ...); *idx the field */
};
enum http_upgrade http_request_upgrade(const char *buf, const struct http_head *h, int *idx);

/* The framing or routing field (Content-Length, Transfer-Encoding, Host)
 * that a Connection field of the message lists, as its canonical name, or
 * NULL. Such a message is refused: a hop that drops the field as
 * hop-by-hop (RFC 9110 7.6.1) frames or routes the rest differently from
 * one that keeps it, which is request smuggling. */
const char *http_connection_framing(const char *buf, const struct http_head *h);
/* The reason for refusing such a message, with the field's name for %s. */
#define HTTP_CONNECTION_FRAMING_WHY                                                                \
	"Connection names %s: a hop that drops it frames or routes the rest differently "          \
	"(request smuggling)"

enum http_framing {
	HTTP_BODY_NONE,
	HTTP_BODY_LENGTH,  /* Content-Length bytes */
	HTTP_BODY_CHUNKED, /* until the last chunk and trailers */
	HTTP_BODY_CLOSE,   /* response only: until the server closes */
};

/* Body framing of a request (RFC 9112 6.3). Both Transfer-Encoding and
 * Content-Length, any coding but a lone "chunked", or conflicting or
 * malformed lengths are errors: such a body cannot be forwarded safely.
 * Returns 0 or -1. */
int http_request_framing(const char *buf, const struct http_head *h, enum http_framing *f,
                         uint64_t *length);
/* Body framing of a response to a request with the given method (HEAD,
 * CONNECT) and status. Returns 0 or -1. */
int http_response_framing(const char *buf, const struct http_head *h, bool head_request,
                          enum http_framing *f, uint64_t *length);

/* Whether a header is hop-by-hop for this message: Connection, the names
 * it lists, Proxy-Connection, Keep-Alive, TE, Trailer, Upgrade,
 * Proxy-Authorization, Proxy-Authenticate (RFC 9110 7.6.1). */
bool http_is_hop_by_hop(const char *buf, const struct http_head *h, size_t idx);

/* Write the head to send to the origin: "METHOD path HTTP/1.1", Host from
 * host_hdr, every end-to-end field, a Via. Returns the length written, or
 * -1 when out is too small. */
ssize_t http_rewrite_request(const char *buf, const struct http_head *h, const char *path,
                             size_t path_len, const char *host_hdr, char *out, size_t outlen);
/* Write the response head for the client: the status line as received
 * (HTTP/1.1 for the client), end-to-end fields, a Via, and "Connection:
 * close" when close is set. Content-Length is dropped if Transfer-Encoding
 * is present. Returns the length written or -1. */
ssize_t http_rewrite_response(const char *buf, const struct http_head *h, bool close, char *out,
                              size_t outlen);

/* Streaming delimiter of a chunked body (RFC 9112 7.1): tells how many of
 * the bytes offered belong to the body, without changing them. */
struct http_chunked {
	int state;
	uint64_t remaining; /* bytes left in the current chunk */
	unsigned line;      /* bytes of the size line, or of a trailer field name */
	unsigned trailer;   /* bytes of trailer section so far */
};

void http_chunked_init(struct http_chunked *c);
/* Consume up to len bytes; returns how many belong to the body (< len only
 * when the body ended), sets *done at its end, or returns -1 on a syntax
 * error or an over-long line. Strict where hops could disagree: after the
 * size only whitespace before ';' or CRLF, no control byte in an
 * extension, each trailer line a field line (token ':' value). */
ssize_t http_chunked_feed(struct http_chunked *c, const uint8_t *p, size_t len, bool *done);
/* Bytes of the current chunk's data still to come, 0 outside one: they
 * may pass unread (http_chunked_skip) instead of through _feed. */
uint64_t http_chunked_data_left(const struct http_chunked *c);
/* n (at most http_chunked_data_left) bytes of chunk data went by unread. */
void http_chunked_skip(struct http_chunked *c, uint64_t n);

#endif
