/* The worker's seccomp filter (build time only: gen_seccomp links this
 * with libseccomp; the worker embeds the result, worker_seccomp_bpf). */
#ifndef AIRLOCK_WORKER_SYSFILTER_H
#define AIRLOCK_WORKER_SYSFILTER_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

/* Compile the filter into *insns (malloc'd, the caller frees) and *len.
 * A call not on the list returns ENOSYS, or with trap raises SIGSYS (the
 * test build: the worker names the call and dies, worker/confine.c).
 * 0, or -1 with a one-line reason in err. */
int worker_seccomp_compile(bool trap, struct sock_filter **insns, unsigned short *len, char *err,
                           size_t errlen);

/* The filter as built (seccomp_prebuilt.c), and this architecture's
 * syscall names by number (NULL where it has none), for the SIGSYS
 * report. */
extern const struct sock_filter worker_seccomp_bpf[];
extern const unsigned short worker_seccomp_bpf_len;
extern const char *const worker_syscall_names[];
extern const unsigned worker_syscall_names_len;

#endif
