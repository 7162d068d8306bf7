/* inspect/path.c: one canonical form for every spelling of a path that a
 * server would read as the same resource, refusals for what servers read
 * differently, and the globs rules are written with. */
#include "inspect/path.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static struct inspect_target out;

static void
canon_is(const char *in, bool slash_ok, const char *path, const char *query)
{
	size_t at = 99;
	enum inspect_path_err e = inspect_path_canon(in, strlen(in), slash_ok, &out, &at);

	if (e != INSPECT_PATH_OK)
		fail_msg("%s: %s at %zu", in, inspect_path_err_text(e), at);
	if (strcmp(out.path, path) != 0)
		fail_msg("%s: path %s, expected %s", in, out.path, path);
	if (strcmp(out.query, query) != 0)
		fail_msg("%s: query %s, expected %s", in, out.query, query);
}

static void
refused(const char *in, size_t len, bool slash_ok, enum inspect_path_err want, size_t want_at)
{
	size_t at = 99;
	enum inspect_path_err e = inspect_path_canon(in, len, slash_ok, &out, &at);

	if (e != want)
		fail_msg("%s: %s, expected %s", in, inspect_path_err_text(e),
		         inspect_path_err_text(want));
	if (at != want_at)
		fail_msg("%s: at %zu, expected %zu", in, at, want_at);
}

static void
test_canon_plain(void **state)
{
	canon_is("/", false, "/", "");
	canon_is("/simple/index.html", false, "/simple/index.html", "");
	canon_is("/a/b/", false, "/a/b/", "");
	canon_is("/search?q=a+b&x=%2f", false, "/search", "q=a+b&x=%2F");
	canon_is("/p?", false, "/p", "");
	assert_true(out.has_query);
	canon_is("/p", false, "/p", "");
	assert_false(out.has_query);
	canon_is("/~user/a-b_c.d!$&'()*+,=:@", false, "/~user/a-b_c.d!$&'()*+,=:@", "");
}

/* Every spelling of a dot segment resolves, so a rule on /b is met by
 * /a/../b however it is written. */
static void
test_canon_dots(void **state)
{
	canon_is("/a/../b", false, "/b", "");
	canon_is("/a/./b", false, "/a/b", "");
	canon_is("/a/%2e%2e/b", false, "/b", "");
	canon_is("/a/%2E./b", false, "/b", "");
	canon_is("/a/.%2e/b", false, "/b", "");
	canon_is("/../../etc/passwd", false, "/etc/passwd", "");
	canon_is("/a/b/..", false, "/a/", "");
	canon_is("/a/b/.", false, "/a/b/", "");
	canon_is("/a/..", false, "/", "");
	canon_is("/..", false, "/", "");
	canon_is("/a/b/../../..", false, "/", "");
	canon_is("/a/.../b", false, "/a/.../b", ""); /* three dots are a name */
	canon_is("/a/..b/c", false, "/a/..b/c", "");
}

/* Servlet containers route "/admin;x/" as "/admin/" and "..;" as "..";
 * the parameters are removed, so both readings are the one decided. */
static void
test_canon_params(void **state)
{
	canon_is("/admin;jsessionid=1/secret", false, "/admin/secret", "");
	canon_is("/allowed/..;/admin", false, "/admin", "");
	canon_is("/a/;x/b", false, "/a/b", "");
	canon_is("/a/b;v=1", false, "/a/b", "");
	canon_is("/a/%3Bb", false, "/a/%3Bb", ""); /* an encoded ';' is data */
	canon_is("/a;x%2Fy/b", false, "/a/b", "");  /* removed, never forwarded */
}

static void
test_canon_escapes(void **state)
{
	canon_is("/%41%62c", false, "/Abc", "");    /* unreserved: decoded */
	canon_is("/a%20b", false, "/a%20b", "");    /* the rest: kept */
	canon_is("/a%c3%a9", false, "/a%C3%A9", ""); /* in upper case */
	canon_is("/%25", false, "/%25", "");
	canon_is("/%252e%252e/x", false, "/%252e%252e/x", ""); /* decoded once only */
	canon_is("/@scope%2fname", true, "/@scope%2Fname", "");
	canon_is("/a%5Cb", true, "/a%5Cb", "");
	canon_is("/a/b%2F.c", true, "/a/b%2F.c", "");
}

static void
test_canon_empty_segments(void **state)
{
	canon_is("//a//b//", false, "/a/b/", "");
	canon_is("///", false, "/", "");
	canon_is("/a//../b", false, "/b", "");
}

static void
test_refused(void **state)
{
	char big[INSPECT_TARGET_MAX + 2];

	refused("", 0, false, INSPECT_PATH_NOT_ORIGIN, 0);
	refused("http://x/", 9, false, INSPECT_PATH_NOT_ORIGIN, 0);
	refused("*", 1, false, INSPECT_PATH_NOT_ORIGIN, 0);
	refused("/a b", 4, false, INSPECT_PATH_CHAR, 2);
	refused("/a\\b", 4, false, INSPECT_PATH_CHAR, 2);
	refused("/a\x7f", 3, false, INSPECT_PATH_CHAR, 2);
	refused("/caf\xc3\xa9", 6, false, INSPECT_PATH_CHAR, 4);
	refused("/a\"b", 4, false, INSPECT_PATH_CHAR, 2);
	refused("/a{b}", 5, false, INSPECT_PATH_CHAR, 2);
	refused("/a|b", 4, false, INSPECT_PATH_CHAR, 2);
	refused("/a\0b", 4, false, INSPECT_PATH_CHAR, 2);
	refused("/a#frag", 7, false, INSPECT_PATH_FRAGMENT, 2);
	refused("/a?q#frag", 9, false, INSPECT_PATH_FRAGMENT, 4);
	refused("/a%", 3, false, INSPECT_PATH_ESCAPE, 2);
	refused("/a%4", 4, false, INSPECT_PATH_ESCAPE, 2);
	refused("/a%4/x", 6, false, INSPECT_PATH_ESCAPE, 2);
	refused("/a%zz", 5, false, INSPECT_PATH_ESCAPE, 2);
	refused("/a%00b", 6, false, INSPECT_PATH_NUL, 2);
	refused("/a%2Fb", 6, false, INSPECT_PATH_SLASH, 2);
	refused("/a%2fb", 6, false, INSPECT_PATH_SLASH, 2);
	refused("/a%5cb", 6, false, INSPECT_PATH_SLASH, 2);
	refused("/a;x%zz", 7, false, INSPECT_PATH_ESCAPE, 4); /* parameters are checked too */
	/* Kept encoded slashes must not hide dot or empty segments from a
	 * server that decodes them before it routes (nginx, Tomcat, IIS). */
	refused("/@scope%2F..%2F..%2Fadmin", 25, true, INSPECT_PATH_SLASH_DOTS, 12);
	refused("/a/%2e%2e%2fb", 13, true, INSPECT_PATH_SLASH_DOTS, 9);
	refused("/a/b%2F..", 9, true, INSPECT_PATH_SLASH_DOTS, 4);
	refused("/a/b%5C.%5Cc", 12, true, INSPECT_PATH_SLASH_DOTS, 8);
	refused("/a/%2Fb", 7, true, INSPECT_PATH_SLASH_DOTS, 3);
	refused("/a/b%2F", 7, true, INSPECT_PATH_SLASH_DOTS, 4);
	refused("/a;x y", 6, false, INSPECT_PATH_CHAR, 4);
	refused("/a?q=%", 6, false, INSPECT_PATH_ESCAPE, 5);
	refused("/a?q=%00", 8, false, INSPECT_PATH_NUL, 5);
	refused("/a?q= ", 6, false, INSPECT_PATH_CHAR, 5);
	memset(big, 'a', sizeof(big));
	big[0] = '/';
	refused(big, INSPECT_TARGET_MAX + 1, false, INSPECT_PATH_TOO_LONG, INSPECT_TARGET_MAX);
	canon_is("/?a=/b?c", false, "/", "a=/b?c");
}

/* A canonical path is its own canonical form. */
static void
test_idempotent(void **state)
{
	static const char *const in[] = {"/a/../b/./c//d/", "/x;p/%2e%2E/%41%c3%a9?q=%2f",
	                                 "/@s%2fn/..", "/.."};
	struct inspect_target again;

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
		assert_int_equal(inspect_path_canon(in[i], strlen(in[i]), true, &out, NULL),
		                 INSPECT_PATH_OK);
		assert_int_equal(inspect_path_canon(out.path, strlen(out.path), true, &again, NULL),
		                 INSPECT_PATH_OK);
		assert_string_equal(again.path, out.path);
	}
}

static void
match_is(const char *glob, const char *path, bool want)
{
	assert_null(inspect_glob_check(glob, NULL));
	if (inspect_glob_match(glob, path) != want)
		fail_msg("%s vs %s: %s, expected %s", glob, path, want ? "no match" : "match",
		         want ? "match" : "no match");
}

static void
test_glob_match(void **state)
{
	match_is("/**", "/", true);
	match_is("/**", "/a/b/c", true);
	match_is("/", "/", true);
	match_is("/", "/a", false);
	match_is("/org/**", "/org", true);
	match_is("/org/**", "/org/", true);
	match_is("/org/**", "/org/repo/info/refs", true);
	match_is("/org/**", "/orgx/repo", false);
	match_is("/org/**", "/other/org/x", false);
	match_is("/**/git-receive-pack", "/org/repo.git/git-receive-pack", true);
	match_is("/**/git-receive-pack", "/git-receive-pack", true);
	match_is("/**/git-receive-pack", "/org/repo/git-receive-pack/x", false);
	match_is("/*/repo", "/org/repo", true);
	match_is("/*/repo", "/a/b/repo", false);
	match_is("/*/repo", "/repo", false);
	match_is("/org/*", "/org/", false); /* '*' is a segment with a name */
	match_is("/org/", "/org/", true);
	match_is("/org/", "/org", false);
	match_is("/packages/**/*.whl", "/packages/ab/cd/x-1.0-py3-none-any.whl", true);
	match_is("/packages/**/*.whl", "/packages/ab/cd/x-1.0.tar.gz", false);
	match_is("/a*b*c", "/aXXbYYc", true);
	match_is("/a*b*c", "/aXXbYY", false);
	match_is("/**/a/**/b", "/x/a/y/z/b", true);
	match_is("/**/a/**/b", "/x/a/y/z/c", false);
	match_is("/@scope%2F*", "/@scope%2Fname", true);
	match_is("/api/v1/**", "/api/v1", true);
}

static void
glob_bad(const char *glob, const char *what, size_t want_at)
{
	size_t at = 99;
	const char *why = inspect_glob_check(glob, &at);

	if (why == NULL)
		fail_msg("accepted %s", glob);
	if (strstr(why, what) == NULL)
		fail_msg("%s: \"%s\" does not say %s", glob, why, what);
	assert_int_equal(at, want_at);
}

static void
test_glob_check(void **state)
{
	char big[INSPECT_GLOB_MAX + 2];

	glob_bad("org/**", "starts with '/'", 0);
	glob_bad("/a//b", "empty segment", 3);
	glob_bad("/a/../b", "'..'", 3);
	glob_bad("/./b", "'.'", 1);
	glob_bad("/a**", "whole segment", 2);
	glob_bad("/a;x", "';'", 2);
	glob_bad("/a?b", "query", 2);
	glob_bad("/a#b", "query or fragment", 2);
	glob_bad("/a b", "a byte no path may hold", 2);
	glob_bad("/a%2f", "lower case", 2);
	glob_bad("/a%4", "two hex digits", 2);
	glob_bad("/%41", "escaped letter", 1);
	glob_bad("/%00", "NUL", 1);
	glob_bad("/**/**/**/**/**", "four", 13);
	memset(big, 'a', sizeof(big));
	big[0] = '/';
	big[sizeof(big) - 1] = '\0';
	glob_bad(big, "longer", 0);
	assert_null(inspect_glob_check("/**/**/**/**", NULL));
	assert_null(inspect_glob_check("/a/", NULL));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_canon_plain),   cmocka_unit_test(test_canon_dots),
	        cmocka_unit_test(test_canon_params),  cmocka_unit_test(test_canon_escapes),
	        cmocka_unit_test(test_canon_empty_segments), cmocka_unit_test(test_refused),
	        cmocka_unit_test(test_idempotent),    cmocka_unit_test(test_glob_match),
	        cmocka_unit_test(test_glob_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
