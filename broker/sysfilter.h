/* The broker's seccomp filter (build time only: gen_seccomp links this
 * with libseccomp; the broker embeds the result, broker_seccomp_bpf). */
#ifndef AIRLOCK_BROKER_SYSFILTER_H
#define AIRLOCK_BROKER_SYSFILTER_H

#include <linux/filter.h>
#include <stddef.h>

/* Compile the filter into *insns (malloc'd, the caller frees) and *len.
 * 0, or -1 with a one-line reason in err. */
int broker_seccomp_compile(struct sock_filter **insns, unsigned short *len, char *err,
                           size_t errlen);

/* The filter as built (seccomp_prebuilt.c). */
extern const struct sock_filter broker_seccomp_bpf[];
extern const unsigned short broker_seccomp_bpf_len;

#endif
