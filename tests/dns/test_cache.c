/* Unit tests for the IP -> name cache (dns/cache.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>

#include "dns/cache.h"

static struct sockaddr_storage
addr(const char *s)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(s, ':') != NULL) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, s, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, s, &a->sin_addr), 1);
	}
	return ss;
}

#define SA(x) ((const struct sockaddr *)&(x))

static void
test_put_lookup_expiry(void **state)
{
	struct dns_cache *c = dns_cache_new(8);
	struct sockaddr_storage a = addr("203.0.113.10");
	struct sockaddr_storage other = addr("203.0.113.11");

	(void)state;
	assert_non_null(c);
	dns_cache_put(c, SA(a), "pypi.org", 60, 1000);
	assert_string_equal(dns_cache_lookup(c, SA(a), 1000), "pypi.org");
	assert_string_equal(dns_cache_lookup(c, SA(a), 1059), "pypi.org");
	assert_null(dns_cache_lookup(c, SA(other), 1000));
	/* Expired at now >= put + ttl, and then gone for good. */
	assert_null(dns_cache_lookup(c, SA(a), 1060));
	assert_null(dns_cache_lookup(c, SA(a), 1000));
	/* A zero TTL never matches. */
	dns_cache_put(c, SA(a), "zero.test", 0, 2000);
	assert_null(dns_cache_lookup(c, SA(a), 2000));
	dns_cache_free(c);
}

static void
test_v4_v6_distinct(void **state)
{
	struct dns_cache *c = dns_cache_new(8);
	struct sockaddr_storage v4 = addr("192.0.2.1");
	struct sockaddr_storage v6 = addr("2001:db8::1");
	/* Same 4 leading bytes as v4 in a v6 address must not collide. */
	struct sockaddr_storage v6b = addr("c000:201::");
	struct sockaddr_storage unix_sa;

	(void)state;
	dns_cache_put(c, SA(v4), "four.test", 100, 0);
	dns_cache_put(c, SA(v6), "six.test", 100, 0);
	assert_string_equal(dns_cache_lookup(c, SA(v4), 1), "four.test");
	assert_string_equal(dns_cache_lookup(c, SA(v6), 1), "six.test");
	assert_null(dns_cache_lookup(c, SA(v6b), 1));
	/* Other families are ignored. */
	memset(&unix_sa, 0, sizeof(unix_sa));
	unix_sa.ss_family = AF_UNIX;
	dns_cache_put(c, SA(unix_sa), "nope", 100, 0);
	assert_null(dns_cache_lookup(c, SA(unix_sa), 1));
	dns_cache_free(c);
}

static void
test_update_and_eviction(void **state)
{
	struct dns_cache *c = dns_cache_new(4);
	struct sockaddr_storage a[6];
	char ip[32], name[32];

	(void)state;
	for (int i = 0; i < 6; i++) {
		snprintf(ip, sizeof(ip), "198.51.100.%d", i + 1);
		a[i] = addr(ip);
	}
	for (int i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		dns_cache_put(c, SA(a[i]), name, 100, 0);
	}
	/* Re-putting a[0] makes it the newest and renames it. */
	dns_cache_put(c, SA(a[0]), "renamed.test", 100, 0);
	assert_string_equal(dns_cache_lookup(c, SA(a[0]), 1), "renamed.test");
	/* Two more: the oldest two (a[1], a[2]) go, a[0] stays. */
	dns_cache_put(c, SA(a[4]), "n4.test", 100, 0);
	dns_cache_put(c, SA(a[5]), "n5.test", 100, 0);
	assert_null(dns_cache_lookup(c, SA(a[1]), 1));
	assert_null(dns_cache_lookup(c, SA(a[2]), 1));
	assert_string_equal(dns_cache_lookup(c, SA(a[3]), 1), "n3.test");
	assert_string_equal(dns_cache_lookup(c, SA(a[0]), 1), "renamed.test");
	assert_string_equal(dns_cache_lookup(c, SA(a[4]), 1), "n4.test");
	assert_string_equal(dns_cache_lookup(c, SA(a[5]), 1), "n5.test");
	dns_cache_free(c);
}

static void
test_many(void **state)
{
	/* Far more puts than slots, with expiries: the bound holds and the
	 * newest entries are always found. */
	struct dns_cache *c = dns_cache_new(100);
	char name[32];

	(void)state;
	assert_null(dns_cache_new(0));
	for (uint32_t i = 0; i < 10000; i++) {
		struct sockaddr_storage ss;
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		memset(&ss, 0, sizeof(ss));
		a->sin6_family = AF_INET6;
		a->sin6_addr.s6_addr[0] = 0x20;
		a->sin6_addr.s6_addr[1] = 0x01;
		memcpy(&a->sin6_addr.s6_addr[12], &i, 4);
		snprintf(name, sizeof(name), "h%u.test", i);
		dns_cache_put(c, SA(ss), name, (i % 3) * 10, i / 100);
		if (i % 3 != 0)
			assert_string_equal(dns_cache_lookup(c, SA(ss), i / 100), name);
	}
	dns_cache_free(c);
	dns_cache_free(NULL);
}

/* One address handed out for several names keeps each (the transparent
 * check asks "was this address told for this name?"); the last put is the
 * name a name-less connection borrows; past 16 names the oldest goes. */
static void
test_told_shared_address(void **state)
{
	struct dns_cache *c = dns_cache_new(64);
	struct sockaddr_storage a = addr("203.0.113.20");
	struct sockaddr_storage b = addr("203.0.113.21");
	char name[32];

	(void)state;
	assert_non_null(c);
	dns_cache_put(c, SA(a), "one.test", 60, 1000);
	dns_cache_put(c, SA(a), "two.test", 120, 1000);
	assert_true(dns_cache_told(c, SA(a), "one.test", 1000));
	assert_true(dns_cache_told(c, SA(a), "TWO.test", 1000));
	assert_false(dns_cache_told(c, SA(a), "three.test", 1000));
	assert_false(dns_cache_told(c, SA(b), "one.test", 1000));
	assert_string_equal(dns_cache_lookup(c, SA(a), 1000), "two.test");
	/* Each name expires on its own TTL. */
	assert_false(dns_cache_told(c, SA(a), "one.test", 1060));
	assert_true(dns_cache_told(c, SA(a), "two.test", 1060));
	/* Put again: the newest name wins the lookup. */
	dns_cache_put(c, SA(a), "one.test", 60, 1070);
	assert_string_equal(dns_cache_lookup(c, SA(a), 1070), "one.test");
	/* Bounded per address. */
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%d.test", i);
		dns_cache_put(c, SA(b), name, 600, 2000 + (uint64_t)i);
	}
	assert_false(dns_cache_told(c, SA(b), "n0.test", 2100));
	assert_false(dns_cache_told(c, SA(b), "n3.test", 2100));
	assert_true(dns_cache_told(c, SA(b), "n4.test", 2100));
	assert_true(dns_cache_told(c, SA(b), "n19.test", 2100));
	assert_string_equal(dns_cache_lookup(c, SA(b), 2100), "n19.test");
	dns_cache_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_put_lookup_expiry),
	        cmocka_unit_test(test_v4_v6_distinct),
	        cmocka_unit_test(test_update_and_eviction),
	        cmocka_unit_test(test_many),
	        cmocka_unit_test(test_told_shared_address),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
