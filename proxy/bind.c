/* A decided connection stays bound to its name (DESIGN.md, threat model:
 * "A name, once decided, binds the connection"). The client's first bytes
 * after the decision are looked at before any of them goes up, where the
 * decision did not read them: inside an allowed CONNECT tunnel, and on a
 * transparent connection decided without a name (silent through the sniff
 * window: a cidr rule or a DNS-learned address). A ClientHello's SNI or an
 * HTTP/1 head's name (peek.h) must be the CONNECT target or the learned
 * name, case and trailing dot folded; on a cidr-allowed connection it is
 * decided by the policy as if it had come first, and binds it from then
 * on. Else the connection is refused there. Anything else (another
 * protocol) stays an opaque tunnel as before.
 *
 * What follows stays read. A TLS connection is read on until its
 * plaintext handshake ends: every ClientHello on it (a HelloRetryRequest's
 * second one) must carry the SNI decided, or, after one without, is
 * decided as the first would have been (peek_tls_record). An HTTP/1
 * connection has every request framed (h1frame.h) and each head's name
 * checked the same way, for as long as it speaks HTTP/1 (bind_frame); a
 * WebSocket upgrade the server accepts ends that. The first look waits as
 * long as the first bytes take to come: the connection runs on
 * bufferevents meanwhile (the upstream's bytes flow), and splices once it
 * is over; a TLS connection's records are watched on the splice
 * (bind_tls_scan, on the bytes relay.c reads), request bodies are spliced,
 * counted by the framer. */
#include "proxy/conn.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/elog.h"
#include "policy/policy.h"
#include "proxy/h1frame.h"
#include "proxy/peek.h"

/* Refuse the tunnel for what its first bytes were: a TLS alert for a
 * ClientHello, a status inside the tunnel for an HTTP head (the client
 * reads HTTP there), a reset for the rest. In every mode. Returns -1 (c
 * is gone). */
static int
bind_deny(struct conn *c, const struct peek *p, enum verdict_reason reason, const char *why)
{
	/* The rule allowed the target; what refuses is the binding. */
	c->rule[0] = '\0';
	c->verdict = VERDICT_DENY;
	if (c->down.bev == NULL && relay_reply_bev(c) != 0) {
		/* Spliced already (a later request), and bytes are on their
		 * way to the client: a reply would land inside them, so both
		 * sides are reset, for this reason over any earlier one. */
		conn_set_why(c, reason, why);
		conn_abort(c, VR_NONE, NULL);
		return -1;
	}
	c->reply_alert = p->proto == PEEK_PROTO_TLS;
	conn_refuse(c, reason, "%s", why);
	return -1;
}

/* As bind_deny, for what the binding refuses. Returns -1 (c is gone), or
 * 0 in audit mode, where the refusal is only logged (the first one is the
 * line's reason) and the tunnel goes on. */
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
	return bind_deny(c, p, reason, why);
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

/* The most a subject takes. */
#define BIND_SUBJECT_MAX (HTTP_HOST_MAX + INET6_ADDRSTRLEN + 32)

/* buf (BIND_SUBJECT_MAX bytes, "" until first needed) holding c's
 * subject: written only when a reason needs it, so a look that passes
 * costs no formatting. */
static const char *
bind_subj(const struct conn *c, char *buf)
{
	if (buf[0] == '\0')
		bind_subject(c, buf, BIND_SUBJECT_MAX);
	return buf;
}

/* Whether c->host is an address literal: a CONNECT's or a transparent
 * connection's own name can be one; a name a transparent connection
 * borrowed from DNS, or was bound to later, is a name (c->ip_literal only
 * says it was dialled by address). */
static bool
bind_host_literal(const struct conn *c)
{
	return c->ip_literal && (c->lkind == PROXY_LISTEN_EXPLICIT || c->has_name);
}

/* The name p carries (not ""), on a connection decided before it came.
 * A tunnel's or a DNS-learned name must be it; a connection a cidr rule
 * let through without a name is decided on the name now, as if it had
 * come first (the address itself is the cidr rule's, so no resolution is
 * needed to connect there). Returns 0 to go on, -1 after refusing. */
static int
bind_check_name(struct conn *c, const struct peek *p, char *subject)
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
			                   bind_subj(c, subject), what, why);
		/* Decided as if it had come first. */
		q.claim = folded;
		verdict_decide(pol, POLICY_MODE_ENFORCE, &q, &r);
		if (r.verdict == VERDICT_ALLOW) {
			char msg[sizeof(c->detail)];

			/* And admitted by the log budget, as a destination
			 * decided first is (conn_admit): the address was, the
			 * name is new. Not the policy's verdict, so audit mode
			 * refuses it too. */
			if (!elog_admit(c->px->px_cfg.log, folded, c->port)) {
				snprintf(msg, sizeof(msg), "%s carries %s %s: %s",
				         bind_subj(c, subject), what, folded,
				         verdict_reason_text(VR_LOG_BUDGET));
				return bind_deny(c, p, VR_LOG_BUDGET, msg);
			}
			/* Decided for it now: later names must be it. */
			str_copy(c->host, folded, sizeof(c->host));
			return 0;
		}
		return bind_refuse(c, p, r.reason, "%s carries %s %s: %s%s%s",
		                   bind_subj(c, subject), what, folded,
		                   r.reason == VR_RULE_DENY ? "denied by rule " : "",
		                   r.reason == VR_RULE_DENY && r.rule != NULL ? r.rule : "",
		                   r.reason == VR_RULE_DENY ? "" : verdict_reason_text(r.reason));
	}
	if (!peek_same_name(p, c->host, bind_host_literal(c)))
		return bind_refuse(c, p, VR_NAME_CHANGED, "%s carries %s %s", bind_subj(c, subject),
		                   what, p->name);
	if (p->proto == PEEK_PROTO_TLS && p->ech &&
	    (c->lkind == PROXY_LISTEN_TRANSPARENT || c->ip_literal ||
	     policy_match_ech(pol, c->host, c->port) == NULL))
		return bind_refuse(c, p, VR_ECH,
		                   "%s carries a ClientHello with encrypted_client_hello: the name "
		                   "served may not be %s; no rule for it has `ech: allow`",
		                   bind_subj(c, subject), c->host);
	return 0;
}

/* The look is over: what the client sends from now on is the tunnel's.
 * On bufferevents the input's cap goes too. */
static void
bind_watch_over(struct conn *c)
{
	c->bind_watch = false;
	if (c->down.bev != NULL)
		bufferevent_setwatermark(c->down.bev, EV_READ, 0, 0);
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
	char subject[BIND_SUBJECT_MAX], seen[sizeof(c->detail)];

	subject[0] = '\0';
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
		                "%s ended inside an incomplete %s", bind_subj(c, subject),
		                p.proto == PEEK_PROTO_TLS ? "ClientHello" : "request head") != 0)
			return -1;
		break;
	case PEEK_OTHER:
		break;
	case PEEK_BAD:
		peek_reason(&p, seen, sizeof(seen));
		if (bind_refuse(c, &p, peek_why(&p), "%s: %s", bind_subj(c, subject), seen) != 0)
			return -1;
		break;
	case PEEK_HTTP:
		/* Every request from this one on is framed and its name
		 * checked (bind_frame, which sees this head again). */
		if (bind_frame_start(c) != 0) {
			conn_tunnel_done(c, VR_RESOURCE, "out of memory");
			return -1;
		}
		break;
	case PEEK_TLS:
		if (p.name[0] != '\0' && bind_check_name(c, &p, subject) != 0)
			return -1;
		if (p.name[0] == '\0' && p.ech &&
		    bind_refuse(c, &p, VR_ECH,
		                "%s carries a ClientHello with encrypted_client_hello and no "
		                "server_name: the name is hidden",
		                bind_subj(c, subject)) != 0)
			return -1;
		/* The second hello a HelloRetryRequest asks for must carry
		 * the name this one did, or, after one without, is decided as
		 * if it came first: the handshake records are watched from
		 * here on (bind_tls_scan, which sees this hello again). */
		c->bind_tls = true;
		c->bind_unnamed = p.name[0] == '\0';
		c->ech = p.ech;
		return 0;
	}
	/* Looked at and bound (or nameless): the rest is the tunnel's. */
	bind_watch_over(c);
	return 0;
}

int
bind_tls_scan(struct conn *c, const uint8_t *buf, size_t len, size_t *pass)
{
	size_t off = 0, skip;
	/* Written only for a refusal: the records that pass, nearly all of
	 * them, cost no formatting. */
	char subject[BIND_SUBJECT_MAX], seen[sizeof(c->detail)];
	struct peek p;

	*pass = 0;
	subject[0] = '\0';
	while (off < len) {
		if (c->bind_fin && buf[off] == 0x16) {
			/* After the small handshake record that followed
			 * change_cipher_spec (a TLS 1.2 Finished, or a hello's
			 * first fragment, passed whole): no more handshake in
			 * the clear, or a hello's rest would go unread. */
			p.proto = PEEK_PROTO_TLS;
			if (bind_refuse(c, &p, VR_TLS_MALFORMED,
			                "%s: a handshake record after change_cipher_spec and "
			                "the Finished",
			                bind_subj(c, subject)) != 0)
				return -1;
			goto over;
		}
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
			c->bind_fin = c->bind_fin || (c->bind_ccs && buf[off] == 0x16);
			c->bind_ccs = c->bind_ccs || buf[off] == 0x14;
			off += skip;
			break;
		case PEEK_REC_HELLO:
			if (c->bind_unnamed) {
				/* After a hello without a name: none again, or
				 * one checked as the first would have been. */
				if (p.name[0] != '\0') {
					if (bind_check_name(c, &p, subject) != 0)
						return -1;
					c->bind_unnamed = false;
				}
			} else if (p.name[0] == '\0' ||
			           !peek_same_name(&p, c->host, bind_host_literal(c))) {
				if (bind_refuse(c, &p, VR_NAME_CHANGED,
				                "%s carries a second ClientHello for %s",
				                bind_subj(c, subject),
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
				                bind_subj(c, subject)) != 0)
					return -1;
				goto over;
			}
			off += p.len;
			break;
		case PEEK_REC_BAD:
			peek_reason(&p, seen, sizeof(seen));
			if (bind_refuse(c, &p, VR_TLS_MALFORMED, "%s: second ClientHello: %s",
			                bind_subj(c, subject), seen) != 0)
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
	bind_watch_over(c);
	*pass = SIZE_MAX;
	return 0;
}

/* The record watch on bufferevents: what c->down's input holds. */
static int
bind_tls_records(struct conn *c, size_t *pass)
{
	struct evbuffer *in = bufferevent_get_input(c->down.bev);
	size_t len = evbuffer_get_length(in);
	const uint8_t *buf = len > 0 ? evbuffer_pullup(in, (ssize_t)len) : NULL;

	if (len > 0 && buf == NULL) {
		conn_tunnel_done(c, VR_RESOURCE, "out of memory");
		return -1;
	}
	return bind_tls_scan(c, buf, len, pass);
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
	char subject[BIND_SUBJECT_MAX];

	subject[0] = '\0';
	if (c->bind_since_ms == 0)
		return 0;
	if (now - c->bind_since_ms < limit) {
		if (limit - (now - c->bind_since_ms) < *next_ms)
			*next_ms = limit - (now - c->bind_since_ms);
		return 0;
	}
	/* Held back until now, so nothing of it went up. In audit mode it
	 * goes, and the look is over. */
	if (bind_refuse(c, &p, VR_HEAD_TIMEOUT, "%s: %s within %u ms", bind_subj(c, subject),
	                c->bind_tls ? "TLS record not complete" : "first bytes not a complete head",
	                (unsigned)limit) != 0)
		return -1;
	bind_watch_over(c);
	/* The held bytes go from the relay's read callback, from the loop:
	 * called from here, it could free c under the timer's feet. */
	if (c->down.bev != NULL)
		bufferevent_trigger(c->down.bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
	else
		relay_watch_flush(c);
	return 0;
}

/* ---- every HTTP/1 request (h1frame.h) ---- */

int
bind_frame_start(struct conn *c)
{
	if (c->frame != NULL)
		return 0;
	c->frame = malloc(sizeof(*c->frame));
	if (c->frame == NULL)
		return -1;
	h1frame_init(c->frame);
	return 0;
}

void
bind_frame_free(struct conn *c)
{
	if (c->frame == NULL)
		return;
	h1frame_clear(c->frame);
	free(c->frame);
	c->frame = NULL;
}

/* What an audit-mode framing refusal adds: nothing after it is framed. */
#define BIND_UNFRAMED                                                                              \
	"; audit mode: the rest of the connection goes unframed (its later requests are not "      \
	"checked nor logged)"

/* Append "; " and the text to c's detail (an earlier refusal's): the log
 * line keeps its first reason and says what came after. */
static void __attribute__((format(printf, 2, 3))) bind_note(struct conn *c, const char *fmt, ...)
{
	char note[sizeof(c->detail)], detail[2 * sizeof(c->detail) + 2];
	size_t n, keep = strlen(c->detail);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(note, sizeof(note), fmt, ap);
	va_end(ap);
	n = strlen(note) + 2;
	/* The earlier detail gives way, so the note is whole. */
	if (n >= sizeof(c->detail))
		keep = 0;
	else if (keep > sizeof(c->detail) - 1 - n)
		keep = sizeof(c->detail) - 1 - n;
	snprintf(detail, sizeof(detail), "%.*s; %s", (int)keep, c->detail, note);
	conn_set_why(c, c->why, detail);
}

/* A head the framer found: its name must be c's. A head without one
 * (HTTP/1.0 without Host) lets the server pick the name, so it is only
 * let through where nothing is bound yet. 0 to go on, -1 after refusing. */
static int
bind_frame_head(struct conn *c, const struct peek *p, char *subject)
{
	if (p->name[0] != '\0')
		return bind_check_name(c, p, subject);
	if (c->host[0] == '\0')
		return 0;
	return bind_refuse(c, p, VR_BAD_NAME,
	                   "%s carries a request with no Host nor absolute target: the "
	                   "server would pick the name, not %s",
	                   bind_subj(c, subject), c->host);
}

/* Whether the answer to a WebSocket upgrade can be told: only for the
 * first request, before the upstream said anything, on bufferevents (the
 * answer is read there); a later one is framed on, so a server that
 * upgrades anyway gets its frames refused as heads. */
static bool
bind_may_upgrade(const struct conn *c)
{
	return c->relay == NULL && c->up.bev != NULL && c->frame->requests == 0 &&
	       c->down.bytes == 0 && evbuffer_get_length(bufferevent_get_input(c->up.bev)) == 0;
}

ssize_t
bind_frame(struct conn *c, const uint8_t *buf, size_t len, bind_emit_fn *emit, void *arg)
{
	char subject[BIND_SUBJECT_MAX], seen[sizeof(c->detail)];
	struct h1frame *f = c->frame;
	struct http_head h;
	struct peek p;
	size_t off = 0, used;
	bool watch;

	while (off < len) {
		subject[0] = '\0'; /* c->host may have been decided since */
		switch (h1frame_step(f, buf + off, len - off, c->port, &h, &p, &used)) {
		case H1FRAME_STEP_PASS:
			if (emit(arg, buf + off, used) != 0)
				goto fail;
			break;
		case H1FRAME_STEP_HOLD:
			break;
		case H1FRAME_STEP_WAIT:
			return (ssize_t)off;
		case H1FRAME_STEP_HEAD:
			if (bind_frame_head(c, &p, subject) != 0)
				return -1;
			if (emit(arg, f->out, f->out_len) != 0)
				goto fail;
			watch = p.websocket && bind_may_upgrade(c);
			h1frame_accept(f, watch);
			if (watch) /* the answer's head, no more, waits to be read */
				bufferevent_setwatermark(c->up.bev, EV_READ, 0, HTTP_MAX_HEAD);
			break;
		case H1FRAME_STEP_BAD: {
			bool first = c->why == VR_NONE;
			const char *rest = policy_mode(c->px->px_cfg.policy) == POLICY_MODE_AUDIT
			                           ? BIND_UNFRAMED
			                           : "";

			if (f->why != NULL)
				str_copy(seen, f->why, sizeof(seen));
			else
				peek_reason(&p, seen, sizeof(seen));
			p.proto = PEEK_PROTO_HTTP; /* the client speaks HTTP: a status */
			if (bind_refuse(c, &p, f->why != NULL ? f->vr : peek_why(&p),
			                "%s: request %llu: %s%s", bind_subj(c, subject),
			                (unsigned long long)f->requests + 1, seen, rest) != 0)
				return -1;
			/* Audit mode: the rest goes unframed, what was held of a
			 * head first, and no later request is looked at or
			 * logged: the line says so, once, after the reason an
			 * earlier refusal gave it. */
			if (!first)
				bind_note(c, "then request %llu: %s%s",
				          (unsigned long long)f->requests + 1, seen, rest);
			if (emit(arg, f->head, f->head_len) != 0 ||
			    emit(arg, buf + off, len - off) != 0)
				goto fail;
			bind_frame_free(c);
			return (ssize_t)len;
		}
		}
		off += used;
	}
	return (ssize_t)off;
fail:
	conn_tunnel_done(c, VR_RESOURCE, "out of memory");
	return -1;
}

int
bind_upgrade_answer(struct conn *c, size_t *pass)
{
	struct evbuffer *in = bufferevent_get_input(c->up.bev);
	size_t len = evbuffer_get_length(in), n = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD;
	const char *buf = n > 0 ? (const char *)evbuffer_pullup(in, (ssize_t)n) : NULL;
	struct http_head h;
	size_t off = 0;
	bool yes = false;

	*pass = 0;
	if (n > 0 && buf == NULL) {
		conn_tunnel_done(c, VR_RESOURCE, "out of memory");
		return -1;
	}
	for (;;) {
		enum http_result r = http_parse_response(buf + off, n - off, &h);

		if (r == HTTP_INCOMPLETE && n < HTTP_MAX_HEAD && !c->up.eof) {
			*pass = off; /* interim heads go; the rest waits */
			return 0;
		}
		if (r != HTTP_OK)
			break; /* not an answer we read: no upgrade */
		if (h.status == 101) {
			yes = true;
			break;
		}
		if (h.status >= 200)
			break;
		off += h.head_len; /* 100, 102, 103: the answer is still to come */
	}
	h1frame_upgraded(c->frame, yes);
	log_debug("proxy: conn %llu: WebSocket upgrade %s", (unsigned long long)c->id,
	          yes ? "accepted: requests no longer framed" : "declined: framing goes on");
	if (yes)
		bind_frame_free(c); /* the name stays; no HTTP/1 follows */
	bufferevent_setwatermark(c->up.bev, EV_READ, 0, 0);
	*pass = SIZE_MAX;
	return 0;
}
