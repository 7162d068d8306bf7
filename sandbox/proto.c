/* The supervisor <-> init messages: fixed-size structs on a SOCK_SEQPACKET
 * socketpair, the listeners riding along as SCM_RIGHTS. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/internal.h"

int
sbx_msg_send(int sock, const struct sbx_msg *m, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBX_N_SETUP_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = (void *)m, .iov_len = sizeof(*m)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	if (nfds > SBX_N_SETUP_FDS) {
		errno = EINVAL;
		return -1;
	}
	if (nfds > 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	do
		n = nfds > 0 ? sendmsg(sock, &mh, MSG_NOSIGNAL)
		             : send(sock, m, sizeof(*m), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if ((size_t)n != sizeof(*m)) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

int
sbx_msg_recv(int sock, struct sbx_msg *m, int *fds, size_t maxfds, size_t *nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SBX_N_SETUP_FDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
	struct msghdr mh = {
	        .msg_iov = &iov,
	        .msg_iovlen = 1,
	        .msg_control = u.buf,
	        .msg_controllen = sizeof(u.buf),
	};
	size_t got = 0;
	ssize_t n;

	*nfds = 0;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *in = (int *)(void *)CMSG_DATA(c);
		for (size_t i = 0; i < k; i++) {
			if (got < maxfds)
				fds[got++] = in[i];
			else
				close(in[i]);
		}
	}
	*nfds = got;
	if (n == 0 && got == 0)
		return 0;
	if ((size_t)n < sizeof(*m) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (size_t i = 0; i < got; i++)
			fd_close(&fds[i]);
		*nfds = 0;
		errno = EPROTO;
		return -1;
	}
	return 1;
}

int
sbx_pkt_send(int sock, const void *buf, size_t len)
{
	ssize_t n;

	do
		n = send(sock, buf, len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	if ((size_t)n != len) {
		errno = EMSGSIZE;
		return -1;
	}
	return 0;
}

ssize_t
sbx_pkt_recv(int sock, void *buf, size_t len)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	/* No control buffer: fds sent along are closed by the kernel. */
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n > 0 && (mh.msg_flags & MSG_TRUNC)) {
		errno = EMSGSIZE;
		return -1;
	}
	return n;
}
