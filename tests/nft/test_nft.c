/* Unit tests of nft/ without a kernel: the ruleset batch is parsed back
 * with libnftnl and every table, chain and rule checked; nflog_parse gets
 * hand-built NFLOG datagrams, truncated ones and garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <event2/event.h>

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_nat.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include "common/netconst.h"
#include "elog/elog.h"
#include "nft/nflog.h"
#include "nft/refuse.h"
#include "nft/nft.h"

/* --- ruleset ------------------------------------------------------------ */

/* Parameters unlike the defaults, so a test fails if a constant is used
 * where the parameter belongs. */
static const struct nft_params test_params = {
        .tproxy_port = 15999,
        .dns_port = 5353,
        .nflog_group = 42,
};

#define MAX_RULES 16

struct parsed {
	int begin, end;
	int tables_new, tables_del;
	struct nftnl_chain *nat, *filter;
	struct nftnl_rule *nat_rules[MAX_RULES];
	struct nftnl_rule *filter_rules[MAX_RULES];
	int n_nat, n_filter;
	int acks;            /* messages asking for an ACK */
	uint16_t last_flags; /* flags of the last rule message */
	size_t max_msg;      /* largest single message */
	uint32_t first_seq, last_seq;
	int seq_gaps;
};

static void
parsed_free(struct parsed *ps)
{
	int i;

	if (ps->nat != NULL)
		nftnl_chain_free(ps->nat);
	if (ps->filter != NULL)
		nftnl_chain_free(ps->filter);
	for (i = 0; i < ps->n_nat; i++)
		nftnl_rule_free(ps->nat_rules[i]);
	for (i = 0; i < ps->n_filter; i++)
		nftnl_rule_free(ps->filter_rules[i]);
}

static void
parse_batch(const void *buf, long len, struct parsed *ps)
{
	const struct nlmsghdr *nlh = buf;
	int rest = (int)len;
	uint32_t expect_seq = 0;
	bool first = true;

	memset(ps, 0, sizeof(*ps));
	while (mnl_nlmsg_ok(nlh, rest)) {
		uint16_t type = nlh->nlmsg_type;

		if (nlh->nlmsg_len > ps->max_msg)
			ps->max_msg = nlh->nlmsg_len;
		if (first) {
			ps->first_seq = nlh->nlmsg_seq;
			expect_seq = nlh->nlmsg_seq;
			first = false;
		}
		if (nlh->nlmsg_seq != expect_seq)
			ps->seq_gaps++;
		expect_seq = nlh->nlmsg_seq + 1;
		ps->last_seq = nlh->nlmsg_seq;
		if (nlh->nlmsg_flags & NLM_F_ACK)
			ps->acks++;

		if (type == NFNL_MSG_BATCH_BEGIN) {
			const struct nfgenmsg *g = mnl_nlmsg_get_payload(nlh);

			assert_int_equal(ntohs(g->res_id), NFNL_SUBSYS_NFTABLES);
			ps->begin++;
		} else if (type == NFNL_MSG_BATCH_END) {
			ps->end++;
		} else {
			assert_int_equal(type >> 8, NFNL_SUBSYS_NFTABLES);
			assert_true(nlh->nlmsg_flags & NLM_F_REQUEST);
			switch (type & 0xff) {
			case NFT_MSG_NEWTABLE:
			case NFT_MSG_DELTABLE: {
				/* Created exclusively: never replaces a table. */
				if ((type & 0xff) == NFT_MSG_NEWTABLE)
					assert_true(nlh->nlmsg_flags & NLM_F_EXCL);
				struct nftnl_table *t = nftnl_table_alloc();

				assert_int_equal(nftnl_table_nlmsg_parse(nlh, t), 0);
				assert_string_equal(nftnl_table_get_str(t, NFTNL_TABLE_NAME),
				                    AIRLOCK_NFT_TABLE);
				assert_int_equal(nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY),
				                 NFPROTO_INET);
				if ((type & 0xff) == NFT_MSG_NEWTABLE)
					ps->tables_new++;
				else
					ps->tables_del++;
				nftnl_table_free(t);
				break;
			}
			case NFT_MSG_NEWCHAIN: {
				struct nftnl_chain *c = nftnl_chain_alloc();
				const char *name;

				assert_int_equal(nftnl_chain_nlmsg_parse(nlh, c), 0);
				assert_string_equal(nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE),
				                    AIRLOCK_NFT_TABLE);
				name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
				if (strcmp(name, "nat_output") == 0 && ps->nat == NULL)
					ps->nat = c;
				else if (strcmp(name, "filter_output") == 0 && ps->filter == NULL)
					ps->filter = c;
				else
					fail_msg("unexpected chain %s", name);
				break;
			}
			case NFT_MSG_NEWRULE: {
				struct nftnl_rule *r = nftnl_rule_alloc();
				const char *chain;

				assert_int_equal(nftnl_rule_nlmsg_parse(nlh, r), 0);
				assert_string_equal(nftnl_rule_get_str(r, NFTNL_RULE_TABLE),
				                    AIRLOCK_NFT_TABLE);
				assert_int_equal(nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY),
				                 NFPROTO_INET);
				chain = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
				ps->last_flags = nlh->nlmsg_flags;
				if (strcmp(chain, "nat_output") == 0 && ps->n_nat < MAX_RULES)
					ps->nat_rules[ps->n_nat++] = r;
				else if (strcmp(chain, "filter_output") == 0 &&
				         ps->n_filter < MAX_RULES)
					ps->filter_rules[ps->n_filter++] = r;
				else
					fail_msg("rule in unexpected chain %s", chain);
				break;
			}
			default:
				fail_msg("unexpected message type %u", type & 0xff);
			}
		}
		nlh = mnl_nlmsg_next(nlh, &rest);
	}
	assert_int_equal(rest, 0);
}

/* The expressions of a rule, by name: "meta,cmp,immediate". */
struct expr_list {
	struct nftnl_expr *e[16];
	int n;
	char names[256];
};

static int
collect_expr(struct nftnl_expr *e, void *data)
{
	struct expr_list *l = data;

	if (l->n < 16)
		l->e[l->n++] = e;
	if (l->names[0] != '\0')
		strncat(l->names, ",", sizeof(l->names) - strlen(l->names) - 1);
	strncat(l->names, nftnl_expr_get_str(e, NFTNL_EXPR_NAME),
	        sizeof(l->names) - strlen(l->names) - 1);
	return 0;
}

static void
exprs(struct nftnl_rule *r, struct expr_list *l)
{
	memset(l, 0, sizeof(*l));
	nftnl_expr_foreach(r, collect_expr, l);
}

static void
assert_data(struct nftnl_expr *e, uint16_t attr, const void *want, uint32_t len)
{
	uint32_t got_len = 0;
	const void *got = nftnl_expr_get(e, attr, &got_len);

	assert_non_null(got);
	assert_int_equal(got_len, len);
	assert_memory_equal(got, want, len);
}

static void
assert_accept(struct nftnl_expr *e)
{
	assert_string_equal(nftnl_expr_get_str(e, NFTNL_EXPR_NAME), "immediate");
	assert_int_equal(nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_DREG), NFT_REG_VERDICT);
	assert_int_equal(nftnl_expr_get_u32(e, NFTNL_EXPR_IMM_VERDICT), NF_ACCEPT);
}

static void
assert_loopback_v4(struct nftnl_rule *r)
{
	struct expr_list l;
	uint8_t nfproto = NFPROTO_IPV4, net = 127;

	exprs(r, &l);
	assert_string_equal(l.names, "meta,cmp,payload,cmp,immediate");
	assert_int_equal(nftnl_expr_get_u32(l.e[0], NFTNL_EXPR_META_KEY), NFT_META_NFPROTO);
	assert_data(l.e[1], NFTNL_EXPR_CMP_DATA, &nfproto, 1);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_BASE),
	                 NFT_PAYLOAD_NETWORK_HEADER);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_OFFSET), 16);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_LEN), 1);
	assert_data(l.e[3], NFTNL_EXPR_CMP_DATA, &net, 1);
	assert_accept(l.e[4]);
}

static void
assert_loopback_v6(struct nftnl_rule *r)
{
	struct expr_list l;
	uint8_t nfproto = NFPROTO_IPV6;

	exprs(r, &l);
	assert_string_equal(l.names, "meta,cmp,payload,cmp,immediate");
	assert_data(l.e[1], NFTNL_EXPR_CMP_DATA, &nfproto, 1);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_OFFSET), 24);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_LEN), 16);
	assert_data(l.e[3], NFTNL_EXPR_CMP_DATA, &in6addr_loopback, 16);
	assert_accept(l.e[4]);
}

static void
assert_redirect(struct nftnl_expr *imm, struct nftnl_expr *redir, uint16_t port)
{
	uint16_t be = htons(port);

	assert_int_equal(nftnl_expr_get_u32(imm, NFTNL_EXPR_IMM_DREG), NFT_REG_1);
	assert_data(imm, NFTNL_EXPR_IMM_DATA, &be, 2);
	assert_int_equal(nftnl_expr_get_u32(redir, NFTNL_EXPR_REDIR_REG_PROTO_MIN), NFT_REG_1);
	assert_int_equal(nftnl_expr_get_u32(redir, NFTNL_EXPR_REDIR_FLAGS),
	                 NF_NAT_RANGE_PROTO_SPECIFIED);
}

static void
assert_dns_redirect(struct nftnl_rule *r, uint8_t proto)
{
	struct expr_list l;
	uint16_t p53 = htons(53);

	exprs(r, &l);
	assert_string_equal(l.names, "meta,cmp,payload,cmp,immediate,redir");
	assert_int_equal(nftnl_expr_get_u32(l.e[0], NFTNL_EXPR_META_KEY), NFT_META_L4PROTO);
	assert_data(l.e[1], NFTNL_EXPR_CMP_DATA, &proto, 1);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_BASE),
	                 NFT_PAYLOAD_TRANSPORT_HEADER);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_PAYLOAD_OFFSET), 2);
	assert_data(l.e[3], NFTNL_EXPR_CMP_DATA, &p53, 2);
	assert_redirect(l.e[4], l.e[5], test_params.dns_port);
}

static void
test_ruleset_batch(void **state)
{
	static uint64_t buf[16384 / sizeof(uint64_t)];
	struct parsed ps;
	struct expr_list l;
	uint8_t tcp = IPPROTO_TCP;
	uint32_t zero = 0, mask = 0x6;
	long len;

	(void)state;
	len = nft_ruleset_build(&test_params, buf, sizeof(buf), 1000);
	assert_true(len > 0);
	assert_true((size_t)len < sizeof(buf));
	parse_batch(buf, len, &ps);

	/* One transaction: begin, replace the table, two chains, rules, end. */
	assert_int_equal(ps.begin, 1);
	assert_int_equal(ps.end, 1);
	assert_int_equal(((const struct nlmsghdr *)buf)->nlmsg_type, NFNL_MSG_BATCH_BEGIN);
	assert_int_equal(ps.tables_new, 1);
	assert_int_equal(ps.tables_del, 0);
	assert_int_equal(ps.first_seq, 1000);
	assert_int_equal(ps.seq_gaps, 0);
	assert_int_equal(ps.last_seq, 1000 + 1 + 1 + 2 + 11);
	/* Only the last rule asks for an ACK (errors come regardless). */
	assert_int_equal(ps.acks, 1);
	assert_true(ps.last_flags & NLM_F_ACK);
	/* nft_ruleset_build reserves 1024 bytes per message. */
	assert_true(ps.max_msg < 1024);

	assert_non_null(ps.nat);
	assert_string_equal(nftnl_chain_get_str(ps.nat, NFTNL_CHAIN_TYPE), "nat");
	assert_int_equal(nftnl_chain_get_u32(ps.nat, NFTNL_CHAIN_HOOKNUM), NF_INET_LOCAL_OUT);
	assert_int_equal(nftnl_chain_get_s32(ps.nat, NFTNL_CHAIN_PRIO), -100);
	assert_int_equal(nftnl_chain_get_u32(ps.nat, NFTNL_CHAIN_POLICY), NF_ACCEPT);

	assert_non_null(ps.filter);
	assert_string_equal(nftnl_chain_get_str(ps.filter, NFTNL_CHAIN_TYPE), "filter");
	assert_int_equal(nftnl_chain_get_u32(ps.filter, NFTNL_CHAIN_HOOKNUM), NF_INET_LOCAL_OUT);
	assert_int_equal(nftnl_chain_get_s32(ps.filter, NFTNL_CHAIN_PRIO), 0);
	assert_int_equal(nftnl_chain_get_u32(ps.filter, NFTNL_CHAIN_POLICY), NF_DROP);

	/* nat_output: loopback accept, DNS redirect (udp, tcp), TCP redirect. */
	assert_int_equal(ps.n_nat, 5);
	assert_loopback_v4(ps.nat_rules[0]);
	assert_loopback_v6(ps.nat_rules[1]);
	assert_dns_redirect(ps.nat_rules[2], IPPROTO_UDP);
	assert_dns_redirect(ps.nat_rules[3], IPPROTO_TCP);
	exprs(ps.nat_rules[4], &l);
	assert_string_equal(l.names, "meta,cmp,immediate,redir");
	assert_data(l.e[1], NFTNL_EXPR_CMP_DATA, &tcp, 1);
	assert_redirect(l.e[2], l.e[3], test_params.tproxy_port);

	/* filter_output: loopback, established, log, reject tcp, reject. */
	assert_int_equal(ps.n_filter, 6);
	assert_loopback_v4(ps.filter_rules[0]);
	assert_loopback_v6(ps.filter_rules[1]);
	exprs(ps.filter_rules[2], &l);
	assert_string_equal(l.names, "ct,bitwise,cmp,immediate");
	assert_int_equal(nftnl_expr_get_u32(l.e[0], NFTNL_EXPR_CT_KEY), NFT_CT_STATE);
	assert_data(l.e[1], NFTNL_EXPR_BITWISE_MASK, &mask, 4);
	assert_data(l.e[1], NFTNL_EXPR_BITWISE_XOR, &zero, 4);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_CMP_OP), NFT_CMP_NEQ);
	assert_data(l.e[2], NFTNL_EXPR_CMP_DATA, &zero, 4);
	assert_accept(l.e[3]);

	exprs(ps.filter_rules[3], &l);
	assert_string_equal(l.names, "log");
	assert_int_equal(nftnl_expr_get_u16(l.e[0], NFTNL_EXPR_LOG_GROUP), 42);
	assert_int_equal(nftnl_expr_get_u32(l.e[0], NFTNL_EXPR_LOG_SNAPLEN), 128);

	exprs(ps.filter_rules[4], &l);
	assert_string_equal(l.names, "meta,cmp,reject");
	assert_data(l.e[1], NFTNL_EXPR_CMP_DATA, &tcp, 1);
	assert_int_equal(nftnl_expr_get_u32(l.e[2], NFTNL_EXPR_REJECT_TYPE), NFT_REJECT_TCP_RST);

	exprs(ps.filter_rules[5], &l);
	assert_string_equal(l.names, "reject");
	assert_int_equal(nftnl_expr_get_u32(l.e[0], NFTNL_EXPR_REJECT_TYPE),
	                 NFT_REJECT_ICMPX_UNREACH);
	assert_int_equal(nftnl_expr_get_u8(l.e[0], NFTNL_EXPR_REJECT_CODE),
	                 NFT_REJECT_ICMPX_ADMIN_PROHIBITED);

	parsed_free(&ps);
}

static void
test_ruleset_defaults(void **state)
{
	static uint64_t buf[16384 / sizeof(uint64_t)];
	struct nft_params p;
	struct parsed ps;
	struct expr_list l;
	long len;

	(void)state;
	nft_params_default(&p);
	assert_int_equal(p.tproxy_port, AIRLOCK_TPROXY_PORT);
	assert_int_equal(p.dns_port, AIRLOCK_DNS_PORT);
	assert_int_equal(p.nflog_group, AIRLOCK_NFLOG_GROUP);
	len = nft_ruleset_build(&p, buf, sizeof(buf), 1);
	assert_true(len > 0);
	parse_batch(buf, len, &ps);
	exprs(ps.filter_rules[3], &l);
	assert_int_equal(nftnl_expr_get_u16(l.e[0], NFTNL_EXPR_LOG_GROUP), AIRLOCK_NFLOG_GROUP);
	parsed_free(&ps);
}

static void
test_ruleset_small_buffer(void **state)
{
	static uint64_t buf[16384 / sizeof(uint64_t)];
	long len, len2;

	(void)state;
	len = nft_ruleset_build(&test_params, buf, sizeof(buf), 1);
	assert_true(len > 0);
	assert_int_equal(nft_ruleset_build(&test_params, buf, 0, 1), -1);
	assert_int_equal(nft_ruleset_build(&test_params, buf, 100, 1), -1);
	/* The batch must fit below buflen minus the 1024-byte reserve. */
	assert_int_equal(nft_ruleset_build(&test_params, buf, (size_t)len + 1023, 1), -1);
	len2 = nft_ruleset_build(&test_params, buf, (size_t)len + 1024, 1);
	assert_int_equal(len2, len);
}

/* --- nflog_parse ----------------------------------------------------------- */

struct got {
	struct nflog_packet pkt[4];
	int n;
};

static void
collect(const struct nflog_packet *pkt, void *arg)
{
	struct got *g = arg;

	if (g->n < 4)
		g->pkt[g->n++] = *pkt;
}

/* Append one NFLOG packet message to buf at *off, as the kernel sends it,
 * with the log rule's prefix. */
static void
put_nflog_prefix(uint8_t *buf, size_t *off, int family, const void *payload, size_t plen,
                 const char *prefix)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf + *off);
	struct nfgenmsg *nfg;
	struct nfulnl_msg_packet_hdr ph = {
	        .hw_protocol = htons(family == AF_INET ? 0x0800 : 0x86dd),
	        .hook = NF_INET_LOCAL_OUT,
	};

	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = (uint8_t)family;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(7);
	mnl_attr_put(nlh, NFULA_PACKET_HDR, sizeof(ph), &ph);
	mnl_attr_put_u32(nlh, NFULA_IFINDEX_OUTDEV, htonl(1));
	mnl_attr_put_strz(nlh, NFULA_PREFIX, prefix);
	mnl_attr_put(nlh, NFULA_PAYLOAD, plen, payload);
	*off += NLMSG_ALIGN(nlh->nlmsg_len);
}

/* The catch-all reject's packets carry no prefix (an empty one). */
static void
put_nflog(uint8_t *buf, size_t *off, int family, const void *payload, size_t plen)
{
	put_nflog_prefix(buf, off, family, payload, plen, "");
}

/* IPv4 header (20 bytes) + 8 bytes of L4 to dst. */
static size_t
ipv4_packet(uint8_t *p, uint8_t proto, const char *dst, uint16_t dport, uint16_t frag)
{
	memset(p, 0, 28);
	p[0] = 0x45;
	p[3] = 28;
	p[6] = (uint8_t)(frag >> 8);
	p[7] = (uint8_t)frag;
	p[8] = 64;
	p[9] = proto;
	inet_pton(AF_INET, "198.18.0.1", p + 12);
	inet_pton(AF_INET, dst, p + 16);
	p[20] = 0x9c;
	p[21] = 0x40;
	p[22] = (uint8_t)(dport >> 8);
	p[23] = (uint8_t)dport;
	return 28;
}

/* IPv6 header (+ optional 8-byte hop-by-hop header) + 8 bytes of L4. */
static size_t
ipv6_packet(uint8_t *p, uint8_t proto, const char *dst, uint16_t dport, bool hopopts)
{
	size_t l4 = hopopts ? 48 : 40;

	memset(p, 0, l4 + 8);
	p[0] = 0x60;
	p[5] = 8;
	p[6] = hopopts ? IPPROTO_HOPOPTS : proto;
	p[7] = 64;
	inet_pton(AF_INET6, "fd00:a1::1", p + 8);
	inet_pton(AF_INET6, dst, p + 24);
	if (hopopts) {
		p[40] = proto;
		p[41] = 0; /* (0 + 1) * 8 bytes */
	}
	p[l4 + 2] = (uint8_t)(dport >> 8);
	p[l4 + 3] = (uint8_t)dport;
	return l4 + 8;
}

static void
test_nflog_udp_v4(void **state)
{
	uint8_t buf[512] __attribute__((aligned(4)));
	uint8_t pkt[64];
	size_t off = 0;
	struct got g = {.n = 0};

	(void)state;
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9999, 0));
	assert_int_equal(nflog_parse(buf, off, collect, &g), 1);
	assert_int_equal(g.n, 1);
	assert_int_equal(g.pkt[0].family, AF_INET);
	assert_int_equal(g.pkt[0].l4proto, IPPROTO_UDP);
	assert_string_equal(g.pkt[0].dst, "203.0.113.7");
	assert_int_equal(g.pkt[0].dport, 9999);
	assert_string_equal(g.pkt[0].proto, "udp");
	/* A NULL callback only counts. */
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), 1);
}

static void
test_nflog_udp_v6(void **state)
{
	uint8_t buf[512] __attribute__((aligned(4)));
	uint8_t pkt[64];
	size_t off = 0;
	struct got g = {.n = 0};

	(void)state;
	put_nflog(buf, &off, AF_INET6, pkt,
	          ipv6_packet(pkt, IPPROTO_UDP, "2001:db8::7", 443, false));
	assert_int_equal(nflog_parse(buf, off, collect, &g), 1);
	assert_int_equal(g.pkt[0].family, AF_INET6);
	assert_string_equal(g.pkt[0].dst, "2001:db8::7");
	assert_int_equal(g.pkt[0].dport, 443);
	assert_string_equal(g.pkt[0].proto, "udp");
}

static void
test_nflog_v6_exthdr_and_batch(void **state)
{
	uint8_t buf[1024] __attribute__((aligned(4)));
	uint8_t pkt[64];
	size_t off = 0;
	struct got g = {.n = 0};

	(void)state;
	/* Two messages in one datagram, as the kernel batches them. */
	put_nflog(buf, &off, AF_INET6, pkt, ipv6_packet(pkt, IPPROTO_TCP, "2001:db8::1", 22, true));
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_SCTP, "192.0.2.9", 5000, 0));
	assert_int_equal(nflog_parse(buf, off, collect, &g), 2);
	assert_string_equal(g.pkt[0].proto, "tcp");
	assert_int_equal(g.pkt[0].dport, 22);
	assert_string_equal(g.pkt[1].proto, "sctp");
	assert_string_equal(g.pkt[1].dst, "192.0.2.9");
	assert_int_equal(g.pkt[1].dport, 5000);
}

static void
test_nflog_no_ports(void **state)
{
	uint8_t buf[1024] __attribute__((aligned(4)));
	uint8_t pkt[64];
	size_t off = 0;
	struct got g = {.n = 0};

	(void)state;
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_ICMP, "192.0.2.1", 0, 0));
	put_nflog(buf, &off, AF_INET6, pkt,
	          ipv6_packet(pkt, IPPROTO_ICMPV6, "2001:db8::1", 0, false));
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, 47 /* GRE */, "192.0.2.2", 0, 0));
	/* A later fragment of UDP carries no UDP header. */
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "192.0.2.3", 53, 0x0010));
	assert_int_equal(nflog_parse(buf, off, collect, &g), 4);
	assert_string_equal(g.pkt[0].proto, "icmp");
	assert_int_equal(g.pkt[0].dport, -1);
	assert_string_equal(g.pkt[1].proto, "icmpv6");
	assert_int_equal(g.pkt[1].dport, -1);
	assert_string_equal(g.pkt[2].proto, "raw:47");
	assert_int_equal(g.pkt[2].dport, -1);
	assert_string_equal(g.pkt[3].proto, "udp");
	assert_int_equal(g.pkt[3].dport, -1);
}

static void
test_nflog_truncated(void **state)
{
	uint8_t buf[512] __attribute__((aligned(4)));
	uint8_t cut[512] __attribute__((aligned(4)));
	uint8_t pkt[64];
	size_t off = 0, i;

	(void)state;
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9999, 0));
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), 1);
	for (i = 0; i < off; i++) {
		memcpy(cut, buf, i);
		assert_int_equal(nflog_parse(cut, i, NULL, NULL), -1);
	}
	assert_int_equal(nflog_parse(NULL, 10, NULL, NULL), -1);
}

static void
test_nflog_malformed(void **state)
{
	uint8_t buf[512] __attribute__((aligned(4)));
	uint8_t pkt[64];
	size_t off, plen;
	struct nlmsghdr *nlh;

	(void)state;
	/* The header says IPv4, the payload is IPv6. */
	off = 0;
	put_nflog(buf, &off, AF_INET, pkt, ipv6_packet(pkt, IPPROTO_UDP, "2001:db8::7", 9, false));
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), -1);

	/* An IP header cut short, and an IHL beyond the bytes present. */
	off = 0;
	plen = ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9, 0);
	put_nflog(buf, &off, AF_INET, pkt, 12);
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), -1);
	off = 0;
	pkt[0] = 0x4f;
	put_nflog(buf, &off, AF_INET, pkt, plen);
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), -1);

	/* No payload attribute at all. */
	off = 0;
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
	mnl_nlmsg_put_extra_header(nlh, sizeof(struct nfgenmsg));
	assert_int_equal(nflog_parse(buf, nlh->nlmsg_len, NULL, NULL), -1);

	/* A packet header attribute of the wrong size. */
	mnl_attr_put_u16(nlh, NFULA_PACKET_HDR, 1);
	assert_int_equal(nflog_parse(buf, nlh->nlmsg_len, NULL, NULL), -1);

	/* Not an NFLOG packet: an error message, another subsystem. */
	nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = NLMSG_ERROR;
	mnl_nlmsg_put_extra_header(nlh, sizeof(struct nlmsgerr));
	assert_int_equal(nflog_parse(buf, nlh->nlmsg_len, NULL, NULL), -1);
	off = 0;
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9, 0));
	((struct nlmsghdr *)buf)->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8);
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), -1);

	/* A last message without its alignment padding: its payload
	 * attribute would otherwise be read as reaching past the datagram
	 * (libmnl bounds attributes by the aligned length). */
	off = 0;
	(void)ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9, 0);
	put_nflog(buf, &off, AF_INET, pkt, 21); /* the payload attribute ends 3 short */
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), 1);
	nlh = (struct nlmsghdr *)buf;
	nlh->nlmsg_len = (uint32_t)off - 3;
	assert_int_equal(nflog_parse(buf, off - 3, NULL, NULL), -1);

	/* Trailing bytes after a good message. */
	off = 0;
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9, 0));
	memset(buf + off, 0, 20);
	assert_int_equal(nflog_parse(buf, off + 20, NULL, NULL), -1);
}

static void
test_nflog_garbage(void **state)
{
	uint8_t buf[256] __attribute__((aligned(4)));
	uint32_t x = 2463534242u;
	int i, r;
	size_t j, len;

	(void)state;
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(nflog_parse(buf, sizeof(buf), NULL, NULL), -1);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(nflog_parse(buf, sizeof(buf), NULL, NULL), -1);
	/* Random bytes (xorshift32, fixed seed) of random lengths, with a
	 * plausible netlink length in front half of the time: never a crash,
	 * never more packets than could fit. */
	for (i = 0; i < 20000; i++) {
		for (j = 0; j < sizeof(buf); j++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			buf[j] = (uint8_t)x;
		}
		len = x % sizeof(buf);
		if (i % 2 == 0 && len >= sizeof(struct nlmsghdr)) {
			struct nlmsghdr *nlh = (struct nlmsghdr *)buf;

			nlh->nlmsg_len = (uint32_t)len;
			nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
		}
		r = nflog_parse(buf, len, NULL, NULL);
		assert_true(r >= -1 && r <= (int)(len / sizeof(struct nlmsghdr)));
	}
}

/* Messages of one kind in a batch, and the batch's shape. */
struct msg_counts {
	int sets, elems, chains, rules, acks, gaps;
	size_t max_msg;
};

static void
count_msgs(const void *buf, long len, struct msg_counts *mc)
{
	const struct nlmsghdr *nlh = buf;
	int rest = (int)len;
	uint32_t seq = nlh->nlmsg_seq;

	memset(mc, 0, sizeof(*mc));
	for (; mnl_nlmsg_ok(nlh, rest); nlh = mnl_nlmsg_next(nlh, &rest), seq++) {
		if (nlh->nlmsg_len > mc->max_msg)
			mc->max_msg = nlh->nlmsg_len;
		mc->gaps += nlh->nlmsg_seq != seq;
		mc->acks += (nlh->nlmsg_flags & NLM_F_ACK) != 0;
		if (nlh->nlmsg_type >> 8 != NFNL_SUBSYS_NFTABLES)
			continue;
		switch (nlh->nlmsg_type & 0xff) {
		case NFT_MSG_NEWSET:
			mc->sets++;
			break;
		case NFT_MSG_NEWSETELEM:
			mc->elems++;
			break;
		case NFT_MSG_NEWCHAIN:
			mc->chains++;
			break;
		case NFT_MSG_NEWRULE:
			mc->rules++;
			break;
		default:
			break;
		}
	}
	assert_int_equal(rest, 0);
}

/* With refusals: a third chain, its sets in messages of bounded size,
 * each refusing rule only with something to refuse, one ACK. The largest
 * refusal fits the 64 KiB nft_ruleset_apply builds into. */
static void
test_ruleset_refuse(void **state)
{
	static uint64_t buf[65536 / sizeof(uint64_t)];
	static struct nft_refuse rf;
	struct nft_params p = test_params;
	struct msg_counts mc;
	long len;

	(void)state;
	memset(&rf, 0, sizeof(rf));
	rf.ports = true;
	rf.n_open = NFT_REFUSE_MAX_PORTS;
	for (size_t i = 0; i < rf.n_open; i++)
		rf.open[i].lo = rf.open[i].hi = (uint16_t)(100 + 2 * i);
	rf.open[rf.n_open - 1].hi = 65535; /* to the top: no end element */
	rf.n_guard4 = rf.n_guard6 = NFT_REFUSE_MAX_RANGES;
	for (size_t i = 0; i < NFT_REFUSE_MAX_RANGES; i++) {
		rf.guard4[i].lo[0] = rf.guard4[i].hi[0] = (uint8_t)(2 * i);
		rf.guard4[i].hi[3] = 0xff;
		rf.guard6[i].lo[0] = rf.guard6[i].hi[0] = (uint8_t)(2 * i);
		memset(rf.guard6[i].hi + 1, 0xff, 15);
	}
	p.refuse = &rf;
	len = nft_ruleset_build(&p, buf, sizeof(buf), 1);
	assert_true(len > 0);
	count_msgs(buf, len, &mc);
	assert_int_equal(mc.chains, 3);
	assert_int_equal(mc.sets, 3);
	/* 2 elements per range (one less for the range to 65535), 16 a message. */
	assert_int_equal(mc.elems, (2 * 128 - 1 + 15) / 16 + 2 * ((2 * 96 + 15) / 16));
	assert_int_equal(mc.rules, 11 + 8);
	assert_int_equal(mc.acks, 1);
	assert_int_equal(mc.gaps, 0);
	assert_true(mc.max_msg < 1024);

	/* Nothing to refuse but the guard's IPv4 ranges: one set, one
	 * refusing rule. */
	rf.ports = false;
	rf.n_guard6 = 0;
	len = nft_ruleset_build(&p, buf, sizeof(buf), 1);
	assert_true(len > 0);
	count_msgs(buf, len, &mc);
	assert_int_equal(mc.chains, 3);
	assert_int_equal(mc.sets, 1);
	assert_int_equal(mc.rules, 11 + 6);
	assert_int_equal(mc.acks, 1);

	/* No port open at all (a policy that allows nothing): an empty set,
	 * and the rule refusing every port. */
	rf.ports = true;
	rf.n_open = 0;
	len = nft_ruleset_build(&p, buf, sizeof(buf), 1);
	assert_true(len > 0);
	count_msgs(buf, len, &mc);
	assert_int_equal(mc.sets, 2);
	assert_int_equal(mc.elems, (2 * 96 + 15) / 16);
	assert_int_equal(mc.rules, 11 + 7);

	/* No refusals: the ruleset of before. */
	p.refuse = NULL;
	len = nft_ruleset_build(&p, buf, sizeof(buf), 1);
	count_msgs(buf, len, &mc);
	assert_int_equal(mc.chains, 2);
	assert_int_equal(mc.sets, 0);
	assert_int_equal(mc.rules, 11);
}

/* The refuse chain's prefix and the source port reach the packet. */
static void
test_nflog_prefix(void **state)
{
	uint8_t buf[1024] __attribute__((aligned(4)));
	uint8_t pkt[64];
	struct got g = {.n = 0};
	size_t off = 0;

	(void)state;
	put_nflog_prefix(buf, &off, AF_INET, pkt,
	                 ipv4_packet(pkt, IPPROTO_TCP, "203.0.113.7", 25, 0),
	                 NFT_REFUSE_PREFIX_NO_RULE);
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 53, 0));
	assert_int_equal(nflog_parse(buf, off, collect, &g), 2);
	assert_string_equal(g.pkt[0].prefix, "airlock-syn no-rule");
	assert_int_equal(g.pkt[0].sport, 40000);
	assert_int_equal(g.pkt[0].dport, 25);
	assert_string_equal(g.pkt[1].prefix, "");
	/* A prefix without its NUL is not what the kernel sends. */
	off = 0;
	{
		struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
		struct nfgenmsg *nfg;
		struct nfulnl_msg_packet_hdr ph = {.hook = NF_INET_LOCAL_OUT};

		nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET;
		nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
		nfg->nfgen_family = AF_INET;
		mnl_attr_put(nlh, NFULA_PACKET_HDR, sizeof(ph), &ph);
		mnl_attr_put(nlh, NFULA_PREFIX, 3, "abc");
		mnl_attr_put(nlh, NFULA_PAYLOAD, ipv4_packet(pkt, IPPROTO_TCP, "192.0.2.1", 1, 0),
		             pkt);
		off = NLMSG_ALIGN(nlh->nlmsg_len);
	}
	assert_int_equal(nflog_parse(buf, off, NULL, NULL), -1);
}

/* --- nflog_reader: datagrams in, egress log lines out --------------------- */

static void
test_nflog_reader(void **state)
{
	uint8_t buf[1024] __attribute__((aligned(4)));
	uint8_t pkt[64];
	char out[4096];
	size_t off = 0;
	struct event_base *base;
	struct nflog_reader *r;
	struct elog *log;
	int sv[2], pfd[2];
	ssize_t n;

	(void)state;
	/* A datagram socket stands in for the netlink socket: the reader
	 * only recv()s whole datagrams. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(pipe2(pfd, O_CLOEXEC | O_NONBLOCK), 0);
	log = elog_open_fd(pfd[1]);
	assert_non_null(log);
	base = event_base_new();
	assert_non_null(base);
	r = nflog_reader_new(base, sv[0], log);
	assert_non_null(r);

	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_UDP, "203.0.113.7", 9999, 0));
	put_nflog(buf, &off, AF_INET6, pkt,
	          ipv6_packet(pkt, IPPROTO_ICMPV6, "2001:db8::7", 0, false));
	assert_int_equal(send(sv[1], buf, off, 0), (ssize_t)off);
	/* Garbage is skipped (one warning), the reader keeps going. */
	assert_int_equal(send(sv[1], "garbage!", 8, 0), 8);
	off = 0;
	put_nflog(buf, &off, AF_INET, pkt, ipv4_packet(pkt, IPPROTO_TCP, "192.0.2.80", 80, 0));
	assert_int_equal(send(sv[1], buf, off, 0), (ssize_t)off);

	assert_int_equal(event_base_loop(base, EVLOOP_NONBLOCK), 0);
	n = read(pfd[0], out, sizeof(out) - 1);
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "\"kind\":\"packet\",\"ip\":\"203.0.113.7\","
	                            "\"port\":9999,\"verdict\":\"deny\""));
	assert_non_null(strstr(out, "\"proto\":\"udp\""));
	assert_non_null(strstr(out, "\"ip\":\"2001:db8::7\",\"verdict\":\"deny\""));
	assert_non_null(strstr(out, "\"proto\":\"icmpv6\""));
	assert_non_null(strstr(out, "\"ip\":\"192.0.2.80\",\"port\":80"));
	assert_non_null(strstr(out, "blocked by the sandbox firewall"));
	/* Exactly three lines: one per packet, none for the garbage. */
	n = 0;
	for (char *p = out; (p = strchr(p, '\n')) != NULL; p++)
		n++;
	assert_int_equal(n, 3);

	/* The reader owns the fd. */
	nflog_reader_free(r);
	assert_int_equal(fcntl(sv[0], F_GETFD), -1);
	assert_int_equal(errno, EBADF);
	nflog_reader_free(NULL);
	event_base_free(base);
	elog_free(log);
	close(pfd[0]);
	close(sv[1]);
}

/* --- nflog_reader aggregation: floods in, bounded lines out --------------- */

/* A reader on a socketpair logging to a memfd, so tests can read back as
 * many lines as they like (a pipe would fill). */
struct agg {
	struct event_base *base;
	struct nflog_reader *r;
	struct elog *log;
	int sv1, logfd;
	uint8_t buf[4096] __attribute__((aligned(4)));
	size_t off;
};

static void
agg_open(struct agg *a, unsigned window_ms, size_t max_dests)
{
	struct nflog_reader_opts opts = {.window_ms = window_ms, .max_dests = max_dests};
	int sv[2];

	memset(a, 0, sizeof(*a));
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv), 0);
	a->sv1 = sv[1];
	a->logfd = memfd_create("nflog-test-log", MFD_CLOEXEC);
	assert_true(a->logfd >= 0);
	a->log = elog_open_fd(dup(a->logfd));
	assert_non_null(a->log);
	a->base = event_base_new();
	assert_non_null(a->base);
	a->r = nflog_reader_new_opts(a->base, sv[0], a->log, &opts);
	assert_non_null(a->r);
}

/* Send what is batched as one datagram and let the reader read it. */
static void
agg_send(struct agg *a)
{
	if (a->off == 0)
		return;
	assert_int_equal(send(a->sv1, a->buf, a->off, 0), (ssize_t)a->off);
	a->off = 0;
	assert_int_equal(event_base_loop(a->base, EVLOOP_NONBLOCK), 0);
}

/* Queue n UDP (or TCP) packets to dst:port, many per datagram. */
static void
agg_packets(struct agg *a, int family, uint8_t proto, const char *dst, uint16_t port, int n)
{
	uint8_t pkt[64];
	size_t plen;

	for (int i = 0; i < n; i++) {
		if (sizeof(a->buf) - a->off < 256)
			agg_send(a);
		plen = family == AF_INET ? ipv4_packet(pkt, proto, dst, port, 0)
		                         : ipv6_packet(pkt, proto, dst, port, false);
		put_nflog(a->buf, &a->off, family, pkt, plen);
	}
}

/* The whole log so far, NUL-terminated (free it). */
static char *
agg_log(const struct agg *a)
{
	off_t size = lseek(a->logfd, 0, SEEK_END);
	char *s;

	assert_true(size >= 0);
	s = malloc((size_t)size + 1);
	assert_non_null(s);
	assert_int_equal(pread(a->logfd, s, (size_t)size, 0), (ssize_t)size);
	s[size] = '\0';
	return s;
}

static int
count_str(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)) != NULL; s += strlen(what))
		n++;
	return n;
}

/* Frees what is left (the reader, if the test has not). */
static void
agg_close(struct agg *a)
{
	nflog_reader_free(a->r);
	event_base_free(a->base);
	elog_free(a->log);
	close(a->logfd);
	close(a->sv1);
}

/* One TCP SYN the refuse chain logged, from source port sport with
 * sequence number seq (a retransmit repeats it). */
static void
agg_syn_seq(struct agg *a, int family, const char *dst, uint16_t dport, uint16_t sport,
            uint32_t seq, const char *prefix)
{
	uint8_t pkt[64];
	size_t plen = family == AF_INET ? ipv4_packet(pkt, IPPROTO_TCP, dst, dport, 0)
	                                : ipv6_packet(pkt, IPPROTO_TCP, dst, dport, false);
	size_t l4 = family == AF_INET ? 20 : 40;

	pkt[l4] = (uint8_t)(sport >> 8);
	pkt[l4 + 1] = (uint8_t)sport;
	pkt[l4 + 4] = (uint8_t)(seq >> 24);
	pkt[l4 + 5] = (uint8_t)(seq >> 16);
	pkt[l4 + 6] = (uint8_t)(seq >> 8);
	pkt[l4 + 7] = (uint8_t)seq;
	put_nflog_prefix(a->buf, &a->off, family, pkt, plen, prefix);
}

static void
agg_syn(struct agg *a, int family, const char *dst, uint16_t dport, uint16_t sport,
        const char *prefix)
{
	agg_syn_seq(a, family, dst, dport, sport, 1000, prefix);
}

static void
test_nflog_syn_refused(void **state)
{
	struct agg a;
	char *log;

	(void)state;
	agg_open(&a, 60000, 0);
	/* One attempt and its two retransmits, then a second attempt. */
	agg_syn(&a, AF_INET, "203.0.113.7", 25, 40000, NFT_REFUSE_PREFIX_NO_RULE);
	agg_syn(&a, AF_INET, "203.0.113.7", 25, 40000, NFT_REFUSE_PREFIX_NO_RULE);
	agg_syn(&a, AF_INET, "203.0.113.7", 25, 40000, NFT_REFUSE_PREFIX_NO_RULE);
	agg_syn(&a, AF_INET, "203.0.113.7", 25, 40001, NFT_REFUSE_PREFIX_NO_RULE);
	/* A new connection from the first one's port (the kernel reused
	 * it): another sequence number, another attempt. */
	agg_syn_seq(&a, AF_INET, "203.0.113.7", 25, 40000, 777777, NFT_REFUSE_PREFIX_NO_RULE);
	agg_syn(&a, AF_INET6, "fd00::1", 80, 41000, NFT_REFUSE_PREFIX_GUARD);
	agg_syn(&a, AF_INET, "169.254.169.254", 80, 41001, NFT_REFUSE_PREFIX_GUARD);
	/* The catch-all's TCP packet to the same place is a packet line. */
	agg_syn(&a, AF_INET, "203.0.113.7", 25, 40002, "");
	/* A prefix on anything but TCP is not a refused connection. */
	agg_packets(&a, AF_INET, IPPROTO_UDP, "203.0.113.8", 25, 1);
	agg_send(&a);

	/* At once: the first attempt to each refused destination, and the
	 * two packet lines; the second and third attempts to 203.0.113.7:25
	 * are repeats the log counts (elog_event_agg), the retransmits
	 * nothing. */
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 5);
	assert_int_equal(count_str(log,
	                           "\"kind\":\"tcp\",\"ip\":\"203.0.113.7\",\"port\":25,"
	                           "\"verdict\":\"deny\",\"reason\":\"no-rule\",\"bytes_up\":0,"
	                           "\"bytes_down\":0,\"duration_ms\":0,"
	                           "\"detail\":\"no rule allows address 203.0.113.7 port 25\","),
	                 1);
	assert_int_equal(count_str(log, "\"kind\":\"tcp\",\"ip\":\"fd00::1\",\"port\":80,"
	                                "\"verdict\":\"deny\",\"reason\":\"address-guard\""),
	                 1);
	assert_int_equal(count_str(log, "\"detail\":\"fd00::1 is private (address guard)\""), 1);
	assert_int_equal(
	        count_str(log, "\"detail\":\"169.254.169.254 is link-local (address guard)\""), 1);
	assert_int_equal(count_str(log, "\"kind\":\"packet\""), 2);
	assert_int_equal(count_str(log, "\"proto\":"), 2);
	free(log);

	/* Closing the reader's window writes nothing for the retransmits;
	 * closing the log's, one line counting the other two attempts. */
	nflog_reader_free(a.r);
	a.r = NULL;
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 5);
	free(log);
	elog_flush(a.log);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 6);
	assert_int_equal(count_str(log, "\"kind\":\"tcp\",\"ip\":\"203.0.113.7\",\"port\":25,"), 2);
	assert_int_equal(count_str(log, "\"count\":2,"), 1);
	free(log);
	agg_close(&a);
}

/* Refused SYNs from many source ports to one address take at most half
 * the destination table: a UDP packet to a new destination afterwards is
 * still itemised (named in a line of its own), not an overflow count. */
static void
test_nflog_syn_flood_share(void **state)
{
	struct agg a;
	char *log;

	(void)state;
	agg_open(&a, 60000, 64);
	for (int i = 0; i < 500; i++) {
		if (sizeof(a.buf) - a.off < 256)
			agg_send(&a);
		agg_syn(&a, AF_INET, "203.0.113.7", 25, (uint16_t)(30000 + i), NFT_REFUSE_PREFIX_NO_RULE);
	}
	agg_packets(&a, AF_INET, IPPROTO_UDP, "198.51.100.99", 4444, 1);
	agg_send(&a);
	nflog_reader_free(a.r);
	a.r = NULL;
	elog_flush(a.log);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\"ip\":\"198.51.100.99\",\"port\":4444"), 1);
	assert_int_equal(count_str(log, "not itemised"), 0);
	free(log);
	agg_close(&a);
}

static void
test_nflog_aggregate(void **state)
{
	struct agg a;
	char *log;

	(void)state;
	/* A window longer than the test: only freeing the reader closes it. */
	agg_open(&a, 60000, 0);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "203.0.113.7", 9999, 100);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "203.0.113.7", 9998, 3);
	agg_packets(&a, AF_INET, IPPROTO_TCP, "203.0.113.7", 9999, 1);
	agg_packets(&a, AF_INET6, IPPROTO_UDP, "2001:db8::7", 53, 50);
	agg_send(&a);

	/* One line per destination at once, each packet's own. */
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 4);
	assert_int_equal(count_str(log, "\"detail\":\"blocked by the sandbox firewall\",\"seq\":"),
	                 4);
	assert_int_equal(count_str(log, "\"ip\":\"203.0.113.7\",\"port\":9999,"), 2);
	assert_int_equal(count_str(log, "\"ip\":\"203.0.113.7\",\"port\":9998,"), 1);
	assert_int_equal(count_str(log, "\"ip\":\"2001:db8::7\",\"port\":53,"), 1);
	assert_int_equal(count_str(log, "\"proto\":\"tcp\""), 1);
	free(log);

	/* Freeing closes the window: one line per destination that had more,
	 * with the packets no line showed yet. */
	nflog_reader_free(a.r);
	a.r = NULL;
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 7);
	assert_non_null(strstr(log, "\"ip\":\"203.0.113.7\",\"port\":9998,\"verdict\":\"deny\","
	                            "\"reason\":\"firewall\""));
	assert_non_null(strstr(log, "\"detail\":\"blocked by the sandbox firewall; 2 more packets "
	                            "since the last line\""));
	assert_non_null(strstr(log, "\"ip\":\"203.0.113.7\",\"port\":9999,\"verdict\":\"deny\","
	                            "\"reason\":\"firewall\""));
	assert_non_null(strstr(log, "\"detail\":\"blocked by the sandbox firewall; 99 more packets "
	                            "since the last line\""));
	assert_non_null(strstr(log, "\"ip\":\"2001:db8::7\",\"port\":53,\"verdict\":\"deny\","
	                            "\"reason\":\"firewall\""));
	assert_non_null(strstr(log, "\"detail\":\"blocked by the sandbox firewall; 49 more packets "
	                            "since the last line\""));
	/* The single TCP packet needs no second line. */
	assert_int_equal(count_str(log, "more packets"), 3);
	free(log);
	agg_close(&a);
}

static void
test_nflog_aggregate_window(void **state)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 400 * 1000};
	struct agg a;
	char *log;

	(void)state;
	agg_open(&a, 30, 0);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "198.51.100.9", 443, 20);
	agg_send(&a);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 1);
	free(log);

	/* The timer closes the window: the count line. Two more quiet
	 * windows forget the destination and stop the timer. */
	assert_int_equal(event_base_loopexit(a.base, &tv), 0);
	assert_int_equal(event_base_dispatch(a.base), 0);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 2);
	assert_non_null(strstr(log, "\"ip\":\"198.51.100.9\",\"port\":443,\"verdict\":\"deny\","
	                            "\"reason\":\"firewall\""));
	assert_non_null(strstr(log, "\"detail\":\"blocked by the sandbox firewall; 19 more packets "
	                            "since the last line\""));
	/* The counts as numbers too: 1 on the first line, 19 on this one. */
	assert_non_null(strstr(log, "\"proto\":\"udp\",\"packets\":1,\"detail\""));
	assert_non_null(strstr(log, "\"proto\":\"udp\",\"packets\":19,\"detail\""));
	free(log);

	/* Forgotten: its next packet is written at once again. */
	agg_packets(&a, AF_INET, IPPROTO_UDP, "198.51.100.9", 443, 1);
	agg_send(&a);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 3);
	assert_int_equal(count_str(log, "\"detail\":\"blocked by the sandbox firewall\",\"seq\":"),
	                 2);
	free(log);

	/* Nothing left to count: freeing writes nothing more. */
	nflog_reader_free(a.r);
	a.r = NULL;
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 3);
	free(log);
	agg_close(&a);
}

/* The sum of the log's "packets" fields. */
static unsigned long
sum_packets(const char *log)
{
	static const char key[] = "\"packets\":";
	unsigned long sum = 0;

	for (const char *p = strstr(log, key); p != NULL; p = strstr(p + 1, key))
		sum += strtoul(p + sizeof(key) - 1, NULL, 10);
	return sum;
}

static void
test_nflog_aggregate_bounded(void **state)
{
	char dst[INET_ADDRSTRLEN];
	struct agg a;
	char *log;
	int i, round;

	(void)state;
	agg_open(&a, 60000, 0);
	/* 10,000 distinct destinations, twice each. */
	for (round = 0; round < 2; round++) {
		for (i = 0; i < 10000; i++) {
			snprintf(dst, sizeof(dst), "203.0.113.%d", i % 250);
			agg_packets(&a, AF_INET, IPPROTO_UDP, dst, (uint16_t)(1000 + i / 250), 1);
		}
	}
	agg_send(&a);
	log = agg_log(&a);
	/* Only the table's worth is itemised. */
	assert_int_equal(count_str(log, "\n"), NFLOG_AGG_MAX_DESTS);
	free(log);

	nflog_reader_free(a.r);
	a.r = NULL;
	log = agg_log(&a);
	/* + one count line per table entry + one overflow line. */
	assert_int_equal(count_str(log, "\n"), 2 * NFLOG_AGG_MAX_DESTS + 1);
	assert_int_equal(count_str(log, "; 1 more packets since the last line"),
	                 NFLOG_AGG_MAX_DESTS);
	assert_int_equal(count_str(log, "\"verdict\":\"deny\",\"reason\":\"firewall-overflow\""),
	                 1);
	assert_int_equal(count_str(log, "\"detail\":\"too many blocked "
	                                "destinations; 17952 packets not itemised\""),
	                 1);
	assert_int_equal(count_str(log, "\"packets\":17952,\"detail\""), 1);
	/* Every packet is counted once: 1024 first lines and 1024 count
	 * lines of 1 each, and the rest on the overflow line. */
	assert_int_equal(count_str(log, "\"packets\":1,\"detail\""), 2 * NFLOG_AGG_MAX_DESTS);
	assert_int_equal(sum_packets(log), 2 * 10000);
	free(log);
	agg_close(&a);
}

/* A small table from the options, and the overflow line once per window. */
static void
test_nflog_aggregate_small_table(void **state)
{
	struct timeval tv = {.tv_sec = 0, .tv_usec = 100 * 1000};
	struct agg a;
	char *log;

	(void)state;
	agg_open(&a, 20, 2);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "192.0.2.1", 1, 1);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "192.0.2.2", 1, 1);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "192.0.2.3", 1, 5);
	agg_packets(&a, AF_INET, IPPROTO_UDP, "192.0.2.4", 1, 5);
	agg_send(&a);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 2);
	assert_null(strstr(log, "192.0.2.3"));
	free(log);
	assert_int_equal(event_base_loopexit(a.base, &tv), 0);
	assert_int_equal(event_base_dispatch(a.base), 0);
	log = agg_log(&a);
	assert_int_equal(count_str(log, "\n"), 3);
	assert_non_null(strstr(log, "\"kind\":\"packet\",\"verdict\":\"deny\","
	                            "\"reason\":\"firewall-overflow\""));
	assert_non_null(strstr(log, "\"detail\":\"too many "
	                            "blocked destinations; 10 packets not itemised\""));
	free(log);
	agg_close(&a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_ruleset_batch),
	        cmocka_unit_test(test_ruleset_defaults),
	        cmocka_unit_test(test_ruleset_small_buffer),
	        cmocka_unit_test(test_nflog_udp_v4),
	        cmocka_unit_test(test_nflog_udp_v6),
	        cmocka_unit_test(test_nflog_v6_exthdr_and_batch),
	        cmocka_unit_test(test_nflog_no_ports),
	        cmocka_unit_test(test_nflog_truncated),
	        cmocka_unit_test(test_nflog_malformed),
	        cmocka_unit_test(test_nflog_garbage),
	        cmocka_unit_test(test_ruleset_refuse),
	        cmocka_unit_test(test_nflog_prefix),
	        cmocka_unit_test(test_nflog_reader),
	        cmocka_unit_test(test_nflog_syn_refused),
	        cmocka_unit_test(test_nflog_syn_flood_share),
	        cmocka_unit_test(test_nflog_aggregate),
	        cmocka_unit_test(test_nflog_aggregate_window),
	        cmocka_unit_test(test_nflog_aggregate_bounded),
	        cmocka_unit_test(test_nflog_aggregate_small_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
