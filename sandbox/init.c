/* Pid 1 of the sandbox. Runs in the child of the clone with every
 * capability of its new user namespace. It makes what must be made inside
 * the new network namespace (the listeners' sockets and two netlink
 * sockets) and hands it over; the supervisor sets up lo, the routes, the
 * ruleset and the listeners through them while init builds the filesystem
 * and drops its privileges (DESIGN.md's order, with the network work moved
 * to the other CPU). Then it starts CMD on the go, and only reaps and
 * forwards signals. When CMD exits, init kills whatever CMD left behind
 * in the pid namespace, reports, and exits. Every failure here is fatal:
 * exit 125 with the step named. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/netlink.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/netconst.h"
#include "common/util.h"
#include "nft/nft.h"
#include "sandbox/internal.h"
#include "sandbox/status.h"

extern char **environ;

static void init_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void
init_die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(LOG_LEVEL_ERROR, 0, fmt, ap);
	va_end(ap);
	_exit(SBX_EXIT_FAILURE);
}

static int
write_proc(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	size_t len = strlen(data);

	if (fd < 0)
		return -1;
	n = write(fd, data, len);
	fd_close(&fd);
	if (n < 0)
		return -1;
	if ((size_t)n != len) {
		errno = EIO;
		return -1;
	}
	return 0;
}

/* A user namespace that grants no capability inside: AppArmor's
 * restriction on unprivileged user namespaces (Ubuntu 23.10 and later). */
static const char userns_advice[] =
        "; the user namespace gives no privileges here: check sysctl "
        "kernel.apparmor_restrict_unprivileged_userns (must be 0, or give airlock an "
        "AppArmor profile with 'userns,')";

/* --ids range: the supervisor writes the maps (it may, or newuidmap may,
 * and init may not) and says when they are there. setgroups stays
 * allowed: tools that switch users drop their groups. */
static void
wait_id_maps(int sock)
{
	struct sbx_msg m;
	size_t nfds;
	int rc = sbx_msg_recv(sock, &m, NULL, 0, &nfds, 0);

	if (rc == 1 && m.type == SBX_MSG_IDS && m.value == 1)
		return;
	if (rc < 0)
		init_die("user namespace: waiting for the id maps: %s", strerror(errno));
	_exit(SBX_EXIT_FAILURE); /* the supervisor said why */
}

/* Map the caller's uid/gid to themselves (or to 0 with --root). Written by
 * init itself: a one-line map of the creator's own ids needs no privilege
 * in the parent namespace, so this works rootless and as root alike. */
static void
write_id_maps(const struct sbx *s, int sock)
{
	char line[64];
	unsigned uin = s->cfg->root ? 0 : (unsigned)s->uid;
	unsigned gin = s->cfg->root ? 0 : (unsigned)s->gid;

	if (s->cfg->ids.mode == SBX_IDS_RANGE) {
		wait_id_maps(sock);
		return;
	}
	/* Required before gid_map for an unprivileged map, and it keeps CMD
	 * from dropping supplementary groups that deny it access. */
	if (write_proc("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		init_die("user namespace: /proc/self/setgroups: %s", strerror(errno));
	snprintf(line, sizeof(line), "%u %u 1\n", uin, (unsigned)s->uid);
	if (write_proc("/proc/self/uid_map", line) < 0)
		init_die("user namespace: uid_map '%u %u 1': %s%s", uin, (unsigned)s->uid,
		         strerror(errno), errno == EPERM ? userns_advice : "");
	snprintf(line, sizeof(line), "%u %u 1\n", gin, (unsigned)s->gid);
	if (write_proc("/proc/self/gid_map", line) < 0)
		init_die("user namespace: gid_map '%u %u 1': %s%s", gin, (unsigned)s->gid,
		         strerror(errno), errno == EPERM ? userns_advice : "");
}

/* --ids range: the map is exactly the lines the supervisor wrote. */
static void
check_range(const struct sbx_idmap *want, const char *buf, struct sbx_report *r)
{
	const char *p = buf;
	unsigned in, out, count;
	int consumed;

	for (size_t i = 0; i < want->n; i++) {
		consumed = 0;
		if (sscanf(p, "%u %u %u\n%n", &in, &out, &count, &consumed) != 3 || consumed == 0 ||
		    in != want->line[i].inside || out != want->line[i].outside ||
		    count != want->line[i].count) {
			sbx_check_set(r, SBX_CHECK_USERNS, false, "unexpected uid_map: %.80s", buf);
			return;
		}
		p += consumed;
	}
	if (*p != '\0') {
		sbx_check_set(r, SBX_CHECK_USERNS, false, "unexpected uid_map: %.80s", buf);
		return;
	}
	sbx_check_set(r, SBX_CHECK_USERNS, true, NULL);
}

/* The user-namespace check: the map is exactly the one line we wrote. */
static void
check_userns(const struct sbx *s, struct sbx_report *r)
{
	char buf[256];
	unsigned in, out, count;
	int fd = open("/proc/self/uid_map", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	unsigned want = s->cfg->root ? 0 : (unsigned)s->uid;
	int consumed = 0;

	fd_close(&fd);
	if (n <= 0) {
		sbx_check_set(r, SBX_CHECK_USERNS, false, "cannot read uid_map");
		return;
	}
	buf[n] = '\0';
	if (s->cfg->ids.mode == SBX_IDS_RANGE) {
		check_range(&s->cfg->ids.uid, buf, r);
		return;
	}
	if (sscanf(buf, "%u %u %u\n%n", &in, &out, &count, &consumed) != 3 || in != want ||
	    out != (unsigned)s->uid || count != 1 || buf[consumed] != '\0') {
		sbx_check_set(r, SBX_CHECK_USERNS, false, "unexpected uid_map: %.80s", buf);
		return;
	}
	sbx_check_set(r, SBX_CHECK_USERNS, true, NULL);
}

/* What must be made inside the network namespace: two netlink sockets
 * through which the supervisor sets up lo, the routes and the ruleset
 * while init builds the filesystem (sbx_recv_listeners), and the
 * listeners with the NFLOG socket. A socket stays in the namespace it was
 * made in. Fills fds as READY carries them (SBX_FD_*) and returns how many
 * there are: 0, 2 (no listeners) or SBX_N_SETUP_FDS. Failures are
 * reported as failed checks, so `airlock selftest` can name them. */
static size_t
make_sockets(struct sbx_report *r, int fds[SBX_N_SETUP_FDS])
{
	struct sbx_listeners l;
	char err[SBX_REASON_MAX];

	fds[SBX_FD_RTNL] = nft_socket(NETLINK_ROUTE);
	if (fds[SBX_FD_RTNL] < 0) {
		sbx_check_set(r, SBX_CHECK_NET, false, "opening the rtnetlink socket: %s",
		              strerror(errno));
		return 0;
	}
	fds[SBX_FD_NFNL] = nft_socket(NETLINK_NETFILTER);
	if (fds[SBX_FD_NFNL] < 0) {
		sbx_check_set(r, SBX_CHECK_RULESET, false,
		              "opening the netfilter netlink socket: %s", strerror(errno));
		fd_close(&fds[SBX_FD_RTNL]);
		return 0;
	}
	if (sbx_listeners_create(&l, err, sizeof(err)) < 0) {
		sbx_check_set(r, SBX_CHECK_LISTENERS, false, "create: %s", err);
		return SBX_FD_LISTEN;
	}
	sbx_listeners_to_array(&l, fds + SBX_FD_LISTEN);
	return SBX_N_SETUP_FDS;
}

/* Close everything but stdio and keep. */
static void
close_fds_except(int keep)
{
	if (keep > 3)
		close_range(3, (unsigned)keep - 1, 0);
	close_range((unsigned)keep + 1, ~0U, 0);
}

/* CMD's side of a vfork-style clone (start_cmd). Until the exec it shares
 * init's memory, so it only resets its own signal state and fds, and
 * leaves its errors for init to report. Already unprivileged and
 * filtered. */
struct cmd_start {
	const struct sbx *s;
	const char *step; /* what failed before the exec; NULL: the exec */
	int err;
};

static int
cmd_child(void *arg)
{
	struct cmd_start *c = arg;
	sigset_t none;

	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL); /* SIGPIPE was ignored by the supervisor */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	close_range(3, ~0U, 0);
	/* A session of its own: CMD's kill(0, ...), setpgid and job control
	 * reach no process group but its own, and it has no controlling
	 * terminal but the one given here (docs/run.md, Terminal and
	 * signals). */
	if (setsid() < 0) {
		c->step = "new session";
		goto fail;
	}
	if (c->s->cfg->tty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0) {
		c->step = "controlling terminal";
		goto fail;
	}
	/* execvp searches the PATH of environ, which start_cmd made CMD's. */
	execvp(c->s->cfg->argv[0], c->s->cfg->argv);
fail:
	c->err = errno;
	_exit(127);
}

/* Start CMD. CLONE_VM | CLONE_VFORK, as posix_spawn does, copies none of
 * init's page tables (a fork did, on every run) and returns once CMD has
 * exec'd or failed to. The child gets a stack of its own, sized as
 * posix_spawn sizes it: execvp may copy argv onto it (a script without
 * "#!" goes to /bin/sh), and with the memory shared an overflow would
 * land in init; a guard page below turns one into a crash of the child.
 * Returns CMD's pid; or -1 with errno and *exec_err 0 when the child
 * could not be made or set up (*step says what failed, else NULL), or
 * with *exec_err the exec's errno. */
static pid_t
start_cmd(const struct sbx *s, int *exec_err, const char **step)
{
	struct cmd_start c = {.s = s, .step = NULL, .err = 0};
	size_t argc = 0, page = (size_t)sysconf(_SC_PAGESIZE), size;
	char *stack;
	pid_t pid;
	int e;

	*exec_err = 0;
	*step = NULL;
	while (s->cfg->argv[argc] != NULL)
		argc++;
	size = (64 * 1024 + (argc + 3) * sizeof(char *) + page - 1) / page * page + page;
	stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK,
	             -1, 0);
	if (stack == MAP_FAILED)
		return -1;
	if (mprotect(stack, page, PROT_NONE) < 0) {
		e = errno;
		munmap(stack, size);
		errno = e;
		return -1;
	}
	environ = (char **)s->cfg->envp;
	pid = clone(cmd_child, stack + size, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
	e = errno;
	munmap(stack, size);
	if (pid < 0) {
		errno = e;
		return -1;
	}
	if (c.err == 0)
		return pid;
	(void)waitpid(pid, NULL, 0);
	*step = c.step;
	if (c.step == NULL)
		*exec_err = c.err;
	errno = c.err;
	return -1;
}

/* Kill and reap every process left in the sandbox but init, for at most
 * about a second. kill(-1) from pid 1 reaches each of them, nested pid
 * namespaces included, and a fork racing it fails: the kernel checks the
 * parent for a pending SIGKILL before the child appears. Zombies still
 * count for kill, so they are reaped first; once kill finds nobody (ESRCH),
 * init is alone. Returns whether it is. It can fail only for a process
 * that ignores SIGKILL for that long (stuck in the kernel) or that a
 * security module protects from us; the kernel then kills it when init
 * exits, and waits for it. */
static bool
kill_the_rest(void)
{
	const struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (int i = 0; i < 100; i++) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (kill(-1, SIGKILL) < 0 && errno == ESRCH)
			return true;
		(void)sigtimedwait(&chld, NULL, &tick);
	}
	return false;
}

/* CMD's end (wait status st) to the supervisor, and init's own exit. With
 * everything else already dead (alone), the supervisor need not wait for
 * the kernel to take init's namespaces apart before it ends the task: it
 * may stop serving at this message. */
static void __attribute__((noreturn)) report_exit(int sock, int st)
{
	struct sbx_msg m;

	log_debug("init: CMD ended at %.3f ms", ms_since_start());
	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_EXIT;
	m.value = st;
	m.alone = kill_the_rest() ? 1 : 0;
	(void)sbx_msg_send(sock, &m, NULL, 0);
	_exit(sbx_exit_status(st, NULL));
}

/* Selftest: the post-set-up checks from where CMD would run. */
static void
run_checks(int sock)
{
	struct sbx_msg m;

	/* Init's fork, so not dumpable, and never exec'd: the gate could not
	 * take its sockets (pidfd_getfd) to make its connects. No CMD runs
	 * in a selftest that could ptrace it. */
	(void)prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_CHECKS;
	sbx_checks_post(&m.report);
	_exit(sbx_msg_send(sock, &m, NULL, 0) < 0 ? SBX_EXIT_FAILURE : 0);
}

/* Wait for the go, without idling the CPU while it is near. */
static int
recv_go(const struct sbx *s, int sock, struct sbx_msg *m)
{
	size_t nfds;

	(void)sbx_spin_readable(s, sock);
	return sbx_msg_recv(sock, m, NULL, 0, &nfds, 0);
}

void
sbx_init_main(const struct sbx *s, int sock)
{
	struct sbx_filter filter;
	struct sbx_msg m;
	int fds[SBX_N_SETUP_FDS];
	size_t nfds = 0;
	sigset_t sigs;
	char err[512];
	const char *step;
	pid_t cmd;
	int exec_err, gate[2] = {-1, -1}, slave = -1;

	sbx_cpus_split(s, true);
	/* The sandbox's network namespace, owned by its user namespace as if
	 * the clone had made it (sandbox.c, SBX_CLONE_FLAGS says why here). */
	if (unshare(CLONE_NEWNET) < 0)
		init_die("set-up: network namespace: %s%s", strerror(errno),
		         errno == ENOSPC ? " (the limit is reached: raise sysctl "
		                           "user.max_net_namespaces)"
		                         : "");
	/* airlock dying (even by SIGKILL) kills init, and with it the whole
	 * pid namespace. If the supervisor is already gone, the first read on
	 * sock below sees EOF. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		init_die("set-up: parent-death signal: %s", strerror(errno));
	/* Out of the caller's process group: signals to it (a terminal's,
	 * a shell's to its job, timeout(1)'s to its group) reach the
	 * supervisor alone, which passes them on once. A process group, not
	 * a session: setsid would also give init a scheduler autogroup of
	 * its own, and runs took 3-5 ms longer with one (a loaded machine,
	 * -vv's go to CMD's end); init has no use for a session. */
	if (setpgid(0, 0) < 0)
		init_die("set-up: process group: %s", strerror(errno));
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGCHLD);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	sigaddset(&sigs, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0)
		init_die("set-up: block signals: %s", strerror(errno));
	close_fds_except(sock);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		init_die("set-up: no_new_privs: %s", strerror(errno));

	log_debug("init: started at %.3f ms", ms_since_start());
	write_id_maps(s, sock);
	if (sethostname(AIRLOCK_HOSTNAME, strlen(AIRLOCK_HOSTNAME)) < 0) {
		int e = errno;
		/* Container runtimes' default profiles give sethostname only
		 * to a container with CAP_SYS_ADMIN (docs/run.md, Diagnosis). */
		if (e == EPERM && sbx_seccomp_mode("") > 0)
			init_die("set-up: hostname: %s; a seccomp filter refuses sethostname "
			         "(a container runtime's default profile): give the container "
			         "airlock's profile (contrib/seccomp/airlock.json; Docker, "
			         "Podman: --security-opt seccomp=airlock.json; Kubernetes: "
			         "securityContext.seccompProfile type Localhost)",
			         strerror(e));
		init_die("set-up: hostname: %s", strerror(e));
	}

	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_READY;
	check_userns(s, &m.report);
	nfds = make_sockets(&m.report, fds);
	if (sbx_msg_send(sock, &m, fds, nfds) < 0)
		init_die("set-up: hand the sockets to the supervisor: %s", strerror(errno));
	/* The supervisor holds them now; CMD must never see them. */
	for (size_t i = 0; i < nfds; i++)
		fd_close(&fds[i]);
	log_debug("init: sockets handed over at %.3f ms", ms_since_start());

	/* The filesystem while the supervisor sets up the network through
	 * those sockets, loads the policy and starts serving: CMD still waits
	 * for its go. The two sides take about as long (docs/run.md). The
	 * view ends with what the supervisor sends once it has read the
	 * policy (sbx_protect). */
	if (sbx_fs_setup(s, sock, err, sizeof(err)) < 0)
		init_die("%s", err);
	log_debug("init: filesystem ready at %.3f ms", ms_since_start());
	/* CMD's terminal, in the devpts just mounted; its master goes over
	 * sock as SCM_RIGHTS, so before the seccomp filter, whatever that
	 * does to sendmsg. */
	if (s->cfg->tty && sbx_pty_open(sock, &slave, err, sizeof(err)) < 0)
		init_die("set-up: %s", err);

	/* Unprivileged and filtered while the supervisor is still starting
	 * to serve: nothing init does from here on needs a capability or a
	 * refused system call, and both cover everything it starts. The
	 * filter's notifications go to the supervisor's unix socket gate,
	 * which takes the listener and a unix_diag socket of this network
	 * namespace from us with pidfd_getfd (a message with fds would be a
	 * sendmsg, which the filter notifies). Init itself sends only plain
	 * send()s from here on, which the filter lets pass. */
	if (sbx_caps_drop(s->cfg->ids.mode == SBX_IDS_RANGE && s->cfg->root, err, sizeof(err)) < 0)
		init_die("%s", err);
	gate[SBX_GATE_DIAG] = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (gate[SBX_GATE_DIAG] < 0)
		init_die("set-up: unix_diag socket: %s", strerror(errno));
	/* Connected to the kernel: no other socket may send it an answer
	 * (unixgate.c's own_socket trusts what it reads). */
	if (connect(gate[SBX_GATE_DIAG],
	            (struct sockaddr *)&(struct sockaddr_nl){.nl_family = AF_NETLINK},
	            sizeof(struct sockaddr_nl)) < 0)
		init_die("set-up: unix_diag socket: connect: %s", strerror(errno));
	if (sbx_seccomp_build(&filter, err, sizeof(err)) < 0 ||
	    (gate[SBX_GATE_LISTENER] = sbx_seccomp_install(&filter, err, sizeof(err))) < 0)
		init_die("%s", err);
	sbx_seccomp_free(&filter);
	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_GATE;
	m.gate_fd[SBX_GATE_LISTENER] = gate[SBX_GATE_LISTENER];
	m.gate_fd[SBX_GATE_DIAG] = gate[SBX_GATE_DIAG];
	if (sbx_msg_send(sock, &m, NULL, 0) < 0)
		init_die("set-up: tell the supervisor about the gate: %s", strerror(errno));
	log_debug("init: privileges dropped at %.3f ms", ms_since_start());

	switch (recv_go(s, sock, &m)) {
	case 1:
		if (m.type == SBX_MSG_GO && m.value == 1)
			break;
		_exit(SBX_EXIT_FAILURE); /* the supervisor said why */
	case 0:
		_exit(SBX_EXIT_FAILURE); /* the supervisor is gone */
	default:
		init_die("set-up: waiting for the supervisor: %s", strerror(errno));
	}
	log_debug("init: go at %.3f ms", ms_since_start());
	/* The supervisor has taken the gate's fds. CMD runs as our uid:
	 * without dumpable off it could ptrace init, which holds the socket
	 * to the supervisor. */
	fd_close(&gate[SBX_GATE_LISTENER]);
	fd_close(&gate[SBX_GATE_DIAG]);
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		init_die("set-up: dumpable: %s", strerror(errno));
	sbx_cpus_restore(s);
	fflush(NULL);
	if (s->cfg->selftest) {
		cmd = fork();
		if (cmd < 0)
			init_die("fork: %s", strerror(errno));
		if (cmd == 0)
			run_checks(sock);
	} else {
		/* CMD's terminal on the std fds that were the caller's
		 * terminal, init's too: from here on init's own messages
		 * reach the caller through it, in order with CMD's output. */
		if (slave >= 0 && sbx_pty_attach(slave) < 0)
			init_die("start CMD: terminal: %s", strerror(errno));
		cmd = start_cmd(s, &exec_err, &step);
		if (cmd < 0 && exec_err == 0)
			init_die("start CMD: %s%s%s", step != NULL ? step : "",
			         step != NULL ? ": " : "", strerror(errno));
		if (cmd < 0) {
			log_warnx("cannot run '%s': %s", s->cfg->argv[0], strerror(exec_err));
			report_exit(sock, W_EXITCODE(sbx_exec_errno_status(exec_err), 0));
		}
	}

	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&sigs, &si);
		int st;
		pid_t pid;

		if (sig < 0) {
			if (errno == EINTR)
				continue;
			init_die("wait for signals: %s", strerror(errno));
		}
		if (sig != SIGCHLD) {
			/* What the supervisor passes on (from outside the pid
			 * namespace: si_pid 0), to CMD or to its process group
			 * (sbx_kill_pgrp). Init is in no terminal's process
			 * group; CMD's own signals to init go nowhere. */
			bool pgrp = si.si_code == SI_QUEUE && si.si_int == SBX_SIG_PGRP;

			if (si.si_pid == 0)
				kill(pgrp ? -cmd : cmd, sig);
			continue;
		}
		while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
			if (pid != cmd || !(WIFEXITED(st) || WIFSIGNALED(st)))
				continue; /* an orphan CMD left behind */
			report_exit(sock, st);
		}
	}
}
