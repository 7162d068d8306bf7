/* Why the sandbox cannot be made here, in one line (docs/deploy.md,
 * Diagnosis). The facts about the host are read by sbx_diag_read (a thin
 * shell over /proc); the advice is a pure function of them and the errno,
 * so the unit test covers every case without such a host. */
#ifndef AIRLOCK_SANDBOX_DIAGNOSE_H
#define AIRLOCK_SANDBOX_DIAGNOSE_H

#include <stdbool.h>
#include <stddef.h>

/* What sbx_diag_read found; -1 where a file is absent or unreadable. */
struct sbx_diag_facts {
	long max_user_namespaces;       /* user.max_user_namespaces */
	long unprivileged_userns_clone; /* kernel.unprivileged_userns_clone (Debian/Ubuntu) */
	long apparmor_restrict;         /* kernel.apparmor_restrict_unprivileged_userns */
	long seccomp;                   /* "Seccomp:" of /proc/self/status: 0 none, 2 filter */
	bool chrooted;                  /* our root is not our mount namespace's */
	bool proc_masked;               /* something is mounted over a part of /proc */
	char proc_mask[64];             /* the first such mount point, e.g. /proc/kcore */
};

void sbx_diag_read(struct sbx_diag_facts *f);

/* clone/unshare of the user namespace failed with e: the whole message,
 * "cannot create the sandbox's namespaces: clone: ...; <why>; <fix>". */
void sbx_diag_userns(int e, const struct sbx_diag_facts *f, char *out, size_t outlen);

/* Mounting a fresh /proc failed with e: advice to append to the mount's
 * own message ("; ..."), or "" when the facts explain nothing. */
void sbx_diag_proc(int e, const struct sbx_diag_facts *f, char *out, size_t outlen);

/* A kernel without nftables is told apart by nft/ruleset.c itself
 * (nft_advice: CONFIG_NF_TABLES, the inet family, a missing feature). */

#endif
