/* The address guard: every range, v4-mapped and NAT64 looked through,
 * the lab's documentation ranges public, the egress source reserved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "policy/guard.h"
#include "tests/policy/util.h"

static void
expect_class(const char *text, enum guard_class want)
{
	struct sockaddr_storage ss;
	enum guard_class got = guard_classify(addr(&ss, text));

	if (got != want)
		fail_msg("%s: %s, expected %s", text, guard_class_name(got),
		         guard_class_name(want));
}

static void
test_v4(void **state)
{
	static const struct {
		const char *a;
		enum guard_class c;
	} cases[] = {
	        {"0.0.0.0", GUARD_UNSPECIFIED},
	        {"0.255.255.255", GUARD_UNSPECIFIED},
	        {"1.0.0.0", GUARD_PUBLIC},
	        {"9.255.255.255", GUARD_PUBLIC},
	        {"10.0.0.0", GUARD_PRIVATE},
	        {"10.255.255.255", GUARD_PRIVATE},
	        {"11.0.0.0", GUARD_PUBLIC},
	        {"100.63.255.255", GUARD_PUBLIC},
	        {"100.64.0.0", GUARD_CGNAT},
	        {"100.127.255.255", GUARD_CGNAT},
	        {"100.128.0.0", GUARD_PUBLIC},
	        {"126.255.255.255", GUARD_PUBLIC},
	        {"127.0.0.1", GUARD_LOOPBACK},
	        {"127.255.255.255", GUARD_LOOPBACK},
	        {"128.0.0.0", GUARD_PUBLIC},
	        {"169.253.255.255", GUARD_PUBLIC},
	        {"169.254.169.254", GUARD_LINK_LOCAL},
	        {"169.254.0.0", GUARD_LINK_LOCAL},
	        {"169.255.0.0", GUARD_PUBLIC},
	        {"172.15.255.255", GUARD_PUBLIC},
	        {"172.16.0.0", GUARD_PRIVATE},
	        {"172.31.255.255", GUARD_PRIVATE},
	        {"172.32.0.0", GUARD_PUBLIC},
	        {"192.0.0.1", GUARD_RESERVED},
	        {"192.0.1.255", GUARD_PUBLIC},
	        /* TEST-NET-1/2/3: the lab's fake internet, public on purpose */
	        {"192.0.2.0", GUARD_PUBLIC},
	        {"192.0.2.255", GUARD_PUBLIC},
	        {"198.51.100.1", GUARD_PUBLIC},
	        {"203.0.113.254", GUARD_PUBLIC},
	        {"192.88.99.1", GUARD_RESERVED},
	        {"192.167.255.255", GUARD_PUBLIC},
	        {"192.168.0.0", GUARD_PRIVATE},
	        {"192.168.255.255", GUARD_PRIVATE},
	        {"192.169.0.0", GUARD_PUBLIC},
	        /* benchmark range: the sandbox's own egress source */
	        {"198.17.255.255", GUARD_PUBLIC},
	        {"198.18.0.1", GUARD_RESERVED},
	        {"198.19.255.255", GUARD_RESERVED},
	        {"198.20.0.0", GUARD_PUBLIC},
	        {"223.255.255.255", GUARD_PUBLIC},
	        {"224.0.0.1", GUARD_MULTICAST},
	        {"239.255.255.255", GUARD_MULTICAST},
	        {"240.0.0.0", GUARD_RESERVED},
	        {"255.255.255.255", GUARD_RESERVED},
	        {"8.8.8.8", GUARD_PUBLIC},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_class(cases[i].a, cases[i].c);
}

static void
test_v6(void **state)
{
	static const struct {
		const char *a;
		enum guard_class c;
	} cases[] = {
	        {"::", GUARD_UNSPECIFIED},
	        {"::1", GUARD_LOOPBACK},
	        {"::2", GUARD_RESERVED},
	        {"2001:db8::1", GUARD_PUBLIC},
	        {"2001:db8:ffff::1", GUARD_PUBLIC},
	        {"2606:4700::1", GUARD_PUBLIC},
	        {"2a00::1", GUARD_PUBLIC},
	        {"3fff::1", GUARD_PUBLIC},
	        {"fc00::1", GUARD_PRIVATE},
	        {"fd00:a1::1", GUARD_PRIVATE},
	        {"fdff::1", GUARD_PRIVATE},
	        {"fe80::1", GUARD_LINK_LOCAL},
	        {"febf::1", GUARD_LINK_LOCAL},
	        {"fec0::1", GUARD_PRIVATE},
	        {"ff02::1", GUARD_MULTICAST},
	        {"ff0e::1", GUARD_MULTICAST},
	        {"100::1", GUARD_RESERVED},
	        {"2001::1", GUARD_RESERVED},
	        {"2001:10::1", GUARD_RESERVED},
	        {"64:ff9b:1::1", GUARD_RESERVED},
	        {"4000::1", GUARD_RESERVED},
	        {"1::", GUARD_RESERVED},
	        {"::10.0.0.1", GUARD_RESERVED},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		expect_class(cases[i].a, cases[i].c);
}

/* Addresses with an IPv4 address inside are judged by that address. */
static void
test_embedded_v4(void **state)
{
	(void)state;
	expect_class("::ffff:127.0.0.1", GUARD_LOOPBACK);
	expect_class("::ffff:169.254.169.254", GUARD_LINK_LOCAL);
	expect_class("::ffff:10.1.2.3", GUARD_PRIVATE);
	expect_class("::ffff:203.0.113.7", GUARD_PUBLIC);
	expect_class("::ffff:0.0.0.0", GUARD_UNSPECIFIED);
	expect_class("64:ff9b::a9fe:a9fe", GUARD_LINK_LOCAL);
	expect_class("64:ff9b::127.0.0.1", GUARD_LOOPBACK);
	expect_class("64:ff9b::192.168.1.1", GUARD_PRIVATE);
	expect_class("64:ff9b::100.64.0.1", GUARD_CGNAT);
	expect_class("64:ff9b::198.18.0.1", GUARD_RESERVED);
	expect_class("64:ff9b::8.8.8.8", GUARD_PUBLIC);
	expect_class("2002:7f00:1::", GUARD_LOOPBACK); /* 6to4 of 127.0.0.1 */
	expect_class("2002:a9fe:a9fe::1", GUARD_LINK_LOCAL);
	expect_class("2002:cb00:7101::", GUARD_PUBLIC);
}

static void
test_other_family(void **state)
{
	struct sockaddr_storage ss = {.ss_family = AF_UNIX};

	(void)state;
	assert_int_equal(guard_classify((struct sockaddr *)&ss), GUARD_RESERVED);
	assert_int_equal(guard_classify(NULL), GUARD_RESERVED);
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(guard_class_name(GUARD_PUBLIC), "public");
	assert_string_equal(guard_class_name(GUARD_UNSPECIFIED), "unspecified");
	assert_string_equal(guard_class_name(GUARD_LOOPBACK), "loopback");
	assert_string_equal(guard_class_name(GUARD_PRIVATE), "private");
	assert_string_equal(guard_class_name(GUARD_CGNAT), "cgnat");
	assert_string_equal(guard_class_name(GUARD_LINK_LOCAL), "link-local");
	assert_string_equal(guard_class_name(GUARD_MULTICAST), "multicast");
	assert_string_equal(guard_class_name(GUARD_RESERVED), "reserved");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_v4),          cmocka_unit_test(test_v6),
	        cmocka_unit_test(test_embedded_v4), cmocka_unit_test(test_other_family),
	        cmocka_unit_test(test_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
