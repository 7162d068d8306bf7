/* Fuzz target for the hosts file parser (dns/resolver.c): the input is a
 * hosts(5) file. Every name it yields is answered for A and AAAA, and the
 * answer must be one the resolver's filter accepts for that question. The
 * file is the host's, not the sandbox's, but it is read by the supervisor
 * before anything else, so it must never crash it. */
#include "common/util.h"
#include "dns/answer.h"
#include "dns/msg.h"
#include "dns/resolver.h"
#include "policy/policy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char fuzz_policy[] = "version: 1\n"
                                  "name: fuzz\n"
                                  "allow:\n"
                                  "  - host: \"*.test\"\n"
                                  "  - cidr: 10.0.0.0/8\n";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct policy *p;
	static struct dns_response r;
	static struct dns_filtered f;
	static const char *const names[] = {"localhost", "a.test", "b.test", "x"};
	struct resolver_hosts *h;

	if (p == NULL && (p = policy_load_buffer("fuzz.yaml", fuzz_policy,
	                                         sizeof(fuzz_policy) - 1, NULL)) == NULL)
		abort();
	if ((h = resolver_hosts_parse((const char *)data, size)) == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		for (int t = 0; t < 2; t++) {
			uint16_t qtype = t == 0 ? DNS_TYPE_A : DNS_TYPE_AAAA;
			struct dns_query q = {.qtype = qtype, .qclass = DNS_CLASS_IN};

			if (!resolver_hosts_answer(h, names[i], qtype, &r))
				continue;
			if (r.n_an > DNS_MAX_RR)
				abort();
			for (size_t k = 0; k < r.n_an; k++)
				if (r.an[k].type != qtype || !dns_name_eq(r.an[k].name, names[i]))
					abort();
			str_copy(q.qname, names[i], sizeof(q.qname));
			if (dns_filter(p, &q, &r, 300, &f) != 0)
				abort();
		}
	}
	resolver_hosts_free(h);
	return 0;
}
