/* The log's volume bounds: the bounded table (elog/tab.c), the memory of
 * repeated events (elog/agg.c) and, through the writer, the window, the
 * early flush, the totals and the log budget (elog/elog.c). */
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

#include "elog/agg.h"
#include "elog/elog.h"
#include "elog/tab.h"

/* ---- the table ---- */

static void
test_tab_insert_find_full(void **state)
{
	struct elog_tab *t = elog_tab_new(3, 64, sizeof(int));
	int *v;

	(void)state;
	assert_non_null(t);
	assert_null(elog_tab_find(t, "a", 1));
	v = elog_tab_insert(t, "a", 1);
	assert_non_null(v);
	assert_int_equal(*v, 0); /* zeroed */
	*v = 7;
	assert_non_null(elog_tab_insert(t, "bb", 2));
	/* Keys are byte strings: "a" and "a\0" differ. */
	assert_non_null(elog_tab_insert(t, "a\0", 2));
	assert_int_equal(*(int *)elog_tab_find(t, "a", 1), 7);
	assert_null(elog_tab_insert(t, "c", 1)); /* three entries: full */
	assert_int_equal(elog_tab_count(t), 3);
	elog_tab_free(t);

	/* The arena bounds it too: 16 bytes hold two 6-byte keys and NULs. */
	t = elog_tab_new(100, 16, 0);
	assert_non_null(elog_tab_insert(t, "123456", 6));
	assert_non_null(elog_tab_insert(t, "abcdef", 6));
	assert_null(elog_tab_insert(t, "xyz", 3));
	elog_tab_free(t);
}

static bool
keep_odd(void *payload, const char *key, size_t len, void *arg)
{
	(void)key;
	(void)len;
	(void)arg;
	return *(int *)payload % 2 == 1;
}

static void
test_tab_retain_compacts(void **state)
{
	struct elog_tab *t = elog_tab_new(8, 40, sizeof(int));
	char key[8];
	size_t len;

	(void)state;
	for (int i = 0; i < 8; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		*(int *)elog_tab_insert(t, key, strlen(key)) = i;
	}
	assert_null(elog_tab_insert(t, "x", 1));
	elog_tab_retain(t, keep_odd, NULL);
	assert_int_equal(elog_tab_count(t), 4);
	/* Order kept, keys still found, room again. */
	assert_string_equal(elog_tab_key(t, 0, &len), "k1");
	assert_string_equal(elog_tab_key(t, 3, &len), "k7");
	assert_int_equal(*(int *)elog_tab_find(t, "k5", 2), 5);
	assert_null(elog_tab_find(t, "k4", 2));
	assert_non_null(elog_tab_insert(t, "k4", 2));
	elog_tab_retain(t, NULL, NULL);
	assert_int_equal(elog_tab_count(t), 0);
	elog_tab_free(t);
}

/* ---- the memory of repeated events ---- */

struct emitted {
	int n;
	struct elog_event ev[8];
	char host[8][64], reason[8][64], path[8][64];
};

static void
collect(const struct elog_event *ev, void *arg)
{
	struct emitted *e = arg;

	assert_true(e->n < 8);
	e->ev[e->n] = *ev;
	/* The strings are borrowed for the call only. */
	snprintf(e->host[e->n], sizeof(e->host[0]), "%s", ev->host != NULL ? ev->host : "-");
	snprintf(e->reason[e->n], sizeof(e->reason[0]), "%s",
	         ev->reason != NULL ? ev->reason : "-");
	snprintf(e->path[e->n], sizeof(e->path[0]), "%s", ev->path != NULL ? ev->path : "-");
	e->n++;
}

static const struct elog_event q_evil = {.kind = "dns",
                                         .host = "evil.test",
                                         .port = -1,
                                         .verdict = "deny",
                                         .reason = "not in allowlist",
                                         .qtype = "A",
                                         .rcode = "NXDOMAIN",
                                         .duration_ms = 1};

static void
test_agg_first_then_counted(void **state)
{
	struct elog_agg *a = elog_agg_new(16, 4096);
	struct elog_event other = q_evil, slow = q_evil;
	struct emitted e = {0};

	(void)state;
	assert_int_equal(elog_agg_note(a, &q_evil), ELOG_AGG_FIRST);
	slow.duration_ms = 9;
	slow.url = "not part of the key";
	assert_int_equal(elog_agg_note(a, &slow), ELOG_AGG_COUNTED);
	assert_int_equal(elog_agg_note(a, &q_evil), ELOG_AGG_COUNTED);
	/* Another type, rcode or port is another event. */
	other.qtype = "AAAA";
	assert_int_equal(elog_agg_note(a, &other), ELOG_AGG_FIRST);
	other = q_evil;
	other.port = 53;
	assert_int_equal(elog_agg_note(a, &other), ELOG_AGG_FIRST);
	other = q_evil;
	other.rule = NULL;
	other.reason = NULL; /* absent differs from any text */
	assert_int_equal(elog_agg_note(a, &other), ELOG_AGG_FIRST);
	/* Unix refusals: the socket path is part of the key. */
	other = q_evil;
	other.path = "/run/a.sock";
	assert_int_equal(elog_agg_note(a, &other), ELOG_AGG_FIRST);
	assert_int_equal(elog_agg_note(a, &other), ELOG_AGG_COUNTED);
	other.path = "/run/b.sock";
	assert_int_equal(elog_agg_note(a, &other), ELOG_AGG_FIRST);

	elog_agg_flush(a, false, collect, &e);
	/* One line each for the repeats of the first and of a.sock, with
	 * their count and the longest duration; the key fields as they were. */
	assert_int_equal(e.n, 2);
	assert_int_equal(e.ev[1].count, 1);
	assert_string_equal(e.path[1], "/run/a.sock");
	assert_int_equal(e.ev[0].count, 2);
	assert_int_equal(e.ev[0].duration_ms, 9);
	assert_int_equal(e.ev[0].port, -1);
	assert_string_equal(e.host[0], "evil.test");
	assert_string_equal(e.reason[0], "not in allowlist");
	assert_null(e.ev[0].url);
	assert_int_equal(elog_agg_size(a), 6);

	/* An event that had no repeat for a whole window is forgotten: the
	 * four seen once at the end of this one, the two others a window
	 * later; nothing is written for either. */
	e.n = 0;
	elog_agg_flush(a, false, collect, &e);
	assert_int_equal(e.n, 0);
	assert_int_equal(elog_agg_size(a), 2);
	elog_agg_flush(a, false, collect, &e);
	assert_int_equal(e.n, 0);
	assert_int_equal(elog_agg_size(a), 0);
	assert_int_equal(elog_agg_note(a, &q_evil), ELOG_AGG_FIRST);
	elog_agg_free(a);
}

static void
test_agg_final_and_full(void **state)
{
	struct elog_agg *a = elog_agg_new(2, 4096);
	struct elog_event b = q_evil;
	struct emitted e = {0};

	(void)state;
	b.host = "b.test";
	assert_int_equal(elog_agg_note(a, &q_evil), ELOG_AGG_FIRST);
	assert_int_equal(elog_agg_note(a, &b), ELOG_AGG_FIRST);
	assert_int_equal(elog_agg_note(a, &b), ELOG_AGG_COUNTED);
	b.host = "c.test";
	assert_int_equal(elog_agg_note(a, &b), ELOG_AGG_FULL);
	/* Final: every count out, everything forgotten. */
	elog_agg_flush(a, true, collect, &e);
	assert_int_equal(e.n, 1);
	assert_string_equal(e.host[0], "b.test");
	assert_int_equal(e.ev[0].count, 1);
	assert_int_equal(elog_agg_size(a), 0);
	assert_int_equal(elog_agg_note(a, &b), ELOG_AGG_FIRST);
	elog_agg_free(a);
}

static void
test_agg_long_values_cut_like_the_line(void **state)
{
	/* Values past the cap are kept to the cap (and a little), so two
	 * reasons that differ only past it are one event. */
	struct elog_agg *a = elog_agg_new(4, 1 << 16);
	char r1[2000], r2[2000];
	struct elog_event ev = q_evil;
	struct emitted e = {0};

	(void)state;
	memset(r1, 'x', sizeof(r1) - 1);
	r1[sizeof(r1) - 1] = '\0';
	memcpy(r2, r1, sizeof(r2));
	r2[1500] = 'y';
	ev.reason = r1;
	assert_int_equal(elog_agg_note(a, &ev), ELOG_AGG_FIRST);
	ev.reason = r2;
	assert_int_equal(elog_agg_note(a, &ev), ELOG_AGG_COUNTED);
	elog_agg_flush(a, true, collect, &e);
	assert_int_equal(e.n, 1);
	elog_agg_free(a);
}

/* ---- through the writer ---- */

struct pipelog {
	int rd;
	struct elog *log;
	char buf[1 << 20];
};

static void
pipelog_open(struct pipelog *pl)
{
	int p[2];

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	pl->rd = p[0];
	pl->log = elog_open_fd(p[1]);
	assert_non_null(pl->log);
}

/* Everything written so far, as one string. */
static const char *
pipelog_read(struct pipelog *pl)
{
	ssize_t n = read(pl->rd, pl->buf, sizeof(pl->buf) - 1);

	pl->buf[n > 0 ? n : 0] = '\0';
	return pl->buf;
}

static void
pipelog_close(struct pipelog *pl)
{
	elog_free(pl->log);
	close(pl->rd);
}

static int
count_lines(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

static uint64_t
events_in(const char *s)
{
	uint64_t n = 0;

	for (const char *nl; (nl = strchr(s, '\n')) != NULL; s = nl + 1) {
		const char *c = strstr(s, "\"count\":");

		n += c != NULL && c < nl ? strtoull(c + 8, NULL, 10) : 1;
	}
	return n;
}

static void
test_writer_first_at_once_repeats_counted(void **state)
{
	struct pipelog *pl = malloc(sizeof(*pl));
	struct elog_task_end te = {0};
	const char *out;

	(void)state;
	pipelog_open(pl);
	/* The first is written at once. */
	assert_int_equal(elog_event_agg(pl->log, &q_evil), 0);
	out = pipelog_read(pl);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "\"host\":\"evil.test\""));
	assert_null(strstr(out, "\"count\""));
	for (int i = 0; i < 999; i++)
		assert_int_equal(elog_event_agg(pl->log, &q_evil), 0);
	assert_string_equal(pipelog_read(pl), "");
	/* The totals count every one, now. */
	elog_totals(pl->log, &te);
	assert_int_equal(te.connections, 1000);
	assert_int_equal(te.denied, 1000);
	/* Flushed (before task-end): one line for the 999. */
	elog_flush(pl->log);
	out = pipelog_read(pl);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "\"rcode\":\"NXDOMAIN\",\"count\":999,\"seq\":"));
	pipelog_close(pl);
	free(pl);
}

static void
test_writer_window_closes(void **state)
{
	struct pipelog *pl = malloc(sizeof(*pl));
	const char *out;

	(void)state;
	pipelog_open(pl);
	elog_set_agg(pl->log, 50, 0);
	for (int i = 0; i < 10; i++)
		assert_int_equal(elog_event_agg(pl->log, &q_evil), 0);
	assert_int_equal(count_lines(pipelog_read(pl)), 1);
	usleep(60 * 1000);
	/* Without a loop, the next event closes the window: the count of the
	 * last one comes first, then this one counts in the new window. */
	assert_int_equal(elog_event_agg(pl->log, &q_evil), 0);
	out = pipelog_read(pl);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "\"count\":9,\"seq\":"));
	/* After the last count, a final flush forgets it: written at once again. */
	usleep(60 * 1000);
	elog_flush(pl->log);
	assert_non_null(strstr(pipelog_read(pl), "\"count\":1,\"seq\":"));
	assert_int_equal(elog_event_agg(pl->log, &q_evil), 0);
	out = pipelog_read(pl);
	assert_int_equal(count_lines(out), 1);
	assert_null(strstr(out, "\"count\""));
	pipelog_close(pl);
	free(pl);
}

static void
test_writer_full_table_flushes_early(void **state)
{
	/* Three distinct events over and over with room for two: every
	 * event is still accounted for, in lines or counts. */
	struct pipelog *pl = malloc(sizeof(*pl));
	static const char *const hosts[] = {"a.test", "b.test", "c.test"};
	struct elog_event ev = q_evil;
	struct elog_task_end te = {0};
	uint64_t written;

	(void)state;
	pipelog_open(pl);
	elog_set_agg(pl->log, 60000, 2);
	for (int i = 0; i < 300; i++) {
		ev.host = hosts[i % 3];
		assert_int_equal(elog_event_agg(pl->log, &ev), 0);
	}
	elog_flush(pl->log);
	written = events_in(pipelog_read(pl));
	assert_int_equal(written, 300);
	elog_totals(pl->log, &te);
	assert_int_equal(te.connections, 300);
	pipelog_close(pl);
	free(pl);
}

static void
test_writer_bytes_never_aggregated(void **state)
{
	struct pipelog *pl = malloc(sizeof(*pl));
	struct elog_event ev = {.kind = "connect",
	                        .host = "pypi.org",
	                        .port = 443,
	                        .verdict = "allow",
	                        .bytes_up = 10,
	                        .bytes_down = 20};

	(void)state;
	pipelog_open(pl);
	for (int i = 0; i < 5; i++)
		assert_int_equal(elog_event_agg(pl->log, &ev), 0);
	assert_int_equal(count_lines(pipelog_read(pl)), 5);
	pipelog_close(pl);
	free(pl);
}

static void
test_budget(void **state)
{
	struct pipelog *pl = malloc(sizeof(*pl));
	struct elog_event ev = q_evil, pypi = {.kind = "connect",
	                                       .host = "pypi.org",
	                                       .port = 443,
	                                       .verdict = "allow",
	                                       .bytes_up = 1};
	struct elog_task_end te = {0};
	char name[32];
	const char *out;

	(void)state;
	pipelog_open(pl);
	elog_set_budget(pl->log, 1000);
	assert_false(elog_budget_spent(pl->log));
	/* Admitted before: a connection's line comes when it ends. */
	assert_true(elog_admit(pl->log, "pypi.org", 443));
	assert_true(elog_admit(pl->log, "files.test", 443));
	assert_int_equal(elog_event(pl->log, &pypi), 0);
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%d.evil.test", i);
		ev.host = name;
		assert_int_equal(elog_event_agg(pl->log, &ev), 0);
	}
	assert_true(elog_budget_spent(pl->log));
	out = pipelog_read(pl);
	/* Within the budget, then the one log-budget line. */
	assert_true(strlen(out) <= 1000 + 400);
	assert_non_null(strstr(out, "\"kind\":\"log-budget\""));
	assert_non_null(strstr(out, "\"log_budget\":1000,\"seq\":"));
	/* Detail stops: nothing more, but every event is counted. */
	assert_int_equal(elog_event(pl->log, &pypi), 0);
	ev.host = "late.evil.test";
	assert_int_equal(elog_event_agg(pl->log, &ev), 0);
	assert_string_equal(pipelog_read(pl), "");
	/* Named or admitted before: still admitted; new: refused. */
	assert_true(elog_admit(pl->log, "pypi.org", 443));
	assert_true(elog_admit(pl->log, "files.test", 443));
	assert_false(elog_admit(pl->log, "pypi.org", 80));
	assert_false(elog_admit(pl->log, "new.test", 443));
	/* A connection admitted before that ends now is named, once. */
	pypi.host = "files.test";
	assert_int_equal(elog_event(pl->log, &pypi), 0);
	assert_int_equal(elog_event(pl->log, &pypi), 0);
	out = pipelog_read(pl);
	assert_int_equal(count_lines(out), 1);
	assert_non_null(strstr(out, "\"host\":\"files.test\""));
	/* task-end is outside the budget and says what has no line. */
	elog_flush(pl->log);
	elog_totals(pl->log, &te);
	assert_int_equal(te.connections, 1 + 20 + 2 + 2);
	assert_true(te.unlogged >= 3);
	assert_int_equal(elog_task_end(pl->log, &te), 0);
	out = pipelog_read(pl);
	assert_non_null(strstr(out, "\"kind\":\"task-end\""));
	assert_non_null(strstr(out, ",\"unlogged\":"));
	pipelog_close(pl);
	free(pl);
}

/* The line that spends the budget may be one that is written anyway (the
 * first of a destination traffic went to): it comes out whole, after the
 * log-budget line. */
static void
test_budget_spent_by_a_named_line(void **state)
{
	struct pipelog *pl = malloc(sizeof(*pl));
	struct elog_event ev = {.kind = "connect",
	                        .host = "a.test",
	                        .port = 443,
	                        .verdict = "allow",
	                        .bytes_up = 5,
	                        .url = "a.test:443"};
	const char *out, *second;

	(void)state;
	pipelog_open(pl);
	elog_set_budget(pl->log, 100);
	assert_true(elog_admit(pl->log, "a.test", 443));
	assert_int_equal(elog_event(pl->log, &ev), 0);
	out = pipelog_read(pl);
	assert_int_equal(count_lines(out), 2);
	assert_non_null(strstr(out, "\"kind\":\"log-budget\""));
	second = strchr(out, '\n') + 1;
	assert_memory_equal(second, "{\"ts\":\"", 7);
	assert_non_null(strstr(second, "\"kind\":\"connect\",\"host\":\"a.test\",\"port\":443,"));
	assert_non_null(strstr(second, "\"url\":\"a.test:443\",\"seq\":"));
	pipelog_close(pl);
	free(pl);
}

static void
test_no_budget_admits_all(void **state)
{
	struct pipelog *pl = malloc(sizeof(*pl));

	(void)state;
	pipelog_open(pl);
	elog_set_budget(pl->log, 0);
	assert_true(elog_admit(pl->log, "anything.test", 443));
	assert_false(elog_budget_spent(pl->log));
	pipelog_close(pl);
	free(pl);
}

static void
test_parse_size(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(elog_parse_size("0", &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(elog_parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(elog_parse_size("64k", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(elog_parse_size("64MiB", &v), 0);
	assert_int_equal(v, 64ULL << 20);
	assert_int_equal(elog_parse_size("1G", &v), 0);
	assert_int_equal(v, 1ULL << 30);
	assert_int_equal(elog_parse_size("1024G", &v), 0);
	assert_int_equal(elog_parse_size("1025G", &v), -1);
	assert_int_equal(elog_parse_size("", &v), -1);
	assert_int_equal(elog_parse_size("k", &v), -1);
	assert_int_equal(elog_parse_size("12 M", &v), -1);
	assert_int_equal(elog_parse_size("-1", &v), -1);
	assert_int_equal(elog_parse_size("1T", &v), -1);
	assert_int_equal(elog_parse_size("99999999999999999999999", &v), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_tab_insert_find_full),
	        cmocka_unit_test(test_tab_retain_compacts),
	        cmocka_unit_test(test_agg_first_then_counted),
	        cmocka_unit_test(test_agg_final_and_full),
	        cmocka_unit_test(test_agg_long_values_cut_like_the_line),
	        cmocka_unit_test(test_writer_first_at_once_repeats_counted),
	        cmocka_unit_test(test_writer_window_closes),
	        cmocka_unit_test(test_writer_full_table_flushes_early),
	        cmocka_unit_test(test_writer_bytes_never_aggregated),
	        cmocka_unit_test(test_budget),
	        cmocka_unit_test(test_budget_spent_by_a_named_line),
	        cmocka_unit_test(test_no_budget_admits_all),
	        cmocka_unit_test(test_parse_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
