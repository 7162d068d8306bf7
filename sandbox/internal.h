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
#include "sandbox/unixgate.h"

/* seccomp.c: the filter (docs/run.md, seccomp) compiled to BPF with
 * libseccomp by sbx_seccomp_compile. The filter is a constant, so
 * gen_seccomp runs that at build time and sbx_seccomp_build (in
 * seccomp_prebuilt.c) only copies the result: libseccomp's compiler took
 * 0.4-0.8 ms of every run (bench/run.md). Both return 0 or -1 + reason;
 * free with sbx_seccomp_free. sbx_seccomp_install installs it on the
 * calling process (needs no_new_privs) and returns the notification fd of
 * its unix socket gate (unixgate.h), or -1 + reason. */
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

/* A user mount's target, resolved by sbx_new (realpath on the host). */
struct sbx_umount {
	char *target; /* absolute; owned; NULL when skip */
	bool skip;    /* --hide of a path that does not exist: nothing to do */
};

struct sbx {
	const struct sbx_config *cfg; /* borrowed */
	struct sbx_umount *umounts;   /* one per cfg->mounts[i]; owned */
	bool kept;                    /* sbx_protect sent init its list */
	size_t n_hidden;              /* entries of hidden[] in use */
	char workdir[PATH_MAX];       /* absolute, resolved by sbx_new */
	uid_t uid;                    /* the caller's, mapped inside */
	gid_t gid;
	pid_t pid;  /* init, in the supervisor's pid namespace; -1 */
	int pidfd;  /* -1 */
	int sock;   /* supervisor's end of the socketpair; -1 */
	int exited; /* init has been reaped */
	int init_wstatus;
	bool have_exit; /* init reported CMD's end (SBX_MSG_EXIT) */
	bool alone;     /* ... after killing and reaping everything else */
	int cmd_wstatus;
	int nft_fd; /* the sandbox's nfnetlink socket, kept until sbx_free (its close may wait); -1
	             */
	cpu_set_t cpus;     /* the caller's CPUs, read before the clone */
	int sup_cpu;        /* the supervisor's CPU during set-up; -1: not split */
	struct ugate *gate; /* the unix socket gate, from sbx_gate_start; NULL */
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

/* Talking to init failed during set-up: what, the step ("tell init what
 * to keep"); e_no, the errno (0: init closed the channel). When init has
 * ended with SBX_EXIT_FAILURE (it has printed its reason) err is made
 * empty; otherwise it says what broke and how init ended. Waits at most
 * SBX_INIT_GONE_MS for init to end. */
#define SBX_INIT_GONE_MS 500
void sbx_setup_lost(struct sbx *s, const char *what, int e_no, char *err, size_t errlen);

/* Messages on the SOCK_SEQPACKET socketpair, one struct per packet. */
enum sbx_msg_type {
	SBX_MSG_READY = 1, /* init -> sup: its checks, sockets attached (SBX_FD_*) */
	SBX_MSG_GO,        /* sup -> init: value 1 = start CMD, 0 = give up */
	SBX_MSG_CHECKS,    /* init -> sup (selftest): post-set-up checks */
	SBX_MSG_EXIT,      /* init -> sup: value = CMD's wait status; init exits next */
	SBX_MSG_GATE,      /* init -> sup: gate_fd = init's fds of the seccomp
	                    * listener and the unix_diag socket, for pidfd_getfd */
	SBX_MSG_KEEP,      /* sup -> init, before the go: one mount of sbx_protect's
	                    * (struct sbx_msg_keep); the list ends with SBX_KEEP_END */
	SBX_MSG_TTY,       /* init -> sup (cfg->tty): CMD's terminal's master attached */
	SBX_MSG_IDS,       /* sup -> init (--ids range): value 1 = the maps are written,
	                    * 0 = they could not be (the supervisor says why) */
};

struct sbx_msg {
	uint32_t type;
	int32_t value;
	uint32_t alone; /* EXIT: every other process in the sandbox is gone */
	struct sbx_report report;
	int32_t gate_fd[2]; /* GATE: SBX_GATE_LISTENER, SBX_GATE_DIAG */
};
#define SBX_GATE_LISTENER 0
#define SBX_GATE_DIAG     1

#define SBX_N_LISTEN_FDS 8
/* READY carries the two netlink sockets the supervisor sets up the network
 * through, then the listeners: none, the first two, or all. */
#define SBX_FD_RTNL     0
#define SBX_FD_NFNL     1
#define SBX_FD_LISTEN   2
#define SBX_N_SETUP_FDS (SBX_FD_LISTEN + SBX_N_LISTEN_FDS)

/* What init mounts over a path sbx_protect keeps (protect.c says why). */
enum sbx_keep_op {
	SBX_KEEP_END = 0, /* no path: the list is complete */
	SBX_KEEP_PIN,     /* a copy of the view at path on itself: a mount point
	                   * cannot be renamed, replaced or unlinked */
	SBX_KEEP_RDONLY,  /* the same, read-only, recursively */
	SBX_KEEP_MASK,    /* /dev/null over a file, an empty read-only dir over a dir */
};

/* SBX_MSG_KEEP: sent as the header plus path up to its NUL; init checks the
 * length and the NUL before use. */
struct sbx_msg_keep {
	uint32_t type;       /* SBX_MSG_KEEP */
	uint32_t op;         /* enum sbx_keep_op */
	char path[PATH_MAX]; /* absolute, resolved on the host; "" with SBX_KEEP_END */
};

/* One packet of len bytes, no fds / at most len bytes of one into buf.
 * send: 0 or -1. recv: the packet's length (never more than len: a
 * longer one fails with EMSGSIZE), 0 on EOF, -1 on error. */
int sbx_pkt_send(int sock, const void *buf, size_t len);
ssize_t sbx_pkt_recv(int sock, void *buf, size_t len);

/* One message with up to SBX_N_SETUP_FDS fds (SCM_RIGHTS). 0 or -1.
 * Without fds it is a plain send(), which the seccomp filter leaves alone
 * (init sends its last messages under the filter). */
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

/* mounts.c: build the filesystem view in place, then mount what the
 * supervisor sends on sock (SBX_MSG_KEEP, up to SBX_KEEP_END) on top;
 * cwd ends in workdir. 0 or -1 + reason naming the step and path. Exits
 * 125 quietly if the supervisor gives up or goes away instead. */
int sbx_fs_setup(const struct sbx *s, int sock, char *err, size_t errlen);

/* overlay.c: --overlay (cfg->overlay). plan, with the host view intact:
 * which top-level directories get an overlay, and a clone of
 * cfg->overlay_keep; mount, once the staging tmpfs (stage, at stage_path)
 * is there: the upper layers and the overlays over /NAME. Both 0, or -1 +
 * reason; free closes what plan kept. */
#define SBX_OVERLAY_MAX 64
struct sbx_overlay {
	char name[SBX_OVERLAY_MAX][64]; /* top-level directory names */
	size_t n;
	int keep_tree; /* the clone of overlay_keep; -1 */
};
int sbx_overlay_plan(const struct sbx *s, struct sbx_overlay *ov, char *err, size_t errlen);
int sbx_overlay_mount(struct sbx_overlay *ov, int stage, const char *stage_path, char *err,
                      size_t errlen);
void sbx_overlay_free(struct sbx_overlay *ov);

/* protect.c: the plan behind sbx_protect, exposed for the unit tests. The
 * sandbox's view as a list of layers in the order init mounts them (the
 * last one over a path decides what CMD finds there), then the mounts
 * planned for the kept paths. */
enum sbx_view {
	SBX_VIEW_HOST_RO, /* the host's files, read-only */
	SBX_VIEW_HOST_RW, /* the host's files, writable: workdir, --rw */
	SBX_VIEW_PRIVATE, /* the sandbox's own: a tmpfs, /proc, /dev/null */
};

struct sbx_layer {
	const char *path; /* absolute, resolved; borrowed, or one of the plan's */
	size_t len;
	enum sbx_view view;
	bool copy;        /* a copy of the view beneath it (a pin, a read-only
	                   * cover): a mount point, and read-only where
	                   * view says so, but what lies beneath stays */
	const char *what; /* "workdir", "--rw", ... for messages */
};

#define SBX_MAX_LAYERS (8 + SBX_MAX_HIDDEN + 1 + SBX_MAX_MOUNTS + SBX_MAX_KEEP_MOUNTS)

struct sbx_plan {
	struct sbx_layer layer[SBX_MAX_LAYERS];
	size_t n_layers;
	enum sbx_keep_op op[SBX_MAX_KEEP_MOUNTS];
	char *op_path[SBX_MAX_KEEP_MOUNTS]; /* owned */
	size_t n_ops;
};

/* An empty plan / free what it owns. */
void sbx_plan_init(struct sbx_plan *p);
void sbx_plan_free(struct sbx_plan *p);
/* Add a layer (path borrowed until sbx_plan_free). 0 or -1 when full. */
int sbx_plan_layer(struct sbx_plan *p, const char *path, enum sbx_view view, bool copy,
                   const char *what);
/* The layers of s's view. 0 or -1 + reason. */
int sbx_plan_view(struct sbx_plan *p, const struct sbx *s, char *err, size_t errlen);
/* What a kept path named, where it is there. */
struct sbx_found {
	bool there;
	char real[PATH_MAX]; /* resolved */
	mode_t mode;
	nlink_t nlink;
	uid_t uid;
	uint64_t mnt_id; /* 0: the kernel did not say */
};

/* Plan what keeps k (its path absolute or relative to the current
 * directory) out of CMD's reach: the path is resolved on the host one
 * component at a time, as the next run will; what it named goes to *f.
 * 0, or -1 + reason and advice when it cannot be kept. */
int sbx_plan_keep(struct sbx_plan *p, const struct sbx_keep *k, struct sbx_found *f, char *err,
                  size_t errlen);

/* privs.c: drop every capability (bounding, ambient, effective, permitted,
 * inheritable) and lock the securebits. 0 or -1 + reason. */
int sbx_caps_drop(bool keep_root_set, char *err, size_t errlen);
int sbx_seccomp_compile(struct sbx_filter *f, char *err, size_t errlen);
int sbx_seccomp_build(struct sbx_filter *f, char *err, size_t errlen);
int sbx_seccomp_install(const struct sbx_filter *f, char *err, size_t errlen);
void sbx_seccomp_free(struct sbx_filter *f);

/* checks.c: the post-set-up checks, run by a child of init after the
 * privilege drop (selftest only). */
void sbx_checks_post(struct sbx_report *r);
void sbx_check_set(struct sbx_report *r, enum sbx_check c, bool ok, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* diagnose.c: why the kernel refused, in one line naming the setting and
 * its value; every file is read under root ("" for this machine, a stand-in
 * directory in the unit tests). sbx_diagnose_userns explains clone's errno
 * e for the user namespace: a sysctl or AppArmor restriction, a chroot, a
 * seccomp filter. sbx_diagnose_proc rewrites err and returns true when a
 * refused /proc (e) is due to masked entries in the /proc we see. */
void sbx_diagnose_userns(const char *root, int e, char *err, size_t errlen);
bool sbx_proc_masked(const char *root);
/* The Seccomp: field of root/proc/self/status: 0 none, 1 strict, 2 filter;
 * -1 if unknown. */
long sbx_seccomp_mode(const char *root);
bool sbx_diagnose_proc(const char *root, int e, char *err, size_t errlen);

#endif
