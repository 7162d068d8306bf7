/* dnsd: airlock's DNS listener alone, for the end-to-end tests and the
 * benchmark. Serves dns_server on ADDR:PORT (UDP and TCP) with a policy,
 * forwarding to the given upstreams, logging to an egress log file.
 *
 *   dnsd -p POLICY -l ADDR:PORT [-u UPSTREAM]... [-r RESOLV_CONF]
 *        [-o LOG] [-t TIMEOUT_MS] [-c TTL_CAP] [-n CACHE_ENTRIES] [-v]
 *
 * SIGTERM or SIGINT stop it cleanly (everything freed, for ASan). */
#include "common/log.h"
#include "common/util.h"
#include "dns/cache.h"
#include "dns/dns.h"
#include "elog/elog.h"
#include "policy/policy.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void
usage(void)
{
	fprintf(stderr, "usage: dnsd -p POLICY -l ADDR:PORT [-u UPSTREAM]... "
	                "[-r RESOLV_CONF] [-o LOG] [-t TIMEOUT_MS] [-c TTL_CAP] "
	                "[-n CACHE_ENTRIES] [-v]\n");
	exit(2);
}

static int
listen_on(const struct sockaddr_storage *ss, int type)
{
	socklen_t len = ss->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                          : sizeof(struct sockaddr_in);
	int one = 1;
	int fd = socket(ss->ss_family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		log_fatal(1, "dnsd: socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)ss, len) != 0)
		log_fatal(1, "dnsd: bind");
	if (type == SOCK_DGRAM) {
		int size = 4 << 20;

		/* Room for bursts when the machine is busy (tests run in
		 * parallel); FORCE passes rmem_max when we are root. */
		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
			setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0)
			setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	} else if (listen(fd, 64) != 0) {
		log_fatal(1, "dnsd: listen");
	}
	return fd;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)sig;
	(void)what;
	event_base_loopbreak(arg);
}

int
main(int argc, char **argv)
{
	struct dns_server_config cfg = {0};
	const char *policy_path = NULL, *listen_addr = NULL, *log_path = "-";
	const char *resolv = NULL;
	uint64_t v, cache_entries = 4096;
	struct sockaddr_storage lss;
	struct policy_diag diag = {0};
	struct policy *pol;
	struct elog *elog;
	struct dns_cache *cache;
	struct event_base *base;
	struct dns_server *srv;
	struct event *sigterm, *sigint;
	char err[256];
	int opt;

	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt(argc, argv, "p:l:u:r:o:t:c:n:v")) != -1) {
		switch (opt) {
		case 'p':
			policy_path = optarg;
			break;
		case 'l':
			listen_addr = optarg;
			break;
		case 'u':
			if (cfg.n_upstream >= DNS_MAX_UPSTREAMS ||
			    dns_upstream_parse(optarg, &cfg.upstream[cfg.n_upstream]) != 0)
				log_fatalx(2, "dnsd: bad upstream '%s'", optarg);
			cfg.n_upstream++;
			break;
		case 'r':
			resolv = optarg;
			break;
		case 'o':
			log_path = optarg;
			break;
		case 't':
			if (parse_uint(optarg, 1, 60000, &v) != 0)
				usage();
			cfg.timeout_ms = (uint32_t)v;
			break;
		case 'c':
			if (parse_uint(optarg, 1, 86400, &v) != 0)
				usage();
			cfg.ttl_cap = (uint32_t)v;
			break;
		case 'n':
			if (parse_uint(optarg, 1, 1u << 22, &cache_entries) != 0)
				usage();
			break;
		case 'v':
			log_set_level(LOG_LEVEL_DEBUG);
			break;
		default:
			usage();
		}
	}
	if (policy_path == NULL || listen_addr == NULL)
		usage();
	if (resolv != NULL && cfg.n_upstream == 0) {
		int n = dns_upstream_from_resolv_conf(resolv, cfg.upstream, DNS_MAX_UPSTREAMS);

		if (n < 0)
			return 1;
		cfg.n_upstream = (size_t)n;
	}
	if (dns_upstream_parse(listen_addr, &lss) != 0)
		log_fatalx(2, "dnsd: bad listen address '%s'", listen_addr);
	if ((pol = policy_load(policy_path, &diag)) == NULL) {
		for (size_t i = 0; i < diag.n_lines; i++)
			fprintf(stderr, "%s\n", diag.lines[i]);
		policy_diag_clear(&diag);
		return 1;
	}
	policy_diag_clear(&diag);
	if ((elog = elog_open(log_path, err, sizeof(err))) == NULL)
		log_fatalx(1, "dnsd: %s", err);
	elog_set_task(elog, "dnsd");
	if ((cache = dns_cache_new((size_t)cache_entries)) == NULL)
		log_fatalx(1, "dnsd: cache");
	if ((base = event_base_new()) == NULL)
		log_fatalx(1, "dnsd: event base");
	cfg.policy = pol;
	cfg.log = elog;
	cfg.cache = cache;
	if ((srv = dns_server_new(base, &cfg)) == NULL)
		return 1;
	if (dns_server_add_udp(srv, listen_on(&lss, SOCK_DGRAM)) != 0 ||
	    dns_server_add_tcp(srv, listen_on(&lss, SOCK_STREAM)) != 0)
		return 1;
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	sigint = evsignal_new(base, SIGINT, on_signal, base);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	fprintf(stderr, "dnsd: serving %s with %zu upstream(s)\n", listen_addr, cfg.n_upstream);
	event_base_dispatch(base);
	dns_server_free(srv);
	event_free(sigterm);
	event_free(sigint);
	event_base_free(base);
	dns_cache_free(cache);
	elog_free(elog);
	policy_free(pol);
	return 0;
}
