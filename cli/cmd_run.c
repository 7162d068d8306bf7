/* `airlock run`: the supervisor (DESIGN.md, Process model). Compiles the
 * policy, opens the egress log, clones the sandbox, receives its listeners,
 * serves them from one libevent loop (proxy, DNS, NFLOG) in the host's
 * network namespace, lets CMD start, and exits with CMD's status. The
 * reference is docs/run.md. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "broker/broker.h"
#include "broker/client.h"
#include "cli/cmd.h"
#include "common/fdres.h"
#include "cli/term.h"
#include "common/log.h"
#include "common/util.h"
#include "dns/cache.h"
#include "dns/resolver.h"
#include "dns/dns.h"
#include "elog/elog.h"
#include "nft/nflog.h"
#include "policy/policy.h"
#include "policy/verdict.h"
#include "proxy/proxy.h"
#include "sandbox/env.h"
#include "sandbox/opts.h"
#include "sandbox/sandbox.h"
#include "sandbox/status.h"
#include "sandbox/unixgate.h"

extern char **environ;

#define DNS_CACHE_ENTRIES 4096

_Static_assert(SBX_MAX_USER_MOUNTS <= SBX_MAX_MOUNTS, "the sandbox must take the user's mounts");
#define TASK_ID_LEN 16
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

struct run {
	struct sbx_opts opts;
	char task[TASK_ID_LEN + 1];
	char logpath[PATH_MAX];
	char logdir[PATH_MAX]; /* default log directory, hidden inside; or "" */
	char exe[PATH_MAX];    /* airlock's own executable, kept read-only; or "" */
	struct sockaddr_storage upstream[DNS_MAX_UPSTREAMS];
	size_t n_upstream;
	uint64_t start_ms;
	bool timed_out;
	bool gate_broken; /* the unix socket gate failed: the sandbox was ended */
	bool log_created; /* open_log created the file (removed if unused) */
	dev_t log_dev;
	ino_t log_ino;

	struct policy *policy;
	struct elog *log;
	char **env;
	struct sbx *sbx;
	struct sbx_listeners lst;
	struct event_base *base;
	struct resolver *resolver; /* the proxy's and the DNS server's */
	struct dns_cache *cache;
	struct proxy *proxy;
	struct dns_server *dns;
	struct nflog_reader *nflog;
	struct broker_client *broker; /* the proxy's upstream sockets (broker/broker.h) */
	pid_t broker_pid;             /* 0 when none was spawned */
	int sigfd;
	struct event *ev_sig, *ev_pidfd, *ev_end, *ev_timeout;
	/* The unix socket gate's view of the policy's unix: list (strings
	 * borrowed from the policy) and its events' watcher. */
	struct ugate_allow *unix_allow;
	size_t n_unix_allow;
	struct event *ev_gate;
	struct event *ev_watch_gate; /* seals the gate once the log fails or is spent; ends a broken
	                                gate */
	struct termios tio;          /* the caller's terminal's modes, with a terminal (cfg.tty) */
	int tty_master;              /* CMD's terminal, until term_new takes it; -1 */
	struct term *term;           /* the relay to CMD's own terminal, or NULL */
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

/* mkdir -p with mode for the directories we create. */
static int
mkdirs(const char *path, mode_t mode)
{
	char p[PATH_MAX];

	if (str_copy(p, path, sizeof(p)) >= sizeof(p)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	for (char *s = p + 1; *s != '\0'; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

/* The default log: $XDG_STATE_HOME/airlock/TASK.jsonl, else
 * ~/.local/state/airlock/TASK.jsonl. Not the working directory: the
 * sandbox can write there, and it must never touch its own log. */
static int
default_log_path(struct run *r)
{
	const char *state = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (state != NULL && state[0] == '/') {
		n = snprintf(r->logdir, sizeof(r->logdir), "%s/airlock", state);
	} else {
		if (home == NULL || home[0] != '/') {
			struct passwd *pw = getpwuid(geteuid());
			home = pw != NULL ? pw->pw_dir : NULL;
		}
		if (home == NULL || home[0] != '/') {
			log_warnx("no log file: HOME is not set; use --log FILE");
			return -1;
		}
		n = snprintf(r->logdir, sizeof(r->logdir), "%s/.local/state/airlock", home);
	}
	if (n < 0 || (size_t)n >= sizeof(r->logdir)) {
		log_warnx("log directory path too long; use --log FILE");
		return -1;
	}
	if (mkdirs(r->logdir, 0700) < 0) {
		log_warn("log directory %s", r->logdir);
		return -1;
	}
	n = snprintf(r->logpath, sizeof(r->logpath), "%s/%s.jsonl", r->logdir, r->task);
	if (n < 0 || (size_t)n >= sizeof(r->logpath)) {
		log_warnx("log path too long; use --log FILE");
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
	r->log = elog_open_fd(fd);
	if (r->log == NULL) {
		log_warnx("egress log %s: cannot use it (see above)", r->logpath);
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
	if (r->opts.audit)
		policy_set_mode(r->policy, POLICY_MODE_AUDIT);
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
	if (nsrc + ndirs + nunix + 2 > ARRAY_SIZE(keep) || ndirs == ARRAY_SIZE(dirs) ||
	    nunix > MAX_KEEP_UNIX) {
		log_warnx(
		        "too many policy files and preset directories to keep out of CMD's reach");
		return -1;
	}
	if (r->logdir[0] != '\0')
		keep[n++] = (struct sbx_keep){SBX_KEEP_HIDE, r->logdir, "log directory"};
	else
		keep[n++] = (struct sbx_keep){SBX_KEEP_HIDE, r->logpath, "egress log"};
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

/* The gate's decisions on host sockets, one "unix" line each
 * (docs/log.md), written here: the loop's thread is the log's only
 * writer. */
static void
drain_gate(struct run *r)
{
	struct ugate *g = r->sbx != NULL ? sbx_gate(r->sbx) : NULL;
	struct ugate_event ev;
	struct elog_event e;

	while (g != NULL && ugate_read_event(g, &ev) == 1) {
		memset(&e, 0, sizeof(e));
		e.kind = "unix";
		e.path = ev.path;
		e.port = -1;
		e.verdict = ugate_verdict_name((enum ugate_verdict)ev.verdict);
		if (ev.allow >= 0 && (size_t)ev.allow < r->n_unix_allow)
			e.rule = r->unix_allow[ev.allow].where;
		else {
			e.reason = verdict_reason_token(VR_UNIX_NOT_LISTED);
			e.detail = verdict_reason_text(VR_UNIX_NOT_LISTED);
		}
		e.method = ugate_op_name((enum ugate_op)ev.op);
		e.proto = sock_type_name(ev.sock_type);
		/* A datagram flood to one host socket is one line and a count. */
		(void)elog_event_agg(r->log, &e);
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
	if (elog_failed(r->log) || elog_budget_spent(r->log))
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
	struct broker_cfg bc;
	char err[256];
	int bfd;

	/* Two descriptors per tunnel: the supervisor takes every one the
	 * hard limit allows. Only the supervisor: CMD, started already,
	 * keeps the caller's limit. */
	(void)fdres_raise_limit();

	/* The broker first, while this process holds least: it resolves,
	 * guards and connects every upstream socket of the proxy, with its
	 * own resolver (the hosts file read before it confines itself) and
	 * its own watch of the host's addresses (docs/run.md, "The broker"). */
	memset(&bc, 0, sizeof(bc));
	bc.policy = r->policy;
	bc.dns.n_upstream = r->n_upstream;
	memcpy(bc.dns.upstream, r->upstream, sizeof(bc.dns.upstream));
	bc.dns.hosts_path = "/etc/hosts";
	if ((bfd = broker_spawn(&bc, &r->broker_pid, err, sizeof(err))) < 0) {
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
	/* The DNS server's resolver: the same configuration as the
	 * broker's, which resolves for the proxy (one CNAME policy, the
	 * host's /etc/hosts, which the sandbox sees as well: docs/dns.md,
	 * "The hosts file"). */
	{
		struct resolver_config rc = {.policy = r->policy,
		                             .n_upstream = r->n_upstream,
		                             .hosts_path = "/etc/hosts"};

		memcpy(rc.upstream, r->upstream, sizeof(rc.upstream));
		if ((r->resolver = resolver_new(r->base, &rc)) == NULL) {
			log_warnx("DNS: cannot create the resolver");
			return -1;
		}
	}

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
	dc.resolver = r->resolver;
	/* One bound on queued bytes and one descriptor reserve for both. */
	dc.queue = proxy_queue_budget(r->proxy);
	dc.fds = proxy_fd_reserve(r->proxy);
	resolver_set_limits(r->resolver, dc.queue, dc.fds);
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
	/* After the proxy, which borrows it; reaped in run_free. */
	broker_client_free(r->broker);
	r->broker = NULL;
	broker_stop(r->broker_pid);
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
	if (elog_task_end(r->log, &te) == 0 && elog_drain(r->log, LOG_DRAIN_MS) == 0)
		return status;
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
	fd_close(&r->sigfd);
	run_stop_serving(r);
	broker_reap(r->broker_pid);
	/* After the DNS server and the proxy, which borrow it. */
	resolver_free(r->resolver);
	if (r->cache != NULL)
		dns_cache_free(r->cache);
	if (r->log != NULL)
		elog_detach(r->log);
	if (r->base != NULL)
		event_base_free(r->base);
	sbx_listeners_close(&r->lst);
	elog_free(r->log);
	policy_free(r->policy);
	/* Reaps init, on its way out by now (or killed here, on failure):
	 * the last wait, so that it overlaps the work above. */
	sbx_free(r->sbx);
	free(r->unix_allow);  /* after the gate, which borrowed it, in sbx_free */
	sbx_env_free(r->env); /* the sandbox's config borrowed it */
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
	if (sbx_fix_stdio() < 0) {
		log_warn("stdio: cannot open /dev/null");
		return SBX_EXIT_FAILURE;
	}
	sbx_listeners_init(&r.lst);
	r.start_ms = now_ms();
	log_debug("supervisor: start, %.3f ms", ms_since_boot());

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
	if (make_task_id(r.task) < 0) {
		log_warn("task id: getrandom");
		return SBX_EXIT_FAILURE;
	}
	r.env = sbx_env_build(environ, r.opts.clearenv, r.opts.env, r.opts.n_env, err, sizeof(err));
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
	r.sbx = sbx_new(&cfg, err, sizeof(err));
	if (r.sbx == NULL) {
		log_warnx("%s", err);
		goto out;
	}

	if (open_log(&r) < 0)
		goto out;
	elog_set_task(r.log, r.task);
	if (r.opts.verbose > 0)
		elog_set_human(r.log, log_stream() != NULL ? log_stream() : stderr);
	log_info("task %s, egress log %s", r.task, r.logpath);

	/* Signals wait in a signalfd from here on; init and CMD reset their
	 * own masks. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	sigprocmask(SIG_BLOCK, &sigs, NULL);

	log_debug("supervisor: cloning, %.3f ms", ms_since_boot());
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
	log_debug("supervisor: policy loaded, files kept, %.3f ms", ms_since_boot());
	if (prepare_loop(&r) < 0)
		goto out;
	log_debug("supervisor: event loop ready, %.3f ms", ms_since_boot());
	if (sbx_recv_listeners(r.sbx, &r.lst, &rep, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		goto out;
	}
	log_debug("supervisor: network set up, %.3f ms", ms_since_boot());
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
	if (elog_task_start(r.log, &ts) < 0) {
		log_warnx("egress log %s: cannot write; refusing to run", r.logpath);
		goto end;
	}
	if (failed >= 0) {
		log_warnx("self-test failed, refusing to run the command: %s", selftest);
		goto end;
	}
	/* Init sent CMD's terminal after its READY, before anything else. */
	if (cfg.tty && (r.tty_master = sbx_recv_tty(r.sbx, err, sizeof(err))) < 0) {
		log_warnx("%s", err);
		goto end;
	}
	if (start_gate(&r, err, sizeof(err)) < 0) {
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
	log_debug("supervisor: go sent, %.3f ms", ms_since_boot());
	if (event_base_dispatch(r.base) < 0)
		log_warnx("event loop failed");

	log_debug("supervisor: sandbox ended, %.3f ms", ms_since_boot());
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
	status = r.timed_out     ? SBX_EXIT_TIMEOUT
	         : r.gate_broken ? SBX_EXIT_FAILURE
	                         : res.exit_status;
	status = run_end_log(&r, status, r.timed_out ? SIGKILL : res.signal);
	goto out;
end:
	/* Set-up failed after task-start: close the log with the failure. */
	(void)run_end_log(&r, SBX_EXIT_FAILURE, 0);
	status = SBX_EXIT_FAILURE;
out:
	run_free(&r);
	return status;
}
