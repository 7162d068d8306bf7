/* Unit tests for upstream addresses: --dns-upstream and resolv.conf
 * (dns/upstream.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <netinet/in.h>
#include <unistd.h>

#include "dns/dns.h"

static void
check_v4(const struct sockaddr_storage *ss, const char *ip, unsigned port)
{
	const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
	char buf[INET_ADDRSTRLEN];

	assert_int_equal(ss->ss_family, AF_INET);
	inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
	assert_string_equal(buf, ip);
	assert_int_equal(ntohs(a->sin_port), port);
}

static void
check_v6(const struct sockaddr_storage *ss, const char *ip, unsigned port)
{
	const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
	char buf[INET6_ADDRSTRLEN];

	assert_int_equal(ss->ss_family, AF_INET6);
	inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf));
	assert_string_equal(buf, ip);
	assert_int_equal(ntohs(a->sin6_port), port);
}

static void
test_parse(void **state)
{
	struct sockaddr_storage ss;
	static const char *const bad[] = {
	        "",
	        "resolver.example",
	        "192.0.2.1:0",
	        "192.0.2.1:65536",
	        "192.0.2.1:",
	        "192.0.2.1:53x",
	        "[2001:db8::1",
	        "[2001:db8::1]x",
	        "[2001:db8::1]:",
	        "[192.0.2.1]x",
	        "300.1.1.1",
	        "[]:53",
	};

	(void)state;
	assert_int_equal(dns_upstream_parse("192.0.2.1", &ss), 0);
	check_v4(&ss, "192.0.2.1", 53);
	assert_int_equal(dns_upstream_parse("192.0.2.1:5353", &ss), 0);
	check_v4(&ss, "192.0.2.1", 5353);
	assert_int_equal(dns_upstream_parse("2001:db8::1", &ss), 0);
	check_v6(&ss, "2001:db8::1", 53);
	assert_int_equal(dns_upstream_parse("[2001:db8::1]:5300", &ss), 0);
	check_v6(&ss, "2001:db8::1", 5300);
	assert_int_equal(dns_upstream_parse("[2001:db8::1]", &ss), 0);
	check_v6(&ss, "2001:db8::1", 53);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (dns_upstream_parse(bad[i], &ss) == 0)
			fail_msg("'%s' was accepted", bad[i]);
	}
	assert_int_equal(dns_upstream_parse(NULL, &ss), -1);
}

static void
test_resolv_conf(void **state)
{
	char path[] = "/tmp/test-resolv.XXXXXX";
	struct sockaddr_storage ss[DNS_MAX_UPSTREAMS];
	int fd = mkstemp(path);
	FILE *f;

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("# generated\n"
	      "search example.test\n"
	      "options edns0 timeout:1\n"
	      "nameserver 192.0.2.1\n"
	      "  nameserver\t198.51.100.2 # trailing comment\n"
	      "nameserver not-an-address\n"
	      "nameserver\n"
	      "nameservers 192.0.2.99\n"
	      ";nameserver 192.0.2.98\n"
	      "nameserver 2001:db8::53\n",
	      f);
	/* An overlong line is skipped whole, not read as two lines. */
	for (int i = 0; i < 2000; i++)
		fputc('x', f);
	fputs(" nameserver 192.0.2.97\n", f);
	fputs("nameserver 203.0.113.4\n"
	      "nameserver 203.0.113.5\n",
	      f);
	fclose(f);
	assert_int_equal(dns_upstream_from_resolv_conf(path, ss, DNS_MAX_UPSTREAMS), 4);
	check_v4(&ss[0], "192.0.2.1", 53);
	check_v4(&ss[1], "198.51.100.2", 53);
	check_v6(&ss[2], "2001:db8::53", 53);
	check_v4(&ss[3], "203.0.113.4", 53);
	assert_int_equal(dns_upstream_from_resolv_conf(path, ss, 1), 1);
	unlink(path);
	assert_int_equal(dns_upstream_from_resolv_conf(path, ss, 1), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_parse),
	        cmocka_unit_test(test_resolv_conf),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
