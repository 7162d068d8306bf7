/* What bytes arriving on a connection are: a TLS ClientHello and the
 * server name it asks for, an HTTP/1 request head and the name it
 * presents, not known yet, or something that names nothing (DESIGN.md,
 * decision 1). Pure and bounded like the two parsers it joins (sni.h,
 * http.h): no allocation, no I/O, every answer from buf alone.
 *
 * The transparent sniffer asks it about the first bytes; it is meant as
 * well for any later look at bytes on a connection that must stay bound to
 * its name (a head after a silent start, the first bytes inside a tunnel,
 * the next request on a keep-alive connection): the same bytes get the
 * same answer wherever they are seen.
 *
 * What it refuses (PEEK_BAD) it refuses for every caller: a ClientHello
 * naming several servers; a head that is malformed, ambiguously framed,
 * names a framing header in Connection, asks to upgrade to anything but
 * WebSocket, or whose Host and target disagree. What depends on the
 * policy (ECH on a rule that opts in) is reported, not decided. */
#ifndef AIRLOCK_PROXY_PEEK_H
#define AIRLOCK_PROXY_PEEK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/verdict.h"
#include "proxy/http.h"
#include "proxy/sni.h"

/* The most bytes worth looking at: a ClientHello's records. A caller that
 * has this many and still gets PEEK_MORE never will; peek_parse() answers
 * otherwise for any len >= PEEK_MAX_INPUT. */
#define PEEK_MAX_INPUT SNI_MAX_INPUT

enum peek_kind {
	PEEK_MORE = 0, /* not enough bytes yet: see .proto for what it looks like */
	PEEK_TLS,      /* a complete ClientHello: .name (maybe ""), .ech, .len */
	PEEK_HTTP,     /* a complete request head: .name (maybe ""), .port, .len, the head */
	PEEK_OTHER,    /* neither: a protocol that presents no name we read */
	PEEK_BAD,      /* a ClientHello or a head that is refused: .error */
};

/* What the bytes look like so far (every kind sets it). */
enum peek_proto {
	PEEK_PROTO_UNKNOWN = 0, /* too few bytes to tell (PEEK_MORE), or PEEK_OTHER */
	PEEK_PROTO_TLS,
	PEEK_PROTO_HTTP,
};

/* Why PEEK_BAD; peek_reason() turns it into a log reason. */
enum peek_error {
	PEEK_OK = 0,
	PEEK_TLS_MALFORMED,   /* broken, oversized, or a bad host_name */
	PEEK_TLS_TOO_LARGE,   /* not complete within PEEK_MAX_INPUT bytes */
	PEEK_TLS_MANY_NAMES,  /* server_name lists several: .name, .detail */
	PEEK_HTTP_HEAD,       /* malformed or over a limit: .http, .head_error */
	PEEK_HTTP_TARGET,     /* a request target no server would route by */
	PEEK_HTTP_HOST,       /* a Host that is not host[:port] */
	PEEK_HTTP_MANY_HOSTS, /* more than one Host */
	PEEK_HTTP_MISMATCH,   /* target names .name, Host names .detail */
	PEEK_HTTP_FRAMING,    /* Content-Length / Transfer-Encoding ambiguous */
	PEEK_HTTP_CONNECTION, /* Connection names the framing field .detail */
	PEEK_HTTP_UPGRADE,    /* Upgrade to .detail, not websocket */
};

struct peek {
	enum peek_proto proto;
	enum peek_error error;
	/* The name the bytes present: the SNI host_name as sent, or the
	 * request's (lowercased) authority host; "" when there is none. For
	 * PEEK_BAD, whatever was read before the refusal. */
	char name[HTTP_HOST_MAX];
	bool ip_literal; /* name is an IPv4 or IPv6 literal */
	uint16_t port;   /* HTTP: the authority's port, if has_port */
	bool has_port;
	bool ech;                   /* TLS: encrypted_client_hello is present (sni.h) */
	bool websocket;             /* HTTP: the request asks to upgrade to WebSocket */
	enum http_result http;      /* PEEK_HTTP_HEAD */
	const char *head_error;     /* PEEK_HTTP_HEAD, HTTP_BAD_SYNTAX: what (static) */
	char detail[HTTP_HOST_MAX]; /* PEEK_BAD: the other thing seen, printable */
	/* PEEK_TLS: bytes up to the end of the ClientHello's last record;
	 * PEEK_HTTP: bytes of the head (the body, if any, follows). */
	size_t len;
};

/* Look at buf[0..len), the bytes of a connection from some message
 * boundary on (its first byte, or where the previous head's message
 * ended). h is the caller's scratch head: for PEEK_HTTP, and PEEK_BAD
 * with proto HTTP and an error other than PEEK_HTTP_HEAD, it holds the
 * parsed head (spans into buf) for the method and target. default_port is
 * the port a Host without one means (the connection's destination port).
 * Returns out's kind; out is always filled. */
enum peek_kind peek_parse(const uint8_t *buf, size_t len, uint16_t default_port,
                          struct http_head *h, struct peek *out);

/* The log reason for a PEEK_BAD answer, saying what was seen (names and
 * values from the bytes, made printable); at most outlen bytes with the
 * NUL. */
void peek_reason(const struct peek *p, char *out, size_t outlen);

/* What the next TLS record a client sends says, while its handshake is
 * still in plaintext (after its first ClientHello, until its first
 * application data): a TLS 1.3 HelloRetryRequest makes it send a second
 * ClientHello, which must be read too. */
enum peek_rec {
	PEEK_REC_MORE = 0, /* not a whole record (or ClientHello) yet */
	PEEK_REC_SKIP,     /* a record to let through: *skip bytes (CCS, another message) */
	PEEK_REC_HELLO,    /* a ClientHello: out as PEEK_TLS (name, ech, len) */
	PEEK_REC_BAD,      /* a ClientHello that peek_parse refuses: out as PEEK_BAD */
	PEEK_REC_END,      /* application data, an alert, not TLS: plaintext is over */
};

/* Look at buf[0..len), the client's bytes from a record boundary on.
 * after_ccs: the client has sent change_cipher_spec, so a handshake
 * record may be TLS 1.2's encrypted Finished: only one that is a whole,
 * well-formed ClientHello is taken for one (the rest is PEEK_REC_SKIP).
 * Pure and bounded like peek_parse(). */
enum peek_rec peek_tls_record(const uint8_t *buf, size_t len, bool after_ccs, struct peek *out,
                              size_t *skip);

/* Whether the name p carries (PEEK_TLS or PEEK_HTTP, name not "") is
 * name, the one a connection was decided for: name is normalised
 * (policy_name_normalize) or, with ip_literal, an address literal. p's
 * name is folded the same way (case, trailing dot); addresses are
 * compared as addresses, an IPv4-mapped IPv6 one as the IPv4 it is, so
 * one address has one spelling. A name that does not fold is no match. */
bool peek_same_name(const struct peek *p, const char *name, bool ip_literal);

/* The HTTP status that refuses a PEEK_BAD head: 431 for a head or field
 * count over the limits, else 400. */
int peek_status(const struct peek *p);
/* The reason of the one table (policy/verdict.h) for a PEEK_BAD answer. */
enum verdict_reason peek_why(const struct peek *p);

#endif
