/* The listeners: created by init inside the sandbox's network namespace,
 * used by the supervisor in the host's (a socket keeps its namespace). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/netconst.h"
#include "common/util.h"
#include "nft/nflog.h"
#include "sandbox/internal.h"

#define LISTEN_BACKLOG 512

void
sbx_listeners_init(struct sbx_listeners *l)
{
	l->explicit_fd = l->tproxy4_fd = l->tproxy6_fd = -1;
	l->dns_udp_fd = l->dns_tcp_fd = l->nflog_fd = -1;
	l->dns6_udp_fd = l->dns6_tcp_fd = -1;
}

void
sbx_listeners_close(struct sbx_listeners *l)
{
	fd_close(&l->explicit_fd);
	fd_close(&l->tproxy4_fd);
	fd_close(&l->tproxy6_fd);
	fd_close(&l->dns_udp_fd);
	fd_close(&l->dns_tcp_fd);
	fd_close(&l->dns6_udp_fd);
	fd_close(&l->dns6_tcp_fd);
	fd_close(&l->nflog_fd);
}

void
sbx_listeners_to_array(const struct sbx_listeners *l, int fds[SBX_N_LISTEN_FDS])
{
	fds[0] = l->explicit_fd;
	fds[1] = l->tproxy4_fd;
	fds[2] = l->tproxy6_fd;
	fds[3] = l->dns_udp_fd;
	fds[4] = l->dns_tcp_fd;
	fds[5] = l->dns6_udp_fd;
	fds[6] = l->dns6_tcp_fd;
	fds[7] = l->nflog_fd;
}

void
sbx_listeners_from_array(struct sbx_listeners *l, const int fds[SBX_N_LISTEN_FDS])
{
	l->explicit_fd = fds[0];
	l->tproxy4_fd = fds[1];
	l->tproxy6_fd = fds[2];
	l->dns_udp_fd = fds[3];
	l->dns_tcp_fd = fds[4];
	l->dns6_udp_fd = fds[5];
	l->dns6_tcp_fd = fds[6];
	l->nflog_fd = fds[7];
}

/* What each listener must be; index as in sbx_listeners_to_array. */
static const struct {
	const char *name;
	int family;
	int type;
	uint16_t port;
} spec[SBX_N_LISTEN_FDS - 1] = {
        {"explicit proxy 127.0.0.1", AF_INET, SOCK_STREAM, AIRLOCK_PROXY_PORT},
        {"transparent proxy 127.0.0.1", AF_INET, SOCK_STREAM, AIRLOCK_TPROXY_PORT},
        {"transparent proxy [::1]", AF_INET6, SOCK_STREAM, AIRLOCK_TPROXY_PORT},
        {"DNS udp 127.0.0.1", AF_INET, SOCK_DGRAM, AIRLOCK_DNS_PORT},
        {"DNS tcp 127.0.0.1", AF_INET, SOCK_STREAM, AIRLOCK_DNS_PORT},
        {"DNS udp [::1]", AF_INET6, SOCK_DGRAM, AIRLOCK_DNS_PORT},
        {"DNS tcp [::1]", AF_INET6, SOCK_STREAM, AIRLOCK_DNS_PORT},
};

static void
loopback(int family, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
	*len = sockaddr_set(ss, family, family == AF_INET ? "127.0.0.1" : "::1", port);
}

/* Inside the namespace: the socket, not yet bound (lo is still down, so
 * the loopback addresses do not exist yet). */
static int
make_socket(int family, int type)
{
	int one = 1;
	int fd = socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if ((family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0) ||
	    (type == SOCK_STREAM &&
	     setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)) {
		fd_close(&fd);
		return -1;
	}
	return fd;
}

int
sbx_listeners_create(struct sbx_listeners *l, char *err, size_t errlen)
{
	int fds[SBX_N_LISTEN_FDS];

	for (size_t i = 0; i < ARRAY_SIZE(spec); i++) {
		fds[i] = make_socket(spec[i].family, spec[i].type);
		if (fds[i] < 0) {
			snprintf(err, errlen, "listener %s:%u: %s", spec[i].name, spec[i].port,
			         strerror(errno));
			for (size_t j = 0; j < i; j++)
				fd_close(&fds[j]);
			return -1;
		}
	}
	fds[SBX_N_LISTEN_FDS - 1] = nflog_socket(err, errlen);
	if (fds[SBX_N_LISTEN_FDS - 1] < 0) {
		for (size_t j = 0; j < SBX_N_LISTEN_FDS - 1; j++)
			fd_close(&fds[j]);
		return -1;
	}
	sbx_listeners_from_array(l, fds);
	return 0;
}

/* bind(2) and listen(2) act in the socket's network namespace, whoever
 * calls them; port 53 wants CAP_NET_BIND_SERVICE there, which the owner of
 * the sandbox's user namespace has. */
int
sbx_listeners_bind(const struct sbx_listeners *l, uint16_t nflog_group, char *err, size_t errlen)
{
	int fds[SBX_N_LISTEN_FDS];

	sbx_listeners_to_array(l, fds);
	for (size_t i = 0; i < ARRAY_SIZE(spec); i++) {
		struct sockaddr_storage ss;
		socklen_t len;

		loopback(spec[i].family, spec[i].port, &ss, &len);
		if (bind(fds[i], (struct sockaddr *)&ss, len) < 0 ||
		    (spec[i].type == SOCK_STREAM && listen(fds[i], LISTEN_BACKLOG) < 0)) {
			snprintf(err, errlen, "listener %s:%u: %s", spec[i].name, spec[i].port,
			         strerror(errno));
			return -1;
		}
	}
	return nflog_bind(fds[SBX_N_LISTEN_FDS - 1], nflog_group, err, errlen);
}

int
sbx_listeners_verify(const struct sbx_listeners *l, char *err, size_t errlen)
{
	int fds[SBX_N_LISTEN_FDS];
	int v;
	socklen_t vlen;

	sbx_listeners_to_array(l, fds);
	for (size_t i = 0; i < ARRAY_SIZE(spec); i++) {
		struct sockaddr_storage want, got;
		socklen_t wlen, glen = sizeof(got);

		vlen = sizeof(v);
		if (fds[i] < 0 || getsockopt(fds[i], SOL_SOCKET, SO_TYPE, &v, &vlen) < 0 ||
		    v != spec[i].type) {
			snprintf(err, errlen, "%s: not received or not a %s socket", spec[i].name,
			         spec[i].type == SOCK_STREAM ? "TCP" : "UDP");
			return -1;
		}
		vlen = sizeof(v);
		if (spec[i].type == SOCK_STREAM &&
		    (getsockopt(fds[i], SOL_SOCKET, SO_ACCEPTCONN, &v, &vlen) < 0 || !v)) {
			snprintf(err, errlen, "%s: not listening", spec[i].name);
			return -1;
		}
		loopback(spec[i].family, spec[i].port, &want, &wlen);
		if (getsockname(fds[i], (struct sockaddr *)&got, &glen) < 0 || glen != wlen ||
		    memcmp(&got, &want, wlen) != 0) {
			snprintf(err, errlen, "%s: bound to the wrong address", spec[i].name);
			return -1;
		}
	}
	vlen = sizeof(v);
	if (fds[SBX_N_LISTEN_FDS - 1] < 0 ||
	    getsockopt(fds[SBX_N_LISTEN_FDS - 1], SOL_SOCKET, SO_DOMAIN, &v, &vlen) < 0 ||
	    v != AF_NETLINK) {
		snprintf(err, errlen, "NFLOG socket: not received or not netlink");
		return -1;
	}
	return 0;
}
