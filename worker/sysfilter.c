/* The worker's seccomp allowlist, compiled with libseccomp at build time
 * (gen_seccomp.c) and embedded as BPF (worker_seccomp_bpf.h). What the
 * worker does once serving: its libevent loop (epoll), the listeners it
 * accepts on, the connections it reads, writes and splices, the DNS
 * listener's datagrams, the NFLOG and host-address netlink sockets made
 * before confinement, the egress log it appends to (until the logger holds
 * it) and its supervisor's socket. Nothing creates a socket, connects,
 * binds, listens, opens a path, forks, executes or traces (but see
 * until_broker below): every call not listed returns ENOSYS (libc's
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
        "poll",
        "ppoll",
        "clock_gettime",
        "clock_getres",
        "gettimeofday",
        "time",
        /* descriptors it holds: sockets, splice pipes (the log is the
         * logger's: lines go to it over a socket) */
        "read",
        "write",
        "readv",
        "writev",
        "close",
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
        "sendto",
        "sendmsg",
        "sendmmsg",
        "recvfrom",
        "recvmsg",
        "recvmmsg",
        /* tunnels copy through a pipe (proxy/relay.c) */
        "splice",
        "pipe2",
        /* the descriptor reserve (common/fdres.c) */
        "eventfd2",
        "getrlimit",
        /* memory (mmap and mprotect below) */
        "brk",
        "munmap",
        "mremap",
        "madvise",
        /* the rest of a process's life */
        "exit",
        "exit_group",
        "rt_sigreturn",
        "rt_sigprocmask",
        "rt_sigaction", /* libevent's signal events restore theirs when freed */
        "restart_syscall",
        "getpid",
        "gettid",
        "getrandom",
        "futex",
        "sched_yield",
        /* AddressSanitizer asks for the signal stack before every
         * noreturn call (_exit): memory of our own, nothing else */
        "sigaltstack",
};

/* Calls the worker needs while the DNS listener resolves in it
 * (WORKER_UNTIL_BROKER, worker/confine.h): its resolver creates and
 * connects UDP and TCP sockets to the upstream DNS servers. TCP and UDP
 * only (checked below). The proxy's upstream connections are the
 * broker's; this list goes when the listener's questions are too. */
static const char *const until_broker[] = {
        "socket",
        "connect",
};

/* The socket() the list above allows: TCP and UDP over IPv4 and IPv6 (no
 * unix socket to a host daemon, no netlink, no raw or packet socket). The
 * family on the low 32 bits (the kernel's int); the type without its
 * SOCK_NONBLOCK/SOCK_CLOEXEC flags. */
static int
add_inet_socket(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	static const int families[] = {AF_INET, AF_INET6};
	static const int types[] = {SOCK_STREAM, SOCK_DGRAM};

	for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
		for (size_t t = 0; t < ARRAY_SIZE(types); t++) {
			struct scmp_arg_cmp two[2] = {
			        SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (unsigned)families[i]),
			        SCMP_A1(SCMP_CMP_MASKED_EQ,
			                0xffffffffu & ~(unsigned)(SOCK_NONBLOCK | SOCK_CLOEXEC),
			                (unsigned)types[t]),
			};

			if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "socket", 2, two, err, errlen) <
			    0)
				return -1;
		}
	}
	return 0;
}

int
worker_seccomp_compile(bool trap, struct sock_filter **insns, unsigned short *len, char *err,
                       size_t errlen)
{
	scmp_filter_ctx ctx;
	struct scmp_arg_cmp a;
	int rc;

	*insns = NULL;
	*len = 0;
	ctx = seccomp_init(trap ? SCMP_ACT_TRAP : SCMP_ACT_ERRNO(ENOSYS));
	if (ctx == NULL) {
		snprintf(err, errlen, "seccomp: init failed");
		return -1;
	}
	/* Only the native architecture is in the filter: every other ABI
	 * (i386 on x86-64; x32, whose calls carry the native audit arch
	 * but __X32_SYSCALL_BIT) takes the bad-arch action. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0) {
		snprintf(err, errlen, "seccomp: attributes: %s", strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < ARRAY_SIZE(allowed); i++)
		if (confine_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0, NULL, err, errlen) < 0)
			goto fail;
	if (confine_add_common(ctx, err, errlen) < 0)
		goto fail;
	for (size_t i = 0; i < ARRAY_SIZE(until_broker); i++) {
		if (strcmp(until_broker[i], "socket") == 0) {
			if (add_inet_socket(ctx, err, errlen) < 0)
				goto fail;
		} else if (confine_rule_add(ctx, SCMP_ACT_ALLOW, until_broker[i], 0, NULL, err,
		                            errlen) < 0) {
			goto fail;
		}
	}
	/* libevent asks how much a socket holds before it reads (FIONREAD);
	 * no other ioctl. */
	a = (struct scmp_arg_cmp)SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, FIONREAD);
	if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "ioctl", 1, &a, err, errlen) < 0)
		goto fail;
	/* Memory, never executable: no new code in a compromised worker. */
	a = (struct scmp_arg_cmp)SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	if (confine_rule_add(ctx, SCMP_ACT_ALLOW, "mmap", 1, &a, err, errlen) < 0 ||
	    confine_rule_add(ctx, SCMP_ACT_ALLOW, "mprotect", 1, &a, err, errlen) < 0)
		goto fail;
	if (confine_bpf_export(ctx, insns, len, err, errlen) < 0)
		goto fail;
	seccomp_release(ctx);
	return 0;
fail:
	seccomp_release(ctx);
	return -1;
}
