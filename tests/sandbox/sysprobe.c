/* Run inside the sandbox by tests/sandbox/seccomp.sh: try each syscall the
 * filter should refuse (and a few it must allow) with harmless arguments
 * and print "NAME RESULT" per line, RESULT being "ok" or the errno name.
 * Harmless: every call either fails early or is undone at once. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

static void
report(const char *name, long rc)
{
	const char *e;

	if (rc >= 0) {
		printf("%s ok\n", name);
		return;
	}
	switch (errno) {
	case EPERM:
		e = "EPERM";
		break;
	case ENOSYS:
		e = "ENOSYS";
		break;
	case EINVAL:
		e = "EINVAL";
		break;
	case EFAULT:
		e = "EFAULT";
		break;
	case EBADF:
		e = "EBADF";
		break;
	case ENOENT:
		e = "ENOENT";
		break;
	case EACCES:
		e = "EACCES";
		break;
	case ENOTTY:
		e = "ENOTTY";
		break;
	case EIO:
		e = "EIO";
		break;
	case ESRCH:
		e = "ESRCH";
		break;
	case EAFNOSUPPORT:
		e = "EAFNOSUPPORT";
		break;
	case EBUSY:
		e = "EBUSY";
		break;
	default:
		e = strerror(errno);
		break;
	}
	printf("%s %s\n", name, e);
}

#define TRY(name, call)                                                                            \
	do {                                                                                       \
		errno = 0;                                                                         \
		long rc_ = (long)(call);                                                           \
		report(name, rc_);                                                                 \
	} while (0)

/* clone with flags in a child-less way: a fresh process that exits at
 * once, reaped here. */
static long
try_clone(unsigned long flags)
{
	long pid = syscall(SYS_clone, flags | SIGCHLD, 0, NULL, NULL, 0);

	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

static long
try_clone3(void)
{
	struct clone_args ca;
	long pid;

	memset(&ca, 0, sizeof(ca));
	ca.exit_signal = SIGCHLD;
	pid = syscall(SYS_clone3, &ca, sizeof(ca));
	if (pid == 0)
		_exit(0);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return pid;
}

/* socket() through syscall(), so the family register can carry high bits
 * (the kernel looks at the low 32). */
static long
probe_socket_raw(long family, int type)
{
	long fd = syscall(SYS_socket, family, type | SOCK_CLOEXEC, 0);

	if (fd >= 0)
		close((int)fd);
	return fd;
}

static long
probe_socket(int family, int type)
{
	return probe_socket_raw(family, type);
}

static long
probe_socketpair(int family)
{
	int sv[2];
	long rc = socketpair(family, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);

	if (rc == 0) {
		close(sv[0]);
		close(sv[1]);
	}
	return rc;
}

int
main(void)
{
	char c = 'x';
	int tty;

	TRY("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
	TRY("kexec_file_load", syscall(SYS_kexec_file_load, -1, -1, 0, NULL, 0));
	TRY("init_module", syscall(SYS_init_module, NULL, 0, ""));
	TRY("finit_module", syscall(SYS_finit_module, -1, "", 0));
	TRY("delete_module", syscall(SYS_delete_module, "airlock_none", 0));
	TRY("bpf", syscall(SYS_bpf, 0, NULL, 0));
	TRY("perf_event_open", syscall(SYS_perf_event_open, NULL, 0, -1, -1, 0));
	TRY("keyctl", syscall(SYS_keyctl, 0, 0, 0, 0, 0));
	TRY("add_key", syscall(SYS_add_key, "user", "d", "x", 1, 0));
	TRY("request_key", syscall(SYS_request_key, "user", "d", NULL, 0));
	TRY("userfaultfd", syscall(SYS_userfaultfd, 0));
	TRY("mount", mount("none", "/tmp", "tmpfs", 0, NULL));
	TRY("umount2", umount2("/tmp", MNT_DETACH));
	TRY("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
	TRY("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/tmp", 0));
	TRY("move_mount", syscall(SYS_move_mount, -1, "", -1, "", 0));
	TRY("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
	TRY("fsmount", syscall(SYS_fsmount, -1, 0, 0));
	TRY("fsconfig", syscall(SYS_fsconfig, -1, 0, NULL, NULL, 0));
	TRY("fspick", syscall(SYS_fspick, AT_FDCWD, "/tmp", 0));
	TRY("mount_setattr", syscall(SYS_mount_setattr, -1, "", 0, NULL, 0));
	TRY("setns", syscall(SYS_setns, -1, 0));
	TRY("unshare_user", unshare(CLONE_NEWUSER));
	TRY("unshare_net", unshare(CLONE_NEWNET));
	TRY("unshare_files", unshare(CLONE_FILES)); /* must stay allowed */
	TRY("clone_newuser", try_clone(CLONE_NEWUSER));
	TRY("clone_newnet", try_clone(CLONE_NEWNET));
	TRY("clone_plain", try_clone(0)); /* fork: must stay allowed */
	TRY("clone3", try_clone3());
	TRY("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
	/* allowed: fails only because there is no such process */
	TRY("ptrace_attach", ptrace(PTRACE_ATTACH, 999999, NULL, NULL));
	/* Socket families: created and closed at once, never connected.
	 * AF_VSOCK reaches the hypervisor on a VM guest; AF_PACKET and
	 * AF_BLUETOOTH are refused too; the last ones must work. */
	TRY("socket_vsock", probe_socket(AF_VSOCK, SOCK_STREAM));
	TRY("socket_vsock_hibits", probe_socket_raw(0x100000000L | AF_VSOCK, SOCK_STREAM));
	TRY("socket_packet", probe_socket(AF_PACKET, SOCK_DGRAM));
	TRY("socket_bluetooth", probe_socket(AF_BLUETOOTH, SOCK_STREAM));
	TRY("socket_alg", probe_socket(AF_ALG, SOCK_SEQPACKET));
	TRY("socket_unspec", probe_socket(AF_UNSPEC, SOCK_STREAM));
	TRY("socketpair_vsock", probe_socketpair(AF_VSOCK));
	TRY("socket_inet", probe_socket(AF_INET, SOCK_STREAM));
	TRY("socket_inet6", probe_socket(AF_INET6, SOCK_DGRAM));
	TRY("socket_unix", probe_socket(AF_UNIX, SOCK_STREAM));
	TRY("socket_netlink", probe_socket(AF_NETLINK, SOCK_RAW));
	TRY("socketpair_unix", probe_socketpair(AF_UNIX));
	tty = open("/dev/tty", O_RDWR | O_CLOEXEC);
	TRY("ioctl_tiocsti", ioctl(tty >= 0 ? tty : 0, TIOCSTI, &c));
	/* A filter of CMD's own with a listener would take the notifications
	 * the unix socket gate must get (the newest filter's listener wins)
	 * and could answer "continue": the kernel refuses a second listener
	 * in a chain (EBUSY). Last: where it is not refused, it installs an
	 * allow-all filter on this probe. */
	{
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = {.len = 1, .filter = &allow};

		TRY("seccomp_new_listener", syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		                                    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog));
	}
	if (tty >= 0)
		close(tty);
	return 0;
}
