/* Denials said on stderr (elog/notice.c): once per destination with the
 * reason and the fix, repeats counted, sandbox-controlled bytes escaped,
 * a bounded memory of destinations, and the summary at the end. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "elog/elog.h"
#include "elog/notice.h"

struct out {
	char *buf;
	size_t len;
	FILE *f;
};

static void
out_open(struct out *o)
{
	o->buf = NULL;
	o->len = 0;
	o->f = open_memstream(&o->buf, &o->len);
	assert_non_null(o->f);
}

static char *
out_close(struct out *o)
{
	fclose(o->f);
	return o->buf;
}

static size_t
lines(const char *s)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == '\n';
	return n;
}

static struct elog_event
deny(const char *kind, const char *host, int port, const char *reason, const char *detail)
{
	return (struct elog_event){.kind = kind, .host = host, .port = port, .verdict = "deny",
	                           .reason = reason, .detail = detail};
}

static void
test_once_per_destination(void **state)
{
	struct out o;
	struct elog_notice *n;
	struct elog_event a = deny("connect", "evil.test", 443, "no-rule",
	                           "no rule allows evil.test port 443");
	struct elog_event allow = {.kind = "connect", .host = "ok.test", .port = 443,
	                           .verdict = "allow"};
	char *text;

	out_open(&o);
	n = elog_notice_new(o.f, true);
	assert_non_null(n);
	elog_notice_event(n, &a);
	elog_notice_event(n, &a);
	elog_notice_event(n, &allow);
	a.count = 5; /* a line for 5 repeats */
	elog_notice_event(n, &a);
	assert_int_equal(elog_notice_dests(n), 1);
	assert_int_equal(elog_notice_attempts(n), 7);
	elog_notice_summary(n, "/tmp/x.jsonl");
	elog_notice_free(n);
	text = out_close(&o);
	assert_int_equal(lines(text), 2);
	assert_non_null(strstr(text, "airlock: refused evil.test:443: no rule allows evil.test port "
	                             "443 (no-rule); to allow it, add {host: evil.test, ports: "
	                             "[443]} to the policy's allow list\n"));
	assert_non_null(strstr(text, "airlock: refused 1 destination (7 attempts): evil.test:443; "
	                             "details: airlock log show --denied /tmp/x.jsonl\n"));
	free(text);
}

static void
test_fixes(void **state)
{
	struct out o;
	struct elog_notice *n;
	struct elog_event ev[] = {
	        deny("dns", "gone.test", -1, "no-rule", "no rule allows gone.test on any port"),
	        deny("connect", "203.0.113.5", 80, "no-rule", NULL),
	        deny("connect", "2001:db8::5", 80, "no-rule", NULL),
	        /* Without a detail (which names the rule), the rule is said. */
	        deny("tls", "up.test", 443, "denied-by-rule", NULL),
	        deny("connect", "meta.test", 80, "address-guard", "169.254.169.254 is link-local"),
	};
	char *text;

	ev[3].rule = "p.yaml:7";
	out_open(&o);
	n = elog_notice_new(o.f, true);
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
		elog_notice_event(n, &ev[i]);
	elog_notice_summary(n, NULL);
	elog_notice_free(n);
	text = out_close(&o);
	assert_non_null(strstr(text, "refused gone.test (dns): no rule allows gone.test on any port "
	                             "(no-rule); to allow it, add {host: gone.test} to"));
	/* An address is opened by a cidr rule, never a host rule. */
	assert_non_null(strstr(text, "refused 203.0.113.5:80 (reason: no-rule); addresses are "
	                             "allowed only by cidr rules: {cidr: 203.0.113.5/32, ports: "
	                             "[80]}\n"));
	assert_non_null(strstr(text, "{cidr: 2001:db8::5/128, ports: [80]}"));
	assert_non_null(strstr(text, "the policy denies it at p.yaml:7\n"));
	assert_non_null(strstr(text, "only a cidr rule naming that address opens it"));
	assert_non_null(strstr(text, "refused 5 destinations (5 attempts): gone.test (dns), "
	                             "203.0.113.5:80, [2001:db8::5]:80 and 2 more\n"));
	free(text);
}

static void
test_hostile_bytes_escaped(void **state)
{
	struct out o;
	struct elog_notice *n;
	struct elog_event ev = deny("http", "a\x1b]0;pwned\x07.test", 80, "no-rule", "x\ny");
	char *text;

	out_open(&o);
	n = elog_notice_new(o.f, true);
	elog_notice_event(n, &ev);
	elog_notice_free(n);
	text = out_close(&o);
	/* One line, and no byte that drives a terminal. */
	assert_int_equal(lines(text), 1);
	assert_null(strchr(text, '\x1b'));
	assert_null(strchr(text, '\x07'));
	assert_non_null(strstr(text, "\\x1b"));
	free(text);
}

static void
test_audit_and_quiet_counting(void **state)
{
	struct out o;
	struct elog_notice *n;
	struct elog_event ev = deny("connect", "a.test", 443, "no-rule", NULL);
	char *text;

	ev.verdict = "audit-deny";
	out_open(&o);
	/* per_event false (-v says each event itself): only the summary. */
	n = elog_notice_new(o.f, false);
	elog_notice_event(n, &ev);
	elog_notice_summary(n, "l.jsonl");
	elog_notice_free(n);
	text = out_close(&o);
	assert_int_equal(lines(text), 1);
	assert_non_null(strstr(text, "airlock: audit mode enforced nothing; the policy would have "
	                             "refused 1 destination (1 attempt): a.test:443"));
	free(text);

	/* Nothing refused: nothing said. */
	out_open(&o);
	n = elog_notice_new(o.f, true);
	elog_notice_summary(n, "l.jsonl");
	elog_notice_free(n);
	text = out_close(&o);
	assert_int_equal(strlen(text), 0);
	free(text);
}

static void
test_bounded(void **state)
{
	struct out o;
	struct elog_notice *n;
	char name[64];
	char *text;

	out_open(&o);
	n = elog_notice_new(o.f, false);
	for (unsigned i = 0; i < ELOG_NOTICE_MAX_DESTS + 100; i++) {
		struct elog_event ev;

		snprintf(name, sizeof(name), "n%u.test", i);
		ev = deny("connect", name, 443, "no-rule", NULL);
		elog_notice_event(n, &ev);
	}
	assert_int_equal(elog_notice_dests(n), ELOG_NOTICE_MAX_DESTS);
	assert_int_equal(elog_notice_attempts(n), ELOG_NOTICE_MAX_DESTS + 100);
	elog_notice_summary(n, NULL);
	elog_notice_free(n);
	text = out_close(&o);
	assert_non_null(strstr(text, "(and others: only the first destinations are counted)"));
	free(text);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_once_per_destination),
	        cmocka_unit_test(test_fixes),
	        cmocka_unit_test(test_hostile_bytes_escaped),
	        cmocka_unit_test(test_audit_and_quiet_counting),
	        cmocka_unit_test(test_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
