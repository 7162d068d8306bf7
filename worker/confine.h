/* The worker's confinement (DESIGN.md, "Confinement"; docs/run.md, "The
 * worker"): once set-up is done, the process that serves the proxy, the
 * DNS listener and NFLOG gives up everything but the descriptors it holds.
 * An empty, read-only mount view (a new mount namespace, and a user
 * namespace when not root, pivoted into an empty tmpfs), root's uid
 * given up for nobody's (65534), RLIMIT_NPROC 0, every capability dropped, no_new_privs, Landlock with every filesystem
 * right handled and none granted, and the seccomp allowlist of
 * sysfilter.c. */
#ifndef AIRLOCK_WORKER_CONFINE_H
#define AIRLOCK_WORKER_CONFINE_H

#include <stdbool.h>
#include <stddef.h>

/* What worker_confine applied. */
struct worker_confined {
	int landlock_abi; /* 0: the kernel has no Landlock (task-start records it) */
	bool view;        /* the empty mount view is in place */
	char view_err[160]; /* without it (WORKER_VIEW_OPTIONAL): why */
};

/* `airlock proxy` runs where a container may refuse namespaces (unshare
 * and mount): it goes on without the empty mount view, the rest applied.
 * `airlock run`, which made namespaces already, never passes it. */
#define WORKER_VIEW_OPTIONAL 0x1u
/* stderr is the caller's own (airlock proxy has no supervisor to relay
 * it): RLIMIT_FSIZE 0 would kill the process at its first line to a
 * stderr that is a file (SIGXFSZ), so it is left when stderr is one. */
#define WORKER_OWN_STDERR 0x2u

/* Confine the calling process, which must be single-threaded (a user
 * namespace cannot be entered otherwise) and must have opened everything
 * it will use. 0, or -1 with a one-line reason naming the step in err:
 * the caller then must not serve. */
int worker_confine(unsigned flags, struct worker_confined *out, char *err, size_t errlen);

#endif
