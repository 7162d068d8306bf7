/* nft/ruleset.c in pod mode (airlock pod-init), without a kernel: the
 * batch is parsed back and every chain and rule, rendered by libnftnl,
 * compared in order: the proxy's uid first in each output chain, then the
 * sandbox's rules with neighbour discovery let by, an input chain that
 * refuses what is not a reply; and the sandbox's ruleset is unchanged. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/rule.h>

#include "nft/nft.h"

#define MAX_RULES 32

struct seen {
	char chains[4][96]; /* "name hook prio policy" */
	int n_chains;
	char rules[MAX_RULES][512]; /* "chain: exprs" */
	int n_rules;
};

static void
parse(const void *buf, long len, struct seen *s)
{
	const struct nlmsghdr *nlh = buf;
	int rest = (int)len;

	memset(s, 0, sizeof(*s));
	while (mnl_nlmsg_ok(nlh, rest)) {
		uint16_t t = nlh->nlmsg_type & 0xff;

		if (nlh->nlmsg_type >> 8 == NFNL_SUBSYS_NFTABLES && t == NFT_MSG_NEWCHAIN) {
			struct nftnl_chain *c = nftnl_chain_alloc();

			assert_int_equal(nftnl_chain_nlmsg_parse(nlh, c), 0);
			assert_true(s->n_chains < 4);
			snprintf(s->chains[s->n_chains++], sizeof(s->chains[0]), "%s %u %d %u",
			         nftnl_chain_get_str(c, NFTNL_CHAIN_NAME),
			         nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
			         nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO),
			         nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY));
			nftnl_chain_free(c);
		} else if (nlh->nlmsg_type >> 8 == NFNL_SUBSYS_NFTABLES && t == NFT_MSG_NEWRULE) {
			struct nftnl_rule *r = nftnl_rule_alloc();
			char text[512];

			assert_int_equal(nftnl_rule_nlmsg_parse(nlh, r), 0);
			assert_true(s->n_rules < MAX_RULES);
			nftnl_rule_snprintf(text, sizeof(text), r, NFTNL_OUTPUT_DEFAULT, 0);
			/* "inet airlock CHAIN (handle) ... [ exprs ]": keep the
			 * chain and the expressions. */
			const char *ex = strchr(text, '[');
			char *out = s->rules[s->n_rules++];
			snprintf(out, sizeof(s->rules[0]), "%s: %s",
			         nftnl_rule_get_str(r, NFTNL_RULE_CHAIN), ex != NULL ? ex : "");
			/* One expression a line, two spaces before each: one line. */
			size_t o = 0;
			for (size_t i = 0; out[i] != '\0'; i++) {
				char ch = out[i] == '\n' ? ' ' : out[i];
				if (ch == ' ' && o > 0 && out[o - 1] == ' ')
					continue;
				out[o++] = ch;
			}
			while (o > 0 && out[o - 1] == ' ')
				o--;
			out[o] = '\0';
			if (getenv("TEST_POD_VERBOSE") != NULL)
				printf("%s\n", out);
			nftnl_rule_free(r);
		}
		nlh = mnl_nlmsg_next(nlh, &rest);
	}
}

/* The rule of chain at its index-th place (0 first), or NULL. */
static const char *
rule_at(const struct seen *s, const char *chain, int index)
{
	size_t cl = strlen(chain);

	for (int i = 0; i < s->n_rules; i++)
		if (strncmp(s->rules[i], chain, cl) == 0 && s->rules[i][cl] == ':' && index-- == 0)
			return s->rules[i];
	return NULL;
}

static int
rules_in(const struct seen *s, const char *chain)
{
	int n = 0;

	while (rule_at(s, chain, n) != NULL)
		n++;
	return n;
}

static void
has(const char *rule, const char *part)
{
	if (rule == NULL)
		fail_msg("no such rule (looking for '%s')", part);
	if (strstr(rule, part) == NULL)
		fail_msg("'%s' not in '%s'", part, rule);
}

static void
build(const struct nft_params *p, struct seen *s)
{
	static uint64_t buf[65536 / 8];
	long len = nft_ruleset_build(p, buf, sizeof(buf), 1);

	assert_true(len > 0);
	parse(buf, len, s);
}

/* uid 3128 is 0x00000c38 in the cmp's host-order data. */
#define SKUID_3128                                                                                 \
	"[ meta load skuid => reg 1 ] [ cmp eq reg 1 0x00000c38 ] [ immediate reg 0 accept ]"

static void
test_pod_rules(void **state)
{
	struct nft_params p;
	struct seen s;
	const char *r;

	(void)state;
	nft_params_default(&p);
	p.pod = true;
	p.pod_exempt_uid = 3128;
	p.tproxy_port = 3129;
	p.dns_port = 3153;
	build(&p, &s);

	assert_int_equal(s.n_chains, 3);
	assert_string_equal(s.chains[0], "nat_output 3 -100 1");
	assert_string_equal(s.chains[1], "filter_output 3 0 0");
	assert_string_equal(s.chains[2], "filter_input 1 0 0");

	/* The exemption comes first, before anything can redirect or drop. */
	has(rule_at(&s, "nat_output", 0), SKUID_3128);
	has(rule_at(&s, "filter_output", 0), SKUID_3128);
	/* Nothing else names a uid: the proxy's is the only exemption. */
	for (int i = 0; i < s.n_rules; i++)
		if (strstr(s.rules[i], "skuid") != NULL)
			assert_true(i == 0 || strncmp(s.rules[i], "filter_output", 13) == 0);
	assert_int_equal(rules_in(&s, "nat_output"), 6);
	/* DNS to the dns port (3153 = 0x0c51, big-endian in the register). */
	has(rule_at(&s, "nat_output", 3), "[ immediate reg 1 0x0000510c ]");
	has(rule_at(&s, "nat_output", 4), "[ immediate reg 1 0x0000510c ]");
	/* Every other TCP to the transparent port (3129 = 0x0c39). */
	has(rule_at(&s, "nat_output", 5), "[ cmp eq reg 1 0x00000006 ]");
	has(rule_at(&s, "nat_output", 5), "[ immediate reg 1 0x0000390c ]");

	/* filter_output: uid, loopback v4 and v6, neighbour discovery
	 * (ipv6-icmp = 58 = 0x3a, types 133-136 = 0x85-0x88, 143 = 0x8f),
	 * established, log, reset, reject. */
	assert_int_equal(rules_in(&s, "filter_output"), 9);
	r = rule_at(&s, "filter_output", 3);
	has(r, "[ cmp eq reg 1 0x0000000a ]"); /* nfproto ipv6 */
	has(r, "[ cmp eq reg 1 0x0000003a ]");
	has(r, "[ cmp gte reg 1 0x00000085 ]");
	has(r, "[ cmp lte reg 1 0x00000088 ]");
	has(r, "accept");
	r = rule_at(&s, "filter_output", 4);
	has(r, "[ cmp eq reg 1 0x0000008f ]");
	has(rule_at(&s, "filter_output", 5), "[ ct load state => reg 1 ]");
	has(rule_at(&s, "filter_output", 6), "[ log group 7 snaplen 128 qthreshold 0 ]");
	has(rule_at(&s, "filter_output", 7), "[ reject type 1 code 0 ]");
	/* The rest, raw ICMPv6 echo too, refused. */
	has(rule_at(&s, "filter_output", 8), "[ reject type 2 code 3 ]");

	/* filter_input: loopback, replies, neighbour discovery (133-137),
	 * logged; the policy drops the rest. */
	assert_int_equal(rules_in(&s, "filter_input"), 4);
	has(rule_at(&s, "filter_input", 0), "[ meta load iiftype => reg 1 ]");
	has(rule_at(&s, "filter_input", 0), "[ cmp eq reg 1 0x00000304 ]");
	has(rule_at(&s, "filter_input", 1), "[ ct load state => reg 1 ]");
	has(rule_at(&s, "filter_input", 2), "[ cmp lte reg 1 0x00000089 ]");
	has(rule_at(&s, "filter_input", 3), "[ log group 7 snaplen 128 qthreshold 0 ]");
}

/* Without pod mode the sandbox's ruleset: no uid, no input chain, no
 * neighbour discovery rule. */
static void
test_sandbox_unchanged(void **state)
{
	struct nft_params p;
	struct seen s;

	(void)state;
	nft_params_default(&p);
	p.pod_exempt_uid = 3128; /* ignored without pod */
	build(&p, &s);
	assert_int_equal(s.n_chains, 2);
	assert_int_equal(rules_in(&s, "nat_output"), 5);
	assert_int_equal(rules_in(&s, "filter_output"), 6);
	assert_int_equal(rules_in(&s, "filter_input"), 0);
	for (int i = 0; i < s.n_rules; i++) {
		assert_null(strstr(s.rules[i], "skuid"));
		assert_null(strstr(s.rules[i], "0x0000003a"));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_pod_rules),
	        cmocka_unit_test(test_sandbox_unchanged),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
