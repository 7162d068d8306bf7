/* End-to-end test of nft/ against the real kernel, in a user + network
 * namespace this program creates (so it runs rootless too): loopback
 * set-up, the ruleset, both self-tests, transparent redirection with
 * SO_ORIGINAL_DST for IPv4 and IPv6, DNS redirection, instant rejection of
 * UDP and ICMP, and NFLOG records of what was blocked.
 *
 * Every packet stays inside the new namespace: it has only lo and no route
 * out. Destinations are documentation addresses.
 *
 *   nft_e2e            run the checks (exit 0, 1, or 77 = cannot run here)
 *   nft_e2e --bench N  also time nft_net_setup + nft_ruleset_apply in N
 *                      fresh namespaces and print the median */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netlink.h>
#include <linux/netfilter_ipv6/ip6_tables.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>

#include <event2/event.h>

#include "common/netconst.h"
#include "common/util.h"
#include "elog/elog.h"
#include "nft/nflog.h"
#include "nft/nft.h"

#define SKIP    77
#define WAIT_MS 2000

static int failures;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (cond) {                                                                        \
			printf("ok   ");                                                           \
		} else {                                                                           \
			printf("FAIL ");                                                           \
			failures++;                                                                \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
	} while (0)

static void
die(const char *what)
{
	fprintf(stderr, "nft_e2e: %s: %s\n", what, strerror(errno));
	exit(1);
}

static int
cannot_run(const char *why)
{
	const char *must = getenv("AIRLOCK_MUST_WORK");

	fprintf(stderr, "nft_e2e: cannot run: %s\n", why);
	return must != NULL && strcmp(must, "1") == 0 ? 1 : SKIP;
}

static int
write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* A new user namespace (uid and gid mapped to 0) with a new network
 * namespace owned by it: full capabilities over that network, none outside,
 * for root and for an ordinary user alike. */
static int
enter_namespaces(char *err, size_t errlen)
{
	char map[64];
	uid_t uid = getuid();
	gid_t gid = getgid();

	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) < 0) {
		snprintf(err, errlen,
		         "unshare(CLONE_NEWUSER|CLONE_NEWNET): %s "
		         "(user namespaces disabled? kernel.unprivileged_userns_clone, "
		         "user.max_user_namespaces)",
		         strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) < 0) {
		snprintf(err, errlen, "writing uid_map: %s", strerror(errno));
		return -1;
	}
	if (write_file("/proc/self/setgroups", "deny\n") < 0 && errno != ENOENT) {
		snprintf(err, errlen, "writing setgroups: %s", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
	if (write_file("/proc/self/gid_map", map) < 0) {
		snprintf(err, errlen, "writing gid_map: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* --- sockets -------------------------------------------------------------- */

static int
listener(int family, int type, const char *addr, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int one = 1;
	int fd = socket(family, type | SOCK_CLOEXEC, 0);

	if (fd < 0)
		die("socket");
	sl = sockaddr_set(&ss, family, addr, port);
	if (family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, sl) < 0)
		die("bind");
	if (type == SOCK_STREAM && listen(fd, 8) < 0)
		die("listen");
	return fd;
}

static bool
readable(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	return poll(&pfd, 1, ms) == 1 && (pfd.revents & POLLIN) != 0;
}

/* Connect to addr:443 through the transparent redirect and check the
 * listener sees the original destination. */
static void
check_tproxy(int family, int lfd, const char *addr)
{
	struct sockaddr_storage dst, orig;
	socklen_t sl = sockaddr_set(&dst, family, addr, 443);
	socklen_t ol = sizeof(orig);
	char text[INET6_ADDRSTRLEN] = "";
	char buf[8];
	struct timeval tv = {.tv_sec = WAIT_MS / 1000, .tv_usec = 0};
	int cfd, afd, port = -1;
	int r;

	cfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (cfd < 0)
		die("socket");
	/* connect() honours the send timeout: a broken ruleset fails the
	 * test in seconds instead of waiting out SYN retries. */
	setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	r = connect(cfd, (struct sockaddr *)&dst, sl);
	CHECK(r == 0, "tcp connect to %s:443 is redirected and completes (%s)", addr,
	      r == 0 ? "connected" : strerror(errno));
	if (r < 0 || !readable(lfd, WAIT_MS)) {
		CHECK(false, "listener on port %u accepts the connection to %s",
		      AIRLOCK_TPROXY_PORT, addr);
		close(cfd);
		return;
	}
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(afd >= 0, "listener on port %u accepts the connection to %s", AIRLOCK_TPROXY_PORT,
	      addr);
	if (afd < 0) {
		close(cfd);
		return;
	}
	memset(&orig, 0, sizeof(orig));
	if (family == AF_INET) {
		r = getsockopt(afd, SOL_IP, SO_ORIGINAL_DST, &orig, &ol);
		inet_ntop(AF_INET, &((struct sockaddr_in *)&orig)->sin_addr, text, sizeof(text));
		port = ntohs(((struct sockaddr_in *)&orig)->sin_port);
	} else {
		r = getsockopt(afd, SOL_IPV6, IP6T_SO_ORIGINAL_DST, &orig, &ol);
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&orig)->sin6_addr, text, sizeof(text));
		port = ntohs(((struct sockaddr_in6 *)&orig)->sin6_port);
	}
	CHECK(r == 0 && strcmp(text, addr) == 0 && port == 443,
	      "%s gives the original destination %s:443 (got %s:%d%s%s)",
	      family == AF_INET ? "SO_ORIGINAL_DST" : "IP6T_SO_ORIGINAL_DST", addr, text, port,
	      r < 0 ? ", " : "", r < 0 ? strerror(errno) : "");
	r = (int)write(cfd, "hi", 2);
	CHECK(r == 2 && readable(afd, WAIT_MS) && read(afd, buf, sizeof(buf)) == 2,
	      "bytes flow from the client to the listener (%s)", addr);
	close(afd);
	close(cfd);
}

/* --- NFLOG ---------------------------------------------------------------- */

struct want {
	const char *dst;
	int dport;
	const char *proto;
	bool found;
};

static void
match_packet(const struct nflog_packet *pkt, void *arg)
{
	struct want *w = arg;

	printf("     nflog: %s %s port %d\n", pkt->proto, pkt->dst, pkt->dport);
	if (strcmp(pkt->dst, w->dst) == 0 && pkt->dport == w->dport &&
	    strcmp(pkt->proto, w->proto) == 0)
		w->found = true;
}

static void
check_nflog(int nfd, const char *dst, int dport, const char *proto)
{
	static uint64_t buf[65536 / sizeof(uint64_t)];
	struct want w = {.dst = dst, .dport = dport, .proto = proto};
	double deadline = now_us() + WAIT_MS * 1000.0;
	ssize_t n;
	int bad = 0;

	if (nfd < 0) {
		CHECK(false, "nflog reports %s %s port %d (no NFLOG socket)", proto, dst, dport);
		return;
	}
	while (!w.found && now_us() < deadline) {
		if (!readable(nfd, 100))
			continue;
		n = recv(nfd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0)
			continue;
		if (nflog_parse(buf, (size_t)n, match_packet, &w) < 0)
			bad++;
	}
	CHECK(w.found && bad == 0, "nflog reports %s %s port %d%s", proto, dst, dport,
	      bad != 0 ? " (and a datagram did not parse)" : "");
}

/* UDP to a blocked destination: the send fails at once, and NFLOG has it. */
static void
check_udp_blocked(int family, const char *addr, int nfd)
{
	struct sockaddr_storage dst;
	socklen_t sl = sockaddr_set(&dst, family, addr, 9999);
	double t0;
	int fd, r, e;

	fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	t0 = now_us();
	r = (int)sendto(fd, "x", 1, 0, (struct sockaddr *)&dst, sl);
	e = errno;
	CHECK(r < 0 && (e == EPERM || e == ECONNREFUSED || e == EACCES),
	      "udp to %s:9999 fails at once: %s after %.0f us", addr, r < 0 ? strerror(e) : "sent",
	      now_us() - t0);
	close(fd);
	check_nflog(nfd, addr, 9999, "udp");
}

/* UDP to anything:53 lands on the DNS listener, and its answer goes back
 * to the client as if from the address it asked. */
static void
check_dns_redirect(int dns_fd)
{
	struct sockaddr_storage dst, from;
	socklen_t sl = sockaddr_set(&dst, AF_INET, "198.51.100.1", 53);
	socklen_t fl = sizeof(from);
	char buf[16];
	ssize_t n;
	int fd;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	if (connect(fd, (struct sockaddr *)&dst, sl) < 0 || send(fd, "q", 1, 0) != 1) {
		CHECK(false, "udp to 198.51.100.1:53 is sent: %s", strerror(errno));
		close(fd);
		return;
	}
	n = readable(dns_fd, WAIT_MS)
	            ? recvfrom(dns_fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fl)
	            : -1;
	CHECK(n == 1 && buf[0] == 'q',
	      "udp to 198.51.100.1:53 reaches the listener on 127.0.0.1:%u", AIRLOCK_DNS_PORT);
	if (n == 1) {
		(void)sendto(dns_fd, "a", 1, 0, (struct sockaddr *)&from, fl);
		n = readable(fd, WAIT_MS) ? recv(fd, buf, sizeof(buf), 0) : -1;
		CHECK(n == 1 && buf[0] == 'a', "the listener's answer reaches the client");
	}
	close(fd);
}

/* A raw ICMP echo (we hold CAP_NET_RAW in this namespace) to a
 * documentation address is refused at once. */
static void
check_icmp_blocked(int nfd)
{
	struct sockaddr_storage dst;
	socklen_t sl = sockaddr_set(&dst, AF_INET, "192.0.2.1", 0);
	struct icmphdr icmp;
	int fd, r, e;

	fd = socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
	if (fd < 0) {
		CHECK(false, "raw ICMP socket: %s", strerror(errno));
		return;
	}
	memset(&icmp, 0, sizeof(icmp));
	icmp.type = ICMP_ECHO;
	icmp.un.echo.id = htons(1);
	icmp.checksum = htons((uint16_t) ~((ICMP_ECHO << 8) + 1));
	r = (int)sendto(fd, &icmp, sizeof(icmp), 0, (struct sockaddr *)&dst, sl);
	e = errno;
	CHECK(r < 0 && (e == EPERM || e == EACCES || e == EHOSTUNREACH),
	      "icmp echo to 192.0.2.1 fails at once: %s", r < 0 ? strerror(e) : "sent");
	close(fd);
	check_nflog(nfd, "192.0.2.1", -1, "icmp");
}

/* The supervisor's side for real: nflog_reader on the kernel's socket
 * writes an egress log line for a blocked packet, and one line with the
 * count for a burst to the same destination. */
static void
check_reader(int nfd)
{
	struct sockaddr_storage dst;
	socklen_t sl = sockaddr_set(&dst, AF_INET, "192.0.2.55", 7777);
	struct event_base *base = event_base_new();
	struct nflog_reader *rd = NULL;
	struct elog *log = NULL;
	char out[2048] = "";
	int pfd[2] = {-1, -1};
	ssize_t n = -1;
	int fd;

	if (nfd < 0 || base == NULL || pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0) {
		CHECK(false, "nflog_reader set-up");
		goto out;
	}
	log = elog_open_fd(pfd[1]);
	rd = nflog_reader_new(base, fcntl(nfd, F_DUPFD_CLOEXEC, 0), log);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (rd == NULL || fd < 0) {
		CHECK(false, "nflog_reader_new");
		goto out;
	}
	(void)sendto(fd, "x", 1, 0, (struct sockaddr *)&dst, sl);
	close(fd);
	if (readable(nfd, WAIT_MS)) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		n = read(pfd[0], out, sizeof(out) - 1);
	}
	if (n > 0)
		out[n] = '\0';
	CHECK(n > 0 &&
	              strstr(out, "\"kind\":\"packet\",\"ip\":\"192.0.2.55\","
	                          "\"port\":7777,\"verdict\":\"deny\"") != NULL &&
	              strstr(out, "\"proto\":\"udp\"") != NULL,
	      "nflog_reader logs the blocked packet: %.*s", n > 0 ? (int)n - 1 : 0, out);

	/* More packets to the same destination are counted, not written one
	 * by one; freeing the reader writes the count (it reads what is still
	 * queued first). 50 stays well inside a rootless receive buffer. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		CHECK(false, "udp socket: %s", strerror(errno));
		goto out;
	}
	for (int i = 0; i < 50; i++)
		(void)sendto(fd, "x", 1, 0, (struct sockaddr *)&dst, sl);
	close(fd);
	(void)readable(nfd, WAIT_MS);
	event_base_loop(base, EVLOOP_NONBLOCK);
	n = read(pfd[0], out, sizeof(out) - 1);
	CHECK(n < 0 && errno == EAGAIN, "50 more packets to 192.0.2.55:7777 write no line at once");
	nflog_reader_free(rd);
	rd = NULL;
	n = read(pfd[0], out, sizeof(out) - 1);
	if (n > 0)
		out[n] = '\0';
	CHECK(n > 0 && memchr(out, '\n', (size_t)n) == out + n - 1 &&
	              strstr(out, "\"ip\":\"192.0.2.55\",\"port\":7777,\"verdict\":\"deny\","
	                          "\"reason\":\"firewall\"") != NULL &&
	              strstr(out, "\"detail\":\"blocked by the sandbox firewall; 50 more packets "
	                          "since the last line\"") != NULL,
	      "freeing nflog_reader writes one line with their count: %.*s", n > 0 ? (int)n - 1 : 0,
	      out);
out:
	nflog_reader_free(rd);
	if (log != NULL)
		elog_free(log);
	else if (pfd[1] >= 0)
		close(pfd[1]);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (base != NULL)
		event_base_free(base);
}

/* --- timing --------------------------------------------------------------- */

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One fresh namespace per run, so every run does the real first-time work. */
static int
bench(int runs)
{
	double *setup = calloc((size_t)runs, sizeof(double));
	double *total = calloc((size_t)runs, sizeof(double));
	double *net = calloc((size_t)runs, sizeof(double));
	double *apply = calloc((size_t)runs, sizeof(double));
	int i;

	if (setup == NULL || total == NULL || net == NULL || apply == NULL)
		die("calloc");
	for (i = 0; i < runs; i++) {
		int pfd[2];
		pid_t pid;
		double t[4];
		int status;

		if (pipe2(pfd, O_CLOEXEC) < 0)
			die("pipe");
		pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			char err[256];
			struct nft_params p;
			double t0, t1, t2, t3;

			close(pfd[0]);
			nft_params_default(&p);
			t0 = now_us();
			if (enter_namespaces(err, sizeof(err)) < 0)
				_exit(2);
			t1 = now_us();
			if (nft_net_setup(err, sizeof(err)) < 0) {
				fprintf(stderr, "nft_e2e: %s\n", err);
				_exit(3);
			}
			t2 = now_us();
			if (nft_ruleset_apply(&p, err, sizeof(err)) < 0) {
				fprintf(stderr, "nft_e2e: %s\n", err);
				_exit(3);
			}
			t3 = now_us();
			t[0] = t1 - t0;
			t[1] = t3 - t1;
			t[2] = t2 - t1;
			t[3] = t3 - t2;
			_exit(write(pfd[1], t, sizeof(t)) == sizeof(t) ? 0 : 4);
		}
		close(pfd[1]);
		if (read(pfd[0], t, sizeof(t)) != sizeof(t)) {
			close(pfd[0]);
			waitpid(pid, &status, 0);
			fprintf(stderr, "nft_e2e: bench run %d failed\n", i);
			return 1;
		}
		close(pfd[0]);
		waitpid(pid, &status, 0);
		setup[i] = t[1];
		total[i] = t[0] + t[1];
		net[i] = t[2];
		apply[i] = t[3];
	}
	qsort(setup, (size_t)runs, sizeof(double), cmp_double);
	qsort(total, (size_t)runs, sizeof(double), cmp_double);
	qsort(net, (size_t)runs, sizeof(double), cmp_double);
	qsort(apply, (size_t)runs, sizeof(double), cmp_double);
	printf("bench: nft_net_setup + nft_ruleset_apply over %d fresh namespaces: "
	       "median %.0f us (min %.0f, max %.0f); nft_net_setup median %.0f us, "
	       "nft_ruleset_apply median %.0f us; with unshare+uid map: "
	       "median %.0f us\n",
	       runs, setup[runs / 2], setup[0], setup[runs - 1], net[runs / 2], apply[runs / 2],
	       total[runs / 2]);
	free(setup);
	free(total);
	free(net);
	free(apply);
	return 0;
}

/* --- main ----------------------------------------------------------------- */

/* Set-up from outside, as the supervisor does it: a child enters a user
 * and network namespace of its own and hands its nft_socket()s and an
 * nflog_socket() over; we, in the caller's namespaces (root, or the
 * ordinary user who owns the child's user namespace), set up the network,
 * the ruleset and the NFLOG group through them. Then the child checks
 * from inside, with sockets of its own, that all of it is there. Run
 * before main enters its own namespaces. */
static int
send_fds(int sock, const int *fds, size_t n)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte = 'f';
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *c;

	memset(&u, 0, sizeof(u));
	mh.msg_control = u.buf;
	mh.msg_controllen = CMSG_SPACE(n * sizeof(int));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

static int
recv_fds(int sock, int *fds, size_t n)
{
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} u;
	char byte;
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
	                    .msg_controllen = sizeof(u.buf)};
	struct cmsghdr *c;

	if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1 || (c = CMSG_FIRSTHDR(&mh)) == NULL ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(n * sizeof(int)))
		return -1;
	memcpy(fds, CMSG_DATA(c), n * sizeof(int));
	return 0;
}

static void __attribute__((noreturn))
setup_from_outside_child(int sock, const struct nft_params *p)
{
	char err[256], byte;
	int fds[3];

	if (enter_namespaces(err, sizeof(err)) < 0) {
		printf("     %s\n", err);
		_exit(77);
	}
	fds[0] = nft_socket(NETLINK_ROUTE);
	fds[1] = nft_socket(NETLINK_NETFILTER);
	fds[2] = nflog_socket(err, sizeof(err));
	if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || send_fds(sock, fds, 3) < 0) {
		printf("FAIL the child could not make and send its sockets: %s\n",
		       strerror(errno));
		_exit(1);
	}
	CHECK((fcntl(fds[0], F_GETFD) & FD_CLOEXEC) != 0 &&
	              (fcntl(fds[1], F_GETFD) & FD_CLOEXEC) != 0,
	      "nft_socket's sockets are CLOEXEC");
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	if (read(sock, &byte, 1) != 1)
		_exit(1);
	/* The parent is done: what it set up is in our namespace. */
	int r = nft_net_verify(err, sizeof(err));
	CHECK(r == 0, "inside, the network set up from outside verifies%s%s", r ? ": " : "",
	      r ? err : "");
	r = nft_ruleset_verify(p, err, sizeof(err));
	CHECK(r == 0, "inside, the ruleset applied from outside verifies%s%s", r ? ": " : "",
	      r ? err : "");
	r = nflog_open(p->nflog_group, err, sizeof(err));
	CHECK(r < 0 && strstr(err, "binding group") != NULL &&
	              strstr(err, strerror(EPERM)) != NULL,
	      "inside, the NFLOG group bound from outside is taken: %s",
	      r < 0 ? err : "a second socket got it");
	if (r >= 0)
		close(r);
	_exit(failures > 0 ? 1 : 0);
}

static void
check_setup_from_outside(const struct nft_params *p)
{
	char err[256];
	int sv[2], fds[3] = {-1, -1, -1}, st = 0, r, proto = 0;
	socklen_t len = sizeof(proto);
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		die("socketpair");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		setup_from_outside_child(sv[1], p);
	}
	close(sv[1]);
	if (recv_fds(sv[0], fds, 3) < 0) {
		close(sv[0]);
		if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 77) {
			printf("     (set-up from outside skipped: no user namespace)\n");
			return;
		}
		CHECK(0, "the child's sockets arrive");
		return;
	}
	/* The self-tests must be able to fail, here too. */
	r = nft_net_verify_fd(fds[0], err, sizeof(err));
	CHECK(r < 0 && strstr(err, "lo is down") != NULL, "nft_net_verify_fd before set-up fails: %s",
	      r < 0 ? err : "it passed");
	r = nft_net_setup_fd(fds[0], err, sizeof(err));
	CHECK(r == 0, "nft_net_setup_fd from outside%s%s", r ? ": " : "", r ? err : "");
	r = nft_net_verify_fd(fds[0], err, sizeof(err));
	CHECK(r == 0, "nft_net_verify_fd from outside%s%s", r ? ": " : "", r ? err : "");
	r = nft_ruleset_apply_verify_fd(p, fds[1], err, sizeof(err));
	CHECK(r == 0, "nft_ruleset_apply_verify_fd from outside%s%s", r ? ": " : "",
	      r ? err : "");
	CHECK(getsockopt(fds[1], SOL_SOCKET, SO_PROTOCOL, &proto, &len) == 0 &&
	              proto == NETLINK_NETFILTER,
	      "the caller's netfilter netlink socket is still open after it");
	r = nft_ruleset_apply_verify_fd(p, fds[1], err, sizeof(err));
	CHECK(r < 0 && strstr(err, "File exists") != NULL,
	      "a second nft_ruleset_apply_verify_fd fails: %s", r < 0 ? err : "it did not fail");
	r = nflog_bind(fds[2], p->nflog_group, err, sizeof(err));
	CHECK(r == 0, "nflog_bind from outside%s%s", r ? ": " : "", r ? err : "");
	/* The NFLOG socket stays open while the child looks: the group is
	 * held only as long as a socket bound to it is. */
	close(fds[0]);
	close(fds[1]);
	if (write(sv[0], "d", 1) != 1)
		die("write");
	close(sv[0]);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		failures++;
	close(fds[2]);
}

int
main(int argc, char **argv)
{
	struct nft_params p;
	char err[256];
	double t0, t1, t2;
	int tp4, tp6, dns_fd, nfd;
	int runs = 0;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "--bench") == 0)
		runs = (int)strtol(argv[2], NULL, 10);
	if (runs < 0 || runs > 1000)
		runs = 0;

	printf("nft_e2e as uid %u\n", (unsigned)getuid());
	/* Before entering our own namespaces, so each run starts from the
	 * caller's, as the sandbox does. */
	if (runs > 0 && bench(runs) != 0)
		failures++;
	nft_params_default(&p);
	check_setup_from_outside(&p);
	if (enter_namespaces(err, sizeof(err)) < 0)
		return cannot_run(err);

	/* The self-tests must be able to fail. */
	r = nft_ruleset_verify(&p, err, sizeof(err));
	CHECK(r < 0 && strstr(err, "missing") != NULL, "nft_ruleset_verify before apply fails: %s",
	      r < 0 ? err : "it passed");
	r = nft_net_verify(err, sizeof(err));
	CHECK(r < 0, "nft_net_verify before set-up fails: %s", r < 0 ? err : "it passed");
	t0 = now_us();
	r = nft_net_setup(err, sizeof(err));
	CHECK(r == 0, "nft_net_setup%s%s", r ? ": " : "", r ? err : "");
	t1 = now_us();
	if (r == 0) {
		r = nft_ruleset_apply(&p, err, sizeof(err));
		CHECK(r == 0, "nft_ruleset_apply%s%s", r ? ": " : "", r ? err : "");
	}
	t2 = now_us();
	if (r != 0)
		return 1;
	printf("     first run: nft_net_setup %.0f us, nft_ruleset_apply %.0f us\n", t1 - t0,
	       t2 - t1);
	r = nft_net_verify(err, sizeof(err));
	CHECK(r == 0, "nft_net_verify%s%s", r ? ": " : "", r ? err : "");
	r = nft_ruleset_verify(&p, err, sizeof(err));
	CHECK(r == 0, "nft_ruleset_verify%s%s", r ? ": " : "", r ? err : "");
	{
		struct nft_params other = p;

		other.nflog_group = (uint16_t)(p.nflog_group + 1);
		r = nft_ruleset_verify(&other, err, sizeof(err));
		CHECK(r < 0, "nft_ruleset_verify with another NFLOG group fails: %s",
		      r < 0 ? err : "it passed");
	}
	/* Applying again fails and changes nothing (no doubled rules). */
	r = nft_ruleset_apply(&p, err, sizeof(err));
	CHECK(r < 0 && strstr(err, "File exists") != NULL, "a second nft_ruleset_apply fails: %s",
	      r < 0 ? err : "it did not");
	r = nft_ruleset_verify(&p, err, sizeof(err));
	CHECK(r == 0, "the ruleset is unchanged after it%s%s", r ? ": " : "", r ? err : "");

	nfd = nflog_open(p.nflog_group, err, sizeof(err));
	CHECK(nfd >= 0, "nflog_open(group %u)%s%s", p.nflog_group, nfd < 0 ? ": " : "",
	      nfd < 0 ? err : "");
	if (nfd >= 0) {
		char err2[256];
		int again = nflog_open(p.nflog_group, err2, sizeof(err2));

		CHECK(again < 0, "a second nflog_open on the same group fails: %s",
		      again < 0 ? err2 : "it did not");
		if (again >= 0)
			close(again);
	}

	tp4 = listener(AF_INET, SOCK_STREAM, "127.0.0.1", p.tproxy_port);
	tp6 = listener(AF_INET6, SOCK_STREAM, "::1", p.tproxy_port);
	dns_fd = listener(AF_INET, SOCK_DGRAM, "127.0.0.1", p.dns_port);

	check_tproxy(AF_INET, tp4, "203.0.113.7");
	check_tproxy(AF_INET6, tp6, "2001:db8::7");
	check_udp_blocked(AF_INET, "203.0.113.7", nfd);
	check_udp_blocked(AF_INET6, "2001:db8::7", nfd);
	check_dns_redirect(dns_fd);
	check_icmp_blocked(nfd);
	check_reader(nfd);

	close(tp4);
	close(tp6);
	close(dns_fd);
	if (nfd >= 0)
		close(nfd);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
