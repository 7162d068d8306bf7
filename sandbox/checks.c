/* The self-test: what the sandbox verifies about its own enforcement. The
 * pre-go checks run in init (init.c) and the supervisor (listeners); the
 * post-set-up checks below run in a child of init after the privilege drop,
 * exactly where CMD would run (`airlock selftest`). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/util.h"
#include "sandbox/internal.h"

static const char *const check_names[SBX_CHECK_COUNT] = {
        [SBX_CHECK_USERNS] = "user namespace",
        [SBX_CHECK_NET] = "network: only lo, default routes through it",
        [SBX_CHECK_RULESET] = "nftables ruleset",
        [SBX_CHECK_LISTENERS] = "listeners held by the supervisor",
        [SBX_CHECK_FS] = "filesystem: root read-only, private /tmp",
        [SBX_CHECK_PROC] = "/proc shows only the sandbox",
        [SBX_CHECK_PRIVS] = "no capabilities, no_new_privs",
        [SBX_CHECK_SECCOMP] = "seccomp filter",
        [SBX_CHECK_CAPTURE] = "traffic captured: TCP to listeners, UDP refused",
};

const char *
sbx_check_name(enum sbx_check c)
{
	if ((int)c < 0 || c >= SBX_CHECK_COUNT)
		return "?";
	return check_names[c];
}

int
sbx_report_first_failure(const struct sbx_report *r, enum sbx_check upto)
{
	for (int i = 0; i < (int)upto && i < SBX_CHECK_COUNT; i++)
		if (r->check[i].ran && !r->check[i].ok)
			return i;
	return -1;
}

void
sbx_check_set_failed(struct sbx_report *r, enum sbx_check c, const char *reason)
{
	if ((int)c < 0 || c >= SBX_CHECK_COUNT)
		return;
	sbx_check_set(r, c, false, "%s", reason);
}

void
sbx_check_set(struct sbx_report *r, enum sbx_check c, bool ok, const char *fmt, ...)
{
	va_list ap;

	r->check[c].ran = true;
	r->check[c].ok = ok;
	r->check[c].reason[0] = '\0';
	if (fmt != NULL) {
		va_start(ap, fmt);
		vsnprintf(r->check[c].reason, sizeof(r->check[c].reason), fmt, ap);
		va_end(ap);
	}
}

static void
check_fs(struct sbx_report *r)
{
	struct statvfs sv;
	char path[] = "/tmp/.airlock-selftest.XXXXXX";
	char buf[256];
	ssize_t n;
	int fd;

	if (statvfs("/", &sv) < 0 || !(sv.f_flag & ST_RDONLY)) {
		sbx_check_set(r, SBX_CHECK_FS, false, "/ is not read-only");
		return;
	}
	if (statvfs("/usr", &sv) == 0 && !(sv.f_flag & ST_RDONLY)) {
		sbx_check_set(r, SBX_CHECK_FS, false, "/usr is not read-only");
		return;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		sbx_check_set(r, SBX_CHECK_FS, false, "/tmp is not writable: %s", strerror(errno));
		return;
	}
	close(fd);
	unlink(path);
	fd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	fd_close(&fd);
	if (n <= 0 || (buf[n] = '\0', strstr(buf, "nameserver 127.0.0.1\n") == NULL)) {
		sbx_check_set(r, SBX_CHECK_FS, false,
		              "/etc/resolv.conf does not name the sandbox's resolver");
		return;
	}
	/* The home directories and /var/tmp are the sandbox's own tmpfs:
	 * the host's unix sockets in them are out of reach (selftest runs
	 * without --share-home). */
	static const char *const own[] = {"/root", "/home", "/var/tmp"};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		struct statfs sf;
		if (statfs(own[i], &sf) < 0)
			continue; /* not on this host */
		if (sf.f_type != TMPFS_MAGIC) {
			sbx_check_set(r, SBX_CHECK_FS, false, "%s is the host's, not hidden",
			              own[i]);
			return;
		}
	}
	sbx_check_set(r, SBX_CHECK_FS, true, NULL);
}

static void
check_proc(struct sbx_report *r)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	bool one = false;

	if (d == NULL) {
		sbx_check_set(r, SBX_CHECK_PROC, false, "/proc: %s", strerror(errno));
		return;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		n++;
		if (strcmp(e->d_name, "1") == 0)
			one = true;
	}
	closedir(d);
	/* init and this checker, nothing else. */
	if (!one || n != 2 || getpid() != 2)
		sbx_check_set(r, SBX_CHECK_PROC, false,
		              "expected pids 1 and 2, found %d processes (own pid %d)", n,
		              (int)getpid());
	else
		sbx_check_set(r, SBX_CHECK_PROC, true, NULL);
}

/* The value of "Key:" in /proc/self/status, or NULL. */
static const char *
status_field(const char *status, const char *key, char *out, size_t outlen)
{
	size_t klen = strlen(key);
	const char *p = status;

	while (p != NULL && *p != '\0') {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
			p += klen + 1;
			while (*p == ' ' || *p == '\t')
				p++;
			size_t i = 0;
			while (p[i] != '\0' && p[i] != '\n' && i + 1 < outlen) {
				out[i] = p[i];
				i++;
			}
			out[i] = '\0';
			return out;
		}
		p = strchr(p, '\n');
		if (p != NULL)
			p++;
	}
	return NULL;
}

static void
check_privs(struct sbx_report *r, const char *status)
{
	static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	char v[64];

	for (size_t i = 0; i < ARRAY_SIZE(caps); i++) {
		if (status_field(status, caps[i], v, sizeof(v)) == NULL ||
		    strspn(v, "0") != strlen(v)) {
			sbx_check_set(r, SBX_CHECK_PRIVS, false, "%s is %s", caps[i], v);
			return;
		}
	}
	if (status_field(status, "NoNewPrivs", v, sizeof(v)) == NULL || strcmp(v, "1") != 0) {
		sbx_check_set(r, SBX_CHECK_PRIVS, false, "no_new_privs is not set");
		return;
	}
	sbx_check_set(r, SBX_CHECK_PRIVS, true, NULL);
}

static void
check_seccomp(struct sbx_report *r, const char *status)
{
	char v[64];
	long rc;

	if (status_field(status, "Seccomp", v, sizeof(v)) == NULL || strcmp(v, "2") != 0) {
		sbx_check_set(r, SBX_CHECK_SECCOMP, false, "no seccomp filter (Seccomp: %s)", v);
		return;
	}
	errno = 0;
	if (unshare(CLONE_NEWUSER) == 0 || errno != EPERM) {
		sbx_check_set(r, SBX_CHECK_SECCOMP, false, "unshare(CLONE_NEWUSER) not refused");
		return;
	}
	errno = 0;
	rc = syscall(SYS_clone3, NULL, 0);
	if (rc >= 0 || errno != ENOSYS) {
		sbx_check_set(r, SBX_CHECK_SECCOMP, false, "clone3 not refused with ENOSYS");
		return;
	}
	errno = 0;
	rc = syscall(SYS_bpf, 0, NULL, 0);
	if (rc >= 0 || errno != EPERM) {
		sbx_check_set(r, SBX_CHECK_SECCOMP, false, "bpf not refused");
		return;
	}
	errno = 0;
	if (mount("none", "/tmp", "tmpfs", 0, NULL) == 0 || errno != EPERM) {
		sbx_check_set(r, SBX_CHECK_SECCOMP, false, "mount not refused");
		return;
	}
	/* AF_PACKET without CAP_NET_RAW would be EPERM: EAFNOSUPPORT is the
	 * family allowlist's. Nothing is created or sent. */
	errno = 0;
	rc = socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (rc >= 0 || errno != EAFNOSUPPORT) {
		if (rc >= 0)
			close((int)rc);
		sbx_check_set(r, SBX_CHECK_SECCOMP, false, "socket(AF_PACKET) not refused");
		return;
	}
	sbx_check_set(r, SBX_CHECK_SECCOMP, true, NULL);
}

/* Connect to a documentation address with a short deadline. 0 = connected
 * (captured: only lo exists, so a listener of ours took it). */
static int
try_connect(int family, const char *addr, uint16_t port, int type)
{
	struct sockaddr_storage ss;
	socklen_t len;
	struct pollfd pfd;
	int fd, e = 0;
	socklen_t elen = sizeof(e);

	len = sockaddr_set(&ss, family, addr, port);
	fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		if (errno != EINPROGRESS)
			goto fail;
		pfd.fd = fd;
		pfd.events = POLLOUT;
		if (poll(&pfd, 1, 2000) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) < 0 || e != 0) {
			errno = e != 0 ? e : ETIMEDOUT;
			goto fail;
		}
	}
	if (type == SOCK_DGRAM) {
		/* A UDP datagram to anywhere but port 53 must be refused at
		 * once by the ruleset: the send fails, or its ICMP error
		 * comes back on the next call. */
		if (send(fd, "x", 1, 0) == 1) {
			pfd.fd = fd;
			pfd.events = POLLIN;
			(void)poll(&pfd, 1, 500);
			char b;
			if (recv(fd, &b, 1, MSG_DONTWAIT) < 0 && errno != EAGAIN)
				goto fail;
			errno = 0;
			close(fd);
			return 0; /* not refused */
		}
		goto fail;
	}
	close(fd);
	return 0;
fail:
	e = errno;
	close(fd);
	errno = e;
	return -1;
}

static void
check_capture(struct sbx_report *r)
{
	if (try_connect(AF_INET, "203.0.113.7", 80, SOCK_STREAM) < 0) {
		sbx_check_set(r, SBX_CHECK_CAPTURE, false,
		              "TCP to 203.0.113.7:80 did not reach the transparent listener: %s",
		              strerror(errno));
		return;
	}
	if (try_connect(AF_INET6, "2001:db8::7", 443, SOCK_STREAM) < 0) {
		sbx_check_set(r, SBX_CHECK_CAPTURE, false,
		              "TCP to [2001:db8::7]:443 did not reach the transparent "
		              "listener: %s",
		              strerror(errno));
		return;
	}
	if (try_connect(AF_INET, "203.0.113.7", 53, SOCK_STREAM) < 0) {
		sbx_check_set(r, SBX_CHECK_CAPTURE, false,
		              "TCP to 203.0.113.7:53 did not reach the DNS listener: %s",
		              strerror(errno));
		return;
	}
	if (try_connect(AF_INET, "203.0.113.7", 9999, SOCK_DGRAM) == 0) {
		sbx_check_set(r, SBX_CHECK_CAPTURE, false,
		              "UDP to 203.0.113.7:9999 was not refused");
		return;
	}
	sbx_check_set(r, SBX_CHECK_CAPTURE, true, NULL);
}

void
sbx_checks_post(struct sbx_report *r)
{
	char status[4096];
	ssize_t n = -1;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd >= 0)
		n = read(fd, status, sizeof(status) - 1);
	fd_close(&fd);
	status[n > 0 ? n : 0] = '\0';

	check_fs(r);
	check_proc(r);
	check_privs(r, status);
	check_seccomp(r, status);
	check_capture(r);
}
