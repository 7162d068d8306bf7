/* Upload-sink warnings (exact rules, wildcards over a sink, cidr rules
 * over DoH resolver addresses) and the summary text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "tests/policy/util.h"

static void
expect_warnings(const char *yaml, size_t n, const char *const *want)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(yaml, &d);

	assert_non_null(p);
	assert_int_equal(d.n_lines, 0);
	for (size_t i = 0; i < d.n_warnings; i++)
		if (i >= n || strcmp(d.warnings[i], want[i]) != 0)
			fail_msg("warning %zu: '%s', expected '%s'", i, d.warnings[i],
			         i < n ? want[i] : "(none)");
	assert_int_equal(d.n_warnings, n);
	policy_free(p);
	policy_diag_clear(&d);
}

static void
test_no_warnings(void **state)
{
	(void)state;
	expect_warnings(
	        "version: 1\nallow:\n  - host: pypi.org\n  - host: \"*.pythonhosted.org\"\n", 0,
	        NULL);
	/* a denied sink is fine */
	expect_warnings("version: 1\nallow:\n  - host: \"*.github.com\"\ndeny:\n  - host: "
	                "gist.github.com\n",
	                0, NULL);
	/* a port the sink does not serve on is fine */
	expect_warnings("version: 1\nallow:\n  - host: pastebin.com\n    ports: [22]\n", 0, NULL);
}

static void
test_exact_sink(void **state)
{
	static const char *const want[] = {
	        "t.yaml:3: allows pastebin.com:443, a paste site that accepts uploads from anyone",
	        "t.yaml:4: allows webhook.site:80, a webhook catcher that accepts uploads from "
	        "anyone",
	};

	(void)state;
	expect_warnings("version: 1\nallow:\n  - host: pastebin.com\n  - host: webhook.site\n    "
	                "ports: [80]\n",
	                2, want);
}

static void
test_wildcard_sink(void **state)
{
	static const char *const want[] = {
	        "t.yaml:3: allows s3.amazonaws.com:443, a public object storage (S3) that accepts "
	        "uploads from anyone",
	        "t.yaml:3: allows example-bucket.s3.amazonaws.com:443, a public object storage "
	        "(S3) that accepts uploads "
	        "from anyone",
	        "t.yaml:3: allows example-bucket.s3.us-east-1.amazonaws.com:443, a public object "
	        "storage (S3) that "
	        "accepts uploads from anyone",
	};

	(void)state;
	expect_warnings("version: 1\nallow:\n  - host: \"*.amazonaws.com\"\n", 3, want);
}

static void
test_doh_cidr(void **state)
{
	static const char *const want[] = {
	        "t.yaml:3: allows 1.1.1.1:443, a public DNS-over-HTTPS resolver (a way around the "
	        "DNS listener)",
	};

	(void)state;
	expect_warnings("version: 1\nallow:\n  - cidr: 1.1.1.0/24\n", 1, want);
}

static void
test_describe(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(
	        "version: 1\nallow:\n  - host: a.test\n  - host: \"*.b.test\"\n    ports: [443, "
	        "\"8000-8100\"]\ndeny:\n  - cidr: 203.0.113.0/24\n",
	        &d);
	char *s;

	(void)state;
	assert_non_null(p);
	s = policy_describe(p);
	assert_string_equal(s, "3 rules: 2 allow, 1 deny; anything else is denied\n"
	                       "allow a.test ports 80,443  (t.yaml:3)\n"
	                       "allow *.b.test ports 443,8000-8100 (subdomains only)  (t.yaml:4)\n"
	                       "deny  203.0.113.0/24 ports 80,443  (t.yaml:7)\n");
	free(s);
	policy_free(p);
	policy_diag_clear(&d);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_no_warnings),   cmocka_unit_test(test_exact_sink),
	        cmocka_unit_test(test_wildcard_sink), cmocka_unit_test(test_doh_cidr),
	        cmocka_unit_test(test_describe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
