/* See probe.h. Each try is a raw attempt at what the step forbids; what
 * the kernel answers is reported, never judged here (the test judges). */
#include "worker/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/confine.h"

static void
report(const char *step, const char *call, long rc)
{
	/* errno first: fprintf may change it. */
	const char *what = rc < 0 ? strerrorname_np(errno) : "ok";

	fprintf(stderr, "airlock[worker]: confine-probe %s %s=%s\n", step, call,
	        what != NULL ? what : "?");
}

/* A fork that succeeds is reported and its child ends at once. */
static void
try_fork(const char *step, bool reap)
{
	pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);

	if (pid == 0)
		_exit(0);
	report(step, "fork", pid);
	if (pid > 0 && reap)
		(void)waitpid(pid, NULL, 0);
}

static void
try_open(const char *step, const char *call, const char *path, int flags)
{
	int fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC);

	report(step, call, fd);
	if (fd >= 0)
		close(fd);
}

/* What the process still holds: capability sets (the bounding set as the
 * caps it still has), no_new_privs, its uid. */
static void
report_creds(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	unsigned long long eff = ~0ULL, perm = ~0ULL, bset = 0;

	if (syscall(SYS_capget, &h, d) == 0) {
		eff = d[0].effective | (unsigned long long)d[1].effective << 32;
		perm = d[0].permitted | (unsigned long long)d[1].permitted << 32;
	}
	for (int cap = 0; cap < 64; cap++)
		if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
			bset |= 1ULL << cap;
	fprintf(stderr,
	        "airlock[worker]: confine-probe landlock caps-effective=%#llx caps-permitted=%#llx "
	        "bounding=%#llx no_new_privs=%d uid=%u\n",
	        eff, perm, bset, prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0), (unsigned)getuid());
}

void
worker_probe(enum worker_probe_step step)
{
	static char *const argv[] = {"/bin/true", NULL};
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(9)};
	int fd;

	switch (step) {
	case WORKER_PROBE_MOUNT:
		/* The host's files are not in this view. */
		try_open("mount", "open-etc-passwd", "/etc/passwd", O_RDONLY);
		break;
	case WORKER_PROBE_LANDLOCK:
		/* The empty root itself is there, but Landlock refuses it;
		 * RLIMIT_NPROC refuses a process. */
		try_open("landlock", "open-root", "/", O_RDONLY | O_DIRECTORY);
		try_fork("landlock", true);
		report_creds();
		break;
	case WORKER_PROBE_SECCOMP:
		try_open("seccomp", "openat", "/", O_RDONLY | O_DIRECTORY);
		fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM, 0);
		report("seccomp", "socket-unix", fd);
		if (fd >= 0)
			close(fd);
		fd = (int)syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
		report("seccomp", "socket-inet", fd);
		/* To loopback's discard port, non-blocking: where connect is
		 * allowed, nothing leaves the host. */
		if (fd >= 0)
			(void)fcntl(fd, F_SETFL, O_NONBLOCK);
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		report("seccomp", "connect",
		       syscall(SYS_connect, fd, (struct sockaddr *)&sin, sizeof(sin)));
		if (fd >= 0)
			close(fd);
		report("seccomp", "bind", syscall(SYS_bind, -1, (struct sockaddr *)&sin, sizeof(sin)));
		report("seccomp", "listen", syscall(SYS_listen, -1, 1));
		/* Any ioctl but FIONREAD, on no descriptor: EBADF if allowed. */
		report("seccomp", "ioctl-tiocgwinsz", syscall(SYS_ioctl, -1, TIOCGWINSZ, NULL));
		report("seccomp", "execve", syscall(SYS_execve, argv[0], argv, NULL));
		report("seccomp", "ptrace", syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0));
		report("seccomp", "process_vm_readv",
		       syscall(SYS_process_vm_readv, getpid(), NULL, 0, NULL, 0, 0));
		/* Limits of another process (the parent's): its own only. */
		report("seccomp", "prlimit-other",
		       syscall(SYS_prlimit64, getppid(), RLIMIT_NOFILE, NULL, NULL));
		/* A descriptor that would signal another process: no F_SETOWN,
		 * F_SETSIG or O_ASYNC. */
		report("seccomp", "fcntl-setown", syscall(SYS_fcntl, 2, F_SETOWN, getppid()));
		report("seccomp", "fcntl-async",
		       syscall(SYS_fcntl, 2, F_SETFL, O_ASYNC | O_NONBLOCK));
		try_fork("seccomp", false);
		break;
	}
}
