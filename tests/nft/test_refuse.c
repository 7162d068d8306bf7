/* nft_refuse_build: which ports and address ranges end up in the refuse
 * chain's sets for a few policies, and that every range is one the proxy
 * refuses too (the guard classifies it as guarded and no cidr rule of the
 * policy opens any address in it, on any port). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "nft/refuse.h"
#include "policy/guard.h"
#include "policy/policy.h"

static struct policy *
load(const char *yaml)
{
	struct policy_diag d = {0};
	struct policy *p = policy_load_buffer("t.yaml", yaml, strlen(yaml), &d);

	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	policy_diag_clear(&d);
	assert_non_null(p);
	return p;
}

/* Is the address text inside one of the ranges? */
static bool
in_ranges(const struct nft_range *r, size_t n, const char *text)
{
	uint8_t a[16] = {0};
	int family = strchr(text, ':') != NULL ? AF_INET6 : AF_INET;
	unsigned len = family == AF_INET ? 4 : 16;

	assert_int_equal(inet_pton(family, text, a), 1);
	for (size_t i = 0; i < n; i++)
		if (memcmp(a, r[i].lo, len) >= 0 && memcmp(a, r[i].hi, len) <= 0)
			return true;
	return false;
}

static bool
guarded4(const struct nft_refuse *rf, const char *text)
{
	return in_ranges(rf->guard4, rf->n_guard4, text);
}

static bool
guarded6(const struct nft_refuse *rf, const char *text)
{
	return in_ranges(rf->guard6, rf->n_guard6, text);
}

/* One address at a (len bytes), as a sockaddr. */
static void
to_sa(struct sockaddr_storage *ss, int family, const uint8_t *a)
{
	memset(ss, 0, sizeof(*ss));
	ss->ss_family = (sa_family_t)family;
	if (family == AF_INET)
		memcpy(&((struct sockaddr_in *)ss)->sin_addr, a, 4);
	else
		memcpy(&((struct sockaddr_in6 *)ss)->sin6_addr, a, 16);
}

/* Every range is sorted, disjoint, and the proxy refuses each of its
 * ends, its middle and a few random points on every port: guarded class,
 * and no cidr rule opens it anywhere. */
static void
check_sound(const struct policy *p, const struct nft_range *r, size_t n, int family)
{
	unsigned len = family == AF_INET ? 4 : 16;
	struct sockaddr_storage ss;

	for (size_t i = 0; i < n; i++) {
		uint8_t pts[6][16];

		assert_true(memcmp(r[i].lo, r[i].hi, len) <= 0);
		if (i > 0)
			assert_true(memcmp(r[i - 1].hi, r[i].lo, len) < 0);
		memcpy(pts[0], r[i].lo, 16);
		memcpy(pts[1], r[i].hi, 16);
		for (int k = 2; k < 6; k++) {
			/* lo, with random low bits where lo and hi differ. */
			unsigned common = 0;

			while (common < len * 8 && ((r[i].lo[common / 8] ^ r[i].hi[common / 8]) &
			                            (0x80u >> (common % 8))) == 0)
				common++;
			memcpy(pts[k], r[i].lo, 16);
			for (unsigned bit = common; bit < len * 8; bit++)
				if (random() & 1)
					pts[k][bit / 8] |= (uint8_t)(0x80u >> (bit % 8));
		}
		for (int k = 0; k < 6; k++) {
			to_sa(&ss, family, pts[k]);
			assert_int_not_equal(guard_classify((struct sockaddr *)&ss), GUARD_PUBLIC);
			assert_false(policy_cidr_opens_any(p, (struct sockaddr *)&ss));
		}
	}
}

static void
check_all_sound(const struct policy *p, const struct nft_refuse *rf)
{
	check_sound(p, rf->guard4, rf->n_guard4, AF_INET);
	check_sound(p, rf->guard6, rf->n_guard6, AF_INET6);
}

static void
test_ports_and_guard(void **state)
{
	struct nft_refuse rf;
	struct policy *p = load("version: 1\n"
	                        "allow:\n"
	                        "  - host: pypi.org\n"
	                        "    ports: [443]\n"
	                        "  - host: '*.example.com'\n" /* default ports 80, 443 */
	                        "  - cidr: 198.51.100.11/32\n"
	                        "    ports: [8000-8080, 8081, 22]\n"
	                        "deny:\n"
	                        "  - host: evil.test\n"
	                        "    ports: [25]\n");

	(void)state;
	nft_refuse_build(p, &rf);
	/* The allow rules' ports, merged (8000-8080 and 8081 are one range);
	 * a deny rule's ports open nothing. */
	assert_true(rf.ports);
	assert_int_equal(rf.n_open, 4);
	assert_int_equal(rf.open[0].lo, 22);
	assert_int_equal(rf.open[0].hi, 22);
	assert_int_equal(rf.open[1].lo, 80);
	assert_int_equal(rf.open[1].hi, 80);
	assert_int_equal(rf.open[2].lo, 443);
	assert_int_equal(rf.open[2].hi, 443);
	assert_int_equal(rf.open[3].lo, 8000);
	assert_int_equal(rf.open[3].hi, 8081);
	/* Every guarded class, both families; loopback too (the chain
	 * accepts 127/8 and ::1 before the sets). Public and lab addresses
	 * are not. */
	assert_true(guarded4(&rf, "10.1.2.3"));
	assert_true(guarded4(&rf, "169.254.169.254"));
	assert_true(guarded4(&rf, "172.31.255.255"));
	assert_true(guarded4(&rf, "192.168.0.1"));
	assert_true(guarded4(&rf, "100.64.0.1"));
	assert_true(guarded4(&rf, "0.0.0.0"));
	assert_true(guarded4(&rf, "224.0.0.1"));
	assert_true(guarded4(&rf, "255.255.255.255"));
	assert_true(guarded4(&rf, "198.18.0.1"));
	assert_true(guarded4(&rf, "127.0.0.1"));
	assert_false(guarded4(&rf, "8.8.8.8"));
	assert_false(guarded4(&rf, "192.0.2.1"));
	assert_false(guarded4(&rf, "198.51.100.11"));
	assert_false(guarded4(&rf, "203.0.113.66"));
	assert_false(guarded4(&rf, "172.32.0.1"));
	assert_true(guarded6(&rf, "fd00::1"));
	assert_true(guarded6(&rf, "fe80::1"));
	assert_true(guarded6(&rf, "ff02::1"));
	assert_true(guarded6(&rf, "::"));
	assert_true(guarded6(&rf, "::ffff:10.0.0.1"));
	assert_true(guarded6(&rf, "64:ff9b::a9fe:a9fe"));
	assert_true(guarded6(&rf, "2002:a9fe:a9fe::1"));
	assert_false(guarded6(&rf, "2001:db8::1"));
	assert_false(guarded6(&rf, "2606:4700::1111"));
	assert_false(guarded6(&rf, "::ffff:8.8.8.8"));
	assert_false(guarded6(&rf, "64:ff9b::808:808"));
	/* Sorted and merged: 224/4 and 240/4 are one range. */
	assert_true(rf.n_guard4 < 15);
	check_all_sound(p, &rf);
	policy_free(p);
}

static void
test_audit(void **state)
{
	struct nft_refuse rf;
	struct policy *p = load("version: 1\nmode: audit\nallow:\n  - host: pypi.org\n");

	(void)state;
	nft_refuse_build(p, &rf);
	/* Audit lets a port no rule lists through to the proxy; the guard
	 * refuses in audit mode too. */
	assert_false(rf.ports);
	assert_true(guarded4(&rf, "10.1.2.3"));
	assert_true(guarded6(&rf, "fd00::1"));
	policy_free(p);
	p = load("version: 1\nallow:\n  - host: pypi.org\n");
	policy_set_mode(p, POLICY_MODE_AUDIT); /* --audit */
	nft_refuse_build(p, &rf);
	assert_false(rf.ports);
	policy_free(p);
}

static void
test_cidr_opens_guarded(void **state)
{
	struct nft_refuse rf;
	struct policy *p = load("version: 1\n"
	                        "allow:\n"
	                        "  - cidr: 10.20.0.0/16\n" /* a private registry, port 443 */
	                        "    ports: [443]\n"
	                        "  - cidr: 0.0.0.0/0\n" /* a catch-all opens no guarded range */
	                        "    ports: [22]\n"
	                        "  - cidr: ::/0\n"
	                        "    ports: [22]\n"
	                        "  - cidr: 64:ff9b::a9fe:a9fe/128\n" /* metadata, as NAT64 */
	                        "    ports: [80]\n"
	                        "  - cidr: fd12:3456::/32\n"
	                        "    ports: [443]\n");

	(void)state;
	nft_refuse_build(p, &rf);
	/* 10/8 is left to the proxy on every port (it may open 10.20/16 on
	 * 443 only), and so are its IPv6 spellings; 172.16/12 is not. */
	assert_false(guarded4(&rf, "10.20.0.1"));
	assert_false(guarded4(&rf, "10.1.2.3"));
	assert_false(guarded6(&rf, "::ffff:10.20.0.1"));
	assert_false(guarded6(&rf, "64:ff9b::a14:1"));
	assert_true(guarded4(&rf, "172.16.0.1"));
	assert_true(guarded4(&rf, "192.168.1.1"));
	/* The NAT64 metadata rule opens 64:ff9b::a9fe:a9fe only (only a rule
	 * naming that spelling allows it, policy_match_addr); its IPv4 view
	 * takes 169.254/16 out too, one too many, which leaves it to the
	 * proxy. The v4-mapped spelling is matched as IPv4 by IPv4 rules:
	 * still refused. */
	assert_false(guarded6(&rf, "64:ff9b::a9fe:a9fe"));
	assert_false(guarded4(&rf, "169.254.169.254"));
	assert_true(guarded6(&rf, "::ffff:169.254.169.254"));
	/* fc00::/7 is left to the proxy; fe80::/10 is not. */
	assert_false(guarded6(&rf, "fd12:3456::1"));
	assert_false(guarded6(&rf, "fd00::1"));
	assert_true(guarded6(&rf, "fe80::1"));
	check_all_sound(p, &rf);
	policy_free(p);
}

static void
test_no_allow(void **state)
{
	struct nft_refuse rf;
	struct policy *p = load("version: 1\ndeny:\n  - host: evil.test\n");

	(void)state;
	nft_refuse_build(p, &rf);
	/* Nothing is open: every port refused at the SYN. */
	assert_true(rf.ports);
	assert_int_equal(rf.n_open, 0);
	policy_free(p);
}

static void
test_too_many_port_ranges(void **state)
{
	/* 3 rules of 60 single ports each, none adjacent: 180 ranges, more
	 * than the set takes; the ports are left to the proxy. */
	char yaml[8192];
	size_t off = 0;
	struct nft_refuse rf;
	struct policy *p;

	(void)state;
	off += (size_t)snprintf(yaml + off, sizeof(yaml) - off, "version: 1\nallow:\n");
	for (int r = 0; r < 3; r++) {
		off += (size_t)snprintf(yaml + off, sizeof(yaml) - off,
		                        "  - host: h%d.example\n    ports: [", r);
		for (int i = 0; i < 60; i++)
			off += (size_t)snprintf(yaml + off, sizeof(yaml) - off, "%s%d",
			                        i ? ", " : "", 1000 + 2 * (r * 60 + i));
		off += (size_t)snprintf(yaml + off, sizeof(yaml) - off, "]\n");
	}
	p = load(yaml);
	nft_refuse_build(p, &rf);
	assert_false(rf.ports);
	assert_true(rf.n_guard4 > 0);
	policy_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_ports_and_guard),      cmocka_unit_test(test_audit),
	        cmocka_unit_test(test_cidr_opens_guarded),   cmocka_unit_test(test_no_allow),
	        cmocka_unit_test(test_too_many_port_ranges),
	};

	srandom(1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
