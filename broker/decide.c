/* See decide.h. */
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
