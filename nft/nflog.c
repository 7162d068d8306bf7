/* Blocked packets, from the filter chain's "log group N" rule through
 * NFNETLINK_LOG to the egress log.
 *
 * The socket is opened and bound inside the sandbox's network namespace
 * (the NFLOG instance belongs to that namespace and to the socket's port
 * id), then passed to the supervisor, which reads it in its event loop.
 * Every byte read here comes from packets the sandboxed process built, so
 * the parser is pure, bounded and fuzzed (tests/fuzz/fuzz_nflog.c). */
#include "nft/nflog.h"
#include "policy/verdict.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>

#include <event2/event.h>
#include <libmnl/libmnl.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/elog.h"
#include "nft/nft.h"
#include "nft/nlutil.h"
#include "nft/refuse.h"
#include "policy/guard.h"

/* Bytes of each packet the kernel copies to us: IPv6 header (40), a few
 * extension headers and the first 4 bytes of L4 are all the parser reads.
 * The ruleset's log rule caps the copy at the same size. */
#define NFLOG_COPY_RANGE 128
/* Receive buffer we ask for: a burst of blocked packets is queued here
 * while the supervisor is busy. Capped by net.core.rmem_max when rootless. */
#define NFLOG_RCVBUF (1 << 20)
/* Datagrams read per wake-up, so a flood of blocked packets cannot starve
 * the proxy's connections in the same loop. */
#define NFLOG_READS_PER_EVENT 32
/* IPv6 extension headers walked before giving up on finding L4. */
#define NFLOG_MAX_EXTHDRS 8
/* Datagrams read at most when the reader is freed (a full 1 MiB receive
 * buffer holds far fewer). */
#define NFLOG_FREE_MAX_READS 4096
/* Largest table a caller may ask for. */
#define NFLOG_AGG_MAX_DESTS_LIMIT (1u << 20)

/* The reasons' sentences, as the one table has them (policy/verdict.h). */
#define NFLOG_REASON_BLOCKED  "blocked by the sandbox firewall"
#define NFLOG_REASON_OVERFLOW "too many blocked destinations"
#define NFLOG_REASON_OVERRUN  "blocked packets lost: NFLOG socket overrun"

/* --- opening ----------------------------------------------------------- */

static const char *
nflog_advice(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		/* The kernel answers EPERM for both. */
		return " (another socket in this network namespace has the group, "
		       "or no CAP_NET_ADMIN here)";
	case EPROTONOSUPPORT:
	case ENOENT:
	case EOPNOTSUPP:
		return " (the kernel has no nfnetlink_log: CONFIG_NETFILTER_NETLINK_LOG)";
	default:
		return "";
	}
}

static int
nflog_config(struct mnl_socket *nl, uint16_t group, uint32_t seq)
{
	uint64_t buf[256 / sizeof(uint64_t)];
	uint64_t rbuf[1024 / sizeof(uint64_t)];
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	struct nfulnl_msg_config_mode mode = {
	        .copy_range = htonl(NFLOG_COPY_RANGE),
	        .copy_mode = NFULNL_COPY_PACKET,
	};
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	struct nfgenmsg *nfg;
	ssize_t n;
	int ret;

	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = seq;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(group);
	/* Bind and set the mode in one message: the kernel creates the
	 * instance for the bind, then applies the mode to it. A queue
	 * threshold of 1 sends each packet at once instead of batching
	 * them for up to a second. */
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
	mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));

	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -1;
	/* The answer is produced inside sendto; it is already queued even
	 * though the socket is non-blocking. */
	n = mnl_socket_recvfrom(nl, rbuf, sizeof(rbuf));
	if (n < 0)
		return -1;
	ret = mnl_cb_run(rbuf, (size_t)n, seq, mnl_socket_get_portid(nl), NULL, NULL);
	return ret == MNL_CB_ERROR ? -1 : 0;
}

int
nflog_socket(char *err, size_t errlen)
{
	int rcvbuf = NFLOG_RCVBUF;
	int fd = nft_socket(NETLINK_NETFILTER);

	if (fd < 0 || fd_set_nonblock(fd, true) < 0) {
		int saved = errno;

		snprintf(err, errlen, "nflog: opening the netfilter netlink socket: %s%s",
		         strerror(saved), nflog_advice(saved));
		fd_close(&fd);
		errno = saved;
		return -1;
	}
	/* Best effort: a smaller buffer only means an earlier overrun, which
	 * the reader reports. The port id stays with the socket, so the
	 * kernel keeps sending to it wherever the fd goes (SCM_RIGHTS to the
	 * supervisor). */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	return fd;
}

int
nflog_bind(int fd, uint16_t group, char *err, size_t errlen)
{
	struct mnl_socket *nl = nft_nl_wrap(fd);
	int ret, saved = 0;

	if (nl == NULL) {
		saved = errno;
		snprintf(err, errlen, "nflog: using the netlink socket: %s", strerror(saved));
		errno = saved;
		return -1;
	}
	ret = nflog_config(nl, group, (uint32_t)getpid());
	if (ret < 0) {
		saved = errno;
		snprintf(err, errlen, "nflog: binding group %u: %s%s", group, strerror(saved),
		         nflog_advice(saved));
	}
	mnl_socket_close(nl); /* the duplicate */
	/* Only the kernel may send to it: connected to port 0, the socket
	 * refuses unicasts from any other socket of its network namespace,
	 * which would otherwise be forged packet lines. */
	if (ret == 0) {
		struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};

		if (connect(fd, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
			saved = errno;
			snprintf(err, errlen, "nflog: connecting to the kernel: %s",
			         strerror(saved));
			ret = -1;
		}
	}
	errno = saved;
	return ret;
}

int
nflog_open(uint16_t group, char *err, size_t errlen)
{
	int fd = nflog_socket(err, errlen);
	int saved;

	if (fd < 0)
		return -1;
	if (nflog_bind(fd, group, err, errlen) < 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	return fd;
}

/* --- parsing ----------------------------------------------------------- */

struct parse_state {
	void (*fn)(const struct nflog_packet *pkt, void *arg);
	void *arg;
	int count;
};

static int
attr_cb(const struct nlattr *attr, void *data)
{
	const struct nlattr **tb = data;
	uint16_t type = mnl_attr_get_type(attr);

	if (type > NFULA_MAX)
		return MNL_CB_OK;
	if (type == NFULA_PACKET_HDR &&
	    mnl_attr_validate2(attr, MNL_TYPE_UNSPEC, sizeof(struct nfulnl_msg_packet_hdr)) < 0)
		return MNL_CB_ERROR;
	/* The kernel sends the prefix with its NUL. */
	if (type == NFULA_PREFIX && mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
		return MNL_CB_ERROR;
	tb[type] = attr;
	return MNL_CB_OK;
}

static void
set_proto(struct nflog_packet *pkt)
{
	const char *name = NULL;

	switch (pkt->l4proto) {
	case IPPROTO_TCP:
		name = "tcp";
		break;
	case IPPROTO_UDP:
		name = "udp";
		break;
	case IPPROTO_UDPLITE:
		name = "udplite";
		break;
	case IPPROTO_SCTP:
		name = "sctp";
		break;
	case IPPROTO_DCCP:
		name = "dccp";
		break;
	case IPPROTO_ICMP:
		name = "icmp";
		break;
	case IPPROTO_ICMPV6:
		name = "icmpv6";
		break;
	default:
		break;
	}
	if (name != NULL)
		str_copy(pkt->proto, name, sizeof(pkt->proto));
	else
		snprintf(pkt->proto, sizeof(pkt->proto), "raw:%u", pkt->l4proto);
}

static bool
has_ports(uint8_t proto)
{
	return proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_UDPLITE ||
	       proto == IPPROTO_SCTP || proto == IPPROTO_DCCP;
}

/* The destination port sits at bytes 2-3 of every ported L4 header. A
 * header cut off by the snap length simply has no port. */
static void
set_port(struct nflog_packet *pkt, const uint8_t *p, size_t len, size_t l4off, bool first_fragment)
{
	pkt->dport = -1;
	pkt->sport = -1;
	pkt->tcp_seq = -1;
	if (first_fragment && has_ports(pkt->l4proto) && l4off <= len && len - l4off >= 4) {
		pkt->sport = (p[l4off] << 8) | p[l4off + 1];
		pkt->dport = (p[l4off + 2] << 8) | p[l4off + 3];
		if (pkt->l4proto == IPPROTO_TCP && len - l4off >= 8)
			pkt->tcp_seq = (int64_t)((uint32_t)p[l4off + 4] << 24 |
			                         (uint32_t)p[l4off + 5] << 16 |
			                         (uint32_t)p[l4off + 6] << 8 | p[l4off + 7]);
	}
}

static int
parse_ipv4(struct nflog_packet *pkt, const uint8_t *p, size_t len)
{
	size_t ihl;
	uint16_t frag;

	if (len < 20 || (p[0] >> 4) != 4)
		return -1;
	ihl = (size_t)(p[0] & 0x0f) * 4;
	if (ihl < 20 || ihl > len)
		return -1;
	pkt->family = AF_INET;
	pkt->l4proto = p[9];
	if (inet_ntop(AF_INET, p + 16, pkt->dst, sizeof(pkt->dst)) == NULL)
		return -1;
	frag = (uint16_t)((p[6] << 8) | p[7]);
	set_port(pkt, p, len, ihl, (frag & 0x1fff) == 0);
	return 0;
}

static int
parse_ipv6(struct nflog_packet *pkt, const uint8_t *p, size_t len)
{
	size_t off = 40;
	uint8_t next;
	bool first_fragment = true;
	int i;

	if (len < 40 || (p[0] >> 4) != 6)
		return -1;
	pkt->family = AF_INET6;
	if (inet_ntop(AF_INET6, p + 24, pkt->dst, sizeof(pkt->dst)) == NULL)
		return -1;
	next = p[6];
	/* Walk the extension headers the kernel lets through, bounded in
	 * count and by the bytes we have; stop where the snap length ends. */
	for (i = 0; i < NFLOG_MAX_EXTHDRS; i++) {
		size_t hlen;

		if (next != IPPROTO_HOPOPTS && next != IPPROTO_ROUTING && next != IPPROTO_DSTOPTS &&
		    next != IPPROTO_FRAGMENT && next != IPPROTO_AH)
			break;
		if (len - off < 8)
			break;
		if (next == IPPROTO_FRAGMENT) {
			hlen = 8;
			if ((((p[off + 2] << 8) | p[off + 3]) & 0xfff8) != 0)
				first_fragment = false;
		} else if (next == IPPROTO_AH) {
			hlen = ((size_t)p[off + 1] + 2) * 4;
		} else {
			hlen = ((size_t)p[off + 1] + 1) * 8;
		}
		next = p[off];
		if (hlen > len - off) {
			off = len;
			break;
		}
		off += hlen;
	}
	pkt->l4proto = next;
	set_port(pkt, p, len, off, first_fragment);
	return 0;
}

static int
packet_cb(const struct nlmsghdr *nlh, void *data)
{
	struct parse_state *st = data;
	const struct nlattr *tb[NFULA_MAX + 1] = {0};
	const struct nfgenmsg *nfg;
	struct nflog_packet pkt;
	const uint8_t *payload;
	size_t plen;
	int ret;

	if (nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
		return MNL_CB_ERROR;
	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*nfg)))
		return MNL_CB_ERROR;
	nfg = mnl_nlmsg_get_payload(nlh);
	if (mnl_attr_parse(nlh, sizeof(*nfg), attr_cb, tb) < 0)
		return MNL_CB_ERROR;
	if (tb[NFULA_PAYLOAD] == NULL)
		return MNL_CB_ERROR;
	payload = mnl_attr_get_payload(tb[NFULA_PAYLOAD]);
	plen = mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]);

	memset(&pkt, 0, sizeof(pkt));
	/* The family in the header and the IP version in the payload must
	 * agree; anything else is not a packet this ruleset logged. */
	if (nfg->nfgen_family == AF_INET)
		ret = parse_ipv4(&pkt, payload, plen);
	else if (nfg->nfgen_family == AF_INET6)
		ret = parse_ipv6(&pkt, payload, plen);
	else
		ret = -1;
	if (ret < 0)
		return MNL_CB_ERROR;
	set_proto(&pkt);
	if (tb[NFULA_PREFIX] != NULL)
		str_copy(pkt.prefix, mnl_attr_get_str(tb[NFULA_PREFIX]), sizeof(pkt.prefix));
	st->count++;
	if (st->fn != NULL)
		st->fn(&pkt, st->arg);
	return MNL_CB_OK;
}

int
nflog_parse(const void *buf, size_t len, void (*fn)(const struct nflog_packet *pkt, void *arg),
            void *arg)
{
	struct parse_state st = {.fn = fn, .arg = arg, .count = 0};
	const uint8_t *p = buf;
	size_t off, step;
	const struct nlmsghdr *nlh;

	/* Netlink headers are read in place: the buffer must be 4-aligned
	 * (any recv buffer of ours is). */
	if (buf == NULL || len == 0 || len > INT32_MAX || (uintptr_t)buf % 4 != 0)
		return -1;
	/* Walk the framing ourselves: libmnl's mnl_nlmsg_ok() compares the
	 * length as a signed int, so a length of 0xffffffff passes it and
	 * mnl_nlmsg_next() then never advances. A datagram must be whole
	 * messages and nothing else, each with its alignment padding, as the
	 * kernel sends them: libmnl bounds a message's attributes by its
	 * aligned length, so an unpadded last message would let an attribute
	 * reach up to 3 bytes past the datagram. Only packets are expected,
	 * so a control message (NLMSG_ERROR, DONE) is an error here, not
	 * "stop". */
	for (off = 0; off < len; off += step) {
		nlh = (const struct nlmsghdr *)(p + off);
		if (len - off < sizeof(*nlh) || nlh->nlmsg_len < sizeof(*nlh) ||
		    nlh->nlmsg_len > len - off || nlh->nlmsg_type < NLMSG_MIN_TYPE)
			return -1;
		/* Cannot wrap: nlmsg_len <= len - off <= INT32_MAX. */
		step = NLMSG_ALIGN((size_t)nlh->nlmsg_len);
		if (step > len - off)
			return -1;
		if (mnl_cb_run(nlh, nlh->nlmsg_len, 0, 0, packet_cb, &st) != MNL_CB_OK)
			return -1;
	}
	return st.count;
}

/* --- the supervisor's reader -------------------------------------------- */

/* Blocked packets are aggregated per destination (family, protocol,
 * address, port): a sandbox can send hundreds of thousands of packets a
 * second, and one line each filled the disk under the log at ~40 MB/s.
 * The first packet to a destination is logged at once, so a single
 * attempt shows up immediately; later ones are counted, and every window
 * a line carries the count for each destination that had more. The table
 * is bounded; destinations past it only add to one overflow count. So the
 * log gets at most about two lines per table slot per window, whatever
 * the sandbox sends. */
struct nflog_dest {
	char nd_dst[sizeof(((struct nflog_packet *)0)->dst)];
	char nd_proto[sizeof(((struct nflog_packet *)0)->proto)];
	int nd_family;
	int nd_dport;
	int nd_sport;               /* refused SYNs only (one attempt each); else -1 */
	int64_t nd_seq;             /* with it, the SYN's sequence number: its retransmits
	                             * repeat it, a new connection from the same port
	                             * (reused within the window) does not; else -1 */
	enum verdict_reason nd_syn; /* VR_NONE: a blocked packet */
	uint8_t nd_l4proto;
	bool nd_quiet;     /* a whole window passed with no packet */
	uint64_t nd_count; /* packets not yet written in a line */
	uint32_t nd_hash;
	int32_t nd_next; /* bucket chain, index into nr_dests, -1 ends */
};

struct nflog_reader {
	struct event *nr_ev;
	struct event *nr_timer; /* closes the aggregation window */
	int nr_fd;
	struct elog *nr_log; /* borrowed */
	uint64_t nr_bad;     /* datagrams that did not parse */
	struct timeval nr_window;
	uint32_t nr_seed; /* random, so the sandbox cannot aim at one bucket */
	/* Aggregation table: nr_ndests entries used of nr_maxdests, chained
	 * from nr_buckets (nr_nbuckets, a power of two). */
	struct nflog_dest *nr_dests;
	int32_t *nr_buckets;
	size_t nr_ndests, nr_maxdests, nr_nbuckets;
	/* Entries that are refused SYNs (one per source port): at most half
	 * the table, so that a task opening connections to one refused
	 * address from many ports cannot crowd out the destinations of its
	 * other blocked packets. */
	size_t nr_nsyn;
	uint64_t nr_overflow;   /* packets to destinations past the table */
	uint64_t nr_overruns;   /* socket overruns not yet logged */
	bool nr_overrun_logged; /* an overrun line went out this window */
	/* One datagram: the kernel packs messages into skbs of at most a
	 * page-ish size (NFULNL_NLBUFSIZ_DEFAULT); 64 KiB is the netlink
	 * maximum and still never cut. */
	uint64_t nr_buf[65536 / sizeof(uint64_t)];
};

/* FNV-1a over the key, started from the reader's random seed. */
static uint32_t
dest_hash(const struct nflog_reader *r, const struct nflog_packet *pkt, int sport, int64_t seq,
          enum verdict_reason syn)
{
	uint32_t h = 2166136261u ^ r->nr_seed;
	const unsigned char *s = (const unsigned char *)pkt->dst;
	uint32_t extra[6] = {(uint32_t)pkt->family, pkt->l4proto,  (uint32_t)pkt->dport,
	                     (uint32_t)sport,       (uint32_t)seq, (uint32_t)syn};
	const unsigned char *e = (const unsigned char *)extra;

	for (; *s != '\0'; s++)
		h = (h ^ *s) * 16777619u;
	for (size_t i = 0; i < sizeof(extra); i++)
		h = (h ^ e[i]) * 16777619u;
	return h;
}

/* One packet line; packets is the number of blocked packets it stands
 * for (0 for the overrun lines, which count reports the kernel lost). */
static void
nflog_write(struct nflog_reader *r, const char *ip, int port, const char *proto,
            enum verdict_reason why, const char *detail, uint64_t packets)
{
	struct elog_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = "packet";
	ev.ip = ip;
	ev.port = port;
	ev.verdict = "deny";
	ev.reason = verdict_reason_token(why);
	ev.detail = detail;
	ev.proto = proto;
	ev.packets = packets;
	(void)elog_event(r->nr_log, &ev);
}

/* The line for packets that were counted, not itemised: the count is the
 * packets field, and in the reason for people. */
static void
nflog_write_count(struct nflog_reader *r, const struct nflog_dest *d)
{
	char reason[128];

	snprintf(reason, sizeof(reason),
	         NFLOG_REASON_BLOCKED "; %" PRIu64 " more packets since the last line",
	         d->nd_count);
	nflog_write(r, d->nd_dst, d->nd_dport, d->nd_proto, VR_FIREWALL, reason, d->nd_count);
}

/* Which refusal at the SYN a packet is: VR_NONE for any other. Only a
 * TCP packet with ports under one of the refuse chain's prefixes. */
static enum verdict_reason
syn_refusal(const struct nflog_packet *pkt)
{
	if (pkt->l4proto != IPPROTO_TCP || pkt->dport < 0)
		return VR_NONE;
	if (strcmp(pkt->prefix, NFT_REFUSE_PREFIX_NO_RULE) == 0)
		return VR_NO_RULE;
	if (strcmp(pkt->prefix, NFT_REFUSE_PREFIX_GUARD) == 0)
		return VR_GUARD;
	return VR_NONE;
}

/* The line of a connection refused at the SYN, in the words the proxy
 * and the broker use for the same refusal (proxy/, policy/guard.c).
 * Through the log's repeated-event counting, as the proxy's refusals:
 * a loop of connects to one refused destination is one line and counts,
 * not a line per attempt. */
static void
nflog_write_syn(struct nflog_reader *r, const struct nflog_packet *pkt, enum verdict_reason why)
{
	struct sockaddr_storage ss;
	struct elog_event ev;
	char detail[128];

	if (why == VR_GUARD && sockaddr_set(&ss, pkt->family, pkt->dst, 0) > 0)
		snprintf(detail, sizeof(detail), "%s is %s (address guard)", pkt->dst,
		         guard_class_name(guard_classify((struct sockaddr *)&ss)));
	else if (why == VR_GUARD)
		snprintf(detail, sizeof(detail), "%s is refused by the address guard", pkt->dst);
	else
		snprintf(detail, sizeof(detail), "no rule allows address %s port %d", pkt->dst,
		         pkt->dport);
	memset(&ev, 0, sizeof(ev));
	ev.kind = "tcp";
	ev.ip = pkt->dst;
	ev.port = pkt->dport;
	ev.verdict = "deny";
	ev.reason = verdict_reason_token(why);
	ev.detail = detail;
	(void)elog_event_agg(r->nr_log, &ev);
}

static void
nflog_arm(struct nflog_reader *r)
{
	if (!evtimer_pending(r->nr_timer, NULL))
		(void)evtimer_add(r->nr_timer, &r->nr_window);
}

static void
nflog_log_packet(const struct nflog_packet *pkt, void *arg)
{
	struct nflog_reader *r = arg;
	struct nflog_dest *d;
	enum verdict_reason syn = syn_refusal(pkt);
	int sport = syn != VR_NONE ? pkt->sport : -1;
	int64_t seq = syn != VR_NONE ? pkt->tcp_seq : -1;
	uint32_t h = dest_hash(r, pkt, sport, seq, syn);
	int32_t *bucket = &r->nr_buckets[h & (r->nr_nbuckets - 1)];
	int32_t i;

	for (i = *bucket; i >= 0; i = r->nr_dests[i].nd_next) {
		d = &r->nr_dests[i];
		if (d->nd_hash == h && d->nd_family == pkt->family &&
		    d->nd_l4proto == pkt->l4proto && d->nd_dport == pkt->dport &&
		    d->nd_sport == sport && d->nd_seq == seq && d->nd_syn == syn &&
		    strcmp(d->nd_dst, pkt->dst) == 0) {
			d->nd_count++;
			d->nd_quiet = false;
			return;
		}
	}
	if (r->nr_ndests == r->nr_maxdests ||
	    (syn != VR_NONE && 2 * r->nr_nsyn >= r->nr_maxdests)) {
		/* A refused connection is still one: written (and counted by
		 * the log), only its retransmits are no longer told apart. */
		if (syn != VR_NONE) {
			nflog_write_syn(r, pkt, syn);
			return;
		}
		r->nr_overflow++;
		nflog_arm(r);
		return;
	}
	d = &r->nr_dests[r->nr_ndests];
	memset(d, 0, sizeof(*d));
	str_copy(d->nd_dst, pkt->dst, sizeof(d->nd_dst));
	str_copy(d->nd_proto, pkt->proto, sizeof(d->nd_proto));
	d->nd_family = pkt->family;
	d->nd_dport = pkt->dport;
	d->nd_l4proto = pkt->l4proto;
	d->nd_sport = sport;
	d->nd_seq = seq;
	d->nd_syn = syn;
	d->nd_hash = h;
	d->nd_next = *bucket;
	*bucket = (int32_t)r->nr_ndests;
	r->nr_ndests++;
	if (syn != VR_NONE)
		r->nr_nsyn++;
	/* The first packet to a destination is written now. */
	if (syn != VR_NONE)
		nflog_write_syn(r, pkt, syn);
	else
		nflog_write(r, pkt->dst, pkt->dport, pkt->proto, VR_FIREWALL, NFLOG_REASON_BLOCKED,
		            1);
	nflog_arm(r);
}

static void
nflog_log_overrun(struct nflog_reader *r)
{
	if (r->nr_overrun_logged) {
		r->nr_overruns++;
		return;
	}
	r->nr_overrun_logged = true;
	nflog_write(r, NULL, -1, NULL, VR_FIREWALL_OVERRUN, NFLOG_REASON_OVERRUN, 0);
	nflog_arm(r);
}

/* Close the window: one line per destination with counted packets, one
 * for the overflow, one for further overruns. A destination quiet for a
 * whole window is forgotten, so its next packet is again written at once.
 * final: the reader is going away; write everything, keep nothing. */
static void
nflog_flush(struct nflog_reader *r, bool final)
{
	char reason[128];
	size_t i, kept = 0;

	for (i = 0; i < r->nr_ndests; i++) {
		struct nflog_dest *d = &r->nr_dests[i];

		if (d->nd_count > 0) {
			/* A refused SYN's retransmits are the same attempt:
			 * counted to keep it from being new, never a line. */
			if (d->nd_syn == VR_NONE)
				nflog_write_count(r, d);
			d->nd_count = 0;
		} else if (d->nd_quiet) {
			continue;
		} else {
			d->nd_quiet = true;
		}
		if (kept != i)
			r->nr_dests[kept] = *d;
		kept++;
	}
	r->nr_ndests = final ? 0 : kept;
	/* Rebuild the chains over the compacted table. */
	for (i = 0; i < r->nr_nbuckets; i++)
		r->nr_buckets[i] = -1;
	r->nr_nsyn = 0;
	for (i = 0; i < r->nr_ndests; i++) {
		int32_t *bucket = &r->nr_buckets[r->nr_dests[i].nd_hash & (r->nr_nbuckets - 1)];

		r->nr_dests[i].nd_next = *bucket;
		*bucket = (int32_t)i;
		if (r->nr_dests[i].nd_syn != VR_NONE)
			r->nr_nsyn++;
	}
	if (r->nr_overflow > 0) {
		snprintf(reason, sizeof(reason),
		         NFLOG_REASON_OVERFLOW "; %" PRIu64 " packets not itemised",
		         r->nr_overflow);
		nflog_write(r, NULL, -1, NULL, VR_FIREWALL_OVERFLOW, reason, r->nr_overflow);
		r->nr_overflow = 0;
	}
	if (r->nr_overruns > 0) {
		snprintf(reason, sizeof(reason),
		         NFLOG_REASON_OVERRUN "; %" PRIu64 " more times since the last line",
		         r->nr_overruns);
		nflog_write(r, NULL, -1, NULL, VR_FIREWALL_OVERRUN, reason, 0);
		r->nr_overruns = 0;
	}
	r->nr_overrun_logged = false;
	if (!final && r->nr_ndests > 0)
		nflog_arm(r);
}

static void
nflog_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	nflog_flush(arg, false);
}

/* Read up to max datagrams; false when the socket is empty or broken. */
static bool
nflog_drain(struct nflog_reader *r, int max)
{
	ssize_t n;
	int i;

	for (i = 0; i < max; i++) {
		n = recv(r->nr_fd, r->nr_buf, sizeof(r->nr_buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return false;
			if (errno == ENOBUFS) {
				/* The kernel dropped messages; say so in the
				 * egress log, whose promise is every attempt. */
				nflog_log_overrun(r);
				continue;
			}
			log_warn("nflog: reading blocked packets");
			if (r->nr_ev != NULL)
				event_del(r->nr_ev);
			return false;
		}
		if ((size_t)n > sizeof(r->nr_buf) ||
		    nflog_parse(r->nr_buf, (size_t)n, nflog_log_packet, r) < 0) {
			if (r->nr_bad++ == 0)
				log_warnx("nflog: ignoring a malformed NFLOG datagram "
				          "(%zd bytes)",
				          n);
		}
	}
	return true;
}

static void
nflog_read(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)nflog_drain(arg, NFLOG_READS_PER_EVENT);
}

struct nflog_reader *
nflog_reader_new(struct event_base *base, int fd, struct elog *log)
{
	return nflog_reader_new_opts(base, fd, log, NULL);
}

struct nflog_reader *
nflog_reader_new_opts(struct event_base *base, int fd, struct elog *log,
                      const struct nflog_reader_opts *opts)
{
	struct nflog_reader *r;
	unsigned window_ms = NFLOG_AGG_WINDOW_MS;
	size_t i;

	/* As the tables below: only what is read before it is written is
	 * zeroed, so the datagram buffer's 64 KiB are not all touched. */
	r = malloc(sizeof(*r));
	if (r == NULL) {
		log_warn("nflog: reader");
		close(fd);
		return NULL;
	}
	memset(r, 0, offsetof(struct nflog_reader, nr_buf));
	r->nr_fd = fd;
	r->nr_log = log;
	r->nr_maxdests = NFLOG_AGG_MAX_DESTS;
	if (opts != NULL && opts->window_ms > 0)
		window_ms = opts->window_ms;
	if (opts != NULL && opts->max_dests > 0 && opts->max_dests <= NFLOG_AGG_MAX_DESTS_LIMIT)
		r->nr_maxdests = opts->max_dests;
	r->nr_window.tv_sec = window_ms / 1000;
	r->nr_window.tv_usec = (suseconds_t)(window_ms % 1000) * 1000;
	/* Buckets: a power of two at least twice the table, so chains stay
	 * short. */
	for (r->nr_nbuckets = 16; r->nr_nbuckets < 2 * r->nr_maxdests; r->nr_nbuckets *= 2)
		;
	r->nr_seed = arc4random();
	/* Entries are read only below nr_ndests, and every bucket is set
	 * here: no zeroing, so pages are touched only as the table fills. */
	r->nr_dests = reallocarray(NULL, r->nr_maxdests, sizeof(*r->nr_dests));
	r->nr_buckets = reallocarray(NULL, r->nr_nbuckets, sizeof(*r->nr_buckets));
	if (r->nr_dests == NULL || r->nr_buckets == NULL) {
		log_warn("nflog: aggregation table");
		goto fail;
	}
	for (i = 0; i < r->nr_nbuckets; i++)
		r->nr_buckets[i] = -1;
	if (fd_set_nonblock(fd, true) < 0) {
		log_warn("nflog: O_NONBLOCK");
		goto fail;
	}
	r->nr_timer = evtimer_new(base, nflog_tick, r);
	r->nr_ev = event_new(base, fd, EV_READ | EV_PERSIST, nflog_read, r);
	if (r->nr_timer == NULL || r->nr_ev == NULL || event_add(r->nr_ev, NULL) < 0) {
		log_warnx("nflog: cannot add the read event");
		goto fail;
	}
	return r;
fail:
	nflog_reader_free(r);
	return NULL;
}

void
nflog_reader_free(struct nflog_reader *r)
{
	int i;

	if (r == NULL)
		return;
	/* Blocked packets still queued and counts not yet written go to the
	 * log now: the task is ending and the log promises every attempt.
	 * Bounded: the sandbox is gone by now, and the queue is at most the
	 * socket's receive buffer. */
	if (r->nr_ev != NULL && r->nr_dests != NULL) {
		for (i = 0; i < NFLOG_FREE_MAX_READS / NFLOG_READS_PER_EVENT; i++)
			if (!nflog_drain(r, NFLOG_READS_PER_EVENT))
				break;
		nflog_flush(r, true);
	}
	if (r->nr_timer != NULL)
		event_free(r->nr_timer);
	if (r->nr_ev != NULL)
		event_free(r->nr_ev);
	fd_close(&r->nr_fd);
	free(r->nr_dests);
	free(r->nr_buckets);
	free(r);
}
