/* Descriptor limit and reserve (fdres.h). */
#include "common/fdres.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"

#define FDRES_DEFAULT 128

struct fdres {
	unsigned r_want, r_held;
	int r_fds[]; /* r_fds[0 .. r_held) are open */
};

rlim_t
fdres_raise_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	if (rl.rlim_cur < rl.rlim_max) {
		rlim_t was = rl.rlim_cur;

		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			/* A hard limit above the kernel's nr_open: keep what
			 * we have rather than fail. */
			log_debug("RLIMIT_NOFILE: cannot raise %llu to %llu",
			          (unsigned long long)was, (unsigned long long)rl.rlim_max);
			rl.rlim_cur = was;
		}
	}
	return rl.rlim_cur;
}

unsigned
fdres_default_size(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur / 8 >= FDRES_DEFAULT)
		return FDRES_DEFAULT;
	return (unsigned)(rl.rlim_cur / 8);
}

/* One more placeholder: a copy of one held (one open file for all of
 * them), or a fresh eventfd when none is. */
static int
fdres_take_one(struct fdres *r)
{
	if (r->r_held > 0)
		return fcntl(r->r_fds[0], F_DUPFD_CLOEXEC, 0);
	return eventfd(0, EFD_CLOEXEC);
}

struct fdres *
fdres_new(unsigned n)
{
	struct fdres *r = calloc(1, sizeof(*r) + n * sizeof(r->r_fds[0]));

	if (r == NULL)
		return NULL;
	r->r_want = n;
	if (!fdres_refill(r))
		log_warnx("descriptor reserve: only %u of %u held", r->r_held, n);
	return r;
}

void
fdres_free(struct fdres *r)
{
	if (r == NULL)
		return;
	while (r->r_held > 0)
		close(r->r_fds[--r->r_held]);
	free(r);
}

unsigned
fdres_draw(struct fdres *r, unsigned n)
{
	unsigned drawn = 0;

	if (r == NULL)
		return 0;
	while (drawn < n && r->r_held > 0) {
		close(r->r_fds[--r->r_held]);
		drawn++;
	}
	return drawn;
}

bool
fdres_refill(struct fdres *r)
{
	int saved = errno;

	if (r == NULL)
		return true;
	while (r->r_held < r->r_want) {
		int fd = fdres_take_one(r);

		if (fd < 0)
			break;
		r->r_fds[r->r_held++] = fd;
	}
	errno = saved;
	return r->r_held == r->r_want;
}

bool
fdres_full(const struct fdres *r)
{
	return r == NULL || r->r_held == r->r_want;
}
