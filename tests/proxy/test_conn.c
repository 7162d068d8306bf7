/* The proxy's deny paths without a network: a real proxy object on an
 * AF_UNIX listener, a compiled policy, an egress log in a memfd, and a
 * resolver with no nameserver. Each test sends bytes as a client would and
 * checks the reply (status, Proxy-Status) and the one log line. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "dns/cache.h"
#include "dns/resolver.h"
#include "broker/broker.h"
#include "broker/client.h"
#include "elog/elog.h"
#include "common/membudget.h"
#include "common/util.h"
#include "policy/guard.h"
#include "policy/policy.h"
#include "proxy/conn.h"
#include "proxy/proxy.h"

static const char policy_allow[] = "version: 1\n"
                                   "name: unit\n"
                                   "allow:\n"
                                   "  - host: a.test\n"
                                   "  - host: \"*.d.test\"\n";
static const char policy_deny[] = "deny:\n"
                                  "  - host: x.d.test\n";

struct fixture {
	struct event_base *base;
	struct broker_client *broker; /* a broker of its own, without nameservers */
	pid_t broker_pid;
	struct policy *pol;
	struct elog *log;
	int log_fd; /* a dup of the log's memfd, to read it back */
	struct proxy *px;
	struct sockaddr_un addr;
};

/* Extra policy lines for the next setup (loopback tests add a cidr rule
 * for the ports they listen on), allow and deny. */
static char extra_policy[256];
static char extra_deny[256];
/* For the next setup: the IP->name cache to give the proxy (NULL: none),
 * and an fd to log to instead of a memfd (-1: memfd). */
static struct dns_cache *next_cache;
static int next_log_fd = -1;
/* For the next setup: the origin response timeout (0: the default). */
static uint32_t next_response_ms;

/* Wait until the broker serves: it has closed what it inherited (a
 * listener a test closes is closed) once it answers. A header of no known
 * type is refused as malformed, by id. */
static void
broker_ready(int fd)
{
	struct broker_hdr h = {.type = 0x55, .len = sizeof(h), .id = 1};
	struct broker_reply r;
	struct pollfd p = {.fd = fd, .events = POLLIN};

	assert_int_equal(send(fd, &h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
	assert_int_equal(poll(&p, 1, 5000), 1);
	assert_int_equal(recv(fd, &r, sizeof(r), 0), (ssize_t)sizeof(r));
	assert_int_equal(r.status, BROKER_E_MALFORMED);
}

static int
setup_with_mode(void **state, unsigned max_conns, uint32_t header_ms, const char *log_path,
                bool audit)
{
	char text[1024];
	struct fixture *f = calloc(1, sizeof(*f));
	struct proxy_config cfg;
	int lfd, mfd;

	assert_non_null(f);
	f->base = event_base_new();
	snprintf(text, sizeof(text), "%s%s%s%s", policy_allow, extra_policy, policy_deny,
	         extra_deny);
	f->pol = policy_load_buffer("unit.yaml", text, strlen(text), NULL);
	assert_non_null(f->pol);
	if (audit)
		policy_set_mode(f->pol, POLICY_MODE_AUDIT);
	{
		/* No nameserver: every lookup fails. The connect timeout is
		 * the proxy's below. */
		struct broker_cfg bc = {.policy = f->pol, .connect_timeout_ms = 500};
		char err[256];
		int bfd = broker_spawn(&bc, &f->broker_pid, err, sizeof(err));

		if (bfd < 0)
			fail_msg("%s", err);
		broker_ready(bfd);
		f->broker = broker_client_new(f->base, bfd, 0);
		assert_non_null(f->broker);
	}
	if (log_path != NULL) {
		char err[128];
		f->log = elog_open(log_path, err, sizeof(err));
		f->log_fd = -1;
	} else if (next_log_fd >= 0) {
		f->log = elog_open_fd(next_log_fd);
		next_log_fd = -1;
		f->log_fd = -1;
	} else {
		mfd = memfd_create("elog", MFD_CLOEXEC);
		f->log_fd = dup(mfd);
		f->log = elog_open_fd(mfd);
	}
	assert_non_null(f->log);
	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = f->pol;
	cfg.log = f->log;
	cfg.broker = f->broker;
	cfg.cache = next_cache;
	cfg.max_conns = max_conns;
	cfg.header_timeout_ms = header_ms;
	cfg.connect_timeout_ms = 500; /* also the resolution deadline */
	cfg.response_timeout_ms = next_response_ms;
	next_response_ms = 0;
	f->px = proxy_new(f->base, &cfg);
	assert_non_null(f->px);

	f->addr.sun_family = AF_UNIX;
	/* abstract socket: nothing on disk, unique per process and test */
	snprintf(f->addr.sun_path + 1, sizeof(f->addr.sun_path) - 1, "airlock-test-conn-%d-%p",
	         (int)getpid(), (void *)f);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&f->addr, sizeof(f->addr)), 0);
	assert_int_equal(listen(lfd, 16), 0);
	assert_int_equal(proxy_add_listener(f->px, lfd, PROXY_LISTEN_EXPLICIT), 0);
	*state = f;
	return 0;
}

static int
setup_with(void **state, unsigned max_conns, uint32_t header_ms, const char *log_path)
{
	return setup_with_mode(state, max_conns, header_ms, log_path, false);
}

static int
setup_audit(void **state)
{
	return setup_with_mode(state, 0, 0, NULL, true);
}

static int
setup(void **state)
{
	return setup_with(state, 0, 0, NULL);
}

static int
setup_limit(void **state)
{
	return setup_with(state, 1, 300, NULL);
}

static int
setup_full_log(void **state)
{
	return setup_with(state, 0, 0, "/dev/full");
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	proxy_free(f->px);
	broker_client_free(f->broker);
	broker_stop(f->broker_pid);
	broker_reap(f->broker_pid);
	event_base_free(f->base);
	elog_free(f->log);
	policy_free(f->pol);
	if (f->log_fd >= 0)
		close(f->log_fd);
	free(f);
	return 0;
}

static int
client(struct fixture *f)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(connect(fd, (struct sockaddr *)&f->addr, sizeof(f->addr)), 0);
	return fd;
}

/* Run the loop until the proxy closes fd (EOF) or max_ms pass; returns the
 * bytes received, NUL-terminated, in a static buffer. */
static const char *
exchange(struct fixture *f, int fd, const char *send_text, int max_ms)
{
	static char buf[8192];
	size_t got = 0;
	struct timespec t0, t;

	if (send_text != NULL)
		assert_int_equal(send(fd, send_text, strlen(send_text), 0),
		                 (ssize_t)strlen(send_text));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ssize_t n;

		event_base_loop(f->base, EVLOOP_NONBLOCK);
		n = recv(fd, buf + got, sizeof(buf) - 1 - got, MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN))
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > max_ms)
			break;
		usleep(1000);
	}
	buf[got] = '\0';
	return buf;
}

static const char *
log_text(struct fixture *f)
{
	static char buf[16384];
	ssize_t n = pread(f->log_fd, buf, sizeof(buf) - 1, 0);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static size_t
log_lines(struct fixture *f)
{
	size_t n = 0;

	for (const char *p = log_text(f); *p != '\0'; p++)
		n += *p == '\n';
	return n;
}

/* Events the log's lines stand for: a line with "count" (repeats counted
 * by elog_event_agg) stands for that many. Call elog_flush() first. */
static size_t
log_events(struct fixture *f)
{
	size_t n = 0;

	for (const char *p = log_text(f), *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
		const char *c = strstr(p, "\"count\":");

		n += c != NULL && c < nl ? strtoul(c + 8, NULL, 10) : 1;
	}
	return n;
}

static void
test_denied_by_rule(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r =
	        exchange(f, fd, "CONNECT x.d.test:443 HTTP/1.1\r\nHost: x.d.test\r\n\r\n", 2000);

	assert_non_null(strstr(r, "HTTP/1.1 403 Forbidden\r\n"));
	assert_non_null(strstr(
	        r, "Proxy-Status: airlock; error=http_request_denied; details=\"denied-by-rule: "
	           "x.d.test port 443: denied by rule unit.yaml:"));
	assert_non_null(strstr(r, "denied x.d.test port 443"));
	close(fd);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"kind\":\"connect\""));
	assert_non_null(strstr(log_text(f), "\"verdict\":\"deny\""));
	assert_non_null(strstr(log_text(f), "\"rule\":\"unit.yaml:7\""));
}

static void
test_no_match(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r =
	        exchange(f, fd, "GET http://b.test/x HTTP/1.1\r\nHost: b.test\r\n\r\n", 2000);

	assert_non_null(strstr(r, "HTTP/1.1 403"));
	assert_non_null(strstr(r, "no rule allows b.test port 80"));
	close(fd);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"url\":\"http://b.test/x\""));
}

static void
test_ip_literal_needs_cidr(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	/* A loopback literal: were the decision ever wrong, the connection
	 * would stay on this machine (this test runs in the host's network
	 * namespace). */
	const char *r = exchange(f, fd, "CONNECT 127.0.0.2:9 HTTP/1.1\r\n\r\n", 2000);

	assert_non_null(strstr(r, "HTTP/1.1 403"));
	assert_non_null(strstr(r, "no rule allows address 127.0.0.2 port 9"));
	close(fd);
}

static void
test_malformed(void **state)
{
	struct fixture *f = *state;
	static const char *const bad[] = {
	        "GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", /* Host disagrees */
	        "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",              /* origin-form */
	        "CONNECT a.test HTTP/1.1\r\n\r\n",                     /* no port */
	        ("GET http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	         "Content-Length: 1\r\n\r\n"), /* both framings */
	        "\x16\x03\x01\x02\x00\x01",    /* TLS to a proxy */
	        "GET http://a.test/ HTTP/1.1\r\nX y: z\r\n\r\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int fd = client(f);
		const char *r = exchange(f, fd, bad[i], 2000);

		assert_true(strncmp(r, "HTTP/1.1 400 Bad Request\r\n", 26) == 0);
		assert_non_null(strstr(r, "error=http_request_error"));
		close(fd);
	}
	/* Refusals alike are counted, not each written (docs/log.md). */
	elog_flush(f->log);
	assert_int_equal(log_events(f), sizeof(bad) / sizeof(bad[0]));
}

static void
test_too_large(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	char *big = malloc(20000);
	const char *r;

	memset(big, 'a', 19999);
	big[19999] = '\0';
	memcpy(big, "GET http://a.test/ HTTP/1.1\r\nX: ", 32);
	r = exchange(f, fd, big, 2000);
	assert_true(strncmp(r, "HTTP/1.1 431", 12) == 0);
	free(big);
	close(fd);
}

static void
test_dns_failure(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r = exchange(f, fd, "CONNECT a.test:443 HTTP/1.1\r\n\r\n", 3000);

	/* no nameserver: the lookup fails (or times out), never hangs */
	assert_true(strncmp(r, "HTTP/1.1 502", 12) == 0 || strncmp(r, "HTTP/1.1 504", 12) == 0);
	assert_true(strstr(r, "error=dns_error") != NULL || strstr(r, "error=dns_timeout") != NULL);
	close(fd);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"allow\""));
}

static void
test_silent_client_not_logged(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);

	exchange(f, fd, NULL, 50);
	close(fd);
	exchange(f, client(f), NULL, 50); /* let the proxy see the close */
	assert_int_equal(log_lines(f), 0);
}

/* A whole response in r: its Content-Length is its body's length. */
static void
assert_body_length(const char *r)
{
	const char *body = strstr(r, "\r\n\r\n"), *cl = strstr(r, "Content-Length: ");

	assert_non_null(body);
	assert_non_null(cl);
	assert_int_equal(strtoul(cl + 16, NULL, 10), strlen(body + 4));
}

/* header timeout 300 ms, at most one connection */
static void
test_slowloris_and_limit(void **state)
{
	struct fixture *f = *state;
	int slow = client(f), second;
	const char *r;

	exchange(f, slow, "GET http://a.test/ HTTP/1.1\r\nX: ", 50);
	second = client(f);
	r = exchange(f, second, NULL, 1000);
	assert_true(strncmp(r, "HTTP/1.1 503", 12) == 0);
	assert_non_null(strstr(r, "connection_limit_reached"));
	assert_body_length(r);
	close(second);
	r = exchange(f, slow, NULL, 3000);
	assert_true(strncmp(r, "HTTP/1.1 408", 12) == 0);
	close(slow);
	assert_int_equal(log_lines(f), 2);
	assert_non_null(strstr(log_text(f), "too many connections"));
}

/* /dev/full: the first line fails; from then on connections are refused */
static void
test_log_failure_fails_closed(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r = exchange(f, fd, "CONNECT x.d.test:443 HTTP/1.1\r\n\r\n", 2000);

	assert_true(strncmp(r, "HTTP/1.1 403", 12) == 0);
	close(fd);
	assert_true(elog_failed(f->log));
	fd = client(f);
	r = exchange(f, fd, "CONNECT a.test:443 HTTP/1.1\r\n\r\n", 2000);
	assert_true(strncmp(r, "HTTP/1.1 503", 12) == 0);
	close(fd);
}

/* GET /healthz: 200 ok, not logged; /healthz/ is a request like any. */
static void
test_healthz(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r = exchange(f, fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 2000);

	assert_true(strncmp(r, "HTTP/1.1 200 OK\r\n", 17) == 0);
	assert_non_null(strstr(r, "\r\n\r\nok\n"));
	close(fd);
	assert_int_equal(log_lines(f), 0);
	fd = client(f);
	r = exchange(f, fd, "GET /healthz/ HTTP/1.1\r\nHost: x\r\n\r\n", 2000);
	assert_true(strncmp(r, "HTTP/1.1 400", 12) == 0);
	close(fd);
	assert_int_equal(log_lines(f), 1);
}

/* Once the log failed, /healthz says 503 (the proxy refuses everything). */
static void
test_healthz_log_failed(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r = exchange(f, fd, "CONNECT x.d.test:443 HTTP/1.1\r\n\r\n", 2000);

	close(fd);
	assert_true(elog_failed(f->log));
	fd = client(f);
	r = exchange(f, fd, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 2000);
	assert_true(strncmp(r, "HTTP/1.1 503 ", 13) == 0);
	close(fd);
}

/* ---- upstream paths on loopback (allowed by an explicit cidr rule) ---- */

static int loop_listener = -1, dead_port;
static uint16_t loop_port;

static void loopback_prepare(void);

static int
setup_loopback(void **state)
{
	loopback_prepare();
	return setup(state);
}

/* An origin that has 300 ms to start its response. */
static int
setup_loopback_response(void **state)
{
	next_response_ms = 300;
	return setup_loopback(state);
}

/* Room for 4 connections: the queue budget's cap is 4 x 32 KiB. */
static int
setup_loopback_capped(void **state)
{
	loopback_prepare();
	return setup_with(state, 4, 0, NULL);
}

static void
loopback_prepare(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int tmp;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	loop_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(loop_listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(loop_listener, 4), 0);
	assert_int_equal(getsockname(loop_listener, (struct sockaddr *)&sa, &len), 0);
	loop_port = ntohs(sa.sin_port);
	/* a port nobody listens on: bound, never listening, then closed */
	tmp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = 0;
	assert_int_equal(bind(tmp, (struct sockaddr *)&sa, sizeof(sa)), 0);
	len = sizeof(sa);
	assert_int_equal(getsockname(tmp, (struct sockaddr *)&sa, &len), 0);
	dead_port = ntohs(sa.sin_port);
	close(tmp);
	snprintf(extra_policy, sizeof(extra_policy), "  - cidr: 127.0.0.0/8\n    ports: [%u, %d]\n",
	         loop_port, dead_port);
}

static int
teardown_loopback(void **state)
{
	extra_policy[0] = extra_deny[0] = '\0';
	close(loop_listener);
	loop_listener = -1;
	return teardown(state);
}

/* Read what is there within max_ms, driving the proxy's loop meanwhile. */
static size_t
drive_recv(struct fixture *f, int fd, char *buf, size_t cap, size_t want, int max_ms, bool *eof)
{
	size_t got = 0;

	*eof = false;
	for (int i = 0; i < max_ms && got < want; i++) {
		ssize_t n;

		event_base_loop(f->base, EVLOOP_NONBLOCK);
		n = recv(fd, buf + got, cap - got, MSG_DONTWAIT);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0) {
			*eof = true;
			break;
		}
		usleep(1000);
	}
	return got;
}

/* A CONNECT tunnel to a loopback server: bytes both ways, the client's
 * half-close reaches the server, the server's last bytes and close reach
 * the client, and the log line counts the tunnel's bytes. */
static void
test_tunnel_half_close(void **state)
{
	struct fixture *f = *state;
	int fd = client(f), srv = -1;
	char req[128], buf[256];
	bool eof;
	size_t n;

	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", loop_port);
	assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	n = drive_recv(f, fd, buf, sizeof(buf) - 1, 39, 3000, &eof);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 200 Connection established\r\n\r\n");
	for (int i = 0; i < 1000 && srv < 0; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		srv = accept4(loop_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		usleep(1000);
	}
	assert_true(srv >= 0);
	/* Bytes that cannot begin a head go at once (bind.c). */
	assert_int_equal(send(fd, "\x01png", 4, 0), 4);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 4, 3000, &eof), 4);
	assert_memory_equal(buf, "\x01png", 4);
	assert_int_equal(send(srv, "pong", 4, 0), 4);
	assert_int_equal(drive_recv(f, fd, buf, sizeof(buf), 4, 3000, &eof), 4);
	assert_memory_equal(buf, "pong", 4);
	/* the client is done sending; the server still answers */
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 3000, &eof), 0);
	assert_true(eof);
	assert_int_equal(send(srv, "bye", 3, 0), 3);
	close(srv);
	n = drive_recv(f, fd, buf, sizeof(buf), 10, 3000, &eof);
	assert_int_equal(n, 3);
	assert_memory_equal(buf, "bye", 3);
	n = drive_recv(f, fd, buf, sizeof(buf), 1, 3000, &eof);
	assert_true(eof);
	close(fd);
	exchange(f, client(f), NULL, 50);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"allow\""));
	assert_non_null(strstr(log_text(f), "\"bytes_up\":4,\"bytes_down\":7"));
}

/* ---- a tunnel's first bytes are bound to the CONNECT target (bind.c) ---- */

/* Defined below, with the queue tests. */
static int tunnel_open(struct fixture *f, int *srv);

/* A head in the tunnel naming another host is refused with 421 in the
 * tunnel, and none of it reaches the server; the line names both. */
static void
test_tunnel_host_mismatch(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char buf[256];
	bool eof;
	const char *r;

	/* in two pieces: the look waits for the whole head */
	assert_int_equal(send(fd, "GET / HTTP/1.1\r\nHo", 18, 0), 18);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 100, &eof), 0);
	r = exchange(f, fd, "st: a.test\r\n\r\n", 2000);
	assert_non_null(strstr(r, "HTTP/1.1 421 Misdirected Request\r\n"));
	assert_non_null(strstr(r, "error=http_request_denied"));
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 200, &eof), 0);
	close(fd);
	close(srv);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"deny\""));
	assert_non_null(
	        strstr(log_text(f), "tunnel to 127.0.0.1 carries a request for Host a.test"));
	assert_null(strstr(log_text(f), "\"rule\""));
}

/* The target's own address, in another spelling (v4-mapped v6), is the
 * same name: the head goes through, and so does what follows. */
static void
test_tunnel_host_same_address(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char head[128], buf[256];
	bool eof;
	size_t n;

	n = (size_t)snprintf(head, sizeof(head),
	                     "GET / HTTP/1.1\r\nHost: [::ffff:127.0.0.1]:%u\r\n\r\n", loop_port);
	assert_int_equal(send(fd, head, n, 0), (ssize_t)n);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), n, 3000, &eof), n);
	assert_memory_equal(buf, head, n);
	/* the next request, the address in its usual spelling */
	n = (size_t)snprintf(head, sizeof(head), "GET /2 HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n",
	                     loop_port);
	assert_int_equal(send(fd, head, n, 0), (ssize_t)n);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), n, 3000, &eof), n);
	assert_memory_equal(buf, head, n);
	close(fd);
	close(srv);
	exchange(f, client(f), NULL, 50);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"allow\""));
}

/* Every request in the tunnel is framed, not only the first: a body
 * that holds a head is a body, and goes; the next request, pipelined in
 * the same write and naming another host, is refused with 421 and none
 * of it reaches the server; the line names both names. */
static void
test_tunnel_second_request(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	static const char fake[] = "GET / HTTP/1.1\r\nHost: b.test\r\n\r\n";
	char first[256], all[512], buf[512];
	const char *r;
	bool eof;
	size_t n, got;

	n = (size_t)snprintf(
	        first, sizeof(first),
	        "POST / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nContent-Length: %zu\r\n\r\n%s", loop_port,
	        sizeof(fake) - 1, fake);
	snprintf(all, sizeof(all), "%sGET / HTTP/1.1\r\nHost: a.test\r\n\r\n", first);
	r = exchange(f, fd, all, 2000);
	assert_non_null(strstr(r, "HTTP/1.1 421 Misdirected Request\r\n"));
	/* at most the first request and its body (the refusal may drop
	 * them with the upstream), never a byte of the second */
	got = drive_recv(f, srv, buf, sizeof(buf), sizeof(buf), 300, &eof);
	assert_true(got <= n);
	assert_memory_equal(buf, first, got);
	close(fd);
	close(srv);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"deny\""));
	assert_non_null(
	        strstr(log_text(f), "tunnel to 127.0.0.1 carries a request for Host a.test"));
}

/* Bytes where the next request must begin that are no request head end
 * the tunnel: what the framer cannot read is not let through unread. */
static void
test_tunnel_unframable(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char first[256], all[512], buf[512];
	const char *r;
	bool eof;
	size_t n, got;

	n = (size_t)snprintf(
	        first, sizeof(first),
	        "POST / HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nTransfer-Encoding: chunked\r\n"
	        "\r\n3\r\nabc\r\n0\r\n\r\n",
	        loop_port);
	snprintf(all, sizeof(all), "%s\x16\x03\x01\x01\x05hello", first);
	r = exchange(f, fd, all, 2000);
	assert_non_null(strstr(r, "HTTP/1.1 400 Bad Request\r\n"));
	got = drive_recv(f, srv, buf, sizeof(buf), sizeof(buf), 300, &eof);
	assert_true(got <= n);
	assert_memory_equal(buf, first, got);
	close(fd);
	close(srv);
	assert_non_null(strstr(log_text(f), "request 2: bytes where a request must begin"));
}

/* A server that speaks first is heard while the client's first bytes are
 * awaited; bytes that are no head (an ssh banner) go through as before. */
static void
test_tunnel_server_first(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char buf[256];
	bool eof;

	assert_int_equal(send(srv, "SSH-2.0-srv\r\n", 13, 0), 13);
	assert_int_equal(drive_recv(f, fd, buf, sizeof(buf), 13, 3000, &eof), 13);
	assert_memory_equal(buf, "SSH-2.0-srv\r\n", 13);
	assert_int_equal(send(fd, "SSH-2.0-cli\r\n", 13, 0), 13);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 13, 3000, &eof), 13);
	assert_memory_equal(buf, "SSH-2.0-cli\r\n", 13);
	close(fd);
	close(srv);
	exchange(f, client(f), NULL, 50);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"allow\""));
}

/* A client that ends inside a head sends none of it. */
static void
test_tunnel_eof_in_head(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char buf[256];
	bool eof;
	const char *r;

	assert_int_equal(send(fd, "GET / HTTP/1.1\r\nHost: a.te", 26, 0), 26);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	r = exchange(f, fd, NULL, 2000);
	assert_non_null(strstr(r, "HTTP/1.1 400 "));
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 200, &eof), 0);
	close(fd);
	close(srv);
	assert_non_null(strstr(log_text(f), "ended inside an incomplete request head"));
}

/* Audit mode: the mismatch is logged as audit-deny, and the tunnel goes
 * on with the bytes. */
static void
test_tunnel_mismatch_audit(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	static const char head[] = "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n";
	char buf[256];
	bool eof;

	assert_int_equal(send(fd, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), sizeof(head) - 1, 3000, &eof),
	                 sizeof(head) - 1);
	close(fd);
	close(srv);
	exchange(f, client(f), NULL, 50);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"audit-deny\""));
	assert_non_null(strstr(log_text(f), "carries a request for Host a.test"));
}

/* A token that may still begin a request line is held, and refused once
 * it is not a complete head within the header time (300 ms here). */
static void
test_tunnel_head_timeout(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char buf[256];
	bool eof;
	const char *r;

	assert_int_equal(send(fd, "GET", 3, 0), 3);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 150, &eof), 0);
	r = exchange(f, fd, NULL, 2000);
	assert_non_null(strstr(r, "HTTP/1.1 408 "));
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 100, &eof), 0);
	close(fd);
	close(srv);
	assert_non_null(strstr(log_text(f), "first bytes not a complete head within 300 ms"));
}

/* Audit mode: the held token goes on at the deadline, logged. */
static void
test_tunnel_head_timeout_audit(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	char buf[256];
	bool eof;

	assert_int_equal(send(fd, "GET", 3, 0), 3);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 1, 150, &eof), 0);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 3, 2000, &eof), 3);
	assert_memory_equal(buf, "GET", 3);
	assert_int_equal(send(fd, " / HTTP/1.1\r\n", 13, 0), 13);
	assert_int_equal(drive_recv(f, srv, buf, sizeof(buf), 13, 2000, &eof), 13);
	close(fd);
	close(srv);
	exchange(f, client(f), NULL, 50);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"audit-deny\""));
	assert_non_null(strstr(log_text(f), "first bytes not a complete head within 300 ms"));
}

static int
setup_loopback_header_audit(void **state)
{
	loopback_prepare();
	return setup_with_mode(state, 0, 300, NULL, true);
}

static int
setup_loopback_header(void **state)
{
	loopback_prepare();
	return setup_with(state, 0, 300, NULL);
}

static int
setup_loopback_audit(void **state)
{
	loopback_prepare();
	return setup_with_mode(state, 0, 0, NULL, true);
}

static void
test_connection_refused(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	char req[128];
	const char *r;

	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", dead_port);
	r = exchange(f, fd, req, 3000);
	assert_true(strncmp(r, "HTTP/1.1 502", 12) == 0);
	assert_non_null(strstr(r, "error=connection_refused"));
	close(fd);
}

/* An origin that accepts (the kernel's backlog does) and never answers:
 * after the response timeout the client gets 504 http_response_timeout,
 * and its Content-Length is the body's length. */
static void
test_response_timeout(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	char req[128];
	const char *r;

	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/ HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", loop_port,
	         loop_port);
	r = exchange(f, fd, req, 3000);
	assert_true(strncmp(r, "HTTP/1.1 504", 12) == 0);
	assert_non_null(strstr(r, "error=http_response_timeout"));
	assert_body_length(r);
	close(fd);
	exchange(f, client(f), NULL, 50);
	assert_non_null(strstr(log_text(f), "\"reason\":\"response-timeout\""));
	assert_non_null(
	        strstr(log_text(f), "\"detail\":\"no response from upstream within 300 ms\""));
}

/* A listener whose accept queue is full drops SYNs: the proxy's connect
 * times out (500 ms here) and the client gets 504 connection_timeout. */
static void
test_connect_timeout(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(loop_port)};
	int fill[4], fd;
	char req[128];
	const char *r;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	/* backlog 4 (setup_loopback): fill it and then some, never accept */
	close(loop_listener);
	loop_listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(
	        setsockopt(loop_listener, SOL_SOCKET, SO_REUSEADDR, &(int){1}, sizeof(int)), 0);
	assert_int_equal(bind(loop_listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(loop_listener, 0), 0);
	for (int i = 0; i < 4; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		(void)connect(fill[i], (struct sockaddr *)&sa, sizeof(sa));
	}
	usleep(100000);
	fd = client(f);
	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", loop_port);
	r = exchange(f, fd, req, 3000);
	assert_true(strncmp(r, "HTTP/1.1 504", 12) == 0);
	assert_non_null(strstr(r, "error=connection_timeout"));
	close(fd);
	for (int i = 0; i < 4; i++)
		close(fill[i]);
}

/* Audit mode: what enforce would refuse goes on (here to a resolver with
 * no nameserver) and is logged audit-deny. */
static void
test_audit_mode(void **state)
{
	struct fixture *f = *state;
	int fd = client(f);
	const char *r = exchange(f, fd, "CONNECT x.d.test:443 HTTP/1.1\r\n\r\n", 3000);

	assert_null(strstr(r, "HTTP/1.1 403"));
	assert_true(strncmp(r, "HTTP/1.1 50", 11) == 0);
	close(fd);
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"audit-deny\""));
	assert_non_null(strstr(log_text(f), "\"rule\":\"unit.yaml:7\""));
}

/* Out of descriptors: accept fails with EMFILE; the proxy pauses its
 * listeners instead of spinning, and serves the waiting clients once
 * descriptors are back. */
static void
test_emfile_pause(void **state)
{
	struct fixture *f = *state;
	struct rlimit saved, low;
	int fds[3], top;
	const char *r;

	for (int i = 0; i < 3; i++)
		fds[i] = client(f); /* queued in the backlog, not yet accepted */
	top = dup(0);
	assert_true(top >= 0);
	close(top);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	low = saved;
	low.rlim_cur = (rlim_t)top; /* every descriptor number in use: EMFILE */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	for (int i = 0; i < 20; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	for (int i = 0; i < 3; i++) {
		r = exchange(f, fds[i], "CONNECT x.d.test:443 HTTP/1.1\r\n\r\n", 3000);
		assert_true(strncmp(r, "HTTP/1.1 403", 12) == 0);
		close(fds[i]);
	}
}

/* ---- fail-closed and guard fixes (security review) ---- */

static uint16_t noname_port;

/* A port nobody listens on at ip. */
static uint16_t
dead_port_on(const char *ip)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int tmp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_int_equal(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	assert_int_equal(bind(tmp, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(tmp, (struct sockaddr *)&sa, &len), 0);
	close(tmp);
	return ntohs(sa.sin_port);
}

/* evil.test is allowed on the port, so is 127.0.0.0/8, but a deny rule
 * names 127.0.0.66/32; DNS taught the cache 127.0.0.66 = evil.test. */
static int
setup_noname(void **state)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	struct timespec ts;

	noname_port = dead_port_on("127.0.0.66");
	snprintf(extra_policy, sizeof(extra_policy),
	         "  - host: evil.test\n    ports: [%u]\n"
	         "  - cidr: 127.0.0.0/8\n    ports: [%u]\n",
	         noname_port, noname_port);
	snprintf(extra_deny, sizeof(extra_deny), "  - cidr: 127.0.0.66/32\n    ports: [%u]\n",
	         noname_port);
	next_cache = dns_cache_new(16);
	assert_non_null(next_cache);
	assert_int_equal(inet_pton(AF_INET, "127.0.0.66", &sa.sin_addr), 1);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	dns_cache_put(next_cache, (struct sockaddr *)&sa, "evil.test", 300, (uint64_t)ts.tv_sec);
	return setup(state);
}

static int
teardown_noname(void **state)
{
	int r = teardown(state);

	extra_policy[0] = extra_deny[0] = '\0';
	dns_cache_free(next_cache);
	next_cache = NULL;
	return r;
}

static void
noop_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

/* A transparent connection as conn_accept() leaves it after
 * SO_ORIGINAL_DST, on a socketpair instead of a redirected socket (no
 * nftables in a unit test). *peer is the client's end. */
static struct conn *
fake_transparent(struct fixture *f, const char *ip, uint16_t port, int *peer)
{
	struct conn *c = calloc(1, sizeof(*c));
	int sp[2];

	assert_non_null(c);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp), 0);
	c->px = f->px;
	c->id = 1000;
	c->lkind = PROXY_LISTEN_TRANSPARENT;
	c->state = CONN_SNIFF;
	c->down.c = c->up.c = c;
	c->down.peer = &c->up;
	c->up.peer = &c->down;
	c->down.fd = sp[0];
	c->up.fd = -1;
	c->start_ms = c->last_ms = now_ms();
	c->timer = evtimer_new(f->base, noop_timer, c);
	c->down.bev = bufferevent_socket_new(f->base, sp[0], 0);
	assert_non_null(c->timer);
	assert_non_null(c->down.bev);
	c->orig.in.sin_family = AF_INET;
	assert_int_equal(inet_pton(AF_INET, ip, &c->orig.in.sin_addr), 1);
	c->orig.in.sin_port = htons(port);
	c->has_orig = true;
	c->port = port;
	c->kind = CONN_KIND_TCP;
	TAILQ_INSERT_TAIL(&f->px->px_conns, c, entry);
	f->px->px_n_conns++;
	*peer = sp[1];
	return c;
}

/* Raw TCP (no name) to an address a cidr rule denies: the DNS cache's
 * name for that address (allowed on the port) must not override the
 * deny. Before the fix the cached name's allow won and the proxy dialled
 * 127.0.0.66. */
static void
test_noname_cidr_deny_beats_dns_cache(void **state)
{
	struct fixture *f = *state;
	int peer;
	char want_rule[64];

	conn_decide_noname(fake_transparent(f, "127.0.0.66", noname_port, &peer));
	for (int i = 0; i < 2000 && log_lines(f) == 0; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	assert_int_equal(log_lines(f), 1);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"deny\""));
	assert_non_null(strstr(log_text(f), "\"reason\":\"denied-by-rule\""));
	/* the deny rule is the last line of the policy */
	snprintf(want_rule, sizeof(want_rule), "\"rule\":\"unit.yaml:%d\"", 12);
	assert_non_null(strstr(log_text(f), want_rule));
	assert_null(strstr(log_text(f), "evil.test"));
	close(peer);
}

/* ---- deny cidr rules on resolved addresses ---- */

static int
setup_deny_cidr_with(void **state, bool audit)
{
	snprintf(extra_deny, sizeof(extra_deny), "  - cidr: 203.0.113.0/24\n    ports: [443]\n");
	return setup_with_mode(state, 0, 0, NULL, audit);
}

static int
setup_deny_cidr_audit(void **state)
{
	return setup_deny_cidr_with(state, true);
}

static int
teardown_deny_cidr(void **state)
{
	extra_deny[0] = '\0';
	return teardown(state);
}

/* A connection allowed for a.test port 443, as forward_request sees it
 * before reusing an upstream dialled at some address. */
static struct conn *
allowed_conn(struct fixture *f)
{
	struct conn *c = calloc(1, sizeof(*c));

	assert_non_null(c);
	c->px = f->px;
	c->port = 443;
	c->decided = true;
	c->verdict = VERDICT_ALLOW;
	str_copy(c->host, "a.test", sizeof(c->host));
	str_copy(c->rule, "unit.yaml:4", sizeof(c->rule));
	return c;
}

/* The line of extra_deny's rule: after policy_allow and policy_deny. */
static int
deny_cidr_line(void)
{
	int n = 1;

	for (const char *p = policy_allow; *p != '\0'; p++)
		n += *p == '\n';
	for (const char *p = policy_deny; *p != '\0'; p++)
		n += *p == '\n';
	return n;
}

/* Audit mode: an upstream kept open at an address a deny cidr rule covers
 * marks the request that reuses it audit-deny, with the deny rule and the
 * address; one at another address does not. (Which addresses are dialled
 * at all is the broker's: tests/broker/test_broker.c.) */
static void
test_reused_addr_in_deny_cidr_audit(void **state)
{
	struct fixture *f = *state;
	struct conn *c = allowed_conn(f);
	union conn_addr a;
	char want[32];

	assert_true(conn_addr_parse(&a, "198.51.100.7", 443));
	upstream_mark_audit(c, &a);
	assert_int_equal(c->verdict, VERDICT_ALLOW);
	assert_string_equal(c->rule, "unit.yaml:4");
	assert_true(conn_addr_parse(&a, "203.0.113.7", 443));
	upstream_mark_audit(c, &a);
	assert_int_equal(c->verdict, VERDICT_AUDIT_DENY);
	snprintf(want, sizeof(want), "unit.yaml:%d", deny_cidr_line());
	assert_string_equal(c->rule, want);
	assert_int_equal(c->why, VR_RULE_DENY);
	assert_string_equal(c->detail, "203.0.113.7 is denied by a cidr rule");
	free(c);
}

/* The log is a pipe whose reader goes away after the first request. */
static int log_reader = -1;

static int
setup_loopback_pipe_log(void **state)
{
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	log_reader = p[0];
	next_log_fd = p[1];
	return setup_loopback(state);
}

static int
teardown_loopback_pipe_log(void **state)
{
	if (log_reader >= 0)
		close(log_reader);
	log_reader = -1;
	return teardown_loopback(state);
}

static int
accept_upstream(struct fixture *f)
{
	int srv = -1;

	for (int i = 0; i < 2000 && srv < 0; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		srv = accept4(loop_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (srv < 0)
			usleep(1000);
	}
	assert_true(srv >= 0);
	return srv;
}

/* Once the egress log fails, nothing goes on unlogged: a kept-alive
 * client's next request gets 503 and is not forwarded, and an open
 * tunnel is closed. Before the fix both carried on. */
static void
test_log_failure_ends_live_connections(void **state)
{
	struct fixture *f = *state;
	int tun = client(f), ka, srv_tun, srv_ka;
	char req[256], buf[1024];
	ssize_t n;
	size_t got;
	bool eof;

	/* an open CONNECT tunnel */
	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", loop_port);
	assert_int_equal(send(tun, req, strlen(req), 0), (ssize_t)strlen(req));
	got = drive_recv(f, tun, buf, sizeof(buf) - 1, 39, 3000, &eof);
	assert_int_equal(got, 39);
	srv_tun = accept_upstream(f);

	/* a kept-alive HTTP client with one exchange done and logged */
	ka = client(f);
	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/a HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", loop_port,
	         loop_port);
	assert_int_equal(send(ka, req, strlen(req), 0), (ssize_t)strlen(req));
	srv_ka = accept_upstream(f);
	got = drive_recv(f, srv_ka, buf, sizeof(buf) - 1, strlen("GET /a"), 3000, &eof);
	assert_true(got >= strlen("GET /a"));
	assert_memory_equal(buf, "GET /a", 6);
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
	assert_int_equal(send(srv_ka, resp, sizeof(resp) - 1, 0), (ssize_t)sizeof(resp) - 1);
	/* the proxy rewrites the head; the body is the last thing to come */
	got = 0;
	for (int i = 0; i < 3000 && (got < 2 || memcmp(buf + got - 2, "ok", 2) != 0) && !eof; i++)
		got += drive_recv(f, ka, buf + got, sizeof(buf) - 1 - got, 1, 1, &eof);
	buf[got] = '\0';
	assert_true(strncmp(buf, "HTTP/1.1 200", 12) == 0);
	assert_true(got >= 2 && memcmp(buf + got - 2, "ok", 2) == 0);
	assert_false(eof);
	n = read(log_reader, buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "\"kind\":\"http\""));

	/* the log's reader goes away */
	close(log_reader);
	log_reader = -1;

	/* the next request on the kept-alive connection is refused */
	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/b HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", loop_port,
	         loop_port);
	assert_int_equal(send(ka, req, strlen(req), 0), (ssize_t)strlen(req));
	got = drive_recv(f, ka, buf, sizeof(buf) - 1, sizeof(buf) - 1, 3000, &eof);
	buf[got] = '\0';
	assert_true(strncmp(buf, "HTTP/1.1 503", 12) == 0);
	assert_true(eof);
	/* ... and never reached the upstream */
	got = drive_recv(f, srv_ka, buf, sizeof(buf) - 1, sizeof(buf) - 1, 500, &eof);
	assert_int_equal(got, 0);

	/* the tunnel is closed too */
	got = drive_recv(f, tun, buf, sizeof(buf) - 1, sizeof(buf) - 1, 3000, &eof);
	assert_int_equal(got, 0);
	assert_true(eof);
	got = drive_recv(f, srv_tun, buf, sizeof(buf) - 1, sizeof(buf) - 1, 3000, &eof);
	assert_true(eof);

	/* and a new connection is refused */
	close(ka);
	ka = client(f);
	assert_true(strncmp(exchange(f, ka, NULL, 2000), "HTTP/1.1 503", 12) == 0);
	close(ka);
	close(tun);
	close(srv_ka);
	close(srv_tun);
}

/* The log fails while nothing here writes to it (its reader goes away;
 * in `airlock run` the DNS server may be the one whose line failed): the
 * open tunnel is still closed, within the proxy's periodic check. */
static void
test_log_failure_ends_idle_tunnel(void **state)
{
	struct fixture *f = *state;
	int tun = client(f), srv;
	char req[128], buf[256];
	size_t got;
	bool eof;

	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", loop_port);
	assert_int_equal(send(tun, req, strlen(req), 0), (ssize_t)strlen(req));
	got = drive_recv(f, tun, buf, sizeof(buf) - 1, 39, 3000, &eof);
	assert_int_equal(got, 39);
	srv = accept_upstream(f);
	close(log_reader);
	log_reader = -1;
	got = drive_recv(f, tun, buf, sizeof(buf) - 1, sizeof(buf) - 1, 3000, &eof);
	assert_int_equal(got, 0);
	assert_true(eof);
	close(tun);
	close(srv);
}

/* An IPv4-mapped literal is dialled and logged as the IPv4 address it is
 * (one spelling for the guard, the cidr rules and the own-address check). */
static void
test_mapped_literal_is_v4(void **state)
{
	struct fixture *f = *state;
	int fd = client(f), srv;
	char req[128], buf[64], want[64];
	size_t got;
	bool eof;

	snprintf(req, sizeof(req), "CONNECT [::ffff:127.0.0.1]:%u HTTP/1.1\r\n\r\n", loop_port);
	assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	got = drive_recv(f, fd, buf, sizeof(buf) - 1, 39, 3000, &eof);
	assert_int_equal(got, 39);
	srv = accept_upstream(f);
	close(fd);
	close(srv);
	for (int i = 0; i < 2000 && log_lines(f) == 0; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	assert_int_equal(log_lines(f), 1);
	snprintf(want, sizeof(want), "\"ip\":\"127.0.0.1\",\"port\":%u", loop_port);
	assert_non_null(strstr(log_text(f), want));
}

/* ::ffff:a.b.c.d is a.b.c.d (the host's own addresses see through the
 * mapped spelling too: tests/policy/test_guard_hosts.c). */
static void
test_own_addr_v4_mapped(void **state)
{
	union conn_addr a;
	(void)state;

	/* the normaliser itself: mapped becomes v4 with the port kept;
	 * a plain v6 address stays as it is */
	memset(&a, 0, sizeof(a));
	a.in6.sin6_family = AF_INET6;
	a.in6.sin6_port = htons(4444);
	assert_int_equal(inet_pton(AF_INET6, "::ffff:203.0.113.66", &a.in6.sin6_addr), 1);
	conn_addr_unmap(&a);
	assert_int_equal(a.sa.sa_family, AF_INET);
	assert_int_equal(ntohs(a.in.sin_port), 4444);
	assert_int_equal(ntohl(a.in.sin_addr.s_addr), 0xcb007142);
	memset(&a, 0, sizeof(a));
	a.in6.sin6_family = AF_INET6;
	assert_int_equal(inet_pton(AF_INET6, "2001:db8::1", &a.in6.sin6_addr), 1);
	conn_addr_unmap(&a);
	assert_int_equal(a.sa.sa_family, AF_INET6);
}

/* ---- queued bytes and descriptors ---- */

/* A CONNECT tunnel to the loopback server; *srv is the server's end. */
static int
tunnel_open(struct fixture *f, int *srv)
{
	int fd = client(f);
	char req[128], buf[64];
	bool eof;
	size_t n;

	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", loop_port);
	assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	n = drive_recv(f, fd, buf, sizeof(buf) - 1, 39, 3000, &eof);
	buf[n] = '\0';
	assert_string_equal(buf, "HTTP/1.1 200 Connection established\r\n\r\n");
	*srv = -1;
	for (int i = 0; i < 1000 && *srv < 0; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		*srv = accept4(loop_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		usleep(1000);
	}
	assert_true(*srv >= 0);
	return fd;
}

/* Send len bytes of a pattern from `from` while reading them at `to`,
 * driving the proxy; true when all arrived unchanged. */
static bool
pump_through(struct fixture *f, int from, int to, size_t len, int max_ms)
{
	static char out[1 << 16], in[1 << 16];
	size_t sent = 0, got = 0;
	bool ok = true;

	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 7 + 3);
	for (int t = 0; t < max_ms && got < len; t++) {
		ssize_t n;

		if (sent < len) {
			size_t k = len - sent < sizeof(out) - sent % sizeof(out)
			                   ? len - sent
			                   : sizeof(out) - sent % sizeof(out);

			n = send(from, out + sent % sizeof(out), k, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n > 0)
				sent += (size_t)n;
		}
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		while ((n = recv(to, in, sizeof(in), MSG_DONTWAIT)) > 0) {
			for (ssize_t i = 0; i < n; i++)
				ok = ok && in[i] == out[(got + (size_t)i) % sizeof(out)];
			got += (size_t)n;
		}
		if (n == 0)
			break;
		usleep(200);
	}
	return ok && got == len;
}

/* Every descriptor number in use (the pipes' too): an established tunnel
 * goes on through the proxy's own copy instead of being closed for want
 * of a splice pipe. */
static void
test_tunnel_copies_without_pipes(void **state)
{
	struct fixture *f = *state;
	struct rlimit saved, low;
	int fd, srv, top;
	bool up, down;

	fd = tunnel_open(f, &srv);
	top = dup(0);
	assert_true(top >= 0);
	close(top);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	low = saved;
	low.rlim_cur = (rlim_t)top;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	up = pump_through(f, fd, srv, 300000, 5000);
	down = up && pump_through(f, srv, fd, 300000, 5000);
	/* Restored before any assert can end the test: the others need it. */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_true(up);
	assert_true(down);
	close(fd);
	close(srv);
	exchange(f, client(f), NULL, 50);
	assert_int_equal(log_lines(f), 1);
	assert_null(strstr(log_text(f), "file descriptors"));
	assert_non_null(strstr(log_text(f), "\"bytes_up\":300000,\"bytes_down\":300000"));
}

/* The broker is gone: every connection that needs an upstream is refused
 * (fail closed), 503 proxy_internal_error, reason broker-failed; the
 * request out when it went, and each one after. */
static void
test_broker_gone(void **state)
{
	struct fixture *f = *state;
	const char *r;

	broker_stop(f->broker_pid);
	broker_reap(f->broker_pid);
	f->broker_pid = 0;
	/* Two names: two lines, not one counted twice. */
	static const char *const reqs[] = {"CONNECT b.d.test:443 HTTP/1.1\r\n\r\n",
	                                   "CONNECT c.d.test:443 HTTP/1.1\r\n\r\n"};

	for (size_t i = 0; i < ARRAY_SIZE(reqs); i++) {
		r = exchange(f, client(f), reqs[i], 3000);
		assert_true(strncmp(r, "HTTP/1.1 503", 12) == 0);
		assert_non_null(strstr(r, "error=proxy_internal_error"));
	}
	exchange(f, client(f), NULL, 50);
	assert_int_equal(log_lines(f), 2);
	assert_non_null(strstr(log_text(f), "\"reason\":\"broker-failed\""));
	assert_non_null(strstr(log_text(f), "the broker is gone"));
}

/* Accepted, then no descriptor for the upstream: 503 naming the resource
 * limit, never a 502 that blames the destination. */
static void
test_no_fd_for_upstream(void **state)
{
	struct fixture *f = *state;
	struct rlimit saved, low;
	int fd = client(f), top;
	char req[128];
	const char *r;

	for (int i = 0; i < 20; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK); /* accepted */
		usleep(1000);
	}
	top = dup(0);
	assert_true(top >= 0);
	close(top);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	low = saved;
	low.rlim_cur = (rlim_t)top;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", loop_port);
	r = exchange(f, fd, req, 3000);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_true(strncmp(r, "HTTP/1.1 503", 12) == 0);
	assert_non_null(strstr(r, "error=proxy_internal_error"));
	assert_non_null(strstr(r, "resource limit: out of file descriptors"));
	close(fd);
	assert_non_null(strstr(log_text(f), "\"reason\":\"resource-limit\""));
	assert_non_null(
	        strstr(log_text(f), "\"detail\":\"resource limit: out of file descriptors\""));
	/* Descriptors back: served again. */
	fd = client(f);
	snprintf(req, sizeof(req), "CONNECT 127.0.0.1:%u HTTP/1.1\r\n\r\n", dead_port);
	r = exchange(f, fd, req, 3000);
	assert_true(strncmp(r, "HTTP/1.1 502", 12) == 0);
	assert_non_null(strstr(r, "error=connection_refused"));
	close(fd);
}

/* An absolute-form client that stops reading while the origin sends
 * 4 MiB: one connection alone may queue 256 KiB, but the proxy queues no
 * more than its cap (4 x 32 KiB here) and one read, the origin is held
 * back, and once the client reads, every byte arrives in order and the
 * budget is empty again. */
static void
test_queue_cap_holds(void **state)
{
	static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 4194304\r\n\r\n";
	struct fixture *f = *state;
	struct membudget *b = proxy_queue_budget(f->px);
	size_t cap = membudget_cap(b), sent = 0;
	int fd = client(f), srv = -1, small = 16384, idle = 0;
	char req[160], buf[65536];
	bool eof = false;

	assert_int_equal(cap, 4 * PROXY_QUEUED_PER_CONN);
	snprintf(req, sizeof(req),
	         "GET http://127.0.0.1:%u/ HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", loop_port,
	         loop_port);
	assert_int_equal(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	for (int i = 0; i < 1000 && srv < 0; i++) {
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		srv = accept4(loop_listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		usleep(1000);
	}
	assert_true(srv >= 0);
	assert_true(drive_recv(f, srv, buf, sizeof(buf), 1, 3000, &eof) > 0);
	assert_int_equal(setsockopt(srv, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	assert_int_equal(send(srv, head, sizeof(head) - 1, 0), (ssize_t)sizeof(head) - 1);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (char)(i * 7 + 3);
	/* Until the origin cannot send for 200 rounds: everything between
	 * is full. */
	while (sent < (4u << 20) && idle < 200) {
		/* Short sends happen: go on where the pattern left off. */
		size_t off = sent % sizeof(buf);
		ssize_t n = send(srv, buf + off, sizeof(buf) - off, MSG_DONTWAIT | MSG_NOSIGNAL);

		event_base_loop(f->base, EVLOOP_NONBLOCK);
		if (n > 0) {
			sent += (size_t)n;
			idle = 0;
		} else {
			idle++;
			usleep(500);
		}
		assert_true(membudget_used(b) <= cap + 4096);
	}
	assert_true(sent < (4u << 20)); /* held back */
	assert_true(membudget_peak(b) >= cap);
	assert_true(membudget_peak(b) <= cap + 4096);
	{
		/* The client reads again: everything the origin sent arrives
		 * (after the head, as the proxy rewrote it), in order. */
		size_t n, at = 0;
		char in[65536], end[4] = {0};
		bool body = false;

		for (int i = 0; i < 20000 && at < sent && !eof; i++) {
			n = drive_recv(f, fd, in, sizeof(in), sizeof(in), 1, &eof);
			for (size_t k = 0; k < n; k++) {
				if (!body) {
					memmove(end, end + 1, 3);
					end[3] = in[k];
					body = memcmp(end, "\r\n\r\n", 4) == 0;
					continue;
				}
				assert_int_equal(in[k], buf[at % sizeof(buf)]);
				at++;
			}
		}
		assert_int_equal(at, sent);
	}
	close(srv);
	close(fd);
	exchange(f, client(f), NULL, 50);
	assert_int_equal(membudget_used(b), 0);
}

/* ---- a TLS 1.3 client's handshake records, split at every byte ---- */

/* A ClientHello as OpenSSL 3.0 sends it (TLS 1.3, x25519, middlebox
 * compatibility), its server_name the tunnel's target, 127.0.0.1. */
static const uint8_t tls13_hello[285] = {
        0x16, 0x03, 0x01, 0x01, 0x18, 0x01, 0x00, 0x01, 0x14, 0x03, 0x03, 0xef, 0x51, 0x0b, 0x67,
        0xbe, 0x8f, 0x7d, 0x7a, 0x84, 0x90, 0xd7, 0xa4, 0x9c, 0x7d, 0x32, 0x0c, 0xad, 0x7b, 0x6e,
        0x4c, 0x44, 0x84, 0x32, 0x3c, 0xe2, 0x08, 0xd1, 0x2f, 0x44, 0xd0, 0x9d, 0xd5, 0x20, 0x3e,
        0xcb, 0xa2, 0xa4, 0x22, 0x65, 0x5d, 0x57, 0xfc, 0x85, 0x80, 0x36, 0x1a, 0xa1, 0x34, 0xf2,
        0x5a, 0xa6, 0x1d, 0xc4, 0xd6, 0xcf, 0xca, 0x0d, 0xad, 0x3a, 0xdd, 0xd4, 0x59, 0xbf, 0x4a,
        0xde, 0x00, 0x24, 0x13, 0x02, 0x13, 0x03, 0x13, 0x01, 0xc0, 0x2c, 0xc0, 0x30, 0xc0, 0x2b,
        0xc0, 0x2f, 0xcc, 0xa9, 0xcc, 0xa8, 0xc0, 0x24, 0xc0, 0x28, 0xc0, 0x23, 0xc0, 0x27, 0x00,
        0x9f, 0x00, 0x9e, 0x00, 0x6b, 0x00, 0x67, 0x00, 0xff, 0x01, 0x00, 0x00, 0xa7, 0x00, 0x00,
        0x00, 0x0e, 0x00, 0x0c, 0x00, 0x00, 0x09, 0x31, 0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e,
        0x31, 0x00, 0x0b, 0x00, 0x04, 0x03, 0x00, 0x01, 0x02, 0x00, 0x0a, 0x00, 0x16, 0x00, 0x14,
        0x00, 0x1d, 0x00, 0x17, 0x00, 0x1e, 0x00, 0x19, 0x00, 0x18, 0x01, 0x00, 0x01, 0x01, 0x01,
        0x02, 0x01, 0x03, 0x01, 0x04, 0x00, 0x23, 0x00, 0x00, 0x00, 0x16, 0x00, 0x00, 0x00, 0x17,
        0x00, 0x00, 0x00, 0x0d, 0x00, 0x2a, 0x00, 0x28, 0x04, 0x03, 0x05, 0x03, 0x06, 0x03, 0x08,
        0x07, 0x08, 0x08, 0x08, 0x09, 0x08, 0x0a, 0x08, 0x0b, 0x08, 0x04, 0x08, 0x05, 0x08, 0x06,
        0x04, 0x01, 0x05, 0x01, 0x06, 0x01, 0x03, 0x03, 0x03, 0x01, 0x03, 0x02, 0x04, 0x02, 0x05,
        0x02, 0x06, 0x02, 0x00, 0x2b, 0x00, 0x05, 0x04, 0x03, 0x04, 0x03, 0x03, 0x00, 0x2d, 0x00,
        0x02, 0x01, 0x01, 0x00, 0x33, 0x00, 0x26, 0x00, 0x24, 0x00, 0x1d, 0x00, 0x20, 0x25, 0x4a,
        0x55, 0xa9, 0x8e, 0xe4, 0x29, 0xfe, 0xc8, 0xf7, 0x39, 0x8d, 0x66, 0x83, 0x86, 0xf9, 0xdb,
        0x4e, 0x53, 0xec, 0x85, 0xd1, 0x56, 0x4e, 0xfc, 0xbd, 0x1a, 0x25, 0xa1, 0x6c, 0x3c, 0x12,
};

/* What the client sends after it: the compatibility change_cipher_spec,
 * the encrypted Finished (TLS_AES_256_GCM_SHA384: 74 bytes) and the
 * encrypted GET, as application_data records (contents are noise). */
static size_t
tls13_flight(uint8_t *out, size_t cap)
{
	static const uint8_t ccs[] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01};
	size_t n = 0;

	assert_true(cap >= sizeof(tls13_hello) + sizeof(ccs) + 74 + 71);
	memcpy(out, tls13_hello, sizeof(tls13_hello));
	n += sizeof(tls13_hello);
	memcpy(out + n, ccs, sizeof(ccs));
	n += sizeof(ccs);
	for (size_t rec = 0; rec < 2; rec++) {
		size_t body = rec == 0 ? 69 : 66;

		out[n] = 0x17;
		out[n + 1] = 0x03;
		out[n + 2] = 0x03;
		out[n + 3] = 0x00;
		out[n + 4] = (uint8_t)body;
		for (size_t i = 0; i < body; i++)
			out[n + 5 + i] = (uint8_t)(i * 31 + rec * 7 + 1);
		n += 5 + body;
	}
	return n;
}

/* The client's bytes in three writes, each read by the proxy before the
 * next is sent; true when all reached the server, unchanged, within
 * max_ms (a record held for the header time is missed). */
static bool
tls13_pieces(struct fixture *f, const uint8_t *buf, size_t len, size_t cut1, size_t cut2,
             int max_ms)
{
	size_t cuts[] = {0, cut1, cut2, len};
	int srv, fd = tunnel_open(f, &srv);
	uint8_t in[1024];
	size_t got = 0;
	bool eof, ok;

	for (size_t i = 0; i + 1 < sizeof(cuts) / sizeof(cuts[0]); i++) {
		if (cuts[i + 1] == cuts[i])
			continue;
		assert_int_equal(send(fd, buf + cuts[i], cuts[i + 1] - cuts[i], 0),
		                 (ssize_t)(cuts[i + 1] - cuts[i]));
		for (int k = 0; k < 3; k++)
			event_base_loop(f->base, EVLOOP_NONBLOCK);
		got += drive_recv(f, srv, (char *)in + got, sizeof(in) - got, cuts[i + 1] - got, 2,
		                  &eof);
	}
	got += drive_recv(f, srv, (char *)in + got, sizeof(in) - got, len - got, max_ms, &eof);
	ok = got == len && memcmp(in, buf, len) == 0;
	if (!ok)
		print_message("cut at %zu and %zu: %zu of %zu bytes reached the server\n", cut1,
		              cut2, got, len);
	close(fd);
	close(srv);
	return ok;
}

/* A well-formed TLS 1.3 client passes the handshake watch (bind.c) with
 * its records cut anywhere: every cut in two pieces, then the bench's
 * shape, the hello alone, and the rest of the flight cut anywhere. No
 * record waits for more once it is whole. */
static void
test_tunnel_tls13_every_split(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[1024];
	size_t len = tls13_flight(buf, sizeof(buf)), failed = 0;

	for (size_t cut = 1; cut < len; cut++)
		failed += !tls13_pieces(f, buf, len, cut, cut, 300);
	for (size_t cut = sizeof(tls13_hello) + 1; cut < len; cut++)
		failed += !tls13_pieces(f, buf, len, sizeof(tls13_hello), cut, 300);
	for (size_t cut = 1; cut < sizeof(tls13_hello); cut++)
		failed += !tls13_pieces(f, buf, len, cut, sizeof(tls13_hello), 300);
	assert_int_equal(failed, 0);
	exchange(f, client(f), NULL, 50);
	assert_null(strstr(log_text(f), "\"verdict\":\"deny\""));
}

/* A TLS 1.2 client's flight: the hello, ClientKeyExchange (x25519),
 * change_cipher_spec, the encrypted Finished (AES-GCM: 8 bytes of
 * explicit nonce, 16 of Finished, 16 of tag), the encrypted GET. The
 * nonce is random: here it begins 01 00 27 a7, as a ClientHello of 10,151
 * bytes would (caught by the bench: 1 in about 260,000 handshakes). */
static size_t
tls12_flight(uint8_t *out, size_t cap)
{
	static const uint8_t ccs[] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01};
	static const uint8_t fin[] = {0x16, 0x03, 0x03, 0x00, 0x28, 0x01, 0x00, 0x27, 0xa7};
	size_t n = sizeof(tls13_hello);

	assert_true(cap >= n + 42 + sizeof(ccs) + 45 + 78);
	memcpy(out, tls13_hello, n);
	memcpy(out + n,
	       (const uint8_t[]){0x16, 0x03, 0x03, 0x00, 0x25, 0x10, 0x00, 0x00, 0x21, 0x20}, 10);
	for (size_t i = 10; i < 42; i++)
		out[n + i] = (uint8_t)(i * 13 + 5);
	n += 42;
	memcpy(out + n, ccs, sizeof(ccs));
	n += sizeof(ccs);
	memcpy(out + n, fin, sizeof(fin));
	for (size_t i = sizeof(fin); i < 45; i++)
		out[n + i] = (uint8_t)(i * 29 + 3);
	n += 45;
	memcpy(out + n, (const uint8_t[]){0x17, 0x03, 0x03, 0x00, 0x49}, 5);
	for (size_t i = 5; i < 78; i++)
		out[n + i] = (uint8_t)(i * 17 + 9);
	return n + 78;
}

/* An encrypted Finished that begins as a ClientHello would passes once
 * whole: the client waits for the server's answer to it, so holding it
 * for the rest of a "hello" hangs the handshake until the header time
 * (bench/proxy.md: "head-timeout" with bytes_up 367). Every cut, and the
 * flight cut after the hello. */
static void
test_tunnel_tls12_finished_like_hello(void **state)
{
	struct fixture *f = *state;
	uint8_t buf[1024], in[1024];
	size_t len = tls12_flight(buf, sizeof(buf)), failed = 0;
	size_t fin_end = sizeof(tls13_hello) + 42 + 6 + 45;

	for (size_t cut = 1; cut < fin_end; cut++) {
		int srv, fd = tunnel_open(f, &srv);
		size_t got;
		bool eof;

		assert_int_equal(send(fd, buf, cut, 0), (ssize_t)cut);
		for (int k = 0; k < 3; k++)
			event_base_loop(f->base, EVLOOP_NONBLOCK);
		got = drive_recv(f, srv, (char *)in, sizeof(in), cut, 2, &eof);
		assert_int_equal(send(fd, buf + cut, fin_end - cut, 0), (ssize_t)(fin_end - cut));
		/* Nothing more until the server has answered the Finished. */
		got += drive_recv(f, srv, (char *)in + got, sizeof(in) - got, fin_end - got, 300,
		                  &eof);
		if (got != fin_end || memcmp(in, buf, fin_end) != 0) {
			print_message("cut at %zu: %zu of %zu bytes reached the server\n", cut, got,
			              fin_end);
			failed++;
		}
		close(fd);
		close(srv);
	}
	(void)len;
	assert_int_equal(failed, 0);
	exchange(f, client(f), NULL, 50);
	assert_null(strstr(log_text(f), "\"verdict\":\"deny\""));
}

/* After change_cipher_spec, a small handshake record goes up once whole
 * (it may be TLS 1.2's encrypted Finished), so a second ClientHello cut
 * into records there cannot pass in pieces: a handshake record after it
 * is refused, and none of that record reaches the server. */
static void
test_tunnel_hello_fragments_after_ccs(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	uint8_t flight[512], in[1024];
	size_t n = sizeof(tls13_hello), first, got;
	bool eof;
	const char *r;

	memcpy(flight, tls13_hello, n);
	memcpy(flight + n, (const uint8_t[]){0x14, 0x03, 0x03, 0x00, 0x01, 0x01}, 6);
	n += 6;
	/* The first 40 bytes of the hello, as a record of their own. */
	memcpy(flight + n, (const uint8_t[]){0x16, 0x03, 0x03, 0x00, 0x28}, 5);
	memcpy(flight + n + 5, tls13_hello + 5, 40);
	n += 45;
	first = n;
	memcpy(flight + n, (const uint8_t[]){0x16, 0x03, 0x03, 0x00, 0x28}, 5);
	memcpy(flight + n + 5, tls13_hello + 45, 40);
	n += 45;
	assert_int_equal(send(fd, flight, n, 0), (ssize_t)n);
	r = exchange(f, fd, NULL, 2000);
	(void)r;
	got = drive_recv(f, srv, (char *)in, sizeof(in), sizeof(in), 300, &eof);
	assert_true(got <= first);
	close(fd);
	close(srv);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"deny\""));
	assert_non_null(strstr(log_text(f), "after change_cipher_spec"));
}

/* The one connection the proxy has (tests that open one tunnel). */
static struct conn *
only_conn(struct fixture *f)
{
	struct conn *c = TAILQ_FIRST(&f->px->px_conns);

	assert_non_null(c);
	assert_null(TAILQ_NEXT(c, entry));
	return c;
}

/* A TLS tunnel is spliced as soon as its first ClientHello has gone: the
 * rest of the handshake is watched on the splice (relay.c), not on
 * bufferevents. The watch still reads every record there: a second
 * ClientHello for another name, cut in two reads, is refused, and none
 * of it reaches the server (the change_cipher_spec before it does). */
static void
test_tunnel_tls_watch_spliced(void **state)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	uint8_t flight[512], in[1024];
	size_t n = sizeof(tls13_hello), got;
	uint8_t *name;
	struct conn *c;
	bool eof;

	assert_int_equal(send(fd, tls13_hello, n, 0), (ssize_t)n);
	got = drive_recv(f, srv, (char *)in, sizeof(in), n, 2000, &eof);
	assert_int_equal(got, n);
	for (int k = 0; k < 3; k++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
	c = only_conn(f);
	assert_true(c->bind_watch && c->bind_tls);
	assert_non_null(c->relay); /* spliced, and still watched */

	memcpy(flight, (const uint8_t[]){0x14, 0x03, 0x03, 0x00, 0x01, 0x01}, 6);
	memcpy(flight + 6, tls13_hello, n);
	name = memmem(flight + 6, n, "127.0.0.1", 9);
	assert_non_null(name);
	name[8] = '2'; /* the same length: 127.0.0.2 */
	n += 6;
	assert_int_equal(send(fd, flight, 100, 0), 100);
	for (int k = 0; k < 3; k++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
	got = drive_recv(f, srv, (char *)in, sizeof(in), 6, 300, &eof);
	assert_int_equal(got, 6);
	assert_memory_equal(in, flight, 6);
	assert_non_null(f->px->px_conns.tqh_first);
	assert_int_equal(send(fd, flight + 100, n - 100, 0), (ssize_t)(n - 100));
	(void)exchange(f, fd, NULL, 2000);
	got = drive_recv(f, srv, (char *)in, sizeof(in), sizeof(in), 300, &eof);
	assert_int_equal(got, 0);
	close(fd);
	close(srv);
	assert_non_null(strstr(log_text(f), "\"verdict\":\"deny\""));
	assert_non_null(strstr(log_text(f), "second ClientHello for 127.0.0.2"));
}

/* A record cut on a spliced, watched TLS tunnel waits for its rest for
 * the header time; then it is refused, or in audit mode let go from the
 * splice (relay_watch_flush), and the tunnel goes on. */
static void
test_tunnel_tls_watch_timeout(void **state, bool audit)
{
	struct fixture *f = *state;
	int srv, fd = tunnel_open(f, &srv);
	static const uint8_t cut[] = {0x16, 0x03, 0x03, 0x00, 0x40, 0x0f, 0x00, 0x00, 0x3c, 0x04};
	uint8_t in[512];
	size_t n = sizeof(tls13_hello);
	bool eof;

	assert_int_equal(send(fd, tls13_hello, n, 0), (ssize_t)n);
	assert_int_equal(drive_recv(f, srv, (char *)in, sizeof(in), n, 2000, &eof), n);
	for (int k = 0; k < 3; k++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
	assert_non_null(only_conn(f)->relay);
	assert_int_equal(send(fd, cut, sizeof(cut), 0), (ssize_t)sizeof(cut));
	/* Held: nothing of the record before the header time (300 ms). */
	assert_int_equal(drive_recv(f, srv, (char *)in, sizeof(in), 1, 150, &eof), 0);
	if (audit) {
		assert_int_equal(
		        drive_recv(f, srv, (char *)in, sizeof(in), sizeof(cut), 2000, &eof),
		        sizeof(cut));
		assert_memory_equal(in, cut, sizeof(cut));
		/* The look is over: what follows goes as it comes. */
		assert_int_equal(send(fd, "\x17\x03\x03\x00\x01x", 6, 0), 6);
		assert_int_equal(drive_recv(f, srv, (char *)in, sizeof(in), 6, 2000, &eof), 6);
	} else {
		(void)exchange(f, fd, NULL, 2000);
		assert_int_equal(drive_recv(f, srv, (char *)in, sizeof(in), sizeof(in), 300, &eof),
		                 0);
	}
	close(fd);
	close(srv);
	exchange(f, client(f), NULL, 50);
	assert_non_null(
	        strstr(log_text(f), audit ? "\"verdict\":\"audit-deny\"" : "\"verdict\":\"deny\""));
	assert_non_null(strstr(log_text(f), "TLS record not complete within 300 ms"));
}

static void
test_tunnel_tls_watch_timeout_enforce(void **state)
{
	test_tunnel_tls_watch_timeout(state, false);
}

static void
test_tunnel_tls_watch_timeout_audit(void **state)
{
	test_tunnel_tls_watch_timeout(state, true);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_noname_cidr_deny_beats_dns_cache, setup_noname,
	                                        teardown_noname),
	        cmocka_unit_test_setup_teardown(test_log_failure_ends_live_connections,
	                                        setup_loopback_pipe_log,
	                                        teardown_loopback_pipe_log),
	        cmocka_unit_test_setup_teardown(test_log_failure_ends_idle_tunnel,
	                                        setup_loopback_pipe_log,
	                                        teardown_loopback_pipe_log),
	        cmocka_unit_test_setup_teardown(test_reused_addr_in_deny_cidr_audit,
	                                        setup_deny_cidr_audit, teardown_deny_cidr),
	        cmocka_unit_test_setup_teardown(test_own_addr_v4_mapped, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_mapped_literal_is_v4, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_denied_by_rule, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_no_match, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_ip_literal_needs_cidr, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_too_large, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_dns_failure, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_silent_client_not_logged, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_healthz, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_healthz_log_failed, setup_full_log, teardown),
	        cmocka_unit_test_setup_teardown(test_slowloris_and_limit, setup_limit, teardown),
	        cmocka_unit_test_setup_teardown(test_log_failure_fails_closed, setup_full_log,
	                                        teardown),
	        cmocka_unit_test_setup_teardown(test_audit_mode, setup_audit, teardown),
	        cmocka_unit_test_setup_teardown(test_emfile_pause, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_tunnel_half_close, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_host_mismatch, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_host_same_address, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_second_request, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_unframable, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_server_first, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_eof_in_head, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_mismatch_audit, setup_loopback_audit,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_head_timeout, setup_loopback_header,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_head_timeout_audit,
	                                        setup_loopback_header_audit, teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_connection_refused, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_response_timeout, setup_loopback_response,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_connect_timeout, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_copies_without_pipes, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_broker_gone, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_no_fd_for_upstream, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_queue_cap_holds, setup_loopback_capped,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_tls13_every_split, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_tls12_finished_like_hello,
	                                        setup_loopback, teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_tls_watch_spliced, setup_loopback,
	                                        teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_tls_watch_timeout_enforce,
	                                        setup_loopback_header, teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_tls_watch_timeout_audit,
	                                        setup_loopback_header_audit, teardown_loopback),
	        cmocka_unit_test_setup_teardown(test_tunnel_hello_fragments_after_ccs,
	                                        setup_loopback, teardown_loopback),
	};
	/* The supervisor ignores SIGPIPE; so does this stand-in for it. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
