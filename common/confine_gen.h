/* Build-time half of common/confine.h: turning a libseccomp context into
 * the BPF program a generator prints as a C array (broker/gen_seccomp.c,
 * sandbox/gen_seccomp.c). Links libseccomp; the filters installed at run
 * time are the prebuilt arrays. */
#ifndef AIRLOCK_COMMON_CONFINE_GEN_H
#define AIRLOCK_COMMON_CONFINE_GEN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <seccomp.h>

struct sock_filter;

/* Add the rule "name (with args) -> action" to ctx, by name; a syscall
 * this architecture does not have is skipped. 0, or -1 with a one-line
 * reason in err. */
int confine_rule_add(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned nargs,
                     const struct scmp_arg_cmp *args, char *err, size_t errlen);
/* The narrow forms every confined process of airlock gets instead of the
 * whole call: fcntl with F_GETFD, F_SETFD, F_GETFL, F_DUPFD_CLOEXEC,
 * F_SETPIPE_SZ, F_GETPIPE_SZ (the tunnels' pipes), and F_SETFL without
 * O_ASYNC (F_SETOWN, F_SETSIG and O_ASYNC would let it signal another
 * process of its uid); prlimit64 on itself only (pid 0: glibc's getrlimit
 * and setrlimit), never on another process. 0, or -1 with err. */
int confine_add_common(scmp_filter_ctx ctx, char *err, size_t errlen);

/* The start every confined process's filter shares: calls not listed take
 * dflt (ENOSYS, or a trap in a test build); every other architecture's
 * ABI (i386 on x86-64; x32, which libseccomp treats as another ABI) kills
 * the process; the calls every such process needs (waits, clocks, write,
 * close, its socketpairs' datagrams, memory, futex, exit: the base list in
 * confine_gen.c), then the n names of allowed; confine_add_common; mmap
 * and mprotect never executable. NULL with a one-line reason in err. */
scmp_filter_ctx confine_filter_begin(uint32_t dflt, const char *const *allowed, size_t n,
                                     char *err, size_t errlen);
/* socket() of TCP and UDP over IPv4 and IPv6 only: no unix socket to a
 * host daemon, no netlink, no raw or packet socket. 0, or -1 with err. */
int confine_add_inet_socket(scmp_filter_ctx ctx, char *err, size_t errlen);
/* A generator's whole main (broker/gen_seccomp.c, elog/gen_logger_seccomp.c):
 * compile the filter and print it to stdout as the C array named array
 * (confine_bpf_print); who names the filter in an error. The exit status. */
int confine_gen_main(const char *who, const char *array,
                     int (*compile)(struct sock_filter **insns, unsigned short *len, char *err,
                                    size_t errlen));
/* Export ctx (confine_bpf_export) and release it, also on failure. */
int confine_filter_end(scmp_filter_ctx ctx, struct sock_filter **insns, unsigned short *len,
                       char *err, size_t errlen);
/* Compile ctx to classic BPF: *insns malloc'd (the caller frees), *len
 * instructions. 0, or -1 with a one-line reason in err. */
int confine_bpf_export(scmp_filter_ctx ctx, struct sock_filter **insns, unsigned short *len,
                       char *err, size_t errlen);

/* Print insns as "const struct sock_filter NAME[] = {...}; const unsigned
 * short NAME_len = N;" to out. 0, or -1 when writing fails. */
int confine_bpf_print(FILE *out, const char *name, const struct sock_filter *insns,
                      unsigned short len);

#endif
