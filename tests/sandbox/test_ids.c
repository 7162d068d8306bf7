/* --ids (sandbox/ids.c): the mode's spelling, the /etc/subuid parser, the
 * maps built from a range, and the choice for root and for others from
 * files written here. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/ids.h"
#include "sandbox/opts.h"

static void
test_mode(void **state)
{
	enum sbx_ids_mode m = SBX_IDS_RANGE;

	(void)state;
	assert_int_equal(sbx_ids_mode_parse("one", &m), 0);
	assert_int_equal(m, SBX_IDS_ONE);
	assert_int_equal(sbx_ids_mode_parse("range", &m), 0);
	assert_int_equal(m, SBX_IDS_RANGE);
	assert_int_equal(sbx_ids_mode_parse("Range", &m), -1);
	assert_int_equal(sbx_ids_mode_parse("", &m), -1);
	assert_int_equal(sbx_ids_mode_parse("ranges", &m), -1);
}

static void
test_subid_find(void **state)
{
	const char *text = "# comment\n"
	                   "alice:100000:65536\n"
	                   "bob:x:65536\n"           /* malformed: skipped */
	                   "bob:200000:0\n"          /* no ids: skipped */
	                   "bob:300000:4294967296\n" /* too large: skipped */
	                   "1002:400000:1000\n"
	                   "bob:500000:65536\n"
	                   "carol:600000"; /* no count, no newline */
	uint32_t base = 7, count = 7;

	(void)state;
	assert_int_equal(sbx_subid_find(text, "alice", 1001, &base, &count), 1);
	assert_int_equal(base, 100000);
	assert_int_equal(count, 65536);
	assert_int_equal(sbx_subid_find(text, "bob", 1005, &base, &count), 1);
	assert_int_equal(base, 500000);
	/* By uid, when the name has none first. */
	assert_int_equal(sbx_subid_find(text, "dave", 1002, &base, &count), 1);
	assert_int_equal(base, 400000);
	assert_int_equal(count, 1000);
	/* A prefix of a name is not the name. */
	assert_int_equal(sbx_subid_find(text, "ali", 1, &base, &count), 0);
	assert_int_equal(sbx_subid_find(text, "carol", 1, &base, &count), 0);
	assert_int_equal(sbx_subid_find(text, NULL, 100, &base, &count), 0);
	assert_int_equal(sbx_subid_find("", "alice", 1, &base, &count), 0);
}

static void
expect_line(const struct sbx_idmap *m, size_t i, uint32_t in, uint32_t out, uint32_t n)
{
	assert_true(i < m->n);
	assert_int_equal(m->line[i].inside, in);
	assert_int_equal(m->line[i].outside, out);
	assert_int_equal(m->line[i].count, n);
}

static void
test_idmap_build(void **state)
{
	struct sbx_idmap m;

	(void)state;
	/* --root: 0 is the caller, 1.. the range. */
	assert_int_equal(sbx_idmap_build(&m, 0, 1001, 100000, 65536), 0);
	assert_int_equal(m.n, 2);
	expect_line(&m, 0, 0, 1001, 1);
	expect_line(&m, 1, 1, 100000, 65535);
	/* The caller's own uid inside, the range around it. */
	assert_int_equal(sbx_idmap_build(&m, 1001, 1001, 100000, 65536), 0);
	assert_int_equal(m.n, 3);
	expect_line(&m, 0, 0, 100000, 1001);
	expect_line(&m, 1, 1001, 1001, 1);
	expect_line(&m, 2, 1002, 101001, 64534);
	/* The last id of the range. */
	assert_int_equal(sbx_idmap_build(&m, 999, 5000, 100000, 1000), 0);
	assert_int_equal(m.n, 2);
	expect_line(&m, 0, 0, 100000, 999);
	expect_line(&m, 1, 999, 5000, 1);
	/* CMD's id above a small range. */
	assert_int_equal(sbx_idmap_build(&m, 1001, 1001, 100000, 1000), 0);
	assert_int_equal(m.n, 2);
	expect_line(&m, 0, 0, 100000, 1000);
	expect_line(&m, 1, 1001, 1001, 1);
	/* No overlap: every inside id once, every host id once. */
	assert_int_equal(sbx_idmap_build(&m, 0, 1001, 100000, 1), 0);
	assert_int_equal(m.n, 1);
	expect_line(&m, 0, 0, 1001, 1);
	/* Refused. */
	assert_int_equal(sbx_idmap_build(&m, 0, 1001, 100000, 0), -1);
	assert_int_equal(sbx_idmap_build(&m, 0, 1001, UINT32_MAX - 10, 65536), -1);
	assert_int_equal(sbx_idmap_build(&m, 0, 1001, 100000, 65537), -1);
}

static char dir[] = "/tmp/airlock-test-ids.XXXXXX";
static char subuid[PATH_MAX], subgid[PATH_MAX];

static void
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

static void
test_resolve(void **state)
{
	struct sbx_ids ids;
	char err[256];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(subuid, sizeof(subuid), "%s/subuid", dir);
	snprintf(subgid, sizeof(subgid), "%s/subgid", dir);
	write_text(subuid, "4242:100000:70000\n");
	/* subgid is keyed by the user too (shadow's newgidmap): not gid 4243. */
	write_text(subgid, "4243:900000:500\n4242:300000:500\n");

	/* One id: nothing to resolve. */
	assert_int_equal(sbx_ids_resolve(&ids, SBX_IDS_ONE, 4242, 4243, 4242, 4243, subuid, subgid,
	                                 err, sizeof(err)),
	                 0);
	assert_int_equal(ids.mode, SBX_IDS_ONE);
	/* Root: the host's own ids, whatever the files say. */
	assert_int_equal(
	        sbx_ids_resolve(&ids, SBX_IDS_RANGE, 0, 0, 0, 0, subuid, subgid, err, sizeof(err)),
	        0);
	assert_false(ids.helper);
	assert_int_equal(ids.uid.n, 1);
	expect_line(&ids.uid, 0, 0, 0, SBX_IDS_MAX_COUNT);
	expect_line(&ids.gid, 0, 0, 0, SBX_IDS_MAX_COUNT);
	/* Others: by uid (no passwd entry for 4242), through the helpers;
	 * counts capped at 65536. */
	assert_int_equal(sbx_ids_resolve(&ids, SBX_IDS_RANGE, 4242, 4243, 0, 0, subuid, subgid, err,
	                                 sizeof(err)),
	                 0);
	assert_true(ids.helper);
	expect_line(&ids.uid, 0, 0, 4242, 1);
	expect_line(&ids.uid, 1, 1, 100000, 65535);
	expect_line(&ids.gid, 0, 0, 4243, 1);
	expect_line(&ids.gid, 1, 1, 300000, 499);
	/* No entry: the file and the way out named. */
	write_text(subgid, "other:300000:500\n");
	assert_int_equal(sbx_ids_resolve(&ids, SBX_IDS_RANGE, 4242, 4243, 0, 0, subuid, subgid, err,
	                                 sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, subgid));
	assert_non_null(strstr(err, "has no entry"));
	assert_non_null(strstr(err, "--ids one"));
	/* A missing file is no entry either. */
	unlink(subgid);
	assert_int_equal(sbx_ids_resolve(&ids, SBX_IDS_RANGE, 4242, 4243, 0, 0, subuid, subgid, err,
	                                 sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "has no entry"));
	unlink(subuid);
	rmdir(dir);
}

/* The flags of airlock run. */
static void
test_opts(void **state)
{
	struct sbx_opts o;
	char err[256];
	char *a1[] = {"run", "-p", "none", "--ids", "range", "--overlay", "--", "true", NULL};
	char *a2[] = {"run", "-p", "none", "--overlay-keep", "/x/y", "--", "true", NULL};
	char *a3[] = {"run", "-p", "none", "--ids", "many", "--", "true", NULL};
	char *a4[] = {"run", "-p", "none", "--overlay-keep", "", "--", "true", NULL};
	char *a5[] = {"run", "-p", "none", "--", "true", NULL};

	(void)state;
	memset(&o, 0, sizeof(o));
	assert_int_equal(sbx_opts_parse(&o, 8, a1, err, sizeof(err)), 0);
	assert_int_equal(o.ids, SBX_IDS_RANGE);
	assert_true(o.overlay);
	assert_null(o.overlay_keep);
	memset(&o, 0, sizeof(o));
	assert_int_equal(sbx_opts_parse(&o, 7, a2, err, sizeof(err)), 0);
	assert_true(o.overlay);
	assert_string_equal(o.overlay_keep, "/x/y");
	assert_int_equal(o.ids, SBX_IDS_ONE);
	memset(&o, 0, sizeof(o));
	assert_int_equal(sbx_opts_parse(&o, 7, a3, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--ids 'many'"));
	memset(&o, 0, sizeof(o));
	assert_int_equal(sbx_opts_parse(&o, 7, a4, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--overlay-keep"));
	memset(&o, 0, sizeof(o));
	assert_int_equal(sbx_opts_parse(&o, 5, a5, err, sizeof(err)), 0);
	assert_false(o.overlay);
	assert_int_equal(o.ids, SBX_IDS_ONE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_mode),        cmocka_unit_test(test_subid_find),
	        cmocka_unit_test(test_idmap_build), cmocka_unit_test(test_resolve),
	        cmocka_unit_test(test_opts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
