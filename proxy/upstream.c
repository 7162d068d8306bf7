/* Upstream side: every upstream socket is the broker's (broker/broker.h).
 * The connection asks it for NAME:PORT or ADDR:PORT and parks; the broker
 * decides again, resolves (dns/resolver.h: one cache, one CNAME policy,
 * one hosts file), applies the address guard, connects with the timeout
 * and passes the socket back. Here its reply becomes the connection's
 * upstream, or its refusal the log's reason (docs/log.md, "Reasons"). */
#include "proxy/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>

#include "broker/client.h"
#include "common/log.h"
#include "common/util.h"
#include "policy/policy.h"

socklen_t
conn_addr_len(const union conn_addr *a)
{
	return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}

void
conn_addr_str(const union conn_addr *a, char *out, size_t outlen)
{
	const void *p = a->sa.sa_family == AF_INET6 ? (const void *)&a->in6.sin6_addr
	                                            : (const void *)&a->in.sin_addr;

	if (inet_ntop(a->sa.sa_family, p, out, (socklen_t)outlen) == NULL)
		str_copy(out, "?", outlen);
}

bool
conn_addr_eq(const union conn_addr *a, const union conn_addr *b)
{
	if (a->sa.sa_family != b->sa.sa_family)
		return false;
	if (a->sa.sa_family == AF_INET)
		return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
	return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0;
}

void
conn_addr_unmap(union conn_addr *a)
{
	struct sockaddr_in v4 = {.sin_family = AF_INET};

	if (a->sa.sa_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&a->in6.sin6_addr))
		return;
	v4.sin_port = a->in6.sin6_port;
	memcpy(&v4.sin_addr, &a->in6.sin6_addr.s6_addr[12], 4);
	memset(a, 0, sizeof(*a));
	a->in = v4;
}

bool
conn_addr_parse(union conn_addr *a, const char *text, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len = sockaddr_set(&ss, 0, text, port);

	memset(a, 0, sizeof(*a));
	if (len == 0)
		return false;
	memcpy(a, &ss, len);
	conn_addr_unmap(a); /* keeps the port */
	return true;
}

/* The reason for an address a deny cidr rule covers. */
static void
say_denied(char *why, size_t whylen, const union conn_addr *a)
{
	char ip[INET6_ADDRSTRLEN];

	conn_addr_str(a, ip, sizeof(ip));
	snprintf(why, whylen, "%s is denied by a cidr rule", ip);
}

void
upstream_mark_audit(struct conn *c, const union conn_addr *a)
{
	const struct policy *p = c->px->px_cfg.policy;
	struct policy_verdict v;

	if (policy_mode(p) != POLICY_MODE_AUDIT || (c->decided && c->verdict != VERDICT_ALLOW))
		return;
	policy_match_addr(p, &a->sa, c->port, &v);
	if (v.action != POLICY_DENY)
		return;
	c->decided = true;
	c->verdict = VERDICT_AUDIT_DENY;
	str_copy(c->rule, v.where != NULL ? v.where : "", sizeof(c->rule));
	c->why = VR_RULE_DENY;
	say_denied(c->detail, sizeof(c->detail), a);
}

/* "SNI" or "Host": what named a transparent connection. */
static const char *
named_by(const struct conn *c)
{
	return c->tls ? "SNI" : "Host";
}

/* Audit mode: the broker let through what enforce would have refused,
 * and says which refusal (r->audit). A refusal the connection's own
 * decision already marked stays, as when each was found here: only the
 * original destination's check speaks over it. */
static void
take_audit(struct conn *c, const struct broker_reply *r)
{
	bool was_allowed = !c->decided || c->verdict == VERDICT_ALLOW;

	switch ((enum broker_status)r->audit) {
	case BROKER_E_NOT_ORIG:
		c->decided = true;
		c->verdict = VERDICT_AUDIT_DENY;
		c->why = VR_NOT_AT_ADDRESS;
		snprintf(c->detail, sizeof(c->detail),
		         "%s does not resolve to the original destination", named_by(c));
		return;
	case BROKER_E_DENY_CIDR:
	case BROKER_E_DENIED:
		if (!was_allowed)
			return;
		c->why = VR_RULE_DENY;
		str_copy(c->rule, r->rule, sizeof(c->rule));
		break;
	case BROKER_E_CNAME:
		if (!was_allowed)
			return;
		c->why = VR_CNAME_DENIED;
		break;
	case BROKER_E_NO_RULE:
	case BROKER_E_ECH:
		if (!was_allowed)
			return;
		c->why = r->audit == BROKER_E_ECH ? VR_ECH : VR_NO_RULE;
		break;
	default:
		return;
	}
	c->decided = true;
	c->verdict = VERDICT_AUDIT_DENY;
	str_copy(c->detail, r->reason, sizeof(c->detail));
}

/* The broker's refusal, as the log's reason. The sentences are the
 * broker's (the words this file used when it resolved and dialled). */
static void
refuse_as(struct conn *c, const struct broker_reply *r)
{
	static const enum verdict_reason map[] = {
	        [BROKER_E_BAD_NAME] = VR_BAD_NAME,
	        [BROKER_E_DENIED] = VR_RULE_DENY,
	        [BROKER_E_NO_RULE] = VR_NO_RULE,
	        [BROKER_E_ECH] = VR_ECH,
	        [BROKER_E_DNS] = VR_DNS_ERROR,
	        [BROKER_E_DNS_TIMEOUT] = VR_DNS_TIMEOUT,
	        [BROKER_E_NOT_ORIG] = VR_NOT_AT_ADDRESS,
	        [BROKER_E_GUARD] = VR_GUARD,
	        [BROKER_E_DENY_CIDR] = VR_RULE_DENY,
	        [BROKER_E_REFUSED] = VR_CONNECT_REFUSED,
	        [BROKER_E_UNREACHABLE] = VR_UNREACHABLE,
	        [BROKER_E_TIMEOUT] = VR_CONNECT_TIMEOUT,
	        [BROKER_E_CNAME] = VR_CNAME_DENIED,
	};
	enum verdict_reason why =
	        r->status < ARRAY_SIZE(map) && map[r->status] != VR_NONE ? map[r->status] : VR_BROKER;
	struct sockaddr_storage ss;

	/* The address refused or dialled last is the line's ip. */
	if (broker_addr_get(&r->addr, &ss) == 0) {
		memcpy(&c->dst, &ss, ss.ss_family == AF_INET6 ? sizeof(c->dst.in6) : sizeof(c->dst.in));
		c->has_dst = true;
	}
	switch ((enum broker_status)r->status) {
	case BROKER_E_RESOURCE:
		/* No descriptor here for the socket the broker made: as when
		 * this process ran out itself. */
		if (r->err == EMFILE || r->err == ENFILE)
			proxy_fd_starved(c->px);
		conn_refuse_resource(c, r->reason);
		return;
	case BROKER_E_DENIED:
	case BROKER_E_DENY_CIDR:
		str_copy(c->rule, r->rule, sizeof(c->rule));
		break;
	case BROKER_E_CNAME:
		c->rule[0] = '\0'; /* the chain decided, not the rule on the name */
		break;
	case BROKER_E_NOT_ORIG:
		conn_refuse(c, why, "%s does not resolve to the original destination",
		            named_by(c));
		return;
	case BROKER_E_GONE:
		if (!c->px->px_said_broker_gone)
			log_warnx("proxy: the broker is gone; every upstream connection is refused");
		c->px->px_said_broker_gone = true;
		break;
	default:
		break;
	}
	if (why == VR_BROKER)
		conn_refuse(c, why, "broker: %s (%s)", broker_status_name(r->status), r->reason);
	else
		conn_refuse(c, why, "%s", r->reason);
}


static void
take_reply(struct conn *c, const struct broker_reply *r, int fd)
{
	struct bufferevent *bev;
	struct sockaddr_storage ss;

	c->broker_id = 0;
	if (r->status != BROKER_OK) {
		refuse_as(c, r);
		return;
	}
	if (broker_addr_get(&r->addr, &ss) == 0) {
		memcpy(&c->dst, &ss, ss.ss_family == AF_INET6 ? sizeof(c->dst.in6) : sizeof(c->dst.in));
		c->has_dst = true;
	}
	if (r->verdict == BROKER_V_AUDIT_DENY)
		take_audit(c, r);
	c->up.fd = fd;
	if ((bev = bufferevent_socket_new(c->px->px_base, fd, 0)) == NULL) {
		conn_refuse_resource(c, "out of memory");
		return;
	}
	conn_half_set_bev(&c->up, bev);
	conn_connected(c);
}

static void
upstream_reply(const struct broker_reply *r, int fd, void *arg)
{
	take_reply(arg, r, fd);
	/* The slot it held is free: upstream_room sends for the waiting
	 * after this read event. */
}

/* Send c's request. 0 when it is out, 1 when the client cannot take it
 * now but a reply will make room (c waits), -1 after refusing c. */
static int
upstream_send(struct conn *c)
{
	struct broker_client *b = c->px->px_cfg.broker;
	const union conn_addr *dst = NULL;
	union conn_addr lit;
	unsigned flags = c->ech ? BROKER_F_ECH : 0;
	int rc;

	if (c->lkind == PROXY_LISTEN_TRANSPARENT && c->ip_literal) {
		/* Only the original destination is dialled. A Host that is an
		 * address must be that one; no name at all (a cidr rule, or a
		 * name DNS taught, decided) needs nothing more here. */
		if (c->has_name && (!conn_addr_parse(&lit, c->host, c->port) ||
		                    !conn_addr_eq(&lit, &c->orig))) {
			c->dst = c->orig;
			c->has_dst = true;
			if (policy_mode(c->px->px_cfg.policy) != POLICY_MODE_AUDIT) {
				conn_refuse(c, VR_NOT_AT_ADDRESS,
				            "%s does not resolve to the original destination",
				            named_by(c));
				return -1;
			}
			c->verdict = VERDICT_AUDIT_DENY;
			c->why = VR_NOT_AT_ADDRESS;
			snprintf(c->detail, sizeof(c->detail),
			         "%s does not resolve to the original destination", named_by(c));
		}
		dst = &c->orig;
	} else if (c->ip_literal) {
		if (!conn_addr_parse(&lit, c->host, c->port)) {
			conn_refuse(c, VR_BAD_NAME, "bad IP literal");
			return -1;
		}
		dst = &lit;
	}
	/* A transparent connection without a name whose address DNS taught
	 * for a name is asked by that name: the broker decides on it and
	 * checks that it is the original destination. */
	if (dst == &c->orig && !c->has_name && c->host[0] != '\0')
		dst = NULL;
	if (dst != NULL) {
		rc = broker_client_connect_addr(b, &dst->sa, c->port, c->rule, upstream_reply, c,
		                                &c->broker_id);
	} else if (c->lkind == PROXY_LISTEN_TRANSPARENT) {
		rc = broker_client_connect_name(b, c->host, c->port, &c->orig.sa, flags, c->rule,
		                                upstream_reply, c, &c->broker_id);
	} else {
		rc = broker_client_connect_name(b, c->host, c->port, NULL, flags, c->rule,
		                                upstream_reply, c, &c->broker_id);
	}
	if (rc != 0) {
		int err = errno;

		c->broker_id = 0;
		if ((err == EBUSY || err == EAGAIN) && broker_client_inflight(b) > 0)
			return 1;
		conn_refuse(c, VR_BROKER, "broker: %s",
		            err == EPIPE   ? "the broker is gone"
		            : err == EBUSY ? "too many requests in flight"
		            : err == EAGAIN ? "its socket is full"
		                            : strerror(err));
		return -1;
	}
	return 0;
}

/* Send for the connections waiting, oldest first, while the client takes
 * them: after every read event of the broker's client that freed a slot,
 * a connect's or a DNS question's (broker_client_set_room). */
void
upstream_room(void *arg)
{
	struct proxy *px = arg;
	struct conn *c;

	while ((c = TAILQ_FIRST(&px->px_broker_wait)) != NULL) {
		TAILQ_REMOVE(&px->px_broker_wait, c, wait_entry);
		c->broker_waiting = false;
		if (upstream_send(c) == 1) {
			TAILQ_INSERT_HEAD(&px->px_broker_wait, c, wait_entry);
			c->broker_waiting = true;
			return;
		}
	}
}

int
upstream_request(struct conn *c)
{
	int rc;

	/* Behind those already waiting: first come, first sent. */
	rc = TAILQ_EMPTY(&c->px->px_broker_wait) ? upstream_send(c) : 1;
	if (rc == 1) {
		TAILQ_INSERT_TAIL(&c->px->px_broker_wait, c, wait_entry);
		c->broker_waiting = true;
		return 0;
	}
	return rc;
}

void
upstream_cancel(struct conn *c)
{
	if (c->broker_waiting) {
		TAILQ_REMOVE(&c->px->px_broker_wait, c, wait_entry);
		c->broker_waiting = false;
	}
	if (c->broker_id != 0) {
		broker_client_cancel(c->px->px_cfg.broker, c->broker_id);
		c->broker_id = 0;
	}
}
