/* Load generator and helpers for bench/bench_proxy.sh (not a test).
 *
 *   bench-proxy rate  PROXY|direct TARGET CONC COUNT SECONDS
 *       COUNT requests, CONC at a time, each on a new connection: through
 *       PROXY (CONNECT TARGET, then GET / in the tunnel) or direct to
 *       TARGET; prints "rate OK N SECONDS PER_SECOND".
 *   bench-proxy bulk  PROXY|direct TARGET PATH
 *       one GET PATH (through a CONNECT tunnel or direct), body read and
 *       dropped; prints "bulk BYTES SECONDS MiB_PER_S".
 *   bench-proxy idle  PROXY TARGET N SECONDS
 *       N tunnels to an echo TARGET, one byte echoed through each, then
 *       held open; prints "idle-ready N", sleeps SECONDS, exits.
 *   bench-proxy echo  ADDR:PORT
 *       an epoll echo server (the idle tunnels' far end).
 *
 * Every loop is bounded in count and time; addresses are given by the
 * caller (the script uses loopback inside a private namespace). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
parse_addr(const char *s, struct sockaddr_in *sa)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	size_t hl;

	if (colon == NULL || (hl = (size_t)(colon - s)) >= sizeof(host))
		return -1;
	memcpy(host, s, hl);
	host[hl] = '\0';
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)strtoul(colon + 1, NULL, 10));
	return inet_pton(AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}

static void
raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int
dial(const struct sockaddr_in *sa, int nonblock)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
	int one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- rate ---- */

enum { C_CONNECTING, C_TUNNEL_REPLY, C_BODY };

struct client {
	int fd, state;
	size_t got;
	char buf[1024];
};

static const char *g_target;
static int g_direct;
static struct sockaddr_in g_dst;

static void
client_start(int ep, struct client *c)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};

	c->fd = dial(&g_dst, 1);
	c->state = C_CONNECTING;
	c->got = 0;
	if (c->fd >= 0)
		epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

/* Host is the target, as a real client's is: the proxy refuses a tunnel
 * whose request names another host (proxy/bind.c). */
static int
send_get(int fd, const char *host, const char *path)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host);

	return send(fd, req, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Returns 1 when the request completed, -1 on failure, 0 to go on. */
static int
client_step(int ep, struct client *c, uint32_t events)
{
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
	ssize_t n;

	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err != 0 || (events & (EPOLLERR | EPOLLHUP)))
			return -1;
		if (g_direct) {
			if (send_get(c->fd, g_target, "/") != 0)
				return -1;
			c->state = C_BODY;
		} else {
			char req[256];
			int rl = snprintf(req, sizeof(req),
			                  "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", g_target,
			                  g_target);
			if (send(c->fd, req, (size_t)rl, MSG_NOSIGNAL) != rl)
				return -1;
			c->state = C_TUNNEL_REPLY;
		}
		epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
		return 0;
	}
	for (;;) {
		if (c->state == C_TUNNEL_REPLY) {
			n = recv(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got, 0);
			if (n <= 0)
				return (n < 0 && errno == EAGAIN) ? 0 : -1;
			c->got += (size_t)n;
			c->buf[c->got] = '\0';
			if (strstr(c->buf, "\r\n\r\n") == NULL) {
				if (c->got >= sizeof(c->buf) - 1)
					return -1;
				continue;
			}
			if (strncmp(c->buf, "HTTP/1.1 200", 12) != 0 &&
			    strncmp(c->buf, "HTTP/1.0 200", 12) != 0)
				return -1;
			if (send_get(c->fd, g_target, "/") != 0)
				return -1;
			c->state = C_BODY;
			continue;
		}
		n = recv(c->fd, c->buf, sizeof(c->buf), 0);
		if (n == 0)
			return 1;
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
	}
}

static int
cmd_rate(int argc, char **argv)
{
	int conc, ep;
	long count, done = 0, failed = 0, started = 0;
	double limit, t0;
	struct client *cl;
	struct sockaddr_in proxy;

	if (argc != 7)
		return 2;
	g_direct = strcmp(argv[2], "direct") == 0;
	g_target = argv[3];
	conc = (int)strtol(argv[4], NULL, 10);
	if (conc < 1)
		conc = 1;
	count = strtol(argv[5], NULL, 10);
	limit = strtod(argv[6], NULL);
	if ((g_direct ? parse_addr(argv[3], &g_dst) : parse_addr(argv[2], &proxy)) != 0)
		return 2;
	if (!g_direct)
		g_dst = proxy;
	ep = epoll_create1(EPOLL_CLOEXEC);
	cl = calloc((size_t)conc, sizeof(*cl));
	t0 = now_s();
	for (int i = 0; i < conc && started < count; i++, started++)
		client_start(ep, &cl[i]);
	while (done + failed < started && now_s() - t0 < limit) {
		struct epoll_event evs[256];
		int n = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < n; i++) {
			struct client *c = evs[i].data.ptr;
			int r = client_step(ep, c, evs[i].events);

			if (r == 0)
				continue;
			if (r > 0)
				done++;
			else
				failed++;
			close(c->fd);
			if (started < count && now_s() - t0 < limit) {
				client_start(ep, c);
				started++;
			}
		}
	}
	t0 = now_s() - t0;
	printf("rate ok %ld failed %ld seconds %.3f per_second %.0f\n", done, failed, t0,
	       (double)done / t0);
	return failed > done / 100 ? 1 : 0;
}

/* ---- bulk ---- */

static int
cmd_bulk(int argc, char **argv)
{
	struct sockaddr_in sa;
	static char buf[1 << 18];
	int direct, fd;
	uint64_t total = 0;
	double t0;
	ssize_t n;
	char *body = NULL;

	if (argc != 5)
		return 2;
	direct = strcmp(argv[2], "direct") == 0;
	if (parse_addr(direct ? argv[3] : argv[2], &sa) != 0 || (fd = dial(&sa, 0)) < 0)
		return 1;
	t0 = now_s();
	if (!direct) {
		size_t got = 0;
		int rl = snprintf(buf, sizeof(buf), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
		                  argv[3], argv[3]);

		send(fd, buf, (size_t)rl, MSG_NOSIGNAL);
		while (got < 4096 && (n = recv(fd, buf + got, 1024, 0)) > 0) {
			got += (size_t)n;
			buf[got] = '\0';
			if (strstr(buf, "\r\n\r\n") != NULL)
				break;
		}
		if (strncmp(buf + 8, " 200", 4) != 0) {
			fprintf(stderr, "bulk: CONNECT refused: %.40s\n", buf);
			return 1;
		}
	}
	send_get(fd, argv[3], argv[4]);
	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) {
		if (body == NULL)
			body = buf;
		total += (uint64_t)n;
	}
	t0 = now_s() - t0;
	printf("bulk bytes %llu seconds %.3f MiB_per_s %.0f\n", (unsigned long long)total, t0,
	       (double)total / t0 / (1 << 20));
	close(fd);
	return 0;
}

/* ---- idle ---- */

static int
cmd_idle(int argc, char **argv)
{
	struct sockaddr_in sa;
	int n, ok = 0;
	double hold, t0 = now_s();
	int *fds;

	if (argc != 6)
		return 2;
	n = (int)strtol(argv[4], NULL, 10);
	hold = strtod(argv[5], NULL);
	if (parse_addr(argv[2], &sa) != 0)
		return 2;
	fds = calloc((size_t)n, sizeof(int));
	/* Blocking and one at a time: simple, and 10,000 take a second. */
	for (int i = 0; i < n && now_s() - t0 < 120; i++) {
		char buf[512];
		size_t got = 0;
		ssize_t r;
		int rl;
		struct timeval tv = {10, 0};

		fds[i] = dial(&sa, 0);
		if (fds[i] < 0)
			break;
		setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		rl = snprintf(buf, sizeof(buf), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", argv[3],
		              argv[3]);
		send(fds[i], buf, (size_t)rl, MSG_NOSIGNAL);
		while (got < sizeof(buf) - 1 &&
		       (r = recv(fds[i], buf + got, sizeof(buf) - 1 - got, 0)) > 0) {
			got += (size_t)r;
			buf[got] = '\0';
			if (strstr(buf, "\r\n\r\n") != NULL)
				break;
		}
		if (got < 12 || strncmp(buf + 9, "200", 3) != 0)
			break;
		if (send(fds[i], "x", 1, MSG_NOSIGNAL) != 1 || recv(fds[i], buf, 1, 0) != 1)
			break;
		ok++;
	}
	printf("idle-ready %d\n", ok);
	fflush(stdout);
	t0 = now_s();
	while (now_s() - t0 < hold)
		sleep(1);
	return ok == n ? 0 : 1;
}

/* ---- echo ---- */

static int
cmd_echo(int argc, char **argv)
{
	struct sockaddr_in sa;
	int lfd, ep, one = 1;
	struct epoll_event ev = {.events = EPOLLIN};

	if (argc != 3 || parse_addr(argv[2], &sa) != 0)
		return 2;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 4096) != 0) {
		perror("echo: bind");
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	printf("echo-ready\n");
	fflush(stdout);
	for (;;) {
		struct epoll_event evs[256];
		int n = epoll_wait(ep, evs, 256, -1);

		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd;
			char buf[65536];
			ssize_t r;

			if (fd == lfd) {
				int c;
				while ((c = accept4(lfd, NULL, NULL,
				                    SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event cev = {.events = EPOLLIN, .data.fd = c};
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev);
				}
				continue;
			}
			r = recv(fd, buf, sizeof(buf), 0);
			if (r <= 0) {
				if (r < 0 && errno == EAGAIN)
					continue;
				close(fd);
				continue;
			}
			(void)!send(fd, buf, (size_t)r, MSG_NOSIGNAL);
		}
	}
}

int
main(int argc, char **argv)
{
	raise_nofile();
	if (argc >= 2 && strcmp(argv[1], "rate") == 0)
		return cmd_rate(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "bulk") == 0)
		return cmd_bulk(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "idle") == 0)
		return cmd_idle(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "echo") == 0)
		return cmd_echo(argc, argv);
	fprintf(stderr,
	        "usage: bench-proxy rate|bulk|idle|echo ... (see the header of bench_proxy.c)\n");
	return 2;
}
