/* The caller's descriptors (common/fdcaller.h): what is open when they are
 * noted is closed later, what the process opened after is not, and a
 * number the process closed and reused for another file is left alone.
 * One test: the list is the process's. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fdcaller.h"

static bool
is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void
test_noted_closed_others_kept(void **state)
{
	char path[] = "/tmp/airlock-fdcaller.XXXXXX";
	int file, pipefd[2], reused, mine, other;
	(void)state;

	/* What "the caller" left open: a file, a pipe's two ends, and one
	 * that will be closed and its number reused. */
	file = mkstemp(path);
	assert_true(file > 2);
	unlink(path);
	assert_int_equal(pipe(pipefd), 0);
	reused = open("/dev/null", O_RDONLY);
	assert_true(reused > 2);
	assert_int_equal(fdcaller_note(), 0);
	assert_true(fdcaller_count() >= 4); /* the harness may leave more */

	/* The process's own, opened after the note. */
	mine = open("/dev/zero", O_RDONLY);
	assert_true(mine > 2);
	/* reused: closed, and its number given to another file. */
	close(reused);
	other = open("/proc/self/status", O_RDONLY);
	assert_true(other >= 0);
	if (other != reused) {
		assert_int_equal(dup2(other, reused), reused);
		close(other);
	}

	assert_int_equal(fdcaller_close(), 0);
	assert_false(is_open(file));
	assert_false(is_open(pipefd[0]));
	assert_false(is_open(pipefd[1]));
	assert_true(is_open(mine));
	assert_true(is_open(reused)); /* another file now: not the caller's */
	assert_true(is_open(STDERR_FILENO));
	/* Twice is harmless: what is closed is skipped. */
	assert_int_equal(fdcaller_close(), 0);
	assert_true(is_open(mine));
	close(mine);
	close(reused);
}

static void
test_drop_stdio(void **state)
{
	int saved_in = dup(STDIN_FILENO), saved_out = dup(STDOUT_FILENO);
	char buf[1];
	(void)state;

	assert_true(saved_in >= 0 && saved_out >= 0);
	assert_int_equal(fdcaller_drop_stdio(), 0);
	assert_int_equal(read(STDIN_FILENO, buf, 1), 0); /* /dev/null: at its end */
	assert_int_equal(write(STDOUT_FILENO, "x", 1), 1);
	assert_int_equal(dup2(saved_in, STDIN_FILENO), STDIN_FILENO);
	assert_int_equal(dup2(saved_out, STDOUT_FILENO), STDOUT_FILENO);
	close(saved_in);
	close(saved_out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_noted_closed_others_kept),
	        cmocka_unit_test(test_drop_stdio),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
