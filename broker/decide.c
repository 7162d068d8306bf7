/* See decide.h. The proxy's addr_check (proxy/upstream.c) says the same
 * with its struct conn; the step that moves dialling onto the broker
 * leaves only this one. */
#include "broker/decide.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/util.h"
#include "policy/guard.h"
#include "policy/policy.h"

void
broker_addr_str(const struct sockaddr *sa, char *out, size_t outlen)
{
	const void *p = sa->sa_family == AF_INET6
	                        ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
	                        : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    inet_ntop(sa->sa_family, p, out, (socklen_t)outlen) == NULL)
		str_copy(out, "?", outlen);
}

enum broker_addr_verdict
broker_addr_check(const struct policy *p, const struct guard_hosts *hosts,
                  const struct sockaddr *sa, uint16_t port, char *why, size_t whylen,
                  const char **rule)
{
	enum guard_class cls = guard_classify(sa);
	enum guard_host host = GUARD_HOST_UNKNOWN;
	struct policy_verdict v;
	char ip[INET6_ADDRSTRLEN];
	bool audit_denied = false;

	if (rule != NULL)
		*rule = NULL;
	broker_addr_str(sa, ip, sizeof(ip));
	/* A deny cidr rule refuses its addresses however they were reached. */
	policy_match_addr(p, sa, port, &v);
	if (v.action == POLICY_DENY) {
		if (rule != NULL)
			*rule = v.where;
		if (why != NULL)
			snprintf(why, whylen, "%s is denied by a cidr rule", ip);
		if (policy_mode(p) != POLICY_MODE_AUDIT)
			return BROKER_ADDR_REFUSED_CIDR;
		audit_denied = true;
	}
	/* The host's own addresses as they are now; while the set cannot
	 * tell (or there is none), every public address counts as one. */
	if (cls == GUARD_PUBLIC && hosts != NULL)
		host = guard_hosts_lookup(hosts, sa);
	if ((cls == GUARD_PUBLIC && host == GUARD_HOST_OTHER) ||
	    /* An explicit cidr rule is the only way to private ranges,
	     * loopback and the host's own addresses. */
	    policy_cidr_allows(p, sa, port))
		return audit_denied ? BROKER_ADDR_AUDIT_DENIED : BROKER_ADDR_PERMITTED;
	if (rule != NULL)
		*rule = NULL;
	if (why != NULL) {
		if (cls != GUARD_PUBLIC)
			snprintf(why, whylen, "%s is %s (address guard)", ip,
			         guard_class_name(cls));
		else if (host == GUARD_HOST_OWN)
			snprintf(why, whylen, "%s is one of this host's addresses", ip);
		else
			snprintf(why, whylen, "%s may be one of this host's addresses (%s)", ip,
			         hosts != NULL ? guard_hosts_state_text(guard_hosts_state(hosts))
			                       : "no host address list");
	}
	return BROKER_ADDR_REFUSED_GUARD;
}
