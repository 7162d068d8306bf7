/* The sandbox's network constants: every port, address and group number
 * that the sandbox, nftables ruleset, proxy and DNS listener must agree on.
 * Change them here and nowhere else. */
#ifndef AIRLOCK_COMMON_NETCONST_H
#define AIRLOCK_COMMON_NETCONST_H

/* Explicit HTTP proxy (CONNECT and absolute-form), 127.0.0.1 only. */
#define AIRLOCK_PROXY_PORT 3128
/* Transparent TCP listener, 127.0.0.1 and [::1]; nft redirects here. */
#define AIRLOCK_TPROXY_PORT 15001
/* DNS listener, udp and tcp on 127.0.0.1; nft redirects port 53 here. */
#define AIRLOCK_DNS_PORT 53
/* NFLOG group carrying blocked packets to the supervisor. */
#define AIRLOCK_NFLOG_GROUP 7
/* nftables table (family inet) that holds the whole ruleset. */
#define AIRLOCK_NFT_TABLE "airlock"

/* Egress source addresses on lo (benchmark range RFC 2544 and a ULA; never
 * routed anywhere) with the default routes that make every destination
 * reachable as far as the nat hook. */
#define AIRLOCK_EGRESS_V4 "198.18.0.1"
#define AIRLOCK_EGRESS_V6 "fd00:a1::1"

#define AIRLOCK_HOSTNAME "airlock"

#endif
