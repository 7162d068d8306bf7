/* The descriptor reserve (common/fdres.h) under a real, lowered
 * RLIMIT_NOFILE: the reserve is held while everything else runs out,
 * drawing it lets the next open succeed, and descriptors freed go back to
 * it before anyone else gets them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fdres.h"

#define SPARE 64

static void
test_reserve_under_the_limit(void **state)
{
	struct rlimit saved, low;
	int fds[SPARE], n = 0, top;
	struct fdres *r;
	(void)state;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	top = dup(0);
	assert_true(top >= 0);
	close(top);
	/* Room for the reserve (8) and a few more, then nothing. */
	low = saved;
	low.rlim_cur = (rlim_t)top + 8 + 5;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	r = fdres_new(8);
	assert_non_null(r);
	assert_true(fdres_full(r));
	while (n < SPARE && (fds[n] = dup(0)) >= 0)
		n++;
	assert_int_equal(errno, EMFILE);
	assert_true(n >= 1 && n <= 5);
	/* Nothing free: the reserve cannot grow, and is still whole. */
	assert_true(fdres_refill(r));
	/* Drawn: the next opens succeed; the reserve is short. */
	assert_int_equal(fdres_draw(r, 2), 2);
	assert_false(fdres_full(r));
	fds[n] = dup(0);
	assert_true(fds[n] >= 0);
	n++;
	/* The other one drawn goes back; one is still missing. */
	assert_false(fdres_refill(r));
	assert_true(dup(0) < 0 && errno == EMFILE);
	/* Freed: back to the reserve first, not to the next open. */
	close(fds[--n]);
	assert_true(fdres_refill(r));
	assert_true(dup(0) < 0 && errno == EMFILE);
	/* Drawing more than it holds gives what it has. */
	assert_int_equal(fdres_draw(r, 100), 8);
	while (n > 0)
		close(fds[--n]);
	assert_true(fdres_refill(r));
	fdres_free(r);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	fdres_free(NULL);
	assert_true(fdres_full(NULL));
	assert_int_equal(fdres_draw(NULL, 1), 0);
}

static void
test_raise_and_size(void **state)
{
	struct rlimit saved, low;
	(void)state;

	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	if (saved.rlim_max < 512)
		skip();
	low = saved;
	low.rlim_cur = 256;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	/* An eighth of a small limit... */
	assert_int_equal(fdres_default_size(), 32);
	/* ...raised to the hard limit, and then 128. */
	assert_true(fdres_raise_limit() == saved.rlim_max);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &low), 0);
	assert_true(low.rlim_cur == saved.rlim_max);
	if (saved.rlim_max >= 8 * 128)
		assert_int_equal(fdres_default_size(), 128);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	        cmocka_unit_test(test_reserve_under_the_limit),
	        cmocka_unit_test(test_raise_and_size),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
