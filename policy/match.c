/* The compiled matcher. Names: one hash table of exact names and one of
 * wildcard suffixes ("*.example.com" is stored as "example.com"); a query
 * is hashed once, right to left, and every proper suffix's hash falls out
 * of that one pass at each dot, so a lookup costs one pass over the name
 * plus one probe per label. CIDRs: one table keyed by (family, prefix
 * length, masked address), probed once per prefix length present.
 * Nothing here allocates after policy_compile(). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "policy/internal.h"

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME 1099511628211ull

/* FNV's low bits are weak; the table index is taken after this mix. */
static inline uint64_t
hash_mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/* FNV-1a over the bytes from last to first: the same order the query
 * walk uses, so a suffix's hash is a prefix of the walk. */
static uint64_t
hash_name_rev(const char *s, size_t len)
{
	uint64_t h = FNV_OFFSET;

	while (len > 0) {
		h ^= (unsigned char)s[--len];
		h *= FNV_PRIME;
	}
	return h;
}

static uint64_t
table_size(uint32_t n)
{
	uint64_t size = 16;

	/* Load factor at most one half keeps probe chains short. */
	while (size < (uint64_t)n * 2)
		size <<= 1;
	return size;
}

static struct pname_slot *
name_find(struct pname_slot *tab, uint64_t mask, uint64_t h, const char *key,
          size_t len)
{
	uint64_t i = hash_mix(h) & mask;

	for (;; i = (i + 1) & mask) {
		struct pname_slot *s = &tab[i];

		if (s->key == NULL)
			return s;
		if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
			return s;
	}
}

static void
cidr_mask(uint8_t *addr, unsigned plen, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++) {
		unsigned bits = plen > i * 8 ? plen - i * 8 : 0;

		if (bits < 8)
			addr[i] &= (uint8_t)(0xff00u >> bits);
	}
}

static uint64_t
cidr_hash(const uint8_t *addr, unsigned fam, unsigned plen)
{
	uint64_t a, b;

	memcpy(&a, addr, 8);
	memcpy(&b, addr + 8, 8);
	return hash_mix(a ^ hash_mix(b ^ ((uint64_t)fam << 8 | plen)));
}

static struct pcidr_slot *
cidr_find(struct pcidr_slot *tab, uint64_t mask, const uint8_t *addr,
          unsigned fam, unsigned plen)
{
	uint64_t i = cidr_hash(addr, fam, plen) & mask;

	for (;; i = (i + 1) & mask) {
		struct pcidr_slot *s = &tab[i];

		if (!s->used)
			return s;
		if (s->fam == fam && s->plen == plen && memcmp(s->addr, addr, 16) == 0)
			return s;
	}
}

int
policy_compile(struct policy *p, const struct policy_rule_src *rules, uint32_t n)
{
	uint32_t n_exact = 0, n_wild = 0, n_cidr = 0;
	bool seen4[33] = { false }, seen6[129] = { false };

	p->p_rules = policy_arena_alloc(p->p_arena, sizeof(*p->p_rules) * (n ? n : 1));
	if (p->p_rules == NULL)
		return -1;
	p->p_n_rules = n;
	for (uint32_t i = 0; i < n; i++) {
		if (rules[i].kind == PRULE_EXACT)
			n_exact++;
		else if (rules[i].kind == PRULE_WILDCARD)
			n_wild++;
		else
			n_cidr++;
	}
	p->p_exact_mask = table_size(n_exact) - 1;
	p->p_suffix_mask = table_size(n_wild) - 1;
	p->p_cidr_mask = table_size(n_cidr) - 1;
	p->p_n_wild = n_wild;
	p->p_exact = policy_arena_alloc(p->p_arena, sizeof(struct pname_slot) * (p->p_exact_mask + 1));
	p->p_suffix = policy_arena_alloc(p->p_arena, sizeof(struct pname_slot) * (p->p_suffix_mask + 1));
	p->p_cidr = policy_arena_alloc(p->p_arena, sizeof(struct pcidr_slot) * (p->p_cidr_mask + 1));
	if (p->p_exact == NULL || p->p_suffix == NULL || p->p_cidr == NULL)
		return -1;

	/* Walk backwards and push on the front of each chain so that every
	 * chain ends up in load order. */
	for (uint32_t i = n; i-- > 0;) {
		const struct policy_rule_src *r = &rules[i];
		struct prule *pr = &p->p_rules[i];

		pr->pattern = r->pattern;
		pr->where = r->where;
		pr->port_off = r->port_off;
		pr->n_ports = r->n_ports;
		pr->action = r->action;
		pr->kind = r->kind;
		if (r->kind == PRULE_EXACT || r->kind == PRULE_WILDCARD) {
			size_t len = strlen(r->key);
			uint64_t h = hash_name_rev(r->key, len);
			struct pname_slot *s = r->kind == PRULE_EXACT ?
				name_find(p->p_exact, p->p_exact_mask, h, r->key, len) :
				name_find(p->p_suffix, p->p_suffix_mask, h, r->key, len);

			if (s->key == NULL) {
				s->key = r->key;
				s->len = (uint32_t)len;
				s->hash = h;
				s->first = PRULE_NONE;
			}
			pr->next = s->first;
			s->first = i;
		} else {
			unsigned fam = r->kind == PRULE_CIDR4 ? 4 : 6;
			uint8_t addr[16];
			struct pcidr_slot *s;

			memcpy(addr, r->addr, 16);
			cidr_mask(addr, r->plen, fam == 4 ? 4 : 16);
			if (fam == 4)
				memset(addr + 4, 0, 12);
			s = cidr_find(p->p_cidr, p->p_cidr_mask, addr, fam, r->plen);
			if (!s->used) {
				s->used = 1;
				memcpy(s->addr, addr, 16);
				s->fam = (uint8_t)fam;
				s->plen = r->plen;
				s->first = PRULE_NONE;
			}
			pr->next = s->first;
			s->first = i;
			if (fam == 4)
				seen4[r->plen] = true;
			else
				seen6[r->plen] = true;
		}
	}
	p->p_n_plen4 = 0;
	for (int l = 32; l >= 0; l--)
		if (seen4[l])
			p->p_plen4[p->p_n_plen4++] = (uint8_t)l;
	p->p_n_plen6 = 0;
	for (int l = 128; l >= 0; l--)
		if (seen6[l])
			p->p_plen6[p->p_n_plen6++] = (uint8_t)l;
	return 0;
}

static inline bool
rule_has_port(const struct policy *p, const struct prule *r, uint16_t port)
{
	const struct pport *pp = p->p_ports + r->port_off;

	for (uint16_t i = 0; i < r->n_ports; i++)
		if (port >= pp[i].lo && port <= pp[i].hi)
			return true;
	return false;
}

/* Every rule of a chain that covers the port competes: the lowest-numbered
 * deny, else the lowest-numbered allow, decides. */
static inline void
chain_scan(const struct policy *p, uint32_t i, uint16_t port, uint32_t *deny,
           uint32_t *allow)
{
	for (; i != PRULE_NONE; i = p->p_rules[i].next) {
		const struct prule *r = &p->p_rules[i];

		if (!rule_has_port(p, r, port))
			continue;
		if (r->action == POLICY_DENY) {
			if (i < *deny)
				*deny = i;
		} else if (i < *allow) {
			*allow = i;
		}
	}
}

static void
verdict(const struct policy *p, uint32_t deny, uint32_t allow,
        struct policy_verdict *out)
{
	if (deny != PRULE_NONE) {
		out->action = POLICY_DENY;
		out->where = p->p_rules[deny].where;
	} else if (allow != PRULE_NONE) {
		out->action = POLICY_ALLOW;
		out->where = p->p_rules[allow].where;
	} else {
		out->action = POLICY_NO_MATCH;
		out->where = NULL;
	}
}

static inline const struct pname_slot *
name_lookup(const struct pname_slot *tab, uint64_t mask, uint64_t h,
            const char *key, size_t len)
{
	uint64_t i = hash_mix(h) & mask;

	for (;; i = (i + 1) & mask) {
		const struct pname_slot *s = &tab[i];

		if (s->key == NULL)
			return NULL;
		if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
			return s;
	}
}

void
policy_match_host(const struct policy *p, const char *name, uint16_t port,
                  struct policy_verdict *out)
{
	uint32_t deny = PRULE_NONE, allow = PRULE_NONE;
	size_t len = strnlen(name, 254);
	uint64_t h = FNV_OFFSET;
	bool last_label = true, numeric = true;
	const struct pname_slot *s;

	out->action = POLICY_NO_MATCH;
	out->where = NULL;
	/* Not a normalised name: never matches (fail closed). */
	if (len == 0 || len > 253)
		return;
	for (size_t i = len; i-- > 0;) {
		unsigned char c = (unsigned char)name[i];

		if (c == '.') {
			/* An IP literal (numeric last label) only ever matches
			 * cidr rules; names never end in a numeric label. */
			if (last_label && numeric)
				return;
			last_label = false;
			if (p->p_n_wild > 0 && i + 1 < len) {
				s = name_lookup(p->p_suffix, p->p_suffix_mask, h,
				                name + i + 1, len - i - 1);
				if (s != NULL)
					chain_scan(p, s->first, port, &deny, &allow);
			}
		} else if (c == ':') {
			return;
		} else if (c < '0' || c > '9') {
			numeric = false;
		}
		h ^= c;
		h *= FNV_PRIME;
	}
	if (last_label && numeric)
		return;
	s = name_lookup(p->p_exact, p->p_exact_mask, h, name, len);
	if (s != NULL)
		chain_scan(p, s->first, port, &deny, &allow);
	verdict(p, deny, allow, out);
}

/* Extract the address to match: v4, v4-mapped v6 as v4 (a dual-stack
 * socket reports IPv4 peers that way), or v6. Returns the family (4 or 6),
 * or 0 for anything else. */
static unsigned
addr_of(const struct sockaddr *sa, uint8_t addr[16])
{
	memset(addr, 0, 16);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;

		memcpy(addr, &sin->sin_addr, 4);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)(const void *)sa;

		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			memcpy(addr, sin6->sin6_addr.s6_addr + 12, 4);
			return 4;
		}
		memcpy(addr, sin6->sin6_addr.s6_addr, 16);
		return 6;
	}
	return 0;
}

void
policy_match_addr(const struct policy *p, const struct sockaddr *sa,
                  uint16_t port, struct policy_verdict *out)
{
	uint32_t deny = PRULE_NONE, allow = PRULE_NONE;
	uint8_t addr[16], key[16];
	unsigned fam = addr_of(sa, addr);
	const uint8_t *plens = fam == 4 ? p->p_plen4 : p->p_plen6;
	unsigned n = fam == 4 ? p->p_n_plen4 : fam == 6 ? p->p_n_plen6 : 0;

	for (unsigned k = 0; k < n; k++) {
		uint64_t i;

		memcpy(key, addr, 16);
		cidr_mask(key, plens[k], fam == 4 ? 4 : 16);
		i = cidr_hash(key, fam, plens[k]) & p->p_cidr_mask;
		for (;; i = (i + 1) & p->p_cidr_mask) {
			const struct pcidr_slot *s = &p->p_cidr[i];

			if (!s->used)
				break;
			if (s->fam == fam && s->plen == plens[k] &&
			    memcmp(s->addr, key, 16) == 0) {
				chain_scan(p, s->first, port, &deny, &allow);
				break;
			}
		}
	}
	verdict(p, deny, allow, out);
}

bool
policy_cidr_allows(const struct policy *p, const struct sockaddr *sa,
                   uint16_t port)
{
	struct policy_verdict v;

	policy_match_addr(p, sa, port, &v);
	return v.action == POLICY_ALLOW;
}
