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
        "nanosleep",
        "clock_nanosleep",
        /* the log, and stderr */
        "lseek",
        "ftruncate",
        /* docs/log.md: lines are not synced one by one; allowed, as the
         * design's table grants it, for a sync point at the end */
        "fsync",
        "fdatasync",
};

int
elog_logger_seccomp_compile(struct sock_filter **insns, unsigned short *len, char *err,
                            size_t errlen)
{
	scmp_filter_ctx ctx =
	        confine_filter_begin(SCMP_ACT_ERRNO(ENOSYS), allowed, ARRAY_SIZE(allowed), err, errlen);

	*insns = NULL;
	*len = 0;
	return ctx != NULL ? confine_filter_end(ctx, insns, len, err, errlen) : -1;
}
