/* The logger's seccomp allowlist, compiled with libseccomp at build time
 * (gen_logger_seccomp.c) and embedded as BPF. What the logger does once
 * serving (logger.c): poll its socket and the log, receive datagrams and
 * send its status on the socket it holds, write the log (and cut a short
 * write back: lseek, ftruncate), put the log's flags back, close, exit.
 * No path is opened, no socket made, nothing executed: every call not
 * listed returns ENOSYS (libc's fallbacks keep working), and a call
 * through another architecture's ABI (i386's int 0x80, x32's numbers)
 * kills the process. */
#include "elog/logger_filter.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common/confine_gen.h"
#include "common/util.h"

static const char *const allowed[] = {
        /* the loop */
        "poll",
        "ppoll",
        "clock_gettime",
        "clock_getres",
        "gettimeofday",
        "time",
        "nanosleep",
        "clock_nanosleep",
        /* the socket it holds: recv and send are recvfrom and sendto */
        "recvfrom",
        "sendto",
        /* the log, and stderr */
        "write",
        "writev",
        "lseek",
        "ftruncate",
        /* docs/log.md: lines are not synced one by one; allowed, as the
         * design's table grants it, for a sync point at the end */
        "fsync",
        "fdatasync",
        "close",
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
        "futex",
        /* AddressSanitizer asks for the signal stack before every
         * noreturn call (_exit): memory of our own, nothing else */
        "sigaltstack",
};

int
elog_logger_seccomp_compile(struct sock_filter **insns, unsigned short *len, char *err,
                            size_t errlen)
{
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
	 * (i386 on x86-64; x32, which libseccomp treats as another ABI)
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
	/* Memory, never executable: no new code in a compromised logger. */
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
