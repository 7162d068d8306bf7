/* Helpers shared by the policy unit tests. */
#ifndef AIRLOCK_TESTS_POLICY_UTIL_H
#define AIRLOCK_TESTS_POLICY_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/policy.h"

/* Load YAML text as file "t.yaml". */
static inline struct policy *
load_str(const char *yaml, struct policy_diag *d)
{
	return policy_load_buffer("t.yaml", yaml, strlen(yaml), d);
}

/* Fill ss with the address in text (v4 or v6). */
static inline const struct sockaddr *
addr(struct sockaddr_storage *ss, const char *text)
{
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, text, &((struct sockaddr_in *)ss)->sin_addr) == 1)
		ss->ss_family = AF_INET;
	else if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1)
		ss->ss_family = AF_INET6;
	else
		ss->ss_family = AF_UNSPEC;
	return (const struct sockaddr *)ss;
}

#endif
