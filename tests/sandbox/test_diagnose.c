/* sandbox/diagnose.c: one line per cause, the setting and its value named,
 * the host's settings before a seccomp filter before a chroot. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sandbox/diagnose.h"

static struct sbx_diag_facts
fine(void)
{
	struct sbx_diag_facts f;

	memset(&f, 0, sizeof(f));
	f.max_user_namespaces = 1000;
	f.unprivileged_userns_clone = -1;
	f.apparmor_restrict = -1;
	f.seccomp = 0;
	return f;
}

static void
has(const char *s, const char *part)
{
	if (strstr(s, part) == NULL)
		fail_msg("'%s' not in '%s'", part, s);
	assert_null(strchr(s, '\n'));
}

static void
hasnt(const char *s, const char *part)
{
	if (strstr(s, part) != NULL)
		fail_msg("'%s' in '%s'", part, s);
}

static void
test_sysctl(void **state)
{
	struct sbx_diag_facts f = fine();
	char out[512];

	(void)state;
	f.max_user_namespaces = 0;
	f.seccomp = 2; /* the sysctl holds whatever else is true */
	sbx_diag_userns(EPERM, &f, out, sizeof(out));
	has(out, "user.max_user_namespaces is 0");
	hasnt(out, "seccomp");

	f = fine();
	f.unprivileged_userns_clone = 0;
	sbx_diag_userns(EPERM, &f, out, sizeof(out));
	has(out, "kernel.unprivileged_userns_clone is 0 (must be 1)");

	f = fine();
	f.apparmor_restrict = 1;
	sbx_diag_userns(EACCES, &f, out, sizeof(out));
	has(out, "kernel.apparmor_restrict_unprivileged_userns is 1");
	has(out, "AppArmor profile");
	hasnt(out, "seccomp");
}

static void
test_seccomp(void **state)
{
	struct sbx_diag_facts f = fine();
	char out[512];

	(void)state;
	f.seccomp = 2;
	f.apparmor_restrict = 1; /* a filter refuses before AppArmor is asked */
	f.chrooted = true;
	sbx_diag_userns(EPERM, &f, out, sizeof(out));
	has(out, "clone: Operation not permitted; a seccomp filter refuses it (Seccomp: 2");
	has(out, "already sandboxed");
	has(out, "--security-opt seccomp=");
	has(out, "Localhost");
	hasnt(out, "sysctl");
	hasnt(out, "chroot");
}

static void
test_chroot(void **state)
{
	struct sbx_diag_facts f = fine();
	char out[512];

	(void)state;
	f.chrooted = true;
	sbx_diag_userns(EPERM, &f, out, sizeof(out));
	has(out, "chroot");
	hasnt(out, "sysctl");
	hasnt(out, "seccomp");
}

static void
test_other(void **state)
{
	struct sbx_diag_facts f = fine();
	char out[512];

	(void)state;
	sbx_diag_userns(EPERM, &f, out, sizeof(out));
	has(out, "check sysctl user.max_user_namespaces");
	sbx_diag_userns(ENOSPC, &f, out, sizeof(out));
	has(out, "limit is reached");
	has(out, "(now 1000;");
	sbx_diag_userns(ENOMEM, &f, out, sizeof(out));
	has(out, "clone: Cannot allocate memory");
	hasnt(out, ";");
	/* Truncated, never overrun. */
	f.seccomp = 2;
	sbx_diag_userns(EPERM, &f, out, 16);
	assert_int_equal(strlen(out), 15);
}

static void
test_proc(void **state)
{
	struct sbx_diag_facts f = fine();
	char out[512];

	(void)state;
	f.proc_masked = true;
	memcpy(f.proc_mask, "/proc/kcore", sizeof("/proc/kcore"));
	sbx_diag_proc(EPERM, &f, out, sizeof(out));
	has(out, "; /proc is masked here (/proc/kcore is covered");
	has(out, "systempaths=unconfined");
	has(out, "procMount: Unmasked");
	sbx_diag_proc(ENOMEM, &f, out, sizeof(out));
	assert_string_equal(out, "");
	f.proc_masked = false;
	sbx_diag_proc(EPERM, &f, out, sizeof(out));
	has(out, "docs/deploy.md");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_sysctl), cmocka_unit_test(test_seccomp),
	        cmocka_unit_test(test_chroot), cmocka_unit_test(test_other),
	        cmocka_unit_test(test_proc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
