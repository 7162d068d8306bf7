/* The address guard (DESIGN.md, decision 4): classes of addresses that no
 * name may resolve to, unless a cidr rule allows the range explicitly
 * (policy_cidr_allows in policy.h says exactly when).
 * v4-mapped IPv6 (::ffff:a.b.c.d), the NAT64 well-known prefix
 * (64:ff9b::/96) and 6to4 (2002::/16) are looked through to the embedded
 * IPv4 address (guard_v4in6). */
#ifndef AIRLOCK_POLICY_GUARD_H
#define AIRLOCK_POLICY_GUARD_H

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

#endif
