/* `airlock proxy`: the allowlist proxy alone, explicit mode, for containers
 * and VMs that bring their own isolation (docs/proxy.md). */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
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
#include "common/fdres.h"
#include "common/log.h"
#include "common/util.h"
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

static void
proxy_usage(FILE *out)
{
	fprintf(out,
	        "usage: airlock proxy -p POLICY --listen ADDR:PORT [OPTIONS]\n"
	        "\n"
	        "Run the allowlist proxy alone (explicit mode: HTTP CONNECT and absolute-form\n"
	        "HTTP/1.1), for containers and VMs that bring their own isolation. Every\n"
	        "connection is checked against POLICY and logged as JSON Lines.\n"
	        "\n"
	        "  -p, --policy POLICY       policy file or preset name (required)\n"
	        "  -l, --listen ADDR:PORT    address to listen on, e.g. 127.0.0.1:3128 or\n"
	        "                            [::1]:3128 (required)\n"
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
	        "  -h, --help                this text\n"
	        "\n"
	        "Runs until SIGINT or SIGTERM. Exit status: 0 after a signal, 1 when the\n"
	        "policy is invalid, the proxy cannot start or its egress log failed, 2 on\n"
	        "a usage error.\n");
}

static void
proxy_on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	log_info("proxy: signal %d, stopping", (int)sig);
	event_base_loopbreak(arg);
}

/* Parse ADDR:PORT (a v4 or bracketed v6 address and a non-zero port). */
static int
proxy_parse_listen(const char *spec, struct sockaddr_storage *ss, int *len)
{
	*len = sizeof(*ss);
	memset(ss, 0, sizeof(*ss));
	if (evutil_parse_sockaddr_port(spec, (struct sockaddr *)ss, len) != 0 ||
	    (ss->ss_family != AF_INET && ss->ss_family != AF_INET6) ||
	    (ss->ss_family == AF_INET && ((struct sockaddr_in *)ss)->sin_port == 0) ||
	    (ss->ss_family == AF_INET6 && ((struct sockaddr_in6 *)ss)->sin6_port == 0)) {
		fprintf(stderr,
		        "airlock proxy: --listen '%s': expected ADDR:PORT, e.g. 127.0.0.1:3128\n",
		        spec);
		return -1;
	}
	return 0;
}

/* A listening socket for ADDR:PORT; -1 with a message on failure. */
static int
proxy_listen_on(const char *spec)
{
	struct sockaddr_storage ss;
	int len, fd, one = 1;

	if (proxy_parse_listen(spec, &ss, &len) != 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		fprintf(stderr, "airlock proxy: socket: %s\n", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, (socklen_t)len) != 0 || listen(fd, 4096) != 0) {
		fprintf(stderr, "airlock proxy: listening on %s: %s\n", spec, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* The broker's resolver: --dns-upstream addresses, else
 * /etc/resolv.conf's; the hosts file first, as every other proxy does
 * (docs/proxy.md). 0, or -1 after saying why. */
static int
proxy_dns_config(struct resolver_config *rc, char **upstreams, size_t n_up,
                 const char *hosts_path)
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
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	const char *policy_path = NULL, *listen_spec = NULL, *log_path = "-";
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
	struct event *sigint = NULL, *sigterm = NULL;
	struct proxy_config cfg;
	char err[256], task[32];
	int opt, fd = -1, logfd, status = 1;
	uint64_t start = now_ms();

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
	if (optind != argc || policy_path == NULL || listen_spec == NULL) {
		fprintf(stderr, "airlock proxy: -p POLICY and --listen ADDR:PORT are required%s\n",
		        optind != argc ? " (and no other arguments)" : "");
		proxy_usage(stderr);
		return EXIT_USAGE;
	}
	{
		struct sockaddr_storage ss;
		int len;

		if (proxy_parse_listen(listen_spec, &ss, &len) != 0)
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

	if ((fd = proxy_listen_on(listen_spec)) < 0)
		goto out;
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
	memset(&cfg, 0, sizeof(cfg));
	cfg.policy = pol;
	cfg.log = elog;
	cfg.broker = broker;
	cfg.max_conns = (unsigned)max_conns;
	if ((px = proxy_new(base, &cfg)) == NULL)
		goto out;
	if (proxy_add_listener(px, fd, PROXY_LISTEN_EXPLICIT) != 0) {
		fd = -1;
		goto out;
	}
	fd = -1;
	sigint = evsignal_new(base, SIGINT, proxy_on_signal, base);
	sigterm = evsignal_new(base, SIGTERM, proxy_on_signal, base);
	if (sigint == NULL || sigterm == NULL || evsignal_add(sigint, NULL) != 0 ||
	    evsignal_add(sigterm, NULL) != 0) {
		fprintf(stderr, "airlock proxy: cannot watch signals\n");
		goto out;
	}
	{
		const char *const targv[] = {"airlock", "proxy", "--listen", listen_spec};
		struct elog_task_start ts = {
		        .policy = policy_name(pol),
		        .policy_sha256 = policy_sha256(pol),
		        .mode = policy_mode(pol) == POLICY_MODE_AUDIT ? "audit" : "enforce",
		        .argv = targv,
		        .argc = 4,
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

		if (worker_confine(WORKER_VIEW_OPTIONAL | WORKER_OWN_STDERR, &wc, err, sizeof(err)) !=
		    0) {
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
	fprintf(stderr, "airlock proxy: listening on %s (policy %s, %s)\n", listen_spec,
	        policy_name(pol), policy_mode(pol) == POLICY_MODE_AUDIT ? "audit" : "enforce");
	event_base_dispatch(base);
	status = 0;
out:
	/* Connections still open are closed and logged before task-end, and
	 * counts still held go out. A log that failed at any point fails the
	 * run: its record is incomplete (docs/proxy.md). */
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
	broker_reap(broker_pid);
	if (base != NULL)
		event_base_free(base);
	fd_close(&fd);
	elog_free(elog);
	policy_free(pol);
	return status;
}
