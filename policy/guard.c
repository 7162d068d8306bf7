/* The address guard (DESIGN.md, decision 4) as one pure function.
 *
 * The documentation ranges 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24
 * and 2001:db8::/32 are deliberately GUARD_PUBLIC: the test lab's fake
 * internet lives there, and treating them as ordinary routable addresses
 * is what lets the end-to-end tests exercise the real allow path.
 * 198.18.0.0/15 (benchmark) is GUARD_RESERVED: it is the sandbox's own
 * egress source address, never a destination.
 * The host's own addresses are a set at the end of this file, which a
 * watcher outside policy/ keeps current and the proxy reads. */
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "policy/guard.h"

#include <arpa/inet.h>
#include <stdio.h>

#include "common/util.h"
#include "policy/policy.h"

/* The IPv4 blocks, first match wins (guard_blocks lists them too). */
static const struct {
	uint32_t net;
	unsigned plen;
	enum guard_class cls;
} ranges4[] = {
        /* Listed before the broader ranges they sit in. */
        {0xc0000200u, 24, GUARD_PUBLIC},     /* 192.0.2.0/24 TEST-NET-1 (lab) */
        {0xc6336400u, 24, GUARD_PUBLIC},     /* 198.51.100.0/24 TEST-NET-2 (lab) */
        {0xcb007100u, 24, GUARD_PUBLIC},     /* 203.0.113.0/24 TEST-NET-3 (lab) */
        {0x00000000u, 8, GUARD_UNSPECIFIED}, /* 0.0.0.0/8 "this network" */
        {0x0a000000u, 8, GUARD_PRIVATE},     /* 10.0.0.0/8 */
        {0x64400000u, 10, GUARD_CGNAT},      /* 100.64.0.0/10 */
        {0x7f000000u, 8, GUARD_LOOPBACK},    /* 127.0.0.0/8 */
        {0xa9fe0000u, 16, GUARD_LINK_LOCAL}, /* 169.254.0.0/16 (metadata) */
        {0xac100000u, 12, GUARD_PRIVATE},    /* 172.16.0.0/12 */
        {0xc0000000u, 24, GUARD_RESERVED},   /* 192.0.0.0/24 IETF protocol */
        {0xc0586300u, 24, GUARD_RESERVED},   /* 192.88.99.0/24 6to4 relay */
        {0xc0a80000u, 16, GUARD_PRIVATE},    /* 192.168.0.0/16 */
        {0xc6120000u, 15, GUARD_RESERVED},   /* 198.18.0.0/15 benchmark, egress source */
        {0xe0000000u, 4, GUARD_MULTICAST},   /* 224.0.0.0/4 */
        {0xf0000000u, 4, GUARD_RESERVED},    /* 240.0.0.0/4 incl. broadcast */
};

/* The class of a, and in *plen the prefix length of the block of that
 * class holding it (32 for an address outside every listed block: only
 * public addresses, for which the block is not used). */
static enum guard_class
classify4(uint32_t a, unsigned *plen)
{
	for (size_t i = 0; i < sizeof(ranges4) / sizeof(ranges4[0]); i++) {
		uint32_t mask = ranges4[i].plen == 0 ? 0 : ~0u << (32 - ranges4[i].plen);

		if ((a & mask) == ranges4[i].net) {
			*plen = ranges4[i].plen;
			return ranges4[i].cls;
		}
	}
	*plen = 32;
	return GUARD_PUBLIC;
}

static uint32_t
load_be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

enum guard_v4in6
guard_v4in6(const uint8_t *a, uint32_t *v4)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b};

	if (memcmp(a, mapped, 12) == 0) {
		*v4 = load_be32(a + 12);
		return GUARD_V4IN6_MAPPED;
	}
	if (memcmp(a, nat64, 12) == 0) {
		*v4 = load_be32(a + 12);
		return GUARD_V4IN6_NAT64;
	}
	if (a[0] == 0x20 && a[1] == 0x02) {
		*v4 = load_be32(a + 2);
		return GUARD_V4IN6_6TO4;
	}
	return GUARD_V4IN6_NONE;
}

bool
guard_prefix_is(const uint8_t *a, const uint8_t *net, unsigned plen)
{
	unsigned bytes = plen / 8, bits = plen % 8;

	if (memcmp(a, net, bytes) != 0)
		return false;
	return bits == 0 || ((a[bytes] ^ net[bytes]) & (0xff00u >> bits)) == 0;
}

/* As classify4. The blocks: ::/128 and ::1/128; an embedded IPv4
 * address's block under its prefix (::ffff:127.0.0.0/104 is loopback,
 * 2002:a9fe::/32 link-local); every listed prefix; and for the
 * unassigned rest, which is no single aligned block, /128, so only a
 * rule naming one address opens one of those. */
static enum guard_class
classify6(const uint8_t *a, unsigned *plen)
{
	static const uint8_t zero[16] = {0};
	static const uint8_t nat64_local[6] = {0, 0x64, 0xff, 0x9b, 0, 1};
	static const uint8_t doc[4] = {0x20, 0x01, 0x0d, 0xb8};
	static const uint8_t teredo[4] = {0x20, 0x01, 0, 0};
	static const uint8_t proto[3] = {0x20, 0x01, 0x00};
	static const uint8_t discard[8] = {0x01, 0x00};

	enum guard_class c;
	enum guard_v4in6 how;
	unsigned p4;
	uint32_t v4;

	*plen = 128;
	if (memcmp(a, zero, 15) == 0 && a[15] <= 1)
		return a[15] == 0 ? GUARD_UNSPECIFIED : GUARD_LOOPBACK;
	/* Addresses that carry an IPv4 address inside: judge that address,
	 * or ::ffff:127.0.0.1 and 64:ff9b::a9fe:a9fe would walk around the
	 * guard. Its block sits under the prefix: 96 bits, or 16 for 6to4
	 * (2002:V4ADDR::/48). */
	how = guard_v4in6(a, &v4);
	if (how != GUARD_V4IN6_NONE) {
		c = classify4(v4, &p4);
		*plen = (how == GUARD_V4IN6_6TO4 ? 16 : 96) + p4;
		return c;
	}
	if (guard_prefix_is(a, doc, 32))
		return GUARD_PUBLIC; /* 2001:db8::/32, the lab (see the top) */
	if (guard_prefix_is(a, nat64_local, 48)) {
		*plen = 48;
		return GUARD_RESERVED;
	}
	if (guard_prefix_is(a, teredo, 32)) {
		*plen = 32;
		return GUARD_RESERVED;
	}
	if (guard_prefix_is(a, discard, 64)) {
		*plen = 64;
		return GUARD_RESERVED;
	}
	if (guard_prefix_is(a, proto, 23)) {
		*plen = 23;
		return GUARD_RESERVED; /* 2001::/23 IETF protocol assignments */
	}
	if (a[0] == 0xff) {
		*plen = 8;
		return GUARD_MULTICAST;
	}
	if ((a[0] & 0xfe) == 0xfc) {
		*plen = 7;
		return GUARD_PRIVATE; /* fc00::/7 unique local */
	}
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80) {
		*plen = 10;
		return GUARD_LINK_LOCAL; /* fe80::/10 */
	}
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) {
		*plen = 10;
		return GUARD_PRIVATE; /* fec0::/10 site-local, deprecated */
	}
	if ((a[0] & 0xe0) == 0x20)
		return GUARD_PUBLIC; /* 2000::/3 global unicast */
	return GUARD_RESERVED;       /* everything else is unassigned or special */
}

static enum guard_class
classify(const struct sockaddr *sa, unsigned *plen)
{
	*plen = 0;
	if (sa == NULL)
		return GUARD_RESERVED;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;

		return classify4(ntohl(sin->sin_addr.s_addr), plen);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)(const void *)sa;

		return classify6(sin6->sin6_addr.s6_addr, plen);
	}
	return GUARD_RESERVED;
}

enum guard_class
guard_classify(const struct sockaddr *sa)
{
	unsigned plen;

	return classify(sa, &plen);
}

unsigned
guard_block_prefix(const struct sockaddr *sa)
{
	unsigned plen;

	(void)classify(sa, &plen);
	return plen;
}

const char *
guard_class_name(enum guard_class c)
{
	switch (c) {
	case GUARD_PUBLIC:
		return "public";
	case GUARD_UNSPECIFIED:
		return "unspecified";
	case GUARD_LOOPBACK:
		return "loopback";
	case GUARD_PRIVATE:
		return "private";
	case GUARD_CGNAT:
		return "cgnat";
	case GUARD_LINK_LOCAL:
		return "link-local";
	case GUARD_MULTICAST:
		return "multicast";
	case GUARD_RESERVED:
		return "reserved";
	}
	return "reserved";
}

/* --- the blocks, for the firewall ----------------------------------------- */

static void
put_block(struct guard_block *out, size_t max, size_t *n, int family, const uint8_t *addr,
          unsigned plen, enum guard_class cls)
{
	if (*n < max) {
		out[*n].family = family;
		memcpy(out[*n].addr, addr, 16);
		out[*n].plen = plen;
		out[*n].cls = cls;
	}
	(*n)++;
}

size_t
guard_blocks(struct guard_block *out, size_t max)
{
	/* classify6's prefixes, in its order (the builder merges overlaps:
	 * 2001::/32 lies in 2001::/23). */
	static const struct {
		uint8_t head[8];
		unsigned plen;
		enum guard_class cls;
	} ranges6[] = {
	        {{0, 0x64, 0xff, 0x9b, 0, 1}, 48, GUARD_RESERVED}, /* 64:ff9b:1::/48 */
	        {{0x20, 0x01, 0, 0}, 32, GUARD_RESERVED},          /* 2001::/32 Teredo */
	        {{0x01, 0}, 64, GUARD_RESERVED},                   /* 100::/64 discard */
	        {{0x20, 0x01, 0}, 23, GUARD_RESERVED},             /* 2001::/23 */
	        {{0xff}, 8, GUARD_MULTICAST},                      /* ff00::/8 */
	        {{0xfc}, 7, GUARD_PRIVATE},                        /* fc00::/7 */
	        {{0xfe, 0x80}, 10, GUARD_LINK_LOCAL},              /* fe80::/10 */
	        {{0xfe, 0xc0}, 10, GUARD_PRIVATE},                 /* fec0::/10 */
	};
	/* Where an IPv6 address carries an IPv4 one (guard_v4in6): the
	 * bytes before it, where it starts, the prefix bits before it. */
	static const struct {
		uint8_t head[12];
		unsigned at, bits;
	} in6[] = {
	        {{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff}, 12, 96}, /* ::ffff:0:0/96 */
	        {{0, 0x64, 0xff, 0x9b}, 12, 96},                      /* 64:ff9b::/96 */
	        {{0x20, 0x02}, 2, 16},                                /* 2002::/16 */
	};
	uint8_t a[16];
	size_t n = 0;

	for (size_t i = 0; i < ARRAY_SIZE(ranges4); i++) {
		if (ranges4[i].cls == GUARD_PUBLIC)
			continue;
		memset(a, 0, sizeof(a));
		a[0] = (uint8_t)(ranges4[i].net >> 24);
		a[1] = (uint8_t)(ranges4[i].net >> 16);
		a[2] = (uint8_t)(ranges4[i].net >> 8);
		a[3] = (uint8_t)ranges4[i].net;
		put_block(out, max, &n, AF_INET, a, ranges4[i].plen, ranges4[i].cls);
		for (size_t j = 0; j < ARRAY_SIZE(in6); j++) {
			uint8_t b[16] = {0};

			memcpy(b, in6[j].head, sizeof(in6[j].head));
			memcpy(b + in6[j].at, a, 4);
			put_block(out, max, &n, AF_INET6, b, in6[j].bits + ranges4[i].plen,
			          ranges4[i].cls);
		}
	}
	memset(a, 0, sizeof(a));
	put_block(out, max, &n, AF_INET6, a, 128, GUARD_UNSPECIFIED);
	a[15] = 1;
	put_block(out, max, &n, AF_INET6, a, 128, GUARD_LOOPBACK);
	for (size_t i = 0; i < ARRAY_SIZE(ranges6); i++) {
		memset(a, 0, sizeof(a));
		memcpy(a, ranges6[i].head, sizeof(ranges6[i].head));
		put_block(out, max, &n, AF_INET6, a, ranges6[i].plen, ranges6[i].cls);
	}
	return n;
}

/* --- the host's own addresses ------------------------------------------- */

/* An entry, ordered by address first so that a lookup is one binary
 * search for the first entry of that address. IPv4 is stored mapped
 * (::ffff:a.b.c.d): one key for both spellings. */
struct host_entry {
	uint8_t a[16];
	uint32_t ifindex;
	uint8_t prefixlen;
};

struct guard_hosts {
	struct host_entry *gh_v; /* sorted by host_cmp, gh_n of gh_cap used */
	size_t gh_n, gh_cap, gh_max;
	enum guard_hosts_state gh_state;
	bool gh_overflow; /* an entry did not fit since the last clear */
};

static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int
host_cmp(const struct host_entry *x, const struct host_entry *y)
{
	int c = memcmp(x->a, y->a, sizeof(x->a));

	if (c != 0)
		return c;
	if (x->ifindex != y->ifindex)
		return x->ifindex < y->ifindex ? -1 : 1;
	return (int)x->prefixlen - (int)y->prefixlen;
}

/* The index of the first entry not below e (gh_n when none). */
static size_t
host_lower_bound(const struct guard_hosts *h, const struct host_entry *e, bool addr_only)
{
	size_t lo = 0, hi = h->gh_n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = addr_only ? memcmp(h->gh_v[mid].a, e->a, sizeof(e->a))
		                  : host_cmp(&h->gh_v[mid], e);

		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* a as a key; false for another family, or an address the set does not
 * keep (not public: see guard.h). */
static bool
host_key(const struct guard_host_addr *a, struct host_entry *e)
{
	struct sockaddr_storage ss;

	memset(e, 0, sizeof(*e));
	memset(&ss, 0, sizeof(ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, a->addr, 4);
		memcpy(e->a, v4mapped, sizeof(v4mapped));
		memcpy(e->a + 12, a->addr, 4);
	} else if (a->family == AF_INET6) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, a->addr, 16);
		memcpy(e->a, a->addr, 16);
	} else {
		return false;
	}
	e->ifindex = a->ifindex;
	e->prefixlen = a->prefixlen;
	return guard_classify((const struct sockaddr *)&ss) == GUARD_PUBLIC;
}

struct guard_hosts *
guard_hosts_new(size_t max)
{
	struct guard_hosts *h = calloc(1, sizeof(*h));

	if (h == NULL)
		return NULL;
	h->gh_max = max != 0 ? max : GUARD_HOSTS_MAX;
	h->gh_state = GUARD_HOSTS_READING;
	return h;
}

void
guard_hosts_free(struct guard_hosts *h)
{
	if (h == NULL)
		return;
	free(h->gh_v);
	free(h);
}

static void
host_overflow(struct guard_hosts *h)
{
	h->gh_overflow = true;
	h->gh_state = GUARD_HOSTS_FULL;
}

int
guard_hosts_add(struct guard_hosts *h, const struct guard_host_addr *a)
{
	struct host_entry e;
	size_t i;

	if (!host_key(a, &e))
		return 0;
	i = host_lower_bound(h, &e, false);
	if (i < h->gh_n && host_cmp(&h->gh_v[i], &e) == 0)
		return 0;
	if (h->gh_n == h->gh_max) {
		host_overflow(h);
		return -1;
	}
	if (h->gh_n == h->gh_cap) {
		/* Doubling from 16: a host has a handful of public addresses,
		 * and the bound keeps the worst case at gh_max entries. */
		size_t cap = h->gh_cap == 0 ? 16 : h->gh_cap * 2;
		struct host_entry *v;

		if (cap > h->gh_max)
			cap = h->gh_max;
		v = realloc(h->gh_v, cap * sizeof(*v));
		if (v == NULL) {
			host_overflow(h);
			return -1;
		}
		h->gh_v = v;
		h->gh_cap = cap;
	}
	memmove(&h->gh_v[i + 1], &h->gh_v[i], (h->gh_n - i) * sizeof(h->gh_v[0]));
	h->gh_v[i] = e;
	h->gh_n++;
	return 0;
}

void
guard_hosts_del(struct guard_hosts *h, const struct guard_host_addr *a)
{
	struct host_entry e;
	size_t i;

	if (!host_key(a, &e))
		return;
	i = host_lower_bound(h, &e, false);
	if (i == h->gh_n || host_cmp(&h->gh_v[i], &e) != 0)
		return;
	memmove(&h->gh_v[i], &h->gh_v[i + 1], (h->gh_n - i - 1) * sizeof(h->gh_v[0]));
	h->gh_n--;
}

void
guard_hosts_clear(struct guard_hosts *h)
{
	h->gh_n = 0;
	h->gh_overflow = false;
	h->gh_state = GUARD_HOSTS_READING;
}

void
guard_hosts_set_state(struct guard_hosts *h, enum guard_hosts_state s)
{
	h->gh_state = s == GUARD_HOSTS_KNOWN && h->gh_overflow ? GUARD_HOSTS_FULL : s;
}

enum guard_hosts_state
guard_hosts_state(const struct guard_hosts *h)
{
	return h->gh_state;
}

size_t
guard_hosts_count(const struct guard_hosts *h)
{
	return h->gh_n;
}

enum guard_host
guard_hosts_lookup(const struct guard_hosts *h, const struct sockaddr *sa)
{
	struct host_entry e;
	size_t i;

	if (sa == NULL || (sa->sa_family != AF_INET && sa->sa_family != AF_INET6))
		return GUARD_HOST_OTHER;
	if (h->gh_state != GUARD_HOSTS_KNOWN)
		return GUARD_HOST_UNKNOWN;
	memset(&e, 0, sizeof(e));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *sin = (const struct sockaddr_in *)(const void *)sa;

		memcpy(e.a, v4mapped, sizeof(v4mapped));
		memcpy(e.a + 12, &sin->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)(const void *)sa;

		memcpy(e.a, &sin6->sin6_addr, 16);
	}
	i = host_lower_bound(h, &e, true);
	return i < h->gh_n && memcmp(h->gh_v[i].a, e.a, sizeof(e.a)) == 0 ? GUARD_HOST_OWN
	                                                                  : GUARD_HOST_OTHER;
}

const char *
guard_hosts_state_text(enum guard_hosts_state s)
{
	switch (s) {
	case GUARD_HOSTS_KNOWN:
		return "the host's address list is known";
	case GUARD_HOSTS_READING:
		return "the host's address list is being read";
	case GUARD_HOSTS_FULL:
		return "the host has more addresses than airlock tracks";
	case GUARD_HOSTS_LOST:
		return "the host's addresses can no longer be watched";
	}
	return "the host's address list is not known";
}

/* ---- one address against the deny cidr rules and the guard ---- */

static void
addr_text(const struct sockaddr *sa, char *out, size_t outlen)
{
	const void *p = sa->sa_family == AF_INET6
	                        ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
	                        : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
	    inet_ntop(sa->sa_family, p, out, (socklen_t)outlen) == NULL)
		str_copy(out, "?", outlen);
}

enum guard_addr_verdict
guard_addr_check(const struct policy *p, const struct guard_hosts *hosts, const struct sockaddr *sa,
                 uint16_t port, char *why, size_t whylen, const char **rule)
{
	enum guard_class cls = guard_classify(sa);
	enum guard_host host = GUARD_HOST_UNKNOWN;
	struct policy_verdict v;
	char ip[INET6_ADDRSTRLEN];
	bool audit_denied = false;

	if (rule != NULL)
		*rule = NULL;
	addr_text(sa, ip, sizeof(ip));
	/* A deny cidr rule refuses its addresses however they were reached. */
	policy_match_addr(p, sa, port, &v);
	if (v.action == POLICY_DENY) {
		if (rule != NULL)
			*rule = v.where;
		if (why != NULL)
			snprintf(why, whylen, "%s is denied by a cidr rule", ip);
		if (policy_mode(p) != POLICY_MODE_AUDIT)
			return GUARD_ADDR_REFUSED_CIDR;
		audit_denied = true;
	}
	/* The host's own addresses as they are now; while the set cannot
	 * tell (or there is none), every public address counts as one. */
	if (cls == GUARD_PUBLIC && hosts != NULL)
		host = guard_hosts_lookup(hosts, sa);
	if ((cls == GUARD_PUBLIC && host == GUARD_HOST_OTHER) ||
	    /* An explicit cidr rule is the only way to private ranges,
	     * loopback and the host's own addresses. */
	    policy_cidr_allows(p, sa, port))
		return audit_denied ? GUARD_ADDR_AUDIT_DENIED : GUARD_ADDR_PERMITTED;
	if (rule != NULL)
		*rule = NULL;
	if (why != NULL) {
		if (cls != GUARD_PUBLIC)
			snprintf(why, whylen, "%s is %s (address guard)", ip,
			         guard_class_name(cls));
		else if (host == GUARD_HOST_OWN)
			snprintf(why, whylen, "%s is one of this host's addresses", ip);
		else
			snprintf(why, whylen, "%s may be one of this host's addresses (%s)", ip,
			         hosts != NULL ? guard_hosts_state_text(guard_hosts_state(hosts))
			                       : "no host address list");
	}
	return GUARD_ADDR_REFUSED_GUARD;
}
