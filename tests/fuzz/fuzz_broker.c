/* The broker's parsers get whatever a compromised worker sends (requests)
 * and, on the worker's side, the broker's replies. Whatever arrives: no
 * crash, no read outside the buffer; a request accepted is well-formed
 * (known type, nonzero id and port, a normalised name that is no IP
 * literal, an address of a real family), and its encoding is the only
 * one: built again from what was parsed, it is the same bytes. The same
 * of a LEAF the worker takes. */
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

		if (rq->port == 0 || size != sizeof(m) || (rq->flags & ~BROKER_F_ALL) != 0)
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
		            rq->flags & BROKER_F_ECH,
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
	case BROKER_MSG_RESOLVE: {
		struct broker_req_resolve again;

		/* The question dns_query_parse would have given: a name in
		 * the DNS text form, normalised to the name sent. */
		if (size != sizeof(again) || rq->qname[0] == '\0' ||
		    strlen(rq->qname) >= DNS_NAME_TEXT_MAX ||
		    policy_name_normalize(rq->qname, norm, sizeof(norm), &why) != 0 ||
		    strcmp(norm, rq->name) != 0)
			abort();
		for (const char *c = rq->qname; *c != '\0'; c++)
			if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
			      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
				abort();
		if (broker_build_resolve(&again, rq->id, rq->qname, rq->qtype, rq->qclass,
		                         rq->name) != 0 ||
		    memcmp(&again, data, sizeof(again)) != 0)
			abort();
		break;
	}
	case BROKER_MSG_MINT: {
		struct broker_req_mint m, again;

		/* A DNS name for a leaf: never a wildcard nor an address. */
		if (rq->port == 0 || size != sizeof(m) ||
		    policy_name_normalize(rq->name, norm, sizeof(norm), &why) != 0 ||
		    strcmp(norm, rq->name) != 0 || strchr(rq->name, '*') != NULL ||
		    inet_pton(AF_INET, rq->name, b) == 1 || inet_pton(AF_INET6, rq->name, b) == 1)
			abort();
		memcpy(&m, data, sizeof(m));
		if (strcmp(m.name, rq->name) != 0)
			break; /* normalised: another spelling of the same name */
		if (broker_build_mint(&again, rq->id, rq->name, rq->port) != 0 ||
		    memcmp(&again, data, sizeof(again)) != 0)
			abort();
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

/* A DNS reply the worker takes holds only what dns_filter could have
 * kept, and is the one encoding of it. */
static void
check_dns_reply(const uint8_t *data, size_t size, const struct broker_dns_result *d)
{
	static struct broker_dns_reply *again;
	size_t n;

	if (d->id == 0 || d->status > BROKER_DNS_STATUS_MAX || d->f.n > DNS_MAX_RR ||
	    (d->status != BROKER_DNS_ANSWER && d->f.n != 0) || d->f.why >= VR_COUNT ||
	    memchr(d->why, '\0', sizeof(d->why)) == NULL)
		abort();
	for (size_t i = 0; i < d->f.n; i++) {
		const struct dns_rr *rr = &d->f.rr[i];

		if ((rr->type != DNS_TYPE_A && rr->type != DNS_TYPE_AAAA &&
		     rr->type != DNS_TYPE_CNAME) ||
		    rr->rclass != DNS_CLASS_IN || memchr(rr->name, '\0', sizeof(rr->name)) == NULL ||
		    memchr(rr->target, '\0', sizeof(rr->target)) == NULL || rr->name[0] == '\0' ||
		    (rr->type == DNS_TYPE_CNAME) != (rr->target[0] != '\0'))
			abort();
	}
	if (again == NULL && (again = malloc(BROKER_DNS_REPLY_MAX)) == NULL)
		abort();
	n = broker_build_dns_reply(again, d->id, d->status, d->f.why, d->flags,
	                           d->status == BROKER_DNS_ANSWER ? &d->f : NULL, d->why);
	if (n != size || memcmp(again, data, n) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct broker_dns_result dres;
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
	{
		static struct broker_leaf l, again;

		if (broker_parse_leaf(data, size, &l) == 0 &&
		    (l.h.id == 0 || l.len == 0 || l.len > BROKER_LEAF_DER_MAX ||
		     broker_build_leaf(&again, l.h.id, l.der, l.len) != 0 ||
		     memcmp(&again, data, sizeof(again)) != 0))
			abort();
	}
	if (broker_parse_dns_reply(data, size, &dres) == 0)
		check_dns_reply(data, size, &dres);
	return 0;
}
