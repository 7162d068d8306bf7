/* Upstream side: resolve in the supervisor (never trusting the sandbox's
 * idea of an address) through the resolver the DNS listener uses too
 * (dns/resolver.h: one cache, one CNAME policy, one hosts file), apply the
 * address guard, connect with a timeout, trying v6 then v4 addresses in
 * turn. */
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

#include "common/fdres.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/resolver.h"
#include "policy/guard.h"
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

static void
set_port(union conn_addr *a, uint16_t port)
{
	if (a->sa.sa_family == AF_INET6)
		a->in6.sin6_port = htons(port);
	else
		a->in.sin_port = htons(port);
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

/* What the deny cidr rules and the address guard say of one address. */
enum addr_check {
	ADDR_REFUSED,
	ADDR_PERMITTED,
	ADDR_AUDIT_DENIED, /* audit mode: a deny cidr rule covers it, let through */
};

static enum addr_check
addr_check(struct conn *c, const union conn_addr *a, char *why, size_t whylen,
           const char **deny_rule)
{
	switch (guard_addr_check(c->px->px_cfg.policy, c->px->px_cfg.hosts, &a->sa, c->port, why,
	                         whylen, deny_rule)) {
	case GUARD_ADDR_PERMITTED:
		return ADDR_PERMITTED;
	case GUARD_ADDR_AUDIT_DENIED:
		return ADDR_AUDIT_DENIED;
	case GUARD_ADDR_REFUSED_GUARD:
	case GUARD_ADDR_REFUSED_CIDR:
		break;
	}
	return ADDR_REFUSED;
}

size_t
upstream_filter(struct conn *c, char *why, size_t whylen, const char **deny_rule,
                union conn_addr *refused)
{
	union conn_addr late[CONN_MAX_ADDRS];
	size_t kept = 0, n_late = 0;
	bool said = false;

	*deny_rule = NULL;
	for (size_t i = 0; i < c->n_addrs; i++) {
		switch (addr_check(c, &c->addrs[i], said ? NULL : why, whylen,
		                   said ? NULL : deny_rule)) {
		case ADDR_PERMITTED:
			c->addrs[kept++] = c->addrs[i];
			break;
		case ADDR_AUDIT_DENIED:
			/* Tried only after every address enforce mode would
			 * use, so audit marks only what enforce would refuse. */
			late[n_late++] = c->addrs[i];
			break;
		case ADDR_REFUSED:
			if (!said)
				*refused = c->addrs[i];
			said = true;
			break;
		}
	}
	for (size_t i = 0; i < n_late; i++)
		c->addrs[kept++] = late[i];
	c->n_addrs = kept;
	return kept;
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

/* Keep v6 first, then v4 (as the resolver gives them), at most
 * CONN_MAX_ADDRS, without repeats. A mapped v6 answer is taken as the v4
 * address it is. */
static void
take_addrs(struct conn *c, const struct resolver_addrs *res)
{
	c->n_addrs = 0;
	for (size_t i = 0; i < res->n && c->n_addrs < CONN_MAX_ADDRS; i++) {
		union conn_addr a;
		bool dup = false;

		memset(&a, 0, sizeof(a));
		memcpy(&a, &res->addr[i],
		       res->addr[i].ss_family == AF_INET6 ? sizeof(a.in6) : sizeof(a.in));
		conn_addr_unmap(&a);
		set_port(&a, c->port);
		for (size_t k = 0; k < c->n_addrs; k++)
			dup = dup || conn_addr_eq(&c->addrs[k], &a);
		if (!dup)
			c->addrs[c->n_addrs++] = a;
	}
}

/* Store the resolver's answer in c: the addresses, the status and, when
 * the answer refuses, what the resolver said (for the refusal). */
static void
take_answer(struct conn *c, const struct resolver_addrs *res)
{
	take_addrs(c, res);
	c->resolve_status = (int)res->status;
	c->resolve_audit_cname = res->audit_cname;
	memset(&c->resolve_refused, 0, sizeof(c->resolve_refused));
	if (res->status == RESOLVER_ADDRS_GUARD) {
		memcpy(&c->resolve_refused, &res->refused,
		       res->refused.ss_family == AF_INET6 ? sizeof(c->resolve_refused.in6)
		                                          : sizeof(c->resolve_refused.in));
		set_port(&c->resolve_refused, c->port);
	}
	c->resolve_why[0] = '\0';
	if (res->status != RESOLVER_ADDRS_OK)
		str_copy(c->resolve_why, res->why, sizeof(c->resolve_why));
	c->resolve_ready = true;
}

static void
upstream_dns_done(const struct resolver_addrs *res, void *arg)
{
	struct conn *c = arg;

	c->dnsreq = NULL;
	take_answer(c, res);
	conn_resolved(c);
}

int
upstream_resolve(struct conn *c)
{
	struct resolver_addrs now;
	union conn_addr a;

	memset(&a, 0, sizeof(a));
	c->n_addrs = 0;
	c->next_addr = 0;
	c->resolve_ready = false;
	c->resolve_status = RESOLVER_ADDRS_OK;
	c->resolve_audit_cname = false;
	if (c->ip_literal) {
		if (!conn_addr_parse(&a, c->host, c->port)) {
			conn_refuse(c, VR_BAD_NAME, "bad IP literal");
			return -1;
		}
		c->addrs[0] = a;
		c->n_addrs = 1;
		c->resolve_ready = true;
		conn_resolved(c);
		return 0;
	}
	/* Never calls back from inside: an answer known at once (cache,
	 * hosts file, a local failure) is in now. */
	c->dnsreq = resolver_lookup(c->px->px_cfg.resolver, c->host, upstream_dns_done, c, &now);
	if (c->dnsreq == NULL) {
		take_answer(c, &now);
		conn_resolved(c);
	}
	return 0;
}

int
upstream_take_answer(struct conn *c)
{
	if (c->ip_literal)
		return 0;
	switch ((enum resolver_addrs_status)c->resolve_status) {
	case RESOLVER_ADDRS_OK:
		if (c->resolve_audit_cname && c->decided && c->verdict == VERDICT_ALLOW) {
			/* Audit: enforce mode would have refused the chain. */
			c->verdict = VERDICT_AUDIT_DENY;
			c->why = VR_CNAME_DENIED;
			snprintf(c->detail, sizeof(c->detail), "%s: CNAME to a denied name",
			         c->host);
		}
		return 0;
	case RESOLVER_ADDRS_CNAME:
		/* The listener refuses this name's chain; so does the proxy. */
		c->rule[0] = '\0';
		conn_refuse(c, VR_CNAME_DENIED, "%s: %s", c->host, c->resolve_why);
		return -1;
	case RESOLVER_ADDRS_GUARD:
		/* The refused address is the line's ip, as when the guard
		 * refuses it here (upstream_filter). */
		if (c->resolve_refused.sa.sa_family != 0) {
			c->dst = c->resolve_refused;
			c->has_dst = true;
		}
		conn_refuse(c, VR_GUARD, "%s: %s", c->host, c->resolve_why);
		return -1;
	case RESOLVER_ADDRS_TIMEOUT:
		conn_refuse(c, VR_DNS_TIMEOUT, "resolving %s timed out (%s)", c->host,
		            c->resolve_why);
		return -1;
	case RESOLVER_ADDRS_NXDOMAIN:
		conn_refuse(c, VR_DNS_ERROR, "%s does not resolve (no such name)", c->host);
		return -1;
	case RESOLVER_ADDRS_NODATA:
		conn_refuse(c, VR_DNS_ERROR, "%s does not resolve (no addresses)", c->host);
		return -1;
	case RESOLVER_ADDRS_FAIL:
		break;
	}
	conn_refuse(c, VR_DNS_ERROR, "%s does not resolve (%s)", c->host,
	            c->resolve_why[0] != '\0' ? c->resolve_why : "resolver failed");
	return -1;
}

void
upstream_cancel(struct conn *c)
{
	if (c->dnsreq != NULL) {
		struct resolver_lookup *l = c->dnsreq;

		c->dnsreq = NULL;
		resolver_lookup_cancel(l);
	}
}

static void upstream_event(struct bufferevent *bev, short what, void *arg);

/* What one try at the next address came to. */
enum upstream_try {
	UPSTREAM_CONNECTING, /* under way: upstream_event() tells the end */
	UPSTREAM_FAILED,     /* this address failed (errno); another may not */
	UPSTREAM_NO_SOCKET,  /* out of descriptors or memory here: none will do */
};

static enum upstream_try
upstream_try(struct conn *c)
{
	union conn_addr *a;
	struct bufferevent *bev;
	struct timeval tv;
	int fd;

	conn_half_free(&c->up);
	if (c->next_addr >= c->n_addrs)
		return UPSTREAM_FAILED;
	a = &c->addrs[c->next_addr++];
	c->dst = *a;
	c->has_dst = true;
	upstream_mark_audit(c, a);
	/* Descriptors freed since go back to the reserve before this takes
	 * one: when it cannot be made whole, none is free for us either. */
	fdres_refill(c->px->px_fds);
	fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM
		               ? UPSTREAM_NO_SOCKET
		               : UPSTREAM_FAILED;
	c->up.fd = fd;
	/* connect() here, not in libevent, so an immediate failure keeps
	 * its errno for the message. */
	if (connect(fd, &a->sa, conn_addr_len(a)) != 0 && errno != EINPROGRESS)
		return UPSTREAM_FAILED;
	bev = bufferevent_socket_new(c->px->px_base, fd, 0);
	if (bev == NULL) {
		errno = ENOMEM;
		return UPSTREAM_NO_SOCKET;
	}
	conn_half_set_bev(&c->up, bev);
	bufferevent_setcb(c->up.bev, NULL, NULL, upstream_event, c);
	tv.tv_sec = c->px->px_cfg.connect_timeout_ms / 1000;
	tv.tv_usec = (c->px->px_cfg.connect_timeout_ms % 1000) * 1000;
	bufferevent_set_timeouts(c->up.bev, NULL, &tv);
	/* NULL address: the fd is already connecting; report when done. */
	if (bufferevent_socket_connect(c->up.bev, NULL, 0) != 0)
		return UPSTREAM_FAILED;
	return UPSTREAM_CONNECTING;
}

/* Try the next address; after the last, refuse with the last error. A
 * connection this side cannot make (no descriptor) is refused as the
 * resource limit it is, not blamed on the destination. True while a
 * connect is under way; false after refusing (c may be gone). */
static bool
upstream_next(struct conn *c, int err, bool timeout)
{
	char ip[INET6_ADDRSTRLEN];

	while (c->next_addr < c->n_addrs) {
		enum upstream_try r = upstream_try(c);

		if (r == UPSTREAM_CONNECTING)
			return true;
		err = errno;
		if (r == UPSTREAM_NO_SOCKET) {
			conn_half_free(&c->up);
			if (err != ENOMEM)
				proxy_fd_starved(c->px);
			conn_refuse_resource(c, err == ENOMEM ? "out of memory"
			                                      : "out of file descriptors");
			return false;
		}
	}
	conn_half_free(&c->up);
	conn_addr_str(&c->dst, ip, sizeof(ip));
	if (timeout)
		conn_refuse(c, VR_CONNECT_TIMEOUT, "connecting to %s port %u timed out", ip,
		            (unsigned)c->port);
	else if (err == ECONNREFUSED)
		conn_refuse(c, VR_CONNECT_REFUSED, "%s port %u refused the connection", ip,
		            (unsigned)c->port);
	else
		conn_refuse(c, VR_UNREACHABLE, "connecting to %s port %u: %s", ip,
		            (unsigned)c->port, strerror(err));
	return false;
}

static void
upstream_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	(void)bev;

	if (what & BEV_EVENT_CONNECTED) {
		bufferevent_set_timeouts(c->up.bev, NULL, NULL);
		conn_connected(c);
		return;
	}
	(void)upstream_next(c, EVUTIL_SOCKET_ERROR(), (what & BEV_EVENT_TIMEOUT) != 0);
}

int
upstream_connect(struct conn *c)
{
	/* The first try is the loop's first round. */
	return upstream_next(c, 0, false) ? 0 : -1;
}
