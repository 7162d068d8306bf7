/* The egress log writer: field order, escaping, capping, fail-closed. */
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
#include <unistd.h>

#include <cmocka.h>

#include "config.h"
#include "elog/buf.h"
#include "elog/caps.h"
#include "elog/json.h"
#include "elog/elog.h"

/* Every line ends in the hash chain's fields (their values: test_chain.c):
 * check their shape and cut them off, so the lines compare with what the
 * fields before them should be. */
static void
unchain(char *text)
{
	static const char seq[] = ",\"seq\":", prev[] = ",\"prev\":\"";
	char *line = text, *nl;

	while ((nl = strchr(line, '\n')) != NULL) {
		char *end = nl - 1, *p;

		/* ...,"seq":N,"prev":"<64 hex>"}\n */
		assert_true(end - line > 80);
		assert_int_equal(end[0], '}');
		assert_int_equal(end[-1], '"');
		p = end - 1 - 64;
		assert_int_equal(strspn(p, "0123456789abcdef"), 64);
		p -= strlen(prev);
		assert_memory_equal(p, prev, strlen(prev));
		while (p > line && p[-1] >= '0' && p[-1] <= '9')
			p--;
		p -= strlen(seq);
		assert_memory_equal(p, seq, strlen(seq));
		memmove(p, end, strlen(end) + 1);
		line = p + 2;
	}
}

/* Read everything written to the pipe so far, the chain's fields cut off. */
static char *
drain(int fd)
{
	static char out[2 * ELOG_LINE_MAX];
	ssize_t n = read(fd, out, sizeof(out) - 1);

	assert_true(n >= 0);
	out[n] = '\0';
	unchain(out);
	return out;
}

struct pipelog {
	int rd;
	struct elog *log;
};

static void
pipelog_open(struct pipelog *pl)
{
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	/* Big enough for the longest line, so write() never blocks here. */
	fcntl(p[1], F_SETPIPE_SZ, 4 * ELOG_LINE_MAX);
	pl->rd = p[0];
	pl->log = elog_open_fd(p[1]);
	assert_non_null(pl->log);
}

static void
pipelog_close(struct pipelog *pl)
{
	elog_free(pl->log);
	close(pl->rd);
}

/* The ts field is the only one that varies: check its shape and return
 * the line from the field after it. */
static const char *
skip_ts(const char *line)
{
	/* {"ts":"2026-11-30T10:24:48.123Z", */
	assert_memory_equal(line, "{\"ts\":\"", 7);
	assert_true(strlen(line) > 7 + 24 + 2);
	const char *t = line + 7;
	for (int i = 0; i < 24; i++) {
		char c = t[i];
		if (i == 4 || i == 7)
			assert_int_equal(c, '-');
		else if (i == 10)
			assert_int_equal(c, 'T');
		else if (i == 13 || i == 16)
			assert_int_equal(c, ':');
		else if (i == 19)
			assert_int_equal(c, '.');
		else if (i == 23)
			assert_int_equal(c, 'Z');
		else
			assert_true(c >= '0' && c <= '9');
	}
	assert_int_equal(t[24], '"');
	return t + 25;
}

static void
test_event_field_order(void **state)
{
	struct pipelog pl;
	const char *answers[] = {"192.0.2.10", "2001:db8::10"};
	struct elog_event ev = {
	        .kind = "dns",
	        .host = "pypi.org",
	        .port = -1,
	        .verdict = "allow",
	        .rule = "p.yaml:4",
	        .qtype = "A",
	        .rcode = "NOERROR",
	        .answers = answers,
	        .n_answers = 2,
	        .duration_ms = 3,
	};

	pipelog_open(&pl);
	elog_set_task(pl.log, "t-1");
	assert_int_equal(elog_event(pl.log, &ev), 0);
	assert_string_equal(
	        skip_ts(drain(pl.rd)),
	        ",\"task\":\"t-1\",\"kind\":\"dns\",\"host\":\"pypi.org\","
	        "\"verdict\":\"allow\",\"rule\":\"p.yaml:4\",\"bytes_up\":0,"
	        "\"bytes_down\":0,\"duration_ms\":3,\"qtype\":\"A\","
	        "\"rcode\":\"NOERROR\",\"answers\":[\"192.0.2.10\",\"2001:db8::10\"]}\n");

	struct elog_event c = {
	        .kind = "tls",
	        .host = "evil.test",
	        .ip = "203.0.113.66",
	        .port = 443,
	        .verdict = "deny",
	        .reason = "no match",
	        .bytes_up = 517,
	        .sni = "evil.test",
	        .orig_dst = "203.0.113.66:443",
	};
	assert_int_equal(elog_event(pl.log, &c), 0);
	assert_string_equal(
	        skip_ts(drain(pl.rd)),
	        ",\"task\":\"t-1\",\"kind\":\"tls\",\"host\":\"evil.test\","
	        "\"ip\":\"203.0.113.66\",\"port\":443,\"verdict\":\"deny\","
	        "\"reason\":\"no match\",\"bytes_up\":517,\"bytes_down\":0,"
	        "\"duration_ms\":0,\"sni\":\"evil.test\",\"orig_dst\":\"203.0.113.66:443\"}\n");
	pipelog_close(&pl);
}

static void
test_escaping(void **state)
{
	struct pipelog pl;
	/* quote, backslash, newline, ESC, DEL, a valid 2-byte and 4-byte
	 * sequence, a lone continuation byte, an overlong '/', a surrogate. */
	struct elog_event ev = {
	        .kind = "http",
	        .port = 80,
	        .verdict = "deny",
	        .host = "a\"b\\c\nd\x1b[31me\x7f\xc3\xa9\xf0\x9f\x98\x80\x80\xc0\xaf\xed\xa0\x80",
	};

	pipelog_open(&pl);
	assert_int_equal(elog_event(pl.log, &ev), 0);
	assert_string_equal(skip_ts(drain(pl.rd)),
	                    ",\"kind\":\"http\",\"host\":\"a\\\"b\\\\c\\nd\\u001b[31me\\u007f"
	                    "\xc3\xa9\xf0\x9f\x98\x80\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\","
	                    "\"port\":80,\"verdict\":\"deny\",\"bytes_up\":0,\"bytes_down\":0,"
	                    "\"duration_ms\":0}\n");
	pipelog_close(&pl);
}

static void
test_capping(void **state)
{
	struct pipelog pl;
	char host[1000], url[5000];
	char *line;

	memset(host, 'h', sizeof(host) - 1);
	host[sizeof(host) - 1] = '\0';
	/* A multibyte character straddling the 255-byte cap must not be cut
	 * in half. */
	memcpy(host + 254, "\xc3\xa9", 2);
	memset(url, 'u', sizeof(url) - 1);
	url[sizeof(url) - 1] = '\0';

	struct elog_event ev = {
	        .kind = "http",
	        .host = host,
	        .port = 80,
	        .verdict = "deny",
	        .url = url,
	        .method = "GET",
	};
	pipelog_open(&pl);
	assert_int_equal(elog_event(pl.log, &ev), 0);
	line = drain(pl.rd);
	char expect_host[300] = "\"host\":\"";
	memset(expect_host + 8, 'h', 254);
	memcpy(expect_host + 8 + 254, "\",", 3);
	assert_non_null(strstr(line, expect_host));
	const char *u = strstr(line, "\"url\":\"");
	assert_non_null(u);
	assert_int_equal(strspn(u + 7, "u"), 2048);
	assert_non_null(strstr(line, ",\"truncated\":[\"host\",\"url\"]}\n"));
	assert_true(strlen(line) < ELOG_LINE_MAX);
	pipelog_close(&pl);
}

static void
test_task_lines(void **state)
{
	struct pipelog pl;
	const char *argv[] = {"pip", "install", "req\"uests"};
	struct elog_task_start ts = {
	        .policy = "pypi",
	        .policy_sha256 = "ab12",
	        .mode = "audit",
	        .argv = argv,
	        .argc = 3,
	        .selftest = "pass",
	};
	struct elog_event a = {.kind = "connect",
	                       .host = "pypi.org",
	                       .port = 443,
	                       .verdict = "allow",
	                       .bytes_up = 10,
	                       .bytes_down = 100};
	struct elog_event d = {.kind = "packet",
	                       .ip = "192.0.2.1",
	                       .port = 443,
	                       .verdict = "audit-deny",
	                       .proto = "udp"};
	struct elog_task_end te = {.exit_status = 3, .signal = 0, .duration_ms = 1500};
	char *line;

	pipelog_open(&pl);
	elog_set_task(pl.log, "t-2");
	assert_int_equal(elog_task_start(pl.log, &ts), 0);
	line = drain(pl.rd);
	char expect[256];
	snprintf(expect, sizeof(expect),
	         ",\"task\":\"t-2\",\"kind\":\"task-start\",\"airlock\":\"%s\",\"pid\":%d,",
	         AIRLOCK_VERSION, (int)getpid());
	const char *rest = skip_ts(line);
	assert_memory_equal(rest, expect, strlen(expect));
	assert_string_equal(
	        rest + strlen(expect),
	        "\"policy\":\"pypi\",\"policy_sha256\":\"ab12\",\"mode\":\"audit\","
	        "\"command\":[\"pip\",\"install\",\"req\\\"uests\"],\"selftest\":\"pass\"}\n");

	assert_int_equal(elog_event(pl.log, &a), 0);
	assert_int_equal(elog_event(pl.log, &a), 0);
	assert_int_equal(elog_event(pl.log, &d), 0);
	drain(pl.rd);
	elog_totals(pl.log, &te);
	assert_int_equal(te.connections, 3);
	assert_int_equal(te.allowed, 2);
	assert_int_equal(te.denied, 1);
	assert_int_equal(te.bytes_up, 20);
	assert_int_equal(te.bytes_down, 200);
	assert_int_equal(elog_task_end(pl.log, &te), 0);
	assert_string_equal(
	        skip_ts(drain(pl.rd)),
	        ",\"task\":\"t-2\",\"kind\":\"task-end\",\"exit_status\":3,\"signal\":0,"
	        "\"duration_ms\":1500,\"totals\":{\"connections\":3,\"allowed\":2,"
	        "\"denied\":1,\"bytes_up\":20,\"bytes_down\":200}}\n");
	pipelog_close(&pl);
}

static void
test_long_command_capped(void **state)
{
	struct pipelog pl;
	static char big[20000];
	const char *argv[40];
	char *line;

	memset(big, '\x01', sizeof(big) - 1); /* worst case: 6 bytes escaped */
	for (size_t i = 0; i < 40; i++)
		argv[i] = big;
	struct elog_task_start ts = {.policy = "x", .argv = argv, .argc = 40};
	pipelog_open(&pl);
	assert_int_equal(elog_task_start(pl.log, &ts), 0);
	line = drain(pl.rd);
	assert_true(strlen(line) < ELOG_LINE_MAX);
	assert_non_null(strstr(line, "\"truncated\":[\"command\"]}\n"));
	pipelog_close(&pl);
}

static void
test_many_empty_words_capped(void **state)
{
	/* Empty words cost no bytes of the command budget but 3 bytes of line
	 * each: their number is capped too, so the line always fits. */
	struct pipelog pl;
	static const char *argv[100000];
	char *line;

	for (size_t i = 0; i < 100000; i++)
		argv[i] = "";
	struct elog_task_start ts = {.policy = "x", .argv = argv, .argc = 100000};
	pipelog_open(&pl);
	assert_int_equal(elog_task_start(pl.log, &ts), 0);
	assert_false(elog_failed(pl.log));
	line = drain(pl.rd);
	assert_non_null(strstr(line, "\"truncated\":[\"command\"]}\n"));
	pipelog_close(&pl);
}

static void
test_fail_closed_dev_full(void **state)
{
	int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	struct elog *log;
	struct elog_event ev = {.kind = "tcp",
	                        .ip = "192.0.2.1",
	                        .port = 22,
	                        .verdict = "deny",
	                        .reason = "no match"};

	if (fd < 0)
		skip();
	log = elog_open_fd(fd);
	assert_false(elog_failed(log));
	assert_int_equal(elog_event(log, &ev), -1);
	assert_true(elog_failed(log));
	/* It stays failed: no later line is attempted. */
	assert_int_equal(elog_event(log, &ev), -1);
	assert_true(elog_failed(log));
	elog_free(log);
}

static void
test_failed_when_reader_gone(void **state)
{
	/* A piped log whose reader exits is failed before any line is lost. */
	int p[2];
	struct elog *log;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	log = elog_open_fd(p[1]);
	assert_false(elog_failed(log));
	close(p[0]);
	assert_true(elog_failed(log));
	elog_free(log);
}

static void
test_fail_closed_broken_pipe(void **state)
{
	int p[2];
	struct elog *log;
	struct elog_task_end te = {0};

	signal(SIGPIPE, SIG_IGN);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	close(p[0]);
	log = elog_open_fd(p[1]);
	assert_int_equal(elog_task_end(log, &te), -1);
	assert_true(elog_failed(log));
	elog_free(log);
}

static void
test_open_path(void **state)
{
	char path[] = "/tmp/elog-test-XXXXXX";
	char err[256];
	int fd = mkstemp(path);
	struct elog *log;
	struct elog_event ev = {.kind = "tcp", .ip = "192.0.2.1", .port = 22, .verdict = "deny"};
	char buf[4096];
	ssize_t n;

	assert_true(fd >= 0);
	close(fd);
	/* Two writers on the same file append, never overwrite. */
	struct elog *l2 = elog_open(path, err, sizeof(err));
	log = elog_open(path, err, sizeof(err));
	assert_non_null(log);
	assert_non_null(l2);
	assert_int_equal(elog_event(log, &ev), 0);
	assert_int_equal(elog_event(l2, &ev), 0);
	assert_int_equal(elog_event(log, &ev), 0);
	elog_free(log);
	elog_free(l2);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	assert_true(n > 0);
	buf[n] = '\0';
	int lines = 0;
	for (char *p = buf; (p = strchr(p, '\n')) != NULL; p++)
		lines++;
	assert_int_equal(lines, 3);
	unlink(path);

	assert_null(elog_open("/nonexistent-dir/x.jsonl", err, sizeof(err)));
	assert_non_null(strstr(err, "/nonexistent-dir/x.jsonl"));
}

static void
test_human_line(void **state)
{
	struct pipelog pl;
	char *hbuf = NULL;
	size_t hlen = 0;
	FILE *h = open_memstream(&hbuf, &hlen);
	struct elog_event ev = {
	        .kind = "tls",
	        .host = "evil.test\x1b]0;pwned\x07",
	        .ip = "203.0.113.66",
	        .port = 443,
	        .verdict = "deny",
	        .reason = "no match",
	};

	pipelog_open(&pl);
	elog_set_human(pl.log, h);
	assert_int_equal(elog_event(pl.log, &ev), 0);
	fclose(h);
	/* HH:MM:SS then the rest; terminal controls shown as \xHH. */
	assert_true(hlen > 9);
	assert_string_equal(
	        hbuf + 9,
	        "deny  tls     evil.test\\x1b]0;pwned\\x07:443 (203.0.113.66) no match\n");
	free(hbuf);
	pipelog_close(&pl);
}

static void
test_utf8_len(void **state)
{
	assert_int_equal(elog_utf8_len((const unsigned char *)"a", 1), 1);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xc3\xa9", 2), 2);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xc3", 1), 0);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xe0\x80\x80", 3), 0);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xed\xa0\x80", 3), 0);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);
	assert_int_equal(elog_utf8_len((const unsigned char *)"\xff", 1), 0);
}

/* Each line read from fd (raw, the chain's fields kept): shorter than
 * ELOG_WRITE_MAX, one JSON object, cut with a "truncated" list; how many. */
static int
expect_lines_fit(int fd)
{
	static char out[4 * ELOG_LINE_MAX];
	static struct elog_json j;
	char why[128];
	ssize_t n = read(fd, out, sizeof(out) - 1);
	int lines = 0;

	assert_true(n > 0);
	out[n] = '\0';
	for (char *line = out, *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
		size_t len = (size_t)(nl - line) + 1;

		assert_true(len < ELOG_WRITE_MAX);
		/* the worst cases come close: the test builds them */
		assert_true(len > ELOG_WRITE_MAX / 3);
		assert_int_equal(elog_json_parse(&j, line, len - 1, why, sizeof(why)), 0);
		assert_true(elog_json_get(&j, 0, "truncated") >= 0);
		lines++;
	}
	return lines;
}

static void
test_worst_lines_fit(void **state)
{
	/* Every string at its cap and every byte of it costing 6 escaped
	 * (\u0001), every list at its count: task-start and an event line
	 * each stay one JSON object under ELOG_WRITE_MAX, none failed. */
	static char worst[20000];
	static const char *argv[2000], *answers[100], *labels[40];
	static char label[40][400];
	struct pipelog pl;

	memset(worst, '\x01', sizeof(worst) - 1);
	for (size_t i = 0; i < 2000; i++)
		argv[i] = i % 2 == 0 ? worst : "";
	for (size_t i = 0; i < 100; i++)
		answers[i] = worst;
	for (size_t i = 0; i < 40; i++) {
		memset(label[i], '\x01', sizeof(label[i]) - 1);
		memcpy(label[i], "k", 1);
		snprintf(label[i] + 1, 40, "%02zu_________________________________", i);
		label[i][31] = '=';
		labels[i] = label[i];
	}
	struct elog_task_start ts = {.policy = worst,
	                             .policy_sha256 = worst,
	                             .mode = worst,
	                             .argv = argv,
	                             .argc = 2000,
	                             .selftest = worst,
	                             .labels = labels,
	                             .n_labels = 40,
	                             .worker = true,
	                             .landlock = 7};
	struct elog_event ev = {.kind = worst,
	                        .host = worst,
	                        .ip = worst,
	                        .port = 65535,
	                        .verdict = worst,
	                        .rule = worst,
	                        .reason = worst,
	                        .bytes_up = UINT64_MAX,
	                        .bytes_down = UINT64_MAX,
	                        .duration_ms = UINT64_MAX,
	                        .sni = worst,
	                        .method = worst,
	                        .url = worst,
	                        .qtype = worst,
	                        .rcode = worst,
	                        .answers = answers,
	                        .n_answers = 100,
	                        .proto = worst,
	                        .orig_dst = worst,
	                        .packets = UINT64_MAX,
	                        .path = worst,
	                        .count = UINT64_MAX,
	                        .detail = worst};
	(void)state;
	pipelog_open(&pl);
	elog_set_task(pl.log, worst);
	assert_int_equal(elog_task_start(pl.log, &ts), 0);
	assert_int_equal(elog_event(pl.log, &ev), 0);
	assert_false(elog_failed(pl.log));
	assert_int_equal(expect_lines_fit(pl.rd), 2);
	pipelog_close(&pl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_event_field_order),
	        cmocka_unit_test(test_escaping),
	        cmocka_unit_test(test_capping),
	        cmocka_unit_test(test_task_lines),
	        cmocka_unit_test(test_long_command_capped),
	        cmocka_unit_test(test_many_empty_words_capped),
	        cmocka_unit_test(test_fail_closed_dev_full),
	        cmocka_unit_test(test_fail_closed_broken_pipe),
	        cmocka_unit_test(test_failed_when_reader_gone),
	        cmocka_unit_test(test_open_path),
	        cmocka_unit_test(test_human_line),
	        cmocka_unit_test(test_utf8_len),
	        cmocka_unit_test(test_worst_lines_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
