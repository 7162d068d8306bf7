/* The broker's pure parts: the message parsers (one test per failure
 * site, each on a message otherwise valid) and the address decision. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "broker/decide.h"
#include "broker/msg.h"
#include "common/util.h"
#include "policy/guard.h"
#include "policy/policy.h"

static struct sockaddr_storage
sa(const char *ip, uint16_t port)
{
	struct sockaddr_storage ss;

	assert_int_not_equal(sockaddr_set(&ss, 0, ip, port), 0);
	return ss;
}

static enum broker_parse
parse(const void *m, size_t len, struct broker_request *rq)
{
	return broker_parse_request(m, len, false, rq);
}

static void
test_name_ok(void **state)
{
	struct broker_req_name m;
	struct broker_request rq;
	struct sockaddr_storage o = sa("203.0.113.10", 443);
	char ip[INET6_ADDRSTRLEN];

	(void)state;
	assert_int_equal(broker_build_name(&m, 7, "PyPI.org.", 443, BROKER_F_ECH,
	                                   (struct sockaddr *)&o, "p.yaml:3"),
	                 0);
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_OK);
	assert_int_equal(rq.type, BROKER_MSG_CONNECT_NAME);
	assert_int_equal(rq.id, 7);
	assert_int_equal(rq.port, 443);
	assert_int_equal(rq.flags, BROKER_F_ECH | BROKER_F_ORIG);
	assert_string_equal(rq.name, "pypi.org"); /* normalised */
	assert_string_equal(rq.rule, "p.yaml:3");
	broker_addr_str((struct sockaddr *)&rq.addr, ip, sizeof(ip));
	assert_string_equal(ip, "203.0.113.10");
	assert_int_equal(ntohs(((struct sockaddr_in *)&rq.addr)->sin_port), 443);
	/* The longest name that fits, and one byte more. */
	{
		char name[BROKER_NAME_MAX + 1];

		memset(name, 'a', sizeof(name));
		name[BROKER_NAME_MAX] = '\0';
		assert_int_equal(broker_build_name(&m, 1, name, 443, 0, NULL, NULL), -1);
	}
}

static void
test_addr_ok(void **state)
{
	struct broker_req_addr m;
	struct broker_request rq;
	struct sockaddr_storage a = sa("::ffff:198.51.100.7", 22);

	(void)state;
	assert_int_equal(broker_build_addr(&m, 9, (struct sockaddr *)&a, 22, NULL), 0);
	/* A v4-mapped address travels as the IPv4 it is. */
	assert_int_equal(m.dst.family, AF_INET);
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_OK);
	assert_int_equal(rq.type, BROKER_MSG_CONNECT_ADDR);
	assert_int_equal(rq.addr.ss_family, AF_INET);
	assert_int_equal(rq.port, 22);
	a = sa("2001:db8::1", 443);
	assert_int_equal(broker_build_addr(&m, 10, (struct sockaddr *)&a, 443, "r:1"), 0);
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_OK);
	assert_int_equal(rq.addr.ss_family, AF_INET6);
}

/* Each failure site, on a message that is valid but for it. */
static void
test_name_refusals(void **state)
{
	struct broker_req_name m, good;
	struct broker_request rq;
	unsigned char buf[sizeof(m) + 8];

	(void)state;
	assert_int_equal(broker_build_name(&good, 5, "pypi.org", 443, 0, NULL, NULL), 0);
	assert_int_equal(parse(&good, 7, &rq), BROKER_PARSE_SHORT);
	assert_int_equal(parse(&good, 0, &rq), BROKER_PARSE_SHORT);
	assert_int_equal(parse(&good, sizeof(good) - 1, &rq), BROKER_PARSE_LEN);
	assert_int_equal(rq.id, 5); /* still answerable */
	memcpy(buf, &good, sizeof(good));
	memset(buf + sizeof(good), 0, 8);
	((struct broker_hdr *)buf)->len = sizeof(buf);
	assert_int_equal(parse(buf, sizeof(buf), &rq), BROKER_PARSE_SIZE);
	m = good;
	m.h.len = 8;
	assert_int_equal(parse(&m, 8, &rq), BROKER_PARSE_SIZE);
	m = good;
	m.h.type = BROKER_MSG_REPLY;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_TYPE);
	m.h.type = 0;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_TYPE);
	m.h.type = BROKER_MSG_SELFTEST; /* not in a normal build */
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_TYPE);
	m = good;
	m.h.id = 0;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_ID);
	m = good;
	m.pad = 1;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	m = good;
	m.port = 0;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PORT);
	m = good;
	m.flags = 0x100;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_FLAGS);
	m = good;
	m.flags = BROKER_F_ORIG; /* no address */
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_ADDR);
	m = good;
	m.flags = 0x4; /* the worker's "told" claim is no flag any more */
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_FLAGS);
	m = good;
	m.orig.family = AF_INET; /* an address, no flag */
	m.orig.port = 443;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_ADDR);
	m.flags = BROKER_F_ORIG;
	m.orig.port = 80; /* not the request's port */
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PORT);
	m.orig.port = 443;
	m.orig.addr[8] = 1; /* bytes past an IPv4 address */
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	m.orig.addr[8] = 0;
	m.orig.family = AF_UNIX;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_ADDR);
	m = good;
	memset(m.name, 'a', sizeof(m.name));
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_STRING);
	m = good;
	m.name[sizeof(m.name) - 1] = 'x'; /* hidden after the NUL */
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	m = good;
	memset(m.rule, 'r', sizeof(m.rule));
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_STRING);
	/* Names: what policy_name_normalize refuses, empty, IP literals. */
	static const char *const bad[] = {"",         "a..b",      "-",   "caf\xc3\xa9.test",
	                                  "a b.test", "127.0.0.1", "::1", "203.0.113.10."};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		assert_int_equal(broker_build_name(&m, 5, bad[i], 443, 0, NULL, NULL), 0);
		if (parse(&m, sizeof(m), &rq) != BROKER_PARSE_NAME)
			fail_msg("name '%s' accepted", bad[i]);
		assert_int_equal(broker_parse_status(BROKER_PARSE_NAME), BROKER_E_BAD_NAME);
	}
}

static void
test_addr_refusals(void **state)
{
	struct broker_req_addr m, good;
	struct broker_request rq;
	struct sockaddr_storage a = sa("203.0.113.5", 22);

	(void)state;
	assert_int_equal(broker_build_addr(&good, 3, (struct sockaddr *)&a, 22, NULL), 0);
	m = good;
	m.flags = BROKER_F_ORIG;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_FLAGS);
	m = good;
	m.pad2 = 1;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	m = good;
	m.dst.port = 0;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PORT);
	m = good;
	m.dst.family = AF_UNSPEC; /* required here */
	memset(m.dst.addr, 0, sizeof(m.dst.addr));
	m.dst.port = 0;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_ADDR);
	m = good;
	m.dst.pad = 9;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	assert_int_equal(broker_build_addr(&m, 3, NULL, 22, NULL), -1);
}

static void
test_selftest_parse(void **state)
{
	struct broker_req_selftest m = {
	        .h = {.type = BROKER_MSG_SELFTEST, .len = sizeof(m), .id = 4},
	        .op = BROKER_SELFTEST_OPEN};
	struct broker_request rq;

	(void)state;
	assert_int_equal(broker_parse_request(&m, sizeof(m), false, &rq), BROKER_PARSE_TYPE);
	assert_int_equal(broker_parse_request(&m, sizeof(m), true, &rq), BROKER_PARSE_OK);
	m.op = BROKER_SELFTEST_MAX + 1;
	assert_int_equal(broker_parse_request(&m, sizeof(m), true, &rq), BROKER_PARSE_OP);
}

static void
test_reply(void **state)
{
	struct broker_reply r, out;
	struct sockaddr_storage a = sa("2001:db8::5", 443);
	char longer[400];

	(void)state;
	memset(longer, 'x', sizeof(longer) - 1);
	longer[sizeof(longer) - 1] = '\0';
	broker_build_reply(&r, 12, BROKER_E_GUARD, BROKER_V_DENY, 0, (struct sockaddr *)&a, longer,
	                   longer);
	assert_int_equal(broker_parse_reply(&r, sizeof(r), &out), 0);
	assert_int_equal(out.addr.family, AF_INET6);
	assert_int_equal(out.addr.port, 443);
	assert_int_equal(strlen(out.rule), BROKER_RULE_MAX - 1); /* cut to fit */
	assert_int_equal(strlen(out.reason), BROKER_REASON_MAX - 1);
	assert_int_equal(broker_parse_reply(&r, sizeof(r) - 1, &out), -1);
	out = r;
	out.status = BROKER_STATUS_MAX + 1;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out = r;
	out.verdict = 7;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out = r;
	memset(out.reason, 'y', sizeof(out.reason));
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out = r;
	out.h.id = 0;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out = r;
	out.h.type = BROKER_MSG_CONNECT_NAME;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	/* An audit refusal comes with the audit-deny verdict and only then. */
	out = r;
	out.audit = BROKER_E_DENIED;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out = r;
	out.verdict = BROKER_V_AUDIT_DENY;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out.audit = BROKER_E_NOT_ORIG;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), 0);
	out.audit = BROKER_STATUS_MAX + 1;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	out = r;
	out.pad = 1;
	assert_int_equal(broker_parse_reply(&out, sizeof(out), &out), -1);
	for (int s = 0; s <= BROKER_STATUS_MAX; s++)
		assert_string_not_equal(broker_status_name((enum broker_status)s), "?");
	for (int p = 0; p <= BROKER_PARSE_FDS; p++)
		assert_string_not_equal(broker_parse_name((enum broker_parse)p), "?");
}

/* ---- the address decision ---- */

static const char decide_yaml[] = "version: 1\n"
                                  "name: decide\n"
                                  "allow:\n"
                                  "  - host: a.test\n"
                                  "  - cidr: 10.1.2.3/32\n"
                                  "    ports: [5432]\n"
                                  "  - cidr: 0.0.0.0/0\n"
                                  "    ports: [80]\n"
                                  "deny:\n"
                                  "  - cidr: 198.51.100.0/24\n"
                                  "    ports: [443]\n";

static struct policy *
load(const char *yaml, size_t len)
{
	struct policy *p = policy_load_buffer("decide.yaml", yaml, len, NULL);

	assert_non_null(p);
	return p;
}

static enum guard_addr_verdict
check(const struct policy *p, const struct guard_hosts *h, const char *ip, uint16_t port, char *why,
      const char **rule)
{
	struct sockaddr_storage a = sa(ip, port);

	return guard_addr_check(p, h, (struct sockaddr *)&a, port, why, 160, rule);
}

static void
test_decide(void **state)
{
	struct policy *p = load(decide_yaml, sizeof(decide_yaml) - 1);
	struct guard_hosts *h = guard_hosts_new(0);
	struct guard_host_addr own = {
	        .family = AF_INET, .addr = {203, 0, 113, 1}, .ifindex = 2, .prefixlen = 24};
	const char *rule;
	char why[160];

	(void)state;
	assert_non_null(h);
	assert_int_equal(guard_hosts_add(h, &own), 0);
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	assert_int_equal(check(p, h, "203.0.113.10", 443, why, &rule), GUARD_ADDR_PERMITTED);
	assert_int_equal(check(p, h, "127.0.0.1", 80, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	assert_string_equal(why, "127.0.0.1 is loopback (address guard)");
	assert_int_equal(check(p, h, "169.254.169.254", 80, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	assert_string_equal(why, "169.254.169.254 is link-local (address guard)");
	assert_int_equal(check(p, h, "::ffff:169.254.169.254", 80, why, &rule),
	                 GUARD_ADDR_REFUSED_GUARD);
	assert_int_equal(check(p, h, "64:ff9b::a9fe:a9fe", 80, why, &rule),
	                 GUARD_ADDR_REFUSED_GUARD);
	assert_int_equal(check(p, h, "203.0.113.1", 80, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	assert_string_equal(why, "203.0.113.1 is one of this host's addresses");
	/* A /32 cidr rule opens that one private address, on its port. */
	assert_int_equal(check(p, h, "10.1.2.3", 5432, why, &rule), GUARD_ADDR_PERMITTED);
	assert_int_equal(check(p, h, "10.1.2.3", 80, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	assert_int_equal(check(p, h, "10.1.2.4", 5432, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	/* A deny cidr rule wins, and says which rule. */
	assert_int_equal(check(p, h, "198.51.100.7", 443, why, &rule), GUARD_ADDR_REFUSED_CIDR);
	assert_string_equal(why, "198.51.100.7 is denied by a cidr rule");
	assert_non_null(rule);
	assert_string_equal(rule, "decide.yaml:10");
	/* While the host's addresses are not known, every public one may
	 * be the host's: refused; and so with no set at all. */
	guard_hosts_clear(h);
	assert_int_equal(check(p, h, "203.0.113.10", 443, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	assert_non_null(strstr(why, "may be one of this host's addresses"));
	assert_int_equal(check(p, NULL, "203.0.113.10", 443, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	/* Audit mode lets a deny cidr address through, marked; the guard
	 * still holds. */
	policy_set_mode(p, POLICY_MODE_AUDIT);
	guard_hosts_set_state(h, GUARD_HOSTS_KNOWN);
	assert_int_equal(check(p, h, "198.51.100.7", 443, why, &rule), GUARD_ADDR_AUDIT_DENIED);
	assert_int_equal(check(p, h, "127.0.0.1", 80, why, &rule), GUARD_ADDR_REFUSED_GUARD);
	guard_hosts_free(h);
	policy_free(p);
}

/* A question: built, parsed, checked against its normal form. */
static void
test_resolve_parse(void **state)
{
	struct broker_req_resolve m;
	struct broker_request rq;

	(void)state;
	assert_int_equal(broker_build_resolve(&m, 9, "WwW.Example.test", DNS_TYPE_AAAA, DNS_CLASS_IN,
	                                      "www.example.test"),
	                 0);
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_OK);
	assert_int_equal(rq.type, BROKER_MSG_RESOLVE);
	assert_string_equal(rq.qname, "WwW.Example.test");
	assert_string_equal(rq.name, "www.example.test");
	assert_int_equal(rq.qtype, DNS_TYPE_AAAA);
	/* The worker's normal form must be the broker's. */
	broker_build_resolve(&m, 9, "www.example.test", DNS_TYPE_A, DNS_CLASS_IN, "example.test");
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_NAME);
	broker_build_resolve(&m, 9, "a b.test", DNS_TYPE_A, DNS_CLASS_IN, "a b.test");
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_NAME);
	broker_build_resolve(&m, 9, "x.test", DNS_TYPE_A, DNS_CLASS_IN, "x.test");
	m.pad = 1;
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	m.pad = 0;
	m.name[200] = 'y';
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_PAD);
	assert_int_equal(parse(&m, sizeof(m) - 4, &rq), BROKER_PARSE_LEN);
}

/* An answer: what dns_filter keeps goes through whole; anything else in
 * it fails the whole reply. */
static void
test_dns_reply(void **state)
{
	static union {
		struct broker_dns_reply m;
		unsigned char b[BROKER_DNS_REPLY_MAX];
	} u;
	static struct dns_filtered f;
	static struct broker_dns_result d;
	size_t n;

	(void)state;
	memset(&f, 0, sizeof(f));
	f.rcode = DNS_RCODE_NOERROR;
	f.n = 2;
	f.rr[0] = (struct dns_rr){.name = "www.example.test", .type = DNS_TYPE_CNAME,
	                          .rclass = DNS_CLASS_IN, .ttl = 60, .target = "cdn.example.test"};
	f.rr[1] = (struct dns_rr){.name = "cdn.example.test", .type = DNS_TYPE_A,
	                          .rclass = DNS_CLASS_IN, .ttl = 30, .addr = {203, 0, 113, 10}};
	f.guarded = true;
	f.why = VR_GUARD;
	n = broker_build_dns_reply(&u.m, 7, BROKER_DNS_ANSWER, f.why, BROKER_DNS_F_CACHED, &f,
	                           "address guard: 127.0.0.1 (loopback)");
	assert_int_equal(n, sizeof(u.m) + 2 * sizeof(u.m.rr[0]));
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), 0);
	assert_int_equal(d.id, 7);
	assert_int_equal(d.status, BROKER_DNS_ANSWER);
	assert_int_equal(d.f.n, 2);
	assert_true(d.f.guarded);
	assert_false(d.f.cname_denied);
	assert_int_equal(d.flags, BROKER_DNS_F_CACHED | BROKER_DNS_F_GUARDED);
	assert_string_equal(d.f.rr[0].target, "cdn.example.test");
	assert_memory_equal(d.f.rr[1].addr, "\xcb\x00\x71\x0a", 4);
	assert_string_equal(d.why, "address guard: 127.0.0.1 (loopback)");
	/* The size is the head's and n records', nothing else. */
	assert_int_equal(broker_parse_dns_reply(u.b, n - 1, &d), -1);
	assert_int_equal(broker_parse_dns_reply(u.b, n + 1, &d), -1);
	u.m.n = 3;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.n = 2;
	/* A record type dns_filter never keeps, another class, bytes past
	 * an IPv4 address, a target on an address, no NUL. */
	u.m.rr[1].type = DNS_TYPE_PTR;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.rr[1].type = DNS_TYPE_A;
	u.m.rr[1].rclass = 3;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.rr[1].rclass = DNS_CLASS_IN;
	u.m.rr[1].addr[4] = 1;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.rr[1].addr[4] = 0;
	u.m.rr[1].target[0] = 'x';
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.rr[1].target[0] = '\0';
	memset(u.m.rr[0].name, 'a', sizeof(u.m.rr[0].name));
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	/* A failure carries no records. */
	n = broker_build_dns_reply(&u.m, 8, BROKER_DNS_FAIL, VR_DNS_UPSTREAM, 0, NULL, "upstream failed");
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), 0);
	assert_int_equal(d.status, BROKER_DNS_FAIL);
	u.m.rcode = DNS_RCODE_NXDOMAIN;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.rcode = 0;
	u.m.why = VR_COUNT;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
	u.m.why = 0;
	u.m.h.id = 0;
	assert_int_equal(broker_parse_dns_reply(u.b, n, &d), -1);
}

/* MINT: the name normalised; every forged length, padding, port and
 * name refused by its own failure site. */
static void
test_mint_parse(void **state)
{
	struct broker_req_mint m, x;
	struct broker_request rq;
	unsigned char big[sizeof(m) + 8];

	(void)state;
	assert_int_equal(broker_build_mint(&m, 9, "Origin.Lab.", 443), 0);
	assert_int_equal(parse(&m, sizeof(m), &rq), BROKER_PARSE_OK);
	assert_int_equal(rq.type, BROKER_MSG_MINT);
	assert_int_equal(rq.id, 9);
	assert_int_equal(rq.port, 443);
	assert_string_equal(rq.name, "origin.lab");
	assert_int_equal(broker_build_mint(&x, 9, "a.lab", 0), -1);

	/* Forged lengths: the header's against the datagram's, and both
	 * against the type's. */
	assert_int_equal(parse(&m, sizeof(m) - 1, &rq), BROKER_PARSE_LEN);
	assert_int_equal(rq.id, 9);
	assert_int_equal(parse(&m, 4, &rq), BROKER_PARSE_SHORT);
	x = m;
	x.h.len = sizeof(x) - 1;
	assert_int_equal(parse(&x, sizeof(x) - 1, &rq), BROKER_PARSE_SIZE);
	memset(big, 0, sizeof(big));
	memcpy(big, &m, sizeof(m));
	((struct broker_hdr *)(void *)big)->len = sizeof(big);
	assert_int_equal(parse(big, sizeof(big), &rq), BROKER_PARSE_SIZE);
	x = m;
	x.h.len = 0xffff;
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_LEN);

	x = m;
	x.h.id = 0;
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_ID);
	x = m;
	x.pad = 1;
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_PAD);
	x = m;
	x.pad2 = 1;
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_PAD);
	x = m;
	x.port = 0;
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_PORT);
	x = m;
	memset(x.name, 'a', sizeof(x.name)); /* no NUL */
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_STRING);
	x = m;
	x.name[sizeof(x.name) - 1] = 'z'; /* a byte after the NUL */
	x.name[sizeof(x.name) - 2] = '\0';
	assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_PAD);
	static const char *const bad[] = {"", "203.0.113.1", "::1", "*.lab", "a..lab", "a b.lab"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(broker_build_mint(&x, 9, bad[i], 443), 0);
		assert_int_equal(parse(&x, sizeof(x), &rq), BROKER_PARSE_NAME);
		assert_int_equal(broker_parse_status(BROKER_PARSE_NAME), BROKER_E_BAD_NAME);
	}
	/* A LEAF is never a request. */
	{
		struct broker_leaf l;
		static const unsigned char der[] = {0x30, 0x03, 0x02, 0x01, 0x01};

		assert_int_equal(broker_build_leaf(&l, 9, der, sizeof(der)), 0);
		assert_int_equal(parse(&l, sizeof(l), &rq), BROKER_PARSE_TYPE);
	}
}

/* LEAF, as the worker checks it. */
static void
test_leaf_parse(void **state)
{
	static const unsigned char der[] = {0x30, 0x03, 0x02, 0x01, 0x01};
	static unsigned char full[BROKER_LEAF_DER_MAX];
	struct broker_leaf l, x, out;

	(void)state;
	assert_int_equal(broker_build_leaf(&l, 5, der, sizeof(der)), 0);
	assert_int_equal(broker_parse_leaf(&l, sizeof(l), &out), 0);
	assert_int_equal(out.h.id, 5);
	assert_int_equal(out.len, sizeof(der));
	assert_memory_equal(out.der, der, sizeof(der));
	assert_int_equal(broker_build_leaf(&l, 5, der, 0), -1);
	assert_int_equal(broker_build_leaf(&l, 5, full, sizeof(full) + 1), -1);
	assert_int_equal(broker_build_leaf(&x, 5, full, sizeof(full)), 0);
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), 0);

	assert_int_equal(broker_build_leaf(&l, 5, der, sizeof(der)), 0);
	assert_int_equal(broker_parse_leaf(&l, sizeof(l) - 1, &out), -1);
	assert_int_equal(broker_parse_leaf(&l, sizeof(l) + 1, &out), -1);
	x = l;
	x.h.len--;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.h.type = BROKER_MSG_REPLY;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.h.id = 0;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	/* Forged DER lengths: none, past the buffer, shorter than the bytes. */
	x = l;
	x.len = 0;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.len = BROKER_LEAF_DER_MAX + 1;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.len = 0xffff;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.len = sizeof(der) - 1;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.der[BROKER_LEAF_DER_MAX - 1] = 1;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.pad = 1;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	x = l;
	x.pad2 = 1;
	assert_int_equal(broker_parse_leaf(&x, sizeof(x), &out), -1);
	assert_string_equal(broker_status_name(BROKER_E_NOT_INSPECTED), "not-inspected");
	assert_string_equal(broker_status_name(BROKER_E_MINT_LIMIT), "mint-limit");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_name_ok),        cmocka_unit_test(test_addr_ok),
	        cmocka_unit_test(test_name_refusals),  cmocka_unit_test(test_addr_refusals),
	        cmocka_unit_test(test_selftest_parse), cmocka_unit_test(test_reply),
	        cmocka_unit_test(test_decide),        cmocka_unit_test(test_resolve_parse),
	        cmocka_unit_test(test_dns_reply),     cmocka_unit_test(test_mint_parse),
	        cmocka_unit_test(test_leaf_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
