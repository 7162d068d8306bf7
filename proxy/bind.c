/* A decided connection stays bound to its name (DESIGN.md, threat model:
 * "A name, once decided, binds the connection"). Inside an allowed CONNECT
 * tunnel the client's first bytes are looked at before any of them goes
 * up: a ClientHello's SNI or an HTTP/1 head's name (peek.h) must be the
 * CONNECT target, case and trailing dot folded, or the tunnel is refused
 * there; anything else (no name, another protocol) leaves an opaque tunnel
 * as before. The look waits as long as the first bytes take to come: the
 * tunnel runs on bufferevents meanwhile (the upstream's bytes flow), and
 * splices only once the look is over. */
#include "proxy/conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/util.h"
#include "policy/policy.h"
#include "proxy/peek.h"

/* Refuse the tunnel for what its first bytes were: a TLS alert for a
 * ClientHello, a status inside the tunnel for an HTTP head (the client
 * reads HTTP there), a reset for the rest. Returns -1 (c is gone), or 0
 * in audit mode, where the refusal is only logged and the tunnel goes on. */
static int __attribute__((format(printf, 4, 5)))
bind_refuse(struct conn *c, const struct peek *p, int status, const char *fmt, ...)
{
	char why[sizeof(c->reason)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (policy_mode(c->px->px_cfg.policy) == POLICY_MODE_AUDIT) {
		c->verdict = "audit-deny";
		if (c->reason[0] == '\0')
			str_copy(c->reason, why, sizeof(c->reason));
		return 0;
	}
	/* The rule allowed the target; what refuses is the binding. */
	c->rule[0] = '\0';
	c->reply_alert = p->proto == PEEK_PROTO_TLS;
	conn_refuse(c, status, "http_request_denied", "%s", why);
	return -1;
}

int
bind_tunnel_read(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), n = len < PEEK_MAX_INPUT ? len : PEEK_MAX_INPUT;
	const uint8_t *buf;
	struct http_head h;
	struct peek p;
	char seen[HTTP_HOST_MAX + 16];

	if (n == 0) {
		if (!c->down.eof)
			return 1;
		c->bind_watch = false; /* ended without a byte: nothing to bind */
		return 0;
	}
	buf = evbuffer_pullup(in, (ssize_t)n);
	if (buf == NULL) {
		conn_tunnel_done(c, "out of memory");
		return -1;
	}
	switch (peek_parse(buf, n, c->port, &h, &p)) {
	case PEEK_MORE:
		if (!c->down.eof) {
			/* Not for ever: a head has the explicit proxy's header
			 * time to be complete (bind_tunnel_timer). */
			if (c->bind_since_ms == 0) {
				c->bind_since_ms = now_ms();
				conn_timer_in(c, c->px->px_cfg.header_timeout_ms);
			}
			return 1;
		}
		/* The client ended inside what may still be a head: nothing
		 * of it went up, and none goes. A few bytes that look like
		 * nothing yet are the opaque tunnel's. */
		if (p.proto != PEEK_PROTO_UNKNOWN &&
		    bind_refuse(c, &p, 400, "tunnel to %s ended inside an incomplete %s", c->host,
		                p.proto == PEEK_PROTO_TLS ? "ClientHello" : "request head") != 0)
			return -1;
		break;
	case PEEK_OTHER:
		break;
	case PEEK_BAD:
		peek_reason(&p, seen, sizeof(seen));
		if (bind_refuse(c, &p, peek_status(&p), "tunnel to %s: %s", c->host, seen) != 0)
			return -1;
		break;
	case PEEK_TLS:
		if (p.name[0] == '\0')
			break; /* names nothing: nothing to bind */
		if (!peek_same_name(&p, c->host, c->ip_literal)) {
			if (bind_refuse(c, &p, 421, "tunnel to %s carries a ClientHello for %s",
			                c->host, p.name) != 0)
				return -1;
		} else if (p.ech && (c->ip_literal || policy_match_ech(c->px->px_cfg.policy,
		                                                       c->host, c->port) == NULL)) {
			if (bind_refuse(c, &p, 421,
			                "tunnel to %s carries a ClientHello with "
			                "encrypted_client_hello: the name served may not be %s; no "
			                "rule for it has `ech: allow`",
			                c->host, c->host) != 0)
				return -1;
		}
		break;
	case PEEK_HTTP:
		if (p.name[0] == '\0')
			break;
		if (!peek_same_name(&p, c->host, c->ip_literal) &&
		    bind_refuse(c, &p, 421, "tunnel to %s carries a request for Host %s", c->host,
		                p.name) != 0)
			return -1;
		break;
	}
	/* Looked at and bound (or nameless): the rest is the tunnel's. */
	c->bind_watch = false;
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	return 0;
}

int
bind_tunnel_timer(struct conn *c, uint64_t now, uint64_t *next_ms)
{
	uint64_t limit = c->px->px_cfg.header_timeout_ms;
	struct peek p = {.proto = PEEK_PROTO_UNKNOWN};

	if (c->bind_since_ms == 0)
		return 0;
	if (now - c->bind_since_ms < limit) {
		if (limit - (now - c->bind_since_ms) < *next_ms)
			*next_ms = limit - (now - c->bind_since_ms);
		return 0;
	}
	/* Held back until now, so nothing of it went up. In audit mode it
	 * goes, and the look is over. */
	if (bind_refuse(c, &p, 408, "tunnel to %s: first bytes not a complete head within %u ms",
	                c->host, (unsigned)limit) != 0)
		return -1;
	c->bind_watch = false;
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	/* The held bytes go from the relay's read callback, from the loop:
	 * called from here, it could free c under the timer's feet. */
	bufferevent_trigger(c->down.bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
	return 0;
}
