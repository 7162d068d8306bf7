/* The one resolver (dns/resolver.c) over real loopback sockets, no
 * privileges: the test plays the upstream and drives the event loop. Proves
 * that a retry keeps accepting the first try's answer, that the shared
 * cache answers a second lookup with nothing sent upstream, the CNAME
 * policy and the guard on what the proxy is given, timeouts, NXDOMAIN, and
 * the hosts file (parsed, answered, guarded). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <fcntl.h>
#include <malloc.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "dns/msg.h"
#include "dns/resolver.h"
#include "policy/policy.h"

static const char pol_text[] = "version: 1\n"
                               "name: t\n"
                               "allow:\n"
                               "  - host: allowed.test\n"
                               "  - host: \"*.allowed.test\"\n"
                               "deny:\n"
                               "  - host: denied.test\n";

struct fixture {
	struct policy *pol;
	struct event_base *base;
	struct resolver *r;
	int upstream; /* UDP, the fake upstream */
	struct sockaddr_in up_addr;
	struct sockaddr_in peer; /* the resolver's socket, as the upstream saw it */
	char hosts_path[64];
};

/* What a callback saw. */
struct seen {
	int calls;
	struct resolver_addrs addrs;
	enum resolver_status status;
	unsigned rcode;
	size_t n;
	uint8_t addr[16]; /* the first record's address */
	char why[128];    /* res->why as this callback saw it */
	bool from_hosts;
	struct resolver *r;        /* for callbacks that call back in */
	struct resolver_req *kill; /* a waiter this callback cancels */
};

static int
udp_bound(struct sockaddr_in *out)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*out = a;
	return fd;
}

static int
setup_hosts(void **state, const char *hosts)
{
	static struct fixture f;
	struct resolver_config cfg = {0};

	memset(&f, 0, sizeof(f));
	f.pol = policy_load_buffer("t.yaml", pol_text, sizeof(pol_text) - 1, NULL);
	f.base = event_base_new();
	if (f.pol == NULL || f.base == NULL)
		return -1;
	f.upstream = udp_bound(&f.up_addr);
	cfg.policy = f.pol;
	memcpy(&cfg.upstream[0], &f.up_addr, sizeof(f.up_addr));
	cfg.n_upstream = 1;
	cfg.timeout_ms = 400;
	if (hosts != NULL) {
		int fd;

		str_copy(f.hosts_path, "/tmp/airlock-hosts-XXXXXX", sizeof(f.hosts_path));
		if ((fd = mkstemp(f.hosts_path)) < 0 ||
		    write(fd, hosts, strlen(hosts)) != (ssize_t)strlen(hosts))
			return -1;
		close(fd);
		cfg.hosts_path = f.hosts_path;
	}
	f.r = resolver_new(f.base, &cfg);
	if (f.r == NULL)
		return -1;
	*state = &f;
	return 0;
}

static int
setup(void **state)
{
	return setup_hosts(state, NULL);
}

static int
setup_with_hosts(void **state)
{
	return setup_hosts(state, "# a comment\n"
	                          "203.0.113.5 Host.Allowed.Test. alias.allowed.test # trailing\n"
	                          "10.0.0.5 priv.allowed.test\n"
	                          "2001:db8::5 host.allowed.test\n"
	                          "not-an-address bad.allowed.test\n");
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	resolver_free(f->r);
	close(f->upstream);
	event_base_free(f->base);
	policy_free(f->pol);
	if (f->hosts_path[0] != '\0')
		unlink(f->hosts_path);
	return 0;
}

/* Run the loop until fd is readable or ms pass. */
static bool
wait_readable(struct fixture *f, int fd, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	do {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		event_base_loop(f->base, EVLOOP_NONBLOCK);
		if (poll(&p, 1, 5) == 1)
			return true;
	} while (now_ms() < end);
	return false;
}

/* Run the loop until *calls is nonzero or ms pass. */
static void
wait_called(struct fixture *f, const int *calls, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (*calls == 0 && now_ms() < end) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(2000);
	}
}

static bool
upstream_recv(struct fixture *f, struct dns_query *q, int ms)
{
	uint8_t buf[2048];
	socklen_t plen = sizeof(f->peer);
	ssize_t n;

	if (!wait_readable(f, f->upstream, ms))
		return false;
	n = recvfrom(f->upstream, buf, sizeof(buf), 0, (struct sockaddr *)&f->peer, &plen);
	assert_true(n > 0);
	assert_int_equal(dns_query_parse(buf, (size_t)n, q), DNS_OK);
	return true;
}

/* Answer q: rcode, an optional CNAME to cname, then A (or AAAA) ip. */
static void
upstream_answer(struct fixture *f, const struct dns_query *q, unsigned rcode, const char *cname,
                const char *ip)
{
	uint8_t buf[2048], a[16];
	struct dns_builder b;
	const char *owner = q->qname;
	size_t n;

	dns_build_init(&b, buf, sizeof(buf), q->id,
	               (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | DNS_FLAG_RD | rcode));
	dns_build_question(&b, q->qname, q->qtype, q->qclass);
	if (cname != NULL) {
		dns_build_rr_name(&b, DNS_SEC_AN, q->qname, DNS_TYPE_CNAME, 300, cname);
		owner = cname;
	}
	if (ip != NULL && q->qtype == DNS_TYPE_A && inet_pton(AF_INET, ip, a) == 1)
		dns_build_rr(&b, DNS_SEC_AN, owner, DNS_TYPE_A, 300, a, 4);
	if (ip != NULL && q->qtype == DNS_TYPE_AAAA && inet_pton(AF_INET6, ip, a) == 1)
		dns_build_rr(&b, DNS_SEC_AN, owner, DNS_TYPE_AAAA, 300, a, 16);
	n = dns_build_finish(&b);
	assert_true(n > 0);
	assert_int_equal(
	        sendto(f->upstream, buf, n, 0, (struct sockaddr *)&f->peer, sizeof(f->peer)),
	        (ssize_t)n);
}

static void
on_result(const struct resolver_result *res, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	s->status = res->status;
	s->rcode = res->f != NULL ? res->f->rcode : 0;
	s->n = res->f != NULL ? res->f->n : 0;
	if (s->n > 0)
		memcpy(s->addr, res->f->rr[0].addr, sizeof(s->addr));
	str_copy(s->why, res->why != NULL ? res->why : "", sizeof(s->why));
	s->from_hosts = res->from_hosts;
}

static void
on_addrs(const struct resolver_addrs *res, void *arg)
{
	struct seen *s = arg;

	s->calls++;
	s->addrs = *res;
}

static struct dns_query
question(const char *name, uint16_t qtype)
{
	struct dns_query q = {0};

	str_copy(q.qname, name, sizeof(q.qname));
	q.qtype = qtype;
	q.qclass = DNS_CLASS_IN;
	q.flags = DNS_FLAG_RD;
	return q;
}

/* The first try goes unanswered past its half of the budget, the retry is
 * sent, and then the first try's answer arrives: it is taken. */
static void
test_retry_keeps_first_answer(void **state)
{
	struct fixture *f = *state;
	struct dns_query q = question("slow.allowed.test", DNS_TYPE_A), up1, up2;
	struct resolver_result now;
	struct seen s = {0};
	struct resolver_req *req;

	req = resolver_ask(f->r, &q, "slow.allowed.test", on_result, &s, &now);
	assert_non_null(req);
	assert_true(upstream_recv(f, &up1, 1000));
	assert_true(upstream_recv(f, &up2, 1000)); /* the retry, after 200 ms */
	assert_int_equal(s.calls, 0);
	assert_int_not_equal(up1.id, up2.id);
	upstream_answer(f, &up1, DNS_RCODE_NOERROR, NULL, "203.0.113.7");
	wait_called(f, &s.calls, 1000);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.status, RESOLVER_ANSWER);
	assert_int_equal(s.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(s.n, 1);
	/* The retry's answer, late, goes nowhere. */
	upstream_answer(f, &up2, DNS_RCODE_NOERROR, NULL, "203.0.113.8");
	wait_readable(f, f->upstream, 50);
	assert_int_equal(s.calls, 1);
}

/* A lookup asks A and AAAA; the next one is answered from the cache. */
static void
test_lookup_then_cached(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s = {0};
	struct dns_query q1, q2;
	struct resolver_lookup *l;

	l = resolver_lookup(f->r, "www.allowed.test", on_addrs, &s, &now);
	assert_non_null(l);
	assert_true(upstream_recv(f, &q1, 1000));
	assert_true(upstream_recv(f, &q2, 1000));
	upstream_answer(f, &q1, DNS_RCODE_NOERROR, NULL,
	                q1.qtype == DNS_TYPE_A ? "203.0.113.9" : "2001:db8::9");
	upstream_answer(f, &q2, DNS_RCODE_NOERROR, NULL,
	                q2.qtype == DNS_TYPE_A ? "203.0.113.9" : "2001:db8::9");
	wait_called(f, &s.calls, 1000);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.addrs.status, RESOLVER_ADDRS_OK);
	assert_int_equal(s.addrs.n, 2);
	assert_int_equal(s.addrs.addr[0].ss_family, AF_INET6); /* v6 first */
	assert_int_equal(s.addrs.addr[1].ss_family, AF_INET);
	/* Again: known at once, nothing sent. */
	memset(&now, 0, sizeof(now));
	assert_null(resolver_lookup(f->r, "www.allowed.test", on_addrs, &s, &now));
	assert_int_equal(now.status, RESOLVER_ADDRS_OK);
	assert_int_equal(now.n, 2);
	assert_false(wait_readable(f, f->upstream, 50));
	assert_int_equal(s.calls, 1);
}

/* Two askers of one name share its questions; one that leaves does not
 * take the answer from the other. */
static void
test_lookup_shared_in_flight(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s1 = {0}, s2 = {0}, s3 = {0};
	struct dns_query q1, q2, extra;
	struct resolver_lookup *l1, *l2, *l3;

	l1 = resolver_lookup(f->r, "burst.allowed.test", on_addrs, &s1, &now);
	l2 = resolver_lookup(f->r, "BURST.allowed.test", on_addrs, &s2, &now);
	l3 = resolver_lookup(f->r, "burst.allowed.test", on_addrs, &s3, &now);
	assert_non_null(l1);
	assert_non_null(l2);
	assert_non_null(l3);
	resolver_lookup_cancel(l2);
	assert_true(upstream_recv(f, &q1, 1000));
	assert_true(upstream_recv(f, &q2, 1000));
	/* One A and one AAAA for the three, nothing more (the retry comes
	 * only after 200 ms). */
	assert_false(upstream_recv(f, &extra, 50));
	upstream_answer(f, &q1, DNS_RCODE_NOERROR, NULL,
	                q1.qtype == DNS_TYPE_A ? "203.0.113.12" : "2001:db8::12");
	upstream_answer(f, &q2, DNS_RCODE_NOERROR, NULL,
	                q2.qtype == DNS_TYPE_A ? "203.0.113.12" : "2001:db8::12");
	wait_called(f, &s3.calls, 1000);
	wait_called(f, &s1.calls, 1000);
	assert_int_equal(s1.calls, 1);
	assert_int_equal(s2.calls, 0);
	assert_int_equal(s3.calls, 1);
	assert_int_equal(s1.addrs.status, RESOLVER_ADDRS_OK);
	assert_int_equal(s1.addrs.n, 2);
	assert_int_equal(s3.addrs.n, 2);
}

/* Every asker leaves: the question goes, and its late answer with it. */
static void
test_ask_all_cancelled(void **state)
{
	struct fixture *f = *state;
	struct dns_query q = question("left.allowed.test", DNS_TYPE_A), up;
	struct resolver_result now;
	struct seen s = {0};
	struct resolver_req *a, *b;

	a = resolver_ask(f->r, &q, "left.allowed.test", on_result, &s, &now);
	b = resolver_ask(f->r, &q, "left.allowed.test", on_result, &s, &now);
	assert_non_null(a);
	assert_non_null(b);
	assert_true(upstream_recv(f, &up, 1000));
	resolver_cancel(a);
	resolver_cancel(b);
	upstream_answer(f, &up, DNS_RCODE_NOERROR, NULL, "203.0.113.13");
	/* No retry is sent for a question nobody waits for. */
	assert_false(upstream_recv(f, &up, 400));
	assert_int_equal(s.calls, 0);
	/* And a new asker starts afresh. */
	a = resolver_ask(f->r, &q, "left.allowed.test", on_result, &s, &now);
	assert_non_null(a);
	assert_true(upstream_recv(f, &up, 1000));
	resolver_cancel(a); /* s is gone after this function */
}

/* A chain through a denied name gives the proxy nothing to dial. */
static void
test_lookup_cname_denied(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s = {0};
	struct dns_query q;

	assert_non_null(resolver_lookup(f->r, "cdn.allowed.test", on_addrs, &s, &now));
	for (int i = 0; i < 2; i++) {
		assert_true(upstream_recv(f, &q, 1000));
		upstream_answer(f, &q, DNS_RCODE_NOERROR, "denied.test",
		                q.qtype == DNS_TYPE_A ? "203.0.113.10" : "2001:db8::10");
	}
	wait_called(f, &s.calls, 1000);
	assert_int_equal(s.addrs.status, RESOLVER_ADDRS_CNAME);
	assert_int_equal(s.addrs.n, 0);
	/* And from the cache, the same. */
	assert_null(resolver_lookup(f->r, "cdn.allowed.test", on_addrs, &s, &now));
	assert_int_equal(now.status, RESOLVER_ADDRS_CNAME);
}

static void
test_lookup_nxdomain_and_timeout(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s = {0};
	struct dns_query q;
	uint64_t t0;

	assert_non_null(resolver_lookup(f->r, "nx.allowed.test", on_addrs, &s, &now));
	for (int i = 0; i < 2; i++) {
		assert_true(upstream_recv(f, &q, 1000));
		upstream_answer(f, &q, DNS_RCODE_NXDOMAIN, NULL, NULL);
	}
	wait_called(f, &s.calls, 1000);
	assert_int_equal(s.addrs.status, RESOLVER_ADDRS_NXDOMAIN);

	memset(&s, 0, sizeof(s));
	t0 = now_ms();
	assert_non_null(resolver_lookup(f->r, "silent.allowed.test", on_addrs, &s, &now));
	wait_called(f, &s.calls, 2000);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.addrs.status, RESOLVER_ADDRS_TIMEOUT);
	/* Within the budget (400 ms), with some slack for a busy machine. */
	assert_true(now_ms() - t0 < 1500);
}

/* A cancelled lookup never calls back, and its late answers are ignored. */
static void
test_lookup_cancel(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s = {0};
	struct dns_query q;
	struct resolver_lookup *l;

	l = resolver_lookup(f->r, "gone.allowed.test", on_addrs, &s, &now);
	assert_non_null(l);
	assert_true(upstream_recv(f, &q, 1000));
	resolver_lookup_cancel(l);
	upstream_answer(f, &q, DNS_RCODE_NOERROR, NULL, "203.0.113.11");
	wait_readable(f, f->upstream, 600);
	assert_int_equal(s.calls, 0);
}

static void
test_hosts_parse(void **state)
{
	static const char text[] = "127.0.0.1 localhost\n"
	                           "  ::1\tlocalhost ip6-localhost # comment\n"
	                           "#203.0.113.1 commented.test\n"
	                           "203.0.113.2 Two.Test. two-alias.test\n"
	                           "999.1.1.1 bad-address.test\n"
	                           "203.0.113.3 bad_name..test ok3.test\n"
	                           "203.0.113.4"; /* no name, no newline */
	struct resolver_hosts *h = resolver_hosts_parse(text, sizeof(text) - 1);
	static struct dns_response r;
	char ip[INET6_ADDRSTRLEN];

	(void)state;
	assert_non_null(h);
	assert_true(resolver_hosts_answer(h, "two.test", DNS_TYPE_A, &r));
	assert_int_equal(r.n_an, 1);
	inet_ntop(AF_INET, r.an[0].addr, ip, sizeof(ip));
	assert_string_equal(ip, "203.0.113.2");
	assert_true(resolver_hosts_answer(h, "two-alias.test", DNS_TYPE_A, &r));
	/* Known, but not for this type: an empty answer (NODATA). */
	assert_true(resolver_hosts_answer(h, "two.test", DNS_TYPE_AAAA, &r));
	assert_int_equal(r.n_an, 0);
	assert_true(resolver_hosts_answer(h, "ip6-localhost", DNS_TYPE_AAAA, &r));
	assert_int_equal(r.n_an, 1);
	assert_true(resolver_hosts_answer(h, "localhost", DNS_TYPE_A, &r));
	inet_ntop(AF_INET, r.an[0].addr, ip, sizeof(ip));
	assert_string_equal(ip, "127.0.0.1");
	assert_true(resolver_hosts_answer(h, "ok3.test", DNS_TYPE_A, &r));
	assert_false(resolver_hosts_answer(h, "commented.test", DNS_TYPE_A, &r));
	assert_false(resolver_hosts_answer(h, "bad-address.test", DNS_TYPE_A, &r));
	assert_false(resolver_hosts_answer(h, "other.test", DNS_TYPE_A, &r));
	resolver_hosts_free(h);
	/* Nothing at all is fine too. */
	h = resolver_hosts_parse("", 0);
	assert_non_null(h);
	assert_false(resolver_hosts_answer(h, "two.test", DNS_TYPE_A, &r));
	resolver_hosts_free(h);
}

/* A finished lookup is reused for the next (resolver.c, lookup_alloc):
 * nothing of a refused one (its reason, the refused address) carries
 * into the answer after it, nor of an answer into a refusal. */
static void
test_lookup_reuse_starts_clean(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s = {0};

	for (int i = 0; i < 3; i++) {
		assert_null(resolver_lookup(f->r, "priv.allowed.test", on_addrs, &s, &now));
		assert_int_equal(now.status, RESOLVER_ADDRS_GUARD);
		assert_int_equal(now.n, 0);
		assert_non_null(strstr(now.why, "10.0.0.5"));
		assert_int_equal(now.refused.ss_family, AF_INET);
		memset(&now, 0xa5, sizeof(now));
		assert_null(resolver_lookup(f->r, "host.allowed.test", on_addrs, &s, &now));
		assert_int_equal(now.status, RESOLVER_ADDRS_OK);
		assert_int_equal(now.n, 2);
		assert_string_equal(now.why, "");
		assert_int_equal(now.refused.ss_family, 0);
		assert_false(now.audit_cname);
		memset(&now, 0xa5, sizeof(now));
	}
	assert_int_equal(s.calls, 0);
}

/* Names in the hosts file are answered from it, never upstream, and its
 * private addresses meet the guard like any answer. */
static void
test_hosts_answered_and_guarded(void **state)
{
	struct fixture *f = *state;
	struct resolver_addrs now;
	struct seen s = {0};
	struct dns_query q = question("host.allowed.test", DNS_TYPE_A);
	struct resolver_result res;

	assert_null(resolver_lookup(f->r, "host.allowed.test", on_addrs, &s, &now));
	assert_int_equal(now.status, RESOLVER_ADDRS_OK);
	assert_int_equal(now.n, 2);
	assert_null(resolver_lookup(f->r, "priv.allowed.test", on_addrs, &s, &now));
	assert_int_equal(now.status, RESOLVER_ADDRS_GUARD);
	assert_non_null(strstr(now.why, "10.0.0.5"));
	assert_int_equal(now.refused.ss_family, AF_INET);
	assert_int_equal(((struct sockaddr_in *)&now.refused)->sin_addr.s_addr,
	                 inet_addr("10.0.0.5"));
	/* The listener's question gets the same, marked as from the file. */
	assert_null(resolver_ask(f->r, &q, "host.allowed.test", on_result, &s, &res));
	assert_int_equal(res.status, RESOLVER_ANSWER);
	assert_true(res.from_hosts);
	assert_int_equal(res.f->n, 1);
	assert_false(wait_readable(f, f->upstream, 50));
	assert_int_equal(s.calls, 0);
}

/* One name asked by the thousand (a sandbox flooding the listener with
 * new ids) costs at most RESOLVER_MAX_WAITERS waiters: the rest fail at
 * once, the heap stays flat, and other names are still asked. */
static void
test_waiters_bounded(void **state)
{
	struct fixture *f = *state;
	struct dns_query q = question("flood.allowed.test", DNS_TYPE_A);
	struct dns_query q2 = question("other.allowed.test", DNS_TYPE_A), up;
	struct seen s = {0}, s2 = {0};
	size_t pending = 0, refused = 0;
	const size_t N = 50000;
	struct mallinfo2 m0, m1;

	m0 = mallinfo2();
	for (size_t i = 0; i < N; i++) {
		struct resolver_result now;

		if (resolver_ask(f->r, &q, "flood.allowed.test", on_result, &s, &now) != NULL) {
			pending++;
		} else {
			assert_int_equal(now.status, RESOLVER_FAIL);
			refused++;
		}
	}
	m1 = mallinfo2();
	print_message("asked %zu: %zu waiting, %zu refused, heap +%zu bytes\n", N, pending, refused,
	              m1.uordblks - m0.uordblks);
	assert_true(pending >= 1 && pending <= RESOLVER_MAX_WAITERS);
	assert_int_equal(pending + refused, N);
	/* 50000 waiters would be 2 MB; 64 are a few KB. (ASan's allocator
	 * does not report here: then both readings are 0.) */
	assert_true(m1.uordblks - m0.uordblks < 64 * 1024);
	/* Another name is not crowded out. */
	{
		struct resolver_result now;

		assert_non_null(
		        resolver_ask(f->r, &q2, "other.allowed.test", on_result, &s2, &now));
	}
	for (int i = 0; i < 2; i++) {
		assert_true(upstream_recv(f, &up, 1000));
		upstream_answer(f, &up, DNS_RCODE_NOERROR, NULL, "203.0.113.21");
	}
	wait_called(f, &s2.calls, 1000);
	assert_int_equal(s2.calls, 1);
	assert_int_equal(s2.status, RESOLVER_ANSWER);
	assert_int_equal((size_t)s.calls, pending);
	assert_int_equal(s.status, RESOLVER_ANSWER);
}

/* A waiter's callback asks again and that fails at once (a label over 63
 * bytes cannot be sent): the waiters after it still see their own
 * question's reason, not the failure's. */
static void
on_reask(const struct resolver_result *res, void *arg)
{
	struct seen *s = arg;
	struct dns_query bad =
	        question("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	                 ".allowed.test",
	                 DNS_TYPE_A);
	struct resolver_result now;

	on_result(res, arg);
	assert_null(resolver_ask(s->r, &bad, bad.qname, on_result, s, &now));
	assert_int_equal(now.status, RESOLVER_FAIL);
	if (s->kill != NULL)
		resolver_cancel(s->kill);
}

static void
test_finish_why_per_waiter(void **state)
{
	struct fixture *f = *state;
	struct dns_query q = question("slow.allowed.test", DNS_TYPE_A);
	struct resolver_result now;
	struct seen first = {.r = f->r}, later = {0}, gone = {0};
	struct resolver_req *victim;

	/* Waiters are answered newest first: first, then gone, then later. */
	assert_non_null(resolver_ask(f->r, &q, "slow.allowed.test", on_result, &later, &now));
	victim = resolver_ask(f->r, &q, "slow.allowed.test", on_result, &gone, &now);
	assert_non_null(victim);
	first.kill = victim; /* and first's callback cancels gone */
	assert_non_null(resolver_ask(f->r, &q, "slow.allowed.test", on_reask, &first, &now));
	wait_called(f, &later.calls, 2000);
	assert_int_equal(first.calls, 1);
	assert_int_equal(gone.calls, 0);
	assert_int_equal(later.calls, 1);
	assert_int_equal(later.status, RESOLVER_TIMEOUT);
	print_message("first: \"%s\"; later: \"%s\"\n", first.why, later.why);
	assert_non_null(strstr(first.why, "timed out"));
	assert_non_null(strstr(later.why, "timed out"));
}

/* A name the hosts file knows is never asked upstream, whatever the type:
 * MX, TXT and the like get NODATA from the file. */
static void
test_hosts_other_types_nodata(void **state)
{
	struct fixture *f = *state;
	const uint16_t types[] = {DNS_TYPE_MX, DNS_TYPE_TXT, DNS_TYPE_HTTPS};
	struct seen s = {0};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct dns_query q = question("Host.Allowed.Test", types[i]);
		struct resolver_result res;
		struct resolver_req *w =
		        resolver_ask(f->r, &q, "host.allowed.test", on_result, &s, &res);

		if (w != NULL)
			resolver_cancel(w);
		assert_null(w);
		assert_int_equal(res.status, RESOLVER_ANSWER);
		assert_true(res.from_hosts);
		assert_int_equal(res.f->rcode, DNS_RCODE_NOERROR);
		assert_int_equal(res.f->n, 0);
	}
	assert_false(wait_readable(f, f->upstream, 50));
	assert_int_equal(s.calls, 0);
}

/* An upstream answer to q with qname spelled as given and one A record. */
static size_t
answer_named(const struct dns_query *q, const char *qname, const char *ip, uint8_t *buf, size_t cap)
{
	struct dns_builder b;
	uint8_t a[4];

	inet_pton(AF_INET, ip, a);
	dns_build_init(&b, buf, cap, q->id, (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | DNS_FLAG_RD));
	dns_build_question(&b, qname, q->qtype, q->qclass);
	dns_build_rr(&b, DNS_SEC_AN, qname, DNS_TYPE_A, 300, a, 4);
	return dns_build_finish(&b);
}

/* Read one framed query from a TCP peer while running the loop. */
static void
tcp_recv_query(struct fixture *f, int c, struct dns_query *q)
{
	uint8_t buf[2048];
	size_t have = 0;
	uint64_t end = now_ms() + 2000;

	while (now_ms() < end && (have < 2 || have < 2 + (size_t)(buf[0] << 8 | buf[1]))) {
		ssize_t n = recv(c, buf + have, sizeof(buf) - have, MSG_DONTWAIT);

		if (n > 0)
			have += (size_t)n;
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	assert_true(have >= 2 && have == 2 + (size_t)(buf[0] << 8 | buf[1]));
	assert_int_equal(dns_query_parse(buf + 2, have - 2, q), DNS_OK);
}

/* 0x20: the question goes up in a random mix of cases; an answer whose
 * question is spelled otherwise (an off-path guess) is not taken, the
 * question is asked again over TCP, and the cache key stays lowercase. */
static void
test_case_randomised(void **state)
{
	struct fixture *f = *state;
	const char *name = "mixcase.allowed.test";
	struct dns_query q = question(name, DNS_TYPE_A), up, tq;
	struct resolver_result now;
	struct seen s = {0}, s2 = {0};
	char wrong[DNS_NAME_TEXT_MAX];
	uint8_t buf[2048];
	size_t n;
	int one = 1, l, c = -1;
	struct sockaddr_in ta = f->up_addr;

	/* The upstream's TCP side on the same port, for the retry. */
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(l, (struct sockaddr *)&ta, sizeof(ta)), 0);
	assert_int_equal(listen(l, 4), 0);

	assert_non_null(resolver_ask(f->r, &q, name, on_result, &s, &now));
	assert_true(upstream_recv(f, &up, 1000));
	print_message("sent upstream as %s\n", up.qname);
	assert_true(dns_name_eq(up.qname, name));
	/* The same letters with every case flipped: never what was sent. */
	for (size_t i = 0;; i++) {
		char ch = up.qname[i];

		wrong[i] = (ch >= 'a' && ch <= 'z')   ? (char)(ch - 32)
		           : (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32)
		                                      : ch;
		if (ch == '\0')
			break;
	}
	n = answer_named(&up, wrong, "203.0.113.66", buf, sizeof(buf));
	assert_int_equal(
	        sendto(f->upstream, buf, n, 0, (struct sockaddr *)&f->peer, sizeof(f->peer)),
	        (ssize_t)n);
	/* Not taken: the resolver connects to the upstream's TCP port. */
	if (wait_readable(f, l, 1000))
		c = accept(l, NULL, NULL);
	if (c < 0) {
		wait_called(f, &s.calls, 1000);
		close(l);
		fail_msg("no TCP retry; the answer spelled %s was %s", wrong,
		         s.calls > 0 && s.status == RESOLVER_ANSWER ? "taken" : "not taken");
	}
	assert_int_equal(s.calls, 0);
	tcp_recv_query(f, c, &tq);
	assert_true(dns_name_eq(tq.qname, name));
	n = answer_named(&tq, tq.qname, "203.0.113.20", buf + 2, sizeof(buf) - 2);
	buf[0] = (uint8_t)(n >> 8);
	buf[1] = (uint8_t)n;
	assert_int_equal(send(c, buf, n + 2, MSG_NOSIGNAL), (ssize_t)(n + 2));
	wait_called(f, &s.calls, 1000);
	close(c);
	close(l);
	assert_int_equal(s.calls, 1);
	assert_int_equal(s.status, RESOLVER_ANSWER);
	assert_int_equal(s.n, 1);
	assert_memory_equal(s.addr, "\xcb\x00\x71\x14", 4); /* 203.0.113.20 */
	/* The cache knows the name in any case. */
	q = question("MixCase.Allowed.TEST", DNS_TYPE_A);
	assert_null(resolver_ask(f->r, &q, name, on_result, &s2, &now));
	assert_true(now.cached);
}

/* Every question in flight may need a TCP fallback, each a descriptor:
 * RESOLVER_MAX_TCP are open at once and the next question that needs one
 * fails at once, saying why. */
static void
test_tcp_fallbacks_bounded(void **state)
{
	struct fixture *f = *state;
	const int N = RESOLVER_MAX_TCP + 8;
	struct seen s[RESOLVER_MAX_TCP + 8];
	struct resolver_req *w[RESOLVER_MAX_TCP + 8];
	int one = 1, l, failed = 0, waiting = 0;
	struct sockaddr_in ta = f->up_addr;

	memset(s, 0, sizeof(s));
	l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(l, (struct sockaddr *)&ta, sizeof(ta)), 0);
	assert_int_equal(listen(l, 256), 0); /* connections wait in the backlog */
	for (int i = 0; i < N; i++) {
		char name[64];
		struct dns_query q;
		struct resolver_result now;

		snprintf(name, sizeof(name), "t%d.allowed.test", i);
		q = question(name, DNS_TYPE_A);
		w[i] = resolver_ask(f->r, &q, name, on_result, &s[i], &now);
		assert_non_null(w[i]);
	}
	for (int i = 0; i < N; i++) {
		struct dns_query up;
		uint8_t buf[512];
		struct dns_builder b;
		size_t n;

		assert_true(upstream_recv(f, &up, 1000));
		dns_build_init(&b, buf, sizeof(buf), up.id,
		               (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | DNS_FLAG_RD | DNS_FLAG_TC));
		dns_build_question(&b, up.qname, up.qtype, up.qclass);
		n = dns_build_finish(&b);
		assert_int_equal(sendto(f->upstream, buf, n, 0, (struct sockaddr *)&f->peer,
		                        sizeof(f->peer)),
		                 (ssize_t)n);
	}
	for (int k = 0; k < 50; k++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(2000);
	}
	for (int i = 0; i < N; i++) {
		if (s[i].calls == 0) {
			waiting++;
			resolver_cancel(w[i]);
		} else if (s[i].status == RESOLVER_FAIL &&
		           strstr(s[i].why, "too many upstream TCP")) {
			failed++;
		}
	}
	print_message("%d truncated answers: %d over TCP, %d refused\n", N, waiting, failed);
	close(l);
	assert_int_equal(waiting, RESOLVER_MAX_TCP);
	assert_int_equal(failed, N - RESOLVER_MAX_TCP);
}

/* The cap is on the listener's askers: the proxy's lookups (each holding a
 * connection the proxy bounds) all wait on the same question, and the
 * listener still gets its RESOLVER_MAX_WAITERS beside them. */
static void
test_waiters_cap_spares_lookups(void **state)
{
	struct fixture *f = *state;
	enum { L = 200 };
	static struct resolver_lookup *l[L];
	struct dns_query q = question("burst.allowed.test", DNS_TYPE_A);
	struct resolver_addrs now;
	struct resolver_result res;
	struct seen s = {0}, sa = {0};
	int asked = 0;

	for (int i = 0; i < L; i++) {
		l[i] = resolver_lookup(f->r, "burst.allowed.test", on_addrs, &s, &now);
		assert_non_null(l[i]);
	}
	while (resolver_ask(f->r, &q, "burst.allowed.test", on_result, &sa, &res) != NULL)
		asked++;
	assert_int_equal(asked, RESOLVER_MAX_WAITERS);
	assert_int_equal(res.status, RESOLVER_FAIL);
	for (int i = 0; i < 2; i++) {
		struct dns_query up;

		assert_true(upstream_recv(f, &up, 1000));
		upstream_answer(f, &up, DNS_RCODE_NOERROR, NULL,
		                up.qtype == DNS_TYPE_A ? "203.0.113.40" : "2001:db8::40");
	}
	for (int k = 0; k < 100 && s.calls < L; k++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(2000);
	}
	assert_int_equal(s.calls, L);
	assert_int_equal(s.addrs.status, RESOLVER_ADDRS_OK);
	assert_int_equal(sa.calls, RESOLVER_MAX_WAITERS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_retry_keeps_first_answer, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lookup_then_cached, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lookup_cname_denied, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lookup_shared_in_flight, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_ask_all_cancelled, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lookup_nxdomain_and_timeout, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_lookup_cancel, setup, teardown),
	        cmocka_unit_test(test_hosts_parse),
	        cmocka_unit_test_setup_teardown(test_waiters_bounded, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_finish_why_per_waiter, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_waiters_cap_spares_lookups, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_case_randomised, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_tcp_fallbacks_bounded, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_hosts_other_types_nodata, setup_with_hosts,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_lookup_reuse_starts_clean, setup_with_hosts,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_hosts_answered_and_guarded, setup_with_hosts,
	                                        teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
