/* The worker's seccomp allowlist, compiled with libseccomp at build time
 * (gen_seccomp.c) and embedded as BPF (worker_seccomp_bpf.h). What the
 * worker does once serving: its libevent loop (epoll), the listeners it
 * accepts on, the connections it reads, writes and splices, the DNS
 * listener's datagrams, the NFLOG and host-address netlink sockets made
 * before confinement, the egress log it appends to (until the logger holds
 * it) and its supervisor's socket. Nothing creates a socket, connects,
 * binds, listens, opens a path, forks, executes or traces (the broker
 * dials the proxy's upstreams and asks the DNS listener's questions):
 * every call not listed returns ENOSYS (libc's
 * fallbacks keep working), and a call through another architecture's ABI
 * (i386's int 0x80, x32's numbers) kills the process. */
#include "worker/sysfilter.h"

#include <errno.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/confine_gen.h"
#include "common/util.h"

static const char *const allowed[] = {
        /* the loop and its timers */
        "epoll_wait",
        "epoll_pwait",
        "epoll_pwait2",
        "epoll_ctl",
        /* descriptors it holds: sockets, splice pipes (the log is the
         * logger's: lines go to it over a socket) */
        "read",
        "readv",
        "fstat",
        "newfstatat", /* glibc's fstat */
        /* connections on the listeners it was given */
        "accept",
        "accept4",
        "getsockopt", /* SO_ORIGINAL_DST, SO_ERROR */
        "setsockopt",
        "getsockname",
        "getpeername",
        "shutdown",
        "sendmsg",
        "sendmmsg",
        "recvmsg",
        "recvmmsg",
        /* tunnels copy through a pipe (proxy/relay.c) */
        "splice",
        "pipe2",
        /* the descriptor reserve (common/fdres.c) */
        "eventfd2",
        "getrlimit",
        /* the rest of a process's life */
        "rt_sigaction", /* libevent's signal events restore theirs when freed */
        "getrandom",
        "sched_yield",
};

int
worker_seccomp_compile(bool trap, struct sock_filter **insns, unsigned short *len, char *err,
                       size_t errlen)
{
	scmp_filter_ctx ctx = confine_filter_begin(trap ? SCMP_ACT_TRAP : SCMP_ACT_ERRNO(ENOSYS),
	                                           allowed, ARRAY_SIZE(allowed), err, errlen);
	/* libevent asks how much a socket holds before it reads (FIONREAD);
	 * no other ioctl. */
	struct scmp_arg_cmp fionread = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, FIONREAD);

	*insns = NULL;
	*len = 0;
	if (ctx == NULL)
		return -1;
	if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &fionread, err, errlen) < 0)
		goto fail;
	return confine_filter_end(ctx, insns, len, err, errlen);
fail:
	seccomp_release(ctx);
	return -1;
}
