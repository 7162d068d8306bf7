/* Blocked packets, from the filter chain's "log group N" rule through
 * NFNETLINK_LOG to the egress log.
 *
 * The socket is opened and bound inside the sandbox's network namespace
 * (the NFLOG instance belongs to that namespace and to the socket's port
 * id), then passed to the supervisor, which reads it in its event loop.
 * Every byte read here comes from packets the sandboxed process built, so
 * the parser is pure, bounded and fuzzed (tests/fuzz/fuzz_nflog.c). */
#include "nft/nflog.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>

#include <event2/event.h>
#include <libmnl/libmnl.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/elog.h"

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
nflog_open(uint16_t group, char *err, size_t errlen)
{
	struct mnl_socket *nl;
	int rcvbuf = NFLOG_RCVBUF;
	int fd, saved;

	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (nl == NULL) {
		saved = errno;
		snprintf(err, errlen,
		         "nflog: opening the netfilter netlink socket: "
		         "%s%s",
		         strerror(saved), nflog_advice(saved));
		return -1;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		saved = errno;
		snprintf(err, errlen, "nflog: binding the netlink socket: %s", strerror(saved));
		goto fail;
	}
	fd = mnl_socket_get_fd(nl);
	/* Best effort: a smaller buffer only means an earlier overrun, which
	 * the reader reports. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (nflog_config(nl, group, (uint32_t)getpid()) < 0) {
		saved = errno;
		snprintf(err, errlen, "nflog: binding group %u: %s%s", group, strerror(saved),
		         nflog_advice(saved));
		goto fail;
	}
	/* Keep the fd, free libmnl's wrapper around it. The port id stays
	 * with the socket, so the kernel keeps sending to it wherever the fd
	 * goes (SCM_RIGHTS to the supervisor). */
	fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		saved = errno;
		snprintf(err, errlen, "nflog: dup: %s", strerror(saved));
		goto fail;
	}
	mnl_socket_close(nl);
	return fd;
fail:
	mnl_socket_close(nl);
	errno = saved;
	return -1;
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
	if (first_fragment && has_ports(pkt->l4proto) && l4off <= len && len - l4off >= 4)
		pkt->dport = (p[l4off + 2] << 8) | p[l4off + 3];
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
	 * messages and nothing else; the last may lack its alignment padding.
	 * Only packets are expected, so a control message (NLMSG_ERROR,
	 * DONE) is an error here, not "stop". */
	for (off = 0; off < len; off += step) {
		nlh = (const struct nlmsghdr *)(p + off);
		if (len - off < sizeof(*nlh) || nlh->nlmsg_len < sizeof(*nlh) ||
		    nlh->nlmsg_len > len - off || nlh->nlmsg_type < NLMSG_MIN_TYPE)
			return -1;
		if (mnl_cb_run(nlh, nlh->nlmsg_len, 0, 0, packet_cb, &st) != MNL_CB_OK)
			return -1;
		step = NLMSG_ALIGN(nlh->nlmsg_len);
		if (step > len - off)
			step = len - off;
	}
	return st.count;
}

/* --- the supervisor's reader -------------------------------------------- */

struct nflog_reader {
	struct event *nr_ev;
	int nr_fd;
	struct elog *nr_log; /* borrowed */
	uint64_t nr_bad;     /* datagrams that did not parse */
	/* One datagram: the kernel packs messages into skbs of at most a
	 * page-ish size (NFULNL_NLBUFSIZ_DEFAULT); 64 KiB is the netlink
	 * maximum and still never cut. */
	uint64_t nr_buf[65536 / sizeof(uint64_t)];
};

static void
nflog_log_packet(const struct nflog_packet *pkt, void *arg)
{
	struct nflog_reader *r = arg;
	struct elog_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = "packet";
	ev.ip = pkt->dst;
	ev.port = pkt->dport;
	ev.verdict = "deny";
	ev.reason = "blocked by the sandbox firewall";
	ev.proto = pkt->proto;
	(void)elog_event(r->nr_log, &ev);
}

static void
nflog_log_overrun(struct nflog_reader *r)
{
	struct elog_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.kind = "packet";
	ev.port = -1;
	ev.verdict = "deny";
	ev.reason = "blocked packets lost: NFLOG socket overrun";
	(void)elog_event(r->nr_log, &ev);
}

static void
nflog_read(evutil_socket_t fd, short what, void *arg)
{
	struct nflog_reader *r = arg;
	ssize_t n;
	int i;

	(void)what;
	for (i = 0; i < NFLOG_READS_PER_EVENT; i++) {
		n = recv(fd, r->nr_buf, sizeof(r->nr_buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == ENOBUFS) {
				/* The kernel dropped messages; say so in the
				 * egress log, whose promise is every attempt. */
				nflog_log_overrun(r);
				continue;
			}
			log_warn("nflog: reading blocked packets");
			event_del(r->nr_ev);
			return;
		}
		if ((size_t)n > sizeof(r->nr_buf) ||
		    nflog_parse(r->nr_buf, (size_t)n, nflog_log_packet, r) < 0) {
			if (r->nr_bad++ == 0)
				log_warnx("nflog: ignoring a malformed NFLOG datagram "
				          "(%zd bytes)",
				          n);
		}
	}
}

struct nflog_reader *
nflog_reader_new(struct event_base *base, int fd, struct elog *log)
{
	struct nflog_reader *r;

	r = calloc(1, sizeof(*r));
	if (r == NULL) {
		log_warn("nflog: reader");
		close(fd);
		return NULL;
	}
	r->nr_fd = fd;
	r->nr_log = log;
	if (fd_set_nonblock(fd, true) < 0) {
		log_warn("nflog: O_NONBLOCK");
		goto fail;
	}
	r->nr_ev = event_new(base, fd, EV_READ | EV_PERSIST, nflog_read, r);
	if (r->nr_ev == NULL || event_add(r->nr_ev, NULL) < 0) {
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
	if (r == NULL)
		return;
	if (r->nr_ev != NULL)
		event_free(r->nr_ev);
	fd_close(&r->nr_fd);
	free(r);
}
