/* The sandbox's nftables ruleset (DESIGN.md, Network inside the sandbox),
 * built by pure code into a netlink batch and committed in one atomic
 * transaction through libmnl, into the sandbox's network namespace with
 * CAP_NET_ADMIN over it (from inside, or through a socket made inside:
 * nft_socket). Not thread-safe: the netlink calls share static scratch
 * buffers. */
#ifndef AIRLOCK_NFT_NFT_H
#define AIRLOCK_NFT_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nft_refuse;

struct nft_params {
	uint16_t tproxy_port; /* AIRLOCK_TPROXY_PORT */
	uint16_t dns_port;    /* AIRLOCK_DNS_PORT */
	uint16_t nflog_group; /* AIRLOCK_NFLOG_GROUP */
	/* The refusals at the SYN (nft/refuse.h), borrowed; NULL: none, no
	 * chain syn_output. */
	const struct nft_refuse *refuse;
	/* Pod mode (airlock pod-init, docs/deploy.md): the ruleset goes into
	 * a pod's network namespace, which has real interfaces and a proxy
	 * sidecar in it. Sockets of pod_exempt_uid (the sidecar's; never 0)
	 * pass first in each output chain; IPv6 neighbour discovery passes;
	 * chain filter_input refuses what is not a reply, loopback or
	 * neighbour discovery. false: the sandbox's ruleset, none of this. */
	bool pod;
	uint32_t pod_exempt_uid;
};

/* Fill p with the constants of common/netconst.h, no refusals, not pod. */
void nft_params_default(struct nft_params *p);

/* Build the whole ruleset (table inet airlock, its chains and rules, and
 * with p->refuse the refuse chain and its sets) as one batch into buf.
 * Pure: no socket. Returns the batch length, or -1 if buf is too small
 * (64 KiB always holds it). */
long nft_ruleset_build(const struct nft_params *p, void *buf, size_t buflen, uint32_t seq);

/* Build and commit the ruleset, once per network namespace: if table inet
 * airlock exists already, nothing changes and this fails (EEXIST). Returns
 * 0, or -1 with a one-line reason in err. */
int nft_ruleset_apply(const struct nft_params *p, char *err, size_t errlen);

/* Self-test: read the ruleset back from the kernel and check the table,
 * the chains (type, hook, priority, policy; syn_output exactly when
 * p->refuse), the rule counts, and that the rules redirect to p's ports
 * and log to p's group. The sets' elements are not read back. 0 or -1
 * with the reason. */
int nft_ruleset_verify(const struct nft_params *p, char *err, size_t errlen);

/* Set-up from outside the namespace. A netlink socket stays in the
 * network namespace it was created in, so a process inside (the sandbox's
 * init) creates it and another (the supervisor) may drive it: the kernel
 * wants CAP_NET_ADMIN over the namespace from both the socket's creator
 * and the sender, which the owner of the namespace's user namespace has.
 *
 * nft_socket: a netlink socket on bus (NETLINK_ROUTE or NETLINK_NETFILTER),
 * bound, CLOEXEC, with a one-second receive timeout. fd or -1 + errno. */
int nft_socket(int bus);

/* nft_ruleset_apply then nft_ruleset_verify over fd, a NETLINK_NETFILTER
 * socket from nft_socket; the caller keeps it and closes it when a wait no
 * longer matters: closing an nfnetlink socket waits for the kernel's
 * clean-up of the last transaction (an RCU grace period, milliseconds
 * under load; ruleset.c says why). Returns 0, or -1 with the reason. */
int nft_ruleset_apply_verify_fd(const struct nft_params *p, int fd, char *err, size_t errlen);

/* Loopback set-up through rtnetlink: lo up, the egress addresses, default
 * routes for v4 and v6 via lo with those sources. 0 or -1 + reason.
 * nft_net_setup works in the caller's namespace; _fd over fd, a
 * NETLINK_ROUTE socket from nft_socket, in that socket's. */
int nft_net_setup(char *err, size_t errlen);
int nft_net_setup_fd(int fd, char *err, size_t errlen);

/* Self-test: lo is up and no other interface is (a kernel with tunnel
 * modules gives every namespace down fallback devices such as sit0), and
 * the v4 and v6 default routes lead through lo with the egress sources.
 * 0 or -1 + reason. Namespaces as for nft_net_setup. */
int nft_net_verify(char *err, size_t errlen);
int nft_net_verify_fd(int fd, char *err, size_t errlen);

#endif
