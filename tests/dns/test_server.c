/* The DNS server's event-driven shell (dns/server.c) over real loopback
 * sockets, no privileges: the test plays the sandbox's client and the
 * upstream resolver, and drives the server's event loop itself. Proves id
 * and source matching (spoofed and stale answers are ignored), the guard
 * on the way back, the retry and SERVFAIL after the budget, the TCP
 * fallback on TC, and TCP clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/membudget.h"
#include "common/util.h"
#include "dns/cache.h"
#include "dns/dns.h"
#include "dns/msg.h"
#include "policy/policy.h"

static const char pol_text[] = "version: 1\n"
                               "name: t\n"
                               "allow:\n"
                               "  - host: allowed.test\n"
                               "  - host: \"*.allowed.test\"\n";

struct fixture {
	struct policy *pol;
	struct dns_cache *cache;
	struct event_base *base;
	struct dns_server *srv;
	int client;       /* UDP, connected to the listener */
	int upstream;     /* UDP, the fake upstream */
	int upstream_tcp; /* TCP listener on the same port */
	int spoofer;      /* UDP, another port */
	struct sockaddr_in listen_addr;
	struct sockaddr_in up_addr;
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
	if (out != NULL)
		*out = a;
	return fd;
}

/* Run the server's loop until fd is readable or ms pass. */
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

static int
setup_ms(void **state, uint32_t timeout_ms, struct fixture *fx)
{
	struct dns_server_config cfg = {0};
	struct sockaddr_in tcp_addr;
	int one = 1;

	memset(fx, 0, sizeof(*fx));
	fx->pol = policy_load_buffer("t.yaml", pol_text, sizeof(pol_text) - 1, NULL);
	fx->cache = dns_cache_new(64);
	fx->base = event_base_new();
	if (fx->pol == NULL || fx->cache == NULL || fx->base == NULL)
		return -1;
	fx->upstream = udp_bound(&fx->up_addr);
	fx->spoofer = udp_bound(NULL);
	/* The upstream's TCP side, on the same port number. */
	fx->upstream_tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(fx->upstream_tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	tcp_addr = fx->up_addr;
	if (bind(fx->upstream_tcp, (struct sockaddr *)&tcp_addr, sizeof(tcp_addr)) != 0 ||
	    listen(fx->upstream_tcp, 4) != 0)
		return -1;
	cfg.policy = fx->pol;
	cfg.cache = fx->cache;
	memcpy(&cfg.upstream[0], &fx->up_addr, sizeof(fx->up_addr));
	cfg.n_upstream = 1;
	cfg.timeout_ms = timeout_ms;
	fx->srv = dns_server_new(fx->base, &cfg);
	if (fx->srv == NULL)
		return -1;
	{
		int lfd = udp_bound(&fx->listen_addr);

		if (dns_server_add_udp(fx->srv, lfd) != 0)
			return -1;
	}
	fx->client = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (connect(fx->client, (struct sockaddr *)&fx->listen_addr, sizeof(fx->listen_addr)) != 0)
		return -1;
	*state = fx;
	return 0;
}

static int
setup(void **state)
{
	static struct fixture f;

	return setup_ms(state, 400, &f);
}

/* Upstream questions that outlive any flood a test sends. */
static int
setup_slow(void **state)
{
	static struct fixture f;

	return setup_ms(state, 10000, &f);
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	dns_server_free(f->srv);
	close(f->client);
	close(f->upstream);
	close(f->upstream_tcp);
	close(f->spoofer);
	event_base_free(f->base);
	dns_cache_free(f->cache);
	policy_free(f->pol);
	return 0;
}

static size_t
mkquery(uint8_t *buf, size_t cap, uint16_t id, const char *name, bool opt)
{
	struct dns_builder b;

	dns_build_init(&b, buf, cap, id, DNS_FLAG_RD);
	dns_build_question(&b, name, DNS_TYPE_A, DNS_CLASS_IN);
	if (opt)
		dns_build_opt(&b, 1232, 0, -1, NULL);
	return dns_build_finish(&b);
}

/* An upstream answer for q (as received) with the given A records. */
static size_t
mkanswer(uint8_t *buf, size_t cap, const struct dns_query *q, uint16_t flags,
         const char *const *ips, size_t n)
{
	struct dns_builder b;

	dns_build_init(&b, buf, cap, q->id, (uint16_t)(DNS_FLAG_QR | DNS_FLAG_RA | flags));
	dns_build_question(&b, q->qname, q->qtype, q->qclass);
	for (size_t i = 0; i < n; i++) {
		uint8_t a[4];

		inet_pton(AF_INET, ips[i], a);
		dns_build_rr(&b, DNS_SEC_AN, q->qname, DNS_TYPE_A, 600, a, 4);
	}
	return dns_build_finish(&b);
}

/* Receive the upstream's copy of a query. */
static void
upstream_recv(struct fixture *f, struct dns_query *q, struct sockaddr_in *from)
{
	uint8_t buf[2048];
	socklen_t flen = sizeof(*from);
	ssize_t n;

	assert_true(wait_readable(f, f->upstream, 2000));
	n = recvfrom(f->upstream, buf, sizeof(buf), 0, (struct sockaddr *)from, &flen);
	assert_true(n > 0);
	assert_int_equal(dns_query_parse(buf, (size_t)n, q), DNS_OK);
}

static void
test_forward_spoof_guard(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[2048];
	struct dns_query uq;
	struct dns_response r;
	struct sockaddr_in from;
	const char *spoof[] = {"203.0.113.66"};
	const char *good[] = {"203.0.113.10", "127.0.0.1"};
	size_t n;
	ssize_t got;

	n = mkquery(buf, sizeof(buf), 0x1111, "WWW.Allowed.Test", true);
	assert_int_equal(send(f->client, buf, n, 0), (ssize_t)n);
	upstream_recv(f, &uq, &from);
	/* Our upstream query: new id, RD, EDNS, the name in a case of its
	 * own (0x20), which the answers below echo. */
	assert_true(dns_name_eq(uq.qname, "www.allowed.test"));
	assert_true(uq.flags & DNS_FLAG_RD);
	assert_true(uq.has_opt);

	/* The right id from the wrong port: ignored. */
	n = mkanswer(buf, sizeof(buf), &uq, 0, spoof, 1);
	sendto(f->spoofer, buf, n, 0, (struct sockaddr *)&from, sizeof(from));
	/* The right port with the wrong id: ignored. */
	uq.id ^= 0x5555;
	n = mkanswer(buf, sizeof(buf), &uq, 0, spoof, 1);
	sendto(f->upstream, buf, n, 0, (struct sockaddr *)&from, sizeof(from));
	uq.id ^= 0x5555;
	assert_false(wait_readable(f, f->client, 100));

	/* The real answer: loopback removed, TTL capped, id restored. */
	n = mkanswer(buf, sizeof(buf), &uq, 0, good, 2);
	sendto(f->upstream, buf, n, 0, (struct sockaddr *)&from, sizeof(from));
	assert_true(wait_readable(f, f->client, 2000));
	got = recv(f->client, buf, sizeof(buf), 0);
	assert_true(got > 0);
	assert_int_equal(dns_response_parse(buf, (size_t)got, &r), DNS_OK);
	assert_int_equal(r.id, 0x1111);
	assert_string_equal(r.qname, "WWW.Allowed.Test");
	assert_int_equal(r.n_an, 1);
	assert_int_equal(r.an[0].addr[3], 10);
	assert_int_equal(r.an[0].ttl, 300);
	assert_non_null(memmem(buf, (size_t)got, "127.0.0.1 (loopback)", 20));
	/* The address is now known to the IP -> name cache. */
	{
		struct sockaddr_in a = {.sin_family = AF_INET};

		inet_pton(AF_INET, "203.0.113.10", &a.sin_addr);
		assert_string_equal(
		        dns_cache_lookup(f->cache, (struct sockaddr *)&a, now_ms() / 1000),
		        "www.allowed.test");
	}
	/* Asked again: answered from the answer cache, nothing upstream. */
	n = mkquery(buf, sizeof(buf), 0x2222, "www.allowed.test", false);
	send(f->client, buf, n, 0);
	assert_true(wait_readable(f, f->client, 2000));
	got = recv(f->client, buf, sizeof(buf), 0);
	assert_int_equal(dns_response_parse(buf, (size_t)got, &r), DNS_OK);
	assert_int_equal(r.id, 0x2222);
	assert_int_equal(r.n_an, 1);
	assert_false(wait_readable(f, f->upstream, 50));
}

static void
test_timeout_retry_servfail(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[2048];
	struct dns_query q1, q2;
	struct dns_response r;
	struct sockaddr_in from;
	uint64_t t0 = now_ms();
	size_t n;
	ssize_t got;

	n = mkquery(buf, sizeof(buf), 0x3333, "slow.allowed.test", true);
	send(f->client, buf, n, 0);
	upstream_recv(f, &q1, &from);
	upstream_recv(f, &q2, &from); /* the retry, after half the budget */
	assert_int_not_equal(q1.id, q2.id);
	assert_true(wait_readable(f, f->client, 2000));
	got = recv(f->client, buf, sizeof(buf), 0);
	assert_int_equal(dns_response_parse(buf, (size_t)got, &r), DNS_OK);
	assert_int_equal(DNS_RCODE(r.flags), DNS_RCODE_SERVFAIL);
	assert_true(now_ms() - t0 >= 380);
	assert_true(now_ms() - t0 < 1500);
	assert_non_null(memmem(buf, (size_t)got, "timed out", 9));
}

static void
test_truncated_goes_tcp(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[4096];
	struct dns_query uq, tq;
	struct dns_response r;
	struct sockaddr_in from;
	const char *ips[] = {"203.0.113.1", "203.0.113.2", "203.0.113.3"};
	size_t n;
	ssize_t got;
	int c;
	uint8_t hdr[2];

	n = mkquery(buf, sizeof(buf), 0x4444, "big.allowed.test", false);
	send(f->client, buf, n, 0);
	upstream_recv(f, &uq, &from);
	n = mkanswer(buf, sizeof(buf), &uq, DNS_FLAG_TC, NULL, 0);
	sendto(f->upstream, buf, n, 0, (struct sockaddr *)&from, sizeof(from));
	/* The server comes back over TCP to the same address. */
	assert_true(wait_readable(f, f->upstream_tcp, 2000));
	c = accept(f->upstream_tcp, NULL, NULL);
	assert_true(c >= 0);
	assert_true(wait_readable(f, c, 2000));
	assert_int_equal(recv(c, hdr, 2, MSG_WAITALL), 2);
	n = (size_t)(hdr[0] << 8 | hdr[1]);
	assert_int_equal(recv(c, buf, n, MSG_WAITALL), (ssize_t)n);
	assert_int_equal(dns_query_parse(buf, n, &tq), DNS_OK);
	assert_true(dns_name_eq(tq.qname, "big.allowed.test"));
	n = mkanswer(buf + 2, sizeof(buf) - 2, &tq, 0, ips, 3);
	buf[0] = (uint8_t)(n >> 8);
	buf[1] = (uint8_t)n;
	assert_int_equal(send(c, buf, n + 2, 0), (ssize_t)(n + 2));
	assert_true(wait_readable(f, f->client, 2000));
	got = recv(f->client, buf, sizeof(buf), 0);
	assert_int_equal(dns_response_parse(buf, (size_t)got, &r), DNS_OK);
	assert_int_equal(r.id, 0x4444);
	assert_int_equal(r.n_an, 3);
	close(c);
}

static void
test_denied_and_malformed(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[2048];
	struct dns_response r;
	size_t n;
	ssize_t got;

	/* Garbage: dropped, no answer, the server lives on. */
	send(f->client, "\x01\x02\x03", 3, 0);
	assert_false(wait_readable(f, f->client, 50));
	n = mkquery(buf, sizeof(buf), 0x5555, "evil.test", true);
	send(f->client, buf, n, 0);
	assert_true(wait_readable(f, f->client, 2000));
	got = recv(f->client, buf, sizeof(buf), 0);
	assert_int_equal(dns_response_parse(buf, (size_t)got, &r), DNS_OK);
	assert_int_equal(DNS_RCODE(r.flags), DNS_RCODE_NXDOMAIN);
	assert_non_null(memmem(buf, (size_t)got, "no rule allows evil.test", 24));
	assert_false(wait_readable(f, f->upstream, 50));
}

/* ---- TCP clients: slots, idle time, the queue budget ---- */

/* A listening AF_UNIX stream socket for dns_server_add_tcp (the server
 * does not care which family); *addr is where to connect. */
static int
tcp_listener(struct sockaddr_un *addr, const char *tag)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(addr, 0, sizeof(*addr));
	addr->sun_family = AF_UNIX;
	snprintf(addr->sun_path + 1, sizeof(addr->sun_path) - 1, "airlock-test-dns-%s-%d", tag,
	         (int)getpid());
	assert_int_equal(bind(fd, (struct sockaddr *)addr, sizeof(*addr)), 0);
	assert_int_equal(listen(fd, 128), 0);
	return fd;
}

static int
tcp_client(const struct sockaddr_un *addr)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(connect(fd, (const struct sockaddr *)addr, sizeof(*addr)), 0);
	return fd;
}

/* Whether fd was closed by the server (EOF or reset) within ms. */
static bool
closed_within(struct fixture *f, int fd, int ms)
{
	char b[512];

	for (int i = 0; i < ms; i++) {
		ssize_t n;

		event_base_loop(f->base, EVLOOP_NONBLOCK);
		n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return true;
		usleep(1000);
	}
	return false;
}

/* 64 connections that sent a byte and nothing more hold every slot; a
 * 65th that asks gets its answer (the oldest idle one makes room), and
 * none of them outlives the idle time, trickling or not. */
static void
test_tcp_slots_and_idle(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_un addr;
	int idle[64], c;
	uint8_t buf[600];
	size_t n;
	struct dns_response r;
	ssize_t got;
	uint64_t start;

	assert_int_equal(dns_server_add_tcp(f->srv, tcp_listener(&addr, "slots")), 0);
	start = now_ms();
	for (int i = 0; i < 64; i++) {
		idle[i] = tcp_client(&addr);
		assert_int_equal(send(idle[i], "\x00", 1, 0), 1);
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(500); /* accepted in order: the first is the oldest */
	}
	assert_false(closed_within(f, idle[0], 50));
	c = tcp_client(&addr);
	n = mkquery(buf + 2, sizeof(buf) - 2, 0x6666, "evil.test", false);
	buf[0] = (uint8_t)(n >> 8);
	buf[1] = (uint8_t)n;
	assert_int_equal(send(c, buf, n + 2, 0), (ssize_t)(n + 2));
	assert_true(wait_readable(f, c, 2000));
	got = recv(c, buf, sizeof(buf), 0);
	assert_true(got > 2);
	assert_int_equal(dns_response_parse(buf + 2, (size_t)got - 2, &r), DNS_OK);
	assert_int_equal(r.id, 0x6666);
	assert_true(closed_within(f, idle[0], 100));
	assert_false(closed_within(f, idle[1], 50));
	/* Bytes that trickle in do not make a connection active: 10 s after
	 * its accept, idle[1] is closed although it sent a byte every second. */
	while (now_ms() - start < 8500) {
		assert_false(closed_within(f, idle[1], 1000));
		assert_int_equal(send(idle[1], "\x1d", 1, MSG_NOSIGNAL), 1);
	}
	assert_true(closed_within(f, idle[1], 3000));
	assert_true(now_ms() - start >= 10000);
	for (int i = 0; i < 64; i++)
		close(idle[i]);
	close(c);
}

/* A client that sends 5,000 queries and reads no answer: what the server
 * queues for it (answers, and queries read but not yet taken) stops at the
 * queue budget's cap, plus one read and one answer; once the client reads,
 * every answer comes. */
static void
test_tcp_queue_budget(void **state)
{
	struct fixture *f = *state;
	struct dns_server_config cfg = {0};
	struct membudget *b = membudget_new(f->base, 8192);
	struct dns_server *srv;
	struct sockaddr_un addr;
	static uint8_t q[5000 * 40];
	uint8_t in[65536];
	size_t qlen = 0, sent = 0, got = 0, answers = 0, need = 2;
	int c;

	assert_non_null(b);
	cfg.policy = f->pol;
	cfg.queue = b;
	srv = dns_server_new(f->base, &cfg);
	assert_non_null(srv);
	assert_int_equal(dns_server_add_tcp(srv, tcp_listener(&addr, "budget")), 0);
	for (int i = 0; i < 5000; i++) {
		size_t n = mkquery(q + qlen + 2, sizeof(q) - qlen - 2, (uint16_t)i, "evil.test",
		                   false);

		q[qlen] = (uint8_t)(n >> 8);
		q[qlen + 1] = (uint8_t)n;
		qlen += n + 2;
	}
	c = tcp_client(&addr);
	assert_int_equal(fcntl(c, F_SETFL, O_NONBLOCK), 0);
	for (int i = 0; i < 2000; i++) {
		ssize_t n = sent < qlen ? send(c, q + sent, qlen - sent, MSG_NOSIGNAL) : 0;

		if (n > 0)
			sent += (size_t)n;
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		assert_true(membudget_used(b) <= 8192 + 4096 + 512);
		usleep(100);
	}
	assert_true(membudget_over(b)); /* what held the answers back */
	assert_true(membudget_peak(b) <= 8192 + 4096 + 512);
	/* Reading: every answer arrives. */
	for (int i = 0; i < 20000 && answers < 5000; i++) {
		ssize_t n = sent < qlen ? send(c, q + sent, qlen - sent, MSG_NOSIGNAL) : 0;

		if (n > 0)
			sent += (size_t)n;
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		while ((n = recv(c, in + got, sizeof(in) - got, 0)) > 0) {
			got += (size_t)n;
			while (got >= need) {
				size_t len = (size_t)(in[0] << 8 | in[1]);

				if (got < 2 + len)
					break;
				answers++;
				memmove(in, in + 2 + len, got - 2 - len);
				got -= 2 + len;
			}
		}
		usleep(100);
	}
	assert_int_equal(answers, 5000);
	close(c);
	dns_server_free(srv);
	assert_int_equal(membudget_used(b), 0);
	membudget_free(b);
}

/* Run the loop a little, read every reply waiting at the client and
 * discard what reached the upstream. Counts SERVFAILs that say the
 * listener is full, and notes the reply with id want (if any). */
static void
flood_drain(struct fixture *f, size_t *busy, int want_id, unsigned *want_rcode)
{
	uint8_t buf[2048];
	ssize_t got;

	for (int k = 0; k < 4; k++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
	while ((got = recv(f->client, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		struct dns_response r;

		if (dns_response_parse(buf, (size_t)got, &r) != DNS_OK)
			continue;
		if (want_id >= 0 && r.id == (uint16_t)want_id)
			*want_rcode = DNS_RCODE(r.flags);
		else if (DNS_RCODE(r.flags) == DNS_RCODE_SERVFAIL &&
		         memmem(buf, (size_t)got, "too many", 8) != NULL)
			(*busy)++;
	}
	while (recv(f->upstream, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* A flood of distinct allowed names the upstream never answers: the
 * listener holds DNS_MAX_PENDING of them and refuses the rest at once
 * with SERVFAIL and an EDE, instead of keeping every one for the budget. */
static void
test_pending_bounded(void **state)
{
	struct fixture *f = *state;
	const size_t N = DNS_MAX_PENDING + 1000;
	uint8_t buf[512];
	size_t busy = 0;
	unsigned rc = 0;

	for (size_t i = 0; i < N;) {
		for (int k = 0; k < 32 && i < N; k++, i++) {
			char name[64];
			size_t n;

			snprintf(name, sizeof(name), "n%zu.allowed.test", i);
			n = mkquery(buf, sizeof(buf), (uint16_t)i, name, true);
			assert_int_equal(send(f->client, buf, n, 0), (ssize_t)n);
		}
		flood_drain(f, &busy, -1, &rc);
	}
	for (int k = 0; k < 20; k++) {
		flood_drain(f, &busy, -1, &rc);
		usleep(5000);
	}
	print_message("%zu queries for distinct names: %zu refused at once (cap %d)\n", N, busy,
	              DNS_MAX_PENDING);
	/* Some datagrams may be lost on loopback; most of the 1000 are not. */
	assert_true(busy >= 900);
	assert_true(busy <= N - DNS_MAX_PENDING);
}

/* A flood of one name with a new id each time: the resolver keeps
 * RESOLVER_MAX_WAITERS of them, the rest get SERVFAIL at once, and the
 * listener still answers another name. */
static void
test_flood_one_name(void **state)
{
	struct fixture *f = *state;
	const size_t N = 2000;
	uint8_t buf[2048];
	size_t busy = 0, n;
	unsigned rc = 0xffff;
	struct dns_query uq;
	struct sockaddr_in from;
	const char *ip[] = {"203.0.113.30"};

	for (size_t i = 0; i < N;) {
		for (int k = 0; k < 32 && i < N; k++, i++) {
			n = mkquery(buf, sizeof(buf), (uint16_t)i, "same.allowed.test", true);
			assert_int_equal(send(f->client, buf, n, 0), (ssize_t)n);
		}
		flood_drain(f, &busy, -1, &rc);
	}
	for (int k = 0; k < 20; k++) {
		flood_drain(f, &busy, -1, &rc);
		usleep(5000);
	}
	print_message("%zu queries for one name: %zu refused at once\n", N, busy);
	assert_true(busy >= N - 64 - 100);
	/* Another name goes upstream and comes back. */
	n = mkquery(buf, sizeof(buf), 0xbeef, "other.allowed.test", true);
	assert_int_equal(send(f->client, buf, n, 0), (ssize_t)n);
	do
		upstream_recv(f, &uq, &from);
	while (!dns_name_eq(uq.qname, "other.allowed.test"));
	n = mkanswer(buf, sizeof(buf), &uq, 0, ip, 1);
	assert_int_equal(sendto(f->upstream, buf, n, 0, (struct sockaddr *)&from, sizeof(from)),
	                 (ssize_t)n);
	for (int k = 0; k < 100 && rc == 0xffff; k++) {
		flood_drain(f, &busy, 0xbeef, &rc);
		usleep(5000);
	}
	assert_int_equal(rc, DNS_RCODE_NOERROR);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_forward_spoof_guard),
	        cmocka_unit_test(test_timeout_retry_servfail),
	        cmocka_unit_test(test_truncated_goes_tcp),
	        cmocka_unit_test(test_denied_and_malformed),
	        cmocka_unit_test(test_tcp_slots_and_idle),
	        cmocka_unit_test(test_tcp_queue_budget),
	        cmocka_unit_test_setup_teardown(test_pending_bounded, setup_slow, teardown),
	        cmocka_unit_test_setup_teardown(test_flood_one_name, setup_slow, teardown),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
