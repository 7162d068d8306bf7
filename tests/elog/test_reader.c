/* The strict JSON reader, record decoding, RFC 3339 times and the line
 * reader's handling of garbage, over-long and cut lines. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "elog/elog.h"
#include "elog/json.h"
#include "elog/record.h"

static const char *data_dir;
static struct elog_json J; /* large: keep it off the stack */

static int
parse(const char *s)
{
	char why[160];

	return elog_json_parse(&J, s, strlen(s), why, sizeof(why));
}

static void
test_json_accepts(void **state)
{
	static const char *good[] = {
	        "{}",
	        "[]",
	        " {\"a\" : 1 } \n",
	        "{\"a\":[1,-2,3.5e+2,0.0,-0]}",
	        "{\"s\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"}",
	        "{\"t\":true,\"f\":false,\"n\":null}",
	        "\"x\"",
	        "12",
	        "{\"u\":\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"}",
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		if (parse(good[i]) != 0)
			fail_msg("rejected: %s", good[i]);
	}
	assert_int_equal(parse("{\"s\":\"a\\u00e9\\ud83d\\ude00\\u0000\"}"), 0);
	assert_string_equal(elog_json_str(&J, elog_json_get(&J, 0, "s")),
	                    "a\xc3\xa9\xf0\x9f\x98\x80\xef\xbf\xbd");
}

static void
test_json_rejects(void **state)
{
	static const char *bad[] = {
	        "",
	        "{",
	        "}",
	        "{\"a\"}",
	        "{\"a\":}",
	        "{\"a\":1,}",
	        "[1,]",
	        "{a:1}",
	        "{\"a\":01}",
	        "{\"a\":1.}",
	        "{\"a\":.5}",
	        "{\"a\":-}",
	        "{\"a\":1e}",
	        "{\"a\":tru}",
	        "{\"a\":nul}",
	        "{\"a\":\"x}",
	        "{\"a\":\"\\x\"}",
	        "{\"a\":\"\\u12\"}",
	        "{\"a\":\"\\ud800\"}",
	        "{\"a\":\"\\udc00\"}",
	        "{\"a\":\"\x01\"}",
	        "{\"a\":\"\xff\"}",
	        "{\"a\":\"\xc0\xaf\"}",
	        "{\"a\":\"\xed\xa0\x80\"}",
	        "{} {}",
	        "{}x",
	        "[1 2]",
	        "'x'",
	        "{\"a\":NaN}",
	        "{\"a\":Infinity}",
	        "{\"a\":+1}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i]) == 0)
			fail_msg("accepted: %s", bad[i]);
	}
}

static void
test_json_bounds(void **state)
{
	char deep[64], *many;
	size_t n = 0;

	/* 16 levels parse, 17 do not. */
	memset(deep, 0, sizeof(deep));
	for (int i = 0; i < 16; i++)
		deep[n++] = '[';
	for (int i = 0; i < 16; i++)
		deep[n++] = ']';
	assert_int_equal(parse(deep), 0);
	memmove(deep + 1, deep, n + 1);
	deep[0] = '[';
	deep[n + 1] = ']';
	deep[n + 2] = '\0';
	assert_int_equal(parse(deep), -1);

	/* More values than tokens. */
	many = malloc(2 * ELOG_JSON_MAX_TOKENS + 8);
	n = 0;
	many[n++] = '[';
	for (int i = 0; i < ELOG_JSON_MAX_TOKENS; i++) {
		many[n++] = '1';
		many[n++] = ',';
	}
	many[n - 1] = ']';
	many[n] = '\0';
	assert_int_equal(parse(many), -1);
	free(many);
}

static void
test_json_access(void **state)
{
	uint64_t u;
	int64_t s;

	assert_int_equal(parse("{\"a\":{\"x\":[1,{\"y\":2}]},\"b\":[\"p\",\"q\"],"
	                       "\"n\":18446744073709551615,\"big\":18446744073709551616,"
	                       "\"neg\":-5,\"f\":1.5,\"a\":\"dup\"}"),
	                 0);
	assert_int_equal(elog_json_type(&J, elog_json_get(&J, 0, "a")), ELOG_JSON_OBJECT);
	int b = elog_json_get(&J, 0, "b");
	assert_string_equal(elog_json_str(&J, elog_json_elem(&J, b, 1)), "q");
	assert_int_equal(elog_json_elem(&J, b, 2), -1);
	assert_int_equal(elog_json_u64(&J, elog_json_get(&J, 0, "n"), &u), 0);
	assert_true(u == UINT64_MAX);
	assert_int_equal(elog_json_u64(&J, elog_json_get(&J, 0, "big"), &u), -1);
	assert_int_equal(elog_json_u64(&J, elog_json_get(&J, 0, "neg"), &u), -1);
	assert_int_equal(elog_json_i64(&J, elog_json_get(&J, 0, "neg"), &s), 0);
	assert_int_equal(s, -5);
	assert_int_equal(elog_json_u64(&J, elog_json_get(&J, 0, "f"), &u), -1);
	assert_int_equal(elog_json_get(&J, 0, "missing"), -1);
	assert_null(elog_json_str(&J, elog_json_get(&J, 0, "n")));
}

static void
test_time(void **state)
{
	int64_t ms;
	char out[40];

	assert_int_equal(elog_parse_time("2026-11-30T10:24:48.123Z", &ms), 0);
	assert_true(ms == 1796034288123LL);
	elog_format_time(ms, out, sizeof(out));
	assert_string_equal(out, "2026-11-30T10:24:48.123Z");
	assert_int_equal(elog_parse_time("2026-11-30T11:24:48.123+01:00", &ms), 0);
	assert_true(ms == 1796034288123LL);
	assert_int_equal(elog_parse_time("1970-01-01T00:00:00Z", &ms), 0);
	assert_true(ms == 0);
	assert_int_equal(elog_parse_time("2024-02-29T00:00:00.5Z", &ms), 0);
	assert_true(ms == 1709164800500LL);
	assert_int_equal(elog_parse_time("2026-13-01T00:00:00Z", &ms), -1);
	assert_int_equal(elog_parse_time("2026-11-30 10:24", &ms), -1);
	assert_int_equal(elog_parse_time("2026-11-30T10:24:48.Z", &ms), -1);
	assert_int_equal(elog_parse_time("2026-11-30T10:24:48", &ms), -1);
	assert_int_equal(elog_parse_time("yesterday", &ms), -1);
}

static void
test_record_fields(void **state)
{
	struct elog_record r;
	char why[160];
	const char *line = "{\"ts\":\"2026-11-30T10:24:48.123Z\",\"task\":\"t\",\"kind\":\"dns\","
	                   "\"host\":\"pypi.org\",\"verdict\":\"allow\",\"rule\":\"p:3\","
	                   "\"bytes_up\":0,\"bytes_down\":0,\"duration_ms\":3,\"qtype\":\"A\","
	                   "\"answers\":[\"192.0.2.1\"],\"some_future_field\":{\"x\":[true]}}";

	assert_int_equal(elog_record_parse(&J, line, strlen(line), &r, why, sizeof(why)), 0);
	assert_int_equal(r.type, ELOG_REC_EVENT);
	assert_string_equal(r.kind, "dns");
	assert_string_equal(r.host, "pypi.org");
	assert_int_equal(r.port, -1);
	assert_null(r.ip);
	assert_int_equal(r.duration_ms, 3);
	assert_string_equal(elog_json_str(&J, elog_json_elem(&J, r.answers, 0)), "192.0.2.1");

	line = "{\"ts\":\"2026-11-30T10:24:48.123Z\",\"kind\":\"task-end\","
	       "\"exit_status\":-1,\"signal\":9,\"totals\":{\"connections\":5}}";
	assert_int_equal(elog_record_parse(&J, line, strlen(line), &r, why, sizeof(why)), 0);
	assert_int_equal(r.type, ELOG_REC_TASK_END);
	assert_int_equal(r.exit_status, -1);
	assert_int_equal(r.signal, 9);
	assert_true(r.has_totals);
	assert_int_equal(r.t_connections, 5);
	assert_int_equal(r.t_unlogged, 0);

	/* Counted repeats, the log budget's line, task-end's unlogged. */
	line = "{\"ts\":\"2026-11-30T10:24:48.123Z\",\"kind\":\"dns\",\"host\":\"e.test\","
	       "\"verdict\":\"deny\",\"count\":41}";
	assert_int_equal(elog_record_parse(&J, line, strlen(line), &r, why, sizeof(why)), 0);
	assert_int_equal(r.count, 41);
	assert_int_equal(elog_record_events(&r), 41);
	line = "{\"ts\":\"2026-11-30T10:24:48.123Z\",\"kind\":\"log-budget\",\"reason\":\"r\","
	       "\"log_budget\":4096}";
	assert_int_equal(elog_record_parse(&J, line, strlen(line), &r, why, sizeof(why)), 0);
	assert_int_equal(r.type, ELOG_REC_LOG_BUDGET);
	assert_string_equal(r.reason, "r");
	line = "{\"ts\":\"2026-11-30T10:24:48.123Z\",\"kind\":\"task-end\","
	       "\"totals\":{\"connections\":5,\"unlogged\":3}}";
	assert_int_equal(elog_record_parse(&J, line, strlen(line), &r, why, sizeof(why)), 0);
	assert_int_equal(r.t_unlogged, 3);

	static const char *garbage[] = {
	        "[1]",
	        "{\"kind\":\"dns\"}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\"}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"tcp\",\"port\":70000}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"tcp\",\"port\":\"443\"}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"tcp\",\"host\":5}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"dns\",\"answers\":[1]}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"task-start\",\"command\":\"ls\"}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"task-end\",\"totals\":[]}",
	        "{\"ts\":\"2026-11-30T10:24:48Z\",\"kind\":\"tcp\",\"bytes_up\":-1}",
	};
	for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++)
		if (elog_record_parse(&J, garbage[i], strlen(garbage[i]), &r, why, sizeof(why)) ==
		    0)
			fail_msg("accepted: %s", garbage[i]);
}

/* Count records and garbage in a file written here. */
static void
read_all(const char *path, int *records, uint64_t *garbage)
{
	char err[256];
	struct elog_reader *rd = elog_reader_open(path, err, sizeof(err));
	struct elog_record rec;
	int got;

	assert_non_null(rd);
	*records = 0;
	while ((got = elog_reader_next(rd, &rec)) > 0)
		(*records)++;
	assert_int_equal(got, 0);
	*garbage = elog_reader_garbage(rd);
	elog_reader_free(rd);
}

static void
test_reader_fixture(void **state)
{
	char path[4096];
	int n;
	uint64_t g;

	/* mixed.jsonl: 13 lines; 4 garbage (not JSON, port as string, bad ts,
	 * and the cut last line); one line with unknown fields is kept. */
	snprintf(path, sizeof(path), "%s/mixed.jsonl", data_dir);
	read_all(path, &n, &g);
	assert_int_equal(n, 9);
	assert_int_equal(g, 4);
}

static void
test_reader_long_lines(void **state)
{
	char path[] = "/tmp/elog-reader-XXXXXX";
	int fd = mkstemp(path);
	const char *good = "{\"ts\":\"2026-11-30T10:24:48.123Z\",\"kind\":\"tcp\"}\n";
	char *big = malloc(3 * ELOG_LINE_MAX);
	int n;
	uint64_t g;

	assert_true(fd >= 0);
	assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
	/* A line of exactly ELOG_LINE_MAX bytes of JSON-looking text (too long
	 * by one with its newline), then one of 3x that: both garbage, and the
	 * good line after them is still found. */
	memset(big, ' ', 3 * ELOG_LINE_MAX);
	big[0] = '{';
	big[ELOG_LINE_MAX] = '}';
	big[ELOG_LINE_MAX + 1] = '\n';
	assert_int_equal(write(fd, big, ELOG_LINE_MAX + 2), ELOG_LINE_MAX + 2);
	big[ELOG_LINE_MAX] = ' ';
	big[ELOG_LINE_MAX + 1] = ' ';
	big[3 * ELOG_LINE_MAX - 1] = '\n';
	assert_int_equal(write(fd, big, 3 * ELOG_LINE_MAX), 3 * ELOG_LINE_MAX);
	assert_int_equal(write(fd, good, strlen(good)), (ssize_t)strlen(good));
	/* A cut last line that still parses is used. */
	assert_int_equal(write(fd, good, strlen(good) - 1), (ssize_t)strlen(good) - 1);
	close(fd);
	read_all(path, &n, &g);
	assert_int_equal(n, 3);
	assert_int_equal(g, 2);
	unlink(path);
	free(big);
}

static void
test_writer_round_trip(void **state)
{
	/* Whatever the writer escapes, the reader decodes back (valid UTF-8
	 * unchanged, invalid bytes as U+FFFD). */
	char path[] = "/tmp/elog-rt-XXXXXX";
	int fd = mkstemp(path);
	struct elog *log = elog_open_fd(fd);
	const char *answers[] = {"192.0.2.1"};
	struct elog_event ev = {
	        .kind = "http",
	        .host = "h\"\\\n\x01\x7f\xc3\xa9\xff.test",
	        .port = 80,
	        .verdict = "deny",
	        .reason = "no match",
	        .url = "http://x/\t",
	        .answers = answers,
	        .n_answers = 1,
	        .bytes_up = UINT64_MAX,
	};
	char err[256];
	struct elog_reader *rd;
	struct elog_record rec;

	elog_set_task(log, "rt");
	assert_int_equal(elog_event(log, &ev), 0);
	elog_free(log);
	rd = elog_reader_open(path, err, sizeof(err));
	assert_int_equal(elog_reader_next(rd, &rec), 1);
	assert_string_equal(rec.host, "h\"\\\n\x01\x7f\xc3\xa9\xef\xbf\xbd.test");
	assert_string_equal(rec.url, "http://x/\t");
	assert_string_equal(rec.task, "rt");
	assert_int_equal(rec.port, 80);
	assert_true(rec.bytes_up == UINT64_MAX);
	assert_int_equal(elog_reader_next(rd, &rec), 0);
	elog_reader_free(rd);
	unlink(path);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_json_accepts),
	        cmocka_unit_test(test_json_rejects),
	        cmocka_unit_test(test_json_bounds),
	        cmocka_unit_test(test_json_access),
	        cmocka_unit_test(test_time),
	        cmocka_unit_test(test_record_fields),
	        cmocka_unit_test(test_reader_fixture),
	        cmocka_unit_test(test_reader_long_lines),
	        cmocka_unit_test(test_writer_round_trip),
	};
	data_dir = argc > 1 ? argv[1] : "tests/elog/data";
	return cmocka_run_group_tests(tests, NULL, NULL);
}
