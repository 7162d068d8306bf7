/* The address guard's overrides: which cidr rules open which guarded
 * addresses (policy_cidr_allows, policy_cidr_opens_any), the block
 * prefixes they are judged by (guard_block_prefix), and the warning for
 * allow rules that cover guarded ranges without opening them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "policy/guard.h"
#include "tests/policy/util.h"

static struct policy *
must_load(const char *yaml)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(yaml, &d);

	if (p == NULL)
		fail_msg("load: %s", d.n_lines > 0 ? d.lines[0] : "?");
	policy_diag_clear(&d);
	return p;
}

/* opens: policy_cidr_allows on port 80 and policy_cidr_opens_any agree. */
static void
expect_opens(const struct policy *p, const char *a, bool want)
{
	struct sockaddr_storage ss;
	bool got80 = policy_cidr_allows(p, addr(&ss, a), 80);
	bool any = policy_cidr_opens_any(p, addr(&ss, a));

	if (got80 != want || any != want)
		fail_msg("%s: cidr_allows %d, opens_any %d, expected %d", a, got80, any, want);
}

static void
test_block_prefix(void **state)
{
	static const struct {
		const char *a;
		unsigned plen;
	} cases[] = {
	        {"127.0.0.1", 8},           {"10.1.2.3", 8},
	        {"172.16.0.1", 12},         {"192.168.1.1", 16},
	        {"100.64.0.1", 10},         {"169.254.169.254", 16},
	        {"224.0.0.1", 4},           {"198.18.0.1", 15},
	        {"0.0.0.0", 8},             {"::1", 128},
	        {"::", 128},                {"fe80::1", 10},
	        {"fd00::1", 7},             {"ff02::1", 8},
	        {"::ffff:127.0.0.1", 104},  {"64:ff9b::a9fe:a9fe", 112},
	        {"2002:a9fe:a9fe::1", 32},  {"2001::1", 32},
	        {"64:ff9b:1::1", 48},       {"4000::1", 128},
	};
	struct sockaddr_storage ss;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned got = guard_block_prefix(addr(&ss, cases[i].a));

		if (got != cases[i].plen)
			fail_msg("%s: /%u, expected /%u", cases[i].a, got, cases[i].plen);
	}
	assert_int_equal(guard_block_prefix(addr(&ss, "not-an-address")), 0);
}

static void
test_catch_all_opens_nothing(void **state)
{
	static const char *const yaml[] = {
	        "version: 1\nallow:\n  - cidr: 0.0.0.0/0\n    ports: [\"1-65535\"]\n"
	        "  - cidr: ::/0\n    ports: [\"1-65535\"]\n",
	        "version: 1\nallow:\n  - cidr: 0.0.0.0/1\n  - cidr: 128.0.0.0/1\n"
	        "  - cidr: ::/1\n  - cidr: 8000::/1\n",
	        "version: 1\nallow:\n  - cidr: 8.0.0.0/5\n  - cidr: 64:ff9b::/96\n"
	        "  - cidr: 2002::/16\n  - cidr: fc00::/6\n  - cidr: 169.254.0.0/15\n",
	};
	static const char *const guarded[] = {
	        "127.0.0.1",        "169.254.169.254",    "10.1.2.3",       "::1",
	        "fe80::1",          "::ffff:127.0.0.1",   "64:ff9b::a9fe:a9fe",
	        "2002:a9fe:a9fe::", "::ffff:169.254.169.254", "fd00::1", "100.64.0.1",
	        "0.0.0.0",          "224.0.0.1",          "::",
	};

	(void)state;
	for (size_t y = 0; y < sizeof(yaml) / sizeof(yaml[0]); y++) {
		struct policy *p = must_load(yaml[y]);

		for (size_t i = 0; i < sizeof(guarded) / sizeof(guarded[0]); i++)
			expect_opens(p, guarded[i], false);
		policy_free(p);
	}
	/* The plain verdict is unchanged: 0.0.0.0/0 still allows them. */
	{
		struct policy *p = must_load(yaml[0]);
		struct sockaddr_storage ss;
		struct policy_verdict v;

		policy_match_addr(p, addr(&ss, "169.254.169.254"), 80, &v);
		assert_int_equal(v.action, POLICY_ALLOW);
		policy_match_addr_any(p, addr(&ss, "127.0.0.1"), &v);
		assert_int_equal(v.action, POLICY_ALLOW);
		policy_free(p);
	}
}

static void
test_explicit_rules_open(void **state)
{
	struct policy *p = must_load("version: 1\nallow:\n"
	                             "  - cidr: 127.0.0.0/8\n"
	                             "  - cidr: 10.0.0.5/32\n"
	                             "  - cidr: 169.254.169.254/32\n"
	                             "  - cidr: 172.20.0.0/16\n"
	                             "  - cidr: ::1/128\n"
	                             "  - cidr: fe80::/10\n"
	                             "  - cidr: 64:ff9b::a9fe:a9fe/128\n");

	(void)state;
	expect_opens(p, "127.0.0.1", true);
	expect_opens(p, "127.255.0.9", true);
	expect_opens(p, "::ffff:127.0.0.1", true); /* matched as IPv4 */
	expect_opens(p, "10.0.0.5", true);
	expect_opens(p, "10.0.0.6", false);
	expect_opens(p, "169.254.169.254", true);
	expect_opens(p, "169.254.169.253", false);
	expect_opens(p, "172.20.9.9", true);
	expect_opens(p, "172.21.0.1", false);
	expect_opens(p, "::1", true);
	expect_opens(p, "fe80::1", true);
	expect_opens(p, "64:ff9b::a9fe:a9fe", true);
	expect_opens(p, "64:ff9b::7f00:1", false);
	policy_free(p);

	/* A rule names one guarded block only: 172.16.0.0/12 is private,
	 * 172.0.0.0/8 reaches outside it. */
	p = must_load("version: 1\nallow:\n  - cidr: 172.16.0.0/12\n");
	expect_opens(p, "172.31.255.255", true);
	policy_free(p);
	p = must_load("version: 1\nallow:\n  - cidr: 172.0.0.0/8\n");
	expect_opens(p, "172.16.0.1", false);
	policy_free(p);
}

/* An IPv4 deny rule also refuses the NAT64 (64:ff9b::/96) and 6to4
 * (2002::/16) spellings of its addresses, which a resolver may hand out
 * for an allowed name; an IPv4 allow rule does not allow them (only a
 * rule naming the IPv6 spelling does). */
static void
test_embedded_v4_deny(void **state)
{
	struct policy *p = must_load("version: 1\nallow:\n"
	                             "  - cidr: 64:ff9b::/96\n    ports: [443]\n"
	                             "  - cidr: 2002::/16\n    ports: [443]\n"
	                             "deny:\n"
	                             "  - cidr: 203.0.113.0/24\n    ports: [443]\n");
	struct policy_verdict v;
	struct sockaddr_storage ss;

	(void)state;
	policy_match_addr(p, addr(&ss, "64:ff9b::cb00:7105"), 443, &v); /* 203.0.113.5 */
	assert_int_equal(v.action, POLICY_DENY);
	assert_non_null(strstr(v.where, ":8"));
	policy_match_addr(p, addr(&ss, "2002:cb00:7105::1"), 443, &v);
	assert_int_equal(v.action, POLICY_DENY);
	assert_false(policy_cidr_allows(p, addr(&ss, "64:ff9b::cb00:7105"), 443));
	/* outside the deny range or port: the IPv6 rules decide */
	policy_match_addr(p, addr(&ss, "64:ff9b::c633:6405"), 443, &v); /* 198.51.100.5 */
	assert_int_equal(v.action, POLICY_ALLOW);
	assert_non_null(strstr(v.where, ":3"));
	policy_match_addr(p, addr(&ss, "64:ff9b::cb00:7105"), 80, &v);
	assert_int_equal(v.action, POLICY_NO_MATCH);
	policy_free(p);

	/* Over all ports (DNS answers, guard opening) the IPv4 deny counts
	 * too: an allowed NAT64 address whose IPv4 form is denied on every
	 * allowed port is not opened, and its any-port verdict is deny. */
	p = must_load("version: 1\nallow:\n  - cidr: 64:ff9b::a00:5/128\n    ports: [22]\n"
	              "deny:\n  - cidr: 10.0.0.5/32\n    ports: [22]\n");
	assert_false(policy_cidr_allows(p, addr(&ss, "64:ff9b::a00:5"), 22));
	assert_false(policy_cidr_opens_any(p, addr(&ss, "64:ff9b::a00:5")));
	policy_match_addr_any(p, addr(&ss, "64:ff9b::a00:5"), &v);
	assert_int_equal(v.action, POLICY_DENY);
	policy_free(p);

	p = must_load("version: 1\nallow:\n  - cidr: 198.51.100.0/24\n    ports: [443]\n");
	policy_match_addr(p, addr(&ss, "64:ff9b::c633:6405"), 443, &v);
	assert_int_equal(v.action, POLICY_NO_MATCH);
	policy_match_addr(p, addr(&ss, "2002:c633:6405::1"), 443, &v);
	assert_int_equal(v.action, POLICY_NO_MATCH);
	policy_match_addr(p, addr(&ss, "::ffff:198.51.100.5"), 443, &v); /* mapped: IPv4 */
	assert_int_equal(v.action, POLICY_ALLOW);
	policy_free(p);
}

static void
test_ports_and_deny(void **state)
{
	struct policy *p = must_load("version: 1\nallow:\n"
	                             "  - cidr: 10.0.0.0/8\n    ports: [22]\n"
	                             "  - cidr: 127.0.0.0/8\n    ports: [8080, 9090]\n"
	                             "deny:\n"
	                             "  - cidr: 10.9.0.0/16\n    ports: [22]\n"
	                             "  - cidr: 0.0.0.0/0\n    ports: [9090]\n");
	struct sockaddr_storage ss;

	(void)state;
	assert_true(policy_cidr_allows(p, addr(&ss, "10.1.2.3"), 22));
	assert_false(policy_cidr_allows(p, addr(&ss, "10.1.2.3"), 80));
	/* deny wins, on its ports */
	assert_false(policy_cidr_allows(p, addr(&ss, "10.9.0.1"), 22));
	assert_false(policy_cidr_opens_any(p, addr(&ss, "10.9.0.1")));
	assert_true(policy_cidr_allows(p, addr(&ss, "127.0.0.1"), 8080));
	assert_false(policy_cidr_allows(p, addr(&ss, "127.0.0.1"), 9090));
	assert_true(policy_cidr_opens_any(p, addr(&ss, "127.0.0.1")));
	policy_free(p);
}

static void
test_own_public_address(void **state)
{
	/* The proxy asks for the host's own (public) addresses too: a rule of
	 * /24 or /64 and longer opens them, a catch-all does not. */
	struct policy *wide = must_load("version: 1\nallow:\n  - cidr: 0.0.0.0/0\n"
	                                "  - cidr: ::/0\n  - cidr: 192.0.0.0/16\n"
	                                "  - cidr: 2001:db8::/32\n");
	struct policy *narrow = must_load("version: 1\nallow:\n  - cidr: 192.0.2.0/24\n"
	                                  "  - cidr: 2001:db8:0:1::/64\n"
	                                  "deny:\n  - cidr: 192.0.2.9/32\n");

	(void)state;
	expect_opens(wide, "192.0.2.1", false);
	expect_opens(wide, "2001:db8::1", false);
	expect_opens(narrow, "192.0.2.1", true);
	expect_opens(narrow, "2001:db8:0:1::1", true);
	expect_opens(narrow, "2001:db8:0:2::1", false);
	expect_opens(narrow, "192.0.2.9", false); /* deny wins */
	policy_free(wide);
	policy_free(narrow);
}

/* The "does not open" warnings of yaml are exactly want[0..n), in order
 * (the DoH-resolver warnings a catch-all also earns are not counted). */
static void
expect_warning_lines(const char *yaml, size_t n, const char *const *want)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(yaml, &d);
	size_t k = 0;

	assert_non_null(p);
	for (size_t i = 0; i < d.n_warnings; i++) {
		if (strstr(d.warnings[i], " does not open ") == NULL)
			continue;
		if (k >= n || strcmp(d.warnings[i], want[k]) != 0)
			fail_msg("warning %zu: '%s', expected '%s'", k, d.warnings[i],
			         k < n ? want[k] : "(none)");
		k++;
	}
	assert_int_equal(k, n);
	policy_free(p);
	policy_diag_clear(&d);
}

static void
test_broad_rule_warning(void **state)
{
	static const char *const all[] = {
	        "t.yaml:3: cidr 0.0.0.0/0 does not open "
	        "loopback/private/link-local/cgnat/unspecified/multicast/reserved ranges; "
	        "write those ranges explicitly if you mean them",
	        "t.yaml:4: cidr ::/0 does not open "
	        "loopback/private/link-local/unspecified/multicast/reserved ranges; "
	        "write those ranges explicitly if you mean them",
	};
	static const char *const eight[] = {
	        "t.yaml:3: cidr 8.0.0.0/5 does not open private ranges; "
	        "write those ranges explicitly if you mean them",
	};

	(void)state;
	expect_warning_lines("version: 1\nallow:\n  - cidr: 0.0.0.0/0\n  - cidr: ::/0\n", 2, all);
	expect_warning_lines("version: 1\nallow:\n  - cidr: 8.0.0.0/5\n", 1, eight);
	/* Explicit rules, public ranges and deny rules warn about nothing. */
	expect_warning_lines("version: 1\nallow:\n  - cidr: 127.0.0.0/8\n  - cidr: 10.0.0.5/32\n"
	                     "  - cidr: 169.254.169.254/32\n  - cidr: 192.0.2.0/24\n"
	                     "  - cidr: fe80::/10\n  - cidr: 2001:db8::/32\n"
	                     "deny:\n  - cidr: 0.0.0.0/0\n    ports: [25]\n",
	                     0, NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_block_prefix),
	        cmocka_unit_test(test_catch_all_opens_nothing),
	        cmocka_unit_test(test_explicit_rules_open),
	        cmocka_unit_test(test_embedded_v4_deny),
	        cmocka_unit_test(test_ports_and_deny),
	        cmocka_unit_test(test_own_public_address),
	        cmocka_unit_test(test_broad_rule_warning),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
