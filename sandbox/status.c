#include "sandbox/status.h"

#include <errno.h>
#include <sys/wait.h>

int
sbx_exit_status(int wstatus, int *sig)
{
	if (sig != NULL)
		*sig = 0;
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus)) {
		if (sig != NULL)
			*sig = WTERMSIG(wstatus);
		return 128 + WTERMSIG(wstatus);
	}
	return SBX_EXIT_FAILURE;
}

int
sbx_exec_errno_status(int err)
{
	/* The shell's convention, so scripts that test for 127 keep working. */
	if (err == ENOENT || err == ENOTDIR)
		return SBX_EXIT_NOTFOUND;
	return SBX_EXIT_NOEXEC;
}
