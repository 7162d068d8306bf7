/* The logger process (logger.h): receive LINE datagrams, seal each into
 * the chain, write it through the sink. A poll(2) loop over two fds, no
 * event library: the fewer calls it makes, the shorter its allowlist. */
#include "elog/logger.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/confine.h"
#include "common/fdcaller.h"
#include "common/log.h"
#include "common/util.h"
#include "elog/buf.h"
#include "elog/chain.h"
#include "elog/elog.h"
#include "elog/logger_filter.h"
#include "elog/logmsg.h"
#include "elog/sink.h"

/* Datagrams read per wake-up before the sink gets a look again. */
#define LOGGER_BATCH 64
/* After a wake-up that found lines, the logger sleeps this long before it
 * waits again, so that under load the lines that came meanwhile are read
 * in one wake-up: a sender whose peer is not waiting on the socket has no
 * task to wake, and the wake-ups (two context switches per line when the
 * logger waits for each) were most of the logger's cost per tunnel
 * (bench/proxy.md). Only after a wake-up that found more than one line:
 * a line is written at most this much later; a quiet log's, at once. */
#define LOGGER_COALESCE_NS (1000 * 1000)

struct logger {
	int lg_sock;
	struct elog_sink *lg_sink;
	struct elog_chain lg_chain;
	uint64_t lg_lines, lg_refused;
	int lg_landlock; /* the Landlock ABI applied; 0 none; -1 unconfined */
	/* One datagram, one byte more than the longest taken, so that
	 * MSG_TRUNC tells a longer one. */
	char lg_in[ELOG_LOGMSG_MAX + 1];
	char lg_line[ELOG_LINE_MAX];
};

/* Tell the serving process; it may have gone, which changes nothing. */
static void
logger_say(struct logger *lg, enum elog_logmsg_type type, const char *reason)
{
	char buf[sizeof(struct elog_logmsg_hdr) + ELOG_LOGMSG_REASON_MAX];
	struct elog_logmsg_hdr h = {.lm_type = type, .lm_len = 0};

	if (reason != NULL) {
		size_t n = strnlen(reason, ELOG_LOGMSG_REASON_MAX);

		if (n == 0) {
			reason = "failed";
			n = strlen(reason);
		}
		memcpy(buf + sizeof(h), reason, n);
		h.lm_len = (uint32_t)n;
	}
	memcpy(buf, &h, sizeof(h));
	(void)send(lg->lg_sock, buf, sizeof(h) + h.lm_len, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void
logger_refuse(struct logger *lg, enum elog_logmsg_parse p, size_t len)
{
	lg->lg_refused++;
	if (lg->lg_refused <= ELOG_LOGGER_WARN_MAX)
		log_warnx("logger: refused a datagram of %zu bytes (%s); not written%s", len,
		          elog_logmsg_error(p),
		          lg->lg_refused == ELOG_LOGGER_WARN_MAX ? "; further ones are counted"
		                                                 : "");
}

/* One datagram of len bytes (its true length; at most sizeof(lg_in) were
 * read). 0, or -1 when the log has failed. */
static int
logger_take(struct logger *lg, size_t len)
{
	struct elog_logmsg m;
	struct elog_buf b;
	enum elog_logmsg_parse p;

	p = elog_logmsg_parse_input(lg->lg_in, len, &m);
	if (p != ELOG_LOGMSG_OK) {
		logger_refuse(lg, p, len);
		return 0;
	}
	if (m.type == ELOG_LOGMSG_SYNC) {
		/* Every line before it went to the sink; a file has it, a
		 * pipe's reader may still have some of it queued here. */
		logger_say(lg, ELOG_LOGMSG_SYNC, NULL);
		return 0;
	}
	elog_buf_init(&b, lg->lg_line, sizeof(lg->lg_line));
	elog_buf_put(&b, m.body, m.len);
	if (elog_chain_seal(&lg->lg_chain, &b) < 0) {
		logger_say(lg, ELOG_LOGMSG_FAILED, "a line could not be hashed for its chain");
		log_warnx("egress log: a line could not be hashed for its chain; log marked "
		          "failed");
		return -1;
	}
	if (elog_sink_write(lg->lg_sink, b.data, b.len) < 0)
		return -1;
	elog_chain_commit(&lg->lg_chain);
	lg->lg_lines++;
	return 0;
}

/* Read what waits (*took: how many datagrams). 1 when the input has
 * ended, 0 to go on, -1 when the log failed. hup: the socket reported its peer gone, which tells the
 * end from a zero-length datagram (both read as 0 bytes). An honest
 * sender sends no empty datagram, so one just before the end may end the
 * reading early: it could only hide that sender's own lines. */
static int
logger_read(struct logger *lg, bool hup, int *took)
{
	*took = 0;
	for (int i = 0; i < LOGGER_BATCH; i++) {
		ssize_t n = recv(lg->lg_sock, lg->lg_in, sizeof(lg->lg_in),
		                 MSG_DONTWAIT | MSG_TRUNC);

		/* ECONNRESET: the sender closed with our status unread; the
		 * error comes once, before the datagrams still queued. */
		if (n < 0 && (errno == EINTR || errno == ECONNRESET))
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n < 0)
			return 1;
		if (n == 0 && !hup) {
			/* The end may have come since the poll. */
			struct pollfd pfd = {.fd = lg->lg_sock, .events = POLLRDHUP};

			hup = poll(&pfd, 1, 0) == 1 &&
			      (pfd.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
		}
		if (n == 0 && hup)
			return 1;
		if (logger_take(lg, (size_t)n) < 0)
			return -1;
		(*took)++;
	}
	return 0;
}

static int
logger_loop(struct logger *lg)
{
	for (;;) {
		struct pollfd pfd[2] = {
		        /* POLLRDHUP: the sender's shutdown(SHUT_WR) at the end */
		        {.fd = lg->lg_sock, .events = POLLIN | POLLRDHUP},
		        /* events 0: a pipe's reader gone shows as POLLERR */
		        {.fd = elog_sink_fd(lg->lg_sink), .events = 0},
		};
		int timeout = -1, r;

		if (elog_sink_queued(lg->lg_sink) > 0) {
			pfd[1].events = POLLOUT;
			timeout = ELOG_SINK_STALL_MS / 4; /* the stall rule's clock */
		}
		if (poll(pfd, 2, timeout) < 0 && errno != EINTR) {
			log_warn("logger: poll");
			return -1;
		}
		if (pfd[1].revents != 0 || timeout >= 0) {
			elog_sink_flush(lg->lg_sink);
			if (elog_sink_failed(lg->lg_sink))
				return -1;
		}
		if (pfd[0].revents != 0) {
			int took;

			r = logger_read(lg, (pfd[0].revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0,
			                &took);
			if (r != 0)
				return r;
			/* Lines come faster than one per wake-up: let the next
			 * ones gather. One line per wake-up (a quiet log) is
			 * not slept on: the sleep would be a second wake-up
			 * for every line. A full batch: more wait, read them
			 * at once. */
			if (took > 1 && took < LOGGER_BATCH) {
				struct timespec ts = {0, LOGGER_COALESCE_NS};

				(void)nanosleep(&ts, NULL);
			}
		}
	}
}

#ifdef ELOG_LOGGER_SELFTEST
#include <sys/syscall.h>

/* Test builds only (tests/elog/): once confined, try what the logger must
 * not be able to do, and say what stopped each. */
static void
logger_selftest(const struct logger *lg)
{
	static char *const argv[] = {"/bin/true", NULL};
	int e[3];
	long r;

	errno = 0;
	r = syscall(SYS_openat, AT_FDCWD, "/etc/passwd", O_RDONLY | O_CLOEXEC);
	e[0] = r >= 0 ? 0 : errno;
	errno = 0;
	r = syscall(SYS_socket, AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	e[1] = r >= 0 ? 0 : errno;
	errno = 0;
	r = syscall(SYS_execve, argv[0], argv, argv + 1);
	e[2] = r >= 0 ? 0 : errno;
	log_warnx("logger selftest: openat %d socket %d execve %d landlock %d", e[0], e[1], e[2],
	          lg->lg_landlock);
}
#endif

/* No capabilities (a logger forked from root keeps none), no_new_privs,
 * Landlock, then seccomp last: each later step is allowed by the ones
 * before it. */
static int
logger_confine(struct logger *lg)
{
	if (confine_drop_caps() != 0) {
		log_warn("logger: dropping capabilities");
		return -1;
	}
	if (confine_no_new_privs() != 0) {
		log_warn("logger: no_new_privs");
		return -1;
	}
	lg->lg_landlock = confine_landlock(0);
	if (lg->lg_landlock < 0) {
		log_warn("logger: Landlock");
		return -1;
	}
	if (lg->lg_landlock == 0)
		log_info("logger: this kernel has no Landlock; seccomp alone keeps it off the "
		         "filesystem");
	if (confine_seccomp(elog_logger_seccomp_bpf, elog_logger_seccomp_bpf_len) != 0) {
		log_warn("logger: seccomp");
		return -1;
	}
	return 0;
}

int
elog_logger_serve(int sock, int logfd, bool confine)
{
	struct logger *lg = malloc(sizeof(*lg));
	unsigned char h[ELOG_SHA256_LEN];
	char err[256];
	int r = -1;

	if (lg == NULL) {
		log_warnx("logger: out of memory");
		fd_close(&sock);
		fd_close(&logfd);
		return 1;
	}
	/* The buffers are written before they are read. */
	memset(lg, 0, offsetof(struct logger, lg_in));
	lg->lg_sock = sock;
	lg->lg_landlock = -1;
	elog_chain_init(&lg->lg_chain);
	lg->lg_sink = elog_sink_new(logfd, err, sizeof(err));
	if (lg->lg_sink == NULL) {
		log_warnx("egress log: %s", err);
		logger_say(lg, ELOG_LOGMSG_FAILED, err);
		goto out;
	}
	/* Hash once before confinement: a SHA-256 that does not work is
	 * said at once, not at the first line (elog_sha256 opens no file). */
	if (elog_sha256("", 0, h) < 0) {
		logger_say(lg, ELOG_LOGMSG_FAILED, "SHA-256 is not available");
		log_warnx("logger: SHA-256 is not available");
		goto out;
	}
	if (fd_set_nonblock(sock, true) != 0 || (confine && logger_confine(lg) != 0)) {
		logger_say(lg, ELOG_LOGMSG_FAILED, "the logger could not confine itself");
		goto out;
	}
#ifdef ELOG_LOGGER_SELFTEST
	logger_selftest(lg);
#endif
	r = logger_loop(lg);
	if (r > 0 && elog_sink_drain(lg->lg_sink, ELOG_LOGMSG_DRAIN_MS) < 0)
		r = -1;
	if (r < 0 && elog_sink_dead(lg->lg_sink))
		logger_say(lg, ELOG_LOGMSG_FAILED, elog_sink_error(lg->lg_sink));
	else if (r > 0)
		logger_say(lg, ELOG_LOGMSG_DONE, NULL);
out:
	if (lg->lg_refused > 0)
		log_warnx("logger: %llu datagrams refused, %llu lines written",
		          (unsigned long long)lg->lg_refused, (unsigned long long)lg->lg_lines);
	elog_sink_free(lg->lg_sink);
	fd_close(&lg->lg_sock);
	free(lg);
	return r > 0 ? 0 : 1;
}

/* Everything but stdin/stdout/stderr and the two kept: the supervisor's
 * sockets, its sandbox's and its terminal are none of the logger's
 * business. */
static int
close_others(int a, int b)
{
	int lo = a < b ? a : b, hi = a < b ? b : a;

	if (lo > 3 && close_range(3, (unsigned)lo - 1, 0) != 0)
		return -1;
	if (hi > lo + 1 && close_range((unsigned)lo + 1, (unsigned)hi - 1, 0) != 0)
		return -1;
	return close_range((unsigned)hi + 1, ~0u, 0);
}

struct elog *
elog_logger_open(int logfd, char *err, size_t errlen)
{
	struct elog *log;
	pid_t pid;
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
		snprintf(err, errlen, "logger: socketpair: %s", strerror(errno));
		fd_close(&logfd);
		return NULL;
	}
	fflush(NULL); /* no buffered output written twice */
	pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "logger: fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		fd_close(&logfd);
		return NULL;
	}
	if (pid == 0) {
		int sock = sv[1], fd = logfd;

		close(sv[0]);
		log_set_ident("airlock[logger]");
		(void)prctl(PR_SET_NAME, "airlock-logger");
		/* Both above stderr, so closing the rest cannot hit them. */
		if ((sock < 3 && (sock = fcntl(sv[1], F_DUPFD_CLOEXEC, 3)) < 0) ||
		    (fd < 3 && (fd = fcntl(logfd, F_DUPFD_CLOEXEC, 3)) < 0) ||
		    close_others(sock, fd) != 0 || fdcaller_drop_stdio() != 0) {
			log_warn("logger: closing inherited descriptors");
			_exit(1);
		}
		/* The serving process decides when the run ends (a signal to
		 * the process group is its to handle, and task-end is still to
		 * be written); the logger then sees its input end and finishes,
		 * also when the serving process dies (no PDEATHSIG: lines
		 * already sent must still be written). */
		signal(SIGINT, SIG_IGN);
		signal(SIGHUP, SIG_IGN);
		signal(SIGQUIT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		/* Ctrl-Z at the terminal stops the supervisor's group, and a
		 * stopped logger would stall the log; nor may a warning to a
		 * terminal that airlock no longer has in front stop it. */
		signal(SIGTSTP, SIG_IGN);
		signal(SIGTTIN, SIG_IGN);
		signal(SIGTTOU, SIG_IGN);
		signal(SIGPIPE, SIG_IGN);
		/* _exit: no atexit handler of the parent's runs here. */
		_exit(elog_logger_serve(sock, fd, true));
	}
	close(sv[1]);
	fd_close(&logfd);
	if (fd_set_nonblock(sv[0], true) != 0) {
		snprintf(err, errlen, "logger: nonblocking socket: %s", strerror(errno));
		close(sv[0]);
		(void)kill(pid, SIGKILL);
		(void)waitpid(pid, NULL, 0);
		return NULL;
	}
	if ((log = elog_open_logger(sv[0], pid)) == NULL)
		snprintf(err, errlen, "logger: out of memory");
	return log;
}

void
elog_logger_reap(pid_t pid, unsigned max_ms)
{
	uint64_t deadline = now_ms() + max_ms;
	struct timespec tick = {0, 2 * 1000 * 1000};

	while (pid > 0) {
		pid_t r = waitpid(pid, NULL, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			return;
		if (now_ms() >= deadline) {
			(void)kill(pid, SIGKILL);
			(void)waitpid(pid, NULL, 0);
			return;
		}
		(void)nanosleep(&tick, NULL);
	}
}
