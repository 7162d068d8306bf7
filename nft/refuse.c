/* The refusals at the SYN, from the compiled policy (nft/refuse.h says
 * which and why those). Pure: the ruleset (nft/ruleset.c) puts the ranges
 * into sets of table inet airlock. */
#include "nft/refuse.h"

#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include "common/util.h"
#include "policy/guard.h"
#include "policy/policy.h"

/* guard_blocks lists about 70; room to spare. */
#define MAX_BLOCKS 160

struct blocks {
	struct guard_block b[MAX_BLOCKS];
	bool kept[MAX_BLOCKS]; /* false: an allow cidr rule lies in it */
	size_t n;
};

/* The network (family, addr, plen) of an allow rule, as one view of it:
 * every block it lies inside loses its refusal. */
static void
drop_blocks(struct blocks *bl, int family, const uint8_t *addr, unsigned plen)
{
	for (size_t i = 0; i < bl->n; i++) {
		const struct guard_block *g = &bl->b[i];

		if (g->family == family && plen >= g->plen && guard_prefix_is(addr, g->addr, g->plen))
			bl->kept[i] = false;
	}
}

/* An allow cidr rule's network, seen in each spelling the matcher and the
 * guard look through (guard_v4in6): an IPv4 network also as v4-mapped,
 * NAT64 and 6to4, an IPv6 one carrying IPv4 also as that. Which spellings
 * the matcher really joins does not matter here: dropping a block too
 * many only leaves it to the proxy. */
static void
allow_cidr(int family, const uint8_t *addr, unsigned plen, void *arg)
{
	static const struct {
		uint8_t head[12];
		unsigned at, bits;
	} in6[] = {
	        {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 12, 96},
	        {{0, 0x64, 0xff, 0x9b}, 12, 96},
	        {{0x20, 0x02}, 2, 16},
	};
	struct blocks *bl = arg;
	uint8_t v[16];

	drop_blocks(bl, family, addr, plen);
	for (size_t j = 0; j < ARRAY_SIZE(in6); j++) {
		memset(v, 0, sizeof(v));
		if (family == AF_INET) {
			memcpy(v, in6[j].head, sizeof(in6[j].head));
			memcpy(v + in6[j].at, addr, 4);
			drop_blocks(bl, AF_INET6, v, in6[j].bits + plen);
		} else if (plen >= in6[j].bits && guard_prefix_is(addr, in6[j].head, in6[j].bits)) {
			unsigned p4 = plen - in6[j].bits;

			memcpy(v, addr + in6[j].at, 4);
			drop_blocks(bl, AF_INET, v, p4 > 32 ? 32 : p4);
		}
	}
}

/* The range of a block: its address, and that with the host bits set. */
static void
block_range(const struct guard_block *g, struct nft_range *r)
{
	unsigned len = g->family == AF_INET ? 4 : 16;

	memset(r, 0, sizeof(*r));
	memcpy(r->lo, g->addr, len);
	memcpy(r->hi, g->addr, len);
	for (unsigned bit = g->plen; bit < len * 8; bit++)
		r->hi[bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
}

static int
range_cmp(const void *x, const void *y)
{
	return memcmp(((const struct nft_range *)x)->lo, ((const struct nft_range *)y)->lo, 16);
}

/* a + 1 == b, as 16-byte big-endian numbers (len bytes used). */
static bool
next_to(const uint8_t *a, const uint8_t *b, unsigned len)
{
	uint8_t s[16];
	int i;

	memcpy(s, a, len);
	for (i = (int)len - 1; i >= 0; i--)
		if (++s[i] != 0)
			break;
	return i >= 0 && memcmp(s, b, len) == 0;
}

/* Sort r[0..n) and merge overlapping and adjacent ranges; the new count. */
static size_t
merge(struct nft_range *r, size_t n, unsigned len)
{
	size_t k = 0;

	if (n == 0)
		return 0;
	qsort(r, n, sizeof(*r), range_cmp);
	for (size_t i = 1; i < n; i++) {
		if (memcmp(r[i].lo, r[k].hi, len) <= 0 || next_to(r[k].hi, r[i].lo, len)) {
			if (memcmp(r[i].hi, r[k].hi, len) > 0)
				memcpy(r[k].hi, r[i].hi, len);
		} else {
			r[++k] = r[i];
		}
	}
	return k + 1;
}

void
nft_refuse_build(const struct policy *p, struct nft_refuse *out)
{
	struct policy_port_range ports[NFT_REFUSE_MAX_PORTS];
	struct blocks bl;
	size_t n;

	memset(out, 0, sizeof(*out));
	/* Audit mode lets a port no rule lists through to the proxy, which
	 * logs audit-deny; a policy with too many ranges is left to it. */
	n = policy_allow_ports(p, ports, ARRAY_SIZE(ports));
	if (policy_mode(p) == POLICY_MODE_ENFORCE && n <= ARRAY_SIZE(ports)) {
		out->ports = true;
		out->n_open = n;
		for (size_t i = 0; i < n; i++) {
			out->open[i].lo = ports[i].lo;
			out->open[i].hi = ports[i].hi;
		}
	}

	memset(&bl, 0, sizeof(bl));
	bl.n = guard_blocks(bl.b, ARRAY_SIZE(bl.b));
	if (bl.n > ARRAY_SIZE(bl.b))
		bl.n = 0; /* cannot happen with today's list; then none */
	for (size_t i = 0; i < bl.n; i++)
		bl.kept[i] = true;
	(void)policy_allow_cidrs(p, allow_cidr, &bl);
	for (size_t i = 0; i < bl.n; i++) {
		const struct guard_block *g = &bl.b[i];

		if (!bl.kept[i])
			continue;
		if (g->family == AF_INET && out->n_guard4 < NFT_REFUSE_MAX_RANGES)
			block_range(g, &out->guard4[out->n_guard4++]);
		else if (g->family == AF_INET6 && out->n_guard6 < NFT_REFUSE_MAX_RANGES)
			block_range(g, &out->guard6[out->n_guard6++]);
	}
	out->n_guard4 = merge(out->guard4, out->n_guard4, 4);
	out->n_guard6 = merge(out->guard6, out->n_guard6, 16);
}
