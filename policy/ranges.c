/* What the policy opens, as ranges, for the sandbox's firewall: the ports
 * some allow rule names and the networks of the allow cidr rules
 * (nft/refuse.c turns them into the ruleset's refusals at the SYN). Pure
 * reads of the compiled tables (policy/internal.h). */
#include <string.h>

#include <sys/socket.h>

#include "policy/internal.h"
#include "policy/policy.h"

size_t
policy_allow_ports(const struct policy *p, struct policy_port_range *out, size_t max)
{
	/* A bit per port: 8 KiB, on the stack, and one pass over the rules. */
	uint64_t open[65536 / 64];
	size_t n = 0;
	uint32_t port;

	memset(open, 0, sizeof(open));
	for (uint32_t i = 0; i < p->p_n_rules; i++) {
		const struct prule *r = &p->p_rules[i];

		if (r->action != POLICY_ALLOW)
			continue;
		for (uint32_t j = 0; j < r->n_ports; j++) {
			const struct pport *pp = &p->p_ports[r->port_off + j];

			for (port = pp->lo; port <= pp->hi; port++)
				open[port / 64] |= 1ull << (port % 64);
		}
	}
	for (port = 0; port < 65536;) {
		uint32_t lo;

		if (!(open[port / 64] >> (port % 64) & 1)) {
			port++;
			continue;
		}
		for (lo = port; port < 65536 && (open[port / 64] >> (port % 64) & 1); port++)
			;
		if (n < max)
			out[n] = (struct policy_port_range){(uint16_t)lo, (uint16_t)(port - 1)};
		n++;
	}
	return n;
}

/* True when the chain from first holds an allow rule. */
static bool
chain_allows(const struct policy *p, uint32_t first)
{
	for (uint32_t i = first; i != PRULE_NONE; i = p->p_rules[i].next)
		if (p->p_rules[i].action == POLICY_ALLOW)
			return true;
	return false;
}

size_t
policy_allow_cidrs(const struct policy *p,
                   void (*fn)(int family, const uint8_t *addr, unsigned plen, void *arg), void *arg)
{
	uint64_t size4 = (UINT64_MAX >> p->p_cidr4_shift) + 1;
	uint64_t size6 = (UINT64_MAX >> p->p_cidr6_shift) + 1;
	uint8_t a[16];
	size_t n = 0;

	for (uint64_t i = 0; i < size4; i++) {
		const struct pcidr4_slot *s = &p->p_cidr4[i];
		uint32_t v4 = (uint32_t)s->key;

		if (!s->used || !chain_allows(p, s->first))
			continue;
		memset(a, 0, sizeof(a));
		a[0] = (uint8_t)(v4 >> 24);
		a[1] = (uint8_t)(v4 >> 16);
		a[2] = (uint8_t)(v4 >> 8);
		a[3] = (uint8_t)v4;
		fn(AF_INET, a, (unsigned)(s->key >> 32), arg);
		n++;
	}
	for (uint64_t i = 0; i < size6; i++) {
		const struct pcidr6_slot *s = &p->p_cidr6[i];

		if (!s->used || !chain_allows(p, s->first))
			continue;
		for (int b = 0; b < 8; b++) {
			a[b] = (uint8_t)(s->hi >> (56 - 8 * b));
			a[8 + b] = (uint8_t)(s->lo >> (56 - 8 * b));
		}
		fn(AF_INET6, a, s->plen, arg);
		n++;
	}
	return n;
}
