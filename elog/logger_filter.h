/* The logger's seccomp filter (build time only: gen_logger_seccomp links
 * this with libseccomp; the logger embeds the result,
 * elog_logger_seccomp_bpf). */
#ifndef AIRLOCK_ELOG_LOGGER_FILTER_H
#define AIRLOCK_ELOG_LOGGER_FILTER_H

#include <linux/filter.h>
#include <stddef.h>

/* Compile the filter into *insns (malloc'd, the caller frees) and *len.
 * 0, or -1 with a one-line reason in err. */
int elog_logger_seccomp_compile(struct sock_filter **insns, unsigned short *len, char *err,
                                size_t errlen);

/* The filter as built (logger_prebuilt.c). */
extern const struct sock_filter elog_logger_seccomp_bpf[];
extern const unsigned short elog_logger_seccomp_bpf_len;

#endif
