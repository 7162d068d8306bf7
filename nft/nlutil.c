#include "nft/nlutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/netlink.h>

#include "common/util.h"
#include "nft/nft.h"

int
nft_socket(int bus)
{
	/* Port id 0: the kernel picks one. Every answer to our own request
	 * arrives synchronously; the timeout only keeps a kernel that never
	 * answers from hanging set-up. */
	struct sockaddr_nl addr = {.nl_family = AF_NETLINK};
	struct timeval tv = {.tv_sec = 1, .tv_usec = 0};
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, bus);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		fd_close(&fd);
	return fd;
}

struct mnl_socket *
nft_nl_open(int bus)
{
	struct mnl_socket *nl;
	int fd = nft_socket(bus);

	if (fd < 0)
		return NULL;
	nl = mnl_socket_fdopen(fd);
	if (nl == NULL)
		fd_close(&fd);
	return nl;
}

struct mnl_socket *
nft_nl_wrap(int fd)
{
	struct mnl_socket *nl;
	int dup = fcntl(fd, F_DUPFD_CLOEXEC, 3);

	if (dup < 0)
		return NULL;
	nl = mnl_socket_fdopen(dup);
	if (nl == NULL)
		fd_close(&dup);
	return nl;
}

/* The one receive buffer of nft_nl_talk and nft_nl_batch, which never
 * run at once: static scratch, aligned so libmnl reads nlmsghdr fields in
 * place. Not thread-local: airlock drives netlink from one thread, and a
 * thread-local buffer is zeroed at every start of the program (glibc
 * clears the static TLS block), touching pages most runs never use; in bss
 * a page costs only once it is used. */
static uint64_t recv_buf[NFT_NL_RECV_SIZE / sizeof(uint64_t)];

static ssize_t
nl_recv(struct mnl_socket *nl, void *buf, size_t len)
{
	ssize_t n;

	do {
		n = mnl_socket_recvfrom(nl, buf, len);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		errno = ETIMEDOUT;
	return n;
}

int
nft_nl_talk(struct mnl_socket *nl, const void *req, size_t len, uint32_t seq, mnl_cb_t cb,
            void *data)
{
	unsigned int portid = mnl_socket_get_portid(nl);
	ssize_t n;
	int ret;

	if (mnl_socket_sendto(nl, req, len) < 0)
		return -1;
	for (;;) {
		n = nl_recv(nl, recv_buf, sizeof(recv_buf));
		if (n < 0)
			return -1;
		ret = mnl_cb_run(recv_buf, (size_t)n, seq, portid, cb, data);
		if (ret == MNL_CB_ERROR)
			return -1;
		if (ret == MNL_CB_STOP)
			return 0;
	}
}

struct batch_state {
	uint32_t last;
	uint32_t stop_seq;
	bool done;
	struct nft_nl_ack *failed;
};

static int
batch_error_cb(const struct nlmsghdr *nlh, void *data)
{
	struct batch_state *st = data;
	const struct nlmsgerr *e;

	if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(*e))) {
		errno = EBADMSG;
		return MNL_CB_ERROR;
	}
	e = mnl_nlmsg_get_payload(nlh);
	if (e->error != 0 && st->failed->error == 0) {
		st->failed->seq = e->msg.nlmsg_seq;
		st->failed->error = -e->error;
	}
	if (e->msg.nlmsg_seq == st->last || (e->error != 0 && e->msg.nlmsg_seq == st->stop_seq))
		st->done = true;
	return MNL_CB_OK;
}

int
nft_nl_batch(struct mnl_socket *nl, const void *buf, size_t len, uint32_t last, uint32_t stop_seq,
             struct nft_nl_ack *failed)
{
	struct batch_state st = {
	        .last = last,
	        .stop_seq = stop_seq,
	        .done = false,
	        .failed = failed,
	};
	mnl_cb_t ctl[NLMSG_MIN_TYPE] = {0};
	unsigned int portid = mnl_socket_get_portid(nl);
	ssize_t n;

	memset(failed, 0, sizeof(*failed));
	ctl[NLMSG_ERROR] = batch_error_cb;
	if (mnl_socket_sendto(nl, buf, len) < 0)
		return -1;
	while (!st.done) {
		n = nl_recv(nl, recv_buf, sizeof(recv_buf));
		if (n < 0)
			return -1;
		/* seq 0: answers to several requests arrive here. */
		if (mnl_cb_run2(recv_buf, (size_t)n, 0, portid, NULL, &st, ctl, ARRAY_SIZE(ctl)) ==
		    MNL_CB_ERROR)
			return -1;
	}
	return 0;
}
