/* The address guard (DESIGN.md, decision 4): classes of addresses that no
 * name may resolve to, unless a cidr rule allows the range explicitly
 * (policy_cidr_allows in policy.h says exactly when).
 * v4-mapped IPv6 (::ffff:a.b.c.d), the NAT64 well-known prefix
 * (64:ff9b::/96) and 6to4 (2002::/16) are looked through to the embedded
 * IPv4 address (guard_v4in6). */
#ifndef AIRLOCK_POLICY_GUARD_H
#define AIRLOCK_POLICY_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

enum guard_class {
	GUARD_PUBLIC = 0,  /* an ordinary routable address: allowed */
	GUARD_UNSPECIFIED, /* 0.0.0.0/8, :: */
	GUARD_LOOPBACK,    /* 127.0.0.0/8, ::1 */
	GUARD_PRIVATE,     /* 10/8, 172.16/12, 192.168/16, fc00::/7 */
	GUARD_CGNAT,       /* 100.64.0.0/10 */
	GUARD_LINK_LOCAL,  /* 169.254.0.0/16 (cloud metadata), fe80::/10 */
	GUARD_MULTICAST,   /* 224.0.0.0/4, ff00::/8 */
	GUARD_RESERVED,    /* 240.0.0.0/4, broadcast, benchmark 198.18/15 ... */
};

/* Classify an AF_INET or AF_INET6 address. Any other family is
 * GUARD_RESERVED. Pure. */
enum guard_class guard_classify(const struct sockaddr *sa);

/* The prefix length of the block of guard_classify(sa)'s class that holds
 * sa, in sa's own family: 8 for 127.0.0.1 (127.0.0.0/8), 16 for
 * 169.254.169.254, 10 for fe80::1, 104 for ::ffff:127.0.0.1, 112 for
 * 64:ff9b::a9fe:a9fe. A cidr rule at least this long that covers sa lies
 * wholly inside that block: it names the guarded range explicitly. For
 * a public address the value has no use (32 or 128); for an unassigned
 * IPv6 address, which lies in no single aligned block, it is 128; for
 * another family, 0. Pure. */
unsigned guard_block_prefix(const struct sockaddr *sa);

/* How an IPv6 address carries an IPv4 one, which both the guard and the
 * matcher look through: ::ffff:a.b.c.d (a dual-stack socket's IPv4 peer),
 * 64:ff9b::a.b.c.d (NAT64, /96) and 2002:a.b.c.d::/48 (6to4). */
enum guard_v4in6 {
	GUARD_V4IN6_NONE = 0,
	GUARD_V4IN6_MAPPED,
	GUARD_V4IN6_NAT64,
	GUARD_V4IN6_6TO4,
};

/* Which of those a (16 bytes, network order) is, and the IPv4 address in
 * it (host order) into *v4 unless NONE. Pure. */
enum guard_v4in6 guard_v4in6(const uint8_t *a, uint32_t *v4);

/* Short stable name for logs: "public", "loopback", "private", ... */
const char *guard_class_name(enum guard_class c);

/* The guarded blocks the classifier names, for the sandbox's firewall
 * (nft/refuse.h): every IPv4 block of a class other than public, the
 * same blocks as IPv6 addresses carrying them (v4-mapped, NAT64, 6to4),
 * ::, ::1 and the IPv6 prefixes of guard_classify. Not listed: the
 * unassigned rest of IPv6 (guard_classify calls it reserved block by
 * address, no prefix covers it) and the host's own addresses. Blocks may
 * overlap (2001::/32 lies in 2001::/23). Writes at most max into out and
 * returns how many there are. Pure. */
struct guard_block {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order, host bits clear; AF_INET: 4 bytes */
	unsigned plen;
	enum guard_class cls;
};
size_t guard_blocks(struct guard_block *out, size_t max);

/* Whether address a (network order) lies in net/plen; plen at most the
 * address's bits. Pure. */
bool guard_prefix_is(const uint8_t *a, const uint8_t *net, unsigned plen);

/* --- the host's own addresses -------------------------------------------
 *
 * A public address can still be the host's own (a service bound to it is
 * the host's service), and the host gains and loses addresses during a run
 * (an interface, a VPN). This set holds them for the guard to read; a
 * watcher outside policy/ (nft/hostaddr.h) keeps it current from the
 * kernel's notifications. Pure: no I/O, no clock.
 *
 * Only addresses guard_classify calls GUARD_PUBLIC are kept: every other
 * class is refused by class already, and a cidr rule that opens such a
 * range opens it on the host too (docs/policy.md). So link-local
 * addresses on hundreds of container veths cost nothing here.
 *
 * The set is bounded (GUARD_HOSTS_MAX entries unless told otherwise); while
 * it cannot say for sure what the host's addresses are (being read, lost
 * notifications, over the bound, the watcher stopped) every public address
 * counts as possibly the host's: the guard fails closed. */

struct guard_hosts;

/* One address of one interface, as the kernel reports it. An entry is
 * (address, ifindex, prefixlen): the same address on two interfaces (or
 * twice on one with two prefix lengths, which IPv4 allows) is two entries,
 * and stays the host's until the last of them goes. */
struct guard_host_addr {
	int family;       /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order; AF_INET uses the first 4 bytes */
	uint32_t ifindex;
	uint8_t prefixlen;
};

enum guard_hosts_state {
	GUARD_HOSTS_KNOWN = 0, /* the set is the host's public addresses */
	GUARD_HOSTS_READING,   /* being (re-)read: a dump is under way */
	GUARD_HOSTS_FULL,      /* more entries than the bound (or no memory) */
	GUARD_HOSTS_LOST,      /* nothing keeps the set current any more */
};

#define GUARD_HOSTS_MAX 4096

/* What one address is to the host. */
enum guard_host {
	GUARD_HOST_OTHER = 0, /* not one of the host's addresses */
	GUARD_HOST_OWN,       /* one of them */
	GUARD_HOST_UNKNOWN,   /* the set is not KNOWN: refuse, as if OWN */
};

/* An empty set of at most max entries (0 = GUARD_HOSTS_MAX), in state
 * GUARD_HOSTS_READING until its owner says otherwise. NULL when out of
 * memory. Free with guard_hosts_free (NULL is fine). */
struct guard_hosts *guard_hosts_new(size_t max);
void guard_hosts_free(struct guard_hosts *h);

/* Add one entry (again is a no-op: the kernel repeats NEWADDR for every
 * change of flags or lifetimes). A non-public address is not kept. 0, or
 * -1 when the entry does not fit (the bound, or memory): the state is then
 * GUARD_HOSTS_FULL until guard_hosts_clear. An address of another family
 * is ignored (0). */
int guard_hosts_add(struct guard_hosts *h, const struct guard_host_addr *a);
/* Remove one entry; absent is a no-op. */
void guard_hosts_del(struct guard_hosts *h, const struct guard_host_addr *a);
/* Empty the set for a fresh read: state GUARD_HOSTS_READING. */
void guard_hosts_clear(struct guard_hosts *h);
/* The owner's word on the set. KNOWN is refused (kept FULL) while an
 * entry did not fit since the last clear. */
void guard_hosts_set_state(struct guard_hosts *h, enum guard_hosts_state s);
enum guard_hosts_state guard_hosts_state(const struct guard_hosts *h);
/* Entries held. */
size_t guard_hosts_count(const struct guard_hosts *h);

/* Is sa (AF_INET or AF_INET6; ::ffff:a.b.c.d is a.b.c.d) one of the host's
 * addresses? GUARD_HOST_UNKNOWN whenever the state is not KNOWN. Another
 * family is GUARD_HOST_OTHER. O(log n), allocates nothing: the proxy asks
 * for every address it is about to connect to. */
enum guard_host guard_hosts_lookup(const struct guard_hosts *h, const struct sockaddr *sa);

/* Why a state other than KNOWN cannot tell, for a refusal's reason:
 * "the host's address list is being read", ... */
const char *guard_hosts_state_text(enum guard_hosts_state s);

/* What the deny cidr rules and the guard say of one address sa (AF_INET
 * or AF_INET6) on port: the one check the proxy and the broker apply to
 * every address they would dial (DESIGN.md decision 4). hosts (may be
 * NULL: every public address counts as possibly the host's) is the host's
 * own addresses. On a refusal or audit-deny, why (whylen bytes, may be
 * NULL) gets the reason and *rule (may be NULL) the deny rule's
 * "file:line" (borrowed from p) or NULL. */
struct policy;
enum guard_addr_verdict {
	GUARD_ADDR_REFUSED_GUARD, /* guarded class, or the host's own */
	GUARD_ADDR_REFUSED_CIDR,  /* a deny cidr rule covers it */
	GUARD_ADDR_PERMITTED,
	GUARD_ADDR_AUDIT_DENIED, /* audit mode: a deny cidr rule covers it */
};
enum guard_addr_verdict guard_addr_check(const struct policy *p, const struct guard_hosts *hosts,
                                         const struct sockaddr *sa, uint16_t port, char *why,
                                         size_t whylen, const char **rule);

#endif
