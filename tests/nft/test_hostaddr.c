/* hostaddr_parse (nft/hostaddr.h) over datagrams built here with libmnl,
 * as the kernel builds them: notifications, dump parts, the dump's end and
 * error, the flags that matter, and every malformed shape refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>

#include "nft/hostaddr.h"

#define MAXMSG 16

struct got {
	struct hostaddr_msg m[MAXMSG];
	int n;
};

static void
collect(const struct hostaddr_msg *m, void *arg)
{
	struct got *g = arg;

	if (g->n < MAXMSG)
		g->m[g->n] = *m;
	g->n++;
}

/* A datagram being built: messages appended one after the other. */
struct dgram {
	uint64_t buf[4096 / sizeof(uint64_t)];
	size_t len;
};

static struct nlmsghdr *
put(struct dgram *d, uint16_t type, uint16_t flags, uint32_t seq, uint32_t pid)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header((char *)d->buf + d->len);

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = flags;
	nlh->nlmsg_seq = seq;
	nlh->nlmsg_pid = pid;
	return nlh;
}

static void
done(struct dgram *d, struct nlmsghdr *nlh)
{
	d->len += NLMSG_ALIGN(nlh->nlmsg_len);
}

/* An address message. local and address are text (NULL: attribute left
 * out). */
static struct nlmsghdr *
put_addr(struct dgram *d, uint16_t type, int family, const char *address, const char *local,
         uint32_t ifindex, uint8_t plen)
{
	struct nlmsghdr *nlh = put(d, type, 0, 0, 0);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	uint8_t bin[16];
	size_t alen = family == AF_INET ? 4 : 16;

	ifa->ifa_family = (uint8_t)family;
	ifa->ifa_prefixlen = plen;
	ifa->ifa_index = ifindex;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	if (address != NULL) {
		assert_int_equal(inet_pton(family, address, bin), 1);
		mnl_attr_put(nlh, IFA_ADDRESS, alen, bin);
	}
	if (local != NULL) {
		assert_int_equal(inet_pton(family, local, bin), 1);
		mnl_attr_put(nlh, IFA_LOCAL, alen, bin);
	}
	/* What the kernel adds besides: a label and flags, to be skipped. */
	mnl_attr_put_strz(nlh, IFA_LABEL, "eth0");
	mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_PERMANENT);
	return nlh;
}

static void
expect_addr(const struct hostaddr_msg *m, enum hostaddr_kind kind, int family, const char *text,
            uint32_t ifindex, uint8_t plen)
{
	uint8_t bin[16] = {0};

	assert_int_equal(m->kind, kind);
	assert_int_equal(m->addr.family, family);
	assert_int_equal(inet_pton(family, text, bin), 1);
	assert_memory_equal(m->addr.addr, bin, family == AF_INET ? 4 : 16);
	assert_int_equal(m->addr.ifindex, ifindex);
	assert_int_equal(m->addr.prefixlen, plen);
}

static int
parse(const struct dgram *d, struct got *g)
{
	memset(g, 0, sizeof(*g));
	return hostaddr_parse(d->buf, d->len, collect, g);
}

static void
test_notifications(void **state)
{
	struct dgram d = {0};
	struct got g;
	(void)state;

	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET, "203.0.113.7", "203.0.113.7", 2, 24));
	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET6, "2001:db8::7", NULL, 3, 64));
	done(&d, put_addr(&d, RTM_DELADDR, AF_INET, "198.51.100.1", "198.51.100.1", 4, 32));
	assert_int_equal(parse(&d, &g), 3);
	expect_addr(&g.m[0], HOSTADDR_NEW, AF_INET, "203.0.113.7", 2, 24);
	expect_addr(&g.m[1], HOSTADDR_NEW, AF_INET6, "2001:db8::7", 3, 64);
	expect_addr(&g.m[2], HOSTADDR_DEL, AF_INET, "198.51.100.1", 4, 32);
	assert_false(g.m[0].dump_intr);
	/* fn may be NULL: only the count. */
	assert_int_equal(hostaddr_parse(d.buf, d.len, NULL, NULL), 3);
}

/* A point-to-point link: IFA_ADDRESS is the peer, IFA_LOCAL ours. Either
 * order of the attributes. */
static void
test_local_wins(void **state)
{
	struct dgram d = {0};
	struct got g;
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	uint8_t mine[16], peer[16];
	(void)state;

	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET, "198.51.100.2", "203.0.113.1", 5, 32));
	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET6, "2001:db8:1::2", "2001:db8:2::1", 5, 128));
	nlh = put(&d, RTM_NEWADDR, 0, 0, 0);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_index = 6;
	inet_pton(AF_INET, "203.0.113.3", mine);
	inet_pton(AF_INET, "198.51.100.3", peer);
	mnl_attr_put(nlh, IFA_LOCAL, 4, mine);
	mnl_attr_put(nlh, IFA_ADDRESS, 4, peer);
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), 3);
	expect_addr(&g.m[0], HOSTADDR_NEW, AF_INET, "203.0.113.1", 5, 32);
	expect_addr(&g.m[1], HOSTADDR_NEW, AF_INET6, "2001:db8:2::1", 5, 128);
	expect_addr(&g.m[2], HOSTADDR_NEW, AF_INET, "203.0.113.3", 6, 0);
}

/* A dump: parts with our seq and port id, NLM_F_MULTI, one marked
 * interrupted, then NLMSG_DONE; and a dump refused with NLMSG_ERROR. */
static void
test_dump_done_error(void **state)
{
	struct dgram d = {0};
	struct got g;
	struct nlmsghdr *nlh;
	struct nlmsgerr *e;
	(void)state;

	nlh = put_addr(&d, RTM_NEWADDR, AF_INET, "203.0.113.7", NULL, 2, 24);
	nlh->nlmsg_flags = NLM_F_MULTI;
	nlh->nlmsg_seq = 42;
	nlh->nlmsg_pid = 777;
	done(&d, nlh);
	nlh = put_addr(&d, RTM_NEWADDR, AF_INET6, "2001:db8::8", NULL, 2, 64);
	nlh->nlmsg_flags = NLM_F_MULTI | NLM_F_DUMP_INTR;
	nlh->nlmsg_seq = 42;
	nlh->nlmsg_pid = 777;
	done(&d, nlh);
	nlh = put(&d, NLMSG_DONE, NLM_F_MULTI, 42, 777);
	*(int32_t *)mnl_nlmsg_put_extra_header(nlh, sizeof(int32_t)) = 0;
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), 3);
	assert_int_equal(g.m[0].seq, 42);
	assert_int_equal(g.m[0].portid, 777);
	assert_false(g.m[0].dump_intr);
	assert_true(g.m[1].dump_intr);
	assert_int_equal(g.m[2].kind, HOSTADDR_DONE);
	assert_int_equal(g.m[2].seq, 42);

	memset(&d, 0, sizeof(d));
	nlh = put(&d, NLMSG_ERROR, 0, 43, 777);
	e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
	e->error = -EBUSY;
	done(&d, nlh);
	nlh = put(&d, NLMSG_ERROR, 0, 44, 777);
	e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
	e->error = 0; /* an ACK */
	done(&d, nlh);
	nlh = put(&d, NLMSG_ERROR, 0, 45, 777);
	e = mnl_nlmsg_put_extra_header(nlh, sizeof(*e));
	e->error = 17; /* not a negative errno */
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), 3);
	assert_int_equal(g.m[0].kind, HOSTADDR_ERROR);
	assert_int_equal(g.m[0].error, EBUSY);
	assert_int_equal(g.m[0].seq, 43);
	assert_int_equal(g.m[1].error, 0);
	assert_int_equal(g.m[2].error, EPROTO);
}

/* Other families, other message types and NOOP are skipped; newer
 * attributes too. */
static void
test_skipped(void **state)
{
	struct dgram d = {0};
	struct got g;
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	struct ifinfomsg *ifi;
	(void)state;

	nlh = put(&d, RTM_NEWADDR, 0, 0, 0);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_PACKET; /* no address of ours; skip, not refuse */
	mnl_attr_put_u32(nlh, IFA_ADDRESS, 0);
	done(&d, nlh);
	nlh = put(&d, RTM_NEWLINK, 0, 0, 0);
	ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_index = 2;
	done(&d, nlh);
	done(&d, put(&d, NLMSG_NOOP, 0, 0, 0));
	nlh = put_addr(&d, RTM_DELADDR, AF_INET6, "2001:db8::9", NULL, 9, 64);
	mnl_attr_put_u32(nlh, 200, 1); /* an attribute from the future */
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), 1);
	expect_addr(&g.m[0], HOSTADDR_DEL, AF_INET6, "2001:db8::9", 9, 64);
	/* An empty datagram: nothing. */
	assert_int_equal(hostaddr_parse(d.buf, 0, collect, &g), 0);
}

static void
test_malformed(void **state)
{
	struct dgram d;
	struct got g;
	struct nlmsghdr *nlh;
	struct ifaddrmsg *ifa;
	uint8_t six[16] = {0x20, 0x01, 0x0d, 0xb8};
	(void)state;

	/* An address message without any address. */
	memset(&d, 0, sizeof(d));
	nlh = put(&d, RTM_NEWADDR, 0, 0, 0);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	mnl_attr_put_strz(nlh, IFA_LABEL, "eth0");
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), -1);

	/* An IPv4 message carrying 16 address bytes. */
	memset(&d, 0, sizeof(d));
	nlh = put(&d, RTM_NEWADDR, 0, 0, 0);
	ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	mnl_attr_put(nlh, IFA_ADDRESS, 16, six);
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), -1);

	/* Shorter than an ifaddrmsg. */
	memset(&d, 0, sizeof(d));
	nlh = put(&d, RTM_DELADDR, 0, 0, 0);
	mnl_nlmsg_put_extra_header(nlh, 4);
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), -1);

	/* An NLMSG_ERROR too short for its nlmsgerr. */
	memset(&d, 0, sizeof(d));
	nlh = put(&d, NLMSG_ERROR, 0, 1, 1);
	mnl_nlmsg_put_extra_header(nlh, 4);
	done(&d, nlh);
	assert_int_equal(parse(&d, &g), -1);

	/* A good message, then a header claiming more than is there: the
	 * first is handed on, the datagram is still refused. */
	memset(&d, 0, sizeof(d));
	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET, "203.0.113.7", NULL, 2, 24));
	nlh = put_addr(&d, RTM_NEWADDR, AF_INET, "203.0.113.8", NULL, 2, 24);
	done(&d, nlh);
	nlh->nlmsg_len += 64;
	assert_int_equal(parse(&d, &g), -1);
	assert_int_equal(g.n, 1);

	/* Trailing bytes that are no message. */
	memset(&d, 0, sizeof(d));
	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET, "203.0.113.7", NULL, 2, 24));
	d.len += 8;
	assert_int_equal(parse(&d, &g), -1);

	/* A header whose length is below the header's own. */
	memset(&d, 0, sizeof(d));
	nlh = put(&d, RTM_NEWADDR, 0, 0, 0);
	nlh->nlmsg_len = 4;
	d.len = sizeof(*nlh);
	assert_int_equal(parse(&d, &g), -1);
	assert_int_equal(g.n, 0);
}

/* Every prefix of a good datagram parses without reading past it: either
 * whole messages (a count) or -1. */
static void
test_truncations(void **state)
{
	struct dgram d = {0};
	struct got g;
	(void)state;

	done(&d, put_addr(&d, RTM_NEWADDR, AF_INET6, "2001:db8::1", "2001:db8::2", 2, 64));
	done(&d, put_addr(&d, RTM_DELADDR, AF_INET, "203.0.113.1", NULL, 2, 24));
	for (size_t len = 0; len <= d.len; len++) {
		uint64_t copy[sizeof(d.buf) / sizeof(uint64_t)];
		int n;

		memcpy(copy, d.buf, len);
		memset(&g, 0, sizeof(g));
		n = hostaddr_parse(copy, len, collect, &g);
		assert_true(n == -1 || n == g.n);
		if (len == d.len)
			assert_int_equal(n, 2);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_notifications),   cmocka_unit_test(test_local_wins),
	        cmocka_unit_test(test_dump_done_error), cmocka_unit_test(test_skipped),
	        cmocka_unit_test(test_malformed),       cmocka_unit_test(test_truncations),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
