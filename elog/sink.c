/* The egress log's output (sink.h): whole lines, never blocking, never a
 * partial line left for the next one to be glued to. */
#include "elog/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "elog/logmsg.h"

enum sink_type {
	SINK_FILE,   /* regular file: whole-line writes, cut back when short */
	SINK_STREAM, /* pipe, FIFO, terminal, other devices: O_NONBLOCK */
	SINK_SOCKET, /* send(MSG_DONTWAIT), the description left as it is */
	SINK_LOGGER, /* the logger's socket: one framed datagram per line */
};

struct elog_sink {
	int sk_fd;
	enum sink_type sk_type;
	int sk_saved_flags; /* the fd's flags before O_NONBLOCK, or -1 */
	bool sk_failed;
	char sk_error[256];
	/* Bytes the reader had no room for: sk_q[sk_qoff .. sk_qoff + sk_qlen). */
	char *sk_q;
	size_t sk_qoff, sk_qlen;
	uint64_t sk_progress_ms; /* when the queue began, or last got shorter */
	/* SINK_LOGGER: the logger's pid until it is reaped (else 0); the
	 * queue then holds whole messages, header and body. */
	pid_t sk_pid;
	bool sk_done;   /* the logger said DONE: every line is written */
	bool sk_synced; /* the logger answered the last SYNC */
};

static void sink_fail(struct elog_sink *s, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
static void logger_reap(struct elog_sink *s, unsigned max_ms);

/* Mark the sink failed, keep the first reason, say it once on stderr. */
static void
sink_fail(struct elog_sink *s, const char *fmt, ...)
{
	va_list ap;

	if (s->sk_failed)
		return;
	s->sk_failed = true;
	va_start(ap, fmt);
	vsnprintf(s->sk_error, sizeof(s->sk_error), fmt, ap);
	va_end(ap);
	log_warnx("egress log: %s; log marked failed", s->sk_error);
}

static ssize_t
sink_raw_write(struct elog_sink *s, const char *buf, size_t len)
{
	ssize_t n;

	do {
		if (s->sk_type == SINK_SOCKET)
			n = send(s->sk_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = write(s->sk_fd, buf, len);
	} while (n < 0 && errno == EINTR);
	return n;
}

/* A file that does not end in a newline (an earlier writer was cut off
 * mid-line) gets one first, so that our first line is not glued to the
 * stray bytes: they stay one garbage line that readers skip. The fd may
 * be write-only; the last byte is read through a read-only reopen. */
static int
sink_mend_tail(struct elog_sink *s, const struct stat *st, char *err, size_t errlen)
{
	char path[64], c = '\n';
	int flags = fcntl(s->sk_fd, F_GETFL), rfd;
	off_t pos;

	pos = flags >= 0 && (flags & O_APPEND) != 0 ? st->st_size : lseek(s->sk_fd, 0, SEEK_CUR);
	if (pos <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->sk_fd);
	rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (rfd < 0)
		return 0; /* unreadable: nothing we can check */
	if (pread(rfd, &c, 1, pos - 1) != 1)
		c = '\n';
	close(rfd);
	if (c == '\n')
		return 0;
	if (sink_raw_write(s, "\n", 1) != 1) {
		snprintf(err, errlen,
		         "the file ends in a partial line (an earlier writer was cut off) and "
		         "cannot be mended: %s",
		         strerror(errno != 0 ? errno : EIO));
		return -1;
	}
	return 0;
}

struct elog_sink *
elog_sink_new(int fd, char *err, size_t errlen)
{
	struct elog_sink *s = calloc(1, sizeof(*s));
	struct stat st;

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		fd_close(&fd);
		return NULL;
	}
	s->sk_fd = fd;
	s->sk_saved_flags = -1;
	if (fstat(fd, &st) < 0) {
		snprintf(err, errlen, "fstat: %s", strerror(errno));
		goto fail;
	}
	if (S_ISREG(st.st_mode)) {
		s->sk_type = SINK_FILE;
		if (sink_mend_tail(s, &st, err, errlen) < 0)
			goto fail;
	} else if (S_ISSOCK(st.st_mode)) {
		s->sk_type = SINK_SOCKET;
	} else {
		int flags = fcntl(fd, F_GETFL);

		s->sk_type = SINK_STREAM;
		if (flags < 0 ||
		    ((flags & O_NONBLOCK) == 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)) {
			snprintf(err, errlen, "cannot make it non-blocking: %s", strerror(errno));
			goto fail;
		}
		if ((flags & O_NONBLOCK) == 0)
			s->sk_saved_flags = flags;
	}
	return s;
fail:
	elog_sink_free(s);
	return NULL;
}

void
elog_sink_free(struct elog_sink *s)
{
	if (s == NULL)
		return;
	if (s->sk_saved_flags >= 0)
		(void)fcntl(s->sk_fd, F_SETFL, s->sk_saved_flags);
	/* The logger sees its end close, writes what it holds and exits. */
	fd_close(&s->sk_fd);
	logger_reap(s, ELOG_LOGMSG_DRAIN_MS);
	free(s->sk_q);
	free(s);
}

void
elog_sink_abandon(struct elog_sink *s)
{
	if (s != NULL) {
		s->sk_saved_flags = -1;
		s->sk_pid = 0; /* another process writes to it still */
	}
	elog_sink_free(s);
}

pid_t
elog_sink_disown(struct elog_sink *s)
{
	pid_t pid = s != NULL ? s->sk_pid : 0;

	if (s != NULL)
		s->sk_pid = 0;
	return pid;
}

/* One line, one write(2). Short means the disk, a quota or a size limit
 * is full: the bytes that went out are cut off again, so the file ends
 * where the last whole line ended and whatever is appended next (by this
 * run: nothing, the sink has failed; by a later one) starts clean. */
static int
sink_write_file(struct elog_sink *s, const char *line, size_t len)
{
	ssize_t n = sink_raw_write(s, line, len);
	off_t end;

	if (n >= 0 && (size_t)n == len)
		return 0;
	if (n < 0) {
		sink_fail(s, "write failed: %s", strerror(errno));
		return -1;
	}
	/* The fd's offset is just past what went out, O_APPEND or not. */
	end = lseek(s->sk_fd, 0, SEEK_CUR);
	if (end >= n && ftruncate(s->sk_fd, end - n) == 0)
		sink_fail(s,
		          "short write (%zd of %zu bytes: the disk or a size limit is full); cut "
		          "back to the last whole line",
		          n, len);
	else
		sink_fail(s,
		          "short write (%zd of %zu bytes), and cutting it back failed: %s; the "
		          "file ends in a partial line",
		          n, len, strerror(errno));
	return -1;
}

/* Queue a[0..alen) and b[0..blen) (b may be NULL), both or neither. */
static int
sink_enqueue2(struct elog_sink *s, const void *a, size_t alen, const void *b, size_t blen)
{
	size_t len = alen + blen;

	if (s->sk_q == NULL) {
		s->sk_q = malloc(ELOG_SINK_QUEUE_MAX);
		if (s->sk_q == NULL) {
			sink_fail(s, "out of memory for the reader's queue");
			return -1;
		}
	}
	if (len > ELOG_SINK_QUEUE_MAX - s->sk_qlen) {
		sink_fail(s, "the log's reader is not keeping up (%zu bytes wait, at most %d)",
		          s->sk_qlen, ELOG_SINK_QUEUE_MAX);
		return -1;
	}
	if (s->sk_qlen == 0) {
		s->sk_qoff = 0;
		s->sk_progress_ms = now_ms();
	} else if (len > ELOG_SINK_QUEUE_MAX - s->sk_qoff - s->sk_qlen) {
		memmove(s->sk_q, s->sk_q + s->sk_qoff, s->sk_qlen);
		s->sk_qoff = 0;
	}
	memcpy(s->sk_q + s->sk_qoff + s->sk_qlen, a, alen);
	if (blen > 0)
		memcpy(s->sk_q + s->sk_qoff + s->sk_qlen + alen, b, blen);
	s->sk_qlen += len;
	return 0;
}

static int
sink_enqueue(struct elog_sink *s, const char *data, size_t len)
{
	return sink_enqueue2(s, data, len, NULL, 0);
}

/* ---- the logger's socket ---------------------------------------------- */

/* Reap the logger: at once when it has exited, else within max_ms, then
 * killed (a logger that will not exit has nothing more to give). */
static void
logger_reap(struct elog_sink *s, unsigned max_ms)
{
	uint64_t deadline = now_ms() + max_ms;
	struct timespec tick = {0, 2 * 1000 * 1000};

	while (s->sk_pid > 0) {
		pid_t r = waitpid(s->sk_pid, NULL, WNOHANG);

		if (r == s->sk_pid || (r < 0 && errno != EINTR)) {
			s->sk_pid = 0;
			break;
		}
		if (now_ms() >= deadline) {
			(void)kill(s->sk_pid, SIGKILL);
			(void)waitpid(s->sk_pid, NULL, 0);
			s->sk_pid = 0;
			break;
		}
		(void)nanosleep(&tick, NULL);
	}
}

/* What the logger said, when it said something: FAILED (its reason is
 * the sink's), DONE or SYNC. Returns true when a message was read (the
 * sink may then be failed), false when nothing waits or the logger's end
 * was read (the sink is then failed, unless DONE came before). */
static bool
logger_status(struct elog_sink *s)
{
	char buf[sizeof(struct elog_logmsg_hdr) + ELOG_LOGMSG_REASON_MAX];
	struct elog_logmsg m;
	ssize_t n;

	/* ECONNRESET: the logger exited with a message of ours unread; the
	 * error comes once, before what it said last (FAILED). */
	do
		n = recv(s->sk_fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
	while (n < 0 && (errno == EINTR || errno == ECONNRESET));
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return false;
	if (n <= 0) {
		/* Its end: expected after DONE, the log's failure before. */
		if (!s->sk_done)
			sink_fail(s, "the logger has gone (killed, or it crashed): the lines from "
			             "here on would be lost");
		return false;
	}
	if (elog_logmsg_parse_status(buf, (size_t)n, &m) != ELOG_LOGMSG_OK)
		sink_fail(s, "the logger sent a malformed message");
	else if (m.type == ELOG_LOGMSG_FAILED)
		sink_fail(s, "%.*s", (int)m.len, m.body);
	else if (m.type == ELOG_LOGMSG_SYNC)
		s->sk_synced = true;
	else
		s->sk_done = true;
	return true;
}

static ssize_t
logger_send(struct elog_sink *s, const void *buf, size_t len)
{
	ssize_t n;

	do
		n = send(s->sk_fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n;
}

/* A send that failed for good: the logger's reason when it left one. */
static void
logger_send_failed(struct elog_sink *s)
{
	int e = errno;

	if (e == EPIPE || e == ECONNRESET || e == ENOTCONN) {
		while (!s->sk_failed && logger_status(s))
			;
		sink_fail(s, "the logger has gone (killed, or it crashed): the lines from here "
		             "on would be lost");
	} else
		sink_fail(s, "sending a line to the logger failed: %s", strerror(e));
}

/* Queued messages go out whole, one datagram each, in order. */
static void
logger_flush(struct elog_sink *s)
{
	while (!s->sk_failed && s->sk_qlen > 0) {
		struct elog_logmsg_hdr h;
		size_t len;
		ssize_t n;

		memcpy(&h, s->sk_q + s->sk_qoff, sizeof(h));
		len = sizeof(h) + h.lm_len;
		n = logger_send(s, s->sk_q + s->sk_qoff, len);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			logger_send_failed(s);
			return;
		}
		s->sk_qoff += len;
		s->sk_qlen -= len;
		s->sk_progress_ms = now_ms();
	}
}

static int
logger_write(struct elog_sink *s, const char *line, size_t len)
{
	struct elog_logmsg_hdr h = {.lm_type = ELOG_LOGMSG_LINE, .lm_len = (uint32_t)len};
	struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)line, len}};
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
	ssize_t n;

	if (len > ELOG_LOGMSG_BODY_MAX) {
		sink_fail(s, "a line of %zu bytes is longer than the logger takes (%zu)", len,
		          (size_t)ELOG_LOGMSG_BODY_MAX);
		return -1;
	}
	/* Lines stay in order: behind what already waits. */
	if (s->sk_qlen > 0)
		return sink_enqueue2(s, &h, sizeof(h), line, len);
	do
		n = sendmsg(s->sk_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return 0;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		return sink_enqueue2(s, &h, sizeof(h), line, len);
	logger_send_failed(s);
	return -1;
}

/* The end of the run: every line is sent; the logger is told (its end
 * reads end-of-file), writes what it still holds, says DONE or FAILED and
 * exits. The log is complete only with DONE. */
static void
logger_finish(struct elog_sink *s)
{
	uint64_t deadline = now_ms() + ELOG_LOGMSG_DRAIN_MS + 1000;

	if (!s->sk_failed && shutdown(s->sk_fd, SHUT_WR) != 0)
		sink_fail(s, "ending the logger's input: %s", strerror(errno));
	while (!s->sk_failed && !s->sk_done) {
		struct pollfd pfd = {.fd = s->sk_fd, .events = POLLIN};
		uint64_t now = now_ms();

		if (now >= deadline) {
			sink_fail(s, "the logger did not finish writing within %d ms",
			          ELOG_LOGMSG_DRAIN_MS + 1000);
			break;
		}
		if (poll(&pfd, 1, (int)(deadline - now)) == 1)
			(void)logger_status(s);
	}
	/* It exits right after its last word; killed when it does not. */
	logger_reap(s, 1000);
}

struct elog_sink *
elog_sink_new_logger(int fd, pid_t pid, char *err, size_t errlen)
{
	struct elog_sink *s = calloc(1, sizeof(*s));

	if (s == NULL) {
		snprintf(err, errlen, "out of memory");
		fd_close(&fd);
		if (pid > 0) {
			(void)kill(pid, SIGKILL);
			(void)waitpid(pid, NULL, 0);
		}
		return NULL;
	}
	s->sk_fd = fd;
	s->sk_type = SINK_LOGGER;
	s->sk_saved_flags = -1;
	s->sk_pid = pid;
	return s;
}

/* ---- queue and writes -------------------------------------------------- */

void
elog_sink_flush(struct elog_sink *s)
{
	if (s->sk_type == SINK_LOGGER) {
		logger_flush(s);
		return;
	}
	while (!s->sk_failed && s->sk_qlen > 0) {
		ssize_t n = sink_raw_write(s, s->sk_q + s->sk_qoff, s->sk_qlen);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			sink_fail(s, "write failed: %s", n < 0 ? strerror(errno) : "no progress");
			return;
		}
		s->sk_qoff += (size_t)n;
		s->sk_qlen -= (size_t)n;
		s->sk_progress_ms = now_ms();
	}
}

/* After sink_check_stall, which flushed what it could. */
static int
sink_write_stream(struct elog_sink *s, const char *line, size_t len)
{
	ssize_t n;

	/* Lines stay in order: behind what already waits. */
	if (s->sk_qlen > 0)
		return sink_enqueue(s, line, len);
	n = sink_raw_write(s, line, len);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		n = 0;
	if (n < 0) {
		sink_fail(s, "write failed: %s", strerror(errno));
		return -1;
	}
	if ((size_t)n == len)
		return 0;
	return sink_enqueue(s, line + n, len - (size_t)n);
}

/* A reader that stays but reads nothing is no better than one that left:
 * nothing it does not read is recorded anywhere. */
static void
sink_check_stall(struct elog_sink *s)
{
	if (s->sk_qlen == 0)
		return;
	elog_sink_flush(s);
	if (s->sk_qlen > 0 && now_ms() - s->sk_progress_ms >= ELOG_SINK_STALL_MS)
		sink_fail(s,
		          "the log's reader has taken nothing for %d ms with %zu bytes waiting; "
		          "treated as gone",
		          ELOG_SINK_STALL_MS, s->sk_qlen);
}

int
elog_sink_write(struct elog_sink *s, const char *line, size_t len)
{
	if (s->sk_failed)
		return -1;
	if (s->sk_type == SINK_FILE)
		return sink_write_file(s, line, len);
	if (s->sk_type == SINK_LOGGER) {
		sink_check_stall(s);
		return s->sk_failed ? -1 : logger_write(s, line, len);
	}
	/* No poll(2) per line: a reader that has gone shows in the write
	 * (EPIPE); one that stalls, here. */
	sink_check_stall(s);
	if (s->sk_failed)
		return -1;
	return sink_write_stream(s, line, len);
}

size_t
elog_sink_queued(const struct elog_sink *s)
{
	return s->sk_qlen;
}

bool
elog_sink_failed(struct elog_sink *s)
{
	struct pollfd pfd = {.fd = s->sk_fd, .events = 0};

	if (s->sk_failed || s->sk_type == SINK_FILE)
		return s->sk_failed;
	if (s->sk_type == SINK_LOGGER) {
		/* The logger reports a failed log (FAILED) and exits; one that
		 * was killed shows as the socket's hang-up. */
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 0) == 1 && pfd.revents != 0)
			while (!s->sk_failed && logger_status(s) && !s->sk_done)
				;
		sink_check_stall(s);
		return s->sk_failed;
	}
	/* Lines are written when a connection ends, so a reader that has gone
	 * would only be found out after the next connection was let through
	 * unrecorded: a pipe or socket whose reader is gone reports
	 * POLLERR/POLLHUP at once. */
	if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0) {
		sink_fail(s, "the log's reader has gone");
		return true;
	}
	sink_check_stall(s);
	return s->sk_failed;
}

bool
elog_sink_dead(const struct elog_sink *s)
{
	return s->sk_failed;
}

const char *
elog_sink_error(const struct elog_sink *s)
{
	return s->sk_error;
}

int
elog_sink_drain(struct elog_sink *s, unsigned max_ms)
{
	uint64_t deadline = now_ms() + max_ms;

	while (!elog_sink_failed(s) && s->sk_qlen > 0) {
		struct pollfd pfd = {.fd = s->sk_fd, .events = POLLOUT};
		uint64_t now = now_ms(), until = s->sk_progress_ms + ELOG_SINK_STALL_MS;

		if (now >= deadline) {
			sink_fail(s,
			          "the log's reader did not take the last %zu bytes within %u ms",
			          s->sk_qlen, max_ms);
			break;
		}
		if (until > deadline)
			until = deadline;
		(void)poll(&pfd, 1, until > now ? (int)(until - now) : 1);
	}
	if (s->sk_type == SINK_LOGGER)
		logger_finish(s);
	return s->sk_failed ? -1 : 0;
}

int
elog_sink_sync(struct elog_sink *s, unsigned max_ms)
{
	struct elog_logmsg_hdr h = {.lm_type = ELOG_LOGMSG_SYNC, .lm_len = 0};
	uint64_t deadline = now_ms() + max_ms;

	if (s->sk_type != SINK_LOGGER || s->sk_failed)
		return s->sk_failed ? -1 : 0;
	s->sk_synced = false;
	/* Behind the queued lines, like any message. */
	if (s->sk_qlen == 0) {
		ssize_t n = logger_send(s, &h, sizeof(h));

		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			logger_send_failed(s);
			return -1;
		}
		if (n < 0 && sink_enqueue2(s, &h, sizeof(h), NULL, 0) < 0)
			return -1;
	} else if (sink_enqueue2(s, &h, sizeof(h), NULL, 0) < 0)
		return -1;
	while (!s->sk_failed && !s->sk_synced) {
		struct pollfd pfd = {.fd = s->sk_fd, .events = POLLIN};
		uint64_t now = now_ms();

		if (now >= deadline) {
			sink_fail(s, "the logger did not confirm its lines within %u ms", max_ms);
			break;
		}
		logger_flush(s);
		if (s->sk_qlen > 0)
			pfd.events |= POLLOUT;
		if (poll(&pfd, 1, (int)(deadline - now)) == 1 && (pfd.revents & ~POLLOUT) != 0)
			(void)logger_status(s);
	}
	return s->sk_failed ? -1 : 0;
}

int
elog_sink_fd(const struct elog_sink *s)
{
	return s->sk_fd;
}
