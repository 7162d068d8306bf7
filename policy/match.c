/* The compiled matcher. Names: one hash table of exact names and one of
 * wildcard suffixes ("*.example.com" is stored as "example.com"); a query
 * is hashed once, right to left, and every proper suffix's hash falls out
 * of that one pass at each dot, so a lookup costs one pass over the name,
 * one bit test per label (the suffix filter) and a probe only where a
 * wildcard may end. CIDRs: per family one table keyed by (prefix length,
 * masked address), probed once per prefix length present in the policy.
 * Nothing here allocates after policy_compile(). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/guard.h"
#include "policy/internal.h"

#define FNV_OFFSET 14695981039346656037ull
#define FNV_PRIME  1099511628211ull
#define GOLDEN     0x9e3779b97f4a7c15ull

/* FNV's low bits are weak; table indexes are taken after this mix. */
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

/* The filter: one bit per exact name and per wildcard suffix, at least 12
 * bits per key, indexed by the high bits of the mixed hash (tables use
 * the low bits, so the two are independent). A label boundary whose bit
 * is clear costs one bit test instead of a probe into a big table. */
#define SALT_EXACT 0x2545f4914f6cdd1dull

static inline bool
filter_has(const struct policy *p, uint64_t m)
{
	uint64_t b = m >> p->p_filter_shift;

	return (p->p_filter[b / 64] >> (b % 64)) & 1;
}

static inline void
filter_set(struct policy *p, uint64_t m)
{
	uint64_t b = m >> p->p_filter_shift;

	p->p_filter[b / 64] |= 1ull << (b % 64);
}

/* Power-of-two size with load factor at most two thirds (smaller tables
 * miss the cache less; probes stay short, and misses mostly stop at the
 * filters); *bits = log2. */
static uint64_t
table_size(uint32_t n, unsigned *bits)
{
	uint64_t size = 16;
	unsigned b = 4;

	while (size < (uint64_t)n * 3 / 2) {
		size <<= 1;
		b++;
	}
	if (bits != NULL)
		*bits = b;
	return size;
}

static struct pname_slot *
name_find(struct pname_slot *tab, uint64_t mask, uint64_t m, uint64_t h, const char *key,
          size_t len)
{
	for (uint64_t i = m & mask;; i = (i + 1) & mask) {
		struct pname_slot *s = &tab[i];

		if (s->len == 0)
			return s;
		if (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)
			return s;
	}
}

static inline uint32_t
mask4(uint32_t a, unsigned plen)
{
	return plen == 0 ? 0 : a & (~0u << (32 - plen));
}

static inline void
mask6(uint64_t *hi, uint64_t *lo, unsigned plen)
{
	if (plen == 0) {
		*hi = *lo = 0;
	} else if (plen < 64) {
		*hi &= ~0ull << (64 - plen);
		*lo = 0;
	} else if (plen < 128) {
		*lo &= plen == 64 ? 0 : ~0ull << (128 - plen);
	}
}

static inline uint64_t
load_be64(const uint8_t *b)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

static inline uint64_t
cidr4_hash(uint64_t key)
{
	return (key + 1) * GOLDEN;
}

static inline uint64_t
cidr6_hash(uint64_t hi, uint64_t lo, unsigned plen)
{
	return ((hi * GOLDEN) ^ (lo + plen) * 0xc2b2ae3d27d4eb4full) * GOLDEN;
}

static int
port_cmp(const void *a, const void *b)
{
	const struct pport *x = a, *y = b;

	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sort iv[0..n) and merge overlapping and adjacent intervals in place;
 * returns the new count. */
static uint32_t
ports_merge(struct pport *iv, uint32_t n)
{
	uint32_t k = 0;

	if (n == 0)
		return 0;
	/* Most chains hold one or two rules of a few ports each. */
	if (n <= 16) {
		for (uint32_t i = 1; i < n; i++) {
			struct pport v = iv[i];
			uint32_t j = i;

			for (; j > 0 && iv[j - 1].lo > v.lo; j--)
				iv[j] = iv[j - 1];
			iv[j] = v;
		}
	} else {
		qsort(iv, n, sizeof(*iv), port_cmp);
	}
	for (uint32_t i = 1; i < n; i++) {
		if ((uint32_t)iv[i].lo <= (uint32_t)iv[k].hi + 1) {
			if (iv[i].hi > iv[k].hi)
				iv[k].hi = iv[i].hi;
		} else {
			iv[++k] = iv[i];
		}
	}
	return k + 1;
}

/* Copy the ports of the chain's rules of one action to p_set_ports at
 * *off, merged; returns the count (disjoint, non-adjacent intervals of
 * 1..65535: at most 32,768) and advances *off. */
static uint16_t
chain_ports(struct policy *p, uint32_t first, uint8_t action, uint32_t *off)
{
	uint32_t start = *off;

	for (uint32_t i = first; i != PRULE_NONE; i = p->p_rules[i].next) {
		const struct prule *r = &p->p_rules[i];

		if (r->action != action)
			continue;
		memcpy(p->p_set_ports + *off, p->p_ports + r->port_off,
		       sizeof(struct pport) * r->n_ports);
		*off += r->n_ports;
	}
	*off = start + ports_merge(p->p_set_ports + start, *off - start);
	return (uint16_t)(*off - start);
}

/* One struct pset per chain (name or cidr), for the any-port matchers. */
static int
compile_sets(struct policy *p, uint32_t n_keys)
{
	struct pname_slot *const tabs[2] = {p->p_exact, p->p_suffix};
	const uint64_t masks[2] = {p->p_exact_mask, p->p_suffix_mask};
	size_t total = 0;
	uint32_t k = 0, off = 0;

	for (uint32_t i = 0; i < p->p_n_rules; i++)
		total += p->p_rules[i].n_ports;
	p->p_sets = policy_arena_alloc(p->p_arena, sizeof(struct pset) * (n_keys ? n_keys : 1));
	p->p_set_ports = policy_arena_alloc(p->p_arena, sizeof(struct pport) * (total ? total : 1));
	if (p->p_sets == NULL || p->p_set_ports == NULL)
		return -1;
	for (int t = 0; t < 4; t++) {
		uint64_t size = t < 2    ? masks[t] + 1
		                : t == 2 ? (UINT64_MAX >> p->p_cidr4_shift) + 1
		                         : (UINT64_MAX >> p->p_cidr6_shift) + 1;

		for (uint64_t i = 0; i < size; i++) {
			uint32_t first;
			struct pset *ps = &p->p_sets[k];

			if (t < 2 && tabs[t][i].len != 0)
				first = tabs[t][i].first;
			else if (t == 2 && p->p_cidr4[i].used)
				first = p->p_cidr4[i].first;
			else if (t == 3 && p->p_cidr6[i].used)
				first = p->p_cidr6[i].first;
			else
				continue;
			ps->off = off;
			ps->n_allow = chain_ports(p, first, POLICY_ALLOW, &off);
			ps->n_deny = chain_ports(p, first, POLICY_DENY, &off);
			p->p_rules[first].set = k++;
		}
	}
	return 0;
}

int
policy_compile(struct policy *p, const struct policy_rule_src *rules, uint32_t n)
{
	uint32_t n_exact = 0, n_wild = 0, n_c4 = 0, n_c6 = 0;
	bool seen4[33] = {false}, seen6[129] = {false};
	unsigned bits4, bits6, fbits;

	p->p_rules = policy_arena_alloc(p->p_arena, sizeof(*p->p_rules) * (n ? n : 1));
	if (p->p_rules == NULL)
		return -1;
	p->p_n_rules = n;
	for (uint32_t i = 0; i < n; i++) {
		if (rules[i].kind == PRULE_EXACT)
			n_exact++;
		else if (rules[i].kind == PRULE_WILDCARD)
			n_wild++;
		else if (rules[i].kind == PRULE_CIDR4)
			n_c4++;
		else
			n_c6++;
	}
	p->p_exact_mask = table_size(n_exact, NULL) - 1;
	p->p_suffix_mask = table_size(n_wild, NULL) - 1;
	p->p_n_wild = n_wild;
	table_size(n_c4, &bits4);
	table_size(n_c6, &bits6);
	p->p_cidr4_shift = 64 - bits4;
	p->p_cidr6_shift = 64 - bits6;
	p->p_exact =
	        policy_arena_alloc(p->p_arena, sizeof(struct pname_slot) * (p->p_exact_mask + 1));
	p->p_suffix =
	        policy_arena_alloc(p->p_arena, sizeof(struct pname_slot) * (p->p_suffix_mask + 1));
	table_size((n_exact + n_wild) * 8, &fbits);
	if (fbits < 16)
		fbits = 16;
	p->p_filter_shift = 64 - fbits;
	p->p_filter = policy_arena_alloc(p->p_arena, (size_t)1 << (fbits - 3));
	p->p_cidr4 = policy_arena_alloc(p->p_arena, sizeof(struct pcidr4_slot) << bits4);
	/* As for names: most prefix lengths probed for an address hold no
	 * rule for it, and a bit test in L1 is cheaper than a probe. */
	table_size(n_c4 * 8, &fbits);
	if (fbits < 10)
		fbits = 10;
	p->p_cidr4_filter_shift = 64 - fbits;
	p->p_cidr4_filter = policy_arena_alloc(p->p_arena, (size_t)1 << (fbits - 3));
	p->p_cidr6 = policy_arena_alloc(p->p_arena, sizeof(struct pcidr6_slot) << bits6);
	if (p->p_exact == NULL || p->p_suffix == NULL || p->p_filter == NULL ||
	    p->p_cidr4 == NULL || p->p_cidr4_filter == NULL || p->p_cidr6 == NULL)
		return -1;

	/* Walk backwards and push on the front of each chain so that every
	 * chain ends up in load order. */
	for (uint32_t i = n; i-- > 0;) {
		const struct policy_rule_src *r = &rules[i];
		struct prule *pr = &p->p_rules[i];
		uint32_t *first;

		pr->pattern = r->pattern;
		pr->where = r->where;
		pr->why = r->why;
		pr->port_off = r->port_off;
		pr->n_ports = (uint8_t)r->n_ports;
		pr->action = r->action;
		pr->kind = r->kind;
		pr->ech = r->ech;
		if (r->inspect != NULL) {
			if (p->p_inspect == NULL &&
			    (p->p_inspect = policy_arena_alloc(p->p_arena,
			                                       sizeof(*p->p_inspect) * n)) == NULL)
				return -1;
			p->p_inspect[i] = r->inspect;
		}
		pr->guard =
		        r->kind == PRULE_CIDR4 || r->kind == PRULE_CIDR6 ? policy_cidr_guard(r) : 0;
		if (r->kind == PRULE_EXACT || r->kind == PRULE_WILDCARD) {
			size_t len = strlen(r->key);
			uint64_t h = hash_name_rev(r->key, len);
			uint64_t m = hash_mix(r->kind == PRULE_EXACT ? h ^ SALT_EXACT : h);
			struct pname_slot *s =
			        r->kind == PRULE_EXACT
			                ? name_find(p->p_exact, p->p_exact_mask, m, h, r->key, len)
			                : name_find(p->p_suffix, p->p_suffix_mask, m, h, r->key,
			                            len);

			pr->next = s->len == 0 ? PRULE_NONE : s->first;
			s->key = r->key;
			s->len = (uint32_t)len;
			s->hash = h;
			s->first = i;
			filter_set(p, m);
			continue;
		} else if (r->kind == PRULE_CIDR4) {
			uint32_t a = (uint32_t)r->addr[0] << 24 | (uint32_t)r->addr[1] << 16 |
			             (uint32_t)r->addr[2] << 8 | r->addr[3];
			uint64_t key = (uint64_t)r->plen << 32 | mask4(a, r->plen);
			uint64_t k = cidr4_hash(key) >> p->p_cidr4_shift,
			         m = ((uint64_t)1 << bits4) - 1;
			struct pcidr4_slot *s;

			for (;; k = (k + 1) & m) {
				s = &p->p_cidr4[k];
				if (!s->used || s->key == key)
					break;
			}
			if (!s->used) {
				s->used = 1;
				s->key = key;
				s->first = PRULE_NONE;
			}
			seen4[r->plen] = true;
			{
				uint64_t b = hash_mix(key) >> p->p_cidr4_filter_shift;

				p->p_cidr4_filter[b / 64] |= 1ull << (b % 64);
			}
			first = &s->first;
		} else {
			uint64_t hi = load_be64(r->addr), lo = load_be64(r->addr + 8);
			uint64_t k, m = ((uint64_t)1 << bits6) - 1;
			struct pcidr6_slot *s;

			mask6(&hi, &lo, r->plen);
			for (k = cidr6_hash(hi, lo, r->plen) >> p->p_cidr6_shift;;
			     k = (k + 1) & m) {
				s = &p->p_cidr6[k];
				if (!s->used || (s->hi == hi && s->lo == lo && s->plen == r->plen))
					break;
			}
			if (!s->used) {
				s->used = 1;
				s->hi = hi;
				s->lo = lo;
				s->plen = r->plen;
				s->first = PRULE_NONE;
			}
			seen6[r->plen] = true;
			first = &s->first;
		}
		pr->next = *first;
		*first = i;
	}
	p->p_n_plen4 = 0;
	for (int l = 32; l >= 0; l--)
		if (seen4[l])
			p->p_plen4[p->p_n_plen4++] = (uint8_t)l;
	p->p_n_plen6 = 0;
	for (int l = 128; l >= 0; l--)
		if (seen6[l])
			p->p_plen6[p->p_n_plen6++] = (uint8_t)l;
	return compile_sets(p, n);
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
chain_scan(const struct policy *p, uint32_t i, uint16_t port, uint32_t *deny, uint32_t *allow)
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
verdict(const struct policy *p, uint32_t deny, uint32_t allow, struct policy_verdict *out)
{
	if (deny != PRULE_NONE) {
		out->action = POLICY_DENY;
		out->where = p->p_rules[deny].where;
		out->why = p->p_rules[deny].why;
	} else if (allow != PRULE_NONE) {
		out->action = POLICY_ALLOW;
		out->where = p->p_rules[allow].where;
		out->why = p->p_rules[allow].why;
	} else {
		out->action = POLICY_NO_MATCH;
		out->where = NULL;
		out->why = NULL;
	}
}

static inline const struct pname_slot *
name_lookup(const struct policy *p, const struct pname_slot *tab, uint64_t mask, uint64_t m,
            uint64_t h, const char *key, size_t len)
{
	for (uint64_t i = m & mask;; i = (i + 1) & mask) {
		const struct pname_slot *s = &tab[i];

		if (s->len == 0)
			return NULL;
		if (s->hash == h && s->len == len) {
			/* Fetch the rule while the key text is compared. */
			__builtin_prefetch(&p->p_rules[s->first]);
			if (memcmp(s->key, key, len) == 0)
				return s;
		}
	}
}

/* At most 127 labels fit in 253 characters: one exact name and at most
 * 126 wildcard suffixes can match. */
#define NAME_MAX_CHAINS 128

/* False when name has an empty label or a label starting or ending with
 * '-' (policy_name_normalize refuses those), so a caller that skipped
 * normalising still fails closed. Only names that hit a key are checked:
 * a miss is a miss either way. */
static bool
name_shape_ok(const char *name, size_t len)
{
	const char *d = name, *end = name + len;

	if (name[0] == '.' || name[0] == '-' || name[len - 1] == '.' || name[len - 1] == '-')
		return false;
	while ((d = memchr(d, '.', (size_t)(end - d))) != NULL) {
		/* Neither first nor last (checked above): both neighbours exist. */
		if (d[-1] == '-' || d[1] == '-' || d[1] == '.')
			return false;
		d++;
	}
	return true;
}

/* The chains (first rule of each) whose key matches name: its exact
 * entry and every wildcard suffix, scanned for port at once when scan is
 * set (policy_match_host), else stored in heads. The compiler makes one
 * copy of each. Returns the count, 0 for a name that
 * is not a normalised host name (empty, too long, an empty label, a label
 * starting or ending with '-', or a numeric last label such as an IP
 * literal): those never match a host rule (fail closed). */
static inline __attribute__((always_inline)) unsigned
name_walk(const struct policy *p, const char *name, uint32_t heads[NAME_MAX_CHAINS], bool scan,
          uint16_t port, uint32_t *deny, uint32_t *allow)
{
	size_t len = strnlen(name, 254), i = len;
	uint64_t h = FNV_OFFSET;
	unsigned k = 0, nondigit = 0;
	const struct pname_slot *s;

	if (len == 0 || len > 253)
		return 0;
	/* The last label. An IP literal (numeric last label) only ever
	 * matches cidr rules, and no rule's name ends in a numeric label.
	 * (An IPv6 literal needs no check: no key contains ':'.) */
	while (i > 0 && name[i - 1] != '.') {
		unsigned char c = (unsigned char)name[--i];

		nondigit |= (unsigned)(c - '0') > 9u;
		h = (h ^ c) * FNV_PRIME;
	}
	if (!nondigit || (len - i >= 2 && name[i] == '0' && (name[i + 1] | 0x20) == 'x' &&
	                  policy_label_numeric(name + i, len - i)))
		return 0;
	/* The rest, right to left: at each dot, h is the hash of the suffix
	 * after it, which is where a wildcard may end. */
	while (i > 0) {
		unsigned char c = (unsigned char)name[--i];

		if (c == '.') {
			if (p->p_n_wild > 0) {
				uint64_t m = hash_mix(h);

				if (filter_has(p, m)) {
					s = name_lookup(p, p->p_suffix, p->p_suffix_mask, m, h,
					                name + i + 1, len - i - 1);
					if (s != NULL && scan) {
						chain_scan(p, s->first, port, deny, allow);
						k++;
					} else if (s != NULL && k < NAME_MAX_CHAINS) {
						heads[k++] = s->first;
					}
				}
			}
		}
		h = (h ^ c) * FNV_PRIME;
	}
	{
		uint64_t m = hash_mix(h ^ SALT_EXACT);

		if (filter_has(p, m)) {
			s = name_lookup(p, p->p_exact, p->p_exact_mask, m, h, name, len);
			if (s != NULL && scan) {
				chain_scan(p, s->first, port, deny, allow);
				k++;
			} else if (s != NULL && k < NAME_MAX_CHAINS) {
				heads[k++] = s->first;
			}
		}
	}
	if (k > 0 && !name_shape_ok(name, len)) {
		*deny = *allow = PRULE_NONE;
		return 0;
	}
	return k;
}

void
policy_match_host(const struct policy *p, const char *name, uint16_t port,
                  struct policy_verdict *out)
{
	uint32_t deny = PRULE_NONE, allow = PRULE_NONE;

	name_walk(p, name, NULL, true, port, &deny, &allow);
	verdict(p, deny, allow, out);
}

const char *
policy_match_ech(const struct policy *p, const char *name, uint16_t port)
{
	uint32_t heads[NAME_MAX_CHAINS], deny = PRULE_NONE, allow = PRULE_NONE;
	uint32_t best = PRULE_NONE;
	unsigned k = name_walk(p, name, heads, false, 0, &deny, &allow);

	/* Every matching rule counts, as for the verdict, so rule order
	 * names a rule but never decides. */
	for (unsigned j = 0; j < k; j++) {
		for (uint32_t i = heads[j]; i != PRULE_NONE; i = p->p_rules[i].next) {
			const struct prule *r = &p->p_rules[i];

			if (!rule_has_port(p, r, port))
				continue;
			if (r->action == POLICY_DENY)
				return NULL;
			if (r->ech && i < best)
				best = i;
		}
	}
	return best != PRULE_NONE ? p->p_rules[best].where : NULL;
}

const struct policy_inspect *
policy_match_inspect(const struct policy *p, const char *name, uint16_t port)
{
	uint32_t heads[NAME_MAX_CHAINS], deny = PRULE_NONE, allow = PRULE_NONE;
	uint32_t best = PRULE_NONE;
	unsigned k;

	if (p->p_inspect == NULL)
		return NULL;
	k = name_walk(p, name, heads, false, 0, &deny, &allow);
	/* As policy_match_ech: every matching rule counts. The loader keeps
	 * an inspecting and a non-inspecting allow rule from both matching. */
	for (unsigned j = 0; j < k; j++) {
		for (uint32_t i = heads[j]; i != PRULE_NONE; i = p->p_rules[i].next) {
			const struct prule *r = &p->p_rules[i];

			if (!rule_has_port(p, r, port))
				continue;
			if (r->action == POLICY_DENY)
				return NULL;
			if (p->p_inspect[i] != NULL && i < best)
				best = i;
		}
	}
	return best != PRULE_NONE ? p->p_inspect[best] : NULL;
}

bool
policy_inspects(const struct policy *p)
{
	return p->p_inspect != NULL;
}

/* The interval of iv[0..n) (sorted, disjoint) holding x: its end in *end. */
static inline bool
set_find(const struct pport *iv, uint32_t n, uint32_t x, uint32_t *end)
{
	uint32_t lo = 0, hi = n;

	/* lo ends as the number of intervals starting at or before x. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (iv[mid].lo <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || x > iv[lo - 1].hi)
		return false;
	*end = iv[lo - 1].hi;
	return true;
}

/* True when every port of lo..hi is in the deny ports of some chain.
 * Each round moves x past a whole merged interval, so this ends after at
 * most (deny intervals of the chains + 1) rounds. */
static bool
all_denied(const struct policy *p, const uint32_t *heads, unsigned k, uint32_t lo, uint32_t hi)
{
	uint32_t x = lo, end;

	for (;;) {
		bool moved = false;

		for (unsigned j = 0; j < k; j++) {
			const struct pset *s = &p->p_sets[p->p_rules[heads[j]].set];

			if (s->n_deny > 0 &&
			    set_find(p->p_set_ports + s->off + s->n_allow, s->n_deny, x, &end)) {
				x = end + 1;
				moved = true;
				if (x > hi)
					return true;
			}
		}
		if (!moved)
			return false;
	}
}

/* True when lo..hi shares a port with the allow ports of some chain. */
static bool
any_allowed(const struct policy *p, const uint32_t *heads, unsigned k, uint32_t lo, uint32_t hi)
{
	for (unsigned j = 0; j < k; j++) {
		const struct pset *s = &p->p_sets[p->p_rules[heads[j]].set];
		const struct pport *iv = p->p_set_ports + s->off;
		uint32_t a = 0, b = s->n_allow;

		/* The last interval starting at or before hi ends latest. */
		while (a < b) {
			uint32_t mid = a + (b - a) / 2;

			if (iv[mid].lo <= hi)
				a = mid + 1;
			else
				b = mid;
		}
		if (a > 0 && iv[a - 1].hi >= lo)
			return true;
	}
	return false;
}

/* The verdict over all ports for the rules of the chains heads[0..k)
 * (see policy_match_name); allow rules count only in heads[0..n_allow)
 * (see addr_chains). */
static void
any_port(const struct policy *p, const uint32_t *heads, unsigned n_allow, unsigned k,
         struct policy_verdict *out)
{
	uint32_t deny = PRULE_NONE, allow = PRULE_NONE;
	bool some_allow = false, some_deny = false;

	for (unsigned j = 0; j < k; j++) {
		const struct pset *s = &p->p_sets[p->p_rules[heads[j]].set];

		some_allow |= j < n_allow && s->n_allow > 0;
		some_deny |= s->n_deny > 0;
	}
	/* The lowest-numbered allow rule with a port no deny rule takes.
	 * Chains are in load order, so each stops at its first such rule. */
	for (unsigned j = 0; some_allow && j < n_allow; j++) {
		for (uint32_t i = heads[j]; i != PRULE_NONE && i < allow; i = p->p_rules[i].next) {
			const struct prule *r = &p->p_rules[i];
			const struct pport *pp = p->p_ports + r->port_off;

			if (r->action != POLICY_ALLOW)
				continue;
			for (uint16_t e = 0; e < r->n_ports; e++)
				if (!some_deny || !all_denied(p, heads, k, pp[e].lo, pp[e].hi)) {
					allow = i;
					break;
				}
		}
	}
	if (allow != PRULE_NONE) {
		verdict(p, PRULE_NONE, allow, out);
		return;
	}
	/* Nothing open: the lowest-numbered deny rule that closes one of the
	 * allowed ports (any deny rule naming it when no allow rule does). */
	for (unsigned j = 0; some_deny && j < k; j++) {
		for (uint32_t i = heads[j]; i != PRULE_NONE && i < deny; i = p->p_rules[i].next) {
			const struct prule *r = &p->p_rules[i];
			const struct pport *pp = p->p_ports + r->port_off;

			if (r->action != POLICY_DENY)
				continue;
			for (uint16_t e = 0; e < r->n_ports; e++)
				if (!some_allow ||
				    any_allowed(p, heads, n_allow, pp[e].lo, pp[e].hi)) {
					deny = i;
					break;
				}
		}
	}
	verdict(p, deny, PRULE_NONE, out);
}

void
policy_match_name(const struct policy *p, const char *name, struct policy_verdict *out)
{
	uint32_t heads[NAME_MAX_CHAINS], deny = PRULE_NONE, allow = PRULE_NONE;
	unsigned k = name_walk(p, name, heads, false, 0, &deny, &allow);

	any_port(p, heads, k, k, out);
}

/* At most one chain per prefix length: 33 for IPv4, 129 for IPv6, and
 * both for an IPv6 address that carries an IPv4 one. */
#define ADDR_MAX_CHAINS (33 + 129)

/* Append the chains of the IPv4 cidr rules covering a4 to heads[n...];
 * returns the new count. */
static unsigned
chains4(const struct policy *p, uint32_t a4, uint32_t heads[ADDR_MAX_CHAINS], unsigned n)
{
	uint64_t m = (UINT64_MAX >> p->p_cidr4_shift);

	for (unsigned k = 0; k < p->p_n_plen4; k++) {
		uint64_t key = (uint64_t)p->p_plen4[k] << 32 | mask4(a4, p->p_plen4[k]);
		uint64_t b = hash_mix(key) >> p->p_cidr4_filter_shift;

		if (!((p->p_cidr4_filter[b / 64] >> (b % 64)) & 1))
			continue;
		for (uint64_t i = cidr4_hash(key) >> p->p_cidr4_shift;; i = (i + 1) & m) {
			const struct pcidr4_slot *s = &p->p_cidr4[i];

			if (!s->used)
				break;
			if (s->key == key) {
				heads[n++] = s->first;
				break;
			}
		}
	}
	return n;
}

/* The same for the IPv6 cidr rules covering a6. */
static unsigned
chains6(const struct policy *p, const uint8_t *a6, uint32_t heads[ADDR_MAX_CHAINS], unsigned n)
{
	uint64_t m = (UINT64_MAX >> p->p_cidr6_shift);
	uint64_t hi0 = load_be64(a6), lo0 = load_be64(a6 + 8);

	for (unsigned k = 0; k < p->p_n_plen6; k++) {
		uint64_t hi = hi0, lo = lo0;
		unsigned plen = p->p_plen6[k];

		mask6(&hi, &lo, plen);
		for (uint64_t i = cidr6_hash(hi, lo, plen) >> p->p_cidr6_shift;; i = (i + 1) & m) {
			const struct pcidr6_slot *s = &p->p_cidr6[i];

			if (!s->used)
				break;
			if (s->hi == hi && s->lo == lo && s->plen == plen) {
				heads[n++] = s->first;
				break;
			}
		}
	}
	return n;
}

/* The cidr chains (first rule of each) covering sa; returns the count.
 * An IPv4-mapped IPv6 address (a dual-stack socket's IPv4 peer) is the
 * IPv4 address. A NAT64 (64:ff9b::/96) or 6to4 (2002::/16) address is
 * its own IPv6 address, and the IPv4 address it carries counts for the
 * deny rules only: a deny rule for either spelling wins, while only a
 * rule naming the IPv6 spelling allows it (guard_v4in6 recognises them
 * all, for the address guard too). heads[0..*n_full) are full
 * chains, the rest are for deny rules only. */
static unsigned
addr_chains(const struct policy *p, const struct sockaddr *sa, uint32_t heads[ADDR_MAX_CHAINS],
            unsigned *n_full)
{
	const struct sockaddr_in6 *sin6;
	const uint8_t *a6;
	uint32_t v4;

	*n_full = 0;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;

		return *n_full = chains4(p, ntohl(sin->sin_addr.s_addr), heads, 0);
	}
	if (sa->sa_family != AF_INET6)
		return 0;
	sin6 = (const struct sockaddr_in6 *)(const void *)sa;
	a6 = sin6->sin6_addr.s6_addr;
	switch (guard_v4in6(a6, &v4)) {
	case GUARD_V4IN6_MAPPED:
		return *n_full = chains4(p, v4, heads, 0);
	case GUARD_V4IN6_NAT64:
	case GUARD_V4IN6_6TO4:
		*n_full = chains6(p, a6, heads, 0);
		return chains4(p, v4, heads, *n_full);
	case GUARD_V4IN6_NONE:
		break;
	}
	return *n_full = chains6(p, a6, heads, 0);
}

void
policy_match_addr(const struct policy *p, const struct sockaddr *sa, uint16_t port,
                  struct policy_verdict *out)
{
	uint32_t deny = PRULE_NONE, allow = PRULE_NONE, unused = PRULE_NONE;
	uint32_t heads[ADDR_MAX_CHAINS];
	unsigned n_full, k = addr_chains(p, sa, heads, &n_full);

	for (unsigned j = 0; j < k; j++)
		chain_scan(p, heads[j], port, &deny, j < n_full ? &allow : &unused);
	verdict(p, deny, allow, out);
}

void
policy_match_addr_any(const struct policy *p, const struct sockaddr *sa, struct policy_verdict *out)
{
	uint32_t heads[ADDR_MAX_CHAINS];
	unsigned n_full, k = addr_chains(p, sa, heads, &n_full);

	any_port(p, heads, n_full, k, out);
}

/* ---- the address guard's overrides (policy.h, policy_cidr_allows) ---- */

/* The first and last address of a cidr rule's range. */
static void
range_ends(const struct policy_rule_src *r, struct sockaddr_storage *lo,
           struct sockaddr_storage *hi)
{
	unsigned len = r->kind == PRULE_CIDR4 ? 4 : 16;
	uint8_t a[16], b[16];

	for (unsigned i = 0; i < len; i++) {
		unsigned keep = r->plen >= 8 * (i + 1) ? 8 : r->plen > 8 * i ? r->plen - 8 * i : 0;
		uint8_t mask = (uint8_t)(0xff00u >> keep);

		a[i] = (uint8_t)(r->addr[i] & mask);
		b[i] = (uint8_t)(a[i] | (uint8_t)~mask);
	}
	memset(lo, 0, sizeof(*lo));
	memset(hi, 0, sizeof(*hi));
	if (len == 4) {
		struct sockaddr_in *l = (struct sockaddr_in *)lo, *h = (struct sockaddr_in *)hi;

		l->sin_family = h->sin_family = AF_INET;
		memcpy(&l->sin_addr, a, 4);
		memcpy(&h->sin_addr, b, 4);
	} else {
		struct sockaddr_in6 *l = (struct sockaddr_in6 *)lo, *h = (struct sockaddr_in6 *)hi;

		l->sin6_family = h->sin6_family = AF_INET6;
		memcpy(&l->sin6_addr, a, 16);
		memcpy(&h->sin6_addr, b, 16);
	}
}

uint8_t
policy_cidr_guard(const struct policy_rule_src *r)
{
	struct sockaddr_storage lo, hi;
	enum guard_class c;
	uint8_t g = 0;

	range_ends(r, &lo, &hi);
	c = guard_classify((const struct sockaddr *)&lo);
	/* Guarded blocks are aligned prefixes, so a prefix at least as long
	 * as the block holding its first address lies wholly inside that
	 * block; the class of the last address is checked as well so that
	 * nothing here depends on that argument alone. */
	if (c != GUARD_PUBLIC && c == guard_classify((const struct sockaddr *)&hi) &&
	    r->plen >= guard_block_prefix((const struct sockaddr *)&lo))
		g = (uint8_t)c;
	if (r->plen >= (r->kind == PRULE_CIDR4 ? 24 : 64))
		g |= PRULE_GUARD_NARROW;
	return g;
}

/* True when rule r may open an address of guard class cls. */
static inline bool
rule_opens(const struct prule *r, enum guard_class cls)
{
	if (cls == GUARD_PUBLIC)
		return (r->guard & PRULE_GUARD_NARROW) != 0;
	return (r->guard & PRULE_GUARD_CLASS) == (unsigned)cls;
}

bool
policy_cidr_allows(const struct policy *p, const struct sockaddr *sa, uint16_t port)
{
	uint32_t heads[ADDR_MAX_CHAINS];
	unsigned n_full, k = addr_chains(p, sa, heads, &n_full);
	enum guard_class cls = guard_classify(sa);
	bool allow = false;

	for (unsigned j = 0; j < k; j++) {
		for (uint32_t i = heads[j]; i != PRULE_NONE; i = p->p_rules[i].next) {
			const struct prule *r = &p->p_rules[i];

			if (!rule_has_port(p, r, port))
				continue;
			if (r->action == POLICY_DENY)
				return false;
			allow |= j < n_full && rule_opens(r, cls);
		}
	}
	return allow;
}

bool
policy_cidr_opens_any(const struct policy *p, const struct sockaddr *sa)
{
	uint32_t heads[ADDR_MAX_CHAINS];
	unsigned n_full, k = addr_chains(p, sa, heads, &n_full);
	enum guard_class cls = guard_classify(sa);
	bool some_deny = false;

	for (unsigned j = 0; j < k; j++)
		some_deny |= p->p_sets[p->p_rules[heads[j]].set].n_deny > 0;
	/* Every rule of a chain has the same range, so the same guard byte:
	 * a chain's merged allow ports are all from rules that may open sa,
	 * or all from rules that may not. Allow ports only from the full
	 * chains; deny ports from all (see addr_chains). */
	for (unsigned j = 0; j < n_full; j++) {
		const struct prule *r = &p->p_rules[heads[j]];
		const struct pset *s = &p->p_sets[r->set];
		const struct pport *iv = p->p_set_ports + s->off;

		if (!rule_opens(r, cls))
			continue;
		for (uint16_t e = 0; e < s->n_allow; e++)
			if (!some_deny || !all_denied(p, heads, k, iv[e].lo, iv[e].hi))
				return true;
	}
	return false;
}

/* One address of every guarded block (both families, and IPv4 blocks
 * seen through IPv6) for policy_cidr_check: an aligned prefix that covers
 * part of a block covers all of it, so it covers that block's sample. */
static const struct {
	int family;
	uint8_t addr[16];
} guard_samples[] = {
        {AF_INET, {0, 0, 0, 1}},
        {AF_INET, {127, 0, 0, 1}},
        {AF_INET, {10, 0, 0, 1}},
        {AF_INET, {172, 16, 0, 1}},
        {AF_INET, {192, 168, 0, 1}},
        {AF_INET, {100, 64, 0, 1}},
        {AF_INET, {169, 254, 169, 254}},
        {AF_INET, {224, 0, 0, 1}},
        {AF_INET, {240, 0, 0, 1}},
        {AF_INET, {198, 18, 0, 1}},
        {AF_INET, {192, 0, 0, 1}},
        {AF_INET, {192, 88, 99, 1}},
        {AF_INET6, {0}},
        {AF_INET6, {[15] = 1}},
        {AF_INET6, {[15] = 2}},
        {AF_INET6, {0xfe, 0x80, [15] = 1}},
        {AF_INET6, {0xfc, [15] = 1}},
        {AF_INET6, {0xfe, 0xc0, [15] = 1}},
        {AF_INET6, {0xff, 0x02, [15] = 1}},
        {AF_INET6, {0x20, 0x01, [15] = 1}}, /* Teredo */
        {AF_INET6, {0x01, [15] = 1}},       /* 100::/64 discard */
        {AF_INET6, {0x40, [15] = 1}},       /* unassigned */
        {AF_INET6, {[10] = 0xff, 0xff, 127, 0, 0, 1}},
        {AF_INET6, {[10] = 0xff, 0xff, 169, 254, 169, 254}},
        {AF_INET6, {[10] = 0xff, 0xff, 10, 0, 0, 1}},
        {AF_INET6, {0, 0x64, 0xff, 0x9b, [12] = 127, 0, 0, 1}},
        {AF_INET6, {0, 0x64, 0xff, 0x9b, [12] = 169, 254, 169, 254}},
        {AF_INET6, {0, 0x64, 0xff, 0x9b, [12] = 10, 0, 0, 1}},
        {AF_INET6, {0, 0x64, 0xff, 0x9b, 0, 1, [15] = 1}},
        {AF_INET6, {0x20, 0x02, 127, 0, 0, 1}},
        {AF_INET6, {0x20, 0x02, 169, 254, 169, 254}},
        {AF_INET6, {0x20, 0x02, 10, 0, 0, 1}},
};

static bool
range_has(const struct policy_rule_src *r, const uint8_t *a)
{
	unsigned bytes = r->plen / 8, bits = r->plen % 8;

	if (memcmp(a, r->addr, bytes) != 0)
		return false;
	return bits == 0 || ((a[bytes] ^ r->addr[bytes]) & (0xff00u >> bits)) == 0;
}

int
policy_cidr_check(const struct policy_rule_src *rules, uint32_t n, struct policy_diag *diag)
{
	/* The order classes are named in: the dangerous ones first. */
	static const enum guard_class order[] = {
	        GUARD_LOOPBACK,    GUARD_PRIVATE,   GUARD_LINK_LOCAL, GUARD_CGNAT,
	        GUARD_UNSPECIFIED, GUARD_MULTICAST, GUARD_RESERVED,
	};

	for (uint32_t i = 0; i < n; i++) {
		const struct policy_rule_src *r = &rules[i];
		int family = r->kind == PRULE_CIDR4 ? AF_INET : AF_INET6;
		unsigned missed = 0;
		char names[128];
		size_t len = 0;
		uint8_t g;

		if ((r->kind != PRULE_CIDR4 && r->kind != PRULE_CIDR6) || r->action != POLICY_ALLOW)
			continue;
		g = policy_cidr_guard(r);
		for (size_t s = 0; s < sizeof(guard_samples) / sizeof(guard_samples[0]); s++) {
			struct sockaddr_storage ss;
			enum guard_class c;

			if (guard_samples[s].family != family ||
			    !range_has(r, guard_samples[s].addr))
				continue;
			memset(&ss, 0, sizeof(ss));
			if (family == AF_INET) {
				struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

				sin->sin_family = AF_INET;
				memcpy(&sin->sin_addr, guard_samples[s].addr, 4);
			} else {
				struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

				sin6->sin6_family = AF_INET6;
				memcpy(&sin6->sin6_addr, guard_samples[s].addr, 16);
			}
			c = guard_classify((const struct sockaddr *)&ss);
			if (c != GUARD_PUBLIC && (unsigned)c != (g & PRULE_GUARD_CLASS))
				missed |= 1u << c;
		}
		if (missed == 0)
			continue;
		names[0] = '\0';
		for (size_t o = 0; o < sizeof(order) / sizeof(order[0]); o++)
			if (missed & (1u << order[o]))
				len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s",
				                        len > 0 ? "/" : "",
				                        guard_class_name(order[o]));
		if (diag != NULL &&
		    policy_diag_add(&diag->warnings, &diag->n_warnings,
		                    "%s: cidr %s does not open %s ranges; write those ranges "
		                    "explicitly if you mean them",
		                    r->where, r->pattern, names) != 0)
			return -1;
	}
	return 0;
}
