/* The unix socket gate (unixgate.h; docs/run.md, Unix sockets).
 *
 * For each notification a worker: opens a pidfd of the calling thread and
 * checks the notification is still live (so the pid is that thread);
 * copies the arguments it needs out of CMD's memory once
 * (process_vm_readv), checks again (so the copy came from that thread);
 * takes CMD's socket (pidfd_getfd: the same open file, whatever CMD does
 * to its fd table afterwards); decides on the copy; performs the call on
 * that file with the copy; and answers with the call's result. The only
 * destination it changes is an AF_UNIX pathname: the path is resolved in
 * CMD's root (and cwd) with RESOLVE_IN_ROOT to an O_PATH fd, whose inode
 * decides, and the call then goes to "/proc/thread-self/fd/N" of that fd,
 * which names that inode and nothing else (the kernel follows the magic
 * link, it does not look the path up again). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/audit.h>
#include <linux/udp.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sandbox/unixgate.h"

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL /* Linux 6.9 */
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

/* Workers: CMD's blocking calls (a connect to a full backlog, a send to a
 * full queue) block a worker, not the event loop; with all of them busy
 * CMD waits for its own calls, nothing else does. */
#define UGATE_WORKERS 4
/* Bytes of one send copied and sent for CMD. A datagram must go whole:
 * larger is EMSGSIZE (a unix datagram socket takes at most about 425 KiB
 * with the kernel's default limits, UDP 64 KiB). A stream send is cut
 * there and returns the bytes sent, as a send interrupted by a signal
 * does. */
#define UGATE_DATA_MAX (512 * 1024)
/* Ancillary data of one message (the kernel's own bound, optmem_max, is
 * 20-128 KiB): larger is ENOBUFS, as from the kernel. */
#define UGATE_CTL_MAX (64 * 1024)
/* Descriptors passed with SCM_RIGHTS in one message: the kernel's own
 * limit (SCM_MAX_FD over all of a message's control messages, EINVAL
 * past it). Each is an fd of the supervisor's until the send is done. */
#define UGATE_FDS_MAX 253
#define UGATE_IOV_MAX 1024 /* UIO_MAXIOV */
/* Placeholders per worker: as many as one call opens, SCM_RIGHTS aside
 * (pidfd, CMD's socket, its root, the O_PATH target, /proc/TID/mem). */
#define UGATE_SPARE_FDS 6
/* A unix_diag dump answers at once; waiting longer means something is
 * wrong, and the socket is then not taken for CMD's own. */
#define DIAG_TIMEOUT_S 2

struct worker {
	struct ugate *w_gate;
	pthread_t w_tid;
	bool w_started;
	struct seccomp_notif *w_req;       /* owned, sizes.seccomp_notif bytes */
	struct seccomp_notif_resp *w_resp; /* owned */
	unsigned char *w_data;             /* owned, UGATE_DATA_MAX */
	unsigned char *w_ctl;              /* owned, UGATE_CTL_MAX */
	struct iovec *w_iov;               /* owned, UGATE_IOV_MAX */
	int w_fds[UGATE_FDS_MAX];          /* taken for one message's SCM_RIGHTS */
	size_t w_nfds;
	/* Placeholders (/dev/null) given up when a call finds the fd table
	 * full: the gate shares it with the proxy, which may be holding every
	 * descriptor but its reserve (common/fdres.h). -1 when not held. */
	int w_spare[UGATE_SPARE_FDS];
};

struct ugate {
	int g_listener; /* the seccomp notification fd; -1 */
	int g_diag;     /* NETLINK_SOCK_DIAG in the sandbox's netns; -1 */
	pthread_mutex_t g_diag_lock;
	uint32_t g_diag_seq; /* under g_diag_lock */
	int g_ev_r, g_ev_w;  /* event pipe; -1 */
	struct ugate_config g_cfg;
	/* Each allow entry's path with its directory resolved on the host at
	 * the start (realpath), matched later without following any symlink;
	 * NULL where the directory did not resolve (never matches). Owned. */
	char **g_real;
	struct seccomp_notif_sizes g_sizes;
	cpu_set_t g_cpus; /* the workers' CPUs, when g_has_cpus */
	bool g_has_cpus;
	atomic_bool g_stop;
	atomic_bool g_said_fds; /* "out of file descriptors" said once */
	atomic_bool g_sealed;   /* ugate_seal: the allow entries open nothing */
	atomic_bool g_broken;   /* a worker gave up: CMD's calls may wait for ever */
	bool g_stopped;
	struct worker g_w[UGATE_WORKERS];
};

/* The thread that raised one notification. */
struct target {
	const struct seccomp_notif *req; /* borrowed */
	int listener;
	int pidfd;      /* of the thread; -1 */
	int mem;        /* /proc/TID/mem, opened for sendmmsg's write-back; -1 */
	bool performed; /* the connect or send was made: never made twice */
};

/* The destination of one call after the gate: CMD's own address, or the
 * O_PATH fd's magic link in place of a unix path. */
struct dest {
	struct sockaddr_storage ss;
	socklen_t len;
	int opath; /* -1 */
};

const char *
ugate_verdict_name(enum ugate_verdict v)
{
	return v == UGATE_ALLOW ? "allow" : "deny";
}

const char *
ugate_op_name(enum ugate_op op)
{
	switch (op) {
	case UGATE_CONNECT:
		return "connect";
	case UGATE_SENDTO:
		return "sendto";
	case UGATE_SENDMSG:
		return "sendmsg";
	case UGATE_SENDMMSG:
		return "sendmmsg";
	}
	return "unknown";
}

/* ---- the calling thread ---- */

/* The fd table is full: what a worker's spare placeholders are for. */
static bool
fd_table_full(int e)
{
	return e == EMFILE || e == ENFILE;
}

static bool
tgt_valid(const struct target *t)
{
	uint64_t id = t->req->id;

	return ioctl(t->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* A pidfd of the thread: a thread's own (Linux 6.9), else its process's
 * (the leader's; pidfd_getfd and signals then act on the process, which
 * shares the fd table). */
static int
tgt_open(struct target *t)
{
	char path[64], line[128];
	FILE *f;
	int tgid = -1;

	t->pidfd = pidfd_open((pid_t)t->req->pid, PIDFD_THREAD);
	if (t->pidfd < 0 && errno == EINVAL) {
		t->pidfd = pidfd_open((pid_t)t->req->pid, 0);
		if (t->pidfd < 0 && errno == EINVAL) {
			snprintf(path, sizeof(path), "/proc/%u/status", t->req->pid);
			if ((f = fopen(path, "re")) != NULL) {
				while (fgets(line, sizeof(line), f) != NULL)
					if (sscanf(line, "Tgid: %d", &tgid) == 1)
						break;
				fclose(f);
			}
			if (tgid > 0)
				t->pidfd = pidfd_open(tgid, 0);
		}
	}
	if (t->pidfd < 0)
		return fd_table_full(errno) ? -errno : -ESRCH;
	/* Live: the pid is still that thread's, and so is the pidfd. */
	return tgt_valid(t) ? 0 : -ESRCH;
}

/* Copy len bytes at addr out of the thread's memory. 0 or -EFAULT. */
static int
tgt_read(const struct target *t, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = {.iov_base = buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};

	if (len == 0)
		return 0;
	return process_vm_readv((pid_t)t->req->pid, &local, 1, &remote, 1, 0) == (ssize_t)len
	               ? 0
	               : -EFAULT;
}

/* The thread's fd as an fd of ours (the same open file), or -errno. */
static int
tgt_getfd(const struct target *t, uint64_t fd)
{
	int r;

	if (fd > INT_MAX)
		return -EBADF;
	r = pidfd_getfd(t->pidfd, (int)fd, 0);
	return r >= 0 ? r : -errno;
}

/* Write a 32-bit value into the thread's memory through /proc/TID/mem,
 * opened once and checked live after the open: that file stays bound to
 * the thread's memory, whatever happens to the pid. 0 or -EFAULT. */
static int
tgt_write_u32(struct target *t, uint64_t addr, uint32_t v)
{
	char path[64];

	if (t->mem < 0) {
		snprintf(path, sizeof(path), "/proc/%u/mem", t->req->pid);
		t->mem = open(path, O_RDWR | O_CLOEXEC);
		if (t->mem < 0 || !tgt_valid(t))
			return -EFAULT;
	}
	return pwrite(t->mem, &v, sizeof(v), (off_t)addr) == (ssize_t)sizeof(v) ? 0 : -EFAULT;
}

/* The kernel sends SIGPIPE to a thread whose stream send fails with EPIPE
 * unless it asked for MSG_NOSIGNAL; our own sends never raise it. */
static void
tgt_sigpipe(const struct target *t, long rc, uint64_t flags)
{
	if (rc == -EPIPE && !(flags & MSG_NOSIGNAL))
		(void)pidfd_send_signal(t->pidfd, SIGPIPE, NULL, 0);
}

/* ---- deciding on a unix path ---- */

static int
sys_openat2(int dirfd, const char *path, const struct open_how *how)
{
	return (int)syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
}

/* path (as CMD gave it) resolved in the thread's root and cwd, without
 * magic links, to an O_PATH fd; or -errno, as the kernel would say it. A
 * relative path is taken from the thread's cwd as its root sees it. */
static int
resolve_in_cmd(const struct target *t, const char *path)
{
	struct open_how how = {
	        .flags = O_PATH | O_CLOEXEC,
	        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char proc[64], cwd[PATH_MAX], full[PATH_MAX + UGATE_PATH_MAX + 1];
	const char *p = path;
	int root, fd = -1, e = 0;
	ssize_t n;

	if (path[0] != '/') {
		snprintf(proc, sizeof(proc), "/proc/%u/cwd", t->req->pid);
		n = readlink(proc, cwd, sizeof(cwd) - 1);
		if (n <= 0 || cwd[0] != '/')
			return -ENOENT; /* gone, or not reachable from its root */
		cwd[n] = '\0';
		snprintf(full, sizeof(full), "%s/%s", cwd, path);
		p = full;
	}
	snprintf(proc, sizeof(proc), "/proc/%u/root", t->req->pid);
	root = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return fd_table_full(errno) ? -errno : -ESRCH;
	/* EAGAIN: a rename raced the walk; the kernel asks to try again. */
	for (int i = 0; i < 4; i++) {
		fd = sys_openat2(root, p, &how);
		e = errno;
		if (fd >= 0 || e != EAGAIN)
			break;
	}
	fd_close(&root);
	if (fd < 0)
		return -e;
	if (!tgt_valid(t)) {
		fd_close(&fd);
		return -ESRCH;
	}
	return fd;
}

/* The policy entry whose host path is the socket st, or -1. Looked up at
 * each decision (a daemon that made its socket anew since the start is
 * still the one the policy names), without following a symlink: one CMD
 * put on the way, where the path crosses a writable part of the sandbox,
 * must not make the entry name another socket. */
static int
allow_match(const struct ugate *g, const struct stat *st)
{
	struct open_how how = {
	        .flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
	        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct stat hs;

	for (size_t i = 0; i < g->g_cfg.n_allow; i++) {
		int fd;
		bool same;

		if (g->g_real[i] == NULL || (fd = sys_openat2(AT_FDCWD, g->g_real[i], &how)) < 0)
			continue;
		same = fstat(fd, &hs) == 0 && S_ISSOCK(hs.st_mode) && hs.st_dev == st->st_dev &&
		       hs.st_ino == st->st_ino;
		fd_close(&fd);
		if (same)
			return (int)i;
	}
	return -1;
}

/* path with its directory resolved (the last component as it is), or
 * NULL. Malloc'd. */
static char *
real_dir_path(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX], real[PATH_MAX], *out;
	size_t dlen;

	if (slash == NULL || slash[1] == '\0')
		return NULL;
	dlen = slash == path ? 1 : (size_t)(slash - path);
	if (dlen >= sizeof(dir))
		return NULL;
	memcpy(dir, path, dlen);
	dir[dlen] = '\0';
	if (realpath(dir, real) == NULL)
		return NULL;
	if (asprintf(&out, "%s/%s", strcmp(real, "/") == 0 ? "" : real, slash + 1) < 0)
		return NULL;
	return out;
}

/* Whether the socket file st is bound by a socket in the sandbox's network
 * namespace: one of CMD's. unix_diag lists a namespace's sockets with the
 * inode of the file each is bound to, its device in the kernel's encoding
 * (major << 20 | minor) and its number cut to 32 bits. A socket is bound
 * to one inode for that inode's life, so a match cannot become a host
 * socket later. Any failure answers false (refused). */
static bool
own_socket(struct ugate *g, const struct stat *st)
{
	struct {
		struct nlmsghdr h;
		struct unix_diag_req r;
	} req;
	uint32_t kdev = (major(st->st_dev) << 20) | (minor(st->st_dev) & 0xfffff);
	uint32_t ino = (uint32_t)st->st_ino;
	char buf[16384] __attribute__((aligned(NLMSG_ALIGNTO)));
	bool found = false, done = false, failed = false;
	ssize_t n;

	pthread_mutex_lock(&g->g_diag_lock);
	memset(&req, 0, sizeof(req));
	req.h.nlmsg_len = sizeof(req);
	req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	req.h.nlmsg_seq = ++g->g_diag_seq;
	req.r.sdiag_family = AF_UNIX;
	req.r.udiag_states = ~0u;
	req.r.udiag_show = UDIAG_SHOW_VFS;
	if (send(g->g_diag, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req))
		failed = true;
	while (!failed && !done) {
		struct sockaddr_nl from;
		socklen_t fromlen = sizeof(from);

		n = recvfrom(g->g_diag, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen);
		/* Only the kernel's answers (the socket is connected to it, too). */
		if (n > 0 &&
		    (fromlen < sizeof(from) || from.nl_family != AF_NETLINK || from.nl_pid != 0))
			continue;
		if (n <= 0) {
			failed = true;
			break;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_seq != g->g_diag_seq)
				continue; /* an earlier dump's tail */
			if (h->nlmsg_type == NLMSG_DONE || h->nlmsg_type == NLMSG_ERROR) {
				done = true;
				failed = failed || h->nlmsg_type == NLMSG_ERROR;
				break;
			}
			if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
			    h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
				continue;
			struct rtattr *a =
			        (struct rtattr *)((char *)NLMSG_DATA(h) +
			                          NLMSG_ALIGN(sizeof(struct unix_diag_msg)));
			int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(struct unix_diag_msg)));
			for (; RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
				const struct unix_diag_vfs *v = RTA_DATA(a);

				if (a->rta_type == UNIX_DIAG_VFS && RTA_PAYLOAD(a) >= sizeof(*v) &&
				    v->udiag_vfs_dev == kdev && v->udiag_vfs_ino == ino)
					found = true;
			}
		}
	}
	pthread_mutex_unlock(&g->g_diag_lock);
	return found && !failed;
}

static void
emit(struct ugate *g, enum ugate_verdict v, enum ugate_op op, int type, int allow, const char *path)
{
	struct ugate_event ev;
	ssize_t n;

	if (!g->g_cfg.events)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.verdict = (uint8_t)v;
	ev.op = (uint8_t)op;
	ev.sock_type = type;
	ev.allow = allow;
	str_copy(ev.path, path, sizeof(ev.path));
	/* One record, atomic (< PIPE_BUF). A full pipe holds the worker, and
	 * so CMD's call, until the loop has caught up: backpressure. */
	do
		n = write(g->g_ev_w, &ev, sizeof(ev));
	while (n < 0 && errno == EINTR && !atomic_load(&g->g_stop));
}

/* The gate proper. d gets CMD's address unchanged, except that an AF_UNIX
 * pathname on an AF_UNIX socket is decided: a socket of CMD's own or one
 * the policy names goes through the O_PATH fd of the inode decided on,
 * anything else is refused (-EACCES, reported). 0, or -errno for CMD. */
static int
gate_dest(struct worker *w, const struct target *t, int sock, enum ugate_op op, socklen_t len,
          struct dest *d)
{
	const struct sockaddr_un *sun = (const struct sockaddr_un *)&d->ss;
	char path[UGATE_PATH_MAX];
	int domain = 0, type = 0, fd, allow;
	socklen_t ol = sizeof(int);
	size_t plen;
	struct stat st;

	d->opath = -1;
	d->len = len;
	/* The gate makes the call with the supervisor's credentials, which
	 * hold every capability in the sandbox's user namespace: a netlink
	 * message to another socket's port (the gate's unix_diag socket,
	 * the NFLOG reader) or to a multicast group would pass the kernel's
	 * check for CAP_NET_ADMIN that CMD itself fails. Refused as the
	 * kernel refuses CMD; port 0 (the kernel) goes as it is. */
	if (len >= sizeof(sa_family_t) && d->ss.ss_family == AF_NETLINK) {
		const struct sockaddr_nl *nl = (const struct sockaddr_nl *)&d->ss;

		if (len < sizeof(*nl))
			return -EINVAL;
		return nl->nl_pid != 0 || nl->nl_groups != 0 ? -EPERM : 0;
	}
	/* Abstract (sun_path[0] == 0: per network namespace) and unnamed
	 * addresses, and lengths the kernel refuses, go as they are. */
	if (len <= offsetof(struct sockaddr_un, sun_path) || len > sizeof(struct sockaddr_un) ||
	    sun->sun_family != AF_UNIX || sun->sun_path[0] == '\0')
		return 0;
	if (getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &ol) < 0 || domain != AF_UNIX)
		return 0; /* the kernel refuses a unix address on any other socket */
	ol = sizeof(int);
	(void)getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &ol);
	/* As the kernel reads it: up to the first NUL or the length given. */
	plen = strnlen(sun->sun_path, len - offsetof(struct sockaddr_un, sun_path));
	memcpy(path, sun->sun_path, plen);
	path[plen] = '\0';

	fd = resolve_in_cmd(t, path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		fd_close(&fd);
		return -ECONNREFUSED; /* what connect() says of a file that is not a socket */
	}
	allow = atomic_load(&w->w_gate->g_sealed) ? -1 : allow_match(w->w_gate, &st);
	if (allow < 0 && !own_socket(w->w_gate, &st)) {
		emit(w->w_gate, UGATE_DENY, op, type, -1, path);
		fd_close(&fd);
		return -EACCES;
	}
	if (allow >= 0)
		emit(w->w_gate, UGATE_ALLOW, op, type, allow, path);
	struct sockaddr_un *out = (struct sockaddr_un *)&d->ss;
	memset(out, 0, sizeof(*out));
	out->sun_family = AF_UNIX;
	snprintf(out->sun_path, sizeof(out->sun_path), "/proc/thread-self/fd/%d", fd);
	d->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(out->sun_path) + 1);
	d->opath = fd;
	return 0;
}

/* Copy CMD's address (uaddr, ulen as the syscall got them) into d, as
 * move_addr_to_kernel does. 0 or -errno. */
static int
read_addr(const struct target *t, uint64_t uaddr, int64_t ulen, struct dest *d)
{
	d->opath = -1;
	if (ulen < 0 || (uint64_t)ulen > sizeof(d->ss))
		return -EINVAL;
	memset(&d->ss, 0, sizeof(d->ss));
	return tgt_read(t, uaddr, &d->ss, (size_t)ulen);
}

static int
sock_type(int sock)
{
	int type = 0;
	socklen_t ol = sizeof(type);

	if (getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &ol) < 0)
		return -errno;
	return type;
}

/* ---- the calls ---- */

static long
do_connect(struct worker *w, struct target *t)
{
	const __u64 *a = t->req->data.args;
	struct dest d = {.opath = -1};
	int sock;
	long rc;

	if ((sock = tgt_getfd(t, a[0])) < 0)
		return sock;
	if ((rc = read_addr(t, a[1], (int32_t)a[2], &d)) == 0 && !tgt_valid(t))
		rc = -ESRCH;
	if (rc == 0)
		rc = gate_dest(w, t, sock, UGATE_CONNECT, (socklen_t)(int32_t)a[2], &d);
	if (rc == 0) {
		t->performed = true;
		rc = connect(sock, (struct sockaddr *)&d.ss, d.len) < 0 ? -errno : 0;
	}
	fd_close(&d.opath);
	fd_close(&sock);
	return rc;
}

static long
do_sendto(struct worker *w, struct target *t)
{
	const __u64 *a = t->req->data.args;
	struct dest d = {.opath = -1};
	uint64_t len = a[2], flags = (uint32_t)a[3];
	bool has_addr = a[4] != 0 && (int32_t)a[5] != 0;
	int sock, type;
	long rc = 0;

	if ((sock = tgt_getfd(t, a[0])) < 0)
		return sock;
	if ((type = sock_type(sock)) < 0) {
		rc = type;
		goto out;
	}
	if (len > UGATE_DATA_MAX) {
		if (type != SOCK_STREAM) {
			rc = -EMSGSIZE;
			goto out;
		}
		len = UGATE_DATA_MAX;
	}
	if ((rc = tgt_read(t, a[1], w->w_data, len)) == 0 && has_addr)
		rc = read_addr(t, a[4], (int32_t)a[5], &d);
	if (rc == 0 && !tgt_valid(t))
		rc = -ESRCH;
	if (rc == 0 && has_addr)
		rc = gate_dest(w, t, sock, UGATE_SENDTO, (socklen_t)(int32_t)a[5], &d);
	if (rc == 0) {
		t->performed = true;
		ssize_t n =
		        sendto(sock, w->w_data, len, (int)((flags | MSG_NOSIGNAL) & ~MSG_ZEROCOPY),
		               has_addr ? (struct sockaddr *)&d.ss : NULL, has_addr ? d.len : 0);
		rc = n < 0 ? -errno : n;
		tgt_sigpipe(t, rc, flags);
	}
out:
	fd_close(&d.opath);
	fd_close(&sock);
	return rc;
}

static void
close_passed(struct worker *w)
{
	for (size_t i = 0; i < w->w_nfds; i++)
		fd_close(&w->w_fds[i]);
	w->w_nfds = 0;
}

/* CMD's ancillary data (in w_ctl, len bytes) made ours in place: each fd
 * of SCM_RIGHTS replaced by ours for the same file (closed by
 * close_passed); SCM_CREDENTIALS refused (EPERM: the supervisor cannot
 * vouch for CMD's pid, the kernel would check its own); the rest passed as
 * it is. 0 or -errno, as the kernel's checks would answer. */
static bool
cmsg_allowed(const struct cmsghdr *c)
{
	switch (c->cmsg_level) {
	case SOL_SOCKET:
		return c->cmsg_type == SCM_RIGHTS;
	case SOL_IP:
		return c->cmsg_type == IP_TTL || c->cmsg_type == IP_TOS ||
		       c->cmsg_type == IP_PKTINFO;
	case SOL_IPV6:
		return c->cmsg_type == IPV6_HOPLIMIT || c->cmsg_type == IPV6_TCLASS ||
		       c->cmsg_type == IPV6_PKTINFO || c->cmsg_type == IPV6_DONTFRAG;
	case IPPROTO_UDP: /* SOL_UDP */
		return c->cmsg_type == UDP_SEGMENT;
	}
	return false;
}

static int
translate_control(struct worker *w, const struct target *t, size_t len)
{
	struct msghdr m = {.msg_control = w->w_ctl, .msg_controllen = len};

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
		size_t off = (size_t)((unsigned char *)c - w->w_ctl);

		if (c->cmsg_len < sizeof(*c) || c->cmsg_len > len - off)
			return -EINVAL;
		/* Sent with the supervisor's capabilities (see gate_dest): only
		 * what needs none passes. SCM_CREDENTIALS would claim the
		 * supervisor's ids; SO_MARK, SO_PRIORITY, IP options and IPv6
		 * extension headers need CAP_NET_ADMIN or CAP_NET_RAW. */
		if (!cmsg_allowed(c))
			return -EPERM;
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		unsigned char *p = CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int fd, mine;

			if (w->w_nfds >= UGATE_FDS_MAX)
				return -EINVAL;
			memcpy(&fd, p + i * sizeof(int), sizeof(int));
			if (fd < 0 || (mine = tgt_getfd(t, (uint64_t)fd)) < 0)
				return fd >= 0 && fd_table_full(-mine) ? mine : -EBADF;
			w->w_fds[w->w_nfds++] = mine;
			memcpy(p + i * sizeof(int), &mine, sizeof(int));
		}
	}
	return 0;
}

/* One struct msghdr of CMD's (already copied: um) made a message of ours
 * in out: the data gathered into w_data, the control translated, the
 * destination gated. type bounds the data (see UGATE_DATA_MAX). 0 or
 * -errno. */
static int
prepare_msg(struct worker *w, const struct target *t, int sock, int type, enum ugate_op op,
            const struct msghdr *um, struct msghdr *out, struct dest *d)
{
	uint64_t total = 0, take;
	size_t niov = um->msg_iovlen, nremote = 0;
	socklen_t namelen = um->msg_name != NULL ? um->msg_namelen : 0;
	int rc;

	memset(out, 0, sizeof(*out));
	d->opath = -1;
	/* As __copy_msghdr: the name is clamped to a sockaddr_storage. */
	if ((int)namelen < 0)
		return -EINVAL;
	if (namelen > sizeof(struct sockaddr_storage))
		namelen = sizeof(struct sockaddr_storage);
	if (niov > UGATE_IOV_MAX)
		return -EMSGSIZE;
	if (um->msg_controllen > UGATE_CTL_MAX)
		return -ENOBUFS;
	if ((rc = tgt_read(t, (uintptr_t)um->msg_iov, w->w_iov, niov * sizeof(struct iovec))) < 0)
		return rc;
	/* CMD's iovecs are the remote side of one read into w_data. */
	for (size_t i = 0; i < niov; i++) {
		if (w->w_iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		take = w->w_iov[i].iov_len;
		if (total + take > UGATE_DATA_MAX) {
			if (type != SOCK_STREAM)
				return -EMSGSIZE;
			take = UGATE_DATA_MAX - total;
		}
		w->w_iov[nremote].iov_base = w->w_iov[i].iov_base;
		w->w_iov[nremote].iov_len = take;
		nremote += take > 0;
		total += take;
		if (total == UGATE_DATA_MAX)
			break;
	}
	if (total > 0) {
		struct iovec local = {.iov_base = w->w_data, .iov_len = total};
		if (process_vm_readv((pid_t)t->req->pid, &local, 1, w->w_iov, nremote, 0) !=
		    (ssize_t)total)
			return -EFAULT;
	}
	if (namelen > 0 && (rc = read_addr(t, (uintptr_t)um->msg_name, namelen, d)) < 0)
		return rc;
	if ((rc = tgt_read(t, (uintptr_t)um->msg_control, w->w_ctl, um->msg_controllen)) < 0)
		return rc;
	if (!tgt_valid(t))
		return -ESRCH;
	if ((rc = translate_control(w, t, um->msg_controllen)) < 0)
		return rc;
	if (namelen > 0) {
		if ((rc = gate_dest(w, t, sock, op, namelen, d)) < 0)
			return rc;
		out->msg_name = &d->ss;
		out->msg_namelen = d->len;
	}
	w->w_iov[0].iov_base = w->w_data;
	w->w_iov[0].iov_len = total;
	out->msg_iov = w->w_iov;
	out->msg_iovlen = 1;
	out->msg_control = um->msg_controllen > 0 ? w->w_ctl : NULL;
	out->msg_controllen = um->msg_controllen;
	return 0;
}

static long
send_prepared(struct target *t, int sock, const struct msghdr *m, uint64_t flags)
{
	ssize_t n;
	long rc;

	t->performed = true;
	n = sendmsg(sock, m, (int)((flags | MSG_NOSIGNAL) & ~MSG_ZEROCOPY));
	rc = n < 0 ? -errno : n;
	tgt_sigpipe(t, rc, flags);
	return rc;
}

static long
do_sendmsg(struct worker *w, struct target *t)
{
	const __u64 *a = t->req->data.args;
	struct msghdr um, m;
	struct dest d = {.opath = -1};
	int sock, type;
	long rc;

	if ((sock = tgt_getfd(t, a[0])) < 0)
		return sock;
	if ((rc = type = sock_type(sock)) >= 0 && (rc = tgt_read(t, a[1], &um, sizeof(um))) == 0 &&
	    (rc = prepare_msg(w, t, sock, type, UGATE_SENDMSG, &um, &m, &d)) == 0)
		rc = send_prepared(t, sock, &m, (uint32_t)a[2]);
	close_passed(w);
	fd_close(&d.opath);
	fd_close(&sock);
	return rc;
}

/* As the kernel's: the messages in order, each one's length written back;
 * the count sent, or the first message's error. */
static long
do_sendmmsg(struct worker *w, struct target *t)
{
	const __u64 *a = t->req->data.args;
	uint64_t vlen = (uint32_t)a[2] > UGATE_IOV_MAX ? UGATE_IOV_MAX : (uint32_t)a[2];
	struct mmsghdr um;
	struct msghdr m;
	struct dest d = {.opath = -1};
	int sock, type;
	long rc = 0, sent = 0;

	if ((sock = tgt_getfd(t, a[0])) < 0)
		return sock;
	if ((type = sock_type(sock)) < 0) {
		fd_close(&sock);
		return type;
	}
	for (uint64_t i = 0; i < vlen; i++) {
		uint64_t at = a[1] + i * sizeof(struct mmsghdr);

		if ((rc = tgt_read(t, at, &um, sizeof(um))) == 0 &&
		    (rc = prepare_msg(w, t, sock, type, UGATE_SENDMMSG, &um.msg_hdr, &m, &d)) == 0)
			rc = send_prepared(t, sock, &m, (uint32_t)a[3]);
		close_passed(w);
		fd_close(&d.opath);
		if (rc < 0)
			break;
		sent++;
		if (tgt_write_u32(t, at + offsetof(struct mmsghdr, msg_len), (uint32_t)rc) < 0)
			break;
	}
	fd_close(&sock);
	return sent > 0 ? sent : rc;
}

/* Take the worker's placeholders again, as many as the table has room for
 * (the worker's own thread: off the start-up path). */
static void
spares_take(struct worker *w)
{
	for (size_t i = 0; i < UGATE_SPARE_FDS; i++)
		if (w->w_spare[i] < 0)
			w->w_spare[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void
spares_give_up(struct worker *w)
{
	for (size_t i = 0; i < UGATE_SPARE_FDS; i++)
		fd_close(&w->w_spare[i]);
}

/* One call, made by the gate for CMD's thread: -errno or the result. */
static long
handle_call(struct worker *w, struct target *t)
{
	long rc;

	if ((rc = tgt_open(t)) == 0) {
		switch (t->req->data.nr) {
		case __NR_connect:
			rc = do_connect(w, t);
			break;
		case __NR_sendto:
			rc = do_sendto(w, t);
			break;
		case __NR_sendmsg:
			rc = do_sendmsg(w, t);
			break;
		case __NR_sendmmsg:
			rc = do_sendmmsg(w, t);
			break;
		default:
			rc = -ENOSYS;
			break;
		}
	}
	fd_close(&t->mem);
	fd_close(&t->pidfd);
	return rc;
}

static void
handle(struct worker *w, const struct seccomp_notif *req, struct seccomp_notif_resp *resp)
{
	struct target t = {.req = req, .listener = w->w_gate->g_listener, .pidfd = -1, .mem = -1};
	long rc;

	/* 32-bit x86 programs: their connect, sendto with an address,
	 * sendmsg and sendmmsg (direct or through socketcall) are refused;
	 * docs/run.md says so. */
	if (req->data.arch != AUDIT_ARCH_X86_64) {
		rc = -EACCES;
	} else {
		rc = handle_call(w, &t);
		/* Out of descriptors before the call was made: once more with the
		 * placeholders given up. Still out: ENOBUFS, airlock's shortage,
		 * never an error CMD would take for its own fd table's. */
		if (fd_table_full((int)-rc) && !t.performed) {
			spares_give_up(w);
			rc = handle_call(w, &t);
			spares_take(w);
		}
		if (fd_table_full((int)-rc)) {
			if (!atomic_exchange(&w->w_gate->g_said_fds, true))
				log_warnx("unix socket gate: out of file descriptors; CMD's "
				          "connect/send calls get ENOBUFS meanwhile");
			rc = -ENOBUFS;
		}
	}
	resp->id = req->id;
	resp->flags = 0;
	if (rc < 0) {
		resp->error = (int32_t)rc;
		resp->val = 0;
	} else {
		resp->error = 0;
		resp->val = rc;
	}
}

/* ---- the workers ---- */

static void
wake(int sig)
{
	(void)sig;
}

static int
wake_signal(void)
{
	return SIGRTMIN + 3;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct ugate *g = w->w_gate;
	sigset_t only;

	/* Only the wake-up reaches a worker: the supervisor's own signals
	 * stay with its signalfd. */
	sigfillset(&only);
	sigdelset(&only, wake_signal());
	pthread_sigmask(SIG_SETMASK, &only, NULL);
	/* Created while the supervisor is pinned for set-up: CMD's calls
	 * may run on every CPU the caller has. */
	if (g->g_has_cpus)
		(void)sched_setaffinity(0, sizeof(g->g_cpus), &g->g_cpus);
	spares_take(w);
	while (!atomic_load(&g->g_stop)) {
		struct pollfd pfd = {.fd = g->g_listener, .events = POLLIN};

		/* Hung up: nothing in the sandbox is left to raise a call (RECV
		 * would now fail at once, again and again). */
		if (poll(&pfd, 1, -1) < 0 || (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)))
			break;
		memset(w->w_req, 0, g->g_sizes.seccomp_notif);
		if (ioctl(g->g_listener, SECCOMP_IOCTL_NOTIF_RECV, w->w_req) < 0) {
			/* EINTR: the wake-up, or another worker took it first and
			 * this one waited; ENOENT: the caller died meanwhile. */
			if (errno == EINTR || errno == ENOENT)
				continue;
			log_warn("unix socket gate: receiving a notification");
			/* CMD's calls would wait for ever: the run must end. */
			atomic_store(&g->g_broken, true);
			break;
		}
		memset(w->w_resp, 0, g->g_sizes.seccomp_notif_resp);
		handle(w, w->w_req, w->w_resp);
		/* ENOENT: the thread was killed meanwhile; nobody waits. */
		if (ioctl(g->g_listener, SECCOMP_IOCTL_NOTIF_SEND, w->w_resp) < 0 &&
		    errno != ENOENT && errno != EINTR)
			log_warn("unix socket gate: answering a notification");
	}
	return NULL;
}

static void
worker_free(struct worker *w)
{
	spares_give_up(w);
	free(w->w_req);
	free(w->w_resp);
	free(w->w_data);
	free(w->w_ctl);
	free(w->w_iov);
	w->w_req = NULL;
	w->w_resp = NULL;
	w->w_data = w->w_ctl = NULL;
	w->w_iov = NULL;
}

struct ugate *
ugate_new(int listener, int diag, const struct ugate_config *cfg, char *err, size_t errlen)
{
	struct ugate *g = calloc(1, sizeof(*g));
	struct timeval tv = {.tv_sec = DIAG_TIMEOUT_S};
	struct sigaction sa;
	int p[2];

	if (g == NULL) {
		snprintf(err, errlen, "unix socket gate: out of memory");
		fd_close(&listener);
		fd_close(&diag);
		return NULL;
	}
	for (size_t i = 0; i < UGATE_WORKERS; i++)
		for (size_t j = 0; j < UGATE_SPARE_FDS; j++)
			g->g_w[i].w_spare[j] = -1;
	g->g_listener = listener;
	g->g_diag = diag;
	g->g_ev_r = g->g_ev_w = -1;
	g->g_cfg = *cfg;
	if (cfg->n_allow > 0 && (g->g_real = calloc(cfg->n_allow, sizeof(*g->g_real))) == NULL) {
		snprintf(err, errlen, "unix socket gate: out of memory");
		fd_close(&listener);
		fd_close(&diag);
		free(g);
		return NULL;
	}
	for (size_t i = 0; i < cfg->n_allow; i++)
		if ((g->g_real[i] = real_dir_path(cfg->allow[i].path)) == NULL)
			log_warnx("unix: %s (%s): its directory does not resolve on the host; the "
			          "entry opens nothing",
			          cfg->allow[i].path, cfg->allow[i].where);
	if (cfg->cpus != NULL) {
		g->g_cpus = *cfg->cpus;
		g->g_has_cpus = true;
	}
	g->g_cfg.cpus = NULL;
	pthread_mutex_init(&g->g_diag_lock, NULL);
	g->g_stopped = true; /* no worker yet */
	if (listener < 0 || diag < 0) {
		snprintf(err, errlen, "unix socket gate: no %s",
		         listener < 0 ? "listener" : "diag socket");
		goto fail;
	}
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &g->g_sizes) < 0) {
		snprintf(err, errlen, "unix socket gate: notification sizes: %s", strerror(errno));
		goto fail;
	}
	if (setsockopt(diag, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		snprintf(err, errlen, "unix socket gate: diag socket: %s", strerror(errno));
		goto fail;
	}
	if (cfg->events) {
		if (pipe2(p, O_CLOEXEC) < 0 || fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
			snprintf(err, errlen, "unix socket gate: event pipe: %s", strerror(errno));
			goto fail;
		}
		g->g_ev_r = p[0];
		g->g_ev_w = p[1];
	}
	/* The wake-up interrupts a worker's blocking call (no SA_RESTART). */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = wake;
	sigemptyset(&sa.sa_mask);
	if (sigaction(wake_signal(), &sa, NULL) < 0) {
		snprintf(err, errlen, "unix socket gate: signal handler: %s", strerror(errno));
		goto fail;
	}
	return g;
fail:
	ugate_free(g);
	return NULL;
}

int
ugate_start(struct ugate *g, char *err, size_t errlen)
{
	g->g_stopped = false;
	for (size_t i = 0; i < UGATE_WORKERS; i++) {
		struct worker *w = &g->g_w[i];

		w->w_gate = g;
		w->w_req = calloc(1, g->g_sizes.seccomp_notif);
		w->w_resp = calloc(1, g->g_sizes.seccomp_notif_resp);
		w->w_data = malloc(UGATE_DATA_MAX);
		w->w_ctl = malloc(UGATE_CTL_MAX);
		w->w_iov = malloc(UGATE_IOV_MAX * sizeof(struct iovec));
		if (w->w_req == NULL || w->w_resp == NULL || w->w_data == NULL ||
		    w->w_ctl == NULL || w->w_iov == NULL) {
			snprintf(err, errlen, "unix socket gate: out of memory");
			return -1;
		}
		int e = pthread_create(&w->w_tid, NULL, worker_main, w);
		if (e != 0) {
			snprintf(err, errlen, "unix socket gate: thread: %s", strerror(e));
			return -1;
		}
		w->w_started = true;
	}
	return 0;
}

bool
ugate_broken(const struct ugate *g)
{
	return g != NULL && atomic_load(&g->g_broken);
}

void
ugate_seal(struct ugate *g)
{
	if (g != NULL)
		atomic_store(&g->g_sealed, true);
}

int
ugate_event_fd(const struct ugate *g)
{
	return g->g_ev_r;
}

int
ugate_read_event(struct ugate *g, struct ugate_event *ev)
{
	ssize_t n;

	if (g->g_ev_r < 0)
		return 0;
	do
		n = read(g->g_ev_r, ev, sizeof(*ev));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*ev))
		return 0;
	ev->path[sizeof(ev->path) - 1] = '\0';
	return 1;
}

void
ugate_stop(struct ugate *g)
{
	if (g == NULL || g->g_stopped)
		return;
	atomic_store(&g->g_stop, true);
	for (size_t i = 0; i < UGATE_WORKERS; i++) {
		struct worker *w = &g->g_w[i];

		if (!w->w_started)
			continue;
		/* Signalled until it has left: one signal can land just before
		 * the worker blocks again. */
		for (;;) {
			struct timespec ts;

			(void)pthread_kill(w->w_tid, wake_signal());
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 10 * 1000 * 1000;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			if (pthread_timedjoin_np(w->w_tid, NULL, &ts) == 0)
				break;
		}
		w->w_started = false;
	}
	g->g_stopped = true;
}

void
ugate_free(struct ugate *g)
{
	if (g == NULL)
		return;
	ugate_stop(g);
	for (size_t i = 0; i < UGATE_WORKERS; i++)
		worker_free(&g->g_w[i]);
	fd_close(&g->g_listener);
	fd_close(&g->g_diag);
	fd_close(&g->g_ev_r);
	fd_close(&g->g_ev_w);
	pthread_mutex_destroy(&g->g_diag_lock);
	for (size_t i = 0; g->g_real != NULL && i < g->g_cfg.n_allow; i++)
		free(g->g_real[i]);
	free(g->g_real);
	free(g);
}
