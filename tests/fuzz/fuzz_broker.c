/* The broker's parsers get whatever a compromised worker sends (requests)
 * and, on the worker's side, the broker's replies. Whatever arrives: no
 * crash, no read outside the buffer; a request accepted is well-formed
 * (known type, nonzero id and port, a normalised name that is no IP
 * literal, an address of a real family), and its encoding is the only
 * one: built again from what was parsed, it is the same bytes. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "broker/msg.h"
#include "policy/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_request(const uint8_t *data, size_t size, const struct broker_request *rq)
{
	char norm[BROKER_NAME_MAX];
	const char *why;
	unsigned char b[16];

	if (rq->id == 0)
		abort();
	switch (rq->type) {
	case BROKER_MSG_CONNECT_NAME: {
		struct broker_req_name m, again;

		if (rq->port == 0 || size != sizeof(m) ||
		    ((rq->flags & BROKER_F_TOLD) && !(rq->flags & BROKER_F_ORIG)))
			abort();
		if (policy_name_normalize(rq->name, norm, sizeof(norm), &why) != 0 ||
		    strcmp(norm, rq->name) != 0 || inet_pton(AF_INET, rq->name, b) == 1 ||
		    inet_pton(AF_INET6, rq->name, b) == 1)
			abort();
		memcpy(&m, data, sizeof(m));
		if (strcmp(m.name, rq->name) != 0)
			break; /* normalised: another spelling of the same name */
		if (broker_build_name(
		            &again, rq->id, rq->name, rq->port,
		            rq->flags & (BROKER_F_ECH | BROKER_F_TOLD),
		            (rq->flags & BROKER_F_ORIG) ? (const struct sockaddr *)&rq->addr : NULL,
		            rq->rule) != 0 ||
		    memcmp(&again, data, sizeof(again)) != 0)
			abort();
		break;
	}
	case BROKER_MSG_CONNECT_ADDR: {
		struct broker_req_addr again;

		if (rq->port == 0 ||
		    (rq->addr.ss_family != AF_INET && rq->addr.ss_family != AF_INET6))
			abort();
		if (broker_build_addr(&again, rq->id, (const struct sockaddr *)&rq->addr, rq->port,
		                      rq->rule) != 0 ||
		    size != sizeof(again))
			abort();
		/* A v4-mapped IPv6 address is rebuilt as the IPv4 it is. */
		if (memcmp(&again, data, sizeof(again)) != 0) {
			const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&rq->addr;

			if (rq->addr.ss_family != AF_INET6 ||
			    !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
				abort();
		}
		break;
	}
	case BROKER_MSG_SELFTEST:
		if (rq->op < BROKER_SELFTEST_OPEN || rq->op > BROKER_SELFTEST_MAX)
			abort();
		break;
	default:
		abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct broker_request rq;
	struct broker_reply r;
	enum broker_parse p;

	/* Both builds' parsers: with and without the self-test type. */
	for (int st = 0; st < 2; st++) {
		p = broker_parse_request(data, size, st != 0, &rq);
		if (p == BROKER_PARSE_OK) {
			if (!st && rq.type == BROKER_MSG_SELFTEST)
				abort();
			check_request(data, size, &rq);
		} else if (broker_parse_status(p) == BROKER_OK || broker_parse_name(p)[0] == '?') {
			abort();
		}
	}
	if (broker_parse_reply(data, size, &r) == 0) {
		if (r.h.id == 0 || r.status > BROKER_STATUS_MAX || r.audit > BROKER_STATUS_MAX ||
		    (r.audit != BROKER_OK) != (r.verdict == BROKER_V_AUDIT_DENY) ||
		    memchr(r.rule, '\0', sizeof(r.rule)) == NULL ||
		    memchr(r.reason, '\0', sizeof(r.reason)) == NULL ||
		    broker_status_name((enum broker_status)r.status)[0] == '?')
			abort();
	}
	return 0;
}
