/* Confining a serving process after set-up (DESIGN.md, "Confinement"):
 * no_new_privs, Landlock with no filesystem access, and a seccomp filter
 * compiled at build time. Shared by the processes of the split (broker/
 * first); the sandbox's own filter for CMD is separate (sandbox/seccomp.c).
 * Each step is one call so a caller orders them and names the step that
 * failed. */
#ifndef AIRLOCK_COMMON_CONFINE_H
#define AIRLOCK_COMMON_CONFINE_H

#include <stddef.h>
#include <stdint.h>

struct sock_filter;

/* Drop every capability: the bounding set, the ambient set, and the
 * effective, permitted and inheritable sets (a process forked from root
 * keeps its uid but can do nothing root's capabilities allow). 0, or -1
 * with errno. */
int confine_drop_caps(void);

/* prctl(PR_SET_NO_NEW_PRIVS). 0, or -1 with errno. */
int confine_no_new_privs(void);

/* Landlock: every filesystem access right this kernel knows is handled and
 * none is granted, so no path can be opened, created, removed or executed;
 * with CONFINE_LL_NET also TCP bind and connect (ABI >= 4) are handled and
 * refused; abstract unix sockets and signals are scoped to the domain
 * (ABI >= 6). Returns the Landlock ABI applied (>= 1), 0 when the kernel
 * has no Landlock (not built in, or disabled at boot: the caller records
 * that), or -1 with errno when it has Landlock and restricting failed. */
#define CONFINE_LL_NET 0x1u
int confine_landlock(unsigned flags);

/* The Landlock ABI of this kernel: >= 1, or 0 when it has none. */
int confine_landlock_abi(void);

/* Install a classic BPF seccomp program (generated at build time) on the
 * calling thread. Needs no_new_privs or CAP_SYS_ADMIN. 0, or -1 with
 * errno. */
int confine_seccomp(const struct sock_filter *insns, unsigned short len);

#endif
