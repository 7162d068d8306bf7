/* The resolver's decisions as pure functions of the policy, one query and
 * (for forwarded queries) one upstream response: what to do with a query,
 * which upstream records go back after the address guard, and the reply
 * bytes. No I/O and no allocation, so the whole path is unit tested and
 * fuzzed without sockets; dns/server.c only moves bytes and timers. */
#ifndef AIRLOCK_DNS_ANSWER_H
#define AIRLOCK_DNS_ANSWER_H

#include "dns/msg.h"
#include "policy/verdict.h"

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct policy;

/* Longest CNAME chain followed from the question name. */
#define DNS_MAX_CHAIN 8

enum dns_action {
	DNS_ACT_DENY,    /* NXDOMAIN + EDE; nothing goes upstream */
	DNS_ACT_FORWARD, /* resolve upstream, then dns_filter() */
	DNS_ACT_LOCAL,   /* answer rcode with no records, nothing upstream */
	DNS_ACT_PTR,     /* reverse lookup answered from the IP -> name cache */
};

struct dns_decision {
	enum dns_action action;
	enum verdict verdict;
	const char *rule;                    /* borrowed from the policy; NULL if none */
	enum verdict_reason why;             /* the log's reason; VR_NONE if none */
	char detail[DNS_NAME_TEXT_MAX + 64]; /* its sentence ("" with VR_NONE) */
	unsigned rcode;                      /* for DENY and LOCAL */
	char name[DNS_NAME_TEXT_MAX];        /* normalised qname ("." for the root) */
	struct sockaddr_storage ptr_addr;    /* for DNS_ACT_PTR */
};

/* Decide what to do with a parsed query (docs/dns.md has the table). */
void dns_decide(const struct policy *p, const struct dns_query *q, struct dns_decision *d);

/* Whether a normalised name may be resolved: some allow rule covers it on
 * a port that no deny rule covering it takes back (policy_match_name).
 * *rule is the deciding rule (borrowed) or NULL; returns the
 * policy_action: POLICY_DENY when deny rules close every port the allow
 * rules open for it, or name it and no allow rule does. */
int dns_name_verdict(const struct policy *p, const char *name, const char **rule);

/* Upstream records after filtering: the CNAME chain from the question name
 * and the addresses the guard let through, TTLs capped. */
struct dns_filtered {
	unsigned rcode;
	size_t n;
	struct dns_rr rr[DNS_MAX_RR];
	size_t n_removed;
	char removed[DNS_MAX_RR][INET6_ADDRSTRLEN + 32]; /* "ip (class)" */
	enum verdict_reason why;                         /* why records were removed or it failed */
	const char *detail; /* static: its sentence; NULL with VR_NONE */
	uint32_t min_ttl;   /* smallest TTL kept (for the response cache) */
	bool cname_denied;  /* the chain ran through a denied name (in audit
	                     * mode it was followed anyway) */
	bool guarded;       /* the address guard removed an address */
	struct dns_rr first_removed; /* guarded: the first address removed */
};

/* Filter an upstream response for query q. Returns -1 when the response
 * does not answer q (another question: ignore it, keep waiting). */
int dns_filter(const struct policy *p, const struct dns_query *q, const struct dns_response *r,
               uint32_t ttl_cap, struct dns_filtered *out);

/* Build the reply to q into buf[cap]: the records in f (f may be NULL for
 * a reply with no records, then rcode is used), an OPT record when the
 * query had one, carrying an Extended DNS Error if ede >= 0. If the reply
 * exceeds limit bytes it is rebuilt without records and with TC set.
 * Returns the length, or 0 if it cannot be built. */
size_t dns_reply(const struct dns_query *q, const struct dns_filtered *f, unsigned rcode, int ede,
                 const char *ede_text, size_t limit, uint8_t *buf, size_t cap);

/* The size limit for a UDP reply to q (512, or its EDNS size up to
 * DNS_UDP_MAX). */
size_t dns_udp_limit(const struct dns_query *q);

/* The upstream query for q with our id: RD set, EDNS0 with our size, the
 * question name spelled exactly as in q (the resolver chooses its case,
 * 0x20). Returns the length or 0. */
size_t dns_upstream_query(const struct dns_query *q, uint16_t id, uint8_t *buf, size_t cap);

/* The address of an A or AAAA record, port 0. 0, or -1 for another type. */
int dns_rr_addr(const struct dns_rr *rr, struct sockaddr_storage *ss);

/* Parse "4.3.2.1.in-addr.arpa" or the 32-nibble ip6.arpa form into sa.
 * Returns 0, or -1 if name is not a complete reverse name. */
int dns_reverse_parse(const char *name, struct sockaddr_storage *sa);

#endif
