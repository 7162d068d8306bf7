/* inspect/rules.c: deny, then only_paths, then allow or the access preset,
 * then refuse; checked on the request shapes the presets exist for. */
#include "inspect/rules.h"

#include "inspect/path.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static void
decide_is(const struct inspect_rules *r, const char *method, const char *target, bool allow,
          enum inspect_reason reason, const char *where)
{
	struct inspect_target t;
	struct inspect_verdict v;

	assert_int_equal(inspect_path_canon(target, strlen(target), false, &t, NULL),
	                 INSPECT_PATH_OK);
	inspect_decide(r, inspect_method_bit(method, strlen(method)), t.path, &v);
	if (v.allow != allow || v.reason != reason)
		fail_msg("%s %s: %s (reason %d), expected %s (reason %d)", method, target,
		         v.allow ? "allowed" : "refused", v.reason, allow ? "allowed" : "refused",
		         reason);
	if (where == NULL)
		assert_null(v.where);
	else
		assert_string_equal(v.where, where);
}

/* A read-only GitHub: fetch and clone (the upload-pack POST), no push. */
static void
test_github_read_only(void **state)
{
	static const struct inspect_rule deny[] = {
	        {.methods = 0, .path = "/**/git-receive-pack", .where = "gh.yaml:9"},
	};
	static const struct inspect_rule allow[] = {
	        {.methods = INSPECT_M_POST, .path = "/**/git-upload-pack", .where = "gh.yaml:12"},
	};
	const struct inspect_rules r = {.access = INSPECT_ACCESS_READ_ONLY,
	                                .access_where = "gh.yaml:7",
	                                .deny = deny,
	                                .n_deny = 1,
	                                .allow = allow,
	                                .n_allow = 1};

	decide_is(&r, "GET", "/org/repo.git/info/refs?service=git-upload-pack", true,
	          INSPECT_R_ACCESS, "gh.yaml:7");
	decide_is(&r, "POST", "/org/repo.git/git-upload-pack", true, INSPECT_R_ALLOW_RULE,
	          "gh.yaml:12");
	decide_is(&r, "POST", "/org/repo.git/git-receive-pack", false, INSPECT_R_DENY_RULE,
	          "gh.yaml:9");
	/* the same push, spelled to dodge a matcher that reads raw bytes */
	decide_is(&r, "POST", "/org/repo.git/x/../git-receive-pack", false, INSPECT_R_DENY_RULE,
	          "gh.yaml:9");
	decide_is(&r, "POST", "/org/repo.git/git-receive-pack;x", false, INSPECT_R_DENY_RULE,
	          "gh.yaml:9");
	decide_is(&r, "POST", "/org/repo.git/%67it-receive-pack", false, INSPECT_R_DENY_RULE,
	          "gh.yaml:9");
	decide_is(&r, "POST", "/repos/org/repo/issues", false, INSPECT_R_NO_RULE, NULL);
	decide_is(&r, "PUT", "/org/repo", false, INSPECT_R_NO_RULE, NULL);
	/* a method in lower case is the method (servers that upper-case it) */
	decide_is(&r, "post", "/org/repo.git/git-upload-pack", true, INSPECT_R_ALLOW_RULE,
	          "gh.yaml:12");
	decide_is(&r, "post", "/org/repo.git/git-receive-pack", false, INSPECT_R_DENY_RULE,
	          "gh.yaml:9");
	decide_is(&r, "HEAD", "/", true, INSPECT_R_ACCESS, "gh.yaml:7");
}

static void
test_only_paths(void **state)
{
	static const char *const only[] = {"/myorg/**", "/login/oauth/**"};
	const struct inspect_rules r = {.access = INSPECT_ACCESS_FULL,
	                                .access_where = "p.yaml:3",
	                                .only_paths = only,
	                                .n_only_paths = 2,
	                                .only_where = "p.yaml:4"};

	decide_is(&r, "DELETE", "/myorg/repo", true, INSPECT_R_ACCESS, "p.yaml:3");
	decide_is(&r, "GET", "/otherorg/repo", false, INSPECT_R_ONLY_PATHS, "p.yaml:4");
	decide_is(&r, "GET", "/myorg/../otherorg/repo", false, INSPECT_R_ONLY_PATHS, "p.yaml:4");
	decide_is(&r, "GET", "/myorgx", false, INSPECT_R_ONLY_PATHS, "p.yaml:4");
	decide_is(&r, "GET", "/myorg", true, INSPECT_R_ACCESS, "p.yaml:3");
}

/* Deny wins over an allow rule and the preset; no preset and no rule is
 * a refusal. */
static void
test_order(void **state)
{
	static const struct inspect_rule deny[] = {
	        {.methods = INSPECT_M_PUT | INSPECT_M_DELETE, .path = NULL, .where = "n.yaml:5"},
	};
	static const struct inspect_rule allow[] = {
	        {.methods = 0, .path = "/**", .where = "n.yaml:8"},
	};
	const struct inspect_rules r = {.deny = deny, .n_deny = 1, .allow = allow, .n_allow = 1};
	const struct inspect_rules none = {.access = INSPECT_ACCESS_NONE};

	decide_is(&r, "PUT", "/pkg", false, INSPECT_R_DENY_RULE, "n.yaml:5");
	decide_is(&r, "GET", "/pkg", true, INSPECT_R_ALLOW_RULE, "n.yaml:8");
	decide_is(&r, "PROPFIND", "/pkg", true, INSPECT_R_ALLOW_RULE, "n.yaml:8");
	decide_is(&none, "GET", "/", false, INSPECT_R_NO_RULE, NULL);
}

/* A deny rule is read the widest way a server routes: a trailing '/',
 * another case, a method in lower case, HEAD for GET. What allows is read
 * exactly, so none of these widens it. */
static void
test_deny_read_widely(void **state)
{
	static const struct inspect_rule deny[] = {
	        {.methods = 0, .path = "/admin", .where = "d.yaml:3"},
	        {.methods = 0, .path = "/private/**", .where = "d.yaml:4"},
	        {.methods = INSPECT_M_DELETE, .path = NULL, .where = "d.yaml:5"},
	        {.methods = INSPECT_M_GET, .path = "/export", .where = "d.yaml:6"},
	};
	static const char *const only[] = {"/myorg/**"};
	const struct inspect_rules r = {.access = INSPECT_ACCESS_FULL,
	                                .access_where = "d.yaml:2",
	                                .deny = deny,
	                                .n_deny = 4};
	const struct inspect_rules strict = {.access = INSPECT_ACCESS_FULL,
	                                     .access_where = "d.yaml:2",
	                                     .only_paths = only,
	                                     .n_only_paths = 1,
	                                     .only_where = "d.yaml:7"};

	decide_is(&r, "GET", "/admin", false, INSPECT_R_DENY_RULE, "d.yaml:3");
	decide_is(&r, "GET", "/admin/", false, INSPECT_R_DENY_RULE, "d.yaml:3");
	decide_is(&r, "GET", "/ADMIN", false, INSPECT_R_DENY_RULE, "d.yaml:3");
	decide_is(&r, "GET", "/Private/x", false, INSPECT_R_DENY_RULE, "d.yaml:4");
	decide_is(&r, "GET", "/PRIVATE", false, INSPECT_R_DENY_RULE, "d.yaml:4");
	decide_is(&r, "delete", "/pkg", false, INSPECT_R_DENY_RULE, "d.yaml:5");
	decide_is(&r, "HEAD", "/export", false, INSPECT_R_DENY_RULE, "d.yaml:6");
	decide_is(&r, "GET", "/adminx", true, INSPECT_R_ACCESS, "d.yaml:2");
	decide_is(&r, "GET", "/admin/x", true, INSPECT_R_ACCESS, "d.yaml:2");
	/* only_paths stays exact */
	decide_is(&strict, "GET", "/MyOrg/x", false, INSPECT_R_ONLY_PATHS, "d.yaml:7");
	decide_is(&strict, "GET", "/myorg/x", true, INSPECT_R_ACCESS, "d.yaml:2");
}

static void
test_methods(void **state)
{
	assert_int_equal(inspect_method_bit("GET", 3), INSPECT_M_GET);
	assert_int_equal(inspect_method_bit("GETX", 4), INSPECT_M_OTHER);
	assert_int_equal(inspect_method_bit("GE", 2), INSPECT_M_OTHER);
	assert_int_equal(inspect_method_bit("get", 3), INSPECT_M_GET);
	assert_int_equal(inspect_method_bit("Delete", 6), INSPECT_M_DELETE);
	assert_int_equal(inspect_method_parse("*"), INSPECT_M_ALL);
	assert_int_equal(inspect_method_parse("PATCH"), INSPECT_M_PATCH);
	assert_int_equal(inspect_method_parse("patch"), 0);
	assert_int_equal(inspect_access_methods(INSPECT_ACCESS_READ_WRITE) &
	                         (INSPECT_M_TRACE | INSPECT_M_CONNECT | INSPECT_M_OTHER),
	                 0);
	assert_int_equal(inspect_access_methods(INSPECT_ACCESS_FULL), INSPECT_M_ALL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_github_read_only),
	        cmocka_unit_test(test_only_paths),
	        cmocka_unit_test(test_order),
	        cmocka_unit_test(test_deny_read_widely),
	        cmocka_unit_test(test_methods),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
