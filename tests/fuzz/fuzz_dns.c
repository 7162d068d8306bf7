/* Fuzz target for the DNS parser and the pure query-handling path
 * (dns/msg.c, dns/answer.c). The input is used three ways: as a query from
 * the sandbox (parse, decide, build the reply, which must parse back), as
 * an upstream response to a fixed query and to itself (parse, filter
 * through policy and guard, build the reply), and as a name to read at
 * every offset. */
#include "dns/answer.h"
#include "dns/msg.h"
#include "policy/policy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_policy[] = "version: 1\n"
                                  "name: fuzz\n"
                                  "allow:\n"
                                  "  - host: allowed.test\n"
                                  "  - host: \"*.allowed.test\"\n"
                                  "  - cidr: 10.0.0.0/8\n"
                                  "deny:\n"
                                  "  - host: evil.test\n";

static struct policy *
fuzz_get_policy(void)
{
	static struct policy *p;

	if (p == NULL) {
		p = policy_load_buffer("fuzz.yaml", fuzz_policy, sizeof(fuzz_policy) - 1, NULL);
		if (p == NULL)
			abort();
	}
	return p;
}

/* Every reply we build must be a well-formed response to its query. */
static void
check_reply(const struct dns_query *q, const uint8_t *buf, size_t n, size_t limit)
{
	static struct dns_response r;

	if (n == 0)
		return;
	if (n > limit)
		abort();
	if (dns_response_parse(buf, n, &r) != DNS_OK)
		abort();
	if (r.id != q->id || !dns_name_eq(r.qname, q->qname) || r.qtype != q->qtype)
		abort();
}

static void
as_response(const struct policy *p, const struct dns_query *q, const uint8_t *data, size_t size)
{
	static struct dns_response r;
	static struct dns_filtered f;
	static uint8_t out[DNS_MSG_MAX];

	if (dns_response_parse(data, size, &r) != DNS_OK)
		return;
	if (dns_filter(p, q, &r, 300, &f) != 0)
		return;
	if (f.n > DNS_MAX_RR || f.n_removed > DNS_MAX_RR)
		abort();
	for (size_t i = 0; i < f.n; i++)
		if (f.rr[i].ttl > 300)
			abort();
	check_reply(q, out, dns_reply(q, &f, 0, DNS_EDE_BLOCKED, "fuzz", 512, out, sizeof(out)),
	            512);
	check_reply(q, out, dns_reply(q, &f, 0, -1, NULL, DNS_MSG_MAX, out, sizeof(out)),
	            DNS_MSG_MAX);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct policy *p = fuzz_get_policy();
	static uint8_t out[DNS_MSG_MAX];
	struct dns_query q;
	struct dns_decision d;
	enum dns_err e;

	if (size > DNS_MSG_MAX)
		return 0;
	e = dns_query_parse(data, size, &q);
	if (e == DNS_OK) {
		size_t limit = dns_udp_limit(&q);

		dns_decide(p, &q, &d);
		check_reply(&q, out,
		            dns_reply(&q, NULL, d.rcode, DNS_EDE_BLOCKED, "airlock: fuzz", limit,
		                      out, sizeof(out)),
		            limit);
		{
			/* Our upstream query must parse as a query again. */
			size_t n = dns_upstream_query(&q, 7, out, sizeof(out));
			struct dns_query uq;

			if (n == 0 || dns_query_parse(out, n, &uq) != DNS_OK ||
			    !dns_name_eq(uq.qname, q.qname) || uq.qtype != q.qtype)
				abort();
		}
		if (d.action == DNS_ACT_FORWARD)
			as_response(p, &q, data, size); /* a query is not a response */
	}
	/* The input as the upstream's answer to fixed queries. */
	{
		static const char *const names[] = {"allowed.test", "www.allowed.test"};
		static const uint16_t types[] = {DNS_TYPE_A, DNS_TYPE_AAAA, DNS_TYPE_CNAME};

		for (size_t i = 0; i < 2; i++)
			for (size_t t = 0; t < 3; t++) {
				memset(&q, 0, sizeof(q));
				memcpy(q.qname, names[i], strlen(names[i]) + 1);
				q.qtype = types[t];
				q.qclass = DNS_CLASS_IN;
				q.has_opt = (t == 0);
				q.udp_size = 1232;
				as_response(p, &q, data, size);
			}
	}
	/* Names at every offset (bounded). */
	for (size_t off = 0; off < size && off < 512; off++) {
		char name[DNS_NAME_TEXT_MAX];
		size_t o = off;
		struct sockaddr_storage ss;

		if (dns_name_read(data, size, &o, name) == DNS_OK) {
			if (strlen(name) >= DNS_NAME_TEXT_MAX || o > size)
				abort();
			(void)dns_reverse_parse(name, &ss);
		}
	}
	return 0;
}
