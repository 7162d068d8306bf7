/* Blocked packets from the ruleset's NFLOG group, turned into egress log
 * events ("packet") by the supervisor. */
#ifndef AIRLOCK_NFT_NFLOG_H
#define AIRLOCK_NFT_NFLOG_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct elog;
struct nflog_reader;

/* Inside the sandbox's netns: open a netlink socket bound to the group,
 * ready to be passed to the supervisor. Returns the fd or -1 + reason. */
int nflog_open(uint16_t group, char *err, size_t errlen);

/* One blocked packet, decoded from an NFLOG message. Pure parser. */
struct nflog_packet {
	int family;          /* AF_INET / AF_INET6 */
	uint8_t l4proto;     /* IPPROTO_* */
	char dst[46];        /* destination address text */
	int dport;           /* -1 when the protocol has no ports */
	char proto[12];      /* "udp", "tcp", "icmp", "icmpv6", "raw:N" */
};
/* Parse every packet in one netlink datagram, calling fn per packet.
 * Returns the number of packets, or -1 if the datagram is malformed. */
int nflog_parse(const void *buf, size_t len,
                void (*fn)(const struct nflog_packet *pkt, void *arg), void *arg);

/* Supervisor side: read fd (takes ownership) in the loop and write one
 * "packet" event per blocked packet to log (borrowed). */
struct nflog_reader *nflog_reader_new(struct event_base *base, int fd,
                                      struct elog *log);
void nflog_reader_free(struct nflog_reader *r);

#endif
