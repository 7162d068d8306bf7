/* The egress log's hash chain (elog/chain.h) as the writer makes it, and
 * `airlock log verify`'s checker (elog/verify.h) over real logs the writer
 * wrote to a file: every way of breaking the chain is named at the right
 * line, and what is no break (appended runs, interleaved runs, a spent
 * budget, a write that failed, an older log) is said as such. */
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
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/sha.h>

#include "elog/chain.h"
#include "elog/elog.h"
#include "elog/verify.h"

static char path[64];

static int
setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/elog-chain-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(path);
	return 0;
}

/* ---- the file as lines ---------------------------------------------- */

#define MAX_LINES 64

struct text {
	char *line[MAX_LINES]; /* each without its newline, malloc'd */
	size_t n;
	bool cut_last; /* the file did not end in a newline */
};

static void
text_read(struct text *t)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0;
	ssize_t n;

	assert_non_null(f);
	memset(t, 0, sizeof(*t));
	while ((n = getline(&buf, &cap, f)) > 0) {
		assert_true(t->n < MAX_LINES);
		if (buf[n - 1] == '\n')
			buf[--n] = '\0';
		else
			t->cut_last = true;
		t->line[t->n++] = strdup(buf);
	}
	free(buf);
	fclose(f);
}

static void
text_write(const struct text *t)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	for (size_t i = 0; i < t->n; i++)
		fprintf(f, "%s%s", t->line[i], i + 1 == t->n && t->cut_last ? "" : "\n");
	assert_int_equal(fclose(f), 0);
}

static void
text_free(struct text *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->line[i]);
	t->n = 0;
}

static void
text_delete(struct text *t, size_t i)
{
	free(t->line[i]);
	memmove(&t->line[i], &t->line[i + 1], (t->n - i - 1) * sizeof(t->line[0]));
	t->n--;
}

static void
text_insert(struct text *t, size_t i, const char *line)
{
	assert_true(t->n < MAX_LINES);
	memmove(&t->line[i + 1], &t->line[i], (t->n - i) * sizeof(t->line[0]));
	t->line[i] = strdup(line);
	t->n++;
}

/* ---- writing logs with the real writer ------------------------------- */

static const struct elog_event ev_allow = {.kind = "connect",
                                           .host = "pypi.org",
                                           .ip = "192.0.2.10",
                                           .port = 443,
                                           .verdict = "allow",
                                           .rule = "p.yaml:4",
                                           .bytes_up = 100,
                                           .bytes_down = 2000};
static const struct elog_event ev_deny = {.kind = "tls",
                                          .host = "evil.test",
                                          .ip = "203.0.113.66",
                                          .port = 443,
                                          .verdict = "deny",
                                          .reason = "no match",
                                          .sni = "evil.test"};

static struct elog *
run_start(const char *task)
{
	const char *argv[] = {"curl", "https://pypi.org/"};
	struct elog_task_start ts = {.policy = "pypi",
	                             .policy_sha256 = "ab12",
	                             .mode = "enforce",
	                             .argv = argv,
	                             .argc = 2,
	                             .selftest = "pass"};
	char err[256];
	struct elog *log = elog_open(path, err, sizeof(err));

	assert_non_null(log);
	elog_set_task(log, task);
	assert_int_equal(elog_task_start(log, &ts), 0);
	return log;
}

static void
run_end(struct elog *log)
{
	struct elog_task_end te = {.exit_status = 0, .duration_ms = 5};

	elog_flush(log);
	elog_totals(log, &te);
	assert_int_equal(elog_task_end(log, &te), 0);
	elog_free(log);
}

/* task-start, n events, task-end: n + 2 lines. */
static void
write_run(const char *task, int n)
{
	struct elog *log = run_start(task);

	for (int i = 0; i < n; i++)
		assert_int_equal(elog_event(log, i % 2 == 0 ? &ev_allow : &ev_deny), 0);
	run_end(log);
}

/* ---- verifying ------------------------------------------------------- */

struct outcome {
	enum elog_verify_result result;
	char out[1024];
};

static void
verify(struct outcome *o)
{
	char *files[] = {path};
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	o->result = elog_verify_files(files, 1, f);
	fclose(f);
	snprintf(o->out, sizeof(o->out), "%s", buf);
	free(buf);
}

/* The one break line names path:line and contains what. */
static void
expect_break(const struct outcome *o, unsigned line, const char *what)
{
	char where[96];

	snprintf(where, sizeof(where), "%s:%u: ", path, line);
	if (o->result != ELOG_VERIFY_BROKEN || strncmp(o->out, where, strlen(where)) != 0 ||
	    strstr(o->out, what) == NULL || strchr(o->out, '\n') != o->out + strlen(o->out) - 1)
		fail_msg("expected one break \"%s...%s\", got result %d: %s", where, what,
		         o->result, o->out);
}

static void
expect_holds(const struct outcome *o, const char *summary)
{
	if (o->result != ELOG_VERIFY_OK || strstr(o->out, summary) == NULL)
		fail_msg("expected the chains to hold (\"%s\"), got result %d: %s", summary,
		         o->result, o->out);
}

/* ---- the writer's chain ---------------------------------------------- */

static const char *
field_after(const char *line, const char *name)
{
	const char *p = strstr(line, name);

	assert_non_null(p);
	return p + strlen(name);
}

/* seq counts every line from task-start on; prev is the SHA-256 of the
 * previous line's bytes, newline excluded (computed here with OpenSSL's
 * one-shot SHA256, not the writer's code); task-start's prev is 64 zeros;
 * the fields come last; a second run in the same file starts again. */
static void
test_writer_seq_prev(void **state)
{
	struct text t;
	unsigned char h[SHA256_DIGEST_LENGTH];
	char hex[65], want[128];

	(void)state;
	write_run("t-1", 3);
	write_run("t-2", 1);
	text_read(&t);
	assert_int_equal(t.n, 5 + 3);
	for (size_t i = 0; i < t.n; i++) {
		uint64_t seq = i < 5 ? i : i - 5;

		snprintf(want, sizeof(want), ",\"seq\":%llu,\"prev\":\"", (unsigned long long)seq);
		assert_non_null(strstr(t.line[i], want));
		if (seq == 0) {
			assert_non_null(strstr(t.line[i], "\"kind\":\"task-start\""));
			assert_memory_equal(field_after(t.line[i], "\"prev\":\""),
			                    ELOG_CHAIN_GENESIS, 64);
		} else {
			SHA256((const unsigned char *)t.line[i - 1], strlen(t.line[i - 1]), h);
			elog_sha256_hex(h, hex);
			assert_memory_equal(field_after(t.line[i], "\"prev\":\""), hex, 64);
		}
		/* The chain's fields are the line's last. */
		assert_string_equal(field_after(t.line[i], "\"prev\":\"") + 64, "\"}");
	}
	text_free(&t);
}

/* A line the budget drops is never sealed: no gap. The log-budget line
 * and every later line are in the chain. */
static void
test_budget_keeps_the_chain(void **state)
{
	struct elog *log;
	struct outcome o;
	struct text t;
	char name[32];
	struct elog_event q = {.kind = "dns", .port = -1, .verdict = "deny", .reason = "no match"};

	(void)state;
	log = run_start("t-b");
	elog_set_budget(log, 1200);
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof(name), "n%d.evil.test", i);
		q.host = name;
		assert_int_equal(elog_event_agg(log, &q), 0);
	}
	assert_true(elog_budget_spent(log));
	run_end(log);
	text_read(&t);
	/* Some events had no line, and the chain still holds. */
	assert_true(t.n < 40);
	text_free(&t);
	verify(&o);
	expect_holds(&o, "1 chain holds");
	assert_non_null(strstr(o.out, "1 spent the log budget"));
}

/* A write that fails (here a file size limit) is cut back and fails the
 * log: the file ends in the last whole line, the chain holds up to it,
 * and only the missing task-end says the run did not end well. */
static void
test_failed_write_keeps_the_chain(void **state)
{
	struct outcome o;
	pid_t pid;
	int status;

	(void)state;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = {.rlim_cur = 2000, .rlim_max = 2000};
		struct elog *log;
		int i;

		signal(SIGXFSZ, SIG_IGN);
		log = run_start("t-f");
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			_exit(2);
		for (i = 0; i < 100 && elog_event(log, &ev_deny) == 0; i++)
			;
		/* Failed before the limit allowed 100 lines; stays failed. */
		_exit(i < 100 && elog_failed(log) && elog_event(log, &ev_deny) < 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	verify(&o);
	expect_holds(&o, "1 chain holds");
	assert_non_null(strstr(o.out, "1 without task-end"));
}

/* ---- verify: what holds ---------------------------------------------- */

static void
test_verify_appended_runs(void **state)
{
	struct outcome o;

	(void)state;
	write_run("t-1", 4);
	write_run("t-2", 0);
	write_run("t-1", 2); /* a task id again: a new chain */
	verify(&o);
	expect_holds(&o, "3 chains hold: 12 of 12 lines chained in 1 file\n");
}

/* Two runs appending to one file at the same time: their lines
 * interleave, each chain holds on its own. */
static void
test_verify_interleaved_runs(void **state)
{
	struct elog *a, *b;
	struct outcome o;

	(void)state;
	a = run_start("t-a");
	b = run_start("t-b");
	for (int i = 0; i < 5; i++) {
		assert_int_equal(elog_event(i % 2 ? a : b, &ev_allow), 0);
		assert_int_equal(elog_event(a, &ev_deny), 0);
	}
	run_end(b);
	assert_int_equal(elog_event(a, &ev_allow), 0);
	run_end(a);
	verify(&o);
	expect_holds(&o, "2 chains hold: 15 of 15 lines chained");
}

/* A log from before the chain: nothing to check, and said so. */
static void
test_verify_unchained(void **state)
{
	struct outcome o;
	FILE *f = fopen(path, "w");

	(void)state;
	assert_non_null(f);
	fprintf(f,
	        "{\"ts\":\"2026-11-30T10:24:40.001Z\",\"task\":\"7f3a\",\"kind\":\"task-start\"}\n"
	        "{\"ts\":\"2026-11-30T10:24:41.001Z\",\"task\":\"7f3a\",\"kind\":\"tcp\"}\n");
	fclose(f);
	write_run("t-new", 1);
	verify(&o);
	if (o.result != ELOG_VERIFY_UNCHAINED ||
	    strstr(o.out, "1 chain holds: 3 of 5 lines chained") == NULL ||
	    strstr(o.out, "2 lines carry no chain") == NULL)
		fail_msg("got %d: %s", o.result, o.out);
}

/* Lines removed from a chain's end, at a line boundary: no chain can show
 * it; the chain without task-end is counted. */
static void
test_verify_tail_removed(void **state)
{
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	text_delete(&t, t.n - 1);
	text_delete(&t, t.n - 1);
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_holds(&o, "1 without task-end");
}

/* ---- verify: every kind of break ------------------------------------ */

/* One byte of line 3 (of 6) changed: line 4's prev no longer matches it,
 * line 5 confirms line 4, so line 3 is named. */
static void
test_break_edit_byte(void **state)
{
	struct outcome o;
	struct text t;
	char *p;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	p = strstr(t.line[2], "203.0.113.66");
	assert_non_null(p);
	p[11] = '7'; /* 203.0.113.67 */
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 3, "changed after it was written: line 4's prev");
}

/* A byte of the last event before task-end: task-end's prev does not
 * match, and nothing comes after task-end to tell which one changed. */
static void
test_break_edit_before_end(void **state)
{
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 2);
	text_read(&t);
	t.line[2][strlen("{\"ts\":\"2")] ^= 1; /* the year */
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 4, "prev is not the SHA-256 of line 3");
}

/* An edited prev field: the line itself is named (its prev does not
 * match the line before, and the line after does not confirm it). */
static void
test_break_edit_prev(void **state)
{
	struct outcome o;
	struct text t;
	char *p;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	p = strstr(t.line[3], "\"prev\":\"") + 8;
	*p = *p == 'a' ? 'b' : 'a';
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 4, "prev is not the SHA-256 of line 3");
}

static void
test_break_delete_line(void **state)
{
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	text_delete(&t, 2);
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 3, "seq 3 where 2 was expected after line 2");
}

static void
test_break_reorder(void **state)
{
	struct outcome o;
	struct text t;
	char *tmp;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	tmp = t.line[2];
	t.line[2] = t.line[3];
	t.line[3] = tmp;
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 3, "seq 3 where 2 was expected");
}

/* Inserted: a copy of a line of the chain; a line without seq/prev; a
 * line of a task that never started. */
static void
test_break_insert(void **state)
{
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	text_insert(&t, 3, t.line[1]);
	text_write(&t);
	verify(&o);
	expect_break(&o, 4, "seq 1 where 3 was expected");

	text_delete(&t, 3);
	text_insert(&t, 3,
	            "{\"ts\":\"2026-11-30T10:24:41.001Z\",\"task\":\"t-1\",\"kind\":\"tcp\"}");
	text_write(&t);
	verify(&o);
	expect_break(&o, 4, "no seq and prev inside the chain");

	text_delete(&t, 3);
	text_insert(&t, 3,
	            "{\"ts\":\"2026-11-30T10:24:41.001Z\",\"task\":\"forged\",\"kind\":\"tcp\","
	            "\"seq\":1,\"prev\":\"" ELOG_CHAIN_GENESIS "\"}");
	text_write(&t);
	verify(&o);
	expect_break(&o, 4, "no task-start of task \"forged\"");

	/* A forged task-start that does not begin a chain; a prev that is
	 * no SHA-256. */
	text_delete(&t, 3);
	text_insert(
	        &t, 3,
	        "{\"ts\":\"2026-11-30T10:24:41.001Z\",\"task\":\"forged\",\"kind\":\"task-start\","
	        "\"seq\":3,\"prev\":\"" ELOG_CHAIN_GENESIS "\"}");
	text_write(&t);
	verify(&o);
	expect_break(&o, 4, "a task-start that does not begin a chain (seq 3");
	text_delete(&t, 3);
	text_insert(
	        &t, 3,
	        "{\"ts\":\"2026-11-30T10:24:41.001Z\",\"task\":\"forged\",\"kind\":\"task-start\","
	        "\"seq\":0,\"prev\":\"" ELOG_CHAIN_GENESIS "1\"}");
	text_write(&t);
	verify(&o);
	expect_break(&o, 4, "seq and prev must both be there");
	text_free(&t);
}

/* Cut in the middle of the last line (a crash, or truncate(1)); and a
 * whole last line without its newline. */
static void
test_break_truncate(void **state)
{
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 4);
	text_read(&t);
	t.line[t.n - 1][20] = '\0';
	t.cut_last = true;
	text_write(&t);
	verify(&o);
	expect_break(&o, 6, "the last line is cut short");

	text_delete(&t, t.n - 1);
	text_write(&t);
	verify(&o);
	expect_break(&o, 5, "the last line is cut short (no newline)");
	text_free(&t);
}

/* Not a log line; a line before any task-start. */
static void
test_break_garbage(void **state)
{
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 2);
	text_read(&t);
	text_insert(&t, 2, "hello");
	text_write(&t);
	verify(&o);
	expect_break(&o, 3, "not a log line");
	text_delete(&t, 2);
	text_insert(&t, 2, "");
	text_write(&t);
	verify(&o);
	expect_break(&o, 3, "not a log line: an empty line");
	text_delete(&t, 2);
	/* The run's task-start gone: its first event has nothing before it. */
	text_delete(&t, 0);
	text_write(&t);
	verify(&o);
	expect_break(&o, 1, "no task-start of task \"t-1\"");
	text_free(&t);
}

/* An over-long line (the reader skips to its newline) is a break, and
 * the line count after it stays right. */
static void
test_break_too_long(void **state)
{
	static char big[ELOG_LINE_MAX + 100];
	struct outcome o;
	struct text t;

	(void)state;
	write_run("t-1", 2);
	text_read(&t);
	memset(big, 'x', sizeof(big) - 1);
	text_insert(&t, 1, big);
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 2, "not a log line: longer than 65536 bytes");
}

/* A break in another run's chain is found while a prev mismatch is
 * still being pinned down: the earlier one is reported. */
static void
test_break_first_wins(void **state)
{
	struct elog *a, *b;
	struct outcome o;
	struct text t;

	(void)state;
	a = run_start("t-a");                          /* 1 */
	b = run_start("t-b");                          /* 2 */
	assert_int_equal(elog_event(a, &ev_allow), 0); /* 3 */
	assert_int_equal(elog_event(a, &ev_allow), 0); /* 4 */
	assert_int_equal(elog_event(b, &ev_allow), 0); /* 5 */
	assert_int_equal(elog_event(b, &ev_allow), 0); /* 6 */
	run_end(a);                                    /* 7 */
	run_end(b);                                    /* 8 */
	text_read(&t);
	t.line[2][strlen("{\"ts\":\"2")] ^= 1; /* line 3: line 4 mismatches */
	text_delete(&t, 4);                    /* b's seq gap at (new) line 5 */
	text_write(&t);
	text_free(&t);
	verify(&o);
	expect_break(&o, 4, "prev is not the SHA-256 of line 3");
}

/* The checker alone: lines fed one by one, seq numbers from the writer's
 * sealing, and its counts. */
static void
test_checker_counts(void **state)
{
	struct elog_verify *v = elog_verify_new();
	struct elog_verify_break brk;
	struct elog_chain c;
	char storage[512];
	struct elog_buf b;

	(void)state;
	assert_non_null(v);
	elog_chain_init(&c);
	for (int i = 0; i < 3; i++) {
		struct elog_line l = {.lineno = (uint64_t)i + 1};

		elog_buf_init(&b, storage, sizeof(storage));
		elog_buf_puts(&b, "{\"ts\":\"2026-12-01T00:00:00.000Z\",\"task\":\"x\",\"kind\":");
		elog_buf_puts(&b, i == 0 ? "\"task-start\"" : i == 2 ? "\"task-end\"" : "\"dns\"");
		if (i == 0)
			elog_chain_restart(&c);
		assert_int_equal(elog_chain_seal(&c, &b), 0);
		l.data = storage;
		l.len = b.len - 1;
		assert_int_equal(elog_verify_line(v, &l, &brk), 0);
		elog_chain_commit(&c);
	}
	assert_int_equal(elog_verify_end(v, &brk), 0);
	assert_int_equal(elog_verify_stats(v)->lines, 3);
	assert_int_equal(elog_verify_stats(v)->chained, 3);
	assert_int_equal(elog_verify_stats(v)->chains, 1);
	assert_int_equal(elog_verify_stats(v)->ended, 1);
	elog_verify_free(v);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(test_writer_seq_prev, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_budget_keeps_the_chain, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_failed_write_keeps_the_chain, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_verify_appended_runs, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_verify_interleaved_runs, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_verify_unchained, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_verify_tail_removed, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_edit_byte, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_edit_before_end, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_edit_prev, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_delete_line, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_reorder, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_insert, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_truncate, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_garbage, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_too_long, setup, teardown),
	        cmocka_unit_test_setup_teardown(test_break_first_wins, setup, teardown),
	        cmocka_unit_test(test_checker_counts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
