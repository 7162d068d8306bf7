/* LD_PRELOAD shim for tests/sandbox/workerfail.sh: the FAILFORK_AT-th
 * fork() of a process fails with EAGAIN, as at a process limit. The
 * supervisor forks the logger, then the worker, then (after the go) the
 * broker: FAILFORK_AT=3 makes the broker's fork fail. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

pid_t
fork(void)
{
	static int n;
	pid_t (*real)(void) = (pid_t(*)(void))dlsym(RTLD_NEXT, "fork");
	const char *at = getenv("FAILFORK_AT");

	if (at != NULL && ++n == strtol(at, NULL, 10)) {
		errno = EAGAIN;
		return -1;
	}
	return real();
}
