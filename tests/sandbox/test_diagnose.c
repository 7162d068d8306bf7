/* sbx_diagnose_userns and sbx_diagnose_proc (sandbox/diagnose.c): each
 * cause of a refused user namespace or /proc named in its own line, on a
 * scratch directory standing in for the machine's /proc. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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

static char R[PATH_MAX];     /* the stand-in root */
static char OTHER[PATH_MAX]; /* another directory: pid 1's root in a chroot */
static char err[1024];

static void
put(const char *rel, const char *text)
{
	char p[PATH_MAX + 64];
	char dir[PATH_MAX + 64];
	char *slash;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", R, rel);
	snprintf(dir, sizeof(dir), "%s", p);
	for (slash = strchr(dir + strlen(R) + 1, '/'); slash != NULL;
	     slash = strchr(slash + 1, '/')) {
		*slash = '\0';
		mkdir(dir, 0755);
		*slash = '/';
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* pid 1's root: R itself (no chroot) or OTHER (a chroot). */
static void
init_root(const char *target)
{
	char p[PATH_MAX + 64];

	snprintf(p, sizeof(p), "%s/proc/1", R);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/proc/1/root", R);
	unlink(p);
	assert_int_equal(symlink(target, p), 0);
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(p);
}

/* A machine that allows everything: the defaults of Debian 12. */
static int
machine(void **state)
{
	(void)state;
	snprintf(R, sizeof(R), "/tmp/airlock-diag-XXXXXX");
	snprintf(OTHER, sizeof(OTHER), "/tmp/airlock-diag-other-XXXXXX");
	if (mkdtemp(R) == NULL || mkdtemp(OTHER) == NULL)
		return -1;
	put("proc/sys/user/max_user_namespaces", "63429\n");
	put("proc/sys/kernel/unprivileged_userns_clone", "1\n");
	put("proc/self/status",
	    "Name:\tairlock\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n");
	put("proc/self/mountinfo", "22 1 0:21 / /proc rw,nosuid - proc proc rw\n");
	init_root(R);
	return 0;
}

static int
machine_free(void **state)
{
	(void)state;
	nftw(R, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	nftw(OTHER, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

static void
diagnose(int e)
{
	sbx_diagnose_userns(R, e, err, sizeof(err));
	assert_null(strchr(err, '\n'));
	assert_non_null(strstr(err, "cannot create the sandbox's namespaces: clone: "));
}

static void
max_user_namespaces_zero(void **state)
{
	(void)state;
	put("proc/sys/user/max_user_namespaces", "0\n");
	diagnose(EPERM);
	assert_non_null(strstr(err, "sysctl user.max_user_namespaces is 0"));
}

static void
unprivileged_userns_clone_zero(void **state)
{
	(void)state;
	put("proc/sys/kernel/unprivileged_userns_clone", "0\n");
	diagnose(EPERM);
	assert_non_null(strstr(err, "sysctl kernel.unprivileged_userns_clone is 0"));
}

static void
apparmor_restricts(void **state)
{
	(void)state;
	put("proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1\n");
	diagnose(EACCES);
	assert_non_null(strstr(err, "sysctl kernel.apparmor_restrict_unprivileged_userns is 1"));
	/* Set to 0 it is not the cause. */
	put("proc/sys/kernel/apparmor_restrict_unprivileged_userns", "0\n");
	diagnose(EACCES);
	assert_null(strstr(err, "apparmor_restrict"));
}

static void
chroot_named(void **state)
{
	(void)state;
	init_root(OTHER);
	diagnose(EPERM);
	assert_non_null(strstr(err, "in a chroot"));
}

static void
seccomp_named(void **state)
{
	(void)state;
	put("proc/self/status", "Name:\tairlock\nSeccomp:\t2\nSeccomp_filters:\t1\n");
	diagnose(EPERM);
	assert_non_null(strstr(err, "Seccomp: 2 in /proc/self/status"));
	assert_non_null(strstr(err, "already sandboxed or a container runtime's seccomp profile"));
	assert_non_null(strstr(err, "--security-opt seccomp=airlock.json"));
	assert_non_null(strstr(err, "seccompProfile"));
}

/* A sysctl that forbids is named before a seccomp filter that may not. */
static void
sysctl_before_seccomp(void **state)
{
	(void)state;
	put("proc/self/status", "Seccomp:\t2\n");
	put("proc/sys/user/max_user_namespaces", "0\n");
	diagnose(EPERM);
	assert_non_null(strstr(err, "user.max_user_namespaces is 0"));
	assert_null(strstr(err, "seccomp"));
}

static void
nothing_seen(void **state)
{
	(void)state;
	diagnose(EPERM);
	assert_non_null(strstr(err, "for no reason airlock can see"));
}

static void
limit_reached(void **state)
{
	(void)state;
	put("proc/sys/user/max_user_namespaces", "4\n");
	diagnose(ENOSPC);
	assert_non_null(strstr(err, "user.max_user_namespaces is 4, raise it"));
	diagnose(EINVAL);
	assert_string_equal(err, "cannot create the sandbox's namespaces: clone: Invalid argument");
}

static void
proc_masked(void **state)
{
	(void)state;
	err[0] = '\0';
	assert_false(sbx_diagnose_proc(R, EPERM, err, sizeof(err)));
	assert_string_equal(err, "");
	/* As Docker masks it: /dev/null over /proc/kcore, a tmpfs over /proc/acpi. */
	put("proc/self/mountinfo", "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
	                           "23 22 0:5 /null /proc/kcore rw,nosuid - devtmpfs udev rw\n"
	                           "24 22 0:30 / /proc/acpi ro - tmpfs tmpfs ro\n");
	assert_false(sbx_diagnose_proc(R, ENOENT, err, sizeof(err)));
	assert_true(sbx_diagnose_proc(R, EPERM, err, sizeof(err)));
	assert_non_null(strstr(err, "--security-opt systempaths=unconfined"));
	assert_non_null(strstr(err, "procMount: Unmasked"));
	assert_null(strchr(err, '\n'));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test_setup_teardown(max_user_namespaces_zero, machine, machine_free),
	        cmocka_unit_test_setup_teardown(unprivileged_userns_clone_zero, machine,
	                                        machine_free),
	        cmocka_unit_test_setup_teardown(apparmor_restricts, machine, machine_free),
	        cmocka_unit_test_setup_teardown(chroot_named, machine, machine_free),
	        cmocka_unit_test_setup_teardown(seccomp_named, machine, machine_free),
	        cmocka_unit_test_setup_teardown(sysctl_before_seccomp, machine, machine_free),
	        cmocka_unit_test_setup_teardown(nothing_seen, machine, machine_free),
	        cmocka_unit_test_setup_teardown(limit_reached, machine, machine_free),
	        cmocka_unit_test_setup_teardown(proc_masked, machine, machine_free),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
