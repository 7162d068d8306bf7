/* Refusals at the SYN (DESIGN.md, "Network inside the sandbox"): the
 * transparent connections the proxy would refuse whatever the client
 * sends after the handshake (no name from SNI or Host, no DNS answer can
 * change them) are refused by the ruleset instead, with a TCP reset to
 * the SYN, so the client sees "connection refused". Two classes:
 *  - no-rule: the destination port is one no allow rule lists (enforce
 *    mode only: audit lets it through to the proxy);
 *  - address-guard: the address is in a guarded block (policy/guard.h)
 *    that no allow cidr rule may open. The guard refuses in audit mode
 *    too, so these stay.
 * Left to the proxy, which refuses them after the handshake as before:
 * the host's own addresses (they change during a run), the unassigned
 * rest of IPv6, guarded blocks some allow cidr rule lies in (on any port:
 * the rule may open part of the block on some ports), deny cidr rules
 * (their rule's file:line belongs in the log line), and a policy whose
 * open ports need more than NFT_REFUSE_MAX_PORTS ranges. */
#ifndef AIRLOCK_NFT_REFUSE_H
#define AIRLOCK_NFT_REFUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct policy;

#define NFT_REFUSE_MAX_PORTS  128 /* open port ranges (policies list a few) */
#define NFT_REFUSE_MAX_RANGES 96  /* guarded ranges per family (guard_blocks has ~70) */

/* The NFLOG prefixes of the two rules: the reader (nft/nflog.c) tells a
 * refused SYN from the catch-all reject by them. */
#define NFT_REFUSE_PREFIX         "airlock-syn "
#define NFT_REFUSE_PREFIX_NO_RULE NFT_REFUSE_PREFIX "no-rule"
#define NFT_REFUSE_PREFIX_GUARD   NFT_REFUSE_PREFIX "address-guard"

/* An inclusive address range, network order; AF_INET uses 4 bytes. */
struct nft_range {
	uint8_t lo[16], hi[16];
};

struct nft_refuse {
	bool ports; /* refuse SYNs to ports outside open[] */
	size_t n_open;
	struct {
		uint16_t lo, hi;
	} open[NFT_REFUSE_MAX_PORTS]; /* sorted, disjoint */
	size_t n_guard4, n_guard6;
	struct nft_range guard4[NFT_REFUSE_MAX_RANGES]; /* sorted, disjoint */
	struct nft_range guard6[NFT_REFUSE_MAX_RANGES];
};

/* Fill out from the compiled policy (borrowed for the call) and its mode.
 * Pure. Always succeeds: what does not fit is left to the proxy. */
void nft_refuse_build(const struct policy *p, struct nft_refuse *out);

#endif
