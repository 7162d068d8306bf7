/* The logger (elog/logger.c), driven through its socket as a compromised
 * sender would: forged, zero-length, cut, over-long and mislabelled
 * datagrams are refused (named on stderr, not written) and it stays up,
 * sealing the honest lines into one unbroken chain; a flood of garbage
 * changes nothing. And from the writer's side (elog_logger_open): a run's
 * log verifies, a logger that cannot write fails the log with its reason,
 * and a killed logger fails it too. The logger runs confined in each test,
 * under the filter airlock installs. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "elog/chain.h"
#include "elog/elog.h"
#include "elog/logger.h"
#include "elog/logmsg.h"
#include "elog/sink.h"
#include "elog/verify.h"

struct child {
	pid_t pid;
	int sock; /* the sender's end, blocking */
	char log[64], err[64];
};

static void
tmp_path(char *out, size_t len, const char *what)
{
	int fd;

	snprintf(out, len, "/tmp/elog-logger-%s-XXXXXX", what);
	fd = mkstemp(out);
	assert_true(fd >= 0);
	close(fd);
}

static char *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	fclose(f);
	if (len != NULL)
		*len = n;
	return buf;
}

/* A confined logger on a fresh file, its stderr in a file of its own. */
static void
child_start(struct child *c)
{
	int sv[2];

	tmp_path(c->log, sizeof(c->log), "log");
	tmp_path(c->err, sizeof(c->err), "err");
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		int logfd = open(c->log, O_WRONLY | O_APPEND | O_CLOEXEC);
		int errfd = open(c->err, O_WRONLY | O_APPEND | O_CLOEXEC);

		close(sv[0]);
		if (logfd < 0 || errfd < 0 || dup2(errfd, STDERR_FILENO) < 0)
			_exit(99);
		_exit(elog_logger_serve(sv[1], logfd, true));
	}
	close(sv[1]);
	c->sock = sv[0];
}

static void
send_msg(int fd, uint32_t type, uint32_t lm_len, const void *body, size_t len)
{
	static char buf[ELOG_LOGMSG_MAX + 256];
	struct elog_logmsg_hdr h = {.lm_type = type, .lm_len = lm_len};

	assert_true(sizeof(h) + len <= sizeof(buf));
	memcpy(buf, &h, sizeof(h));
	if (len > 0)
		memcpy(buf + sizeof(h), body, len);
	assert_int_equal(send(fd, buf, sizeof(h) + len, MSG_NOSIGNAL), (ssize_t)(sizeof(h) + len));
}

static void
send_line(int fd, const char *body)
{
	send_msg(fd, ELOG_LOGMSG_LINE, (uint32_t)strlen(body), body, strlen(body));
}

/* The logger's next word, within 5 s. */
static enum elog_logmsg_type
expect_status(int fd)
{
	char buf[512];
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	struct elog_logmsg m;
	ssize_t n;

	assert_int_equal(poll(&pfd, 1, 5000), 1);
	n = recv(fd, buf, sizeof(buf), 0);
	assert_true(n > 0);
	assert_int_equal(elog_logmsg_parse_status(buf, (size_t)n, &m), ELOG_LOGMSG_OK);
	return m.type;
}

static int
child_end(struct child *c)
{
	int st;

	assert_int_equal(shutdown(c->sock, SHUT_WR), 0);
	assert_int_equal(expect_status(c->sock), ELOG_LOGMSG_DONE);
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid);
	close(c->sock);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static size_t
count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* line (no newline) == body + the chain's fields for seq, after prev. */
static void
expect_sealed(const char *line, size_t len, const char *body, uint64_t seq, const char *prev_hex)
{
	char want[512];
	int n = snprintf(want, sizeof(want), "%s,\"seq\":%llu,\"prev\":\"%s\"}", body,
	                 (unsigned long long)seq, prev_hex);

	assert_int_equal(len, (size_t)n);
	assert_memory_equal(line, want, len);
}

static void
test_forged_datagrams_refused(void **state)
{
	static char big[ELOG_LOGMSG_MAX + 16];
	const char *one = "{\"ts\":\"2026-01-01T00:00:00.000Z\",\"kind\":\"task-start\"";
	const char *two = "{\"ts\":\"2026-01-01T00:00:01.000Z\",\"kind\":\"task-end\"";
	unsigned char h[ELOG_SHA256_LEN];
	char hex[ELOG_SHA256_HEX + 1];
	struct child c;
	char *text, *log, *err, *nl;
	size_t len;
	(void)state;

	child_start(&c);
	send_line(c.sock, one);
	/* zero-length, cut header, header lying about the length both ways */
	assert_int_equal(send(c.sock, "", 0, MSG_NOSIGNAL), 0);
	assert_int_equal(send(c.sock, "abc", 3, MSG_NOSIGNAL), 3);
	send_msg(c.sock, ELOG_LOGMSG_LINE, 100, "{\"a\":1", 6);
	send_msg(c.sock, ELOG_LOGMSG_LINE, 2, "{\"a\":1", 6);
	/* a type the logger does not take: a status of its own, a made-up one */
	send_msg(c.sock, ELOG_LOGMSG_DONE, 0, NULL, 0);
	send_msg(c.sock, 99, 6, "{\"a\":1", 6);
	/* an empty line, not an object, a forged second line, DEL */
	send_msg(c.sock, ELOG_LOGMSG_LINE, 0, NULL, 0);
	send_line(c.sock, "\"a\":1");
	send_line(c.sock, "{\"a\":1}\n{\"kind\":\"task-start\",\"seq\":0");
	send_line(c.sock, "{\"a\":\"\x7f\"");
	/* a chain of the sender's own: its seq or prev would be the one a
	 * reader takes (the first of duplicate keys) */
	send_line(c.sock, "{\"kind\":\"x\",\"seq\":7");
	send_line(c.sock, "{\"kind\":\"x\",\"prev\":\"00\"");
	/* one byte over the longest line, and far over (the header honest) */
	memset(big, 'a', sizeof(big));
	big[0] = '{';
	send_msg(c.sock, ELOG_LOGMSG_LINE, ELOG_LOGMSG_BODY_MAX + 1, big, ELOG_LOGMSG_BODY_MAX + 1);
	send_msg(c.sock, ELOG_LOGMSG_LINE, sizeof(big), big, sizeof(big));
	/* the longest line it takes */
	send_msg(c.sock, ELOG_LOGMSG_LINE, ELOG_LOGMSG_BODY_MAX, big, ELOG_LOGMSG_BODY_MAX);
	/* still up: it answers, and seals the next line after the others */
	send_msg(c.sock, ELOG_LOGMSG_SYNC, 0, NULL, 0);
	assert_int_equal(expect_status(c.sock), ELOG_LOGMSG_SYNC);
	send_line(c.sock, two);
	assert_int_equal(child_end(&c), 0);

	log = text = slurp(c.log, &len);
	assert_int_equal(count(log, "\n"), 3);
	nl = strchr(log, '\n');
	expect_sealed(log, (size_t)(nl - log), one, 0, ELOG_CHAIN_GENESIS);
	assert_int_equal(elog_sha256(log, (size_t)(nl - log), h), 0);
	elog_sha256_hex(h, hex);
	/* line 2, the longest: body and the widest fields fit ELOG_LINE_MAX */
	log = nl + 1;
	nl = strchr(log, '\n');
	assert_true((size_t)(nl - log) + 1 <= ELOG_LINE_MAX);
	assert_int_equal(elog_sha256(log, (size_t)(nl - log), h), 0);
	assert_non_null(strstr(log, hex));
	elog_sha256_hex(h, hex);
	log = nl + 1;
	nl = strchr(log, '\n');
	expect_sealed(log, (size_t)(nl - log), two, 2, hex);

	err = slurp(c.err, NULL);
	assert_int_equal(count(err, "refused a datagram"), 14);
	assert_int_equal(count(err, "shorter than its header"), 2);
	assert_int_equal(count(err, "its length field is not its length"), 2);
	assert_int_equal(count(err, "a message type not taken here"), 2);
	assert_int_equal(count(err, "an empty line"), 1);
	assert_int_equal(count(err, "not a JSON object"), 1);
	assert_int_equal(count(err, "raw control byte"), 2);
	assert_int_equal(count(err, "longer than the longest line"), 2);
	assert_non_null(strstr(err, "14 datagrams refused, 3 lines written"));
	free(text);
	free(err);
	unlink(c.log);
	unlink(c.err);
}

/* 20000 datagrams of garbage, then one line: written, chained, and the
 * warnings stop at ELOG_LOGGER_WARN_MAX. */
static void
test_flood_of_garbage(void **state)
{
	const char *one = "{\"ts\":\"2026-01-01T00:00:00.000Z\",\"kind\":\"dns\"";
	char junk[300];
	struct child c;
	uint32_t x = 12345;
	char *log, *err;
	(void)state;

	child_start(&c);
	for (int i = 0; i < 20000; i++) {
		size_t n = 1 + (x % sizeof(junk));

		for (size_t k = 0; k < n; k++) {
			x = x * 1103515245u + 12345u;
			junk[k] = (char)(x >> 16);
		}
		/* a plausible header on half of them */
		if (i % 2 == 0 && n >= 8) {
			struct elog_logmsg_hdr h = {.lm_type = ELOG_LOGMSG_LINE,
			                            .lm_len = (uint32_t)(n - 8 + (i % 3))};
			memcpy(junk, &h, sizeof(h));
			junk[8 % n] = (char)(i % 4 == 0 ? '{' : junk[8 % n]);
			junk[n - 1] = '\n'; /* garbage, even where the rest is not */
		}
		assert_int_equal(send(c.sock, junk, n, MSG_NOSIGNAL), (ssize_t)n);
	}
	send_line(c.sock, one);
	assert_int_equal(child_end(&c), 0);
	log = slurp(c.log, NULL);
	assert_int_equal(count(log, "\n"), 1);
	expect_sealed(log, strlen(log) - 1, one, 0, ELOG_CHAIN_GENESIS);
	err = slurp(c.err, NULL);
	assert_int_equal(count(err, "refused a datagram"), ELOG_LOGGER_WARN_MAX);
	assert_non_null(strstr(err, "datagrams refused, 1 lines written"));
	free(log);
	free(err);
	unlink(c.log);
	unlink(c.err);
}

static const struct elog_event ev_allow = {.kind = "connect",
                                           .host = "pypi.org",
                                           .ip = "192.0.2.10",
                                           .port = 443,
                                           .verdict = "allow",
                                           .rule = "p.yaml:3",
                                           .bytes_up = 10};

static struct elog *
open_logger(const char *path)
{
	char err[256];
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	struct elog *log;

	assert_true(fd >= 0);
	log = elog_logger_open(fd, err, sizeof(err));
	assert_non_null(log);
	elog_set_task(log, "t1");
	return log;
}

static const char *start_argv[] = {"curl", "https://pypi.org/"};
static const struct elog_task_start ts = {.policy = "pypi",
                                          .policy_sha256 = "ab12",
                                          .mode = "enforce",
                                          .argv = start_argv,
                                          .argc = 2,
                                          .selftest = "pass"};

/* The writer's side: a run through the logger verifies as one chain. */
static void
test_run_verifies(void **state)
{
	struct elog_task_end te = {.exit_status = 0, .duration_ms = 5};
	char path[64], *text;
	char *files[] = {path};
	struct elog *log;
	FILE *devnull = fopen("/dev/null", "w");
	(void)state;

	tmp_path(path, sizeof(path), "run");
	log = open_logger(path);
	assert_int_equal(elog_task_start(log, &ts), 0);
	for (int i = 0; i < 500; i++)
		assert_int_equal(elog_event(log, &ev_allow), 0);
	elog_flush(log);
	elog_totals(log, &te);
	assert_int_equal(elog_task_end(log, &te), 0);
	assert_int_equal(elog_drain(log, 5000), 0);
	assert_false(elog_failed(log));
	elog_free(log);
	assert_int_equal(elog_verify_files(files, 1, devnull), ELOG_VERIFY_OK);
	text = slurp(path, NULL);
	assert_int_equal(count(text, "\n"), 502);
	free(text);
	fclose(devnull);
	unlink(path);
}

/* A log the logger cannot write fails at task-start, with its reason. */
static void
test_unwritable_log_fails_at_start(void **state)
{
	struct elog *log = open_logger("/dev/full");
	(void)state;

	assert_int_equal(elog_task_start(log, &ts), -1);
	assert_true(elog_failed(log));
	assert_non_null(strstr(elog_error(log), "No space left on device"));
	elog_free(log);
}

/* A killed logger fails the log: nothing more is let through unrecorded. */
static void
test_killed_logger_fails_log(void **state)
{
	struct child c;
	struct elog *log;
	struct pollfd pfd;
	(void)state;

	child_start(&c);
	assert_int_equal(fd_set_nonblock(c.sock, true), 0);
	log = elog_open_logger(c.sock, c.pid);
	assert_non_null(log);
	assert_int_equal(elog_task_start(log, &ts), 0);
	assert_false(elog_failed(log));
	assert_int_equal(kill(c.pid, SIGKILL), 0);
	pfd = (struct pollfd){.fd = c.sock, .events = POLLIN};
	assert_int_equal(poll(&pfd, 1, 5000), 1);
	assert_true(elog_failed(log));
	assert_non_null(strstr(elog_error(log), "the logger has gone"));
	assert_int_equal(elog_event(log, &ev_allow), -1);
	assert_int_equal(elog_drain(log, 1000), -1);
	elog_free(log); /* reaps it */
	assert_int_equal(waitpid(c.pid, NULL, WNOHANG), -1);
	unlink(c.log);
	unlink(c.err);
}

/* A logger that stops taking lines (SIGSTOP) is a stalled reader: what it
 * has no room for waits in the writer's queue, in order, and after
 * ELOG_SINK_STALL_MS the log fails; nothing is dropped unseen. */
static void
test_stopped_logger_fails_log(void **state)
{
	struct child c;
	struct elog *log;
	uint64_t t0, elapsed;
	int rc = 0, n = 0;
	(void)state;

	child_start(&c);
	assert_int_equal(fd_set_nonblock(c.sock, true), 0);
	log = elog_open_logger(c.sock, c.pid);
	assert_non_null(log);
	assert_int_equal(elog_task_start(log, &ts), 0);
	assert_int_equal(kill(c.pid, SIGSTOP), 0);
	/* Slower than the queue's 1 MiB a second, so the stall rule, not
	 * the queue's bound, ends it (both fail the log). */
	t0 = now_ms();
	while (rc == 0 && now_ms() - t0 < 5000) {
		rc = elog_event(log, &ev_allow);
		if (++n % 16 == 0)
			usleep(10 * 1000);
	}
	elapsed = now_ms() - t0;
	/* Killed before any check can fail: a stopped child would stay. */
	assert_int_equal(kill(c.pid, SIGKILL), 0);
	assert_int_equal(rc, -1);
	assert_true(elog_failed(log));
	assert_true(elapsed >= ELOG_SINK_STALL_MS);
	assert_non_null(strstr(elog_error(log), "taken nothing"));
	elog_free(log);
	unlink(c.log);
	unlink(c.err);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_forged_datagrams_refused),
	        cmocka_unit_test(test_flood_of_garbage),
	        cmocka_unit_test(test_run_verifies),
	        cmocka_unit_test(test_unwritable_log_fails_at_start),
	        cmocka_unit_test(test_killed_logger_fails_log),
	        cmocka_unit_test(test_stopped_logger_fails_log),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
