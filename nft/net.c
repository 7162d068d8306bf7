/* The sandbox's loopback network, through rtnetlink (libmnl), no ip(8):
 * lo up, the egress addresses 198.18.0.1/32 and fd00:a1::1/128 on it, and
 * default routes for both families via lo with those sources. The routes
 * are what make every destination "reachable" as far as the nat hook, where
 * nftables redirects TCP and DNS to the listeners; without them connect()
 * would fail with ENETUNREACH before any rule ran. */
#include "nft/nft.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <net/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>

#include "common/netconst.h"
#include "common/util.h"
#include "nft/nlutil.h"

/* lo is always ifindex 1 in a network namespace (LOOPBACK_IFINDEX, fixed
 * by the kernel since 3.x): set-up addresses it by that index without a
 * lookup. Verification finds lo by name, so a kernel that numbered it
 * otherwise would fail it, not pass unnoticed. */
#define LO_NAME "lo"
#define LO_INDEX 1u

enum net_step {
	STEP_LINK_UP,
	STEP_ADDR_V4,
	STEP_ADDR_V6,
	STEP_ROUTE_V4,
	STEP_ROUTE_V6,
	STEP_COUNT,
};

static const char *const step_names[STEP_COUNT] = {
        [STEP_LINK_UP] = "setting lo up",
        [STEP_ADDR_V4] = "adding " AIRLOCK_EGRESS_V4 "/32 to lo",
        [STEP_ADDR_V6] = "adding " AIRLOCK_EGRESS_V6 "/128 to lo",
        [STEP_ROUTE_V4] = "adding the IPv4 default route via lo",
        [STEP_ROUTE_V6] = "adding the IPv6 default route via lo",
};

struct egress {
	struct in_addr v4;
	struct in6_addr v6;
};

static void
egress_addrs(struct egress *eg)
{
	/* Constants from netconst.h; a typo there fails the unit build's
	 * e2e at once, so the result is not checked at run time. */
	(void)inet_pton(AF_INET, AIRLOCK_EGRESS_V4, &eg->v4);
	(void)inet_pton(AF_INET6, AIRLOCK_EGRESS_V6, &eg->v6);
}

static struct nlmsghdr *
put_req(struct mnl_nlmsg_batch *b, uint16_t type, uint16_t flags, uint32_t seq)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(mnl_nlmsg_batch_current(b));

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	nlh->nlmsg_seq = seq;
	return nlh;
}

static void
put_link_up(struct mnl_nlmsg_batch *b, uint32_t seq)
{
	struct nlmsghdr *nlh = put_req(b, RTM_NEWLINK, 0, seq);
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));

	/* Index 0 + IFLA_IFNAME: the kernel finds the device by name. */
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_flags = IFF_UP;
	ifi->ifi_change = IFF_UP;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, LO_NAME);
}

static void
put_addr(struct mnl_nlmsg_batch *b, uint32_t seq, int family, const void *addr, size_t alen,
         unsigned int lo)
{
	/* REPLACE: set-up may run again in the same namespace (tests). */
	struct nlmsghdr *nlh = put_req(b, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, seq);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));

	ifa->ifa_family = (uint8_t)family;
	ifa->ifa_prefixlen = (uint8_t)(alen * 8);
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = lo;
	/* No duplicate address detection: the address must be usable as a
	 * source at once, not "tentative" for a second. */
	ifa->ifa_flags = family == AF_INET6 ? IFA_F_NODAD : 0;
	mnl_attr_put(nlh, IFA_LOCAL, alen, addr);
	mnl_attr_put(nlh, IFA_ADDRESS, alen, addr);
}

static void
put_default_route(struct mnl_nlmsg_batch *b, uint32_t seq, int family, const void *src, size_t alen,
                  unsigned int lo)
{
	struct nlmsghdr *nlh = put_req(b, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, seq);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

	rtm->rtm_family = (uint8_t)family;
	rtm->rtm_dst_len = 0;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	/* No gateway: every destination is "directly" on lo. */
	rtm->rtm_scope = RT_SCOPE_LINK;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put_u32(nlh, RTA_OIF, lo);
	mnl_attr_put(nlh, RTA_PREFSRC, alen, src);
}

static const char *
net_advice(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return " (no CAP_NET_ADMIN in this network namespace)";
	case EAFNOSUPPORT:
		return " (IPv6 is disabled on this kernel: ipv6.disable=1?)";
	case ENODEV:
		return " (no lo device in this namespace)";
	case ETIMEDOUT:
		return " (the kernel did not answer)";
	default:
		return "";
	}
}

/* --- verification ------------------------------------------------------- */

struct net_state {
	unsigned int lo; /* ifindex of lo, 0 until seen */
	bool lo_up;
	char bad[64];       /* first interface other than lo that is up */
	bool default_ok[2]; /* v4, v6: default route via lo with the egress source */
	bool foreign_route; /* a route through something other than lo */
	struct egress eg;
};

static int
link_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(attr);

	if (type == IFLA_IFNAME) {
		if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
			return MNL_CB_ERROR;
		tb[type] = attr;
	}
	return MNL_CB_OK;
}

static int
link_cb(const struct nlmsghdr *nlh, void *data)
{
	struct net_state *st = data;
	const struct nlattr *tb[IFLA_MAX + 1] = {0};
	const struct ifinfomsg *ifi;
	const char *name;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*ifi)))
		return MNL_CB_ERROR;
	ifi = mnl_nlmsg_get_payload(nlh);
	if (mnl_attr_parse(nlh, sizeof(*ifi), link_attr_cb, tb) < 0 || tb[IFLA_IFNAME] == NULL)
		return MNL_CB_ERROR;
	name = mnl_attr_get_str(tb[IFLA_IFNAME]);
	if (strcmp(name, LO_NAME) == 0) {
		st->lo = (unsigned int)ifi->ifi_index;
		st->lo_up = (ifi->ifi_flags & IFF_UP) != 0;
	} else if ((ifi->ifi_flags & IFF_UP) != 0 && st->bad[0] == '\0') {
		/* Kernels with tunnel modules loaded give every namespace
		 * fallback devices (sit0, tunl0, ...). Down, without addresses
		 * or routes, they carry nothing; only an up one is a leak. */
		str_copy(st->bad, name, sizeof(st->bad));
	}
	return MNL_CB_OK;
}

static int
route_attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(attr);

	if (type > RTA_MAX)
		return MNL_CB_OK;
	if ((type == RTA_OIF || type == RTA_TABLE) && mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
		return MNL_CB_ERROR;
	tb[type] = attr;
	return MNL_CB_OK;
}

static int
route_cb(const struct nlmsghdr *nlh, void *data)
{
	struct net_state *st = data;
	const struct nlattr *tb[RTA_MAX + 1] = {0};
	const struct rtmsg *rtm;
	uint32_t table, oif;
	const void *want;
	size_t alen;
	bool v6;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*rtm)))
		return MNL_CB_ERROR;
	rtm = mnl_nlmsg_get_payload(nlh);
	if (mnl_attr_parse(nlh, sizeof(*rtm), route_attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	if (rtm->rtm_family != AF_INET && rtm->rtm_family != AF_INET6)
		return MNL_CB_OK;
	v6 = rtm->rtm_family == AF_INET6;
	oif = tb[RTA_OIF] != NULL ? mnl_attr_get_u32(tb[RTA_OIF]) : 0;
	if (oif != 0 && oif != st->lo)
		st->foreign_route = true;
	table = tb[RTA_TABLE] != NULL ? mnl_attr_get_u32(tb[RTA_TABLE]) : rtm->rtm_table;
	if (table != RT_TABLE_MAIN || rtm->rtm_dst_len != 0 || rtm->rtm_type != RTN_UNICAST ||
	    oif != st->lo)
		return MNL_CB_OK;
	want = v6 ? (const void *)&st->eg.v6 : (const void *)&st->eg.v4;
	alen = v6 ? sizeof(st->eg.v6) : sizeof(st->eg.v4);
	if (tb[RTA_PREFSRC] != NULL && mnl_attr_get_payload_len(tb[RTA_PREFSRC]) == alen &&
	    memcmp(mnl_attr_get_payload(tb[RTA_PREFSRC]), want, alen) == 0)
		st->default_ok[v6] = true;
	return MNL_CB_OK;
}

static int
dump(struct mnl_socket *nl, uint16_t type, int family, uint32_t seq, mnl_cb_t cb,
     struct net_state *st)
{
	uint64_t req[256 / sizeof(uint64_t)];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(req);
	struct rtgenmsg *g;

	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	nlh->nlmsg_seq = seq;
	/* rtmsg/ifinfomsg both start with the family byte; the kernel reads
	 * only that for a dump. A full ifinfomsg keeps strict checking happy. */
	g = mnl_nlmsg_put_extra_header(nlh, sizeof(struct ifinfomsg));
	g->rtgen_family = (unsigned char)family;
	return nft_nl_talk(nl, nlh, nlh->nlmsg_len, seq, cb, st);
}

static int
verify_on(struct mnl_socket *nl, char *err, size_t errlen)
{
	struct net_state st;
	struct timespec ts;
	uint32_t seq;

	memset(&st, 0, sizeof(st));
	egress_addrs(&st.eg);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	seq = (uint32_t)ts.tv_nsec | 1u;
	if (dump(nl, RTM_GETLINK, AF_UNSPEC, seq, link_cb, &st) < 0) {
		snprintf(err, errlen, "network: listing interfaces: %s", strerror(errno));
		return -1;
	}
	if (st.lo == 0 || !st.lo_up) {
		snprintf(err, errlen, "network: lo is %s", st.lo == 0 ? "missing" : "down");
		return -1;
	}
	if (st.bad[0] != '\0') {
		snprintf(err, errlen,
		         "network: interface %s is up in the sandbox "
		         "(only lo may be)",
		         st.bad);
		return -1;
	}
	/* Both families' routes in one dump. */
	if (dump(nl, RTM_GETROUTE, AF_UNSPEC, seq + 1, route_cb, &st) < 0) {
		snprintf(err, errlen, "network: listing routes: %s", strerror(errno));
		return -1;
	}
	if (!st.default_ok[0]) {
		snprintf(err, errlen,
		         "network: no IPv4 default route via lo with "
		         "source %s",
		         AIRLOCK_EGRESS_V4);
		return -1;
	}
	if (!st.default_ok[1]) {
		snprintf(err, errlen,
		         "network: no IPv6 default route via lo with "
		         "source %s",
		         AIRLOCK_EGRESS_V6);
		return -1;
	}
	if (st.foreign_route) {
		snprintf(err, errlen,
		         "network: a route leads through an interface "
		         "other than lo");
		return -1;
	}
	return 0;
}

/* --- set-up ----------------------------------------------------------- */

static int
setup_on(struct mnl_socket *nl, char *err, size_t errlen)
{
	/* Five small messages (static: see nft_nl_talk). */
	static uint64_t buf[8192 / sizeof(uint64_t)];
	struct mnl_nlmsg_batch *b = NULL;
	struct nft_nl_ack failed;
	struct egress eg;
	struct timespec ts;
	const unsigned int lo = LO_INDEX;
	uint32_t seq;
	int ret = -1;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	seq = (uint32_t)ts.tv_nsec | 1u;
	egress_addrs(&eg);

	/* 8 KiB for five messages of < 100 bytes: the batch cannot overflow,
	 * and the limit below keeps libmnl's own check meaningful. */
	b = mnl_nlmsg_batch_start(buf, sizeof(buf) / 2);
	if (b == NULL) {
		snprintf(err, errlen, "network: out of memory");
		return -1;
	}
	put_link_up(b, seq + STEP_LINK_UP);
	mnl_nlmsg_batch_next(b);
	put_addr(b, seq + STEP_ADDR_V4, AF_INET, &eg.v4, sizeof(eg.v4), lo);
	mnl_nlmsg_batch_next(b);
	put_addr(b, seq + STEP_ADDR_V6, AF_INET6, &eg.v6, sizeof(eg.v6), lo);
	mnl_nlmsg_batch_next(b);
	put_default_route(b, seq + STEP_ROUTE_V4, AF_INET, &eg.v4, sizeof(eg.v4), lo);
	mnl_nlmsg_batch_next(b);
	put_default_route(b, seq + STEP_ROUTE_V6, AF_INET6, &eg.v6, sizeof(eg.v6), lo);
	mnl_nlmsg_batch_next(b);

	/* rtnetlink runs the messages in order and answers each; the answer
	 * to the last route is the last one. No batch-level failure exists,
	 * so stop_seq is one that no message uses. */
	if (nft_nl_batch(nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b), seq + STEP_ROUTE_V6,
	                 seq - 1, &failed) < 0) {
		snprintf(err, errlen, "network: talking to rtnetlink: %s%s", strerror(errno),
		         net_advice(errno));
		goto out;
	}
	if (failed.error != 0) {
		uint32_t i = failed.seq - seq;

		snprintf(err, errlen, "network: %s: %s%s",
		         i < STEP_COUNT ? step_names[i] : "rtnetlink", strerror(failed.error),
		         net_advice(failed.error));
		goto out;
	}
	ret = 0;
out:
	mnl_nlmsg_batch_stop(b);
	return ret;
}

/* --- the four entry points ---------------------------------------------- */

static int
with_socket(struct mnl_socket *nl, const char *what, int (*fn)(struct mnl_socket *, char *, size_t),
            char *err, size_t errlen)
{
	int ret;

	if (nl == NULL) {
		snprintf(err, errlen, "network: %s the rtnetlink socket: %s", what, strerror(errno));
		return -1;
	}
	ret = fn(nl, err, errlen);
	mnl_socket_close(nl);
	return ret;
}

int
nft_net_setup(char *err, size_t errlen)
{
	return with_socket(nft_nl_open(NETLINK_ROUTE), "opening", setup_on, err, errlen);
}

int
nft_net_setup_fd(int fd, char *err, size_t errlen)
{
	return with_socket(nft_nl_wrap(fd), "using", setup_on, err, errlen);
}

int
nft_net_verify(char *err, size_t errlen)
{
	return with_socket(nft_nl_open(NETLINK_ROUTE), "opening", verify_on, err, errlen);
}

int
nft_net_verify_fd(int fd, char *err, size_t errlen)
{
	return with_socket(nft_nl_wrap(fd), "using", verify_on, err, errlen);
}
