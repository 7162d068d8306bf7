/* policy_name_normalize: lowercase, one trailing dot, every rejection
 * reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "policy/policy.h"

static void
ok(const char *in, const char *want)
{
	char out[256];
	const char *why = NULL;

	if (policy_name_normalize(in, out, sizeof(out), &why) != 0)
		fail_msg("'%s' refused: %s", in, why);
	assert_string_equal(out, want);
}

static void
bad(const char *in, const char *reason)
{
	char out[256];
	const char *why = NULL;

	if (policy_name_normalize(in, out, sizeof(out), &why) == 0)
		fail_msg("'%s' accepted as '%s'", in, out);
	assert_string_equal(why, reason);
	assert_string_equal(out, "");
}

static void
test_accepts(void **state)
{
	(void)state;
	ok("pypi.org", "pypi.org");
	ok("PyPI.ORG", "pypi.org");
	ok("pypi.org.", "pypi.org");
	ok("localhost", "localhost");
	ok("_dmarc.example.com", "_dmarc.example.com");
	ok("xn--bcher-kva.de", "xn--bcher-kva.de");
	ok("a-b.c-d.e", "a-b.c-d.e");
	ok("r3---sn-abc.example", "r3---sn-abc.example");
	ok("xn--p1ai", "xn--p1ai");
	/* Numeric names normalise (the proxy normalises untrusted Host and
	 * SNI before matching); the matcher never lets them match a host
	 * rule (test_match.c) and the loader refuses them as rules. */
	ok("123.456", "123.456");
	ok("1.0x7F", "1.0x7f");
}

static void
test_hyphens(void **state)
{
	(void)state;
	bad("-bad-.example", "label starts or ends with a hyphen");
	bad("-a.example", "label starts or ends with a hyphen");
	bad("a-.example", "label starts or ends with a hyphen");
	bad("a.-example", "label starts or ends with a hyphen");
	bad("a.example-", "label starts or ends with a hyphen");
	bad("a.example-.", "label starts or ends with a hyphen");
	bad("-", "label starts or ends with a hyphen");
	bad("x.-.y", "label starts or ends with a hyphen");
	/* the first problem from the left is the one reported */
	bad("a..-b", "empty label");
}

static void
test_rejects(void **state)
{
	char label[80], name[300];

	(void)state;
	bad("", "empty name");
	bad(".", "empty name");
	bad("a..b", "empty label");
	bad(".a", "empty label");
	bad("a.b..", "empty label");
	bad("bücher.de", "non-ASCII name; write it as punycode (xn--...)");
	bad("a.\xff", "non-ASCII name; write it as punycode (xn--...)");
	bad("*.example.com", "'*' is only allowed as a whole leading label (*.example.com)");
	bad("a b.com", "character not allowed in a name (letters, digits, '-', '_' and '.')");
	bad("a/b", "character not allowed in a name (letters, digits, '-', '_' and '.')");
	bad("a:443", "character not allowed in a name (letters, digits, '-', '_' and '.')");
	memset(label, 'x', 64);
	label[64] = '\0';
	bad(label, "label longer than 63 characters");
	label[63] = '\0';
	ok(label, label);
	memset(name, 'a', 254);
	name[63] = name[127] = name[191] = '.';
	name[254] = '\0';
	bad(name, "name longer than 253 characters");
	name[253] = '\0';
	ok(name, name);
	name[253] = '.'; /* 253 plus the one trailing dot */
	name[254] = '\0';
	{
		char out[256];

		assert_int_equal(policy_name_normalize(name, out, sizeof(out), NULL), 0);
		assert_int_equal(strlen(out), 253);
	}
}

static void
test_small_buffer(void **state)
{
	char out[4];
	const char *why = NULL;

	(void)state;
	assert_int_equal(policy_name_normalize("abcd", out, sizeof(out), &why), -1);
	assert_string_equal(out, "");
	assert_int_equal(policy_name_normalize("abc", out, sizeof(out), &why), 0);
	assert_string_equal(out, "abc");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_accepts),
	        cmocka_unit_test(test_rejects),
	        cmocka_unit_test(test_hyphens),
	        cmocka_unit_test(test_small_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
