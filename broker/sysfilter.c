/* The broker's seccomp allowlist, compiled with libseccomp at build time
 * (gen_seccomp.c) and embedded as BPF (broker_seccomp_bpf.h). What the broker
 * does once serving: its libevent loop (epoll), evdns over UDP, TCP
 * sockets it creates and connects, the host-address netlink socket made
 * before confinement, and the worker's socket (recvmsg/sendmsg with
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
        "poll",
        "ppoll",
        "clock_gettime",
        "clock_getres",
        "gettimeofday",
        "time",
        /* descriptors it holds */
        "read",
        "write",
        "readv",
        "writev",
        "close",
        /* sockets it makes (socket() is checked below) and the worker's */
        "connect",
        "getsockopt",
        "setsockopt",
        "getsockname",
        "getpeername",
        "shutdown",
        "sendto",
        "sendmsg",
        "recvfrom",
        "recvmsg",
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

int
broker_seccomp_compile(struct sock_filter **insns, unsigned short *len, char *err, size_t errlen)
{
	static const int families[] = {AF_INET, AF_INET6};
	static const int types[] = {SOCK_STREAM, SOCK_DGRAM};
	scmp_filter_ctx ctx;
	struct scmp_arg_cmp a;
	int rc;

	*insns = NULL;
	*len = 0;
	ctx = seccomp_init(SCMP_ACT_ERRNO(ENOSYS));
	if (ctx == NULL) {
		snprintf(err, errlen, "seccomp: init failed");
		return -1;
	}
	/* Only the native architecture is in the filter: every other ABI
	 * (i386 on x86-64; x32, whose calls carry the native audit arch
	 * but __X32_SYSCALL_BIT, which libseccomp treats as another ABI)
	 * takes the bad-arch action. */
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
	/* TCP and UDP only: no unix socket to a host daemon, no netlink,
	 * no raw or packet socket. The family on the low 32 bits (the
	 * kernel's int); the type without its SOCK_NONBLOCK/SOCK_CLOEXEC
	 * flags. */
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
				goto fail;
		}
	}
	/* Memory, never executable: no new code in a compromised broker. */
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
