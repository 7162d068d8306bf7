/* The supervisor's side of the sandbox: validation, the clone, the
 * hand-over of the listeners, and the end. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <linux/sockios.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "nft/nft.h"
#include "sandbox/cache.h"
#include "sandbox/internal.h"
#include "sandbox/status.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* Linux 5.14; older headers lack it */
#endif

/* How long init may take from clone to handing over the listeners. */
#define READY_TIMEOUT_MS 30000

/* Host directories whose unix sockets a read-only bind would leave
 * reachable (connect() needs no write access to the file system): the
 * daemons that live there (docker, lxd, nix, ssh ControlMaster) would
 * take commands from CMD -- as root when root runs airlock. */
static const char *const hidden_always[] = {
        "/var/snap", "/var/lib/lxd", "/var/lib/docker", "/nix/var/nix/daemon-socket",
        "/mnt",      "/media",
};

/* Add path (resolved) to s->hidden if it is a directory and not / or a
 * duplicate; a path that does not exist is skipped. */
static void
hide_add(struct sbx *s, const char *path, bool sticky)
{
	char real[PATH_MAX];
	struct stat st;

	if (path == NULL || path[0] != '/' || s->n_hidden >= SBX_MAX_HIDDEN)
		return;
	if (realpath(path, real) == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    strcmp(real, "/") == 0)
		return;
	for (size_t i = 0; i < s->n_hidden; i++)
		if (strcmp(s->hidden[i].path, real) == 0)
			return;
	str_copy(s->hidden[s->n_hidden].path, real, sizeof(s->hidden[0].path));
	s->hidden[s->n_hidden].sticky = sticky;
	s->n_hidden++;
}

/* Where the system lives: a home that is one of these, lies in one, or
 * holds one ("/") is not hidden, or CMD would have no programs, libraries
 * or configuration (HOME=/usr; a daemon account whose home is /usr/sbin). */
static const char *const system_dirs[] = {
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
        "/etc", "/boot", "/dev", "/proc", "/sys", "/run", "/nix",
};

/* a is b, or b lies under a. */
static bool
path_covers(const char *a, const char *b)
{
	size_t n = strlen(a);

	if (strcmp(a, "/") == 0)
		return true;
	return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* A home directory (what: "HOME", ...) hidden like /home, unless it is a
 * system directory: then it stays as the rest of /, read-only, with a
 * word on stderr. */
static void
hide_home(struct sbx *s, const char *what, const char *path)
{
	char real[PATH_MAX];

	if (path == NULL || path[0] != '/' || realpath(path, real) == NULL)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(system_dirs); i++) {
		if (path_covers(system_dirs[i], real) || path_covers(real, system_dirs[i])) {
			log_warnx("%s %s is a system directory: not hidden (read-only inside, as "
			          "the rest of /)",
			          what, real);
			return;
		}
	}
	hide_add(s, real, false);
}

/* The hidden directory that takes real (a path on the host) away from
 * CMD, or NULL: the workdir or a --ro/--rw path may bring it back. */
static const char *
hidden_over(const struct sbx *s, const char *real)
{
	if (path_covers(s->workdir, real))
		return NULL;
	for (size_t k = 0; k < s->cfg->n_mounts; k++)
		if (s->umounts[k].target != NULL && !s->umounts[k].skip &&
		    (s->cfg->mounts[k].kind == SBX_MOUNT_RO || s->cfg->mounts[k].kind == SBX_MOUNT_RW) &&
		    path_covers(s->umounts[k].target, real))
			return NULL;
	for (size_t k = 0; k < s->n_hidden; k++)
		if (path_covers(s->hidden[k].path, real))
			return s->hidden[k].path;
	return NULL;
}

/* PATH entries the hidden directories take away (pyenv, nvm or cargo
 * shims under the home): said with -v; and when CMD itself is found on
 * the host in one of them first, said always, since another version (or
 * none) would run inside without a word. */
static void
warn_hidden_path(const struct sbx *s)
{
	const char *path = NULL, *cmd = s->cfg->argv != NULL ? s->cfg->argv[0] : NULL;
	char entry[PATH_MAX], real[PATH_MAX], prog[PATH_MAX];
	bool found = cmd == NULL || strchr(cmd, '/') != NULL;

	for (size_t i = 0; s->cfg->envp != NULL && s->cfg->envp[i] != NULL; i++)
		if (strncmp(s->cfg->envp[i], "PATH=", 5) == 0)
			path = s->cfg->envp[i] + 5;
	for (const char *p = path; p != NULL && *p != '\0';) {
		size_t n = strcspn(p, ":");
		const char *cover;

		if (n > 0 && n < sizeof(entry) && p[0] == '/') {
			memcpy(entry, p, n);
			entry[n] = '\0';
			cover = realpath(entry, real) != NULL ? hidden_over(s, real) : NULL;
			bool here = !found &&
			            snprintf(prog, sizeof(prog), "%s/%s", entry, cmd) < (int)sizeof(prog) &&
			            access(prog, X_OK) == 0;
			if (cover != NULL && here)
				log_warnx("%s is %s on the host, in %s, which is hidden inside: another "
				          "%s (or none) will run; --ro %s brings it back",
				          cmd, prog, cover, cmd, entry);
			else if (cover != NULL)
				log_info("PATH entry %s is in %s, which is hidden inside; --ro %s "
				         "brings it back",
				         entry, cover, entry);
			found = found || here;
		}
		p += n + (p[n] == ':');
	}
}

static int
hidden_cmp(const void *a, const void *b)
{
	size_t la = strlen(((const struct sbx_hidden *)a)->path);
	size_t lb = strlen(((const struct sbx_hidden *)b)->path);

	return la < lb ? -1 : la > lb;
}

/* Decide which host directories the sandbox sees as empty. */
static void
plan_hidden(struct sbx *s)
{
	const struct sbx_config *cfg = s->cfg;
	struct stat st;

	if (!cfg->share_home) {
		struct passwd *pw = getpwuid(getuid());

		hide_add(s, "/home", false);
		hide_add(s, "/root", false);
		hide_home(s, "HOME", cfg->home);
		if (pw != NULL)
			hide_home(s, "the passwd home", pw->pw_dir);
	}
	for (size_t i = 0; i < ARRAY_SIZE(hidden_always); i++)
		hide_add(s, hidden_always[i], false);
	/* Usually a symlink to /run, which is the sandbox's own already. */
	if (lstat("/var/run", &st) == 0 && S_ISDIR(st.st_mode))
		hide_add(s, "/var/run", false);
	/* Like /tmp: the sandbox's own temp dir, not the host's. */
	hide_add(s, "/var/tmp", true);
	/* A parent's cover must be there before a child's mount point. */
	qsort(s->hidden, s->n_hidden, sizeof(s->hidden[0]), hidden_cmp);
}

/* Each user mount's target, resolved on the host: here, before anything
 * is created, so that a path that is not there stops the run at once and
 * sbx_protect's plan and init's mounts agree on where each one goes. A
 * tmpfs may create its mount point; hiding nothing is a no-op. */
static int
resolve_mounts(struct sbx *s, char *err, size_t errlen)
{
	static const char *const names[] = {
	        [SBX_MOUNT_RW] = "--rw",
	        [SBX_MOUNT_RO] = "--ro",
	        [SBX_MOUNT_TMPFS] = "--tmpfs",
	        [SBX_MOUNT_HIDE] = "--hide",
	};
	const struct sbx_config *cfg = s->cfg;

	if (cfg->n_mounts == 0)
		return 0;
	s->umounts = calloc(cfg->n_mounts, sizeof(*s->umounts));
	if (s->umounts == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		const struct sbx_mount *m = &cfg->mounts[i];
		struct sbx_umount *u = &s->umounts[i];

		u->target = realpath(m->path, NULL);
		if (u->target != NULL && strcmp(u->target, "/") == 0) {
			/* Over the root it would undo the view (--rw: all of it
			 * writable; --tmpfs, --hide: nothing left to run), or do
			 * nothing (--ro): never what was meant. */
			snprintf(err, errlen,
			         "%s %s: that is the root of the filesystem; name the directories "
			         "CMD needs",
			         names[m->kind], m->path);
			return -1;
		}
		if (u->target != NULL)
			continue;
		if (errno == ENOENT && m->kind == SBX_MOUNT_TMPFS && m->path[0] == '/') {
			u->target = strdup(m->path);
			if (u->target == NULL) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			continue;
		}
		if (errno == ENOENT && m->kind == SBX_MOUNT_HIDE) {
			log_debug("--hide %s: does not exist, nothing to hide", m->path);
			u->skip = true;
			continue;
		}
		snprintf(err, errlen, "%s %s: %s", names[m->kind], m->path, strerror(errno));
		return -1;
	}
	return 0;
}

static void
free_umounts(struct sbx *s)
{
	if (s->umounts == NULL)
		return;
	for (size_t i = 0; i < s->cfg->n_mounts; i++)
		free(s->umounts[i].target);
	free(s->umounts);
	s->umounts = NULL;
}

struct sbx *
sbx_new(const struct sbx_config *cfg, char *err, size_t errlen)
{
	struct sbx *s;
	struct stat st;
	const char *wd = cfg->workdir != NULL ? cfg->workdir : ".";

	if (!cfg->selftest &&
	    (cfg->argv == NULL || cfg->argv[0] == NULL || cfg->argv[0][0] == '\0')) {
		snprintf(err, errlen, "no command to run");
		return NULL;
	}
	if (cfg->envp == NULL) {
		snprintf(err, errlen, "no environment for the command");
		return NULL;
	}
	if (cfg->n_mounts > SBX_MAX_MOUNTS) {
		snprintf(err, errlen, "too many mounts (at most %d)", SBX_MAX_MOUNTS);
		return NULL;
	}
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		if (cfg->mounts[i].path == NULL || cfg->mounts[i].path[0] == '\0' ||
		    (unsigned)cfg->mounts[i].kind > SBX_MOUNT_HIDE) {
			snprintf(err, errlen, "mount %zu: empty path or unknown kind", i);
			return NULL;
		}
	}
	s = malloc(sizeof(*s));
	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	memset(s, 0, offsetof(struct sbx, hidden));
	s->cfg = cfg;
	s->pid = -1;
	s->pidfd = -1;
	s->sup_cpu = -1;
	s->sock = -1;
	s->nft_fd = -1;
	s->uid = geteuid();
	s->gid = getegid();
	if (realpath(wd, s->workdir) == NULL || stat(s->workdir, &st) < 0) {
		snprintf(err, errlen, "workdir %s: %s", wd, strerror(errno));
		goto fail;
	}
	if (!S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "workdir %s: not a directory", s->workdir);
		goto fail;
	}
	if (strcmp(s->workdir, "/") == 0) {
		snprintf(err, errlen,
		         "workdir is /: that would make the whole filesystem "
		         "writable; run from a project directory or use --workdir");
		goto fail;
	}
	/* A cache in the workdir would be the task's own files; a workdir
	 * in the cache, the same files at a second, unprotected path. */
	if (cfg->cache != NULL && sbx_cache_nests(cfg->cache, s->workdir)) {
		snprintf(err, errlen,
		         "--cache %s and the workdir %s are one inside the other; keep the cache "
		         "outside the project",
		         sbx_cache_path(cfg->cache), s->workdir);
		goto fail;
	}
	if (resolve_mounts(s, err, errlen) < 0)
		goto fail;
	plan_hidden(s);
	warn_hidden_path(s);
	for (size_t i = 0; i < s->n_hidden; i++) {
		size_t n = strlen(s->workdir);
		if (strncmp(s->hidden[i].path, s->workdir, n) == 0 &&
		    (s->hidden[i].path[n] == '\0' || s->hidden[i].path[n] == '/'))
			log_warnx("workdir %s contains %s, which is therefore visible (and "
			          "writable) inside: its unix sockets are reachable",
			          s->workdir, s->hidden[i].path);
	}
	return s;
fail:
	free_umounts(s);
	free(s);
	return NULL;
}

int
sbx_fix_stdio(void)
{
	for (int fd = 0; fd <= 2; fd++) {
		if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
			continue;
		int n = open("/dev/null", O_RDWR);
		if (n < 0)
			return -1;
		if (n != fd) {
			close(n);
			errno = EBADF;
			return -1;
		}
	}
	return 0;
}

/* Not CLONE_NEWNET: init makes the network namespace itself, as its
 * first act (sbx_init_main), so that the kernel's ~0.3 ms of making it is
 * off the supervisor's path: the clone returns sooner, and the supervisor
 * loads the policy meanwhile. check_netns refuses init's sockets if they
 * are in the host's namespace. */
#define SBX_CLONE_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC)

/* clone3 without a new stack behaves like fork: the child returns 0 here
 * and carries on with a copy of our memory. Where clone3 is filtered
 * (container runtimes answer ENOSYS), the same with clone and a pidfd
 * opened afterwards: the child cannot be reaped before we open it, we are
 * its parent and have not waited. */
static pid_t
clone_sandbox(int *pidfd)
{
	struct clone_args args;
	pid_t pid;

	memset(&args, 0, sizeof(args));
	args.flags = SBX_CLONE_FLAGS | CLONE_PIDFD;
	args.pidfd = (uint64_t)(uintptr_t)pidfd;
	args.exit_signal = SIGCHLD;
	pid = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (pid >= 0 || errno != ENOSYS)
		return pid;
	pid = (pid_t)syscall(SYS_clone, SBX_CLONE_FLAGS | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid <= 0)
		return pid;
	*pidfd = pidfd_open(pid, 0);
	if (*pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		errno = e;
		return -1;
	}
	return pid;
}

/* How many tasks are runnable right now, this one included (the fourth
 * field of /proc/loadavg, "running/total"); 0 if unknown. */
static long
runnable_now(void)
{
	char buf[128];
	ssize_t n;
	long running = 0;
	int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = '\0';
		if (sscanf(buf, "%*s %*s %*s %ld/", &running) != 1)
			running = 0;
	}
	return running;
}

/* Set-up is two processes' work: the supervisor's (policy, event loop,
 * the network through init's sockets) and init's (the filesystem), meant
 * to overlap. Left to itself the scheduler often runs both on one CPU: a
 * new child starts on its parent's CPU and may preempt it there, and each
 * message wakes the receiver onto the sender's CPU. So the supervisor
 * stays on the CPU it cloned from and init moves to the others (its first
 * act), until the go; then both take the caller's CPUs back, and CMD
 * inherits them. Best effort: with one CPU, on a busy machine, or if the
 * kernel says no, nothing is split. */
static void
split_cpus_prepare(struct sbx *s)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	long busy;
	int cpu;

	s->sup_cpu = -1;
	if (sched_getaffinity(0, sizeof(s->cpus), &s->cpus) < 0 || CPU_COUNT(&s->cpus) < 2)
		return;
	/* Only while the CPUs are free: a pinned side cannot move away from
	 * a busy CPU, and on a loaded machine the split costs more than it
	 * gains (a busy loop beside airlock on two CPUs: 8.4 ms a run pinned,
	 * 7.2 ms with this check). Needed: ours, and one more for init. */
	busy = runnable_now() - 1;
	if (busy < 0 || busy > CPU_COUNT(&s->cpus) - 2)
		return;
	/* A caller on every CPU gets no restriction back rather than today's
	 * CPUs: CMD may then use CPUs that come online or join its cpuset
	 * later, as it could have without airlock. */
	if (online > 0 && CPU_COUNT(&s->cpus) == online)
		memset(&s->cpus, 0xff, sizeof(s->cpus));
	cpu = sched_getcpu();
	if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &s->cpus))
		s->sup_cpu = cpu;
}

/* One side's CPUs during set-up: the supervisor's one, or init's rest. */
void
sbx_cpus_split(const struct sbx *s, bool init)
{
	cpu_set_t set;

	if (s->sup_cpu < 0)
		return;
	if (init) {
		set = s->cpus;
		CPU_CLR(s->sup_cpu, &set);
	} else {
		CPU_ZERO(&set);
		CPU_SET(s->sup_cpu, &set);
	}
	(void)sched_setaffinity(0, sizeof(set), &set);
}

/* Back to the caller's CPUs: the supervisor at the go and in sbx_free,
 * init before CMD. */
void
sbx_cpus_restore(const struct sbx *s)
{
	if (s->sup_cpu >= 0 && sched_setaffinity(0, sizeof(s->cpus), &s->cpus) < 0)
		log_debug("cannot give the caller's CPUs back: %s", strerror(errno));
}

void
sbx_cpus_release(const struct sbx *s, pid_t pid)
{
	/* A child pinned to the supervisor's CPU takes that CPU from the
	 * supervisor's set-up while it sets itself up, and later serves the
	 * whole run on one CPU beside it. */
	if (s->sup_cpu >= 0 && pid > 0 && sched_setaffinity(pid, sizeof(s->cpus), &s->cpus) < 0)
		log_debug("cannot give process %d the caller's CPUs: %s", (int)pid,
		          strerror(errno));
}

/* With set-up split over two CPUs, each side hands over to the other a few
 * times (init's sockets, the go, init's end), and the receiver is often
 * ready first. Sleeping then lets its CPU go idle, and an idle CPU is slow
 * to wake: ~0.1 ms in a VM, where the host must run the vCPU again. So
 * wait up to SPIN_MS for fd to become readable by polling it, yielding
 * between polls: the other side's work may need kernel threads that need
 * this CPU (a plain busy loop made the end 0.5 ms slower). Without the
 * split, on a busy machine, polling would take the CPU the other side
 * needs: no wait at all. Returns whether fd is readable; if not, the
 * caller blocks as usual. */
#define SPIN_MS 2.0
bool
sbx_spin_readable(const struct sbx *s, int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	double end;

	if (s->sup_cpu < 0)
		return false;
	end = ms_since_boot() + SPIN_MS;
	do {
		if (poll(&p, 1, 0) > 0)
			return true;
		sched_yield();
	} while (ms_since_boot() < end);
	return false;
}

/* --ids range: write init's maps (ids.c) and tell init, which waits for
 * them first thing (init.c, wait_id_maps). 0, or -1 + reason; init then
 * exits, and sbx_free reaps it. */
static int
send_id_maps(struct sbx *s, char *err, size_t errlen)
{
	struct sbx_msg m;
	int rc = sbx_ids_apply(&s->cfg->ids, s->pid, err, errlen);

	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_IDS;
	m.value = rc == 0 ? 1 : 0;
	if (sbx_msg_send(s->sock, &m, NULL, 0) < 0 && rc == 0) {
		snprintf(err, errlen, "--ids range: tell init: %s", strerror(errno));
		return -1;
	}
	return rc;
}

int
sbx_start(struct sbx *s, char *err, size_t errlen)
{
	int sv[2];
	pid_t pid;

	if (s->pid > 0) {
		snprintf(err, errlen, "sandbox already started");
		return -1;
	}
	if (sbx_fix_stdio() < 0) {
		snprintf(err, errlen, "stdio: cannot open /dev/null: %s", strerror(errno));
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(err, errlen, "socketpair: %s", strerror(errno));
		return -1;
	}
	/* Buffered output would otherwise be written twice. */
	fflush(NULL);
	split_cpus_prepare(s);
	pid = clone_sandbox(&s->pidfd);
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		s->pidfd = -1;
		sbx_diagnose_userns("", e, err, errlen);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		sbx_init_main(s, sv[1]);
	}
	close(sv[1]);
	s->sock = sv[0];
	s->pid = pid;
	if (s->cfg->ids.mode == SBX_IDS_RANGE && send_id_maps(s, err, errlen) < 0)
		return -1;
	sbx_cpus_split(s, false);
	return 0;
}

/* The sandbox's network, through the netlink sockets init made inside it
 * (nft_socket says why that works rootless): lo, addresses and routes,
 * then the ruleset, then the listeners bound if init made them (l, else
 * NULL), each checked. A step whose predecessor failed is not tried: the
 * first failure is the reason. */
static void
setup_network(int rtnl, int nfnl, const struct sbx_listeners *l,
              const struct nft_refuse *refuse, struct sbx_report *rep)
{
	struct nft_params np;
	char why[SBX_REASON_MAX];

	if (nft_net_setup_fd(rtnl, why, sizeof(why)) < 0) {
		sbx_check_set(rep, SBX_CHECK_NET, false, "set-up: %s", why);
		return;
	}
	if (nft_net_verify_fd(rtnl, why, sizeof(why)) < 0) {
		sbx_check_set(rep, SBX_CHECK_NET, false, "%s", why);
		return;
	}
	sbx_check_set(rep, SBX_CHECK_NET, true, NULL);
	nft_params_default(&np);
	np.refuse = refuse;
	if (nft_ruleset_apply_verify_fd(&np, nfnl, why, sizeof(why)) < 0) {
		sbx_check_set(rep, SBX_CHECK_RULESET, false, "%s", why);
		return;
	}
	sbx_check_set(rep, SBX_CHECK_RULESET, true, NULL);
	if (l != NULL && sbx_listeners_bind(l, np.nflog_group, why, sizeof(why)) < 0)
		sbx_check_set(rep, SBX_CHECK_LISTENERS, false, "bind: %s", why);
}

/* Which network namespace a socket is in, as a number that tells
 * namespaces apart: its cookie (SO_NETNS_COOKIE: one call, Linux 5.14),
 * else the inode of the namespace (SIOCGSKNS: three calls, and CAP_NET_ADMIN
 * over that namespace, which the supervisor has over the sandbox's). With
 * cookie false, only the inode. 0 on error. */
static uint64_t
sock_netns(int fd, bool cookie)
{
	uint64_t c;
	socklen_t len = sizeof(c);
	struct stat st;
	uint64_t ino = 0;
	int ns;

	if (cookie) {
		if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &len) < 0 || len != sizeof(c))
			return 0;
		return c;
	}
	ns = ioctl(fd, SIOCGSKNS);
	if (ns >= 0 && fstat(ns, &st) == 0)
		ino = st.st_ino;
	if (ns >= 0)
		close(ns);
	return ino;
}

/* Everything init sent must be in one network namespace, not ours (own is
 * a socket of the supervisor's): set up through a socket of the host's
 * namespace, the steps below would change that one instead, and check it
 * too. Guards the clone flags and init's order of work. Cookies where the
 * kernel has them; else inodes, ours from /proc (SIOCGSKNS on a socket of
 * the host's namespace needs a capability a rootless caller lacks). 0 or
 * -1 + reason. */
static int
check_netns(int own, const int *fds, size_t nfds, char *why, size_t whylen)
{
	uint64_t ours = sock_netns(own, true), first;
	bool cookie = ours != 0;
	struct stat st;

	if (!cookie)
		ours = stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
	first = nfds > 0 ? sock_netns(fds[0], cookie) : 0;
	if (ours == 0 || first == 0) {
		snprintf(why, whylen, "the network namespace of a socket: %s", strerror(errno));
		return -1;
	}
	if (first == ours) {
		snprintf(why, whylen, "init's sockets are in the host's network namespace");
		return -1;
	}
	for (size_t i = 1; i < nfds; i++) {
		if (sock_netns(fds[i], cookie) != first) {
			snprintf(why, whylen, "init's sockets are in different network namespaces");
			return -1;
		}
	}
	return 0;
}

/* Until init's next message is there (spinning briefly while it is near,
 * sbx_spin_readable), for at most READY_TIMEOUT_MS. 0, or -1 + reason; a
 * failed poll leaves the error to the read that follows. */
static int
wait_for_init(const struct sbx *s, char *err, size_t errlen)
{
	struct pollfd pfd = {.fd = s->sock, .events = POLLIN};
	int rc;

	if (sbx_spin_readable(s, s->sock))
		return 0;
	do
		rc = poll(&pfd, 1, READY_TIMEOUT_MS);
	while (rc < 0 && errno == EINTR);
	if (rc == 0) {
		snprintf(err, errlen, "sandbox set-up did not finish within %d s",
		         READY_TIMEOUT_MS / 1000);
		return -1;
	}
	return 0;
}

void
sbx_setup_lost(struct sbx *s, const char *what, int e_no, char *err, size_t errlen)
{
	struct pollfd pfd = {.fd = s->pidfd, .events = POLLIN};
	siginfo_t si;
	int code = -1, status = 0;

	/* A pidfd polls readable once its process has ended; init is
	 * usually a moment from it. WNOWAIT: sbx_end still reaps it. */
	memset(&si, 0, sizeof(si));
	if (s->exited) {
		code = WIFEXITED(s->init_wstatus) ? CLD_EXITED : CLD_KILLED;
		status = WIFEXITED(s->init_wstatus) ? WEXITSTATUS(s->init_wstatus)
		                                    : s->init_wstatus & 0x7f;
	} else if (s->pidfd >= 0 && poll(&pfd, 1, SBX_INIT_GONE_MS) > 0 &&
	           waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	           si.si_pid != 0) {
		code = si.si_code;
		status = si.si_status;
	}
	if (code == CLD_EXITED && status == SBX_EXIT_FAILURE) {
		err[0] = '\0';
		return;
	}
	if (code == CLD_EXITED)
		snprintf(err, errlen, "sandbox set-up: %s: init ended with status %d", what, status);
	else if (code >= 0)
		snprintf(err, errlen, "sandbox set-up: %s: init was killed by signal %d (%s)", what,
		         status, strsignal(status));
	else
		snprintf(err, errlen, "sandbox set-up: %s: %s", what,
		         e_no != 0 ? strerror(e_no) : "init closed the channel");
}

int
sbx_recv_listeners(struct sbx *s, struct sbx_listeners *out, struct sbx_report *rep, char *err,
                   size_t errlen)
{
	struct sbx_msg m;
	int fds[SBX_N_SETUP_FDS];
	size_t nfds = 0;
	int rc;

	sbx_listeners_init(out);
	memset(rep, 0, sizeof(*rep));
	if (wait_for_init(s, err, errlen) < 0)
		return -1;
	rc = sbx_msg_recv(s->sock, &m, fds, SBX_N_SETUP_FDS, &nfds, 0);
	if (rc == 0 || (rc < 0 && (errno == ECONNRESET || errno == EPIPE))) {
		sbx_setup_lost(s, "waiting for init's sockets", rc == 0 ? 0 : errno, err, errlen);
		return -1;
	}
	if (rc < 0 || m.type != SBX_MSG_READY) {
		for (size_t i = 0; i < nfds; i++)
			fd_close(&fds[i]);
		snprintf(err, errlen, "sandbox set-up: bad message from init: %s",
		         rc < 0 ? strerror(errno) : "not READY");
		return -1;
	}
	*rep = m.report;
	/* Never trust what came in the message blindly: reasons are printed. */
	for (int i = 0; i < SBX_CHECK_COUNT; i++)
		rep->check[i].reason[SBX_REASON_MAX - 1] = '\0';
	if (nfds == SBX_FD_LISTEN || nfds == SBX_N_SETUP_FDS) {
		char why[SBX_REASON_MAX];

		if (nfds == SBX_N_SETUP_FDS)
			sbx_listeners_from_array(out, fds + SBX_FD_LISTEN);
		if (check_netns(s->sock, fds, nfds, why, sizeof(why)) < 0)
			sbx_check_set(rep, SBX_CHECK_NET, false, "%s", why);
		else
			setup_network(fds[SBX_FD_RTNL], fds[SBX_FD_NFNL],
			              nfds == SBX_N_SETUP_FDS ? out : NULL, s->cfg->refuse, rep);
		fd_close(&fds[SBX_FD_RTNL]);
		/* Kept until sbx_free: its close may wait
		 * (nft_ruleset_apply_verify_fd). */
		s->nft_fd = fds[SBX_FD_NFNL];
	} else {
		for (size_t i = 0; i < nfds; i++)
			fd_close(&fds[i]);
	}
	if (!rep->check[SBX_CHECK_LISTENERS].ran) {
		char why[SBX_REASON_MAX];
		if (sbx_listeners_verify(out, why, sizeof(why)) < 0)
			sbx_check_set(rep, SBX_CHECK_LISTENERS, false, "%s", why);
		else
			sbx_check_set(rep, SBX_CHECK_LISTENERS, true, NULL);
	}
	/* Fail closed: the go needs every pre-go check to have run. One
	 * that did not, with none failed before it, has nothing to say why
	 * (garbage from init): it fails as not checked. */
	if (sbx_report_first_failure(rep, SBX_CHECK_PRE_GO) < 0) {
		for (int i = 0; i < SBX_CHECK_PRE_GO; i++) {
			if (!rep->check[i].ran) {
				sbx_check_set(rep, (enum sbx_check)i, false, "not checked");
				break;
			}
		}
	}
	return 0;
}

/* Init's GATE message: the fd numbers, in init, of its seccomp listener
 * and its unix_diag socket. Taken with pidfd_getfd while init is still
 * dumpable (it turns that off at the go, before CMD exists). */
static int
recv_gate_fds(struct sbx *s, int *listener, int *diag, char *err, size_t errlen)
{
	struct sbx_msg m;
	size_t nfds;
	int rc;

	*listener = *diag = -1;
	if (wait_for_init(s, err, errlen) < 0)
		return -1;
	rc = sbx_msg_recv(s->sock, &m, NULL, 0, &nfds, 0);
	if (rc == 0 || (rc < 0 && (errno == ECONNRESET || errno == EPIPE))) {
		sbx_setup_lost(s, "waiting for init's filter", rc == 0 ? 0 : errno, err, errlen);
		return -1;
	}
	if (rc < 0 || m.type != SBX_MSG_GATE) {
		snprintf(err, errlen, "sandbox set-up: bad message from init: %s",
		         rc < 0 ? strerror(errno) : "not GATE");
		return -1;
	}
	*listener = pidfd_getfd(s->pidfd, m.gate_fd[SBX_GATE_LISTENER], 0);
	if (*listener >= 0)
		*diag = pidfd_getfd(s->pidfd, m.gate_fd[SBX_GATE_DIAG], 0);
	if (*listener < 0 || *diag < 0) {
		snprintf(
		        err, errlen,
		        "unix socket gate: cannot take init's seccomp listener (pidfd_getfd): %s%s",
		        strerror(errno),
		        errno == EPERM ? "; ptrace access to our own child is refused here (Yama "
		                         "kernel.yama.ptrace_scope 3?)"
		                       : "");
		fd_close(listener);
		return -1;
	}
	return 0;
}

int
sbx_gate_start(struct sbx *s, const struct ugate_config *cfg, char *err, size_t errlen)
{
	struct ugate_config c = {.allow = NULL, .n_allow = 0, .events = false};
	int listener, diag;

	if (s->gate != NULL)
		return 0;
	if (recv_gate_fds(s, &listener, &diag, err, errlen) < 0)
		return -1;
	if (cfg != NULL)
		c = *cfg;
	/* Made while the supervisor is pinned for set-up: the workers take
	 * the caller's CPUs back themselves. */
	c.cpus = s->sup_cpu >= 0 ? &s->cpus : NULL;
	s->gate = ugate_new(listener, diag, &c, err, errlen);
	return s->gate != NULL ? 0 : -1;
}

struct ugate *
sbx_gate(const struct sbx *s)
{
	return s->gate;
}

int
sbx_go(struct sbx *s, bool ok)
{
	struct sbx_msg m;
	char err[256];
	bool want = ok;
	int rc;

	/* Init builds no view without sbx_protect's list: a run that forgot
	 * it would run CMD with the policy and the log in its reach. First:
	 * init sends the gate's fds only after it has the list. */
	if (ok && !s->kept) {
		if (!s->cfg->selftest) {
			errno = EPROTO;
			return -1;
		}
		if (sbx_protect(s, NULL, 0, err, sizeof(err)) < 0)
			return -1;
	}
	/* Fail closed: without the gate every connect of CMD's would wait
	 * for an answer that never comes. */
	if (ok && s->gate == NULL && sbx_gate_start(s, NULL, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		ok = false;
	}
	memset(&m, 0, sizeof(m));
	m.type = SBX_MSG_GO;
	m.value = ok ? 1 : 0;
	rc = sbx_msg_send(s->sock, &m, NULL, 0);
	sbx_cpus_restore(s); /* after: the go is what init waits for */
	/* The gate's threads while CMD is exec'd on the other CPU: off the
	 * start-up path (bench/run.md). */
	if (ok && rc == 0 && ugate_start(s->gate, err, sizeof(err)) < 0) {
		log_warnx("%s", err);
		return -1;
	}
	return want && !ok ? -1 : rc;
}

void
sbx_forget_fds(struct sbx *s)
{
	fd_close(&s->sock);
	fd_close(&s->pidfd);
	fd_close(&s->nft_fd);
}

int
sbx_pidfd(const struct sbx *s)
{
	return s->pidfd;
}

int
sbx_kill(struct sbx *s, int sig)
{
	if (s->pidfd < 0 || s->exited)
		return 0;
	return pidfd_send_signal(s->pidfd, sig, NULL, 0);
}

int
sbx_kill_pgrp(struct sbx *s, int sig)
{
	siginfo_t si;

	if (s->pidfd < 0 || s->exited)
		return 0;
	/* The mark rides in the value of an SI_QUEUE signal, as sigqueue(3)
	 * sends them (SI_USER carries none). The kernel sets si_pid to 0 for
	 * init: the sender is outside its pid namespace. */
	memset(&si, 0, sizeof(si));
	si.si_signo = sig;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_int = SBX_SIG_PGRP;
	return pidfd_send_signal(s->pidfd, sig, &si, 0);
}

static int
wait_init(struct sbx *s, int flags)
{
	siginfo_t si;

	if (s->exited)
		return 1;
	memset(&si, 0, sizeof(si));
	for (;;) {
		if (waitid(P_PIDFD, (id_t)s->pidfd, &si, WEXITED | flags) == 0)
			break;
		if (errno != EINTR)
			return -1;
	}
	if (si.si_pid == 0)
		return 0; /* WNOHANG: still running */
	s->exited = 1;
	if (si.si_code == CLD_EXITED)
		s->init_wstatus = W_EXITCODE(si.si_status, 0);
	else
		s->init_wstatus = si.si_status & 0x7f;
	return 1;
}

/* Take what init has queued, without waiting: in selftest mode the
 * post-set-up checks (into rep, if not NULL), then CMD's end. 1 on a
 * message, 0 when none is queued, -1 at EOF or on garbage. */
static int
read_last_words(struct sbx *s, struct sbx_report *rep)
{
	struct sbx_msg m;
	size_t nfds;
	int rc = sbx_msg_recv(s->sock, &m, NULL, 0, &nfds, MSG_DONTWAIT);

	if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (rc <= 0)
		return -1;
	if (m.type == SBX_MSG_EXIT) {
		s->have_exit = true;
		s->alone = m.alone != 0;
		s->cmd_wstatus = m.value;
	} else if (m.type == SBX_MSG_CHECKS && rep != NULL) {
		for (int i = SBX_CHECK_PRE_GO; i < SBX_CHECK_COUNT; i++) {
			rep->check[i] = m.report.check[i];
			rep->check[i].reason[SBX_REASON_MAX - 1] = '\0';
		}
	}
	return 1;
}

int
sbx_sock(const struct sbx *s)
{
	return s->sock;
}

int
sbx_read_end(struct sbx *s, struct sbx_report *rep)
{
	int rc = 0;

	if (s->sock < 0)
		return -1;
	while (!s->have_exit && (rc = read_last_words(s, rep)) > 0)
		;
	if (s->have_exit)
		return s->alone ? 1 : -1;
	return rc;
}

int
sbx_end(struct sbx *s, struct sbx_result *res, struct sbx_report *rep)
{
	memset(res, 0, sizeof(*res));
	if (s->pidfd < 0)
		return -1;
	if (!s->alone) {
		if (wait_init(s, 0) < 0)
			return -1;
		/* Init sent its last words before exiting; they are queued. */
		while (s->sock >= 0 && read_last_words(s, rep) > 0)
			;
	}
	if (s->have_exit) {
		res->have_cmd_status = true;
		res->cmd_wstatus = s->cmd_wstatus;
		res->exit_status = sbx_exit_status(s->cmd_wstatus, &res->signal);
	} else if (WIFEXITED(s->init_wstatus)) {
		res->exit_status = WEXITSTATUS(s->init_wstatus);
	} else {
		res->exit_status = SBX_EXIT_FAILURE; /* init killed before CMD ended */
	}
	return 0;
}

/* Init reported CMD's end with nothing else left (sbx_read_end), so it is
 * exiting: the kernel takes its memory and mount namespace apart, ~0.3 ms.
 * Wait for that without idling the CPU. */
static void
await_init_exit(const struct sbx *s)
{
	if (s->alone && !s->exited)
		(void)sbx_spin_readable(s, s->pidfd);
}

void
sbx_free(struct sbx *s)
{
	if (s == NULL)
		return;
	/* Set-up failed or was cut short: one SIGKILL to init ends the whole
	 * pid namespace. Sent before the socket closes, which init would
	 * otherwise see and report as an error of its own. */
	if (s->pidfd >= 0 && !s->exited && !s->have_exit)
		(void)pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0);
	/* Everything but the wait first: it overlaps init's exit. */
	sbx_cpus_restore(s); /* a caller that goes on is not left pinned */
	fd_close(&s->sock);
	fd_close(&s->nft_fd);
	await_init_exit(s);
	if (s->pidfd >= 0 && !s->exited) {
		(void)pidfd_send_signal(s->pidfd, SIGKILL, NULL, 0);
		(void)wait_init(s, 0);
	}
	fd_close(&s->pidfd);
	/* After init: nothing is left to raise a notification. */
	ugate_free(s->gate);
	free_umounts(s);
	free(s);
}
