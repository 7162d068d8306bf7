/* The `inspect:` key of host allow rules (policy/inspect.c): what it
 * compiles to, every load error with its file:line:column, and the rule
 * that an inspecting and a non-inspecting allow rule never share a name
 * and a port. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "inspect/rules.h"
#include "policy/inspect.h"
#include "tests/policy/util.h"

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

static struct policy *
must_load(const char *yaml)
{
	struct policy_diag d = {0};
	struct policy *p = load_str(yaml, &d);

	for (size_t i = 0; i < d.n_lines; i++)
		fprintf(stderr, "error: %s\n", d.lines[i]);
	policy_diag_clear(&d);
	if (p == NULL)
		fail_msg("did not load:\n%s", yaml);
	return p;
}

static void
test_compiled(void **state)
{
	struct policy *p;
	const struct policy_inspect *pi;
	struct inspect_verdict v;

	(void)state;
	p = must_load("version: 1\n"
	              "allow:\n"
	              "  - host: origin.lab\n"
	              "    ports: [443]\n"
	              "    inspect:\n"
	              "      http:\n"
	              "        access: read-only\n"
	              "        deny:\n"
	              "          - {methods: [\"*\"], path: \"/**/git-receive-pack\"}\n"
	              "        allow:\n"
	              "          - {methods: [POST], path: \"/myorg/*/git-upload-pack\"}\n"
	              "        only_paths: [\"/myorg/**\"]\n"
	              "        max_request_body: 1MiB\n"
	              "  - host: plain.lab\n");
	assert_true(policy_inspects(p));
	pi = policy_match_inspect(p, "origin.lab", 443);
	assert_non_null(pi);
	assert_string_equal(pi->where, "t.yaml:6");
	assert_int_equal(pi->max_request_body, 1u << 20);
	assert_int_equal(pi->http.access, INSPECT_ACCESS_READ_ONLY);
	assert_string_equal(pi->http.access_where, "t.yaml:7");
	assert_int_equal(pi->http.n_deny, 1);
	assert_int_equal(pi->http.deny[0].methods, INSPECT_M_ALL);
	assert_string_equal(pi->http.deny[0].path, "/**/git-receive-pack");
	assert_string_equal(pi->http.deny[0].where, "t.yaml:9");
	assert_int_equal(pi->http.n_allow, 1);
	assert_int_equal(pi->http.allow[0].methods, INSPECT_M_POST);
	assert_int_equal(pi->http.n_only_paths, 1);
	assert_string_equal(pi->http.only_paths[0], "/myorg/**");
	/* Not on another port, nor another name. */
	assert_null(policy_match_inspect(p, "origin.lab", 80));
	assert_null(policy_match_inspect(p, "plain.lab", 443));
	assert_null(policy_match_inspect(p, "x.origin.lab", 443));

	/* The compiled rules decide as inspect/rules.c says. */
	inspect_decide(&pi->http, INSPECT_M_GET, "/myorg/repo/info/refs", &v);
	assert_true(v.allow);
	assert_int_equal(v.reason, INSPECT_R_ACCESS);
	inspect_decide(&pi->http, INSPECT_M_POST, "/myorg/repo/git-receive-pack", &v);
	assert_false(v.allow);
	assert_int_equal(v.reason, INSPECT_R_DENY_RULE);
	assert_string_equal(v.where, "t.yaml:9");
	inspect_decide(&pi->http, INSPECT_M_POST, "/myorg/repo/git-upload-pack", &v);
	assert_true(v.allow);
	assert_string_equal(v.where, "t.yaml:11");
	inspect_decide(&pi->http, INSPECT_M_GET, "/other/repo", &v);
	assert_false(v.allow);
	assert_int_equal(v.reason, INSPECT_R_ONLY_PATHS);
	inspect_decide(&pi->http, INSPECT_M_PUT, "/myorg/x", &v);
	assert_false(v.allow);
	policy_free(p);

	/* No rule inspects: nothing to look up. */
	p = must_load("version: 1\nallow:\n  - host: origin.lab\n");
	assert_false(policy_inspects(p));
	assert_null(policy_match_inspect(p, "origin.lab", 443));
	policy_free(p);

	/* A deny rule wins over the inspecting allow rule. */
	p = must_load("version: 1\n"
	              "allow:\n"
	              "  - host: \"*.lab\"\n"
	              "    inspect: {http: {access: full}}\n"
	              "deny:\n"
	              "  - host: bad.lab\n");
	assert_non_null(policy_match_inspect(p, "a.lab", 443));
	assert_non_null(policy_match_inspect(p, "a.b.lab", 80));
	assert_null(policy_match_inspect(p, "bad.lab", 443));
	assert_null(policy_match_inspect(p, "lab", 443));
	policy_free(p);
}

static void
test_sizes(void **state)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} ok[] = {{"1", 1},
	          {"1048576", 1048576},
	          {"512KiB", 512u << 10},
	          {"2GiB", 2ull << 30},
	          {"16GiB", 16ull << 30},
	          {"3MB", 3000000},
	          {"10B", 10}};
	static const char *const bad[] = {"0", "0MiB", "17GiB", "1.5MiB", "1 MiB", "MiB", "-1",
	                                  "1mib", "99999999999999999999", "1TiB"};
	char yaml[512], want[512];

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct policy *p;

		snprintf(yaml, sizeof(yaml),
		         "version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: "
		         "full, max_request_body: \"%s\"}}\n",
		         ok[i].text);
		p = must_load(yaml);
		assert_int_equal(policy_match_inspect(p, "a.lab", 443)->max_request_body,
		                 ok[i].bytes);
		policy_free(p);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(yaml, sizeof(yaml),
		         "version: 1\nallow:\n  - host: a.lab\n    inspect:\n      http:\n"
		         "        max_request_body: \"%s\"\n",
		         bad[i]);
		snprintf(want, sizeof(want),
		         "t.yaml:6:27: max_request_body: expected a size from 1 byte to 16GiB like "
		         "1048576 or 1MiB, got %s",
		         bad[i]);
		expect_error(yaml, want);
	}
}

static void
test_errors(void **state)
{
	(void)state;
	expect_error("version: 1\ndeny:\n  - host: a.lab\n    inspect: {http: {access: full}}\n",
	             "t.yaml:4:14: inspect: only allow rules take it (a deny rule refuses every "
	             "request)");
	expect_error("version: 1\nallow:\n  - cidr: 203.0.113.0/24\n"
	             "    inspect: {http: {access: full}}\n",
	             "t.yaml:4:14: inspect: only host rules take it (the leaf certificate is made "
	             "for a name; write `host: NAME`)");
	expect_error("version: 1\nallow:\n  - host: a.lab\n    inspect: true\n",
	             "t.yaml:4:14: inspect: expected a mapping like {http: {access: read-only}}, "
	             "got a scalar");
	expect_error("version: 1\nallow:\n  - host: a.lab\n    inspect: {}\n",
	             "t.yaml:4:14: inspect: expected a mapping like {http: {access: read-only}}, "
	             "got a mapping");
	expect_error("version: 1\nallow:\n  - host: a.lab\n    inspect: {h2: 1}\n",
	             "t.yaml:4:15: inspect: unknown key 'h2'; expected http");
	expect_error("version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {}}\n",
	             "t.yaml:4:21: http: expected a mapping like {access: read-only}, got a "
	             "mapping");
	expect_error("version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: all}}\n",
	             "t.yaml:4:30: access: expected read-only, read-write or full, got all");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {deny: [{path: \"/x\"}]}}\n",
	             "t.yaml:4:21: http: nothing would be allowed; give `access: read-only` (or "
	             "read-write, full) or allow: rules");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, acess: full}}\n",
	             "t.yaml:4:36: http: unknown key 'acess'; expected access, deny, allow, "
	             "only_paths or max_request_body");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, access: full}}\n",
	             "t.yaml:4:36: http: 'access' given twice (first at line 4)");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, deny: [{methods: [get]}]}}\n",
	             "t.yaml:4:54: deny: 'get' is not a method; expected GET, HEAD, OPTIONS, POST, "
	             "PUT, PATCH, DELETE, TRACE, CONNECT or \"*\"");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, deny: [{methods: POST}]}}\n",
	             "t.yaml:4:53: deny: expected a list of 1 to 16 methods like [GET, HEAD] or "
	             "[\"*\"], got a scalar");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, deny: [{verb: POST}]}}\n",
	             "t.yaml:4:44: deny: unknown key 'verb'; expected methods or path");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, deny: [POST]}}\n",
	             "t.yaml:4:43: deny: expected a rule like {methods: [POST], path: \"/**\"}, "
	             "got a scalar");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, deny: {path: /x}}}\n",
	             "t.yaml:4:42: deny: expected a list of at most 256 rules like {methods: "
	             "[POST], path: \"/**\"}, got a mapping");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, deny: [{path: \"a/b\"}]}}\n",
	             "t.yaml:4:50: deny: 'a/b' at byte 1: a path glob starts with '/'");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, only_paths: []}}\n",
	             "t.yaml:4:48: only_paths: expected a list of 1 to 256 path globs like "
	             "[\"/org/**\"], got an empty list");
	expect_error("version: 1\nallow:\n  - host: a.lab\n"
	             "    inspect: {http: {access: full, only_paths: [\"/a/../b\"]}}\n",
	             "t.yaml:4:49: only_paths: '/a/../b' at byte 4: a '.' or '..' segment in a "
	             "path glob (paths are matched resolved)");
}

static void
test_overlap(void **state)
{
	(void)state;
	/* The same name, default ports both. */
	expect_error("version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: full}}\n"
	             "  - host: a.lab\n",
	             "t.yaml:5:5: a.lab overlaps a.lab (inspected at t.yaml:3) on a port: one "
	             "rule inspects, the other does not; give both the same `inspect:` or make "
	             "their ports disjoint");
	/* A wildcard before the exact name it covers, named at the later. */
	expect_error("version: 1\nallow:\n  - host: \"*.lab\"\n    ports: [443]\n"
	             "  - host: a.b.lab\n    ports: [1-1000]\n    inspect: {http: {access: full}}\n",
	             "t.yaml:5:5: a.b.lab overlaps *.lab (not inspected at t.yaml:3) on a port: "
	             "one rule inspects, the other does not; give both the same `inspect:` or "
	             "make their ports disjoint");
	/* Two wildcards, one under the other. */
	expect_error("version: 1\nallow:\n  - host: \"*.a.lab\"\n"
	             "    inspect: {http: {access: full}}\n  - host: \"*.lab\"\n",
	             "t.yaml:5:5: *.lab overlaps *.a.lab (inspected at t.yaml:3) on a port: one "
	             "rule inspects, the other does not; give both the same `inspect:` or make "
	             "their ports disjoint");
	/* Disjoint ports, another name, the apex of a wildcard, a deny rule:
	 * all fine. */
	{
		const char *const fine[] = {
		        "version: 1\nallow:\n  - host: a.lab\n    ports: [443]\n"
		        "    inspect: {http: {access: full}}\n  - host: a.lab\n    ports: [80]\n",
		        "version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: full}}\n"
		        "  - host: b.lab\n",
		        "version: 1\nallow:\n  - host: lab\n    inspect: {http: {access: full}}\n"
		        "  - host: \"*.lab\"\n",
		        "version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: full}}\n"
		        "deny:\n  - host: a.lab\n    ports: [80]\n",
		        "version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: full}}\n"
		        "  - host: a.lab\n    inspect: {http: {access: read-only}}\n",
		        "version: 1\nallow:\n  - host: a.lab\n    inspect: {http: {access: full}}\n"
		        "  - cidr: 203.0.113.0/24\n",
		};

		for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++)
			policy_free(must_load(fine[i]));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_compiled),
	        cmocka_unit_test(test_sizes),
	        cmocka_unit_test(test_errors),
	        cmocka_unit_test(test_overlap),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
