/* Internal to nft/: the few netlink round trips that ruleset.c and net.c
 * share. Not part of the module's interface. */
#ifndef AIRLOCK_NFT_NLUTIL_H
#define AIRLOCK_NFT_NLUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <libmnl/libmnl.h>

/* Big enough for one recv of a dump part (the kernel fills at most a page
 * or so per message batch, libmnl suggests 8 KiB; 32 KiB is safe). */
#define NFT_NL_RECV_SIZE 32768

/* nft_socket (nft.h) wrapped for libmnl. NULL with errno. */
struct mnl_socket *nft_nl_open(int bus);
/* Wrap fd, a bound netlink socket the caller keeps, for libmnl: the
 * wrapper holds a duplicate, so mnl_socket_close() on it leaves the caller's
 * descriptor (and the socket) open. NULL with errno. */
struct mnl_socket *nft_nl_wrap(int fd);

/* Send req (one message) and run cb over every reply until the kernel says
 * the request is done (ACK, NLMSG_DONE, or an error). seq is the request's
 * sequence number. Returns 0, or -1 with errno (the kernel's error for a
 * failed request). */
int nft_nl_talk(struct mnl_socket *nl, const void *req, size_t len, uint32_t seq, mnl_cb_t cb,
                void *data);

/* Per-message outcome of a batch sent with nft_nl_batch(). */
struct nft_nl_ack {
	uint32_t seq; /* request the kernel answered */
	int error;    /* 0 or a positive errno */
};

/* Send several messages in one datagram and collect the kernel's answers
 * until the message with sequence number last (which must ask for an ACK)
 * is answered, or an error arrives for stop_seq (a failure of the batch as
 * a whole, reported against its first message). Both netlink buses used
 * here process every message of a datagram in order and keep going after
 * an error, so the answer to last is the final one.
 * The first error is returned in *failed (seq and positive errno);
 * failed->error is 0 when everything succeeded. Returns 0 when the answers
 * were read, -1 with errno when the socket itself failed (ETIMEDOUT when
 * the kernel stayed silent for a second). */
int nft_nl_batch(struct mnl_socket *nl, const void *buf, size_t len, uint32_t last,
                 uint32_t stop_seq, struct nft_nl_ack *failed);

#endif
