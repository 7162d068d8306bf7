/* Transparent connections: what the first bytes say about the
 * destination (DESIGN.md, decision 1). A TLS ClientHello gives the SNI, an
 * HTTP/1 request the name its target or Host presents (peek.h); anything
 * else, or silence (server-speaks-first protocols), gives no name. Peeking
 * is bounded in bytes and time. */
#include "proxy/conn.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "common/util.h"
#include "proxy/peek.h"

/* A refusal of what peek_parse() refused: a TLS alert for TLS, an HTTP
 * status for a head (method, target and any name read go in the log). */
static void
sniff_refuse(struct conn *c, const char *s, const struct http_head *h, const struct peek *p)
{
	char why[sizeof(c->detail)];
	const char *ignored;

	peek_reason(p, why, sizeof(why));
	if (p->proto == PEEK_PROTO_TLS) {
		/* "tls" lines carry an SNI; a refused hello names none. */
		c->tls = true;
		c->kind = CONN_KIND_TCP;
		conn_refuse(c, peek_why(p), "%s", why);
		return;
	}
	c->kind = CONN_KIND_HTTP;
	if (p->error != PEEK_HTTP_HEAD)
		conn_set_method_url(c, s, h);
	if (p->name[0] != '\0' && conn_set_host(c, p->name, p->ip_literal, &ignored) != 0)
		c->host[0] = '\0';
	conn_refuse(c, peek_why(p), "%s", why);
}

void
sniff_decide(struct conn *c, bool timed_out)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), n = len < PEEK_MAX_INPUT ? len : PEEK_MAX_INPUT;
	const uint8_t *buf = n > 0 ? evbuffer_pullup(in, (ssize_t)n) : NULL;
	static struct http_head h; /* one loop, one thread: no re-entry */
	const char *why = NULL;
	struct peek p;

	if (n == 0) {
		if (!timed_out)
			return;
		c->kind = CONN_KIND_TCP;
		conn_decide_noname(c);
		return;
	}
	switch (peek_parse(buf, n, c->port, &h, &p)) {
	case PEEK_MORE:
		if (!timed_out)
			return;
		if (p.proto == PEEK_PROTO_TLS) {
			c->tls = true;
			c->kind = CONN_KIND_TCP;
			conn_refuse(c, VR_TLS_MALFORMED, "incomplete ClientHello");
		} else if (p.proto == PEEK_PROTO_HTTP) {
			/* HTTP, but not a head we can read in time: refused
			 * like a bad one. */
			c->kind = CONN_KIND_HTTP;
			conn_refuse(c, VR_HEAD_TIMEOUT, "request head not complete in time");
		} else {
			c->kind = CONN_KIND_TCP;
			conn_decide_noname(c);
		}
		return;
	case PEEK_OTHER:
		/* Not HTTP/1 nor TLS: a protocol we cannot name. */
		c->kind = CONN_KIND_TCP;
		conn_decide_noname(c);
		return;
	case PEEK_BAD:
		sniff_refuse(c, (const char *)buf, &h, &p);
		return;
	case PEEK_TLS:
		/* The log's "tls" means a ClientHello that named a server;
		 * TLS without a name is name-less "tcp", though a refusal
		 * still answers it with a TLS alert. */
		c->tls = true;
		c->ech = p.ech;
		c->kind = p.name[0] != '\0' ? CONN_KIND_TLS : CONN_KIND_TCP;
		if (p.name[0] == '\0') {
			if (p.ech) {
				/* No outer name, so no rule to opt in. */
				conn_refuse(c, VR_ECH,
				            "ClientHello carries encrypted_client_hello and no "
				            "server_name: the name is hidden");
				return;
			}
			conn_decide_noname(c);
			return;
		}
		c->has_name = true;
		if (conn_set_host(c, p.name, p.ip_literal, &why) != 0) {
			conn_refuse(c, VR_BAD_NAME, "bad SNI name: %s", why);
			return;
		}
		break;
	case PEEK_HTTP:
		c->kind = CONN_KIND_HTTP;
		conn_set_method_url(c, (const char *)buf, &h);
		if (p.name[0] == '\0') {
			conn_decide_noname(c);
			return;
		}
		if (conn_set_host(c, p.name, p.ip_literal, &why) != 0) {
			conn_refuse(c, VR_BAD_NAME, "bad host name: %s", why);
			return;
		}
		c->has_name = true;
		break;
	}
	if (conn_decide_name(c))
		conn_start_resolve(c);
}
