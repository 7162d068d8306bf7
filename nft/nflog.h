/* Blocked packets from the ruleset's NFLOG group, turned into egress log
 * events ("packet") by the supervisor. */
#ifndef AIRLOCK_NFT_NFLOG_H
#define AIRLOCK_NFT_NFLOG_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct elog;
struct nflog_reader;

/* Inside the sandbox's netns: open a netlink socket bound to the group
 * (copy mode packet, 128 bytes per packet), CLOEXEC and non-blocking, ready
 * to be passed to the supervisor. Works rootless (CAP_NET_ADMIN over the
 * namespace is enough). Returns the fd or -1 + reason; only one socket per
 * namespace can hold a group. */
int nflog_open(uint16_t group, char *err, size_t errlen);

/* One blocked packet, decoded from an NFLOG message. Pure parser. */
struct nflog_packet {
	int family;      /* AF_INET / AF_INET6 */
	uint8_t l4proto; /* IPPROTO_* */
	char dst[46];    /* destination address text */
	int dport;       /* -1 when the protocol has no ports */
	char proto[12];  /* "udp", "tcp", "icmp", "icmpv6", "raw:N" */
};
/* Parse every packet in one netlink datagram (buf 4-byte aligned, as any
 * recv buffer), calling fn (may be NULL) per packet. Bounded by len, never
 * reads past it. Returns the number of packets, or -1 if the datagram is
 * malformed or holds anything but NFLOG packets. */
int nflog_parse(const void *buf, size_t len, void (*fn)(const struct nflog_packet *pkt, void *arg),
                void *arg);

/* Supervisor side: read fd (takes ownership, also on failure) in the loop
 * and write one "packet" event per blocked packet to log (borrowed, must
 * outlive the reader): verdict "deny", reason "blocked by the sandbox
 * firewall", ip, port (when the protocol has one), proto. A socket overrun
 * is logged as a "packet" event saying packets were lost. At most 32
 * datagrams are read per wake-up. NULL on failure. */
struct nflog_reader *nflog_reader_new(struct event_base *base, int fd, struct elog *log);
void nflog_reader_free(struct nflog_reader *r);

#endif
