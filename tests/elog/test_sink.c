/* The log's output (elog/sink.c): line integrity on a file that fills up
 * (RLIMIT_FSIZE stands in for a full disk: the kernel cuts the write
 * short exactly as ENOSPC does), mending a file left in mid-line, and a
 * pipe whose reader is slow, stalls or lags too far behind: the writer
 * never blocks, keeps lines in order, and fails when it must. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "elog/elog.h"
#include "elog/sink.h"

static char *
tmpfile_path(void)
{
	static char path[64];
	int fd;

	snprintf(path, sizeof(path), "/tmp/elog-sink-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	return path;
}

static char *
slurp(const char *path, size_t *len)
{
	static char buf[1 << 16];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n >= 0);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

static void
line_of(char *out, size_t cap, int i, size_t len)
{
	/* len bytes: "i:xxxx...\n" */
	int n = snprintf(out, cap, "%d:", i);

	memset(out + n, 'x', len - (size_t)n - 1);
	out[len - 1] = '\n';
}

static void
test_file_short_write_cut_back(void **state)
{
	char *path = tmpfile_path();
	struct rlimit old, lim;
	struct elog_sink *s;
	char err[256], line[200], *data;
	size_t len;
	int i, fd;

	(void)state;
	/* Past the limit a write is cut short (then EFBIG), as on a full
	 * disk; SIGXFSZ is what the kernel sends otherwise. */
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 1000;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	s = elog_sink_new(fd, err, sizeof(err));
	assert_non_null(s);
	for (i = 0; i < 20; i++) {
		line_of(line, sizeof(line), i, 150);
		if (elog_sink_write(s, line, 150) < 0)
			break;
	}
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	/* 6 lines fit in 1000 bytes; the 7th was cut at byte 1000 and
	 * taken back. */
	assert_int_equal(i, 6);
	assert_true(elog_sink_failed(s));
	assert_non_null(strstr(elog_sink_error(s), "short write (100 of 150 bytes"));
	assert_non_null(strstr(elog_sink_error(s), "cut back to the last whole line"));
	/* Failed for good: the next line is not even attempted. */
	assert_int_equal(elog_sink_write(s, "{}\n", 3), -1);
	elog_sink_free(s);
	data = slurp(path, &len);
	assert_int_equal(len, 900);
	assert_int_equal(data[len - 1], '\n');
	assert_non_null(strstr(data, "5:xxx"));
	assert_null(strstr(data, "6:"));
	unlink(path);
}

static void
test_file_partial_tail_mended(void **state)
{
	/* An earlier writer left half a line: the next log's first line
	 * starts on a line of its own. */
	char *path = tmpfile_path();
	int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	struct elog *log;
	struct elog_event ev = {.kind = "dns", .host = "a.test", .port = -1, .verdict = "deny"};
	char *data;
	size_t len;

	(void)state;
	assert_int_equal(write(fd, "{\"ts\":\"2026-", 12), 12);
	close(fd);
	/* Write-only, as airlock run opens it. */
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	log = elog_open_fd(fd);
	assert_non_null(log);
	assert_int_equal(elog_event(log, &ev), 0);
	elog_free(log);
	data = slurp(path, &len);
	assert_memory_equal(data, "{\"ts\":\"2026-\n{\"ts\":", 19);
	assert_non_null(strstr(data, "\"host\":\"a.test\""));

	/* A file that ends in a newline is left as it is. */
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	log = elog_open_fd(fd);
	assert_int_equal(elog_event(log, &ev), 0);
	elog_free(log);
	data = slurp(path, &len);
	assert_null(strstr(data, "}\n\n"));
	unlink(path);
}

struct pipe_sink {
	int rd;
	struct elog_sink *s;
};

static void
pipe_sink_open(struct pipe_sink *ps, int size)
{
	int p[2];
	char err[128];

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_true(fcntl(p[1], F_SETPIPE_SZ, size) >= 0);
	assert_int_equal(fcntl(p[0], F_SETFL, O_NONBLOCK), 0);
	ps->rd = p[0];
	ps->s = elog_sink_new(p[1], err, sizeof(err));
	assert_non_null(ps->s);
}

static void
test_pipe_never_blocks_keeps_order(void **state)
{
	struct pipe_sink ps;
	static char got[1 << 18];
	size_t have = 0;
	char line[100];
	ssize_t n;

	(void)state;
	pipe_sink_open(&ps, 4096);
	/* 200 lines of 100 bytes into a 4 KiB pipe nobody reads yet: they
	 * wait in the queue, the writer returns at once. */
	for (int i = 0; i < 200; i++) {
		line_of(line, sizeof(line), i, sizeof(line));
		assert_int_equal(elog_sink_write(ps.s, line, sizeof(line)), 0);
	}
	assert_true(elog_sink_queued(ps.s) > 0);
	assert_false(elog_sink_failed(ps.s));
	/* The reader comes back: everything arrives, whole and in order. */
	while (have < 200 * sizeof(line)) {
		n = read(ps.rd, got + have, sizeof(got) - have);
		if (n > 0)
			have += (size_t)n;
		elog_sink_flush(ps.s);
	}
	assert_int_equal(elog_sink_queued(ps.s), 0);
	for (int i = 0; i < 200; i++) {
		line_of(line, sizeof(line), i, sizeof(line));
		assert_memory_equal(got + (size_t)i * sizeof(line), line, sizeof(line));
	}
	assert_int_equal(elog_sink_drain(ps.s, 100), 0);
	elog_sink_free(ps.s);
	close(ps.rd);
}

static void
test_pipe_stalled_reader_fails(void **state)
{
	struct pipe_sink ps;
	char line[512];
	uint64_t t0;

	(void)state;
	pipe_sink_open(&ps, 4096);
	line_of(line, sizeof(line), 0, sizeof(line));
	while (elog_sink_queued(ps.s) == 0)
		assert_int_equal(elog_sink_write(ps.s, line, sizeof(line)), 0);
	t0 = now_ms();
	assert_false(elog_sink_failed(ps.s));
	/* Not read for a second: as good as gone. */
	while (!elog_sink_failed(ps.s))
		usleep(20 * 1000);
	assert_true(now_ms() - t0 >= ELOG_SINK_STALL_MS - 20);
	assert_true(now_ms() - t0 < ELOG_SINK_STALL_MS + 500);
	assert_non_null(strstr(elog_sink_error(ps.s), "has taken nothing for 1000 ms"));
	assert_int_equal(elog_sink_write(ps.s, line, sizeof(line)), -1);
	elog_sink_free(ps.s);
	close(ps.rd);
}

static void
test_pipe_reader_behind_too_far(void **state)
{
	struct pipe_sink ps;
	static char line[60000];
	int i;

	(void)state;
	pipe_sink_open(&ps, 4096);
	line_of(line, sizeof(line), 0, sizeof(line));
	for (i = 0; i < 100; i++)
		if (elog_sink_write(ps.s, line, sizeof(line)) < 0)
			break;
	/* A MiB may wait, not more. */
	assert_int_equal(i, ELOG_SINK_QUEUE_MAX / (int)sizeof(line));
	assert_non_null(strstr(elog_sink_error(ps.s), "not keeping up"));
	elog_sink_free(ps.s);
	close(ps.rd);
}

static void
test_pipe_drain_bounded(void **state)
{
	struct pipe_sink ps;
	char line[512];
	uint64_t t0;

	(void)state;
	pipe_sink_open(&ps, 4096);
	line_of(line, sizeof(line), 0, sizeof(line));
	while (elog_sink_queued(ps.s) == 0)
		assert_int_equal(elog_sink_write(ps.s, line, sizeof(line)), 0);
	t0 = now_ms();
	assert_int_equal(elog_sink_drain(ps.s, 300), -1);
	assert_true(now_ms() - t0 < 600);
	assert_non_null(strstr(elog_sink_error(ps.s), "within 300 ms"));
	elog_sink_free(ps.s);
	close(ps.rd);
}

static void
test_pipe_reader_gone(void **state)
{
	struct pipe_sink ps;

	(void)state;
	signal(SIGPIPE, SIG_IGN);
	pipe_sink_open(&ps, 4096);
	close(ps.rd);
	assert_true(elog_sink_failed(ps.s));
	assert_non_null(strstr(elog_sink_error(ps.s), "reader has gone"));
	assert_int_equal(elog_sink_write(ps.s, "{}\n", 3), -1);
	elog_sink_free(ps.s);
}

static void
test_stdout_description_untouched(void **state)
{
	/* airlock proxy --log - on a pipe: the log gets its own description,
	 * made non-blocking; stdout's stays as the caller left it. */
	int p[2], saved = dup(STDOUT_FILENO), flags;
	char err[128], buf[256];
	struct elog *log;
	struct elog_event ev = {.kind = "dns", .host = "a.test", .port = -1, .verdict = "deny"};
	ssize_t n;

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fflush(stdout);
	assert_int_equal(dup2(p[1], STDOUT_FILENO), STDOUT_FILENO);
	log = elog_open("-", err, sizeof(err));
	flags = fcntl(STDOUT_FILENO, F_GETFL);
	assert_non_null(log);
	assert_int_equal(elog_event(log, &ev), 0);
	elog_free(log);
	dup2(saved, STDOUT_FILENO);
	close(saved);
	close(p[1]);
	assert_int_equal(flags & O_NONBLOCK, 0);
	n = read(p[0], buf, sizeof(buf) - 1);
	assert_true(n > 0);
	buf[n] = '\0';
	assert_non_null(strstr(buf, "\"host\":\"a.test\""));
	close(p[0]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_file_short_write_cut_back),
	        cmocka_unit_test(test_file_partial_tail_mended),
	        cmocka_unit_test(test_pipe_never_blocks_keeps_order),
	        cmocka_unit_test(test_pipe_stalled_reader_fails),
	        cmocka_unit_test(test_pipe_reader_behind_too_far),
	        cmocka_unit_test(test_pipe_drain_bounded),
	        cmocka_unit_test(test_pipe_reader_gone),
	        cmocka_unit_test(test_stdout_description_untouched),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
