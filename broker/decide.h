/* The broker's decisions on one address (pure): the deny cidr rules and
 * the address guard (DESIGN.md decision 4), as the proxy applies them in
 * proxy/upstream.c, with the same reasons. */
#ifndef AIRLOCK_BROKER_DECIDE_H
#define AIRLOCK_BROKER_DECIDE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct policy;
struct guard_hosts;

enum broker_addr_verdict {
	BROKER_ADDR_REFUSED_GUARD, /* guarded class, or the host's own */
	BROKER_ADDR_REFUSED_CIDR,  /* a deny cidr rule covers it */
	BROKER_ADDR_PERMITTED,
	BROKER_ADDR_AUDIT_DENIED, /* audit mode: a deny cidr rule covers it */
};

/* What the deny cidr rules and the guard say of sa (AF_INET or AF_INET6)
 * on port. hosts (may be NULL: every public address counts as possibly
 * the host's) is the host's own addresses. On a refusal or audit-deny,
 * why (whylen bytes, may be NULL) gets the reason and *rule (may be NULL)
 * the deny rule's "file:line" (borrowed from p) or NULL. */
enum broker_addr_verdict broker_addr_check(const struct policy *p, const struct guard_hosts *hosts,
                                           const struct sockaddr *sa, uint16_t port, char *why,
                                           size_t whylen, const char **rule);

/* inet_ntop of sa into out, "?" when it is neither family. */
void broker_addr_str(const struct sockaddr *sa, char *out, size_t outlen);

#endif
