/* A decided connection stays bound to its name (DESIGN.md, threat model:
 * "A name, once decided, binds the connection"). The client's first bytes
 * after the decision are looked at before any of them goes up, where the
 * decision did not read them: inside an allowed CONNECT tunnel, and on a
 * transparent connection decided without a name (silent through the sniff
 * window: a cidr rule or a DNS-learned address). A ClientHello's SNI or an
 * HTTP/1 head's name (peek.h) must be the CONNECT target or the learned
 * name, case and trailing dot folded; on a cidr-allowed connection it is
 * decided by the policy as if it had come first. Else the connection is
 * refused there. Anything else (no name, another protocol) stays an
 * opaque tunnel as before. A TLS connection decided on its SNI is read on
 * until its plaintext handshake ends: every ClientHello on it (a
 * HelloRetryRequest's second one) must carry that SNI (peek_tls_record).
 * The look waits as long as the first bytes take
 * to come: the connection runs on bufferevents meanwhile (the upstream's
 * bytes flow), and splices only once the look is over. */
#include "proxy/conn.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdint.h>
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
bind_refuse(struct conn *c, const struct peek *p, enum verdict_reason reason, const char *fmt, ...)
{
	char why[sizeof(c->detail)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (policy_mode(c->px->px_cfg.policy) == POLICY_MODE_AUDIT) {
		c->verdict = VERDICT_AUDIT_DENY;
		if (c->why == VR_NONE)
			conn_set_why(c, reason, why);
		return 0;
	}
	/* The rule allowed the target; what refuses is the binding. */
	c->rule[0] = '\0';
	c->verdict = VERDICT_DENY;
	c->reply_alert = p->proto == PEEK_PROTO_TLS;
	conn_refuse(c, reason, "%s", why);
	return -1;
}

/* What the connection is, for a reason: "tunnel to HOST" (CONNECT),
 * "connection to ADDR decided for NAME" (transparent, a DNS-learned name),
 * "connection to ADDR" (transparent, a cidr rule). */
static void
bind_subject(const struct conn *c, char *out, size_t outlen)
{
	char ip[INET6_ADDRSTRLEN];

	if (c->lkind == PROXY_LISTEN_EXPLICIT) {
		snprintf(out, outlen, "tunnel to %s", c->host);
		return;
	}
	conn_addr_str(&c->orig, ip, sizeof(ip));
	if (c->host[0] != '\0')
		snprintf(out, outlen, "connection to %s decided for %s", ip, c->host);
	else
		snprintf(out, outlen, "connection to %s", ip);
}

/* The name p carries (not ""), on a connection decided before it came.
 * A tunnel's or a DNS-learned name must be it; a connection a cidr rule
 * let through without a name is decided on the name now, as if it had
 * come first (the address itself is the cidr rule's, so no resolution is
 * needed to connect there). Returns 0 to go on, -1 after refusing. */
static int
bind_check_name(struct conn *c, const struct peek *p, const char *subject)
{
	const struct policy *pol = c->px->px_cfg.policy;
	const char *what = p->proto == PEEK_PROTO_TLS ? "a ClientHello for" : "a request for Host";

	if (c->lkind == PROXY_LISTEN_TRANSPARENT && c->host[0] == '\0') {
		struct verdict_query q = {
		        .src = VERDICT_SRC_NONE, .addr = &c->orig.sa, .port = c->port};
		struct verdict_result r;
		char folded[HTTP_HOST_MAX];
		const char *why;

		if (p->ip_literal)
			return 0; /* an address: the cidr rule's decision stands */
		if (policy_name_normalize(p->name, folded, sizeof(folded), &why) != 0)
			return bind_refuse(c, p, VR_BAD_NAME, "%s carries %s a bad name: %s",
			                   subject, what, why);
		/* Decided as if it had come first. */
		q.claim = folded;
		verdict_decide(pol, POLICY_MODE_ENFORCE, &q, &r);
		if (r.verdict == VERDICT_ALLOW)
			return 0;
		return bind_refuse(c, p, r.reason, "%s carries %s %s: %s%s%s", subject, what,
		                   folded, r.reason == VR_RULE_DENY ? "denied by rule " : "",
		                   r.reason == VR_RULE_DENY && r.rule != NULL ? r.rule : "",
		                   r.reason == VR_RULE_DENY ? "" : verdict_reason_text(r.reason));
	}
	if (!peek_same_name(p, c->host, c->lkind == PROXY_LISTEN_EXPLICIT && c->ip_literal))
		return bind_refuse(c, p, VR_NAME_CHANGED, "%s carries %s %s", subject, what,
		                   p->name);
	if (p->proto == PEEK_PROTO_TLS && p->ech &&
	    (c->lkind == PROXY_LISTEN_TRANSPARENT || c->ip_literal ||
	     policy_match_ech(pol, c->host, c->port) == NULL))
		return bind_refuse(c, p, VR_ECH,
		                   "%s carries a ClientHello with encrypted_client_hello: the name "
		                   "served may not be %s; no rule for it has `ech: allow`",
		                   subject, c->host);
	return 0;
}

/* Wait for the rest of a head or a record: as long as the explicit
 * proxy gives a head (bind_tunnel_timer). */
static void
bind_wait(struct conn *c)
{
	if (c->bind_since_ms == 0) {
		c->bind_since_ms = now_ms();
		conn_timer_in(c, c->px->px_cfg.header_timeout_ms);
	}
}

/* The first bytes: a head, or not. 0: they may go and the look is over;
 * 1: wait for more; -1: refused (c is gone). */
static int
bind_head(struct conn *c)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), n = len < PEEK_MAX_INPUT ? len : PEEK_MAX_INPUT;
	const uint8_t *buf;
	struct http_head h;
	struct peek p;
	char subject[HTTP_HOST_MAX + INET6_ADDRSTRLEN + 32], seen[sizeof(c->detail)];

	if (n == 0) {
		if (!c->down.eof)
			return 1;
		c->bind_watch = false; /* ended without a byte: nothing to bind */
		return 0;
	}
	buf = evbuffer_pullup(in, (ssize_t)n);
	if (buf == NULL) {
		conn_tunnel_done(c, VR_RESOURCE, "out of memory");
		return -1;
	}
	bind_subject(c, subject, sizeof(subject));
	switch (peek_parse(buf, n, c->port, &h, &p)) {
	case PEEK_MORE:
		if (!c->down.eof) {
			/* Not for ever: a head has the explicit proxy's header
			 * time to be complete (bind_tunnel_timer). */
			bind_wait(c);
			return 1;
		}
		/* The client ended inside what may still be a head: nothing
		 * of it went up, and none goes. A few bytes that look like
		 * nothing yet are the opaque tunnel's. */
		if (p.proto != PEEK_PROTO_UNKNOWN &&
		    bind_refuse(c, &p,
		                p.proto == PEEK_PROTO_TLS ? VR_TLS_MALFORMED : VR_BAD_REQUEST,
		                "%s ended inside an incomplete %s", subject,
		                p.proto == PEEK_PROTO_TLS ? "ClientHello" : "request head") != 0)
			return -1;
		break;
	case PEEK_OTHER:
		break;
	case PEEK_BAD:
		peek_reason(&p, seen, sizeof(seen));
		if (bind_refuse(c, &p, peek_why(&p), "%s: %s", subject, seen) != 0)
			return -1;
		break;
	case PEEK_TLS:
	case PEEK_HTTP:
		/* A name, or nothing to bind. */
		if (p.name[0] != '\0' && bind_check_name(c, &p, subject) != 0)
			return -1;
		/* A named ClientHello in a tunnel to that name: the second
		 * hello a HelloRetryRequest asks for must carry it too, so the
		 * tunnel's handshake records are watched from here on
		 * (bind_tls_records, which sees this hello again). */
		if (p.proto == PEEK_PROTO_TLS && p.name[0] != '\0' &&
		    c->lkind == PROXY_LISTEN_EXPLICIT && !c->ip_literal) {
			c->bind_tls = true;
			c->ech = p.ech;
			return 0;
		}
		break;
	}
	/* Looked at and bound (or nameless): the rest is the tunnel's. */
	c->bind_watch = false;
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	return 0;
}

/* A named TLS connection's plaintext handshake records, from a record
 * boundary: each ClientHello (a HelloRetryRequest's second one) must carry
 * the decided name. Whole records that pass go at once (the client waits
 * for the server between its flights); the look ends at the first record
 * that is not handshake or change_cipher_spec. 0 with *pass the bytes that
 * may go, or -1 after refusing (c is gone). */
static int
bind_tls_records(struct conn *c, size_t *pass)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in), off = 0, skip;
	const uint8_t *buf = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;
	char subject[HTTP_HOST_MAX + INET6_ADDRSTRLEN + 32], seen[sizeof(c->detail)];
	struct peek p;

	*pass = 0;
	if (len > 0 && buf == NULL) {
		conn_tunnel_done(c, VR_RESOURCE, "out of memory");
		return -1;
	}
	bind_subject(c, subject, sizeof(subject));
	while (off < len) {
		switch (peek_tls_record(buf + off, len - off, c->bind_ccs, &p, &skip)) {
		case PEEK_REC_MORE:
			*pass = off;
			c->bind_since_ms = off > 0 ? 0 : c->bind_since_ms;
			if (!c->down.eof) {
				bind_wait(c);
				return 0;
			}
			/* The client ended inside a record: the server cannot
			 * act on it, so it may have it. */
			goto over;
		case PEEK_REC_SKIP:
			c->bind_ccs = c->bind_ccs || buf[off] == 0x14;
			off += skip;
			break;
		case PEEK_REC_HELLO:
			if (p.name[0] == '\0' || !peek_same_name(&p, c->host, c->ip_literal)) {
				if (bind_refuse(c, &p, VR_NAME_CHANGED,
				                "%s carries a second ClientHello for %s", subject,
				                p.name[0] != '\0' ? p.name : "no name") != 0)
					return -1;
				goto over;
			}
			/* ECH was decided on the first hello (a rule opted in, or
			 * it had none): a second one may not add it. */
			if (p.ech && !c->ech) {
				if (bind_refuse(c, &p, VR_ECH,
				                "%s carries a second ClientHello with "
				                "encrypted_client_hello; the first had none",
				                subject) != 0)
					return -1;
				goto over;
			}
			off += p.len;
			break;
		case PEEK_REC_BAD:
			peek_reason(&p, seen, sizeof(seen));
			if (bind_refuse(c, &p, VR_TLS_MALFORMED, "%s: second ClientHello: %s",
			                subject, seen) != 0)
				return -1;
			goto over;
		case PEEK_REC_END:
			goto over;
		}
	}
	*pass = off;
	c->bind_since_ms = 0;
	return 0;
over:
	c->bind_watch = false;
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	*pass = SIZE_MAX;
	return 0;
}

int
bind_tunnel_read(struct conn *c, size_t *pass)
{
	int r;

	if (c->bind_tls)
		return bind_tls_records(c, pass);
	r = bind_head(c);
	if (r == 0 && c->bind_tls)
		return bind_tls_records(c, pass);
	*pass = r == 0 ? SIZE_MAX : 0;
	return r < 0 ? -1 : 0;
}

int
bind_tunnel_timer(struct conn *c, uint64_t now, uint64_t *next_ms)
{
	uint64_t limit = c->px->px_cfg.header_timeout_ms;
	struct peek p = {.proto = PEEK_PROTO_UNKNOWN};
	char subject[HTTP_HOST_MAX + INET6_ADDRSTRLEN + 32];

	if (c->bind_since_ms == 0)
		return 0;
	if (now - c->bind_since_ms < limit) {
		if (limit - (now - c->bind_since_ms) < *next_ms)
			*next_ms = limit - (now - c->bind_since_ms);
		return 0;
	}
	/* Held back until now, so nothing of it went up. In audit mode it
	 * goes, and the look is over. */
	bind_subject(c, subject, sizeof(subject));
	if (bind_refuse(c, &p, VR_HEAD_TIMEOUT, "%s: %s within %u ms", subject,
	                c->bind_tls ? "TLS record not complete" : "first bytes not a complete head",
	                (unsigned)limit) != 0)
		return -1;
	c->bind_watch = false;
	bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
	/* The held bytes go from the relay's read callback, from the loop:
	 * called from here, it could free c under the timer's feet. */
	bufferevent_trigger(c->down.bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
	return 0;
}
