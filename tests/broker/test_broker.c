/* The broker driven as a compromised worker would drive it: raw datagrams
 * on its socket. Denied names, guarded addresses (loopback, metadata, the
 * host's own), forged lengths, types, ids and descriptors, a flood: the
 * broker refuses every one and stays up. An allowed name gets a connected
 * socket; the seccomp filter and Landlock are in force in the broker.
 *
 * Runs inside the namespaces test_broker_e2e.sh builds: this process's
 * network namespace has lo, 203.0.113.1/24 on a veth (the "host's own"
 * address) and dnsmasq on BROKER_DNS; the veth's peer, in BROKER_PEER_NS,
 * has 203.0.113.10, where this test listens. Nothing leaves them. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "broker/broker.h"
#include "broker/client.h"
#include "broker/msg.h"
#include "common/confine.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/msg.h"
#include "policy/policy.h"
#include "tls/ca.h"

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define LISTEN_PORT 8080
#define PEER_ADDR   "203.0.113.10"
#define OWN_ADDR    "203.0.113.1"

static const char policy_yaml[] = "version: 1\n"
                                  "name: broker-test\n"
                                  "allow:\n"
                                  "  - host: allowed.test\n"
                                  "    ports: [8080, 8081]\n"
                                  "  - host: rebind.test\n"
                                  "    ports: [8080]\n"
                                  "  - host: meta.test\n"
                                  "    ports: [8080]\n"
                                  "  - host: own.test\n"
                                  "    ports: [8080]\n"
                                  "  - host: dc.test\n"
                                  "    ports: [8080]\n"
                                  "  - host: '*.evil.test'\n"
                                  "    ports: [8080]\n"
                                  "  - host: inspect.test\n"
                                  "    ports: [443]\n"
                                  "    inspect: {http: {access: read-only}}\n"
                                  "  - host: '*.mint.test'\n"
                                  "    ports: [443]\n"
                                  "    inspect: {http: {access: full}}\n"
                                  "  - cidr: 203.0.113.10/32\n"
                                  "    ports: [8080]\n"
                                  "  - cidr: 0.0.0.0/0\n"
                                  "    ports: [80]\n"
                                  "  - cidr: ::/0\n"
                                  "    ports: [80]\n"
                                  "deny:\n"
                                  "  - host: sub.evil.test\n"
                                  "    ports: [8080]\n"
                                  "  - cidr: 198.51.100.66/32\n"
                                  "    ports: [8080]\n";

struct fixture {
	struct policy *policy;
	int fd;     /* the worker's end */
	pid_t pid;  /* the broker */
	int lfd;    /* listening at PEER_ADDR:LISTEN_PORT in the peer namespace */
	int silent; /* a UDP "nameserver" that never answers */
};

static uint32_t next_id = 1;
/* The CA the next spawn hands the broker (test_mint), or NULL. */
static struct tlsca *spawn_ca;
/* A self-test reply is OK without a descriptor. */
static bool fdless_ok;

/* Replies read while a send waited for room (the broker stops reading
 * while its replies cannot go out, as a worker reads them on its loop):
 * recv_reply hands them out first. */
static struct {
	struct broker_reply r;
	int fd;
} stash[1024];
static size_t stash_head, stash_len;

static void
parse_hostport(const char *s, struct sockaddr_storage *ss)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	assert_non_null(colon);
	assert_true((size_t)(colon - s) < sizeof(host));
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = '\0';
	assert_int_not_equal(
	        sockaddr_set(ss, AF_INET, host, (uint16_t)strtoul(colon + 1, NULL, 10)), 0);
}

/* A listener at PEER_ADDR in the peer namespace: the socket keeps the
 * namespace it was made in. */
static int
peer_listen(uint16_t port)
{
	const char *peer = getenv("BROKER_PEER_NS");
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port)};
	int self, other, fd, one = 1;

	assert_non_null(peer);
	self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	other = open(peer, O_RDONLY | O_CLOEXEC);
	assert_true(self >= 0 && other >= 0);
	assert_int_equal(setns(other, CLONE_NEWNET), 0);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	inet_pton(AF_INET, PEER_ADDR, &sin.sin_addr);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 64), 0);
	assert_int_equal(setns(self, CLONE_NEWNET), 0);
	close(self);
	close(other);
	return fd;
}

static void
spawn(struct fixture *f, unsigned inflight, bool silent_dns, uint32_t timeout_ms)
{
	struct broker_cfg cfg;
	char err[256];

	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = f->policy;
	cfg.ca = spawn_ca;
	cfg.max_inflight = inflight;
	cfg.connect_timeout_ms = timeout_ms;
	cfg.dns.n_upstream = 1;
	if (silent_dns) {
		struct sockaddr_in sin = {.sin_family = AF_INET,
		                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		socklen_t len = sizeof(sin);

		f->silent = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		assert_int_equal(bind(f->silent, (struct sockaddr *)&sin, sizeof(sin)), 0);
		assert_int_equal(getsockname(f->silent, (struct sockaddr *)&sin, &len), 0);
		memcpy(&cfg.dns.upstream[0], &sin, sizeof(sin));
	} else {
		const char *dns = getenv("BROKER_DNS");

		assert_non_null(dns);
		parse_hostport(dns, &cfg.dns.upstream[0]);
	}
	f->fd = broker_spawn(&cfg, &f->pid, err, sizeof(err));
	if (f->fd < 0)
		fail_msg("broker_spawn: %s", err);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct policy_diag d = {0};

	assert_non_null(f);
	f->policy =
	        policy_load_buffer("broker-test.yaml", policy_yaml, sizeof(policy_yaml) - 1, &d);
	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	assert_non_null(f->policy);
	policy_diag_clear(&d);
	f->fd = -1;
	f->silent = -1;
	f->lfd = peer_listen(LISTEN_PORT);
	*state = f;
	return 0;
}

/* The broker exits 0 when its worker's end closes: it survived. */
static int
teardown(void **state)
{
	struct fixture *f = *state;
	int status = -1;

	/* Descriptors first: a failed check below must not leak them into
	 * the next test. */
	fd_close(&f->lfd);
	fd_close(&f->silent);
	for (; stash_len > 0; stash_len--, stash_head = (stash_head + 1) % ARRAY_SIZE(stash))
		fd_close(&stash[stash_head].fd);
	if (f->fd >= 0) {
		close(f->fd);
		assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
	}
	policy_free(f->policy);
	free(f);
	return 0;
}

/* One datagram from the socket: the fd it carries, or -1. A reply must
 * parse and carry a descriptor exactly when OK. */
static int
read_reply(struct fixture *f, struct broker_reply *r)
{
	unsigned char buf[sizeof(*r) + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 2)];
	} cm;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
	struct msghdr msg = {.msg_iov = &iov,
	                     .msg_iovlen = 1,
	                     .msg_control = cm.b,
	                     .msg_controllen = sizeof(cm.b)};
	struct cmsghdr *c;
	ssize_t n;
	int fd = -1;

	n = recvmsg(f->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	assert_true(n > 0);
	assert_int_equal(broker_parse_reply(buf, (size_t)n, r), 0);
	assert_false(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
	c = CMSG_FIRSTHDR(&msg);
	if (c != NULL) {
		assert_int_equal(c->cmsg_type, SCM_RIGHTS);
		assert_int_equal(c->cmsg_len, CMSG_LEN(sizeof(int)));
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	}
	assert_int_equal(r->status == BROKER_OK && !fdless_ok, fd >= 0);
	return fd;
}

/* The next reply within ms (the fd it carries, or -1), or -2 when none
 * comes. */
static int
recv_reply(struct fixture *f, struct broker_reply *r, int ms)
{
	struct pollfd pfd = {.fd = f->fd, .events = POLLIN};

	if (stash_len > 0) {
		size_t at = stash_head;

		stash_head = (stash_head + 1) % ARRAY_SIZE(stash);
		stash_len--;
		*r = stash[at].r;
		return stash[at].fd;
	}
	if (poll(&pfd, 1, ms) != 1)
		return -2;
	return read_reply(f, r);
}

/* The worker's end is nonblocking: a full socket waits (bounded) for the
 * broker to read, reading its replies meanwhile. */
static void
send_raw(struct fixture *f, const void *p, size_t n)
{
	for (int tries = 0; tries < 1000; tries++) {
		struct pollfd pfd = {.fd = f->fd, .events = POLLOUT | POLLIN};
		ssize_t k = send(f->fd, p, n, MSG_NOSIGNAL);

		if (k == (ssize_t)n)
			return;
		assert_true(k < 0 && errno == EAGAIN);
		if (poll(&pfd, 1, 50) == 1 && (pfd.revents & POLLIN)) {
			size_t at = (stash_head + stash_len) % ARRAY_SIZE(stash);

			assert_true(stash_len < ARRAY_SIZE(stash));
			stash[at].fd = read_reply(f, &stash[at].r);
			stash_len++;
		}
	}
	fail_msg("the broker does not read its socket");
}

/* Wait for the reply to id; others arriving first fail the test. */
static int
reply_to(struct fixture *f, uint32_t id, struct broker_reply *r, int ms)
{
	int fd = recv_reply(f, r, ms);

	if (fd == -2)
		fail_msg("no reply to request %u within %d ms", id, ms);
	assert_int_equal(r->h.id, id);
	return fd;
}

static uint32_t ask_name_flags(struct fixture *f, const char *name, uint16_t port,
                               const char *orig, unsigned flags);

static uint32_t
ask_name(struct fixture *f, const char *name, uint16_t port, const char *orig)
{
	return ask_name_flags(f, name, port, orig, 0);
}

/* With flags (BROKER_F_ECH). */
static uint32_t
ask_name_flags(struct fixture *f, const char *name, uint16_t port, const char *orig,
               unsigned flags)
{
	struct broker_req_name m;
	struct sockaddr_storage ss;
	uint32_t id = next_id++;

	if (orig != NULL)
		assert_int_not_equal(sockaddr_set(&ss, AF_INET, orig, port), 0);
	assert_int_equal(broker_build_name(&m, id, name, port, flags,
	                                   orig != NULL ? (struct sockaddr *)&ss : NULL,
	                                   "claimed:1"),
	                 0);
	send_raw(f, &m, sizeof(m));
	return id;
}

static uint32_t
ask_addr(struct fixture *f, const char *ip, uint16_t port)
{
	struct broker_req_addr m;
	struct sockaddr_storage ss;
	uint32_t id = next_id++;

	assert_int_not_equal(sockaddr_set(&ss, 0, ip, port), 0);
	assert_int_equal(broker_build_addr(&m, id, (struct sockaddr *)&ss, port, NULL), 0);
	send_raw(f, &m, sizeof(m));
	return id;
}

static void
expect_status(struct fixture *f, uint32_t id, enum broker_status want, const char *reason_part)
{
	struct broker_reply r;
	int fd = reply_to(f, id, &r, 5000);

	fd_close(&fd);
	if (r.status != want)
		fail_msg("request %u: status %s (%s), expected %s", id,
		         broker_status_name(r.status), r.reason, broker_status_name(want));
	if (reason_part != NULL && strstr(r.reason, reason_part) == NULL)
		fail_msg("request %u: reason '%s' lacks '%s'", id, r.reason, reason_part);
}

/* Connected: the socket reaches the listener in the peer namespace,
 * with the verdict the broker's own decision gave. */
static void
expect_connected_as(struct fixture *f, uint32_t id, enum broker_verdict verdict, const char *reason)
{
	struct broker_reply r;
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	char ip[INET_ADDRSTRLEN], buf[4];
	int fd = reply_to(f, id, &r, 5000), afd;

	if (r.status != BROKER_OK)
		fail_msg("request %u: %s (%s)", id, broker_status_name(r.status), r.reason);
	assert_int_equal(r.verdict, verdict);
	assert_string_equal(r.reason, reason);
	assert_int_equal(getpeername(fd, (struct sockaddr *)&peer, &len), 0);
	inet_ntop(AF_INET, &peer.sin_addr, ip, sizeof(ip));
	assert_string_equal(ip, PEER_ADDR);
	assert_int_equal(ntohs(peer.sin_port), LISTEN_PORT);
	assert_int_equal(r.addr.family, AF_INET);
	assert_int_equal(r.addr.port, LISTEN_PORT);
	afd = accept(f->lfd, NULL, NULL);
	assert_true(afd >= 0);
	assert_int_equal(write(fd, "ping", 4), 4);
	assert_int_equal(read(afd, buf, 4), 4);
	assert_memory_equal(buf, "ping", 4);
	close(afd);
	close(fd);
}

static void
expect_connected(struct fixture *f, uint32_t id)
{
	expect_connected_as(f, id, BROKER_V_ALLOW, "");
}

/* Still up under audit mode: an unlisted name is let through to the
 * resolver, which does not know it. */
static void
expect_alive_audit(struct fixture *f)
{
	int status;

	assert_int_equal(waitpid(f->pid, &status, WNOHANG), 0);
	expect_status(f, ask_name(f, "unlisted.test", 443, NULL), BROKER_E_DNS, "does not resolve");
}

/* Still up and still deciding: a request gets its usual answer. */
static void
expect_alive(struct fixture *f)
{
	int status;

	assert_int_equal(waitpid(f->pid, &status, WNOHANG), 0);
	expect_status(f, ask_name(f, "unlisted.test", 443, NULL), BROKER_E_NO_RULE, "no rule");
}

/* ---- what a worker may ask for ---- */

static void
test_allowed_name_connects(void **state)
{
	struct fixture *f = *state;

	spawn(f, 0, false, 3000);
	expect_connected(f, ask_name(f, "allowed.test", LISTEN_PORT, NULL));
	/* Names are normalised: case and one trailing dot. */
	expect_connected(f, ask_name(f, "ALLOWED.Test.", LISTEN_PORT, NULL));
	/* Transparent: the original destination is what the name resolves to. */
	expect_connected(f, ask_name(f, "allowed.test", LISTEN_PORT, PEER_ADDR));
	/* An address a cidr rule allows. */
	expect_connected(f, ask_addr(f, PEER_ADDR, LISTEN_PORT));
	/* Allowed, resolved, guarded out of nothing: the port is closed. */
	expect_status(f, ask_name(f, "allowed.test", 8081, NULL), BROKER_E_REFUSED, "refused");
}

/* ---- what it may not ---- */

static void
test_denied_names(void **state)
{
	struct fixture *f = *state;

	spawn(f, 0, false, 3000);
	expect_status(f, ask_name(f, "sub.evil.test", LISTEN_PORT, NULL), BROKER_E_DENIED,
	              "denied by rule");
	expect_status(f, ask_name(f, "unlisted.test", LISTEN_PORT, NULL), BROKER_E_NO_RULE, NULL);
	/* An allowed name on a port its rule does not list. */
	expect_status(f, ask_name(f, "allowed.test", 22, NULL), BROKER_E_NO_RULE, NULL);
	/* The worker's claimed rule changes nothing (ask_name claims one). */
	expect_status(f, ask_name(f, "evil.test", LISTEN_PORT, NULL), BROKER_E_NO_RULE, NULL);
	/* Not names policy_name_normalize takes, and an IP literal as a name. */
	expect_status(f, ask_name(f, "a..b", LISTEN_PORT, NULL), BROKER_E_BAD_NAME, NULL);
	expect_status(f, ask_name(f, "caf\xc3\xa9.test", LISTEN_PORT, NULL), BROKER_E_BAD_NAME,
	              NULL);
	expect_status(f, ask_name(f, "203.0.113.10", LISTEN_PORT, NULL), BROKER_E_BAD_NAME, NULL);
	/* Transparent, and the name does not resolve to the original
	 * destination (SNI of an allowed name, packets to another host). */
	expect_status(f, ask_name(f, "allowed.test", LISTEN_PORT, "203.0.113.99"),
	              BROKER_E_NOT_ORIG, "original destination");
	/* Addresses no cidr rule allows, or a deny cidr rule refuses. */
	expect_status(f, ask_addr(f, "203.0.113.11", LISTEN_PORT), BROKER_E_NO_RULE, NULL);
	expect_status(f, ask_addr(f, "198.51.100.66", LISTEN_PORT), BROKER_E_DENIED, NULL);
	/* The worker's old claim that its DNS listener told the sandbox
	 * the address (flag 0x4, BROKER_F_TOLD until the broker kept that
	 * record itself) is no flag: the request is refused whole, not let
	 * through to an address the name never resolved to. */
	{
		struct broker_req_name m;
		struct sockaddr_storage ss;
		uint32_t id = next_id++;

		assert_int_not_equal(sockaddr_set(&ss, AF_INET, "203.0.113.99", LISTEN_PORT), 0);
		assert_int_equal(broker_build_name(&m, id, "allowed.test", LISTEN_PORT, 0,
		                                   (struct sockaddr *)&ss, NULL),
		                 0);
		m.flags |= 0x4;
		send_raw(f, &m, sizeof(m));
		expect_status(f, id, BROKER_E_MALFORMED, "unknown flags");
	}
	expect_alive(f);
}

static void
test_guarded_addresses(void **state)
{
	struct fixture *f = *state;

	spawn(f, 0, false, 3000);
	/* Allowed names that resolve to guarded addresses (rebinding): the
	 * resolver's filter (dns/resolver.h) removes them, in its words. */
	expect_status(f, ask_name(f, "rebind.test", LISTEN_PORT, NULL), BROKER_E_GUARD,
	              "rebind.test: address guard removed answers: 127.0.0.1 (loopback)");
	expect_status(f, ask_name(f, "meta.test", LISTEN_PORT, NULL), BROKER_E_GUARD,
	              "169.254.169.254 (link-local)");
	expect_status(f, ask_name(f, "own.test", LISTEN_PORT, NULL), BROKER_E_GUARD,
	              OWN_ADDR " is one of this host's addresses");
	/* Resolves to an address a deny cidr rule covers. */
	expect_status(f, ask_name(f, "dc.test", LISTEN_PORT, NULL), BROKER_E_DENY_CIDR,
	              "denied by a cidr rule");
	/* A catch-all cidr rule allows port 80 everywhere, and opens no
	 * guarded range and never the host. */
	expect_status(f, ask_addr(f, "127.0.0.1", 80), BROKER_E_GUARD, "loopback");
	expect_status(f, ask_addr(f, "169.254.169.254", 80), BROKER_E_GUARD, "link-local");
	expect_status(f, ask_addr(f, "::1", 80), BROKER_E_GUARD, "loopback");
	expect_status(f, ask_addr(f, "::ffff:169.254.169.254", 80), BROKER_E_GUARD, "link-local");
	expect_status(f, ask_addr(f, "10.0.0.1", 80), BROKER_E_GUARD, "private");
	expect_status(f, ask_addr(f, OWN_ADDR, 80), BROKER_E_GUARD, "this host's");
	/* Transparent with a guarded original destination the name resolves to. */
	expect_status(f, ask_name(f, "rebind.test", LISTEN_PORT, "127.0.0.1"), BROKER_E_GUARD,
	              "loopback");
	expect_alive(f);
}

/* Audit mode: what only the rules refuse goes through, marked, with the
 * reason enforce would have given; the address guard still holds. */
static void
test_audit(void **state)
{
	struct fixture *f = *state;

	policy_set_mode(f->policy, POLICY_MODE_AUDIT); /* the child's copy */
	spawn(f, 0, false, 3000);
	expect_connected_as(f, ask_name(f, "sub.evil.test", LISTEN_PORT, NULL), BROKER_V_AUDIT_DENY,
	                    "denied by rule");
	{
		/* The reply says which refusal enforce would have given. */
		struct broker_reply r;
		int fd = reply_to(f, ask_name(f, "sub.evil.test", LISTEN_PORT, NULL), &r, 5000);

		assert_true(fd >= 0);
		assert_int_equal(r.verdict, BROKER_V_AUDIT_DENY);
		assert_int_equal(r.audit, BROKER_E_DENIED);
		close(fd);
		close(accept(f->lfd, NULL, NULL));
		/* And for a name that does not resolve to the original
		 * destination (the peer's listener is at PEER_ADDR). */
		fd = reply_to(f, ask_name(f, "meta.test", LISTEN_PORT, PEER_ADDR), &r, 5000);
		fd_close(&fd);
		assert_int_equal(r.status, BROKER_E_GUARD); /* the answer's guard first */
	}
	expect_connected_as(f, ask_addr(f, PEER_ADDR, LISTEN_PORT), BROKER_V_ALLOW, "");
	expect_status(f, ask_name(f, "rebind.test", LISTEN_PORT, NULL), BROKER_E_GUARD, "loopback");
	expect_status(f, ask_addr(f, "169.254.169.254", LISTEN_PORT), BROKER_E_GUARD, "link-local");
	expect_alive_audit(f);
}

/* ---- forged messages ---- */

static void
expect_no_reply(struct fixture *f)
{
	struct broker_reply r;
	int fd = recv_reply(f, &r, 200);

	if (fd != -2)
		fail_msg("unexpected reply to %u: %s", r.h.id, broker_status_name(r.status));
}

static void
test_forged(void **state)
{
	struct fixture *f = *state;
	struct broker_req_name m;
	struct broker_req_addr a;
	struct broker_reply rep;
	unsigned char big[BROKER_MSG_MAX + 64];
	uint32_t id;

	spawn(f, 0, false, 3000);
	/* Shorter than a header: no id to answer; dropped. So is an empty
	 * datagram, which reads like a hang-up and must not end the broker. */
	send_raw(f, "\x01\x00", 2);
	send_raw(f, "", 0);
	expect_no_reply(f);

	/* A header whose length lies, each way. */
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	m.h.len = sizeof(m) - 1;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "length");
	m.h.len = sizeof(m);
	m.h.id = id = next_id++;
	send_raw(f, &m, sizeof(m) - 4); /* the header says more than came */
	expect_status(f, id, BROKER_E_MALFORMED, "length");
	m.h.len = sizeof(m) - 4;
	m.h.id = id = next_id++;
	send_raw(f, &m, sizeof(m) - 4); /* consistent, but not the type's size */
	expect_status(f, id, BROKER_E_MALFORMED, "size");
	/* Longer than any message (truncated on receipt). */
	memset(big, 0, sizeof(big));
	memcpy(big, &m, sizeof(m));
	((struct broker_hdr *)big)->len = sizeof(big);
	((struct broker_hdr *)big)->id = id = next_id++;
	send_raw(f, big, sizeof(big));
	expect_status(f, id, BROKER_E_MALFORMED, NULL);

	/* Unknown type; a reply sent as a request; the self-test type is
	 * known only to test builds (this one), so try a bad op. */
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	m.h.type = 0x55;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "type");
	broker_build_reply(&rep, id = next_id++, BROKER_OK, BROKER_V_ALLOW, 0, NULL, NULL, NULL);
	send_raw(f, &rep, sizeof(rep));
	expect_status(f, id, BROKER_E_MALFORMED, "type");

	/* id 0 is nobody's: dropped. */
	broker_build_name(&m, 0, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	send_raw(f, &m, sizeof(m));
	expect_no_reply(f);

	/* Port 0; unknown flags; ORIG without an address; an address
	 * without ORIG; a bad family; padding. */
	broker_build_name(&m, id = next_id++, "allowed.test", 0, 0, NULL, NULL);
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "port");
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	m.flags = 0x80;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "flags");
	m.flags = BROKER_F_ORIG;
	m.h.id = id = next_id++;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "address");
	m.flags = 0;
	m.orig.family = AF_INET;
	m.orig.port = LISTEN_PORT;
	m.h.id = id = next_id++;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "address");
	broker_build_addr(&a, id = next_id++,
	                  (struct sockaddr *)&(struct sockaddr_in){.sin_family = AF_INET}, 80,
	                  NULL);
	a.dst.family = AF_UNIX;
	send_raw(f, &a, sizeof(a));
	expect_status(f, id, BROKER_E_MALFORMED, "address");
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	m.pad = 1;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "padding");

	/* A name without its NUL; bytes hidden after the NUL; a rule
	 * without its NUL. */
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	memset(m.name, 'a', sizeof(m.name));
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "unterminated");
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	memcpy(m.name + 20, "evil.test", 9);
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "padding");
	broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
	memset(m.rule, 'r', sizeof(m.rule));
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "unterminated");
	expect_alive(f);
}

/* Descriptors sent to the broker are closed, and the request refused. */
static void
test_stray_fds(void **state)
{
	struct fixture *f = *state;
	struct broker_req_name m;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 32)];
	} cm;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b};
	int p[2], fds[32];
	struct pollfd pfd;
	char c;
	uint32_t id;

	spawn(f, 0, false, 3000);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	/* More than the broker receives at once: the rest are truncated. */
	for (int n = 1; n <= 32; n += 31) {
		struct cmsghdr *h;

		memset(&cm, 0, sizeof(cm));
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
		h = CMSG_FIRSTHDR(&msg);
		h->cmsg_level = SOL_SOCKET;
		h->cmsg_type = SCM_RIGHTS;
		h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
		for (int i = 0; i < n; i++)
			fds[i] = p[1];
		memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)n);
		broker_build_name(&m, id = next_id++, "allowed.test", LISTEN_PORT, 0, NULL, NULL);
		assert_int_equal(sendmsg(f->fd, &msg, MSG_NOSIGNAL), (ssize_t)sizeof(m));
		expect_status(f, id, BROKER_E_MALFORMED, "descriptors");
	}
	/* With our end closed, the pipe reads EOF only if the broker kept
	 * no copy of the write end. */
	close(p[1]);
	pfd = (struct pollfd){.fd = p[0], .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 2000), 1);
	assert_int_equal(read(p[0], &c, 1), 0);
	close(p[0]);
	expect_alive(f);
}

/* Random datagrams of every size: each dropped or refused. */
static void
test_garbage(void **state)
{
	struct fixture *f = *state;
	unsigned char buf[BROKER_MSG_MAX + 8];
	unsigned seed = 12345;
	struct broker_reply r;
	int fd;

	spawn(f, 0, false, 3000);
	for (int i = 0; i < 2000; i++) {
		size_t n = (size_t)(rand_r(&seed) % (int)sizeof(buf));

		for (size_t k = 0; k < n; k++)
			buf[k] = (unsigned char)rand_r(&seed);
		/* Now and then a plausible header, so the deeper checks run. */
		if (n >= sizeof(struct broker_hdr) && (i & 1)) {
			struct broker_hdr h = {.type = (uint16_t)(1 + i % 3),
			                       .len = (uint16_t)n,
			                       .id = 0x80000000u + (uint32_t)i};

			memcpy(buf, &h, sizeof(h));
		}
		send_raw(f, buf, n);
		/* Drain as we go: our receive buffer is not the test. */
		while ((fd = recv_reply(f, &r, 0)) != -2) {
			fd_close(&fd);
			assert_int_not_equal(r.status, BROKER_OK);
		}
	}
	while ((fd = recv_reply(f, &r, 300)) != -2) {
		fd_close(&fd);
		assert_int_not_equal(r.status, BROKER_OK);
	}
	expect_alive(f);
}

/* ---- a flood: bounded, never queued ---- */

static void
test_flood(void **state)
{
	struct fixture *f = *state;
	enum { INFLIGHT = 4, FLOOD = 400 };
	uint32_t held[INFLIGHT], dup;
	struct broker_reply r;
	unsigned busy = 0, dups = 0, timeouts = 0;
	int fd;

	/* A nameserver that never answers holds requests in flight until
	 * the broker's deadline (3 s: the flood must be over by then, on a slow machine too). */
	spawn(f, INFLIGHT, true, 3000);
	for (int i = 0; i < INFLIGHT; i++)
		held[i] = ask_name(f, "allowed.test", LISTEN_PORT, NULL);
	expect_no_reply(f);
	/* The same id again while it is in flight. */
	{
		struct broker_req_name m;

		broker_build_name(&m, dup = held[1], "allowed.test", LISTEN_PORT, 0, NULL, NULL);
		send_raw(f, &m, sizeof(m));
		fd = reply_to(f, dup, &r, 2000);
		assert_int_equal(r.status, BROKER_E_DUP_ID);
		dups++;
	}
	/* Every one refused at once (busy); the held ones end at the
	 * deadline and free their slots. Replies are drained as they
	 * come: our receive buffer is not under test. */
	for (int i = 0; i <= FLOOD; i++) {
		int wait = i < FLOOD ? 0 : 6000;

		if (i < FLOOD)
			ask_name(f, "allowed.test", LISTEN_PORT, NULL);
		while (busy + timeouts < FLOOD + INFLIGHT && (fd = recv_reply(f, &r, wait)) != -2) {
			if (r.status == BROKER_E_BUSY) {
				busy++;
			} else if (r.status == BROKER_E_DNS_TIMEOUT) {
				bool mine = false;

				for (int k = 0; k < INFLIGHT; k++)
					mine = mine || held[k] == r.h.id;
				assert_true(mine);
				timeouts++;
			} else {
				fail_msg("flood: reply %s to %u", broker_status_name(r.status),
				         r.h.id);
			}
		}
	}
	assert_int_equal(busy, FLOOD);
	assert_int_equal(timeouts, INFLIGHT);
	expect_connected(f, ask_addr(f, PEER_ADDR, LISTEN_PORT));
	expect_alive(f);
	assert_int_equal(dups, 1);
}

/* ---- the sandbox's questions (RESOLVE) ---- */

/* The next datagram within ms, either kind: 1 with *d a DNS reply, 0
 * with *r a reply, -1 when none came. Neither carries a descriptor. */
static int
recv_any(struct fixture *f, struct broker_reply *r, struct broker_dns_result *d, int ms)
{
	static unsigned char buf[BROKER_DNS_REPLY_MAX + 1];
	struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
	struct broker_hdr h;
	ssize_t n;

	assert_int_equal(stash_len, 0);
	if (poll(&pfd, 1, ms) != 1)
		return -1;
	n = recv(f->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	assert_true(n >= (ssize_t)sizeof(h) && (size_t)n < sizeof(buf));
	memcpy(&h, buf, sizeof(h));
	if (h.type == BROKER_MSG_DNS_REPLY) {
		assert_int_equal(broker_parse_dns_reply(buf, (size_t)n, d), 0);
		return 1;
	}
	assert_int_equal(broker_parse_reply(buf, (size_t)n, r), 0);
	return 0;
}

static uint32_t
ask_resolve(struct fixture *f, const char *qname, uint16_t qtype, const char *name)
{
	struct broker_req_resolve m;
	uint32_t id = next_id++;

	assert_int_equal(broker_build_resolve(&m, id, qname, qtype, DNS_CLASS_IN, name), 0);
	send_raw(f, &m, sizeof(m));
	return id;
}

/* The DNS reply to id, within ms. */
static void
dns_reply_to(struct fixture *f, uint32_t id, struct broker_dns_result *d, int ms)
{
	struct broker_reply r;
	int k = recv_any(f, &r, d, ms);

	if (k < 0)
		fail_msg("no answer to question %u within %d ms", id, ms);
	if (k == 0)
		fail_msg("question %u: a reply %s (%s), not an answer", r.h.id,
		         broker_status_name(r.status), r.reason);
	assert_int_equal(d->id, id);
}

/* The silent nameserver's next query within ms: answered with one A
 * record of addr for ttl seconds (addr NULL: no record), its qtype
 * returned; 0 when none came. */
static uint16_t
serve_query(struct fixture *f, const char *addr, uint32_t ttl, int ms)
{
	unsigned char q[512], out[512];
	struct sockaddr_storage from;
	socklen_t flen = sizeof(from);
	struct pollfd pfd = {.fd = f->silent, .events = POLLIN};
	struct dns_query dq;
	struct dns_builder b;
	unsigned char a[4];
	ssize_t n;
	size_t len;

	if (poll(&pfd, 1, ms) != 1)
		return 0;
	n = recvfrom(f->silent, q, sizeof(q), 0, (struct sockaddr *)&from, &flen);
	assert_true(n > 0);
	assert_int_equal(dns_query_parse(q, (size_t)n, &dq), DNS_OK);
	dns_build_init(&b, out, sizeof(out), dq.id, DNS_FLAG_QR | DNS_FLAG_RD | DNS_FLAG_RA);
	assert_int_equal(dns_build_question(&b, dq.qname, dq.qtype, dq.qclass), 0);
	if (addr != NULL && dq.qtype == DNS_TYPE_A) {
		assert_int_equal(inet_pton(AF_INET, addr, a), 1);
		assert_int_equal(dns_build_rr(&b, DNS_SEC_AN, dq.qname, DNS_TYPE_A, ttl, a, 4), 0);
	}
	len = dns_build_finish(&b);
	assert_true(len > 0);
	assert_int_equal(sendto(f->silent, out, len, 0, (struct sockaddr *)&from, flen),
	                 (ssize_t)len);
	return dq.qtype;
}

/* Every query the broker's lookup of a name makes (A, and AAAA unless
 * its empty answer is cached), answered with addr; at least one. */
static void
serve_lookup(struct fixture *f, const char *addr)
{
	int n = 0;

	while (serve_query(f, addr, 0, n == 0 ? 2000 : 300) != 0)
		n++;
	assert_true(n >= 1);
}

/* Nothing reached the nameserver within ms. */
static void
expect_no_query(struct fixture *f, int ms)
{
	struct pollfd pfd = {.fd = f->silent, .events = POLLIN};

	if (poll(&pfd, 1, ms) != 0)
		fail_msg("a query reached the nameserver");
}

static void
test_resolve(void **state)
{
	struct fixture *f = *state;
	struct broker_dns_result d;
	uint32_t id;

	spawn(f, 0, true, 3000);
	/* An allowed name is asked upstream (in its case, as asked), and
	 * the answer comes back filtered. */
	id = ask_resolve(f, "AlloWed.test", DNS_TYPE_A, "allowed.test");
	assert_int_equal(serve_query(f, PEER_ADDR, 300, 2000), DNS_TYPE_A);
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_ANSWER);
	assert_int_equal(d.f.rcode, DNS_RCODE_NOERROR);
	assert_int_equal(d.f.n, 1);
	assert_int_equal(d.f.rr[0].type, DNS_TYPE_A);
	assert_memory_equal(d.f.rr[0].addr, "\xcb\x00\x71\x0a", 4); /* 203.0.113.10 */
	/* Names the broker's policy refuses are never asked upstream, in
	 * whatever spelling, whatever the worker decided. */
	id = ask_resolve(f, "sub.evil.test", DNS_TYPE_A, "sub.evil.test");
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_REFUSED);
	assert_int_equal(d.f.why, VR_RULE_DENY);
	assert_int_equal(d.f.n, 0);
	id = ask_resolve(f, "SUB.Evil.TEST", DNS_TYPE_AAAA, "sub.evil.test");
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_REFUSED);
	id = ask_resolve(f, "unlisted.test", DNS_TYPE_A, "unlisted.test");
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_REFUSED);
	assert_int_equal(d.f.why, VR_NO_RULE);
	/* Nor what the listener answers itself (reverse zones, ANY). */
	id = ask_resolve(f, "10.113.0.203.in-addr.arpa", DNS_TYPE_PTR, "10.113.0.203.in-addr.arpa");
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_REFUSED);
	id = ask_resolve(f, "allowed.test", DNS_TYPE_ANY, "allowed.test");
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_REFUSED);
	expect_no_query(f, 300);
	expect_alive(f);
}

/* Malformed questions are refused by their header, the broker stays up. */
static void
test_resolve_forged(void **state)
{
	struct fixture *f = *state;
	struct broker_req_resolve m;
	unsigned char big[sizeof(m) + 64];
	uint32_t id;

	spawn(f, 0, true, 3000);
	/* The normalised name is not the question's. */
	id = next_id++;
	broker_build_resolve(&m, id, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN, "other.test");
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_BAD_NAME, NULL);
	/* Not a name dns_query_parse gives: a space, an empty label, a
	 * trailing dot, a label of 64. */
	static const char *const bad[] = {"a b.test", "a..test", "allowed.test.",
	                                  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.test",
	                                  ""};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		id = next_id++;
		broker_build_resolve(&m, id, bad[i], DNS_TYPE_A, DNS_CLASS_IN, bad[i]);
		send_raw(f, &m, sizeof(m));
		expect_status(f, id, BROKER_E_BAD_NAME, NULL);
	}
	/* Padding, bytes after a NUL, no NUL. */
	id = next_id++;
	broker_build_resolve(&m, id, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN, "allowed.test");
	m.pad = 1;
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "padding");
	m.pad = 0;
	m.h.id = id = next_id++;
	m.qname[sizeof(m.qname) - 1] = 'x';
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "padding");
	broker_build_resolve(&m, id = next_id++, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN,
	                     "allowed.test");
	memset(m.name, 'a', sizeof(m.name));
	send_raw(f, &m, sizeof(m));
	expect_status(f, id, BROKER_E_MALFORMED, "unterminated");
	/* Short, and oversized (a longer length as well). */
	broker_build_resolve(&m, id = next_id++, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN,
	                     "allowed.test");
	send_raw(f, &m, sizeof(m) - 1);
	expect_status(f, id, BROKER_E_MALFORMED, "length");
	memset(big, 0, sizeof(big));
	m.h.id = id = next_id++;
	memcpy(big, &m, sizeof(m));
	send_raw(f, big, sizeof(big));
	expect_status(f, id, BROKER_E_MALFORMED, "length");
	((struct broker_hdr *)big)->len = sizeof(big);
	((struct broker_hdr *)big)->id = id = next_id++;
	send_raw(f, big, sizeof(big));
	expect_status(f, id, BROKER_E_MALFORMED, NULL);
	expect_no_query(f, 300);
	expect_alive(f);
}

/* A flood of questions: bounded by the table, refused at once past it;
 * the held ones end at the resolver's timeout; the broker stays up. */
static void
test_resolve_flood(void **state)
{
	struct fixture *f = *state;
	enum { INFLIGHT = 4, FLOOD = 400 };
	struct broker_reply r;
	struct broker_dns_result d;
	unsigned busy = 0, timeouts = 0;

	spawn(f, INFLIGHT, true, 3000);
	for (int i = 0; i < INFLIGHT; i++) {
		char name[32];

		/* Four names: four questions upstream, none shared. */
		snprintf(name, sizeof(name), "x%d.evil.test", i);
		(void)ask_resolve(f, name, DNS_TYPE_A, name);
	}
	for (int i = 0; i <= FLOOD; i++) {
		int k;

		if (i < FLOOD) {
			struct broker_req_resolve m;

			broker_build_resolve(&m, next_id++, "allowed.test", DNS_TYPE_A, DNS_CLASS_IN,
			                     "allowed.test");
			while (send(f->fd, &m, sizeof(m), MSG_NOSIGNAL | MSG_DONTWAIT) !=
			       (ssize_t)sizeof(m)) {
				assert_int_equal(errno, EAGAIN);
				k = recv_any(f, &r, &d, 1000);
				assert_int_equal(k, 0);
				assert_int_equal(r.status, BROKER_E_BUSY);
				busy++;
			}
		}
		while (busy + timeouts < FLOOD + INFLIGHT &&
		       (k = recv_any(f, &r, &d, i < FLOOD ? 0 : 8000)) >= 0) {
			if (k == 0 && r.status == BROKER_E_BUSY)
				busy++;
			else if (k == 1 && d.status == BROKER_DNS_TIMEOUT)
				timeouts++;
			else
				fail_msg("flood: an answer %d", k == 1 ? (int)d.status : (int)r.status);
		}
	}
	assert_int_equal(busy, FLOOD);
	assert_int_equal(timeouts, INFLIGHT);
	expect_alive(f);
}

/* Which name a transparent connection may go to by its original
 * destination is the broker's own record of what it told the sandbox. */
static void
test_told(void **state)
{
	struct fixture *f = *state;
	struct broker_dns_result d;
	uint32_t id;

	spawn(f, 0, true, 3000);
	/* The sandbox is told PEER_ADDR for allowed.test (TTL 0: no answer
	 * cache keeps it; what was told is kept DNS_CACHE_MIN_TTL). */
	id = ask_resolve(f, "allowed.test", DNS_TYPE_A, "allowed.test");
	assert_int_equal(serve_query(f, PEER_ADDR, 0, 2000), DNS_TYPE_A);
	dns_reply_to(f, id, &d, 3000);
	assert_int_equal(d.status, BROKER_DNS_ANSWER);
	assert_int_equal(d.f.n, 1);
	/* The name rotates: the broker's own lookup gets another address.
	 * The connection to what it told goes through... */
	id = ask_name(f, "allowed.test", LISTEN_PORT, PEER_ADDR);
	serve_lookup(f, "203.0.113.11");
	expect_connected(f, id);
	/* ... and one to an address it never told is refused. */
	id = ask_name(f, "allowed.test", LISTEN_PORT, "203.0.113.12");
	serve_lookup(f, "203.0.113.11");
	expect_status(f, id, BROKER_E_NOT_ORIG, "original destination");
	/* Nor does it open another name at the told address. */
	id = ask_name(f, "own.test", LISTEN_PORT, PEER_ADDR);
	serve_lookup(f, "203.0.113.11");
	expect_status(f, id, BROKER_E_NOT_ORIG, "original destination");
}

/* ---- the broker's confinement ---- */

static int
selftest(struct fixture *f, enum broker_selftest_op op)
{
	struct broker_req_selftest m = {.h = {.type = BROKER_MSG_SELFTEST, .len = sizeof(m)}};
	struct broker_reply r;
	int fd;

	m.h.id = next_id++;
	m.op = op;
	send_raw(f, &m, sizeof(m));
	fdless_ok = true;
	fd = reply_to(f, m.h.id, &r, 3000);
	fdless_ok = false;
	assert_int_equal(fd, -1);
	assert_int_equal(r.status, BROKER_OK);
	return r.err;
}

/* A field of /proc/PID/status, as the kernel sees the broker. */
static void
expect_status_line(pid_t pid, const char *key, const char *want)
{
	char path[64], line[256];
	bool seen = false;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fp = fopen(path, "re");
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp) != NULL) {
		char *v = line + strlen(key);

		if (strncmp(line, key, strlen(key)) != 0)
			continue;
		v += strspn(v, " \t");
		v[strcspn(v, "\n")] = '\0';
		if (strcmp(v, want) != 0)
			fail_msg("broker %s %s, expected %s", key, v, want);
		seen = true;
	}
	fclose(fp);
	assert_true(seen);
}

static void
test_seccomp(void **state)
{
	struct fixture *f = *state;
	int abi = confine_landlock_abi();

	spawn(f, 0, false, 3000);
	/* Not in the allowlist: ENOSYS, the filter's default. */
	assert_int_equal(selftest(f, BROKER_SELFTEST_OPEN), ENOSYS);
	assert_int_equal(selftest(f, BROKER_SELFTEST_EXECVE), ENOSYS);
	assert_int_equal(selftest(f, BROKER_SELFTEST_UNIX), ENOSYS);
	assert_int_equal(selftest(f, BROKER_SELFTEST_BIND), ENOSYS);
	/* socket() for TCP and UDP only. */
	assert_int_equal(selftest(f, BROKER_SELFTEST_RAW), ENOSYS);
	/* Forked from root, it keeps no capability, and cannot regain one. */
	expect_status_line(f->pid, "CapEff:", "0000000000000000");
	expect_status_line(f->pid, "CapPrm:", "0000000000000000");
	expect_status_line(f->pid, "CapBnd:", "0000000000000000");
	expect_status_line(f->pid, "NoNewPrivs:", "1");
	expect_status_line(f->pid, "Seccomp:", "2");
	/* Landlock applied at the kernel's ABI (0 when it has none). */
	fprintf(stderr, "# Landlock ABI here: %d\n", abi);
	assert_int_equal(selftest(f, BROKER_SELFTEST_LANDLOCK), abi);
	expect_alive(f);
}

/* Another architecture's ABI kills the broker. */
static void
expect_killed(struct fixture *f, enum broker_selftest_op op)
{
	struct broker_req_selftest m = {.h = {.type = BROKER_MSG_SELFTEST, .len = sizeof(m)}};
	int status;

	m.h.id = next_id++;
	m.op = op;
	send_raw(f, &m, sizeof(m));
	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSYS)
		fail_msg("op %d: broker status %#x, expected killed by SIGSYS", op, status);
	close(f->fd);
	f->fd = -1;
}

static void
test_other_abis_killed(void **state)
{
	struct fixture *f = *state;

	spawn(f, 0, false, 3000);
	expect_killed(f, BROKER_SELFTEST_X32);
	spawn(f, 0, false, 3000);
	expect_killed(f, BROKER_SELFTEST_I386);
}

/* ---- MINT: leaf certificates from the confined broker ---- */

static uint32_t
ask_mint(struct fixture *f, const char *name, uint16_t port)
{
	struct broker_req_mint m;
	uint32_t id = next_id++;

	assert_int_equal(broker_build_mint(&m, id, name, port), 0);
	send_raw(f, &m, sizeof(m));
	return id;
}

/* The LEAF for id: a certificate for name, signed by ca, no descriptor. */
static void
expect_leaf(struct fixture *f, uint32_t id, struct tlsca *ca, const char *name)
{
	_Alignas(8) unsigned char buf[sizeof(struct broker_leaf) + 1];
	struct broker_leaf l;
	struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
	const unsigned char *p;
	X509 *x;
	ssize_t n;

	assert_int_equal(poll(&pfd, 1, 5000), 1);
	n = recv(f->fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n == (ssize_t)sizeof(struct broker_reply)) {
		struct broker_reply r;

		assert_int_equal(broker_parse_reply(buf, (size_t)n, &r), 0);
		fail_msg("MINT %s: refused: %s (%s)", name, broker_status_name(r.status), r.reason);
	}
	assert_int_equal(n, sizeof(struct broker_leaf));
	assert_int_equal(broker_parse_leaf(buf, (size_t)n, &l), 0);
	assert_int_equal(l.h.id, id);
	p = l.der;
	x = d2i_X509(NULL, &p, l.len);
	assert_non_null(x);
	assert_ptr_equal(p, l.der + l.len);
	assert_int_equal(X509_verify(x, X509_get0_pubkey(tlsca_cert(ca))), 1);
	assert_int_equal(X509_check_host(x, name, 0, 0, NULL), 1);
	/* The leaf's key is the task's leaf key, never the CA's. */
	assert_int_equal(EVP_PKEY_eq(X509_get0_pubkey(x), tlsca_leaf_key(ca)), 1);
	assert_int_not_equal(EVP_PKEY_eq(X509_get0_pubkey(x), X509_get0_pubkey(tlsca_cert(ca))),
	                     1);
	X509_free(x);
}

static void
test_mint(void **state)
{
	struct fixture *f = *state;
	struct tlsca_config cc = {.label = "broker test", .mint_limit = 2};
	char err[256];
	struct tlsca *ca = tlsca_new(&cc, err, sizeof(err));

	if (ca == NULL)
		fail_msg("tlsca_new: %s", err);
	/* Without a CA every MINT is refused. */
	spawn(f, 0, false, 3000);
	expect_status(f, ask_mint(f, "inspect.test", 443), BROKER_E_NOT_INSPECTED, "no inspecting");
	close(f->fd);
	assert_int_equal(waitpid(f->pid, NULL, 0), f->pid);

	spawn_ca = ca;
	spawn(f, 0, false, 3000);
	spawn_ca = NULL;
	expect_leaf(f, ask_mint(f, "inspect.test", 443), ca, "inspect.test");
	/* Normalised, and from the cache: not counted. */
	expect_leaf(f, ask_mint(f, "Inspect.Test.", 443), ca, "inspect.test");
	/* The broker decides again: another port, a name no inspecting rule
	 * matches, a denied name, a wildcard's apex. */
	expect_status(f, ask_mint(f, "inspect.test", 80), BROKER_E_NOT_INSPECTED, NULL);
	expect_status(f, ask_mint(f, "allowed.test", 8080), BROKER_E_NOT_INSPECTED, NULL);
	expect_status(f, ask_mint(f, "sub.evil.test", 8080), BROKER_E_NOT_INSPECTED, NULL);
	expect_status(f, ask_mint(f, "mint.test", 443), BROKER_E_NOT_INSPECTED, NULL);
	expect_status(f, ask_mint(f, "*.mint.test", 443), BROKER_E_BAD_NAME, NULL);
	expect_status(f, ask_mint(f, "203.0.113.10", 443), BROKER_E_BAD_NAME, NULL);
	/* The limit (2): one more name, then refusals, and the broker lives. */
	expect_leaf(f, ask_mint(f, "a.mint.test", 443), ca, "a.mint.test");
	for (int i = 0; i < 20; i++) {
		char name[64];

		snprintf(name, sizeof(name), "n%d.mint.test", i);
		expect_status(f, ask_mint(f, name, 443), BROKER_E_MINT_LIMIT, "limit");
	}
	expect_leaf(f, ask_mint(f, "a.mint.test", 443), ca, "a.mint.test");
	expect_alive(f);
	tlsca_free(ca);
}

/* ---- the worker's client ---- */

struct answer {
	int n;
	struct broker_reply r;
	int fd;
};

static void
on_reply(const struct broker_reply *r, int fd, void *arg)
{
	struct answer *a = arg;

	a->n++;
	a->r = *r;
	a->fd = fd;
}

static void
run_until(struct event_base *base, const int *n, int want)
{
	for (int i = 0; i < 500 && *n < want; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(10000);
	assert_int_equal(*n, want);
}

struct leaf_answer {
	int n;
	bool got_leaf;
	struct broker_leaf leaf;
	struct broker_reply r;
};

static void
on_leaf(const struct broker_leaf *leaf, const struct broker_reply *r, void *arg)
{
	struct leaf_answer *a = arg;

	a->n++;
	a->got_leaf = leaf != NULL;
	if (leaf != NULL)
		a->leaf = *leaf;
	else
		a->r = *r;
}

/* The worker's side of MINT: a leaf, the broker's refusals, cancelled
 * and gone. */
static void
test_client_mint(void **state)
{
	struct fixture *f = *state;
	struct event_base *base = event_base_new();
	struct tlsca_config cc = {.label = "client test", .mint_limit = 1};
	struct leaf_answer ok = {0}, no = {0}, limit = {0}, cancelled = {0}, gone = {0};
	struct broker_client *c;
	char err[256];
	struct tlsca *ca = tlsca_new(&cc, err, sizeof(err));
	const unsigned char *p;
	uint32_t id;
	X509 *x;
	int status;

	assert_non_null(ca);
	spawn_ca = ca;
	spawn(f, 4, true, 3000);
	spawn_ca = NULL;
	c = broker_client_new(base, f->fd, 4);
	assert_non_null(c);
	f->fd = -1; /* the client owns it */

	assert_int_equal(broker_client_mint(c, "inspect.test", 443, on_leaf, &ok, &id), 0);
	assert_int_equal(broker_client_mint(c, "allowed.test", 8080, on_leaf, &no, &id), 0);
	run_until(base, &no.n, 1);
	run_until(base, &ok.n, 1);
	assert_true(ok.got_leaf);
	p = ok.leaf.der;
	x = d2i_X509(NULL, &p, ok.leaf.len);
	assert_non_null(x);
	assert_int_equal(X509_check_host(x, "inspect.test", 0, 0, NULL), 1);
	assert_int_equal(X509_verify(x, X509_get0_pubkey(tlsca_cert(ca))), 1);
	X509_free(x);
	assert_false(no.got_leaf);
	assert_int_equal(no.r.status, BROKER_E_NOT_INSPECTED);
	/* The limit (1) is spent. */
	assert_int_equal(broker_client_mint(c, "a.mint.test", 443, on_leaf, &limit, &id), 0);
	run_until(base, &limit.n, 1);
	assert_false(limit.got_leaf);
	assert_int_equal(limit.r.status, BROKER_E_MINT_LIMIT);
	/* Cancelled: never called; its slot comes back. */
	assert_int_equal(broker_client_mint(c, "inspect.test", 443, on_leaf, &cancelled, &id), 0);
	broker_client_cancel(c, id);
	for (int i = 0; i < 50 && broker_client_inflight(c) > 0; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(10000);
	assert_int_equal(broker_client_inflight(c), 0);
	assert_int_equal(cancelled.n, 0);
	assert_int_equal(broker_client_dropped(c), 0);
	/* Gone: a MINT in flight is answered GONE. */
	kill(f->pid, SIGKILL);
	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	assert_int_equal(broker_client_mint(c, "inspect.test", 443, on_leaf, &gone, &id) == 0 ||
	                         errno == EPIPE,
	                 1);
	for (int i = 0; i < 100 && gone.n == 0 && broker_client_inflight(c) > 0; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(10000);
	if (gone.n > 0) {
		assert_false(gone.got_leaf);
		assert_int_equal(gone.r.status, BROKER_E_GONE);
	}
	assert_int_equal(broker_client_inflight(c), 0);
	broker_client_free(c);
	event_base_free(base);
	tlsca_free(ca);
}

static void
test_client(void **state)
{
	struct fixture *f = *state;
	struct event_base *base = event_base_new();
	struct answer ok = {0}, denied = {0}, gone = {0}, cancelled = {0};
	struct broker_client *c;
	struct sockaddr_storage ss;
	uint32_t id;
	int status, afd;

	spawn(f, 4, true, 3000);
	c = broker_client_new(base, f->fd, 4);
	assert_non_null(c);
	f->fd = -1; /* the client owns it */
	sockaddr_set(&ss, AF_INET, PEER_ADDR, LISTEN_PORT);
	assert_int_equal(broker_client_connect_addr(c, (struct sockaddr *)&ss, LISTEN_PORT, NULL,
	                                            on_reply, &ok, &id),
	                 0);
	assert_int_equal(broker_client_connect_name(c, "sub.evil.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &denied, &id),
	                 0);
	run_until(base, &ok.n, 1);
	run_until(base, &denied.n, 1);
	assert_int_equal(ok.r.status, BROKER_OK);
	assert_true(ok.fd >= 0);
	afd = accept(f->lfd, NULL, NULL);
	assert_true(afd >= 0);
	close(afd);
	close(ok.fd);
	assert_int_equal(denied.r.status, BROKER_E_DENIED);
	assert_int_equal(denied.fd, -1);
	/* Two held by the silent nameserver; one cancelled by its
	 * connection. Then the broker dies: the other fails closed. */
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &cancelled, &id),
	                 0);
	broker_client_cancel(c, id);
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &gone, &id),
	                 0);
	/* Bounded on this side too. */
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &gone, &id),
	                 0);
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &gone, &id),
	                 0);
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &gone, &id),
	                 -1);
	assert_int_equal(errno, EBUSY);
	kill(f->pid, SIGKILL);
	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	run_until(base, &gone.n, 3);
	assert_int_equal(gone.r.status, BROKER_E_GONE);
	assert_int_equal(cancelled.n, 0);
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &gone, &id),
	                 -1);
	assert_int_equal(errno, EPIPE);
	broker_client_free(c);
	event_base_free(base);
}

struct dns_answer {
	int n;
	enum resolver_status status;
	enum verdict_reason fail_reason;
	size_t n_rr;
	char why[128];
};

static void
on_dns(const struct resolver_result *res, void *arg)
{
	struct dns_answer *a = arg;

	a->n++;
	a->status = res->status;
	a->fail_reason = res->fail_reason;
	a->n_rr = res->f != NULL ? res->f->n : 0;
	str_copy(a->why, res->why != NULL ? res->why : "", sizeof(a->why));
}

/* The listener's questions through the client: answered, parked,
 * cancelled, bounded to half the table, failed closed when the broker
 * goes. */
static void
test_client_dns(void **state)
{
	struct fixture *f = *state;
	struct event_base *base = event_base_new();
	struct dns_answer ok = {0}, refused = {0}, gone = {0}, cancelled = {0}, late = {0};
	struct dns_asker asker;
	struct resolver_result now;
	struct broker_client *c;
	struct dns_query q;
	uint64_t h;
	int status;

	spawn(f, 4, true, 3000);
	c = broker_client_new(base, f->fd, 4);
	assert_non_null(c);
	f->fd = -1;
	broker_client_asker(c, &asker);
	memset(&q, 0, sizeof(q));
	str_copy(q.qname, "allowed.test", sizeof(q.qname));
	q.qtype = DNS_TYPE_A;
	q.qclass = DNS_CLASS_IN;
	assert_int_equal(asker.ask(asker.arg, &q, "allowed.test", on_dns, &ok, &now, &h), 0);
	assert_int_equal(serve_query(f, PEER_ADDR, 60, 2000), DNS_TYPE_A);
	run_until(base, &ok.n, 1);
	assert_int_equal(ok.status, RESOLVER_ANSWER);
	assert_int_equal(ok.n_rr, 1);
	str_copy(q.qname, "sub.evil.test", sizeof(q.qname));
	assert_int_equal(asker.ask(asker.arg, &q, "sub.evil.test", on_dns, &refused, &now, &h), 0);
	run_until(base, &refused.n, 1);
	assert_int_equal(refused.status, RESOLVER_FAIL);
	assert_int_equal(refused.fail_reason, VR_RULE_DENY);
	/* Two held by the silent nameserver (one cancelled): half of the
	 * four; a third is answered at once. */
	str_copy(q.qname, "a.evil.test", sizeof(q.qname));
	assert_int_equal(asker.ask(asker.arg, &q, "a.evil.test", on_dns, &cancelled, &now, &h), 0);
	asker.cancel(asker.arg, h);
	str_copy(q.qname, "b.evil.test", sizeof(q.qname));
	assert_int_equal(asker.ask(asker.arg, &q, "b.evil.test", on_dns, &gone, &now, &h), 0);
	assert_int_equal(asker.ask(asker.arg, &q, "b.evil.test", on_dns, &late, &now, &h), 1);
	assert_int_equal(now.status, RESOLVER_FAIL);
	assert_int_equal(now.fail_reason, VR_RESOURCE);
	/* The connects keep their half. */
	assert_int_equal(broker_client_inflight(c), 2);
	kill(f->pid, SIGKILL);
	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	run_until(base, &gone.n, 1);
	assert_int_equal(gone.status, RESOLVER_FAIL);
	assert_int_equal(gone.fail_reason, VR_BROKER);
	assert_int_equal(cancelled.n, 0);
	assert_int_equal(late.n, 0);
	assert_int_equal(asker.ask(asker.arg, &q, "b.evil.test", on_dns, &late, &now, &h), 1);
	assert_int_equal(now.fail_reason, VR_BROKER);
	assert_int_equal(broker_client_inflight(c), 0);
	broker_client_free(c);
	event_base_free(base);
}

static void
on_room(void *arg)
{
	(*(int *)arg)++;
}

/* A DNS answer frees a slot a connect refused EBUSY may take, and the
 * client says so (broker_client_set_room): a proxy whose requests wait
 * while only questions are out is woken by their answers. */
static void
test_client_room(void **state)
{
	struct fixture *f = *state;
	struct event_base *base = event_base_new();
	struct dns_answer ans = {0};
	struct answer held = {0}, later = {0};
	struct dns_asker asker;
	struct resolver_result now;
	struct broker_client *c;
	struct sockaddr_storage ss;
	struct dns_query q;
	uint64_t h;
	uint32_t id;
	int rooms = 0, status;

	spawn(f, 4, true, 3000);
	c = broker_client_new(base, f->fd, 2); /* one question, one connect */
	assert_non_null(c);
	f->fd = -1;
	broker_client_set_room(c, on_room, &rooms);
	broker_client_asker(c, &asker);
	memset(&q, 0, sizeof(q));
	str_copy(q.qname, "allowed.test", sizeof(q.qname));
	q.qtype = DNS_TYPE_A;
	q.qclass = DNS_CLASS_IN;
	assert_int_equal(asker.ask(asker.arg, &q, "allowed.test", on_dns, &ans, &now, &h), 0);
	/* held: its name's AAAA is never answered */
	assert_int_equal(broker_client_connect_name(c, "allowed.test", LISTEN_PORT, NULL, 0, NULL,
	                                            on_reply, &held, &id),
	                 0);
	sockaddr_set(&ss, AF_INET, PEER_ADDR, LISTEN_PORT);
	assert_int_equal(broker_client_connect_addr(c, (struct sockaddr *)&ss, LISTEN_PORT, NULL,
	                                            on_reply, &later, &id),
	                 -1);
	assert_int_equal(errno, EBUSY);
	/* The question's A answer comes; only the question's slot frees. */
	for (int i = 0; i < 4 && ans.n == 0; i++) {
		if (serve_query(f, PEER_ADDR, 60, 2000) == DNS_TYPE_A)
			run_until(base, &ans.n, 1);
	}
	assert_int_equal(ans.n, 1);
	assert_int_equal(held.n, 0);
	assert_true(rooms >= 1);
	assert_int_equal(broker_client_connect_addr(c, (struct sockaddr *)&ss, LISTEN_PORT, NULL,
	                                            on_reply, &later, &id),
	                 0);
	run_until(base, &later.n, 1);
	assert_int_equal(later.r.status, BROKER_OK);
	close(later.fd);
	kill(f->pid, SIGKILL);
	assert_int_equal(waitpid(f->pid, &status, 0), f->pid);
	run_until(base, &held.n, 1);
	broker_client_free(c);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_allowed_name_connects, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_denied_names, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_guarded_addresses, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_audit, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_forged, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_stray_fds, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_flood, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_resolve, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_resolve_forged, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_resolve_flood, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_told, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_seccomp, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_other_abis_killed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_mint, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_client, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_client_mint, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_client_dns, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_client_room, setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	if (getenv("BROKER_TEST_DEBUG") != NULL)
		log_set_level(LOG_LEVEL_DEBUG);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
