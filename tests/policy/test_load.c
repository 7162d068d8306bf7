/* Validation: every error the loader can report, asserted on its full
 * text including file:line:column; all errors collected; nothing partial
 * ever returned; bounds on hostile input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <cmocka.h>

#include "config.h"
#include "policy/verdict.h"
#include "tests/policy/util.h"

/* Where a default build looks for presets (the source tree only with
 * -Dsource_presets=true). */
static const char *
preset_dirs_text(void)
{
	static char text[4096];

	snprintf(text, sizeof(text), "%s%s%s", AIRLOCK_SOURCE_POLICY_DIR,
	         AIRLOCK_SOURCE_POLICY_DIR[0] != '\0' ? ", " : "", AIRLOCK_POLICY_DIR);
	return text;
}

/* Load yaml; it must fail with exactly the given error lines. */
static void
expect_errors(const char *yaml, size_t n, const char *const *want)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(yaml, &d);

	if (p != NULL)
		fail_msg("loaded, expected %zu errors for:\n%s", n, yaml);
	for (size_t i = 0; i < d.n_lines && i < n; i++)
		assert_string_equal(d.lines[i], want[i]);
	if (d.n_lines != n) {
		for (size_t i = 0; i < d.n_lines; i++)
			fprintf(stderr, "got: %s\n", d.lines[i]);
		fail_msg("%zu errors, expected %zu", d.n_lines, n);
	}
	policy_diag_clear(&d);
}

static void
expect_error(const char *yaml, const char *want)
{
	expect_errors(yaml, 1, &want);
}

static void
test_version(void **state)
{
	(void)state;
	expect_error("allow: []\n",
	             "t.yaml:1:1: missing `version: 1`; every policy starts with it");
	expect_error("version: 2\n",
	             "t.yaml:1:10: version: expected 1 (the only schema version), got 2");
	expect_error("version: \"1\"\n",
	             "t.yaml:1:10: version: must be the number 1, not the string \"1\" (drop "
	             "the quotes)");
	expect_error("version: '1'\n", "t.yaml:1:10: version: must be the number 1, not the "
	                               "string \"1\" (drop the quotes)");
	expect_error("version: \"2\"\n",
	             "t.yaml:1:10: version: expected 1 (the only schema version), got 2");
	expect_error("version: [1]\n",
	             "t.yaml:1:10: version: expected 1 (the only schema version), got a list");
	expect_error("version: 1\nversion: 1\n",
	             "t.yaml:2:1: 'version' given twice (first at line 1)");
}

static void
test_top_level(void **state)
{
	(void)state;
	expect_error("", "t.yaml:1:1: empty policy; expected a mapping starting with `version: 1`");
	expect_error("- a\n",
	             "t.yaml:1:1: expected a mapping of keys (version, allow, ...), got a list");
	expect_error("version: 1\n{}: {}\n",
	             "t.yaml:2:1: keys must be plain words (version, allow, ...), got a mapping");
	{
		static const char *const want[] = {
		        "t.yaml:3:6: allow: rule keys must be plain words (host, cidr, ports, ech, inspect, "
		        "reason)",
		        "t.yaml:3:5: allow: rule without host or cidr; expected `host: NAME` or "
		        "`cidr: NET/LEN`",
		};

		expect_errors("version: 1\nallow:\n  - {[a]: b}\n", 2, want);
	}
	expect_error("version: 1\nalow: []\n",
	             "t.yaml:2:1: unknown key 'alow'; expected version, "
	             "name, description, include, allow, deny, mode or unix");
	expect_error("version: 1\nmode: permissive\n",
	             "t.yaml:2:7: mode: expected enforce or audit, got permissive");
	expect_error("version: 1\nname: \"a b\"\n",
	             "t.yaml:2:7: name: expected 1-64 letters, digits, '-', '_' or '.'");
	expect_error("version: 1\ndescription: [x]\n",
	             "t.yaml:2:14: description: expected one string of at most 1024 characters");
	expect_error("version: 1\nallow:\n",
	             "t.yaml:2:7: allow: expected a list of rules (`- host: example.com`), "
	             "got nothing (write [] for none)");
	expect_error("version: 1\ndeny: {host: a.com}\n",
	             "t.yaml:2:7: deny: expected a list of rules (`- host: example.com`), got a "
	             "mapping");
	expect_error("version: 1\ninclude: base\n",
	             "t.yaml:2:10: include: expected a list like [pypi], got a string");
}

static void
test_rules(void **state)
{
	(void)state;
	expect_error("version: 1\nallow:\n  - pypi.org\n",
	             "t.yaml:3:5: allow: expected a rule like `- host: example.com` or "
	             "`- cidr: 203.0.113.0/24`, got a string");
	expect_error("version: 1\nallow:\n  - {}\n",
	             "t.yaml:3:5: allow: rule without host or cidr; expected `host: NAME` or "
	             "`cidr: NET/LEN`");
	expect_error(
	        "version: 1\nallow:\n  - host: a.com\n    cidr: 10.0.0.0/8\n",
	        "t.yaml:3:5: allow: a rule has either host or cidr, not both; write two rules");
	expect_error("version: 1\ndeny:\n  - host: a.com\n    port: 22\n",
	             "t.yaml:4:5: deny: unknown key 'port' in a rule; expected host, cidr, ports, "
	             "ech, inspect or reason");
	expect_error("version: 1\nallow:\n  - host: a.com\n    host: b.com\n",
	             "t.yaml:4:5: allow: 'host' given twice in one rule");
	expect_error("version: 1\nallow:\n  - host:\n",
	             "t.yaml:3:10: host: expected a DNS name like example.com, got nothing");
	expect_error("version: 1\nallow:\n  - cidr: [1]\n",
	             "t.yaml:3:11: cidr: expected a network like 203.0.113.0/24, got a list");
}

/* ech: allow | deny, on host allow rules only. */
static void
test_ech_key(void **state)
{
	struct policy_diag d = {0};
	struct policy *p;
	(void)state;

	p = load_str("version: 1\nallow:\n  - host: a.com\n    ech: allow\n"
	             "  - host: b.com\n    ech: deny\n",
	             &d);
	assert_non_null(p);
	assert_string_equal(policy_match_ech(p, "a.com", 443), "t.yaml:3");
	assert_null(policy_match_ech(p, "b.com", 443));
	policy_free(p);
	policy_diag_clear(&d);
	expect_error("version: 1\nallow:\n  - host: a.com\n    ech: yes\n",
	             "t.yaml:4:10: ech: expected allow or deny, got yes");
	expect_error("version: 1\nallow:\n  - host: a.com\n    ech: [allow]\n",
	             "t.yaml:4:10: ech: expected allow or deny, got a list");
	expect_error("version: 1\nallow:\n  - host: a.com\n    ech:\n",
	             "t.yaml:4:9: ech: expected allow or deny, got nothing");
	expect_error("version: 1\ndeny:\n  - host: a.com\n    ech: allow\n",
	             "t.yaml:4:10: ech: only allow rules take it (a deny rule refuses the name, "
	             "encrypted or not)");
	expect_error("version: 1\nallow:\n  - cidr: 203.0.113.0/24\n    ech: allow\n",
	             "t.yaml:4:10: ech: only host rules take it (ECH is let through for the "
	             "ClientHello's outer server name, which a cidr rule does not match)");
	expect_error("version: 1\nallow:\n  - host: a.com\n    ech: allow\n    ech: allow\n",
	             "t.yaml:5:5: allow: 'ech' given twice in one rule");
}

static void
test_hosts(void **state)
{
	(void)state;
	expect_error("version: 1\nallow:\n  - host: 203.0.113.9\n",
	             "t.yaml:3:11: host: '203.0.113.9' is an IP address; IP literals only match "
	             "cidr rules: "
	             "write `cidr: 203.0.113.9/32`");
	expect_error("version: 1\nallow:\n  - host: \"2001:db8::1\"\n",
	             "t.yaml:3:11: host: '2001:db8::1' is an IP address; IP literals only match "
	             "cidr rules: "
	             "write `cidr: 2001:db8::1/128`");
	expect_error("version: 1\nallow:\n  - host: \"[2001:db8::1]\"\n",
	             "t.yaml:3:11: host: '[2001:db8::1]' is an IP address; IP literals only match "
	             "cidr rules: "
	             "write `cidr: 2001:db8::1/128`");
	expect_error("version: 1\nallow:\n  - host: \"a.com:443\"\n",
	             "t.yaml:3:11: host: 'a.com:443' contains ':'; expected a DNS name (ports go "
	             "in `ports:`)");
	expect_error("version: 1\nallow:\n  - host: \"*\"\n",
	             "t.yaml:3:11: host: '*' alone would allow every name; expected a name or a "
	             "wildcard like "
	             "*.example.com");
	expect_error("version: 1\nallow:\n  - host: \"a.*.com\"\n",
	             "t.yaml:3:11: host: bad name 'a.*.com': '*' is only allowed as a whole "
	             "leading label "
	             "(*.example.com)");
	expect_error("version: 1\nallow:\n  - host: \"*a.com\"\n",
	             "t.yaml:3:11: host: bad name '*a.com': '*' is only allowed as a whole leading "
	             "label "
	             "(*.example.com)");
	expect_error("version: 1\nallow:\n  - host: \"*.*.com\"\n",
	             "t.yaml:3:11: host: bad name '*.*.com': '*' is only allowed as a whole "
	             "leading label "
	             "(*.example.com)");
	expect_error("version: 1\nallow:\n  - host: bücher.de\n",
	             "t.yaml:3:11: host: bad name 'bücher.de': non-ASCII name; write it as "
	             "punycode (xn--...)");
	expect_error("version: 1\nallow:\n  - host: a..com\n",
	             "t.yaml:3:11: host: bad name 'a..com': empty label");
	expect_error("version: 1\nallow:\n  - host: .a.com\n",
	             "t.yaml:3:11: host: bad name '.a.com': empty label");
	expect_error("version: 1\nallow:\n  - host: a.com..\n",
	             "t.yaml:3:11: host: bad name 'a.com..': empty label");
	expect_error("version: 1\nallow:\n  - host: a_b!.com\n",
	             "t.yaml:3:11: host: bad name 'a_b!.com': character not allowed in a name "
	             "(letters, digits, '-', '_' and '.')");
	expect_error("version: 1\nallow:\n  - host: a.1\n",
	             "t.yaml:3:11: host: 'a.1' ends in a numeric label, which no DNS name does; "
	             "for addresses write a cidr rule");
	expect_error("version: 1\nallow:\n  - host: a.0x7f\n",
	             "t.yaml:3:11: host: 'a.0x7f' ends in a numeric label, which no DNS name "
	             "does; for addresses write a cidr rule");
	expect_error("version: 1\nallow:\n  - host: 123.456\n",
	             "t.yaml:3:11: host: '123.456' ends in a numeric label, which no DNS name "
	             "does; for addresses write a cidr rule");
	expect_error("version: 1\nallow:\n  - host: -bad-.example\n",
	             "t.yaml:3:11: host: bad name '-bad-.example': label starts or ends with a "
	             "hyphen");
	expect_error("version: 1\nallow:\n  - host: \"*.a-.example\"\n",
	             "t.yaml:3:11: host: bad name '*.a-.example': label starts or ends with a "
	             "hyphen");
	expect_error("version: 1\ndeny:\n  - host: ok.example-\n",
	             "t.yaml:3:11: host: bad name 'ok.example-': label starts or ends with a "
	             "hyphen");
}

static void
test_long_names(void **state)
{
	char yaml[1024], label[70], name[300], want[1024];

	(void)state;
	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(yaml, sizeof(yaml), "version: 1\nallow:\n  - host: %s.com\n", label);
	snprintf(want, sizeof(want),
	         "t.yaml:3:11: host: bad name '%s.com': label longer than 63 characters", label);
	expect_error(yaml, want);
	/* 63 is fine */
	label[63] = '\0';
	snprintf(yaml, sizeof(yaml), "version: 1\nallow:\n  - host: %s.com\n", label);
	{
		struct policy_diag d = {0};
		struct policy *p = load_str(yaml, &d);

		assert_non_null(p);
		policy_free(p);
		policy_diag_clear(&d);
	}
	/* 254 characters: labels of 63, 63, 63 and 62 */
	memset(name, 'b', 254);
	name[63] = name[127] = name[191] = '.';
	name[254] = '\0';
	snprintf(yaml, sizeof(yaml), "version: 1\nallow:\n  - host: %s\n", name);
	snprintf(want, sizeof(want),
	         "t.yaml:3:11: host: bad name '%s': name longer than 253 characters", name);
	expect_error(yaml, want);
}

static void
test_cidrs(void **state)
{
	(void)state;
	expect_error("version: 1\nallow:\n  - cidr: 10.0.0.1/8\n",
	             "t.yaml:3:11: cidr: '10.0.0.1/8' has bits set after the prefix; did you mean "
	             "10.0.0.0/8?");
	expect_error("version: 1\nallow:\n  - cidr: \"2001:db8::1/32\"\n",
	             "t.yaml:3:11: cidr: '2001:db8::1/32' has bits set after the prefix; did you "
	             "mean 2001:db8::/32?");
	expect_error("version: 1\nallow:\n  - cidr: 10.0.0.0/33\n",
	             "t.yaml:3:11: cidr: bad network '10.0.0.0/33'; expected ADDRESS/PREFIX like "
	             "203.0.113.0/24 or "
	             "2001:db8::/32");
	expect_error("version: 1\nallow:\n  - cidr: example.com/24\n",
	             "t.yaml:3:11: cidr: bad network 'example.com/24'; expected ADDRESS/PREFIX "
	             "like 203.0.113.0/24 or "
	             "2001:db8::/32");
	expect_error("version: 1\nallow:\n  - cidr: 10.0.0.0/\n",
	             "t.yaml:3:11: cidr: bad network '10.0.0.0/'; expected ADDRESS/PREFIX like "
	             "203.0.113.0/24 or "
	             "2001:db8::/32");
	expect_error(
	        "version: 1\nallow:\n  - cidr: \"::ffff:10.0.0.0/104\"\n",
	        "t.yaml:3:11: cidr: '::ffff:10.0.0.0/104' is IPv4-mapped IPv6; write the IPv4 form "
	        "(mapped addresses are matched as IPv4)");
}

static void
test_ports(void **state)
{
	(void)state;
	expect_error("version: 1\nallow:\n  - host: a.com\n    ports: 443\n",
	             "t.yaml:4:12: ports: expected a list of ports like [443] or [\"8000-8100\"], "
	             "got a string");
	expect_error("version: 1\nallow:\n  - host: a.com\n    ports: []\n",
	             "t.yaml:4:12: ports: empty list; leave ports out for the default [80, 443]");
	{
		static const char *const want[] = {
		        "t.yaml:4:13: ports: bad port '0'; expected a number 1-65535",
		        "t.yaml:4:16: ports: bad port '65536'; expected a number 1-65535",
		        "t.yaml:4:23: ports: bad range '10-5'; expected \"LOW-HIGH\" with 1 <= LOW "
		        "<= HIGH <= 65535",
		        "t.yaml:4:31: ports: bad port 'https'; expected a number 1-65535",
		        "t.yaml:4:38: ports: bad range '-1'; expected \"LOW-HIGH\" with 1 <= LOW "
		        "<= HIGH <= 65535",
		        "t.yaml:4:44: ports: expected a port number 1-65535 or a range "
		        "\"LOW-HIGH\", got a list",
		};

		expect_errors("version: 1\nallow:\n  - host: a.com\n    ports: [0, 65536, "
		              "\"10-5\", https, \"-1\", [1]]\n",
		              6, want);
	}
}

/* Every error of a file is reported, in order, and the file is refused. */
static void
test_all_errors_collected(void **state)
{
	static const char *const want[] = {
	        "t.yaml:2:1: unknown key 'bogus'; expected version, name, description, include, "
	        "allow, deny, mode or unix",
	        "t.yaml:4:11: host: bad name 'a..b': empty label",
	        "t.yaml:5:11: cidr: bad network 'x'; expected ADDRESS/PREFIX like 203.0.113.0/24 "
	        "or 2001:db8::/32",
	        "t.yaml:7:11: host: '1.2.3.4' is an IP address; IP literals only match cidr rules: "
	        "write `cidr: 1.2.3.4/32`",
	        "t.yaml:8:7: mode: expected enforce or audit, got x",
	        "t.yaml:9:1: 'allow' given twice (first at line 3)",
	};

	(void)state;
	expect_errors("version: 1\nbogus: 1\nallow:\n  - host: a..b\n  - cidr: x\ndeny:\n  - host: "
	              "1.2.3.4\nmode: x\n"
	              "allow: []\n",
	              6, want);
}

static void
test_error_cap(void **state)
{
	struct policy_diag d = {0};
	char *yaml = malloc(2000 * 20 + 32);
	size_t off;

	(void)state;
	off = (size_t)snprintf(yaml, 32, "version: 1\nallow:\n");
	for (int i = 0; i < 2000; i++)
		off += (size_t)snprintf(yaml + off, 20, "  - host: a..b\n");
	assert_null(policy_load_buffer("t.yaml", yaml, off, &d));
	assert_int_equal(d.n_lines, 51);
	assert_string_equal(d.lines[50], "t.yaml: 1950 more errors not shown");
	policy_diag_clear(&d);
	free(yaml);
}

static void
test_yaml_safety(void **state)
{
	(void)state;
	expect_error("version: 1\nallow: &a []\n",
	             "t.yaml:2:8: YAML anchors (&name) are not allowed; write each value out");
	expect_error(
	        "version: 1\nallow:\n  - host: *.example.com\n",
	        "t.yaml:3:12: invalid YAML: did not find expected alphabetic or numeric character "
	        "while scanning an alias; quote wildcard hosts: host: \"*.example.com\"");
	expect_error("version: 1\nx: *a\n",
	             "t.yaml:2:4: YAML aliases (*name) are not allowed; write the value out");
	expect_error("version: !!int 1\n",
	             "t.yaml:1:10: YAML tags (!tag) are not allowed; expected plain values");
	expect_error("version: 1\n---\nversion: 1\n",
	             "t.yaml:2:1: a second YAML document; expected one policy per file");
	expect_error("version: 1\nallow:\n  - host: \"a\\0b.com\"\n",
	             "t.yaml:3:11: NUL character in a string; expected text");
	expect_error("version: 1\nallow: [\n",
	             "t.yaml:3:1: invalid YAML: did not find expected node content "
	             "while parsing a flow node; expected a YAML policy (docs/policy.md)");
	expect_error("version: 1\n\x01\n",
	             "t.yaml:2:1: not a text file (control characters are not allowed at byte 11); "
	             "expected a YAML policy");
}

/* The classic "billion laughs": refused at the first anchor, at once. */
static void
test_alias_bomb(void **state)
{
	const char *bomb =
	        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	        "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
	        "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
	        "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
	        "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n"
	        "f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n";

	(void)state;
	expect_error(bomb,
	             "t.yaml:1:4: YAML anchors (&name) are not allowed; write each value out");
}

static void
test_deep_nesting(void **state)
{
	char *yaml = malloc(10001);

	(void)state;
	memset(yaml, '[', 10000);
	yaml[10000] = '\0';
	expect_error(yaml, "t.yaml:1:9: nesting deeper than 8 levels; a policy needs 4");
	free(yaml);
}

static void
test_binary(void **state)
{
	static const unsigned char junk[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0xff, 0xfe};
	struct policy_diag d = {0};

	(void)state;
	assert_null(policy_load_buffer("t.yaml", junk, sizeof(junk), &d));
	assert_int_equal(d.n_lines, 1);
	assert_string_equal(
	        d.lines[0],
	        "t.yaml:1:1: binary data (NUL byte at offset 7); expected a YAML text policy");
	policy_diag_clear(&d);
}

static void
test_too_big(void **state)
{
	struct policy_diag d = {0};
	size_t len = 4u * 1024u * 1024u + 1;
	char *big = malloc(len);

	(void)state;
	memset(big, ' ', len);
	assert_null(policy_load_buffer("t.yaml", big, len, &d));
	assert_int_equal(d.n_lines, 1);
	assert_string_equal(
	        d.lines[0],
	        "t.yaml:1:1: 4194305 bytes; policies are limited to 4194304 bytes (4 MiB), "
	        "split it with include");
	policy_diag_clear(&d);
	free(big);
}

static void
test_many_ports(void **state)
{
	char *yaml = malloc(10000 * 7 + 64);
	size_t off;

	(void)state;
	off = (size_t)snprintf(yaml, 64, "version: 1\nallow:\n  - host: a.com\n    ports: [");
	for (int i = 0; i < 10000; i++)
		off += (size_t)snprintf(yaml + off, 8, "%d,", i % 65535 + 1);
	yaml[off - 1] = ']';
	yaml[off] = '\0';
	expect_error(yaml, "t.yaml:4:12: ports: 10000 entries; at most 64 are allowed (write a "
	                   "range like \"8000-8999\")");
	free(yaml);
}

/* The preset directories, in lookup order: $AIRLOCK_POLICY_DIR first when
 * set, the source tree only in a build made with -Dsource_presets=true. */
static void
test_preset_dirs(void **state)
{
	const char *dirs[8];
	size_t n, i = 0;

	(void)state;
	n = policy_preset_dirs(dirs, 8);
	if (AIRLOCK_SOURCE_POLICY_DIR[0] != '\0')
		assert_string_equal(dirs[i++], AIRLOCK_SOURCE_POLICY_DIR);
	assert_string_equal(dirs[i++], AIRLOCK_POLICY_DIR);
	assert_int_equal(n, i);
	setenv("AIRLOCK_POLICY_DIR", "/airlock-test/presets", 1);
	n = policy_preset_dirs(dirs, 8);
	assert_int_equal(n, i + 1);
	assert_string_equal(dirs[0], "/airlock-test/presets");
	assert_string_equal(dirs[n - 1], AIRLOCK_POLICY_DIR);
	assert_int_equal(policy_preset_dirs(dirs, 1), 1);
	unsetenv("AIRLOCK_POLICY_DIR");
}

static void
test_include_errors(void **state)
{
	(void)state;
	char want[4200];

	snprintf(want, sizeof(want),
	         "t.yaml:2:11: include: no preset named 'no-such-preset-xyz' (looked in %s)",
	         preset_dirs_text());
	expect_error("version: 1\ninclude: [no-such-preset-xyz]\n", want);
	expect_error("version: 1\ninclude: [\"Bad Name\"]\n",
	             "t.yaml:2:11: include: 'Bad Name' is not a preset name (lowercase letters, "
	             "digits, '-', '_'); "
	             "write a path like ./Bad Name.yaml for a file");
	expect_error("version: 1\ninclude: [/nonexistent/x.yaml]\n",
	             "t.yaml:2:11: include '/nonexistent/x.yaml': No such file or directory");
	expect_error(
	        "version: 1\ninclude: [/dev/null]\n",
	        "t.yaml:2:11: include '/dev/null': not a regular file; expected a policy file");
	expect_error("version: 1\ninclude: [/]\n",
	             "t.yaml:2:11: include '/': is a directory; expected a policy file");
	expect_error("version: 1\ninclude: [[a]]\n",
	             "t.yaml:2:11: include: expected a preset name or a path, got a list");
}

static void
test_load_path_errors(void **state)
{
	struct policy_diag d = {0};

	(void)state;
	assert_null(policy_load("/nonexistent/p.yaml", &d));
	assert_int_equal(d.n_lines, 1);
	assert_string_equal(d.lines[0],
	                    "/nonexistent/p.yaml:1:1: cannot open: No such file or directory");
	policy_diag_clear(&d);
	assert_null(policy_load("/dev/null/x.yaml", &d));
	assert_int_equal(d.n_lines, 1);
	policy_diag_clear(&d);
	/* NULL diag is allowed */
	assert_null(policy_load("/nonexistent/p.yaml", NULL));
}

/* The bounds documented in policy/internal.h, each hit exactly once. */
static void
test_limits(void **state)
{
	struct policy_diag d = {0};
	size_t cap = 3u * 1024u * 1024u, off;
	char *yaml = malloc(cap);

	(void)state;
	/* 200,001 rules */
	off = (size_t)snprintf(yaml, cap, "version: 1\nallow: [");
	for (int i = 0; i < 200001; i++)
		off += (size_t)snprintf(yaml + off, cap - off, "{host: a.b},");
	yaml[off - 1] = ']';
	assert_null(policy_load_buffer("t.yaml", yaml, off, &d));
	assert_int_equal(d.n_lines, 1);
	assert_string_equal(d.lines[0],
	                    "t.yaml:2:2400009: more than 200000 rules in all; that is the limit");
	policy_diag_clear(&d);

	/* 1,000,001 YAML values */
	off = (size_t)snprintf(yaml, cap, "version: 1\nx: [");
	for (int i = 0; i < 1000000; i++)
		off += (size_t)snprintf(yaml + off, cap - off, "1,");
	yaml[off - 1] = ']';
	assert_null(policy_load_buffer("t.yaml", yaml, off, &d));
	assert_int_equal(d.n_lines, 1);
	assert_string_equal(d.lines[0],
	                    "t.yaml:2:1999995: more than 1000000 YAML values in one file; "
	                    "split the policy with include");
	policy_diag_clear(&d);
	free(yaml);
}

static void
write_at(const char *dir, const char *name, const char *text)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
test_include_limits(void **state)
{
	char dir[] = "/tmp/airlock-policy-limits.XXXXXX", name[64], text[4096], path[600];
	struct policy_diag d = {0};
	size_t off;

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* a chain 0 -> 1 -> ... -> 10: too deep at the 9th include */
	for (int i = 0; i <= 10; i++) {
		snprintf(name, sizeof(name), "c%d.yaml", i);
		snprintf(text, sizeof(text), "version: 1\ninclude: [c%d.yaml]\n", i + 1);
		write_at(dir, name, i == 10 ? "version: 1\n" : text);
	}
	snprintf(path, sizeof(path), "%s/c0.yaml", dir);
	assert_null(policy_load(path, &d));
	assert_int_equal(d.n_lines, 1);
	/* the file names carry the directory they were reached through */
	assert_non_null(strstr(d.lines[0], "c8.yaml:2:11: include '"));
	assert_non_null(strstr(d.lines[0], "c9.yaml': includes nested more than 8 deep"));
	policy_diag_clear(&d);

	/* one file including 70 others: the 64th file in all is refused */
	off = (size_t)snprintf(text, sizeof(text), "version: 1\ninclude: [");
	for (int i = 0; i < 70; i++) {
		snprintf(name, sizeof(name), "f%d.yaml", i);
		write_at(dir, name, "version: 1\n");
		off += (size_t)snprintf(text + off, sizeof(text) - off, "%s%s", i ? ", " : "",
		                        name);
	}
	snprintf(text + off, sizeof(text) - off, "]\n");
	write_at(dir, "many.yaml", text);
	snprintf(path, sizeof(path), "%s/many.yaml", dir);
	assert_null(policy_load(path, &d));
	assert_true(d.n_lines >= 1);
	assert_non_null(strstr(d.lines[0], "f63.yaml': more than 64 files in one policy"));
	policy_diag_clear(&d);

	snprintf(path, sizeof(path), "rm -r '%s'", dir);
	assert_int_equal(system(path), 0);
}

/* unix: a list of absolute socket paths; errors name file:line:col; an
 * include's entries merge into the includer's, each path once, in load
 * order, with the file:line that named it first. */
static void
test_unix(void **state)
{
	char dir[] = "/tmp/airlock-policy-unix.XXXXXX", path[600];
	struct policy_diag d = {0};
	struct policy *p;
	const char *where;

	(void)state;
	expect_error("version: 1\nunix: /run/x.sock\n",
	             "t.yaml:2:7: unix: expected a list of socket paths like "
	             "[/run/user/1000/ssh-agent.socket], got a string");
	expect_error("version: 1\nunix:\n",
	             "t.yaml:2:6: unix: expected a list of socket paths like "
	             "[/run/user/1000/ssh-agent.socket], got nothing (write [] for none)");
	{
		static const char *const want[] = {
		        ("t.yaml:3:5: unix: 'run/x.sock' is not an absolute path; write the "
		         "socket's full path on the host, like /run/user/1000/ssh-agent.socket"),
		        "t.yaml:4:5: unix: expected the absolute path of a socket, got a mapping",
		        "t.yaml:5:5: unix: expected the absolute path of a socket, got nothing",
		};

		expect_errors("version: 1\nunix:\n  - run/x.sock\n  - {path: /a}\n  - \"\"\n", 3,
		              want);
	}
	expect_error("version: 1\nunix: []\nunix: []\n",
	             "t.yaml:3:1: 'unix' given twice (first at line 2)");

	p = load_str("version: 1\nunix: []\n", &d);
	assert_non_null(p);
	assert_int_equal(policy_unix_count(p), 0);
	assert_null(policy_unix_path(p, 0, NULL));
	policy_free(p);

	assert_non_null(mkdtemp(dir));
	write_at(dir, "inc.yaml", "version: 1\nunix:\n  - /srv/b.sock\n  - /run/a.sock\n");
	write_at(dir, "top.yaml",
	         "version: 1\ninclude: [inc.yaml]\nunix:\n  - /run/a.sock\n  - /run/a.sock\n");
	snprintf(path, sizeof(path), "%s/top.yaml", dir);
	p = policy_load(path, &d);
	assert_non_null(p);
	assert_int_equal(policy_unix_count(p), 2);
	assert_string_equal(policy_unix_path(p, 0, &where), "/run/a.sock");
	snprintf(path, sizeof(path), "%s/top.yaml:4", dir);
	assert_string_equal(where, path);
	assert_string_equal(policy_unix_path(p, 1, &where), "/srv/b.sock");
	snprintf(path, sizeof(path), "%s/inc.yaml:3", dir);
	assert_string_equal(where, path);
	policy_free(p);
	policy_diag_clear(&d);
	snprintf(path, sizeof(path), "rm -r '%s'", dir);
	assert_int_equal(system(path), 0);
}

/* reason: on a rule: one line of text into every refusal by the rule. */
static void
test_rule_reason(void **state)
{
	struct policy_diag d = {0};
	struct policy *p = load_str("version: 1\nallow:\n  - host: \"*.pypi.org\"\n"
	                            "    reason: the index\ndeny:\n  - host: upload.pypi.org\n"
	                            "    reason: uploads go through CI, not from tasks\n",
	                            &d);
	struct policy_verdict v;
	struct verdict_query q = {.src = VERDICT_SRC_CONNECT, .name = "upload.pypi.org", .port = 443};
	struct verdict_result r;
	char msg[256];

	assert_non_null(p);
	policy_match_host(p, "upload.pypi.org", 443, &v);
	assert_int_equal(v.action, POLICY_DENY);
	assert_string_equal(v.why, "uploads go through CI, not from tasks");
	verdict_decide(p, POLICY_MODE_ENFORCE, &q, &r);
	assert_string_equal(r.rule_why, "uploads go through CI, not from tasks");
	assert_string_equal(verdict_message(&r, &q, msg, sizeof(msg)),
	                    "upload.pypi.org port 443: denied by rule t.yaml:6: uploads go through "
	                    "CI, not from tasks");
	/* An allow rule's reason documents it; no refusal carries it. */
	q.name = "x.pypi.org";
	verdict_decide(p, POLICY_MODE_ENFORCE, &q, &r);
	assert_int_equal(r.verdict, VERDICT_ALLOW);
	assert_null(r.rule_why);
	policy_free(p);
	policy_diag_clear(&d);

	expect_error("version: 1\ndeny:\n  - host: a.test\n    reason: \"say \\\"no\\\"\"\n",
	             "t.yaml:4:13: reason: character 5 is not allowed (control characters, '\"' "
	             "and '\\' are not)");
	expect_error("version: 1\ndeny:\n  - host: a.test\n    reason: \"\"\n",
	             "t.yaml:4:13: reason: expected one line of text, 1 to 200 characters, got "
	             "nothing");
	expect_error("version: 1\ndeny:\n  - host: a.test\n    reason: [a]\n",
	             "t.yaml:4:13: reason: expected one line of text, 1 to 200 characters, got a "
	             "list");
	expect_error("version: 1\ndeny:\n  - host: a.test\n    reason: \"a\\nb\"\n",
	             "t.yaml:4:13: reason: character 2 is not allowed (control characters, '\"' "
	             "and '\\' are not)");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_unix),           cmocka_unit_test(test_version),
	        cmocka_unit_test(test_top_level),      cmocka_unit_test(test_rules),
	        cmocka_unit_test(test_ech_key),        cmocka_unit_test(test_hosts),
	        cmocka_unit_test(test_long_names),     cmocka_unit_test(test_cidrs),
	        cmocka_unit_test(test_ports),          cmocka_unit_test(test_all_errors_collected),
	        cmocka_unit_test(test_error_cap),      cmocka_unit_test(test_yaml_safety),
	        cmocka_unit_test(test_alias_bomb),     cmocka_unit_test(test_deep_nesting),
	        cmocka_unit_test(test_binary),         cmocka_unit_test(test_too_big),
	        cmocka_unit_test(test_many_ports),     cmocka_unit_test(test_preset_dirs),
	        cmocka_unit_test(test_include_errors), cmocka_unit_test(test_load_path_errors),
	        cmocka_unit_test(test_limits),         cmocka_unit_test(test_include_limits),
	        cmocka_unit_test(test_rule_reason),
	};

	/* Keep the preset search to the built-in directories. */
	unsetenv("AIRLOCK_POLICY_DIR");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
