/* Shared between the supervisor side (sandbox.c) and init (init.c) of the
 * sandbox module; not part of its interface. */
#ifndef AIRLOCK_SANDBOX_INTERNAL_H
#define AIRLOCK_SANDBOX_INTERNAL_H

#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <linux/filter.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"

/* seccomp.c: the filter (docs/run.md, seccomp) compiled to BPF with
 * libseccomp by sbx_seccomp_compile. The filter is a constant, so
 * gen_seccomp runs that at build time and sbx_seccomp_build (in
 * seccomp_prebuilt.c) only copies the result: libseccomp's compiler took
 * 0.4-0.8 ms of every run (bench/run.md). Both return 0 or -1 + reason;
 * free with sbx_seccomp_free. sbx_seccomp_install installs it on the
 * calling process (needs no_new_privs). */
struct sbx_filter {
	struct sock_filter *insns; /* owned */
	unsigned short len;
};
/* A host directory replaced by an empty writable directory (sbx_new decides
 * which: docs/run.md, Filesystem). */
#define SBX_MAX_HIDDEN 16
struct sbx_hidden {
	char path[PATH_MAX]; /* absolute, resolved */
	bool sticky;         /* mode 1777 (a temp dir) instead of 0755 */
};

struct sbx {
	const struct sbx_config *cfg; /* borrowed */
	size_t n_hidden;              /* entries of hidden[] in use */
	char workdir[PATH_MAX]; /* absolute, resolved by sbx_new */
	uid_t uid;              /* the caller's, mapped inside */
	gid_t gid;
	pid_t pid;  /* init, in the supervisor's pid namespace; -1 */
	int pidfd;  /* -1 */
	int sock;   /* supervisor's end of the socketpair; -1 */
	int exited; /* init has been reaped */
	int init_wstatus;
	bool have_exit; /* init reported CMD's end (SBX_MSG_EXIT) */
	bool alone;     /* ... after killing and reaping everything else */
	int cmd_wstatus;
	int nft_fd; /* the sandbox's nfnetlink socket, kept until sbx_free (its close may wait); -1 */
	cpu_set_t cpus; /* the caller's CPUs, read before the clone */
	int sup_cpu;    /* the supervisor's CPU during set-up; -1: not split */
	/* Last, and not zeroed by sbx_new: 68 KiB of which a run uses a few
	 * entries, so the rest is never touched (no page faults). */
	struct sbx_hidden hidden[SBX_MAX_HIDDEN]; /* parents before children */
};

/* sandbox.c: set-up on two CPUs (split_cpus_prepare), and the hand-overs
 * between them: true once fd is readable, false when the caller should
 * block (sbx_spin_readable says why). */
void sbx_cpus_split(const struct sbx *s, bool init);
void sbx_cpus_restore(const struct sbx *s);
bool sbx_spin_readable(const struct sbx *s, int fd);

/* Messages on the SOCK_SEQPACKET socketpair, one struct per packet. */
enum sbx_msg_type {
	SBX_MSG_READY = 1, /* init -> sup: its checks, sockets attached (SBX_FD_*) */
	SBX_MSG_GO,        /* sup -> init: value 1 = start CMD, 0 = give up */
	SBX_MSG_CHECKS,    /* init -> sup (selftest): post-set-up checks */
	SBX_MSG_EXIT,      /* init -> sup: value = CMD's wait status; init exits next */
	SBX_MSG_TTY,       /* init -> sup (cfg->tty): CMD's terminal's master attached */
};

struct sbx_msg {
	uint32_t type;
	int32_t value;
	uint32_t alone; /* EXIT: every other process in the sandbox is gone */
	struct sbx_report report;
};

#define SBX_N_LISTEN_FDS 8
/* READY carries the two netlink sockets the supervisor sets up the network
 * through, then the listeners: none, the first two, or all. */
#define SBX_FD_RTNL 0
#define SBX_FD_NFNL 1
#define SBX_FD_LISTEN 2
#define SBX_N_SETUP_FDS (SBX_FD_LISTEN + SBX_N_LISTEN_FDS)

/* One message with up to SBX_N_SETUP_FDS fds (SCM_RIGHTS). 0 or -1. */
int sbx_msg_send(int sock, const struct sbx_msg *m, const int *fds, size_t nfds);
/* Receive one message; fds received (CLOEXEC, ours) go to fds[*nfds].
 * Returns 1 on a message, 0 on EOF, -1 on error or a malformed packet (one
 * of another size; any fds received with it are closed). flags:
 * MSG_DONTWAIT or 0. */
int sbx_msg_recv(int sock, struct sbx_msg *m, int *fds, size_t maxfds, size_t *nfds, int flags);

/* A signal the supervisor passes on with si_code SI_QUEUE and this value
 * is for CMD's whole process group, as a terminal's would be
 * (sbx_kill_pgrp); any other is for CMD alone. */
#define SBX_SIG_PGRP 1

/* pty.c, init's side: open CMD's terminal in the sandbox's own devpts
 * (after sbx_fs_setup), hand its master to the supervisor on sock
 * (SBX_MSG_TTY) and keep the slave: *slave, owned by the caller. 0 or -1
 * + reason. */
int sbx_pty_open(int sock, int *slave, char *err, size_t errlen);
/* Put the slave on stdin, and on stdout and stderr where they are the
 * terminal stdin is (the caller's), in the calling process; takes
 * ownership of slave. Other fds stay as they are. 0 or -1 with errno. */
int sbx_pty_attach(int slave);

/* init.c: pid 1 of the sandbox. Never returns. sock is init's end. */
void sbx_init_main(const struct sbx *s, int sock) __attribute__((noreturn));

/* listen.c: create the listeners' sockets inside the sandbox's netns (init),
 * then bind them there and the NFLOG socket to its group once lo is up (the
 * supervisor). 0 or -1 + reason; on failure the caller closes l. */
int sbx_listeners_create(struct sbx_listeners *l, char *err, size_t errlen);
int sbx_listeners_bind(const struct sbx_listeners *l, uint16_t nflog_group, char *err,
                       size_t errlen);
/* listen.c: check received fds are the listeners they claim to be. */
int sbx_listeners_verify(const struct sbx_listeners *l, char *err, size_t errlen);
/* Fill / read the listener struct as an fd array in a fixed order. */
void sbx_listeners_to_array(const struct sbx_listeners *l, int fds[SBX_N_LISTEN_FDS]);
void sbx_listeners_from_array(struct sbx_listeners *l, const int fds[SBX_N_LISTEN_FDS]);

/* mounts.c: build the filesystem view in place; cwd ends in
 * workdir. 0 or -1 + reason naming the step and path. */
int sbx_fs_setup(const struct sbx *s, char *err, size_t errlen);

/* privs.c: drop every capability (bounding, ambient, effective, permitted,
 * inheritable) and lock the securebits. 0 or -1 + reason. */
int sbx_caps_drop(char *err, size_t errlen);
int sbx_seccomp_compile(struct sbx_filter *f, char *err, size_t errlen);
int sbx_seccomp_build(struct sbx_filter *f, char *err, size_t errlen);
int sbx_seccomp_install(const struct sbx_filter *f, char *err, size_t errlen);
void sbx_seccomp_free(struct sbx_filter *f);

/* checks.c: the post-set-up checks, run by a child of init after the
 * privilege drop (selftest only). */
void sbx_checks_post(struct sbx_report *r);
void sbx_check_set(struct sbx_report *r, enum sbx_check c, bool ok, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

#endif
