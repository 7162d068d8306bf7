/* The one decision (policy/verdict.h) over a table of cases: every source
 * of a name, both modes, ECH, DNS-learned names against cidr rules, later
 * claims; and the table of reasons: every value has a distinct token that
 * parses back, and a sentence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "policy/verdict.h"
#include "tests/policy/util.h"

static const char *const yaml = "version: 1\n"                  /* 1 */
                                "allow:\n"                      /* 2 */
                                "  - host: pypi.org\n"          /* 3 */
                                "  - host: ech.test\n"          /* 4 */
                                "    ech: allow\n"              /* 5 */
                                "  - cidr: 203.0.113.0/24\n"    /* 6 */
                                "    ports: [22]\n"             /* 7 */
                                "  - cidr: 198.51.100.0/24\n"   /* 8 */
                                "    ports: [443]\n"            /* 9 */
                                "deny:\n"                       /* 10 */
                                "  - host: upload.pypi.org\n"   /* 11 */
                                "  - cidr: 198.51.100.66/32\n"; /* 12 */

struct vcase {
	const char *what;
	enum policy_mode mode;
	enum verdict_source src;
	const char *name;
	bool ip_literal;
	const char *addr;
	uint16_t port;
	const char *learned;
	bool ech;
	const char *claim;
	/* expected */
	enum verdict verdict;
	enum verdict_reason reason;
	const char *rule;
	const char *message; /* a substring of verdict_message, or NULL */
};

#define E POLICY_MODE_ENFORCE
#define A POLICY_MODE_AUDIT

static const struct vcase cases[] = {
        {"CONNECT allowed", E, VERDICT_SRC_CONNECT, "pypi.org", false, NULL, 443, NULL, false, NULL,
         VERDICT_ALLOW, VR_NONE, "t.yaml:3", NULL},
        {"CONNECT no rule", E, VERDICT_SRC_CONNECT, "evil.test", false, NULL, 443, NULL, false,
         NULL, VERDICT_DENY, VR_NO_RULE, NULL, "no rule allows evil.test port 443"},
        {"SNI no rule", E, VERDICT_SRC_SNI, "evil.test", false, NULL, 443, NULL, false, NULL,
         VERDICT_DENY, VR_NO_RULE, NULL, "no rule allows evil.test port 443"},
        {"Host no rule, audit", A, VERDICT_SRC_HOST, "evil.test", false, NULL, 80, NULL, false,
         NULL, VERDICT_AUDIT_DENY, VR_NO_RULE, NULL, "no rule allows evil.test port 80"},
        {"absolute-form deny rule", E, VERDICT_SRC_ABSOLUTE, "upload.pypi.org", false, NULL, 443,
         NULL, false, NULL, VERDICT_DENY, VR_RULE_DENY, "t.yaml:11", "denied by rule t.yaml:11"},
        {"wrong port", E, VERDICT_SRC_CONNECT, "pypi.org", false, NULL, 22, NULL, false, NULL,
         VERDICT_DENY, VR_NO_RULE, NULL, "no rule allows pypi.org port 22"},
        {"IP literal by cidr", E, VERDICT_SRC_CONNECT, "203.0.113.9", true, NULL, 22, NULL, false,
         NULL, VERDICT_ALLOW, VR_NONE, "t.yaml:6", NULL},
        {"IP literal no cidr", E, VERDICT_SRC_CONNECT, "192.0.2.1", true, NULL, 443, NULL, false,
         NULL, VERDICT_DENY, VR_NO_RULE, NULL, "no rule allows address 192.0.2.1 port 443"},
        {"no name at all", E, VERDICT_SRC_CONNECT, NULL, false, NULL, 443, NULL, false, NULL,
         VERDICT_DENY, VR_BAD_NAME, NULL, NULL},
        {"ECH without opt-in", E, VERDICT_SRC_SNI, "pypi.org", false, NULL, 443, NULL, true, NULL,
         VERDICT_DENY, VR_ECH, "t.yaml:3", "encrypted_client_hello"},
        {"ECH with opt-in", E, VERDICT_SRC_SNI, "ech.test", false, NULL, 443, NULL, true, NULL,
         VERDICT_ALLOW, VR_NONE, "t.yaml:4", NULL},
        {"ECH, audit", A, VERDICT_SRC_SNI, "pypi.org", false, NULL, 443, NULL, true, NULL,
         VERDICT_AUDIT_DENY, VR_ECH, "t.yaml:3", NULL},
        {"no name, cidr allows", E, VERDICT_SRC_NONE, NULL, false, "203.0.113.9", 22, NULL, false,
         NULL, VERDICT_ALLOW, VR_NONE, "t.yaml:6", NULL},
        {"no name, nothing", E, VERDICT_SRC_NONE, NULL, false, "192.0.2.9", 22, NULL, false, NULL,
         VERDICT_DENY, VR_NO_RULE, NULL, "no rule allows address 192.0.2.9 port 22 (no name"},
        {"no name, cidr deny", E, VERDICT_SRC_NONE, NULL, false, "198.51.100.66", 443, NULL, false,
         NULL, VERDICT_DENY, VR_RULE_DENY, "t.yaml:12", "address 198.51.100.66 port 443"},
        {"learned, allowed name", E, VERDICT_SRC_LEARNED, NULL, false, "192.0.2.10", 443,
         "pypi.org", false, NULL, VERDICT_ALLOW, VR_NONE, "t.yaml:3", NULL},
        {"learned, name not allowed", E, VERDICT_SRC_LEARNED, NULL, false, "192.0.2.10", 443,
         "evil.test", false, NULL, VERDICT_DENY, VR_NO_RULE, NULL,
         "no rule allows evil.test port 443"},
        {"learned, cidr deny wins", E, VERDICT_SRC_LEARNED, NULL, false, "198.51.100.66", 443,
         "pypi.org", false, NULL, VERDICT_DENY, VR_RULE_DENY, "t.yaml:12", NULL},
        {"learned, later ClientHello for another", E, VERDICT_SRC_LEARNED, NULL, false,
         "192.0.2.10", 443, "pypi.org", false, "evil.test", VERDICT_DENY, VR_NAME_CHANGED, NULL,
         "decided for pypi.org, then the bytes name evil.test"},
        {"CONNECT, tunnel names the same (case, dot)", E, VERDICT_SRC_CONNECT, "pypi.org", false,
         NULL, 443, NULL, false, "PyPI.org.", VERDICT_ALLOW, VR_NONE, "t.yaml:3", NULL},
        {"CONNECT, tunnel names another", E, VERDICT_SRC_CONNECT, "pypi.org", false, NULL, 443,
         NULL, false, "evil.test", VERDICT_DENY, VR_NAME_CHANGED, NULL,
         "decided for pypi.org, then the bytes name evil.test"},
        {"CONNECT, tunnel names another, audit", A, VERDICT_SRC_CONNECT, "pypi.org", false, NULL,
         443, NULL, false, "evil.test", VERDICT_AUDIT_DENY, VR_NAME_CHANGED, NULL, NULL},
        {"IP literal CONNECT, same address spelt mapped", E, VERDICT_SRC_CONNECT, "203.0.113.9",
         true, NULL, 22, NULL, false, "::ffff:203.0.113.9", VERDICT_ALLOW, VR_NONE, "t.yaml:6",
         NULL},
        {"cidr, later name decided: denied", E, VERDICT_SRC_NONE, NULL, false, "198.51.100.5", 443,
         NULL, false, "evil.test", VERDICT_DENY, VR_NO_RULE, NULL,
         "no rule allows evil.test port 443"},
        {"cidr, later name decided: allowed", E, VERDICT_SRC_NONE, NULL, false, "198.51.100.5", 443,
         NULL, false, "pypi.org", VERDICT_ALLOW, VR_NONE, "t.yaml:3", NULL},
        {"cidr, later address literal stands", E, VERDICT_SRC_NONE, NULL, false, "198.51.100.5",
         443, NULL, false, "192.0.2.1", VERDICT_ALLOW, VR_NONE, "t.yaml:8", NULL},
        {"DNS allowed on some port", E, VERDICT_SRC_DNS, "pypi.org", false, NULL, 0, NULL, false,
         NULL, VERDICT_ALLOW, VR_NONE, "t.yaml:3", NULL},
        {"DNS no rule", E, VERDICT_SRC_DNS, "evil.test", false, NULL, 0, NULL, false, NULL,
         VERDICT_DENY, VR_NO_RULE, NULL, "no rule allows evil.test on any port"},
        {"DNS deny rule, audit", A, VERDICT_SRC_DNS, "upload.pypi.org", false, NULL, 0, NULL, false,
         NULL, VERDICT_AUDIT_DENY, VR_RULE_DENY, "t.yaml:11",
         "upload.pypi.org: denied by rule t.yaml:11"},
};

static void
test_cases(void **state)
{
	const struct policy *p = *state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct vcase *k = &cases[i];
		struct sockaddr_storage ss;
		struct verdict_query q = {
		        .src = k->src,
		        .name = k->name,
		        .ip_literal = k->ip_literal,
		        .addr = k->addr != NULL ? addr(&ss, k->addr) : NULL,
		        .port = k->port,
		        .learned = k->learned,
		        .ech = k->ech,
		        .claim = k->claim,
		};
		struct verdict_result r;
		char msg[256];

		verdict_decide(p, k->mode, &q, &r);
		verdict_message(&r, &q, msg, sizeof(msg));
		if (r.verdict != k->verdict || r.reason != k->reason ||
		    (k->rule == NULL) != (r.rule == NULL) ||
		    (k->rule != NULL && strcmp(k->rule, r.rule) != 0) ||
		    (k->message != NULL && strstr(msg, k->message) == NULL))
			fail_msg("%s: got %s %s rule %s \"%s\"", k->what, verdict_str(r.verdict),
			         verdict_reason_token(r.reason), r.rule != NULL ? r.rule : "-",
			         msg);
	}
}

/* A policy's own mode is not what decides: the caller's is. */
static void
test_mode_is_the_callers(void **state)
{
	struct policy *p = *state;
	struct verdict_query q = {.src = VERDICT_SRC_CONNECT, .name = "evil.test", .port = 443};
	struct verdict_result r;

	policy_set_mode(p, POLICY_MODE_AUDIT);
	verdict_decide(p, POLICY_MODE_ENFORCE, &q, &r);
	policy_set_mode(p, POLICY_MODE_ENFORCE);
	assert_int_equal(r.verdict, VERDICT_DENY);
}

static void
test_table(void **state)
{
	(void)state;
	assert_string_equal(verdict_reason_token(VR_NONE), "");
	for (unsigned i = 1; i < VR_COUNT; i++) {
		const char *t = verdict_reason_token((enum verdict_reason)i);

		assert_true(t[0] != '\0');
		/* tokens are lowercase words joined by '-' */
		for (const char *c = t; *c != '\0'; c++)
			assert_true((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
			            *c == '-');
		assert_int_equal(verdict_reason_parse(t), i);
		assert_true(verdict_reason_text((enum verdict_reason)i)[0] != '\0');
		/* an HTTP status comes with a Proxy-Status error */
		if (verdict_reason_status((enum verdict_reason)i) != 0)
			assert_true(verdict_reason_error((enum verdict_reason)i)[0] != '\0');
	}
	assert_int_equal(verdict_reason_parse("no match"), VR_COUNT);
	assert_int_equal(verdict_reason_parse(""), VR_COUNT);
	assert_string_equal(verdict_reason_token((enum verdict_reason)9999), "");
	assert_int_equal(verdict_reason_status(VR_NO_RULE), 403);
	assert_string_equal(verdict_reason_error(VR_NO_RULE), "http_request_denied");
	assert_string_equal(verdict_reason_error(VR_GUARD), "destination_ip_prohibited");
	assert_int_equal(verdict_reason_status(VR_DNS_TIMEOUT), 504);
	assert_int_equal(verdict_reason_status(VR_NAME_CHANGED), 421);
	assert_string_equal(verdict_str(VERDICT_ALLOW), "allow");
	assert_string_equal(verdict_str(VERDICT_DENY), "deny");
	assert_string_equal(verdict_str(VERDICT_AUDIT_DENY), "audit-deny");
}

static void
test_same_name(void **state)
{
	(void)state;
	assert_true(verdict_same_name("a.test", "A.TEST."));
	assert_false(verdict_same_name("a.test", "a.test.."));
	assert_false(verdict_same_name("a.test", "b.test"));
	assert_true(verdict_same_name("2001:db8::1", "2001:DB8:0::1"));
	assert_true(verdict_same_name("192.0.2.1", "::ffff:192.0.2.1"));
	assert_false(verdict_same_name("192.0.2.1", "192.0.2.2"));
}

static int
setup(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(yaml, &d);

	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "%s\n", d.lines[i]);
	policy_diag_clear(&d);
	*state = p;
	return p == NULL ? -1 : 0;
}

static int
teardown(void **state)
{
	policy_free(*state);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_cases),
	        cmocka_unit_test(test_mode_is_the_callers),
	        cmocka_unit_test(test_table),
	        cmocka_unit_test(test_same_name),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
