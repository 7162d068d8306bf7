/* The host's own addresses for the whole run: an rtnetlink socket
 * subscribed to address notifications (RTMGRP_IPV4_IFADDR and
 * RTMGRP_IPV6_IFADDR), read in the supervisor's event loop, keeps a
 * guard_hosts set (policy/guard.h) current for the address guard. Used by
 * `airlock run` and `airlock proxy`, in the network namespace the
 * supervisor runs in (the host's). docs/policy.md, "Address guard". */
#ifndef AIRLOCK_NFT_HOSTADDR_H
#define AIRLOCK_NFT_HOSTADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/guard.h"

struct event_base;
struct hostaddr_watch;

/* Subscribe first, then dump (RTM_GETADDR) on the same socket, and apply
 * both in the order the kernel queued them: a change made during the dump
 * is either in it or notified after it, so none falls between the two.
 * The first dump is read before this returns (set-up, before the loop
 * runs; bounded by HOSTADDR_START_MS), so the set is KNOWN when the first
 * connection comes.
 *
 * Afterwards, in the loop, never blocking:
 *  - RTM_NEWADDR / RTM_DELADDR add and remove entries;
 *  - lost notifications (ENOBUFS: the socket's receive buffer overran; a
 *    datagram truncated or malformed) and a dump the kernel marks
 *    interrupted (NLM_F_DUMP_INTR) start a fresh dump; from the loss until
 *    that dump's end the set is GUARD_HOSTS_READING, so every public
 *    address is refused as possibly the host's (fail closed);
 *  - over the set's bound it is GUARD_HOSTS_FULL (the same refusal) until
 *    an address goes and a fresh dump fits again;
 *  - any other socket error leaves it GUARD_HOSTS_LOST for the rest of the
 *    run, with a warning.
 *
 * hosts is borrowed and must outlive the watch. NULL with a one-line
 * reason in err when the socket, the subscription or the first dump
 * fails. */
#define HOSTADDR_START_MS 1000
struct hostaddr_watch *hostaddr_watch_new(struct event_base *base, struct guard_hosts *hosts,
                                          char *err, size_t errlen);

/* The same with test settings. rcvbuf: another receive buffer (a small
 * one overruns at once); 0 = the default (HOSTADDR_RCVBUF, capped by the
 * kernel's net.core.rmem_max). lose_dumps: bit i set discards every reply
 * to the i-th dump request (the first is 0) as it arrives, as an overrun
 * can lose the kernel's answer to one (its error, or its end); 0 in use.
 * opts is borrowed for the call. */
#define HOSTADDR_RCVBUF (256 * 1024)
struct hostaddr_watch_opts {
	int rcvbuf;
	uint32_t lose_dumps;
};
struct hostaddr_watch *hostaddr_watch_new_opts(struct event_base *base, struct guard_hosts *hosts,
                                               const struct hostaddr_watch_opts *opts, char *err,
                                               size_t errlen);

/* Dumps started after the first (lost notifications, interrupted dumps,
 * an overflow that may have cleared). For tests and the -v log. */
unsigned hostaddr_watch_rereads(const struct hostaddr_watch *w);

/* Closes the socket; the set keeps its last contents and is marked
 * GUARD_HOSTS_LOST. NULL is fine. */
void hostaddr_watch_free(struct hostaddr_watch *w);

/* --- the parser (pure) ---------------------------------------------------
 * One datagram from the socket: address notifications and dump parts
 * (RTM_NEWADDR, RTM_DELADDR), and a dump's end (NLMSG_DONE) or error
 * (NLMSG_ERROR). Other message types are skipped; so are addresses of
 * other families. */
enum hostaddr_kind {
	HOSTADDR_NEW,
	HOSTADDR_DEL,
	HOSTADDR_DONE,
	HOSTADDR_ERROR,
};

struct hostaddr_msg {
	enum hostaddr_kind kind;
	uint32_t seq, portid; /* the message's nlmsg_seq and nlmsg_pid */
	bool dump_intr;       /* NLM_F_DUMP_INTR: its dump saw changes */
	int error;            /* HOSTADDR_ERROR: a positive errno (0 = an ACK) */
	/* HOSTADDR_NEW / _DEL: the local address (IFA_LOCAL when present,
	 * as on a point-to-point link, else IFA_ADDRESS). */
	struct guard_host_addr addr;
};

/* Call fn (may be NULL) for every message of buf (len bytes, aligned as
 * any recv buffer) in order. Bounded by len. Returns the number of
 * messages handed on, or -1 if the datagram is malformed (a bad length, an
 * address message too short or whose address is missing or of the wrong
 * size): messages before the bad one have been handed on, the rest of the
 * datagram is lost. */
int hostaddr_parse(const void *buf, size_t len, void (*fn)(const struct hostaddr_msg *m, void *arg),
                   void *arg);

#endif
