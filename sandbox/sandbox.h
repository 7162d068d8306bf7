/* The sandbox (DESIGN.md, Process model): one clone into new user, mount,
 * pid, net, uts and ipc namespaces whose pid 1 ("init", sandbox/init.c)
 * makes the listeners' sockets and two netlink sockets inside the new
 * network namespace and hands them to the supervisor over a socketpair,
 * builds the filesystem view, drops every privilege, waits for "go" and
 * runs CMD.
 *
 * The supervisor side is this header: sbx_new() validates, sbx_start()
 * clones, sbx_recv_listeners() takes init's sockets and self-test results,
 * sets up the sandbox's network through them (lo, routes, ruleset, the
 * listeners bound) and checks it, and sbx_go() lets CMD start. The end
 * comes as init's report on the socket (sbx_read_end) or, if init dies
 * first, as the pidfd; sbx_end() says how it ended. sbx_free() kills and
 * reaps whatever is left, so every path out of the supervisor leaves
 * nothing behind. */
#ifndef AIRLOCK_SANDBOX_SANDBOX_H
#define AIRLOCK_SANDBOX_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "sandbox/ids.h"

struct sbx;

enum sbx_mount_kind {
	SBX_MOUNT_RW,    /* host path bound read-write */
	SBX_MOUNT_RO,    /* host path bound read-only (e.g. inside an rw path) */
	SBX_MOUNT_TMPFS, /* fresh empty writable tmpfs */
	SBX_MOUNT_HIDE,  /* empty read-only dir over a dir, /dev/null over a file */
};

struct sbx_mount {
	enum sbx_mount_kind kind;
	const char *path; /* borrowed; relative paths are taken from the cwd */
};

#define SBX_MAX_MOUNTS 72 /* the user's 64 (SBX_MAX_USER_MOUNTS) and airlock's own */

/* Everything init needs; borrowed by sbx_new() and valid until sbx_free().
 * Validated by sbx_new() before anything is created. */
struct nft_refuse;
struct sbx_cache;

struct sbx_config {
	char *const *argv;              /* CMD, NULL-terminated; NULL with selftest */
	char *const *envp;              /* CMD's whole environment (sbx_env_build) */
	const char *workdir;            /* read-write and CMD's cwd; NULL = current dir */
	const struct sbx_mount *mounts; /* applied in order, after the defaults */
	size_t n_mounts;
	bool root; /* CMD runs as uid 0 inside (still no capabilities) */
	/* Home directories (home, the caller's passwd entry's, /home and
	 * /root) are replaced by empty writable directories unless share_home: the
	 * unix sockets in them (ssh ControlMaster, docker) are reachable
	 * through a read-only bind. */
	const char *home; /* the caller's $HOME, borrowed; NULL = none */
	bool share_home;
	bool selftest; /* no CMD: run the post-set-up checks and exit */
	/* CMD gets a terminal of its own (docs/run.md, Terminal and signals)
	 * on stdin, and on stdout and stderr where they are stdin's terminal;
	 * the caller relays its master (sbx_recv_tty). For a caller whose
	 * stdin is a terminal. Without it CMD runs in a session of its own
	 * with the caller's std fds as they are. */
	bool tty;
	/* The ruleset's refusals at the SYN (nft/refuse.h), borrowed and read
	 * when the network is set up (sbx_recv_listeners); NULL: none. */
	const struct nft_refuse *refuse;
	/* --cache (sandbox/cache.h): bound read-write at SBX_CACHE_PATH after
	 * the user's mounts; borrowed; NULL: none. */
	const struct sbx_cache *cache;
	/* --ids (ids.h): ONE, init maps the caller's ids alone; RANGE, the
	 * supervisor writes these maps (and CMD with root keeps the
	 * capabilities over files and ids that apt and dpkg need). */
	struct sbx_ids ids;
	/* --overlay (overlay.c): the host's directories writable through an
	 * upper layer of the task's own: a tmpfs, or overlay_keep (an existing
	 * empty directory, absolute) when set. */
	bool overlay;
	const char *overlay_keep;
};

/* A path sbx_protect keeps out of CMD's reach, for this run and the next. */
enum sbx_keep_how {
	SBX_KEEP_READ, /* airlock reads it (the policy, an include, a preset
	                * directory, airlock itself): read-only inside */
	SBX_KEEP_HIDE, /* airlock writes it (the egress log, the default log
	                * directory): not visible inside */
};

struct sbx_keep {
	enum sbx_keep_how how;
	const char *path; /* borrowed; as airlock names it, relative to the
	                   * current directory or absolute, symlinks and all:
	                   * what the next run will open */
	const char *what; /* for messages: "policy", "egress log", ... */
};

/* At most this many mounts keep paths out of reach (SBX_MAX_MOUNTS is
 * the user's). */
#define SBX_MAX_KEEP_MOUNTS 64

/* The listening sockets init created in the sandbox's netns. Each field is
 * an fd owned by whoever holds the struct, or -1. */
struct sbx_listeners {
	int explicit_fd; /* TCP 127.0.0.1:AIRLOCK_PROXY_PORT */
	int tproxy4_fd;  /* TCP 127.0.0.1:AIRLOCK_TPROXY_PORT */
	int tproxy6_fd;  /* TCP [::1]:AIRLOCK_TPROXY_PORT */
	int dns_udp_fd;  /* UDP 127.0.0.1:AIRLOCK_DNS_PORT */
	int dns_tcp_fd;  /* TCP 127.0.0.1:AIRLOCK_DNS_PORT */
	int dns6_udp_fd; /* UDP [::1]:AIRLOCK_DNS_PORT (IPv6 port 53 goes here) */
	int dns6_tcp_fd; /* TCP [::1]:AIRLOCK_DNS_PORT */
	int nflog_fd;    /* NFLOG netlink socket bound to AIRLOCK_NFLOG_GROUP */
};

/* Set every fd to -1 / close every fd that is not -1. */
void sbx_listeners_init(struct sbx_listeners *l);
void sbx_listeners_close(struct sbx_listeners *l);

/* The self-test: what the sandbox checks about its own enforcement. The
 * first SBX_CHECK_PRE_GO run before every CMD; the rest only in
 * `airlock selftest` (they need the finished sandbox). */
enum sbx_check {
	SBX_CHECK_USERNS = 0,
	SBX_CHECK_NET,
	SBX_CHECK_RULESET,
	SBX_CHECK_LISTENERS,
	SBX_CHECK_PRE_GO, /* marker, also the first post-set-up check */
	SBX_CHECK_FS = SBX_CHECK_PRE_GO,
	SBX_CHECK_PROC,
	SBX_CHECK_PRIVS,
	SBX_CHECK_SECCOMP,
	SBX_CHECK_CAPTURE,
	SBX_CHECK_COUNT,
};

#define SBX_REASON_MAX 200

struct sbx_check_result {
	bool ran;
	bool ok;
	char reason[SBX_REASON_MAX]; /* why it failed; empty when ok */
};

struct sbx_report {
	struct sbx_check_result check[SBX_CHECK_COUNT];
};

/* Human name of a check ("user namespace", ...). */
const char *sbx_check_name(enum sbx_check c);
/* Record that check c failed for reason (copied, cut to fit): for checks
 * the supervisor makes itself. */
void sbx_check_set_failed(struct sbx_report *r, enum sbx_check c, const char *reason);
/* The first check that ran and failed in [0, upto), or -1 if all passed. */
int sbx_report_first_failure(const struct sbx_report *r, enum sbx_check upto);

/* Open /dev/null on whichever of fds 0, 1, 2 is closed, so no file or
 * socket opened later lands there and reaches CMD as its stdio. Call it
 * before opening anything. 0 or -1 with errno. */
int sbx_fix_stdio(void);

/* Validate cfg (paths, mounts, argv). Returns NULL with a one-line reason
 * in err. cfg and everything it points to are borrowed until sbx_free(). */
struct sbx *sbx_new(const struct sbx_config *cfg, char *err, size_t errlen);

/* Clone the sandbox. In the supervisor returns 0, or -1 with the reason
 * (EPERM from clone comes with advice on the sysctl / AppArmor settings
 * that disable user namespaces). The child never returns from here. */
int sbx_start(struct sbx *s, char *err, size_t errlen);

/* Block until init has handed over its sockets and check results (into
 * *rep), then set up the sandbox's network through them: lo, addresses and
 * routes (SBX_CHECK_NET), the ruleset (SBX_CHECK_RULESET), the listeners
 * bound and checked (SBX_CHECK_LISTENERS); the listeners (ours now) go to
 * *out. Returns 0 when everything was received (checks may still have
 * failed: see rep), -1 if init died or sent garbage. */
int sbx_recv_listeners(struct sbx *s, struct sbx_listeners *out, struct sbx_report *rep, char *err,
                       size_t errlen);

/* Start the unix socket gate (unixgate.h, docs/run.md "Unix sockets"):
 * wait for init's filter (SBX_MSG_GATE), take its notification fd and
 * unix_diag socket, and serve CMD's connect/send calls from threads of
 * the gate's own. cfg (borrowed until sbx_free) names the sockets the
 * policy opens; NULL opens none and reports nothing. Call it after
 * sbx_recv_listeners; sbx_go starts it with NULL when it was not. 0 or
 * -1 + reason. */
struct ugate_config;
int sbx_gate_start(struct sbx *s, const struct ugate_config *cfg, char *err, size_t errlen);
/* The gate, for its events (ugate_read_event); NULL before it started. */
struct ugate *sbx_gate(const struct sbx *s);
/* Keep the n paths out of CMD's reach (docs/run.md, Filesystem): each
 * one, and every directory and symlink on the way to it, in whichever
 * writable part of the sandbox it lies (the workdir, an --rw path, a
 * workdir that is $HOME), cannot be renamed, replaced or unlinked from
 * inside, and the path itself is read-only or not visible as its how
 * says. Symlinks are followed on the host; a path outside every writable
 * part needs nothing, or only a mask. Refused, with a one-line reason and
 * advice in err, when that cannot be done: a directory that is or holds
 * the workdir or an --rw path, a path missing where CMD could create it,
 * a file with more than one name (hard links) that CMD could write
 * through another, more than SBX_MAX_KEEP_MOUNTS mounts. The mounts go to
 * init, which makes them after the rest of the view and before it drops
 * its privileges. Call exactly once between sbx_start and sbx_go (init
 * waits for it; sbx_go refuses a run without it). 0 or -1; after -1 the
 * run must not go on (sbx_free). */
int sbx_protect(struct sbx *s, const struct sbx_keep *keep, size_t n, char *err, size_t errlen);
/* With cfg->tty, after sbx_recv_listeners and before sbx_go: wait for
 * init to open CMD's terminal, and return its master (the caller's to
 * close), checked to be a pseudo-terminal master. -1 + reason if init
 * died or sent something else. */
int sbx_recv_tty(struct sbx *s, char *err, size_t errlen);

/* The set-up calls above (sbx_recv_listeners, sbx_gate_start,
 * sbx_protect, sbx_recv_tty) leave err empty when they failed because
 * init ended after saying why on stderr (a bad --ro path, a mount that
 * failed): that line is the whole story, so print err only when it is not
 * empty. */

/* Tell init the supervisor is serving the listeners: CMD may start. With
 * ok false init exits 125 without running anything. 0 or -1 (also when
 * ok and sbx_protect was not called, except in selftest mode). */
int sbx_go(struct sbx *s, bool ok);

/* The pidfd of init: readable once the whole sandbox has exited. */
int sbx_pidfd(const struct sbx *s);

/* Give pid, a process the supervisor forked between sbx_start and
 * sbx_go (the broker, the worker), the caller's CPUs: it would otherwise
 * keep the supervisor's set-up pinning (one CPU) for good. */
void sbx_cpus_release(const struct sbx *s, pid_t pid);

/* The supervisor's end of the socket to init: readable when init reports
 * CMD's end (then sbx_read_end), or closes it. */
int sbx_sock(const struct sbx *s);

/* In a process forked from the supervisor that serves and must not
 * reach the sandbox (the worker, cli/cmd_run.c): close this copy's
 * descriptors to it (init's socket and pidfd, the nfnetlink socket in its
 * network namespace). The process then never calls sbx_free on it. */
void sbx_forget_fds(struct sbx *s);

/* Signal init (SIGKILL ends the whole sandbox). Init passes any other
 * signal on to CMD. 0 or -1. */
int sbx_kill(struct sbx *s, int sig);
/* Signal CMD's whole process group through init, as a terminal signals
 * its foreground group (a Ctrl-C on a terminal that is not CMD's). 0 or
 * -1. */
int sbx_kill_pgrp(struct sbx *s, int sig);

/* Read, without blocking, what init has sent since the go: in selftest
 * mode the post-set-up checks (into rep, which may be NULL), then CMD's
 * end. Returns 1 once init has reported CMD's end after killing and
 * reaping every other process in the sandbox: nothing left in it can
 * reach the network, init is on its way out, and the caller may stop
 * serving without waiting for the pidfd. 0: nothing yet, call again when
 * the socket is readable. -1: no such report will come (init is gone, or
 * could not clear the sandbox): wait for the pidfd. */
int sbx_read_end(struct sbx *s, struct sbx_report *rep);

/* How the sandbox ended, filled by sbx_end(). */
struct sbx_result {
	bool have_cmd_status; /* init reported CMD's wait status */
	int cmd_wstatus;      /* CMD's wait status (waitpid), if reported */
	int exit_status;      /* airlock's exit status (sbx_exit_status) */
	int signal;           /* signal that killed CMD, 0 if none */
};

/* How the sandbox ended, into *res. At once after sbx_read_end returned 1
 * (sbx_free reaps init); otherwise it first waits for init to exit, then
 * reads its last messages as sbx_read_end does. 0 or -1. */
int sbx_end(struct sbx *s, struct sbx_result *res, struct sbx_report *rep);

/* Close everything, then reap init: waited for if it reported CMD's end
 * (sbx_read_end), killed first otherwise. NULL is fine. */
void sbx_free(struct sbx *s);

#endif
