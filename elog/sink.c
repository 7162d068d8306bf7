/* The egress log's output (sink.h): whole lines, never blocking, never a
 * partial line left for the next one to be glued to. */
#include "elog/sink.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

enum sink_type {
	SINK_FILE,   /* regular file: whole-line writes, cut back when short */
	SINK_STREAM, /* pipe, FIFO, terminal, other devices: O_NONBLOCK */
	SINK_SOCKET, /* send(MSG_DONTWAIT), the description left as it is */
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
};

static void sink_fail(struct elog_sink *s, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

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
	fd_close(&s->sk_fd);
	free(s->sk_q);
	free(s);
}

void
elog_sink_abandon(struct elog_sink *s)
{
	if (s != NULL)
		s->sk_saved_flags = -1;
	elog_sink_free(s);
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

static int
sink_enqueue(struct elog_sink *s, const char *data, size_t len)
{
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
	memcpy(s->sk_q + s->sk_qoff + s->sk_qlen, data, len);
	s->sk_qlen += len;
	return 0;
}

void
elog_sink_flush(struct elog_sink *s)
{
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
	return s->sk_failed ? -1 : 0;
}

int
elog_sink_fd(const struct elog_sink *s)
{
	return s->sk_fd;
}
