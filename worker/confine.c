/* See confine.h. The order is bubblewrap's: the mount view while the
 * process still may mount, then limits, capabilities, no_new_privs,
 * Landlock, and seccomp last. */
#include "worker/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "common/confine.h"
#include "common/util.h"
#include "worker/probe.h"
#include "worker/sysfilter.h"

/* Where the empty root is mounted before it is pivoted into: a directory
 * every system that runs airlock has (it reads /proc/self/exe), hidden
 * only in the worker's own mount namespace. */
#define WORKER_ROOT_MOUNT "/proc"
/* Who a worker forked from root becomes: the kernel's overflow id
 * ("nobody"). Root is exempt from RLIMIT_NPROC, and owns what root owns. */
#define WORKER_NOBODY 65534

static int
write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	size_t len = strlen(text);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, len);
	close(fd);
	return n == (ssize_t)len ? 0 : -1;
}

/* A user namespace for a caller that is not root, with its own uid and gid
 * mapped to themselves: the worker gets the capabilities to mount in its
 * new mount namespace (and drops them again below), nothing on the host. */
static int
enter_userns(char *err, size_t errlen)
{
	char map[64];
	uid_t uid = geteuid();
	gid_t gid = getegid();

	if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) {
		snprintf(err, errlen, "worker: mount view: user namespace: %s", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, (unsigned)uid);
	if (write_file("/proc/self/uid_map", map) != 0) {
		snprintf(err, errlen, "worker: mount view: uid_map: %s", strerror(errno));
		return -1;
	}
	snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, (unsigned)gid);
	if (write_file("/proc/self/setgroups", "deny") != 0 ||
	    write_file("/proc/self/gid_map", map) != 0) {
		snprintf(err, errlen, "worker: mount view: gid_map: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* A mount namespace of its own whose root is an empty read-only tmpfs:
 * no path the worker could name leads anywhere, whatever Landlock and
 * seccomp do. pivot_root(".", ".") stacks the old root on the new one,
 * and detaching it leaves the empty tmpfs alone (runc's way). */
static int
empty_root(char *err, size_t errlen)
{
	const char *step;

	if (geteuid() != 0) {
		if (enter_userns(err, errlen) < 0)
			return -1;
	} else if (unshare(CLONE_NEWNS) != 0) {
		step = "unshare";
		goto fail;
	}
	step = "private";
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
		goto fail;
	step = "tmpfs";
	if (mount("airlock-worker", WORKER_ROOT_MOUNT, "tmpfs",
	          MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k") != 0)
		goto fail;
	step = "chdir";
	if (chdir(WORKER_ROOT_MOUNT) != 0)
		goto fail;
	step = "pivot_root";
	if (syscall(SYS_pivot_root, ".", ".") != 0)
		goto fail;
	step = "detaching the old root";
	if (umount2(".", MNT_DETACH) != 0)
		goto fail;
	step = "chdir";
	if (chdir("/") != 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "worker: mount view: %s: %s", step, strerror(errno));
	return -1;
}

/* Root gives up its uid (without a user namespace: root's own may be
 * refused them by a sysctl or AppArmor), the bounding set first, while
 * it still may (CAP_SETPCAP; a container's root may lack it, and then
 * nothing can use the set: no_new_privs and no execve); the change of uid
 * clears the rest. */
static int
leave_root(char *err, size_t errlen)
{
	const gid_t g = WORKER_NOBODY;
	const uid_t u = WORKER_NOBODY;

	/* EINVAL: past the kernel's last capability; EPERM: no CAP_SETPCAP,
	 * for every one alike. Either ends the loop. */
	for (int cap = 0; cap < 64; cap++) {
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0)
			continue;
		if (errno == EINVAL || errno == EPERM)
			break;
		snprintf(err, errlen, "worker: bounding set: %s", strerror(errno));
		return -1;
	}
	if (setgroups(0, NULL) != 0 || setresgid(g, g, g) != 0 || setresuid(u, u, u) != 0) {
		snprintf(err, errlen, "worker: becoming uid %u: %s", (unsigned)u, strerror(errno));
		return -1;
	}
	return 0;
}

static int
limits(unsigned flags, char *err, size_t errlen)
{
	struct rlimit zero = {0, 0};
	struct stat st;

	/* No process of its own: a fork fails even before seccomp refuses
	 * it. */
	if (setrlimit(RLIMIT_NPROC, &zero) != 0) {
		snprintf(err, errlen, "worker: RLIMIT_NPROC: %s", strerror(errno));
		return -1;
	}
	/* No file grows: the worker writes sockets only (the log is the
	 * logger's, elog/logger.h; run's worker's stderr is a pipe). */
	if ((flags & WORKER_OWN_STDERR) != 0 && fstat(STDERR_FILENO, &st) == 0 &&
	    S_ISREG(st.st_mode))
		return 0;
	if (setrlimit(RLIMIT_FSIZE, &zero) != 0) {
		snprintf(err, errlen, "worker: RLIMIT_FSIZE: %s", strerror(errno));
		return -1;
	}
	return 0;
}

#ifdef WORKER_SECCOMP_TRAP
/* The test build's default action: a call the filter lacks is named on
 * stderr and ends the worker, so that the run fails and the test that
 * made it names the call (tests/lib.sh). Async-signal-safe: a stack
 * buffer and write(2). */
/* Append s to buf (of size max) at *n, as much as fits. */
static void
append(char *buf, size_t max, size_t *n, const char *s)
{
	while (*s != '\0' && *n < max)
		buf[(*n)++] = *s++;
}

static void
on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	char buf[160], num[12];
	unsigned nr = (unsigned)si->si_syscall;
	const char *name = nr < worker_syscall_names_len && worker_syscall_names[nr] != NULL
	                           ? worker_syscall_names[nr]
	                           : "?";
	size_t n = 0, i = sizeof(num) - 1;

	num[i] = '\0';
	do
		num[--i] = (char)('0' + nr % 10);
	while ((nr /= 10) != 0 && i > 0);
	append(buf, sizeof(buf), &n, "airlock[worker]: seccomp refused system call ");
	append(buf, sizeof(buf), &n, name);
	append(buf, sizeof(buf), &n, " (");
	append(buf, sizeof(buf), &n, num + i);
	append(buf, sizeof(buf), &n, "): not in worker/sysfilter.c\n");
	(void)!write(STDERR_FILENO, buf, n);
	_exit(128 + SIGSYS);
}

static int
trap_handler(char *err, size_t errlen)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigsys;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) != 0) {
		snprintf(err, errlen, "worker: SIGSYS handler: %s", strerror(errno));
		return -1;
	}
	return 0;
}
#else
static int
trap_handler(char *err, size_t errlen)
{
	return 0;
}
#endif

int
worker_confine(unsigned flags, struct worker_confined *out, char *err, size_t errlen)
{
	int abi;

	memset(out, 0, sizeof(*out));
#ifdef __SANITIZE_ADDRESS__
	/* LeakSanitizer's check at exit stops the world with clone and
	 * ptrace, which the filter refuses: check now, and not again. */
	__lsan_do_leak_check();
#endif
	if (empty_root(out->view_err, sizeof(out->view_err)) == 0) {
		out->view = true;
	} else if (!(flags & WORKER_VIEW_OPTIONAL)) {
		str_copy(err, out->view_err, errlen);
		return -1;
	}
	worker_probe(WORKER_PROBE_MOUNT);
	if (geteuid() == 0 && leave_root(err, errlen) < 0)
		return -1;
	if (limits(flags, err, errlen) < 0)
		return -1;
	if (confine_drop_caps() != 0) {
		snprintf(err, errlen, "worker: dropping capabilities: %s", strerror(errno));
		return -1;
	}
	if (confine_no_new_privs() != 0) {
		snprintf(err, errlen, "worker: no_new_privs: %s", strerror(errno));
		return -1;
	}
	/* TCP bind and connect handled, none granted: every upstream socket
	 * is the broker's, the proxy's and the DNS listener's alike. */
	abi = confine_landlock(CONFINE_LL_NET);
	if (abi < 0) {
		snprintf(err, errlen, "worker: Landlock: %s", strerror(errno));
		return -1;
	}
	out->landlock_abi = abi;
	worker_probe(WORKER_PROBE_LANDLOCK);
	if (trap_handler(err, errlen) < 0)
		return -1;
	if (confine_seccomp(worker_seccomp_bpf, worker_seccomp_bpf_len) != 0) {
		snprintf(err, errlen, "worker: seccomp: %s", strerror(errno));
		return -1;
	}
	worker_probe(WORKER_PROBE_SECCOMP);
	return 0;
}
