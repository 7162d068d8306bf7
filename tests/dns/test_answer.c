/* Unit tests for the resolver's pure decisions (dns/answer.c) and the
 * answer cache (dns/acache.c), with a real compiled policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "dns/acache.h"
#include "dns/answer.h"
#include "policy/policy.h"

static const char pol_text[] = "version: 1\n"
                               "name: t\n"
                               "allow:\n"
                               "  - host: allowed.test\n"
                               "  - host: \"*.allowed.test\"\n"
                               "  - host: web.test\n"
                               "    ports: [80]\n"
                               "  - host: ssh.test\n"
                               "    ports: [22]\n"
                               "  - host: odd.test\n"
                               "    ports: [8443]\n"
                               "  - cidr: 10.9.0.0/16\n"
                               "  - host: db.test\n"
                               "    ports: [5432]\n"
                               "  - host: half.test\n"
                               "    ports: [443, 5432]\n"
                               "  - host: closed.test\n"
                               "    ports: [443, 8443]\n"
                               "  - cidr: 10.7.0.5/32\n"
                               "    ports: [5432]\n"
                               "  - cidr: 10.6.0.0/16\n"
                               "    ports: [5432]\n"
                               "deny:\n"
                               "  - host: evil.test\n"
                               "  - host: bad.allowed.test\n"
                               "  - host: half.test\n"
                               "  - host: closed.test\n"
                               "    ports: [\"1-8000\"]\n"
                               "  - host: closed.test\n"
                               "    ports: [8443]\n"
                               "  - cidr: 10.6.1.0/24\n"
                               "    ports: [5432]\n";

static struct policy *pol, *audit;

static int
setup(void **state)
{
	(void)state;
	pol = policy_load_buffer("t.yaml", pol_text, sizeof(pol_text) - 1, NULL);
	audit = policy_load_buffer("t.yaml", pol_text, sizeof(pol_text) - 1, NULL);
	if (pol == NULL || audit == NULL)
		return -1;
	policy_set_mode(audit, POLICY_MODE_AUDIT);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	policy_free(pol);
	policy_free(audit);
	return 0;
}

static struct dns_query
mkq(const char *name, uint16_t type, bool opt)
{
	struct dns_query q;

	memset(&q, 0, sizeof(q));
	q.id = 42;
	q.flags = DNS_FLAG_RD;
	memcpy(q.qname, name, strlen(name) + 1);
	q.qtype = type;
	q.qclass = DNS_CLASS_IN;
	q.has_opt = opt;
	q.udp_size = opt ? 1232 : 512;
	return q;
}

static void
test_decide(void **state)
{
	struct dns_query q;
	struct dns_decision d;

	(void)state;
	q = mkq("Allowed.TEST", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	assert_int_equal(d.verdict, VERDICT_ALLOW);
	assert_string_equal(d.name, "allowed.test");
	assert_non_null(d.rule);

	q = mkq("cdn.allowed.test", DNS_TYPE_AAAA, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);

	/* Deny wins over the wildcard. */
	q = mkq("bad.allowed.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);
	assert_int_equal(d.rcode, DNS_RCODE_NXDOMAIN);
	assert_non_null(d.rule);

	q = mkq("nothere.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);
	assert_int_equal(d.verdict, VERDICT_DENY);
	assert_null(d.rule);
	assert_int_equal(d.why, VR_NO_RULE);

	/* A name resolves when any port is open for it: 80, 22, 8443 or
	 * 5432 alone will do. */
	q = mkq("web.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	q = mkq("ssh.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	q = mkq("odd.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	q = mkq("db.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	assert_int_equal(d.verdict, VERDICT_ALLOW);
	assert_string_equal(d.rule, "t.yaml:13");
	/* The deny takes 80 and 443; 5432 stays open. */
	q = mkq("half.test", DNS_TYPE_AAAA, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	assert_string_equal(d.rule, "t.yaml:15");
	/* Two deny rules close both allowed ports: no resolution, and the
	 * first of them is named. */
	q = mkq("closed.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);
	assert_int_equal(d.rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(d.verdict, VERDICT_DENY);
	assert_int_equal(d.why, VR_RULE_DENY);
	assert_string_equal(d.rule, "t.yaml:27");
	/* Bad labels never reach the allow wildcard. */
	q = mkq("-x-.allowed.test", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);
	assert_int_equal(d.rcode, DNS_RCODE_NXDOMAIN);
	assert_int_equal(d.why, VR_BAD_NAME);
	assert_string_equal(d.detail, "label starts or ends with a hyphen");
	q = mkq("1.0x7f", DNS_TYPE_A, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);
	assert_int_equal(d.why, VR_NO_RULE);

	/* Types. */
	q = mkq("allowed.test", DNS_TYPE_TXT, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_LOCAL);
	assert_int_equal(d.rcode, DNS_RCODE_NOERROR);
	q = mkq("allowed.test", DNS_TYPE_HTTPS, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_LOCAL);
	q = mkq("allowed.test", DNS_TYPE_ANY, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.rcode, DNS_RCODE_NOTIMP);
	q = mkq("evil.test", DNS_TYPE_TXT, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);

	/* Reverse lookups. */
	q = mkq("10.113.0.203.in-addr.arpa", DNS_TYPE_PTR, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_PTR);
	q = mkq("113.0.203.in-addr.arpa", DNS_TYPE_PTR, false);
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);

	/* Audit: resolve, say audit-deny. */
	q = mkq("evil.test", DNS_TYPE_A, false);
	dns_decide(audit, &q, &d);
	assert_int_equal(d.action, DNS_ACT_FORWARD);
	assert_int_equal(d.verdict, VERDICT_AUDIT_DENY);
	q = mkq("root-is-denied", DNS_TYPE_A, false);
	q.qname[0] = '\0';
	dns_decide(pol, &q, &d);
	assert_int_equal(d.action, DNS_ACT_DENY);
	assert_string_equal(d.name, ".");
}

static void
add_a(struct dns_response *r, const char *owner, const char *ip, uint32_t ttl)
{
	struct dns_rr *rr = &r->an[r->n_an++];

	memset(rr, 0, sizeof(*rr));
	memcpy(rr->name, owner, strlen(owner) + 1);
	rr->rclass = DNS_CLASS_IN;
	rr->ttl = ttl;
	if (strchr(ip, ':') != NULL) {
		rr->type = DNS_TYPE_AAAA;
		inet_pton(AF_INET6, ip, rr->addr);
	} else {
		rr->type = DNS_TYPE_A;
		inet_pton(AF_INET, ip, rr->addr);
	}
}

static void
add_cname(struct dns_response *r, const char *owner, const char *target)
{
	struct dns_rr *rr = &r->an[r->n_an++];

	memset(rr, 0, sizeof(*rr));
	memcpy(rr->name, owner, strlen(owner) + 1);
	memcpy(rr->target, target, strlen(target) + 1);
	rr->type = DNS_TYPE_CNAME;
	rr->rclass = DNS_CLASS_IN;
	rr->ttl = 3600;
}

static struct dns_response resp;
static struct dns_filtered filt;

static void
resp_init(const struct dns_query *q, unsigned rcode)
{
	memset(&resp, 0, sizeof(resp));
	resp.flags = (uint16_t)(DNS_FLAG_QR | rcode);
	memcpy(resp.qname, q->qname, strlen(q->qname) + 1);
	resp.qtype = q->qtype;
	resp.qclass = DNS_CLASS_IN;
}

static void
test_filter_guard(void **state)
{
	struct dns_query q = mkq("allowed.test", DNS_TYPE_A, false);

	(void)state;
	resp_init(&q, 0);
	add_a(&resp, "allowed.test", "203.0.113.10", 30);
	add_a(&resp, "allowed.test", "127.0.0.1", 30);
	add_a(&resp, "allowed.test", "169.254.169.254", 30);
	add_a(&resp, "allowed.test", "10.1.1.1", 30);
	add_a(&resp, "allowed.test", "10.9.1.1", 30);   /* cidr rule allows */
	add_a(&resp, "other.test", "203.0.113.99", 30); /* not on the chain */
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(filt.n, 2);
	assert_int_equal(filt.n_removed, 3);
	assert_string_equal(filt.removed[0], "127.0.0.1 (loopback)");
	assert_string_equal(filt.removed[1], "169.254.169.254 (link-local)");
	assert_string_equal(filt.removed[2], "10.1.1.1 (private)");
	assert_int_equal(filt.why, VR_GUARD);

	/* A guarded address that a cidr rule opens on some port (any, not
	 * just 443, 80 or 22) is kept; one whose every allowed port a deny
	 * rule takes back is removed. */
	q = mkq("db.test", DNS_TYPE_A, false);
	resp_init(&q, 0);
	add_a(&resp, "db.test", "10.7.0.5", 30);
	add_a(&resp, "db.test", "10.7.0.6", 30);
	add_a(&resp, "db.test", "10.6.2.1", 30);
	add_a(&resp, "db.test", "10.6.1.1", 30);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 2);
	assert_int_equal(filt.n_removed, 2);
	assert_string_equal(filt.removed[0], "10.7.0.6 (private)");
	assert_string_equal(filt.removed[1], "10.6.1.1 (private)");

	/* IPv6: v4-mapped loopback is caught. */
	q = mkq("allowed.test", DNS_TYPE_AAAA, false);
	resp_init(&q, 0);
	add_a(&resp, "allowed.test", "::ffff:127.0.0.1", 30);
	add_a(&resp, "allowed.test", "::1", 30);
	add_a(&resp, "allowed.test", "2001:db8::1", 30);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 1);
	assert_int_equal(filt.n_removed, 2);

	/* A response to another question is not ours. */
	q = mkq("allowed.test", DNS_TYPE_A, false);
	resp_init(&q, 0);
	resp.qtype = DNS_TYPE_AAAA;
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), -1);
	/* Upstream errors. */
	resp_init(&q, DNS_RCODE_REFUSED);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.rcode, DNS_RCODE_SERVFAIL);
	resp_init(&q, DNS_RCODE_NXDOMAIN);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.rcode, DNS_RCODE_NXDOMAIN);
}

/* A catch-all cidr rule does not open the guarded ranges it covers: the
 * metadata address answered for an allowed name is removed under
 * 0.0.0.0/0 and kept under a rule naming it. */
static void
filter_one(const char *policy_text, const char *ip, size_t want_kept)
{
	struct policy_diag d = {0};
	struct policy *p = policy_load_buffer("c.yaml", policy_text, strlen(policy_text), &d);
	struct dns_query q = mkq("allowed.test", strchr(ip, ':') ? DNS_TYPE_AAAA : DNS_TYPE_A,
	                         false);

	assert_non_null(p);
	policy_diag_clear(&d);
	resp_init(&q, 0);
	add_a(&resp, "allowed.test", ip, 30);
	assert_int_equal(dns_filter(p, &q, &resp, 300, &filt), 0);
	if (filt.n != want_kept)
		fail_msg("%s under %s: %zu kept, expected %zu", ip, policy_text, (size_t)filt.n,
		         want_kept);
	assert_int_equal(filt.n_removed, 1 - want_kept);
	policy_free(p);
}

static void
test_filter_catch_all_cidr(void **state)
{
	static const char wide[] = "version: 1\nallow:\n  - host: allowed.test\n"
	                           "  - cidr: 0.0.0.0/0\n    ports: [\"1-65535\"]\n"
	                           "  - cidr: ::/0\n    ports: [\"1-65535\"]\n";
	static const char md[] = "version: 1\nallow:\n  - host: allowed.test\n"
	                         "  - cidr: 169.254.169.254/32\n    ports: [80]\n"
	                         "  - cidr: ::1/128\n    ports: [8080]\n";

	(void)state;
	filter_one(wide, "169.254.169.254", 0);
	filter_one(wide, "127.0.0.1", 0);
	filter_one(wide, "10.1.2.3", 0);
	filter_one(wide, "::1", 0);
	filter_one(wide, "::ffff:169.254.169.254", 0);
	filter_one(wide, "64:ff9b::a9fe:a9fe", 0);
	filter_one(wide, "203.0.113.10", 1);
	filter_one(md, "169.254.169.254", 1);
	filter_one(md, "169.254.169.253", 0);
	filter_one(md, "::1", 1);
}

static void
test_filter_chain(void **state)
{
	struct dns_query q = mkq("WWW.allowed.test", DNS_TYPE_A, false);

	(void)state;
	resp_init(&q, 0);
	/* Out of order on purpose. */
	add_a(&resp, "edge.cdn.test", "203.0.113.20", 20);
	add_cname(&resp, "cdn.test", "edge.cdn.test");
	add_cname(&resp, "www.allowed.test", "cdn.test");
	add_a(&resp, "www.allowed.test", "203.0.113.66", 20); /* not at chain end */
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 3);
	assert_int_equal(filt.rr[0].type, DNS_TYPE_CNAME);
	assert_string_equal(filt.rr[0].target, "cdn.test");
	assert_int_equal(filt.rr[0].ttl, 300); /* capped */
	assert_string_equal(filt.rr[1].target, "edge.cdn.test");
	assert_int_equal(filt.rr[2].type, DNS_TYPE_A);
	assert_int_equal(filt.min_ttl, 20);

	/* A chain through a denied name yields nothing. */
	resp_init(&q, 0);
	add_cname(&resp, "www.allowed.test", "evil.test");
	add_a(&resp, "evil.test", "203.0.113.66", 20);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 0);
	assert_int_equal(filt.why, VR_CNAME_DENIED);
	assert_string_equal(filt.detail, "CNAME to a denied name");
	/* Audit mode follows it, and says so. */
	assert_int_equal(dns_filter(audit, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 2);
	assert_int_equal(filt.why, VR_CNAME_DENIED);
	assert_string_equal(filt.detail, "audit: CNAME to a denied name");

	/* So does a chain into a name whose every allowed port is denied;
	 * one into a name open only on 5432 is followed. */
	resp_init(&q, 0);
	add_cname(&resp, "www.allowed.test", "closed.test");
	add_a(&resp, "closed.test", "203.0.113.67", 20);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 0);
	assert_int_equal(filt.why, VR_CNAME_DENIED);
	assert_string_equal(filt.detail, "CNAME to a denied name");
	resp_init(&q, 0);
	add_cname(&resp, "www.allowed.test", "db.test");
	add_a(&resp, "db.test", "203.0.113.68", 20);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, 2);
	assert_int_equal(filt.why, VR_NONE);

	/* A CNAME loop ends after DNS_MAX_CHAIN links. */
	resp_init(&q, 0);
	add_cname(&resp, "www.allowed.test", "a.test");
	add_cname(&resp, "a.test", "www.allowed.test");
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(filt.n, DNS_MAX_CHAIN);
}

static void
test_reply(void **state)
{
	struct dns_query q = mkq("Allowed.test", DNS_TYPE_A, true);
	struct dns_response r;
	uint8_t buf[DNS_MSG_MAX];
	size_t n;
	char ip[32];

	(void)state;
	/* Deny with EDE when the query had OPT ... */
	n = dns_reply(&q, NULL, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, "airlock: no",
	              dns_udp_limit(&q), buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_OK);
	assert_int_equal(DNS_RCODE(r.flags), DNS_RCODE_NXDOMAIN);
	assert_int_equal(r.id, 42);
	assert_string_equal(r.qname, "Allowed.test");
	assert_non_null(memmem(buf, n, "airlock: no", 11));
	/* ... and without OPT, no EDE (nowhere to put it). */
	q.has_opt = false;
	n = dns_reply(&q, NULL, DNS_RCODE_NXDOMAIN, DNS_EDE_BLOCKED, "airlock: no",
	              dns_udp_limit(&q), buf, sizeof(buf));
	assert_null(memmem(buf, n, "airlock: no", 11));
	assert_int_equal(buf[11], 0); /* ARCOUNT 0 */

	/* 60 addresses: TC over UDP without EDNS, all of them over TCP. */
	resp_init(&q, 0);
	for (int i = 0; i < 60; i++) {
		snprintf(ip, sizeof(ip), "203.0.113.%d", i + 1);
		add_a(&resp, "allowed.test", ip, 100);
	}
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	n = dns_reply(&q, &filt, 0, -1, NULL, dns_udp_limit(&q), buf, sizeof(buf));
	assert_true(n > 0 && n <= 512);
	assert_true(buf[2] & 0x02); /* TC */
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_OK);
	assert_int_equal(r.n_an, 0);
	n = dns_reply(&q, &filt, 0, -1, NULL, DNS_MSG_MAX, buf, sizeof(buf));
	assert_false(buf[2] & 0x02);
	assert_int_equal(dns_response_parse(buf, n, &r), DNS_OK);
	assert_int_equal(r.n_an, 60);
	/* With EDNS 1232 they fit (60 * 16 + header). */
	q.has_opt = true;
	q.udp_size = 4096;
	assert_int_equal(dns_udp_limit(&q), DNS_UDP_MAX);
	n = dns_reply(&q, &filt, 0, -1, NULL, dns_udp_limit(&q), buf, sizeof(buf));
	assert_false(buf[2] & 0x02);
	assert_true(n <= DNS_UDP_MAX);
}

static void
test_reverse(void **state)
{
	struct sockaddr_storage ss;
	char ip[INET6_ADDRSTRLEN];

	(void)state;
	assert_int_equal(dns_reverse_parse("10.113.0.203.in-addr.arpa", &ss), 0);
	inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, ip, sizeof(ip));
	assert_string_equal(ip, "203.0.113.10");
	assert_int_equal(dns_reverse_parse("256.1.1.1.in-addr.arpa", &ss), -1);
	assert_int_equal(dns_reverse_parse("01.1.1.1.in-addr.arpa", &ss), -1);
	assert_int_equal(dns_reverse_parse("1.1.1.in-addr.arpa", &ss), -1);
	assert_int_equal(
	        dns_reverse_parse(
	                "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa",
	                &ss),
	        0);
	inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, ip, sizeof(ip));
	assert_string_equal(ip, "2001:db8::1");
	assert_int_equal(dns_reverse_parse("1.0.ip6.arpa", &ss), -1);
}

static void
test_acache(void **state)
{
	struct dns_acache *c = dns_acache_new(2);
	struct dns_query q = mkq("allowed.test", DNS_TYPE_A, false);
	static struct dns_filtered out;
	const char *why;

	(void)state;
	resp_init(&q, 0);
	add_a(&resp, "allowed.test", "203.0.113.10", 100);
	add_a(&resp, "allowed.test", "127.0.0.1", 100);
	assert_int_equal(dns_filter(pol, &q, &resp, 300, &filt), 0);
	assert_int_equal(dns_acache_put(c, "allowed.test", DNS_TYPE_A, &filt, "guard", 1000), 0);
	assert_int_equal(dns_acache_get(c, "ALLOWED.test", DNS_TYPE_A, 11000, &out, &why), 0);
	assert_int_equal(out.n, 1);
	assert_int_equal(out.rr[0].ttl, 90); /* 10 s later */
	assert_string_equal(why, "guard");
	assert_int_equal(dns_acache_get(c, "allowed.test", DNS_TYPE_AAAA, 1000, &out, &why), -1);
	assert_int_equal(dns_acache_get(c, "allowed.test", DNS_TYPE_A, 101000, &out, &why), -1);
	/* SERVFAIL is never stored; eviction keeps the bound. */
	filt.rcode = DNS_RCODE_SERVFAIL;
	assert_int_equal(dns_acache_put(c, "x.test", DNS_TYPE_A, &filt, NULL, 0), -1);
	filt.rcode = 0;
	dns_acache_put(c, "a.test", DNS_TYPE_A, &filt, NULL, 0);
	dns_acache_put(c, "b.test", DNS_TYPE_A, &filt, NULL, 0);
	dns_acache_put(c, "c.test", DNS_TYPE_A, &filt, NULL, 0);
	assert_int_equal(dns_acache_get(c, "a.test", DNS_TYPE_A, 1, &out, &why), -1);
	assert_int_equal(dns_acache_get(c, "c.test", DNS_TYPE_A, 1, &out, &why), 0);
	dns_acache_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_decide),       cmocka_unit_test(test_filter_guard),
	        cmocka_unit_test(test_filter_catch_all_cidr),
	        cmocka_unit_test(test_filter_chain), cmocka_unit_test(test_reply),
	        cmocka_unit_test(test_reverse),      cmocka_unit_test(test_acache),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
