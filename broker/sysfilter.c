/* The broker's seccomp allowlist, compiled with libseccomp at build time
 * (gen_seccomp.c) and embedded as BPF (broker_seccomp_bpf.h). What the broker
 * does once serving: its libevent loop (epoll), evdns over UDP, TCP
 * sockets it creates and connects, the host-address netlink socket made
 * before confinement, and the worker's socket (recvmmsg, recvmsg, sendmsg with
 * SCM_RIGHTS). Nothing opens a path, binds, listens, accepts, forks or
 * executes: every call not listed returns ENOSYS (libc's fallbacks keep
 * working), and a call through another architecture's ABI (i386's int
 * 0x80, x32's numbers) kills the process. */
#include "broker/sysfilter.h"

#include <errno.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/confine_gen.h"
#include "common/util.h"

static const char *const allowed[] = {
        /* the loop and its timers */
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "epoll_ctl",
        /* descriptors it holds */
        "read",
        "readv",
        /* sockets it makes (socket() is checked below) and the worker's */
        "connect",
        "getsockopt",
        "setsockopt",
        "getsockname",
        "getpeername",
        "shutdown",
        "sendmsg",
        "recvmsg",
        "recvmmsg",
        /* the rest of a process's life */
        "getrandom",
        "sched_yield",
};

int
broker_seccomp_compile(struct sock_filter **insns, unsigned short *len, char *err, size_t errlen)
{
	scmp_filter_ctx ctx =
	        confine_filter_begin(SCMP_ACT_ERRNO(ENOSYS), allowed, ARRAY_SIZE(allowed), err, errlen);

	*insns = NULL;
	*len = 0;
	if (ctx == NULL)
		return -1;
	if (confine_add_inet_socket(ctx, err, errlen) < 0) {
		seccomp_release(ctx);
		return -1;
	}
	return confine_filter_end(ctx, insns, len, err, errlen);
}
