/* Load generator and helpers for bench/bench_proxy.sh (not a test).
 *
 *   bench-proxy rate  PROXY|direct TARGET CONC COUNT SECONDS [CAFILE]
 *       COUNT requests, CONC at a time, each on a new connection: through
 *       PROXY (CONNECT TARGET, then GET / in the tunnel) or direct to
 *       TARGET; with CAFILE, the GET goes over TLS: a full handshake (no
 *       resumption) with SNI = TARGET's host, the origin's certificate
 *       verified against CAFILE and that name. Each response must start
 *       "HTTP/1.x 200" and end in a close. Prints
 *       "rate ok N failed N seconds S per_second R".
 *   bench-proxy bulk  PROXY|direct TARGET PATH
 *       one GET PATH (through a CONNECT tunnel or direct), body read and
 *       dropped; prints "bulk BYTES SECONDS MiB_PER_S".
 *   bench-proxy idle  PROXY TARGET N SECONDS
 *       N tunnels to an echo TARGET, one line echoed through each, then
 *       held open; prints "idle-ready N", sleeps SECONDS, exits.
 *   bench-proxy echo  ADDR:PORT
 *       an epoll echo server (the idle tunnels' far end).
 *
 * PROXY and the echo server's ADDR are IPv4 literals; TARGET is HOST:PORT,
 * a name as a client would give it. Through a proxy the name goes in the
 * CONNECT and the proxy resolves it; direct, it is resolved here once per
 * run (getaddrinfo, so through the resolver in /etc/resolv.conf), as a
 * client with a cache would: that favours direct, never a proxy.
 *
 * Every loop is bounded in count and time; addresses are given by the
 * caller (the script uses loopback inside a private namespace). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
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

#include <openssl/err.h>
#include <openssl/ssl.h>

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

/* HOST:PORT's host part into host (the SNI, and what a name resolves). */
static int
target_host(const char *target, char *host, size_t size)
{
	const char *colon = strrchr(target, ':');
	size_t hl;

	if (colon == NULL || (hl = (size_t)(colon - target)) == 0 || hl >= size)
		return -1;
	memcpy(host, target, hl);
	host[hl] = '\0';
	return 0;
}

/* HOST:PORT resolved to its first IPv4 address (direct mode only). */
static int
resolve_target(const char *target, struct sockaddr_in *sa)
{
	struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
	char host[256];
	int rc;

	if (target_host(target, host, sizeof(host)) != 0)
		return -1;
	rc = getaddrinfo(host, strrchr(target, ':') + 1, &hints, &res);
	if (rc != 0) {
		fprintf(stderr, "bench-proxy: %s: %s\n", host, gai_strerror(rc));
		return -1;
	}
	memcpy(sa, res->ai_addr, sizeof(*sa));
	freeaddrinfo(res);
	return 0;
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

enum {
	C_CONNECTING,   /* TCP connect in progress */
	C_TUNNEL_REPLY, /* CONNECT sent, reading the proxy's reply */
	C_TLS,          /* TLS handshake */
	C_TLS_SEND,     /* handshake done, GET being written */
	C_BODY,         /* GET sent, reading the response to its end */
};

struct client {
	int fd, state;
	SSL *ssl;
	size_t got;
	char status[16]; /* the response's first bytes */
	size_t status_len;
	char buf[16384];
};

static const char *g_target;
static char g_host[256];
static int g_direct;
static SSL_CTX *g_tls; /* NULL: plain HTTP in the tunnel */
static struct sockaddr_in g_dst;

static void
client_watch(int ep, struct client *c, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = c};

	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

/* 0, or -1 when the connection could not even be started. */
static int
client_start(int ep, struct client *c)
{
	struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};

	c->fd = dial(&g_dst, 1);
	c->ssl = NULL;
	c->state = C_CONNECTING;
	c->got = 0;
	c->status_len = 0;
	if (c->fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
		if (c->fd >= 0)
			close(c->fd);
		c->fd = -1;
		return -1;
	}
	return 0;
}

static void
client_end(struct client *c)
{
	/* No close_notify: the origin has closed already (HTTP/1.0). */
	SSL_free(c->ssl);
	c->ssl = NULL;
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* Host is the target, as a real client's is: the proxy refuses a tunnel
 * whose request names another host (proxy/bind.c). */
static int
format_get(char *req, size_t size, const char *host, const char *path)
{
	return snprintf(req, size, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, host);
}

static int
send_get(int fd, const char *host, const char *path)
{
	char req[512];
	int n = format_get(req, sizeof(req), host, path);

	return send(fd, req, (size_t)n, MSG_NOSIGNAL) == n ? 0 : -1;
}

/* Keep the response's first bytes, to check its status at the end. */
static void
client_body(struct client *c, const char *b, size_t n)
{
	size_t room = sizeof(c->status) - c->status_len;

	if (n > room)
		n = room;
	memcpy(c->status + c->status_len, b, n);
	c->status_len += n;
}

static int
client_done(const struct client *c)
{
	return c->status_len >= 12 && (memcmp(c->status, "HTTP/1.1 200", 12) == 0 ||
	                               memcmp(c->status, "HTTP/1.0 200", 12) == 0)
	               ? 1
	               : -1;
}

/* Starts TLS on the tunnel (or the direct connection), or sends the GET. */
static int
client_ready(int ep, struct client *c)
{
	if (g_tls == NULL) {
		if (send_get(c->fd, g_target, "/") != 0)
			return -1;
		c->state = C_BODY;
		client_watch(ep, c, EPOLLIN);
		return 0;
	}
	c->ssl = SSL_new(g_tls);
	if (c->ssl == NULL || SSL_set_fd(c->ssl, c->fd) != 1 ||
	    SSL_set_tlsext_host_name(c->ssl, g_host) != 1 || SSL_set1_host(c->ssl, g_host) != 1)
		return -1;
	SSL_set_connect_state(c->ssl);
	c->state = C_TLS;
	return 0;
}

/* One TLS step (handshake, GET, response), or the wait it asks for.
 * Returns 1 when the response completed, -1 on failure, 0 to go on. */
static int
client_tls(int ep, struct client *c)
{
	for (;;) {
		int r, err;

		if (c->state == C_TLS)
			r = SSL_do_handshake(c->ssl);
		else if (c->state == C_TLS_SEND)
			r = SSL_write(c->ssl, c->buf, (int)c->got);
		else
			r = SSL_read(c->ssl, c->buf, (int)sizeof(c->buf));
		if (r > 0) {
			if (c->state == C_TLS) {
				c->got = (size_t)format_get(c->buf, sizeof(c->buf), g_target, "/");
				c->state = C_TLS_SEND;
			} else if (c->state == C_TLS_SEND) {
				c->state = C_BODY;
			} else {
				client_body(c, c->buf, (size_t)r);
			}
			continue;
		}
		err = SSL_get_error(c->ssl, r);
		if (err == SSL_ERROR_WANT_READ) {
			client_watch(ep, c, EPOLLIN);
			return 0;
		}
		if (err == SSL_ERROR_WANT_WRITE) {
			client_watch(ep, c, EPOLLOUT);
			return 0;
		}
		/* The end: a close_notify, or a plain EOF (allowed by the
		 * context's SSL_OP_IGNORE_UNEXPECTED_EOF). */
		if (c->state == C_BODY && err == SSL_ERROR_ZERO_RETURN)
			return client_done(c);
		ERR_clear_error();
		return -1;
	}
}

/* Returns 1 when the request completed, -1 on failure, 0 to go on. */
static int
client_step(int ep, struct client *c, uint32_t events)
{
	ssize_t n;

	if (c->state == C_CONNECTING) {
		int err = 0;
		socklen_t l = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
		if (err != 0 || (events & (EPOLLERR | EPOLLHUP)))
			return -1;
		if (g_direct) {
			if (client_ready(ep, c) != 0)
				return -1;
			return g_tls != NULL ? client_tls(ep, c) : 0;
		}
		char req[512];
		int rl = snprintf(req, sizeof(req), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n",
		                  g_target, g_target);
		if (send(c->fd, req, (size_t)rl, MSG_NOSIGNAL) != rl)
			return -1;
		c->state = C_TUNNEL_REPLY;
		client_watch(ep, c, EPOLLIN);
		return 0;
	}
	if (c->ssl != NULL) /* set from the handshake to the end */
		return client_tls(ep, c);
	for (;;) {
		if (c->state == C_TUNNEL_REPLY) {
			/* The origin speaks only after the client has, so
			 * nothing can follow the reply yet: a byte past its
			 * end is a failure. */
			char *end;

			n = recv(c->fd, c->buf + c->got, sizeof(c->buf) - 1 - c->got, 0);
			if (n <= 0)
				return (n < 0 && errno == EAGAIN) ? 0 : -1;
			c->got += (size_t)n;
			c->buf[c->got] = '\0';
			end = strstr(c->buf, "\r\n\r\n");
			if (end == NULL) {
				if (c->got >= 1024)
					return -1;
				continue;
			}
			if ((size_t)(end + 4 - c->buf) != c->got ||
			    (strncmp(c->buf, "HTTP/1.1 200", 12) != 0 &&
			     strncmp(c->buf, "HTTP/1.0 200", 12) != 0))
				return -1;
			c->got = 0;
			if (client_ready(ep, c) != 0)
				return -1;
			return g_tls != NULL ? client_tls(ep, c) : 0;
		}
		n = recv(c->fd, c->buf, sizeof(c->buf), 0);
		if (n == 0)
			return client_done(c);
		if (n < 0)
			return errno == EAGAIN ? 0 : -1;
		client_body(c, c->buf, (size_t)n);
	}
}

/* A client context: full handshakes only, the origin checked against
 * cafile (the script's throwaway self-signed certificate). */
static SSL_CTX *
tls_client(const char *cafile)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL || SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1) {
		fprintf(stderr, "bench-proxy: %s: cannot load\n", cafile);
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
	return ctx;
}

static int
cmd_rate(int argc, char **argv)
{
	int conc, ep;
	long count, done = 0, failed = 0, started = 0;
	double limit, t0;
	struct client *cl;

	if (argc != 7 && argc != 8)
		return 2;
	g_direct = strcmp(argv[2], "direct") == 0;
	g_target = argv[3];
	conc = (int)strtol(argv[4], NULL, 10);
	if (conc < 1)
		conc = 1;
	count = strtol(argv[5], NULL, 10);
	limit = strtod(argv[6], NULL);
	if (target_host(g_target, g_host, sizeof(g_host)) != 0)
		return 2;
	if ((g_direct ? resolve_target(g_target, &g_dst) : parse_addr(argv[2], &g_dst)) != 0)
		return 2;
	if (argc == 8 && (g_tls = tls_client(argv[7])) == NULL)
		return 2;
	ep = epoll_create1(EPOLL_CLOEXEC);
	cl = calloc((size_t)conc, sizeof(*cl));
	t0 = now_s();
	for (int i = 0; i < conc && started < count; i++, started++)
		if (client_start(ep, &cl[i]) != 0)
			failed++;
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
			client_end(c);
			/* A start that fails at once is counted and the
			 * slot tried again, within the same bounds. */
			while (started < count && now_s() - t0 < limit) {
				started++;
				if (client_start(ep, c) == 0)
					break;
				failed++;
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
	if ((direct ? resolve_target(argv[3], &sa) : parse_addr(argv[2], &sa)) != 0 ||
	    (fd = dial(&sa, 0)) < 0)
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

/* What each idle tunnel echoes once: a line like an SSH banner, a protocol
 * that presents no name (not a ClientHello, not an HTTP head), so a proxy
 * that looks at a tunnel's first bytes lets it go at once. A single token
 * byte would not do: it may be the start of a request method. */
#define IDLE_HELLO "SSH-2.0-bench\r\n"

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

		buf[0] = '\0';
		fds[i] = dial(&sa, 0);
		if (fds[i] < 0) {
			fprintf(stderr, "idle: tunnel %d: connect: %s\n", i, strerror(errno));
			break;
		}
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
		if (got < 12 || strncmp(buf + 9, "200", 3) != 0) {
			fprintf(stderr, "idle: tunnel %d: CONNECT answered '%.40s' (%s)\n", i, buf,
			        got == 0 ? strerror(errno) : "");
			break;
		}
		rl = (int)strlen(IDLE_HELLO);
		if (send(fds[i], IDLE_HELLO, (size_t)rl, MSG_NOSIGNAL) != rl)
			break;
		for (got = 0; got < (size_t)rl; got += (size_t)r)
			if ((r = recv(fds[i], buf + got, (size_t)rl - got, 0)) <= 0)
				break;
		if (got < (size_t)rl)
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
