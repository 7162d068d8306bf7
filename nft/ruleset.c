/* The sandbox's nftables ruleset (DESIGN.md, "Network inside the sandbox").
 *
 * What the kernel ends up with, in nft syntax:
 *
 *   table inet airlock {
 *     set syn_open_ports { type inet_service; flags interval; }   (refuse)
 *     set syn_guard4 { type ipv4_addr; flags interval; }           (refuse)
 *     set syn_guard6 { type ipv6_addr; flags interval; }           (refuse)
 *     chain syn_output {                                           (refuse)
 *       type filter hook output priority -150; policy accept;
 *       ip daddr 127.0.0.0/8 accept
 *       ip6 daddr ::1 accept
 *       meta l4proto != tcp accept
 *       tcp flags & (fin|syn|rst|ack) != syn accept
 *       tcp dport 53 accept
 *       tcp dport != @syn_open_ports log prefix "airlock-syn no-rule"
 *           group NFLOG_GROUP snaplen 128 reject with tcp reset
 *       ip daddr @syn_guard4 log prefix "airlock-syn address-guard" ...
 *       ip6 daddr @syn_guard6 log prefix "airlock-syn address-guard" ...
 *     }
 *     chain nat_output {
 *       type nat hook output priority -100; policy accept;
 *       ip daddr 127.0.0.0/8 accept
 *       ip6 daddr ::1 accept
 *       udp dport 53 redirect to :DNS_PORT
 *       tcp dport 53 redirect to :DNS_PORT
 *       meta l4proto tcp redirect to :TPROXY_PORT
 *     }
 *     chain filter_output {
 *       type filter hook output priority 0; policy drop;
 *       ip daddr 127.0.0.0/8 accept
 *       ip6 daddr ::1 accept
 *       ct state established,related accept
 *       log group NFLOG_GROUP snaplen 128
 *       meta l4proto tcp reject with tcp reset
 *       reject with icmpx admin-prohibited
 *     }
 *   }
 *
 * In pod mode (nft_params.pod: airlock pod-init) the output chains start
 * with "meta skuid POD_UID accept", filter_output accepts the neighbour
 * discovery the kernel sends right after the loopback rules,
 *
 *       meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type 133-136 accept
 *       meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type 143 accept
 *
 * (router and neighbour solicitations and advertisements, MLDv2 reports;
 * unprivileged processes cannot send those: ping sockets send echo
 * requests only), and a chain for what comes in:
 *
 *     chain filter_input {
 *       type filter hook input priority 0; policy drop;
 *       meta iiftype loopback accept
 *       ct state established,related accept
 *       meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type 133-137 accept
 *       log group NFLOG_GROUP snaplen 128
 *     }
 *
 * since the pod's interface is real: without it anyone who can reach the
 * pod could open a connection to a listener of the agent's and take
 * data out in the replies, which filter_output accepts as established.
 *
 * syn_output and its sets exist only when the caller gives the refusals
 * at the SYN (nft_params.refuse, nft/refuse.h says which); each of its
 * refusing rules only when it has something to refuse. It runs before
 * nat (-150 < -100), on the original destination, where reject is valid
 * (not in a nat chain); its accept only ends this chain, so what it lets
 * by still meets nat_output and filter_output. Only a bare SYN is
 * judged: the resets, the SYN-ACKs of the listeners and everything of an
 * established connection pass.
 *
 * The filter chain runs after nat (priority 0 > -100), so a redirected
 * packet already has a loopback destination when it is filtered. Replies
 * from the listeners to the sandboxed client carry the client's source
 * address (198.18.0.1) as destination; conntrack knows them as established.
 *
 * No input or forward chain: the sandbox has no interface but lo, so every
 * packet it receives was sent by itself and already passed filter_output
 * (or is the kernel's own reply/reject to such a packet), and nothing is
 * ever forwarded (one interface, forwarding off in a new namespace). An
 * input chain would filter the same packets twice.
 *
 * The table is created with NLM_F_EXCL: the ruleset goes into a fresh
 * namespace once, and a second apply fails with EEXIST instead of adding
 * the rules twice. (Replacing in one transaction - create, delete, create -
 * was measured: the delete makes the commit wait for an RCU grace period,
 * 11 ms instead of 0.14 ms on the 2-core test machine.) */
#include "nft/nft.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <linux/if_arp.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_conntrack_common.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <netinet/in.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include "common/netconst.h"
#include "common/util.h"
#include "nft/nlutil.h"
#include "nft/refuse.h"

#define NAT_CHAIN    "nat_output"
#define FILTER_CHAIN "filter_output"
#define NAT_PRIO     (-100)
#define FILTER_PRIO  0
#define SYN_CHAIN    "syn_output"
#define INPUT_CHAIN  "filter_input"
#define SYN_PRIO     (-150)
#define SET_PORTS    "syn_open_ports"
#define SET_GUARD4   "syn_guard4"
#define SET_GUARD6   "syn_guard6"
/* The sets' ids in the batch, for the rules that look them up. */
#define SET_ID_PORTS  1
#define SET_ID_GUARD4 2
#define SET_ID_GUARD6 3
/* nft's datatype numbers for the set keys (nft list shows the types). */
#define NFT_TYPE_IPADDR       7
#define NFT_TYPE_IP6ADDR      8
#define NFT_TYPE_INET_SERVICE 13
/* Set elements per message: each is at most about 40 bytes, so a message
 * stays far below MSG_RESERVE. */
#define ELEMS_PER_MSG 16
/* Bytes of each blocked packet copied to NFLOG: enough for an IPv6 header,
 * a few extension headers and the L4 ports, never the payload. */
#define NFLOG_SNAPLEN 128

/* Every message built here is far below this (the largest, a rule with
 * eight expressions or ELEMS_PER_MSG set elements, is about 700 bytes; the
 * unit test checks). The batch is cut
 * off this much before the end of the caller's buffer, because libnftnl
 * writes a message before libmnl can say it went past the limit. */
#define MSG_RESERVE 1024
/* Messages in one batch, for the per-message labels of nft_ruleset_apply. */
#define MAX_MSGS 96

struct rs_build {
	struct mnl_nlmsg_batch *b;
	uint32_t seq;
	uint32_t first_seq;
	/* What each message does, for error messages; NULL when not wanted. */
	char (*labels)[80];
};

/* --- expressions ------------------------------------------------------ */

static struct nftnl_expr *
expr_new(struct nftnl_rule *r, const char *name)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);

	if (e != NULL)
		nftnl_rule_add_expr(r, e);
	return e;
}

static int
add_meta(struct nftnl_rule *r, uint32_t key)
{
	struct nftnl_expr *e = expr_new(r, "meta");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
	nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, NFT_REG_1);
	return 0;
}

static int
add_cmp(struct nftnl_rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = expr_new(r, "cmp");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
	nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	return 0;
}

static int
add_payload(struct nftnl_rule *r, uint32_t base, uint32_t offset, uint32_t len)
{
	struct nftnl_expr *e = expr_new(r, "payload");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, offset);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
	nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
	return 0;
}

static int
add_verdict(struct nftnl_rule *r, int verdict)
{
	struct nftnl_expr *e = expr_new(r, "immediate");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	return 0;
}

/* redirect to :port (the address becomes the loopback one of the family). */
static int
add_redirect(struct nftnl_rule *r, uint16_t port)
{
	struct nftnl_expr *e = expr_new(r, "immediate");
	uint16_t be = htons(port);

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_1);
	nftnl_expr_set(e, NFTNL_EXPR_IMM_DATA, &be, sizeof(be));
	e = expr_new(r, "redir");
	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_REG_PROTO_MIN, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_REDIR_FLAGS, NF_NAT_RANGE_PROTO_SPECIFIED);
	return 0;
}

static int
match_l4proto(struct nftnl_rule *r, uint8_t proto)
{
	if (add_meta(r, NFT_META_L4PROTO) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_EQ, &proto, sizeof(proto));
}

/* ip daddr 127.0.0.0/8: the first byte of the destination is 127. */
static int
match_loopback_v4(struct nftnl_rule *r)
{
	uint8_t nfproto = NFPROTO_IPV4;
	uint8_t net = 127;

	if (add_meta(r, NFT_META_NFPROTO) < 0 ||
	    add_cmp(r, NFT_CMP_EQ, &nfproto, sizeof(nfproto)) < 0 ||
	    add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 16, 1) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_EQ, &net, sizeof(net));
}

static int
match_loopback_v6(struct nftnl_rule *r)
{
	uint8_t nfproto = NFPROTO_IPV6;

	if (add_meta(r, NFT_META_NFPROTO) < 0 ||
	    add_cmp(r, NFT_CMP_EQ, &nfproto, sizeof(nfproto)) < 0 ||
	    add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, 24, 16) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_EQ, &in6addr_loopback, sizeof(in6addr_loopback));
}

static int
match_dport(struct nftnl_rule *r, uint8_t proto, uint16_t port)
{
	uint16_t be = htons(port);

	if (match_l4proto(r, proto) < 0 ||
	    add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, sizeof(be)) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_EQ, &be, sizeof(be));
}

/* Register 1 (len bytes, at most 4) & mask != val. */
static int
match_masked_neq(struct nftnl_rule *r, const void *mask, const void *val, uint32_t len)
{
	static const uint8_t zero[4];
	struct nftnl_expr *e = expr_new(r, "bitwise");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
	nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
	nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
	return add_cmp(r, NFT_CMP_NEQ, val, len);
}

/* meta skuid UID: the sending socket's owner (none for the kernel's own
 * packets, which never match). */
static int
match_skuid(struct nftnl_rule *r, uint32_t uid)
{
	if (add_meta(r, NFT_META_SKUID) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_EQ, &uid, sizeof(uid));
}

/* meta nfproto ipv6 meta l4proto ipv6-icmp icmpv6 type lo-hi. */
static int
match_icmpv6_types(struct nftnl_rule *r, uint8_t lo, uint8_t hi)
{
	uint8_t nfproto = NFPROTO_IPV6;

	if (add_meta(r, NFT_META_NFPROTO) < 0 ||
	    add_cmp(r, NFT_CMP_EQ, &nfproto, sizeof(nfproto)) < 0 ||
	    match_l4proto(r, IPPROTO_ICMPV6) < 0 ||
	    add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 0, 1) < 0)
		return -1;
	if (lo == hi)
		return add_cmp(r, NFT_CMP_EQ, &lo, 1);
	if (add_cmp(r, NFT_CMP_GTE, &lo, 1) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_LTE, &hi, 1);
}

/* meta iiftype loopback. */
static int
match_iif_loopback(struct nftnl_rule *r)
{
	uint16_t type = ARPHRD_LOOPBACK;

	if (add_meta(r, NFT_META_IIFTYPE) < 0)
		return -1;
	return add_cmp(r, NFT_CMP_EQ, &type, sizeof(type));
}

/* ct state established,related: (state & mask) != 0. */
static int
match_ct_established(struct nftnl_rule *r)
{
	uint32_t mask = NF_CT_STATE_BIT(IP_CT_ESTABLISHED) | NF_CT_STATE_BIT(IP_CT_RELATED);
	uint32_t zero = 0;
	struct nftnl_expr *e = expr_new(r, "ct");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_KEY, NFT_CT_STATE);
	nftnl_expr_set_u32(e, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	return match_masked_neq(r, &mask, &zero, sizeof(mask));
}

/* log [prefix PREFIX] group G snaplen 128; prefix NULL for none. */
static int
add_log(struct nftnl_rule *r, uint16_t group, const char *prefix)
{
	struct nftnl_expr *e = expr_new(r, "log");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, NFLOG_SNAPLEN);
	if (prefix != NULL)
		nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
	return 0;
}

/* Register 1 in the set (or not in it: inv). */
static int
add_lookup(struct nftnl_rule *r, const char *set, uint32_t id, bool inv)
{
	struct nftnl_expr *e = expr_new(r, "lookup");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
	nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, id);
	if (inv)
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, NFT_LOOKUP_F_INV);
	return 0;
}

/* tcp flags & (fin|syn|rst|ack) != syn: anything but a bare SYN. */
static int
match_not_bare_syn(struct nftnl_rule *r)
{
	uint8_t mask = 0x17, syn = 0x02; /* FIN 01, SYN 02, RST 04, ACK 10 */

	if (add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 13, 1) < 0)
		return -1;
	return match_masked_neq(r, &mask, &syn, sizeof(mask));
}

/* meta nfproto FAMILY, then the destination address (len bytes at off)
 * in register 1. */
static int
load_daddr(struct nftnl_rule *r, uint8_t nfproto, uint32_t off, uint32_t len)
{
	if (add_meta(r, NFT_META_NFPROTO) < 0 ||
	    add_cmp(r, NFT_CMP_EQ, &nfproto, sizeof(nfproto)) < 0)
		return -1;
	return add_payload(r, NFT_PAYLOAD_NETWORK_HEADER, off, len);
}

static int
add_reject(struct nftnl_rule *r, uint32_t type, uint8_t code)
{
	struct nftnl_expr *e = expr_new(r, "reject");

	if (e == NULL)
		return -1;
	nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, type);
	nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, code);
	return 0;
}

/* --- the rules --------------------------------------------------------- */

enum rule_kind {
	R_POD_EXEMPT,
	R_POD_ND_OUT,
	R_POD_MLD_OUT,
	R_POD_IN_LOOPBACK,
	R_POD_IN_ND,
	R_LOOPBACK_V4,
	R_LOOPBACK_V6,
	R_DNS_UDP,
	R_DNS_TCP,
	R_TCP_TPROXY,
	R_ESTABLISHED,
	R_LOG,
	R_REJECT_TCP,
	R_REJECT_OTHER,
	R_SYN_NOT_TCP,
	R_SYN_NOT_SYN,
	R_SYN_DNS,
	R_SYN_PORTS,
	R_SYN_GUARD4,
	R_SYN_GUARD6,
};

struct rule_spec {
	const char *chain;
	enum rule_kind kind;
	const char *what;
};

static const struct rule_spec rules[] = {
        {NAT_CHAIN, R_POD_EXEMPT, "meta skuid (the proxy's) accept"},
        {NAT_CHAIN, R_LOOPBACK_V4, "ip daddr 127.0.0.0/8 accept"},
        {NAT_CHAIN, R_LOOPBACK_V6, "ip6 daddr ::1 accept"},
        {NAT_CHAIN, R_DNS_UDP, "udp dport 53 redirect"},
        {NAT_CHAIN, R_DNS_TCP, "tcp dport 53 redirect"},
        {NAT_CHAIN, R_TCP_TPROXY, "tcp redirect to the transparent proxy"},
        {FILTER_CHAIN, R_POD_EXEMPT, "meta skuid (the proxy's) accept"},
        {FILTER_CHAIN, R_LOOPBACK_V4, "ip daddr 127.0.0.0/8 accept"},
        {FILTER_CHAIN, R_LOOPBACK_V6, "ip6 daddr ::1 accept"},
        {FILTER_CHAIN, R_POD_ND_OUT, "icmpv6 type 133-136 accept"},
        {FILTER_CHAIN, R_POD_MLD_OUT, "icmpv6 type mld2-listener-report accept"},
        {FILTER_CHAIN, R_ESTABLISHED, "ct state established,related accept"},
        {FILTER_CHAIN, R_LOG, "log group (NFLOG)"},
        {FILTER_CHAIN, R_REJECT_TCP, "tcp reject with tcp reset"},
        {FILTER_CHAIN, R_REJECT_OTHER, "reject with icmpx admin-prohibited"},
        {SYN_CHAIN, R_LOOPBACK_V4, "ip daddr 127.0.0.0/8 accept"},
        {SYN_CHAIN, R_LOOPBACK_V6, "ip6 daddr ::1 accept"},
        {SYN_CHAIN, R_SYN_NOT_TCP, "meta l4proto != tcp accept"},
        {SYN_CHAIN, R_SYN_NOT_SYN, "tcp flags != syn accept"},
        {SYN_CHAIN, R_SYN_DNS, "tcp dport 53 accept"},
        {SYN_CHAIN, R_SYN_PORTS, "tcp dport != @" SET_PORTS " reject"},
        {SYN_CHAIN, R_SYN_GUARD4, "ip daddr @" SET_GUARD4 " reject"},
        {SYN_CHAIN, R_SYN_GUARD6, "ip6 daddr @" SET_GUARD6 " reject"},
        {INPUT_CHAIN, R_POD_IN_LOOPBACK, "meta iiftype loopback accept"},
        {INPUT_CHAIN, R_ESTABLISHED, "ct state established,related accept"},
        {INPUT_CHAIN, R_POD_IN_ND, "icmpv6 type 133-137 accept"},
        {INPUT_CHAIN, R_LOG, "log group (NFLOG)"},
};

/* Whether the ruleset for p holds the rule: the refuse chain's only with
 * refusals, and each refusing rule only with something to refuse. */
static bool
rule_present(const struct rule_spec *spec, const struct nft_params *p)
{
	const struct nft_refuse *rf = p->refuse;

	if (strcmp(spec->chain, INPUT_CHAIN) == 0)
		return p->pod;
	switch (spec->kind) {
	case R_POD_EXEMPT:
	case R_POD_ND_OUT:
	case R_POD_MLD_OUT:
		return p->pod;
	default:
		break;
	}
	if (strcmp(spec->chain, SYN_CHAIN) != 0)
		return true;
	if (rf == NULL)
		return false;
	switch (spec->kind) {
	case R_SYN_PORTS:
		return rf->ports;
	case R_SYN_GUARD4:
		return rf->n_guard4 > 0;
	case R_SYN_GUARD6:
		return rf->n_guard6 > 0;
	default:
		return true;
	}
}

/* The NFLOG line of a refusing rule, then the reset. */
static int
refuse_with(struct nftnl_rule *r, const struct nft_params *p, const char *prefix)
{
	if (add_log(r, p->nflog_group, prefix) < 0)
		return -1;
	return add_reject(r, NFT_REJECT_TCP_RST, 0);
}

static int
rule_exprs(struct nftnl_rule *r, enum rule_kind kind, const struct nft_params *p)
{
	switch (kind) {
	case R_POD_EXEMPT:
		return match_skuid(r, p->pod_exempt_uid) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_POD_ND_OUT:
		return match_icmpv6_types(r, 133, 136) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_POD_MLD_OUT:
		return match_icmpv6_types(r, 143, 143) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_POD_IN_LOOPBACK:
		return match_iif_loopback(r) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_POD_IN_ND:
		return match_icmpv6_types(r, 133, 137) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_LOOPBACK_V4:
		return match_loopback_v4(r) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_LOOPBACK_V6:
		return match_loopback_v6(r) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_DNS_UDP:
		return match_dport(r, IPPROTO_UDP, 53) < 0 ? -1 : add_redirect(r, p->dns_port);
	case R_DNS_TCP:
		return match_dport(r, IPPROTO_TCP, 53) < 0 ? -1 : add_redirect(r, p->dns_port);
	case R_TCP_TPROXY:
		return match_l4proto(r, IPPROTO_TCP) < 0 ? -1 : add_redirect(r, p->tproxy_port);
	case R_ESTABLISHED:
		return match_ct_established(r) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_LOG:
		return add_log(r, p->nflog_group, NULL);
	case R_REJECT_TCP:
		return match_l4proto(r, IPPROTO_TCP) < 0 ? -1
		                                         : add_reject(r, NFT_REJECT_TCP_RST, 0);
	case R_REJECT_OTHER:
		return add_reject(r, NFT_REJECT_ICMPX_UNREACH, NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
	case R_SYN_NOT_TCP: {
		uint8_t tcp = IPPROTO_TCP;

		if (add_meta(r, NFT_META_L4PROTO) < 0 || add_cmp(r, NFT_CMP_NEQ, &tcp, 1) < 0)
			return -1;
		return add_verdict(r, NF_ACCEPT);
	}
	case R_SYN_NOT_SYN:
		/* The l4proto match is redundant (R_SYN_NOT_TCP) but lets nft
		 * list show "tcp flags" and "tcp dport" for people. */
		if (match_l4proto(r, IPPROTO_TCP) < 0 || match_not_bare_syn(r) < 0)
			return -1;
		return add_verdict(r, NF_ACCEPT);
	case R_SYN_DNS:
		return match_dport(r, IPPROTO_TCP, 53) < 0 ? -1 : add_verdict(r, NF_ACCEPT);
	case R_SYN_PORTS:
		if (match_l4proto(r, IPPROTO_TCP) < 0 ||
		    add_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2) < 0 ||
		    add_lookup(r, SET_PORTS, SET_ID_PORTS, true) < 0)
			return -1;
		return refuse_with(r, p, NFT_REFUSE_PREFIX_NO_RULE);
	case R_SYN_GUARD4:
		if (load_daddr(r, NFPROTO_IPV4, 16, 4) < 0 ||
		    add_lookup(r, SET_GUARD4, SET_ID_GUARD4, false) < 0)
			return -1;
		return refuse_with(r, p, NFT_REFUSE_PREFIX_GUARD);
	case R_SYN_GUARD6:
		if (load_daddr(r, NFPROTO_IPV6, 24, 16) < 0 ||
		    add_lookup(r, SET_GUARD6, SET_ID_GUARD6, false) < 0)
			return -1;
		return refuse_with(r, p, NFT_REFUSE_PREFIX_GUARD);
	}
	return -1;
}

/* --- batch building ---------------------------------------------------- */

/* Name the message being built: the concatenation of a, b and c. */
static void
label(struct rs_build *bd, const char *a, const char *b, const char *c)
{
	uint32_t i = bd->seq - bd->first_seq;

	if (bd->labels != NULL && i < MAX_MSGS)
		snprintf(bd->labels[i], sizeof(bd->labels[i]), "%s%s%s", a, b, c);
}

/* Close the message just written; false when the batch is past its limit. */
static bool
next_msg(struct rs_build *bd)
{
	bd->seq++;
	return mnl_nlmsg_batch_next(bd->b);
}

static int
put_table(struct rs_build *bd, uint16_t type, uint16_t flags)
{
	struct nftnl_table *t = nftnl_table_alloc();
	struct nlmsghdr *nlh;

	if (t == NULL)
		return -1;
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, AIRLOCK_NFT_TABLE);
	nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bd->b), type, NFPROTO_INET, flags,
	                            bd->seq);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	label(bd, "creating table inet ", AIRLOCK_NFT_TABLE, "");
	return next_msg(bd) ? 0 : -1;
}

static int
put_chain(struct rs_build *bd, const char *name, const char *type, uint32_t hook, int prio,
          uint32_t policy)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	struct nlmsghdr *nlh;

	if (c == NULL)
		return -1;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, AIRLOCK_NFT_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, hook);
	nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, policy);
	nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bd->b), NFT_MSG_NEWCHAIN, NFPROTO_INET,
	                            NLM_F_CREATE, bd->seq);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	nftnl_chain_free(c);
	label(bd, "creating chain ", name, "");
	return next_msg(bd) ? 0 : -1;
}

/* One interval set of the refuse chain, then its elements: for each range
 * an element at its start and an interval-end one just past its end (none
 * when the range runs to the top of the key space). lo and hi point at
 * n ranges of key_len bytes each, stride bytes apart. */
static int
put_set(struct rs_build *bd, const char *name, uint32_t id, uint32_t key_type, uint32_t key_len,
        const uint8_t *lo, const uint8_t *hi, size_t stride, size_t n)
{
	struct nftnl_set *s = nftnl_set_alloc();
	struct nlmsghdr *nlh;
	size_t i = 0;
	int ret = -1;

	if (s == NULL)
		return -1;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, AIRLOCK_NFT_TABLE);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	nftnl_set_set_u32(s, NFTNL_SET_ID, id);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, key_type);
	nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len);
	nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL);
	nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bd->b), NFT_MSG_NEWSET, NFPROTO_INET,
	                            NLM_F_CREATE, bd->seq);
	nftnl_set_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	s = NULL;
	label(bd, "creating set ", name, "");
	if (!next_msg(bd))
		return -1;

	while (i < n) {
		size_t in_msg = 0;

		s = nftnl_set_alloc();
		if (s == NULL)
			return -1;
		nftnl_set_set_str(s, NFTNL_SET_TABLE, AIRLOCK_NFT_TABLE);
		nftnl_set_set_str(s, NFTNL_SET_NAME, name);
		nftnl_set_set_u32(s, NFTNL_SET_ID, id);
		for (; i < n && in_msg + 2 <= ELEMS_PER_MSG; i++) {
			uint8_t end[16];
			struct nftnl_set_elem *e;
			int k;

			e = nftnl_set_elem_alloc();
			if (e == NULL)
				goto out;
			nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, lo + i * stride, key_len);
			nftnl_set_elem_add(s, e);
			in_msg++;
			/* end = hi + 1, big-endian; no end past the top. */
			memcpy(end, hi + i * stride, key_len);
			for (k = (int)key_len - 1; k >= 0; k--)
				if (++end[k] != 0)
					break;
			if (k < 0)
				continue;
			e = nftnl_set_elem_alloc();
			if (e == NULL)
				goto out;
			nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, end, key_len);
			nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
			nftnl_set_elem_add(s, e);
			in_msg++;
		}
		nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bd->b), NFT_MSG_NEWSETELEM,
		                            NFPROTO_INET, NLM_F_CREATE, bd->seq);
		nftnl_set_elems_nlmsg_build_payload(nlh, s);
		nftnl_set_free(s);
		s = NULL;
		label(bd, "adding elements to set ", name, "");
		if (!next_msg(bd))
			return -1;
	}
	ret = 0;
out:
	if (s != NULL) /* nftnl_set_free does not take NULL */
		nftnl_set_free(s);
	return ret;
}

/* The refuse chain's sets, those its rules use. */
static int
put_sets(struct rs_build *bd, const struct nft_refuse *rf)
{
	uint8_t lo[NFT_REFUSE_MAX_PORTS][2], hi[NFT_REFUSE_MAX_PORTS][2];

	if (rf->ports) {
		for (size_t i = 0; i < rf->n_open; i++) {
			uint16_t l = htons(rf->open[i].lo), h = htons(rf->open[i].hi);

			memcpy(lo[i], &l, 2);
			memcpy(hi[i], &h, 2);
		}
		if (put_set(bd, SET_PORTS, SET_ID_PORTS, NFT_TYPE_INET_SERVICE, 2, lo[0], hi[0], 2,
		            rf->n_open) < 0)
			return -1;
	}
	if (rf->n_guard4 > 0 &&
	    put_set(bd, SET_GUARD4, SET_ID_GUARD4, NFT_TYPE_IPADDR, 4, rf->guard4[0].lo,
	            rf->guard4[0].hi, sizeof(rf->guard4[0]), rf->n_guard4) < 0)
		return -1;
	if (rf->n_guard6 > 0 &&
	    put_set(bd, SET_GUARD6, SET_ID_GUARD6, NFT_TYPE_IP6ADDR, 16, rf->guard6[0].lo,
	            rf->guard6[0].hi, sizeof(rf->guard6[0]), rf->n_guard6) < 0)
		return -1;
	return 0;
}

static int
put_rule(struct rs_build *bd, const struct rule_spec *spec, const struct nft_params *p,
         uint16_t extra_flags)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	struct nlmsghdr *nlh;
	int ret = -1;

	if (r == NULL)
		return -1;
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, AIRLOCK_NFT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, spec->chain);
	if (rule_exprs(r, spec->kind, p) < 0)
		goto out;
	nlh = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bd->b), NFT_MSG_NEWRULE, NFPROTO_INET,
	                            NLM_F_APPEND | NLM_F_CREATE | extra_flags, bd->seq);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	label(bd, spec->chain, ": adding rule ", spec->what);
	ret = next_msg(bd) ? 0 : -1;
out:
	nftnl_rule_free(r);
	return ret;
}

/* The whole batch. labels (MAX_MSGS entries) may be NULL; *nmsgs (may
 * be NULL) gets the number of messages, begin and end included. */
static long
build(const struct nft_params *p, void *buf, size_t buflen, uint32_t seq, char (*labels)[80],
      uint32_t *nmsgs)
{
	struct rs_build bd = {.seq = seq, .first_seq = seq, .labels = labels};
	long len = -1;
	size_t i, last = 0;

	if (buflen < 2 * MSG_RESERVE)
		return -1;
	bd.b = mnl_nlmsg_batch_start(buf, buflen - MSG_RESERVE);
	if (bd.b == NULL)
		return -1;

	nftnl_batch_begin(mnl_nlmsg_batch_current(bd.b), bd.seq);
	label(&bd, "starting the nftables transaction", "", "");
	if (!next_msg(&bd))
		goto out;
	if (put_table(&bd, NFT_MSG_NEWTABLE, NLM_F_CREATE | NLM_F_EXCL) < 0 ||
	    put_chain(&bd, NAT_CHAIN, "nat", NF_INET_LOCAL_OUT, NAT_PRIO, NF_ACCEPT) < 0 ||
	    put_chain(&bd, FILTER_CHAIN, "filter", NF_INET_LOCAL_OUT, FILTER_PRIO, NF_DROP) < 0)
		goto out;
	if (p->refuse != NULL &&
	    (put_chain(&bd, SYN_CHAIN, "filter", NF_INET_LOCAL_OUT, SYN_PRIO, NF_ACCEPT) < 0 ||
	     put_sets(&bd, p->refuse) < 0))
		goto out;
	if (p->pod &&
	    put_chain(&bd, INPUT_CHAIN, "filter", NF_INET_LOCAL_IN, FILTER_PRIO, NF_DROP) < 0)
		goto out;
	for (i = 0; i < ARRAY_SIZE(rules); i++)
		if (rule_present(&rules[i], p))
			last = i;
	for (i = 0; i < ARRAY_SIZE(rules); i++) {
		/* Only the last message asks for an ACK: errors come anyway,
		 * and one ACK at the end says the whole batch was taken. */
		uint16_t ack = i == last ? NLM_F_ACK : 0;

		if (!rule_present(&rules[i], p))
			continue;
		if (put_rule(&bd, &rules[i], p, ack) < 0)
			goto out;
	}
	nftnl_batch_end(mnl_nlmsg_batch_current(bd.b), bd.seq);
	label(&bd, "committing the nftables transaction", "", "");
	if (!next_msg(&bd))
		goto out;
	len = (long)mnl_nlmsg_batch_size(bd.b);
	if (nmsgs != NULL)
		*nmsgs = bd.seq - bd.first_seq;
out:
	mnl_nlmsg_batch_stop(bd.b);
	return len;
}

void
nft_params_default(struct nft_params *p)
{
	p->tproxy_port = AIRLOCK_TPROXY_PORT;
	p->dns_port = AIRLOCK_DNS_PORT;
	p->nflog_group = AIRLOCK_NFLOG_GROUP;
	p->refuse = NULL;
	p->pod = false;
	p->pod_exempt_uid = 0;
}

long
nft_ruleset_build(const struct nft_params *p, void *buf, size_t buflen, uint32_t seq)
{
	return build(p, buf, buflen, seq, NULL, NULL);
}

/* --- talking to the kernel --------------------------------------------- */

static const char *
nft_advice(int err)
{
	switch (err) {
	case EPERM:
	case EACCES:
		return "no CAP_NET_ADMIN in this network namespace";
	case ENOENT:
	case EOPNOTSUPP:
		return "the kernel lacks an nftables feature the ruleset needs "
		       "(nf_tables inet, nat, redir, reject, log, ct)";
	case EAFNOSUPPORT:
		return "the kernel has no nftables inet family (CONFIG_NF_TABLES_INET)";
	case EPROTONOSUPPORT:
		return "the kernel has no nftables (CONFIG_NF_TABLES)";
	case ENOMEM:
	case ENOBUFS:
		return "the kernel is out of memory";
	case ETIMEDOUT:
		return "the kernel did not answer";
	case EEXIST:
		return "the ruleset is already in place in this namespace";
	default:
		return NULL;
	}
}

static void
set_err(char *err, size_t errlen, const char *what, int e)
{
	const char *advice = nft_advice(e);

	snprintf(err, errlen, "nftables: %s: %s%s%s%s", what, strerror(e),
	         advice != NULL ? " (" : "", advice != NULL ? advice : "",
	         advice != NULL ? ")" : "");
}

static uint32_t
seq_base(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint32_t)ts.tv_nsec | 1u;
}

/* Build and commit the ruleset over nl. */
static int
apply_on(struct mnl_socket *nl, const struct nft_params *p, char *err, size_t errlen)
{
	/* See nft_nl_talk. The refuse chain's sets take most of it: at most
	 * about 30 KiB with NFT_REFUSE_MAX_PORTS and _RANGES all used. */
	static uint64_t buf[65536 / sizeof(uint64_t)];
	char labels[MAX_MSGS][80];
	struct nft_nl_ack failed;
	uint32_t seq = seq_base();
	uint32_t nmsgs;
	long len;

	memset(labels, 0, sizeof(labels));
	len = build(p, buf, sizeof(buf), seq, labels, &nmsgs);
	if (len < 0) {
		snprintf(err, errlen,
		         "nftables: building the ruleset failed "
		         "(out of memory or buffer too small)");
		return -1;
	}
	/* The last rule (seq + nmsgs - 2) carries the ACK; the batch begin
	 * (seq) is where whole-batch failures such as EPERM are reported. */
	if (nft_nl_batch(nl, buf, (size_t)len, seq + nmsgs - 2, seq, &failed) < 0) {
		set_err(err, errlen, "sending the ruleset", errno);
		return -1;
	}
	if (failed.error != 0) {
		uint32_t i = failed.seq - seq;
		char what[128];

		snprintf(what, sizeof(what), "%s failed",
		         i < MAX_MSGS && labels[i][0] != '\0' ? labels[i] : "the transaction");
		set_err(err, errlen, what, failed.error);
		return -1;
	}
	return 0;
}

/* fn on nl, a netfilter netlink socket that was just opened ("opening")
 * or wraps the caller's ("using"; NULL: that failed), then nl closed. A
 * socket of our own may wait as it closes: see nft_ruleset_apply_verify_fd. */
static int
with_socket(struct mnl_socket *nl, const char *what, const struct nft_params *p,
            int (*fn)(struct mnl_socket *, const struct nft_params *, char *, size_t), char *err,
            size_t errlen)
{
	char step[64];
	int ret;

	if (nl == NULL) {
		int e = errno;

		snprintf(step, sizeof(step), "%s the netfilter netlink socket", what);
		set_err(err, errlen, step, e);
		return -1;
	}
	ret = fn(nl, p, err, errlen);
	mnl_socket_close(nl);
	return ret;
}

int
nft_ruleset_apply(const struct nft_params *p, char *err, size_t errlen)
{
	return with_socket(nft_nl_open(NETLINK_NETFILTER), "opening", p, apply_on, err, errlen);
}

/* --- verification ------------------------------------------------------- */

struct verify_state {
	const struct nft_params *p;
	bool table;
	bool nat, filter, syn, input;
	bool nat_ok, filter_ok, syn_ok, input_ok;
	unsigned int nat_rules, filter_rules, syn_rules, input_rules;
	unsigned int dns_redirects, tproxy_redirects, logs; /* with p's values */
	char why[160];
};

static int
table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct verify_state *st = data;
	struct nftnl_table *t = nftnl_table_alloc();

	if (t == NULL)
		return MNL_CB_ERROR;
	if (nftnl_table_nlmsg_parse(nlh, t) == 0 &&
	    nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY) == NFPROTO_INET &&
	    strcmp(nftnl_table_get_str(t, NFTNL_TABLE_NAME), AIRLOCK_NFT_TABLE) == 0)
		st->table = true;
	nftnl_table_free(t);
	return MNL_CB_OK;
}

static bool
chain_is(const struct nftnl_chain *c, const char *type, uint32_t hook, int prio, uint32_t policy)
{
	const char *t;

	if (!nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM) ||
	    !nftnl_chain_is_set(c, NFTNL_CHAIN_TYPE) || !nftnl_chain_is_set(c, NFTNL_CHAIN_POLICY))
		return false;
	t = nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE);
	return t != NULL && strcmp(t, type) == 0 &&
	       nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM) == hook &&
	       nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO) == prio &&
	       nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) == policy;
}

static int
chain_cb(const struct nlmsghdr *nlh, void *data)
{
	struct verify_state *st = data;
	struct nftnl_chain *c = nftnl_chain_alloc();
	const char *table, *name;

	if (c == NULL)
		return MNL_CB_ERROR;
	if (nftnl_chain_nlmsg_parse(nlh, c) < 0)
		goto out;
	table = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE);
	name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
	if (table == NULL || name == NULL || strcmp(table, AIRLOCK_NFT_TABLE) != 0)
		goto out;
	if (strcmp(name, NAT_CHAIN) == 0) {
		st->nat = true;
		st->nat_ok = chain_is(c, "nat", NF_INET_LOCAL_OUT, NAT_PRIO, NF_ACCEPT);
	} else if (strcmp(name, FILTER_CHAIN) == 0) {
		st->filter = true;
		st->filter_ok = chain_is(c, "filter", NF_INET_LOCAL_OUT, FILTER_PRIO, NF_DROP);
	} else if (strcmp(name, INPUT_CHAIN) == 0 && st->p->pod) {
		st->input = true;
		st->input_ok = chain_is(c, "filter", NF_INET_LOCAL_IN, FILTER_PRIO, NF_DROP);
	} else if (strcmp(name, SYN_CHAIN) == 0 && st->p->refuse != NULL) {
		st->syn = true;
		st->syn_ok = chain_is(c, "filter", NF_INET_LOCAL_OUT, SYN_PRIO, NF_ACCEPT);
	} else if (st->why[0] == '\0') {
		snprintf(st->why, sizeof(st->why), "unexpected chain %s", name);
	}
out:
	nftnl_chain_free(c);
	return MNL_CB_OK;
}

/* Count the redirect ports and the NFLOG group the kernel holds, so the
 * self-test notices a ruleset built with other parameters. */
static int
rule_expr_cb(struct nftnl_expr *e, void *data)
{
	struct verify_state *st = data;
	const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
	const void *imm;
	uint32_t len = 0;
	uint16_t port;

	if (name == NULL)
		return 0;
	if (strcmp(name, "log") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_LOG_GROUP) &&
	    nftnl_expr_get_u16(e, NFTNL_EXPR_LOG_GROUP) == st->p->nflog_group)
		st->logs++;
	if (strcmp(name, "immediate") == 0 && nftnl_expr_is_set(e, NFTNL_EXPR_IMM_DATA) &&
	    nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_DREG) == NFT_REG_1) {
		imm = nftnl_expr_get(e, NFTNL_EXPR_IMM_DATA, &len);
		if (imm != NULL && len == sizeof(port)) {
			memcpy(&port, imm, sizeof(port));
			if (ntohs(port) == st->p->dns_port)
				st->dns_redirects++;
			else if (ntohs(port) == st->p->tproxy_port)
				st->tproxy_redirects++;
		}
	}
	return 0;
}

static int
rule_cb(const struct nlmsghdr *nlh, void *data)
{
	struct verify_state *st = data;
	struct nftnl_rule *r = nftnl_rule_alloc();
	const char *table, *chain;

	if (r == NULL)
		return MNL_CB_ERROR;
	if (nftnl_rule_nlmsg_parse(nlh, r) < 0)
		goto out;
	table = nftnl_rule_get_str(r, NFTNL_RULE_TABLE);
	chain = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
	if (table == NULL || chain == NULL || strcmp(table, AIRLOCK_NFT_TABLE) != 0)
		goto out;
	if (strcmp(chain, NAT_CHAIN) == 0)
		st->nat_rules++;
	else if (strcmp(chain, FILTER_CHAIN) == 0)
		st->filter_rules++;
	else if (strcmp(chain, SYN_CHAIN) == 0)
		st->syn_rules++;
	else if (strcmp(chain, INPUT_CHAIN) == 0)
		st->input_rules++;
	nftnl_expr_foreach(r, rule_expr_cb, st);
out:
	nftnl_rule_free(r);
	return MNL_CB_OK;
}

static unsigned int
expected_rules(const char *chain, const struct nft_params *p)
{
	unsigned int n = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(rules); i++)
		if (strcmp(rules[i].chain, chain) == 0 && rule_present(&rules[i], p))
			n++;
	return n;
}

/* The log rules: the catch-all's and each refusing rule's. */
static unsigned int
expected_logs(const struct nft_params *p)
{
	const struct nft_refuse *rf = p->refuse;

	unsigned int pod = p->pod ? 1 : 0; /* filter_input's */

	if (rf == NULL)
		return 1 + pod;
	return 1 + pod + (rf->ports ? 1u : 0u) + (rf->n_guard4 > 0) + (rf->n_guard6 > 0);
}

/* Read the ruleset back over nl and check it. */
static int
verify_on(struct mnl_socket *nl, const struct nft_params *p, char *err, size_t errlen)
{
	/* Requests are tiny; the answers go to nlutil's own buffer. */
	uint64_t req[1024 / sizeof(uint64_t)];
	struct verify_state st;
	struct nlmsghdr *nlh;
	struct nftnl_table *t;
	uint32_t seq = seq_base();
	int ret = -1;

	memset(&st, 0, sizeof(st));
	st.p = p;

	t = nftnl_table_alloc();
	if (t == NULL) {
		snprintf(err, errlen, "nftables: out of memory");
		goto out;
	}
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, AIRLOCK_NFT_TABLE);
	nlh = nftnl_nlmsg_build_hdr((char *)req, NFT_MSG_GETTABLE, NFPROTO_INET, NLM_F_ACK, seq);
	nftnl_table_nlmsg_build_payload(nlh, t);
	nftnl_table_free(t);
	if (nft_nl_talk(nl, nlh, nlh->nlmsg_len, seq, table_cb, &st) < 0 && errno != ENOENT) {
		set_err(err, errlen, "reading table inet " AIRLOCK_NFT_TABLE, errno);
		goto out;
	}
	if (!st.table) {
		snprintf(err, errlen, "nftables: table inet %s is missing", AIRLOCK_NFT_TABLE);
		goto out;
	}

	nlh = nftnl_nlmsg_build_hdr((char *)req, NFT_MSG_GETCHAIN, NFPROTO_INET, NLM_F_DUMP, ++seq);
	if (nft_nl_talk(nl, nlh, nlh->nlmsg_len, seq, chain_cb, &st) < 0) {
		set_err(err, errlen, "listing chains", errno);
		goto out;
	}
	nlh = nftnl_nlmsg_build_hdr((char *)req, NFT_MSG_GETRULE, NFPROTO_INET, NLM_F_DUMP, ++seq);
	if (nft_nl_talk(nl, nlh, nlh->nlmsg_len, seq, rule_cb, &st) < 0) {
		set_err(err, errlen, "listing rules", errno);
		goto out;
	}

	if (!st.nat || !st.filter)
		snprintf(err, errlen, "nftables: chain %s is missing",
		         !st.nat ? NAT_CHAIN : FILTER_CHAIN);
	else if (!st.nat_ok)
		snprintf(err, errlen,
		         "nftables: chain %s is not type nat hook "
		         "output priority %d",
		         NAT_CHAIN, NAT_PRIO);
	else if (!st.filter_ok)
		snprintf(err, errlen,
		         "nftables: chain %s is not type filter hook "
		         "output priority %d policy drop",
		         FILTER_CHAIN, FILTER_PRIO);
	else if (p->refuse != NULL && !st.syn)
		snprintf(err, errlen, "nftables: chain %s is missing", SYN_CHAIN);
	else if (p->refuse != NULL && !st.syn_ok)
		snprintf(err, errlen,
		         "nftables: chain %s is not type filter hook "
		         "output priority %d policy accept",
		         SYN_CHAIN, SYN_PRIO);
	else if (p->pod && (!st.input || !st.input_ok))
		snprintf(err, errlen,
		         "nftables: chain %s is missing or not type filter hook input "
		         "priority %d policy drop",
		         INPUT_CHAIN, FILTER_PRIO);
	else if (st.input_rules != expected_rules(INPUT_CHAIN, p))
		snprintf(err, errlen, "nftables: chain %s holds %u rules, expected %u", INPUT_CHAIN,
		         st.input_rules, expected_rules(INPUT_CHAIN, p));
	else if (st.nat_rules != expected_rules(NAT_CHAIN, p) ||
	         st.filter_rules != expected_rules(FILTER_CHAIN, p) ||
	         st.syn_rules != expected_rules(SYN_CHAIN, p))
		snprintf(err, errlen,
		         "nftables: chains hold %u, %u and %u rules, "
		         "expected %u, %u and %u",
		         st.nat_rules, st.filter_rules, st.syn_rules, expected_rules(NAT_CHAIN, p),
		         expected_rules(FILTER_CHAIN, p), expected_rules(SYN_CHAIN, p));
	else if (st.dns_redirects != 2 || st.tproxy_redirects != 1 || st.logs != expected_logs(p))
		snprintf(err, errlen,
		         "nftables: the rules do not redirect to ports %u "
		         "and %u and log to group %u",
		         p->dns_port, p->tproxy_port, p->nflog_group);
	else if (st.why[0] != '\0')
		snprintf(err, errlen, "nftables: %s in table inet %s", st.why, AIRLOCK_NFT_TABLE);
	else
		ret = 0;
out:
	return ret;
}

int
nft_ruleset_verify(const struct nft_params *p, char *err, size_t errlen)
{
	return with_socket(nft_nl_open(NETLINK_NETFILTER), "opening", p, verify_on, err, errlen);
}

static int
apply_verify_on(struct mnl_socket *nl, const struct nft_params *p, char *err, size_t errlen)
{
	int ret = apply_on(nl, p, err, errlen);

	return ret == 0 ? verify_on(nl, p, err, errlen) : ret;
}

/* Why the caller keeps the socket: closing a bound NETLINK_NETFILTER
 * socket makes netlink_release() send NETLINK_URELEASE to nf_tables'
 * notifier, nft_rcv_nl_event() (net/netfilter/nf_tables_api.c), which
 * takes the namespace's commit_mutex and calls
 * nf_tables_trans_destroy_flush_work(): flush_work() on the transaction
 * destroy work that every commit queues (nf_tables_commit_release()). That
 * work, nf_tables_trans_destroy_work(), starts with synchronize_rcu() so
 * that packets still walking the old rules are done before the
 * transactions are freed. So a close right after our commit waits for an
 * RCU grace period plus a kworker wake-up, and so does any other close of
 * an nfnetlink socket in the namespace (verify's did, when apply closed
 * its own first). Older kernels keep one destroy list for the whole
 * machine, so the wait also covers every other namespace's commits: 7-32
 * ms was measured under load; newer ones keep it per namespace (6.18
 * here: a few hundred microseconds at most, bench/run.md). The caller
 * closes it after CMD has started, when the grace period has usually
 * passed and a wait no longer delays anything. */
int
nft_ruleset_apply_verify_fd(const struct nft_params *p, int fd, char *err, size_t errlen)
{
	/* nft_nl_wrap duplicates fd: closing that leaves the socket open. */
	return with_socket(nft_nl_wrap(fd), "using", p, apply_verify_on, err, errlen);
}
