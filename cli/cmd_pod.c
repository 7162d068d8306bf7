/* `airlock pod-init`: program the pod-mode ruleset into the network
 * namespace we are in (a Kubernetes pod's, from an init container with
 * NET_ADMIN), so that the pod's own network namespace is the sandbox and
 * `airlock proxy --transparent --dns` in a sidecar, running as the one
 * exempt uid, decides every connection (docs/deploy.md, Pod mode). */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "common/log.h"
#include "common/util.h"
#include "nft/nft.h"

/* Not Istio's (1337, 15001, 15006, 15053): a pod must not hold both. */
#define POD_PROXY_UID_DEFAULT 3128
#define POD_TPROXY_PORT       3129
#define POD_DNS_PORT          3153

static const char usage[] =
        "usage: airlock pod-init --proxy-uid UID [--transparent-port PORT] [--dns-port PORT]\n"
        "\n"
        "Program the pod-mode nftables ruleset into this network namespace: every\n"
        "TCP connection goes to airlock proxy's transparent listener, DNS (UDP and\n"
        "TCP port 53) to its DNS listener, everything else is refused and logged\n"
        "to NFLOG group 7; IPv6 neighbour discovery passes; only replies come in.\n"
        "Sockets of UID (the proxy's; not 0) are the only exemption. Needs\n"
        "CAP_NET_ADMIN; once per network namespace. Do not share a pod with a\n"
        "service mesh's sidecar (docs/deploy.md).\n"
        "\n"
        "      --proxy-uid UID          the proxy sidecar's uid (e.g. 3128)\n"
        "      --transparent-port PORT  the proxy's transparent listener (default 3129)\n"
        "      --dns-port PORT          the proxy's DNS listener (default 3153)\n"
        "  -h, --help                   this text\n";

static int
port_arg(const char *opt, const char *s, uint16_t *out)
{
	uint64_t v;

	if (parse_uint(s, 1, 65535, &v) < 0) {
		log_warnx("pod-init: %s '%s': not a port (1-65535)", opt, s);
		return -1;
	}
	*out = (uint16_t)v;
	return 0;
}

int
cmd_pod_init(int argc, char **argv)
{
	static const struct option opts[] = {
	        {"proxy-uid", required_argument, NULL, 'u'},
	        {"transparent-port", required_argument, NULL, 't'},
	        {"dns-port", required_argument, NULL, 'd'},
	        {"help", no_argument, NULL, 'h'},
	        {NULL, 0, NULL, 0},
	};
	struct nft_params p;
	char err[512];
	bool have_uid = false;
	uint64_t uid = 0;
	int c;

	nft_params_default(&p);
	p.pod = true;
	p.tproxy_port = POD_TPROXY_PORT;
	p.dns_port = POD_DNS_PORT;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'u':
			/* 0 would exempt every root process of every container
			 * in the pod; (uid_t)-1 is no uid. */
			if (parse_uint(optarg, 0, UINT32_MAX - 1, &uid) < 0) {
				log_warnx("pod-init: --proxy-uid '%s': not a uid", optarg);
				return EXIT_USAGE;
			}
			if (uid == 0) {
				log_warnx("pod-init: --proxy-uid 0: that would exempt every root "
				          "process in the pod; run the proxy as a uid of its own "
				          "(e.g. %d)",
				          POD_PROXY_UID_DEFAULT);
				return EXIT_USAGE;
			}
			have_uid = true;
			break;
		case 't':
			if (port_arg("--transparent-port", optarg, &p.tproxy_port) < 0)
				return EXIT_USAGE;
			break;
		case 'd':
			if (port_arg("--dns-port", optarg, &p.dns_port) < 0)
				return EXIT_USAGE;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default: {
			char why[160];

			opt_error(why, sizeof(why), c, argc, argv, "airlock pod-init --help");
			log_warnx("pod-init: %s", why);
			return EXIT_USAGE;
		}
		}
	}
	if (optind < argc) {
		log_warnx("pod-init: unexpected argument '%s'", argv[optind]);
		return EXIT_USAGE;
	}
	if (!have_uid) {
		log_warnx("pod-init: --proxy-uid is required (the proxy sidecar's uid)");
		return EXIT_USAGE;
	}
	if (p.tproxy_port == p.dns_port) {
		log_warnx("pod-init: --transparent-port and --dns-port are both %u", p.dns_port);
		return EXIT_USAGE;
	}
	p.pod_exempt_uid = (uint32_t)uid;
	if (nft_ruleset_apply(&p, err, sizeof(err)) < 0 ||
	    nft_ruleset_verify(&p, err, sizeof(err)) < 0) {
		log_warnx("pod-init: %s", err);
		return 1;
	}
	printf("airlock pod-init: ruleset in place: TCP to port %u, DNS to port %u, uid %u "
	       "exempt\n",
	       p.tproxy_port, p.dns_port, p.pod_exempt_uid);
	return 0;
}
