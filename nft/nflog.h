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
/* nflog_open in two steps: the socket, made inside the namespace (it stays
 * in the one it was made in), and the group bound through it, which may
 * happen in another process with CAP_NET_ADMIN over the namespace (the
 * supervisor: see nft_socket). 0 / fd, or -1 + reason. */
int nflog_socket(char *err, size_t errlen);
int nflog_bind(int fd, uint16_t group, char *err, size_t errlen);

/* One blocked packet, decoded from an NFLOG message. Pure parser. */
struct nflog_packet {
	int family;      /* AF_INET / AF_INET6 */
	uint8_t l4proto; /* IPPROTO_* */
	char dst[46];    /* destination address text */
	int dport;       /* -1 when the protocol has no ports */
	int sport;       /* the same, the source port */
	/* TCP: the sequence number (bytes 4-7), which a retransmitted SYN
	 * repeats and a new connection from a reused port does not; -1 when
	 * not TCP or cut off by the snap length */
	int64_t tcp_seq;
	char proto[12]; /* "udp", "tcp", "icmp", "icmpv6", "raw:N" */
	/* The log rule's prefix (NFULA_PREFIX): "" for the catch-all
	 * reject, NFT_REFUSE_PREFIX... for a SYN refused (nft/refuse.h); a
	 * prefix that does not fit is cut, and then matches neither. */
	char prefix[32];
};
/* Parse every packet in one netlink datagram (buf 4-byte aligned, as any
 * recv buffer), calling fn (may be NULL) per packet. Bounded by len, never
 * reads past it. Returns the number of packets, or -1 if the datagram is
 * malformed or holds anything but NFLOG packets. */
int nflog_parse(const void *buf, size_t len, void (*fn)(const struct nflog_packet *pkt, void *arg),
                void *arg);

/* Supervisor side: read fd (takes ownership, also on failure) in the loop
 * and turn blocked packets into "packet" events on log (borrowed, must
 * outlive the reader): verdict "deny", ip, port (when the protocol has
 * one), proto. At most 32 datagrams are read per wake-up.
 *
 * A TCP SYN the refuse chain logged (prefix NFT_REFUSE_PREFIX...) is a
 * refused connection instead: a "tcp" event, verdict "deny", ip, port,
 * the proxy's reason token (no-rule, address-guard) and sentence, written
 * through the log's counting of repeated events (elog_event_agg: the
 * first at once, repeats in one line per window with "count"), once per
 * connection attempt: the source port is part of its key here, so a
 * retransmitted SYN is not another attempt (the reset makes the client
 * give up, so there is rarely one). Those keys share the table below;
 * when it is full, attempts are still written, retransmits no longer
 * told apart.
 *
 * Aggregated per destination (family, protocol, address, port) so a flood
 * cannot fill the disk under the log:
 *  - the first packet to a destination is written at once, reason
 *    "blocked by the sandbox firewall";
 *  - further packets to it are counted; when the window closes (a timer,
 *    NFLOG_AGG_WINDOW_MS) one line is written for each destination that
 *    had any, reason "blocked by the sandbox firewall; N more packets since
 *    the last line": N is the packets to that destination that no earlier
 *    line showed (not the window's total, which is N or N + 1);
 *  - a destination with no packet for a whole window is forgotten, so its
 *    next packet is again written at once;
 *  - the table holds NFLOG_AGG_MAX_DESTS destinations; packets to others
 *    are only counted, in one line per window with no ip: "too many blocked
 *    destinations; N packets not itemised";
 *  - a socket overrun (the kernel dropped packets) is written at once as
 *    "blocked packets lost: NFLOG socket overrun", further overruns in the
 *    window as one line "...; N more times since the last line".
 * So at most about 2 * NFLOG_AGG_MAX_DESTS + 2 lines per window, and fixed
 * memory, whatever the sandbox sends. NULL on failure. */
#define NFLOG_AGG_WINDOW_MS 1000
#define NFLOG_AGG_MAX_DESTS 1024
struct nflog_reader *nflog_reader_new(struct event_base *base, int fd, struct elog *log);

/* The same with another window or table size (tests; 0 = the default;
 * max_dests is capped at 2^20). opts is borrowed for the call. */
struct nflog_reader_opts {
	unsigned window_ms;
	size_t max_dests;
};
struct nflog_reader *nflog_reader_new_opts(struct event_base *base, int fd, struct elog *log,
                                           const struct nflog_reader_opts *opts);

/* Reads what is still queued on the socket (bounded) and writes every
 * count not yet written, then frees. Call it before the task-end line, so
 * those lines land inside the task and in its totals. */
void nflog_reader_free(struct nflog_reader *r);

#endif
