/* `airlock run`: the supervisor (DESIGN.md, Process model). Compiles the
 * policy, opens the egress log, clones the sandbox, receives its listeners,
 * sets up their libevent loop (proxy, DNS, NFLOG) in the host's network
 * namespace, and forks the worker that serves it, confined (DESIGN.md,
 * Confinement); lets CMD start, and exits with CMD's status. The reference
 * is docs/run.md. */
#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/client.h"
#include "cli/cmd.h"
#include "common/confine.h"
#include "common/fdcaller.h"
#include "common/fdres.h"
#include "cli/term.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/cache.h"
#include "dns/resolver.h"
#include "dns/dns.h"
#include "elog/elog.h"
#include "elog/logdir.h"
#include "elog/logger.h"
#include "elog/notice.h"
#include "nft/nflog.h"
#include "nft/refuse.h"
#include "policy/policy.h"
#include "policy/verdict.h"
#include "proxy/proxy.h"
#include "sandbox/cache.h"
#include "sandbox/env.h"
#include "sandbox/opts.h"
#include "sandbox/sandbox.h"
#include "sandbox/status.h"
#include "sandbox/unixgate.h"
#include "worker/confine.h"

extern char **environ;

#define DNS_CACHE_ENTRIES 4096

_Static_assert(SBX_MAX_USER_MOUNTS <= SBX_MAX_MOUNTS, "the sandbox must take the user's mounts");
#define TASK_ID_LEN 16 /* a random one: hex digits */
/* What sbx_protect keeps: the log, airlock itself, the policy's files (at
 * most 64, policy/internal.h), the preset directories (at most 19) and the
 * host sockets its unix: list opens. */
#define MAX_PRESET_DIRS 20
#define MAX_KEEP_UNIX   32 /* unix: entries kept; a policy with more is refused */
#define MAX_KEEP        (2 + 64 + MAX_PRESET_DIRS + MAX_KEEP_UNIX)
/* How long CMD's last output may take to reach the caller's terminal. */
#define TERM_DRAIN_MS 1000
/* After task-end: how long lines still waiting for a slow log reader may
 * take to go out (the stall rule, a second without progress, still
 * applies; docs/log.md). */
#define LOG_DRAIN_MS 5000
/* How long the worker may take to confine itself before CMD starts, and
 * to write task-end and its last lines (LOG_DRAIN_MS of them) once told
 * the task is over; then it is killed. */
#define WORKER_READY_MS 5000
#define WORKER_END_MS   (LOG_DRAIN_MS + 2000)

/* Between the supervisor and the worker, one per SOCK_SEQPACKET packet,
 * every one this size (docs/run.md, "The worker"). The supervisor takes
 * only READY and SEAL from the worker, which can only narrow what runs. */
enum run_wmsg_type {
	RUN_WMSG_READY = 1, /* worker -> sup: confined, serving */
	RUN_WMSG_SEAL,      /* worker -> sup: the log failed or its budget is spent */
	RUN_WMSG_UNIX,      /* sup -> worker: a decision of the unix socket gate, to log */
	RUN_WMSG_END,       /* sup -> worker: the task is over: its last lines, then exit */
	RUN_WMSG_DONE,      /* worker -> sup: task-end written; status 0 when the log is whole */
};

struct run_wmsg {
	uint32_t type;              /* enum run_wmsg_type */
	int32_t status;             /* END: airlock's exit status so far; DONE: 0 or 1 */
	int32_t signal;             /* END: the signal that ended CMD, or 0 */
	struct ugate_event unix_ev; /* UNIX */
};

struct run {
	struct sbx_opts opts;
	char task[ELOG_TASK_ID_MAX + 1];
	char logpath[PATH_MAX];
	char logdir[PATH_MAX];       /* default log directory, hidden inside; or "" */
	char other_logdir[PATH_MAX]; /* with --log: the default one, hidden too */
	char exe[PATH_MAX];          /* airlock's own executable, kept read-only; or "" */
	struct sockaddr_storage upstream[DNS_MAX_UPSTREAMS];
	size_t n_upstream;
	uint64_t start_ms;
	bool timed_out;
	bool gate_broken;           /* the unix socket gate failed: the sandbox was ended */
	bool log_created;           /* open_log created the file (removed if unused) */
	struct sbx_cache *pkgcache; /* --cache: held (locked) until the sandbox is gone; NULL */
	dev_t log_dev;
	ino_t log_ino;

	struct policy *policy;
	/* What the ruleset refuses at the SYN, from the policy (load_policy). */
	struct nft_refuse refuse;
	struct elog *log;
	struct elog_notice *notice; /* denials on stderr (-q: none) */
	char **env;
	struct sbx *sbx;
	struct sbx_listeners lst;
	struct event_base *base;
	struct event_base *serve_base; /* once the worker is forked: the serving objects' loop,
	                                  until serving_abandon; NULL */
	struct dns_asker asker;        /* the DNS server's: the broker (broker_client_asker) */
	struct dns_cache *cache;
	struct proxy *proxy;
	struct dns_server *dns;
	struct nflog_reader *nflog;
	struct broker_client *broker; /* the proxy's upstream sockets (broker/broker.h) */
	pid_t broker_pid;             /* 0 when none was spawned */
	/* The broker is forked after the go (start_broker): until then its
	 * end of the socket and its configuration wait here. */
	int broker_child;             /* -1 once the broker has it */
	struct broker_cfg broker_cfg; /* borrows the policy */
	bool broker_failed;           /* it could not be forked, or exited: the run fails */
	int broker_pidfd;             /* its end, watched while the sandbox runs; -1 */
	struct event *ev_broker;
	pid_t logger_pid; /* the log's logger once the worker writes to it; 0 */
	int sigfd;
	struct event *ev_sig, *ev_pidfd, *ev_end, *ev_timeout;
	/* The unix socket gate's view of the policy's unix: list (strings
	 * borrowed from the policy) and its events' watcher. */
	struct ugate_allow *unix_allow;
	size_t n_unix_allow;
	struct event *ev_gate;
	struct event *ev_watch_gate; /* seals the gate once the log fails or is spent; ends a broken
	                                gate */
	/* The worker (docs/run.md, "The worker"): once forked, the process
	 * that serves proxy, DNS and NFLOG and alone writes the log; the
	 * supervisor's copies of those are freed (serving_abandon). */
	pid_t worker;            /* -1 before the fork and once reaped */
	int worker_fd;           /* the supervisor's end of its socketpair; -1 */
	struct event *ev_worker; /* its messages, and its end */
	int worker_err;          /* the worker's stderr, a pipe read here; -1 */
	struct event *ev_worker_err;
	uint64_t worker_err_bytes;   /* relayed so far (WORKER_STDERR_MAX) */
	bool worker_ready;           /* it said READY: confined and serving */
	bool worker_gone;            /* it ended before it was told to: the run fails */
	bool worker_done;            /* it said DONE: it is exiting on its own */
	bool log_sealed;             /* it said SEAL */
	int landlock_abi;            /* the kernel's, which the worker applies (task-start) */
	struct termios tio;          /* the caller's terminal's modes, with a terminal (cfg.tty) */
	int tty_master;              /* CMD's terminal, until term_new takes it; -1 */
	struct term *term;           /* the relay to CMD's own terminal, or NULL */
	char overlay_keep[PATH_MAX]; /* --overlay-keep's directory, resolved; or "" */
};

static int
make_task_id(char out[TASK_ID_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char b[TASK_ID_LEN / 2];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -1;
	for (size_t i = 0; i < sizeof(b); i++) {
		out[2 * i] = hex[b[i] >> 4];
		out[2 * i + 1] = hex[b[i] & 15];
	}
	out[TASK_ID_LEN] = '\0';
	return 0;
}

/* The default log, TASK.jsonl in the log directory (elog/logdir.h). A
 * task id the user chose must not be one whose log is already there: two
 * runs in one file under one id would be one chain to `log verify`, and
 * --task would not tell them apart. */
static int
default_log_path(struct run *r)
{
	char err[PATH_MAX + 64];
	struct stat st;
	int n;

	if (elog_logdir(r->logdir, sizeof(r->logdir), true, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return -1;
	}
	n = snprintf(r->logpath, sizeof(r->logpath), "%s/%s.jsonl", r->logdir, r->task);
	if (n < 0 || (size_t)n >= sizeof(r->logpath)) {
		log_warnx("log path too long; use --log FILE");
		return -1;
	}
	if (r->opts.task_id != NULL && lstat(r->logpath, &st) == 0) {
		log_warnx("--task-id %s: that task's log %s exists already: give each run its own "
		          "id, or --log FILE",
		          r->task, r->logpath);
		return -1;
	}
	return 0;
}

/* A run refused before its task-start leaves no empty log file behind
 * when it created one (the same file still: checked by inode). */
static void
drop_new_log(struct run *r)
{
	struct stat st;

	if (r->log_created && stat(r->logpath, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_dev == r->log_dev && st.st_ino == r->log_ino && st.st_size == 0)
		(void)unlink(r->logpath);
	r->log_created = false;
}

/* Open the egress log, refusing a file CMD can write to through its
 * stdout or stderr (/dev/stdout, /dev/fd/1, the file stdout is redirected
 * to): CMD could forge lines or cut ours in half. /dev/null is harmless. */
static int
open_log(struct run *r)
{
	struct stat lst, st;
	char err[256];
	/* O_NONBLOCK: a FIFO with no reader fails at once (ENXIO) instead of
	 * blocking the start; the log's writer makes a pipe non-blocking
	 * anyway (elog/sink.h), and a file does not care. */
	int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	int fd = open(r->logpath, flags | O_EXCL, 0600);

	r->log_created = fd >= 0;
	if (fd < 0 && errno == EEXIST)
		fd = open(r->logpath, flags, 0600);
	if (fd < 0) {
		log_warn("egress log %s: cannot open", r->logpath);
		return -1;
	}
	if (fstat(fd, &lst) < 0) {
		log_warn("egress log %s: fstat", r->logpath);
		fd_close(&fd);
		return -1;
	}
	r->log_dev = lst.st_dev;
	r->log_ino = lst.st_ino;
	for (int std = STDOUT_FILENO; std <= STDERR_FILENO; std++) {
		if (fstat(std, &st) < 0 || st.st_dev != lst.st_dev || st.st_ino != lst.st_ino)
			continue;
		if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
			continue;
		log_warnx("egress log %s is CMD's %s: CMD could forge log lines; use another "
		          "file, or --log /dev/fd/N with N open on a pipe CMD does not write to",
		          r->logpath, std == STDOUT_FILENO ? "stdout" : "stderr");
		fd_close(&fd);
		drop_new_log(r);
		return -1;
	}
	/* From here on the logger alone holds the log's fd (elog/logger.h);
	 * this process keeps its socket. */
	r->log = elog_logger_open(fd, err, sizeof(err));
	if (r->log == NULL) {
		log_warnx("egress log %s: cannot use it: %s", r->logpath, err);
		return -1;
	}
	elog_set_budget(r->log, r->opts.log_budget);
	return 0;
}

static int
load_policy(struct run *r)
{
	struct policy_diag diag = {0};

	r->policy = policy_load(r->opts.policy, &diag);
	if (r->policy == NULL) {
		for (size_t i = 0; i < diag.n_lines; i++)
			log_warnx("%s", diag.lines[i]);
		if (diag.n_lines == 0)
			log_warnx("policy %s: cannot load", r->opts.policy);
		log_warnx("refusing to run: the policy is invalid");
		policy_diag_clear(&diag);
		return -1;
	}
	policy_diag_clear(&diag);
	if (policy_inspects(r->policy)) {
		/* Not served yet: running it would tunnel the host uninspected,
		 * which is not what the policy says. */
		log_warnx("refusing to run: the policy has `inspect:` rules, and this build does "
		          "not serve TLS inspection yet (docs/policy.md, \"Inspection\")");
		return -1;
	}
	if (r->opts.audit)
		policy_set_mode(r->policy, POLICY_MODE_AUDIT);
	nft_refuse_build(r->policy, &r->refuse);
	return 0;
}

/* Keep what this run read and writes, and what the next run will read,
 * out of CMD's reach (sbx_protect): the log (or the default log
 * directory, with every earlier task's log), the policy's files, the
 * preset directories, and airlock itself. Each as the next run names it;
 * the policy's files as they were opened, relative to this directory. */
static int
protect_files(struct run *r)
{
	struct sbx_keep keep[MAX_KEEP];
	const struct policy_source *src;
	const char *dirs[MAX_PRESET_DIRS];
	size_t n = 0, nsrc = policy_sources(r->policy, &src);
	size_t ndirs = policy_preset_dirs(dirs, ARRAY_SIZE(dirs));
	size_t nunix = policy_unix_count(r->policy);
	char err[PATH_MAX + 512];
	ssize_t len;

	/* Fail closed: every file, or no run. */
	if (nsrc + ndirs + nunix + 4 > ARRAY_SIZE(keep) || ndirs == ARRAY_SIZE(dirs) ||
	    nunix > MAX_KEEP_UNIX) {
		log_warnx(
		        "too many policy files and preset directories to keep out of CMD's reach");
		return -1;
	}
	if (r->logdir[0] != '\0') {
		keep[n++] = (struct sbx_keep){SBX_KEEP_HIDE, r->logdir, "log directory"};
	} else {
		char err2[PATH_MAX + 64];
		struct stat st;

		keep[n++] = (struct sbx_keep){SBX_KEEP_HIDE, r->logpath, "egress log"};
		/* The default directory too, where earlier runs' logs are: a
		 * task must not plant one that `log show --last` would take.
		 * Made when missing, so that CMD cannot make it first. */
		if (elog_logdir(r->other_logdir, sizeof(r->other_logdir), true, err2,
		                sizeof(err2)) == 0 &&
		    stat(r->other_logdir, &st) == 0 && S_ISDIR(st.st_mode))
			keep[n++] =
			        (struct sbx_keep){SBX_KEEP_HIDE, r->other_logdir, "log directory"};
	}
	/* --overlay-keep: the layer is the overlay's, not a place CMD may
	 * reach by its path (as the workdir, say) and edit beneath it. */
	if (r->overlay_keep[0] != '\0')
		keep[n++] = (struct sbx_keep){SBX_KEEP_HIDE, r->overlay_keep, "kept layer"};
	for (size_t i = 0; i < nsrc; i++)
		keep[n++] = (struct sbx_keep){SBX_KEEP_READ, src[i].path, "policy file"};
	for (size_t i = 0; i < ndirs; i++)
		keep[n++] = (struct sbx_keep){SBX_KEEP_READ, dirs[i], "preset directory"};
	/* A host socket the policy opens, where CMD could otherwise put a
	 * symlink to another one in its place (unixgate.c matches without
	 * following symlinks, too). */
	for (size_t i = 0; i < nunix; i++)
		keep[n++] = (struct sbx_keep){SBX_KEEP_READ, policy_unix_path(r->policy, i, NULL),
		                              "socket the policy opens"};
	len = readlink("/proc/self/exe", r->exe, sizeof(r->exe) - 1);
	if (len > 0) {
		r->exe[len] = '\0';
		keep[n++] = (struct sbx_keep){SBX_KEEP_READ, r->exe, "airlock's executable"};
	}
	if (sbx_protect(r->sbx, keep, n, err, sizeof(err)) < 0) {
		if (err[0] != '\0') /* empty: init has said why (sandbox.h) */
			log_warnx("%s", err);
		return -1;
	}
	return 0;
}

static int
load_upstreams(struct run *r)
{
	int n;

	if (r->opts.dns_upstream != NULL) {
		if (dns_upstream_parse(r->opts.dns_upstream, &r->upstream[0]) < 0) {
			log_warnx("--dns-upstream '%s': expected ADDR, ADDR:PORT or [V6]:PORT",
			          r->opts.dns_upstream);
			return -1;
		}
		r->n_upstream = 1;
		return 0;
	}
	n = dns_upstream_from_resolv_conf("/etc/resolv.conf", r->upstream, DNS_MAX_UPSTREAMS);
	if (n < 0) {
		log_warn("cannot read /etc/resolv.conf for upstream DNS; use --dns-upstream");
		return -1;
	}
	if (n == 0)
		log_warnx("no nameserver in /etc/resolv.conf: allowed names will not "
		          "resolve; use --dns-upstream ADDR");
	r->n_upstream = (size_t)n;
	return 0;
}

static void
on_pidfd(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	event_base_loopbreak(r->base);
}

/* Init's report of CMD's end: once nothing else is left in the sandbox,
 * the task ends here, while the kernel still takes init apart. Otherwise
 * the pidfd says when it is over. */
static void
on_end(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	switch (sbx_read_end(r->sbx, NULL)) {
	case 1:
		event_base_loopbreak(r->base);
		break;
	case -1:
		event_del(r->ev_end);
		break;
	}
}

static void
on_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	log_warnx("timeout: %u s elapsed, killing the sandbox", r->opts.timeout_s);
	r->timed_out = true;
	sbx_kill(r->sbx, SIGKILL);
}

static void
on_signal(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	struct signalfd_siginfo si;

	while (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		/* A terminal's signal (Ctrl-C on a terminal that is not
		 * CMD's: stdin or stdout redirected) goes to its foreground
		 * process group, airlock's, and not to CMD, which has a
		 * session of its own: pass it on to CMD's group, as the
		 * terminal would have. Signals sent to airlock are CMD's. */
		if (si.ssi_code == SI_KERNEL) {
			log_info("passing the terminal's signal %u on to the sandbox",
			         si.ssi_signo);
			sbx_kill_pgrp(r->sbx, (int)si.ssi_signo);
			continue;
		}
		log_info("passing signal %u on to the sandbox", si.ssi_signo);
		sbx_kill(r->sbx, (int)si.ssi_signo);
	}
}

static const char *
sock_type_name(int type)
{
	switch (type) {
	case SOCK_STREAM:
		return "stream";
	case SOCK_DGRAM:
		return "dgram";
	case SOCK_SEQPACKET:
		return "seqpacket";
	}
	return NULL;
}

/* One decision of the gate on a host socket, one "unix" line
 * (docs/log.md), by the log's only writer: the worker once it serves,
 * the supervisor before. The deciding rule is looked up in the policy, so
 * that the worker needs no table of the supervisor's. */
static void
log_unix_event(struct run *r, const struct ugate_event *ev)
{
	struct elog_event e;
	char path[sizeof(ev->path) + 1];

	memcpy(path, ev->path, sizeof(ev->path));
	path[sizeof(ev->path)] = '\0';
	memset(&e, 0, sizeof(e));
	e.kind = "unix";
	e.path = path;
	e.port = -1;
	e.verdict = ugate_verdict_name((enum ugate_verdict)ev->verdict);
	if (ev->allow >= 0 && (size_t)ev->allow < policy_unix_count(r->policy))
		(void)policy_unix_path(r->policy, (size_t)ev->allow, &e.rule);
	else {
		e.reason = verdict_reason_token(VR_UNIX_NOT_LISTED);
		e.detail = verdict_reason_text(VR_UNIX_NOT_LISTED);
	}
	e.method = ugate_op_name((enum ugate_op)ev->op);
	e.proto = sock_type_name(ev->sock_type);
	/* A datagram flood to one host socket is one line and a count. */
	(void)elog_event_agg(r->log, &e);
}

/* The gate's decisions, to the worker that logs them (one message each,
 * never waiting), or logged here before there is one. */
static void
drain_gate(struct run *r)
{
	struct ugate *g = r->sbx != NULL ? sbx_gate(r->sbx) : NULL;
	struct run_wmsg m;

	while (g != NULL && ugate_read_event(g, &m.unix_ev) == 1) {
		if (r->worker_fd < 0) {
			if (r->log != NULL)
				log_unix_event(r, &m.unix_ev);
			continue;
		}
		m.type = RUN_WMSG_UNIX;
		m.status = m.signal = 0;
		/* Never waiting on the worker; a decision that cannot be
		 * logged closes the gate, as a failed log does. */
		if (send(r->worker_fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(m)) {
			log_warn("unix socket gate: a decision could not reach the worker's log; "
			         "the policy's unix: sockets are closed from now on");
			ugate_seal(g);
		}
	}
}

/* A log that failed, or whose budget is spent, records nothing new: the
 * host sockets the policy opens close too (the proxy and the DNS listener
 * refuse on their own). Within a second, as the proxy notices. */
static void
watch_gate(struct run *r)
{
	if (r->sbx == NULL)
		return;
	if (r->worker_fd >= 0 ? r->log_sealed : elog_failed(r->log) || elog_budget_spent(r->log))
		ugate_seal(sbx_gate(r->sbx));
	/* Fail closed rather than leave CMD's calls waiting until --timeout. */
	if (!r->gate_broken && ugate_broken(sbx_gate(r->sbx))) {
		log_warnx("the unix socket gate failed: ending the sandbox");
		r->gate_broken = true;
		sbx_kill(r->sbx, SIGKILL);
	}
}

static void
on_gate(evutil_socket_t fd, short what, void *arg)
{
	drain_gate(arg);
	watch_gate(arg);
}

static void
on_watch_gate(evutil_socket_t fd, short what, void *arg)
{
	watch_gate(arg);
}

/* The gate serves CMD's connects and sends from its own threads; it gets
 * the policy's unix: list. Waits for init's filter: after task-start, so
 * that this wait overlaps init's filesystem work as the rest does. */
static int
start_gate(struct run *r, char *err, size_t errlen)
{
	struct ugate_config gc;
	size_t n = policy_unix_count(r->policy);

	if (n > 0 && (r->unix_allow = calloc(n, sizeof(*r->unix_allow))) == NULL) {
		snprintf(err, errlen, "unix socket gate: out of memory");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		r->unix_allow[i].path = policy_unix_path(r->policy, i, &r->unix_allow[i].where);
	r->n_unix_allow = n;
	memset(&gc, 0, sizeof(gc));
	gc.allow = r->unix_allow;
	gc.n_allow = n;
	gc.events = true;
	return sbx_gate_start(r->sbx, &gc, err, errlen);
}

/* With a terminal on stdin and stdout (cfg.tty), the relay, just before
 * the go: the caller's terminal raw from here until term_free. */
static int
start_terminal(struct run *r)
{
	char err[256];
	int master = r->tty_master;

	r->tty_master = -1;
	r->term = term_new(r->base, master, &r->tio, err, sizeof(err));
	if (r->term == NULL) {
		log_warnx("%s", err);
		return -1;
	}
	return 0;
}

/* The event loop and its servers, made while init sets up the sandbox. */
static int
prepare_loop(struct run *r)
{
	struct proxy_config pc;
	struct dns_server_config dc;
	struct broker_cfg *bc = &r->broker_cfg;
	char err[256];
	int bfd;

	/* Two descriptors per tunnel: the supervisor takes every one the
	 * hard limit allows. Only the supervisor: CMD, started already,
	 * keeps the caller's limit. */
	(void)fdres_raise_limit();

	/* The broker resolves, guards and connects every upstream socket of
	 * the proxy and answers the DNS listener's questions, with its own
	 * resolver (the hosts file read before it
	 * confines itself) and its own watch of the host's addresses
	 * (docs/run.md, "The broker"). Only its socket now: the proxy's
	 * requests wait in it until the broker, forked after the go
	 * (start_broker), has confined itself and reads them. Its set-up
	 * (fork, resolver, the host-address dump, confinement) then overlaps
	 * CMD's start instead of competing with init's and ours. */
	memset(bc, 0, sizeof(*bc));
	bc->policy = r->policy;
	bc->dns.n_upstream = r->n_upstream;
	memcpy(bc->dns.upstream, r->upstream, sizeof(bc->dns.upstream));
	bc->dns.hosts_path = "/etc/hosts";
	if ((bfd = broker_socket(&r->broker_child, err, sizeof(err))) < 0) {
		log_warnx("%s", err);
		return -1;
	}

	/* The changelist folds the add/del pairs of a connection's life into
	 * one epoll_ctl each (as in cmd_proxy.c): fewer syscalls. */
	struct event_config *ec = event_config_new();
	if (ec != NULL) {
		event_config_set_flag(ec, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
		r->base = event_base_new_with_config(ec);
		event_config_free(ec);
	}
	if (r->base == NULL) {
		log_warnx("cannot create the event loop");
		close(bfd);
		return -1;
	}
	if ((r->broker = broker_client_new(r->base, bfd, 0)) == NULL) {
		log_warnx("broker: out of memory");
		return -1;
	}
	r->cache = dns_cache_new(DNS_CACHE_ENTRIES);
	if (r->cache == NULL) {
		log_warnx("DNS cache: out of memory");
		return -1;
	}
	/* The DNS server asks the broker, which decides again, resolves with
	 * the one resolver and records what it told the sandbox: the worker
	 * makes no socket (docs/run.md, "The worker"). */
	broker_client_asker(r->broker, &r->asker);

	/* The log's aggregation window and its slow-reader queue run on the
	 * same loop as the traffic they record. */
	if (elog_attach(r->log, r->base) < 0)
		log_warnx("egress log: cannot attach it to the event loop; counts go out with "
		          "the next line");

	memset(&pc, 0, sizeof(pc));
	pc.policy = r->policy;
	pc.log = r->log;
	pc.cache = r->cache;
	pc.broker = r->broker;
	r->proxy = proxy_new(r->base, &pc);
	if (r->proxy == NULL) {
		log_warnx("proxy: cannot start");
		return -1;
	}

	memset(&dc, 0, sizeof(dc));
	dc.policy = r->policy;
	dc.log = r->log;
	dc.cache = r->cache;
	dc.asker = &r->asker;
	/* One bound on queued bytes and one descriptor reserve for both. */
	dc.queue = proxy_queue_budget(r->proxy);
	dc.fds = proxy_fd_reserve(r->proxy);
	r->dns = dns_server_new(r->base, &dc);
	if (r->dns == NULL) {
		log_warnx("DNS server: cannot start");
		return -1;
	}
	return 0;
}

/* Serve the listeners. Each consumer takes its fd, even when it fails, so
 * the field is cleared first. On failure, why says which. */
static int
serve(struct run *r, char *why, size_t whylen)
{
	static const char *const names[] = {"explicit proxy", "transparent proxy (v4)",
	                                    "transparent proxy (v6)"};
	int *pfds[] = {&r->lst.explicit_fd, &r->lst.tproxy4_fd, &r->lst.tproxy6_fd};
	int fd;

	for (size_t i = 0; i < ARRAY_SIZE(pfds); i++) {
		fd = *pfds[i];
		*pfds[i] = -1;
		if (proxy_add_listener(r->proxy, fd,
		                       i == 0 ? PROXY_LISTEN_EXPLICIT : PROXY_LISTEN_TRANSPARENT) <
		    0) {
			snprintf(why, whylen, "the proxy cannot serve the %s listener", names[i]);
			return -1;
		}
	}
	/* Port 53 of either family is redirected to the loopback address of
	 * that family: serve both. */
	int *dfds[] = {&r->lst.dns_udp_fd, &r->lst.dns_tcp_fd, &r->lst.dns6_udp_fd,
	               &r->lst.dns6_tcp_fd};
	static const char *const dnames[] = {"UDP 127.0.0.1", "TCP 127.0.0.1", "UDP [::1]",
	                                     "TCP [::1]"};
	for (size_t i = 0; i < ARRAY_SIZE(dfds); i++) {
		fd = *dfds[i];
		*dfds[i] = -1;
		if ((i % 2 == 0 ? dns_server_add_udp(r->dns, fd) : dns_server_add_tcp(r->dns, fd)) <
		    0) {
			snprintf(why, whylen, "the DNS server cannot serve the %s listener",
			         dnames[i]);
			return -1;
		}
	}
	fd = r->lst.nflog_fd;
	r->lst.nflog_fd = -1;
	r->nflog = nflog_reader_new(r->base, fd, r->log);
	if (r->nflog == NULL) {
		snprintf(why, whylen, "the NFLOG reader cannot start");
		return -1;
	}
	return 0;
}

static void
on_broker_exit(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;

	if (r->broker_failed)
		return;
	log_warnx("the broker exited: ending the sandbox");
	r->broker_failed = true;
	sbx_kill(r->sbx, SIGKILL);
}

/* Fork the broker, after the go (prepare_loop says why). Without it no
 * upstream connection of the proxy's could ever be made: the run ends, as
 * with a worker that cannot confine itself. */
static void
start_broker(struct run *r)
{
	char err[256];
	int child = r->broker_child;

	r->broker_child = -1;
	if (broker_start(&r->broker_cfg, child, &r->broker_pid, err, sizeof(err)) == 0) {
		log_debug("supervisor: broker %d forked at %.3f ms", (int)r->broker_pid,
		          ms_since_start());
		/* A broker that ends before the sandbox does (its set-up or
		 * confinement failed, or it was killed) ends the run: every
		 * connection and question would fail from then on. */
		if ((r->broker_pidfd = pidfd_open(r->broker_pid, 0)) >= 0 &&
		    (r->ev_broker = event_new(r->base, r->broker_pidfd, EV_READ, on_broker_exit,
		                              r)) != NULL &&
		    event_add(r->ev_broker, NULL) == 0)
			return;
		snprintf(err, sizeof(err), "broker: cannot watch it: %s", strerror(errno));
	} else {
		r->broker_pid = 0;
	}
	log_warnx("%s: ending the sandbox", err);
	r->broker_failed = true;
	sbx_kill(r->sbx, SIGKILL);
}

/* The worker writes no file (RLIMIT_FSIZE 0: a stderr redirected to a
 * file would be one); its stderr is a pipe that the supervisor copies to
 * its own, through log_stream (CR LF while CMD's terminal is raw), up to
 * this many bytes: a compromised worker cannot fill a disk through it. */
#define WORKER_STDERR_MAX (4u << 20)

static void
relay_worker_err(struct run *r)
{
	char buf[16384];
	FILE *out = log_stream() != NULL ? log_stream() : stderr;

	for (;;) {
		ssize_t n = read(r->worker_err, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
				if (r->ev_worker_err != NULL)
					event_del(r->ev_worker_err);
				fd_close(&r->worker_err);
			}
			return;
		}
		if (r->worker_err_bytes < WORKER_STDERR_MAX) {
			size_t room = WORKER_STDERR_MAX - r->worker_err_bytes;
			size_t len = (size_t)n < room ? (size_t)n : room;

			/* What drives a terminal is shown, not sent: the worker
			 * escapes what it writes, a compromised one would not. */
			for (size_t i = 0; i < len; i++) {
				unsigned char c = (unsigned char)buf[i];

				if ((c >= 0x20 && c < 0x7f) || c == '\n' || c == '\t')
					fputc(c, out);
				else
					fprintf(out, "\\x%02x", c);
			}
			fflush(out);
			if ((size_t)n >= room)
				log_warnx("the worker's stderr passed %u MiB: the rest is dropped",
				          WORKER_STDERR_MAX >> 20);
		}
		r->worker_err_bytes += (uint64_t)n;
	}
}

static void
on_worker_err(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	relay_worker_err(arg);
}

static void on_worker(evutil_socket_t fd, short what, void *arg);

static int
setup_events(struct run *r)
{
	sigset_t sigs;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	r->sigfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
	if (r->sigfd < 0) {
		log_warn("signalfd");
		return -1;
	}
	r->ev_sig = event_new(r->base, r->sigfd, EV_READ | EV_PERSIST, on_signal, r);
	r->ev_pidfd = event_new(r->base, sbx_pidfd(r->sbx), EV_READ, on_pidfd, r);
	r->ev_end = event_new(r->base, sbx_sock(r->sbx), EV_READ | EV_PERSIST, on_end, r);
	r->ev_gate = event_new(r->base, ugate_event_fd(sbx_gate(r->sbx)), EV_READ | EV_PERSIST,
	                       on_gate, r);
	r->ev_watch_gate = event_new(r->base, -1, EV_PERSIST, on_watch_gate, r);
	struct timeval second = {.tv_sec = 1};
	if (r->ev_sig == NULL || r->ev_pidfd == NULL || r->ev_end == NULL || r->ev_gate == NULL ||
	    r->ev_watch_gate == NULL || event_add(r->ev_sig, NULL) < 0 ||
	    event_add(r->ev_pidfd, NULL) < 0 || event_add(r->ev_end, NULL) < 0 ||
	    event_add(r->ev_gate, NULL) < 0 || event_add(r->ev_watch_gate, &second) < 0) {
		log_warnx("cannot watch the sandbox");
		return -1;
	}
	if (r->worker_fd >= 0) {
		r->ev_worker = event_new(r->base, r->worker_fd, EV_READ | EV_PERSIST, on_worker, r);
		if (r->worker_err >= 0 &&
		    ((r->ev_worker_err = event_new(r->base, r->worker_err, EV_READ | EV_PERSIST,
		                                   on_worker_err, r)) == NULL ||
		     event_add(r->ev_worker_err, NULL) < 0))
			log_warnx("cannot watch the worker's stderr");
		if (r->ev_worker == NULL || event_add(r->ev_worker, NULL) < 0) {
			log_warnx("cannot watch the worker");
			return -1;
		}
	}
	if (r->opts.timeout_s > 0) {
		struct timeval tv = {.tv_sec = r->opts.timeout_s};
		r->ev_timeout = evtimer_new(r->base, on_timeout, r);
		if (r->ev_timeout == NULL || evtimer_add(r->ev_timeout, &tv) < 0) {
			log_warnx("cannot arm the timeout");
			return -1;
		}
	}
	return 0;
}

/* Stop serving: the NFLOG reader flushes its pending packet counts, the
 * proxy logs the connections still open, the DNS server the queries in
 * flight. Called before task-end so that task-end is the task's last line
 * and its totals count everything. */
static void
run_stop_serving(struct run *r)
{
	drain_gate(r);
	nflog_reader_free(r->nflog);
	r->nflog = NULL;
	/* The DNS server first: it borrows the proxy's queue budget and
	 * descriptor reserve. */
	if (r->dns != NULL)
		dns_server_free(r->dns);
	r->dns = NULL;
	if (r->proxy != NULL)
		proxy_free(r->proxy);
	r->proxy = NULL;
	/* After the proxy and the DNS server, which borrow it. The broker
	 * itself is the supervisor's to stop and reap (run_free), once the
	 * worker that asks it is done. */
	broker_client_free(r->broker);
	r->broker = NULL;
}

/* The copies of the serving objects the fork left here: freed without a
 * line written (nothing was served in this process) and without touching
 * what the worker shares with them (the log's flags; the epoll set, which
 * the worker has replaced). After the go, so that it overlaps CMD's start;
 * before, on every path, by run_free. */
static void
serving_abandon(struct run *r)
{
	if (r->serve_base == NULL)
		return;
	run_stop_serving(r);
	dns_cache_free(r->cache);
	r->cache = NULL;
	elog_abandon(r->log);
	r->log = NULL;
	event_base_free(r->serve_base);
	r->serve_base = NULL;
}

/* The task's last lines: everything still open or counted, then
 * task-end, then what waits for a slow reader. A log that failed at any
 * point of the run makes the run fail, whatever CMD returned: the record
 * of what it did is incomplete (docs/run.md, Exit status). Returns the
 * exit status (status when the log is whole). */
static int
run_end_log(struct run *r, int status, int signal)
{
	bool failed_before = elog_failed(r->log);
	struct elog_task_end te;

	run_stop_serving(r);
	elog_flush(r->log);
	memset(&te, 0, sizeof(te));
	elog_totals(r->log, &te);
	te.exit_status = status;
	te.signal = signal;
	te.duration_ms = now_ms() - r->start_ms;
	if (elog_task_end(r->log, &te) == 0 && elog_drain(r->log, LOG_DRAIN_MS) == 0) {
		elog_notice_summary(r->notice, r->logpath);
		return status;
	}
	/* Set-up that failed on the log has said so already. */
	if (status != SBX_EXIT_FAILURE || !failed_before)
		log_warnx("egress log %s failed during the run (%s): exit %d instead of %d, "
		          "whatever CMD returned",
		          r->logpath, elog_error(r->log), SBX_EXIT_FAILURE, status);
	return SBX_EXIT_FAILURE;
}

static void
run_free(struct run *r)
{
	/* First, so that what airlock prints from here on meets the
	 * terminal as the caller had it. */
	term_free(r->term);
	fd_close(&r->tty_master);
	if (r->ev_timeout != NULL)
		event_free(r->ev_timeout);
	if (r->ev_pidfd != NULL)
		event_free(r->ev_pidfd);
	if (r->ev_end != NULL)
		event_free(r->ev_end);
	if (r->ev_sig != NULL)
		event_free(r->ev_sig);
	if (r->ev_gate != NULL)
		event_free(r->ev_gate);
	if (r->ev_watch_gate != NULL)
		event_free(r->ev_watch_gate);
	if (r->ev_worker != NULL)
		event_free(r->ev_worker);
	if (r->ev_broker != NULL)
		event_free(r->ev_broker);
	fd_close(&r->broker_pidfd);
	/* A worker that did not say DONE is not waited for. */
	if (r->worker > 0 && !r->worker_done)
		kill(r->worker, SIGKILL);
	fd_close(&r->worker_fd);
	fd_close(&r->broker_child);
	fd_close(&r->sigfd);
	serving_abandon(r);
	run_stop_serving(r);
	broker_stop(r->broker_pid);
	broker_reap(r->broker_pid);
	/* After the DNS server and the proxy, which borrow it. */
	if (r->cache != NULL)
		dns_cache_free(r->cache);
	r->cache = NULL;
	if (r->log != NULL)
		elog_detach(r->log);
	if (r->base != NULL)
		event_base_free(r->base);
	sbx_listeners_close(&r->lst);
	elog_free(r->log);
	elog_notice_free(r->notice);
	policy_free(r->policy);
	/* Reaps init, on its way out by now (or killed here, on failure):
	 * the last wait, so that it overlaps the work above. */
	sbx_free(r->sbx);
	/* The worker, last as well: it takes its namespaces apart meanwhile. */
	while (r->worker > 0 && waitpid(r->worker, NULL, 0) < 0 && errno == EINTR)
		;
	/* Nothing that could write the cache is left: the next task may. */
	sbx_cache_free(r->pkgcache);
	r->pkgcache = NULL;
	/* Its last words (the run's summary among them), to the end. */
	if (r->worker_err >= 0) {
		(void)fd_set_nonblock(r->worker_err, false);
		relay_worker_err(r);
	}
	if (r->ev_worker_err != NULL)
		event_free(r->ev_worker_err);
	fd_close(&r->worker_err);
	/* Its last writer gone, the logger has written everything and exits. */
	elog_logger_reap(r->logger_pid, LOG_DRAIN_MS);
	free(r->unix_allow);  /* after the gate, which borrowed it, in sbx_free */
	sbx_env_free(r->env); /* the sandbox's config borrowed it */
}

/* The worker's side of the run (docs/run.md, "The worker"). */
struct worker {
	struct run *w_run;
	int w_fd;     /* to the supervisor */
	int w_status; /* END's, or a failure when the supervisor went away */
	int w_signal;
	bool w_sealed; /* SEAL sent */
	struct event *w_ev_msg, *w_ev_seal;
};

static void
worker_on_msg(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct run_wmsg m;
	ssize_t n;

	for (;;) {
		n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == (ssize_t)sizeof(m) && m.type == RUN_WMSG_UNIX) {
			log_unix_event(w->w_run, &m.unix_ev);
			continue;
		}
		if (n == (ssize_t)sizeof(m) && m.type == RUN_WMSG_END) {
			w->w_status = m.status;
			w->w_signal = m.signal;
		} else {
			log_warnx("worker: the supervisor went away; ending the task");
		}
		event_del(w->w_ev_msg);
		event_base_loopbreak(w->w_run->base);
		return;
	}
}

/* A log that failed or spent its budget: the supervisor closes the gate
 * (watch_gate). Once a second, as the proxy notices. */
static void
worker_on_seal(evutil_socket_t fd, short what, void *arg)
{
	struct worker *w = arg;
	struct run_wmsg m = {.type = RUN_WMSG_SEAL};

	if (w->w_sealed || !(elog_failed(w->w_run->log) || elog_budget_spent(w->w_run->log)))
		return;
	if (send(w->w_fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)sizeof(m))
		w->w_sealed = true;
}

/* task-end is written: say so (the supervisor need not wait for the
 * exit, which takes the worker's namespaces apart), and exit. */
static _Noreturn void
worker_done(int fd, int rc)
{
	struct run_wmsg m = {.type = RUN_WMSG_DONE, .status = rc};

	(void)send(fd, &m, sizeof(m), MSG_NOSIGNAL);
	_exit(rc);
}

/* The forked worker: it gives up the sandbox's descriptors, takes the
 * loop over (event_reinit: an epoll set of its own), confines itself,
 * says READY and serves until END; then the task's last lines. Never
 * returns; _exit, so nothing of the supervisor's runs at exit. Exit 0
 * when the log is whole. */
static _Noreturn void
worker_main(struct run *r, int fd, pid_t parent)
{
	struct worker w = {.w_run = r, .w_fd = fd, .w_status = SBX_EXIT_FAILURE};
	struct run_wmsg ready = {.type = RUN_WMSG_READY};
	struct timeval second = {.tv_sec = 1};
	struct worker_confined wc;
	char err[256];
	int rc;

	log_set_ident("airlock[worker]");
	(void)prctl(PR_SET_NAME, "airlock-worker"); /* for ps, and tests */
	sbx_forget_fds(r->sbx);
	/* --cache: the supervisor's copy keeps the lock; this one would be
	 * a handle on a host directory. */
	sbx_cache_free(r->pkgcache);
	r->pkgcache = NULL;
	/* The broker's end is the broker's alone. */
	fd_close(&r->broker_child);
	/* Nor the caller's descriptors (`9</etc/passwd`): the supervisor
	 * keeps them (`--log /dev/fd/3` was opened through one); the worker,
	 * which parses what CMD sends, holds none. */
	if (fdcaller_close() < 0) {
		log_warn("worker: closing the caller's descriptors");
		_exit(1);
	}
	/* Not the caller's terminal: a compromised worker must not read its
	 * keystrokes or write to it but through the supervisor's relay. */
	if (fdcaller_drop_stdio() < 0)
		_exit(1);
	/* The logger is the supervisor's child: not this process's to reap. */
	(void)elog_disown_logger(r->log);
	/* The worker does not outlive the supervisor. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
		_exit(1);
	if (event_reinit(r->base) != 0) {
		log_warnx("worker: cannot take the event loop over");
		goto fail;
	}
	w.w_ev_msg = event_new(r->base, fd, EV_READ | EV_PERSIST, worker_on_msg, &w);
	w.w_ev_seal = event_new(r->base, -1, EV_PERSIST, worker_on_seal, &w);
	if (w.w_ev_msg == NULL || w.w_ev_seal == NULL || event_add(w.w_ev_msg, NULL) < 0 ||
	    event_add(w.w_ev_seal, &second) < 0) {
		log_warnx("worker: cannot watch the supervisor");
		goto fail;
	}
	if (worker_confine(0, &wc, err, sizeof(err)) < 0) {
		log_warnx("%s; refusing to serve", err);
		goto fail;
	}
	if (wc.landlock_abi != r->landlock_abi)
		log_warnx("worker: Landlock ABI %d applied, task-start says %d", wc.landlock_abi,
		          r->landlock_abi);
	if (send(fd, &ready, sizeof(ready), MSG_NOSIGNAL) != (ssize_t)sizeof(ready))
		goto fail;
	if (event_base_dispatch(r->base) < 0)
		log_warnx("worker: event loop failed");
	/* One more pass over what is ready: the loop stopped at END, and
	 * connections the kernel completed or queries it queued just before
	 * would otherwise be closed without their line. */
	(void)event_base_loop(r->base, EVLOOP_NONBLOCK);
	rc = run_end_log(r, w.w_status, w.w_signal) == w.w_status ? 0 : 1;
	worker_done(fd, rc);
fail:
	(void)run_end_log(r, SBX_EXIT_FAILURE, 0);
	worker_done(fd, 1);
}

/* Fork the worker once set-up is done and task-start written: from here
 * on it alone serves and writes the log. -1 when it could not be made
 * (nothing was forked: the supervisor still holds everything) or the
 * supervisor cannot go on without its copies. */
static int
spawn_worker(struct run *r)
{
	pid_t parent = getpid();
	int sv[2], ep[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		log_warn("worker: socketpair");
		return -1;
	}
	if (pipe2(ep, O_CLOEXEC) != 0) {
		log_warn("worker: pipe for its stderr");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	fflush(NULL); /* no buffered output written twice */
	r->worker = fork();
	if (r->worker < 0) {
		log_warn("worker: fork");
		close(sv[0]);
		close(sv[1]);
		close(ep[0]);
		close(ep[1]);
		return -1;
	}
	if (r->worker == 0) {
		close(sv[0]);
		close(ep[0]);
		if (dup2(ep[1], STDERR_FILENO) < 0)
			_exit(1);
		close(ep[1]);
		worker_main(r, sv[1], parent);
	}
	close(sv[1]);
	close(ep[1]);
	sbx_cpus_release(r->sbx, r->worker);
	r->worker_err = ep[0];
	(void)fd_set_nonblock(r->worker_err, true);
	r->worker_fd = sv[0];
	r->logger_pid = elog_disown_logger(r->log);
	/* Room for a burst of the gate's decisions (drain_gate never waits). */
	(void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &(int){1 << 20}, sizeof(int));
	log_debug("supervisor: worker %d forked at %.3f ms", (int)r->worker, ms_since_start());
	/* The supervisor's own events go on a loop of their own. */
	r->serve_base = r->base;
	r->base = event_base_new();
	if (r->base == NULL) {
		log_warnx("cannot create the event loop");
		return -1;
	}
	return 0;
}

/* The worker's messages while CMD runs. Its end before it was told is a
 * failure of the run, and the sandbox is ended: nothing would serve or
 * record CMD's traffic. CMD does not wait for READY (its traffic waits in
 * the listeners' queues until the worker, confined, serves it): the
 * worker's confinement overlaps CMD's start. */
static void
on_worker(evutil_socket_t fd, short what, void *arg)
{
	struct run *r = arg;
	struct run_wmsg m;
	ssize_t n;

	for (;;) {
		n = recv(fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n != (ssize_t)sizeof(m) || m.type == RUN_WMSG_DONE)
			break;
		if (m.type == RUN_WMSG_READY && !r->worker_ready) {
			r->worker_ready = true;
			log_debug("supervisor: worker confined and serving at %.3f ms",
			          ms_since_start());
		} else if (m.type == RUN_WMSG_SEAL) {
			r->log_sealed = true;
			watch_gate(r);
		}
		/* nothing else is the worker's to say */
	}
	event_del(r->ev_worker);
	r->worker_gone = true;
	if (r->worker_ready)
		log_warnx("the worker serving the proxy, DNS and NFLOG ended: ending the sandbox");
	else
		log_warnx("the worker could not confine itself (see above): ending the sandbox; "
		          "nothing CMD sent was served");
	sbx_kill(r->sbx, SIGKILL);
}

/* Once told the task is over, the worker says DONE when task-end is
 * written, within WORKER_END_MS, or it is killed. True when the log is
 * whole. It is reaped last (run_free), while it takes its namespace
 * apart. */
static bool
await_worker_done(struct run *r)
{
	uint64_t deadline = now_ms() + WORKER_END_MS;
	struct pollfd p = {.fd = r->worker_fd, .events = POLLIN};
	struct run_wmsg m;
	ssize_t n;

	for (;;) {
		uint64_t now = now_ms();
		int rc = now < deadline ? poll(&p, 1, (int)(deadline - now)) : 0;

		if (rc < 0 && errno == EINTR)
			continue;
		if (rc <= 0) {
			log_warnx("the worker did not end within %d ms: killed", WORKER_END_MS);
			kill(r->worker, SIGKILL);
			return false;
		}
		n = recv(r->worker_fd, &m, sizeof(m), MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n != (ssize_t)sizeof(m))
			return false; /* gone without DONE */
		if (m.type == RUN_WMSG_DONE) {
			r->worker_done = true;
			return m.status == 0;
		}
	}
}

/* The task's last lines, by whoever writes the log: the worker, told so
 * (END), or the supervisor when there is none. Returns the exit status. */
static int
run_finish(struct run *r, int status, int signal)
{
	struct run_wmsg m = {.type = RUN_WMSG_END, .status = status, .signal = signal};
	bool whole;

	if (r->worker <= 0)
		return run_end_log(r, status, signal);
	drain_gate(r);
	if (r->ev_worker != NULL)
		event_del(r->ev_worker);
	(void)send(r->worker_fd, &m, sizeof(m), MSG_NOSIGNAL);
	whole = !r->worker_gone && await_worker_done(r);
	/* Not whole: the worker said why (run_end_log). */
	if (r->worker_gone && status != SBX_EXIT_FAILURE)
		log_warnx("the worker ended during the run, and the egress log %s may lack the "
		          "task's last lines: exit %d instead of %d, whatever CMD returned",
		          r->logpath, SBX_EXIT_FAILURE, status);
	return whole ? status : SBX_EXIT_FAILURE;
}

/* --overlay-keep DIR: a new directory (made here, 0700) or an empty one,
 * resolved. 0, or -1 + reason. */
static int
overlay_keep_dir(struct run *r, char *err, size_t errlen)
{
	const char *dir = r->opts.overlay_keep;
	struct dirent *e;
	DIR *d;

	if (dir == NULL)
		return 0;
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "--overlay-keep %s: %s", dir, strerror(errno));
		return -1;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		snprintf(err, errlen, "--overlay-keep %s: %s", dir, strerror(errno));
		fd_close(&fd);
		return -1;
	}
	/* The layer may hold what CMD made setuid (nosuid holds only inside):
	 * nobody else may reach it, so the directory is the caller's alone. */
	if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
		snprintf(err, errlen,
		         "--overlay-keep %s: %s (mode %04o); the kept layer may hold setuid files, "
		         "so it must be yours alone: give a new path, or chmod 700 it",
		         dir, st.st_uid != geteuid() ? "not yours" : "open to others",
		         (unsigned)(st.st_mode & 07777));
		fd_close(&fd);
		return -1;
	}
	d = fdopendir(fd);
	if (d == NULL) {
		snprintf(err, errlen, "--overlay-keep %s: %s", dir, strerror(errno));
		fd_close(&fd);
		return -1;
	}
	while ((e = readdir(d)) != NULL)
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			break;
	closedir(d);
	if (e != NULL) {
		snprintf(err, errlen, "--overlay-keep %s: not empty (a kept layer is not reused)",
		         dir);
		return -1;
	}
	if (realpath(dir, r->overlay_keep) == NULL) {
		snprintf(err, errlen, "--overlay-keep %s: %s", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/* --ids and --overlay into cfg. 0, or -1 + reason. */
static int
config_ids_overlay(struct run *r, struct sbx_config *cfg, char *err, size_t errlen)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (sbx_ids_resolve(&cfg->ids, r->opts.ids, uid, gid, r->opts.root ? 0 : (uint32_t)uid,
	                    r->opts.root ? 0 : (uint32_t)gid, NULL, NULL, err, errlen) < 0)
		return -1;
	cfg->overlay = r->opts.overlay;
	if (overlay_keep_dir(r, err, errlen) < 0)
		return -1;
	cfg->overlay_keep = r->overlay_keep[0] != '\0' ? r->overlay_keep : NULL;
	return 0;
}

static void
selftest_text(const struct sbx_report *rep, int failed, char *out, size_t outlen)
{
	if (failed < 0)
		str_copy(out, "pass", outlen);
	else
		snprintf(out, outlen, "%s: %s", sbx_check_name((enum sbx_check)failed),
		         rep->check[failed].reason);
}

int
cmd_run(int argc, char **argv)
{
	struct run r;
	struct sbx_config cfg;
	struct sbx_report rep;
	struct sbx_result res;
	struct elog_task_start ts;
	char err[512], selftest[SBX_REASON_MAX + 64];
	sigset_t sigs;
	int failed, status = SBX_EXIT_FAILURE;

	memset(&r, 0, sizeof(r));
	r.sigfd = -1;
	r.tty_master = -1;
	r.worker = -1;
	r.worker_fd = -1;
	r.worker_err = -1;
	r.broker_child = -1;
	r.broker_pidfd = -1;
	/* Before anything is opened: what is open now is the caller's. */
	if (fdcaller_note() < 0) {
		log_warn("the caller's descriptors: cannot note them");
		return SBX_EXIT_FAILURE;
	}
	if (sbx_fix_stdio() < 0) {
		log_warn("stdio: cannot open /dev/null");
		return SBX_EXIT_FAILURE;
	}
	sbx_listeners_init(&r.lst);
	r.start_ms = now_ms();
	log_debug("supervisor: start at %.3f ms", ms_since_start());

	if (sbx_opts_parse(&r.opts, argc, argv, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return SBX_EXIT_FAILURE;
	}
	if (r.opts.help) {
		fputs(sbx_opts_usage, stdout);
		return 0;
	}
	if (r.opts.verbose > 0)
		log_set_level(r.opts.verbose > 1 ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO);

	/* Validate the command line, environment and log before creating
	 * anything; the policy is compiled after the clone (below). */
	if (r.opts.task_id != NULL) {
		str_copy(r.task, r.opts.task_id, sizeof(r.task)); /* checked by the parser */
	} else if (make_task_id(r.task) < 0) {
		log_warn("task id: getrandom");
		return SBX_EXIT_FAILURE;
	}
	if (r.opts.cache != NULL && (r.pkgcache = sbx_cache_open(r.opts.cache, r.opts.cache_shared,
	                                                         err, sizeof(err))) == NULL) {
		log_warnx("%s", err);
		goto out;
	}
	r.env = sbx_env_build(environ, r.opts.clearenv,
	                      &(struct sbx_env_marks){.task = r.task,
	                                              .policy = r.opts.policy,
	                                              .cache = r.pkgcache != NULL},
	                      r.opts.env, r.opts.n_env, err, sizeof(err));
	if (r.env == NULL) {
		log_warnx("%s", err);
		goto out;
	}
	if (r.opts.log == NULL) {
		if (default_log_path(&r) < 0)
			goto out;
	} else if (str_copy(r.logpath, r.opts.log, sizeof(r.logpath)) >= sizeof(r.logpath)) {
		log_warnx("--log: path too long");
		goto out;
	}

	memset(&cfg, 0, sizeof(cfg));
	cfg.argv = r.opts.cmd;
	cfg.envp = r.env;
	cfg.workdir = r.opts.workdir;
	cfg.mounts = r.opts.mounts;
	cfg.n_mounts = r.opts.n_mounts;
	cfg.root = r.opts.root;
	cfg.home = getenv("HOME");
	cfg.share_home = r.opts.share_home;
	cfg.tty = term_probe(&r.tio);
	cfg.refuse = &r.refuse; /* filled by load_policy, before it is read */
	cfg.cache = r.pkgcache;
	if (config_ids_overlay(&r, &cfg, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		sbx_cache_abandon(r.pkgcache);
		r.pkgcache = NULL;
		goto out;
	}
	r.sbx = sbx_new(&cfg, err, sizeof(err));
	if (r.sbx == NULL) {
		log_warnx("%s", err);
		/* A --cache the run just made in the workdir, say: not left. */
		sbx_cache_abandon(r.pkgcache);
		r.pkgcache = NULL;
		goto out;
	}

	if (open_log(&r) < 0)
		goto out;
	elog_set_task(r.log, r.task);
	if (r.opts.verbose > 0)
		elog_set_human(r.log, log_stream() != NULL ? log_stream() : stderr);
	/* Refusals said without -v (whose own lines already say each one):
	 * the agent reading its terminal learns what was refused and why. */
	if (!r.opts.quiet) {
		r.notice = elog_notice_new(log_stream() != NULL ? log_stream() : stderr,
		                           r.opts.verbose == 0);
		elog_set_notice(r.log, r.notice);
	}
	log_info("task %s, egress log %s", r.task, r.logpath);

	/* Signals wait in a signalfd from here on; init and CMD reset their
	 * own masks. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);

	log_debug("supervisor: cloning at %.3f ms", ms_since_start());
	if (sbx_start(r.sbx, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		goto out;
	}
	/* The policy (YAML, SHA-256, the matcher) and the upstreams are
	 * loaded while init makes its sockets on the other CPU, and init
	 * learns which files to keep out of CMD's reach (it waits for that
	 * before it drops its privileges); then the network is set up
	 * through its sockets while init builds the filesystem (docs/run.md,
	 * How a run starts). A bad policy kills the sandbox before anything
	 * ran in it: init waits for the go. */
	if (load_policy(&r) < 0 || protect_files(&r) < 0 || load_upstreams(&r) < 0) {
		drop_new_log(&r);
		goto out;
	}
	log_debug("supervisor: policy loaded, files kept at %.3f ms", ms_since_start());
	if (prepare_loop(&r) < 0)
		goto out;
	log_debug("supervisor: event loop ready at %.3f ms", ms_since_start());
	if (sbx_recv_listeners(r.sbx, &r.lst, &rep, err, sizeof(err)) < 0) {
		if (err[0] != '\0')
			log_warnx("%s", err);
		goto out;
	}
	log_debug("supervisor: network set up at %.3f ms", ms_since_start());
	failed = sbx_report_first_failure(&rep, SBX_CHECK_PRE_GO);
	if (failed < 0) {
		/* Held is not enough: the listeners must be served before CMD
		 * may start, and a failure to serve is a failed check. */
		char why[SBX_REASON_MAX];
		if (serve(&r, why, sizeof(why)) < 0) {
			sbx_check_set_failed(&rep, SBX_CHECK_LISTENERS, why);
			failed = SBX_CHECK_LISTENERS;
		}
	}
	selftest_text(&rep, failed, selftest, sizeof(selftest));

	memset(&ts, 0, sizeof(ts));
	ts.policy = policy_name(r.policy);
	ts.policy_sha256 = policy_sha256(r.policy);
	ts.mode = policy_mode(r.policy) == POLICY_MODE_AUDIT ? "audit" : "enforce";
	ts.argv = (const char *const *)r.opts.cmd;
	ts.argc = r.opts.cmd_argc;
	ts.selftest = selftest;
	ts.labels = r.opts.labels;
	ts.n_labels = r.opts.n_labels;
	/* What the worker will apply, known before it is forked. */
	ts.worker = true;
	ts.landlock = r.landlock_abi = confine_landlock_abi();
	ts.ids = r.opts.ids == SBX_IDS_RANGE ? "range" : NULL;
	ts.overlay = !r.opts.overlay ? NULL : r.overlay_keep[0] != '\0' ? r.overlay_keep : "tmpfs";
	if (elog_task_start(r.log, &ts) < 0) {
		log_warnx("egress log %s: cannot write; refusing to run", r.logpath);
		goto end;
	}
	if (policy_mode(r.policy) == POLICY_MODE_AUDIT && !r.opts.quiet)
		log_warnx("audit mode: nothing is enforced; what the policy would refuse goes "
		          "through and is logged as audit-deny");
	if (failed >= 0) {
		log_warnx("self-test failed, refusing to run the command: %s", selftest);
		goto end;
	}
	if (spawn_worker(&r) < 0)
		goto end;
	/* Init sent CMD's terminal after its READY, before anything else. */
	if (cfg.tty && (r.tty_master = sbx_recv_tty(r.sbx, err, sizeof(err))) < 0) {
		if (err[0] != '\0')
			log_warnx("%s", err);
		goto end;
	}
	if (start_gate(&r, err, sizeof(err)) < 0) {
		if (err[0] != '\0')
			log_warnx("%s; refusing to run the command", err);
		goto end;
	}

	if (setup_events(&r) < 0)
		goto end;
	if (cfg.tty && start_terminal(&r) < 0)
		goto end;
	if (sbx_go(r.sbx, true) < 0) {
		log_warn("cannot start the command");
		goto end;
	}
	log_debug("supervisor: go sent at %.3f ms", ms_since_start());
	serving_abandon(&r);
	start_broker(&r);
	if (event_base_dispatch(r.base) < 0)
		log_warnx("event loop failed");

	log_debug("supervisor: sandbox ended at %.3f ms", ms_since_start());
	/* One more pass over what is ready: the loop stopped at the end's
	 * event, and connections the kernel completed or queries it queued
	 * just before would otherwise be closed without their line. */
	(void)event_base_loop(r.base, EVLOOP_NONBLOCK);
	/* CMD's last output before task-end, and before airlock says more. */
	term_drain(r.term, TERM_DRAIN_MS);
	term_free(r.term);
	r.term = NULL;
	if (sbx_end(r.sbx, &res, NULL) < 0) {
		log_warn("the sandbox's end");
		goto end;
	}
	status = r.timed_out                        ? SBX_EXIT_TIMEOUT
	         : r.gate_broken || r.broker_failed ? SBX_EXIT_FAILURE
	                                            : res.exit_status;
	status = run_finish(&r, status, r.timed_out ? SIGKILL : res.signal);
	goto out;
end:
	/* Set-up failed after task-start: close the log with the failure. */
	(void)run_finish(&r, SBX_EXIT_FAILURE, 0);
	status = SBX_EXIT_FAILURE;
out:
	run_free(&r);
	return status;
}
