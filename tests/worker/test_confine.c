/* worker_confine (worker/confine.h) in a forked child, as the worker
 * applies it, with the filter of this build: in a test build a call the
 * filter lacks names itself on stderr and ends the process; a call through
 * another architecture's ABI (i386's int 0x80, x32's numbers) kills it;
 * what the worker needs still works. Needs root or user namespaces. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "worker/confine.h"

enum what { ALLOWED, REFUSED, I386, X32 };

/* Runs in the child, confined: does what, then exits 0. */
static void
child(enum what what)
{
	struct timespec ts;

	switch (what) {
	case ALLOWED:
		if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0 || getpid() <= 0 ||
		    write(STDOUT_FILENO, "", 0) != 0)
			_exit(3);
		break;
	case REFUSED:
		(void)syscall(SYS_getppid); /* the worker has no use for it */
		break;
	case I386:
#if defined(__x86_64__)
	{
		long rc = 20; /* getpid on i386 */

		__asm__ volatile("int $0x80" : "+a"(rc) : : "memory");
	}
#endif
		break;
	case X32:
#if defined(__x86_64__)
		(void)syscall(0x40000000 | SYS_getpid);
#endif
		break;
	}
	_exit(0);
}

/* Fork, confine, do what; the child's wait status and its stderr. */
static int
run(enum what what, char *err, size_t errlen)
{
	struct worker_confined wc;
	int p[2], ws = 0;
	ssize_t n;
	size_t len = 0;
	pid_t pid;
	char why[256];

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		dup2(p[1], STDERR_FILENO);
		if (worker_confine(0, &wc, why, sizeof(why)) < 0) {
			fprintf(stderr, "confine: %s\n", why);
			_exit(2);
		}
		child(what);
	}
	close(p[1]);
	while (len + 1 < errlen && (n = read(p[0], err + len, errlen - 1 - len)) > 0)
		len += (size_t)n;
	err[len] = '\0';
	close(p[0]);
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	return ws;
}

static void
test_allowed(void **state)
{
	char err[512];
	int ws = run(ALLOWED, err, sizeof(err));

	if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
		fail_msg("confined child: status %#x, stderr: %s", ws, err);
}

static void
test_refused_is_named(void **state)
{
	char err[512];
	int ws = run(REFUSED, err, sizeof(err));

#ifdef WORKER_SECCOMP_TRAP
	assert_true(WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 128 + SIGSYS);
	assert_non_null(strstr(err, "seccomp refused system call getppid ("));
#else
	/* An installed build: ENOSYS, quietly. */
	assert_true(WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 0);
#endif
}

static void
test_other_abis_killed(void **state)
{
#if defined(__x86_64__)
	char err[512];
	int ws = run(I386, err, sizeof(err));

	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGSYS)
		fail_msg("i386 call: status %#x, stderr: %s", ws, err);
	ws = run(X32, err, sizeof(err));
	if (!WIFSIGNALED(ws) || WTERMSIG(ws) != SIGSYS)
		fail_msg("x32 call: status %#x, stderr: %s", ws, err);
#else
	skip();
#endif
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_allowed),
	        cmocka_unit_test(test_refused_is_named),
	        cmocka_unit_test(test_other_abis_killed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
