/* sbx_plan_keep (sandbox/protect.c): which mounts keep a path out of CMD's
 * reach, on a real tree in a scratch directory and a view given as
 * layers: the workdir at W, read-only and private places around it. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/internal.h"

static char T[PATH_MAX];     /* the scratch tree, resolved */
static char W[PATH_MAX + 8]; /* T/w: the workdir */
static char P[PATH_MAX + 8]; /* T/p: a private place (a hidden home) */
static struct sbx_plan plan;

static const char *
at(const char *rel)
{
	static char buf[4][PATH_MAX + 64];
	static int next;
	char *b = buf[next++ % 4];

	snprintf(b, sizeof(buf[0]), "%s/%s", T, rel);
	return b;
}

static void
mk(const char *rel, bool dir)
{
	if (dir) {
		assert_int_equal(mkdir(at(rel), 0755), 0);
	} else {
		FILE *f = fopen(at(rel), "w");
		assert_non_null(f);
		fclose(f);
	}
}

static int
setup(void **state)
{
	char tmpl[] = "/tmp/airlock-protect-test.XXXXXX";

	(void)state;
	if (mkdtemp(tmpl) == NULL || realpath(tmpl, T) == NULL)
		return -1;
	snprintf(W, sizeof(W), "%s/w", T);
	snprintf(P, sizeof(P), "%s/p", T);
	mk("w", true);
	mk("w/a", true);
	mk("w/a/b", true);
	mk("w/a/b/log", false);
	mk("w/a/b/pol.yaml", false);
	mk("w/presets", true);
	mk("w/presets/x.yaml", false);
	mk("ro", true);
	mk("ro/pol.yaml", false);
	mk("p", true);
	mk("p/w2", true);
	mk("p/w2/log", false);
	if (symlink("a/b", at("w/l")) < 0 ||
	    symlink(at("w/a/b/pol.yaml"), at("ro/link.yaml")) < 0 ||
	    symlink(at("w/a/b/log"), at("p/log-link")) < 0 ||
	    symlink("/proc/self/fd/0", at("p/fd")) < 0)
		return -1;
	return 0;
}

static int
teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", T);
	return system(cmd) == 0 ? 0 : -1;
}

/* The view: / read-only, the sandbox's own /dev and /proc, T/p private,
 * the workdir T/w. */
static int
view(void **state)
{
	(void)state;
	sbx_plan_init(&plan);
	assert_int_equal(sbx_plan_layer(&plan, "/", SBX_VIEW_HOST_RO, false, "/"), 0);
	assert_int_equal(sbx_plan_layer(&plan, "/dev", SBX_VIEW_PRIVATE, false, "/dev"), 0);
	assert_int_equal(sbx_plan_layer(&plan, "/proc", SBX_VIEW_PRIVATE, false, "/proc"), 0);
	assert_int_equal(sbx_plan_layer(&plan, P, SBX_VIEW_PRIVATE, false, "hidden directory"), 0);
	assert_int_equal(sbx_plan_layer(&plan, W, SBX_VIEW_HOST_RW, false, "workdir"), 0);
	return 0;
}

static int
view_free(void **state)
{
	(void)state;
	sbx_plan_free(&plan);
	return 0;
}

/* Keep path as how; the planned mounts must be exactly want ("pin PATH",
 * "read-only PATH", "mask PATH", paths relative to T), NULL-terminated. */
static void
expect_ops(enum sbx_keep_how how, const char *path, const char *const *want)
{
	static const char *const names[] = {
	        [SBX_KEEP_PIN] = "pin", [SBX_KEEP_RDONLY] = "read-only", [SBX_KEEP_MASK] = "mask"};
	struct sbx_keep k = {how, path, "test path"};
	struct sbx_found f;
	char err[512] = "", got[PATH_MAX + 32];
	size_t before = plan.n_ops, n = 0;

	if (sbx_plan_keep(&plan, &k, &f, err, sizeof(err)) < 0)
		fail_msg("%s: refused: %s", path, err);
	for (; want[n] != NULL; n++) {
		if (before + n >= plan.n_ops)
			fail_msg("%s: %zu mounts, expected more (next: %s)", path,
			         plan.n_ops - before, want[n]);
		snprintf(got, sizeof(got), "%s %s", names[plan.op[before + n]],
		         plan.op_path[before + n] + strlen(T) + 1);
		assert_string_equal(got, want[n]);
	}
	if (plan.n_ops != before + n)
		fail_msg("%s: %zu mounts, expected %zu (first extra: %s)", path,
		         plan.n_ops - before, n, plan.op_path[before + n]);
}

static void
expect_refused(enum sbx_keep_how how, const char *path, const char *reason)
{
	struct sbx_keep k = {how, path, "test path"};
	struct sbx_found f;
	char err[512] = "";

	assert_int_equal(sbx_plan_keep(&plan, &k, &f, err, sizeof(err)), -1);
	if (strstr(err, reason) == NULL)
		fail_msg("%s: reason '%s' lacks '%s'", path, err, reason);
}

#define OPS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NO_OPS   ((const char *const[]){NULL})

/* Every directory between the workdir and the log pinned, the log masked;
 * a second file there needs its own cover only. */
static void
log_in_subdir(void **state)
{
	(void)state;
	expect_ops(SBX_KEEP_HIDE, at("w/a/b/log"), OPS("pin w/a", "pin w/a/b", "mask w/a/b/log"));
	expect_ops(SBX_KEEP_READ, at("w/a/b/pol.yaml"), OPS("read-only w/a/b/pol.yaml"));
	/* Kept already: nothing more. */
	expect_ops(SBX_KEEP_HIDE, at("w/a/b/log"), NO_OPS);
	expect_ops(SBX_KEEP_READ, at("w/a/b/pol.yaml"), NO_OPS);
}

/* Outside every writable place nothing is needed to read; a file airlock
 * writes is masked wherever CMD could see it, and left alone where it
 * cannot (a private place). */
static void
outside(void **state)
{
	(void)state;
	expect_ops(SBX_KEEP_READ, at("ro/pol.yaml"), NO_OPS);
	expect_ops(SBX_KEEP_HIDE, at("ro/pol.yaml"), OPS("mask ro/pol.yaml"));
	expect_ops(SBX_KEEP_HIDE, at("p/w2/log"), NO_OPS);
	expect_ops(SBX_KEEP_READ, at("p/missing/x"), NO_OPS);
	expect_ops(SBX_KEEP_READ, "/dev/null", NO_OPS);
}

/* A symlink on the way is pinned where CMD could replace it, and followed:
 * also from a read-only place into the workdir. */
static void
symlinks(void **state)
{
	(void)state;
	expect_ops(SBX_KEEP_READ, at("w/l/pol.yaml"),
	           OPS("pin w/l", "pin w/a", "pin w/a/b", "read-only w/a/b/pol.yaml"));
	expect_ops(SBX_KEEP_READ, at("ro/link.yaml"), NO_OPS);
}

static void
symlinks_from_outside(void **state)
{
	(void)state;
	expect_ops(SBX_KEEP_READ, at("ro/link.yaml"),
	           OPS("pin w/a", "pin w/a/b", "read-only w/a/b/pol.yaml"));
}

/* ... and from a place CMD cannot see at all; magic links of /proc
 * resolve to what they stand for, or to nothing CMD can see. */
static void
symlinks_from_private(void **state)
{
	(void)state;
	expect_ops(SBX_KEEP_HIDE, at("p/log-link"), OPS("pin w/a", "pin w/a/b", "mask w/a/b/log"));
	expect_ops(SBX_KEEP_HIDE, at("p/fd"), NO_OPS);
	expect_ops(SBX_KEEP_HIDE, "/dev/stdin", NO_OPS);
}

/* ".", ".." and relative paths resolve as the kernel would. */
static void
dots(void **state)
{
	char cwd[PATH_MAX];

	(void)state;
	assert_non_null(getcwd(cwd, sizeof(cwd)));
	assert_int_equal(chdir(W), 0);
	expect_ops(SBX_KEEP_HIDE, "./a/../a//b/./log",
	           OPS("pin w/a", "pin w/a/b", "mask w/a/b/log"));
	assert_int_equal(chdir(cwd), 0);
}

/* A read-only directory covers what is in it. */
static void
read_only_dir(void **state)
{
	(void)state;
	expect_ops(SBX_KEEP_READ, at("w/presets"), OPS("read-only w/presets"));
	expect_ops(SBX_KEEP_READ, at("w/presets/x.yaml"), NO_OPS);
}

/* What cannot be kept: a directory that is (or holds) the workdir, a path
 * CMD could create. */
static void
refusals(void **state)
{
	(void)state;
	expect_refused(SBX_KEEP_HIDE, W, "is the workdir");
	expect_refused(SBX_KEEP_READ, T, "holds the workdir");
	expect_refused(SBX_KEEP_READ, at("w/nope/x.yaml"), "does not exist, and CMD could make it");
	expect_refused(SBX_KEEP_READ, at("w/a/b/log/x"), "cannot be reached (Not a directory)");
}

/* A workdir inside a hidden place: the walk goes on through the private
 * part to the host's files beneath. */
static void
workdir_in_private(void **state)
{
	static char w2[PATH_MAX + 8]; /* the plan borrows it */

	(void)state;
	snprintf(w2, sizeof(w2), "%s/p/w2", T);
	assert_int_equal(sbx_plan_layer(&plan, w2, SBX_VIEW_HOST_RW, false, "workdir"), 0);
	expect_ops(SBX_KEEP_HIDE, at("p/w2/log"), OPS("mask p/w2/log"));
	expect_ops(SBX_KEEP_READ, at("p/missing/x"), NO_OPS);
}

/* More than SBX_MAX_KEEP_MOUNTS mounts: refused. */
static void
budget(void **state)
{
	char rel[PATH_MAX] = "w";
	size_t len = 1;

	(void)state;
	for (int i = 0; i < SBX_MAX_KEEP_MOUNTS + 1; i++) {
		len += (size_t)snprintf(rel + len, sizeof(rel) - len, "/d");
		mk(rel, true);
	}
	expect_refused(SBX_KEEP_READ, at(rel), "more than 64 mounts");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(log_in_subdir, view, view_free),
	        cmocka_unit_test_setup_teardown(outside, view, view_free),
	        cmocka_unit_test_setup_teardown(symlinks, view, view_free),
	        cmocka_unit_test_setup_teardown(symlinks_from_outside, view, view_free),
	        cmocka_unit_test_setup_teardown(symlinks_from_private, view, view_free),
	        cmocka_unit_test_setup_teardown(dots, view, view_free),
	        cmocka_unit_test_setup_teardown(read_only_dir, view, view_free),
	        cmocka_unit_test_setup_teardown(refusals, view, view_free),
	        cmocka_unit_test_setup_teardown(workdir_in_private, view, view_free),
	        cmocka_unit_test_setup_teardown(budget, view, view_free),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
