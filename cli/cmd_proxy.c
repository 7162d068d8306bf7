/* `airlock proxy`: the allowlist proxy alone, explicit mode, for containers
 * and VMs that bring their own isolation (docs/proxy.md). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/util.h>

#include "broker/broker.h"
#include "broker/client.h"
#include "cli/cmd.h"
#include "common/confine.h"
#include "common/fdcaller.h"
#include "common/fdres.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/cache.h"
#include "dns/dns.h"
#include "dns/resolver.h"
#include "elog/elog.h"
#include "elog/logger.h"
#include "policy/policy.h"
#include "proxy/proxy.h"
#include "worker/confine.h"

/* After task-end: how long lines still waiting for a slow log reader may
 * take to go out (a second without progress fails it sooner). */
#define PROXY_LOG_DRAIN_MS 5000
/* The DNS listener's IP -> name cache, as in `airlock run`. */
#define PROXY_DNS_CACHE_ENTRIES 4096

static void
proxy_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock proxy -p POLICY --listen ADDR:PORT [OPTIONS]\n"
	        "       airlock proxy -p POLICY --transparent ADDR:PORT [--dns ADDR:PORT] "
	        "[OPTIONS]\n"
	        "\n"
	        "Run the allowlist proxy alone (explicit mode: HTTP CONNECT, absolute-form\n"
	        "HTTP/1.1 and SOCKS5 CONNECT; transparent mode: connections redirected to it\n"
	        "by the host's firewall), for containers and VMs that bring their own\n"
	        "isolation. Every connection is checked against POLICY and logged as JSON\n"
	        "Lines.\n"
	        "\n"
	        "  -p, --policy POLICY       policy file or preset name (required)\n"
	        "  -l, --listen ADDR:PORT    explicit proxy, e.g. 127.0.0.1:3128, [::1]:3128 or\n"
	        "                            localhost:3128 (every address of a name)\n"
	        "      --transparent ADDR:PORT\n"
	        "                            transparent listener for connections redirected\n"
	        "                            to it (nftables REDIRECT/DNAT: SO_ORIGINAL_DST,\n"
	        "                            TLS SNI, HTTP Host), decided as in airlock run\n"
	        "      --dns ADDR:PORT       DNS listener (UDP and TCP) answering allowed names\n"
	        "                            only, as in airlock run\n"
	        "                            (at least one of --listen and --transparent)\n"
	        "      --log FILE            egress log (JSON Lines); default '-' (stdout)\n"
	        "      --log-budget SIZE     bytes of event lines before detail stops and new\n"
	        "                            destinations are refused (k, M, G); default 0,\n"
	        "                            no limit\n"
	        "  -v, --verbose             also a human line per connection on stderr\n"
	        "      --dns-upstream ADDR   resolver to use (ADDR or ADDR:PORT, repeatable);\n"
	        "                            default: the nameservers in /etc/resolv.conf\n"
	        "      --hosts-file FILE     names answered from FILE (hosts(5)) before DNS;\n"
	        "                            default /etc/hosts, '' for none\n"
	        "      --audit               allow everything the address guard permits and\n"
	        "                            log 'audit-deny' for what enforce would refuse\n"
	        "      --max-conns N         concurrent connections (default 8192)\n"
	        "      --check ADDR:PORT     ask a running proxy's explicit listener for\n"
	        "                            GET /healthz and exit: 0 when it says 200, else 1\n"
	        "                            (a liveness probe); needs no other option\n"
	        "  -h, --help                this text\n"
	        "\n"
	        "Runs until SIGINT or SIGTERM; SIGHUP does not reload yet (a warning, and\n"
	        "it serves on). Exit status: 0 after a signal, 1 when the policy is\n"
	        "invalid, the proxy cannot start or its egress log failed, 2 on a usage\n"
	        "error.\n");
}

static void
proxy_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	log_info("proxy: signal %d, stopping", (int)sig);
	event_base_loopbreak(arg);
}

/* SIGHUP asks daemons to reload. That is not built (docs/proxy.md): the
 * proxy keeps serving the policy it started with and says so, rather than
 * die without its task-end line, as the default action would. */
static void
proxy_on_hup(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	(void)arg;
	log_warnx("proxy: SIGHUP: reloading the policy is not supported yet; still serving the "
	          "policy it started with (restart airlock proxy to load a new one)");
}

/* Addresses one ADDR:PORT names, at most this many (a name such as
 * localhost may have several: every one is served). */
#define PROXY_MAX_ADDRS 8

/* Parse OPT's ADDR:PORT: a v4 address, a bracketed v6 address or a name
 * (getaddrinfo, every address it gives), and a port 1..65535. Fills out
 * with up to PROXY_MAX_ADDRS distinct addresses; how many, or -1 after
 * saying why on stderr. */
static int
proxy_parse_addrs(const char *opt, const char *spec, struct sockaddr_storage *out)
{
	char host[256];
	const char *colon, *hs = spec, *he;
	struct addrinfo hints, *res = NULL;
	uint64_t port;
	int n = 0, rc;

	if (spec[0] == '[') {
		hs = spec + 1;
		he = strchr(hs, ']');
		colon = he != NULL && he[1] == ':' ? he + 1 : NULL;
	} else {
		colon = strrchr(spec, ':');
		he = colon;
		if (colon != NULL && memchr(spec, ':', (size_t)(colon - spec)) != NULL)
			colon = NULL; /* a bare v6 address: it needs brackets */
	}
	if (colon == NULL || he == hs || (size_t)(he - hs) >= sizeof(host) ||
	    parse_uint(colon + 1, 1, 65535, &port) != 0) {
		fprintf(stderr,
		        "airlock proxy: %s '%s': expected ADDR:PORT, e.g. 127.0.0.1:3128, "
		        "[::1]:3128 or localhost:3128\n",
		        opt, spec);
		return -1;
	}
	memcpy(host, hs, (size_t)(he - hs));
	host[he - hs] = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	if ((rc = getaddrinfo(host, NULL, &hints, &res)) != 0) {
		fprintf(stderr, "airlock proxy: %s '%s': cannot resolve '%s': %s\n", opt, spec,
		        host, gai_strerror(rc));
		return -1;
	}
	for (struct addrinfo *ai = res; ai != NULL && n < PROXY_MAX_ADDRS; ai = ai->ai_next) {
		struct sockaddr_storage ss;
		bool dup = false;

		if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) ||
		    ai->ai_addrlen > sizeof(ss))
			continue;
		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
		if (ss.ss_family == AF_INET)
			((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
		else
			((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		for (int i = 0; i < n && !dup; i++)
			dup = memcmp(&out[i], &ss, sizeof(ss)) == 0;
		if (!dup)
			out[n++] = ss;
	}
	freeaddrinfo(res);
	if (n == 0) {
		fprintf(stderr, "airlock proxy: %s '%s': '%s' has no IPv4 or IPv6 address\n", opt,
		        spec, host);
		return -1;
	}
	return n;
}

/* A socket of type bound to ss (listening, for a stream); -1 after saying
 * why, naming OPT and SPEC. */
static int
proxy_bind_one(const char *opt, const char *spec, const struct sockaddr_storage *ss, int type)
{
	int fd, one = 1;
	socklen_t len =
	        ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);

	fd = socket(ss->ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		fprintf(stderr, "airlock proxy: %s '%s': socket: %s\n", opt, spec, strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss->ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) != 0 ||
	    (type == SOCK_STREAM && listen(fd, 4096) != 0)) {
		fprintf(stderr, "airlock proxy: %s '%s': cannot %s: %s\n", opt, spec,
		        type == SOCK_STREAM ? "listen" : "bind (UDP)", strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The sockets of one option: every address SPEC names, a stream socket for
 * each (and a UDP one before it when udp). Appends to fds (room for
 * 2 * PROXY_MAX_ADDRS); how many, or -1 after saying why (those made are
 * closed). */
static int
proxy_open_spec(const char *opt, const char *spec, bool udp, int *fds)
{
	struct sockaddr_storage ss[PROXY_MAX_ADDRS];
	int n = proxy_parse_addrs(opt, spec, ss), k = 0;

	for (int i = 0; i < n; i++) {
		if (udp && (fds[k++] = proxy_bind_one(opt, spec, &ss[i], SOCK_DGRAM)) < 0)
			goto fail;
		if ((fds[k++] = proxy_bind_one(opt, spec, &ss[i], SOCK_STREAM)) < 0)
			goto fail;
	}
	return n < 0 ? -1 : k;
fail:
	for (int i = 0; i < k - 1; i++)
		close(fds[i]);
	return -1;
}

/* How long `--check` waits for the whole answer. */
#define PROXY_CHECK_MS 5000

/* Bytes of fd until the head's end or the deadline: 0 when the status line
 * says 200. */
static int
proxy_check_read(int fd, uint64_t deadline, char *buf, size_t cap)
{
	size_t len = 0;
	ssize_t n;

	while (len < cap - 1 && memmem(buf, len, "\r\n", 2) == NULL) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ms();

		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0)
			return -1;
		if ((n = read(fd, buf + len, cap - 1 - len)) <= 0)
			return -1;
		len += (size_t)n;
		buf[len] = '\0';
	}
	return strncmp(buf, "HTTP/1.1 200 ", 13) == 0 ? 0 : -1;
}

/* `airlock proxy --check ADDR:PORT`: GET /healthz from a running proxy's
 * explicit listener (every address of a name, in turn); 0 when one says
 * 200 within PROXY_CHECK_MS, else 1 after saying why. */
static int
proxy_check(const char *spec)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: airlock\r\n"
	                          "Connection: close\r\n\r\n";
	struct sockaddr_storage ss[PROXY_MAX_ADDRS];
	uint64_t deadline = now_ms() + PROXY_CHECK_MS;
	int n = proxy_parse_addrs("--check", spec, ss);
	char buf[256] = "";

	if (n < 0)
		return EXIT_USAGE;
	for (int i = 0; i < n; i++) {
		socklen_t len = ss[i].ss_family == AF_INET ? sizeof(struct sockaddr_in)
		                                           : sizeof(struct sockaddr_in6);
		int fd = socket(ss[i].ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;
		struct timeval tv = {PROXY_CHECK_MS / 1000, 0};

		if (fd < 0)
			continue;
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, (struct sockaddr *)&ss[i], len) == 0 &&
		    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) == (ssize_t)(sizeof(req) - 1))
			rc = proxy_check_read(fd, deadline, buf, sizeof(buf));
		close(fd);
		if (rc == 0)
			return 0;
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	fprintf(stderr, "airlock proxy: --check '%s': %s%s\n", spec,
	        buf[0] != '\0' ? "unhealthy: " : "no answer from /healthz", buf);
	return 1;
}

/* The broker's resolver: --dns-upstream addresses, else
 * /etc/resolv.conf's; the hosts file first, as every other proxy does
 * (docs/proxy.md). 0, or -1 after saying why. */
static int
proxy_dns_config(struct resolver_config *rc, char **upstreams, size_t n_up, const char *hosts_path)
{
	int n = 0;

	if (n_up > 0) {
		for (size_t i = 0; i < n_up; i++) {
			if (dns_upstream_parse(upstreams[i], &rc->upstream[n]) != 0) {
				fprintf(stderr,
				        "airlock proxy: --dns-upstream '%s': expected ADDR or "
				        "ADDR:PORT\n",
				        upstreams[i]);
				return -1;
			}
			n++;
		}
	} else {
		n = dns_upstream_from_resolv_conf("/etc/resolv.conf", rc->upstream,
		                                  DNS_MAX_UPSTREAMS);
		if (n <= 0) {
			fprintf(stderr, "airlock proxy: no nameserver in /etc/resolv.conf; use "
			                "--dns-upstream\n");
			return -1;
		}
	}
	rc->n_upstream = (size_t)n;
	/* No search domains: names are resolved as given. */
	rc->hosts_path = hosts_path[0] != '\0' ? hosts_path : NULL;
	return 0;
}

static void
proxy_task_id(char *out, size_t outlen)
{
	uint8_t r[8];

	if (getrandom(r, sizeof(r), 0) != sizeof(r))
		memset(r, 0, sizeof(r));
	snprintf(out, outlen, "proxy-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3],
	         r[4], r[5], r[6], r[7]);
}

int
cmd_proxy(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"policy", required_argument, NULL, 'p'},
	        {"listen", required_argument, NULL, 'l'},
	        {"log", required_argument, NULL, 'L'},
	        {"log-budget", required_argument, NULL, 'B'},
	        {"verbose", no_argument, NULL, 'v'},
	        {"dns-upstream", required_argument, NULL, 'd'},
	        {"hosts-file", required_argument, NULL, 'H'},
	        {"audit", no_argument, NULL, 'a'},
	        {"max-conns", required_argument, NULL, 'm'},
	        {"transparent", required_argument, NULL, 'T'},
	        {"dns", required_argument, NULL, 'D'},
	        {"check", required_argument, NULL, 'C'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	const char *policy_path = NULL, *listen_spec = NULL, *log_path = "-";
	const char *tproxy_spec = NULL, *dns_spec = NULL, *check_spec = NULL;
	int lfds[2 * PROXY_MAX_ADDRS], tfds[2 * PROXY_MAX_ADDRS], dfds[2 * PROXY_MAX_ADDRS];
	int n_lfd = 0, n_tfd = 0, n_dfd = 0;
	struct dns_cache *cache = NULL;
	struct dns_server *dns = NULL;
	struct dns_asker asker;
	const char *hosts_path = "/etc/hosts";
	char *upstreams[DNS_MAX_UPSTREAMS];
	size_t n_up = 0;
	bool verbose = false, audit = false;
	uint64_t max_conns = 0, log_budget = 0;
	struct policy *pol = NULL;
	struct policy_diag diag = {0};
	struct elog *elog = NULL;
	struct event_base *base = NULL;
	struct broker_cfg bc;
	struct broker_client *broker = NULL;
	pid_t broker_pid = 0;
	struct proxy *px = NULL;
	struct event *sigint = NULL, *sigterm = NULL, *sighup = NULL;
	struct proxy_config cfg;
	char err[256], task[32];
	int opt, logfd, status = 1;
	uint64_t start = now_ms();

	/* Before anything is opened: what is open now is the caller's. */
	if (fdcaller_note() < 0) {
		fprintf(stderr, "airlock proxy: the caller's descriptors: %s\n", strerror(errno));
		return 1;
	}
	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+:p:l:vh", opts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			policy_path = optarg;
			break;
		case 'l':
			listen_spec = optarg;
			break;
		case 'T':
			tproxy_spec = optarg;
			break;
		case 'D':
			dns_spec = optarg;
			break;
		case 'C':
			check_spec = optarg;
			break;
		case 'L':
			log_path = optarg;
			break;
		case 'B':
			if (elog_parse_size(optarg, &log_budget) != 0) {
				fprintf(stderr,
				        "airlock proxy: --log-budget '%s': expected bytes, e.g. "
				        "64M, or 0 for no limit\n",
				        optarg);
				return EXIT_USAGE;
			}
			break;
		case 'v':
			verbose = true;
			break;
		case 'a':
			audit = true;
			break;
		case 'd':
			if (n_up == DNS_MAX_UPSTREAMS) {
				fprintf(stderr, "airlock proxy: at most %d --dns-upstream\n",
				        DNS_MAX_UPSTREAMS);
				return EXIT_USAGE;
			}
			upstreams[n_up++] = optarg;
			break;
		case 'H':
			hosts_path = optarg;
			break;
		case 'm':
			if (parse_uint(optarg, 1, 1000000, &max_conns) != 0) {
				fprintf(stderr,
				        "airlock proxy: --max-conns '%s': expected 1..1000000\n",
				        optarg);
				return EXIT_USAGE;
			}
			break;
		case 'h':
			proxy_usage(stdout);
			return 0;
		default:
			opt_error(err, sizeof(err), opt, argc, argv, "airlock proxy --help");
			fprintf(stderr, "airlock: proxy: %s\n", err);
			return EXIT_USAGE;
		}
	}
	if (check_spec != NULL && optind == argc)
		return proxy_check(check_spec);
	if (optind != argc || policy_path == NULL || (listen_spec == NULL && tproxy_spec == NULL)) {
		fprintf(stderr,
		        "airlock proxy: -p POLICY and --listen ADDR:PORT or --transparent "
		        "ADDR:PORT are required%s\n",
		        optind != argc ? " (and no other arguments)" : "");
		proxy_usage(stderr);
		return EXIT_USAGE;
	}
	{
		struct sockaddr_storage ss[PROXY_MAX_ADDRS];

		if ((listen_spec != NULL && proxy_parse_addrs("--listen", listen_spec, ss) < 0) ||
		    (tproxy_spec != NULL &&
		     proxy_parse_addrs("--transparent", tproxy_spec, ss) < 0) ||
		    (dns_spec != NULL && proxy_parse_addrs("--dns", dns_spec, ss) < 0))
			return EXIT_USAGE;
	}
	if (verbose)
		log_set_level(LOG_LEVEL_INFO);
	/* Two sockets per tunnel: take every descriptor we may. */
	(void)fdres_raise_limit();

	pol = policy_load(policy_path, &diag);
	if (pol == NULL) {
		for (size_t i = 0; i < diag.n_lines; i++)
			fprintf(stderr, "%s\n", diag.lines[i]);
		fprintf(stderr, "airlock proxy: policy '%s' is invalid; not starting\n",
		        policy_path);
		policy_diag_clear(&diag);
		return 1;
	}
	policy_diag_clear(&diag);
	if (policy_inspects(pol)) {
		fprintf(stderr,
		        "airlock proxy: policy '%s' has `inspect:` rules, and this build "
		        "does not serve TLS inspection yet; not starting\n",
		        policy_path);
		policy_free(pol);
		return 1;
	}
	if (audit)
		policy_set_mode(pol, POLICY_MODE_AUDIT);

	/* The logger alone keeps the log's fd (elog/logger.h). */
	if ((logfd = elog_open_path(log_path, err, sizeof(err))) < 0 ||
	    (elog = elog_logger_open(logfd, err, sizeof(err))) == NULL) {
		fprintf(stderr, "airlock proxy: egress log: %s\n", err);
		goto out;
	}
	proxy_task_id(task, sizeof(task));
	elog_set_task(elog, task);
	elog_set_budget(elog, log_budget);
	if (verbose)
		elog_set_human(elog, stderr);

	/* Every socket before anything is served: one that cannot be opened
	 * stops the start, none half-served. */
	if ((listen_spec != NULL &&
	     (n_lfd = proxy_open_spec("--listen", listen_spec, false, lfds)) < 0) ||
	    (tproxy_spec != NULL &&
	     (n_tfd = proxy_open_spec("--transparent", tproxy_spec, false, tfds)) < 0) ||
	    (dns_spec != NULL && (n_dfd = proxy_open_spec("--dns", dns_spec, true, dfds)) < 0)) {
		n_lfd = n_lfd < 0 ? 0 : n_lfd;
		n_tfd = n_tfd < 0 ? 0 : n_tfd;
		n_dfd = 0;
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	{
		/* The changelist folds the add/del pairs of one loop turn (a
		 * tunnel switching to splice) into one epoll_ctl each. */
		struct event_config *ec = event_config_new();

		if (ec != NULL) {
			event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
			base = event_base_new_with_config(ec);
			event_config_free(ec);
		}
	}
	if (base == NULL) {
		fprintf(stderr, "airlock proxy: cannot create the event loop\n");
		goto out;
	}
	/* The broker resolves, guards and connects every upstream socket;
	 * this process makes none (docs/run.md, "The broker"). */
	memset(&bc, 0, sizeof(bc));
	bc.policy = pol;
	if (proxy_dns_config(&bc.dns, upstreams, n_up, hosts_path) != 0)
		goto out;
	{
		int bfd = broker_spawn(&bc, &broker_pid, err, sizeof(err));

		if (bfd < 0) {
			fprintf(stderr, "airlock proxy: %s\n", err);
			goto out;
		}
		if ((broker = broker_client_new(base, bfd, 0)) == NULL) {
			fprintf(stderr, "airlock proxy: out of memory\n");
			goto out;
		}
	}
	if (elog_attach(elog, base) != 0)
		fprintf(stderr, "airlock proxy: cannot attach the egress log to the loop; counts "
		                "go out with the next line\n");
	/* What the DNS listener answered teaches the transparent listener
	 * which name an address stands for (name-less TCP), as in run. */
	if ((tproxy_spec != NULL || dns_spec != NULL) &&
	    (cache = dns_cache_new(PROXY_DNS_CACHE_ENTRIES)) == NULL) {
		fprintf(stderr, "airlock proxy: out of memory\n");
		goto out;
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = pol;
	cfg.log = elog;
	cfg.cache = cache;
	cfg.broker = broker;
	cfg.max_conns = (unsigned)max_conns;
	cfg.log_client = true; /* a gateway serves many clients */
	if ((px = proxy_new(base, &cfg)) == NULL)
		goto out;
	/* Each consumer takes its fd, even when it fails. */
	for (int i = 0; i < n_lfd + n_tfd; i++) {
		bool expl = i < n_lfd;
		int lfd = expl ? lfds[i] : tfds[i - n_lfd];

		(expl ? lfds : tfds)[expl ? i : i - n_lfd] = -1;
		if (proxy_add_listener(px, lfd,
		                       expl ? PROXY_LISTEN_EXPLICIT : PROXY_LISTEN_TRANSPARENT) !=
		    0) {
			fprintf(stderr, "airlock proxy: cannot serve the %s listener\n",
			        expl ? "--listen" : "--transparent");
			goto out;
		}
	}
	if (dns_spec != NULL) {
		struct dns_server_config dc;

		/* The broker decides again, resolves and records what it told
		 * (docs/run.md, "The worker"): this process makes no socket. */
		broker_client_asker(broker, &asker);
		memset(&dc, 0, sizeof(dc));
		dc.policy = pol;
		dc.log = elog;
		dc.cache = cache;
		dc.asker = &asker;
		dc.queue = proxy_queue_budget(px);
		dc.fds = proxy_fd_reserve(px);
		if ((dns = dns_server_new(base, &dc)) == NULL) {
			fprintf(stderr, "airlock proxy: --dns: the DNS listener cannot start\n");
			goto out;
		}
		for (int i = 0; i < n_dfd; i++) {
			int dfd = dfds[i];

			dfds[i] = -1;
			if ((i % 2 == 0 ? dns_server_add_udp(dns, dfd)
			                : dns_server_add_tcp(dns, dfd)) != 0) {
				fprintf(stderr, "airlock proxy: --dns: cannot serve '%s'\n",
				        dns_spec);
				goto out;
			}
		}
	}
	sigint = evsignal_new(base, SIGINT, proxy_on_signal, base);
	sigterm = evsignal_new(base, SIGTERM, proxy_on_signal, base);
	sighup = evsignal_new(base, SIGHUP, proxy_on_hup, NULL);
	if (sigint == NULL || sigterm == NULL || sighup == NULL ||
	    evsignal_add(sigint, NULL) != 0 || evsignal_add(sigterm, NULL) != 0 ||
	    evsignal_add(sighup, NULL) != 0) {
		fprintf(stderr, "airlock proxy: cannot watch signals\n");
		goto out;
	}
	{
		const char *targv[8] = {"airlock", "proxy"};
		int targc = 2;

		if (listen_spec != NULL) {
			targv[targc++] = "--listen";
			targv[targc++] = listen_spec;
		}
		if (tproxy_spec != NULL) {
			targv[targc++] = "--transparent";
			targv[targc++] = tproxy_spec;
		}
		if (dns_spec != NULL) {
			targv[targc++] = "--dns";
			targv[targc++] = dns_spec;
		}
		struct elog_task_start ts = {
		        .policy = policy_name(pol),
		        .policy_sha256 = policy_sha256(pol),
		        .mode = policy_mode(pol) == POLICY_MODE_AUDIT ? "audit" : "enforce",
		        .argv = targv,
		        .argc = targc,
		        .worker = true,
		        .landlock = confine_landlock_abi(),
		};
		if (elog_task_start(elog, &ts) != 0) {
			fprintf(stderr, "airlock proxy: cannot write the egress log\n");
			goto out;
		}
	}
	/* The proxy serves as the worker of `airlock run` does, confined the
	 * same way (docs/proxy.md, "Confinement"), once everything it uses is
	 * open and task-start written (its SHA-256 is the first: OpenSSL may
	 * read its configuration then). A container that refuses namespaces
	 * leaves it without the empty mount view, said here. */
	{
		struct worker_confined wc;

		/* The caller's descriptors are not the confined proxy's
		 * (`--log /dev/fd/3` was opened through one, already), nor
		 * its stdin and stdout: a terminal there would be read and
		 * written by the process that parses hostile bytes. */
		if (fdcaller_close() != 0 || fdcaller_drop_stdio() != 0) {
			fprintf(stderr, "airlock proxy: closing the caller's descriptors: %s\n",
			        strerror(errno));
			goto out;
		}
		if (worker_confine(WORKER_VIEW_OPTIONAL | WORKER_OWN_STDERR, &wc, err,
		                   sizeof(err)) != 0) {
			fprintf(stderr, "airlock proxy: %s; refusing to serve\n", err);
			goto out;
		}
		if (!wc.view)
			fprintf(stderr, "airlock proxy: %s: serving without the empty mount view\n",
			        wc.view_err);
		/* Confined, it can neither signal nor wait: the logger ends
		 * after its DONE (elog_drain waits for that on the socket) and
		 * the broker when this process does (it dies with its parent);
		 * the zombies are reaped by whoever reaps this process. */
		(void)elog_disown_logger(elog);
		broker_pid = 0;
	}
	fprintf(stderr, "airlock proxy: listening on%s%s%s%s%s%s (policy %s, %s)\n",
	        listen_spec != NULL ? " " : "", listen_spec != NULL ? listen_spec : "",
	        tproxy_spec != NULL ? " transparent " : "", tproxy_spec != NULL ? tproxy_spec : "",
	        dns_spec != NULL ? " dns " : "", dns_spec != NULL ? dns_spec : "", policy_name(pol),
	        policy_mode(pol) == POLICY_MODE_AUDIT ? "audit" : "enforce");
	event_base_dispatch(base);
	status = 0;
out:
	/* Connections still open are closed and logged before task-end, and
	 * counts still held go out. A log that failed at any point fails the
	 * run: its record is incomplete (docs/proxy.md). */
	dns_server_free(dns); /* before the proxy, whose budget it shares */
	proxy_free(px);
	broker_client_free(broker); /* after the proxy, which borrows it */
	broker_stop(broker_pid);
	if (elog != NULL && base != NULL) {
		struct elog_task_end te;

		elog_flush(elog);
		memset(&te, 0, sizeof(te));
		elog_totals(elog, &te);
		te.exit_status = status;
		te.duration_ms = now_ms() - start;
		if ((elog_task_end(elog, &te) != 0 || elog_drain(elog, PROXY_LOG_DRAIN_MS) != 0) &&
		    status == 0) {
			fprintf(stderr,
			        "airlock proxy: the egress log failed during the run (%s); "
			        "exit 1\n",
			        elog_error(elog));
			status = 1;
		}
		elog_detach(elog);
	}
	if (sigint != NULL)
		event_free(sigint);
	if (sigterm != NULL)
		event_free(sigterm);
	if (sighup != NULL)
		event_free(sighup);
	broker_reap(broker_pid);
	if (base != NULL)
		event_base_free(base);
	for (int i = 0; i < n_lfd; i++)
		fd_close(&lfds[i]);
	for (int i = 0; i < n_tfd; i++)
		fd_close(&tfds[i]);
	for (int i = 0; i < n_dfd; i++)
		fd_close(&dfds[i]);
	dns_cache_free(cache);
	elog_free(elog);
	policy_free(pol);
	return status;
}
